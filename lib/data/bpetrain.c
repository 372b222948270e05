/*
 * bpetrain.c: word counting and the BPE trainer described in bpetrain.h.
 */
#include "data/bpetrain.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "data/tokenizer.h"
#include "core/util.h"
#include "core/vgrow.h"
#include "core/workpool.h"

/* the pool of where lists tells AddressSanitizer which of its bytes are handed out,
 * so that a list written past its end is caught as it was when malloc'd */
#if defined(__SANITIZE_ADDRESS__)
#define WL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WL_ASAN 1
#endif
#endif
#ifdef WL_ASAN
#include <sanitizer/asan_interface.h>
#define WL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define WL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define WL_RED 32 /* bytes left poisoned after each block, as malloc's red zones */
#else
#define WL_POISON(p, n) ((void)(p), (void)(n))
#define WL_UNPOISON(p, n) ((void)(p), (void)(n))
#define WL_RED 0
#endif

/* ---- word counts ---- */

#define WC_MAXLEN ((1u << 24) - 1)

/* the table starts at 64k slots (1.5 MiB): growing from a few from the start
 * rehashed every word about twice on a real corpus */
#define WC_INIT_SLOTS (1u << 16)

int lmt_wordcount_init(struct lmt_wordcount *wc)
{
	memset(wc, 0, sizeof *wc);
	wc->mask = WC_INIT_SLOTS - 1;
	wc->s = lmt_zalloc(wc->mask + 1, sizeof *wc->s);
	if (!wc->s)
		return LMT_ENOMEM;
	return 0;
}

void lmt_wordcount_release(struct lmt_wordcount *wc)
{
	free(wc->s);
	free(wc->arena);
	memset(wc, 0, sizeof *wc);
}

size_t lmt_wordcount_bytes(const struct lmt_wordcount *wc)
{
	return (wc->mask + 1) * sizeof *wc->s + wc->acap;
}

/*
 * The word hash. Most words are short, so they are read with two loads that may
 * overlap (the bytes from the start and those up to the end) instead of a loop and
 * a call to memcpy for the tail: up to 8 bytes the loads hold every byte, so
 * distinct words of one length get distinct values before the final mix, which is a
 * bijection. The hash only places words in the table; nothing else depends on it.
 */
static inline uint64_t wc_hash(const uint8_t *p, size_t n)
{
	const uint64_t K = 0x9e3779b97f4a7c15ULL;
	uint64_t x, y;
	if (n > 16)
		return lmt_hash_bytes(p, n, 0);
	if (n >= 8) {
		x = lmt_load_u64(p);
		y = lmt_load_u64(p + n - 8);
		return lmt_mix64((lmt_mix64(x ^ n * K) ^ y) * K);
	}
	if (n >= 4) {
		x = lmt_load_u32(p);
		y = lmt_load_u32(p + n - 4);
	} else {
		x = n ? (uint64_t)p[0] << 16 | (uint64_t)p[n / 2] << 8 | p[n - 1] : 0;
		y = 0;
	}
	return lmt_mix64((x << 32 | y) ^ n * K);
}

/* a[0..n) == b[0..n), the same two loads for short words */
static inline int wc_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
	if (n > 16)
		return !memcmp(a, b, n);
	if (n >= 8)
		return lmt_load_u64(a) == lmt_load_u64(b) && lmt_load_u64(a + n - 8) == lmt_load_u64(b + n - 8);
	if (n >= 4)
		return lmt_load_u32(a) == lmt_load_u32(b) && lmt_load_u32(a + n - 4) == lmt_load_u32(b + n - 4);
	return !n || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

/* slot S holds the word w[0..n) of hash h, its bytes in arena */
static inline int wc_holds(const struct lmt_wordslot *S, const uint8_t *arena, uint64_t h, const uint8_t *w, size_t n)
{
	return S->h == h && (S->key & WC_MAXLEN) == n && wc_eq(arena + (S->key >> 24), w, n);
}

static int wc_rehash(struct lmt_wordcount *wc)
{
	size_t nm = wc->mask * 2 + 1;
	struct lmt_wordslot *s = lmt_zalloc(nm + 1, sizeof *s);
	if (!s)
		return LMT_ENOMEM;
	for (size_t i = 0; i <= wc->mask; i++) {
		if (!wc->s[i].h)
			continue;
		size_t j = wc->s[i].h & nm;
		while (s[j].h)
			j = (j + 1) & nm;
		s[j] = wc->s[i];
	}
	free(wc->s);
	wc->s = s;
	wc->mask = nm;
	return 0;
}

static int wc_add_hashed(struct lmt_wordcount *wc, const uint8_t *w, size_t n, uint64_t h,
			 uint64_t count)
{
	size_t i = h & wc->mask;
	struct lmt_wordslot *S;
	for (;;) {
		S = &wc->s[i];
		if (!S->h)
			break;
		if (wc_holds(S, wc->arena, h, w, n)) {
			S->count += count;
			wc->total += count;
			return 0;
		}
		i = (i + 1) & wc->mask;
	}
	if (LMT_GROW(wc->arena, wc->acap, wc->alen + n))
		return LMT_ENOMEM;
	memcpy(wc->arena + wc->alen, w, n);
	S->h = h;
	S->count = count;
	S->key = (uint64_t)wc->alen << 24 | n;
	wc->alen += n;
	wc->n++;
	wc->total += count;
	if (wc->n * 2 > wc->mask)
		return wc_rehash(wc);
	return 0;
}

int lmt_wordcount_add(struct lmt_wordcount *wc, const void *w, size_t n, uint64_t count)
{
	const uint8_t *p = w;
	while (n > WC_MAXLEN) {
		int rc = wc_add_hashed(wc, p, WC_MAXLEN, wc_hash(p, WC_MAXLEN) | 1, count);
		if (rc)
			return rc;
		p += WC_MAXLEN;
		n -= WC_MAXLEN;
	}
	if (n == 0)
		return 0;
	return wc_add_hashed(wc, p, n, wc_hash(p, n) | 1, count);
}

/* pieces hashed, and their slots prefetched, before the first of them is looked up */
#define WC_BATCH 32

int lmt_wordcount_add_from(struct lmt_wordcount *wc, struct lmt_pretok_iter *it, const char *text, size_t len,
			   size_t from, size_t to, uint64_t count, size_t *mark, size_t nmark, size_t *marked,
			   size_t *end)
{
	/* A lookup in a table larger than the caches is mostly a wait for the first
	 * slot it reads. Pieces are taken WC_BATCH at a time: each is hashed and its
	 * slot prefetched, then all are looked up, so the misses overlap. Words are
	 * added in text order all the same (a rehash in the middle of a batch only
	 * makes the later prefetches useless). */
	struct {
		size_t st, n;
		uint64_t h;
	} b[WC_BATCH];
	size_t st, n, nm = 0, last = from;
	int k = 0, more = 1;
	lmt_pretok_iter_reset(it, text, len);
	lmt_pretok_iter_seek(it, from);
	while (more) {
		more = lmt_pretok_next(it, &st, &n) && st < to;
		if (more) {
			last = st + n;
			if (nm < nmark)
				mark[nm++] = last;
			if (n > WC_MAXLEN) {
				int rc = lmt_wordcount_add(wc, text + st, n, count);
				if (rc)
					return rc;
				continue;
			}
			uint64_t h = wc_hash((const uint8_t *)text + st, n) | 1;
			__builtin_prefetch(&wc->s[h & wc->mask]);
			b[k].st = st;
			b[k].n = n;
			b[k].h = h;
			if (++k < WC_BATCH)
				continue;
		}
		for (int j = 0; j < k; j++) {
			int rc = wc_add_hashed(wc, (const uint8_t *)text + b[j].st, b[j].n, b[j].h, count);
			if (rc)
				return rc;
		}
		k = 0;
	}
	*end = last;
	if (marked)
		*marked = nm;
	return 0;
}

int lmt_wordcount_add_text(struct lmt_wordcount *wc, struct lmt_pretok_iter *it,
			   const char *text, size_t len)
{
	size_t end;
	return lmt_wordcount_add_from(wc, it, text, len, 0, SIZE_MAX, 1, NULL, 0, NULL, &end);
}

int lmt_wordcount_drop_zero(struct lmt_wordcount *wc)
{
	struct lmt_wordslot *s = lmt_zalloc(wc->mask + 1, sizeof *s);
	if (!s)
		return LMT_ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i <= wc->mask; i++) {
		if (!wc->s[i].h || !wc->s[i].count)
			continue;
		size_t j = wc->s[i].h & wc->mask;
		while (s[j].h)
			j = (j + 1) & wc->mask;
		s[j] = wc->s[i];
		n++;
	}
	free(wc->s);
	wc->s = s;
	wc->n = n;
	return 0;
}

#define WC_AHEAD 16

/*
 * Merging the threads' tables. The slots of the merged table are split into one
 * range a worker: a worker adds the words whose home slot is in its range, from
 * every table in turn, and probes only inside it, so no two write one slot. A
 * probe that reaches the range's end (a cluster across the boundary; rare at half
 * load) is left for the caller, who adds those words afterwards with the usual
 * probe; every copy of such a word meets the same full cells, so none of its
 * copies was added by a worker. The tables' arenas are laid end to end, so a word
 * added keeps its bytes where they are (at its table's base); the bytes of a word
 * that was already there stay unused. The table that already has room for every
 * word (the largest, if it has) is the one merged into, in place.
 */
struct wc_merge {
	struct lmt_wordcount *t;   /* the tables: t[0] is merged into */
	int n, first;              /* tables; the first to add (0: into new slots) */
	struct lmt_wordslot *s;    /* the merged slots */
	size_t mask;
	const uint8_t *arena;
	size_t base[LMT_WORDCOUNT_MAX_TABLES];
	int parts;
	struct wc_range {
		size_t added;
		uint64_t *left;    /* (table << 32 | slot) of the words left to the caller */
		size_t nleft, capleft;
		int oom;
	} r[LMT_WORDCOUNT_MAX_TABLES];
};

/* Add table i's slot e, probing up to hi (wrap: the whole table, around). 1 if
 * added, 0 if its word was there, -1 if the probe reached hi. */
static int merge_slot(struct wc_merge *M, int i, const struct lmt_wordslot *e, size_t hi, int wrap)
{
	const size_t len = e->key & WC_MAXLEN, off = M->base[i] + (e->key >> 24);
	size_t j = e->h & M->mask;
	for (;;) {
		struct lmt_wordslot *S = &M->s[j];
		if (!S->h) {
			S->h = e->h;
			S->key = (uint64_t)off << 24 | len;
			S->count = e->count;
			return 1;
		}
		if (wc_holds(S, M->arena, e->h, M->arena + off, len)) {
			S->count += e->count;
			return 0;
		}
		j = wrap ? (j + 1) & M->mask : j + 1;
		if (!wrap && j == hi)
			return -1;
	}
}

static void merge_range(void *ctx, uint32_t part, int worker)
{
	struct wc_merge *M = ctx;
	struct wc_range *R = &M->r[part];
	const size_t lo = (M->mask + 1) / (size_t)M->parts * part;
	const size_t hi = part + 1 == (uint32_t)M->parts ? M->mask + 1 : lo + (M->mask + 1) / (size_t)M->parts;
	(void)worker;
	if (M->first == 0) /* new slots: this range's share of the zeroing (and page faults) */
		memset(M->s + lo, 0, (hi - lo) * sizeof *M->s);
	for (int i = M->first; i < M->n; i++) {
		const struct lmt_wordcount *T = &M->t[i];
		for (size_t k = 0; k <= T->mask; k++) {
			const struct lmt_wordslot *e = &T->s[k];
			if (k + WC_AHEAD <= T->mask && T->s[k + WC_AHEAD].h) {
				size_t h = T->s[k + WC_AHEAD].h & M->mask;
				if (h >= lo && h < hi)
					__builtin_prefetch(&M->s[h]);
			}
			if (!e->h || (e->h & M->mask) < lo || (e->h & M->mask) >= hi)
				continue;
			int rc = merge_slot(M, i, e, hi, 0);
			if (rc > 0) {
				R->added++;
			} else if (rc < 0) {
				if (LMT_GROW(R->left, R->capleft, R->nleft + 1)) {
					R->oom = 1;
					return;
				}
				R->left[R->nleft++] = (uint64_t)i << 32 | k;
			}
		}
	}
}

