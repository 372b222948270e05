/*
 * trainer.c: the training step, evaluation and sampling (trainer.h).
 */
#include "model/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "model/generate.h"
#include "core/util.h"

double lmt_lr_at(const struct lmt_train_cfg *c, uint64_t u)
{
	double lo = c->lr * c->min_lr_frac;
	if (u < c->warmup)
		return c->lr * (double)(u + 1) / (double)c->warmup;
	if (u >= c->updates)
		return lo;
	double q = (double)(u - c->warmup) / (double)(c->updates - c->warmup);
	switch (c->schedule) {
	case LMT_SCHED_LINEAR: return c->lr - (c->lr - lo) * q;
	case LMT_SCHED_CONSTANT: return c->lr;
	default: return lo + (c->lr - lo) * 0.5 * (1.0 + cos(M_PI * q));
	}
}

/* The segment covering position p, or -1; segments are sorted and disjoint, and p
 * only grows, so *k walks forward. */
static int seg_at(const struct lmt_sample *x, uint32_t p, uint32_t *k)
{
	while (*k < x->nseg && x->segs[*k].start + x->segs[*k].len <= p)
		(*k)++;
	return *k < x->nseg && x->segs[*k].start <= p ? (int)*k : -1;
}

uint64_t lmt_make_batch(const struct lmt_sample *s, int B, int T, int cross, int32_t *tok, int32_t *tgt,
			int32_t *seg)
{
	uint64_t valid = 0;
	for (int b = 0; b < B; b++) {
		const struct lmt_sample *x = &s[b];
		uint32_t k = 0, k1 = 0;
		for (int p = 0; p < T; p++) {
			size_t i = (size_t)b * T + p;
			int here = seg_at(x, (uint32_t)p, &k), next = seg_at(x, (uint32_t)p + 1, &k1);
			tok[i] = (int32_t)x->tokens[p];
			/* padding gets a segment of its own, so it attends only to itself */
			seg[i] = here >= 0 ? here : -(p + 1);
			int ok = here >= 0 && next >= 0 && (cross || here == next);
			tgt[i] = ok ? (int32_t)x->tokens[p + 1] : -1;
			valid += ok;
		}
	}
	return valid;
}

