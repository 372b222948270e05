/*
 * generate.c: the key/value-cache sampler (see generate.h).
 *
 * One step, for the token at position p, follows model.c's forward pass for one
 * row: x = wte[tok] + wpe[p]; per layer, qkv = ln1(x) Wqkv^T + b, the new key and
 * value appended to the cache, attention of q over the cached keys 0..p, x += the
 * projection of its output, x += the MLP of ln2(x); then lnf and the head.
 */
#include "model/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define P(g, name) lmt_gpt_piece((g), (g)->params, name, 0)

void lmt_kv_release(struct lmt_kv *kv)
{
	struct lmt_backend *be = kv->g ? kv->g->be : NULL;
	if (be) {
		for (int l = 0; kv->qkv && l < kv->g->cfg.L; l++)
			be->free(be, kv->qkv[l]);
		void *dev[] = { kv->slot_mem, kv->x, kv->y, kv->ln, kv->logits, kv->tok };
		for (size_t i = 0; i < LMT_ARRAY_SIZE(dev); i++)
			be->free(be, dev[i]);
	}
	free(kv->qkv);
	memset(kv, 0, sizeof *kv);
}

int lmt_kv_init(struct lmt_kv *kv, struct lmt_gpt *g, struct lmt_err *err)
{
	memset(kv, 0, sizeof *kv);
	kv->g = g;
	struct lmt_backend *be = g->be;
	size_t C = (size_t)g->cfg.C, L = (size_t)g->cfg.L, T = (size_t)g->cfg.max_T;
	int rc = lmt_gpt_slot_alloc(g, &kv->slot, T, &kv->slot_mem, NULL, err);
	if (rc) {
		lmt_kv_release(kv);
		return rc;
	}
	kv->qkv = calloc(L, sizeof *kv->qkv);
	int ok = kv->qkv != NULL;
	for (size_t l = 0; ok && l < L; l++)
		ok = (kv->qkv[l] = be->alloc(be, T * 3 * C * sizeof(float))) != NULL;
	kv->x = be->alloc(be, T * C * sizeof(float));
	kv->y = be->alloc(be, T * C * sizeof(float));
	kv->ln = be->alloc(be, C * lmt_dtype_size(g->dtype));
	kv->logits = be->alloc(be, (size_t)g->cfg.Vp * sizeof(float));
	kv->tok = be->alloc(be, T * sizeof(int32_t));
	if (!ok || !kv->x || !kv->y || !kv->ln || !kv->logits || !kv->tok) {
		lmt_kv_release(kv);
		return lmt_err_set(err, LMT_ENOMEM, "cannot allocate a key/value cache of %d positions (%.1f MB)",
				   g->cfg.max_T, 3.0 * L * T * C * 4 / 1e6);
	}
	return 0;
}

/* rows q0..T-1 through every block (x holds their embeddings), then the head on
 * the last row */
static int run_rows(struct lmt_kv *kv, int T, int q0, float *logits, struct lmt_err *err)
{
	struct lmt_gpt *g = kv->g;
	struct lmt_backend *be = g->be;
	int C = g->cfg.C, n = T - q0;
	float *x = kv->x, *y = kv->y;
	for (int l = 0; l < g->cfg.L; l++) {
		lmt_gpt_block_fwd(g, l, &kv->slot, kv->qkv[l], x, y, NULL, 1, T, q0);
		float *t = x;
		x = y;
		y = t;
	}
	lmt_gpt_head_fwd(g, kv->logits, x + (size_t)(n - 1) * C, kv->ln, NULL, NULL, 1);
	be->to_host(be, logits, kv->logits, (size_t)g->cfg.V * sizeof *logits);
	return be->status(be, err);
}

int lmt_kv_prefill(struct lmt_kv *kv, const int32_t *tok, int n, float *logits, struct lmt_err *err)
{
	struct lmt_gpt *g = kv->g;
	struct lmt_backend *be = g->be;
	int T = g->cfg.max_T, rc;
	if (n < 1 || n > T)
		return lmt_err_set(err, LMT_EINVAL, "a prompt of %d tokens for a context of %d", n, T);
	be->to_device(be, kv->tok, tok, (size_t)n * sizeof *tok);
	be->embed_fwd(be, kv->x, kv->tok, P(g, "wte"), P(g, "wpe"), 1, n, g->cfg.C);
	if ((rc = run_rows(kv, n, 0, logits, err)))
		return rc;
	kv->len = n;
	return 0;
}

int lmt_kv_step(struct lmt_kv *kv, int32_t tok, float *logits, struct lmt_err *err)
{
	struct lmt_gpt *g = kv->g;
	struct lmt_backend *be = g->be;
	int C = g->cfg.C, T = g->cfg.max_T, p = kv->len, rc;
	if (p >= T)
		return lmt_err_set(err, LMT_EINVAL, "the cache is full: %d positions, the model's context", T);
	be->to_device(be, kv->tok, &tok, sizeof tok);
	be->embed_fwd(be, kv->x, kv->tok, P(g, "wte"), P(g, "wpe") + (size_t)p * C, 1, 1, C);
	if ((rc = run_rows(kv, p + 1, p, logits, err)))
		return rc;
	kv->len = p + 1;
	return 0;
}

