/*
 * ckpt-inspect: what a checkpoint holds, whether it is intact, and how two differ.
 *
 *	ckpt-inspect run/ckpt/step-00001000        # the state, every tensor and its statistics
 *	ckpt-inspect run                           # the run's newest checkpoint
 *	ckpt-inspect --verify run/ckpt/step-00001000
 *	ckpt-inspect --diff run/ckpt/step-00000500 run/ckpt/step-00001000
 *
 * The manifest is parsed by the library (lmt_ckpt_open without verify), but the data
 * files are read here, with pread in blocks of a few MiB: never mapped or loaded
 * whole, so a checkpoint of any size is inspected in constant memory (one block, two
 * for --diff). The library's verifying open stops at the first problem; this tool
 * walks every file and every chunk itself so that --verify names all of them, and so
 * that it can say what a directory that is not a checkpoint holds (an interrupted
 * save, a damaged copy) instead of only refusing it. stdout: JSONL, or a table when
 * it is a terminal; stderr: human messages.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <fnmatch.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/binformat.h"
#include "ckpt/ckpt.h"
#include "core/digest.h"
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
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: ckpt-inspect [options] CKPT|RUN\n"
	       "       ckpt-inspect --verify [options] CKPT|RUN\n"
	       "       ckpt-inspect --diff [options] A B\n"
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
	int verify, diff, no_stats, json, table;
	double atol;
	const char **globs, **ignore;
	int nglobs, nignore;
} O;

static int table;                     /* a human table on stdout instead of JSONL */

#define BLOCK ((size_t)4 << 20)       /* bytes read at a time */

/* ---- small helpers ---- */

/* Append a problem to buf, "; " between problems; the first one wins if space runs out. */
static void note(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *buf, size_t cap, const char *fmt, ...)
{
	size_t n = strlen(buf);
	if (n && n + 3 < cap) {
		memcpy(buf + n, "; ", 3);
		n += 2;
	}
	if (n + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + n, cap - n, fmt, ap);
	va_end(ap);
}

static void put_line(struct lmt_json *j)
{
	if (lmt_json_end_line(j, stdout))
		die("'<stdout>': write error");
}

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (fflush(stdout) || ferror(stdout))
		die("'<stdout>': write error");
}

/* Read n bytes at off, or fewer at the end of the file; -1 on an error (errno). */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	if (off > (uint64_t)INT64_MAX - n)
		return 0; /* past any file there can be */
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static const char *pl(long n)
{
	return n == 1 ? "" : "s";
}

static const char *base_name(const char *path)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	static char b[NAME_MAX + 1];
	size_t s = n;
	while (s > 0 && path[s - 1] != '/')
		s--;
	snprintf(b, sizeof b, "%.*s", (int)(n - s), path + s);
	return b;
}

/* ".tmp-step-NNNNNNNN-PID": an interrupted save. */
static int parse_tmp_name(const char *name, unsigned long long *update, long *pid)
{
	char *end;
	if (strncmp(name, ".tmp-step-", 10))
		return 0;
	*update = strtoull(name + 10, &end, 10);
	if (end == name + 10 || *end != '-')
		return 0;
	*pid = strtol(end + 1, &end, 10);
	return !*end;
}

static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static int selected(const char *name)
{
	if (!O.nglobs)
		return 1;
	for (int i = 0; i < O.nglobs; i++)
		if (!fnmatch(O.globs[i], name, 0))
			return 1;
	return 0;
}

/*
 * A parsed JSON value written back through lmt's writer, so that numbers come out
 * in the same shortest form as the manifest's (jansson's own dump writes 17
 * digits). Nesting deeper than the writer tracks goes through jansson.
 */
static void put_value(struct lmt_json *j, const char *key, json_t *v, int depth)
{
	const char *k;
	json_t *x;
	size_t i;
	if ((json_is_object(v) || json_is_array(v)) && depth > 20) {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (!s)
			die("out of memory");
		lmt_json_raw(j, key, s);
		free(s);
		return;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		lmt_json_obj(j, key);
		json_object_foreach(v, k, x)
			put_value(j, k, x, depth + 1);
		lmt_json_obj_end(j);
		break;
	case JSON_ARRAY:
		lmt_json_arr(j, key);
		json_array_foreach(v, i, x)
			put_value(j, NULL, x, depth + 1);
		lmt_json_arr_end(j);
		break;
	case JSON_STRING: lmt_json_strn(j, key, json_string_value(v), json_string_length(v)); break;
	case JSON_INTEGER: lmt_json_i64(j, key, (int64_t)json_integer_value(v)); break;
	case JSON_REAL: lmt_json_num(j, key, json_real_value(v)); break;
	case JSON_TRUE: lmt_json_bool(j, key, 1); break;
	case JSON_FALSE: lmt_json_bool(j, key, 0); break;
	default: lmt_json_null(j, key); break;
	}
}

/* The JSON text of x (malloc'd), or NULL for NULL. */
static char *dump(json_t *x)
{
	if (!x)
		return NULL;
	struct lmt_json j;
	lmt_json_init(&j);
	put_value(&j, NULL, x, 0);
	if (j.out.oom || !j.out.buf)
		die("out of memory");
	return j.out.buf;
}

static void shape_str(const struct lmt_ckpt_entry *e, char *b, size_t cap)
{
	size_t n = 0;
	b[0] = 0;
	for (int k = 0; k < e->ndim && n < cap; k++)
		n += (size_t)snprintf(b + n, cap - n, k ? "x%d" : "%d", e->shape[k]);
}

static void json_shape(struct lmt_json *j, const char *key, const struct lmt_ckpt_entry *e)
{
	lmt_json_arr(j, key);
	for (int k = 0; k < e->ndim; k++)
		lmt_json_u64(j, NULL, (uint64_t)e->shape[k]);
	lmt_json_arr_end(j);
}

/* ---- a data file as found on disk ---- */

struct dfile {
	char path[PATH_MAX];
	int fd;                 /* open descriptor, or -1 (opened when needed) */
	int usable;             /* exists and is a regular file */
	uint64_t size;          /* on disk */
	uint64_t payload_at;    /* its header's size, or the size this build writes */
	int hdr_ok;
	struct lmt_hdr hdr;
	char problem[1024];     /* "" when the file is what the manifest says */
};

/* An opened checkpoint: its manifest (by the library) and its files. */
struct ck {
	struct lmt_ckpt c;
	const char *path;
	struct dfile *f;        /* parallel to c.files */
	int uncommitted;        /* a .tmp-step-* directory */
	char name_problem[256];
};

static int all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/*
 * What a data file's first bytes say about it, for files the manifest does not
 * vouch for. Returns 1 if the file is complete by its own header.
 */
