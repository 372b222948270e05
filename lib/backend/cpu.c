/*
 * cpu.c: the reference backend. GEMMs go to oneDNN's matmul primitive
 * (cpu_gemm.c: AMX or AVX512-BF16 kernels for bf16 where the CPU has them); every
 * other operation is an OpenMP loop written here.
 *
 * oneDNN (Debian's build runs on OpenMP) and the loops here share one thread count,
 * be->threads, set as OpenMP's default at init; oneDNN is never called from inside
 * a parallel region, so threads never nest.
 *
 * bf16 and fp16 tensors are storage: loops read them into fp32, compute in fp32 and
 * round once when they store (to nearest even, or stochastically in cast).
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
	struct lmt_cpu_gemm_cache *gemm;
	float *attn;             /* 2 T x T floats: one head's scores and their gradient */
	size_t attn_cap;
	int fail_rc;             /* the sticky status: the first failure since status() */
	char fail_msg[1100];
};

const char *const lmt_op_kind_names[LMT_OPK_COUNT] = { "gemm", "attention", "norm", "optimizer", "other" };

static void fail(struct lmt_backend *be, int rc, const char *op, const char *msg)
{
	struct cpu *c = be->priv;
	if (c->fail_rc)
		return;
	c->fail_rc = rc;
	snprintf(c->fail_msg, sizeof c->fail_msg, "cpu backend: %s: %s", op, msg);
}

static int cpu_status(struct lmt_backend *be, struct lmt_err *err)
{
	struct cpu *c = be->priv;
	int rc = c->fail_rc;
	if (rc)
		lmt_err_set(err, rc, "%s", c->fail_msg);
	c->fail_rc = 0;
	return rc;
}

/* time spent in an operation, by kind */
#define OP_BEGIN double op_t0_ = lmt_now()
#define OP_END(kind) (be->op_s[kind] += lmt_now() - op_t0_)

static void cpu_release(struct lmt_backend *be)
{
	struct cpu *c = be->priv;
	if (c) {
		free(c->scratch);
		free(c->attn);
		lmt_cpu_gemm_release(c->gemm);
	}
	free(c);
	be->priv = NULL;
}

static const char *cpu_gemm_impl(struct lmt_backend *be, int dtype)
{
	struct cpu *c = be->priv;
	return lmt_cpu_gemm_impl(c->gemm, dtype);
}

/*
 * Device memory is counted (be->mem_now, be->mem_peak: what train reports as
 * measured, against memledger's prediction): each block carries its size in a
 * 64-byte header, so the pointer handed out stays 64-byte aligned. Atomic, as the
 * checkpoint writer's thread may allocate while training does.
 */
#define CPU_HDR 64

static void *cpu_alloc(struct lmt_backend *be, size_t bytes)
{
	char *p = NULL;
	if (posix_memalign((void **)&p, 64, CPU_HDR + (bytes ? bytes : 64)))
		return NULL;
	memcpy(p, &bytes, sizeof bytes);
	memset(p + CPU_HDR, 0, bytes);
	size_t now = __atomic_add_fetch(&be->mem_now, bytes, __ATOMIC_RELAXED);
	size_t peak = __atomic_load_n(&be->mem_peak, __ATOMIC_RELAXED);
	while (now > peak && !__atomic_compare_exchange_n(&be->mem_peak, &peak, now, 1, __ATOMIC_RELAXED,
							  __ATOMIC_RELAXED))
		;
	return p + CPU_HDR;
}

