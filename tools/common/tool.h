/*
 * tool.h: what every lmt tool's main() shares: its name in messages, die() and
 * usage errors with the documented exit codes, --version, signal handling that
 * removes partial output, and parsers for numeric option values.
 *
 * Exit codes: 0 success, 1 runtime/data/format error, 2 usage error.
 * This file is linked into the tools only; the library never exits.
 */
#ifndef LMT_TOOL_H
#define LMT_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "data/corpus.h"
#include "core/error.h"

extern const char *tool_name;
extern int tool_quiet;

/* Record the tool's name, install SIGINT/SIGTERM/SIGHUP/SIGPIPE handlers that
 * delete temporaries before dying, and silence getopt's own messages (the tools
 * report bad options through bad_option()). */
void tool_init(const char *name);
/*
 * For tools that clean up more than temporary files (a staging directory): after
 * tool_defer_signals(), a first SIGINT/SIGTERM/SIGHUP only sets tool_interrupted,
 * which the tool polls (tool_check_interrupt() dies cleanly, running atexit
 * handlers); a second one dies at once.
 */
extern volatile int tool_interrupted;
void tool_defer_signals(void);
void tool_check_interrupt(void);

/*
 * For tools that compute with oneDNN and OpenMP loops: OpenMP's threads must sleep
 * when idle, or spinning threads take cores from the work between parallel regions
 * (measured when the GEMMs were OpenBLAS's own pool: 17% of a GPT-2 step). OpenMP's wait policy is fixed when libgomp loads, before
 * main, so when OMP_WAIT_POLICY is unset this sets it to PASSIVE and executes the
 * program again (once; if that fails it carries on as it is).
 */
void tool_passive_threads(char **argv);

/* The usage error for getopt's '?': an unknown option or a missing argument. */
void bad_option(char **argv) __attribute__((noreturn));

void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void die_err(const struct lmt_err *err) __attribute__((noreturn));
/* "'NAME': write: <strerror(errno)>", the library's wording for a failed write.
 * Call it straight after the failing fwrite/fputs/fflush/fclose: errno is read
 * first, before die() flushes stdout (which may fail again and overwrite it). */
void die_write(const char *name) __attribute__((noreturn));
void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Human progress line on stderr, unless --quiet. */
void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void print_version(void);

struct lmt_json;
/* End the record j as one line of stdout (flushed) and empty it for the next;
 * dies on a write error. */
void put_record(struct lmt_json *j);

/* Where option values come from when not the command line ("'run.cfg': line 3"):
 * usage errors are prefixed with it while set. */
extern const char *tool_context;

/* snprintf for file paths: dies instead of truncating. */
void path_fmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Option values. Each dies with a usage error naming the option on bad input. */
long long opt_int(const char *opt, const char *s, long long min, long long max);
/* Accepts k/K (1e3), M (1e6), G (1e9), T (1e12), Ki/Mi/Gi/Ti (powers of 1024) suffixes. */
uint64_t opt_size(const char *opt, const char *s);
/* opt_size for a quantity with no meaning at 0 (a bandwidth, a peak, a count to
 * stop at): 0 is a usage error rather than taken as 'the default' */
uint64_t opt_size_nz(const char *opt, const char *s);
double opt_double(const char *opt, const char *s, double min, double max);
/* The range (above, max]: for values that must be positive (a divisor's term). */
double opt_double_above(const char *opt, const char *s, double above, double max);

/* A repeatable option's values: list (realloc'd, NULL to start) with s appended,
 * *n counting them; dies when out of memory. */
const char **opt_push(const char **list, int *n, const char *s);

/* --recompute's value as train spells it: none (0), block (1) or every:K (K). */
int opt_recompute(const char *arg);

