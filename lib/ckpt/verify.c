/*
 * verify.c: the verification walk over a checkpoint's data files, and the
 * explanation of directories that are not checkpoints (see verify.h).
 *
 * Data files are read with pread in blocks, never mapped or loaded whole, and each
 * file's payload is read once for both its SHA-256 and its chunks' CRC-32Cs. Every
 * problem is noted and the walk goes on, so that a caller that wants all of them
 * (ckpt-inspect --verify) gets all of them; a caller that wants a yes or no stops
 * at the first from its callback.
 */
#include "ckpt/verify.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/util.h"

#define BLOCK ((size_t)4 << 20)       /* bytes read at a time */

void lmt_ckpt_note(char *buf, size_t cap, const char *fmt, ...)
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

/* A problem of d: noted, and its code kept if it is the first. */
#define PROBLEM(d, c, ...)                                          \
	do {                                                        \
		if (!(d)->code)                                     \
			(d)->code = (c);                            \
		lmt_ckpt_note((d)->problem, sizeof (d)->problem, __VA_ARGS__); \
	} while (0)

long lmt_ckpt_pread(int fd, void *buf, size_t n, uint64_t off)
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
	return (long)got;
}

static int all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

int lmt_ckpt_tmp_name(const char *name, unsigned long long *update, long *pid)
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

/* ---- each file from its header ---- */

void lmt_ckpt_dfile_check(const struct lmt_ckpt *c, int i, struct lmt_ckpt_dfile *d)
{
	const struct lmt_ckpt_file *mf = &c->files[i];
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	memset(d, 0, sizeof *d);
	if ((size_t)snprintf(d->path, sizeof d->path, "%s/%s", c->dir, mf->name) >= sizeof d->path) {
		PROBLEM(d, LMT_EINVAL, "path too long: '%.60s...'", d->path);
		return;
	}
	d->payload_at = LMT_HDR_SIZE + lmt_format_ckpt.ext_size;
	int fd = open(d->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			PROBLEM(d, LMT_ENOTFOUND, "'%s': missing (the manifest lists it, %llu bytes)", d->path,
				(unsigned long long)mf->bytes);
		else
			PROBLEM(d, LMT_EIO, "'%s': %s", d->path, strerror(errno));
		return;
	}
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		PROBLEM(d, LMT_EFORMAT, "'%s': not a regular file", d->path);
		close(fd);
		return;
	}
	d->usable = 1;
	d->size = (uint64_t)st.st_size;
	if (d->size != mf->bytes)
		PROBLEM(d, LMT_EFORMAT, "'%s': %llu bytes, the manifest says %llu (%s)", d->path,
			(unsigned long long)d->size, (unsigned long long)mf->bytes,
			d->size < mf->bytes ? "truncated" : "longer");
	uint8_t hb[4096];
	struct lmt_err err = { 0 };
	long n = lmt_ckpt_pread(fd, hb, sizeof hb, 0);
	int e = errno;
	close(fd);
	if (n < 0) {
		PROBLEM(d, LMT_EIO, "'%s': read: %s", d->path, strerror(e));
		return;
	}
	if (n >= LMT_HDR_SIZE && all_zero(hb, LMT_HDR_SIZE)) {
		PROBLEM(d, LMT_EFORMAT,
			"'%s': header all zeros (a data file gets its header last: this one was never finished)",
			d->path);
		return;
	}
	int rc = lmt_hdr_parse(&d->hdr, hb, (size_t)n, d->path, &lmt_format_ckpt, &err);
	if (rc) {
		PROBLEM(d, rc, "%s", err.msg);
		return;
	}
	d->hdr_ok = 1;
	d->payload_at = d->hdr.header_size;
	uint64_t total = (uint64_t)d->hdr.header_size + d->hdr.payload_size;
	if (total != mf->bytes)
		PROBLEM(d, LMT_EFORMAT, "'%s': its header says %u + %llu = %llu bytes, the manifest %llu", d->path,
			d->hdr.header_size, (unsigned long long)d->hdr.payload_size, (unsigned long long)total,
			(unsigned long long)mf->bytes);
	if (!LMT_FUZZING && memcmp(d->hdr.payload_sha256, mf->sha256, LMT_SHA256_LEN)) /* LMT_FUZZING: skipped in the fuzz build */
		PROBLEM(d, LMT_ECHECKSUM, "'%s': its header's payload sha256 is %s, the manifest says %s", d->path,
			lmt_sha256_hex(d->hdr.payload_sha256, a), lmt_sha256_hex(mf->sha256, b));
	const uint8_t *ext = hb + LMT_HDR_SIZE;
	uint32_t rank = lmt_load_u32(ext), world = lmt_load_u32(ext + 4), dtype = lmt_load_u32(ext + 16);
	uint64_t nch = lmt_load_u64(ext + 8), want = c->rank_first[mf->rank + 1] - c->rank_first[mf->rank];
	if (rank != (uint32_t)mf->rank || world != (uint32_t)c->world)
		PROBLEM(d, LMT_EFORMAT, "'%s': rank %u of %u, the manifest says %d of %d", d->path, rank, world,
			mf->rank, c->world);
	if (nch != want)
		PROBLEM(d, LMT_EFORMAT, "'%s': %llu chunks, the manifest places %llu in it", d->path,
			(unsigned long long)nch, (unsigned long long)want);
	if (dtype != 0)
		PROBLEM(d, LMT_EFORMAT, "'%s': dtype %u, this build reads 0 (f32)", d->path, dtype);
}

