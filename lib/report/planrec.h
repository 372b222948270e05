/*
 * planrec.h: the JSONL records of memledger(1) (its man page documents each
 * field): the byte ledger (model, term, activations, total), a fitted run's terms
 * and the fit, a planned layout, a strategy of the comparison, the budget and the
 * loss fit, written into a struct lmt_json.
 *
 * As in evalrec.h, each function that names a record begins it in j (initialised;
 * lmt_json_begin empties it) and leaves it open for the caller to end and write
 * (lmt_json_end_line), so a tool emits it with its own error handling and train
 * could report its own ledger in the same words. The fields and their order are
 * the format: the CLI tests read them.
 */
#ifndef LMT_PLANREC_H
#define LMT_PLANREC_H

#include "core/json.h"
#include "core/strbuf.h"
#include "model/ledger.h"
#include "plan/budget.h"
#include "plan/fit.h"
#include "plan/plan.h"
#include "plan/safebatch.h"

/* The configuration's fields (model, batch, precision, layout), into an open record. */
void lmt_planrec_config(struct lmt_json *j, const struct lmt_ledger_cfg *c);
/* "model": the configuration and the parameter counts. */
void lmt_planrec_model(struct lmt_json *j, const struct lmt_ledger_cfg *c, const struct lmt_ledger *l);
/* "term": the ledger's term i. */
void lmt_planrec_term(struct lmt_json *j, const struct lmt_ledger *l, int i);
/* "activations" and "total" (with the bytes per parameter beside the seed's rule of thumb). */
void lmt_planrec_activations(struct lmt_json *j, const struct lmt_ledger *l);
void lmt_planrec_total(struct lmt_json *j, const struct lmt_ledger *l);
/* "fit_run": the run's name and configuration, open for lmt_planrec_fit_term. */
void lmt_planrec_fit_run(struct lmt_json *j, const char *run, const struct lmt_ledger_cfg *c);
/* One predicted-against-measured object of a "fit_run" record. */
void lmt_planrec_fit_term(struct lmt_json *j, const char *name, double pred, double meas);
/* "fit": the activation coefficients over n runs and the largest errors. */
void lmt_planrec_fit(struct lmt_json *j, int n, const double beta[LMT_ACT_FEATURES], double worst,
		     double worst_fit);
/* "safe_microbatch": micro-batch B found for c within memory less margin
 * (plan/safebatch.h), from the fit beta (NULL: the ledger). */
void lmt_planrec_safe(struct lmt_json *j, const struct lmt_ledger_cfg *c, const double *beta, int B, double memory,
		      double margin);
/* "dropped": how many layouts were dropped for reason r (enum lmt_plan_drop). */
void lmt_planrec_dropped(struct lmt_json *j, int r, int layouts);
/* A layout record named event ("layout"), its rank (0: none) and why it loses
 * to the first (NULL: nothing said). */
void lmt_planrec_layout(struct lmt_json *j, const char *event, int rank, const struct lmt_plan_layout *l,
			const char *why);
/* "strategy": s alone at degree G, evaluated into l. */
void lmt_planrec_strategy(struct lmt_json *j, const struct lmt_plan_strategy *s, int G,
			  const struct lmt_plan_layout *l);
/* "budget" and "loss_fit" (k pilots; the prediction at x FLOPs and its half-width). */
void lmt_planrec_budget(struct lmt_json *j, const struct lmt_budget_opts *o, const struct lmt_budget_in *in,
			const struct lmt_budget *b);
void lmt_planrec_loss_fit(struct lmt_json *j, const struct lmt_powerlaw *p, int k, double x, double pred,
			  double hw);

/* ---- the table a terminal gets instead (lines appended to a string buffer) ---- */

/* The ledger: the model and layout, each term, the totals. */
void lmt_plantext_ledger(struct lmt_strbuf *b, const struct lmt_ledger_cfg *c, const struct lmt_ledger *l);
/* The budget's lines. */
void lmt_plantext_budget(struct lmt_strbuf *b, const struct lmt_budget_opts *o, const struct lmt_budget_in *in,
			 const struct lmt_budget *bu);

#endif