static int describe_data(const char *path, char *msg, size_t cap, uint64_t *size)
{
	struct lmt_err err = { 0 };
	uint8_t hb[4096];
	*size = 0;
	msg[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(msg, cap, "cannot be read: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return 0;
	}
	*size = (uint64_t)st.st_size;
	ssize_t n = S_ISREG(st.st_mode) ? pread_full(fd, hb, sizeof hb, 0) : -1;
	close(fd);
	int complete = 0;
	struct lmt_hdr h;
	if (n < 0) {
		snprintf(msg, cap, "cannot be read");
	} else if (n < LMT_HDR_SIZE) {
		snprintf(msg, cap, "%zd bytes, shorter than the %d-byte header: being written, or truncated", n,
			 LMT_HDR_SIZE);
	} else if (all_zero(hb, LMT_HDR_SIZE)) {
		uint64_t at = LMT_HDR_SIZE + lmt_format_ckpt.ext_size;
		snprintf(msg, cap,
			 "header all zeros: a data file gets its header last, so this one was never finished "
			 "(%llu payload bytes written)", (unsigned long long)(*size > at ? *size - at : 0));
	} else if (lmt_hdr_parse(&h, hb, (size_t)n, path, &lmt_format_ckpt, &err)) {
		snprintf(msg, cap, "%s", err.msg);
	} else {
		uint64_t total = (uint64_t)h.header_size + h.payload_size;
		const uint8_t *ext = hb + LMT_HDR_SIZE;
		if (*size < total)
			snprintf(msg, cap, "truncated: %llu bytes, its header says %llu", (unsigned long long)*size,
				 (unsigned long long)total);
		else if (*size > total)
			snprintf(msg, cap, "%llu bytes, its header says %llu: trailing bytes", (unsigned long long)*size,
				 (unsigned long long)total);
		else {
			complete = 1;
			snprintf(msg, cap, "complete by its header: rank %u of %u, %llu chunks, %llu payload bytes",
				 lmt_load_u32(ext), lmt_load_u32(ext + 4), (unsigned long long)lmt_load_u64(ext + 8),
				 (unsigned long long)h.payload_size);
		}
	}
	return complete;
}

/*
 * The open checkpoints (two for --diff). Data files are opened when read and stay
 * open; a world size above the descriptor limit closes them all and goes on.
 */
static struct ck *opened[2];

static int dfile_fd(struct dfile *d)
{
	if (d->fd >= 0 || !d->usable)
		return d->fd;
	d->fd = open(d->path, O_RDONLY | O_CLOEXEC);
	if (d->fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		for (int c = 0; c < 2; c++)
			for (int i = 0; opened[c] && i < opened[c]->c.nfiles; i++)
				if (opened[c]->f[i].fd >= 0) {
					close(opened[c]->f[i].fd);
					opened[c]->f[i].fd = -1;
				}
		d->fd = open(d->path, O_RDONLY | O_CLOEXEC);
	}
	return d->fd;
}

static void dfile_close(struct dfile *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

static int file_of_rank(const struct ck *k, int rank)
{
	for (int i = 0; i < k->c.nfiles; i++)
		if (k->c.files[i].rank == rank)
			return i;
	return -1;
}

/* Open data file i and check what can be checked without reading its payload. */
static void check_file(struct ck *k, int i)
{
	struct dfile *d = &k->f[i];
	const struct lmt_ckpt_file *mf = &k->c.files[i];
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	path_fmt(d->path, sizeof d->path, "%s/%s", k->c.dir, mf->name);
	d->payload_at = LMT_HDR_SIZE + lmt_format_ckpt.ext_size;
	d->fd = open(d->path, O_RDONLY | O_CLOEXEC);
	if (d->fd < 0) {
		if (errno == ENOENT)
			note(d->problem, sizeof d->problem, "'%s': missing (the manifest lists it, %llu bytes)", d->path,
			     (unsigned long long)mf->bytes);
		else
			note(d->problem, sizeof d->problem, "'%s': %s", d->path, strerror(errno));
		return;
	}
	struct stat st;
	if (fstat(d->fd, &st) || !S_ISREG(st.st_mode)) {
		note(d->problem, sizeof d->problem, "'%s': not a regular file", d->path);
		dfile_close(d);
		return;
	}
	d->usable = 1;
	d->size = (uint64_t)st.st_size;
	if (d->size != mf->bytes)
		note(d->problem, sizeof d->problem, "'%s': %llu bytes, the manifest says %llu (%s)", d->path,
		     (unsigned long long)d->size, (unsigned long long)mf->bytes,
		     d->size < mf->bytes ? "truncated" : "longer");
	uint8_t hb[4096];
	struct lmt_err err = { 0 };
	ssize_t n = pread_full(d->fd, hb, sizeof hb, 0);
	if (n < 0) {
		note(d->problem, sizeof d->problem, "'%s': read: %s", d->path, strerror(errno));
		return;
	}
	if (n >= LMT_HDR_SIZE && all_zero(hb, LMT_HDR_SIZE)) {
		note(d->problem, sizeof d->problem,
		     "'%s': header all zeros (a data file gets its header last: this one was never finished)", d->path);
		return;
	}
	if (lmt_hdr_parse(&d->hdr, hb, (size_t)n, d->path, &lmt_format_ckpt, &err)) {
		note(d->problem, sizeof d->problem, "%s", err.msg);
		return;
	}
	d->hdr_ok = 1;
	d->payload_at = d->hdr.header_size;
	uint64_t total = (uint64_t)d->hdr.header_size + d->hdr.payload_size;
	if (total != mf->bytes)
		note(d->problem, sizeof d->problem, "'%s': its header says %u + %llu = %llu bytes, the manifest %llu",
		     d->path, d->hdr.header_size, (unsigned long long)d->hdr.payload_size, (unsigned long long)total,
		     (unsigned long long)mf->bytes);
	if (memcmp(d->hdr.payload_sha256, mf->sha256, LMT_SHA256_LEN))
		note(d->problem, sizeof d->problem, "'%s': its header's payload sha256 is %s, the manifest says %s",
		     d->path, lmt_sha256_hex(d->hdr.payload_sha256, a), lmt_sha256_hex(mf->sha256, b));
	const uint8_t *ext = hb + LMT_HDR_SIZE;
	uint32_t rank = lmt_load_u32(ext), world = lmt_load_u32(ext + 4), dtype = lmt_load_u32(ext + 16);
	uint64_t nch = lmt_load_u64(ext + 8), want = 0;
	for (int t = 0; t < k->c.nt; t++)
		for (int q = 0; q < k->c.t[t].nchunks; q++)
			want += k->c.t[t].chunks[q].rank == mf->rank;
	if (rank != (uint32_t)mf->rank || world != (uint32_t)k->c.world)
		note(d->problem, sizeof d->problem, "'%s': rank %u of %u, the manifest says %d of %d", d->path, rank,
		     world, mf->rank, k->c.world);
	if (nch != want)
		note(d->problem, sizeof d->problem, "'%s': %llu chunks, the manifest places %llu in it", d->path,
		     (unsigned long long)nch, (unsigned long long)want);
	if (dtype != 0)
		note(d->problem, sizeof d->problem, "'%s': dtype %u, this build reads 0 (f32)", d->path, dtype);
}

static void ck_close(struct ck *k)
{
	for (int i = 0; i < k->c.nfiles; i++)
		dfile_close(&k->f[i]);
	for (int c = 0; c < 2; c++)
		if (opened[c] == k)
			opened[c] = NULL;
	free(k->f);
	lmt_ckpt_close(&k->c);
}

/* ---- reading a tensor in element order ---- */

struct treader {
	const struct ck *k;
	const struct lmt_ckpt_entry *e;
	int q;                  /* the chunk being read */
	uint64_t at;            /* its elements read so far */
	uint32_t crc, whole;    /* CRC-32C of chunk q so far, of the tensor so far */
	int bad_chunks;
	char err[1024];
};

static void tr_init(struct treader *r, const struct ck *k, const struct lmt_ckpt_entry *e)
{
	memset(r, 0, sizeof *r);
	r->k = k;
	r->e = e;
}

static void tr_end_chunks(struct treader *r)
{
	while (r->q < r->e->nchunks && r->at == r->e->chunks[r->q].count) {
		const struct lmt_ckpt_chunk *ch = &r->e->chunks[r->q];
		if (r->crc != ch->crc32c) {
			r->bad_chunks++;
			note(r->err, sizeof r->err, "'%s': tensor '%s': elements [%llu, %llu): CRC-32C %08x, the manifest "
			     "says %08x (the data or the manifest was changed)", r->k->f[file_of_rank(r->k, ch->rank)].path, r->e->name,
			     (unsigned long long)ch->offset, (unsigned long long)(ch->offset + ch->count), r->crc,
			     ch->crc32c);
		}
		r->q++;
		r->at = 0;
		r->crc = 0;
	}
}

/*
 * The next n elements of the tensor (fewer only at its end) into dst. A chunk
 * whose CRC does not match is noted in r->err and read on; elements that cannot
 * be read at all (a missing or short file) end the reading: -1, with r->err set.
 */
static long tr_read(struct treader *r, float *dst, size_t n)
{
	size_t got = 0;
	tr_end_chunks(r);
	while (got < n && r->q < r->e->nchunks) {
		const struct lmt_ckpt_chunk *ch = &r->e->chunks[r->q];
		size_t take = (size_t)LMT_MIN((uint64_t)(n - got), ch->count - r->at);
		struct dfile *d = &r->k->f[file_of_rank(r->k, ch->rank)];
		int fd = dfile_fd(d);
		if (fd < 0) {
			note(r->err, sizeof r->err, "'%s': tensor '%s': its elements [%llu, %llu) are in a file that cannot "
			     "be read", d->path, r->e->name, (unsigned long long)ch->offset,
			     (unsigned long long)(ch->offset + ch->count));
			return -1;
		}
		uint64_t off = d->payload_at + ch->byte_offset + r->at * 4;
		ssize_t m = pread_full(fd, dst + got, take * 4, off);
		if (m < 0) {
			note(r->err, sizeof r->err, "'%s': read: %s", d->path, strerror(errno));
			return -1;
		}
		if ((size_t)m < take * 4) {
			note(r->err, sizeof r->err, "'%s': tensor '%s': elements [%llu, %llu) lie past the end of the file "
			     "(%llu bytes)", d->path, r->e->name, (unsigned long long)ch->offset,
			     (unsigned long long)(ch->offset + ch->count), (unsigned long long)d->size);
			return -1;
		}
		r->crc = lmt_crc32c(r->crc, dst + got, take * 4);
		r->whole = lmt_crc32c(r->whole, dst + got, take * 4);
		r->at += take;
		got += take;
		tr_end_chunks(r);
	}
	return (long)got;
}

/* ---- statistics ---- */

struct stats {
	uint64_t n, nonfinite;  /* finite values, and the others */
	double sum, sumsq, min, max;
};

static void stats_init(struct stats *s)
{
	memset(s, 0, sizeof *s);
	s->min = INFINITY;
	s->max = -INFINITY;
}

static void stats_add(struct stats *s, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double v = x[i];
		if (!isfinite(v)) {
			s->nonfinite++;
			continue;
		}
		s->n++;
		s->sum += v;
		s->sumsq += v * v;
		if (v < s->min)
			s->min = v;
		if (v > s->max)
			s->max = v;
	}
}

/* ---- directories that are not checkpoints ---- */

/* Does dir hold files that look like checkpoint data (finished or being written)? */
static int has_data_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;
	while (d && !found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		found = (n > 7 && !strcmp(e->d_name + n - 7, ".lmckpt")) || strstr(e->d_name, ".lmckpt.tmp.");
	}
	if (d)
		closedir(d);
	return found;
}

