/*
 * cpu.c: the reference backend. GEMMs go to OpenBLAS; every other operation
 * is an OpenMP loop written here.
 *
 * OpenBLAS is never called from inside an OpenMP parallel region (Debian's OpenBLAS
 * is the pthread build, and nesting its threads under OpenMP's oversubscribes the
 * cores); both use be->threads threads, one after the other.
 *
 * Determinism: for a given thread count every result is bitwise reproducible. Loops
 * that reduce over rows (parameter gradients) are split by columns instead, so each
 * output element is summed by one thread in row order; global reductions (sum of
 * squares) combine per-thread partial sums in thread order.
 *
 * Attention is computed one query row at a time: the scores of one row (at most T
 * floats per thread) are formed, max-normalised, exponentiated and used at once, so
 * no T x T matrix is ever stored; the backward pass recomputes them from the saved
 * log-sum-exp. Memory is O(B*NH*T) for lse plus O(threads*T) scratch.
 */
#include "backend/backend.h"
#include "backend/impl.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"

/* Hot loops are compiled for several x86 levels and picked at run time, and their
 * expf/tanhf calls vectorised through glibc's libmvec (declared here: glibc's own
 * declarations do so only under -ffast-math, which would also break isfinite). */
#if defined(__x86_64__) && !defined(__clang__)
#define HOT __attribute__((target_clones("avx512f", "avx2", "default")))
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float tanhf(float);
#else
#define HOT
#endif

struct cpu {
	float *scratch;          /* threads * scratch_per */
	size_t scratch_per;
};

static void cpu_release(struct lmt_backend *be)
{
	struct cpu *c = be->priv;
	if (c)
		free(c->scratch);
	free(c);
	be->priv = NULL;
}

static void *cpu_alloc(struct lmt_backend *be, size_t bytes)
{
	(void)be;
	void *p = NULL;
	if (posix_memalign(&p, 64, bytes ? bytes : 64))
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static void cpu_free(struct lmt_backend *be, void *p)
{
	(void)be;
	free(p);
}

static void cpu_copy(struct lmt_backend *be, void *dst, const void *src, size_t bytes)
{
	(void)be;
	if (bytes)
		memmove(dst, src, bytes);
}

static void cpu_zero(struct lmt_backend *be, void *p, size_t bytes)
{
	(void)be;
	memset(p, 0, bytes);
}

static void cpu_sync(struct lmt_backend *be)
{
	(void)be;
}

static void cpu_gemm(struct lmt_backend *be, int ta, int tb, int M, int N, int K, float alpha,
		     const float *A, int lda, long sa, const float *B, int ldb, long sb, float beta,
		     float *C, int ldc, long sc, int batch)
{
	(void)be;
	for (int b = 0; b < batch; b++)
		cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
			    alpha, A + b * sa, lda, B + b * sb, ldb, beta, C + b * sc, ldc);
}

static void cpu_embed_fwd(struct lmt_backend *be, float *out, const int32_t *tok, const float *wte,
			  const float *wpe, int B, int T, int C)
{
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < B * T; n++) {
		const float *e = wte + (size_t)tok[n] * C, *p = wpe + (size_t)(n % T) * C;
		float *o = out + (size_t)n * C;
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
}

static void cpu_embed_bwd(struct lmt_backend *be, float *dwte, float *dwpe, const float *dout,
			  const int32_t *tok, int B, int T, int C)
{
	/* split by channel blocks: each thread owns columns, so no two write one element */
	int nb = (C + 15) / 16;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int blk = 0; blk < nb; blk++) {
		int c0 = blk * 16, c1 = LMT_MIN(C, c0 + 16);
		for (int n = 0; n < B * T; n++) {
			const float *d = dout + (size_t)n * C;
			float *w = dwte + (size_t)tok[n] * C, *p = dwpe + (size_t)(n % T) * C;
			for (int c = c0; c < c1; c++) {
				w[c] += d[c];
				p[c] += d[c];
			}
		}
	}
}

HOT static void ln_row(float *o, float *mean, float *rstd, const float *x, const float *w, const float *b, int C)
{
	float m = 0;
	for (int c = 0; c < C; c++)
		m += x[c];
	m /= C;
	float v = 0;
	for (int c = 0; c < C; c++) {
		float d = x[c] - m;
		v += d * d;
	}
	v /= C;
	float s = 1.0f / sqrtf(v + 1e-5f);
	for (int c = 0; c < C; c++)
		o[c] = (x[c] - m) * s * w[c] + b[c];
	*mean = m;
	*rstd = s;
}

static void cpu_layernorm_fwd(struct lmt_backend *be, float *out, float *mean, float *rstd, const float *inp,
			      const float *w, const float *b, int N, int C)
{
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < N; n++)
		ln_row(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, w, b, C);
}

