/*
 * toktrain.c: the tokenizer training driver of toktrain.h.
 *
 * A reader thread (with more than one thread) selects documents (lmt_batchq
 * applies the selection, so --max-bytes stops the reading itself); the threads of
 * a work pool pre-tokenize and count each batch into tables of their own, merged
 * once at the end, so counting needs no locks. The selection depends only on a
 * document's source name, ordinal and the seed, never on the thread that counts
 * it, so the same inputs always give the same counts and the same tokenizer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomicfile.h"
#include "core/digest.h"
#include "core/util.h"
#include "core/workpool.h"
#include "data/batchenc.h"
#include "data/toktrain.h"

/* what each counting thread owns, a cache line apart (they update it per word) */
struct lmt_toktrain_worker {
	struct lmt_wordcount wc;
	struct lmt_pretok_iter it;
} __attribute__((aligned(64)));

int lmt_toktrain_init(struct lmt_toktrain *t, const struct lmt_toktrain_params *params,
		      struct lmt_err *err)
{
	memset(t, 0, sizeof *t);
	t->p = *params;
	/* an empty one would match everywhere, and counting would not move on */
	int rc = lmt_tok_check_specials(params->specials, params->nspecials, err);
	if (rc)
		return rc;
	const char *regex = params->chars ? LMT_CHARS_PATTERN : params->regex;
	rc = lmt_pretok_init(&t->pt, regex ? "custom" : params->pattern, regex, err);
	if (rc)
		return rc;
	const int nt = params->threads;
	t->W = aligned_alloc(64, (size_t)nt * sizeof *t->W);
	if (!t->W)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	memset(t->W, 0, (size_t)nt * sizeof *t->W);
	const int ns = params->nspecials;
	t->splen = malloc((ns ? (size_t)ns : 1) * sizeof *t->splen);
	if (!t->splen)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int k = 0; k < ns; k++)
		t->splen[k] = (uint32_t)strlen(params->specials[k]);
	if (lmt_specmatch_init(&t->sm, (uint32_t)ns, params->specials, t->splen))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int i = 0; i < nt; i++)
		if (lmt_wordcount_init(&t->W[i].wc) || lmt_pretok_iter_init(&t->W[i].it, &t->pt))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	return 0;
}

void lmt_toktrain_release(struct lmt_toktrain *t)
{
	for (int i = 0; t->W && i < t->p.threads; i++) {
		lmt_wordcount_release(&t->W[i].wc);
		lmt_pretok_iter_release(&t->W[i].it);
	}
	free(t->W);
	lmt_specmatch_release(&t->sm);
	free(t->splen);
	if (t->merged)
		lmt_bpe_result_release(&t->res);
	lmt_pretok_release(&t->pt);
	memset(t, 0, sizeof *t);
}

/* ---- document selection (--max-bytes, --sample) ---- */

struct select {
	const struct lmt_toktrain_params *o;
	struct lmt_corpus *c;
	uint64_t bytes, docs;
};

static int keep_doc(void *ctx, const struct lmt_doc *d)
{
	struct select *s = ctx;
	if (s->o->sample < 1) {
		const char *name = lmt_corpus_source_name(s->c, d->source);
		uint64_t h = lmt_hash_bytes(name, strlen(name), s->o->seed) ^ lmt_mix64(d->ordinal + 1);
		if ((double)(lmt_mix64(h) >> 11) * 0x1.0p-53 >= s->o->sample)
			return 0;
	}
	if (s->o->max_bytes && s->bytes + d->len > s->o->max_bytes)
		return -1;
	s->bytes += d->len;
	s->docs++;
	return 1;
}

/* Ordinary text between occurrences of special token strings (which training
 * skips), found as encoding finds them: the leftmost, the longest of those that
 * start there. */
static int count_doc(const struct lmt_toktrain *tt, struct lmt_toktrain_worker *W, const char *t, size_t n)
{
	size_t pos = 0;
	while (pos < n) {
		size_t best = n;
		uint32_t k = 0;
		int found = lmt_specmatch_next(&tt->sm, t, n, pos, &best, &k);
		int rc = lmt_wordcount_add_text(&W->wc, &W->it, t + pos, best - pos);
		if (rc || !found)
			return rc;
		pos = best + tt->splen[k];
	}
	return 0;
}

