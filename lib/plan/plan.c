/*
 * plan.c: the layout planner (plan.h). Memory per device comes from the ledger
 * (its exact data-parallel figures, scaled for tp, pp and cp); time from the FLOP
 * count the trainer reports MFU with (lmt_gpt_flops_per_token) and the collective
 * volumes listed in plan.h.
 */
#include "plan/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lmt_plan_defaults(struct lmt_plan_opts *o)
{
	if (!o->gpus_per_node)
		o->gpus_per_node = 8;
	if (!o->intra_bw)
		o->intra_bw = 300e9;
	if (!o->inter_bw)
		o->inter_bw = 25e9;
	if (!o->mfu)
		o->mfu = 0.4;
	if (!o->peak_flops)
		o->peak_flops = 989e12;
	if (!o->top)
		o->top = 5;
}

int lmt_plan_check(const struct lmt_plan_opts *o, struct lmt_err *err)
{
	if (o->gpus < 1)
		return lmt_err_set(err, LMT_EINVAL, "--gpus %d: at least 1", o->gpus);
	if (o->gpus > o->gpus_per_node && o->gpus % o->gpus_per_node)
		return lmt_err_set(err, LMT_EINVAL, "%d devices are not whole nodes of %d", o->gpus, o->gpus_per_node);
	if (o->memory < 0 || o->intra_bw <= 0 || o->inter_bw <= 0 || o->mfu <= 0 || o->mfu > 1 || o->peak_flops <= 0)
		return lmt_err_set(err, LMT_EINVAL, "memory, bandwidths and peak must be positive, MFU in (0, 1]");
	const int fix[] = { o->fix_tp, o->fix_pp, o->fix_cp };
	const char *const what[] = { "tensor", "pipeline", "context" };
	long prod = 1;
	for (int i = 0; i < 3; i++) {
		if (fix[i] < 0 || (fix[i] && o->gpus % fix[i]))
			return lmt_err_set(err, LMT_EINVAL, "%s parallel %d does not divide the %d devices", what[i],
					   fix[i], o->gpus);
		prod *= fix[i] ? fix[i] : 1;
	}
	if (o->gpus % prod)
		return lmt_err_set(err, LMT_EINVAL, "tp x pp x cp = %ld does not divide the %d devices", prod, o->gpus);
	return 0;
}

static int fixed(int want, int d)
{
	return !want || want == d;
}

static double bw(const struct lmt_plan_opts *o, int stride, int n, int *inter)
{
	*inter = n > 1 && stride * n > o->gpus_per_node;
	return *inter ? o->inter_bw : o->intra_bw;
}

const char *const lmt_plan_drop_reasons[LMT_PLAN_DROP_COUNT] = {
	"over memory", "tensor parallel across nodes", "tensor degree does not divide the heads",
	"pipeline degree does not divide the layers", "context degree does not divide the sequence",
	"global batch is not a multiple of dp x micro-batch", "the ledger refuses the layout",
};

void lmt_plan_count_dropped(const struct lmt_plan_layout *l, int n, int counts[LMT_PLAN_DROP_COUNT])
{
	for (int r = 0; r < LMT_PLAN_DROP_COUNT; r++)
		counts[r] = 0;
	for (int i = 0; i < n; i++)
		for (int r = 0; r < LMT_PLAN_DROP_COUNT; r++)
			counts[r] += l[i].drop && !strcmp(l[i].drop, lmt_plan_drop_reasons[r]);
}

const struct lmt_plan_strategy lmt_plan_strategies[LMT_PLAN_STRATEGY_COUNT] = {
	{ "DDP", "nothing (a full replica per device)", "all-reduce of the gradients", 1, 0, 0, 0, 0 },
	{ "ZeRO-1", "optimizer state", "reduce-scatter of the gradients, all-gather of the parameters", 1, 0, 0, 0,
	  1 },
	{ "ZeRO-2", "optimizer state, gradients", "reduce-scatter per layer in backward, all-gather", 1, 0, 0, 0, 2 },
	{ "ZeRO-3", "optimizer state, gradients, parameters", "all-gather per layer (forward and backward), "
	  "reduce-scatter", 1, 0, 0, 0, 3 },
	{ "tensor", "weight matrices by heads and MLP columns; the blocks' activations",
	  "all-reduce of activations, 4 per layer", 0, 1, 0, 0, 0 },
	{ "pipeline", "layers (L / pp per stage)", "send/recv of activations between stages", 0, 0, 1, 0, 0 },
	{ "context", "positions (sequence chunks) and their activations",
	  "all-gather of K and V per layer, reduce-scatter of their gradients", 0, 0, 0, 1, 0 },
};