int lmt_trainer_init(struct lmt_trainer *tr, const struct lmt_train_cfg *cfg, struct lmt_backend *be,
		     struct lmt_comm *comm, struct lmt_gpt *g, struct lmt_dataset *d, uint64_t cursor,
		     struct lmt_err *err)
{
	memset(tr, 0, sizeof *tr);
	tr->cfg = *cfg;
	tr->be = be;
	tr->comm = comm;
	tr->g = g;
	tr->T = (int)d->seq_len;
	if (g->B != cfg->B || g->T != tr->T)
		return lmt_err_set(err, LMT_EINVAL, "model activations are for %d x %d, the step needs %d x %d", g->B,
				   g->T, cfg->B, tr->T);
	struct lmt_adamw_cfg ac = { cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, cfg->decay_embeddings };
	size_t lo = 0, hi = 0;
	int rc;
	if (cfg->zero && comm->world > 1) {
		/* ZeRO-1: equal shards of the flat layout, padded so that they tile it */
		size_t W = (size_t)comm->world, S = (g->nparams + W - 1) / W;
		if ((rc = lmt_gpt_pad(g, S * W, err)))
			return rc;
		tr->shard = S;
		lo = LMT_MIN(g->nparams, (size_t)comm->rank * S);
		hi = LMT_MIN(g->nparams, lo + S);
	}
	if ((rc = lmt_optim_init(&tr->opt, g, &ac, lo, hi, tr->shard, err)))
		return rc;
	if (tr->shard && cfg->zero >= 2) {
		if ((rc = lmt_zero_init(&tr->z, g, comm, cfg->zero, cfg->prefetch, tr->shard, err))) {
			lmt_optim_release(&tr->opt);
			return rc;
		}
		if (cfg->zero == 2)
			lmt_optim_bind(&tr->opt, g->params, g->wparams != g->params ? g->wparams : NULL, 0, tr->z.gshard, lo);
		else
			lmt_optim_bind(&tr->opt, tr->z.pshard, NULL, lo, tr->z.gshard, lo);
	}
	if (cfg->stats_every && (rc = lmt_stats_init(&tr->stats, g, err))) {
		lmt_trainer_release(tr);
		return rc;
	}
	lmt_loss_scaler_init(&tr->scaler, g->dtype == LMT_DTYPE_F16);
	if (tr->scaler.enabled) {
		if (cfg->loss_scale > 0)
			tr->scaler.scale = cfg->loss_scale;
		if (cfg->loss_scale_window)
			tr->scaler.interval = cfg->loss_scale_window;
	}
	size_t ns = (size_t)cfg->B * cfg->accum, N = (size_t)cfg->B * tr->T * cfg->accum;
	tr->samples = calloc(ns, sizeof *tr->samples);
	tr->h_tok = malloc(N * sizeof *tr->h_tok);
	tr->h_tgt = malloc(N * sizeof *tr->h_tgt);
	tr->h_seg = malloc(N * sizeof *tr->h_seg);
	if (!tr->samples || !tr->h_tok || !tr->h_tgt || !tr->h_seg) {
		lmt_trainer_release(tr);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < ns; i++)
		if (lmt_sample_alloc(&tr->samples[i], d)) {
			lmt_trainer_release(tr);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
	struct lmt_loader_cfg lc = { LMT_SPLIT_TRAIN, cfg->seed, (uint32_t)comm->rank, (uint32_t)comm->world, 1,
				     cfg->shuffle_window, (uint32_t)LMT_MIN(ns * 2, 256) };
	if ((rc = lmt_loader_init(&tr->loader, d, &lc, cursor, err))) {
		lmt_trainer_release(tr);
		return rc;
	}
	return 0;
}

int lmt_trainer_gather_moments(struct lmt_trainer *tr, struct lmt_err *err)
{
	struct lmt_gpt *g = tr->g;
	struct lmt_backend *be = tr->be;
	if (!tr->shard)
		return 0;
	size_t bytes = tr->shard * sizeof(float), total = tr->shard * (size_t)tr->comm->world;
	if (!g->m)
		g->m = be->alloc(be, total * sizeof(float));
	if (!g->v)
		g->v = be->alloc(be, total * sizeof(float));
	if (!g->m || !g->v) {
		lmt_trainer_drop_moments(tr);
		return lmt_err_set(err, LMT_ENOMEM, "cannot gather the AdamW moments (%.1f MB)", 2.0 * total * 4 / 1e6);
	}
	int rc = tr->comm->allgather(tr->comm, tr->opt.m, g->m, bytes, err);
	if (!rc)
		rc = tr->comm->allgather(tr->comm, tr->opt.v, g->v, bytes, err);
	return rc ? rc : lmt_trainer_unshard(tr, err);
}

int lmt_trainer_unshard(struct lmt_trainer *tr, struct lmt_err *err)
{
	return tr->z.g ? lmt_zero_unshard(&tr->z, err) : 0;
}

void lmt_trainer_reshard(struct lmt_trainer *tr)
{
	if (tr->z.g)
		lmt_zero_reshard(&tr->z);
}

void lmt_trainer_drop_moments(struct lmt_trainer *tr)
{
	struct lmt_gpt *g = tr->g;
	if (!tr->shard)
		return;
	tr->be->free(tr->be, g->m);
	tr->be->free(tr->be, g->v);
	g->m = g->v = NULL;
	lmt_trainer_reshard(tr);
}

int lmt_trainer_take_moments(struct lmt_trainer *tr, struct lmt_err *err)
{
	struct lmt_gpt *g = tr->g;
	(void)err;
	if (!tr->shard)
		return 0;
	size_t n = tr->opt.hi - tr->opt.lo;
	tr->be->copy(tr->be, tr->opt.m, g->m + tr->opt.lo, n * sizeof(float));
	tr->be->copy(tr->be, tr->opt.v, g->v + tr->opt.lo, n * sizeof(float));
	if (tr->z.g)
		lmt_zero_take_params(&tr->z);
	lmt_trainer_drop_moments(tr);
	return 0;
}

void lmt_trainer_release(struct lmt_trainer *tr)
{
	if (tr->samples)
		for (size_t i = 0; i < (size_t)tr->cfg.B * tr->cfg.accum; i++)
			lmt_sample_free(&tr->samples[i]);
	free(tr->samples);
	free(tr->h_tok);
	free(tr->h_tgt);
	free(tr->h_seg);
	if (tr->loader.d)
		lmt_loader_release(&tr->loader);
	lmt_zero_release(&tr->z);
	lmt_stats_release(&tr->stats, tr->be);
	lmt_optim_release(&tr->opt);
	memset(tr, 0, sizeof *tr);
}

/* Test hook: LMT_TEST_OVERFLOW=U puts an infinity into one gradient at update U
 * (1-based), as an fp16 overflow would, to test what the loss scaler does. */
static void test_overflow(struct lmt_trainer *tr)
{
	const char *v = getenv("LMT_TEST_OVERFLOW");
	if (!v || strtoull(v, NULL, 10) != tr->update + 1)
		return;
	float inf = INFINITY;
	size_t at = tr->g->nparams / 2;
	if (tr->z.g) { /* in the shard of the rank that owns it */
		if (at >= tr->z.lo && at < tr->z.hi)
			tr->be->to_device(tr->be, tr->z.gshard + (at - tr->z.lo), &inf, sizeof inf);
		return;
	}
	tr->be->to_device(tr->be, tr->g->grads + at, &inf, sizeof inf);
}

/* Test hook: LMT_TEST_LR_SCALE=U1-U2:F multiplies the learning rate of updates U1
 * to U2 (1-based) by F, a learning rate far too high for some updates. */
static double test_lr_scale(uint64_t u)
{
	const char *v = getenv("LMT_TEST_LR_SCALE");
	unsigned long long a, b;
	double f;
	if (!v || sscanf(v, "%llu-%llu:%lf", &a, &b, &f) != 3 || u < a || u > b)
		return 1.0;
	return f;
}

/* Test hook: LMT_TEST_SLOW_RANK=R:S makes rank R sleep S seconds in every update
 * (after its batch is read, before the first collective), a rank slower than its
 * peers, for the skew alert; the others wait for it in the collective. */
static void test_slow_rank(const struct lmt_trainer *tr)
{
	const char *v = getenv("LMT_TEST_SLOW_RANK");
	int r;
	double sec;
	if (v && sscanf(v, "%d:%lf", &r, &sec) == 2 && r == tr->comm->rank && sec > 0)
		usleep((useconds_t)(sec * 1e6));
}

/*
 * Gradient buckets for data parallelism: backward reports each layer's range as
 * it becomes final (last layer first; the ranges are adjacent, descending), and
 * adjacent ranges are gathered until a bucket holds bucket_bytes, then its
 * all-reduce starts while backward goes on. What is left after backward (the
 * last bucket, the embeddings before the layers, the final norm and head after
 * them) starts then; every request is waited for before the optimizer.
 */
#define MAX_BUCKETS 256

struct buckets {
	struct lmt_trainer *tr;
	size_t lo, hi;           /* the bucket being filled: [lo, hi) of the layout */
	int n, failed;
	struct lmt_comm_req *req[MAX_BUCKETS];
	struct lmt_err err[1];
};

static void bucket_start(struct buckets *b, size_t lo, size_t hi)
{
	struct lmt_trainer *tr = b->tr;
	if (hi <= lo || b->failed)
		return;
	if (b->n == MAX_BUCKETS) { /* more buckets than requests: this one at once */
		b->failed = tr->comm->allreduce(tr->comm, tr->g->grads + lo, hi - lo, LMT_DTYPE_F32, LMT_COMM_OP_SUM, b->err);
		return;
	}
	b->failed = tr->comm->allreduce_start(tr->comm, tr->g->grads + lo, hi - lo, LMT_DTYPE_F32, LMT_COMM_OP_SUM,
					      &b->req[b->n], b->err);
	if (!b->failed)
		b->n++;
}

static void bucket_ready(void *ctx, int layer, size_t off, size_t n)
{
	struct buckets *b = ctx;
	(void)layer;
	if (b->hi == b->lo) { /* an empty bucket */
		b->lo = off;
		b->hi = off + n;
	} else {
		b->lo = off; /* descending and adjacent: this layer ends where the bucket begins */
	}
	size_t cap = b->tr->cfg.bucket_bytes ? b->tr->cfg.bucket_bytes / sizeof(float) : 0;
	if ((b->hi - b->lo) >= cap) {
		bucket_start(b, b->lo, b->hi);
		b->lo = b->hi = 0;
	}
}

static int buckets_finish(struct buckets *b, struct lmt_err *err)
{
	struct lmt_trainer *tr = b->tr;
	struct lmt_gpt *g = tr->g;
	if (tr->comm->world == 1)
		return 0;
	bucket_start(b, b->lo, b->hi);
	size_t first, n = lmt_gpt_layer_range(g, 0, &first), last_end;
	lmt_gpt_layer_range(g, g->cfg.L - 1, &last_end);
	last_end += n;
	bucket_start(b, 0, first);                   /* wte, wpe */
	bucket_start(b, last_end, g->nparams);       /* lnfw, lnfb [, lm_head] */
	int rc = b->failed;
	for (int i = 0; i < b->n; i++) {
		int r = tr->comm->wait(tr->comm, b->req[i], rc ? NULL : err);
		if (r && !rc)
			rc = r;
	}
	if (b->failed) {
		*err = b->err[0];
		return b->failed;
	}
	return rc;
}

int lmt_trainer_step(struct lmt_trainer *tr, struct lmt_step_stats *st, struct lmt_err *err)
{
	struct lmt_backend *be = tr->be;
	struct lmt_gpt *g = tr->g;
	const struct lmt_train_cfg *c = &tr->cfg;
	int B = c->B, T = tr->T, A = c->accum, rc;
	size_t N = (size_t)B * T;
	memset(st, 0, sizeof *st);
	double t0 = lmt_now(), t;

	/* 1-2: every micro-batch's samples first, to count the whole batch's targets */
	uint64_t valid = 0;
	for (int i = 0; i < A * B; i++)
		if ((rc = lmt_loader_next(&tr->loader, &tr->samples[i], err)))
			return rc;
	for (int m = 0; m < A; m++)
		valid += lmt_make_batch(&tr->samples[m * B], B, T, c->cross_doc_targets, tr->h_tok + m * N,
					tr->h_tgt + m * N, tr->h_seg + m * N);
	st->t_data = lmt_now() - t0;
	test_slow_rank(tr);
	t = lmt_now();
	int64_t gvalid = (int64_t)valid;
	if ((rc = tr->comm->allreduce_sum(tr->comm, &gvalid, 1, LMT_DTYPE_I64, err)))
		return rc;
	st->t_comm += lmt_now() - t;
	if (gvalid == 0)
		return lmt_err_set(err, LMT_EFORMAT,
			"update %llu: the batch has no valid target tokens (all padding or masked)",
			(unsigned long long)tr->update + 1);

	/* 3: forward and backward per micro-batch, the loss scaled */
	double S = tr->scaler.scale;
	float dscale = (float)(S / (double)gvalid);
	double *acc = g->a.scalars, zero[4] = { 0, 0, 0, 0 }, h[4];
	double ops0[LMT_OPK_COUNT];
	memcpy(ops0, be->op_s, sizeof ops0);
	be->to_device(be, acc, zero, sizeof zero);
	struct lmt_zero *z = tr->z.g ? &tr->z : NULL;
	double zwait = z ? z->t_wait : 0;
	if (z) {
		lmt_zero_reshard(z);
		lmt_zero_begin_update(z);
	} else {
		be->zero(be, g->grads, g->nparams * sizeof(float));
	}
	struct buckets bk = { .tr = tr };
	for (int m = 0; m < A; m++) {
		t = lmt_now();
		be->to_device(be, g->tok, tr->h_tok + m * N, N * sizeof(int32_t));
		be->to_device(be, g->tgt, tr->h_tgt + m * N, N * sizeof(int32_t));
		be->to_device(be, g->seg, tr->h_seg + m * N, N * sizeof(int32_t));
		st->t_data += lmt_now() - t;
		t = lmt_now();
		lmt_gpt_forward(g, c->seg_mask, dscale, &acc[0]);
		st->t_forward += lmt_now() - t;
		t = lmt_now();
		/* data parallel: the last micro-batch's backward starts each bucket's
		 * all-reduce as soon as its layers are final; earlier ones only accumulate */
		if (m == A - 1 && tr->comm->world > 1 && !tr->shard) {
			g->grads_ready = bucket_ready;
			g->grads_ready_ctx = &bk;
		}
		if (z) /* ZeRO-2, -3: every micro-batch's layers reduced as they are done */
			lmt_zero_begin_backward(z);
		lmt_gpt_backward(g, c->seg_mask);
		if (!z)
			g->grads_ready = NULL;
		else if ((rc = lmt_zero_end_backward(z, err)))
			return rc;
		st->t_backward += lmt_now() - t;
	}
	test_overflow(tr);

	/* 4: sum gradients over ranks (the buckets started in backward, then the
	 * embeddings and the head); the loss sum rides with the scalars */
	t = lmt_now();
	int sharded = tr->shard > 0;
	size_t lo = tr->opt.lo, hi = tr->opt.hi;
	float *gsh = z ? z->gshard : sharded ? g->grads + lo : g->grads; /* this rank's summed gradients */
	if (z) {
		/* ZeRO-2, -3: reduced in backward */
	} else if (sharded) {
		/* ZeRO-1: each rank's shard of the summed gradient (reduce-scatter, its
		 * block landing first), moved to where the shard lies */
		if ((rc = tr->comm->reduce_scatter(tr->comm, g->grads, g->grads, tr->shard, LMT_DTYPE_F32, LMT_COMM_OP_SUM,
						   err)))
			return rc;
		if (tr->comm->rank)
			be->copy(be, g->grads + (size_t)tr->comm->rank * tr->shard, g->grads, tr->shard * sizeof(float));
	} else if ((rc = buckets_finish(&bk, err)) ||
		   (tr->comm->world == 1 && (rc = tr->comm->allreduce_sum(tr->comm, g->grads, g->nparams, LMT_DTYPE_F32,
									  err)))) {
		return rc;
	}
	st->t_comm += lmt_now() - t;
	if (z) /* the waits in the passes' hooks (also counted in t_forward, t_backward) */
		st->t_comm += z->t_wait - zwait;

	/* 5-6: norm, checks, clipping, AdamW */
	t = lmt_now();
	/* acc[1] sum of squares, acc[2] non-finite count: of the shard, summed over ranks */
	be->sumsq(be, acc + 1, gsh, sharded ? hi - lo : g->nparams);
	be->to_host(be, h, acc, 3 * sizeof *h);
	if ((rc = be->status(be, err)))
		return lmt_err_prefix(err, "update %llu", (unsigned long long)tr->update + 1), rc;
	double loss_sum = h[0];
	t = lmt_now();
	if ((rc = tr->comm->allreduce_sum(tr->comm, sharded ? (void *)h : (void *)&loss_sum, sharded ? 3 : 1, LMT_DTYPE_F64,
					  err)))
		return rc;
	if (sharded)
		loss_sum = h[0];
	st->t_comm += lmt_now() - t;
	st->update = tr->update + 1;
	st->valid_tokens = (uint64_t)gvalid;
	st->positions = (uint64_t)N * A * tr->comm->world;
	st->loss = loss_sum / (double)gvalid; /* the losses themselves are unscaled */
	st->loss_scale = S;
	st->grad_norm = h[2] > 0 ? NAN : sqrt(h[1]) / S;
	st->lr = lmt_lr_at(c, tr->update) * test_lr_scale(tr->update + 1);
	if (!isfinite(st->loss) || !isfinite(st->grad_norm)) {
		st->nonfinite_what = !isfinite(st->loss) ? "loss" : "gradient";
		st->nonfinite_tensor = sharded ? lmt_optim_find_nonfinite_shard(&tr->opt, gsh, lo)
					       : lmt_optim_find_nonfinite(&tr->opt, g->grads);
	}
	/* fp16: a non-finite gradient with a finite loss is the scale's overflow */
	if (tr->scaler.enabled && st->nonfinite_what && isfinite(st->loss) && !strcmp(st->nonfinite_what, "gradient"))
		st->overflow = 1;
	float gscale = (float)(1.0 / S);
	if (!st->nonfinite_what && c->clip > 0 && st->grad_norm > c->clip) {
		gscale = (float)(c->clip / st->grad_norm / S);
		st->clipped = 1;
	}
	int want = c->stats_every && (tr->update + 1) % c->stats_every == 0 && !st->nonfinite_what;
	float *sp = z && z->stage == 3 ? z->pshard : g->params;
	size_t spb = z && z->stage == 3 ? lo : 0;
	double ts = lmt_now();
	if (want && (rc = lmt_stats_before(&tr->stats, g, sp, spb, lo, hi, err)))
		return rc;
	st->t_stats = lmt_now() - ts;
	if (!st->nonfinite_what) {
		lmt_optim_step(&tr->opt, st->lr, gscale, &acc[3]);
		be->to_host(be, &h[3], &acc[3], sizeof h[3]);
		if ((rc = be->status(be, err)))
			return lmt_err_prefix(err, "update %llu", (unsigned long long)tr->update + 1), rc;
		if (z && z->stage == 3) { /* the parameters stay sharded: only the checks */
			lmt_zero_params_changed(z);
			if ((rc = tr->comm->allreduce_sum(tr->comm, &h[3], 1, LMT_DTYPE_F64, err)))
				return rc;
		} else if (sharded) { /* every rank's updated shard to every rank, and their checks */
			size_t SH = tr->shard, r = (size_t)tr->comm->rank, ds = lmt_dtype_size(g->dtype);
			if ((rc = tr->comm->allgather(tr->comm, g->params + r * SH, g->params, SH * sizeof(float), err)) ||
			    (g->wparams != g->params &&
			     (rc = tr->comm->allgather(tr->comm, (char *)g->wparams + r * SH * ds, g->wparams, SH * ds, err))) ||
			    (rc = tr->comm->allreduce_sum(tr->comm, &h[3], 1, LMT_DTYPE_F64, err)))
				return rc;
		}
		ts = lmt_now();
		if (want && (rc = lmt_stats_after(&tr->stats, g, tr->comm, sharded, sp, spb, gsh, z || sharded ? lo : 0,
						  1.0 / S, lo, hi, err)))
			return rc;
		st->t_stats += lmt_now() - ts;
		st->have_stats = want;
		if (h[3] > 0) {
			st->nonfinite_what = "parameter";
			st->nonfinite_tensor = z && z->stage == 3 ? lmt_optim_find_nonfinite_shard(&tr->opt, z->pshard, lo)
								  : lmt_optim_find_nonfinite(&tr->opt, g->params);
		}
	}
	lmt_loss_scaler_update(&tr->scaler, st->overflow);
	st->t_optimizer = lmt_now() - t;
	for (int k = 0; k < LMT_OPK_COUNT; k++)
		st->t_ops[k] = be->op_s[k] - ops0[k];
	tr->update++;
	tr->tokens += (uint64_t)gvalid;
	tr->clipped_updates += st->clipped;
	st->t_total = lmt_now() - t0;
	if (st->overflow) {
		st->skipped = 1;
		return 0;
	}
	if (st->nonfinite_what) {
		/* a non-finite parameter is already in the weights and moments: skipping
		 * cannot undo it, so it stops the run under either policy */
		int param = !strcmp(st->nonfinite_what, "parameter");
		st->skipped = !param;
		if (c->on_nonfinite == LMT_NONFINITE_STOP || param)
			return lmt_err_set(err, LMT_ERANGE, "update %llu: non-finite %s%s%s%s",
					   (unsigned long long)tr->update, st->nonfinite_what,
					   st->nonfinite_tensor ? " in '" : "",
					   st->nonfinite_tensor ? st->nonfinite_tensor : "",
					   st->nonfinite_tensor ? "'" : "");
	}
	return 0;
}

int lmt_evaluate(struct lmt_gpt *g, struct lmt_comm *comm, struct lmt_dataset *d, int split, uint64_t nseq,
		 int seg_mask, int cross, double *loss, uint64_t *tokens, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	int B = g->B, T = g->T;
	size_t N = (size_t)B * T;
	if ((int)d->seq_len != T)
		return lmt_err_set(err, LMT_EINVAL, "dataset sequences of %u, model activations for %d", d->seq_len, T);
	nseq = LMT_MIN(nseq, d->split_seqs[split]);
	struct lmt_loader l;
	struct lmt_loader_cfg lc = { split, 0, (uint32_t)comm->rank, (uint32_t)comm->world, 0, 0, 0 };
	int rc = lmt_loader_init(&l, d, &lc, (uint64_t)comm->rank, err);
	if (rc)
		return rc;
	struct lmt_sample *s = calloc((size_t)B, sizeof *s);
	int32_t *tok = malloc(N * 4), *tgt = malloc(N * 4), *seg = malloc(N * 4);
	double sum = 0;
	uint64_t count = 0;
	for (int b = 0; s && b < B; b++)
		if (lmt_sample_alloc(&s[b], d))
			rc = LMT_ENOMEM;
	if (!s || !tok || !tgt || !seg || rc) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	/* this rank's share: positions rank, rank + world, ... below nseq */
	uint64_t mine = nseq > (uint64_t)comm->rank ? (nseq - comm->rank + comm->world - 1) / comm->world : 0;
	for (uint64_t done = 0; done < mine;) {
		int nb = (int)LMT_MIN((uint64_t)B, mine - done);
		for (int b = 0; b < nb; b++)
			if ((rc = lmt_loader_next(&l, &s[b], err)))
				goto out;
		count += lmt_make_batch(s, nb, T, cross, tok, tgt, seg);
		for (size_t i = (size_t)nb * T; i < N; i++) { /* rows beyond the last sequence count nothing */
			tok[i] = 0;
			tgt[i] = -1;
			seg[i] = -1;
		}
		be->to_device(be, g->tok, tok, N * 4);
		be->to_device(be, g->tgt, tgt, N * 4);
		be->to_device(be, g->seg, seg, N * 4);
		double ls;
		lmt_gpt_eval(g, seg_mask, &ls);
		sum += ls;
		done += (uint64_t)nb;
	}
	int64_t c64 = (int64_t)count;
	if ((rc = comm->allreduce_sum(comm, &sum, 1, LMT_DTYPE_F64, err)) ||
	    (rc = comm->allreduce_sum(comm, &c64, 1, LMT_DTYPE_I64, err)))
		goto out;
	*loss = c64 ? sum / (double)c64 : NAN;
	*tokens = (uint64_t)c64;
out:
	if (s)
		for (int b = 0; b < B; b++)
			lmt_sample_free(&s[b]);
	free(s);
	free(tok);
	free(tgt);
	free(seg);
	lmt_loader_release(&l);
	return rc;
}