static void cpu_free(struct lmt_backend *be, void *p)
{
	size_t bytes;
	if (!p)
		return;
	char *h = (char *)p - CPU_HDR;
	memcpy(&bytes, h, sizeof bytes);
	__atomic_sub_fetch(&be->mem_now, bytes, __ATOMIC_RELAXED);
	free(h);
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

/* every operation is synchronous: a copy on a stream is done when it returns */
static void cpu_copy_async(struct lmt_backend *be, void *dst, const void *src, size_t bytes, int stream)
{
	(void)stream;
	cpu_copy(be, dst, src, bytes);
}

static void cpu_event(struct lmt_backend *be, int event, int stream)
{
	(void)be;
	(void)event;
	(void)stream;
}

static void cpu_gemm(struct lmt_backend *be, const struct lmt_gemm *g)
{
	struct cpu *c = be->priv;
	struct lmt_err e = { 0 };
	OP_BEGIN;
	int rc = lmt_cpu_gemm(c->gemm, g, &e);
	if (rc)
		fail(be, rc, "gemm", e.msg);
	OP_END(LMT_OPK_GEMM);
}

/* ---- dtypes ---- */

/* n fp32 values stored as dtype (round to nearest even); the conversions are
 * selects, not branches (core/dtype.h), so these loops vectorise */
HOT static void store_f32(void *dst, int dt, size_t at, const float *restrict src, size_t n)
{
	if (dt == LMT_DTYPE_F32) {
		memcpy((float *)dst + at, src, n * sizeof *src);
	} else if (dt == LMT_DTYPE_BF16) {
		uint16_t *restrict d = (uint16_t *)dst + at;
#pragma omp simd
		for (size_t i = 0; i < n; i++)
			d[i] = lmt_f32_to_bf16(src[i]);
	} else {
		uint16_t *restrict d = (uint16_t *)dst + at;
#pragma omp simd
		for (size_t i = 0; i < n; i++)
			d[i] = lmt_f32_to_f16(src[i]);
	}
}

HOT static void load_f32(float *restrict dst, const void *src, int dt, size_t at, size_t n)
{
	if (dt == LMT_DTYPE_F32) {
		memcpy(dst, (const float *)src + at, n * sizeof *dst);
	} else if (dt == LMT_DTYPE_BF16) {
		const uint16_t *restrict s = (const uint16_t *)src + at;
#pragma omp simd
		for (size_t i = 0; i < n; i++)
			dst[i] = lmt_bf16_to_f32(s[i]);
	} else if (dt == LMT_DTYPE_F16) {
		const uint16_t *restrict s = (const uint16_t *)src + at;
#pragma omp simd
		for (size_t i = 0; i < n; i++)
			dst[i] = lmt_f16_to_f32(s[i]);
	} else {
		const int32_t *restrict s = (const int32_t *)src + at;
#pragma omp simd
		for (size_t i = 0; i < n; i++)
			dst[i] = (float)s[i];
	}
}

/* A stateless hash of (seed, element index): the random bits of stochastic
 * rounding, the same for any thread count or chunking. */
static inline uint32_t sr_bits(uint64_t seed, size_t i)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31));
}

/* Stochastic rounding to bf16: add 16 random bits below the kept half and truncate,
 * so x rounds up with probability equal to its distance from the lower neighbour.
 * NaN and infinity are kept; a value that rounds past the largest finite one
 * becomes infinity, as it would round to nearest. */
HOT static void sr_bf16(uint16_t *d, const float *x, size_t n, uint64_t seed, size_t at)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = lmt_bits_of(x[i]);
		if ((u & 0x7f800000u) == 0x7f800000u) {
			d[i] = lmt_f32_to_bf16(x[i]);
			continue;
		}
		u += sr_bits(seed, at + i) & 0xffffu;
		d[i] = (uint16_t)(u >> 16);
	}
}

/* Stochastic rounding to fp16: the two fp16 neighbours of x (round down toward
 * zero, then the next one away from zero) and a uniform draw between them. */
HOT static void sr_f16(uint16_t *d, const float *x, size_t n, uint64_t seed, size_t at)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t h = lmt_f32_to_f16(x[i]);
		float r = lmt_f16_to_f32(h);
		if (!isfinite(r) || r == x[i]) {
			d[i] = h;
			continue;
		}
		/* the neighbour on the other side of x */
		int up = fabsf(x[i]) > fabsf(r);
		uint16_t o = (uint16_t)(up ? h + 1 : h - 1);
		if ((h & 0x7fffu) == 0 && !up)
			o = h; /* no neighbour below zero's magnitude */
		float ro = lmt_f16_to_f32(o);
		float lo = fabsf(r) < fabsf(ro) ? r : ro, hi = lo == r ? ro : r;
		uint16_t hlo = lo == r ? h : o, hhi = lo == r ? o : h;
		float p = (fabsf(x[i]) - fabsf(lo)) / (fabsf(hi) - fabsf(lo)); /* chance of the larger magnitude */
		float u01 = (float)(sr_bits(seed, at + i) >> 8) * 0x1p-24f;
		d[i] = u01 < p ? hhi : hlo;
	}
}

