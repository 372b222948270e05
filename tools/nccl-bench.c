/*
 * nccl-bench: the collective bandwidth sweep of nccl-tests, over lmt's
 * communicators (lib/comm/comm.h), so a cluster is measured through the same
 * calls the training step makes.
 *
 *	mpirun -n 2 nccl-bench -b 8 -e 64M -f 4 -o sum -d float
 *	nccl-bench -b 1K -e 1M -f 2 all_reduce all_gather     # one process: self
 *	mpirun -n 4 nccl-bench --preflight                      # every pair of ranks
 *
 * The flags are nccl-tests' (-b -e -f -i -n -w -c -d -o -r; -t and -g only as 1:
 * one rank a process, with --comm nccl one GPU a process, its local rank's),
 * the sizes and bandwidths are counted as its doc/PERFORMANCE.md defines them:
 * algbw = S / t with S the size of the operation (all-gather: the whole receive
 * buffer; reduce-scatter and all-to-all: the whole send buffer), busbw = algbw
 * times 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
 * all-to-all, 1 for broadcast and send/recv. Each time is the mean over the -n
 * timed iterations on each rank, then the mean over the ranks (as nccl-tests
 * averages them).
 *
 * comm.h has no all-to-all and only blocking send/recv, so all-to-all is the
 * pairs (a, b), a < b, in lexicographic order, each exchanging its two blocks
 * (a sends first), which cannot deadlock (the first unfinished pair always has
 * both ranks waiting on it), plus a local copy of a rank's own block; send/recv
 * is a ring (rank r sends to r+1), even ranks sending first. A rank's message
 * to itself (one rank) is a memcpy, as NCCL's send to self is a copy.
 *
 * --comm nccl runs on device buffers (lib/backend/cudart.h): the inputs are made
 * on the host and copied in before a case, the results copied back to be checked;
 * the times are of the device buffers alone. Without a GPU it exits 1 saying so.
 *
 * With -c 1 every input is rank-dependent and chosen so that the exact result
 * is representable in every dtype (small integers whose sum over the ranks is n
 * times a base value, so sum, avg and max are exact), and every element of the
 * result is compared with it; wrong elements make the exit status 1.
 *
 * stdout (rank 0 only): one JSONL record per collective, dtype, op and size,
 * and a summary; a nccl-tests style table on a terminal or with --table.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cudart.h"
#include "comm/comm.h"
#include "core/json.h"
#include "core/util.h"
#include "tool.h"

enum coll {
	COLL_ALL_REDUCE,
	COLL_ALL_GATHER,
	COLL_REDUCE_SCATTER,
	COLL_BROADCAST,
	COLL_ALLTOALL,
	COLL_SENDRECV,
	COLL_COUNT,
};

/* nccl-tests' binary names without _perf */
static const char *const coll_names[COLL_COUNT] = {
	"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv",
};

/* nccl-tests' type names, in its order for -d all, and lmt's dtype for each */
static const struct {
	const char *name;
	int dtype;
} types[] = {
	{ "uint8", LMT_DTYPE_U8 }, { "int32", LMT_DTYPE_I32 }, { "int64", LMT_DTYPE_I64 },
	{ "half", LMT_DTYPE_F16 }, { "float", LMT_DTYPE_F32 }, { "double", LMT_DTYPE_F64 },
	{ "bfloat16", LMT_DTYPE_BF16 },
};
#define NTYPES (sizeof types / sizeof types[0])

#define DEFAULT_BYTES (32ull << 20)
#define DEFAULT_STEP_BYTES (1ull << 20)
#define DEFAULT_PREFLIGHT_BYTES (4ull << 20)

