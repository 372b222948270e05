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
 * lib/model/evaluate.c; finding the checkpoints, the tokenizer, the dataset and the
 * documents (with their byte and word counts) in lib/model/evalinput.c; one
 * checkpoint's figures per scope, its floor and its probe in lib/model/evalrun.c; the
 * sampler with its key/value cache in lib/model/generate.c. This file parses the
 * options, calls those, and reports. stdout: JSONL (eval-config, ppl, floor, sample,
 * memorization records per checkpoint, a summary last); stderr: human messages.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "ckpt/runlock.h"
#include "core/json.h"
#include "core/util.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "model/evalinput.h"
#include "model/evalrun.h"
#include "model/evaluate.h"
#include "model/generate.h"
#include "model/model.h"
#include "progress.h"
#include "report/evalrec.h"
#include "tool.h"

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
	CORPUS_LONGOPTS,
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
	       "      --keep-empty --max-doc-bytes N\n"
	       "                          how --text files split into documents (tok-encode's)\n"
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
	const char *mem_opt;    /* the last memorization option given, for the message without --memorization */
	uint64_t mem_docs;
};

/* ---- output ---- */

static void emit(struct lmt_json *j)
{
	if (j->out.oom)
		die("out of memory");
	if (lmt_json_end_line(j, stdout))
		die_write("<stdout>");
}

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	warn("%s", msg);
}

/* ---- reporting one checkpoint ---- */

struct ctx {
	const struct opts *o;
	struct lmt_eval_docset *s;
	struct lmt_tokenizer *tok;
	const char *tok_path;
	const char *data_dir;
	int same_data;
	struct lmt_eval_memset mem[2];
	struct lmt_eval_acc acc;  /* per-document figures, for the bootstrap; totals for the summary */
};

static void progress_cb(void *ctx, uint64_t done, uint64_t total)
{
	struct lmt_progress *p = ctx;
	p->total = total;
	lmt_progress_update(p, done);
}

static void samples(struct ctx *x, struct lmt_gpt *g, const char *path, const struct lmt_eval_ckinfo *ci)
{
	const struct opts *o = x->o;
	struct lmt_err err = { 0 };
	int np_list = o->nprompts ? o->nprompts : 1;
	int32_t *out = malloc((size_t)o->sample_tokens * sizeof *out);
	if (!out)
		die("out of memory");
	for (int pi = 0; pi < np_list; pi++) {
		const char *text = o->nprompts ? o->prompts[pi] : NULL;
		int np;
		int32_t *p;
		if (lmt_eval_prompt_ids(x->tok, x->s->ctx, text, &p, &np, &err))
			die_err(&err);
		for (int k = 0; k < o->samples; k++) {
			uint64_t seed = o->seed + (uint64_t)k;
			double t0 = lmt_now();
			if (lmt_generate(g, p, np, o->sample_tokens, o->temperature, o->top_k, seed, out, &err))
				die_err(&err);
			double dt = lmt_now() - t0;
			struct lmt_evalrec_sampling how = { o->temperature, o->top_k, seed,
							    dt > 0 ? o->sample_tokens / dt : 0 };
			struct lmt_json j;
			lmt_json_init(&j);
			lmt_evalrec_sample(&j, path, ci, text, p, np, out, o->sample_tokens, x->tok, &how);
			emit(&j);
			lmt_json_release(&j);
		}
		free(p);
	}
	free(out);
}

static void memorization(struct ctx *x, struct lmt_gpt *g, const char *path, const struct lmt_eval_ckinfo *ci)
{
	const struct opts *o = x->o;
	struct lmt_err err = { 0 };
	for (int k = 0; k < 2; k++) {
		struct lmt_eval_memset *m = &x->mem[k];
		uint64_t exact;
		double lo, hi;
		if (lmt_eval_memset_probe(m, g, x->s->ctx, o->prefix, o->cont, o->rows, o->level, &exact, &lo, &hi, &err))
			die_err(&err);
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_evalrec_memorization(&j, path, ci, m, o->prefix, o->cont, exact, lo, hi, o->seed);
		emit(&j);
		lmt_json_release(&j);
		info("memorization (%s): %llu of %zu documents continued exactly (%d tokens after %d)",
		     lmt_split_name(m->split), (unsigned long long)exact, m->n, o->cont, o->prefix);
	}
}

/* The rolling windows' context and stride for the model in path: checked for the
 * first checkpoint before any document is read, and again for each */
