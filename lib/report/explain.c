/*
 * explain.c: the evidence around one update and its verdict (explain.h).
 *
 * Each piece of evidence is an object of the result, filled from the run's own
 * records; the findings are scored from them afterwards, so what the verdict
 * says is always in the evidence beside it. The thresholds below are where a
 * value starts to count as a finding; each is the alerts' default (alerts.h)
 * where the alerts have one, so that an explanation and an alert agree on what
 * is unusual.
 */
#include "report/explain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/jsonptr.h"
#include "core/util.h"
#include "data/loader.h"

#define LOSS_Z 6.0          /* loss_spike: sigmas above the window's mean */
#define LOSS_Z_SOME 3.0     /* a loss that is up, if not a spike */
#define GRAD_RATIO 5.0      /* grad_spike: times the window's median */
#define LR_RATIO 2.0        /* a learning rate this many times its recent median */
#define DATA_RATIO 1.3      /* a source's surprisal over the split's entropy */
#define DATA_SHARE 0.1      /* of the batch's tokens, for a source to count */
#define STARVE 0.25         /* starvation: data wait over the step */
#define SKEW 0.2            /* skew: slowest busy time (or step) over the median, less 1 */
#define SKEW_FLOOR_S 0.020  /* ... and at least this much above it (the skew alert's floor) */
#define COMM_SHARE 0.3      /* communication over the step ... */
#define COMM_RATIO 3.0      /* ... and over its median */
#define MEM_OVER 1.25       /* measured peak over memledger's prediction: the ledger is wrong */
#define MEM_JUMP 1.1        /* the peak at this update over the one before */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *x, size_t n)
{
	if (!n)
		return NAN;
	qsort(x, n, sizeof *x, cmp_double);
	return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static void setnum(json_t *o, const char *k, double x)
{
	json_object_set_new(o, k, isfinite(x) ? json_real(x) : json_null());
}

static void setstr(json_t *o, const char *k, const char *s)
{
	json_object_set_new(o, k, json_string(s));
}

struct finding {
	const char *cause;
	double score;
	char text[400];
};

struct ctx {
	struct lmt_runview *v;
	uint64_t n;
	long at;                 /* index of update n in v->upd */
	json_t *u, *out;
	struct finding f[16];
	int nf;
};

static void find(struct ctx *c, const char *cause, double score, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void find(struct ctx *c, const char *cause, double score, const char *fmt, ...)
{
	if (c->nf == (int)LMT_ARRAY_SIZE(c->f))
		return;
	struct finding *f = &c->f[c->nf++];
	f->cause = cause;
	f->score = score > 1 ? 1 : score;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->text, sizeof f->text, fmt, ap);
	va_end(ap);
}

/* The values at pointer ptr of the window's updates before n (up to W). */
static size_t window(const struct ctx *c, const char *ptr, double *x)
{
	size_t k = 0;
	for (long i = c->at - 1; i >= 0 && k < LMT_EXPLAIN_WINDOW; i--) {
		double y = lmt_jnum(c->v->upd[i], ptr, NAN);
		if (isfinite(y))
			x[k++] = y;
	}
	return k;
}

/* ---- the loss ---- */

static double loss_z(struct ctx *c)
{
	double x[LMT_EXPLAIN_WINDOW], s = 0, ss = 0;
	size_t k = window(c, "/loss", x);
	double loss = lmt_jnum(c->u, "/loss", NAN);
	json_t *o = json_object();
	setnum(o, "value", loss);
	json_object_set_new(o, "window", json_integer((json_int_t)k));
	double z = NAN;
	if (k >= 2) {
		for (size_t i = 0; i < k; i++) {
			s += x[i];
			ss += x[i] * x[i];
		}
		double mean = s / k, sd = sqrt(fmax(ss / k - mean * mean, 0));
		sd = fmax(sd, 1e-3 * fabs(mean)); /* as the alerts floor it */
		z = (loss - mean) / sd;
		setnum(o, "mean", mean);
		setnum(o, "sd", sd);
		setnum(o, "z", z);
	} else {
		setstr(o, "missing", "fewer than 2 updates before it: no baseline");
	}
	json_object_set_new(c->out, "loss", o);
	return z;
}

/* the updates around n, as a table */
static void around(struct ctx *c)
{
	json_t *a = json_array();
	long lo = c->at - 5 < 0 ? 0 : c->at - 5, hi = c->at + 2 >= (long)c->v->nupd ? (long)c->v->nupd - 1 : c->at + 2;
	for (long i = lo; i <= hi; i++) {
		json_t *u = c->v->upd[i], *r = json_object();
		json_object_set_new(r, "update", json_integer((json_int_t)c->v->upd_n[i]));
		setnum(r, "loss", lmt_jnum(u, "/loss", NAN));
		setnum(r, "lr", lmt_jnum(u, "/lr", NAN));
		setnum(r, "grad_norm", lmt_jnum(u, "/grad_norm", NAN));
		json_object_set(r, "clipped", json_object_get(u, "clipped") ? json_object_get(u, "clipped") : json_null());
		setnum(r, "step_s", lmt_jnum(u, "/time/step", NAN));
		json_array_append_new(a, r);
	}
	json_object_set_new(c->out, "around", a);
}

/* ---- gradients, learning rate, clipping, the units that moved ---- */

static json_t *stats_at(struct ctx *c, json_t **prev)
{
	json_t *best = NULL;
	*prev = NULL;
	for (size_t i = 0; i < c->v->nrec; i++) {
		json_t *r = c->v->rec[i];
		const char *e = json_string_value(json_object_get(r, "event"));
		if (!e || strcmp(e, "stats"))
			continue;
		uint64_t k = (uint64_t)lmt_jnum(r, "/update", 0);
		if (k > c->n)
			break;
		*prev = best;
		best = r;
	}
	return best;
}

static void unit(json_t *units, const char *name, json_t *now, json_t *before)
{
	double g = lmt_jnum(now, "/grad_norm", NAN), g0 = lmt_jnum(before, "/grad_norm", NAN);
	json_t *o = json_object();
	setstr(o, "unit", name);
	setnum(o, "grad_norm", g);
	setnum(o, "param_norm", lmt_jnum(now, "/param_norm", NAN));
	setnum(o, "ratio", g0 > 0 ? g / g0 : NAN);
	json_array_append_new(units, o);
}

static int by_ratio(const void *a, const void *b)
{
	double x = lmt_jnum(*(json_t *const *)a, "/ratio", 0), y = lmt_jnum(*(json_t *const *)b, "/ratio", 0);
	return x > y ? -1 : x < y;
}

static void gradients(struct ctx *c, double lz, int loss_up)
{
	json_t *o = json_object();
	double x[LMT_EXPLAIN_WINDOW];
	double g = lmt_jnum(c->u, "/grad_norm", NAN), lr = lmt_jnum(c->u, "/lr", NAN);
	double gmed = median(x, window(c, "/grad_norm", x));
	setnum(o, "grad_norm", g);
	setnum(o, "median", gmed);
	double gr = gmed > 0 ? g / gmed : NAN;
	setnum(o, "ratio", gr);
	/* the learning rate of the few updates up to n against the window before
	 * them: a gradient step too large shows in the losses after it */
	double lmax = 0;
	uint64_t lat = c->n;
	for (long i = c->at; i >= 0 && i > c->at - 4; i--) {
		double l = lmt_jnum(c->v->upd[i], "/lr", NAN);
		if (l > lmax) {
			lmax = l;
			lat = c->v->upd_n[i];
		}
	}
	size_t k = 0;
	for (long i = c->at - 4; i >= 0 && k < LMT_EXPLAIN_WINDOW; i--) {
		double y = lmt_jnum(c->v->upd[i], "/lr", NAN);
		if (isfinite(y))
			x[k++] = y;
	}
	double lmed = median(x, k), lratio = lmed > 0 ? lmax / lmed : NAN;
	setnum(o, "lr", lr);
	setnum(o, "lr_max_recent", lmax);
	json_object_set_new(o, "lr_max_at", json_integer((json_int_t)lat));
	setnum(o, "lr_median", lmed);
	setnum(o, "lr_ratio", lratio);
	json_t *cl = json_object_get(c->u, "clipped");
	json_object_set(o, "clipped", cl ? cl : json_null());
	setnum(o, "clip", c->v->clip > 0 ? c->v->clip : NAN);
	size_t nclip = 0, nw = 0;
	for (long i = c->at; i >= 0 && nw < LMT_EXPLAIN_WINDOW; i--, nw++)
		nclip += json_is_true(json_object_get(c->v->upd[i], "clipped"));
	setnum(o, "clipped_window_fraction", nw ? (double)nclip / nw : NAN);
	/* the units, from the nearest statistics record at or before n */
	json_t *prev, *st = stats_at(c, &prev);
	if (st) {
		json_t *units = json_array();
		unit(units, "embeddings", json_object_get(st, "embeddings"),
		     prev ? json_object_get(prev, "embeddings") : NULL);
		json_t *L = json_object_get(st, "layers"), *L0 = prev ? json_object_get(prev, "layers") : NULL;
		for (size_t i = 0; i < json_array_size(L); i++) {
			char nm[32];
			snprintf(nm, sizeof nm, "layer %zu", i);
			unit(units, nm, json_array_get(L, i), json_array_get(L0, i));
		}
		unit(units, "head", json_object_get(st, "head"), prev ? json_object_get(prev, "head") : NULL);
		if (prev) {
			/* sorted by how much they grew since the record before */
			size_t nu = json_array_size(units);
			json_t **t = malloc((nu ? nu : 1) * sizeof *t), *s = json_array();
			for (size_t i = 0; t && i < nu; i++)
				t[i] = json_array_get(units, i);
			if (t)
				qsort(t, nu, sizeof *t, by_ratio);
			for (size_t i = 0; t && i < nu; i++)
				json_array_append(s, t[i]);
			free(t);
			json_decref(units);
			units = s;
		}
		json_object_set_new(o, "stats_update", json_integer((json_int_t)lmt_jnum(st, "/update", 0)));
		json_object_set_new(o, "units", units);
		json_t *ur = json_object_get(st, "update_ratio");
		json_object_set(o, "update_ratio", ur ? ur : json_null());
	} else {
		setstr(o, "units_missing", "no stats record at or before this update: run train with --stats-every");
	}
	json_object_set_new(c->out, "gradients", o);

	const char *u0 = json_string_value(lmt_jsonptr_get(o, "/units/0/unit"));
	double r0 = lmt_jnum(o, "/units/0/ratio", NAN);
	char moved[96] = "";
	if (u0 && isfinite(r0) && r0 > 1.5)
		snprintf(moved, sizeof moved, "; %s moved most (gradient norm %.1fx the record before)", u0, r0);
	if (isfinite(lratio) && lratio >= LR_RATIO)
		find(c, "optimization", (loss_up ? 0.6 : 0.4) + 0.1 * log2(lratio / LR_RATIO) + (gr >= GRAD_RATIO) * 0.2,
		     "learning rate %.3g at update %llu is %.1fx its recent median %.3g; gradient norm %.3g is %.1fx its "
		     "median%s%s",
		     lmax, (unsigned long long)lat, lratio, lmed, g, gr,
		     json_is_true(cl) && c->v->clip > 0 ? " (clipped)" : "", moved);
	else if (isfinite(gr) && gr >= GRAD_RATIO)
		find(c, "optimization", 0.5 + 0.1 * log2(gr / GRAD_RATIO) + (isfinite(lz) && lz >= LOSS_Z_SOME) * 0.1,
		     "gradient norm %.3g is %.1fx its median %.3g%s%s", g, gr, gmed,
		     json_is_true(cl) && c->v->clip > 0 ? " (clipped)" : "", moved);
}

/* ---- the data: the batch's samples, their documents, sources and tokens ---- */

struct src_acc {
	double nats;
	uint64_t tokens, samples;
};

/*
 * The batch of update n as the loader's order gives it (loader.h: rank r takes
 * global indices r, r + w, r + 2w, ... and each update takes accum x B of them),
 * every rank's, rank by rank: a pure function of config.json's seed, shuffle
 * window, micro-batch, accumulation and world. It holds only while the world never
 * changed: each resume's cursor (rank 0's) must then be its update's samples times
 * the world. NULL, with why, where it cannot be rebuilt.
 */
static json_t *loader_order(struct ctx *c, char *why, size_t cap)
{
	struct lmt_runview *v = c->v;
	json_t *cf = v->config;
	double seed = lmt_jnum(cf, "/optimization/seed", -1), win = lmt_jnum(cf, "/optimization/shuffle_window", -1);
	double B = lmt_jnum(cf, "/optimization/micro_batch", 0), A = lmt_jnum(cf, "/optimization/accum", 0);
	double W = lmt_jnum(cf, "/topology/world", 0);
	if (seed < 0 || win < 0 || B < 1 || A < 1 || W < 1) {
		snprintf(why, cap, "config.json lacks the loader's seed, window, micro-batch, accumulation or world");
		return NULL;
	}
	uint64_t per = (uint64_t)B * (uint64_t)A, w = (uint64_t)W;
	for (size_t i = 0; i < v->nrec; i++) {
		json_t *r = v->rec[i];
		const char *e = json_string_value(json_object_get(r, "event"));
		if (e && !strcmp(e, "resume") &&
		    (uint64_t)lmt_jnum(r, "/cursor", -1) != (uint64_t)lmt_jnum(r, "/update", 0) * per * w) {
			snprintf(why, cap, "the world size changed at a resume (update %.0f)", lmt_jnum(r, "/update", 0));
			return NULL;
		}
	}
	struct lmt_loader l;
	struct lmt_loader_cfg lc = { LMT_SPLIT_TRAIN, (uint64_t)seed, 0, (uint32_t)w, 1, (uint64_t)win, 0 };
	struct lmt_err e = { 0 };
	if (lmt_loader_init(&l, &v->ds, &lc, 0, &e)) {
		snprintf(why, cap, "the loader does not open on the dataset: %.200s", e.msg);
		return NULL;
	}
	json_t *a = json_array();
	for (uint64_t r = 0; r < w; r++)
		for (uint64_t j = 0; j < per; j++) {
			uint64_t k = r + w * ((c->n - 1) * per + j), index;
			uint32_t shard;
			if (lmt_loader_locate(&l, k, &shard, &index, &e)) {
				json_decref(a);
				lmt_loader_release(&l);
				snprintf(why, cap, "%.200s", e.msg);
				return NULL;
			}
			json_t *s = json_array();
			json_array_append_new(s, json_integer(shard));
			json_array_append_new(s, json_integer((json_int_t)index));
			json_array_append_new(a, s);
		}
	lmt_loader_release(&l);
	return a;
}

/* The samples of update n: the loader's order where it can be rebuilt (every
 * rank's), checked against what train --log-samples recorded (rank 0's, first in
 * the order); else the recorded ones alone; else NULL. */
static json_t *batch(struct ctx *c, json_t *o)
{
	json_t *logged = json_object_get(c->u, "samples");
	char why[300] = "";
	json_t *order = lmt_runview_dataset(c->v) ? NULL : loader_order(c, why, sizeof why);
	if (order && json_is_array(logged)) {
		int same = json_array_size(logged) <= json_array_size(order);
		for (size_t i = 0; same && i < json_array_size(logged); i++)
			same = json_equal(json_array_get(logged, i), json_array_get(order, i));
		json_object_set_new(o, "order_matches_log", json_boolean(same));
		if (!same) {
			json_decref(order);
			setstr(o, "from", "train --log-samples (rank 0's; the loader's order disagrees with it)");
			return json_incref(logged);
		}
	}
	if (order) {
		setstr(o, "from", "the loader's order (every rank's)");
		if (!json_is_array(logged))
			setstr(o, "order_check", "not made: the run recorded no samples to check the order against "
						 "(train --log-samples records them)");
		return order;
	}
	if (json_is_array(logged)) {
		setstr(o, "from", "train --log-samples (rank 0's)");
		return json_incref(logged);
	}
	char m[700];
	snprintf(m, sizeof m, "the update record lists no samples (run train with --log-samples), and the loader's "
		 "order cannot be rebuilt: %s", why[0] ? why : c->v->ds_why);
	setstr(o, "missing", m);
	return NULL;
}

static void data(struct ctx *c, int loss_up)
{
	json_t *o = json_object();
	json_object_set_new(c->out, "data", o);
	json_t *samples = batch(c, o);
	if (!samples)
		return;
	json_object_set_new(o, "samples", json_integer((json_int_t)json_array_size(samples)));
	if (lmt_runview_dataset(c->v)) {
		json_decref(samples);
		setstr(o, "missing", c->v->ds_why);
		return;
	}
	struct lmt_runview *v = c->v;
	struct lmt_dataset *d = &v->ds;
	uint32_t ns = v->nsources ? v->nsources : 1;
	struct src_acc *acc = calloc(ns + 1, sizeof *acc); /* the last: documents of no known source */
	uint32_t *tok = malloc(((size_t)d->seq_len + 1) * sizeof *tok);
	struct lmt_segment *seg = malloc(((size_t)d->seq_len + 1) * sizeof *seg);
	json_t *list = json_array();
	double nats = 0;
	uint64_t ntok = 0;
	char bad[256] = "";
	for (size_t i = 0; acc && tok && seg && i < json_array_size(samples); i++) {
		json_t *s = json_array_get(samples, i);
		uint64_t sh = (uint64_t)lmt_jnum(s, "/0", -1), idx = (uint64_t)lmt_jnum(s, "/1", -1);
		const struct lmt_shard *shard;
		struct lmt_err e = { 0 };
		if (sh >= d->nshards || lmt_dataset_shard(d, sh, &shard, &e) || idx >= shard->info.n_seqs) {
			snprintf(bad, sizeof bad, "sample [%llu, %llu] is not in the dataset '%.100s'%s%.100s",
				 (unsigned long long)sh, (unsigned long long)idx, v->data_dir, e.msg[0] ? ": " : "", e.msg);
			break;
		}
		lmt_shard_tokens(shard, idx, tok);
		uint32_t nseg = lmt_shard_segments(shard, idx, seg, d->seq_len + 1);
		json_t *r = json_object(), *docs = json_array(), *srcs = json_array();
		setstr(r, "shard", d->shards[sh].name);
		json_object_set_new(r, "index", json_integer((json_int_t)idx));
		for (uint32_t k = 0; k < nseg; k++) {
			uint64_t doc = seg[k].doc;
			uint32_t so = doc < v->ndocs && v->doc_source[doc] < v->nsources ? v->doc_source[doc] : ns;
			json_array_append_new(docs, json_integer((json_int_t)doc));
			if (so < v->nsources)
				json_array_append_new(srcs, json_string(v->source[so]));
			acc[so].samples++;
			for (uint32_t p = seg[k].start; p < seg[k].start + seg[k].len && p <= d->seq_len; p++) {
				double x = tok[p] < d->vocab_size ? -v->logp[tok[p]] : 0;
				acc[so].nats += x;
				acc[so].tokens++;
				nats += x;
				ntok++;
			}
		}
		json_object_set_new(r, "documents", docs);
		json_object_set_new(r, "sources", srcs);
		json_array_append_new(list, r);
	}
	free(tok);
	free(seg);
	json_decref(samples);
	if (bad[0] || !acc) {
		setstr(o, "missing", bad[0] ? bad : "out of memory");
		json_decref(list);
		free(acc);
		return;
	}
	json_object_set_new(o, "list", list);
	setnum(o, "split_entropy", v->entropy);
	setnum(o, "batch_surprisal", ntok ? nats / ntok : NAN);
	setnum(o, "ratio", ntok && v->entropy > 0 ? nats / ntok / v->entropy : NAN);
	json_object_set_new(o, "tokens", json_integer((json_int_t)ntok));
	if (!v->ndocs)
		setstr(o, "sources_missing", "the dataset has no document index (documents.jsonl): no sources");
	json_t *bs = json_array();
	int worst = -1;
	double wr = 0;
	for (uint32_t s = 0; s <= ns; s++) {
		if (!acc[s].tokens)
			continue;
		double sur = acc[s].nats / acc[s].tokens, r = v->entropy > 0 ? sur / v->entropy : NAN;
		json_t *x = json_object();
		setstr(x, "source", s < v->nsources ? v->source[s] : "?");
		json_object_set_new(x, "segments", json_integer((json_int_t)acc[s].samples));
		json_object_set_new(x, "tokens", json_integer((json_int_t)acc[s].tokens));
		setnum(x, "surprisal", sur);
		setnum(x, "ratio", r);
		json_array_append_new(bs, x);
		if (s < v->nsources && (double)acc[s].tokens >= DATA_SHARE * ntok && r > wr) {
			wr = r;
			worst = (int)s;
		}
	}
	json_object_set_new(o, "by_source", bs);
	if (worst >= 0 && wr >= DATA_RATIO) {
		double share = (double)acc[worst].tokens / ntok;
		find(c, "data", (loss_up ? 0.55 : 0.3) + 0.3 * fmin(log2(wr) / 1.5, 1) + 0.1 * share,
		     "batch from '%s' (%.0f%% of its tokens) has %.1fx the train split's mean token surprisal "
		     "(%.2f nats against %.2f)",
		     v->source[worst], 100 * share, wr, acc[worst].nats / acc[worst].tokens, v->entropy);
	}
	free(acc);
}

/* ---- systems: data wait, communication, ranks, memory ---- */

static void systems(struct ctx *c)
{
	json_t *o = json_object();
	double x[LMT_EXPLAIN_WINDOW];
	double step = lmt_jnum(c->u, "/time/step", NAN), wait = lmt_jnum(c->u, "/time/data_wait", NAN);
	double comm = lmt_jnum(c->u, "/time/comm", NAN);
	double smed = median(x, window(c, "/time/step", x)), cmed = median(x, window(c, "/time/comm", x));
	setnum(o, "step_s", step);
	setnum(o, "step_median_s", smed);
	setnum(o, "data_wait_s", wait);
	double ws = step > 0 ? wait / step : NAN, cs = step > 0 ? comm / step : NAN;
	setnum(o, "data_wait_share", ws);
	setnum(o, "comm_s", comm);
	setnum(o, "comm_median_s", cmed);
	setnum(o, "comm_share", cs);
	json_t *ranks = json_object_get(c->u, "ranks");
	/* in a synchronous step every rank's step lasts as long as the slowest one's:
	 * the skew is in the busy time (the step less its waits for the loader and in
	 * collectives), where the records have it, with the alerts' floor of 20 ms so
	 * that scheduling noise on millisecond steps does not count */
	int busy = isfinite(lmt_jnum(ranks, "/busy_s/max", NAN));
	const char *by = busy ? "/busy_s" : "/step_s";
	char pmax[32], pmed[32], pslow[32];
	snprintf(pmax, sizeof pmax, "%s/max", by);
	snprintf(pmed, sizeof pmed, "%s/median", by);
	snprintf(pslow, sizeof pslow, "%s/slowest", by);
	double bmax = lmt_jnum(ranks, pmax, NAN), bmed = lmt_jnum(ranks, pmed, NAN);
	double skew = !busy ? lmt_jnum(ranks, "/skew", NAN)
			    : bmed > 0 && bmax - bmed >= SKEW_FLOOR_S ? bmax / bmed - 1 : 0;
	int slowest = (int)lmt_jnum(ranks, pslow, -1);
	if (ranks) {
		setnum(o, "skew", skew);
		setstr(o, "skew_of", busy ? "busy_s" : "step_s");
		json_object_set_new(o, "slowest_rank", json_integer(slowest));
		setnum(o, "slowest_step_s", lmt_jnum(ranks, "/step_s/max", NAN));
		setnum(o, "median_step_s", lmt_jnum(ranks, "/step_s/median", NAN));
		if (busy) {
			setnum(o, "slowest_busy_s", bmax);
			setnum(o, "median_busy_s", bmed);
		}
	} else {
		setstr(o, "ranks_missing", c->v->world > 1 ? "the update record has no per-rank times"
							 : "one rank: no skew to measure");
	}
	json_object_set_new(c->out, "systems", o);
	if (isfinite(skew) && skew >= SKEW)
		find(c, "slow rank", 0.5 + 0.2 * fmin(skew / SKEW / 4, 1),
		     "rank %d's %s (%.3g s) is %.0f%% above the ranks' median", slowest,
		     busy ? "busy time" : "step", busy ? bmax : lmt_jnum(ranks, "/step_s/max", NAN), 100 * skew);
	if (isfinite(ws) && ws >= STARVE)
		find(c, "input starvation", 0.4 + 0.3 * fmin(ws, 1),
		     "the loader's wait was %.0f%% of the update's %.3g s (the window's median step: %.3g s)", 100 * ws,
		     step, smed);
	if (isfinite(cs) && cs >= COMM_SHARE && cmed > 0 && comm / cmed >= COMM_RATIO)
		find(c, "communication", 0.45, "communication took %.0f%% of the step, %.1fx its median", 100 * cs,
		     comm / cmed);

	json_t *m = json_object();
	double peak = lmt_jnum(c->u, "/memory/peak_alloc", NAN);
	setnum(m, "peak_alloc", peak);
	setnum(m, "peak_rss", lmt_jnum(c->u, "/memory/peak_rss", NAN));
	if (c->v->ledger_total > 0) {
		setnum(m, "predicted", c->v->ledger_total);
		setnum(m, "ratio", peak / c->v->ledger_total);
		if (isfinite(peak) && peak >= MEM_OVER * c->v->ledger_total)
			find(c, "memory", 0.4, "the backend's peak %.4g MB is %.2fx memledger's prediction %.4g MB",
			     peak / 1e6, peak / c->v->ledger_total, c->v->ledger_total / 1e6);
	} else {
		setstr(m, "predicted_missing", "no ledger: config.json is missing or does not describe the model");
	}
	double before = c->at > 0 ? lmt_jnum(c->v->upd[c->at - 1], "/memory/peak_alloc", NAN) : NAN;
	if (isfinite(peak) && before > 0 && peak >= MEM_JUMP * before) {
		setnum(m, "peak_before", before);
		find(c, "memory", 0.45, "the backend's peak grew to %.4g MB at this update, %.2fx the update before's",
		     peak / 1e6, peak / before);
	}
	json_object_set_new(c->out, "memory", m);
	const char *nf = json_string_value(json_object_get(c->u, "nonfinite"));
	if (nf)
		find(c, "nonfinite", 0.95, "non-finite %s%s%s", nf, json_object_get(c->u, "nonfinite_tensor") ? " in " : "",
		     json_object_get(c->u, "nonfinite_tensor")
			     ? json_string_value(json_object_get(c->u, "nonfinite_tensor")) : "");
}

/* ---- alerts near n, and the checkpoint to roll back to ---- */

static void alerts_and_checkpoint(struct ctx *c)
{
	json_t *a = json_array();
	for (size_t i = 0; i < c->v->nrec; i++) {
		json_t *r = c->v->rec[i];
		const char *e = json_string_value(json_object_get(r, "event"));
		double k = lmt_jnum(r, "/update", -1);
		if (e && !strcmp(e, "alert") && k + 5 >= (double)c->n && k <= (double)c->n + 5)
			json_array_append(a, r);
	}
	json_object_set_new(c->out, "alerts", a);
	/* the newest checkpoint saved before update n that is still on disk: it
	 * holds the state before n's batch and step */
	uint64_t best = 0;
	int found = 0;
	for (size_t i = 0; i < c->v->nev; i++) {
		json_t *e = c->v->ev[i];
		const char *w = json_string_value(json_object_get(e, "event"));
		double k = lmt_jnum(e, "/update", -1);
		if (!w || strcmp(w, "checkpoint") || k < 0 || k >= (double)c->n)
			continue;
		char p[PATH_MAX + 64];
		snprintf(p, sizeof p, "%s/ckpt/step-%08llu/manifest.json", c->v->run, (unsigned long long)k);
		if (access(p, F_OK) == 0 && (!found || (uint64_t)k > best)) {
			best = (uint64_t)k;
			found = 1;
		}
	}
	json_t *o = json_object();
	if (found) {
		char p[PATH_MAX + 32];
		snprintf(p, sizeof p, "%s/ckpt/step-%08llu", c->v->run, (unsigned long long)best);
		json_object_set_new(o, "update", json_integer((json_int_t)best));
		setstr(o, "path", p);
	} else {
		setstr(o, "missing", "no checkpoint from before this update is on disk");
	}
	json_object_set_new(c->out, "checkpoint", o);
}

static int by_score(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;
	return x->score > y->score ? -1 : x->score < y->score;
}

int lmt_explain(struct lmt_runview *v, uint64_t n, json_t **out, struct lmt_err *err)
{
	*out = NULL;
	struct ctx c = { .v = v, .n = n, .at = lmt_runview_update_index(v, n) };
	if (c.at < 0) {
		if (!v->nupd)
			return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no update records", v->metrics_path);
		return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no update %llu (the run has updates %llu to %llu)",
				   v->metrics_path, (unsigned long long)n, (unsigned long long)v->upd_n[0],
				   (unsigned long long)v->upd_n[v->nupd - 1]);
	}
	c.u = v->upd[c.at];
	if (!(c.out = json_object()))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	setstr(c.out, "event", "explain");
	setstr(c.out, "run", v->run);
	json_object_set_new(c.out, "update", json_integer((json_int_t)n));
	double lz = loss_z(&c);
	int loss_up = isfinite(lz) && lz >= LOSS_Z_SOME;
	around(&c);
	gradients(&c, lz, loss_up);
	data(&c, loss_up);
	systems(&c);
	alerts_and_checkpoint(&c);
	if (isfinite(lz) && lz >= LOSS_Z && c.nf == 0)
		find(&c, "unexplained", 0.3,
		     "the loss is %.1f sigma above the window's mean, and neither the data, the learning rate, the "
		     "gradients nor the systems evidence stands out", lz);
	qsort(c.f, (size_t)c.nf, sizeof *c.f, by_score);
	json_t *fs = json_array();
	for (int i = 0; i < c.nf; i++) {
		json_t *f = json_object();
		setstr(f, "cause", c.f[i].cause);
		setnum(f, "score", c.f[i].score);
		setstr(f, "confidence", c.f[i].score >= 0.75 ? "high" : c.f[i].score >= 0.5 ? "medium" : "low");
		setstr(f, "text", c.f[i].text);
		json_array_append_new(fs, f);
	}
	json_object_set_new(c.out, "findings", fs);
	char verdict[512];
	if (c.nf) {
		snprintf(verdict, sizeof verdict, "likely %s: %s", c.f[0].cause, c.f[0].text);
		setstr(c.out, "cause", c.f[0].cause);
		setstr(c.out, "confidence", c.f[0].score >= 0.75 ? "high" : c.f[0].score >= 0.5 ? "medium" : "low");
	} else {
		snprintf(verdict, sizeof verdict,
			 "nothing stands out: the loss is %s, the learning rate, gradient norm, data and times are "
			 "within their usual range",
			 isfinite(lz) ? (lz >= LOSS_Z_SOME ? "up but within the spike threshold" : "within its usual range")
				      : "without a baseline");
		json_object_set_new(c.out, "cause", json_null());
		setstr(c.out, "confidence", "none");
	}
	setstr(c.out, "verdict", verdict);
	*out = c.out;
	return 0;
}

