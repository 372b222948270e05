/*
 * dedup-minhash: remove exact and near-duplicate documents, and documents that
 * overlap evaluation sets, with MinHash and LSH.
 *
 *	dedup-minhash corpus/ > kept.jsonl
 *	dedup-minhash -t 0.7 --removed removed.jsonl --verify data.jsonl.zst > kept.jsonl
 *	dedup-minhash --against eval/ --removed removed.jsonl train/ > clean.jsonl
 *
 * The pipeline (two passes over the input, clustering in between) is
 * lib/data/dedup.c; this tool parses options, prints what the pipeline hands
 * back and writes the output files. stdin cannot be read twice, so it is copied
 * to an unlinked temporary file first (unless it already is a regular file).
 *
 * stdout: the kept documents as JSONL; --removed and --summary: JSONL files,
 * written atomically; stderr: human messages.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "data/corpus.h"
#include "core/digest.h"
#include "core/json.h"
#include "data/dedup.h"
#include "data/minhash.h"
#include "progress.h"
#include "data/textnorm.h"
#include "tool.h"
#include "core/util.h"

#define MAX_AGAINST 256
#define MAX_NGRAM LMT_DEDUP_MAX_NGRAM

enum {
	OPT_REMOVED = OPT_TOOL_BASE,
	OPT_SUMMARY,
	OPT_NUM_PERM,
	OPT_SHINGLE,
	OPT_SEED,
	OPT_VERIFY,
	OPT_AGAINST,
	OPT_NGRAM,
	OPT_NGRAM_MIN,
	OPT_NORMALIZE,
	OPT_METHOD,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "threshold", required_argument, NULL, 't' },
	{ "num-perm", required_argument, NULL, OPT_NUM_PERM },
	{ "method", required_argument, NULL, OPT_METHOD },
	{ "shingle", required_argument, NULL, OPT_SHINGLE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "normalize", required_argument, NULL, OPT_NORMALIZE },
	{ "removed", required_argument, NULL, OPT_REMOVED },
	{ "summary", required_argument, NULL, OPT_SUMMARY },
	{ "verify", no_argument, NULL, OPT_VERIFY },
	{ "against", required_argument, NULL, OPT_AGAINST },
	{ "ngram", required_argument, NULL, OPT_NGRAM },
	{ "ngram-min", required_argument, NULL, OPT_NGRAM_MIN },
	{ "threads", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	CORPUS_LONGOPTS,
	{ "strict", no_argument, NULL, OPT_STRICT },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: dedup-minhash [options] INPUT... > kept.jsonl\n"
	       "\n"
	       "Remove exact and near-duplicate documents (MinHash + LSH), and with --against\n"
	       "documents that overlap evaluation sets. Inputs: files, directories, JSONL,\n"
	       "compressed files, archives, or '-' for stdin. The kept documents go to stdout\n"
	       "as JSONL {\"text\",\"source\",\"id\"}, in input order.\n"
	       "\n"
	       "Near duplicates:\n"
	       "  -t, --threshold T       Jaccard similarity to aim LSH at, 0.01 to 1 (0.8)\n"
	       "      --num-perm N        signature values (MinHash bins), 1 to 1024 (128)\n"
	       "      --method M          oph (one permutation, densified) or classic\n"
	       "                          (--num-perm permutations, slower) (oph)\n"
	       "      --shingle N         words per shingle, 1 to 64 (5)\n"
	       "      --seed N            seed of the permutations (1)\n"
	       "      --normalize LIST    lower,digits,punct,space,accents (all), all or none\n"
	       "      --verify            also compute each removed document's exact Jaccard\n"
	       "                          similarity with the document it duplicates\n"
	       "\n"
	       "Decontamination:\n"
	       "      --against FILE      remove documents that match an evaluation document of\n"
	       "                          FILE (repeatable; same input options) by exact text,\n"
	       "                          a shared word n-gram, or MinHash\n"
	       "      --ngram N           words per n-gram, 1 to %d (13)\n"
	       "      --ngram-min N       evaluation documents of fewer words take part in\n"
	       "                          exact and MinHash matching only (8)\n"
	       "\n"
	       "Output:\n"
	       "      --removed FILE      one JSONL record per removed document: id, reason\n"
	       "                          (exact, near, contamination), what it duplicates,\n"
	       "                          similarity\n"
	       "      --summary FILE      a JSONL summary record\n"
	       "  -j, --threads N         signing threads (all cores); with 2 or more, one\n"
	       "                          more thread reads ahead\n"
	       "  -q, --quiet             no progress or summary line on stderr\n"
	       "\n"
	       "Input:\n"
	       CORPUS_HELP_FORMAT
	       "      --doc-sep STR       split text documents at STR instead\n"
	       CORPUS_HELP_REST
	       "\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See dedup-minhash(1).\n",
	       MAX_NGRAM);
}

struct opts {
	struct lmt_dedup_params p;
	const char *removed, *summary;
	const char *against[MAX_AGAINST];
	const char *ngram_opt;   /* an n-gram option given, for the check that needs --against */
	struct lmt_corpus_opts corpus;
};