int lmt_wordcount_merge(struct lmt_wordcount *t, int n, struct lmt_workpool *pool)
{
	if (n < 2)
		return 0;
	if (n > LMT_WORDCOUNT_MAX_TABLES)
		return LMT_EINVAL;
	size_t words = 0, bytes = 0;
	int big = 0;
	for (int i = 0; i < n; i++) {
		words += t[i].n;
		bytes += t[i].alen;
		if (t[i].mask > t[big].mask)
			big = i;
	}
	if (big) { /* the largest table first: merged into in place when it has room */
		struct lmt_wordcount x = t[0];
		t[0] = t[big];
		t[big] = x;
	}
	struct wc_merge *M = calloc(1, sizeof *M);
	if (!M)
		return LMT_ENOMEM;
	size_t mask = t[0].mask;
	while (words * 2 > mask)
		mask = mask * 2 + 1;
	M->t = t;
	M->n = n;
	M->mask = mask;
	M->first = mask == t[0].mask ? 1 : 0;
	M->parts = pool ? lmt_workpool_workers(pool) : 1;
	int rc = 0;
	/* the arenas end to end, in t[0]'s */
	if (LMT_GROW(t[0].arena, t[0].acap, bytes)) {
		free(M);
		return LMT_ENOMEM;
	}
	size_t at = t[0].alen;
	for (int i = 1; i < n; i++) {
		if (t[i].alen) /* a thread that met no word has no arena */
			memcpy(t[0].arena + at, t[i].arena, t[i].alen);
		M->base[i] = at;
		at += t[i].alen;
	}
	M->arena = t[0].arena;
	if (M->first) {
		M->s = t[0].s;
	} else if (!(M->s = malloc((mask + 1) * sizeof *M->s))) {
		free(M);
		return LMT_ENOMEM;
	}
	lmt_workpool_run(M->parts > 1 ? pool : NULL, merge_range, M, (uint32_t)M->parts);
	size_t added = M->first ? t[0].n : 0;
	uint64_t total = 0;
	for (int p = 0; p < M->parts; p++) {
		added += M->r[p].added;
		for (size_t k = 0; k < M->r[p].nleft && !M->r[p].oom; k++) {
			int i = (int)(M->r[p].left[k] >> 32);
			added += merge_slot(M, i, &t[i].s[(uint32_t)M->r[p].left[k]], 0, 1) > 0;
		}
		rc = M->r[p].oom ? LMT_ENOMEM : rc;
		free(M->r[p].left);
	}
	for (int i = 0; i < n; i++)
		total += t[i].total;
	if (!rc && !M->first) {
		free(t[0].s);
		t[0].s = M->s;
		t[0].mask = mask;
	} else if (!M->first) {
		free(M->s);
	}
	free(M);
	if (rc)
		return rc;
	t[0].n = added;
	t[0].alen = bytes;
	t[0].total = total;
	for (int i = 1; i < n; i++)
		lmt_wordcount_release(&t[i]);
	return 0;
}

/* ---- trainer ----
 *
 * Batches. The best pair (a1, b1) is merged into a new token c1; the next merge is
 * the best pair after that, which depends on what merging (a1, b1) changed. But it
 * changes little: the pairs that overlap a merge site fall, and pairs with c1 are
 * made. So the pair R that is second best now is the next merge for certain when:
 *   - no site of R's can touch a site of (a1, b1): R's first token is not b1 and
 *     its second not a1 (a1 and R's first may be equal, as may b1 and R's second);
 *     then R's count does not change, nor does any other count but fall;
 *   - no pair that merging (a1, b1) makes can beat R. An occurrence of (x, c1)
 *     comes from one of (x, a1), which is not R and not (a1, b1) and so is no
 *     better than R; likewise (c1, y) from (b1, y) and (c1, c1) from (b1, a1). Its
 *     count is at most R's, and on equal counts it loses: c1 is newer than every
 *     token of R, so it ranks after them, and where x is R's first token,
 *     (x, a1) lost to R on its second token, and c1, newer, loses there too.
 *     This needs c1 new (a reused token may rank first) and a1 != b1 (else the
 *     pair (c1, a1) of a1 a1 a1 comes from (a1, a1) itself).
 * The same holds along a batch of merges, each checked against all before it, the
 * pairs made by several merges (x c1 c2 from x a1 b1 a2 b2) coming from an old pair
 * that touches a site. A batch ends at its first merge that makes a reused token or
 * merges a token with itself, at a pair that could touch the batch's sites, at
 * BATCH_MAX merges, or where a part's list of best pairs runs out (below). Its
 * sites never overlap, so one step rewrites each word with all of its merges at
 * once, which is applying them in turn: the counts that one merge would make and
 * the next undo are simply not noted. The merges, the tokens and their ids are those
 * of merging one pair a step; test-bpetrain checks them against a trainer that does.
 * Late in training a batch holds 10 to 30 merges, and a step costs the threads two
 * meetings, whatever the number of merges it applies.
 *
 * Threads. The pairs are split into parts by a hash of the pair, PARTS_PER_THREAD
 * a thread; each part has its own table, where lists and heap, and only one thread
 * changes a part at a time, so no locks are needed. A step runs in two stages:
 *   A. the words of the batch's where lists are rewritten, and each thread notes
 *      the pair count changes its words make, bucketed by part: only the pairs next
 *      to a merge site change, so a word of n symbols with one site notes about
 *      five changes, not 2n. Words are dealt to the threads in blocks of 64, so a
 *      word is rewritten by the same thread at every step and stays in its cache,
 *      unless a thread done early takes chunks of another's (step_merge);
 *   B. each part's thread applies the changes of every bucket meant for it, files
 *      the pairs whose counts rose, and refills the part's list of its best pairs
 *      (fill_cands), which the next batch is picked from; a thread done early takes
 *      another's parts not yet begun (claim_part).
 * Counts are sums, where lists are sets (order only decides which word is visited
 * first) and the heap order is total, so nothing depends on which thread rewrote
 * which word or on the number of parts: the merges are the same for any thread
 * count, and for any order of the words (ties of order_words keep the count table's
 * order, which depends on the threads that counted them). The steps run on a work
 * pool (core/workpool.h), not OpenMP regions, because a region waits for every
 * thread of its team, and on a busy machine one of them is often not running: here
 * a thread that finds its own share taken does another's.
 */

struct pair {
	uint64_t key;          /* (a << 32 | b) + 1 */
	int64_t count;
	uint32_t *where;       /* word ids; may hold stale entries and duplicates */
	uint32_t nwhere, capwhere;
	uint32_t stamp;        /* last merge step that touched it */
};

/* heap entries carry the tie ranks of a and b (rank_of), so comparing is cheap,
 * and the pair's index in its part, so the top's pair is read without a probe of
 * the part's hash table (two cache misses a pop, which were 5% of training) */
struct heap_ent {
	int64_t count;
	uint32_t ra, rb;
	uint32_t q;
};

/* a pair count change noted in stage A: 24 bytes, which half the time cross to
 * the other core (it was 32, with the whole hash and a word for add) */
struct delta {
	uint64_t key;          /* pkey, | DELTA_ADD if the pair holds the new token: add w
				* to its where list (token ids are below 2^31) */
	int64_t d;
	uint32_t w;            /* the word it comes from */
	uint32_t mix;          /* lmt_mix64(pkey)'s low bits: the pair's slot and memo */
};
#define DELTA_ADD ((uint64_t)1 << 63)

/* a line each: thread t appends to its buffers while the others append to theirs,
 * and their counts side by side in a line went back and forth between the cores */
struct dbuf {
	struct delta *v;
	size_t n, cap;
	size_t most;           /* the most it held in a step (the peak's figure) */
} __attribute__((aligned(64)));

/* the most merges a step applies (a batch), the most best pairs a part lists, and
 * the parts a thread keeps (claim_part): one, since each part costs its thread a
 * refill of its best pairs a step and the picking a list to compare; two parts a
 * thread, to even out the threads' stage B, took 3-5% longer at -j2 on the
 * synthetic corpus (the paired harness) */
#define PARTS_PER_THREAD 1
#define WL_CLASSES 16
#define WL_MAX (1u << WL_CLASSES) /* words */
#define WL_CHUNK (2u << 20)       /* bytes */
#define BATCH_MAX 32
#define CANDS BATCH_MAX
struct part {
	struct pair *pairs;
	size_t npairs, paircap;
	uint32_t *pidx;        /* hash slot -> pair index + 1, 0 = empty */
	size_t pmask;
	struct heap_ent *heap;
	size_t nheap, heapcap;
	/* the pairs kept off the heap: those of count 2^k .. 2^(k+1) - 1 when filed
	 * in cold[k], for every k below hlog (hfile) */
	struct coldlist {
		uint32_t *q;
		size_t n, cap;
	} cold[64];
	int hlog;
	uint64_t cold_bytes;
	uint32_t *touched;     /* pairs whose count rose in this step */
	size_t ntouched, tcap;
	uint64_t where_bytes;
	/* where lists of up to WL_MAX words come from the part's own pool (wl_new):
	 * blocks of 2^k words, each class with a list of those given back, carved
	 * from chunks of WL_CHUNK bytes mapped for the part; longer lists are malloc'd */
	struct wlpool {
		uint32_t *free[WL_CLASSES + 1]; /* 2^k words or more each, linked by their first 8 bytes */
		char *at, *end;                 /* what the newest chunk has not handed out */
		char *ahead;                    /* ... and where it is faulted in to (part_ahead) */
		void *chunks;                   /* linked by their first 8 bytes */
		uint32_t *big;                  /* pairs given a malloc'd list (a pair twice, or one
						 * since freed, is checked at the end) */
		size_t nbig, capbig;
	} wl;
	/* the part's best pairs, best first, off the heap (fill_cands): the
	 * batch's pick reads these, not the heap another thread keeps */
	struct cand {
		struct heap_ent e;
		uint32_t q, nwhere;   /* the pair's index, and its where list */
		const uint32_t *where;
		uint64_t h;           /* token_hash of the pair */
	} cand[CANDS];
	uint32_t ncand, used;  /* used: taken by the last batch, from the first */
	/* the pairs stage B last looked up, by a few bits of their hash: a big merge's
	 * changes hit the same neighbouring pairs again and again (every word with "th"
	 * before an "e" takes one from (h, e)), and a hit saves a lookup in the tables.
	 * A pair's index never changes, so an entry holds across steps (key 0: none) */
	struct {
		uint64_t key;
		uint32_t q;
	} memo[256];
	int rc;
	uint32_t claimed;      /* the last step (or CLAIM_*) whose work item took this part */
	size_t ahead;          /* bytes of pairs written or faulted in ahead (part_ahead) */
} __attribute__((aligned(64)));

/* stage A's working copy of a word, per thread */
struct scratch {
	uint32_t *old;
	uint8_t *m;
	size_t cap;
	/* the falls noted since the last flush, summed by pair (fall_note) */
	struct fall {
		uint64_t key;
		int64_t d;
	} *fall;
	uint32_t *fused;       /* the slots of fall in use, nfall of them */
	size_t fmask, nfall;
	int rc;
} __attribute__((aligned(64)));

/* a class of words in stage A of a step: the worker that claims it lists its
 * words, then any worker rewrites them, a chunk at a time */
struct wclass {
	uint32_t claimed;      /* the last step that listed the class's words */
	uint32_t ready;        /* ... and published the list */
	uint32_t next, done;   /* entries of the list claimed, and rewritten */
	uint32_t *list;
	size_t n, cap;
} __attribute__((aligned(64)));

