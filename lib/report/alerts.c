/*
 * alerts.c: alert episodes over the updates of a run (alerts.h).
 */
#include "report/alerts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

static const char *const names[LMT_ALERT_COUNT] = {
	"nonfinite", "loss_spike", "grad_spike", "clipping", "overflow", "starvation", "skew", "val_regression",
	"comm", "memory", "memory_ledger", "ckpt_slow", "ckpt_age", "ckpt_verify", "budget",
};

const char *lmt_alert_name(int kind)
{
	return kind >= 0 && kind < LMT_ALERT_COUNT ? names[kind] : "?";
}

int lmt_alert_kind(const char *name, size_t len)
{
	for (int k = 0; k < LMT_ALERT_COUNT; k++)
		if (strlen(names[k]) == len && !strncmp(name, names[k], len))
			return k;
	return -1;
}

double *lmt_alert_threshold(struct lmt_alert_cfg *c, int kind)
{
	double *at[LMT_ALERT_COUNT] = { NULL, &c->loss_sigma, &c->grad_ratio, &c->clip_frac, &c->overflow_frac,
					&c->starve_frac, &c->skew, &c->val_frac, &c->comm_ratio, &c->mem_frac,
					&c->mem_ledger, &c->ckpt_slow, &c->ckpt_age, &c->ckpt_verify, &c->budget };
	return kind >= 0 && kind < LMT_ALERT_COUNT ? at[kind] : NULL;
}

void lmt_alert_cfg_default(struct lmt_alert_cfg *c)
{
	*c = (struct lmt_alert_cfg){ .window = 50, .loss_sigma = 6.0, .grad_ratio = 5.0, .clip_frac = 0.8,
				     .overflow_frac = 0.2, .starve_frac = 0.25, .skew = 0.2, .val_frac = 0.02,
				     .comm_ratio = 3.0, .mem_frac = 0.9, .mem_ledger = 1.2, .ckpt_slow = 0.5,
				     .ckpt_age = 1.5, .ckpt_verify = 1, .budget = 0.2, .starve_min_s = 0.02,
				     .skew_min_s = 0.02, .comm_min_s = 0.02, .ckpt_min_s = 1.0 };
}

