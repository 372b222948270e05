/*
 * test-cpu-gemm: the CPU backend's GEMMs (lib/backend/cpu_gemm.c, oneDNN matmul)
 * called directly, against a double-precision reference of struct lmt_gemm
 * (backend.h) written here.
 *
 * Inputs are drawn in [-1, 1) and rounded to their dtype first, so the reference
 * sees exactly the values the GEMM reads and differs from it only by fp32
 * accumulation order. Tolerance per element: 1e-5 * (|alpha| sum_k |a||b| + |beta c|
 * + |bias|) (a K-term fp32 sum of exact products, K <= 200 here; bf16 and fp16
 * products are exact in fp32, so the same bound holds for them), times 1.2 with
 * GELU (its slope is below 1.13), plus half an ulp of C's dtype when C is stored
 * narrower: 2^-8 relative for bf16, 2^-11 for fp16 (and 2^-25 absolute, its
 * subnormals).
 *
 * Shapes are not multiples of the kernels' blocks (1x1x1, 7x13x5, 33x65x17,
 * 129x3x200), every transpose combination, padded row strides and batch strides
 * with a gap, a broadcast B (batch stride 0), beta 0 with C filled with NaN (none
 * may leak), beta 1, alpha != 1 with a bias (alpha scales the product only), GELU,
 * C fp32 and C in the inputs' dtype, K = 0. Also: C's padding between rows and
 * batches is never written; the same call twice gives the same bits (the cached
 * primitive); more distinct shapes than the cache holds; the implementation names;
 * bad arguments are an error.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/impl.h"
#include "core/dtype.h"
#include "tap.h"

static uint64_t rs = 0x9e3779b97f4a7c15ULL;

static double unif(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (rs >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p) {
		fprintf(stderr, "test-cpu-gemm: out of memory\n");
		exit(1);
	}
	return p;
}

static float rnd(float x, int dtype)
{
	if (dtype == LMT_DTYPE_BF16)
		return lmt_bf16_to_f32(lmt_f32_to_bf16(x));
	if (dtype == LMT_DTYPE_F16)
		return lmt_f16_to_f32(lmt_f32_to_f16(x));
	return x;
}

static void put(void *p, int dtype, size_t i, float v)
{
	if (dtype == LMT_DTYPE_BF16)
		((uint16_t *)p)[i] = lmt_f32_to_bf16(v);
	else if (dtype == LMT_DTYPE_F16)
		((uint16_t *)p)[i] = lmt_f32_to_f16(v);
	else
		((float *)p)[i] = v;
}

static float get(const void *p, int dtype, size_t i)
{
	if (dtype == LMT_DTYPE_BF16)
		return lmt_bf16_to_f32(((const uint16_t *)p)[i]);
	if (dtype == LMT_DTYPE_F16)
		return lmt_f16_to_f32(((const uint16_t *)p)[i]);
	return ((const float *)p)[i];
}

static double gelu(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct tcase {
	int M, N, K, ta, tb, batch, ab, c;
	float alpha, beta;
	int bias, gelu, bcast;
};

static struct lmt_cpu_gemm_cache *cache;

/* Run one case; returns 1 when every element is within tolerance and no padding
 * was written. */
