/*
 * backend.h: every operation the model and the optimizer need, as a table of
 * function pointers, so the model, the training step and the optimizer are written
 * once and run on any backend.
 *
 * The CPU backend (backend/cpu.c: oneDNN for GEMMs, OpenMP loops for the rest) is
 * the reference; every other backend is tested against it op by op
 * (tests/unit/test-backend-ops.c). Pointers passed to these functions are device
 * pointers from be->alloc; host data moves through to_device/to_host. Tensors are
 * row-major; an operation that takes a dtype argument (enum lmt_dtype) reads or
 * writes that type there, everything else is fp32.
 *
 * Errors are sticky: an operation that fails (a GEMM the library cannot do, memory
 * for scratch) records the first failure, naming the operation, and be->status
 * reports it. The training step checks it once per update instead of after each
 * call, as a CUDA program checks its stream.
 *
 * Scalars stay on the device: reductions (sum of squares, non-finite counts, sums)
 * add into double accumulators in device memory, which the caller reads once.
 *
 * Streams and events are part of the interface so that communication can overlap
 * compute on a device: stream 0 is the compute stream, stream 1 the copy and
 * communication stream. On the CPU every operation is synchronous and they are no-ops.
 *
 * Shapes: N rows (N = B*T tokens), C channels, B sequences of T positions, NH heads
 * of HS = C/NH channels, V real vocabulary entries padded to Vp columns. Backward
 * functions accumulate (+=) into parameter gradients and overwrite (=) input
 * gradients unless documented otherwise.
 */
#ifndef LMT_BACKEND_H
#define LMT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"

/*
 * C[b] = epilogue(alpha * op(A[b]) * op(B[b]) + beta * C[b]) for b < batch, row-major;
 * op(X) is X or its transpose (ta, tb); op(A) is M x K, op(B) is K x N; lda, ldb,
 * ldc are row strides; sa, sb, sc element strides between batch entries. A and B
 * have one dtype (fp32, bf16 or fp16), C is fp32 or that dtype; products are
 * accumulated in fp32. The epilogue adds bias (N fp32 values, one per column, NULL:
 * none) and then, with gelu, applies GPT-2's tanh GELU. A backend without fast
 * kernels for a dtype still computes it (converting to fp32).
 */
struct lmt_gemm {
	int ta, tb, M, N, K;
	float alpha, beta;
	const void *A;
	int lda;
	long sa;
	const void *B;
	int ldb;
	long sb;
	void *C;
	int ldc;
	long sc;
	int batch;
	int ab_dtype, c_dtype;
	const float *bias;
	int gelu;
};

/* AdamW over one flat range (see adamw below). */
struct lmt_adamw {
	float lr, b1, b2, eps, wd, bc1, bc2;
	float gscale;            /* the gradient is grad * gscale (unscaling, clipping) */
};

/* Where time went, by kind of operation, for the step-time breakdown. */
enum lmt_op_kind {
	LMT_OPK_GEMM = 0,
	LMT_OPK_ATTENTION,
	LMT_OPK_NORM,            /* layer norms */
	LMT_OPK_OPTIMIZER,       /* AdamW, casts of the weights */
	LMT_OPK_OTHER,           /* everything else (embeddings, GELU, the loss, casts, reductions) */
};
#define LMT_OPK_COUNT 5
extern const char *const lmt_op_kind_names[LMT_OPK_COUNT];

struct lmt_backend {
	const char *name;        /* "cpu", "cuda" */
	int threads;             /* CPU: threads for loops and GEMMs */
	void *priv;
	/* capabilities */
	int is_host;             /* device pointers are host memory: a checkpoint can read them in place */
	unsigned dtypes;         /* bit (1 << dtype) for each compute dtype the backend does */
	unsigned fast_dtypes;    /* ... and for each with native GEMM kernels */
	/* bytes allocated through alloc and not yet freed, and the most ever at once
	 * (the measured peak; a caller may reset it to mem_now) */
	size_t mem_now, mem_peak;
	/* seconds spent in each kind of operation since the caller last zeroed this */
	double op_s[LMT_OPK_COUNT];

