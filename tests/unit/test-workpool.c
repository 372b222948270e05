/*
 * test-workpool: lmt_workpool_run runs every item of a run exactly once, with a
 * worker number fit for per-thread scratch space, and returns only when all of them
 * are done; the pool survives helpers that sleep, and frees cleanly.
 *
 * The machine the suite runs on has 2 shared cores, so a helper may not run at all
 * during a run: no check counts on a helper doing anything, except the wake-up
 * probe, which waits up to 5 s for one. Checks, and how each can fail:
 *   - no pool: lmt_workpool_new(1), (0) and (-1) are NULL; a run on NULL calls fn
 *     for items 0..n-1 in that order, once each, with worker 0, in the caller
 *     (fails if an item is skipped, repeated, reordered or given another worker);
 *   - pools of 2, 3 and 8 threads: lmt_workpool_workers is in [2, nt]; runs of 0, 1,
 *     2, 3, 1000 and 100000 items call fn exactly once per item (per-item atomic
 *     counters; a missing, repeated or out-of-range item fails) and no more often
 *     than the item count;
 *   - every item, in every check below, goes through a probe that fails the pool's
 *     worker check if a worker number is outside [0, lmt_workpool_workers), if the
 *     caller's thread gets a number other than 0 or a helper 0, if one thread is
 *     seen with two numbers, or if two threads hold the same number at once (what
 *     would corrupt per-worker scratch space);
 *   - 20000 consecutive runs of 1-5 items with two fn/ctx pairs alternating (the
 *     trainer's pattern): right after each run returns, all its items are done; an
 *     item that runs while another run is current, with the other run's fn, or
 *     with an item number past its run's count fails; a second pass over every
 *     run's counts after the last run catches items that ran late;
 *   - a reduction through per-item slots (sum of i*i, and of 1/(i+1) in doubles,
 *     summed by the caller in order; slots poisoned before each run) gives the
 *     closed form and the same bits for 1, 2, 3 and 8 threads;
 *   - after 20 ms pauses (longer than the helpers' spin, so they sleep) runs still
 *     run every item once; a run whose item 0 waits for item 1 to be run by another
 *     thread completes within 5 s (fails if no helper runs an item after the
 *     pause, e.g. the caller does not wake sleeping helpers; it cannot hang: the
 *     wait gives up);
 *   - lmt_workpool_free(NULL) returns; free of a pool just made, of one just after
 *     a run, and of ones whose helpers sleep after 20000 runs returns within 10 s (a
 *     watchdog thread prints "not ok" and exits otherwise) and leaves the process,
 *     within 2 s, with no more threads than before the pool (Linux: /proc/self/status;
 *     fails if free returns with its helpers still alive);
 *   - LMT_WORKPOOL_MAX_ITEMS (2^21) items in one run are each run once (a byte
 *     counter per item), and a small run after it still works;
 *   - lmt_workpool_for over 2 * LMT_WORKPOOL_MAX_ITEMS + 3 indices, with no pool
 *     and with 3 threads, calls fn once for each index and never past the end
 *     (fails if a run's base is wrong or the last, short run is lost);
 *   - nt above 1024 is capped: lmt_workpool_new(1025) has at most 1024 workers.
 * A lost item makes lmt_workpool_run wait for ever, so the whole program runs under
 * an alarm: past 300 s (about 1 s is usual) it prints "not ok" and exits.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/workpool.h"
#include "tap.h"

#define MAX_THREADS 1024

/* ---- the probe every item goes through ---- */

static pthread_t caller;
static atomic_int cur_workers = 1;
static atomic_uint bad_worker, wrong_thread, worker_changed, worker_shared, helper_items;
static atomic_int busy[MAX_THREADS];
static _Thread_local int tls_worker = -1;

static int enter(int worker)
{
	if (worker < 0 || worker >= atomic_load(&cur_workers)) {
		atomic_fetch_add(&bad_worker, 1);
		return 0;
	}
	int is_caller = pthread_equal(pthread_self(), caller);
	if (is_caller != (worker == 0))
		atomic_fetch_add(&wrong_thread, 1);
	if (!is_caller)
		atomic_fetch_add(&helper_items, 1);
	if (tls_worker < 0)
		tls_worker = worker;
	else if (tls_worker != worker)
		atomic_fetch_add(&worker_changed, 1);
	if (atomic_exchange(&busy[worker], 1))
		atomic_fetch_add(&worker_shared, 1);
	return 1;
}

