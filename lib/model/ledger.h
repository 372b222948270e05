/*
 * ledger.h: the byte ledger of a training step, predicted before the run.
 *
 * For a model shape, micro-batch, sequence length, compute dtype, recompute policy
 * and layout, the bytes one device holds, term by term: model state (fp32 master
 * weights, the working copy in the compute dtype, fp32 gradients, AdamW's two
 * moments, ZeRO-2/3's staging), activations by group, the inputs, communication
 * buckets and allocator reserve. Nothing here has a formula of its own for what the
 * trainer allocates: parameters come from lmt_gpt_layout (the trainer's tensor
 * table), model state from lmt_state_bytes (what train reports), activations from
 * lmt_gpt_act_size (the list lmt_gpt_alloc_acts carves), so for a data-parallel
 * layout (tp = pp = cp = 1) every term equals what train allocates and reports.
 * Tensor, pipeline and context degrees, which train does not run, scale those
 * exact figures as Megatron-LM's papers describe (an estimate, marked so).
 */
#ifndef LMT_LEDGER_H
#define LMT_LEDGER_H

#include <stddef.h>

#include "core/error.h"
#include "model/model.h"
#include "model/zero.h"

struct lmt_ledger_cfg {
	struct lmt_gpt_config model; /* Vp may be 0: the padded vocabulary of V */
	int B, T;                /* micro-batch sequences, positions (T <= model.max_T) */
	int dtype;               /* compute dtype: fp32, bf16 or fp16 */
	int recompute_every;     /* 0: none; K: every K-th block (train --recompute) */
	int world, zero;         /* data-parallel ranks; ZeRO stage 0-3 */
	int tp, pp, cp;          /* tensor, pipeline, context degrees (1: none) */
	int stats_every;         /* train --stats-every (0: no statistics' buffers) */
};

enum lmt_ledger_group {
	LMT_LEDGER_STATE = 0,    /* model state: parameters, gradients, optimizer, staging */
	LMT_LEDGER_ACTS,         /* activations kept for backward, and its scratch */
	LMT_LEDGER_TEMP,         /* temporaries: the device inputs */
	LMT_LEDGER_COMM,         /* communication buckets */
	LMT_LEDGER_RESERVE,      /* allocator reserve */
	LMT_LEDGER_INFO,         /* what-ifs, not in the total */
};
extern const char *const lmt_ledger_group_names[];

struct lmt_ledger_term {
	const char *name;
	int group;               /* enum lmt_ledger_group */
	int dtype;               /* enum lmt_dtype, or -1: several */
	size_t bytes;
	const char *note;        /* static text, or NULL */
};

#define LMT_LEDGER_MAX 24

struct lmt_ledger {
	struct lmt_ledger_term t[LMT_LEDGER_MAX];
	int n;
	struct lmt_gpt_counts counts; /* parameters by kind (the trainer's count) */
	size_t nparams;
	struct lmt_state_bytes state; /* exactly train's memory counters (unscaled) */
	struct lmt_gpt_act_bytes acts, acts_none; /* at the policy; without recompute */
	size_t per_block;        /* one kept block: its slot and its output */
	size_t state_total, acts_total, total;
	size_t by_dtype[LMT_DTYPE_COUNT];
	int estimate;            /* tp, pp or cp above 1: the figures are scaled estimates */
};

/* Check c (every value in range; heads divisible by tp; layers by pp; T by cp);
 * LMT_EINVAL naming the value otherwise, LMT_ERANGE for a shape whose figures
 * would pass 2^62 bytes (size_t sums would wrap). */
int lmt_ledger_check(const struct lmt_ledger_cfg *c, struct lmt_err *err);
/* Build the ledger of c into l. */
int lmt_ledger_build(const struct lmt_ledger_cfg *c, struct lmt_ledger *l, struct lmt_err *err);
/* The bytes of term name (0 if there is none). */
size_t lmt_ledger_bytes(const struct lmt_ledger *l, const char *name);
/* The bytes of the whole ledger at micro-batch B (other values from c), for
 * searches over B; 0 on error. */
size_t lmt_ledger_total_at(const struct lmt_ledger_cfg *c, int B);

#endif