struct lmt_ckpt_dfile *lmt_ckpt_dfile_check_all(const struct lmt_ckpt *c)
{
	struct lmt_ckpt_dfile *f = calloc((size_t)c->nfiles + 1, sizeof *f);
	for (int i = 0; f && i < c->nfiles; i++)
		lmt_ckpt_dfile_check(c, i, &f[i]);
	return f;
}

/* ---- the walk ---- */

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

/* by tensor, then by place in the file */
static int cmp_cref_tensor(const void *x, const void *y)
{
	const struct cref *a = x, *b = y;
	return a->t != b->t ? (a->t > b->t) - (a->t < b->t) : cmp_cref(x, y);
}

struct walk {
	const struct lmt_ckpt *c;
	const struct lmt_ckpt_verify_ops *ops;
	uint8_t *buf;
	struct cref *refs;
	size_t refcap;
	int *tbad;
	struct lmt_ckpt_verify_result res;
	int stop;
};

static void report(struct walk *w, const struct lmt_ckpt_finding *f)
{
	if (!w->stop && w->ops && w->ops->report && w->ops->report(w->ops->ctx, f))
		w->stop = 1;
}

/* File i: one pass over its payload for its SHA-256 and every chunk's CRC-32C. */
static int walk_file(struct walk *w, int i)
{
	const struct lmt_ckpt *c = w->c;
	const struct lmt_ckpt_file *mf = &c->files[i];
	struct lmt_ckpt_dfile dd, *d = &dd;
	char hex[LMT_SHA256_HEX], hex2[LMT_SHA256_HEX];
	lmt_ckpt_dfile_check(c, i, d);
	/* this file's chunks, in payload order */
	size_t nrefs = 0;
	for (size_t k = c->rank_first[mf->rank]; k < c->rank_first[mf->rank + 1]; k++) {
		int t = c->rank_chunk[k].t, q = c->rank_chunk[k].q;
		const struct lmt_ckpt_chunk *ch = &c->t[t].chunks[q];
		if (LMT_GROW(w->refs, w->refcap, nrefs + 1))
			return LMT_ENOMEM;
		w->refs[nrefs++] = (struct cref){ t, q, ch->byte_offset, ch->byte_offset + ch->count * 4, 0 };
	}
	struct cref *refs = w->refs;
	qsort(refs, nrefs, sizeof *refs, cmp_cref);
	int fd = d->usable ? open(d->path, O_RDONLY | O_CLOEXEC) : -1;
	uint64_t avail = fd >= 0 && d->size > d->payload_at ? d->size - d->payload_at : 0, pos = 0;
	struct lmt_sha256 sha;
	uint8_t digest[LMT_SHA256_LEN];
	if (lmt_sha256_init(&sha)) {
		if (fd >= 0)
			close(fd);
		return LMT_ENOMEM;
	}
	size_t lo = 0;
	while (pos < avail) {
		size_t m = (size_t)LMT_MIN((uint64_t)BLOCK, avail - pos);
		long got = lmt_ckpt_pread(fd, w->buf, m, d->payload_at + pos);
		if (got < 0) {
			PROBLEM(d, LMT_EIO, "'%s': read: %s", d->path, strerror(errno));
			avail = pos;
			break;
		}
		if ((size_t)got < m) { /* shrank while we read */
			m = (size_t)got;
			avail = pos + m;
		}
		lmt_sha256_update(&sha, w->buf, m);
		for (size_t r = lo; r < nrefs && refs[r].start < pos + m; r++) {
			uint64_t a = LMT_MAX(refs[r].start, pos), b = LMT_MIN(refs[r].end, pos + m);
			if (a < b)
				refs[r].crc = lmt_crc32c(refs[r].crc, w->buf + (a - pos), (size_t)(b - a));
		}
		pos += m;
		while (lo < nrefs && refs[lo].end <= pos)
			lo++;
		w->res.bytes += m;
		if (w->ops && w->ops->progress)
			w->ops->progress(w->ops->ctx, w->res.bytes);
	}
	if (fd >= 0)
		close(fd);
	lmt_sha256_final(&sha, digest);
	/* the SHA-256 tells which side changed: the data, or the manifest */
	int sha_ok = 0;
	if (fd >= 0 && d->size == mf->bytes && avail == d->size - d->payload_at) {
		sha_ok = LMT_FUZZING || !memcmp(digest, mf->sha256, LMT_SHA256_LEN); /* LMT_FUZZING: skipped in the fuzz build */
		if (sha_ok)
			;
		else if (d->hdr_ok && !memcmp(digest, d->hdr.payload_sha256, LMT_SHA256_LEN))
			; /* the data are the header's: the check said the manifest disagrees */
		else
			PROBLEM(d, LMT_ECHECKSUM, "'%s': payload sha256 %s, the manifest says %s (data corrupted)",
				d->path, lmt_sha256_hex(digest, hex), lmt_sha256_hex(mf->sha256, hex2));
	}
	int fbad = d->problem[0] != 0;
	w->res.bad_files += fbad;
	report(w, &(struct lmt_ckpt_finding){ LMT_CKPT_FINDING_FILE, !fbad, d->code, i, d->path, NULL, NULL,
					       d->problem });
	/* the chunks, in the manifest's tensor order (by their place in the file within one) */
	qsort(refs, nrefs, sizeof *refs, cmp_cref_tensor);
	for (size_t r = 0; r < nrefs && !w->stop; r++) {
		int t = refs[r].t;
		const struct lmt_ckpt_entry *e = &c->t[t];
		const struct lmt_ckpt_chunk *ch = &e->chunks[refs[r].q];
		char msg[1024] = "";
		int code = LMT_EFORMAT;
		if (fd < 0)
			lmt_ckpt_note(msg, sizeof msg, "'%s': tensor '%s': its elements [%llu, %llu) are in a file that "
			     "cannot be read", d->path, e->name, (unsigned long long)ch->offset,
			     (unsigned long long)(ch->offset + ch->count));
		else if (refs[r].end > avail)
			lmt_ckpt_note(msg, sizeof msg, "'%s': tensor '%s': its elements [%llu, %llu) lie past the end "
			     "of the file (%llu bytes): truncated", d->path, e->name, (unsigned long long)ch->offset,
			     (unsigned long long)(ch->offset + ch->count), (unsigned long long)d->size);
		else if (!LMT_FUZZING && refs[r].crc != ch->crc32c) { /* LMT_FUZZING: skipped in the fuzz build */
			code = LMT_ECHECKSUM;
			lmt_ckpt_note(msg, sizeof msg, "'%s': tensor '%s': elements [%llu, %llu): CRC-32C %08x, the "
			     "manifest says %08x (%s)", d->path, e->name, (unsigned long long)ch->offset,
			     (unsigned long long)(ch->offset + ch->count), refs[r].crc, ch->crc32c,
			     sha_ok ? "the file matches its SHA-256: the manifest's CRC was changed"
				    : "data corrupted");
		} else
			continue;
		w->tbad[t] = 1;
		report(w, &(struct lmt_ckpt_finding){ LMT_CKPT_FINDING_CHUNK, 0, code, i, d->path, e, ch, msg });
	}
	return 0;
}