static void leave(int worker, int entered)
{
	if (entered)
		atomic_store(&busy[worker], 0);
}

static void probe_reset(int workers)
{
	atomic_store(&cur_workers, workers);
	atomic_store(&bad_worker, 0);
	atomic_store(&wrong_thread, 0);
	atomic_store(&worker_changed, 0);
	atomic_store(&worker_shared, 0);
	atomic_store(&helper_items, 0);
}

static void probe_check(const char *what)
{
	unsigned b = atomic_load(&bad_worker), w = atomic_load(&wrong_thread), c = atomic_load(&worker_changed),
		 s = atomic_load(&worker_shared);
	if (!tap_ok(!b && !w && !c && !s, "%s: worker numbers in range, 0 the caller's, one per thread, never shared",
		    what))
		tap_diag("  out of range %u, wrong thread %u, thread changed number %u, shared at once %u", b, w, c,
			 s);
}

/* Threads of this process (Linux), -1 where /proc is not there. */
static int threads_now(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	int n = -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "Threads:", 8)) {
			n = atoi(line + 8);
			break;
		}
	fclose(f);
	return n;
}

/* ---- free under a watchdog ---- */

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv = PTHREAD_COND_INITIALIZER;
static int wd_done;
static const char *wd_what;

static void *watchdog(void *arg)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&wd_mu);
	while (!wd_done)
		if (pthread_cond_timedwait(&wd_cv, &wd_mu, &dl) == ETIMEDOUT && !wd_done) {
			printf("not ok %d - %s: lmt_workpool_free returns\n", tap_n + 1, wd_what);
			printf("# lmt_workpool_free did not return within 10 s\n");
			fflush(stdout);
			_exit(1);
		}
	pthread_mutex_unlock(&wd_mu);
	return NULL;
}

/* Free p (made when the process had threads_before threads) and check it returns
 * and that its helpers are gone. */
static void free_checked(struct lmt_workpool *p, int threads_before, const char *what)
{
	pthread_t t;
	wd_done = 0;
	wd_what = what;
	if (pthread_create(&t, NULL, watchdog, NULL)) {
		tap_diag("%s: no watchdog thread; freeing without one", what);
		lmt_workpool_free(p);
	} else {
		lmt_workpool_free(p);
		pthread_mutex_lock(&wd_mu);
		wd_done = 1;
		pthread_cond_signal(&wd_cv);
		pthread_mutex_unlock(&wd_mu);
		pthread_join(t, NULL);
	}
	tap_ok(1, "%s: lmt_workpool_free returns", what);
	/* the kernel counts a joined thread a little longer (pthread_join returns when
	 * its tid is cleared, before it leaves the thread group): wait up to 2 s. For
	 * the same reason threads_before may count some of an earlier pool's helpers,
	 * hence <= */
	int after = threads_now();
	for (int k = 0; k < 200 && after > threads_before && threads_before >= 0; k++) {
		usleep(10000);
		after = threads_now();
	}
	if (threads_before < 0 || after < 0)
		tap_diag("%s: /proc/self/status unreadable, helpers' exit not counted", what);
	else if (!tap_ok(after <= threads_before, "%s: its helpers have exited", what))
		tap_diag("  %d threads before the pool, %d after free", threads_before, after);
}

/* ---- counting runs ---- */

struct count_ctx {
	uint32_t n;
	atomic_uint *cnt;
	atomic_uint calls, oor;
};

static void count_fn(void *vctx, uint32_t item, int worker)
{
	struct count_ctx *c = vctx;
	int e = enter(worker);
	atomic_fetch_add(&c->calls, 1);
	if (item >= c->n)
		atomic_fetch_add(&c->oor, 1);
	else
		atomic_fetch_add(&c->cnt[item], 1);
	leave(worker, e);
}