/*
 * Say what dir holds and why it is not a checkpoint, then exit 1. why is the
 * library's reason when there is a manifest.json that does not open, else NULL.
 */
static void explain(const char *dir, const struct lmt_err *why) __attribute__((noreturn));
static void explain(const char *dir, const struct lmt_err *why)
{
	const char *name = base_name(dir);
	char reason[2048] = "", who[256] = "", mpath[PATH_MAX];
	unsigned long long upd = 0;
	long pid = 0;
	int tmp = parse_tmp_name(name, &upd, &pid), step = 0;
	if (!tmp && !strncmp(name, "step-", 5)) {
		char *end;
		upd = strtoull(name + 5, &end, 10);
		step = end != name + 5 && !*end;
	}
	if (tmp)
		snprintf(who, sizeof who, "an interrupted save of update %llu by process %ld, never renamed into place; ",
			 upd, pid);
	path_fmt(mpath, sizeof mpath, "%s/manifest.json", dir);
	int have_manifest = exists(mpath);
	const char *mstate = "absent";
	json_error_t je;
	json_t *m = have_manifest ? json_load_file(mpath, 0, &je) : NULL;
	if (!have_manifest) {
		if (tmp)
			snprintf(reason, sizeof reason, "'%s': %sno manifest.json: this save never finished; it is not a "
				 "checkpoint", dir, who);
		else if (step) /* renamed only once its manifest was written */
			snprintf(reason, sizeof reason, "'%s': no manifest.json: a save names its directory step-N only "
				 "after writing the manifest, so this one lost it since; it is not a checkpoint", dir);
		else if (has_data_files(dir))
			snprintf(reason, sizeof reason, "'%s': no manifest.json: an unfinished save or a damaged copy; it "
				 "is not a checkpoint", dir);
		else
			die("'%s': no manifest.json and no ckpt/: neither a checkpoint nor a run directory", dir);
	} else if (!m) {
		mstate = "invalid";
		snprintf(reason, sizeof reason, "%s%s; it is not a checkpoint", who, why ? why->msg : "invalid manifest");
	} else {
		mstate = "inconsistent";
		snprintf(reason, sizeof reason, "%s%s; it is not a checkpoint", who, why ? why->msg : "bad manifest");
	}

	/* what the manifest lists (if it parses at all), to tell which files are missing */
	json_t *listed = json_is_object(m) ? json_object_get(m, "files") : NULL;
	if (!json_is_array(listed))
		listed = NULL;

	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0)
		die("'%s': %s", dir, strerror(errno));
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "incomplete");
	lmt_json_str(&j, "path", dir);
	if (tmp || step)
		lmt_json_u64(&j, "update", upd);
	if (tmp)
		lmt_json_i64(&j, "pid", pid);
	lmt_json_bool(&j, "committed", !tmp);
	lmt_json_str(&j, "manifest", mstate);
	lmt_json_str(&j, "reason", reason);
	lmt_json_arr(&j, "files");
	if (table) {
		out("%s\n", reason);
		out("%s holds:\n", dir);
	}
	int shown = 0;
	for (int i = 0; i < n; i++) {
		const char *fn = ents[i]->d_name;
		if (!strcmp(fn, ".") || !strcmp(fn, ".."))
			continue;
		char p[PATH_MAX], msg[1024];
		path_fmt(p, sizeof p, "%s/%s", dir, fn);
		uint64_t size = 0;
		struct stat st;
		const char *kind = "other";
		msg[0] = 0;
		size_t fl = strlen(fn);
		int lmckpt = fl > 7 && !strcmp(fn + fl - 7, ".lmckpt");
		const char *t = strstr(fn, ".lmckpt.tmp.");
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
			kind = "directory";
			snprintf(msg, sizeof msg, "a directory: not part of a checkpoint");
		} else if (!strcmp(fn, "manifest.json")) {
			kind = "manifest";
			size = lstat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
			snprintf(msg, sizeof msg, "%s", !m ? "not valid JSON" : why ? "does not describe a checkpoint"
										: "valid");
		} else if (fn[0] == '.' && t) {
			kind = "data-temporary";
			char buf[900];
			describe_data(p, buf, sizeof buf, &size);
			snprintf(msg, sizeof msg, "the temporary of '%.*s' while it was written: %s", (int)(t + 7 - fn - 1),
				 fn + 1, buf);
		} else if (fn[0] == '.' && strstr(fn, "manifest.json.tmp.")) {
			kind = "manifest-temporary";
			size = lstat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
			snprintf(msg, sizeof msg, "the manifest while it was written, never renamed");
		} else if (lmckpt) {
			kind = "data";
			describe_data(p, msg, sizeof msg, &size);
		} else {
			size = lstat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
			snprintf(msg, sizeof msg, "not part of a checkpoint");
		}
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "path", fn);
		lmt_json_str(&j, "kind", kind);
		lmt_json_u64(&j, "bytes", size);
		lmt_json_str(&j, "status", msg);
		lmt_json_obj_end(&j);
		if (table)
			out("  %-28s %12llu  %s\n", fn, (unsigned long long)size, msg);
		shown++;
	}
	/* files the manifest lists that are not there */
	for (size_t i = 0; listed && i < json_array_size(listed); i++) {
		const char *fn = json_string_value(json_object_get(json_array_get(listed, i), "path"));
		char p[PATH_MAX];
		if (!fn || strchr(fn, '/') || snprintf(p, sizeof p, "%s/%s", dir, fn) >= (int)sizeof p || exists(p))
			continue;
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "path", fn);
		lmt_json_str(&j, "kind", "missing");
		lmt_json_u64(&j, "bytes", 0);
		lmt_json_str(&j, "status", "listed in manifest.json, absent");
		lmt_json_obj_end(&j);
		if (table)
			out("  %-28s %12s  %s\n", fn, "-", "listed in manifest.json, absent");
		shown++;
	}
	lmt_json_arr_end(&j);
	if (!table)
		put_line(&j);
	else if (!shown)
		out("  nothing\n");
	lmt_json_release(&j);
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	json_decref(m);
	die("%s", reason);
}

