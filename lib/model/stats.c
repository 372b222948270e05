/*
 * stats.c: per-layer norms, update ratios and activation RMS (stats.h).
 */
#include "model/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* the pieces of the layout: each tensor's, and each layer's of a layered one */
static size_t pieces(const struct lmt_gpt *g)
{
	size_t n = 0;
	for (int i = 0; i < g->nt; i++)
		n += g->t[i].layered ? (size_t)g->cfg.L : 1;
	return n;
}

/* device pairs (sum of squares, non-finite count): the units' gradients, the
 * kinds' updates, the blocks' outputs, every piece's parameters (added up on the
 * host into the units' and the kinds') */
static size_t pairs(const struct lmt_gpt *g)
{
	return (size_t)g->cfg.L + 2 + LMT_STATS_KINDS + (size_t)g->cfg.L + pieces(g);
}

/* many sums of squares: in one pass where the backend has it */
static void sumsq_ranges(struct lmt_backend *be, double *acc, const float *x, const size_t *off, const size_t *len,
			 const int *slot, int n)
{
	if (be->sumsq_ranges) {
		be->sumsq_ranges(be, acc, x, off, len, slot, n);
		return;
	}
	for (int i = 0; i < n; i++)
		be->sumsq(be, acc + 2 * slot[i], x + off[i], len[i]);
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
	s->dev_bytes = 2 * pairs(g) * sizeof(double);
	s->dev = be->alloc(be, s->dev_bytes);
	if (!s->grad_norm || !s->param_norm || !s->act_rms || !s->dev) {
		lmt_stats_release(s, be);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for the training statistics");
	}
	return 0;
}

size_t lmt_stats_bytes(const struct lmt_gpt *g, size_t shard)
{
	return 2 * pairs(g) * sizeof(double) + shard * sizeof(float);
}

size_t lmt_stats_held(const struct lmt_stats *s)
{
	return (s->dev ? s->dev_bytes : 0) + s->cap * sizeof(float);
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
	int L = g->cfg.L, U = L + 2, P = (int)pieces(g);
	size_t np = pairs(g), NC = (size_t)g->B * g->T * g->cfg.C;
	/* slots: units' gradients [0, U), kinds' updates [U, U + K), blocks' outputs
	 * [U + K, U + K + L), pieces' parameters after those */
	const int KU = U, AC = U + LMT_STATS_KINDS, PC = AC + L;
	double *d = s->dev, *h = calloc(2 * np, sizeof *h);
	size_t *off = malloc(3 * ((size_t)P + (size_t)L) * sizeof *off), *len = off + P + L, *off2 = len + P + L;
	int *slot = malloc(5 * ((size_t)P + (size_t)L) * sizeof *slot), *kslot = slot + P + L, *pslot = kslot + P + L,
	    *piece_unit = pslot + P + L, *piece_kind = piece_unit + P + L;
	int rc = 0;
	if (!h || !off || !slot) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory for the training statistics");
		goto out;
	}
	be->to_device(be, d, h, 2 * np * sizeof *h);
	/* before - after, over the shard */
	be->axpy(be, s->before, -1.0f, p + (lo - pbase), hi - lo);
	/* the pieces in the shard, each once: its gradient into its unit, its update
	 * into its kind, its parameters into its own slot */
	int n = 0, k = 0;
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		for (int l = 0; l < (t->layered ? L : 1); l++, k++) {
			piece_unit[k] = unit_of(g, t, l);
			piece_kind[k] = t->kind;
			size_t a = LMT_MAX(lo, t->dev + (size_t)l * t->lstride), b = LMT_MIN(hi, t->dev + (size_t)l * t->lstride + t->lnumel);
			if (a >= b)
				continue;
			off[n] = a - gbase;
			off2[n] = a - lo;
			len[n] = b - a;
			slot[n] = piece_unit[k];
			kslot[n] = KU + t->kind;
			pslot[n] = PC + k;
			n++;
		}
	}
	sumsq_ranges(be, d, gr, off, len, slot, n);
	sumsq_ranges(be, d, s->before, off2, len, kslot, n);
	for (int i = 0; i < n; i++)
		off[i] = off[i] + gbase - pbase;
	sumsq_ranges(be, d, p, off, len, pslot, n);
	for (int l = 0; l < L; l++) {
		off[l] = (size_t)l * NC;
		len[l] = NC;
		slot[l] = AC + l;
	}
	sumsq_ranges(be, d, g->a.residual3, off, len, slot, L);
	be->to_host(be, h, d, 2 * np * sizeof *h);
	rc = be->status(be, err);
	/* the units' and kinds' parameter sums from the pieces' (in the pieces' order) */
	double *unit_p = calloc((size_t)U, sizeof *unit_p), kind_p[LMT_STATS_KINDS] = { 0 };
	if (!rc && !unit_p)
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory for the training statistics");
	for (int q = 0; !rc && q < P; q++) {
		unit_p[piece_unit[q]] += h[2 * (PC + q)];
		kind_p[piece_kind[q]] += h[2 * (PC + q)];
	}
	/* the shards' sums add up (gradients, updates, then the parameters); the block
	 * outputs are every rank's own positions */
	double *red = NULL;
	size_t nred = (size_t)U + LMT_STATS_KINDS + (size_t)U + LMT_STATS_KINDS + (size_t)L;
	if (!rc && !(red = malloc(nred * sizeof *red)))
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory for the training statistics");
	if (!rc) {
		size_t r = 0;
		for (int i = 0; i < U + LMT_STATS_KINDS; i++)
			red[r++] = h[2 * i];
		for (int u = 0; u < U; u++)
			red[r++] = unit_p[u];
		for (int q = 0; q < LMT_STATS_KINDS; q++)
			red[r++] = kind_p[q];
		for (int l = 0; l < L; l++)
			red[r++] = h[2 * (AC + l)];
		if (comm->world > 1) {
			size_t shard_part = nred - (size_t)L;
			if (sharded)
				rc = comm->allreduce_sum(comm, red, shard_part, LMT_DTYPE_F64, err);
			if (!rc)
				rc = comm->allreduce_sum(comm, red + shard_part, (size_t)L, LMT_DTYPE_F64, err);
		}
	}
	if (!rc) {
		const double *gu = red, *ku = red + U, *pu = ku + LMT_STATS_KINDS, *pk = pu + U, *ac = pk + LMT_STATS_KINDS;
		for (int u = 0; u < U; u++) {
			s->grad_norm[u] = sqrt(gu[u]) * gscale_inv;
			s->param_norm[u] = sqrt(pu[u]);
		}
		for (int q = 0; q < LMT_STATS_KINDS; q++) {
			double upd = sqrt(ku[q]), pn = sqrt(pk[q]);
			s->kind_norm[q] = pn;
			s->update_ratio[q] = pn > 0 ? upd / pn : 0;
		}
		for (int l = 0; l < L; l++)
			s->act_rms[l] = sqrt(ac[l] / ((double)NC * comm->world));
	}
	free(red);
	free(unit_p);
out:
	free(h);
	free(off);
	free(slot);
	return rc;
}
