/*
 * runread.c: a train run directory read back for memledger (runread.h). Fields
 * are taken by name from the records runstate.c writes; a record of an unknown
 * event is skipped, so a newer train's extra records do not stop an older reader.
 */
#include "plan/runread.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/jsonptr.h"

static int get_int(json_t *root, const char *ptr, const char *path, int64_t *out, struct lmt_err *err)
{
	json_t *v = lmt_jsonptr_get(root, ptr);
	if (!json_is_integer(v))
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %s: missing or not an integer", path, ptr);
	*out = json_integer_value(v);
	return 0;
}

static int64_t opt_int(json_t *root, const char *ptr)
{
	json_t *v = lmt_jsonptr_get(root, ptr);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

int lmt_run_config_read(const char *path, struct lmt_ledger_cfg *c, struct lmt_err *err)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	if (!root && je.line < 1) { /* not opened: its errno, not jansson's "line -1" */
		FILE *f = fopen(path, "r");
		if (!f)
			return lmt_err_errno(err, "'%s'", path);
		fclose(f);
	}
	if (!root)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: %s", path, je.line, je.text);
	static const char *const ptrs[] = { "/model/layers", "/model/heads", "/model/channels", "/model/context",
					    "/model/vocab", "/optimization/micro_batch", "/data/seq_len" };
	int64_t v[7], rc_every, zero, world;
	int rc = 0;
	for (int i = 0; i < 7 && !rc; i++)
		if (!(rc = get_int(root, ptrs[i], path, &v[i], err)) && (v[i] <= 0 || v[i] > INT_MAX))
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': %s: %lld is out of range", path, ptrs[i],
					 (long long)v[i]);
	const char *prec = json_string_value(lmt_jsonptr_get(root, "/optimization/precision"));
	json_t *untied = lmt_jsonptr_get(root, "/model/untied");
	if (!rc && (!prec || lmt_dtype_parse(prec) < 0 || !json_is_boolean(untied)))
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': /optimization/precision or /model/untied missing or bad", path);
	if (!rc) {
		rc_every = opt_int(root, "/optimization/recompute_every");
		zero = opt_int(root, "/optimization/zero");
		int64_t se = opt_int(root, "/optimization/stats_every");
		world = opt_int(root, "/topology/world");
		memset(c, 0, sizeof *c);
		c->model = (struct lmt_gpt_config){ .L = (int)v[0], .NH = (int)v[1], .C = (int)v[2],
						    .max_T = (int)v[3], .V = (int)v[4], .untied = json_is_true(untied) };
		c->model.Vp = lmt_gpt_padded_vocab(c->model.V);
		c->B = (int)v[5];
		c->T = (int)(v[6] < v[3] ? v[6] : v[3]);
		c->dtype = lmt_dtype_parse(prec);
		c->recompute_every = rc_every > 0 ? (int)rc_every : 0;
		c->zero = zero > 0 ? (int)zero : 0;
		c->world = world > 0 ? (int)world : 1;
		c->tp = c->pp = c->cp = 1;
		c->stats_every = se > 0 && se <= INT_MAX ? (int)se : 0;
	}
	json_decref(root);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *x, size_t n)
{
	if (!n)
		return 0;
	qsort(x, n, sizeof *x, cmp_double);
	return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The rates and the last update's memory from the records of metrics.jsonl. */
struct scan {
	double *rate, *step;
	size_t n, cap;
	double ckpt, eval;
	size_t nckpt, neval;
};

static void update_record(json_t *o, struct lmt_run_measured *m, struct scan *s)
{
	json_t *mem = json_object_get(o, "memory");
	int64_t *dst[] = { &m->params, &m->weights_working, &m->grads, &m->optimizer, &m->staging, &m->activations,
			   &m->peak_alloc, &m->peak_rss, &m->stats };
	static const char *const keys[] = { "params", "weights_working", "grads", "optimizer", "staging",
					    "activations", "peak_alloc", "peak_rss", "stats" };
	for (int i = 0; i < 9; i++) {
		json_t *v = json_object_get(mem, keys[i]);
		*dst[i] = json_is_integer(v) ? json_integer_value(v) : -1;
	}
	m->updates++;
	json_t *tt = json_object_get(o, "tokens_total");
	if (json_is_integer(tt))
		m->tokens_total = (uint64_t)json_integer_value(tt);
	m->loss = num(o, "loss");
	double r = num(o, "tokens_per_s"), st = num(json_object_get(o, "time"), "step");
	double fps = num(o, "flops_per_s");
	if (isfinite(r) && isfinite(fps) && r > 0)
		m->flops_per_token = fps / r;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		double *a = realloc(s->rate, cap * sizeof *a), *b = a ? realloc(s->step, cap * sizeof *b) : NULL;
		if (a)
			s->rate = a;
		if (!a || !b)
			return;
		s->step = b;
		s->cap = cap;
	}
	s->rate[s->n] = isfinite(r) ? r : 0;
	s->step[s->n++] = isfinite(st) ? st : 0;
}

