/*
 * bpetrain.c: word counting and the BPE trainer described in bpetrain.h.
 */
#include "data/bpetrain.h"

#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "core/util.h"
#include "core/workpool.h"

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

int lmt_wordcount_add_text(struct lmt_wordcount *wc, struct lmt_pretok_iter *it,
			   const char *text, size_t len)
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
	size_t st, n;
	int k = 0, more = 1;
	lmt_pretok_iter_reset(it, text, len);
	while (more) {
		more = lmt_pretok_next(it, &st, &n);
		if (more) {
			if (n > WC_MAXLEN) {
				int rc = lmt_wordcount_add(wc, text + st, n, 1);
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
			int rc = wc_add_hashed(wc, (const uint8_t *)text + b[j].st, b[j].n, b[j].h, 1);
			if (rc)
				return rc;
		}
		k = 0;
	}
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
 * Threads. The pairs are split into parts by a hash of the pair, one part per
 * thread; each part has its own table, where lists and heap, and only one thread
 * changes a part at a time, so no locks are needed. A merge runs in two steps:
 *   A. the words of the merged pair's where list, shared out among the threads, are
 *      rewritten, and each thread notes the pair count changes its words make,
 *      bucketed by part: only the pairs next to a merge site change, so a word of
 *      n symbols with one site notes about five changes, not 2n;
 *   B. each part's owner applies the changes of every bucket meant for it, pushes
 *      the pairs whose counts rose onto its heap, and cleans its heap's top (the
 *      stale entries that surface are re-pushed with their current counts).
 * The best pair is the best of the parts' heap tops. Counts are sums, where lists
 * are sets (order only decides which word is visited first) and the heap order is
 * total, so nothing depends on which thread rewrote which word or on the number of
 * parts: the merges are the same for any thread count, and for any order of the
 * words (ties of order_words keep the count table's order, which depends on the
 * threads that counted them). Merges with short where lists (most of them) rewrite
 * their words in the calling thread, where sharing out a few dozen words would
 * cost more than it saves; step B always runs a part an item on the threads (about
 * 5% off -j2's merging, against all of it in the calling thread). The steps run on
 * a work pool (core/workpool.h), not OpenMP regions, because a region waits for
 * every thread of its team, and on a busy machine one of them is often not running.
 */

struct pair {
	uint64_t key;          /* (a << 32 | b) + 1 */
	int64_t count;
	uint32_t *where;       /* word ids; may hold stale entries and duplicates */
	uint32_t nwhere, capwhere;
	uint32_t stamp;        /* last merge step that touched it */
};

/* heap entries carry the tie ranks of a and b (rank_of), so comparing is cheap */
struct heap_ent {
	int64_t count;
	uint32_t ra, rb;
};

/* a pair count change noted in step A */
struct delta {
	uint64_t key, mix;
	int64_t d;
	uint32_t w;            /* the word it comes from */
	uint32_t add;          /* the pair holds the new token: add w to its where list */
};

struct dbuf {
	struct delta *v;
	size_t n, cap;
};

struct part {
	struct pair *pairs;
	size_t npairs, paircap;
	uint32_t *pidx;        /* hash slot -> pair index + 1, 0 = empty */
	size_t pmask;
	struct heap_ent *heap;
	size_t nheap, heapcap;
	uint32_t *touched;     /* pairs whose count rose in this step */
	size_t ntouched, tcap;
	uint64_t where_bytes;
	int rc;
	int top;               /* clean_top's answer after the last step's changes */
	uint32_t claimed;      /* the last step (or CLAIM_*) whose work item took this part */
} __attribute__((aligned(64)));

/* step A's working copy of a word, per thread */
struct scratch {
	uint32_t *old;
	uint8_t *m;
	size_t cap;
	int rc;
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
	/* pairs, in nt parts; db[t * nt + p]: the changes thread t noted for part p */
	int nt;
	struct part *P;
	struct dbuf *db;
	struct scratch *S;
	/* tie ranks of the byte tokens and their inverse (merged tokens rank as their id) */
	uint32_t rank[256], unrank[256];
};

/*
 * Order the words by their first 8 bytes, as bytes compare (an LSD radix sort of
 * the big-endian prefixes, 16 bits a pass). No result depends on the words' order,
 * but this one is faster to train on: words that share a start sit together, so
 * the words of a pair's where list are often neighbours in memory, and rewriting
 * them reads runs of lines rather than a line a word. The prefix gives nearly all
 * of a full sort's locality and needs no comparisons through the table.
 */
static int order_words(const struct lmt_wordcount *wc, size_t *order, size_t k)
{
	uint64_t *key = malloc((k ? k : 1) * 2 * sizeof *key);
	size_t *tmp = malloc((k ? k : 1) * sizeof *tmp), *cnt = malloc(65536 * sizeof *cnt);
	if (!key || !tmp || !cnt) {
		free(key);
		free(tmp);
		free(cnt);
		return LMT_ENOMEM;
	}
	uint64_t *key2 = key + k;
	for (size_t i = 0; i < k; i++) {
		uint64_t kk = wc->s[order[i]].key, x = 0;
		size_t n = kk & WC_MAXLEN;
		memcpy(&x, wc->arena + (kk >> 24), LMT_MIN(n, 8));
		key[i] = __builtin_bswap64(x);
	}
	for (int shift = 0; shift < 64; shift += 16) {
		memset(cnt, 0, 65536 * sizeof *cnt);
		for (size_t i = 0; i < k; i++)
			cnt[key[i] >> shift & 0xffff]++;
		if (cnt[key[0] >> shift & 0xffff] == k)
			continue; /* one digit value: this pass would not move anything */
		size_t sum = 0;
		for (size_t d = 0; d < 65536; d++) {
			size_t c = cnt[d];
			cnt[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < k; i++) {
			size_t o = cnt[key[i] >> shift & 0xffff]++;
			key2[o] = key[i];
			tmp[o] = order[i];
		}
		memcpy(key, key2, k * sizeof *key);
		memcpy(order, tmp, k * sizeof *order);
	}
	free(key);
	free(tmp);
	free(cnt);
	return 0;
}

static inline uint64_t pkey(uint32_t a, uint32_t b)
{
	return ((uint64_t)a << 32 | b) + 1;
}

static inline int part_of(const struct trainer *T, uint64_t mix)
{
	return (int)((mix >> 40) % (uint64_t)T->nt);
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

static void hsift_down(struct heap_ent *h, size_t n, size_t i)
{
	struct heap_ent x = h[i];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, c = i;
		const struct heap_ent *best = &x;
		if (l < n && heap_gt(&h[l], best)) {
			c = l;
			best = &h[l];
		}
		if (r < n && heap_gt(&h[r], best))
			c = r;
		if (c == i)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = x;
}

static int hpush(const struct trainer *T, struct part *P, int64_t count, uint32_t a, uint32_t b)
{
	if (LMT_GROW(P->heap, P->heapcap, P->nheap + 1))
		return LMT_ENOMEM;
	struct heap_ent x = { count, rank_of(T, a), rank_of(T, b) };
	size_t i = P->nheap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_gt(&x, &P->heap[p]))
			break;
		P->heap[i] = P->heap[p];
		i = p;
	}
	P->heap[i] = x;
	return 0;
}

static void hpop(struct part *P)
{
	P->heap[0] = P->heap[--P->nheap];
	if (P->nheap)
		hsift_down(P->heap, P->nheap, 0);
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
	if (P->npairs >= UINT32_MAX - 1 || LMT_GROW(P->pairs, P->paircap, P->npairs + 1))
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

/* The pair (a, b): its part in *P, its index there (-1 if absent). */
static inline long pfind(const struct trainer *T, uint32_t a, uint32_t b, struct part **P)
{
	uint64_t key = pkey(a, b), mix = lmt_mix64(key);
	*P = &T->P[part_of(T, mix)];
	return (long)(*P)->pidx[pslot(*P, key, mix)] - 1;
}

static int where_add(struct part *P, struct pair *p, uint32_t w)
{
	if (p->nwhere && p->where[p->nwhere - 1] == w)
		return 0;
	if (p->nwhere == p->capwhere) {
		uint32_t nc = p->capwhere ? p->capwhere * 2 : 2;
		uint32_t *n = realloc(p->where, (size_t)nc * 4);
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

/* Id of the concatenation of tokens a and b: an existing one, or a new one. */
static long token_for(struct trainer *T, uint32_t a, uint32_t b, int *is_new)
{
	uint32_t la = tlen(T, a), lb = tlen(T, b);
	size_t used = T->toff[T->ntok];
	if (LMT_GROW(T->tb, T->tbcap, used + la + lb) || LMT_GROW(T->toff, T->toffcap, T->ntok + 2))
		return -1;
	uint8_t *s = T->tb + used;
	memcpy(s, T->tb + T->toff[a], la);
	memcpy(s + la, T->tb + T->toff[b], lb);
	uint64_t h = lmt_hash_bytes(s, la + lb, 0) | 1;
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

static void trainer_free(struct trainer *T)
{
	free(T->sym);
	free(T->woff);
	free(T->wlen);
	free(T->wcnt);
	free(T->wstamp);
	free(T->tb);
	free(T->toff);
	free(T->th);
	free(T->tid);
	for (int p = 0; T->P && p < T->nt; p++) {
		struct part *P = &T->P[p];
		for (size_t i = 0; i < P->npairs; i++)
			free(P->pairs[i].where);
		free(P->pairs);
		free(P->pidx);
		free(P->heap);
		free(P->touched);
	}
	free(T->P);
	for (size_t i = 0; T->db && i < (size_t)T->nt * (size_t)T->nt; i++)
		free(T->db[i].v);
	free(T->db);
	for (int t = 0; T->S && t < T->nt; t++) {
		free(T->S[t].old);
		free(T->S[t].m);
	}
	free(T->S);
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

static inline void note(struct trainer *T, struct dbuf *db, struct scratch *S, uint32_t x, uint32_t y,
			int64_t d, uint32_t w, uint32_t add)
{
	uint64_t key = pkey(x, y), mix = lmt_mix64(key);
	struct dbuf *B = &db[part_of(T, mix)];
	if (B->n == B->cap && LMT_GROW(B->v, B->cap, B->n + 1)) {
		S->rc = LMT_ENOMEM;
		return;
	}
	B->v[B->n++] = (struct delta){ key, mix, d, w, add };
}

/*
 * Step A for the where-list entries [lo, hi) of the merged pair (a, b) -> c, in
 * thread t: rewrite each word (once: a word listed twice is claimed by whichever
 * visit exchanges its stamp first) and note the changes of the pairs next to merge
 * sites. Changes to (a, b) itself are not noted: its count is 0 after the merge.
 */
#define PF_FAR 16
#define PF_NEAR 8

static void rewrite_words(struct trainer *T, const uint32_t *where, size_t lo, size_t hi, int t,
			  uint32_t a, uint32_t b, uint32_t c, uint32_t step)
{
	struct scratch *S = &T->S[t];
	struct dbuf *db = T->db + (size_t)t * (size_t)T->nt;
	for (size_t wi = lo; wi < hi && !S->rc; wi++) {
		/* The words are scattered over arrays larger than the caches, and the
		 * claim below is a locked exchange, which lets no later load start
		 * before it: without prefetching, each word waits for a miss on its
		 * stamp, then one on its symbols. The where list says which words come
		 * next, so fetch the metadata of the word PF_FAR entries ahead and the
		 * symbols of the one PF_NEAR ahead (its woff fetched by then). */
		if (wi + PF_FAR < hi) {
			uint32_t f = where[wi + PF_FAR];
			__builtin_prefetch(&T->wstamp[f], 1);
			__builtin_prefetch(&T->woff[f]);
			__builtin_prefetch(&T->wlen[f]);
			__builtin_prefetch(&T->wcnt[f]);
		}
		if (wi + PF_NEAR < hi)
			__builtin_prefetch(T->sym + T->woff[where[wi + PF_NEAR]], 1);
		uint32_t w = where[wi];
		if (__atomic_exchange_n(&T->wstamp[w], step, __ATOMIC_RELAXED) == step)
			continue;
		uint32_t *s = T->sym + T->woff[w], n = T->wlen[w], i;
		for (i = 0; i + 1 < n; i++)
			if (s[i] == a && s[i + 1] == b)
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
		/* the merge sites, left to right without overlap */
		memset(m, 0, n);
		for (uint32_t x = i; x + 1 < n;) {
			if (o[x] == a && o[x + 1] == b) {
				m[x] = m[x + 1] = 1;
				x += 2;
			} else {
				x++;
			}
		}
		for (uint32_t x = 0; x + 1 < n; x++)
			if ((m[x] | m[x + 1]) && !(o[x] == a && o[x + 1] == b))
				note(T, db, S, o[x], o[x + 1], -cnt, w, 0);
		/* the new word; m[j] now marks a merged symbol of it */
		uint32_t j = 0;
		for (uint32_t x = 0; x < n;) {
			if (x + 1 < n && m[x] && o[x] == a && o[x + 1] == b) {
				m[j] = 1;
				s[j++] = c;
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

/* Step B for part p: apply every thread's changes for it, push the pairs that rose. */
static void apply_part(struct trainer *T, int p, uint32_t step, uint32_t maxlen)
{
	struct part *P = &T->P[p];
	P->ntouched = 0;
	for (int t = 0; t < T->nt; t++) {
		struct dbuf *B = &T->db[(size_t)t * (size_t)T->nt + (size_t)p];
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
			long q = pget(P, D->key, D->mix);
			if (q < 0) {
				P->rc = LMT_ENOMEM;
				break;
			}
			struct pair *Q = &P->pairs[q];
			Q->count += D->d;
			if (!D->add)
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
		B->n = 0;
	}
	for (size_t k = 0; k < P->ntouched && !P->rc; k++) {
		struct pair *Q = &P->pairs[P->touched[k]];
		uint32_t x = (uint32_t)((Q->key - 1) >> 32), y = (uint32_t)(Q->key - 1);
		if (Q->count > 0 && tlen(T, x) + tlen(T, y) <= maxlen && hpush(T, P, Q->count, x, y))
			P->rc = LMT_ENOMEM;
	}
}

/* Initial pair counts of part p: every pair of every word that hashes to it. */
static void count_part(struct trainer *T, int p, uint32_t maxlen)
{
	struct part *P = &T->P[p];
	P->pmask = 1023;
	if (!(P->pidx = lmt_zalloc(P->pmask + 1, sizeof *P->pidx))) {
		P->rc = LMT_ENOMEM;
		return;
	}
	/* A word's pairs of this part are picked without a branch, then counted: with
	 * n parts a pair is this part's at random, and a branch on it mispredicted
	 * for about half of the 3 million pairs of a real corpus (at -j2 each part's
	 * count took 34 ms against 43 ms for both at -j1). */
	enum { PICK = 256 };
	uint64_t kb[PICK], mb[PICK];
	for (uint32_t w = 0; w < T->nwords && !P->rc; w++) {
		const uint32_t *s = T->sym + T->woff[w];
		for (uint32_t i0 = 0; i0 + 1 < T->wlen[w] && !P->rc; i0 += PICK) {
			uint32_t lim = LMT_MIN(T->wlen[w] - 1, i0 + PICK), m = 0;
			for (uint32_t i = i0; i < lim; i++) {
				uint64_t key = pkey(s[i], s[i + 1]), mix = lmt_mix64(key);
				kb[m] = key;
				mb[m] = mix;
				m += part_of(T, mix) == p;
			}
			for (uint32_t j = 0; j < m; j++) {
				long q = pget(P, kb[j], mb[j]);
				if (q < 0 || where_add(P, &P->pairs[q], w)) {
					P->rc = LMT_ENOMEM;
					break;
				}
				P->pairs[q].count += (int64_t)T->wcnt[w];
			}
		}
	}
	for (size_t q = 0; q < P->npairs && !P->rc; q++) {
		uint32_t a = (uint32_t)((P->pairs[q].key - 1) >> 32), b = (uint32_t)(P->pairs[q].key - 1);
		if (tlen(T, a) + tlen(T, b) <= maxlen && hpush(T, P, P->pairs[q].count, a, b))
			P->rc = LMT_ENOMEM;
	}
}

/* Drop the stale entries at the top of P's heap (re-pushing them with their current
 * count); 1 if a fresh top is left, 0 if the heap is empty, < 0 on error. */
static int clean_top(struct trainer *T, struct part *P)
{
	while (P->nheap) {
		struct heap_ent top = P->heap[0];
		struct part *Q;
		long pi = pfind(T, id_of(T, top.ra), id_of(T, top.rb), &Q);
		int64_t cur = pi >= 0 ? Q->pairs[pi].count : 0;
		if (cur == top.count)
			return 1;
		hpop(P);
		if (cur > 0 && hpush(T, P, cur, id_of(T, top.ra), id_of(T, top.rb)))
			return LMT_ENOMEM;
	}
	return 0;
}

/* one merge's two steps, and the set-up, as work pool items */
struct step_job {
	struct trainer *T;
	const uint32_t *where;
	size_t nwhere;
	uint32_t a, b, c, step, maxlen;
	struct part *Pab;      /* the merged pair's part, and its index there */
	long pi;
	const struct lmt_wordcount *wc;
	const size_t *order;
};

#define STEP_CHUNK 64
#define FILL_CHUNK 4096

static void step_rewrite(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	size_t lo = (size_t)item * STEP_CHUNK;
	rewrite_words(J->T, J->where, lo, LMT_MIN(lo + STEP_CHUNK, J->nwhere), worker, J->a, J->b, J->c, J->step);
}

/* claims other than a merge step's (which are below these) */
enum { CLAIM_NONE = UINT32_MAX, CLAIM_COUNT = UINT32_MAX - 1, CLAIM_FREE = UINT32_MAX - 2 };

/*
 * The part that this worker's item takes in a run of nt items, one a part (stamp
 * names the run): the worker's own (part w for worker w) if no item of the run has
 * taken it, else the next one free. So a part is counted, updated at each merge
 * and freed by one thread, unless that thread was late and its part taken: its
 * tables and heap stay in that core's cache from step to step, and its where lists
 * come from that thread's malloc arena.
 */
static uint32_t claim_part(struct trainer *T, int worker, uint32_t stamp)
{
	uint32_t p = (uint32_t)worker % (uint32_t)T->nt;
	while (__atomic_exchange_n(&T->P[p].claimed, stamp, __ATOMIC_ACQ_REL) == stamp)
		p = (p + 1) % (uint32_t)T->nt;
	return p;
}

/* Step B for a part, after which the merged pair is gone and the part's heap has a
 * fresh top (or none): the next merge's pick only compares the parts' tops. */
static void step_apply(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	struct trainer *T = J->T;
	uint32_t p = claim_part(T, worker, J->step);
	(void)item;
	struct part *P = &T->P[p];
	if (P == J->Pab) {
		/* J->pi stays valid: pget may move a part's table but pair indices are stable */
		struct pair *AB = &P->pairs[J->pi];
		AB->count = 0;
		free(AB->where);
		P->where_bytes -= (uint64_t)AB->capwhere * 4;
		AB->where = NULL;
		AB->nwhere = AB->capwhere = 0;
	}
	apply_part(T, (int)p, J->step, J->maxlen);
	if (!P->rc)
		P->top = clean_top(T, P);
}

static void step_count(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	(void)item;
	count_part(J->T, (int)claim_part(J->T, worker, CLAIM_COUNT), J->maxlen);
}

/* the where lists of a part, a million small blocks at the end of a real corpus's
 * training: freed by the thread that made most of them, and in parallel */
static void step_free(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	struct part *P = &J->T->P[claim_part(J->T, worker, CLAIM_FREE)];
	(void)item;
	for (size_t i = 0; i < P->npairs; i++) {
		free(P->pairs[i].where);
		P->pairs[i].where = NULL;
	}
}

/* the words' symbols, FILL_CHUNK words per item */
static void step_fill(void *ctx, uint32_t item, int worker)
{
	struct step_job *J = ctx;
	struct trainer *T = J->T;
	size_t lo = (size_t)item * FILL_CHUNK, hi = LMT_MIN(lo + FILL_CHUNK, T->nwords);
	for (size_t w = lo; w < hi; w++) {
		uint64_t key = J->wc->s[J->order[w]].key;
		const uint8_t *s = J->wc->arena + (key >> 24);
		uint32_t n = key & WC_MAXLEN;
		T->wlen[w] = n;
		T->wcnt[w] = J->wc->s[J->order[w]].count;
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
	uint64_t min_count = o->min_count ? o->min_count : 2;
	uint32_t target = o->n_tokens;
	if (target < 256)
		return lmt_err_set(err, LMT_EINVAL, "target of %u tokens is below the 256 byte tokens", target);
	if (o->ties != LMT_BPE_TIES_ID && o->ties != LMT_BPE_TIES_HF)
		return lmt_err_set(err, LMT_EINVAL, "unknown tie rule %d", o->ties);
	const int nt = o->threads > 1 ? o->threads : 1;
	const uint32_t par_min = o->par_min ? o->par_min : 256;
	T.nt = nt;
	set_ranks(&T, o->ties);
	struct lmt_workpool *pool = lmt_workpool_new(nt);
	struct step_job J = { .T = &T, .wc = wc };
	res->distinct_words = wc->n;
	res->total_words = wc->total;

	/* words, by their first bytes (order_words); single-byte words have no pairs
	 * and are skipped. Ties keep the table's order, which depends on the threads
	 * that counted the words: their ids here do, the merges do not (see above) */
	size_t *order = malloc((wc->n ? wc->n : 1) * sizeof *order), k = 0, nsym = 0;
	if (!order) {
		lmt_workpool_free(pool);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i <= wc->mask; i++)
		if (wc->s[i].h && (wc->s[i].key & WC_MAXLEN) >= 2) {
			order[k++] = i;
			nsym += wc->s[i].key & WC_MAXLEN;
		}
	T.nwords = k;
	T.sym = malloc((nsym ? nsym : 1) * 4);
	T.woff = malloc((k ? k : 1) * 8);
	T.wlen = malloc((k ? k : 1) * 4);
	T.wcnt = malloc((k ? k : 1) * 8);
	T.wstamp = malloc((k ? k : 1) * 4);
	T.P = aligned_alloc(64, (size_t)nt * sizeof *T.P);
	T.S = aligned_alloc(64, (size_t)nt * sizeof *T.S);
	T.db = calloc((size_t)nt * (size_t)nt, sizeof *T.db);
	if (T.P) {
		memset(T.P, 0, (size_t)nt * sizeof *T.P);
		for (int p = 0; p < nt; p++)
			T.P[p].claimed = CLAIM_NONE;
	}
	if (T.S)
		memset(T.S, 0, (size_t)nt * sizeof *T.S);
	if (!T.sym || !T.woff || !T.wlen || !T.wcnt || !T.wstamp || !T.P || !T.S || !T.db ||
	    (k && order_words(wc, order, k))) {
		free(order);
		lmt_workpool_free(pool);
		trainer_free(&T);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for %zu words", k);
	}
	size_t pos = 0;
	for (size_t w = 0; w < k; w++) {
		T.woff[w] = pos;
		pos += wc->s[order[w]].key & WC_MAXLEN;
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
	if (!T.th || !T.tid || LMT_GROW(T.tb, T.tbcap, 256) || LMT_GROW(T.toff, T.toffcap, 257)) {
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
	lmt_workpool_run(pool, step_count, &J, (uint32_t)nt);
	for (int p = 0; p < nt; p++)
		if (T.P[p].rc) {
			lmt_workpool_free(pool);
			trainer_free(&T);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory counting pairs");
		}

	for (int p = 0; p < nt; p++)
		T.P[p].top = clean_top(&T, &T.P[p]);
	size_t mcap = 0;
	uint64_t peak = 0;
	uint32_t step = 0;
	int64_t best = 0;
	while (T.ntok < target) {
		struct part *B = NULL;
		for (int p = 0; p < nt && !rc; p++) {
			int r = T.P[p].top;
			if (r < 0)
				rc = r;
			else if (r && (!B || heap_gt(&T.P[p].heap[0], &B->heap[0])))
				B = &T.P[p];
		}
		if (rc || !B)
			break;
		struct heap_ent top = B->heap[0];
		hpop(B);
		if ((uint64_t)top.count < min_count)
			break;
		best = top.count;
		uint32_t a = id_of(&T, top.ra), b = id_of(&T, top.rb);
		int is_new;
		long c = token_for(&T, a, b, &is_new);
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

		/* rewrite the words that contain (a, b). Its where list does not change
		 * meanwhile: every pair noted holds c, or is noted only to fall */
		struct part *Pab;
		long pi = pfind(&T, a, b, &Pab);
		const uint32_t *where = Pab->pairs[pi].where;
		size_t nwhere = Pab->pairs[pi].nwhere;
		J.where = where;
		J.nwhere = nwhere;
		J.a = a;
		J.b = b;
		J.c = (uint32_t)c;
		J.step = step;
		J.Pab = Pab;
		J.pi = pi;
		if (nwhere >= par_min && (nwhere + STEP_CHUNK - 1) / STEP_CHUNK < LMT_WORKPOOL_MAX_ITEMS) {
			lmt_workpool_run(pool, step_rewrite, &J, (uint32_t)((nwhere + STEP_CHUNK - 1) / STEP_CHUNK));
			lmt_workpool_run(pool, step_apply, &J, (uint32_t)nt);
		} else {
			rewrite_words(&T, where, 0, nwhere, 0, a, b, (uint32_t)c, step);
			lmt_workpool_run(pool, step_apply, &J, (uint32_t)nt);
		}
		for (int t = 0; t < nt; t++)
			if (T.S[t].rc || T.P[t].rc)
				rc = LMT_ENOMEM;
		if (rc)
			break;
		step++;
		uint64_t bytes = nsym * 4 + T.nwords * 28;
		for (int p = 0; p < nt; p++)
			bytes += (uint64_t)T.P[p].npairs * sizeof(struct pair) + (T.P[p].pmask + 1) * 4 +
				 T.P[p].heapcap * sizeof(struct heap_ent) + T.P[p].where_bytes;
		if (bytes > peak)
			peak = bytes;
		if (o->progress && o->every && res->n_merges % o->every == 0 &&
		    o->progress(o->ctx, res->n_merges, T.ntok, (uint64_t)best))
			break;
	}
	lmt_workpool_run(pool, step_free, &J, (uint32_t)nt);
	lmt_workpool_free(pool);
	if (rc) {
		trainer_free(&T);
		lmt_bpe_result_release(res);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory during training");
	}
	if (o->progress && !(o->every && res->n_merges && res->n_merges % o->every == 0))
		o->progress(o->ctx, res->n_merges, T.ntok, (uint64_t)best); /* the last, if not just sent */
	res->n_tokens = T.ntok;
	res->bytes = T.tb;
	res->off = T.toff;
	res->peak_bytes = peak;
	T.tb = NULL;
	T.toff = NULL;
	trainer_free(&T);
	return 0;
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
	for (int i = 0; i < nspecials && !rc; i++) {
		for (int k = 0; k < i; k++)
			if (!strcmp(specials[k], specials[i]))
				rc = lmt_err_set(err, LMT_EINVAL, "special token '%s' given twice", specials[i]);
		if (!rc && !*specials[i])
			rc = lmt_err_set(err, LMT_EINVAL, "special token is empty");
		if (!rc)
			rc = lmt_tok_add_token(t, specials[i], strlen(specials[i]), 1, NULL, err);
	}
	for (uint32_t m = 0; m < r->n_merges && !rc; m++)
		rc = lmt_tok_add_merge(t, r->merge[m][0], r->merge[m][1], r->merge[m][2], m, err);
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
	for (int i = 0; i < nspecials && !rc; i++)
		rc = lmt_tok_add_token(t, specials[i], strlen(specials[i]), 1, NULL, err);
	free(ch);
	t->flags |= LMT_TOK_IGNORE_MERGES;
	if (!rc)
		rc = lmt_tok_set_pattern(t, "custom", LMT_CHARS_PATTERN, err);
	if (!rc)
		rc = lmt_tok_set_roles(t, eos, bos, pad, err);
	if (!rc)
		rc = lmt_tok_finalize(t, err);
	if (rc)
		lmt_tok_release(t);
	return rc;
}
