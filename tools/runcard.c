/*
 * runcard: the record of a training run (runcard.yaml), its model card
 * (RUNCARD.md) and plots (SVG), and a release archive of the model with them.
 *
 *	runcard --dedup dedup.json --corpus corpus.summary.jsonl run
 *	runcard --release model.tar.zst run
 *	runcard --verify model.tar.zst
 *
 * Every value of the card says which file of the run it is from; a value that
 * cannot be filled stops the tool naming the field and the file, unless
 * --allow-missing leaves it null and lists it under "missing". The card, its
 * renderings, the release archive and its verification are lib/report's
 * (runcard.h, release.h); this file parses the options, calls them and prints
 * their records: JSONL on stdout, messages on stderr.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/runlock.h"
#include "ckpt/safetensors.h"
#include "core/digest.h"
#include "core/json.h"
#include "report/release.h"
#include "report/runcard.h"
#include "tool.h"

enum {
	OPT_EVAL = OPT_TOOL_BASE,
	OPT_DEDUP,
	OPT_CORPUS,
	OPT_DATA,
	OPT_ALLOW_MISSING,
	OPT_USD,
	OPT_RELEASE,
	OPT_DTYPE,
	OPT_VERIFY,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "output", required_argument, NULL, 'o' },
	{ "tokenizer", required_argument, NULL, 't' },
	{ "data", required_argument, NULL, OPT_DATA },
	{ "eval", required_argument, NULL, OPT_EVAL },
	{ "dedup", required_argument, NULL, OPT_DEDUP },
	{ "corpus", required_argument, NULL, OPT_CORPUS },
	{ "allow-missing", no_argument, NULL, OPT_ALLOW_MISSING },
	{ "usd-per-device-hour", required_argument, NULL, OPT_USD },
	{ "release", required_argument, NULL, OPT_RELEASE },
	{ "dtype", required_argument, NULL, OPT_DTYPE },
	{ "verify", required_argument, NULL, OPT_VERIFY },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: runcard [-q] [-o DIR] [--eval FILE]... [--dedup FILE] [--corpus FILE]\n"
	       "               [--data DIR] [-t TOKENIZER] [--allow-missing]\n"
	       "               [--release OUT.tar.zst [--dtype T]] RUN\n"
	       "       runcard [-q] --verify OUT.tar.zst\n"
	       "\n"
	       "Write the record of the training run in directory RUN (runcard.yaml), its model\n"
	       "card (RUNCARD.md) and plots (plots/*.svg); every value says which file it is from.\n"
	       "\n"
	       "  -o, --output DIR        where to write them (default: RUN)\n"
	       "      --eval FILE         evalppl's JSONL results (repeatable; default: RUN/eval/*.jsonl)\n"
	       "      --dedup FILE        dedup-minhash's --summary file: deduplication figures\n"
	       "      --corpus FILE       gen-corpus's summary (JSONL): the corpus's entropy floor\n"
	       "      --data DIR          the dataset directory (default: config.json's data.dir)\n"
	       "  -t, --tokenizer FILE    the tokenizer (default: config.json's data.tokenizer)\n"
	       "      --allow-missing     leave what cannot be filled null, listed under missing:,\n"
	       "                          instead of stopping at the first such field\n"
	       "      --usd-per-device-hour X  the cost in money too, at X USD per device-hour\n"
	       "      --release FILE      also write a release archive (tar + zstd): the newest\n"
	       "                          checkpoint exported as safetensors with its config.json,\n"
	       "                          the tokenizer (native and tokenizer.json), the card, the\n"
	       "                          plots and SHA256SUMS\n"
	       "      --dtype T           the exported weights: fp32 (default), bf16 or fp16\n"
	       "      --verify FILE       check a release archive against its SHA256SUMS and the\n"
	       "                          list of promised files\n"
	       "  -q, --quiet             no messages on stderr but errors and warnings\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error (a field that cannot be filled, a release that\n"
	       "does not verify), 2 usage error. See runcard(1).\n");
}

struct opts {
	const char *run, *out, *tokenizer, *data, *dedup, *corpus, *release, *verify;
	const char **eval;
	int neval, allow_missing, dtype, dtype_given;
	double usd;
};


/* ---- --verify ---- */

static void verify_problem(void *ctx, const char *msg)
{
	fflush(stdout);
	fprintf(stderr, "%s: %s\n", tool_name, msg);
}

static void verify_member(void *ctx, const struct lmt_release_finding *f)
{
	char hex[LMT_SHA256_HEX];
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "member");
	lmt_json_str(&j, "name", f->name);
	if (f->sha256) {
		lmt_json_u64(&j, "bytes", f->size);
		lmt_json_str(&j, "sha256", lmt_sha256_hex(f->sha256, hex));
	}
	lmt_json_str(&j, "status", f->status);
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
}

