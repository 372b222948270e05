/*
 * zero.c: ZeRO-2 and ZeRO-3 over flat shards (zero.h).
 */
#include "model/zero.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* comm->wait, its time counted as exposed communication */
static int waited(struct lmt_zero *z, struct lmt_comm_req *q, struct lmt_err *err)
{
	double t = lmt_now();
	int rc = z->comm->wait(z->comm, q, err);
	z->t_wait += lmt_now() - t;
	return rc;
}

/* counts[r]: the elements of [a, b) in rank r's shard */
static void parts(const struct lmt_zero *z, size_t a, size_t b, size_t *counts)
{
	size_t P = z->g->nparams;
	for (int r = 0; r < z->comm->world; r++) {
		size_t lo = LMT_MIN(P, (size_t)r * z->S), hi = LMT_MIN(P, lo + z->S);
		size_t x = LMT_MAX(a, lo), y = LMT_MIN(b, hi);
		counts[r] = y > x ? y - x : 0;
	}
}

static void fail(struct lmt_zero *z, int rc)
{
	if (rc && !z->failed)
		z->failed = rc;
}

/* a gradient slot's reduction done: its received part added into the shard */
static void grad_finish(struct lmt_zero *z, int k)
{
	struct lmt_backend *be = z->g->be;
	if (z->gunit[k] < 0)
		return;
	int rc = waited(z, z->greq[k], z->failed ? NULL : &z->err);
	z->greq[k] = NULL;
	fail(z, rc);
	if (!rc && z->rn[k])
		be->add(be, z->gshard + (z->rat[k] - z->lo), z->gshard + (z->rat[k] - z->lo), z->rslot[k], z->rn[k]);
	z->gunit[k] = -1;
}

/* start the reduction of [a, a + n) from src into slot k's receive buffer */
static void grad_start(struct lmt_zero *z, int k, const float *src, size_t a, size_t n)
{
	struct lmt_comm *c = z->comm;
	parts(z, a, a + n, z->gcounts[k]);
	z->rat[k] = LMT_MAX(a, z->lo);
	z->rn[k] = z->gcounts[k][c->rank];
	if (z->failed)
		return;
	fail(z, c->reduce_scatterv_start(c, src, z->rslot[k], z->gcounts[k], LMT_DTYPE_F32, LMT_COMM_OP_SUM,
					  &z->greq[k], &z->err));
}

static void grads_ready(void *ctx, int layer, size_t off, size_t n)
{
	struct lmt_zero *z = ctx;
	int k = z->gunit[0] == layer + 1 ? 0 : 1;
	grad_start(z, k, z->gslot[k], off, n);
}

/* stage 3: the gather of unit u (a layer) into parameter slot k started */
static void param_start(struct lmt_zero *z, int k, int u)
{
	struct lmt_comm *c = z->comm;
	size_t off, n = lmt_gpt_unit_range(z->g, u, &off);
	if (z->punit[k] >= 0) { /* the slot's last unit reads from the whole buffers no more */
		z->units[z->punit[k]].p = NULL;
		z->units[z->punit[k]].w = NULL;
	}
	parts(z, off, off + n, z->pcounts[k]);
	z->punit[k] = u;
	z->pcast[k] = 0;
	if (z->failed)
		return;
	const float *mine = z->pshard + (LMT_MAX(off, z->lo) - z->lo);
	fail(z, c->allgatherv_start(c, mine, z->pslot[k], z->pcounts[k], LMT_DTYPE_F32, &z->preq[k], &z->err));
}

/* stage 3: slot k's gather complete and cast to the compute dtype */
static void param_finish(struct lmt_zero *z, int k)
{
	struct lmt_gpt *g = z->g;
	if (z->preq[k] || !z->pcast[k]) {
		fail(z, waited(z, z->preq[k], z->failed ? NULL : &z->err));
		z->preq[k] = NULL;
	}
	if (!z->pcast[k] && g->dtype != LMT_DTYPE_F32)
		g->be->cast(g->be, z->wslot[k], g->dtype, z->pslot[k], LMT_DTYPE_F32, z->ls, 0, 0);
	z->pcast[k] = 1;
}