static int cmp_name(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Files that look like data files but are not in the manifest (looked up among
 * its names sorted, not one by one: thousands of ranks make thousands of files). */
static int walk_extras(struct walk *w)
{
	const char **names = malloc(((size_t)w->c->nfiles + 1) * sizeof *names);
	if (!names)
		return LMT_ENOMEM;
	for (int i = 0; i < w->c->nfiles; i++)
		names[i] = w->c->files[i].name;
	qsort(names, (size_t)w->c->nfiles, sizeof *names, cmp_name);
	DIR *dd = opendir(w->c->dir);
	struct dirent *de;
	while (dd && !w->stop && (de = readdir(dd))) {
		size_t l = strlen(de->d_name);
		if (l < 7 || strcmp(de->d_name + l - 7, ".lmckpt"))
			continue;
		const char *key = de->d_name;
		if (bsearch(&key, names, (size_t)w->c->nfiles, sizeof *names, cmp_name))
			continue;
		char p[PATH_MAX + NAME_MAX + 2], msg[sizeof p + 64];
		snprintf(p, sizeof p, "%s/%s", w->c->dir, de->d_name);
		snprintf(msg, sizeof msg, "'%s': a data file the manifest does not list; ignored", p);
		report(w, &(struct lmt_ckpt_finding){ LMT_CKPT_FINDING_EXTRA, 1, 0, -1, p, NULL, NULL, msg });
	}
	if (dd)
		closedir(dd);
	free(names);
	return 0;
}

int lmt_ckpt_verify(const struct lmt_ckpt *c, const struct lmt_ckpt_verify_ops *ops,
		    struct lmt_ckpt_verify_result *res, struct lmt_err *err)
{
	struct walk w;
	memset(&w, 0, sizeof w);
	w.c = c;
	w.ops = ops;
	w.buf = malloc(BLOCK);
	w.tbad = calloc((size_t)c->nt + 1, sizeof *w.tbad);
	w.refcap = (size_t)c->nt + 1;
	w.refs = calloc(w.refcap, sizeof *w.refs);
	int rc = w.buf && w.tbad && w.refs ? 0 : LMT_ENOMEM;
	for (int i = 0; i < c->nfiles && !rc && !w.stop; i++)
		rc = walk_file(&w, i);
	if (!rc)
		rc = walk_extras(&w);
	for (int t = 0; t < c->nt; t++)
		w.res.bad_tensors += w.tbad[t];
	free(w.buf);
	free(w.tbad);
	free(w.refs);
	if (res)
		*res = w.res;
	if (rc)
		return lmt_err_set(err, rc, "out of memory");
	return w.res.bad_files || w.res.bad_tensors;
}

/* ---- directories that are not checkpoints ---- */

const char *lmt_ckpt_base_name(const char *path, char *b, size_t cap)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	size_t s = n;
	while (s > 0 && path[s - 1] != '/')
		s--;
	snprintf(b, cap, "%.*s", (int)(n - s), path + s);
	return b;
}

