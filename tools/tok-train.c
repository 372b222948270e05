/*
 * tok-train: train a byte-level BPE tokenizer, or import one, and write it as an
 * lmt tokenizer file whose SHA-256 is its identity.
 *
 *	tok-train -v 32768 -o tok.lmtok corpus/          train
 *	tok-train --import tiktoken:cl100k_base.tiktoken --pattern cl100k \
 *	          --special '<|endoftext|>=100257' -o cl100k.lmtok         import
 *	tok-train -t tok.lmtok --export-hf tokenizer.json                 export
 *	tok-train -t tok.lmtok --fertility --eval code=src.c corpus/      report
 *
 * Training (corpus reading, counting, merges, the finished vocabulary) and the
 * fertility counts are lib/data/toktrain.c, the files written together
 * lib/data/tokinterop.c, the records lib/report/tokrec.c; this tool checks
 * options, chooses the mode and prints.
 *
 * stdout: JSONL (progress, summary, fertility); stderr: human messages.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "data/bpetrain.h"
#include "data/corpus.h"
#include "core/json.h"
#include "progress.h"
#include "data/tokenizer.h"
#include "data/tokinterop.h"
#include "data/toktrain.h"
#include "report/tokrec.h"
#include "tool.h"
#include "core/util.h"

enum {
	OPT_REGEX = OPT_TOOL_BASE,
	OPT_EOS,
	OPT_BOS,
	OPT_PAD,
	OPT_NO_SPECIAL,
	OPT_MAX_TOKEN_LEN,
	OPT_MIN_COUNT,
	OPT_MAX_BYTES,
	OPT_SAMPLE,
	OPT_SEED,
	OPT_IMPORT,
	OPT_EXPORT_HF,
	OPT_FERTILITY,
	OPT_EVAL,
	OPT_PROGRESS_EVERY,
	OPT_CHARS,
	OPT_TIES,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "output", required_argument, NULL, 'o' },
	{ "vocab-size", required_argument, NULL, 'v' },
	{ "pattern", required_argument, NULL, 'p' },
	{ "regex", required_argument, NULL, OPT_REGEX },
	{ "special", required_argument, NULL, 's' },
	{ "no-special", no_argument, NULL, OPT_NO_SPECIAL },
	{ "eos", required_argument, NULL, OPT_EOS },
	{ "bos", required_argument, NULL, OPT_BOS },
	{ "pad", required_argument, NULL, OPT_PAD },
	{ "max-token-len", required_argument, NULL, OPT_MAX_TOKEN_LEN },
	{ "min-count", required_argument, NULL, OPT_MIN_COUNT },
	{ "max-bytes", required_argument, NULL, OPT_MAX_BYTES },
	{ "sample", required_argument, NULL, OPT_SAMPLE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "threads", required_argument, NULL, 'j' },
	{ "import", required_argument, NULL, OPT_IMPORT },
	{ "tokenizer", required_argument, NULL, 't' },
	{ "export-hf", required_argument, NULL, OPT_EXPORT_HF },
	{ "fertility", no_argument, NULL, OPT_FERTILITY },
	{ "eval", required_argument, NULL, OPT_EVAL },
	{ "progress-every", required_argument, NULL, OPT_PROGRESS_EVERY },
	{ "chars", no_argument, NULL, OPT_CHARS },
	{ "ties", required_argument, NULL, OPT_TIES },
	{ "quiet", no_argument, NULL, 'q' },
	CORPUS_LONGOPTS,
	{ "strict", no_argument, NULL, OPT_STRICT },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: tok-train [options] -o OUT [INPUT...]\n"
	       "       tok-train --import FORMAT:PATH[,PATH] -o OUT\n"
	       "       tok-train -t TOKENIZER [--export-hf FILE] [--fertility] [INPUT...]\n"
	       "\n"
	       "Train a byte-level BPE tokenizer on documents (files, directories, JSONL,\n"
	       "compressed files, archives, or '-' for stdin), or import one.\n"
	       "\n"
	       "Training:\n"
	       "  -v, --vocab-size N      vocabulary size, special tokens included (32768)\n"
	       "  -p, --pattern NAME      pre-tokenizer: gpt2, cl100k (default), o200k, none\n"
	       "      --regex RE          a custom PCRE2 pre-tokenizer pattern instead\n"
	       "      --chars             a character-level vocabulary: the bytes, then the\n"
	       "                          characters seen, most frequent first (no merges)\n"
	       "  -s, --special STR       a special token (repeatable; training's default is\n"
	       "                          <|endoftext|>; imports take STR=ID)\n"
	       "      --no-special        no special tokens at all\n"
	       "      --eos/--bos/--pad STR  the special token with that role\n"
	       "      --max-token-len N   never create tokens longer than N bytes (no limit)\n"
	       "      --min-count N       stop when the best pair occurs fewer than N times (2)\n"
	       "      --max-bytes SIZE    read documents up to SIZE bytes, in input order\n"
	       "      --sample P          keep each document with probability P (by --seed)\n"
	       "      --seed N            seed for --sample (0)\n"
	       "      --ties RULE         equal pair counts: id (by token id, bytes by value;\n"
	       "                          the default) or hf (as HuggingFace's BpeTrainer)\n"
	       "  -j, --threads N         counting and merging threads (all cores)\n"
	       "      --progress-every N  a JSONL progress record every N merges (1000)\n"
	       "\n"
	       "Import, export, report:\n"
	       "      --import FMT:PATH   tiktoken:FILE (with --pattern and --special S=ID),\n"
	       "                          gpt2:ENCODER.json,VOCAB.bpe, hf:tokenizer.json\n"
	       "  -t, --tokenizer FILE    use an existing lmt tokenizer instead of training\n"
	       "      --export-hf FILE    also write a HuggingFace tokenizer.json\n"
	       "      --fertility         report tokens per byte and per word for each input\n"
	       "      --eval LABEL=FILE   add a labelled file to the fertility report\n"
	       "\n"
	       "Input:\n"
	       CORPUS_HELP_FORMAT
	       "      --doc-sep STR       split text documents at STR instead\n"
	       CORPUS_HELP_REST
	       "\n"
	       "  -o, --output PATH       tokenizer file; a directory gets tok-<sha256:16>.lmtok\n"
	       "  -q, --quiet             no progress on stderr\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See tok-train(1).\n");
}

struct opts {
	const char *out;
	uint32_t vocab;
	const char *pattern, *regex;
	const char *specials[256];
	int nspecials, no_special;
	const char *eos, *bos, *pad;
	uint32_t max_token_len;
	uint64_t min_count, max_bytes, seed;
	double sample;
	int threads;
	const char *import, *tokenizer, *export_hf;
	int fertility, chars, ties, ties_given;
	const char *evals[64];
	int nevals;
	uint32_t progress_every;
	int progress_every_given;
	struct lmt_corpus_opts corpus;
	const char *train_opt;   /* the first training-only option given, for messages */
	int pattern_given;
};

