/*
 * ckpt.c: writing, reading and finding checkpoints (see ckpt.h).
 */
#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "ckpt/verify.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/binformat.h"
#include "core/json.h"
#include "core/jsonseal.h"
#include "core/util.h"

const struct lmt_format lmt_format_ckpt = {
	"\x89LMTCKP\n", 1, 0, "checkpoint data file", 32,
};

#define ALIGN 64

/* ---- writing ---- */

/*
 * Test hook: LMT_TEST_CKPT_KILL=PHASE[@UPDATE] kills the process (SIGKILL, as a
 * crash would) at that point of a save: "data" after the first data file is half
 * written, "manifest" after the manifest is written into the temporary directory
 * but before the rename, "rename" right after the rename, before the parent's
 * fsync. The kill-and-resume tests use it to stop a save where a signal from
 * outside could only land by chance. LMT_TEST_CKPT_DELAY=SECONDS holds every save
 * that long before its rename (to have one in flight).
 */
static void test_kill(const char *phase, uint64_t update)
{
	const char *v = getenv("LMT_TEST_CKPT_KILL");
	if (!v)
		return;
	size_t n = strlen(phase);
	if (strncmp(v, phase, n) || (v[n] && v[n] != '@'))
		return;
	if (v[n] == '@' && strtoull(v + n + 1, NULL, 10) != update)
		return;
	kill(getpid(), SIGKILL);
}

/* LMT_TEST_CKPT_KILL_RANK=R: the rank whose data file the "data" kill interrupts
 * (default 0), so that a test can kill one rank of several mid-save. */
static int test_kill_rank(void)
{
	const char *v = getenv("LMT_TEST_CKPT_KILL_RANK");
	return v ? atoi(v) : 0;
}

struct chunkrec {
	int t, rank;
	uint64_t offset, count, byte_offset;
	uint32_t crc;
};

/* One rank's payload digests: the SHA-256 of the whole payload (padding included)
 * and each chunk's CRC-32C, from the chunks' layout. */
struct hashjob {
	const struct lmt_ckpt_save *s;
	struct chunkrec *ch;     /* the rank's chunks, one per tensor */
	uint8_t sha[LMT_SHA256_LEN];
	int failed;
};

static void *hash_rank(void *arg)
{
	struct hashjob *h = arg;
	struct lmt_sha256 sha;
	static const uint8_t zero[ALIGN];
	if (lmt_sha256_init(&sha)) {
		h->failed = 1;
		return NULL;
	}
	uint64_t size = 0;
	for (int i = 0; i < h->s->ntensors; i++) {
		struct chunkrec *c = &h->ch[i];
		const float *d = h->s->tensors[i].data + c->offset;
		lmt_sha256_update(&sha, zero, (size_t)(c->byte_offset - size));
		/* CRC and SHA over the same 1 MiB at a time, while it is in cache */
		const uint8_t *b = (const uint8_t *)d;
		uint64_t n = c->count * 4;
		uint32_t crc = 0;
		for (uint64_t at = 0; at < n; at += 1 << 20) {
			size_t k = (size_t)LMT_MIN((uint64_t)1 << 20, n - at);
			crc = lmt_crc32c(crc, b + at, k);
			lmt_sha256_update(&sha, b + at, k);
		}
		c->crc = crc;
		size = c->byte_offset + n;
	}
	lmt_sha256_final(&sha, h->sha);
	return NULL;
}

/* A data file's entry in the manifest. */
struct filerec {
	uint64_t bytes;
	uint8_t sha[LMT_SHA256_LEN];
};

/* dir/manifest.json, atomically: files[r] and rank_ch[r][i] (tensor i's chunk on
 * rank r) for W ranks. *bytes gets its size. */
