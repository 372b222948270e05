/*
 * model.c: GPT-2's forward and backward passes as a sequence of backend calls.
 *
 * Activations for a (B, T) micro-batch, N = B*T, in one allocation:
 *	encoded (N, C); per layer l: ln1 (N, C), ln1_mean/ln1_rstd (N), qkv (N, 3C),
 *	atty (N, C), att_lse (B, NH, T), residual2 (N, C), ln2 (N, C), ln2_mean/rstd (N),
 *	fch (N, 4C), fch_gelu (N, 4C), residual3 (N, C); then lnf (N, C), lnf_mean/rstd
 *	(N), logits (N, Vp), losses (N); and backward scratch dres (N, C), dbig (N, 4C),
 *	dsmall (N, C), dqkv (N, 3C).
 * Residual adds are folded into the projection GEMMs (beta = 1 on a copy of the
 * stream), so no separate projection output is stored.
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

#define P(g, name) ((g)->params + lmt_gpt_tensor((g), name)->offset)
#define G(g, name) ((g)->grads + lmt_gpt_tensor((g), name)->offset)

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
	return 0;
}

void lmt_gpt_release(struct lmt_gpt *g)
{
	struct lmt_backend *be = g->be;
	if (be) {
		be->free(be, g->params);
		be->free(be, g->grads);
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
	g->be->to_device(g->be, g->params, h, g->nparams * sizeof *h);
	free(h);
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
	size_t N = (size_t)B * T, C = (size_t)g->cfg.C, L = (size_t)g->cfg.L, NH = (size_t)g->cfg.NH,
	       Vp = (size_t)g->cfg.Vp;
	struct { float **p; size_t n; } parts[] = {
		{ &g->a.encoded, N * C }, { &g->a.ln1, L * N * C }, { &g->a.ln1_mean, L * N },
		{ &g->a.ln1_rstd, L * N }, { &g->a.qkv, L * N * 3 * C }, { &g->a.atty, L * N * C },
		{ &g->a.att_lse, L * N * NH }, { &g->a.residual2, L * N * C }, { &g->a.ln2, L * N * C },
		{ &g->a.ln2_mean, L * N }, { &g->a.ln2_rstd, L * N }, { &g->a.fch, L * N * 4 * C },
		{ &g->a.fch_gelu, L * N * 4 * C }, { &g->a.residual3, L * N * C }, { &g->a.lnf, N * C },
		{ &g->a.lnf_mean, N }, { &g->a.lnf_rstd, N }, { &g->a.logits, N * Vp }, { &g->a.losses, N },
		{ &g->a.dres, N * C }, { &g->a.dbig, N * 4 * C }, { &g->a.dsmall, N * C }, { &g->a.dqkv, N * 3 * C },
	};
	size_t total = 0;
	for (size_t i = 0; i < LMT_ARRAY_SIZE(parts); i++)
		total += (parts[i].n + 15) & ~(size_t)15;
	g->acts_mem = be->alloc(be, total * sizeof(float));
	g->tok = be->alloc(be, N * sizeof(int32_t));
	g->tgt = be->alloc(be, N * sizeof(int32_t));
	g->seg = be->alloc(be, N * sizeof(int32_t));
	if (!g->acts_mem || !g->tok || !g->tgt || !g->seg)
		return lmt_err_set(err, LMT_ENOMEM, "cannot allocate activations for %d x %d tokens (%.1f MB)", B, T,
				   total * 4 / 1e6);
	float *p = g->acts_mem;
	for (size_t i = 0; i < LMT_ARRAY_SIZE(parts); i++) {
		*parts[i].p = p;
		p += (parts[i].n + 15) & ~(size_t)15;
	}
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

/* y (N, OC) = x (N, IC) W^T + b, with beta = 1 adding onto what y holds */
static void linear(struct lmt_backend *be, float *y, const float *x, const float *w, const float *b, int N, int IC,
		   int OC, float beta)
{
	be->gemm(be, 0, 1, N, OC, IC, 1.0f, x, IC, 0, w, IC, 0, beta, y, OC, 0, 1);
	if (b)
		be->bias_add(be, y, b, N, OC);
}

