/*
 * test-backend: every operation of the CPU backend (backend.h), the reference every
 * other backend is tested against, checked against double precision written here.
 *
 * Forward outputs are compared with a double implementation of the formula in
 * backend.h, evaluated on the same float inputs. Backward outputs are compared with
 * central finite differences of a scalar loss L = sum_i r_i out_i (r fixed-seed
 * random, passed to the backward as dout), where out comes from the double
 * reference forward. The differences are taken in double with step 1e-6 on inputs of
 * order 1: truncation error ~h^2 |f'''| ~ 1e-12 and rounding ~1e-16 |L| / h ~ 1e-9,
 * so the finite difference is exact to about 1e-9 and the tolerance is all for the
 * backend's float arithmetic. A check passes when |got - ref| <= atol + rtol |ref|
 * for every element; each check states rtol and atol and why.
 *
 * Also: accumulate-versus-overwrite semantics (pre-filled outputs), strides and
 * padding of GEMM, segment masks in attention (several documents in a row and a
 * padding position with its own negative id, as lmt_make_batch gives), the
 * cross-entropy's padding columns, masked rows and logits around 1e4, AdamW against
 * its formula over three steps, and determinism: bitwise equal results from two runs
 * with the same thread count, and close results between 1 and 2 threads.
 *
 * The CPU backend's device memory is host memory, so inputs are written and outputs
 * read in place (to_device/to_host are checked once, in test_memory).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/impl.h"
#include "core/rng.h"
#include "tap.h"

static struct lmt_rng rng;

static double unif(double lo, double hi)
{
	return lo + (hi - lo) * ((lmt_rng_next(&rng) >> 11) * 0x1.0p-53);
}

static float *fnew(struct lmt_backend *be, size_t n)
{
	float *p = be->alloc(be, n * sizeof(float));
	if (!p) {
		fprintf(stderr, "test-backend: out of memory\n");
		exit(1);
	}
	return p;
}

static double *dnew(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof *p);
	if (!p) {
		fprintf(stderr, "test-backend: out of memory\n");
		exit(1);
	}
	return p;
}

static void fill(float *x, size_t n, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)unif(lo, hi);
}

static void todouble(double *d, const float *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = f[i];
}

/* Every element within atol + rtol |ref|; reports the worst element. */
static int check(const char *what, const float *got, const double *ref, size_t n, double rtol, double atol)
{
	size_t bad = 0, wi = 0;
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - ref[i]), lim = atol + rtol * fabs(ref[i]);
		double q = e / lim;
		if (!(e <= lim))
			bad++;
		if (!(q <= worst)) {
			worst = isnan(q) ? INFINITY : q;
			wi = i;
		}
	}
	int ok = tap_ok(bad == 0, "%s: %zu values within %.0e relative + %.0e absolute (worst at %.2g of the limit)",
			what, n, rtol, atol, worst);
	if (!ok)
		tap_diag("  %zu outside; worst [%zu]: got %.9g, expected %.9g", bad, wi, n ? got[wi] : 0.0,
			 n ? ref[wi] : 0.0);
	return ok;
}

/* Bitwise equal to ref rounded once to float: for a result that is one float
 * operation on float inputs (exact in double, then rounded), the correctly rounded
 * value is the only right answer. */
static int check_exact(const char *what, const float *got, const double *ref, size_t n)
{
	size_t bad = 0, wi = 0;
	for (size_t i = 0; i < n; i++) {
		float want = (float)ref[i];
		if (memcmp(&got[i], &want, sizeof want)) {
			if (!bad)
				wi = i;
			bad++;
		}
	}
	int ok = tap_ok(bad == 0, "%s: %zu values bitwise equal to the double result rounded once", what, n);
	if (!ok)
		tap_diag("  %zu differ; first [%zu]: got %.9g, expected %.9g", bad, wi, got[wi], (float)ref[wi]);
	return ok;
}

/* g[i] = dL/dx[i] by central differences of f, which reads x through ctx */
static void fd_grad(double (*f)(void *), void *ctx, double *x, size_t n, double *g)
{
	const double h = 1e-6;
	for (size_t i = 0; i < n; i++) {
		double x0 = x[i];
		x[i] = x0 + h;
		double lp = f(ctx);
		x[i] = x0 - h;
		double lm = f(ctx);
		x[i] = x0;
		g[i] = (lp - lm) / (2 * h);
	}
}

/* ---- memory ---- */

static void test_memory(struct lmt_backend *be)
{
	size_t n = 1000;
	float *a = fnew(be, n), *b = fnew(be, n), h[1000], back[1000];
	int zero = 1;
	for (size_t i = 0; i < n; i++)
		zero &= a[i] == 0 && b[i] == 0;
	tap_ok(zero && ((uintptr_t)a & 63) == 0, "alloc returns zeroed, 64-byte aligned memory");
	fill(h, n, -1, 1);
	be->to_device(be, a, h, n * 4);
	be->copy(be, b, a, n * 4);
	be->to_host(be, back, b, n * 4);
	int same = !memcmp(back, h, sizeof h);
	be->zero(be, b + 10, 100 * 4);
	be->to_host(be, back, b, n * 4);
	for (size_t i = 0; i < n; i++)
		same &= back[i] == (i >= 10 && i < 110 ? 0.0f : h[i]);
	be->sync(be);
	tap_ok(same, "to_device, copy, to_host carry the bytes; zero clears exactly its range");
	be->free(be, a);
	be->free(be, b);
}

/* ---- gemm ---- */

/*
 * C[b] = alpha op(A[b]) op(B[b]) + beta C[b] in double. Tolerance: the standard
 * bound for a float dot product of length K (Higham, Accuracy and Stability of
 * Numerical Algorithms, 3.1): |error| <= K u (|alpha| sum_k |a||b| + |beta c|),
 * u = 2^-24; we allow 1e-5 of that magnitude (about 28 u for K = 6).
 */
