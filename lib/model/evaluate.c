/*
 * evaluate.c: rolling-window scoring, bootstrap figures, split documents and the
 * memorization probe (see evaluate.h).
 */
#include "model/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"

/* ---- rolling windows ---- */

size_t lmt_eval_windows(uint64_t m, int context, int stride, uint64_t doc, struct lmt_window *out)
{
	if (m < 2 || context < 1 || stride < 1)
		return 0;
	uint64_t C = (uint64_t)context, S = (uint64_t)LMT_MIN(stride, context);
	/* e: the last target scored so far (targets are F[1 .. m - 1]) */
	uint64_t e = LMT_MIN(C, m - 1);
	size_t k = 0;
	if (out)
		out[k] = (struct lmt_window){ doc, 0, (uint32_t)e, 0 };
	k++;
	while (e < m - 1) {
		uint64_t e2 = LMT_MIN(e + S, m - 1), start = e2 - C;
		if (out)
			out[k] = (struct lmt_window){ doc, start, (uint32_t)C, (uint32_t)(e - start) };
		k++;
		e = e2;
	}
	return k;
}

/* ---- scoring ---- */

static int cmp_window(const void *a, const void *b)
{
	const struct lmt_window *x = a, *y = b;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	if (x->doc != y->doc)
		return x->doc < y->doc ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* F[i] of a document framed by ctx */
static inline uint32_t framed(const struct lmt_eval_doc *d, uint32_t ctx, uint64_t i)
{
	if (ctx == LMT_EVAL_NO_CTX)
		return d->tok[i];
	return i == 0 ? ctx : d->tok[i - 1];
}

static int need_acts(struct lmt_gpt *g, int rows, int T, struct lmt_err *err)
{
	if (g->acts_mem && g->acts_N >= (size_t)rows * (size_t)T)
		return 0;
	return lmt_gpt_alloc_acts(g, rows, T, err);
}

int lmt_eval_score(struct lmt_gpt *g, const struct lmt_eval_opts *o, struct lmt_eval_doc *docs, size_t n,
		   struct lmt_eval_count *cnt, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	int C = o->context, S = o->stride, rc;
	memset(cnt, 0, sizeof *cnt);
	if (C < 1 || C > g->cfg.max_T || S < 1 || S > C || o->rows < 1)
		return lmt_err_set(err, LMT_EINVAL, "context %d (model %d), stride %d, rows %d: need 1 <= stride <= "
				   "context <= the model's", C, g->cfg.max_T, S, o->rows);
	int c = o->ctx_token != LMT_EVAL_NO_CTX;
	size_t nw = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		docs[i].nll = 0;
		docs[i].scored = 0;
		nw += lmt_eval_windows(docs[i].n + c, C, S, i, NULL);
		total += docs[i].n + c > 1 ? docs[i].n + c - 1 : 0;
	}
	if ((rc = need_acts(g, o->rows, C, err)))
		return rc;
	size_t N = g->acts_N;
	struct lmt_window *w = malloc((nw ? nw : 1) * sizeof *w);
	int32_t *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
	float *loss = malloc(N * sizeof *loss);
	if (!w || !tok || !tgt || !loss) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory for %zu windows", nw);
		goto out;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += lmt_eval_windows(docs[i].n + c, C, S, i, w + k);
	qsort(w, nw, sizeof *w, cmp_window);
	for (size_t at = 0; at < nw;) {
		int T = (int)w[at].len;
		size_t rows = LMT_MIN(N / (size_t)T, nw - at);
		if ((rc = lmt_gpt_reshape_acts(g, (int)rows, T, err)))
			goto out;
		for (size_t r = 0; r < rows; r++) {
			const struct lmt_window *x = &w[at + r];
			const struct lmt_eval_doc *d = &docs[x->doc];
			for (int p = 0; p < T; p++) {
				size_t i = r * (size_t)T + (size_t)p;
				if ((uint32_t)p < x->len) {
					tok[i] = (int32_t)framed(d, o->ctx_token, x->start + (uint64_t)p);
					tgt[i] = (uint32_t)p >= x->first ? (int32_t)framed(d, o->ctx_token, x->start + (uint64_t)p + 1)
									 : -1;
				} else {
					tok[i] = 0;
					tgt[i] = -1;
				}
			}
		}
		size_t NB = rows * (size_t)T;
		be->to_device(be, g->tok, tok, NB * sizeof *tok);
		be->to_device(be, g->tgt, tgt, NB * sizeof *tgt);
		double ls;
		if ((rc = lmt_gpt_eval(g, 0, &ls))) {
			lmt_err_set(err, rc, "forward pass failed");
			goto out;
		}
		be->to_host(be, loss, g->a.losses, NB * sizeof *loss);
		for (size_t r = 0; r < rows; r++) {
			const struct lmt_window *x = &w[at + r];
			struct lmt_eval_doc *d = &docs[x->doc];
			double s = 0;
			for (uint32_t p = x->first; p < x->len; p++)
				s += loss[r * (size_t)T + p];
			d->nll += s;
			d->scored += x->len - x->first;
			cnt->scored += x->len - x->first;
		}
		cnt->positions += NB;
		cnt->passes++;
		at += rows;
		if (o->progress)
			o->progress(o->progress_ctx, cnt->scored, total);
	}
	cnt->windows = nw;
out:
	free(w);
	free(tok);
	free(tgt);
	free(loss);
	return rc;
}