/* given dy (N, OC): dw += dy^T x, db += sum dy, dx = dy W */
static void linear_bwd(struct lmt_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
		       const float *w, int N, int IC, int OC)
{
	be->gemm(be, 1, 0, OC, IC, N, 1.0f, dy, OC, 0, x, IC, 0, 1.0f, dw, IC, 0, 1);
	if (db)
		be->bias_grad(be, db, dy, N, OC);
	if (dx)
		be->gemm(be, 0, 0, N, IC, OC, 1.0f, dy, OC, 0, w, IC, 0, 0.0f, dx, IC, 0, 1);
}

static void forward_to_logits(struct lmt_gpt *g, int use_seg)
{
	struct lmt_backend *be = g->be;
	const struct lmt_gpt_config *c = &g->cfg;
	int B = g->B, T = g->T, N = B * T, C = c->C, L = c->L, NH = c->NH, HS = C / NH;
	size_t NC = (size_t)N * C;
	struct lmt_gpt_acts *a = &g->a;
	be->embed_fwd(be, a->encoded, g->tok, P(g, "wte"), P(g, "wpe"), B, T, C);
	for (int l = 0; l < L; l++) {
		const float *res = l ? a->residual3 + (l - 1) * NC : a->encoded;
		float *ln1 = a->ln1 + l * NC, *qkv = a->qkv + l * 3 * NC, *atty = a->atty + l * NC;
		float *r2 = a->residual2 + l * NC, *ln2 = a->ln2 + l * NC, *r3 = a->residual3 + l * NC;
		float *fch = a->fch + l * 4 * NC, *fchg = a->fch_gelu + l * 4 * NC;
		be->layernorm_fwd(be, ln1, a->ln1_mean + l * N, a->ln1_rstd + l * N, res, P(g, "ln1w") + l * C,
				  P(g, "ln1b") + l * C, N, C);
		linear(be, qkv, ln1, P(g, "qkvw") + (size_t)l * 3 * C * C, P(g, "qkvb") + l * 3 * C, N, C, 3 * C, 0);
		be->attention_fwd(be, atty, a->att_lse + (size_t)l * N * NH, qkv, use_seg ? g->seg : NULL, B, T, NH, HS);
		be->copy(be, r2, res, NC * sizeof(float)); /* the stream, which the projection adds onto */
		linear(be, r2, atty, P(g, "attprojw") + (size_t)l * C * C, P(g, "attprojb") + l * C, N, C, C, 1);
		be->layernorm_fwd(be, ln2, a->ln2_mean + l * N, a->ln2_rstd + l * N, r2, P(g, "ln2w") + l * C,
				  P(g, "ln2b") + l * C, N, C);
		linear(be, fch, ln2, P(g, "fcw") + (size_t)l * 4 * C * C, P(g, "fcb") + l * 4 * C, N, C, 4 * C, 0);
		be->gelu_fwd(be, fchg, fch, 4 * NC);
		be->copy(be, r3, r2, NC * sizeof(float));
		linear(be, r3, fchg, P(g, "fcprojw") + (size_t)l * 4 * C * C, P(g, "fcprojb") + l * C, N, 4 * C, C, 1);
	}
	be->layernorm_fwd(be, a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (L - 1) * NC, P(g, "lnfw"),
			  P(g, "lnfb"), N, C);
	const float *head = c->untied ? P(g, "lm_head") : P(g, "wte");
	linear(be, a->logits, a->lnf, head, NULL, N, C, c->Vp, 0);
}

static double loss_sum_host(struct lmt_gpt *g)
{
	size_t N = (size_t)g->B * g->T;
	float *h = malloc(N * sizeof *h);
	if (!h)
		return NAN;
	g->be->to_host(g->be, h, g->a.losses, N * sizeof *h);
	double s = 0;
	for (size_t i = 0; i < N; i++)
		s += h[i];
	free(h);
	return s;
}

int lmt_gpt_forward(struct lmt_gpt *g, int use_seg, float dscale, double *loss_sum)
{
	forward_to_logits(g, use_seg);
	g->be->xent_fwd_bwd(g->be, g->a.losses, g->a.logits, g->tgt, g->B * g->T, g->cfg.V, g->cfg.Vp, dscale);
	*loss_sum = loss_sum_host(g);
	return 0;
}

void lmt_gpt_logits(struct lmt_gpt *g, int use_seg)
{
	forward_to_logits(g, use_seg);
}