struct trainer {
	/* words */
	uint32_t *sym;
	uint64_t *woff;
	uint32_t *wlen;
	uint64_t *wcnt;
	uint32_t *wstamp;
	size_t nwords;
	/* tokens */
	uint8_t *tb;
	uint32_t *toff;
	size_t tbcap, toffcap;
	uint32_t ntok;
	uint64_t *th;          /* token string hash table: hash|1 -> id */
	uint32_t *tid;
	size_t tmask;
	/* words are dealt to the threads' classes in blocks of 2^wshift: word w is
	 * class wclass[(w >> wshift) & 255]'s */
	uint8_t wclass[256];
	int wshift;
	int vfilter;           /* class_words may filter 16 words at once (class_pick16) */
	struct wclass *A;      /* nt classes */
	/* nt threads; the pairs in np parts, PARTS_PER_THREAD a thread; db[t * np + p]:
	 * the changes thread t noted for part p */
	int nt, np;
	size_t page;           /* the system's page size (part_ahead) */
	struct part *P;
	uint64_t applied;      /* parts through stage B in all steps: np * (step + 1) once
				* step is done */
	struct dbuf *db;
	struct scratch *S;
	/* tie ranks of the byte tokens and their inverse (merged tokens rank as their id) */
	uint32_t rank[256], unrank[256];
	/* token id -> 1 + the batch's last merge whose pair it starts (the others
	 * by step_job.anext), 0 for none; and whether it ends one of the batch's pairs */
	uint8_t *bidx, *bsec;
};

/*
 * Order the words by their first 8 bytes, as bytes compare (an LSD radix sort of
 * the big-endian prefixes, 16 bits a pass). No result depends on the words' order,
 * but this one is faster to train on: words that share a start sit together, so
 * the words of a pair's where list are often neighbours in memory, and rewriting
 * them reads runs of lines rather than a line a word. The prefix gives nearly all
 * of a full sort's locality and needs no comparisons through the table.
 *
 * Each step runs as one work pool item a part (a range of the table's slots, or
 * of the words), and parts keep their order, so the sort is stable: ties keep the
 * table's order, whatever the number of threads.
 */
struct order_job {
	const struct lmt_wordcount *wc;
	uint32_t parts;
	size_t k;
	size_t *first;         /* per part: its words, then the index of its first */
	uint64_t *nsym;        /* per part: its words' symbols */
	uint64_t *key, *key2;  /* the words' prefixes, and the next pass's */
	uint64_t *val, *val2;  /* their slots | length << 40 */
	uint32_t *cnt;         /* per part: 65536 digit counts, then where each goes */
	int shift;
};

#define VAL_SLOT(v) ((v) & (((uint64_t)1 << 40) - 1))
#define VAL_LEN(v) ((uint32_t)((v) >> 40))

/* Share i of n things split into parts near-equal shares: [*lo, *hi). */
static void share_of(size_t n, uint32_t parts, uint32_t i, size_t *lo, size_t *hi)
{
	*lo = n / parts * i + LMT_MIN(i, n % parts);
	*hi = *lo + n / parts + (i < n % parts);
}

/* the words (of two bytes or more: single bytes have no pairs) of a part's slots */
static void order_scan(void *ctx, uint32_t part, int worker)
{
	struct order_job *O = ctx;
	size_t lo, hi, n = 0;
	uint64_t sym = 0;
	(void)worker;
	share_of(O->wc->mask + 1, O->parts, part, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		uint32_t len = O->wc->s[i].key & WC_MAXLEN;
		if (O->wc->s[i].h && len >= 2) {
			n++;
			sym += len;
		}
	}
	O->first[part] = n;
	O->nsym[part] = sym;
}

static void order_list(void *ctx, uint32_t part, int worker)
{
	struct order_job *O = ctx;
	size_t lo, hi, j = O->first[part];
	(void)worker;
	share_of(O->wc->mask + 1, O->parts, part, &lo, &hi);
	for (size_t i = lo; i < hi; i++) {
		uint64_t kk = O->wc->s[i].key, x = 0;
		uint32_t len = kk & WC_MAXLEN;
		if (!O->wc->s[i].h || len < 2)
			continue;
		memcpy(&x, O->wc->arena + (kk >> 24), LMT_MIN(len, 8));
		O->key[j] = __builtin_bswap64(x);
		O->val[j++] = i | (uint64_t)len << 40;
	}
}

/* One radix pass over a part's words: count its digits (scatter 0), or move each
 * word to where its digit's count says (scatter 1) */
static void order_pass(const struct order_job *O, uint32_t part, int scatter)
{
	uint32_t *cnt = O->cnt + (size_t)part * 65536;
	size_t lo, hi;
	share_of(O->k, O->parts, part, &lo, &hi);
	if (!scatter) {
		memset(cnt, 0, 65536 * sizeof *cnt);
		for (size_t i = lo; i < hi; i++)
			cnt[O->key[i] >> O->shift & 0xffff]++;
		return;
	}
	for (size_t i = lo; i < hi; i++) {
		uint32_t o = cnt[O->key[i] >> O->shift & 0xffff]++;
		O->key2[o] = O->key[i];
		O->val2[o] = O->val[i];
	}
}

static void order_hist(void *ctx, uint32_t part, int worker)
{
	(void)worker;
	order_pass(ctx, part, 0);
}

static void order_scatter(void *ctx, uint32_t part, int worker)
{
	(void)worker;
	order_pass(ctx, part, 1);
}

/* The words in order, as slot | length << 40 in *val (*k of them, *nsym symbols in
 * all); 0 or LMT_ENOMEM. */
static int order_words(const struct lmt_wordcount *wc, struct lmt_workpool *pool, uint32_t parts,
		       uint64_t **val, size_t *k, uint64_t *nsym)
{
	struct order_job O = { .wc = wc, .parts = parts };
	O.first = calloc(parts, sizeof *O.first);
	O.nsym = calloc(parts, sizeof *O.nsym);
	O.cnt = malloc((size_t)parts * 65536 * sizeof *O.cnt);
	if (!O.first || !O.nsym || !O.cnt)
		goto nomem;
	lmt_workpool_run(pool, order_scan, &O, parts);
	*nsym = 0;
	for (uint32_t p = 0; p < parts; p++) {
		size_t n = O.first[p];
		O.first[p] = O.k;
		O.k += n;
		*nsym += O.nsym[p];
	}
	O.key = malloc((O.k ? O.k : 1) * 2 * sizeof *O.key);
	O.val = malloc((O.k ? O.k : 1) * 2 * sizeof *O.val);
	if (!O.key || !O.val || O.k > UINT32_MAX)
		goto nomem;
	O.key2 = O.key + O.k;
	O.val2 = O.val + O.k;
	lmt_workpool_run(pool, order_list, &O, parts);
	for (O.shift = 0; O.k && O.shift < 64; O.shift += 16) {
		lmt_workpool_run(pool, order_hist, &O, parts);
		uint32_t d0 = O.key[0] >> O.shift & 0xffff;
		size_t sum = 0;
		for (uint32_t p = 0; p < parts; p++)
			sum += O.cnt[(size_t)p * 65536 + d0];
		if (sum == O.k)
			continue; /* one digit value: this pass would not move anything */
		sum = 0;
		for (size_t d = 0; d < 65536; d++)
			for (uint32_t p = 0; p < parts; p++) {
				uint32_t c = O.cnt[(size_t)p * 65536 + d];
				O.cnt[(size_t)p * 65536 + d] = (uint32_t)sum;
				sum += c;
			}
		lmt_workpool_run(pool, order_scatter, &O, parts);
		uint64_t *t = O.key;
		O.key = O.key2;
		O.key2 = t;
		t = O.val;
		O.val = O.val2;
		O.val2 = t;
	}
	free(O.first);
	free(O.nsym);
	free(O.cnt);
	free(O.key < O.key2 ? O.key : O.key2);
	/* the sorted half to the front, the other half freed with it */
	if (O.val2 < O.val)
		memmove(O.val2, O.val, O.k * sizeof *O.val);
	*val = O.val < O.val2 ? O.val : O.val2;
	*k = O.k;
	return 0;
nomem:
	free(O.first);
	free(O.nsym);
	free(O.cnt);
	free(O.key);
	free(O.val);
	return LMT_ENOMEM;
}

static inline uint64_t pkey(uint32_t a, uint32_t b)
{
	return ((uint64_t)a << 32 | b) + 1;
}

static inline uint32_t key_a(uint64_t key)
{
	return (uint32_t)((key - 1) >> 32);
}

static inline uint32_t key_b(uint64_t key)
{
	return (uint32_t)(key - 1);
}

/* the part of a pair: the high half of its hash scaled to the parts (a multiply, not
 * a division; the table slots take the low bits) */
static inline int part_of(const struct trainer *T, uint64_t mix)
{
	return (int)(((mix >> 32) * (uint64_t)T->np) >> 32);
}

static inline uint32_t rank_of(const struct trainer *T, uint32_t id)
{
	return id < 256 ? T->rank[id] : id;
}

static inline uint32_t id_of(const struct trainer *T, uint32_t rank)
{
	return rank < 256 ? T->unrank[rank] : rank;
}

static inline int heap_gt(const struct heap_ent *x, const struct heap_ent *y)
{
	if (x->count != y->count)
		return x->count > y->count;
	if (x->ra != y->ra)
		return x->ra < y->ra;
	return x->rb < y->rb;
}

/*
 * The heaps are 4-ary: half the levels of a binary heap, and the four children of a
 * node lie in two cache lines, the most their 96 bytes can (each heap's array starts
 * HEAP_PAD entries into a line, so a node's children start at a multiple of 32).
 * A pop walks from the top of a heap to its bottom.
 */
#define HEAP_PAD 3

static void hsift_down(struct heap_ent *h, size_t n, size_t i)
{
	struct heap_ent x = h[i];
	for (;;) {
		size_t c = 4 * i + 1, e = LMT_MIN(c + 4, n), best = c;
		if (c >= n)
			break;
		for (size_t j = c + 1; j < e; j++)
			if (heap_gt(&h[j], &h[best]))
				best = j;
		if (!heap_gt(&h[best], &x))
			break;
		h[i] = h[best];
		i = best;
	}
	h[i] = x;
}

/* Room for one more entry in P's heap, keeping its alignment. */
static int heap_room(struct part *P)
{
	if (P->nheap < P->heapcap)
		return 0;
	size_t cap = P->heapcap ? P->heapcap * 2 : 1021;
	size_t bytes = ((cap + HEAP_PAD) * sizeof(struct heap_ent) + 63) & ~(size_t)63;
	struct heap_ent *h = aligned_alloc(64, bytes);
	if (!h)
		return LMT_ENOMEM;
	if (P->heap) {
		memcpy(h + HEAP_PAD, P->heap, P->nheap * sizeof *h);
		free(P->heap - HEAP_PAD);
	}
	P->heap = h + HEAP_PAD;
	P->heapcap = bytes / sizeof *h - HEAP_PAD;
	return 0;
}

static int heap_push(struct part *P, struct heap_ent x)
{
	if (heap_room(P))
		return LMT_ENOMEM;
	size_t i = P->nheap++;
	while (i > 0) {
		size_t p = (i - 1) / 4;
		if (!heap_gt(&x, &P->heap[p]))
			break;
		P->heap[i] = P->heap[p];
		i = p;
	}
	P->heap[i] = x;
	return 0;
}

/* The heap entry of P's pair q with its count now. */
static inline struct heap_ent hent(const struct trainer *T, const struct part *P, uint32_t q)
{
	const struct pair *Q = &P->pairs[q];
	return (struct heap_ent){ Q->count, rank_of(T, key_a(Q->key)), rank_of(T, key_b(Q->key)), q };
}

/* The largest k with 2^k <= x (x > 0): a count's cold list, a block's class. */
static inline int log2_of(uint64_t x)
{
	return 63 - __builtin_clzll(x);
}

/* Push P's pair q with its count now. */
static int hpush(const struct trainer *T, struct part *P, uint32_t q)
{
	return heap_push(P, hent(T, P, q));
}

static void hpop(struct part *P)
{
	P->heap[0] = P->heap[--P->nheap];
	if (P->nheap)
		hsift_down(P->heap, P->nheap, 0);
}

/*
 * The heap holds every pair of P whose count is 2^hlog or more, and the cold lists
 * the others, by the power of two of their count when filed: most of the millions
 * of pairs the merges make occur a few times and are never merged, and a heap of
 * them all is many times larger than the caches, which every pop walks through. A
 * count that rises files its pair again (a count falling leaves its entry or filing
 * stale, as the heap's are). When the heap's best is below 2^hlog (or the heap is
 * empty), a pair of a cold list may be better: hlog goes one down and that list is
 * pushed (hopen).
 */