static void oom(void)
{
	die("out of memory");
}

/* ---- stdin: spooled so that pass 2 can read it again ---- */

static off_t stdin_start = -1;

static void spool_stdin(void)
{
	struct stat st;
	if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
		stdin_start = lseek(STDIN_FILENO, 0, SEEK_CUR);
		if (stdin_start >= 0)
			return; /* a regular file: just read it again */
	}
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	char path[4096];
	snprintf(path, sizeof path, "%s/dedup-minhash-stdin.XXXXXX", dir);
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		die("'%s': cannot create a temporary file to hold stdin: %s", dir, strerror(errno));
	unlink(path); /* nothing to clean up, whatever happens */
	char *buf = malloc(1 << 20);
	if (!buf)
		oom();
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf, 1 << 20);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("'<stdin>': read: %s", strerror(errno));
		if (r == 0)
			break;
		for (ssize_t off = 0; off < r;) {
			ssize_t w = write(fd, buf + off, (size_t)(r - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				die("'%s': writing the copy of stdin: %s", dir, strerror(errno));
			off += w;
		}
	}
	free(buf);
	if (dup2(fd, STDIN_FILENO) < 0)
		die("'<stdin>': dup2: %s", strerror(errno));
	close(fd);
	stdin_start = 0;
	if (lseek(STDIN_FILENO, 0, SEEK_SET) < 0)
		die("'<stdin>': seek: %s", strerror(errno));
}

static void rewind_stdin(void)
{
	if (stdin_start >= 0 && lseek(STDIN_FILENO, stdin_start, SEEK_SET) < 0)
		die("'<stdin>': seek: %s", strerror(errno));
}

/* ---- what the pipeline hands back ---- */

struct out {
	struct lmt_json j;
	struct lmt_atomicfile *removed;
	struct lmt_progress bar;
	const char *what, *unit;   /* of the next progress bar */
	int bar_on;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct out *u = ctx;
	if (!u->bar_on) {
		lmt_progress_init(&u->bar, u->what, u->unit, total, tool_quiet);
		u->bar_on = 1;
		return;
	}
	lmt_progress_update(&u->bar, done);
}

static void progress_done(struct out *u)
{
	lmt_progress_done(&u->bar);
	u->bar_on = 0;
}

static void write_line(struct lmt_json *j, FILE *fp, const char *what)
{
	lmt_json_end(j);
	if (j->out.oom)
		oom();
	/* no flush per line: stdout is flushed once a batch */
	if (fwrite(j->out.buf, 1, j->out.len, fp) != j->out.len || putc('\n', fp) == EOF)
		die_write(what);
}

