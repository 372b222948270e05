/*
 * bpetrain.h: counting words and training byte-level BPE merges.
 *
 * Counting. Text is pre-tokenized (pretok.h) and each distinct piece ("word") is
 * counted with a 64-bit count. Counting is per thread (one lmt_wordcount each) and
 * the tables are merged afterwards; the result does not depend on the split.
 *
 * Training. Words are sorted by their bytes, so nothing below depends on hash order
 * or thread count. Each word is a sequence of symbol ids, starting from its bytes
 * (id = byte value). The trainer keeps:
 *   - the count of every adjacent pair, summed over words weighted by word count
 *     (overlapping occurrences such as the two (a,a) in "aaa" both count, as in
 *     every BPE trainer);
 *   - for every pair, the words it occurs in (entries may go stale; they are checked);
 *   - a max-heap of (count, pair) with lazy invalidation: an entry whose count no
 *     longer matches is re-pushed with the current count when it surfaces. Counts of
 *     existing pairs only fall after a merge, and every pair whose count rises (those
 *     containing the new token) is pushed afresh, so the first fresh entry popped is
 *     the true maximum.
 * A merge of (a, b) rewrites only the words that contain it, left to right without
 * overlap, subtracting the pairs next to each merge site and adding the new ones.
 * With threads, the pairs are split into one part per thread (by a hash of the
 * pair), each with its own table and heap; the words of a merge are shared out to
 * rewrite, and each part takes the count changes meant for it (bpetrain.c says
 * more). Sums, sets and a total order: the merges do not depend on the threads.
 *
 * Tie-break (documented, deterministic): the highest count wins; among equal counts,
 * the pair whose left token has the smaller tie rank, then the one whose right token
 * has. Merged tokens rank by their id: 256, 257, ... in order of creation, so any
 * merged token ranks after every byte and an older one before a newer one. A merge
 * whose result is a byte string that already has an id reuses that id (the merge is
 * recorded but the vocabulary does not grow), as HuggingFace's trainer does. The
 * bytes rank by one of two rules (lmt_bpe_opts.ties):
 *   LMT_BPE_TIES_ID (the default): by byte value, so the rank is the id. This is
 *     neither the order of the pair's byte strings nor the order of their text:
 *     (0x20, 0x74) " t" beats (0x41, 0x42) "AB" on a tie, and so does any pair of
 *     bytes beat one with a merged token on the left.
 *   LMT_BPE_TIES_HF: by the character GPT-2's bytes_to_unicode maps the byte to, as
 *     HuggingFace tokenizers' BpeTrainer (with the ByteLevel pre-tokenizer) orders
 *     its alphabet: first the printable bytes 0x21-0x7e, 0xa1-0xac, 0xae-0xff in
 *     value order (they map to themselves), then the other 68 (0x00-0x20, 0x7f-0xa0,
 *     0xad, which map to U+0100 onwards) in value order. So " t" (space ranks 188)
 *     loses a tie to "AB" here. HF's trainer compares (left id, right id) of its own
 *     ids, which are these ranks shifted by the number of special tokens.
 * Training stops when the vocabulary reaches its target, or when no pair occurs at
 * least min_count times. Pairs whose result would exceed max_token_len bytes are
 * never merged.
 */
#ifndef LMT_BPETRAIN_H
#define LMT_BPETRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/pretok.h"

/* One slot of the word table. A slot's three fields sit together so that a lookup
 * misses the cache once, not once per field (the tables outgrow the caches). */
struct lmt_wordslot {
	uint64_t h;             /* hash | 1, 0 = empty */
	uint64_t key;           /* off << 24 | len: bytes at arena[off .. off+len) */
	uint64_t count;
};

struct lmt_wordcount {
	struct lmt_wordslot *s; /* mask + 1 slots, open addressing */
	size_t mask, n;
	uint8_t *arena;
	size_t alen, acap;
	uint64_t total;         /* sum of counts */
};

int lmt_wordcount_init(struct lmt_wordcount *wc);
void lmt_wordcount_release(struct lmt_wordcount *wc);
/* Add count occurrences of the word w[0..n). Words longer than 16 MiB are split. */
int lmt_wordcount_add(struct lmt_wordcount *wc, const void *w, size_t n, uint64_t count);
/* Pre-tokenize text with it (reset to the text) and count its pieces. */
int lmt_wordcount_add_text(struct lmt_wordcount *wc, struct lmt_pretok_iter *it,
			   const char *text, size_t len);
/* The same for the pieces from from (where a piece starts, or is taken to:
 * lmt_pretok_iter_seek) up to the first that starts at or after to, each added
 * count times (UINT64_MAX takes one away: counts are sums modulo 2^64); *end:
 * where the last ends (from if none); the first nmark pieces' ends into mark
 * (*marked of them; marked may be NULL). */
