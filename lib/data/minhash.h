/*
 * minhash.h: MinHash signatures, LSH banding and union-find clustering, for
 * near-duplicate detection (Broder 1997; Leskovec, Rajaraman and Ullman, "Mining
 * of Massive Datasets", ch. 3).
 *
 * A document is a set of shingles: the 64-bit hashes of its word n-grams (words
 * are runs of non-White_Space characters of the normalised text; a document with
 * fewer than n words is one shingle of all its words; one with no words has no
 * shingles). A permutation maps a shingle hash h to
 *
 *	pi(h) = (a * (h mod p) + b) mod p,	p = 2^61 - 1
 *
 * with a in [1, p - 1] and b in [0, p - 1] drawn from a seeded PRNG
 * (splitmix64), computed exactly (the product has 125 bits). A signature has K
 * (--num-perm) values of 4 bytes; two methods fill them.
 *
 * One-permutation hashing with optimal densification (the default; Li, Owen and
 * Zhang, "One Permutation Hashing", NIPS 2012; Shrivastava, "Optimal
 * Densification for Fast and Accurate Minwise Hashing", ICML 2017). Each shingle
 * is hashed once, by one permutation pi, and falls into bin
 *
 *	bin(v) = ((v >> 29) * K) >> 32		(v = pi(h); K equal ranges of v)
 *
 * and each bin keeps the smallest v that fell into it. A bin j no shingle fell
 * into borrows the minimum of the first bin that is not empty in sigma_j, a
 * random order of the K bins fixed by the seed (a Fisher-Yates shuffle driven by
 * splitmix64 from mix64(c + j), c drawn after a and b, mix64 being lmt_mix64 of
 * core/util.h). The paper
 * probes bins drawn by a 2-universal hash of (j, attempt) until one is not
 * empty; probing a random order instead draws without replacement, which gives
 * each empty bin the same donor (uniform over the non-empty bins, independently
 * of the other empty bins) and so the same estimator and variance, at a cost of
 * table reads bounded by K sqrt(K) a document instead of about K^2/m hashes
 * with m non-empty bins. (A linear hash of (j, attempt), tried first, probed
 * neighbouring bins along one arithmetic progression and correlated their
 * donors: at 24 shingles the variance came out 2.4 times the formula below.)
 * Both documents of a pair look in the same order, so an empty bin of their
 * union takes the first bin that is not empty in the union (where one of them
 * only has shingles, the two values differ, as the union's minimum there is not
 * shared).
 * Value j of the signature is the low 32 bits of bin j's minimum (own or
 * borrowed). Every value of a pair agrees with probability J, their Jaccard
 * similarity (plus at most 2^-32 for two different minima whose low bits
 * collide), so the fraction of equal values estimates J without bias. Its
 * variance, for a union of f shingles with N of the K bins empty in both, is
 *
 *	Var = J(1-J)/K^2 * ((K + 2N + N(N-1)/(K-N)) f/(f-1) - K^2/(f-1))
 *
 * (the bin minima are a sample without replacement of the union, hence the
 * covariance -J(1-J)/(f-1) of two bins; each empty bin repeats a uniformly chosen
 * non-empty one, so a non-empty bin counts 1 + c times, c binomial(N, 1/(K-N))).
 * With no empty bin (f well above K, any document of more than a few hundred
 * words) that is J(1-J)/K * (f-K)/(f-1), at most the J(1-J)/K of K independent
 * permutations; for smaller unions the empty bins add at most the factor
 * (1 + 2N/K + N(N-1)/(K(K-N))). With K = 128 that comes to about 0.78 to 0.9
 * J(1-J)/K for f of 200 to 1000, 1.03 at f = 96, 1.34 at 24 and 1.5 for a few
 * shingles. test-minhash checks both the mean and this variance over many
 * seeds. The cost: one permutation per shingle, not K.
 *
 * Classic MinHash (--method classic, for comparison; Broder 1997): K
 * permutations pi_i with their own a_i, b_i; value i is the low 32 bits of the
 * minimum of pi_i over the shingles, which agrees with probability J, variance
 * J(1-J)/K. K products per shingle.
 *
 * LSH: the first b*r values form b bands of r rows; two documents are candidates
 * when all r values of some band agree, which happens with probability
 * 1 - (1 - J^r)^b for independent values (classic; for OPH nearly: values
 * of distinct bins are slightly anticorrelated, borrowed ones repeat others, and
 * test-minhash holds the S-curve at 4 standard errors on planted pairs whose
 * union has 200 shingles, a fifth of the bins empty in both). b and r are
 * chosen for a threshold t by minimising 0.5 * FP + 0.5 * FN (as datasketch
 * does), with
 *
 *	FP(b, r) = integral_0^t   1 - (1 - s^r)^b      ds
 *	FN(b, r) = integral_t^1   (1 - s^r)^b          ds
 *
 * over b * r <= num_perm, each integral by the composite Simpson rule on 1000
 * equal steps (a fixed rule, so every build picks the same b and r).
 */
