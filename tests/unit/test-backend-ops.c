/*
 * test-backend-ops: every operation of struct lmt_backend (backend.h), on every
 * backend this build has (lmt_backend_names()), against plain C references in
 * double written here: ggml's test-backend-ops, for this interface. For the CPU
 * backend, the reference every other backend is tested against, the reference is
 * this file's naive implementation of the formulas in backend.h.
 *
 * The rules every check follows:
 *   - inputs go to the device through to_device, results come back through to_host
 *     into separate host buffers (never read in place, so a backend whose memory is
 *     not the host's passes the same test);
 *   - every output is poisoned first (all bytes 0xFF: a NaN in fp32, bf16 and fp16)
 *     and carries a poisoned guard past its end, so an element left unwritten shows
 *     as NaN and a write past the end as a changed guard; where an op writes only
 *     part of a buffer (attention with q0 > 0) the rest must stay poisoned;
 *   - shapes are not multiples of any tile size (1, 3, 17, 33, 65, 129, 4099);
 *   - each dtype an op takes is run: fp32, bf16, fp16.
 *
 * Tolerances, by what is compared (each check's line states its own):
 *   - fp32 results: ~1e-5 relative to the magnitude of the terms summed (the order
 *     of fp32 accumulation is the backend's choice), with an absolute floor where
 *     a result cancels to near zero;
 *   - GEMMs read inputs pre-rounded to their dtype, so products are exact in fp32
 *     and the same 1e-5 bound holds for bf16 and fp16 inputs (backend.h: products
 *     accumulated in fp32); C stored as bf16 adds half an ulp, 2^-8 relative (an
 *     8-bit significand, the "~1e-2" class), C as fp16 2^-11 relative + 2^-25
 *     absolute (11 bits and subnormals, the "~1e-3" class);
 *   - typed outputs of layernorm_fwd and gelu_fwd: the fp32 value (a few fp32 ulp
 *     from the double) rounded once to the dtype, which near a midpoint may go to
 *     either neighbour: within 1 ulp of the dtype of the double result;
 *   - casts are exact: round to nearest even is one answer, bit for bit (core/dtype.h's
 *     conversions are the reference; NaN compared as NaN, payloads may differ).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "tap.h"

#define GUARD 64 /* poisoned bytes after every output */

static struct lmt_backend *be;
static const char *bname;
static struct lmt_rng rng;
static size_t guard_bad; /* outputs whose guard changed, since the last guard_check */

static const int dts[3] = { LMT_DTYPE_F32, LMT_DTYPE_BF16, LMT_DTYPE_F16 };

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "test-backend-ops: out of memory\n");
		exit(1);
	}
	return p;
}

static double unif(double lo, double hi)
{
	return lo + (hi - lo) * ((lmt_rng_next(&rng) >> 11) * 0x1.0p-53);
}

/* ---- device buffers ---- */

static void *dalloc(size_t bytes)
{
	void *p = be->alloc(be, bytes);
	if (!p) {
		fprintf(stderr, "test-backend-ops: %s: cannot allocate %zu bytes\n", bname, bytes);
		exit(1);
	}
	return p;
}

static void poison(void *d, size_t bytes)
{
	unsigned char *h = xmalloc(bytes);
	memset(h, 0xff, bytes);
	be->to_device(be, d, h, bytes);
	free(h);
}

/* an output: bytes plus the guard, all poisoned */
static void *dout(size_t bytes)
{
	void *d = dalloc(bytes + GUARD);
	poison(d, bytes + GUARD);
	return d;
}

/* an input: a device copy of host data */
static void *din(const void *h, size_t bytes)
{
	void *d = dalloc(bytes);
	be->to_device(be, d, h, bytes);
	return d;
}

/* an input and output (accumulated into): host data plus a poisoned guard */
static void *dinout(const void *h, size_t bytes)
{
	void *d = dout(bytes);
	be->to_device(be, d, h, bytes);
	return d;
}

static int all_ff(const void *p, size_t bytes)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < bytes; i++)
		if (c[i] != 0xff)
			return 0;
	return 1;
}

/* A host copy of an output of `bytes` (made by dout/dinout); its guard is checked. */
static void *fetch(const void *d, size_t bytes)
{
	unsigned char *h = xmalloc(bytes + GUARD);
	be->to_host(be, h, d, bytes + GUARD);
	guard_bad += !all_ff(h + bytes, GUARD);
	return h;
}

/* Every op section ends here: no guard written, no failure recorded. */
static void section_end(const char *op)
{
	struct lmt_err err = { 0 };
	int rc = be->status(be, &err);
	tap_ok(guard_bad == 0 && rc == 0, "%s %s: nothing written past an output; status 0 (%s)", bname, op,
	       rc ? err.msg : "no failure");
	guard_bad = 0;
}

/* ---- dtypes ---- */

static float get(const void *p, int dt, size_t i)
{
	if (dt == LMT_DTYPE_BF16)
		return lmt_bf16_to_f32(((const uint16_t *)p)[i]);
	if (dt == LMT_DTYPE_F16)
		return lmt_f16_to_f32(((const uint16_t *)p)[i]);
	return ((const float *)p)[i];
}

static void put(void *p, int dt, size_t i, float v)
{
	if (dt == LMT_DTYPE_BF16)
		((uint16_t *)p)[i] = lmt_f32_to_bf16(v);
	else if (dt == LMT_DTYPE_F16)
		((uint16_t *)p)[i] = lmt_f32_to_f16(v);
	else
		((float *)p)[i] = v;
}

/* One ulp of dtype at the magnitude of x (subnormals: the smallest step). */
static double ulp(int dt, double x)
{
	int e;
	if (x == 0)
		return dt == LMT_DTYPE_BF16 ? 0x1p-133 : dt == LMT_DTYPE_F16 ? 0x1p-24 : 0x1p-149;
	frexp(fabs(x), &e);
	e -= 1; /* |x| in [2^e, 2^(e+1)) */
	if (dt == LMT_DTYPE_BF16)
		return ldexp(1, (e < -126 ? -126 : e) - 7);
	if (dt == LMT_DTYPE_F16)
		return ldexp(1, (e < -14 ? -14 : e) - 10);
	return ldexp(1, (e < -126 ? -126 : e) - 23);
}

static void fill(float *x, size_t n, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)unif(lo, hi);
}

static float *frand(size_t n, double lo, double hi)
{
	float *x = xmalloc(n * sizeof *x);
	fill(x, n, lo, hi);
	return x;
}

static double *dzero(size_t n)
{
	double *d = calloc(n ? n : 1, sizeof *d);
	if (!d)
		exit(1);
	return d;
}

/*
 * got (n values read as dtype dt) against ref: each within atol + rtol * mag[i]
 * (mag NULL: |ref[i]|) plus ulps * ulp(dt, ref[i]); reports the worst element.
 */
static int check(const char *what, const void *got, int dt, const double *ref, const double *mag, size_t n,
		 double rtol, double atol, double ulps)
{
	size_t bad = 0, wi = 0;
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double g = get(got, dt, i), e = fabs(g - ref[i]);
		double lim = atol + rtol * (mag ? mag[i] : fabs(ref[i])) + ulps * ulp(dt, ref[i]);
		double q = lim > 0 ? e / lim : e == 0 ? 0 : INFINITY;
		if (!(e <= lim))
			bad++;
		if (!(q <= worst)) {
			worst = isnan(q) ? INFINITY : q;
			wi = i;
		}
	}
	int ok = tap_ok(bad == 0, "%s %s: %zu values within the limit (worst at %.2g of it)", bname, what, n, worst);
	if (!ok)
		tap_diag("  %zu outside; worst [%zu]: got %.9g, expected %.9g", bad, wi, n ? get(got, dt, wi) : 0.0,
			 n ? ref[wi] : 0.0);
	return ok;
}

static double maxabs(const double *x, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs(x[i]));
	return m;
}

/* ---- memory, capabilities ---- */

static void test_memory(void)
{
	enum { n = 4099 };
	float h[n], back[n], zero[n];
	fill(h, n, -1, 1);
	memset(zero, 0, sizeof zero);
	float *a = dalloc(n * 4), *b = dalloc(n * 4);
	be->to_host(be, back, a, sizeof back);
	tap_ok(!memcmp(back, zero, sizeof back), "%s alloc returns zeroed memory", bname);
	be->to_device(be, a, h, sizeof h);
	be->to_host(be, back, a, sizeof back);
	int ok = !memcmp(back, h, sizeof h);
	be->copy(be, b, a, sizeof h);
	memset(back, 0, sizeof back);
	be->to_host(be, back, b, sizeof back);
	tap_ok(ok && !memcmp(back, h, sizeof h), "%s to_device, to_host and copy carry the bytes", bname);
	be->zero(be, b + 17, 65 * 4);
	be->to_host(be, back, b, sizeof back);
	ok = 1;
	for (size_t i = 0; i < n; i++)
		ok &= back[i] == (i >= 17 && i < 17 + 65 ? 0.0f : h[i]);
	tap_ok(ok, "%s zero clears exactly its range", bname);

	/* asynchronous copies through pinned host memory, ordered by an event */
	float *ph = be->alloc_host(be, sizeof h), *pb = be->alloc_host(be, sizeof h);
	tap_ok(ph && pb, "%s alloc_host", bname);
	if (ph && pb) {
		memcpy(ph, h, sizeof h);
		poison(b, sizeof h);
		be->to_device_async(be, b, ph, sizeof h, 1);
		be->event_record(be, 0, 1);
		be->event_wait(be, 0, 0);
		be->to_host_async(be, pb, b, sizeof h, 0);
		be->sync(be);
		tap_ok(!memcmp(pb, h, sizeof h), "%s to_device_async, an event, to_host_async, sync carry the bytes", bname);
		be->free_host(be, ph);
		be->free_host(be, pb);
	}
	if (be->is_host) {
		/* is_host promises device pointers are host memory */
		tap_ok(!memcmp(a, h, sizeof h), "%s is_host: the device buffer reads in place", bname);
	}
	be->free(be, a);
	be->free(be, b);
	section_end("memory");
}