int lmt_ckpt_name_check(const struct lmt_ckpt *c, const char *dir, char *problem, size_t cap)
{
	char nb[NAME_MAX + 1];
	const char *name = lmt_ckpt_base_name(dir, nb, sizeof nb);
	unsigned long long u;
	long pid;
	problem[0] = 0;
	if (lmt_ckpt_tmp_name(name, &u, &pid))
		return 1;
	if (!strncmp(name, "step-", 5)) {
		char *end;
		u = strtoull(name + 5, &end, 10);
		if (end != name + 5 && !*end && u != c->update)
			snprintf(problem, cap, "'%s': its manifest says update %llu, its name %llu", dir,
				 (unsigned long long)c->update, u);
	}
	return 0;
}

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
	long n = S_ISREG(st.st_mode) ? lmt_ckpt_pread(fd, hb, sizeof hb, 0) : -1;
	close(fd);
	int complete = 0;
	struct lmt_hdr h;
	if (n < 0) {
		snprintf(msg, cap, "cannot be read");
	} else if (n < LMT_HDR_SIZE) {
		snprintf(msg, cap, "%ld bytes, shorter than the %d-byte header: being written, or truncated", n,
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

static uint64_t size_of(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int add_ent(struct lmt_ckpt_explanation *x, size_t *cap, const char *name, const char *kind,
		   uint64_t bytes, int missing, const char *status)
{
	if (LMT_GROW(x->ents, *cap, (size_t)x->nents + 1))
		return LMT_ENOMEM;
	struct lmt_ckpt_dirent *d = &x->ents[x->nents];
	d->name = strdup(name);
	d->status = strdup(status);
	d->kind = kind;
	d->bytes = bytes;
	d->missing = missing;
	x->nents++;
	return d->name && d->status ? 0 : LMT_ENOMEM;
}

/* One entry of dir, described. */
static int explain_entry(struct lmt_ckpt_explanation *x, size_t *cap, const char *dir, const char *fn, int valid_json,
			 const char *why)
{
	char p[PATH_MAX + NAME_MAX + 2], msg[1024];
	snprintf(p, sizeof p, "%s/%s", dir, fn);
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
		size = size_of(p);
		snprintf(msg, sizeof msg, "%s", !valid_json ? "not valid JSON" : why ? "does not describe a checkpoint"
										     : "valid");
	} else if (fn[0] == '.' && t) {
		kind = "data-temporary";
		char buf[900];
		describe_data(p, buf, sizeof buf, &size);
		snprintf(msg, sizeof msg, "the temporary of '%.*s' while it was written: %s", (int)(t + 7 - fn - 1),
			 fn + 1, buf);
	} else if (fn[0] == '.' && strstr(fn, "manifest.json.tmp.")) {
		kind = "manifest-temporary";
		size = size_of(p);
		snprintf(msg, sizeof msg, "the manifest while it was written, never renamed");
	} else if (lmckpt) {
		kind = "data";
		describe_data(p, msg, sizeof msg, &size);
	} else {
		size = size_of(p);
		snprintf(msg, sizeof msg, "not part of a checkpoint");
	}
	return add_ent(x, cap, fn, kind, size, 0, msg);
}

void lmt_ckpt_explanation_release(struct lmt_ckpt_explanation *x)
{
	for (int i = 0; i < x->nents; i++) {
		free(x->ents[i].name);
		free(x->ents[i].status);
	}
	free(x->ents);
	memset(x, 0, sizeof *x);
}

int lmt_ckpt_explain(struct lmt_ckpt_explanation *x, const char *dir, const char *why, struct lmt_err *err)
{
	char namebuf[NAME_MAX + 1], who[256] = "", mpath[PATH_MAX + 16];
	memset(x, 0, sizeof *x);
	const char *name = lmt_ckpt_base_name(dir, namebuf, sizeof namebuf);
	x->tmp = lmt_ckpt_tmp_name(name, &x->update, &x->pid);
	if (!x->tmp && !strncmp(name, "step-", 5)) {
		char *end;
		x->update = strtoull(name + 5, &end, 10);
		x->step = end != name + 5 && !*end;
	}
	if (x->tmp)
		snprintf(who, sizeof who, "an interrupted save of update %llu by process %ld, never renamed into place; ",
			 x->update, x->pid);
	snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
	struct stat st;
	int have_manifest = lstat(mpath, &st) == 0;
	x->manifest = "absent";
	json_error_t je;
	json_t *m = have_manifest ? json_load_file(mpath, 0, &je) : NULL;
	if (!have_manifest) {
		if (x->tmp)
			snprintf(x->reason, sizeof x->reason, "'%s': %sno manifest.json: this save never finished; it is "
				 "not a checkpoint", dir, who);
		else if (x->step) /* renamed only once its manifest was written */
			snprintf(x->reason, sizeof x->reason, "'%s': no manifest.json: a save names its directory step-N "
				 "only after writing the manifest, so this one lost it since; it is not a checkpoint", dir);
		else if (has_data_files(dir))
			snprintf(x->reason, sizeof x->reason, "'%s': no manifest.json: an unfinished save or a damaged "
				 "copy; it is not a checkpoint", dir);
		else
			return lmt_err_set(err, LMT_ENOTFOUND,
					   "'%s': no manifest.json and no ckpt/: neither a checkpoint nor a run directory", dir);
	} else if (!m) {
		x->manifest = "invalid";
		snprintf(x->reason, sizeof x->reason, "%s%s; it is not a checkpoint", who, why ? why : "invalid manifest");
	} else {
		x->manifest = "inconsistent";
		snprintf(x->reason, sizeof x->reason, "%s%s; it is not a checkpoint", who, why ? why : "bad manifest");
	}

	/* what the manifest lists (if it parses at all), to tell which files are missing */
	json_t *listed = json_is_object(m) ? json_object_get(m, "files") : NULL;
	if (!json_is_array(listed))
		listed = NULL;
	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, alphasort), rc = 0;
	size_t cap = 0;
	if (n < 0) {
		json_decref(m);
		return lmt_err_set(err, LMT_EIO, "'%s': %s", dir, strerror(errno));
	}
	for (int i = 0; i < n && !rc; i++) {
		const char *fn = ents[i]->d_name;
		if (strcmp(fn, ".") && strcmp(fn, ".."))
			rc = explain_entry(x, &cap, dir, fn, m != NULL, why);
	}
	/* files the manifest lists that are not there */
	for (size_t i = 0; listed && i < json_array_size(listed) && !rc; i++) {
		const char *fn = json_string_value(json_object_get(json_array_get(listed, i), "path"));
		char p[PATH_MAX];
		if (!fn || strchr(fn, '/') || snprintf(p, sizeof p, "%s/%s", dir, fn) >= (int)sizeof p ||
		    lstat(p, &st) == 0)
			continue;
		rc = add_ent(x, &cap, fn, "missing", 0, 1, "listed in manifest.json, absent");
	}
	for (int i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	json_decref(m);
	if (rc) {
		lmt_ckpt_explanation_release(x);
		return lmt_err_set(err, rc, "out of memory");
	}
	return 0;
}