int lmt_wordcount_add_from(struct lmt_wordcount *wc, struct lmt_pretok_iter *it, const char *text, size_t len,
			   size_t from, size_t to, uint64_t count, size_t *mark, size_t nmark, size_t *marked,
			   size_t *end);
/* Remove the words whose count is 0 (taken away as often as added). */
int lmt_wordcount_drop_zero(struct lmt_wordcount *wc);
/* Merge tables t[1..n) into t[0] with the pool's workers (NULL: the caller
 * alone); t[1..n) are released. Which table's slots and arena t[0] ends with is
 * the merger's choice. n is at most LMT_WORDCOUNT_MAX_TABLES. On an error
 * (LMT_ENOMEM) the tables may have changed places and grown, and only
 * lmt_wordcount_release is left to do with them. */
#define LMT_WORDCOUNT_MAX_TABLES 1024
struct lmt_workpool;
int lmt_wordcount_merge(struct lmt_wordcount *t, int n, struct lmt_workpool *pool);
/* Bytes held by the table (for the memory report). */
size_t lmt_wordcount_bytes(const struct lmt_wordcount *wc);

struct lmt_bpe_opts {
	uint32_t n_tokens;      /* target number of non-special tokens (>= 256) */
	uint32_t max_token_len; /* bytes; 0 = no limit */
	uint64_t min_count;     /* stop when the best pair occurs fewer times (default 2) */
	/* called every `every` merges and at the end; nonzero return stops training */
	int (*progress)(void *ctx, uint32_t merges, uint32_t tokens, uint64_t best_count);
	void *ctx;
	uint32_t every;
	int ties;               /* LMT_BPE_TIES_ID (0, the default) or LMT_BPE_TIES_HF */
	/* threads for the pair counts and the merges (0 or 1: the caller's thread only);
	 * the result is the same for any number */
	int threads;
	/* 1 + log2 of the runs of neighbouring words dealt to one thread to rewrite
	 * (0: runs of 64). For tests, which deal out single words (1). */
	uint32_t word_block_log2;
	/* the words a step rewrites from which the falls of pair counts are summed by
	 * pair before they are handed over (0: 256). For tests, which set 1. */
	uint32_t sum_min;
	/* the pairs each part's heap starts with, at least, the others waiting in
	 * cold lists by the power of two of their count (0: 256). For tests, which
	 * set a few, so that small corpora open the lists. */
	uint32_t heap_min;
};

enum { LMT_BPE_TIES_ID = 0, LMT_BPE_TIES_HF = 1 };

struct lmt_bpe_result {
	uint32_t n_merges;
	uint32_t (*merge)[3];   /* a, b, c: merge i has priority i */
	uint32_t n_steps;       /* the steps that applied them, a batch of merges each */
	uint32_t n_tokens;      /* 256 + distinct results */
	uint8_t *bytes;         /* token i is bytes[off[i] .. off[i+1]) */
	uint32_t *off;
	uint64_t distinct_words, total_words;
	uint64_t peak_bytes;    /* largest size of the trainer's own tables and threads' working space */
	/* where the time went: the threads started and the tables made before the first
	 * merge; the steps (every thread); picking each step's batch and keeping the
	 * books between steps, which the calling thread does alone (progress callbacks
	 * not included) */
	double setup_seconds, step_seconds, pick_seconds;
};

int lmt_bpe_train(const struct lmt_wordcount *wc, const struct lmt_bpe_opts *o,
		  struct lmt_bpe_result *res, struct lmt_err *err);
void lmt_bpe_result_release(struct lmt_bpe_result *res);

struct lmt_tokenizer;
/*
 * The tokenizer a training run defines: ids 0..255 are the bytes, then the merged
 * tokens in order of creation, then the special tokens in the order given. Merge i
 * has priority i. eos/bos/pad name special tokens (NULL: the default rule of
 * lmt_tok_set_roles).
 */
int lmt_bpe_to_tokenizer(const struct lmt_bpe_result *r, const char *pattern, const char *regex,
			 const char *const *specials, int nspecials, const char *eos,
			 const char *bos, const char *pad, struct lmt_tokenizer *t,
			 struct lmt_err *err);

/*
 * A character-level tokenizer (tok-train --chars): ids 0..255 are the bytes (the
 * fallback for anything unseen or not valid UTF-8), then every multi-byte character
 * of the counted text (wc must come from the pattern LMT_CHARS_PATTERN, one
 * character per piece), most frequent first (ties by bytes), up to n_tokens, then the
 * special tokens. There are no merges: a piece that is a token is that token
 * (LMT_TOK_IGNORE_MERGES), any other piece falls back to its bytes.
 */
#define LMT_CHARS_PATTERN "(?s)."
int lmt_chars_to_tokenizer(const struct lmt_wordcount *wc, uint32_t n_tokens, const char *const *specials,
			   int nspecials, const char *eos, const char *bos, const char *pad,
			   struct lmt_tokenizer *t, struct lmt_err *err);

#endif