static void gemm_case(struct lmt_backend *be, int ta, int tb, int M, int N, int K, int batch, float alpha, float beta,
		      int sb_zero, int nan_c, const char *label)
{
	int ra = ta ? K : M, ca = ta ? M : K, rb = tb ? N : K, cb = tb ? K : N;
	int lda = ca + 3, ldb = cb + 2, ldc = N + 4;
	long sa = (long)ra * lda + 5, sb = sb_zero ? 0 : (long)rb * ldb + 1, sc = (long)M * ldc + 7;
	size_t na = (size_t)sa * batch, nb = (size_t)(sb_zero ? rb * ldb : sb * batch), nc = (size_t)sc * batch;
	float *A = fnew(be, na), *B = fnew(be, nb), *C = fnew(be, nc), *C0 = malloc(nc * 4);
	double *ref = dnew(nc), *mag = dnew(nc);
	fill(A, na, -1, 1);
	fill(B, nb, -1, 1);
	fill(C, nc, -1, 1);
	/* padding of C (past N in each row, between batch entries) must not be touched */
	for (size_t i = 0; i < nc; i++) {
		size_t in = i % (size_t)sc, r = in / (size_t)ldc, c = in % (size_t)ldc;
		if (r >= (size_t)M || c >= (size_t)N)
			C[i] = 777.0f;
		else if (nan_c)
			C[i] = NAN;
	}
	memcpy(C0, C, nc * 4);
	for (size_t i = 0; i < nc; i++)
		ref[i] = C0[i];
	for (int b = 0; b < batch; b++)
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				double s = 0, m = 0;
				for (int k = 0; k < K; k++) {
					double x = ta ? A[b * sa + (long)k * lda + i] : A[b * sa + (long)i * lda + k];
					double y = tb ? B[b * sb + (long)j * ldb + k] : B[b * sb + (long)k * ldb + j];
					s += x * y;
					m += fabs(x * y);
				}
				size_t o = (size_t)(b * sc + (long)i * ldc + j);
				double c0 = beta == 0 ? 0 : C0[o];
				ref[o] = alpha * s + beta * c0;
				mag[o] = fabs(alpha) * m + fabs(beta * c0);
			}
	struct lmt_gemm gd = { .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
			       .A = A, .lda = lda, .sa = sa, .B = B, .ldb = ldb, .sb = sb, .C = C, .ldc = ldc,
			       .sc = sc, .batch = batch, .ab_dtype = LMT_DTYPE_F32, .c_dtype = LMT_DTYPE_F32 };
	be->gemm(be, &gd);
	size_t bad = 0, wi = 0;
	double worst = 0;
	for (size_t i = 0; i < nc; i++) {
		double e = fabs(C[i] - ref[i]), lim = mag[i] ? 1e-5 * mag[i] : 0;
		if (!(e <= lim))
			bad++;
		if (lim && !(e / lim <= worst))
			worst = e / lim, wi = i;
	}
	if (!tap_ok(bad == 0,
		    "gemm %s%s %s M=%d N=%d K=%d batch %d, lda %d ldb %d ldc %d, strides %ld/%ld/%ld: within 1e-5 of "
		    "sum|alpha a b| + |beta c|, padding untouched (worst %.2g of the limit)",
		    ta ? "T" : "N", tb ? "T" : "N", label, M, N, K, batch, lda, ldb, ldc, sa, sb, sc, worst))
		tap_diag("  %zu bad; worst [%zu]: got %.9g expected %.9g", bad, wi, C[wi], ref[wi]);
	be->free(be, A);
	be->free(be, B);
	be->free(be, C);
	free(C0);
	free(ref);
	free(mag);
}

static void test_gemm(struct lmt_backend *be)
{
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++)
			gemm_case(be, ta, tb, 5, 7, 6, 3, 0.7f, 0.3f, 0, 0, "alpha 0.7 beta 0.3");
	gemm_case(be, 0, 1, 9, 4, 11, 2, 1.0f, 1.0f, 0, 0, "beta 1 (accumulate)");
	gemm_case(be, 1, 0, 6, 5, 8, 3, 1.0f, 0.0f, 0, 1, "beta 0 over NaN-filled C");
	gemm_case(be, 0, 0, 4, 6, 5, 3, -1.5f, 0.5f, 1, 0, "shared B (stride 0)");
}

/* ---- embedding ---- */

struct embed_ctx {
	int B, T, C;
	const int32_t *tok;
	double *wte, *wpe, *r;
};

static double embed_loss(void *p)
{
	struct embed_ctx *x = p;
	double L = 0;
	for (int n = 0; n < x->B * x->T; n++)
		for (int c = 0; c < x->C; c++)
			L += x->r[(size_t)n * x->C + c] * (x->wte[(size_t)x->tok[n] * x->C + c] + x->wpe[(size_t)(n % x->T) * x->C + c]);
	return L;
}

static void test_embed(struct lmt_backend *be)
{
	enum { B = 2, T = 5, C = 20, V = 7 };
	const int32_t tokh[B * T] = { 3, 1, 3, 3, 0, 6, 1, 1, 3, 5 }; /* 3 four times, 1 three times */
	int32_t *tok = be->alloc(be, sizeof tokh);
	be->to_device(be, tok, tokh, sizeof tokh);
	float *wte = fnew(be, V * C), *wpe = fnew(be, T * C), *out = fnew(be, B * T * C), *r = fnew(be, B * T * C);
	float *dwte = fnew(be, V * C), *dwpe = fnew(be, T * C);
	fill(wte, V * C, -1, 1);
	fill(wpe, T * C, -1, 1);
	fill(r, B * T * C, -1, 1);
	fill(dwte, V * C, -1, 1);
	fill(dwpe, T * C, -1, 1);
	double *ref = dnew(B * T * C);
	for (int n = 0; n < B * T; n++)
		for (int c = 0; c < C; c++)
			ref[n * C + c] = (double)wte[tokh[n] * C + c] + wpe[(n % T) * C + c];
	be->embed_fwd(be, out, tok, wte, wpe, B, T, C);
	/* one float addition: the double sum of two floats is exact, so rounding it once
	 * gives the correctly rounded float sum, which is what a float add yields */
	check_exact("embed_fwd", out, ref, B * T * C);

	struct embed_ctx x = { B, T, C, tokh, dnew(V * C), dnew(T * C), dnew(B * T * C) };
	todouble(x.wte, wte, V * C);
	todouble(x.wpe, wpe, T * C);
	todouble(x.r, r, B * T * C);
	double *gw = dnew(V * C), *gp = dnew(T * C);
	fd_grad(embed_loss, &x, x.wte, V * C, gw);
	fd_grad(embed_loss, &x, x.wpe, T * C, gp);
	for (int i = 0; i < V * C; i++)
		gw[i] += dwte[i]; /* pre-filled: embed_bwd accumulates */
	for (int i = 0; i < T * C; i++)
		gp[i] += dwpe[i];
	be->embed_bwd(be, dwte, dwpe, r, tok, B, T, C);
	/* sums of at most 5 floats of order 1: a few ulp; 1e-5 leaves a margin of ~100 */
	check("embed_bwd dwte (repeated ids, accumulates into a pre-filled buffer)", dwte, gw, V * C, 1e-5, 1e-6);
	check("embed_bwd dwpe (accumulates)", dwpe, gp, T * C, 1e-5, 1e-6);
	be->free(be, tok);
	be->free(be, wte), be->free(be, wpe), be->free(be, out), be->free(be, r), be->free(be, dwte), be->free(be, dwpe);
	free(ref), free(x.wte), free(x.wpe), free(x.r), free(gw), free(gp);
}

