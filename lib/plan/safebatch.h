/*
 * safebatch.h: the largest micro-batch whose predicted bytes per device fit a
 * budget, memledger --safe-microbatch's answer and what a launcher would ask
 * before a run (the "safe micro-batch" of runread.h).
 *
 * The bytes at micro-batch B are the ledger's (model/ledger.h), or, given the
 * coefficients of an activation fit to measured runs (plan/fit.h), the ledger's
 * model state plus the fitted activations. Bytes grow with B, so the answer is a
 * doubling search for an upper bound, then bisection.
 */
#ifndef LMT_SAFEBATCH_H
#define LMT_SAFEBATCH_H

#include "model/ledger.h"
#include "plan/fit.h"

/* The bytes of c at micro-batch B (beta NULL: the ledger's own; else the state
 * plus lmt_act_predict); infinite where the ledger refuses the configuration. */
double lmt_safe_bytes_at(const struct lmt_ledger_cfg *c, int B, const double *beta);
/* The largest B (below 2^20) whose bytes are within budget; 0 when not even 1 fits. */
int lmt_safe_microbatch(const struct lmt_ledger_cfg *c, const double *beta, double budget);

#endif