/* ---- finding and opening ---- */

/* RUN: its newest checkpoint that opens; say which. Dies if none does. */
static void newest(const char *run, char *outp, size_t cap)
{
	struct lmt_err err = { 0 };
	char ckdir[PATH_MAX];
	path_fmt(ckdir, sizeof ckdir, "%s/ckpt", run);
	DIR *dd = opendir(ckdir);
	struct dirent *de;
	int ntmp = 0;
	while (dd && (de = readdir(dd))) {
		unsigned long long u;
		long pid;
		if (parse_tmp_name(de->d_name, &u, &pid)) {
			warn("'%s/%s': an interrupted save (not a checkpoint); ignored", ckdir, de->d_name);
			ntmp++;
		}
	}
	if (dd)
		closedir(dd);
	char **names;
	uint64_t *ups;
	int n;
	if (lmt_ckpt_list(run, &names, &ups, &n, &err))
		die_err(&err);
	int found = 0;
	for (int i = n - 1; i >= 0; i--) {
		char p[PATH_MAX];
		struct lmt_ckpt c;
		struct lmt_err e2 = { 0 };
		if (found)
			continue;
		path_fmt(p, sizeof p, "%s/%s", ckdir, names[i]);
		if (lmt_ckpt_open(&c, p, 0, &e2) == 0) {
			lmt_ckpt_close(&c);
			snprintf(outp, cap, "%s", p);
			found = 1;
		} else {
			warn("skipping '%s': %s", p, e2.msg);
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ups);
	if (!found)
		die("'%s': no checkpoint in '%s'%s", run, ckdir,
		    n || ntmp ? " opens (name a directory to have it explained)" : "");
	info("'%s': inspecting its newest checkpoint, '%s'", run, outp);
}

/* Resolve arg (a checkpoint or a run directory) into path. */
static void resolve(const char *arg, char *path, size_t cap)
{
	char p[PATH_MAX];
	struct stat st;
	if (stat(arg, &st))
		die("'%s': %s", arg, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		die("'%s': not a directory (a checkpoint is a directory: RUN/ckpt/step-N)", arg);
	path_fmt(p, sizeof p, "%s/manifest.json", arg);
	if (exists(p)) {
		snprintf(path, cap, "%s", arg);
		return;
	}
	path_fmt(p, sizeof p, "%s/ckpt", arg);
	if (is_dir(p)) {
		newest(arg, path, cap);
		return;
	}
	snprintf(path, cap, "%s", arg);
}

/* Open a checkpoint and look at its files; with explain_bad, a directory that is
 * not one is explained (exit 1), else refused. */
static void ck_open(struct ck *k, const char *path, int explain_bad)
{
	struct lmt_err err = { 0 };
	char mp[PATH_MAX];
	memset(k, 0, sizeof *k);
	k->path = path;
	path_fmt(mp, sizeof mp, "%s/manifest.json", path);
	if (!exists(mp)) {
		if (explain_bad)
			explain(path, NULL);
		die("'%s': no manifest.json: not a checkpoint (ckpt-inspect '%s' alone says what the directory holds)",
		    path, path);
	}
	if (lmt_ckpt_open(&k->c, path, 0, &err)) {
		if (explain_bad)
			explain(path, &err);
		die("%s (ckpt-inspect '%s' alone says what the directory holds)", err.msg, path);
	}
	k->f = calloc((size_t)k->c.nfiles + 1, sizeof *k->f);
	if (!k->f)
		die("out of memory");
	for (int i = 0; i < k->c.nfiles; i++) {
		k->f[i].fd = -1;
		check_file(k, i);
		dfile_close(&k->f[i]); /* reopened when read: a world size may exceed the descriptor limit */
	}
	for (int c = 0; c < 2; c++)
		if (!opened[c]) {
			opened[c] = k;
			break;
		}
	const char *name = base_name(path);
	unsigned long long u;
	long pid;
	if (parse_tmp_name(name, &u, &pid))
		k->uncommitted = 1;
	else if (!strncmp(name, "step-", 5)) {
		char *end;
		u = strtoull(name + 5, &end, 10);
		if (end != name + 5 && !*end && u != k->c.update)
			snprintf(k->name_problem, sizeof k->name_problem, "'%s': its manifest says update %llu, its name %llu",
				 path, (unsigned long long)k->c.update, u);
	}
}

/* ---- listing ---- */

static void put_state_table(json_t *state)
{
	const char *key;
	json_t *v;
	char line[4096];
	size_t n = 0;
	line[0] = 0;
	/* scalars on one line, then one line per object or array */
	json_object_foreach(state, key, v) {
		if (json_is_object(v) || json_is_array(v))
			continue;
		char *s = json_is_string(v) ? strdup(json_string_value(v)) : dump(v);
		if (!s)
			die("out of memory");
		if (n < sizeof line)
			n += (size_t)snprintf(line + n, sizeof line - n, "%s%s=%s", n ? " " : "", key, s);
		free(s);
	}
	out("state:    %s\n", line);
	json_object_foreach(state, key, v) {
		if (!json_is_object(v) && !json_is_array(v))
			continue;
		char *s = dump(v);
		size_t len = strlen(s);
		if (len > 100)
			out("  %-16s %.96s ...\n", key, s);
		else
			out("  %-16s %s\n", key, s);
		free(s);
	}
}

static int list(const char *arg)
{
	char path[PATH_MAX];
	resolve(arg, path, sizeof path);
	struct ck k;
	ck_open(&k, path, 1);
	double t0 = lmt_now();
	struct lmt_json j;
	lmt_json_init(&j);
	json_t *state = json_object_get(k.c.manifest, "state");
	uint64_t file_bytes = 0;
	int bad_files = 0;
	for (int i = 0; i < k.c.nfiles; i++) {
		file_bytes += k.f[i].size;
		bad_files += k.f[i].problem[0] != 0;
	}
	if (table) {
		out("checkpoint '%s': update %llu, world %d, schema %d%s\n", path, (unsigned long long)k.c.update,
		    k.c.world, LMT_CKPT_SCHEMA, k.uncommitted ? " (an interrupted save: never renamed into place)" : "");
		for (int i = 0; i < k.c.nfiles; i++)
			out("file:     %s  rank %d  %llu bytes  %s\n", k.c.files[i].name, k.c.files[i].rank,
			    (unsigned long long)k.c.files[i].bytes, k.f[i].problem[0] ? k.f[i].problem : "ok");
		put_state_table(state);
	} else {
		char hex[LMT_SHA256_HEX];
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "checkpoint");
		lmt_json_str(&j, "path", path);
		lmt_json_u64(&j, "update", k.c.update);
		lmt_json_u64(&j, "world", (uint64_t)k.c.world);
		lmt_json_u64(&j, "schema_version", LMT_CKPT_SCHEMA);
		lmt_json_bool(&j, "committed", !k.uncommitted);
		lmt_json_u64(&j, "tensors", (uint64_t)k.c.nt);
		lmt_json_arr(&j, "files");
		for (int i = 0; i < k.c.nfiles; i++) {
			lmt_json_obj(&j, NULL);
			lmt_json_str(&j, "path", k.c.files[i].name);
			lmt_json_u64(&j, "rank", (uint64_t)k.c.files[i].rank);
			lmt_json_u64(&j, "bytes", k.c.files[i].bytes);
			lmt_json_str(&j, "payload_sha256", lmt_sha256_hex(k.c.files[i].sha256, hex));
			lmt_json_bool(&j, "ok", !k.f[i].problem[0]);
			if (k.f[i].problem[0])
				lmt_json_str(&j, "error", k.f[i].problem);
			lmt_json_obj_end(&j);
		}
		lmt_json_arr_end(&j);
		put_value(&j, "state", state, 0);
		put_line(&j);
	}
	for (int i = 0; i < k.c.nfiles; i++)
		if (k.f[i].problem[0])
			fprintf(stderr, "%s: %s\n", tool_name, k.f[i].problem);

	int w = 6;
	uint64_t total = 0;
	for (int i = 0; i < k.c.nt; i++)
		if (selected(k.c.t[i].name)) {
			w = LMT_MAX(w, (int)strlen(k.c.t[i].name));
			total += k.c.t[i].numel * 4;
		}
	if (table) {
		if (O.no_stats)
			out("%-*s %-5s %-14s %6s %12s %-8s\n", w, "tensor", "dtype", "shape", "chunks", "bytes", "crc32c");
		else
			out("%-*s %-5s %-14s %6s %12s %-8s %11s %11s %11s %11s %9s\n", w, "tensor", "dtype", "shape",
			    "chunks", "bytes", "crc32c", "min", "max", "mean", "rms", "nonfinite");
	}
	float *buf = O.no_stats ? NULL : malloc(BLOCK);
	if (!O.no_stats && !buf)
		die("out of memory");
	struct lmt_progress bar;
	lmt_progress_init(&bar, "reading", "B", total, tool_quiet || O.no_stats);
	uint64_t elements = 0, bytes = 0, nonfinite = 0, done = 0;
	int ntens = 0, bad_tensors = 0, nf_tensors = 0;
	for (int i = 0; i < k.c.nt; i++) {
		const struct lmt_ckpt_entry *e = &k.c.t[i];
		if (!selected(e->name))
			continue;
		ntens++;
		elements += e->numel;
		bytes += e->numel * 4;
		struct stats s;
		struct treader r;
		stats_init(&s);
		tr_init(&r, &k, e);
		int readable = 1;
		if (!O.no_stats) {
			long m;
			while ((m = tr_read(&r, buf, BLOCK / 4)) > 0) {
				stats_add(&s, buf, (size_t)m);
				done += (uint64_t)m * 4;
				lmt_progress_update(&bar, done);
			}
			readable = m == 0;
		}
		int ok = readable && !r.bad_chunks;
		bad_tensors += !ok;
		nonfinite += s.nonfinite;
		nf_tensors += s.nonfinite > 0;
		char shape[64], crc[16];
		shape_str(e, shape, sizeof shape);
		/* read: the CRC-32C of the data as found; manifest only: its single chunk's */
		snprintf(crc, sizeof crc, "%08x", !O.no_stats ? r.whole : e->nchunks ? e->chunks[0].crc32c : 0);
		int has = !O.no_stats && readable && s.n > 0;
		if (table) {
			lmt_progress_done(&bar);
			const char *c = O.no_stats && e->nchunks != 1 ? "-" : crc;
			if (O.no_stats)
				out("%-*s %-5s %-14s %6d %12llu %-8s\n", w, e->name, "f32", shape, e->nchunks,
				    (unsigned long long)(e->numel * 4), c);
			else if (!readable)
				out("%-*s %-5s %-14s %6d %12llu %-8s  unreadable\n", w, e->name, "f32", shape, e->nchunks,
				    (unsigned long long)(e->numel * 4), "-");
			else if (!has)
				out("%-*s %-5s %-14s %6d %12llu %-8s %11s %11s %11s %11s %9llu\n", w, e->name, "f32", shape,
				    e->nchunks, (unsigned long long)(e->numel * 4), crc, "-", "-", "-", "-",
				    (unsigned long long)s.nonfinite);
			else
				out("%-*s %-5s %-14s %6d %12llu %-8s %11.4g %11.4g %11.4g %11.4g %9llu%s\n", w, e->name, "f32",
				    shape, e->nchunks, (unsigned long long)(e->numel * 4), crc, s.min, s.max, s.sum / s.n,
				    sqrt(s.sumsq / s.n), (unsigned long long)s.nonfinite, r.bad_chunks ? "  CRC MISMATCH" : "");
		} else {
			lmt_json_begin(&j);
			lmt_json_str(&j, "event", "tensor");
			lmt_json_str(&j, "name", e->name);
			lmt_json_str(&j, "dtype", "f32");
			json_shape(&j, "shape", e);
			lmt_json_u64(&j, "elements", e->numel);
			lmt_json_u64(&j, "bytes", e->numel * 4);
			lmt_json_u64(&j, "chunks", (uint64_t)e->nchunks);
			lmt_json_arr(&j, "chunk_crc32c");
			for (int q = 0; q < e->nchunks; q++) {
				char b[16];
				snprintf(b, sizeof b, "%08x", e->chunks[q].crc32c);
				lmt_json_str(&j, NULL, b);
			}
			lmt_json_arr_end(&j);
			if (!O.no_stats) {
				if (readable)
					lmt_json_str(&j, "crc32c", crc);
				else
					lmt_json_null(&j, "crc32c");
				lmt_json_bool(&j, "ok", ok);
				if (has) {
					lmt_json_num(&j, "min", s.min);
					lmt_json_num(&j, "max", s.max);
					lmt_json_num(&j, "mean", s.sum / s.n);
					lmt_json_num(&j, "rms", sqrt(s.sumsq / s.n));
				} else {
					lmt_json_null(&j, "min");
					lmt_json_null(&j, "max");
					lmt_json_null(&j, "mean");
					lmt_json_null(&j, "rms");
				}
				if (readable)
					lmt_json_u64(&j, "nonfinite", s.nonfinite);
				else
					lmt_json_null(&j, "nonfinite");
				if (!ok)
					lmt_json_str(&j, "error", r.err);
			}
			put_line(&j);
		}
		if (!ok && bad_tensors <= 8)
			fprintf(stderr, "%s: %s\n", tool_name, r.err);
	}
	if (bad_tensors > 8)
		fprintf(stderr, "%s: and %d more bad tensors (the JSONL records list every one)\n", tool_name,
			bad_tensors - 8);
	lmt_progress_done(&bar);
	for (int g = 0; g < O.nglobs; g++) {
		int any = 0;
		for (int i = 0; i < k.c.nt && !any; i++)
			any = !fnmatch(O.globs[g], k.c.t[i].name, 0);
		if (!any)
			warn("no tensor of '%s' matches '%s'", path, O.globs[g]);
	}
	if (table) {
		out("%d tensor%s, %llu elements, %llu bytes in %d file%s (%llu bytes)", ntens, pl(ntens),
		    (unsigned long long)elements, (unsigned long long)bytes, k.c.nfiles, pl(k.c.nfiles),
		    (unsigned long long)file_bytes);
		if (!O.no_stats)
			out("; %llu non-finite; %s\n", (unsigned long long)nonfinite,
			    bad_tensors ? "SOME TENSORS ARE BAD" : "every chunk's CRC-32C matches");
		else
			out("\n");
	} else {
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "summary");
		lmt_json_str(&j, "path", path);
		lmt_json_u64(&j, "update", k.c.update);
		lmt_json_u64(&j, "tensors", (uint64_t)ntens);
		lmt_json_u64(&j, "elements", elements);
		lmt_json_u64(&j, "bytes", bytes);
		lmt_json_u64(&j, "files", (uint64_t)k.c.nfiles);
		lmt_json_u64(&j, "file_bytes", file_bytes);
		lmt_json_u64(&j, "bad_files", (uint64_t)bad_files);
		if (!O.no_stats) {
			lmt_json_u64(&j, "nonfinite", nonfinite);
			lmt_json_u64(&j, "bad_tensors", (uint64_t)bad_tensors);
		}
		lmt_json_bool(&j, "committed", !k.uncommitted);
		put_line(&j);
	}
	lmt_json_release(&j);
	free(buf);
	double secs = lmt_now() - t0;
	if (nonfinite)
		warn("'%s': %llu non-finite value%s in %d tensor%s", path, (unsigned long long)nonfinite, pl((long)nonfinite),
		     nf_tensors, pl(nf_tensors));
	if (k.name_problem[0])
		fprintf(stderr, "%s: %s\n", tool_name, k.name_problem);
	int bad = bad_files || bad_tensors || k.uncommitted || k.name_problem[0];
	if (k.uncommitted)
		die("'%s': an interrupted save, never renamed into place: it is not a checkpoint (train --resume "
		    "removes it)", path);
	if (bad)
		die("'%s': %d of %d file%s and %d of %d tensor%s are bad%s", path, bad_files, k.c.nfiles, pl(k.c.nfiles),
		    bad_tensors, ntens, pl(ntens), k.name_problem[0] ? ", and its name is not its update" : "");
	if (!O.no_stats)
		info("'%s': %d tensor%s, %.1f MB read in %.2f s", path, ntens, pl(ntens), bytes / 1e6, secs);
	ck_close(&k);
	return 0;
}

