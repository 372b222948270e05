/*
 * evalrun.c: one checkpoint's scoring, figures, floor and memorization probe over a
 * document set (see evalrun.h). The arithmetic is evaluate.c's; this file decides
 * which documents go into which figure, and with which bootstrap stream.
 */
#include "model/evalrun.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"

static int oom(struct lmt_err *err)
{
	return lmt_err_set(err, LMT_ENOMEM, "out of memory");
}

/* ---- per-document results ---- */

int lmt_eval_acc_init(struct lmt_eval_acc *a, const struct lmt_eval_docset *s, struct lmt_err *err)
{
	size_t n = s->n ? s->n : 1;
	memset(a, 0, sizeof *a);
	a->nll = calloc(n, sizeof *a->nll);
	a->ntok = calloc(n, sizeof *a->ntok);
	a->bytes = calloc(n, sizeof *a->bytes);
	a->words = calloc(n, sizeof *a->words);
	a->idx = calloc(n, sizeof *a->idx);
	if (!a->nll || !a->ntok || !a->bytes || !a->words || !a->idx) {
		lmt_eval_acc_release(a);
		return oom(err);
	}
	for (size_t i = 0; i < s->n; i++) {
		a->bytes[i] = s->d[i].bytes;
		a->words[i] = s->d[i].words;
	}
	return 0;
}

void lmt_eval_acc_release(struct lmt_eval_acc *a)
{
	free(a->nll), free(a->ntok), free(a->bytes), free(a->words), free(a->idx);
	memset(a, 0, sizeof *a);
}

int lmt_eval_acc_score(struct lmt_eval_acc *a, struct lmt_gpt *g, const struct lmt_eval_docset *s, int context,
		       int stride, int rows, void (*progress)(void *ctx, uint64_t done, uint64_t total),
		       void *progress_ctx, struct lmt_err *err)
{
	struct lmt_eval_doc *ed = calloc(s->n ? s->n : 1, sizeof *ed);
	if (!ed)
		return oom(err);
	for (size_t i = 0; i < s->n; i++) {
		ed[i].tok = s->tok + s->d[i].off;
		ed[i].n = s->d[i].n;
	}
	struct lmt_eval_opts eo = { context, stride, s->ctx, rows, progress, progress_ctx };
	double t0 = lmt_now();
	int rc = lmt_eval_score(g, &eo, ed, s->n, &a->cnt, err);
	if (rc) {
		free(ed);
		return rc;
	}
	a->seconds = lmt_now() - t0;
	a->total_seconds += a->seconds;
	a->tokens += a->cnt.scored;
	a->positions += a->cnt.positions;
	a->windows += a->cnt.windows;
	/* documents with a scored token (a one-token document without EOS has none) */
	a->n = 0;
	for (size_t i = 0; i < s->n; i++) {
		a->nll[i] = ed[i].nll;
		a->ntok[i] = ed[i].scored;
		if (ed[i].scored)
			a->idx[a->n++] = i;
	}
	free(ed);
	return 0;
}

/* ---- figures ---- */

