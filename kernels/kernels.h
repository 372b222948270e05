/*
 * kernels.h: the C entry points of the cuda backend's own kernels (the .cu files here),
 * one group per file. lib/backend/cuda.c is their only caller.
 *
 * Every launcher takes the stream to run on as a void * (a cudaStream_t, so that C
 * callers need no CUDA header), launches and returns cudaGetLastError() as an int
 * (0: launched). Pointers are device pointers; dtypes are enum lmt_dtype values.
 * The semantics are backend.h's for the operation of the same name (accumulate or
 * overwrite, what is saved); a "scratch" argument is device memory the caller
 * provides, of the size the launcher's *_scratch function names.
 *
 * Determinism: no launcher uses floating-point atomics on a value whose order
 * matters; reductions go through fixed grids and fixed trees, so two runs on the
 * same GPU give the same bits (the only atomics add integer counts, exactly).
 */
#ifndef LMT_KERNELS_H
#define LMT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cast.cu: dst = src converted; stochastic rounding to bf16/fp16 when sr (the CPU
 * backend's hash of (seed, index), so the same bits as the CPU backend) */
int lmt_k_cast(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n, int sr, uint64_t seed,
	       void *stream);

/* elementwise.cu */
int lmt_k_gelu_fwd(void *out, int out_dtype, const float *inp, size_t n, void *stream);
int lmt_k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n, void *stream);
int lmt_k_add(float *out, const float *a, const float *b, size_t n, void *stream);
int lmt_k_axpy(float *y, float a, const float *x, size_t n, void *stream);
int lmt_k_scale(float *x, float s, size_t n, void *stream);
int lmt_k_bias_add(float *x, const float *b, int N, int C, void *stream);
/*
 * The GEMM epilogue cuBLASLt is not asked for: over batch x M x N elements of C
 * (row stride ldc, batch stride sc, c_dtype), pre = D[b*sd + i*ldd + j] + beta*C +
 * bias[j] when D (fp32) is given, else pre = C + bias[j] (in place, for an fp32 C);
 * bias NULL: none; then GPT-2's tanh GELU when gelu; stored into C as c_dtype.
 */
int lmt_k_gemm_epilogue(void *C, int c_dtype, int ldc, long sc, const float *D, int ldd, long sd, float beta,
			const float *bias, int gelu, int M, int N, int batch, void *stream);

/* gemm.cu: struct lmt_gemm's full semantics by a plain tiled kernel (fp32
 * accumulation, any strides and dtypes): the fallback where cuBLASLt has no
 * algorithm for a case, and a second opinion when debugging (LMT_CUDA_GEMM=naive) */
int lmt_k_gemm_naive(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, long sa,
		     const void *B, int ldb, long sb, float beta, void *C, int ldc, long sc, int batch, int ab_dtype,
		     int c_dtype, const float *bias, int gelu, void *stream);

/* reduce.cu */
/* floats of scratch lmt_k_bias_grad needs for N rows of C */
size_t lmt_k_colsum_scratch(int N, int C);
int lmt_k_bias_grad(float *db, const float *dout, int N, int C, float *scratch, void *stream);
/* doubles of scratch lmt_k_sumsq needs */
size_t lmt_k_sumsq_scratch(void);
int lmt_k_sumsq(double *acc, const float *x, size_t n, double *scratch, void *stream);
/* *acc += sum of x[0..n) in double, in a fixed order */
int lmt_k_sum_to_double(double *acc, const float *x, int n, void *stream);

/* embed.cu */
int lmt_k_embed_fwd(float *out, const int32_t *tok, const float *wte, const float *wpe, int B, int T, int C,
		    void *stream);
int lmt_k_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B, int T, int C,
		    void *stream);

/* layernorm.cu; the backward pass takes 2 * lmt_k_colsum_scratch(N, C) floats */
int lmt_k_layernorm_fwd(void *out, int out_dtype, float *mean, float *rstd, const float *inp, const float *w,
			const float *b, int N, int C, void *stream);
int lmt_k_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
			const float *mean, const float *rstd, int N, int C, float *scratch, void *stream);

/* attention.cu: head sizes up to LMT_K_ATTN_MAX_HS; the backward pass takes
 * B*NH*T floats of scratch (each query's dot(dout, out)) */
#define LMT_K_ATTN_MAX_HS 256
int lmt_k_attention_fwd(float *out, float *lse, const float *qkv, const int32_t *seg, int B, int T, int NH, int HS,
			int q0, void *stream);
int lmt_k_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
			const int32_t *seg, int B, int T, int NH, int HS, float *scratch, void *stream);

/* xent.cu */
int lmt_k_xent_fwd_bwd(float *losses, double *loss_acc, float *logits, const int32_t *targets, int N, int V,
		       int Vp, float dscale, void *stream);

/* adamw.cu: ib1 = 1 / bc1, ib2 = 1 / bc2 (computed by the caller as the CPU backend
 * does, so both round the same) */
int lmt_k_adamw(float *p, void *work, int work_dtype, const float *grad, float *m, float *v, size_t n, float lr,
		float b1, float b2, float eps, float wd, float ib1, float ib2, float gscale, double *nonfinite_acc,
		void *stream);

#ifdef __cplusplus
}
#endif

#endif
