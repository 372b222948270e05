/*
 * cpu_gemm.c: the CPU backend's GEMMs (struct lmt_gemm, backend.h) through oneDNN's
 * matmul primitive (the C API, dnnl.h; Debian's libdnnl 2.6).
 *
 * The mapping. op(A[b]) is the M x K source, op(B[b]) the K x N weights, C[b] the
 * M x N destination, each a memory descriptor with explicit strides: a transpose is
 * the two strides swapped ({lda, 1} becomes {1, lda}), a batch is a third, outer
 * dimension with the batch stride (a zero batch stride of A or B is oneDNN's
 * broadcast: batch dimension 1). So strided and batched products, the attention
 * kind included, run in place without copies. alpha is the output scale, beta a sum
 * post-op (none when beta is 0: oneDNN then only writes C, never reads it, so NaN in
 * an unwritten C cannot leak, as with BLAS), the bias the primitive's bias argument
 * (1 x N, fp32), GELU an eltwise gelu_tanh post-op (GPT-2's formula). oneDNN applies
 * post-ops in the order appended, after the output scale and the bias, so a fused
 * product computes gelu(alpha * op(A) op(B) + bias + beta * C): the spec's order up
 * to the order of the two fp32 additions. But oneDNN 2.6 applies the output scale
 * after its bias (alpha (AB + bias)), so with alpha != 1 the bias is instead a
 * binary add post-op (1 x N, broadcast over rows) between the sum and the GELU:
 * gelu(alpha AB + beta C + bias), the spec's order exactly, in single products; a
 * batched one with alpha != 1 and a bias takes the fallback below, as 2.6 puts the
 * post-op's bias in the wrong columns of a strided C. (tests/unit/test-cpu-gemm.c
 * has both cases, each failing the other way.)
 *
 * The fallback. Whatever the primitive refuses (oneDNN 2.6 has no fp16 matmul on the
 * CPU; a stride layout it does not take) is computed the same way every time: A and
 * B converted to dense fp32 (fp32, not bf16: fp16 has 3 more fraction bits), the
 * dense fp32 product alpha * op(A) op(B) into fp32 scratch, then the epilogue here
 * in the spec's order (+ beta C, + bias, GELU), written to C as its dtype with
 * round to nearest even (lmt_f32_to_bf16/_f16). Only running out of memory, or a
 * dense fp32 product refused too, is an error.
 *
 * The cache. A primitive is created once per key (shape, strides, dtypes,
 * transposes, alpha, beta, bias or not, GELU or not, threads) and kept, with its
 * memory objects, in a table of LMT_GEMM_CACHE entries; a new key when it is full
 * evicts the least recently used one. A refused key is cached too, marked
 * fallback, so that it is asked of oneDNN only once. One engine and one stream per
 * cache; a cache is not for concurrent use.
 *
 * Threads. Debian builds oneDNN with OpenMP: a primitive runs on as many threads as
 * omp_get_max_threads() gives in the calling thread, read when it is created and
 * when it runs. This file never sets the thread count (that would change the
 * caller's OpenMP state); the backend calls it from a thread whose OpenMP
 * nthreads-var is its `threads`. The count at creation is part of the key, so a
 * primitive is never run with more threads than it was planned for.
 */
#include "backend/impl.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>
#include <dnnl_debug.h>

#include "core/dtype.h"
#include "core/util.h"

#define LMT_GEMM_CACHE 256

/* Everything a primitive depends on; compared bytewise (memset before filling). */
struct gemm_key {
	int ta, tb, M, N, K, lda, ldb, ldc;
	long sa, sb, sc;
	int batch, ab_dtype, c_dtype;
	uint32_t alpha, beta;      /* the bits of the floats */
	int bias, gelu, threads;
};

struct gemm_entry {
	struct gemm_key key;
	uint64_t hash, used;       /* used: 0 for an empty slot */
	int fallback;              /* oneDNN refused this key: the conversion path */
	dnnl_primitive_t prim;
	dnnl_memory_t src, wei, dst, bias;
	int bias_arg;              /* DNNL_ARG_BIAS, or the binary post-op's source */
	char impl[96];
};