/* ---- text ---- */

static void line_num(struct lmt_strbuf *b, const char *label, json_t *o, const char *ptr, const char *fmt)
{
	json_t *x = lmt_jsonptr_get(o, ptr);
	if (json_is_number(x)) {
		lmt_strbuf_printf(b, "  %-22s ", label);
		lmt_strbuf_printf(b, fmt, json_number_value(x));
		lmt_strbuf_putc(b, '\n');
	}
}

struct text_line {
	const char *label, *ptr, *fmt;
};

static const struct text_line before_units[] = {
	{ "loss", "/loss/value", "%.4f" },
	{ "  window mean", "/loss/mean", "%.4f" },
	{ "  sigmas above", "/loss/z", "%.1f" },
	{ "learning rate", "/gradients/lr", "%.4g" },
	{ "  recent max / median", "/gradients/lr_ratio", "%.2fx" },
	{ "gradient norm", "/gradients/grad_norm", "%.4g" },
	{ "  / median", "/gradients/ratio", "%.2fx" },
	{ "  clip threshold", "/gradients/clip", "%.3g" },
	{ "  clipped (window)", "/gradients/clipped_window_fraction", "%.2f" },
};

static const struct text_line systems_lines[] = {
	{ "step", "/systems/step_s", "%.4g s" },
	{ "data wait share", "/systems/data_wait_share", "%.3f" },
	{ "comm share", "/systems/comm_share", "%.3f" },
	{ "skew", "/systems/skew", "%.3f" },
	{ "  slowest rank", "/systems/slowest_rank", "%.0f" },
	{ "peak alloc", "/memory/peak_alloc", "%.0f bytes" },
	{ "  predicted", "/memory/predicted", "%.0f bytes" },
};