/* ---- layer norm ---- */

struct ln_ctx {
	int N, C;
	double *x, *w, *b, *r;
};

static void ln_ref(const struct ln_ctx *x, double *out, double *mean, double *rstd)
{
	for (int n = 0; n < x->N; n++) {
		const double *v = x->x + (size_t)n * x->C;
		double m = 0, var = 0;
		for (int c = 0; c < x->C; c++)
			m += v[c];
		m /= x->C;
		for (int c = 0; c < x->C; c++)
			var += (v[c] - m) * (v[c] - m);
		var /= x->C;
		double s = 1.0 / sqrt(var + 1e-5);
		for (int c = 0; c < x->C; c++)
			out[(size_t)n * x->C + c] = (v[c] - m) * s * x->w[c] + x->b[c];
		if (mean)
			mean[n] = m, rstd[n] = s;
	}
}

static double ln_loss(void *p)
{
	struct ln_ctx *x = p;
	static double out[4096];
	ln_ref(x, out, NULL, NULL);
	double L = 0;
	for (int i = 0; i < x->N * x->C; i++)
		L += x->r[i] * out[i];
	return L;
}

static void test_layernorm(struct lmt_backend *be)
{
	enum { N = 6, C = 37 };
	float *inp = fnew(be, N * C), *w = fnew(be, C), *b = fnew(be, C), *out = fnew(be, N * C), *mean = fnew(be, N),
	      *rstd = fnew(be, N), *r = fnew(be, N * C), *dinp = fnew(be, N * C), *dw = fnew(be, C), *db = fnew(be, C);
	fill(inp, N * C, 1, 5); /* mean about 3: the centring matters */
	fill(w, C, 0.5, 1.5);
	fill(b, C, -0.5, 0.5);
	fill(r, N * C, -1, 1);
	fill(dinp, N * C, -1, 1);
	fill(dw, C, -1, 1);
	fill(db, C, -1, 1);
	struct ln_ctx x = { N, C, dnew(N * C), dnew(C), dnew(C), dnew(N * C) };
	todouble(x.x, inp, N * C);
	todouble(x.w, w, C);
	todouble(x.b, b, C);
	todouble(x.r, r, N * C);
	double *ro = dnew(N * C), *rm = dnew(N), *rs = dnew(N);
	ln_ref(&x, ro, rm, rs);
	be->layernorm_fwd(be, out, LMT_DTYPE_F32, mean, rstd, inp, w, b, N, C);
	/* float sums over C = 37 values and one rsqrt: ~1e-6 relative; outputs of order
	 * 1 get an absolute floor of 1e-6 where they cross zero */
	check("layernorm_fwd out", out, ro, N * C, 1e-5, 1e-6);
	check("layernorm_fwd mean", mean, rm, N, 1e-5, 1e-6);
	check("layernorm_fwd rstd", rstd, rs, N, 1e-5, 1e-6);

	double *gx = dnew(N * C), *gw = dnew(C), *gb = dnew(C);
	fd_grad(ln_loss, &x, x.x, N * C, gx);
	fd_grad(ln_loss, &x, x.w, C, gw);
	fd_grad(ln_loss, &x, x.b, C, gb);
	for (int i = 0; i < N * C; i++)
		gx[i] += dinp[i];
	for (int i = 0; i < C; i++)
		gw[i] += dw[i], gb[i] += db[i];
	be->layernorm_bwd(be, dinp, dw, db, r, inp, w, mean, rstd, N, C);
	/* the backward uses the float mean and rstd and two float reductions over C: a
	 * few 1e-6 relative at worst; 1e-4 relative + 1e-6 absolute (for elements near
	 * zero after cancellation) still flags any wrong or missing term, which is O(1) */
	check("layernorm_bwd dinp (accumulates)", dinp, gx, N * C, 1e-4, 1e-6);
	check("layernorm_bwd dw (accumulates)", dw, gw, C, 1e-4, 1e-6);
	check("layernorm_bwd db (accumulates)", db, gb, C, 1e-4, 1e-6);
	be->free(be, inp), be->free(be, w), be->free(be, b), be->free(be, out), be->free(be, mean);
	be->free(be, rstd), be->free(be, r), be->free(be, dinp), be->free(be, dw), be->free(be, db);
	free(x.x), free(x.w), free(x.b), free(x.r), free(ro), free(rm), free(rs), free(gx), free(gw), free(gb);
}

/* ---- bias ---- */