struct lmt_cpu_gemm_cache {
	int threads;
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	struct gemm_entry e[LMT_GEMM_CACHE];
	uint64_t tick;
	float *scratch;            /* the fallback's fp32 A, B and product */
	size_t scratch_cap;        /* floats */
	char impl[LMT_DTYPE_COUNT][160];
};

static dnnl_data_type_t dnnl_dtype(int dtype)
{
	switch (dtype) {
	case LMT_DTYPE_F32: return dnnl_f32;
	case LMT_DTYPE_BF16: return dnnl_bf16;
	case LMT_DTYPE_F16: return dnnl_f16;
	default: return dnnl_data_type_undef;
	}
}

static uint32_t fbits(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

static float load(const void *p, int dtype, size_t i)
{
	switch (dtype) {
	case LMT_DTYPE_BF16: return lmt_bf16_to_f32(((const uint16_t *)p)[i]);
	case LMT_DTYPE_F16: return lmt_f16_to_f32(((const uint16_t *)p)[i]);
	default: return ((const float *)p)[i];
	}
}

static void store(void *p, int dtype, size_t i, float v)
{
	switch (dtype) {
	case LMT_DTYPE_BF16: ((uint16_t *)p)[i] = lmt_f32_to_bf16(v); break;
	case LMT_DTYPE_F16: ((uint16_t *)p)[i] = lmt_f32_to_f16(v); break;
	default: ((float *)p)[i] = v; break;
	}
}

/* GPT-2's tanh GELU, the formula oneDNN's gelu_tanh computes */
static float gelu(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static void describe(char *buf, size_t n, const struct gemm_key *k)
{
	snprintf(buf, n, "gemm %dx%dx%d (M x N x K)%s%s, batch %d, %s x %s -> %s", k->M, k->N, k->K,
		 k->ta ? ", A transposed" : "", k->tb ? ", B transposed" : "", k->batch, lmt_dtype_name(k->ab_dtype),
		 lmt_dtype_name(k->ab_dtype), lmt_dtype_name(k->c_dtype));
}

static void entry_clear(struct gemm_entry *e)
{
	if (e->prim)
		dnnl_primitive_destroy(e->prim);
	dnnl_memory_t *m[] = {&e->src, &e->wei, &e->dst, &e->bias};
	for (size_t i = 0; i < LMT_ARRAY_SIZE(m); i++)
		if (*m[i])
			dnnl_memory_destroy(*m[i]);
	memset(e, 0, sizeof *e);
}

/* dims and strides of a rows x cols matrix (transposed: stored cols x rows) with
 * row stride ld, as 2D, or 3D with `batch` entries `bstride` apart (0: broadcast) */
static dnnl_status_t md_matrix(dnnl_memory_desc_t *md, int batch, long bstride, int rows, int cols, int ld, int trans,
			       dnnl_data_type_t dt)
{
	dnnl_dims_t dims = {0}, strides = {0};
	int nd = batch > 1 ? 3 : 2, o = nd - 2;
	if (nd == 3) {
		dims[0] = bstride ? batch : 1;
		strides[0] = bstride ? bstride : (dnnl_dim_t)rows * cols;
	}
	dims[o] = rows;
	dims[o + 1] = cols;
	strides[o] = trans ? 1 : ld;
	strides[o + 1] = trans ? ld : 1;
	return dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
}

/* Create the primitive for e->key. Returns 0 (e->fallback set when oneDNN has no
 * implementation for it), or LMT_ENOMEM. */
static int entry_create(struct lmt_cpu_gemm_cache *c, struct gemm_entry *e, struct lmt_err *err)
{
	const struct gemm_key *k = &e->key;
	dnnl_memory_desc_t ma, mb, mc, mbias;
	dnnl_matmul_desc_t desc;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	float alpha, beta;
	memcpy(&alpha, &k->alpha, 4);
	memcpy(&beta, &k->beta, 4);
	e->bias_arg = DNNL_ARG_BIAS;
	dnnl_status_t st = md_matrix(&ma, k->batch, k->sa, k->M, k->K, k->lda, k->ta, dnnl_dtype(k->ab_dtype));
	if (st == dnnl_success)
		st = md_matrix(&mb, k->batch, k->sb, k->K, k->N, k->ldb, k->tb, dnnl_dtype(k->ab_dtype));
	if (st == dnnl_success)
		st = md_matrix(&mc, k->batch, k->sc, k->M, k->N, k->ldc, 0, dnnl_dtype(k->c_dtype));
	if (st == dnnl_success && k->bias)
		st = md_matrix(&mbias, k->batch > 1 ? 2 : 1, 0, 1, k->N, k->N, 0, dnnl_f32);
	/* oneDNN 2.6 scales the bias with the product (alpha (AB + bias)): with alpha != 1
	 * the bias is a binary post-op after the sum instead */
	int bias_po = k->bias && alpha != 1.0f;
	/* and adds such a post-op bias to the wrong columns of batched products whose
	 * C has gaps between rows or batches (it indexes C as dense): the fallback */
	if (st == dnnl_success && bias_po && k->batch > 1)
		st = dnnl_unimplemented;
	if (st == dnnl_success)
		st = dnnl_matmul_desc_init(&desc, &ma, &mb, k->bias && !bias_po ? &mbias : NULL, &mc);
	if (st == dnnl_success)
		st = dnnl_primitive_attr_create(&attr);
	if (st == dnnl_success && alpha != 1.0f)
		st = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
	if (st == dnnl_success && (beta != 0.0f || bias_po || k->gelu)) {
		st = dnnl_post_ops_create(&po);
		if (st == dnnl_success && beta != 0.0f)
			st = dnnl_post_ops_append_sum(po, beta);
		if (st == dnnl_success && bias_po) {
			e->bias_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(beta != 0.0f) | DNNL_ARG_SRC_1;
			st = dnnl_post_ops_append_binary(po, dnnl_binary_add, &mbias);
		}
		if (st == dnnl_success && k->gelu)
			st = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_tanh, 0.0f, 0.0f);
		if (st == dnnl_success)
			st = dnnl_primitive_attr_set_post_ops(attr, po);
	}
	if (st == dnnl_success)
		st = dnnl_primitive_desc_create(&pd, &desc, attr, c->engine, NULL);
	if (st == dnnl_success) {
		const char *s = NULL;
		if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) == dnnl_success && s)
			snprintf(e->impl, sizeof e->impl, "%s", s);
		st = dnnl_primitive_create(&e->prim, pd);
	}
	if (st == dnnl_success)
		st = dnnl_memory_create(&e->src, &ma, c->engine, DNNL_MEMORY_NONE);
	if (st == dnnl_success)
		st = dnnl_memory_create(&e->wei, &mb, c->engine, DNNL_MEMORY_NONE);
	if (st == dnnl_success)
		st = dnnl_memory_create(&e->dst, &mc, c->engine, DNNL_MEMORY_NONE);
	if (st == dnnl_success && k->bias)
		st = dnnl_memory_create(&e->bias, &mbias, c->engine, DNNL_MEMORY_NONE);
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (st == dnnl_success)
		return 0;
	struct gemm_key key = *k;
	uint64_t hash = e->hash, used = e->used;
	entry_clear(e);
	e->key = key;
	e->hash = hash;
	e->used = used;
	if (st == dnnl_out_of_memory) {
		char what[256];
		describe(what, sizeof what, &key);
		e->used = 0;
		return lmt_err_set(err, LMT_ENOMEM, "%s: oneDNN matmul: out of memory", what);
	}
	e->fallback = 1;
	snprintf(e->impl, sizeof e->impl, "refused (%s)", dnnl_status2str(st));
	return 0;
}

