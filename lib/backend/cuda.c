/*
 * cuda.c: the cuda backend (`--backend cuda`): GEMMs through cuBLASLt, every other
 * operation of backend.h by the kernels in kernels/ (kernels.h), on the device
 * that is current when the backend opens (the nccl communicator picks it per
 * local rank before the backend is opened; device 0 otherwise).
 *
 * Shaped for a first run on a GPU nobody here has tested on:
 *   - every CUDA and cuBLASLt return code is checked; the first failure is kept
 *     as the sticky status, naming the operation, the call, the file and the line,
 *     and be->status synchronises both streams first, so that a kernel's fault
 *     reaches the step that checks it; the library never exits;
 *   - all compute runs on stream 0, copies to and from the host are ordered on it
 *     (the synchronous ones wait for it), stream 1 is for the caller's overlapped
 *     copies and communication, ordered by be->event_record/event_wait;
 *   - GEMMs: cuBLASLt, compute in fp32 (CUBLAS_COMPUTE_32F: no TF32, so fp32
 *     GEMMs keep fp32's accuracy), the algorithm chosen once per shape, layout
 *     and pointer alignment and cached with its descriptors, one workspace of
 *     32 MiB. The bias epilogue is cuBLASLt's where C is fp32 and the bias is
 *     16-byte aligned (its type then matches D's); GELU, any other bias, and
 *     every epilogue into a bf16/fp16 C are applied by kernels/elementwise.cu
 *     (into an fp32 C in place, else from an fp32 scratch product so that C is
 *     rounded once), because cuBLASLt's GELU is not
 *     documented to the accuracy test-backend-ops asks of the CPU backend. A
 *     case cuBLASLt has no algorithm for runs kernels/gemm.cu's tiled kernel,
 *     and LMT_CUDA_GEMM=naive forces that kernel for every GEMM (a second
 *     opinion when a result is in doubt);
 *   - cuBLASLt is opened (dlopen) when the backend is, not linked into the
 *     tools: linked, its relocations cost every process of every tool about
 *     200 MB of resident memory and 70 ms at start (measured on a program that
 *     does nothing), GPU or not;
 *   - memory: be->alloc is cudaMalloc, zeroed, with each block's size kept in a
 *     host table, so mem_now and mem_peak count what the caller holds (the
 *     GEMM workspace and the ops' scratch buffers are the backend's own and not
 *     counted); no caching allocator yet, so reserved = allocated;
 *   - op timing: each operation is bracketed by two CUDA events on stream 0; the
 *     elapsed times are added into be->op_s when the host next waits (sync,
 *     status, to_host), so the breakdown is GPU time, not launch time.
 *
 * Thread safety: the checkpoint writer's thread may allocate, free and copy
 * while the training thread launches; the allocation table, the timing ring and
 * the sticky status are behind one mutex.
 */
#include "backend/backend.h"
#include "backend/impl.h"

#ifdef LMT_HAVE_CUDA

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cudart.h"
#include "../../kernels/kernels.h"

/* cuBLASLt's entry points, looked up once by lt_open (see the opening comment) */
#define LT_FUNCS(X) \
	X(cublasLtCreate) \
	X(cublasLtDestroy) \
	X(cublasLtGetStatusName) \
	X(cublasLtGetStatusString) \
	X(cublasLtMatmul) \
	X(cublasLtMatmulAlgoGetHeuristic) \
	X(cublasLtMatmulDescCreate) \
	X(cublasLtMatmulDescDestroy) \
	X(cublasLtMatmulDescSetAttribute) \
	X(cublasLtMatmulPreferenceCreate) \
	X(cublasLtMatmulPreferenceDestroy) \
	X(cublasLtMatmulPreferenceSetAttribute) \
	X(cublasLtMatrixLayoutCreate) \
	X(cublasLtMatrixLayoutDestroy) \
	X(cublasLtMatrixLayoutSetAttribute)
static struct {
#define X(f) __typeof__(f) *f;
	LT_FUNCS(X)
#undef X
} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static char lt_error[512];

#ifndef LMT_CUDA_LIBDIR
#define LMT_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif
#define LT_STR_(x) #x
#define LT_STR(x) LT_STR_(x)
#define LT_SONAME "libcublasLt.so." LT_STR(CUBLAS_VER_MAJOR)