/* Text a work item: at least COUNT_CHUNK bytes of documents, so that a batch of a
 * million one-line documents is not a million claims of the pool's two shared
 * counters (with 2 threads their cache lines went back and forth for each), and
 * a long document is cut into parts of about that size (lmt_toktrain_cut), so
 * that the threads share it. */
#define COUNT_CHUNK (32u << 10)

/* a place in a batch: document k, byte off of it; guess: a guessed cut (below) */
struct cutpos {
	size_t k, off;
	int guess;
};

/*
 * Guessed cuts. A custom pattern has no cut rule, so a long document of one (with
 * no special string in it) is cut where a piece probably starts (lmt_pretok_guess),
 * and each item counts its pieces with the whole document as the pattern's text:
 * from its start, as if a piece started there, to the piece that runs over its end.
 * An item that starts at a guess notes where its first GUESS_MARKS pieces end. Once
 * the batch is counted, one thread settles the guesses in order (settle): the item
 * before ends its last piece at pos; until pos is the item's start or one of its
 * marks, it counts the whole's next piece from pos. Where they meet, the pieces
 * agree from there on (lmt_pretok_iter_seek), and the item's pieces before that
 * place are taken away again (counts are sums modulo 2^64; a word left at 0 is
 * dropped once the tables are merged). Past the marks without meeting, all of the
 * item's pieces are taken away and the whole's counted to its end. So the counts
 * are the whole's for any pattern, as in tok-encode (batchenc.c).
 */
#define GUESS_MARKS 64

/* what an item leaves for settle: where its last piece ends in the document of its
 * guessed start (first), and in that of its guessed end (last; an item may run on
 * from one long document into the next), and how many of its first pieces' ends
 * it noted (from a guessed start) */
struct item_res {
	size_t first, last, nmark;
};

/* with q, item 0 reads the next batch and the others count; item i counts the
 * text of the batch from cut[i] to cut[i + 1] (less one with q), in the worker's
 * own table */
struct count_job {
	struct lmt_toktrain *t;
	struct lmt_batchq *q;
	const struct lmt_docbatch *b;
	struct cutpos *cut;
	size_t ncut, capcut;
	struct item_res *res;    /* per item, where the batch has guesses */
	size_t *marks;           /* GUESS_MARKS an item */
	size_t capres;
	int guesses, failed;
};

