/*
 * mpi.c: the mpi communicator, host buffers over Open MPI.
 *
 * Every operation is started non-blocking (MPI_Iallreduce, MPI_Ibcast, MPI_Isend,
 * ...) and completed by one wait, so the blocking calls, allreduce_start/wait and
 * the timeout share one path: with a timeout the wait polls MPI_Test against a
 * deadline instead of blocking in MPI_Wait, and a peer that died or hangs becomes
 * an error naming the operation rather than a job that never ends. After a timeout
 * the pending MPI request can be neither freed nor cancelled (MPI-3.1, 5.12), so
 * the communicator is marked broken, its buffers are left to the process, and MPI
 * is not finalized (MPI_Finalize would wait for the lost peer).
 *
 * MPI has no bf16 or fp16: their reductions copy into an fp32 buffer, reduce that
 * with MPI_FLOAT and round back once (core/dtype.h's conversions), which costs
 * 4 bytes an element for the call's life but sums in fp32 whatever the
 * reduction tree, as the nccl communicator's fp32-accumulating reductions will.
 *
 * Each communicator works on its own duplicate of MPI_COMM_WORLD (or a split of
 * one), with MPI_ERRORS_RETURN, so that every MPI return code reaches here and
 * becomes a message (MPI_Error_string). MPI is initialised (MPI_THREAD_FUNNELED:
 * only the thread that opened it calls MPI) by the first open and finalized when
 * the last communicator is released.
 */
#include "comm/comm.h"
#include "comm/impl.h"

#ifdef LMT_HAVE_MPI /* the whole file: a build without Open MPI has no mpi communicator */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

struct state {
	MPI_Comm comm;
};

struct lmt_comm_req {
	MPI_Request r;
	void *buf;          /* the caller's result buffer */
	float *tmp;         /* bf16/fp16: the fp32 copy MPI reduces (result first) */
	size_t n;           /* elements of the result */
	int dtype, op;
	int *counts;        /* the uneven collectives: world counts, then world displacements */
	char what[96];      /* "all-reduce (sum, 3 bf16 elements)", for messages */
};

static int opened;        /* communicators open in this process */
static int we_initialized; /* MPI_Init_thread was ours, so MPI_Finalize is too */
static int broken;        /* a wait timed out: no MPI call is safe any more */

static int mpi_fail(struct lmt_err *err, int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;
	if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof s, "error %d", rc);
	return lmt_err_set(err, LMT_EIO, "mpi: %s: %s", what, s);
}

static int check_usable(struct lmt_comm *c, const char *what, struct lmt_err *err)
{
	if (broken)
		return lmt_err_set(err, LMT_EIO, "mpi: %s on rank %d: an earlier operation timed out, the communicator "
				   "cannot be used again", what, c->rank);
	return 0;
}

static int check_count(const char *what, size_t n, const char *unit, struct lmt_err *err)
{
	if (n > INT_MAX)
		return lmt_err_set(err, LMT_ERANGE, "mpi: %s of %zu %s: more than MPI's int count (%d)", what, n, unit,
				   INT_MAX);
	return 0;
}

static MPI_Datatype mpi_type(int dtype)
{
	switch (dtype) {
	case LMT_DTYPE_F32: return MPI_FLOAT;
	case LMT_DTYPE_F64: return MPI_DOUBLE;
	case LMT_DTYPE_I32: return MPI_INT32_T;
	case LMT_DTYPE_I64: return MPI_INT64_T;
	default: return MPI_FLOAT; /* bf16, fp16, uint8: reduced as fp32 copies */
	}
}

/* The dtypes reduced through an fp32 copy: bf16 and fp16 (MPI has no such types),
 * and uint8, whose sums Open MPI 4.1 saturates at 255 on longer buffers (its
 * vectorised op) where comm.h promises they wrap; fp32 holds every uint8 sum of up
 * to 2^16 ranks exactly. */
static int is_half(int dtype)
{
	return dtype == LMT_DTYPE_BF16 || dtype == LMT_DTYPE_F16 || dtype == LMT_DTYPE_U8;
}

