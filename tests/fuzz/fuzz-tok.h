/*
 * fuzz-tok.h: what the tokenizer targets do with a tokenizer that loaded or
 * imported: use it as the tools would, with checks that hold for any valid one.
 *
 * A fixed text (ASCII, UTF-8, a special token's string, invalid UTF-8) is encoded
 * with and without special tokens; every id must be in the vocabulary and the
 * decoded bytes must be the text (byte-level BPE loses nothing). Then the model is
 * serialised, and the serialised file must load again.
 */
#ifndef LMT_FUZZ_TOK_H
#define LMT_FUZZ_TOK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "fuzz.h"

static const char fuzz_text[] = "Hello, world! 123 don't   stop\n\n\tcaf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
				"<|endoftext|> \xf0\x9f\x98\x80\xff\xfe end";

static inline void fuzz_use_tokenizer(struct lmt_tokenizer *t)
{
	struct lmt_err err;
	struct lmt_tok_state *s = lmt_tok_state_new(t);
	struct lmt_u32vec v = { 0 };
	size_t n = sizeof fuzz_text - 1;
	for (int special = 0; s && special < 2; special++) {
		v.n = 0;
		if (lmt_tok_encode(t, s, fuzz_text, n, special, &v))
			break;
		for (size_t i = 0; i < v.n; i++)
			if (v.v[i] >= t->n_vocab)
				abort(); /* an id the tokenizer does not have */
		size_t need = lmt_tok_decode(t, v.v, v.n, 0, NULL, 0);
		uint8_t *out = malloc(need + 1);
		if (out && (lmt_tok_decode(t, v.v, v.n, 0, out, need) != need || need != n || memcmp(out, fuzz_text, n)))
			abort(); /* the text did not come back */
		free(out);
	}
	lmt_tok_state_free(s);
	free(v.v);
	uint8_t *buf;
	size_t len;
	if (lmt_tok_serialize(t, &buf, &len, &err))
		return;
	char path[512];
	struct lmt_tokenizer u;
	fuzz_file("again.lmtok", buf, len, path, sizeof path);
	free(buf);
	if (lmt_tok_load(&u, path, &err)) {
		fprintf(stderr, "fuzz: the serialised tokenizer does not load: %s\n", err.msg);
		abort(); /* what lmt writes, lmt must read */
	}
	lmt_tok_release(&u);
}

#endif