static void test_bias(struct lmt_backend *be)
{
	enum { N = 5, C = 70 }; /* C crosses bias_grad's 64-column blocks */
	float *x = fnew(be, N * C), *b = fnew(be, C), *r = fnew(be, N * C), *db = fnew(be, C);
	fill(x, N * C, -1, 1);
	fill(b, C, -1, 1);
	fill(r, N * C, -1, 1);
	fill(db, C, -1, 1);
	double *ref = dnew(N * C), *g = dnew(C);
	for (int i = 0; i < N * C; i++)
		ref[i] = (double)x[i] + b[i % C];
	be->bias_add(be, x, b, N, C);
	check_exact("bias_add", x, ref, N * C);
	/* d/db of sum r (x + b) is the column sum of r; the FD machinery is not needed
	 * for a linear map, the sum is written out in double */
	for (int c = 0; c < C; c++) {
		g[c] = db[c];
		for (int n = 0; n < N; n++)
			g[c] += r[n * C + c];
	}
	be->bias_grad(be, db, r, N, C);
	check("bias_grad (column sums, accumulates; 6 terms: a few ulp)", db, g, C, 1e-5, 1e-6);
	be->free(be, x), be->free(be, b), be->free(be, r), be->free(be, db);
	free(ref), free(g);
}

/* ---- GELU ---- */

