/*
 * model.c: GPT-2's forward and backward passes as a sequence of backend calls.
 *
 * Activations for a (B, T) micro-batch, N = B*T, in one allocation:
 *	encoded (N, C); residual3 (L, N, C), each block's output; per kept block a slot
 *	(model.h: ln1, ln1_mean/rstd, qkv (N, 3C), atty (+ its copy in the compute
 *	dtype), att_lse (B, NH, T), residual2, ln2, ln2_mean/rstd, fch (N, 4C), fch_gelu
 *	(N, 4C)); one shared slot for the recomputed blocks; then lnf (N, C), lnf_mean/
 *	rstd (N), logits (N, Vp), losses (N); backward scratch dres (N, C), dbig (N, 4C),
 *	dsmall (N, C), dqkv (N, 3C), and dlp (N, max(4C, Vp)) in the compute dtype.
 * Residual adds are folded into the projection GEMMs (beta = 1 on a copy of the
 * stream), and biases into their epilogues, so no separate projection output is
 * stored.
 *
 * Mixed precision: in bf16 or fp16 the GEMMs read a working copy of the weights in
 * that dtype (wparams, written by the optimizer as it updates the fp32 master
 * weights) and GEMM inputs stored in it; the products accumulate in fp32 into fp32
 * outputs; layer norm statistics, softmax, the loss and every gradient stay fp32,
 * and a gradient is cast to the dtype only to enter a GEMM.
 *
 * Recompute: a recomputed block keeps only its input (the previous block's output,
 * always kept); backward runs its forward again into the shared slot, with the same
 * operations on the same inputs, so the gradients are bitwise those of no recompute.
 */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomicfile.h"
#include "core/rng.h"
#include "core/util.h"

int lmt_gpt_padded_vocab(int V)
{
	return (V + 127) / 128 * 128;
}

static void add_tensor(struct lmt_gpt *g, const char *name, int kind, int ndim, int s0, int s1, int s2)
{
	struct lmt_tensor *t = &g->t[g->nt++];
	t->layered = ndim > 1 && s0 == g->cfg.L && strcmp(name, "wte") && strcmp(name, "wpe") && strcmp(name, "lm_head");
	t->name = name;
	t->kind = kind;
	t->ndim = ndim;
	t->shape[0] = s0;
	t->shape[1] = s1;
	t->shape[2] = s2;
	t->numel = (size_t)s0 * (ndim > 1 ? s1 : 1) * (ndim > 2 ? s2 : 1);
	t->offset = g->nparams;
	g->nparams += t->numel;
}

const struct lmt_tensor *lmt_gpt_tensor(const struct lmt_gpt *g, const char *name)
{
	for (int i = 0; i < g->nt; i++)
		if (!strcmp(g->t[i].name, name))
			return &g->t[i];
	return NULL;
}

/* layer l's piece of tensor name in the parameters, the gradients and the working
 * copy (the GEMMs' weights, in the compute dtype) */
#define P(g, name, l) ((float *)at_unit((g), 0, name, l))
#define G(g, name, l) ((float *)at_unit((g), 1, name, l))
#define W(g, name, l) ((const void *)at_unit((g), 2, name, l))

static size_t dev_at(const struct lmt_tensor *t, int l)
{
	return t->dev + (size_t)l * t->lstride;
}

static size_t dsz(const struct lmt_gpt *g);

/* layer l's piece of tensor name in the parameters (which 0), gradients (1) or
 * working copy (2): in the whole buffers, or in its unit's copy where it has one */
static void *at_unit(const struct lmt_gpt *g, int which, const char *name, int l)
{
	const struct lmt_tensor *t = lmt_gpt_tensor(g, name);
	size_t at = dev_at(t, l), es = which == 2 ? dsz(g) : sizeof(float);
	char *whole = which == 0 ? (char *)g->params : which == 1 ? (char *)g->grads : (char *)g->wparams;
	if (g->unit) {
		int u = t->layered ? l + 1 : t->dev < lmt_gpt_tensor(g, "ln1w")->dev ? 0 : g->cfg.L + 1;
		const struct lmt_gpt_unit *un = &g->unit[u];
		char *mine = which == 0 ? (char *)un->p : which == 1 ? (char *)un->g : (char *)un->w;
		if (mine) {
			size_t off;
			lmt_gpt_unit_range(g, u, &off);
			return mine + (at - off) * es;
		}
	}
	return whole + at * es;
}

static void fetch(struct lmt_gpt *g, int u, int phase)
{
	if (g->fetch)
		g->fetch(g->fetch_ctx, u, phase);
}

float *lmt_gpt_piece(const struct lmt_gpt *g, float *buf, const char *name, int l)
{
	return buf + dev_at(lmt_gpt_tensor(g, name), l);
}

static void move(const struct lmt_gpt *g, float *host, float *dev, int to_host)
{
	struct lmt_backend *be = g->be;
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		int pieces = t->layered ? g->cfg.L : 1;
		size_t n = t->layered ? t->lnumel : t->numel;
		for (int l = 0; l < pieces; l++) {
			float *h = host + t->offset + (size_t)l * n, *d = dev + dev_at(t, l);
			if (to_host)
				be->to_host(be, h, d, n * sizeof *h);
			else
				be->to_device(be, d, h, n * sizeof *h);
		}
	}
}

void lmt_gpt_gather(const struct lmt_gpt *g, float *host, const float *dev)
{
	move(g, host, (float *)dev, 1);
}