/* ---- verify ---- */

struct cref {
	int t, q;
	uint64_t start, end;    /* bytes of the payload */
	uint32_t crc;
};

static int cmp_cref(const void *x, const void *y)
{
	const struct cref *a = x, *b = y;
	return a->start < b->start ? -1 : a->start > b->start;
}

static int verify(const char *arg)
{
	char path[PATH_MAX];
	resolve(arg, path, sizeof path);
	struct ck k;
	ck_open(&k, path, 1);
	double t0 = lmt_now();
	uint8_t *buf = malloc(BLOCK);
	int *tbad = calloc((size_t)k.c.nt + 1, sizeof *tbad);
	struct cref *refs = calloc((size_t)k.c.nt + 1, sizeof *refs);
	size_t refcap = (size_t)k.c.nt + 1;
	if (!buf || !tbad || !refs)
		die("out of memory");
	uint64_t total = 0, bytes = 0;
	for (int i = 0; i < k.c.nfiles; i++)
		total += k.f[i].size;
	struct lmt_progress bar;
	lmt_progress_init(&bar, "verifying", "B", total, tool_quiet);
	struct lmt_json j;
	lmt_json_init(&j);
	int bad_files = 0;
	char hex[LMT_SHA256_HEX], hex2[LMT_SHA256_HEX];
	for (int i = 0; i < k.c.nfiles; i++) {
		struct dfile *d = &k.f[i];
		const struct lmt_ckpt_file *mf = &k.c.files[i];
		/* this file's chunks, in payload order */
		size_t nrefs = 0;
		for (int t = 0; t < k.c.nt; t++)
			for (int q = 0; q < k.c.t[t].nchunks; q++) {
				const struct lmt_ckpt_chunk *ch = &k.c.t[t].chunks[q];
				if (ch->rank != mf->rank)
					continue;
				if (LMT_GROW(refs, refcap, nrefs + 1))
					die("out of memory");
				refs[nrefs++] = (struct cref){ t, q, ch->byte_offset, ch->byte_offset + ch->count * 4, 0 };
			}
		qsort(refs, nrefs, sizeof *refs, cmp_cref);
		/* one pass over the payload: its SHA-256 and every chunk's CRC-32C */
		int fd = dfile_fd(d);
		uint64_t avail = fd >= 0 && d->size > d->payload_at ? d->size - d->payload_at : 0, pos = 0;
		struct lmt_sha256 sha;
		uint8_t digest[LMT_SHA256_LEN];
		if (lmt_sha256_init(&sha))
			die("out of memory");
		size_t lo = 0;
		while (pos < avail) {
			size_t m = (size_t)LMT_MIN((uint64_t)BLOCK, avail - pos);
			ssize_t got = pread_full(fd, buf, m, d->payload_at + pos);
			if (got < 0) {
				note(d->problem, sizeof d->problem, "'%s': read: %s", d->path, strerror(errno));
				avail = pos;
				break;
			}
			if ((size_t)got < m) { /* shrank while we read */
				m = (size_t)got;
				avail = pos + m;
			}
			lmt_sha256_update(&sha, buf, m);
			for (size_t r = lo; r < nrefs && refs[r].start < pos + m; r++) {
				uint64_t a = LMT_MAX(refs[r].start, pos), b = LMT_MIN(refs[r].end, pos + m);
				if (a < b)
					refs[r].crc = lmt_crc32c(refs[r].crc, buf + (a - pos), (size_t)(b - a));
			}
			pos += m;
			while (lo < nrefs && refs[lo].end <= pos)
				lo++;
			bytes += m;
			lmt_progress_update(&bar, bytes);
		}
		lmt_sha256_final(&sha, digest);
		/* the SHA-256 tells which side changed: the data, or the manifest */
		int sha_ok = 0;
		if (fd >= 0 && d->size == mf->bytes && avail == d->size - d->payload_at) {
			sha_ok = !memcmp(digest, mf->sha256, LMT_SHA256_LEN);
			if (sha_ok)
				;
			else if (d->hdr_ok && !memcmp(digest, d->hdr.payload_sha256, LMT_SHA256_LEN))
				; /* the data are the header's: check_file said the manifest disagrees */
			else
				note(d->problem, sizeof d->problem,
				     "'%s': payload sha256 %s, the manifest says %s (data corrupted)", d->path,
				     lmt_sha256_hex(digest, hex), lmt_sha256_hex(mf->sha256, hex2));
		}
		lmt_progress_done(&bar);
		int fbad = d->problem[0] != 0;
		bad_files += fbad;
		if (table)
			out("%-24s %s\n", mf->name, fbad ? d->problem : "ok");
		else {
			lmt_json_begin(&j);
			lmt_json_str(&j, "event", "verify");
			lmt_json_str(&j, "path", d->path);
			lmt_json_bool(&j, "ok", !fbad);
			if (fbad)
				lmt_json_str(&j, "error", d->problem);
			put_line(&j);
		}
		if (fbad)
			fprintf(stderr, "%s: %s\n", tool_name, d->problem);
		/* the chunks, in the manifest's tensor order */
		int said = 0, more = 0;
		for (int t = 0; t < k.c.nt; t++)
			for (size_t r = 0; r < nrefs; r++) {
				if (refs[r].t != t)
					continue;
				const struct lmt_ckpt_entry *e = &k.c.t[t];
				const struct lmt_ckpt_chunk *ch = &e->chunks[refs[r].q];
				char msg[1024] = "";
				if (fd < 0)
					note(msg, sizeof msg, "'%s': tensor '%s': its elements [%llu, %llu) are in a file that "
						 "cannot be read", d->path, e->name, (unsigned long long)ch->offset,
						 (unsigned long long)(ch->offset + ch->count));
				else if (refs[r].end > avail)
					note(msg, sizeof msg, "'%s': tensor '%s': its elements [%llu, %llu) lie past the end "
						 "of the file (%llu bytes): truncated", d->path, e->name, (unsigned long long)ch->offset,
						 (unsigned long long)(ch->offset + ch->count), (unsigned long long)d->size);
				else if (refs[r].crc != ch->crc32c)
					note(msg, sizeof msg, "'%s': tensor '%s': elements [%llu, %llu): CRC-32C %08x, the "
						 "manifest says %08x (%s)", d->path, e->name, (unsigned long long)ch->offset,
						 (unsigned long long)(ch->offset + ch->count), refs[r].crc, ch->crc32c,
						 sha_ok ? "the file matches its SHA-256: the manifest's CRC was changed"
							: "data corrupted");
				else
					continue;
				tbad[t] = 1;
				if (table)
					out("  %s\n", msg);
				else {
					lmt_json_begin(&j);
					lmt_json_str(&j, "event", "verify");
					lmt_json_str(&j, "path", d->path);
					lmt_json_str(&j, "tensor", e->name);
					lmt_json_u64(&j, "offset", ch->offset);
					lmt_json_u64(&j, "count", ch->count);
					lmt_json_bool(&j, "ok", 0);
					lmt_json_str(&j, "error", msg);
					put_line(&j);
				}
				if (said < 8) {
					fprintf(stderr, "%s: %s\n", tool_name, msg);
					said++;
				} else {
					more++;
				}
			}
		if (more)
			fprintf(stderr, "%s: '%s': and %d more bad tensors (the JSONL records list every one)\n", tool_name,
				d->path, more);
		dfile_close(d);
	}
	int bad_tensors = 0;
	for (int t = 0; t < k.c.nt; t++)
		bad_tensors += tbad[t];
	/* files that look like data files but are not in the manifest */
	DIR *dd = opendir(path);
	struct dirent *de;
	while (dd && (de = readdir(dd))) {
		size_t l = strlen(de->d_name);
		if (l < 7 || strcmp(de->d_name + l - 7, ".lmckpt"))
			continue;
		int listed = 0;
		for (int i = 0; i < k.c.nfiles && !listed; i++)
			listed = !strcmp(k.c.files[i].name, de->d_name);
		if (!listed)
			warn("'%s/%s': a data file the manifest does not list; ignored", path, de->d_name);
	}
	if (dd)
		closedir(dd);
	double secs = lmt_now() - t0;
	int bad = bad_files || bad_tensors;
	if (table) {
		out("%d file%s, %d tensor%s: %s\n", k.c.nfiles, pl(k.c.nfiles), k.c.nt, pl(k.c.nt),
		    bad ? "SOME ARE BAD" : "every size, SHA-256 and CRC-32C matches the manifest");
	} else {
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "verify-summary");
		lmt_json_str(&j, "path", path);
		lmt_json_u64(&j, "update", k.c.update);
		lmt_json_bool(&j, "ok", !bad && !k.uncommitted && !k.name_problem[0]);
		lmt_json_bool(&j, "committed", !k.uncommitted);
		lmt_json_u64(&j, "files", (uint64_t)k.c.nfiles);
		lmt_json_u64(&j, "bad_files", (uint64_t)bad_files);
		lmt_json_u64(&j, "tensors", (uint64_t)k.c.nt);
		lmt_json_u64(&j, "bad_tensors", (uint64_t)bad_tensors);
		lmt_json_u64(&j, "bytes", bytes);
		lmt_json_num(&j, "seconds", secs);
		lmt_json_num(&j, "mb_per_s", secs > 0 ? bytes / secs / 1e6 : 0);
		put_line(&j);
	}
	lmt_json_release(&j);
	free(buf);
	free(tbad);
	free(refs);
	if (k.name_problem[0])
		fprintf(stderr, "%s: %s\n", tool_name, k.name_problem);
	if (bad)
		die("'%s': %d of %d file%s and %d of %d tensor%s failed verification", path, bad_files, k.c.nfiles,
		    pl(k.c.nfiles), bad_tensors, k.c.nt, pl(k.c.nt));
	if (k.uncommitted)
		die("'%s': its files are intact, but it is an interrupted save, never renamed into place: not a "
		    "checkpoint", path);
	if (k.name_problem[0])
		die("'%s': not a valid checkpoint: its name is not its update", path);
	info("'%s': %d file%s, %d tensor%s, %.1f MB verified in %.2f s", path, k.c.nfiles, pl(k.c.nfiles), k.c.nt,
	     pl(k.c.nt), bytes / 1e6, secs);
	ck_close(&k);
	return 0;
}