void lmt_plan_strategy_eval(const struct lmt_ledger_cfg *c, const struct lmt_plan_opts *o,
			    const struct lmt_plan_strategy *s, struct lmt_plan_layout *l)
{
	int G = o->gpus;
	*l = (struct lmt_plan_layout){ .dp = s->dp ? G : 1, .tp = s->tp ? G : 1, .pp = s->pp ? G : 1,
				       .cp = s->cp ? G : 1, .zero = s->zero };
	lmt_plan_eval(c, o, l);
}

/* the reason a layout cannot be, or NULL */
static const char *impossible(const struct lmt_ledger_cfg *c, const struct lmt_plan_opts *o,
			      const struct lmt_plan_layout *l, int gb)
{
	if (c->model.NH % l->tp)
		return lmt_plan_drop_reasons[LMT_PLAN_DROP_TP_HEADS];
	if (c->model.L % l->pp)
		return lmt_plan_drop_reasons[LMT_PLAN_DROP_PP_LAYERS];
	if (c->T % l->cp)
		return lmt_plan_drop_reasons[LMT_PLAN_DROP_CP_SEQ];
	if (gb % (l->dp * c->B))
		return lmt_plan_drop_reasons[LMT_PLAN_DROP_BATCH];
	if (!o->tp_across_nodes && l->tp > 1 && (l->tp > o->gpus_per_node || o->gpus_per_node % l->tp))
		return lmt_plan_drop_reasons[LMT_PLAN_DROP_TP_NODES];
	return NULL;
}

void lmt_plan_eval(const struct lmt_ledger_cfg *c, const struct lmt_plan_opts *o, struct lmt_plan_layout *l)
{
	struct lmt_ledger_cfg x = *c;
	struct lmt_ledger led;
	int gb = o->global_batch ? o->global_batch : o->gpus * c->B;
	x.world = l->dp;
	x.zero = l->zero;
	x.tp = l->tp;
	x.pp = l->pp;
	x.cp = l->cp;
	l->drop = impossible(c, o, l, gb);
	if (l->drop)
		return;
	if (lmt_ledger_build(&x, &led, NULL)) {
		l->drop = lmt_plan_drop_reasons[LMT_PLAN_DROP_LEDGER];
		return;
	}
	double P = o->params > 0 ? o->params : (double)led.nparams, ratio = P / (double)led.nparams;
	l->mem = (double)led.state_total * ratio + (double)(led.total - led.state_total);
	struct lmt_gpt_config mc = c->model;
	const struct lmt_gpt_config *m = &mc;
	if (!mc.Vp)
		mc.Vp = lmt_gpt_padded_vocab(mc.V);
	double ds = lmt_dtype_size(c->dtype), L = m->L, C = m->C, T = c->T, B = c->B;
	double fpt = o->params > 0 ? 6 * P + 12 * L * C * T : lmt_gpt_flops_per_token(m, c->T);
	l->m = gb / (l->dp * c->B);
	double t_ideal = fpt * gb * T / (o->gpus * o->peak_flops * o->mfu);
	l->bubble = l->pp > 1 ? (double)(l->pp - 1) / (l->m + l->pp - 1) : 0;
	l->t_compute = t_ideal / (1 - l->bubble);
	double dp = l->dp, tp = l->tp, pp = l->pp, cp = l->cp, mb = l->m, act = B * (T / cp) * C * ds;
	double Pl = P / (tp * pp);
	l->b_dp = dp > 1 ? (l->zero == 3 ? 3 : 2) * (dp - 1) / dp * 4 * Pl : 0;
	l->b_tp = tp > 1 ? mb * (L / pp) * 4 * 2 * (tp - 1) / tp * act : 0;
	l->b_pp = pp > 1 ? 2 * mb * act : 0;
	l->b_cp = cp > 1 ? mb * (L / pp) * 2 * (cp - 1) / cp * 2 * B * T * (C / tp) * ds : 0;
	int inter;
	l->t_tp = l->b_tp / bw(o, 1, l->tp, &l->tp_inter);
	l->t_cp = l->b_cp / bw(o, l->tp, l->cp, &inter);
	l->t_pp = l->b_pp / bw(o, l->tp * l->cp, l->pp, &inter);
	l->t_dp = l->b_dp / bw(o, l->tp * l->cp * l->pp, l->dp, &l->dp_inter);
	l->t_step = l->t_compute + l->t_dp + l->t_tp + l->t_pp + l->t_cp;
	if (o->memory > 0 && l->mem > o->memory)
		l->drop = lmt_plan_drop_reasons[LMT_PLAN_DROP_MEMORY];
}