void lmt_gpt_scatter(const struct lmt_gpt *g, float *dev, const float *host)
{
	move(g, (float *)host, dev, 0);
}

size_t lmt_gpt_layer_range(const struct lmt_gpt *g, int l, size_t *offset)
{
	const struct lmt_tensor *t = lmt_gpt_tensor(g, "ln1w"); /* the first of a layer's tensors */
	*offset = t->dev + (size_t)l * t->lstride;
	return t->lstride;
}

size_t lmt_gpt_unit_range(const struct lmt_gpt *g, int u, size_t *offset)
{
	size_t first, n = lmt_gpt_layer_range(g, 0, &first), end = first + n * (size_t)g->cfg.L;
	if (u == 0) {
		*offset = 0;
		return first;
	}
	if (u == g->cfg.L + 1) {
		*offset = end;
		return g->nparams - end;
	}
	return lmt_gpt_layer_range(g, u - 1, offset);
}

/* The device layout: the unlayered tensors before the first layered one, the layers,
 * then the rest, each in table order. */
static void place(struct lmt_gpt *g)
{
	size_t pos = 0, stride = 0;
	int first = -1;
	for (int i = 0; i < g->nt; i++)
		if (g->t[i].layered) {
			g->t[i].lnumel = g->t[i].numel / (size_t)g->cfg.L;
			stride += g->t[i].lnumel;
			if (first < 0)
				first = i;
		}
	for (int i = 0; i < g->nt; i++) {
		struct lmt_tensor *t = &g->t[i];
		if (i == first) { /* the layer region */
			size_t in = 0;
			for (int k = 0; k < g->nt; k++)
				if (g->t[k].layered) {
					g->t[k].dev = pos + in;
					g->t[k].lstride = stride;
					in += g->t[k].lnumel;
				}
			pos += stride * (size_t)g->cfg.L;
		}
		if (!t->layered) {
			t->dev = pos;
			t->lstride = 0;
			t->lnumel = t->numel;
			pos += t->numel;
		}
	}
}

static size_t dsz(const struct lmt_gpt *g)
{
	return lmt_dtype_size(g->dtype);
}

const void *lmt_gpt_wparam(const struct lmt_gpt *g, const char *name)
{
	return W(g, name, 0);
}

int lmt_gpt_layout(struct lmt_gpt *g, const struct lmt_gpt_config *cfg, struct lmt_err *err)
{
	memset(g, 0, sizeof *g);
	g->cfg = *cfg;
	int L = cfg->L, C = cfg->C, Vp = cfg->Vp;
	if (cfg->NH <= 0 || C <= 0 || C % cfg->NH || L <= 0 || cfg->max_T <= 0 || cfg->V <= 0 || Vp < cfg->V)
		return lmt_err_set(err, LMT_EINVAL,
			"model shape: %d layers, %d heads, %d channels, context %d, vocabulary %d (padded %d): "
			"channels must be a positive multiple of heads", L, cfg->NH, C, cfg->max_T, cfg->V, Vp);
	add_tensor(g, "wte", LMT_PARAM_EMBEDDING, 2, Vp, C, 0);
	add_tensor(g, "wpe", LMT_PARAM_EMBEDDING, 2, cfg->max_T, C, 0);
	add_tensor(g, "ln1w", LMT_PARAM_NORM, 2, L, C, 0);
	add_tensor(g, "ln1b", LMT_PARAM_NORM, 2, L, C, 0);
	add_tensor(g, "qkvw", LMT_PARAM_MATRIX, 3, L, 3 * C, C);
	add_tensor(g, "qkvb", LMT_PARAM_BIAS, 2, L, 3 * C, 0);
	add_tensor(g, "attprojw", LMT_PARAM_MATRIX, 3, L, C, C);
	add_tensor(g, "attprojb", LMT_PARAM_BIAS, 2, L, C, 0);
	add_tensor(g, "ln2w", LMT_PARAM_NORM, 2, L, C, 0);
	add_tensor(g, "ln2b", LMT_PARAM_NORM, 2, L, C, 0);
	add_tensor(g, "fcw", LMT_PARAM_MATRIX, 3, L, 4 * C, C);
	add_tensor(g, "fcb", LMT_PARAM_BIAS, 2, L, 4 * C, 0);
	add_tensor(g, "fcprojw", LMT_PARAM_MATRIX, 3, L, C, 4 * C);
	add_tensor(g, "fcprojb", LMT_PARAM_BIAS, 2, L, C, 0);
	add_tensor(g, "lnfw", LMT_PARAM_NORM, 1, C, 0, 0);
	add_tensor(g, "lnfb", LMT_PARAM_NORM, 1, C, 0, 0);
	if (cfg->untied)
		add_tensor(g, "lm_head", LMT_PARAM_MATRIX, 2, Vp, C, 0);
	place(g);
	return 0;
}

int lmt_gpt_init(struct lmt_gpt *g, const struct lmt_gpt_config *cfg, struct lmt_backend *be, struct lmt_err *err)
{
	int rc = lmt_gpt_layout(g, cfg, err);
	if (rc)
		return rc;
	g->be = be;
	g->params = be->alloc(be, g->nparams * sizeof(float));
	g->grads = be->alloc(be, g->nparams * sizeof(float));
	if (!g->params || !g->grads) {
		lmt_gpt_release(g);
		return lmt_err_set(err, LMT_ENOMEM, "cannot allocate %zu parameters and their gradients (%.1f MB)",
				   g->nparams, 2.0 * g->nparams * 4 / 1e6);
	}
	g->dtype = LMT_DTYPE_F32;
	g->wparams = g->params;
	return 0;
}