static int run_case(const struct tcase *t, const char *what)
{
	int M = t->M, N = t->N, K = t->K, nbt = t->batch;
	int arows = t->ta ? K : M, acols = t->ta ? M : K, brows = t->tb ? N : K, bcols = t->tb ? K : N;
	int lda = acols + 3, ldb = bcols + 1, ldc = N + 2;
	long sa = (long)arows * lda + 5, sb = t->bcast ? 0 : (long)brows * ldb + 7, sc = (long)M * ldc + 4;
	size_t an = (size_t)sa * nbt, bn = (size_t)(t->bcast ? brows * ldb : sb * nbt), cn = (size_t)sc * nbt;
	size_t ab = lmt_dtype_size(t->ab), cb = lmt_dtype_size(t->c);
	void *A = xcalloc(an, ab), *B = xcalloc(bn, ab), *C = xcalloc(cn, cb);
	float *af = xcalloc(an, 4), *bf = xcalloc(bn, 4), *c0 = xcalloc(cn, 4), *bias = xcalloc(N, 4);
	for (size_t i = 0; i < an; i++)
		put(A, t->ab, i, af[i] = rnd((float)unif(), t->ab));
	for (size_t i = 0; i < bn; i++)
		put(B, t->ab, i, bf[i] = rnd((float)unif(), t->ab));
	for (size_t i = 0; i < cn; i++) {
		/* beta 0: C must not be read; NaN would show wherever it is */
		c0[i] = t->beta == 0.0f ? NAN : rnd((float)unif(), t->c);
		put(C, t->c, i, c0[i]);
	}
	for (int n = 0; n < N; n++)
		bias[n] = (float)unif();
	struct lmt_gemm g = {
		.ta = t->ta, .tb = t->tb, .M = M, .N = N, .K = K, .alpha = t->alpha, .beta = t->beta,
		.A = A, .lda = lda, .sa = sa, .B = B, .ldb = ldb, .sb = sb, .C = C, .ldc = ldc, .sc = sc,
		.batch = nbt, .ab_dtype = t->ab, .c_dtype = t->c, .bias = t->bias ? bias : NULL, .gelu = t->gelu,
	};
	struct lmt_err err = {0};
	int rc = lmt_cpu_gemm(cache, &g, &err);
	int ok = rc == 0, bad = 0;
	double worst = 0;
	if (!ok)
		tap_diag("  %s: rc %d: %s", what, rc, err.msg);
	char *written = xcalloc(cn, 1);
	for (int b = 0; ok && b < nbt; b++)
		for (int m = 0; m < M; m++)
			for (int n = 0; n < N; n++) {
				double s = 0, mag = 0;
				for (int k = 0; k < K; k++) {
					size_t ia = (size_t)b * sa + (t->ta ? (size_t)k * lda + m : (size_t)m * lda + k);
					size_t ib = (size_t)b * sb + (t->tb ? (size_t)n * ldb + k : (size_t)k * ldb + n);
					s += (double)af[ia] * bf[ib];
					mag += fabs((double)af[ia] * bf[ib]);
				}
				size_t ic = (size_t)b * sc + (size_t)m * ldc + n;
				written[ic] = 1;
				double ref = t->alpha * s, bound = fabs(t->alpha) * mag;
				if (t->beta != 0.0f) {
					ref += t->beta * (double)c0[ic];
					bound += fabs(t->beta * (double)c0[ic]);
				}
				if (t->bias) {
					ref += bias[n];
					bound += fabs(bias[n]);
				}
				if (t->gelu)
					ref = gelu(ref);
				double tol = 1e-5 * bound * (t->gelu ? 1.2 : 1.0) + 1e-30;
				if (t->c == LMT_DTYPE_BF16)
					tol += 0x1p-8 * fabs(ref);
				if (t->c == LMT_DTYPE_F16)
					tol += 0x1p-11 * fabs(ref) + 0x1p-25;
				double got = get(C, t->c, ic), e = fabs(got - ref);
				if (!(e <= tol)) {
					if (bad++ < 3)
						tap_diag("  %s: C[%d][%d][%d] = %.9g, expected %.9g (tol %.3g)", what, b, m,
							 n, got, ref, tol);
				}
				if (e / (tol > 0 ? tol : 1) > worst)
					worst = e / tol;
			}
	/* padding: still what was there (compare bits: NaN is not equal to itself) */
	for (size_t i = 0; ok && i < cn; i++)
		if (!written[i]) {
			float x = get(C, t->c, i), y = c0[i];
			if (memcmp(&x, &y, 4) && !(isnan(x) && isnan(y))) {
				if (bad++ < 3)
					tap_diag("  %s: padding C[%zu] written: %g, was %g", what, i, x, y);
			}
		}
	free(written);
	free(A);
	free(B);
	free(C);
	free(af);
	free(bf);
	free(c0);
	free(bias);
	return ok && !bad;
}

