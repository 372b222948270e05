/*
 * planrec.c: memledger's JSONL records (see planrec.h). Byte counts are integers,
 * ratios and predictions numbers; a strategy the layout cannot take has null
 * bytes and memory, so every record of a kind has the same keys.
 */
#include "report/planrec.h"

#include <stdio.h>
#include <string.h>

#include "core/dtype.h"

static const char *dtype_of(int d)
{
	return d < 0 ? "mixed" : lmt_dtype_name(d);
}

void lmt_planrec_config(struct lmt_json *j, const struct lmt_ledger_cfg *c)
{
	lmt_json_u64(j, "layers", (uint64_t)c->model.L);
	lmt_json_u64(j, "heads", (uint64_t)c->model.NH);
	lmt_json_u64(j, "channels", (uint64_t)c->model.C);
	lmt_json_u64(j, "context", (uint64_t)c->model.max_T);
	lmt_json_u64(j, "vocab", (uint64_t)c->model.V);
	lmt_json_bool(j, "untied", c->model.untied);
	lmt_json_u64(j, "micro_batch", (uint64_t)c->B);
	lmt_json_u64(j, "seq_len", (uint64_t)c->T);
	lmt_json_str(j, "precision", lmt_dtype_name(c->dtype));
	lmt_json_u64(j, "recompute_every", (uint64_t)c->recompute_every);
	lmt_json_u64(j, "world", (uint64_t)c->world);
	lmt_json_u64(j, "zero", (uint64_t)c->zero);
	lmt_json_u64(j, "tp", (uint64_t)c->tp);
	lmt_json_u64(j, "pp", (uint64_t)c->pp);
	lmt_json_u64(j, "cp", (uint64_t)c->cp);
}

void lmt_planrec_model(struct lmt_json *j, const struct lmt_ledger_cfg *c, const struct lmt_ledger *l)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "model");
	lmt_planrec_config(j, c);
	lmt_json_u64(j, "params", l->nparams);
	lmt_json_u64(j, "embedding", l->counts.embedding);
	lmt_json_u64(j, "matrix", l->counts.matrix);
	lmt_json_u64(j, "bias", l->counts.bias);
	lmt_json_u64(j, "norm", l->counts.norm);
	lmt_json_u64(j, "vocab_padding", l->counts.padding);
	lmt_json_bool(j, "estimate", l->estimate);
}

void lmt_planrec_term(struct lmt_json *j, const struct lmt_ledger *l, int i)
{
	const struct lmt_ledger_term *t = &l->t[i];
	lmt_json_begin(j);
	lmt_json_str(j, "event", "term");
	lmt_json_str(j, "name", t->name);
	lmt_json_str(j, "group", lmt_ledger_group_names[t->group]);
	lmt_json_str(j, "dtype", dtype_of(t->dtype));
	lmt_json_u64(j, "bytes", t->bytes);
	lmt_json_num(j, "bytes_per_param", (double)t->bytes / (double)l->nparams);
	lmt_json_str(j, "note", t->note);
}

void lmt_planrec_activations(struct lmt_json *j, const struct lmt_ledger *l)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "activations");
	lmt_json_u64(j, "per_block", l->per_block);
	lmt_json_u64(j, "slot", l->acts.slot);
	lmt_json_u64(j, "blocks_kept", (uint64_t)l->acts.kept);
	lmt_json_u64(j, "total", l->acts_total);
	lmt_json_u64(j, "no_recompute", l->acts_none.total);
	lmt_json_bool(j, "attention_scores_stored", 0);
}

/* The seed's rule of thumb: mixed-precision Adam keeps 16 bytes per parameter
 * before activations: 2 (16-bit weights) + 2 (16-bit gradients) + 4 (fp32 master)
 * + 4 + 4 (moments). */