static int write_manifest(const char *dir, uint64_t update, int W, const char *state_json,
			  const struct lmt_ckpt_tensor *tensors, int ntensors, const struct filerec *files,
			  const struct chunkrec *const *rank_ch, uint64_t *bytes, struct lmt_err *err)
{
	struct lmt_json j;
	char hex[LMT_SHA256_HEX], p[PATH_MAX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "schema", "lmt-checkpoint");
	lmt_json_u64(&j, "schema_version", LMT_CKPT_SCHEMA);
	lmt_json_u64(&j, "update", update);
	lmt_json_u64(&j, "world", (uint64_t)W);
	lmt_json_raw(&j, "state", state_json ? state_json : "{}");
	lmt_json_arr(&j, "files");
	for (int r = 0; r < W; r++) {
		char nm[64];
		snprintf(nm, sizeof nm, "rank-%05d.lmckpt", r);
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "path", nm);
		lmt_json_u64(&j, "rank", (uint64_t)r);
		lmt_json_u64(&j, "bytes", files[r].bytes);
		lmt_json_str(&j, "payload_sha256", lmt_sha256_hex(files[r].sha, hex));
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_arr(&j, "tensors");
	for (int i = 0; i < ntensors; i++) {
		const struct lmt_ckpt_tensor *t = &tensors[i];
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "name", t->name);
		lmt_json_str(&j, "dtype", "f32");
		lmt_json_arr(&j, "shape");
		for (int d = 0; d < t->ndim; d++)
			lmt_json_u64(&j, NULL, (uint64_t)t->shape[d]);
		lmt_json_arr_end(&j);
		lmt_json_arr(&j, "chunks");
		for (int r = 0; r < W; r++) {
			const struct chunkrec *c = &rank_ch[r][i];
			char crc[16];
			snprintf(crc, sizeof crc, "%08x", c->crc);
			lmt_json_obj(&j, NULL);
			lmt_json_u64(&j, "rank", (uint64_t)r);
			lmt_json_u64(&j, "offset", c->offset);
			lmt_json_u64(&j, "count", c->count);
			lmt_json_u64(&j, "byte_offset", c->byte_offset);
			lmt_json_str(&j, "crc32c", crc);
			lmt_json_obj_end(&j);
		}
		lmt_json_arr_end(&j);
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_jsonseal_add(&j, LMT_CKPT_SEAL); /* last: a checksum of everything above */
	lmt_json_end(&j);
	if (j.out.oom || LMT_GROW(j.out.buf, j.out.cap, j.out.len + 2)) {
		lmt_json_release(&j);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	j.out.buf[j.out.len++] = '\n';
	int rc = lmt_path_fmt(p, sizeof p, err, "%s/manifest.json", dir);
	if (!rc)
		rc = lmt_write_file_atomic(p, j.out.buf, j.out.len, err);
	*bytes = j.out.len;
	lmt_json_release(&j);
	return rc;
}

/* Rank `rank`'s data file of a save of W ranks into dir: its chunk of every tensor,
 * hashed on a second thread while this one writes; ch (ntensors) gets the chunks'
 * layout and CRC-32C, f the file's size and payload SHA-256. */
static int write_rank_file(const struct lmt_ckpt_save *s, int W, int rank, const char *dir, struct chunkrec *ch,
			   struct filerec *f, struct lmt_err *err)
{
	char p[PATH_MAX];
	int rc = 0;
	struct lmt_binwriter w;
	/* the layout first; then a thread hashes (SHA-256 of the payload, CRC-32C of
	 * each chunk) while this one writes, both reading the same memory */
	uint64_t size = 0;
	for (int i = 0; i < s->ntensors; i++) {
		struct chunkrec *c = &ch[i];
		c->t = i;
		c->rank = rank;
		lmt_ckpt_split(s->tensors[i].numel, W, rank, &c->offset, &c->count);
		size += (ALIGN - size % ALIGN) % ALIGN;
		c->byte_offset = size;
		size += c->count * 4;
	}
	struct hashjob hj = { s, ch, { 0 }, 0 };
	pthread_t th;
	if ((rc = lmt_path_fmt(p, sizeof p, err, "%s/rank-%05d.lmckpt", dir, rank)) ||
	    (rc = lmt_binwriter_open(&w, p, &lmt_format_ckpt, err)))
		return rc;
	lmt_binwriter_external_sha(&w, NULL);
	int threaded = pthread_create(&th, NULL, hash_rank, &hj) == 0;
	for (int i = 0; i < s->ntensors && !rc; i++) {
		const struct chunkrec *c = &ch[i];
		static const uint8_t zero[ALIGN];
		rc = lmt_binwriter_write(&w, zero, (size_t)(c->byte_offset - w.payload_size), err);
		if (rank == test_kill_rank() && i == s->ntensors / 2)
			test_kill("data", s->update);
		if (!rc)
			rc = lmt_binwriter_write(&w, s->tensors[i].data + c->offset, c->count * 4, err);
	}
	if (threaded)
		pthread_join(th, NULL);
	else
		hash_rank(&hj);
	if (!rc && hj.failed)
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	uint8_t ext[32] = { 0 };
	lmt_store_u32(ext, (uint32_t)rank);
	lmt_store_u32(ext + 4, (uint32_t)W);
	lmt_store_u64(ext + 8, (uint64_t)s->ntensors);
	if (rc) {
		lmt_binwriter_abort(&w);
		return rc;
	}
	lmt_binwriter_external_sha(&w, hj.sha);
	f->bytes = LMT_HDR_SIZE + lmt_format_ckpt.ext_size + w.payload_size;
	if ((rc = lmt_binwriter_finish(&w, ext, NULL, err)))
		return rc;
	memcpy(f->sha, w.payload_sha256, 32);
	return 0;
}

/* The paths of a save (RUN/ckpt, its final name, the temporary directory named for
 * pid) and, with make, the temporary directory made afresh. */
static int save_paths(const struct lmt_ckpt_save *s, int pid, int make, char *ck, char *fin, char *tmp,
		      struct lmt_err *err)
{
	int rc;
	if ((rc = lmt_path_fmt(ck, PATH_MAX, err, "%s/ckpt", s->run_dir)) ||
	    (rc = lmt_path_fmt(fin, PATH_MAX, err, "%s/step-%08llu", ck, (unsigned long long)s->update)) ||
	    (rc = lmt_path_fmt(tmp, PATH_MAX, err, "%s/.tmp-step-%08llu-%d", ck, (unsigned long long)s->update, pid)))
		return rc;
	if (!make)
		return 0;
	if (mkdir(ck, 0755) && errno != EEXIST)
		return lmt_err_errno(err, "'%s'", ck);
	struct stat st;
	if (stat(fin, &st) == 0)
		return lmt_err_set(err, LMT_EINVAL, "'%s' exists already", fin);
	lmt_remove_dir(tmp);
	if (mkdir(tmp, 0755))
		return lmt_err_errno(err, "'%s'", tmp);
	return 0;
}

/* The end of a save whose data files are in tmp: the manifest, last, then fsync,
 * rename into place and fsync of the parent. */
static int commit_save(const struct lmt_ckpt_save *s, int W, const char *ck, const char *fin, const char *tmp,
		       const struct filerec *files, const struct chunkrec *ch, struct lmt_ckpt_result *r,
		       struct lmt_err *err)
{
	const struct chunkrec **rank_ch = malloc((size_t)W * sizeof *rank_ch);
	if (!rank_ch)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int rank = 0; rank < W; rank++)
		rank_ch[rank] = ch + (size_t)rank * s->ntensors;
	uint64_t mbytes = 0;
	int rc = write_manifest(tmp, s->update, W, s->state_json, s->tensors, s->ntensors, files, rank_ch, &mbytes, err);
	free(rank_ch);
	r->bytes += mbytes;
	if (rc || (rc = lmt_fsync_dir(tmp, err)))
		return rc;
	test_kill("manifest", s->update);
	const char *delay = getenv("LMT_TEST_CKPT_DELAY");
	if (delay)
		usleep((useconds_t)(atof(delay) * 1e6));
	if (rename(tmp, fin))
		return lmt_err_errno(err, "'%s': rename into place", fin);
	test_kill("rename", s->update);
	snprintf(r->path, sizeof r->path, "%s", fin);
	return lmt_fsync_dir(ck, err) ? 1 : 0; /* renamed: complete, whatever the parent's fsync says */
}

int lmt_ckpt_write(const struct lmt_ckpt_save *s, struct lmt_ckpt_result *r, struct lmt_err *err)
{
	double t0 = lmt_now();
	char ck[PATH_MAX], tmp[PATH_MAX], fin[PATH_MAX];
	int rc;
	memset(r, 0, sizeof *r);
	if ((rc = save_paths(s, (int)getpid(), 1, ck, fin, tmp, err)))
		return rc;
	int W = s->world > 0 ? s->world : 1;
	struct chunkrec *ch = calloc((size_t)W * s->ntensors, sizeof *ch);
	struct filerec *files = calloc((size_t)W, sizeof *files);
	if (!ch || !files)
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int rank = 0; rank < W && !rc; rank++)
		if (!(rc = write_rank_file(s, W, rank, tmp, ch + (size_t)rank * s->ntensors, &files[rank], err)))
			r->bytes += files[rank].bytes;
	if (!rc)
		rc = commit_save(s, W, ck, fin, tmp, files, ch, r, err);
	if (rc < 0)
		lmt_remove_dir(tmp);
	else if (rc > 0) /* renamed, the parent's fsync failed: the error stands */
		rc = LMT_EIO;
	else
		r->write_s = lmt_now() - t0;
	free(ch);
	free(files);
	return rc;
}

