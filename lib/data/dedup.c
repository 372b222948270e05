/*
 * dedup.c: the two-pass deduplication pipeline of dedup.h.
 *
 * Pass 1 keeps, per document, its signature, a 16-byte digest of its normalised
 * text, its union-find parent, where it came from and a few flags; exact
 * duplicates are found on the way through an open-addressing table of digests,
 * contamination by looking each document up in the evaluation set's tables.
 * Clustering then unions LSH band collisions (minhash.c). Pass 2 reads the input
 * again, checks that it is the same input (document positions and a running hash
 * of the raw texts), and hands every document to the caller, kept or removed. The
 * signing work of both passes runs in OpenMP threads, each with its own scratch
 * space; everything that depends on order runs on the calling thread. In pass 1
 * one of the signing threads reads the next batch (lmt_batchq_fill), first, while
 * the others sign the current one; a reader thread of its own took turns with them
 * on the cores. Pass 2, whose hashing is light, reads ahead in a thread of its own
 * with more than one thread, so that reading overlaps the writing of the kept
 * documents on the calling thread. With one thread the calling thread reads too,
 * so that -j1 is one core.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/util.h"
#include "data/dedup.h"
#include "data/textnorm.h"

#define DIGEST_LEN LMT_DEDUP_DIGEST_LEN

/* per-document flags */
enum {
	F_CONTAM = 1,    /* matches an evaluation document */
	F_EMPTY = 2,     /* no words after normalisation: no shingles */
	F_EXACTDUP = 4,  /* same normalised text as an earlier document */
	F_HASMEM = 8,    /* kept, with duplicates */
};

static const char *const method_name[] = { "none", "exact", "ngram", "minhash" };
static const char *const reason_name[] = { "exact", "near", "contamination" };

const char *lmt_dedup_method_name(int method)
{
	return method >= 0 && method < 4 ? method_name[method] : "none";
}

const char *lmt_dedup_reason_name(int reason)
{
	return reason >= 0 && reason < 3 ? reason_name[reason] : "?";
}

/* What each signing thread owns, a cache line apart. */
struct lmt_dedup_scratch {
	char *norm;
	size_t normcap;
	uint64_t *w;             /* word hashes of the current document */
	size_t wcap, nw;
	uint64_t *sh;            /* its shingles */
	size_t shcap, nsh;
	uint64_t *mins;
	int oom;
} __attribute__((aligned(64)));

struct lmt_dedup_evalset {
	struct lmt_corpus *c;
	size_t n;
	uint32_t *src;
	uint64_t *ord;
	uint8_t (*digest)[DIGEST_LEN];
	uint32_t *sigs;          /* n x num_perm */
	struct lmt_u64map exact; /* first 8 digest bytes -> document */
	struct lmt_u64map grams; /* n-gram hash -> first document that has it */
	struct lmt_lsh_table lsh;
	uint64_t short_lens;     /* bit L: a document of L < --ngram words is in grams */
	uint64_t **sets;         /* --verify: each document's sorted shingle set */
	size_t *nsets;
};

struct lmt_dedup_contam {
	uint32_t doc, eval;
	uint8_t method;
};

static int oom(struct lmt_err *err)
{
	return lmt_err_set(err, LMT_ENOMEM, "out of memory");
}

int lmt_dedup_init(struct lmt_dedup *d, const struct lmt_dedup_params *params, struct lmt_err *err)
{
	memset(d, 0, sizeof *d);
	d->p = *params;
	int rc = lmt_minhash_init(&d->mh, params->num_perm, params->shingle, params->seed, err);
	if (rc)
		return rc;
	d->mh.method = params->method;
	if (lmt_lsh_params(params->threshold, params->num_perm, 0.5, 0.5, &d->bands, &d->rows))
		return oom(err);
	d->sigs.num_perm = params->num_perm;
	const int nt = params->threads;
	d->W = aligned_alloc(64, (size_t)nt * sizeof *d->W);
	d->ev = calloc(1, sizeof *d->ev);
	if (!d->W || !d->ev)
		return oom(err);
	memset(d->W, 0, (size_t)nt * sizeof *d->W);
	for (int i = 0; i < nt; i++)
		if (!(d->W[i].mins = malloc((size_t)d->mh.npad * sizeof *d->W[i].mins)))
			return oom(err);
	return 0;
}