static void test_capabilities(void)
{
	unsigned want = 1u << LMT_DTYPE_F32 | 1u << LMT_DTYPE_BF16 | 1u << LMT_DTYPE_F16;
	tap_ok((be->dtypes & want) == want && (be->fast_dtypes & ~be->dtypes) == 0 &&
		       (be->fast_dtypes & 1u << LMT_DTYPE_F32),
	       "%s capabilities: dtypes 0x%x has fp32, bf16, fp16; fast_dtypes 0x%x within them, fp32 among them", bname,
	       be->dtypes, be->fast_dtypes);
	int named = 1;
	for (int i = 0; i < 3; i++) {
		const char *s = be->gemm_impl(be, dts[i]);
		named &= s && *s;
		tap_diag("%s gemm %s: %s", bname, lmt_dtype_name(dts[i]), s ? s : "(null)");
	}
	tap_ok(named, "%s gemm_impl names a kernel for each dtype", bname);
}

/* ---- gemm ---- */

static double gelu_ref(double x)
{
	return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct gcase {
	int ta, tb, M, N, K, batch;
	float alpha, beta;
	int bias, gelu, shared_b;
	const char *label;
};

static void gemm_case(int abt, int ct, const struct gcase *t)
{
	int ta = t->ta, tb = t->tb, M = t->M, N = t->N, K = t->K, nb = t->batch;
	int ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
	int lda = ca + 3, ldb = cb + 2, ldc = N + 4;
	long sa = (long)ra * lda + 5, sb = t->shared_b ? 0 : (long)rb * ldb + 1, sc = (long)M * ldc + 7;
	size_t na = (size_t)sa * nb, nbb = t->shared_b ? (size_t)rb * ldb : (size_t)sb * nb, nc = (size_t)sc * nb;
	size_t ea = lmt_dtype_size(abt), ec = lmt_dtype_size(ct);
	/* the padding of A and B is NaN: a GEMM that reads it poisons its result */
	unsigned char *hA = xmalloc(na * ea), *hB = xmalloc(nbb * ea), *hC = xmalloc(nc * ec);
	memset(hA, 0xff, na * ea), memset(hB, 0xff, nbb * ea), memset(hC, 0xff, nc * ec);
	for (int b = 0; b < nb; b++)
		for (int r = 0; r < ra; r++)
			for (int c = 0; c < ca; c++)
				put(hA, abt, (size_t)(b * sa + (long)r * lda + c), (float)unif(-1, 1));
	for (int b = 0; b < (t->shared_b ? 1 : nb); b++)
		for (int r = 0; r < rb; r++)
			for (int c = 0; c < cb; c++)
				put(hB, abt, (size_t)(b * sb + (long)r * ldb + c), (float)unif(-1, 1));
	if (t->beta != 0)
		for (int b = 0; b < nb; b++)
			for (int i = 0; i < M; i++)
				for (int j = 0; j < N; j++)
					put(hC, ct, (size_t)(b * sc + (long)i * ldc + j), (float)unif(-1, 1));
	float *hbias = frand((size_t)N, -1, 1);
	void *A = din(hA, na * ea), *B = din(hB, nbb * ea), *C = dinout(hC, nc * ec);
	float *bias = t->bias ? din(hbias, (size_t)N * 4) : NULL;
	struct lmt_gemm g = { .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = t->alpha, .beta = t->beta,
			      .A = A, .lda = lda, .sa = sa, .B = B, .ldb = ldb, .sb = sb, .C = C, .ldc = ldc, .sc = sc,
			      .batch = nb, .ab_dtype = abt, .c_dtype = ct, .bias = bias, .gelu = t->gelu };
	be->gemm(be, &g);
	unsigned char *got = fetch(C, nc * ec);
	/* the result region, gathered; the padding of C compared bytewise */
	size_t nr = (size_t)nb * M * N, k = 0, pad_bad = 0;
	double *ref = dzero(nr), *mag = dzero(nr);
	float *res = xmalloc(nr * 4);
	for (int b = 0; b < nb; b++)
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++, k++) {
				double s = 0, m = 0;
				for (int q = 0; q < K; q++) {
					double x = get(hA, abt, (size_t)(b * sa + (ta ? (long)q * lda + i : (long)i * lda + q)));
					double y = get(hB, abt, (size_t)(b * sb + (tb ? (long)j * ldb + q : (long)q * ldb + j)));
					s += x * y;
					m += fabs(x * y);
				}
				size_t o = (size_t)(b * sc + (long)i * ldc + j);
				double c0 = t->beta != 0 ? get(hC, ct, o) : 0, bj = t->bias ? hbias[j] : 0;
				double pre = t->alpha * s + t->beta * c0 + bj;
				ref[k] = t->gelu ? gelu_ref(pre) : pre;
				mag[k] = fabs(t->alpha) * m + fabs(t->beta * c0) + fabs(bj);
				res[k] = get(got, ct, o);
			}
	for (size_t i = 0; i < nc; i++) {
		size_t in = i % (size_t)sc, r = in / (size_t)ldc, c = in % (size_t)ldc;
		if (r >= (size_t)M || c >= (size_t)N)
			pad_bad += !all_ff(got + i * ec, ec);
	}
	/* accumulation: 1e-5 of the magnitude, times 1.2 through GELU (slope < 1.13),
	 * plus 1e-6 absolute for GELU's fp32 tanh; C's own rounding: see the top */
	double rtol = 1e-5 * (t->gelu ? 1.2 : 1), atol = t->gelu ? 1e-6 : 0, crel = 0;
	if (ct == LMT_DTYPE_BF16)
		crel = 0x1p-8;
	else if (ct == LMT_DTYPE_F16)
		crel = 0x1p-11, atol += 0x1p-25;
	for (size_t i = 0; i < nr; i++)
		mag[i] = mag[i] + crel / rtol * fabs(ref[i]);
	char what[256];
	snprintf(what, sizeof what, "gemm %s->%s %s%s M=%d N=%d K=%d batch %d %s (1e-5 of sum|alpha a b| + |beta c| + "
		 "|bias|)", lmt_dtype_name(abt), lmt_dtype_name(ct), ta ? "T" : "N", tb ? "T" : "N", M, N, K, nb, t->label);
	check(what, res, LMT_DTYPE_F32, ref, mag, nr, rtol, atol, 0);
	tap_ok(pad_bad == 0, "%s gemm %s->%s %s: C's padding between rows and batches untouched (%zu touched)", bname,
	       lmt_dtype_name(abt), lmt_dtype_name(ct), t->label, pad_bad);
	be->free(be, A), be->free(be, B), be->free(be, C), be->free(be, bias);
	free(hA), free(hB), free(hC), free(hbias), free(got), free(ref), free(mag), free(res);
}

static void test_gemm(void)
{
	static const struct gcase cases[] = {
		{ 0, 0, 17, 33, 65, 3, 1, 0, 0, 0, 0, "beta 0 over NaN C" },
		{ 0, 1, 1, 3, 129, 3, 1, 0, 0, 0, 0, "beta 0 over NaN C" },
		{ 1, 0, 65, 17, 3, 3, 1, 0, 0, 0, 0, "beta 0 over NaN C" },
		{ 1, 1, 33, 129, 1, 3, 1, 0, 0, 0, 0, "beta 0 over NaN C" },
		{ 0, 1, 17, 129, 33, 2, 1, 1, 0, 0, 0, "beta 1 (accumulate)" },
		{ 1, 0, 65, 3, 17, 1, -1.5f, 0.5f, 1, 0, 0, "alpha -1.5 beta 0.5 bias" },
		{ 0, 0, 33, 65, 129, 1, 1, 0, 1, 1, 0, "bias + gelu" },
		{ 1, 1, 3, 17, 33, 2, 0.7f, 0, 0, 1, 0, "alpha 0.7 gelu" },
		{ 0, 0, 3, 17, 65, 3, 1, 0.3f, 0, 0, 1, "shared B (batch stride 0), beta 0.3" },
		/* past one tile of a GPU kernel in every dimension */
		{ 0, 1, 300, 257, 515, 1, 1, 0, 1, 1, 0, "larger, bias + gelu" },
	};
	for (int a = 0; a < 3; a++)
		for (int c = 0; c < 2; c++)
			for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
				gemm_case(dts[a], c ? dts[a] : LMT_DTYPE_F32, &cases[i]);
	section_end("gemm");
}

/* ---- cast ---- */

static int same_value(int dt, const void *a, const void *b, size_t i)
{
	float x = get(a, dt, i), y = get(b, dt, i);
	if (isnan(x) || isnan(y))
		return isnan(x) && isnan(y);
	size_t e = lmt_dtype_size(dt);
	return !memcmp((const char *)a + i * e, (const char *)b + i * e, e);
}

