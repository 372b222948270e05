/*
 * evalppl: held-out loss, perplexity and bits per byte of a checkpoint (or of every
 * checkpoint of a run, for a curve over training), overall, per source and per
 * document length, each with a bootstrap interval; the gap to the corpus's entropy
 * floor when it is known; fixed-seed samples; a memorization probe.
 *
 *	evalppl run/ckpt/step-00001000                  the val split of its dataset
 *	evalppl --text notes.txt --text web.jsonl run/  every checkpoint, raw text
 *	evalppl --samples 2 --prompt 'Once upon' --memorization run/ckpt/step-00001000
 *
 * The scoring (rolling windows over whole documents), the figures and their
 * bootstrap, the gathering of a split's documents and the memorization probe are in
 * lib/model/evaluate.c; the sampler with its key/value cache in lib/model/generate.c. This file
 * finds the checkpoint's tokenizer and data, reads the documents and their byte and
 * word counts, and reports. stdout: JSONL (eval-config, ppl, floor, sample,
 * memorization records per checkpoint, a summary last); stderr: human messages.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "model/evaluate.h"
#include "data/gencorpus.h"
#include "model/generate.h"
#include "core/json.h"
#include "model/model.h"
#include "progress.h"
#include "data/tokenizer.h"
#include "data/tokstream.h"
#include "tool.h"
#include "ckpt/trainstate.h"
#include "core/util.h"

enum {
	OPT_DATA = OPT_TOOL_BASE,
	OPT_SPLIT,
	OPT_TEXT,
	OPT_MAX_DOCS,
	OPT_MAX_TOKENS,
	OPT_CONTEXT,
	OPT_STRIDE,
	OPT_BUCKETS,
	OPT_BOOTSTRAP,
	OPT_LEVEL,
	OPT_SEED,
	OPT_FLOOR_BPB,
	OPT_FLOOR_FIELD,
	OPT_SAMPLES,
	OPT_PROMPT,
	OPT_SAMPLE_TOKENS,
	OPT_TEMPERATURE,
	OPT_TOP_K,
	OPT_MEMORIZATION,
	OPT_MEM_DOCS,
	OPT_PREFIX,
	OPT_CONTINUATION,
	OPT_LATEST,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "data", required_argument, NULL, OPT_DATA },
	{ "split", required_argument, NULL, OPT_SPLIT },
	{ "text", required_argument, NULL, OPT_TEXT },
	{ "tokenizer", required_argument, NULL, 't' },
	{ "input-format", required_argument, NULL, OPT_INPUT_FORMAT },
	{ "txt-docs", required_argument, NULL, OPT_TXT_DOCS },
	{ "doc-sep", required_argument, NULL, OPT_DOC_SEP },
	{ "text-field", required_argument, NULL, OPT_TEXT_FIELD },
	{ "keep-empty", no_argument, NULL, OPT_KEEP_EMPTY },
	{ "max-docs", required_argument, NULL, OPT_MAX_DOCS },
	{ "max-tokens", required_argument, NULL, OPT_MAX_TOKENS },
	{ "context", required_argument, NULL, OPT_CONTEXT },
	{ "stride", required_argument, NULL, OPT_STRIDE },
	{ "batch", required_argument, NULL, 'b' },
	{ "buckets", required_argument, NULL, OPT_BUCKETS },
	{ "bootstrap", required_argument, NULL, OPT_BOOTSTRAP },
	{ "level", required_argument, NULL, OPT_LEVEL },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "floor-bpb", required_argument, NULL, OPT_FLOOR_BPB },
	{ "floor-field", required_argument, NULL, OPT_FLOOR_FIELD },
	{ "samples", required_argument, NULL, OPT_SAMPLES },
	{ "prompt", required_argument, NULL, OPT_PROMPT },
	{ "sample-tokens", required_argument, NULL, OPT_SAMPLE_TOKENS },
	{ "temperature", required_argument, NULL, OPT_TEMPERATURE },
	{ "top-k", required_argument, NULL, OPT_TOP_K },
	{ "memorization", no_argument, NULL, OPT_MEMORIZATION },
	{ "mem-docs", required_argument, NULL, OPT_MEM_DOCS },
	{ "prefix", required_argument, NULL, OPT_PREFIX },
	{ "continuation", required_argument, NULL, OPT_CONTINUATION },
	{ "latest", no_argument, NULL, OPT_LATEST },
	{ "threads", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: evalppl [options] CHECKPOINT|RUN\n"
	       "\n"
	       "Evaluate a checkpoint (RUN/ckpt/step-N), or every checkpoint of a run in update\n"
	       "order, on a dataset split or on raw text: loss, perplexity, bits per byte, word\n"
	       "perplexity, overall, per source and per length, with bootstrap intervals.\n"
	       "\n"
	       "Data (default: the val split of the dataset the checkpoint was trained on):\n"
	       "      --data DIR          a shard-pack dataset made with the checkpoint's tokenizer\n"
	       "      --split S           val (default), test or train\n"
	       "      --text FILE         raw documents instead (repeatable; '-' for stdin):\n"
	       "                          text, JSONL, compressed files, archives, directories\n"
	       "  -t, --tokenizer FILE    the checkpoint's tokenizer (default: the one its run\n"
	       "                          used, if found with the recorded SHA-256)\n"
	       "      --input-format F --txt-docs MODE --doc-sep STR --text-field NAME\n"
	       "      --keep-empty        how --text files split into documents (tok-encode's)\n"
	       "      --max-docs N        the first N documents only\n"
	       "      --max-tokens N      documents until N tokens are held\n"
	       "Scoring:\n"
	       "      --context N         tokens of history at most (the model's context)\n"
	       "      --stride N          rolling-window stride (context/2): each token is scored\n"
	       "                          once with at least context - stride + 1 tokens of history\n"
	       "  -b, --batch N           rows of the full context per forward pass (8)\n"
	       "Figures:\n"
	       "      --buckets LIST      document-length bucket edges in tokens\n"
	       "                          (64,128,256,512,1024)\n"
	       "      --bootstrap N       resamples of documents for the intervals (1000; 0: none)\n"
	       "      --level X           interval level (0.95)\n"
	       "      --seed N            bootstrap, sampling and memorization seed (1)\n"
	       "      --floor-bpb X       the data's entropy floor in bits per byte, for the gap\n"
	       "      --floor-field NAME  JSONL field with each document's natural-log probability\n"
	       "                          (logprob); gen-corpus documents are also recognised\n"
	       "Samples:\n"
	       "      --samples N         samples per prompt (0)\n"
	       "      --prompt TEXT       a prompt (repeatable; default: a document's start)\n"
	       "      --sample-tokens N --temperature X --top-k N   (64; 1.0; 40, 0: all)\n"
	       "Memorization (needs the run's dataset, or --data):\n"
	       "      --memorization      greedy continuation of train and val documents\n"
	       "      --mem-docs N        documents sampled from each split (100)\n"
	       "      --prefix K --continuation M   tokens fed, tokens to reproduce (32, 32)\n"
	       "Running:\n"
	       "      --latest            of a run, only the newest valid checkpoint\n"
	       "  -j, --threads N         CPU threads (OMP_NUM_THREADS, else all cores)\n"
	       "  -q, --quiet             no progress on stderr\n"
	       "  -h, --help  -V, --version\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See evalppl(1).\n");
}

struct opts {
	const char *target, *data, *tokenizer, *floor_field;
	int split, split_given;
	const char **texts;
	int ntexts;
	struct lmt_corpus_opts corpus;
	uint64_t max_docs, max_tokens;
	int context, stride, rows, threads, latest;
	uint64_t edges[64];
	int nedges;
	int resamples;
	double level;
	uint64_t seed;
	double floor_bpb;
	int floor_given, floor_field_given;
	int samples, sample_tokens, top_k, nprompts;
	const char **prompts;
	double temperature;
	int memorization, prefix, cont;
	uint64_t mem_docs;
};

/* ---- output ---- */

static void emit(struct lmt_json *j)
{
	if (j->out.oom)
		die("out of memory");
	if (lmt_json_end_line(j, stdout))
		die("'<stdout>': write error");
}

static void num_or_null(struct lmt_json *j, const char *key, double v)
{
	if (isfinite(v))
		lmt_json_num(j, key, v);
	else
		lmt_json_null(j, key);
}

