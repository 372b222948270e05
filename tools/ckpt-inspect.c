/*
 * ckpt-inspect: what a checkpoint holds, whether it is intact, and how two differ.
 *
 *	ckpt-inspect run/ckpt/step-00001000        # the state, every tensor and its statistics
 *	ckpt-inspect run                           # the run's newest checkpoint
 *	ckpt-inspect --verify run/ckpt/step-00001000
 *	ckpt-inspect --diff run/ckpt/step-00000500 run/ckpt/step-00001000
 *
 * The library finds, this tool prints (git's fsck is the model): lmt_ckpt_verify
 * walks every file and every chunk and reports each finding, so that --verify names
 * all of them and train --resume refuses what --verify flags; the scan of every
 * tensor behind a listing (shape, statistics, CRC-32C as found), the comparisons
 * of --diff and the explanation of a directory that is not a checkpoint (an
 * interrupted save, a damaged copy) are the library's too (ckpt/inspect.h,
 * ckpt/verify.h). Data files are read in blocks of a few MiB, never mapped or
 * loaded whole, so a checkpoint of any size is inspected in constant memory.
 * stdout: JSONL, or a table when it is a terminal; stderr: human messages.
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/inspect.h"
#include "ckpt/inspecttext.h"
#include "ckpt/runlock.h"
#include "ckpt/trainstate.h"
#include "ckpt/verify.h"
#include "core/json.h"
#include "progress.h"
#include "tool.h"
#include "core/util.h"

enum {
	OPT_VERIFY = OPT_TOOL_BASE,
	OPT_DIFF,
	OPT_TENSOR,
	OPT_NO_STATS,
	OPT_IGNORE,
	OPT_ATOL,
	OPT_JSON,
	OPT_TABLE,
	OPT_REHASH,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "verify", no_argument, NULL, OPT_VERIFY },
	{ "diff", no_argument, NULL, OPT_DIFF },
	{ "tensor", required_argument, NULL, OPT_TENSOR },
	{ "no-stats", no_argument, NULL, OPT_NO_STATS },
	{ "ignore", required_argument, NULL, OPT_IGNORE },
	{ "atol", required_argument, NULL, OPT_ATOL },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "table", no_argument, NULL, OPT_TABLE },
	{ "rehash", no_argument, NULL, OPT_REHASH },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: ckpt-inspect [options] CKPT|RUN\n"
	       "       ckpt-inspect --verify [options] CKPT|RUN\n"
	       "       ckpt-inspect --diff [options] A B\n"
	       "       ckpt-inspect --rehash CKPT\n"
	       "\n"
	       "List a checkpoint's training state and its tensors with their statistics,\n"
	       "verify its files, or compare two checkpoints. CKPT is RUN/ckpt/step-N; a run\n"
	       "directory stands for its newest checkpoint. A directory that is not a\n"
	       "checkpoint (an interrupted save) is explained, and exits 1.\n"
	       "\n"
	       "      --verify            re-read every file: size, header, payload SHA-256,\n"
	       "                          every chunk's CRC-32C; name every bad file and tensor\n"
	       "      --diff              compare checkpoints A and B: each tensor (max |a-b|,\n"
	       "                          relative difference) and each state field\n"
	       "      --tensor GLOB       only the tensors whose name matches GLOB, such as\n"
	       "                          'param/*' (repeatable; listing and --diff)\n"
	       "      --no-stats          list from the manifest alone, reading no data\n"
	       "      --ignore KEY        --diff: leave out the state field KEY and what it\n"
	       "                          holds, such as clocks or config (repeatable)\n"
	       "      --atol X            --diff: elements within X of each other are equal\n"
	       "                          (default 0: equal means bitwise equal)\n"
	       "      --rehash            seal CKPT's manifest anew as it stands (after an edit\n"
	       "                          you stand behind, or a wave-1 manifest), then verify\n"
	       "      --json              JSONL on stdout, even on a terminal\n"
	       "      --table             a table for people on stdout, even when redirected\n"
	       "  -q, --quiet             no progress or informational messages on stderr\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success (--diff: no difference), 1 a problem found, an error,\n"
	       "or (--diff) a difference, 2 usage error. See ckpt-inspect(1).\n");
}

static struct {
	int verify, diff, no_stats, json, table, rehash;
	double atol;
	const char **globs, **ignore;
	int nglobs, nignore;
} O;

static int table;                     /* a human table on stdout instead of JSONL */

