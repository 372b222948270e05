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
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/runlock.h"
#include "ckpt/safetensors.h"
#include "core/digest.h"
#include "core/atomicfile.h"
#include "core/json.h"
#include "report/dashboard.h"
#include "report/explain.h"
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
	OPT_DASHBOARD,
	OPT_WATCH,
	OPT_INTERVAL,
	OPT_EXPLAIN,
	OPT_UPDATE,
	OPT_JSONL,
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
	{ "dashboard", no_argument, NULL, OPT_DASHBOARD },
	{ "watch", no_argument, NULL, OPT_WATCH },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "explain", no_argument, NULL, OPT_EXPLAIN },
	{ "update", required_argument, NULL, OPT_UPDATE },
	{ "jsonl", no_argument, NULL, OPT_JSONL },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: runcard [-q] [-o DIR] [--eval FILE]... [--dedup FILE] [--corpus FILE]\n"
	       "               [--data DIR] [-t TOKENIZER] [--allow-missing]\n"
	       "               [--release OUT.tar.zst [--dtype T]] RUN\n"
	       "       runcard [-q] --verify OUT.tar.zst\n"
	       "       runcard [-q] --dashboard [-o FILE] [--watch [--interval S]] [--data DIR] RUN\n"
	       "       runcard [-q] --explain --update N [--data DIR] [--jsonl] RUN\n"
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
	       "      --dashboard         write one self-contained HTML page of the run instead\n"
	       "                          (-o FILE; default RUN/dashboard.html)\n"
	       "      --watch             rewrite it as the run grows, the page reloading itself,\n"
	       "                          until the run ends or on SIGINT\n"
	       "      --interval S        seconds between looks at the run (2)\n"
	       "      --explain           the evidence around one update and what it points to\n"
	       "      --update N          that update\n"
	       "      --jsonl             JSONL on stdout even on a terminal\n"
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
	int dashboard, watch, explain, jsonl, update_given;
	double interval;
	uint64_t update;
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

/* A run killed while writing a record leaves its last line cut short: said, and
 * left out (train --resume cuts it off), so that a crashed run can still be looked
 * at; while watching, the line is being written and nothing is said. */
static void warn_cut(const struct lmt_runview *v, int watch)
{
	if (watch)
		return;
	if (v->metrics_cut)
		warn("'%s': " LMT_RUNVIEW_CUT, v->metrics_path, v->metrics_cut);
	if (v->events_cut)
		warn("'%s': " LMT_RUNVIEW_CUT, v->events_path, v->events_cut);
}

/* ---- --explain ---- */

static int explain(const struct opts *o)
{
	struct lmt_err err = { 0 };
	struct lmt_runview *v;
	json_t *e;
	if (lmt_runview_load(&v, o->run, o->data, 1, &err))
		die_err(&err);
	warn_cut(v, 0);
	if (lmt_explain(v, o->update, &e, &err))
		die_err(&err);
	if (!o->jsonl && isatty(STDOUT_FILENO)) {
		struct lmt_strbuf b = { 0 };
		lmt_explain_text(e, &b);
		if (b.oom)
			die("out of memory");
		if (fwrite(b.buf, 1, b.len, stdout) != b.len || fflush(stdout))
			die_write("<stdout>");
		lmt_strbuf_release(&b);
	} else {
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_json_jansson(&j, NULL, e);
		lmt_strbuf_putc(&j.out, '\n');
		if (j.out.oom)
			die("out of memory");
		if (fwrite(j.out.buf, 1, j.out.len, stdout) != j.out.len || fflush(stdout))
			die_write("<stdout>");
		lmt_json_release(&j);
	}
	json_decref(e);
	lmt_runview_free(v);
	return 0;
}

/* ---- --dashboard ---- */

/* one page of the run as it stands; 1 once the run has ended */
static int dashboard_once(const struct opts *o, const char *out, int refresh, int last)
{
	struct lmt_err err = { 0 };
	struct lmt_runview *v;
	struct lmt_strbuf b = { 0 };
	if (lmt_runview_load(&v, o->run, o->data, 1, &err))
		die_err(&err);
	warn_cut(v, o->watch);
	int done = v->done;
	struct lmt_dashboard_opts dopt = { .refresh_s = done || last ? 0 : refresh, .explain = 1 };
	if (lmt_dashboard_html(v, &dopt, &b, &err) || lmt_write_file_atomic(out, b.buf, b.len, &err))
		die_err(&err);
	if (!o->watch || done || last) {
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "dashboard");
		lmt_json_str(&j, "run", o->run);
		lmt_json_str(&j, "output", out);
		lmt_json_u64(&j, "updates", v->nupd);
		lmt_json_u64(&j, "bytes", b.len);
		lmt_json_bool(&j, "ended", done);
		if (lmt_json_end_line(&j, stdout))
			die_write("<stdout>");
		lmt_json_release(&j);
	}
	lmt_strbuf_release(&b);
	lmt_runview_free(v);
	return done;
}