	void (*release)(struct lmt_backend *be);
	/* The first failure since the last call (0 if none), into err; clears it. */
	int (*status)(struct lmt_backend *be, struct lmt_err *err);
	/* What kernel a GEMM of this dtype runs ("brg:avx512_core_amx_bf16"), for the
	 * benchmarks and the run's record; a static string. */
	const char *(*gemm_impl)(struct lmt_backend *be, int dtype);

	/* memory; alloc returns zeroed memory or NULL; alloc_host returns host memory
	 * the device copies from fastest (pinned on a GPU) */
	void *(*alloc)(struct lmt_backend *be, size_t bytes);
	void (*free)(struct lmt_backend *be, void *p);
	void *(*alloc_host)(struct lmt_backend *be, size_t bytes);
	void (*free_host)(struct lmt_backend *be, void *p);
	void (*to_device)(struct lmt_backend *be, void *dst, const void *src, size_t bytes);
	void (*to_host)(struct lmt_backend *be, void *dst, const void *src, size_t bytes);
	/* asynchronous copies on a stream; the host buffer must stay until the stream syncs */
	void (*to_device_async)(struct lmt_backend *be, void *dst, const void *src, size_t bytes, int stream);
	void (*to_host_async)(struct lmt_backend *be, void *dst, const void *src, size_t bytes, int stream);
	void (*copy)(struct lmt_backend *be, void *dst, const void *src, size_t bytes); /* device to device */
	void (*zero)(struct lmt_backend *be, void *p, size_t bytes);
	void (*sync)(struct lmt_backend *be);
	/* events: record marks a point in a stream, wait makes a stream wait for it */
	void (*event_record)(struct lmt_backend *be, int event, int stream);
	void (*event_wait)(struct lmt_backend *be, int event, int stream);

	void (*gemm)(struct lmt_backend *be, const struct lmt_gemm *g);

	/* dst = src converted, n elements; stochastic rounding (with seed, deterministic
	 * for a seed) when sr is nonzero and dst is bf16 or fp16, else round to nearest even */
	void (*cast)(struct lmt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, size_t n,
		     int sr, uint64_t seed);

	/* out[b,t,:] = wte[tok[b,t],:] + wpe[t,:] */
	void (*embed_fwd)(struct lmt_backend *be, float *out, const int32_t *tok, const float *wte,
			  const float *wpe, int B, int T, int C);
	/* dwte[tok[b,t],:] += dout[b,t,:]; dwpe[t,:] += sum_b dout[b,t,:] */
	void (*embed_bwd)(struct lmt_backend *be, float *dwte, float *dwpe, const float *dout,
			  const int32_t *tok, int B, int T, int C);

	/* out = (inp - mean) * rstd * w + b over each row of C, written as out_dtype;
	 * statistics in fp32; saves mean, rstd (N each; either may be NULL) */
	void (*layernorm_fwd)(struct lmt_backend *be, void *out, int out_dtype, float *mean, float *rstd,
			      const float *inp, const float *w, const float *b, int N, int C);
	/* dinp += ..., dw += ..., db += ... */
	void (*layernorm_bwd)(struct lmt_backend *be, float *dinp, float *dw, float *db,
			      const float *dout, const float *inp, const float *w, const float *mean,
			      const float *rstd, int N, int C);

	/* x[n,:] += b */
	void (*bias_add)(struct lmt_backend *be, float *x, const float *b, int N, int C);
	/* db += sum_n dout[n,:] */
	void (*bias_grad)(struct lmt_backend *be, float *db, const float *dout, int N, int C);

	/* GELU, tanh approximation (GPT-2's): out = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))),
	 * written as out_dtype */
	void (*gelu_fwd)(struct lmt_backend *be, void *out, int out_dtype, const float *inp, size_t n);
	/* dinp = dout * gelu'(inp) */
	void (*gelu_bwd)(struct lmt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);

	/* out = a + b */
	void (*add)(struct lmt_backend *be, float *out, const float *a, const float *b, size_t n);
	/* y += a * x */
	void (*axpy)(struct lmt_backend *be, float *y, float a, const float *x, size_t n);