/* The entry for key, created on a miss (evicting the least recently used). */
static int lookup(struct lmt_cpu_gemm_cache *c, const struct gemm_key *key, struct gemm_entry **out,
		  struct lmt_err *err)
{
	uint64_t h = lmt_hash_bytes(key, sizeof *key, 0x6765);
	struct gemm_entry *victim = &c->e[0];
	for (int i = 0; i < LMT_GEMM_CACHE; i++) {
		struct gemm_entry *e = &c->e[i];
		if (e->used && e->hash == h && !memcmp(&e->key, key, sizeof *key)) {
			e->used = ++c->tick;
			*out = e;
			return 0;
		}
		if (e->used < victim->used)
			victim = e;
	}
	entry_clear(victim);
	victim->key = *key;
	victim->hash = h;
	victim->used = ++c->tick;
	*out = victim;
	return entry_create(c, victim, err);
}

static struct gemm_key key_of(const struct lmt_gemm *g)
{
	struct gemm_key k;
	memset(&k, 0, sizeof k);
	k.ta = !!g->ta;
	k.tb = !!g->tb;
	k.M = g->M;
	k.N = g->N;
	k.K = g->K;
	k.lda = g->lda;
	k.ldb = g->ldb;
	k.ldc = g->ldc;
	k.batch = g->batch;
	if (g->batch > 1) {     /* a single product's batch strides mean nothing */
		k.sa = g->sa;
		k.sb = g->sb;
		k.sc = g->sc;
	}
	k.ab_dtype = g->ab_dtype;
	k.c_dtype = g->c_dtype;
	k.alpha = fbits(g->alpha);
	k.beta = g->beta == 0.0f ? 0 : fbits(g->beta); /* -0 is 0: no read of C */
	k.bias = g->bias != NULL;
	k.gelu = !!g->gelu;
	k.threads = omp_get_max_threads();
	return k;
}