/* ---- figures ---- */

static void figures(double nll, uint64_t tokens, uint64_t bytes, uint64_t words, int has_bytes, int has_words,
		    double *v)
{
	v[LMT_PPL_LOSS] = tokens ? nll / (double)tokens : NAN;
	v[LMT_PPL_TOKEN] = exp(v[LMT_PPL_LOSS]);
	v[LMT_PPL_BPB] = has_bytes && bytes ? nll / ((double)bytes * M_LN2) : NAN;
	v[LMT_PPL_BYTE] = has_bytes && bytes ? exp(nll / (double)bytes) : NAN;
	v[LMT_PPL_WORD] = has_words && words ? exp(nll / (double)words) : NAN;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* quantile q of sorted x[0..n) by linear interpolation between order statistics */
static double quantile(const double *x, size_t n, double q)
{
	if (!n)
		return NAN;
	double h = (double)(n - 1) * q;
	size_t lo = (size_t)floor(h);
	if (lo + 1 >= n)
		return x[n - 1];
	return x[lo] + (h - (double)lo) * (x[lo + 1] - x[lo]);
}

int lmt_ppl_compute(const double *nll, const uint64_t *tokens, const uint64_t *bytes, const uint64_t *words,
		    const size_t *idx, size_t n, int resamples, double level, uint64_t seed, uint64_t stream,
		    struct lmt_ppl *out, struct lmt_err *err)
{
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < n; i++) {
		size_t d = idx[i];
		out->nll += nll[d];
		out->tokens += tokens[d];
		out->bytes += bytes ? bytes[d] : 0;
		out->words += words ? words[d] : 0;
	}
	out->docs = n;
	figures(out->nll, out->tokens, out->bytes, out->words, bytes != NULL, words != NULL, out->v);
	for (int f = 0; f < LMT_PPL_N; f++)
		out->lo[f] = out->hi[f] = NAN;
	if (resamples <= 0 || n == 0)
		return 0;
	/* the three ratios; the perplexities are monotone in them, so their interval
	 * ends are the transformed ends */
	double *loss = malloc((size_t)resamples * sizeof *loss), *bpb = malloc((size_t)resamples * sizeof *bpb),
	       *wpl = malloc((size_t)resamples * sizeof *wpl);
	if (!loss || !bpb || !wpl) {
		free(loss), free(bpb), free(wpl);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for %d resamples", resamples);
	}
	struct lmt_rng r;
	lmt_rng_seed(&r, seed, stream);
	size_t nl = 0, nb = 0, nwd = 0;
	for (int k = 0; k < resamples; k++) {
		double s = 0;
		uint64_t t = 0, b = 0, wd = 0;
		for (size_t i = 0; i < n; i++) {
			size_t d = idx[lmt_rng_below(&r, n)];
			s += nll[d];
			t += tokens[d];
			b += bytes ? bytes[d] : 0;
			wd += words ? words[d] : 0;
		}
		if (t)
			loss[nl++] = s / (double)t;
		if (b)
			bpb[nb++] = s / ((double)b * M_LN2);
		if (wd)
			wpl[nwd++] = s / (double)wd;
	}
	qsort(loss, nl, sizeof *loss, cmp_double);
	qsort(bpb, nb, sizeof *bpb, cmp_double);
	qsort(wpl, nwd, sizeof *wpl, cmp_double);
	double qa = (1 - level) / 2, qb = (1 + level) / 2;
	if (nl) {
		out->lo[LMT_PPL_LOSS] = quantile(loss, nl, qa);
		out->hi[LMT_PPL_LOSS] = quantile(loss, nl, qb);
		out->lo[LMT_PPL_TOKEN] = exp(out->lo[LMT_PPL_LOSS]);
		out->hi[LMT_PPL_TOKEN] = exp(out->hi[LMT_PPL_LOSS]);
	}
	if (bytes && nb) {
		out->lo[LMT_PPL_BPB] = quantile(bpb, nb, qa);
		out->hi[LMT_PPL_BPB] = quantile(bpb, nb, qb);
		out->lo[LMT_PPL_BYTE] = exp2(out->lo[LMT_PPL_BPB]);
		out->hi[LMT_PPL_BYTE] = exp2(out->hi[LMT_PPL_BPB]);
	}
	if (words && nwd) {
		out->lo[LMT_PPL_WORD] = exp(quantile(wpl, nwd, qa));
		out->hi[LMT_PPL_WORD] = exp(quantile(wpl, nwd, qb));
	}
	free(loss);
	free(bpb);
	free(wpl);
	return 0;
}

