/*
 * nccl.c: the nccl communicator, device buffers over NCCL, one GPU per rank.
 *
 * Wire-up: the rank, world and local rank come from PMIx (pmix.h); rank 0 makes
 * the NCCL unique id (ncclGetUniqueId) and puts it, every rank commits, fences
 * with collect and gets rank 0's id, then ncclCommInitRank. Without a PMIx
 * server the process is a world of one with its own id. Each rank takes device
 * local_rank % (visible devices). Any CUDA error at discovery, or no device, is
 * an LMT_EUNSUPPORTED saying "no GPU" (lmt_cudart_devices).
 *
 * Every operation is enqueued on the communicator's own CUDA stream (a blocking
 * stream, so it is ordered after work on the legacy default stream) and ends by
 * recording an event; wait polls cudaEventQuery and ncclCommGetAsyncError
 * against timeout_s, so the blocking calls, allreduce_start/wait and the timeout
 * share one path, as in mpi.c. On a timeout or an asynchronous NCCL error the
 * communicator is aborted (ncclCommAbort) and marked broken: every later call
 * fails at once, and release aborts instead of destroying. ncclCommInitRank and
 * the connection setup inside a first collective block in NCCL (blocking
 * mode) and are not bounded by timeout_s.
 *
 * Host buffers: the trainer passes small host values too (an int64 count of
 * tokens, a few doubles, the loader cursors, a path to broadcast). Each buffer
 * is checked with cudaPointerGetAttributes; host memory (pageable or pinned) is
 * staged through device memory from the stream's pool (cudaMallocAsync): copied
 * in on the stream, reduced there, and copied back to the host by wait, on the
 * same stream (so that copy also waits for what was started on this
 * communicator after the operation: nothing, for the blocking calls).
 *
 * Reductions: fp32, fp64, int32 and int64 reduce in their own type (ncclSum,
 * ncclAvg, ncclMax; NCCL's avg divides integers after the sum, truncating, and
 * multiplies floats by 1/n before it, which may differ from sum / n in the last
 * bit). bf16, fp16 and uint8 honour comm.h: kernels/convert.cu widens them into
 * an fp32 device buffer, NCCL sums that (ncclSum, or ncclMax), and the way back
 * divides for an average and rounds once (uint8: modulo 256, as mpi.c does), at
 * 4 bytes an element of device memory for the call's life; NCCL's own bf16 sums
 * would round at every step of its ring or tree.
 *
 * NCCL has no uneven collectives: reduce_scatterv is a group (ncclGroupStart/
 * End) of one ncclReduce to each part's owner (rank r for counts[r] > 0), and
 * allgatherv a group of one ncclBroadcast from each owner.
 */
#include "comm/comm.h"
#include "comm/impl.h"

#ifdef LMT_HAVE_NCCL /* the whole file: a build without NCCL has no nccl communicator */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backend/cudart.h"
#include "comm/pmix.h"

struct state {
	ncclComm_t comm;
	cudaStream_t stream;
	struct lmt_pmix pmix;
	int has_pmix, aborted;
};

/* a host buffer staged through device memory */
struct staged {
	void *host;         /* copied back here at wait (NULL: input only) */
	void *dev;
	size_t bytes;
};

struct lmt_comm_req {
	cudaEvent_t ev;
	int has_ev, nstaged;
	struct staged st[2];
	char what[96];      /* "all-reduce (sum, 3 bf16 elements)", for messages */
};

static int broken;  /* a wait timed out or NCCL failed: no NCCL call is safe any more */
static int id_seq;  /* communicators opened: a fresh PMIx key for each one's id */

int lmt_nccl_dtype(int dtype, int *via_f32)
{
	*via_f32 = dtype == LMT_DTYPE_BF16 || dtype == LMT_DTYPE_F16 || dtype == LMT_DTYPE_U8;
	switch (dtype) {
	case LMT_DTYPE_F32: return ncclFloat32;
	case LMT_DTYPE_BF16: return ncclBfloat16;
	case LMT_DTYPE_F16: return ncclFloat16;
	case LMT_DTYPE_F64: return ncclFloat64;
	case LMT_DTYPE_I32: return ncclInt32;
	case LMT_DTYPE_I64: return ncclInt64;
	case LMT_DTYPE_U8: return ncclUint8;
	}
	*via_f32 = 0;
	return -1;
}