static int run(struct lmt_cpu_gemm_cache *c, struct gemm_entry *e, const void *A, const void *B, void *C,
	       const float *bias, struct lmt_err *err)
{
	dnnl_exec_arg_t args[4] = {
		{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei}, {DNNL_ARG_DST, e->dst}, {e->bias_arg, e->bias},
	};
	dnnl_status_t st = dnnl_memory_set_data_handle(e->src, (void *)A);
	if (st == dnnl_success)
		st = dnnl_memory_set_data_handle(e->wei, (void *)B);
	if (st == dnnl_success)
		st = dnnl_memory_set_data_handle(e->dst, C);
	if (st == dnnl_success && bias)
		st = dnnl_memory_set_data_handle(e->bias, (void *)bias);
	if (st == dnnl_success)
		st = dnnl_primitive_execute(e->prim, c->stream, bias ? 4 : 3, args);
	if (st == dnnl_success)
		st = dnnl_stream_wait(c->stream);
	if (st == dnnl_success)
		return 0;
	char what[256];
	describe(what, sizeof what, &e->key);
	return lmt_err_set(err, st == dnnl_out_of_memory ? LMT_ENOMEM : LMT_EUNSUPPORTED,
			   "%s: oneDNN matmul failed: %s", what, dnnl_status2str(st));
}

/* op(X[b]) (rows x cols, dtype) into dense fp32 dst, nb entries */
static void pack(float *dst, const void *X, int dtype, int nb, long bs, int rows, int cols, int ld, int trans)
{
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < nb; b++)
		for (int r = 0; r < rows; r++) {
			float *d = dst + ((size_t)b * rows + r) * cols;
			size_t base = (size_t)b * bs;
			for (int j = 0; j < cols; j++)
				d[j] = load(X, dtype, base + (trans ? (size_t)j * ld + r : (size_t)r * ld + j));
		}
}