static void pair(struct lmt_json *j, const char *key, double a, double b)
{
	if (!isfinite(a) || !isfinite(b)) {
		lmt_json_null(j, key);
		return;
	}
	lmt_json_arr(j, key);
	lmt_json_num(j, NULL, a);
	lmt_json_num(j, NULL, b);
	lmt_json_arr_end(j);
}

/* ---- finding the files a run names ---- */

static int file_sha_is(const char *path, const uint8_t want[32], char *why, size_t cap)
{
	struct stat st;
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return 0;
	uint8_t got[32];
	struct lmt_err err = { 0 };
	if (lmt_sha256_file(path, got, &err)) {
		snprintf(why, cap, "%s", err.msg);
		return 0;
	}
	if (memcmp(got, want, 32)) {
		char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
		snprintf(why, cap, "'%s' has SHA-256 %.16s..., the record says %.16s...", path, lmt_sha256_hex(got, a),
			 lmt_sha256_hex(want, b));
		return 0;
	}
	return 1;
}

/*
 * A path recorded by another tool, relative to the directory that tool ran in:
 * tried as given, then (if relative) under base and each of its ancestors. The
 * first candidate whose SHA-256 is want goes into out; why says what was found
 * otherwise.
 */
static int find_recorded(const char *path, const char *base, const uint8_t want[32], char *out, size_t cap,
			 char *why, size_t whycap)
{
	snprintf(why, whycap, "'%s' not found", path);
	if (file_sha_is(path, want, why, whycap)) {
		path_fmt(out, cap, "%s", path);
		return 1;
	}
	if (path[0] == '/' || !base)
		return 0;
	char dir[PATH_MAX];
	if (!realpath(base, dir))
		return 0;
	for (int up = 0; up < 6 && dir[0]; up++) {
		char cand[PATH_MAX * 2];
		snprintf(cand, sizeof cand, "%s/%s", dir, path);
		if (file_sha_is(cand, want, why, whycap)) {
			path_fmt(out, cap, "%s", cand);
			return 1;
		}
		char *sl = strrchr(dir, '/');
		if (!sl || sl == dir)
			break;
		*sl = 0;
	}
	return 0;
}

/* ---- the checkpoints ---- */

struct ckpt_ref {
	char *path;
	uint64_t update;
};

static struct ckpt_ref *list_checkpoints(const char *target, int latest, int *n, char *run_dir, size_t cap)
{
	struct lmt_err err = { 0 };
	char mp[PATH_MAX];
	struct stat st;
	path_fmt(mp, sizeof mp, "%s/manifest.json", target);
	struct ckpt_ref *r = NULL;
	if (stat(target, &st))
		die("'%s': %s", target, strerror(errno));
	if (access(mp, F_OK) == 0) {
		/* one checkpoint: its run is two levels up (RUN/ckpt/step-N) */
		path_fmt(run_dir, cap, "%s/../..", target);
		r = calloc(1, sizeof *r);
		r[0].path = strdup(target);
		*n = 1;
		return r;
	}
	char ck[PATH_MAX];
	path_fmt(ck, sizeof ck, "%s/ckpt", target);
	if (stat(ck, &st) || !S_ISDIR(st.st_mode))
		die("'%s': neither a checkpoint (no manifest.json) nor a run directory (no ckpt/)", target);
	path_fmt(run_dir, cap, "%s", target);
	char **names;
	uint64_t *ups;
	if (lmt_ckpt_list(target, &names, &ups, n, &err))
		die_err(&err);
	if (*n == 0)
		die("'%s': no checkpoint in %s/ckpt", target, target);
	if (latest) {
		/* the newest that verifies (lmt_ckpt_latest would also remove interrupted
		 * saves, and an evaluation must not touch a run, which may be live) */
		int pick = -1;
		for (int i = *n - 1; i >= 0 && pick < 0; i--) {
			char p[PATH_MAX];
			struct lmt_ckpt c;
			path_fmt(p, sizeof p, "%s/ckpt/%s", target, names[i]);
			if (lmt_ckpt_open(&c, p, 1, &err) == 0) {
				lmt_ckpt_close(&c);
				pick = i;
			} else {
				warn("skipping '%s': %s", p, err.msg);
			}
		}
		if (pick < 0)
			die("'%s': no checkpoint in %s/ckpt verifies", target, target);
		r = calloc(1, sizeof *r);
		char p[PATH_MAX];
		path_fmt(p, sizeof p, "%s/ckpt/%s", target, names[pick]);
		r[0].path = strdup(p);
		r[0].update = ups[pick];
		for (int i = 0; i < *n; i++)
			free(names[i]);
		free(names);
		free(ups);
		*n = 1;
		return r;
	}
	r = calloc((size_t)*n, sizeof *r);
	for (int i = 0; i < *n; i++) {
		char p[PATH_MAX];
		path_fmt(p, sizeof p, "%s/ckpt/%s", target, names[i]);
		r[i].path = strdup(p);
		r[i].update = ups[i];
		free(names[i]);
	}
	free(names);
	free(ups);
	return r;
}

struct ckinfo {
	uint64_t update, tokens;
	struct lmt_gpt_config cfg;
	uint8_t tok_sha[32], data_sha[32];
	int has_data_sha;
	const char *cfg_tokenizer, *cfg_data;  /* borrowed from the manifest */
};

static uint64_t ju64(json_t *o, const char *key, const char *dir, const char *what)
{
	json_t *x = json_object_get(o, key);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		die("'%s/manifest.json': state.%s%s is missing or not a count", dir, what, key);
	return (uint64_t)json_integer_value(x);
}

static void read_info(const struct lmt_ckpt *c, struct ckinfo *ci)
{
	memset(ci, 0, sizeof *ci);
	json_t *st = json_object_get(c->manifest, "state"), *m = json_object_get(st, "model");
	ci->update = ju64(st, "update", c->dir, "");
	ci->tokens = ju64(st, "tokens", c->dir, "");
	if (!json_is_object(m))
		die("'%s/manifest.json': no state.model: not a checkpoint of train", c->dir);
	ci->cfg.L = (int)ju64(m, "layers", c->dir, "model.");
	ci->cfg.NH = (int)ju64(m, "heads", c->dir, "model.");
	ci->cfg.C = (int)ju64(m, "channels", c->dir, "model.");
	ci->cfg.max_T = (int)ju64(m, "context", c->dir, "model.");
	ci->cfg.V = (int)ju64(m, "vocab", c->dir, "model.");
	ci->cfg.Vp = (int)ju64(m, "vocab_padded", c->dir, "model.");
	ci->cfg.untied = json_is_true(json_object_get(m, "untied"));
	const char *ts = json_string_value(json_object_get(st, "tokenizer_sha256"));
	if (!ts || lmt_sha256_parse(ts, ci->tok_sha))
		die("'%s/manifest.json': state.tokenizer_sha256 is missing or not a SHA-256", c->dir);
	const char *ds = json_string_value(json_object_get(st, "dataset_manifest_sha256"));
	ci->has_data_sha = ds && !lmt_sha256_parse(ds, ci->data_sha);
	json_t *data = json_object_get(json_object_get(st, "config"), "data");
	ci->cfg_tokenizer = json_string_value(json_object_get(data, "tokenizer"));
	ci->cfg_data = json_string_value(json_object_get(data, "dir"));
}

/* ---- documents ---- */

struct doc {
	uint64_t off, n;         /* its tokens in the pool: D, EOS included when the data has one */
	uint64_t bytes, words;   /* UTF-8 bytes and words of its text (meaningful when known) */
	uint32_t source;         /* UINT32_MAX: unknown */
	uint64_t line;           /* JSONL: the record's line, for --floor-field */
	double gen_lp, field_lp; /* natural-log probabilities: gen-corpus parse, JSONL field (NAN: none) */
};

struct docs {
	struct doc *d;
	size_t n, cap;
	uint32_t *tok;
	size_t ntok, tokcap;
	char **sources;
	uint32_t nsources;
	int has_bytes, has_words, has_sources;
	char bytes_why[1200];    /* why bytes are unknown */
	char stream_path[PATH_MAX];
	char bytes_from_buf[PATH_MAX + 32];
	const char *bytes_from;
	uint32_t ctx;            /* the token before each document (EOS), or LMT_EVAL_NO_CTX */
	uint32_t append;         /* --text: the token after each document (EOS), or LMT_NO_TOKEN */
	char framing[400];       /* how documents are framed, and why */
	uint64_t cut;            /* documents left out: cut by shard-pack's tail drop */
	char floor_source[256];
	int floor_kind;          /* 0 none, 1 field, 2 gen-corpus */
};

