/*
 * stats.c: per-layer norms, update ratios and activation RMS (stats.h).
 */
#include "model/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* device pairs (sum of squares, non-finite count): the units' gradients, the
 * units' parameters, the kinds' updates, the kinds' parameters, the blocks' outputs */
static size_t pairs(int L)
{
	return 2 * ((size_t)L + 2) + 2 * LMT_STATS_KINDS + (size_t)L;
}

int lmt_stats_init(struct lmt_stats *s, const struct lmt_gpt *g, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	int L = g->cfg.L;
	memset(s, 0, sizeof *s);
	s->L = L;
	s->grad_norm = calloc((size_t)L + 2, sizeof(double));
	s->param_norm = calloc((size_t)L + 2, sizeof(double));
	s->act_rms = calloc((size_t)L, sizeof(double));
	s->dev = be->alloc(be, 2 * pairs(L) * sizeof(double));
	if (!s->grad_norm || !s->param_norm || !s->act_rms || !s->dev) {
		lmt_stats_release(s, be);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for the training statistics");
	}
	return 0;
}

void lmt_stats_release(struct lmt_stats *s, struct lmt_backend *be)
{
	free(s->grad_norm);
	free(s->param_norm);
	free(s->act_rms);
	if (be) {
		be->free(be, s->dev);
		be->free(be, s->before);
	}
	memset(s, 0, sizeof *s);
}

int lmt_stats_before(struct lmt_stats *s, const struct lmt_gpt *g, const float *p, size_t pbase, size_t lo,
		     size_t hi, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	if (hi - lo > s->cap) {
		be->free(be, s->before);
		if (!(s->before = be->alloc(be, (hi - lo) * sizeof(float)))) {
			s->cap = 0;
			return lmt_err_set(err, LMT_ENOMEM, "out of memory for the statistics' copy of %zu parameters",
					   hi - lo);
		}
		s->cap = hi - lo;
	}
	be->copy(be, s->before, p + (lo - pbase), (hi - lo) * sizeof(float));
	return 0;
}

/* the unit of layer l's piece of t (zero.h's numbering) */
static int unit_of(const struct lmt_gpt *g, const struct lmt_tensor *t, int l)
{
	return t->layered ? l + 1 : t->dev < lmt_gpt_tensor(g, "ln1w")->dev ? 0 : g->cfg.L + 1;
}

int lmt_stats_after(struct lmt_stats *s, const struct lmt_gpt *g, struct lmt_comm *comm, int sharded, const float *p,
		    size_t pbase, const float *gr, size_t gbase, double gscale_inv, size_t lo, size_t hi,
		    struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	int L = g->cfg.L, U = L + 2;
	size_t np = pairs(L), NC = (size_t)g->B * g->T * g->cfg.C;
	double *d = s->dev, *h = calloc(2 * np, sizeof *h);
	if (!h)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for the training statistics");
	be->to_device(be, d, h, 2 * np * sizeof *h);
	/* before - after, over the shard */
	be->axpy(be, s->before, -1.0f, p + (lo - pbase), hi - lo);
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		for (int l = 0; l < (t->layered ? L : 1); l++) {
			size_t a = LMT_MAX(lo, t->dev + (size_t)l * t->lstride), b = LMT_MIN(hi, t->dev + (size_t)l * t->lstride + t->lnumel);
			if (a >= b)
				continue;
			int u = unit_of(g, t, l);
			be->sumsq(be, d + 2 * u, gr + (a - gbase), b - a);
			be->sumsq(be, d + 2 * (U + u), p + (a - pbase), b - a);
			be->sumsq(be, d + 2 * (2 * U + t->kind), s->before + (a - lo), b - a);
			be->sumsq(be, d + 2 * (2 * U + LMT_STATS_KINDS + t->kind), p + (a - pbase), b - a);
		}
	}
	size_t act0 = 2 * (size_t)U + 2 * LMT_STATS_KINDS;
	for (int l = 0; l < L; l++)
		be->sumsq(be, d + 2 * (act0 + (size_t)l), g->a.residual3 + (size_t)l * NC, NC);
	be->to_host(be, h, d, 2 * np * sizeof *h);
	int rc = be->status(be, err);
	/* the shards' sums add up; the block outputs are every rank's own positions */
	if (!rc && comm->world > 1) {
		if (sharded)
			rc = comm->allreduce_sum(comm, h, 2 * act0, LMT_DTYPE_F64, err);
		if (!rc)
			rc = comm->allreduce_sum(comm, h + 2 * act0, 2 * (size_t)L, LMT_DTYPE_F64, err);
	}
	if (!rc) {
		for (int u = 0; u < U; u++) {
			s->grad_norm[u] = sqrt(h[2 * u]) * gscale_inv;
			s->param_norm[u] = sqrt(h[2 * (U + u)]);
		}
		for (int k = 0; k < LMT_STATS_KINDS; k++) {
			double upd = sqrt(h[2 * (2 * U + k)]), pn = sqrt(h[2 * (2 * U + LMT_STATS_KINDS + k)]);
			s->kind_norm[k] = pn;
			s->update_ratio[k] = pn > 0 ? upd / pn : 0;
		}
		for (int l = 0; l < L; l++)
			s->act_rms[l] = sqrt(h[2 * (act0 + (size_t)l)] / ((double)NC * comm->world));
	}
	free(h);
	return rc;
}
