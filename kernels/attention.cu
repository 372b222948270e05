/*
 * attention.cu: causal multi-head attention (backend.h's attention_fwd/bwd) that
 * never stores a T x T matrix. Kept simple and correct first:
 *
 *   forward   a warp per (batch, head, query): the lanes split the head's
 *             channels (PER = HS/32 rounded up each, HS <= 256), walk the keys the
 *             query may see in order with an online softmax (running max m, sum l,
 *             output rescaled as m grows: Milakov & Gimelshein 2018, the
 *             FlashAttention recurrence), and save lse = m + log l;
 *   backward  D[q] = dot(dout, out) first (a warp per query); then dQ by a warp per
 *             query over its keys and dK, dV by a warp per key over the queries
 *             that see it, each recomputing p = exp(s - lse) from the saved lse.
 *             Every output element is written by one warp in a fixed order: no
 *             atomics, the same bits run to run, and dqkv is overwritten.
 *
 * Segments: a query sees the keys from its segment's start (the run of equal
 * seg values that ends at it) to itself, as cpu.c's seg_start.
 * Not yet tiled through shared memory (keys and values come from L2): the
 * FlashAttention-2 tiling is the speed follow-up.
 */
#include "common.cuh"
#include "kernels.h"

#define ST ((cudaStream_t)stream)
#define PER (LMT_K_ATTN_MAX_HS / 32)
#define WARPS 4

/* a warp's slice of one head's HS channels at row r (a pointer to its channel 0) */
static __device__ __forceinline__ void load_row(float *r, const float *p, int HS, int lane)
{
#pragma unroll
	for (int k = 0; k < PER; k++) {
		int d = lane + 32 * k;
		r[k] = d < HS ? p[d] : 0.0f;
	}
}

static __device__ __forceinline__ float dot_row(const float *r, const float *p, int HS, int lane)
{
	float s = 0;
#pragma unroll
	for (int k = 0; k < PER; k++) {
		int d = lane + 32 * k;
		if (d < HS)
			s += r[k] * p[d];
	}
	return warp_sum(s);
}

static __device__ __forceinline__ int seg_start(const int32_t *sg, int i)
{
	int j = i;
	if (!sg)
		return 0;
	while (j > 0 && sg[j - 1] == sg[i])
		j--;
	return j;
}

static __device__ __forceinline__ int seg_end(const int32_t *sg, int j, int T)
{
	int i = j;
	if (!sg)
		return T - 1;
	while (i + 1 < T && sg[i + 1] == sg[j])
		i++;
	return i;
}

/* this warp's (batch, head, row) among B x NH x rows, rows fastest (neighbouring
 * warps share a head's keys in L2); w is its index, false past the end */
struct wrow {
	long w;
	int b, h, r;
};

static __device__ __forceinline__ bool warp_row(struct wrow *x, int B, int NH, int rows)
{
	x->w = (long)blockIdx.x * WARPS + (threadIdx.x >> 5);
	if (x->w >= (long)B * NH * rows)
		return false;
	x->r = (int)(x->w % rows), x->h = (int)(x->w / rows % NH), x->b = (int)(x->w / rows / NH);
	return true;
}

static __global__ void k_attn_fwd(float *out, float *lse, const float *qkv, const int32_t *seg, int B, int T, int NH,
				  int HS, int q0)
{
	int TQ = T - q0, lane = threadIdx.x & 31;
	struct wrow x;
	if (!warp_row(&x, B, NH, TQ))
		return;
	int iq = x.r, h = x.h, b = x.b, i = q0 + iq, C = NH * HS, C3 = 3 * C;
	const float *base = qkv + (size_t)b * T * C3;
	const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
	float scale = 1.0f / sqrtf((float)HS), q[PER], o[PER], m = -INFINITY, l = 0;
	load_row(q, base + (size_t)i * C3 + h * HS, HS, lane);
#pragma unroll
	for (int k = 0; k < PER; k++)
		o[k] = 0;
	for (int j = seg_start(sg, i); j <= i; j++) {
		const float *kp = base + (size_t)j * C3 + C + h * HS, *vp = kp + C;
		float s = dot_row(q, kp, HS, lane) * scale;
		float mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
		l = l * corr + p;
#pragma unroll
		for (int k = 0; k < PER; k++) {
			int d = lane + 32 * k;
			o[k] = o[k] * corr + (d < HS ? p * vp[d] : 0.0f);
		}
		m = mn;
	}
	float *op = out + ((size_t)b * TQ + iq) * C + h * HS, inv = 1.0f / l;
#pragma unroll
	for (int k = 0; k < PER; k++) {
		int d = lane + 32 * k;
		if (d < HS)
			op[d] = o[k] * inv;
	}
	if (lse && lane == 0)
		lse[((size_t)b * NH + h) * TQ + iq] = m + logf(l);
}

/* D[(b*NH + h)*T + i] = dot(dout row, out row) of head h */
static __global__ void k_attn_D(float *D, const float *dout, const float *out, int B, int T, int NH, int HS)
{
	int lane = threadIdx.x & 31;
	struct wrow x;
	if (!warp_row(&x, B, NH, T))
		return;
	int i = x.r, h = x.h, b = x.b, C = NH * HS;
	long w = x.w;
	float r[PER];
	load_row(r, dout + ((size_t)b * T + i) * C + h * HS, HS, lane);
	float d = dot_row(r, out + ((size_t)b * T + i) * C + h * HS, HS, lane);
	if (lane == 0)
		D[w] = d;
}