/* ---- small helpers ---- */

static void put_line(struct lmt_json *j)
{
	if (lmt_json_end_line(j, stdout))
		die_write("<stdout>");
}

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (fflush(stdout) || ferror(stdout))
		die_write("<stdout>");
}

/* Table lines from lib/ckpt/inspecttext.h, written and the buffer emptied. */
static void out_text(struct lmt_strbuf *b)
{
	if (b->oom)
		die("out of memory");
	if (b->len)
		out("%s", b->buf);
	lmt_strbuf_release(b);
}

/* A message on stderr, as die() writes it, without exiting. */
static void say(const char *msg)
{
	fprintf(stderr, "%s: %s\n", tool_name, msg);
}

static const char *pl(long n)
{
	return n == 1 ? "" : "s";
}

/* Is the tensor called name one --tensor asks for? (ctx: unused) */
static int selected(void *ctx, const char *name)
{
	(void)ctx;
	if (!O.nglobs)
		return 1;
	for (int i = 0; i < O.nglobs; i++)
		if (!fnmatch(O.globs[i], name, 0))
			return 1;
	return 0;
}

/* The JSON text of x (malloc'd), or NULL for NULL: numbers in the manifest's
 * shortest form (lmt_json_jansson). */
static char *dump(json_t *x)
{
	char *s = x ? lmt_json_jansson_text(x) : NULL;
	if (x && !s)
		die("out of memory");
	return s;
}

static void bar_update(void *ctx, uint64_t bytes)
{
	lmt_progress_update(ctx, bytes);
}

/* ---- opening ---- */

/* Say what dir holds and why it is not a checkpoint, then exit 1. why is the
 * library's reason when there is a manifest.json that does not open, else NULL. */
static void explain(const char *dir, const struct lmt_err *why) __attribute__((noreturn));
static void explain(const char *dir, const struct lmt_err *why)
{
	struct lmt_ckpt_explanation x;
	struct lmt_err err = { 0 };
	if (lmt_ckpt_explain(&x, dir, why ? why->msg : NULL, &err))
		die_err(&err);
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_ckpt_text_explanation(&b, dir, &x);
		out_text(&b);
	} else {
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_ckpt_record_explanation(&j, dir, &x);
		put_line(&j);
		lmt_json_release(&j);
	}
	die("%s", x.reason);
}

/* newer checkpoints of a run that did not open, passed over for an older one */
static int skipped_newer;

static void warn_msg(void *ctx, const char *msg)
{
	(void)ctx;
	skipped_newer += !strncmp(msg, "skipping '", 10);
	warn("%s", msg);
}

/* Resolve arg (a checkpoint or a run directory, its newest) into path. */
static void resolve(const char *arg, char *path, size_t cap)
{
	struct lmt_err err = { 0 };
	int from_run;
	if (lmt_ckpt_resolve(arg, path, cap, &from_run, warn_msg, NULL, &err))
		die_err(&err);
	if (from_run)
		info("'%s': inspecting its newest checkpoint, '%s'", arg, path);
}

/* Open a checkpoint and look at its files; with explain_bad, a directory that is
 * not one is explained (exit 1), else refused. */
static void ck_open(struct lmt_ckpt_target *k, const char *path, int explain_bad)
{
	struct lmt_err err = { 0 };
	if (!lmt_ckpt_target_open(k, path, &err))
		return;
	if (err.code == LMT_ENOMEM)
		die_err(&err);
	if (explain_bad)
		explain(path, k->no_manifest ? NULL : &err);
	if (k->no_manifest)
		die("'%s': no manifest.json: not a checkpoint (ckpt-inspect '%s' alone says what the directory holds)",
		    path, path);
	die("%s (ckpt-inspect '%s' alone says what the directory holds)", err.msg, path);
}