HOT static void ln_bwd_row(float *dx, const float *dy, const float *x, const float *w, float m, float s, int C)
{
	/* dnorm = dy * w; dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) */
	float a = 0, bsum = 0;
	for (int c = 0; c < C; c++) {
		float norm = (x[c] - m) * s, dn = dy[c] * w[c];
		a += dn;
		bsum += dn * norm;
	}
	a /= C;
	bsum /= C;
	for (int c = 0; c < C; c++) {
		float norm = (x[c] - m) * s, dn = dy[c] * w[c];
		dx[c] += s * (dn - a - norm * bsum);
	}
}

static void cpu_layernorm_bwd(struct lmt_backend *be, float *dinp, float *dw, float *db, const float *dout,
			      const float *inp, const float *w, const float *mean, const float *rstd, int N, int C)
{
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < N; n++)
		ln_bwd_row(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, w, mean[n], rstd[n], C);
	int nb = (C + 15) / 16;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int blk = 0; blk < nb; blk++) {
		int c0 = blk * 16, c1 = LMT_MIN(C, c0 + 16);
		for (int n = 0; n < N; n++) {
			const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
			for (int c = c0; c < c1; c++) {
				dw[c] += dy[c] * (x[c] - mean[n]) * rstd[n];
				db[c] += dy[c];
			}
		}
	}
}

static void cpu_bias_add(struct lmt_backend *be, float *x, const float *b, int N, int C)
{
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < N; n++) {
		float *r = x + (size_t)n * C;
		for (int c = 0; c < C; c++)
			r[c] += b[c];
	}
}

static void cpu_bias_grad(struct lmt_backend *be, float *db, const float *dout, int N, int C)
{
	int nb = (C + 63) / 64;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int blk = 0; blk < nb; blk++) {
		int c0 = blk * 64, c1 = LMT_MIN(C, c0 + 64);
		for (int n = 0; n < N; n++) {
			const float *d = dout + (size_t)n * C;
			for (int c = c0; c < c1; c++)
				db[c] += d[c];
		}
	}
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

HOT static void gelu_chunk(float *o, const float *x, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++) {
		float v = x[i];
		o[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
	}
}

static void cpu_gelu_fwd(struct lmt_backend *be, float *out, const float *inp, size_t n)
{
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++)
		gelu_chunk(out + k * chunk, inp + k * chunk, LMT_MIN(chunk, n - k * chunk));
}

HOT static void gelu_bwd_chunk(float *dx, const float *x, const float *dy, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++) {
		float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v), t = tanhf(u);
		float sech2 = 1.0f - t * t;
		float g = 0.5f * (1.0f + t) + 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
		dx[i] = g * dy[i];
	}
}

static void cpu_gelu_bwd(struct lmt_backend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++)
		gelu_bwd_chunk(dinp + k * chunk, inp + k * chunk, dout + k * chunk, LMT_MIN(chunk, n - k * chunk));
}

HOT static void add_chunk(float *o, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		o[i] = a[i] + b[i];
}

static void cpu_add(struct lmt_backend *be, float *out, const float *a, const float *b, size_t n)
{
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++)
		add_chunk(out + k * chunk, a + k * chunk, b + k * chunk, LMT_MIN(chunk, n - k * chunk));
}

HOT static void axpy_chunk(float *y, float a, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

static void cpu_axpy(struct lmt_backend *be, float *y, float a, const float *x, size_t n)
{
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++)
		axpy_chunk(y + k * chunk, a, x + k * chunk, LMT_MIN(chunk, n - k * chunk));
}

/* ---- attention ---- */

