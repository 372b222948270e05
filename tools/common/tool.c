/*
 * tool.c: shared tool plumbing; see tool.h.
 */
#include "tool.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "core/pathcheck.h"
#include "ckpt/runlock.h"
#include "backend/backend.h"
#include "core/version.h"
#include "model/model.h"

const char *tool_name = "lmt";
int tool_quiet;
const char *tool_context;

volatile int tool_interrupted;
static volatile sig_atomic_t deferred;

static void on_signal(int sig)
{
	if (deferred && !tool_interrupted && sig != SIGPIPE) {
		tool_interrupted = sig;
		return;
	}
	lmt_atomicfile_cleanup_signal();
	signal(sig, SIG_DFL);
	raise(sig);
}

void tool_defer_signals(void)
{
	deferred = 1;
}

void tool_check_interrupt(void)
{
	if (tool_interrupted)
		die("interrupted by signal %d; nothing written", tool_interrupted);
}

/* the library's failed assertions (core/error.h), told as they always were */
static void on_assert(const char *msg)
{
	fprintf(stderr, "lmt: %s\n", msg);
}

/* At exit, what stdout still buffers goes out: a failed write there (a full disk,
 * a closed descriptor) makes the exit status 1, for every output, --help and
 * --version included, which exited 0 without a word. Registered first, so it
 * runs after every other exit handler. */
static int stdout_said; /* a write error on stdout already said (die_write) */

static void close_stdout(void)
{
	/* the reason: the flush's, or, for a write that failed earlier, the errno left
	 * by it where it is one a write gives (not whatever came after) */
	int before = errno, failed_before = ferror(stdout);
	errno = 0;
	int failed_now = fflush(stdout) != 0;
	int e = failed_now ? errno : before;
	if (!failed_now && e != ENOSPC && e != EIO && e != EPIPE && e != EBADF && e != EFBIG && e != EDQUOT)
		e = 0;
	if ((failed_now || failed_before) && !stdout_said) {
		fprintf(stderr, "%s: '<stdout>': write error%s%s\n", tool_name, e ? ": " : "", e ? strerror(e) : "");
		_exit(1);
	}
}

void tool_init(const char *name)
{
	tool_name = name;
	atexit(close_stdout);
	lmt_set_assert_handler(on_assert);
	opterr = 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
}

static void vmsg(const char *pre, const char *fmt, va_list ap)
{
	fflush(stdout);
	fprintf(stderr, "%s: %s", tool_name, pre);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
	lmt_atomicfile_cleanup_signal();
	exit(1);
}

void die_err(const struct lmt_err *err)
{
	die("%s", err->msg[0] ? err->msg : lmt_strerror(err->code));
}

void die_write(const char *name)
{
	int e = errno;
	stdout_said |= !strcmp(name, "<stdout>");
	die("'%s': write: %s", name, strerror(e));
}

void usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char pre[512] = "";
	if (tool_context)
		snprintf(pre, sizeof pre, "%s: ", tool_context);
	vmsg(pre, fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try '%s --help'.\n", tool_name);
	exit(2);
}

void tool_passive_threads(char **argv)
{
	if (getenv("OMP_WAIT_POLICY"))
		return;
	if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1))
		return;
	execv("/proc/self/exe", argv);
	/* no /proc, or exec refused: run on with the default policy */
}

void bad_option(char **argv)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	if (optopt && optopt < 256 && arg[0] == '-' && arg[1] != '-')
		usage_error("unknown option or missing argument: '-%c'", optopt);
	usage_error("unknown option or missing argument: '%s'", arg);
}

void warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

