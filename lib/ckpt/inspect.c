/*
 * inspect.c: tensors read for inspection, their statistics, and the comparison of
 * two checkpoints (see inspect.h).
 *
 * The reader holds one descriptor, that of the file of the chunk it reads, so that
 * a world size above the descriptor limit is read like any other, and two readers
 * side by side (a comparison) hold two.
 */
#include "ckpt/inspect.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/digest.h"
#include "core/util.h"

int lmt_ckpt_newest(const char *run, char *out, size_t cap, int *seen, void (*skip)(void *ctx, const char *msg),
		    void *ctx, struct lmt_err *err)
{
	char ckdir[PATH_MAX], msg[PATH_MAX + 1200];
	int rc = 0;
	/* a path that does not fit is an error, in the words the tools use for one */
	if ((size_t)snprintf(ckdir, sizeof ckdir, "%s/ckpt", run) >= sizeof ckdir)
		return lmt_err_set(err, LMT_ERANGE, "path too long: '%.60s...'", ckdir);
	DIR *dd = opendir(ckdir);
	struct dirent *de;
	int ntmp = 0;
	while (dd && (de = readdir(dd))) {
		unsigned long long u;
		long pid;
		if (lmt_ckpt_tmp_name(de->d_name, &u, &pid)) {
			snprintf(msg, sizeof msg, "'%s/%s': an interrupted save (not a checkpoint); ignored", ckdir,
				 de->d_name);
			if (skip)
				skip(ctx, msg);
			ntmp++;
		}
	}
	if (dd)
		closedir(dd);
	char **names;
	uint64_t *ups;
	int n;
	if ((rc = lmt_ckpt_list(run, &names, &ups, &n, err)))
		return rc;
	int found = 0;
	for (int i = n - 1; i >= 0 && !found; i--) {
		char p[PATH_MAX];
		struct lmt_ckpt c;
		struct lmt_err e2 = { 0 };
		if ((size_t)snprintf(p, sizeof p, "%s/%s", ckdir, names[i]) >= sizeof p) {
			rc = lmt_err_set(err, LMT_ERANGE, "path too long: '%.60s...'", p);
			break;
		}
		if (lmt_ckpt_open_listed(&c, p, ups[i], 0, &e2) == 0) {
			lmt_ckpt_close(&c);
			snprintf(out, cap, "%s", p);
			found = 1;
		} else if (skip) {
			snprintf(msg, sizeof msg, "skipping '%s': %s", p, e2.msg);
			skip(ctx, msg);
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ups);
	*seen = n || ntmp;
	return rc ? rc : found;
}

/* ---- reading a tensor in element order ---- */

void lmt_ckpt_treader_init(struct lmt_ckpt_treader *r, const struct lmt_ckpt *c, const struct lmt_ckpt_dfile *f,
			   const struct lmt_ckpt_entry *e)
{
	memset(r, 0, sizeof *r);
	r->c = c;
	r->f = f;
	r->e = e;
	r->fd = -1;
	r->fd_file = -1;
}

void lmt_ckpt_treader_release(struct lmt_ckpt_treader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->fd_file = -1;
}

static int reader_fd(struct lmt_ckpt_treader *r, int i)
{
	if (r->fd_file == i)
		return r->fd;
	lmt_ckpt_treader_release(r);
	if (!r->f[i].usable)
		return -1;
	r->fd = open(r->f[i].path, O_RDONLY | O_CLOEXEC);
	if (r->fd >= 0)
		r->fd_file = i;
	return r->fd;
}

static void end_chunks(struct lmt_ckpt_treader *r)
{
	while (r->q < r->e->nchunks && r->at == r->e->chunks[r->q].count) {
		const struct lmt_ckpt_chunk *ch = &r->e->chunks[r->q];
		if (r->crc != ch->crc32c) {
			r->bad_chunks++;
			lmt_ckpt_note(r->err, sizeof r->err, "'%s': tensor '%s': elements [%llu, %llu): CRC-32C %08x, the manifest "
			     "says %08x (the data or the manifest was changed)", r->f[r->c->file_of_rank[ch->rank]].path,
			     r->e->name, (unsigned long long)ch->offset, (unsigned long long)(ch->offset + ch->count),
			     r->crc, ch->crc32c);
		}
		r->q++;
		r->at = 0;
		r->crc = 0;
	}
}

long lmt_ckpt_treader_read(struct lmt_ckpt_treader *r, float *dst, size_t n)
{
	size_t got = 0;
	end_chunks(r);
	while (got < n && r->q < r->e->nchunks) {
		const struct lmt_ckpt_chunk *ch = &r->e->chunks[r->q];
		size_t take = (size_t)LMT_MIN((uint64_t)(n - got), ch->count - r->at);
		int i = r->c->file_of_rank[ch->rank];
		const struct lmt_ckpt_dfile *d = &r->f[i];
		int fd = reader_fd(r, i);
		if (fd < 0) {
			lmt_ckpt_note(r->err, sizeof r->err, "'%s': tensor '%s': its elements [%llu, %llu) are in a file that cannot "
			     "be read", d->path, r->e->name, (unsigned long long)ch->offset,
			     (unsigned long long)(ch->offset + ch->count));
			return -1;
		}
		uint64_t off = d->payload_at + ch->byte_offset + r->at * 4;
		long m = lmt_ckpt_pread(fd, dst + got, take * 4, off);
		if (m < 0) {
			lmt_ckpt_note(r->err, sizeof r->err, "'%s': read: %s", d->path, strerror(errno));
			return -1;
		}
		if ((size_t)m < take * 4) {
			lmt_ckpt_note(r->err, sizeof r->err, "'%s': tensor '%s': elements [%llu, %llu) lie past the end of the file "
			     "(%llu bytes)", d->path, r->e->name, (unsigned long long)ch->offset,
			     (unsigned long long)(ch->offset + ch->count), (unsigned long long)d->size);
			return -1;
		}
		r->crc = lmt_crc32c(r->crc, dst + got, take * 4);
		r->whole = lmt_crc32c(r->whole, dst + got, take * 4);
		r->at += take;
		got += take;
		end_chunks(r);
	}
	return (long)got;
}

/* ---- statistics ---- */

void lmt_ckpt_stats_init(struct lmt_ckpt_stats *s)
{
	memset(s, 0, sizeof *s);
	s->min = INFINITY;
	s->max = -INFINITY;
}

void lmt_ckpt_stats_add(struct lmt_ckpt_stats *s, const float *x, size_t n)
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

const char *lmt_ckpt_shape_str(const struct lmt_ckpt_entry *e, char *b, size_t cap)
{
	size_t n = 0;
	b[0] = 0;
	for (int k = 0; k < e->ndim && n < cap; k++)
		n += (size_t)snprintf(b + n, cap - n, k ? "x%d" : "%d", e->shape[k]);
	return b;
}

/* ---- listing ---- */

#define SCAN_BLOCK ((size_t)4 << 20) /* bytes read at a time */

int lmt_ckpt_scan_init(struct lmt_ckpt_scan *s, const struct lmt_ckpt *c, const struct lmt_ckpt_dfile *f, int read,
		       void (*progress)(void *ctx, uint64_t bytes), void *ctx, struct lmt_err *err)
{
	memset(s, 0, sizeof *s);
	s->c = c;
	s->f = f;
	s->progress = progress;
	s->ctx = ctx;
	for (int i = 0; i < c->nfiles; i++) {
		s->file_bytes += f[i].size;
		s->bad_files += f[i].problem[0] != 0;
	}
	if (read && !(s->buf = malloc(SCAN_BLOCK)))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	return 0;
}

void lmt_ckpt_scan_release(struct lmt_ckpt_scan *s)
{
	free(s->buf);
	s->buf = NULL;
}

void lmt_ckpt_scan_tensor(struct lmt_ckpt_scan *s, const struct lmt_ckpt_entry *e, struct lmt_ckpt_tscan *t)
{
	struct lmt_ckpt_treader r;
	memset(t, 0, sizeof *t);
	t->e = e;
	t->read = s->buf != NULL;
	lmt_ckpt_shape_str(e, t->shape, sizeof t->shape);
	lmt_ckpt_stats_init(&t->s);
	lmt_ckpt_treader_init(&r, s->c, s->f, e);
	t->readable = 1;
	if (t->read) {
		long m;
		while ((m = lmt_ckpt_treader_read(&r, s->buf, SCAN_BLOCK / 4)) > 0) {
			lmt_ckpt_stats_add(&t->s, s->buf, (size_t)m);
			s->bytes_read += (uint64_t)m * 4;
			if (s->progress)
				s->progress(s->ctx, s->bytes_read);
		}
		t->readable = m == 0;
	}
	lmt_ckpt_treader_release(&r);
	t->bad_chunks = r.bad_chunks;
	t->ok = t->readable && !r.bad_chunks;
	/* read: the CRC-32C of the data as found; manifest only: its single chunk's */
	t->crc32c = t->read ? r.whole : e->nchunks ? e->chunks[0].crc32c : 0;
	t->has_stats = t->read && t->readable && t->s.n > 0;
	if (t->has_stats) {
		t->mean = t->s.sum / t->s.n;
		t->rms = sqrt(t->s.sumsq / t->s.n);
	}
	snprintf(t->err, sizeof t->err, "%s", r.err);
	s->tensors++;
	s->elements += e->numel;
	s->bytes += e->numel * 4;
	s->bad_tensors += !t->ok;
	s->nonfinite += t->s.nonfinite;
	s->nonfinite_tensors += t->s.nonfinite > 0;
}

/* ---- comparing tensors ---- */

const char *lmt_ckpt_tstatus_name(enum lmt_ckpt_tstatus s)
{
	static const char *const names[] = { "same", "differ", "shape", "only-a", "only-b", "error" };
	return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

static void compare(struct lmt_ckpt_tdiff *t, const float *a, const float *b, size_t n, double atol)
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
			if (atol > 0 && dd <= atol)
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

enum lmt_ckpt_tstatus lmt_ckpt_tensor_diff(struct lmt_ckpt_side a, const struct lmt_ckpt_entry *ea,
					   struct lmt_ckpt_side b, const struct lmt_ckpt_entry *eb, double atol,
					   float *ba, float *bb, size_t n, void (*progress)(void *ctx, uint64_t bytes),
					   void *ctx, struct lmt_ckpt_tdiff *t, char *err, size_t cap)
{
	memset(t, 0, sizeof *t);
	err[0] = 0;
	if (!ea)
		return LMT_CKPT_TSTATUS_ONLY_B;
	if (!eb)
		return LMT_CKPT_TSTATUS_ONLY_A;
	if (!same_shape(ea, eb))
		return LMT_CKPT_TSTATUS_SHAPE;
	struct lmt_ckpt_treader ra, rb;
	lmt_ckpt_treader_init(&ra, a.c, a.f, ea);
	lmt_ckpt_treader_init(&rb, b.c, b.f, eb);
	long ma, mb;
	uint64_t done = 0;
	for (;;) {
		ma = lmt_ckpt_treader_read(&ra, ba, n);
		mb = lmt_ckpt_treader_read(&rb, bb, n);
		if (ma <= 0 || mb <= 0 || ma != mb)
			break;
		compare(t, ba, bb, (size_t)ma, atol);
		done += (uint64_t)ma * 4;
		if (progress)
			progress(ctx, done);
	}
	lmt_ckpt_treader_release(&ra);
	lmt_ckpt_treader_release(&rb);
	if (ma < 0 || mb < 0 || ra.bad_chunks || rb.bad_chunks || ma != mb) {
		/* both sides' reasons, once where they are the same (a checkpoint against itself) */
		int same = !strcmp(ra.err, rb.err);
		snprintf(err, cap, "%s%s%s", ra.err, ra.err[0] && rb.err[0] && !same ? "; " : "", same ? "" : rb.err);
		if (!err[0])
			snprintf(err, cap, "tensor '%s': the two hold different numbers of elements", ea->name);
		return LMT_CKPT_TSTATUS_ERROR;
	}
	t->rel = t->max_abs / LMT_MAX(t->max_ref, (double)FLT_MIN);
	return t->differing ? LMT_CKPT_TSTATUS_DIFFER : LMT_CKPT_TSTATUS_SAME;
}

struct walk {
	const struct lmt_ckpt_diff_ops *ops;
	uint64_t base;          /* bytes of A compared before this tensor */
};

static void walk_progress(void *ctx, uint64_t bytes)
{
	struct walk *w = ctx;
	w->ops->progress(w->ops->ctx, w->base + bytes);
}

int lmt_ckpt_diff(struct lmt_ckpt_side a, struct lmt_ckpt_side b, double atol, const struct lmt_ckpt_diff_ops *ops,
		  int count[LMT_CKPT_TSTATUS_COUNT], struct lmt_err *err)
{
	float *ba = malloc(SCAN_BLOCK), *bb = malloc(SCAN_BLOCK);
	struct walk w = { ops, 0 };
	memset(count, 0, LMT_CKPT_TSTATUS_COUNT * sizeof *count);
	if (!ba || !bb) {
		free(ba);
		free(bb);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (int pass = 0; pass < 2; pass++) {
		const struct lmt_ckpt *x = pass ? b.c : a.c, *y = pass ? a.c : b.c;
		for (int i = 0; i < x->nt; i++) {
			const struct lmt_ckpt_entry *ea = &x->t[i], *eb = lmt_ckpt_find(y, ea->name);
			if ((ops->selected && !ops->selected(ops->ctx, ea->name)) || (pass && eb))
				continue;
			if (pass) { /* only in B: report it as b */
				eb = ea;
				ea = NULL;
			}
			struct lmt_ckpt_tdiff t;
			char msg[2100];
			enum lmt_ckpt_tstatus st = lmt_ckpt_tensor_diff(a, ea, b, eb, atol, ba, bb, SCAN_BLOCK / 4,
									ops->progress ? walk_progress : NULL, &w, &t,
									msg, sizeof msg);
			if (st == LMT_CKPT_TSTATUS_SAME || st == LMT_CKPT_TSTATUS_DIFFER)
				w.base += (ea ? ea : eb)->numel * 4;
			count[st]++;
			ops->report(ops->ctx, ea, eb, st, &t, msg);
		}
	}
	free(ba);
	free(bb);
	return 0;
}

/* ---- comparing states ---- */

struct sdiff {
	const char *const *ignore;
	int nignore;
	void (*fn)(void *ctx, const char *path, void *a, void *b);
	void *ctx;
};

static int ignored(const struct sdiff *d, const char *p)
{
	for (int i = 0; i < d->nignore; i++) {
		const char *g = d->ignore[i];
		char full[1024];
		snprintf(full, sizeof full, "%s%s", strncmp(g, "state.", 6) && strcmp(g, "state") ? "state." : "", g);
		size_t n = strlen(full);
		if (!strncmp(p, full, n) && (p[n] == 0 || p[n] == '.' || p[n] == '['))
			return 1;
	}
	return 0;
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

static void state_diff(const struct sdiff *d, const char *p, json_t *a, json_t *b)
{
	if (ignored(d, p))
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
	d->fn(d->ctx, p, a, b);
}

void lmt_ckpt_state_diff(const char *key, void *a, void *b, const char *const *ignore, int nignore,
			 void (*fn)(void *ctx, const char *path, void *a, void *b), void *ctx)
{
	struct sdiff d = { ignore, nignore, fn, ctx };
	state_diff(&d, key, a, b);
}

/* ---- the JSONL records ---- */

static void json_shape(struct lmt_json *j, const char *key, const struct lmt_ckpt_entry *e)
{
	lmt_json_arr(j, key);
	for (int k = 0; k < e->ndim; k++)
		lmt_json_u64(j, NULL, (uint64_t)e->shape[k]);
	lmt_json_arr_end(j);
}

static void begin(struct lmt_json *j, const char *event)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", event);
}

void lmt_ckpt_record_checkpoint(struct lmt_json *j, const char *path, const struct lmt_ckpt *c,
				const struct lmt_ckpt_dfile *f, int committed)
{
	char hex[LMT_SHA256_HEX];
	begin(j, "checkpoint");
	lmt_json_str(j, "path", path);
	lmt_json_u64(j, "update", c->update);
	lmt_json_u64(j, "world", (uint64_t)c->world);
	lmt_json_u64(j, "schema_version", LMT_CKPT_SCHEMA);
	lmt_json_bool(j, "committed", committed);
	lmt_json_u64(j, "tensors", (uint64_t)c->nt);
	lmt_json_arr(j, "files");
	for (int i = 0; i < c->nfiles; i++) {
		lmt_json_obj(j, NULL);
		lmt_json_str(j, "path", c->files[i].name);
		lmt_json_u64(j, "rank", (uint64_t)c->files[i].rank);
		lmt_json_u64(j, "bytes", c->files[i].bytes);
		lmt_json_str(j, "payload_sha256", lmt_sha256_hex(c->files[i].sha256, hex));
		lmt_json_bool(j, "ok", !f[i].problem[0]);
		if (f[i].problem[0])
			lmt_json_str(j, "error", f[i].problem);
		lmt_json_obj_end(j);
	}
	lmt_json_arr_end(j);
	lmt_json_jansson(j, "state", json_object_get(c->manifest, "state"));
}

void lmt_ckpt_record_tensor(struct lmt_json *j, const struct lmt_ckpt_tscan *t)
{
	const struct lmt_ckpt_entry *e = t->e;
	char b[16];
	begin(j, "tensor");
	lmt_json_str(j, "name", e->name);
	lmt_json_str(j, "dtype", "f32");
	json_shape(j, "shape", e);
	lmt_json_u64(j, "elements", e->numel);
	lmt_json_u64(j, "bytes", e->numel * 4);
	lmt_json_u64(j, "chunks", (uint64_t)e->nchunks);
	lmt_json_arr(j, "chunk_crc32c");
	for (int q = 0; q < e->nchunks; q++) {
		snprintf(b, sizeof b, "%08x", e->chunks[q].crc32c);
		lmt_json_str(j, NULL, b);
	}
	lmt_json_arr_end(j);
	if (!t->read)
		return;
	/* NULL and NAN are written as null */
	snprintf(b, sizeof b, "%08x", t->crc32c);
	lmt_json_str(j, "crc32c", t->readable ? b : NULL);
	lmt_json_bool(j, "ok", t->ok);
	lmt_json_num(j, "min", t->has_stats ? t->s.min : NAN);
	lmt_json_num(j, "max", t->has_stats ? t->s.max : NAN);
	lmt_json_num(j, "mean", t->has_stats ? t->mean : NAN);
	lmt_json_num(j, "rms", t->has_stats ? t->rms : NAN);
	if (t->readable)
		lmt_json_u64(j, "nonfinite", t->s.nonfinite);
	else
		lmt_json_null(j, "nonfinite");
	if (!t->ok)
		lmt_json_str(j, "error", t->err);
}

void lmt_ckpt_record_summary(struct lmt_json *j, const char *path, const struct lmt_ckpt *c,
			     const struct lmt_ckpt_scan *s, int read, int committed)
{
	begin(j, "summary");
	lmt_json_str(j, "path", path);
	lmt_json_u64(j, "update", c->update);
	lmt_json_u64(j, "tensors", (uint64_t)s->tensors);
	lmt_json_u64(j, "elements", s->elements);
	lmt_json_u64(j, "bytes", s->bytes);
	lmt_json_u64(j, "files", (uint64_t)c->nfiles);
	lmt_json_u64(j, "file_bytes", s->file_bytes);
	lmt_json_u64(j, "bad_files", (uint64_t)s->bad_files);
	if (read) {
		lmt_json_u64(j, "nonfinite", s->nonfinite);
		lmt_json_u64(j, "bad_tensors", (uint64_t)s->bad_tensors);
	}
	lmt_json_bool(j, "committed", committed);
}

void lmt_ckpt_record_tdiff(struct lmt_json *j, const struct lmt_ckpt_entry *ea, const struct lmt_ckpt_entry *eb,
			   enum lmt_ckpt_tstatus st, const struct lmt_ckpt_tdiff *t, const char *err)
{
	begin(j, "tensor");
	lmt_json_str(j, "name", (ea ? ea : eb)->name);
	lmt_json_str(j, "status", lmt_ckpt_tstatus_name(st));
	if (ea)
		json_shape(j, "shape_a", ea);
	if (eb)
		json_shape(j, "shape_b", eb);
	if (st == LMT_CKPT_TSTATUS_SAME || st == LMT_CKPT_TSTATUS_DIFFER) {
		lmt_json_u64(j, "elements", ea->numel);
		lmt_json_u64(j, "differing", t->differing);
		lmt_json_num(j, "max_abs", t->max_abs);
		lmt_json_num(j, "rel", t->rel);
		lmt_json_u64(j, "nonfinite_mismatch", t->nonfinite_mismatch);
	}
	if (err[0])
		lmt_json_str(j, "error", err);
}

static void diff_side(struct lmt_json *j, const char *key, const char *path, const struct lmt_ckpt *c)
{
	lmt_json_obj(j, key);
	lmt_json_str(j, "path", path);
	lmt_json_u64(j, "update", c->update);
	lmt_json_u64(j, "world", (uint64_t)c->world);
	lmt_json_obj_end(j);
}

void lmt_ckpt_record_diff(struct lmt_json *j, const char *pa, const struct lmt_ckpt *a, const char *pb,
			  const struct lmt_ckpt *b, double atol)
{
	begin(j, "diff");
	diff_side(j, "a", pa, a);
	diff_side(j, "b", pb, b);
	lmt_json_num(j, "atol", atol);
}

void lmt_ckpt_record_state(struct lmt_json *j, const char *key, const char *a, const char *b)
{
	begin(j, "state");
	lmt_json_str(j, "key", key);
	if (a)
		lmt_json_raw(j, "a", a);
	if (b)
		lmt_json_raw(j, "b", b);
	if (!a || !b)
		lmt_json_str(j, "only", a ? "a" : "b");
}

void lmt_ckpt_record_diff_summary(struct lmt_json *j, const int count[LMT_CKPT_TSTATUS_COUNT], int errors,
				  int state_differ, int identical)
{
	static const char *const keys[LMT_CKPT_TSTATUS_ERROR] = { "same", "differ", "shape", "only_a", "only_b" };
	int tensors = 0;
	for (int i = 0; i < LMT_CKPT_TSTATUS_COUNT; i++)
		tensors += count[i];
	begin(j, "summary");
	lmt_json_bool(j, "identical", identical);
	lmt_json_u64(j, "tensors", (uint64_t)tensors);
	for (int i = 0; i < LMT_CKPT_TSTATUS_ERROR; i++)
		lmt_json_u64(j, keys[i], (uint64_t)count[i]);
	lmt_json_u64(j, "errors", (uint64_t)errors);
	lmt_json_u64(j, "state_differ", (uint64_t)state_differ);
}

void lmt_ckpt_record_verify_summary(struct lmt_json *j, const char *path, const struct lmt_ckpt *c,
				    const struct lmt_ckpt_verify_result *res, int ok, int committed, double seconds)
{
	begin(j, "verify-summary");
	lmt_json_str(j, "path", path);
	lmt_json_u64(j, "update", c->update);
	lmt_json_bool(j, "ok", ok);
	lmt_json_bool(j, "committed", committed);
	lmt_json_u64(j, "files", (uint64_t)c->nfiles);
	lmt_json_u64(j, "bad_files", (uint64_t)res->bad_files);
	lmt_json_u64(j, "tensors", (uint64_t)c->nt);
	lmt_json_u64(j, "bad_tensors", (uint64_t)res->bad_tensors);
	lmt_json_u64(j, "bytes", res->bytes);
	lmt_json_num(j, "seconds", seconds);
	lmt_json_num(j, "mb_per_s", seconds > 0 ? res->bytes / seconds / 1e6 : 0);
}

void lmt_ckpt_record_finding(struct lmt_json *j, const struct lmt_ckpt_finding *f)
{
	begin(j, "verify");
	lmt_json_str(j, "path", f->path);
	if (f->kind == LMT_CKPT_FINDING_CHUNK) {
		lmt_json_str(j, "tensor", f->tensor->name);
		lmt_json_u64(j, "offset", f->chunk->offset);
		lmt_json_u64(j, "count", f->chunk->count);
	}
	lmt_json_bool(j, "ok", f->ok);
	if (!f->ok)
		lmt_json_str(j, "error", f->msg);
}

void lmt_ckpt_record_explanation(struct lmt_json *j, const char *dir, const struct lmt_ckpt_explanation *x)
{
	begin(j, "incomplete");
	lmt_json_str(j, "path", dir);
	if (x->tmp || x->step)
		lmt_json_u64(j, "update", x->update);
	if (x->tmp)
		lmt_json_i64(j, "pid", x->pid);
	lmt_json_bool(j, "committed", !x->tmp);
	lmt_json_str(j, "manifest", x->manifest);
	lmt_json_str(j, "reason", x->reason);
	lmt_json_arr(j, "files");
	for (int i = 0; i < x->nents; i++) {
		lmt_json_obj(j, NULL);
		lmt_json_str(j, "path", x->ents[i].name);
		lmt_json_str(j, "kind", x->ents[i].kind);
		lmt_json_u64(j, "bytes", x->ents[i].bytes);
		lmt_json_str(j, "status", x->ents[i].status);
		lmt_json_obj_end(j);
	}
	lmt_json_arr_end(j);
}

/* ---- what an argument names ---- */

int lmt_ckpt_resolve(const char *arg, char *path, size_t cap, int *from_run, void (*skip)(void *ctx, const char *msg),
		     void *ctx, struct lmt_err *err)
{
	char p[PATH_MAX];
	struct stat st;
	int rc;
	*from_run = 0;
	if (stat(arg, &st))
		return lmt_err_set(err, LMT_EIO, "'%s': %s", arg, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_EINVAL, "'%s': not a directory (a checkpoint is a directory: RUN/ckpt/step-N)",
				   arg);
	if ((rc = lmt_path_fmt(p, sizeof p, err, "%s/manifest.json", arg)))
		return rc;
	if (lstat(p, &st) == 0) {
		snprintf(path, cap, "%s", arg);
		return 0;
	}
	if ((rc = lmt_path_fmt(p, sizeof p, err, "%s/ckpt", arg)))
		return rc;
	if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
		int seen;
		rc = lmt_ckpt_newest(arg, path, cap, &seen, skip, ctx, err);
		if (rc < 0)
			return rc;
		if (!rc)
			return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no checkpoint in '%s/ckpt'%s", arg, arg,
					   seen ? " opens (name a directory to have it explained)" : "");
		*from_run = 1;
		return 0;
	}
	snprintf(path, cap, "%s", arg);
	return 0;
}

int lmt_ckpt_target_open(struct lmt_ckpt_target *k, const char *path, struct lmt_err *err)
{
	char mp[PATH_MAX];
	struct stat st;
	memset(k, 0, sizeof *k);
	k->path = path;
	int rc = lmt_path_fmt(mp, sizeof mp, err, "%s/manifest.json", path);
	if (rc)
		return rc;
	if (lstat(mp, &st) != 0) {
		k->no_manifest = 1;
		return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no manifest.json: not a checkpoint", path);
	}
	if ((rc = lmt_ckpt_open(&k->c, path, 0, err)))
		return rc;
	if (!(k->f = lmt_ckpt_dfile_check_all(&k->c))) {
		lmt_ckpt_close(&k->c);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	k->uncommitted = lmt_ckpt_name_check(&k->c, path, k->name_problem, sizeof k->name_problem);
	return 0;
}

void lmt_ckpt_target_close(struct lmt_ckpt_target *k)
{
	free(k->f);
	k->f = NULL;
	lmt_ckpt_close(&k->c);
}

void lmt_ckpt_record_rehash(struct lmt_json *j, const char *dir, const struct lmt_ckpt_rehash_result *r,
			    const char *old_hex, const char *new_hex)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "rehash");
	lmt_json_str(j, "checkpoint", dir);
	lmt_json_u64(j, "old_schema", (uint64_t)r->old_schema);
	lmt_json_bool(j, "was_sealed", r->was_sealed);
	lmt_json_str(j, "old_sha256", old_hex);
	lmt_json_str(j, "new_sha256", new_hex);
}