static const char *tname(const struct tcase *t)
{
	static char buf[256];
	snprintf(buf, sizeof buf, "%dx%dx%d %s%s %s -> %s, batch %d%s, alpha %g, beta %g%s%s", t->M, t->N, t->K,
		 t->ta ? "T" : "N", t->tb ? "T" : "N", lmt_dtype_name(t->ab), lmt_dtype_name(t->c), t->batch,
		 t->bcast ? " (B broadcast)" : "", t->alpha, t->beta, t->bias ? ", bias" : "", t->gelu ? ", gelu" : "");
	return buf;
}

static void check_case(struct tcase t)
{
	const char *n = tname(&t);
	tap_ok(run_case(&t, n), "%s", n);
}

static const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {129, 3, 200}};
static const int dtypes[] = {LMT_DTYPE_F32, LMT_DTYPE_BF16, LMT_DTYPE_F16};

static void test_plain(void)
{
	for (size_t d = 0; d < 3; d++)
		for (size_t s = 0; s < 4; s++)
			for (int tr = 0; tr < 4; tr++)
				check_case((struct tcase){shapes[s][0], shapes[s][1], shapes[s][2], tr >> 1, tr & 1, 1,
							  dtypes[d], LMT_DTYPE_F32, 1.0f, 0.0f, 0, 0, 0});
}

static void test_features(void)
{
	for (size_t d = 0; d < 3; d++) {
		int ab = dtypes[d];
		for (size_t s = 1; s < 4; s++) {
			int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
			check_case((struct tcase){M, N, K, 0, 1, 1, ab, LMT_DTYPE_F32, 1.0f, 1.0f, 0, 0, 0});
			check_case((struct tcase){M, N, K, 1, 0, 1, ab, LMT_DTYPE_F32, 0.5f, 0.0f, 1, 0, 0});
			check_case((struct tcase){M, N, K, 0, 0, 1, ab, LMT_DTYPE_F32, 1.0f, 0.0f, 1, 1, 0});
			check_case((struct tcase){M, N, K, 1, 1, 3, ab, LMT_DTYPE_F32, 0.125f, 0.0f, 0, 0, 0});
			check_case((struct tcase){M, N, K, 0, 1, 3, ab, LMT_DTYPE_F32, 1.0f, 0.0f, 0, 0, 1});
			check_case((struct tcase){M, N, K, 1, 0, 3, ab, ab, -0.75f, 1.0f, 1, 1, 0});
			check_case((struct tcase){M, N, K, 0, 0, 1, ab, ab, 1.0f, 0.0f, 0, 0, 0});
			check_case((struct tcase){M, N, K, 1, 1, 2, ab, ab, 2.0f, 0.5f, 1, 0, 1});
		}
		check_case((struct tcase){7, 13, 0, 0, 0, 2, ab, LMT_DTYPE_F32, 1.0f, 1.0f, 1, 1, 0});
	}
}

/* The same product twice, and after more distinct shapes than the cache holds, gives
 * the same bits. */
