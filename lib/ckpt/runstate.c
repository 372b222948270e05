/*
 * runstate.c: the run directory, resuming and saving; see runstate.h.
 *
 * The code came out of the train tool, which died on every failure; each of its
 * messages is kept word for word, now returned in struct lmt_err, so the tool's
 * stderr is what it was.
 */
#include "ckpt/runstate.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/trainstate.h"
#include "core/atomicfile.h"
#include "core/strbuf.h"
#include "core/util.h"
#include "core/version.h"
#include "model/generate.h"
#include "model/zero.h"

static void notice(const struct lmt_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(const struct lmt_run *r, const char *fmt, ...)
{
	if (!r->notice)
		return;
	struct lmt_strbuf b = { 0 };
	va_list ap;
	va_start(ap, fmt);
	lmt_strbuf_vprintf(&b, fmt, ap);
	va_end(ap);
	r->notice(r->notice_ctx, b.buf ? b.buf : "out of memory");
	lmt_strbuf_release(&b);
}

/* ---- the run directory ---- */

void lmt_run_init(struct lmt_run *r, void (*fn)(void *ctx, const char *msg), void *ctx)
{
	memset(r, 0, sizeof *r);
	r->notice = fn;
	r->notice_ctx = ctx;
}

static int open_append(FILE **f, const char *dir, const char *name, struct lmt_err *err)
{
	char p[PATH_MAX];
	int rc = lmt_path_fmt(p, sizeof p, err, "%s/%s", dir, name);
	if (rc)
		return rc;
	*f = fopen(p, "a");
	if (!*f)
		return lmt_err_errno(err, "'%s'", p);
	return 0;
}

/* Whether directory dir holds anything: 1, 0 (empty or missing), or -1 where it
 * cannot be read (the callers count that as holding something). */
static int has_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -1;
	struct dirent *de;
	int any = 0;
	while (!any && (de = readdir(d)))
		any = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return any;
}

/* A run that stopped before its first update (a damaged dataset found by the
 * first read, a kill during setup) left nothing that a rerun would lose: no update
 * record in its metrics and nothing in ckpt/. Such a run directory is reused, so
 * the identical command can be run again once the cause is fixed. */
static int never_updated(const char *dir, const char *metrics)
{
	char ck[PATH_MAX], *data;
	size_t n;
	int updated = 0;
	if (lmt_path_fmt(ck, sizeof ck, NULL, "%s/ckpt", dir) || lmt_read_file(metrics, &data, &n, NULL))
		return 0;
	for (char *q = data, *e; q < data + n && !updated; q = e + 1) {
		if (!(e = memchr(q, '\n', (size_t)(data + n - q))))
			e = data + n;
		updated = (size_t)(e - q) >= 17 && !strncmp(q, "{\"event\":\"update\"", 17);
	}
	free(data);
	return !updated && !has_entries(ck);
}

int lmt_run_check_new(const char *dir, struct lmt_err *err)
{
	char prev[PATH_MAX], ck[PATH_MAX];
	int rc;
	if ((rc = lmt_path_fmt(prev, sizeof prev, err, "%s/metrics.jsonl", dir)) ||
	    (rc = lmt_path_fmt(ck, sizeof ck, err, "%s/ckpt", dir)))
		return rc;
	if (access(prev, F_OK) == 0 && !never_updated(dir, prev))
		return lmt_err_set(err, LMT_EINVAL, "'%s' holds a previous run (metrics.jsonl); give a new directory, or --resume",
				   dir);
	/* checkpoints without metrics (copied in, or resharded there): a new run's
	 * retention would delete some and leave the others for a resume to take */
	if (access(prev, F_OK) != 0 && has_entries(ck) > 0)
		return lmt_err_set(err, LMT_EINVAL, "'%s' holds checkpoints (ckpt/) of another run; give a new directory, "
				   "or --resume to continue from them", dir);
	return 0;
}

int lmt_run_open(struct lmt_run *r, const char *dir, int resuming, struct lmt_err *err)
{
	char prev[PATH_MAX], ck[PATH_MAX];
	int rc;
	if ((rc = lmt_path_fmt(prev, sizeof prev, err, "%s/metrics.jsonl", dir)))
		return rc;
	if (access(prev, F_OK) == 0 && !resuming) {
		if ((rc = lmt_run_check_new(dir, err)))
			return rc;
		if (truncate(prev, 0))
			return lmt_err_errno(err, "'%s'", prev);
		notice(r, "'%s' holds a run that stopped before its first update (no update record, no checkpoint): "
			  "starting it again in place", dir);
	}
	if (mkdir(dir, 0755) && errno != EEXIST)
		return lmt_err_errno(err, "'%s'", dir);
	if ((rc = lmt_path_fmt(r->dir, sizeof r->dir, err, "%s", dir)) || (rc = lmt_path_fmt(ck, sizeof ck, err, "%s/ckpt", dir)))
		return rc;
	if (mkdir(ck, 0755) && errno != EEXIST)
		return lmt_err_errno(err, "'%s'", ck);
	if ((rc = open_append(&r->metrics, dir, "metrics.jsonl", err)) ||
	    (rc = open_append(&r->events, dir, "events.jsonl", err)))
		return rc;
	return 0;
}

void lmt_run_close(struct lmt_run *r)
{
	if (r->metrics)
		fclose(r->metrics);
	if (r->events)
		fclose(r->events);
	r->metrics = r->events = NULL;
	r->dir[0] = 0;
	free(r->config_text);
	r->config_text = NULL;
}

int lmt_run_metrics_append(struct lmt_run *r, const struct lmt_json *j, struct lmt_err *err)
{
	FILE *f = r->metrics;
	if (f && (fwrite(j->out.buf, 1, j->out.len, f) != j->out.len || fflush(f)))
		return lmt_err_errno(err, "'%s/metrics.jsonl': write", r->dir);
	return 0;
}

int lmt_run_event_write(struct lmt_run *r, struct lmt_json *j, struct lmt_err *err)
{
	lmt_json_end(j);
	if (!r->events)
		return 0;
	lmt_strbuf_putc(&j->out, '\n');
	if (j->out.oom)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	if (fwrite(j->out.buf, 1, j->out.len, r->events) != j->out.len || fflush(r->events))
		return lmt_err_errno(err, "'%s/events.jsonl': write", r->dir);
	return 0;
}

int lmt_run_event(struct lmt_run *r, const char *what, const char *detail, uint64_t update, struct lmt_err *err)
{
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", what);
	lmt_json_u64(&j, "update", update);
	if (detail)
		lmt_json_str(&j, "detail", detail);
	int rc = lmt_run_event_write(r, &j, err);
	lmt_json_release(&j);
	return rc;
}

/* ---- config.json and params.json ---- */

/* The machine, for the run record: what ran it, as the OS reports it. */
static void hardware_record(struct lmt_json *j, const struct lmt_backend *be, const struct lmt_comm *comm)
{
	char model[256] = "unknown", host[256] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
				snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
				model[strcspn(model, "\n")] = 0;
				break;
			}
		fclose(f);
	}
	gethostname(host, sizeof host - 1);
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	lmt_json_obj(j, "hardware");
	lmt_json_str(j, "host", host);
	lmt_json_str(j, "cpu", model);
	lmt_json_u64(j, "cpus_online", (uint64_t)LMT_MAX(sysconf(_SC_NPROCESSORS_ONLN), 1));
	lmt_json_u64(j, "memory_bytes", pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0);
	lmt_json_str(j, "accelerator", "none");
	lmt_json_u64(j, "devices", 0);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "topology");
	lmt_json_u64(j, "world", (uint64_t)comm->world);
	lmt_json_u64(j, "nodes", 1);
	lmt_json_u64(j, "ranks_per_node", (uint64_t)comm->world);
	lmt_json_u64(j, "threads_per_rank", (uint64_t)be->threads);
	lmt_json_str(j, "communicator", comm->name);
	lmt_json_obj_end(j);
}