/* ---- diff ---- */

struct diffctx {
	struct lmt_json j;
	int nstate;
};

static int ignored(const char *p)
{
	for (int i = 0; i < O.nignore; i++) {
		const char *g = O.ignore[i];
		char full[1024];
		snprintf(full, sizeof full, "%s%s", strncmp(g, "state.", 6) && strcmp(g, "state") ? "state." : "", g);
		size_t n = strlen(full);
		if (!strncmp(p, full, n) && (p[n] == 0 || p[n] == '.' || p[n] == '['))
			return 1;
	}
	return 0;
}

static void state_diff_put(struct diffctx *d, const char *p, json_t *a, json_t *b)
{
	d->nstate++;
	char *sa = dump(a), *sb = dump(b);
	if (table) {
		out("%-40s %.60s%s -> %.60s%s\n", p, sa ? sa : "(absent)", sa && strlen(sa) > 60 ? "..." : "",
		    sb ? sb : "(absent)", sb && strlen(sb) > 60 ? "..." : "");
	} else {
		lmt_json_begin(&d->j);
		lmt_json_str(&d->j, "event", "state");
		lmt_json_str(&d->j, "key", p);
		if (sa)
			lmt_json_raw(&d->j, "a", sa);
		if (sb)
			lmt_json_raw(&d->j, "b", sb);
		if (!sa || !sb)
			lmt_json_str(&d->j, "only", sa ? "a" : "b");
		put_line(&d->j);
	}
	free(sa);
	free(sb);
}

