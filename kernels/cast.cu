/*
 * cast.cu: dtype conversions (backend.h's cast). Round to nearest even by CUDA's
 * _rn conversions (IEEE's rule, as core/dtype.h's reference); stochastic rounding
 * by the CPU backend's own recipe and hash of (seed, element index), so that a
 * seed gives the same bits on either backend and for any grid.
 */
#include "common.cuh"
#include "kernels.h"

static __device__ __forceinline__ uint32_t sr_bits(uint64_t seed, size_t i)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31));
}

/* 16 random bits added below bf16's kept half, then truncated; NaN and infinity kept */
static __device__ __forceinline__ uint16_t sr_bf16(float x, uint64_t seed, size_t i)
{
	uint32_t u = __float_as_uint(x);
	if ((u & 0x7f800000u) == 0x7f800000u)
		return __bfloat16_as_ushort(__float2bfloat16_rn(x));
	u += sr_bits(seed, i) & 0xffffu;
	return (uint16_t)(u >> 16);
}

/* the two fp16 neighbours of x and a uniform draw between them (cpu.c's sr_f16) */
static __device__ __forceinline__ uint16_t sr_f16(float x, uint64_t seed, size_t i)
{
	uint16_t h = __half_as_ushort(__float2half_rn(x));
	float r = __half2float(__ushort_as_half(h));
	if (!isfinite(r) || r == x)
		return h;
	int up = fabsf(x) > fabsf(r);
	uint16_t o = (uint16_t)(up ? h + 1 : h - 1);
	if ((h & 0x7fffu) == 0 && !up)
		o = h;
	float ro = __half2float(__ushort_as_half(o));
	float lo = fabsf(r) < fabsf(ro) ? r : ro, hi = lo == r ? ro : r;
	uint16_t hlo = lo == r ? h : o, hhi = lo == r ? o : h;
	float p = (fabsf(x) - fabsf(lo)) / (fabsf(hi) - fabsf(lo));
	float u01 = (float)(sr_bits(seed, i) >> 8) * 0x1p-24f;
	return u01 < p ? hhi : hlo;
}

static __global__ void k_cast(void *dst, int ddt, const void *src, int sdt, size_t n, int sr, uint64_t seed)
{
	GRID_STRIDE(i, n)
	{
		float x = ld_f32(src, sdt, i);
		if (sr && ddt == LMT_DTYPE_BF16)
			((uint16_t *)dst)[i] = sr_bf16(x, seed, i);
		else if (sr && ddt == LMT_DTYPE_F16)
			((uint16_t *)dst)[i] = sr_f16(x, seed, i);
		else
			st_f32(dst, ddt, i, x);
	}
}

extern "C" int lmt_k_cast(void *dst, int ddt, const void *src, int sdt, size_t n, int sr, uint64_t seed, void *stream)
{
	if (n == 0)
		return 0;
	k_cast<<<grid_for(n, 256, 4096), 256, 0, (cudaStream_t)stream>>>(dst, ddt, src, sdt, n, sr, seed);
	return (int)cudaGetLastError();
}