static void test_cache(void)
{
	int M = 33, N = 65, K = 17;
	float *A = xcalloc((size_t)M * K, 4), *B = xcalloc((size_t)K * N, 4), *C1 = xcalloc((size_t)M * N, 4),
	      *C2 = xcalloc((size_t)M * N, 4), *C3 = xcalloc((size_t)M * N, 4);
	for (int i = 0; i < M * K; i++)
		A[i] = (float)unif();
	for (int i = 0; i < K * N; i++)
		B[i] = (float)unif();
	struct lmt_gemm g = {
		.M = M, .N = N, .K = K, .alpha = 1.0f, .A = A, .lda = K, .B = B, .ldb = N, .C = C1, .ldc = N,
		.batch = 1, .ab_dtype = LMT_DTYPE_F32, .c_dtype = LMT_DTYPE_F32,
	};
	struct lmt_err err = {0};
	int rc = lmt_cpu_gemm(cache, &g, &err);
	g.C = C2;
	rc |= lmt_cpu_gemm(cache, &g, &err);
	tap_ok(rc == 0 && !memcmp(C1, C2, (size_t)M * N * 4), "the same product twice (cached primitive): same bits");
	/* 300 other shapes evict it (the cache holds 256) */
	float *x = xcalloc(300, 4), *y = xcalloc(300, 4), *z = xcalloc(300 * 300, 4);
	int bad = 0;
	for (int n = 1; n <= 300 && !bad; n++) {
		for (int i = 0; i < n; i++)
			x[i] = (float)i;
		y[0] = 2.0f;
		struct lmt_gemm h = {
			.M = n, .N = 1, .K = 1, .alpha = 1.0f, .A = x, .lda = 1, .B = y, .ldb = 1, .C = z, .ldc = 1,
			.batch = 1, .ab_dtype = LMT_DTYPE_F32, .c_dtype = LMT_DTYPE_F32,
		};
		if (lmt_cpu_gemm(cache, &h, &err))
			bad = n;
		for (int i = 0; i < n; i++)
			if (z[i] != 2.0f * i)
				bad = n;
	}
	tap_ok(!bad, "300 distinct shapes through a cache of 256 (bad at %d)", bad);
	g.C = C3;
	rc = lmt_cpu_gemm(cache, &g, &err);
	tap_ok(rc == 0 && !memcmp(C1, C3, (size_t)M * N * 4), "the product again after eviction: same bits");
	free(A);
	free(B);
	free(C1);
	free(C2);
	free(C3);
	free(x);
	free(y);
	free(z);
}

static void test_errors(void)
{
	float a = 1, b = 1, c = 0;
	struct lmt_gemm g = {
		.M = 1, .N = 1, .K = 1, .alpha = 1.0f, .A = &a, .lda = 1, .B = &b, .ldb = 1, .C = &c, .ldc = 1,
		.batch = 1, .ab_dtype = LMT_DTYPE_F32, .c_dtype = LMT_DTYPE_BF16,
	};
	struct lmt_err err = {0};
	int rc = lmt_cpu_gemm(cache, &g, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "bf16"), "fp32 inputs into a bf16 C: an error naming the dtypes");
	tap_diag("  %s", err.msg);
	g.c_dtype = LMT_DTYPE_F32;
	g.lda = 0;
	g.K = 2;
	rc = lmt_cpu_gemm(cache, &g, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "lda 0"), "a row stride below the row: an error naming it");
	tap_diag("  %s", err.msg);
	g.lda = 1;
	g.K = 1;
	g.batch = 0;
	rc = lmt_cpu_gemm(cache, &g, &err);
	tap_ok(rc == LMT_EINVAL, "batch 0: an error");
}

int main(void)
{
	struct lmt_err err = {0};
	if (lmt_cpu_gemm_init(&cache, 0, &err)) {
		tap_ok(0, "lmt_cpu_gemm_init: %s", err.msg);
		return tap_done();
	}
	const char *f32 = lmt_cpu_gemm_impl(cache, LMT_DTYPE_F32), *bf16 = lmt_cpu_gemm_impl(cache, LMT_DTYPE_BF16),
		   *f16 = lmt_cpu_gemm_impl(cache, LMT_DTYPE_F16);
	tap_ok(f32[0] && strncmp(f32, "none", 4), "fp32 implementation: %s", f32);
	tap_ok(bf16[0] && strncmp(bf16, "none", 4), "bf16 implementation: %s", bf16);
	tap_ok(f16[0] && strncmp(f16, "none", 4), "fp16 implementation: %s", f16);
	test_plain();
	test_features();
	test_cache();
	test_errors();
	lmt_cpu_gemm_release(cache);
	return tap_done();
}