static const char *schedule_name(int s)
{
	return s == LMT_SCHED_COSINE ? "cosine" : s == LMT_SCHED_LINEAR ? "linear" : "constant";
}

/* The model's shape, as config.json and the checkpoint state both record it. */
static void model_shape(struct lmt_json *j, const struct lmt_gpt_config *m)
{
	lmt_json_u64(j, "layers", (uint64_t)m->L);
	lmt_json_u64(j, "heads", (uint64_t)m->NH);
	lmt_json_u64(j, "channels", (uint64_t)m->C);
	lmt_json_u64(j, "context", (uint64_t)m->max_T);
	lmt_json_u64(j, "vocab", (uint64_t)m->V);
	lmt_json_u64(j, "vocab_padded", (uint64_t)m->Vp);
	lmt_json_bool(j, "untied", m->untied);
}

/* The model's allocations in bytes on this rank (zero.h), and the same bytes by
 * dtype: master weights, gradients, moments and staging in fp32 (the staging's
 * working copies counted there too); the working copy and the GEMMs' inputs among
 * the activations in the compute dtype. */
static void memory_fields(struct lmt_json *j, const struct lmt_gpt *g, int zero, int world)
{
	struct lmt_state_bytes sb;
	lmt_state_bytes(g, zero, world, &sb);
	lmt_json_u64(j, "params", sb.params);
	lmt_json_u64(j, "weights_working", sb.working);
	lmt_json_u64(j, "grads", sb.grads);
	lmt_json_u64(j, "optimizer", sb.optimizer);
	lmt_json_u64(j, "staging", sb.staging);
	lmt_json_u64(j, "activations", g->nacts);
	lmt_json_obj(j, "by_dtype");
	for (int d = 0; d < LMT_DTYPE_COUNT; d++) {
		size_t b = g->act_bytes.by_dtype[d] +
			   (d == LMT_DTYPE_F32 ? sb.params + sb.grads + sb.optimizer + sb.staging : 0) +
			   (d == g->dtype ? sb.working : 0);
		if (b)
			lmt_json_u64(j, lmt_dtype_name(d), b);
	}
	lmt_json_obj_end(j);
}

int lmt_run_write_config(struct lmt_run *r, const struct lmt_run_config *c, const struct lmt_train_cfg *tc,
			 const struct lmt_dataset *d, const struct lmt_gpt *g, const struct lmt_backend *be,
			 const struct lmt_comm *comm, struct lmt_err *err)
{
	struct lmt_json j;
	char hex[LMT_SHA256_HEX], p[PATH_MAX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "tool", "train");
	lmt_json_str(&j, "tool_version", LMT_VERSION);
	lmt_json_str(&j, "revision", lmt_revision());
	lmt_json_str(&j, "backend", be->name);
	lmt_json_u64(&j, "threads", (uint64_t)be->threads);
	/* the directory the paths below are relative to (ckpt/resumecfg.h) */
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd))
		lmt_json_str(&j, "cwd", cwd);
	hardware_record(&j, be, comm);
	lmt_json_obj(&j, "data");
	lmt_json_str(&j, "dir", c->data_dir);
	lmt_json_str(&j, "manifest_sha256", lmt_sha256_hex(d->manifest_sha256, hex));
	lmt_json_str(&j, "tokenizer", c->tokenizer);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(d->tokenizer_sha256, hex));
	lmt_json_u64(&j, "seq_len", d->seq_len);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "model");
	model_shape(&j, &g->cfg);
	lmt_json_str(&j, "init", c->init_llmc ? c->init_llmc : "gpt2-normal");
	if (c->init_llmc)
		lmt_json_null(&j, "init_seed");
	else
		lmt_json_u64(&j, "init_seed", c->init_seed);
	lmt_json_str(&j, "export_llmc", c->export_llmc);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "memory");
	memory_fields(&j, g, tc->zero, comm->world);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "optimization");
	lmt_json_u64(&j, "micro_batch", (uint64_t)tc->B);
	lmt_json_u64(&j, "accum", (uint64_t)tc->accum);
	lmt_json_u64(&j, "global_batch_sequences", (uint64_t)tc->B * tc->accum);
	lmt_json_u64(&j, "global_batch_positions", (uint64_t)tc->B * tc->accum * d->seq_len);
	lmt_json_u64(&j, "updates", tc->updates);
	lmt_json_num(&j, "lr", tc->lr);
	lmt_json_num(&j, "min_lr_frac", tc->min_lr_frac);
	lmt_json_u64(&j, "warmup", tc->warmup);
	lmt_json_str(&j, "schedule", schedule_name(tc->schedule));
	lmt_json_num(&j, "beta1", tc->beta1);
	lmt_json_num(&j, "beta2", tc->beta2);
	lmt_json_num(&j, "eps", tc->eps);
	lmt_json_num(&j, "weight_decay", tc->weight_decay);
	lmt_json_bool(&j, "decay_embeddings", tc->decay_embeddings);
	lmt_json_num(&j, "clip", tc->clip);
	lmt_json_str(&j, "on_nonfinite", tc->on_nonfinite == LMT_NONFINITE_STOP ? "stop" : "skip");
	lmt_json_u64(&j, "seed", tc->seed);
	lmt_json_bool(&j, "segment_mask", tc->seg_mask);
	lmt_json_str(&j, "doc_targets", tc->cross_doc_targets ? "keep" : "drop");
	lmt_json_u64(&j, "shuffle_window", tc->shuffle_window);
	lmt_json_str(&j, "precision", lmt_dtype_name(tc->precision));
	lmt_json_u64(&j, "recompute_every", (uint64_t)tc->recompute_every);
	lmt_json_u64(&j, "zero", (uint64_t)tc->zero);
	lmt_json_u64(&j, "stats_every", tc->stats_every);
	lmt_json_num(&j, "loss_scale", tc->loss_scale);
	lmt_json_u64(&j, "loss_scale_window", tc->loss_scale_window);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "eval");
	lmt_json_u64(&j, "every", c->eval_every);
	lmt_json_u64(&j, "sequences", c->eval_seqs);
	lmt_json_u64(&j, "sample_every", c->sample_every);
	lmt_json_u64(&j, "sample_tokens", (uint64_t)c->sample_tokens);
	lmt_json_num(&j, "temperature", c->temperature);
	lmt_json_u64(&j, "top_k", (uint64_t)c->top_k);
	lmt_json_str(&j, "prompt", c->prompt);
	lmt_json_obj_end(&j);
	lmt_json_num(&j, "peak_flops", c->peak_flops);
	lmt_json_str(&j, "peak_source", c->peak_source);
	lmt_json_obj(&j, "checkpoints");
	lmt_json_u64(&j, "every", c->ckpt_every);
	lmt_json_num(&j, "minutes", c->ckpt_minutes);
	lmt_json_u64(&j, "keep", (uint64_t)c->keep);
	lmt_json_u64(&j, "keep_every", c->keep_every);
	lmt_json_bool(&j, "sync", c->ckpt_sync);
	lmt_json_obj_end(&j);
	lmt_json_end(&j);
	lmt_strbuf_putc(&j.out, '\n');
	int rc = j.out.oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory") : 0;
	if (!rc && !(rc = lmt_path_fmt(p, sizeof p, err, "%s/config.json", r->dir)))
		rc = lmt_write_file_atomic(p, j.out.buf, j.out.len, err);
	if (!rc) {
		free(r->config_text);
		j.out.buf[--j.out.len] = 0; /* without its newline: a value in a checkpoint's state */
		r->config_text = lmt_strbuf_detach(&j.out);
	}
	lmt_json_release(&j);
	return rc;
}

