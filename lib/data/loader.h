/*
 * loader.h: the deterministic, resumable order in which a trainer reads a split.
 *
 * The order is a pure function of (seed, epoch, world size): no state beyond one
 * counter is needed to rebuild it, so a run can stop anywhere and continue with
 * exactly the samples that would have come next.
 *
 *   The stream. A split of N sequences is read as an endless stream of global
 *   indices k = 0, 1, 2, ...; index k is position p = k mod N of epoch e = k / N.
 *   Rank r of a world of w ranks takes k = r, r + w, r + 2w, ...: ranks never share
 *   a position within an epoch, together they cover every position, and a rank that
 *   reaches the end of an epoch simply continues into the next.
 *
 *   The order within an epoch. The split's shards are put in an order drawn from
 *   (seed, epoch) (Fisher-Yates), and their sequences concatenated; then positions
 *   are shuffled within consecutive windows of W sequences (default 8192) by a
 *   keyed permutation of the window (a 4-round Feistel network on the next power of
 *   two, cycle-walked into range), drawn from (seed, epoch, window). A sequence thus
 *   moves at most W - 1 places: the bounded shuffle buffer of a streaming loader,
 *   computed instead of buffered. Without shuffling, the order is the manifest's.
 *
 *   The cursor is the next global index of this rank. Resuming with the same world
 *   size, a rank restarts from its cursor. Resuming with another world size is
 *   allowed when the ranks are in lockstep (a trainer stepping in lockstep keeps
 *   them so): their cursors are B + r for a common B, every index below B is
 *   consumed, and new rank r' continues at B + r' (lmt_loader_rebase).
 *
 * Each sample carries its stable id (shard, index within the shard), its global
 * index and its segments, so an audit can list what each rank consumed. Samples are
 * copied out of the mapped shards by a read-ahead thread; time next() spends waiting
 * for it is reported separately.
 */
#ifndef LMT_LOADER_H
#define LMT_LOADER_H

#include <pthread.h>
#include <stdint.h>

#include "data/dataset.h"
#include "core/error.h"

/* The version of the order defined above; a saved cursor means something only
 * under the same version (checkpoints record it). */
#define LMT_LOADER_ORDER 1

struct lmt_loader_cfg {
	int split;               /* enum lmt_split */
	uint64_t seed;
	uint32_t rank, world;    /* world >= 1, rank < world */
	int shuffle;             /* 0: manifest order (evaluation) */
	uint64_t window;         /* shuffle window in sequences; 0 = 8192 */
	uint32_t prefetch;       /* samples read ahead by a thread; 0 = read in next() */
};

struct lmt_sample {
	uint64_t global;         /* k */
	uint64_t epoch, pos;     /* k / N, k mod N */
	uint32_t shard;          /* index in the dataset's shard list */
	uint64_t index;          /* sequence within the shard */
	uint32_t *tokens;        /* seq_len + 1 tokens (owned by the caller's sample buffer) */
	struct lmt_segment *segs;
	uint32_t nseg;
};

/* Buffers for one sample; lmt_sample_alloc sizes them for a dataset. */
int lmt_sample_alloc(struct lmt_sample *s, const struct lmt_dataset *d);
void lmt_sample_free(struct lmt_sample *s);

struct lmt_epoch_map {       /* the shard order of one epoch, cached */
	uint64_t epoch;
	int valid;
	uint32_t *order;         /* split shard numbers in this epoch's order */
	uint64_t *prefix;        /* prefix[i] = sequences before order[i]; prefix[n] = N */
};

struct lmt_loader {
	struct lmt_dataset *d;
	struct lmt_loader_cfg cfg;
	uint32_t *shards;        /* the split's shards, as dataset indices, manifest order */
	uint32_t nshards;
	uint64_t N;              /* sequences in the split */
	uint64_t next;           /* the cursor */
	struct lmt_epoch_map map_main, map_thread;
	double wait_seconds;
	/* read-ahead */
	pthread_t th;
	int running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lmt_sample *ring;
	uint32_t head, count;    /* first filled slot, filled slots */
	uint64_t fill_k;         /* next k the thread fills */
	int stop, failed;
	struct lmt_err err;
};

int lmt_loader_init(struct lmt_loader *l, struct lmt_dataset *d, const struct lmt_loader_cfg *cfg,
		    uint64_t cursor, struct lmt_err *err);
/* The default cursor of a fresh run: the rank itself. */
static inline uint64_t lmt_loader_start(const struct lmt_loader_cfg *cfg)
{
	return cfg->rank;
}
/* Copy the next sample into s (from lmt_sample_alloc) and advance the cursor. */
int lmt_loader_next(struct lmt_loader *l, struct lmt_sample *s, struct lmt_err *err);
static inline uint64_t lmt_loader_cursor(const struct lmt_loader *l)
{
	return l->next;
}
void lmt_loader_release(struct lmt_loader *l);

/* Where global index k lives: shard (dataset index) and sequence index. Pure. */
int lmt_loader_locate(struct lmt_loader *l, uint64_t k, uint32_t *shard, uint64_t *index,
		      struct lmt_err *err);

/*
 * Cursor for new_rank of new_world, given the cursor old_cursor of old_rank in
 * old_world: ranks in lockstep have cursors B + r for a common B (every global
 * index below B consumed, none above), and new rank r' continues at B + r'. B is a
 * multiple of the world size when a run started at that size, and need not be after
 * a change of world size. Fails if old_cursor < old_rank (no cursor of that rank);
 * whether all ranks are in lockstep only the whole set of cursors can tell.
 */
int lmt_loader_rebase(uint64_t old_cursor, uint32_t old_rank, uint32_t old_world, uint32_t new_rank,
		      uint32_t new_world, uint64_t *new_cursor, struct lmt_err *err);

/* The keyed permutation of [0, n) used for windows; exposed for tests. */
uint64_t lmt_permute(uint64_t x, uint64_t n, uint64_t key);

#endif
