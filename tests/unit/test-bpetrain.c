/*
 * test-bpetrain: the efficient trainer gives exactly the merges of a slow, obviously
 * correct reference trainer written here.
 *
 * The reference recounts every pair of every word after each merge, picks the best
 * pair by the documented rule (highest count, then smaller left id, then smaller
 * right id; pairs whose result exceeds max_token_len or whose count is below
 * min_count are not candidates), gives the result the id of an existing token with
 * the same bytes or the next free id, and rewrites every word left to right without
 * overlap. Corpora: hand-made ties, overlapping runs, random words over small
 * alphabets (many ties), and the text fixtures split by the gpt2 pattern; several
 * vocabulary sizes, token length caps and minimum counts. Also: counting split over
 * several tables and merged gives the same merges (what the threads do).
 *
 * Every corpus is trained with 1, 2, 3 and 4 threads (with a power of two, a
 * class's words are picked from the where lists 16 at a time where the CPU has
 * AVX-512, and one at a time with 3), the threaded ones with words
 * dealt to the threads one at a time (word_block_log2 1) and every step's falls
 * summed by pair (sum_min 1; the corpora are too small for the default); with 1
 * and 3 threads each part's heap starts with a few pairs (heap_min 2), so that the
 * pairs kept in cold lists, and the opening of the lists, are tested too; and
 * under both tie rules: the reference ranks the bytes by value (ID) or by the code
 * point GPT-2's bytes_to_unicode gives them (HF), computed here from that function
 * as published, not from the trainer's table. Two hand-made corpora have ties whose
 * order the two rules reverse, with the expected first merges written out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "data/bpetrain.h"
#include "data/toktrain.h"
#include "tap.h"
#include "core/util.h"
#include "core/workpool.h"

/* ---- the reference trainer ---- */

struct ref {
	size_t nw;
	uint32_t **w;            /* symbols */
	uint32_t *len;
	uint64_t *cnt;
	uint8_t **tb;            /* token bytes */
	uint32_t *tl;
	uint32_t ntok;
};

static void ref_from_wc(struct ref *R, const struct lmt_wordcount *wc, uint32_t maxtok)
{
	memset(R, 0, sizeof *R);
	R->w = calloc(wc->n + 1, sizeof *R->w);
	R->len = calloc(wc->n + 1, sizeof *R->len);
	R->cnt = calloc(wc->n + 1, sizeof *R->cnt);
	for (size_t i = 0; i <= wc->mask; i++) {
		if (!wc->s[i].h)
			continue;
		uint64_t k = wc->s[i].key;
		uint32_t n = (uint32_t)(k & 0xffffff);
		R->w[R->nw] = malloc(n * 4 + 4);
		for (uint32_t j = 0; j < n; j++)
			R->w[R->nw][j] = wc->arena[(k >> 24) + j];
		R->len[R->nw] = n;
		R->cnt[R->nw] = wc->s[i].count;
		R->nw++;
	}
	R->tb = calloc(maxtok + 256, sizeof *R->tb);
	R->tl = calloc(maxtok + 256, sizeof *R->tl);
	for (uint32_t b = 0; b < 256; b++) {
		R->tb[b] = malloc(1);
		R->tb[b][0] = (uint8_t)b;
		R->tl[b] = 1;
	}
	R->ntok = 256;
}

static void ref_free(struct ref *R)
{
	for (size_t i = 0; i < R->nw; i++)
		free(R->w[i]);
	for (uint32_t i = 0; i < R->ntok; i++)
		free(R->tb[i]);
	free(R->w);
	free(R->len);
	free(R->cnt);
	free(R->tb);
	free(R->tl);
}

struct pc {
	uint32_t a, b;
	uint64_t c;
};

/* the reference's tie ranks of the bytes (merged tokens rank as their id) */
static uint32_t rrank[256];

static uint32_t rk(uint32_t id)
{
	return id < 256 ? rrank[id] : id;
}

/* GPT-2's bytes_to_unicode (encoder.py): bs = the printable ranges, which map to
 * themselves; every other byte b, in order, maps to 256 + n. Rank = place of the
 * mapped code point among all 256. */
static void set_rrank(int ties)
{
	uint32_t cp[256];
	for (uint32_t b = 0, n = 0; b < 256; b++) {
		int in_bs = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
		cp[b] = ties == LMT_BPE_TIES_HF ? (in_bs ? b : 256 + n++) : b;
	}
	for (uint32_t b = 0; b < 256; b++) {
		rrank[b] = 0;
		for (uint32_t x = 0; x < 256; x++)
			rrank[b] += cp[x] < cp[b];
	}
}

static int cmp_pc(const void *x, const void *y)
{
	const struct pc *p = x, *q = y;
	if (p->a != q->a)
		return rk(p->a) < rk(q->a) ? -1 : 1;
	return rk(p->b) < rk(q->b) ? -1 : rk(p->b) > rk(q->b);
}

