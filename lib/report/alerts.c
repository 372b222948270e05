/*
 * alerts.c: alert episodes over the updates of a run (alerts.h).
 */
#include "report/alerts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[LMT_ALERT_COUNT] = {
	"nonfinite", "loss_spike", "grad_spike", "clipping", "overflow", "starvation", "skew", "val_regression",
};

const char *lmt_alert_name(int kind)
{
	return kind >= 0 && kind < LMT_ALERT_COUNT ? names[kind] : "?";
}

void lmt_alert_cfg_default(struct lmt_alert_cfg *c)
{
	*c = (struct lmt_alert_cfg){ 50, 6.0, 5.0, 0.8, 0.2, 0.25, 0.2, 0.02 };
}

void lmt_alerts_init(struct lmt_alerts *a, const struct lmt_alert_cfg *cfg)
{
	memset(a, 0, sizeof *a);
	a->cfg = *cfg;
	if (a->cfg.window < 2)
		a->cfg.window = 2;
	if (a->cfg.window > LMT_ALERT_WINDOW_MAX)
		a->cfg.window = LMT_ALERT_WINDOW_MAX;
	a->best_val = INFINITY;
}

/* an episode starts or ends when on changes */
static void edge(struct lmt_alerts *a, int kind, int on, uint64_t update, double value, double threshold,
		 const char *evidence, lmt_alert_fn fn, void *ctx)
{
	if (on == a->active[kind])
		return;
	a->active[kind] = on;
	if (on)
		a->fired[kind]++;
	if (fn)
		fn(ctx, kind, on, update, value, threshold, evidence);
}

/* the mean and (floored) deviation of the n held values of v */
static void moments(const struct lmt_alerts *a, const double *v, double *mean, double *dev)
{
	double s = 0, q = 0;
	for (int i = 0; i < a->n; i++)
		s += v[i];
	*mean = s / a->n;
	for (int i = 0; i < a->n; i++)
		q += (v[i] - *mean) * (v[i] - *mean);
	*dev = sqrt(q / (a->n > 1 ? a->n - 1 : 1));
	if (*dev < 1e-3 * fabs(*mean))
		*dev = 1e-3 * fabs(*mean);
}

/* a fraction's episode holds until it falls under half its threshold, so that a
 * value hovering at the threshold does not fire on every other update */
static int over(const struct lmt_alerts *a, int kind, double v, double thr)
{
	return thr > 0 && v > (a->active[kind] ? thr / 2 : thr);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static double median(const struct lmt_alerts *a, const double *v)
{
	double t[LMT_ALERT_WINDOW_MAX];
	memcpy(t, v, (size_t)a->n * sizeof *t);
	qsort(t, (size_t)a->n, sizeof *t, cmp_double);
	return a->n % 2 ? t[a->n / 2] : (t[a->n / 2 - 1] + t[a->n / 2]) / 2;
}

static int spike(const struct lmt_alerts *a, const double *v, double x, double sigma, double *thr, double *mean)
{
	double dev;
	if (sigma <= 0 || a->n < a->cfg.window / 2 || !isfinite(x))
		return 0;
	moments(a, v, mean, &dev);
	*thr = *mean + sigma * dev;
	return x > *thr;
}

void lmt_alerts_update(struct lmt_alerts *a, const struct lmt_alert_obs *o, lmt_alert_fn fn, void *ctx)
{
	const struct lmt_alert_cfg *c = &a->cfg;
	char ev[200];
	double thr = 0, mean = 0;
	uint64_t u = o->update;

	snprintf(ev, sizeof ev, "non-finite %s at update %llu", isfinite(o->loss) ? "gradient" : "loss",
		 (unsigned long long)u);
	edge(a, LMT_ALERT_NONFINITE, o->nonfinite && !o->overflow, u, isfinite(o->loss) ? o->grad_norm : o->loss, 0,
	     ev, fn, ctx);

	int on = spike(a, a->loss, o->loss, c->loss_sigma, &thr, &mean);
	snprintf(ev, sizeof ev, "loss %.4f against a mean of %.4f over the last %d updates (threshold %.4f)", o->loss,
		 mean, a->n, thr);
	edge(a, LMT_ALERT_LOSS_SPIKE, on, u, o->loss, thr, ev, fn, ctx);

	/* gradient norms are heavy-tailed: against the median, not a deviation */
	on = c->grad_ratio > 0 && a->n >= c->window / 2 && isfinite(o->grad_norm) &&
	     o->grad_norm > (thr = c->grad_ratio * (mean = median(a, a->gnorm)));
	snprintf(ev, sizeof ev, "gradient norm %.4g against a median of %.4g over the last %d updates (threshold %.4g)",
		 o->grad_norm, mean, a->n, thr);
	edge(a, LMT_ALERT_GRAD_SPIKE, on, u, o->grad_norm, thr, ev, fn, ctx);

	/* the windows take this update first: a fraction of the last `window` updates */
	int w = c->window;
	a->loss[a->at] = isfinite(o->loss) ? o->loss : (a->n ? a->loss[(a->at + w - 1) % w] : 0);
	a->gnorm[a->at] = isfinite(o->grad_norm) ? o->grad_norm : (a->n ? a->gnorm[(a->at + w - 1) % w] : 0);
	a->clip[a->at] = (unsigned char)(o->clipped != 0);
	a->ovf[a->at] = (unsigned char)(o->overflow != 0);
	a->at = (a->at + 1) % w;
	if (a->n < w)
		a->n++;
	int clips = 0, ovfs = 0;
	for (int i = 0; i < a->n; i++)
		clips += a->clip[i], ovfs += a->ovf[i];
	double cf = (double)clips / w, of = (double)ovfs / w;
	snprintf(ev, sizeof ev, "%d of the last %d updates clipped", clips, w);
	edge(a, LMT_ALERT_CLIPPING, over(a, LMT_ALERT_CLIPPING, cf, c->clip_frac), u, cf, c->clip_frac, ev, fn, ctx);
	snprintf(ev, sizeof ev, "%d of the last %d updates skipped for an fp16 overflow", ovfs, w);
	edge(a, LMT_ALERT_OVERFLOW, over(a, LMT_ALERT_OVERFLOW, of, c->overflow_frac), u, of, c->overflow_frac, ev, fn,
	     ctx);

	double sf = o->step > 0 ? o->data_wait / o->step : 0;
	snprintf(ev, sizeof ev, "the loader's wait was %.0f%% of the update's %.3f s", 100 * sf, o->step);
	edge(a, LMT_ALERT_STARVATION, over(a, LMT_ALERT_STARVATION, sf, c->starve_frac), u, sf, c->starve_frac, ev, fn, ctx);

	snprintf(ev, sizeof ev, "rank %d's step took %.0f%% longer than the median", o->slowest, 100 * o->skew);
	edge(a, LMT_ALERT_SKEW, over(a, LMT_ALERT_SKEW, o->skew, c->skew), u, o->skew, c->skew, ev, fn, ctx);
}

void lmt_alerts_eval(struct lmt_alerts *a, uint64_t update, double val, lmt_alert_fn fn, void *ctx)
{
	char ev[160];
	double thr = a->best_val * (1 + a->cfg.val_frac);
	int on = a->cfg.val_frac > 0 && isfinite(a->best_val) && isfinite(val) && val > thr;
	snprintf(ev, sizeof ev, "validation loss %.4f against the best %.4f (threshold %.4f)", val, a->best_val, thr);
	edge(a, LMT_ALERT_VAL_REGRESSION, on, update, val, thr, ev, fn, ctx);
	if (isfinite(val) && val < a->best_val)
		a->best_val = val;
}
