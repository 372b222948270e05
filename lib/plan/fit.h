/*
 * fit.h: least squares for memledger: the activation bytes of measured runs as a
 * linear model in the shapes that drive them, and the loss-versus-compute power law
 * with an irreducible term.
 *
 * Activations (measured: a run's peak allocation less its model state) are fitted
 * as  a (L+1) N C + b S N C + c N (C + Vp) + d,  N = B T positions, S the slots
 * allocated (kept blocks, plus the shared one under recompute): bytes per position
 * and channel of the kept block inputs, of a block's slot, of the head and its
 * scratch, and a constant (allocator and trainer extras). The ledger's exact
 * counts give the same features, so a fit that matches the ledger says the trainer
 * allocates what the ledger says and nothing per token beside it.
 *
 * The power law L(C) = E + A C^-alpha (Kaplan et al. 2020; Hoffmann et al. 2022's
 * irreducible term) is fitted by a scan over E in [0, min L) with, for each E, the
 * straight line log(L - E) = log A - alpha log C by least squares; the E of the
 * smallest squared error in L wins. The uncertainty of a prediction is the line's
 * standard error at the target (with n - 3 degrees of freedom; none below 4 points).
 */
#ifndef LMT_FIT_H
#define LMT_FIT_H

#include <stddef.h>

#include "core/error.h"
#include "model/ledger.h"
#include "plan/runread.h"

/* Solve min |X beta - y|^2 (X: n rows of k, row-major; k <= 8) by the normal
 * equations with a relative ridge of 1e-12 on the diagonal (so features that a
 * sweep does not vary get ~0, not a singular system). 0, or LMT_EINVAL. */
int lmt_lstsq(const double *X, const double *y, int n, int k, double *beta, struct lmt_err *err);

#define LMT_ACT_FEATURES 4
/* The features of the activation model for configuration c (see above). */
void lmt_act_features(const struct lmt_ledger_cfg *c, double f[LMT_ACT_FEATURES]);
/* The fitted bytes for c. */
double lmt_act_predict(const double beta[LMT_ACT_FEATURES], const struct lmt_ledger_cfg *c);
/* What a run measured beyond its model state: its peak allocation less the state
 * counters (the activations and the temporaries, as the ledger's terms count them),
 * or, where train reported no peak, its activations counter. */
double lmt_run_measured_acts(const struct lmt_run_measured *m);
/* The coefficients of the activation model fitted to the n runs m[0..n). */
int lmt_act_fit_runs(const struct lmt_run_measured *m, int n, double beta[LMT_ACT_FEATURES], struct lmt_err *err);
/* Whether the runs m[0..n) determine the fit's prediction for c at every micro-batch:
 * c's features (at B = 1 and 2; they are linear in B) lie in the span of the
 * runs' (relative residual below 1e-6). A sweep of 4 runs that vary the features
 * determines every prediction; one run, or runs of one shape, determine only what
 * they measured, and the fit's coefficients elsewhere are the ridge's guess. */
int lmt_act_determined(const struct lmt_run_measured *m, int n, const struct lmt_ledger_cfg *c);
/* The prediction's error relative to the measurement, in per cent (0 when both are
 * 0; infinite when only the measurement is). */
double lmt_fit_error_pct(double pred, double meas);

struct lmt_powerlaw {
	double E, A, alpha;      /* L(C) = E + A C^-alpha */
	double sd;               /* residual standard deviation of log(L - E) (NAN: no dof) */
	double sxx, mx;          /* for the prediction's standard error */
	int n;
};
/* Fit (C[i], L[i]), n >= 2 (C > 0, L > 0). With n = 2, E is fixed at E0 (0 if
 * negative): two points determine only A and alpha. */
int lmt_powerlaw_fit(const double *C, const double *L, int n, double E0, struct lmt_powerlaw *p,
		     struct lmt_err *err);
/* Predicted loss at compute x, and its interval half-width at one standard error
 * (NAN where the fit has no degrees of freedom left). */
double lmt_powerlaw_predict(const struct lmt_powerlaw *p, double x, double *halfwidth);

#endif