/* Note a training-only option, so that other modes can refuse it by name. */
static void train_only(struct opts *o, const char *name)
{
	if (!o->train_opt)
		o->train_opt = name;
}


/* ---- training ---- */

struct train_ctx {
	double t0;
	struct lmt_json *j;
	struct lmt_progress *bar;
	int bar_on;
};

static void on_count(void *ctx, uint64_t done, uint64_t total)
{
	struct train_ctx *tc = ctx;
	if (!tc->bar_on) {
		lmt_progress_init(tc->bar, "counting", "B", total, tool_quiet);
		tc->bar_on = 1;
		return;
	}
	lmt_progress_update(tc->bar, done);
}

static int on_progress(void *ctx, uint32_t merges, uint32_t tokens, uint64_t best)
{
	struct train_ctx *tc = ctx;
	lmt_tokrec_progress(tc->j, merges, tokens, best, lmt_now() - tc->t0);
	put_record(tc->j);
	lmt_progress_update(tc->bar, tokens);
	return 0;
}

static void train(const struct opts *o, const char *const *inputs, int ninputs,
		  struct lmt_tokenizer *tok, struct lmt_json *j, struct lmt_tokrec_input *ts)
{
	struct lmt_err err = { 0 };
	int nspec = o->no_special ? 0 : o->nspecials;
	struct lmt_progress bar;
	struct train_ctx tc = { 0, j, &bar, 0 };
	struct lmt_toktrain_params p = { 0 };
	p.vocab = o->vocab;
	p.pattern = o->pattern;
	p.regex = o->regex;
	p.chars = o->chars;
	p.specials = o->specials;
	p.nspecials = nspec;
	p.eos = o->eos, p.bos = o->bos, p.pad = o->pad;
	p.max_token_len = o->max_token_len;
	p.min_count = o->min_count;
	p.max_bytes = o->max_bytes;
	p.sample = o->sample;
	p.seed = o->seed;
	p.threads = tool_threads(o->threads);
	p.ties = o->ties;
	p.corpus = &o->corpus;
	p.merge_progress = on_progress;
	p.progress_every = o->progress_every;
	p.ctx = &tc;
	struct lmt_toktrain t;
	if (lmt_toktrain_init(&t, &p, &err)) {
		if (err.code == LMT_ENOMEM)
			die_err(&err);
		usage_error("%s", err.msg);
	}
	if (lmt_toktrain_count(&t, inputs, ninputs, on_count, &tc, &err))
		die_err(&err);
	lmt_progress_done(&bar);
	*ts = (struct lmt_tokrec_input){ t.docs, t.bytes, t.wc->total, t.wc->n, 1 };
	lmt_tokrec_counted(j, &t, p.threads);
	put_record(j);
	info("counted %llu documents, %llu bytes, %llu distinct words in %.1f s",
	     (unsigned long long)t.docs, (unsigned long long)t.bytes,
	     (unsigned long long)t.wc->n, t.count_seconds);