static int hfile(const struct trainer *T, struct part *P, uint32_t q)
{
	int k = log2_of((uint64_t)P->pairs[q].count);
	if (k >= P->hlog)
		return hpush(T, P, q);
	struct coldlist *C = &P->cold[k];
	if (C->n == C->cap) {
		size_t old = C->cap;
		if (LMT_GROW(C->q, C->cap, C->n + 1))
			return LMT_ENOMEM;
		P->cold_bytes += (C->cap - old) * sizeof *C->q;
	}
	C->q[C->n++] = q;
	return 0;
}

/*
 * Open the cold list below hlog: each pair in it is filed again at its count now,
 * on the heap or, if its count fell, in a list further down. A list is opened when
 * the heap's best is below 2^hlog, most often when the heap is empty (in the
 * benchmarks' runs always), and may hold tens of thousands of pairs, read in the
 * order they were filed (their pairs fetched PF_OPEN ahead). Those for the heap
 * are appended and the heap is made again from the bottom up (Floyd's), in time
 * linear in its size, where pushing them one by one took n log n. A part opens a
 * list at most once for each power of two, so this is at most 63 passes over its
 * heap in a run. Opening took 4-7 ms of a -j1 run on the synthetic corpus, 2 ms
 * now, in a few steps, each of which kept the other threads waiting at -j2.
 */
#define PF_OPEN 16
static int hopen(const struct trainer *T, struct part *P)
{
	struct coldlist C = P->cold[--P->hlog];
	memset(&P->cold[P->hlog], 0, sizeof C);
	const size_t old = P->nheap;
	int rc = 0;
	for (size_t i = 0; i < C.n && !rc; i++) {
		if (i + PF_OPEN < C.n)
			__builtin_prefetch(&P->pairs[C.q[i + PF_OPEN]]);
		const uint32_t q = C.q[i];
		if (P->pairs[q].count <= 0)
			continue;
		if (log2_of((uint64_t)P->pairs[q].count) < P->hlog)
			rc = hfile(T, P, q); /* a list further down */
		else if (!(rc = heap_room(P)))
			P->heap[P->nheap++] = hent(T, P, q);
	}
	if (P->nheap > old)
		for (size_t i = P->nheap > 1 ? (P->nheap - 2) / 4 + 1 : 0; i-- > 0;)
			hsift_down(P->heap, P->nheap, i);
	P->cold_bytes -= C.cap * sizeof *C.q;
	free(C.q);
	return rc ? LMT_ENOMEM : 0;
}

static inline size_t pslot(const struct part *P, uint64_t key, uint64_t mix)
{
	size_t i = mix & P->pmask;
	for (;;) {
		uint32_t v = P->pidx[i];
		if (!v || P->pairs[v - 1].key == key)
			return i;
		i = (i + 1) & P->pmask;
	}
}

static int prehash(struct part *P)
{
	size_t nm = P->pmask * 2 + 1;
	uint32_t *p = lmt_zalloc(nm + 1, sizeof *p);
	if (!p)
		return LMT_ENOMEM;
	free(P->pidx);
	P->pidx = p;
	P->pmask = nm;
	for (size_t k = 0; k < P->npairs; k++) {
		uint64_t key = P->pairs[k].key;
		P->pidx[pslot(P, key, lmt_mix64(key))] = (uint32_t)(k + 1);
	}
	return 0;
}

/* Pair index in P, created with count 0 if absent; -1 on allocation failure. */
static long pget(struct part *P, uint64_t key, uint64_t mix)
{
	size_t i = pslot(P, key, mix);
	if (P->pidx[i])
		return (long)P->pidx[i] - 1;
	if (P->npairs >= UINT32_MAX - 1 || LMT_VGROW(P->pairs, P->paircap, P->npairs + 1))
		return -1;
	struct pair *p = &P->pairs[P->npairs];
	memset(p, 0, sizeof *p);
	p->key = key;
	p->stamp = UINT32_MAX;
	P->pidx[i] = (uint32_t)++P->npairs;
	if (P->npairs * 2 > P->pmask && prehash(P))
		return -1;
	return (long)P->npairs - 1;
}

/*
 * Where lists, from their part's pool. glibc's malloc gave them to the main thread
 * from its main arena and to the others from an arena of their own, which grows a
 * few pages at a time, an mprotect call each (1,130 in a tok-train -j2 run on the
 * real corpus, `strace -c`; 47 now); and freeing a million small lists at the end
 * took milliseconds. A part's
 * pool is used by the thread that holds the part, so it takes no lock, and its
 * chunks are unmapped at the end as they are. 8 bytes a list of 2 words, where
 * malloc took 32. Merging took 8-9% less time at -j1 and -j2 on both benchmark
 * corpora (the paired harness, 8-20 rounds).
 */

/* the next block on a free list, kept in a block's first 8 bytes */
static inline uint32_t *wl_next(const uint32_t *b)
{
	uint32_t *next;
	memcpy(&next, b, sizeof next);
	return next;
}

/* A block of *words words (even, at most WL_MAX) from P's pool: with exact, that
 * many, carved from the newest chunk; else the smallest class that holds them
 * (*words set to its size), given back before if one is. NULL: out of memory. */
static uint32_t *wl_take(struct part *P, uint32_t *words, int exact)
{
	struct wlpool *W = &P->wl;
	if (!exact) {
		int k = *words <= 2 ? 1 : 64 - __builtin_clzll((uint64_t)*words - 1);
		*words = 1u << k;
		uint32_t *b = W->free[k];
		if (b) {
			WL_UNPOISON(b, (size_t)*words * 4);
			W->free[k] = wl_next(b);
			return b;
		}
	}
	size_t bytes = (size_t)*words * 4;
	if ((size_t)(W->end - W->at) < bytes + WL_RED) {
		char *c = mmap(NULL, WL_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c == MAP_FAILED)
			return NULL;
		memcpy(c, &W->chunks, sizeof W->chunks);
		W->chunks = c;
		W->at = W->ahead = c + 64;
		W->end = c + WL_CHUNK;
		WL_POISON(W->at, (size_t)(W->end - W->at));
	}
	uint32_t *b = (uint32_t *)(void *)W->at;
	W->at += bytes + WL_RED;
	WL_UNPOISON(b, bytes);
	return b;
}

/* A list of *cap words for P's pair q (*cap rounded up as wl_take does): from the
 * pool, or malloc'd when longer than WL_MAX. NULL: out of memory. */
static uint32_t *wl_new(struct part *P, uint32_t q, uint32_t *cap, int exact)
{
	if (*cap <= WL_MAX)
		return wl_take(P, cap, exact);
	if (LMT_GROW(P->wl.big, P->wl.capbig, P->wl.nbig + 1))
		return NULL;
	P->wl.big[P->wl.nbig++] = q;
	return malloc((size_t)*cap * 4);
}

/* Give back a list of cap words (NULL: none). */
static void wl_give(struct part *P, uint32_t *where, uint32_t cap)
{
	if (!where)
		return;
	if (cap > WL_MAX) {
		free(where);
		return;
	}
	int k = log2_of(cap);
	memcpy(where, &P->wl.free[k], sizeof P->wl.free[k]);
	WL_POISON(where + 2, (size_t)(cap - 2) * 4);
	P->wl.free[k] = where;
}

/* Unmap P's pool, and free its pairs' malloc'd lists. */
static void wl_free(struct part *P)
{
	for (size_t i = 0; i < P->wl.nbig; i++) {
		struct pair *Q = &P->pairs[P->wl.big[i]];
		if (Q->capwhere > WL_MAX) {
			free(Q->where);
			Q->where = NULL;
			Q->capwhere = 0;
		}
	}
	free(P->wl.big);
	for (void *c = P->wl.chunks, *next; c; c = next) {
		WL_UNPOISON(c, WL_CHUNK);
		memcpy(&next, c, sizeof next);
		munmap(c, WL_CHUNK);
	}
	memset(&P->wl, 0, sizeof P->wl);
}

static int where_add(struct part *P, struct pair *p, uint32_t w)
{
	if (p->nwhere && p->where[p->nwhere - 1] == w)
		return 0;
	if (p->nwhere == p->capwhere) {
		uint32_t nc = p->capwhere ? p->capwhere * 2 : 2, *n;
		if (p->capwhere > WL_MAX) {
			n = realloc(p->where, (size_t)nc * 4);
		} else if ((n = wl_new(P, (uint32_t)(p - P->pairs), &nc, 0))) {
			if (p->nwhere)
				memcpy(n, p->where, (size_t)p->nwhere * 4);
			wl_give(P, p->where, p->capwhere);
		}
		if (!n)
			return LMT_ENOMEM;
		P->where_bytes += (uint64_t)(nc - p->capwhere) * 4;
		p->where = n;
		p->capwhere = nc;
	}
	p->where[p->nwhere++] = w;
	return 0;
}

static inline uint32_t tlen(const struct trainer *T, uint32_t id)
{
	return T->toff[id + 1] - T->toff[id];
}

/* The hash of the concatenation of tokens a and b (token_for's), or 0 for one
 * too long to hash here. */
static uint64_t token_hash(const struct trainer *T, uint32_t a, uint32_t b)
{
	uint8_t s[256];
	uint32_t la = tlen(T, a), lb = tlen(T, b);
	if (la + lb > sizeof s)
		return 0;
	memcpy(s, T->tb + T->toff[a], la);
	memcpy(s + la, T->tb + T->toff[b], lb);
	return lmt_hash_bytes(s, la + lb, 0) | 1;
}

/* Id of the concatenation of tokens a and b: an existing one, or a new one. h is
 * its token_hash, or 0. */
static long token_for(struct trainer *T, uint32_t a, uint32_t b, uint64_t h, int *is_new)
{
	uint32_t la = tlen(T, a), lb = tlen(T, b);
	size_t used = T->toff[T->ntok];
	if (LMT_GROW(T->tb, T->tbcap, used + la + lb) || LMT_GROW(T->toff, T->toffcap, T->ntok + 2))
		return -1;
	uint8_t *s = T->tb + used;
	memcpy(s, T->tb + T->toff[a], la);
	memcpy(s + la, T->tb + T->toff[b], lb);
	if (!h)
		h = lmt_hash_bytes(s, la + lb, 0) | 1;
	size_t i = h & T->tmask;
	while (T->th[i]) {
		if (T->th[i] == h) {
			uint32_t id = T->tid[i];
			if (tlen(T, id) == la + lb && !memcmp(T->tb + T->toff[id], s, la + lb)) {
				*is_new = 0;
				return id;
			}
		}
		i = (i + 1) & T->tmask;
	}
	*is_new = 1;
	uint32_t id = T->ntok++;
	T->toff[id + 1] = (uint32_t)(used + la + lb);
	T->th[i] = h;
	T->tid[i] = id;
	return id;
}

/* Free what a part holds, and leave it empty. */
static void part_free(struct part *P)
{
	wl_free(P);
	LMT_VFREE(P->pairs, P->paircap);
	free(P->pidx);
	if (P->heap)
		free(P->heap - HEAP_PAD);
	for (int k = 0; k < 64; k++)
		free(P->cold[k].q);
	free(P->touched);
	P->pairs = NULL;
	P->npairs = P->paircap = 0;
	P->pidx = NULL;
	P->heap = NULL;
	P->touched = NULL;
	memset(P->cold, 0, sizeof P->cold);
}

static void trainer_free(struct trainer *T)
{
	free(T->sym);
	free(T->woff);
	free(T->wlen);
	free(T->wcnt);
	free(T->wstamp);
	free(T->bidx);
	free(T->bsec);
	free(T->tb);
	free(T->toff);
	free(T->th);
	free(T->tid);
	for (int p = 0; T->P && p < T->np; p++)
		part_free(&T->P[p]);
	free(T->P);
	for (size_t i = 0; T->db && i < (size_t)T->nt * (size_t)T->np; i++)
		free(T->db[i].v);
	free(T->db);
	for (int t = 0; T->S && t < T->nt; t++) {
		free(T->S[t].old);
		free(T->S[t].m);
		free(T->S[t].fall);
		free(T->S[t].fused);
	}
	free(T->S);
	for (int c = 0; T->A && c < T->nt; c++)
		free(T->A[c].list);
	free(T->A);
}

void lmt_bpe_result_release(struct lmt_bpe_result *r)
{
	free(r->merge);
	free(r->bytes);
	free(r->off);
	memset(r, 0, sizeof *r);
}

