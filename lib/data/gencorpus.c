/*
 * gencorpus.c: the built-in corpus; see gencorpus.h for what the language guarantees.
 *
 * The grammar is written once, as C functions that call pick() for every choice,
 * pick_num() for every number drawn and lit() for every fixed piece of text, and it
 * runs in one of two modes:
 *   generate: pick() draws an option with the PRNG and appends its rendering;
 *   parse:    pick() renders every option, requires exactly one to match the text at
 *             the current offset (lmt_gen_token_prefix), and consumes it.
 * Both modes add the same log(w/W) terms in the same order, so the parse of a
 * document gives back the generator's logprob bit for bit, and both hash the options
 * taken into the same trace. The parser never sees a random number: the text alone
 * decides. A parse error or an allocation failure unwinds with longjmp; a walk owns
 * no resources (the output buffer belongs to struct lmt_gen), so nothing leaks.
 *
 * A choice is a list of segments; a segment is a word table with a weight, a flag
 * set (plural form, capital letter, a/an) and an optional excluded entry. The
 * segment is drawn by segment weight, then the word by word weight, so a choice's
 * probability is (ws / sum ws) * (w / sum w over the segment): still one choice, and
 * every weight stays an integer.
 */
#include "data/gencorpus.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* ---- xoshiro256** and splitmix64 (https://prng.di.unimi.it/) ---- */

/* ---- tokens ---- */

/* Token classes: 1 letters, 2 digits, 3 spaces, 4 newlines (each a maximal run);
 * 0: every other byte is a token by itself. */
static inline int tclass(unsigned char c)
{
	if ((c | 32) >= 'a' && (c | 32) <= 'z')
		return 1;
	if (c >= '0' && c <= '9')
		return 2;
	if (c == ' ')
		return 3;
	if (c == '\n')
		return 4;
	return 0;
}

int lmt_gen_token_prefix(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen > blen || memcmp(a, b, alen))
		return 0;
	if (alen == 0 || alen == blen)
		return 1;
	int c = tclass((unsigned char)a[alen - 1]);
	return c == 0 || tclass((unsigned char)b[alen]) != c;
}

/* ---- the walk: one document, generated or parsed ---- */

enum { F_CAP = 1, F_PL = 2, F_ART = 4 };
#define RMAX 96    /* longest rendered option, plus room */
#define MAXSEG 12  /* most segments in one choice */

struct word {
	const char *s, *pl; /* singular / 3rd-person-singular form; plural form or NULL */
	uint32_t w;         /* weight; 0: not available here */
	int id;
};

struct seg {
	const struct word *t;
	int n;
	uint32_t w;     /* segment weight; 0: not available here */
	unsigned f;     /* F_* rendering flags */
	int excl;       /* entry that may not be taken, or -1 */
};

#define SEG(tab, wt, fl) { (tab), (int)LMT_ARRAY_SIZE(tab), (wt), (fl), -1 }
#define ONE(wd, wt, fl) { (wd), 1, (wt), (fl), -1 }

struct walk {
	int parse;
	int check;
	struct lmt_rng rng;
	struct lmt_gen *g;        /* generate: the output buffer */
	const char *text;         /* parse: the input */
	size_t len, pos;
	double lp;
	uint64_t nchoice, hash;
	struct lmt_err *err;
	jmp_buf jb;
};

static void fail(struct walk *w, int code, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));
static void fail(struct walk *w, int code, const char *fmt, ...)
{
	char msg[sizeof w->err->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	lmt_err_set(w->err, code, "%s", msg);
	longjmp(w->jb, code);
}

/* Up to n bytes of s as a readable quoted-string body (newlines as \n). */
static const char *show(char *out, size_t outsz, const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 5 < outsz; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n')
			k += (size_t)snprintf(out + k, outsz - k, "\\n");
		else if (c < 32 || c >= 127 || c == '\'')
			k += (size_t)snprintf(out + k, outsz - k, "\\x%02x", c);
		else
			out[k++] = (char)c;
	}
	out[k] = 0;
	return out;
}

/* What the text holds at the current offset: its next 3 tokens, more if needed to
 * cover `want` bytes (the length of what was expected), or "end of text". */
static const char *found(const struct walk *w, size_t want, char *out, size_t outsz)
{
	if (w->pos >= w->len)
		return "end of text";
	size_t e = w->pos;
	for (int t = 0; (t < 3 || e - w->pos < want) && e < w->len && e - w->pos < 60; t++) {
		int c = tclass((unsigned char)w->text[e++]);
		while (c && e < w->len && tclass((unsigned char)w->text[e]) == c && e - w->pos < 40)
			e++;
	}
	char tmp[160];
	snprintf(out, outsz, "'%s'", show(tmp, sizeof tmp, w->text + w->pos, e - w->pos));
	return out;
}

static size_t line_of(const struct walk *w)
{
	size_t line = 1;
	for (size_t i = 0; i < w->pos && i < w->len; i++)
		line += w->text[i] == '\n';
	return line;
}

static void put(struct walk *w, const char *s, size_t n)
{
	struct lmt_gen *g = w->g;
	if (!n)
		return;
	/* the token rule: pieces meet on a token boundary (gencorpus.h) */
	if (g->len) {
		int c = tclass((unsigned char)g->buf[g->len - 1]);
		LMT_ASSERT(c == 0 || tclass((unsigned char)s[0]) != c);
	}
	if (LMT_GROW(g->buf, g->cap, g->len + n + 1))
		fail(w, LMT_ENOMEM, "out of memory");
	memcpy(g->buf + g->len, s, n);
	g->len += n;
}

/* A fixed piece of text: appended, or required at the current offset. */
static void lit(struct walk *w, const char *s)
{
	size_t n = strlen(s);
	if (!w->parse) {
		put(w, s, n);
		return;
	}
	if (!lmt_gen_token_prefix(s, n, w->text + w->pos, w->len - w->pos)) {
		char a[160], b[200];
		fail(w, LMT_EFORMAT, "byte %zu (text line %zu): found %s, expected '%s'", w->pos, line_of(w),
		     found(w, n, b, sizeof b), show(a, sizeof a, s, n));
	}
	w->pos += n;
}