#ifndef LMT_MINHASH_H
#define LMT_MINHASH_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define LMT_MINHASH_PRIME 0x1fffffffffffffffULL /* 2^61 - 1, a Mersenne prime */
#define LMT_MINHASH_MAX_PERM 1024
#define LMT_MINHASH_EMPTY 0xffffffffu          /* every value of a shingle-less signature */
#define LMT_MINHASH_NOBIN UINT64_MAX           /* mins[j] of a bin no shingle fell into */

enum lmt_minhash_method {
	LMT_MINHASH_METHOD_OPH,      /* one permutation, optimal densification */
	LMT_MINHASH_METHOD_CLASSIC,  /* num_perm permutations */
};

/* The OPH bin of a permuted value v < 2^61 among k bins. */
static inline uint32_t lmt_minhash_bin(uint64_t v, uint32_t k)
{
	return (uint32_t)(((v >> 29) * k) >> 32);
}

/* x mod (2^61 - 1) for any 64-bit x. */
static inline uint64_t lmt_mod61(uint64_t x)
{
	x = (x & LMT_MINHASH_PRIME) + (x >> 61);
	return x >= LMT_MINHASH_PRIME ? x - LMT_MINHASH_PRIME : x;
}

/* (a * h + b) mod (2^61 - 1) for a, b, h < 2^61 - 1. */
static inline uint64_t lmt_mod61_affine(uint64_t a, uint64_t b, uint64_t h)
{
	unsigned __int128 x = (unsigned __int128)a * h + b;  /* < 2^122 + 2^61 */
	uint64_t s = ((uint64_t)x & LMT_MINHASH_PRIME) + (uint64_t)(x >> 61); /* < 2^62 */
	s = (s & LMT_MINHASH_PRIME) + (s >> 61);
	return s >= LMT_MINHASH_PRIME ? s - LMT_MINHASH_PRIME : s;
}

struct lmt_minhash {
	int num_perm;            /* signature values */
	int npad;                /* num_perm rounded up to a multiple of 8 */
	int ngram;               /* words per shingle */
	int kernel;              /* index of the signing kernel */
	int method;              /* LMT_MINHASH_METHOD_*, OPH unless set */
	uint64_t seed;
	uint64_t *a, *b;         /* classic: npad each; a_i, b_i for i < num_perm */
	uint64_t oa, ob;         /* OPH: the one permutation */
	uint64_t oc;             /* OPH: the seed of the densification orders */
	uint16_t *dorder, *drank;   /* OPH: sigma_j as num_perm x num_perm order and rank */
};

/* num_perm 1..LMT_MINHASH_MAX_PERM, ngram >= 1. The coefficients of both methods
 * are drawn (the classic ones first, as before OPH existed, so classic signatures
 * of a seed did not change); the method is OPH until set. */
int lmt_minhash_init(struct lmt_minhash *m, int num_perm, int ngram, uint64_t seed,
		     struct lmt_err *err);
void lmt_minhash_release(struct lmt_minhash *m);

/*
 * Words and shingles. lmt_word_hashes appends the 64-bit hashes of the words of a
 * (normalised) text to *v (capacity *cap, grown with LMT_GROW; the caller frees
 * it) and counts them in *n; returns 0 or LMT_ENOMEM. lmt_ngram_hash hashes k
 * consecutive word hashes (so a shingle does not depend on what separates its
 * words, and n-grams of different lengths never collide by construction).
 * lmt_shingles writes the hashes of the ngram-word windows of nwords words to
 * out (nwords - ngram + 1 of them; one of all the words when nwords < ngram;
 * none when nwords == 0) and returns their number.
 */
int lmt_word_hashes(const char *text, size_t len, uint64_t **v, size_t *cap, size_t *n);
uint64_t lmt_ngram_hash(const uint64_t *words, size_t k);
size_t lmt_shingles(const uint64_t *words, size_t nwords, int ngram, uint64_t *out);

/* Signature of n shingle hashes into sig[num_perm]; all LMT_MINHASH_EMPTY for n == 0.
 * mins is scratch space of m->npad values; for n > 0 it is left holding, for each
 * j < num_perm, the full 61-bit minimum of permutation j (classic) or of bin j
 * before densification, LMT_MINHASH_NOBIN for an empty bin (OPH). */
void lmt_minhash_sign(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint32_t *sig,
		      uint64_t *mins);

/* The signing kernel: "avx512", "avx2" or "scalar", the fastest this CPU runs is
 * chosen by lmt_minhash_init; all give the same signatures. set_kernel picks one
 * by name (for tests and benchmarks) and returns -1 if the CPU cannot run it. */
const char *lmt_minhash_kernel(const struct lmt_minhash *m);
int lmt_minhash_set_kernel(struct lmt_minhash *m, const char *name);

