/*
 * bench.c: the nccl-tests cases over a communicator (bench.h).
 *
 * Element i of rank r's input in a world of n: a base of 1..P plus 2r, so the
 * sum over the ranks is n * (base + n - 1) and the average base + n - 1: small
 * non-negative integers, exact in every dtype (below 256, bf16's and uint8's
 * limit, while n <= 12; the fp32 sum of bf16/fp16 is rounded once, as the
 * expected value is). Nothing wraps: Open MPI 4.1's uint8 MPI_SUM saturates
 * on buffers of some tens of elements and more (its AVX path) where comm.h says
 * uint8 sums wrap, a fault of the mpi communicator to fix there. Reductions use
 * P = 7 to keep the sum small; the data movements P = 61, so that a block in the
 * wrong place shows. Receive buffers are filled with 0xa5 first, so an element
 * not written shows.
 */
#include "comm/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cudart.h"
#include "core/util.h"

const char *const lmt_bench_coll_names[LMT_BENCH_COLL_COUNT] = {
	"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv",
};

const struct lmt_bench_type lmt_bench_types[LMT_BENCH_NTYPES] = {
	{ "uint8", LMT_DTYPE_U8 }, { "int32", LMT_DTYPE_I32 }, { "int64", LMT_DTYPE_I64 },
	{ "half", LMT_DTYPE_F16 }, { "float", LMT_DTYPE_F32 }, { "double", LMT_DTYPE_F64 },
	{ "bfloat16", LMT_DTYPE_BF16 },
};

const char *lmt_bench_type_name(int dtype)
{
	for (int i = 0; i < LMT_BENCH_NTYPES; i++)
		if (lmt_bench_types[i].dtype == dtype)
			return lmt_bench_types[i].name;
	return "?";
}

double lmt_bench_bus_factor(int coll, int n)
{
	switch (coll) {
	case LMT_BENCH_ALL_REDUCE: return 2.0 * (n - 1) / n;
	case LMT_BENCH_ALL_GATHER:
	case LMT_BENCH_REDUCE_SCATTER:
	case LMT_BENCH_ALLTOALL: return (double)(n - 1) / n;
	}
	return 1;
}

int lmt_bench_is_reduction(int coll)
{
	return coll == LMT_BENCH_ALL_REDUCE || coll == LMT_BENCH_REDUCE_SCATTER;
}

void lmt_bench_case_size(struct lmt_bench_case *k, size_t bytes, int n)
{
	size_t count = bytes / lmt_dtype_size(k->dtype);
	k->per = k->coll == LMT_BENCH_ALL_REDUCE || k->coll == LMT_BENCH_BROADCAST || k->coll == LMT_BENCH_SENDRECV
			 ? count
			 : count / (size_t)n;
	k->count = k->per == count ? count : k->per * (size_t)n;
}

/* ---- the values: exact in every dtype ---- */

static void put(int dtype, void *buf, size_t i, double v)
{
	switch (dtype) {
	case LMT_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
	case LMT_DTYPE_F64: ((double *)buf)[i] = v; break;
	case LMT_DTYPE_BF16: ((uint16_t *)buf)[i] = lmt_f32_to_bf16((float)v); break;
	case LMT_DTYPE_F16: ((uint16_t *)buf)[i] = lmt_f32_to_f16((float)v); break;
	case LMT_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case LMT_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case LMT_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v; break; /* modulo 256 */
	}
}

static double get(int dtype, const void *buf, size_t i)
{
	switch (dtype) {
	case LMT_DTYPE_F32: return ((const float *)buf)[i];
	case LMT_DTYPE_F64: return ((const double *)buf)[i];
	case LMT_DTYPE_BF16: return lmt_bf16_to_f32(((const uint16_t *)buf)[i]);
	case LMT_DTYPE_F16: return lmt_f16_to_f32(((const uint16_t *)buf)[i]);
	case LMT_DTYPE_I32: return ((const int32_t *)buf)[i];
	case LMT_DTYPE_I64: return (double)((const int64_t *)buf)[i];
	case LMT_DTYPE_U8: return ((const uint8_t *)buf)[i];
	}
	return NAN;
}

/* element i of rank r's input (see above) */
static double value(int reduce, int r, size_t i)
{
	return (double)(i % (reduce ? 7 : 61) + 1) + 2.0 * r;
}