static void rule_of_thumb(struct lmt_json *j, const struct lmt_ledger *l)
{
	double P = (double)l->nparams;
	lmt_json_obj(j, "bytes_per_param");
	lmt_json_num(j, "params", l->state.params / P);
	lmt_json_num(j, "weights_working", l->state.working / P);
	lmt_json_num(j, "grads", l->state.grads / P);
	lmt_json_num(j, "optimizer", l->state.optimizer / P);
	lmt_json_num(j, "staging", l->state.staging / P);
	lmt_json_num(j, "state", (double)(l->state.params + l->state.working + l->state.grads + l->state.optimizer +
					  l->state.staging) / P);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "rule_of_thumb");
	lmt_json_num(j, "bytes_per_param", 16);
	lmt_json_num(j, "weights_16bit", 2);
	lmt_json_num(j, "grads_16bit", 2);
	lmt_json_num(j, "master_fp32", 4);
	lmt_json_num(j, "moments_fp32", 8);
	lmt_json_obj_end(j);
}

void lmt_planrec_total(struct lmt_json *j, const struct lmt_ledger *l)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "total");
	lmt_json_u64(j, "bytes", l->total);
	lmt_json_u64(j, "state", l->state_total);
	lmt_json_u64(j, "activations", l->acts_total);
	lmt_json_obj(j, "by_dtype");
	for (int d = 0; d < LMT_DTYPE_COUNT; d++)
		if (l->by_dtype[d])
			lmt_json_u64(j, lmt_dtype_name(d), l->by_dtype[d]);
	lmt_json_obj_end(j);
	rule_of_thumb(j, l);
}

void lmt_planrec_fit_run(struct lmt_json *j, const char *run, const struct lmt_ledger_cfg *c)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "fit_run");
	lmt_json_str(j, "run", run);
	lmt_planrec_config(j, c);
}

void lmt_planrec_fit_term(struct lmt_json *j, const char *name, double pred, double meas)
{
	lmt_json_obj(j, name);
	lmt_json_num(j, "predicted", pred);
	lmt_json_num(j, "measured", meas);
	lmt_json_num(j, "error_pct", lmt_fit_error_pct(pred, meas));
	lmt_json_obj_end(j);
}

void lmt_planrec_fit(struct lmt_json *j, int n, const double beta[LMT_ACT_FEATURES], double worst,
		     double worst_fit)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "fit");
	lmt_json_u64(j, "runs", (uint64_t)n);
	lmt_json_arr(j, "coefficients");
	for (int k = 0; k < LMT_ACT_FEATURES; k++)
		lmt_json_num(j, NULL, beta[k]);
	lmt_json_arr_end(j);
	lmt_json_str(j, "features", "(L+1)*N*C, S*N*C, N*(C+Vp), 1");
	lmt_json_num(j, "max_error_pct", worst);
	lmt_json_num(j, "max_fit_error_pct", worst_fit);
}

void lmt_planrec_safe(struct lmt_json *j, const struct lmt_ledger_cfg *c, const double *beta, int B, double memory,
		      double margin)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "safe_microbatch");
	lmt_json_u64(j, "micro_batch", (uint64_t)B);
	lmt_json_u64(j, "seq_len", (uint64_t)c->T);
	lmt_json_num(j, "predicted_bytes", B ? lmt_safe_bytes_at(c, B, beta) : 0);
	lmt_json_num(j, "next_bytes", lmt_safe_bytes_at(c, B + 1, beta));
	lmt_json_num(j, "budget_bytes", memory * (1 - margin));
	lmt_json_num(j, "memory", memory);
	lmt_json_num(j, "margin", margin);
	lmt_json_str(j, "source", beta ? "fit" : "ledger");
}

void lmt_planrec_dropped(struct lmt_json *j, int r, int layouts)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "dropped");
	lmt_json_str(j, "reason", lmt_plan_drop_reasons[r]);
	lmt_json_u64(j, "layouts", (uint64_t)layouts);
}