/* The tie ranks. ID: a byte's rank is its value. HF: the order of the characters
 * GPT-2's bytes_to_unicode maps the bytes to (printable bytes 33-126, 161-172,
 * 174-255 map to themselves, the other 68 to 256, 257, ... in byte order), which is
 * the order of the ids HuggingFace's BpeTrainer gives its alphabet. */
static void set_ranks(struct trainer *T, int ties)
{
	uint32_t r = 0;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t b = 0; b < 256; b++) {
			int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
			if (ties == LMT_BPE_TIES_HF ? printable == (pass == 0) : pass == 0)
				T->rank[b] = r++;
		}
	for (uint32_t b = 0; b < 256; b++)
		T->unrank[T->rank[b]] = b;
}

static inline void put_delta(struct trainer *T, struct dbuf *db, struct scratch *S, uint64_t key, int64_t d,
			     uint32_t w, uint32_t add)
{
	uint64_t mix = lmt_mix64(key);
	struct dbuf *B = &db[part_of(T, mix)];
	if (B->n == B->cap && LMT_GROW(B->v, B->cap, B->n + 1)) {
		S->rc = LMT_ENOMEM;
		return;
	}
	B->v[B->n++] = (struct delta){ key | (uint64_t)add << 63, d, w, (uint32_t)mix };
}

static inline void note(struct trainer *T, struct dbuf *db, struct scratch *S, uint32_t x, uint32_t y,
			int64_t d, uint32_t w, uint32_t add)
{
	put_delta(T, db, S, pkey(x, y), d, w, add);
}

/* Hand the summed falls over to the parts (fall_note). */
static void fall_flush(struct trainer *T, struct dbuf *db, struct scratch *S)
{
	for (size_t k = 0; k < S->nfall; k++) {
		struct fall *f = &S->fall[S->fused[k]];
		if (f->d)
			put_delta(T, db, S, f->key, f->d, 0, 0);
		f->key = 0;
		f->d = 0;
	}
	S->nfall = 0;
}

/* The merges of one step (a batch, see lmt_bpe_train), their where lists and
 * where they are in the parts, as the work pool's items see them. */
struct step_job {
	struct trainer *T;
	uint32_t step, maxlen;
	uint32_t nm;           /* merges in the batch, at least 1 */
	int sum_falls;         /* a big step: falls are summed by pair in stage A (fall_note) */
	uint32_t a[BATCH_MAX], b[BATCH_MAX], c[BATCH_MAX];
	uint8_t anext[BATCH_MAX];  /* 1 + the batch's merge before it with the same a, or 0 */
	const uint32_t *where[BATCH_MAX];
	uint32_t nwhere[BATCH_MAX];
	struct part *Pab[BATCH_MAX];  /* each merged pair's part, and its index there */
	long pi[BATCH_MAX];
	const struct lmt_wordcount *wc;
	const uint64_t *order;
};

/* The batch's merge whose pair starts at s[0] (s[1] must exist), or -1. */
static inline int site_at(const struct trainer *T, const struct step_job *J, const uint32_t *s)
{
	for (int k = T->bidx[s[0]]; k; k = J->anext[k - 1])
		if (s[1] == J->b[k - 1])
			return k - 1;
	return -1;
}

/*
 * In a big step the falls a thread notes are summed by pair before they go to the
 * parts: most of them hit the same neighbouring pairs (every word with "th" before
 * an "e" takes one from (h, e)), and each change handed over costs its part's
 * thread a lookup in tables larger than the caches, and half of them cross to the
 * other core. A rise is handed over as it is: its word joins the pair's where list.
 */
static void fall_note(struct trainer *T, struct dbuf *db, struct scratch *S, uint32_t x, uint32_t y, int64_t d)
{
	uint64_t key = pkey(x, y);
	if (S->nfall * 2 >= S->fmask) {
		/* full: hand the sums over and start again, twice the size */
		size_t n = S->fmask ? 2 * (S->fmask + 1) : 1024;
		struct fall *f = lmt_zalloc(n, sizeof *f);
		uint32_t *u = f ? malloc(n / 2 * sizeof *u) : NULL;
		if (!u) {
			free(f);
			note(T, db, S, x, y, d, 0, 0);
			return;
		}
		fall_flush(T, db, S);
		free(S->fall);
		free(S->fused);
		S->fall = f;
		S->fused = u;
		S->fmask = n - 1;
	}
	size_t i = lmt_mix64(key) >> 20 & S->fmask;
	while (S->fall[i].key && S->fall[i].key != key)
		i = (i + 1) & S->fmask;
	if (!S->fall[i].key) {
		S->fall[i].key = key;
		S->fused[S->nfall++] = (uint32_t)i;
	}
	S->fall[i].d += d;
}

/*
 * Stage A for the entries [lo, hi) of a class's list of nlist words, in thread t:
 * rewrite each word with every merge of the batch and note the changes of the
 * pairs next to merge sites. Changes to the merged pairs themselves are not noted:
 * their counts are 0 after the step.
 */
#define PF_FAR 16
#define PF_NEAR 8

static void rewrite_words(struct trainer *T, const struct step_job *J, const uint32_t *where, size_t lo,
			  size_t hi, size_t nlist, int t)
{
	struct scratch *S = &T->S[t];
	struct dbuf *db = T->db + (size_t)t * (size_t)T->np;
	for (size_t wi = lo; wi < hi && !S->rc; wi++) {
		/* The words are scattered over arrays larger than the caches: without
		 * prefetching, each word waits for a miss on its metadata, then one
		 * on its symbols. The list says which words come next, so fetch the
		 * metadata of the word PF_FAR entries ahead and the symbols of the one
		 * PF_NEAR ahead (its woff fetched by then), past the chunk's end too. */
		if (wi + PF_FAR < nlist) {
			uint32_t f = where[wi + PF_FAR];
			__builtin_prefetch(&T->woff[f]);
			__builtin_prefetch(&T->wlen[f]);
			__builtin_prefetch(&T->wcnt[f]);
		}
		if (wi + PF_NEAR < nlist)
			__builtin_prefetch(T->sym + T->woff[where[wi + PF_NEAR]], 1);
		uint32_t w = where[wi];
		uint32_t *s = T->sym + T->woff[w], n = T->wlen[w], i;
		for (i = 0; i + 1 < n; i++)
			if (site_at(T, J, s + i) >= 0)
				break;
		if (i + 1 >= n)
			continue; /* stale entry */
		if (n > S->cap) {
			uint32_t *o = realloc(S->old, (size_t)n * sizeof *o);
			uint8_t *m = o ? realloc(S->m, n) : NULL;
			if (o)
				S->old = o;
			if (!m) {
				S->rc = LMT_ENOMEM;
				break;
			}
			S->m = m;
			S->cap = n;
		}
		uint32_t *o = S->old;
		uint8_t *m = S->m;
		memcpy(o, s, (size_t)n * sizeof *o);
		int64_t cnt = (int64_t)T->wcnt[w];
		/* the merge sites, left to right without overlap (which matters only
		 * for a pair of one token twice): m is 1 + the merge at a site's first
		 * symbol, BATCH_MAX + 1 at its second */
		memset(m, 0, n);
		for (uint32_t x = i; x + 1 < n;) {
			int k = site_at(T, J, o + x);
			if (k >= 0) {
				m[x] = (uint8_t)(k + 1);
				m[x + 1] = BATCH_MAX + 1;
				x += 2;
			} else {
				x++;
			}
		}
		for (uint32_t x = 0; x + 1 < n; x++)
			if ((m[x] | m[x + 1]) && site_at(T, J, o + x) < 0) {
				if (J->sum_falls)
					fall_note(T, db, S, o[x], o[x + 1], -cnt);
				else
					note(T, db, S, o[x], o[x + 1], -cnt, w, 0);
			}
		/* the new word; m[j] now marks a merged symbol of it */
		uint32_t j = 0;
		for (uint32_t x = 0; x < n;) {
			if (m[x] && m[x] <= BATCH_MAX) {
				s[j] = J->c[m[x] - 1];
				m[j++] = 1;
				x += 2;
			} else {
				m[j] = 0;
				s[j++] = o[x++];
			}
		}
		T->wlen[w] = j;
		for (uint32_t x = 0; x + 1 < j; x++)
			if (m[x] | m[x + 1])
				note(T, db, S, s[x], s[x + 1], cnt, w, 1);
	}
}

/* Stage B for part p: apply every thread's changes for it, file the pairs that rose. */
static void apply_part(struct trainer *T, int p, uint32_t step, uint32_t maxlen)
{
	struct part *P = &T->P[p];
	P->ntouched = 0;
	for (int t = 0; t < T->nt; t++) {
		struct dbuf *B = &T->db[(size_t)t * (size_t)T->np + (size_t)p];
		for (size_t k = 0; k < B->n && !P->rc; k++) {
			/* each change looks up a pair in tables larger than the caches: fetch
			 * the hash slot of the change PF_FAR ahead and the pair of the one
			 * PF_NEAR ahead (its slot fetched by then), as rewrite_words does */
			if (k + PF_FAR < B->n)
				__builtin_prefetch(&P->pidx[B->v[k + PF_FAR].mix & P->pmask]);
			if (k + PF_NEAR < B->n) {
				uint32_t v = P->pidx[B->v[k + PF_NEAR].mix & P->pmask];
				if (v)
					__builtin_prefetch(&P->pairs[v - 1], 1);
			}
			const struct delta *D = &B->v[k];
			uint64_t key = D->key & ~DELTA_ADD;
			size_t mi = D->mix >> 24;
			long q;
			if (P->memo[mi].key == key) {
				q = P->memo[mi].q;
			} else {
				/* a table of more than 2^32 slots needs more of the hash */
				q = pget(P, key, P->pmask >> 32 ? lmt_mix64(key) : D->mix);
				if (q < 0) {
					P->rc = LMT_ENOMEM;
					break;
				}
				P->memo[mi].key = key;
				P->memo[mi].q = (uint32_t)q;
			}
			struct pair *Q = &P->pairs[q];
			Q->count += D->d;
			if (!(D->key & DELTA_ADD))
				continue;
			if (where_add(P, Q, D->w)) {
				P->rc = LMT_ENOMEM;
				break;
			}
			if (Q->stamp != step) {
				Q->stamp = step;
				if (LMT_GROW(P->touched, P->tcap, P->ntouched + 1)) {
					P->rc = LMT_ENOMEM;
					break;
				}
				P->touched[P->ntouched++] = (uint32_t)q;
			}
		}
		if (B->n > B->most)
			B->most = B->n;
		B->n = 0;
	}
	for (size_t k = 0; k < P->ntouched && !P->rc; k++) {
		struct pair *Q = &P->pairs[P->touched[k]];
		if (Q->count > 0 && tlen(T, key_a(Q->key)) + tlen(T, key_b(Q->key)) <= maxlen &&
		    hfile(T, P, P->touched[k]))
			P->rc = LMT_ENOMEM;
	}
}

/* Drop the stale entries at the top of P's heap (filing them again with their
 * current count), and open cold lists while the best may be in one; 1 if a fresh
 * top is left, 0 if P has no pair left, < 0 on error. */
static int clean_top(struct trainer *T, struct part *P, uint32_t *q)
{
	for (;;) {
		if (P->hlog && (!P->nheap || P->heap[0].count < ((int64_t)1 << P->hlog))) {
			if (hopen(T, P))
				return LMT_ENOMEM;
			continue;
		}
		if (!P->nheap)
			return 0;
		/* a pair on P's heap is P's, and its index there never changes */
		struct heap_ent top = P->heap[0];
		uint32_t pi = top.q;
		int64_t cur = P->pairs[pi].count;
		if (cur == top.count) {
			*q = pi;
			return 1;
		}
		hpop(P);
		if (cur > 0 && hfile(T, P, pi))
			return LMT_ENOMEM;
	}
}

/*
 * Fill P's list of best pairs (cand) up to CANDS: the ones the last batch did not
 * take, if their counts did not change, and the heap's best. Every entry of the
 * list is fresh and better than any on the heap, so the list is the part's best
 * pairs in order; a pair whose count changed is filed again. 0, or < 0 on error.
 */