/* What the dtype holds for v, read back */
static double stored(int dtype, double v)
{
	unsigned char b[8];
	put(dtype, b, 0, v);
	return get(dtype, b, 0);
}

static int is_int(int dtype)
{
	return dtype == LMT_DTYPE_I32 || dtype == LMT_DTYPE_I64 || dtype == LMT_DTYPE_U8;
}

/* integer sums wrap as the dtype does, their average truncates (comm.h) */
double lmt_bench_expected_reduce(int dtype, int op, int n, size_t i)
{
	double acc = 0, mx = -INFINITY;
	for (int r = 0; r < n; r++) {
		double v = stored(dtype, value(1, r, i));
		acc += v;
		mx = v > mx ? v : mx;
	}
	if (op == LMT_COMM_OP_MAX)
		return mx;
	if (is_int(dtype)) {
		double s = stored(dtype, acc);
		return op == LMT_COMM_OP_AVG ? stored(dtype, (double)((int64_t)s / n)) : s;
	}
	return stored(dtype, op == LMT_COMM_OP_AVG ? acc / n : acc);
}

static void fill(int dtype, void *buf, size_t count, int reduce, int r, size_t from)
{
	for (size_t i = 0; i < count; i++)
		put(dtype, buf, i, value(reduce, r, from + i));
}

/* wrong elements among count at buf, against rank src's input from element from */
static uint64_t wrong_moved(int dtype, const void *buf, size_t count, int src, size_t from)
{
	uint64_t bad = 0;
	for (size_t i = 0; i < count; i++)
		bad += get(dtype, buf, i) != stored(dtype, value(0, src, from + i));
	return bad;
}

/* ---- the buffers ---- */

int lmt_bench_init(struct lmt_bench *b, struct lmt_comm *c, size_t cap, struct lmt_err *err)
{
	memset(b, 0, sizeof *b);
	b->c = c;
	b->cap = cap;
	b->hsend = malloc(cap);
	b->hrecv = malloc(cap);
	if (!b->hsend || !b->hrecv) {
		free(b->hsend);
		free(b->hrecv);
		b->hsend = b->hrecv = NULL;
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for two buffers of %zu bytes", cap);
	}
	b->send = b->hsend, b->recv = b->hrecv;
	b->device = !strcmp(c->name, "nccl");
#ifdef LMT_HAVE_CUDA
	void *s = NULL, *r = NULL;
	if (b->device) {
		int rc = lmt_cudart_alloc(&s, cap, err);
		if (!rc)
			rc = lmt_cudart_alloc(&r, cap, err);
		if (rc) {
			lmt_cudart_free(s);
			free(b->hsend);
			free(b->hrecv);
			b->hsend = b->hrecv = b->send = b->recv = NULL;
			b->device = 0;
			return rc;
		}
		b->send = s, b->recv = r;
	}
#endif
	return 0;
}

void lmt_bench_release(struct lmt_bench *b)
{
#ifdef LMT_HAVE_CUDA
	if (b->device) {
		lmt_cudart_free(b->send);
		lmt_cudart_free(b->recv);
	}
#endif
	free(b->hsend);
	free(b->hrecv);
	memset(b, 0, sizeof *b);
}

/* a copy between two of b's buffers, on the device or the host */
static int move(struct lmt_bench *b, void *dst, const void *src, size_t bytes, struct lmt_err *err)
{
#ifdef LMT_HAVE_CUDA
	if (b->device)
		return lmt_cudart_copy(dst, src, bytes, err);
#endif
	(void)err;
	memcpy(dst, src, bytes);
	return 0;
}

/* the first bytes of the host's buffers to the device's (up) or back; nothing
 * on the host */
static int sync_buffers(struct lmt_bench *b, int up, size_t bytes, struct lmt_err *err)
{
	if (!b->device)
		return 0;
	bytes = bytes < b->cap ? bytes : b->cap;
	int rc = move(b, up ? b->send : b->hsend, up ? b->hsend : b->send, bytes, err);
	return rc ? rc : move(b, up ? b->recv : b->hrecv, up ? b->hrecv : b->recv, bytes, err);
}

/* ---- the collectives ---- */

