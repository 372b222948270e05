/*
 * common.cuh: device helpers the kernels share: dtype loads and stores (fp32
 * compute, one rounding to nearest even on store), warp and block reductions in a
 * fixed order (so results are the same run to run), grid sizes. Static inline only.
 */
#ifndef LMT_KERNELS_COMMON_CUH
#define LMT_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "core/dtype.h"

static __device__ __forceinline__ float ld_f32(const void *p, int dt, size_t i)
{
	if (dt == LMT_DTYPE_BF16)
		return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
	if (dt == LMT_DTYPE_F16)
		return __half2float(((const __half *)p)[i]);
	if (dt == LMT_DTYPE_I32)
		return (float)((const int32_t *)p)[i];
	return ((const float *)p)[i];
}

static __device__ __forceinline__ void st_f32(void *p, int dt, size_t i, float v)
{
	if (dt == LMT_DTYPE_BF16)
		((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
	else if (dt == LMT_DTYPE_F16)
		((__half *)p)[i] = __float2half_rn(v);
	else
		((float *)p)[i] = v;
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

static __device__ __forceinline__ float gelu_f(float v)
{
	return 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
}

/* sums and maxima across a warp: every lane gets the result (xor butterfly) */
template <typename T> static __device__ __forceinline__ T warp_sum(T v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Over the whole block (blockDim.x a multiple of 32, at most 1024); every thread
 * gets the result. `sh` is 32 elements of shared memory; the block synchronises. */
template <typename T> static __device__ T block_sum(T v, T *sh)
{
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_sum(v);
	__syncthreads(); /* sh may still be read from a previous call */
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	T r = lane < nw ? sh[lane] : (T)0;
	return warp_sum(r);
}

static __device__ float block_max(float v, float *sh)
{
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	float r = lane < nw ? sh[lane] : -INFINITY;
	return warp_max(r);
}

/* blocks of `threads` for n elements, at most `cap`, striding over the rest */
static inline unsigned grid_for(size_t n, unsigned threads, unsigned cap)
{
	size_t b = (n + threads - 1) / threads;
	return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

#define GRID_STRIDE(i, n) \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

#endif