static void test_cast_rne(void)
{
	/* the reference itself, on hand-worked ties and edges: (fp32 bits, bf16, fp16) */
	static const struct {
		uint32_t f;
		uint16_t bf, h;
	} tbl[] = {
		{ 0x3f808000u, 0x3f80, 0x3c04 }, /* 1 + 2^-8: a bf16 tie, to even 1.0 */
		{ 0x3f818000u, 0x3f82, 0x3c0c }, /* 1 + 3 2^-8: a bf16 tie, to even */
		{ 0x3f800001u, 0x3f80, 0x3c00 }, /* 1 + 2^-23 */
		{ 0x3f801000u, 0x3f80, 0x3c00 }, /* 1 + 2^-11: an fp16 tie, to even 1.0 */
		{ 0x3f803000u, 0x3f80, 0x3c02 }, /* 1 + 3 2^-11: an fp16 tie, to even */
		{ 0x477fe000u, 0x4780, 0x7bff }, /* 65504 */
		{ 0x477fefffu, 0x4780, 0x7bff }, /* just below 65520 */
		{ 0x477ff000u, 0x4780, 0x7c00 }, /* 65520: the tie past the range: infinity */
		{ 0x33000000u, 0x3300, 0x0000 }, /* 2^-25: half the smallest subnormal, a tie to 0 */
		{ 0x33000001u, 0x3300, 0x0001 }, /* just above: the smallest subnormal */
		{ 0x33c00000u, 0x33c0, 0x0002 }, /* 3 2^-25: a tie to even, 2 2^-24 */
		{ 0x80000000u, 0x8000, 0x8000 }, /* -0 */
		{ 0x7f800000u, 0x7f80, 0x7c00 }, /* inf */
		{ 0xff800000u, 0xff80, 0xfc00 }, /* -inf */
	};
	int ok = 1;
	for (size_t i = 0; i < sizeof tbl / sizeof tbl[0]; i++) {
		float x = lmt_float_of(tbl[i].f);
		if (lmt_f32_to_bf16(x) != tbl[i].bf || lmt_f32_to_f16(x) != tbl[i].h) {
			ok = 0;
			tap_diag("  0x%08x: bf16 0x%04x (want 0x%04x), fp16 0x%04x (want 0x%04x)", tbl[i].f,
				 lmt_f32_to_bf16(x), tbl[i].bf, lmt_f32_to_f16(x), tbl[i].h);
		}
	}
	tap_ok(ok, "core/dtype.h's conversions round hand-worked ties to even and edges as IEEE says");

	/* the backend's casts, all pairs, against the reference on the same values */
	enum { n = 4099 };
	float *v = xmalloc(n * 4);
	size_t k = 0;
	for (size_t i = 0; i < sizeof tbl / sizeof tbl[0]; i++)
		v[k++] = lmt_float_of(tbl[i].f);
	v[k++] = NAN, v[k++] = -NAN, v[k++] = FLT_MAX, v[k++] = FLT_MIN, v[k++] = FLT_MIN / 8, v[k++] = 0;
	v[k++] = lmt_float_of(0x00010000u); /* an fp32 subnormal bf16 holds exactly */
	for (; k < n; k++) {
		/* any exponent fp16 and bf16 meet, both signs; every third one a tie of one of them */
		float x = (float)(ldexp(unif(1, 2), (int)unif(-28, 18)) * (unif(0, 1) < 0.5 ? -1 : 1));
		uint32_t u = lmt_bits_of(x);
		if (k % 3 == 1)
			u = (u & ~0xffffu) | 0x8000u;
		else if (k % 3 == 2)
			u = (u & ~0x1fffu) | 0x1000u;
		v[k] = lmt_float_of(u);
	}
	for (int si = 0; si < 3; si++)
		for (int di = 0; di < 3; di++) {
			int s = dts[si], d = dts[di];
			size_t es = lmt_dtype_size(s), ed = lmt_dtype_size(d);
			unsigned char *hs = xmalloc(n * es), *want = xmalloc(n * ed);
			for (size_t i = 0; i < n; i++)
				put(hs, s, i, v[i]);
			for (size_t i = 0; i < n; i++)
				put(want, d, i, get(hs, s, i));
			void *src = din(hs, n * es), *dst = dout(n * ed);
			be->cast(be, dst, d, src, s, n, 0, 0);
			unsigned char *got = fetch(dst, n * ed);
			size_t bad = 0, wi = 0;
			for (size_t i = 0; i < n; i++)
				if (!same_value(d, got, want, i))
					wi = bad++ ? wi : i;
			if (!tap_ok(bad == 0, "%s cast %s -> %s of %d values (ties, subnormals, overflow, inf, NaN): bitwise "
					      "the reference's round to nearest even", bname, lmt_dtype_name(s),
				    lmt_dtype_name(d), n))
				tap_diag("  %zu differ; first [%zu] %.9g: got %.9g, expected %.9g", bad, wi, get(hs, s, wi),
					 get(got, d, wi), get(want, d, wi));
			be->free(be, src), be->free(be, dst);
			free(hs), free(want), free(got);
		}
	free(v);
}

/* the two neighbours of x in dt, by magnitude: *lo <= |x| <= *hi */
static void neighbours(int dt, float x, uint16_t *lo, uint16_t *hi)
{
	uint16_t h = dt == LMT_DTYPE_BF16 ? lmt_f32_to_bf16(x) : lmt_f32_to_f16(x);
	float r = get(&h, dt, 0);
	if (fabsf(r) <= fabsf(x))
		*lo = h, *hi = (uint16_t)(h + 1);
	else
		*hi = h, *lo = (uint16_t)(h - 1);
}

static void test_cast_sr(void)
{
	enum { n = 20000 };
	for (int di = 1; di < 3; di++) {
		int dt = dts[di];
		/* values between neighbours at various fractions, both signs, an fp16 subnormal */
		float xs[4] = { 1.0f + 0.3f * (dt == LMT_DTYPE_BF16 ? 0x1p-7f : 0x1p-10f),
				-(3.0f + 0.81f * (dt == LMT_DTYPE_BF16 ? 0x1p-6f : 0x1p-9f)), 5.37f * 0x1p-24f,
				dt == LMT_DTYPE_BF16 ? 3.14159e10f : 1000.1f };
		for (int xi = 0; xi < 4; xi++) {
			float x = xs[xi], *hx = xmalloc(n * 4);
			for (size_t i = 0; i < n; i++)
				hx[i] = x;
			float *src = din(hx, n * 4);
			uint16_t *d1 = dout(n * 2), *d2 = dout(n * 2), *d3 = dout(n * 2);
			be->cast(be, d1, dt, src, LMT_DTYPE_F32, n, 1, 7);
			be->cast(be, d2, dt, src, LMT_DTYPE_F32, n, 1, 7);
			be->cast(be, d3, dt, src, LMT_DTYPE_F32, n, 1, 8);
			uint16_t *r1 = fetch(d1, n * 2), *r2 = fetch(d2, n * 2), *r3 = fetch(d3, n * 2), lo, hi;
			neighbours(dt, x, &lo, &hi);
			size_t nhi = 0, other = 0, differ = 0;
			for (size_t i = 0; i < n; i++) {
				nhi += r1[i] == hi;
				other += r1[i] != hi && r1[i] != lo;
				differ += r1[i] != r3[i];
			}
			double flo = fabs(get(&lo, dt, 0)), fhi = fabs(get(&hi, dt, 0)), p = (fabs(x) - flo) / (fhi - flo);
			double mean = flo + (fhi - flo) * (double)nhi / n, sigma = (fhi - flo) * sqrt(p * (1 - p) / n);
			tap_ok(!memcmp(r1, r2, n * 2), "%s cast fp32 -> %s stochastic, %.9g: the same seed gives the same bits",
			       bname, lmt_dtype_name(dt), x);
			tap_ok(differ > 0, "%s cast fp32 -> %s stochastic, %.9g: another seed gives other bits (%zu of %d)",
			       bname, lmt_dtype_name(dt), x, differ, n);
			tap_ok(other == 0, "%s cast fp32 -> %s stochastic, %.9g: every result one of its two neighbours "
					   "(%zu are not)", bname, lmt_dtype_name(dt), x, other);
			tap_ok(fabs(mean - fabs(x)) <= 3 * sigma, "%s cast fp32 -> %s stochastic, %.9g: mean magnitude %.9g "
							       "within 3 sigma (%.3g) of |x| (rounded up %.4f, expected %.4f)",
			       bname, lmt_dtype_name(dt), x, mean, sigma, (double)nhi / n, p);
			be->free(be, src), be->free(be, d1), be->free(be, d2), be->free(be, d3);
			free(hx), free(r1), free(r2), free(r3);
		}
		/* values a dtype holds exactly, and the non-finite ones, are kept */
		float sp[6] = { 1.0f, 0.5f, 0.0f, INFINITY, -INFINITY, NAN };
		float *src = din(sp, sizeof sp);
		uint16_t *d = dout(12), want[6];
		be->cast(be, d, dt, src, LMT_DTYPE_F32, 6, 1, 99);
		uint16_t *got = fetch(d, 12);
		int ok = 1;
		for (int i = 0; i < 6; i++) {
			put(want, dt, (size_t)i, sp[i]);
			ok &= same_value(dt, got, want, (size_t)i);
		}
		tap_ok(ok, "%s cast fp32 -> %s stochastic keeps exact values, infinities and NaN", bname, lmt_dtype_name(dt));
		be->free(be, src), be->free(be, d);
		free(got);
	}
}

/* ---- embedding ---- */