/* What arg names, opened into k (path: PATH_MAX bytes), or explained (exit 1). */
static void ck_open_arg(struct lmt_ckpt_target *k, const char *arg, char *path)
{
	resolve(arg, path, PATH_MAX);
	ck_open(k, path, 1);
}

static void ck_close(struct lmt_ckpt_target *k)
{
	lmt_ckpt_target_close(k);
}

/* ---- listing ---- */

/* The checkpoint, its files and its state. */
static void list_head(const struct lmt_ckpt_target *k)
{
	const struct lmt_ckpt *c = &k->c;
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_ckpt_text_checkpoint(&b, k);
		out_text(&b);
	} else {
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_ckpt_record_checkpoint(&j, k->path, c, k->f, !k->uncommitted);
		put_line(&j);
		lmt_json_release(&j);
	}
	for (int i = 0; i < c->nfiles; i++)
		if (k->f[i].problem[0])
			say(k->f[i].problem);
}

/* One tensor, as a table row (w: the name column's width) or a record. */
static void list_tensor(struct lmt_json *j, const struct lmt_ckpt_tscan *t, int w)
{
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_ckpt_text_tensor(&b, t, w);
		out_text(&b);
		return;
	}
	lmt_ckpt_record_tensor(j, t);
	put_line(j);
}

/* The totals of a listing. */
static void list_summary(const struct lmt_ckpt_target *k, const struct lmt_ckpt_scan *s)
{
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_ckpt_text_summary(&b, k, s, !O.no_stats);
		out_text(&b);
		return;
	}
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_ckpt_record_summary(&j, k->path, &k->c, s, !O.no_stats, !k->uncommitted);
	put_line(&j);
	lmt_json_release(&j);
}

static int list(const char *arg)
{
	char path[PATH_MAX];
	struct lmt_ckpt_target k;
	ck_open_arg(&k, arg, path);
	double t0 = lmt_now();
	list_head(&k);
	int w = 6;
	uint64_t total = 0;
	for (int i = 0; i < k.c.nt; i++)
		if (selected(NULL, k.c.t[i].name)) {
			w = LMT_MAX(w, (int)strlen(k.c.t[i].name));
			total += k.c.t[i].numel * 4;
		}
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_ckpt_text_tensor_head(&b, w, !O.no_stats);
		out_text(&b);
	}
	struct lmt_progress bar;
	struct lmt_ckpt_scan s;
	struct lmt_err err = { 0 };
	if (lmt_ckpt_scan_init(&s, &k.c, k.f, !O.no_stats, bar_update, &bar, &err))
		die_err(&err);
	lmt_progress_init(&bar, "reading", "B", total, tool_quiet || O.no_stats);
	struct lmt_json j;
	lmt_json_init(&j);
	for (int i = 0; i < k.c.nt; i++) {
		struct lmt_ckpt_tscan t;
		if (!selected(NULL, k.c.t[i].name))
			continue;
		lmt_ckpt_scan_tensor(&s, &k.c.t[i], &t);
		if (table)
			lmt_progress_done(&bar);
		list_tensor(&j, &t, w);
		if (!t.ok && s.bad_tensors <= 8)
			say(t.err);
	}
	lmt_json_release(&j);
	lmt_ckpt_scan_release(&s);
	if (s.bad_tensors > 8)
		fprintf(stderr, "%s: and %d more bad tensors (the JSONL records list every one)\n", tool_name,
			s.bad_tensors - 8);
	lmt_progress_done(&bar);
	for (int g = 0; g < O.nglobs; g++) {
		int any = 0;
		for (int i = 0; i < k.c.nt && !any; i++)
			any = !fnmatch(O.globs[g], k.c.t[i].name, 0);
		if (!any)
			warn("no tensor of '%s' matches '%s'", path, O.globs[g]);
	}
	list_summary(&k, &s);
	double secs = lmt_now() - t0;
	if (s.nonfinite)
		warn("'%s': %llu non-finite value%s in %d tensor%s", path, (unsigned long long)s.nonfinite,
		     pl((long)s.nonfinite), s.nonfinite_tensors, pl(s.nonfinite_tensors));
	if (k.name_problem[0])
		say(k.name_problem);
	if (k.uncommitted)
		die("'%s': an interrupted save, never renamed into place: it is not a checkpoint (train --resume "
		    "removes it)", path);
	if (s.bad_files || s.bad_tensors || k.name_problem[0])
		die("'%s': %d of %d file%s and %d of %d tensor%s are bad%s", path, s.bad_files, k.c.nfiles,
		    pl(k.c.nfiles), s.bad_tensors, s.tensors, pl(s.tensors),
		    k.name_problem[0] ? ", and its name is not its update" : "");
	if (!O.no_stats)
		info("'%s': %d tensor%s, %.1f MB read in %.2f s", path, s.tensors, pl(s.tensors), s.bytes / 1e6, secs);
	ck_close(&k);
	return 0;
}

