/*
 * reduce.cu: reductions whose order is fixed by the shape alone, so they give the
 * same bits run to run and on any GPU: the bias gradient (column sums over row
 * chunks, then the chunks summed in order), the sum of squares with its
 * non-finite count (256 blocks of 256 threads, whatever n, in double), and a
 * float array summed into a double (the loss).
 */
#include "common.cuh"
#include "kernels.h"

#define ST ((cudaStream_t)stream)

/* rows per chunk of a column sum: chunks of at least 32 rows, at most 256 chunks */
static int col_chunks(int N)
{
	int c = (N + 31) / 32;
	return c < 1 ? 1 : c > 256 ? 256 : c;
}

extern "C" size_t lmt_k_colsum_scratch(int N, int C)
{
	return (size_t)col_chunks(N) * (size_t)C;
}

/* part[k*C + c] = sum over rows of chunk k of x[n*C + c], in row order */
static __global__ void k_colsum_part(float *part, const float *x, int N, int C, int rows)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, k = blockIdx.y;
	if (c >= C)
		return;
	int n0 = k * rows, n1 = n0 + rows < N ? n0 + rows : N;
	float s = 0;
	for (int n = n0; n < n1; n++)
		s += x[(size_t)n * C + c];
	part[(size_t)k * C + c] = s;
}

/* dst[c] += the chunks' partial sums, in chunk order */
static __global__ void k_colsum_final(float *dst, const float *part, int chunks, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	float s = 0;
	for (int k = 0; k < chunks; k++)
		s += part[(size_t)k * C + c];
	dst[c] += s;
}

extern "C" int lmt_k_bias_grad(float *db, const float *dout, int N, int C, float *scratch, void *stream)
{
	if (N <= 0 || C <= 0)
		return 0;
	int chunks = col_chunks(N), rows = (N + chunks - 1) / chunks;
	dim3 g1((unsigned)((C + 127) / 128), (unsigned)chunks);
	k_colsum_part<<<g1, 128, 0, ST>>>(scratch, dout, N, C, rows);
	k_colsum_final<<<(unsigned)((C + 127) / 128), 128, 0, ST>>>(db, scratch, chunks, C);
	return (int)cudaGetLastError();
}

#define SQ_BLOCKS 256

extern "C" size_t lmt_k_sumsq_scratch(void)
{
	return 2 * SQ_BLOCKS;
}

static __global__ void k_sumsq_part(double *part, const float *x, size_t n)
{
	__shared__ double sh[32];
	double q = 0, bad = 0;
	GRID_STRIDE(i, n)
	{
		float v = x[i];
		q += (double)v * v;
		bad += !(v - v == 0.0f); /* NaN or infinity */
	}
	q = block_sum(q, sh);
	bad = block_sum(bad, sh);
	if (threadIdx.x == 0)
		part[blockIdx.x] = q, part[SQ_BLOCKS + blockIdx.x] = bad;
}

static __global__ void k_sumsq_final(double *acc, const double *part)
{
	__shared__ double sh[32];
	double q = block_sum(part[threadIdx.x], sh);
	double bad = block_sum(part[SQ_BLOCKS + threadIdx.x], sh);
	if (threadIdx.x == 0)
		acc[0] += q, acc[1] += bad;
}

extern "C" int lmt_k_sumsq(double *acc, const float *x, size_t n, double *scratch, void *stream)
{
	k_sumsq_part<<<SQ_BLOCKS, 256, 0, ST>>>(scratch, x, n);
	k_sumsq_final<<<1, SQ_BLOCKS, 0, ST>>>(acc, scratch);
	return (int)cudaGetLastError();
}

static __global__ void k_sum_to_double(double *acc, const float *x, int n)
{
	__shared__ double sh[32];
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += x[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0)
		*acc += s;
}

extern "C" int lmt_k_sum_to_double(double *acc, const float *x, int n, void *stream)
{
	k_sum_to_double<<<1, 1024, 0, ST>>>(acc, x, n);
	return (int)cudaGetLastError();
}
