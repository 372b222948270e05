/*
 * runread.h: what memledger needs from a run directory that train wrote: the
 * ledger's configuration (config.json: model, optimization, topology), the
 * measured memory counters and peaks of its last update record, and its rates and
 * costs (metrics.jsonl: tokens per second, checkpoint cost, evaluation time,
 * losses), for the fit, the safe micro-batch and the budget.
 *
 * lib/plan/ holds the planning arithmetic (this reader, the fits, the layout
 * planner, the compute budget): pure functions of numbers and run records, with no
 * backend, no communicator and no training step, so that they can run for a machine
 * this one is not, and be tested on hand-computed values. The byte ledger itself is
 * lib/model/ledger.c, beside the model code it asks.
 */
#ifndef LMT_RUNREAD_H
#define LMT_RUNREAD_H

#include <stdint.h>

#include "core/error.h"
#include "model/ledger.h"

struct lmt_run_measured {
	struct lmt_ledger_cfg cfg;   /* as the run was configured (tp = pp = cp = 1) */
	/* the last update record's memory counters (bytes; -1 where absent) */
	int64_t params, weights_working, grads, optimizer, staging, activations, peak_alloc, peak_rss;
	int64_t stats;               /* the statistics' buffers (--stats-every) */
	uint64_t updates, tokens_total, nparams;
	double tokens_per_s;         /* median over the update records (0: none) */
	double flops_per_token;      /* flops_per_s / tokens... as train counts them (0: none) */
	double ckpt_cost_s;          /* mean checkpoint cost_s (0: none saved) */
	double eval_s;               /* mean eval seconds (0: none) */
	double loss, val_loss;       /* last update's loss; last eval loss (NAN: none) */
	double step_s;               /* median step seconds */
	double wall_s;               /* the summary's wall seconds (0: none) */
	uint64_t eval_every;         /* config.json's eval.every (updates; 0: none) */
};

/* Read run directory dir (config.json, metrics.jsonl). LMT_EIO / LMT_EFORMAT naming
 * the file and field otherwise. */
int lmt_run_measured_read(const char *dir, struct lmt_run_measured *m, struct lmt_err *err);
/* Whether key is one of train's options that a train --config file may hold and
 * the ledger does not use (data, optimisation, checkpointing, logging), so that
 * memledger --config reads train's files and still refuses unknown keys. */
int lmt_run_config_foreign_key(const char *key);
/* The ledger configuration recorded in a config.json file at path. */
int lmt_run_config_read(const char *path, struct lmt_ledger_cfg *c, struct lmt_err *err);

#endif