static double gelu_ref(double x)
{
	return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_gelu(struct lmt_backend *be)
{
	size_t n = 2 * 16384 + 1000; /* crosses the 16384-element chunks */
	float *x = fnew(be, n), *y = fnew(be, n), *r = fnew(be, n), *dx = fnew(be, n), *dx2 = fnew(be, n);
	fill(x, n, -8, 8);
	x[0] = 0, x[1] = -0.0f, x[2] = 1e-20f, x[3] = 30, x[4] = -30;
	fill(r, n, -1, 1);
	fill(dx, n, 5, 6); /* overwritten, not accumulated */
	double *ref = dnew(n), *g = dnew(n);
	const double h = 1e-6;
	for (size_t i = 0; i < n; i++) {
		ref[i] = gelu_ref(x[i]);
		g[i] = r[i] * (gelu_ref((double)x[i] + h) - gelu_ref((double)x[i] - h)) / (2 * h);
	}
	be->gelu_fwd(be, y, LMT_DTYPE_F32, x, n);
	/* 1e-5 relative; absolute 1e-6 because below x = -3 the tanh form computes
	 * 1 + tanh(u) with tanh(u) near -1, which leaves an error of about |x| 2^-24
	 * absolute but a large relative one (the value itself is tiny) */
	check("gelu_fwd (tanh form) on [-8, 8] and edge values", y, ref, n, 1e-5, 1e-6);
	be->gelu_bwd(be, dx, x, r, n);
	/* 1e-4 relative; absolute 4e-6 because sech^2 is formed as 1 - tanh^2 in float,
	 * an absolute error of ~2^-24 that the factor 0.5 x sqrt(2/pi) (1 + 3 0.044715
	 * x^2) multiplies by up to ~30 on [-8, 8]: ~2e-6 where the true value is tiny */
	check("gelu_bwd against central differences (overwrites dinp)", dx, g, n, 1e-4, 4e-6);
	memcpy(dx2, r, n * 4);
	be->gelu_bwd(be, dx2, x, dx2, n); /* in place, as the model calls it */
	tap_ok(!memcmp(dx, dx2, n * 4), "gelu_bwd in place (dinp == dout) gives the same bits");
	be->free(be, x), be->free(be, y), be->free(be, r), be->free(be, dx), be->free(be, dx2);
	free(ref), free(g);
}

/* ---- add, axpy, scale ---- */

static void test_elementwise(struct lmt_backend *be)
{
	size_t n = 40000;
	float *a = fnew(be, n), *b = fnew(be, n), *o = fnew(be, n);
	double *ref = dnew(n);
	fill(a, n, -100, 100);
	fill(b, n, -1, 1);
	for (size_t i = 0; i < n; i++)
		ref[i] = (double)a[i] + b[i];
	be->add(be, o, a, b, n);
	check_exact("add", o, ref, n);
	/* y += a x: a*x and the sum are each rounded once (no contraction required), so
	 * |error| <= u |a x| + u |y + a x| <= 2^-23 (|y| + |a x|) */
	float s = 0.37f;
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		ref[i] = (double)o[i] + (double)s * b[i];
	float *y0 = malloc(n * 4);
	memcpy(y0, o, n * 4);
	be->axpy(be, o, s, b, n);
	for (size_t i = 0; i < n; i++)
		bad += !(fabs(o[i] - ref[i]) <= 0x1.0p-23 * (fabs(y0[i]) + fabs((double)s * b[i])));
	tap_ok(bad == 0, "axpy within 2^-23 (|y| + |a x|) of the double result (%zu outside)", bad);
	for (size_t i = 0; i < n; i++)
		ref[i] = (double)o[i] * -2.5f;
	be->scale(be, o, -2.5f, n);
	check_exact("scale", o, ref, n);
	memcpy(y0, o, n * 4);
	be->add(be, o, a, b, 0);
	be->axpy(be, o, 1.0f, b, 0);
	be->scale(be, o, 0.0f, 0);
	tap_ok(!memcmp(y0, o, n * 4), "add, axpy and scale with n = 0 write nothing");
	be->free(be, a), be->free(be, b), be->free(be, o);
	free(ref), free(y0);
}

/* ---- attention ---- */

struct att_ctx {
	int B, T, NH, HS;
	const int32_t *seg;
	double *qkv, *r;
	double *out, *lse;
};

static int allowed(const int32_t *seg, int b, int T, int i, int j)
{
	return j <= i && (!seg || seg[b * T + j] == seg[b * T + i]);
}

static void att_ref(struct att_ctx *x)
{
	int C = x->NH * x->HS, C3 = 3 * C;
	double scale = 1 / sqrt((double)x->HS), s[64];
	for (int b = 0; b < x->B; b++)
		for (int h = 0; h < x->NH; h++)
			for (int i = 0; i < x->T; i++) {
				const double *q = x->qkv + ((size_t)b * x->T + i) * C3 + h * x->HS;
				double mx = -INFINITY, sum = 0;
				for (int j = 0; j < x->T; j++) {
					if (!allowed(x->seg, b, x->T, i, j))
						continue;
					const double *k = x->qkv + ((size_t)b * x->T + j) * C3 + C + h * x->HS;
					s[j] = 0;
					for (int d = 0; d < x->HS; d++)
						s[j] += q[d] * k[d];
					s[j] *= scale;
					mx = fmax(mx, s[j]);
				}
				for (int j = 0; j < x->T; j++)
					if (allowed(x->seg, b, x->T, i, j))
						sum += exp(s[j] - mx);
				double *o = x->out + ((size_t)b * x->T + i) * C + h * x->HS;
				for (int d = 0; d < x->HS; d++)
					o[d] = 0;
				for (int j = 0; j < x->T; j++) {
					if (!allowed(x->seg, b, x->T, i, j))
						continue;
					const double *v = x->qkv + ((size_t)b * x->T + j) * C3 + 2 * C + h * x->HS;
					for (int d = 0; d < x->HS; d++)
						o[d] += exp(s[j] - mx) / sum * v[d];
				}
				x->lse[((size_t)b * x->NH + h) * x->T + i] = mx + log(sum);
			}
}

static double att_loss(void *p)
{
	struct att_ctx *x = p;
	att_ref(x);
	double L = 0;
	for (int i = 0; i < x->B * x->T * x->NH * x->HS; i++)
		L += x->r[i] * x->out[i];
	return L;
}

static void attention_case(struct lmt_backend *be, const int32_t *segh, const char *label)
{
	enum { B = 2, T = 7, NH = 2, HS = 4, C = NH * HS };
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
	float *qkv = fnew(be, nq), *out = fnew(be, no), *lse = fnew(be, nl), *r = fnew(be, no), *dqkv = fnew(be, nq);
	int32_t *seg = NULL;
	if (segh) {
		seg = be->alloc(be, B * T * sizeof *seg);
		be->to_device(be, seg, segh, B * T * sizeof *seg);
	}
	fill(qkv, nq, -1.5, 1.5);
	fill(r, no, -1, 1);
	fill(dqkv, nq, 100, 200); /* overwritten */
	struct att_ctx x = { B, T, NH, HS, segh, dnew(nq), dnew(no), dnew(no), dnew(nl) };
	todouble(x.qkv, qkv, nq);
	todouble(x.r, r, no);
	att_ref(&x);
	be->attention_fwd(be, out, lse, qkv, seg, B, T, NH, HS, 0);
	char what[200];
	/* dot products of HS = 4, softmax over at most 7 keys, sums of 7 terms: ~1e-6
	 * relative; absolute floor 1e-6 for outputs near zero */
	snprintf(what, sizeof what, "attention_fwd %s: out", label);
	check(what, out, x.out, no, 1e-5, 1e-6);
	snprintf(what, sizeof what, "attention_fwd %s: lse is log sum exp of the scaled allowed scores", label);
	check(what, lse, x.lse, nl, 1e-5, 1e-6);
	double *g = dnew(nq);
	fd_grad(att_loss, &x, x.qkv, nq, g);
	be->attention_bwd(be, dqkv, r, qkv, out, lse, seg, B, T, NH, HS);
	/* the backward recomputes probabilities from the float lse (exp(s - lse) with
	 * s - lse rounded: ~1e-6 relative per probability); 1e-4 relative + 1e-6 */
	snprintf(what, sizeof what, "attention_bwd %s: dqkv against central differences (overwrites)", label);
	check(what, dqkv, g, nq, 1e-4, 1e-6);
	if (segh) {
		/* a position alone in its segment (padding) attends only to itself: out = v */
		int same = 1, found = 0;
		for (int b = 0; b < B; b++)
			for (int i = 0; i < T; i++) {
				int alone = 1;
				for (int j = 0; j < T; j++)
					alone &= j == i || segh[b * T + j] != segh[b * T + i];
				if (!alone)
					continue;
				found++;
				same &= !memcmp(out + ((size_t)b * T + i) * C, qkv + ((size_t)b * T + i) * 3 * C + 2 * C,
						C * sizeof(float));
			}
		tap_ok(found && same, "attention_fwd %s: %d positions alone in their segment output their own v, bitwise",
		       label, found);
	}
	be->free(be, qkv), be->free(be, out), be->free(be, lse), be->free(be, r), be->free(be, dqkv), be->free(be, seg);
	free(x.qkv), free(x.r), free(x.out), free(x.lse), free(g);
}

static void test_attention(struct lmt_backend *be)
{
	attention_case(be, NULL, "causal");
	/* sequence 0: documents of 2, 3 and 1 positions, then padding with its own
	 * negative id -(p+1) as lmt_make_batch writes it; sequence 1: 4 and 3 */
	static const int32_t seg[2 * 7] = { 0, 0, 1, 1, 1, 2, -7, 0, 0, 0, 0, 1, 1, 1 };
	attention_case(be, seg, "with segments");
}

/* ---- cross-entropy ---- */

static void xent_case(struct lmt_backend *be, double center, double spread, int one_big, const char *label)
{
	enum { N = 6, V = 11, Vp = 128 };
	const int32_t tgth[N] = { 3, -1, 0, 10, 7, -1 };
	float dscale = 0.25f; /* 1 / 4 valid targets */
	int32_t *tgt = be->alloc(be, sizeof tgth);
	be->to_device(be, tgt, tgth, sizeof tgth);
	float *lg = fnew(be, N * Vp), *loss = fnew(be, N);
	for (int n = 0; n < N; n++)
		for (int j = 0; j < Vp; j++)
			lg[n * Vp + j] = j < V ? (float)(center + unif(-spread, spread)) : (float)(center + 1e3);
	if (one_big)
		lg[0 * Vp + 5] = 1e4f, lg[2 * Vp + 0] = 1e4f, lg[3 * Vp + 2] = 1e4f;
	for (int n = 0; n < N; n++)
		loss[n] = 12345;
	double *rl = dnew(N), *rg = dnew(N * Vp);
	for (int n = 0; n < N; n++) {
		if (tgth[n] < 0)
			continue; /* loss 0, gradient row 0 */
		double mx = -INFINITY, s = 0;
		for (int j = 0; j < V; j++)
			mx = fmax(mx, lg[n * Vp + j]);
		for (int j = 0; j < V; j++)
			s += exp(lg[n * Vp + j] - mx);
		double lse = mx + log(s);
		rl[n] = lse - lg[n * Vp + tgth[n]];
		for (int j = 0; j < V; j++)
			rg[n * Vp + j] = (exp(lg[n * Vp + j] - lse) - (j == tgth[n])) * dscale;
	}
	double *acc = be->alloc(be, sizeof *acc), acch = 0.5; /* a prior sum: the op adds to it */
	be->to_device(be, acc, &acch, sizeof acch);
	be->xent_fwd_bwd(be, loss, acc, lg, tgt, N, V, Vp, dscale);
	be->to_host(be, &acch, acc, sizeof acch);
	char what[200];
	/* the loss: a max, a sum of 11 exponentials and a log, ~1e-6 relative */
	snprintf(what, sizeof what, "xent_fwd_bwd %s: losses (0 where target -1; padding columns ignored)", label);
	check(what, loss, rl, N, 1e-5, 1e-6);
	/* the gradient: softmax probabilities to ~1e-6 relative; p - 1 near a target
	 * with p near 1 cancels, hence an absolute floor of 1e-6 dscale */
	snprintf(what, sizeof what,
		 "xent_fwd_bwd %s: logits become (softmax - onehot) * dscale; 0 in padding columns and masked rows", label);
	check(what, lg, rg, N * Vp, 1e-5, 1e-6 * dscale);
	size_t nz = 0;
	for (int n = 0; n < N; n++)
		for (int j = 0; j < Vp; j++)
			nz += (j >= V || tgth[n] < 0) && (lg[n * Vp + j] != 0 || signbit(lg[n * Vp + j]));
	for (int n = 0; n < N; n++)
		nz += tgth[n] < 0 && (loss[n] != 0 || signbit(loss[n]));
	snprintf(what, sizeof what, "xent_fwd_bwd %s: padding columns, masked rows and their losses are exactly +0", label);
	tap_ok(nz == 0, "%s (%zu are not)", what, nz);
	double lsum = 0.5;
	for (int n = 0; n < N; n++)
		lsum += loss[n];
	/* the accumulator adds the float losses in double: exact up to double rounding */
	tap_ok(fabs(acch - lsum) <= 1e-12 * fabs(lsum), "xent_fwd_bwd %s: the device accumulator gains the sum of the losses "
	       "(%.17g, expected %.17g)", label, acch, lsum);
	be->free(be, tgt), be->free(be, lg), be->free(be, loss), be->free(be, acc);
	free(rl), free(rg);
}

static void test_xent(struct lmt_backend *be)
{
	xent_case(be, 0, 3, 0, "logits in [-3, 3]");
	xent_case(be, 1e4, 5, 0, "logits around 1e4");
	xent_case(be, -1e4, 5, 0, "logits around -1e4");
	xent_case(be, 0, 5, 1, "one logit of 1e4 among O(1)");
}

/* ---- AdamW ---- */

static void test_adamw(struct lmt_backend *be)
{
	size_t n = 20000; /* crosses the 16384-element chunks */
	float *p = fnew(be, n), *g = fnew(be, n), *m = fnew(be, n), *v = fnew(be, n);
	double *P = dnew(n), *M = dnew(n), *Vv = dnew(n), *mag = dnew(n), *Mmag = dnew(n);
	fill(p, n, -1, 1);
	todouble(P, p, n);
	const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
	for (int t = 1; t <= 3; t++) {
		float lr = 1e-2f * t / 3;
		for (size_t i = 0; i < n; i++)
			g[i] = i % 97 == 0 ? 0.0f : i % 89 == 0 ? (float)unif(-1e3, 1e3) :
			       i % 83 == 0 ? (float)unif(-1e-6, 1e-6) : (float)unif(-1, 1);
		float bc1 = (float)(1 - pow(b1, t)), bc2 = (float)(1 - pow(b2, t));
		/* the formula in backend.h, in double, with the same float hyperparameters */
		for (size_t i = 0; i < n; i++) {
			double gi = (double)g[i] * gs;
			M[i] = b1 * M[i] + (1 - (double)b1) * gi;
			Mmag[i] = b1 * Mmag[i] + (1 - (double)b1) * fabs(gi);
			Vv[i] = b2 * Vv[i] + (1 - (double)b2) * gi * gi;
			double upd = M[i] / bc1 / (sqrt(Vv[i] / bc2) + eps) + wd * P[i];
			mag[i] += lr * (fabs(M[i] / bc1 / (sqrt(Vv[i] / bc2) + eps)) + fabs(wd * P[i]));
			P[i] -= lr * upd;
		}
		struct lmt_adamw ah = { .lr = lr, .b1 = b1, .b2 = b2, .eps = eps, .wd = wd, .bc1 = bc1, .bc2 = bc2,
					.gscale = gs };
		be->adamw(be, p, NULL, LMT_DTYPE_F32, g, m, v, n, &ah, NULL);
	}
	/* m: a few roundings per step, each relative to the terms summed, which may
	 * cancel: within 1e-5 of the same recurrence on |g|. v: positive terms, 1e-5
	 * relative. p: each step's error is a few ulp of the update (lr times a ratio of
	 * order 1): 1e-6 relative + 1e-5 of the summed update magnitudes */
	size_t bad = 0, wi = 0;
	for (size_t i = 0; i < n; i++)
		if (!(fabs(m[i] - M[i]) <= 1e-5 * Mmag[i]))
			bad++, wi = i;
	if (!tap_ok(bad == 0, "adamw m after 3 steps: within 1e-5 of the moment of |g|"))
		tap_diag("  %zu bad, e.g. [%zu]: got %.9g expected %.9g", bad, wi, m[wi], M[wi]);
	check("adamw v after 3 steps", v, Vv, n, 1e-5, 1e-30);
	bad = 0;
	for (size_t i = 0; i < n; i++)
		if (!(fabs(p[i] - P[i]) <= 1e-6 * fabs(P[i]) + 1e-5 * mag[i]))
			bad++, wi = i;
	if (!tap_ok(bad == 0, "adamw p after 3 steps: within 1e-6 relative + 1e-5 of the summed update sizes "
			      "(zero, tiny, huge gradients; bias correction; decoupled decay; gscale)"))
		tap_diag("  %zu bad, e.g. [%zu]: got %.9g expected %.9g", bad, wi, p[wi], P[wi]);
	be->free(be, p), be->free(be, g), be->free(be, m), be->free(be, v);
	free(P), free(M), free(Vv), free(mag), free(Mmag);
}

/* ---- reductions ---- */

static void test_reductions(struct lmt_backend *be)
{
	size_t n = 200003; /* several 65536-element chunks and a partial one */
	float *x = fnew(be, n);
	fill(x, n, -2, 2);
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * x[i];
	double *acc = be->alloc(be, 2 * sizeof *acc), h[2];
	be->sumsq(be, acc, x, n);
	be->to_host(be, h, acc, sizeof h);
	double got = h[0];
	/* every square of a float is exact in double; only the order of the double
	 * additions differs: relative 1e-12 */
	tap_ok(fabs(got - s) <= 1e-12 * s, "sumsq of %zu floats: %.17g, double sum %.17g", n, got, s);
	TAP_EQ_U64(h[1], 0, "sumsq counts no non-finite value among finite ones");
	double h0[2], h1[2];
	be->zero(be, acc, sizeof h);
	be->sumsq(be, acc, x, 0);
	be->to_host(be, h0, acc, sizeof h0);
	be->sumsq(be, acc, x, 1);
	be->to_host(be, h1, acc, sizeof h1);
	tap_ok(h0[0] == 0 && h0[1] == 0 && h1[0] == (double)x[0] * x[0] && h1[1] == 0, "sumsq of 0 and 1 elements");
	x[3] = NAN;
	x[70000] = INFINITY;
	x[n - 1] = -INFINITY;
	x[150000] = -NAN;
	x[5] = FLT_MAX, x[6] = -FLT_MAX, x[7] = FLT_MIN / 4 /* denormal */, x[8] = -0.0f;
	be->zero(be, acc, sizeof h);
	be->sumsq(be, acc, x, n);
	be->to_host(be, h, acc, sizeof h);
	TAP_EQ_U64(h[1], 4, "sumsq's non-finite count: NaN, -NaN, +inf and -inf (4), not FLT_MAX, denormals or -0");
	be->zero(be, acc, sizeof h);
	be->sumsq(be, acc, x, 3);
	be->to_host(be, h, acc, sizeof h);
	TAP_EQ_U64(h[1], 0, "sumsq's non-finite count of a prefix without them is 0");
	be->free(be, x), be->free(be, acc);
}

/* ---- determinism ---- */

/*
 * One pass over the ops that reduce or run in parallel, at sizes where both
 * threads get work; every output appended to res (n floats). Inputs come from a
 * fixed seed, so two passes see the same inputs.
 */
static size_t det_pass(struct lmt_backend *be, float *res)
{
	struct lmt_rng save = rng;
	lmt_rng_seed(&rng, 99, 1);
	size_t k = 0;
	enum { B = 2, T = 33, NH = 3, HS = 8, C = NH * HS, N = B * T, V = 300, Vp = 384, CL = 100 };
	/* gemm */
	int M = 96, NN = 80, K = 72;
	float *A = fnew(be, M * K), *Bm = fnew(be, K * NN), *Cm = fnew(be, M * NN);
	fill(A, M * K, -1, 1), fill(Bm, K * NN, -1, 1);
	struct lmt_gemm gd = { .M = M, .N = NN, .K = K, .alpha = 1, .A = A, .lda = K, .B = Bm, .ldb = NN, .C = Cm,
			       .ldc = NN, .batch = 1, .ab_dtype = LMT_DTYPE_F32, .c_dtype = LMT_DTYPE_F32 };
	be->gemm(be, &gd);
	memcpy(res + k, Cm, M * NN * 4), k += M * NN;
	/* layer norm */
	float *x = fnew(be, N * CL), *w = fnew(be, CL), *b = fnew(be, CL), *o = fnew(be, N * CL), *mu = fnew(be, N),
	      *rs = fnew(be, N), *dx = fnew(be, N * CL), *dw = fnew(be, CL), *db = fnew(be, CL);
	fill(x, N * CL, -2, 2), fill(w, CL, 0.5, 1.5), fill(b, CL, -1, 1), fill(o, N * CL, -1, 1);
	be->layernorm_fwd(be, o, LMT_DTYPE_F32, mu, rs, x, w, b, N, CL);
	be->layernorm_bwd(be, dx, dw, db, o, x, w, mu, rs, N, CL);
	memcpy(res + k, o, N * CL * 4), k += N * CL;
	memcpy(res + k, dx, N * CL * 4), k += N * CL;
	memcpy(res + k, dw, CL * 4), k += CL;
	memcpy(res + k, db, CL * 4), k += CL;
	/* embedding backward with repeats, bias_grad */
	int32_t *tok = be->alloc(be, N * 4);
	for (int i = 0; i < N; i++)
		tok[i] = (int32_t)(lmt_rng_next(&rng) % 5);
	float *dwte = fnew(be, 5 * CL), *dwpe = fnew(be, T * CL);
	be->embed_bwd(be, dwte, dwpe, dx, tok, B, T, CL);
	be->bias_grad(be, db, dx, N, CL);
	memcpy(res + k, dwte, 5 * CL * 4), k += 5 * CL;
	memcpy(res + k, dwpe, T * CL * 4), k += T * CL;
	memcpy(res + k, db, CL * 4), k += CL;
	/* attention with segments */
	float *qkv = fnew(be, N * 3 * C), *ao = fnew(be, N * C), *lse = fnew(be, B * NH * T), *dq = fnew(be, N * 3 * C);
	int32_t *seg = be->alloc(be, N * 4);
	for (int i = 0; i < N; i++)
		seg[i] = i % T < 20 ? 0 : i % T < 30 ? 1 : -(i % T + 1);
	fill(qkv, N * 3 * C, -2, 2);
	be->attention_fwd(be, ao, lse, qkv, seg, B, T, NH, HS, 0);
	memcpy(res + k, ao, N * C * 4), k += N * C;
	memcpy(res + k, lse, B * NH * T * 4), k += B * NH * T;
	be->attention_bwd(be, dq, ao, qkv, ao, lse, seg, B, T, NH, HS);
	memcpy(res + k, dq, N * 3 * C * 4), k += N * 3 * C;
	/* cross-entropy, GELU, AdamW */
	float *lg = fnew(be, N * Vp), *ls = fnew(be, N);
	int32_t *tg = be->alloc(be, N * 4);
	fill(lg, N * Vp, -4, 4);
	for (int i = 0; i < N; i++)
		tg[i] = i % 7 == 0 ? -1 : (int32_t)(lmt_rng_next(&rng) % V);
	double *acc = be->alloc(be, 2 * sizeof *acc);
	be->xent_fwd_bwd(be, ls, acc, lg, tg, N, V, Vp, 1.0f / N);
	memcpy(res + k, ls, N * 4), k += N;
	memcpy(res + k, lg, N * Vp * 4), k += N * Vp;
	size_t ng = 40000;
	float *gx = fnew(be, ng), *gy = fnew(be, ng), *m = fnew(be, ng), *v = fnew(be, ng);
	fill(gx, ng, -5, 5);
	be->gelu_fwd(be, gy, LMT_DTYPE_F32, gx, ng);
	memcpy(res + k, gy, ng * 4), k += ng;
	struct lmt_adamw ah = { .lr = 1e-3f, .b1 = 0.9f, .b2 = 0.95f, .eps = 1e-8f, .wd = 0.1f, .bc1 = 0.1f, .bc2 = 0.05f,
				.gscale = 1.0f };
	be->adamw(be, gx, NULL, LMT_DTYPE_F32, gy, m, v, ng, &ah, acc + 1);
	memcpy(res + k, gx, ng * 4), k += ng;
	double hacc[2];
	be->to_host(be, hacc, acc, sizeof hacc);
	float lsf[2] = { (float)hacc[0], (float)(hacc[0] - (float)hacc[0]) };
	memcpy(res + k, lsf, 8), k += 2;
	be->zero(be, acc, sizeof hacc);
	be->sumsq(be, acc, gx, ng);
	be->to_host(be, hacc, acc, sizeof hacc);
	float ssf[2] = { (float)hacc[0], (float)(hacc[0] - (float)hacc[0]) };
	memcpy(res + k, ssf, 8), k += 2;
	be->free(be, A), be->free(be, Bm), be->free(be, Cm), be->free(be, x), be->free(be, w), be->free(be, b);
	be->free(be, o), be->free(be, mu), be->free(be, rs), be->free(be, dx), be->free(be, dw), be->free(be, db);
	be->free(be, tok), be->free(be, dwte), be->free(be, dwpe), be->free(be, qkv), be->free(be, ao);
	be->free(be, lse), be->free(be, dq), be->free(be, seg), be->free(be, lg), be->free(be, ls), be->free(be, tg);
	be->free(be, gx), be->free(be, gy), be->free(be, m), be->free(be, v), be->free(be, acc);
	rng = save;
	return k;
}

static void test_determinism(void)
{
	size_t cap = 1 << 20;
	float *r1 = calloc(cap, 4), *r2 = calloc(cap, 4), *r3 = calloc(cap, 4);
	struct lmt_backend be;
	struct lmt_err err = { 0 };
	/* each backend is made just before use: lmt_backend_cpu_init sets OpenMP's
	 * thread count (oneDNN's) for the whole process */
	lmt_backend_open(&be, "cpu", 2, &err);
	size_t n = det_pass(&be, r1);
	det_pass(&be, r2);
	be.release(&be);
	tap_ok(!memcmp(r1, r2, n * 4), "two passes with 2 threads give bitwise identical results (%zu values)", n);
	lmt_backend_open(&be, "cpu", 1, &err);
	det_pass(&be, r3);
	be.release(&be);
	/* between thread counts only the split of the work changes; every output is
	 * compared relative to the largest magnitude in the run (1e-5) */
	double mx = 0, worst = 0;
	size_t differ = 0;
	for (size_t i = 0; i < n; i++) {
		mx = fmax(mx, fabs(r1[i]));
		differ += memcmp(&r1[i], &r3[i], 4) != 0;
	}
	for (size_t i = 0; i < n; i++)
		worst = fmax(worst, fabs((double)r1[i] - r3[i]));
	tap_ok(worst <= 1e-5 * mx, "1 thread against 2: largest difference %.3g, 1e-5 of the largest value %.3g "
				  "(%zu of %zu values differ at all)", worst, mx, differ, n);
	free(r1), free(r2), free(r3);
}

/* The cuda backend's run-time libraries (cuBLASLt, opened rather than linked):
 * where the build has CUDA, the toolkit's library loads and every entry point
 * the backend calls resolves, GPU or not, so that a GPU machine does not find a
 * missing symbol at its first GEMM. */
static void test_cuda_libs(void)
{
#ifdef LMT_HAVE_CUDA
	struct lmt_err err = { 0 };
	int rc = lmt_backend_cuda_libs(&err);
	tap_ok(rc == 0, "cuda backend: cuBLASLt opened at run time, every entry point it calls found (%s)",
	       rc ? err.msg : "ok");
	rc = lmt_backend_cuda_libs(&err);
	tap_ok(rc == 0, "... and a second call answers the same, without loading it again");
#else
	tap_ok(1, "# skip the build has no CUDA: no run-time libraries to open");
#endif
}

int main(void)
{
	struct lmt_backend be;
	struct lmt_err err = { 0 };
	lmt_rng_seed(&rng, 20240611, 0);
	if (!tap_ok(lmt_backend_open(&be, "cpu", 2, &err) == 0 && !strcmp(be.name, "cpu") && be.threads == 2,
		    "the CPU backend with 2 threads (%s)", err.msg))
		return tap_done();
	test_memory(&be);
	test_gemm(&be);
	test_embed(&be);
	test_layernorm(&be);
	test_bias(&be);
	test_gelu(&be);
	test_elementwise(&be);
	test_attention(&be);
	test_xent(&be);
	test_adamw(&be);
	test_reductions(&be);
	be.release(&be);
	test_determinism();
	test_cuda_libs();
	return tap_done();
}
