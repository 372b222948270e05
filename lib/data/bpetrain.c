/*
 * bpetrain.c: word counting and the BPE trainer described in bpetrain.h.
 */
#include "data/bpetrain.h"

#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "core/util.h"

/* ---- word counts ---- */

#define WC_MAXLEN ((1u << 24) - 1)

int lmt_wordcount_init(struct lmt_wordcount *wc)
{
	memset(wc, 0, sizeof *wc);
	wc->mask = 1023;
	wc->h = calloc(wc->mask + 1, sizeof *wc->h);
	wc->count = malloc((wc->mask + 1) * sizeof *wc->count);
	wc->key = malloc((wc->mask + 1) * sizeof *wc->key);
	if (!wc->h || !wc->count || !wc->key) {
		lmt_wordcount_release(wc);
		return LMT_ENOMEM;
	}
	return 0;
}

void lmt_wordcount_release(struct lmt_wordcount *wc)
{
	free(wc->h);
	free(wc->count);
	free(wc->key);
	free(wc->arena);
	memset(wc, 0, sizeof *wc);
}

size_t lmt_wordcount_bytes(const struct lmt_wordcount *wc)
{
	return (wc->mask + 1) * 24 + wc->acap;
}

static int wc_rehash(struct lmt_wordcount *wc)
{
	size_t nm = wc->mask * 2 + 1;
	uint64_t *h = calloc(nm + 1, sizeof *h), *c = malloc((nm + 1) * sizeof *c),
		 *k = malloc((nm + 1) * sizeof *k);
	if (!h || !c || !k) {
		free(h);
		free(c);
		free(k);
		return LMT_ENOMEM;
	}
	for (size_t i = 0; i <= wc->mask; i++) {
		if (!wc->h[i])
			continue;
		size_t j = wc->h[i] & nm;
		while (h[j])
			j = (j + 1) & nm;
		h[j] = wc->h[i];
		c[j] = wc->count[i];
		k[j] = wc->key[i];
	}
	free(wc->h);
	free(wc->count);
	free(wc->key);
	wc->h = h;
	wc->count = c;
	wc->key = k;
	wc->mask = nm;
	return 0;
}

static int wc_add_hashed(struct lmt_wordcount *wc, const uint8_t *w, size_t n, uint64_t h,
			 uint64_t count)
{
	size_t i = h & wc->mask;
	for (;;) {
		uint64_t e = wc->h[i];
		if (!e)
			break;
		if (e == h) {
			uint64_t k = wc->key[i];
			if ((k & WC_MAXLEN) == n && !memcmp(wc->arena + (k >> 24), w, n)) {
				wc->count[i] += count;
				wc->total += count;
				return 0;
			}
		}
		i = (i + 1) & wc->mask;
	}
	if (LMT_GROW(wc->arena, wc->acap, wc->alen + n))
		return LMT_ENOMEM;
	memcpy(wc->arena + wc->alen, w, n);
	wc->h[i] = h;
	wc->count[i] = count;
	wc->key[i] = (uint64_t)wc->alen << 24 | n;
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
		int rc = wc_add_hashed(wc, p, WC_MAXLEN, lmt_hash_bytes(p, WC_MAXLEN, 0) | 1, count);
		if (rc)
			return rc;
		p += WC_MAXLEN;
		n -= WC_MAXLEN;
	}
	if (n == 0)
		return 0;
	return wc_add_hashed(wc, p, n, lmt_hash_bytes(p, n, 0) | 1, count);
}

int lmt_wordcount_add_text(struct lmt_wordcount *wc, struct lmt_pretok_iter *it,
			   const char *text, size_t len)
{
	size_t st, n;
	lmt_pretok_iter_reset(it, text, len);
	while (lmt_pretok_next(it, &st, &n)) {
		int rc = lmt_wordcount_add(wc, text + st, n, 1);
		if (rc)
			return rc;
	}
	return 0;
}