/* ---- verify ---- */

struct vctx {
	struct lmt_json j;
	const struct lmt_ckpt_target *k;
	struct lmt_progress *bar;
	const char *file;       /* the file whose chunks are being reported */
	int said, more;
};

/* The bad chunks of the last file beyond the first 8: counted on stderr. */
static void said_more(struct vctx *v)
{
	if (v->more)
		fprintf(stderr, "%s: '%s': and %d more bad tensors (the JSONL records list every one)\n", tool_name,
			v->file, v->more);
	v->said = v->more = 0;
}

static int print_finding(void *ctx, const struct lmt_ckpt_finding *f)
{
	struct vctx *v = ctx;
	if (f->kind != LMT_CKPT_FINDING_CHUNK)
		said_more(v);
	if (f->kind == LMT_CKPT_FINDING_EXTRA) {
		warn("%s", f->msg);
		return 0;
	}
	if (f->kind == LMT_CKPT_FINDING_FILE)
		lmt_progress_done(v->bar);
	v->file = f->path;
	if (table && f->kind == LMT_CKPT_FINDING_FILE)
		out("%-24s %s\n", v->k->c.files[f->file].name, f->ok ? "ok" : f->msg);
	else if (table)
		out("  %s\n", f->msg);
	else {
		lmt_ckpt_record_finding(&v->j, f);
		put_line(&v->j);
	}
	if (f->kind == LMT_CKPT_FINDING_FILE && !f->ok)
		say(f->msg);
	else if (f->kind == LMT_CKPT_FINDING_CHUNK && v->said < 8) {
		say(f->msg);
		v->said++;
	} else if (f->kind == LMT_CKPT_FINDING_CHUNK) {
		v->more++;
	}
	return 0;
}

static void verify_progress(void *ctx, uint64_t bytes)
{
	lmt_progress_update(((struct vctx *)ctx)->bar, bytes);
}