/* Returns the number of merges; merges[i] = {a, b, c}. */
static uint32_t ref_train(struct ref *R, uint32_t target, uint32_t maxlen, uint64_t min_count,
			  uint32_t (*merges)[3], uint32_t maxmerges)
{
	uint32_t nm = 0;
	if (!maxlen)
		maxlen = UINT32_MAX;
	while (R->ntok < target && nm < maxmerges) {
		/* count every adjacent pair of every word */
		size_t np = 0;
		for (size_t i = 0; i < R->nw; i++)
			np += R->len[i] ? R->len[i] - 1 : 0;
		struct pc *all = malloc((np + 1) * sizeof *all);
		size_t k = 0;
		for (size_t i = 0; i < R->nw; i++)
			for (uint32_t j = 0; j + 1 < R->len[i]; j++)
				all[k++] = (struct pc){ R->w[i][j], R->w[i][j + 1], R->cnt[i] };
		qsort(all, k, sizeof *all, cmp_pc);
		struct pc best = { 0, 0, 0 };
		for (size_t i = 0; i < k;) {
			struct pc p = all[i];
			size_t j = i + 1;
			while (j < k && all[j].a == p.a && all[j].b == p.b)
				p.c += all[j++].c;
			i = j;
			if (p.c < min_count || R->tl[p.a] + R->tl[p.b] > maxlen)
				continue;
			/* pairs arrive in (a, b) order, so a strict > keeps the smallest on ties */
			if (p.c > best.c)
				best = p;
		}
		free(all);
		if (best.c == 0)
			break;
		uint32_t n = R->tl[best.a] + R->tl[best.b];
		uint8_t *s = malloc(n);
		memcpy(s, R->tb[best.a], R->tl[best.a]);
		memcpy(s + R->tl[best.a], R->tb[best.b], R->tl[best.b]);
		uint32_t c = R->ntok;
		for (uint32_t t = 0; t < R->ntok; t++)
			if (R->tl[t] == n && !memcmp(R->tb[t], s, n))
				c = t;
		if (c == R->ntok) {
			R->tb[c] = s;
			R->tl[c] = n;
			R->ntok++;
		} else {
			free(s);
		}
		merges[nm][0] = best.a;
		merges[nm][1] = best.b;
		merges[nm][2] = c;
		nm++;
		for (size_t i = 0; i < R->nw; i++) {
			uint32_t *w = R->w[i], j = 0;
			for (uint32_t x = 0; x < R->len[i];) {
				if (x + 1 < R->len[i] && w[x] == best.a && w[x + 1] == best.b) {
					w[j++] = c;
					x += 2;
				} else {
					w[j++] = w[x++];
				}
			}
			R->len[i] = j;
		}
	}
	return nm;
}

/* ---- comparing ---- */

static const char *ties_name[] = { "id", "hf" };

/* One trainer run against the reference's merges m[0..nm), ntok tokens. */
static int check_run(const struct lmt_wordcount *wc, const struct lmt_bpe_opts *o, uint32_t (*m)[3], uint32_t nm,
		     const struct ref *R, const char *what)
{
	struct lmt_bpe_result res;
	struct lmt_err err = { 0 };
	if (lmt_bpe_train(wc, o, &res, &err)) {
		tap_ok(0, "%s: train: %s", what, err.msg);
		return 0;
	}
	int ok = nm == res.n_merges && R->ntok == res.n_tokens;
	uint32_t i = 0;
	while (ok && i < nm) {
		if (memcmp(m[i], res.merge[i], sizeof m[i]))
			ok = 0;
		else
			i++;
	}
	if (!tap_ok(ok, "%s: %u merges identical to the reference", what, res.n_merges)) {
		tap_diag("reference %u merges / %u tokens, trainer %u / %u; first difference at merge %u", nm,
			 R->ntok, res.n_merges, res.n_tokens, i);
		if (i < nm && i < res.n_merges)
			tap_diag("reference (%u,%u)->%u, trainer (%u,%u)->%u", m[i][0], m[i][1], m[i][2],
				 res.merge[i][0], res.merge[i][1], res.merge[i][2]);
	}
	/* the token bytes of the result agree with the reference's too */
	int bytes_ok = res.n_tokens == R->ntok;
	for (uint32_t t = 0; bytes_ok && t < res.n_tokens; t++)
		bytes_ok = res.off[t + 1] - res.off[t] == R->tl[t] &&
			   !memcmp(res.bytes + res.off[t], R->tb[t], R->tl[t]);
	if (ok)
		tap_ok(bytes_ok, "%s: token bytes identical", what);
	lmt_bpe_result_release(&res);
	return ok;
}

/* The reference's merges under tie rule ties (nm, m: the caller frees m). */
static uint32_t (*ref_merges(const struct lmt_wordcount *wc, uint32_t target, uint32_t maxlen, uint64_t min_count,
			     int ties, struct ref *R, uint32_t *nm))[3]
{
	set_rrank(ties);
	ref_from_wc(R, wc, target);
	uint32_t(*m)[3] = malloc(sizeof *m * (target + 1));
	*nm = ref_train(R, target, maxlen, min_count ? min_count : 2, m, target);
	return m;
}