enum {
	OPT_JSONL = OPT_TOOL_BASE,
	OPT_TABLE,
	OPT_COMM,
	OPT_PREFLIGHT,
	OPT_PREFLIGHT_SIZE,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "minbytes", required_argument, NULL, 'b' },
	{ "maxbytes", required_argument, NULL, 'e' },
	{ "stepfactor", required_argument, NULL, 'f' },
	{ "stepbytes", required_argument, NULL, 'i' },
	{ "iters", required_argument, NULL, 'n' },
	{ "warmup_iters", required_argument, NULL, 'w' },
	{ "check", required_argument, NULL, 'c' },
	{ "datatype", required_argument, NULL, 'd' },
	{ "op", required_argument, NULL, 'o' },
	{ "root", required_argument, NULL, 'r' },
	{ "nthreads", required_argument, NULL, 't' },
	{ "ngpus", required_argument, NULL, 'g' },
	{ "comm", required_argument, NULL, OPT_COMM },
	{ "preflight", no_argument, NULL, OPT_PREFLIGHT },
	{ "preflight-size", required_argument, NULL, OPT_PREFLIGHT_SIZE },
	{ "jsonl", no_argument, NULL, OPT_JSONL },
	{ "table", no_argument, NULL, OPT_TABLE },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: nccl-bench [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP]\n"
	       "                  [-c 0|1] [-d TYPE] [-o OP] [-r ROOT] [--comm NAME]\n"
	       "                  [--jsonl | --table] [COLLECTIVE...]\n"
	       "       nccl-bench --preflight [--preflight-size SIZE] [-n ITERS] [-w WARMUP]\n"
	       "\n"
	       "Time collectives over lmt's communicator at a sweep of sizes and print algbw and\n"
	       "busbw as nccl-tests defines them. Start it with mpirun for more than one rank.\n"
	       "COLLECTIVE: all_reduce, all_gather, reduce_scatter, broadcast, alltoall, sendrecv\n"
	       "(default: all six). Sizes take K, M, G (powers of 1024, as nccl-tests).\n"
	       "\n"
	       "  -b, --minbytes SIZE     smallest size (32M)\n"
	       "  -e, --maxbytes SIZE     largest size (32M)\n"
	       "  -f, --stepfactor N      multiply the size by N each step\n"
	       "  -i, --stepbytes SIZE    else add SIZE each step (1M)\n"
	       "  -n, --iters N           timed iterations per size (20)\n"
	       "  -w, --warmup_iters N    untimed iterations before them (5)\n"
	       "  -c, --check 0|1         check every element of each result (1)\n"
	       "  -d, --datatype TYPE     float, half, bfloat16, int32, int64, double, uint8 or all\n"
	       "                          (float)\n"
	       "  -o, --op OP             sum, avg, max or all, for all_reduce and reduce_scatter\n"
	       "                          (sum; prod and min: the communicators have none)\n"
	       "  -r, --root R            broadcast's root rank (0)\n"
	       "  -t, --nthreads 1        -g, --ngpus 1: one rank per process only\n"
	       "      --comm NAME         communicator: auto (default), self, mpi or nccl (GPUs,\n"
	       "                          one a process; never chosen by auto)\n"
	       "      --preflight         send/recv between every pair of ranks in turn, each\n"
	       "                          pair's bandwidth and the slowest link\n"
	       "      --preflight-size S  bytes each way per message (4M)\n"
	       "      --jsonl             JSONL even on a terminal\n"
	       "      --table             the table even when stdout is not a terminal (mpirun)\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error (a wrong element), 2 usage error.\n"
	       "See nccl-bench(1).\n");
}

struct opts {
	uint64_t minbytes, maxbytes, stepbytes, preflight_bytes;
	long long stepfactor, iters, warmup, root;
	int check, jsonl, table, preflight;
	int ntypes, type_idx[NTYPES];
	int nops, ops[LMT_COMM_OP_COUNT];
	int colls[COLL_COUNT], ncolls;
	const char *comm;
};

/* nccl-tests' sizes: a count of bytes, K, M or G (either case) for powers of 1024 */
static uint64_t parse_size(const char *opt, const char *s)
{
	char *end;
	if (*s < '0' || *s > '9')
		usage_error("option '%s': '%s' is not a size", opt, s);
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	else if (*end == 'G' || *end == 'g')
		shift = 30, end++;
	if (*end)
		usage_error("option '%s': '%s' is not a size (bytes, or with K, M or G: powers of 1024)", opt, s);
	if (v > (1ull << 40) >> shift)
		usage_error("option '%s': '%s' is above 1T", opt, s);
	return (uint64_t)v << shift;
}

static void parse_types(struct opts *o, const char *s)
{
	o->ntypes = 0;
	if (!strcmp(s, "all")) {
		for (size_t i = 0; i < NTYPES; i++)
			o->type_idx[o->ntypes++] = (int)i;
		return;
	}
	for (size_t i = 0; i < NTYPES; i++)
		if (!strcmp(s, types[i].name)) {
			o->type_idx[o->ntypes++] = (int)i;
			return;
		}
	/* lmt's own names too (fp32, bf16, fp16, ...) */
	int d = lmt_dtype_parse(s);
	for (size_t i = 0; i < NTYPES && d >= 0; i++)
		if (types[i].dtype == d) {
			o->type_idx[o->ntypes++] = (int)i;
			return;
		}
	usage_error("option '-d': unknown type '%s' (expected float, half, bfloat16, int32, int64, double, "
		    "uint8 or all)", s);
}