static void test_embed(void)
{
	/* the last: more rows and channels than one block of a GPU kernel */
	static const int shapes[3][4] = { { 1, 1, 1, 1 }, { 3, 17, 33, 65 }, { 2, 129, 257, 301 } }; /* B, T, C, V */
	for (int si = 0; si < 3; si++) {
		int B = shapes[si][0], T = shapes[si][1], C = shapes[si][2], V = shapes[si][3], N = B * T;
		int32_t *tok = xmalloc((size_t)N * 4);
		for (int i = 0; i < N; i++)
			tok[i] = (int32_t)(lmt_rng_next(&rng) % (uint64_t)(V < 7 ? V : 7)); /* repeats */
		float *wte = frand((size_t)V * C, -1, 1), *wpe = frand((size_t)T * C, -1, 1);
		float *dy = frand((size_t)N * C, -1, 1), *dwte = frand((size_t)V * C, -1, 1), *dwpe = frand((size_t)T * C, -1, 1);
		int32_t *dtok = din(tok, (size_t)N * 4);
		float *dwte_d = din(wte, (size_t)V * C * 4), *dwpe_d = din(wpe, (size_t)T * C * 4);
		float *out = dout((size_t)N * C * 4);
		be->embed_fwd(be, out, dtok, dwte_d, dwpe_d, B, T, C);
		float *got = fetch(out, (size_t)N * C * 4);
		double *ref = dzero((size_t)N * C);
		for (int n = 0; n < N; n++)
			for (int c = 0; c < C; c++)
				ref[(size_t)n * C + c] = (float)((double)wte[(size_t)tok[n] * C + c] + wpe[(size_t)(n % T) * C + c]);
		char what[160];
		/* one fp32 addition: the correctly rounded sum, exactly */
		snprintf(what, sizeof what, "embed_fwd B=%d T=%d C=%d: exactly the rounded fp32 sum", B, T, C);
		check(what, got, LMT_DTYPE_F32, ref, NULL, (size_t)N * C, 0, 0, 0);
		float *ddy = din(dy, (size_t)N * C * 4), *gw = dinout(dwte, (size_t)V * C * 4), *gp = dinout(dwpe, (size_t)T * C * 4);
		be->embed_bwd(be, gw, gp, ddy, dtok, B, T, C);
		float *hw = fetch(gw, (size_t)V * C * 4), *hp = fetch(gp, (size_t)T * C * 4);
		double *rw = dzero((size_t)V * C), *mw = dzero((size_t)V * C), *rp = dzero((size_t)T * C), *mp = dzero((size_t)T * C);
		for (size_t i = 0; i < (size_t)V * C; i++)
			rw[i] = dwte[i], mw[i] = fabs(dwte[i]);
		for (size_t i = 0; i < (size_t)T * C; i++)
			rp[i] = dwpe[i], mp[i] = fabs(dwpe[i]);
		for (int n = 0; n < N; n++)
			for (int c = 0; c < C; c++) {
				double d = dy[(size_t)n * C + c];
				rw[(size_t)tok[n] * C + c] += d, mw[(size_t)tok[n] * C + c] += fabs(d);
				rp[(size_t)(n % T) * C + c] += d, mp[(size_t)(n % T) * C + c] += fabs(d);
			}
		/* fp32 sums in the backend's order: 1e-5 of the summed magnitudes */
		snprintf(what, sizeof what, "embed_bwd B=%d T=%d C=%d dwte (repeated ids, accumulates; 1e-5 of sum |terms|)",
			 B, T, C);
		check(what, hw, LMT_DTYPE_F32, rw, mw, (size_t)V * C, 1e-5, 0, 0);
		snprintf(what, sizeof what, "embed_bwd B=%d T=%d C=%d dwpe (accumulates; 1e-5 of sum |terms|)", B, T, C);
		check(what, hp, LMT_DTYPE_F32, rp, mp, (size_t)T * C, 1e-5, 0, 0);
		be->free(be, dtok), be->free(be, dwte_d), be->free(be, dwpe_d), be->free(be, out), be->free(be, ddy);
		be->free(be, gw), be->free(be, gp);
		free(tok), free(wte), free(wpe), free(dy), free(dwte), free(dwpe), free(got), free(ref), free(hw), free(hp);
		free(rw), free(mw), free(rp), free(mp);
	}
	section_end("embed");
}

/* ---- layer norm ---- */

static void test_layernorm(void)
{
	static const int shapes[4][2] = { { 1, 1 }, { 3, 33 }, { 17, 129 }, { 1000, 129 } }; /* C <= 129: see the bound below */
	char what[200];
	for (int si = 0; si < 4; si++) {
		int N = shapes[si][0], C = shapes[si][1];
		size_t NC = (size_t)N * C;
		float *x = frand(NC, 1, 5), *w = frand((size_t)C, 0.5, 1.5), *b = frand((size_t)C, -0.5, 0.5);
		double *ro = dzero(NC), *rm = dzero((size_t)N), *rs = dzero((size_t)N);
		for (int n = 0; n < N; n++) {
			double m = 0, var = 0;
			for (int c = 0; c < C; c++)
				m += x[(size_t)n * C + c];
			m /= C;
			for (int c = 0; c < C; c++)
				var += (x[(size_t)n * C + c] - m) * (x[(size_t)n * C + c] - m);
			double s = 1 / sqrt(var / C + 1e-5);
			for (int c = 0; c < C; c++)
				ro[(size_t)n * C + c] = (x[(size_t)n * C + c] - m) * s * w[c] + b[c];
			rm[n] = m, rs[n] = s;
		}
		float *dx = din(x, NC * 4), *dw = din(w, (size_t)C * 4), *db = din(b, (size_t)C * 4);
		float *mean = dout((size_t)N * 4), *rstd = dout((size_t)N * 4);
		for (int di = 0; di < 3; di++) {
			int dt = dts[di];
			size_t e = lmt_dtype_size(dt);
			void *out = dout(NC * e), *out2 = dout(NC * e);
			poison(mean, (size_t)N * 4 + GUARD), poison(rstd, (size_t)N * 4 + GUARD);
			be->layernorm_fwd(be, out, dt, mean, rstd, dx, dw, db, N, C);
			/* without statistics: the same output, nothing else written */
			be->layernorm_fwd(be, out2, dt, NULL, NULL, dx, dw, db, N, C);
			void *got = fetch(out, NC * e), *got2 = fetch(out2, NC * e);
			float *hm = fetch(mean, (size_t)N * 4), *hr = fetch(rstd, (size_t)N * 4);
			/* fp32: sums over C and one rsqrt, 1e-5 relative; centring cancels: the
			 * fp32 mean of up to 129 values around 3 is off by ~1e-6 absolute, which
			 * rstd (~0.9) and w (< 1.5) carry into outputs near zero: 4e-6 absolute.
			 * bf16/fp16: that value rounded once, plus 1 ulp of the dtype */
			snprintf(what, sizeof what, "layernorm_fwd N=%d C=%d out %s (%s)", N, C, lmt_dtype_name(dt),
				 dt == LMT_DTYPE_F32 ? "1e-5 relative + 4e-6" : "4e-6 + 1 ulp of the dtype");
			check(what, got, dt, ro, NULL, NC, dt == LMT_DTYPE_F32 ? 1e-5 : 0, 4e-6, dt == LMT_DTYPE_F32 ? 0 : 1);
			snprintf(what, sizeof what, "layernorm_fwd N=%d C=%d %s mean and rstd (1e-5 relative + 1e-6)", N, C,
				 lmt_dtype_name(dt));
			check(what, hm, LMT_DTYPE_F32, rm, NULL, (size_t)N, 1e-5, 1e-6, 0);
			check(what, hr, LMT_DTYPE_F32, rs, NULL, (size_t)N, 1e-5, 1e-6, 0);
			tap_ok(!memcmp(got, got2, NC * e), "%s layernorm_fwd N=%d C=%d %s with NULL mean and rstd: the same bits",
			       bname, N, C, lmt_dtype_name(dt));
			be->free(be, out), be->free(be, out2);
			free(got), free(got2), free(hm), free(hr);
		}
		/* backward (fp32): the formula in double from double statistics */
		float *dy = frand(NC, -1, 1), *gx0 = frand(NC, -1, 1), *gw0 = frand((size_t)C, -1, 1), *gb0 = frand((size_t)C, -1, 1);
		poison(mean, (size_t)N * 4 + GUARD), poison(rstd, (size_t)N * 4 + GUARD);
		void *scratch = dout(NC * 4);
		be->layernorm_fwd(be, scratch, LMT_DTYPE_F32, mean, rstd, dx, dw, db, N, C);
		float *ddy = din(dy, NC * 4), *gx = dinout(gx0, NC * 4), *gw = dinout(gw0, (size_t)C * 4), *gb = dinout(gb0, (size_t)C * 4);
		be->layernorm_bwd(be, gx, gw, gb, ddy, dx, dw, mean, rstd, N, C);
		float *hx = fetch(gx, NC * 4), *hw = fetch(gw, (size_t)C * 4), *hb = fetch(gb, (size_t)C * 4);
		double *rx = dzero(NC), *rw = dzero((size_t)C), *rb = dzero((size_t)C);
		for (int c = 0; c < C; c++)
			rw[c] = gw0[c], rb[c] = gb0[c];
		for (int n = 0; n < N; n++) {
			double a = 0, bs = 0;
			for (int c = 0; c < C; c++) {
				double xh = (x[(size_t)n * C + c] - rm[n]) * rs[n], dn = dy[(size_t)n * C + c] * w[c];
				a += dn, bs += dn * xh;
				rw[c] += dy[(size_t)n * C + c] * xh;
				rb[c] += dy[(size_t)n * C + c];
			}
			a /= C, bs /= C;
			for (int c = 0; c < C; c++) {
				double xh = (x[(size_t)n * C + c] - rm[n]) * rs[n], dn = dy[(size_t)n * C + c] * w[c];
				rx[(size_t)n * C + c] = gx0[(size_t)n * C + c] + rs[n] * (dn - a - xh * bs);
			}
		}
		/* float statistics and two float reductions over C that cancel: 1e-4
		 * relative + 1e-5 of the largest value; a wrong term is O(1) off */
		snprintf(what, sizeof what, "layernorm_bwd N=%d C=%d dinp (accumulates; 1e-4 relative + 1e-5 max)", N, C);
		check(what, hx, LMT_DTYPE_F32, rx, NULL, NC, 1e-4, 1e-5 * maxabs(rx, NC), 0);
		snprintf(what, sizeof what, "layernorm_bwd N=%d C=%d dw (accumulates; 1e-4 relative + 1e-5 max)", N, C);
		check(what, hw, LMT_DTYPE_F32, rw, NULL, (size_t)C, 1e-4, 1e-5 * maxabs(rw, (size_t)C), 0);
		snprintf(what, sizeof what, "layernorm_bwd N=%d C=%d db (accumulates; 1e-4 relative + 1e-5 max)", N, C);
		check(what, hb, LMT_DTYPE_F32, rb, NULL, (size_t)C, 1e-4, 1e-5 * maxabs(rb, (size_t)C), 0);
		be->free(be, dx), be->free(be, dw), be->free(be, db), be->free(be, mean), be->free(be, rstd);
		be->free(be, scratch), be->free(be, ddy), be->free(be, gx), be->free(be, gw), be->free(be, gb);
		free(x), free(w), free(b), free(ro), free(rm), free(rs), free(dy), free(gx0), free(gw0), free(gb0);
		free(hx), free(hw), free(hb), free(rx), free(rw), free(rb);
	}
	section_end("layernorm");
}

/* ---- bias, gelu, elementwise ---- */

