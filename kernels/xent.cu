/*
 * xent.cu: the fused classifier (backend.h's xent_fwd_bwd): a block per row finds
 * the max and the sum of exponentials over the V real columns (fixed-order block
 * reductions), writes the loss and, in the same pass, replaces the logits by
 * (softmax - onehot) * dscale, zeros in padding columns and masked rows; the
 * probabilities are never stored apart. The loss sum goes into the double
 * accumulator by one block in a fixed order.
 */
#include "common.cuh"
#include "kernels.h"

#define ST ((cudaStream_t)stream)

static __global__ void k_xent(float *losses, float *logits, const int32_t *targets, int V, int Vp, float dscale)
{
	__shared__ float sh[32];
	int n = blockIdx.x, t = targets[n];
	float *l = logits + (size_t)n * Vp;
	if (t < 0) {
		for (int j = threadIdx.x; j < Vp; j += blockDim.x)
			l[j] = 0.0f;
		if (threadIdx.x == 0)
			losses[n] = 0.0f;
		return;
	}
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		mx = fmaxf(mx, l[j]);
	mx = block_max(mx, sh);
	float lt = l[t], s = 0; /* read by every thread before any write below */
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		s += expf(l[j] - mx);
	s = block_sum(s, sh); /* its barriers order the reads of l[t] before the writes */
	float k = dscale / s;
	for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
		float g = 0.0f;
		if (j < V) {
			g = expf(l[j] - mx) * k;
			if (j == t)
				g -= dscale;
		}
		l[j] = g;
	}
	if (threadIdx.x == 0)
		losses[n] = logf(s) + (mx - lt); /* mx - lt first: both large, their difference exact */
}

extern "C" int lmt_k_xent_fwd_bwd(float *losses, double *loss_acc, float *logits, const int32_t *targets, int N,
				  int V, int Vp, float dscale, void *stream)
{
	if (N <= 0)
		return 0;
	k_xent<<<(unsigned)N, 512, 0, ST>>>(losses, logits, targets, V, Vp, dscale);
	if (loss_acc)
		return lmt_k_sum_to_double(loss_acc, losses, N, stream);
	return (int)cudaGetLastError();
}
