/*
 * budget.h: the compute budget of a planned run, from pilot runs.
 *
 * Training time is the target tokens over the measured rate. Checkpoints cost C
 * seconds each; the interval between them is Young's first-order optimum
 * tau = sqrt(2 C M) for a mean time between failures M (Young 1974; Daly 2006
 * keeps it as the first term), with the overhead C / tau of checkpointing and
 * tau / (2 M) of the work lost, on average half an interval per failure, plus
 * the restart cost R each time. Expected failures are the wall time over M.
 * Device-hours: every term times the devices, and the pilots' own device time.
 */
#ifndef LMT_BUDGET_H
#define LMT_BUDGET_H

#include "core/error.h"
#include "model/ledger.h"
#include "plan/fit.h"
#include "plan/runread.h"

struct lmt_budget_opts {
	double target_tokens;
	double mtbf_s, restart_s;    /* defaults 86400, 600 */
	double idle_frac;            /* of the allocation (0.05) */
};

struct lmt_budget_in {
	double tokens_per_s;         /* of the whole job */
	double devices;
	double ckpt_cost_s;          /* per checkpoint */
	double eval_s, eval_every_s; /* one evaluation's seconds; training seconds between them (0: none) */
	double pilots_device_s;
};

struct lmt_budget {
	double train_s, interval_s, overhead_frac;
	double ckpts, ckpt_s, failures, lost_per_failure_s, fail_s, eval_s, idle_s, wall_s;
	double device_h[6];          /* training, pilots, failures, checkpoints, evaluation, idle */
	double device_h_total;
};
extern const char *const lmt_budget_terms[6];

/* sqrt(2 C M): Young's interval. */
double lmt_young_interval(double cost_s, double mtbf_s);
/* Expected lost work per failure at interval tau: half an interval plus the
 * restart: tau / 2 + R. */
double lmt_lost_per_failure(double tau, double restart_s);
void lmt_budget_defaults(struct lmt_budget_opts *o);
int lmt_budget_compute(const struct lmt_budget_opts *o, const struct lmt_budget_in *in, struct lmt_budget *b,
		       struct lmt_err *err);

/* The inputs from the pilot runs m[0..n), n >= 1: their device time (each one's
 * wall seconds, else its median step times its updates, times its world), and the
 * last pilot's costs, its rate scaled linearly (an assumption: perfect scaling)
 * from its world to devices (0: the last pilot's world). */
void lmt_budget_in_from_pilots(const struct lmt_run_measured *m, int n, int devices, struct lmt_budget_in *in);

/* The loss power law (plan/fit.h) over the pilots with a compute count (train's
 * FLOPs per token, else 6 N) and a loss (the last evaluation's, else training's):
 * *used gets how many; fitted only when there are two or more (0 and p untouched
 * otherwise). */
int lmt_budget_loss_fit(const struct lmt_run_measured *m, int n, struct lmt_powerlaw *p, int *used,
			struct lmt_err *err);
/* Compute of the planned run: its FLOPs per token (6 x params when params > 0,
 * else the model's count at T positions) times the target tokens. */
double lmt_budget_target_flops(const struct lmt_ledger_cfg *c, double params, double target_tokens);

#endif
