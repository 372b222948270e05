/*
 * evalrec.c: the JSONL records of an evaluation (see evalrec.h). Unknown figures
 * (no bytes, no words, no bootstrap) are written as null, never left out, so every
 * record of a kind has the same keys.
 */
#include "report/evalrec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#include "core/digest.h"

static void num_or_null(struct lmt_json *j, const char *key, double v)
{
	if (isfinite(v))
		lmt_json_num(j, key, v);
	else
		lmt_json_null(j, key);
}

static void pair(struct lmt_json *j, const char *key, double a, double b)
{
	if (!isfinite(a) || !isfinite(b)) {
		lmt_json_null(j, key);
		return;
	}
	lmt_json_arr(j, key);
	lmt_json_num(j, NULL, a);
	lmt_json_num(j, NULL, b);
	lmt_json_arr_end(j);
}

void lmt_evalrec_ckpt(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci)
{
	lmt_json_str(j, "checkpoint", path);
	lmt_json_u64(j, "update", ci->update);
	lmt_json_u64(j, "tokens_trained", ci->tokens);
}

void lmt_evalrec_config(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
			const struct lmt_evalrec_setup *u, const struct lmt_eval_docset *s)
{
	int C = u->context, S = u->stride;
	char hex[LMT_SHA256_HEX], method[1024];
	lmt_json_begin(j);
	lmt_json_str(j, "event", "eval-config");
	lmt_evalrec_ckpt(j, path, ci);
	lmt_json_obj(j, "model");
	lmt_json_u64(j, "layers", (uint64_t)ci->cfg.L);
	lmt_json_u64(j, "heads", (uint64_t)ci->cfg.NH);
	lmt_json_u64(j, "channels", (uint64_t)ci->cfg.C);
	lmt_json_u64(j, "context", (uint64_t)ci->cfg.max_T);
	lmt_json_u64(j, "vocab", (uint64_t)ci->cfg.V);
	lmt_json_bool(j, "untied", ci->cfg.untied);
	lmt_json_obj_end(j);
	if (u->ntexts) {
		lmt_json_null(j, "data");
		lmt_json_arr(j, "files");
		for (int i = 0; i < u->ntexts; i++)
			lmt_json_str(j, NULL, u->texts[i]);
		lmt_json_arr_end(j);
	} else {
		lmt_json_str(j, "data", u->data_dir);
		lmt_json_str(j, "split", lmt_split_name(u->split));
		lmt_json_bool(j, "training_dataset", u->same_data);
		lmt_json_u64(j, "documents_cut", s->cut);
	}
	lmt_json_str(j, "tokenizer", u->tok_path);
	lmt_json_str(j, "tokenizer_sha256", lmt_sha256_hex(ci->tok_sha, hex));
	lmt_json_u64(j, "documents", s->n);
	uint64_t total = 0;
	for (size_t i = 0; i < s->n; i++)
		total += s->d[i].n;
	lmt_json_u64(j, "tokens", total);
	lmt_json_bool(j, "bytes_known", s->has_bytes);
	if (s->has_bytes)
		lmt_json_str(j, "bytes_from", s->bytes_from);
	else
		lmt_json_str(j, "bytes_unknown", s->bytes_why);
	lmt_json_bool(j, "words_known", s->has_words);
	int n = 0;
	if (!u->ntexts)
		n += snprintf(method + n, sizeof method - n, "documents gathered from the %s split's packed sequences; ",
			      lmt_split_name(u->split));
	n += snprintf(method + n, sizeof method - n,
		      "rolling windows: context %d, stride %d; each token scored once with at least %d tokens of "
		      "history (all of it for a document's first %d)", C, S, C - S + 1, C);
	snprintf(method + n, sizeof method - n, "; %s", s->framing);
	lmt_json_str(j, "method", method);
	lmt_json_u64(j, "context", (uint64_t)C);
	lmt_json_u64(j, "stride", (uint64_t)S);
	if (s->ctx != LMT_EVAL_NO_CTX)
		lmt_json_u64(j, "eos", s->ctx);
	else
		lmt_json_null(j, "eos");
	lmt_json_obj(j, "bootstrap");
	lmt_json_u64(j, "resamples", (uint64_t)u->resamples);
	lmt_json_u64(j, "seed", u->seed);
	lmt_json_num(j, "level", u->level);
	lmt_json_str(j, "unit", "document");
	lmt_json_obj_end(j);
	lmt_json_arr(j, "buckets");
	for (int i = 0; i < u->nedges; i++)
		lmt_json_u64(j, NULL, u->edges[i]);
	lmt_json_arr_end(j);
}