static uint64_t pool_add(struct docs *s, const uint32_t *t, size_t n)
{
	if (LMT_GROW(s->tok, s->tokcap, s->ntok + n + 1))
		die("out of memory for %zu tokens", s->ntok + n);
	memcpy(s->tok + s->ntok, t, n * sizeof *t);
	uint64_t at = s->ntok;
	s->ntok += n;
	return at;
}

static struct doc *doc_add(struct docs *s)
{
	if (LMT_GROW(s->d, s->cap, s->n + 1))
		die("out of memory");
	struct doc *d = &s->d[s->n++];
	memset(d, 0, sizeof *d);
	d->source = UINT32_MAX;
	d->gen_lp = d->field_lp = NAN;
	return d;
}

static double gen_logprob(const char *text, size_t len)
{
	double lp;
	if (lmt_gen_parse(text, len, &lp, NULL, NULL))
		return NAN;
	return lp;
}

static int is_plain_jsonl(const char *name)
{
	static const char *const sfx[] = { ".jsonl", ".ndjson", ".json" };
	struct stat st;
	if (stat(name, &st) || !S_ISREG(st.st_mode))
		return 0;
	size_t n = strlen(name);
	for (size_t i = 0; i < LMT_ARRAY_SIZE(sfx); i++)
		if (n >= strlen(sfx[i]) && !strcasecmp(name + n - strlen(sfx[i]), sfx[i]))
			return 1;
	return 0;
}

/* --floor-field: each JSONL document's field, read again from its record's line. */
static void read_field(struct docs *s, const char *field)
{
	for (uint32_t src = 0; src < s->nsources; src++) {
		if (!is_plain_jsonl(s->sources[src]))
			continue;
		FILE *f = fopen(s->sources[src], "r");
		if (!f)
			continue;
		char *line = NULL;
		size_t cap = 0;
		uint64_t lineno = 0;
		for (size_t i = 0; i < s->n; i++) {
			struct doc *d = &s->d[i];
			if (d->source != src || !d->line)
				continue;
			ssize_t got = 0;
			while (lineno < d->line && (got = getline(&line, &cap, f)) >= 0)
				lineno++;
			if (lineno != d->line)
				break;
			json_t *rec = json_loads(line, 0, NULL);
			json_t *v = json_object_get(rec, field);
			if (json_is_number(v))
				d->field_lp = json_number_value(v);
			json_decref(rec);
		}
		free(line);
		fclose(f);
	}
}

static void text_docs(const struct opts *o, struct lmt_tokenizer *tok, struct docs *s)
{
	struct lmt_err err = { 0 };
	struct lmt_corpus *c;
	if (lmt_corpus_open(&c, o->texts, o->ntexts, &o->corpus, &err))
		die_err(&err);
	struct lmt_tok_state *ts = lmt_tok_state_new(tok);
	struct lmt_u32vec v = { 0 };
	if (!ts)
		die("out of memory");
	struct lmt_doc d;
	int rc;
	while ((rc = lmt_corpus_next(c, &d, &err)) == 1) {
		if (o->max_docs && s->n >= o->max_docs)
			break;
		if (o->max_tokens && s->ntok >= o->max_tokens)
			break;
		v.n = 0;
		if (lmt_tok_encode(tok, ts, d.text, d.len, 0, &v))
			die("out of memory encoding");
		if (s->append != LMT_NO_TOKEN) {
			if (LMT_GROW(v.v, v.cap, v.n + 1))
				die("out of memory");
			v.v[v.n++] = s->append;
		}
		struct doc *x = doc_add(s);
		x->off = pool_add(s, v.v, v.n);
		x->n = v.n;
		x->bytes = d.len;
		x->words = lmt_count_words(d.text, d.len);
		x->source = d.source;
		x->line = d.line;
		x->gen_lp = gen_logprob(d.text, d.len);
	}
	if (rc < 0)
		die_err(&err);
	s->nsources = lmt_corpus_nsources(c);
	s->sources = calloc(s->nsources ? s->nsources : 1, sizeof *s->sources);
	for (uint32_t i = 0; i < s->nsources; i++)
		s->sources[i] = strdup(lmt_corpus_source_name(c, i));
	s->has_bytes = s->has_words = s->has_sources = 1;
	s->bytes_from = "the text";
	free(v.v);
	lmt_tok_state_free(ts);
	lmt_corpus_close(c);
	read_field(s, o->floor_field);
}

/* The dataset manifest's fields evalppl uses. */
struct dsinfo {
	json_t *m;
	const char *input_path;
	uint8_t input_sha[32];
	int has_input;
	uint64_t tail_dropped[3];
	int add_eos;             /* shard-pack appended an EOS to each document */
	int pad_mode;            /* each document started a sequence (shard-pack --mode pad) */
};

static void read_dsinfo(const struct lmt_dataset *d, struct dsinfo *x)
{
	char p[PATH_MAX];
	memset(x, 0, sizeof *x);
	path_fmt(p, sizeof p, "%s/manifest.json", d->dir);
	json_error_t je;
	if (!(x->m = json_load_file(p, 0, &je)))
		die("'%s': line %d: %s", p, je.line, je.text);
	json_t *in = json_object_get(x->m, "input");
	x->input_path = json_string_value(json_object_get(in, "path"));
	const char *sha = json_string_value(json_object_get(in, "sha256"));
	x->has_input = x->input_path && sha && !lmt_sha256_parse(sha, x->input_sha);
	const char *eos = json_string_value(json_object_get(json_object_get(x->m, "packing"), "eos"));
	x->add_eos = eos && !strcmp(eos, "add") && !json_is_true(json_object_get(in, "eos_in_stream"));
	const char *mode = json_string_value(json_object_get(json_object_get(x->m, "packing"), "mode"));
	x->pad_mode = mode && !strcmp(mode, "pad");
	for (int s = 0; s < 3; s++) {
		json_t *t = json_object_get(json_object_get(json_object_get(x->m, "splits"), lmt_split_name(s)),
					    "tail_dropped");
		x->tail_dropped[s] = json_is_integer(t) ? (uint64_t)json_integer_value(t) : 0;
	}
}

/* The token stream the dataset was packed from, if it is where the manifest says
 * (or next to the dataset) with the recorded SHA-256; why says otherwise. */
static int open_stream(const struct lmt_dataset *d, const struct dsinfo *x, struct lmt_tokstream_reader *r, char *p, char *why,
		       size_t cap)
{
	struct lmt_err err = { 0 };
	if (!x->has_input) {
		snprintf(why, cap, "the dataset manifest names no input token stream");
		return 0;
	}
	if (!strcmp(x->input_path, "<stdin>")) {
		snprintf(why, cap, "the dataset was packed from stdin: no token stream to read byte counts from");
		return 0;
	}
	if (!find_recorded(x->input_path, d->dir, x->input_sha, p, PATH_MAX, why, cap))
		return 0;
	if (lmt_tokstream_reader_open(r, p, 0, &err)) {
		snprintf(why, cap, "%s", err.msg);
		return 0;
	}
	return 1;
}

/* The decoded text of tokens, specials left out (BOS and EOS are markers, not text). */
static char *decode(const struct lmt_tokenizer *tok, const uint32_t *t, size_t n, size_t *len)
{
	size_t need = lmt_tok_decode(tok, t, n, 1, NULL, 0);
	char *b = malloc(need + 1);
	if (!b)
		die("out of memory");
	lmt_tok_decode(tok, t, n, 1, (uint8_t *)b, need);
	b[need] = 0;
	*len = need;
	return b;
}