static void half_to_f32(float *dst, const void *src, size_t n, int dtype)
{
	const uint16_t *h = src;
	if (dtype == LMT_DTYPE_U8)
		for (size_t i = 0; i < n; i++)
			dst[i] = (float)((const uint8_t *)src)[i];
	else if (dtype == LMT_DTYPE_BF16)
		for (size_t i = 0; i < n; i++)
			dst[i] = lmt_bf16_to_f32(h[i]);
	else
		for (size_t i = 0; i < n; i++)
			dst[i] = lmt_f16_to_f32(h[i]);
}

static void f32_to_half(void *dst, const float *src, size_t n, int dtype)
{
	uint16_t *h = dst;
	if (dtype == LMT_DTYPE_U8) /* the sum modulo 256; an average truncated toward zero */
		for (size_t i = 0; i < n; i++)
			((uint8_t *)dst)[i] = (uint8_t)(uint32_t)src[i];
	else if (dtype == LMT_DTYPE_BF16)
		for (size_t i = 0; i < n; i++)
			h[i] = lmt_f32_to_bf16(src[i]);
	else
		for (size_t i = 0; i < n; i++)
			h[i] = lmt_f32_to_f16(src[i]);
}

/* avg: the sum divided by the group's size, in the result's own type */
static void divide(void *buf, size_t n, int dtype, int by)
{
	switch (dtype) {
	case LMT_DTYPE_F32: case LMT_DTYPE_BF16: case LMT_DTYPE_F16:
		for (size_t i = 0; i < n; i++) ((float *)buf)[i] /= (float)by;
		break;
	case LMT_DTYPE_F64:
		for (size_t i = 0; i < n; i++) ((double *)buf)[i] /= by;
		break;
	case LMT_DTYPE_I32:
		for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] /= by;
		break;
	case LMT_DTYPE_I64:
		for (size_t i = 0; i < n; i++) ((int64_t *)buf)[i] /= by;
		break;
	case LMT_DTYPE_U8:
		for (size_t i = 0; i < n; i++) ((uint8_t *)buf)[i] /= (uint8_t)by;
		break;
	}
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Complete r: MPI_Wait, or MPI_Test until c->timeout_s has passed. */
static int complete(struct lmt_comm *c, MPI_Request *r, MPI_Status *st, const char *what, struct lmt_err *err)
{
	int rc;
	if (c->timeout_s <= 0) {
		if ((rc = MPI_Wait(r, st)) != MPI_SUCCESS)
			return mpi_fail(err, rc, what);
		return 0;
	}
	double deadline = now_s() + c->timeout_s;
	for (unsigned spin = 0;; spin++) {
		int done = 0;
		if ((rc = MPI_Test(r, &done, st)) != MPI_SUCCESS)
			return mpi_fail(err, rc, what);
		if (done)
			return 0;
		if (now_s() > deadline)
			break;
		/* a short spin for the quick collectives, then give the core away */
		if (spin > 1000) {
			struct timespec ts = { 0, spin > 100000 ? 1000000 : 20000 };
			nanosleep(&ts, NULL);
		}
	}
	broken = 1;
	return lmt_err_set(err, LMT_EIO, "mpi: %s timed out after %g s on rank %d of %d: a peer may have died or be "
			   "stuck; the communicator cannot be used again", what, c->timeout_s, c->rank, c->world);
}

static struct lmt_comm_req *req_new(struct lmt_err *err)
{
	struct lmt_comm_req *q = calloc(1, sizeof *q);
	if (!q)
		lmt_err_set(err, LMT_ENOMEM, "mpi: out of memory");
	else
		q->r = MPI_REQUEST_NULL;
	return q;
}

static void req_free(struct lmt_comm_req *q)
{
	free(q->tmp);
	free(q->counts);
	free(q);
}