static void cpu_cast(struct lmt_backend *be, void *dst, int ddt, const void *src, int sdt, size_t n, int sr,
		     uint64_t seed)
{
	OP_BEGIN;
	size_t chunk = 4096, nc = (n + chunk - 1) / chunk;
	if (ddt == sdt) {
		cpu_copy(be, dst, src, n * lmt_dtype_size(ddt));
	} else if (ddt == LMT_DTYPE_I32) {
		fail(be, LMT_EUNSUPPORTED, "cast", "casts to int32 are not an operation of this backend");
	} else {
#pragma omp parallel for num_threads(be->threads) schedule(static)
		for (size_t k = 0; k < nc; k++) {
			float buf[4096];
			size_t o = k * chunk, m = LMT_MIN(chunk, n - o);
			load_f32(buf, src, sdt, o, m);
			if (sr && ddt == LMT_DTYPE_BF16)
				sr_bf16((uint16_t *)dst + o, buf, m, seed, o);
			else if (sr && ddt == LMT_DTYPE_F16)
				sr_f16((uint16_t *)dst + o, buf, m, seed, o);
			else
				store_f32(dst, ddt, o, buf, m);
		}
	}
	OP_END(LMT_OPK_OTHER);
}

static void cpu_embed_fwd(struct lmt_backend *be, float *out, const int32_t *tok, const float *wte,
			  const float *wpe, int B, int T, int C)
{
	OP_BEGIN;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < B * T; n++) {
		const float *e = wte + (size_t)tok[n] * C, *p = wpe + (size_t)(n % T) * C;
		float *o = out + (size_t)n * C;
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
	OP_END(LMT_OPK_OTHER);
}

static void cpu_embed_bwd(struct lmt_backend *be, float *dwte, float *dwpe, const float *dout,
			  const int32_t *tok, int B, int T, int C)
{
	OP_BEGIN;
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
	OP_END(LMT_OPK_OTHER);
}

HOT static void ln_row(void *out, int dt, size_t at, float *mean, float *rstd, const float *x, const float *w,
			const float *b, int C)
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
	float buf[256];
	for (int c0 = 0; c0 < C; c0 += 256) {
		int n = LMT_MIN(256, C - c0);
		for (int c = 0; c < n; c++)
			buf[c] = (x[c0 + c] - m) * s * w[c0 + c] + b[c0 + c];
		store_f32(out, dt, at + c0, buf, (size_t)n);
	}
	if (mean)
		*mean = m;
	if (rstd)
		*rstd = s;
}

static void cpu_layernorm_fwd(struct lmt_backend *be, void *out, int dt, float *mean, float *rstd, const float *inp,
			      const float *w, const float *b, int N, int C)
{
	OP_BEGIN;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < N; n++)
		ln_row(out, dt, (size_t)n * C, mean ? mean + n : NULL, rstd ? rstd + n : NULL, inp + (size_t)n * C, w, b,
		       C);
	OP_END(LMT_OPK_NORM);
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
	OP_BEGIN;
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
	OP_END(LMT_OPK_NORM);
}

static void cpu_bias_add(struct lmt_backend *be, float *x, const float *b, int N, int C)
{
	OP_BEGIN;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (int n = 0; n < N; n++) {
		float *r = x + (size_t)n * C;
		for (int c = 0; c < C; c++)
			r[c] += b[c];
	}
	OP_END(LMT_OPK_OTHER);
}

static void cpu_bias_grad(struct lmt_backend *be, float *db, const float *dout, int N, int C)
{
	OP_BEGIN;
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
	OP_END(LMT_OPK_OTHER);
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

static void cpu_gelu_fwd(struct lmt_backend *be, void *out, int dt, const float *inp, size_t n)
{
	OP_BEGIN;
	size_t chunk = 4096, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++) {
		size_t o = k * chunk, m = LMT_MIN(chunk, n - o);
		if (dt == LMT_DTYPE_F32) {
			gelu_chunk((float *)out + o, inp + o, m);
		} else {
			float buf[4096];
			gelu_chunk(buf, inp + o, m);
			store_f32(out, dt, o, buf, m);
		}
	}
	OP_END(LMT_OPK_OTHER);
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
	OP_BEGIN;
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++)
		gelu_bwd_chunk(dinp + k * chunk, inp + k * chunk, dout + k * chunk, LMT_MIN(chunk, n - k * chunk));
	OP_END(LMT_OPK_OTHER);
}

HOT static void add_chunk(float *o, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		o[i] = a[i] + b[i];
}