static int verify(const char *archive)
{
	struct lmt_err err = { 0 };
	struct lmt_release_verify_cb cb = { verify_problem, verify_member, NULL };
	struct lmt_release_summary s;
	if (lmt_release_verify(archive, &cb, &s, &err))
		die_err(&err);
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "verify");
	lmt_json_str(&j, "archive", archive);
	lmt_json_str(&j, "top", s.top);
	lmt_json_u64(&j, "members", s.members);
	lmt_json_u64(&j, "listed", s.listed);
	lmt_json_u64(&j, "problems", (uint64_t)s.problems);
	lmt_json_bool(&j, "ok", s.problems == 0);
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
	if (s.problems)
		die("'%s' does not verify: %d problem%s", archive, s.problems, s.problems == 1 ? "" : "s");
	info("'%s': %zu members under '%s', every one as SHA256SUMS says", archive, s.members, s.top);
	free(s.top);
	return 0;
}

/* ---- --release ---- */

static void say_info(void *ctx, const char *msg)
{
	info("%s", msg);
}

static void say_warn(void *ctx, const char *msg)
{
	warn("%s", msg);
}

/* a signal now stops the release at its next step, removing the staging directory */
static void staged(void *ctx, const char *dir)
{
	tool_defer_signals();
}

static int stop_requested(void *ctx)
{
	return tool_interrupted != 0;
}

static void release(struct lmt_runcard *c, const struct lmt_runcard_files *f, const struct opts *o)
{
	struct lmt_err err = { 0 };
	struct lmt_release_opts ro = { o->release, o->dtype, say_info, say_warn, staged, stop_requested, NULL };
	struct lmt_release_result r;
	if (lmt_release_write(c, f, &ro, &r, &err)) {
		if (!strcmp(err.msg, "interrupted"))
			tool_check_interrupt(); /* the message it always had */
		die_err(&err);
	}
	char hex[LMT_SHA256_HEX];
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "release");
	lmt_json_str(&j, "archive", o->release);
	lmt_json_str(&j, "top", r.top);
	lmt_json_str(&j, "checkpoint", lmt_runcard_checkpoint(c));
	lmt_json_u64(&j, "update", r.update);
	lmt_json_str(&j, "dtype", lmt_st_dtype_name(o->dtype));
	lmt_json_arr(&j, "members");
	for (int i = 0; i < r.nmembers; i++) {
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "name", r.member[i].name);
		lmt_json_str(&j, "sha256", lmt_sha256_hex(r.member[i].sha256, hex));
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_u64(&j, "bytes", r.bytes);
	lmt_json_str(&j, "sha256", lmt_sha256_hex(r.sha256, hex));
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
	info("'%s': %d members under '%s/', %.1f MB", o->release, r.nmembers, r.top, r.bytes / 1e6);
}

/* ---- the card ---- */

static void card_record(const struct lmt_runcard *c, const struct lmt_runcard_files *f, const char *run,
			const char *outdir)
{
	size_t nmiss = lmt_runcard_nmissing(c);
	if (nmiss)
		warn("%zu field%s could not be filled and %s null (listed under missing: in '%s/runcard.yaml')", nmiss,
		     nmiss == 1 ? "" : "s", nmiss == 1 ? "is" : "are", outdir);
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "runcard");
	lmt_json_str(&j, "run", run);
	const char *id = lmt_runcard_run_id(c);
	if (id)
		lmt_json_str(&j, "run_id", id);
	else
		lmt_json_null(&j, "run_id");
	lmt_json_str(&j, "output", outdir);
	lmt_json_arr(&j, "files");
	lmt_json_str(&j, NULL, "runcard.yaml");
	lmt_json_str(&j, NULL, "RUNCARD.md");
	for (int i = 0; i < LMT_RUNCARD_NPLOTS; i++) {
		char p[128];
		snprintf(p, sizeof p, "plots/%.31s", f->plot[i].name);
		lmt_json_str(&j, NULL, p);
	}
	lmt_json_arr_end(&j);
	lmt_json_u64(&j, "missing", nmiss);
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
	info("'%s': runcard.yaml, RUNCARD.md and %d plots for run '%s'", outdir, LMT_RUNCARD_NPLOTS, id ? id : "?");
}

/* ---- main ---- */

static int has_suffix(const char *s, const char *sfx)
{
	size_t a = strlen(s), b = strlen(sfx);
	return a >= b && !strcmp(s + a - b, sfx);
}