static void lines(struct lmt_strbuf *b, json_t *e, const struct text_line *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		line_num(b, t[i].label, e, t[i].ptr, t[i].fmt);
}

void lmt_explain_text(json_t *e, struct lmt_strbuf *b)
{
	lmt_strbuf_printf(b, "update %lld of %s\n", (long long)lmt_jnum(e, "/update", 0),
			  json_string_value(json_object_get(e, "run")));
	lmt_strbuf_printf(b, "verdict: %s (confidence %s)\n\n", json_string_value(json_object_get(e, "verdict")),
			  json_string_value(json_object_get(e, "confidence")));
	lines(b, e, before_units, LMT_ARRAY_SIZE(before_units));
	json_t *units = lmt_jsonptr_get(e, "/gradients/units");
	for (size_t i = 0; i < json_array_size(units) && i < 3; i++) {
		json_t *u = json_array_get(units, i);
		lmt_strbuf_printf(b, "  %-22s grad norm %.4g", json_string_value(json_object_get(u, "unit")),
				  lmt_jnum(u, "/grad_norm", NAN));
		if (json_is_number(json_object_get(u, "ratio")))
			lmt_strbuf_printf(b, " (%.2fx the stats record before)", lmt_jnum(u, "/ratio", NAN));
		lmt_strbuf_putc(b, '\n');
	}
	json_t *d = json_object_get(e, "data");
	if (json_object_get(d, "missing")) {
		lmt_strbuf_printf(b, "  %-22s %s\n", "data", json_string_value(json_object_get(d, "missing")));
	} else {
		lmt_strbuf_printf(b, "  %-22s %s\n", "batch from", json_string_value(json_object_get(d, "from")));
		json_t *m = json_object_get(d, "order_matches_log");
		if (m || json_object_get(d, "order_check"))
			lmt_strbuf_printf(b, "  %-22s %s\n", "  order check",
					  m ? json_is_true(m) ? "the same as train --log-samples recorded"
							      : "DIFFERS from what train --log-samples recorded"
					    : json_string_value(json_object_get(d, "order_check")));
		line_num(b, "batch surprisal", d, "/batch_surprisal", "%.3f nats/token");
		line_num(b, "  split entropy", d, "/split_entropy", "%.3f nats/token");
		json_t *bs = json_object_get(d, "by_source");
		for (size_t i = 0; i < json_array_size(bs); i++) {
			json_t *s = json_array_get(bs, i);
			lmt_strbuf_printf(b, "  source %-15s %lld tokens, %.3f nats/token (%.2fx)\n",
					  json_string_value(json_object_get(s, "source")), (long long)lmt_jnum(s, "/tokens", 0),
					  lmt_jnum(s, "/surprisal", NAN), lmt_jnum(s, "/ratio", NAN));
		}
	}
	lines(b, e, systems_lines, LMT_ARRAY_SIZE(systems_lines));
	json_t *ck = json_object_get(e, "checkpoint");
	if (json_object_get(ck, "path"))
		lmt_strbuf_printf(b, "  %-22s %s (update %lld)\n", "roll back to", json_string_value(json_object_get(ck, "path")),
				  (long long)lmt_jnum(ck, "/update", 0));
	else
		lmt_strbuf_printf(b, "  %-22s %s\n", "roll back to", json_string_value(json_object_get(ck, "missing")));
	json_t *fs = json_object_get(e, "findings");
	if (json_array_size(fs))
		lmt_strbuf_puts(b, "\nfindings:\n");
	for (size_t i = 0; i < json_array_size(fs); i++) {
		json_t *f = json_array_get(fs, i);
		lmt_strbuf_printf(b, "  %-18s %-6s %s\n", json_string_value(json_object_get(f, "cause")),
				  json_string_value(json_object_get(f, "confidence")),
				  json_string_value(json_object_get(f, "text")));
	}
}
