/*
 * backend.h: every operation the model and the optimizer need, as a table of
 * function pointers, so the model, the training step and the optimizer are written
 * once and run on any backend.
 *
 * The CPU backend (backend/cpu.c: OpenBLAS for GEMMs, OpenMP loops for the rest) is
 * the reference; every other backend is tested against it op by op. Pointers passed
 * to these functions are device pointers from be->alloc; host data moves through
 * to_device/to_host. All tensors are row-major fp32 unless named otherwise.
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

#include "core/error.h"

struct lmt_backend {
	const char *name;        /* "cpu", "cuda" */
	int threads;             /* CPU: threads for loops and GEMMs */
	void *priv;

	void (*release)(struct lmt_backend *be);

	/* memory; alloc returns zeroed memory or NULL */
	void *(*alloc)(struct lmt_backend *be, size_t bytes);
	void (*free)(struct lmt_backend *be, void *p);
	void (*to_device)(struct lmt_backend *be, void *dst, const void *src, size_t bytes);
	void (*to_host)(struct lmt_backend *be, void *dst, const void *src, size_t bytes);
	void (*copy)(struct lmt_backend *be, void *dst, const void *src, size_t bytes); /* device to device */
	void (*zero)(struct lmt_backend *be, void *p, size_t bytes);
	void (*sync)(struct lmt_backend *be);

	/*
	 * C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b < batch, row-major;
	 * op(X) is X or its transpose (ta, tb); op(A) is M x K, op(B) is K x N; lda, ldb,
	 * ldc are row strides; sa, sb, sc element strides between batch entries.
	 */
	void (*gemm)(struct lmt_backend *be, int ta, int tb, int M, int N, int K, float alpha,
		     const float *A, int lda, long sa, const float *B, int ldb, long sb, float beta,
		     float *C, int ldc, long sc, int batch);

	/* out[b,t,:] = wte[tok[b,t],:] + wpe[t,:] */
	void (*embed_fwd)(struct lmt_backend *be, float *out, const int32_t *tok, const float *wte,
			  const float *wpe, int B, int T, int C);
	/* dwte[tok[b,t],:] += dout[b,t,:]; dwpe[t,:] += sum_b dout[b,t,:] */
	void (*embed_bwd)(struct lmt_backend *be, float *dwte, float *dwpe, const float *dout,
			  const int32_t *tok, int B, int T, int C);

	/* out = (inp - mean) * rstd * w + b over each row of C; saves mean, rstd (N each) */
	void (*layernorm_fwd)(struct lmt_backend *be, float *out, float *mean, float *rstd,
			      const float *inp, const float *w, const float *b, int N, int C);
	/* dinp += ..., dw += ..., db += ... */
	void (*layernorm_bwd)(struct lmt_backend *be, float *dinp, float *dw, float *db,
			      const float *dout, const float *inp, const float *w, const float *mean,
			      const float *rstd, int N, int C);

	/* x[n,:] += b */
	void (*bias_add)(struct lmt_backend *be, float *x, const float *b, int N, int C);
	/* db += sum_n dout[n,:] */
	void (*bias_grad)(struct lmt_backend *be, float *db, const float *dout, int N, int C);

	/* GELU, tanh approximation (GPT-2's): out = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */
	void (*gelu_fwd)(struct lmt_backend *be, float *out, const float *inp, size_t n);
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
	 * scores blockwise instead of storing T x T probabilities.
	 */
	void (*attention_fwd)(struct lmt_backend *be, float *out, float *lse, const float *qkv,
			      const int32_t *seg, int B, int T, int NH, int HS);
	/* dqkv = d(loss)/d(qkv) given dout; out and lse from the forward pass */
	void (*attention_bwd)(struct lmt_backend *be, float *dqkv, const float *dout, const float *qkv,
			      const float *out, const float *lse, const int32_t *seg, int B, int T, int NH,
			      int HS);

	/*
	 * Cross-entropy of logits (N, Vp) against targets (N; -1 = no target), over the V
	 * real columns only (padding columns are never predicted): losses[n] = -log
	 * softmax(logits[n])[target] (0 where no target). In the same pass logits are
	 * replaced by their gradient, (softmax - onehot) * dscale, zero in masked rows
	 * and padding columns. A numerically stable log-softmax; the logits are never
	 * softmaxed into a separate tensor.
	 */
	void (*xent_fwd_bwd)(struct lmt_backend *be, float *losses, float *logits, const int32_t *targets,
			     int N, int V, int Vp, float dscale);

	/*
	 * AdamW with decoupled weight decay (Loshchilov & Hutter): with g = grad * gscale,
	 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
	 * p -= lr * (m / bc1 / (sqrt(v / bc2) + eps) + wd * p), where bc1 = 1 - b1^t,
	 * bc2 = 1 - b2^t. Returns how many of the updated p are not finite (the check
	 * rides on the pass that writes them).
	 */
	size_t (*adamw)(struct lmt_backend *be, float *p, const float *grad, float *m, float *v, size_t n,
		      float lr, float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale);

	/* sum of squares (accumulated in double) and non-finite count of x[0..n) */
	double (*sumsq)(struct lmt_backend *be, const float *x, size_t n);
	size_t (*nonfinite)(struct lmt_backend *be, const float *x, size_t n);
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

/* Best sgemm FLOP/s on this backend (for MFU): measured at each call (5 products of
 * 1024^3, a fraction of a second) and, unless cache is 0, the best ever measured on
 * this machine, thread count and OpenBLAS core, kept in $XDG_CACHE_HOME/lmt (or
 * ~/.cache/lmt): a measurement taken while other work shared the cores is low. */
double lmt_backend_peak_flops(struct lmt_backend *be, int cache);

#endif