void lmt_dedup_release(struct lmt_dedup *d)
{
	for (int i = 0; d->W && i < d->p.threads; i++) {
		free(d->W[i].norm);
		free(d->W[i].w);
		free(d->W[i].sh);
		free(d->W[i].mins);
	}
	free(d->W);
	lmt_sigstore_release(&d->sigs);
	free(d->digest);
	free(d->parent);
	free(d->src);
	free(d->ord);
	free(d->flags);
	free(d->table);
	free(d->contam);
	free(d->idbuf);
	free(d->idbuf2);
	struct lmt_dedup_evalset *e = d->ev;
	if (e) {
		if (e->c)
			lmt_corpus_close(e->c);
		for (size_t i = 0; e->sets && i < e->n; i++)
			free(e->sets[i]);
		free(e->sets);
		free(e->nsets);
		free(e->src);
		free(e->ord);
		free(e->digest);
		free(e->sigs);
		lmt_u64map_release(&e->exact);
		lmt_u64map_release(&e->grams);
		lmt_lsh_table_release(&e->lsh);
		free(e);
	}
	lmt_minhash_release(&d->mh);
	memset(d, 0, sizeof *d);
}

double lmt_dedup_bytes_per_doc(const struct lmt_dedup *d)
{
	return 4.0 * d->p.num_perm + DIGEST_LEN + 4 + 4 + 8 + 1 +
	       (d->n ? 4.0 * (double)d->tcap / (double)d->n : 0);
}

/* the input in batches: read ahead in a thread (ahead), or by the caller's threads
 * (lmt_batchq_fill), or here with one thread */
#define BATCH_BYTES (8u << 20)
#define BATCH_DOCS (1u << 15)

static int reader_start(struct lmt_batchq **q, struct lmt_corpus *c, int ahead, struct lmt_err *err)
{
	if (!(*q = lmt_batchq_start(c, BATCH_BYTES, BATCH_DOCS, NULL, NULL, ahead)))
		return lmt_err_set(err, LMT_ENOMEM,
				   ahead ? "cannot start the reader thread" : "out of memory for the reader");
	return 0;
}

/* ---- one document: normalise, hash, shingle, sign ---- */

static void analyse(const struct lmt_dedup *d, struct lmt_dedup_scratch *s, const char *text, size_t len,
		    uint8_t dg[DIGEST_LEN], uint32_t *sig)
{
	size_t need = lmt_textnorm_bound(len);
	if (need > s->normcap) {
		char *p = realloc(s->norm, need);
		if (!p) {
			s->oom = 1;
			return;
		}
		s->norm = p;
		s->normcap = need;
	}
	size_t m = lmt_textnorm_apply(d->p.norm, text, len, s->norm);
	uint8_t full[LMT_SHA256_LEN];
	lmt_sha256(s->norm, m, full);
	memcpy(dg, full, DIGEST_LEN);
	s->nw = 0;
	if (lmt_word_hashes(s->norm, m, &s->w, &s->wcap, &s->nw) ||
	    LMT_GROW(s->sh, s->shcap, s->nw + 1)) {
		s->oom = 1;
		return;
	}
	s->nsh = lmt_shingles(s->w, s->nw, d->p.shingle, s->sh);
	if (sig)
		lmt_minhash_sign(&d->mh, s->sh, s->nsh, sig, s->mins);
}

/* The sorted shingle set of a text, malloc'd (NULL with *n == 0 when empty). */
static uint64_t *shingle_set(const struct lmt_dedup *d, struct lmt_dedup_scratch *s, const char *text,
			     size_t len, size_t *n)
{
	uint8_t dg[DIGEST_LEN];
	analyse(d, s, text, len, dg, NULL);
	*n = 0;
	if (s->oom || s->nsh == 0)
		return NULL;
	uint64_t *v = malloc(s->nsh * sizeof *v);
	if (!v) {
		s->oom = 1;
		return NULL;
	}
	memcpy(v, s->sh, s->nsh * sizeof *v);
	*n = s->nsh;
	lmt_u64_sort_unique(v, n);
	return v;
}

/* ---- evaluation documents ---- */