/* Wait for q, then finish a reduction: round fp32 back to bf16/fp16, divide for avg. */
static int mpi_wait(struct lmt_comm *c, struct lmt_comm_req *q, struct lmt_err *err)
{
	if (!q)
		return 0;
	int rc = check_usable(c, q->what, err);
	if (rc)
		return rc; /* q's request is lost with the communicator: leave it */
	if ((rc = complete(c, &q->r, MPI_STATUS_IGNORE, q->what, err))) {
		if (!broken)
			req_free(q);
		return rc;
	}
	if (q->op == LMT_COMM_OP_AVG)
		divide(q->tmp ? (void *)q->tmp : q->buf, q->n, q->tmp ? LMT_DTYPE_F32 : q->dtype, c->world);
	if (q->tmp)
		f32_to_half(q->buf, q->tmp, q->n, q->dtype);
	req_free(q);
	return 0;
}

static MPI_Op mpi_op(int op)
{
	return op == LMT_COMM_OP_MAX ? MPI_MAX : MPI_SUM;
}

/*
 * *out: a reduction's request, checked and named (verb: "all-reduce"), for a
 * result of n elements at buf from count input elements at in. bf16/fp16 get an
 * fp32 copy, q->tmp: with apart (reduce-scatter) the result's n elements, then
 * the input's count; without (all-reduce, in place) the input, which becomes
 * the result.
 */
static int reduction(struct lmt_comm *c, const char *verb, void *buf, const void *in, size_t n, size_t count,
		     int apart, int dtype, int op, struct lmt_comm_req **out, struct lmt_err *err)
{
	int rc;
	*out = NULL;
	if ((rc = lmt_comm_check_reduce(verb, dtype, op, err)) || (rc = check_usable(c, verb, err)) ||
	    (rc = check_count(verb, count, "elements", err)))
		return rc;
	struct lmt_comm_req *q = req_new(err);
	if (!q)
		return LMT_ENOMEM;
	q->buf = buf, q->n = n, q->dtype = dtype, q->op = op;
	snprintf(q->what, sizeof q->what, "%s (%s, %zu %s element%s)", verb, lmt_comm_op_name(op), n,
		 lmt_dtype_name(dtype), n == 1 ? "" : "s");
	if (is_half(dtype)) {
		size_t at = apart ? n : 0;
		if (!(q->tmp = malloc((at + count) * sizeof(float) + 1))) {
			rc = lmt_err_set(err, LMT_ENOMEM, "mpi: %s: no memory for the fp32 copy", q->what);
			req_free(q);
			return rc;
		}
		half_to_f32(q->tmp + at, in, count, dtype);
	}
	*out = q;
	return 0;
}

/* after MPI's start call: its failure frees q */
static int started(int rc, struct lmt_comm_req *q, struct lmt_err *err)
{
	if (rc == MPI_SUCCESS)
		return 0;
	rc = mpi_fail(err, rc, q->what);
	req_free(q);
	return rc;
}

static int mpi_allreduce_start(struct lmt_comm *c, void *buf, size_t n, int dtype, int op, struct lmt_comm_req **out,
			       struct lmt_err *err)
{
	struct state *s = c->priv;
	struct lmt_comm_req *q;
	int rc = reduction(c, "all-reduce", buf, buf, n, n, 0, dtype, op, &q, err);
	*out = NULL;
	if (rc)
		return rc;
	void *data = q->tmp ? (void *)q->tmp : buf;
	rc = started(MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, mpi_type(dtype), mpi_op(op), s->comm, &q->r), q, err);
	if (!rc)
		*out = q;
	return rc;
}

static int mpi_allreduce(struct lmt_comm *c, void *buf, size_t n, int dtype, int op, struct lmt_err *err)
{
	struct lmt_comm_req *q;
	int rc = mpi_allreduce_start(c, buf, n, dtype, op, &q, err);
	return rc ? rc : mpi_wait(c, q, err);
}

static int mpi_allreduce_sum(struct lmt_comm *c, void *buf, size_t n, int dtype, struct lmt_err *err)
{
	return mpi_allreduce(c, buf, n, dtype, LMT_COMM_OP_SUM, err);
}

