/*
 * bench.h: the collective benchmark of nccl-tests over lmt's communicators
 * (comm.h), so a cluster is measured through the same calls the training step
 * makes: nccl-bench(1)'s sweep and --preflight are its caller, and a trainer
 * could run the same cases on its own communicator before a job.
 *
 * Sizes and bandwidths are counted as nccl-tests' doc/PERFORMANCE.md defines
 * them: algbw = S / t with S the size of the operation (all-gather: the whole
 * receive buffer; reduce-scatter and all-to-all: the whole send buffer), busbw =
 * algbw times lmt_bench_bus_factor: 2(n-1)/n for all-reduce, (n-1)/n for
 * all-gather, reduce-scatter and all-to-all, 1 for broadcast and send/recv. A
 * time is the mean over the timed iterations on each rank, then the mean over
 * the ranks (as nccl-tests averages them).
 *
 * comm.h has no all-to-all and only blocking send/recv, so all-to-all is the
 * pairs (a, b), a < b, in lexicographic order, each exchanging its two blocks
 * (a sends first), which cannot deadlock (the first unfinished pair always has
 * both ranks waiting on it), plus a local copy of a rank's own block; send/recv
 * is a ring (rank r sends to r+1), even ranks sending first. A rank's message
 * to itself (one rank) is a memcpy, as NCCL's send to self is a copy.
 *
 * With the nccl communicator the collectives take device buffers
 * (backend/cudart.h): inputs are made on the host and copied in before a case,
 * results copied back to be checked, and the times are of the device buffers
 * alone. Every input is rank-dependent and chosen so that the exact result is
 * representable in every dtype (see bench.c), so a check compares every element.
 *
 * Every function is collective over the communicator (each rank calls it with
 * the same case) and returns 0 or the communicator's LMT_E* code with its message.
 */
#ifndef LMT_BENCH_H
#define LMT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

enum lmt_bench_coll {
	LMT_BENCH_ALL_REDUCE,
	LMT_BENCH_ALL_GATHER,
	LMT_BENCH_REDUCE_SCATTER,
	LMT_BENCH_BROADCAST,
	LMT_BENCH_ALLTOALL,
	LMT_BENCH_SENDRECV,
	LMT_BENCH_COLL_COUNT,
};
/* nccl-tests' binary names without _perf */
extern const char *const lmt_bench_coll_names[LMT_BENCH_COLL_COUNT];

/* nccl-tests' type names, in its order for -d all, and lmt's dtype for each */
struct lmt_bench_type {
	const char *name;
	int dtype;
};
#define LMT_BENCH_NTYPES 7
extern const struct lmt_bench_type lmt_bench_types[LMT_BENCH_NTYPES];
/* nccl-tests' name of dtype ("?" for one it has none for) */
const char *lmt_bench_type_name(int dtype);

/* busbw / algbw for coll on n ranks (doc/PERFORMANCE.md of nccl-tests) */
double lmt_bench_bus_factor(int coll, int n);
/* all-reduce and reduce-scatter take a reduction op; the others move data */
int lmt_bench_is_reduction(int coll);

/* One case: the collective, its dtype and op (reductions), root (broadcast), and
 * its element counts, set by lmt_bench_case_size. */
struct lmt_bench_case {
	int coll, dtype, op, root;
	size_t per;     /* elements per rank's block (all-reduce, broadcast, send/recv: all of them) */
	size_t count;   /* the elements of the size, as reported */
};
/* per and count for a size of bytes on n ranks: the size rounded down to what the
 * collective can split, as nccl-tests does. */
void lmt_bench_case_size(struct lmt_bench_case *k, size_t bytes, int n);

/* The buffers of a benchmark: host ones, where inputs are made and results
 * checked, and (nccl) device ones the collectives take. */
struct lmt_bench {
	struct lmt_comm *c;
	unsigned char *send, *recv;    /* what the collectives take: device memory with nccl */
	unsigned char *hsend, *hrecv;  /* the host's */
	size_t cap;                    /* bytes of each */
	int device;
};
/* Two host buffers of cap bytes, and with the nccl communicator two device ones;
 * LMT_ENOMEM "out of memory for two buffers of N bytes". */
int lmt_bench_init(struct lmt_bench *b, struct lmt_comm *c, size_t cap, struct lmt_err *err);
void lmt_bench_release(struct lmt_bench *b);

/* This rank's inputs of case k, copied to the device buffers. */
int lmt_bench_prepare(struct lmt_bench *b, const struct lmt_bench_case *k, struct lmt_err *err);
/* Case k once. */
int lmt_bench_run(struct lmt_bench *b, const struct lmt_bench_case *k, struct lmt_err *err);
/* The wrong elements of k's result on this rank into *wrong (after prepare and one
 * run). spoil: first overwrite the result's first element with 255, which no
 * expected value is while n <= 12 (tests see one counted). */
int lmt_bench_verify(struct lmt_bench *b, const struct lmt_bench_case *k, int spoil, uint64_t *wrong,
		     struct lmt_err *err);
/* warmup runs, a barrier, iters timed runs: *seconds = the mean of a run, averaged
 * over the ranks. */
int lmt_bench_time(struct lmt_bench *b, const struct lmt_bench_case *k, long long warmup, long long iters,
		   double *seconds, struct lmt_err *err);
/* *v summed over the ranks, in place. */
int lmt_bench_rank_sum(struct lmt_comm *c, uint64_t *v, struct lmt_err *err);

/*
 * Every pair of ranks (a, b), a < b, in lexicographic order, one pair at a time
 * (a barrier before each): bytes each way, warmup then iters round trips, a
 * sending first. For pair i, rt[i] gets the mean round-trip seconds as a measured
 * it and bad[i] the wrong bytes either received, summed over the ranks so that
 * every rank holds every pair's figures. rt and bad: n (n-1) / 2 entries, zeroed.
 */
int lmt_bench_pairs(struct lmt_bench *b, size_t bytes, long long warmup, long long iters, double *rt, int64_t *bad,
		    struct lmt_err *err);

/* The exact result of reducing element i over n ranks, as dtype holds it (for tests). */
double lmt_bench_expected_reduce(int dtype, int op, int n, size_t i);

#endif
