/*
 * fuzz-pretok.c: the pre-tokenizer's hand split of ASCII equals PCRE2's, and the
 * places lmt_pretok_cut gives keep the pieces, on any bytes.
 *
 * The first byte picks the pattern (gpt2, cl100k, o200k); the rest is the text.
 * Its pieces with the hand split of ASCII (pretok.c) must be PCRE2's alone. Every
 * place the cut search gives must lie inside the text, after the last, and split
 * it into two parts whose pieces are the whole's pieces, in order: the promise
 * that lets threads share a long document (tok-train's counting, tok-encode's
 * parts). Up to 64 places an input are checked, spread over the text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/pretok.h"

struct pieces {
	size_t n, cap;
	size_t *v; /* start, length */
};

static void split(struct lmt_pretok_iter *it, const char *t, size_t n, size_t base, struct pieces *out)
{
	size_t st, len;
	lmt_pretok_iter_reset(it, t, n);
	while (lmt_pretok_next(it, &st, &len)) {
		if (out->n + 2 > out->cap) {
			out->cap = out->cap ? 2 * out->cap : 256;
			out->v = realloc(out->v, out->cap * sizeof *out->v);
			if (!out->v)
				abort();
		}
		out->v[out->n++] = base + st;
		out->v[out->n++] = len;
	}
}

static int same(const struct pieces *a, const struct pieces *b)
{
	return a->n == b->n && (!a->n || !memcmp(a->v, b->v, a->n * sizeof *a->v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *names[] = { "gpt2", "cl100k", "o200k" };
	static struct lmt_pretok pt[3], ref[3];
	static struct lmt_pretok_iter it[3], rit[3];
	static int ready;
	if (!ready) {
		struct lmt_err err;
		for (int i = 0; i < 3; i++) {
			if (lmt_pretok_init(&pt[i], names[i], NULL, &err) || lmt_pretok_iter_init(&it[i], &pt[i]) ||
			    lmt_pretok_init(&ref[i], names[i], NULL, &err) || !pt[i].ascii)
				abort();
			ref[i].ascii = 0; /* PCRE2 alone */
			if (lmt_pretok_iter_init(&rit[i], &ref[i]))
				abort();
		}
		ready = 1;
	}
	if (size < 1)
		return 0;
	const int q = data[0] % 3;
	const char *text = (const char *)data + 1;
	const size_t n = size - 1;
	struct pieces whole = { 0 }, parts = { 0 };
	split(&it[q], text, n, 0, &whole);
	split(&rit[q], text, n, 0, &parts);
	if (!same(&parts, &whole))
		abort();
	size_t cuts[1024], nc = 0;
	for (size_t c = lmt_pretok_cut(&pt[q], text, n, 0), last = 0; c < n;
	     last = c, c = lmt_pretok_cut(&pt[q], text, n, c + 1)) {
		if (c <= last)
			abort(); /* at 0, or not after the last */
		if (nc < sizeof cuts / sizeof *cuts)
			cuts[nc++] = c;
	}
	size_t step = nc > 64 ? nc / 64 : 1;
	for (size_t k = 0; k < nc; k += step) {
		size_t c = cuts[k];
		parts.n = 0;
		split(&it[q], text, c, 0, &parts);
		split(&it[q], text + c, n - c, c, &parts);
		if (!same(&parts, &whole))
			abort();
	}
	free(whole.v);
	free(parts.v);
	return 0;
}