/* Corpus options shared by the tools that read text; returns 1 if c was one. */
enum {
	OPT_INPUT_FORMAT = 0x1000,
	OPT_TXT_DOCS,
	OPT_DOC_SEP,
	OPT_TEXT_FIELD,
	OPT_KEEP_EMPTY,
	OPT_STRICT,
	OPT_MAX_DOC_BYTES,
	OPT_MODEL_LAYERS, /* the model's shape: model_opt */
	OPT_MODEL_HEADS,
	OPT_MODEL_CHANNELS,
	OPT_MODEL_CONTEXT,
	OPT_MODEL_UNTIE,
	OPT_TOOL_BASE, /* tools number their own long-only options from here */
};
int corpus_opt(int c, const char *arg, struct lmt_corpus_opts *o);

/* Their entries of a getopt_long table (--strict is a tool's own line: not every
 * reader offers it), and the lines of --help that every such tool prints alike. */
#define CORPUS_LONGOPTS \
	{ "input-format", required_argument, NULL, OPT_INPUT_FORMAT }, \
	{ "txt-docs", required_argument, NULL, OPT_TXT_DOCS }, \
	{ "doc-sep", required_argument, NULL, OPT_DOC_SEP }, \
	{ "text-field", required_argument, NULL, OPT_TEXT_FIELD }, \
	{ "keep-empty", no_argument, NULL, OPT_KEEP_EMPTY }, \
	{ "max-doc-bytes", required_argument, NULL, OPT_MAX_DOC_BYTES }
#define CORPUS_HELP_FORMAT \
	"      --input-format F    auto (by name), text or jsonl\n" \
	"      --txt-docs MODE     text documents: file (default), line, blank\n"
#define CORPUS_HELP_REST \
	"      --text-field NAME   JSONL field with the text (text)\n" \
	"      --keep-empty        keep empty documents\n" \
	"      --max-doc-bytes N   a longer document is an error (1Gi; k, M, G, Ki, Mi, Gi)\n" \
	"      --strict            a dangling, unreadable or binary input is an error\n"

/* The model's shape, one definition for the tools that take a model (train,
 * memledger): --layers N, --heads N, --channels N (into m), --context N (into
 * *context), --untie. Returns 1 if c was one of them. */
struct lmt_gpt_config;
int model_opt(int c, const char *arg, struct lmt_gpt_config *m, int *context);
/* What the corpus passed over (o->skips), told the user: one warning on stderr
 * naming the first few, and "skipped"/"skipped_inputs" in the summary record, both
 * only when something was skipped, so that clean runs print what they always did. */
void corpus_skips_warn(const struct lmt_corpus_skips *s);
struct lmt_json;
void corpus_skips_json(struct lmt_json *j, const struct lmt_corpus_skips *s);

/* Number of threads to use: --threads if given, else OMP_NUM_THREADS, else cores. */
int tool_threads(int requested);

/* No tool writes over one of its inputs: every output (outs[i], what[i] naming
 * it in the message; NULL entries skipped) must be apart from every input (NULL
 * and "-" skipped), compared by device and inode (core/pathcheck.h); exit 1
 * otherwise, before anything is written. */
void check_outputs(const char *const *outs, const char *const *what, int nout, const char *const *ins, int nin);
/* An output written only when the work is done (tok-train's tokenizer, train's
 * --export-llmc) can be written: the directory it goes into (path itself when
 * dir_ok and path is a directory, else the part before its last '/') exists and is
 * writable, and, unless dir_ok, path is not a directory; exit 1 otherwise, naming
 * the option (what), before the work. NULL and "-" pass. */
void check_output_dir(const char *path, const char *what, int dir_ok);
/*
 * A tool about to write into a run directory is one of its writers (runlock.h):
 * tool_lock_run takes the lock of run_dir, tool_lock_output that of the run the
 * output path lies in (lmt_run_holding: by what the path is, not how it is
 * spelled; no run, nothing to take). Held until exit, each run once; a run
 * another process owns dies naming it and the holder's PID.
 */
void tool_lock_run(const char *run_dir);
void tool_lock_output(const char *path);

#endif