void info(const char *fmt, ...)
{
	if (tool_quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

void path_fmt(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap)
		die("path too long: '%.60s...'", out);
}

void print_version(void)
{
	printf("%s (lmt) %s\n", tool_name, LMT_VERSION);
	printf("revision: %s\n", lmt_revision());
	printf("library: liblmt %s\n", LMT_VERSION);
	printf("backends: %s\n", lmt_backend_names());
	printf("cuda: %s\n", lmt_backend_cuda_status());
}

void put_record(struct lmt_json *j)
{
	if (lmt_json_end_line(j, stdout))
		die_write("<stdout>");
	lmt_json_reset(j);
}

const char **opt_push(const char **list, int *n, const char *s)
{
	list = realloc(list, ((size_t)*n + 1) * sizeof *list);
	if (!list)
		die("out of memory");
	list[(*n)++] = s;
	return list;
}

int opt_recompute(const char *arg)
{
	if (!strcmp(arg, "none"))
		return 0;
	if (!strcmp(arg, "block"))
		return 1;
	if (!strncmp(arg, "every:", 6))
		return (int)opt_int("recompute", arg + 6, 1, 1 << 20);
	usage_error("option '--recompute': '%s' is not none, block or every:K", arg);
}

long long opt_int(const char *opt, const char *s, long long min, long long max)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (end == s || *end || isspace((unsigned char)*s))
		usage_error("option '--%s': '%s' is not an integer", opt, s);
	if (errno == ERANGE)
		usage_error("option '--%s': %s is out of range [%lld, %lld]", opt, s, min, max);
	if (v < min || v > max)
		usage_error("option '--%s': %lld is out of range [%lld, %lld]", opt, v, min, max);
	return v;
}

/* strtod also reads hex floats ("0x10" is 16, "0x1p4" too), which no option means */
static int is_hex(const char *s)
{
	s += *s == '+' || *s == '-';
	return s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

uint64_t opt_size(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v) || isspace((unsigned char)*s) || is_hex(s))
		usage_error("option '--%s': '%s' is not a size", opt, s);
	double mul = 1;
	if (!strcmp(end, "") || !strcmp(end, "B")) mul = 1;
	else if (!strcmp(end, "k") || !strcmp(end, "K") || !strcmp(end, "kB")) mul = 1e3;
	else if (!strcmp(end, "M") || !strcmp(end, "MB")) mul = 1e6;
	else if (!strcmp(end, "G") || !strcmp(end, "GB")) mul = 1e9;
	else if (!strcmp(end, "T") || !strcmp(end, "TB")) mul = 1e12;
	else if (!strcmp(end, "Ki") || !strcmp(end, "KiB")) mul = 1024.0;
	else if (!strcmp(end, "Mi") || !strcmp(end, "MiB")) mul = 1024.0 * 1024;
	else if (!strcmp(end, "Gi") || !strcmp(end, "GiB")) mul = 1024.0 * 1024 * 1024;
	else if (!strcmp(end, "Ti") || !strcmp(end, "TiB")) mul = 1024.0 * 1024 * 1024 * 1024;
	else
		usage_error("option '--%s': unknown unit in '%s' (use k, M, G, T, powers of 1000, or Ki, Mi, Gi, Ti, "
			    "powers of 1024)", opt, s);
	double r = v * mul;
	if (r >= 1.8e19)
		usage_error("option '--%s': '%s' is too large", opt, s);
	return (uint64_t)r;
}

uint64_t opt_size_nz(const char *opt, const char *s)
{
	uint64_t v = opt_size(opt, s);
	if (!v)
		usage_error("option '--%s': '%s' is zero (it must be above 0)", opt, s);
	return v;
}

static double parse_double(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || isspace((unsigned char)*s) || is_hex(s))
		usage_error("option '--%s': '%s' is not a number", opt, s);
	if (errno == ERANGE)
		usage_error("option '--%s': %s is beyond what a double holds (%s)", opt, s,
			    fabs(v) < 1 ? "below 2.2e-308" : "above 1.8e308");
	if (!isfinite(v))
		usage_error("option '--%s': '%s' is not a finite number", opt, s);
	return v;
}