HOT static float dot(const float *a, const float *b, int n)
{
	float s = 0;
#pragma omp simd reduction(+ : s)
	for (int i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

HOT static void axpy_row(float *y, float a, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* s[j] = exp(s[j] * a - b) for j in [j0, j1), returning their sum */
HOT static float exp_row(float *s, int j0, int j1, float a, float b)
{
	float sum = 0;
#pragma omp simd reduction(+ : sum)
	for (int j = j0; j < j1; j++) {
		s[j] = expf(s[j] * a - b);
		sum += s[j];
	}
	return sum;
}

/* 2T floats of scratch per thread for rows of scores; grown before a parallel region. */
static int reserve(struct lmt_backend *be, int T)
{
	struct cpu *c = be->priv;
	size_t per = ((size_t)2 * T + 15) & ~(size_t)15;
	if (c->scratch_per >= per)
		return 0;
	float *s = NULL;
	if (posix_memalign((void **)&s, 64, per * be->threads * sizeof *s))
		return LMT_ENOMEM;
	free(c->scratch);
	c->scratch = s;
	c->scratch_per = per;
	return 0;
}

/* First key position query i may attend to: 0, or its segment's start. */
static inline int seg_start(const int32_t *seg, int i)
{
	int j = i;
	if (!seg)
		return 0;
	while (j > 0 && seg[j - 1] == seg[i])
		j--;
	return j;
}

static void cpu_attention_fwd(struct lmt_backend *be, float *out, float *lse, const float *qkv, const int32_t *seg,
			      int B, int T, int NH, int HS)
{
	struct cpu *cp = be->priv;
	int C = NH * HS, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)HS);
	if (reserve(be, T)) {
		/* no memory for one row of scores per thread: poison the output so the
		 * non-finite check stops the run with a clear message */
		for (size_t i = 0; i < (size_t)B * T * C; i++)
			out[i] = NAN;
		return;
	}
#pragma omp parallel num_threads(be->threads)
	{
		float *s = cp->scratch + (size_t)omp_get_thread_num() * cp->scratch_per;
#pragma omp for collapse(3) schedule(static)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++)
				for (int i = 0; i < T; i++) {
					const float *base = qkv + (size_t)b * T * C3;
					const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
					const float *q = base + (size_t)i * C3 + h * HS;
					int j0 = seg_start(sg, i);
					float mx = -INFINITY;
					for (int j = j0; j <= i; j++) {
						s[j] = dot(q, base + (size_t)j * C3 + C + h * HS, HS);
						mx = s[j] > mx ? s[j] : mx;
					}
					float sum = exp_row(s, j0, i + 1, scale, mx * scale);
					mx *= scale;
					float *o = out + ((size_t)b * T + i) * C + h * HS, inv = 1.0f / sum;
					memset(o, 0, (size_t)HS * sizeof *o);
					for (int j = j0; j <= i; j++)
						axpy_row(o, s[j] * inv, base + (size_t)j * C3 + 2 * C + h * HS, HS);
					lse[((size_t)b * NH + h) * T + i] = mx + logf(sum);
				}
	}
}

static void cpu_attention_bwd(struct lmt_backend *be, float *dqkv, const float *dout, const float *qkv,
			      const float *out, const float *lse, const int32_t *seg, int B, int T, int NH, int HS)
{
	struct cpu *cp = be->priv;
	int C = NH * HS, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)HS);
	memset(dqkv, 0, (size_t)B * T * C3 * sizeof *dqkv);
	if (reserve(be, T)) {
		for (size_t i = 0; i < (size_t)B * T * C3; i++)
			dqkv[i] = NAN; /* stops the run at the non-finite check, naming the tensor */
		return;
	}
	/* one (b, h) per iteration: its dk, dv accumulate over all queries in one thread */
#pragma omp parallel num_threads(be->threads)
	{
		float *p = cp->scratch + (size_t)omp_get_thread_num() * cp->scratch_per, *ds = p + T;
#pragma omp for collapse(2) schedule(static)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++) {
				const float *base = qkv + (size_t)b * T * C3;
				float *dbase = dqkv + (size_t)b * T * C3;
				const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
				for (int i = 0; i < T; i++) {
					const float *q = base + (size_t)i * C3 + h * HS;
					const float *dy = dout + ((size_t)b * T + i) * C + h * HS;
					const float *y = out + ((size_t)b * T + i) * C + h * HS;
					float L = lse[((size_t)b * NH + h) * T + i], D = dot(dy, y, HS);
					float *dq = dbase + (size_t)i * C3 + h * HS;
					int j0 = seg_start(sg, i);
					/* the probabilities again, from the saved log-sum-exp */
					for (int j = j0; j <= i; j++)
						p[j] = dot(q, base + (size_t)j * C3 + C + h * HS, HS);
					exp_row(p, j0, i + 1, scale, L);
					for (int j = j0; j <= i; j++)
						ds[j] = p[j] * (dot(dy, base + (size_t)j * C3 + 2 * C + h * HS, HS) - D) * scale;
					for (int j = j0; j <= i; j++) {
						axpy_row(dq, ds[j], base + (size_t)j * C3 + C + h * HS, HS);
						axpy_row(dbase + (size_t)j * C3 + C + h * HS, ds[j], q, HS);
						axpy_row(dbase + (size_t)j * C3 + 2 * C + h * HS, p[j], dy, HS);
					}
				}
			}
	}
}

/* ---- loss ---- */

HOT static float xent_row(float *l, int32_t tgt, int V, int Vp, float dscale)
{
	float mx = -INFINITY, sum = 0, lt = l[tgt];
#pragma omp simd reduction(max : mx)
	for (int j = 0; j < V; j++)
		mx = l[j] > mx ? l[j] : mx;
	/* one exp per logit: keep exp(l - max), sum it, then scale to the gradient */
#pragma omp simd reduction(+ : sum)
	for (int j = 0; j < V; j++) {
		float e = expf(l[j] - mx);
		l[j] = e;
		sum += e;
	}
	float k = dscale / sum;
#pragma omp simd
	for (int j = 0; j < V; j++)
		l[j] *= k;
	l[tgt] -= dscale;
	for (int j = V; j < Vp; j++)
		l[j] = 0;
	return logf(sum) + (mx - lt); /* mx - lt first: both large, their difference exact */
}