double lmt_normal_z(double level)
{
	/* bisection on P(|Z| <= z) = erf(z / sqrt 2) */
	double lo = 0, hi = 40;
	for (int i = 0; i < 200; i++) {
		double mid = (lo + hi) / 2;
		if (erf(mid / M_SQRT2) < level)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

void lmt_wilson(uint64_t k, uint64_t n, double level, double *lo, double *hi)
{
	/* Wilson (1927): (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n) */
	double z = lmt_normal_z(level), nn = (double)n, p = (double)k / nn, z2 = z * z;
	double c = p + z2 / (2 * nn), h = z * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)), den = 1 + z2 / nn;
	*lo = fmax(0, (c - h) / den);
	*hi = fmin(1, (c + h) / den);
}

uint64_t lmt_count_words(const char *s, size_t n)
{
	uint64_t w = 0;
	int in = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		int space = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
		if (!space && !in)
			w++;
		in = !space;
	}
	return w;
}

/* ---- documents of a split ---- */

int lmt_split_docs(struct lmt_dataset *d, int split, const uint64_t *want, size_t nwant, int gather,
		   uint64_t max_docs, uint64_t max_tokens, struct lmt_split_doc **docs_out, size_t *n_out,
		   uint32_t **tokens_out, struct lmt_err *err)
{
	struct lmt_split_doc *docs = NULL;
	size_t n = 0, cap = 0, tcap = 0, wi = 0;
	uint32_t *tokens = NULL, *seq = malloc(((size_t)d->seq_len + 1) * sizeof *seq);
	uint64_t ntok = 0;
	struct lmt_segment *segs = NULL;
	uint32_t segcap = 0;
	int rc = 0, stop = 0, have = 0;
	uint64_t cur = 0;
	*docs_out = NULL;
	*n_out = 0;
	if (tokens_out)
		*tokens_out = NULL;
	if (!seq)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	/* the last sequence of the split, to mark a document that may have lost its tail */
	size_t last_shard = SIZE_MAX;
	for (size_t s = 0; s < d->nshards; s++)
		if (d->shards[s].split == split && d->shards[s].seqs)
			last_shard = s;
	for (size_t s = 0; s < d->nshards && !stop; s++) {
		if (d->shards[s].split != split)
			continue;
		const struct lmt_shard *sh;
		if ((rc = lmt_dataset_shard(d, s, &sh, err)))
			goto fail;
		for (uint64_t q = 0; q < sh->info.n_seqs && !stop; q++) {
			uint32_t ns = lmt_shard_segments(sh, q, NULL, 0);
			if (ns > segcap) {
				free(segs);
				segcap = ns;
				if (!(segs = malloc(segcap * sizeof *segs))) {
					rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
					goto fail;
				}
			}
			lmt_shard_segments(sh, q, segs, ns);
			if (gather)
				lmt_shard_tokens(sh, q, seq);
			int last_seq = s == last_shard && q + 1 == sh->info.n_seqs;
			for (uint32_t k = 0; k < ns; k++) {
				const struct lmt_segment *g = &segs[k];
				if (!have || g->doc != cur) {
					if (have && g->doc < cur) {
						rc = lmt_err_set(err, LMT_EFORMAT,
							"'%s': document %llu after document %llu in the %s split: documents are "
							"not in stream order", d->shards[s].path, (unsigned long long)g->doc,
							(unsigned long long)cur, lmt_split_name(split));
						goto fail;
					}
					/* a new document: is it wanted, and is there room for it? */
					have = 1;
					cur = g->doc;
					int take = 1;
					if (want) {
						while (wi < nwant && want[wi] < cur)
							wi++;
						take = wi < nwant && want[wi] == cur;
						if (!take && wi >= nwant) {
							stop = 1;
							break;
						}
					}
					if (take && ((max_docs && n >= max_docs) || (max_tokens && ntok >= max_tokens))) {
						stop = 1;
						break;
					}
					if (take) {
						if (LMT_GROW(docs, cap, n + 1)) {
							rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
							goto fail;
						}
						docs[n++] = (struct lmt_split_doc){ cur, ntok, 0, 0 };
					}
				}
				if (!n || docs[n - 1].doc != cur)
					continue; /* not wanted */
				struct lmt_split_doc *x = &docs[n - 1];
				if (g->start + g->len > d->seq_len + 1) {
					rc = lmt_err_set(err, LMT_EFORMAT, "'%s': sequence %llu: a segment runs past the sequence",
							 d->shards[s].path, (unsigned long long)q);
					goto fail;
				}
				if (gather) {
					if (LMT_GROW(tokens, tcap, ntok + g->len)) {
						rc = lmt_err_set(err, LMT_ENOMEM, "out of memory for the %s split's tokens",
								 lmt_split_name(split));
						goto fail;
					}
					memcpy(tokens + ntok, seq + g->start, (size_t)g->len * sizeof *tokens);
				}
				ntok += g->len;
				x->n += g->len;
				x->at_tail = last_seq && k + 1 == ns && g->start + g->len == d->seq_len + 1;
			}
		}
	}
	free(seq);
	free(segs);
	*docs_out = docs;
	*n_out = n;
	if (tokens_out)
		*tokens_out = tokens;
	else
		free(tokens);
	return 0;
fail:
	free(seq);
	free(segs);
	free(docs);
	free(tokens);
	return rc;
}