static int fill_cands(struct trainer *T, struct part *P)
{
	struct cand keep[CANDS];
	uint32_t nk = 0, i = 0, q;
	for (uint32_t k = P->used; k < P->ncand; k++) {
		const struct cand *C = &P->cand[k];
		const struct pair *Q = &P->pairs[C->q];
		if (Q->count == C->e.count) {
			keep[nk] = *C;
			keep[nk].nwhere = Q->nwhere;
			keep[nk++].where = Q->where;
		} else if (Q->count > 0 && hfile(T, P, C->q)) {
			return LMT_ENOMEM;
		}
	}
	P->ncand = P->used = 0;
	/* the heap's top is looked up once, and again only when it is taken */
	int r = clean_top(T, P, &q);
	while (P->ncand < CANDS) {
		if (r < 0)
			return r;
		if (i < nk && (!r || heap_gt(&keep[i].e, &P->heap[0]))) {
			P->cand[P->ncand++] = keep[i++];
			continue;
		}
		if (!r)
			break;
		const struct pair *Q = &P->pairs[q];
		uint32_t a = id_of(T, P->heap[0].ra), b = id_of(T, P->heap[0].rb);
		P->cand[P->ncand++] = (struct cand){ P->heap[0], q, Q->nwhere, Q->where, token_hash(T, a, b) };
		hpop(P);
		if (P->ncand < CANDS)
			r = clean_top(T, P, &q);
	}
	for (; i < nk; i++)
		if (heap_push(P, keep[i].e))
			return LMT_ENOMEM;
	return 0;
}

#define FILL_CHUNK 4096

/* claims other than a merge step's (which are below these) */
enum {
	CLAIM_NONE = UINT32_MAX,
	CLAIM_COUNT = UINT32_MAX - 1,
	CLAIM_FILL = UINT32_MAX - 2,
	CLAIM_FREE = UINT32_MAX - 3
};

/*
 * The next part that this worker takes in a run (stamp names the run), or
 * UINT32_MAX when every part is taken: the worker's own (parts w * PARTS_PER_THREAD
 * and on for worker w) first, then the others'. So a part is counted, updated at
 * each step and freed by one thread, unless that thread was late or slow and its
 * part taken: its tables, heap and pool of where lists stay in that core's cache
 * from step to step. A thread done early takes another's part if not yet begun.
 */
static uint32_t claim_part(struct trainer *T, int worker, uint32_t stamp)
{
	uint32_t np = (uint32_t)T->np, first = (uint32_t)worker * PARTS_PER_THREAD;
	for (uint32_t i = 0; i < np; i++) {
		uint32_t p = (first + i) % np;
		if (__atomic_load_n(&T->P[p].claimed, __ATOMIC_RELAXED) != stamp &&
		    __atomic_exchange_n(&T->P[p].claimed, stamp, __ATOMIC_ACQ_REL) != stamp)
			return p;
	}
	return UINT32_MAX;
}

/* Stage B for a part, after which the batch's pairs are gone and the part's list of
 * best pairs is full again: the next batch is picked from the parts' lists. */
static void step_apply(struct step_job *J, uint32_t p)
{
	struct trainer *T = J->T;
	struct part *P = &T->P[p];
	for (uint32_t k = 0; k < J->nm; k++) {
		if (J->Pab[k] != P)
			continue;
		/* J->pi stays valid: pget may move a part's table but pair indices are stable */
		struct pair *AB = &P->pairs[J->pi[k]];
		AB->count = 0;
		wl_give(P, AB->where, AB->capwhere);
		P->where_bytes -= (uint64_t)AB->capwhere * 4;
		AB->where = NULL;
		AB->nwhere = AB->capwhere = 0;
	}
	apply_part(T, (int)p, J->step, J->maxlen);
	if (!P->rc)
		P->rc = fill_cands(T, P);
	__atomic_fetch_add(&T->applied, 1, __ATOMIC_RELEASE);
}

/*
 * Fault in a page that P will write soon: the next past its pairs, or past what
 * its pool's newest chunk has handed out, up to AHEAD_MAX bytes ahead; 0 when there
 * is none. A page first written costs a fault, 1.5 us on the 2-core VM here, and
 * training writes some 4,000 in its steps (getrusage), each while the other
 * threads wait at the end of stage B. So a thread done with its parts early does
 * this rather than wait (step_merge). The page is written as zero, which it is
 * until the part writes it. Not under AddressSanitizer, which takes a write to the
 * pool's unused bytes for one out of bounds.
 */
#define AHEAD_MAX (64u << 10)

/* the first page boundary at p or after it (page a power of two) */
static char *page_from(char *p, size_t page)
{
	return (char *)(((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1));
}

static int part_ahead(struct part *P, size_t page)
{
	if (P->pairs) {
		char *base = (char *)P->pairs, *used = base + P->npairs * sizeof *P->pairs;
		if (P->ahead < (size_t)(used - base))
			P->ahead = (size_t)(used - base);
		char *a = page_from(base + P->ahead, page);
		if (a < base + P->paircap * sizeof *P->pairs && (size_t)(a - used) < AHEAD_MAX) {
			*(volatile char *)a = 0;
			P->ahead = (size_t)(a - base) + 1;
			return 1;
		}
	}
#ifndef WL_ASAN
	struct wlpool *W = &P->wl;
	if (!W->end)
		return 0;
	if (W->ahead < W->at)
		W->ahead = W->at;
	char *a = page_from(W->ahead, page);
	if (a < W->end && (size_t)(a - W->at) < AHEAD_MAX) {
		*(volatile char *)a = 0;
		W->ahead = a + 1;
		return 1;
	}
#endif
	return 0;
}

/*
 * Append to v the words of w[0..n) that are class cls's, where a word's class is
 * (w >> sh) & (nt - 1) (nt a power of two), and return how many: class_words's
 * filter, 16 words an instruction. A class's words are about 1/nt of every list,
 * and each class's thread reads all the lists, so a thread's share of this
 * reading does not shrink with more threads. v must have room for 15 words past
 * what is appended (a whole vector is stored).
 */
#if defined(__x86_64__)
__attribute__((target("avx512f")))
static size_t class_pick16(const uint32_t *w, size_t n, uint32_t *v, int sh, uint32_t mask, uint32_t cls)
{
	const __m512i m = _mm512_set1_epi32((int)mask), c = _mm512_set1_epi32((int)cls);
	const __m128i s = _mm_cvtsi32_si128(sh);
	size_t k = 0;
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 in = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512i x = _mm512_maskz_loadu_epi32(in, w + i);
		__mmask16 hit = _mm512_mask_cmpeq_epi32_mask(in, _mm512_and_si512(_mm512_srl_epi32(x, s), m), c);
		/* compressing into a register and storing the whole vector is several
		 * times faster on Zen 4 than a compressing store */
		_mm512_storeu_si512(v + k, _mm512_maskz_compress_epi32(hit, x));
		k += (size_t)__builtin_popcount(hit);
	}
	return k;
}
#endif

/*
 * The words of class cls in the batch's where lists, each once (a word listed twice,
 * or in two lists, is stamped with the step when first met), into C's list; 0, or
 * LMT_ENOMEM (C's list then empty).
 */