/* Both tie rules, 1 to 4 threads. */
static int compare(const struct lmt_wordcount *wc, uint32_t target, uint32_t maxlen, uint64_t min_count,
		   const char *what)
{
	static const int threads[] = { 1, 2, 3, 4 };
	int all = 1;
	for (int ties = 0; ties < 2; ties++) {
		struct ref R;
		uint32_t nm;
		uint32_t(*m)[3] = ref_merges(wc, target, maxlen, min_count, ties, &R, &nm);
		for (size_t k = 0; k < LMT_ARRAY_SIZE(threads); k++) {
			struct lmt_bpe_opts o = { 0 };
			o.n_tokens = target;
			o.max_token_len = maxlen;
			o.min_count = min_count;
			o.ties = ties;
			o.threads = threads[k];
			o.word_block_log2 = 1;
			o.sum_min = threads[k] > 1 ? 1 : 0; /* the falls summed, and not */
			/* 1 and 3 threads with heaps of a few pairs: the others wait in cold
			 * lists, which these corpora open (2 and 4: the default, 256) */
			o.heap_min = k % 2 ? 0 : 2;
			char w[256];
			snprintf(w, sizeof w, "%s, ties %s, %d thread%s%s", what, ties_name[ties], threads[k],
				 threads[k] > 1 ? "s" : "", o.heap_min ? ", cold lists" : "");
			all &= check_run(wc, &o, m, nm, &R, w);
		}
		free(m);
		ref_free(&R);
	}
	return all;
}

/* Train wc into *res, pairs of count 1 merged too; 0, or -1 after a failed test
 * named what. */
static int train_min1(const struct lmt_wordcount *wc, uint32_t n_tokens, int ties, int threads,
		      struct lmt_bpe_result *res, const char *what)
{
	struct lmt_bpe_opts o = { 0 };
	o.n_tokens = n_tokens;
	o.min_count = 1;
	o.ties = ties;
	o.threads = threads;
	struct lmt_err err = { 0 };
	if (!lmt_bpe_train(wc, &o, res, &err))
		return 0;
	tap_ok(0, "%s: train: %s", what, err.msg);
	return -1;
}

/* The first merge under each tie rule is the one written out. */
static void first_merge(const struct lmt_wordcount *wc, int ties, uint32_t a, uint32_t b, const char *what)
{
	struct lmt_bpe_result res;
	if (train_min1(wc, 257, ties, 1, &res, what))
		return;
	int ok = res.n_merges == 1 && res.merge[0][0] == a && res.merge[0][1] == b;
	if (!tap_ok(ok, "%s, ties %s: first merge (0x%02x,0x%02x)", what, ties_name[ties], a, b) && res.n_merges)
		tap_diag("got (0x%02x,0x%02x)", res.merge[0][0], res.merge[0][1]);
	lmt_bpe_result_release(&res);
}

/* The merges are applied in batches (see bpetrain.c): on real text most steps
 * apply several, and any thread count and any dealing of the words gives the
 * merges of one a step (compare). */
static void batched(const struct lmt_wordcount *wc)
{
	for (int nt = 1; nt <= 2; nt++) {
		struct lmt_bpe_result res;
		double t0 = lmt_now();
		if (train_min1(wc, 2000, LMT_BPE_TIES_ID, nt, &res, "batches"))
			continue;
		double wall = lmt_now() - t0;
		tap_ok(res.n_steps > 0 && res.n_steps * 4 <= res.n_merges,
		       "text fixtures, %d thread%s: %u merges in %u steps (at least 4 a step)", nt, nt > 1 ? "s" : "",
		       res.n_merges, res.n_steps);
		/* the parts are disjoint stretches of the call, timed by the same clock:
		 * 1 ns of slack for the rounding of their differences */
		double sum = res.setup_seconds + res.step_seconds + res.pick_seconds;
		if (!tap_ok(res.setup_seconds > 0 && res.step_seconds > 0 && res.pick_seconds > -1e-9 && sum <= wall + 1e-9,
			    "%d thread%s: set-up, steps and picking are parts of the call's time", nt, nt > 1 ? "s" : ""))
			tap_diag("setup %.9f step %.9f pick %.9f, call %.9f s", res.setup_seconds, res.step_seconds,
				 res.pick_seconds, wall);
		lmt_bpe_result_release(&res);
	}
}

static uint64_t rs = 1;
static uint64_t rnd(void)
{
	rs += 0x9e3779b97f4a7c15ULL;
	return lmt_mix64(rs);
}

/*
 * lmt_zalloc's pages are written when it returns (core/util.h): every page of a
 * block too large for malloc's heap (a fresh mapping) is resident. A calloc there
 * leaves them all untouched, which is what GCC made of malloc and memset until
 * util.h stopped it, silently; this is first in main, before any large block is
 * freed, so that the block is a fresh mapping.
 */
