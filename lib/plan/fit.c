/*
 * fit.c: the least-squares fits of fit.h. Small dense systems (k <= 8) solved by
 * Gaussian elimination with partial pivoting on the normal equations: the sweeps
 * have a handful of runs, and the features are scaled to unit size first so the
 * squared system stays well conditioned.
 */
#include "plan/fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int lmt_lstsq(const double *X, const double *y, int n, int k, double *beta, struct lmt_err *err)
{
	double A[8][9], scale[8];
	if (k < 1 || k > 8 || n < 1)
		return lmt_err_set(err, LMT_EINVAL, "least squares with %d points and %d unknowns", n, k);
	for (int j = 0; j < k; j++) {
		scale[j] = 0;
		for (int i = 0; i < n; i++)
			scale[j] = fmax(scale[j], fabs(X[i * k + j]));
		if (scale[j] == 0)
			scale[j] = 1;
	}
	double tr = 0;
	for (int a = 0; a < k; a++) {
		for (int b = 0; b <= k; b++) {
			double s = 0;
			for (int i = 0; i < n; i++)
				s += X[i * k + a] / scale[a] * (b < k ? X[i * k + b] / scale[b] : y[i]);
			A[a][b] = s;
		}
		tr += A[a][a];
	}
	for (int a = 0; a < k; a++)
		A[a][a] += 1e-12 * (tr > 0 ? tr : 1);
	for (int c = 0; c < k; c++) {
		int p = c;
		for (int r = c + 1; r < k; r++)
			if (fabs(A[r][c]) > fabs(A[p][c]))
				p = r;
		if (A[p][c] == 0)
			return lmt_err_set(err, LMT_EINVAL, "least squares: singular system");
		for (int b = 0; b <= k; b++) {
			double t = A[c][b];
			A[c][b] = A[p][b];
			A[p][b] = t;
		}
		for (int r = 0; r < k; r++) {
			if (r == c)
				continue;
			double f = A[r][c] / A[c][c];
			for (int b = c; b <= k; b++)
				A[r][b] -= f * A[c][b];
		}
	}
	for (int j = 0; j < k; j++)
		beta[j] = A[j][k] / A[j][j] / scale[j];
	return 0;
}

void lmt_act_features(const struct lmt_ledger_cfg *c, double f[LMT_ACT_FEATURES])
{
	const struct lmt_gpt_config *m = &c->model;
	double N = (double)c->B * c->T, C = m->C, Vp = m->Vp ? m->Vp : (m->V + 127) / 128 * 128;
	int kept = 0, rc = 0;
	for (int l = 0; l < m->L; l++) {
		if (c->recompute_every && l % c->recompute_every == 0)
			rc = 1;
		else
			kept++;
	}
	f[0] = (m->L + 1) * N * C;
	f[1] = (kept + rc) * N * C;
	f[2] = N * (C + Vp);
	f[3] = 1;
}

double lmt_act_predict(const double beta[LMT_ACT_FEATURES], const struct lmt_ledger_cfg *c)
{
	double f[LMT_ACT_FEATURES], s = 0;
	lmt_act_features(c, f);
	for (int j = 0; j < LMT_ACT_FEATURES; j++)
		s += beta[j] * f[j];
	return s;
}

/* the line through (log C, log(L - E)); returns the squared error in L */
static double line_fit(const double *C, const double *L, int n, double E, struct lmt_powerlaw *p)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0, sse = 0, ssl = 0;
	for (int i = 0; i < n; i++) {
		mx += log(C[i]) / n;
		my += log(L[i] - E) / n;
	}
	for (int i = 0; i < n; i++) {
		double dx = log(C[i]) - mx;
		sxx += dx * dx;
		sxy += dx * (log(L[i] - E) - my);
	}
	double slope = sxx > 0 ? sxy / sxx : 0;
	p->E = E;
	p->alpha = -slope;
	p->A = exp(my - slope * mx);
	p->mx = mx;
	p->sxx = sxx;
	p->n = n;
	for (int i = 0; i < n; i++) {
		double r = log(L[i] - E) - (my + slope * (log(C[i]) - mx));
		double q = L[i] - (E + p->A * pow(C[i], -p->alpha));
		sse += r * r;
		ssl += q * q;
	}
	int dof = n - (n > 2 ? 3 : 2);
	p->sd = dof > 0 ? sqrt(sse / dof) : NAN;
	return ssl;
}