int lmt_nccl_op(int op)
{
	switch (op) {
	case LMT_COMM_OP_SUM: return ncclSum;
	case LMT_COMM_OP_AVG: return ncclAvg;
	case LMT_COMM_OP_MAX: return ncclMax;
	}
	return -1;
}

static int cuda_fail(struct lmt_err *err, cudaError_t e, const char *what)
{
	return lmt_err_set(err, LMT_EIO, "nccl: %s: CUDA: %s (error %d)", what, cudaGetErrorString(e), (int)e);
}

static int nccl_fail(struct lmt_comm *c, struct lmt_err *err, ncclResult_t r, const char *what)
{
	struct state *s = c ? c->priv : NULL;
	const char *last = s && s->comm ? ncclGetLastError(s->comm) : NULL;
	return lmt_err_set(err, LMT_EIO, "nccl: %s on rank %d: %s%s%s", what, c ? c->rank : 0, ncclGetErrorString(r),
			   last && *last ? ": " : "", last ? last : "");
}

static int check_usable(struct lmt_comm *c, const char *what, struct lmt_err *err)
{
	if (broken)
		return lmt_err_set(err, LMT_EIO, "nccl: %s on rank %d: an earlier operation failed or timed out, the "
				   "communicator cannot be used again", what, c->rank);
	return 0;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void req_free(struct lmt_comm *c, struct lmt_comm_req *q)
{
	struct state *s = c->priv;
	for (int i = 0; i < q->nstaged; i++)
		(void)cudaFreeAsync(q->st[i].dev, s->stream);
	if (q->has_ev)
		(void)cudaEventDestroy(q->ev);
	free(q);
}

static struct lmt_comm_req *req_new(struct lmt_comm *c, const char *what, struct lmt_err *err)
{
	if (check_usable(c, what, err))
		return NULL;
	struct lmt_comm_req *q = calloc(1, sizeof *q);
	if (!q) {
		lmt_err_set(err, LMT_ENOMEM, "nccl: out of memory");
		return NULL;
	}
	snprintf(q->what, sizeof q->what, "%s", what);
	cudaError_t e = cudaEventCreateWithFlags(&q->ev, cudaEventDisableTiming);
	if (e != cudaSuccess) {
		cuda_fail(err, e, what);
		free(q);
		return NULL;
	}
	q->has_ev = 1;
	return q;
}

/* *dev: p when it is device memory, else a device copy of its bytes (copied in
 * when in), copied back to p by wait when out */
static int stage(struct lmt_comm *c, struct lmt_comm_req *q, const void *p, size_t bytes, int in, int out, void **dev,
		 struct lmt_err *err)
{
	struct state *s = c->priv;
	*dev = (void *)p;
	if (!bytes || !lmt_cudart_is_host(p))
		return 0;
	struct staged *g = &q->st[q->nstaged];
	cudaError_t e = cudaMallocAsync(&g->dev, bytes, s->stream);
	if (e != cudaSuccess)
		return cuda_fail(err, e, q->what);
	q->nstaged++;
	g->bytes = bytes;
	g->host = out ? (void *)p : NULL;
	if (in && (e = cudaMemcpyAsync(g->dev, p, bytes, cudaMemcpyHostToDevice, s->stream)) != cudaSuccess)
		return cuda_fail(err, e, q->what);
	*dev = g->dev;
	return 0;
}

/* every communicator of the process is given up with this one */
static void abort_comm(struct lmt_comm *c)
{
	struct state *s = c->priv;
	broken = 1;
	if (!s->aborted)
		(void)ncclCommAbort(s->comm);
	s->aborted = 1;
}

/* Poll q's event until done, an asynchronous NCCL error, or c->timeout_s. */
static int complete(struct lmt_comm *c, struct lmt_comm_req *q, struct lmt_err *err)
{
	struct state *s = c->priv;
	double deadline = now_s() + c->timeout_s;
	for (unsigned spin = 0;; spin++) {
		cudaError_t e = cudaEventQuery(q->ev);
		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady) {
			abort_comm(c);
			return cuda_fail(err, e, q->what);
		}
		ncclResult_t a = ncclSuccess;
		if (ncclCommGetAsyncError(s->comm, &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress) {
			int rc = nccl_fail(c, err, a, q->what);
			abort_comm(c);
			return rc;
		}
		if (c->timeout_s > 0 && now_s() > deadline)
			break;
		if (spin > 1000) { /* a short spin for the quick collectives, then give the core away */
			struct timespec ts = { 0, spin > 100000 ? 1000000 : 20000 };
			nanosleep(&ts, NULL);
		}
	}
	abort_comm(c);
	return lmt_err_set(err, LMT_EIO, "nccl: %s timed out after %g s on rank %d of %d: a peer may have died or be "
			   "stuck; the communicator cannot be used again", q->what, c->timeout_s, c->rank, c->world);
}

static int nccl_wait(struct lmt_comm *c, struct lmt_comm_req *q, struct lmt_err *err)
{
	if (!q)
		return 0;
	int rc = check_usable(c, q->what, err);
	if (rc || (rc = complete(c, q, err)))
		return rc; /* q's buffers may still be NCCL's: leave them to the process */
	for (int i = 0; i < q->nstaged && !rc; i++)
		if (q->st[i].host) {
			struct state *s = c->priv;
			cudaError_t e = cudaMemcpyAsync(q->st[i].host, q->st[i].dev, q->st[i].bytes, cudaMemcpyDeviceToHost,
							s->stream);
			if (e == cudaSuccess)
				e = cudaStreamSynchronize(s->stream);
			if (e != cudaSuccess)
				rc = cuda_fail(err, e, q->what);
		}
	req_free(c, q);
	return rc;
}

/* the end of a start: record q's event (*out = q), or fail and free q after the
 * stream has finished with its buffers */
static int started(struct lmt_comm *c, struct lmt_comm_req *q, int rc, struct lmt_comm_req **out, struct lmt_err *err)
{
	struct state *s = c->priv;
	cudaError_t e;
	if (!rc && (e = cudaEventRecord(q->ev, s->stream)) != cudaSuccess)
		rc = cuda_fail(err, e, q->what);
	if (!rc) {
		*out = q;
		return 0;
	}
	(void)cudaStreamSynchronize(s->stream);
	req_free(c, q);
	return rc;
}

static int issued(struct lmt_comm *c, ncclResult_t r, const char *what, struct lmt_err *err)
{
	return r == ncclSuccess ? 0 : nccl_fail(c, err, r, what);
}

/* the three reductions' NCCL calls, from in (all elements) to res (n elements) */
enum { ALLREDUCE, REDUCE_SCATTER, REDUCE_SCATTERV };

static ncclResult_t issue(struct lmt_comm *c, int kind, const void *in, void *res, size_t n, const size_t *counts,
			  ncclDataType_t t, size_t tsize, ncclRedOp_t op)
{
	struct state *s = c->priv;
	if (kind == ALLREDUCE)
		return ncclAllReduce(in, res, n, t, op, s->comm, s->stream);
	if (kind == REDUCE_SCATTER)
		return ncclReduceScatter(in, res, n, t, op, s->comm, s->stream);
	ncclResult_t r = ncclGroupStart(), r2;
	size_t at = 0;
	for (int k = 0; k < c->world && r == ncclSuccess; k++) {
		const char *part = (const char *)in + at * tsize;
		if (counts[k] > 0)
			r = ncclReduce(part, k == c->rank ? res : (void *)part, counts[k], t, op, k, s->comm, s->stream);
		at += counts[k];
	}
	r2 = ncclGroupEnd();
	return r != ncclSuccess ? r : r2;
}

/* enqueue the reduction of send (all elements) into recv (n elements): staged,
 * and through fp32 for bf16, fp16 and uint8 */
static int reduce_on_stream(struct lmt_comm *c, struct lmt_comm_req *q, int kind, const void *send, void *recv,
			    size_t all, size_t n, const size_t *counts, int dtype, int op, struct lmt_err *err)
{
	struct state *s = c->priv;
	int via_f32, inplace = send == recv, rc;
	ncclDataType_t t = (ncclDataType_t)lmt_nccl_dtype(dtype, &via_f32);
	size_t ds = lmt_dtype_size(dtype);
	void *din, *dres;
	if ((rc = stage(c, q, send, all * ds, 1, inplace, &din, err)))
		return rc;
	dres = din;
	if (!inplace && (rc = stage(c, q, recv, n * ds, 0, 1, &dres, err)))
		return rc;
	void *tmp = NULL, *res = dres;
	cudaError_t e = cudaSuccess;
	if (via_f32) {
		size_t at = kind == ALLREDUCE ? 0 : all; /* the fp32 result: in place (n == all), or after the input */
		if ((e = cudaMallocAsync(&tmp, (at + n) * sizeof(float) + 1, s->stream)) != cudaSuccess)
			return cuda_fail(err, e, q->what);
		float *f = tmp;
		if ((e = (cudaError_t)lmt_cuda_to_f32(f, din, all, dtype, s->stream)) == cudaSuccess &&
		    !(rc = issued(c, issue(c, kind, f, f + at, n, counts, ncclFloat32, sizeof(float),
					   op == LMT_COMM_OP_MAX ? ncclMax : ncclSum), q->what, err)))
			e = (cudaError_t)lmt_cuda_from_f32(dres, f + at, n, dtype,
							   op == LMT_COMM_OP_AVG ? (float)c->world : 1.0f, s->stream);
	} else {
		/* reduce-scatter with send == recv: NCCL's in place is recv = send + rank * n */
		if (inplace && kind != ALLREDUCE) {
			if ((e = cudaMallocAsync(&tmp, n * ds + 1, s->stream)) != cudaSuccess)
				return cuda_fail(err, e, q->what);
			res = tmp;
		}
		rc = issued(c, issue(c, kind, din, res, n, counts, t, ds, (ncclRedOp_t)lmt_nccl_op(op)), q->what, err);
		if (!rc && res != dres)
			e = cudaMemcpyAsync(dres, res, n * ds, cudaMemcpyDeviceToDevice, s->stream);
	}
	if (tmp)
		(void)cudaFreeAsync(tmp, s->stream);
	if (!rc && e != cudaSuccess)
		rc = cuda_fail(err, e, q->what);
	return rc;
}

static int reduce_start(struct lmt_comm *c, const char *verb, int kind, const void *send, void *recv, size_t all,
			size_t n, const size_t *counts, int dtype, int op, struct lmt_comm_req **out,
			struct lmt_err *err)
{
	int rc;
	char what[96];
	*out = NULL;
	if ((rc = lmt_comm_check_reduce(verb, dtype, op, err)))
		return rc;
	snprintf(what, sizeof what, "%s (%s, %zu %s element%s)", verb, lmt_comm_op_name(op), n, lmt_dtype_name(dtype),
		 n == 1 ? "" : "s");
	struct lmt_comm_req *q = req_new(c, what, err);
	if (!q)
		return err->code ? err->code : LMT_EIO;
	rc = reduce_on_stream(c, q, kind, send, recv, all, n, counts, dtype, op, err);
	return started(c, q, rc, out, err);
}

static int nccl_allreduce_start(struct lmt_comm *c, void *buf, size_t n, int dtype, int op, struct lmt_comm_req **out,
				struct lmt_err *err)
{
	return reduce_start(c, "all-reduce", ALLREDUCE, buf, buf, n, n, NULL, dtype, op, out, err);
}

/* a started operation's rc, then its wait */
static int finish(struct lmt_comm *c, int rc, struct lmt_comm_req *q, struct lmt_err *err)
{
	return rc ? rc : nccl_wait(c, q, err);
}

static int nccl_allreduce(struct lmt_comm *c, void *buf, size_t n, int dtype, int op, struct lmt_err *err)
{
	struct lmt_comm_req *q;
	int rc = nccl_allreduce_start(c, buf, n, dtype, op, &q, err);
	return finish(c, rc, q, err);
}

static int nccl_allreduce_sum(struct lmt_comm *c, void *buf, size_t n, int dtype, struct lmt_err *err)
{
	return nccl_allreduce(c, buf, n, dtype, LMT_COMM_OP_SUM, err);
}

static int nccl_reduce_scatter(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype, int op,
			       struct lmt_err *err)
{
	struct lmt_comm_req *q;
	int rc = reduce_start(c, "reduce-scatter", REDUCE_SCATTER, send, recv, n * (size_t)c->world, n, NULL, dtype,
			      op, &q, err);
	return finish(c, rc, q, err);
}

static int nccl_reduce_scatter_sum(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype,
				   struct lmt_err *err)
{
	return nccl_reduce_scatter(c, send, recv, n, dtype, LMT_COMM_OP_SUM, err);
}

static int nccl_reduce_scatterv_start(struct lmt_comm *c, const void *send, void *recv, const size_t *counts,
				      int dtype, int op, struct lmt_comm_req **out, struct lmt_err *err)
{
	size_t all = 0;
	for (int r = 0; r < c->world; r++)
		all += counts[r];
	return reduce_start(c, "reduce-scatter", REDUCE_SCATTERV, send, recv, all, counts[c->rank], counts, dtype, op,
			    out, err);
}

/* grouped broadcasts from each part's owner: rank r's bytes[r] at offset off[r] */
static int gather_parts(struct lmt_comm *c, struct lmt_comm_req *q, const void *send, void *recv, const size_t *bytes,
			size_t total, struct lmt_err *err)
{
	struct state *s = c->priv;
	void *din, *dout;
	int rc;
	if ((rc = stage(c, q, send, bytes[c->rank], 1, 0, &din, err)) || (rc = stage(c, q, recv, total, 0, 1, &dout, err)))
		return rc;
	ncclResult_t r = ncclGroupStart(), r2;
	size_t at = 0;
	for (int k = 0; k < c->world && r == ncclSuccess; k++) {
		char *part = (char *)dout + at;
		if (bytes[k] > 0)
			r = ncclBroadcast(k == c->rank ? din : part, part, bytes[k], ncclUint8, k, s->comm, s->stream);
		at += bytes[k];
	}
	r2 = ncclGroupEnd();
	return issued(c, r != ncclSuccess ? r : r2, q->what, err);
}

static int nccl_allgatherv_start(struct lmt_comm *c, const void *send, void *recv, const size_t *counts, int dtype,
				 struct lmt_comm_req **out, struct lmt_err *err)
{
	size_t ds = lmt_dtype_size(dtype), total = 0;
	char what[96];
	*out = NULL;
	if (!ds)
		return lmt_err_set(err, LMT_EINVAL, "all-gather: unknown dtype %d", dtype);
	size_t *bytes = malloc((size_t)c->world * sizeof *bytes);
	if (!bytes)
		return lmt_err_set(err, LMT_ENOMEM, "nccl: out of memory");
	for (int r = 0; r < c->world; r++)
		total += bytes[r] = counts[r] * ds;
	snprintf(what, sizeof what, "all-gather (%zu %s element%s from rank %d)", counts[c->rank],
		 lmt_dtype_name(dtype), counts[c->rank] == 1 ? "" : "s", c->rank);
	struct lmt_comm_req *q = req_new(c, what, err);
	int rc = q ? started(c, q, gather_parts(c, q, send, recv, bytes, total, err), out, err) : err->code;
	free(bytes);
	return rc;
}

static int nccl_allgather(struct lmt_comm *c, const void *send, void *recv, size_t bytes, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	snprintf(what, sizeof what, "all-gather of %zu bytes", bytes);
	struct lmt_comm_req *q = req_new(c, what, err);
	if (!q)
		return err->code;
	void *din, *dout;
	int rc;
	if (!(rc = stage(c, q, send, bytes, 1, 0, &din, err)) &&
	    !(rc = stage(c, q, recv, bytes * (size_t)c->world, 0, 1, &dout, err)))
		rc = issued(c, ncclAllGather(din, dout, bytes, ncclUint8, s->comm, s->stream), what, err);
	rc = started(c, q, rc, &q, err);
	return finish(c, rc, q, err);
}

static int nccl_broadcast(struct lmt_comm *c, void *buf, size_t bytes, int root, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	snprintf(what, sizeof what, "broadcast of %zu bytes from rank %d", bytes, root);
	if (root < 0 || root >= c->world)
		return lmt_err_set(err, LMT_EINVAL, "nccl: broadcast from rank %d in a world of %d", root, c->world);
	struct lmt_comm_req *q = req_new(c, what, err);
	if (!q)
		return err->code;
	void *d;
	int rc = stage(c, q, buf, bytes, 1, 1, &d, err);
	if (!rc)
		rc = issued(c, ncclBroadcast(d, d, bytes, ncclUint8, root, s->comm, s->stream), what, err);
	rc = started(c, q, rc, &q, err);
	return finish(c, rc, q, err);
}

/* an all-reduce of one element, staged from the host */
static int nccl_barrier(struct lmt_comm *c, struct lmt_err *err)
{
	int32_t one = 1;
	struct lmt_comm_req *q;
	int rc = reduce_start(c, "barrier", ALLREDUCE, &one, &one, 1, 1, NULL, LMT_DTYPE_I32, LMT_COMM_OP_SUM, &q, err);
	return finish(c, rc, q, err);
}

/* send (to) or receive (from): bytes with one peer */
static int transfer(struct lmt_comm *c, const char *verb, void *buf, size_t bytes, int peer, int sending,
		    struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	snprintf(what, sizeof what, "%s of %zu bytes %s rank %d", verb, bytes, sending ? "to" : "from", peer);
	if (peer < 0 || peer >= c->world || peer == c->rank)
		return lmt_err_set(err, LMT_EINVAL, "nccl: %s on rank %d in a world of %d", what, c->rank, c->world);
	struct lmt_comm_req *q = req_new(c, what, err);
	if (!q)
		return err->code;
	void *d;
	int rc = stage(c, q, buf, bytes, sending, !sending, &d, err);
	if (!rc)
		rc = issued(c, sending ? ncclSend(d, bytes, ncclUint8, peer, s->comm, s->stream) :
			    ncclRecv(d, bytes, ncclUint8, peer, s->comm, s->stream), what, err);
	rc = started(c, q, rc, &q, err);
	return finish(c, rc, q, err);
}

static int nccl_send(struct lmt_comm *c, const void *buf, size_t bytes, int peer, struct lmt_err *err)
{
	return transfer(c, "send", (void *)buf, bytes, peer, 1, err);
}

static int nccl_recv(struct lmt_comm *c, void *buf, size_t bytes, int peer, struct lmt_err *err)
{
	return transfer(c, "receive", buf, bytes, peer, 0, err);
}

static void nccl_release(struct lmt_comm *c)
{
	struct state *s = c->priv;
	if (!s)
		return;
	/* failures here leave nothing to do but go on exiting */
	if (broken) {
		if (!s->aborted)
			(void)ncclCommAbort(s->comm);
	} else {
		(void)cudaStreamSynchronize(s->stream);
		if (s->comm)
			(void)ncclCommDestroy(s->comm);
		(void)cudaStreamDestroy(s->stream);
	}
	if (s->has_pmix)
		lmt_pmix_release(&s->pmix);
	free(s);
	c->priv = NULL;
}

static int nccl_split(struct lmt_comm *c, int color, int key, struct lmt_comm *out, struct lmt_err *err);

/* c's table, stream and sizes for s->comm (which c then owns) */
static int fill(struct lmt_comm *c, struct state *s, double timeout_s, struct lmt_err *err)
{
	memset(c, 0, sizeof *c);
	c->name = "nccl";
	c->priv = s;
	c->timeout_s = timeout_s;
	c->allreduce_sum = nccl_allreduce_sum;
	c->reduce_scatter_sum = nccl_reduce_scatter_sum;
	c->allgather = nccl_allgather;
	c->broadcast = nccl_broadcast;
	c->barrier = nccl_barrier;
	c->send = nccl_send;
	c->recv = nccl_recv;
	c->release = nccl_release;
	c->allreduce = nccl_allreduce;
	c->reduce_scatter = nccl_reduce_scatter;
	c->allreduce_start = nccl_allreduce_start;
	c->wait = nccl_wait;
	c->split = nccl_split;
	c->reduce_scatterv_start = nccl_reduce_scatterv_start;
	c->allgatherv_start = nccl_allgatherv_start;
	ncclResult_t r;
	cudaError_t e = cudaStreamCreate(&s->stream);
	if (e != cudaSuccess) {
		int rc = cuda_fail(err, e, "create the stream");
		nccl_release(c);
		return rc;
	}
	if ((r = ncclCommUserRank(s->comm, &c->rank)) != ncclSuccess || (r = ncclCommCount(s->comm, &c->world)) != ncclSuccess) {
		int rc = nccl_fail(c, err, r, "the group's ranks");
		nccl_release(c);
		return rc;
	}
	return 0;
}

/* FNV-1a of the host's name: ranks with the same one share a node */
static uint64_t node_id(void)
{
	char h[256] = { 0 };
	(void)gethostname(h, sizeof h - 1);
	uint64_t x = 1469598103934665603ull;
	for (const char *p = h; *p; p++)
		x = (x ^ (unsigned char)*p) * 1099511628211ull;
	return x;
}

/* local_rank and local_world of a split group: its ranks' node ids gathered */
static int find_local(struct lmt_comm *c, struct lmt_err *err)
{
	uint64_t me = node_id(), *all = malloc((size_t)c->world * sizeof *all);
	if (!all)
		return lmt_err_set(err, LMT_ENOMEM, "nccl: out of memory");
	int rc = c->allgather(c, &me, all, sizeof me, err);
	c->local_rank = 0, c->local_world = 0;
	for (int r = 0; !rc && r < c->world; r++)
		if (all[r] == me)
			c->local_rank += r < c->rank, c->local_world++;
	free(all);
	return rc;
}

static int nccl_split(struct lmt_comm *c, int color, int key, struct lmt_comm *out, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	snprintf(what, sizeof what, "split (color %d, key %d)", color, key);
	int rc;
	if (color < 0)
		return lmt_err_set(err, LMT_EINVAL, "nccl: split: color %d, expected 0 or more", color);
	if ((rc = check_usable(c, what, err)))
		return rc;
	struct state *t = calloc(1, sizeof *t);
	if (!t)
		return lmt_err_set(err, LMT_ENOMEM, "nccl: out of memory");
	/* NCCL orders equal keys by the rank in c, as comm.h says */
	ncclResult_t r = ncclCommSplit(s->comm, color, key, &t->comm, NULL);
	if (r != ncclSuccess) {
		free(t);
		return nccl_fail(c, err, r, what);
	}
	if ((rc = fill(out, t, c->timeout_s, err)))
		return rc;
	if ((rc = find_local(out, err)))
		nccl_release(out);
	return rc;
}

/* the unique id from rank 0, through PMIx (a fresh key for each communicator) */
static int exchange_id(struct lmt_pmix *p, ncclUniqueId *id, struct lmt_err *err)
{
	char key[64];
	snprintf(key, sizeof key, "lmt.nccl.id.%d", id_seq++);
	ncclResult_t r;
	if (p->rank == 0 && (r = ncclGetUniqueId(id)) != ncclSuccess)
		return lmt_err_set(err, LMT_EIO, "nccl: unique id: %s", ncclGetErrorString(r));
	int rc;
	if ((p->rank == 0 && (rc = lmt_pmix_put(p, key, id, sizeof *id, err))) || (rc = lmt_pmix_commit(p, err)) ||
	    (rc = lmt_pmix_fence(p, 1, err)) || (rc = lmt_pmix_get(p, 0, key, id, sizeof *id, err)))
		return rc;
	return 0;
}

int lmt_comm_nccl_init(struct lmt_comm *c, struct lmt_err *err)
{
	int ndev, rc;
	if ((rc = lmt_cudart_devices(&ndev, err))) {
		char why[sizeof err->msg];
		snprintf(why, sizeof why, "%s", err->msg);
		return lmt_err_set(err, rc, "nccl: %s: it needs one GPU for each rank", why);
	}
	struct state *s = calloc(1, sizeof *s);
	if (!s)
		return lmt_err_set(err, LMT_ENOMEM, "nccl: out of memory");
	/* without a server, no PMIx_Init at all (pmix.h: Open MPI's singleton start) */
	if (lmt_pmix_env()) {
		if ((rc = lmt_pmix_init(&s->pmix, err))) {
			free(s);
			return rc;
		}
		s->has_pmix = 1;
	} else {
		s->pmix.rank = 0, s->pmix.size = 1, s->pmix.local_rank = 0, s->pmix.local_size = 1;
	}
	ncclUniqueId id;
	ncclResult_t r = ncclSuccess;
	rc = lmt_cudart_set_device(s->pmix.local_rank % ndev, err);
	if (!rc && s->has_pmix)
		rc = exchange_id(&s->pmix, &id, err);
	else if (!rc && (r = ncclGetUniqueId(&id)) != ncclSuccess)
		rc = lmt_err_set(err, LMT_EIO, "nccl: unique id: %s", ncclGetErrorString(r));
	if (!rc && (r = ncclCommInitRank(&s->comm, s->pmix.size, id, s->pmix.rank)) != ncclSuccess)
		rc = lmt_err_set(err, LMT_EIO, "nccl: init rank %d of %d: %s", s->pmix.rank, s->pmix.size,
				 ncclGetErrorString(r));
	if (rc) {
		if (s->has_pmix)
			lmt_pmix_release(&s->pmix);
		free(s);
		return rc;
	}
	int local_rank = s->pmix.local_rank, local_world = s->pmix.local_size;
	if ((rc = fill(c, s, 0, err)))
		return rc;
	c->local_rank = local_rank, c->local_world = local_world;
	return 0;
}

#endif /* LMT_HAVE_NCCL */