static void lt_load(void)
{
	/* the soname of the toolkit built against: by the loader's search (the
	 * tools' runpath holds the toolkit's lib64), then in the toolkit built with */
	void *h = dlopen(LT_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen(LMT_CUDA_LIBDIR "/" LT_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(lt_error, sizeof lt_error, "cannot load %s: %s", LT_SONAME, dlerror());
		return;
	}
#define X(f)                                                                                       \
	if (!lt_error[0] && !(*(void **)&lt.f = dlsym(h, #f)))                                     \
		snprintf(lt_error, sizeof lt_error, "%s: no symbol %s", LT_SONAME, #f);
	LT_FUNCS(X)
#undef X
}

/* 0, or LMT_EUNSUPPORTED with err naming the library and what went wrong */
static int lt_open(struct lmt_err *err)
{
	pthread_once(&lt_once, lt_load);
	if (lt_error[0])
		return lmt_err_set(err, LMT_EUNSUPPORTED, "cuda backend: %s", lt_error);
	return 0;
}

int lmt_backend_cuda_libs(struct lmt_err *err)
{
	return lt_open(err);
}

#define NEVENTS 64            /* be->event_record's event numbers: 0..NEVENTS-1 */
#define NTIMED 1024           /* operations timed before the host must collect */
#define WORKSPACE (32u << 20) /* cuBLASLt's workspace: NVIDIA's recommendation for Hopper */
#define TABLE 4096            /* buckets of the allocation table */

struct block {
	void *p;
	size_t bytes;
	struct block *next;
};

struct plan {
	/* the key */
	int ta, tb, M, N, K, lda, ldb, ldd, batch, abt, ddt, bias;
	long sa, sb, sd;
	unsigned align[3];
	/* what cuBLASLt chose */
	int ok;               /* 0: no algorithm: the tiled kernel runs this case */
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, ld;
	cublasLtMatmulAlgo_t algo;
};

struct scratch {
	void *p;
	size_t cap;
};

struct cuda {
	int dev;
	cudaStream_t st[2];
	cudaEvent_t ev[NEVENTS];
	cublasLtHandle_t lt;
	void *ws;
	struct plan *plans;
	int nplans, cplans;
	int naive;                     /* LMT_CUDA_GEMM=naive */
	struct scratch sc_ops, sc_gemm; /* the ops' scratch; the GEMM epilogue's fp32 product */
	pthread_mutex_t mu;
	struct block *table[TABLE];
	/* timing: pairs of events around each op, collected when the host waits */
	cudaEvent_t t0[NTIMED], t1[NTIMED];
	int tkind[NTIMED], ntimed;
	int fail_rc;
	char fail_msg[1100];
	char impl[3][400];      /* gemm_impl's strings: the kernel family and the device */
};

/* ---- status ---- */

static void fail(struct lmt_backend *be, int rc, const char *op, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail(struct lmt_backend *be, int rc, const char *op, const char *fmt, ...)
{
	struct cuda *c = be->priv;
	pthread_mutex_lock(&c->mu);
	if (!c->fail_rc) {
		char msg[1000];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		c->fail_rc = rc;
		snprintf(c->fail_msg, sizeof c->fail_msg, "cuda backend: %s: %s", op, msg);
	}
	pthread_mutex_unlock(&c->mu);
}

/* a CUDA runtime code (a cudaError_t, or a launcher's int) checked: 0 when fine */
#define CK(be, op, call) ck((be), (op), (int)(call), #call, __FILE__, __LINE__)
static int ck(struct lmt_backend *be, const char *op, int e, const char *what, const char *file, int line)
{
	if (e == 0)
		return 0;
	fail(be, LMT_EIO, op, "%s: %s (error %d) at %s:%d", what, cudaGetErrorString((cudaError_t)e), e, file, line);
	return -1;
}

#define CKLT(be, op, call) cklt((be), (op), (call), #call, __FILE__, __LINE__)
static int cklt(struct lmt_backend *be, const char *op, cublasStatus_t s, const char *what, const char *file,
		int line)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	fail(be, LMT_EIO, op, "%s: %s (%s) at %s:%d", what, lt.cublasLtGetStatusName(s), lt.cublasLtGetStatusString(s), file,
	     line);
	return -1;
}

/* adds the elapsed times of the timed ops into be->op_s; the events are done once
 * the caller has waited for stream 0, else this waits for the last one */
static void collect(struct lmt_backend *be)
{
	struct cuda *c = be->priv;
	pthread_mutex_lock(&c->mu);
	int n = c->ntimed;
	if (n && cudaEventSynchronize(c->t1[n - 1]) == cudaSuccess)
		for (int i = 0; i < n; i++) {
			float ms = 0;
			if (cudaEventElapsedTime(&ms, c->t0[i], c->t1[i]) == cudaSuccess && ms > 0)
				be->op_s[c->tkind[i]] += ms * 1e-3;
		}
	c->ntimed = 0;
	/* a timing call that failed must not reach the next launcher's cudaGetLastError
	 * as if that launch had failed; a kernel's fault is sticky and survives this */
	(void)cudaGetLastError();
	pthread_mutex_unlock(&c->mu);
}

/* the slot of the op about to run (its start recorded), or -1 */
static int op_begin(struct lmt_backend *be)
{
	struct cuda *c = be->priv;
	if (c->ntimed == NTIMED)
		collect(be);
	pthread_mutex_lock(&c->mu);
	int i = c->ntimed;
	if (i < NTIMED && cudaEventRecord(c->t0[i], c->st[0]) == cudaSuccess)
		c->ntimed++;
	else
		i = -1;
	pthread_mutex_unlock(&c->mu);
	return i;
}

static void op_end(struct lmt_backend *be, int slot, int kind)
{
	struct cuda *c = be->priv;
	if (slot < 0)
		return;
	pthread_mutex_lock(&c->mu);
	c->tkind[slot] = kind;
	/* a failed record leaves t1 at an earlier point of the stream: a short time, not a fault */
	(void)cudaEventRecord(c->t1[slot], c->st[0]);
	pthread_mutex_unlock(&c->mu);
}

#define OP_BEGIN int op_slot_ = op_begin(be)
#define OP_END(kind) op_end(be, op_slot_, (kind))
#define S0(be) ((void *)((struct cuda *)(be)->priv)->st[0])

static int cuda_status(struct lmt_backend *be, struct lmt_err *err)
{
	struct cuda *c = be->priv;
	/* a kernel's fault surfaces at the next synchronisation: make it this one */
	CK(be, "status", cudaStreamSynchronize(c->st[0]));
	CK(be, "status", cudaStreamSynchronize(c->st[1]));
	collect(be);
	pthread_mutex_lock(&c->mu);
	int rc = c->fail_rc;
	if (rc)
		lmt_err_set(err, rc, "%s", c->fail_msg);
	c->fail_rc = 0;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* The device is current per host thread: the entry points another thread may call
 * (the checkpoint writer: memory and copies) make the backend's own current first. */
static void on_device(struct lmt_backend *be)
{
	struct cuda *c = be->priv;
	int d = -1;
	if (cudaGetDevice(&d) != cudaSuccess || d != c->dev)
		CK(be, "set device", cudaSetDevice(c->dev));
}

/* ---- memory ---- */

static size_t bucket(const void *p)
{
	uintptr_t u = (uintptr_t)p >> 8;
	return (size_t)((u ^ (u >> 12)) % TABLE);
}

static void *cuda_alloc(struct lmt_backend *be, size_t bytes)
{
	struct cuda *c = be->priv;
	void *p = NULL;
	struct block *b = malloc(sizeof *b);
	if (!b)
		return NULL;
	on_device(be);
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		(void)cudaGetLastError(); /* out of memory is not sticky: the caller decides */
		free(b);
		return NULL;
	}
	/* zeroed, and done before any stream uses it */
	if (CK(be, "alloc", cudaMemsetAsync(p, 0, bytes, c->st[0])) || CK(be, "alloc", cudaStreamSynchronize(c->st[0]))) {
		(void)cudaFree(p);
		free(b);
		return NULL;
	}
	b->p = p;
	b->bytes = bytes;
	pthread_mutex_lock(&c->mu);
	size_t k = bucket(p);
	b->next = c->table[k];
	c->table[k] = b;
	be->mem_now += bytes;
	if (be->mem_now > be->mem_peak)
		be->mem_peak = be->mem_now;
	pthread_mutex_unlock(&c->mu);
	return p;
}

static void cuda_free(struct lmt_backend *be, void *p)
{
	struct cuda *c = be->priv;
	if (!p)
		return;
	pthread_mutex_lock(&c->mu);
	struct block **q = &c->table[bucket(p)], *b = NULL;
	while (*q && (*q)->p != p)
		q = &(*q)->next;
	if (*q) {
		b = *q;
		*q = b->next;
		be->mem_now -= b->bytes;
	}
	pthread_mutex_unlock(&c->mu);
	if (!b) {
		fail(be, LMT_EINVAL, "free", "%p is not a block of this backend", p);
		return;
	}
	free(b);
	on_device(be);
	CK(be, "free", cudaFree(p)); /* waits for the work that may still use it */
}

static void *cuda_alloc_host(struct lmt_backend *be, size_t bytes)
{
	void *p = NULL;
	(void)be;
	if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	memset(p, 0, bytes); /* as the CPU backend's */
	return p;
}

static void cuda_free_host(struct lmt_backend *be, void *p)
{
	if (p)
		CK(be, "free_host", cudaFreeHost(p));
}

static int stream_ok(struct lmt_backend *be, const char *op, int stream)
{
	if (stream == 0 || stream == 1)
		return 1;
	fail(be, LMT_EINVAL, op, "stream %d: this backend has streams 0 and 1", stream);
	return 0;
}

static void cuda_to_device(struct lmt_backend *be, void *dst, const void *src, size_t bytes)
{
	struct cuda *c = be->priv;
	if (!bytes)
		return;
	on_device(be);
	if (!CK(be, "to_device", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->st[0])))
		CK(be, "to_device", cudaStreamSynchronize(c->st[0]));
}

static void cuda_to_host(struct lmt_backend *be, void *dst, const void *src, size_t bytes)
{
	struct cuda *c = be->priv;
	if (!bytes)
		return;
	on_device(be);
	if (!CK(be, "to_host", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->st[0])))
		CK(be, "to_host", cudaStreamSynchronize(c->st[0]));
	collect(be);
}

static void cuda_to_device_async(struct lmt_backend *be, void *dst, const void *src, size_t bytes, int stream)
{
	struct cuda *c = be->priv;
	if (bytes && stream_ok(be, "to_device_async", stream))
		CK(be, "to_device_async", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->st[stream]));
}

static void cuda_to_host_async(struct lmt_backend *be, void *dst, const void *src, size_t bytes, int stream)
{
	struct cuda *c = be->priv;
	if (bytes && stream_ok(be, "to_host_async", stream))
		CK(be, "to_host_async", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->st[stream]));
}

static void cuda_copy(struct lmt_backend *be, void *dst, const void *src, size_t bytes)
{
	struct cuda *c = be->priv;
	if (bytes)
		CK(be, "copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->st[0]));
}

static void cuda_zero(struct lmt_backend *be, void *p, size_t bytes)
{
	struct cuda *c = be->priv;
	if (bytes)
		CK(be, "zero", cudaMemsetAsync(p, 0, bytes, c->st[0]));
}

static void cuda_sync(struct lmt_backend *be)
{
	struct cuda *c = be->priv;
	CK(be, "sync", cudaStreamSynchronize(c->st[0]));
	CK(be, "sync", cudaStreamSynchronize(c->st[1]));
	collect(be);
}

static cudaEvent_t *event(struct lmt_backend *be, const char *op, int e)
{
	struct cuda *c = be->priv;
	if (e < 0 || e >= NEVENTS) {
		fail(be, LMT_EINVAL, op, "event %d: this backend has events 0..%d", e, NEVENTS - 1);
		return NULL;
	}
	return &c->ev[e];
}

static void cuda_event_record(struct lmt_backend *be, int e, int stream)
{
	struct cuda *c = be->priv;
	cudaEvent_t *ev = event(be, "event_record", e);
	if (ev && stream_ok(be, "event_record", stream))
		CK(be, "event_record", cudaEventRecord(*ev, c->st[stream]));
}

static void cuda_event_wait(struct lmt_backend *be, int e, int stream)
{
	struct cuda *c = be->priv;
	cudaEvent_t *ev = event(be, "event_wait", e);
	if (ev && stream_ok(be, "event_wait", stream))
		CK(be, "event_wait", cudaStreamWaitEvent(c->st[stream], *ev, 0));
}

/* a scratch buffer of at least `bytes`, grown (never shrunk) as needed; NULL on failure */
static void *scratch(struct lmt_backend *be, struct scratch *s, const char *op, size_t bytes)
{
	if (s->cap >= bytes && s->p)
		return s->p;
	size_t cap = bytes + bytes / 4 + 256;
	if (s->p)
		CK(be, op, cudaFree(s->p)); /* waits for the kernels that used it */
	s->p = NULL;
	s->cap = 0;
	if (CK(be, op, cudaMalloc(&s->p, cap))) {
		s->p = NULL;
		return NULL;
	}
	s->cap = cap;
	return s->p;
}

/* ---- GEMM ---- */

static int ab_ok(int dt)
{
	return dt == LMT_DTYPE_F32 || dt == LMT_DTYPE_BF16 || dt == LMT_DTYPE_F16;
}

static cudaDataType_t cuda_type(int dt)
{
	return dt == LMT_DTYPE_BF16 ? CUDA_R_16BF : dt == LMT_DTYPE_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* the alignment every batch entry's pointer keeps: the lowest set bit of the
 * address, the batch stride (with more than one entry) and the row stride in
 * bytes, at most 256 */
static unsigned alignment(const void *p, long stride, int batch, int ld, size_t es)
{
	uintptr_t u = (uintptr_t)p | (uintptr_t)(batch > 1 ? stride * (long)es : 0) | (uintptr_t)((size_t)ld * es) | 256;
	return (unsigned)(u & (~u + 1));
}

static void plan_release(struct plan *p)
{
	if (p->desc)
		lt.cublasLtMatmulDescDestroy(p->desc);
	if (p->la)
		lt.cublasLtMatrixLayoutDestroy(p->la);
	if (p->lb)
		lt.cublasLtMatrixLayoutDestroy(p->lb);
	if (p->ld)
		lt.cublasLtMatrixLayoutDestroy(p->ld);
	memset(p, 0, sizeof *p);
}

static int layout(struct lmt_backend *be, cublasLtMatrixLayout_t *l, int dt, int rows, int cols, int ld, int batch,
		  long stride)
{
	int32_t nb = batch;
	int64_t st = stride;
	if (CKLT(be, "gemm", lt.cublasLtMatrixLayoutCreate(l, cuda_type(dt), (uint64_t)rows, (uint64_t)cols, ld)))
		return -1;
	if (batch > 1 && (CKLT(be, "gemm", lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb,
									       sizeof nb)) ||
			  CKLT(be, "gemm", lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
									       &st, sizeof st))))
		return -1;
	return 0;
}

/*
 * The plan for D (M x N row-major, ldd, sd, ddt) = alpha op(A) op(B) + beta D (+ bias),
 * made once. Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt
 * sees m = N, n = M, its A is our B (transposed as tb says), its B our A.
 */
static struct plan *plan_for(struct lmt_backend *be, const struct lmt_gemm *g, const void *D, int ldd, long sd,
			     int ddt, int bias)
{
	struct cuda *c = be->priv;
	size_t ea = lmt_dtype_size(g->ab_dtype), ed = lmt_dtype_size(ddt);
	unsigned al[3] = { alignment(g->B, g->sb, g->batch, g->ldb, ea), alignment(g->A, g->sa, g->batch, g->lda, ea),
			   alignment(D, sd, g->batch, ldd, ed) };
	for (int i = 0; i < c->nplans; i++) {
		struct plan *p = &c->plans[i];
		if (p->ta == g->ta && p->tb == g->tb && p->M == g->M && p->N == g->N && p->K == g->K && p->lda == g->lda &&
		    p->ldb == g->ldb && p->ldd == ldd && p->batch == g->batch && p->abt == g->ab_dtype && p->ddt == ddt &&
		    p->bias == bias && p->sa == g->sa && p->sb == g->sb && p->sd == sd && !memcmp(p->align, al, sizeof al))
			return p;
	}
	if (c->nplans == c->cplans) {
		int n = c->cplans ? 2 * c->cplans : 32;
		struct plan *q = realloc(c->plans, (size_t)n * sizeof *q);
		if (!q) {
			fail(be, LMT_ENOMEM, "gemm", "out of memory for the plan cache");
			return NULL;
		}
		c->plans = q;
		c->cplans = n;
	}
	struct plan *p = &c->plans[c->nplans];
	memset(p, 0, sizeof *p);
	p->ta = g->ta, p->tb = g->tb, p->M = g->M, p->N = g->N, p->K = g->K, p->lda = g->lda, p->ldb = g->ldb;
	p->ldd = ldd, p->batch = g->batch, p->abt = g->ab_dtype, p->ddt = ddt, p->bias = bias;
	p->sa = g->sa, p->sb = g->sb, p->sd = sd;
	memcpy(p->align, al, sizeof al);
	cublasOperation_t opa = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
	cublasLtMatmulPreference_t pref = NULL;
	uint64_t wsb = WORKSPACE;
	cublasLtMatmulHeuristicResult_t res;
	int nres = 0;
	int bad = CKLT(be, "gemm", lt.cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa)) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb)) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) ||
		  layout(be, &p->la, g->ab_dtype, g->tb ? g->K : g->N, g->tb ? g->N : g->K, g->ldb, g->batch, g->sb) ||
		  layout(be, &p->lb, g->ab_dtype, g->ta ? g->M : g->K, g->ta ? g->K : g->M, g->lda, g->batch, g->sa) ||
		  layout(be, &p->ld, ddt, g->N, g->M, ldd, g->batch, sd) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulPreferenceCreate(&pref)) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
									 sizeof wsb)) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
									 &al[0], sizeof al[0])) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
									 &al[1], sizeof al[1])) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
									 &al[2], sizeof al[2])) ||
		  CKLT(be, "gemm", lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
									 &al[2], sizeof al[2]));
	if (!bad) {
		/* no algorithm is not an error: the tiled kernel takes the case */
		cublasStatus_t s = lt.cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &res,
								  &nres);
		if (s == CUBLAS_STATUS_SUCCESS && nres > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
			p->algo = res.algo;
			p->ok = 1;
		}
	}
	if (pref)
		lt.cublasLtMatmulPreferenceDestroy(pref);
	if (bad) {
		plan_release(p);
		return NULL;
	}
	c->nplans++;
	return p;
}