/* the sizes of the files the page is drawn from: a look that finds them as they
 * were rewrites nothing */
static long long run_size(const char *run)
{
	char p[PATH_MAX];
	struct stat st;
	long long n = 0;
	path_fmt(p, sizeof p, "%s/metrics.jsonl", run);
	if (stat(p, &st))
		return -1; /* not yet: train makes it when it starts */
	n += st.st_size;
	path_fmt(p, sizeof p, "%s/events.jsonl", run);
	if (!stat(p, &st))
		n += st.st_size << 20;
	return n;
}

static int dashboard(const struct opts *o)
{
	char def[PATH_MAX];
	const char *out = o->out;
	if (!out) {
		path_fmt(def, sizeof def, "%s/dashboard.html", o->run);
		out = def;
	}
	{
		char met[PATH_MAX], ev[PATH_MAX], cfg[PATH_MAX];
		path_fmt(met, sizeof met, "%s/metrics.jsonl", o->run);
		path_fmt(ev, sizeof ev, "%s/events.jsonl", o->run);
		path_fmt(cfg, sizeof cfg, "%s/config.json", o->run);
		const char *outs[] = { out };
		const char *what[] = { "the dashboard" };
		const char *ins[] = { met, ev, cfg, o->data };
		check_outputs(outs, what, 1, ins, o->data ? 4 : 3);
	}
	if (!o->watch) {
		dashboard_once(o, out, 0, 1);
		info("'%s': the dashboard of run '%s'", out, o->run);
		return 0;
	}
	double every = o->interval > 0 ? o->interval : 2;
	int refresh = every < 1 ? 1 : (int)(every + 0.5);
	tool_defer_signals();
	long long seen = -1;
	info("'%s': watching run '%s' every %g s (until it ends, or SIGINT)", out, o->run, every);
	struct stat st;
	if (stat(o->run, &st) || !S_ISDIR(st.st_mode))
		die("'%s': not a run directory", o->run);
	for (;;) {
		long long now = run_size(o->run);
		if (now >= 0 && now != seen) {
			seen = now;
			if (dashboard_once(o, out, refresh, 0)) {
				info("'%s': the run has ended; the page no longer reloads", out);
				return 0;
			}
		}
		for (double t = 0; t < every && !tool_interrupted; t += 0.05)
			nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
		if (tool_interrupted) {
			/* the last page stops reloading: nobody rewrites it any more */
			if (run_size(o->run) >= 0)
				dashboard_once(o, out, 0, 1);
			info("'%s': stopped watching (signal %d)", out, tool_interrupted);
			return 0;
		}
	}
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
		case OPT_DASHBOARD: o->dashboard = 1; break;
		case OPT_WATCH: o->watch = 1; break;
		case OPT_INTERVAL: o->interval = opt_double_above("interval", optarg, 0, 86400); break;
		case OPT_EXPLAIN: o->explain = 1; break;
		case OPT_UPDATE:
			o->update = (uint64_t)opt_int("update", optarg, 1, INT64_MAX);
			o->update_given = 1;
			break;
		case OPT_JSONL: o->jsonl = 1; break;
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
	int card_opts = o->tokenizer || o->neval || o->dedup || o->corpus || o->allow_missing || o->release ||
			o->dtype_given || o->usd > 0;
	if (o->dashboard && o->explain)
		usage_error("--dashboard and --explain are two modes: give one");
	if ((o->dashboard || o->explain) && card_opts)
		usage_error("%s", o->dashboard ? "--dashboard takes -o, --data and its own options, not the card's"
					       : "--explain takes --data and its own options, not the card's (it writes to stdout)");
	if ((o->watch || o->interval > 0) && !o->dashboard)
		usage_error("--watch and --interval apply to --dashboard");
	if (o->interval > 0 && !o->watch)
		usage_error("--interval applies to --watch");
	if (o->explain && !o->update_given)
		usage_error("--explain needs --update N");
	if (o->explain && o->out)
		usage_error("--explain writes to stdout: no -o");
	if ((o->update_given || o->jsonl) && !o->explain)
		usage_error("--update and --jsonl apply to --explain");
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
	if (o.explain)
		return explain(&o);
	if (o.dashboard)
		return dashboard(&o);
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
		/* the archive is written after the card: its place checked before either */
		check_output_dir(o.release, "--release", 0);
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