int lmt_gpt_pad(struct lmt_gpt *g, size_t total, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	if (total <= g->nparams || total <= g->padded)
		return 0;
	size_t ds = lmt_dtype_size(g->dtype), n = g->nparams;
	float *p = be->alloc(be, total * sizeof(float)), *gr = be->alloc(be, total * sizeof(float));
	void *w = g->wparams != g->params ? be->alloc(be, total * ds) : NULL;
	if (!p || !gr || (g->wparams != g->params && !w)) {
		be->free(be, p);
		be->free(be, gr);
		be->free(be, w);
		return lmt_err_set(err, LMT_ENOMEM, "cannot pad %zu parameters to %zu", n, total);
	}
	be->copy(be, p, g->params, n * sizeof(float));
	be->copy(be, gr, g->grads, n * sizeof(float));
	if (w) {
		be->copy(be, w, g->wparams, n * ds);
		be->free(be, g->wparams);
	}
	be->free(be, g->params);
	be->free(be, g->grads);
	g->params = p;
	g->grads = gr;
	g->wparams = w ? w : p;
	g->padded = total;
	return 0;
}

int lmt_gpt_set_precision(struct lmt_gpt *g, int dtype, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	if (dtype != LMT_DTYPE_F32 && dtype != LMT_DTYPE_BF16 && dtype != LMT_DTYPE_F16)
		return lmt_err_set(err, LMT_EINVAL, "precision '%s': the model computes in fp32, bf16 or fp16",
				   lmt_dtype_name(dtype));
	if (g->wparams != g->params)
		be->free(be, g->wparams);
	g->wparams = g->params;
	g->dtype = dtype;
	if (dtype != LMT_DTYPE_F32) {
		g->wparams = be->alloc(be, LMT_MAX(g->nparams, g->padded) * lmt_dtype_size(dtype));
		if (!g->wparams) {
			g->wparams = g->params;
			g->dtype = LMT_DTYPE_F32;
			return lmt_err_set(err, LMT_ENOMEM, "cannot allocate the %s copy of %zu weights", lmt_dtype_name(dtype),
					   g->nparams);
		}
	}
	lmt_gpt_sync_weights(g);
	return 0;
}

void lmt_gpt_sync_weights(struct lmt_gpt *g)
{
	if (g->wparams != g->params)
		g->be->cast(g->be, g->wparams, g->dtype, g->params, LMT_DTYPE_F32, g->nparams, 0, 0);
}

int lmt_gpt_set_recompute(struct lmt_gpt *g, int every, struct lmt_err *err)
{
	if (every < 0)
		return lmt_err_set(err, LMT_EINVAL, "recompute every %d blocks: K must be 0 (none) or more", every);
	g->recompute = every ? LMT_RECOMPUTE_EVERY : LMT_RECOMPUTE_NONE;
	g->recompute_every = every;
	return 0;
}

int lmt_gpt_recomputed(const struct lmt_gpt *g, int l)
{
	return g->recompute == LMT_RECOMPUTE_EVERY && l % g->recompute_every == 0;
}

void lmt_gpt_release(struct lmt_gpt *g)
{
	struct lmt_backend *be = g->be;
	if (be) {
		if (g->wparams != g->params)
			be->free(be, g->wparams);
		be->free(be, g->params);
		be->free(be, g->grads);
		free(g->a.slot);
		be->free(be, g->m);
		be->free(be, g->v);
		be->free(be, g->acts_mem);
		be->free(be, g->tok);
		be->free(be, g->tgt);
		be->free(be, g->seg);
	}
	memset(g, 0, sizeof *g);
}

int lmt_gpt_alloc_optimizer(struct lmt_gpt *g, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	if (g->m)
		return 0;
	g->m = be->alloc(be, g->nparams * sizeof(float));
	g->v = be->alloc(be, g->nparams * sizeof(float));
	if (!g->m || !g->v)
		return lmt_err_set(err, LMT_ENOMEM, "cannot allocate the AdamW moments (%.1f MB)", 2.0 * g->nparams * 4 / 1e6);
	return 0;
}

/* Box-Muller on the project's xoshiro256** stream: the same numbers everywhere. */
static double gauss(struct lmt_rng *r)
{
	double u1 = ((lmt_rng_next(r) >> 11) + 1) * 0x1.0p-53, u2 = (lmt_rng_next(r) >> 11) * 0x1.0p-53;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int lmt_gpt_init_weights(struct lmt_gpt *g, uint64_t seed, struct lmt_err *err)
{
	float *h = calloc(g->nparams, sizeof *h);
	if (!h)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory initialising %zu parameters", g->nparams);
	double proj = 0.02 / sqrt(2.0 * g->cfg.L);
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		struct lmt_rng r;
		lmt_rng_seed(&r, seed, (uint64_t)i + 1); /* one stream per tensor */
		float *p = h + t->offset;
		if (t->kind == LMT_PARAM_NORM) {
			int gain = t->name[strlen(t->name) - 1] == 'w';
			for (size_t k = 0; k < t->numel; k++)
				p[k] = gain ? 1.0f : 0.0f;
		} else if (t->kind == LMT_PARAM_BIAS) {
			continue;
		} else {
			double sd = !strcmp(t->name, "attprojw") || !strcmp(t->name, "fcprojw") ? proj : 0.02;
			for (size_t k = 0; k < t->numel; k++)
				p[k] = (float)(sd * gauss(&r));
		}
	}
	/* the padding rows of the vocabulary stay zero */
	size_t C = (size_t)g->cfg.C;
	memset(h + lmt_gpt_tensor(g, "wte")->offset + (size_t)g->cfg.V * C, 0,
	       (size_t)(g->cfg.Vp - g->cfg.V) * C * sizeof *h);
	if (g->cfg.untied)
		memset(h + lmt_gpt_tensor(g, "lm_head")->offset + (size_t)g->cfg.V * C, 0,
		       (size_t)(g->cfg.Vp - g->cfg.V) * C * sizeof *h);
	lmt_gpt_scatter(g, g->params, h);
	lmt_gpt_sync_weights(g);
	free(h);
	return 0;
}