/* D = alpha op(A) op(B) + beta D (+ bias) through cuBLASLt: 0 done, 1 no algorithm
 * for it (the caller runs the tiled kernel), -1 failed (recorded) */
static int lt_gemm(struct lmt_backend *be, const struct lmt_gemm *g, void *D, int ldd, long sd, int ddt, float beta,
		   const float *bias)
{
	struct cuda *c = be->priv;
	struct plan *p = plan_for(be, g, D, ldd, sd, ddt, bias != NULL);
	if (!p)
		return -1;
	if (!p->ok)
		return 1;
	float alpha = g->alpha;
	if (bias && CKLT(be, "gemm", lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
								     sizeof bias)))
		return -1;
	cublasStatus_t s = lt.cublasLtMatmul(c->lt, p->desc, &alpha, g->B, p->la, g->A, p->lb, &beta, D, p->ld, D, p->ld,
					  &p->algo, c->ws, WORKSPACE, c->st[0]);
	if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
		p->ok = 0; /* never again for this plan */
		return 1;
	}
	return CKLT(be, "gemm", s) ? -1 : 0;
}

static void naive_gemm(struct lmt_backend *be, const struct lmt_gemm *g)
{
	CK(be, "gemm", lmt_k_gemm_naive(g->ta, g->tb, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->sa, g->B, g->ldb,
					g->sb, g->beta, g->C, g->ldc, g->sc, g->batch, g->ab_dtype, g->c_dtype, g->bias,
					g->gelu, S0(be)));
}