static void cpu_add(struct lmt_backend *be, float *out, const float *a, const float *b, size_t n)
{
	OP_BEGIN;
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++)
		add_chunk(out + k * chunk, a + k * chunk, b + k * chunk, LMT_MIN(chunk, n - k * chunk));
	OP_END(LMT_OPK_OTHER);
}

HOT static void axpy_chunk(float *y, float a, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

static void cpu_axpy(struct lmt_backend *be, float *y, float a, const float *x, size_t n)
{
	OP_BEGIN;
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t k = 0; k < nc; k++)
		axpy_chunk(y + k * chunk, a, x + k * chunk, LMT_MIN(chunk, n - k * chunk));
	OP_END(LMT_OPK_OTHER);
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

/*
 * Attention through GEMMs, for long sequences (T >= ATTN_GEMM_T, 512, where the loops'
 * one-row dot products fall far behind the GEMM kernels): one head at a time, its
 * T x T scores S = scale Q K^T by one GEMM, the causal (and segment) softmax row by
 * row in fp32, O = P V by another. Backward recomputes P from the saved
 * log-sum-exp and takes dV = P^T dO, dP = dO V^T, dS = P (dP - D) scale, dQ = dS K,
 * dK = dS^T Q as five GEMMs. Queries go in blocks of ATTN_QB rows, each against the
 * keys up to its last row, so the products skip the masked blocks above the
 * diagonal. Scratch: 2 T^2 floats, kept.
 */
#define ATTN_GEMM_T 512

static int attn_reserve(struct lmt_backend *be, int T)
{
	struct cpu *c = be->priv;
	size_t need = (size_t)2 * T * T;
	if (c->attn_cap >= need)
		return 0;
	float *p = NULL;
	if (posix_memalign((void **)&p, 64, need * sizeof *p))
		return LMT_ENOMEM;
	free(c->attn);
	c->attn = p;
	c->attn_cap = need;
	return 0;
}

/* C (M x N, ldc) = alpha op(A) op(B) + beta C, fp32, straight to the GEMM cache */
static int sgemm(struct lmt_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
		 const float *B, int ldb, float beta, float *C, int ldc)
{
	struct cpu *c = be->priv;
	struct lmt_err e = { 0 };
	struct lmt_gemm g = { .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .A = A,
			      .lda = lda, .B = B, .ldb = ldb, .C = C, .ldc = ldc, .batch = 1, .ab_dtype = LMT_DTYPE_F32,
			      .c_dtype = LMT_DTYPE_F32 };
	int rc = lmt_cpu_gemm(c->gemm, &g, &e);
	if (rc)
		fail(be, rc, "attention", e.msg);
	return rc;
}

/* query blocks of the GEMM path: block r's rows attend to keys 0..(r+1) ATTN_QB - 1
 * only, so the products skip the masked upper blocks (about half the square) */
#define ATTN_QB 128

static void attention_fwd_gemm(struct lmt_backend *be, float *out, float *lse, const float *qkv, const int32_t *seg,
			       int B, int T, int NH, int HS)
{
	struct cpu *cp = be->priv;
	int C = NH * HS, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)HS), *S = cp->attn;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			const float *q = qkv + (size_t)b * T * C3 + h * HS;
			const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
			for (int i0 = 0; i0 < T; i0 += ATTN_QB) {
				int i1 = LMT_MIN(T, i0 + ATTN_QB), M = i1 - i0;
				float *Sr = S + (size_t)i0 * T; /* rows i0..i1-1, columns 0..i1-1, row stride T */
				if (sgemm(be, 0, 1, M, i1, HS, scale, q + (size_t)i0 * C3, C3, q + C, C3, 0.0f, Sr, T))
					return;
#pragma omp parallel for num_threads(be->threads) schedule(static)
				for (int i = i0; i < i1; i++) {
					float *r = S + (size_t)i * T, mx = -INFINITY;
					int j0 = seg_start(sg, i);
					for (int j = j0; j <= i; j++)
						mx = r[j] > mx ? r[j] : mx;
					float sum = exp_row(r, j0, i + 1, 1.0f, mx);
					float inv = 1.0f / sum;
					for (int j = 0; j < j0; j++)
						r[j] = 0;
					for (int j = j0; j <= i; j++)
						r[j] *= inv;
					for (int j = i + 1; j < i1; j++)
						r[j] = 0;
					lse[((size_t)b * NH + h) * T + i] = mx + logf(sum);
				}
				if (sgemm(be, 0, 0, M, HS, i1, 1.0f, Sr, T, q + 2 * C, C3, 0.0f,
					  out + ((size_t)b * T + i0) * C + h * HS, C))
					return;
			}
		}
}

