/*
 * gen-corpus: the built-in corpus, documents whose exact probability is known, and a
 * checker that reads such documents back.
 *
 *	gen-corpus -o corpus.jsonl                       # about 10 MB, seed 1
 *	gen-corpus --docs 1000 --seed 7 --format text > small.txt
 *	gen-corpus --check corpus.jsonl
 *
 * The language and why -logprob is exact are in lib/data/gencorpus.h and gen-corpus(1).
 * stdout: the documents when no -o is given, otherwise (and for --check) one JSONL
 * summary; stderr: human messages.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomicfile.h"
#include "data/gencorpus.h"
#include "core/json.h"
#include "progress.h"
#include "tool.h"
#include "core/util.h"

/* About 10 MB of text with LMT_GEN_LANGUAGE 1 (314 bytes per document on average). */
#define DEFAULT_DOCS 32000
#define DEFAULT_SEED 1
#define DOC_SEP "<|endoftext|>"
/* --check tolerance: the recorded logprob is printed to round-trip exactly; 1e-9
 * relative leaves room for another libm's log() in the last bits of each term. */
#define CHECK_RTOL 1e-9

enum {
	OPT_DOCS = OPT_TOOL_BASE,
	OPT_SEED,
	OPT_FORMAT,
	OPT_CHECK,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "docs", required_argument, NULL, OPT_DOCS },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "output", required_argument, NULL, 'o' },
	{ "check", required_argument, NULL, OPT_CHECK },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: gen-corpus [--docs N] [--seed S] [--format jsonl|text] [-o FILE]\n"
	       "       gen-corpus --check FILE\n"
	       "\n"
	       "Write documents of lmt's built-in toy English, each with the natural log of its\n"
	       "exact probability (end of document included), or check such a file.\n"
	       "\n"
	       "      --docs N            documents to write (%d, about 10 MB of text)\n"
	       "      --seed S            seed, 0 to 2^63-1 (%d); document i depends only on\n"
	       "                          the seed and i\n"
	       "      --format F          jsonl (default): {\"text\",\"id\",\"logprob\"} per line;\n"
	       "                          text: the texts separated by '" DOC_SEP "'\n"
	       "  -o, --output FILE       write there atomically and print a JSONL summary\n"
	       "                          (default: documents to stdout, summary to stderr)\n"
	       "      --check FILE        read a JSONL file of documents ('-': stdin), parse each\n"
	       "                          text and compare its logprob (relative tolerance 1e-9)\n"
	       "  -q, --quiet             no progress or summary on stderr\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error (a document that fails --check), 2 usage error.\n"
	       "See gen-corpus(1).\n",
	       DEFAULT_DOCS, DEFAULT_SEED);
}

struct opts {
	uint64_t docs, seed;
	int text, gen_opts;
	const char *out, *check;
};

static double bits_per_byte(double nats, uint64_t bytes)
{
	return bytes ? nats / log(2.0) / (double)bytes : 0;
}

static int generate(const struct opts *o)
{
	struct lmt_err err = { 0 };
	struct lmt_atomicfile af;
	FILE *out = stdout;
	int to_file = o->out && strcmp(o->out, "-");
	if (to_file) {
		if (lmt_atomicfile_open(&af, o->out, &err))
			die_err(&err);
		out = af.fp;
	}
	const char *outname = to_file ? o->out : "<stdout>";
	struct lmt_gen g;
	struct lmt_json j;
	struct lmt_progress bar;
	lmt_gen_init(&g, o->seed);
	lmt_json_init(&j);
	lmt_progress_init(&bar, "generating", "documents", o->docs, tool_quiet);
	uint64_t bytes = 0;
	double nats = 0, t0 = lmt_now();
	for (uint64_t i = 0; i < o->docs; i++) {
		const char *text;
		size_t len;
		double lp;
		if (lmt_gen_doc(&g, &text, &len, &lp, &err))
			die_err(&err);
		int bad;
		if (o->text) {
			bad = (i && fputs(DOC_SEP, out) == EOF) || fwrite(text, 1, len, out) != len;
		} else {
			lmt_json_reset(&j);
			lmt_json_begin(&j);
			lmt_json_strn(&j, "text", text, len);
			lmt_json_u64(&j, "id", i);
			lmt_json_num(&j, "logprob", lp);
			lmt_json_end(&j);
			if (j.out.oom)
				die("out of memory");
			bad = fwrite(j.out.buf, 1, j.out.len, out) != j.out.len || putc('\n', out) == EOF;
			/* JSONL on stdout goes out a line at a time, so `| jq` sees it live */
			if (!to_file && !bad)
				bad = fflush(out) != 0;
		}
		if (bad)
			die_write(outname);
		bytes += len;
		nats -= lp;
		lmt_progress_update(&bar, i + 1);
	}
	lmt_progress_done(&bar);
	if (to_file) {
		if (lmt_atomicfile_commit(&af, &err))
			die_err(&err);
	} else if (fflush(stdout) || ferror(stdout)) {
		die_write("<stdout>");
	}
	double secs = lmt_now() - t0;
	if (to_file) {
		lmt_json_reset(&j);
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "summary");
		lmt_json_str(&j, "output", o->out);
		lmt_json_str(&j, "format", o->text ? "text" : "jsonl");
		lmt_json_u64(&j, "docs", o->docs);
		lmt_json_u64(&j, "bytes", bytes);
		lmt_json_num(&j, "nats", nats);
		lmt_json_num(&j, "bits_per_byte", bits_per_byte(nats, bytes));
		lmt_json_u64(&j, "seed", o->seed);
		lmt_json_u64(&j, "language", LMT_GEN_LANGUAGE);
		lmt_json_num(&j, "seconds", secs);
		lmt_json_num(&j, "mb_per_s", secs > 0 ? bytes / secs / 1e6 : 0);
		if (lmt_json_end_line(&j, stdout))
			die_write("<stdout>");
	} else {
		info("%llu documents, %llu bytes of text, %.4f bits per byte (seed %llu) in %.2f s",
		     (unsigned long long)o->docs, (unsigned long long)bytes, bits_per_byte(nats, bytes),
		     (unsigned long long)o->seed, secs);
	}
	lmt_json_release(&j);
	lmt_gen_release(&g);
	return 0;
}