/* dQ[i] = sum_j ds_ij K[j], ds = p (dot(dO_i, V_j) - D_i) scale */
static __global__ void k_attn_dq(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D,
				 const int32_t *seg, int B, int T, int NH, int HS)
{
	int lane = threadIdx.x & 31;
	struct wrow x;
	if (!warp_row(&x, B, NH, T))
		return;
	int i = x.r, h = x.h, b = x.b, C = NH * HS, C3 = 3 * C;
	long w = x.w;
	const float *base = qkv + (size_t)b * T * C3;
	const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
	float scale = 1.0f / sqrtf((float)HS), q[PER], dy[PER], dq[PER], L = lse[w], Di = D[w];
	load_row(q, base + (size_t)i * C3 + h * HS, HS, lane);
	load_row(dy, dout + ((size_t)b * T + i) * C + h * HS, HS, lane);
#pragma unroll
	for (int k = 0; k < PER; k++)
		dq[k] = 0;
	for (int j = seg_start(sg, i); j <= i; j++) {
		const float *kp = base + (size_t)j * C3 + C + h * HS, *vp = kp + C;
		float p = expf(dot_row(q, kp, HS, lane) * scale - L);
		float ds = p * (dot_row(dy, vp, HS, lane) - Di) * scale;
#pragma unroll
		for (int k = 0; k < PER; k++) {
			int d = lane + 32 * k;
			if (d < HS)
				dq[k] += ds * kp[d];
		}
	}
	float *dp = dqkv + ((size_t)b * T + i) * C3 + h * HS;
#pragma unroll
	for (int k = 0; k < PER; k++) {
		int d = lane + 32 * k;
		if (d < HS)
			dp[d] = dq[k];
	}
}

/* dK[j] = sum_i ds_ij Q[i], dV[j] = sum_i p_ij dO[i], over the queries i that see j */
static __global__ void k_attn_dkv(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D,
				  const int32_t *seg, int B, int T, int NH, int HS)
{
	int lane = threadIdx.x & 31;
	struct wrow x;
	if (!warp_row(&x, B, NH, T))
		return;
	int j = x.r, h = x.h, b = x.b, C = NH * HS, C3 = 3 * C;
	const float *base = qkv + (size_t)b * T * C3;
	const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
	const float *L = lse + ((size_t)b * NH + h) * T, *Dr = D + ((size_t)b * NH + h) * T;
	float scale = 1.0f / sqrtf((float)HS), kr[PER], vr[PER], dk[PER], dv[PER];
	load_row(kr, base + (size_t)j * C3 + C + h * HS, HS, lane);
	load_row(vr, base + (size_t)j * C3 + 2 * C + h * HS, HS, lane);
#pragma unroll
	for (int k = 0; k < PER; k++)
		dk[k] = dv[k] = 0;
	int i1 = seg_end(sg, j, T);
	for (int i = j; i <= i1; i++) {
		const float *qp = base + (size_t)i * C3 + h * HS, *gy = dout + ((size_t)b * T + i) * C + h * HS;
		float p = expf(dot_row(kr, qp, HS, lane) * scale - L[i]);
		float ds = p * (dot_row(vr, gy, HS, lane) - Dr[i]) * scale;
#pragma unroll
		for (int k = 0; k < PER; k++) {
			int d = lane + 32 * k;
			if (d < HS) {
				dk[k] += ds * qp[d];
				dv[k] += p * gy[d];
			}
		}
	}
	float *dkp = dqkv + ((size_t)b * T + j) * C3 + C + h * HS, *dvp = dkp + C;
#pragma unroll
	for (int k = 0; k < PER; k++) {
		int d = lane + 32 * k;
		if (d < HS)
			dkp[d] = dk[k], dvp[d] = dv[k];
	}
}

static unsigned warp_blocks(long warps)
{
	return (unsigned)((warps + WARPS - 1) / WARPS);
}

extern "C" int lmt_k_attention_fwd(float *out, float *lse, const float *qkv, const int32_t *seg, int B, int T, int NH,
				   int HS, int q0, void *stream)
{
	long warps = (long)B * NH * (T - q0);
	if (warps > 0)
		k_attn_fwd<<<warp_blocks(warps), 32 * WARPS, 0, ST>>>(out, lse, qkv, seg, B, T, NH, HS, q0);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
				   const float *lse, const int32_t *seg, int B, int T, int NH, int HS, float *scratch,
				   void *stream)
{
	long warps = (long)B * NH * T;
	if (warps <= 0)
		return 0;
	k_attn_D<<<warp_blocks(warps), 32 * WARPS, 0, ST>>>(scratch, dout, out, B, T, NH, HS);
	k_attn_dq<<<warp_blocks(warps), 32 * WARPS, 0, ST>>>(dqkv, dout, qkv, lse, scratch, seg, B, T, NH, HS);
	k_attn_dkv<<<warp_blocks(warps), 32 * WARPS, 0, ST>>>(dqkv, dout, qkv, lse, scratch, seg, B, T, NH, HS);
	return (int)cudaGetLastError();
}