static void litf(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void litf(struct walk *w, const char *fmt, ...)
{
	char b[RMAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	lit(w, b);
}

static void add_lp(struct walk *w, uint64_t num, uint64_t den)
{
	if (num != den)
		w->lp += log((double)num / (double)den);
}

static void record(struct walk *w, uint64_t v)
{
	w->nchoice++;
	w->hash = lmt_mix64(w->hash ^ lmt_mix64(v + w->nchoice * 0x9e3779b97f4a7c15ULL));
}

static size_t render(char *d, const struct word *o, unsigned f)
{
	const char *s = (f & F_PL) && o->pl ? o->pl : o->s;
	size_t n = 0, k = strlen(s);
	if (f & F_ART) {
		int vowel = s[0] && strchr("aeiou", s[0]);
		memcpy(d, vowel ? "an " : "a ", vowel ? 3 : 2);
		n = vowel ? 3 : 2;
	}
	LMT_ASSERT(n + k < RMAX);
	memcpy(d + n, s, k);
	n += k;
	if ((f & F_CAP) && d[0] >= 'a' && d[0] <= 'z')
		d[0] = (char)(d[0] - 'a' + 'A');
	d[n] = 0;
	return n;
}

static int avail(const struct seg *sg, int i)
{
	return sg->t[i].w && i != sg->excl;
}

/* check mode: no two options of this choice may be token-prefixes of each other */
static void check_choice(struct walk *w, const struct seg *sg, int ns, const uint64_t *tot)
{
	for (int s = 0; s < ns; s++)
		for (int i = 0; tot[s] && i < sg[s].n; i++) {
			if (!avail(&sg[s], i))
				continue;
			char a[RMAX], b[RMAX];
			size_t an = render(a, &sg[s].t[i], sg[s].f);
			for (int s2 = s; s2 < ns; s2++)
				for (int j = s2 == s ? i + 1 : 0; tot[s2] && j < sg[s2].n; j++) {
					if (!avail(&sg[s2], j))
						continue;
					size_t bn = render(b, &sg[s2].t[j], sg[s2].f);
					if (lmt_gen_token_prefix(a, an, b, bn) || lmt_gen_token_prefix(b, bn, a, an)) {
						char x[200], y[200];
						fail(w, LMT_EFORMAT, "choice %llu: options '%s' and '%s' collide",
						     (unsigned long long)w->nchoice + 1, show(x, sizeof x, a, an),
						     show(y, sizeof y, b, bn));
					}
				}
		}
}

static void fail_expected(struct walk *w, const struct seg *sg, int ns, const uint64_t *tot)
	__attribute__((noreturn));
static void fail_expected(struct walk *w, const struct seg *sg, int ns, const uint64_t *tot)
{
	char list[600], one[RMAX], esc[200], f[200];
	size_t k = 0;
	int shown = 0, total = 0;
	for (int s = 0; s < ns; s++)
		for (int i = 0; tot[s] && i < sg[s].n; i++) {
			if (!avail(&sg[s], i))
				continue;
			if (shown < 5) {
				size_t n = render(one, &sg[s].t[i], sg[s].f);
				k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'", shown ? ", " : "",
						      show(esc, sizeof esc, one, n));
				if (k >= sizeof list)
					k = sizeof list - 1;
				shown++;
			}
			total++;
		}
	fail(w, LMT_EFORMAT, "byte %zu (text line %zu): found %s, expected %s%s (%d option%s)", w->pos,
	     line_of(w), found(w, 0, f, sizeof f), total > shown ? "one of " : "", list, total,
	     total == 1 ? "" : "s");
}

/* One choice among the options of ns segments; returns the segment, *idx the entry. */
static int pick(struct walk *w, const struct seg *sg, int ns, int *idx)
{
	uint64_t tot[MAXSEG], sw = 0;
	LMT_ASSERT(ns <= MAXSEG);
	for (int s = 0; s < ns; s++) {
		tot[s] = 0;
		for (int i = 0; sg[s].w && i < sg[s].n; i++)
			if (avail(&sg[s], i))
				tot[s] += sg[s].t[i].w;
		if (tot[s])
			sw += sg[s].w;
	}
	LMT_ASSERT(sw > 0);
	int s = 0, i = 0;
	if (!w->parse) {
		if (w->check)
			check_choice(w, sg, ns, tot);
		uint64_t r = lmt_rng_below(&w->rng, sw);
		for (s = 0;; s++) {
			if (!tot[s])
				continue;
			if (r < sg[s].w)
				break;
			r -= sg[s].w;
		}
		r = lmt_rng_below(&w->rng, tot[s]);
		for (i = 0;; i++) {
			if (!avail(&sg[s], i))
				continue;
			if (r < sg[s].t[i].w)
				break;
			r -= sg[s].t[i].w;
		}
		char b[RMAX];
		put(w, b, render(b, &sg[s].t[i], sg[s].f));
	} else {
		int hit = 0;
		size_t hitlen = 0;
		char first[RMAX];
		for (int s2 = 0; s2 < ns; s2++)
			for (int i2 = 0; tot[s2] && i2 < sg[s2].n; i2++) {
				if (!avail(&sg[s2], i2))
					continue;
				char b[RMAX];
				size_t n = render(b, &sg[s2].t[i2], sg[s2].f);
				if (!lmt_gen_token_prefix(b, n, w->text + w->pos, w->len - w->pos))
					continue;
				if (hit) {
					char x[200], y[200];
					fail(w, LMT_EFORMAT, "byte %zu (text line %zu): options '%s' and '%s' both match "
					     "(the language is ambiguous here)", w->pos, line_of(w),
					     show(x, sizeof x, first, hitlen), show(y, sizeof y, b, n));
				}
				hit = 1;
				hitlen = n;
				memcpy(first, b, n + 1);
				s = s2;
				i = i2;
			}
		if (!hit)
			fail_expected(w, sg, ns, tot);
		w->pos += hitlen;
	}
	add_lp(w, sg[s].w, sw);
	add_lp(w, sg[s].t[i].w, tot[s]);
	record(w, (uint64_t)s << 32 | (uint64_t)i);
	*idx = i;
	return s;
}

/*
 * A number in [lo, hi] (lo >= 1, hi <= 999), written in digits with no leading zero.
 * Its length in digits is drawn first, by lenw (NULL: in proportion to how many
 * numbers of that length are in range, which makes the number uniform), then the
 * value uniformly among the numbers of that length in range. One digit string is one
 * token, so the text gives the value back.
 */
static int pick_num(struct walk *w, int lo, int hi, const uint32_t *lenw)
{
	static const int p10[] = { 1, 10, 100, 1000 };
	uint64_t lw[3], lwsum = 0;
	int a[3], b[3];
	LMT_ASSERT(lo >= 1 && lo <= hi && hi <= 999);
	for (int L = 0; L < 3; L++) {
		a[L] = LMT_MAX(lo, p10[L]);
		b[L] = LMT_MIN(hi, p10[L + 1] - 1);
		lw[L] = a[L] > b[L] ? 0 : lenw ? lenw[L] : (uint64_t)(b[L] - a[L] + 1);
		lwsum += lw[L];
	}
	LMT_ASSERT(lwsum > 0);
	int L, v;
	if (!w->parse) {
		uint64_t r = lmt_rng_below(&w->rng, lwsum);
		for (L = 0; r >= lw[L]; L++)
			r -= lw[L];
		v = a[L] + (int)lmt_rng_below(&w->rng, (uint64_t)(b[L] - a[L] + 1));
		char d[8];
		put(w, d, (size_t)snprintf(d, sizeof d, "%d", v));
	} else {
		size_t d = 0;
		const char *t = w->text + w->pos;
		while (w->pos + d < w->len && d < 4 && tclass((unsigned char)t[d]) == 2)
			d++;
		char f[200];
		if (d == 0 || d > 3 || t[0] == '0')
			fail(w, LMT_EFORMAT, "byte %zu (text line %zu): found %s, expected a number from %d to %d",
			     w->pos, line_of(w), found(w, 0, f, sizeof f), lo, hi);
		v = 0;
		for (size_t k = 0; k < d; k++)
			v = v * 10 + (t[k] - '0');
		L = (int)d - 1;
		if (v < lo || v > hi || !lw[L])
			fail(w, LMT_EFORMAT, "byte %zu (text line %zu): number %d is not allowed here (from %d to %d)",
			     w->pos, line_of(w), v, lo, hi);
		w->pos += d;
	}
	add_lp(w, lw[L], lwsum);
	add_lp(w, 1, (uint64_t)(b[L] - a[L] + 1));
	record(w, (uint64_t)v | 1ULL << 40);
	return v;
}

/* ---- the vocabulary ---- */

#define LIT(name, str) static const struct word name[] = { { str, NULL, 1, 0 } }

static const struct word NAMES[] = {
	{ "Mia", 0, 1, 0 }, { "Leo", 0, 1, 0 }, { "Ava", 0, 1, 0 }, { "Sam", 0, 1, 0 },
	{ "Noor", 0, 1, 0 }, { "Omar", 0, 1, 0 }, { "Ines", 0, 1, 0 }, { "Kai", 0, 1, 0 },
	{ "Lena", 0, 1, 0 }, { "Tom", 0, 1, 0 }, { "Rosa", 0, 1, 0 }, { "Ben", 0, 1, 0 },
	{ "Zara", 0, 1, 0 }, { "Finn", 0, 1, 0 }, { "Nina", 0, 1, 0 }, { "Hugo", 0, 1, 0 },
	{ "Ada", 0, 1, 0 }, { "Eli", 0, 1, 0 }, { "Maya", 0, 1, 0 }, { "Theo", 0, 1, 0 },
	{ "Ravi", 0, 1, 0 }, { "Lila", 0, 1, 0 }, { "Otto", 0, 1, 0 }, { "Jack", 0, 1, 0 },
	{ "Nell", 0, 1, 0 }, { "Ezra", 0, 1, 0 }, { "Milo", 0, 1, 0 }, { "Cleo", 0, 1, 0 },
	{ "Arlo", 0, 1, 0 }, { "Hana", 0, 1, 0 }, { "Jude", 0, 1, 0 }, { "Anya", 0, 1, 0 },
	{ "Felix", 0, 1, 0 }, { "Vera", 0, 1, 0 }, { "Remy", 0, 1, 0 }, { "Tariq", 0, 1, 0 },
	{ "Yuki", 0, 1, 0 }, { "Sofia", 0, 1, 0 }, { "Pablo", 0, 1, 0 }, { "Greta", 0, 1, 0 },
};

static const struct word PETNAMES[] = {
	{ "Biscuit", 0, 1, 0 }, { "Pepper", 0, 1, 0 }, { "Noodle", 0, 1, 0 }, { "Bean", 0, 1, 0 },
	{ "Socks", 0, 1, 0 }, { "Pickle", 0, 1, 0 }, { "Maple", 0, 1, 0 }, { "Button", 0, 1, 0 },
	{ "Clover", 0, 1, 0 }, { "Waffle", 0, 1, 0 }, { "Ziggy", 0, 1, 0 }, { "Dot", 0, 1, 0 },
	{ "Pip", 0, 1, 0 }, { "Toffee", 0, 1, 0 }, { "Mochi", 0, 1, 0 }, { "Olive", 0, 1, 0 },
	{ "Bramble", 0, 1, 0 }, { "Sprout", 0, 1, 0 }, { "Juniper", 0, 1, 0 }, { "Fig", 0, 1, 0 },
};

enum { PR_SHE, PR_HE, PR_THEY };
static const struct {
	const char *subj, *obj, *poss;
} PRON[] = {
	{ "she", "her", "her" },
	{ "he", "him", "his" },
	{ "they", "them", "their" },
};

static const struct word KINDS[] = {
	{ "girl", 0, 3, PR_SHE }, { "boy", 0, 3, PR_HE }, { "child", 0, 2, PR_THEY },
	{ "woman", 0, 2, PR_SHE }, { "man", 0, 2, PR_HE }, { "person", 0, 1, PR_THEY },
};

static const struct word ADJ[] = {
	{ "big", 0, 3, 0 }, { "small", 0, 3, 0 }, { "little", 0, 3, 0 }, { "red", 0, 2, 0 },
	{ "blue", 0, 2, 0 }, { "green", 0, 2, 0 }, { "yellow", 0, 2, 0 }, { "purple", 0, 1, 0 },
	{ "old", 0, 2, 0 }, { "tiny", 0, 2, 0 }, { "shiny", 0, 1, 0 }, { "soft", 0, 1, 0 },
	{ "round", 0, 1, 0 }, { "bright", 0, 1, 0 }, { "heavy", 0, 1, 0 }, { "funny", 0, 1, 0 },
	{ "strange", 0, 1, 0 }, { "pretty", 0, 1, 0 }, { "golden", 0, 1, 0 }, { "wooden", 0, 1, 0 },
	{ "striped", 0, 1, 0 }, { "spotted", 0, 1, 0 }, { "new", 0, 2, 0 }, { "dusty", 0, 1, 0 },
	{ "lucky", 0, 1, 0 }, { "empty", 0, 1, 0 },
};

static const struct word THINGS[] = {
	{ "kite", "kites", 3, 0 }, { "ball", "balls", 3, 0 }, { "boat", "boats", 2, 0 },
	{ "hat", "hats", 2, 0 }, { "box", "boxes", 2, 0 }, { "lamp", "lamps", 1, 0 },
	{ "chair", "chairs", 1, 0 }, { "tree", "trees", 2, 0 }, { "bridge", "bridges", 1, 0 },
	{ "house", "houses", 2, 0 }, { "cloud", "clouds", 1, 0 }, { "star", "stars", 1, 0 },
	{ "bell", "bells", 1, 0 }, { "drum", "drums", 1, 0 }, { "key", "keys", 1, 0 },
	{ "ring", "rings", 1, 0 }, { "umbrella", "umbrellas", 1, 0 }, { "clock", "clocks", 1, 0 },
	{ "basket", "baskets", 1, 0 }, { "bicycle", "bicycles", 1, 0 }, { "train", "trains", 1, 0 },
	{ "wagon", "wagons", 1, 0 }, { "window", "windows", 1, 0 }, { "candle", "candles", 1, 0 },
	{ "mirror", "mirrors", 1, 0 }, { "ladder", "ladders", 1, 0 }, { "blanket", "blankets", 1, 0 },
	{ "scarf", "scarves", 1, 0 }, { "bench", "benches", 1, 0 }, { "bucket", "buckets", 1, 0 },
	{ "tent", "tents", 1, 0 }, { "flag", "flags", 1, 0 }, { "flower", "flowers", 2, 0 },
};

static const struct word ANIMALS[] = {
	{ "dog", "dogs", 3, 0 }, { "cat", "cats", 3, 0 }, { "rabbit", "rabbits", 2, 0 },
	{ "parrot", "parrots", 1, 0 }, { "turtle", "turtles", 1, 0 }, { "hamster", "hamsters", 1, 0 },
	{ "owl", "owls", 2, 0 }, { "goat", "goats", 1, 0 }, { "pony", "ponies", 1, 0 },
	{ "duck", "ducks", 2, 0 }, { "frog", "frogs", 1, 0 }, { "mouse", "mice", 2, 0 },
	{ "fox", "foxes", 2, 0 }, { "hen", "hens", 1, 0 }, { "lamb", "lambs", 1, 0 },
	{ "goose", "geese", 1, 0 }, { "horse", "horses", 2, 0 }, { "bear", "bears", 1, 0 },
	{ "squirrel", "squirrels", 1, 0 }, { "bee", "bees", 1, 0 }, { "snail", "snails", 1, 0 },
	{ "whale", "whales", 1, 0 }, { "tiger", "tigers", 1, 0 }, { "camel", "camels", 1, 0 },
};

static const struct word PETS[] = {
	{ "dog", 0, 4, 0 }, { "cat", 0, 4, 0 }, { "rabbit", 0, 2, 0 }, { "parrot", 0, 1, 0 },
	{ "turtle", 0, 1, 0 }, { "hamster", 0, 2, 0 }, { "goat", 0, 1, 0 }, { "pony", 0, 1, 0 },
	{ "duck", 0, 1, 0 }, { "frog", 0, 1, 0 }, { "mouse", 0, 1, 0 }, { "hen", 0, 1, 0 },
};

static const struct word FOODS[] = {
	{ "apple", "apples", 3, 0 }, { "pear", "pears", 2, 0 }, { "plum", "plums", 1, 0 },
	{ "peach", "peaches", 1, 0 }, { "cake", "cakes", 2, 0 }, { "pie", "pies", 1, 0 },
	{ "sandwich", "sandwiches", 2, 0 }, { "cookie", "cookies", 2, 0 }, { "muffin", "muffins", 1, 0 },
	{ "orange", "oranges", 2, 0 }, { "banana", "bananas", 2, 0 }, { "carrot", "carrots", 1, 0 },
	{ "egg", "eggs", 1, 0 }, { "bun", "buns", 1, 0 }, { "pancake", "pancakes", 1, 0 },
	{ "tomato", "tomatoes", 1, 0 }, { "cherry", "cherries", 1, 0 }, { "lemon", "lemons", 1, 0 },
	{ "potato", "potatoes", 1, 0 }, { "melon", "melons", 1, 0 },
};

static const struct word BOOKS[] = {
	{ "book", "books", 4, 0 }, { "letter", "letters", 2, 0 }, { "poem", "poems", 2, 0 },
	{ "story", "stories", 3, 0 }, { "map", "maps", 1, 0 }, { "note", "notes", 1, 0 },
	{ "newspaper", "newspapers", 1, 0 }, { "comic", "comics", 1, 0 }, { "recipe", "recipes", 1, 0 },
	{ "postcard", "postcards", 1, 0 }, { "diary", "diaries", 1, 0 }, { "sign", "signs", 1, 0 },
	{ "menu", "menus", 1, 0 },
};

/* things a protagonist counts: apples come and go, so their number must be tracked */
static const struct word INVENTORY[] = {
	{ "apple", "apples", 2, 0 }, { "pear", "pears", 1, 0 }, { "plum", "plums", 1, 0 },
	{ "shell", "shells", 2, 0 }, { "stone", "stones", 2, 0 }, { "stamp", "stamps", 1, 0 },
	{ "marble", "marbles", 2, 0 }, { "coin", "coins", 2, 0 }, { "button", "buttons", 1, 0 },
	{ "cookie", "cookies", 1, 0 }, { "egg", "eggs", 1, 0 }, { "pencil", "pencils", 1, 0 },
	{ "card", "cards", 1, 0 }, { "flower", "flowers", 1, 0 }, { "feather", "feathers", 1, 0 },
	{ "bead", "beads", 1, 0 }, { "ribbon", "ribbons", 1, 0 }, { "cherry", "cherries", 1, 0 },
	{ "acorn", "acorns", 1, 0 }, { "leaf", "leaves", 1, 0 }, { "sticker", "stickers", 1, 0 },
	{ "crayon", "crayons", 1, 0 }, { "seed", "seeds", 1, 0 }, { "sock", "socks", 1, 0 },
};

static const struct word PLACES[] = {
	{ "park", 0, 3, 0 }, { "beach", 0, 2, 0 }, { "market", 0, 2, 0 }, { "river", 0, 2, 0 },
	{ "garden", 0, 2, 0 }, { "forest", 0, 2, 0 }, { "library", 0, 1, 0 }, { "school", 0, 2, 0 },
	{ "farm", 0, 1, 0 }, { "lake", 0, 1, 0 }, { "village", 0, 1, 0 }, { "harbor", 0, 1, 0 },
	{ "hill", 0, 1, 0 }, { "bakery", 0, 1, 0 }, { "station", 0, 1, 0 }, { "meadow", 0, 1, 0 },
	{ "zoo", 0, 1, 0 }, { "museum", 0, 1, 0 }, { "orchard", 0, 1, 0 }, { "pond", 0, 1, 0 },
};

static const struct word TIMES[] = {
	{ "morning", 0, 3, 0 }, { "afternoon", 0, 2, 0 }, { "evening", 0, 2, 0 },
};

static const struct word FEEL[] = {
	{ "happy", 0, 3, 0 }, { "sad", 0, 1, 0 }, { "tired", 0, 2, 0 }, { "hungry", 0, 2, 0 },
	{ "sleepy", 0, 1, 0 }, { "proud", 0, 1, 0 }, { "busy", 0, 1, 0 }, { "calm", 0, 1, 0 },
	{ "brave", 0, 1, 0 }, { "curious", 0, 1, 0 }, { "excited", 0, 1, 0 }, { "bored", 0, 1, 0 },
	{ "cheerful", 0, 1, 0 }, { "worried", 0, 1, 0 }, { "glad", 0, 1, 0 }, { "shy", 0, 1, 0 },
};

static const struct word PETADJ[] = {
	{ "sleepy", 0, 2, 0 }, { "hungry", 0, 2, 0 }, { "playful", 0, 2, 0 }, { "happy", 0, 1, 0 },
	{ "noisy", 0, 1, 0 }, { "fluffy", 0, 1, 0 }, { "quiet", 0, 1, 0 }, { "clever", 0, 1, 0 },
	{ "lazy", 0, 1, 0 }, { "grumpy", 0, 1, 0 },
};

static const struct word HELPERS[] = {
	{ "teacher", 0, 2, 0 }, { "baker", 0, 1, 0 }, { "farmer", 0, 1, 0 }, { "doctor", 0, 1, 0 },
	{ "neighbor", 0, 2, 0 }, { "librarian", 0, 1, 0 }, { "gardener", 0, 1, 0 }, { "painter", 0, 1, 0 },
};

/* weather nouns; id picks the adjective table that goes with each */
static const struct word W_SUN[] = {
	{ "warm", 0, 2, 0 }, { "bright", 0, 2, 0 }, { "hot", 0, 1, 0 }, { "pale", 0, 1, 0 },
};
static const struct word W_WIND[] = {
	{ "strong", 0, 2, 0 }, { "cold", 0, 2, 0 }, { "gentle", 0, 1, 0 }, { "loud", 0, 1, 0 },
};
static const struct word W_RAIN[] = {
	{ "light", 0, 2, 0 }, { "heavy", 0, 2, 0 }, { "cold", 0, 1, 0 }, { "warm", 0, 1, 0 },
};
static const struct word W_SKY[] = {
	{ "blue", 0, 3, 0 }, { "gray", 0, 2, 0 }, { "clear", 0, 1, 0 }, { "dark", 0, 1, 0 },
};
static const struct word W_SNOW[] = {
	{ "deep", 0, 1, 0 }, { "white", 0, 2, 0 }, { "soft", 0, 1, 0 }, { "fresh", 0, 1, 0 },
};
static const struct {
	const struct word *t;
	int n;
} WADJ[] = {
	{ W_SUN, 4 }, { W_WIND, 4 }, { W_RAIN, 4 }, { W_SKY, 4 }, { W_SNOW, 4 },
};
static const struct word WEATHER[] = {
	{ "sun", 0, 3, 0 }, { "wind", 0, 2, 1 }, { "rain", 0, 2, 2 }, { "sky", 0, 2, 3 },
	{ "snow", 0, 1, 4 },
};

enum {
	V_LIKE, V_EAT, V_READ, V_SEE, V_PAINT, V_FIND, V_WALK, V_SING, V_SLEEP, V_IS, V_HAVE,
	V_GIVE, V_COLLECT, V_MEET, V_LIVE, V_FEED, V_KNOW, V_LEARN, V_SAY, V_ASK,
	V_SMILE, V_WAVE, V_HELP, V_RUN, V_CHASE,
};

/* the protagonist's verbs: 3rd person singular, plural (for "they") */
static const struct word VERBS[] = {
	{ "likes", "like", 6, V_LIKE }, { "eats", "eat", 5, V_EAT }, { "reads", "read", 5, V_READ },
	{ "sees", "see", 6, V_SEE }, { "paints", "paint", 3, V_PAINT }, { "finds", "find", 4, V_FIND },
	{ "walks to", "walk to", 5, V_WALK }, { "sings", "sing", 2, V_SING },
	{ "sleeps", "sleep", 2, V_SLEEP }, { "is", "are", 6, V_IS }, { "has", "have", 10, V_HAVE },
	{ "gives", "give", 9, V_GIVE }, { "collects", "collect", 6, V_COLLECT },
	{ "meets", "meet", 7, V_MEET }, { "lives with", "live with", 6, V_LIVE },
	{ "feeds", "feed", 4, V_FEED }, { "knows that", "know that", 4, V_KNOW },
	{ "learns that", "learn that", 4, V_LEARN }, { "says,", "say,", 5, V_SAY },
	{ "asks,", "ask,", 4, V_ASK },
};

static const struct word FVERBS[] = {
	{ "says,", 0, 4, V_SAY }, { "asks,", 0, 4, V_ASK }, { "smiles", 0, 2, V_SMILE },
	{ "laughs", 0, 1, V_SMILE }, { "waves to", 0, 2, V_WAVE }, { "helps", 0, 2, V_HELP },
	{ "likes", 0, 2, V_LIKE }, { "sees", 0, 2, V_SEE },
};

static const struct word PVERBS[] = {
	{ "sleeps", 0, 3, V_SLEEP }, { "runs", 0, 2, V_RUN }, { "plays", 0, 2, V_RUN },
	{ "jumps", 0, 1, V_RUN }, { "hides", 0, 1, V_RUN }, { "eats", 0, 2, V_EAT },
	{ "chases", 0, 2, V_CHASE },
};

static const struct word IVERBS[] = {
	{ "like", 0, 3, 0 }, { "see", 0, 2, 0 }, { "love", 0, 2, 0 }, { "want", 0, 2, 0 },
};
static const struct word WE_GO[] = {
	{ "can go to the", 0, 2, 0 }, { "should visit the", 0, 1, 0 },
};
static const struct word IT_IS[] = {
	{ "sunny", 0, 2, 0 }, { "cold", 0, 2, 0 }, { "warm", 0, 1, 0 }, { "windy", 0, 1, 0 },
	{ "late", 0, 1, 0 }, { "early", 0, 1, 0 },
};
static const struct word A_TITLE[] = { { "Day at the", 0, 1, 0 }, { "Gift for", 0, 1, 0 } };

LIT(O_THE_T, "The");
LIT(O_A_T, "A");
LIT(O_STORY, "Story of");
LIT(O_ONCE, "Once");
LIT(O_THIS, "This");
LIT(O_SP, " ");
LIT(O_PARA, "\n\n");
LIT(O_END, "\n");
LIT(O_QUOTE, "\"");
LIT(O_IN, "In the");
LIT(O_NOW, "Now");
LIT(O_THE, "The");
LIT(O_the, "the");
LIT(O_DOT, ".");
LIT(O_TODAY, " today.");
LIT(O_NEAR, " near the");
LIT(O_WITH, " with");
LIT(O_I, "I");
LIT(O_WE, "We");
LIT(O_LET, "Let");
LIT(O_IT, "It");
LIT(O_WHERE, "Where");
LIT(O_DO, "Do");
LIT(O_CAN, "Can");
LIT(O_HOW, "How");

static const uint32_t LEN_INV[3] = { 6, 3, 1 };  /* 1, 2, 3 digits */
static const uint32_t LEN_FACT[3] = { 1, 1, 0 };

/* ---- the grammar ---- */

struct story {
	int name, pron;     /* the protagonist: NAMES index, PR_* */
	int friend;         /* NAMES index or -1 */
	int pet, petname;   /* PETS, PETNAMES index or -1 */
	int inv, count;     /* INVENTORY index or -1; how many, 1..999 */
	int dirty;          /* count changed since it was last said */
};

static const char *noun_n(const struct word *t, int n)
{
	return n == 1 ? t->s : t->pl;
}

static int one_of(struct walk *w, const struct word *t, int n, unsigned f)
{
	struct seg sg[] = { { t, n, 1, f, -1 } };
	int i;
	pick(w, sg, 1, &i);
	return i;
}
#define ONE_OF(w, tab, f) one_of((w), (tab), (int)LMT_ARRAY_SIZE(tab), (f))

/*
 * A noun phrase: "the" [ADJ] NOUN or "a"/"an" [ADJ] NOUN, the noun from the given
 * segments (their weights weigh the classes). The article is rendered with the word
 * after it, so "a"/"an" is decided by that word.
 */
static void np(struct walk *w, const struct seg *nouns, int nn)
{
	struct seg sg[MAXSEG];
	uint32_t c = 0;
	LMT_ASSERT(nn + 2 <= MAXSEG);
	for (int j = 0; j < nn; j++)
		c += nouns[j].w;
	sg[0] = (struct seg)SEG(O_the, 3 * c, 0);
	sg[1] = (struct seg)SEG(ADJ, 2 * c, F_ART);
	for (int j = 0; j < nn; j++) {
		sg[2 + j] = nouns[j];
		sg[2 + j].w = 4 * nouns[j].w;
		sg[2 + j].f |= F_ART;
	}
	int i, s = pick(w, sg, nn + 2, &i);
	if (s == 0) {
		lit(w, " ");
		for (int j = 0; j < nn; j++)
			sg[2 + j].f &= ~(unsigned)F_ART;
		sg[1].f = 0;
		s = pick(w, sg + 1, nn + 1, &i) + 1;
	}
	if (s == 1) {
		lit(w, " ");
		pick(w, nouns, nn, &i);
	}
}

static const struct seg NP_ANY[] = { SEG(THINGS, 2, 0), SEG(ANIMALS, 2, 0), SEG(FOODS, 1, 0) };
static const struct seg NP_SEE[] = { SEG(ANIMALS, 1, 0), SEG(THINGS, 1, 0) };
static const struct seg NP_PAINT[] = { SEG(THINGS, 2, 0), SEG(ANIMALS, 1, 0) };
static const struct seg NP_FOOD[] = { SEG(FOODS, 1, 0) };
static const struct seg NP_BOOK[] = { SEG(BOOKS, 1, 0) };
static const struct seg NP_THING[] = { SEG(THINGS, 1, 0) };
static const struct seg NP_ANIMAL[] = { SEG(ANIMALS, 1, 0) };
#define NP(w, segs) np((w), (segs), (int)LMT_ARRAY_SIZE(segs))

/* A sentence's last words: "." | " today." | " near the" PLACE "." | " with" NAME "." */
static void ending(struct walk *w, const char *companion)
{
	struct seg sg[] = {
		SEG(O_DOT, 10, 0), SEG(O_TODAY, 2, 0), SEG(O_NEAR, 3, 0), SEG(O_WITH, companion ? 3 : 0, 0),
	};
	int i, s = pick(w, sg, 4, &i);
	if (s == 2) {
		lit(w, " ");
		ONE_OF(w, PLACES, 0);
		lit(w, ".");
	} else if (s == 3) {
		lit(w, " ");
		lit(w, companion);
		lit(w, ".");
	}
}

/* Who says it: the protagonist by name or pronoun, or the friend. Returns 1 for a
 * pronoun subject. */
static int subject(struct walk *w, const struct story *st, unsigned f)
{
	struct word wn = { NAMES[st->name].s, 0, 1, 0 }, wp = { PRON[st->pron].subj, 0, 1, 0 };
	struct seg sg[] = { ONE(&wn, 2, f), ONE(&wp, 3, f) };
	int i;
	return pick(w, sg, 2, &i);
}

enum { Q_STMT = 1, Q_QUEST = 2, Q_HOWMANY = 4 };

/* What is said between the quotes, starting with a capital; returns Q_STMT or
 * Q_QUEST, with Q_HOWMANY for the question the protagonist must answer. by_friend:
 * 1 if the friend speaks, 0 the protagonist, -1 not known yet. */
static int quote(struct walk *w, const struct story *st, int types, int by_friend)
{
	int st_ok = types & Q_STMT, q_ok = types & Q_QUEST;
	struct word wpet = { st->pet >= 0 ? PETNAMES[st->petname].s : "", 0, 1, 0 };
	struct seg sg[] = {
		SEG(O_I, st_ok ? 4 : 0, 0), SEG(O_WE, st_ok ? 2 : 0, 0), SEG(O_LET, st_ok ? 1 : 0, 0),
		SEG(O_IT, st_ok ? 2 : 0, 0), SEG(O_THE, st_ok ? 3 : 0, 0),
		SEG(O_WHERE, q_ok ? 2 : 0, 0), SEG(O_DO, q_ok ? 2 : 0, 0), SEG(O_CAN, q_ok ? 2 : 0, 0),
		SEG(O_HOW, q_ok && by_friend == 1 && st->inv >= 0 ? 4 : 0, 0),
	};
	int i, s = pick(w, sg, (int)LMT_ARRAY_SIZE(sg), &i);
	switch (s) {
	case 0: /* I like a red kite */
		lit(w, " ");
		ONE_OF(w, IVERBS, 0);
		lit(w, " ");
		NP(w, NP_ANY);
		return Q_STMT;
	case 1: /* We can go to the park */
		lit(w, " ");
		ONE_OF(w, WE_GO, 0);
		lit(w, " ");
		ONE_OF(w, PLACES, 0);
		return Q_STMT;
	case 2:
		lit(w, " us go to the ");
		ONE_OF(w, PLACES, 0);
		return Q_STMT;
	case 3:
		lit(w, " is ");
		ONE_OF(w, IT_IS, 0);
		return Q_STMT;
	case 4: { /* The kites are red: the noun's number picks the verb */
		lit(w, " ");
		struct seg n[] = {
			SEG(THINGS, 2, 0), SEG(THINGS, 1, F_PL), SEG(ANIMALS, 2, 0), SEG(ANIMALS, 1, F_PL),
		};
		int pl = pick(w, n, 4, &i) & 1;
		lit(w, pl ? " are " : " is ");
		ONE_OF(w, ADJ, 0);
		return Q_STMT;
	}
	case 5: { /* Where is the owl / Where is Biscuit */
		lit(w, " is ");
		struct seg sw[] = { SEG(O_the, 3, 0), ONE(&wpet, st->pet >= 0 ? 2 : 0, 0) };
		if (pick(w, sw, 2, &i) == 0) {
			lit(w, " ");
			struct seg n[] = { SEG(ANIMALS, 1, 0), SEG(THINGS, 1, 0) };
			pick(w, n, 2, &i);
		}
		return Q_QUEST;
	}
	case 6:
		lit(w, " you like ");
		NP(w, NP_ANY);
		return Q_QUEST;
	case 7:
		lit(w, " we go to the ");
		ONE_OF(w, PLACES, 0);
		return Q_QUEST;
	default:
		lit(w, " many ");
		lit(w, INVENTORY[st->inv].pl);
		lit(w, " do you have");
		return Q_QUEST | Q_HOWMANY;
	}
}

/* `says, "..."` or `asks, "..."` after a subject; by_friend as for quote(). */
static void speech(struct walk *w, struct story *st, int ask, int by_friend)
{
	lit(w, " \"");
	int q = quote(w, st, ask ? Q_QUEST : Q_STMT, by_friend);
	lit(w, ask ? "?\"" : ".\"");
	if (q & Q_HOWMANY) {
		/* the answer is forced: the protagonist says the count */
		litf(w, " \"I have %d %s,\" says %s.", st->count, noun_n(&INVENTORY[st->inv], st->count),
		     NAMES[st->name].s);
		st->dirty = 0;
	}
}

/* Protagonist as subject (plural: the pronoun is "they"): verb and the rest. */
static void predicate(struct walk *w, struct story *st, int plural)
{
	struct word v[LMT_ARRAY_SIZE(VERBS)];
	memcpy(v, VERBS, sizeof v);
	for (size_t k = 0; k < LMT_ARRAY_SIZE(v); k++) {
		int ok = 1;
		switch (v[k].id) {
		case V_HAVE: ok = st->inv < 0; break;
		case V_GIVE: ok = st->inv >= 0 && st->count >= 2; break;
		case V_COLLECT: ok = st->inv >= 0 && st->count < 999; break;
		case V_MEET: ok = st->friend < 0; break;
		case V_LIVE: ok = st->pet < 0; break;
		case V_FEED: ok = st->pet >= 0; break;
		}
		if (!ok)
			v[k].w = 0;
	}
	const char *fr = st->friend >= 0 ? NAMES[st->friend].s : NULL;
	struct seg sg[] = { { v, (int)LMT_ARRAY_SIZE(v), 1, plural ? F_PL : 0, -1 } };
	int i, a, b;
	lit(w, " ");
	pick(w, sg, 1, &i);
	switch (v[i].id) {
	case V_LIKE: lit(w, " "); NP(w, NP_ANY); ending(w, fr); break;
	case V_EAT: lit(w, " "); NP(w, NP_FOOD); ending(w, fr); break;
	case V_READ: lit(w, " "); NP(w, NP_BOOK); ending(w, fr); break;
	case V_SEE: lit(w, " "); NP(w, NP_SEE); ending(w, fr); break;
	case V_PAINT: lit(w, " "); NP(w, NP_PAINT); ending(w, fr); break;
	case V_FIND: lit(w, " "); NP(w, NP_THING); ending(w, fr); break;
	case V_WALK: lit(w, " the "); ONE_OF(w, PLACES, 0); ending(w, fr); break;
	case V_SING:
	case V_SLEEP: ending(w, fr); break;
	case V_IS: lit(w, " "); ONE_OF(w, FEEL, 0); ending(w, fr); break;
	case V_HAVE: { /* She has 7 red apples. */
		lit(w, " ");
		int n = pick_num(w, 1, 999, LEN_INV);
		lit(w, " ");
		unsigned f = n == 1 ? 0 : F_PL;
		struct seg s2[] = { SEG(ADJ, 1, 0), SEG(INVENTORY, 3, f) };
		if (pick(w, s2, 2, &i) == 0) {
			lit(w, " ");
			i = ONE_OF(w, INVENTORY, f);
		}
		lit(w, ".");
		st->inv = i;
		st->count = n;
		st->dirty = 0;
		break;
	}
	case V_GIVE: { /* She gives 2 apples to Leo / to the teacher. */
		lit(w, " ");
		int m = pick_num(w, 1, st->count - 1, NULL);
		litf(w, " %s to ", noun_n(&INVENTORY[st->inv], m));
		struct word wf = { fr ? fr : "", 0, 1, 0 };
		struct seg s2[] = { ONE(&wf, fr ? 3 : 0, 0), SEG(O_the, 2, 0) };
		if (pick(w, s2, 2, &i) == 1) {
			lit(w, " ");
			ONE_OF(w, HELPERS, 0);
		}
		lit(w, ".");
		st->count -= m;
		st->dirty = 1;
		break;
	}
	case V_COLLECT: { /* She collects 3 more apples. */
		lit(w, " ");
		int m = pick_num(w, 1, LMT_MIN(20, 999 - st->count), NULL);
		litf(w, " more %s.", noun_n(&INVENTORY[st->inv], m));
		st->count += m;
		st->dirty = 1;
		break;
	}
	case V_MEET: { /* She meets a boy called Leo. */
		lit(w, " ");
		ONE_OF(w, KINDS, F_ART);
		lit(w, " called ");
		struct seg s2[] = { { NAMES, (int)LMT_ARRAY_SIZE(NAMES), 1, 0, st->name } };
		pick(w, s2, 1, &st->friend);
		lit(w, ".");
		break;
	}
	case V_LIVE: /* She lives with a cat called Biscuit. */
		lit(w, " ");
		st->pet = ONE_OF(w, PETS, F_ART);
		lit(w, " called ");
		st->petname = ONE_OF(w, PETNAMES, 0);
		lit(w, ".");
		break;
	case V_FEED: { /* She feeds her cat / Biscuit. */
		char hp[RMAX];
		snprintf(hp, sizeof hp, "%s %s", PRON[st->pron].poss, PETS[st->pet].s);
		struct word w1 = { hp, 0, 1, 0 }, w2 = { PETNAMES[st->petname].s, 0, 1, 0 };
		struct seg s2[] = { ONE(&w1, 1, 0), ONE(&w2, 1, 0) };
		lit(w, " ");
		pick(w, s2, 2, &i);
		lit(w, ".");
		break;
	}
	case V_KNOW: /* She knows that 3 and 4 make 7. */
		lit(w, " ");
		a = pick_num(w, 1, 99, LEN_FACT);
		lit(w, " and ");
		b = pick_num(w, 1, 99, LEN_FACT);
		litf(w, " make %d.", a + b);
		break;
	case V_LEARN: /* She learns that 6 times 7 is 42. */
		lit(w, " ");
		a = pick_num(w, 2, 12, NULL);
		lit(w, " times ");
		b = pick_num(w, 2, 12, NULL);
		litf(w, " is %d.", a * b);
		break;
	case V_SAY: speech(w, st, 0, 0); break;
	case V_ASK: speech(w, st, 1, 0); break;
	default: LMT_ASSERT(0 && "unknown verb");
	}
}

static void friend_predicate(struct walk *w, struct story *st)
{
	const char *me = NAMES[st->name].s;
	int i = ONE_OF(w, FVERBS, 0);
	switch (FVERBS[i].id) {
	case V_SAY: speech(w, st, 0, 1); break;
	case V_ASK: speech(w, st, 1, 1); break;
	case V_SMILE: ending(w, me); break;
	case V_WAVE:
	case V_HELP: { /* Leo waves to Mia / to her. */
		struct word wn = { me, 0, 1, 0 }, wo = { PRON[st->pron].obj, 0, 1, 0 };
		struct seg sg[] = { ONE(&wn, 1, 0), ONE(&wo, 1, 0) };
		lit(w, " ");
		pick(w, sg, 2, &i);
		lit(w, ".");
		break;
	}
	case V_LIKE: lit(w, " "); NP(w, NP_ANY); ending(w, me); break;
	case V_SEE: lit(w, " "); NP(w, NP_SEE); ending(w, me); break;
	default: LMT_ASSERT(0 && "unknown friend verb");
	}
}

static void pet_predicate(struct walk *w, const struct story *st)
{
	const char *me = NAMES[st->name].s;
	int i = ONE_OF(w, PVERBS, 0);
	switch (PVERBS[i].id) {
	case V_SLEEP:
	case V_RUN: ending(w, me); break;
	case V_EAT: lit(w, " "); NP(w, NP_FOOD); ending(w, me); break;
	case V_CHASE: lit(w, " "); NP(w, NP_ANIMAL); ending(w, me); break;
	default: LMT_ASSERT(0 && "unknown pet verb");
	}
}

/* One sentence after the first. */
static void sentence(struct walk *w, struct story *st)
{
	int pet = st->pet >= 0, fr = st->friend >= 0;
	struct word wn = { NAMES[st->name].s, 0, 1, 0 };
	struct word wp = { PRON[st->pron].subj, 0, 1, 0 };
	struct word wf = { fr ? NAMES[st->friend].s : "", 0, 1, 0 };
	struct word wposs = { PRON[st->pron].poss, 0, 1, 0 };
	struct word wpet = { pet ? PETNAMES[st->petname].s : "", 0, 1, 0 };
	struct seg sg[] = {
		ONE(&wn, 25, 0), ONE(&wp, 35, F_CAP), SEG(O_QUOTE, 6, 0), ONE(&wf, fr ? 10 : 0, 0),
		SEG(O_IN, 5, 0), SEG(O_NOW, st->dirty ? 14 : 0, 0), ONE(&wposs, pet ? 4 : 0, F_CAP),
		ONE(&wpet, pet ? 5 : 0, 0), SEG(O_THE, 4, 0),
	};
	int i, s = pick(w, sg, (int)LMT_ARRAY_SIZE(sg), &i);
	int they = st->pron == PR_THEY;
	switch (s) {
	case 0: predicate(w, st, 0); break;
	case 1: predicate(w, st, they); break;
	case 2: { /* "I like the owl," says Mia. / "Where is Biscuit?" they ask. */
		int q = quote(w, st, Q_STMT | Q_QUEST, -1);
		int ask = q & Q_QUEST;
		lit(w, ask ? "?\"" : ",\"");
		char pv[RMAX];
		snprintf(pv, sizeof pv, " %s %s", PRON[st->pron].subj,
			 ask ? (they ? "ask" : "asks") : (they ? "say" : "says"));
		struct word wv = { ask ? " asks" : " says", 0, 1, 0 }, wpv = { pv, 0, 1, 0 };
		struct seg s2[] = { ONE(&wv, 2, 0), ONE(&wpv, 1, 0) };
		if (pick(w, s2, 2, &i) == 0) {
			struct seg s3[] = { ONE(&wn, 2, 0), ONE(&wf, fr ? 1 : 0, 0) };
			lit(w, " ");
			pick(w, s3, 2, &i);
		}
		lit(w, ".");
		break;
	}
	case 3: lit(w, " "); friend_predicate(w, st); break;
	case 4: /* In the morning, she ... */
		lit(w, " ");
		ONE_OF(w, TIMES, 0);
		lit(w, ",");
		lit(w, " ");
		predicate(w, st, subject(w, st, 0) == 1 && they);
		break;
	case 5: { /* Now she has 5 apples. */
		lit(w, " ");
		int pl = subject(w, st, 0) == 1 && they;
		litf(w, " %s %d %s.", pl ? "have" : "has", st->count, noun_n(&INVENTORY[st->inv], st->count));
		st->dirty = 0;
		break;
	}
	case 6: /* Her cat is sleepy. */
		litf(w, " %s is ", PETS[st->pet].s);
		ONE_OF(w, PETADJ, 0);
		lit(w, ".");
		break;
	case 7: lit(w, " "); pet_predicate(w, st); break;
	default: { /* The sun is warm. */
		lit(w, " ");
		int k = ONE_OF(w, WEATHER, 0);
		lit(w, " is ");
		one_of(w, WADJ[WEATHER[k].id].t, WADJ[WEATHER[k].id].n, 0);
		lit(w, ".");
	}
	}
}

static void title(struct walk *w, struct story *st)
{
	struct seg sg[] = { SEG(O_THE_T, 5, 0), SEG(O_A_T, 3, 0), SEG(NAMES, 2, 0) };
	struct seg noun[] = { SEG(THINGS, 1, F_CAP), SEG(ANIMALS, 1, F_CAP) };
	int i, s = pick(w, sg, 3, &i);
	lit(w, " ");
	if (s == 0) { /* The Story of Mia / The Red Kite */
		struct seg s2[] = { SEG(O_STORY, 2, 0), SEG(ADJ, 3, F_CAP) };
		s = pick(w, s2, 2, &i);
		lit(w, " ");
		if (s == 0)
			st->name = ONE_OF(w, NAMES, 0);
		else
			pick(w, noun, 2, &i);
	} else if (s == 1) { /* A Day at the Beach / A Gift for Leo */
		s = ONE_OF(w, A_TITLE, 0);
		lit(w, " ");
		if (s == 0)
			ONE_OF(w, PLACES, F_CAP);
		else
			st->name = ONE_OF(w, NAMES, 0);
	} else { /* Mia and the Blue Owl */
		st->name = i;
		lit(w, "and the ");
		ONE_OF(w, ADJ, F_CAP);
		lit(w, " ");
		pick(w, noun, 2, &i);
	}
	lit(w, "\n\n");
}

/* The first sentence: it says who the protagonist is (their kind gives the pronoun). */
static void intro(struct walk *w, struct story *st)
{
	int named = st->name >= 0;
	struct word wn = { named ? NAMES[st->name].s : "", 0, 1, 0 };
	struct seg sg[] = {
		SEG(O_ONCE, 4, 0), SEG(O_THIS, 2, 0),
		named ? (struct seg)ONE(&wn, 3, 0) : (struct seg)SEG(NAMES, 3, 0),
	};
	int i, s = pick(w, sg, 3, &i);
	if (s == 2) {
		if (!named)
			st->name = i;
		lit(w, " is ");
		st->pron = KINDS[ONE_OF(w, KINDS, F_ART)].id;
		lit(w, " who lives near the ");
		ONE_OF(w, PLACES, 0);
		lit(w, ".");
		return;
	}
	lit(w, s == 0 ? " upon a time there was " : " is a story about ");
	st->pron = KINDS[ONE_OF(w, KINDS, F_ART)].id;
	lit(w, " called ");
	if (named)
		lit(w, NAMES[st->name].s);
	else
		st->name = ONE_OF(w, NAMES, 0);
	lit(w, ".");
}

/*
 * A document: title, blank line, sentences. After every sentence one choice: go on in
 * the same paragraph (" "), start a new one ("\n\n"), or end the document ("\n" and
 * nothing after it) with probability 1/10. That last choice is part of logprob.
 */
static void document(struct walk *w)
{
	struct story st = { .name = -1, .friend = -1, .pet = -1, .petname = -1, .inv = -1 };
	struct seg cont[] = { SEG(O_SP, 14, 0), SEG(O_PARA, 4, 0), SEG(O_END, 2, 0) };
	title(w, &st);
	intro(w, &st);
	for (;;) {
		int i;
		if (pick(w, cont, 3, &i) == 2)
			break;
		sentence(w, &st);
	}
}

/* ---- entry points ---- */

void lmt_gen_init(struct lmt_gen *g, uint64_t seed)
{
	memset(g, 0, sizeof *g);
	g->seed = seed;
}

void lmt_gen_release(struct lmt_gen *g)
{
	free(g->buf);
	memset(g, 0, sizeof *g);
}

int lmt_gen_doc(struct lmt_gen *g, const char **text, size_t *len, double *logprob,
		struct lmt_err *err)
{
	struct walk w;
	memset(&w, 0, sizeof w);
	w.g = g;
	w.err = err;
	w.check = g->check;
	lmt_rng_seed(&w.rng, g->seed, g->next_id);
	g->len = 0;
	int rc = setjmp(w.jb);
	if (rc)
		return rc;
	document(&w);
	if (LMT_GROW(g->buf, g->cap, g->len + 1))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	g->buf[g->len] = 0;
	g->next_id++;
	g->trace.choices = w.nchoice;
	g->trace.hash = w.hash;
	*text = g->buf;
	*len = g->len;
	if (logprob)
		*logprob = w.lp;
	return 0;
}

int lmt_gen_parse(const char *text, size_t len, double *logprob, struct lmt_gen_trace *trace,
		  struct lmt_err *err)
{
	struct walk w;
	memset(&w, 0, sizeof w);
	w.parse = 1;
	w.text = text;
	w.len = len;
	w.err = err;
	int rc = setjmp(w.jb);
	if (rc)
		return rc;
	document(&w);
	if (w.pos != w.len) {
		char f[200];
		fail(&w, LMT_EFORMAT, "byte %zu (text line %zu): found %s after the end of the document",
		     w.pos, line_of(&w), found(&w, 0, f, sizeof f));
	}
	if (logprob)
		*logprob = w.lp;
	if (trace) {
		trace->choices = w.nchoice;
		trace->hash = w.hash;
	}
	return 0;
}