static void parse_ops(struct opts *o, const char *s)
{
	o->nops = 0;
	if (!strcmp(s, "all")) {
		for (int i = 0; i < LMT_COMM_OP_COUNT; i++)
			o->ops[o->nops++] = i;
		return;
	}
	for (int i = 0; i < LMT_COMM_OP_COUNT; i++)
		if (!strcmp(s, lmt_comm_op_name(i))) {
			o->ops[o->nops++] = i;
			return;
		}
	if (!strcmp(s, "prod") || !strcmp(s, "min"))
		usage_error("option '-o': '%s' is not offered by lmt's communicators (they reduce with sum, avg "
			    "and max)", s);
	usage_error("option '-o': unknown op '%s' (expected sum, avg, max or all)", s);
}

static void parse_args(struct opts *o, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->minbytes = o->maxbytes = DEFAULT_BYTES;
	o->stepbytes = DEFAULT_STEP_BYTES;
	o->preflight_bytes = DEFAULT_PREFLIGHT_BYTES;
	o->stepfactor = 1;
	o->iters = 20;
	o->warmup = 5;
	o->check = 1;
	o->comm = "auto";
	parse_types(o, "float");
	parse_ops(o, "sum");
	int c;
	while ((c = getopt_long(argc, argv, "hVb:e:f:i:n:w:c:d:o:r:t:g:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(); exit(0);
		case 'V': print_version(); exit(0);
		case 'b': o->minbytes = parse_size("-b", optarg); break;
		case 'e': o->maxbytes = parse_size("-e", optarg); break;
		case 'f': o->stepfactor = opt_int("stepfactor", optarg, 1, 1 << 20); break;
		case 'i': o->stepbytes = parse_size("-i", optarg); break;
		case 'n': o->iters = opt_int("iters", optarg, 1, 1 << 30); break;
		case 'w': o->warmup = opt_int("warmup_iters", optarg, 0, 1 << 30); break;
		case 'c': o->check = (int)opt_int("check", optarg, 0, 1); break;
		case 'd': parse_types(o, optarg); break;
		case 'o': parse_ops(o, optarg); break;
		case 'r': o->root = opt_int("root", optarg, 0, 1 << 30); break;
		case 't':
		case 'g':
			if (strcmp(optarg, "1"))
				usage_error("option '-%c': '%s': nccl-bench runs one rank per process (with --comm nccl, "
					    "one GPU); start more ranks with mpirun -n", c, optarg);
			break;
		case OPT_COMM: o->comm = optarg; break;
		case OPT_PREFLIGHT: o->preflight = 1; break;
		case OPT_PREFLIGHT_SIZE: o->preflight_bytes = parse_size("--preflight-size", optarg); break;
		case OPT_JSONL: o->jsonl = 1; break;
		case OPT_TABLE: o->table = 1; break;
		default: bad_option(argv);
		}
	}
	if (o->jsonl && o->table)
		usage_error("--jsonl and --table exclude each other");
	if (o->minbytes > o->maxbytes)
		usage_error("option '-b': %llu bytes is above -e's %llu", (unsigned long long)o->minbytes,
			    (unsigned long long)o->maxbytes);
	if (o->stepfactor == 1 && o->stepbytes == 0)
		usage_error("option '-i': the step is 0 bytes (give a size, or -f)");
	if (o->preflight && o->preflight_bytes == 0)
		usage_error("option '--preflight-size': 0 bytes");
	for (int i = optind; i < argc; i++) {
		int k = 0;
		while (k < COLL_COUNT && strcmp(argv[i], coll_names[k]))
			k++;
		if (k == COLL_COUNT)
			usage_error("unknown collective '%s' (expected all_reduce, all_gather, reduce_scatter, "
				    "broadcast, alltoall or sendrecv)", argv[i]);
		if (o->preflight)
			usage_error("--preflight takes no collective ('%s')", argv[i]);
		o->colls[k] = 1;
	}
	for (int k = 0; k < COLL_COUNT; k++)
		o->ncolls += o->colls[k];
	if (!o->ncolls)
		for (int k = 0; k < COLL_COUNT; k++)
			o->colls[k] = 1;
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

/*
 * Element i of rank r's input in a world of n: a base of 1..P plus 2r, so the
 * sum over the ranks is n * (base + n - 1) and the average base + n - 1: small
 * non-negative integers, exact in every dtype (below 256, bf16's and uint8's
 * limit, while n <= 12; the fp32 sum of bf16/fp16 is rounded once, as the
 * expected value is). Nothing wraps: Open MPI 4.1's uint8 MPI_SUM saturates
 * on buffers of some tens of elements and more (its AVX path) where comm.h says
 * uint8 sums wrap, a fault of the mpi communicator to fix there. Reductions use P = 7 to keep the sum small; the data movements
 * P = 61, so that a block in the wrong place shows.
 */
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

/* The exact reduction over the n ranks of element i, as the dtype holds it:
 * integer sums wrap as the dtype does, their average truncates (comm.h). */
static double expected_reduce(int dtype, int op, int n, size_t i)
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

/* ---- the collectives ---- */

struct bench {
	struct lmt_comm *c;
	const struct opts *o;
	unsigned char *send, *recv;    /* what the collectives take: device memory with --comm nccl */
	unsigned char *hsend, *hrecv;  /* the host's, where inputs are made and results checked */
	size_t cap;                    /* bytes of each */
	int device, human;
	struct lmt_json j;
	double busbw_sum;
	uint64_t records, wrong;
	char first_wrong[160];
};

/* one case: the collective, its dtype and op, and its element counts */
struct op_case {
	int coll, dtype, op, root;
	size_t per;     /* elements per rank's block (all = per for all_reduce, ...) */
	size_t count;   /* the elements of the size, as reported */
};

static void check_rc(int rc, struct lmt_err *err)
{
	if (rc)
		die_err(err);
}

/* a copy between two of b's buffers, on the device or the host */
static void move(struct bench *b, void *dst, const void *src, size_t bytes)
{
#ifdef LMT_HAVE_CUDA
	struct lmt_err err = { 0 };
	if (b->device) {
		check_rc(lmt_cudart_copy(dst, src, bytes, &err), &err);
		return;
	}
#endif
	memcpy(dst, src, bytes);
}

/* the first bytes of the host's buffers to the device's (up) or back; nothing
 * on the host */
static void sync_buffers(struct bench *b, int up, size_t bytes)
{
	if (!b->device)
		return;
	bytes = bytes < b->cap ? bytes : b->cap;
	move(b, up ? b->send : b->hsend, up ? b->hsend : b->send, bytes);
	move(b, up ? b->recv : b->hrecv, up ? b->hrecv : b->recv, bytes);
}

static void xfer(struct bench *b, int first_send, const void *out, void *in, size_t bytes, int to, int from)
{
	struct lmt_comm *c = b->c;
	struct lmt_err err = { 0 };
	if (to == c->rank) { /* one rank: its message to itself */
		move(b, in, out, bytes);
		return;
	}
	if (first_send) {
		check_rc(c->send(c, out, bytes, to, &err), &err);
		check_rc(c->recv(c, in, bytes, from, &err), &err);
	} else {
		check_rc(c->recv(c, in, bytes, from, &err), &err);
		check_rc(c->send(c, out, bytes, to, &err), &err);
	}
}

static void run_once(struct bench *b, const struct op_case *k)
{
	struct lmt_comm *c = b->c;
	struct lmt_err err = { 0 };
	size_t ts = lmt_dtype_size(k->dtype), bytes = k->per * ts;
	int n = c->world, r = c->rank;
	switch (k->coll) {
	case COLL_ALL_REDUCE:
		check_rc(c->allreduce(c, b->send, k->per, k->dtype, k->op, &err), &err);
		break;
	case COLL_ALL_GATHER:
		check_rc(c->allgather(c, b->send, b->recv, bytes, &err), &err);
		break;
	case COLL_REDUCE_SCATTER:
		check_rc(c->reduce_scatter(c, b->send, b->recv, k->per, k->dtype, k->op, &err), &err);
		break;
	case COLL_BROADCAST:
		check_rc(c->broadcast(c, b->send, bytes, k->root, &err), &err);
		break;
	case COLL_ALLTOALL:
		move(b, b->recv + (size_t)r * bytes, b->send + (size_t)r * bytes, bytes);
		for (int a = 0; a < n; a++)
			for (int p = a + 1; p < n; p++) {
				if (r == a)
					xfer(b, 1, b->send + (size_t)p * bytes, b->recv + (size_t)p * bytes, bytes, p, p);
				else if (r == p)
					xfer(b, 0, b->send + (size_t)a * bytes, b->recv + (size_t)a * bytes, bytes, a, a);
			}
		break;
	case COLL_SENDRECV:
		xfer(b, r % 2 == 0, b->send, b->recv, bytes, (r + 1) % n, (r + n - 1) % n);
		break;
	}
}

/* the inputs of a case, on this rank */
static void prepare(struct bench *b, const struct op_case *k)
{
	int n = b->c->world, r = b->c->rank;
	size_t ts = lmt_dtype_size(k->dtype);
	switch (k->coll) {
	case COLL_ALL_REDUCE: fill(k->dtype, b->hsend, k->per, 1, r, 0); break;
	case COLL_REDUCE_SCATTER: fill(k->dtype, b->hsend, k->per * (size_t)n, 1, r, 0); break;
	case COLL_BROADCAST:
		if (r == k->root)
			fill(k->dtype, b->hsend, k->per, 0, r, 0);
		else
			memset(b->hsend, 0xa5, k->per * ts);
		break;
	case COLL_ALL_GATHER:
	case COLL_SENDRECV: fill(k->dtype, b->hsend, k->per, 0, r, 0); break;
	case COLL_ALLTOALL: fill(k->dtype, b->hsend, k->per * (size_t)n, 0, r, 0); break;
	}
	/* the receive buffer, so that an element not written shows */
	if (k->coll == COLL_ALL_GATHER || k->coll == COLL_ALLTOALL)
		memset(b->hrecv, 0xa5, k->per * (size_t)n * ts);
	else if (k->coll == COLL_REDUCE_SCATTER || k->coll == COLL_SENDRECV)
		memset(b->hrecv, 0xa5, k->per * ts);
	sync_buffers(b, 1, k->per * (size_t)n * ts);
}

/* wrong elements of the result on this rank */
static uint64_t verify(struct bench *b, const struct op_case *k)
{
	int n = b->c->world, r = b->c->rank;
	size_t ts = lmt_dtype_size(k->dtype), per = k->per;
	uint64_t bad = 0;
	sync_buffers(b, 0, per * (size_t)n * ts);
	/* tests/cli/nccl-bench.sh: the rank named spoils its result's first
	 * element (255 is no expected value while n <= 12), to see it counted */
	const char *spoil = getenv("LMT_TEST_CORRUPT");
	if (spoil && atoi(spoil) == r && per) {
		void *res = k->coll == COLL_ALL_REDUCE || k->coll == COLL_BROADCAST ? b->hsend : b->hrecv;
		put(k->dtype, res, 0, 255);
	}
	switch (k->coll) {
	case COLL_ALL_REDUCE:
		for (size_t i = 0; i < per; i++)
			bad += get(k->dtype, b->hsend, i) != expected_reduce(k->dtype, k->op, n, i);
		break;
	case COLL_REDUCE_SCATTER:
		for (size_t i = 0; i < per; i++)
			bad += get(k->dtype, b->hrecv, i) != expected_reduce(k->dtype, k->op, n, (size_t)r * per + i);
		break;
	case COLL_BROADCAST: bad = wrong_moved(k->dtype, b->hsend, per, k->root, 0); break;
	case COLL_SENDRECV: bad = wrong_moved(k->dtype, b->hrecv, per, (r + n - 1) % n, 0); break;
	case COLL_ALL_GATHER:
		for (int q = 0; q < n; q++)
			bad += wrong_moved(k->dtype, b->hrecv + (size_t)q * per * ts, per, q, 0);
		break;
	case COLL_ALLTOALL:
		for (int q = 0; q < n; q++)
			bad += wrong_moved(k->dtype, b->hrecv + (size_t)q * per * ts, per, q, (size_t)r * per);
		break;
	}
	return bad;
}

/* busbw / algbw, doc/PERFORMANCE.md of nccl-tests */
static double bus_factor(int coll, int n)
{
	switch (coll) {
	case COLL_ALL_REDUCE: return 2.0 * (n - 1) / n;
	case COLL_ALL_GATHER:
	case COLL_REDUCE_SCATTER:
	case COLL_ALLTOALL: return (double)(n - 1) / n;
	}
	return 1;
}

/* mean over the ranks of each rank's value */
static double rank_mean(struct lmt_comm *c, double v)
{
	struct lmt_err err = { 0 };
	check_rc(c->allreduce(c, &v, 1, LMT_DTYPE_F64, LMT_COMM_OP_AVG, &err), &err);
	return v;
}

static uint64_t rank_sum(struct lmt_comm *c, uint64_t v)
{
	struct lmt_err err = { 0 };
	int64_t s = (int64_t)v;
	check_rc(c->allreduce(c, &s, 1, LMT_DTYPE_I64, LMT_COMM_OP_SUM, &err), &err);
	return (uint64_t)s;
}

static double timed(struct bench *b, const struct op_case *k, long long warmup, long long iters)
{
	struct lmt_err err = { 0 };
	for (long long i = 0; i < warmup; i++)
		run_once(b, k);
	check_rc(b->c->barrier(b->c, &err), &err);
	double t0 = lmt_now();
	for (long long i = 0; i < iters; i++)
		run_once(b, k);
	return rank_mean(b->c, (lmt_now() - t0) / (double)iters);
}

static void emit(struct bench *b)
{
	if (b->c->rank == 0 && lmt_json_end_line(&b->j, stdout))
		die_write("<stdout>");
}

static int is_reduction(int coll)
{
	return coll == COLL_ALL_REDUCE || coll == COLL_REDUCE_SCATTER;
}

static void table_header(const struct bench *b)
{
	const struct opts *o = b->o;
	printf("# nccl-bench: comm %s, %d rank%s, minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %lld "
	       "iters: %lld validation: %d\n#\n",
	       b->c->name, b->c->world, b->c->world == 1 ? "" : "s", (unsigned long long)o->minbytes,
	       (unsigned long long)o->maxbytes,
	       (unsigned long long)(o->stepfactor > 1 ? (uint64_t)o->stepfactor : o->stepbytes),
	       o->stepfactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
	printf("# %14s %12s %12s %8s %6s %5s %10s %8s %8s %7s\n", "collective", "size", "count", "type", "redop",
	       "root", "time", "algbw", "busbw", "#wrong");
	printf("# %14s %12s %12s %8s %6s %5s %10s %8s %8s %7s\n", "", "(B)", "(elements)", "", "", "", "(us)",
	       "(GB/s)", "(GB/s)", "");
}

static void one_case(struct bench *b, struct op_case *k, size_t size)
{
	struct lmt_comm *c = b->c;
	const struct opts *o = b->o;
	int n = c->world;
	size_t ts = lmt_dtype_size(k->dtype), count = size / ts;
	/* the size rounded down to what the collective can split, as nccl-tests does */
	k->per = k->coll == COLL_ALL_REDUCE || k->coll == COLL_BROADCAST || k->coll == COLL_SENDRECV ? count
		 : count / (size_t)n;
	k->count = k->per == count ? count : k->per * (size_t)n;
	size_t bytes = k->count * ts;
	uint64_t bad = 0;
	if (o->check) {
		prepare(b, k);
		run_once(b, k);
		bad = rank_sum(c, verify(b, k));
	}
	prepare(b, k);
	double t = timed(b, k, o->warmup, o->iters);
	double algbw = t > 0 ? (double)bytes / 1e9 / t : 0, busbw = algbw * bus_factor(k->coll, n);
	const char *tname = "?";
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].dtype == k->dtype)
			tname = types[i].name;
	const char *opname = is_reduction(k->coll) ? lmt_comm_op_name(k->op) : "none";
	int root = k->coll == COLL_BROADCAST ? k->root : -1;
	b->busbw_sum += busbw;
	b->records++;
	if (bad && !b->wrong)
		snprintf(b->first_wrong, sizeof b->first_wrong, "%s %s %s at %zu bytes", coll_names[k->coll], tname,
			 opname, bytes);
	b->wrong += bad;
	if (c->rank)
		return;
	if (b->human) {
		char w[24] = "N/A";
		if (o->check)
			snprintf(w, sizeof w, "%llu", (unsigned long long)bad);
		printf("  %14s %12zu %12zu %8s %6s %5d %10.2f %8.2f %8.2f %7s\n", coll_names[k->coll], bytes, k->count,
		       tname, opname, root, t * 1e6, algbw, busbw, w);
		fflush(stdout);
		return;
	}
	struct lmt_json *j = &b->j;
	lmt_json_reset(j);
	lmt_json_begin(j);
	lmt_json_str(j, "event", "result");
	lmt_json_str(j, "collective", coll_names[k->coll]);
	lmt_json_u64(j, "size", bytes);
	lmt_json_u64(j, "count", k->count);
	lmt_json_str(j, "type", tname);
	lmt_json_str(j, "op", opname);
	lmt_json_i64(j, "root", root);
	lmt_json_i64(j, "ranks", n);
	lmt_json_num(j, "time_us", t * 1e6);
	lmt_json_num(j, "algbw_gbs", algbw);
	lmt_json_num(j, "busbw_gbs", busbw);
	if (o->check)
		lmt_json_u64(j, "wrong", bad);
	emit(b);
}

static void sweep(struct bench *b)
{
	const struct opts *o = b->o;
	if (b->human && b->c->rank == 0)
		table_header(b);
	for (int coll = 0; coll < COLL_COUNT; coll++) {
		if (!o->colls[coll])
			continue;
		for (int t = 0; t < o->ntypes; t++)
			for (int oi = 0; oi < (is_reduction(coll) ? o->nops : 1); oi++) {
				struct op_case k = { coll, types[o->type_idx[t]].dtype, o->ops[oi], (int)o->root, 0, 0 };
				for (uint64_t size = o->minbytes; size <= o->maxbytes;) {
					one_case(b, &k, (size_t)size);
					uint64_t next = o->stepfactor > 1 ? size * (uint64_t)o->stepfactor
									  : size + o->stepbytes;
					if (next <= size) /* 0 and -f: nccl-tests would loop for ever */
						break;
					size = next;
				}
			}
	}
	double avg = b->records ? b->busbw_sum / (double)b->records : 0;
	if (b->c->rank)
		return;
	if (b->human) {
		if (o->check)
			printf("# Out of bounds values : %llu %s\n", (unsigned long long)b->wrong, b->wrong ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g\n#\n", avg);
		fflush(stdout);
		return;
	}
	struct lmt_json *j = &b->j;
	lmt_json_reset(j);
	lmt_json_begin(j);
	lmt_json_str(j, "event", "summary");
	lmt_json_str(j, "comm", b->c->name);
	lmt_json_i64(j, "ranks", b->c->world);
	lmt_json_u64(j, "records", b->records);
	lmt_json_num(j, "avg_busbw_gbs", avg);
	if (o->check)
		lmt_json_u64(j, "wrong", b->wrong);
	emit(b);
}

/* ---- --preflight: every pair of ranks, in turn ---- */

static void preflight(struct bench *b)
{
	struct lmt_comm *c = b->c;
	const struct opts *o = b->o;
	struct lmt_err err = { 0 };
	int n = c->world, r = c->rank;
	size_t bytes = (size_t)o->preflight_bytes, npairs = (size_t)n * (size_t)(n - 1) / 2;
	double *rt = calloc(npairs ? npairs : 1, sizeof *rt);
	int64_t *bad = calloc(npairs ? npairs : 1, sizeof *bad);
	if (!rt || !bad)
		die("out of memory for %zu pairs", npairs);
	size_t pi = 0;
	for (int a = 0; a < n; a++)
		for (int p = a + 1; p < n; p++, pi++) {
			check_rc(c->barrier(c, &err), &err);
			if (r != a && r != p)
				continue;
			int peer = r == a ? p : a;
			memset(b->hsend, r & 0xff, bytes);
			sync_buffers(b, 1, bytes);
			double t0 = 0;
			for (long long i = 0; i < o->warmup + o->iters; i++) {
				if (i == o->warmup)
					t0 = lmt_now();
				xfer(b, r == a, b->send, b->recv, bytes, peer, peer);
			}
			/* a round trip carries the message each way once */
			if (r == a)
				rt[pi] = (lmt_now() - t0) / (double)o->iters;
			sync_buffers(b, 0, bytes);
			for (size_t i = 0; i < bytes; i++)
				bad[pi] += b->hrecv[i] != (unsigned char)(peer & 0xff);
		}
	check_rc(c->allreduce(c, rt, npairs, LMT_DTYPE_F64, LMT_COMM_OP_SUM, &err), &err);
	check_rc(c->allreduce(c, bad, npairs, LMT_DTYPE_I64, LMT_COMM_OP_SUM, &err), &err);
	size_t slow = 0;
	double sum = 0;
	pi = 0;
	if (r == 0 && b->human)
		printf("# nccl-bench --preflight: comm %s, %d rank%s, %zu bytes each way, %lld iters\n#\n"
		       "# %5s %5s %10s %8s %7s\n",
		       c->name, n, n == 1 ? "" : "s", bytes, o->iters, "rank", "peer", "time(us)", "GB/s", "#wrong");
	for (int a = 0; a < n; a++)
		for (int p = a + 1; p < n; p++, pi++) {
			double one = rt[pi] / 2, bw = one > 0 ? (double)bytes / 1e9 / one : 0;
			if (bw < (double)bytes / 1e9 / (rt[slow] / 2))
				slow = pi;
			sum += bw;
			b->wrong += (uint64_t)bad[pi];
			if (bad[pi] && !b->first_wrong[0])
				snprintf(b->first_wrong, sizeof b->first_wrong, "preflight between ranks %d and %d", a, p);
			if (r)
				continue;
			if (b->human) {
				printf("  %5d %5d %10.2f %8.2f %7lld\n", a, p, one * 1e6, bw, (long long)bad[pi]);
				continue;
			}
			lmt_json_reset(&b->j);
			lmt_json_begin(&b->j);
			lmt_json_str(&b->j, "event", "link");
			lmt_json_i64(&b->j, "rank", a);
			lmt_json_i64(&b->j, "peer", p);
			lmt_json_u64(&b->j, "size", bytes);
			lmt_json_num(&b->j, "time_us", one * 1e6);
			lmt_json_num(&b->j, "bw_gbs", bw);
			lmt_json_i64(&b->j, "wrong", bad[pi]);
			emit(b);
		}
	if (r == 0) {
		int sa = 0, sp = 0;
		size_t q = 0;
		for (int a = 0; a < n; a++)
			for (int p = a + 1; p < n; p++, q++)
				if (q == slow)
					sa = a, sp = p;
		double sbw = npairs ? (double)bytes / 1e9 / (rt[slow] / 2) : 0;
		if (b->human) {
			if (npairs)
				printf("# slowest link: ranks %d and %d, %.2f GB/s (%zu pair%s, mean %.2f GB/s)\n", sa, sp, sbw,
				       npairs, npairs == 1 ? "" : "s", sum / (double)npairs);
			else
				printf("# no pairs: a world of one rank\n");
		} else {
			lmt_json_reset(&b->j);
			lmt_json_begin(&b->j);
			lmt_json_str(&b->j, "event", "preflight");
			lmt_json_str(&b->j, "comm", c->name);
			lmt_json_i64(&b->j, "ranks", n);
			lmt_json_u64(&b->j, "pairs", npairs);
			lmt_json_u64(&b->j, "size", bytes);
			if (npairs) {
				lmt_json_obj(&b->j, "slowest");
				lmt_json_i64(&b->j, "rank", sa);
				lmt_json_i64(&b->j, "peer", sp);
				lmt_json_num(&b->j, "bw_gbs", sbw);
				lmt_json_obj_end(&b->j);
				lmt_json_num(&b->j, "mean_bw_gbs", sum / (double)npairs);
			}
			lmt_json_u64(&b->j, "wrong", b->wrong);
			emit(b);
		}
		if (npairs)
			info("slowest link: ranks %d and %d, %.2f GB/s of %zu pair%s", sa, sp, sbw, npairs,
			     npairs == 1 ? "" : "s");
		fflush(stdout);
	}
	free(rt);
	free(bad);
}

/* the largest buffer a case of the sweep needs (per * n elements of the widest type) */
static size_t buffer_bytes(const struct opts *o)
{
	if (o->preflight)
		return (size_t)o->preflight_bytes;
	return (size_t)o->maxbytes + 8;
}

/* host buffers of cap bytes; with the nccl communicator, device ones too */
static void alloc_buffers(struct bench *b, size_t cap)
{
	b->cap = cap;
	b->hsend = malloc(cap);
	b->hrecv = malloc(cap);
	if (!b->hsend || !b->hrecv)
		die("out of memory for two buffers of %zu bytes", cap);
	b->send = b->hsend, b->recv = b->hrecv;
	b->device = !strcmp(b->c->name, "nccl");
#ifdef LMT_HAVE_CUDA
	struct lmt_err err = { 0 };
	void *s = NULL, *r = NULL;
	if (b->device) {
		check_rc(lmt_cudart_alloc(&s, cap, &err), &err);
		check_rc(lmt_cudart_alloc(&r, cap, &err), &err);
		b->send = s, b->recv = r;
	}
#endif
}

static void free_buffers(struct bench *b)
{
#ifdef LMT_HAVE_CUDA
	if (b->device) {
		lmt_cudart_free(b->send);
		lmt_cudart_free(b->recv);
	}
#endif
	free(b->hsend);
	free(b->hrecv);
}

int main(int argc, char **argv)
{
	tool_init("nccl-bench");
	struct opts o;
	parse_args(&o, argc, argv);
	struct lmt_comm comm;
	struct lmt_err err = { 0 };
	int rc = lmt_comm_open(&comm, o.comm, &err);
	if (rc == LMT_EINVAL)
		usage_error("option '--comm': %s", err.msg);
	if (rc)
		die_err(&err);
	if (o.root >= comm.world)
		usage_error("option '-r': root %lld is not a rank of %d", o.root, comm.world);
	struct bench b = { .c = &comm, .o = &o };
	/* mpirun hands each rank a pseudo-terminal whatever its own stdout is, so
	 * isatty says nothing there: more than one rank means JSONL (as in train) */
	b.human = o.table || (!o.jsonl && isatty(STDOUT_FILENO) && comm.world == 1);
	lmt_json_init(&b.j);
	alloc_buffers(&b, buffer_bytes(&o));
	if (o.preflight)
		preflight(&b);
	else
		sweep(&b);
	free_buffers(&b);
	lmt_json_release(&b.j);
	comm.release(&comm);
	if (b.wrong) {
		if (comm.rank == 0)
			warn("%llu wrong element%s (first: %s)", (unsigned long long)b.wrong, b.wrong == 1 ? "" : "s",
			     b.first_wrong);
		return 1;
	}
	return 0;
}