static int mpi_reduce_scatter(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype, int op,
			      struct lmt_err *err)
{
	struct state *s = c->priv;
	struct lmt_comm_req *q;
	size_t all = n * (size_t)c->world;
	int rc = reduction(c, "reduce-scatter", recv, send, n, all, 1, dtype, op, &q, err);
	if (rc)
		return rc;
	/* MPI_IN_PLACE: the input is recv (world * n), the result its front */
	const void *in = q->tmp ? (const void *)(q->tmp + n) : send == recv ? MPI_IN_PLACE : send;
	void *res = q->tmp ? (void *)q->tmp : recv;
	rc = started(MPI_Ireduce_scatter_block(in, res, (int)n, mpi_type(dtype), mpi_op(op), s->comm, &q->r), q,
			 err);
	return rc ? rc : mpi_wait(c, q, err);
}

/* q->counts: MPI's int counts and displacements of counts (times unit), checked */
static int uneven_counts(struct lmt_comm *c, struct lmt_comm_req *q, const size_t *counts, size_t unit, size_t *sum,
			 struct lmt_err *err)
{
	size_t W = (size_t)c->world, at = 0;
	if (!(q->counts = malloc(2 * W * sizeof *q->counts)))
		return lmt_err_set(err, LMT_ENOMEM, "mpi: %s: out of memory", q->what);
	for (size_t r = 0; r < W; r++) {
		int rc = check_count(q->what, at + counts[r] * unit, unit == 1 ? "elements" : "bytes", err);
		if (rc)
			return rc;
		q->counts[r] = (int)(counts[r] * unit);
		q->counts[W + r] = (int)at;
		at += counts[r] * unit;
	}
	*sum = at / unit;
	return 0;
}

static int mpi_reduce_scatterv_start(struct lmt_comm *c, const void *send, void *recv, const size_t *counts,
				     int dtype, int op, struct lmt_comm_req **out, struct lmt_err *err)
{
	struct state *s = c->priv;
	struct lmt_comm_req *q;
	size_t all = 0;
	*out = NULL;
	for (int r = 0; r < c->world; r++)
		all += counts[r];
	int rc = reduction(c, "reduce-scatter", recv, send, counts[c->rank], all, 1, dtype, op, &q, err);
	if (rc)
		return rc;
	size_t sum;
	if ((rc = uneven_counts(c, q, counts, 1, &sum, err))) {
		req_free(q);
		return rc;
	}
	const void *in = q->tmp ? (const void *)(q->tmp + q->n) : send;
	void *res = q->tmp ? (void *)q->tmp : recv;
	rc = started(MPI_Ireduce_scatter(in, res, q->counts, mpi_type(dtype), mpi_op(op), s->comm, &q->r), q, err);
	if (!rc)
		*out = q;
	return rc;
}

static int mpi_allgatherv_start(struct lmt_comm *c, const void *send, void *recv, const size_t *counts, int dtype,
				struct lmt_comm_req **out, struct lmt_err *err)
{
	struct state *s = c->priv;
	size_t ds = lmt_dtype_size(dtype), sum;
	int rc;
	*out = NULL;
	if (!ds)
		return lmt_err_set(err, LMT_EINVAL, "all-gather: unknown dtype %d", dtype);
	if ((rc = check_usable(c, "all-gather", err)))
		return rc;
	struct lmt_comm_req *q = req_new(err);
	if (!q)
		return LMT_ENOMEM;
	q->buf = recv, q->n = counts[c->rank], q->dtype = dtype, q->op = LMT_COMM_OP_SUM;
	snprintf(q->what, sizeof q->what, "all-gather (%zu %s element%s from rank %d)", q->n, lmt_dtype_name(dtype),
		 q->n == 1 ? "" : "s", c->rank);
	if ((rc = uneven_counts(c, q, counts, ds, &sum, err))) {
		req_free(q);
		return rc;
	}
	rc = started(MPI_Iallgatherv(send, q->counts[c->rank], MPI_BYTE, recv, q->counts, q->counts + c->world,
				     MPI_BYTE, s->comm, &q->r), q, err);
	if (!rc)
		*out = q;
	return rc;
}

static int mpi_reduce_scatter_sum(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype,
				  struct lmt_err *err)
{
	return mpi_reduce_scatter(c, send, recv, n, dtype, LMT_COMM_OP_SUM, err);
}

/* start (MPI's rc) then wait for one plain request */
static int finish(struct lmt_comm *c, int rc, MPI_Request *r, MPI_Status *st, const char *what, struct lmt_err *err)
{
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, what);
	return complete(c, r, st, what, err);
}