static int scalar_equal(json_t *a, json_t *b)
{
	if (json_is_number(a) && json_is_number(b)) {
		if (json_is_integer(a) && json_is_integer(b))
			return json_integer_value(a) == json_integer_value(b);
		return json_number_value(a) == json_number_value(b);
	}
	if (json_typeof(a) != json_typeof(b))
		return 0;
	if (json_is_string(a))
		return json_string_length(a) == json_string_length(b) &&
		       !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
	return 1; /* true, false, null */
}

/* Report every dotted path under p where a and b differ (either may be NULL: absent). */
static void state_diff(struct diffctx *d, const char *p, json_t *a, json_t *b)
{
	if (ignored(p))
		return;
	char sub[2048];
	if (json_is_object(a) && json_is_object(b)) {
		const char *key;
		json_t *v;
		json_object_foreach(a, key, v) {
			snprintf(sub, sizeof sub, "%s.%s", p, key);
			state_diff(d, sub, v, json_object_get(b, key));
		}
		json_object_foreach(b, key, v) {
			if (json_object_get(a, key))
				continue;
			snprintf(sub, sizeof sub, "%s.%s", p, key);
			state_diff(d, sub, NULL, v);
		}
		return;
	}
	if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
		for (size_t i = 0; i < json_array_size(a); i++) {
			snprintf(sub, sizeof sub, "%s[%zu]", p, i);
			state_diff(d, sub, json_array_get(a, i), json_array_get(b, i));
		}
		return;
	}
	if (a && b && !json_is_object(a) && !json_is_array(a) && !json_is_object(b) && !json_is_array(b) &&
	    scalar_equal(a, b))
		return;
	state_diff_put(d, p, a, b);
}

struct tdiff {
	uint64_t differing, nonfinite_mismatch;
	double max_abs, max_ref;
};

static void compare(struct tdiff *t, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t ua, ub;
		memcpy(&ua, &a[i], 4);
		memcpy(&ub, &b[i], 4);
		double x = a[i], y = b[i];
		int fx = isfinite(x), fy = isfinite(y);
		if (fx && fabs(x) > t->max_ref)
			t->max_ref = fabs(x);
		if (fy && fabs(y) > t->max_ref)
			t->max_ref = fabs(y);
		if (ua == ub)
			continue;
		if (fx && fy) {
			double dd = fabs(x - y);
			if (dd > t->max_abs)
				t->max_abs = dd;
			if (O.atol > 0 && dd <= O.atol)
				continue;
		} else if (!(isnan(x) && isnan(y))) {
			t->nonfinite_mismatch++;
		}
		t->differing++;
	}
}

static int same_shape(const struct lmt_ckpt_entry *a, const struct lmt_ckpt_entry *b)
{
	if (a->ndim != b->ndim)
		return 0;
	for (int k = 0; k < a->ndim; k++)
		if (a->shape[k] != b->shape[k])
			return 0;
	return 1;
}

