/*
 * runstate.h: a training run's state on disk, for every tool and every rank that
 * takes part in a run.
 *
 * A run directory RUN holds config.json (the resolved configuration), params.json
 * (the parameter breakdown), metrics.jsonl (every record the trainer printed, so a
 * resumed run can cut it back), events.jsonl (what happened to the run: start,
 * resume, checkpoints saved, refused, removed, set aside, stop, end) and ckpt/ (the
 * checkpoints, ckpt.h). This file opens it, writes its records, resolves what
 * --resume names, checks that a checkpoint belongs to this run's data, model and
 * data order, rebases the loader cursor to this rank, cuts the metrics back to the
 * checkpoint, saves checkpoints (while training waits, or through a background
 * writer) and keeps the newest of them.
 *
 * Nothing here prints or exits. What a user should hear about (a checkpoint
 * ignored or set aside, metrics that are not the run's) goes, as one line of text,
 * to the run's notice callback, and the tool decides how to show it; errors come
 * back in struct lmt_err, worded as the train tool prints them. Functions take
 * what they need as arguments, so every rank of a distributed job can call them.
 */
#ifndef LMT_RUNSTATE_H
#define LMT_RUNSTATE_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/json.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "model/model.h"
#include "model/trainer.h"

struct lmt_run {
	char dir[PATH_MAX];      /* "" without a run directory: records then go nowhere */
	FILE *metrics, *events;  /* appended to, flushed per record */
	/* findings for the user, one line each (NULL: dropped) */
	void (*notice)(void *ctx, const char *msg);
	void *notice_ctx;
	/* the text lmt_run_write_config wrote to config.json (owned; NULL before):
	 * checkpoints record this, never the file, which anyone may have edited since */
	char *config_text;
};

/* An empty run (no directory), with the notice callback set. */
void lmt_run_init(struct lmt_run *r, void (*notice)(void *ctx, const char *msg), void *ctx);
/*
 * Make (or open) the run directory dir and dir/ckpt, and open metrics.jsonl and
 * events.jsonl for appending. The caller holds the run's lock (runlock.h). A
 * directory that holds a previous run's metrics is refused unless resuming, or
 * unless that run stopped before its first update (no update record, no
 * checkpoint): its metrics are then emptied, a notice says so, and the run starts
 * again in place (events.jsonl keeps the failed start's events).
 */
int lmt_run_open(struct lmt_run *r, const char *dir, int resuming, struct lmt_err *err);
/* lmt_run_open's refusal of a previous run, alone and changing nothing: for a new
 * run to be refused before its data and model are set up. */
int lmt_run_check_new(const char *dir, struct lmt_err *err);
/* Close the files (r stays usable as a run without a directory). */
void lmt_run_close(struct lmt_run *r);

/* Append j's text as it stands (a finished line: lmt_json_end_line) to metrics.jsonl. */
int lmt_run_metrics_append(struct lmt_run *r, const struct lmt_json *j, struct lmt_err *err);
/* Close j's record and append it, as a line, to events.jsonl. */
int lmt_run_event_write(struct lmt_run *r, struct lmt_json *j, struct lmt_err *err);
/* The record {"event":what,"update":update[,"detail":detail]} in events.jsonl. */
int lmt_run_event(struct lmt_run *r, const char *what, const char *detail, uint64_t update, struct lmt_err *err);

/* ---- config.json and params.json ---- */

/* What config.json records of the run besides the model, the optimizer and the machine. */
struct lmt_run_config {
	const char *data_dir, *tokenizer;          /* tokenizer: NULL if not given */
	const char *init_llmc, *export_llmc;       /* NULL: initialised from init_seed; no export */
	uint64_t init_seed;
	uint64_t eval_every, eval_seqs, sample_every;
	int sample_tokens, top_k;
	double temperature;
	const char *prompt;
	double peak_flops;
	const char *peak_source;                   /* "--peak-flops" or "measured gemm" */
	uint64_t ckpt_every, keep_every;           /* the checkpoints' cadence and retention */
	double ckpt_minutes;
	int keep, ckpt_sync;
};

/* Write RUN/config.json (atomically); r keeps the text (config_text). */
int lmt_run_write_config(struct lmt_run *r, const struct lmt_run_config *c, const struct lmt_train_cfg *tc,
			 const struct lmt_dataset *d, const struct lmt_gpt *g, const struct lmt_backend *be,
			 const struct lmt_comm *comm, struct lmt_err *err);
/* Begin the "parameters" record in j: the counts by kind, every tensor's shape, and
 * the figures MFU is computed from (FLOPs per token, the peak and where it came from). */
void lmt_run_param_record(struct lmt_json *j, const struct lmt_gpt *g, double flops_per_token, double peak_flops,
			  const char *peak_source, const char *gemm_kernel);