void lmt_run_param_record(struct lmt_json *j, const struct lmt_gpt *g, double fpt, double peak,
			  const char *peak_source, const char *gemm_kernel)
{
	struct lmt_gpt_counts c;
	lmt_gpt_count(g, &c);
	lmt_json_begin(j);
	lmt_json_str(j, "event", "parameters");
	lmt_json_u64(j, "total", c.total);
	lmt_json_u64(j, "embedding", c.embedding);
	lmt_json_u64(j, "matrix", c.matrix);
	lmt_json_u64(j, "bias", c.bias);
	lmt_json_u64(j, "norm", c.norm);
	lmt_json_u64(j, "vocab_padding", c.padding);
	lmt_json_bool(j, "tied", !g->cfg.untied);
	lmt_json_obj(j, "tensors");
	for (int i = 0; i < g->nt; i++) {
		lmt_json_arr(j, g->t[i].name);
		for (int k = 0; k < g->t[i].ndim; k++)
			lmt_json_u64(j, NULL, (uint64_t)g->t[i].shape[k]);
		lmt_json_arr_end(j);
	}
	lmt_json_obj_end(j);
	lmt_json_num(j, "flops_per_token", fpt);
	lmt_json_num(j, "peak_flops", peak);
	lmt_json_str(j, "peak_source", peak_source);
	lmt_json_str(j, "precision", lmt_dtype_name(g->dtype));
	lmt_json_str(j, "gemm_kernel", gemm_kernel);
}

int lmt_run_write_params(const struct lmt_run *r, struct lmt_json *j, struct lmt_err *err)
{
	char p[PATH_MAX];
	int rc = lmt_path_fmt(p, sizeof p, err, "%s/params.json", r->dir);
	if (rc)
		return rc;
	lmt_json_end(j);
	return lmt_write_file_atomic(p, j->out.buf, j->out.len, err);
}

void lmt_run_update_record(struct lmt_json *j, const struct lmt_trainer *tr, const struct lmt_step_stats *st,
			   double data_wait, double wall, double fpt, double peak, int log_samples)
{
	const struct lmt_gpt *g = tr->g;
	lmt_json_begin(j);
	lmt_json_str(j, "event", "update");
	lmt_json_u64(j, "update", st->update);
	lmt_json_u64(j, "microsteps", (uint64_t)tr->cfg.accum);
	lmt_json_u64(j, "tokens", st->valid_tokens);
	lmt_json_u64(j, "tokens_total", tr->tokens);
	lmt_json_num(j, "loss", st->loss);
	lmt_json_num(j, "lr", st->lr);
	lmt_json_num(j, "grad_norm", st->grad_norm);
	lmt_json_bool(j, "clipped", st->clipped);
	lmt_json_num(j, "clipped_fraction", (double)tr->clipped_updates / (double)tr->update);
	lmt_json_bool(j, "skipped", st->skipped);
	lmt_json_str(j, "precision", lmt_dtype_name(g->dtype));
	lmt_json_num(j, "loss_scale", st->loss_scale);
	lmt_json_bool(j, "overflow", st->overflow);
	lmt_json_num(j, "tokens_per_s", st->valid_tokens / st->t_total);
	lmt_json_num(j, "flops_per_s", fpt * (double)st->positions / st->t_total);
	lmt_json_num(j, "mfu", fpt * (double)st->positions / st->t_total / peak);
	lmt_json_obj(j, "time");
	lmt_json_num(j, "data", st->t_data);
	lmt_json_num(j, "data_wait", data_wait);
	lmt_json_num(j, "forward", st->t_forward);
	lmt_json_num(j, "backward", st->t_backward);
	lmt_json_num(j, "optimizer", st->t_optimizer);
	if (st->have_stats)
		lmt_json_num(j, "stats", st->t_stats);
	lmt_json_num(j, "comm", st->t_comm);
	lmt_json_num(j, "step", st->t_total);
	/* the backend's own time by kind of operation (the step-time breakdown) */
	lmt_json_obj(j, "ops");
	for (int k = 0; k < LMT_OPK_COUNT; k++)
		lmt_json_num(j, lmt_op_kind_names[k], st->t_ops[k]);
	lmt_json_obj_end(j);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "clocks");
	lmt_json_num(j, "wall_s", wall);
	lmt_json_u64(j, "updates", tr->update);
	lmt_json_u64(j, "tokens", tr->tokens);
	lmt_json_num(j, "device_s", wall * tr->comm->world);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "memory");
	memory_fields(j, g, tr->cfg.zero, tr->comm->world);
	lmt_json_u64(j, "stats", lmt_stats_held(&tr->stats));
	/* measured: the backend's most bytes allocated at once so far (this rank's),
	 * and the process's peak resident set */
	lmt_json_u64(j, "peak_alloc", tr->be->mem_peak);
	lmt_json_u64(j, "peak_rss", lmt_peak_rss());
	lmt_json_obj_end(j);
	if (log_samples) {
		/* the stable ids (shard, sequence) of the samples this update consumed */
		lmt_json_arr(j, "samples");
		for (int i = 0; i < tr->cfg.B * tr->cfg.accum; i++) {
			lmt_json_arr(j, NULL);
			lmt_json_u64(j, NULL, tr->samples[i].shard);
			lmt_json_u64(j, NULL, tr->samples[i].index);
			lmt_json_arr_end(j);
		}
		lmt_json_arr_end(j);
	}
	if (st->nonfinite_what) {
		lmt_json_str(j, "nonfinite", st->nonfinite_what);
		if (st->nonfinite_tensor)
			lmt_json_str(j, "nonfinite_tensor", st->nonfinite_tensor);
	}
}

int lmt_run_eval_record(struct lmt_json *j, const struct lmt_trainer *tr, uint64_t nseq, uint64_t update,
			double *loss, struct lmt_err *err)
{
	struct lmt_dataset *d = tr->loader.d;
	double vl;
	uint64_t vt;
	double t0 = lmt_now();
	int rc = lmt_evaluate(tr->g, tr->comm, d, LMT_SPLIT_VAL, nseq, tr->cfg.seg_mask, tr->cfg.cross_doc_targets, &vl,
			      &vt, err);
	if (rc)
		return rc;
	*loss = vl;
	lmt_json_begin(j);
	lmt_json_str(j, "event", "eval");
	lmt_json_u64(j, "update", update);
	lmt_json_str(j, "split", "val");
	lmt_json_num(j, "loss", vl);
	lmt_json_u64(j, "tokens", vt);
	lmt_json_u64(j, "tokens_total", tr->tokens);
	lmt_json_u64(j, "sequences", LMT_MIN(nseq, d->split_seqs[LMT_SPLIT_VAL]));
	lmt_json_num(j, "seconds", lmt_now() - t0);
	return 0;
}