/* The conversion path (see the top of the file). */
static int fallback(struct lmt_cpu_gemm_cache *c, const struct lmt_gemm *g, struct lmt_err *err)
{
	int M = g->M, N = g->N, K = g->K, batch = g->batch;
	int na = batch > 1 && g->sa ? batch : 1, nb = batch > 1 && g->sb ? batch : 1;
	size_t sa = (size_t)M * K, sb = (size_t)K * N, sd = (size_t)M * N;
	/* the sizes fit: each is below 2^31 elements times a batch below 2^31 */
	size_t need = na * sa + nb * sb + batch * sd;
	if (need > c->scratch_cap) {
		float *p = realloc(c->scratch, need * sizeof(float));
		if (!p) {
			struct gemm_key k = key_of(g);
			char what[256];
			describe(what, sizeof what, &k);
			return lmt_err_set(err, LMT_ENOMEM, "%s: no memory for %zu bytes of fp32 scratch", what,
					   need * sizeof(float));
		}
		c->scratch = p;
		c->scratch_cap = need;
	}
	float *a = c->scratch, *b = a + na * sa, *d = b + nb * sb;
	if (K == 0) {
		memset(d, 0, batch * sd * sizeof(float));
	} else {
		pack(a, g->A, g->ab_dtype, na, g->sa, M, K, g->lda, g->ta);
		pack(b, g->B, g->ab_dtype, nb, g->sb, K, N, g->ldb, g->tb);
		struct lmt_gemm dg = {
			.M = M, .N = N, .K = K, .alpha = g->alpha, .beta = 0.0f, .A = a, .lda = K,
			.sa = na > 1 ? (long)sa : 0, .B = b, .ldb = N, .sb = nb > 1 ? (long)sb : 0, .C = d, .ldc = N,
			.sc = (long)sd, .batch = batch, .ab_dtype = LMT_DTYPE_F32, .c_dtype = LMT_DTYPE_F32,
		};
		struct gemm_key k = key_of(&dg);
		struct gemm_entry *e;
		int rc = lookup(c, &k, &e, err);
		if (rc)
			return rc;
		if (e->fallback) {
			char what[256];
			describe(what, sizeof what, &e->key);
			return lmt_err_set(err, LMT_EUNSUPPORTED, "%s: oneDNN matmul: %s", what, e->impl);
		}
		rc = run(c, e, a, b, d, NULL, err);
		if (rc)
			return rc;
	}
	float beta = g->beta;
#pragma omp parallel for collapse(2) schedule(static)
	for (int bi = 0; bi < batch; bi++)
		for (int m = 0; m < M; m++) {
			const float *dr = d + (size_t)bi * sd + (size_t)m * N;
			size_t base = (size_t)bi * (batch > 1 ? g->sc : 0) + (size_t)m * g->ldc;
			for (int n = 0; n < N; n++) {
				float v = dr[n];
				if (beta != 0.0f)
					v += beta * load(g->C, g->c_dtype, base + n);
				if (g->bias)
					v += g->bias[n];
				if (g->gelu)
					v = gelu(v);
				store(g->C, g->c_dtype, base + n, v);
			}
		}
	return 0;
}

static int check(const struct lmt_gemm *g, struct lmt_err *err)
{
	if (g->M < 0 || g->N < 0 || g->K < 0 || g->batch < 1)
		return lmt_err_set(err, LMT_EINVAL, "gemm: shape %dx%dx%d batch %d: expected sizes >= 0, batch >= 1",
				   g->M, g->N, g->K, g->batch);
	if (!dnnl_dtype(g->ab_dtype) || (g->c_dtype != LMT_DTYPE_F32 && g->c_dtype != g->ab_dtype))
		return lmt_err_set(err, LMT_EINVAL,
				   "gemm: dtypes %s x %s -> %s: expected A and B fp32, bf16 or fp16, C fp32 or theirs",
				   lmt_dtype_name(g->ab_dtype), lmt_dtype_name(g->ab_dtype), lmt_dtype_name(g->c_dtype));
	int acols = g->ta ? g->M : g->K, bcols = g->tb ? g->K : g->N;
	if (g->lda < LMT_MAX(acols, 1) || g->ldb < LMT_MAX(bcols, 1) || g->ldc < LMT_MAX(g->N, 1))
		return lmt_err_set(err, LMT_EINVAL, "gemm %dx%dx%d: row strides lda %d, ldb %d, ldc %d: expected at least %d, %d, %d",
				   g->M, g->N, g->K, g->lda, g->ldb, g->ldc, acols, bcols, g->N);
	if (g->batch > 1 && (g->sa < 0 || g->sb < 0 || g->sc <= 0))
		return lmt_err_set(err, LMT_EINVAL, "gemm: batch strides %ld, %ld, %ld: expected A, B >= 0, C > 0",
				   g->sa, g->sb, g->sc);
	return 0;
}