int lmt_wordcount_merge(struct lmt_wordcount *dst, const struct lmt_wordcount *src)
{
	for (size_t i = 0; i <= src->mask; i++) {
		if (!src->h[i])
			continue;
		uint64_t k = src->key[i];
		int rc = wc_add_hashed(dst, src->arena + (k >> 24), k & WC_MAXLEN, src->h[i],
				       src->count[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- trainer ---- */

struct pair {
	uint64_t key;          /* (a << 32 | b) + 1 */
	int64_t count;
	uint32_t *where;       /* word ids; may hold stale entries */
	uint32_t nwhere, capwhere;
	uint32_t stamp;        /* last merge step that touched it */
};

struct heap_ent {
	int64_t count;
	uint32_t a, b;
};

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
	/* pairs */
	struct pair *pairs;
	size_t npairs, paircap;
	uint32_t *pidx;        /* hash slot -> pair index + 1, 0 = empty */
	size_t pmask;
	/* heap */
	struct heap_ent *heap;
	size_t nheap, heapcap;
	uint64_t where_bytes;
};

static const struct lmt_wordcount *sort_wc;

static int cmp_word(const void *x, const void *y)
{
	uint64_t a = sort_wc->key[*(const size_t *)x], b = sort_wc->key[*(const size_t *)y];
	size_t la = a & WC_MAXLEN, lb = b & WC_MAXLEN;
	int c = memcmp(sort_wc->arena + (a >> 24), sort_wc->arena + (b >> 24), LMT_MIN(la, lb));
	if (c)
		return c;
	return la < lb ? -1 : la > lb;
}

static inline int heap_gt(const struct heap_ent *x, const struct heap_ent *y)
{
	if (x->count != y->count)
		return x->count > y->count;
	if (x->a != y->a)
		return x->a < y->a;
	return x->b < y->b;
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

static int hpush(struct trainer *T, int64_t count, uint32_t a, uint32_t b)
{
	if (LMT_GROW(T->heap, T->heapcap, T->nheap + 1))
		return LMT_ENOMEM;
	struct heap_ent x = { count, a, b };
	size_t i = T->nheap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_gt(&x, &T->heap[p]))
			break;
		T->heap[i] = T->heap[p];
		i = p;
	}
	T->heap[i] = x;
	return 0;
}

static struct heap_ent hpop(struct trainer *T)
{
	struct heap_ent top = T->heap[0];
	T->heap[0] = T->heap[--T->nheap];
	if (T->nheap)
		hsift_down(T->heap, T->nheap, 0);
	return top;
}

static inline size_t pslot(const struct trainer *T, uint64_t key)
{
	size_t i = lmt_mix64(key) & T->pmask;
	for (;;) {
		uint32_t v = T->pidx[i];
		if (!v || T->pairs[v - 1].key == key)
			return i;
		i = (i + 1) & T->pmask;
	}
}

static int prehash(struct trainer *T)
{
	size_t nm = T->pmask * 2 + 1;
	uint32_t *p = calloc(nm + 1, sizeof *p);
	if (!p)
		return LMT_ENOMEM;
	free(T->pidx);
	T->pidx = p;
	T->pmask = nm;
	for (size_t k = 0; k < T->npairs; k++) {
		size_t i = pslot(T, T->pairs[k].key);
		T->pidx[i] = (uint32_t)(k + 1);
	}
	return 0;
}

/* Pair index of (a, b), created with count 0 if absent; -1 on allocation failure. */
static long pget(struct trainer *T, uint32_t a, uint32_t b)
{
	uint64_t key = ((uint64_t)a << 32 | b) + 1;
	size_t i = pslot(T, key);
	if (T->pidx[i])
		return (long)T->pidx[i] - 1;
	if (T->npairs >= UINT32_MAX - 1 || LMT_GROW(T->pairs, T->paircap, T->npairs + 1))
		return -1;
	struct pair *p = &T->pairs[T->npairs];
	memset(p, 0, sizeof *p);
	p->key = key;
	p->stamp = UINT32_MAX;
	T->pidx[i] = (uint32_t)++T->npairs;
	if (T->npairs * 2 > T->pmask) {
		if (prehash(T))
			return -1;
	}
	return (long)T->npairs - 1;
}

static inline long pfind(const struct trainer *T, uint32_t a, uint32_t b)
{
	uint32_t v = T->pidx[pslot(T, ((uint64_t)a << 32 | b) + 1)];
	return (long)v - 1;
}

static int where_add(struct trainer *T, struct pair *p, uint32_t w)
{
	if (p->nwhere && p->where[p->nwhere - 1] == w)
		return 0;
	if (p->nwhere == p->capwhere) {
		uint32_t nc = p->capwhere ? p->capwhere * 2 : 2;
		uint32_t *n = realloc(p->where, (size_t)nc * 4);
		if (!n)
			return LMT_ENOMEM;
		T->where_bytes += (uint64_t)(nc - p->capwhere) * 4;
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
	for (size_t i = 0; i < T->npairs; i++)
		free(T->pairs[i].where);
	free(T->pairs);
	free(T->pidx);
	free(T->heap);
}

void lmt_bpe_result_release(struct lmt_bpe_result *r)
{
	free(r->merge);
	free(r->bytes);
	free(r->off);
	memset(r, 0, sizeof *r);
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
	res->distinct_words = wc->n;
	res->total_words = wc->total;

	/* words, sorted by bytes; single-byte words have no pairs and are skipped */
	size_t *order = malloc((wc->n ? wc->n : 1) * sizeof *order), k = 0, nsym = 0;
	if (!order)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (size_t i = 0; i <= wc->mask; i++)
		if (wc->h[i] && (wc->key[i] & WC_MAXLEN) >= 2) {
			order[k++] = i;
			nsym += wc->key[i] & WC_MAXLEN;
		}
	sort_wc = wc;
	qsort(order, k, sizeof *order, cmp_word);
	T.nwords = k;
	T.sym = malloc((nsym ? nsym : 1) * 4);
	T.woff = malloc((k ? k : 1) * 8);
	T.wlen = malloc((k ? k : 1) * 4);
	T.wcnt = malloc((k ? k : 1) * 8);
	T.wstamp = malloc((k ? k : 1) * 4);
	if (!T.sym || !T.woff || !T.wlen || !T.wcnt || !T.wstamp) {
		free(order);
		trainer_free(&T);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for %zu words", k);
	}
	size_t pos = 0;
	for (size_t w = 0; w < k; w++) {
		uint64_t key = wc->key[order[w]];
		const uint8_t *s = wc->arena + (key >> 24);
		uint32_t n = key & WC_MAXLEN;
		T.woff[w] = pos;
		T.wlen[w] = n;
		T.wcnt[w] = wc->count[order[w]];
		T.wstamp[w] = UINT32_MAX;
		for (uint32_t i = 0; i < n; i++)
			T.sym[pos + i] = s[i];
		pos += n;
	}
	free(order);

	/* tokens: the 256 bytes */
	T.tmask = 1;
	while (T.tmask + 1 < 2 * (size_t)(target + 256))
		T.tmask = T.tmask * 2 + 1;
	T.th = calloc(T.tmask + 1, sizeof *T.th);
	T.tid = malloc((T.tmask + 1) * sizeof *T.tid);
	if (!T.th || !T.tid || LMT_GROW(T.tb, T.tbcap, 256) || LMT_GROW(T.toff, T.toffcap, 257)) {
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

	/* initial pair counts */
	T.pmask = 1023;
	T.pidx = calloc(T.pmask + 1, sizeof *T.pidx);
	if (!T.pidx) {
		trainer_free(&T);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (uint32_t w = 0; w < T.nwords; w++) {
		const uint32_t *s = T.sym + T.woff[w];
		for (uint32_t i = 0; i + 1 < T.wlen[w]; i++) {
			long p = pget(&T, s[i], s[i + 1]);
			if (p < 0 || where_add(&T, &T.pairs[p], w)) {
				trainer_free(&T);
				return lmt_err_set(err, LMT_ENOMEM, "out of memory counting pairs");
			}
			T.pairs[p].count += (int64_t)T.wcnt[w];
		}
	}
	uint32_t maxlen = o->max_token_len ? o->max_token_len : UINT32_MAX;
	for (size_t p = 0; p < T.npairs; p++) {
		uint32_t a = (uint32_t)((T.pairs[p].key - 1) >> 32), b = (uint32_t)(T.pairs[p].key - 1);
		if (tlen(&T, a) + tlen(&T, b) <= maxlen && hpush(&T, T.pairs[p].count, a, b)) {
			trainer_free(&T);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
	}

	size_t mcap = 0;
	uint32_t *touched = NULL;
	size_t ntouched = 0, tcap = 0;
	uint64_t peak = 0;
	uint32_t step = 0;
	int64_t best = 0;
	while (T.ntok < target && T.nheap) {
		struct heap_ent top = hpop(&T);
		long pi = pfind(&T, top.a, top.b);
		int64_t cur = pi >= 0 ? T.pairs[pi].count : 0;
		if (cur != top.count) {
			if (cur > 0 && (rc = hpush(&T, cur, top.a, top.b)))
				break;
			continue;
		}
		if ((uint64_t)cur < min_count)
			break;
		best = cur;
		int is_new;
		long c = token_for(&T, top.a, top.b, &is_new);
		if (c < 0 || LMT_GROW(res->merge, mcap, (size_t)res->n_merges + 1)) {
			rc = LMT_ENOMEM;
			break;
		}
		res->merge[res->n_merges][0] = top.a;
		res->merge[res->n_merges][1] = top.b;
		res->merge[res->n_merges][2] = (uint32_t)c;
		res->n_merges++;
		if (is_new && T.ntok * 2 > T.tmask) {
			/* the token table was sized for target + 256; reuse keeps it below */
			rc = LMT_ENOMEM;
			break;
		}

		/* rewrite the words that contain (a, b); the where list may grow below
		 * only for pairs with c, never for (a, b) itself, so walk it by index */
		uint32_t a = top.a, b = top.b;
		ntouched = 0;
		for (uint32_t wi = 0; wi < T.pairs[pi].nwhere && !rc; wi++) {
			uint32_t w = T.pairs[pi].where[wi];
			if (T.wstamp[w] == step)
				continue;
			T.wstamp[w] = step;
			uint32_t *s = T.sym + T.woff[w], n = T.wlen[w], i;
			for (i = 0; i + 1 < n; i++)
				if (s[i] == a && s[i + 1] == b)
					break;
			if (i + 1 >= n)
				continue; /* stale entry */
			int64_t cnt = (int64_t)T.wcnt[w];
			for (i = 0; i + 1 < n; i++)
				T.pairs[pfind(&T, s[i], s[i + 1])].count -= cnt;
			uint32_t j = 0;
			for (i = 0; i < n;) {
				if (i + 1 < n && s[i] == a && s[i + 1] == b) {
					s[j++] = (uint32_t)c;
					i += 2;
				} else {
					s[j++] = s[i++];
				}
			}
			T.wlen[w] = n = j;
			for (i = 0; i + 1 < n; i++) {
				long q = pget(&T, s[i], s[i + 1]);
				if (q < 0) {
					rc = LMT_ENOMEM;
					break;
				}
				struct pair *P = &T.pairs[q];
				P->count += cnt;
				if (s[i] != (uint32_t)c && s[i + 1] != (uint32_t)c)
					continue;
				if (where_add(&T, P, w)) {
					rc = LMT_ENOMEM;
					break;
				}
				if (P->stamp != step) {
					P->stamp = step;
					if (LMT_GROW(touched, tcap, ntouched + 1)) {
						rc = LMT_ENOMEM;
						break;
					}
					touched[ntouched++] = (uint32_t)q;
				}
			}
		}
		if (rc)
			break;
		/* pi stays valid: pget may move the table but pair indices are stable */
		free(T.pairs[pi].where);
		T.where_bytes -= (uint64_t)T.pairs[pi].capwhere * 4;
		T.pairs[pi].where = NULL;
		T.pairs[pi].nwhere = T.pairs[pi].capwhere = 0;
		for (size_t t = 0; t < ntouched && !rc; t++) {
			struct pair *P = &T.pairs[touched[t]];
			uint32_t x = (uint32_t)((P->key - 1) >> 32), y = (uint32_t)(P->key - 1);
			if (P->count > 0 && tlen(&T, x) + tlen(&T, y) <= maxlen)
				rc = hpush(&T, P->count, x, y);
		}
		if (rc)
			break;
		step++;
		uint64_t bytes = (uint64_t)T.npairs * sizeof(struct pair) + (T.pmask + 1) * 4 +
				 T.heapcap * sizeof(struct heap_ent) + T.where_bytes + nsym * 4 +
				 T.nwords * 28;
		if (bytes > peak)
			peak = bytes;
		if (o->progress && o->every && res->n_merges % o->every == 0 &&
		    o->progress(o->ctx, res->n_merges, T.ntok, (uint64_t)best))
			break;
	}
	free(touched);
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
		if (!wc->h[i] || (wc->key[i] & WC_MAXLEN) < 2)
			continue; /* single bytes are tokens already */
		ch[k++] = (struct charent){ wc->arena + (wc->key[i] >> 24), (uint32_t)(wc->key[i] & WC_MAXLEN),
					    wc->count[i] };
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