static void attention_bwd_gemm(struct lmt_backend *be, float *dqkv, const float *dout, const float *qkv,
			       const float *out, const float *lse, const int32_t *seg, int B, int T, int NH, int HS)
{
	struct cpu *cp = be->priv;
	int C = NH * HS, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)HS), *P = cp->attn, *dP = cp->attn + (size_t)T * T;
	memset(dqkv, 0, (size_t)B * T * C3 * sizeof *dqkv); /* dK and dV accumulate over query blocks */
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			const float *q = qkv + (size_t)b * T * C3 + h * HS;
			const float *dy = dout + (size_t)b * T * C + h * HS, *y = out + (size_t)b * T * C + h * HS;
			float *dq = dqkv + (size_t)b * T * C3 + h * HS;
			const int32_t *sg = seg ? seg + (size_t)b * T : NULL;
			const float *L = lse + ((size_t)b * NH + h) * T;
			for (int i0 = 0; i0 < T; i0 += ATTN_QB) {
				int i1 = LMT_MIN(T, i0 + ATTN_QB), M = i1 - i0;
				float *Pr = P + (size_t)i0 * T, *dPr = dP + (size_t)i0 * T;
				/* the block's probabilities again, and dP = dO V^T */
				if (sgemm(be, 0, 1, M, i1, HS, scale, q + (size_t)i0 * C3, C3, q + C, C3, 0.0f, Pr, T) ||
				    sgemm(be, 0, 1, M, i1, HS, 1.0f, dy + (size_t)i0 * C, C, q + 2 * C, C3, 0.0f, dPr, T))
					return;
#pragma omp parallel for num_threads(be->threads) schedule(static)
				for (int i = i0; i < i1; i++) {
					float *p = P + (size_t)i * T, *ds = dP + (size_t)i * T;
					int j0 = seg_start(sg, i);
					float D = dot(dy + (size_t)i * C, y + (size_t)i * C, HS);
					exp_row(p, j0, i + 1, 1.0f, L[i]);
					for (int j = 0; j < j0; j++)
						p[j] = ds[j] = 0;
					for (int j = j0; j <= i; j++)
						ds[j] = p[j] * (ds[j] - D) * scale;
					for (int j = i + 1; j < i1; j++)
						p[j] = ds[j] = 0;
				}
				/* dQ = dS K (this block's rows); dK, dV (rows 0..i1-1) += dS^T Q, P^T dO */
				if (sgemm(be, 0, 0, M, HS, i1, 1.0f, dPr, T, q + C, C3, 0.0f, dq + (size_t)i0 * C3, C3) ||
				    sgemm(be, 1, 0, i1, HS, M, 1.0f, dPr, T, q + (size_t)i0 * C3, C3, 1.0f, dq + C, C3) ||
				    sgemm(be, 1, 0, i1, HS, M, 1.0f, Pr, T, dy + (size_t)i0 * C, C, 1.0f, dq + 2 * C, C3))
					return;
			}
		}
}

static void cpu_attention_fwd(struct lmt_backend *be, float *out, float *lse, const float *qkv, const int32_t *seg,
			      int B, int T, int NH, int HS, int q0)
{
	struct cpu *cp = be->priv;
	int C = NH * HS, C3 = 3 * C, TQ = T - q0;
	float scale = 1.0f / sqrtf((float)HS);
	if (q0 == 0 && lse && T >= ATTN_GEMM_T) {
		if (attn_reserve(be, T)) {
			fail(be, LMT_ENOMEM, "attention_fwd", "out of memory for one head's scores");
			return;
		}
		OP_BEGIN;
		attention_fwd_gemm(be, out, lse, qkv, seg, B, T, NH, HS);
		OP_END(LMT_OPK_ATTENTION);
		return;
	}
	if (reserve(be, T)) {
		fail(be, LMT_ENOMEM, "attention_fwd", "out of memory for the rows of scores");
		return;
	}
	OP_BEGIN;
#pragma omp parallel num_threads(be->threads)
	{
		float *s = cp->scratch + (size_t)omp_get_thread_num() * cp->scratch_per;
#pragma omp for collapse(3) schedule(static)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++)
				for (int iq = 0; iq < TQ; iq++) {
					int i = q0 + iq;
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
					float *o = out + ((size_t)b * TQ + iq) * C + h * HS, inv = 1.0f / sum;
					memset(o, 0, (size_t)HS * sizeof *o);
					for (int j = j0; j <= i; j++)
						axpy_row(o, s[j] * inv, base + (size_t)j * C3 + 2 * C + h * HS, HS);
					if (lse)
						lse[((size_t)b * NH + h) * TQ + iq] = mx + logf(sum);
				}
	}
	OP_END(LMT_OPK_ATTENTION);
}

