/*
 * embed.cu: token plus position embeddings, forward and backward. The backward
 * pass is deterministic without atomics: a thread owns a channel and walks the
 * tokens in order, adding into dwte in the same order as the CPU backend (so the
 * same bits), and a thread per (position, channel) sums dwpe over the batch.
 * Parallel only over channels (C threads) for dwte: simple first, a sorted-token
 * kernel is the faster follow-up.
 */
#include "common.cuh"
#include "kernels.h"

#define ST ((cudaStream_t)stream)

static __global__ void k_embed_fwd(float *out, const int32_t *tok, const float *wte, const float *wpe, int T, int C,
				   size_t n)
{
	GRID_STRIDE(e, n)
	{
		size_t r = e / (size_t)C, c = e % (size_t)C;
		out[e] = wte[(size_t)tok[r] * C + c] + wpe[(r % (size_t)T) * C + c];
	}
}

static __global__ void k_dwte(float *dwte, const float *dout, const int32_t *tok, int N, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	for (int n = 0; n < N; n++)
		dwte[(size_t)tok[n] * C + c] += dout[(size_t)n * C + c];
}

static __global__ void k_dwpe(float *dwpe, const float *dout, int B, int T, int C)
{
	size_t n = (size_t)T * C;
	GRID_STRIDE(e, n)
	{
		float s = dwpe[e];
		for (int b = 0; b < B; b++)
			s += dout[(size_t)b * n + e];
		dwpe[e] = s;
	}
}

extern "C" int lmt_k_embed_fwd(float *out, const int32_t *tok, const float *wte, const float *wpe, int B, int T,
			       int C, void *stream)
{
	size_t n = (size_t)B * T * C;
	if (n)
		k_embed_fwd<<<grid_for(n, 256, 4096), 256, 0, ST>>>(out, tok, wte, wpe, T, C, n);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B, int T, int C,
			       void *stream)
{
	if ((size_t)B * T * C == 0)
		return 0;
	k_dwte<<<(unsigned)((C + 63) / 64), 64, 0, ST>>>(dwte, dout, tok, B * T, C);
	k_dwpe<<<grid_for((size_t)T * C, 256, 4096), 256, 0, ST>>>(dwpe, dout, B, T, C);
	return (int)cudaGetLastError();
}