void lmt_alerts_init(struct lmt_alerts *a, const struct lmt_alert_cfg *cfg, const struct lmt_alert_plan *plan)
{
	memset(a, 0, sizeof *a);
	a->cfg = *cfg;
	if (plan)
		a->plan = *plan;
	if (a->cfg.window < 2)
		a->cfg.window = 2;
	if (a->cfg.window > LMT_ALERT_WINDOW_MAX)
		a->cfg.window = LMT_ALERT_WINDOW_MAX;
	a->best_val = INFINITY;
	a->comm_base = -1;
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

/* an episode holds until its value falls under half its threshold (a ratio of 1 or
 * more: half its excess over 1), so that a value hovering at the threshold does
 * not fire on every other update */
static int over(const struct lmt_alerts *a, int kind, double v, double thr)
{
	double release = thr >= 1 ? 1 + (thr - 1) / 2 : thr / 2;
	return thr > 0 && isfinite(v) && v > (a->active[kind] ? release : thr);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

static double median_of(const double *v, int n)
{
	double t[LMT_ALERT_WINDOW_MAX];
	memcpy(t, v, (size_t)n * sizeof *t);
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
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

static double sum(const double *v, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	return s;
}

/* the rank with the most excess busy time over the held updates */
static int slowest_rank(const struct lmt_alerts *a)
{
	int best = a->slowest[0];
	double best_e = -1;
	for (int i = 0; i < a->n; i++) {
		double e = 0;
		for (int k = 0; k < a->n; k++)
			e += a->slowest[k] == a->slowest[i] ? a->excess[k] : 0;
		if (e > best_e)
			best = a->slowest[i], best_e = e;
	}
	return best;
}

/* the timing kinds, over the window that holds this update */
static void timing(struct lmt_alerts *a, const struct lmt_alert_obs *o, lmt_alert_fn fn, void *ctx)
{
	const struct lmt_alert_cfg *c = &a->cfg;
	char ev[240];
	uint64_t u = o->update;
	int n = a->n, enough = n >= c->window / 2;

	double w = sum(a->wait, n), s = sum(a->step, n), sf = s > 0 ? w / s : 0;
	snprintf(ev, sizeof ev, "the loader's wait was %.0f%% of the last %d updates' %.3f s (%.1f ms an update)",
		 100 * sf, n, s, 1e3 * w / n);
	edge(a, LMT_ALERT_STARVATION, enough && w / n >= c->starve_min_s && over(a, LMT_ALERT_STARVATION, sf, c->starve_frac),
	     u, sf, c->starve_frac, ev, fn, ctx);

	double e = sum(a->excess, n), m = sum(a->median, n), kf = m > 0 ? e / m : 0;
	int r = slowest_rank(a);
	snprintf(ev, sizeof ev, "rank %d was slowest: the slowest rank's busy time %.0f%% over the median's in the last "
		 "%d updates (%.1f ms an update)", r, 100 * kf, n, 1e3 * e / n);
	edge(a, LMT_ALERT_SKEW, enough && o->ranks > 1 && e / n >= c->skew_min_s && over(a, LMT_ALERT_SKEW, kf, c->skew),
	     u, kf, c->skew, ev, fn, ctx);

	/* the baseline: the median of the run's first window, fixed once */
	if (o->ranks > 1 && a->comm_base < 0 && ++a->comm_seen >= c->window)
		a->comm_base = median_of(a->comm, n);
	if (a->comm_base >= 0) {
		/* the window's median: one stalled collective is not a degradation */
		double cm = median_of(a->comm, n), cr = a->comm_base > 0 ? cm / a->comm_base : INFINITY;
		snprintf(ev, sizeof ev, "collectives took a median %.2f ms an update over the last %d updates, %.1fx the "
			 "%.2f ms of the run's first %d", 1e3 * cm, n, cr, 1e3 * a->comm_base, c->window);
		edge(a, LMT_ALERT_COMM, cm - a->comm_base >= c->comm_min_s && over(a, LMT_ALERT_COMM, cr, c->comm_ratio),
		     u, cr, c->comm_ratio, ev, fn, ctx);
	}
}

/* memory against the plan, the checkpoints' age, the budget */
static void planned(struct lmt_alerts *a, const struct lmt_alert_obs *o, lmt_alert_fn fn, void *ctx)
{
	const struct lmt_alert_cfg *c = &a->cfg;
	const struct lmt_alert_plan *p = &a->plan;
	char ev[240], b1[32], b2[32];
	uint64_t u = o->update;

	if (p->mem_limit > 0 && o->mem_peak > 0) {
		double f = o->mem_peak / p->mem_limit;
		snprintf(ev, sizeof ev, "peak allocation %s, %.0f%% of the limit of %s", lmt_fmt_bytes_si(o->mem_peak, b1), 100 * f,
			 lmt_fmt_bytes_si(p->mem_limit, b2));
		edge(a, LMT_ALERT_MEMORY, over(a, LMT_ALERT_MEMORY, f, c->mem_frac), u, f, c->mem_frac, ev, fn, ctx);
	}
	if (p->mem_predicted > 0 && o->mem_peak > 0) {
		double f = o->mem_peak / p->mem_predicted;
		snprintf(ev, sizeof ev, "peak allocation %s, %.3fx the ledger's prediction of %s", lmt_fmt_bytes_si(o->mem_peak, b1),
			 f, lmt_fmt_bytes_si(p->mem_predicted, b2));
		edge(a, LMT_ALERT_MEMORY_LEDGER, over(a, LMT_ALERT_MEMORY_LEDGER, f, c->mem_ledger), u, f, c->mem_ledger, ev,
		     fn, ctx);
	}

	double age = 0, plan_age = 0;
	const char *unit = "";
	if (o->saved > a->judged && o->saved != a->pending) { /* a save begun, its verdict to come */
		a->pending = o->saved;
		a->pending_wall = o->wall;
	}
	int pending = a->pending > a->judged;
	uint64_t ref = pending ? a->pending : a->good_update;
	double ref_wall = pending ? a->pending_wall : a->good_wall;
	if (p->ckpt_every) {
		age = (double)(u - ref);
		plan_age = (double)p->ckpt_every;
		unit = " updates";
	} else if (p->ckpt_interval_s > 0) {
		age = o->wall - ref_wall;
		plan_age = p->ckpt_interval_s;
		unit = " s";
	}
	if (plan_age > 0) {
		double f = age / plan_age;
		if (pending)
			snprintf(ev, sizeof ev, "the checkpoint of update %llu, still being written, is %.0f%s old; the plan: "
				 "one every %.0f%s", (unsigned long long)ref, age, unit, plan_age, unit);
		else if (a->good_update > a->first_update)
			snprintf(ev, sizeof ev, "the last verified checkpoint, of update %llu, is %.0f%s old; the plan: one "
				 "every %.0f%s", (unsigned long long)a->good_update, age, unit, plan_age, unit);
		else
			snprintf(ev, sizeof ev, "no verified checkpoint in the %.0f%s since update %llu; the plan: one every "
				 "%.0f%s", age, unit, (unsigned long long)a->good_update, plan_age, unit);
		edge(a, LMT_ALERT_CKPT_AGE, c->ckpt_age > 0 && f > c->ckpt_age, u, f, c->ckpt_age, ev, fn, ctx);
	}

	/* the budget, at the rate of this process's updates so far */
	uint64_t done = u - a->ref_update;
	if (a->n >= c->window / 2 && done && o->tokens > a->ref_tokens && p->budget_tokens > 0) {
		double per = (double)(o->tokens - a->ref_tokens) / (double)done;
		double tok = (double)o->tokens + per * (double)(p->updates > u ? p->updates - u : 0);
		double dt = tok / p->budget_tokens - 1, dh = 0, hours = 0;
		if (p->budget_device_h > 0 && o->wall > a->ref_wall) {
			double rate = (double)(o->tokens - a->ref_tokens) / (o->wall - a->ref_wall); /* tokens per s */
			hours = p->budget_tokens / rate * (p->devices > 0 ? p->devices : 1) / 3600;
			dh = hours / p->budget_device_h - 1;
		}
		double f = fabs(dt) > dh ? fabs(dt) : dh;
		if (fabs(dt) >= dh)
			snprintf(ev, sizeof ev, "the run will consume %.4g tokens at --updates %llu, %+.0f%% off the budget's %.4g",
				 tok, (unsigned long long)p->updates, 100 * dt, p->budget_tokens);
		else
			snprintf(ev, sizeof ev, "%.4g tokens at this rate take %.4g device-hours, %+.0f%% off the budget's %.4g",
				 p->budget_tokens, hours, 100 * dh, p->budget_device_h);
		edge(a, LMT_ALERT_BUDGET, over(a, LMT_ALERT_BUDGET, f, c->budget), u, f, c->budget, ev, fn, ctx);
	}
}

void lmt_alerts_update(struct lmt_alerts *a, const struct lmt_alert_obs *o, lmt_alert_fn fn, void *ctx)
{
	const struct lmt_alert_cfg *c = &a->cfg;
	char ev[200];
	double thr = 0, mean = 0;
	uint64_t u = o->update;

	if (!a->started) { /* the run (or this process's part of it) starts before this update */
		a->started = 1;
		a->first_update = a->good_update = u - 1;
		a->good_wall = a->last_ckpt_wall = o->wall - o->step;
		/* the rates are measured from the end of this first update */
		a->ref_update = u;
		a->ref_tokens = o->tokens;
		a->ref_wall = o->wall;
	}

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
	     o->grad_norm > (thr = c->grad_ratio * (mean = median_of(a->gnorm, a->n)));
	snprintf(ev, sizeof ev, "gradient norm %.4g against a median of %.4g over the last %d updates (threshold %.4g)",
		 o->grad_norm, mean, a->n, thr);
	edge(a, LMT_ALERT_GRAD_SPIKE, on, u, o->grad_norm, thr, ev, fn, ctx);

	/* the windows take this update first: a fraction of the last `window` updates */
	int w = c->window, at = a->at;
	a->loss[at] = isfinite(o->loss) ? o->loss : (a->n ? a->loss[(at + w - 1) % w] : 0);
	a->gnorm[at] = isfinite(o->grad_norm) ? o->grad_norm : (a->n ? a->gnorm[(at + w - 1) % w] : 0);
	a->clip[at] = (unsigned char)(o->clipped != 0);
	a->ovf[at] = (unsigned char)(o->overflow != 0);
	a->wait[at] = o->data_wait > 0 ? o->data_wait : 0;
	a->step[at] = o->step > 0 ? o->step : 0;
	a->excess[at] = o->busy_max > o->busy_median ? o->busy_max - o->busy_median : 0;
	a->median[at] = o->busy_median > 0 ? o->busy_median : 0;
	a->slowest[at] = o->slowest;
	a->comm[at] = o->comm > 0 ? o->comm : 0;
	a->at = (at + 1) % w;
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

	timing(a, o, fn, ctx);
	planned(a, o, fn, ctx);
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

void lmt_alerts_ckpt(struct lmt_alerts *a, uint64_t update, double wall, double write_s, int verified,
		     const char *why, lmt_alert_fn fn, void *ctx)
{
	const struct lmt_alert_cfg *c = &a->cfg;
	char ev[1100]; /* the verifier's message whole */
	double since = wall - a->last_ckpt_wall, f = since > 0 ? write_s / since : 0;
	snprintf(ev, sizeof ev, "the checkpoint of update %llu took %.2f s to write, %.0f%% of the %.2f s since the last",
		 (unsigned long long)update, write_s, 100 * f, since);
	edge(a, LMT_ALERT_CKPT_SLOW, write_s >= c->ckpt_min_s && over(a, LMT_ALERT_CKPT_SLOW, f, c->ckpt_slow), update, f,
	     c->ckpt_slow, ev, fn, ctx);
	a->last_ckpt_wall = wall;
	if (update > a->judged)
		a->judged = update;
	if (verified)
		snprintf(ev, sizeof ev, "the checkpoint of update %llu verified", (unsigned long long)update);
	else
		snprintf(ev, sizeof ev, "the checkpoint of update %llu failed its verification: %s",
			 (unsigned long long)update, why ? why : "?");
	edge(a, LMT_ALERT_CKPT_VERIFY, c->ckpt_verify > 0 && !verified, update, verified ? 1 : 0, 1, ev, fn, ctx);
	if (verified) {
		a->good_update = update;
		a->good_wall = wall;
		edge(a, LMT_ALERT_CKPT_AGE, 0, update, 0, c->ckpt_age, ev, fn, ctx);
	}
}
