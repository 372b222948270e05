/*
 * session.c: a training session from the communicator to the summary (session.h).
 *
 * The steps are the train tool's, moved here so that every rank (and any other
 * tool) runs the same ones: errors return where the tool died, records and lines
 * for people go to the caller's callbacks where it printed. The run directory's
 * files are runstate.c's; this file decides what happens when.
 */
#include "model/session.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/rundir.h"
#include "ckpt/runranks.h"
#include "report/runalerts.h"
#include "core/digest.h"
#include "core/util.h"
#include "core/vgrow.h"

/* A line for people, at level. */
static void note(struct lmt_session *s, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(struct lmt_session *s, int level, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	if (!s->cb.notice)
		return;
	va_start(ap, fmt);
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	s->cb.notice(s->cb.ctx, level, msg);
	free(msg);
}

/* An error of the session's own: the whole message in s->msg, err holds it cut. */
static int vfail(struct lmt_session *s, struct lmt_err *err, int code, const char *fmt, va_list ap)
{
	free(s->msg);
	if (vasprintf(&s->msg, fmt, ap) < 0)
		s->msg = NULL;
	return lmt_err_set(err, code, "%s", s->msg ? s->msg : "out of memory");
}

static int fail(struct lmt_session *s, struct lmt_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct lmt_session *s, struct lmt_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vfail(s, err, code, fmt, ap);
	va_end(ap);
	return rc;
}

/* An error the options caused (the tool's usage error). */
static int fail_usage(struct lmt_session *s, struct lmt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_usage(struct lmt_session *s, struct lmt_err *err, const char *fmt, ...)
{
	va_list ap;
	s->usage = 1;
	va_start(ap, fmt);
	int rc = vfail(s, err, LMT_EINVAL, fmt, ap);
	va_end(ap);
	return rc;
}

/* The first error inside a callback that cannot return one (alerts, saves). */
static void keep_error(struct lmt_session *s, int rc, const struct lmt_err *err)
{
	if (rc && !s->cb_rc) {
		s->cb_rc = rc;
		s->cb_err = *err;
	}
}

static int take_error(struct lmt_session *s, struct lmt_err *err)
{
	if (!s->cb_rc)
		return 0;
	if (err)
		*err = s->cb_err;
	return s->cb_rc;
}

static void run_notice(void *ctx, const char *msg)
{
	note(ctx, LMT_SESSION_WARN, "%s", msg);
}

/* j's record to the caller and, with to_run, to the run's metrics. */
static int emit(struct lmt_session *s, struct lmt_json *j, int to_run, struct lmt_err *err)
{
	lmt_json_end(j);
	if (s->follower)
		return 0;
	lmt_strbuf_putc(&j->out, '\n');
	if (s->cb.record)
		s->cb.record(s->cb.ctx, j);
	return to_run ? lmt_run_metrics_append(&s->run, j, err) : 0;
}

/* ---- the run and the checkpoint a resume continues ---- */

int lmt_session_connect(struct lmt_session *s, struct lmt_session_cfg *cfg, const struct lmt_session_cb *cb,
			volatile int *stop_signal, struct lmt_err *err)
{
	memset(s, 0, sizeof *s);
	s->cfg = cfg;
	s->cb = *cb;
	s->stop_signal = stop_signal;
	lmt_run_lock_init(&s->lock);
	lmt_run_init(&s->run, run_notice, s);
	int device = cfg->backend && strcmp(cfg->backend, "cpu") != 0;
	int rc = lmt_comm_open_for(&s->comm, cfg->comm, device, err);
	if (rc == LMT_EINVAL && cfg->comm) {
		char why[sizeof err->msg];
		snprintf(why, sizeof why, "%s", err->msg);
		return fail_usage(s, err, "--comm %s with --backend %s: %s", cfg->comm, cfg->backend ? cfg->backend : "cpu",
				  why);
	}
	if (rc)
		return rc;
	s->follower = s->comm.rank > 0;
	s->comm.timeout_s = cfg->comm_timeout;
	/* read before anything of the run is written */
	if (cfg->budget)
		return lmt_run_budget_read(cfg->budget, &s->budget_tokens, &s->budget_hours, err);
	return 0;
}

/* Resuming from checkpoint c (at update `update`): the options not given take
 * the values its run recorded; given ones that differ are refused, all of them
 * in one message (REFUSE), or applied with a warning and a "config-change"
 * event (WARN). */
static int adopt_recorded(struct lmt_session *s, const struct lmt_ckpt *c, uint64_t update,
			  const struct lmt_resumecfg_pair *given, size_t ngiven, struct lmt_err *err)
{
	struct lmt_resumecfg_result res;
	int rc = lmt_resumecfg_adopt(lmt_ckpt_state(c, "config"), c->dir, update, given, ngiven, s->cb.same, s->cb.ctx,
				     &res, err);
	if (rc == LMT_EINVAL) {
		rc = fail_usage(s, err, "%s", res.refused.buf);
		lmt_resumecfg_release(&res);
		return rc;
	}
	if (rc) {
		lmt_resumecfg_release(&res);
		return rc;
	}
	for (size_t i = 0; i < res.n && !rc; i++) {
		const struct lmt_resumecfg_item *it = &res.items[i];
		if (it->value) {
			s->cb.adopt(s->cb.ctx, it->opt, it->value);
		} else {
			/* its event is written when the run goes on (lmt_session_begin): a
			 * resume refused later changes nothing in the run */
			note(s, LMT_SESSION_WARN, "%s", it->warning);
			char *d = strdup(it->detail);
			if (!d || LMT_GROW(s->changes, s->capchanges, s->nchanges + 1)) {
				free(d);
				rc = fail(s, err, LMT_ENOMEM, "out of memory");
				break;
			}
			s->changes[s->nchanges++] = d;
		}
	}
	s->resumed_at = update;
	lmt_resumecfg_release(&res);
	return rc;
}

/* The checkpoint to resume from, if there is one (1), and the configuration its
 * run recorded adopted (adopt_recorded). */
static int open_checkpoint(struct lmt_session *s, const struct lmt_resumecfg_pair *given, size_t ngiven,
			   struct lmt_err *err)
{
	uint64_t update;
	int found = lmt_run_resume_open(&s->run, s->cfg->resume_from, s->cfg->resume_auto, &s->ck, err);
	if (found < 0)
		return found;
	if (found) {
		int rc = lmt_run_state_u64(&s->ck, "update", &update, err);
		if (!rc)
			rc = adopt_recorded(s, &s->ck, update, given, ngiven, err);
		if (rc)
			return rc;
	}
	return found;
}

/* The checkpoint rank 0 resumes from, opened by every other rank too (rank 0 has
 * chosen it and cleaned up after interrupted saves before the others look). */
static int share_checkpoint(struct lmt_session *s, const struct lmt_resumecfg_pair *given, size_t ngiven,
			    struct lmt_err *err)
{
	struct lmt_comm *comm = &s->comm;
	char path[PATH_MAX] = "";
	if (!s->follower && s->have_ck)
		snprintf(path, sizeof path, "%s", s->ck.dir);
	int rc = comm->broadcast(comm, path, sizeof path, 0, err);
	if (rc)
		return rc;
	if (!s->follower)
		return s->have_ck;
	if (!path[0])
		return 0;
	uint64_t update;
	if ((rc = lmt_ckpt_open(&s->ck, path, 1, err)) || (rc = lmt_run_state_u64(&s->ck, "update", &update, err)) ||
	    (rc = adopt_recorded(s, &s->ck, update, given, ngiven, err)))
		return rc;
	return 1;
}

int lmt_session_claim(struct lmt_session *s, const struct lmt_resumecfg_pair *given, size_t ngiven,
		      struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	int rc;
	/* one process owns a run: taken before anything of it is read (the checkpoint
	 * to resume, the metrics to rewind) or made */
	if (o->out && !s->follower && (rc = lmt_run_lock(o->out, 1, &s->lock, err)))
		return rc;
	s->run_out = o->out;
	if (!o->resume) /* a previous run there is refused now, not after the setup */
		return o->out && !s->follower ? lmt_run_check_new(o->out, err) : 0;
	/* the run's recorded configuration is the resume's: read before the rest. A
	 * --resume auto of a directory with no run in it is a new run: its files are
	 * made when it starts, as a new run's are (lmt_session_start) */
	char m[PATH_MAX], ck[PATH_MAX];
	if (!s->follower && o->resume_auto && !o->resume_from &&
	    !lmt_path_fmt(m, sizeof m, NULL, "%s/metrics.jsonl", o->out) &&
	    !lmt_path_fmt(ck, sizeof ck, NULL, "%s/ckpt", o->out) && access(m, F_OK) != 0 && access(ck, F_OK) != 0)
		s->fresh_auto = 1;
	if (!s->follower && !s->fresh_auto) {
		if ((rc = lmt_run_open(&s->run, o->out, 1, err)))
			return rc;
		if ((s->have_ck = open_checkpoint(s, given, ngiven, err)) < 0)
			return s->have_ck;
	}
	if (s->comm.world > 1 && (s->have_ck = share_checkpoint(s, given, ngiven, err)) < 0)
		return s->have_ck;
	return 0;
}

/* ---- the data, the model, the run directory ---- */

/* The dataset, and the tokenizer if given (it must be the dataset's). */
static int open_data(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	struct lmt_dataset *d = &s->d;
	int rc = lmt_dataset_open(d, o->data, err);
	if (rc)
		return rc;
	if (o->tokenizer) {
		if ((rc = lmt_tok_load(&s->tok, o->tokenizer, err)))
			return rc;
		if (memcmp(s->tok.sha256, d->tokenizer_sha256, 32)) {
			char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
			return fail(s, err, LMT_EFORMAT, "'%s' is tokenizer %.16s..., but the dataset '%s' was made with %.16s...",
				    o->tokenizer, lmt_sha256_hex(s->tok.sha256, a), o->data,
				    lmt_sha256_hex(d->tokenizer_sha256, b));
		}
		s->have_tok = 1;
	}
	int T = (int)d->seq_len;
	if (!o->context)
		o->context = T;
	if (T > o->context)
		return fail(s, err, LMT_EINVAL, "'%s': sequences of %d tokens are longer than the model's context of %d (--context)",
			    o->data, T, o->context);
	s->T = T;
	return 0;
}

/* The model: from an llm.c checkpoint, or of the options' shape (weights later). */
static int open_model(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	struct lmt_gpt *g = &s->g;
	int T = s->T, rc;
	if (o->init_llmc) {
		if ((rc = lmt_gpt_load_llmc(g, o->init_llmc, &s->be, err)))
			return rc;
		if (g->cfg.V != (int)s->d.vocab_size)
			return fail(s, err, LMT_EFORMAT, "'%s': vocabulary of %d, the dataset's tokenizer has %u", o->init_llmc,
				    g->cfg.V, s->d.vocab_size);
		if (g->cfg.max_T < T)
			return fail(s, err, LMT_EFORMAT, "'%s': context of %d, shorter than the dataset's sequences of %d",
				    o->init_llmc, g->cfg.max_T, T);
		return 0;
	}
	o->model.max_T = o->context;
	o->model.V = (int)s->d.vocab_size;
	o->model.Vp = lmt_gpt_padded_vocab(o->model.V);
	return lmt_gpt_init(g, &o->model, &s->be, err);
}

/* A run given no -o (nor --no-save) gets a new directory of its own, runs/STAMP-TAG
 * (ckpt/rundir.h), made once the model is built and locked at once, as -o's is
 * before it is read; a run refused later (its precision, its memory) removes it
 * again (lmt_session_mark_failed). When the run begins (announce_default_run) it
 * is named on stderr and in a "run" record on stdout (not in the run's files:
 * they stay the same wherever the run lives), and runs/latest points at it. */
static int default_run(struct lmt_session *s, struct lmt_err *err)
{
	char tag[64];
	int rc;
	snprintf(tag, sizeof tag, "d%d-h%d-c%d", s->g.cfg.L, s->g.cfg.NH, s->g.cfg.C);
	if ((rc = lmt_rundir_new("runs", time(NULL), tag, s->dir, sizeof s->dir, err)) ||
	    (rc = lmt_run_lock(s->dir, 0, &s->lock, err)))
		return rc;
	s->lock.made |= 1; /* made here: a refused run takes it away again */
	s->cfg->out = s->dir;
	return 0;
}

static int announce_default_run(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_err lerr = { 0 };
	int rc;
	int linked = !lmt_rundir_link_latest("runs", s->dir + strlen("runs/"), &lerr);
	if (!linked)
		note(s, LMT_SESSION_WARN, "runs/latest not updated: %s (the run goes on in '%s')", lerr.msg, s->dir);
	note(s, LMT_SESSION_INFO, "run directory '%s'", s->dir);
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "run");
	lmt_json_str(&j, "dir", s->dir);
	if (linked)
		lmt_json_str(&j, "latest", "runs/latest");
	rc = emit(s, &j, 0, err);
	lmt_json_release(&j);
	return rc;
}

int lmt_session_open(struct lmt_session *s, int threads, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	int rc;
	if (s->follower)
		o->out = NULL; /* nothing of the run is written here */
	if ((rc = open_data(s, err)) || (rc = lmt_backend_open(&s->be, o->backend, threads, err)) ||
	    (rc = open_model(s, err)))
		return rc;
	if (!o->out && !o->no_save && !s->follower) {
		if ((rc = default_run(s, err)))
			return rc;
		s->run_out = o->out;
		return 1;
	}
	return 0;
}

/* ---- the checks, the precision, the trainer ---- */

/* The checkpoint checked against this run's data and model. */
static int check_checkpoint(struct lmt_session *s, struct lmt_err *err)
{
	const struct lmt_session_cfg *o = s->cfg;
	struct lmt_ckpt *ck = &s->ck;
	uint64_t update;
	int rc;
	if ((rc = lmt_run_check_compat(ck, o->data, &s->d, &s->g.cfg, o->tc.seed, o->tc.shuffle_window, err)) ||
	    (rc = lmt_run_resume_cursor(ck, s->comm.rank, s->comm.world, &s->cursor, err)) ||
	    (rc = lmt_run_state_u64(ck, "update", &update, err)))
		return rc;
	if (update > o->tc.updates)
		return fail(s, err, LMT_EINVAL, "'%s' is at update %llu, past --updates %llu", ck->dir,
			    (unsigned long long)update, (unsigned long long)o->tc.updates);
	return 0;
}

/* Every rank must train the same run: a hash of what determines it (the dataset,
 * the model, the optimisation, the seed, the precision), compared with rank 0's. */
static int check_ranks_agree(struct lmt_session *s, struct lmt_err *err)
{
	const struct lmt_session_cfg *o = s->cfg;
	const struct lmt_dataset *d = &s->d;
	char text[1024], hex[LMT_SHA256_HEX];
	const struct lmt_train_cfg *t = &o->tc;
	snprintf(text, sizeof text,
		 "data %s; model L%d H%d C%d T%d V%u untied %d init %s/%llu; B %d accum %d updates %llu lr %.17g "
		 "min %.17g warmup %llu schedule %d betas %.17g %.17g eps %.17g wd %.17g decay-emb %d clip %.17g "
		 "seed %llu window %llu mask %d doc %d precision %s zero %d",
		 lmt_sha256_hex(d->manifest_sha256, hex), o->model.L, o->model.NH, o->model.C, o->context,
		 d->vocab_size, o->model.untied, o->init_llmc ? o->init_llmc : "gpt2", (unsigned long long)o->init_seed,
		 t->B, t->accum, (unsigned long long)t->updates, t->lr, t->min_lr_frac, (unsigned long long)t->warmup,
		 t->schedule, t->beta1, t->beta2, t->eps, t->weight_decay, t->decay_embeddings, t->clip,
		 (unsigned long long)t->seed, (unsigned long long)t->shuffle_window, t->seg_mask, t->cross_doc_targets,
		 o->precision ? o->precision : "auto", t->zero);
	int rc = lmt_run_ranks_agree(&s->comm, text, err);
	if (rc)
		return fail(s, err, rc, "%s (%s)", err->msg, s->follower ? text : "see that rank's options");
	return 0;
}

/* The compute precision: asked for, or the backend's fastest (bf16 where its GEMMs
 * have native bf16 kernels); recorded in the run's config; recompute with it. */
static int set_precision(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	struct lmt_backend *be = &s->be;
	const char *env = o->precision_env;
	int rc;
	if (!o->precision && env && *env && strcmp(env, "auto")) {
		int e = lmt_dtype_parse(env);
		if (e != LMT_DTYPE_F32 && e != LMT_DTYPE_BF16 && e != LMT_DTYPE_F16)
			return fail_usage(s, err, "LMT_PRECISION: '%s' is not fp32, bf16, fp16 or auto", env);
		o->precision = lmt_dtype_name(e);
	}
	int dt = o->precision ? lmt_dtype_parse(o->precision)
			      : (be->fast_dtypes & (1u << LMT_DTYPE_BF16)) ? LMT_DTYPE_BF16 : LMT_DTYPE_F32;
	if (!(be->dtypes & (1u << dt))) {
		char offers[64] = "";
		for (int d = 0; d < LMT_DTYPE_COUNT; d++)
			if (be->dtypes & (1u << d))
				snprintf(offers + strlen(offers), sizeof offers - strlen(offers), "%s%s", offers[0] ? ", " : "",
					 lmt_dtype_name(d));
		return fail_usage(s, err, "option '--precision': the %s backend computes in %s, not %s", be->name, offers,
				  lmt_dtype_name(dt));
	}
	o->tc.precision = dt;
	if ((rc = lmt_gpt_set_precision(&s->g, dt, err)) || (rc = lmt_gpt_set_recompute(&s->g, o->tc.recompute_every, err)))
		return rc;
	note(s, LMT_SESSION_INFO, "precision %s (GEMMs: %s)%s", lmt_dtype_name(dt), be->gemm_impl(be, dt),
	     o->tc.recompute_every ? ", recomputing blocks in backward" : "");
	return 0;
}

int lmt_session_start(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	int rc;
	s->cursor = (uint64_t)s->comm.rank;
	if (s->have_ck && (rc = check_checkpoint(s, err)))
		return rc;
	if (s->comm.world > 1 && (rc = check_ranks_agree(s, err)))
		return rc;
	/* a resumed run's weights come from the checkpoint */
	if (!o->init_llmc && !s->have_ck && (rc = lmt_gpt_init_weights(&s->g, o->init_seed, err)))
		return rc;
	if ((rc = set_precision(s, err)) || (rc = lmt_gpt_alloc_acts(&s->g, o->tc.B, s->T, err)) ||
	    (rc = lmt_trainer_init(&s->tr, &o->tc, &s->be, &s->comm, &s->g, &s->d, s->cursor, err)))
		return rc;
	/* a new run's files last: a run refused for its data, its model or its memory
	 * leaves none (and its directory, if this process made it, goes: mark_failed) */
	if (o->out && (!o->resume || s->fresh_auto) && (rc = lmt_run_open(&s->run, o->out, 0, err))) {
		lmt_session_halt(s);
		return rc;
	}
	return 0;
}

void lmt_session_halt(struct lmt_session *s)
{
	s->reached = s->tr.update;
	if (s->tr.loader.d)
		lmt_trainer_release(&s->tr);
}

/* This runs inside exit(): the caller only warns of a failure. */
int lmt_session_mark_failed(struct lmt_session *s, struct lmt_err *err)
{
	if (!s->begun) {
		/* refused before anything of the run was written: it stays as it was */
		if (!s->follower && s->run_out)
			lmt_run_unlock_unused(&s->lock, s->run_out);
		return 0;
	}
	if (s->run.events && !s->finished)
		return lmt_run_event(&s->run, "failed", "the run stopped on an error (see stderr)",
				     LMT_MAX(s->reached, s->resumed_at), err);
	return 0;
}

/* ---- the setup's records, the saver, the alerts ---- */

/* config.json, the parameters record and params.json. */
static int report_setup(struct lmt_session *s, struct lmt_err *err)
{
	const struct lmt_session_cfg *o = s->cfg;
	const struct lmt_gpt *g = &s->g;
	const char *peak_source = o->peak > 0 ? "--peak-flops" : "measured gemm";
	int rc;
	if (o->out) {
		struct lmt_run_config rc_ = { o->data, o->tokenizer, o->init_llmc, o->export_llmc, o->init_seed,
					      o->eval_every, o->eval_seqs, o->sample_every, o->sample_tokens, o->top_k,
					      o->temperature, o->prompt, s->peak, peak_source, o->ckpt_every, o->keep_every,
					      o->ckpt_minutes, o->keep, o->ckpt_sync };
		if ((rc = lmt_run_write_config(&s->run, &rc_, &o->tc, &s->d, g, &s->be, &s->comm, err)))
			return rc;
	}
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_run_param_record(&j, g, s->fpt, s->peak, peak_source, s->be.gemm_impl(&s->be, g->dtype));
	/* a resumed run's metrics already hold it */
	rc = emit(s, &j, !s->have_ck, err);
	if (!rc && o->out)
		rc = lmt_run_write_params(&s->run, &j, err);
	lmt_json_release(&j);
	return rc;
}

/* The resume record on stdout and in metrics.jsonl, and its event. */
static int report_resume(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_run_resume_record(&j, &s->tr, s->ck.dir, &s->rs, s->cursor);
	int rc = emit(s, &j, 1, err);
	if (!rc)
		rc = lmt_run_resume_event(&s->run, &s->tr, s->ck.dir, &s->rs, err);
	lmt_json_release(&j);
	return rc;
}

static void on_alert(void *ctx, int kind, int fired, uint64_t update, double value, double threshold,
		     const char *evidence);

/* A finished checkpoint: its record, its alerts and a progress line. */
static void ckpt_saved(void *ctx, const struct lmt_run_saved *sv)
{
	struct lmt_session *s = ctx;
	struct lmt_err err = { 0 };
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_run_save_record(&j, sv);
	keep_error(s, emit(s, &j, 1, &err), &err);
	lmt_json_release(&j);
	lmt_alerts_ckpt(&s->alerts, sv->update, sv->wall, sv->r->write_s, sv->verified, sv->why, on_alert, s);
	char tail[96] = "";
	if (sv->best_interval_s > 0)
		snprintf(tail, sizeof tail, "; with an MTBF of %.0f s the best interval is %.0f s", s->cfg->mtbf,
			 sv->best_interval_s);
	note(s, LMT_SESSION_INFO_RECORD, "checkpoint of update %llu: %.1f MB written in %.2f s; cost %.3f s (training %s)%s",
	     (unsigned long long)sv->update, sv->r->bytes / 1e6, sv->r->write_s, sv->cost_s,
	     sv->async ? "paused for the snapshot" : "waited for the write", tail);
}

/* The saver of the run's checkpoints, from t_start on (a resumed run's checkpoint
 * is not saved again). */
static void start_saver(struct lmt_session *s)
{
	const struct lmt_session_cfg *o = s->cfg;
	struct lmt_run_saver *sv = &s->sv;
	struct lmt_trainer *tr = &s->tr;
	lmt_run_saver_init(sv, &s->run, tr);
	sv->keep = o->keep;
	sv->keep_every = o->keep_every;
	sv->mtbf = o->mtbf;
	sv->wall_offset = s->rs.wall_offset;
	sv->t_start = s->t_start;
	sv->saved = ckpt_saved;
	sv->saved_ctx = s;
	sv->last_saved = s->have_ck ? tr->update : UINT64_MAX;
	if (o->out && !o->ckpt_sync && (o->ckpt_every || o->ckpt_minutes > 0) && tr->comm->world == 1)
		lmt_ckpt_async_reserve(&sv->async, tr->g->nparams * 3);
}

int lmt_session_begin(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	struct lmt_trainer *tr = &s->tr;
	struct lmt_gpt *g = &s->g;
	int rc;
	s->begun = 1;
	if (s->dir[0] && s->cfg->out == s->dir && (rc = announce_default_run(s, err)))
		return rc;
	/* the options a resume changed, noted at claim, now that the run goes on */
	for (size_t i = 0; i < s->nchanges; i++)
		if ((rc = lmt_run_event(&s->run, "config-change", s->changes[i], s->resumed_at, err)))
			return rc;
	if (s->have_ck) {
		double t0 = lmt_now();
		if ((tr->shard && (rc = lmt_gpt_alloc_optimizer(g, err))) ||
		    (rc = lmt_run_resume(&s->run, &s->ck, tr, &s->rs, err)) || (rc = lmt_trainer_take_moments(tr, err)))
			return rc;
		note(s, LMT_SESSION_INFO, "resumed from '%s' at update %llu (%.2f s to load; %llu updates to redo)", s->ck.dir,
		     (unsigned long long)tr->update, lmt_now() - t0, (unsigned long long)s->rs.replayed);
	} else if (o->resume && s->run.metrics) {
		if ((rc = lmt_run_restart(&s->run, &s->rs.replayed, err)))
			return rc;
		if (s->rs.replayed)
			note(s, LMT_SESSION_WARN, "'%s' has no valid checkpoint: starting again from update 0 (%llu updates to redo)",
			     o->out, (unsigned long long)s->rs.replayed);
	}

	s->peak = o->peak > 0 ? o->peak : lmt_backend_peak_flops(&s->be, g->dtype, 1);
	/* the measured peak (memory.peak_alloc) is the training's: from here, after the
	 * setup's transients (padding, the peak probe's matrices) are freed */
	s->be.mem_peak = s->be.mem_now;
	s->fpt = lmt_gpt_flops_per_token(&g->cfg, s->T);
	if ((rc = report_setup(s, err)))
		return rc;
	if (s->have_ck) {
		if ((rc = report_resume(s, err)))
			return rc;
		lmt_ckpt_close(&s->ck);
	} else if ((rc = lmt_run_event(&s->run, o->resume ? "restart" : "start", NULL, 0, err))) {
		return rc;
	}
	struct lmt_gpt_counts pc;
	lmt_gpt_count(g, &pc);
	note(s, LMT_SESSION_INFO,
	     "%s: %zu parameters (%d layers, %d heads, %d channels, vocabulary %d), %d x %d x %d tokens per update",
	     s->be.name, pc.total, g->cfg.L, g->cfg.NH, g->cfg.C, g->cfg.V, o->tc.accum, o->tc.B, s->T);

	s->t_start = lmt_now();
	if ((rc = lmt_run_sampling_init(&s->smp, o->prompt, s->have_tok ? &s->tok : NULL, s->d.eos_id, err)))
		return rc;
	s->smp.tokens = o->sample_tokens;
	s->smp.top_k = o->top_k;
	s->smp.temperature = o->temperature;
	s->smp.seed = o->tc.seed;
	start_saver(s);
	s->sv.run_dir = s->run_out;
	s->cursors = s->comm.world > 1 ? calloc((size_t)s->comm.world, sizeof *s->cursors) : NULL;
	if (s->comm.world > 1 && !s->cursors)
		return fail(s, err, LMT_ENOMEM, "out of memory");
	s->last_due = s->t_start;
	lmt_json_init(&s->j);
	lmt_json_init(&s->aj);
	struct lmt_alert_plan plan;
	lmt_run_alert_plan(&plan, tr, o->ckpt_every, o->ckpt_minutes, o->mem_limit, s->budget_tokens, s->budget_hours);
	lmt_alerts_init(&s->alerts, &o->alert, &plan);
	s->stats_at = tr->update;
	s->stats_clipped = tr->clipped_updates;
	s->tokens0 = tr->tokens;
	s->updates0 = tr->update;
	return 0;
}

/* ---- the updates ---- */

/* An alert's episode began or ended: a record on stdout and in the metrics, an
 * event, and a line on stderr. */
static void on_alert(void *ctx, int kind, int fired, uint64_t update, double value, double threshold,
		     const char *evidence)
{
	struct lmt_session *s = ctx;
	struct lmt_json *j = &s->aj;
	struct lmt_err err = { 0 };
	char detail[1200]; /* the verifier's message whole */
	if (s->follower)
		return;
	snprintf(detail, sizeof detail, "%s: %s", lmt_alert_name(kind), evidence);
	keep_error(s, lmt_run_event(&s->run, fired ? "alert" : "alert-cleared", detail, update, &err), &err);
	lmt_json_begin(j);
	lmt_json_str(j, "event", fired ? "alert" : "alert-cleared");
	lmt_json_u64(j, "update", update);
	lmt_json_str(j, "kind", lmt_alert_name(kind));
	lmt_json_num(j, "value", value);
	lmt_json_num(j, "threshold", threshold);
	lmt_json_str(j, "evidence", evidence);
	keep_error(s, emit(s, j, 1, &err), &err);
	if (fired)
		note(s, LMT_SESSION_WARN, "update %llu: alert %s", (unsigned long long)update, detail);
	else
		note(s, LMT_SESSION_INFO, "update %llu: alert %s cleared", (unsigned long long)update, lmt_alert_name(kind));
}

/* A non-finite update: recorded; under --on-nonfinite stop (rc), the run ends (1). */
static int report_nonfinite(struct lmt_session *s, const struct lmt_step_stats *st, int rc,
			    const struct lmt_err *step_err, struct lmt_err *err)
{
	char detail[256];
	int e = lmt_run_nonfinite(&s->run, st, rc ? step_err->msg : NULL, detail, sizeof detail, err);
	if (e)
		return e;
	if (rc) {
		note(s, LMT_SESSION_ERROR, "%s (--on-nonfinite stop)", step_err->msg);
		return 1;
	}
	note(s, LMT_SESSION_WARN, "update %llu skipped: %s", (unsigned long long)st->update, detail);
	return 0;
}

/* With world > 1 the save's state needs every rank's loader cursor: gathered from
 * every rank (a collective: each rank calls this at the same update). */
static int gather_cursors(struct lmt_session *s, struct lmt_err *err)
{
	if (!s->cursors)
		return 0;
	uint64_t mine = lmt_loader_cursor(&s->tr.loader);
	int rc = s->comm.allgather(&s->comm, &mine, s->cursors, sizeof mine, err);
	if (rc)
		return rc;
	s->sv.cursors = s->cursors;
	return 0;
}

int lmt_session_train(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	struct lmt_trainer *tr = &s->tr;
	struct lmt_comm *comm = &s->comm;
	struct lmt_json *j = &s->j;
	volatile int none = 0, *sig = s->stop_signal ? s->stop_signal : &none;
	int e;
	while (tr->update < o->tc.updates) {
		struct lmt_step_stats st;
		struct lmt_err step_err = { 0 }; /* a stopping non-finite update's message, kept for its report */
		int rc = lmt_trainer_step(tr, &st, &step_err);
		if (rc && !st.nonfinite_what) {
			*err = step_err;
			return rc;
		}
		double wall = s->rs.wall_offset + (lmt_now() - s->t_start);
		lmt_run_update_record(j, tr, &st, tr->loader.wait_seconds - s->wait_before, wall, s->fpt, s->peak,
				      o->log_samples);
		struct lmt_alert_obs ao;
		lmt_run_alert_obs(&ao, tr, &st, tr->loader.wait_seconds - s->wait_before, wall);
		ao.saved = s->sv.last_saved == UINT64_MAX ? 0 : s->sv.last_saved;
		/* every rank's times in the update record (a collective), and in the
		 * alerts' observation */
		if (comm->world > 1 && (e = lmt_run_rank_times(j, comm, &st, ao.data_wait, &ao, err)))
			return e;
		s->wait_before = tr->loader.wait_seconds;
		if ((e = emit(s, j, 1, err)))
			return e;
		if (st.have_stats) {
			lmt_run_stats_record(j, tr, st.update, st.update - s->stats_at, tr->clipped_updates - s->stats_clipped);
			if ((e = emit(s, j, 1, err)))
				return e;
			s->stats_at = st.update;
			s->stats_clipped = tr->clipped_updates;
		}
		lmt_alerts_update(&s->alerts, &ao, on_alert, s);
		if ((e = take_error(s, err)))
			return e;
		if (comm->world > 1 && st.update <= o->audit &&
		    ((e = lmt_run_audit_record(j, comm, tr, st.update, err)) || (e = emit(s, j, 1, err))))
			return e;
		if (st.nonfinite_what && (e = report_nonfinite(s, &st, rc, &step_err, err))) {
			if (e < 0)
				return e;
			s->status = e;
			break;
		}
		if (s->cb.step)
			s->cb.step(s->cb.ctx, &st);
		int last = st.update == o->tc.updates;
		int eval_due = o->eval_every && s->d.split_seqs[LMT_SPLIT_VAL] && (st.update % o->eval_every == 0 || last);
		int sample_due = o->sample_every && (st.update % o->sample_every == 0 || last);
		/* ZeRO-3: every parameter on every rank for these (collective, so on followers too) */
		if ((eval_due || sample_due) && (e = lmt_trainer_unshard(tr, err)))
			return e;
		if (eval_due) {
			double vl;
			if ((e = lmt_run_eval_record(j, tr, o->eval_seqs, st.update, &vl, err)) || (e = emit(s, j, 1, err)))
				return e;
			lmt_alerts_eval(&s->alerts, st.update, vl, on_alert, s);
			if ((e = take_error(s, err)))
				return e;
		}
		if (sample_due && !s->follower &&
		    ((e = lmt_run_sample_record(j, &s->g, &s->smp, st.update, err)) || (e = emit(s, j, 1, err))))
			return e;
		lmt_trainer_reshard(tr);
		/* a signal to any rank stops every rank after this update */
		int stop = *sig;
		if (comm->world > 1 && (e = comm->allreduce(comm, &stop, 1, LMT_DTYPE_I32, LMT_COMM_OP_MAX, err)))
			return e;
		if (stop && !*sig)
			*sig = stop;
		if (s->run_out) {
			if (o->out && (e = lmt_run_save_poll(&s->sv, 0, err)))
				return e;
			if ((e = take_error(s, err)))
				return e;
			int due = (o->ckpt_every && st.update % o->ckpt_every == 0) ||
				  (o->ckpt_minutes > 0 && lmt_now() - s->last_due >= o->ckpt_minutes * 60);
			if (due && !last && !*sig && tr->update != o->stop_at) {
				s->last_due = lmt_now();
				if ((e = gather_cursors(s, err)) || (e = lmt_trainer_gather_moments(tr, err)) ||
				    (e = lmt_run_save(&s->sv, o->ckpt_sync, err)) || (e = take_error(s, err)))
					return e;
				lmt_trainer_drop_moments(tr);
			}
		}
		if (*sig) {
			s->interrupted = *sig;
			break;
		}
		if (o->stop_at && tr->update == o->stop_at && !last) {
			s->interrupted = -1;
			break;
		}
	}
	return 0;
}

/* ---- the end ---- */

/* The summary record, the run's end in its events, and the closing lines. */
static int report_end(struct lmt_session *s, double wall, struct lmt_err *err)
{
	const struct lmt_session_cfg *o = s->cfg;
	const struct lmt_trainer *tr = &s->tr;
	int rc;
	if (s->interrupted) {
		char detail[128];
		if ((rc = lmt_run_stopped(&s->run, s->interrupted > 0 ? s->interrupted : 0, o->stop_at, tr->update, detail,
					  sizeof detail, err)))
			return rc;
		note(s, LMT_SESSION_INFO, "%s", detail);
	}
	lmt_run_summary_record(&s->j, tr, tr->tokens - s->tokens0, tr->update - s->updates0, wall, s->rs.wall_offset,
			       s->status ? "stopped" : s->interrupted ? "interrupted" : "done");
	if ((rc = emit(s, &s->j, 1, err)))
		return rc;
	if (!s->interrupted && (rc = lmt_run_event(&s->run, s->status ? "failed" : "end", NULL, tr->update, err)))
		return rc;
	s->finished = 1;
	if (tr->update == s->updates0)
		note(s, LMT_SESSION_INFO, "nothing to do: the run was already at update %llu (--updates %llu)",
		     (unsigned long long)tr->update, (unsigned long long)o->tc.updates);
	else
		note(s, LMT_SESSION_INFO, "%llu updates, %llu tokens in %.1f s (%.0f tokens/s)",
		     (unsigned long long)(tr->update - s->updates0), (unsigned long long)(tr->tokens - s->tokens0), wall,
		     (tr->tokens - s->tokens0) / wall);
	return 0;
}

int lmt_session_finish(struct lmt_session *s, struct lmt_err *err)
{
	struct lmt_session_cfg *o = s->cfg;
	struct lmt_trainer *tr = &s->tr;
	int rc;
	/* the final checkpoint, written before exit 0 (a failed run's state is not saved) */
	if (s->run_out && !s->status && ((rc = gather_cursors(s, err)) || (rc = lmt_trainer_gather_moments(tr, err))))
		return rc;
	if (s->run_out && ((rc = s->status ? lmt_run_save_poll(&s->sv, 1, err) : lmt_run_save(&s->sv, 1, err)) ||
			   (rc = take_error(s, err))))
		return rc;
	lmt_trainer_drop_moments(tr);
	lmt_run_saver_release(&s->sv);
	free(s->cursors);
	s->cursors = NULL;
	if (!s->status && !s->interrupted && o->export_llmc &&
	    ((rc = lmt_trainer_unshard(tr, err)) || (!s->follower && (rc = lmt_gpt_save_llmc(&s->g, o->export_llmc, err)))))
		return rc;
	return report_end(s, lmt_now() - s->t_start, err);
}

void lmt_session_release(struct lmt_session *s)
{
	lmt_run_close(&s->run);
	lmt_run_unlock(&s->lock);
	lmt_run_sampling_release(&s->smp);
	lmt_json_release(&s->j);
	lmt_json_release(&s->aj);
	lmt_trainer_release(&s->tr);
	lmt_gpt_release(&s->g);
	if (s->have_tok)
		lmt_tok_release(&s->tok);
	s->be.release(&s->be);
	lmt_dataset_close(&s->d);
	s->comm.release(&s->comm);
	for (size_t i = 0; i < s->nchanges; i++)
		free(s->changes[i]);
	free(s->changes);
	s->changes = NULL;
	s->nchanges = s->capchanges = 0;
	free(s->msg);
	s->msg = NULL;
}