static void cpu_attention_bwd(struct lmt_backend *be, float *dqkv, const float *dout, const float *qkv,
			      const float *out, const float *lse, const int32_t *seg, int B, int T, int NH, int HS)
{
	struct cpu *cp = be->priv;
	int C = NH * HS, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)HS);
	if (T >= ATTN_GEMM_T) {
		if (attn_reserve(be, T)) {
			fail(be, LMT_ENOMEM, "attention_bwd", "out of memory for one head's scores");
			return;
		}
		OP_BEGIN;
		attention_bwd_gemm(be, dqkv, dout, qkv, out, lse, seg, B, T, NH, HS);
		OP_END(LMT_OPK_ATTENTION);
		return;
	}
	if (reserve(be, T)) {
		fail(be, LMT_ENOMEM, "attention_bwd", "out of memory for the rows of scores");
		return;
	}
	OP_BEGIN;
	memset(dqkv, 0, (size_t)B * T * C3 * sizeof *dqkv);
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
	OP_END(LMT_OPK_ATTENTION);
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

static void cpu_xent_fwd_bwd(struct lmt_backend *be, float *losses, double *loss_acc, float *logits,
			     const int32_t *targets, int N, int V, int Vp, float dscale)
{
	OP_BEGIN;
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
	double sum = 0; /* in position order: the same for any thread count */
	for (int n = 0; n < N; n++)
		sum += losses[n];
	if (loss_acc)
		*loss_acc += sum;
	OP_END(LMT_OPK_OTHER);
}

/* ---- optimizer and reductions ---- */

HOT static size_t adamw_chunk(float *p, void *work, int wdt, size_t at, const float *g, float *m, float *v,
			      size_t n, const struct lmt_adamw *a)
{
	size_t bad = 0;
	float ib1 = 1.0f / a->bc1, ib2 = 1.0f / a->bc2, b1 = a->b1, b2 = a->b2, lr = a->lr, eps = a->eps, wd = a->wd,
	      gs = a->gscale;
#pragma omp simd reduction(+ : bad)
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * gs;
		m[i] = b1 * m[i] + (1 - b1) * gi;
		v[i] = b2 * v[i] + (1 - b2) * gi * gi;
		float mh = m[i] * ib1, vh = v[i] * ib2;
		p[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * p[i]);
		bad += !(p[i] - p[i] == 0.0f); /* NaN or infinity: x - x is NaN for both */
	}
	if (work)
		store_f32(work, wdt, at, p, n);
	return bad;
}

static void cpu_adamw(struct lmt_backend *be, float *p, void *work, int wdt, const float *g, float *m, float *v,
		      size_t n, const struct lmt_adamw *a, double *nonfinite_acc)
{
	OP_BEGIN;
	size_t chunk = 16384, nc = (n + chunk - 1) / chunk, bad = 0;
	/* the working copy is written as each chunk is updated, while it is in cache;
	 * an fp32 working copy is the master itself */
	if (work == (void *)p)
		work = NULL;
#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(+ : bad)
	for (size_t k = 0; k < nc; k++) {
		size_t o = k * chunk;
		bad += adamw_chunk(p + o, work, wdt, o, g + o, m + o, v + o, LMT_MIN(chunk, n - o), a);
	}
	if (nonfinite_acc)
		*nonfinite_acc += (double)bad;
	OP_END(LMT_OPK_OPTIMIZER);
}

static void cpu_sumsq(struct lmt_backend *be, double *acc, const float *x, size_t n)
{
	OP_BEGIN;
	/* fixed chunks, summed in chunk order: the same result for any thread count */
	size_t chunk = 65536, nc = (n + chunk - 1) / chunk, bad = 0;
	double part[256], s = 0;
	for (size_t k0 = 0; k0 < nc; k0 += 256) {
		size_t k1 = LMT_MIN(nc, k0 + 256);
#pragma omp parallel for num_threads(be->threads) schedule(static) reduction(+ : bad)
		for (size_t k = k0; k < k1; k++) {
			double q = 0;
			size_t e = LMT_MIN(n, (k + 1) * chunk), nb = 0;
			for (size_t i = k * chunk; i < e; i++) {
				q += (double)x[i] * x[i];
				nb += !(x[i] - x[i] == 0.0f);
			}
			part[k - k0] = q;
			bad += nb;
		}
		for (size_t k = k0; k < k1; k++)
			s += part[k - k0];
	}
	acc[0] += s;
	acc[1] += (double)bad;
	OP_END(LMT_OPK_OTHER);
}

