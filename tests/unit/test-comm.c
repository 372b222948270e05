/*
 * test-comm: the communicators (comm.h) and the PMIx wire-up (pmix.h).
 *
 * Run alone (tests/run) it checks self, and PMIx without a launcher (a job of
 * one, PMIx_Init answering PMIX_ERR_UNREACHABLE). Under a launcher
 * (tests/cli/comm.sh: mpirun -n 2 and -n 3) every rank checks the mpi
 * communicator "auto" opens; with --mpi, alone, the mpi communicator as a world
 * of one (Open MPI's singleton); with --timeout, the timeout (rank 1 comes late);
 * with --nccl, every test below on the nccl communicator, one GPU a rank, on
 * host buffers staged through the device (scripts/gpu-check runs it alone and
 * under mpirun -n GPUs). Alone without a GPU, opening nccl fails cleanly.
 *
 * Every reduction is checked for every dtype and op against the value computed
 * here from every rank's input, which is a function of (rank, index): small
 * integers (at most 5 * world * (world + 1) / 2 = 30 in magnitude for 3 ranks,
 * halves for avg over 2), so that sums, averages and maxima are exact in every
 * dtype, bf16's 8 significant bits included: the comparison is for equality.
 *
 * The benchmark's cases (comm/bench.h) run on the same communicator: every
 * collective in every dtype and op checks with no wrong element, a spoiled result
 * counts exactly one, and the busbw factors and case sizes are nccl-tests'
 * formulas by hand.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cudart.h"
#include "comm/bench.h"
#include "comm/comm.h"
#include "comm/impl.h"
#include "comm/pmix.h"
#ifdef LMT_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif
#include "tap.h"

#define N 1037

static const int dtypes[] = { LMT_DTYPE_F32, LMT_DTYPE_BF16, LMT_DTYPE_F16, LMT_DTYPE_I32,
			      LMT_DTYPE_F64, LMT_DTYPE_I64, LMT_DTYPE_U8 };
#define NDTYPES (int)(sizeof dtypes / sizeof dtypes[0])

static int is_float(int dtype)
{
	return dtype == LMT_DTYPE_F32 || dtype == LMT_DTYPE_BF16 || dtype == LMT_DTYPE_F16 || dtype == LMT_DTYPE_F64;
}

/* rank r's element i: (r + 1) * (i % 5 + 1), negative at odd i where the dtype is signed */
static double input(int dtype, int r, size_t i)
{
	double v = (double)(r + 1) * (double)(i % 5 + 1);
	return (i & 1) && dtype != LMT_DTYPE_U8 ? -v : v;
}

static void put(int dtype, void *buf, size_t i, double v)
{
	switch (dtype) {
	case LMT_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
	case LMT_DTYPE_BF16: ((uint16_t *)buf)[i] = lmt_f32_to_bf16((float)v); break;
	case LMT_DTYPE_F16: ((uint16_t *)buf)[i] = lmt_f32_to_f16((float)v); break;
	case LMT_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case LMT_DTYPE_F64: ((double *)buf)[i] = v; break;
	case LMT_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case LMT_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	}
}

static double get(int dtype, const void *buf, size_t i)
{
	switch (dtype) {
	case LMT_DTYPE_F32: return ((const float *)buf)[i];
	case LMT_DTYPE_BF16: return lmt_bf16_to_f32(((const uint16_t *)buf)[i]);
	case LMT_DTYPE_F16: return lmt_f16_to_f32(((const uint16_t *)buf)[i]);
	case LMT_DTYPE_I32: return ((const int32_t *)buf)[i];
	case LMT_DTYPE_F64: return ((const double *)buf)[i];
	case LMT_DTYPE_I64: return (double)((const int64_t *)buf)[i];
	case LMT_DTYPE_U8: return ((const uint8_t *)buf)[i];
	}
	return 0;
}

/* op over every rank's input at index i, as comm.h defines it (integer avg truncates) */
static double expected(int dtype, int op, int world, size_t i)
{
	double s = 0, m = input(dtype, 0, i);
	for (int r = 0; r < world; r++) {
		double v = input(dtype, r, i);
		s += v;
		if (v > m)
			m = v;
	}
	if (op == LMT_COMM_OP_MAX)
		return m;
	if (op == LMT_COMM_OP_AVG)
		return is_float(dtype) ? s / world : (double)((long long)s / world);
	return s;
}

/* first index of buf (n elements from index base of the inputs) that is not op's value, or -1 */
static long mismatch(int dtype, int op, int world, const void *buf, size_t n, size_t base, double *got, double *want)
{
	for (size_t i = 0; i < n; i++) {
		*got = get(dtype, buf, i);
		*want = expected(dtype, op, world, base + i);
		if (*got != *want)
			return (long)i;
	}
	return -1;
}