void lmt_planrec_layout(struct lmt_json *j, const char *event, int rank, const struct lmt_plan_layout *l,
			const char *why)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", event);
	if (rank)
		lmt_json_u64(j, "rank", (uint64_t)rank);
	lmt_json_u64(j, "dp", (uint64_t)l->dp);
	lmt_json_u64(j, "tp", (uint64_t)l->tp);
	lmt_json_u64(j, "pp", (uint64_t)l->pp);
	lmt_json_u64(j, "cp", (uint64_t)l->cp);
	lmt_json_u64(j, "zero", (uint64_t)l->zero);
	lmt_json_u64(j, "micro_batches", (uint64_t)l->m);
	lmt_json_num(j, "memory", l->mem);
	lmt_json_num(j, "step_s", l->t_step);
	lmt_json_num(j, "compute_s", l->t_compute);
	lmt_json_num(j, "bubble", l->bubble);
	lmt_json_obj(j, "comm_s");
	lmt_json_num(j, "dp", l->t_dp);
	lmt_json_num(j, "tp", l->t_tp);
	lmt_json_num(j, "pp", l->t_pp);
	lmt_json_num(j, "cp", l->t_cp);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "comm_bytes");
	lmt_json_num(j, "dp", l->b_dp);
	lmt_json_num(j, "tp", l->b_tp);
	lmt_json_num(j, "pp", l->b_pp);
	lmt_json_num(j, "cp", l->b_cp);
	lmt_json_obj_end(j);
	lmt_json_bool(j, "dp_across_nodes", l->dp_inter);
	lmt_json_bool(j, "tp_across_nodes", l->tp_inter);
	if (l->drop)
		lmt_json_str(j, "dropped", l->drop);
	if (why)
		lmt_json_str(j, "loses_by", why);
}

void lmt_planrec_strategy(struct lmt_json *j, const struct lmt_plan_strategy *s, int G,
			  const struct lmt_plan_layout *l)
{
	int impossible = l->drop && l->drop != lmt_plan_drop_reasons[LMT_PLAN_DROP_MEMORY];
	lmt_json_begin(j);
	lmt_json_str(j, "event", "strategy");
	lmt_json_str(j, "name", s->name);
	lmt_json_u64(j, "degree", (uint64_t)G);
	lmt_json_str(j, "shards", s->shards);
	lmt_json_str(j, "collective", s->collective);
	if (impossible) {
		lmt_json_null(j, "bytes_per_step");
		lmt_json_null(j, "memory");
	} else {
		lmt_json_num(j, "bytes_per_step", l->b_dp + l->b_tp + l->b_pp + l->b_cp);
		lmt_json_num(j, "memory", l->mem);
	}
	if (l->drop)
		lmt_json_str(j, "note", l->drop);
}

void lmt_planrec_budget(struct lmt_json *j, const struct lmt_budget_opts *o, const struct lmt_budget_in *in,
			const struct lmt_budget *b)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "budget");
	lmt_json_num(j, "target_tokens", o->target_tokens);
	lmt_json_num(j, "tokens_per_s", in->tokens_per_s);
	lmt_json_num(j, "devices", in->devices);
	lmt_json_num(j, "train_s", b->train_s);
	lmt_json_num(j, "ckpt_cost_s", in->ckpt_cost_s);
	lmt_json_num(j, "ckpt_interval_s", b->interval_s);
	lmt_json_num(j, "ckpt_overhead", b->overhead_frac);
	lmt_json_num(j, "failures", b->failures);
	lmt_json_num(j, "lost_per_failure_s", b->lost_per_failure_s);
	lmt_json_num(j, "wall_s", b->wall_s);
	lmt_json_obj(j, "device_hours");
	for (int i = 0; i < 6; i++)
		lmt_json_num(j, lmt_budget_terms[i], b->device_h[i]);
	lmt_json_num(j, "total", b->device_h_total);
	lmt_json_obj_end(j);
}