/* Index the words of the document just analysed as evaluation document i. */
static int index_eval(struct lmt_dedup *d, const struct lmt_dedup_scratch *s, size_t i)
{
	struct lmt_dedup_evalset *e = d->ev;
	if (lmt_u64map_put(&e->exact, lmt_load_u64(e->digest[i]), (uint32_t)i) ||
	    lmt_lsh_table_add(&e->lsh, e->sigs + i * (size_t)d->p.num_perm, (uint32_t)i))
		return -1;
	size_t g = (size_t)d->p.ngram;
	if (s->nw >= g) {
		for (size_t k = 0; k + g <= s->nw; k++)
			if (lmt_u64map_put(&e->grams, lmt_ngram_hash(s->w + k, g), (uint32_t)i))
				return -1;
	} else if (s->nw >= (size_t)d->p.ngram_min) {
		if (lmt_u64map_put(&e->grams, lmt_ngram_hash(s->w, s->nw), (uint32_t)i))
			return -1;
		e->short_lens |= 1ULL << s->nw;
	}
	return 0;
}

/* --verify needs the shingle sets too: read the files again for them. */
static int read_eval_sets(struct lmt_dedup *d, struct lmt_err *err)
{
	const struct lmt_dedup_params *o = &d->p;
	struct lmt_dedup_evalset *e = d->ev;
	struct lmt_dedup_scratch *s = &d->W[0];
	struct lmt_doc doc;
	int rc;
	e->sets = calloc(e->n + 1, sizeof *e->sets);
	e->nsets = calloc(e->n + 1, sizeof *e->nsets);
	if (!e->sets || !e->nsets)
		return oom(err);
	lmt_corpus_close(e->c);
	e->c = NULL;
	if ((rc = lmt_corpus_open(&e->c, o->against, o->nagainst, o->corpus, err)))
		return rc;
	for (size_t i = 0; i < e->n; i++) {
		if ((rc = lmt_corpus_next(e->c, &doc, err)) <= 0)
			return rc < 0 ? rc : lmt_err_set(err, LMT_EFORMAT,
				"'%s': evaluation input changed while it was read", o->against[0]);
		e->sets[i] = shingle_set(d, s, doc.text, doc.len, &e->nsets[i]);
		if (s->oom)
			return oom(err);
	}
	return 0;
}

int lmt_dedup_read_eval(struct lmt_dedup *d, struct lmt_err *err)
{
	const struct lmt_dedup_params *o = &d->p;
	struct lmt_dedup_evalset *e = d->ev;
	int rc;
	if ((rc = lmt_corpus_open(&e->c, o->against, o->nagainst, o->corpus, err)))
		return rc;
	if (lmt_lsh_table_init(&e->lsh, d->bands, d->rows))
		return oom(err);
	size_t capsig = 0, capd = 0, caps = 0, capo = 0;
	const size_t np = (size_t)o->num_perm;
	struct lmt_dedup_scratch *s = &d->W[0];
	struct lmt_doc doc;
	while ((rc = lmt_corpus_next(e->c, &doc, err)) > 0) {
		if (e->n >= UINT32_MAX - 1)
			return lmt_err_set(err, LMT_ERANGE, "'%s': more than %u evaluation documents",
					   o->against[0], UINT32_MAX - 1);
		size_t i = e->n;
		if (LMT_GROW(e->src, caps, i + 1) || LMT_GROW(e->ord, capo, i + 1) ||
		    LMT_GROW(e->digest, capd, i + 1) || LMT_GROW(e->sigs, capsig, (i + 1) * np))
			return oom(err);
		e->src[i] = doc.source;
		e->ord[i] = doc.ordinal;
		analyse(d, s, doc.text, doc.len, e->digest[i], e->sigs + i * np);
		if (s->oom)
			return oom(err);
		e->n++;
		if (s->nw == 0)
			continue; /* nothing left after normalisation: matches nothing */
		if (index_eval(d, s, i))
			return oom(err);
	}
	if (rc < 0)
		return rc;
	if (o->verify && (rc = read_eval_sets(d, err)))
		return rc;
	d->eval_docs = e->n;
	d->eval_ngrams = e->grams.n;
	return 0;
}

