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
 * carved into named tensors. On the device the parameters (and gradients and
 * moments) are layer-major: wte, wpe, then each layer's twelve tensors together,
 * then lnfw, lnfb [, lm_head], so that one layer's gradients are one contiguous
 * range (a data-parallel bucket, a ZeRO shard); lmt_gpt_layer_range says where.
 * Everything that leaves the device (checkpoints, llm.c's files, exports) is in the
 * canonical order, llm.c's, tensor by tensor (weights are (out, in), applied as
 * x W^T), through lmt_gpt_gather and lmt_gpt_scatter:
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
#include "core/dtype.h"
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
	size_t offset, numel;    /* in the canonical (tensor-major, llm.c's) order, in floats */
	int kind;                /* enum lmt_param_kind */
	int ndim, shape[3];
	/* where it is in the device allocations, which are layer-major: a layered
	 * tensor (shape[0] = L) is L pieces of lnumel floats, layer l's at
	 * dev + l * lstride; an unlayered one is one piece at dev (lstride 0) */
	int layered;
	size_t dev, lstride, lnumel;
};

#define LMT_GPT_MAX_TENSORS 17

/*
 * Units of the device layout, for ZeRO-2 and -3 (one unit's parameters gathered,
 * its gradients reduced, at a time): unit 0 is what comes before the layers (wte,
 * wpe), unit l + 1 is layer l, unit L + 1 what follows them (lnfw, lnfb [,
 * lm_head]). lmt_gpt_unit_range says where each is. A unit whose p, w or g is
 * set has that copy of its parameters, working weights or gradients there (the
 * unit's first element first) instead of in params, wparams or grads: the passes
 * read and write through these. NULL: in the whole buffers.
 */
struct lmt_gpt_unit {
	float *p, *g;
	void *w;
};
enum { LMT_GPT_FETCH_FORWARD = 0, LMT_GPT_FETCH_BACKWARD };

/*
 * One block's activations for `rows` positions: what its backward pass reads. The
 * inputs of GEMMs (ln1, atty_lp, ln2, fchg) are in the model's compute dtype
 * (act_dtype); the rest is fp32. atty_lp is atty itself when that dtype is fp32.
 */
struct lmt_gpt_slot {
	void *ln1, *ln2, *fchg, *atty_lp;
	float *ln1_mean, *ln1_rstd, *qkv, *atty, *att_lse, *residual2, *ln2_mean, *ln2_rstd, *fch;
};

/* Recompute policies (lmt_gpt_set_recompute). */
enum lmt_recompute { LMT_RECOMPUTE_NONE = 0, LMT_RECOMPUTE_EVERY };

/* Activations kept for the backward pass (see model.c for their layout). */
struct lmt_gpt_acts {
	float *encoded;          /* block 0's input */
	float *residual3;        /* (L, N, C): block l's output (block l+1's input) */
	struct lmt_gpt_slot *slot;   /* per layer; recomputed layers share one */
	struct lmt_gpt_slot rc;      /* the recompute slot */
	void *lnf;
	float *lnf_mean, *lnf_rstd, *logits, *losses;
	/* backward scratch; dlp: a gradient cast to the compute dtype for the GEMMs */
	float *dres, *dbig, *dsmall, *dqkv;
	void *dlp;
	double *scalars;         /* device: the loss sum and other accumulators (LMT_GPT_SCALARS) */
};
#define LMT_GPT_SCALARS 8

/* The groups of the activations, in the order they are carved (model.c). */
enum lmt_gpt_act_group {
	LMT_ACT_INPUTS = 0,      /* encoded and residual3: every block's input, always kept */
	LMT_ACT_BLOCKS,          /* the slots of the blocks not recomputed */
	LMT_ACT_RECOMPUTE,       /* the one slot the recomputed blocks share */
	LMT_ACT_HEAD,            /* the final layer norm's output and statistics */
	LMT_ACT_LOGITS,          /* logits (N, Vp) and the per-position losses */
	LMT_ACT_SCRATCH,         /* backward's gradient scratch */
	LMT_ACT_SCALARS,         /* the device accumulators */
};
#define LMT_ACT_GROUPS 7