	if (!o->chars) {
		uint32_t want = o->vocab - (uint32_t)nspec;
		tc.t0 = lmt_now();
		lmt_progress_init(&bar, "merging", "tokens", want, tool_quiet);
		if (lmt_toktrain_merge(&t, &err))
			die_err(&err);
		lmt_progress_done(&bar);
		if (t.tokens < want)
			warn("stopped at %u tokens (asked for %u): no pair occurs %llu or more times",
			     t.tokens + nspec, o->vocab, (unsigned long long)(o->min_count ? o->min_count : 2));
	}
	if (lmt_toktrain_finish(&t, tok, &err))
		die_err(&err);
	if (!o->chars)
		info("trained %u merges in %.1f s", t.merges, t.merge_seconds);
	lmt_tokrec_trained(j, &t, o->chars);
	put_record(j);
	lmt_toktrain_release(&t);
}

static void import(const struct opts *o, struct lmt_tokenizer *tok)
{
	struct lmt_err err = { 0 };
	const char *colon = strchr(o->import, ':');
	if (!colon)
		usage_error("option '--import': expected FORMAT:PATH, got '%s'", o->import);
	size_t fl = (size_t)(colon - o->import);
	const char *path = colon + 1;
	const char *specials[256];
	int ns = o->no_special ? 0 : o->nspecials;
	for (int i = 0; i < ns; i++)
		specials[i] = o->specials[i];
	int rc;
	if (fl == 8 && !strncmp(o->import, "tiktoken", 8)) {
		rc = lmt_tok_import_tiktoken(tok, path, o->regex ? "none" : o->pattern, specials, ns, &err);
		if (!rc && o->regex)
			rc = lmt_tok_set_pattern(tok, "custom", o->regex, &err);
	} else if (fl == 4 && !strncmp(o->import, "gpt2", 4)) {
		const char *comma = strchr(path, ',');
		if (!comma)
			usage_error("option '--import': gpt2 needs ENCODER.json,VOCAB.bpe");
		char *enc = strndup(path, (size_t)(comma - path));
		rc = lmt_tok_import_gpt2(tok, enc, comma + 1, specials, ns, &err);
		free(enc);
	} else if (fl == 2 && !strncmp(o->import, "hf", 2)) {
		rc = lmt_tok_import_hf(tok, path, &err);
	} else {
		usage_error("option '--import': unknown format '%.*s' (tiktoken, gpt2, hf)", (int)fl, o->import);
	}
	if (rc)
		die_err(&err);
	if ((o->eos || o->bos || o->pad) && (rc = lmt_tok_set_roles(tok, o->eos, o->bos, o->pad, &err)))
		die_err(&err);
}

/* ---- fertility ---- */

static void emit_fertility(struct lmt_json *j, const char *source, const char *label,
			   const struct lmt_fertility *f)
{
	lmt_tokrec_fertility(j, source, label, f);
	put_record(j);
}

/* The file of an --eval argument, LABEL=FILE or FILE */
static const char *eval_path(const char *spec)
{
	const char *eq = strchr(spec, '=');
	return eq ? eq + 1 : spec;
}