/* The method by name: "oph" or "classic"; set_method returns -1 for another name. */
const char *lmt_minhash_method(const struct lmt_minhash *m);
int lmt_minhash_set_method(struct lmt_minhash *m, const char *name);

/* Fraction of equal values of two signatures. */
double lmt_minhash_similarity(const uint32_t *x, const uint32_t *y, int num_perm);

/* The LSH bucket key of band k (rows r, values k*r .. k*r + r - 1). */
uint64_t lmt_lsh_band_key(const uint32_t *sig, int band, int rows);

/* The integrals above, and the (b, r) that minimises wfp * FP + wfn * FN over
 * b * r <= num_perm (ties: the first found, b ascending, then r ascending).
 * lmt_lsh_params returns 0 or LMT_ENOMEM. */
double lmt_lsh_false_positive(double t, int b, int r);
double lmt_lsh_false_negative(double t, int b, int r);
int lmt_lsh_params(double t, int num_perm, double wfp, double wfn, int *bands, int *rows);

/* Probability that two sets of Jaccard similarity s share a band: 1-(1-s^r)^b. */
double lmt_lsh_probability(double s, int b, int r);

/*
 * Union-find over document indices, where a set's root is always its smallest
 * index (the first document in input order), so the result does not depend on
 * the order of the unions. parent[i] = i initially.
 */
static inline uint32_t lmt_uf_find(uint32_t *parent, uint32_t x)
{
	while (parent[x] != x) {
		parent[x] = parent[parent[x]]; /* path halving */
		x = parent[x];
	}
	return x;
}

static inline void lmt_uf_union(uint32_t *parent, uint32_t x, uint32_t y)
{
	x = lmt_uf_find(parent, x);
	y = lmt_uf_find(parent, y);
	if (x < y)
		parent[y] = x;
	else if (y < x)
		parent[x] = y;
}

/*
 * Signatures of many documents, in chunks so that growing the store never copies
 * it (and never needs twice its size). Document i's signature is
 * lmt_sigstore_at(s, i), num_perm values.
 */
#define LMT_SIGSTORE_CHUNK 16384
struct lmt_sigstore {
	int num_perm;
	uint32_t **chunks;
	size_t nchunks, capchunks;
};
static inline uint32_t *lmt_sigstore_at(const struct lmt_sigstore *s, size_t i)
{
	return s->chunks[i / LMT_SIGSTORE_CHUNK] + (i % LMT_SIGSTORE_CHUNK) * (size_t)s->num_perm;
}
/* Make room for documents 0..n-1. Returns 0 or LMT_ENOMEM. */
int lmt_sigstore_reserve(struct lmt_sigstore *s, size_t n);
void lmt_sigstore_release(struct lmt_sigstore *s);

/*
 * Cluster by LSH: for each band, documents whose band keys are equal are joined in
 * parent (which may already hold unions, e.g. of exact duplicates). Documents
 * with flags[i] & skip take no part. Uses a table of 12 bytes a slot, 2 to 4
 * slots a taking document, while it runs. Returns 0, or LMT_ENOMEM.
 */
int lmt_lsh_cluster(const struct lmt_sigstore *sigs, size_t n, int bands, int rows,
		    const uint8_t *flags, uint8_t skip, uint32_t *parent, struct lmt_err *err);

/*
 * A table from LSH band keys to the first document that had them, for matching
 * one set of documents against another (training documents against evaluation
 * documents). Keys of all bands share one table; the band is mixed into the key.
 */
struct lmt_lsh_table {
	uint64_t *keys;
	uint32_t *vals;          /* UINT32_MAX: empty slot */
	size_t cap, n;
	int bands, rows;
};
int lmt_lsh_table_init(struct lmt_lsh_table *t, int bands, int rows);
void lmt_lsh_table_release(struct lmt_lsh_table *t);
/* Add the bands of signature sig for document id (a key already present keeps
 * its first document). Returns 0 or LMT_ENOMEM. */
int lmt_lsh_table_add(struct lmt_lsh_table *t, const uint32_t *sig, uint32_t id);
/* The document of the lowest band whose key matches, or UINT32_MAX. */
uint32_t lmt_lsh_table_query(const struct lmt_lsh_table *t, const uint32_t *sig);

/* A set of 64-bit values (n-gram hashes) with a 32-bit value each (the first
 * document that had the key). */
struct lmt_u64map {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap, n;
};
int lmt_u64map_put(struct lmt_u64map *m, uint64_t key, uint32_t val); /* keeps the first */
uint32_t lmt_u64map_get(const struct lmt_u64map *m, uint64_t key);    /* UINT32_MAX: absent */
void lmt_u64map_release(struct lmt_u64map *m);

/* Sort v[0..*n) and drop repeats. */
void lmt_u64_sort_unique(uint64_t *v, size_t *n);
/* |A ∩ B| / |A ∪ B| of two sorted, repeat-free sets; 1 when both are empty. */
double lmt_jaccard_sorted(const uint64_t *x, size_t nx, const uint64_t *y, size_t ny);

#endif