/* A region of the activations: n elements of dtype dt, 64-byte aligned. */
struct part {
	void **p;
	size_t n;
	int dt;
};

static size_t carve(struct part *parts, int np, char *base, size_t by_dtype[LMT_DTYPE_COUNT])
{
	size_t off = 0;
	for (int i = 0; i < np; i++) {
		size_t b = parts[i].n * lmt_dtype_size(parts[i].dt);
		if (base)
			*parts[i].p = base + off;
		if (by_dtype)
			by_dtype[parts[i].dt] += b;
		off += (b + 63) & ~(size_t)63;
	}
	return off;
}

/* the parts of one slot for `rows` positions */
static int slot_parts(const struct lmt_gpt *g, struct lmt_gpt_slot *s, size_t rows, struct part *pt)
{
	size_t C = (size_t)g->cfg.C, NH = (size_t)g->cfg.NH;
	int dt = g->dtype, n = 0;
	pt[n++] = (struct part){ &s->ln1, rows * C, dt };
	pt[n++] = (struct part){ (void **)&s->ln1_mean, rows, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ (void **)&s->ln1_rstd, rows, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ (void **)&s->qkv, rows * 3 * C, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ (void **)&s->atty, rows * C, LMT_DTYPE_F32 };
	if (dt != LMT_DTYPE_F32)
		pt[n++] = (struct part){ &s->atty_lp, rows * C, dt };
	pt[n++] = (struct part){ (void **)&s->att_lse, rows * NH, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ (void **)&s->residual2, rows * C, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ &s->ln2, rows * C, dt };
	pt[n++] = (struct part){ (void **)&s->ln2_mean, rows, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ (void **)&s->ln2_rstd, rows, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ (void **)&s->fch, rows * 4 * C, LMT_DTYPE_F32 };
	pt[n++] = (struct part){ &s->fchg, rows * 4 * C, dt };
	return n;
}

static void slot_fix(const struct lmt_gpt *g, struct lmt_gpt_slot *s)
{
	if (g->dtype == LMT_DTYPE_F32)
		s->atty_lp = s->atty;
}

int lmt_gpt_slot_alloc(struct lmt_gpt *g, struct lmt_gpt_slot *s, size_t rows, void **mem, size_t *bytes,
		       struct lmt_err *err)
{
	struct part pt[16];
	int n = slot_parts(g, s, rows, pt);
	size_t total = carve(pt, n, NULL, NULL);
	*mem = g->be->alloc(g->be, total);
	if (!*mem)
		return lmt_err_set(err, LMT_ENOMEM, "cannot allocate one block's activations for %zu positions (%.1f MB)",
				   rows, total / 1e6);
	carve(pt, n, *mem, NULL);
	slot_fix(g, s);
	if (bytes)
		*bytes = total;
	return 0;
}

/*
 * The activation parts for N positions in the order they are carved, group by
 * group (enum lmt_gpt_act_group; mark[k] is group k's first part): the one list
 * that both sizes the activations (lmt_gpt_act_size, memledger's prediction) and
 * lays them out (lmt_gpt_alloc_acts), so the two cannot disagree. slots: the
 * per-layer slots to point into (NULL: every kept layer's parts point into a->rc,
 * for sizing only). pt must have room for act_parts_max(g) parts.
 */
static size_t act_parts_max(const struct lmt_gpt *g)
{
	return ((size_t)g->cfg.L + 1) * 16 + 32;
}