static int verify(const char *arg)
{
	char path[PATH_MAX];
	struct lmt_ckpt_target k;
	ck_open_arg(&k, arg, path);
	double t0 = lmt_now();
	uint64_t total = 0;
	for (int i = 0; i < k.c.nfiles; i++)
		total += k.f[i].size;
	struct lmt_progress bar;
	lmt_progress_init(&bar, "verifying", "B", total, tool_quiet);
	struct vctx v = { .k = &k, .bar = &bar };
	lmt_json_init(&v.j);
	struct lmt_ckpt_verify_ops ops = { print_finding, verify_progress, &v };
	struct lmt_ckpt_verify_result res;
	struct lmt_err err = { 0 };
	if (lmt_ckpt_verify(&k.c, &ops, &res, &err) < 0)
		die_err(&err);
	said_more(&v);
	/* the files match the manifest; is the manifest train's state, whole? (the rule
	 * resume applies, so that --verify and resume agree) */
	struct lmt_err serr = { 0 };
	int state_bad = lmt_trainstate_check(&k.c, &serr) != 0;
	double secs = lmt_now() - t0;
	int bad = res.bad_files || res.bad_tensors;
	if (table) {
		out("%d file%s, %d tensor%s: %s\n", k.c.nfiles, pl(k.c.nfiles), k.c.nt, pl(k.c.nt),
		    bad ? "SOME ARE BAD" : "every size, SHA-256 and CRC-32C matches the manifest");
	} else {
		lmt_ckpt_record_verify_summary(&v.j, path, &k.c, &res,
					       !bad && !state_bad && !k.uncommitted && !k.name_problem[0], !k.uncommitted,
					       secs);
		put_line(&v.j);
	}
	lmt_json_release(&v.j);
	if (k.name_problem[0])
		say(k.name_problem);
	if (bad)
		die("'%s': %d of %d file%s and %d of %d tensor%s failed verification", path, res.bad_files, k.c.nfiles,
		    pl(k.c.nfiles), res.bad_tensors, k.c.nt, pl(k.c.nt));
	if (state_bad)
		die("%s", serr.msg);
	if (k.uncommitted)
		die("'%s': its files are intact, but it is an interrupted save, never renamed into place: not a "
		    "checkpoint", path);
	if (k.name_problem[0])
		die("'%s': not a valid checkpoint: its name is not its update", path);
	info("'%s': %d file%s, %d tensor%s, %.1f MB verified in %.2f s", path, k.c.nfiles, pl(k.c.nfiles), k.c.nt,
	     pl(k.c.nt), res.bytes / 1e6, secs);
	/* a run is not intact when its newest checkpoints are damaged, whatever the
	 * older one a resume would fall back to */
	if (skipped_newer)
		die("the run's %d newer checkpoint%s did not open (above): '%s', the newest that does, verifies",
		    skipped_newer, pl(skipped_newer), path);
	ck_close(&k);
	return 0;
}

/* ---- diff ---- */

struct diffctx {
	struct lmt_json j;
	struct lmt_progress *bar;
	int nstate, w;          /* state fields that differ; the name column's width */
	int said, more;         /* tensor errors said on stderr, and those left unsaid */
};

static void state_diff_put(void *ctx, const char *p, void *xa, void *xb)
{
	struct diffctx *d = ctx;
	d->nstate++;
	char *sa = dump(xa), *sb = dump(xb);
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_ckpt_text_state(&b, p, sa, sb);
		out_text(&b);
	} else {
		lmt_ckpt_record_state(&d->j, p, sa, sb);
		put_line(&d->j);
	}
	free(sa);
	free(sb);
}

/* One tensor's comparison, as a table row or a record. */
static void diff_put(void *ctx, const struct lmt_ckpt_entry *ea, const struct lmt_ckpt_entry *eb,
		     enum lmt_ckpt_tstatus st, const struct lmt_ckpt_tdiff *t, const char *err)
{
	struct diffctx *d = ctx;
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_progress_done(d->bar);
		lmt_ckpt_text_tdiff(&b, ea, eb, st, t, err, d->w);
		out_text(&b);
	} else {
		lmt_ckpt_record_tdiff(&d->j, ea, eb, st, t, err);
		put_line(&d->j);
	}
	/* the first 8 on stderr, as --verify does; the records hold every one */
	if (err[0] && d->said < 8) {
		say(err);
		d->said++;
	} else if (err[0]) {
		d->more++;
	}
}

static void diff_progress(void *ctx, uint64_t bytes)
{
	lmt_progress_update(((struct diffctx *)ctx)->bar, bytes);
}