/* Run n counting items; what is wrong, 0 when every item ran exactly once. */
static uint32_t count_run(struct lmt_workpool *p, atomic_uint *cnt, uint32_t n)
{
	struct count_ctx c = { .n = n, .cnt = cnt };
	for (uint32_t i = 0; i < n; i++)
		atomic_store_explicit(&cnt[i], 0, memory_order_relaxed);
	lmt_workpool_run(p, count_fn, &c, n);
	uint32_t bad = 0;
	for (uint32_t i = 0; i < n; i++)
		bad += atomic_load_explicit(&cnt[i], memory_order_relaxed) != 1;
	bad += atomic_load(&c.oor);
	bad += atomic_load(&c.calls) != n;
	return bad;
}

/* ---- no pool ---- */

struct order_ctx {
	uint32_t next, bad;
	uint32_t seen[16];
};

static void order_fn(void *vctx, uint32_t item, int worker)
{
	struct order_ctx *c = vctx;
	if (worker != 0 || !pthread_equal(pthread_self(), caller) || item != c->next || item >= 16)
		c->bad++;
	else
		c->seen[item]++;
	c->next++;
}

static void test_null_pool(void)
{
	tap_ok(!lmt_workpool_new(1), "lmt_workpool_new(1) is NULL");
	tap_ok(!lmt_workpool_new(0), "lmt_workpool_new(0) is NULL");
	tap_ok(!lmt_workpool_new(-1), "lmt_workpool_new(-1) is NULL");
	TAP_EQ_U64(lmt_workpool_workers(NULL), 1, "lmt_workpool_workers(NULL) is 1");
	static const uint32_t sizes[] = { 0, 1, 2, 16 };
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		uint32_t n = sizes[k];
		struct order_ctx c = { 0 };
		lmt_workpool_run(NULL, order_fn, &c, n);
		int ok = c.bad == 0 && c.next == n;
		for (uint32_t i = 0; i < n; i++)
			ok &= c.seen[i] == 1;
		if (!tap_ok(ok, "no pool, %u items: each once, in order, worker 0, in the caller", n))
			tap_diag("  %u calls, %u out of order or off the caller", c.next, c.bad);
	}
}

/* ---- consecutive runs ---- */

struct seq_ctx {
	uint32_t run, n;
	int kind;
	atomic_uint cnt[5];
};

static atomic_uint cur_run;
static atomic_uint stale, wrong_fn, seq_oor;

static void seq_item(struct seq_ctx *c, uint32_t item, int worker, int kind)
{
	int e = enter(worker);
	if (c->kind != kind)
		atomic_fetch_add(&wrong_fn, 1);
	if (atomic_load(&cur_run) != c->run)
		atomic_fetch_add(&stale, 1);
	if (item >= c->n)
		atomic_fetch_add(&seq_oor, 1);
	else
		atomic_fetch_add(&c->cnt[item], 1);
	leave(worker, e);
}

static void seq_fn_a(void *ctx, uint32_t item, int worker)
{
	seq_item(ctx, item, worker, 0);
}

static void seq_fn_b(void *ctx, uint32_t item, int worker)
{
	seq_item(ctx, item, worker, 1);
}

static void test_consecutive(struct lmt_workpool *p, int nt, uint32_t runs)
{
	struct seq_ctx *ctx = calloc(runs + 1, sizeof *ctx);
	if (!ctx) {
		tap_ok(0, "nt %d: memory for %u runs", nt, runs);
		return;
	}
	atomic_store(&stale, 0);
	atomic_store(&wrong_fn, 0);
	atomic_store(&seq_oor, 0);
	uint32_t rng = 12345u + (uint32_t)nt, incomplete = 0;
	for (uint32_t r = 1; r <= runs; r++) {
		rng = rng * 1664525u + 1013904223u;
		struct seq_ctx *c = &ctx[r];
		c->run = r;
		c->n = 1 + (rng >> 16) % 5;
		c->kind = (int)(r & 1);
		atomic_store(&cur_run, r);
		lmt_workpool_run(p, c->kind ? seq_fn_b : seq_fn_a, c, c->n);
		atomic_store(&cur_run, 0);
		for (uint32_t i = 0; i < c->n; i++)
			if (atomic_load(&c->cnt[i]) != 1) {
				incomplete++;
				break;
			}
	}
	if (!tap_ok(!incomplete, "nt %d: each of %u runs of 1-5 items is complete when it returns", nt, runs))
		tap_diag("  %u runs not complete on return", incomplete);
	unsigned s = atomic_load(&stale), w = atomic_load(&wrong_fn), o = atomic_load(&seq_oor);
	if (!tap_ok(!s && !w && !o, "nt %d: no item runs outside its run, with another run's fn, or past its count",
		    nt))
		tap_diag("  outside its run %u, wrong fn %u, past the count %u", s, w, o);
	uint32_t late = 0;
	for (uint32_t r = 1; r <= runs; r++)
		for (uint32_t i = 0; i < 5; i++)
			late += atomic_load(&ctx[r].cnt[i]) != (i < ctx[r].n);
	if (!tap_ok(!late, "nt %d: after all runs, every item of every run ran exactly once", nt))
		tap_diag("  %u items with another count", late);
	free(ctx);
}