static int act_parts(const struct lmt_gpt *g, struct lmt_gpt_acts *a, struct lmt_gpt_slot *slots, size_t N,
		     struct part *pt, int mark[LMT_ACT_GROUPS + 1])
{
	int L = g->cfg.L, dt = g->dtype, np = 0, any_rc = 0;
	size_t C = (size_t)g->cfg.C, Vp = (size_t)g->cfg.Vp;
	mark[LMT_ACT_INPUTS] = np;
	pt[np++] = (struct part){ (void **)&a->encoded, N * C, LMT_DTYPE_F32 };
	pt[np++] = (struct part){ (void **)&a->residual3, (size_t)L * N * C, LMT_DTYPE_F32 };
	mark[LMT_ACT_BLOCKS] = np;
	for (int l = 0; l < L; l++) {
		if (lmt_gpt_recomputed(g, l))
			any_rc = 1;
		else
			np += slot_parts(g, slots ? &slots[l] : &a->rc, N, pt + np);
	}
	mark[LMT_ACT_RECOMPUTE] = np;
	if (any_rc)
		np += slot_parts(g, &a->rc, N, pt + np);
	mark[LMT_ACT_HEAD] = np;
	pt[np++] = (struct part){ &a->lnf, N * C, dt };
	pt[np++] = (struct part){ (void **)&a->lnf_mean, N, LMT_DTYPE_F32 };
	pt[np++] = (struct part){ (void **)&a->lnf_rstd, N, LMT_DTYPE_F32 };
	mark[LMT_ACT_LOGITS] = np;
	pt[np++] = (struct part){ (void **)&a->logits, N * Vp, LMT_DTYPE_F32 };
	pt[np++] = (struct part){ (void **)&a->losses, N, LMT_DTYPE_F32 };
	mark[LMT_ACT_SCRATCH] = np;
	pt[np++] = (struct part){ (void **)&a->dres, N * C, LMT_DTYPE_F32 };
	pt[np++] = (struct part){ (void **)&a->dbig, N * 4 * C, LMT_DTYPE_F32 };
	pt[np++] = (struct part){ (void **)&a->dsmall, N * C, LMT_DTYPE_F32 };
	pt[np++] = (struct part){ (void **)&a->dqkv, N * 3 * C, LMT_DTYPE_F32 };
	if (dt != LMT_DTYPE_F32)
		pt[np++] = (struct part){ &a->dlp, N * LMT_MAX(4 * C, Vp), dt };
	mark[LMT_ACT_SCALARS] = np;
	pt[np++] = (struct part){ (void **)&a->scalars, LMT_GPT_SCALARS * 2, LMT_DTYPE_F64 };
	mark[LMT_ACT_GROUPS] = np;
	return np;
}

/* The bytes of the parts, by dtype, by group and in all, as carve lays them out. */
static void act_sum(const struct lmt_gpt *g, struct part *pt, const int mark[LMT_ACT_GROUPS + 1], size_t N,
		    struct lmt_gpt_act_bytes *b)
{
	struct part one[16];
	struct lmt_gpt_slot s;
	memset(b, 0, sizeof *b);
	for (int k = 0; k < LMT_ACT_GROUPS; k++) {
		b->group[k] = carve(pt + mark[k], mark[k + 1] - mark[k], NULL, b->by_dtype);
		b->total += b->group[k];
	}
	b->slot = carve(one, slot_parts(g, &s, N, one), NULL, NULL);
	for (int l = 0; l < g->cfg.L; l++)
		b->kept += !lmt_gpt_recomputed(g, l);
}

int lmt_gpt_act_size(const struct lmt_gpt *g, int B, int T, struct lmt_gpt_act_bytes *b, struct lmt_err *err)
{
	if (B <= 0 || T <= 0 || T > g->cfg.max_T)
		return lmt_err_set(err, LMT_EINVAL, "a micro-batch of %d x %d positions (context %d)", B, T,
				   g->cfg.max_T);
	struct lmt_gpt_acts a; /* only its fields' addresses are taken */
	int mark[LMT_ACT_GROUPS + 1];
	struct part *pt = malloc(act_parts_max(g) * sizeof *pt);
	if (!pt)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	size_t N = (size_t)B * T;
	act_parts(g, &a, NULL, N, pt, mark);
	act_sum(g, pt, mark, N, b);
	free(pt);
	return 0;
}