/* stage 3: the outer units gathered (once per update) */
static void outer_gather(struct lmt_zero *z)
{
	struct lmt_gpt *g = z->g;
	struct lmt_comm *c = z->comm;
	size_t *counts = z->pcounts[0];
	struct { size_t a, n; float *dst; } u[2] = { { 0, z->n0, z->outer_p }, { z->end, z->n1, z->outer_p + z->n0 } };
	for (int i = 0; i < 2 && !z->failed; i++) {
		struct lmt_comm_req *q = NULL;
		parts(z, u[i].a, u[i].a + u[i].n, counts);
		const float *mine = z->pshard + (LMT_MIN(LMT_MAX(u[i].a, z->lo), z->hi) - z->lo);
		int rc = c->allgatherv_start(c, mine, u[i].dst, counts, LMT_DTYPE_F32, &q, &z->err);
		fail(z, rc ? rc : waited(z, q, &z->err));
	}
	if (g->dtype != LMT_DTYPE_F32)
		g->be->cast(g->be, z->outer_w, g->dtype, z->outer_p, LMT_DTYPE_F32, z->n0 + z->n1, 0, 0);
	z->outer_ok = 1;
}

static void fetch_params(struct lmt_zero *z, int u, int phase)
{
	struct lmt_gpt *g = z->g;
	int L = g->cfg.L;
	if (u == 0 || u == L + 1) {
		if (!z->outer_ok)
			outer_gather(z);
		return;
	}
	int k = z->punit[0] == u ? 0 : z->punit[1] == u ? 1 : -1;
	if (k < 0) {
		k = 1 - z->pcur;
		if (z->preq[k]) /* a prefetch of another unit: done with first */
			param_finish(z, k);
		param_start(z, k, u);
	}
	param_finish(z, k);
	z->units[u].p = z->pslot[k];
	z->units[u].w = g->dtype == LMT_DTYPE_F32 ? (void *)z->pslot[k] : z->wslot[k];
	z->pcur = k;
	int next = phase == LMT_GPT_FETCH_FORWARD ? u + 1 : u - 1;
	if (z->prefetch && next >= 1 && next <= L && z->punit[1 - k] != next) {
		if (z->preq[1 - k])
			param_finish(z, 1 - k);
		param_start(z, 1 - k, next);
	}
}

static void fetch(void *ctx, int u, int phase)
{
	struct lmt_zero *z = ctx;
	if (z->stage == 3)
		fetch_params(z, u, phase);
	if (phase != LMT_GPT_FETCH_BACKWARD)
		return;
	/* a gradient slot for layer unit u: the one used two layers ago, its reduction done */
	int k = z->gnext;
	z->gnext ^= 1;
	grad_finish(z, k);
	z->g->be->zero(z->g->be, z->gslot[k], z->ls * sizeof(float));
	z->gunit[k] = u;
	z->units[u].g = z->gslot[k];
}

void lmt_zero_begin_update(struct lmt_zero *z)
{
	z->g->be->zero(z->g->be, z->gshard, z->S * sizeof(float));
}

void lmt_zero_begin_backward(struct lmt_zero *z)
{
	z->g->be->zero(z->g->be, z->outer_g, (z->n0 + z->n1) * sizeof(float));
}

int lmt_zero_end_backward(struct lmt_zero *z, struct lmt_err *err)
{
	grad_finish(z, 0);
	grad_finish(z, 1);
	/* the outer units, in pieces of a layer's size through slot 0's receive buffer */
	struct { size_t a, n; const float *src; } u[2] = { { 0, z->n0, z->outer_g }, { z->end, z->n1, z->outer_g + z->n0 } };
	for (int i = 0; i < 2; i++)
		for (size_t at = 0; at < u[i].n; at += z->ls) {
			size_t n = LMT_MIN(z->ls, u[i].n - at);
			z->gunit[0] = 0; /* any unit: the slot has a reduction to finish */
			grad_start(z, 0, u[i].src + at, u[i].a + at, n);
			grad_finish(z, 0);
		}
	if (z->failed) {
		*err = z->err;
		int rc = z->failed;
		z->failed = 0;
		return rc;
	}
	return 0;
}