static void test_bias(void)
{
	static const int shapes[3][2] = { { 1, 1 }, { 17, 129 }, { 1000, 769 } };
	char what[160];
	for (int si = 0; si < 3; si++) {
		int N = shapes[si][0], C = shapes[si][1];
		size_t NC = (size_t)N * C;
		float *x = frand(NC, -1, 1), *b = frand((size_t)C, -1, 1), *db0 = frand((size_t)C, -1, 1);
		float *dxx = dinout(x, NC * 4), *dbb = din(b, (size_t)C * 4), *ddb = dinout(db0, (size_t)C * 4);
		float *dx0 = din(x, NC * 4);
		be->bias_add(be, dxx, dbb, N, C);
		be->bias_grad(be, ddb, dbb, 1, C); /* db += b: N = 1 */
		be->bias_grad(be, ddb, dx0, N, C);
		float *hx = fetch(dxx, NC * 4), *hb = fetch(ddb, (size_t)C * 4);
		double *rx = dzero(NC), *rb = dzero((size_t)C), *mb = dzero((size_t)C);
		for (size_t i = 0; i < NC; i++)
			rx[i] = (float)((double)x[i] + b[i % C]);
		for (int c = 0; c < C; c++)
			rb[c] = (double)db0[c] + b[c], mb[c] = fabs(db0[c]) + fabs(b[c]);
		for (size_t i = 0; i < NC; i++)
			rb[i % C] += x[i], mb[i % C] += fabs(x[i]);
		snprintf(what, sizeof what, "bias_add N=%d C=%d: exactly the rounded fp32 sums", N, C);
		check(what, hx, LMT_DTYPE_F32, rx, NULL, NC, 0, 0, 0);
		snprintf(what, sizeof what, "bias_grad N=%d C=%d (accumulates; 1e-5 of sum |terms|)", N, C);
		check(what, hb, LMT_DTYPE_F32, rb, mb, (size_t)C, 1e-5, 0, 0);
		be->free(be, dxx), be->free(be, dbb), be->free(be, ddb), be->free(be, dx0);
		free(x), free(b), free(db0), free(hx), free(hb), free(rx), free(rb), free(mb);
	}
	section_end("bias");
}

static double gelu_grad_ref(double x)
{
	double k = sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
	return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

static void test_gelu(void)
{
	enum { n = 4099 };
	float *x = frand(n, -8, 8), *dy = frand(n, -1, 1);
	x[0] = 0, x[1] = -0.0f, x[2] = 1e-20f, x[3] = 30, x[4] = -30;
	double *ref = dzero(n), *rg = dzero(n);
	for (size_t i = 0; i < n; i++)
		ref[i] = gelu_ref(x[i]), rg[i] = gelu_grad_ref(x[i]) * dy[i];
	float *dx = din(x, n * 4), *ddy = din(dy, n * 4);
	char what[160];
	for (int di = 0; di < 3; di++) {
		int dt = dts[di];
		size_t e = lmt_dtype_size(dt);
		void *out = dout(n * e);
		be->gelu_fwd(be, out, dt, dx, n);
		void *got = fetch(out, n * e);
		/* 1e-6 absolute: below x = -3 the tanh form leaves ~|x| 2^-24 absolute error
		 * on a tiny value; fp32 1e-5 relative; bf16/fp16 one rounding, 1 ulp */
		snprintf(what, sizeof what, "gelu_fwd %d values to %s (%s)", n, lmt_dtype_name(dt),
			 dt == LMT_DTYPE_F32 ? "1e-5 relative + 1e-6" : "1e-6 + 1 ulp of the dtype");
		check(what, got, dt, ref, NULL, n, dt == LMT_DTYPE_F32 ? 1e-5 : 0, 1e-6, dt == LMT_DTYPE_F32 ? 0 : 1);
		be->free(be, out);
		free(got);
	}
	float *gx = dout(n * 4);
	be->gelu_bwd(be, gx, dx, ddy, n);
	float *hg = fetch(gx, n * 4);
	/* sech^2 formed as 1 - tanh^2 in fp32: ~2^-24 absolute times up to ~30: 4e-6 */
	check("gelu_bwd (overwrites; 1e-4 relative + 4e-6)", hg, LMT_DTYPE_F32, rg, NULL, n, 1e-4, 4e-6, 0);
	be->free(be, dx), be->free(be, ddy), be->free(be, gx);
	free(x), free(dy), free(ref), free(rg), free(hg);
	section_end("gelu");
}

static void test_elementwise(void)
{
	static const size_t ns[3] = { 1, 17, 4099 };
	char what[160];
	for (int si = 0; si < 3; si++) {
		size_t n = ns[si];
		float *a = frand(n, -100, 100), *b = frand(n, -1, 1), *y = frand(n, -10, 10);
		float *da = din(a, n * 4), *db = din(b, n * 4), *o = dout(n * 4), *dy = dinout(y, n * 4);
		be->add(be, o, da, db, n);
		float *ho = fetch(o, n * 4);
		double *ref = dzero(n), *mag = dzero(n);
		for (size_t i = 0; i < n; i++)
			ref[i] = (float)((double)a[i] + b[i]);
		snprintf(what, sizeof what, "add n=%zu: exactly the rounded fp32 sums", n);
		check(what, ho, LMT_DTYPE_F32, ref, NULL, n, 0, 0, 0);
		const float s = 0.37f;
		be->axpy(be, dy, s, db, n);
		float *hy = fetch(dy, n * 4);
		/* a*x and the sum each rounded once (or fused): 2^-23 (|y| + |a x|) */
		for (size_t i = 0; i < n; i++)
			ref[i] = (double)y[i] + (double)s * b[i], mag[i] = fabs(y[i]) + fabs((double)s * b[i]);
		snprintf(what, sizeof what, "axpy n=%zu (2^-23 (|y| + |a x|))", n);
		check(what, hy, LMT_DTYPE_F32, ref, mag, n, 0x1p-23, 0, 0);
		be->scale(be, dy, -2.5f, n);
		float *hs = fetch(dy, n * 4);
		for (size_t i = 0; i < n; i++)
			ref[i] = (float)((double)hy[i] * -2.5f);
		snprintf(what, sizeof what, "scale n=%zu: exactly the rounded fp32 products", n);
		check(what, hs, LMT_DTYPE_F32, ref, NULL, n, 0, 0, 0);
		be->free(be, da), be->free(be, db), be->free(be, o), be->free(be, dy);
		free(a), free(b), free(y), free(ho), free(hy), free(hs), free(ref), free(mag);
	}
	section_end("add, axpy, scale");
}

/* ---- attention ---- */

struct att {
	int B, T, NH, HS;
	const int32_t *seg;
	const float *qkv;
	double *out, *lse, *p; /* p: (B, NH, T, T) probabilities */
};

static int allowed(const int32_t *seg, int b, int T, int i, int j)
{
	return j <= i && (!seg || seg[b * T + j] == seg[b * T + i]);
}

static void att_ref(struct att *a)
{
	int T = a->T, C = a->NH * a->HS, C3 = 3 * C, HS = a->HS;
	double sc = 1 / sqrt((double)HS);
	for (int b = 0; b < a->B; b++)
		for (int h = 0; h < a->NH; h++)
			for (int i = 0; i < T; i++) {
				double *p = a->p + (((size_t)b * a->NH + h) * T + i) * T, mx = -INFINITY, sum = 0;
				const float *q = a->qkv + ((size_t)b * T + i) * C3 + h * HS;
				for (int j = 0; j < T; j++) {
					p[j] = 0;
					if (!allowed(a->seg, b, T, i, j))
						continue;
					const float *k = a->qkv + ((size_t)b * T + j) * C3 + C + h * HS;
					double s = 0;
					for (int d = 0; d < HS; d++)
						s += (double)q[d] * k[d];
					p[j] = s * sc;
					mx = fmax(mx, p[j]);
				}
				for (int j = 0; j < T; j++)
					if (allowed(a->seg, b, T, i, j))
						sum += exp(p[j] - mx);
				for (int j = 0; j < T; j++)
					p[j] = allowed(a->seg, b, T, i, j) ? exp(p[j] - mx) / sum : 0;
				a->lse[((size_t)b * a->NH + h) * T + i] = mx + log(sum);
				double *o = a->out + ((size_t)b * T + i) * C + h * HS;
				for (int d = 0; d < HS; d++) {
					o[d] = 0;
					for (int j = 0; j <= i; j++)
						o[d] += p[j] * a->qkv[((size_t)b * T + j) * C3 + 2 * C + h * HS + d];
				}
			}
}

static void attention_case(int B, int T, int NH, int HS, int with_seg)
{
	int C = NH * HS, C3 = 3 * C, N = B * T;
	size_t nq = (size_t)N * C3, no = (size_t)N * C, nl = (size_t)B * NH * T;
	int32_t *seg = xmalloc((size_t)N * 4);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) /* documents of 5 and 7 and a padding position, repeating */
			seg[b * T + t] = t % 13 == 12 ? -(t + 1) : t % 13 < 5 ? 2 * (t / 13) : 2 * (t / 13) + 1;
	float *qkv = frand(nq, -1.5, 1.5), *dy = frand(no, -1, 1);
	struct att a = { B, T, NH, HS, with_seg ? seg : NULL, qkv, dzero(no), dzero(nl), dzero(nl * T) };
	att_ref(&a);
	float *dq = din(qkv, nq * 4), *ddy = din(dy, no * 4), *out = dout(no * 4), *lse = dout(nl * 4);
	int32_t *dseg = with_seg ? din(seg, (size_t)N * 4) : NULL;
	be->attention_fwd(be, out, lse, dq, dseg, B, T, NH, HS, 0);
	float *ho = fetch(out, no * 4), *hl = fetch(lse, nl * 4);
	char what[200], lab[96];
	snprintf(lab, sizeof lab, "B=%d T=%d NH=%d HS=%d%s", B, T, NH, HS, with_seg ? " with segments" : "");
	/* dot products of HS, a softmax over at most T keys in fp32: 1e-5 relative + 1e-6 */
	snprintf(what, sizeof what, "attention_fwd %s: out (1e-5 relative + 1e-6)", lab);
	check(what, ho, LMT_DTYPE_F32, a.out, NULL, no, 1e-5, 1e-6, 0);
	snprintf(what, sizeof what, "attention_fwd %s: lse (1e-5 relative + 1e-6)", lab);
	check(what, hl, LMT_DTYPE_F32, a.lse, NULL, nl, 1e-5, 1e-6, 0);

	/* queries q0.. only: rows q0..T-1 of the full result; the rest of out and lse
	 * stays poisoned */
	int q0 = T > 1 ? T / 2 + 1 : 0, TQ = T - q0;
	float *out2 = dout(no * 4), *lse2 = dout(nl * 4);
	be->attention_fwd(be, out2, lse2, dq, dseg, B, T, NH, HS, q0);
	float *ho2 = fetch(out2, no * 4), *hl2 = fetch(lse2, nl * 4);
	size_t nq0 = (size_t)B * TQ * C, nl0 = (size_t)B * NH * TQ;
	double *r2 = dzero(nq0), *rl2 = dzero(nl0);
	for (int b = 0; b < B; b++)
		for (int i = 0; i < TQ; i++) {
			for (int c = 0; c < C; c++)
				r2[((size_t)b * TQ + i) * C + c] = ho[((size_t)b * T + q0 + i) * C + c];
			for (int h = 0; h < NH; h++)
				rl2[((size_t)b * NH + h) * TQ + i] = hl[((size_t)b * NH + h) * T + q0 + i];
		}
	/* the same computation per query row: the q0 = 0 result's rows, to 1e-6 relative
	 * (a backend may block the queries differently); 1e-5 from T = 512, where the
	 * CPU backend's full pass takes a head's scores from one GEMM and its cache
	 * step from one-row dot products (two summation orders of HS products) */
	double rel = T >= 512 ? 1e-5 : 1e-6, abs_ = T >= 512 ? 1e-6 : 1e-7;
	snprintf(what, sizeof what, "attention_fwd %s q0=%d: out is the q0=0 result's rows (%g relative + %g)", lab, q0,
		 rel, abs_);
	check(what, ho2, LMT_DTYPE_F32, r2, NULL, nq0, rel, abs_, 0);
	snprintf(what, sizeof what, "attention_fwd %s q0=%d: lse is the q0=0 result's rows", lab, q0);
	check(what, hl2, LMT_DTYPE_F32, rl2, NULL, nl0, rel, abs_, 0);
	tap_ok(all_ff(ho2 + nq0, (no - nq0) * 4) && all_ff(hl2 + nl0, (nl - nl0) * 4),
	       "%s attention_fwd %s q0=%d: nothing written past (B, T-q0, C) and (B, NH, T-q0)", bname, lab, q0);

	/* backward from the backend's own out and lse, against the naive gradient */
	float *dqkv = dout(nq * 4);
	be->attention_bwd(be, dqkv, ddy, dq, out, lse, dseg, B, T, NH, HS);
	float *hd = fetch(dqkv, nq * 4);
	double *rd = dzero(nq), sc = 1 / sqrt((double)HS);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int i = 0; i < T; i++) {
				const double *p = a.p + (((size_t)b * NH + h) * T + i) * T;
				const float *gy = dy + ((size_t)b * T + i) * C + h * HS;
				const float *q = qkv + ((size_t)b * T + i) * C3 + h * HS;
				double D = 0;
				for (int d = 0; d < HS; d++)
					D += gy[d] * a.out[((size_t)b * T + i) * C + h * HS + d];
				for (int j = 0; j <= i; j++) {
					if (p[j] == 0)
						continue;
					const float *k = qkv + ((size_t)b * T + j) * C3 + C + h * HS, *v = k + C;
					double dp = 0;
					for (int d = 0; d < HS; d++)
						dp += gy[d] * v[d];
					double ds = p[j] * (dp - D) * sc;
					for (int d = 0; d < HS; d++) {
						rd[((size_t)b * T + i) * C3 + h * HS + d] += ds * k[d];
						rd[((size_t)b * T + j) * C3 + C + h * HS + d] += ds * q[d];
						rd[((size_t)b * T + j) * C3 + 2 * C + h * HS + d] += p[j] * gy[d];
					}
				}
			}
	/* probabilities recomputed from the fp32 lse: 1e-4 relative + 1e-5 of the largest */
	snprintf(what, sizeof what, "attention_bwd %s: dqkv (overwrites; 1e-4 relative + 1e-5 max)", lab);
	check(what, hd, LMT_DTYPE_F32, rd, NULL, nq, 1e-4, 1e-5 * maxabs(rd, nq), 0);
	be->free(be, dq), be->free(be, ddy), be->free(be, out), be->free(be, lse), be->free(be, dseg);
	be->free(be, out2), be->free(be, lse2), be->free(be, dqkv);
	free(seg), free(qkv), free(dy), free(a.out), free(a.lse), free(a.p), free(ho), free(hl), free(ho2), free(hl2);
	free(r2), free(rl2), free(hd), free(rd);
}

