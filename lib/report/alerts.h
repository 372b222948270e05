/*
 * alerts.h: the training run's alerts, as episodes.
 *
 * The trainer feeds one observation per update (and one per evaluation); each kind
 * of alert below has a condition with a threshold the user can set, and fires once
 * when its condition starts to hold (an episode) and clears once when it stops, so
 * a run that clips for 300 updates in a row gets two events, not 300. The callback
 * gets the kind, whether it fired or cleared, the update, the value that crossed
 * the threshold, the threshold, and the evidence in words.
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
 *   starvation     the loader's wait above starve_frac of the update's time
 *   skew           the slowest rank's step above the median by more than skew
 *   val_regression a validation loss above the best so far by more than val_frac
 *
 * The fractions (clipping, overflow, starvation, skew) end their episode only when
 * they fall under half the threshold. A threshold of 0 turns its kind off.
 */
#ifndef LMT_ALERTS_H
#define LMT_ALERTS_H

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
	LMT_ALERT_COUNT
};

#define LMT_ALERT_WINDOW_MAX 1024

struct lmt_alert_cfg {
	int window;              /* updates the running statistics look back over (default 50) */
	double loss_sigma, grad_ratio, clip_frac, overflow_frac, starve_frac, skew, val_frac;
};

/* One update as the alerts see it. */
struct lmt_alert_obs {
	uint64_t update;
	double loss, grad_norm;
	int clipped, overflow, nonfinite;
	double data_wait, step;  /* seconds */
	double skew;             /* slowest rank's step / median - 1 (0 on one rank) */
	int slowest;             /* that rank */
};

struct lmt_alerts {
	struct lmt_alert_cfg cfg;
	double loss[LMT_ALERT_WINDOW_MAX], gnorm[LMT_ALERT_WINDOW_MAX];
	unsigned char clip[LMT_ALERT_WINDOW_MAX], ovf[LMT_ALERT_WINDOW_MAX];
	int n, at;               /* values held (<= window), and the next slot */
	double best_val;
	int active[LMT_ALERT_COUNT];
	uint64_t fired[LMT_ALERT_COUNT];     /* episodes so far, by kind */
};

/* kind: enum lmt_alert_kind; fired: 1 at an episode's start, 0 when it clears */
typedef void (*lmt_alert_fn)(void *ctx, int kind, int fired, uint64_t update, double value, double threshold,
			     const char *evidence);

/* The defaults: window 50, loss_sigma 6, grad_ratio 5, clip_frac 0.8, overflow_frac
 * 0.2, starve_frac 0.25, skew 0.2, val_frac 0.02. */
void lmt_alert_cfg_default(struct lmt_alert_cfg *c);
void lmt_alerts_init(struct lmt_alerts *a, const struct lmt_alert_cfg *cfg);
void lmt_alerts_update(struct lmt_alerts *a, const struct lmt_alert_obs *o, lmt_alert_fn fn, void *ctx);
void lmt_alerts_eval(struct lmt_alerts *a, uint64_t update, double val_loss, lmt_alert_fn fn, void *ctx);
/* "loss_spike", ... ("?" if unknown) */
const char *lmt_alert_name(int kind);

#endif