void lmt_zero_params_changed(struct lmt_zero *z)
{
	if (z->stage != 3)
		return;
	z->outer_ok = 0;
	for (int k = 0; k < 2; k++) {
		if (z->preq[k])
			param_finish(z, k);
		if (z->punit[k] >= 0) {
			z->units[z->punit[k]].p = NULL;
			z->units[z->punit[k]].w = NULL;
		}
		z->punit[k] = -1;
	}
}

static void *alloc(struct lmt_zero *z, size_t bytes, int *oom)
{
	void *p = z->g->be->alloc(z->g->be, bytes ? bytes : 1);
	if (!p)
		*oom = 1;
	else
		z->staging += bytes;
	return p;
}

int lmt_zero_init(struct lmt_zero *z, struct lmt_gpt *g, struct lmt_comm *comm, int stage, int prefetch, size_t S,
		  struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	int L = g->cfg.L, oom = 0;
	memset(z, 0, sizeof *z);
	z->g = g, z->comm = comm, z->stage = stage, z->prefetch = prefetch, z->S = S;
	z->lo = LMT_MIN(g->nparams, (size_t)comm->rank * S);
	z->hi = LMT_MIN(g->nparams, z->lo + S);
	size_t off;
	z->ls = lmt_gpt_layer_range(g, 0, &off);
	z->n0 = lmt_gpt_unit_range(g, 0, &off);
	z->n1 = lmt_gpt_unit_range(g, L + 1, &z->end);
	z->gunit[0] = z->gunit[1] = z->punit[0] = z->punit[1] = -1;
	z->units = calloc((size_t)L + 2, sizeof *z->units);
	for (int k = 0; k < 2; k++) {
		z->gcounts[k] = calloc((size_t)comm->world, sizeof(size_t));
		z->pcounts[k] = calloc((size_t)comm->world, sizeof(size_t));
		if (!z->gcounts[k] || !z->pcounts[k])
			oom = 1;
	}
	z->outer_g = alloc(z, (z->n0 + z->n1) * sizeof(float), &oom);
	for (int k = 0; k < 2; k++) {
		z->gslot[k] = alloc(z, z->ls * sizeof(float), &oom);
		z->rslot[k] = alloc(z, z->ls * sizeof(float), &oom);
	}
	size_t ds = g->dtype == LMT_DTYPE_F32 ? 0 : lmt_dtype_size(g->dtype);
	if (stage == 3) {
		z->outer_p = alloc(z, (z->n0 + z->n1) * sizeof(float), &oom);
		z->outer_w = ds ? alloc(z, (z->n0 + z->n1) * ds, &oom) : z->outer_p;
		for (int k = 0; k < 2; k++) {
			z->pslot[k] = alloc(z, z->ls * sizeof(float), &oom);
			z->wslot[k] = ds ? alloc(z, z->ls * ds, &oom) : z->pslot[k];
		}
		z->pshard = be->alloc(be, S * sizeof(float));
		oom |= !z->pshard;
	}
	z->gshard = be->alloc(be, S * sizeof(float));
	if (oom || !z->units || !z->gshard) {
		lmt_zero_release(z);
		return lmt_err_set(err, LMT_ENOMEM, "ZeRO-%d: cannot allocate the shard and its staging buffers", stage);
	}
	/* the gradients live in the shard and the slots from now on */
	be->free(be, g->grads);
	g->grads = NULL;
	z->units[0].g = z->outer_g;
	z->units[L + 1].g = z->outer_g + z->n0;
	if (stage == 3) {
		z->units[0].p = z->outer_p;
		z->units[0].w = z->outer_w;
		z->units[L + 1].p = z->outer_p + z->n0;
		z->units[L + 1].w = (char *)z->outer_w + z->n0 * (ds ? ds : sizeof(float));
		lmt_zero_take_params(z);
		z->full = 1; /* g->params stays whole until the first reshard, without hooks */
	} else {
		g->unit = z->units;
		g->fetch = fetch;
	}
	g->fetch_ctx = z;
	g->grads_ready = grads_ready;
	g->grads_ready_ctx = z;
	return 0;
}

void lmt_zero_take_params(struct lmt_zero *z)
{
	struct lmt_backend *be = z->g->be;
	if (z->stage != 3 || !z->g->params)
		return;
	be->zero(be, z->pshard, z->S * sizeof(float));
	be->copy(be, z->pshard, z->g->params + z->lo, (z->hi - z->lo) * sizeof(float));
	lmt_zero_params_changed(z);
}