int lmt_pick_token(const float *row, int V, double temperature, int top_k, struct lmt_rng *r, int *idx)
{
	return lmt_pick_token_p(row, V, temperature, top_k, 1.0, r, idx);
}

/* One step of a selection sort: the largest of row[idx[a .. end)] (the first of
 * equals) swapped to idx[a]. */
static void bring_max(const float *row, int *idx, int a, int end)
{
	int best = a;
	for (int j = a + 1; j < end; j++)
		if (row[idx[j]] > row[idx[best]])
			best = j;
	int tmp = idx[a];
	idx[a] = idx[best];
	idx[best] = tmp;
}

/*
 * The nucleus of Holtzman et al. 2020 ("The Curious Case of Neural Text
 * Degeneration", sec. 3.1): the fewest most probable of the kk candidates whose
 * probabilities sum to at least top_p. Chosen by selection, largest first, so it
 * costs kk x (the nucleus) and leaves the candidates in the order the top-k
 * selection leaves them (ties: the lowest id first). Returns its size, with sum
 * (the candidates' unnormalised mass on entry) cut to the nucleus's.
 */
static int nucleus(const float *row, int kk, double top_p, float mx, double temperature, int *idx, double *sum)
{
	double want = top_p * *sum, acc = 0;
	for (int a = 0; a < kk; a++) {
		bring_max(row, idx, a, kk);
		acc += exp((row[idx[a]] - mx) / temperature);
		if (acc >= want) {
			*sum = acc;
			return a + 1;
		}
	}
	return kk; /* rounding: the whole mass fell short of top_p x itself */
}

int lmt_pick_token_p(const float *row, int V, double temperature, int top_k, double top_p, struct lmt_rng *r,
		     int *idx)
{
	/* lmt_pick_token's selection, step for step; top_p < 1 only narrows the
	 * candidates, so with top_p >= 1 the draws are lmt_pick_token's */
	int next = 0;
	if (temperature <= 0) {
		for (int j = 1; j < V; j++)
			if (row[j] > row[next])
				next = j;
		return next;
	}
	int kk = top_k > 0 && top_k < V ? top_k : V;
	for (int j = 0; j < V; j++)
		idx[j] = j;
	for (int a = 0; a < kk && kk < V; a++)
		bring_max(row, idx, a, V);
	float mx = -INFINITY;
	for (int a = 0; a < kk; a++)
		mx = row[idx[a]] > mx ? row[idx[a]] : mx;
	double sum = 0;
	for (int a = 0; a < kk; a++)
		sum += exp((row[idx[a]] - mx) / temperature);
	if (top_p > 0 && top_p < 1)
		kk = nucleus(row, kk, top_p, mx, temperature, idx, &sum);
	double u = (lmt_rng_next(r) >> 11) * 0x1.0p-53 * sum, acc = 0;
	next = idx[kk - 1];
	for (int a = 0; a < kk; a++) {
		acc += exp((row[idx[a]] - mx) / temperature);
		if (u < acc) {
			next = idx[a];
			break;
		}
	}
	return next;
}

int lmt_generate(struct lmt_gpt *g, const int32_t *prompt, int np, int n, double temperature, int top_k,
		 uint64_t seed, int32_t *out, struct lmt_err *err)
{
	struct lmt_sampler sp = { temperature, top_k, 1.0, seed };
	return lmt_generate_stream(g, prompt, np, n, &sp, out, NULL, NULL, NULL, err);
}

int lmt_generate_stream(struct lmt_gpt *g, const int32_t *prompt, int np, int n, const struct lmt_sampler *sp,
			int32_t *out, int *nout, lmt_generate_fn fn, void *fn_ctx, struct lmt_err *err)
{
	int T = g->cfg.max_T, V = g->cfg.V, rc;
	if (nout)
		*nout = 0;
	if (np < 1)
		return lmt_err_set(err, LMT_EINVAL, "an empty prompt: give at least one token");
	int32_t *ctx = malloc(((size_t)np + n + 1) * sizeof *ctx);
	float *row = malloc((size_t)V * sizeof *row);
	int *idx = malloc((size_t)V * sizeof *idx);
	struct lmt_kv kv;
	if (!ctx || !row || !idx) {
		free(ctx), free(row), free(idx);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	if ((rc = lmt_kv_init(&kv, g, err))) {
		free(ctx), free(row), free(idx);
		return rc;
	}
	struct lmt_rng r;
	lmt_rng_seed(&r, sp->seed, 0x5a3); /* one stream per seed, whoever samples */
	memcpy(ctx, prompt, (size_t)np * sizeof *ctx);
	int len = np;
	int start = len > T ? len - T : 0;
	rc = lmt_kv_prefill(&kv, ctx + start, len - start, row, err);
	for (int k = 0; k < n && !rc; k++) {
		int next = lmt_pick_token_p(row, V, sp->temperature, sp->top_k, sp->top_p, &r, idx);
		ctx[len++] = next;
		out[k] = next;
		if (nout)
			*nout = k + 1;
		if (fn && fn(fn_ctx, next, k))
			break;
		if (k + 1 == n)
			break;
		if (len <= T)
			rc = lmt_kv_step(&kv, next, row, err);
		else /* the window slides: every position moves, the cache is void */
			rc = lmt_kv_prefill(&kv, ctx + len - T, T, row, err);
	}
	lmt_kv_release(&kv);
	free(ctx), free(row), free(idx);
	return rc;
}
