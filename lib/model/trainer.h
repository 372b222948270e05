/*
 * trainer.h: one optimizer update of GPT-2 training, written once above the
 * backend (operations) and the communicator (collectives).
 *
 * An update:
 *   1. takes accum micro-batches of B sequences from the loader, and builds for
 *      each position its input token, its target (the next token; -1 where the next
 *      position is padding, and with cross_doc_targets = 0 where it starts another
 *      document) and its segment number (for the attention mask);
 *   2. counts the valid targets of the whole logical batch, over every micro-batch
 *      and every rank (one all-reduce), so that the loss is
 *          sum of token cross-entropies / number of valid targets
 *      and every micro-batch's gradient is scaled by 1 / that count: accumulation
 *      gives the gradient of the whole batch's mean, not a mean of micro-batch
 *      means. Zero valid targets is an error;
 *   3. runs forward and backward per micro-batch, accumulating gradients;
 *   4. sums the gradients and the loss over the ranks: gradient buckets all-reduced
 *      as backward finishes their layers, or with ZeRO-1 one reduce-scatter, or
 *      with ZeRO-2 and -3 each layer's reduced to its owners as backward
 *      finishes it (zero.h), each rank then updating its share and the parameters
 *      all-gathered (ZeRO-3: gathered layer by layer in the next passes);
 *   5. computes the global gradient norm, checks loss, gradients and (after the
 *      step) parameters for non-finite values, clips the norm to clip once; a
 *      non-finite loss or gradient skips the update under the skip policy, a
 *      non-finite parameter (already applied) always stops. In fp16 the loss is
 *      scaled (optim.h) and a non-finite gradient is an overflow: the update is
 *      skipped and the scale backed off, under either policy;
 *   6. applies AdamW (optim.c) at the scheduler's learning rate for this update.
 *      The scheduler advances once per update, whatever accum is.
 * The loss sum, the gradients' sum of squares and the non-finite counts are added
 * into device accumulators and read by the host once after backward and once after
 * the optimizer; the backend's sticky status is checked at both points.
 *
 * Learning rate at update u (0-based), with lr_min = lr * min_lr_frac, W warm-up
 * updates and U total updates:
 *     u < W:   lr * (u + 1) / W
 *     u >= U:  lr_min
 *     else, q = (u - W) / (U - W):
 *              cosine:   lr_min + (lr - lr_min) * (1 + cos(pi q)) / 2
 *              linear:   lr - (lr - lr_min) * q
 *              constant: lr
 *
 * Weight decay applies to the weight matrices only, unless decay_embeddings (then
 * to wte, wpe too); never to biases or LayerNorm parameters.
 */
#ifndef LMT_TRAINER_H
#define LMT_TRAINER_H

#include <stdint.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "data/dataset.h"
#include "core/error.h"
#include "data/loader.h"
#include "model/model.h"
#include "model/optim.h"
#include "model/stats.h"
#include "model/zero.h"

enum lmt_schedule { LMT_SCHED_COSINE = 0, LMT_SCHED_LINEAR, LMT_SCHED_CONSTANT };
enum lmt_nonfinite { LMT_NONFINITE_STOP = 0, LMT_NONFINITE_SKIP };

struct lmt_train_cfg {
	int B, accum;
	int seg_mask;            /* attention stays within a document */
	int cross_doc_targets;   /* keep targets that cross into the next document (1: default) */
	uint64_t updates;        /* U: total updates of the run */
	double lr, min_lr_frac;
	uint64_t warmup;
	int schedule;            /* enum lmt_schedule */
	double beta1, beta2, eps, weight_decay;
	int decay_embeddings;
	double clip;             /* 0: no clipping */
	int on_nonfinite;        /* enum lmt_nonfinite */
	uint64_t seed;           /* data order (and initialisation, done by the caller) */
	uint64_t shuffle_window;
	int precision;           /* the model's compute dtype, as recorded (the model holds it) */
	int recompute_every;     /* 0: none; K: every K-th block recomputed in backward */
	double loss_scale;       /* fp16: the first loss scale (optim.h) */
	uint64_t loss_scale_window;  /* fp16: updates without overflow before the scale grows */
	size_t bucket_bytes;     /* data parallel: gradient bytes per all-reduce bucket (0: one per layer) */
	int zero;                /* ZeRO stage over the ranks: 1 AdamW's state, 2 and gradients, 3 and parameters (zero.h) */
	int prefetch;            /* ZeRO-3: gather the next layer while this one computes */
	uint64_t stats_every;    /* every N-th update (0: never) computes the statistics (stats.h) */
};

