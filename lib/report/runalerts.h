/*
 * runalerts.h: what train's alerts (alerts.h) observe of a run: each update's
 * figures from the trainer, and the plan they are judged against (the ledger's
 * predicted peak for the trainer's own configuration, the checkpoint interval, a
 * memory limit, memledger's budget). Kept apart from alerts.c so that the
 * episodes stay pure arithmetic over numbers, testable without a trainer.
 */
#ifndef LMT_RUNALERTS_H
#define LMT_RUNALERTS_H

#include "core/error.h"
#include "model/trainer.h"
#include "report/alerts.h"

/* The budget of memledger --budget's JSONL (its "budget" record): the target
 * tokens and the total device-hours. LMT_EIO or LMT_EFORMAT naming path and what
 * is wrong. */
int lmt_run_budget_read(const char *path, double *tokens, double *device_h, struct lmt_err *err);
/*
 * The plan of tr's run: the ledger's predicted bytes for its model, micro-batch,
 * precision, recompute policy, ranks and ZeRO stage (what memledger predicts for
 * it); the checkpoint interval (ckpt_every updates, else ckpt_minutes); mem_limit
 * bytes (0: none); the budget (0: none).
 */
void lmt_run_alert_plan(struct lmt_alert_plan *p, const struct lmt_trainer *tr, uint64_t ckpt_every,
			double ckpt_minutes, double mem_limit, double budget_tokens, double budget_device_h);
/* This rank's observation of update st (data_wait: its loader's wait in the
 * update; wall: the run's clock after it); on several ranks lmt_run_rank_times
 * then puts in every rank's. */
void lmt_run_alert_obs(struct lmt_alert_obs *o, const struct lmt_trainer *tr, const struct lmt_step_stats *st,
		       double data_wait, double wall);

#endif
