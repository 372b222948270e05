/*
 * budget.c: the compute budget (budget.h).
 */
#include "plan/budget.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const lmt_budget_terms[6] = { "training", "pilots", "failures", "checkpoints", "evaluation", "idle" };

double lmt_young_interval(double cost_s, double mtbf_s)
{
	return cost_s > 0 && mtbf_s > 0 ? sqrt(2 * cost_s * mtbf_s) : 0;
}

double lmt_lost_per_failure(double tau, double restart_s)
{
	return tau / 2 + restart_s;
}

void lmt_budget_defaults(struct lmt_budget_opts *o)
{
	if (!o->mtbf_s)
		o->mtbf_s = 86400;
	if (!o->restart_s)
		o->restart_s = 600;
	if (!o->idle_frac)
		o->idle_frac = 0.05;
}

int lmt_budget_compute(const struct lmt_budget_opts *o, const struct lmt_budget_in *in, struct lmt_budget *b,
		       struct lmt_err *err)
{
	memset(b, 0, sizeof *b);
	if (!(o->target_tokens > 0) || !(in->tokens_per_s > 0) || !(in->devices >= 1))
		return lmt_err_set(err, LMT_EINVAL, "a budget needs target tokens, a measured rate and devices (got %g "
				   "tokens, %g tokens/s, %g devices)", o->target_tokens, in->tokens_per_s, in->devices);
	if (o->idle_frac < 0 || o->idle_frac >= 1 || o->mtbf_s <= 0 || o->restart_s < 0)
		return lmt_err_set(err, LMT_EINVAL, "idle fraction in [0, 1), MTBF positive, restart cost not negative");
	b->train_s = o->target_tokens / in->tokens_per_s;
	b->interval_s = lmt_young_interval(in->ckpt_cost_s, o->mtbf_s);
	b->ckpts = b->interval_s > 0 ? floor(b->train_s / b->interval_s) : 0;
	b->ckpt_s = b->ckpts * in->ckpt_cost_s;
	b->eval_s = in->eval_every_s > 0 ? floor(b->train_s / in->eval_every_s) * in->eval_s : 0;
	/* without checkpoints a failure loses on average half of what was done so far */
	b->lost_per_failure_s = b->interval_s > 0 ? lmt_lost_per_failure(b->interval_s, o->restart_s)
						  : lmt_lost_per_failure(b->train_s, o->restart_s);
	double busy = b->train_s + b->ckpt_s + b->eval_s;
	/* failures during the lost work and restarts happen too: solve w = busy + (w / M) lost */
	double r = b->lost_per_failure_s / o->mtbf_s;
	if (r >= 1)
		return lmt_err_set(err, LMT_EINVAL, "a failure every %g s loses %g s: the run never ends", o->mtbf_s,
				   b->lost_per_failure_s);
	double w = busy / (1 - r);
	b->failures = w / o->mtbf_s;
	b->fail_s = b->failures * b->lost_per_failure_s;
	b->wall_s = w / (1 - o->idle_frac);
	b->idle_s = b->wall_s - w;
	b->overhead_frac = b->interval_s > 0 ? in->ckpt_cost_s / b->interval_s + b->interval_s / (2 * o->mtbf_s) : 0;
	double secs[6] = { b->train_s, 0, b->fail_s, b->ckpt_s, b->eval_s, b->idle_s };
	for (int i = 0; i < 6; i++) {
		b->device_h[i] = i == 1 ? in->pilots_device_s / 3600 : secs[i] * in->devices / 3600;
		b->device_h_total += b->device_h[i];
	}
	return 0;
}

void lmt_budget_in_from_pilots(const struct lmt_run_measured *m, int n, int devices, struct lmt_budget_in *in)
{
	*in = (struct lmt_budget_in){ 0 };
	for (int i = 0; i < n; i++) {
		double wall = m[i].wall_s > 0 ? m[i].wall_s : m[i].step_s * (double)m[i].updates;
		in->pilots_device_s += wall * m[i].cfg.world;
	}
	const struct lmt_run_measured *last = &m[n - 1];
	in->devices = devices ? devices : last->cfg.world;
	in->tokens_per_s = last->tokens_per_s * in->devices / last->cfg.world;
	in->ckpt_cost_s = last->ckpt_cost_s;
	in->eval_s = last->eval_s;
	in->eval_every_s = (double)last->eval_every * last->step_s;
}

int lmt_budget_loss_fit(const struct lmt_run_measured *m, int n, struct lmt_powerlaw *p, int *used,
			struct lmt_err *err)
{
	double *C = calloc((size_t)n, sizeof *C), *L = calloc((size_t)n, sizeof *L);
	int k = 0, rc = 0;
	if (!C || !L) {
		free(C);
		free(L);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		double fpt = m[i].flops_per_token > 0 ? m[i].flops_per_token : 6.0 * (double)m[i].nparams;
		double loss = isfinite(m[i].val_loss) ? m[i].val_loss : m[i].loss;
		if (fpt > 0 && m[i].tokens_total && isfinite(loss)) {
			C[k] = fpt * (double)m[i].tokens_total;
			L[k++] = loss;
		}
	}
	*used = k;
	int spread = 0;
	for (int i = 1; i < k; i++)
		spread |= C[i] != C[0];
	if (k >= 2 && !spread)
		rc = lmt_err_set(err, LMT_EINVAL, "the %d pilots all used %.3g FLOPs: a loss curve needs pilots of "
				 "different compute (no loss fit)", k, C[0]);
	else if (k >= 2)
		rc = lmt_powerlaw_fit(C, L, k, 0, p, err);
	free(C);
	free(L);
	return rc;
}

double lmt_budget_target_flops(const struct lmt_ledger_cfg *c, double params, double target_tokens)
{
	struct lmt_gpt_config mc = c->model;
	mc.Vp = lmt_gpt_padded_vocab(mc.V);
	double fpt = params > 0 ? 6 * params : lmt_gpt_flops_per_token(&mc, c->T);
	return fpt * target_tokens;
}