static int class_words(struct trainer *T, const struct step_job *J, struct wclass *C, uint32_t cls)
{
	size_t all = 0, n = 0;
	for (uint32_t l = 0; l < J->nm; l++)
		all += J->nwhere[l];
	C->n = 0;
	if (all + 16 > C->cap && LMT_GROW(C->list, C->cap, all + 16))
		return LMT_ENOMEM;
	const int sh = T->wshift;
	uint32_t *v = C->list;
	for (uint32_t l = 0; l < J->nm; l++) {
		const uint32_t *w = J->where[l];
#if defined(__x86_64__)
		if (T->vfilter) {
			n += class_pick16(w, J->nwhere[l], v + n, sh, (uint32_t)T->nt - 1, cls);
			continue;
		}
#endif
		for (size_t i = 0; i < J->nwhere[l]; i++) {
			v[n] = w[i];
			n += T->wclass[w[i] >> sh & 255] == cls;
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (i + PF_FAR < n)
			__builtin_prefetch(&T->wstamp[v[i + PF_FAR]], 1);
		if (T->wstamp[v[i]] != J->step) {
			T->wstamp[v[i]] = J->step;
			v[k++] = v[i];
		}
	}
	C->n = k;
	return 0;
}

/* Rewrite chunks of C's list while any is left. */
#define A_CHUNK 32

static void rewrite_chunks(struct trainer *T, const struct step_job *J, struct wclass *C, int worker)
{
	size_t k, done = 0;
	while ((k = __atomic_fetch_add(&C->next, A_CHUNK, __ATOMIC_RELAXED)) < C->n) {
		size_t hi = LMT_MIN(k + A_CHUNK, C->n);
		rewrite_words(T, J, C->list, k, hi, C->n, worker);
		done += hi - k;
	}
	/* the words count as done only once the falls summed from them are handed
	 * over: stage B, which waits for all to be done, then sees every change */
	if (J->sum_falls)
		fall_flush(T, T->db + (size_t)worker * (size_t)T->np, &T->S[worker]);
	if (done)
		__atomic_fetch_add(&C->done, (uint32_t)done, __ATOMIC_RELEASE);
}

/*
 * A batch's step, as nt items of one run: each item lists the words of the classes
 * not yet listed, its worker's own first, and rewrites them a chunk at a time (stage
 * A); then rewrites what is left of any class's words and waits for the chunks
 * other workers hold; then takes a part and applies every thread's changes for it
 * (stage B). One run a step: a step late in training rewrites a few dozen words, and
 * each hand-over to the pool costs about as much as rewriting them. Words are dealt
 * to classes in blocks, so a word is rewritten by the same thread at every step
 * (its lines stay in that core's cache) unless its thread was late or slow and
 * another took its chunks: a late thread delays no one.
 */
static void step_merge(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	struct trainer *T = J->T;
	const uint32_t nt = (uint32_t)T->nt, step = J->step;
	(void)item;
	for (uint32_t i = 0; i < nt; i++) {
		uint32_t cls = ((uint32_t)worker + i) % nt;
		struct wclass *C = &T->A[cls];
		if (__atomic_exchange_n(&C->claimed, step, __ATOMIC_ACQ_REL) == step)
			continue;
		if (class_words(T, J, C, cls))
			T->S[worker].rc = LMT_ENOMEM;
		C->next = C->done = 0;
		__atomic_store_n(&C->ready, step, __ATOMIC_RELEASE);
		rewrite_chunks(T, J, C, worker);
	}
	for (unsigned turn = 0;; lmt_spin_wait(&turn)) {
		uint32_t left = 0;
		for (uint32_t i = 0; i < nt; i++) {
			struct wclass *C = &T->A[((uint32_t)worker + i) % nt];
			if (__atomic_load_n(&C->ready, __ATOMIC_ACQUIRE) != step) {
				left++;
				continue;
			}
			rewrite_chunks(T, J, C, worker);
			left += __atomic_load_n(&C->done, __ATOMIC_ACQUIRE) < C->n;
		}
		if (!left)
			break;
	}
	uint32_t mine[64], nmine = 0;
	for (uint32_t p; (p = claim_part(T, worker, step)) != UINT32_MAX;) {
		step_apply(J, p);
		if (nmine < LMT_ARRAY_SIZE(mine))
			mine[nmine++] = p;
	}
	/* while another thread still works on its parts, get these ready for later
	 * steps (no other thread touches them before this run ends) */
	const uint64_t all = (uint64_t)T->np * (step + 1);
	for (uint32_t i = 0; i < nmine && __atomic_load_n(&T->applied, __ATOMIC_ACQUIRE) < all;)
		if (!part_ahead(&T->P[mine[i]], T->page))
			i++;
}

/*
 * The initial pair counts. Before any merge every symbol is a byte, so a pair is
 * one of 65536 and is found by index, not by hash: each thread counts the pairs of
 * its range of words (count_scan); then each pair's where list is made once, at
 * its size, in its part, by the part's thread (count_build); then each thread
 * writes its words into its stretch of the lists (count_fill), so a list holds its
 * words in order; then each part's heap is filled (count_finish).
 */
struct count_job {
	struct trainer *T;
	uint32_t maxlen, heap_min;
	uint32_t (*occ)[65536];  /* per thread: its words with the pair, then where the next goes */
	uint64_t (*cnt)[65536];  /* per thread: the pair's occurrences weighted by word counts */
	uint32_t (*last)[65536]; /* per thread: 1 + the last word met with the pair */
	uint64_t (*seen)[1024];  /* per thread: a bit for each pair its words hold */
	uint32_t **where;        /* the pair's where list */
};

static void count_words(const struct count_job *C, uint32_t t, int fill)
{
	struct trainer *T = C->T;
	size_t lo, hi;
	share_of(T->nwords, (uint32_t)T->nt, t, &lo, &hi);
	uint32_t *occ = C->occ[t], *last = C->last[t];
	uint64_t *cnt = C->cnt[t];
	memset(last, 0, sizeof C->last[t]);
	for (size_t w = lo; w < hi; w++) {
		const uint32_t *s = T->sym + T->woff[w];
		for (uint32_t i = 0; i + 1 < T->wlen[w]; i++) {
			uint32_t k = s[i] << 8 | s[i + 1];
			if (!fill)
				cnt[k] += T->wcnt[w];
			if (last[k] == w + 1)
				continue; /* a word is listed once */
			last[k] = (uint32_t)w + 1;
			if (fill)
				C->where[k][occ[k]++] = (uint32_t)w;
			else
				occ[k]++;
		}
	}
}

static void count_scan(void *ctx, uint32_t item, int worker)
{
	struct count_job *C = ctx;
	(void)worker;
	count_words(C, item, 0);
	const uint32_t *occ = C->occ[item];
	for (uint32_t i = 0; i < 1024; i++) {
		uint64_t m = 0;
		for (uint32_t b = 0; b < 64; b++)
			m |= (uint64_t)(occ[i * 64 + b] != 0) << b;
		C->seen[item][i] = m;
	}
}

static void count_fill(void *ctx, uint32_t item, int worker)
{
	(void)worker;
	count_words(ctx, item, 1);
}

/* the pairs of group g's parts (g: a thread's), claimed as claim_part does */
static uint32_t claim_group(struct trainer *T, int worker, uint32_t stamp)
{
	for (uint32_t i = 0; i < (uint32_t)T->nt; i++) {
		uint32_t g = ((uint32_t)worker + i) % (uint32_t)T->nt;
		if (__atomic_exchange_n(&T->P[g * PARTS_PER_THREAD].claimed, stamp, __ATOMIC_ACQ_REL) != stamp)
			return g;
	}
	return UINT32_MAX;
}

static void count_build(void *ctx, uint32_t item, int worker)
{
	struct count_job *C = ctx;
	struct trainer *T = C->T;
	uint32_t g = claim_group(T, worker, CLAIM_COUNT);
	(void)item;
	if (g == UINT32_MAX)
		return;
	struct part *G = &T->P[g * PARTS_PER_THREAD];
	int rc = 0;
	for (int p = 0; p < PARTS_PER_THREAD; p++) {
		G[p].pmask = 1023;
		if (!(G[p].pidx = lmt_zalloc(G[p].pmask + 1, sizeof *G[p].pidx)))
			rc = LMT_ENOMEM;
	}
	/* the pairs some word holds (fewer than 17,000 of the 65536 in either benchmark
	 * corpus): each thread's counts are read only there (they were read all
	 * through, and the other threads' lines crossed between the cores as each
	 * wrote its pairs' starts) */
	for (uint32_t i = 0; i < 1024 && !rc; i++) {
		uint64_t m = 0;
		for (int t = 0; t < T->nt; t++)
			m |= C->seen[t][i];
		for (; m && !rc; m &= m - 1) {
			uint32_t k = i * 64 + (uint32_t)__builtin_ctzll(m);
			uint64_t key = pkey(k >> 8, k & 255), mix = lmt_mix64(key);
			int p = part_of(T, mix);
			if ((uint32_t)p / PARTS_PER_THREAD != g)
				continue;
			uint32_t n = 0;
			uint64_t count = 0;
			for (int t = 0; t < T->nt; t++) {
				uint32_t o = C->occ[t][k];
				C->occ[t][k] = n;
				n += o;
				count += C->cnt[t][k];
			}
			struct part *P = &T->P[p];
			long q = pget(P, key, mix);
			uint32_t cap = n <= WL_MAX ? (n + 1) & ~1u : n; /* a pool block holds a link when given back */
			uint32_t *v = q < 0 ? NULL : wl_new(P, (uint32_t)q, &cap, 1);
			if (!v) {
				rc = LMT_ENOMEM;
				break;
			}
			P->pairs[q].count = (int64_t)count;
			P->pairs[q].where = C->where[k] = v;
			P->pairs[q].nwhere = n;
			P->pairs[q].capwhere = cap;
			P->where_bytes += (uint64_t)cap * sizeof *v;
		}
	}
	for (int p = 0; p < PARTS_PER_THREAD; p++)
		G[p].rc = rc;
}

static void count_finish(void *ctx, uint32_t item, int worker)
{
	struct count_job *C = ctx;
	struct trainer *T = C->T;
	(void)item;
	for (uint32_t p; (p = claim_part(T, worker, CLAIM_FILL)) != UINT32_MAX;) {
		/* the heap starts with the pairs of the heap_min (256) or more best counts'
		 * powers of two */
		struct part *P = &T->P[p];
		size_t have[64] = { 0 }, n = 0;
		for (size_t q = 0; q < P->npairs; q++)
			have[log2_of((uint64_t)P->pairs[q].count)]++;
		for (P->hlog = 63; P->hlog > 0 && (n += have[P->hlog]) < C->heap_min; P->hlog--)
			;
		for (size_t q = 0; q < P->npairs && !P->rc; q++) {
			uint64_t key = P->pairs[q].key;
			if (tlen(T, key_a(key)) + tlen(T, key_b(key)) <= C->maxlen && hfile(T, P, (uint32_t)q))
				P->rc = LMT_ENOMEM;
		}
		if (!P->rc)
			P->rc = fill_cands(T, P);
	}
}

/*
 * The end of training, freed in parallel: the parts, each by the thread that made
 * most of its where lists (a million small blocks at the end of a real corpus's
 * training), and the word arrays, dealt to the items. Unmapping the large arrays
 * costs a few milliseconds each, which the threads share.
 */
static void step_free(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	struct trainer *T = J->T;
	for (uint32_t p; (p = claim_part(T, worker, CLAIM_FREE)) != UINT32_MAX;)
		part_free(&T->P[p]);
	for (uint32_t i = item; i < 5; i += (uint32_t)T->nt)
		switch (i) {
		case 0: free(T->sym); T->sym = NULL; break;
		case 1: free(T->woff); T->woff = NULL; break;
		case 2: free(T->wcnt); T->wcnt = NULL; break;
		case 3: free(T->wlen); T->wlen = NULL; break;
		case 4: free(T->wstamp); T->wstamp = NULL; break;
		}
}

/* the words' symbols, FILL_CHUNK words per item */
static void step_fill(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	struct trainer *T = J->T;
	size_t lo = (size_t)item * FILL_CHUNK, hi = LMT_MIN(lo + FILL_CHUNK, T->nwords);
	(void)worker;
	for (size_t w = lo; w < hi; w++) {
		const struct lmt_wordslot *e = &J->wc->s[VAL_SLOT(J->order[w])];
		const uint8_t *s = J->wc->arena + (e->key >> 24);
		uint32_t n = VAL_LEN(J->order[w]);
		T->wlen[w] = n;
		T->wcnt[w] = e->count;
		T->wstamp[w] = UINT32_MAX;
		for (uint32_t i = 0; i < n; i++)
			T->sym[T->woff[w] + i] = s[i];
	}
}

int lmt_bpe_train(const struct lmt_wordcount *wc, const struct lmt_bpe_opts *o,
		  struct lmt_bpe_result *res, struct lmt_err *err)
{
	struct trainer T;
	memset(&T, 0, sizeof T);
	memset(res, 0, sizeof *res);
	int rc = 0;
	const double t_start = lmt_now();
	uint64_t min_count = o->min_count ? o->min_count : 2;
	uint32_t target = o->n_tokens;
	if (target < 256)
		return lmt_err_set(err, LMT_EINVAL, "target of %u tokens is below the 256 byte tokens", target);
	if (target > (uint32_t)1 << 31)
		return lmt_err_set(err, LMT_EINVAL, "target of %u tokens is above 2^31", target); /* DELTA_ADD */
	if (o->ties != LMT_BPE_TIES_ID && o->ties != LMT_BPE_TIES_HF)
		return lmt_err_set(err, LMT_EINVAL, "unknown tie rule %d", o->ties);
	const int nt = o->threads > 1 ? o->threads : 1;
	const int np = nt * PARTS_PER_THREAD;
	T.nt = nt;
	T.np = np;
	T.page = lmt_page_bytes();
	set_ranks(&T, o->ties);
	for (int i = 0; i < 256; i++)
		T.wclass[i] = (uint8_t)(i % nt);
#if defined(__x86_64__)
	/* with nt a power of two (at most 256), word w's class is (w >> wshift) & (nt - 1) */
	T.vfilter = nt <= 256 && !(nt & (nt - 1)) && __builtin_cpu_supports("avx512f");
#endif
	T.wshift = o->word_block_log2 ? (int)o->word_block_log2 - 1 : 6;
	struct lmt_workpool *pool = lmt_workpool_new(nt);
	struct step_job J = { .T = &T, .wc = wc };
	res->distinct_words = wc->n;
	res->total_words = wc->total;

	/* words, by their first bytes (order_words); single-byte words have no pairs
	 * and are skipped. Ties keep the table's order, which depends on the threads
	 * that counted the words: their ids here do, the merges do not (see above) */
	uint64_t *order, nsym;
	size_t k;
	if (order_words(wc, pool, (uint32_t)nt, &order, &k, &nsym)) {
		lmt_workpool_free(pool);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for %zu words", wc->n);
	}
	T.nwords = k;
	T.sym = malloc((nsym ? nsym : 1) * 4);
	T.woff = malloc((k ? k : 1) * 8);
	T.wlen = malloc((k ? k : 1) * 4);
	T.wcnt = malloc((k ? k : 1) * 8);
	T.wstamp = malloc((k ? k : 1) * 4);
	T.P = aligned_alloc(64, (size_t)np * sizeof *T.P);
	T.S = aligned_alloc(64, (size_t)nt * sizeof *T.S);
	T.db = aligned_alloc(64, (size_t)nt * (size_t)np * sizeof *T.db);
	if (T.db)
		memset(T.db, 0, (size_t)nt * (size_t)np * sizeof *T.db);
	T.A = aligned_alloc(64, (size_t)nt * sizeof *T.A);
	if (T.A) {
		memset(T.A, 0, (size_t)nt * sizeof *T.A);
		for (int p = 0; p < nt; p++)
			T.A[p].claimed = T.A[p].ready = CLAIM_NONE;
	}
	if (T.P) {
		memset(T.P, 0, (size_t)np * sizeof *T.P);
		for (int p = 0; p < np; p++)
			T.P[p].claimed = CLAIM_NONE;
	}
	if (T.S)
		memset(T.S, 0, (size_t)nt * sizeof *T.S);
	if (!T.sym || !T.woff || !T.wlen || !T.wcnt || !T.wstamp || !T.P || !T.S || !T.db || !T.A) {
		free(order);
		lmt_workpool_free(pool);
		trainer_free(&T);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for %zu words", k);
	}
	size_t pos = 0;
	for (size_t w = 0; w < k; w++) {
		T.woff[w] = pos;
		pos += VAL_LEN(order[w]);
	}
	J.order = order;
	lmt_workpool_run(pool, step_fill, &J, (uint32_t)((k + FILL_CHUNK - 1) / FILL_CHUNK));
	free(order);

	/* tokens: the 256 bytes */
	T.tmask = 1;
	while (T.tmask + 1 < 2 * (size_t)(target + 256))
		T.tmask = T.tmask * 2 + 1;
	T.th = lmt_zalloc(T.tmask + 1, sizeof *T.th);
	T.tid = malloc((T.tmask + 1) * sizeof *T.tid);
	T.bidx = lmt_zalloc(target, 1);
	T.bsec = lmt_zalloc(target, 1);
	if (!T.th || !T.tid || !T.bidx || !T.bsec || LMT_GROW(T.tb, T.tbcap, 256) || LMT_GROW(T.toff, T.toffcap, 257)) {
		lmt_workpool_free(pool);
		trainer_free(&T);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	T.toff[0] = 0;
	for (uint32_t b = 0; b < 256; b++) {
		T.tb[b] = (uint8_t)b;
		T.toff[b + 1] = b + 1;
		uint64_t h = lmt_hash_bytes(&T.tb[b], 1, 0) | 1;
		size_t i = h & T.tmask;
		while (T.th[i])
			i = (i + 1) & T.tmask;
		T.th[i] = h;
		T.tid[i] = b;
	}
	T.ntok = 256;

	/* initial pair counts, each part by its own thread */
	uint32_t maxlen = o->max_token_len ? o->max_token_len : UINT32_MAX;
	J.maxlen = maxlen;
	struct count_job CJ = { .T = &T, .maxlen = maxlen, .heap_min = o->heap_min ? o->heap_min : 256 };
	CJ.occ = calloc((size_t)nt, sizeof *CJ.occ);
	CJ.cnt = calloc((size_t)nt, sizeof *CJ.cnt);
	CJ.last = malloc((size_t)nt * sizeof *CJ.last);
	CJ.seen = malloc((size_t)nt * sizeof *CJ.seen);
	CJ.where = malloc(65536 * sizeof *CJ.where);
	if (CJ.occ && CJ.cnt && CJ.last && CJ.seen && CJ.where) {
		lmt_workpool_run(pool, count_scan, &CJ, (uint32_t)nt);
		lmt_workpool_run(pool, count_build, &CJ, (uint32_t)nt);
		int built = 1;
		for (int p = 0; p < np; p++)
			built &= !T.P[p].rc;
		if (built) {
			lmt_workpool_run(pool, count_fill, &CJ, (uint32_t)nt);
			lmt_workpool_run(pool, count_finish, &CJ, (uint32_t)nt);
		}
	} else {
		T.P[0].rc = LMT_ENOMEM;
	}
	free(CJ.occ);
	free(CJ.cnt);
	free(CJ.last);
	free(CJ.seen);
	free(CJ.where);
	for (int p = 0; p < np; p++)
		if (T.P[p].rc) {
			lmt_workpool_free(pool);
			trainer_free(&T);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory counting pairs");
		}

	size_t mcap = 0;
	uint64_t peak = 0;
	uint32_t step = 0;
	int64_t best = 0;
	/* the loop's time is picking unless in a step or a progress callback */
	double t_loop = lmt_now(), t_step = 0, t_report = 0;
	res->setup_seconds = t_loop - t_start;
	for (int done = 0; !done && T.ntok < target;) {
		/* the batch: the best pair, then each next best while it is sure to be
		 * the next merge (see above) */
		/* the token table's slots of the candidates, which token_for reads:
		 * random slots of a table larger than a core's cache */
		for (int p = 0; p < np; p++)
			for (uint32_t i = T.P[p].used; i < T.P[p].ncand; i++)
				__builtin_prefetch(&T.th[T.P[p].cand[i].h & T.tmask]);
		J.nm = 0;
		while (J.nm < BATCH_MAX && T.ntok < target) {
			struct part *B = NULL;
			int unknown = 0;
			for (int p = 0; p < np; p++) {
				struct part *P = &T.P[p];
				if (P->used < P->ncand) {
					if (!B || heap_gt(&P->cand[P->used].e, &B->cand[B->used].e))
						B = P;
				} else if (P->ncand == CANDS) {
					unknown = 1; /* a part's list is spent: its next is not known */
				}
			}
			if (unknown)
				break;
			if (!B || (uint64_t)B->cand[B->used].e.count < min_count) {
				done = 1;
				break;
			}
			const struct cand *C = &B->cand[B->used];
			uint32_t a = id_of(&T, C->e.ra), b = id_of(&T, C->e.rb);
			if (J.nm && site_at(&T, &J, (const uint32_t[]){ a, b }) >= 0) {
				/* an older entry of a pair merged in this batch, with its
				 * count before the merge: drop it */
				B->used++;
				continue;
			}
			if (J.nm && (T.bsec[a] || T.bidx[b] || (a == b && (T.bidx[a] || T.bsec[b]))))
				break; /* its sites could touch the batch's: the next batch's */
			B->used++;
			best = C->e.count;
			int is_new;
			long c = token_for(&T, a, b, C->h, &is_new);
			if (c < 0 || LMT_GROW(res->merge, mcap, (size_t)res->n_merges + 1)) {
				rc = LMT_ENOMEM;
				break;
			}
			res->merge[res->n_merges][0] = a;
			res->merge[res->n_merges][1] = b;
			res->merge[res->n_merges][2] = (uint32_t)c;
			res->n_merges++;
			if (is_new && T.ntok * 2 > T.tmask) {
				/* the token table was sized for target + 256; reuse keeps it below */
				rc = LMT_ENOMEM;
				break;
			}
			/* its where list does not change during the step: every pair
			 * noted holds a new token, or is noted only to fall */
			uint32_t m = J.nm++;
			J.Pab[m] = B;
			J.pi[m] = C->q;
			J.where[m] = C->where;
			J.nwhere[m] = C->nwhere;
			J.a[m] = a;
			J.b[m] = b;
			J.c[m] = (uint32_t)c;
			J.anext[m] = T.bidx[a];
			T.bidx[a] = (uint8_t)(m + 1);
			T.bsec[b] = 1;
			if (a == b || !is_new)
				break; /* the pairs it makes are not bounded (see above) */
			if (o->progress && o->every && res->n_merges % o->every == 0)
				break; /* report after this merge, as without batches */
		}
		if (rc || !J.nm)
			break;
		J.step = step;
		uint64_t nw = 0;
		for (uint32_t m = 0; m < J.nm; m++)
			nw += J.nwhere[m];
		J.sum_falls = nw >= (o->sum_min ? o->sum_min : 256);
		double t0 = lmt_now();
		lmt_workpool_run(pool, step_merge, &J, (uint32_t)nt);
		t_step += lmt_now() - t0;
		for (uint32_t m = 0; m < J.nm; m++)
			T.bidx[J.a[m]] = T.bsec[J.b[m]] = 0;
		for (int t = 0; t < nt; t++)
			if (T.S[t].rc)
				rc = LMT_ENOMEM;
		for (int p = 0; p < np; p++)
			if (T.P[p].rc)
				rc = LMT_ENOMEM;
		if (rc)
			break;
		step++;
		uint64_t bytes = nsym * 4 + T.nwords * 28;
		for (int p = 0; p < np; p++)
			bytes += (uint64_t)T.P[p].npairs * sizeof(struct pair) + (T.P[p].pmask + 1) * 4 +
				 T.P[p].heapcap * sizeof(struct heap_ent) + T.P[p].cold_bytes + T.P[p].where_bytes;
		/* and the threads' working space, which a long word's many sites make large:
		 * the changes noted in a step (the most, not the buffers' capacity, which
		 * doubling leaves up to twice that, never touched), the copies of a word, the
		 * summed falls, the class lists. A word of 16 MB took 450 MB, of which the
		 * tables above are 146 MB */
		for (int t = 0; t < nt; t++) {
			const struct scratch *S = &T.S[t];
			bytes += S->cap * 5 + (S->fall ? (S->fmask + 1) * (sizeof *S->fall + sizeof *S->fused / 2) : 0) +
				 T.A[t].n * 4;
			for (int p = 0; p < np; p++)
				bytes += T.db[(size_t)t * (size_t)np + (size_t)p].most * sizeof(struct delta);
		}
		if (bytes > peak)
			peak = bytes;
		if (o->progress && o->every && res->n_merges % o->every == 0) {
			double t1 = lmt_now();
			int stop = o->progress(o->ctx, res->n_merges, T.ntok, (uint64_t)best);
			t_report += lmt_now() - t1;
			if (stop)
				break;
		}
	}
	res->step_seconds = t_step;
	res->pick_seconds = lmt_now() - t_loop - t_step - t_report;
	lmt_workpool_run(pool, step_free, &J, (uint32_t)nt);
	lmt_workpool_free(pool);
	if (rc) {
		trainer_free(&T);
		lmt_bpe_result_release(res);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory during training");
	}
	if (o->progress && !(o->every && res->n_merges && res->n_merges % o->every == 0))
		o->progress(o->ctx, res->n_merges, T.ntok, (uint64_t)best); /* the last, if not just sent */
	res->n_steps = step;
	res->n_tokens = T.ntok;
	res->bytes = T.tb;
	res->off = T.toff;
	res->peak_bytes = peak;
	T.tb = NULL;
	T.toff = NULL;
	trainer_free(&T);
	return 0;
}

/* The special tokens after the vocabulary so far, if rc is 0 (checked first). */
static int add_specials(struct lmt_tokenizer *t, const char *const *specials, int nspecials, int rc,
			struct lmt_err *err)
{
	if (!rc)
		rc = lmt_tok_check_specials(specials, nspecials, err);
	for (int i = 0; i < nspecials && !rc; i++)
		rc = lmt_tok_add_token(t, specials[i], strlen(specials[i]), 1, NULL, err);
	return rc;
}

/* The pattern and roles, then the checks, if rc is 0; t released on any error. */
static int finish_tok(struct lmt_tokenizer *t, const char *pattern, const char *regex, const char *eos,
		      const char *bos, const char *pad, int rc, struct lmt_err *err)
{
	if (!rc)
		rc = lmt_tok_set_pattern(t, pattern, regex, err);
	if (!rc)
		rc = lmt_tok_set_roles(t, eos, bos, pad, err);
	if (!rc)
		rc = lmt_tok_finalize(t, err);
	if (rc)
		lmt_tok_release(t);
	return rc;
}

int lmt_bpe_to_tokenizer(const struct lmt_bpe_result *r, const char *pattern, const char *regex,
			 const char *const *specials, int nspecials, const char *eos,
			 const char *bos, const char *pad, struct lmt_tokenizer *t,
			 struct lmt_err *err)
{
	lmt_tok_init(t);
	int rc = 0;
	for (uint32_t id = 0; id < r->n_tokens && !rc; id++)
		rc = lmt_tok_add_token(t, r->bytes + r->off[id], r->off[id + 1] - r->off[id], 0, NULL, err);
	rc = add_specials(t, specials, nspecials, rc, err);
	for (uint32_t m = 0; m < r->n_merges && !rc; m++)
		rc = lmt_tok_add_merge(t, r->merge[m][0], r->merge[m][1], r->merge[m][2], m, err);
	return finish_tok(t, pattern, regex, eos, bos, pad, rc, err);
}

struct charent {
	const uint8_t *s;
	uint32_t n;
	uint64_t count;
};

static int cmp_char(const void *x, const void *y)
{
	const struct charent *a = x, *b = y;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	int c = memcmp(a->s, b->s, LMT_MIN(a->n, b->n));
	return c ? c : (a->n < b->n ? -1 : a->n > b->n);
}

int lmt_chars_to_tokenizer(const struct lmt_wordcount *wc, uint32_t n_tokens, const char *const *specials,
			   int nspecials, const char *eos, const char *bos, const char *pad,
			   struct lmt_tokenizer *t, struct lmt_err *err)
{
	lmt_tok_init(t);
	struct charent *ch = malloc((wc->n ? wc->n : 1) * sizeof *ch);
	if (!ch)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; i <= wc->mask; i++) {
		const struct lmt_wordslot *S = &wc->s[i];
		if (!S->h || (S->key & WC_MAXLEN) < 2)
			continue; /* single bytes are tokens already */
		ch[k++] = (struct charent){ wc->arena + (S->key >> 24), (uint32_t)(S->key & WC_MAXLEN), S->count };
	}
	qsort(ch, k, sizeof *ch, cmp_char);
	int rc = 0;
	for (uint32_t b = 0; b < 256 && !rc; b++) {
		uint8_t c = (uint8_t)b;
		rc = lmt_tok_add_token(t, &c, 1, 0, NULL, err);
	}
	for (size_t i = 0; i < k && t->n_vocab < n_tokens && !rc; i++)
		rc = lmt_tok_add_token(t, ch[i].s, ch[i].n, 0, NULL, err);
	rc = add_specials(t, specials, nspecials, rc, err);
	free(ch);
	t->flags |= LMT_TOK_IGNORE_MERGES;
	return finish_tok(t, "custom", LMT_CHARS_PATTERN, eos, bos, pad, rc, err);
}