/* Write j's record (as it stands, closed) to RUN/params.json, atomically. */
int lmt_run_write_params(const struct lmt_run *r, struct lmt_json *j, struct lmt_err *err);

/* The "update" record of metrics.jsonl for the update st just did: rewinding the
 * metrics on resume reads its "event" and "clocks"."wall_s" back. data_wait: the
 * loader's wait during this update; wall: the run's wall clock (resumed segments
 * included); log_samples: list the (shard, sequence) of every sample. */
void lmt_run_update_record(struct lmt_json *j, const struct lmt_trainer *tr, const struct lmt_step_stats *st,
			   double data_wait, double wall, double flops_per_token, double peak_flops, int log_samples);

/* Evaluate tr's model on the first nseq sequences of the validation split (every
 * rank takes part) and begin the "eval" record of update `update` in j. */
/* The "stats" record of update (tr->stats, stats.h), with the fraction of the
 * updates since the last one (since_clipped of since_updates) that were clipped. */
void lmt_run_stats_record(struct lmt_json *j, const struct lmt_trainer *tr, uint64_t update, uint64_t since_updates,
			  uint64_t since_clipped);
int lmt_run_eval_record(struct lmt_json *j, const struct lmt_trainer *tr, uint64_t nseq, uint64_t update,
			double *loss, struct lmt_err *err);

/* What the "sample" records draw from: a fixed seed, so every sample of a run
 * starts from the same generator and differs only by the model. */
struct lmt_run_sampling {
	int32_t *prompt;                    /* owned; at least one token */
	int np;
	int tokens, top_k;
	double temperature;
	uint64_t seed;
	const struct lmt_tokenizer *tok;    /* NULL: no "text" in the record */
};
/* The prompt: text encoded with tok, or (no text, no tokenizer, or text that
 * encodes to nothing) the token eos alone (0 if there is no eos, UINT32_MAX).
 * Sets tok (the caller keeps it alive); the caller sets the rest. */
int lmt_run_sampling_init(struct lmt_run_sampling *s, const char *text, const struct lmt_tokenizer *tok,
			  uint32_t eos, struct lmt_err *err);
void lmt_run_sampling_release(struct lmt_run_sampling *s);
/* Draw s->tokens tokens from g after the prompt and begin the "sample" record. */
int lmt_run_sample_record(struct lmt_json *j, struct lmt_gpt *g, const struct lmt_run_sampling *s, uint64_t update,
			  struct lmt_err *err);

/* A non-finite update st in events.jsonl: "nonfinite", what was found and where
 * (that text also goes to detail, cap bytes, for the tool's warning), then, when
 * the run stops on it, "stop" with the step's message stop (NULL: it goes on). */
int lmt_run_nonfinite(struct lmt_run *r, const struct lmt_step_stats *st, const char *stop, char *detail, size_t cap,
		      struct lmt_err *err);
/* The "stop" event of a run that stopped before its end after update `update`:
 * on signal sig, or (sig 0) at --stop-at stop_at; the text also goes to detail. */
int lmt_run_stopped(struct lmt_run *r, int sig, uint64_t stop_at, uint64_t update, char *detail, size_t cap,
		    struct lmt_err *err);
/* Begin the "summary" record: wall is this process's time, wall_offset the resumed
 * segments' before it; status "done", "interrupted" or "stopped". */
void lmt_run_summary_record(struct lmt_json *j, const struct lmt_trainer *tr, uint64_t tokens_done,
			    uint64_t updates_done, double wall, double wall_offset, const char *status);

/* ---- resuming ---- */

/*
 * What --resume ARG continues: ARG is a run directory, or one checkpoint of one,
 * RUN/ckpt/step-N (*named set to 1). *run_dir (the caller frees it) is the run.
 * out, if given, must be that run. LMT_EINVAL: the arguments do not fit together
 * (a usage error); other codes: the run is not there.
 */
int lmt_run_resolve(const char *arg, const char *out, char **run_dir, int *named, struct lmt_err *err);
/*
 * Open the checkpoint to resume r from: named (a directory, verified), or else the
 * newest checkpoint of r that verifies. With fallback, invalid newer ones are
 * reported (notice, and a "checkpoint-ignored" event) and skipped, and a run with
 * none returns 0; without, the newest must be valid. Returns 1 with c open.
 */
int lmt_run_resume_open(struct lmt_run *r, const char *named, int fallback, struct lmt_ckpt *c,
			struct lmt_err *err);
/* The checkpoint must belong to this data (data_dir names it in messages), model
 * and data order (seed, shuffle window); the message says what differs. */
int lmt_run_check_compat(const struct lmt_ckpt *c, const char *data_dir, const struct lmt_dataset *d,
			 const struct lmt_gpt_config *m, uint64_t seed, uint64_t window, struct lmt_err *err);