/* Activation bytes by dtype (index enum lmt_dtype), by group and in all; slot:
 * one block's slot; kept: the blocks with a slot of their own. */
struct lmt_gpt_act_bytes {
	size_t by_dtype[LMT_DTYPE_COUNT], total;
	size_t group[LMT_ACT_GROUPS], slot;
	int kept;
};

struct lmt_gpt {
	struct lmt_gpt_config cfg;
	struct lmt_backend *be;
	struct lmt_tensor t[LMT_GPT_MAX_TENSORS];
	int nt;
	size_t nparams;
	size_t padded;                   /* 0, or the elements params, grads and wparams hold (lmt_gpt_pad) */
	float *params, *grads, *m, *v;   /* device; m, v allocated by lmt_gpt_alloc_optimizer */
	/* compute precision: the GEMMs read wparams (a copy of params in dtype; params
	 * itself for fp32) and GEMM inputs are stored in dtype */
	int dtype;
	void *wparams;
	int recompute;                   /* enum lmt_recompute */
	/* called in backward as soon as layer l's gradients are complete, with its
	 * range in the layout (lmt_gpt_layer_range); NULL: none */
	void (*grads_ready)(void *ctx, int layer, size_t offset, size_t count);
	void *grads_ready_ctx;
	/* units (NULL: none; else L + 2 of them, see above) and the hook the passes
	 * call before they read a unit's parameters (the forward pass: units 0 and
	 * L + 1 first, then each layer's; backward: each layer's, before its
	 * recompute, and before its gradients are written), which may gather them and
	 * point the unit at them (NULL: none) */
	struct lmt_gpt_unit *unit;
	void (*fetch)(void *ctx, int unit, int phase);
	void *fetch_ctx;
	int recompute_every;             /* K: block l is recomputed when l % K == 0 */
	/* activations for a (B, T) micro-batch */
	int B, T;
	size_t acts_N;                   /* positions the activations were sized for (B*T at allocation) */
	void *acts_mem;
	size_t nacts;                    /* bytes */
	struct lmt_gpt_act_bytes act_bytes;
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
/*
 * Compute in dtype (fp32, bf16, fp16): allocates the working copy of the weights and
 * fills it from params. Call before lmt_gpt_alloc_acts. After writing params
 * directly (loading, initialising), call lmt_gpt_sync_weights; the optimizer
 * refreshes the copy as it updates.
 */
int lmt_gpt_set_precision(struct lmt_gpt *g, int dtype, struct lmt_err *err);
/* Give params, grads and the working copy room for total elements (zeros past
 * nparams), so that world equal shards tile them (ZeRO); contents kept. */
int lmt_gpt_pad(struct lmt_gpt *g, size_t total, struct lmt_err *err);
void lmt_gpt_sync_weights(struct lmt_gpt *g);
/* Keep only each block's input and recompute it in backward: every K-th block
 * (K = 1: every block; 0: none). Call before lmt_gpt_alloc_acts. */
int lmt_gpt_set_recompute(struct lmt_gpt *g, int every, struct lmt_err *err);
/* Would block l be recomputed? */
int lmt_gpt_recomputed(const struct lmt_gpt *g, int l);
/* Size the activations for micro-batches of B sequences of T positions. */
int lmt_gpt_alloc_acts(struct lmt_gpt *g, int B, int T, struct lmt_err *err);
/* The bytes lmt_gpt_alloc_acts would allocate for (B, T) at g's dtype and
 * recompute policy, by the same code: g needs only lmt_gpt_layout, g->dtype and
 * lmt_gpt_set_recompute (no backend, nothing allocated). The inputs (tok, tgt,
 * seg: 3 * B * T int32) are allocated beside them and are not counted here. */
int lmt_gpt_act_size(const struct lmt_gpt *g, int B, int T, struct lmt_gpt_act_bytes *b, struct lmt_err *err);
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
 * g->a.losses and their sum is added to the device accumulator *loss_acc (NULL:
 * none); gradients are accumulated into g->grads scaled by dscale (1 / valid target
 * tokens of the whole logical batch, times the loss scale). Errors surface in the
 * backend's status.
 */
void lmt_gpt_forward(struct lmt_gpt *g, int use_seg, float dscale, double *loss_acc);
void lmt_gpt_backward(struct lmt_gpt *g, int use_seg);
/* Forward only, for evaluation: losses computed, no gradient; their sum read back
 * into *loss_sum (host). */
int lmt_gpt_eval(struct lmt_gpt *g, int use_seg, double *loss_sum);
/* Forward to the logits only (g->a.logits, (B*T, Vp)), for sampling. */
void lmt_gpt_logits(struct lmt_gpt *g, int use_seg);

/*
 * One block's forward pass: the one function behind training's forward, recompute
 * and the sampler's key/value-cache step. x_in holds the block's input for rows
 * q0..T-1 of each of B sequences ((T - q0) rows each); qkv is (B, T, 3C) and rows
 * q0.. of it are computed here (the rows before q0 are a cache filled earlier);
 * attention runs for queries q0..T-1 over keys 0..i. x_out (NULL: not computed, as
 * in recompute) gets the block's output. seg: segment ids (B*T) or NULL.
 */
void lmt_gpt_block_fwd(struct lmt_gpt *g, int l, const struct lmt_gpt_slot *s, float *qkv, const float *x_in,
		       float *x_out, const int32_t *seg, int B, int T, int q0);
/* The final layer norm of x (N rows) into lnf (dtype; mean, rstd may be NULL) and
 * the output head: logits (N, Vp) fp32. */
void lmt_gpt_head_fwd(struct lmt_gpt *g, float *logits, const float *x, void *lnf, float *mean, float *rstd, int N);
/* A slot for `rows` positions in dtype, carved from one allocation (*mem, which the
 * caller frees with be->free); *bytes gets its size. */
int lmt_gpt_slot_alloc(struct lmt_gpt *g, struct lmt_gpt_slot *s, size_t rows, void **mem, size_t *bytes,
		       struct lmt_err *err);
/* The device pointer of tensor name in the working copy (dtype g->dtype). */
const void *lmt_gpt_wparam(const struct lmt_gpt *g, const char *name);

/* Parameter counts by kind and total (the lm_head counts only when untied). */
struct lmt_gpt_counts {
	size_t embedding, matrix, bias, norm, total, padding;
};
void lmt_gpt_count(const struct lmt_gpt *g, struct lmt_gpt_counts *c);
double lmt_gpt_flops_per_token(const struct lmt_gpt_config *cfg, int T);
const struct lmt_tensor *lmt_gpt_tensor(const struct lmt_gpt *g, const char *name);
/* The device pointer of layer l of tensor name (l = 0 for an unlayered one) in buf,
 * one of g->params, g->grads, g->m, g->v. */
float *lmt_gpt_piece(const struct lmt_gpt *g, float *buf, const char *name, int l);
/* A device buffer of nparams floats (params, grads, m, v) to or from the canonical
 * order in host memory. */
void lmt_gpt_gather(const struct lmt_gpt *g, float *host, const float *dev);
void lmt_gpt_scatter(const struct lmt_gpt *g, float *dev, const float *host);
/* Layer l's contiguous range [*offset, *offset + return) of the device layout. */
size_t lmt_gpt_layer_range(const struct lmt_gpt *g, int l, size_t *offset);
/* Unit u's range (0 <= u <= L + 1; see struct lmt_gpt_unit), the same way. */
size_t lmt_gpt_unit_range(const struct lmt_gpt *g, int u, size_t *offset);

/* llm.c's model file: 256 int32 header (20240326, 3, maxT, V, L, NH, C, Vp), then
 * the parameters in the order above as fp32 (tied: no lm_head). */
int lmt_gpt_load_llmc(struct lmt_gpt *g, const char *path, struct lmt_backend *be, struct lmt_err *err);
int lmt_gpt_save_llmc(const struct lmt_gpt *g, const char *path, struct lmt_err *err);

#endif
