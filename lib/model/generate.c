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

#define P(g, name) ((g)->params + lmt_gpt_tensor((g), name)->offset)

void lmt_kv_release(struct lmt_kv *kv)
{
	struct lmt_backend *be = kv->g ? kv->g->be : NULL;
	if (be) {
		float *dev[] = { kv->x, kv->ln, kv->mean, kv->rstd, kv->qkv, kv->atty, kv->r2, kv->fch, kv->fchg, kv->logits };
		for (size_t i = 0; i < LMT_ARRAY_SIZE(dev); i++)
			be->free(be, dev[i]);
		be->free(be, kv->tok);
	}
	free(kv->k);
	free(kv->v);
	free(kv->h_qkv);
	free(kv->h_atty);
	free(kv->s);
	memset(kv, 0, sizeof *kv);
}

int lmt_kv_init(struct lmt_kv *kv, struct lmt_gpt *g, struct lmt_err *err)
{
	memset(kv, 0, sizeof *kv);
	kv->g = g;
	struct lmt_backend *be = g->be;
	size_t C = (size_t)g->cfg.C, L = (size_t)g->cfg.L, T = (size_t)g->cfg.max_T;
	kv->k = malloc(L * T * C * sizeof(float));
	kv->v = malloc(L * T * C * sizeof(float));
	kv->h_qkv = malloc(3 * C * sizeof(float));
	kv->h_atty = malloc(C * sizeof(float));
	kv->s = malloc(T * sizeof(float));
	kv->x = be->alloc(be, C * 4);
	kv->ln = be->alloc(be, C * 4);
	kv->mean = be->alloc(be, 4);
	kv->rstd = be->alloc(be, 4);
	kv->qkv = be->alloc(be, 3 * C * 4);
	kv->atty = be->alloc(be, C * 4);
	kv->r2 = be->alloc(be, C * 4);
	kv->fch = be->alloc(be, 4 * C * 4);
	kv->fchg = be->alloc(be, 4 * C * 4);
	kv->logits = be->alloc(be, (size_t)g->cfg.Vp * 4);
	kv->tok = be->alloc(be, 4);
	if (!kv->k || !kv->v || !kv->h_qkv || !kv->h_atty || !kv->s || !kv->x || !kv->ln || !kv->mean || !kv->rstd ||
	    !kv->qkv || !kv->atty || !kv->r2 || !kv->fch || !kv->fchg || !kv->logits || !kv->tok) {
		lmt_kv_release(kv);
		return lmt_err_set(err, LMT_ENOMEM, "cannot allocate a key/value cache of %d positions (%.1f MB)",
				   g->cfg.max_T, 2.0 * L * T * C * 4 / 1e6);
	}
	return 0;
}

/* y (1, OC) = x W^T + b (+ y when beta = 1) */
static void linear1(struct lmt_backend *be, float *y, const float *x, const float *w, const float *b, int IC, int OC,
		    float beta)
{
	be->gemm(be, 0, 1, 1, OC, IC, 1.0f, x, IC, 0, w, IC, 0, beta, y, OC, 0, 1);
	if (b)
		be->bias_add(be, y, b, 1, OC);
}

int lmt_kv_prefill(struct lmt_kv *kv, const int32_t *tok, int n, float *logits, struct lmt_err *err)
{
	struct lmt_gpt *g = kv->g;
	struct lmt_backend *be = g->be;
	int C = g->cfg.C, L = g->cfg.L, T = g->cfg.max_T, rc;
	if (n < 1 || n > T)
		return lmt_err_set(err, LMT_EINVAL, "a prompt of %d tokens for a context of %d", n, T);
	if (!g->acts_mem || g->acts_N < (size_t)n)
		if ((rc = lmt_gpt_alloc_acts(g, 1, T, err)))
			return rc;
	if ((rc = lmt_gpt_reshape_acts(g, 1, n, err)))
		return rc;
	float *h = malloc((size_t)n * 3 * C * sizeof *h);
	if (!h)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	be->to_device(be, g->tok, tok, (size_t)n * sizeof *tok);
	lmt_gpt_logits(g, 0);
	for (int l = 0; l < L; l++) {
		be->to_host(be, h, g->a.qkv + (size_t)l * n * 3 * C, (size_t)n * 3 * C * sizeof *h);
		for (int p = 0; p < n; p++) {
			memcpy(kv->k + ((size_t)l * T + p) * C, h + (size_t)p * 3 * C + C, (size_t)C * sizeof *h);
			memcpy(kv->v + ((size_t)l * T + p) * C, h + (size_t)p * 3 * C + 2 * C, (size_t)C * sizeof *h);
		}
	}
	free(h);
	be->to_host(be, logits, g->a.logits + (size_t)(n - 1) * g->cfg.Vp, (size_t)g->cfg.V * sizeof *logits);
	kv->len = n;
	return 0;
}