static void test_attention(void)
{
	attention_case(1, 1, 1, 3, 0);
	attention_case(2, 17, 3, 5, 1);
	attention_case(1, 33, 2, 16, 0);
	attention_case(2, 33, 2, 4, 1);
	/* T >= 512: the CPU backend's GEMM path (query blocks of 128 rows by products) */
	attention_case(1, 600, 2, 16, 1);
	attention_case(1, 513, 3, 8, 0);
	section_end("attention");
}

/* ---- cross-entropy ---- */

static void xent_case(int N, int V, int Vp)
{
	size_t NV = (size_t)N * Vp;
	int32_t *tgt = xmalloc((size_t)N * 4);
	int valid = 0;
	for (int n = 0; n < N; n++) {
		tgt[n] = n % 5 == 2 ? -1 : (int32_t)(lmt_rng_next(&rng) % (uint64_t)V);
		valid += tgt[n] >= 0;
	}
	float *lg = xmalloc(NV * 4), dscale = 1.0f / (float)(valid ? valid : 1);
	for (size_t i = 0; i < NV; i++)
		lg[i] = (int)(i % (size_t)Vp) < V ? (float)unif(-4, 4) : 1e3f; /* padding columns: junk */
	double *rl = dzero((size_t)N), *rg = dzero(NV), rsum = 0;
	for (int n = 0; n < N; n++) {
		if (tgt[n] < 0)
			continue;
		const float *l = lg + (size_t)n * Vp;
		double mx = -INFINITY, s = 0;
		for (int j = 0; j < V; j++)
			mx = fmax(mx, l[j]);
		for (int j = 0; j < V; j++)
			s += exp(l[j] - mx);
		double lse = mx + log(s);
		rl[n] = lse - l[tgt[n]];
		rsum += rl[n];
		for (int j = 0; j < V; j++)
			rg[(size_t)n * Vp + j] = (exp(l[j] - lse) - (j == tgt[n])) * dscale;
	}
	int32_t *dt = din(tgt, (size_t)N * 4);
	float *dl = dinout(lg, NV * 4), *loss = dout((size_t)N * 4);
	double prior = 0.25, *acc = dinout(&prior, sizeof prior);
	be->xent_fwd_bwd(be, loss, acc, dl, dt, N, V, Vp, dscale);
	float *hl = fetch(loss, (size_t)N * 4), *hg = fetch(dl, NV * 4);
	double *ha = fetch(acc, sizeof prior);
	char what[200];
	/* a max, a sum of V exponentials, a log: 1e-5 relative + 1e-6 */
	snprintf(what, sizeof what, "xent N=%d V=%d Vp=%d: losses (0 where no target; 1e-5 relative + 1e-6)", N, V, Vp);
	check(what, hl, LMT_DTYPE_F32, rl, NULL, (size_t)N, 1e-5, 1e-6, 0);
	/* softmax probabilities to ~1e-6; p - 1 cancels: an absolute floor of 1e-6 dscale */
	snprintf(what, sizeof what, "xent N=%d V=%d Vp=%d: gradient (softmax - onehot) dscale (1e-5 relative + 1e-6 dscale)",
		 N, V, Vp);
	check(what, hg, LMT_DTYPE_F32, rg, NULL, NV, 1e-5, 1e-6 * dscale, 0);
	size_t nz = 0;
	for (int n = 0; n < N; n++)
		for (int j = 0; j < Vp; j++) {
			float g = hg[(size_t)n * Vp + j];
			nz += (j >= V || tgt[n] < 0) && (g != 0 || signbit(g));
		}
	for (int n = 0; n < N; n++)
		nz += tgt[n] < 0 && (hl[n] != 0 || signbit(hl[n]));
	tap_ok(nz == 0, "%s xent N=%d V=%d Vp=%d: padding columns, masked rows and their losses are +0 (%zu are not)", bname,
	       N, V, Vp, nz);
	double gsum = prior;
	for (int n = 0; n < N; n++)
		gsum += hl[n];
	/* the float losses summed in double: 1e-12; against the double losses, 1e-5 */
	tap_ok(fabs(*ha - gsum) <= 1e-12 * fabs(gsum) && fabs(*ha - prior - rsum) <= 1e-5 * rsum + 1e-6,
	       "%s xent N=%d V=%d Vp=%d: the accumulator gains the loss sum (%.12g = %.12g + %.12g, double sum %.12g)", bname,
	       N, V, Vp, *ha, prior, *ha - prior, rsum);
	be->free(be, dt), be->free(be, dl), be->free(be, loss), be->free(be, acc);
	free(tgt), free(lg), free(rl), free(rg), free(hl), free(hg), free(ha);
}

static void test_xent(void)
{
	xent_case(1, 1, 128);
	xent_case(17, 65, 128);
	xent_case(33, 129, 256);
	xent_case(3, 50257, 50304); /* GPT-2's vocabulary: rows longer than a block */
	section_end("xent");
}

/* ---- AdamW ---- */