static void parse_options(int argc, char **argv, struct opts *o)
{
	int ch;
	while ((ch = getopt_long(argc, argv, "hVqo:t:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h': usage(); exit(0);
		case 'V': print_version(); exit(0);
		case 'q': tool_quiet = 1; break;
		case 'o': o->out = optarg; break;
		case 't': o->tokenizer = optarg; break;
		case OPT_DATA: o->data = optarg; break;
		case OPT_EVAL:
			if (!(o->eval = realloc(o->eval, (size_t)(o->neval + 1) * sizeof *o->eval)))
				die("out of memory");
			o->eval[o->neval++] = optarg;
			break;
		case OPT_DEDUP: o->dedup = optarg; break;
		case OPT_CORPUS: o->corpus = optarg; break;
		case OPT_ALLOW_MISSING: o->allow_missing = 1; break;
		case OPT_USD: o->usd = opt_double_above("usd-per-device-hour", optarg, 0, 1e9); break;
		case OPT_RELEASE:
			if (!has_suffix(optarg, ".tar.zst"))
				usage_error("option '--release': '%s': a release is a zstd-compressed tar; name it .tar.zst",
					    optarg);
			o->release = optarg;
			break;
		case OPT_DTYPE:
			if ((o->dtype = lmt_st_dtype_parse(optarg)) < 0)
				usage_error("option '--dtype': '%s' is not fp32, bf16 or fp16", optarg);
			o->dtype_given = 1;
			break;
		case OPT_VERIFY: o->verify = optarg; break;
		default: bad_option(argv);
		}
	}
	if (o->verify) {
		if (argc > optind || o->out || o->tokenizer || o->data || o->neval || o->dedup || o->corpus ||
		    o->allow_missing || o->release || o->dtype_given || o->usd > 0)
			usage_error("--verify takes the archive alone: no RUN and no other option");
		return;
	}
	if (argc - optind != 1)
		usage_error("give one RUN directory%s", argc - optind > 1 ? ", nothing more" : "");
	if (o->dtype_given && !o->release)
		usage_error("--dtype applies to --release");
	if (o->release && o->allow_missing)
		usage_error("--release needs a complete card: not with --allow-missing");
	o->run = argv[optind];
	if (!*o->run)
		usage_error("RUN is empty");
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	tool_init("runcard");
	parse_options(argc, argv, &o);
	if (o.verify)
		return verify(o.verify);
	const char *outdir = o.out ? o.out : o.run;
	{
		/* the card's files and the archive stay apart from what the card is read
		 * from (the run itself is written into by design: only its files count) */
		char yaml[PATH_MAX], md[PATH_MAX], plots[PATH_MAX], cfg[PATH_MAX], met[PATH_MAX], ck[PATH_MAX];
		snprintf(yaml, sizeof yaml, "%s/runcard.yaml", outdir);
		snprintf(md, sizeof md, "%s/RUNCARD.md", outdir);
		snprintf(plots, sizeof plots, "%s/plots", outdir);
		snprintf(cfg, sizeof cfg, "%s/config.json", o.run);
		snprintf(met, sizeof met, "%s/metrics.jsonl", o.run);
		snprintf(ck, sizeof ck, "%s/ckpt", o.run);
		const char *outs[] = { yaml, md, plots, o.release };
		const char *what[] = { "the card", "the card", "the plots", "--release" };
		const char *fixed[] = { o.data, o.tokenizer, o.dedup, o.corpus, cfg, met, ck };
		check_outputs(outs, what, 4, fixed, 7);
		check_outputs(outs, what, 4, (const char *const *)o.eval, o.neval);
	}

	struct lmt_err err = { 0 };
	/* a card written into the run (the default) is one of its writers: while train
	 * owns the run, it is refused, rather than describing a run still changing */
	if (lmt_run_contains(o.run, outdir) || (o.release && lmt_run_contains(o.run, o.release)))
		tool_lock_run(o.run);
	/* and a card or release written into some other run */
	tool_lock_output(outdir);
	tool_lock_output(o.release);
	struct lmt_runcard_opts ro = {
		.run = o.run, .data = o.data, .tokenizer = o.tokenizer, .dedup = o.dedup, .corpus = o.corpus,
		.eval = o.eval, .neval = o.neval, .allow_missing = o.allow_missing, .usd_per_device_hour = o.usd,
		.warn = say_warn,
	};
	struct lmt_runcard *c;
	struct lmt_runcard_files f;
	if (lmt_runcard_new(&c, &ro, &err) || lmt_runcard_render(c, &f, &err) ||
	    lmt_runcard_files_write(&f, outdir, &err))
		die_err(&err);
	card_record(c, &f, o.run, outdir);
	if (o.release)
		release(c, &f, &o);
	lmt_runcard_files_release(&f);
	lmt_runcard_free(c);
	free(o.eval);
	return 0;
}