static int diff(const char *arga, const char *argb)
{
	char pa[PATH_MAX], pb[PATH_MAX];
	struct lmt_ckpt_target A, B;
	resolve(arga, pa, sizeof pa);
	resolve(argb, pb, sizeof pb);
	ck_open(&A, pa, 0);
	ck_open(&B, pb, 0);
	int errors = 0;
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < (s ? &B : &A)->c.nfiles; i++)
			if ((s ? &B : &A)->f[i].problem[0]) {
				say((s ? &B : &A)->f[i].problem);
				errors++;
			}
	struct diffctx d = { .w = 6 };
	lmt_json_init(&d.j);
	if (table) {
		out("a: '%s' (update %llu, world %d)\n", pa, (unsigned long long)A.c.update, A.c.world);
		out("b: '%s' (update %llu, world %d)\n", pb, (unsigned long long)B.c.update, B.c.world);
	} else {
		lmt_ckpt_record_diff(&d.j, pa, &A.c, pb, &B.c, O.atol);
		put_line(&d.j);
	}
	lmt_ckpt_state_diff("state", json_object_get(A.c.manifest, "state"), json_object_get(B.c.manifest, "state"),
			    O.ignore, O.nignore, state_diff_put, &d);

	uint64_t total = 0;
	for (int i = 0; i < A.c.nt; i++)
		if (selected(NULL, A.c.t[i].name))
			total += A.c.t[i].numel * 4;
	for (int i = 0; i < A.c.nt; i++)
		d.w = LMT_MAX(d.w, (int)strlen(A.c.t[i].name));
	for (int i = 0; i < B.c.nt; i++)
		d.w = LMT_MAX(d.w, (int)strlen(B.c.t[i].name));
	struct lmt_progress bar;
	lmt_progress_init(&bar, "comparing", "B", total, tool_quiet);
	d.bar = &bar;
	struct lmt_ckpt_diff_ops ops = { selected, diff_put, diff_progress, &d };
	struct lmt_err err = { 0 };
	int n[LMT_CKPT_TSTATUS_COUNT];
	if (lmt_ckpt_diff((struct lmt_ckpt_side){ &A.c, A.f }, (struct lmt_ckpt_side){ &B.c, B.f }, O.atol, &ops, n,
			  &err))
		die_err(&err);
	lmt_progress_done(&bar);
	if (d.more)
		fprintf(stderr, "%s: and %d more tensors that could not be compared (the records list every one)\n",
			tool_name, d.more);
	int n_differ = n[LMT_CKPT_TSTATUS_DIFFER], n_shape = n[LMT_CKPT_TSTATUS_SHAPE], n_only_a = n[LMT_CKPT_TSTATUS_ONLY_A], n_only_b = n[LMT_CKPT_TSTATUS_ONLY_B], n_err = n[LMT_CKPT_TSTATUS_ERROR];
	errors += n_err;
	int identical = !d.nstate && !n_differ && !n_shape && !n_only_a && !n_only_b && !errors;
	if (table) {
		struct lmt_strbuf b = { 0 };
		lmt_ckpt_text_diff_summary(&b, n, d.nstate, identical);
		out_text(&b);
	} else {
		lmt_ckpt_record_diff_summary(&d.j, n, errors, d.nstate, identical);
		put_line(&d.j);
	}
	lmt_json_release(&d.j);
	ck_close(&A);
	ck_close(&B);
	if (errors)
		die("'%s' and '%s' could not be compared in full (%d errors)", pa, pb, errors);
	if (!identical)
		info("'%s' and '%s' differ: %d tensor%s, %d state field%s", pa, pb, n_differ + n_shape + n_only_a + n_only_b,
		     pl(n_differ + n_shape + n_only_a + n_only_b), d.nstate, pl(d.nstate));
	return identical ? 0 : 1;
}

/* ---- rehash: deliberate surgery, said loudly ---- */