static void cpu_xent_fwd_bwd(struct lmt_backend *be, float *losses, float *logits, const int32_t *targets, int N,
			     int V, int Vp, float dscale)
{
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < N; n++) {
		float *l = logits + (size_t)n * Vp;
		if (targets[n] < 0) {
			losses[n] = 0;
			memset(l, 0, (size_t)Vp * sizeof *l);
			continue;
		}
		losses[n] = xent_row(l, targets[n], V, Vp, dscale);
	}
}

/* ---- optimizer and reductions ---- */

HOT static size_t adamw_chunk(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
			      float eps, float wd, float bc1, float bc2, float gs)
{
	size_t bad = 0;
	float ib1 = 1.0f / bc1, ib2 = 1.0f / bc2;
#pragma omp simd reduction(+ : bad)
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * gs;
		m[i] = b1 * m[i] + (1 - b1) * gi;
		v[i] = b2 * v[i] + (1 - b2) * gi * gi;
		float mh = m[i] * ib1, vh = v[i] * ib2;
		p[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * p[i]);
		bad += !(p[i] - p[i] == 0.0f); /* NaN or infinity: x - x is NaN for both */
	}
	return bad;
}

static size_t cpu_adamw(struct lmt_backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr,
			float b1, float b2, float eps, float wd, float bc1, float bc2, float gs)
{
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk, bad = 0;
#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(+ : bad)
	for (size_t k = 0; k < nc; k++) {
		size_t o = k * chunk;
		bad += adamw_chunk(p + o, g + o, m + o, v + o, LMT_MIN(chunk, n - o), lr, b1, b2, eps, wd, bc1, bc2, gs);
	}
	return bad;
}

static double cpu_sumsq(struct lmt_backend *be, const float *x, size_t n)
{
	/* fixed chunks, summed in chunk order: the same result for any thread count */
	size_t chunk = 65536, nc = (n + chunk - 1) / chunk;
	double *part = malloc((nc ? nc : 1) * sizeof *part);
	if (!part)
		return NAN;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++) {
		double s = 0;
		size_t e = LMT_MIN(n, (k + 1) * chunk);
		for (size_t i = k * chunk; i < e; i++)
			s += (double)x[i] * x[i];
		part[k] = s;
	}
	double s = 0;
	for (size_t k = 0; k < nc; k++)
		s += part[k];
	free(part);
	return s;
}

static size_t cpu_nonfinite(struct lmt_backend *be, const float *x, size_t n)
{
	size_t bad = 0;
#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(+ : bad)
	for (size_t i = 0; i < n; i++)
		bad += !isfinite(x[i]);
	return bad;
}

static void cpu_scale(struct lmt_backend *be, float *x, float s, size_t n)
{
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

int lmt_backend_cpu_init(struct lmt_backend *be, int threads, struct lmt_err *err)
{
	memset(be, 0, sizeof *be);
	if (threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (int)n : 1;
	}
	struct cpu *c = calloc(1, sizeof *c);
	if (!c)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	be->name = "cpu";
	be->threads = threads;
	be->priv = c;
	openblas_set_num_threads(threads);
	be->release = cpu_release;
	be->alloc = cpu_alloc;
	be->free = cpu_free;
	be->to_device = cpu_copy;
	be->to_host = cpu_copy;
	be->copy = cpu_copy;
	be->zero = cpu_zero;
	be->sync = cpu_sync;
	be->gemm = cpu_gemm;
	be->embed_fwd = cpu_embed_fwd;
	be->embed_bwd = cpu_embed_bwd;
	be->layernorm_fwd = cpu_layernorm_fwd;
	be->layernorm_bwd = cpu_layernorm_bwd;
	be->bias_add = cpu_bias_add;
	be->bias_grad = cpu_bias_grad;
	be->gelu_fwd = cpu_gelu_fwd;
	be->gelu_bwd = cpu_gelu_bwd;
	be->add = cpu_add;
	be->axpy = cpu_axpy;
	be->attention_fwd = cpu_attention_fwd;
	be->attention_bwd = cpu_attention_bwd;
	be->xent_fwd_bwd = cpu_xent_fwd_bwd;
	be->adamw = cpu_adamw;
	be->sumsq = cpu_sumsq;
	be->nonfinite = cpu_nonfinite;
	be->scale = cpu_scale;
	return 0;
}