/* A count of the checkpoint's state ("update", "tokens", ...). */
int lmt_run_state_u64(const struct lmt_ckpt *c, const char *key, uint64_t *v, struct lmt_err *err);
/* The loader cursor of rank `rank` of `world` from the checkpoint's: its own at the
 * same world size, else rebased from rank 0's. */
int lmt_run_resume_cursor(const struct lmt_ckpt *c, int rank, int world, uint64_t *cursor, struct lmt_err *err);

struct lmt_run_resumed {
	double wall_offset;      /* the run's wall clock at the checkpoint */
	double lost_wall;        /* the wall clock of the updates done again */
	uint64_t replayed;       /* update records cut from metrics.jsonl */
};
/*
 * Continue tr (initialised, with its model) from checkpoint c: the parameters and
 * moments, the counters and clock, metrics.jsonl cut back to the checkpoint, and
 * checkpoints newer than it moved aside (they would collide with the saves of the
 * updates done again).
 */
int lmt_run_resume(struct lmt_run *r, const struct lmt_ckpt *c, struct lmt_trainer *tr,
		   struct lmt_run_resumed *out, struct lmt_err *err);
/* Start r again from update 0 (--resume auto on a run without a valid
 * checkpoint): metrics cut to nothing, every checkpoint moved aside. */
int lmt_run_restart(struct lmt_run *r, uint64_t *replayed, struct lmt_err *err);
/* Begin the "resume" record of metrics.jsonl for tr resumed from checkpoint `from`,
 * its loader at cursor. */
void lmt_run_resume_record(struct lmt_json *j, const struct lmt_trainer *tr, const char *from,
			   const struct lmt_run_resumed *rs, uint64_t cursor);
/* The "resume" event: the record's fields but the counters and the clock. */
int lmt_run_resume_event(struct lmt_run *r, const struct lmt_trainer *tr, const char *from,
			 const struct lmt_run_resumed *rs, struct lmt_err *err);

/* ---- saving ---- */

/* A finished save, for the tool's record and progress line. */
struct lmt_run_saved {
	uint64_t update;
	const struct lmt_ckpt_result *r;
	double pause_s;          /* training stood still: the whole write, or the snapshot */
	double cost_s;           /* the checkpoint's cost C to the run */
	double best_interval_s;  /* Young's sqrt(2 C MTBF); 0 without an MTBF */
	int async;
	/* the checkpoint read back and checked (lmt_ckpt_open's verification) once
	 * committed: verified 0 with why when it failed */
	int verified;
	double verify_s;
	const char *why;
	double wall;             /* the run's clock when it was verified */
};

/*
 * The checkpoints of a run: at most one save in flight; each finished save is
 * verified (read back: every file's size and SHA-256, every chunk's CRC), goes
 * to saved (the tool prints its record and judges its alerts), then to
 * events.jsonl, and retention removes all but the newest keep and the keep_every
 * milestones. A checkpoint that fails its verification stays where it is (resume
 * passes over it, saying so).
 */
struct lmt_run_saver {
	struct lmt_run *run;
	struct lmt_trainer *tr;  /* the state: model, backend, communicator, counters, loader */
	int keep;
	uint64_t keep_every;     /* 0: no milestones */
	double mtbf;             /* 0: no interval advice */
	double wall_offset, t_start;
	void (*saved)(void *ctx, const struct lmt_run_saved *s);
	void *saved_ctx;
	struct lmt_ckpt_async async;
	uint64_t last_saved;     /* UINT64_MAX: none yet */
	double last_save_time;   /* the pause of the save in flight */
	/* with world > 1: every rank's loader cursor (gathered by the caller before
	 * each save); NULL: this rank's own */
	const uint64_t *cursors;
	/* a rank other than 0: the run's directory, to write its own checkpoint file
	 * into (the run itself is rank 0's) */
	const char *run_dir;
};

void lmt_run_saver_init(struct lmt_run_saver *s, struct lmt_run *run, struct lmt_trainer *tr);
void lmt_run_saver_release(struct lmt_run_saver *s);
/* Save the trainer's state now; sync: write while training waits, else snapshot
 * and write on a thread. A save due while one is in flight waits for it (a notice
 * and a "checkpoint-wait" event). With world > 1 every rank calls it at the same
 * update: the save is synchronous, each rank writing its own file of the state
 * (lmt_ckpt_write_ranks), rank 0 the manifest with every rank's cursor. */
int lmt_run_save(struct lmt_run_saver *s, int sync, struct lmt_err *err);
/* Collect a finished background save, if any (wait: block until it ends). */
int lmt_run_save_poll(struct lmt_run_saver *s, int wait, struct lmt_err *err);
/* Begin the "checkpoint" record of metrics.jsonl for s. */
void lmt_run_save_record(struct lmt_json *j, const struct lmt_run_saved *s);

#endif