/* sumsq's fixed chunks of every range in one parallel loop (a region per call
 * would cost more than the statistics' small tensors), then each range's chunks
 * summed in order, as sumsq sums them */
static void cpu_sumsq_ranges(struct lmt_backend *be, double *acc, const float *x, const size_t *off, const size_t *len,
			     const int *slot, int n)
{
	size_t chunk = 65536, nc = 0;
	for (int i = 0; i < n; i++)
		nc += (len[i] + chunk - 1) / chunk;
	double *part = malloc(nc * sizeof *part);
	size_t *from = malloc(nc * sizeof *from), *to = malloc(nc * sizeof *to), *bad = calloc(nc, sizeof *bad);
	if (!part || !from || !to || !bad) { /* no room for the plan: one range at a time */
		free(part), free(from), free(to), free(bad);
		for (int i = 0; i < n; i++)
			cpu_sumsq(be, acc + 2 * slot[i], x + off[i], len[i]);
		return;
	}
	OP_BEGIN;
	size_t c = 0;
	for (int i = 0; i < n; i++)
		for (size_t a = 0; a < len[i]; a += chunk, c++) {
			from[c] = off[i] + a;
			to[c] = off[i] + LMT_MIN(len[i], a + chunk);
		}
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 4)
	for (size_t k = 0; k < nc; k++) {
		double q = 0;
		size_t nb = 0;
		for (size_t i = from[k]; i < to[k]; i++) {
			q += (double)x[i] * x[i];
			nb += !(x[i] - x[i] == 0.0f);
		}
		part[k] = q;
		bad[k] = nb;
	}
	c = 0;
	for (int i = 0; i < n; i++) {
		double q = 0, nb = 0;
		for (size_t a = 0; a < len[i]; a += chunk, c++)
			q += part[c], nb += (double)bad[c];
		acc[2 * slot[i]] += q;
		acc[2 * slot[i] + 1] += nb;
	}
	free(part), free(from), free(to), free(bad);
	OP_END(LMT_OPK_OTHER);
}

static void cpu_scale(struct lmt_backend *be, float *x, float s, size_t n)
{
	OP_BEGIN;
#pragma omp parallel for num_threads(be->threads) schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
	OP_END(LMT_OPK_OTHER);
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
	/* one thread count for oneDNN (OpenMP's default) and the loops here */
	omp_set_num_threads(threads);
	int rc = lmt_cpu_gemm_init(&c->gemm, threads, err);
	if (rc) {
		free(c);
		return rc;
	}
	be->name = "cpu";
	be->threads = threads;
	be->priv = c;
	be->is_host = 1;
	be->dtypes = 1u << LMT_DTYPE_F32 | 1u << LMT_DTYPE_BF16 | 1u << LMT_DTYPE_F16;
	be->fast_dtypes = 1u << LMT_DTYPE_F32;
	if (strstr(lmt_cpu_gemm_impl(c->gemm, LMT_DTYPE_BF16), "bf16"))
		be->fast_dtypes |= 1u << LMT_DTYPE_BF16;
	be->release = cpu_release;
	be->status = cpu_status;
	be->gemm_impl = cpu_gemm_impl;
	be->alloc = cpu_alloc;
	be->free = cpu_free;
	be->alloc_host = cpu_alloc;
	be->free_host = cpu_free;
	be->to_device = cpu_copy;
	be->to_host = cpu_copy;
	be->to_device_async = cpu_copy_async;
	be->to_host_async = cpu_copy_async;
	be->copy = cpu_copy;
	be->zero = cpu_zero;
	be->sync = cpu_sync;
	be->event_record = cpu_event;
	be->event_wait = cpu_event;
	be->gemm = cpu_gemm;
	be->cast = cpu_cast;
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
	be->sumsq_ranges = cpu_sumsq_ranges;
	be->scale = cpu_scale;
	return 0;
}
