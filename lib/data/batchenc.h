/*
 * batchenc.h: a batch of documents encoded in parallel, in order: the encoding
 * pipeline of tok-encode, for any tool (or rank) that turns a corpus's batches
 * (data/corpus.h's lmt_batchq) into tokens.
 *
 * Each thread encodes documents into its own vector (one cache line apart, as
 * threads bump its count for every token) with its own tokenizer state; a long
 * document is cut into parts that encode to its tokens (lmt_tok_cut; with a custom
 * pattern, guessed cuts settled after, batchenc.c), which threads share; the
 * batch is then gathered in document order, so the output is
 * the same whatever the thread count. Each document may be framed by BOS before it, EOS after it
 * or, llm.c's way, EOS before it.
 */
#ifndef LMT_BATCHENC_H
#define LMT_BATCHENC_H

#include <stddef.h>
#include <stdint.h>

#include "data/corpus.h"
#include "data/tokenizer.h"

struct lmt_batchenc_opts {
	uint32_t bos, eos;           /* LMT_NO_TOKEN: none */
	int eos_first;               /* eos before each document (llm.c's EOT) instead of after */
	int allow_special;           /* lmt_tok_encode's */
	int threads;
	size_t chunk_bytes;          /* a long document's parts: 0 for 64 kB (a test's knob) */
};

struct lmt_batchenc {
	const struct lmt_tokenizer *tok;
	struct lmt_batchenc_opts o;
	struct lmt_u32vec all;       /* the batch's tokens, in document order */
	size_t *ntok;                /* per document of the batch */
	size_t ncap;
	/* per thread */
	struct lmt_workpool *pool;   /* threads - 1 helpers (NULL with one thread) */
	struct lmt_tok_state **st;
	struct lmt_batchenc_vec *vec;
	struct lmt_batchenc_rec *recs; /* the batch's documents' parts, in order */
	size_t nrec, rcap;
	struct lmt_batchenc_guess *guess; /* the parts of guessed cuts (batchenc.c) */
	size_t nguess, gcap;
	struct lmt_tok_mark *marks;  /* and their first pieces */
	size_t mcap;
	struct lmt_u32vec fix;       /* tokens settled between guessed parts, on one thread */
	uint32_t *order;             /* the parts, longest first (by powers of 2) */
	size_t ocap;
};

/* Threads' states for tok (which must outlive e). LMT_ENOMEM "out of memory". */
int lmt_batchenc_init(struct lmt_batchenc *e, const struct lmt_tokenizer *tok, const struct lmt_batchenc_opts *o,
		      struct lmt_err *err);
/* Encode b's documents into e->all, e->ntok[i] the tokens of document i.
 * LMT_ENOMEM ("out of memory encoding" when a thread's vector would not grow). */
int lmt_batchenc_run(struct lmt_batchenc *e, const struct lmt_docbatch *b, struct lmt_err *err);
/* The same, and side(side_ctx) once (also on error), in whichever thread claims it
 * first, while b's documents are encoded: for writing the previous batch, which
 * otherwise leaves the other threads idle. Until it returns, side may read e->all and
 * e->ntok, which hold the previous batch's tokens until the documents are done. */
int lmt_batchenc_run_side(struct lmt_batchenc *e, const struct lmt_docbatch *b, void (*side)(void *ctx),
			  void *side_ctx, struct lmt_err *err);
void lmt_batchenc_release(struct lmt_batchenc *e);

#endif
