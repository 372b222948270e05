/*
 * batchenc.c: parallel, ordered batch encoding (batchenc.h). OpenMP's dynamic
 * schedule in chunks of 16 documents: their lengths vary by orders of magnitude.
 */
#include "data/batchenc.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

/* where a document's tokens are: thread tid's vector from start, n of them */
struct lmt_batchenc_rec {
	int tid;
	size_t start, n;
};

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
	for (int i = 0; i < nt; i++)
		if (!(e->st[i] = lmt_tok_state_new(tok))) {
			lmt_batchenc_release(e);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
	return 0;
}

int lmt_batchenc_run(struct lmt_batchenc *e, const struct lmt_docbatch *b, struct lmt_err *err)
{
	const struct lmt_batchenc_opts *o = &e->o;
	int nd = (int)b->n, failed = 0;
	struct lmt_batchenc_rec *recs;
	if (LMT_GROW(e->recs, e->rcap, (size_t)nd) || LMT_GROW(e->ntok, e->ncap, (size_t)nd))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	recs = e->recs;
#pragma omp parallel for num_threads(o->threads) schedule(dynamic, 1) reduction(| : failed)
	for (int i = 0; i < nd; i++) {
		int tid = omp_get_thread_num();
		struct lmt_u32vec *v = &e->vec[tid].v;
		size_t start = v->n;
		if (LMT_GROW(v->v, v->cap, v->n + 2)) {
			failed = 1;
			continue;
		}
		if (o->bos != LMT_NO_TOKEN)
			v->v[v->n++] = o->bos;
		if (o->eos_first)
			v->v[v->n++] = o->eos;
		failed |= lmt_tok_encode(e->tok, e->st[tid], b->docs[i].text, b->docs[i].len, o->allow_special, v) != 0;
		if (o->eos != LMT_NO_TOKEN && !o->eos_first) {
			if (LMT_GROW(v->v, v->cap, v->n + 1))
				failed = 1;
			else
				v->v[v->n++] = o->eos;
		}
		recs[i] = (struct lmt_batchenc_rec){ tid, start, v->n - start };
	}
	if (failed)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory encoding");
	e->all.n = 0;
	for (int i = 0; i < nd; i++) {
		if (LMT_GROW(e->all.v, e->all.cap, e->all.n + recs[i].n))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		memcpy(e->all.v + e->all.n, e->vec[recs[i].tid].v.v + recs[i].start, recs[i].n * sizeof *e->all.v);
		e->all.n += recs[i].n;
		e->ntok[i] = recs[i].n;
	}
	for (int i = 0; i < o->threads; i++)
		e->vec[i].v.n = 0;
	return 0;
}

void lmt_batchenc_release(struct lmt_batchenc *e)
{
	for (int i = 0; e->st && i < e->o.threads; i++)
		lmt_tok_state_free(e->st[i]);
	for (int i = 0; e->vec && i < e->o.threads; i++)
		free(e->vec[i].v.v);
	free(e->st);
	free(e->vec);
	free(e->recs);
	free(e->ntok);
	free(e->all.v);
	memset(e, 0, sizeof *e);
}