/* ---- sleeping helpers ---- */

struct wake_ctx {
	atomic_int item1_done, timed_out, item1_by_helper;
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void wake_fn(void *vctx, uint32_t item, int worker)
{
	struct wake_ctx *c = vctx;
	int e = enter(worker);
	if (item == 1) {
		atomic_store(&c->item1_by_helper, !pthread_equal(pthread_self(), caller));
		atomic_store(&c->item1_done, 1);
	} else {
		double end = now_s() + 5;
		while (!atomic_load(&c->item1_done))
			if (now_s() > end) {
				atomic_store(&c->timed_out, 1);
				break;
			} else {
				usleep(100);
			}
	}
	leave(worker, e);
}

static void test_sleeping(struct lmt_workpool *p, int nt, atomic_uint *cnt)
{
	uint32_t bad = 0;
	for (int k = 0; k < 4; k++) {
		usleep(20000);
		bad += count_run(p, cnt, k & 1 ? 2 : 1000);
	}
	if (!tap_ok(!bad, "nt %d: runs after 20 ms pauses run every item once", nt))
		tap_diag("  %u items wrong", bad);
	int timeouts = 0, by_helper = 0;
	for (int k = 0; k < 2; k++) {
		usleep(20000);
		struct wake_ctx c = { 0 };
		lmt_workpool_run(p, wake_fn, &c, 2);
		timeouts += atomic_load(&c.timed_out);
		by_helper += atomic_load(&c.item1_by_helper);
	}
	if (!tap_ok(!timeouts, "nt %d: after a pause, a sleeping helper is woken to run an item", nt))
		tap_diag("  %d of 2 runs: item 0 waited 5 s for item 1 to be run by another thread", timeouts);
	else
		tap_diag("nt %d: item 1 run by a helper in %d of 2 wake-up runs", nt, by_helper);
}

/* ---- reduction ---- */

struct red_ctx {
	uint64_t *sq;
	double *inv;
};

static void red_fn(void *vctx, uint32_t item, int worker)
{
	struct red_ctx *c = vctx;
	int e = enter(worker);
	c->sq[item] = (uint64_t)item * item;
	c->inv[item] = 1.0 / (item + 1.0);
	leave(worker, e);
}

static void test_reduction(void)
{
	enum { N = 100000 };
	static const int nts[] = { 1, 2, 3, 8 };
	struct red_ctx c = { malloc(N * sizeof *c.sq), malloc(N * sizeof *c.inv) };
	if (!c.sq || !c.inv) {
		tap_ok(0, "reduction: memory");
		free(c.sq);
		free(c.inv);
		return;
	}
	const uint64_t want = (uint64_t)N * (N - 1) * (2 * N - 1) / 6;
	double inv0 = 0;
	for (size_t k = 0; k < sizeof nts / sizeof *nts; k++) {
		int nt = nts[k];
		struct lmt_workpool *p = lmt_workpool_new(nt);
		probe_reset(lmt_workpool_workers(p));
		memset(c.sq, 0xff, N * sizeof *c.sq); /* poison: a missed item shows */
		memset(c.inv, 0xff, N * sizeof *c.inv); /* NaN */
		lmt_workpool_run(p, red_fn, &c, N);
		uint64_t sq = 0;
		double inv = 0;
		for (uint32_t i = 0; i < N; i++) {
			sq += c.sq[i];
			inv += c.inv[i];
		}
		if (k == 0)
			inv0 = inv;
		TAP_EQ_U64(sq, want, "reduction, nt %d: sum of i*i over per-item slots", nt);
		if (!tap_ok(!memcmp(&inv, &inv0, sizeof inv) && inv == inv,
			    "reduction, nt %d: sum of 1/(i+1) has the bits of no pool", nt))
			tap_diag("  got %.17g, no pool %.17g", inv, inv0);
		lmt_workpool_free(p);
	}
	probe_check("reduction pools");
	free(c.sq);
	free(c.inv);
}

/* ---- a pool of nt threads ---- */

static void test_pool(int nt, atomic_uint *cnt)
{
	int before = threads_now();
	struct lmt_workpool *p = lmt_workpool_new(nt);
	if (!tap_ok(p != NULL, "lmt_workpool_new(%d) makes a pool", nt))
		return;
	int w = lmt_workpool_workers(p);
	if (!tap_ok(w >= 2 && w <= nt, "nt %d: lmt_workpool_workers is in [2, %d]", nt, nt))
		tap_diag("  got %d", w);
	else if (w != nt)
		tap_diag("nt %d: only %d helpers started", nt, w - 1);
	probe_reset(w);

	static const uint32_t sizes[] = { 0, 1, 2, 3, 1000, 100000 };
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		uint32_t bad = 0, reps = sizes[k] <= 3 ? 50 : 3;
		for (uint32_t r = 0; r < reps; r++)
			bad += count_run(p, cnt, sizes[k]);
		if (!tap_ok(!bad, "nt %d: %u runs of %u items: each item once", nt, reps, sizes[k]))
			tap_diag("  %u items wrong", bad);
	}
	tap_diag("nt %d: %u items run by helpers", nt, atomic_load(&helper_items));