static void adamw_case(int wdt, int has_work)
{
	size_t n = 2 * 16384 + 17;
	float *p0 = frand(n, -1, 1), *g = xmalloc(n * 4), *zero = calloc(n, 4);
	double *P = dzero(n), *M = dzero(n), *Vv = dzero(n), *mag = dzero(n), *Mmag = dzero(n);
	for (size_t i = 0; i < n; i++)
		P[i] = p0[i];
	size_t ew = lmt_dtype_size(wdt);
	float *dp = dinout(p0, n * 4), *dm = dinout(zero, n * 4), *dv = dinout(zero, n * 4), *dg = dalloc(n * 4);
	void *work = has_work ? dout(n * ew) : NULL;
	double prior = 1, *acc = dinout(&prior, sizeof prior);
	const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
	enum { BAD = 6 };
	const size_t badi[BAD] = { 0, 17, 16383, 16384, 20000, 2 * 16384 + 16 };
	for (int t = 1; t <= 3; t++) {
		float lr = 1e-2f * t / 3;
		for (size_t i = 0; i < n; i++)
			g[i] = i % 97 == 0 ? 0.0f : i % 89 == 0 ? (float)unif(-1e3, 1e3) :
			       i % 83 == 0 ? (float)unif(-1e-6, 1e-6) : (float)unif(-1, 1);
		if (t == 3) /* non-finite gradients at the last step: NaN and infinite weights */
			for (int k = 0; k < BAD; k++)
				g[badi[k]] = k % 2 ? INFINITY : NAN;
		be->to_device(be, dg, g, n * 4);
		float bc1 = (float)(1 - pow(b1, t)), bc2 = (float)(1 - pow(b2, t));
		for (size_t i = 0; i < n; i++) {
			double gi = (double)g[i] * gs;
			M[i] = b1 * M[i] + (1 - (double)b1) * gi;
			Mmag[i] = b1 * Mmag[i] + (1 - (double)b1) * fabs(gi);
			Vv[i] = b2 * Vv[i] + (1 - (double)b2) * gi * gi;
			double u = M[i] / bc1 / (sqrt(Vv[i] / bc2) + eps);
			mag[i] += lr * (fabs(u) + fabs(wd * P[i]));
			P[i] -= lr * (u + wd * P[i]);
		}
		if (work)
			poison(work, n * ew + GUARD);
		struct lmt_adamw ah = { .lr = lr, .b1 = b1, .b2 = b2, .eps = eps, .wd = wd, .bc1 = bc1, .bc2 = bc2, .gscale = gs };
		be->adamw(be, dp, work, wdt, dg, dm, dv, n, &ah, acc);
	}
	float *hp = fetch(dp, n * 4), *hm = fetch(dm, n * 4), *hv = fetch(dv, n * 4);
	double *ha = fetch(acc, sizeof prior);
	char lab[64];
	snprintf(lab, sizeof lab, "work %s", has_work ? lmt_dtype_name(wdt) : "none");
	/* the non-finite entries are the accumulator's business; elsewhere the formula */
	for (int k = 0; k < BAD; k++) {
		size_t i = badi[k];
		tap_ok(!isfinite(hp[i]), "%s adamw %s: a non-finite gradient at %zu leaves a non-finite weight", bname, lab, i);
		P[i] = M[i] = Vv[i] = mag[i] = Mmag[i] = 0;
		hp[i] = hm[i] = hv[i] = 0;
	}
	/* m: roundings relative to terms that may cancel: 1e-5 of the moment of |g|; v:
	 * positive terms, 1e-5 relative; p: 1e-6 relative + 1e-5 of the summed updates */
	size_t bad = 0, wi = 0;
	for (size_t i = 0; i < n; i++)
		if (!(fabs(hm[i] - M[i]) <= 1e-5 * Mmag[i]))
			wi = bad++ ? wi : i;
	if (!tap_ok(bad == 0, "%s adamw %s: m after 3 steps within 1e-5 of the moment of |g|", bname, lab))
		tap_diag("  %zu bad, first [%zu]: got %.9g expected %.9g", bad, wi, hm[wi], M[wi]);
	char what[160];
	snprintf(what, sizeof what, "adamw %s: v after 3 steps (1e-5 relative)", lab);
	check(what, hv, LMT_DTYPE_F32, Vv, NULL, n, 1e-5, 1e-30, 0);
	for (size_t i = 0; i < n; i++)
		mag[i] = fabs(P[i]) * 0.1 + mag[i];
	snprintf(what, sizeof what, "adamw %s: p after 3 steps (1e-6 relative + 1e-5 of the summed update sizes)", lab);
	check(what, hp, LMT_DTYPE_F32, P, mag, n, 1e-5, 0, 0);
	tap_ok(*ha == prior + BAD, "%s adamw %s: the non-finite accumulator gains %d (%.17g, from %g)", bname, lab, BAD, *ha,
	       prior);
	if (work) {
		/* the working copy: the updated master (as fetched before the zeroing
		 * above, so fetched again) rounded to nearest even */
		float *hp2 = fetch(dp, n * 4);
		unsigned char *hw = fetch(work, n * ew), *want = xmalloc(n * ew);
		for (size_t i = 0; i < n; i++)
			put(want, wdt, i, hp2[i]);
		size_t diff = 0;
		for (size_t i = 0; i < n; i++)
			diff += !same_value(wdt, hw, want, i);
		tap_ok(diff == 0, "%s adamw %s: the working copy is the master rounded to nearest even, bitwise (%zu differ)",
		       bname, lab, diff);
		free(hp2), free(hw), free(want);
	}
	be->free(be, dp), be->free(be, dm), be->free(be, dv), be->free(be, dg), be->free(be, work), be->free(be, acc);
	free(p0), free(g), free(zero), free(P), free(M), free(Vv), free(mag), free(Mmag), free(hp), free(hm), free(hv);
	free(ha);
}

static void test_adamw(void)
{
	adamw_case(LMT_DTYPE_F32, 0);
	for (int i = 0; i < 3; i++)
		adamw_case(dts[i], 1);
	section_end("adamw");
}

/* ---- sumsq, and determinism across thread counts ---- */

static void test_sumsq(void)
{
	static const size_t ns[4] = { 1, 17, 65537, 200003 };
	for (int si = 0; si < 4; si++) {
		size_t n = ns[si];
		float *x = frand(n, -2, 2);
		size_t nbad = 0;
		if (n > 17) {
			x[3] = NAN, x[n / 2] = INFINITY, x[n - 1] = -INFINITY, x[5] = -NAN;
			x[6] = FLT_MAX, x[7] = FLT_MIN / 4, x[8] = -0.0f;
			nbad = 4;
		}
		double s = 0;
		for (size_t i = 0; i < n; i++)
			if (isfinite(x[i]))
				s += (double)x[i] * x[i];
		double prior[2] = { 0.5, 3 }, *acc = dinout(prior, sizeof prior);
		float *dx = din(x, n * 4);
		be->sumsq(be, acc, dx, n);
		double *h = fetch(acc, sizeof prior);
		/* the non-finite entries make the sum non-finite; the count says how many */
		int sum_ok = nbad ? !isfinite(h[0]) : fabs(h[0] - 0.5 - s) <= 1e-12 * s;
		tap_ok(sum_ok && h[1] == 3 + (double)nbad,
		       "%s sumsq n=%zu: [sum of squares, non-finite count] added (%.17g, %g; double sum %.17g, %zu non-finite)",
		       bname, n, h[0], h[1], s, nbad);
		if (nbad) {
			/* FLT_MAX, a subnormal and -0 are finite: a range with them counts 0 */
			be->zero(be, acc, sizeof prior);
			be->sumsq(be, acc, dx + 6, n / 2 - 6);
			double *h2 = fetch(acc, sizeof prior), s2 = 0;
			for (size_t i = 6; i < n / 2; i++)
				s2 += (double)x[i] * x[i];
			tap_ok(fabs(h2[0] - s2) <= 1e-12 * s2 && h2[1] == 0,
			       "%s sumsq n=%zu from FLT_MAX, a subnormal, -0: finite (%.17g), count 0 (%g)", bname, n / 2 - 6,
			       h2[0], h2[1]);
			free(h2);
		}
		be->free(be, acc), be->free(be, dx);
		free(x), free(h);
	}
	section_end("sumsq");
}

/* sumsq_ranges: ranges of every size (empty, one value, a chunk and one, two
 * chunks and more), two of them into one slot, one with a non-finite value: the
 * same sums and counts as sumsq range by range, to the bit */
static void test_sumsq_ranges(void)
{
	if (!be->sumsq_ranges) {
		tap_diag("%s has no sumsq_ranges (callers loop over sumsq)", bname);
		section_end("sumsq_ranges");
		return;
	}
	size_t n = 400000;
	float *x = frand(n, -2, 2);
	x[300000] = NAN;
	size_t off[6] = { 0, 5, 6, 70000, 200000, 299990 }, len[6] = { 5, 0, 1, 65537, 99000, 100010 };
	int slot[6] = { 0, 1, 2, 3, 3, 4 };
	double zero[10] = { 0 }, *a1 = dinout(zero, sizeof zero), *a2 = dinout(zero, sizeof zero);
	float *dx = din(x, n * 4);
	be->sumsq_ranges(be, a1, dx, off, len, slot, 6);
	for (int i = 0; i < 6; i++)
		be->sumsq(be, a2 + 2 * slot[i], dx + off[i], len[i]);
	double *h1 = fetch(a1, sizeof zero), *h2 = fetch(a2, sizeof zero);
	tap_ok(!memcmp(h1, h2, sizeof zero) && h1[9] == 1 && h1[7] == 0 && h1[0] > 0,
	       "%s sumsq_ranges of 6 ranges into 5 slots: bitwise sumsq's, range by range (slot 3: %.17g; the NaN "
	       "counted in slot 4: %g)", bname, h1[6], h1[9]);
	be->free(be, a1), be->free(be, a2), be->free(be, dx);
	free(x), free(h1), free(h2);
	section_end("sumsq_ranges");
}

/* The ops whose results could depend on the split of the work, run on a backend
 * opened with 1 thread and one with 2: bitwise the same where backend.h says so
 * (sumsq: fixed chunks; cast's stochastic rounding: a hash of the index). */