static int rehash(const char *dir)
{
	struct lmt_err err = { 0 };
	struct lmt_ckpt_rehash_result r;
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	/* re-sealing writes into the run: not while train owns it */
	char run_dir[PATH_MAX], mf[PATH_MAX], ck[PATH_MAX];
	struct stat st;
	snprintf(mf, sizeof mf, "%s/manifest.json", dir);
	snprintf(ck, sizeof ck, "%s/ckpt", dir);
	if (stat(mf, &st) != 0 && stat(ck, &st) == 0 && S_ISDIR(st.st_mode))
		die("'%s' is a run directory: --rehash re-seals one checkpoint, named (such as '%s/ckpt/step-N')", dir, dir);
	if (lmt_run_of_ckpt(dir, run_dir, sizeof run_dir) && stat(run_dir, &st) == 0)
		tool_lock_run(run_dir);
	tool_lock_output(dir); /* the run found by what the path is, not its spelling */
	if (lmt_ckpt_rehash(dir, &r, &err))
		die_err(&err);
	lmt_sha256_hex(r.old_sha256, a);
	lmt_sha256_hex(r.new_sha256, b);
	/* on stderr whatever --quiet says: this is the user vouching for the contents */
	fprintf(stderr, "%s: RE-SEALED '%s/manifest.json' as it now stands (%s%s): every field in it is now trusted "
		"as written; file sha256 %.16s... -> %.16s...\n", tool_name, dir,
		r.was_sealed ? "its seal matched already" : "its seal did not match: it was edited",
		r.old_schema < LMT_CKPT_SCHEMA ? ", carried from schema 1" : "", a, b);
	if (!table) {
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_ckpt_record_rehash(&j, dir, &r, a, b);
		put_line(&j);
		lmt_json_release(&j);
	}
	/* the data files are checked against what was just vouched for */
	return verify(dir);
}

int main(int argc, char **argv)
{
	tool_init("ckpt-inspect");
	int c;
	while ((c = getopt_long(argc, argv, "hVq", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case 'q': tool_quiet = 1; break;
		case OPT_VERIFY: O.verify = 1; break;
		case OPT_DIFF: O.diff = 1; break;
		case OPT_TENSOR:
		case OPT_IGNORE: {
			const char ***list = c == OPT_TENSOR ? &O.globs : &O.ignore;
			int *n = c == OPT_TENSOR ? &O.nglobs : &O.nignore;
			if (!*optarg)
				usage_error("option '--%s': empty", c == OPT_TENSOR ? "tensor" : "ignore");
			*list = opt_push(*list, n, optarg);
			break;
		}
		case OPT_NO_STATS: O.no_stats = 1; break;
		case OPT_ATOL: O.atol = opt_double("atol", optarg, 0, 1e38); break;
		case OPT_JSON: O.json = 1; break;
		case OPT_TABLE: O.table = 1; break;
		case OPT_REHASH: O.rehash = 1; break;
		default: bad_option(argv);
		}
	}
	if (O.json && O.table)
		usage_error("--json and --table exclude each other");
	if (O.verify + O.diff + O.rehash > 1)
		usage_error("--verify, --diff and --rehash exclude each other");
	table = O.table || (!O.json && isatty(STDOUT_FILENO));
	int nargs = argc - optind;
	if (O.diff) {
		if (nargs != 2)
			usage_error("--diff compares two checkpoints: give A and B (%d given)", nargs);
		if (O.no_stats)
			usage_error("--no-stats applies to listing, not to --diff");
		return diff(argv[optind], argv[optind + 1]);
	}
	if (O.nignore || O.atol > 0)
		usage_error("--ignore and --atol apply to --diff");
	if (nargs != 1)
		usage_error(nargs ? "one checkpoint at a time (--diff compares two)" : "no checkpoint: give CKPT or RUN");
	if (O.rehash) {
		if (O.nglobs || O.no_stats)
			usage_error("--rehash seals the whole manifest: --tensor and --no-stats do not apply");
		return rehash(argv[optind]);
	}
	if (O.verify) {
		if (O.nglobs || O.no_stats)
			usage_error("--verify checks every file and tensor: --tensor and --no-stats do not apply");
		return verify(argv[optind]);
	}
	return list(argv[optind]);
}
