/*
 * zero.h: ZeRO-2 and ZeRO-3 over ZeRO-1's flat shards.
 *
 * The flat layout is cut into world equal shards of S = ceil(nparams / world)
 * elements; rank r owns [r S, min(nparams, (r + 1) S)) of the AdamW moments (ZeRO-1),
 * of the summed gradients (ZeRO-2) and of the fp32 master weights (ZeRO-3).
 *
 * ZeRO-2: backward writes each layer's gradients into one of two layer slots
 * (lmt_gpt_unit.g); as soon as the layer is done its slot is reduce-scattered to
 * the ranks whose shards the layer's range meets (reduce_scatterv: one or two
 * owners) and each owner adds its part into its gradient shard, while backward
 * goes on with the other slot. The units before and after the layers (the
 * embeddings, the final norm, the head), whose gradients backward writes at its
 * first and last step (a tied wte at both), are whole on every rank for the
 * micro-batch and reduced after it, in pieces of a layer's size. Every
 * micro-batch is reduced so (accumulation adds into the shard). The parameters
 * stay whole (all-gathered after the step, as ZeRO-1).
 *
 * ZeRO-3 (FSDP): at rest a rank holds only its shard of the master weights. The
 * forward pass gathers the outer units once per update (kept for backward) and
 * each layer into one of two parameter slots (all-gatherv from the owners, then
 * cast to the compute dtype), again in backward; with prefetch the next layer's
 * gather is started while this one computes. A slot that still holds the layer
 * (the last of forward is the first of backward) is used again. Evaluation,
 * sampling and checkpoints need every parameter: lmt_zero_unshard gathers them
 * into the model's params (and working copy) for that time, lmt_zero_reshard
 * frees them again.
 *
 * The uneven parts cost what even ones would in bytes moved (each rank receives
 * what it does not own, once), with fewer ranks sending each part than an
 * FSDP unit padded per layer would have; the payoff is one sharding for ZeRO-1,
 * 2 and 3, so checkpoints gather the same way.
 */
#ifndef LMT_ZERO_H
#define LMT_ZERO_H

#include <stddef.h>

#include "comm/comm.h"
#include "core/error.h"
#include "model/model.h"

struct lmt_zero {
	struct lmt_gpt *g;
	struct lmt_comm *comm;
	int stage, prefetch;
	size_t S, lo, hi;        /* the shard [lo, hi) (hi <= nparams), S elements with its padding */
	size_t ls, n0, n1, end;  /* a layer's size; unit 0's size; unit L + 1's size and offset */
	struct lmt_gpt_unit *units;      /* the model's units while sharded */
	/* ZeRO-2 and -3: gradients */
	float *gshard, *outer_g, *gslot[2], *rslot[2];
	struct lmt_comm_req *greq[2];
	size_t *gcounts[2], rat[2], rn[2];   /* a slot's parts, and where its received part goes */
	int gunit[2], gnext;
	/* ZeRO-3: parameters */
	float *pshard, *outer_p, *pslot[2];
	void *outer_w, *wslot[2];
	struct lmt_comm_req *preq[2];
	size_t *pcounts[2];
	int punit[2], pcast[2], pcur, outer_ok, full;
	size_t staging;          /* bytes of the slots and outer units */
	double t_wait;           /* seconds spent waiting for collectives (exposed; inside the passes) */
	int failed;              /* a hook's collective failed: err says how */
	struct lmt_err err;
};

/*
 * A rank's bytes of model state at rest under ZeRO stage zero on world ranks
 * (zero is ignored on one rank), as the trainer allocates them: the fp32 master
 * weights, the working copy in the compute dtype (none in fp32), the fp32
 * gradients, the AdamW moments, and the staging of stages 2 and 3 (the outer
 * units' gradients, two layer gradient slots and two receive slots; stage 3 adds
 * the outer units' parameters and two layer parameter slots, in fp32 and the
 * compute dtype).
 */
struct lmt_state_bytes {
	size_t params, working, grads, optimizer, staging;
};
void lmt_state_bytes(const struct lmt_gpt *g, int zero, int world, struct lmt_state_bytes *b);

/* Set up stage 2 or 3 for g (its params whole, padded to S * world). Stage 3
 * copies this rank's shard out of g->params and stays unsharded (full) until the
 * first lmt_zero_reshard. Installs the model's units and hooks. */
int lmt_zero_init(struct lmt_zero *z, struct lmt_gpt *g, struct lmt_comm *comm, int stage, int prefetch, size_t S,
		  struct lmt_err *err);
void lmt_zero_release(struct lmt_zero *z);
/* Before an update: the gradient shard zeroed. Before each micro-batch's backward:
 * the outer gradients zeroed. After it: every reduction done and added. */
void lmt_zero_begin_update(struct lmt_zero *z);
void lmt_zero_begin_backward(struct lmt_zero *z);
int lmt_zero_end_backward(struct lmt_zero *z, struct lmt_err *err);
/* After the optimizer changed the master shard (stage 3): gathered copies are stale. */
void lmt_zero_params_changed(struct lmt_zero *z);
/* Stage 3 (collective; no-ops otherwise): every parameter into g->params and the
 * working copy, hooks off; and back. */
int lmt_zero_unshard(struct lmt_zero *z, struct lmt_err *err);
void lmt_zero_reshard(struct lmt_zero *z);
/* Stage 3, after g->params was written whole (a restore): take the shard again. */
void lmt_zero_take_params(struct lmt_zero *z);

#endif