static int on_kept(void *ctx, const struct lmt_doc *doc, const char *source, const char *id,
		   struct lmt_err *err)
{
	(void)err;
	struct lmt_json *j = &((struct out *)ctx)->j;
	lmt_json_begin(j);
	if (doc->escaped) /* the input's JSON string, already as lmt_json_escape writes it */
		lmt_json_str_escaped(j, "text", doc->text, doc->len);
	else
		lmt_json_strn(j, "text", doc->text, doc->len);
	lmt_json_str(j, "source", source);
	lmt_json_str(j, "id", id);
	write_line(j, stdout, "<stdout>");
	return 0;
}

static int on_removed(void *ctx, const struct lmt_dedup_removal *r, struct lmt_err *err)
{
	(void)err;
	struct out *u = ctx;
	struct lmt_json *j = &u->j;
	int contam = r->reason == LMT_DEDUP_REASON_CONTAMINATION;
	lmt_json_begin(j);
	lmt_json_str(j, "id", r->id);
	lmt_json_str(j, "reason", lmt_dedup_reason_name(r->reason));
	if (contam)
		lmt_json_str(j, "method", lmt_dedup_method_name(r->method));
	lmt_json_str(j, contam ? "eval_id" : "duplicate_of", r->other_id);
	lmt_json_num(j, "estimated_jaccard", r->estimated_jaccard);
	if (r->has_jaccard)
		lmt_json_num(j, "jaccard", r->jaccard);
	write_line(j, u->removed->fp, u->removed->path);
	return 0;
}

static int on_batch(void *ctx, struct lmt_err *err)
{
	(void)ctx;
	(void)err;
	if (fflush(stdout) || ferror(stdout))
		die_write("<stdout>");
	return 0;
}

/* ---- main ---- */

struct timings {
	double eval, pass1, cluster, pass2, total;
};

static void write_summary(const struct opts *o, const struct lmt_dedup *d, const struct timings *t,
			  struct lmt_atomicfile *af)
{
	struct lmt_json j;
	lmt_json_init(&j);
	char norm[64];
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "summary");
	lmt_json_u64(&j, "documents", d->n);
	lmt_json_u64(&j, "kept", d->kept);
	lmt_json_obj(&j, "removed");
	lmt_json_u64(&j, "exact", d->exact);
	lmt_json_u64(&j, "near", d->near);
	lmt_json_u64(&j, "contamination", d->ncontam);
	lmt_json_obj_end(&j);
	lmt_json_u64(&j, "clusters", d->clusters);
	lmt_json_u64(&j, "bands", (uint64_t)d->bands);
	lmt_json_u64(&j, "rows", (uint64_t)d->rows);
	lmt_json_u64(&j, "num_perm", (uint64_t)o->p.num_perm);
	lmt_json_str(&j, "method", lmt_minhash_method(&d->mh));
	lmt_json_num(&j, "threshold", o->p.threshold);
	lmt_json_u64(&j, "shingle", (uint64_t)o->p.shingle);
	lmt_json_str(&j, "normalize", lmt_textnorm_format(o->p.norm, norm));
	lmt_json_u64(&j, "seed", o->p.seed);
	if (o->p.nagainst) {
		lmt_json_u64(&j, "evaluation_documents", d->eval_docs);
		lmt_json_u64(&j, "ngram", (uint64_t)o->p.ngram);
	}
	lmt_json_num(&j, "bytes_per_doc", lmt_dedup_bytes_per_doc(d));
	lmt_json_u64(&j, "peak_rss", lmt_peak_rss());
	lmt_json_num(&j, "seconds", t->total);
	if (o->p.nagainst)
		lmt_json_num(&j, "eval_seconds", t->eval);
	lmt_json_num(&j, "pass1_seconds", t->pass1);
	lmt_json_num(&j, "cluster_seconds", t->cluster);
	lmt_json_num(&j, "pass2_seconds", t->pass2);
	lmt_json_num(&j, "docs_per_s", t->total > 0 ? (double)d->n / t->total : 0);
	lmt_json_u64(&j, "threads", (uint64_t)o->p.threads);
	lmt_json_str(&j, "kernel", lmt_minhash_kernel(&d->mh));
	lmt_json_str(&j, "norm_kernel", lmt_textnorm_kernel());
	corpus_skips_json(&j, o->corpus.skips);
	lmt_json_end(&j);
	if (j.out.oom)
		oom();
	fprintf(af->fp, "%s\n", j.out.buf); /* a write error shows at the commit */
	lmt_json_release(&j);
}