/* What each rank reports of its data file to rank 0. */
struct rank_report {
	int32_t rc;
	uint32_t pad;
	uint64_t bytes;
	uint8_t sha[LMT_SHA256_LEN];
	/* then ntensors CRC-32C */
};

int lmt_ckpt_write_ranks(const struct lmt_ckpt_save *s, struct lmt_comm *comm, struct lmt_ckpt_result *r,
			 struct lmt_err *err)
{
	double t0 = lmt_now();
	char ck[PATH_MAX], tmp[PATH_MAX], fin[PATH_MAX];
	int W = comm->world, me = comm->rank, n = s->ntensors, rc = 0;
	memset(r, 0, sizeof *r);
	/* rank 0 makes the temporary directory, named for its pid, and says so */
	int32_t start[2] = { 0, (int32_t)getpid() };
	if (me == 0)
		start[0] = save_paths(s, start[1], 1, ck, fin, tmp, err);
	if ((rc = comm->broadcast(comm, start, sizeof start, 0, err)))
		return rc;
	if (start[0])
		return me == 0 ? start[0] : lmt_err_set(err, start[0], "the save of update %llu failed on rank 0",
							(unsigned long long)s->update);
	if (me && (rc = save_paths(s, start[1], 0, ck, fin, tmp, err)))
		return rc;
	/* every rank writes its own file, in parallel */
	/* each rank's report padded to 8 bytes, so that every one in the gathered
	 * array starts aligned for struct rank_report (an odd count of CRCs would not) */
	size_t rec = (sizeof(struct rank_report) + (size_t)n * 4 + 7) & ~(size_t)7;
	struct chunkrec *ch = calloc((size_t)W * n, sizeof *ch);
	struct filerec *files = calloc((size_t)W, sizeof *files);
	uint8_t *all = calloc((size_t)W, rec), *mine = calloc(1, rec);
	if (!ch || !files || !all || !mine) {
		free(ch), free(files), free(all), free(mine);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	struct lmt_err e2 = { 0 };
	struct rank_report *rp = (struct rank_report *)mine;
	struct chunkrec *my = ch + (size_t)me * n;
	rp->rc = write_rank_file(s, W, me, tmp, my, &files[me], &e2);
	rp->bytes = files[me].bytes;
	memcpy(rp->sha, files[me].sha, LMT_SHA256_LEN);
	for (int i = 0; i < n; i++)
		lmt_store_u32(mine + sizeof *rp + (size_t)i * 4, my[i].crc);
	/* the reports to every rank (a barrier carrying the hashes) */
	if ((rc = comm->allgather(comm, mine, all, rec, err)))
		goto out;
	int bad = -1;
	for (int k = 0; k < W && bad < 0; k++)
		if (((struct rank_report *)(all + (size_t)k * rec))->rc)
			bad = k;
	if (bad >= 0) {
		rc = bad == me ? rp->rc : LMT_EIO;
		lmt_err_set(err, rc, "the save of update %llu failed on rank %d%s%s", (unsigned long long)s->update, bad,
			    bad == me ? ": " : "", bad == me ? e2.msg : "");
		if (me == 0)
			lmt_remove_dir(tmp);
		goto out;
	}
	/* rank 0: the manifest from every rank's report, then the rename */
	int32_t done = 0;
	if (me == 0) {
		for (int k = 0; k < W; k++) {
			const struct rank_report *q = (const struct rank_report *)(all + (size_t)k * rec);
			files[k].bytes = q->bytes;
			memcpy(files[k].sha, q->sha, LMT_SHA256_LEN);
			for (int i = 0; i < n; i++) {
				struct chunkrec *c = &ch[(size_t)k * n + i];
				uint64_t size = i ? ch[(size_t)k * n + i - 1].byte_offset + ch[(size_t)k * n + i - 1].count * 4 : 0;
				c->t = i;
				c->rank = k;
				lmt_ckpt_split(s->tensors[i].numel, W, k, &c->offset, &c->count);
				c->byte_offset = size + (ALIGN - size % ALIGN) % ALIGN;
				c->crc = lmt_load_u32(all + (size_t)k * rec + sizeof *q + (size_t)i * 4);
			}
			r->bytes += q->bytes;
		}
		done = commit_save(s, W, ck, fin, tmp, files, ch, r, err);
		if (done < 0)
			lmt_remove_dir(tmp);
	}
	if ((rc = comm->broadcast(comm, &done, sizeof done, 0, me ? err : &e2)))
		goto out;
	if (done < 0) {
		rc = me == 0 ? done : lmt_err_set(err, done, "the save of update %llu failed on rank 0",
						  (unsigned long long)s->update);
		goto out;
	}
	rc = done > 0 ? LMT_EIO : 0;
	if (me)
		snprintf(r->path, sizeof r->path, "%s", fin);
	r->write_s = lmt_now() - t0;
out:
	free(ch);
	free(files);
	free(all);
	free(mine);
	return rc;
}

int lmt_ckpt_remove(const char *run_dir, const char *name, struct lmt_err *err)
{
	char from[PATH_MAX], to[PATH_MAX];
	int rc;
	if ((rc = lmt_path_fmt(from, sizeof from, err, "%s/ckpt/%s", run_dir, name)) ||
	    (rc = lmt_path_fmt(to, sizeof to, err, "%s/ckpt/.del-%s-%d", run_dir, name, (int)getpid())))
		return rc;
	if (rename(from, to))
		return lmt_err_errno(err, "'%s': cannot remove", from);
	lmt_remove_dir(to);
	return 0;
}

/* ---- asynchronous saving ---- */

void lmt_ckpt_async_init(struct lmt_ckpt_async *a)
{
	memset(a, 0, sizeof *a);
	pthread_mutex_init(&a->mu, NULL);
}

static void *async_main(void *arg)
{
	struct lmt_ckpt_async *a = arg;
	struct lmt_err err = { 0 };
	struct lmt_ckpt_result r;
	int rc = lmt_ckpt_write(&a->save, &r, &err);
	pthread_mutex_lock(&a->mu);
	a->rc = rc;
	a->err = err;
	a->res = r;
	a->done = 1;
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

static void *prep_main(void *arg)
{
	struct lmt_ckpt_async *a = arg;
	float *b = malloc(a->prep_n * sizeof *b);
	if (b) {
		size_t step = lmt_page_bytes();
		for (size_t i = 0; i < a->prep_n * sizeof *b; i += step)
			((volatile char *)b)[i] = 0;
	}
	a->buf = b;
	a->cap = b ? a->prep_n : 0;
	return NULL;
}

void lmt_ckpt_async_reserve(struct lmt_ckpt_async *a, size_t numel)
{
	if (a->started || a->preparing || numel <= a->cap)
		return;
	free(a->buf);
	a->buf = NULL;
	a->cap = 0;
	a->prep_n = numel;
	if (pthread_create(&a->prep, NULL, prep_main, a) == 0)
		a->preparing = 1;
	else
		prep_main(a);
}

int lmt_ckpt_async_start(struct lmt_ckpt_async *a, const struct lmt_ckpt_save *s, struct lmt_err *err)
{
	if (a->preparing) {
		pthread_join(a->prep, NULL);
		a->preparing = 0;
	}
	if (a->started)
		return lmt_err_set(err, LMT_EINVAL,
			"a checkpoint save is still in flight (update %llu); not starting another",
			(unsigned long long)a->save.update);
	size_t total = 0;
	for (int i = 0; i < s->ntensors; i++)
		total += s->tensors[i].numel;
	if (total > a->cap) {
		free(a->buf);
		a->buf = malloc(total * sizeof *a->buf);
		a->cap = a->buf ? total : 0;
		if (!a->buf)
			return lmt_err_set(err, LMT_ENOMEM, "cannot hold a %.1f MB snapshot for the checkpoint", total * 4 / 1e6);
	}
	free(a->t);
	free(a->state_json);
	free(a->run_dir);
	a->t = malloc(((size_t)s->ntensors + 1) * sizeof *a->t);
	a->state_json = strdup(s->state_json ? s->state_json : "{}");
	a->run_dir = strdup(s->run_dir);
	if (!a->t || !a->state_json || !a->run_dir)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	/* the snapshot: after this copy training may change the originals */
	size_t at = 0;
	for (int i = 0; i < s->ntensors; i++) {
		a->t[i] = s->tensors[i];
		a->t[i].data = a->buf + at;
		at += s->tensors[i].numel;
	}
	/* in pieces of 4 MiB over the threads: memory bandwidth, not one core, bounds it */
	enum { PIECE = 1 << 20 };
	long npieces = 0;
	for (int i = 0; i < s->ntensors; i++)
		npieces += (long)((s->tensors[i].numel + PIECE - 1) / PIECE);
#pragma omp parallel for num_threads(a->threads > 0 ? a->threads : 1) schedule(dynamic, 4)
	for (long q = 0; q < npieces; q++) {
		long k = q;
		int i = 0;
		while (k >= (long)((s->tensors[i].numel + PIECE - 1) / PIECE))
			k -= (long)((s->tensors[i++].numel + PIECE - 1) / PIECE);
		size_t off = (size_t)k * PIECE, n = LMT_MIN((size_t)PIECE, s->tensors[i].numel - off);
		memcpy((float *)a->t[i].data + off, s->tensors[i].data + off, n * sizeof(float));
	}
	a->save = *s;
	a->save.tensors = a->t;
	a->save.state_json = a->state_json;
	a->save.run_dir = a->run_dir;
	a->done = 0;
	if (pthread_create(&a->th, NULL, async_main, a))
		return lmt_err_set(err, LMT_ENOMEM, "cannot start the checkpoint writer thread");
	a->started = 1;
	return 0;
}

static int async_collect(struct lmt_ckpt_async *a, struct lmt_ckpt_result *r, int *rc, struct lmt_err *err)
{
	pthread_join(a->th, NULL);
	a->started = 0;
	*r = a->res;
	*rc = a->rc;
	if (err && a->rc)
		*err = a->err;
	return 1;
}

int lmt_ckpt_async_poll(struct lmt_ckpt_async *a, struct lmt_ckpt_result *r, int *rc, struct lmt_err *err)
{
	if (!a->started)
		return 0;
	pthread_mutex_lock(&a->mu);
	int done = a->done;
	pthread_mutex_unlock(&a->mu);
	return done ? async_collect(a, r, rc, err) : 0;
}

int lmt_ckpt_async_wait(struct lmt_ckpt_async *a, struct lmt_ckpt_result *r, int *rc, struct lmt_err *err)
{
	if (!a->started)
		return 0;
	return async_collect(a, r, rc, err);
}

void lmt_ckpt_async_release(struct lmt_ckpt_async *a)
{
	if (a->preparing)
		pthread_join(a->prep, NULL);
	if (a->started)
		pthread_join(a->th, NULL);
	free(a->buf);
	free(a->t);
	free(a->state_json);
	free(a->run_dir);
	pthread_mutex_destroy(&a->mu);
	memset(a, 0, sizeof *a);
}

/* ---- reading ---- */

static int get_u64(json_t *o, const char *k, uint64_t *v)
{
	json_t *x = json_object_get(o, k);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return -1;
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

void lmt_ckpt_close(struct lmt_ckpt *c)
{
	for (int i = 0; i < c->nfiles; i++)
		free(c->files[i].name);
	for (int i = 0; i < c->nt; i++) {
		free(c->t[i].name);
		free(c->t[i].chunks);
	}
	free(c->files);
	free(c->t);
	free(c->file_of_rank);
	free(c->rank_first);
	free(c->rank_chunk);
	free(c->dir);
	json_decref(c->manifest);
	memset(c, 0, sizeof *c);
}

/* chunks by offset, an empty one before the one it shares an offset with (then by
 * rank): a total order, so the result does not hang on qsort's stability */
static int cmp_chunk(const void *x, const void *y)
{
	const struct lmt_ckpt_chunk *a = x, *b = y;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	if (a->count != b->count)
		return a->count < b->count ? -1 : 1;
	return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Map file k of the checkpoint, checking it against the manifest. */
static int open_file(const struct lmt_ckpt *c, int k, struct lmt_binreader *f, char *path, size_t cap,
		     struct lmt_err *err)
{
	int rc = lmt_path_fmt(path, cap, err, "%s/%s", c->dir, c->files[k].name);
	if (rc)
		return rc;
	if ((rc = lmt_binreader_open(f, path, &lmt_format_ckpt, 0, err)))
		return rc;
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	if (f->size != c->files[k].bytes)
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': %zu bytes, the manifest says %llu", path, f->size,
				 (unsigned long long)c->files[k].bytes);
	else if (!LMT_FUZZING && memcmp(f->hdr.payload_sha256, c->files[k].sha256, 32)) /* LMT_FUZZING: skipped in the fuzz build */
		rc = lmt_err_set(err, LMT_ECHECKSUM, "'%s': payload sha256 %s, the manifest says %s", path,
				 lmt_sha256_hex(f->hdr.payload_sha256, a), lmt_sha256_hex(c->files[k].sha256, b));
	else if (lmt_load_u32(f->ext) != (uint32_t)c->files[k].rank || lmt_load_u32(f->ext + 4) != (uint32_t)c->world)
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': rank %u of %u, the manifest says %d of %d", path,
				 lmt_load_u32(f->ext), lmt_load_u32(f->ext + 4), c->files[k].rank, c->world);
	if (rc)
		lmt_binreader_close(f);
	return rc;
}

/* c->rank_first and c->rank_chunk from the parsed tensors (a counting sort by rank);
 * 0 or LMT_ENOMEM */
static int index_chunks(struct lmt_ckpt *c)
{
	size_t n = 0;
	for (int t = 0; t < c->nt; t++)
		n += (size_t)c->t[t].nchunks;
	c->rank_first = calloc((size_t)c->world + 2, sizeof *c->rank_first);
	c->rank_chunk = malloc((n ? n : 1) * sizeof *c->rank_chunk);
	if (!c->rank_first || !c->rank_chunk)
		return LMT_ENOMEM;
	for (int t = 0; t < c->nt; t++)
		for (int q = 0; q < c->t[t].nchunks; q++)
			c->rank_first[c->t[t].chunks[q].rank + 2]++;
	for (int r = 0; r < c->world; r++)
		c->rank_first[r + 2] += c->rank_first[r + 1];
	/* rank_first[r + 1] is where rank r's next chunk goes; after the fill, its end */
	for (int t = 0; t < c->nt; t++)
		for (int q = 0; q < c->t[t].nchunks; q++)
			c->rank_chunk[c->rank_first[c->t[t].chunks[q].rank + 1]++] = (struct lmt_ckpt_cref){ t, q };
	return 0;
}

/* The walk's first fault is lmt_ckpt_open's error: one definition of valid. */
static int first_fault(void *ctx, const struct lmt_ckpt_finding *f)
{
	if (f->ok || f->kind == LMT_CKPT_FINDING_EXTRA)
		return 0;
	lmt_err_set(ctx, f->code < 0 ? f->code : LMT_EFORMAT, "%s", f->msg);
	return 1;
}

int lmt_ckpt_open(struct lmt_ckpt *c, const char *dir, int verify, struct lmt_err *err)
{
	memset(c, 0, sizeof *c);
	char path[PATH_MAX];
	int rc = lmt_path_fmt(path, sizeof path, err, "%s/manifest.json", dir);
	if (rc)
		return rc;
	struct stat st;
	if (stat(dir, &st) != 0)
		return lmt_err_errno(err, "'%s': cannot open the checkpoint directory", dir);
	if (!S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_EFORMAT,
				   "'%s' is a file, not a checkpoint directory (one such as RUN/ckpt/step-00000100)", dir);
	if (stat(path, &st) != 0)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': no manifest.json: not a complete checkpoint", dir);
	/* the bytes first: the manifest's own checksum is checked before any field of it
	 * is believed (an older schema is named as such rather than called edited) */
	char *text;
	size_t tn;
	if ((rc = lmt_read_file(path, &text, &tn, err)))
		return rc;
	json_error_t je;
	json_t *m = json_loadb(text, tn, 0, &je);
	if (!m) {
		free(text);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: invalid JSON: %s", path, je.line, je.text);
	}
	c->manifest = m;
	c->dir = strdup(dir);
	uint64_t upd = 0, world = 0;
	json_t *files = json_object_get(m, "files"),
	       *tensors = json_object_get(m, "tensors");
	/* what it is and which version, then whether it is intact: no other field is
	 * read before the manifest's own checksum holds */
	static const struct lmt_jsonseal_kind kind = {
		"lmt-checkpoint", "checkpoint", "checkpoint schema version", LMT_CKPT_SCHEMA, LMT_CKPT_SEAL,
		" (an older manifest carries no checksum of itself: 'ckpt-inspect --rehash' seals one you trust)",
	};
	if ((rc = lmt_jsonseal_check_manifest(text, tn, m, &kind, path, err)))
		goto fail;
	free(text);
	text = NULL;
	if (get_u64(m, "update", &upd) || get_u64(m, "world", &world) || world == 0 || world > 1u << 20 ||
	    !json_is_object(json_object_get(m, "state")) || !json_is_array(files) || !json_is_array(tensors) ||
	    json_array_size(files) != world) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': missing or inconsistent update, world, state, files or tensors",
				 path);
		goto fail;
	}
	c->update = upd;
	c->world = (int)world;
	c->nfiles = (int)json_array_size(files);
	c->files = calloc((size_t)c->nfiles, sizeof *c->files);
	c->nt = (int)json_array_size(tensors);
	c->t = calloc((size_t)c->nt + 1, sizeof *c->t);
	c->file_of_rank = malloc((size_t)world * sizeof *c->file_of_rank);
	if (!c->files || !c->t || !c->file_of_rank) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto fail;
	}
	for (int k = 0; k < c->nfiles; k++)
		c->files[k].rank = -1;
	for (uint64_t r = 0; r < world; r++)
		c->file_of_rank[r] = -1;
	for (int k = 0; k < c->nfiles; k++) {
		json_t *x = json_array_get(files, (size_t)k), *nm = json_object_get(x, "path"),
		       *sh = json_object_get(x, "payload_sha256");
		uint64_t rank, bytes;
		if (!json_is_string(nm) || strchr(json_string_value(nm), '/') || get_u64(x, "rank", &rank) ||
		    rank >= world || get_u64(x, "bytes", &bytes) || !json_is_string(sh) ||
		    lmt_sha256_parse(json_string_value(sh), c->files[k].sha256) || c->file_of_rank[rank] >= 0) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': files[%d] is incomplete or inconsistent", path, k);
			goto fail;
		}
		c->files[k].name = strdup(json_string_value(nm));
		c->files[k].rank = (int)rank;
		c->files[k].bytes = bytes;
		c->file_of_rank[rank] = k;
	}
	for (int i = 0; i < c->nt; i++) {
		struct lmt_ckpt_entry *e = &c->t[i];
		json_t *x = json_array_get(tensors, (size_t)i), *nm = json_object_get(x, "name"),
		       *shape = json_object_get(x, "shape"), *chunks = json_object_get(x, "chunks"),
		       *dt = json_object_get(x, "dtype");
		if (!json_is_string(nm) || !json_is_array(shape) || json_array_size(shape) < 1 ||
		    json_array_size(shape) > 3 || !json_is_array(chunks) || !json_is_string(dt) ||
		    strcmp(json_string_value(dt), "f32")) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensors[%d] is incomplete", path, i);
			goto fail;
		}
		e->name = strdup(json_string_value(nm));
		e->ndim = (int)json_array_size(shape);
		e->numel = 1;
		for (int k = 0; k < e->ndim; k++) {
			json_t *v = json_array_get(shape, (size_t)k);
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s' has a bad shape", path, e->name);
				goto fail;
			}
			e->shape[k] = (int)json_integer_value(v);
			if (__builtin_mul_overflow(e->numel, (uint64_t)e->shape[k], &e->numel) || e->numel > (1ull << 40)) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s' has more than 2^40 elements", path,
						 e->name);
				goto fail;
			}
		}
		e->nchunks = (int)json_array_size(chunks);
		e->chunks = calloc((size_t)e->nchunks + 1, sizeof *e->chunks);
		if (!e->chunks) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			goto fail;
		}
		for (int k = 0; k < e->nchunks; k++) {
			json_t *y = json_array_get(chunks, (size_t)k), *crc = json_object_get(y, "crc32c");
			struct lmt_ckpt_chunk *q = &e->chunks[k];
			uint64_t rank;
			char *end;
			if (get_u64(y, "rank", &rank) || rank >= world || get_u64(y, "offset", &q->offset) ||
			    get_u64(y, "count", &q->count) || get_u64(y, "byte_offset", &q->byte_offset) ||
			    !json_is_string(crc) || strlen(json_string_value(crc)) != 8) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s': chunk %d is incomplete", path, e->name, k);
				goto fail;
			}
			q->rank = (int)rank;
			q->crc32c = (uint32_t)strtoul(json_string_value(crc), &end, 16);
			int k2 = c->file_of_rank[q->rank];
			if (*end || k2 < 0 || q->byte_offset % 4 || q->count > (1ull << 40) ||
			    q->byte_offset > c->files[k2].bytes || q->byte_offset + q->count * 4 > c->files[k2].bytes) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s': chunk %d lies outside its file", path,
						 e->name, k);
				goto fail;
			}
		}
		/* the chunks must tile the tensor exactly: each starts where the one
		 * before it ends, empty ones included (a chunk past the end, or one
		 * overlapping another, is damage; read_range's search relies on this) */
		qsort(e->chunks, (size_t)e->nchunks, sizeof *e->chunks, cmp_chunk);
		uint64_t next = 0;
		int k = 0;
		for (; k < e->nchunks && e->chunks[k].offset == next; k++)
			next += e->chunks[k].count;
		if (k < e->nchunks || next != e->numel) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s': its chunks do not cover its %llu elements exactly",
					 path, e->name, (unsigned long long)e->numel);
			goto fail;
		}
	}
	if (index_chunks(c)) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto fail;
	}
	if (verify) {
		struct lmt_err first = { 0 };
		struct lmt_ckpt_verify_ops ops = { first_fault, NULL, &first };
		if ((rc = lmt_ckpt_verify(c, &ops, NULL, err)) > 0) {
			rc = first.code;
			if (err)
				*err = first;
		}
		if (rc)
			goto fail;
	}
	return 0;