static int xfer(struct lmt_bench *b, int first_send, const void *out, void *in, size_t bytes, int to, int from,
		struct lmt_err *err)
{
	struct lmt_comm *c = b->c;
	int rc;
	if (to == c->rank) /* one rank: its message to itself */
		return move(b, in, out, bytes, err);
	if (first_send) {
		rc = c->send(c, out, bytes, to, err);
		return rc ? rc : c->recv(c, in, bytes, from, err);
	}
	rc = c->recv(c, in, bytes, from, err);
	return rc ? rc : c->send(c, out, bytes, to, err);
}

int lmt_bench_run(struct lmt_bench *b, const struct lmt_bench_case *k, struct lmt_err *err)
{
	struct lmt_comm *c = b->c;
	size_t ts = lmt_dtype_size(k->dtype), bytes = k->per * ts;
	int n = c->world, r = c->rank, rc = 0;
	switch (k->coll) {
	case LMT_BENCH_ALL_REDUCE: return c->allreduce(c, b->send, k->per, k->dtype, k->op, err);
	case LMT_BENCH_ALL_GATHER: return c->allgather(c, b->send, b->recv, bytes, err);
	case LMT_BENCH_REDUCE_SCATTER: return c->reduce_scatter(c, b->send, b->recv, k->per, k->dtype, k->op, err);
	case LMT_BENCH_BROADCAST: return c->broadcast(c, b->send, bytes, k->root, err);
	case LMT_BENCH_ALLTOALL:
		rc = move(b, b->recv + (size_t)r * bytes, b->send + (size_t)r * bytes, bytes, err);
		for (int a = 0; a < n && !rc; a++)
			for (int p = a + 1; p < n && !rc; p++) {
				if (r == a)
					rc = xfer(b, 1, b->send + (size_t)p * bytes, b->recv + (size_t)p * bytes, bytes, p, p,
						  err);
				else if (r == p)
					rc = xfer(b, 0, b->send + (size_t)a * bytes, b->recv + (size_t)a * bytes, bytes, a, a,
						  err);
			}
		return rc;
	case LMT_BENCH_SENDRECV:
		return xfer(b, r % 2 == 0, b->send, b->recv, bytes, (r + 1) % n, (r + n - 1) % n, err);
	}
	return lmt_err_set(err, LMT_EINVAL, "collective %d: no such collective", k->coll);
}

int lmt_bench_prepare(struct lmt_bench *b, const struct lmt_bench_case *k, struct lmt_err *err)
{
	int n = b->c->world, r = b->c->rank;
	size_t ts = lmt_dtype_size(k->dtype);
	switch (k->coll) {
	case LMT_BENCH_ALL_REDUCE: fill(k->dtype, b->hsend, k->per, 1, r, 0); break;
	case LMT_BENCH_REDUCE_SCATTER: fill(k->dtype, b->hsend, k->per * (size_t)n, 1, r, 0); break;
	case LMT_BENCH_BROADCAST:
		if (r == k->root)
			fill(k->dtype, b->hsend, k->per, 0, r, 0);
		else
			memset(b->hsend, 0xa5, k->per * ts);
		break;
	case LMT_BENCH_ALL_GATHER:
	case LMT_BENCH_SENDRECV: fill(k->dtype, b->hsend, k->per, 0, r, 0); break;
	case LMT_BENCH_ALLTOALL: fill(k->dtype, b->hsend, k->per * (size_t)n, 0, r, 0); break;
	}
	if (k->coll == LMT_BENCH_ALL_GATHER || k->coll == LMT_BENCH_ALLTOALL)
		memset(b->hrecv, 0xa5, k->per * (size_t)n * ts);
	else if (k->coll == LMT_BENCH_REDUCE_SCATTER || k->coll == LMT_BENCH_SENDRECV)
		memset(b->hrecv, 0xa5, k->per * ts);
	return sync_buffers(b, 1, k->per * (size_t)n * ts, err);
}

