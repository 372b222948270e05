/*
 * batchenc.c: parallel, ordered batch encoding (batchenc.h). The documents of a
 * batch are items of a work pool (core/workpool.h), claimed one at a time, as their
 * lengths vary by orders of magnitude. Not OpenMP: its threads spin at the end of
 * each batch, taking the core that the reader thread and the writing of the
 * previous batch need (measured: 4% of tok-encode -j2's time in libgomp's wait,
 * and -j2 1.5x -j1).
 */
#include "data/batchenc.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "core/workpool.h"

/* A part of a document, which one thread encodes: a whole document, or, of one
 * longer than 2 * ENC_CHUNK bytes, ENC_CHUNK bytes or a little more, cut where
 * lmt_tok_cut allows (so the parts' tokens are the whole's), or, where it allows
 * none, a guess (below). Its tokens are thread tid's vector from start, n of them;
 * at: where they go in the batch's. */
struct lmt_batchenc_rec {
	int tid;
	size_t start, n, at;
	size_t doc, off, len;
	uint8_t first, last;   /* the document's first part, and its last */
	uint32_t guess;        /* a part of a guessed cut: 1 + its e->guess entry; 0: none */
};

/* a part of a guessed cut (below): where its last piece ends, its pieces' tokens (no
 * BOS or EOS), its marks (e->marks from GUESS_MARKS * its index, nmark of them);
 * then, once the parts before it are settled, the tokens dropped from its start and
 * those put before it instead (e->fix from fix, nfix of them). Apart from the
 * records, which every document has and the gathering reads (a record of 64 bytes
 * with these was 128, and tok-encode -j1 on short lines 6% slower) */
struct lmt_batchenc_guess {
	size_t rec;
	size_t end, ntext, nmark, drop, fix, nfix;
};
#define ENC_CHUNK (64u << 10)

/*
 * Guessed cuts. A custom pattern has no cut rule (lmt_pretok_cut), so a long
 * document pre-tokenized by one is cut where a piece probably starts, after a
 * newline and before a byte that is not white space, and each part is encoded from
 * there with the whole document as the pattern's text, up to the piece that runs
 * over its end. A pattern's pieces from a place depend on the place and the text
 * alone (lmt_pretok_iter_seek): where the part before ends on a place at which this
 * part also has a piece end, the two agree from there on. The places are checked
 * in order once all parts are done (settle): the part before's last piece ends at
 * pos; if pos is this part's start or one of its first GUESS_MARKS pieces' ends,
 * the tokens before it are dropped; else one more piece is encoded from pos, on
 * one thread, and the test repeated. If pos passes the marks (a pattern that never
 * meets this part's pieces), the part is encoded again from pos on one thread. So
 * the tokens are the whole's for any pattern; a guess costs a piece or two.
 */
#define GUESS_MARKS 64

struct lmt_batchenc_vec {
	struct lmt_u32vec v;
} __attribute__((aligned(64)));

