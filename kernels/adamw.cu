/*
 * adamw.cu: AdamW over one flat range (backend.h), element for element the CPU
 * backend's fp32 arithmetic; the working copy written in the same pass; the count
 * of non-finite updated weights reduced per block and added into the double
 * accumulator with atomicAdd, exact (integers below 2^53), so in any order.
 */
#include "common.cuh"
#include "kernels.h"

static __global__ void k_adamw(float *p, void *work, int wdt, const float *g, float *m, float *v, size_t n, float lr,
			       float b1, float b2, float eps, float wd, float ib1, float ib2, float gs, double *acc)
{
	__shared__ float sh[32];
	float bad = 0;
	GRID_STRIDE(i, n)
	{
		float gi = g[i] * gs;
		float mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		float mh = mi * ib1, vh = vi * ib2, pi = p[i];
		pi -= lr * (mh / (sqrtf(vh) + eps) + wd * pi);
		p[i] = pi;
		bad += !(pi - pi == 0.0f);
		if (work)
			st_f32(work, wdt, i, pi);
	}
	if (acc) {
		bad = block_sum(bad, sh); /* exact: counts below 2^24 per block */
		if (threadIdx.x == 0 && bad != 0)
			atomicAdd(acc, (double)bad);
	}
}

extern "C" int lmt_k_adamw(float *p, void *work, int wdt, const float *grad, float *m, float *v, size_t n, float lr,
			   float b1, float b2, float eps, float wd, float ib1, float ib2, float gscale,
			   double *nonfinite_acc, void *stream)
{
	if (n == 0)
		return 0;
	if (work == (void *)p)
		work = NULL; /* an fp32 working copy is the master itself */
	k_adamw<<<grid_for(n, 256, 4096), 256, 0, (cudaStream_t)stream>>>(p, work, wdt, grad, m, v, n, lr, b1, b2, eps,
									  wd, ib1, ib2, gscale, nonfinite_acc);
	return (int)cudaGetLastError();
}