static void split_docs(const struct opts *o, struct lmt_dataset *ds, const struct dsinfo *x,
		       const struct lmt_tokenizer *tok, struct docs *s)
{
	struct lmt_err err = { 0 };
	struct lmt_split_doc *sd;
	size_t n;
	uint32_t *tokens;
	if (lmt_split_docs(ds, o->split, NULL, 0, 1, o->max_docs, o->max_tokens, &sd, &n, &tokens, &err))
		die_err(&err);
	if (n == 0)
		die("'%s': the %s split has no documents", ds->dir, lmt_split_name(o->split));
	struct lmt_tokstream_reader r;
	int have_stream = open_stream(ds, x, &r, s->stream_path, s->bytes_why, sizeof s->bytes_why);
	if (!have_stream)
		warn("bytes and sources unknown, token figures only: %s", s->bytes_why);
	for (size_t i = 0; i < n; i++) {
		int cut = sd[i].at_tail && x->tail_dropped[o->split];
		struct lmt_tokstream_doc td;
		if (have_stream) {
			if (sd[i].doc >= r.info.n_docs)
				die("'%s': document %llu of the %s split is not in the token stream '%s' (%llu documents)",
				    ds->dir, (unsigned long long)sd[i].doc, lmt_split_name(o->split), r.f.path,
				    (unsigned long long)r.info.n_docs);
			lmt_tokstream_reader_doc(&r, sd[i].doc, &td);
			uint64_t want = td.n_tok + (x->add_eos ? 1 : 0);
			if (sd[i].n != want && !(cut && sd[i].n < want))
				die("'%s': document %llu has %llu tokens in the %s split, %llu in the token stream '%s'",
				    ds->dir, (unsigned long long)sd[i].doc, (unsigned long long)sd[i].n,
				    lmt_split_name(o->split), (unsigned long long)want, r.f.path);
			cut = sd[i].n < want;
		}
		if (cut) {
			s->cut++;
			continue;
		}
		struct doc *d = doc_add(s);
		d->off = sd[i].off;
		d->n = sd[i].n;
		if (have_stream) {
			d->bytes = td.n_bytes;
			d->source = td.source;
		}
		if (tok) {
			size_t len;
			char *text = decode(tok, tokens + sd[i].off, sd[i].n, &len);
			d->words = lmt_count_words(text, len);
			d->gen_lp = gen_logprob(text, len);
			free(text);
		}
	}
	s->tok = tokens;
	s->ntok = sd[n - 1].off + sd[n - 1].n;
	free(sd);
	if (s->n == 0)
		die("'%s': no complete document in the %s split", ds->dir, lmt_split_name(o->split));
	s->has_words = tok != NULL;
	if (have_stream) {
		s->has_bytes = s->has_sources = 1;
		s->nsources = r.info.n_sources;
		s->sources = calloc(s->nsources ? s->nsources : 1, sizeof *s->sources);
		for (uint32_t i = 0; i < s->nsources; i++)
			s->sources[i] = strdup(r.sources[i]);
		snprintf(s->bytes_from_buf, sizeof s->bytes_from_buf, "the token stream '%s'", s->stream_path);
		s->bytes_from = s->bytes_from_buf;
		lmt_tokstream_reader_close(&r);
	}
}

/* The entropy floor of exactly these documents, if known: each one's log-probability
 * from --floor-field or from the gen-corpus language. */
static void choose_floor(const struct opts *o, struct docs *s)
{
	int field = s->n > 0, gen = s->n > 0;
	for (size_t i = 0; i < s->n; i++) {
		field &= isfinite(s->d[i].field_lp);
		gen &= isfinite(s->d[i].gen_lp);
	}
	if (o->floor_given) {
		snprintf(s->floor_source, sizeof s->floor_source, "--floor-bpb");
		return;
	}
	if (field) {
		s->floor_kind = 1;
		snprintf(s->floor_source, sizeof s->floor_source, "field '%s' of each JSONL record", o->floor_field);
	} else if (gen) {
		s->floor_kind = 2;
		snprintf(s->floor_source, sizeof s->floor_source,
			 "gen-corpus language %d: each document's exact log-probability, recovered by parsing its text",
			 LMT_GEN_LANGUAGE);
	} else if (o->floor_field_given) {
		warn("not every document has a numeric '%s' field (in a plain JSONL file): no floor", o->floor_field);
	}
}

/*
 * How documents are framed: as the run's dataset presented them to the model. Packed
 * (shard-pack's default), a document follows the EOS of the one before it, so it is
 * scored after an EOS and its first token is a target too; padded (--mode pad), it
 * starts a sequence, so nothing precedes it and its first token is not scored. Raw
 * text gets the dataset's EOS appended, as shard-pack does. Without the dataset at
 * hand, the tokenizer's EOS plays both parts.
 */
static void frame(struct docs *s, const struct lmt_dataset *ds, const struct dsinfo *x, const struct lmt_tokenizer *tok)
{
	uint32_t eos = ds ? ds->eos_id : tok ? tok->eos : LMT_NO_TOKEN;
	if (eos == UINT32_MAX)
		eos = LMT_NO_TOKEN;
	s->append = eos;
	s->ctx = eos != LMT_NO_TOKEN && !(x && x->pad_mode) ? eos : LMT_EVAL_NO_CTX;
	if (s->ctx != LMT_EVAL_NO_CTX)
		snprintf(s->framing, sizeof s->framing, "each document follows token %u (EOS, as the end of the one before "
			 "in %s), so its first token is scored too", s->ctx, ds ? "the dataset's packed sequences" :
			 "packed training");
	else if (x && x->pad_mode)
		snprintf(s->framing, sizeof s->framing, "each document starts a sequence, as the dataset's pad mode "
			 "presented it: its first token is not scored");
	else
		snprintf(s->framing, sizeof s->framing, "no EOS token: a document's first token is not scored");
}

/* ---- memorization sets ---- */

struct memset {
	int split;
	uint64_t eligible;
	struct lmt_eval_doc *d;
	size_t n;
	uint32_t *tok;
};

static void mem_prepare(const struct opts *o, struct lmt_dataset *ds, const struct dsinfo *x, int split,
			struct memset *m)
{
	struct lmt_err err = { 0 };
	struct lmt_split_doc *sd;
	size_t n;
	memset(m, 0, sizeof *m);
	m->split = split;
	if (lmt_split_docs(ds, split, NULL, 0, 0, 0, 0, &sd, &n, NULL, &err))
		die_err(&err);
	uint64_t *el = malloc((n ? n : 1) * sizeof *el);
	size_t ne = 0;
	for (size_t i = 0; i < n; i++)
		if (sd[i].n >= (uint64_t)(o->prefix + o->cont) && !(sd[i].at_tail && x->tail_dropped[split]))
			el[ne++] = sd[i].doc;
	free(sd);
	m->eligible = ne;
	/* a seeded sample without replacement: the first k of a Fisher-Yates shuffle */
	struct lmt_rng r;
	lmt_rng_seed(&r, o->seed, 0x6d656d00ULL + (uint64_t)split);
	size_t k = (size_t)LMT_MIN((uint64_t)ne, o->mem_docs);
	for (size_t i = 0; i < k; i++) {
		size_t j = i + (size_t)lmt_rng_below(&r, ne - i);
		uint64_t t = el[i];
		el[i] = el[j];
		el[j] = t;
	}
	/* in stream order, as the split holds them */
	for (size_t i = 1; i < k; i++)
		for (size_t j = i; j > 0 && el[j - 1] > el[j]; j--) {
			uint64_t t = el[j];
			el[j] = el[j - 1];
			el[j - 1] = t;
		}
	if (k) {
		if (lmt_split_docs(ds, split, el, k, 1, 0, 0, &sd, &n, &m->tok, &err))
			die_err(&err);
		m->d = calloc(n, sizeof *m->d);
		for (size_t i = 0; i < n; i++) {
			m->d[i].tok = m->tok + sd[i].off;
			m->d[i].n = sd[i].n;
		}
		m->n = n;
		free(sd);
	}
	free(el);
}

/* ---- reporting one checkpoint ---- */

struct ctx {
	const struct opts *o;
	struct docs *s;
	struct lmt_tokenizer *tok;
	const char *tok_path;
	const char *data_dir;
	int same_data;
	struct memset mem[2];
	/* per-document figures, for the bootstrap */
	double *nll;
	uint64_t *ntok, *bytes, *words;
	/* totals for the summary */
	uint64_t tokens, positions, windows;
	double seconds;
};

static void ck_fields(struct lmt_json *j, const char *path, const struct ckinfo *ci)
{
	lmt_json_str(j, "checkpoint", path);
	lmt_json_u64(j, "update", ci->update);
	lmt_json_u64(j, "tokens_trained", ci->tokens);
}