int lmt_run_sampling_init(struct lmt_run_sampling *s, const char *text, const struct lmt_tokenizer *tok,
			  uint32_t eos, struct lmt_err *err)
{
	memset(s, 0, sizeof *s);
	s->tok = tok;
	if (text && tok) {
		struct lmt_tok_state *ts = lmt_tok_state_new(tok);
		struct lmt_u32vec v = { 0 };
		if (!ts || lmt_tok_encode(tok, ts, text, strlen(text), 0, &v)) {
			lmt_tok_state_free(ts);
			free(v.v);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
		lmt_tok_state_free(ts);
		s->prompt = malloc((v.n + 1) * sizeof *s->prompt);
		for (size_t i = 0; s->prompt && i < v.n; i++)
			s->prompt[i] = (int32_t)v.v[i];
		s->np = (int)v.n;
		free(v.v);
		if (!s->prompt)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	if (s->np == 0) {
		free(s->prompt);
		if (!(s->prompt = malloc(sizeof *s->prompt)))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		s->prompt[0] = (int32_t)(eos != UINT32_MAX ? eos : 0);
		s->np = 1;
	}
	return 0;
}

void lmt_run_sampling_release(struct lmt_run_sampling *s)
{
	free(s->prompt);
	s->prompt = NULL;
	s->np = 0;
}

int lmt_run_sample_record(struct lmt_json *j, struct lmt_gpt *g, const struct lmt_run_sampling *s, uint64_t update,
			  struct lmt_err *err)
{
	size_t n = (size_t)s->tokens;
	int32_t *sample = malloc(n * sizeof *sample);
	uint32_t *ids = malloc(n * sizeof *ids);
	if (!sample || !ids) {
		free(sample);
		free(ids);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	int rc = lmt_generate(g, s->prompt, s->np, s->tokens, s->temperature, s->top_k, s->seed, sample, err);
	if (!rc) {
		lmt_json_begin(j);
		lmt_json_str(j, "event", "sample");
		lmt_json_u64(j, "update", update);
		lmt_json_arr(j, "prompt_ids");
		for (int k = 0; k < s->np; k++)
			lmt_json_u64(j, NULL, (uint64_t)s->prompt[k]);
		lmt_json_arr_end(j);
		lmt_json_arr(j, "ids");
		for (size_t k = 0; k < n; k++)
			lmt_json_u64(j, NULL, (uint64_t)sample[k]);
		lmt_json_arr_end(j);
	}
	if (!rc && s->tok) {
		for (size_t k = 0; k < n; k++)
			ids[k] = (uint32_t)sample[k];
		size_t len = lmt_tok_decode(s->tok, ids, n, 0, NULL, 0);
		uint8_t *txt = malloc(len + 1);
		if (txt) {
			lmt_tok_decode(s->tok, ids, n, 0, txt, len);
			lmt_json_strn(j, "text", (const char *)txt, len);
			free(txt);
		} else {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
	}
	free(ids);
	free(sample);
	return rc;
}

int lmt_run_nonfinite(struct lmt_run *r, const struct lmt_step_stats *st, const char *stop, char *detail, size_t cap,
		      struct lmt_err *err)
{
	snprintf(detail, cap, "non-finite %s%s%s", st->nonfinite_what, st->nonfinite_tensor ? " in " : "",
		 st->nonfinite_tensor ? st->nonfinite_tensor : "");
	int rc = lmt_run_event(r, "nonfinite", detail, st->update, err);
	if (!rc && stop)
		rc = lmt_run_event(r, "stop", stop, st->update, err);
	return rc;
}

int lmt_run_stopped(struct lmt_run *r, int sig, uint64_t stop_at, uint64_t update, char *detail, size_t cap,
		    struct lmt_err *err)
{
	char why[32];
	if (sig > 0)
		snprintf(why, sizeof why, "signal %d", sig);
	else
		snprintf(why, sizeof why, "--stop-at %llu", (unsigned long long)stop_at);
	/* without a run directory there is no checkpoint to save */
	snprintf(detail, cap, "%s: stopped after update %llu%s", why, (unsigned long long)update,
		 r->dir[0] ? ", checkpoint saved" : "");
	return lmt_run_event(r, "stop", detail, update, err);
}

void lmt_run_summary_record(struct lmt_json *j, const struct lmt_trainer *tr, uint64_t tokens_done,
			    uint64_t updates_done, double wall, double wall_offset, const char *status)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "summary");
	lmt_json_u64(j, "updates", tr->update);
	lmt_json_u64(j, "tokens", tr->tokens);
	lmt_json_num(j, "wall_s", wall);
	lmt_json_num(j, "wall_s_total", wall_offset + wall);
	lmt_json_num(j, "device_s", wall * tr->comm->world);
	/* this process's rate: a resume's earlier tokens are not this wall time's;
	 * with nothing to do there is no rate (null) */
	lmt_json_u64(j, "updates_done", updates_done);
	if (updates_done)
		lmt_json_num(j, "tokens_per_s", tokens_done / wall);
	else
		lmt_json_null(j, "tokens_per_s");
	lmt_json_u64(j, "clipped_updates", tr->clipped_updates);
	lmt_json_u64(j, "peak_rss", lmt_peak_rss());
	lmt_json_str(j, "status", status);
}

/* ---- resuming ---- */

int lmt_run_resolve(const char *arg, const char *out, char **run_dir, int *named, struct lmt_err *err)
{
	char mp[PATH_MAX], *rundir;
	int rc = lmt_path_fmt(mp, sizeof mp, err, "%s/manifest.json", arg);
	*run_dir = NULL;
	*named = 0;
	if (rc)
		return rc;
	if (access(mp, F_OK) == 0) {
		/* one checkpoint, named: RUN/ckpt/step-N */
		char *full = realpath(arg, NULL), *sl;
		if (!full)
			return lmt_err_errno(err, "'%s'", arg);
		sl = strrchr(full, '/');
		if (sl && sl > full) {
			*sl = 0;
			sl = strrchr(full, '/');
		}
		if (!sl || strcmp(sl + 1, "ckpt")) {
			free(full);
			return lmt_err_set(err, LMT_EINVAL, "--resume %s: a checkpoint directory must be RUN/ckpt/step-N", arg);
		}
		*sl = 0;
		*named = 1;
		rundir = full;
	} else {
		rundir = strdup(arg);
	}
	if (!rundir)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	struct stat a, b;
	if (out && (stat(out, &a) || stat(rundir, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		rc = lmt_err_set(err, LMT_EINVAL, "--resume %s continues run '%s', but -o names '%s'", arg, rundir, out);
	else if (access(rundir, F_OK))
		rc = lmt_err_errno(err, "'%s': no such run to resume", rundir);
	if (rc) {
		free(rundir);
		return rc;
	}
	*run_dir = rundir;
	return 0;
}

/* What the walk for the newest checkpoint found wrong, and what to do with it. */
struct skipped {
	struct lmt_run *run;
	int strict;              /* the newest step-* must be valid */
	int rc;                  /* the first error: the walk's later findings are dropped */
	struct lmt_err err;
};

static void report_skipped(void *ctx, const char *path, const char *why)
{
	struct skipped *s = ctx;
	if (s->rc)
		return;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	/* --resume RUN: the newest checkpoint must be valid (auto falls back instead) */
	if (s->strict && !strncmp(base, "step-", 5)) {
		s->rc = lmt_err_set(&s->err, LMT_EFORMAT,
				    "%s\n(--resume auto would fall back to the newest valid checkpoint; --resume %s names one)",
				    why, "RUN/ckpt/step-N");
		return;
	}
	notice(s->run, "ignoring '%s': %s", path, why);
	char detail[1200];
	snprintf(detail, sizeof detail, "%s: %s", path, why);
	s->rc = lmt_run_event(s->run, "checkpoint-ignored", detail, 0, &s->err);
}

int lmt_run_resume_open(struct lmt_run *r, const char *named, int fallback, struct lmt_ckpt *c,
			struct lmt_err *err)
{
	char path[PATH_MAX];
	int rc;
	if (named) {
		if ((rc = lmt_path_fmt(path, sizeof path, err, "%s", named)))
			return rc;
	} else {
		struct skipped s = { r, !fallback, 0, { 0 } };
		int found = lmt_ckpt_latest(r->dir, 1, path, sizeof path, report_skipped, &s, err);
		/* the strict walk's finding comes first: the tool stopped there */
		if (s.rc) {
			*err = s.err;
			return s.rc;
		}
		if (found < 0)
			return found;
		if (!found && !fallback)
			return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no checkpoint to resume from in %s/ckpt", r->dir, r->dir);
		if (!found)
			return 0;
	}
	if ((rc = lmt_ckpt_open(c, path, named != NULL, err)))
		return rc;
	return 1;
}

static uint64_t ju64(json_t *o, const char *key)
{
	json_t *x = json_object_get(o, key);
	return json_is_integer(x) && json_integer_value(x) >= 0 ? (uint64_t)json_integer_value(x) : UINT64_MAX;
}

int lmt_run_check_compat(const struct lmt_ckpt *c, const char *data_dir, const struct lmt_dataset *d,
			 const struct lmt_gpt_config *g, uint64_t seed, uint64_t window, struct lmt_err *err)
{
	char hex[LMT_SHA256_HEX];
	json_t *m = lmt_ckpt_state(c, "model"), *l = lmt_ckpt_state(c, "loader");
	const char *ts = json_string_value(lmt_ckpt_state(c, "tokenizer_sha256"));
	const char *ds = json_string_value(lmt_ckpt_state(c, "dataset_manifest_sha256"));
	if (!ts || strcmp(ts, lmt_sha256_hex(d->tokenizer_sha256, hex)))
		return lmt_err_set(err, LMT_EINVAL, "'%s': made with tokenizer %.16s..., the dataset '%s' uses %.16s...", c->dir,
				   ts ? ts : "?", data_dir, hex);
	if (!ds || strcmp(ds, lmt_sha256_hex(d->manifest_sha256, hex)))
		return lmt_err_set(err, LMT_EINVAL, "'%s': made on dataset %.16s..., '%s' is %.16s...", c->dir, ds ? ds : "?",
				   data_dir, hex);
	struct { const char *key; uint64_t have; } f[] = {
		{ "layers", (uint64_t)g->L }, { "heads", (uint64_t)g->NH }, { "channels", (uint64_t)g->C },
		{ "context", (uint64_t)g->max_T }, { "vocab", (uint64_t)g->V }, { "vocab_padded", (uint64_t)g->Vp },
	};
	/* every field that differs, in one message: fixing them one run at a time is no way to learn a shape */
	struct lmt_strbuf diff;
	lmt_strbuf_init(&diff);
	for (size_t i = 0; i < LMT_ARRAY_SIZE(f); i++)
		if (ju64(m, f[i].key) != f[i].have)
			lmt_strbuf_printf(&diff, "%s%s %llu, this run %llu", diff.len ? "; " : "", f[i].key,
					  (unsigned long long)ju64(m, f[i].key), (unsigned long long)f[i].have);
	if (json_is_true(json_object_get(m, "untied")) != g->untied)
		lmt_strbuf_printf(&diff, "%s%s, this run %s", diff.len ? "; " : "", g->untied ? "tied" : "untied",
				  g->untied ? "untied" : "tied");
	if (diff.len || diff.oom) {
		int rc = diff.oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory")
				  : lmt_err_set(err, LMT_EINVAL, "'%s': the model has %s", c->dir, diff.buf);
		lmt_strbuf_release(&diff);
		return rc;
	}
	if (ju64(l, "order") != LMT_LOADER_ORDER || ju64(l, "seed") != seed || ju64(l, "window") != window)
		return lmt_err_set(err, LMT_EINVAL,
				   "'%s': its data order (order %llu, seed %llu, window %llu) is not this run's (%d, %llu, "
				   "%llu); the next samples would differ", c->dir, (unsigned long long)ju64(l, "order"),
				   (unsigned long long)ju64(l, "seed"), (unsigned long long)ju64(l, "window"),
				   LMT_LOADER_ORDER, (unsigned long long)seed, (unsigned long long)window);
	return 0;
}

int lmt_run_state_u64(const struct lmt_ckpt *c, const char *key, uint64_t *v, struct lmt_err *err)
{
	json_t *x = lmt_ckpt_state(c, key);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return lmt_err_set(err, LMT_EFORMAT, "'%s/manifest.json': state.%s is missing or not a count", c->dir, key);
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

/* Ranks step in lockstep, so all consumed the same count: at another world size,
 * rank 0's cursor rebased serves every rank. */
int lmt_run_resume_cursor(const struct lmt_ckpt *c, int rank, int world, uint64_t *cursor, struct lmt_err *err)
{
	json_t *l = lmt_ckpt_state(c, "loader");
	json_t *cs = json_object_get(l, "cursors"), *e;
	uint64_t saved_world = ju64(l, "world");
	size_t i;
	if (!json_is_array(cs) || saved_world == UINT64_MAX || saved_world == 0)
		return lmt_err_set(err, LMT_EFORMAT, "'%s/manifest.json': state.loader has no cursors or world", c->dir);
	uint64_t want = saved_world == (uint64_t)world ? (uint64_t)rank : 0;
	json_array_foreach(cs, i, e) {
		if (ju64(e, "rank") != want)
			continue;
		uint64_t cur = ju64(e, "cursor");
		if (cur == UINT64_MAX)
			return lmt_err_set(err, LMT_EFORMAT, "'%s/manifest.json': state.loader.cursors[%zu] has no cursor",
					   c->dir, i);
		if (saved_world == (uint64_t)world) {
			*cursor = cur;
			return 0;
		}
		struct lmt_err e2 = { 0 };
		int rc = lmt_loader_rebase(cur, 0, (uint32_t)saved_world, (uint32_t)rank, (uint32_t)world, cursor, &e2);
		if (rc)
			return lmt_err_set(err, rc, "'%s': %s", c->dir, e2.msg);
		return 0;
	}
	return lmt_err_set(err, LMT_EFORMAT, "'%s/manifest.json': no loader cursor for rank %llu", c->dir,
			   (unsigned long long)want);
}

/* Checkpoints past the one resumed from (invalid ones auto skipped, or newer ones
 * when an older checkpoint is named) would collide with the saves of the replayed
 * updates: move them aside, keeping them for inspection. */
static int set_aside_newer(struct lmt_run *r, uint64_t update, int fresh, struct lmt_err *err)
{
	char **names;
	uint64_t *ups;
	int n, rc = lmt_ckpt_list(r->dir, &names, &ups, &n, err);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		if (!rc && (fresh || ups[i] > update)) {
			char a[PATH_MAX], b[PATH_MAX];
			if ((rc = lmt_path_fmt(a, sizeof a, err, "%s/ckpt/%s", r->dir, names[i])) ||
			    (rc = lmt_path_fmt(b, sizeof b, err, "%s/ckpt/stale-%s-%d", r->dir, names[i], (int)getpid())))
				;
			else if (rename(a, b))
				rc = lmt_err_errno(err, "'%s': cannot move it aside", a);
			else {
				notice(r, "'%s' is past the resumed state; moved to '%s'", a, b);
				rc = lmt_run_event(r, "checkpoint-set-aside", b, ups[i], err);
			}
		}
		free(names[i]);
	}
	free(names);
	free(ups);
	return rc;
}

/* Cut metrics.jsonl back to what it held at the checkpoint: the update records past
 * it are work that will be done again (counted in *replayed; the last one's wall
 * clock in *last_wall, or -1). The records of checkpoints at or before update upto,
 * written after their own snapshot and so past the offset, are kept. */
static int rewind_metrics(struct lmt_run *r, uint64_t offset, uint64_t upto, uint64_t *replayed, double *last_wall,
			  struct lmt_err *err)
{
	char p[PATH_MAX], *data;
	size_t n;
	*replayed = 0;
	*last_wall = -1;
	int rc = lmt_path_fmt(p, sizeof p, err, "%s/metrics.jsonl", r->dir);
	if (rc || (rc = lmt_read_file(p, &data, &n, err)))
		return rc;
	if (offset > n) {
		/* a checkpoint copied into another run directory (after ckpt-reshard, say):
		 * these metrics are not its run's, and nothing is cut */
		notice(r, "'%s' is shorter (%zu bytes) than its run's was at the checkpoint (%llu): not that run's "
			  "metrics; appending to them", p, n, (unsigned long long)offset);
		free(data);
		return 0;
	}
	struct lmt_strbuf keep = { 0 };
	for (char *q = data + offset, *e; q < data + n && (e = memchr(q, '\n', (size_t)(data + n - q))); q = e + 1) {
		*e = 0;
		if (!strncmp(q, "{\"event\":\"update\"", 17)) {
			char *w = strstr(q, "\"clocks\":{\"wall_s\":");
			(*replayed)++;
			if (w)
				*last_wall = strtod(w + 19, NULL);
		} else if (!strncmp(q, "{\"event\":\"checkpoint\",\"update\":", 31) &&
			   strtoull(q + 31, NULL, 10) <= upto) {
			lmt_strbuf_put(&keep, q, (size_t)(e - q));
			lmt_strbuf_putc(&keep, '\n');
		}
	}
	free(data);
	if (keep.oom)
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	else if (truncate(p, (off_t)offset))
		rc = lmt_err_errno(err, "'%s'", p);
	else if (keep.len) {
		FILE *f = fopen(p, "a");
		if (!f || fwrite(keep.buf, 1, keep.len, f) != keep.len || fclose(f))
			rc = lmt_err_errno(err, "'%s'", p);
	}
	lmt_strbuf_release(&keep);
	return rc;
}

int lmt_run_resume(struct lmt_run *r, const struct lmt_ckpt *c, struct lmt_trainer *tr,
		   struct lmt_run_resumed *out, struct lmt_err *err)
{
	uint64_t offset;
	int rc;
	memset(out, 0, sizeof *out);
	if ((rc = lmt_trainstate_restore(tr->g, c, err)) || (rc = lmt_run_state_u64(c, "update", &tr->update, err)) ||
	    (rc = lmt_run_state_u64(c, "opt_steps", &tr->opt.steps, err)) ||
	    (rc = lmt_run_state_u64(c, "tokens", &tr->tokens, err)) ||
	    (rc = lmt_run_state_u64(c, "clipped_updates", &tr->clipped_updates, err)))
		return rc;
	lmt_gpt_sync_weights(tr->g);
	/* the loss scaler, when the checkpoint's run had one and this one has too (a
	 * run resumed in another precision starts its scaler afresh) */
	json_t *ls = lmt_ckpt_state(c, "loss_scaler");
	if (tr->scaler.enabled && json_is_true(json_object_get(ls, "enabled"))) {
		json_t *sc = json_object_get(ls, "scale"), *gd = json_object_get(ls, "good"),
		       *ov = json_object_get(ls, "overflows");
		if (!json_is_number(sc) || !(json_number_value(sc) > 0) || !json_is_integer(gd) || !json_is_integer(ov))
			return lmt_err_set(err, LMT_EFORMAT, "'%s': the loss scaler's state is damaged", c->dir);
		tr->scaler.scale = json_number_value(sc);
		tr->scaler.good = (uint64_t)json_integer_value(gd);
		tr->scaler.overflows = (uint64_t)json_integer_value(ov);
	}
	json_t *clk = lmt_ckpt_state(c, "clocks");
	out->wall_offset = json_number_value(json_object_get(clk, "wall_s"));
	double last_wall;
	if (!r->dir[0]) /* a rank other than 0 of a run: the run directory is rank 0's */
		return 0;
	if ((rc = lmt_run_state_u64(c, "metrics_offset", &offset, err)) ||
	    (rc = rewind_metrics(r, offset, tr->update, &out->replayed, &last_wall, err)))
		return rc;
	if (last_wall > out->wall_offset)
		out->lost_wall = last_wall - out->wall_offset;
	return set_aside_newer(r, tr->update, 0, err);
}

int lmt_run_restart(struct lmt_run *r, uint64_t *replayed, struct lmt_err *err)
{
	double last_wall;
	int rc = rewind_metrics(r, 0, 0, replayed, &last_wall, err);
	return rc ? rc : set_aside_newer(r, 0, 1, err);
}

/* The fields the resume record and the resume event share. */
static void resume_fields(struct lmt_json *j, const struct lmt_trainer *tr, const char *from,
			  const struct lmt_run_resumed *rs)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "resume");
	lmt_json_u64(j, "update", tr->update);
	lmt_json_str(j, "from", from);
	lmt_json_u64(j, "replayed_updates", rs->replayed);
	lmt_json_num(j, "lost_wall_s", rs->lost_wall);
}

void lmt_run_resume_record(struct lmt_json *j, const struct lmt_trainer *tr, const char *from,
			   const struct lmt_run_resumed *rs, uint64_t cursor)
{
	resume_fields(j, tr, from, rs);
	lmt_json_u64(j, "tokens_total", tr->tokens);
	lmt_json_u64(j, "cursor", cursor);
	lmt_json_num(j, "wall_s", rs->wall_offset);
}

int lmt_run_resume_event(struct lmt_run *r, const struct lmt_trainer *tr, const char *from,
			 const struct lmt_run_resumed *rs, struct lmt_err *err)
{
	struct lmt_json j;
	lmt_json_init(&j);
	resume_fields(&j, tr, from, rs);
	int rc = lmt_run_event_write(r, &j, err);
	lmt_json_release(&j);
	return rc;
}

/* ---- saving ---- */

void lmt_run_saver_init(struct lmt_run_saver *s, struct lmt_run *run, struct lmt_trainer *tr)
{
	memset(s, 0, sizeof *s);
	s->run = run;
	s->tr = tr;
	s->last_saved = UINT64_MAX;
	lmt_ckpt_async_init(&s->async);
	s->async.threads = tr->be->threads;
}

void lmt_run_saver_release(struct lmt_run_saver *s)
{
	lmt_ckpt_async_release(&s->async);
}

/* The manifest's "state" object: everything but the tensors. */
static char *state_json(struct lmt_run_saver *k, double wall)
{
	const struct lmt_trainer *tr = k->tr;
	const struct lmt_train_cfg *tc = &tr->cfg;
	const struct lmt_dataset *d = tr->loader.d;
	const struct lmt_comm *comm = tr->comm;
	struct lmt_json j;
	char hex[LMT_SHA256_HEX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_u64(&j, "update", tr->update);
	lmt_json_u64(&j, "opt_steps", tr->opt.steps);
	lmt_json_u64(&j, "tokens", tr->tokens);
	lmt_json_u64(&j, "clipped_updates", tr->clipped_updates);
	lmt_json_str(&j, "precision", lmt_dtype_name(tr->g->dtype));
	lmt_json_obj(&j, "loss_scaler");
	lmt_json_str(&j, "type", tr->scaler.enabled ? "dynamic" : "none");
	lmt_json_bool(&j, "enabled", tr->scaler.enabled);
	lmt_json_num(&j, "scale", tr->scaler.scale);
	lmt_json_u64(&j, "good", tr->scaler.good);
	lmt_json_u64(&j, "overflows", tr->scaler.overflows);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "clocks");
	lmt_json_num(&j, "wall_s", wall);
	lmt_json_num(&j, "device_s", wall * comm->world);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "scheduler");
	lmt_json_str(&j, "schedule", schedule_name(tc->schedule));
	lmt_json_num(&j, "lr", tc->lr);
	lmt_json_num(&j, "min_lr_frac", tc->min_lr_frac);
	lmt_json_u64(&j, "warmup", tc->warmup);
	lmt_json_u64(&j, "updates", tc->updates);
	lmt_json_num(&j, "next_lr", lmt_lr_at(tc, tr->update));
	lmt_json_obj_end(&j);
	lmt_json_arr(&j, "rng");
	for (int r = 0; r < comm->world; r++) {
		lmt_json_obj(&j, NULL);
		lmt_json_u64(&j, "rank", (uint64_t)r);
		lmt_json_obj(&j, "cpu");
		lmt_json_str(&j, "generator", "xoshiro256**");
		lmt_json_u64(&j, "seed", tc->seed);
		lmt_json_str(&j, "use", "sampling only; each sample is drawn from a stream seeded by --seed alone");
		lmt_json_obj_end(&j);
		lmt_json_null(&j, "device");
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_obj(&j, "loader");
	lmt_json_u64(&j, "order", LMT_LOADER_ORDER);
	lmt_json_u64(&j, "seed", tc->seed);
	lmt_json_u64(&j, "window", tc->shuffle_window);
	lmt_json_u64(&j, "world", (uint64_t)comm->world);
	lmt_json_arr(&j, "cursors");
	for (int r = 0; r < (k->cursors ? comm->world : 1); r++) {
		lmt_json_obj(&j, NULL);
		lmt_json_u64(&j, "rank", (uint64_t)(k->cursors ? r : comm->rank));
		lmt_json_u64(&j, "cursor", k->cursors ? k->cursors[r] : lmt_loader_cursor(&tr->loader));
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_obj_end(&j);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(d->tokenizer_sha256, hex));
	lmt_json_str(&j, "dataset_manifest_sha256", lmt_sha256_hex(d->manifest_sha256, hex));
	lmt_json_obj(&j, "model");
	model_shape(&j, &tr->g->cfg);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "code");
	lmt_json_str(&j, "revision", lmt_revision());
	lmt_json_bool(&j, "dirty", strstr(lmt_revision(), "-dirty") != NULL);
	lmt_json_str(&j, "library", LMT_VERSION);
	lmt_json_str(&j, "backend", tr->be->name);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "sharding");
	lmt_json_u64(&j, "world", (uint64_t)comm->world);
	lmt_json_str(&j, "rule", "rank r holds elements [r*n/W, (r+1)*n/W) of every tensor");
	lmt_json_obj_end(&j);
	long off = 0;
	if (k->run->metrics) {
		fflush(k->run->metrics);
		off = ftell(k->run->metrics);
	}
	lmt_json_u64(&j, "metrics_offset", (uint64_t)(off > 0 ? off : 0));
	if (k->run->dir[0] && k->run->config_text)
		lmt_json_raw(&j, "config", k->run->config_text);
	lmt_json_end(&j);
	char *out = lmt_strbuf_detach(&j.out);
	lmt_json_release(&j);
	return out;
}

/* Remove all but the newest keep checkpoints and the keep_every milestones. A
 * checkpoint that cannot be listed or removed is a notice, not a failure. */
static int retain(struct lmt_run_saver *k, struct lmt_err *err)
{
	struct lmt_err e2 = { 0 };
	char **names;
	uint64_t *ups;
	int n, rc = 0;
	if (lmt_ckpt_list(k->run->dir, &names, &ups, &n, &e2)) {
		notice(k->run, "%s", e2.msg);
		return 0;
	}
	for (int i = 0; i < n - k->keep && !rc; i++) {
		if (k->keep_every && ups[i] % k->keep_every == 0)
			continue;
		if (lmt_ckpt_remove(k->run->dir, names[i], &e2))
			notice(k->run, "%s", e2.msg);
		else
			rc = lmt_run_event(k->run, "checkpoint-removed", names[i], ups[i], err);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ups);
	return rc;
}

/* Test hook: LMT_TEST_CKPT_CORRUPT=U flips one byte of rank 0's data file of the
 * checkpoint of update U once it is committed, before its verification, as a
 * disk that lost a write would. */
static void test_corrupt(const char *dir, uint64_t update)
{
	const char *v = getenv("LMT_TEST_CKPT_CORRUPT");
	char path[4200];
	if (!v || strtoull(v, NULL, 10) != update)
		return;
	snprintf(path, sizeof path, "%s/rank-00000.lmckpt", dir);
	FILE *f = fopen(path, "r+b");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	long at = ftell(f) / 2;
	fseek(f, at, SEEK_SET);
	int c = fgetc(f);
	fseek(f, at, SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);
}

/* A checkpoint that failed its verification is moved aside (ckpt/failed-step-N-PID,
 * kept for inspection), so that resume never weighs it and retention never counts
 * it among the --keep newest: the older good ones stay. */
static int set_aside_failed(struct lmt_run *r, const char *path, uint64_t update, struct lmt_err *err)
{
	char b[PATH_MAX];
	const char *name = strrchr(path, '/');
	int rc = lmt_path_fmt(b, sizeof b, err, "%s/ckpt/failed-%s-%d", r->dir, name ? name + 1 : path, (int)getpid());
	if (rc)
		return rc;
	if (rename(path, b))
		return lmt_err_errno(err, "'%s': failed its verification and cannot be moved aside", path);
	notice(r, "'%s' failed its verification; moved to '%s'", path, b);
	return lmt_run_event(r, "checkpoint-set-aside", b, update, err);
}

static int report_ckpt(struct lmt_run_saver *k, const struct lmt_ckpt_result *r, double pause, int async,
		       struct lmt_err *err)
{
	struct lmt_run_saved s = { async ? k->async.save.update : k->tr->update, r, pause, 0, 0, async, 1, 0, NULL, 0 };
	struct lmt_ckpt c;
	struct lmt_err ve = { 0 };
	test_corrupt(r->path, s.update);
	double t0 = lmt_now();
	if (lmt_ckpt_open(&c, r->path, 1, &ve)) {
		s.verified = 0;
		s.why = ve.msg;
	} else {
		lmt_ckpt_close(&c);
	}
	s.verify_s = lmt_now() - t0;
	s.wall = k->wall_offset + (lmt_now() - k->t_start);
	/* the checkpoint's cost C to the run: the time training stood still for it
	 * (pause_s, as train(1) says; a synchronous save's pause is its write and the
	 * gathering of the state, a little more than write_s) */
	s.cost_s = pause;
	/* Young's interval: the checkpoint period that minimises the expected overhead
	 * for a cost C per checkpoint and a mean time between failures */
	s.best_interval_s = k->mtbf > 0 ? sqrt(2.0 * s.cost_s * k->mtbf) : 0;
	if (k->saved)
		k->saved(k->saved_ctx, &s);
	int rc = lmt_run_event(k->run, "checkpoint", r->path, s.update, err);
	if (!rc && !s.verified)
		rc = set_aside_failed(k->run, r->path, s.update, err);
	return rc ? rc : retain(k, err);
}

void lmt_run_save_record(struct lmt_json *j, const struct lmt_run_saved *s)
{
	const struct lmt_ckpt_result *r = s->r;
	lmt_json_begin(j);
	lmt_json_str(j, "event", "checkpoint");
	lmt_json_u64(j, "update", s->update);
	lmt_json_str(j, "path", r->path);
	lmt_json_u64(j, "bytes", r->bytes);
	lmt_json_num(j, "pause_s", s->pause_s);
	lmt_json_num(j, "write_s", r->write_s);
	lmt_json_num(j, "mb_per_s", r->write_s > 0 ? r->bytes / r->write_s / 1e6 : 0);
	lmt_json_bool(j, "async", s->async);
	lmt_json_num(j, "cost_s", s->cost_s);
	lmt_json_bool(j, "verified", s->verified);
	lmt_json_num(j, "verify_s", s->verify_s);
	if (s->best_interval_s > 0)
		lmt_json_num(j, "optimal_interval_s", s->best_interval_s);
}

int lmt_run_save_poll(struct lmt_run_saver *k, int wait, struct lmt_err *err)
{
	struct lmt_ckpt_result r;
	struct lmt_err e2 = { 0 };
	int rc = 0;
	double pause = k->async.save.update ? k->last_save_time : 0;
	int got = wait ? lmt_ckpt_async_wait(&k->async, &r, &rc, &e2) : lmt_ckpt_async_poll(&k->async, &r, &rc, &e2);
	if (!got)
		return 0;
	if (rc)
		return lmt_err_set(err, rc, "checkpoint of update %llu failed: %s", (unsigned long long)k->async.save.update,
				   e2.msg);
	return report_ckpt(k, &r, pause, 1, err);
}

int lmt_run_save(struct lmt_run_saver *k, int sync, struct lmt_err *err)
{
	struct lmt_trainer *tr = k->tr;
	int rc, ranks = tr->comm->world > 1;
	/* a rank other than 0 has the run's directory, not the run (rank 0's) */
	const char *dir = k->run->dir[0] ? k->run->dir : k->run_dir;
	if (!dir || !dir[0] || k->last_saved == tr->update)
		return 0;
	if (ranks)
		sync = 1; /* every rank writes its own file, all together */
	/* one save at a time: a save that falls due while the previous one is still
	 * being written waits for it, so the set of checkpoints a run leaves never
	 * depends on the machine's load; the wait is training time lost, and said */
	if ((rc = lmt_run_save_poll(k, sync, err)))
		return rc;
	double waited = 0;
	uint64_t prev = 0;
	if (k->async.started) {
		prev = k->async.save.update;
		double w0 = lmt_now();
		if ((rc = lmt_run_save_poll(k, 1, err)))
			return rc;
		waited = lmt_now() - w0;
	}
	/* a wait of a few milliseconds (the writer finishing its fsync) is no news:
	 * said from 10 ms */
	if (waited >= 0.01) {
		char detail[200];
		snprintf(detail, sizeof detail,
			 "update %llu waited %.2f s for the save of update %llu, still being written",
			 (unsigned long long)tr->update, waited, (unsigned long long)prev);
		notice(k->run, "%s", detail);
		if ((rc = lmt_run_event(k->run, "checkpoint-wait", detail, tr->update, err)))
			return rc;
	}
	struct lmt_ckpt_tensor *t;
	int n;
	float *host;
	double t0 = lmt_now();
	if ((rc = lmt_trainstate_tensors(tr->g, &t, &n, &host, err)))
		return rc;
	double wall = k->wall_offset + (lmt_now() - k->t_start);
	char *state = state_json(k, wall);
	struct lmt_ckpt_save sv = { dir, tr->update, tr->comm->world, t, n, state };
	if (!state) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	} else if (sync) {
		struct lmt_ckpt_result r;
		if (!(rc = ranks ? lmt_ckpt_write_ranks(&sv, tr->comm, &r, err) : lmt_ckpt_write(&sv, &r, err))) {
			k->last_saved = tr->update;
			if (k->run->dir[0])
				rc = report_ckpt(k, &r, waited + (lmt_now() - t0), 0, err);
		}
	} else if (!(rc = lmt_ckpt_async_start(&k->async, &sv, err))) {
		k->last_saved = tr->update;
		k->last_save_time = waited + (lmt_now() - t0); /* the training pause: the wait and the snapshot */
	}
	free(t);
	free(host);
	free(state);
	return rc;
}

