/*
 * plan.h: the layout planner and the strategy comparison.
 *
 * For G devices (K per node) the planner enumerates every dp x tp x pp x cp = G
 * with ZeRO stages 0-3 (only 0 where dp = 1), keeps those whose degrees divide what
 * they split (heads by tp, layers by pp, positions by cp, the global batch by dp
 * times the micro-batch) and whose per-device bytes (the ledger, model/ledger.h)
 * fit the memory, and predicts each one's step time:
 *
 *	compute  = flops per step / (G x peak x MFU), stretched by the pipeline
 *	           bubble (p - 1) / (m + p - 1) of m micro-batches (GPipe, 1F1B);
 *	comm     = each collective's bytes over its group's link: all-reduce moves
 *	           2 (n - 1) / n of its payload per device, all-gather and
 *	           reduce-scatter (n - 1) / n, point-to-point the payload (the ring
 *	           algorithms' bus bytes, as nccl-tests counts them), with no overlap.
 *
 * Ranks are placed tp innermost, then cp, pp, dp: a group of n ranks at stride s
 * stays inside a node when s x n <= K, and uses the intra-node bandwidth, else the
 * inter-node one. Tensor parallel groups must stay inside a node unless allowed.
 * Per step and per device:
 *	data:     ZeRO 0-2: the gradients' all-reduce (or reduce-scatter + all-gather,
 *	          the same bytes), 4 bytes (fp32) per local parameter; ZeRO-3 adds an
 *	          all-gather of the parameters in backward: 3 (n-1)/n
 *	tensor:   Megatron-LM's 4 all-reduces of (b, s/cp, C) activations per layer and
 *	          micro-batch (2 forward, 2 backward), in the compute dtype
 *	pipeline: each micro-batch's activations sent forward and their gradients back
 *	context:  ring attention's all-gather of K and V per layer in forward, their
 *	          gradients' reduce-scatter in backward
 */
#ifndef LMT_PLAN_H
#define LMT_PLAN_H

#include "core/error.h"
#include "model/ledger.h"

struct lmt_plan_opts {
	double params;           /* 0: the model's own count */
	int gpus, gpus_per_node; /* G, K */
	double memory;           /* bytes per device (0: no limit) */
	double intra_bw, inter_bw; /* bytes/s */
	double mfu, peak_flops;
	int global_batch;        /* sequences per step (0: G x B) */
	int tp_across_nodes;
	int top;
	int fix_tp, fix_pp, fix_cp; /* 0: enumerated; else only layouts of that degree */
};

struct lmt_plan_layout {
	int dp, tp, pp, cp, zero;
	int m;                   /* micro-batches per pipeline and step */
	double mem;              /* bytes per device */
	double t_compute, bubble, t_dp, t_tp, t_pp, t_cp, t_step;
	double b_dp, b_tp, b_pp, b_cp; /* bytes per device and step, by group */
	int tp_inter, dp_inter;  /* the group crosses nodes */
	const char *drop;        /* why it was dropped: one of lmt_plan_drop_reasons (NULL: it fits) */
};

/* Why a layout is dropped, in the order a report counts them. */
enum lmt_plan_drop {
	LMT_PLAN_DROP_MEMORY,
	LMT_PLAN_DROP_TP_NODES,
	LMT_PLAN_DROP_TP_HEADS,
	LMT_PLAN_DROP_PP_LAYERS,
	LMT_PLAN_DROP_CP_SEQ,
	LMT_PLAN_DROP_BATCH,
	LMT_PLAN_DROP_LEDGER,
	LMT_PLAN_DROP_COUNT,
};
extern const char *const lmt_plan_drop_reasons[LMT_PLAN_DROP_COUNT];
/* The layouts among l[0..n) dropped for each reason. */
void lmt_plan_count_dropped(const struct lmt_plan_layout *l, int n, int counts[LMT_PLAN_DROP_COUNT]);

/* The comparison's strategies: each alone at the degree of every device (a
 * nonzero dp/tp/pp/cp takes G, the others 1), with its ZeRO stage, what it shards
 * and the collective it pays for that. */
struct lmt_plan_strategy {
	const char *name, *shards, *collective;
	int dp, tp, pp, cp, zero;
};
#define LMT_PLAN_STRATEGY_COUNT 7
extern const struct lmt_plan_strategy lmt_plan_strategies[LMT_PLAN_STRATEGY_COUNT];
/* Strategy s on o->gpus devices, evaluated into l (lmt_plan_eval). */
void lmt_plan_strategy_eval(const struct lmt_ledger_cfg *c, const struct lmt_plan_opts *o,
			    const struct lmt_plan_strategy *s, struct lmt_plan_layout *l);

/* Fill o's defaults (0 fields). */
void lmt_plan_defaults(struct lmt_plan_opts *o);
/* Check o: G a multiple of K or below it, positive bandwidths, the fixed degrees
 * (and their product) dividing G. */
int lmt_plan_check(const struct lmt_plan_opts *o, struct lmt_err *err);
/* One layout's bytes and time (l's degrees set; c the model and micro-batch). */
void lmt_plan_eval(const struct lmt_ledger_cfg *c, const struct lmt_plan_opts *o, struct lmt_plan_layout *l);
/* Every layout of o->gpus devices into out (cap entries), fitting ones first by
 * step time, then the dropped ones; *n gets the count. LMT_EINVAL where o is bad
 * (lmt_plan_check) or the global batch is not a multiple of the micro-batch. */
int lmt_plan_enumerate(const struct lmt_ledger_cfg *c, const struct lmt_plan_opts *o, struct lmt_plan_layout *out,
		       int cap, int *n, struct lmt_err *err);
/* Why b loses to a, in words, into buf: the largest of its time differences. */
void lmt_plan_why(const struct lmt_plan_layout *a, const struct lmt_plan_layout *b, char *buf, size_t cap);

#endif
