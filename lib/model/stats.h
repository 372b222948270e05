/*
 * stats.h: the training statistics of one update (train --stats-every N).
 *
 * For each unit of the layout (zero.h: the embeddings, each layer, the final norm
 * and head) the gradient's and the parameters' L2 norms; for each kind of
 * parameter (embedding, matrix, bias, norm) the update-to-parameter ratio
 * |p_after - p_before| / |p_after|; for each block the RMS of its output over
 * the update's last micro-batch (all ranks' positions). Gradients are unscaled
 * (fp16's loss scale divided out) and summed over the ranks, as the optimizer
 * saw them; under ZeRO each rank adds its shard's part and the parts are summed.
 *
 * The cost, on the updates it runs: one copy of this rank's shard of the
 * parameters before the optimizer (kept between stats updates: 4 bytes a
 * parameter of the shard), four passes of sums of squares (the gradients, the
 * updates, the parameters, the block outputs: each one backend call over all its
 * tensors' ranges, sumsq_ranges, rather than a call per tensor and layer, whose
 * small tensors cost more in calls than in arithmetic), and one all-reduce of
 * 2 (L + 2 + 4) + L doubles. Each parameter range's sum goes to its own slot and
 * is added into its unit's and kind's on the host, in the order the per-tensor
 * calls added them: the same figures, to the bit.
 */
#ifndef LMT_STATS_H
#define LMT_STATS_H

#include <stddef.h>

#include "comm/comm.h"
#include "core/error.h"
#include "model/model.h"

#define LMT_STATS_KINDS 4  /* enum lmt_param_kind */

struct lmt_stats {
	int L;
	double *grad_norm, *param_norm;  /* L + 2 units */
	double *act_rms;                 /* L blocks */
	double update_ratio[LMT_STATS_KINDS], kind_norm[LMT_STATS_KINDS];
	/* where the optimizer's shard lives (set by the trainer) */
	float *before;                   /* the parameters of [lo, hi) before the step */
	double *dev;                     /* device sums */
	size_t cap;
	size_t dev_bytes;                /* of dev */
};

int lmt_stats_init(struct lmt_stats *s, const struct lmt_gpt *g, struct lmt_err *err);
/* Backend bytes the statistics of g hold once they have run on a shard of `shard`
 * parameters: the device sums and the copy of the shard taken before the step
 * (memledger's "stats" term); and the bytes s holds now (train's memory.stats). */
size_t lmt_stats_bytes(const struct lmt_gpt *g, size_t shard);
size_t lmt_stats_held(const struct lmt_stats *s);
void lmt_stats_release(struct lmt_stats *s, struct lmt_backend *be);
/*
 * p: the parameters with element i at p[i - pbase] for i in [lo, hi); before the
 * step: copy them. After it, with gr the gradients the step read (gr[i - gbase],
 * times gscale_inv to unscale), the statistics, summed over comm's ranks when
 * sharded (else every rank holds the whole, identical).
 */
int lmt_stats_before(struct lmt_stats *s, const struct lmt_gpt *g, const float *p, size_t pbase, size_t lo,
		     size_t hi, struct lmt_err *err);
int lmt_stats_after(struct lmt_stats *s, const struct lmt_gpt *g, struct lmt_comm *comm, int sharded, const float *p,
		    size_t pbase, const float *gr, size_t gbase, double gscale_inv, size_t lo, size_t hi,
		    struct lmt_err *err);

#endif