/* Which evaluation document, if any, does this document match, and how? */
static int contaminated(const struct lmt_dedup *d, const struct lmt_dedup_scratch *s, const uint8_t *dg,
			const uint32_t *sig, uint32_t *eval)
{
	const struct lmt_dedup_evalset *e = d->ev;
	if (s->nw == 0)
		return LMT_DEDUP_METHOD_NONE;
	uint32_t v = lmt_u64map_get(&e->exact, lmt_load_u64(dg));
	if (v != UINT32_MAX && !memcmp(e->digest[v], dg, DIGEST_LEN)) {
		*eval = v;
		return LMT_DEDUP_METHOD_EXACT;
	}
	size_t g = (size_t)d->p.ngram;
	for (size_t k = 0; k + g <= s->nw; k++) {
		if ((v = lmt_u64map_get(&e->grams, lmt_ngram_hash(s->w + k, g))) != UINT32_MAX) {
			*eval = v;
			return LMT_DEDUP_METHOD_NGRAM;
		}
	}
	for (size_t l = 1; l < g && l <= s->nw; l++) {
		if (!(e->short_lens & (1ULL << l)))
			continue;
		for (size_t k = 0; k + l <= s->nw; k++) {
			if ((v = lmt_u64map_get(&e->grams, lmt_ngram_hash(s->w + k, l))) != UINT32_MAX) {
				*eval = v;
				return LMT_DEDUP_METHOD_NGRAM;
			}
		}
	}
	if ((v = lmt_lsh_table_query(&e->lsh, sig)) != UINT32_MAX) {
		*eval = v;
		return LMT_DEDUP_METHOD_MINHASH;
	}
	return LMT_DEDUP_METHOD_NONE;
}

/* ---- pass 1: sign, find exact duplicates and contamination ---- */

struct p1res {
	uint8_t dg[DIGEST_LEN];
	uint64_t rawhash;
	uint32_t eval;
	uint8_t method, empty;
};

static uint32_t *exact_slot(struct lmt_dedup *d, const uint8_t *dg)
{
	size_t mask = d->tcap - 1, s = lmt_load_u64(dg) & mask;
	while (d->table[s] != UINT32_MAX && memcmp(d->digest[d->table[s]], dg, DIGEST_LEN))
		s = (s + 1) & mask;
	return &d->table[s];
}

static int exact_grow(struct lmt_dedup *d)
{
	if (2 * (d->tn + 1) <= d->tcap)
		return 0;
	size_t nc = d->tcap ? 2 * d->tcap : 1024;
	uint32_t *old = d->table;
	size_t oc = d->tcap;
	if (!(d->table = malloc(nc * sizeof *d->table))) {
		d->table = old;
		return -1;
	}
	memset(d->table, 0xff, nc * sizeof *d->table);
	d->tcap = nc;
	for (size_t i = 0; i < oc; i++)
		if (old[i] != UINT32_MAX)
			*exact_slot(d, d->digest[old[i]]) = old[i];
	free(old);
	return 0;
}

static int grow_docs(struct lmt_dedup *d, size_t need, struct lmt_err *err)
{
	if (need > UINT32_MAX - 1)
		return lmt_err_set(err, LMT_ERANGE, "more than %u documents; this build indexes documents with 32 bits",
				   UINT32_MAX - 1);
	if (need > d->cap) {
		size_t c = d->cap;
		size_t c1 = c, c2 = c, c3 = c, c4 = c;
		if (LMT_GROW(d->digest, c, need) || LMT_GROW(d->parent, c1, need) ||
		    LMT_GROW(d->src, c2, need) || LMT_GROW(d->ord, c3, need) || LMT_GROW(d->flags, c4, need))
			return oom(err);
		/* the same growth rule from the same capacity: all five agree */
		LMT_ASSERT(c == c1 && c == c2 && c == c3 && c == c4);
		d->cap = c;
	}
	if (lmt_sigstore_reserve(&d->sigs, need))
		return oom(err);
	return 0;
}

/* Record the documents of one signed batch, in order. */
static int pass1_record(struct lmt_dedup *d, const struct lmt_docbatch *b, const struct p1res *res)
{
	for (size_t i = 0; i < b->n; i++) {
		const struct p1res *r = &res[i];
		size_t x = d->n + i;
		d->src[x] = b->docs[i].source;
		d->ord[x] = b->docs[i].ordinal;
		memcpy(d->digest[x], r->dg, DIGEST_LEN);
		d->parent[x] = (uint32_t)x;
		d->flags[x] = r->empty ? F_EMPTY : 0;
		d->inhash = lmt_mix64(d->inhash + r->rawhash);
		if (r->method != LMT_DEDUP_METHOD_NONE) {
			d->flags[x] |= F_CONTAM;
			if (LMT_GROW(d->contam, d->capcontam, d->ncontam + 1))
				return -1;
			d->contam[d->ncontam++] = (struct lmt_dedup_contam){ (uint32_t)x, r->eval, r->method };
			continue;
		}
		if (exact_grow(d))
			return -1;
		uint32_t *slot = exact_slot(d, r->dg);
		if (*slot == UINT32_MAX) {
			*slot = (uint32_t)x;
			d->tn++;
		} else {
			d->parent[x] = *slot;
			d->flags[x] |= F_EXACTDUP;
		}
	}
	d->n += b->n;
	return 0;
}

