/*
 * dedup.h: the deduplication pipeline behind dedup-minhash: exact and
 * near-duplicate removal (MinHash + LSH, minhash.h) and decontamination against
 * evaluation sets, over a corpus read twice.
 *
 * Two passes, so that every document is clustered before any is written: pass 1
 * reads the input, signs the documents in threads and clusters them (union-find
 * over exact-hash groups and LSH band collisions; the first document of a cluster
 * in input order is kept); pass 2 reads the input again and hands each document
 * back, kept or with the provenance record of its removal, in input order. Only
 * signatures and a few words of bookkeeping per document stay in memory, never
 * texts. The library writes nothing: what is kept and what was removed, and why,
 * reach the caller through callbacks as data, so a tool prints them as JSONL and
 * a distributed job could route them anywhere.
 *
 *	lmt_dedup_init(&d, &params, &err);
 *	lmt_dedup_read_eval(&d, &err);                 (with params.nagainst)
 *	lmt_dedup_pass1(&d, inputs, n, &cb, &err);
 *	lmt_dedup_cluster(&d, &err);
 *	lmt_dedup_pass2(&d, inputs, n, &cb, &err);     (inputs unchanged since pass 1)
 *	lmt_dedup_release(&d);
 */
#ifndef LMT_DEDUP_H
#define LMT_DEDUP_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/corpus.h"
#include "data/minhash.h"

#define LMT_DEDUP_DIGEST_LEN 16   /* bytes of SHA-256 kept for exact matching */
#define LMT_DEDUP_MAX_NGRAM 63    /* short evaluation lengths are bits of a uint64_t */

struct lmt_dedup_params {
	double threshold;        /* Jaccard similarity LSH aims at */
	int num_perm, shingle;
	int method;              /* LMT_MINHASH_METHOD_*: 0 is one-permutation hashing */
	uint64_t seed;
	unsigned norm;           /* LMT_TEXTNORM_* steps */
	int verify;              /* exact Jaccard of every removed document */
	int threads;             /* signing threads, >= 1 */
	const char *const *against; /* evaluation inputs (files) */
	int nagainst;
	int ngram, ngram_min;    /* decontamination n-grams, 1..LMT_DEDUP_MAX_NGRAM */
	const struct lmt_corpus_opts *corpus;
	int kept_escaped;        /* pass 2 may hand kept documents back undecoded
				  * (lmt_doc.escaped; never with verify) */
};

enum lmt_dedup_reason {
	LMT_DEDUP_REASON_EXACT,
	LMT_DEDUP_REASON_NEAR,
	LMT_DEDUP_REASON_CONTAMINATION,
};

/* How a contaminated document matched its evaluation document. */
enum lmt_dedup_method {
	LMT_DEDUP_METHOD_NONE,
	LMT_DEDUP_METHOD_EXACT,
	LMT_DEDUP_METHOD_NGRAM,
	LMT_DEDUP_METHOD_MINHASH,
};
const char *lmt_dedup_method_name(int method);   /* "exact", "ngram", "minhash" */
const char *lmt_dedup_reason_name(int reason);   /* "exact", "near", "contamination" */

/* The provenance of one removed document. Strings are valid during the callback. */
struct lmt_dedup_removal {
	const char *id;          /* "source:ordinal" */
	int reason;              /* LMT_DEDUP_REASON_* */
	int method;              /* contamination: LMT_DEDUP_METHOD_* */
	const char *other_id;    /* what it duplicates: the kept document or the evaluation one */
	double estimated_jaccard;   /* from the signatures */
	int has_jaccard;
	double jaccard;          /* params.verify: exact, from the shingle sets */
};

/*
 * Pass callbacks, each optional. A callback returns 0, or a negative LMT_E* code
 * (with err filled) to stop the pass, which then returns that code.
 * progress: pass 1 in input bytes, pass 2 in documents; called once with done 0
 * before any work (total known from then), then after every batch.
 * batch_done (pass 2): after the records of one batch, e.g. to flush them.
 */
struct lmt_dedup_callbacks {
	void *ctx;
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	int (*kept)(void *ctx, const struct lmt_doc *doc, const char *source, const char *id,
		    struct lmt_err *err);
	int (*removed)(void *ctx, const struct lmt_dedup_removal *r, struct lmt_err *err);
	int (*batch_done)(void *ctx, struct lmt_err *err);
};

struct lmt_dedup_scratch;
struct lmt_dedup_evalset;
struct lmt_dedup_contam;

/* Fields below "results" are the caller's to read; the rest is the pipeline's. */
struct lmt_dedup {
	struct lmt_dedup_params p;
	struct lmt_minhash mh;
	int bands, rows;
	struct lmt_dedup_scratch *W;   /* one per thread */
	char *idbuf, *idbuf2;
	size_t idcap, idcap2;

	/* one entry per document, in input order */
	size_t cap;
	struct lmt_sigstore sigs;
	uint8_t (*digest)[LMT_DEDUP_DIGEST_LEN];
	uint32_t *parent;        /* union-find; after clustering: the kept representative */
	uint32_t *src;
	uint64_t *ord;
	uint8_t *flags;
	uint64_t inhash;         /* hash of every input text in order: pass 2 checks it */

	uint32_t *table;         /* exact duplicates: document indices by digest */
	size_t tcap, tn;

	struct lmt_dedup_contam *contam; /* contaminated documents, in input order */
	size_t capcontam;
	struct lmt_dedup_evalset *ev;

	/* results */
	size_t n;                /* documents read by pass 1 */
	size_t ncontam;          /* removed as contamination */
	uint64_t kept, exact, near, clusters;
	size_t eval_docs, eval_ngrams;   /* after lmt_dedup_read_eval */
};

/* Fill d for params (copied; its strings must outlive d): the permutations, the
 * LSH bands and rows, one scratch space per thread. */
int lmt_dedup_init(struct lmt_dedup *d, const struct lmt_dedup_params *params, struct lmt_err *err);
void lmt_dedup_release(struct lmt_dedup *d);
/* Read and index the evaluation documents of params.against. */
int lmt_dedup_read_eval(struct lmt_dedup *d, struct lmt_err *err);
/* Sign every input document, find exact duplicates and contamination. */
int lmt_dedup_pass1(struct lmt_dedup *d, const char *const *inputs, int ninputs,
		    const struct lmt_dedup_callbacks *cb, struct lmt_err *err);
/* Union LSH collisions; every document then points at its representative. */
int lmt_dedup_cluster(struct lmt_dedup *d, struct lmt_err *err);
/* Read the inputs again, calling cb->kept or cb->removed for each document in
 * input order; fails if the input changed since pass 1. */
int lmt_dedup_pass2(struct lmt_dedup *d, const char *const *inputs, int ninputs,
		    const struct lmt_dedup_callbacks *cb, struct lmt_err *err);
/* Bytes of memory held per document (signature, bookkeeping, exact table). */
double lmt_dedup_bytes_per_doc(const struct lmt_dedup *d);

#endif
