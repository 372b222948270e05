/*
 * evalrun.h: one checkpoint's evaluation over a set of documents (evalinput.h), as
 * data: the scoring of every document into per-document results, the figures with
 * their bootstrap intervals overall, per source and per length bucket, the gap to the
 * documents' entropy floor, the memorization probe with Wilson intervals, and the
 * prompts of the fixed-seed samples.
 *
 * The per-document results are kept apart from the figures (struct lmt_eval_acc) so
 * that a caller that scores on several ranks can gather them and compute the same
 * figures from the same seed; the figures come back as an array of groups in the
 * order evalppl reports them, for any printer. The bootstrap stream of a group is
 * drawn from its scope and key, so a group's interval does not depend on which other
 * groups were computed.
 */
#ifndef LMT_EVALRUN_H
#define LMT_EVALRUN_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "model/evalinput.h"
#include "model/evaluate.h"
#include "model/model.h"

/* ---- per-document results ---- */

struct lmt_eval_acc {
	/* per document of the set, from the last checkpoint scored */
	double *nll;
	uint64_t *ntok, *bytes, *words;
	size_t *idx, n;          /* the documents with a scored token, in set order */
	struct lmt_eval_count cnt;
	double seconds;          /* its scoring time */
	/* over every checkpoint scored */
	uint64_t tokens, positions, windows;
	double total_seconds;
};

/* Room for the documents of s (the set must not grow afterwards). */
int lmt_eval_acc_init(struct lmt_eval_acc *a, const struct lmt_eval_docset *s, struct lmt_err *err);
void lmt_eval_acc_release(struct lmt_eval_acc *a);

/*
 * Score every document of s with g (context, stride and rows as in struct
 * lmt_eval_opts; s->ctx before each document) into a, and add the counts to its
 * totals. progress (may be NULL) is called with the scored targets so far.
 */
int lmt_eval_acc_score(struct lmt_eval_acc *a, struct lmt_gpt *g, const struct lmt_eval_docset *s, int context,
		       int stride, int rows, void (*progress)(void *ctx, uint64_t done, uint64_t total),
		       void *progress_ctx, struct lmt_err *err);

/* ---- figures ---- */

struct lmt_eval_group {
	const char *scope;       /* "overall", "source" or "length" (static) */
	char *key;               /* NULL (overall), the source's name, or "64-127 tokens"; owned */
	uint64_t min_tokens;     /* length: the bucket in document tokens, */
	uint64_t max_tokens;     /* max_tokens 0 for the last, open one */
	struct lmt_ppl ppl;
};

/*
 * The figures of the last checkpoint scored into a: overall first, then each source
 * with documents, in source order (when s has sources), then each length bucket with
 * documents, [1, e0), [e0, e1), ..., [e_last, inf) in document tokens (edges
 * increasing). Each has a bootstrap of `resamples` at `level` from seed (0
 * resamples: none). *groups is the caller's, to free with lmt_eval_groups_free.
 */
int lmt_eval_acc_groups(const struct lmt_eval_acc *a, const struct lmt_eval_docset *s, const uint64_t *edges,
			int nedges, int resamples, double level, uint64_t seed, struct lmt_eval_group **groups,
			size_t *n, struct lmt_err *err);
void lmt_eval_groups_free(struct lmt_eval_group *groups, size_t n);

/* The entropy floor of the documents and the model's gap to it. */
struct lmt_eval_floor {
	double nll;              /* the floor's negative log-likelihood of the documents, nats */
	double bits_per_byte;    /* NAN when bytes are unknown */
	double nats_per_token;
	double gap_bits_per_byte, gap_nats_per_token;
};

/*
 * The floor of s (lmt_eval_docset_choose_floor) against the overall figures all:
 * floor_bpb when floor_given (the bytes must be known), else the documents' own.
 * Returns 1 with f filled, 0 when there is no floor.
 */
int lmt_eval_floor_compute(const struct lmt_eval_docset *s, int floor_given, double floor_bpb,
			   const struct lmt_ppl *all, struct lmt_eval_floor *f);

/* ---- memorization ---- */

/* The documents of a split the probe feeds: a seeded sample of those long enough. */
struct lmt_eval_memset {
	int split;
	uint64_t eligible;       /* documents of at least prefix + cont tokens, not cut */
	struct lmt_eval_doc *d;
	size_t n;
	uint32_t *tok;
};

/*
 * Up to ndocs documents of the split, sampled without replacement with (seed, split)
 * from those eligible, in stream order. Release with lmt_eval_memset_release.
 */
int lmt_eval_memset_prepare(struct lmt_eval_memset *m, struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x,
			    int split, int prefix, int cont, uint64_t ndocs, uint64_t seed, struct lmt_err *err);
void lmt_eval_memset_release(struct lmt_eval_memset *m);

/*
 * How many documents of m greedy decoding continues exactly (lmt_eval_memorized),
 * and the Wilson interval at level of that fraction (NAN, NAN for no documents).
 */
int lmt_eval_memset_probe(const struct lmt_eval_memset *m, struct lmt_gpt *g, uint32_t ctx_token, int prefix,
			  int cont, int rows, double level, uint64_t *exact, double *lo, double *hi,
			  struct lmt_err *err);

/* ---- samples ---- */

/*
 * A sample's prompt: ctx_token (unless LMT_EVAL_NO_CTX), then text encoded with tok
 * (text NULL: nothing more); token 0 when that leaves it empty. *ids is the caller's.
 */
int lmt_eval_prompt_ids(const struct lmt_tokenizer *tok, uint32_t ctx_token, const char *text, int32_t **ids,
			int *n, struct lmt_err *err);

#endif