	test_consecutive(p, nt, 20000);
	test_sleeping(p, nt, cnt);
	probe_check(nt == 2 ? "nt 2" : nt == 3 ? "nt 3" : "nt 8");

	char what[64];
	snprintf(what, sizeof what, "nt %d, helpers asleep", nt);
	usleep(20000);
	free_checked(p, before, what);
}

/* ---- free in other states, the item limit, the thread cap ---- */

static void test_free_states(atomic_uint *cnt)
{
	lmt_workpool_free(NULL);
	tap_ok(1, "lmt_workpool_free(NULL) returns");

	int before = threads_now();
	free_checked(lmt_workpool_new(8), before, "nt 8, freed at once");

	before = threads_now();
	struct lmt_workpool *p = lmt_workpool_new(3);
	probe_reset(lmt_workpool_workers(p));
	uint32_t bad = 0;
	for (int k = 0; k < 100; k++)
		bad += count_run(p, cnt, 1000);
	tap_ok(!bad, "nt 3: 100 runs of 1000 items before free");
	free_checked(p, before, "nt 3, freed right after a run");
	probe_check("nt 3 before free");
}

static void max_fn(void *vctx, uint32_t item, int worker)
{
	atomic_uchar *cnt = vctx;
	int e = enter(worker);
	if (item < LMT_WORKPOOL_MAX_ITEMS)
		atomic_fetch_add_explicit(&cnt[item], 1, memory_order_relaxed);
	leave(worker, e);
}

static void test_max_items(atomic_uint *cnt)
{
	const uint32_t n = LMT_WORKPOOL_MAX_ITEMS;
	atomic_uchar *c = calloc(n, sizeof *c);
	if (!c) {
		tap_ok(0, "max items: memory");
		return;
	}
	struct lmt_workpool *p = lmt_workpool_new(8);
	probe_reset(lmt_workpool_workers(p));
	lmt_workpool_run(p, max_fn, c, n);
	uint32_t bad = 0;
	for (uint32_t i = 0; i < n; i++)
		bad += atomic_load_explicit(&c[i], memory_order_relaxed) != 1;
	if (!tap_ok(!bad, "LMT_WORKPOOL_MAX_ITEMS (%u) items in one run: each once", n))
		tap_diag("  %u items wrong", bad);
	bad = count_run(p, cnt, 3) + count_run(p, cnt, 1000);
	tap_ok(!bad, "runs after the largest run still run every item once");
	probe_check("max items");
	lmt_workpool_free(p);
	free(c);
}