/* the new query's attention over cached positions 0..p of layer l, head by head */
static void attend(struct lmt_kv *kv, int l, int p)
{
	const struct lmt_gpt_config *c = &kv->g->cfg;
	int C = c->C, NH = c->NH, HS = C / NH, T = c->max_T;
	float scale = 1.0f / sqrtf((float)HS), *s = kv->s;
	const float *K = kv->k + (size_t)l * T * C, *V = kv->v + (size_t)l * T * C;
	for (int h = 0; h < NH; h++) {
		const float *q = kv->h_qkv + h * HS;
		float mx = -INFINITY;
		for (int j = 0; j <= p; j++) {
			const float *k = K + (size_t)j * C + h * HS;
			float d = 0;
			for (int e = 0; e < HS; e++)
				d += q[e] * k[e];
			s[j] = d;
			mx = d > mx ? d : mx;
		}
		float sum = 0;
		for (int j = 0; j <= p; j++) {
			s[j] = expf(s[j] * scale - mx * scale);
			sum += s[j];
		}
		float inv = 1.0f / sum, *o = kv->h_atty + h * HS;
		memset(o, 0, (size_t)HS * sizeof *o);
		for (int j = 0; j <= p; j++) {
			const float *v = V + (size_t)j * C + h * HS;
			float a = s[j] * inv;
			for (int e = 0; e < HS; e++)
				o[e] += a * v[e];
		}
	}
}

int lmt_kv_step(struct lmt_kv *kv, int32_t tok, float *logits, struct lmt_err *err)
{
	struct lmt_gpt *g = kv->g;
	struct lmt_backend *be = g->be;
	const struct lmt_gpt_config *c = &g->cfg;
	int C = c->C, L = c->L, T = c->max_T, p = kv->len;
	if (p >= T)
		return lmt_err_set(err, LMT_EINVAL, "the cache is full: %d positions, the model's context", T);
	be->to_device(be, kv->tok, &tok, sizeof tok);
	be->embed_fwd(be, kv->x, kv->tok, P(g, "wte"), P(g, "wpe") + (size_t)p * C, 1, 1, C);
	for (int l = 0; l < L; l++) {
		be->layernorm_fwd(be, kv->ln, kv->mean, kv->rstd, kv->x, P(g, "ln1w") + l * C, P(g, "ln1b") + l * C, 1, C);
		linear1(be, kv->qkv, kv->ln, P(g, "qkvw") + (size_t)l * 3 * C * C, P(g, "qkvb") + l * 3 * C, C, 3 * C, 0);
		be->to_host(be, kv->h_qkv, kv->qkv, (size_t)3 * C * sizeof(float));
		memcpy(kv->k + ((size_t)l * T + p) * C, kv->h_qkv + C, (size_t)C * sizeof(float));
		memcpy(kv->v + ((size_t)l * T + p) * C, kv->h_qkv + 2 * C, (size_t)C * sizeof(float));
		attend(kv, l, p);
		be->to_device(be, kv->atty, kv->h_atty, (size_t)C * sizeof(float));
		be->copy(be, kv->r2, kv->x, (size_t)C * sizeof(float));
		linear1(be, kv->r2, kv->atty, P(g, "attprojw") + (size_t)l * C * C, P(g, "attprojb") + l * C, C, C, 1);
		be->layernorm_fwd(be, kv->ln, kv->mean, kv->rstd, kv->r2, P(g, "ln2w") + l * C, P(g, "ln2b") + l * C, 1, C);
		linear1(be, kv->fch, kv->ln, P(g, "fcw") + (size_t)l * 4 * C * C, P(g, "fcb") + l * 4 * C, C, 4 * C, 0);
		be->gelu_fwd(be, kv->fchg, kv->fch, (size_t)4 * C);
		be->copy(be, kv->x, kv->r2, (size_t)C * sizeof(float));
		linear1(be, kv->x, kv->fchg, P(g, "fcprojw") + (size_t)l * 4 * C * C, P(g, "fcprojb") + l * C, 4 * C, C, 1);
	}
	be->layernorm_fwd(be, kv->ln, kv->mean, kv->rstd, kv->x, P(g, "lnfw"), P(g, "lnfb"), 1, C);
	linear1(be, kv->logits, kv->ln, c->untied ? P(g, "lm_head") : P(g, "wte"), NULL, C, c->Vp, 0);
	be->to_host(be, logits, kv->logits, (size_t)c->V * sizeof *logits);
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
	/* the selection of lmt_sample_tokens (trainer.c), step for step; top_p < 1 only
	 * narrows the candidates, so with top_p >= 1 the draws are that sampler's */
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
	lmt_rng_seed(&r, sp->seed, 0x5a3); /* lmt_sample_tokens' stream */
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
