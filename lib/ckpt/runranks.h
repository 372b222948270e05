/*
 * runranks.h: what a run of several ranks gathers: every rank's step times (for
 * the update record and skew alerts), every rank's sample ids (the audit record),
 * and the check that every rank trains the same run. Each call is a collective:
 * every rank makes it at the same point. Records go into j (rank 0 emits them).
 */
#ifndef LMT_RUNRANKS_H
#define LMT_RUNRANKS_H

#include <stdint.h>

#include "comm/comm.h"
#include "core/error.h"
#include "core/json.h"
#include "model/trainer.h"

/* Adds "ranks" to the record open in j: for step_s, data_wait_s and comm_s (this
 * rank's: st->t_total, data_wait, st->t_comm) the ranks' min, median, max and
 * slowest rank, each rank's value ("by_rank", up to 64 ranks), and "skew", the slowest step over the median less 1 (also in
 * *skew, its rank in *slowest). */
int lmt_run_rank_times(struct lmt_json *j, struct lmt_comm *comm, const struct lmt_step_stats *st, double data_wait,
		       double *skew, int *slowest, struct lmt_err *err);
/* The "audit" record of update: every rank's (shard, sequence) sample ids. */
int lmt_run_audit_record(struct lmt_json *j, struct lmt_comm *comm, const struct lmt_trainer *tr, uint64_t update,
			 struct lmt_err *err);
/* Compares the SHA-256 of text (what determines the run, as this rank resolved
 * it) across ranks: 0 when all equal rank 0's, else LMT_EINVAL naming the first
 * rank that differs. */
int lmt_run_ranks_agree(struct lmt_comm *comm, const char *text, struct lmt_err *err);

#endif