void lmt_eval_groups_free(struct lmt_eval_group *groups, size_t n)
{
	for (size_t i = 0; groups && i < n; i++)
		free(groups[i].key);
	free(groups);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static int group_add(const struct lmt_eval_acc *a, const struct lmt_eval_docset *s, struct lmt_eval_group *g,
		     const char *scope, const char *key, const size_t *idx, size_t n, int resamples, double level,
		     uint64_t seed, struct lmt_err *err)
{
	char sk[600];
	snprintf(sk, sizeof sk, "%s:%s", scope, key ? key : "");
	uint64_t stream = lmt_hash_bytes(sk, strlen(sk), 0x626f6f74ULL);
	g->scope = scope;
	if (key && !(g->key = strdup(key)))
		return oom(err);
	return lmt_ppl_compute(a->nll, a->ntok, s->has_bytes ? a->bytes : NULL, s->has_words ? a->words : NULL, idx, n,
			       resamples, level, seed, stream, &g->ppl, err);
}

int lmt_eval_acc_groups(const struct lmt_eval_acc *a, const struct lmt_eval_docset *s, const uint64_t *edges,
			int nedges, int resamples, double level, uint64_t seed, struct lmt_eval_group **groups,
			size_t *ngroups, struct lmt_err *err)
{
	const size_t n = a->n;
	*groups = NULL;
	*ngroups = 0;
	if (!n)
		return lmt_err_set(err, LMT_EINVAL, "no document has a token to score");
	size_t cap = 1 + (s->has_sources ? s->nsources : 0) + (size_t)nedges + 1, k = 0;
	struct lmt_eval_group *g = calloc(cap, sizeof *g);
	size_t *sub = malloc(n * sizeof *sub);
	int rc = 0;
	if (!g || !sub) {
		rc = oom(err);
		goto out;
	}
	if ((rc = group_add(a, s, &g[k++], "overall", NULL, a->idx, n, resamples, level, seed, err)))
		goto out;
	/* per source, in source order */
	for (uint32_t src = 0; s->has_sources && src < s->nsources; src++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (s->d[a->idx[i]].source == src)
				sub[m++] = a->idx[i];
		if (m && (rc = group_add(a, s, &g[k++], "source", s->sources[src], sub, m, resamples, level, seed, err)))
			goto out;
	}
	/* per length bucket: [1, e0), [e0, e1), ..., [e_last, inf) in document tokens */
	for (int b = 0; b <= nedges; b++) {
		uint64_t lo = b ? edges[b - 1] : 1, hi = b < nedges ? edges[b] : 0;
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t len = s->d[a->idx[i]].n;
			if (len >= lo && (!hi || len < hi))
				sub[m++] = a->idx[i];
		}
		if (!m)
			continue;
		char key[64];
		if (hi)
			snprintf(key, sizeof key, "%llu-%llu tokens", (unsigned long long)lo, (unsigned long long)hi - 1);
		else
			snprintf(key, sizeof key, "%llu+ tokens", (unsigned long long)lo);
		qsort(sub, m, sizeof *sub, cmp_size);
		g[k].min_tokens = lo;
		g[k].max_tokens = hi ? hi - 1 : 0;
		if ((rc = group_add(a, s, &g[k++], "length", key, sub, m, resamples, level, seed, err)))
			goto out;
	}
out:
	free(sub);
	if (rc) {
		lmt_eval_groups_free(g, cap);
		return rc;
	}
	*groups = g;
	*ngroups = k;
	return 0;
}

int lmt_eval_floor_compute(const struct lmt_eval_docset *s, int floor_given, double floor_bpb,
			   const struct lmt_ppl *all, struct lmt_eval_floor *f)
{
	double floor_nll;
	if (floor_given) {
		if (!s->has_bytes)
			return 0;
		floor_nll = floor_bpb * M_LN2 * (double)all->bytes;
	} else if (s->floor_kind) {
		floor_nll = 0;
		for (size_t i = 0; i < s->n; i++)
			floor_nll -= s->floor_kind == LMT_EVAL_FLOOR_FIELD ? s->d[i].field_lp : s->d[i].gen_lp;
	} else {
		return 0;
	}
	double fbpb = s->has_bytes && all->bytes ? floor_nll / ((double)all->bytes * M_LN2) : NAN;
	f->nll = floor_nll;
	f->bits_per_byte = fbpb;
	f->nats_per_token = floor_nll / (double)all->tokens;
	f->gap_bits_per_byte = all->v[LMT_PPL_BPB] - fbpb;
	f->gap_nats_per_token = all->v[LMT_PPL_LOSS] - floor_nll / (double)all->tokens;
	return 1;
}

/* ---- memorization ---- */

