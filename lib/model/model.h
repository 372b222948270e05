/*
 * model.h: GPT-2, written once against the backend interface (backend.h).
 *
 * The architecture is GPT-2's exactly: learned token and position embeddings,
 * L pre-LayerNorm blocks (LayerNorm, causal multi-head self-attention, residual add;
 * LayerNorm, MLP of width 4C with tanh-GELU, residual add), a final LayerNorm, and an
 * output head tied to the token embedding (or untied). The vocabulary is padded to
 * a multiple of 128 columns for fast GEMMs; the padding columns are never predicted
 * (the loss's softmax runs over the V real columns only) and their rows stay zero.
 *
 * Parameters, gradients, AdamW moments and activations each live in one allocation,
 * carved into named tensors. Parameter order and layout are llm.c's (weights are
 * (out, in), applied as x W^T), so its checkpoints import and export directly:
 *	wte (Vp, C)  wpe (maxT, C)  ln1w ln1b (L, C)  qkvw (L, 3C, C)  qkvb (L, 3C)
 *	attprojw (L, C, C)  attprojb (L, C)  ln2w ln2b (L, C)  fcw (L, 4C, C)  fcb (L, 4C)
 *	fcprojw (L, C, 4C)  fcprojb (L, C)  lnfw lnfb (C)  [lm_head (Vp, C) if untied]
 *
 * FLOPs per token (for MFU), forward and backward together, as published in the
 * PaLM paper's appendix B: 6 * Nm + 12 * L * C * T, where Nm counts the parameters
 * used in matrix multiplications (the four per-block weight matrices and the
 * output head, Vp * C; not embeddings added by lookup, biases or LayerNorm), and
 * 12 L C T counts attention's scores and weighted sums over the full T x T, as is
 * conventional even though causal attention needs about half.
 */
#ifndef LMT_MODEL_H
#define LMT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/error.h"

struct lmt_gpt_config {
	int max_T;               /* context length (wpe rows) */
	int V;                   /* real vocabulary */
	int Vp;                  /* padded vocabulary (multiple of 128, >= V) */
	int L, NH, C;
	int untied;              /* separate output head */
};

enum lmt_param_kind {
	LMT_PARAM_EMBEDDING = 0, /* wte, wpe */
	LMT_PARAM_MATRIX,        /* block weights, lm_head */
	LMT_PARAM_BIAS,
	LMT_PARAM_NORM,          /* LayerNorm gains and biases */
};

struct lmt_tensor {
	const char *name;
	size_t offset, numel;    /* into the parameter allocation, in floats */
	int kind;                /* enum lmt_param_kind */
	int ndim, shape[3];
};

#define LMT_GPT_MAX_TENSORS 17

/* Activations kept for the backward pass (see model.c for their layout). */
struct lmt_gpt_acts {
	float *encoded, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att_lse, *residual2, *ln2, *ln2_mean,
	      *ln2_rstd, *fch, *fch_gelu, *residual3, *lnf, *lnf_mean, *lnf_rstd, *logits, *losses;
	/* backward scratch */
	float *dres, *dbig, *dsmall, *dqkv;
};

struct lmt_gpt {
	struct lmt_gpt_config cfg;
	struct lmt_backend *be;
	struct lmt_tensor t[LMT_GPT_MAX_TENSORS];
	int nt;
	size_t nparams;
	float *params, *grads, *m, *v;   /* device; m, v allocated by lmt_gpt_alloc_optimizer */
	/* activations for a (B, T) micro-batch */
	int B, T;
	size_t acts_N;                   /* positions the activations were sized for (B*T at allocation) */
	float *acts_mem;
	size_t nacts;
	struct lmt_gpt_acts a;
	int32_t *tok, *tgt, *seg;        /* device inputs: N tokens, N targets (-1: none), N segment ids */
};

/* Pad V up to a multiple of 128. */
int lmt_gpt_padded_vocab(int V);
/* The model's shape checked and its tensor table laid out (names, shapes,
 * offsets, nparams) without allocating anything: what checkpoint checks and
 * memory predictions need. lmt_gpt_init does this, then allocates. */
int lmt_gpt_layout(struct lmt_gpt *g, const struct lmt_gpt_config *cfg, struct lmt_err *err);
int lmt_gpt_init(struct lmt_gpt *g, const struct lmt_gpt_config *cfg, struct lmt_backend *be,
		 struct lmt_err *err);
void lmt_gpt_release(struct lmt_gpt *g);
/* GPT-2's initialisation: N(0, 0.02) for weights, N(0, 0.02/sqrt(2L)) for the two
 * projections into the residual stream, zero biases, unit LayerNorm gains; padding
 * rows of wte zero. Deterministic from seed. */
int lmt_gpt_init_weights(struct lmt_gpt *g, uint64_t seed, struct lmt_err *err);
int lmt_gpt_alloc_optimizer(struct lmt_gpt *g, struct lmt_err *err);
/* Size the activations for micro-batches of B sequences of T positions. */
int lmt_gpt_alloc_acts(struct lmt_gpt *g, int B, int T, struct lmt_err *err);
/*
 * Run the next passes on B sequences of T positions within the activations already
 * allocated: every activation is laid out by N = B*T, so any B*T <= acts_N uses a
 * prefix of each (and of tok, tgt, seg). For evaluation in batches of varying
 * shape without reallocating. LMT_EINVAL if B*T > acts_N or T > max_T.
 */
int lmt_gpt_reshape_acts(struct lmt_gpt *g, int B, int T, struct lmt_err *err);

/*
 * Forward and backward on the current inputs (g->tok, g->tgt, g->seg: device, B*T
 * each; seg may be ignored with use_seg = 0). Per-position losses land in
 * g->a.losses; gradients are accumulated into g->grads scaled by dscale (1 /
 * valid target tokens of the whole logical batch). Returns the sum of the losses
 * of this micro-batch's valid targets (in *loss_sum) on the host.
 */
int lmt_gpt_forward(struct lmt_gpt *g, int use_seg, float dscale, double *loss_sum);
void lmt_gpt_backward(struct lmt_gpt *g, int use_seg);
/* Forward only, for evaluation: losses computed, no gradient. */
int lmt_gpt_eval(struct lmt_gpt *g, int use_seg, double *loss_sum);
/* Forward to the logits only (g->a.logits, (B*T, Vp)), for sampling. */
void lmt_gpt_logits(struct lmt_gpt *g, int use_seg);

/* Parameter counts by kind and total (the lm_head counts only when untied). */
struct lmt_gpt_counts {
	size_t embedding, matrix, bias, norm, total, padding;
};
void lmt_gpt_count(const struct lmt_gpt *g, struct lmt_gpt_counts *c);
double lmt_gpt_flops_per_token(const struct lmt_gpt_config *cfg, int T);
const struct lmt_tensor *lmt_gpt_tensor(const struct lmt_gpt *g, const char *name);

/* llm.c's model file: 256 int32 header (20240326, 3, maxT, V, L, NH, C, Vp), then
 * the parameters in the order above as fp32 (tied: no lm_head). */
int lmt_gpt_load_llmc(struct lmt_gpt *g, const char *path, struct lmt_backend *be, struct lmt_err *err);
int lmt_gpt_save_llmc(const struct lmt_gpt *g, const char *path, struct lmt_err *err);

#endif
