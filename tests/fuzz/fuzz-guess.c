/*
 * fuzz-guess.c: a long document pre-tokenized by a custom pattern, cut by guesses
 * and settled (data/batchenc.c), encodes to the tokens of the whole, on any bytes.
 *
 * The first byte picks the pattern (one of six, below: pieces that meet the
 * whole's at once or after a few, never, leave bytes unmatched, look behind, or
 * run over many parts), whether special strings ("<|x|>") count (a document with
 * one is then not cut) and the threads (1 or 2); the second, the parts' size (8 to
 * 71 bytes, so that an input of a few hundred bytes is cut many times); the rest
 * is the text. The batch encoder's tokens, framed by BOS and EOS, must be
 * lmt_tok_encode's of the text whole, framed by hand; and tok-train's counts of
 * the text as a file (data/toktrain.c, cut and settled the same way, in items of
 * that size; "<|x|>" a special string where they count) must be those of one item
 * that holds it whole. A text with a special string that counts is cut at such
 * strings' starts instead (lmt_specmatch_cut).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "data/batchenc.h"
#include "data/tokenizer.h"
#include "data/toktrain.h"
#include "fuzz.h"

static const char *const patterns[] = {
	("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
	 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
	"(?s).{1,3}",
	"\\n[a-z]+|[a-z]+|.",
	"(?<=\\n)[a-z]{1,2}|[a-z]+|\\s+|.",
	"[^x]+|x",
	"(?s).",
};
#define NPAT (sizeof patterns / sizeof *patterns)

/* bytes, then a few merges, so that pieces encode to fewer tokens than bytes */
static void make(struct lmt_tokenizer *t, const char *re)
{
	static const char *const merges[][2] = { { "t", "h" }, { "th", "e" }, { " ", "t" }, { "i", "n" },
						  { "e", "r" }, { " ", " " }, { "\n", "\n" }, { "a", "b" } };
	struct lmt_err err;
	uint32_t id;
	lmt_tok_init(t);
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;
		if (lmt_tok_add_token(t, &c, 1, 0, NULL, &err))
			abort();
	}
	for (size_t m = 0; m < sizeof merges / sizeof *merges; m++) {
		char s[8];
		size_t la = strlen(merges[m][0]), lb = strlen(merges[m][1]);
		memcpy(s, merges[m][0], la);
		memcpy(s + la, merges[m][1], lb);
		if (lmt_tok_finalize(t, &err)) /* for lmt_tok_find */
			abort();
		uint32_t a = lmt_tok_find(t, merges[m][0], la), b = lmt_tok_find(t, merges[m][1], lb);
		if (lmt_tok_add_token(t, s, la + lb, 0, &id, &err) || lmt_tok_add_merge(t, a, b, id, (uint32_t)m, &err))
			abort();
	}
	if (lmt_tok_add_token(t, "<|x|>", 5, 1, NULL, &err) || lmt_tok_set_pattern(t, "custom", re, &err) ||
	    lmt_tok_finalize(t, &err)) {
		fprintf(stderr, "fuzz-guess: /%s/: %s\n", re, err.msg);
		abort();
	}
}

/* the words and counts of a table, sorted, as one string (or NULL) */
static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *table(const struct lmt_wordcount *wc)
{
	char **v = calloc(wc->n + 1, sizeof *v);
	size_t n = 0, total = 1;
	for (size_t i = 0; v && i <= wc->mask; i++) {
		const struct lmt_wordslot *e = &wc->s[i];
		if (!e->h)
			continue;
		size_t len = e->key & 0xffffff;
		v[n] = malloc(2 * len + 32);
		if (!v[n])
			abort();
		int k = snprintf(v[n], 32, "%llu ", (unsigned long long)e->count);
		for (size_t j = 0; j < len; j++) /* hex: words may hold NUL */
			snprintf(v[n] + k + 2 * j, 3, "%02x", wc->arena[(e->key >> 24) + j]);
		total += strlen(v[n]) + 1;
		n++;
	}
	if (!v)
		abort();
	qsort(v, n, sizeof *v, cmp_line);
	char *out = malloc(total), *p = out;
	if (!out)
		abort();
	for (size_t i = 0; i < n; i++) {
		p += sprintf(p, "%s\n", v[i]);
		free(v[i]);
	}
	*p = 0;
	free(v);
	return out;
}

static char *count(const char *path, const char *re, int threads, size_t chunk, int specials)
{
	static const char *spec[] = { "<|x|>" };
	struct lmt_corpus_opts co = { .format = LMT_CORPUS_TEXT, .txt_docs = LMT_TXT_FILE };
	struct lmt_toktrain_params p = { .vocab = 1000, .regex = re, .specials = spec, .nspecials = specials,
					 .sample = 1, .threads = threads, .corpus = &co, .chunk_bytes = chunk };
	struct lmt_toktrain t;
	struct lmt_err err;
	char *out = NULL;
	if (lmt_toktrain_init(&t, &p, &err))
		abort();
	int rc = lmt_toktrain_count(&t, &path, 1, NULL, NULL, &err);
	if (!rc)
		out = table(t.wc);
	else if (err.code != LMT_EFORMAT) /* an empty text has no documents */
		abort();
	lmt_toktrain_release(&t);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct lmt_tokenizer tok[NPAT];
	static int ready;
	if (!ready) {
		for (size_t i = 0; i < NPAT; i++)
			make(&tok[i], patterns[i]);
		ready = 1;
	}
	if (size < 2)
		return 0;
	const struct lmt_tokenizer *t = &tok[data[0] % NPAT];
	const uint32_t eos = t->n_vocab - 1;
	const int allow = data[0] >> 6 & 1;
	struct lmt_doc d = { .text = (const char *)data + 2, .len = size - 2 };
	struct lmt_err err;
	struct lmt_u32vec want = { 0 };
	struct lmt_tok_state *s = lmt_tok_state_new(t);
	if (!s || LMT_GROW(want.v, want.cap, 1))
		abort();
	want.v[want.n++] = eos;
	if (lmt_tok_encode(t, s, d.text, d.len, allow, &want) || LMT_GROW(want.v, want.cap, want.n + 1))
		abort();
	want.v[want.n++] = eos;
	lmt_tok_state_free(s);
	struct lmt_batchenc e;
	struct lmt_batchenc_opts o = { .bos = eos, .eos = eos, .allow_special = allow, .threads = 1 + (data[0] >> 7),
				       .chunk_bytes = 8 + data[1] % 64 };
	struct lmt_docbatch b = { .docs = &d, .n = 1 };
	if (lmt_batchenc_init(&e, t, &o, &err) || lmt_batchenc_run(&e, &b, &err))
		abort();
	if (e.all.n != want.n || memcmp(e.all.v, want.v, want.n * 4) || e.ntok[0] != want.n)
		abort(); /* the parts did not give the whole's tokens */
	lmt_batchenc_release(&e);
	free(want.v);
	char path[512];
	fuzz_dir_empty();
	fuzz_file("t.txt", d.text, d.len, path, sizeof path);
	const char *re = patterns[data[0] % NPAT];
	char *whole = count(path, re, 1, SIZE_MAX / 4, allow), *cut = count(path, re, o.threads, o.chunk_bytes, allow);
	if ((whole == NULL) != (cut == NULL) || (whole && strcmp(whole, cut)))
		abort(); /* the items' counts are not the whole's */
	free(whole);
	free(cut);
	return 0;
}
