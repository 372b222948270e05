/*
 * test-alerts: the alert episodes (lib/report/alerts.h) on synthetic runs.
 *
 * A clean run is a loss falling as 5 exp(-u / 400) plus a deterministic wiggle of
 * +-0.01 and a gradient norm of 1 +- 0.05: no alert. Into copies of it are planted
 * one anomaly each (a loss of 3x the curve for one update, a gradient norm of 50
 * for three, 60 clipped updates in a row, a loader waiting half of each update for
 * 10 updates, a slow rank, a non-finite loss, a validation loss 10% above the best):
 * exactly its kind fires, once, at the planted update, and clears once after it.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/alerts.h"
#include "tap.h"

struct log {
	int fired[LMT_ALERT_COUNT], cleared[LMT_ALERT_COUNT];
	uint64_t first[LMT_ALERT_COUNT];
	char evidence[200];
};

static void on_alert(void *ctx, int kind, int fired, uint64_t update, double value, double threshold,
		     const char *evidence)
{
	struct log *l = ctx;
	(void)value, (void)threshold;
	if (fired) {
		if (!l->fired[kind]++)
			l->first[kind] = update;
		snprintf(l->evidence, sizeof l->evidence, "%s", evidence);
	} else {
		l->cleared[kind]++;
	}
}

enum plant { NONE, LOSS, GRAD, CLIP, STARVE, SKEW, NAN_LOSS };

static void run(struct log *l, int plant, uint64_t at)
{
	struct lmt_alert_cfg c;
	struct lmt_alerts a;
	lmt_alert_cfg_default(&c);
	lmt_alerts_init(&a, &c);
	memset(l, 0, sizeof *l);
	for (uint64_t u = 1; u <= 400; u++) {
		struct lmt_alert_obs o = { u, 5 * exp(-(double)u / 400) + 0.01 * sin((double)u * 1.7),
					   1 + 0.05 * cos((double)u * 2.3), 0, 0, 0, 0.001, 0.1, 0.02, 1 };
		if (plant == LOSS && u == at)
			o.loss *= 3;
		if (plant == GRAD && u >= at && u < at + 3)
			o.grad_norm = 50;
		if (plant == CLIP && u >= at && u < at + 60)
			o.clipped = 1;
		if (plant == STARVE && u >= at && u < at + 10)
			o.data_wait = 0.05;
		if (plant == SKEW && u == at)
			o.skew = 0.9;
		if (plant == NAN_LOSS && u == at) {
			o.loss = NAN;
			o.nonfinite = 1;
		}
		lmt_alerts_update(&a, &o, on_alert, l);
		if (u % 50 == 0) /* validation, falling: never a regression */
			lmt_alerts_eval(&a, u, 4 * exp(-(double)u / 400), on_alert, l);
	}
}

static int only(const struct log *l, int kind)
{
	for (int k = 0; k < LMT_ALERT_COUNT; k++)
		if (k != kind && l->fired[k])
			return 0;
	return kind < 0 || (l->fired[kind] == 1 && l->cleared[kind] == 1);
}

int main(void)
{
	struct log l;
	run(&l, NONE, 0);
	tap_ok(only(&l, -1), "a clean run raises no alert");
	static const struct { int plant, kind; uint64_t at, when; const char *what; } cases[] = {
		{ LOSS, LMT_ALERT_LOSS_SPIKE, 200, 200, "one update's loss at 3x the curve" },
		{ GRAD, LMT_ALERT_GRAD_SPIKE, 150, 150, "a gradient norm of 50 for 3 updates" },
		/* 41 clipped of the last 50 is the first fraction over 0.8 */
		{ CLIP, LMT_ALERT_CLIPPING, 100, 140, "60 clipped updates in a row" },
		{ STARVE, LMT_ALERT_STARVATION, 300, 300, "the loader waiting half of each update for 10" },
		{ SKEW, LMT_ALERT_SKEW, 80, 80, "one update with a rank 90% slower than the median" },
		{ NAN_LOSS, LMT_ALERT_NONFINITE, 250, 250, "a non-finite loss" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		run(&l, cases[i].plant, cases[i].at);
		if (!tap_ok(only(&l, cases[i].kind) && l.first[cases[i].kind] == cases[i].when,
			    "%s: %s fires once at update %llu and clears once", cases[i].what,
			    lmt_alert_name(cases[i].kind), (unsigned long long)cases[i].when))
			for (int k = 0; k < LMT_ALERT_COUNT; k++)
				if (l.fired[k] || l.cleared[k])
					tap_diag("  %s: fired %d (first at %llu), cleared %d", lmt_alert_name(k), l.fired[k],
						 (unsigned long long)l.first[k], l.cleared[k]);
	}
	run(&l, LOSS, 200);
	tap_ok(strstr(l.evidence, "against a mean of") != NULL, "the evidence names the running mean (%s)", l.evidence);

	/* validation: a regression of 10% over the best fires; the next evaluation back
	 * under the threshold clears it */
	struct lmt_alert_cfg c;
	struct lmt_alerts a;
	lmt_alert_cfg_default(&c);
	lmt_alerts_init(&a, &c);
	memset(&l, 0, sizeof l);
	double val[] = { 4.0, 3.5, 3.2, 3.52, 3.1 };
	for (int i = 0; i < 5; i++)
		lmt_alerts_eval(&a, (uint64_t)(i + 1) * 50, val[i], on_alert, &l);
	tap_ok(only(&l, LMT_ALERT_VAL_REGRESSION) && l.first[LMT_ALERT_VAL_REGRESSION] == 200,
	       "a validation loss 10%% above the best fires at update 200 and clears at 250");
	/* a threshold of 0 turns a kind off */
	c.clip_frac = 0;
	lmt_alerts_init(&a, &c);
	memset(&l, 0, sizeof l);
	for (uint64_t u = 1; u <= 100; u++) {
		struct lmt_alert_obs o = { u, 3, 1, 1, 0, 0, 0, 0.1, 0, 0 };
		lmt_alerts_update(&a, &o, on_alert, &l);
	}
	tap_ok(!l.fired[LMT_ALERT_CLIPPING], "clip_frac 0: every update clipped raises nothing");
	/* hysteresis: a loader's share of the step alternating 0.26 and 0.24 around the
	 * threshold 0.25 is one episode, not one per crossing */
	lmt_alert_cfg_default(&c);
	lmt_alerts_init(&a, &c);
	memset(&l, 0, sizeof l);
	for (uint64_t u = 1; u <= 100; u++) {
		struct lmt_alert_obs o = { u, 3, 1, 0, 0, 0, u % 2 ? 0.026 : 0.024, 0.1, 0, 0 };
		lmt_alerts_update(&a, &o, on_alert, &l);
	}
	tap_ok(l.fired[LMT_ALERT_STARVATION] == 1 && l.cleared[LMT_ALERT_STARVATION] == 0,
	       "a loader share hovering at the threshold: one episode (fired %d, cleared %d)",
	       l.fired[LMT_ALERT_STARVATION], l.cleared[LMT_ALERT_STARVATION]);
	return tap_done();
}
