/*
 * ceiling: how much faster this machine runs N copies of a loop on N threads than
 * one copy on one thread, now: what N threads gain on work that shares nothing and
 * fits no better in N cores' caches than in one's. On a shared VM it is not N: its
 * cores may share a physical core or a clock that drops when both run, and the
 * host lends them to others. The speedup benchmarks of scripts/bench print it
 * beside their own figures, measured in the same run.
 * `make` builds it as $(B)/bench/ceiling.
 *
 *   ceiling [-j N] [-r ROUNDS]
 *
 * N: the threads (default: the CPUs this process may run on, at least 2); ROUNDS:
 * default 5. Two loops, each the same fixed work on every thread:
 *   alu     six chains of integer arithmetic in registers, no memory: the cores
 *           and their clock;
 *   memory  eight chains of dependent reads at random places of a 64 MiB table
 *           that the threads share, larger than a core's own caches: the
 *           latency and the concurrency of the memory behind them.
 * A round times each loop on one thread, then on N at once (from the moment the
 * threads, all made, are told to go, to the last one's end); its speedup
 * is N x one thread's time / N threads' time, taken best over best and median
 * over median, as the benchmarks take theirs. One JSON line per loop on stdout:
 * the threads, the rounds, the two speedups and best and median of both times.
 * Exit 0, 1 (out of memory, no threads), 2 (usage).
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALU_ITERS 30000000L
#define MEM_READS 250000L /* per chain */
#define MEM_LOG2 24        /* 2^24 four-byte entries: 64 MiB */
#define MAX_THREADS 1024
#define MAX_ROUNDS 1000

static uint32_t *table;
static volatile uint64_t sink_out;

struct worker {
	pthread_t th;
	int *go;       /* 0 wait, 1 run, 2 return (a thread could not be made) */
	int loop;      /* 0 alu, 1 memory */
	uint64_t seed; /* and, after the loop, its result */
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t alu(uint64_t seed)
{
	uint64_t a = seed, b = seed + 1, c = seed + 2, d = seed + 3, e = seed + 4, f = seed + 5;
	for (long i = 0; i < ALU_ITERS; i++) {
		a += b ^ (uint64_t)i;
		b += c * 3;
		c ^= d + (uint64_t)i;
		d += e;
		e ^= f + 7;
		f += a;
		/* keeps the six in registers and the loop from being folded */
		__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f));
	}
	return a + b + c + d + e + f;
}

static uint64_t memory(uint64_t seed)
{
	const uint32_t mask = (1u << MEM_LOG2) - 1;
	uint32_t x[8];
	for (int k = 0; k < 8; k++)
		x[k] = (uint32_t)(seed * 8 + (uint64_t)k) * 2654435761u;
	for (long i = 0; i < MEM_READS; i++)
		for (int k = 0; k < 8; k++)
			x[k] = table[(x[k] + (uint32_t)i) & mask]; /* the next place hangs on this read */
	uint64_t r = 0;
	for (int k = 0; k < 8; k++)
		r += x[k];
	return r;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	int go;
	while (!(go = __atomic_load_n(w->go, __ATOMIC_ACQUIRE)))
		sched_yield();
	if (go == 2)
		return NULL;
	w->seed = w->loop ? memory(w->seed) : alu(w->seed);
	return NULL;
}

/* Seconds for n threads each running loop once, from the moment all are made and
 * told to go to the last one's end; or a negative number when a thread cannot be
 * made. */
static double timed(struct worker *w, int n, int loop, uint64_t *sink)
{
	int go = 0, made = 0;
	for (; made < n; made++) {
		w[made] = (struct worker){ .go = &go, .loop = loop, .seed = (uint64_t)made + 1 };
		if (pthread_create(&w[made].th, NULL, work, &w[made]))
			break;
	}
	double t0 = now();
	__atomic_store_n(&go, made < n ? 2 : 1, __ATOMIC_RELEASE);
	for (int i = 0; i < made; i++) {
		pthread_join(w[i].th, NULL);
		*sink += w[i].seed;
	}
	return made < n ? -1 : now() - t0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* median of v[0..n), which it sorts */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: ceiling [-j THREADS] [-r ROUNDS]\n"
		   "the speedup of THREADS threads each running a loop over one thread running it,\n"
		   "for an arithmetic loop and a memory-latency loop; one JSON line each\n");
	return rc;
}

/* a whole decimal number in [lo, hi], or -1 */
static long number(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	return *s && !*end && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv)
{
	cpu_set_t cs;
	int threads = sched_getaffinity(0, sizeof cs, &cs) ? 2 : CPU_COUNT(&cs), rounds = 5;
	if (threads < 2)
		threads = 2;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return usage(stdout, 0);
		if ((!strcmp(a, "-j") || !strcmp(a, "-r")) && i + 1 < argc) {
			long v = number(argv[++i], 1, a[1] == 'j' ? MAX_THREADS : MAX_ROUNDS);
			if (v < 0) {
				fprintf(stderr, "ceiling: %s '%s': expected a whole number from 1 to %d\n", a, argv[i],
					a[1] == 'j' ? MAX_THREADS : MAX_ROUNDS);
				return 2;
			}
			*(a[1] == 'j' ? &threads : &rounds) = (int)v;
			continue;
		}
		fprintf(stderr, "ceiling: '%s': %s\n", a,
			!strcmp(a, "-j") || !strcmp(a, "-r") ? "needs a number" : "unknown argument");
		return usage(stderr, 2);
	}
	table = malloc(((size_t)1 << MEM_LOG2) * sizeof *table);
	struct worker *w = calloc((size_t)threads, sizeof *w);
	double *v = malloc((size_t)rounds * 2 * sizeof *v);
	if (!table || !w || !v) {
		fprintf(stderr, "ceiling: out of memory\n");
		return 1;
	}
	/* a random permutation's values would do as well; these need no shuffle */
	for (uint32_t i = 0; i < (1u << MEM_LOG2); i++)
		table[i] = i * 2654435761u ^ i >> 7;
	static const char *const names[] = { "alu", "memory" };
	double *one = v, *all = v + rounds;
	uint64_t sink = 0;
	for (int loop = 0; loop < 2; loop++) {
		for (int r = 0; r < rounds; r++) {
			one[r] = timed(w, 1, loop, &sink);
			all[r] = timed(w, threads, loop, &sink);
			if (one[r] < 0 || all[r] < 0) {
				fprintf(stderr, "ceiling: cannot start %d threads\n", threads);
				return 1;
			}
		}
		double one_m = median(one, rounds), all_m = median(all, rounds); /* sorted now */
		printf("{\"loop\":\"%s\",\"threads\":%d,\"rounds\":%d,\"speedup_best\":%.3f,"
		       "\"speedup_median\":%.3f,\"one_s_best\":%.4f,\"one_s_median\":%.4f,"
		       "\"all_s_best\":%.4f,\"all_s_median\":%.4f}\n",
		       names[loop], threads, rounds, threads * one[0] / all[0], threads * one_m / all_m, one[0],
		       one_m, all[0], all_m);
	}
	sink_out = sink; /* the loops' results, so that no compiler drops them */
	free(table);
	free(w);
	free(v);
	return fflush(stdout) ? 1 : 0;
}