static void fertility(const struct opts *o, const struct lmt_tokenizer *tok, const char *const *inputs,
		      int ninputs, struct lmt_json *j)
{
	struct lmt_err err = { 0 };
	int nt = tool_threads(o->threads);
	if (o->fertility && ninputs) {
		struct lmt_corpus *c;
		if (lmt_corpus_open(&c, inputs, ninputs, &o->corpus, &err))
			die_err(&err);
		/* sources are only known once read: size the table generously, then by count */
		size_t cap = 1 << 16;
		struct lmt_fertility *per = calloc(cap, sizeof *per), all = { 0 };
		if (!per)
			die("out of memory");
		if (lmt_tok_fertility(tok, c, nt, per, cap, &all, &err))
			die_err(&err);
		uint32_t ns = lmt_corpus_nsources(c);
		if (ns > cap)
			warn("fertility is reported for the first %zu of %u sources", cap, ns);
		for (uint32_t s = 0; s < ns && s < cap; s++)
			emit_fertility(j, lmt_corpus_source_name(c, s), NULL, &per[s]);
		emit_fertility(j, "*", "all inputs", &all);
		free(per);
		lmt_corpus_close(c);
	}
	for (int i = 0; i < o->nevals; i++) {
		const char *eq = strchr(o->evals[i], '=');
		char label[256];
		const char *path = eval_path(o->evals[i]);
		snprintf(label, sizeof label, "%.*s", eq ? (int)(eq - o->evals[i]) : (int)strlen(path),
			 eq ? o->evals[i] : path);
		struct lmt_corpus *c;
		struct lmt_corpus_opts eo = o->corpus;
		eo.skips = NULL; /* the summary's record is the inputs' */
		if (lmt_corpus_open(&c, &path, 1, &eo, &err))
			die_err(&err);
		struct lmt_fertility all = { 0 };
		if (lmt_tok_fertility(tok, c, nt, NULL, 0, &all, &err))
			die_err(&err);
		emit_fertility(j, path, label, &all);
		lmt_corpus_close(c);
	}
}