static void cuda_gemm(struct lmt_backend *be, const struct lmt_gemm *g)
{
	struct cuda *c = be->priv;
	int ra = g->ta ? g->K : g->M, ca = g->ta ? g->M : g->K, rb = g->tb ? g->N : g->K, cb = g->tb ? g->K : g->N;
	if (g->M < 0 || g->N < 0 || g->K < 0 || g->batch < 1 || !ab_ok(g->ab_dtype) ||
	    (g->c_dtype != LMT_DTYPE_F32 && g->c_dtype != g->ab_dtype) || g->lda < (ca > 1 ? ca : 1) ||
	    g->ldb < (cb > 1 ? cb : 1) || g->ldc < (g->N > 1 ? g->N : 1)) {
		fail(be, LMT_EINVAL, "gemm",
		     "cannot do M=%d N=%d K=%d batch %d, lda %d ldb %d ldc %d, %s x %s -> %s (rows %d, %d)", g->M, g->N,
		     g->K, g->batch, g->lda, g->ldb, g->ldc, lmt_dtype_name(g->ab_dtype), lmt_dtype_name(g->ab_dtype),
		     lmt_dtype_name(g->c_dtype), ra, rb);
		return;
	}
	if (g->M == 0 || g->N == 0)
		return;
	OP_BEGIN;
	int r = 1;
	if (c->naive || g->K == 0) {
		r = 1;
	} else if (g->c_dtype == LMT_DTYPE_F32) {
		/* cuBLASLt adds beta C and the bias (given a 16-byte aligned one: the model's
		 * biases are offsets into one parameter block); the rest in place after */
		const float *lt_bias = ((uintptr_t)g->bias & 15) == 0 ? g->bias : NULL, *k_bias = lt_bias ? NULL : g->bias;
		r = lt_gemm(be, g, g->C, g->ldc, g->sc, g->c_dtype, g->beta, lt_bias);
		if (r == 0 && (g->gelu || k_bias))
			CK(be, "gemm", lmt_k_gemm_epilogue(g->C, g->c_dtype, g->ldc, g->sc, NULL, 0, 0, 0, k_bias, g->gelu,
							   g->M, g->N, g->batch, S0(be)));
	} else if (!g->gelu && !g->bias) {
		r = lt_gemm(be, g, g->C, g->ldc, g->sc, g->c_dtype, g->beta, NULL);
	} else {
		/* a bf16/fp16 C with an epilogue: the product in fp32 first, rounded once into C */
		size_t per = (size_t)g->M * g->N;
		float *D = scratch(be, &c->sc_gemm, "gemm", per * g->batch * sizeof(float));
		r = D ? lt_gemm(be, g, D, g->N, (long)per, LMT_DTYPE_F32, 0.0f, NULL) : -1;
		if (r == 0)
			CK(be, "gemm", lmt_k_gemm_epilogue(g->C, g->c_dtype, g->ldc, g->sc, D, g->N, (long)per, g->beta,
							   g->bias, g->gelu, g->M, g->N, g->batch, S0(be)));
	}
	if (r == 1)
		naive_gemm(be, g);
	OP_END(LMT_OPK_GEMM);
}