fail:
	free(text);
	lmt_ckpt_close(c);
	return rc;
}

const struct lmt_ckpt_entry *lmt_ckpt_find(const struct lmt_ckpt *c, const char *name)
{
	for (int i = 0; i < c->nt; i++)
		if (!strcmp(c->t[i].name, name))
			return &c->t[i];
	return NULL;
}

int lmt_ckpt_read(const struct lmt_ckpt *c, const struct lmt_ckpt_entry *e, float *dst, struct lmt_err *err)
{
	return lmt_ckpt_read_range(c, e, 0, e->numel, dst, err);
}

void *lmt_ckpt_state(const struct lmt_ckpt *c, const char *key)
{
	return json_object_get(json_object_get(c->manifest, "state"), key);
}

/* ---- finding ---- */

static int parse_step(const char *name, uint64_t *u)
{
	if (strncmp(name, "step-", 5))
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(name + 5, &end, 10);
	if (errno || *end || end == name + 5)
		return -1;
	*u = v;
	return 0;
}

int lmt_ckpt_list(const char *run_dir, char ***names, uint64_t **updates, int *n, struct lmt_err *err)
{
	char ck[PATH_MAX];
	int rc = lmt_path_fmt(ck, sizeof ck, err, "%s/ckpt", run_dir);
	*names = NULL;
	*updates = NULL;
	*n = 0;
	if (rc)
		return rc;
	DIR *d = opendir(ck);
	if (!d)
		return errno == ENOENT ? 0 : lmt_err_errno(err, "'%s'", ck);
	size_t cap = 0, capu = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		uint64_t u;
		if (parse_step(e->d_name, &u))
			continue;
		if (LMT_GROW(*names, cap, (size_t)*n + 1) || lmt_grow((void **)updates, &capu, (size_t)*n + 1, sizeof **updates)) {
			closedir(d);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
		(*names)[*n] = strdup(e->d_name);
		(*updates)[*n] = u;
		(*n)++;
	}
	closedir(d);
	/* sort by update */
	for (int i = 1; i < *n; i++)
		for (int k = i; k > 0 && (*updates)[k] < (*updates)[k - 1]; k--) {
			uint64_t tu = (*updates)[k];
			(*updates)[k] = (*updates)[k - 1];
			(*updates)[k - 1] = tu;
			char *tn = (*names)[k];
			(*names)[k] = (*names)[k - 1];
			(*names)[k - 1] = tn;
		}
	return 0;
}

