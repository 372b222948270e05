/*
 * alerts.h: the training run's alerts, as episodes.
 *
 * The trainer feeds one observation per update (and one per evaluation, one per
 * checkpoint); each kind of alert below has a condition with a threshold the user
 * can set, and fires once when its condition starts to hold (an episode) and
 * clears once when it stops, so a run that clips for 300 updates in a row gets two
 * events, not 300. The callback gets the kind, whether it fired or cleared, the
 * update, the value that crossed the threshold, the threshold, and the evidence in
 * words.
 *
 *   nonfinite      a non-finite loss or gradient (the update skipped or the run stopped)
 *   loss_spike     the loss above the mean of the last `window` losses by more than
 *                  loss_sigma of their standard deviation (at least window / 2 seen;
 *                  the deviation floored at 1e-3 of the mean, so that a flat curve's
 *                  noise does not fire)
 *   grad_spike     the gradient norm above grad_ratio times the median of its last
 *                  `window` values (norms are heavy-tailed: a deviation would fire often)
 *   clipping       more than clip_frac of the last `window` updates clipped
 *   overflow       fp16: more than overflow_frac of the last `window` updates skipped
 *   starvation     the loader's summed wait over the last `window` updates above
 *                  starve_frac of their summed time
 *   skew           the slowest rank's busy time (its step less its waits in
 *                  collectives and for its loader: a rank waiting for a slow peer is
 *                  not slow itself, and a slow loader is starvation)
 *                  above the median rank's by more than skew of it, summed over the
 *                  last `window` updates; it names the rank with the most of that excess
 *   comm           several ranks: the median exposed collective time of the last
 *                  `window` updates (the least any rank waited: the part no rank's
 *                  slowness explains) above comm_ratio times the median of the run's
 *                  first `window` updates (the median, so one stalled collective
 *                  is not a degradation)
 *   memory         the allocator's peak above mem_frac of plan.mem_limit
 *   memory_ledger  the allocator's peak above mem_ledger times the ledger's
 *                  prediction (plan.mem_predicted, model/ledger.h)
 *   ckpt_slow      a checkpoint's write above ckpt_slow of the time since the one
 *                  before (or since the run's first update)
 *   ckpt_age       the last verified checkpoint older than ckpt_age times the planned
 *                  interval (plan.ckpt_every updates, or plan.ckpt_interval_s); a
 *                  checkpoint still being written (obs.saved newer than the last
 *                  one judged) counts as made until its verification says otherwise
 *   ckpt_verify    a checkpoint that failed its verification (clears at the next
 *                  one that passes)
 *   budget         the tokens the run will have consumed at plan.updates, or the
 *                  device-hours of plan.budget_tokens at the rate so far, off the
 *                  budget by more than the fraction budget (device-hours: over it)
 *   val_regression a validation loss above the best so far by more than val_frac
 *
 * The timing kinds judge a window, never one update, and need at least window / 2
 * updates seen and a mean excess per update of at least their floor (*_min_s):
 * one scheduling hiccup on a tiny model's millisecond steps, or microseconds of
 * noise, cannot fire them. The fractions (clipping, overflow, starvation, skew,
 * comm, memory, ckpt_slow, budget) end their episode only when they fall under half
 * the threshold (ratios of 1 or more: half its excess over 1). A threshold of 0 turns
 * its kind off. memory and memory_ledger watch a peak that only grows: they clear
 * only with a new plan.
 */
#ifndef LMT_ALERTS_H
#define LMT_ALERTS_H

#include <stddef.h>
#include <stdint.h>

enum lmt_alert_kind {
	LMT_ALERT_NONFINITE = 0,
	LMT_ALERT_LOSS_SPIKE,
	LMT_ALERT_GRAD_SPIKE,
	LMT_ALERT_CLIPPING,
	LMT_ALERT_OVERFLOW,
	LMT_ALERT_STARVATION,
	LMT_ALERT_SKEW,
	LMT_ALERT_VAL_REGRESSION,
	LMT_ALERT_COMM,
	LMT_ALERT_MEMORY,
	LMT_ALERT_MEMORY_LEDGER,
	LMT_ALERT_CKPT_SLOW,
	LMT_ALERT_CKPT_AGE,
	LMT_ALERT_CKPT_VERIFY,
	LMT_ALERT_BUDGET,
	LMT_ALERT_COUNT
};

#define LMT_ALERT_WINDOW_MAX 1024

struct lmt_alert_cfg {
	int window;              /* updates the running statistics look back over (default 50) */
	double loss_sigma, grad_ratio, clip_frac, overflow_frac, starve_frac, skew, val_frac;
	double comm_ratio, mem_frac, mem_ledger, ckpt_slow, ckpt_age, ckpt_verify, budget;
	/* floors (seconds): the mean excess per update of the window below which
	 * starvation, skew and comm cannot fire, and the shortest write ckpt_slow
	 * judges */
	double starve_min_s, skew_min_s, comm_min_s, ckpt_min_s;
};

