/*
 * gemm-bench: GFLOP/s of the CPU backend's GEMMs (lib/backend/cpu_gemm.c) at 1024^3
 * and at GPT-2 124M's training shapes, for scripts/bench/gemm, which puts a peer's
 * numbers beside them. `make bench-gemm` builds it as $(B)/bench/gemm-bench.
 *
 *   gemm-bench [DTYPE...]    fp32 bf16 fp16 by default
 *
 * One tab-separated line per product: dtype, name, M, N, K, ta, tb, GFLOP/s (best of
 * the timed repetitions after one untimed), oneDNN's implementation for the dtype.
 * Then one "peak" line per dtype from lmt_backend_peak_flops (uncached) over a
 * minimal backend around the same cache, so the peak code runs on what it measures.
 * Threads: OpenMP's (OMP_NUM_THREADS).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/impl.h"
#include "core/dtype.h"
#include "core/util.h"

struct shape {
	const char *name;
	int M, N, K, ta, tb;
	float beta;
};

/* GPT-2 124M, 256 tokens, C 768: forward out = inp W^T; backward dinp = dout W and
 * dW += dout^T inp (beta 1) */
#define LAYER(nm, oc, ic) \
	{nm " fwd", 256, oc, ic, 0, 1, 0.0f}, {nm " bwd-data", 256, ic, oc, 0, 0, 0.0f}, \
	{nm " bwd-weight", oc, ic, 256, 1, 0, 1.0f}
static const struct shape shapes[] = {
	{"square 1024", 1024, 1024, 1024, 0, 0, 0.0f},
	LAYER("qkv", 2304, 768),
	LAYER("attn-proj", 768, 768),
	LAYER("fc", 3072, 768),
	LAYER("fc-proj", 768, 3072),
	LAYER("lm-head", 50304, 768),
};

static struct lmt_cpu_gemm_cache *cache;

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n);
	if (!p) {
		fprintf(stderr, "gemm-bench: out of memory\n");
		exit(1);
	}
	return p;
}

static void fill(void *p, int dtype, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float v = (float)((i * 2654435761u) % 1999) / 1999.0f - 0.5f;
		if (dtype == LMT_DTYPE_F32)
			((float *)p)[i] = v;
		else
			((uint16_t *)p)[i] = dtype == LMT_DTYPE_BF16 ? lmt_f32_to_bf16(v) : lmt_f32_to_f16(v);
	}
}

static double bench(const struct shape *s, int dtype)
{
	size_t es = lmt_dtype_size(dtype);
	size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N;
	void *A = xmalloc(na * es), *B = xmalloc(nb * es);
	float *C = xmalloc((size_t)s->M * s->N * 4);
	fill(A, dtype, na);
	fill(B, dtype, nb);
	struct lmt_gemm g = {
		.ta = s->ta, .tb = s->tb, .M = s->M, .N = s->N, .K = s->K, .alpha = 1.0f, .beta = s->beta,
		.A = A, .lda = s->ta ? s->M : s->K, .B = B, .ldb = s->tb ? s->K : s->N, .C = C, .ldc = s->N,
		.batch = 1, .ab_dtype = dtype, .c_dtype = LMT_DTYPE_F32,
	};
	struct lmt_err err;
	double best = 0, spent = 0, fl = 2.0 * s->M * s->N * s->K;
	if (lmt_cpu_gemm(cache, &g, &err)) {
		fprintf(stderr, "gemm-bench: %s\n", err.msg);
		exit(1);
	}
	for (int r = 0; r < 10 && (r < 3 || spent < 0.5); r++) {
		double t = lmt_now();
		lmt_cpu_gemm(cache, &g, &err);
		t = lmt_now() - t;
		spent += t;
		best = fl / t > best ? fl / t : best;
	}
	free(A);
	free(B);
	free(C);
	return best / 1e9;
}

/* the minimal backend lmt_backend_peak_flops needs */
static const char *be_impl(struct lmt_backend *be, int dtype) { return lmt_cpu_gemm_impl(cache, dtype); }
static void *be_alloc(struct lmt_backend *be, size_t n) { return calloc(1, n); }
static void be_free(struct lmt_backend *be, void *p) { free(p); }
static void be_copy(struct lmt_backend *be, void *d, const void *s, size_t n) { memcpy(d, s, n); }
static void be_sync(struct lmt_backend *be) {}
static struct lmt_err be_err;
static int be_rc;
static void be_gemm(struct lmt_backend *be, const struct lmt_gemm *g)
{
	int rc = lmt_cpu_gemm(cache, g, be_rc ? NULL : &be_err);
	if (!be_rc)
		be_rc = rc;
}
static int be_status(struct lmt_backend *be, struct lmt_err *err)
{
	int rc = be_rc;
	if (rc && err)
		*err = be_err;
	be_rc = 0;
	return rc;
}

int main(int argc, char **argv)
{
	int dtypes[8], nd = 0;
	for (int i = 1; i < argc && nd < 8; i++) {
		int d = lmt_dtype_parse(argv[i]);
		if (d < 0 || d == LMT_DTYPE_I32) {
			fprintf(stderr, "gemm-bench: '%s': not a GEMM dtype, expected fp32, bf16 or fp16\n", argv[i]);
			return 2;
		}
		dtypes[nd++] = d;
	}
	if (!nd) {
		dtypes[nd++] = LMT_DTYPE_F32;
		dtypes[nd++] = LMT_DTYPE_BF16;
		dtypes[nd++] = LMT_DTYPE_F16;
	}
	struct lmt_err err;
	if (lmt_cpu_gemm_init(&cache, omp_get_max_threads(), &err)) {
		fprintf(stderr, "gemm-bench: %s\n", err.msg);
		return 1;
	}
	for (int d = 0; d < nd; d++) {
		const char *impl = lmt_cpu_gemm_impl(cache, dtypes[d]);
		for (size_t i = 0; i < LMT_ARRAY_SIZE(shapes); i++) {
			const struct shape *s = &shapes[i];
			printf("%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\n", lmt_dtype_name(dtypes[d]), s->name, s->M, s->N,
			       s->K, s->ta, s->tb, bench(s, dtypes[d]), impl);
			fflush(stdout);
		}
	}
	struct lmt_backend be = {
		.name = "cpu", .threads = omp_get_max_threads(), .is_host = 1, .gemm_impl = be_impl,
		.alloc = be_alloc, .free = be_free, .to_device = be_copy, .to_host = be_copy, .sync = be_sync,
		.gemm = be_gemm, .status = be_status,
	};
	for (int d = 0; d < nd; d++)
		printf("%s\tpeak\t1024\t1024\t1024\t0\t1\t%.1f\t%s\n", lmt_dtype_name(dtypes[d]),
		       lmt_backend_peak_flops(&be, dtypes[d], 0) / 1e9, lmt_cpu_gemm_impl(cache, dtypes[d]));
	lmt_cpu_gemm_release(cache);
	return 0;
}