static int diff(const char *arga, const char *argb)
{
	char pa[PATH_MAX], pb[PATH_MAX];
	resolve(arga, pa, sizeof pa);
	resolve(argb, pb, sizeof pb);
	struct ck A, B;
	ck_open(&A, pa, 0);
	ck_open(&B, pb, 0);
	int errors = 0;
	for (int i = 0; i < A.c.nfiles; i++)
		if (A.f[i].problem[0]) {
			fprintf(stderr, "%s: %s\n", tool_name, A.f[i].problem);
			errors++;
		}
	for (int i = 0; i < B.c.nfiles; i++)
		if (B.f[i].problem[0]) {
			fprintf(stderr, "%s: %s\n", tool_name, B.f[i].problem);
			errors++;
		}
	struct diffctx d;
	memset(&d, 0, sizeof d);
	lmt_json_init(&d.j);
	if (table) {
		out("a: '%s' (update %llu, world %d)\n", pa, (unsigned long long)A.c.update, A.c.world);
		out("b: '%s' (update %llu, world %d)\n", pb, (unsigned long long)B.c.update, B.c.world);
	} else {
		lmt_json_begin(&d.j);
		lmt_json_str(&d.j, "event", "diff");
		lmt_json_obj(&d.j, "a");
		lmt_json_str(&d.j, "path", pa);
		lmt_json_u64(&d.j, "update", A.c.update);
		lmt_json_u64(&d.j, "world", (uint64_t)A.c.world);
		lmt_json_obj_end(&d.j);
		lmt_json_obj(&d.j, "b");
		lmt_json_str(&d.j, "path", pb);
		lmt_json_u64(&d.j, "update", B.c.update);
		lmt_json_u64(&d.j, "world", (uint64_t)B.c.world);
		lmt_json_obj_end(&d.j);
		lmt_json_num(&d.j, "atol", O.atol);
		put_line(&d.j);
	}
	state_diff(&d, "state", json_object_get(A.c.manifest, "state"), json_object_get(B.c.manifest, "state"));

	float *ba = malloc(BLOCK), *bb = malloc(BLOCK);
	if (!ba || !bb)
		die("out of memory");
	uint64_t total = 0, done = 0;
	for (int i = 0; i < A.c.nt; i++)
		if (selected(A.c.t[i].name))
			total += A.c.t[i].numel * 4;
	struct lmt_progress bar;
	lmt_progress_init(&bar, "comparing", "B", total, tool_quiet);
	int n_same = 0, n_differ = 0, n_shape = 0, n_only_a = 0, n_only_b = 0, n_err = 0, w = 6;
	for (int i = 0; i < A.c.nt; i++)
		w = LMT_MAX(w, (int)strlen(A.c.t[i].name));
	for (int i = 0; i < B.c.nt; i++)
		w = LMT_MAX(w, (int)strlen(B.c.t[i].name));
	for (int pass = 0; pass < 2; pass++) {
		const struct ck *X = pass ? &B : &A, *Y = pass ? &A : &B;
		for (int i = 0; i < X->c.nt; i++) {
			const struct lmt_ckpt_entry *ea = &X->c.t[i], *eb = lmt_ckpt_find(&Y->c, ea->name);
			if (!selected(ea->name) || (pass && eb))
				continue;
			if (pass) { /* only in B: report it as b */
				eb = ea;
				ea = NULL;
			}
			const struct lmt_ckpt_entry *e = ea ? ea : eb;
			const char *status;
			struct tdiff t;
			memset(&t, 0, sizeof t);
			char err[2100] = "";
			if (!ea) {
				status = "only-b";
				n_only_b++;
			} else if (!eb) {
				status = "only-a";
				n_only_a++;
			} else if (!same_shape(ea, eb)) {
				status = "shape";
				n_shape++;
			} else {
				struct treader ra, rb;
				tr_init(&ra, &A, ea);
				tr_init(&rb, &B, eb);
				long ma, mb;
				for (;;) {
					ma = tr_read(&ra, ba, BLOCK / 4);
					mb = tr_read(&rb, bb, BLOCK / 4);
					if (ma <= 0 || mb <= 0 || ma != mb)
						break;
					compare(&t, ba, bb, (size_t)ma);
					done += (uint64_t)ma * 4;
					lmt_progress_update(&bar, done);
				}
				if (ma < 0 || mb < 0 || ra.bad_chunks || rb.bad_chunks || ma != mb) {
					status = "error";
					n_err++;
					snprintf(err, sizeof err, "%s%s%s", ra.err, ra.err[0] && rb.err[0] ? "; " : "", rb.err);
					if (!err[0])
						snprintf(err, sizeof err, "tensor '%s': the two hold different numbers of elements",
							 e->name);
				} else if (t.differing) {
					status = "differ";
					n_differ++;
				} else {
					status = "same";
					n_same++;
				}
			}
			int compared = !strcmp(status, "same") || !strcmp(status, "differ");
			double rel = t.max_abs / LMT_MAX(t.max_ref, (double)FLT_MIN);
			if (table) {
				lmt_progress_done(&bar);
				char sa[64] = "-", sb[64] = "-";
				if (ea)
					shape_str(ea, sa, sizeof sa);
				if (eb)
					shape_str(eb, sb, sizeof sb);
				if (!strcmp(status, "same"))
					;
				else if (!strcmp(status, "differ"))
					out("%-*s differ  max|a-b| %.4g  relative %.4g  %llu of %llu elements differ%s\n", w,
					    e->name, t.max_abs, rel, (unsigned long long)t.differing,
					    (unsigned long long)e->numel, t.nonfinite_mismatch ? "  (non-finite in one only)" : "");
				else if (!strcmp(status, "shape"))
					out("%-*s shape   %s vs %s\n", w, e->name, sa, sb);
				else if (!strcmp(status, "error"))
					out("%-*s error   %s\n", w, e->name, err);
				else
					out("%-*s %s  %s\n", w, e->name, status, ea ? sa : sb);
			} else {
				lmt_json_begin(&d.j);
				lmt_json_str(&d.j, "event", "tensor");
				lmt_json_str(&d.j, "name", e->name);
				lmt_json_str(&d.j, "status", status);
				if (ea)
					json_shape(&d.j, "shape_a", ea);
				if (eb)
					json_shape(&d.j, "shape_b", eb);
				if (compared) {
					lmt_json_u64(&d.j, "elements", e->numel);
					lmt_json_u64(&d.j, "differing", t.differing);
					lmt_json_num(&d.j, "max_abs", t.max_abs);
					lmt_json_num(&d.j, "rel", rel);
					lmt_json_u64(&d.j, "nonfinite_mismatch", t.nonfinite_mismatch);
				}
				if (err[0])
					lmt_json_str(&d.j, "error", err);
				put_line(&d.j);
			}
			if (err[0])
				fprintf(stderr, "%s: %s\n", tool_name, err);
		}
	}
	lmt_progress_done(&bar);
	errors += n_err;
	int identical = !d.nstate && !n_differ && !n_shape && !n_only_a && !n_only_b && !errors;
	if (table) {
		out("%d tensors the same, %d differ, %d of another shape, %d only in a, %d only in b%s; %d state fields "
		    "differ%s\n", n_same, n_differ, n_shape, n_only_a, n_only_b, n_err ? ", some unreadable" : "",
		    d.nstate, identical ? ": identical" : "");
	} else {
		lmt_json_begin(&d.j);
		lmt_json_str(&d.j, "event", "summary");
		lmt_json_bool(&d.j, "identical", identical);
		lmt_json_u64(&d.j, "tensors", (uint64_t)(n_same + n_differ + n_shape + n_only_a + n_only_b + n_err));
		lmt_json_u64(&d.j, "same", (uint64_t)n_same);
		lmt_json_u64(&d.j, "differ", (uint64_t)n_differ);
		lmt_json_u64(&d.j, "shape", (uint64_t)n_shape);
		lmt_json_u64(&d.j, "only_a", (uint64_t)n_only_a);
		lmt_json_u64(&d.j, "only_b", (uint64_t)n_only_b);
		lmt_json_u64(&d.j, "errors", (uint64_t)errors);
		lmt_json_u64(&d.j, "state_differ", (uint64_t)d.nstate);
		put_line(&d.j);
	}
	lmt_json_release(&d.j);
	free(ba);
	free(bb);
	ck_close(&A);
	ck_close(&B);
	if (errors)
		die("'%s' and '%s' could not be compared in full (%d errors)", pa, pb, errors);
	if (!identical)
		info("'%s' and '%s' differ: %d tensor%s, %d state field%s", pa, pb, n_differ + n_shape + n_only_a + n_only_b,
		     pl(n_differ + n_shape + n_only_a + n_only_b), d.nstate, pl(d.nstate));
	return identical ? 0 : 1;
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
			const char **p = realloc(*list, ((size_t)*n + 1) * sizeof *p);
			if (!p)
				die("out of memory");
			p[(*n)++] = optarg;
			*list = p;
			break;
		}
		case OPT_NO_STATS: O.no_stats = 1; break;
		case OPT_ATOL: O.atol = opt_double("atol", optarg, 0, 1e38); break;
		case OPT_JSON: O.json = 1; break;
		case OPT_TABLE: O.table = 1; break;
		default: bad_option(argv);
		}
	}
	if (O.json && O.table)
		usage_error("--json and --table exclude each other");
	if (O.verify && O.diff)
		usage_error("--verify and --diff exclude each other");
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
	if (O.verify) {
		if (O.nglobs || O.no_stats)
			usage_error("--verify checks every file and tensor: --tensor and --no-stats do not apply");
		return verify(argv[optind]);
	}
	return list(argv[optind]);
}