int lmt_dedup_pass1(struct lmt_dedup *d, const char *const *inputs, int ninputs,
		    const struct lmt_dedup_callbacks *cb, struct lmt_err *err)
{
	struct lmt_corpus *c;
	struct lmt_corpus_opts co = *d->p.corpus;
	co.raw_hash = 1;
	co.keep_escaped = 0;
	int rc = lmt_corpus_open(&c, inputs, ninputs, &co, err);
	if (rc)
		return rc;
	uint64_t done, total;
	lmt_corpus_progress(c, &done, &total);
	if (cb->progress)
		cb->progress(cb->ctx, 0, total);
	/* the next batch is read by one of the signing threads, first, while the others
	 * sign (a reader thread of its own took turns with them on the cores) */
	struct lmt_batchq *q;
	if ((rc = reader_start(&q, c, 0, err))) {
		lmt_corpus_close(c);
		return rc;
	}
	struct lmt_docbatch *b;
	struct p1res *res = NULL;
	size_t rescap = 0;
	while ((rc = lmt_batchq_get(q, &b, err)) > 0) {
		const int nd = (int)b->n;
		const size_t base = d->n;
		if (LMT_GROW(res, rescap, (size_t)nd)) {
			rc = oom(err);
			break;
		}
		if ((rc = grow_docs(d, base + (size_t)nd, err)))
			break;
		int failed = 0;
#pragma omp parallel num_threads(d->p.threads) reduction(| : failed)
		{
#pragma omp single nowait
			if (d->p.threads > 1)
				lmt_batchq_fill(q); /* with one thread lmt_batchq_get reads, into one slot */
#pragma omp for schedule(dynamic, 16)
			for (int i = 0; i < nd; i++) {
				struct lmt_dedup_scratch *s = &d->W[omp_get_thread_num()];
				struct p1res *r = &res[i];
				uint32_t *sig = lmt_sigstore_at(&d->sigs, base + (size_t)i);
				r->rawhash = b->docs[i].raw_hash;
				analyse(d, s, b->docs[i].text, b->docs[i].len, r->dg, sig);
				r->empty = s->nw == 0;
				r->method = d->p.nagainst && !s->oom
						    ? (uint8_t)contaminated(d, s, r->dg, sig, &r->eval)
						    : LMT_DEDUP_METHOD_NONE;
				failed |= s->oom;
			}
		}
		if (failed || pass1_record(d, b, res)) {
			rc = oom(err);
			break;
		}
		lmt_batchq_put(q, b);
		lmt_corpus_progress(c, &done, &total);
		if (cb->progress)
			cb->progress(cb->ctx, done, total);
	}
	lmt_batchq_stop(q);
	lmt_corpus_close(c);
	free(res);
	return rc < 0 ? rc : 0;
}

int lmt_dedup_cluster(struct lmt_dedup *d, struct lmt_err *err)
{
	int rc = lmt_lsh_cluster(&d->sigs, d->n, d->bands, d->rows, d->flags, F_CONTAM | F_EMPTY | F_EXACTDUP,
				 d->parent, err);
	if (rc)
		return rc;
	/* parent[i] <= i always (unions link the larger root under the smaller), so in
	 * ascending order each parent is final when it is needed */
	for (size_t i = 0; i < d->n; i++) {
		uint32_t r = d->parent[d->parent[i]];
		d->parent[i] = r;
		if (d->flags[i] & F_CONTAM)
			continue;
		if (r == i) {
			d->kept++;
		} else {
			if (!(d->flags[r] & F_HASMEM))
				d->clusters++;
			d->flags[r] |= F_HASMEM;
			if (!memcmp(d->digest[i], d->digest[r], DIGEST_LEN))
				d->exact++;
			else
				d->near++;
		}
	}
	return 0;
}

/* ---- pass 2: hand back ---- */

static const char *doc_id(char **buf, size_t *cap, const char *source, uint64_t ord)
{
	size_t need = strlen(source) + 24;
	if (LMT_GROW(*buf, *cap, need))
		return NULL;
	snprintf(*buf, *cap, "%s:%llu", source, (unsigned long long)ord);
	return *buf;
}

