/*
 * workpool.c: the helper threads of workpool.h.
 *
 * One 64-bit word says what is to be done: generation (20 bits) | items (22) |
 * next item to claim (22). The caller writes fn and ctx, then the word with a new
 * generation and next 0; every thread claims by adding 1 to the word and reads
 * which run and which item it got from the value returned, so a helper that wakes
 * late can only claim an item of the run now published, and fn and ctx of that run
 * stay put until all its items are done (the caller waits for that before
 * publishing another). A thread adds at most once past the item count per run, so
 * with at most 2^21 items and 1024 threads the next field never reaches the item
 * count's bits.
 *
 * Helpers spin a little between runs (the trainer's runs come microseconds apart),
 * then sleep on a condition variable; the caller signals only when one sleeps.
 */
#include "core/workpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#define NEXT_BITS 22
#define ITEM_MASK ((1ull << NEXT_BITS) - 1)
#define GEN_SHIFT (2 * NEXT_BITS)
#define SPIN 2000

struct lmt_workpool {
	uint64_t job;
	uint32_t done;
	int quit, sleeping;
	void (*fn)(void *ctx, uint32_t item, int worker);
	void *ctx;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int nhelpers;
	pthread_t *th;
	struct helper_arg {
		struct lmt_workpool *p;
		int worker;
	} *args;
};

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Claim and run items of the run now published; the generation last seen. */
static uint64_t work(struct lmt_workpool *p, int worker)
{
	for (;;) {
		uint64_t v = __atomic_fetch_add(&p->job, 1, __ATOMIC_ACQ_REL);
		uint32_t n = (uint32_t)((v >> NEXT_BITS) & ITEM_MASK), i = (uint32_t)(v & ITEM_MASK);
		if (i >= n)
			return v >> GEN_SHIFT;
		p->fn(p->ctx, i, worker);
		__atomic_fetch_add(&p->done, 1, __ATOMIC_RELEASE);
	}
}

static void *helper(void *arg)
{
	struct helper_arg *a = arg;
	struct lmt_workpool *p = a->p;
	uint64_t seen = 0;
	for (;;) {
		int spins = 0;
		while ((__atomic_load_n(&p->job, __ATOMIC_ACQUIRE) >> GEN_SHIFT) == seen &&
		       !__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE) && spins++ < SPIN)
			relax();
		if ((__atomic_load_n(&p->job, __ATOMIC_SEQ_CST) >> GEN_SHIFT) == seen) {
			pthread_mutex_lock(&p->mu);
			__atomic_fetch_add(&p->sleeping, 1, __ATOMIC_SEQ_CST);
			while ((__atomic_load_n(&p->job, __ATOMIC_SEQ_CST) >> GEN_SHIFT) == seen &&
			       !__atomic_load_n(&p->quit, __ATOMIC_SEQ_CST))
				pthread_cond_wait(&p->cv, &p->mu);
			__atomic_fetch_sub(&p->sleeping, 1, __ATOMIC_SEQ_CST);
			pthread_mutex_unlock(&p->mu);
		}
		if (__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE))
			return NULL;
		seen = work(p, a->worker);
	}
}

struct lmt_workpool *lmt_workpool_new(int nt)
{
	if (nt < 2)
		return NULL;
	if (nt > 1024)
		nt = 1024;
	struct lmt_workpool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->th = calloc((size_t)nt, sizeof *p->th);
	p->args = calloc((size_t)nt, sizeof *p->args);
	if (!p->th || !p->args || pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->cv, NULL)) {
		free(p->th);
		free(p->args);
		free(p);
		return NULL;
	}
	for (int i = 0; i < nt - 1; i++) {
		p->args[i] = (struct helper_arg){ p, i + 1 };
		if (pthread_create(&p->th[i], NULL, helper, &p->args[i]))
			break;
		p->nhelpers++;
	}
	if (!p->nhelpers) {
		lmt_workpool_free(p);
		return NULL;
	}
	return p;
}

void lmt_workpool_free(struct lmt_workpool *p)
{
	if (!p)
		return;
	lmt_threads_stop(p->th, p->nhelpers, &p->mu, &p->cv, &p->quit);
	free(p->th);
	free(p->args);
	free(p);
}

void lmt_threads_stop(pthread_t *th, int n, pthread_mutex_t *mu, pthread_cond_t *cv, int *flag)
{
	pthread_mutex_lock(mu);
	__atomic_store_n(flag, 1, __ATOMIC_SEQ_CST); /* also seen by threads spinning outside mu */
	pthread_cond_broadcast(cv);
	pthread_mutex_unlock(mu);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(mu);
	pthread_cond_destroy(cv);
}

int lmt_workpool_workers(const struct lmt_workpool *p)
{
	return p ? 1 + p->nhelpers : 1;
}

void lmt_workpool_run(struct lmt_workpool *p, void (*fn)(void *ctx, uint32_t item, int worker), void *ctx,
		      uint32_t nitems)
{
	if (!p || nitems < 2) {
		for (uint32_t i = 0; i < nitems; i++)
			fn(ctx, i, 0);
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	__atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
	uint64_t gen = ((__atomic_load_n(&p->job, __ATOMIC_RELAXED) >> GEN_SHIFT) + 1) & ((1u << 20) - 1);
	__atomic_store_n(&p->job, gen << GEN_SHIFT | (uint64_t)nitems << NEXT_BITS, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->sleeping, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	work(p, 0);
	for (unsigned turn = 0; __atomic_load_n(&p->done, __ATOMIC_ACQUIRE) < nitems;)
		lmt_spin_wait(&turn);
}

void lmt_spin_wait(unsigned *turn)
{
	if ((*turn)++ < 1000)
		relax();
	else
		sched_yield();
}

struct for_job {
	void (*fn)(void *ctx, size_t i, int worker);
	void *ctx;
	size_t base;
};

static void for_item(void *ctx, uint32_t item, int worker)
{
	struct for_job *J = ctx;
	J->fn(J->ctx, J->base + item, worker);
}

void lmt_workpool_for(struct lmt_workpool *p, void (*fn)(void *ctx, size_t i, int worker), void *ctx, size_t n)
{
	struct for_job J = { fn, ctx, 0 };
	for (; J.base < n; J.base += LMT_WORKPOOL_MAX_ITEMS)
		lmt_workpool_run(p, for_item, &J,
				 (uint32_t)(n - J.base < LMT_WORKPOOL_MAX_ITEMS ? n - J.base : LMT_WORKPOOL_MAX_ITEMS));
}
