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
 * one rank a process, with --comm nccl one GPU a process, its local rank's).
 * The cases, their exact inputs, the timing and the algbw/busbw arithmetic are
 * lib/comm/bench.h's; this file parses, loops over the sweep and prints. With
 * -c 1 every element of every result is checked; wrong elements make the exit
 * status 1. --comm nccl without a GPU exits 1 saying so.
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

#include "comm/bench.h"
#include "comm/comm.h"
#include "core/json.h"
#include "core/util.h"
#include "tool.h"

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
	int ntypes, type_idx[LMT_BENCH_NTYPES];
	int nops, ops[LMT_COMM_OP_COUNT];
	int colls[LMT_BENCH_COLL_COUNT], ncolls;
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
		for (size_t i = 0; i < LMT_BENCH_NTYPES; i++)
			o->type_idx[o->ntypes++] = (int)i;
		return;
	}
	for (size_t i = 0; i < LMT_BENCH_NTYPES; i++)
		if (!strcmp(s, lmt_bench_types[i].name)) {
			o->type_idx[o->ntypes++] = (int)i;
			return;
		}
	/* lmt's own names too (fp32, bf16, fp16, ...) */
	int d = lmt_dtype_parse(s);
	for (size_t i = 0; i < LMT_BENCH_NTYPES && d >= 0; i++)
		if (lmt_bench_types[i].dtype == d) {
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
	char sweep[3] = ""; /* the first sweep option given, which --preflight does not take */
	while ((c = getopt_long(argc, argv, "hVb:e:f:i:n:w:c:d:o:r:t:g:", longopts, NULL)) != -1) {
		if (!sweep[0] && c > 0 && c < 128 && strchr("befidor", c))
			snprintf(sweep, sizeof sweep, "-%c", c);
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
	if (o->preflight && sweep[0])
		usage_error("--preflight sends --preflight-size bytes between each pair: %s does not apply", sweep);
	for (int i = optind; i < argc; i++) {
		int k = 0;
		while (k < LMT_BENCH_COLL_COUNT && strcmp(argv[i], lmt_bench_coll_names[k]))
			k++;
		if (k == LMT_BENCH_COLL_COUNT)
			usage_error("unknown collective '%s' (expected all_reduce, all_gather, reduce_scatter, "
				    "broadcast, alltoall or sendrecv)", argv[i]);
		if (o->preflight)
			usage_error("--preflight takes no collective ('%s')", argv[i]);
		o->colls[k] = 1;
	}
	for (int k = 0; k < LMT_BENCH_COLL_COUNT; k++)
		o->ncolls += o->colls[k];
	if (!o->ncolls)
		for (int k = 0; k < LMT_BENCH_COLL_COUNT; k++)
			o->colls[k] = 1;
}

/* ---- the sweep ---- */

struct bench {
	struct lmt_bench m;            /* the communicator and its buffers */
	struct lmt_comm *c;
	const struct opts *o;
	int human;
	struct lmt_json j;
	double busbw_sum;
	uint64_t records, wrong;
	char first_wrong[160];
};

static void check_rc(int rc, struct lmt_err *err)
{
	if (rc)
		die_err(err);
}

static void emit(struct bench *b)
{
	if (b->c->rank == 0 && lmt_json_end_line(&b->j, stdout))
		die_write("<stdout>");
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

static void one_case(struct bench *b, struct lmt_bench_case *k, size_t size)
{
	struct lmt_comm *c = b->c;
	const struct opts *o = b->o;
	struct lmt_err err = { 0 };
	int n = c->world;
	lmt_bench_case_size(k, size, n);
	size_t bytes = k->count * lmt_dtype_size(k->dtype);
	uint64_t bad = 0;
	if (o->check) {
		/* tests/cli/nccl-bench.sh: the rank named spoils its result's first element, to see it counted */
		const char *spoil = getenv("LMT_TEST_CORRUPT");
		check_rc(lmt_bench_prepare(&b->m, k, &err), &err);
		check_rc(lmt_bench_run(&b->m, k, &err), &err);
		check_rc(lmt_bench_verify(&b->m, k, spoil && atoi(spoil) == c->rank, &bad, &err), &err);
		check_rc(lmt_bench_rank_sum(c, &bad, &err), &err);
	}
	double t = 0;
	check_rc(lmt_bench_prepare(&b->m, k, &err), &err);
	check_rc(lmt_bench_time(&b->m, k, o->warmup, o->iters, &t, &err), &err);
	double algbw = t > 0 ? (double)bytes / 1e9 / t : 0, busbw = algbw * lmt_bench_bus_factor(k->coll, n);
	const char *tname = lmt_bench_type_name(k->dtype);
	const char *opname = lmt_bench_is_reduction(k->coll) ? lmt_comm_op_name(k->op) : "none";
	int root = k->coll == LMT_BENCH_BROADCAST ? k->root : -1;
	b->busbw_sum += busbw;
	b->records++;
	if (bad && !b->wrong)
		snprintf(b->first_wrong, sizeof b->first_wrong, "%s %s %s at %zu bytes", lmt_bench_coll_names[k->coll], tname,
			 opname, bytes);
	b->wrong += bad;
	if (c->rank)
		return;
	if (b->human) {
		char w[24] = "N/A";
		if (o->check)
			snprintf(w, sizeof w, "%llu", (unsigned long long)bad);
		printf("  %14s %12zu %12zu %8s %6s %5d %10.2f %8.2f %8.2f %7s\n", lmt_bench_coll_names[k->coll], bytes, k->count,
		       tname, opname, root, t * 1e6, algbw, busbw, w);
		fflush(stdout);
		return;
	}
	struct lmt_json *j = &b->j;
	lmt_json_reset(j);
	lmt_json_begin(j);
	lmt_json_str(j, "event", "result");
	lmt_json_str(j, "collective", lmt_bench_coll_names[k->coll]);
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
	for (int coll = 0; coll < LMT_BENCH_COLL_COUNT; coll++) {
		if (!o->colls[coll])
			continue;
		for (int t = 0; t < o->ntypes; t++)
			for (int oi = 0; oi < (lmt_bench_is_reduction(coll) ? o->nops : 1); oi++) {
				struct lmt_bench_case k = { coll, lmt_bench_types[o->type_idx[t]].dtype, o->ops[oi],
							    (int)o->root, 0, 0 };
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
	check_rc(lmt_bench_pairs(&b->m, bytes, o->warmup, o->iters, rt, bad, &err), &err);
	size_t pi = 0, slow = 0;
	double sum = 0;
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
	check_rc(lmt_bench_init(&b.m, &comm, buffer_bytes(&o), &err), &err);
	if (o.preflight)
		preflight(&b);
	else
		sweep(&b);
	lmt_bench_release(&b.m);
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