	/*
	 * Causal multi-head attention. qkv is (B, T, 3C): q, k, v for all heads; out is
	 * (B, T, C). Position i attends to j <= i, and with seg (B*T segment numbers, or
	 * NULL) only to j in the same segment. lse (B, NH, T) saves each query's
	 * log-sum-exp of scaled scores for the backward pass, which recomputes the
	 * scores blockwise instead of storing T x T probabilities. Only queries q0..T-1
	 * are computed (the earlier rows of qkv are a key/value cache): out is then
	 * (B, T - q0, C) and lse (B, NH, T - q0).
	 */
	void (*attention_fwd)(struct lmt_backend *be, float *out, float *lse, const float *qkv,
			      const int32_t *seg, int B, int T, int NH, int HS, int q0);
	/* dqkv = d(loss)/d(qkv) given dout; out and lse from the forward pass */
	void (*attention_bwd)(struct lmt_backend *be, float *dqkv, const float *dout, const float *qkv,
			      const float *out, const float *lse, const int32_t *seg, int B, int T, int NH,
			      int HS);

	/*
	 * Cross-entropy of logits (N, Vp) against targets (N; -1 = no target), over the V
	 * real columns only (padding columns are never predicted): losses[n] = -log
	 * softmax(logits[n])[target] (0 where no target), and *loss_acc (device) += their
	 * sum. In the same pass logits are replaced by their gradient, (softmax - onehot)
	 * * dscale, zero in masked rows and padding columns. A numerically stable
	 * log-softmax; the logits are never softmaxed into a separate tensor.
	 */
	void (*xent_fwd_bwd)(struct lmt_backend *be, float *losses, double *loss_acc, float *logits,
			     const int32_t *targets, int N, int V, int Vp, float dscale);

	/*
	 * AdamW with decoupled weight decay (Loshchilov & Hutter) over one flat range of
	 * n fp32 master weights p: with g = grad * gscale,
	 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
	 * p -= lr * (m / bc1 / (sqrt(v / bc2) + eps) + wd * p), where bc1 = 1 - b1^t,
	 * bc2 = 1 - b2^t. With work (not NULL) the updated p is also written there as
	 * work_dtype (the working copy the GEMMs read). *nonfinite_acc (device) += how
	 * many updated p are not finite (the check rides on the pass that writes them).
	 */
	void (*adamw)(struct lmt_backend *be, float *p, void *work, int work_dtype, const float *grad, float *m,
		      float *v, size_t n, const struct lmt_adamw *a, double *nonfinite_acc);

	/* acc[0] += sum of squares (in double), acc[1] += count of non-finite x, over x[0..n);
	 * acc in device memory */
	void (*sumsq)(struct lmt_backend *be, double *acc, const float *x, size_t n);
	/* many sumsq in one pass: for i < n, range i, x[off[i] .. off[i] + len[i]), adds into
	 * acc[2 slot[i]] and acc[2 slot[i] + 1] what sumsq would (the same sums, to
	 * the bit); off, len and slot in host memory, acc in device memory. NULL: the
	 * caller loops over sumsq */
	void (*sumsq_ranges)(struct lmt_backend *be, double *acc, const float *x, const size_t *off, const size_t *len,
			     const int *slot, int n);
	/* x *= s */
	void (*scale)(struct lmt_backend *be, float *x, float s, size_t n);
};

/* Open the backend called name ("cpu"; NULL means "cpu") with `threads` threads for
 * its host loops (0: all cores); an unknown name is an LMT_EINVAL naming the ones
 * this build has. lmt_backend_names: those names, space-separated. */
int lmt_backend_open(struct lmt_backend *be, const char *name, int threads, struct lmt_err *err);
const char *lmt_backend_names(void);
/* One line describing the CUDA side: "not built", or the runtime version and the
 * number of devices visible now (0 when no driver or GPU is present). */
const char *lmt_backend_cuda_status(void);

/* Best GEMM FLOP/s on this backend in dtype (for MFU): measured at each call (products
 * of 1024^3, a fraction of a second) and, unless cache is 0, the best ever measured on
 * this machine, thread count and kernel, kept in $XDG_CACHE_HOME/lmt (or
 * ~/.cache/lmt): a measurement taken while other work shared the cores is low. */
double lmt_backend_peak_flops(struct lmt_backend *be, int dtype, int cache);

#endif