static void fill(int dtype, void *buf, int rank, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(dtype, buf, i, input(dtype, rank, i));
}

static int check_reduced(const char *what, int dtype, int op, int world, const void *buf, size_t n, size_t base,
			 int rc, const struct lmt_err *err)
{
	double got = 0, want = 0;
	long at = rc ? -1 : mismatch(dtype, op, world, buf, n, base, &got, &want);
	if (!tap_ok(rc == 0 && at < 0, "%s %s %s", what, lmt_dtype_name(dtype), lmt_comm_op_name(op))) {
		if (rc)
			tap_diag("  %s", err->msg);
		else
			tap_diag("  element %ld: got %g, expected %g", at, got, want);
		return 0;
	}
	return 1;
}

static void test_allreduce(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	void *buf = malloc(N * 8);
	for (int d = 0; d < NDTYPES; d++) {
		for (int op = 0; op < LMT_COMM_OP_COUNT; op++) {
			fill(dtypes[d], buf, c->rank, N);
			int rc = c->allreduce(c, buf, N, dtypes[d], op, &err);
			check_reduced("allreduce", dtypes[d], op, c->world, buf, N, 0, rc, &err);
		}
		fill(dtypes[d], buf, c->rank, N);
		int rc = c->allreduce_sum(c, buf, N, dtypes[d], &err);
		check_reduced("allreduce_sum", dtypes[d], LMT_COMM_OP_SUM, c->world, buf, N, 0, rc, &err);
	}
	/* one element and none */
	fill(LMT_DTYPE_I64, buf, c->rank, 1);
	int rc = c->allreduce(c, buf, 1, LMT_DTYPE_I64, LMT_COMM_OP_SUM, &err);
	check_reduced("allreduce of 1 element", LMT_DTYPE_I64, LMT_COMM_OP_SUM, c->world, buf, 1, 0, rc, &err);
	tap_ok(c->allreduce(c, buf, 0, LMT_DTYPE_F32, LMT_COMM_OP_SUM, &err) == 0, "allreduce of 0 elements");
	free(buf);
}

static void test_reduce_scatter(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	size_t all = (size_t)N * c->world;
	void *send = malloc(all * 8), *recv = malloc(N * 8);
	for (int d = 0; d < NDTYPES; d++) {
		int dt = dtypes[d];
		for (int op = 0; op < LMT_COMM_OP_COUNT; op++) {
			fill(dt, send, c->rank, all);
			memset(recv, 0xa5, N * 8);
			int rc = c->reduce_scatter(c, send, recv, N, dt, op, &err);
			check_reduced("reduce_scatter", dt, op, c->world, recv, N, (size_t)c->rank * N, rc, &err);
		}
		fill(dt, send, c->rank, all);
		int rc = c->reduce_scatter_sum(c, send, recv, N, dt, &err);
		check_reduced("reduce_scatter_sum", dt, LMT_COMM_OP_SUM, c->world, recv, N, (size_t)c->rank * N, rc, &err);
		/* in place: the result lands at the front of the input */
		fill(dt, send, c->rank, all);
		rc = c->reduce_scatter(c, send, send, N, dt, LMT_COMM_OP_SUM, &err);
		check_reduced("reduce_scatter in place", dt, LMT_COMM_OP_SUM, c->world, send, N, (size_t)c->rank * N, rc,
			      &err);
	}
	free(send);
	free(recv);
}

static unsigned char pattern(int rank, size_t j)
{
	return (unsigned char)(rank * 31 + j * 7 + 1);
}

static int check_gathered(const struct lmt_comm *c, const unsigned char *all, size_t bytes)
{
	for (int r = 0; r < c->world; r++)
		for (size_t j = 0; j < bytes; j++)
			if (all[(size_t)r * bytes + j] != pattern(r, j))
				return 0;
	return 1;
}