int lmt_batchenc_init(struct lmt_batchenc *e, const struct lmt_tokenizer *tok, const struct lmt_batchenc_opts *o,
		      struct lmt_err *err)
{
	memset(e, 0, sizeof *e);
	e->tok = tok;
	e->o = *o;
	int nt = o->threads;
	e->st = calloc((size_t)nt, sizeof *e->st);
	e->vec = aligned_alloc(64, (size_t)nt * sizeof *e->vec);
	if (!e->st || !e->vec) {
		lmt_batchenc_release(e);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	memset(e->vec, 0, (size_t)nt * sizeof *e->vec);
	e->pool = lmt_workpool_new(nt);
	for (int i = 0; i < nt; i++)
		if (!(e->st[i] = lmt_tok_state_new(tok))) {
			lmt_batchenc_release(e);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
	return 0;
}

struct encode_job {
	struct lmt_batchenc *e;
	const struct lmt_docbatch *b;
	void (*side)(void *ctx);
	void *side_ctx;
	int failed;
};

/* item 0 is the side job, if any, so that it starts first; then the parts */
static void encode_part(void *ctx, size_t item, int tid)
{
	struct encode_job *J = ctx;
	struct lmt_batchenc *e = J->e;
	if (J->side && item-- == 0) {
		J->side(J->side_ctx);
		return;
	}
	struct lmt_batchenc_rec *r = &e->recs[e->order[item]];
	const struct lmt_batchenc_opts *o = &e->o;
	struct lmt_u32vec *v = &e->vec[tid].v;
	size_t start = v->n;
	int failed = 0;
	if (LMT_GROW(v->v, v->cap, v->n + 2)) {
		__atomic_store_n(&J->failed, 1, __ATOMIC_RELAXED);
		return;
	}
	if (r->first && o->bos != LMT_NO_TOKEN)
		v->v[v->n++] = o->bos;
	if (r->first && o->eos_first)
		v->v[v->n++] = o->eos;
	const struct lmt_doc *d = &J->b->docs[r->doc];
	if (r->guess) {
		struct lmt_batchenc_guess *g = &e->guess[r->guess - 1];
		size_t before = v->n;
		failed |= lmt_tok_encode_from(e->tok, e->st[tid], d->text, d->len, r->off, r->off + r->len, v,
					      e->marks + (r->guess - 1) * GUESS_MARKS, GUESS_MARKS, &g->nmark,
					      &g->end) != 0;
		g->ntext = v->n - before;
	} else {
		failed |= lmt_tok_encode(e->tok, e->st[tid], d->text + r->off, r->len, o->allow_special, v) != 0;
	}
	if (r->last && o->eos != LMT_NO_TOKEN && !o->eos_first) {
		if (LMT_GROW(v->v, v->cap, v->n + 1))
			failed = 1;
		else
			v->v[v->n++] = o->eos;
	}
	r->tid = tid;
	r->start = start;
	r->n = v->n - start;
	if (failed)
		__atomic_store_n(&J->failed, 1, __ATOMIC_RELAXED);
}

#define GATHER_PARTS 256

static void gather_parts(void *ctx, size_t item, int worker)
{
	struct encode_job *J = ctx;
	struct lmt_batchenc *e = J->e;
	size_t lo = item * GATHER_PARTS, hi = LMT_MIN(lo + GATHER_PARTS, e->nrec);
	(void)worker;
	for (size_t i = lo; i < hi; i++) {
		const struct lmt_batchenc_rec *r = &e->recs[i];
		if (!r->guess) {
			memcpy(e->all.v + r->at, e->vec[r->tid].v.v + r->start, r->n * sizeof *e->all.v);
			continue;
		}
		const struct lmt_batchenc_guess *g = &e->guess[r->guess - 1];
		if (g->nfix) /* e->fix.v is NULL until a batch settles a token */
			memcpy(e->all.v + r->at, e->fix.v + g->fix, g->nfix * sizeof *e->all.v);
		memcpy(e->all.v + r->at + g->nfix, e->vec[r->tid].v.v + r->start + g->drop,
		       (r->n - g->drop) * sizeof *e->all.v);
	}
}

/* e->recs: b's documents' parts, in order */
static int cut_parts(struct lmt_batchenc *e, const struct lmt_docbatch *b)
{
	const size_t chunk = e->o.chunk_bytes ? e->o.chunk_bytes : ENC_CHUNK;
	e->nrec = e->nguess = 0;
	for (size_t i = 0; i < b->n; i++) {
		const struct lmt_doc *d = &b->docs[i];
		size_t off = 0;
		int guess = d->len >= 2 * chunk &&
			    lmt_specmatch_guessed(e->o.allow_special ? &e->tok->special_match : NULL, &e->tok->pt, d->text,
						  d->len);
		do {
			size_t c = d->len - off < 2 * chunk ? d->len
				   : guess ? lmt_pretok_guess(d->text, d->len, off + chunk, chunk)
					   : lmt_tok_cut(e->tok, d->text, d->len, off + chunk, e->o.allow_special);
			if (LMT_GROW(e->recs, e->rcap, e->nrec + 1) ||
			    (guess && (LMT_GROW(e->guess, e->gcap, e->nguess + 1) ||
				       LMT_GROW(e->marks, e->mcap, (e->nguess + 1) * GUESS_MARKS))))
				return LMT_ENOMEM;
			if (guess)
				e->guess[e->nguess++] = (struct lmt_batchenc_guess){ .rec = e->nrec };
			e->recs[e->nrec++] = (struct lmt_batchenc_rec){ .doc = i, .off = off, .len = c - off,
									.first = off == 0, .last = c == d->len,
									.guess = guess ? (uint32_t)e->nguess : 0 };
			off = c;
		} while (off < d->len);
	}
	return 0;
}

/*
 * The guessed parts' tokens, settled in order (see above): what each drops from its
 * start and what goes before it, in e->fix, encoded here on the caller's state
 * (worker 0's, idle once the parts are done).
 */
static int settle(struct lmt_batchenc *e, const struct lmt_docbatch *b)
{
	struct lmt_tok_state *st = e->st[0];
	e->fix.n = 0;
	size_t pos = 0;
	for (size_t i = 0; i < e->nguess; i++) {
		struct lmt_batchenc_guess *r = &e->guess[i];
		const struct lmt_batchenc_rec *p = &e->recs[r->rec];
		r->drop = r->fix = r->nfix = 0;
		if (p->first) { /* encoded from the document's start: as it is */
			pos = r->end;
			continue;
		}
		const struct lmt_doc *d = &b->docs[p->doc];
		const struct lmt_tok_mark *m = e->marks + i * GUESS_MARKS;
		r->fix = e->fix.n;
		size_t j = 0, done = 0;
		while (!done) {
			while (j < r->nmark && m[j].pos < pos)
				j++;
			if (pos == p->off || (j < r->nmark && m[j].pos == pos)) {
				r->drop = pos == p->off ? 0 : m[j].ntok; /* met: the rest is the whole's */
				pos = r->end;
				done = 1;
			} else if (pos >= r->end || j == r->nmark) {
				/* past the part, or past its marks (which hold every piece of
				 * it when fewer than GUESS_MARKS): the pieces to its end */
				size_t end = pos;
				if (pos < p->off + p->len &&
				    lmt_tok_encode_from(e->tok, st, d->text, d->len, pos, p->off + p->len, &e->fix, NULL,
							0, NULL, &end))
					return LMT_ENOMEM;
				r->drop = r->ntext;
				pos = end;
				done = 1;
			} else {
				/* one more piece of the whole */
				size_t end;
				if (lmt_tok_encode_from(e->tok, st, d->text, d->len, pos, pos + 1, &e->fix, NULL, 0, NULL,
							&end))
					return LMT_ENOMEM;
				pos = end;
			}
		}
		r->nfix = e->fix.n - r->fix;
	}
	return 0;
}

static inline size_t len_class(size_t len) /* 0 for the longest: 64 - bits of len */
{
	return (size_t)__builtin_clzll((unsigned long long)len | 1);
}

/*
 * The parts in the order the threads take them: by the power of 2 of their
 * length, longest first (a counting sort), so that a thread that takes a long
 * document near the end of a batch does not leave the others idle until it is
 * done (documents of a real corpus run from a line to 200 kB). The output is in
 * document order whatever this order is.
 */
static void order_parts(uint32_t *order, const struct lmt_batchenc_rec *r, size_t n)
{
	size_t start[64] = { 0 };
	for (size_t i = 0; i < n; i++)
		start[len_class(r[i].len)]++;
	for (size_t k = 0, sum = 0; k < 64; k++) {
		size_t c = start[k];
		start[k] = sum;
		sum += c;
	}
	for (size_t i = 0; i < n; i++)
		order[start[len_class(r[i].len)]++] = (uint32_t)i;
}

int lmt_batchenc_run_side(struct lmt_batchenc *e, const struct lmt_docbatch *b, void (*side)(void *ctx),
			  void *side_ctx, struct lmt_err *err)
{
	const struct lmt_batchenc_opts *o = &e->o;
	size_t nd = b->n;
	struct lmt_batchenc_rec *recs;
	struct encode_job J = { e, b, side, side_ctx, 0 };
	int nomem = cut_parts(e, b) || e->nrec > UINT32_MAX || LMT_GROW(e->order, e->ocap, e->nrec);
	if (!nomem) {
		order_parts(e->order, e->recs, e->nrec);
		lmt_workpool_for(e->pool, encode_part, &J, e->nrec + (side != NULL));
	} else if (side) {
		side(side_ctx); /* it runs whatever happens, as the caller counts on */
	}
	/* e->all and e->ntok are the previous batch's, which side may read, up to here */
	if (nomem || LMT_GROW(e->ntok, e->ncap, nd))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	recs = e->recs;
	if (J.failed || settle(e, b))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory encoding");
	/* gather in document order, GATHER_PARTS parts an item */
	size_t total = 0;
	for (size_t i = 0; i < nd; i++)
		e->ntok[i] = 0;
	for (size_t i = 0; i < e->nrec; i++) {
		size_t n = recs[i].n;
		if (recs[i].guess)
			n += e->guess[recs[i].guess - 1].nfix - e->guess[recs[i].guess - 1].drop;
		e->ntok[recs[i].doc] += n;
		recs[i].at = total;
		total += n;
	}
	if (LMT_GROW(e->all.v, e->all.cap, total))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	e->all.n = total;
	lmt_workpool_for(e->pool, gather_parts, &J, (e->nrec + GATHER_PARTS - 1) / GATHER_PARTS);
	for (int i = 0; i < o->threads; i++)
		e->vec[i].v.n = 0;
	return 0;
}

int lmt_batchenc_run(struct lmt_batchenc *e, const struct lmt_docbatch *b, struct lmt_err *err)
{
	return lmt_batchenc_run_side(e, b, NULL, NULL, err);
}

void lmt_batchenc_release(struct lmt_batchenc *e)
{
	lmt_workpool_free(e->pool);
	for (int i = 0; e->st && i < e->o.threads; i++)
		lmt_tok_state_free(e->st[i]);
	for (int i = 0; e->vec && i < e->o.threads; i++)
		free(e->vec[i].v.v);
	free(e->st);
	free(e->vec);
	free(e->recs);
	free(e->guess);
	free(e->marks);
	free(e->fix.v);
	free(e->order);
	free(e->ntok);
	free(e->all.v);
	memset(e, 0, sizeof *e);
}
