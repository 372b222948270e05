/*
 * evaluate.h: held-out evaluation of a language model, document by document:
 * rolling-window scoring, documents gathered back from a dataset's packed
 * sequences, perplexities with bootstrap intervals, and a memorization probe.
 *
 * Scoring. A document is its tokens D[0..n) (its EOS included when the data has
 * one). It is scored as the framed sequence F = [ctx] D of m tokens, where ctx is a
 * token standing for the end of the document before it (the EOS: what precedes a
 * document in packed training), or nothing (then m = n and D[0] is never scored).
 * Every token of F after the first is a target, predicted from the tokens before
 * it. A document longer than the context C is scored with rolling windows of C
 * input positions: the first window scores targets 1 .. min(C, m - 1); each next
 * window ends S targets further (S, the stride; the last one ends at m - 1), starts
 * C positions before its end, and scores only the targets past the previous
 * window's end. So every target is scored exactly once: the first C of a document
 * with all their history, every later one with at least C - S + 1 tokens of history.
 * A document of m tokens costs about (m - C) / S + 1 windows.
 *
 * Windows from all documents are sorted longest first and packed into forward passes
 * of at most rows x C positions (shorter windows make more rows per pass, through
 * lmt_gpt_reshape_acts), so short documents do not pay for the full context.
 *
 * Figures (for any set of documents, from their summed negative log-likelihood NLL
 * in nats, scored tokens, UTF-8 bytes of their text and whitespace-separated words):
 *	loss = NLL / tokens                 token_ppl = exp(loss)
 *	bits_per_byte = NLL / (bytes ln 2)  byte_ppl = exp(NLL / bytes) = 2^bits_per_byte
 *	word_ppl = exp(NLL / words)
 * Each with a percentile bootstrap interval over documents: R resamples of the n
 * documents with replacement, each figure recomputed as the same ratio of sums, the
 * interval the (1 - level)/2 and (1 + level)/2 quantiles (linear interpolation
 * between order statistics). Resampling documents, not tokens, keeps the
 * correlation of tokens within a document in the interval.
 */
#ifndef LMT_EVALUATE_H
#define LMT_EVALUATE_H

#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"
#include "core/error.h"
#include "model/model.h"

#define LMT_EVAL_NO_CTX 0xffffffffu

/* ---- rolling windows ---- */

struct lmt_window {
	uint64_t doc;            /* the document's index */
	uint64_t start;          /* inputs F[start .. start + len) predict F[start + 1 .. start + len] */
	uint32_t len;
	uint32_t first;          /* positions below first were scored by an earlier window */
};

/* The windows of a framed document of m tokens, into out (when not NULL); returns
 * how many (0 for m < 2). context >= 1, 1 <= stride <= context. */
size_t lmt_eval_windows(uint64_t m, int context, int stride, uint64_t doc, struct lmt_window *out);

/* ---- scoring ---- */

struct lmt_eval_doc {
	const uint32_t *tok;     /* D (not owned); every id below the model's vocabulary */
	uint64_t n;
	double nll;              /* out: summed over its scored targets, nats */
	uint64_t scored;         /* out: its scored targets (n, or n - 1 without ctx) */
};

struct lmt_eval_opts {
	int context, stride;     /* C <= the model's context; 1 <= S <= C */
	uint32_t ctx_token;      /* the token before each document, or LMT_EVAL_NO_CTX */
	int rows;                /* forward passes hold at most rows x context positions */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);  /* scored targets */
	void *progress_ctx;
};

struct lmt_eval_count {
	uint64_t windows, passes;
	uint64_t positions;      /* forward positions computed, padding included */
	uint64_t scored;
};

/*
 * Score documents with g (its activations are reallocated when they hold fewer than
 * rows x context positions, and left reshaped). Per-position losses are summed in
 * double per document.
 */
int lmt_eval_score(struct lmt_gpt *g, const struct lmt_eval_opts *o, struct lmt_eval_doc *docs, size_t n,
		   struct lmt_eval_count *cnt, struct lmt_err *err);

/* ---- figures with bootstrap intervals ---- */

enum { LMT_PPL_LOSS = 0, LMT_PPL_TOKEN, LMT_PPL_BPB, LMT_PPL_BYTE, LMT_PPL_WORD, LMT_PPL_N };

struct lmt_ppl {
	uint64_t docs, tokens, bytes, words;
	double nll;
	double v[LMT_PPL_N];     /* NAN where unknown (no bytes, no words) */
	double lo[LMT_PPL_N], hi[LMT_PPL_N];  /* NAN without resamples */
};

/*
 * The figures of documents idx[0..n) (per-document nll, tokens, and bytes and words,
 * each NULL when unknown), with a bootstrap of `resamples` (0: none) at `level` from
 * the generator (seed, stream): the same seed and stream draw the same resamples.
 */
int lmt_ppl_compute(const double *nll, const uint64_t *tokens, const uint64_t *bytes, const uint64_t *words,
		    const size_t *idx, size_t n, int resamples, double level, uint64_t seed, uint64_t stream,
		    struct lmt_ppl *out, struct lmt_err *err);

/* Wilson's score interval for k successes in n trials at level (n > 0). */
void lmt_wilson(uint64_t k, uint64_t n, double level, double *lo, double *hi);
/* The standard normal quantile z with P(|Z| <= z) = level, 0 < level < 1. */
double lmt_normal_z(double level);

/* Whitespace-separated words (ASCII space, \t, \n, \v, \f, \r separate). */
uint64_t lmt_count_words(const char *s, size_t n);

/* ---- documents of a dataset split ---- */

struct lmt_split_doc {
	uint64_t doc;            /* its number in the token stream the dataset was packed from */
	uint64_t off, n;         /* its tokens, [off, off + n) of the gathered array */
	int at_tail;             /* it runs to the end of the split's last sequence: shard-pack's
	                          * tail drop may have cut it */
};

/*
 * The documents of a split in order, each the concatenation of its segments over
 * the split's sequences (documents are packed in stream order, so a document's
 * segments are consecutive, and each token of a sequence is in one segment or is
 * padding). With want (sorted document numbers, nwant of them), only those. With
 * gather, their tokens too (*tokens, caller frees; otherwise NULL). Reading stops
 * before the document that would pass max_docs documents, or that starts once
 * max_tokens tokens are held (0: no limit). *docs is the caller's to free.
 */
int lmt_split_docs(struct lmt_dataset *d, int split, const uint64_t *want, size_t nwant, int gather,
		   uint64_t max_docs, uint64_t max_tokens, struct lmt_split_doc **docs, size_t *n, uint32_t **tokens,
		   struct lmt_err *err);

/* ---- memorization ---- */

/*
 * Whether greedy decoding from each document's first `prefix` tokens (after ctx, as
 * in scoring) reproduces its next `cont` tokens exactly: hit[i] = 1 or 0. Computed by
 * teacher forcing in one forward pass per batch: greedy decoding reproduces the
 * continuation if and only if, fed the true tokens, the argmax at each of the cont
 * positions (the lowest id on a tie, as lmt_pick_token breaks it) is the true
 * next token. Documents need n >= prefix + cont; the prompt and continuation must
 * fit the model's context.
 */
int lmt_eval_memorized(struct lmt_gpt *g, uint32_t ctx_token, const struct lmt_eval_doc *docs, size_t n,
		       int prefix, int cont, int rows, uint8_t *hit, struct lmt_err *err);

#endif