double opt_double(const char *opt, const char *s, double min, double max)
{
	double v = parse_double(opt, s);
	if (v < min || v > max)
		usage_error("option '--%s': %g is out of range [%g, %g]", opt, v, min, max);
	return v;
}

double opt_double_above(const char *opt, const char *s, double above, double max)
{
	double v = parse_double(opt, s);
	if (!(v > above) || v > max)
		usage_error("option '--%s': %g is out of range (%g, %g]", opt, v, above, max);
	return v;
}

int corpus_opt(int c, const char *arg, struct lmt_corpus_opts *o)
{
	switch (c) {
	case OPT_INPUT_FORMAT:
		if ((o->format = lmt_corpus_format_parse(arg)) < 0)
			usage_error("option '--input-format': '%s' is not auto, text or jsonl", arg);
		return 1;
	case OPT_TXT_DOCS:
		if ((o->txt_docs = lmt_txt_docs_parse(arg)) < 0)
			usage_error("option '--txt-docs': '%s' is not file, line or blank", arg);
		return 1;
	case OPT_DOC_SEP:
		if (!*arg)
			usage_error("option '--doc-sep': the separator is empty");
		o->doc_sep = arg;
		return 1;
	case OPT_TEXT_FIELD:
		o->text_field = arg;
		return 1;
	case OPT_KEEP_EMPTY:
		o->keep_empty = 1;
		return 1;
	case OPT_STRICT:
		o->strict = 1;
		return 1;
	case OPT_MAX_DOC_BYTES:
		if (!(o->max_doc = opt_size("max-doc-bytes", arg)))
			usage_error("option '--max-doc-bytes': a document of 0 bytes holds nothing");
		return 1;
	}
	return 0;
}

int model_opt(int c, const char *arg, struct lmt_gpt_config *m, int *context)
{
	switch (c) {
	case OPT_MODEL_LAYERS: m->L = (int)opt_int("layers", arg, 1, 1024); return 1;
	case OPT_MODEL_HEADS: m->NH = (int)opt_int("heads", arg, 1, 1024); return 1;
	case OPT_MODEL_CHANNELS: m->C = (int)opt_int("channels", arg, 1, 1 << 16); return 1;
	case OPT_MODEL_CONTEXT: *context = (int)opt_int("context", arg, 1, 1 << 20); return 1;
	case OPT_MODEL_UNTIE: m->untied = 1; return 1;
	}
	return 0;
}

void corpus_skips_warn(const struct lmt_corpus_skips *s)
{
	if (!s->n)
		return;
	struct lmt_strbuf b;
	lmt_strbuf_init(&b);
	for (size_t i = 0; i < s->nnames; i++)
		lmt_strbuf_printf(&b, "%s'%s' (%s)", i ? ", " : "", s->first[i].name, s->first[i].why);
	if (s->n > s->nnames)
		lmt_strbuf_printf(&b, " and %llu more", (unsigned long long)(s->n - s->nnames));
	warn("skipped %llu input%s (--strict refuses them): %s", (unsigned long long)s->n,
	     s->n == 1 ? "" : "s", b.buf ? b.buf : "");
	lmt_strbuf_release(&b);
}

void corpus_skips_json(struct lmt_json *j, const struct lmt_corpus_skips *s)
{
	if (!s->n)
		return;
	lmt_json_u64(j, "skipped", s->n);
	lmt_json_arr(j, "skipped_inputs");
	for (size_t i = 0; i < s->nnames; i++) {
		lmt_json_obj(j, NULL);
		lmt_json_str(j, "name", s->first[i].name);
		lmt_json_str(j, "why", s->first[i].why);
		lmt_json_obj_end(j);
	}
	lmt_json_arr_end(j);
}