static void parse_options(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	static struct lmt_corpus_skips skips;
	o->corpus.skips = &skips;
	o->vocab = 32768;
	o->pattern = "cl100k";
	o->sample = 1;
	o->progress_every = 1000;
	int c;
	while ((c = getopt_long(argc, argv, "hVo:v:p:s:j:t:q", longopts, NULL)) != -1) {
		if (corpus_opt(c, optarg, &o->corpus))
			continue;
		switch (c) {
		case 'h': usage(); exit(0);
		case 'V': print_version(); exit(0);
		case 'o':
			/* a binary file, and stdout carries the records: '-' is not stdout here
			 * (it was a file named '-') */
			if (!strcmp(optarg, "-"))
				usage_error("option '-o': the tokenizer is a file, and stdout holds the records: give a file name");
			o->out = optarg;
			break;
		case 'v':
			o->vocab = (uint32_t)opt_int("vocab-size", optarg, 1, 1u << 30);
			train_only(o, "--vocab-size");
			break;
		case 'p': o->pattern = optarg; o->pattern_given = 1; break;
		case OPT_REGEX: o->regex = optarg; break;
		case 's':
			if (o->nspecials == (int)LMT_ARRAY_SIZE(o->specials))
				usage_error("too many --special options");
			o->specials[o->nspecials++] = optarg;
			break;
		case OPT_NO_SPECIAL: o->no_special = 1; break;
		case OPT_EOS: o->eos = optarg; break;
		case OPT_BOS: o->bos = optarg; break;
		case OPT_PAD: o->pad = optarg; break;
		case OPT_MAX_TOKEN_LEN:
			o->max_token_len = (uint32_t)opt_int("max-token-len", optarg, 2, 1 << 24);
			train_only(o, "--max-token-len");
			break;
		case OPT_MIN_COUNT:
			o->min_count = (uint64_t)opt_int("min-count", optarg, 1, INT64_MAX);
			train_only(o, "--min-count");
			break;
		case OPT_MAX_BYTES:
			o->max_bytes = opt_size_nz("max-bytes", optarg);
			train_only(o, "--max-bytes");
			break;
		case OPT_SAMPLE:
			o->sample = opt_double_above("sample", optarg, 0, 1); /* 0 would keep nothing, always */
			train_only(o, "--sample");
			break;
		case OPT_SEED:
			o->seed = (uint64_t)opt_int("seed", optarg, 0, INT64_MAX);
			train_only(o, "--seed");
			break;
		case 'j': o->threads = (int)opt_int("threads", optarg, 1, 1024); break;
		case OPT_IMPORT: o->import = optarg; break;
		case 't': o->tokenizer = optarg; break;
		case OPT_EXPORT_HF: o->export_hf = optarg; break;
		case OPT_FERTILITY: o->fertility = 1; break;
		case OPT_CHARS: o->chars = 1; train_only(o, "--chars"); break;
		case OPT_TIES:
			if (!strcmp(optarg, "id"))
				o->ties = LMT_BPE_TIES_ID;
			else if (!strcmp(optarg, "hf"))
				o->ties = LMT_BPE_TIES_HF;
			else
				usage_error("--ties '%s': expected id or hf", optarg);
			o->ties_given = 1;
			train_only(o, "--ties");
			break;
		case OPT_EVAL:
			if (o->nevals == (int)LMT_ARRAY_SIZE(o->evals))
				usage_error("too many --eval options");
			if (optarg[0] == '=')
				usage_error("option '--eval': '%s': an empty label (LABEL=FILE, or FILE alone)", optarg);
			o->evals[o->nevals++] = optarg;
			break;
		case OPT_PROGRESS_EVERY:
			o->progress_every = (uint32_t)opt_int("progress-every", optarg, 0, 1u << 30);
			o->progress_every_given = 1;
			train_only(o, "--progress-every");
			break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
}

/* What the option checks can tell before any work. */
static void check_options(struct opts *o, const char *const *inputs, int ninputs)
{
	int modes = (o->import != NULL) + (o->tokenizer != NULL);
	if (modes > 1)
		usage_error("--import and --tokenizer exclude each other");
	if (o->no_special && o->nspecials)
		usage_error("--no-special and --special exclude each other");
	if (!o->no_special && o->nspecials == 0 && !modes)
		o->specials[o->nspecials++] = "<|endoftext|>";
	if (!modes && !o->out)
		usage_error("no output: give -o FILE (or -t/--import to work on an existing tokenizer)");
	if (!modes && ninputs == 0)
		usage_error("no input: give files, directories or '-' for stdin");
	if (o->import && !o->out && !o->export_hf)
		usage_error("--import needs -o FILE or --export-hf FILE");
	if (o->tokenizer && o->out)
		usage_error("-t reads an existing tokenizer; -o would only copy it");
	if (o->import && ninputs && !o->fertility)
		usage_error("inputs given with --import but no --fertility to use them");
	if (o->tokenizer && !o->export_hf && !o->fertility && !o->nevals)
		usage_error("-t given with nothing to do (--export-hf, --fertility or --eval)");
	if (o->fertility && ninputs == 0)
		usage_error("--fertility needs inputs");
	if (modes && o->train_opt)
		usage_error("%s applies to training, not to %s", o->train_opt, o->import ? "--import" : "-t");
	if (o->tokenizer && (o->pattern_given || o->regex || o->nspecials || o->no_special || o->eos || o->bos || o->pad))
		usage_error("-t uses the tokenizer as it is: no --pattern, --regex, --special or roles");
	if (o->tokenizer && ninputs && !o->fertility)
		usage_error("inputs given with -t but no --fertility to use them");
	if (o->fertility)
		for (int i = 0; i < ninputs; i++)
			if (!strcmp(inputs[i], "-"))
				usage_error("--fertility reads its inputs twice; give files, not stdin");
	if (o->regex && o->pattern_given)
		usage_error("--pattern and --regex exclude each other");
	if (o->chars && (o->regex || o->pattern_given || o->max_token_len || o->min_count || o->ties_given ||
			 o->progress_every_given))
		usage_error("--chars sets its own pattern and learns no merges; --pattern, --regex, --max-token-len, "
			    "--min-count, --ties and --progress-every do not apply");
	if (!o->regex && strcmp(o->pattern, "none") && !lmt_pretok_builtin(o->pattern))
		usage_error("option '--pattern': unknown pattern '%s' (gpt2, cl100k, o200k, none; or --regex)", o->pattern);
	if (o->import && !strncmp(o->import, "hf:", 3) && (o->pattern_given || o->regex || o->nspecials || o->no_special))
		usage_error("--import hf takes pattern and special tokens from the file");
	if (o->import && !strncmp(o->import, "gpt2:", 5) && (o->pattern_given || o->regex))
		usage_error("--import gpt2 always uses the gpt2 pattern");
	if (o->import && !strncmp(o->import, "tiktoken:", 9) && !o->pattern_given && !o->regex)
		usage_error("--import tiktoken needs --pattern (the rank file does not name it)");
	/* the same string at two ids was found only in the tokenizer built from the
	 * file, and named the file */
	struct lmt_err serr = { 0 };
	if (o->import && lmt_tok_check_special_specs(o->specials, o->nspecials, &serr))
		usage_error("option '--special': %s", serr.msg);
	if (!modes) {
		/* what training would only find out at the end */
		int nspec = o->no_special ? 0 : o->nspecials;
		if (o->vocab < 256u + (uint32_t)nspec)
			usage_error("vocabulary size %u is smaller than 256 byte tokens + %d special tokens",
				    o->vocab, nspec);
		const char *roles[3] = { o->eos, o->bos, o->pad }, *names[3] = { "--eos", "--bos", "--pad" };
		for (int r = 0; r < 3; r++) {
			int found = 0;
			for (int k = 0; roles[r] && k < nspec; k++)
				found |= !strcmp(roles[r], o->specials[k]);
			if (roles[r] && !found)
				usage_error("%s '%s' is not one of the special tokens (--special)", names[r], roles[r]);
		}
	}
}

static void print_summary(const struct opts *o, const struct lmt_tokenizer *tok, const char *final,
			  const struct lmt_tokrec_input *ts, double t0, struct lmt_json *j)
{
	char hex[LMT_SHA256_HEX];
	lmt_tokrec_summary(j, tok, final, o->export_hf, ts, lmt_now() - t0);
	corpus_skips_json(j, o->corpus.skips);
	put_record(j);
	lmt_sha256_hex(tok->sha256, hex);
	info("wrote %s (%u tokens, sha256 %.16s...)", final, tok->n_vocab, hex);
}

int main(int argc, char **argv)
{
	struct opts o;
	tool_init("tok-train");
	parse_options(argc, argv, &o);
	const char *const *inputs = (const char *const *)argv + optind;
	int ninputs = argc - optind;
	check_options(&o, inputs, ninputs);
	{
		/* every file read: the inputs, -t, --import's files (FMT:A[,B]), --eval's */
		const char *ins[256 + 64 + 4];
		char imp[2][PATH_MAX];
		int nin = 0;
		for (int i = 0; i < ninputs && nin < 256; i++)
			ins[nin++] = inputs[i];
		ins[nin++] = o.tokenizer;
		if (o.import && strchr(o.import, ':')) {
			const char *a = strchr(o.import, ':') + 1, *comma = strchr(a, ',');
			snprintf(imp[0], sizeof imp[0], "%.*s", comma ? (int)(comma - a) : (int)strlen(a), a);
			snprintf(imp[1], sizeof imp[1], "%s", comma ? comma + 1 : "");
			ins[nin++] = imp[0];
			ins[nin++] = imp[1][0] ? imp[1] : NULL;
		}
		for (int i = 0; i < o.nevals; i++)
			ins[nin++] = eval_path(o.evals[i]);
		const char *outs[] = { o.out, o.export_hf }, *what[] = { "-o", "--export-hf" };
		check_outputs(outs, what, 2, ins, nin);
	}
	/* both are written after training: found now if they cannot be */
	check_output_dir(o.out, "-o", 1);
	check_output_dir(o.export_hf, "--export-hf", 0);
	/* and the evaluation texts, read after it, are there now (a missing one was
	 * found after training, with its tokenizer written) */
	for (int i = 0; i < o.nevals; i++) {
		const char *path = eval_path(o.evals[i]);
		if (strcmp(path, "-") && access(path, R_OK) != 0)
			die("'%s' (--eval): %s", path, strerror(errno));
	}
	struct lmt_json j;
	lmt_json_init(&j);
	struct lmt_tokenizer tok;
	struct lmt_err err = { 0 };
	double t0 = lmt_now();
	struct lmt_tokrec_input ts = { 0 };
	if (o.import) {
		import(&o, &tok);
	} else if (o.tokenizer) {
		if (lmt_tok_load(&tok, o.tokenizer, &err))
			die_err(&err);
	} else {
		train(&o, inputs, ninputs, &tok, &j, &ts);
	}
	char final[4096] = "";
	if (lmt_tok_write_files(&tok, o.out, final, sizeof final, o.export_hf, &err)) /* neither unless both */
		die_err(&err);
	if (o.out)
		print_summary(&o, &tok, final, &ts, t0, &j);
	if (o.fertility || o.nevals)
		fertility(&o, &tok, inputs, ninputs, &j);
	corpus_skips_warn(o.corpus.skips);
	lmt_tok_release(&tok);
	lmt_json_release(&j);
	return 0;
}
