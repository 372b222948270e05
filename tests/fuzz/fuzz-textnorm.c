/*
 * fuzz-textnorm.c: the dedup normaliser's vector kernel against its one-character
 * reference, and the word splitter's two ways, on any bytes.
 *
 * The first byte's low 5 bits are the normalisation steps; the rest is the text
 * (any bytes, valid UTF-8 or not). lmt_textnorm_apply (64 bytes at a time where
 * the CPU has AVX-512 VBMI2) must write what lmt_textnorm_apply_scalar writes, and
 * within lmt_textnorm_bound. The words lmt_word_hashes finds 64 bytes at a time,
 * hashed 8 at a time where it can, must be those lmt_textnorm_next_word finds, each
 * with the hash it has as a text of its own; lmt_shingles must give
 * lmt_ngram_hash of each window.
 */
#include <stdlib.h>
#include <string.h>

#include "data/minhash.h"
#include "data/textnorm.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const unsigned flags = data[0] & LMT_TEXTNORM_ALL;
	const char *text = (const char *)data + 1;
	const size_t n = size - 1;
	const size_t bound = lmt_textnorm_bound(n);
	char *a = malloc(bound), *b = malloc(bound);
	if (!a || !b)
		abort();
	size_t na = lmt_textnorm_apply(flags, text, n, a), nb = lmt_textnorm_apply_scalar(flags, text, n, b);
	if (na != nb || na > bound || memcmp(a, b, na))
		abort();
	/* the words of the input itself (any bytes), then of its normalised form */
	for (int pass = 0; pass < 2; pass++) {
		const char *t = pass ? a : text;
		size_t tl = pass ? na : n, nw = 0, cap = 0, pos = 0, st, wl, i = 0;
		uint64_t *w = NULL, *one = NULL;
		size_t cap1 = 0;
		if (lmt_word_hashes(t, tl, &w, &cap, &nw))
			abort();
		while (lmt_textnorm_next_word(t, tl, &pos, &st, &wl)) {
			size_t n1 = 0;
			if (lmt_word_hashes(t + st, wl, &one, &cap1, &n1) || n1 != 1 || i >= nw || w[i] != one[0])
				abort();
			i++;
		}
		if (i != nw)
			abort();
		uint64_t *sh = malloc((nw + 1) * sizeof *sh);
		if (!sh)
			abort();
		int g = 1 + data[0] % 7;
		size_t ns = lmt_shingles(w, nw, g, sh);
		for (size_t k = 0; k < ns; k++)
			if (sh[k] != lmt_ngram_hash(w + k, nw < (size_t)g ? nw : (size_t)g))
				abort();
		free(sh);
		free(w);
		free(one);
	}
	free(a);
	free(b);
	return 0;
}
