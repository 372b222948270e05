/*
 * reshard.c: a checkpoint for another world size (reshard.h). The state is
 * edited as jansson values and written back in their key order through
 * lmt_json_jansson, so everything not rewritten keeps its bytes.
 */
#include "ckpt/reshard.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomicfile.h"
#include "core/json.h"
#include "core/util.h"
#include "data/loader.h"

/* ---- the training state for the new world ---- */

static int get_count(json_t *o, const char *key, uint64_t *v)
{
	json_t *x = json_object_get(o, key);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return -1;
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

struct notes {
	void (*note)(void *ctx, const char *msg);
	void *ctx;
};

/* Keys named "world" other than the two rewritten: said, not changed. */
static void other_worlds(json_t *v, char *path, size_t len, size_t cap, const struct notes *n)
{
	const char *k;
	json_t *x;
	if (!json_is_object(v))
		return;
	json_object_foreach(v, k, x) {
		if (!strcmp(path, "state") && !strcmp(k, "config"))
			continue;
		int m = snprintf(path + len, cap - len, ".%s", k);
		if (m < 0 || (size_t)m >= cap - len)
			continue;
		if (!strcmp(k, "world") && strcmp(path, "state.loader.world") && strcmp(path, "state.sharding.world") &&
		    n->note) {
			char msg[1200];
			snprintf(msg, sizeof msg, "%s is left as it was: ckpt-reshard does not know it to be the world size",
				 path);
			n->note(n->ctx, msg);
		}
		other_worlds(x, path, len + (size_t)m, cap, n);
		path[len] = 0;
	}
}

/* The loader's cursors for N ranks, into ld. */
static int new_cursors(json_t *ld, const char *where, int N, uint64_t *consumed, struct lmt_err *err)
{
	json_t *cs = json_object_get(ld, "cursors");
	uint64_t w_old;
	if (!json_is_object(ld) || get_count(ld, "world", &w_old) || w_old == 0 || w_old > UINT32_MAX ||
	    !json_is_array(cs) || json_array_size(cs) == 0)
		return lmt_err_set(err, LMT_EFORMAT, "%s: state.loader has no world or no cursors: the data position "
				   "cannot be mapped to %d ranks", where, N);
	/* lockstep: one K for every rank listed */
	size_t i;
	json_t *e;
	uint64_t K = 0, r0 = 0, c0 = 0;
	int first = 1;
	json_array_foreach(cs, i, e) {
		uint64_t r, cur;
		if (get_count(e, "rank", &r) || get_count(e, "cursor", &cur) || r >= w_old)
			return lmt_err_set(err, LMT_EFORMAT, "%s: state.loader.cursors[%zu] has no rank below the world "
					   "of %llu or no cursor", where, i, (unsigned long long)w_old);
		if (cur < r)
			return lmt_err_set(err, LMT_EFORMAT, "%s: state.loader.cursors[%zu]: rank %llu at cursor %llu is "
					   "not a cursor of that rank", where, i, (unsigned long long)r,
					   (unsigned long long)cur);
		if (first) {
			K = cur - r, r0 = r, c0 = cur, first = 0;
		} else if (cur - r != K) {
			return lmt_err_set(err, LMT_EFORMAT, "%s: the loader cursors are not in lockstep: rank %llu is at "
					   "%llu, rank %llu at %llu (%llu and %llu samples consumed); resharding needs "
					   "every rank at the same step", where, (unsigned long long)r0,
					   (unsigned long long)c0, (unsigned long long)r, (unsigned long long)cur,
					   (unsigned long long)K, (unsigned long long)(cur - r));
		}
	}
	json_t *ncs = json_array();
	for (int r = 0; r < N; r++) {
		uint64_t nc;
		int rc = lmt_loader_rebase(c0, (uint32_t)r0, (uint32_t)w_old, (uint32_t)r, (uint32_t)N, &nc, err);
		if (rc) {
			json_decref(ncs);
			lmt_err_prefix(err, "%s", where);
			return rc;
		}
		json_t *o = json_object();
		json_object_set_new(o, "rank", json_integer(r));
		json_object_set_new(o, "cursor", json_integer((json_int_t)nc));
		json_array_append_new(ncs, o);
	}
	json_object_set_new(ld, "world", json_integer(N));
	json_object_set_new(ld, "cursors", ncs);
	*consumed = K;
	return 0;
}

/* One RNG entry per rank; the new ranks' entries are copies, which is right only
 * if the old ranks' entries are all the same but for the rank. */
static int new_rng(json_t *st, const char *where, int N, int old_world, struct lmt_err *err)
{
	json_t *rng = json_object_get(st, "rng"), *e;
	size_t i;
	if (!json_is_array(rng) || json_array_size(rng) == 0)
		return 0;
	json_t *proto = json_deep_copy(json_array_get(rng, 0));
	if (!json_is_object(proto)) {
		json_decref(proto);
		return lmt_err_set(err, LMT_EFORMAT, "%s: state.rng[0] is not an object", where);
	}
	json_object_del(proto, "rank");
	json_array_foreach(rng, i, e) {
		json_t *x = json_deep_copy(e);
		json_object_del(x, "rank");
		int same = json_equal(x, proto);
		json_decref(x);
		if (!same && N != old_world) {
			json_decref(proto);
			return lmt_err_set(err, LMT_EFORMAT, "%s: state.rng[%zu] differs from state.rng[0] in more than "
					   "its rank: the generator state of new ranks cannot be derived", where, i);
		}
	}
	if (N != old_world) {
		json_t *nr = json_array();
		for (int r = 0; r < N; r++) {
			json_t *x = json_deep_copy(json_array_get(rng, 0));
			json_object_set_new(x, "rank", json_integer(r)); /* keeps its place among the keys */
			json_array_append_new(nr, x);
		}
		json_object_set_new(st, "rng", nr);
	}
	json_decref(proto);
	return 0;
}

int lmt_reshard_state(const struct lmt_ckpt *c, int N, char **state, uint64_t *consumed,
		      void (*note)(void *ctx, const char *msg), void *ctx, struct lmt_err *err)
{
	char where[PATH_MAX + 32];
	snprintf(where, sizeof where, "'%s/manifest.json'", c->dir);
	json_t *st = json_deep_copy(json_object_get(c->manifest, "state"));
	if (!st)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	int rc = new_cursors(json_object_get(st, "loader"), where, N, consumed, err);
	json_t *sh = json_object_get(st, "sharding");
	if (!rc && json_is_object(sh))
		json_object_set_new(sh, "world", json_integer(N));
	if (!rc)
		rc = new_rng(st, where, N, c->world, err);
	if (rc) {
		json_decref(st);
		return rc;
	}
	char path[1024] = "state";
	struct notes n = { note, ctx };
	other_worlds(st, path, strlen(path), sizeof path, &n);

	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	const char *k;
	json_t *x;
	json_object_foreach(st, k, x)
		lmt_json_jansson(&j, k, x);
	lmt_json_end(&j);
	json_decref(st);
	*state = j.out.oom ? NULL : strdup(j.out.buf);
	lmt_json_release(&j);
	return *state ? 0 : lmt_err_set(err, LMT_ENOMEM, "out of memory");
}

/* ---- the tensors ---- */

static int stop(int (*interrupted)(void *ctx), void *ctx, struct lmt_err *err)
{
	return interrupted && interrupted(ctx) ? lmt_err_set(err, LMT_EIO, "interrupted") : 0;
}

/* group g0's run of tensor e: its first element a and its length */
static uint64_t group_run(const struct lmt_ckpt_entry *e, int N, int g0, uint64_t *a)
{
	uint64_t off, cnt;
	int g1 = LMT_MIN(N, g0 + LMT_RESHARD_GROUP);
	lmt_ckpt_split(e->numel, N, g0, a, &cnt);
	lmt_ckpt_split(e->numel, N, g1 - 1, &off, &cnt);
	return off + cnt - *a;
}

static int write_groups(const struct lmt_ckpt *c, int N, struct lmt_ckpt_writer *w, float *buf,
			int (*interrupted)(void *ctx), void *ctx, struct lmt_err *err)
{
	int rc = 0;
	for (int g0 = 0; g0 < N && !rc; g0 += LMT_RESHARD_GROUP) {
		int g1 = LMT_MIN(N, g0 + LMT_RESHARD_GROUP);
		for (int i = 0; i < c->nt && !rc; i++) {
			uint64_t a, off, cnt, len;
			if ((rc = stop(interrupted, ctx, err)))
				break;
			len = group_run(&c->t[i], N, g0, &a);
			rc = lmt_ckpt_read_range(c, &c->t[i], a, len, buf, err);
			for (int r = g0; r < g1 && !rc; r++) {
				lmt_ckpt_split(c->t[i].numel, N, r, &off, &cnt);
				rc = lmt_ckpt_writer_chunk(w, r, i, buf + (off - a), err);
			}
		}
	}
	return rc;
}

int lmt_reshard_write(const struct lmt_ckpt *c, int N, const char *dir, const char *state,
		      int (*interrupted)(void *ctx), void *ctx, struct lmt_reshard_result *r, struct lmt_err *err)
{
	struct lmt_ckpt_tensor *t = calloc((size_t)c->nt + 1, sizeof *t);
	float *buf = NULL;
	int rc = 0;
	if (!t)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int i = 0; i < c->nt && !rc; i++) {
		if (strlen(c->t[i].name) >= sizeof t[i].name)
			rc = lmt_err_set(err, LMT_EINVAL, "'%s': tensor name '%.40s...' is too long", c->dir, c->t[i].name);
		snprintf(t[i].name, sizeof t[i].name, "%s", c->t[i].name);
		t[i].numel = c->t[i].numel;
		t[i].ndim = c->t[i].ndim;
		memcpy(t[i].shape, c->t[i].shape, sizeof t[i].shape);
	}
	/* the buffer: the longest run of elements one group of ranks holds */
	uint64_t cap = 0, a;
	for (int i = 0; i < c->nt; i++)
		for (int g0 = 0; g0 < N; g0 += LMT_RESHARD_GROUP)
			cap = LMT_MAX(cap, group_run(&c->t[i], N, g0, &a));
	if (!rc && !(buf = malloc((size_t)cap * 4 + 4)))
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory for %.1f MB, the largest run of a tensor a group of "
				 "ranks holds", cap * 4 / 1e6);
	struct lmt_ckpt_writer w;
	if (!rc && !(rc = lmt_ckpt_writer_open(&w, dir, N, t, c->nt, err))) {
		rc = write_groups(c, N, &w, buf, interrupted, ctx, err);
		if (!rc)
			rc = lmt_ckpt_writer_finish(&w, c->update, state, err);
		r->bytes = w.bytes;
		r->peak_buffer_bytes = cap * 4;
		lmt_ckpt_writer_release(&w);
	}
	free(buf);
	free(t);
	if (!rc)
		rc = stop(interrupted, ctx, err);
	/* read back before it becomes a checkpoint */
	struct lmt_ckpt back;
	if (!rc && (rc = lmt_ckpt_open(&back, dir, 1, err)))
		lmt_err_prefix(err, "the new checkpoint does not verify");
	else if (!rc)
		lmt_ckpt_close(&back);
	return rc ? rc : stop(interrupted, ctx, err);
}

/* ---- into place ---- */

/* rename that fails instead of replacing: an OUT made meanwhile (even an empty
 * directory, which plain rename replaces) is left alone */
static int rename_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
#endif
	struct stat st;
	if (lstat(to, &st) == 0) {
		errno = EEXIST;
		return -1;
	}
	return rename(from, to);
}

int lmt_reshard_commit(const char *staging, const char *out, struct lmt_err *err)
{
	if (rename_noreplace(staging, out))
		return lmt_err_errno(err, "'%s': cannot rename the new checkpoint into place", out);
	/* the new directory's entries, then the entry of the new directory */
	char parent[PATH_MAX];
	int rc = lmt_path_fmt(parent, sizeof parent, err, "%s", out);
	if (rc)
		return rc;
	char *sl = strrchr(parent, '/');
	if (!sl)
		strcpy(parent, ".");
	else if (sl == parent)
		parent[1] = 0; /* "/" */
	else
		*sl = 0;
	if ((rc = lmt_fsync_dir(out, err)) || (rc = lmt_fsync_dir(parent, err)))
		return rc;
	return 0;
}