struct lmt_step_stats {
	uint64_t update;         /* the update just done (1-based count afterwards) */
	uint64_t valid_tokens, positions;
	double loss, lr, grad_norm;
	int clipped, skipped;
	double t_data, t_forward, t_backward, t_optimizer, t_comm, t_total;
	double t_stats;                /* of t_optimizer: the statistics (stats.h), on the updates that take them */
	double t_ops[LMT_OPK_COUNT];   /* the backend's time by kind of operation */
	double loss_scale;             /* the scale this update ran with (1 without scaling) */
	int overflow;                  /* fp16: a non-finite gradient, the update skipped and the scale backed off */
	const char *nonfinite_tensor;  /* set when a non-finite value was found */
	const char *nonfinite_what;    /* "loss", "gradient" or "parameter" */
	int have_stats;                /* tr->stats holds this update's statistics */
};

struct lmt_trainer {
	struct lmt_train_cfg cfg;
	struct lmt_backend *be;
	struct lmt_comm *comm;
	struct lmt_gpt *g;
	struct lmt_loader loader;
	int T;
	uint64_t update;         /* updates done */
	struct lmt_optim opt;
	size_t shard;            /* ZeRO: the parameters per rank (0: not sharded) */
	struct lmt_zero z;       /* ZeRO-2 and -3 */
	struct lmt_stats stats;  /* with stats_every */
	struct lmt_loss_scaler scaler;   /* enabled when the model computes in fp16 */
	uint64_t tokens;         /* valid target tokens consumed */
	uint64_t clipped_updates;
	struct lmt_sample *samples;      /* B * accum */
	int32_t *h_tok, *h_tgt, *h_seg;  /* host, for all accum micro-batches */
};

double lmt_lr_at(const struct lmt_train_cfg *cfg, uint64_t u);

/* The model must have activations for (cfg->B, T) with T = the dataset's seq_len. */
int lmt_trainer_init(struct lmt_trainer *tr, const struct lmt_train_cfg *cfg, struct lmt_backend *be,
		     struct lmt_comm *comm, struct lmt_gpt *g, struct lmt_dataset *d, uint64_t cursor,
		     struct lmt_err *err);
void lmt_trainer_release(struct lmt_trainer *tr);
/*
 * ZeRO's state around checkpoints (no-ops when not sharded; collectives):
 * gather puts every rank's shard of m and v into the model's full g->m, g->v (what
 * a checkpoint saves), and under ZeRO-3 the parameters into g->params; drop frees
 * those again; take copies this rank's shard out of g->m, g->v (and g->params)
 * after a restore into them, then drops them. unshard and reshard do it for the
 * parameters alone (ZeRO-3), around evaluation, sampling and exports.
 */
int lmt_trainer_gather_moments(struct lmt_trainer *tr, struct lmt_err *err);
void lmt_trainer_drop_moments(struct lmt_trainer *tr);
int lmt_trainer_take_moments(struct lmt_trainer *tr, struct lmt_err *err);
int lmt_trainer_unshard(struct lmt_trainer *tr, struct lmt_err *err);
void lmt_trainer_reshard(struct lmt_trainer *tr);
/* One optimizer update. Non-finite values stop it with LMT_ERANGE (policy stop) or
 * are recorded in st and the update skipped (policy skip). */
int lmt_trainer_step(struct lmt_trainer *tr, struct lmt_step_stats *st, struct lmt_err *err);

/* Build one micro-batch's host arrays from samples (exposed for tests). Returns the
 * number of valid targets. */
uint64_t lmt_make_batch(const struct lmt_sample *s, int B, int T, int cross_doc_targets, int32_t *tok,
			int32_t *tgt, int32_t *seg);

/* Mean loss over the first nseq sequences of a split, in manifest order (rank r of
 * the world takes every world-th); all ranks get the same figure. */
int lmt_evaluate(struct lmt_gpt *g, struct lmt_comm *comm, struct lmt_dataset *d, int split, uint64_t nseq,
		 int seg_mask, int cross_doc_targets, double *loss, uint64_t *tokens, struct lmt_err *err);

#endif