int lmt_gpt_alloc_acts(struct lmt_gpt *g, int B, int T, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	if (T > g->cfg.max_T)
		return lmt_err_set(err, LMT_EINVAL, "sequence length %d is above the model's context of %d", T,
				   g->cfg.max_T);
	if (g->acts_mem && g->B == B && g->T == T)
		return 0;
	be->free(be, g->acts_mem);
	be->free(be, g->tok);
	be->free(be, g->tgt);
	be->free(be, g->seg);
	g->acts_mem = NULL;
	free(g->a.slot);
	int L = g->cfg.L, dt = g->dtype, mark[LMT_ACT_GROUPS + 1];
	size_t N = (size_t)B * T;
	struct lmt_gpt_acts *a = &g->a;
	a->slot = calloc((size_t)L, sizeof *a->slot);
	struct part *pt = malloc(act_parts_max(g) * sizeof *pt);
	if (!a->slot || !pt) {
		free(pt);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	int np = act_parts(g, a, a->slot, N, pt, mark);
	act_sum(g, pt, mark, N, &g->act_bytes);
	size_t total = g->act_bytes.total;
	g->acts_mem = be->alloc(be, total);
	g->tok = be->alloc(be, N * sizeof(int32_t));
	g->tgt = be->alloc(be, N * sizeof(int32_t));
	g->seg = be->alloc(be, N * sizeof(int32_t));
	if (!g->acts_mem || !g->tok || !g->tgt || !g->seg) {
		free(pt);
		return lmt_err_set(err, LMT_ENOMEM, "cannot allocate activations for %d x %d tokens (%.1f MB)", B, T,
				   total / 1e6);
	}
	carve(pt, np, g->acts_mem, NULL);
	free(pt);
	for (int l = 0; l < L; l++) {
		if (lmt_gpt_recomputed(g, l))
			a->slot[l] = a->rc;
		slot_fix(g, &a->slot[l]);
	}
	if (dt == LMT_DTYPE_F32)
		a->dlp = NULL;
	g->nacts = total;
	g->B = B;
	g->T = T;
	g->acts_N = N;
	return 0;
}

int lmt_gpt_reshape_acts(struct lmt_gpt *g, int B, int T, struct lmt_err *err)
{
	if (B <= 0 || T <= 0 || T > g->cfg.max_T || (size_t)B * (size_t)T > g->acts_N)
		return lmt_err_set(err, LMT_EINVAL, "a batch of %d x %d positions does not fit activations for %zu "
				   "positions (context %d)", B, T, g->acts_N, g->cfg.max_T);
	g->B = B;
	g->T = T;
	return 0;
}

/* y (N, OC) = x (N, IC) W^T + b (fp32 out), with beta = 1 adding onto what y holds;
 * x and w in the compute dtype */
static void linear(struct lmt_gpt *g, float *y, const void *x, const void *w, const float *b, int N, int IC, int OC,
		   float beta)
{
	struct lmt_gemm m = { .ta = 0, .tb = 1, .M = N, .N = OC, .K = IC, .alpha = 1.0f, .beta = beta, .A = x,
			      .lda = IC, .B = w, .ldb = IC, .C = y, .ldc = OC, .batch = 1, .ab_dtype = g->dtype,
			      .c_dtype = LMT_DTYPE_F32, .bias = b };
	g->be->gemm(g->be, &m);
}

/* dy as the GEMMs read it: itself in fp32, else cast into the dlp scratch */
static const void *lowp(struct lmt_gpt *g, const float *dy, size_t n)
{
	if (g->dtype == LMT_DTYPE_F32)
		return dy;
	g->be->cast(g->be, g->a.dlp, g->dtype, dy, LMT_DTYPE_F32, n, 0, 0);
	return g->a.dlp;
}

/* given dy (N, OC): dw += dy^T x, db += sum dy, dx = dy W (x, w in the compute dtype) */
static void linear_bwd(struct lmt_gpt *g, float *dx, float *dw, float *db, const float *dy, const void *x,
		       const void *w, int N, int IC, int OC)
{
	struct lmt_backend *be = g->be;
	const void *d = lowp(g, dy, (size_t)N * OC);
	struct lmt_gemm m = { .ta = 1, .tb = 0, .M = OC, .N = IC, .K = N, .alpha = 1.0f, .beta = 1.0f, .A = d,
			      .lda = OC, .B = x, .ldb = IC, .C = dw, .ldc = IC, .batch = 1, .ab_dtype = g->dtype,
			      .c_dtype = LMT_DTYPE_F32 };
	be->gemm(be, &m);
	if (db)
		be->bias_grad(be, db, dy, N, OC);
	if (dx) {
		struct lmt_gemm x2 = { .ta = 0, .tb = 0, .M = N, .N = IC, .K = OC, .alpha = 1.0f, .beta = 0.0f, .A = d,
				       .lda = OC, .B = w, .ldb = IC, .C = dx, .ldc = IC, .batch = 1, .ab_dtype = g->dtype,
				       .c_dtype = LMT_DTYPE_F32 };
		be->gemm(be, &x2);
	}
}

void lmt_gpt_block_fwd(struct lmt_gpt *g, int l, const struct lmt_gpt_slot *s, float *qkv, const float *x_in,
		       float *x_out, const int32_t *seg, int B, int T, int q0)
{
	struct lmt_backend *be = g->be;
	const struct lmt_gpt_config *c = &g->cfg;
	int C = c->C, NH = c->NH, HS = C / NH, dt = g->dtype, TQ = T - q0, N = B * TQ;
	size_t NC = (size_t)N * C;
	be->layernorm_fwd(be, s->ln1, dt, s->ln1_mean, s->ln1_rstd, x_in, P(g, "ln1w", l), P(g, "ln1b", l),
			  N, C);
	/* the new rows of qkv: with q0 > 0 (B = 1) they follow the cached ones */
	linear(g, qkv + (size_t)q0 * 3 * C, s->ln1, W(g, "qkvw", l), P(g, "qkvb", l), N,
	       C, 3 * C, 0);
	be->attention_fwd(be, s->atty, s->att_lse, qkv, seg, B, T, NH, HS, q0);
	if (dt != LMT_DTYPE_F32)
		be->cast(be, s->atty_lp, dt, s->atty, LMT_DTYPE_F32, NC, 0, 0);
	be->copy(be, s->residual2, x_in, NC * sizeof(float)); /* the stream, which the projection adds onto */
	linear(g, s->residual2, s->atty_lp, W(g, "attprojw", l), P(g, "attprojb", l), N, C, C, 1);
	be->layernorm_fwd(be, s->ln2, dt, s->ln2_mean, s->ln2_rstd, s->residual2, P(g, "ln2w", l),
			  P(g, "ln2b", l), N, C);
	linear(g, s->fch, s->ln2, W(g, "fcw", l), P(g, "fcb", l), N, C, 4 * C, 0);
	be->gelu_fwd(be, s->fchg, dt, s->fch, 4 * NC);
	if (x_out) {
		be->copy(be, x_out, s->residual2, NC * sizeof(float));
		linear(g, x_out, s->fchg, W(g, "fcprojw", l), P(g, "fcprojb", l), N, 4 * C, C,
		       1);
	}
}

static const float *block_in(const struct lmt_gpt *g, int l)
{
	size_t NC = (size_t)g->B * g->T * g->cfg.C;
	return l ? g->a.residual3 + (l - 1) * NC : g->a.encoded;
}

static void forward_to_logits(struct lmt_gpt *g, int use_seg)
{
	struct lmt_backend *be = g->be;
	const struct lmt_gpt_config *c = &g->cfg;
	int B = g->B, T = g->T, N = B * T, C = c->C, L = c->L;
	size_t NC = (size_t)N * C;
	struct lmt_gpt_acts *a = &g->a;
	fetch(g, 0, LMT_GPT_FETCH_FORWARD);
	fetch(g, L + 1, LMT_GPT_FETCH_FORWARD);
	be->embed_fwd(be, a->encoded, g->tok, P(g, "wte", 0), P(g, "wpe", 0), B, T, C);
	for (int l = 0; l < L; l++) {
		fetch(g, l + 1, LMT_GPT_FETCH_FORWARD);
		lmt_gpt_block_fwd(g, l, &a->slot[l], a->slot[l].qkv, block_in(g, l), a->residual3 + l * NC,
				  use_seg ? g->seg : NULL, B, T, 0);
	}
	lmt_gpt_head_fwd(g, a->logits, a->residual3 + (L - 1) * NC, a->lnf, a->lnf_mean, a->lnf_rstd, N);
}

void lmt_gpt_head_fwd(struct lmt_gpt *g, float *logits, const float *x, void *lnf, float *mean, float *rstd, int N)
{
	const struct lmt_gpt_config *c = &g->cfg;
	g->be->layernorm_fwd(g->be, lnf, g->dtype, mean, rstd, x, P(g, "lnfw", 0), P(g, "lnfb", 0), N, c->C);
	linear(g, logits, lnf, c->untied ? W(g, "lm_head", 0) : W(g, "wte", 0), NULL, N, c->C, c->Vp, 0);
}

void lmt_gpt_forward(struct lmt_gpt *g, int use_seg, float dscale, double *loss_acc)
{
	forward_to_logits(g, use_seg);
	g->be->xent_fwd_bwd(g->be, g->a.losses, loss_acc, g->a.logits, g->tgt, g->B * g->T, g->cfg.V, g->cfg.Vp,
			    dscale);
}

void lmt_gpt_logits(struct lmt_gpt *g, int use_seg)
{
	forward_to_logits(g, use_seg);
}

int lmt_gpt_eval(struct lmt_gpt *g, int use_seg, double *loss_sum)
{
	struct lmt_backend *be = g->be;
	double zero = 0;
	be->to_device(be, g->a.scalars, &zero, sizeof zero);
	lmt_gpt_forward(g, use_seg, 0.0f, g->a.scalars);
	be->to_host(be, loss_sum, g->a.scalars, sizeof *loss_sum);
	return 0;
}

void lmt_gpt_backward(struct lmt_gpt *g, int use_seg)
{
	struct lmt_backend *be = g->be;
	const struct lmt_gpt_config *c = &g->cfg;
	int B = g->B, T = g->T, N = B * T, C = c->C, L = c->L, NH = c->NH, HS = C / NH;
	size_t NC = (size_t)N * C;
	struct lmt_gpt_acts *a = &g->a;
	const int32_t *seg = use_seg ? g->seg : NULL;
	/* the logits hold d(loss)/d(logits) after xent_fwd_bwd */
	const void *head = c->untied ? W(g, "lm_head", 0) : W(g, "wte", 0);
	float *dhead = c->untied ? G(g, "lm_head", 0) : G(g, "wte", 0);
	linear_bwd(g, a->dsmall, dhead, NULL, a->logits, a->lnf, head, N, C, c->Vp);
	be->zero(be, a->dres, NC * sizeof(float));
	be->layernorm_bwd(be, a->dres, G(g, "lnfw", 0), G(g, "lnfb", 0), a->dsmall, a->residual3 + (L - 1) * NC,
			  P(g, "lnfw", 0), a->lnf_mean, a->lnf_rstd, N, C);
	for (int l = L - 1; l >= 0; l--) {
		const float *res = block_in(g, l);
		const struct lmt_gpt_slot *s = &a->slot[l];
		fetch(g, l + 1, LMT_GPT_FETCH_BACKWARD);
		if (lmt_gpt_recomputed(g, l))
			lmt_gpt_block_fwd(g, l, s, s->qkv, res, NULL, seg, B, T, 0);
		/* MLP: r3 = r2 + fcproj(gelu(fc(ln2(r2)))) */
		linear_bwd(g, a->dbig, G(g, "fcprojw", l), G(g, "fcprojb", l), a->dres, s->fchg,
			   W(g, "fcprojw", l), N, 4 * C, C);
		be->gelu_bwd(be, a->dbig, s->fch, a->dbig, 4 * NC);
		linear_bwd(g, a->dsmall, G(g, "fcw", l), G(g, "fcb", l), a->dbig, s->ln2,
			   W(g, "fcw", l), N, C, 4 * C);
		be->layernorm_bwd(be, a->dres, G(g, "ln2w", l), G(g, "ln2b", l), a->dsmall, s->residual2,
				  P(g, "ln2w", l), s->ln2_mean, s->ln2_rstd, N, C);
		/* attention: r2 = res + attproj(attention(qkv(ln1(res)))) */
		linear_bwd(g, a->dsmall, G(g, "attprojw", l), G(g, "attprojb", l), a->dres,
			   s->atty_lp, W(g, "attprojw", l), N, C, C);
		be->attention_bwd(be, a->dqkv, a->dsmall, s->qkv, s->atty, s->att_lse, seg, B, T, NH, HS);
		linear_bwd(g, a->dsmall, G(g, "qkvw", l), G(g, "qkvb", l), a->dqkv, s->ln1,
			   W(g, "qkvw", l), N, C, 3 * C);
		be->layernorm_bwd(be, a->dres, G(g, "ln1w", l), G(g, "ln1b", l), a->dsmall, res,
				  P(g, "ln1w", l), s->ln1_mean, s->ln1_rstd, N, C);
		if (g->grads_ready) { /* this layer's range is final: a bucket can go */
			size_t off, n = lmt_gpt_layer_range(g, l, &off);
			g->grads_ready(g->grads_ready_ctx, l, off, n);
		}
	}
	be->embed_bwd(be, G(g, "wte", 0), G(g, "wpe", 0), a->dres, g->tok, B, T, C);
}

void lmt_gpt_count(const struct lmt_gpt *g, struct lmt_gpt_counts *c)
{
	memset(c, 0, sizeof *c);
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		size_t n = t->numel;
		if (!strcmp(t->name, "wte") || !strcmp(t->name, "lm_head")) {
			size_t pad = (size_t)(g->cfg.Vp - g->cfg.V) * g->cfg.C;
			c->padding += pad;
		}
		switch (t->kind) {
		case LMT_PARAM_EMBEDDING: c->embedding += n; break;
		case LMT_PARAM_MATRIX: c->matrix += n; break;
		case LMT_PARAM_BIAS: c->bias += n; break;
		default: c->norm += n;
		}
	}
	c->total = g->nparams;
}

