/*
 * pretok.h: pre-tokenization, splitting text into pieces before BPE.
 *
 * The built-in patterns are the ones the reference tokenizers define:
 *   gpt2    GPT-2 (and r50k/p50k)
 *   cl100k  cl100k_base (GPT-3.5/4)
 *   o200k   o200k_base (GPT-4o)
 *   none    the whole text is one piece
 * Any other PCRE2 pattern may be given as text. Matching uses PCRE2 with UTF, UCP and
 * JIT. Two rules make the split total over arbitrary bytes, so that every input
 * round-trips through encode and decode:
 *   - bytes that are not valid UTF-8 are never matched (PCRE2_MATCH_INVALID_UTF);
 *   - every maximal run of bytes that no match covers becomes a piece of its own.
 * For valid UTF-8, the built-in patterns cover every character, so the second rule
 * never applies and the pieces are exactly the reference tokenizer's.
 *
 * The compiled pattern is shared and read-only; each thread needs its own
 * struct lmt_pretok_iter state (match data), made with lmt_pretok_iter_init.
 */
#ifndef LMT_PRETOK_H
#define LMT_PRETOK_H

#include <stddef.h>

#include "core/error.h"

enum { LMT_PRETOK_ASCII_GPT2 = 1, LMT_PRETOK_ASCII_CL100K, LMT_PRETOK_ASCII_O200K };

struct lmt_pretok {
	char name[32];       /* "gpt2", "cl100k", "o200k", "none" or "custom" */
	char *regex;         /* the PCRE2 source, NULL for none */
	void *code;          /* pcre2_code_8 */
	int jit;             /* JIT compilation succeeded */
	int ascii;           /* LMT_PRETOK_ASCII_*: pieces of ASCII text split by hand (pretok.c); 0: PCRE2 alone */
	int builtin;         /* gpt2, cl100k or o200k: lmt_pretok_cut finds cuts */
};

/* Compile a built-in pattern by name, or a custom regex (name "custom"). */
int lmt_pretok_init(struct lmt_pretok *p, const char *name, const char *regex,
		    struct lmt_err *err);
void lmt_pretok_release(struct lmt_pretok *p);

/* The source text of a built-in pattern, or NULL for an unknown name or "none". */
const char *lmt_pretok_builtin(const char *name);
/* The built-in name whose source equals regex, or NULL. */
const char *lmt_pretok_name_of(const char *regex);

struct lmt_pretok_iter {
	const struct lmt_pretok *p;
	void *md;            /* pcre2_match_data_8 */
	void *mctx;          /* pcre2_match_context_8 */
	void *jstack;        /* pcre2_jit_stack_8 */
	const char *text;
	size_t len, pos;
	size_t ms, me;       /* a match found ahead of an unmatched run */
	int have;
};

int lmt_pretok_iter_init(struct lmt_pretok_iter *it, const struct lmt_pretok *p);
void lmt_pretok_iter_release(struct lmt_pretok_iter *it);
void lmt_pretok_iter_reset(struct lmt_pretok_iter *it, const char *text, size_t len);
/* Go on from pos of the same text as from the end of a piece. A pattern's pieces
 * from there depend on pos and the text alone (PCRE2 sees all of it, around pos
 * too), so two iterations that meet at a place go on alike; not for none, whose
 * one piece is the whole text. */
void lmt_pretok_iter_seek(struct lmt_pretok_iter *it, size_t pos);
/* Next piece as [*start, *start + *n). Returns 1, or 0 at the end. */
int lmt_pretok_next(struct lmt_pretok_iter *it, size_t *start, size_t *n);

/*
 * The first offset c, from <= c < len (and c > 0), at which text may be cut in two
 * whose pieces are text's pieces, in order, for the built-in patterns: after a
 * letter (\p{L}) and before a character that is not a letter, a mark (\p{M}) or an
 * apostrophe, in any script of the Basic Multilingual Plane (pretok.c says why).
 * len when there is none, and always for none and custom patterns. So a long
 * document can be split into parts pre-tokenized (and counted or encoded) by
 * different threads, with the same result as one thread gives the whole.
 */
size_t lmt_pretok_cut(const struct lmt_pretok *p, const char *text, size_t len, size_t from);

/*
 * For a pattern with no cut rule (custom ones): a place at or after from (< len)
 * where a piece probably starts, past a newline and before a byte that is not
 * white space, within window bytes; else the first character boundary at or after
 * from. Only a guess: a part cut there is settled where its pieces meet the
 * whole's (batchenc.c, toktrain.c; lmt_pretok_iter_seek).
 */
size_t lmt_pretok_guess(const char *text, size_t len, size_t from, size_t window);

#endif