/* lmt_workpool_for: indices past one run's limit, in runs one after another */
static void for_fn(void *vctx, size_t i, int worker)
{
	atomic_uchar *cnt = vctx;
	int e = enter(worker);
	if (i < 2 * (size_t)LMT_WORKPOOL_MAX_ITEMS + 3)
		atomic_fetch_add_explicit(&cnt[i], 1, memory_order_relaxed);
	leave(worker, e);
}

static void test_for(void)
{
	const size_t n = 2 * (size_t)LMT_WORKPOOL_MAX_ITEMS + 3;
	atomic_uchar *c = calloc(n + 1, sizeof *c);
	if (!c) {
		tap_ok(0, "lmt_workpool_for: memory");
		return;
	}
	struct lmt_workpool *p = lmt_workpool_new(3);
	for (int pass = 0; pass < 2; pass++) {
		struct lmt_workpool *q = pass ? p : NULL;
		memset(c, 0, n + 1);
		probe_reset(lmt_workpool_workers(q));
		lmt_workpool_for(q, for_fn, c, n);
		size_t bad = 0;
		for (size_t i = 0; i <= n; i++)
			bad += atomic_load_explicit(&c[i], memory_order_relaxed) != (i < n);
		if (!tap_ok(!bad, "lmt_workpool_for, %s: %zu indices (2 runs' limit + 3), each once, none past the end",
			    pass ? "3 threads" : "no pool", n))
			tap_diag("  %zu indices wrong", bad);
		probe_check(pass ? "lmt_workpool_for, 3 threads" : "lmt_workpool_for, no pool");
	}
	memset(c, 0, n + 1);
	lmt_workpool_for(p, for_fn, c, 0);
	size_t called = 0;
	for (size_t i = 0; i <= n; i++)
		called += atomic_load_explicit(&c[i], memory_order_relaxed);
	tap_ok(!called, "lmt_workpool_for of 0 indices calls nothing");
	lmt_workpool_free(p);
	free(c);
}

static void test_cap(atomic_uint *cnt)
{
	int before = threads_now();
	struct lmt_workpool *p = lmt_workpool_new(MAX_THREADS + 1);
	int w = lmt_workpool_workers(p);
	if (!tap_ok(p && w >= 2 && w <= MAX_THREADS, "lmt_workpool_new(%d): at most %d workers", MAX_THREADS + 1,
		    MAX_THREADS))
		tap_diag("  got %d", w);
	if (!p)
		return;
	probe_reset(w);
	uint32_t bad = count_run(p, cnt, 100000);
	tap_ok(!bad, "%d workers: a run of 100000 items runs each once", w);
	probe_check("capped pool");
	free_checked(p, before, "capped pool");
}

static void on_alarm(int sig)
{
	static const char msg[] = "not ok - test-workpool finished within 300 s (a run or a free hangs)\n";
	(void)sig;
	ssize_t w = write(1, msg, sizeof msg - 1);
	(void)w;
	_exit(1);
}

int main(void)
{
	caller = pthread_self();
	signal(SIGALRM, on_alarm);
	alarm(300);
	static atomic_uint cnt[100000];
	/* any thread a runtime (sanitizer) starts lazily is there before the counts */
	pthread_t t;
	if (!pthread_create(&t, NULL, watchdog, NULL)) {
		pthread_mutex_lock(&wd_mu);
		wd_done = 1;
		pthread_cond_signal(&wd_cv);
		pthread_mutex_unlock(&wd_mu);
		pthread_join(t, NULL);
	}

	test_null_pool();
	test_pool(2, cnt);
	test_pool(3, cnt);
	test_pool(8, cnt);
	test_reduction();
	test_free_states(cnt);
	test_max_items(cnt);
	test_for();
	test_cap(cnt);
	return tap_done();
}