/* ---- memorization ---- */

int lmt_eval_memorized(struct lmt_gpt *g, uint32_t ctx_token, const struct lmt_eval_doc *docs, size_t n,
		       int prefix, int cont, int rows, uint8_t *hit, struct lmt_err *err)
{
	struct lmt_backend *be = g->be;
	int c = ctx_token != LMT_EVAL_NO_CTX;
	/* inputs F[0 .. prefix + c + cont - 1); position p predicts F[p + 1]; the
	 * continuation F[prefix + c ..) is predicted at positions prefix + c - 1 .. */
	int T = prefix + c + cont - 1, p0 = prefix + c - 1, V = g->cfg.V, Vp = g->cfg.Vp, rc;
	if (prefix + c < 1 || cont < 1 || T > g->cfg.max_T)
		return lmt_err_set(err, LMT_EINVAL, "prefix %d and continuation %d do not fit the context of %d", prefix,
				   cont, g->cfg.max_T);
	for (size_t i = 0; i < n; i++)
		if (docs[i].n < (uint64_t)(prefix + cont))
			return lmt_err_set(err, LMT_EINVAL, "document %zu has %llu tokens, fewer than %d + %d", i,
					   (unsigned long long)docs[i].n, prefix, cont);
	if ((rc = need_acts(g, rows, T, err)))
		return rc;
	size_t per = g->acts_N / (size_t)T;
	int32_t *tok = malloc(g->acts_N * sizeof *tok), *tgt = malloc(g->acts_N * sizeof *tgt);
	float *row = malloc((size_t)Vp * sizeof *row);
	if (!tok || !tgt || !row) {
		free(tok), free(tgt), free(row);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (size_t at = 0; at < n;) {
		size_t B = LMT_MIN(per, n - at);
		if ((rc = lmt_gpt_reshape_acts(g, (int)B, T, err)))
			break;
		for (size_t b = 0; b < B; b++)
			for (int p = 0; p < T; p++) {
				tok[b * T + p] = (int32_t)framed(&docs[at + b], ctx_token, (uint64_t)p);
				tgt[b * T + p] = -1;
			}
		be->to_device(be, g->tok, tok, B * T * sizeof *tok);
		be->to_device(be, g->tgt, tgt, B * T * sizeof *tgt);
		lmt_gpt_logits(g, 0);
		for (size_t b = 0; b < B; b++) {
			int all = 1;
			for (int p = p0; p < T && all; p++) {
				be->to_host(be, row, g->a.logits + ((size_t)b * T + p) * Vp, (size_t)V * sizeof *row);
				int best = 0;
				for (int j = 1; j < V; j++)
					if (row[j] > row[best])
						best = j;
				all = (uint32_t)best == framed(&docs[at + b], ctx_token, (uint64_t)p + 1);
			}
			hit[at + b] = (uint8_t)all;
		}
		at += B;
	}
	free(tok);
	free(tgt);
	free(row);
	return rc;
}