static void check_zalloc(void)
{
	const size_t bytes = 64u << 20; /* above glibc's largest mmap threshold, 32 MiB */
	long pg = sysconf(_SC_PAGESIZE);
	char *p = lmt_zalloc(bytes / 8, 8);
	if (!tap_ok(p != NULL && pg > 0, "lmt_zalloc of 64 MiB"))
		return;
	uintptr_t lo = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	uintptr_t hi = ((uintptr_t)p + bytes) & ~((uintptr_t)pg - 1);
	size_t npages = (hi - lo) / (size_t)pg, in = 0;
	unsigned char *vec = malloc(npages);
	int rc = vec ? mincore((void *)lo, hi - lo, vec) : -1;
	for (size_t i = 0; rc == 0 && i < npages; i++)
		in += vec[i] & 1;
	int zero = 1;
	for (size_t i = 0; i < bytes; i += (size_t)pg)
		zero &= p[i] == 0;
	tap_ok(rc == 0 && in == npages && zero, "lmt_zalloc: all %zu pages of 64 MiB resident and zero when it returns "
	       "(%zu resident)", npages, in);
	free(vec);
	free(p);
}

/* (word, count) of every slot, sorted by word: two tables hold the same words
 * with the same counts when these are equal */
static int by_word(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	return strcmp(x, y);
}

static char **word_list(const struct lmt_wordcount *wc)
{
	char **v = calloc(wc->n + 1, sizeof *v);
	size_t k = 0;
	for (size_t i = 0; v && i <= wc->mask; i++) {
		if (!wc->s[i].h || k == wc->n)
			continue;
		size_t len = wc->s[i].key & ((1u << 24) - 1);
		char buf[64];
		snprintf(buf, sizeof buf, "%.*s %llu", (int)len, (const char *)wc->arena + (wc->s[i].key >> 24),
			 (unsigned long long)wc->s[i].count);
		v[k++] = strdup(buf);
	}
	if (v)
		qsort(v, k, sizeof *v, by_word);
	return v;
}

/*
 * lmt_wordcount_merge with 1 to 4 workers: 4 tables of random words (200,000 adds,
 * some counts above 1), merged, hold every word of one table that took all the
 * adds, with the same count. Spread: 60,000 words, each table takes a quarter of
 * the adds, so they overlap, and the merged table is new, of 512k slots, a range
 * each worker; clusters cross the ranges' ends, so some words are left to the
 * caller's pass. Skewed: 100,000 words, the third table takes words 0..79999 and
 * has room for all, so the others are merged into it in place.
 */
static void test_merge_tables(void)
{
	for (int run = 0; run < 8; run++) {
		int workers = 1 + run % 4, skewed = run >= 4;
		struct lmt_wordcount one, part[4];
		lmt_wordcount_init(&one);
		for (int i = 0; i < 4; i++)
			lmt_wordcount_init(&part[i]);
		uint64_t r = 11;
		for (int k = 0; k < 200000; k++) {
			uint64_t x = lmt_mix64(r++);
			char w[32];
			uint64_t word = x % (skewed ? 100000 : 60000);
			int n = snprintf(w, sizeof w, "w%llu", (unsigned long long)word);
			uint64_t c = 1 + (x >> 32) % 3;
			int to = (int)((x >> 40) % 4);
			if (skewed)
				to = word < 80000 ? 2 : (int)((x >> 40) % 3 + (x >> 40) % 3 / 2);
			lmt_wordcount_add(&one, w, (size_t)n, c);
			lmt_wordcount_add(&part[to], w, (size_t)n, c);
		}
		struct lmt_workpool *pool = workers > 1 ? lmt_workpool_new(workers) : NULL;
		int rc = lmt_wordcount_merge(part, 4, pool);
		lmt_workpool_free(pool);
		char **a = word_list(&one), **b = word_list(&part[0]);
		size_t same = 0;
		while (a && b && same < one.n && b[same] && !strcmp(a[same], b[same]))
			same++;
		tap_ok(rc == 0 && part[0].n == one.n && part[0].total == one.total && same == one.n &&
		       part[1].n == 0 && part[3].s == NULL,
		       "4 tables, %s, merged by %d worker%s hold one table's %zu words with its counts (%zu alike)",
		       skewed ? "one with room for all" : "spread", workers, workers > 1 ? "s" : "", one.n, same);
		for (size_t i = 0; a && i < one.n; i++)
			free(a[i]);
		for (size_t i = 0; b && i < part[0].n; i++)
			free(b[i]);
		free(a);
		free(b);
		for (int i = 0; i < 4; i++)
			lmt_wordcount_release(&part[i]);
		lmt_wordcount_release(&one);
	}
	/* tables of threads that met no word (no arena at all) */
	struct lmt_wordcount e[3];
	for (int i = 0; i < 3; i++)
		lmt_wordcount_init(&e[i]);
	lmt_wordcount_add(&e[1], "abc", 3, 2);
	int rc1 = lmt_wordcount_merge(e, 3, NULL);
	int ok = rc1 == 0 && e[0].n == 1 && e[0].total == 2;
	for (int i = 0; i < 3; i++)
		lmt_wordcount_release(&e[i]);
	for (int i = 0; i < 3; i++)
		lmt_wordcount_init(&e[i]);
	ok &= lmt_wordcount_merge(e, 3, NULL) == 0 && e[0].n == 0 && e[0].total == 0;
	for (int i = 0; i < 3; i++)
		lmt_wordcount_release(&e[i]);
	tap_ok(ok, "tables without words merge: one word of three tables, and none");
}