static void parse_options(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->p.threshold = 0.8;
	o->p.num_perm = 128;
	o->p.shingle = 5;
	o->p.ngram = 13;
	o->p.ngram_min = 8;
	o->p.seed = 1;
	o->p.norm = LMT_TEXTNORM_ALL;
	o->p.against = o->against;
	o->p.corpus = &o->corpus;
	o->p.kept_escaped = 1; /* on_kept writes lmt_doc.escaped texts as they are */
	static struct lmt_corpus_skips skips;
	o->corpus.skips = &skips;
	int c;
	const char *bad;
	while ((c = getopt_long(argc, argv, "hVt:j:q", longopts, NULL)) != -1) {
		if (corpus_opt(c, optarg, &o->corpus))
			continue;
		switch (c) {
		case 'h': usage(); exit(0);
		case 'V': print_version(); exit(0);
		case 't': o->p.threshold = opt_double("threshold", optarg, 0.01, 1); break;
		case OPT_NUM_PERM: o->p.num_perm = (int)opt_int("num-perm", optarg, 1, LMT_MINHASH_MAX_PERM); break;
		case OPT_METHOD:
			if (!strcmp(optarg, "oph"))
				o->p.method = LMT_MINHASH_METHOD_OPH;
			else if (!strcmp(optarg, "classic"))
				o->p.method = LMT_MINHASH_METHOD_CLASSIC;
			else
				usage_error("option '--method': '%s', expected oph or classic", optarg);
			break;
		case OPT_SHINGLE: o->p.shingle = (int)opt_int("shingle", optarg, 1, 64); break;
		case OPT_SEED: o->p.seed = (uint64_t)opt_int("seed", optarg, 0, INT64_MAX); break;
		case OPT_NORMALIZE:
			if (lmt_textnorm_parse(optarg, &o->p.norm, &bad))
				usage_error("option '--normalize': unknown step '%.*s' (lower, digits, punct, "
					    "space, accents; all or none)", (int)strcspn(bad, ","), bad);
			break;
		case OPT_REMOVED: o->removed = optarg; break;
		case OPT_SUMMARY: o->summary = optarg; break;
		case OPT_VERIFY: o->p.verify = 1; break;
		case OPT_AGAINST:
			if (o->p.nagainst == MAX_AGAINST)
				usage_error("too many --against options (at most %d)", MAX_AGAINST);
			if (!strcmp(optarg, "-"))
				usage_error("option '--against': evaluation sets are read from files, not stdin");
			o->against[o->p.nagainst++] = optarg;
			break;
		case OPT_NGRAM:
			o->p.ngram = (int)opt_int("ngram", optarg, 1, MAX_NGRAM);
			o->ngram_opt = "--ngram";
			break;
		case OPT_NGRAM_MIN:
			o->p.ngram_min = (int)opt_int("ngram-min", optarg, 1, MAX_NGRAM);
			o->ngram_opt = "--ngram-min";
			break;
		case 'j': o->p.threads = (int)opt_int("threads", optarg, 1, 1024); break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
}

int main(int argc, char **argv)
{
	struct opts o;
	tool_init("dedup-minhash");
	parse_options(argc, argv, &o);
	const char *const *inputs = (const char *const *)argv + optind;
	int ninputs = argc - optind;
	if (ninputs == 0)
		usage_error("no input: give files, directories or '-' for stdin");
	int nstdin = 0;
	for (int i = 0; i < ninputs; i++)
		nstdin += !strcmp(inputs[i], "-");
	if (nstdin > 1)
		usage_error("stdin ('-') given more than once");
	if (o.p.verify && !o.removed)
		usage_error("--verify computes similarities for --removed; give --removed FILE");
	if (o.ngram_opt && !o.p.nagainst)
		usage_error("%s sets the n-grams of the test against evaluation sets; give --against FILE", o.ngram_opt);
	/* an evaluation set named twice (or by two names) would count its documents twice */
	for (int i = 0; i < o.p.nagainst; i++) {
		struct stat a, b;
		for (int k = 0; k < i; k++)
			if (!strcmp(o.against[i], o.against[k]) ||
			    (!stat(o.against[i], &a) && !stat(o.against[k], &b) && a.st_dev == b.st_dev &&
			     a.st_ino == b.st_ino))
				usage_error("--against '%s' and '%s' are the same evaluation set", o.against[k],
					    o.against[i]);
	}
	if (o.removed && o.summary && !strcmp(o.removed, o.summary))
		usage_error("--removed and --summary name the same file '%s'", o.removed);
	{
		const char *outs[] = { o.removed, o.summary }, *what[] = { "--removed", "--summary" };
		check_outputs(outs, what, 2, inputs, ninputs);
		check_outputs(outs, what, 2, o.against, o.p.nagainst);
	}

	struct lmt_err err = { 0 };
	double t0 = lmt_now();
	/* open the output files first: a bad path fails before any work */
	struct lmt_atomicfile removed, summary;
	memset(&removed, 0, sizeof removed);
	memset(&summary, 0, sizeof summary);
	removed.slot = summary.slot = -1;
	if (o.removed && lmt_atomicfile_open(&removed, o.removed, &err))
		die_err(&err);
	if (o.summary && lmt_atomicfile_open(&summary, o.summary, &err))
		die_err(&err);
	if (nstdin)
		spool_stdin();
	o.p.threads = tool_threads(o.p.threads);
	struct lmt_dedup d;
	if (lmt_dedup_init(&d, &o.p, &err))
		die_err(&err);
	struct out u = { .removed = &removed };
	lmt_json_init(&u.j);
	struct lmt_dedup_callbacks cb = { &u, on_progress, on_kept, o.removed ? on_removed : NULL, on_batch };
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);

	struct timings tm;
	double t = lmt_now();
	if (o.p.nagainst) {
		if (lmt_dedup_read_eval(&d, &err))
			die_err(&err);
		info("%zu evaluation documents, %zu distinct n-grams", d.eval_docs, d.eval_ngrams);
	}
	tm.eval = lmt_now() - t;
	t = lmt_now();
	u.what = "signing", u.unit = "B";
	if (lmt_dedup_pass1(&d, inputs, ninputs, &cb, &err))
		die_err(&err);
	progress_done(&u);
	tm.pass1 = lmt_now() - t;
	t = lmt_now();
	if (lmt_dedup_cluster(&d, &err))
		die_err(&err);
	tm.cluster = lmt_now() - t;
	t = lmt_now();
	rewind_stdin();
	u.what = "writing", u.unit = "docs";
	if (lmt_dedup_pass2(&d, inputs, ninputs, &cb, &err))
		die_err(&err);
	progress_done(&u);
	tm.pass2 = lmt_now() - t;
	tm.total = lmt_now() - t0;
	corpus_skips_warn(o.corpus.skips);
	if (o.summary)
		write_summary(&o, &d, &tm, &summary);
	/* --removed and --summary are committed together, or neither is */
	struct lmt_atomicfile *outs[] = { &removed, &summary };
	if (lmt_atomicfile_commit_all(outs, 2, &err))
		die_err(&err);
	info("%zu documents, %llu kept; removed %llu exact, %llu near, %zu contaminated; "
	     "%llu clusters; %d bands x %d rows; %.2f s (%.0f docs/s)",
	     d.n, (unsigned long long)d.kept, (unsigned long long)d.exact, (unsigned long long)d.near,
	     d.ncontam, (unsigned long long)d.clusters, d.bands, d.rows, tm.total,
	     tm.total > 0 ? (double)d.n / tm.total : 0.0);
	lmt_json_release(&u.j);
	lmt_dedup_release(&d);
	return 0;
}