static int by_time(const void *pa, const void *pb)
{
	const struct lmt_plan_layout *a = pa, *b = pb;
	if (!a->drop != !b->drop)
		return a->drop ? 1 : -1;
	if (a->t_step != b->t_step)
		return a->t_step < b->t_step ? -1 : 1;
	return a->mem < b->mem ? -1 : a->mem > b->mem;
}

int lmt_plan_enumerate(const struct lmt_ledger_cfg *c, const struct lmt_plan_opts *o, struct lmt_plan_layout *out,
		       int cap, int *n, struct lmt_err *err)
{
	int G = o->gpus, k = 0, rc = lmt_plan_check(o, err);
	if (rc)
		return rc;
	if (o->global_batch && o->global_batch % c->B)
		return lmt_err_set(err, LMT_EINVAL, "global batch %d is not a multiple of the micro-batch %d",
				   o->global_batch, c->B);
	for (int tp = 1; tp <= G; tp++)
		for (int pp = 1; G % tp == 0 && pp <= G / tp; pp++)
			for (int cp = 1; (G / tp) % pp == 0 && cp <= G / tp / pp; cp++) {
				if ((G / tp / pp) % cp)
					continue;
				int dp = G / tp / pp / cp;
				if (!fixed(o->fix_tp, tp) || !fixed(o->fix_pp, pp) || !fixed(o->fix_cp, cp))
					continue;
				for (int z = 0; z <= (dp > 1 ? 3 : 0); z++) {
					if (k == cap)
						return lmt_err_set(err, LMT_ERANGE, "more than %d layouts of %d devices", cap,
								   G);
					struct lmt_plan_layout *l = &out[k++];
					memset(l, 0, sizeof *l);
					*l = (struct lmt_plan_layout){ .dp = dp, .tp = tp, .pp = pp, .cp = cp, .zero = z };
					lmt_plan_eval(c, o, l);
				}
			}
	qsort(out, (size_t)k, sizeof *out, by_time);
	*n = k;
	return 0;
}

void lmt_plan_why(const struct lmt_plan_layout *a, const struct lmt_plan_layout *b, char *buf, size_t cap)
{
	double ia = a->t_compute * (1 - a->bubble), ib = b->t_compute * (1 - b->bubble);
	double d[] = { ib - ia, b->t_compute - ib - (a->t_compute - ia), b->t_dp - a->t_dp, b->t_tp - a->t_tp,
		       b->t_pp - a->t_pp, b->t_cp - a->t_cp };
	static const char *const what[] = { "compute", "pipeline bubble", "data-parallel communication",
					     "tensor-parallel communication", "pipeline communication",
					     "context-parallel communication" };
	int w = 0;
	for (int i = 1; i < 6; i++)
		if (d[i] > d[w])
			w = i;
	if (b->t_step == a->t_step || d[w] <= 0)
		snprintf(buf, cap, "as fast; %.3g GB more memory per device", (b->mem - a->mem) / 1e9);
	else
		snprintf(buf, cap, "%s +%.3g s (%s)", what[w], d[w],
			 w == 1 ? "more idle stages" : w == 2 && b->dp_inter ? "across nodes" :
			 w == 3 && b->tp_inter ? "across nodes" : w == 0 ? "the same FLOPs on fewer devices" : "more bytes");
}