/* Options out of range are refused with a message, and nothing is trained: fewer
 * tokens than the bytes, more than 2^31 (a change's pair key keeps its top bit for
 * a flag), an unknown tie rule. */
static void test_bad_opts(void)
{
	static const struct {
		uint32_t n_tokens;
		int ties;
		const char *msg;
	} bad[] = {
		{ 255, LMT_BPE_TIES_ID, "below the 256 byte tokens" },
		{ ((uint32_t)1 << 31) + 1, LMT_BPE_TIES_ID, "above 2^31" },
		{ UINT32_MAX, LMT_BPE_TIES_HF, "above 2^31" },
		{ 300, 7, "unknown tie rule 7" },
	};
	struct lmt_wordcount wc;
	lmt_wordcount_init(&wc);
	lmt_wordcount_add(&wc, "abab", 4, 3);
	for (size_t i = 0; i < LMT_ARRAY_SIZE(bad); i++) {
		struct lmt_bpe_opts o = { 0 };
		o.n_tokens = bad[i].n_tokens;
		o.ties = bad[i].ties;
		struct lmt_bpe_result res;
		struct lmt_err err = { 0 };
		int rc = lmt_bpe_train(&wc, &o, &res, &err);
		tap_ok(rc == LMT_EINVAL && strstr(err.msg, bad[i].msg) && !res.n_merges && !res.merge,
		       "%u tokens, tie rule %d: refused (%s)", bad[i].n_tokens, bad[i].ties, err.msg);
	}
	lmt_wordcount_release(&wc);
}

/* the words of wc, sorted, as "count word\n" lines in one string (caller frees) */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *table_text(const struct lmt_wordcount *wc)
{
	char **lines = calloc(wc->n + 1, sizeof *lines);
	size_t n = 0, total = 1;
	for (size_t i = 0; i <= wc->mask; i++) {
		const struct lmt_wordslot *e = &wc->s[i];
		if (!e->h)
			continue;
		size_t len = e->key & 0xffffff;
		lines[n] = malloc(len + 32);
		int k = snprintf(lines[n], 32, "%llu ", (unsigned long long)e->count);
		memcpy(lines[n] + k, wc->arena + (e->key >> 24), len);
		lines[n][k + len] = '\n';
		lines[n][k + len + 1] = 0;
		total += (size_t)k + len + 1;
		n++;
	}
	qsort(lines, n, sizeof *lines, cmp_str);
	char *out = malloc(total), *p = out;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(lines[i]);
		memcpy(p, lines[i], l);
		p += l;
		free(lines[i]);
	}
	*p = 0;
	free(lines);
	return out;
}

/* count path with the given threads and chunk (0: the default), specials
 * "<a>", "<a>bq" and "k\nk" (none with a regex); the table as table_text gives
 * it, or NULL */
static char *count_file_re(const char *path, int threads, size_t chunk, const char *pattern, const char *regex,
			   int lines, int specials)
{
	static const char *spec[] = { "<a>", "<a>bq", "k\nk" };
	struct lmt_corpus_opts co = { .format = LMT_CORPUS_TEXT, .txt_docs = lines ? LMT_TXT_LINE : LMT_TXT_FILE };
	struct lmt_toktrain_params p = { .vocab = 1000, .pattern = pattern, .regex = regex, .specials = spec,
					 .nspecials = specials ? 3 : 0, .sample = 1, .threads = threads, .corpus = &co,
					 .chunk_bytes = chunk };
	struct lmt_toktrain t;
	struct lmt_err err = { 0 };
	char *out = NULL;
	if (lmt_toktrain_init(&t, &p, &err) == 0 && lmt_toktrain_count(&t, &path, 1, NULL, NULL, &err) == 0)
		out = table_text(t.wc);
	else
		tap_diag("counting %s: %s", path, err.msg);
	lmt_toktrain_release(&t);
	return out;
}

static char *count_file(const char *path, int threads, size_t chunk, const char *pattern)
{
	return count_file_re(path, threads, chunk, pattern, NULL, 0, 1);
}

/*
 * A long document is cut into parts that threads count apart (toktrain.c's
 * cut_batch, at lmt_toktrain_cut's places): the counts are the same as one thread
 * counting it whole, with cuts every 64 bytes and 1 or 3 threads, for each built-in
 * pattern, on text of lines that end in letters, CRLF, spaces and digits, with
 * the special strings "<a>", "<a>bq" and "k\nk" in it (the longer skipped where
 * both start, as encoding takes it, so "<a>bqz" leaves "z"; no cut inside "k\nk").
 * And the cuts are where they may be: after a letter, before a line end, never
 * inside a special string.
 */
static const char *spec0[] = { "<a>", "k\nk" };