/* --verify: the shingle sets of representatives, held from the representative
 * to its cluster's last member */
struct repset {
	uint64_t *v;
	size_t n;
	uint32_t last;
};

struct p2res {
	uint64_t rawhash;
	uint64_t *set;           /* --verify: shingle set, when needed */
	size_t nset;
};

struct pass2 {
	struct lmt_dedup *d;
	const struct lmt_dedup_callbacks *cb;
	struct lmt_corpus *c;
	struct lmt_u64map repidx;   /* representative -> index in reps */
	struct repset *reps;
	size_t nreps, capreps;
	size_t x, ci;               /* next document, next contaminated one */
	uint64_t inhash;
};

static int find_reps(struct pass2 *P)
{
	const struct lmt_dedup *d = P->d;
	for (size_t i = 0; i < d->n; i++) {
		if ((d->flags[i] & F_HASMEM) && !(d->flags[i] & F_CONTAM)) {
			if (LMT_GROW(P->reps, P->capreps, P->nreps + 1) ||
			    lmt_u64map_put(&P->repidx, i, (uint32_t)P->nreps))
				return -1;
			P->reps[P->nreps++] = (struct repset){ NULL, 0, 0 };
		} else if (!(d->flags[i] & F_CONTAM) && d->parent[i] != i) {
			P->reps[lmt_u64map_get(&P->repidx, d->parent[i])].last = (uint32_t)i;
		}
	}
	return 0;
}

/* Document x of pass 2 (its shingle set in res when --verify needs it). */
static int hand_back(struct pass2 *P, const struct lmt_doc *doc, struct p2res *res, struct lmt_err *err)
{
	struct lmt_dedup *d = P->d;
	const struct lmt_dedup_callbacks *cb = P->cb;
	const size_t x = P->x;
	const int np = d->p.num_perm, verify = d->p.verify;
	const char *srcname = lmt_corpus_source_name(P->c, doc->source);
	if (doc->source != d->src[x] || doc->ordinal != d->ord[x])
		return lmt_err_set(err, LMT_EFORMAT, "'%s': input changed between the two passes (document %llu)",
				   srcname, (unsigned long long)doc->ordinal);
	P->inhash = lmt_mix64(P->inhash + res->rawhash);
	const char *id = doc_id(&d->idbuf, &d->idcap, srcname, doc->ordinal);
	if (!id)
		return oom(err);
	const uint32_t *sig = lmt_sigstore_at(&d->sigs, x);
	uint32_t r = d->parent[x];
	struct lmt_dedup_removal rec = { 0 };
	rec.id = id;
	if (d->flags[x] & F_CONTAM) {
		LMT_ASSERT(P->ci < d->ncontam && d->contam[P->ci].doc == x);
		const struct lmt_dedup_contam *ct = &d->contam[P->ci++];
		const struct lmt_dedup_evalset *e = d->ev;
		if (!cb->removed)
			return 0;
		rec.reason = LMT_DEDUP_REASON_CONTAMINATION;
		rec.method = ct->method;
		rec.other_id = doc_id(&d->idbuf2, &d->idcap2, lmt_corpus_source_name(e->c, e->src[ct->eval]),
				      e->ord[ct->eval]);
		if (!rec.other_id)
			return oom(err);
		rec.estimated_jaccard = lmt_minhash_similarity(sig, e->sigs + (size_t)ct->eval * np, np);
		if ((rec.has_jaccard = verify))
			rec.jaccard = lmt_jaccard_sorted(res->set, res->nset, e->sets[ct->eval], e->nsets[ct->eval]);
		return cb->removed(cb->ctx, &rec, err);
	}
	if (r == x) {
		if (verify && (d->flags[x] & F_HASMEM)) {
			struct repset *rs = &P->reps[lmt_u64map_get(&P->repidx, x)];
			rs->v = res->set;
			rs->n = res->nset;
			res->set = NULL;
		}
		return cb->kept ? cb->kept(cb->ctx, doc, srcname, id, err) : 0;
	}
	struct repset *rs = verify ? &P->reps[lmt_u64map_get(&P->repidx, r)] : NULL;
	int rc = 0;
	if (cb->removed) {
		int exact = !memcmp(d->digest[x], d->digest[r], DIGEST_LEN);
		rec.reason = exact ? LMT_DEDUP_REASON_EXACT : LMT_DEDUP_REASON_NEAR;
		rec.other_id = doc_id(&d->idbuf2, &d->idcap2, lmt_corpus_source_name(P->c, d->src[r]), d->ord[r]);
		if (!rec.other_id)
			return oom(err);
		rec.estimated_jaccard = lmt_minhash_similarity(sig, lmt_sigstore_at(&d->sigs, r), np);
		if ((rec.has_jaccard = rs != NULL))
			rec.jaccard = lmt_jaccard_sorted(res->set, res->nset, rs->v, rs->n);
		rc = cb->removed(cb->ctx, &rec, err);
	}
	if (rs && rs->last == x) {
		free(rs->v);
		rs->v = NULL;
	}
	return rc;
}