static void config_record(struct ctx *x, const char *path, const struct ckinfo *ci, int C, int S)
{
	const struct opts *o = x->o;
	struct docs *s = x->s;
	struct lmt_json j;
	char hex[LMT_SHA256_HEX], method[1024];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "eval-config");
	ck_fields(&j, path, ci);
	lmt_json_obj(&j, "model");
	lmt_json_u64(&j, "layers", (uint64_t)ci->cfg.L);
	lmt_json_u64(&j, "heads", (uint64_t)ci->cfg.NH);
	lmt_json_u64(&j, "channels", (uint64_t)ci->cfg.C);
	lmt_json_u64(&j, "context", (uint64_t)ci->cfg.max_T);
	lmt_json_u64(&j, "vocab", (uint64_t)ci->cfg.V);
	lmt_json_bool(&j, "untied", ci->cfg.untied);
	lmt_json_obj_end(&j);
	if (o->ntexts) {
		lmt_json_null(&j, "data");
		lmt_json_arr(&j, "files");
		for (int i = 0; i < o->ntexts; i++)
			lmt_json_str(&j, NULL, o->texts[i]);
		lmt_json_arr_end(&j);
	} else {
		lmt_json_str(&j, "data", x->data_dir);
		lmt_json_str(&j, "split", lmt_split_name(o->split));
		lmt_json_bool(&j, "training_dataset", x->same_data);
		lmt_json_u64(&j, "documents_cut", s->cut);
	}
	lmt_json_str(&j, "tokenizer", x->tok_path);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(ci->tok_sha, hex));
	lmt_json_u64(&j, "documents", s->n);
	uint64_t total = 0;
	for (size_t i = 0; i < s->n; i++)
		total += s->d[i].n;
	lmt_json_u64(&j, "tokens", total);
	lmt_json_bool(&j, "bytes_known", s->has_bytes);
	if (s->has_bytes)
		lmt_json_str(&j, "bytes_from", s->bytes_from);
	else
		lmt_json_str(&j, "bytes_unknown", s->bytes_why);
	lmt_json_bool(&j, "words_known", s->has_words);
	int n = 0;
	if (!o->ntexts)
		n += snprintf(method + n, sizeof method - n, "documents gathered from the %s split's packed sequences; ",
			      lmt_split_name(o->split));
	n += snprintf(method + n, sizeof method - n,
		      "rolling windows: context %d, stride %d; each token scored once with at least %d tokens of "
		      "history (all of it for a document's first %d)", C, S, C - S + 1, C);
	snprintf(method + n, sizeof method - n, "; %s", s->framing);
	lmt_json_str(&j, "method", method);
	lmt_json_u64(&j, "context", (uint64_t)C);
	lmt_json_u64(&j, "stride", (uint64_t)S);
	if (s->ctx != LMT_EVAL_NO_CTX)
		lmt_json_u64(&j, "eos", s->ctx);
	else
		lmt_json_null(&j, "eos");
	lmt_json_obj(&j, "bootstrap");
	lmt_json_u64(&j, "resamples", (uint64_t)o->resamples);
	lmt_json_u64(&j, "seed", o->seed);
	lmt_json_num(&j, "level", o->level);
	lmt_json_str(&j, "unit", "document");
	lmt_json_obj_end(&j);
	lmt_json_arr(&j, "buckets");
	for (int i = 0; i < o->nedges; i++)
		lmt_json_u64(&j, NULL, o->edges[i]);
	lmt_json_arr_end(&j);
	emit(&j);
	lmt_json_release(&j);
}

static void ppl_record(struct ctx *x, const char *path, const struct ckinfo *ci, const char *scope, const char *key,
		       const size_t *idx, size_t n, uint64_t lo, uint64_t hi, const struct lmt_eval_count *cnt,
		       struct lmt_ppl *out)
{
	const struct opts *o = x->o;
	struct docs *s = x->s;
	struct lmt_err err = { 0 };
	struct lmt_ppl p;
	char sk[600];
	snprintf(sk, sizeof sk, "%s:%s", scope, key ? key : "");
	uint64_t stream = lmt_hash_bytes(sk, strlen(sk), 0x626f6f74ULL);
	if (lmt_ppl_compute(x->nll, x->ntok, s->has_bytes ? x->bytes : NULL, s->has_words ? x->words : NULL, idx, n,
			    o->resamples, o->level, o->seed, stream, &p, &err))
		die_err(&err);
	if (out)
		*out = p;
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "ppl");
	ck_fields(&j, path, ci);
	lmt_json_str(&j, "scope", scope);
	lmt_json_str(&j, "key", key);
	if (!strcmp(scope, "length")) {
		lmt_json_u64(&j, "min_tokens", lo);
		if (hi)
			lmt_json_u64(&j, "max_tokens", hi);
		else
			lmt_json_null(&j, "max_tokens");
	}
	lmt_json_u64(&j, "documents", p.docs);
	lmt_json_u64(&j, "tokens", p.tokens);
	if (s->has_bytes)
		lmt_json_u64(&j, "bytes", p.bytes);
	else
		lmt_json_null(&j, "bytes");
	if (s->has_words)
		lmt_json_u64(&j, "words", p.words);
	else
		lmt_json_null(&j, "words");
	lmt_json_num(&j, "nll", p.nll);
	static const char *const names[LMT_PPL_N] = { "loss", "token_ppl", "bits_per_byte", "byte_ppl", "word_ppl" };
	for (int f = 0; f < LMT_PPL_N; f++) {
		char ck[32];
		num_or_null(&j, names[f], p.v[f]);
		snprintf(ck, sizeof ck, "%s_ci", names[f]);
		pair(&j, ck, p.lo[f], p.hi[f]);
	}
	if (cnt) {
		lmt_json_u64(&j, "windows", cnt->windows);
		lmt_json_u64(&j, "forward_positions", cnt->positions);
	}
	emit(&j);
	lmt_json_release(&j);
}

static void floor_record(struct ctx *x, const char *path, const struct ckinfo *ci, const struct lmt_ppl *all)
{
	const struct opts *o = x->o;
	struct docs *s = x->s;
	double floor_nll;
	if (o->floor_given) {
		if (!s->has_bytes) {
			warn("--floor-bpb: the bytes of these documents are unknown: no gap");
			return;
		}
		floor_nll = o->floor_bpb * M_LN2 * (double)all->bytes;
	} else if (s->floor_kind) {
		floor_nll = 0;
		for (size_t i = 0; i < s->n; i++)
			floor_nll -= s->floor_kind == 1 ? s->d[i].field_lp : s->d[i].gen_lp;
	} else {
		return;
	}
	double fbpb = s->has_bytes && all->bytes ? floor_nll / ((double)all->bytes * M_LN2) : NAN;
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "floor");
	ck_fields(&j, path, ci);
	lmt_json_str(&j, "scope", "overall");
	lmt_json_u64(&j, "documents", all->docs);
	lmt_json_str(&j, "source", s->floor_source);
	lmt_json_num(&j, "nll", floor_nll);
	num_or_null(&j, "bits_per_byte", fbpb);
	lmt_json_num(&j, "nats_per_token", floor_nll / (double)all->tokens);
	num_or_null(&j, "gap_bits_per_byte", all->v[LMT_PPL_BPB] - fbpb);
	lmt_json_num(&j, "gap_nats_per_token", all->v[LMT_PPL_LOSS] - floor_nll / (double)all->tokens);
	emit(&j);
	lmt_json_release(&j);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static void progress_cb(void *ctx, uint64_t done, uint64_t total)
{
	struct lmt_progress *p = ctx;
	p->total = total;
	lmt_progress_update(p, done);
}

static int32_t *prompt_ids(struct ctx *x, const char *text, int *np)
{
	struct docs *s = x->s;
	int32_t *p = malloc(sizeof *p);
	int n = 0;
	if (!p)
		die("out of memory");
	if (s->ctx != LMT_EVAL_NO_CTX)
		p[n++] = (int32_t)s->ctx;
	if (text) {
		struct lmt_tok_state *ts = lmt_tok_state_new(x->tok);
		struct lmt_u32vec v = { 0 };
		if (!ts || lmt_tok_encode(x->tok, ts, text, strlen(text), 0, &v))
			die("out of memory");
		lmt_tok_state_free(ts);
		if (!(p = realloc(p, ((size_t)n + v.n + 1) * sizeof *p)))
			die("out of memory");
		for (size_t i = 0; i < v.n; i++)
			p[n++] = (int32_t)v.v[i];
		free(v.v);
	}
	if (n == 0)
		p[n++] = 0;
	*np = n;
	return p;
}