void lmt_evalrec_ppl(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
		     const struct lmt_eval_docset *s, const struct lmt_eval_group *g, const struct lmt_eval_count *cnt)
{
	const struct lmt_ppl *p = &g->ppl;
	lmt_json_begin(j);
	lmt_json_str(j, "event", "ppl");
	lmt_evalrec_ckpt(j, path, ci);
	lmt_json_str(j, "scope", g->scope);
	lmt_json_str(j, "key", g->key);
	if (!strcmp(g->scope, "length")) {
		lmt_json_u64(j, "min_tokens", g->min_tokens);
		if (g->max_tokens)
			lmt_json_u64(j, "max_tokens", g->max_tokens);
		else
			lmt_json_null(j, "max_tokens");
	}
	lmt_json_u64(j, "documents", p->docs);
	lmt_json_u64(j, "tokens", p->tokens);
	if (s->has_bytes)
		lmt_json_u64(j, "bytes", p->bytes);
	else
		lmt_json_null(j, "bytes");
	if (s->has_words)
		lmt_json_u64(j, "words", p->words);
	else
		lmt_json_null(j, "words");
	lmt_json_num(j, "nll", p->nll);
	static const char *const names[LMT_PPL_N] = { "loss", "token_ppl", "bits_per_byte", "byte_ppl", "word_ppl" };
	for (int f = 0; f < LMT_PPL_N; f++) {
		char ck[32];
		num_or_null(j, names[f], p->v[f]);
		snprintf(ck, sizeof ck, "%s_ci", names[f]);
		pair(j, ck, p->lo[f], p->hi[f]);
	}
	if (cnt) {
		lmt_json_u64(j, "windows", cnt->windows);
		lmt_json_u64(j, "forward_positions", cnt->positions);
	}
}

void lmt_evalrec_floor(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
		       const struct lmt_eval_docset *s, const struct lmt_ppl *all, const struct lmt_eval_floor *f)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "floor");
	lmt_evalrec_ckpt(j, path, ci);
	lmt_json_str(j, "scope", "overall");
	lmt_json_u64(j, "documents", all->docs);
	lmt_json_str(j, "source", s->floor_source);
	lmt_json_num(j, "nll", f->nll);
	num_or_null(j, "bits_per_byte", f->bits_per_byte);
	lmt_json_num(j, "nats_per_token", f->nats_per_token);
	num_or_null(j, "gap_bits_per_byte", f->gap_bits_per_byte);
	lmt_json_num(j, "gap_nats_per_token", f->gap_nats_per_token);
}

void lmt_evalrec_memorization(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
			      const struct lmt_eval_memset *m, int prefix, int cont, uint64_t exact, double lo,
			      double hi, uint64_t seed)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "memorization");
	lmt_evalrec_ckpt(j, path, ci);
	lmt_json_str(j, "split", lmt_split_name(m->split));
	lmt_json_u64(j, "documents", m->n);
	lmt_json_u64(j, "eligible", m->eligible);
	lmt_json_u64(j, "prefix", (uint64_t)prefix);
	lmt_json_u64(j, "continuation", (uint64_t)cont);
	lmt_json_u64(j, "exact", exact);
	num_or_null(j, "fraction", m->n ? (double)exact / (double)m->n : NAN);
	pair(j, "fraction_ci", lo, hi);
	lmt_json_str(j, "interval", "wilson");
	lmt_json_u64(j, "seed", seed);
}

void lmt_evalrec_sample(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci, const char *prompt,
			const int32_t *prompt_ids, int np, const int32_t *ids, int n, const struct lmt_tokenizer *tok,
			const struct lmt_evalrec_sampling *how)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "sample");
	lmt_evalrec_ckpt(j, path, ci);
	lmt_json_str(j, "prompt", prompt);
	lmt_json_arr(j, "prompt_ids");
	for (int i = 0; i < np; i++)
		lmt_json_u64(j, NULL, (uint64_t)prompt_ids[i]);
	lmt_json_arr_end(j);
	lmt_json_arr(j, "ids");
	for (int i = 0; i < n; i++)
		lmt_json_u64(j, NULL, (uint64_t)ids[i]);
	lmt_json_arr_end(j);
	uint32_t *u = tok ? malloc(((size_t)n + 1) * sizeof *u) : NULL;
	if (tok && u) {
		for (int i = 0; i < n; i++)
			u[i] = (uint32_t)ids[i];
		size_t need = lmt_tok_decode(tok, u, (size_t)n, 0, NULL, 0);
		uint8_t *t = malloc(need + 1);
		if (t) {
			lmt_tok_decode(tok, u, (size_t)n, 0, t, need);
			lmt_json_strn(j, "text", (const char *)t, need);
		}
		j->out.oom |= !t;
		free(t);
	} else if (tok) {
		j->out.oom = 1;
	} else {
		lmt_json_null(j, "text");
	}
	free(u);
	lmt_json_num(j, "temperature", how->temperature);
	lmt_json_u64(j, "top_k", (uint64_t)how->top_k);
	lmt_json_u64(j, "seed", how->seed);
	lmt_json_str(j, "sampler", "key/value cache");
	lmt_json_num(j, "tokens_per_s", how->tokens_per_s);
}

void lmt_evalrec_summary(struct lmt_json *j, int nck, const struct lmt_eval_docset *s, const struct lmt_eval_acc *a,
			 double wall, int threads)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "summary");
	lmt_json_u64(j, "checkpoints", (uint64_t)nck);
	lmt_json_u64(j, "documents", s->n);
	lmt_json_u64(j, "tokens_scored", a->tokens);
	lmt_json_u64(j, "windows", a->windows);
	lmt_json_u64(j, "forward_positions", a->positions);
	lmt_json_num(j, "scoring_s", a->total_seconds);
	lmt_json_num(j, "tokens_per_s", a->total_seconds > 0 ? a->tokens / a->total_seconds : 0);
	lmt_json_num(j, "wall_s", wall);
	lmt_json_u64(j, "threads", (uint64_t)threads);
	lmt_json_u64(j, "peak_rss", lmt_peak_rss());
	lmt_json_str(j, "status", "done");
}
