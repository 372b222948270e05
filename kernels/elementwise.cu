/*
 * elementwise.cu: GELU forward and backward (GPT-2's tanh form, accurate tanhf:
 * this build never uses --use_fast_math), add, axpy, scale, the bias add, and the
 * GEMM epilogue that cuda.c runs where it does not ask cuBLASLt for one.
 * Grid-stride loops; each element is computed by one thread, so the results do
 * not depend on the grid.
 */
#include "common.cuh"
#include "kernels.h"

#define ST ((cudaStream_t)stream)
#define LAUNCH(n) grid_for((n), 256, 4096), 256, 0, ST

static __global__ void k_gelu_fwd(void *out, int dt, const float *x, size_t n)
{
	GRID_STRIDE(i, n)
	st_f32(out, dt, i, gelu_f(x[i]));
}

static __global__ void k_gelu_bwd(float *dx, const float *x, const float *dy, size_t n)
{
	GRID_STRIDE(i, n)
	{
		float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v), t = tanhf(u);
		float sech2 = 1.0f - t * t;
		float g = 0.5f * (1.0f + t) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
		dx[i] = g * dy[i];
	}
}

static __global__ void k_add(float *o, const float *a, const float *b, size_t n)
{
	GRID_STRIDE(i, n)
	o[i] = a[i] + b[i];
}

static __global__ void k_axpy(float *y, float a, const float *x, size_t n)
{
	GRID_STRIDE(i, n)
	y[i] += a * x[i];
}

static __global__ void k_scale(float *x, float s, size_t n)
{
	GRID_STRIDE(i, n)
	x[i] *= s;
}

static __global__ void k_bias_add(float *x, const float *b, size_t n, int C)
{
	GRID_STRIDE(i, n)
	x[i] += b[i % (size_t)C];
}

static __global__ void k_epilogue(void *C, int cdt, int ldc, long sc, const float *D, int ldd, long sd, float beta,
				  const float *bias, int gelu, int M, int N, size_t n)
{
	GRID_STRIDE(e, n)
	{
		size_t per = (size_t)M * N, b = e / per, r = e % per, i = r / N, j = r % N;
		size_t o = b * sc + i * (size_t)ldc + j;
		float pre;
		if (D) {
			pre = D[b * sd + i * (size_t)ldd + j];
			if (beta != 0.0f)
				pre += beta * ld_f32(C, cdt, o);
			if (bias)
				pre += bias[j];
		} else {
			pre = ld_f32(C, cdt, o);
			if (bias)
				pre += bias[j];
		}
		st_f32(C, cdt, o, gelu ? gelu_f(pre) : pre);
	}
}

extern "C" int lmt_k_gelu_fwd(void *out, int dt, const float *inp, size_t n, void *stream)
{
	if (n)
		k_gelu_fwd<<<LAUNCH(n)>>>(out, dt, inp, n);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n, void *stream)
{
	if (n)
		k_gelu_bwd<<<LAUNCH(n)>>>(dinp, inp, dout, n);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_add(float *out, const float *a, const float *b, size_t n, void *stream)
{
	if (n)
		k_add<<<LAUNCH(n)>>>(out, a, b, n);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_axpy(float *y, float a, const float *x, size_t n, void *stream)
{
	if (n)
		k_axpy<<<LAUNCH(n)>>>(y, a, x, n);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_scale(float *x, float s, size_t n, void *stream)
{
	if (n)
		k_scale<<<LAUNCH(n)>>>(x, s, n);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_bias_add(float *x, const float *b, int N, int C, void *stream)
{
	size_t n = (size_t)N * C;
	if (n)
		k_bias_add<<<LAUNCH(n)>>>(x, b, n, C);
	return (int)cudaGetLastError();
}

extern "C" int lmt_k_gemm_epilogue(void *C, int cdt, int ldc, long sc, const float *D, int ldd, long sd, float beta,
				   const float *bias, int gelu, int M, int N, int batch, void *stream)
{
	size_t n = (size_t)M * N * batch;
	if (n)
		k_epilogue<<<LAUNCH(n)>>>(C, cdt, ldc, sc, D, ldd, sd, beta, bias, gelu, M, N, n);
	return (int)cudaGetLastError();
}