static void samples(struct ctx *x, struct lmt_gpt *g, const char *path, const struct ckinfo *ci)
{
	const struct opts *o = x->o;
	struct lmt_err err = { 0 };
	int np_list = o->nprompts ? o->nprompts : 1;
	int32_t *out = malloc((size_t)o->sample_tokens * sizeof *out);
	uint32_t *ids = malloc((size_t)o->sample_tokens * sizeof *ids);
	if (!out || !ids)
		die("out of memory");
	for (int pi = 0; pi < np_list; pi++) {
		const char *text = o->nprompts ? o->prompts[pi] : NULL;
		int np;
		int32_t *p = prompt_ids(x, text, &np);
		for (int k = 0; k < o->samples; k++) {
			uint64_t seed = o->seed + (uint64_t)k;
			double t0 = lmt_now();
			if (lmt_generate(g, p, np, o->sample_tokens, o->temperature, o->top_k, seed, out, &err))
				die_err(&err);
			double dt = lmt_now() - t0;
			struct lmt_json j;
			lmt_json_init(&j);
			lmt_json_begin(&j);
			lmt_json_str(&j, "event", "sample");
			ck_fields(&j, path, ci);
			lmt_json_str(&j, "prompt", text);
			lmt_json_arr(&j, "prompt_ids");
			for (int i = 0; i < np; i++)
				lmt_json_u64(&j, NULL, (uint64_t)p[i]);
			lmt_json_arr_end(&j);
			lmt_json_arr(&j, "ids");
			for (int i = 0; i < o->sample_tokens; i++) {
				lmt_json_u64(&j, NULL, (uint64_t)out[i]);
				ids[i] = (uint32_t)out[i];
			}
			lmt_json_arr_end(&j);
			if (x->tok) {
				size_t need = lmt_tok_decode(x->tok, ids, (size_t)o->sample_tokens, 0, NULL, 0);
				uint8_t *t = malloc(need + 1);
				if (!t)
					die("out of memory");
				lmt_tok_decode(x->tok, ids, (size_t)o->sample_tokens, 0, t, need);
				lmt_json_strn(&j, "text", (const char *)t, need);
				free(t);
			} else {
				lmt_json_null(&j, "text");
			}
			lmt_json_num(&j, "temperature", o->temperature);
			lmt_json_u64(&j, "top_k", (uint64_t)o->top_k);
			lmt_json_u64(&j, "seed", seed);
			lmt_json_str(&j, "sampler", "key/value cache");
			lmt_json_num(&j, "tokens_per_s", dt > 0 ? o->sample_tokens / dt : 0);
			emit(&j);
			lmt_json_release(&j);
		}
		free(p);
	}
	free(out);
	free(ids);
}

static void memorization(struct ctx *x, struct lmt_gpt *g, const char *path, const struct ckinfo *ci)
{
	const struct opts *o = x->o;
	struct lmt_err err = { 0 };
	for (int k = 0; k < 2; k++) {
		struct memset *m = &x->mem[k];
		uint64_t exact = 0;
		double lo = NAN, hi = NAN;
		if (m->n) {
			uint8_t *hit = malloc(m->n);
			if (!hit)
				die("out of memory");
			if (lmt_eval_memorized(g, x->s->ctx, m->d, m->n, o->prefix, o->cont, o->rows, hit, &err))
				die_err(&err);
			for (size_t i = 0; i < m->n; i++)
				exact += hit[i];
			free(hit);
			lmt_wilson(exact, m->n, o->level, &lo, &hi);
		}
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "memorization");
		ck_fields(&j, path, ci);
		lmt_json_str(&j, "split", lmt_split_name(m->split));
		lmt_json_u64(&j, "documents", m->n);
		lmt_json_u64(&j, "eligible", m->eligible);
		lmt_json_u64(&j, "prefix", (uint64_t)o->prefix);
		lmt_json_u64(&j, "continuation", (uint64_t)o->cont);
		lmt_json_u64(&j, "exact", exact);
		num_or_null(&j, "fraction", m->n ? (double)exact / (double)m->n : NAN);
		pair(&j, "fraction_ci", lo, hi);
		lmt_json_str(&j, "interval", "wilson");
		lmt_json_u64(&j, "seed", o->seed);
		emit(&j);
		lmt_json_release(&j);
		info("memorization (%s): %llu of %zu documents continued exactly (%d tokens after %d)",
		     lmt_split_name(m->split), (unsigned long long)exact, m->n, o->cont, o->prefix);
	}
}

static void evaluate(struct ctx *x, struct lmt_gpt *g, const char *path, const struct ckinfo *ci)
{
	const struct opts *o = x->o;
	struct docs *s = x->s;
	struct lmt_err err = { 0 };
	int C = o->context ? o->context : ci->cfg.max_T;
	if (C > ci->cfg.max_T)
		die("--context %d is longer than the context of the model in '%s' (%d)", C, path, ci->cfg.max_T);
	int S = o->stride ? o->stride : LMT_MAX(1, C / 2);
	if (S > C)
		die("--stride %d is longer than the context of %d", S, C);
	config_record(x, path, ci, C, S);

	struct lmt_eval_doc *ed = calloc(s->n, sizeof *ed);
	if (!ed)
		die("out of memory");
	for (size_t i = 0; i < s->n; i++) {
		ed[i].tok = s->tok + s->d[i].off;
		ed[i].n = s->d[i].n;
	}
	struct lmt_progress bar;
	lmt_progress_init(&bar, "scoring", "tokens", 0, tool_quiet);
	struct lmt_eval_opts eo = { C, S, s->ctx, o->rows, progress_cb, &bar };
	struct lmt_eval_count cnt;
	double t0 = lmt_now();
	if (lmt_eval_score(g, &eo, ed, s->n, &cnt, &err))
		die_err(&err);
	double dt = lmt_now() - t0;
	lmt_progress_done(&bar);
	x->seconds += dt;
	x->tokens += cnt.scored;
	x->positions += cnt.positions;
	x->windows += cnt.windows;

	/* documents with a scored token (a one-token document without EOS has none) */
	size_t *idx = malloc((s->n ? s->n : 1) * sizeof *idx), n = 0;
	for (size_t i = 0; i < s->n; i++) {
		x->nll[i] = ed[i].nll;
		x->ntok[i] = ed[i].scored;
		x->bytes[i] = s->d[i].bytes;
		x->words[i] = s->d[i].words;
		if (ed[i].scored)
			idx[n++] = i;
	}
	if (!n)
		die("no document has a token to score");
	struct lmt_ppl all;
	ppl_record(x, path, ci, "overall", NULL, idx, n, 0, 0, &cnt, &all);
	floor_record(x, path, ci, &all);
	/* per source, in source order */
	if (s->has_sources) {
		size_t *sub = malloc(n * sizeof *sub);
		for (uint32_t src = 0; src < s->nsources; src++) {
			size_t k = 0;
			for (size_t i = 0; i < n; i++)
				if (s->d[idx[i]].source == src)
					sub[k++] = idx[i];
			if (k)
				ppl_record(x, path, ci, "source", s->sources[src], sub, k, 0, 0, NULL, NULL);
		}
		free(sub);
	}
	/* per length bucket: [1, e0), [e0, e1), ..., [e_last, inf) in document tokens */
	{
		size_t *sub = malloc(n * sizeof *sub);
		for (int b = 0; b <= o->nedges; b++) {
			uint64_t lo = b ? o->edges[b - 1] : 1, hi = b < o->nedges ? o->edges[b] : 0;
			size_t k = 0;
			for (size_t i = 0; i < n; i++) {
				uint64_t len = s->d[idx[i]].n;
				if (len >= lo && (!hi || len < hi))
					sub[k++] = idx[i];
			}
			if (!k)
				continue;
			char key[64];
			if (hi)
				snprintf(key, sizeof key, "%llu-%llu tokens", (unsigned long long)lo, (unsigned long long)hi - 1);
			else
				snprintf(key, sizeof key, "%llu+ tokens", (unsigned long long)lo);
			qsort(sub, k, sizeof *sub, cmp_size);
			ppl_record(x, path, ci, "length", key, sub, k, lo, hi ? hi - 1 : 0, NULL, NULL);
		}
		free(sub);
	}
	if (isfinite(all.v[LMT_PPL_BPB]))
		info("update %llu: loss %.4f (token perplexity %.3f), %.4f bits per byte; %llu tokens of %zu documents in "
		     "%.2f s (%.0f tokens/s)", (unsigned long long)ci->update, all.v[LMT_PPL_LOSS], all.v[LMT_PPL_TOKEN],
		     all.v[LMT_PPL_BPB], (unsigned long long)cnt.scored, n, dt, cnt.scored / dt);
	else
		info("update %llu: loss %.4f (token perplexity %.3f); %llu tokens of %zu documents in %.2f s (%.0f tokens/s)",
		     (unsigned long long)ci->update, all.v[LMT_PPL_LOSS], all.v[LMT_PPL_TOKEN],
		     (unsigned long long)cnt.scored, n, dt, cnt.scored / dt);
	free(idx);
	free(ed);
	if (o->samples)
		samples(x, g, path, ci);
	if (o->memorization)
		memorization(x, g, path, ci);
}

