/*
 * session.h: a training session, what the train tool runs and every rank of a
 * distributed job runs alike: the communicator, the run directory and its lock,
 * the checkpoint a resume continues (with the configuration its run recorded),
 * the dataset, the backend, the model, the trainer, then the updates with their
 * records, evaluations, samples, alerts and checkpoints, and the run's end.
 *
 * The caller owns the configuration (struct lmt_session_cfg, what its options
 * say); a resume changes it through the adopt callback, so that the tool parses a
 * recorded value exactly as it parses its command line. Nothing here prints or
 * exits: records go to the record callback, closed and newline-terminated (the
 * session appends them to the run's metrics after), lines for people to the
 * notice callback, and errors come back in struct lmt_err, worded as the train
 * tool prints them. A function that fails leaves the session for the caller to
 * abandon (exit): lmt_session_halt and lmt_session_mark_failed are what its exit
 * handlers call.
 *
 * The phases, in order, with the tool's own steps between them:
 *	lmt_session_connect   the communicator (the tool then checks what several ranks need)
 *	lmt_session_claim     the run's lock; a resume's run, checkpoint and recorded options
 *	lmt_session_open      the dataset, the tokenizer, the backend, the model, a default run
 *	lmt_session_start     the run's files, the checkpoint's checks, the precision, the trainer
 *	lmt_session_begin     the resumed state, the setup records, the saver, the alerts
 *	lmt_session_train     the updates
 *	lmt_session_finish    the final checkpoint, the export, the summary
 *	lmt_session_release
 */
#ifndef LMT_SESSION_H
#define LMT_SESSION_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "ckpt/resumecfg.h"
#include "ckpt/runlock.h"
#include "ckpt/runstate.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/json.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "model/model.h"
#include "model/trainer.h"
#include "report/alerts.h"

/* What a session trains, as train's options give it (train(1) names each). */
struct lmt_session_cfg {
	const char *data, *out, *tokenizer, *init_llmc, *export_llmc, *prompt, *backend;
	const char *precision;   /* NULL: the backend's best */
	double comm_timeout;
	const char *comm;        /* the communicator (comm.h's names; NULL: auto, from the backend) */
	struct lmt_alert_cfg alert;
	double mem_limit;        /* bytes: the memory alert's boundary (0: none) */
	const char *budget;      /* memledger --budget's JSONL, for the budget alert (NULL: none) */
	uint64_t audit;
	int no_save;
	struct lmt_gpt_config model;
	struct lmt_train_cfg tc;
	int context;
	uint64_t init_seed;
	uint64_t eval_every, eval_seqs, sample_every;
	const char *resume, *resume_from; /* resume_from: the checkpoint --resume names, if it names one */
	int resume_auto;
	uint64_t ckpt_every, keep_every, stop_at;
	double ckpt_minutes, mtbf;
	int keep, ckpt_sync, log_samples;
	int sample_tokens, top_k;
	double temperature, peak;
	const char *precision_env; /* LMT_PRECISION's value, used when precision is NULL */
};

/* What a notice is, for the tool to show it as such. */
enum lmt_session_level {
	LMT_SESSION_INFO,         /* progress for people */
	LMT_SESSION_INFO_RECORD,  /* progress a record just said too: a human display of records may drop it */
	LMT_SESSION_WARN,
	LMT_SESSION_ERROR,        /* why the run stops, said before its end */
};

struct lmt_session_cb {
	void *ctx;
	/* a record (rank 0 only): j closed, its text "{...}\n" in j->out */
	void (*record)(void *ctx, const struct lmt_json *j);
	void (*notice)(void *ctx, int level, const char *msg);
	/* after each update's records (NULL: none) */
	void (*step)(void *ctx, const struct lmt_step_stats *st);
	/* a resume adopts option opt's recorded value: apply it as if given */
	void (*adopt)(void *ctx, const char *opt, const char *value);
	/* whether option opt's values a and b are the same (ckpt/resumecfg.h) */
	lmt_resumecfg_same_fn same;
};

struct lmt_session {
	struct lmt_session_cfg *cfg;  /* the caller's */
	struct lmt_session_cb cb;
	volatile int *stop_signal;    /* the caller's: a signal's number once one arrived (NULL: none) */
	int usage;                    /* the error returned is the options' (a usage error) */
	char *msg;                    /* the error's whole message where err cuts it (owned; NULL: err's) */

