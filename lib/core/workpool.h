/*
 * workpool.h: helper threads for many short parallel steps on a shared machine.
 *
 * An OpenMP parallel region makes every thread of its team pass its closing
 * barrier, so when one of them is not running (the machine busy with other work)
 * the region waits a scheduler time slice for it. The BPE trainer runs a few
 * thousand steps of about a millisecond each; measured on 2 shared cores at a load
 * of 7, OpenMP regions made tok-train -j2's merges ten times slower than -j1.
 *
 * Here the caller's thread never waits for a helper to start: it claims items
 * of a step one at a time, as do the helpers that are awake; a helper that is
 * asleep or descheduled simply claims nothing. The caller waits only for items a
 * helper has claimed and not yet finished. Which thread runs which item is not
 * deterministic, so items must give the same result whoever runs them (each item
 * gets its worker number, 0 for the caller, 1.. for helpers, for per-thread
 * scratch space).
 *
 *	struct lmt_workpool *p = lmt_workpool_new(nt);    nt - 1 helpers (NULL: none)
 *	lmt_workpool_run(p, fn, ctx, nitems);             fn(ctx, item, worker) for every item
 *	lmt_workpool_free(p);
 *
 * lmt_workpool_run with p NULL runs every item in the caller (worker 0). Items per
 * run: at most LMT_WORKPOOL_MAX_ITEMS; threads: at most 1024. Only one thread may
 * call lmt_workpool_run at a time.
 */
#ifndef LMT_WORKPOOL_H
#define LMT_WORKPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct lmt_workpool;

#define LMT_WORKPOOL_MAX_ITEMS (1u << 21)

/* nt threads in all (the caller and nt - 1 helpers, nt capped at 1024); NULL when
 * nt < 2 or no helper could be started (the runs then go on in the caller alone). */
struct lmt_workpool *lmt_workpool_new(int nt);
void lmt_workpool_free(struct lmt_workpool *p);
/* Workers: 1 + the helpers started (1 for NULL). */
int lmt_workpool_workers(const struct lmt_workpool *p);
void lmt_workpool_run(struct lmt_workpool *p, void (*fn)(void *ctx, uint32_t item, int worker), void *ctx,
		      uint32_t nitems);
/* One turn of a loop that waits for another thread (*turn counts them, from 0): a
 * pause for the first 1000 turns, then a yield of the CPU, which the thread waited
 * for may need on a busy machine. */
void lmt_spin_wait(unsigned *turn);
/* fn(ctx, i, worker) for every i in [0, n), n of any size: runs of at most
 * LMT_WORKPOOL_MAX_ITEMS items, one after another. */
void lmt_workpool_for(struct lmt_workpool *p, void (*fn)(void *ctx, size_t i, int worker), void *ctx, size_t n);

/* Stop n threads that wait on cv under mu for work or for *flag: set *flag (an
 * atomic store, for threads that also spin on it), wake them, join them, then
 * destroy mu and cv. */
void lmt_threads_stop(pthread_t *th, int n, pthread_mutex_t *mu, pthread_cond_t *cv, int *flag);

#endif