/* ---- options ---- */

static void parse_buckets(struct opts *o, const char *arg)
{
	o->nedges = 0;
	if (!strcmp(arg, "none"))
		return;
	char *copy = strdup(arg), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o->nedges == (int)LMT_ARRAY_SIZE(o->edges))
			usage_error("option '--buckets': more than %zu edges", LMT_ARRAY_SIZE(o->edges));
		uint64_t v = (uint64_t)opt_int("buckets", t, 2, INT64_MAX);
		if (o->nedges && v <= o->edges[o->nedges - 1])
			usage_error("option '--buckets': edges must increase ('%s')", arg);
		o->edges[o->nedges++] = v;
	}
	free(copy);
}

static const char **push(const char **list, int *n, const char *s)
{
	list = realloc(list, ((size_t)*n + 1) * sizeof *list);
	if (!list)
		die("out of memory");
	list[(*n)++] = s;
	return list;
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	o.split = LMT_SPLIT_VAL;
	o.rows = 8;
	o.resamples = 1000;
	o.level = 0.95;
	o.seed = 1;
	o.floor_field = "logprob";
	o.sample_tokens = 64;
	o.temperature = 1.0;
	o.top_k = 40;
	o.mem_docs = 100;
	o.prefix = 32;
	o.cont = 32;
	parse_buckets(&o, "64,128,256,512,1024");
	tool_init("evalppl");
	tool_passive_threads(argv);
	int c;
	while ((c = getopt_long(argc, argv, "hVt:b:j:q", longopts, NULL)) != -1) {
		if (corpus_opt(c, optarg, &o.corpus))
			continue;
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case OPT_DATA: o.data = optarg; break;
		case OPT_SPLIT:
			if ((o.split = lmt_split_parse(optarg)) < 0)
				usage_error("option '--split': '%s' is not train, val or test", optarg);
			o.split_given = 1;
			break;
		case OPT_TEXT: o.texts = push(o.texts, &o.ntexts, optarg); break;
		case 't': o.tokenizer = optarg; break;
		case OPT_MAX_DOCS: o.max_docs = (uint64_t)opt_int("max-docs", optarg, 1, INT64_MAX); break;
		case OPT_MAX_TOKENS: o.max_tokens = opt_size("max-tokens", optarg); break;
		case OPT_CONTEXT: o.context = (int)opt_int("context", optarg, 1, 1 << 20); break;
		case OPT_STRIDE: o.stride = (int)opt_int("stride", optarg, 1, 1 << 20); break;
		case 'b': o.rows = (int)opt_int("batch", optarg, 1, 1 << 16); break;
		case OPT_BUCKETS: parse_buckets(&o, optarg); break;
		case OPT_BOOTSTRAP: o.resamples = (int)opt_int("bootstrap", optarg, 0, 1000000); break;
		case OPT_LEVEL: o.level = opt_double("level", optarg, 0.5, 0.9999); break;
		case OPT_SEED: o.seed = (uint64_t)opt_int("seed", optarg, 0, INT64_MAX); break;
		case OPT_FLOOR_BPB:
			o.floor_bpb = opt_double("floor-bpb", optarg, 0, 64);
			o.floor_given = 1;
			break;
		case OPT_FLOOR_FIELD:
			if (!*optarg)
				usage_error("option '--floor-field': the name is empty");
			o.floor_field = optarg;
			o.floor_field_given = 1;
			break;
		case OPT_SAMPLES: o.samples = (int)opt_int("samples", optarg, 0, 1 << 20); break;
		case OPT_PROMPT: o.prompts = push(o.prompts, &o.nprompts, optarg); break;
		case OPT_SAMPLE_TOKENS: o.sample_tokens = (int)opt_int("sample-tokens", optarg, 1, 1 << 20); break;
		case OPT_TEMPERATURE: o.temperature = opt_double("temperature", optarg, 0, 100); break;
		case OPT_TOP_K: o.top_k = (int)opt_int("top-k", optarg, 0, 1 << 30); break;
		case OPT_MEMORIZATION: o.memorization = 1; break;
		case OPT_MEM_DOCS: o.mem_docs = (uint64_t)opt_int("mem-docs", optarg, 1, INT64_MAX); break;
		case OPT_PREFIX: o.prefix = (int)opt_int("prefix", optarg, 0, 1 << 20); break;
		case OPT_CONTINUATION: o.cont = (int)opt_int("continuation", optarg, 1, 1 << 20); break;
		case OPT_LATEST: o.latest = 1; break;
		case 'j': o.threads = (int)opt_int("threads", optarg, 1, 4096); break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	if (optind == argc)
		usage_error("no checkpoint: give a checkpoint directory (RUN/ckpt/step-N) or a run directory");
	if (argc - optind > 1)
		usage_error("unexpected argument '%s' (raw text goes in with --text FILE)", argv[optind + 1]);
	o.target = argv[optind];
	if (o.ntexts && (o.data || o.split_given))
		usage_error("--text evaluates raw documents; --data and --split choose a dataset instead");
	if (!o.ntexts && (o.corpus.format || o.corpus.txt_docs || o.corpus.doc_sep || o.corpus.text_field ||
			  o.corpus.keep_empty))
		usage_error("--input-format, --txt-docs, --doc-sep, --text-field and --keep-empty apply to --text");
	if (o.context && o.stride > o.context)
		usage_error("--stride %d is longer than --context %d", o.stride, o.context);
	if (o.nprompts && !o.samples)
		usage_error("--prompt is for samples: give --samples N");
	if (o.memorization && o.prefix + o.cont < 1)
		usage_error("--prefix and --continuation make no tokens");

	struct lmt_err err = { 0 };
	char run_dir[PATH_MAX];
	int nck;
	struct ckpt_ref *cks = list_checkpoints(o.target, o.latest, &nck, run_dir, sizeof run_dir);

	/* the first checkpoint names the tokenizer and the data; each is checked against it */
	struct lmt_ckpt ck;
	if (lmt_ckpt_open(&ck, cks[0].path, 1, &err))
		die_err(&err);
	struct ckinfo ci;
	read_info(&ck, &ci);
	char hex[LMT_SHA256_HEX], hex2[LMT_SHA256_HEX], why[1200], found[PATH_MAX];

	/* the tokenizer */
	struct lmt_tokenizer tok;
	int have_tok = 0;
	const char *tok_path = NULL;
	if (o.tokenizer) {
		if (lmt_tok_load(&tok, o.tokenizer, &err))
			die_err(&err);
		if (memcmp(tok.sha256, ci.tok_sha, 32))
			die("'%s' is tokenizer %.16s..., but the checkpoint '%s' was trained with tokenizer %.16s...",
			    o.tokenizer, lmt_sha256_hex(tok.sha256, hex), cks[0].path, lmt_sha256_hex(ci.tok_sha, hex2));
		have_tok = 1;
		tok_path = o.tokenizer;
	} else if (ci.cfg_tokenizer) {
		if (find_recorded(ci.cfg_tokenizer, run_dir, ci.tok_sha, found, sizeof found, why, sizeof why)) {
			if (lmt_tok_load(&tok, found, &err))
				die_err(&err);
			have_tok = 1;
			tok_path = strdup(found);
		} else {
			warn("the run's tokenizer is not available (%s); give -t", why);
		}
	}
	if (have_tok && (int)tok.n_vocab != ci.cfg.V)
		die("'%s' has a vocabulary of %u, the model in '%s' %d", tok_path, tok.n_vocab, cks[0].path, ci.cfg.V);
	if (o.ntexts && !have_tok)
		die("--text needs the checkpoint's tokenizer: give -t FILE");
	if (o.nprompts && !have_tok)
		die("--prompt is text: give the checkpoint's tokenizer with -t");

	/* the dataset: for evaluation (without --text), for the memorization probe, and
	 * (when the run's is at hand) for how documents are framed */
	struct lmt_dataset ds;
	struct dsinfo dsi;
	int have_ds = 0, same_data = 0, need_ds = !o.ntexts || o.memorization;
	const char *data_dir = NULL;
	if (o.data) {
		if (lmt_dataset_open(&ds, o.data, &err))
			die_err(&err);
		data_dir = o.data;
		have_ds = 1;
	} else if (ci.cfg_data && ci.has_data_sha) {
		char mf[PATH_MAX];
		path_fmt(mf, sizeof mf, "%s/manifest.json", ci.cfg_data);
		if (find_recorded(mf, run_dir, ci.data_sha, found, sizeof found, why, sizeof why)) {
			*strrchr(found, '/') = 0;
			if (lmt_dataset_open(&ds, found, &err))
				die_err(&err);
			data_dir = strdup(found);
			have_ds = 1;
		} else if (need_ds) {
			die("the checkpoint's dataset is not available (%s); give --data DIR%s", why,
			    o.ntexts ? "" : " or --text FILE");
		}
	} else if (need_ds) {
		usage_error("the checkpoint names no dataset: give --data DIR%s", o.ntexts ? "" : " or --text FILE");
	}
	if (have_ds) {
		same_data = ci.has_data_sha && !memcmp(ds.manifest_sha256, ci.data_sha, 32);
		if (memcmp(ds.tokenizer_sha256, ci.tok_sha, 32))
			die("'%s' was made with tokenizer %.16s..., the checkpoint '%s' with %.16s...", data_dir,
			    lmt_sha256_hex(ds.tokenizer_sha256, hex), cks[0].path, lmt_sha256_hex(ci.tok_sha, hex2));
		if ((int)ds.vocab_size != ci.cfg.V)
			die("'%s' has a vocabulary of %u, the model in '%s' %d", data_dir, ds.vocab_size, cks[0].path,
			    ci.cfg.V);
		read_dsinfo(&ds, &dsi);
		if (o.memorization && !same_data)
			warn("'%s' is not the dataset the checkpoint was trained on: its train split says nothing about "
			     "memorization", data_dir);
	}

	struct docs s;
	memset(&s, 0, sizeof s);
	frame(&s, have_ds ? &ds : NULL, have_ds ? &dsi : NULL, have_tok ? &tok : NULL);
	double t0 = lmt_now();
	if (o.ntexts)
		text_docs(&o, &tok, &s);
	else
		split_docs(&o, &ds, &dsi, have_tok ? &tok : NULL, &s);
	if (s.n == 0)
		die("no documents to evaluate");
	choose_floor(&o, &s);
	info("%zu documents read in %.2f s%s", s.n, lmt_now() - t0,
	     s.cut ? " (and documents cut by shard-pack's tail drop left out: see documents_cut)" : "");

	struct ctx x;
	memset(&x, 0, sizeof x);
	x.o = &o;
	x.s = &s;
	x.tok = have_tok ? &tok : NULL;
	x.tok_path = tok_path;
	x.data_dir = data_dir;
	x.same_data = same_data;
	x.nll = calloc(s.n, sizeof *x.nll);
	x.ntok = calloc(s.n, sizeof *x.ntok);
	x.bytes = calloc(s.n, sizeof *x.bytes);
	x.words = calloc(s.n, sizeof *x.words);
	if (!x.nll || !x.ntok || !x.bytes || !x.words)
		die("out of memory");
	if (o.memorization) {
		mem_prepare(&o, &ds, &dsi, LMT_SPLIT_TRAIN, &x.mem[0]);
		mem_prepare(&o, &ds, &dsi, LMT_SPLIT_VAL, &x.mem[1]);
		if (o.prefix + (s.ctx != LMT_EVAL_NO_CTX) + o.cont - 1 > ci.cfg.max_T)
			die("--prefix %d and --continuation %d do not fit the model's context of %d", o.prefix, o.cont,
			    ci.cfg.max_T);
	}

	struct lmt_backend be;
	if (lmt_backend_open(&be, "cpu", tool_threads(o.threads), &err))
		die_err(&err);
	struct lmt_gpt g;
	int have_g = 0;
	double t_start = lmt_now();
	for (int k = 0; k < nck; k++) {
		if (k) {
			if (lmt_ckpt_open(&ck, cks[k].path, 1, &err))
				die_err(&err);
			struct ckinfo c2;
			read_info(&ck, &c2);
			if (memcmp(c2.tok_sha, ci.tok_sha, 32))
				die("'%s' was trained with tokenizer %.16s..., '%s' with %.16s...", cks[k].path,
				    lmt_sha256_hex(c2.tok_sha, hex), cks[0].path, lmt_sha256_hex(ci.tok_sha, hex2));
			if (c2.cfg.V != ci.cfg.V)
				die("'%s' has a vocabulary of %d, '%s' %d", cks[k].path, c2.cfg.V, cks[0].path, ci.cfg.V);
			ci = c2;
		}
		if (have_g && memcmp(&g.cfg, &ci.cfg, sizeof ci.cfg)) {
			lmt_gpt_release(&g);
			have_g = 0;
		}
		if (!have_g) {
			if (ci.cfg.Vp != lmt_gpt_padded_vocab(ci.cfg.V))
				die("'%s': vocab_padded %d, this build pads a vocabulary of %d to %d", cks[k].path, ci.cfg.Vp,
				    ci.cfg.V, lmt_gpt_padded_vocab(ci.cfg.V));
			if (lmt_gpt_init(&g, &ci.cfg, &be, &err)) {
				lmt_err_prefix(&err, "'%s'", cks[k].path);
				die_err(&err);
			}
			have_g = 1;
		}
		if (lmt_trainstate_load_params(&g, &ck, &err))
			die_err(&err);
		evaluate(&x, &g, cks[k].path, &ci);
		lmt_ckpt_close(&ck);
	}
	double wall = lmt_now() - t_start;
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "summary");
	lmt_json_u64(&j, "checkpoints", (uint64_t)nck);
	lmt_json_u64(&j, "documents", s.n);
	lmt_json_u64(&j, "tokens_scored", x.tokens);
	lmt_json_u64(&j, "windows", x.windows);
	lmt_json_u64(&j, "forward_positions", x.positions);
	lmt_json_num(&j, "scoring_s", x.seconds);
	lmt_json_num(&j, "tokens_per_s", x.seconds > 0 ? x.tokens / x.seconds : 0);
	lmt_json_num(&j, "wall_s", wall);
	lmt_json_u64(&j, "threads", (uint64_t)be.threads);
	lmt_json_u64(&j, "peak_rss", lmt_peak_rss());
	lmt_json_str(&j, "status", "done");
	emit(&j);
	lmt_json_release(&j);

	for (int k = 0; k < 2; k++) {
		free(x.mem[k].d);
		free(x.mem[k].tok);
	}
	free(x.nll), free(x.ntok), free(x.bytes), free(x.words);
	for (uint32_t i = 0; i < s.nsources; i++)
		free(s.sources[i]);
	free(s.sources);
	free(s.d);
	free(s.tok);
	if (have_g)
		lmt_gpt_release(&g);
	be.release(&be);
	if (have_ds) {
		json_decref(dsi.m);
		lmt_dataset_close(&ds);
	}
	if (have_tok)
		lmt_tok_release(&tok);
	for (int k = 0; k < nck; k++)
		free(cks[k].path);
	free(cks);
	free(o.texts);
	free(o.prompts);
	return 0;
}
