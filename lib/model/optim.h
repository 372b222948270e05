/*
 * optim.h: AdamW over the flat fp32 master weights, and the loss scaler of fp16
 * training.
 *
 * The optimizer holds the ranges of the parameters it updates (one per piece of a
 * tensor in the model's layer-major layout, with its weight decay: the weight matrices, and the embeddings with decay_embeddings;
 * never biases or LayerNorm parameters) within this rank's shard [lo, hi) of the
 * flat parameters (the whole of them at world size 1). Its state is the fp32 moments
 * m and v and the step count; each update writes the master weights and, in the
 * same pass, the model's working copy in its compute dtype.
 *
 * Dynamic loss scaling (fp16): the loss is multiplied by the scale S before
 * backward, so small gradients survive fp16's range; gradients are unscaled (times
 * 1/S) before the norm is clipped and before AdamW. A gradient with a non-finite
 * value is an overflow: the update is skipped and S multiplied by backoff; after
 * interval updates in a row without one, S is multiplied by growth. The defaults
 * are PyTorch's GradScaler's: S = 2^16, growth 2, backoff 0.5, interval 2000.
 */
#ifndef LMT_OPTIM_H
#define LMT_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "model/model.h"

struct lmt_adamw_cfg {
	double beta1, beta2, eps, weight_decay;
	int decay_embeddings;
};

struct lmt_optim_range {
	size_t offset, count;
	int decay;
	const char *tensor;
};

struct lmt_optim {
	struct lmt_gpt *g;
	struct lmt_adamw_cfg cfg;
	size_t lo, hi;           /* this rank's shard of the flat parameters */
	struct lmt_optim_range *r;   /* one per piece of a tensor (a layer's part) in [lo, hi) */
	int nr;
	uint64_t steps;          /* AdamW steps taken (skipped updates excluded) */
	float *m, *v;            /* device fp32 moments of [lo, hi): the model's own (g->m, g->v)
				  * when the shard is everything, else the optimizer's (own) */
	int own;
	/* where it reads and writes (lmt_optim_bind): parameter i at p[i - pbase],
	 * its working copy at w[i - pbase] (NULL: none kept), its gradient at
	 * gr[i - gbase]; unbound (p NULL): the model's params, wparams and grads */
	float *p, *gr;
	void *w;
	size_t pbase, gbase;
};

struct lmt_loss_scaler {
	int enabled;
	double scale, growth, backoff;
	uint64_t interval;
	uint64_t good;           /* updates in a row without an overflow */
	uint64_t overflows;      /* in all */
};

/* The optimizer over g's parameters [lo, hi) (hi = 0: all): over all of them it
 * uses the model's moments (allocating them if it has none); over a shard (ZeRO-1)
 * it holds moments for the shard only, room for cap (>= hi - lo) elements, so that
 * equal shards can be gathered. */
int lmt_optim_init(struct lmt_optim *o, struct lmt_gpt *g, const struct lmt_adamw_cfg *cfg, size_t lo, size_t hi,
		   size_t cap, struct lmt_err *err);
void lmt_optim_release(struct lmt_optim *o);
/* One AdamW step at lr with the gradient times gscale; *nonfinite_acc (device) +=
 * the count of non-finite updated parameters. */
void lmt_optim_step(struct lmt_optim *o, double lr, float gscale, double *nonfinite_acc);
/* The first tensor with a non-finite value in buf (the model's params or grads). */
const char *lmt_optim_find_nonfinite(const struct lmt_optim *o, const float *buf);
/* ZeRO-2 and -3: the master weights, their working copy and the gradients of the
 * shard in buffers of their own (see struct lmt_optim). */
void lmt_optim_bind(struct lmt_optim *o, float *p, void *w, size_t pbase, float *gr, size_t gbase);
/* The first tensor of the shard with a non-finite value in buf, whose element i
 * of the layout is buf[i - base]. */
const char *lmt_optim_find_nonfinite_shard(const struct lmt_optim *o, const float *buf, size_t base);

/* The scaler: enabled for fp16, else a scale of 1 that never changes. */
void lmt_loss_scaler_init(struct lmt_loss_scaler *s, int enabled);
/* After an update: overflow or not. Returns 1 when the scale changed. */
int lmt_loss_scaler_update(struct lmt_loss_scaler *s, int overflow);

#endif