int lmt_ckpt_latest(const char *run_dir, int verify, char *out, size_t cap,
		    void (*report)(void *ctx, const char *path, const char *why), void *ctx, struct lmt_err *err)
{
	char ck[PATH_MAX];
	int rc = lmt_path_fmt(ck, sizeof ck, err, "%s/ckpt", run_dir);
	if (rc)
		return rc;
	/* interrupted saves and removals: never checkpoints, and safe to remove */
	DIR *d = opendir(ck);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			int save = !strncmp(e->d_name, ".tmp-step-", 10);
			if (!save && strncmp(e->d_name, ".del-step-", 10))
				continue;
			char p[PATH_MAX];
			if (lmt_path_fmt(p, sizeof p, err, "%s/%s", ck, e->d_name))
				continue;
			/* the writer's process id ends the name: if it still runs (another
			 * process on this run, by mistake), its save is not ours to remove */
			const char *dash = strrchr(e->d_name, '-');
			long pid = dash ? strtol(dash + 1, NULL, 10) : 0;
			if (pid > 0 && pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
				if (report)
					report(ctx, p, "a save or removal by a process that is still running; left alone");
				continue;
			}
			if (report)
				report(ctx, p, save ? "an interrupted save (never renamed into place); removed" :
						      "an interrupted removal of an old checkpoint; removed");
			lmt_remove_dir(p);
		}
		closedir(d);
	}
	char **names;
	uint64_t *ups;
	int n;
	if ((rc = lmt_ckpt_list(run_dir, &names, &ups, &n, err)))
		return rc;
	int found = 0;
	for (int i = n - 1; i >= 0; i--) {
		char p[PATH_MAX];
		struct lmt_ckpt c;
		struct lmt_err e2 = { 0 };
		if (found || lmt_path_fmt(p, sizeof p, &e2, "%s/%s", ck, names[i]))
			continue;
		if (lmt_ckpt_open_listed(&c, p, ups[i], verify, &e2) == 0) {
			snprintf(out, cap, "%s", p);
			found = 1;
			lmt_ckpt_close(&c);
		} else if (report) {
			report(ctx, p, e2.msg);
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ups);
	return found;
}

