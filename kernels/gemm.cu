/*
 * gemm.cu: struct lmt_gemm (backend.h) by a plain shared-memory tiled kernel:
 * 16 x 16 tiles of C per block, fp32 accumulation over K in order, any
 * transposes, strides, batch strides (0: shared) and dtypes, then beta C, the
 * bias and GELU, one rounding into C's dtype. Slow next to cuBLASLt and meant to
 * be: it is the fallback for a case cuBLASLt has no algorithm for, and the second
 * opinion (LMT_CUDA_GEMM=naive) when a cuBLASLt result is in doubt on a new GPU.
 */
#include "common.cuh"
#include "kernels.h"

#define TILE 16

struct gp {
	int ta, tb, M, N, K, lda, ldb, ldc, abt, ct, gelu;
	long sa, sb, sc;
	float alpha, beta;
	const void *A, *B;
	void *C;
	const float *bias;
};

static __global__ void k_gemm(struct gp g)
{
	__shared__ float As[TILE][TILE + 1], Bs[TILE][TILE + 1];
	int b = blockIdx.z, i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
	size_t oa = (size_t)b * g.sa, ob = (size_t)b * g.sb;
	float acc = 0;
	for (int k0 = 0; k0 < g.K; k0 += TILE) {
		/* As[y][x] = op(A)[i][k0 + x]; Bs[y][x] = op(B)[k0 + y][j] */
		int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
		float a = 0, bb = 0;
		if (i < g.M && ka < g.K)
			a = ld_f32(g.A, g.abt, oa + (g.ta ? (size_t)ka * g.lda + i : (size_t)i * g.lda + ka));
		if (j < g.N && kb < g.K)
			bb = ld_f32(g.B, g.abt, ob + (g.tb ? (size_t)j * g.ldb + kb : (size_t)kb * g.ldb + j));
		As[threadIdx.y][threadIdx.x] = a;
		Bs[threadIdx.y][threadIdx.x] = bb;
		__syncthreads();
		int kn = g.K - k0 < TILE ? g.K - k0 : TILE;
		for (int k = 0; k < kn; k++)
			acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
		__syncthreads();
	}
	if (i >= g.M || j >= g.N)
		return;
	size_t oc = (size_t)b * g.sc + (size_t)i * g.ldc + j;
	float pre = g.alpha * acc;
	if (g.beta != 0.0f) /* beta 0: C is not read (it may be NaN) */
		pre += g.beta * ld_f32(g.C, g.ct, oc);
	if (g.bias)
		pre += g.bias[j];
	st_f32(g.C, g.ct, oc, g.gelu ? gelu_f(pre) : pre);
}

extern "C" int lmt_k_gemm_naive(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, long sa,
				const void *B, int ldb, long sb, float beta, void *C, int ldc, long sc, int batch,
				int ab_dtype, int c_dtype, const float *bias, int gelu, void *stream)
{
	if (M <= 0 || N <= 0 || batch <= 0)
		return 0;
	struct gp g = { ta, tb, M, N, K, lda, ldb, ldc, ab_dtype, c_dtype, gelu, sa, sb, sc, alpha, beta, A, B, C, bias };
	dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE), (unsigned)batch);
	k_gemm<<<grid, dim3(TILE, TILE), 0, (cudaStream_t)stream>>>(g);
	return (int)cudaGetLastError();
}
