/*
 * gpu-facts.cu: the facts of this machine's first GPU as one JSON object on
 * stdout, for scripts/gpu-check: name, compute capability, memory, SMs, the
 * driver's and the runtime's CUDA versions, NCCL's version (ncclGetVersion) and
 * a measured cuBLASLt bf16 GEMM peak (bf16 inputs and output, fp32 accumulation,
 * M = N = K = 8192 by default, A transposed as cuBLAS is fastest at; the best of
 * 5 timings of 10 GEMMs each, with CUDA events).
 *
 *	gpu-facts           the JSON object (exit 1 and a reason on stderr without a GPU)
 *	gpu-facts --count   the number of visible devices only (exit 1 if none)
 *	gpu-facts --size N  the GEMM's M = N = K
 *
 * Built by make where nvcc exists ($(B)/scripts/gpu-facts), so that `make`
 * proves it compiles; it runs only where a GPU is.
 */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef LMT_HAVE_NCCL
#include <nccl.h>
#endif

#define CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "gpu-facts: %s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define LT(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
	fprintf(stderr, "gpu-facts: %s: cuBLAS status %d\n", #x, (int)s_); exit(1); } } while (0)

/* a pseudo-random bf16 matrix of n elements in [-1, 1) */
static __global__ void fill(__nv_bfloat16 *p, size_t n, unsigned seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		unsigned x = (unsigned)i * 2654435761u ^ seed;
		x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
		p[i] = __float2bfloat16((float)(x & 0xffff) / 32768.0f - 1.0f);
	}
}

/* TFLOP/s of D = A^T B in bf16, the best of 5 timings of 10 GEMMs */
static double gemm_peak(int n)
{
	size_t el = (size_t)n * n, ws_bytes = 64u << 20;
	__nv_bfloat16 *a, *b, *d;
	void *ws;
	CUDA(cudaMalloc(&a, el * 2));
	CUDA(cudaMalloc(&b, el * 2));
	CUDA(cudaMalloc(&d, el * 2));
	CUDA(cudaMalloc(&ws, ws_bytes));
	fill<<<1024, 256>>>(a, el, 1);
	fill<<<1024, 256>>>(b, el, 2);
	CUDA(cudaGetLastError());
	cublasLtHandle_t lt;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, ld;
	cublasOperation_t t = CUBLAS_OP_T;
	LT(cublasLtCreate(&lt));
	LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
	LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n));
	LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n));
	LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n));
	cublasLtMatmulPreference_t pref;
	LT(cublasLtMatmulPreferenceCreate(&pref));
	LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
						sizeof ws_bytes));
	cublasLtMatmulHeuristicResult_t h;
	int found = 0;
	LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &h, &found));
	if (!found) {
		fprintf(stderr, "gpu-facts: cuBLASLt has no bf16 GEMM algorithm for %d x %d\n", n, n);
		exit(1);
	}
	float alpha = 1, beta = 0;
	cudaEvent_t e0, e1;
	CUDA(cudaEventCreate(&e0));
	CUDA(cudaEventCreate(&e1));
	double best = 0;
	for (int rep = 0; rep < 6; rep++) { /* the first is a warm-up */
		CUDA(cudaEventRecord(e0));
		for (int i = 0; i < 10; i++)
			LT(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &h.algo, ws, ws_bytes, 0));
		CUDA(cudaEventRecord(e1));
		CUDA(cudaEventSynchronize(e1));
		float ms = 0;
		CUDA(cudaEventElapsedTime(&ms, e0, e1));
		double tf = 10 * 2.0 * n * (double)n * n / (ms * 1e-3) / 1e12;
		if (rep && tf > best)
			best = tf;
	}
	cublasLtMatmulPreferenceDestroy(pref);
	cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
	cublasLtMatmulDescDestroy(op);
	cublasLtDestroy(lt);
	cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(ws);
	return best;
}

int main(int argc, char **argv)
{
	int count = 0, n = 8192, only_count = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--count"))
			only_count = 1;
		else if (!strcmp(argv[i], "--size") && i + 1 < argc && atoi(argv[i + 1]) >= 16)
			n = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: gpu-facts [--count] [--size N]\n");
			return 2;
		}
	}
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count < 1) {
		fprintf(stderr, "gpu-facts: no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "no device visible");
		return 1;
	}
	if (only_count) {
		printf("%d\n", count);
		return 0;
	}
	cudaDeviceProp p;
	int driver = 0, runtime = 0, nccl = 0;
	CUDA(cudaGetDeviceProperties(&p, 0));
	CUDA(cudaDriverGetVersion(&driver));
	CUDA(cudaRuntimeGetVersion(&runtime));
#ifdef LMT_HAVE_NCCL
	if (ncclGetVersion(&nccl) != ncclSuccess)
		nccl = 0;
#endif
	double peak = gemm_peak(n);
	printf("{\"devices\":%d,\"name\":\"%s\",\"compute_capability\":\"%d.%d\",\"memory_bytes\":%zu,"
	       "\"sms\":%d,\"cuda_driver\":\"%d.%d\",\"cuda_runtime\":\"%d.%d\",\"nccl\":\"%d.%d.%d\","
	       "\"bf16_gemm\":{\"m\":%d,\"n\":%d,\"k\":%d,\"tflops\":%.1f}}\n",
	       count, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount, driver / 1000,
	       (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10, nccl / 10000, (nccl / 100) % 100,
	       nccl % 100, n, n, n, peak);
	return 0;
}