	/* rank 0 owns the run directory and writes stdout; the others (followers)
	 * compute and take part in every collective */
	struct lmt_comm comm;
	int follower;
	struct lmt_run run;
	struct lmt_run_lock lock;     /* held until exit: the kernel drops it however the run ends */
	const char *run_out;          /* the run's directory, whichever rank this is */
	char dir[PATH_MAX];           /* a default run's directory */
	struct lmt_ckpt ck;           /* the checkpoint to resume from, with have_ck */
	int have_ck;
	int fresh_auto;               /* --resume auto of a directory with no run: a new run */

	struct lmt_dataset d;
	struct lmt_tokenizer tok;
	int have_tok, T;
	struct lmt_backend be;
	struct lmt_gpt g;
	struct lmt_trainer tr;
	uint64_t cursor;
	double peak, fpt;             /* FLOP/s for MFU; FLOPs per token */

	struct lmt_run_resumed rs;
	struct lmt_run_sampling smp;
	struct lmt_run_saver sv;
	uint64_t *cursors;            /* world > 1: every rank's loader cursor, for a save */
	struct lmt_json j, aj;
	struct lmt_alerts alerts;
	double budget_tokens, budget_hours; /* cfg->budget's, read at connect */
	double t_start, last_due, wait_before;
	uint64_t stats_at, stats_clipped;
	uint64_t tokens0, updates0;   /* this process's share starts here */
	int status;                   /* 1: stopped on a non-finite update */
	int interrupted;              /* a signal's number, or -1 at --stop-at */
	int finished;                 /* the run's end is in its events */
	int begun;                    /* lmt_session_begin ran: the run's files are being written */
	uint64_t reached;             /* the update reached when lmt_session_halt ran */
	uint64_t resumed_at;          /* the checkpoint's update, resuming */
	char **changes;               /* a resume's config-change events, until begin writes them */
	size_t nchanges, capchanges;
	int cb_rc;                    /* the first error inside a callback of the session's */
	struct lmt_err cb_err;
};

/* Start s on cfg (the caller keeps both alive): the communicator. stop_signal
 * (NULL: none) is polled after each update: a signal to any rank stops every rank
 * there, and the session sets it on the ranks that were not signalled themselves. */
int lmt_session_connect(struct lmt_session *s, struct lmt_session_cfg *cfg, const struct lmt_session_cb *cb,
			volatile int *stop_signal, struct lmt_err *err);
/* Lock cfg->out (rank 0); with cfg->resume open its run and the checkpoint to
 * continue, whose recorded options the ones not given (given, ngiven) adopt. */
int lmt_session_claim(struct lmt_session *s, const struct lmt_resumecfg_pair *given, size_t ngiven,
		      struct lmt_err *err);
/* The dataset, the tokenizer, the backend (threads), the model; a run given no
 * directory (nor no_save) gets runs/STAMP-TAG: 1 then, for the caller to check
 * cfg->out against its inputs. */
int lmt_session_open(struct lmt_session *s, int threads, struct lmt_err *err);
/* The run's files, the checkpoint checked against the run, the weights, the
 * precision, the trainer (running from here: lmt_session_halt stops it). */
int lmt_session_start(struct lmt_session *s, struct lmt_err *err);
/* The resumed state, config.json, params.json, the setup records and events. */
int lmt_session_begin(struct lmt_session *s, struct lmt_err *err);
/* The updates, until the last, a stop (s->status) or an interruption. */
int lmt_session_train(struct lmt_session *s, struct lmt_err *err);
/* The final checkpoint, the export and the summary record. */
int lmt_session_finish(struct lmt_session *s, struct lmt_err *err);
/* Everything s holds, after lmt_session_finish. */
void lmt_session_release(struct lmt_session *s);

/* For exit handlers. halt: stop the trainer (its read-ahead thread) before the
 * libraries it uses are torn down, remembering the update reached; mark_failed:
 * a run that began and did not reach its end says in its events that it failed
 * there; one refused before lmt_session_begin is left as it was, and a directory
 * the lock made for it is removed (it holds nothing else then). */
void lmt_session_halt(struct lmt_session *s);
int lmt_session_mark_failed(struct lmt_session *s, struct lmt_err *err);

#endif