static void norms(struct lmt_json *j, const struct lmt_stats *s, int u)
{
	lmt_json_num(j, "grad_norm", s->grad_norm[u]);
	lmt_json_num(j, "param_norm", s->param_norm[u]);
}

void lmt_run_stats_record(struct lmt_json *j, const struct lmt_trainer *tr, uint64_t update, uint64_t since_updates,
			  uint64_t since_clipped)
{
	static const char *const kinds[LMT_STATS_KINDS] = { "embedding", "matrix", "bias", "norm" };
	const struct lmt_stats *s = &tr->stats;
	lmt_json_begin(j);
	lmt_json_str(j, "event", "stats");
	lmt_json_u64(j, "update", update);
	lmt_json_obj(j, "embeddings");
	norms(j, s, 0);
	lmt_json_obj_end(j);
	lmt_json_arr(j, "layers");
	for (int l = 0; l < s->L; l++) {
		lmt_json_obj(j, NULL);
		lmt_json_u64(j, "layer", (uint64_t)l);
		norms(j, s, l + 1);
		lmt_json_num(j, "act_rms", s->act_rms[l]);
		lmt_json_obj_end(j);
	}
	lmt_json_arr_end(j);
	lmt_json_obj(j, "head");
	norms(j, s, s->L + 1);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "update_ratio");
	for (int k = 0; k < LMT_STATS_KINDS; k++)
		lmt_json_num(j, kinds[k], s->update_ratio[k]);
	lmt_json_obj_end(j);
	lmt_json_num(j, "clipped_fraction", since_updates ? (double)since_clipped / (double)since_updates : 0);
	lmt_json_num(j, "loss_scale", tr->scaler.scale);
	lmt_json_u64(j, "overflows", tr->scaler.overflows);
}