static void test_allgather_broadcast(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	size_t bytes = 333;
	unsigned char *mine = malloc(bytes), *all = malloc(bytes * c->world);
	for (size_t j = 0; j < bytes; j++)
		mine[j] = pattern(c->rank, j);
	memset(all, 0, bytes * c->world);
	int rc = c->allgather(c, mine, all, bytes, &err);
	if (!tap_ok(rc == 0 && check_gathered(c, all, bytes), "allgather: every rank's block in rank order"))
		tap_diag("  %s", rc ? err.msg : "wrong bytes");
	/* in place: this rank's block already in the output */
	memset(all, 0, bytes * c->world);
	memcpy(all + (size_t)c->rank * bytes, mine, bytes);
	rc = c->allgather(c, all + (size_t)c->rank * bytes, all, bytes, &err);
	if (!tap_ok(rc == 0 && check_gathered(c, all, bytes), "allgather in place"))
		tap_diag("  %s", rc ? err.msg : "wrong bytes");

	int root = c->world - 1; /* not 0 wherever there are two ranks or more */
	if (c->rank == root)
		for (size_t j = 0; j < bytes; j++)
			mine[j] = pattern(root, j);
	else
		memset(mine, 0, bytes);
	rc = c->broadcast(c, mine, bytes, root, &err);
	int same = 1;
	for (size_t j = 0; j < bytes; j++)
		same &= mine[j] == pattern(root, j);
	if (!tap_ok(rc == 0 && same, "broadcast from rank %d", root))
		tap_diag("  %s", rc ? err.msg : "wrong bytes");
	tap_ok(c->broadcast(c, mine, bytes, c->world, &err) == LMT_EINVAL && strstr(err.msg, "broadcast from rank"),
	       "broadcast from a rank beyond the world: LMT_EINVAL (%s)", err.msg);
	rc = c->barrier(c, &err);
	tap_ok(rc == 0, "barrier");
	free(mine);
	free(all);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* busy local work between start and wait, as backward would do */
static double local_work(void)
{
	volatile double s = 0;
	for (int i = 0; i < 2000000; i++)
		s += (double)i * 1e-9;
	return s;
}

static void test_async(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	/* three buckets in flight at once, of different dtypes and ops, waited out of order */
	int dt[3] = { LMT_DTYPE_F32, LMT_DTYPE_BF16, LMT_DTYPE_I64 }, op[3] = { LMT_COMM_OP_SUM, LMT_COMM_OP_AVG,
										 LMT_COMM_OP_MAX };
	void *buf[3];
	struct lmt_comm_req *req[3] = { 0 };
	int rc = 0;
	for (int k = 0; k < 3 && !rc; k++) {
		buf[k] = malloc(N * 8);
		fill(dt[k], buf[k], c->rank, N);
		rc = c->allreduce_start(c, buf[k], N, dt[k], op[k], &req[k], &err);
	}
	tap_ok(rc == 0, "allreduce_start of three buckets");
	double w = local_work();
	tap_ok(w > 0, "local work while they run");
	for (int k = 2; k >= 0; k--) {
		rc = c->wait(c, req[k], &err);
		check_reduced("start/wait", dt[k], op[k], c->world, buf[k], N, 0, rc, &err);
		free(buf[k]);
	}
	tap_ok(c->wait(c, NULL, &err) == 0, "wait(NULL) is 0");
	if (c->world < 2)
		return;
	/* start returns before the peers arrive: rank 1 starts 0.5 s after the others */
	int64_t v = c->rank;
	struct lmt_comm_req *q;
	rc = c->barrier(c, &err);
	if (c->rank == 1)
		usleep(500000);
	double t0 = now_s();
	if (!rc)
		rc = c->allreduce_start(c, &v, 1, LMT_DTYPE_I64, LMT_COMM_OP_MAX, &q, &err);
	double t_start = now_s() - t0;
	if (!rc)
		rc = c->wait(c, q, &err);
	double t_wait = now_s() - t0;
	if (c->rank == 0)
		tap_ok(rc == 0 && v == c->world - 1 && t_start < 0.2 && t_wait > 0.4,
		       "start returns at once (%.3f s), wait when the late rank has started (%.3f s)", t_start, t_wait);
	else
		tap_ok(rc == 0 && v == c->world - 1, "a late start: max %lld", (long long)v);
}

/* bf16 and fp16 are summed in fp32 and rounded once: 256 + 1 + 1 is 258 in bf16 (its
 * step at 256 is 2), where adding in bf16 from rank 0 up would give 256 + 1 = 256 (a
 * tie to even) and again 256 (a tree that adds the ones first would not tell);
 * fp16 the same at 2048. Two ranks: 257 is a tie, 256 either way. */
static void test_half_rounding(struct lmt_comm *c)
{
	uint16_t b = lmt_f32_to_bf16(c->rank ? 1.0f : 256.0f), h = lmt_f32_to_f16(c->rank ? 1.0f : 2048.0f);
	struct lmt_err err = { 0 };
	int rc = c->allreduce(c, &b, 1, LMT_DTYPE_BF16, LMT_COMM_OP_SUM, &err);
	if (!rc)
		rc = c->allreduce(c, &h, 1, LMT_DTYPE_F16, LMT_COMM_OP_SUM, &err);
	float wb = lmt_bf16_to_f32(lmt_f32_to_bf16(256.0f + (float)(c->world - 1)));
	float wh = lmt_f16_to_f32(lmt_f32_to_f16(2048.0f + (float)(c->world - 1)));
	tap_ok(rc == 0 && lmt_bf16_to_f32(b) == wb && lmt_f16_to_f32(h) == wh,
	       "bf16/fp16 sums rounded once: %g and %g (expected %g and %g)", lmt_bf16_to_f32(b), lmt_f16_to_f32(h), wb,
	       wh);
}

/* uint8 sums wrap modulo 256 on long buffers too (Open MPI 4.1's vectorised uint8
 * sum saturates at 255 there; the mpi communicator reduces through fp32) */
static void test_u8_wrap(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	enum { NU8 = 4096 };
	uint8_t *b = malloc(NU8);
	if (!b)
		return;
	unsigned want = 0;
	for (int r = 0; r < c->world; r++)
		want += r == 0 ? 255u : (unsigned)(2 * r + 1);
	want &= 255u;
	memset(b, c->rank == 0 ? 255 : 2 * c->rank + 1, NU8);
	int rc = c->allreduce(c, b, NU8, LMT_DTYPE_U8, LMT_COMM_OP_SUM, &err), same = 1;
	for (int i = 0; i < NU8; i++)
		same &= b[i] == want;
	tap_ok(rc == 0 && same, "uint8 sum of %d elements wraps: %u (expected %u)", NU8, b[0], want);
	free(b);
}

static void test_split(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	struct lmt_comm sub;
	c->timeout_s = 17;
	int rc = c->split(c, c->rank % 2, -c->rank, &sub, &err);
	c->timeout_s = 0;
	if (!tap_ok(rc == 0, "split into even and odd ranks")) {
		tap_diag("  %s", err.msg);
		return;
	}
	/* ranks of my parity, ordered by key = -rank: the highest first */
	int size = 0, pos = 0;
	for (int r = 0; r < c->world; r++)
		if (r % 2 == c->rank % 2) {
			size++;
			if (r > c->rank)
				pos++;
		}
	tap_ok(sub.world == size && sub.rank == pos, "split: rank %d of %d in its group (expected %d of %d)", sub.rank,
	       sub.world, pos, size);
	tap_ok(sub.timeout_s == 17, "split copies the timeout");
	int64_t v = c->rank + 1, want = 0;
	for (int r = c->rank % 2; r < c->world; r += 2)
		want += r + 1;
	rc = sub.allreduce(&sub, &v, 1, LMT_DTYPE_I64, LMT_COMM_OP_SUM, &err);
	tap_ok(rc == 0 && v == want, "allreduce within the group: %lld (expected %lld)", (long long)v, (long long)want);
	/* the parent still works while the group is open, and after it is released */
	v = 1;
	rc = c->allreduce(c, &v, 1, LMT_DTYPE_I64, LMT_COMM_OP_SUM, &err);
	tap_ok(rc == 0 && v == c->world, "allreduce over the parent beside the group");
	sub.release(&sub);
	tap_ok(c->split(c, -1, 0, &sub, &err) == LMT_EINVAL, "split with a negative color: LMT_EINVAL");
}

static void test_p2p(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	if (c->world == 1) {
		char b = 0;
		tap_ok(c->send(c, &b, 1, 0, &err) == LMT_EINVAL, "send in a world of one: LMT_EINVAL (%s)", err.msg);
		tap_ok(c->recv(c, &b, 1, 0, &err) == LMT_EINVAL, "recv in a world of one: LMT_EINVAL");
		return;
	}
	/* a ring: rank r sends to r + 1 and receives from r - 1; even ranks send first */
	int to = (c->rank + 1) % c->world, from = (c->rank + c->world - 1) % c->world;
	size_t bytes = 4096 + 3;
	unsigned char *out = malloc(bytes), *in = calloc(1, bytes);
	for (size_t j = 0; j < bytes; j++)
		out[j] = pattern(c->rank, j);
	int rc;
	if (c->rank % 2 == 0) {
		if (!(rc = c->send(c, out, bytes, to, &err)))
			rc = c->recv(c, in, bytes, from, &err);
	} else {
		if (!(rc = c->recv(c, in, bytes, from, &err)))
			rc = c->send(c, out, bytes, to, &err);
	}
	int same = 1;
	for (size_t j = 0; j < bytes; j++)
		same &= in[j] == pattern(from, j);
	if (!tap_ok(rc == 0 && same, "send/recv ring: rank %d got rank %d's bytes", c->rank, from))
		tap_diag("  %s", rc ? err.msg : "wrong bytes");
	tap_ok(c->send(c, out, 1, c->rank, &err) == LMT_EINVAL, "send to itself: LMT_EINVAL (%s)", err.msg);
	free(out);
	free(in);
}

static void test_args(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	float x = 1;
	struct lmt_comm_req *q = (void *)&x;
	tap_ok(c->allreduce(c, &x, 1, LMT_DTYPE_F32, 7, &err) == LMT_EINVAL && strstr(err.msg, "unknown op 7"),
	       "an unknown op: LMT_EINVAL (%s)", err.msg);
	tap_ok(c->allreduce(c, &x, 1, 99, LMT_COMM_OP_SUM, &err) == LMT_EINVAL && strstr(err.msg, "unknown dtype 99"),
	       "an unknown dtype: LMT_EINVAL (%s)", err.msg);
	tap_ok(c->allreduce_start(c, &x, 1, LMT_DTYPE_F32, -1, &q, &err) == LMT_EINVAL && q == NULL,
	       "allreduce_start with an unknown op: LMT_EINVAL, no request");
	if (!strcmp(c->name, "mpi")) {
		/* checked before the buffer is touched */
		int rc = c->allreduce(c, NULL, (size_t)INT_MAX + 1, LMT_DTYPE_F32, LMT_COMM_OP_SUM, &err);
		tap_ok(rc == LMT_ERANGE && strstr(err.msg, "int count"), "more than INT_MAX elements: LMT_ERANGE (%s)",
		       err.msg);
	}
}

/*
 * The uneven collectives over parts of counts[r] = (r * 7 + 3) % 11 elements (3,
 * 10 and 6 on ranks 0, 1 and 2),
 * then with rank 0's part empty, as a layer's range that misses a shard: every
 * dtype and op reduced; the gathered parts end to end.
 */
static void test_uneven(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	size_t counts[64], total = 0, at = 0;
	for (int pass = 0; pass < 2; pass++) {
		total = at = 0;
		for (int r = 0; r < c->world && r < 64; r++) {
			counts[r] = pass && r == 0 ? 0 : (size_t)(r * 7 + 3) % 11;
			if (r < c->rank)
				at += counts[r];
			total += counts[r];
		}
		void *send = malloc(total * 8 + 8), *recv = malloc(counts[c->rank] * 8 + 8);
		for (int d = 0; d < NDTYPES; d++)
			for (int op = 0; op < LMT_COMM_OP_COUNT; op++) {
				struct lmt_comm_req *q = NULL;
				fill(dtypes[d], send, c->rank, total);
				int rc = c->reduce_scatterv_start(c, send, recv, counts, dtypes[d], op, &q, &err);
				if (!rc)
					rc = c->wait(c, q, &err);
				check_reduced(pass ? "reduce_scatterv, rank 0's part empty" : "reduce_scatterv", dtypes[d],
					      op, c->world, recv, counts[c->rank], at, rc, &err);
			}
		/* all-gather: rank r's part holds input(r, its indices) */
		for (int d = 0; d < NDTYPES; d++) {
			struct lmt_comm_req *q = NULL;
			size_t ds = lmt_dtype_size(dtypes[d]);
			void *all = malloc(total * 8 + 8), *mine = malloc(counts[c->rank] * 8 + 8);
			for (size_t i = 0; i < counts[c->rank]; i++)
				put(dtypes[d], mine, i, input(dtypes[d], c->rank, at + i));
			memset(all, 0xff, total * ds);
			int rc = c->allgatherv_start(c, mine, all, counts, dtypes[d], &q, &err);
			if (!rc)
				rc = c->wait(c, q, &err);
			long bad = -1;
			for (int r = 0, i = 0; !rc && r < c->world; r++)
				for (size_t k = 0; k < counts[r]; k++, i++)
					if (bad < 0 && get(dtypes[d], all, (size_t)i) != input(dtypes[d], r, (size_t)i))
						bad = i;
			if (!tap_ok(rc == 0 && bad < 0, "allgatherv%s %s", pass ? ", rank 0's part empty" : "",
				    lmt_dtype_name(dtypes[d])))
				tap_diag("  %s", rc ? err.msg : "a wrong element");
			free(all);
			free(mine);
		}
		free(send);
		free(recv);
	}
}

static void test_bench(struct lmt_comm *c)
{
	struct lmt_err err = { 0 };
	struct lmt_bench b;
	int n = c->world;
	/* doc/PERFORMANCE.md of nccl-tests: 2(n-1)/n, (n-1)/n, 1; by hand for 4 ranks */
	tap_ok(lmt_bench_bus_factor(LMT_BENCH_ALL_REDUCE, 4) == 1.5 && lmt_bench_bus_factor(LMT_BENCH_ALL_GATHER, 4) ==
	       0.75 && lmt_bench_bus_factor(LMT_BENCH_REDUCE_SCATTER, 4) == 0.75 &&
	       lmt_bench_bus_factor(LMT_BENCH_ALLTOALL, 4) == 0.75 && lmt_bench_bus_factor(LMT_BENCH_BROADCAST, 4) == 1 &&
	       lmt_bench_bus_factor(LMT_BENCH_SENDRECV, 4) == 1 && lmt_bench_bus_factor(LMT_BENCH_ALL_REDUCE, 1) == 0,
	       "bench: busbw factors 2(n-1)/n, (n-1)/n and 1");
	struct lmt_bench_case k = { .coll = LMT_BENCH_ALL_GATHER, .dtype = LMT_DTYPE_F32 };
	lmt_bench_case_size(&k, 1000, 3); /* 250 floats: 83 per rank, 249 reported */
	struct lmt_bench_case ar = { .coll = LMT_BENCH_ALL_REDUCE, .dtype = LMT_DTYPE_F32 };
	lmt_bench_case_size(&ar, 1000, 3);
	tap_ok(k.per == 83 && k.count == 249 && ar.per == 250 && ar.count == 250,
	       "bench: a size rounded down to what the collective splits (%zu x 3 = %zu; all-reduce %zu)", k.per,
	       k.count, ar.count);
	if (!tap_ok(!lmt_bench_init(&b, c, 4096 + 8, &err), "bench: buffers")) {
		tap_diag("  %s", err.msg);
		return;
	}
	uint64_t wrong = 0, cases = 0, spoiled = 0;
	int rc = 0;
	for (int coll = 0; coll < LMT_BENCH_COLL_COUNT && !rc; coll++)
		for (int t = 0; t < LMT_BENCH_NTYPES && !rc; t++)
			for (int op = 0; op < (lmt_bench_is_reduction(coll) ? LMT_COMM_OP_COUNT : 1) && !rc; op++) {
				struct lmt_bench_case x = { coll, lmt_bench_types[t].dtype, op, n - 1, 0, 0 };
				uint64_t bad = 0, one = 0;
				lmt_bench_case_size(&x, 4096 / (size_t)n, n);
				rc = lmt_bench_prepare(&b, &x, &err) || lmt_bench_run(&b, &x, &err) ||
				     lmt_bench_verify(&b, &x, 0, &bad, &err) || lmt_bench_prepare(&b, &x, &err) ||
				     lmt_bench_run(&b, &x, &err) || lmt_bench_verify(&b, &x, 1, &one, &err);
				wrong += bad;
				spoiled += one == 1;
				cases++;
			}
	tap_ok(!rc && !wrong && spoiled == cases, "bench: %llu cases of every collective, dtype and op: %llu wrong "
	       "elements, a spoiled result counted once in %llu", (unsigned long long)cases,
	       (unsigned long long)wrong, (unsigned long long)spoiled);
	if (rc)
		tap_diag("  %s", err.msg);
	double t = -1;
	rc = lmt_bench_time(&b, &ar, 1, 2, &t, &err);
	tap_ok(!rc && t >= 0, "bench: a timed all-reduce, mean over the ranks %.3g s", t);
	lmt_bench_release(&b);
}

static void test_ops(struct lmt_comm *c)
{
	test_uneven(c);
	test_allreduce(c);
	test_reduce_scatter(c);
	test_allgather_broadcast(c);
	test_async(c);
	test_half_rounding(c);
	test_u8_wrap(c);
	test_split(c);
	test_p2p(c);
	test_args(c);
	test_bench(c);
}

/* the NCCL unique id's way: rank 0 puts a blob, a fence with collect, every rank gets it */
static void test_pmix_exchange(struct lmt_pmix *p)
{
	struct lmt_err err = { 0 };
	unsigned char id[128], got[128];
	for (int j = 0; j < 128; j++)
		id[j] = pattern(p->rank, (size_t)j);
	int rc = 0;
	if (p->rank == 0)
		rc = lmt_pmix_put(p, "lmt-test-id", id, sizeof id, &err);
	if (!rc)
		rc = lmt_pmix_put(p, "lmt-test-mine", id, sizeof id, &err);
	if (!rc)
		rc = lmt_pmix_commit(p, &err);
	if (!rc)
		rc = lmt_pmix_fence(p, 1, &err);
	if (!tap_ok(rc == 0, "pmix: put, commit, fence with collect"))
		tap_diag("  %s", err.msg);
	memset(got, 0, sizeof got);
	rc = lmt_pmix_get(p, 0, "lmt-test-id", got, sizeof got, &err);
	int same = 1;
	for (int j = 0; j < 128; j++)
		same &= got[j] == pattern(0, (size_t)j);
	if (!tap_ok(rc == 0 && same, "pmix: rank 0's blob on rank %d", p->rank))
		tap_diag("  %s", rc ? err.msg : "wrong bytes");
	int from = (p->rank + 1) % p->size;
	rc = lmt_pmix_get(p, from, "lmt-test-mine", got, sizeof got, &err);
	same = 1;
	for (int j = 0; j < 128; j++)
		same &= got[j] == pattern(from, (size_t)j);
	if (!tap_ok(rc == 0 && same, "pmix: rank %d's own blob", from))
		tap_diag("  %s", rc ? err.msg : "wrong bytes");
	rc = lmt_pmix_get(p, 0, "lmt-test-id", got, 64, &err);
	tap_ok(rc == LMT_EFORMAT && strstr(err.msg, "expected 64"), "pmix: a blob of another size: LMT_EFORMAT (%s)",
	       err.msg);
	rc = lmt_pmix_get(p, p->size, "lmt-test-id", got, sizeof got, &err);
	tap_ok(rc == LMT_EINVAL, "pmix: a rank beyond the job: LMT_EINVAL (%s)", err.msg);
	tap_ok(lmt_pmix_put(p, "", id, 1, &err) == LMT_EINVAL, "pmix: an empty key: LMT_EINVAL");
}

static void test_pmix_missing(struct lmt_pmix *p)
{
	struct lmt_err err = { 0 };
	unsigned char b[4];
	int rc = lmt_pmix_get(p, 0, "lmt-test-nobody", b, sizeof b, &err);
	tap_ok(rc == LMT_ENOTFOUND, "pmix: a key nobody put: LMT_ENOTFOUND (%s)", err.msg);
}

/* rank 1 sleeps past rank 0's timeout of 1 s before it joins the all-reduce */
static int timeout_test(void)
{
	struct lmt_comm c;
	struct lmt_err err = { 0 };
	if (lmt_comm_open(&c, "auto", &err)) {
		fprintf(stderr, "test-comm: %s\n", err.msg);
		return 1;
	}
	c.timeout_s = 1;
	float x = 1;
	int rc = c.barrier(&c, &err); /* everyone is up */
	if (c.rank == 1)
		sleep(6);
	double t0 = now_s();
	if (!rc)
		rc = c.allreduce(&c, &x, 1, LMT_DTYPE_F32, LMT_COMM_OP_SUM, &err);
	double t = now_s() - t0;
	printf("rank %d: rc %d after %.2f s: %s\n", c.rank, rc, t, rc ? err.msg : "completed");
	if (rc) {
		int again = c.barrier(&c, &err);
		printf("rank %d: then a barrier: rc %d: %s\n", c.rank, again, err.msg);
	}
	fflush(stdout);
	c.release(&c);
	return rc ? 1 : 0;
}

/*
 * Alone: without a GPU, "nccl" is an LMT_EUNSUPPORTED saying so (no crash, no
 * hang); with one, a world of one. A build without NCCL does not know the name.
 * The dtype and op mapping, and the host-memory rule, need no GPU.
 */
static void test_nccl_open(void)
{
	struct lmt_comm d;
	struct lmt_err err = { 0 };
	int rc = lmt_comm_open(&d, "nccl", &err);
#ifdef LMT_HAVE_NCCL
	int ndev = 0;
	struct lmt_err e2 = { 0 };
	if (lmt_cudart_devices(&ndev, &e2) == 0) {
		tap_ok(rc == 0 && d.world == 1 && d.rank == 0 && !strcmp(d.name, "nccl"),
		       "nccl with %d GPU%s: a world of one (%s)", ndev, ndev == 1 ? "" : "s", rc ? err.msg : "opened");
		if (rc == 0)
			d.release(&d);
	} else {
		tap_ok(rc == LMT_EUNSUPPORTED && strstr(err.msg, "nccl: no GPU"),
		       "nccl without a GPU: LMT_EUNSUPPORTED saying so (%s)", err.msg);
	}
	static const struct { int dtype, nccl, via_f32; } map[] = {
		{ LMT_DTYPE_F32, ncclFloat32, 0 }, { LMT_DTYPE_BF16, ncclBfloat16, 1 }, { LMT_DTYPE_F16, ncclFloat16, 1 },
		{ LMT_DTYPE_F64, ncclFloat64, 0 }, { LMT_DTYPE_I32, ncclInt32, 0 },     { LMT_DTYPE_I64, ncclInt64, 0 },
		{ LMT_DTYPE_U8, ncclUint8, 1 },
	};
	int good = 1, via;
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		good &= lmt_nccl_dtype(map[i].dtype, &via) == map[i].nccl && via == map[i].via_f32;
	tap_ok(good && lmt_nccl_dtype(99, &via) == -1 && !via, "nccl: every dtype's NCCL type; bf16, fp16 and uint8 "
	       "reduced in fp32; an unknown dtype -1");
	tap_ok(lmt_nccl_op(LMT_COMM_OP_SUM) == ncclSum && lmt_nccl_op(LMT_COMM_OP_AVG) == ncclAvg &&
	       lmt_nccl_op(LMT_COMM_OP_MAX) == ncclMax && lmt_nccl_op(LMT_COMM_OP_COUNT) == -1,
	       "nccl: sum, avg and max are ncclSum, ncclAvg and ncclMax");
	tap_ok(lmt_cudart_memtype_is_host(cudaMemoryTypeUnregistered) && lmt_cudart_memtype_is_host(cudaMemoryTypeHost) &&
	       !lmt_cudart_memtype_is_host(cudaMemoryTypeDevice) && !lmt_cudart_memtype_is_host(cudaMemoryTypeManaged),
	       "cuda: pageable and pinned memory are staged, device and managed memory are not");
#else
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "'nccl'") && strstr(err.msg, lmt_comm_names()),
	       "no nccl in this build: an unknown communicator naming the ones built (%s)", err.msg);