static int mpi_allgather(struct lmt_comm *c, const void *send, void *recv, size_t bytes, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	snprintf(what, sizeof what, "all-gather of %zu bytes", bytes);
	int rc;
	if ((rc = check_usable(c, what, err)) || (rc = check_count("all-gather", bytes * (size_t)c->world, "bytes", err)))
		return rc;
	const void *in = send == (const char *)recv + (size_t)c->rank * bytes ? MPI_IN_PLACE : send;
	MPI_Request r;
	rc = MPI_Iallgather(in, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, s->comm, &r);
	return finish(c, rc, &r, MPI_STATUS_IGNORE, what, err);
}

static int mpi_broadcast(struct lmt_comm *c, void *buf, size_t bytes, int root, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	snprintf(what, sizeof what, "broadcast of %zu bytes from rank %d", bytes, root);
	int rc;
	if (root < 0 || root >= c->world)
		return lmt_err_set(err, LMT_EINVAL, "mpi: broadcast from rank %d in a world of %d", root, c->world);
	if ((rc = check_usable(c, what, err)) || (rc = check_count("broadcast", bytes, "bytes", err)))
		return rc;
	MPI_Request r;
	rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, s->comm, &r);
	return finish(c, rc, &r, MPI_STATUS_IGNORE, what, err);
}

static int mpi_barrier(struct lmt_comm *c, struct lmt_err *err)
{
	struct state *s = c->priv;
	int rc = check_usable(c, "barrier", err);
	if (rc)
		return rc;
	MPI_Request r;
	rc = MPI_Ibarrier(s->comm, &r);
	return finish(c, rc, &r, MPI_STATUS_IGNORE, "barrier", err);
}

/* name the transfer in what ("send of 3 bytes to rank 1") and check it */
static int check_peer(struct lmt_comm *c, char what[64], const char *verb, const char *to, size_t bytes, int peer,
		      struct lmt_err *err)
{
	snprintf(what, 64, "%s of %zu bytes %s rank %d", verb, bytes, to, peer);
	if (peer < 0 || peer >= c->world || peer == c->rank)
		return lmt_err_set(err, LMT_EINVAL, "mpi: %s on rank %d in a world of %d", what, c->rank, c->world);
	int rc = check_usable(c, what, err);
	return rc ? rc : check_count(verb, bytes, "bytes", err);
}

static int mpi_send(struct lmt_comm *c, const void *buf, size_t bytes, int peer, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	int rc = check_peer(c, what, "send", "to", bytes, peer, err);
	if (rc)
		return rc;
	MPI_Request r;
	rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, 0, s->comm, &r);
	return finish(c, rc, &r, MPI_STATUS_IGNORE, what, err);
}

static int mpi_recv(struct lmt_comm *c, void *buf, size_t bytes, int peer, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	int rc = check_peer(c, what, "receive", "from", bytes, peer, err);
	if (rc)
		return rc;
	MPI_Request r;
	MPI_Status st;
	rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, 0, s->comm, &r);
	if ((rc = finish(c, rc, &r, &st, what, err)))
		return rc;
	int got = 0;
	if ((rc = MPI_Get_count(&st, MPI_BYTE, &got)) != MPI_SUCCESS)
		return mpi_fail(err, rc, what);
	if ((size_t)got != bytes)
		return lmt_err_set(err, LMT_EFORMAT, "mpi: %s: rank %d sent %d bytes", what, peer, got);
	return 0;
}

static void mpi_release(struct lmt_comm *c)
{
	struct state *s = c->priv;
	if (!s)
		return;
	/* a failure to free or finalize leaves nothing to do but go on exiting */
	if (!broken)
		(void)MPI_Comm_free(&s->comm);
	free(s);
	c->priv = NULL;
	if (--opened == 0 && we_initialized && !broken) {
		(void)MPI_Finalize();
		we_initialized = 0;
	}
}

static int mpi_split(struct lmt_comm *c, int color, int key, struct lmt_comm *out, struct lmt_err *err);