int lmt_ckpt_open_listed(struct lmt_ckpt *c, const char *dir, uint64_t update, int verify, struct lmt_err *err)
{
	int rc = lmt_ckpt_open(c, dir, verify, err);
	if (rc || c->update == update)
		return rc;
	rc = lmt_err_set(err, LMT_EFORMAT, "'%s': its manifest says update %llu, its name %llu", dir,
			 (unsigned long long)c->update, (unsigned long long)update);
	lmt_ckpt_close(c);
	return rc;
}

/* ---- reading part of a tensor ---- */

int lmt_ckpt_read_range(const struct lmt_ckpt *c, const struct lmt_ckpt_entry *e, uint64_t off, uint64_t count,
			float *dst, struct lmt_err *err)
{
	if (off > e->numel || count > e->numel - off)
		return lmt_err_set(err, LMT_EINVAL, "'%s': tensor '%s': elements [%llu, +%llu) lie outside its %llu",
				   c->dir, e->name, (unsigned long long)off, (unsigned long long)count,
				   (unsigned long long)e->numel);
	uint64_t end = off + count;
	int rc = 0;
	/* the chunks tile the tensor in offset order: the first that ends past off,
	 * then on while they start before end, each file mapped once for a run of its
	 * chunks (not every file for every chunk: world x chunks at thousands of ranks) */
	int lo = 0, hi = e->nchunks;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (e->chunks[mid].offset + e->chunks[mid].count <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	struct lmt_binreader f;
	char fp[PATH_MAX];
	int open_rank = -1;
	for (int q = lo; q < e->nchunks && !rc && count && e->chunks[q].offset < end; q++) {
		const struct lmt_ckpt_chunk *ch = &e->chunks[q];
		if (!ch->count || ch->offset + ch->count <= off) /* none, after lmt_ckpt_open's tiling check */
			continue;
		if (ch->rank != open_rank) {
			if (open_rank >= 0)
				lmt_binreader_close(&f);
			open_rank = -1;
			if ((rc = open_file(c, c->file_of_rank[ch->rank], &f, fp, sizeof fp, err)))
				break;
			open_rank = ch->rank;
		}
		if (ch->byte_offset + ch->count * 4 > f.payload_size) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s' runs past the payload", fp, e->name);
			break;
		}
		const uint8_t *src = f.payload + ch->byte_offset;
		if (!LMT_FUZZING && lmt_crc32c(0, src, ch->count * 4) != ch->crc32c) { /* LMT_FUZZING: skipped in the fuzz build */
			rc = lmt_err_set(err, LMT_ECHECKSUM, "'%s': tensor '%s': CRC-32C mismatch (data corrupted)", fp,
					 e->name);
			break;
		}
		uint64_t a = LMT_MAX(off, ch->offset), b = LMT_MIN(end, ch->offset + ch->count);
		memcpy(dst + (a - off), src + (a - ch->offset) * 4, (b - a) * 4);
	}
	if (open_rank >= 0)
		lmt_binreader_close(&f);
	return rc;
}