int lmt_bench_verify(struct lmt_bench *b, const struct lmt_bench_case *k, int spoil, uint64_t *wrong,
		     struct lmt_err *err)
{
	int n = b->c->world, r = b->c->rank;
	size_t ts = lmt_dtype_size(k->dtype), per = k->per;
	uint64_t bad = 0;
	int rc = sync_buffers(b, 0, per * (size_t)n * ts, err);
	if (rc)
		return rc;
	if (spoil && per) {
		void *res = k->coll == LMT_BENCH_ALL_REDUCE || k->coll == LMT_BENCH_BROADCAST ? b->hsend : b->hrecv;
		put(k->dtype, res, 0, 255);
	}
	switch (k->coll) {
	case LMT_BENCH_ALL_REDUCE:
		for (size_t i = 0; i < per; i++)
			bad += get(k->dtype, b->hsend, i) != lmt_bench_expected_reduce(k->dtype, k->op, n, i);
		break;
	case LMT_BENCH_REDUCE_SCATTER:
		for (size_t i = 0; i < per; i++)
			bad += get(k->dtype, b->hrecv, i) !=
			       lmt_bench_expected_reduce(k->dtype, k->op, n, (size_t)r * per + i);
		break;
	case LMT_BENCH_BROADCAST: bad = wrong_moved(k->dtype, b->hsend, per, k->root, 0); break;
	case LMT_BENCH_SENDRECV: bad = wrong_moved(k->dtype, b->hrecv, per, (r + n - 1) % n, 0); break;
	case LMT_BENCH_ALL_GATHER:
		for (int q = 0; q < n; q++)
			bad += wrong_moved(k->dtype, b->hrecv + (size_t)q * per * ts, per, q, 0);
		break;
	case LMT_BENCH_ALLTOALL:
		for (int q = 0; q < n; q++)
			bad += wrong_moved(k->dtype, b->hrecv + (size_t)q * per * ts, per, q, (size_t)r * per);
		break;
	}
	*wrong = bad;
	return 0;
}

int lmt_bench_rank_sum(struct lmt_comm *c, uint64_t *v, struct lmt_err *err)
{
	int64_t s = (int64_t)*v;
	int rc = c->allreduce(c, &s, 1, LMT_DTYPE_I64, LMT_COMM_OP_SUM, err);
	*v = (uint64_t)s;
	return rc;
}

int lmt_bench_time(struct lmt_bench *b, const struct lmt_bench_case *k, long long warmup, long long iters,
		   double *seconds, struct lmt_err *err)
{
	int rc = 0;
	for (long long i = 0; i < warmup && !rc; i++)
		rc = lmt_bench_run(b, k, err);
	if (!rc)
		rc = b->c->barrier(b->c, err);
	double t0 = lmt_now();
	for (long long i = 0; i < iters && !rc; i++)
		rc = lmt_bench_run(b, k, err);
	if (rc)
		return rc;
	*seconds = (lmt_now() - t0) / (double)iters;
	return b->c->allreduce(b->c, seconds, 1, LMT_DTYPE_F64, LMT_COMM_OP_AVG, err);
}

/* ---- every pair of ranks ---- */

int lmt_bench_pairs(struct lmt_bench *b, size_t bytes, long long warmup, long long iters, double *rt, int64_t *bad,
		    struct lmt_err *err)
{
	struct lmt_comm *c = b->c;
	int n = c->world, r = c->rank, rc;
	size_t pi = 0, npairs = (size_t)n * (size_t)(n - 1) / 2;
	for (int a = 0; a < n; a++)
		for (int p = a + 1; p < n; p++, pi++) {
			if ((rc = c->barrier(c, err)))
				return rc;
			if (r != a && r != p)
				continue;
			int peer = r == a ? p : a;
			memset(b->hsend, r & 0xff, bytes);
			if ((rc = sync_buffers(b, 1, bytes, err)))
				return rc;
			double t0 = 0;
			for (long long i = 0; i < warmup + iters; i++) {
				if (i == warmup)
					t0 = lmt_now();
				if ((rc = xfer(b, r == a, b->send, b->recv, bytes, peer, peer, err)))
					return rc;
			}
			/* a round trip carries the message each way once */
			if (r == a)
				rt[pi] = (lmt_now() - t0) / (double)iters;
			if ((rc = sync_buffers(b, 0, bytes, err)))
				return rc;
			for (size_t i = 0; i < bytes; i++)
				bad[pi] += b->hrecv[i] != (unsigned char)(peer & 0xff);
		}
	rc = c->allreduce(c, rt, npairs, LMT_DTYPE_F64, LMT_COMM_OP_SUM, err);
	return rc ? rc : c->allreduce(c, bad, npairs, LMT_DTYPE_I64, LMT_COMM_OP_SUM, err);
}