static const char *cuda_gemm_impl(struct lmt_backend *be, int dtype)
{
	struct cuda *c = be->priv;
	return c->impl[dtype == LMT_DTYPE_BF16 ? 1 : dtype == LMT_DTYPE_F16 ? 2 : 0];
}

/* ---- the other operations: kernels/ ---- */

static void cuda_cast(struct lmt_backend *be, void *dst, int ddt, const void *src, int sdt, size_t n, int sr,
		      uint64_t seed)
{
	if (ddt == sdt) {
		cuda_copy(be, dst, src, n * lmt_dtype_size(ddt));
		return;
	}
	if (!ab_ok(ddt) || !(ab_ok(sdt) || sdt == LMT_DTYPE_I32)) {
		fail(be, LMT_EUNSUPPORTED, "cast", "casts from %s to %s are not an operation of this backend",
		     lmt_dtype_name(sdt), lmt_dtype_name(ddt));
		return;
	}
	OP_BEGIN;
	CK(be, "cast", lmt_k_cast(dst, ddt, src, sdt, n, sr, seed, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_embed_fwd(struct lmt_backend *be, float *out, const int32_t *tok, const float *wte, const float *wpe,
			   int B, int T, int C)
{
	OP_BEGIN;
	CK(be, "embed_fwd", lmt_k_embed_fwd(out, tok, wte, wpe, B, T, C, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_embed_bwd(struct lmt_backend *be, float *dwte, float *dwpe, const float *dout, const int32_t *tok,
			   int B, int T, int C)
{
	OP_BEGIN;
	CK(be, "embed_bwd", lmt_k_embed_bwd(dwte, dwpe, dout, tok, B, T, C, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_layernorm_fwd(struct lmt_backend *be, void *out, int dt, float *mean, float *rstd, const float *inp,
			       const float *w, const float *b, int N, int C)
{
	OP_BEGIN;
	CK(be, "layernorm_fwd", lmt_k_layernorm_fwd(out, dt, mean, rstd, inp, w, b, N, C, S0(be)));
	OP_END(LMT_OPK_NORM);
}

static void cuda_layernorm_bwd(struct lmt_backend *be, float *dinp, float *dw, float *db, const float *dout,
			       const float *inp, const float *w, const float *mean, const float *rstd, int N, int C)
{
	struct cuda *c = be->priv;
	float *s = scratch(be, &c->sc_ops, "layernorm_bwd", 2 * lmt_k_colsum_scratch(N, C) * sizeof(float));
	if (!s)
		return;
	OP_BEGIN;
	CK(be, "layernorm_bwd", lmt_k_layernorm_bwd(dinp, dw, db, dout, inp, w, mean, rstd, N, C, s, S0(be)));
	OP_END(LMT_OPK_NORM);
}

static void cuda_bias_add(struct lmt_backend *be, float *x, const float *b, int N, int C)
{
	OP_BEGIN;
	CK(be, "bias_add", lmt_k_bias_add(x, b, N, C, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_bias_grad(struct lmt_backend *be, float *db, const float *dout, int N, int C)
{
	struct cuda *c = be->priv;
	float *s = scratch(be, &c->sc_ops, "bias_grad", lmt_k_colsum_scratch(N, C) * sizeof(float));
	if (!s)
		return;
	OP_BEGIN;
	CK(be, "bias_grad", lmt_k_bias_grad(db, dout, N, C, s, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_gelu_fwd(struct lmt_backend *be, void *out, int dt, const float *inp, size_t n)
{
	OP_BEGIN;
	CK(be, "gelu_fwd", lmt_k_gelu_fwd(out, dt, inp, n, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_gelu_bwd(struct lmt_backend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
	OP_BEGIN;
	CK(be, "gelu_bwd", lmt_k_gelu_bwd(dinp, inp, dout, n, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_add(struct lmt_backend *be, float *out, const float *a, const float *b, size_t n)
{
	OP_BEGIN;
	CK(be, "add", lmt_k_add(out, a, b, n, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_axpy(struct lmt_backend *be, float *y, float a, const float *x, size_t n)
{
	OP_BEGIN;
	CK(be, "axpy", lmt_k_axpy(y, a, x, n, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static int attn_ok(struct lmt_backend *be, const char *op, int HS)
{
	if (HS >= 1 && HS <= LMT_K_ATTN_MAX_HS)
		return 1;
	fail(be, LMT_EUNSUPPORTED, op, "head size %d: this backend's kernels take 1..%d", HS, LMT_K_ATTN_MAX_HS);
	return 0;
}

static void cuda_attention_fwd(struct lmt_backend *be, float *out, float *lse, const float *qkv, const int32_t *seg,
			       int B, int T, int NH, int HS, int q0)
{
	if (!attn_ok(be, "attention_fwd", HS))
		return;
	OP_BEGIN;
	CK(be, "attention_fwd", lmt_k_attention_fwd(out, lse, qkv, seg, B, T, NH, HS, q0, S0(be)));
	OP_END(LMT_OPK_ATTENTION);
}

static void cuda_attention_bwd(struct lmt_backend *be, float *dqkv, const float *dout, const float *qkv,
			       const float *out, const float *lse, const int32_t *seg, int B, int T, int NH, int HS)
{
	struct cuda *c = be->priv;
	if (!attn_ok(be, "attention_bwd", HS))
		return;
	float *s = scratch(be, &c->sc_ops, "attention_bwd", (size_t)B * NH * T * sizeof(float));
	if (!s)
		return;
	OP_BEGIN;
	CK(be, "attention_bwd", lmt_k_attention_bwd(dqkv, dout, qkv, out, lse, seg, B, T, NH, HS, s, S0(be)));
	OP_END(LMT_OPK_ATTENTION);
}

static void cuda_xent(struct lmt_backend *be, float *losses, double *loss_acc, float *logits, const int32_t *targets,
		      int N, int V, int Vp, float dscale)
{
	OP_BEGIN;
	CK(be, "xent_fwd_bwd", lmt_k_xent_fwd_bwd(losses, loss_acc, logits, targets, N, V, Vp, dscale, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_adamw(struct lmt_backend *be, float *p, void *work, int wdt, const float *g, float *m, float *v,
		       size_t n, const struct lmt_adamw *a, double *nonfinite_acc)
{
	if (work && !ab_ok(wdt)) {
		fail(be, LMT_EUNSUPPORTED, "adamw", "a working copy in %s", lmt_dtype_name(wdt));
		return;
	}
	OP_BEGIN;
	/* 1/bc as the CPU backend rounds it, so both backends compute the same */
	float ib1 = 1.0f / a->bc1, ib2 = 1.0f / a->bc2;
	CK(be, "adamw", lmt_k_adamw(p, work, wdt, g, m, v, n, a->lr, a->b1, a->b2, a->eps, a->wd, ib1, ib2, a->gscale,
				    nonfinite_acc, S0(be)));
	OP_END(LMT_OPK_OPTIMIZER);
}

static void cuda_sumsq(struct lmt_backend *be, double *acc, const float *x, size_t n)
{
	struct cuda *c = be->priv;
	double *s = scratch(be, &c->sc_ops, "sumsq", lmt_k_sumsq_scratch() * sizeof(double));
	if (!s)
		return;
	OP_BEGIN;
	CK(be, "sumsq", lmt_k_sumsq(acc, x, n, s, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

static void cuda_scale(struct lmt_backend *be, float *x, float s, size_t n)
{
	OP_BEGIN;
	CK(be, "scale", lmt_k_scale(x, s, n, S0(be)));
	OP_END(LMT_OPK_OTHER);
}

/* ---- lifecycle ---- */

static void cuda_release(struct lmt_backend *be)
{
	struct cuda *c = be->priv;
	if (!c)
		return;
	(void)cudaDeviceSynchronize();
	for (int i = 0; i < c->nplans; i++)
		plan_release(&c->plans[i]);
	free(c->plans);
	if (c->lt)
		lt.cublasLtDestroy(c->lt);
	if (c->ws)
		(void)cudaFree(c->ws);
	if (c->sc_ops.p)
		(void)cudaFree(c->sc_ops.p);
	if (c->sc_gemm.p)
		(void)cudaFree(c->sc_gemm.p);
	for (int i = 0; i < NEVENTS; i++)
		if (c->ev[i])
			(void)cudaEventDestroy(c->ev[i]);
	for (int i = 0; i < NTIMED; i++) {
		if (c->t0[i])
			(void)cudaEventDestroy(c->t0[i]);
		if (c->t1[i])
			(void)cudaEventDestroy(c->t1[i]);
	}
	for (int i = 0; i < 2; i++)
		if (c->st[i])
			(void)cudaStreamDestroy(c->st[i]);
	/* blocks the caller never freed: their table entries (the memory goes with the process) */
	for (int i = 0; i < TABLE; i++)
		for (struct block *b = c->table[i], *nx; b; b = nx) {
			nx = b->next;
			free(b);
		}
	(void)cudaGetLastError();
	pthread_mutex_destroy(&c->mu);
	free(c);
	be->priv = NULL;
}

static int init_fail(struct lmt_backend *be, struct lmt_err *err, const char *what, int e)
{
	lmt_err_set(err, LMT_EIO, "cuda backend: %s: %s (error %d)", what, cudaGetErrorString((cudaError_t)e), e);
	cuda_release(be);
	return LMT_EIO;
}

int lmt_backend_cuda_init(struct lmt_backend *be, int threads, struct lmt_err *err)
{
	int ndev = 0, e;
	memset(be, 0, sizeof *be);
	struct lmt_err e0 = { 0 };
	int rc = lmt_cudart_devices(&ndev, &e0); /* "no GPU (...)" when there is none */
	if (rc)
		return lmt_err_set(err, rc, "cuda backend: %s", e0.msg);
	struct cuda *c = calloc(1, sizeof *c);
	if (!c)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	be->priv = c;
	if ((e = cudaGetDevice(&c->dev)))
		return init_fail(be, err, "cudaGetDevice", e);
	for (int i = 0; i < 2; i++)
		if ((e = cudaStreamCreateWithFlags(&c->st[i], cudaStreamNonBlocking)))
			return init_fail(be, err, "cudaStreamCreateWithFlags", e);
	for (int i = 0; i < NEVENTS; i++)
		if ((e = cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming)))
			return init_fail(be, err, "cudaEventCreateWithFlags", e);
	for (int i = 0; i < NTIMED; i++)
		if ((e = cudaEventCreate(&c->t0[i])) || (e = cudaEventCreate(&c->t1[i])))
			return init_fail(be, err, "cudaEventCreate", e);
	if ((e = cudaMalloc(&c->ws, WORKSPACE)))
		return init_fail(be, err, "cudaMalloc (the cuBLASLt workspace)", e);
	if ((rc = lt_open(err))) {
		cuda_release(be);
		return rc;
	}
	cublasStatus_t s = lt.cublasLtCreate(&c->lt);
	if (s != CUBLAS_STATUS_SUCCESS) {
		c->lt = NULL;
		lmt_err_set(err, LMT_EIO, "cuda backend: cublasLtCreate: %s", lt.cublasLtGetStatusString(s));
		cuda_release(be);
		return LMT_EIO;
	}
	const char *gm = getenv("LMT_CUDA_GEMM");
	c->naive = gm && !strcmp(gm, "naive");
	struct cudaDeviceProp prop;
	char dev[300] = "device ?";
	if (cudaGetDeviceProperties(&prop, c->dev) == cudaSuccess)
		snprintf(dev, sizeof dev, "%.255s, sm_%d%d", prop.name, prop.major, prop.minor);
	(void)cudaGetLastError();
	static const char *const kind[3] = { "fp32, compute 32F, no TF32", "bf16, compute 32F", "fp16, compute 32F" };
	for (int i = 0; i < 3; i++)
		snprintf(c->impl[i], sizeof c->impl[i], "%s (%s; %s)",
			 c->naive ? "cuda:tiled-kernel, LMT_CUDA_GEMM=naive" : "cublasLt", kind[i], dev);
	be->name = "cuda";
	be->threads = threads > 0 ? threads : 1; /* host loops: none; kept for the record */
	be->is_host = 0;
	be->dtypes = 1u << LMT_DTYPE_F32 | 1u << LMT_DTYPE_BF16 | 1u << LMT_DTYPE_F16;
	be->fast_dtypes = be->dtypes;
	be->release = cuda_release;
	be->status = cuda_status;
	be->gemm_impl = cuda_gemm_impl;
	be->alloc = cuda_alloc;
	be->free = cuda_free;
	be->alloc_host = cuda_alloc_host;
	be->free_host = cuda_free_host;
	be->to_device = cuda_to_device;
	be->to_host = cuda_to_host;
	be->to_device_async = cuda_to_device_async;
	be->to_host_async = cuda_to_host_async;
	be->copy = cuda_copy;
	be->zero = cuda_zero;
	be->sync = cuda_sync;
	be->event_record = cuda_event_record;
	be->event_wait = cuda_event_wait;
	be->gemm = cuda_gemm;
	be->cast = cuda_cast;
	be->embed_fwd = cuda_embed_fwd;
	be->embed_bwd = cuda_embed_bwd;
	be->layernorm_fwd = cuda_layernorm_fwd;
	be->layernorm_bwd = cuda_layernorm_bwd;
	be->bias_add = cuda_bias_add;
	be->bias_grad = cuda_bias_grad;
	be->gelu_fwd = cuda_gelu_fwd;
	be->gelu_bwd = cuda_gelu_bwd;
	be->add = cuda_add;
	be->axpy = cuda_axpy;
	be->attention_fwd = cuda_attention_fwd;
	be->attention_bwd = cuda_attention_bwd;
	be->xent_fwd_bwd = cuda_xent;
	be->adamw = cuda_adamw;
	be->sumsq = cuda_sumsq;
	be->scale = cuda_scale;
	return 0;
}

#endif /* LMT_HAVE_CUDA */
