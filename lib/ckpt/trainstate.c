/*
 * trainstate.c: see trainstate.h.
 */
#include "ckpt/trainstate.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const prefixes[3] = { "param", "adam_m", "adam_v" };

static int get_int(json_t *o, const char *key, int lo, int *v)
{
	json_t *x = json_object_get(o, key);
	if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > INT32_MAX)
		return -1;
	*v = (int)json_integer_value(x);
	return 0;
}

int lmt_trainstate_model(const struct lmt_ckpt *c, struct lmt_gpt_config *m, struct lmt_err *err)
{
	memset(m, 0, sizeof *m);
	json_t *o = lmt_ckpt_state(c, "model"), *u = json_object_get(o, "untied");
	if (!json_is_object(o) || get_int(o, "layers", 1, &m->L) || get_int(o, "heads", 1, &m->NH) ||
	    get_int(o, "channels", 1, &m->C) || get_int(o, "context", 1, &m->max_T) || get_int(o, "vocab", 1, &m->V) ||
	    get_int(o, "vocab_padded", 1, &m->Vp) || !json_is_boolean(u))
		return lmt_err_set(err, LMT_EFORMAT,
				   "'%s/manifest.json': state.model lacks layers, heads, channels, context, vocab, "
				   "vocab_padded or untied", c->dir);
	m->untied = json_is_true(u);
	if (m->C % m->NH || m->Vp < m->V)
		return lmt_err_set(err, LMT_EFORMAT,
				   "'%s/manifest.json': state.model: %d channels in %d heads, vocabulary %d padded to %d",
				   c->dir, m->C, m->NH, m->V, m->Vp);
	return 0;
}

static void shape_str(char *buf, size_t cap, int ndim, const int *shape)
{
	int n = snprintf(buf, cap, "[");
	for (int d = 0; d < ndim && n < (int)cap; d++)
		n += snprintf(buf + n, cap - (size_t)n, d ? " %d" : "%d", shape[d]);
	if (n < (int)cap)
		snprintf(buf + n, cap - (size_t)n, "]");
}

int lmt_trainstate_check(const struct lmt_ckpt *c, struct lmt_err *err)
{
	struct lmt_gpt_config cfg;
	struct lmt_gpt g;
	int rc = lmt_trainstate_model(c, &cfg, err);
	if (rc || (rc = lmt_gpt_layout(&g, &cfg, err)))
		return rc;
	int expected = 0;
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < g.nt; i++) {
			char name[80], a[64], b[64];
			snprintf(name, sizeof name, "%s/%s", prefixes[k], g.t[i].name);
			const struct lmt_ckpt_entry *e = lmt_ckpt_find(c, name);
			if (!e)
				return lmt_err_set(err, LMT_EFORMAT, "'%s': no tensor '%s' (the model its state describes has it)",
						   c->dir, name);
			int same = e->ndim == g.t[i].ndim;
			for (int d = 0; same && d < e->ndim; d++)
				same = e->shape[d] == g.t[i].shape[d];
			if (!same) {
				shape_str(a, sizeof a, e->ndim, e->shape);
				shape_str(b, sizeof b, g.t[i].ndim, g.t[i].shape);
				return lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s' has shape %s, the model %s", c->dir,
						   name, a, b);
			}
			expected++;
		}
	if (c->nt != expected)
		for (int i = 0; i < c->nt; i++) {
			const char *n = c->t[i].name, *sl = strchr(n, '/');
			int known = 0;
			for (int k = 0; k < 3 && !known; k++)
				known = sl && (size_t)(sl - n) == strlen(prefixes[k]) && !strncmp(n, prefixes[k], (size_t)(sl - n)) &&
					lmt_gpt_tensor(&g, sl + 1);
			if (!known)
				return lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s' is not part of the training state of the "
						   "model its state describes", c->dir, n);
		}
	return 0;
}

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
	/* the device layout is layer-major, a checkpoint's tensors are whole: gathered
	 * into host memory in the canonical order */
	*host = malloc(g->nparams * 3 * sizeof(float));
	if (!*host) {
		free(t);
		return lmt_err_set(err, LMT_ENOMEM, "no host memory for a %.1f MB checkpoint", g->nparams * 12 / 1e6);
	}
	for (int k = 0; k < 3; k++)
		lmt_gpt_gather(g, *host + (size_t)k * g->nparams, base_of(g, k));
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < g->nt; i++) {
			struct lmt_ckpt_tensor *x = &t[k * g->nt + i];
			snprintf(x->name, sizeof x->name, "%s/%s", prefixes[k], g->t[i].name);
			x->data = *host + (size_t)k * g->nparams + g->t[i].offset;
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
	int rc0 = lmt_trainstate_check(c, err); /* the checkpoint is train's state, whole */
	if (rc0)
		return rc0;
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
			lmt_gpt_scatter(g, base_of(g, k), h);
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