double lmt_gpt_flops_per_token(const struct lmt_gpt_config *c, int T)
{
	double C = c->C, L = c->L;
	double nm = L * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + (double)c->Vp * C;
	return 6.0 * nm + 12.0 * L * C * T;
}

/* ---- llm.c's model file ---- */

#define LLMC_MAGIC 20240326
#define LLMC_FP32 3

int lmt_gpt_load_llmc(struct lmt_gpt *g, const char *path, struct lmt_backend *be, struct lmt_err *err)
{
	char *data;
	size_t n;
	int rc = lmt_read_file(path, &data, &n, err);
	if (rc)
		return rc;
	int32_t h[256];
	if (n < sizeof h) {
		free(data);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %zu bytes, too short for llm.c's 1024-byte header", path, n);
	}
	memcpy(h, data, sizeof h);
	if (h[0] != LLMC_MAGIC) {
		free(data);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': magic %d, expected %d (an llm.c GPT-2 model file)", path, h[0],
				   LLMC_MAGIC);
	}
	if (h[1] != LLMC_FP32) {
		free(data);
		return lmt_err_set(err, LMT_EVERSION, "'%s': llm.c model version %d, this build reads %d (fp32)", path,
				   h[1], LLMC_FP32);
	}
	/* llm.c writes zeros after the eight words it defines: anything else is a file
	 * of some other version or a damaged one (the weights carry no checksum, so the
	 * header is all there is to check) */
	for (int i = 8; i < 256; i++)
		if (h[i] != 0) {
			free(data);
			return lmt_err_set(err, LMT_EFORMAT, "'%s': header word %d is %d, llm.c writes 0 there (reserved)",
					   path, i, h[i]);
		}
	struct lmt_gpt_config cfg = { h[2], h[3], h[7], h[4], h[5], h[6], 0 };
	if (cfg.Vp < cfg.V || cfg.max_T <= 0 || cfg.L <= 0 || cfg.C <= 0 || cfg.NH <= 0 || cfg.V <= 0) {
		free(data);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': header fields are inconsistent (maxT %d V %d Vp %d L %d NH %d C %d)",
				   path, cfg.max_T, cfg.V, cfg.Vp, cfg.L, cfg.NH, cfg.C);
	}
	/* the size the header implies, checked before allocating anything */
	double need = (double)cfg.Vp * cfg.C + (double)cfg.max_T * cfg.C + (double)cfg.L * (12.0 * cfg.C * cfg.C + 13.0 * cfg.C) +
		      2.0 * cfg.C;
	if (need * 4 + sizeof h != (double)n) {
		free(data);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %zu bytes, the header's model needs %.0f", path, n,
				   need * 4 + sizeof h);
	}
	if ((rc = lmt_gpt_init(g, &cfg, be, err))) {
		free(data);
		lmt_err_prefix(err, "'%s'", path);
		return rc;
	}
	if (n != sizeof h + g->nparams * 4) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': %zu bytes, the header's model needs %zu", path, n,
				 sizeof h + g->nparams * 4);
		free(data);
		lmt_gpt_release(g);
		return rc;
	}
	lmt_gpt_scatter(g, g->params, (const float *)(data + sizeof h));
	lmt_gpt_sync_weights(g);
	free(data);
	return 0;
}

int lmt_gpt_save_llmc(const struct lmt_gpt *g, const char *path, struct lmt_err *err)
{
	if (g->cfg.untied)
		return lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': llm.c's format has no untied output head", path);
	int32_t h[256] = { 0 };
	h[0] = LLMC_MAGIC;
	h[1] = LLMC_FP32;
	h[2] = g->cfg.max_T;
	h[3] = g->cfg.V;
	h[4] = g->cfg.L;
	h[5] = g->cfg.NH;
	h[6] = g->cfg.C;
	h[7] = g->cfg.Vp;
	size_t bytes = sizeof h + g->nparams * 4;
	char *buf = malloc(bytes);
	if (!buf)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	memcpy(buf, h, sizeof h);
	lmt_gpt_gather(g, (float *)(buf + sizeof h), g->params);
	int rc = lmt_write_file_atomic(path, buf, bytes, err);
	free(buf);
	return rc;
}