static int scan_metrics(const char *dir, struct lmt_run_measured *m, struct lmt_err *err)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0;
	struct scan s = { 0 };
	snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return lmt_err_errno(err, "'%s'", path);
	int lineno = 0, rc = 0;
	while (!rc && getline(&line, &cap, f) > 0) {
		lineno++;
		json_t *o = json_loads(line, 0, NULL);
		const char *ev = json_string_value(json_object_get(o, "event"));
		if (!o || !ev) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: not a JSON record with an event", path, lineno);
		} else if (!strcmp(ev, "update")) {
			update_record(o, m, &s);
		} else if (!strcmp(ev, "eval")) {
			m->val_loss = num(o, "loss");
			s.eval += isfinite(num(o, "seconds")) ? num(o, "seconds") : 0;
			s.neval++;
		} else if (!strcmp(ev, "checkpoint") && isfinite(num(o, "cost_s"))) {
			s.ckpt += num(o, "cost_s");
			s.nckpt++;
		} else if (!strcmp(ev, "parameters") && json_is_integer(json_object_get(o, "total"))) {
			m->nparams = (uint64_t)json_integer_value(json_object_get(o, "total"));
		} else if (!strcmp(ev, "summary") && isfinite(num(o, "wall_s"))) {
			m->wall_s = num(o, "wall_s");
		}
		json_decref(o);
	}
	free(line);
	fclose(f);
	m->tokens_per_s = median(s.rate, s.n);
	m->step_s = median(s.step, s.n);
	m->ckpt_cost_s = s.nckpt ? s.ckpt / (double)s.nckpt : 0;
	m->eval_s = s.neval ? s.eval / (double)s.neval : 0;
	free(s.rate);
	free(s.step);
	if (!rc && !m->updates)
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': no update record", path);
	return rc;
}

int lmt_run_measured_read(const char *dir, struct lmt_run_measured *m, struct lmt_err *err)
{
	char path[PATH_MAX];
	memset(m, 0, sizeof *m);
	m->loss = m->val_loss = NAN;
	snprintf(path, sizeof path, "%s/config.json", dir);
	int rc = lmt_run_config_read(path, &m->cfg, err);
	if (!rc) {
		json_t *root = json_load_file(path, 0, NULL);
		int64_t e = opt_int(root, "/eval/every");
		m->eval_every = e > 0 ? (uint64_t)e : 0;
		json_decref(root);
	}
	return rc ? rc : scan_metrics(dir, m, err);
}

int lmt_run_config_foreign_key(const char *k)
{
	static const char *const keys[] = { "data", "out", "no-save", "tokenizer", "accum", "updates", "lr", "min-lr",
		"warmup", "schedule", "beta1", "beta2", "eps", "weight-decay", "decay-embeddings", "clip", "on-nonfinite",
		"seed", "init-seed", "segment-mask", "doc-targets", "shuffle-window", "resume", "ckpt-every",
		"ckpt-minutes", "keep", "keep-every", "ckpt-sync", "log-samples", "stop-at", "eval-every", "eval-seqs",
		"sample-every", "sample-tokens", "temperature", "top-k", "prompt", "init-llmc", "export-llmc",
		"backend", "threads", "loss-scale", "loss-scale-window", "bucket-mb", "comm-timeout", "skew-alert",
		"alert", "stats-every", "audit-samples", "prefetch", "comm", "mtbf", "peak-flops", "mem-limit", "budget", NULL };
	for (int i = 0; keys[i]; i++)
		if (!strcmp(k, keys[i]))
			return 1;
	return 0;
}