static void count_item(void *ctx, size_t i, int worker)
{
	struct count_job *J = ctx;
	struct lmt_toktrain_worker *W = &J->t->W[worker];
	if (J->q && i-- == 0) {
		lmt_batchq_fill(J->q);
		return;
	}
	const struct cutpos a = J->cut[i], z = J->cut[i + 1];
	for (size_t k = a.k; k <= z.k && k < J->b->n; k++) {
		const struct lmt_doc *d = &J->b->docs[k];
		size_t lo = k == a.k ? a.off : 0, hi = k == z.k ? z.off : d->len;
		int rc = 0;
		if ((k == a.k && a.guess) || (k == z.k && z.guess)) {
			/* a document of guessed cuts, which holds no special string */
			struct item_res *r = &J->res[i];
			int marks = k == a.k && a.guess;
			size_t end;
			rc = lmt_wordcount_add_from(&W->wc, &W->it, d->text, d->len, lo, hi, 1,
						    marks ? J->marks + i * GUESS_MARKS : NULL, marks ? GUESS_MARKS : 0,
						    marks ? &r->nmark : NULL, &end);
			if (marks)
				r->first = end;
			if (k == z.k)
				r->last = end;
		} else if (hi > lo) {
			rc = count_doc(J->t, W, d->text + lo, hi - lo);
		}
		if (rc) {
			__atomic_store_n(&J->failed, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

/* Settle the batch's guessed cuts in order (see above), counting in worker 0's
 * table (the caller's: the pool is idle). */
static int settle(struct count_job *J)
{
	struct lmt_toktrain_worker *W = &J->t->W[0];
	const uint64_t minus = UINT64_MAX; /* one away */
	size_t pos = 0;
	for (size_t c = 1; c + 1 < J->ncut; c++) {
		const struct cutpos g = J->cut[c];
		if (!g.guess)
			continue;
		const struct lmt_doc *d = &J->b->docs[g.k];
		const struct item_res *r = &J->res[c];
		const size_t *m = J->marks + c * GUESS_MARKS;
		/* the item's text in this document ends at hi, its last piece at end */
		size_t hi = J->cut[c + 1].k == g.k ? J->cut[c + 1].off : d->len, end = r->first, e;
		if (!J->cut[c - 1].guess || J->cut[c - 1].k != g.k)
			pos = J->res[c - 1].last; /* the item before started where a piece does */
		for (size_t j = 0;;) {
			while (j < r->nmark && m[j] < pos)
				j++;
			if (pos == g.off)
				break; /* met at its start: as counted */
			if (j < r->nmark && m[j] == pos && pos < end) {
				/* met at a mark: take its pieces before it away */
				if (lmt_wordcount_add_from(&W->wc, &W->it, d->text, d->len, g.off, pos, minus, NULL, 0,
							   NULL, &e))
					return LMT_ENOMEM;
				break;
			}
			if (pos >= end || j == r->nmark) {
				/* past the item's last piece, or past its marks: all its pieces
				 * away, and the whole's to its end */
				if (lmt_wordcount_add_from(&W->wc, &W->it, d->text, d->len, g.off, hi, minus, NULL, 0, NULL,
							   &e) ||
				    (pos < hi && lmt_wordcount_add_from(&W->wc, &W->it, d->text, d->len, pos, hi, 1, NULL, 0,
									NULL, &pos)))
					return LMT_ENOMEM;
				end = pos;
				break;
			}
			/* one more piece of the whole */
			if (lmt_wordcount_add_from(&W->wc, &W->it, d->text, d->len, pos, pos + 1, 1, NULL, 0, NULL, &pos))
				return LMT_ENOMEM;
		}
		pos = LMT_MAX(pos, end);
	}
	return 0;
}

size_t lmt_toktrain_cut(const struct lmt_toktrain *t, const char *text, size_t len, size_t from)
{
	return lmt_specmatch_cut(&t->sm, &t->pt, text, len, from);
}

static int add_cut(struct count_job *J, size_t k, size_t off, int guess)
{
	if (LMT_GROW(J->cut, J->capcut, J->ncut + 1))
		return LMT_ENOMEM;
	J->cut[J->ncut++] = (struct cutpos){ k, off, guess };
	return 0;
}

/* J->cut for batch b: items of chunk bytes or more, a document cut where
 * lmt_toktrain_cut allows (or guessed) once an item has chunk bytes */
static int cut_batch(struct count_job *J, const struct lmt_docbatch *b)
{
	const size_t chunk = J->t->p.chunk_bytes ? J->t->p.chunk_bytes : COUNT_CHUNK;
	size_t bytes = 0;
	J->ncut = 0;
	J->guesses = 0;
	if (add_cut(J, 0, 0, 0))
		return LMT_ENOMEM;
	for (size_t k = 0; k < b->n; k++) {
		const struct lmt_doc *d = &b->docs[k];
		size_t off = 0;
		int guess = -1; /* not yet asked */
		/* the item fills up within this document, and leaves a part as large */
		while (d->len - off >= 2 * chunk - bytes) {
			if (guess < 0)
				guess = lmt_specmatch_guessed(&J->t->sm, &J->t->pt, d->text, d->len);
			size_t c = guess ? lmt_pretok_guess(d->text, d->len, off + chunk - bytes, chunk)
					 : lmt_toktrain_cut(J->t, d->text, d->len, off + chunk - bytes);
			if (c >= d->len)
				break;
			if (add_cut(J, k, c, guess))
				return LMT_ENOMEM;
			J->guesses |= guess;
			off = c;
			bytes = 0;
		}
		bytes += d->len - off;
		if (bytes >= chunk && k + 1 < b->n) {
			if (add_cut(J, k + 1, 0, 0))
				return LMT_ENOMEM;
			bytes = 0;
		}
	}
	if (add_cut(J, b->n, 0, 0))
		return LMT_ENOMEM;
	if (J->guesses && J->ncut > J->capres) {
		struct item_res *r = realloc(J->res, J->ncut * sizeof *r);
		if (r)
			J->res = r;
		size_t *m = r ? realloc(J->marks, J->ncut * GUESS_MARKS * sizeof *m) : NULL;
		if (!m)
			return LMT_ENOMEM;
		J->marks = m;
		J->capres = J->ncut;
	}
	return 0;
}

int lmt_toktrain_count(struct lmt_toktrain *t, const char *const *inputs, int ninputs,
		       void (*progress)(void *ctx, uint64_t done, uint64_t total), void *ctx,
		       struct lmt_err *err)
{
	struct lmt_corpus *c;
	int rc = lmt_corpus_open(&c, inputs, ninputs, t->p.corpus, err);
	if (rc)
		return rc;
	const int nt = t->p.threads;
	struct lmt_toktrain_worker *W = t->W;
	double t0 = lmt_now();
	struct select sel = { &t->p, c, 0, 0 };
	uint64_t done, total;
	lmt_corpus_progress(c, &done, &total);
	if (progress)
		progress(ctx, 0, total);
	/* the next batch is read (keep_doc applied) as the first task of the pool's
	 * run that counts the current one: with a reader thread of its own, three
	 * threads took turns on two cores, and one descheduled while it held a batch's
	 * last chunk kept the other waiting. -j2 against -j1, best of 6-8 runs: 1.72x
	 * then, 1.81x now, on short documents (reading is a quarter of the work) and on
	 * long ones. With one thread lmt_batchq_get reads, into one slot */
	struct lmt_batchq *q = lmt_batchq_start(c, 16u << 20, 1u << 16, keep_doc, &sel, 0);
	struct lmt_docbatch *bp;
	if (!q) {
		lmt_corpus_close(c);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for the reader");
	}
	struct count_job J = { .t = t, .q = nt > 1 ? q : NULL };
	int purge = 0;
	struct lmt_workpool *pool = lmt_workpool_new(nt);
	while ((rc = lmt_batchq_get(q, &bp, err)) > 0) {
		J.b = bp;
		if (cut_batch(&J, bp)) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory counting words");
			break;
		}
		lmt_workpool_for(pool, count_item, &J, J.ncut - (J.q == NULL));
		if (!J.failed && J.guesses) {
			J.failed = settle(&J) != 0;
			purge = 1;
		}
		if (J.failed) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory counting words");
			break;
		}
		lmt_batchq_put(q, bp);
		lmt_corpus_progress(c, &done, &total);
		if (progress)
			progress(ctx, done, total);
	}
	lmt_batchq_stop(q);
	lmt_corpus_close(c);
	free(J.cut);
	free(J.res);
	free(J.marks);
	if (rc < 0) {
		lmt_workpool_free(pool);
		return rc;
	}
	/* the threads' tables into W[0]'s, by the same threads */
	struct lmt_wordcount *tables = malloc((size_t)nt * sizeof *tables);
	if (!tables) {
		lmt_workpool_free(pool);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory merging word counts");
	}
	for (int i = 0; i < nt; i++)
		tables[i] = W[i].wc;
	rc = lmt_wordcount_merge(tables, nt, pool);
	lmt_workpool_free(pool);
	for (int i = 0; i < nt; i++)
		W[i].wc = tables[i];
	free(tables);
	if (!rc && purge) /* words only guesses counted, taken away again */
		rc = lmt_wordcount_drop_zero(&W[0].wc);
	if (rc)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory merging word counts");
	t->wc = &W[0].wc;
	t->count_seconds = lmt_now() - t0;
	t->docs = sel.docs;
	t->bytes = sel.bytes;
	if (sel.docs == 0)
		return lmt_err_set(err, LMT_EFORMAT, "no documents in the input");
	return 0;
}

int lmt_toktrain_merge(struct lmt_toktrain *t, struct lmt_err *err)
{
	if (t->p.chars)
		return 0;
	struct lmt_bpe_opts bo = { 0 };
	bo.n_tokens = t->p.vocab - (uint32_t)t->p.nspecials;
	bo.max_token_len = t->p.max_token_len;
	bo.min_count = t->p.min_count;
	bo.every = t->p.progress_every;
	bo.progress = t->p.merge_progress;
	bo.ctx = t->p.ctx;
	bo.threads = t->p.threads;
	bo.ties = t->p.ties;
	double t0 = lmt_now();
	int rc = lmt_bpe_train(t->wc, &bo, &t->res, err);
	if (rc)
		return rc;
	t->merged = 1;
	t->merge_seconds = lmt_now() - t0;
	t->merges = t->res.n_merges;
	t->tokens = t->res.n_tokens;
	t->trainer_peak_bytes = t->res.peak_bytes;
	return 0;
}

int lmt_toktrain_finish(struct lmt_toktrain *t, struct lmt_tokenizer *tok, struct lmt_err *err)
{
	const struct lmt_toktrain_params *o = &t->p;
	if (o->chars) {
		double t0 = lmt_now();
		int rc = lmt_chars_to_tokenizer(t->wc, o->vocab - (uint32_t)o->nspecials, o->specials,
						o->nspecials, o->eos, o->bos, o->pad, tok, err);
		if (rc)
			return rc;
		t->merge_seconds = lmt_now() - t0;
		t->merges = 0;
		t->tokens = tok->n_vocab - tok->n_special;
		return 0;
	}
	return lmt_bpe_to_tokenizer(&t->res, o->regex ? "custom" : o->pattern, o->regex, o->specials,
				    o->nspecials, o->eos, o->bos, o->pad, tok, err);
}

void lmt_tok_output_name(const struct lmt_tokenizer *tok, const char *out, char *final, size_t cap)
{
	struct stat st;
	size_t ol = strlen(out);
	char hex[LMT_SHA256_HEX];
	if ((ol && out[ol - 1] == '/') || (stat(out, &st) == 0 && S_ISDIR(st.st_mode)))
		snprintf(final, cap, "%s%stok-%.16s.lmtok", out, ol && out[ol - 1] == '/' ? "" : "/",
			 lmt_sha256_hex(tok->sha256, hex));
	else
		snprintf(final, cap, "%s", out);
}

/* ---- fertility ---- */

static int is_space(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

int lmt_tok_fertility(const struct lmt_tokenizer *tok, struct lmt_corpus *c, int nt,
		      struct lmt_fertility *per_source, size_t nsrc_cap, struct lmt_fertility *all,
		      struct lmt_err *err)
{
	/* the batch encoder: its threads share a long document too */
	struct lmt_docbatch b = { 0 };
	struct lmt_batchenc e;
	struct lmt_batchenc_opts eo = { .bos = LMT_NO_TOKEN, .eos = LMT_NO_TOKEN, .threads = nt };
	int n = lmt_batchenc_init(&e, tok, &eo, err);
	if (n)
		return n;
	while ((n = lmt_corpus_read_batch(c, &b, 16u << 20, 1u << 16, NULL, NULL, err)) > 0) {
		if ((n = lmt_batchenc_run(&e, &b, err)))
			break;
		for (size_t i = 0; i < b.n; i++) {
			uint64_t w = 0;
			const unsigned char *p = (const unsigned char *)b.docs[i].text;
			for (size_t k = 0; k < b.docs[i].len; k++)
				w += !is_space(p[k]) && (k == 0 || is_space(p[k - 1]));
			uint32_t s = b.docs[i].source;
			struct lmt_fertility *f[2] = { s < nsrc_cap ? &per_source[s] : NULL, all };
			for (int k = 0; k < 2; k++) {
				if (!f[k])
					continue;
				f[k]->docs++;
				f[k]->bytes += b.docs[i].len;
				f[k]->words += w;
				f[k]->tokens += e.ntok[i];
			}
		}
	}
	lmt_batchenc_release(&e);
	lmt_docbatch_release(&b);
	return n < 0 ? n : 0;
}
