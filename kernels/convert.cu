/*
 * convert.cu: the nccl communicator's conversions around its fp32 reductions
 * (lib/comm/nccl.c): bf16, fp16 and uint8 to an fp32 device buffer and back,
 * dividing on the way back for an average, so that a reduction in those types
 * sums in fp32 and rounds once, as comm.h says. Round to nearest even (CUDA's
 * _rn conversions); uint8 back is the sum modulo 256, an average truncated.
 *
 * Launched on the caller's stream (a cudaStream_t passed as void *, so that C
 * callers need no CUDA header); the return is a cudaError_t, 0 for success.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/dtype.h"

static __global__ void to_f32(float *dst, const void *src, size_t n, int dtype)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		if (dtype == LMT_DTYPE_BF16)
			dst[i] = __bfloat162float(((const __nv_bfloat16 *)src)[i]);
		else if (dtype == LMT_DTYPE_F16)
			dst[i] = __half2float(((const __half *)src)[i]);
		else
			dst[i] = (float)((const uint8_t *)src)[i];
	}
}

static __global__ void from_f32(void *dst, const float *src, size_t n, int dtype, float divisor)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float v = divisor != 1.0f ? src[i] / divisor : src[i];
		if (dtype == LMT_DTYPE_BF16)
			((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(v);
		else if (dtype == LMT_DTYPE_F16)
			((__half *)dst)[i] = __float2half_rn(v);
		else
			((uint8_t *)dst)[i] = (uint8_t)(uint32_t)v;
	}
}

/* a grid of at most 1024 blocks of 256 threads, striding over the rest */
static unsigned blocks(size_t n)
{
	size_t b = (n + 255) / 256;
	return (unsigned)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

extern "C" int lmt_cuda_to_f32(float *dst, const void *src, size_t n, int dtype, void *stream)
{
	if (n == 0)
		return 0;
	to_f32<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(dst, src, n, dtype);
	return (int)cudaGetLastError();
}

extern "C" int lmt_cuda_from_f32(void *dst, const float *src, size_t n, int dtype, float divisor, void *stream)
{
	if (n == 0)
		return 0;
	from_f32<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(dst, src, n, dtype, divisor);
	return (int)cudaGetLastError();
}