static void window(const struct opts *o, const struct lmt_eval_ckinfo *ci, const char *path, int *C, int *S)
{
	*C = o->context ? o->context : ci->cfg.max_T;
	if (*C > ci->cfg.max_T)
		die("--context %d is longer than the context of the model in '%s' (%d)", *C, path, ci->cfg.max_T);
	*S = o->stride ? o->stride : LMT_MAX(1, *C / 2);
	if (*S > *C)
		die("--stride %d is longer than the context of the model in '%s' (%d)", *S, path, *C);
}

static void evaluate(struct ctx *x, struct lmt_gpt *g, const char *path, const struct lmt_eval_ckinfo *ci)
{
	const struct opts *o = x->o;
	struct lmt_eval_acc *a = &x->acc;
	struct lmt_err err = { 0 };
	int C, S;
	window(o, ci, path, &C, &S);
	struct lmt_evalrec_setup u = { o->texts, o->ntexts, x->data_dir, o->split, x->same_data, x->tok_path, C, S,
				       o->resamples, o->seed, o->level, o->edges, o->nedges };
	struct lmt_json cj;
	lmt_json_init(&cj);
	lmt_evalrec_config(&cj, path, ci, &u, x->s);
	emit(&cj);
	lmt_json_release(&cj);

	struct lmt_progress bar;
	lmt_progress_init(&bar, "scoring", "tokens", 0, tool_quiet);
	if (lmt_eval_acc_score(a, g, x->s, C, S, o->rows, progress_cb, &bar, &err))
		die_err(&err);
	lmt_progress_done(&bar);
	struct lmt_eval_group *gr;
	size_t ng;
	if (lmt_eval_acc_groups(a, x->s, o->edges, o->nedges, o->resamples, o->level, o->seed, &gr, &ng, &err))
		die_err(&err);
	const struct lmt_ppl *all = &gr[0].ppl;
	struct lmt_json j;
	lmt_json_init(&j);
	for (size_t i = 0; i < ng; i++) {
		lmt_evalrec_ppl(&j, path, ci, x->s, &gr[i], i ? NULL : &a->cnt);
		emit(&j);
		if (i)
			continue;
		struct lmt_eval_floor f;
		if (o->floor_given && !x->s->has_bytes) {
			warn("--floor-bpb: the bytes of these documents are unknown: no gap");
		} else if (lmt_eval_floor_compute(x->s, o->floor_given, o->floor_bpb, all, &f)) {
			lmt_evalrec_floor(&j, path, ci, x->s, all, &f);
			emit(&j);
		}
	}
	lmt_json_release(&j);
	double dt = a->seconds;
	unsigned long long scored = (unsigned long long)a->cnt.scored;
	if (isfinite(all->v[LMT_PPL_BPB]))
		info("update %llu: loss %.4f (token perplexity %.3f), %.4f bits per byte; %llu tokens of %zu documents in "
		     "%.2f s (%.0f tokens/s)", (unsigned long long)ci->update, all->v[LMT_PPL_LOSS],
		     all->v[LMT_PPL_TOKEN], all->v[LMT_PPL_BPB], scored, a->n, dt, scored / dt);
	else
		info("update %llu: loss %.4f (token perplexity %.3f); %llu tokens of %zu documents in %.2f s (%.0f tokens/s)",
		     (unsigned long long)ci->update, all->v[LMT_PPL_LOSS], all->v[LMT_PPL_TOKEN], scored, a->n, dt,
		     scored / dt);
	lmt_eval_groups_free(gr, ng);
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
	char *copy = strdup(arg), *rest = copy, *t;
	if (!copy)
		die("out of memory");
	while ((t = strsep(&rest, ","))) {
		if (!*t)
			usage_error("option '--buckets': an empty item in '%s' (edges such as 64,128; none for no buckets)",
				    arg);
		if (o->nedges == (int)LMT_ARRAY_SIZE(o->edges))
			usage_error("option '--buckets': more than %zu edges", LMT_ARRAY_SIZE(o->edges));
		uint64_t v = (uint64_t)opt_int("buckets", t, 2, INT64_MAX);
		if (o->nedges && v <= o->edges[o->nedges - 1])
			usage_error("option '--buckets': edges must increase ('%s')", arg);
		o->edges[o->nedges++] = v;
	}
	free(copy);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->split = LMT_SPLIT_VAL;
	o->rows = 8;
	o->resamples = 1000;
	o->level = 0.95;
	o->seed = 1;
	o->floor_field = "logprob";
	o->sample_tokens = 64;
	o->temperature = 1.0;
	o->top_k = 40;
	o->mem_docs = 100;
	o->prefix = 32;
	o->cont = 32;
	parse_buckets(o, "64,128,256,512,1024");
	int c;
	while ((c = getopt_long(argc, argv, "hVt:b:j:q", longopts, NULL)) != -1) {
		if (corpus_opt(c, optarg, &o->corpus))
			continue;
		switch (c) {
		case 'h': usage(); exit(0);
		case 'V': print_version(); exit(0);
		case OPT_DATA: o->data = optarg; break;
		case OPT_SPLIT:
			if ((o->split = lmt_split_parse(optarg)) < 0)
				usage_error("option '--split': '%s' is not train, val or test", optarg);
			o->split_given = 1;
			break;
		case OPT_TEXT: o->texts = opt_push(o->texts, &o->ntexts, optarg); break;
		case 't': o->tokenizer = optarg; break;
		case OPT_MAX_DOCS: o->max_docs = (uint64_t)opt_int("max-docs", optarg, 1, INT64_MAX); break;
		case OPT_MAX_TOKENS: o->max_tokens = opt_size_nz("max-tokens", optarg); break;
		case OPT_CONTEXT: o->context = (int)opt_int("context", optarg, 1, 1 << 20); break;
		case OPT_STRIDE: o->stride = (int)opt_int("stride", optarg, 1, 1 << 20); break;
		case 'b': o->rows = (int)opt_int("batch", optarg, 1, 1 << 16); break;
		case OPT_BUCKETS: parse_buckets(o, optarg); break;
		case OPT_BOOTSTRAP: o->resamples = (int)opt_int("bootstrap", optarg, 0, 1000000); break;
		case OPT_LEVEL: o->level = opt_double("level", optarg, 0.5, 0.9999); break;
		case OPT_SEED: o->seed = (uint64_t)opt_int("seed", optarg, 0, INT64_MAX); break;
		case OPT_FLOOR_BPB:
			o->floor_bpb = opt_double("floor-bpb", optarg, 0, 64);
			o->floor_given = 1;
			break;
		case OPT_FLOOR_FIELD:
			if (!*optarg)
				usage_error("option '--floor-field': the name is empty");
			o->floor_field = optarg;
			o->floor_field_given = 1;
			break;
		case OPT_SAMPLES: o->samples = (int)opt_int("samples", optarg, 0, 1 << 20); break;
		case OPT_PROMPT: o->prompts = opt_push(o->prompts, &o->nprompts, optarg); break;
		case OPT_SAMPLE_TOKENS: o->sample_tokens = (int)opt_int("sample-tokens", optarg, 1, 1 << 20); break;
		case OPT_TEMPERATURE: o->temperature = opt_double("temperature", optarg, 0, 100); break;
		case OPT_TOP_K: o->top_k = (int)opt_int("top-k", optarg, 0, 1 << 30); break;
		case OPT_MEMORIZATION: o->memorization = 1; break;
		case OPT_MEM_DOCS:
			o->mem_docs = (uint64_t)opt_int("mem-docs", optarg, 1, INT64_MAX);
			o->mem_opt = "--mem-docs";
			break;
		case OPT_PREFIX: o->prefix = (int)opt_int("prefix", optarg, 0, 1 << 20); o->mem_opt = "--prefix"; break;
		case OPT_CONTINUATION:
			o->cont = (int)opt_int("continuation", optarg, 1, 1 << 20);
			o->mem_opt = "--continuation";
			break;
		case OPT_LATEST: o->latest = 1; break;
		case 'j': o->threads = (int)opt_int("threads", optarg, 1, 4096); break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	if (optind == argc)
		usage_error("no checkpoint: give a checkpoint directory (RUN/ckpt/step-N) or a run directory");
	if (argc - optind > 1)
		usage_error("unexpected argument '%s' (raw text goes in with --text FILE)", argv[optind + 1]);
	o->target = argv[optind];
	if (o->ntexts && (o->data || o->split_given))
		usage_error("--text evaluates raw documents; --data and --split choose a dataset instead");
	if (!o->ntexts && (o->corpus.format || o->corpus.txt_docs || o->corpus.doc_sep || o->corpus.text_field ||
			   o->corpus.keep_empty || o->corpus.max_doc))
		usage_error("--input-format, --txt-docs, --doc-sep, --text-field, --keep-empty and --max-doc-bytes apply "
			    "to --text");
	if (o->context && o->stride > o->context)
		usage_error("--stride %d is longer than --context %d", o->stride, o->context);
	if (o->nprompts && !o->samples)
		usage_error("--prompt is for samples: give --samples N");
	if (o->mem_opt && !o->memorization)
		usage_error("%s is for the memorization probe: give --memorization", o->mem_opt);
	for (int i = 0, stdin_seen = 0; i < o->ntexts; i++)
		if (!strcmp(o->texts[i], "-") && stdin_seen++)
			usage_error("stdin ('-') given more than once with --text");
	if (o->memorization && o->prefix + o->cont < 1)
		usage_error("--prefix and --continuation make no tokens");
}

/* ---- the inputs the first checkpoint names ---- */

struct inputs {
	struct lmt_tokenizer tok;
	int have_tok;
	char tok_path[PATH_MAX];
	struct lmt_dataset ds;
	struct lmt_eval_dsinfo dsi;
	int have_ds, same_data;
	char data_dir[PATH_MAX];
};

static void open_inputs(const struct opts *o, const struct lmt_eval_ckinfo *ci, const char *ck_path,
			const char *run_dir, struct inputs *in)
{
	struct lmt_err err = { 0 };
	char why[1200];
	int rc;
	memset(in, 0, sizeof *in);
	rc = lmt_eval_tokenizer_open(&in->tok, o->tokenizer, ci, ck_path, run_dir, in->tok_path, sizeof in->tok_path,
				     why, sizeof why, &err);
	if (rc < 0)
		die_err(&err);
	in->have_tok = rc;
	if (!rc && why[0])
		warn("the run's tokenizer is not available (%s); give -t", why);
	if (o->ntexts && !in->have_tok)
		die("--text needs the checkpoint's tokenizer: give -t FILE");
	if (o->nprompts && !in->have_tok)
		die("--prompt is text: give the checkpoint's tokenizer with -t");

	/* the dataset: for evaluation (without --text), for the memorization probe, and
	 * (when the run's is at hand) for how documents are framed */
	int need_ds = !o->ntexts || o->memorization;
	rc = lmt_eval_dataset_open(&in->ds, &in->dsi, o->data, ci, ck_path, run_dir, in->data_dir, sizeof in->data_dir,
				   &in->same_data, why, sizeof why, &err);
	if (rc < 0)
		die_err(&err);
	in->have_ds = rc;
	if (!rc && need_ds && why[0])
		die("the checkpoint's dataset is not available (%s); give --data DIR%s", why,
		    o->ntexts ? "" : " or --text FILE");
	if (!rc && need_ds)
		usage_error("the checkpoint names no dataset: give --data DIR%s", o->ntexts ? "" : " or --text FILE");
	if (rc && o->memorization && !in->same_data)
		warn("'%s' is not the dataset the checkpoint was trained on: its train split says nothing about "
		     "memorization", in->data_dir);
}

static void read_docs(const struct opts *o, struct inputs *in, struct lmt_eval_docset *s)
{
	struct lmt_err err = { 0 };
	int rc;
	lmt_eval_docset_init(s, in->have_ds ? &in->ds : NULL, in->have_ds ? &in->dsi : NULL,
			     in->have_tok ? &in->tok : NULL);
	double t0 = lmt_now();
	if (o->ntexts) {
		rc = lmt_eval_docset_read_text(s, o->texts, o->ntexts, &o->corpus, &in->tok, o->max_docs, o->max_tokens,
					       o->floor_field, &err);
	} else {
		rc = lmt_eval_docset_read_split(s, &in->ds, &in->dsi, o->split, in->have_tok ? &in->tok : NULL,
						o->max_docs, o->max_tokens, &err);
		if (s->bytes_why[0])
			warn("bytes and sources unknown, token figures only: %s", s->bytes_why);
	}
	if (rc)
		die_err(&err);
	if (s->n == 0)
		die("no documents to evaluate");
	if (lmt_eval_docset_choose_floor(s, o->floor_given, o->floor_field, o->floor_field_given))
		warn("not every document has a numeric '%s' field (in a plain JSONL file): no floor", o->floor_field);
	info("%zu documents read in %.2f s%s", s->n, lmt_now() - t0,
	     s->cut ? " (and documents cut by shard-pack's tail drop left out: see documents_cut)" : "");
}

static void summary_record(const struct ctx *x, int nck, double wall, int threads)
{
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_evalrec_summary(&j, nck, x->s, &x->acc, wall, threads);
	emit(&j);
	lmt_json_release(&j);
}

/* Results written into the run (`evalppl RUN > RUN/eval/ppl.jsonl`), or into any
 * other run, make evalppl one of that run's writers: it takes the run's lock, so
 * it is refused while train owns the run (the checkpoints it would list are still
 * being made and removed). To anywhere else it is a reader and takes none. */
static void lock_if_writing_into(const char *run_dir)
{
	char ck[PATH_MAX];
	struct stat st;
	char out[PATH_MAX];
	/* results written into some other run's eval/ count the same: the run that
	 * holds stdout's file, found from its path (Linux names it in /proc) */
	ssize_t n = readlink("/proc/self/fd/1", out, sizeof out - 1);
	if (!fstat(STDOUT_FILENO, &st) && S_ISREG(st.st_mode) && n > 0 && out[0] == '/') {
		out[n] = 0;
		tool_lock_output(out);
	}
	if (snprintf(ck, sizeof ck, "%s/ckpt", run_dir) >= (int)sizeof ck || stat(ck, &st) || !S_ISDIR(st.st_mode))
		return;
	if (lmt_run_contains_fd(run_dir, STDOUT_FILENO))
		tool_lock_run(run_dir);
}

int main(int argc, char **argv)
{
	struct opts o;
	tool_init("evalppl");
	tool_passive_threads(argv);
	parse_args(argc, argv, &o);

	struct lmt_err err = { 0 };
	char run_dir[PATH_MAX];
	int nck;
	struct lmt_eval_ckref *cks;
	if (lmt_eval_ckpts_list(o.target, o.latest, &cks, &nck, run_dir, sizeof run_dir, warn_cb, NULL, &err))
		die_err(&err);
	lock_if_writing_into(run_dir);

	/* the first checkpoint names the tokenizer and the data; each is checked against it */
	struct lmt_ckpt ck;
	struct lmt_eval_ckinfo ci, first;
	if (lmt_eval_ckpt_open(&ck, &ci, cks[0].path, NULL, NULL, &err))
		die_err(&err);
	struct inputs in;
	int C, S;
	window(&o, &ci, cks[0].path, &C, &S);
	open_inputs(&o, &ci, cks[0].path, run_dir, &in);
	first = ci;

	struct lmt_eval_docset s;
	read_docs(&o, &in, &s);
	struct ctx x;
	memset(&x, 0, sizeof x);
	x.o = &o;
	x.s = &s;
	x.tok = in.have_tok ? &in.tok : NULL;
	x.tok_path = in.have_tok ? in.tok_path : NULL;
	x.data_dir = in.have_ds ? in.data_dir : NULL;
	x.same_data = in.same_data;
	if (lmt_eval_acc_init(&x.acc, &s, &err))
		die_err(&err);
	if (o.memorization) {
		for (int k = 0; k < 2; k++)
			if (lmt_eval_memset_prepare(&x.mem[k], &in.ds, &in.dsi, k ? LMT_SPLIT_VAL : LMT_SPLIT_TRAIN,
						    o.prefix, o.cont, o.mem_docs, o.seed, &err))
				die_err(&err);
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
		if (k && lmt_eval_ckpt_open(&ck, &ci, cks[k].path, &first, cks[0].path, &err))
			die_err(&err);
		if (lmt_eval_model_load(&g, &have_g, &be, &ck, &ci, &err))
			die_err(&err);
		evaluate(&x, &g, cks[k].path, &ci);
		lmt_ckpt_close(&ck);
	}
	summary_record(&x, nck, lmt_now() - t_start, be.threads);

	for (int k = 0; k < 2; k++)
		lmt_eval_memset_release(&x.mem[k]);
	lmt_eval_acc_release(&x.acc);
	lmt_eval_docset_release(&s);
	if (have_g)
		lmt_gpt_release(&g);
	be.release(&be);
	if (in.have_ds) {
		lmt_eval_dsinfo_release(&in.dsi);
		lmt_dataset_close(&in.ds);
	}
	if (in.have_tok)
		lmt_tok_release(&in.tok);
	lmt_eval_ckrefs_free(cks, nck);
	free(o.texts);
	free(o.prompts);
	return 0;
}