void lmt_planrec_loss_fit(struct lmt_json *j, const struct lmt_powerlaw *p, int k, double x, double pred,
			  double hw)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "loss_fit");
	lmt_json_u64(j, "pilots", (uint64_t)k);
	lmt_json_num(j, "E", p->E);
	lmt_json_num(j, "A", p->A);
	lmt_json_num(j, "alpha", p->alpha);
	lmt_json_num(j, "target_flops", x);
	lmt_json_num(j, "predicted_loss", pred);
	lmt_json_num(j, "halfwidth", hw);
}

/* ---- the table ---- */

void lmt_plantext_ledger(struct lmt_strbuf *sb, const struct lmt_ledger_cfg *c, const struct lmt_ledger *l)
{
	char a[32], b[32], d[32], e[32], f[32], rc[32];
	double P = (double)l->nparams;
	if (c->recompute_every > 1)
		snprintf(rc, sizeof rc, "every:%d", c->recompute_every);
	else
		snprintf(rc, sizeof rc, "%s", c->recompute_every ? "block" : "none");
	lmt_strbuf_printf(sb, "model: %d layers, %d heads, %d channels, context %d, vocabulary %d%s: %zu parameters\n",
			  c->model.L, c->model.NH, c->model.C, c->model.max_T, c->model.V,
			  c->model.untied ? " (untied)" : "", l->nparams);
	lmt_strbuf_printf(sb, "batch: %d x %d, %s, recompute %s; layout: world %d, ZeRO-%d, tp %d, pp %d, cp %d%s\n\n",
			  c->B, c->T, lmt_dtype_name(c->dtype), rc, c->world, c->zero, c->tp, c->pp, c->cp,
			  l->estimate ? " (estimate)" : "");
	lmt_strbuf_printf(sb, "%-22s %-12s %-6s %12s %8s  %s\n", "term", "group", "dtype", "bytes", "B/param", "note");
	for (int i = 0; i < l->n; i++) {
		const struct lmt_ledger_term *t = &l->t[i];
		lmt_strbuf_printf(sb, "%-22s %-12s %-6s %12s %8.2f  %s\n", t->name, lmt_ledger_group_names[t->group],
				  dtype_of(t->dtype), lmt_fmt_bytes((double)t->bytes, a), t->bytes / P,
				  t->note ? t->note : "");
	}
	lmt_strbuf_printf(sb, "\nper block %s; activations %s (%s without recompute); model state %s (%.2f B/param; "
			  "the\nrule of thumb: 16 = 2 + 2 + 4 + 8 for 16-bit weights and grads, fp32 master and "
			  "moments)\ntotal per device %s\n", lmt_fmt_bytes((double)l->per_block, a),
			  lmt_fmt_bytes((double)l->acts_total, b), lmt_fmt_bytes((double)l->acts_none.total, d),
			  lmt_fmt_bytes((double)l->state_total, e), l->state_total / P, lmt_fmt_bytes((double)l->total, f));
}

void lmt_plantext_budget(struct lmt_strbuf *b, const struct lmt_budget_opts *o, const struct lmt_budget_in *in,
			 const struct lmt_budget *bu)
{
	lmt_strbuf_printf(b, "%.4g tokens at %.4g tokens/s on %g devices: %.4g s of training\n", o->target_tokens,
			  in->tokens_per_s, in->devices, bu->train_s);
	lmt_strbuf_printf(b, "checkpoint: %.3g s each, every %.4g s (sqrt(2 C MTBF), MTBF %.4g s): overhead %.2f%%; "
			  "%.3g failures expected, %.4g s lost each\n", in->ckpt_cost_s, bu->interval_s, o->mtbf_s,
			  100 * bu->overhead_frac, bu->failures, bu->lost_per_failure_s);
	for (int i = 0; i < 6; i++)
		lmt_strbuf_printf(b, "  %-12s %12.4g device-hours\n", lmt_budget_terms[i], bu->device_h[i]);
	lmt_strbuf_printf(b, "  %-12s %12.4g device-hours (%.4g h of wall time)\n", "total", bu->device_h_total,
			  bu->wall_s / 3600);
}