int lmt_eval_memset_prepare(struct lmt_eval_memset *m, struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x,
			    int split, int prefix, int cont, uint64_t ndocs, uint64_t seed, struct lmt_err *err)
{
	struct lmt_split_doc *sd;
	size_t n;
	memset(m, 0, sizeof *m);
	m->split = split;
	int rc = lmt_split_docs(ds, split, NULL, 0, 0, 0, 0, &sd, &n, NULL, err);
	if (rc)
		return rc;
	uint64_t *el = malloc((n ? n : 1) * sizeof *el);
	if (!el) {
		free(sd);
		return oom(err);
	}
	size_t ne = 0;
	for (size_t i = 0; i < n; i++)
		if (sd[i].n >= (uint64_t)(prefix + cont) && !(sd[i].at_tail && x->tail_dropped[split]))
			el[ne++] = sd[i].doc;
	free(sd);
	m->eligible = ne;
	/* a seeded sample without replacement: the first k of a Fisher-Yates shuffle */
	struct lmt_rng r;
	lmt_rng_seed(&r, seed, 0x6d656d00ULL + (uint64_t)split);
	size_t k = (size_t)LMT_MIN((uint64_t)ne, ndocs);
	for (size_t i = 0; i < k; i++) {
		size_t j = i + (size_t)lmt_rng_below(&r, ne - i);
		uint64_t t = el[i];
		el[i] = el[j];
		el[j] = t;
	}
	/* in stream order, as the split holds them */
	for (size_t i = 1; i < k; i++)
		for (size_t j = i; j > 0 && el[j - 1] > el[j]; j--) {
			uint64_t t = el[j];
			el[j] = el[j - 1];
			el[j - 1] = t;
		}
	if (k) {
		if ((rc = lmt_split_docs(ds, split, el, k, 1, 0, 0, &sd, &n, &m->tok, err)))
			goto out;
		if (!(m->d = calloc(n ? n : 1, sizeof *m->d))) {
			free(sd);
			rc = oom(err);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			m->d[i].tok = m->tok + sd[i].off;
			m->d[i].n = sd[i].n;
		}
		m->n = n;
		free(sd);
	}
out:
	free(el);
	return rc;
}

void lmt_eval_memset_release(struct lmt_eval_memset *m)
{
	free(m->d);
	free(m->tok);
	m->d = NULL;
	m->tok = NULL;
	m->n = 0;
}

int lmt_eval_memset_probe(const struct lmt_eval_memset *m, struct lmt_gpt *g, uint32_t ctx_token, int prefix,
			  int cont, int rows, double level, uint64_t *exact, double *lo, double *hi,
			  struct lmt_err *err)
{
	*exact = 0;
	*lo = *hi = NAN;
	if (!m->n)
		return 0;
	uint8_t *hit = malloc(m->n);
	if (!hit)
		return oom(err);
	int rc = lmt_eval_memorized(g, ctx_token, m->d, m->n, prefix, cont, rows, hit, err);
	if (!rc) {
		for (size_t i = 0; i < m->n; i++)
			*exact += hit[i];
		lmt_wilson(*exact, m->n, level, lo, hi);
	}
	free(hit);
	return rc;
}

/* ---- samples ---- */

int lmt_eval_prompt_ids(const struct lmt_tokenizer *tok, uint32_t ctx_token, const char *text, int32_t **ids,
			int *np, struct lmt_err *err)
{
	int32_t *p = malloc(sizeof *p);
	int n = 0;
	if (!p)
		return oom(err);
	if (ctx_token != LMT_EVAL_NO_CTX)
		p[n++] = (int32_t)ctx_token;
	if (text) {
		struct lmt_tok_state *ts = lmt_tok_state_new(tok);
		struct lmt_u32vec v = { 0 };
		int32_t *q;
		if (!ts || lmt_tok_encode(tok, ts, text, strlen(text), 0, &v) ||
		    !(q = realloc(p, ((size_t)n + v.n + 1) * sizeof *p))) {
			lmt_tok_state_free(ts);
			free(v.v);
			free(p);
			return oom(err);
		}
		lmt_tok_state_free(ts);
		p = q;
		for (size_t i = 0; i < v.n; i++)
			p[n++] = (int32_t)v.v[i];
		free(v.v);
	}
	if (n == 0)
		p[n++] = 0;
	*ids = p;
	*np = n;
	return 0;
}