/* c's table and sizes for s->comm (which c then owns) */
static int fill(struct lmt_comm *c, struct state *s, double timeout_s, struct lmt_err *err)
{
	memset(c, 0, sizeof *c);
	c->name = "mpi";
	c->priv = s;
	c->timeout_s = timeout_s;
	opened++;
	c->allreduce_sum = mpi_allreduce_sum;
	c->reduce_scatter_sum = mpi_reduce_scatter_sum;
	c->allgather = mpi_allgather;
	c->broadcast = mpi_broadcast;
	c->barrier = mpi_barrier;
	c->send = mpi_send;
	c->recv = mpi_recv;
	c->release = mpi_release;
	c->allreduce = mpi_allreduce;
	c->reduce_scatter = mpi_reduce_scatter;
	c->allreduce_start = mpi_allreduce_start;
	c->wait = mpi_wait;
	c->split = mpi_split;
	c->reduce_scatterv_start = mpi_reduce_scatterv_start;
	c->allgatherv_start = mpi_allgatherv_start;
	int rc;
	MPI_Comm shm = MPI_COMM_NULL;
	if ((rc = MPI_Comm_rank(s->comm, &c->rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(s->comm, &c->world)) != MPI_SUCCESS ||
	    (rc = MPI_Comm_split_type(s->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm)) != MPI_SUCCESS ||
	    (rc = MPI_Comm_rank(shm, &c->local_rank)) != MPI_SUCCESS ||
	    (rc = MPI_Comm_size(shm, &c->local_world)) != MPI_SUCCESS) {
		rc = mpi_fail(err, rc, "the group's ranks");
		if (shm != MPI_COMM_NULL)
			(void)MPI_Comm_free(&shm);
		mpi_release(c);
		return rc;
	}
	if ((rc = MPI_Comm_free(&shm)) != MPI_SUCCESS) {
		rc = mpi_fail(err, rc, "free the node's group");
		mpi_release(c);
		return rc;
	}
	return 0;
}

static int mpi_split(struct lmt_comm *c, int color, int key, struct lmt_comm *out, struct lmt_err *err)
{
	struct state *s = c->priv;
	char what[64];
	snprintf(what, sizeof what, "split (color %d, key %d)", color, key);
	int rc;
	if (color < 0)
		return lmt_err_set(err, LMT_EINVAL, "mpi: split: color %d, expected 0 or more", color);
	if ((rc = check_usable(c, what, err)))
		return rc;
	struct state *t = calloc(1, sizeof *t);
	if (!t)
		return lmt_err_set(err, LMT_ENOMEM, "mpi: out of memory");
	if ((rc = MPI_Comm_split(s->comm, color, key, &t->comm)) != MPI_SUCCESS) {
		free(t);
		return mpi_fail(err, rc, what);
	}
	return fill(out, t, c->timeout_s, err);
}

int lmt_comm_mpi_init(struct lmt_comm *c, struct lmt_err *err)
{
	int rc, flag = 0, provided = 0;
	if ((rc = MPI_Finalized(&flag)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "finalized");
	if (flag)
		return lmt_err_set(err, LMT_EUNSUPPORTED, "mpi: already finalized in this process, it cannot start again");
	if ((rc = MPI_Initialized(&flag)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "initialized");
	if (!flag) {
		if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
			return mpi_fail(err, rc, "init");
		we_initialized = 1;
	} else if ((rc = MPI_Query_thread(&provided)) != MPI_SUCCESS) {
		return mpi_fail(err, rc, "query thread");
	}
	if (provided < MPI_THREAD_FUNNELED)
		return lmt_err_set(err, LMT_EUNSUPPORTED, "mpi: thread level %d, expected MPI_THREAD_FUNNELED (%d) or more",
				   provided, MPI_THREAD_FUNNELED);
	if ((rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "set the error handler");
	struct state *s = calloc(1, sizeof *s);
	if (!s)
		return lmt_err_set(err, LMT_ENOMEM, "mpi: out of memory");
	if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &s->comm)) != MPI_SUCCESS) {
		free(s);
		return mpi_fail(err, rc, "duplicate the world");
	}
	return fill(c, s, 0, err);
}

#endif /* LMT_HAVE_MPI */