#endif
}

/* --nccl: the whole of test_ops on the nccl communicator (a GPU a rank) */
static int nccl_test(void)
{
	struct lmt_comm c;
	struct lmt_err err = { 0 };
	int rc = lmt_comm_open(&c, "nccl", &err);
	if (!tap_ok(rc == 0, "open nccl: rank %d of %d", rc ? -1 : c.rank, rc ? -1 : c.world)) {
		tap_diag("  %s", err.msg);
		return tap_done();
	}
	test_ops(&c);
	c.release(&c);
	return tap_done();
}

int main(int argc, char **argv)
{
	struct lmt_err err = { 0 };
	struct lmt_comm c;
	if (argc > 1 && !strcmp(argv[1], "--timeout"))
		return timeout_test();
	if (argc > 1 && !strcmp(argv[1], "--nccl"))
		return nccl_test();
	if (argc > 1 && !strcmp(argv[1], "--mpi")) {
		/* alone, before any PMIx_Init (pmix.h) */
		int rc = lmt_comm_open(&c, "mpi", &err);
		if (!tap_ok(rc == 0 && c.world == 1 && c.rank == 0 && c.local_world == 1, "mpi alone: a world of one")) {
			tap_diag("  %s", err.msg);
			return tap_done();
		}
		test_ops(&c);
		c.release(&c);
		return tap_done();
	}
	const char *ompi_size = getenv("OMPI_COMM_WORLD_SIZE"), *ompi_rank = getenv("OMPI_COMM_WORLD_RANK");
	int launched = lmt_pmix_env() || ompi_size;
#ifndef LMT_HAVE_PMIX
	launched = 0; /* PMIx's stub: a job of one under any launcher */
#endif

	struct lmt_pmix p;
	int rc = lmt_pmix_init(&p, &err);
	if (!tap_ok(rc == 0, "pmix init")) {
		tap_diag("  %s", err.msg);
		return tap_done();
	}
	if (launched) {
		int want = ompi_size ? atoi(ompi_size) : p.size;
		tap_ok(p.launched && p.size == want && p.rank < p.size && p.local_rank < p.local_size,
		       "pmix under a launcher: rank %d of %d, local %d of %d", p.rank, p.size, p.local_rank, p.local_size);
	} else {
		tap_ok(!p.launched && p.size == 1 && p.rank == 0 && p.local_size == 1 && p.local_rank == 0,
		       "pmix without a launcher: a job of one");
	}
	test_pmix_exchange(&p);
	test_pmix_missing(&p);

	rc = lmt_comm_open(&c, "auto", &err);
	if (!tap_ok(rc == 0, "open auto")) {
		tap_diag("  %s", err.msg);
		return tap_done();
	}
	int world = ompi_size ? atoi(ompi_size) : p.size, rank = ompi_rank ? atoi(ompi_rank) : p.rank;
	tap_ok(!strcmp(c.name, world > 1 ? "mpi" : "self"), "auto chose %s for a job of %d", c.name, world);
	tap_ok(c.world == world && c.rank == rank && (!p.launched || (c.local_rank == p.local_rank &&
								    c.local_world == p.local_size)),
	       "rank %d of %d, local %d of %d, as the launcher says", c.rank, c.world, c.local_rank, c.local_world);
	tap_ok(c.timeout_s == 0, "no timeout by default");
	test_ops(&c);
	c.release(&c);

	struct lmt_comm d;
	rc = lmt_comm_open(&d, "nonesuch", &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "'nonesuch'") && strstr(err.msg, lmt_comm_names()),
	       "an unknown communicator: LMT_EINVAL naming the ones built (%s)", err.msg);
	if (!launched)
		test_nccl_open();
	lmt_pmix_release(&p);
	return tap_done();
}