/* ---- writing chunk by chunk ---- */

struct lmt_ckpt_wrank {
	struct lmt_binwriter bw;
	int open, next;                 /* file open; the next tensor it takes */
	uint64_t bytes;
	uint8_t sha[LMT_SHA256_LEN];
	struct chunkrec *ch;            /* ntensors records */
};

void lmt_ckpt_writer_release(struct lmt_ckpt_writer *w)
{
	for (int r = 0; w->ranks && r < w->world; r++) {
		if (w->ranks[r].open)
			lmt_binwriter_abort(&w->ranks[r].bw);
		free(w->ranks[r].ch);
	}
	free(w->ranks);
	free(w->t);
	free(w->dir);
	memset(w, 0, sizeof *w);
}

int lmt_ckpt_writer_open(struct lmt_ckpt_writer *w, const char *dir, int world, const struct lmt_ckpt_tensor *t,
			 int ntensors, struct lmt_err *err)
{
	memset(w, 0, sizeof *w);
	if (world < 1 || ntensors < 0)
		return lmt_err_set(err, LMT_EINVAL, "bad world size %d or tensor count %d", world, ntensors);
	w->world = world;
	w->ntensors = ntensors;
	w->dir = strdup(dir);
	w->t = calloc((size_t)ntensors + 1, sizeof *w->t);
	w->ranks = calloc((size_t)world, sizeof *w->ranks);
	int ok = w->dir && w->t && w->ranks;
	for (int r = 0; ok && r < world; r++)
		ok = (w->ranks[r].ch = calloc((size_t)ntensors + 1, sizeof *w->ranks[r].ch)) != NULL;
	if (!ok) {
		lmt_ckpt_writer_release(w);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (int i = 0; i < ntensors; i++) {
		w->t[i] = t[i];
		w->t[i].data = NULL;
	}
	return 0;
}

/* The rank's file holds its chunks; ext: rank, world, chunk count. */
static int wrank_close(struct lmt_ckpt_writer *w, int rank, struct lmt_err *err)
{
	struct lmt_ckpt_wrank *k = &w->ranks[rank];
	uint8_t ext[32] = { 0 };
	lmt_store_u32(ext, (uint32_t)rank);
	lmt_store_u32(ext + 4, (uint32_t)w->world);
	lmt_store_u64(ext + 8, (uint64_t)w->ntensors);
	k->bytes = LMT_HDR_SIZE + lmt_format_ckpt.ext_size + k->bw.payload_size;
	k->open = 0;
	int rc = lmt_binwriter_finish(&k->bw, ext, NULL, err);
	if (!rc)
		memcpy(k->sha, k->bw.payload_sha256, LMT_SHA256_LEN);
	return rc;
}

static int wrank_open(struct lmt_ckpt_writer *w, int rank, struct lmt_err *err)
{
	char p[PATH_MAX];
	int rc = lmt_path_fmt(p, sizeof p, err, "%s/rank-%05d.lmckpt", w->dir, rank);
	if (!rc && !(rc = lmt_binwriter_open(&w->ranks[rank].bw, p, &lmt_format_ckpt, err)))
		w->ranks[rank].open = 1;
	return rc;
}

int lmt_ckpt_writer_chunk(struct lmt_ckpt_writer *w, int rank, int i, const float *data, struct lmt_err *err)
{
	if (rank < 0 || rank >= w->world || i < 0 || i >= w->ntensors || w->ranks[rank].next != i)
		return lmt_err_set(err, LMT_EINVAL, "checkpoint writer: chunk of tensor %d for rank %d out of order", i, rank);
	struct lmt_ckpt_wrank *k = &w->ranks[rank];
	int rc;
	if (!k->open && (rc = wrank_open(w, rank, err)))
		return rc;
	static const uint8_t zero[ALIGN];
	struct chunkrec *c = &k->ch[i];
	c->t = i;
	c->rank = rank;
	lmt_ckpt_split(w->t[i].numel, w->world, rank, &c->offset, &c->count);
	size_t pad = (size_t)((ALIGN - k->bw.payload_size % ALIGN) % ALIGN);
	if ((rc = lmt_binwriter_write(&k->bw, zero, pad, err)))
		return rc;
	c->byte_offset = k->bw.payload_size;
	c->crc = lmt_crc32c(0, data, c->count * 4);
	if ((rc = lmt_binwriter_write(&k->bw, data, c->count * 4, err)))
		return rc;
	if (++k->next == w->ntensors)
		return wrank_close(w, rank, err);
	return 0;
}

int lmt_ckpt_writer_finish(struct lmt_ckpt_writer *w, uint64_t update, const char *state_json,
			   struct lmt_err *err)
{
	int rc, W = w->world;
	for (int r = 0; r < W; r++) {
		struct lmt_ckpt_wrank *k = &w->ranks[r];
		if (w->ntensors == 0 && !k->open && (rc = wrank_open(w, r, err)))
			return rc;
		if (w->ntensors == 0 && (rc = wrank_close(w, r, err)))
			return rc;
		if (k->next != w->ntensors)
			return lmt_err_set(err, LMT_EINVAL, "checkpoint writer: rank %d has %d of %d tensors", r, k->next,
					   w->ntensors);
	}
	/* the manifest, last: written as lmt_ckpt_write writes it */
	if (W < 1)
		return lmt_err_set(err, LMT_EINVAL, "checkpoint writer: world size %d", W);
	struct filerec *files = calloc((size_t)W, sizeof *files);
	const struct chunkrec **rank_ch = calloc((size_t)W, sizeof *rank_ch);
	if (!files || !rank_ch) {
		free(files);
		free(rank_ch);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (int r = 0; r < W; r++) {
		files[r].bytes = w->ranks[r].bytes;
		memcpy(files[r].sha, w->ranks[r].sha, LMT_SHA256_LEN);
		rank_ch[r] = w->ranks[r].ch;
	}
	rc = write_manifest(w->dir, update, W, state_json, w->t, w->ntensors, files, rank_ch, &w->bytes, err);
	for (int r = 0; r < W; r++)
		w->bytes += w->ranks[r].bytes;
	free(files);
	free(rank_ch);
	if (!rc)
		rc = lmt_fsync_dir(w->dir, err);
	return rc;
}

int lmt_ckpt_rehash(const char *dir, struct lmt_ckpt_rehash_result *r, struct lmt_err *err)
{
	char path[PATH_MAX];
	char *text = NULL, *sealed = NULL, *upgraded = NULL;
	size_t n, sn;
	memset(r, 0, sizeof *r);
	int rc = lmt_path_fmt(path, sizeof path, err, "%s/manifest.json", dir);
	if (rc || (rc = lmt_read_file(path, &text, &n, err)))
		return rc;
	json_error_t je;
	json_t *m = json_loadb(text, n, 0, &je);
	uint64_t ver = 0;
	json_t *schema = m ? json_object_get(m, "schema") : NULL;
	if (!m) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: invalid JSON: %s (nothing to re-seal)", path, je.line,
				 je.text);
		goto out;
	}
	if (!json_is_string(schema) || strcmp(json_string_value(schema), "lmt-checkpoint") ||
	    get_u64(m, "schema_version", &ver) || ver > LMT_CKPT_SCHEMA) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': not an lmt checkpoint manifest of schema %d or older", path,
				 LMT_CKPT_SCHEMA);
		goto out;
	}
	r->old_schema = (int)ver;
	r->was_sealed = lmt_jsonseal_check(text, n, LMT_CKPT_SEAL, path, NULL) == 0;
	const char *src = text;
	size_t srcn = n;
	if (ver < LMT_CKPT_SCHEMA) {
		/* an older manifest: the same fields under the current version, then sealed */
		json_object_set_new(m, "schema_version", json_integer(LMT_CKPT_SCHEMA));
		json_object_del(m, LMT_CKPT_SEAL);
		if (!(upgraded = lmt_json_jansson_text(m))) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			goto out;
		}
		src = upgraded;
		srcn = strlen(upgraded);
	}
	if ((rc = lmt_jsonseal_reseal(src, srcn, LMT_CKPT_SEAL, &sealed, &sn, err))) {
		lmt_err_prefix(err, "'%s'", path);
		goto out;
	}
	lmt_sha256(text, n, r->old_sha256);
	lmt_sha256(sealed, sn, r->new_sha256);
	rc = lmt_write_file_atomic(path, sealed, sn, err);
out:
	json_decref(m);
	free(text);
	free(sealed);
	free(upgraded);
	return rc;
}

