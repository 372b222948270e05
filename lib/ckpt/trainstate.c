/*
 * trainstate.c: see trainstate.h.
 */
#include "ckpt/trainstate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const prefixes[3] = { "param", "adam_m", "adam_v" };

static float *base_of(struct lmt_gpt *g, int k)
{
	return k == 0 ? g->params : k == 1 ? g->m : g->v;
}

int lmt_trainstate_tensors(struct lmt_gpt *g, struct lmt_ckpt_tensor **out, int *n, float **host,
			  struct lmt_err *err)
{
	*host = NULL;
	struct lmt_ckpt_tensor *t = calloc((size_t)g->nt * 3, sizeof *t);
	if (!t)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	int direct = !strcmp(g->be->name, "cpu");
	if (!direct) {
		*host = malloc(g->nparams * 3 * sizeof(float));
		if (!*host) {
			free(t);
			return lmt_err_set(err, LMT_ENOMEM, "no host memory for a %.1f MB checkpoint", g->nparams * 12 / 1e6);
		}
		for (int k = 0; k < 3; k++)
			g->be->to_host(g->be, *host + (size_t)k * g->nparams, base_of(g, k), g->nparams * sizeof(float));
	}
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < g->nt; i++) {
			struct lmt_ckpt_tensor *x = &t[k * g->nt + i];
			snprintf(x->name, sizeof x->name, "%s/%s", prefixes[k], g->t[i].name);
			x->data = (direct ? base_of(g, k) : *host + (size_t)k * g->nparams) + g->t[i].offset;
			x->numel = g->t[i].numel;
			x->ndim = g->t[i].ndim;
			memcpy(x->shape, g->t[i].shape, sizeof x->shape);
		}
	*out = t;
	*n = g->nt * 3;
	return 0;
}

/* The first n of param, adam_m, adam_v from c into g. */
static int load(struct lmt_gpt *g, const struct lmt_ckpt *c, int n, struct lmt_err *err)
{
	float *h = malloc(g->nparams * sizeof *h);
	if (!h)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	int rc = 0;
	for (int k = 0; k < n && !rc; k++) {
		for (int i = 0; i < g->nt && !rc; i++) {
			char name[80];
			snprintf(name, sizeof name, "%s/%s", prefixes[k], g->t[i].name);
			const struct lmt_ckpt_entry *e = lmt_ckpt_find(c, name);
			if (!e) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': no tensor '%s' (the model has it)", c->dir, name);
				break;
			}
			int same = e->ndim == g->t[i].ndim;
			for (int d = 0; same && d < e->ndim; d++)
				same = e->shape[d] == g->t[i].shape[d];
			if (!same) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s' has shape [%d %d %d], the model [%d %d %d]",
						 c->dir, name, e->shape[0], e->ndim > 1 ? e->shape[1] : 0,
						 e->ndim > 2 ? e->shape[2] : 0, g->t[i].shape[0],
						 g->t[i].ndim > 1 ? g->t[i].shape[1] : 0, g->t[i].ndim > 2 ? g->t[i].shape[2] : 0);
				break;
			}
			rc = lmt_ckpt_read(c, e, h + g->t[i].offset, err);
		}
		if (!rc)
			g->be->to_device(g->be, base_of(g, k), h, g->nparams * sizeof *h);
	}
	free(h);
	return rc;
}

int lmt_trainstate_restore(struct lmt_gpt *g, const struct lmt_ckpt *c, struct lmt_err *err)
{
	if (!g->m || !g->v)
		return lmt_err_set(err, LMT_EINVAL, "'%s': restoring the optimizer state needs the moments allocated", c->dir);
	return load(g, c, 3, err);
}

int lmt_trainstate_load_params(struct lmt_gpt *g, const struct lmt_ckpt *c, struct lmt_err *err)
{
	return load(g, c, 1, err);
}