static int check(const char *path)
{
	int is_stdin = !strcmp(path, "-");
	const char *name = is_stdin ? "<stdin>" : path;
	FILE *in = is_stdin ? stdin : fopen(path, "rb");
	if (!in)
		die("'%s': cannot open: %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	uint64_t lineno = 0, docs = 0, bytes = 0;
	double nats = 0;
	struct lmt_err err = { 0 };
	while ((n = getline(&line, &cap, in)) >= 0) {
		lineno++;
		size_t len = (size_t)n;
		if (len && line[len - 1] == '\n')
			len--;
		json_error_t jerr;
		json_t *rec = json_loadb(line, len, JSON_ALLOW_NUL, &jerr);
		if (!rec)
			die("'%s': line %llu: not JSON: %s", name, (unsigned long long)lineno, jerr.text);
		json_t *t = json_object_get(rec, "text"), *l = json_object_get(rec, "logprob");
		if (!json_is_object(rec) || !json_is_string(t) || !json_is_number(l))
			die("'%s': line %llu: expected an object with a string 'text' and a number "
			    "'logprob'", name, (unsigned long long)lineno);
		const char *text = json_string_value(t);
		size_t tlen = json_string_length(t);
		double rec_lp = json_number_value(l), lp;
		if (lmt_gen_parse(text, tlen, &lp, NULL, &err))
			die("'%s': line %llu: text is not in the language: %s", name,
			    (unsigned long long)lineno, err.msg);
		if (!(fabs(lp - rec_lp) <= CHECK_RTOL * fabs(rec_lp))) {
			char a[32], b[32];
			die("'%s': line %llu: logprob %s recorded, %s parsed from the text (relative "
			    "tolerance %g)", name, (unsigned long long)lineno, lmt_fmt_double(rec_lp, a),
			    lmt_fmt_double(lp, b), CHECK_RTOL);
		}
		json_decref(rec);
		docs++;
		bytes += tlen;
		nats -= lp;
	}
	if (ferror(in))
		die("'%s': read error: %s", name, strerror(errno));
	free(line);
	if (!is_stdin)
		fclose(in);
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "check");
	lmt_json_str(&j, "input", name);
	lmt_json_u64(&j, "docs", docs);
	lmt_json_u64(&j, "bytes", bytes);
	lmt_json_num(&j, "nats", nats);
	lmt_json_num(&j, "bits_per_byte", bits_per_byte(nats, bytes));
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .docs = DEFAULT_DOCS, .seed = DEFAULT_SEED };
	tool_init("gen-corpus");
	int c;
	while ((c = getopt_long(argc, argv, "hVo:q", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case OPT_DOCS:
			o.docs = (uint64_t)opt_int("docs", optarg, 0, INT64_MAX);
			o.gen_opts = 1;
			break;
		case OPT_SEED:
			o.seed = (uint64_t)opt_int("seed", optarg, 0, INT64_MAX);
			o.gen_opts = 1;
			break;
		case OPT_FORMAT:
			if (!strcmp(optarg, "text"))
				o.text = 1;
			else if (strcmp(optarg, "jsonl"))
				usage_error("option '--format': '%s' is not jsonl or text", optarg);
			o.gen_opts = 1;
			break;
		case 'o': o.out = optarg; o.gen_opts = 1; break;
		case OPT_CHECK: o.check = optarg; break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (o.check) {
		if (o.gen_opts)
			usage_error("--check takes no --docs, --seed, --format or -o");
		return check(o.check);
	}
	return generate(&o);
}