static void test_threads(const char *name)
{
	struct lmt_backend b1, b2;
	struct lmt_err err = { 0 };
	if (!tap_ok(lmt_backend_open(&b1, name, 1, &err) == 0 && lmt_backend_open(&b2, name, 2, &err) == 0,
		    "%s with 1 and with 2 threads (%s)", name, err.msg))
		return;
	size_t n = 300007;
	float *x = frand(n, -3, 3);
	double r[2][2];
	uint16_t *sr[2];
	struct lmt_backend *bs[2] = { &b1, &b2 };
	for (int k = 0; k < 2; k++) {
		struct lmt_backend *b = bs[k];
		float *dx = b->alloc(b, n * 4);
		double *acc = b->alloc(b, 16);
		uint16_t *d = b->alloc(b, n * 2);
		b->to_device(b, dx, x, n * 4);
		b->sumsq(b, acc, dx, n);
		b->to_host(b, r[k], acc, 16);
		b->cast(b, d, LMT_DTYPE_BF16, dx, LMT_DTYPE_F32, n, 1, 12345);
		sr[k] = xmalloc(n * 2);
		b->to_host(b, sr[k], d, n * 2);
		b->free(b, dx), b->free(b, acc), b->free(b, d);
	}
	tap_ok(!memcmp(r[0], r[1], sizeof r[0]), "%s sumsq of %zu values: bitwise the same with 1 and 2 threads (%.17g)",
	       name, n, r[0][0]);
	tap_ok(!memcmp(sr[0], sr[1], n * 2), "%s stochastic cast of %zu values: bitwise the same with 1 and 2 threads", name,
	       n);
	free(sr[0]), free(sr[1]), free(x);
	b1.release(&b1);
	b2.release(&b2);
}

/* ---- against the CPU backend, bit for bit where a backend promises it ---- */

/* A backend other than the CPU one against the CPU backend on the same inputs, for
 * the operations whose result is one answer by construction: stochastic rounding
 * (a hash of (seed, index): kernels/cast.cu copies cpu.c's recipe) and the
 * embedding backward (each element summed in token order on both). */
static void test_vs_cpu(void)
{
	struct lmt_backend cb;
	struct lmt_err err = { 0 };
	if (!strcmp(bname, "cpu"))
		return;
	if (!tap_ok(lmt_backend_open(&cb, "cpu", 2, &err) == 0, "%s against cpu: the cpu backend opens (%s)", bname,
		    err.msg))
		return;
	struct lmt_backend *bs[2] = { be, &cb };
	enum { n = 100003 };
	float *x = frand(n, -70000, 70000); /* past fp16's range too: infinities */
	for (int i = 0; i < n; i += 7)
		x[i] *= 1e-6f;
	for (int di = 1; di < 3; di++) {
		uint16_t *r[2];
		for (int k = 0; k < 2; k++) {
			struct lmt_backend *b = bs[k];
			float *d = b->alloc(b, n * 4);
			uint16_t *o = b->alloc(b, n * 2);
			b->to_device(b, d, x, n * 4);
			b->cast(b, o, dts[di], d, LMT_DTYPE_F32, n, 1, 0x5eed);
			r[k] = xmalloc(n * 2);
			b->to_host(b, r[k], o, n * 2);
			b->free(b, d), b->free(b, o);
		}
		tap_ok(!memcmp(r[0], r[1], n * 2), "%s against cpu: stochastic cast fp32 -> %s of %d values, the same bits",
		       bname, lmt_dtype_name(dts[di]), n);
		free(r[0]), free(r[1]);
	}
	free(x);
	int B = 3, T = 129, C = 65, V = 50, N = B * T;
	int32_t *tok = xmalloc((size_t)N * 4);
	for (int i = 0; i < N; i++)
		tok[i] = (int32_t)(lmt_rng_next(&rng) % (uint64_t)V);
	float *dy = frand((size_t)N * C, -1, 1), *w0 = frand((size_t)V * C, -1, 1), *p0 = frand((size_t)T * C, -1, 1);
	float *rw[2], *rp[2];
	for (int k = 0; k < 2; k++) {
		struct lmt_backend *b = bs[k];
		int32_t *dt = b->alloc(b, (size_t)N * 4);
		float *ddy = b->alloc(b, (size_t)N * C * 4), *dw = b->alloc(b, (size_t)V * C * 4), *dp = b->alloc(b, (size_t)T * C * 4);
		b->to_device(b, dt, tok, (size_t)N * 4);
		b->to_device(b, ddy, dy, (size_t)N * C * 4);
		b->to_device(b, dw, w0, (size_t)V * C * 4);
		b->to_device(b, dp, p0, (size_t)T * C * 4);
		b->embed_bwd(b, dw, dp, ddy, dt, B, T, C);
		rw[k] = xmalloc((size_t)V * C * 4), rp[k] = xmalloc((size_t)T * C * 4);
		b->to_host(b, rw[k], dw, (size_t)V * C * 4);
		b->to_host(b, rp[k], dp, (size_t)T * C * 4);
		b->free(b, dt), b->free(b, ddy), b->free(b, dw), b->free(b, dp);
	}
	tap_ok(!memcmp(rw[0], rw[1], (size_t)V * C * 4) && !memcmp(rp[0], rp[1], (size_t)T * C * 4),
	       "%s against cpu: embed_bwd B=%d T=%d C=%d, dwte and dwpe the same bits", bname, B, T, C);
	free(tok), free(dy), free(w0), free(p0), free(rw[0]), free(rw[1]), free(rp[0]), free(rp[1]);
	cb.release(&cb);
	section_end("against cpu");
}

/* ---- status ---- */

static void test_status(void)
{
	struct lmt_err err = { 0 };
	tap_ok(be->status(be, &err) == 0, "%s status after the clean runs above: 0", bname);
	/* a GEMM with a negative dimension, then an unsupported cast: the first is kept */
	float *a = dalloc(64);
	struct lmt_gemm g = { .M = -1, .N = 3, .K = 3, .alpha = 1, .A = a, .lda = 3, .B = a, .ldb = 3, .C = a, .ldc = 3,
			      .batch = 1, .ab_dtype = LMT_DTYPE_F32, .c_dtype = LMT_DTYPE_F32 };
	be->gemm(be, &g);
	be->cast(be, a, LMT_DTYPE_I32, a, LMT_DTYPE_F32, 4, 0, 0);
	int rc = be->status(be, &err);
	tap_ok(rc < 0 && strstr(err.msg, "gemm") && !strstr(err.msg, "cast"),
	       "%s status: a GEMM of M = -1 then a cast to int32: the first failure, naming the GEMM (%d, '%s')", bname, rc,
	       err.msg);
	memset(&err, 0, sizeof err);
	tap_ok(be->status(be, &err) == 0, "%s status: reading it clears it", bname);
	be->free(be, a);
}

static void test_op_timing(void)
{
	memset(be->op_s, 0, sizeof be->op_s);
	struct gcase t = { 0, 0, 129, 129, 129, 1, 1, 0, 0, 0, 0, "timed" };
	gemm_case(LMT_DTYPE_F32, LMT_DTYPE_F32, &t);
	adamw_case(LMT_DTYPE_BF16, 1);
	attention_case(1, 33, 2, 16, 0);
	int ok = be->op_s[LMT_OPK_GEMM] > 0 && be->op_s[LMT_OPK_OPTIMIZER] > 0 && be->op_s[LMT_OPK_ATTENTION] > 0;
	for (int k = 0; k < LMT_OPK_COUNT; k++)
		ok &= be->op_s[k] >= 0 && be->op_s[k] < 60;
	tap_ok(ok, "%s op_s: a GEMM, AdamW and attention each add time to their own kind (%.3g, %.3g, %.3g s)", bname,
	       be->op_s[LMT_OPK_GEMM], be->op_s[LMT_OPK_OPTIMIZER], be->op_s[LMT_OPK_ATTENTION]);
	section_end("op timing");
}

static void run_backend(const char *name)
{
	struct lmt_backend b;
	struct lmt_err err = { 0 };
	int rc = lmt_backend_open(&b, name, 2, &err);
	if (rc == LMT_EUNSUPPORTED && strcmp(name, "cpu") && strstr(err.msg, "no GPU")) {
		/* built but not runnable here: a plain skip (make check-gpu on a GPU runs it) */
		printf("ok %d - backend '%s' # skip %s\n", ++tap_n, name, err.msg);
		return;
	}
	if (!tap_ok(rc == 0, "backend '%s' opens with 2 threads (%s)", name, err.msg))
		return;
	be = &b;
	bname = name;
	test_capabilities();
	test_memory();
	test_gemm();
	test_cast_rne();
	test_cast_sr();
	section_end("cast");
	test_embed();
	test_layernorm();
	test_bias();
	test_gelu();
	test_elementwise();
	test_attention();
	test_xent();
	test_adamw();
	test_sumsq();
	test_sumsq_ranges();
	test_op_timing();
	test_vs_cpu();
	test_status();
	b.release(&b);
	test_threads(name);
}

/* test-backend-ops [--backend NAME]: every backend of the build, or that one */
int main(int argc, char **argv)
{
	lmt_rng_seed(&rng, 20250101, 0);
	char names[256];
	snprintf(names, sizeof names, "%s", lmt_backend_names());
	if (argc == 3 && !strcmp(argv[1], "--backend")) {
		if (!strstr(lmt_backend_names(), argv[2])) {
			fprintf(stderr, "test-backend-ops: backend '%s' is not in this build (%s)\n", argv[2],
				lmt_backend_names());
			return 2;
		}
		snprintf(names, sizeof names, "%s", argv[2]);
	} else if (argc != 1) {
		fprintf(stderr, "usage: test-backend-ops [--backend NAME]\n");
		return 2;
	}
	int count = 0;
	for (char *save = NULL, *s = strtok_r(names, " ", &save); s; s = strtok_r(NULL, " ", &save), count++)
		run_backend(s);
	tap_ok(count > 0, "%d backend%s run (this build has: %s)", count, count == 1 ? "" : "s", lmt_backend_names());
	return tap_done();
}