int lmt_powerlaw_fit(const double *C, const double *L, int n, double E0, struct lmt_powerlaw *p,
		     struct lmt_err *err)
{
	double lmin = INFINITY;
	if (n < 2)
		return lmt_err_set(err, LMT_EINVAL, "a power law needs two points or more (%d given)", n);
	for (int i = 0; i < n; i++) {
		if (!(C[i] > 0) || !(L[i] > 0) || !isfinite(C[i]) || !isfinite(L[i]))
			return lmt_err_set(err, LMT_EINVAL, "point %d: compute %g and loss %g must be positive", i, C[i],
					   L[i]);
		lmin = fmin(lmin, L[i]);
	}
	if (n == 2) {
		double E = E0 > 0 && E0 < lmin ? E0 : 0;
		line_fit(C, L, n, E, p);
		return 0;
	}
	/* a coarse scan over E, then a finer one around the best */
	double best = INFINITY, bestE = 0, lo = 0, hi = lmin;
	for (int pass = 0; pass < 3; pass++) {
		int steps = 400;
		for (int s = 0; s < steps; s++) {
			double E = lo + (hi - lo) * s / steps;
			if (E >= lmin)
				break;
			struct lmt_powerlaw q;
			double e = line_fit(C, L, n, E, &q);
			if (e < best) {
				best = e;
				bestE = E;
			}
		}
		double w = (hi - lo) / steps;
		lo = fmax(0, bestE - w);
		hi = fmin(lmin * (1 - 1e-12), bestE + w);
	}
	line_fit(C, L, n, bestE, p);
	return 0;
}

double lmt_powerlaw_predict(const struct lmt_powerlaw *p, double x, double *halfwidth)
{
	double lx = log(x), mean = p->E + p->A * pow(x, -p->alpha);
	if (halfwidth) {
		if (isnan(p->sd) || p->sxx <= 0) {
			*halfwidth = NAN;
		} else {
			/* the line's standard error at lx, carried through exp */
			double se = p->sd * sqrt(1.0 / p->n + (lx - p->mx) * (lx - p->mx) / p->sxx);
			*halfwidth = p->A * pow(x, -p->alpha) * (exp(se) - 1);
		}
	}
	return mean;
}

double lmt_run_measured_acts(const struct lmt_run_measured *m)
{
	if (m->peak_alloc < 0)
		return (double)m->activations;
	return (double)(m->peak_alloc - m->params - m->weights_working - m->grads - m->optimizer -
			(m->staging > 0 ? m->staging : 0) - (m->stats > 0 ? m->stats : 0));
}

int lmt_act_fit_runs(const struct lmt_run_measured *m, int n, double beta[LMT_ACT_FEATURES], struct lmt_err *err)
{
	double *X = calloc((size_t)n * LMT_ACT_FEATURES, sizeof *X), *y = calloc((size_t)n, sizeof *y);
	int rc;
	if (!X || !y) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	} else {
		for (int i = 0; i < n; i++) {
			lmt_act_features(&m[i].cfg, X + (size_t)i * LMT_ACT_FEATURES);
			y[i] = lmt_run_measured_acts(&m[i]);
		}
		rc = lmt_lstsq(X, y, n, LMT_ACT_FEATURES, beta, err);
	}
	free(X);
	free(y);
	return rc;
}

/* v less its projection on the nb orthonormal rows of basis (twice, for round-off);
 * its squared norm before (*before) and after */
static double project_out(double basis[][LMT_ACT_FEATURES], int nb, double *v, double *before)
{
	double norm = 0;
	*before = 0;
	for (int k = 0; k < LMT_ACT_FEATURES; k++)
		*before += v[k] * v[k];
	for (int pass = 0; pass < 2; pass++)
		for (int b = 0; b < nb; b++) {
			double d = 0;
			for (int k = 0; k < LMT_ACT_FEATURES; k++)
				d += v[k] * basis[b][k];
			for (int k = 0; k < LMT_ACT_FEATURES; k++)
				v[k] -= d * basis[b][k];
		}
	for (int k = 0; k < LMT_ACT_FEATURES; k++)
		norm += v[k] * v[k];
	return norm;
}

int lmt_act_determined(const struct lmt_run_measured *m, int n, const struct lmt_ledger_cfg *c)
{
	enum { K = LMT_ACT_FEATURES };
	double basis[K][K], scale[K] = { 0 }, v[K], before;
	int nb = 0;
	/* each feature scaled to unit size over the runs; an orthonormal basis of the
	 * runs' rows (Gram-Schmidt); then c's rows must have nothing left outside it */
	for (int i = 0; i < n; i++) {
		lmt_act_features(&m[i].cfg, v);
		for (int k = 0; k < K; k++)
			scale[k] = fmax(scale[k], fabs(v[k]));
	}
	for (int k = 0; k < K; k++)
		scale[k] = scale[k] > 0 ? scale[k] : 1;
	for (int i = 0; i < n && nb < K; i++) {
		lmt_act_features(&m[i].cfg, v);
		for (int k = 0; k < K; k++)
			v[k] /= scale[k];
		double left = project_out(basis, nb, v, &before);
		if (before > 0 && left > 1e-18 * before) {
			for (int k = 0; k < K; k++)
				basis[nb][k] = v[k] / sqrt(left);
			nb++;
		}
	}
	for (int B = 1; B <= 2; B++) {
		struct lmt_ledger_cfg x = *c;
		x.B = B;
		lmt_act_features(&x, v);
		for (int k = 0; k < K; k++)
			v[k] /= scale[k];
		if (project_out(basis, nb, v, &before) > 1e-12 * before)
			return 0;
	}
	return 1;
}

double lmt_fit_error_pct(double pred, double meas)
{
	return meas != 0 ? 100 * (pred - meas) / meas : (pred == 0 ? 0 : INFINITY);
}