static void test_toktrain_cuts(void)
{
	char path[] = "/tmp/lmt-test-cuts-XXXXXX";
	int fd = mkstemp(path);
	if (!tap_ok(fd >= 0, "temporary file"))
		return;
	FILE *f = fdopen(fd, "w");
	static const char *bits[] = { "word", "Zeta", "\n", "\r\n", " ", "  ", "42", "'s", ".", "\xc3\xa9t\xc3\xa9",
		"<a>", "<a>bqz", "q<a>\n", "<a>b\n", "x\n\n", "\t", "\xe4\xb8\xad\n", "k\nk", "mk\nkm" };
	uint64_t x = 5;
	size_t n = 0;
	while (n < 200000) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		const char *b = bits[(x >> 33) % LMT_ARRAY_SIZE(bits)];
		fputs(b, f);
		n += strlen(b);
	}
	fclose(f);
	const char *pats[] = { "gpt2", "cl100k", "o200k" };
	for (int q = 0; q < 3; q++) {
		char *whole = count_file(path, 1, SIZE_MAX / 4, pats[q]);
		char *cut1 = count_file(path, 1, 64, pats[q]);
		char *cut3 = count_file(path, 3, 64, pats[q]);
		char *dflt = count_file(path, 3, 0, pats[q]);
		tap_ok(whole && cut1 && cut3 && dflt && !strcmp(whole, cut1) && !strcmp(whole, cut3) &&
		       !strcmp(whole, dflt), "%s: a 200 kB document counted whole, or cut every 64 bytes by 1 or 3 "
		       "threads, or by 3 as tok-train cuts it: the same counts", pats[q]);
		if (q == 0 && whole)
			tap_ok(strstr(whole, " z\n") && !strstr(whole, "bqz") && strstr(whole, " b\n"),
			       "\"<a>bq\" skipped whole where \"<a>\" also starts (\"z\" counted, no \"bqz\"), "
			       "\"<a>\" where \"<a>bq\" does not");
		free(whole);
		free(cut1);
		free(cut3);
		free(dflt);
	}
	/* custom patterns, which have no cut rule: guessed cuts settled where the
	 * items' pieces meet the whole's (toktrain.c), with patterns whose pieces meet
	 * at once, after a piece, never (3 bytes from the item's start), that leave
	 * bytes unmatched, look behind, or run over many items; the same counts as
	 * whole, in items of 64 and 300 bytes, by 1 or 3 threads, and by 3 as tok-train
	 * cuts it; and a file of lines of 20 to 600 bytes, each a document (no newline
	 * in one: cut at a character boundary), items running from one into the next */
	static const char *const res[] = {
		("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
		 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
		"(?s).{1,3}", "\\n[a-z]+|[a-z]+|.", "(?<=\\n)[a-z]{1,2}|[a-z]+|\\s+|.", "[^x]+|x", "(?s).",
	};
	char lpath[] = "/tmp/lmt-test-lines-XXXXXX";
	fd = mkstemp(lpath);
	if (!tap_ok(fd >= 0, "temporary file of lines"))
		return;
	f = fdopen(fd, "w");
	for (n = 0; n < 100000;) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t want = 20 + (x >> 33) % 580, got = 0;
		while (got < want) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			const char *b = bits[(x >> 33) % LMT_ARRAY_SIZE(bits)];
			for (; *b && got < want; b++, got++)
				fputc(*b == '\n' ? ' ' : *b, f);
		}
		fputc('\n', f);
		n += got + 1;
	}
	fclose(f);
	for (size_t ri = 0; ri < LMT_ARRAY_SIZE(res); ri++)
		for (int lines = 0; lines <= 1; lines++) {
			const char *pth = lines ? lpath : path;
			char *whole = count_file_re(pth, 1, SIZE_MAX / 4, NULL, res[ri], lines, 0);
			char *cut1 = count_file_re(pth, 1, 64, NULL, res[ri], lines, 0);
			char *cut3 = count_file_re(pth, 3, 300, NULL, res[ri], lines, 0);
			char *dflt = count_file_re(pth, 3, 0, NULL, res[ri], lines, 0);
			tap_ok(whole && cut1 && cut3 && dflt && !strcmp(whole, cut1) && !strcmp(whole, cut3) &&
			       !strcmp(whole, dflt), "/%.30s/: %s counted whole, or cut by guesses every 64 bytes by 1 "
			       "thread or every 300 by 3, or by 3 as tok-train cuts it: the same counts", res[ri],
			       lines ? "100 kB of lines" : "a 200 kB document");
			free(whole);
			free(cut1);
			free(cut3);
			free(dflt);
		}
	unlink(lpath);
	/* with the special strings "<a>", "<a>bq" and "k\nk", which the 200 kB document
	 * holds, a custom pattern's document and none's are cut at their starts (where
	 * no other spans: not inside "k\nk" or "<a>bq"), not by guesses */
	for (size_t ri = 0; ri <= LMT_ARRAY_SIZE(res); ri++) {
		const char *re = ri < LMT_ARRAY_SIZE(res) ? res[ri] : NULL, *pat = re ? NULL : "none";
		char *whole = count_file_re(path, 1, SIZE_MAX / 4, pat, re, 0, 1);
		char *cut1 = count_file_re(path, 1, 64, pat, re, 0, 1);
		char *cut3 = count_file_re(path, 3, 300, pat, re, 0, 1);
		tap_ok(whole && cut1 && cut3 && !strcmp(whole, cut1) && !strcmp(whole, cut3), "/%.30s/, special "
		       "strings skipped: a 200 kB document counted whole, or cut at special strings every 64 bytes by "
		       "1 thread or every 300 by 3: the same counts", re ? re : "none");
		free(whole);
		free(cut1);
		free(cut3);
	}
	{
		struct lmt_toktrain_params q = { .vocab = 1000, .regex = "\\w+|\\s+|.", .specials = spec0,
						 .nspecials = 2, .sample = 1, .threads = 1 };
		struct lmt_toktrain u;
		struct lmt_err e2 = { 0 };
		const char *tx = "ab<a>cd k\nk<a>e<a>";
		char got[64] = "";
		if (tap_ok(lmt_toktrain_init(&u, &q, &e2) == 0, "a trainer with a custom pattern")) {
			for (size_t c = lmt_toktrain_cut(&u, tx, strlen(tx), 0); c < strlen(tx);
			     c = lmt_toktrain_cut(&u, tx, strlen(tx), c + 1))
				snprintf(got + strlen(got), sizeof got - strlen(got), " %zu", c);
			tap_ok(!strcmp(got, " 2 8 11 15"), "a custom pattern's cuts: the starts of special strings, "
			       "\"k\\nk\" whole: at%s", got);
			/* "k\nk" at 1 and at 3 overlap: the whole takes the one at 1, so 3 is no
			 * cut, from wherever the search starts */
			const char *ov = "xk\nk\nk<a>";
			int bad = 0;
			for (size_t from = 0; from < strlen(ov); from++) {
				size_t c = lmt_toktrain_cut(&u, ov, strlen(ov), from);
				bad |= c != 1 && c != 6 && c != strlen(ov);
			}
			tap_ok(!bad, "... not at an occurrence that a taken one spans (\"k\\nk\" at 3 inside the one at 1)");
		}
		lmt_toktrain_release(&u);
	}
	/* the places, with a special string that holds a line end */
	static const char *spec[] = { "<a>", "k\nk" };
	struct lmt_toktrain_params p = { .vocab = 1000, .pattern = "gpt2", .specials = spec, .nspecials = 2,
					 .sample = 1, .threads = 1 };
	struct lmt_toktrain t;
	struct lmt_err err = { 0 };
	const char *text = "ab cd\nx <a\nb k\nk zz\r\n1\n";
	size_t len = strlen(text);
	if (tap_ok(lmt_toktrain_init(&t, &p, &err) == 0, "a trainer for the cut places")) {
		char got[64] = "";
		for (size_t c = lmt_toktrain_cut(&t, text, len, 0); c < len; c = lmt_toktrain_cut(&t, text, len, c + 1))
			snprintf(got + strlen(got), sizeof got - strlen(got), " %zu", c);
		tap_ok(!strcmp(got, " 2 5 7 10 12 16 19"), "cuts after a letter, before a space or a line end, none "
		       "inside the special \"k\\nk\" or after a digit: at%s", got);
	}
	lmt_toktrain_release(&t);
	unlink(path);
}

