/*
 * safebatch.c: the safe micro-batch (safebatch.h).
 */
#include "plan/safebatch.h"

#include <math.h>

double lmt_safe_bytes_at(const struct lmt_ledger_cfg *c, int B, const double *beta)
{
	struct lmt_ledger_cfg x = *c;
	struct lmt_ledger l;
	x.B = B;
	if (lmt_ledger_build(&x, &l, NULL))
		return INFINITY;
	return beta ? (double)l.state_total + lmt_act_predict(beta, &x) : (double)l.total;
}

int lmt_safe_microbatch(const struct lmt_ledger_cfg *c, const double *beta, double budget)
{
	int lo = 0, hi = 1;
	while (hi < (1 << 20) && lmt_safe_bytes_at(c, hi, beta) <= budget) {
		lo = hi;
		hi *= 2;
	}
	while (hi - lo > 1) {
		int mid = lo + (hi - lo) / 2;
		if (lmt_safe_bytes_at(c, mid, beta) <= budget)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}