int lmt_cpu_gemm(struct lmt_cpu_gemm_cache *c, const struct lmt_gemm *g, struct lmt_err *err)
{
	int rc = check(g, err);
	if (rc || g->M == 0 || g->N == 0)
		return rc;
	if (g->K == 0)
		return fallback(c, g, err);
	struct gemm_key k = key_of(g);
	struct gemm_entry *e;
	rc = lookup(c, &k, &e, err);
	if (rc)
		return rc;
	if (e->fallback)
		return fallback(c, g, err);
	return run(c, e, g->A, g->B, g->C, g->bias, err);
}

const char *lmt_cpu_gemm_impl(struct lmt_cpu_gemm_cache *c, int dtype)
{
	if (dtype < 0 || dtype >= LMT_DTYPE_COUNT || !dnnl_dtype(dtype))
		return "none";
	struct lmt_gemm g = {
		.M = 1024, .N = 1024, .K = 1024, .alpha = 1.0f, .lda = 1024, .ldb = 1024, .ldc = 1024, .batch = 1,
		.ab_dtype = dtype, .c_dtype = LMT_DTYPE_F32,
	};
	struct gemm_key k = key_of(&g);
	struct gemm_entry *e;
	char *out = c->impl[dtype];
	if (lookup(c, &k, &e, NULL)) {
		snprintf(out, sizeof c->impl[0], "unknown (out of memory)");
	} else if (!e->fallback) {
		snprintf(out, sizeof c->impl[0], "%s", e->impl);
	} else if (dtype != LMT_DTYPE_F32) {
		const char *f32 = lmt_cpu_gemm_impl(c, LMT_DTYPE_F32);
		snprintf(out, sizeof c->impl[0], "fp32 via conversion (%.120s)", f32);
	} else {
		snprintf(out, sizeof c->impl[0], "none (%s)", e->impl);
	}
	return out;
}

int lmt_cpu_gemm_init(struct lmt_cpu_gemm_cache **out, int threads, struct lmt_err *err)
{
	*out = NULL;
	struct lmt_cpu_gemm_cache *c = calloc(1, sizeof *c);
	if (!c)
		return lmt_err_set(err, LMT_ENOMEM, "gemm cache: out of memory");
	c->threads = threads;
	dnnl_status_t st = dnnl_engine_create(&c->engine, dnnl_cpu, 0);
	if (st == dnnl_success)
		st = dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags);
	if (st != dnnl_success) {
		lmt_cpu_gemm_release(c);
		return lmt_err_set(err, st == dnnl_out_of_memory ? LMT_ENOMEM : LMT_EUNSUPPORTED,
				   "oneDNN: cannot open the cpu engine: %s", dnnl_status2str(st));
	}
	*out = c;
	return 0;
}

void lmt_cpu_gemm_release(struct lmt_cpu_gemm_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < LMT_GEMM_CACHE; i++)
		entry_clear(&c->e[i]);
	if (c->stream)
		dnnl_stream_destroy(c->stream);
	if (c->engine)
		dnnl_engine_destroy(c->engine);
	free(c->scratch);
	free(c);
}
