/*
 * toktrain.h: the tokenizer training driver behind tok-train: documents of a
 * corpus, selected (--max-bytes, --sample), pre-tokenized and counted in threads,
 * then BPE merges (bpetrain.h) or a character vocabulary, finished into a
 * tokenizer with its special tokens and roles.
 *
 * Three steps, so that the caller can report between them (tok-train prints a
 * "counted" record before merging starts):
 *
 *	lmt_toktrain_init(&t, &params, &err);      compile the pattern (a bad one fails here)
 *	lmt_toktrain_count(&t, inputs, n, progress, ctx, &err);
 *	lmt_toktrain_merge(&t, &err);              BPE merges (nothing with params.chars)
 *	lmt_toktrain_finish(&t, &tok, &err);
 *	lmt_toktrain_release(&t);
 */
#ifndef LMT_TOKTRAIN_H
#define LMT_TOKTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/bpetrain.h"
#include "data/corpus.h"
#include "data/pretok.h"
#include "data/tokenizer.h"

struct lmt_toktrain_params {
	uint32_t vocab;            /* special tokens included */
	const char *pattern;       /* a built-in pre-tokenizer, or "none" */
	const char *regex;         /* a custom pattern instead (or NULL) */
	int chars;                 /* a character-level vocabulary, no merges */
	const char *const *specials;
	int nspecials;             /* training skips their text; they end the vocabulary */
	const char *eos, *bos, *pad;   /* roles: special token strings, or NULL */
	uint32_t max_token_len;    /* bytes, 0: no limit */
	uint64_t min_count;        /* 0: the trainer's default (2) */
	uint64_t max_bytes;        /* 0: all documents */
	double sample;             /* keep each document with this probability (1: all) */
	uint64_t seed;             /* of the sample */
	int threads;               /* counting and merging threads, >= 1 */
	int ties;                  /* LMT_BPE_TIES_ID or _HF (bpetrain.h) */
	size_t chunk_bytes;        /* text a counting item, 0: 32 kB (a test's knob) */
	const struct lmt_corpus_opts *corpus;
	/* lmt_toktrain_merge: called every progress_every merges and at the end */
	int (*merge_progress)(void *ctx, uint32_t merges, uint32_t tokens, uint64_t best_count);
	uint32_t progress_every;
	void *ctx;
};

struct lmt_toktrain_worker;

struct lmt_toktrain {
	struct lmt_toktrain_params p;
	struct lmt_pretok pt;
	struct lmt_toktrain_worker *W;
	uint32_t *splen;           /* the special tokens' lengths */
	struct lmt_specmatch sm;   /* finds them */
	struct lmt_bpe_result res;
	int merged;
	/* after lmt_toktrain_count */
	uint64_t docs, bytes;      /* selected documents and their bytes */
	struct lmt_wordcount *wc;  /* all words counted (W[0]'s table) */
	double count_seconds;
	/* after lmt_toktrain_merge (BPE) or lmt_toktrain_finish (chars) */
	uint32_t merges, tokens;   /* tokens: non-special tokens made */
	uint64_t trainer_peak_bytes;
	double merge_seconds;
};

int lmt_toktrain_init(struct lmt_toktrain *t, const struct lmt_toktrain_params *params,
		      struct lmt_err *err);
void lmt_toktrain_release(struct lmt_toktrain *t);
/* Read and count the inputs. progress (optional) gets input bytes read: once with
 * done 0 before any reading, then after every batch. No document selected is an
 * error ("no documents in the input"). */
int lmt_toktrain_count(struct lmt_toktrain *t, const char *const *inputs, int ninputs,
		       void (*progress)(void *ctx, uint64_t done, uint64_t total), void *ctx,
		       struct lmt_err *err);
/* The first offset at or after from where a document may be cut in two that are
 * counted apart with the same counts (lmt_specmatch_cut, m the special strings,
 * which training skips); len when there is none. */
size_t lmt_toktrain_cut(const struct lmt_toktrain *t, const char *text, size_t len, size_t from);
int lmt_toktrain_merge(struct lmt_toktrain *t, struct lmt_err *err);
/* The tokenizer, filled for the caller (lmt_tok_release frees it). */
int lmt_toktrain_finish(struct lmt_toktrain *t, struct lmt_tokenizer *tok, struct lmt_err *err);

/*
 * Fertility: how many tokens tok makes of the documents of c, per byte and per
 * word (a word: a run of non-ASCII-space bytes). Adds each document to
 * per_source[its source] (when below nsrc_cap; per_source may be NULL) and to
 * *all, encoding in nt threads.
 */
struct lmt_fertility {
	uint64_t docs, bytes, words, tokens;
};
int lmt_tok_fertility(const struct lmt_tokenizer *tok, struct lmt_corpus *c, int nt,
		      struct lmt_fertility *per_source, size_t nsrc_cap, struct lmt_fertility *all,
		      struct lmt_err *err);

/* The file -o OUT names, into final (cap bytes): OUT, or, when OUT is a directory
 * or ends in '/', tok-<first 16 hex digits of its SHA-256>.lmtok in it (the
 * SHA-256 is set once the tokenizer is serialized). */
void lmt_tok_output_name(const struct lmt_tokenizer *tok, const char *out, char *final, size_t cap);

#endif