/* What the run planned, for memory, the checkpoints and the budget (0: not known,
 * that kind off). */
struct lmt_alert_plan {
	double mem_limit, mem_predicted;     /* bytes */
	uint64_t ckpt_every;                 /* updates */
	double ckpt_interval_s;
	uint64_t updates;                    /* the run's --updates */
	double budget_tokens, budget_device_h;
	int devices;
};

/* One update as the alerts see it. */
struct lmt_alert_obs {
	uint64_t update;
	double loss, grad_norm;
	int clipped, overflow, nonfinite;
	double data_wait, step;  /* seconds: the update's loader wait (the most of any rank), its time */
	double busy_max, busy_median;  /* seconds: the ranks' step less their collective and loader waits */
	int slowest;             /* the rank of busy_max */
	int ranks;               /* world size */
	double comm;             /* seconds in collectives, the least of any rank */
	double mem_peak;         /* bytes: the allocator's peak so far (0: unknown) */
	double wall;             /* the run's clock after the update */
	uint64_t tokens;         /* valid tokens consumed so far */
	uint64_t saved;          /* the update of the newest checkpoint begun (0: none) */
};

struct lmt_alerts {
	struct lmt_alert_cfg cfg;
	struct lmt_alert_plan plan;
	double loss[LMT_ALERT_WINDOW_MAX], gnorm[LMT_ALERT_WINDOW_MAX];
	double wait[LMT_ALERT_WINDOW_MAX], step[LMT_ALERT_WINDOW_MAX];
	double excess[LMT_ALERT_WINDOW_MAX], median[LMT_ALERT_WINDOW_MAX], comm[LMT_ALERT_WINDOW_MAX];
	int slowest[LMT_ALERT_WINDOW_MAX];
	unsigned char clip[LMT_ALERT_WINDOW_MAX], ovf[LMT_ALERT_WINDOW_MAX];
	int n, at;               /* values held (<= window), and the next slot */
	double best_val;
	double comm_base;        /* the median of the first window's comm (< 0: not yet) */
	int comm_seen;
	/* the update before the first seen; the last verified checkpoint; the last of
	 * any; the first update's end, where the budget's rates start */
	int started;
	uint64_t first_update, good_update, ref_update, ref_tokens, judged, pending;
	double good_wall, last_ckpt_wall, ref_wall, pending_wall;
	int active[LMT_ALERT_COUNT];
	uint64_t fired[LMT_ALERT_COUNT];     /* episodes so far, by kind */
};

/* kind: enum lmt_alert_kind; fired: 1 at an episode's start, 0 when it clears */
typedef void (*lmt_alert_fn)(void *ctx, int kind, int fired, uint64_t update, double value, double threshold,
			     const char *evidence);

/* The defaults: window 50, loss_sigma 6, grad_ratio 5, clip_frac 0.8, overflow_frac
 * 0.2, starve_frac 0.25, skew 0.2, val_frac 0.02, comm_ratio 3, mem_frac 0.9,
 * mem_ledger 1.2, ckpt_slow 0.5, ckpt_age 1.5, ckpt_verify 1, budget 0.2; floors
 * 0.02 s (starvation, skew, comm: on a loaded machine a small model's loader
 * thread was seen waiting 7 ms an update for a core, for dozens of updates) and
 * 1 s (ckpt_slow). */
void lmt_alert_cfg_default(struct lmt_alert_cfg *c);
/* plan may be NULL (nothing planned) */
void lmt_alerts_init(struct lmt_alerts *a, const struct lmt_alert_cfg *cfg, const struct lmt_alert_plan *plan);
void lmt_alerts_update(struct lmt_alerts *a, const struct lmt_alert_obs *o, lmt_alert_fn fn, void *ctx);
void lmt_alerts_eval(struct lmt_alerts *a, uint64_t update, double val_loss, lmt_alert_fn fn, void *ctx);
/* A checkpoint of update, written in write_s seconds, finished at the run's clock
 * wall; verified 0 with why (the verification's message) if it failed. */
void lmt_alerts_ckpt(struct lmt_alerts *a, uint64_t update, double wall, double write_s, int verified,
		     const char *why, lmt_alert_fn fn, void *ctx);
/* "loss_spike", ... ("?" if unknown) */
const char *lmt_alert_name(int kind);
/* The kind named name (as --alert spells it), or -1. */
int lmt_alert_kind(const char *name, size_t len);
/* The threshold of kind in c (NULL for nonfinite, which has none). */
double *lmt_alert_threshold(struct lmt_alert_cfg *c, int kind);

#endif