/* Hash (and for --verify, shingle) one batch in threads, then hand it back in order. */
static int pass2_batch(struct pass2 *P, const struct lmt_docbatch *b, struct p2res *res, struct lmt_err *err)
{
	struct lmt_dedup *d = P->d;
	const int nd = (int)b->n;
	if (P->x + (size_t)nd > d->n)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': input changed between the two passes (more documents)",
				   lmt_corpus_source_name(P->c, b->docs[0].source));
	const size_t base = P->x;
	int failed = 0;
#pragma omp parallel for num_threads(d->p.threads) schedule(dynamic, 16) reduction(| : failed)
	for (int i = 0; i < nd; i++) {
		struct lmt_dedup_scratch *s = &d->W[omp_get_thread_num()];
		size_t k = base + (size_t)i;
		res[i].rawhash = b->docs[i].raw_hash;
		res[i].set = NULL;
		res[i].nset = 0;
		int need = d->p.verify && ((d->flags[k] & F_CONTAM) || d->parent[k] != k ||
					   (d->flags[k] & F_HASMEM));
		if (need)
			res[i].set = shingle_set(d, s, b->docs[i].text, b->docs[i].len, &res[i].nset);
		failed |= s->oom;
	}
	int rc = failed ? oom(err) : 0;
	for (int i = 0; i < nd; i++) {
		if (!rc && !(rc = hand_back(P, &b->docs[i], &res[i], err)))
			P->x++;
		free(res[i].set);
	}
	return rc;
}

int lmt_dedup_pass2(struct lmt_dedup *d, const char *const *inputs, int ninputs,
		    const struct lmt_dedup_callbacks *cb, struct lmt_err *err)
{
	struct pass2 P = { 0 };
	P.d = d;
	P.cb = cb;
	/* the input is checked against pass 1 by the hashes of the texts as they stand
	 * in it, so a kept text already in JSON's escaped form need not be decoded only
	 * to be encoded again (--verify needs every text decoded, to shingle it) */
	struct lmt_corpus_opts co = *d->p.corpus;
	co.raw_hash = 1;
	co.keep_escaped = d->p.kept_escaped && !d->p.verify;
	int rc = lmt_corpus_open(&P.c, inputs, ninputs, &co, err);
	if (rc)
		return rc;
	struct lmt_batchq *q = NULL;
	struct lmt_docbatch *b;
	struct p2res *res = NULL;
	size_t rescap = 0;
	if (d->p.verify && find_reps(&P)) {
		rc = oom(err);
		goto out;
	}
	if (cb->progress)
		cb->progress(cb->ctx, 0, d->n);
	/* here a reader thread: the hashing is light, and reading overlaps the
	 * writing of kept documents on this thread */
	if ((rc = reader_start(&q, P.c, d->p.threads > 1, err)))
		goto out;
	while ((rc = lmt_batchq_get(q, &b, err)) > 0) {
		if (LMT_GROW(res, rescap, b->n)) {
			rc = oom(err);
			break;
		}
		if ((rc = pass2_batch(&P, b, res, err)) || (cb->batch_done && (rc = cb->batch_done(cb->ctx, err))))
			break;
		lmt_batchq_put(q, b);
		if (cb->progress)
			cb->progress(cb->ctx, P.x, d->n);
	}
	lmt_batchq_stop(q);
	if (rc == 0 && (P.x != d->n || P.inhash != d->inhash))
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': input changed between the two passes (%s)", inputs[0],
				 P.x != d->n ? "fewer documents" : "different text");
out:
	lmt_corpus_close(P.c);
	for (size_t i = 0; i < P.nreps; i++)
		free(P.reps[i].v);
	free(P.reps);
	lmt_u64map_release(&P.repidx);
	free(res);
	return rc < 0 ? rc : 0;
}