int main(void)
{
	struct lmt_wordcount wc;
	char what[160];

	test_toktrain_cuts();

	check_zalloc();
	test_merge_tables();
	test_bad_opts();

	/* ties everywhere: three pairs of count 2 */
	lmt_wordcount_init(&wc);
	lmt_wordcount_add(&wc, "ab", 2, 2);
	lmt_wordcount_add(&wc, "cd", 2, 2);
	lmt_wordcount_add(&wc, "ba", 2, 2);
	compare(&wc, 300, 0, 1, "three tied pairs");
	lmt_wordcount_release(&wc);

	/* ties the two rules order differently. " t" and "AB", 3 each: by id the space
	 * (0x20) is before 'A' (0x41); mapped, 'A' is itself (U+0041) and the space is
	 * U+0120, so "AB" first. 0xa0 and 0xa1 before 'z': 0xa0 < 0xa1 by id, but 0xa0
	 * maps to U+0142 and 0xa1 to itself, so 0xa1 first under hf. */
	lmt_wordcount_init(&wc);
	lmt_wordcount_add(&wc, "AB", 2, 3);
	lmt_wordcount_add(&wc, " t", 2, 3);
	first_merge(&wc, LMT_BPE_TIES_ID, 0x20, 't', "\" t\" against \"AB\"");
	first_merge(&wc, LMT_BPE_TIES_HF, 'A', 'B', "\" t\" against \"AB\"");
	compare(&wc, 300, 0, 1, "\" t\" against \"AB\"");
	lmt_wordcount_release(&wc);
	lmt_wordcount_init(&wc);
	lmt_wordcount_add(&wc, "\xa1z", 2, 5);
	lmt_wordcount_add(&wc, "\xa0z", 2, 5);
	first_merge(&wc, LMT_BPE_TIES_ID, 0xa0, 'z', "0xa0 z against 0xa1 z");
	first_merge(&wc, LMT_BPE_TIES_HF, 0xa1, 'z', "0xa0 z against 0xa1 z");
	lmt_wordcount_release(&wc);

	/* overlapping runs: (a,a) counts twice in "aaa" but merges once */
	lmt_wordcount_init(&wc);
	lmt_wordcount_add(&wc, "aaaa", 4, 3);
	lmt_wordcount_add(&wc, "aaa", 3, 5);
	lmt_wordcount_add(&wc, "abababab", 8, 2);
	lmt_wordcount_add(&wc, "bbbbbbbbb", 9, 1);
	compare(&wc, 300, 0, 1, "overlapping runs");
	compare(&wc, 300, 3, 1, "overlapping runs, tokens of at most 3 bytes");
	lmt_wordcount_release(&wc);

	/* a result that already exists: "abc" from (ab, c) and from (a, bc) */
	lmt_wordcount_init(&wc);
	lmt_wordcount_add(&wc, "abcx", 4, 10);
	lmt_wordcount_add(&wc, "ab", 2, 9);
	lmt_wordcount_add(&wc, "ybc", 3, 8);
	lmt_wordcount_add(&wc, "bc", 2, 8);
	lmt_wordcount_add(&wc, "ybcab", 5, 4);
	lmt_wordcount_add(&wc, "abc", 3, 3);
	compare(&wc, 300, 0, 1, "merge results that already exist");
	lmt_wordcount_release(&wc);

	/* random words over small alphabets: many ties, many overlaps */
	for (int trial = 0; trial < 12; trial++) {
		lmt_wordcount_init(&wc);
		int alpha = 2 + trial % 5, nwords = 50 + 40 * trial;
		for (int w = 0; w < nwords; w++) {
			char s[32];
			int n = 1 + (int)(rnd() % 12);
			for (int i = 0; i < n; i++)
				s[i] = (char)('a' + rnd() % (uint64_t)alpha);
			lmt_wordcount_add(&wc, s, (size_t)n, 1 + rnd() % (trial % 2 ? 3 : 1000));
		}
		uint32_t target = 256 + 20 + 30 * (uint32_t)trial;
		uint32_t maxlen = trial % 3 == 2 ? 4 : 0;
		uint64_t minc = trial % 4 == 3 ? 3 : 1;
		snprintf(what, sizeof what, "random corpus %d (alphabet %d, %d words, vocab %u, maxlen %u, min %llu)",
			 trial, alpha, nwords, target, maxlen, (unsigned long long)minc);
		compare(&wc, target, maxlen, minc, what);
		lmt_wordcount_release(&wc);
	}

	/* the text fixtures, split by the gpt2 pattern, counted in 1 table or in 3 */
	static const char *texts[] = { "en.txt", "code.c", "edge.txt", "te.txt", "ws.txt", "numbers.txt",
				       "cjk.txt", "emoji.txt" };
	struct lmt_pretok pt;
	struct lmt_pretok_iter it;
	struct lmt_err err;
	lmt_pretok_init(&pt, "gpt2", NULL, &err);
	lmt_pretok_iter_init(&it, &pt);
	struct lmt_wordcount one, part[3];
	lmt_wordcount_init(&one);
	for (int i = 0; i < 3; i++)
		lmt_wordcount_init(&part[i]);
	for (size_t k = 0; k < LMT_ARRAY_SIZE(texts); k++) {
		char path[128], *d;
		size_t n;
		snprintf(path, sizeof path, "tests/data/text/%s", texts[k]);
		if (lmt_read_file(path, &d, &n, &err)) {
			tap_ok(0, "read %s", path);
			continue;
		}
		lmt_wordcount_add_text(&one, &it, d, n);
		lmt_wordcount_add_text(&part[k % 3], &it, d, n);
		free(d);
	}
	lmt_wordcount_merge(part, 3, NULL);
	tap_ok(part[0].n == one.n && part[0].total == one.total,
	       "3 merged tables hold the same words as one (%zu distinct, %llu total)", one.n,
	       (unsigned long long)one.total);
	for (uint32_t v = 300; v <= 700; v += 200) {
		snprintf(what, sizeof what, "text fixtures, vocab %u", v);
		compare(&one, v, 0, 1, what);
		snprintf(what, sizeof what, "text fixtures counted in 3 tables, vocab %u", v);
		compare(&part[0], v, 0, 2, what);
	}
	compare(&one, 2000, 0, 1, "text fixtures until no pair is left");
	batched(&one);
	for (int i = 0; i < 3; i++)
		lmt_wordcount_release(&part[i]);
	lmt_wordcount_release(&one);
	lmt_pretok_iter_release(&it);
	lmt_pretok_release(&pt);
	return tap_done();
}