int lmt_gpt_eval(struct lmt_gpt *g, int use_seg, double *loss_sum)
{
	return lmt_gpt_forward(g, use_seg, 0.0f, loss_sum);
}

void lmt_gpt_backward(struct lmt_gpt *g, int use_seg)
{
	struct lmt_backend *be = g->be;
	const struct lmt_gpt_config *c = &g->cfg;
	int B = g->B, T = g->T, N = B * T, C = c->C, L = c->L, NH = c->NH, HS = C / NH;
	size_t NC = (size_t)N * C;
	struct lmt_gpt_acts *a = &g->a;
	/* the logits hold d(loss)/d(logits) after xent_fwd_bwd */
	const float *head = c->untied ? P(g, "lm_head") : P(g, "wte");
	float *dhead = c->untied ? G(g, "lm_head") : G(g, "wte");
	linear_bwd(be, a->dsmall, dhead, NULL, a->logits, a->lnf, head, N, C, c->Vp);
	be->zero(be, a->dres, NC * sizeof(float));
	be->layernorm_bwd(be, a->dres, G(g, "lnfw"), G(g, "lnfb"), a->dsmall, a->residual3 + (L - 1) * NC,
			  P(g, "lnfw"), a->lnf_mean, a->lnf_rstd, N, C);
	for (int l = L - 1; l >= 0; l--) {
		const float *res = l ? a->residual3 + (l - 1) * NC : a->encoded;
		float *ln1 = a->ln1 + l * NC, *qkv = a->qkv + l * 3 * NC, *atty = a->atty + l * NC;
		float *r2 = a->residual2 + l * NC, *ln2 = a->ln2 + l * NC;
		float *fch = a->fch + l * 4 * NC, *fchg = a->fch_gelu + l * 4 * NC;
		/* MLP: r3 = r2 + fcproj(gelu(fc(ln2(r2)))) */
		linear_bwd(be, a->dbig, G(g, "fcprojw") + (size_t)l * 4 * C * C, G(g, "fcprojb") + l * C, a->dres, fchg,
			   P(g, "fcprojw") + (size_t)l * 4 * C * C, N, 4 * C, C);
		be->gelu_bwd(be, a->dbig, fch, a->dbig, 4 * NC);
		linear_bwd(be, a->dsmall, G(g, "fcw") + (size_t)l * 4 * C * C, G(g, "fcb") + l * 4 * C, a->dbig, ln2,
			   P(g, "fcw") + (size_t)l * 4 * C * C, N, C, 4 * C);
		be->layernorm_bwd(be, a->dres, G(g, "ln2w") + l * C, G(g, "ln2b") + l * C, a->dsmall, r2,
				  P(g, "ln2w") + l * C, a->ln2_mean + l * N, a->ln2_rstd + l * N, N, C);
		/* attention: r2 = res + attproj(attention(qkv(ln1(res)))) */
		linear_bwd(be, a->dsmall, G(g, "attprojw") + (size_t)l * C * C, G(g, "attprojb") + l * C, a->dres, atty,
			   P(g, "attprojw") + (size_t)l * C * C, N, C, C);
		be->attention_bwd(be, a->dqkv, a->dsmall, qkv, atty, a->att_lse + (size_t)l * N * NH,
				  use_seg ? g->seg : NULL, B, T, NH, HS);
		linear_bwd(be, a->dsmall, G(g, "qkvw") + (size_t)l * 3 * C * C, G(g, "qkvb") + l * 3 * C, a->dqkv, ln1,
			   P(g, "qkvw") + (size_t)l * 3 * C * C, N, C, 3 * C);
		be->layernorm_bwd(be, a->dres, G(g, "ln1w") + l * C, G(g, "ln1b") + l * C, a->dsmall, res,
				  P(g, "ln1w") + l * C, a->ln1_mean + l * N, a->ln1_rstd + l * N, N, C);
	}
	be->embed_bwd(be, G(g, "wte"), G(g, "wpe"), a->dres, g->tok, B, T, C);
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
	be->to_device(be, g->params, data + sizeof h, g->nparams * 4);
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
	g->be->to_host(g->be, buf + sizeof h, g->params, g->nparams * 4);
	int rc = lmt_write_file_atomic(path, buf, bytes, err);
	free(buf);
	return rc;
}