int tool_threads(int requested)
{
	if (requested > 0) {
		/* more threads than CPUs wait on each other: -j 256 on 2 CPUs took tok-train
		 * 26 s where -j 2 took 0.04; said, not overruled (outputs are the same) */
		cpu_set_t set;
		int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
		static int said;
		if (cpus > 0 && requested > 4 * cpus && !said++)
			warn("-j %d: this process may use %d CPU%s; threads beyond them wait on each other, slower, "
			     "not faster", requested, cpus, cpus == 1 ? "" : "s");
		return requested;
	}
	const char *e = getenv("OMP_NUM_THREADS");
	if (e && atoi(e) > 0)
		return atoi(e);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

void check_outputs(const char *const *outs, const char *const *what, int nout, const char *const *ins, int nin)
{
	struct lmt_err err = { 0 };
	for (int i = 0; i < nout; i++) {
		if (outs[i] && !*outs[i])
			usage_error("option '%s': an empty path", what[i]);
		if (!outs[i] || !strcmp(outs[i], "-"))
			continue;
		for (int k = 0; k < nin; k++) {
			if (!ins[k] || !strcmp(ins[k], "-"))
				continue;
			if (lmt_path_check_output(outs[i], what[i], &ins[k], 1, &err))
				die_err(&err);
		}
	}
}

void check_output_dir(const char *path, const char *what, int dir_ok)
{
	struct stat st;
	if (!path || !strcmp(path, "-"))
		return;
	if (!*path)
		usage_error("option '%s': an empty path", what);
	/* as lmt_atomicfile_open will see it: a link's file, a device refused */
	struct lmt_err err = { 0 };
	char *resolved;
	if (lmt_atomicfile_target(path, &resolved, &err))
		die("%s (%s)", err.msg, what);
	if (resolved)
		path = resolved;
	size_t n = strlen(path);
	/* "DIR/" names a directory to put the file in (where dir_ok): that directory */
	int is_dir = (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) || (dir_ok && path[n - 1] == '/');
	if (is_dir && !dir_ok)
		die("'%s' (%s) is a directory: give a file name", path, what);
	char copy[PATH_MAX], dir[PATH_MAX];
	snprintf(copy, sizeof copy, "%s", path);
	snprintf(dir, sizeof dir, "%s", is_dir ? path : dirname(copy));
	if (stat(dir, &st) != 0)
		die("'%s' (%s): cannot write into '%s': %s", path, what, dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		die("'%s' (%s): '%s' is not a directory", path, what, dir);
	if (access(dir, W_OK) != 0)
		die("'%s' (%s): cannot write into '%s': %s", path, what, dir, strerror(errno));
	free(resolved);
}

/* the runs this process holds, by real path: a second descriptor of one RUN/lock,
 * closed, would drop the process's lock on it (runlock.h) */
#define TOOL_RUN_LOCKS 8
static struct lmt_run_lock run_locks[TOOL_RUN_LOCKS];
static char run_locked[TOOL_RUN_LOCKS][PATH_MAX];
static int nrun_locks;

/* at exit: no PID left in RUN/lock of a process that no longer holds it */
static void run_locks_release(void)
{
	for (int i = 0; i < nrun_locks; i++)
		lmt_run_unlock(&run_locks[i]);
}

void tool_lock_run(const char *run_dir)
{
	struct lmt_err err = { 0 };
	char real[PATH_MAX];
	if (!realpath(run_dir, real))
		return; /* no run there: nothing to own (the write itself reports it) */
	for (int i = 0; i < nrun_locks; i++)
		if (!strcmp(run_locked[i], real))
			return;
	if (nrun_locks == TOOL_RUN_LOCKS)
		die("'%s': more than %d runs written into at once", run_dir, TOOL_RUN_LOCKS);
	if (lmt_run_lock(run_dir, 0, &run_locks[nrun_locks], &err))
		die_err(&err);
	if (!nrun_locks)
		atexit(run_locks_release);
	strcpy(run_locked[nrun_locks++], real);
}

void tool_lock_output(const char *path)
{
	char run[PATH_MAX];
	if (path && strcmp(path, "-") && lmt_run_holding(path, run, sizeof run))
		tool_lock_run(run);
}
