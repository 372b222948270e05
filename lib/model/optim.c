/*
 * optim.c: AdamW over flat ranges of fp32 master weights, and the loss scaler
 * (optim.h).
 */
#include "model/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

int lmt_optim_init(struct lmt_optim *o, struct lmt_gpt *g, const struct lmt_adamw_cfg *cfg, size_t lo, size_t hi,
		   size_t cap, struct lmt_err *err)
{
	memset(o, 0, sizeof *o);
	o->g = g;
	o->cfg = *cfg;
	o->lo = lo;
	o->hi = hi ? hi : g->nparams;
	if (o->lo > o->hi || o->hi > g->nparams)
		return lmt_err_set(err, LMT_EINVAL, "optimizer shard [%zu, %zu) outside the %zu parameters", lo, hi,
				   g->nparams);
	if (o->lo == 0 && o->hi == g->nparams) { /* the whole model: the model's moments */
		int rc = lmt_gpt_alloc_optimizer(g, err);
		if (rc)
			return rc;
		o->m = g->m;
		o->v = g->v;
	} else { /* a shard (ZeRO-1): moments for [lo, hi) only */
		struct lmt_backend *be = g->be;
		size_t n = LMT_MAX(o->hi - o->lo, cap);
		o->m = be->alloc(be, (n ? n : 1) * sizeof(float));
		o->v = be->alloc(be, (n ? n : 1) * sizeof(float));
		o->own = 1;
		if (!o->m || !o->v) {
			lmt_optim_release(o);
			return lmt_err_set(err, LMT_ENOMEM, "cannot allocate the AdamW moments of %zu parameters", n);
		}
	}
	o->r = calloc((size_t)g->nt * (size_t)g->cfg.L, sizeof *o->r);
	if (!o->r)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		int decay = t->kind == LMT_PARAM_MATRIX || (cfg->decay_embeddings && t->kind == LMT_PARAM_EMBEDDING);
		for (int l = 0; l < (t->layered ? g->cfg.L : 1); l++) {
			size_t p0 = t->dev + (size_t)l * t->lstride, p1 = p0 + t->lnumel;
			size_t a = p0 > o->lo ? p0 : o->lo, b = p1 < o->hi ? p1 : o->hi;
			if (a < b)
				o->r[o->nr++] = (struct lmt_optim_range){ a, b - a, decay, t->name };
		}
	}
	return 0;
}

void lmt_optim_release(struct lmt_optim *o)
{
	if (o->own && o->g) {
		o->g->be->free(o->g->be, o->m);
		o->g->be->free(o->g->be, o->v);
	}
	free(o->r);
	memset(o, 0, sizeof *o);
}

void lmt_optim_step(struct lmt_optim *o, double lr, float gscale, double *nonfinite_acc)
{
	struct lmt_gpt *g = o->g;
	struct lmt_backend *be = g->be;
	o->steps++;
	double b1 = o->cfg.beta1, b2 = o->cfg.beta2;
	struct lmt_adamw a = { (float)lr, (float)b1, (float)b2, (float)o->cfg.eps, 0.0f,
			       (float)(1.0 - pow(b1, (double)o->steps)), (float)(1.0 - pow(b2, (double)o->steps)), gscale };
	size_t ds = lmt_dtype_size(g->dtype), pb = o->p ? o->pbase : 0, gb = o->p ? o->gbase : 0;
	float *p = o->p ? o->p : g->params, *gr = o->p ? o->gr : g->grads;
	char *w = o->p ? o->w : g->wparams != g->params ? g->wparams : NULL;
	for (int i = 0; i < o->nr; i++) {
		const struct lmt_optim_range *r = &o->r[i];
		a.wd = r->decay ? (float)o->cfg.weight_decay : 0.0f;
		be->adamw(be, p + (r->offset - pb), w ? w + (r->offset - pb) * ds : NULL, g->dtype, gr + (r->offset - gb),
			  o->m + (r->offset - o->lo), o->v + (r->offset - o->lo), r->count, &a, nonfinite_acc);
	}
}

void lmt_optim_bind(struct lmt_optim *o, float *p, void *w, size_t pbase, float *gr, size_t gbase)
{
	o->p = p;
	o->w = w;
	o->pbase = pbase;
	o->gr = gr;
	o->gbase = gbase;
}

const char *lmt_optim_find_nonfinite_shard(const struct lmt_optim *o, const float *buf, size_t base)
{
	struct lmt_backend *be = o->g->be;
	double *acc = o->g->a.scalars + LMT_GPT_SCALARS; /* the second half: scratch */
	for (int i = 0; i < o->nr;) {
		const char *name = o->r[i].tensor;
		double h[2] = { 0, 0 };
		be->to_device(be, acc, h, sizeof h);
		for (; i < o->nr && !strcmp(o->r[i].tensor, name); i++) /* a tensor's pieces are adjacent ranges */
			be->sumsq(be, acc, buf + (o->r[i].offset - base), o->r[i].count);
		be->to_host(be, h, acc, sizeof h);
		if (h[1] > 0)
			return name;
	}
	return NULL;
}

const char *lmt_optim_find_nonfinite(const struct lmt_optim *o, const float *buf)
{
	struct lmt_gpt *g = o->g;
	struct lmt_backend *be = g->be;
	double *acc = g->a.scalars + LMT_GPT_SCALARS; /* the second half: scratch */
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		double h[2] = { 0, 0 };
		be->to_device(be, acc, h, sizeof h);
		for (int l = 0; l < (t->layered ? g->cfg.L : 1); l++)
			be->sumsq(be, acc, buf + t->dev + (size_t)l * t->lstride, t->lnumel);
		be->to_host(be, h, acc, sizeof h);
		if (h[1] > 0)
			return t->name;
	}
	return NULL;
}

void lmt_loss_scaler_init(struct lmt_loss_scaler *s, int enabled)
{
	memset(s, 0, sizeof *s);
	s->enabled = enabled;
	s->scale = enabled ? 65536.0 : 1.0;
	s->growth = 2.0;
	s->backoff = 0.5;
	s->interval = 2000;
}

int lmt_loss_scaler_update(struct lmt_loss_scaler *s, int overflow)
{
	if (!s->enabled)
		return 0;
	if (overflow) {
		s->overflows++;
		s->good = 0;
		s->scale *= s->backoff;
		if (s->scale < 1.0 / 65536)
			s->scale = 1.0 / 65536; /* a floor: a run that always overflows stops on its own counters */
		return 1;
	}
	if (++s->good < s->interval)
		return 0;
	s->good = 0;
	s->scale *= s->growth;
	return 1;
}
