/*
 * layernorm.cu: layer norm forward (a warp per row: mean, then the variance of
 * x - mean, as the CPU backend does; eps 1e-5) and backward (a warp per row for
 * dinp, which accumulates; dw and db as column sums over fixed row chunks, then
 * the chunks in order: deterministic, no atomics).
 */
#include "common.cuh"
#include "kernels.h"

#define ST ((cudaStream_t)stream)

static __global__ void k_ln_fwd(void *out, int dt, float *mean, float *rstd, const float *inp, const float *w,
				const float *b, int N, int C)
{
	int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (row >= N)
		return;
	const float *x = inp + (size_t)row * C;
	float s = 0;
	for (int c = lane; c < C; c += 32)
		s += x[c];
	float m = warp_sum(s) / C, v = 0;
	for (int c = lane; c < C; c += 32) {
		float d = x[c] - m;
		v += d * d;
	}
	v = warp_sum(v) / C;
	float r = 1.0f / sqrtf(v + 1e-5f);
	for (int c = lane; c < C; c += 32)
		st_f32(out, dt, (size_t)row * C + c, (x[c] - m) * r * w[c] + b[c]);
	if (lane == 0) {
		if (mean)
			mean[row] = m;
		if (rstd)
			rstd[row] = r;
	}
}

static __global__ void k_ln_bwd_rows(float *dinp, const float *dout, const float *inp, const float *w,
				     const float *mean, const float *rstd, int N, int C)
{
	int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (row >= N)
		return;
	const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
	float *dx = dinp + (size_t)row * C, m = mean[row], s = rstd[row], a = 0, bs = 0;
	for (int c = lane; c < C; c += 32) {
		float norm = (x[c] - m) * s, dn = dy[c] * w[c];
		a += dn;
		bs += dn * norm;
	}
	a = warp_sum(a) / C;
	bs = warp_sum(bs) / C;
	for (int c = lane; c < C; c += 32) {
		float norm = (x[c] - m) * s, dn = dy[c] * w[c];
		dx[c] += s * (dn - a - norm * bs);
	}
}

/* chunk k's partial sums of dw (part) and db (part + chunks*C) */
static __global__ void k_ln_dwdb_part(float *part, const float *dout, const float *inp, const float *mean,
				      const float *rstd, int N, int C, int rows, int chunks)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y;
	if (c >= C)
		return;
	int n0 = k * rows, n1 = n0 + rows < N ? n0 + rows : N;
	float sw = 0, sb = 0;
	for (int n = n0; n < n1; n++) {
		float dy = dout[(size_t)n * C + c];
		sw += dy * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
		sb += dy;
	}
	part[(size_t)k * C + c] = sw;
	part[((size_t)chunks + k) * C + c] = sb;
}

static __global__ void k_ln_dwdb_final(float *dw, float *db, const float *part, int chunks, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	float sw = 0, sb = 0;
	for (int k = 0; k < chunks; k++) {
		sw += part[(size_t)k * C + c];
		sb += part[((size_t)chunks + k) * C + c];
	}
	dw[c] += sw;
	db[c] += sb;
}

extern "C" int lmt_k_layernorm_fwd(void *out, int dt, float *mean, float *rstd, const float *inp, const float *w,
				   const float *b, int N, int C, void *stream)
{
	if (N > 0)
		k_ln_fwd<<<(unsigned)((N + 7) / 8), 256, 0, ST>>>(out, dt, mean, rstd, inp, w, b, N, C);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
				   const float *w, const float *mean, const float *rstd, int N, int C, float *scratch,
				   void *stream)
{
	if (N <= 0 || C <= 0)
		return 0;
	k_ln_bwd_rows<<<(unsigned)((N + 7) / 8), 256, 0, ST>>>(dinp, dout, inp, w, mean, rstd, N, C);
	/* the same chunking as reduce.cu's column sums (lmt_k_colsum_scratch) */
	int chunks = (int)(lmt_k_colsum_scratch(N, 1)), rows = (N + chunks - 1) / chunks;
	dim3 g1((unsigned)((C + 127) / 128), (unsigned)chunks);
	k_ln_dwdb_part<<<g1, 128, 0, ST>>>(scratch, dout, inp, mean, rstd, N, C, rows, chunks);
	k_ln_dwdb_final<<<(unsigned)((C + 127) / 128), 128, 0, ST>>>(dw, db, scratch, chunks, C);
	return (int)cudaGetLastError();
}