int lmt_zero_unshard(struct lmt_zero *z, struct lmt_err *err)
{
	struct lmt_gpt *g = z->g;
	struct lmt_backend *be = g->be;
	if (z->stage != 3 || z->full)
		return 0;
	size_t total = z->S * (size_t)z->comm->world, ds = lmt_dtype_size(g->dtype);
	g->params = be->alloc(be, total * sizeof(float));
	g->wparams = g->dtype == LMT_DTYPE_F32 ? g->params : be->alloc(be, total * ds);
	if (!g->params || !g->wparams) {
		be->free(be, g->params);
		if (g->dtype != LMT_DTYPE_F32)
			be->free(be, g->wparams);
		g->params = NULL;
		g->wparams = NULL;
		return lmt_err_set(err, LMT_ENOMEM, "ZeRO-3: cannot gather the %zu parameters", g->nparams);
	}
	int rc = z->comm->allgather(z->comm, z->pshard, g->params, z->S * sizeof(float), err);
	if (rc) {
		z->full = 1; /* what was allocated is freed by reshard */
		lmt_zero_reshard(z);
		return rc;
	}
	lmt_gpt_sync_weights(g);
	g->unit = NULL;
	g->fetch = NULL;
	z->full = 1;
	return 0;
}

void lmt_zero_reshard(struct lmt_zero *z)
{
	struct lmt_gpt *g = z->g;
	struct lmt_backend *be = g->be;
	if (z->stage != 3 || !z->full)
		return;
	if (g->wparams != g->params)
		be->free(be, g->wparams);
	be->free(be, g->params);
	g->params = NULL;
	g->wparams = NULL;
	g->unit = z->units;
	g->fetch = fetch;
	z->full = 0;
	lmt_zero_params_changed(z);
}

void lmt_zero_release(struct lmt_zero *z)
{
	struct lmt_gpt *g = z->g;
	if (!g)
		return;
	struct lmt_backend *be = g->be;
	for (int k = 0; k < 2; k++) {
		(void)z->comm->wait(z->comm, z->greq[k], NULL);
		(void)z->comm->wait(z->comm, z->preq[k], NULL);
		free(z->gcounts[k]);
		free(z->pcounts[k]);
		be->free(be, z->gslot[k]);
		be->free(be, z->rslot[k]);
		be->free(be, z->pslot[k]);
		if (z->wslot[k] != z->pslot[k])
			be->free(be, z->wslot[k]);
	}
	if (z->outer_w != z->outer_p)
		be->free(be, z->outer_w);
	be->free(be, z->outer_p);
	be->free(be, z->outer_g);
	be->free(be, z->gshard);
	be->free(be, z->pshard);
	if (g->unit == z->units)
		g->unit = NULL;
	if (g->fetch_ctx == z) {
		g->fetch = NULL;
		g->grads_ready = NULL;
	}
	free(z->units);
	memset(z, 0, sizeof *z);
}

void lmt_state_bytes(const struct lmt_gpt *g, int zero, int world, struct lmt_state_bytes *b)
{
	size_t P = g->nparams, W = (size_t)(world > 1 ? world : 1), S = (P + W - 1) / W, off;
	size_t ds = g->dtype == LMT_DTYPE_F32 ? 0 : lmt_dtype_size(g->dtype);
	if (W == 1)
		zero = 0;
	size_t whole = zero ? S * W : P, ls = lmt_gpt_layer_range(g, 0, &off);
	size_t outer = lmt_gpt_unit_range(g, 0, &off) + lmt_gpt_unit_range(g, g->cfg.L + 1, &off);
	memset(b, 0, sizeof *b);
	b->params = 4 * (zero == 3 ? S : whole);
	b->working = zero == 3 ? 0 : ds * whole;
	b->grads = 4 * (zero >= 2 ? S : whole);
	b->optimizer = 8 * (zero ? S : P);
	if (zero >= 2)
		b->staging = 4 * (outer + 4 * ls);
	if (zero == 3)
		b->staging += (4 + ds) * (outer + 2 * ls);
}
