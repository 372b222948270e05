/*
 * test-evaluate: held-out scoring (evaluate.h), the key/value-cache sampler
 * (generate.h), and evalppl end to end on a model known in closed form.
 *
 *   - windows: for every document length m < 200, context C and stride S <= C of a
 *     grid, the windows score every target 1..m-1 exactly once, each window holds at
 *     most C positions, and each scored target has all its history when t <= C and
 *     at least C - S + 1 tokens of it otherwise;
 *   - scoring against a reference: a random model (weights of order 1, so every
 *     token of history matters) scores documents through lmt_eval_score, batched,
 *     and each target alone through a one-row forward pass over exactly the history
 *     evaluate.h's rule gives it; per-document sums agree to 1e-5 relative (float
 *     arithmetic in passes of different shapes); the counts exactly;
 *   - closed form: a model whose weights are all zero but the final LayerNorm's
 *     bias (e_0) and column 0 of wte (a_v) predicts softmax(a) whatever the context,
 *     so a document's loss is sum over its targets of logsumexp(a) - a_t. Through
 *     lmt_eval_score for several (context, stride, rows), and through the evalppl
 *     binary on a checkpoint written here (with a tokenizer made here) on text
 *     files: loss, bits per byte (= NLL / (bytes ln 2), the bytes those of the
 *     files), word perplexity and token counts equal the closed form to 1e-6
 *     relative (float log-softmax), per source too; and the loss does not depend on
 *     the stride (1e-9 relative: the same float losses summed in another order);
 *   - the sampler: lmt_generate gives exactly the ids of the recompute sampler (which
 *     recomputes the prefix) for several prompts, seeds, temperatures and top-k,
 *     also past the context; the cache's logits equal a full forward pass's at every
 *     position to 1e-4 absolute (float rounding of one-row against batched GEMMs, on
 *     logits of order 10); and it is at least 5 times faster per token at a context
 *     of 256 (it does about 1/100 of the work);
 *   - memorization: a continuation that is the model's own greedy continuation is
 *     reported reproduced; with its last token changed, not;
 *   - figures: bootstrap intervals contain the estimate, narrow with 100 times more
 *     documents, repeat with the seed; Wilson's interval and z; word counts.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "model/evaluate.h"
#include "core/rng.h"
#include "model/generate.h"
#include "model/model.h"
#include "fixtures.h"
#include "tap.h"
#include "data/tokenizer.h"
#include "ckpt/trainstate.h"
#include "model/trainer.h"
#include "core/util.h"

static char dir[] = "/tmp/lmt-test-evaluate.XXXXXX";
static const char *bin;
static struct lmt_backend be;
static struct lmt_rng rng;

static double unif(double lo, double hi)
{
	return lo + (hi - lo) * ((lmt_rng_next(&rng) >> 11) * 0x1.0p-53);
}

static void *xcalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		fprintf(stderr, "test-evaluate: out of memory\n");
		exit(1);
	}
	return p;
}

static int make_model(struct lmt_gpt *g, int maxT, int V, int L, int NH, int C)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt_config cfg = { maxT, V, lmt_gpt_padded_vocab(V), L, NH, C, 0 };
	if (lmt_gpt_init(g, &cfg, &be, &err)) {
		tap_ok(0, "model: %s", err.msg);
		return -1;
	}
	return 0;
}

/* weights of order 1, as test-model's: every path matters */
static void random_params(struct lmt_gpt *g)
{
	float *h = xcalloc(g->nparams * sizeof *h);
	fixture_params(g, h, 0.5, 0, unif);
	lmt_gpt_scatter(g, g->params, h);
	lmt_gpt_sync_weights(g);
	free(h);
}

/* all zero but lnfb = e_0 and wte[v][0] = a[v]: logits = a, whatever the input */
static float closed_a(int v)
{
	return (float)(((v * 37) % 11) - 5) * 0.5f;
}

static void closed_params(struct lmt_gpt *g)
{
	float *h = xcalloc(g->nparams * sizeof *h);
	size_t C = (size_t)g->cfg.C;
	h[lmt_gpt_tensor(g, "lnfb")->offset] = 1.0f;
	for (int v = 0; v < g->cfg.V; v++)
		h[lmt_gpt_tensor(g, "wte")->offset + (size_t)v * C] = closed_a(v);
	lmt_gpt_scatter(g, g->params, h);
	lmt_gpt_sync_weights(g);
	free(h);
}

static double closed_lse(int V)
{
	double mx = -INFINITY, s = 0;
	for (int v = 0; v < V; v++)
		mx = fmax(mx, closed_a(v));
	for (int v = 0; v < V; v++)
		s += exp(closed_a(v) - mx);
	return mx + log(s);
}

static double rel(double a, double b)
{
	return fabs(a - b) / fmax(fabs(b), 1e-300);
}

/* ---- windows ---- */

static void test_windows(void)
{
	static const int Cs[] = { 1, 2, 3, 5, 8, 16 };
	int bad = 0, cases = 0;
	struct lmt_window w[512];
	uint8_t seen[256];
	for (size_t ci = 0; ci < LMT_ARRAY_SIZE(Cs); ci++)
		for (int S = 1; S <= Cs[ci]; S++)
			for (uint64_t m = 0; m < 200; m++) {
				int C = Cs[ci];
				size_t n = lmt_eval_windows(m, C, S, 7, NULL);
				if (n > LMT_ARRAY_SIZE(w) || lmt_eval_windows(m, C, S, 7, w) != n) {
					bad++;
					continue;
				}
				cases++;
				memset(seen, 0, sizeof seen);
				for (size_t k = 0; k < n; k++) {
					if (w[k].doc != 7 || w[k].len > (uint32_t)C || w[k].first > w[k].len ||
					    w[k].start + w[k].len > m - 1)
						bad++;
					for (uint32_t p = w[k].first; p < w[k].len; p++) {
						uint64_t t = w[k].start + p + 1, hist = p + 1;
						seen[t]++;
						if (t <= (uint64_t)C ? hist != t : hist < (uint64_t)(C - S + 1))
							bad++;
					}
				}
				for (uint64_t t = 1; t < m; t++)
					bad += seen[t] != 1;
				bad += m < 2 ? n != 0 : seen[0] != 0;
			}
	tap_ok(bad == 0, "windows: %d (length, context, stride) cases score each target exactly once, with "
	       "history >= min(t, C - S + 1) (%d violations)", cases, bad);
}

/* ---- scoring against one-target forward passes ---- */

static void random_docs(struct lmt_eval_doc *d, uint32_t **store, int n, int V, int maxlen)
{
	for (int i = 0; i < n; i++) {
		int len = 1 + (int)lmt_rng_below(&rng, (uint64_t)maxlen);
		store[i] = xcalloc((size_t)len * sizeof **store);
		for (int k = 0; k < len; k++)
			store[i][k] = (uint32_t)lmt_rng_below(&rng, (uint64_t)V);
		d[i].tok = store[i];
		d[i].n = (uint64_t)len;
	}
}

/* the loss of target t of F (framed by ctx) with the history evaluate.h's rule gives */
static double one_target(struct lmt_gpt *g, const struct lmt_eval_doc *d, uint32_t ctx, uint64_t t, int C, int S)
{
	struct lmt_err err = { 0 };
	int c = ctx != LMT_EVAL_NO_CTX;
	uint64_t m = d->n + c, start = 0;
	if (t > (uint64_t)C) {
		uint64_t e = (uint64_t)C + (uint64_t)S * ((t - (uint64_t)C + (uint64_t)S - 1) / (uint64_t)S);
		if (e > m - 1)
			e = m - 1;
		start = e - (uint64_t)C;
	}
	int T = (int)(t - start);
	int32_t tok[64], tgt[64];
	for (int p = 0; p < T; p++) {
		uint64_t i = start + (uint64_t)p;
		tok[p] = (int32_t)(c ? (i ? d->tok[i - 1] : ctx) : d->tok[i]);
		tgt[p] = -1;
	}
	tgt[T - 1] = (int32_t)(c ? d->tok[t - 1] : d->tok[t]);
	lmt_gpt_reshape_acts(g, 1, T, &err);
	be.to_device(&be, g->tok, tok, (size_t)T * 4);
	be.to_device(&be, g->tgt, tgt, (size_t)T * 4);
	double ls;
	lmt_gpt_eval(g, 0, &ls);
	return ls;
}

static void test_score_reference(void)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt g;
	enum { V = 40, ND = 12 };
	if (make_model(&g, 16, V, 2, 2, 16))
		return;
	random_params(&g);
	struct lmt_eval_doc d[ND];
	uint32_t *store[ND];
	random_docs(d, store, ND, V, 45);
	static const int cs[][3] = { { 16, 16, 4 }, { 16, 5, 2 }, { 8, 1, 3 }, { 6, 6, 1 } };
	for (size_t k = 0; k < LMT_ARRAY_SIZE(cs); k++)
		for (int withctx = 0; withctx < 2; withctx++) {
			int C = cs[k][0], S = cs[k][1];
			uint32_t ctx = withctx ? 3 : LMT_EVAL_NO_CTX;
			struct lmt_eval_opts o = { C, S, ctx, cs[k][2], NULL, NULL };
			struct lmt_eval_count cnt;
			if (lmt_eval_score(&g, &o, d, ND, &cnt, &err)) {
				tap_ok(0, "score (C %d, S %d): %s", C, S, err.msg);
				continue;
			}
			double worst = 0;
			int counts = 1;
			uint64_t total = 0;
			for (int i = 0; i < ND; i++) {
				uint64_t m = d[i].n + (uint64_t)withctx;
				double ref = 0;
				for (uint64_t t = 1; t < m; t++)
					ref += one_target(&g, &d[i], ctx, t, C, S);
				counts &= d[i].scored == (m > 1 ? m - 1 : 0);
				total += d[i].scored;
				if (m > 1)
					worst = fmax(worst, rel(d[i].nll, ref));
			}
			tap_ok(counts && cnt.scored == total && worst < 1e-5,
			       "context %d, stride %d, %s, %d rows a pass: per-document NLL equals one-target passes over the "
			       "rule's history (worst relative difference %.2g), counts exact", C, S,
			       withctx ? "after a context token" : "no context token", cs[k][2], worst);
		}
	for (int i = 0; i < ND; i++)
		free(store[i]);
	lmt_gpt_release(&g);
}

/* ---- closed form, in the library ---- */

static void test_closed_library(void)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt g;
	enum { V = 70, ND = 9 };
	if (make_model(&g, 32, V, 2, 2, 16))
		return;
	closed_params(&g);
	struct lmt_eval_doc d[ND];
	uint32_t *store[ND];
	random_docs(d, store, ND, V, 90);
	double lse = closed_lse(V), first = NAN;
	int ok = 1;
	static const int cs[][3] = { { 32, 16, 8 }, { 32, 1, 2 }, { 7, 3, 5 }, { 4, 4, 1 }, { 1, 1, 3 } };
	for (size_t k = 0; k < LMT_ARRAY_SIZE(cs); k++) {
		struct lmt_eval_opts o = { cs[k][0], cs[k][1], 5, cs[k][2], NULL, NULL };
		struct lmt_eval_count cnt;
		if (lmt_eval_score(&g, &o, d, ND, &cnt, &err)) {
			tap_ok(0, "closed form: %s", err.msg);
			ok = 0;
			break;
		}
		double worst = 0, sum = 0;
		for (int i = 0; i < ND; i++) {
			double want = 0;
			for (uint64_t t = 0; t < d[i].n; t++)
				want += lse - closed_a((int)d[i].tok[t]);
			worst = fmax(worst, rel(d[i].nll, want));
			sum += d[i].nll;
			ok &= d[i].scored == d[i].n;
		}
		ok &= worst < 1e-6;
		if (k == 0)
			first = sum;
		else
			ok &= rel(sum, first) < 1e-9;
		if (worst >= 1e-6)
			tap_diag("context %d stride %d: worst relative error %.3g", cs[k][0], cs[k][1], worst);
	}
	tap_ok(ok, "closed form: each document's NLL is sum(logsumexp(a) - a_t) to 1e-6, for 5 (context, stride, rows), "
	       "and the total does not depend on them (1e-9)");
	for (int i = 0; i < ND; i++)
		free(store[i]);
	lmt_gpt_release(&g);
}

/* ---- closed form, through the evalppl binary ---- */

static int make_tokenizer(const char *path, struct lmt_tokenizer *t)
{
	struct lmt_err err = { 0 };
	lmt_tok_init(t);
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;
		lmt_tok_add_token(t, &c, 1, 0, NULL, &err);
	}
	lmt_tok_add_token(t, "<|endoftext|>", 13, 1, NULL, &err);
	if (lmt_tok_set_pattern(t, "gpt2", NULL, &err) || lmt_tok_set_roles(t, "<|endoftext|>", NULL, NULL, &err) ||
	    lmt_tok_finalize(t, &err) || lmt_tok_save(t, path, &err)) {
		tap_ok(0, "a byte tokenizer: %s", err.msg);
		return -1;
	}
	return 0;
}

/* a checkpoint of g at RUN/ckpt/step-00000007, naming tok_path as its tokenizer */
static int write_ckpt(struct lmt_gpt *g, const char *run, const struct lmt_tokenizer *t, const char *tok_path)
{
	struct lmt_err err = { 0 };
	char hex[LMT_SHA256_HEX], state[2048], p[4096];
	snprintf(p, sizeof p, "%s/ckpt", run);
	mkdir(run, 0755);
	mkdir(p, 0755);
	if (lmt_gpt_alloc_optimizer(g, &err))
		return -1;
	snprintf(state, sizeof state,
		 "{\"update\":7,\"tokens\":12345,\"tokenizer_sha256\":\"%s\",\"dataset_manifest_sha256\":null,"
		 "\"model\":{\"layers\":%d,\"heads\":%d,\"channels\":%d,\"context\":%d,\"vocab\":%d,\"vocab_padded\":%d,"
		 "\"untied\":false},\"config\":{\"data\":{\"dir\":null,\"tokenizer\":\"%s\"}}}",
		 lmt_sha256_hex(t->sha256, hex), g->cfg.L, g->cfg.NH, g->cfg.C, g->cfg.max_T, g->cfg.V, g->cfg.Vp,
		 tok_path);
	struct lmt_ckpt_tensor *ts;
	int n;
	float *host;
	if (lmt_trainstate_tensors(g, &ts, &n, &host, &err))
		return -1;
	struct lmt_ckpt_save sv = { run, 7, 1, ts, n, state };
	struct lmt_ckpt_result r;
	int rc = lmt_ckpt_write(&sv, &r, &err);
	if (rc)
		tap_diag("checkpoint: %s", err.msg);
	free(ts);
	free(host);
	return rc;
}

/* the records of a JSONL file of evalppl's, as a jansson array */
static json_t *records(const char *path)
{
	json_t *a = json_array();
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	while (f && getline(&line, &cap, f) > 0) {
		json_t *r = json_loads(line, 0, NULL);
		if (r)
			json_array_append_new(a, r);
	}
	free(line);
	if (f)
		fclose(f);
	return a;
}

static json_t *find(json_t *recs, const char *event, const char *scope, const char *key)
{
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r) {
		const char *e = json_string_value(json_object_get(r, "event"));
		const char *s = json_string_value(json_object_get(r, "scope"));
		const char *k = json_string_value(json_object_get(r, "key"));
		if (e && !strcmp(e, event) && (!scope || (s && !strcmp(s, scope))) && (!key || (k && !strcmp(k, key))))
			return r;
	}
	return NULL;
}

static double jnum(json_t *r, const char *k)
{
	json_t *x = json_object_get(r, k);
	return json_is_number(x) ? json_number_value(x) : NAN;
}

static void test_closed_binary(void)
{
	char tokp[256], run[256], f1[256], f2[256], out[256], cmd[2048];
	snprintf(tokp, sizeof tokp, "%s/byte.lmtok", dir);
	snprintf(run, sizeof run, "%s/run", dir);
	snprintf(f1, sizeof f1, "%s/one.txt", dir);
	snprintf(f2, sizeof f2, "%s/two.txt", dir);
	snprintf(out, sizeof out, "%s/out.jsonl", dir);
	struct lmt_tokenizer t;
	if (make_tokenizer(tokp, &t))
		return;
	struct lmt_gpt g;
	int V = (int)t.n_vocab;
	if (make_model(&g, 24, V, 1, 2, 8))
		return;
	closed_params(&g);
	if (!tap_ok(write_ckpt(&g, run, &t, tokp) == 0, "a checkpoint with the hand-set weights"))
		return;
	/* two files of documents, one per line; multi-byte UTF-8 in them */
	static const char *const docs1[] = { "the quick brown fox", "jumps over  the lazy dog\tagain",
					     "na\xc3\xafve caf\xc3\xa9 \xe2\x82\xac 42" };
	static const char *const docs2[] = { "a much longer line that needs several windows of twenty-four tokens "
					     "when every byte is a token of its own", "x" };
	FILE *a = fopen(f1, "w"), *b = fopen(f2, "w");
	for (size_t i = 0; i < LMT_ARRAY_SIZE(docs1); i++)
		fprintf(a, "%s\n", docs1[i]);
	for (size_t i = 0; i < LMT_ARRAY_SIZE(docs2); i++)
		fprintf(b, "%s\n", docs2[i]);
	fclose(a);
	fclose(b);
	/* the closed form, per file: each document's bytes (a byte tokenizer: one token
	 * each) then EOS are targets, after an EOS */
	double lse = closed_lse(V), nll[2] = { 0, 0 };
	uint64_t bytes[2] = { 0, 0 }, toks[2] = { 0, 0 }, words[2] = { 0, 0 };
	for (int f = 0; f < 2; f++) {
		const char *const *dd = f ? docs2 : docs1;
		size_t nd = f ? LMT_ARRAY_SIZE(docs2) : LMT_ARRAY_SIZE(docs1);
		for (size_t i = 0; i < nd; i++) {
			size_t n = strlen(dd[i]);
			for (size_t k = 0; k < n; k++)
				nll[f] += lse - closed_a((uint8_t)dd[i][k]);
			nll[f] += lse - closed_a((int)t.eos);
			bytes[f] += n;
			toks[f] += n + 1;
			words[f] += lmt_count_words(dd[i], n);
		}
	}
	double all_nll = nll[0] + nll[1];
	uint64_t all_bytes = bytes[0] + bytes[1], all_tok = toks[0] + toks[1], all_words = words[0] + words[1];
	double loss[3];
	static const int strides[3] = { 12, 1, 24 };
	for (int k = 0; k < 3; k++) {
		snprintf(cmd, sizeof cmd,
			 "%s/evalppl -q -j 1 --text %s --text %s --txt-docs line --stride %d --bootstrap 50 %s/ckpt/step-00000007 "
			 "> %s 2> %s.err", bin, f1, f2, strides[k], run, out, out);
		int rc = system(cmd);
		json_t *recs = records(out), *o = find(recs, "ppl", "overall", NULL);
		if (!tap_ok(rc == 0 && o, "evalppl on the hand-set checkpoint, stride %d (exit %d)", strides[k], rc)) {
			json_decref(recs);
			continue;
		}
		loss[k] = jnum(o, "loss");
		if (k == 0) {
			double l = jnum(o, "loss"), bpb = jnum(o, "bits_per_byte"), wp = jnum(o, "word_ppl");
			double tk = jnum(o, "tokens"), by = jnum(o, "bytes");
			tap_ok(tk == (double)all_tok && by == (double)all_bytes && jnum(o, "words") == (double)all_words &&
			       jnum(o, "documents") == 5, "token, byte, word and document counts: %g %g %g (closed form %llu %llu %llu)",
			       tk, by, jnum(o, "words"), (unsigned long long)all_tok, (unsigned long long)all_bytes,
			       (unsigned long long)all_words);
			tap_ok(rel(l, all_nll / (double)all_tok) < 1e-6, "loss %.12g equals the closed form %.12g (1e-6)", l,
			       all_nll / (double)all_tok);
			tap_ok(rel(bpb, all_nll / ((double)all_bytes * M_LN2)) < 1e-6 &&
			       rel(bpb, l * tk / (by * M_LN2)) < 1e-12,
			       "bits per byte %.12g = NLL / (bytes ln 2) of the closed form, = loss x tokens / (bytes ln 2) "
			       "of its own fields", bpb);
			tap_ok(rel(wp, exp(all_nll / (double)all_words)) < 1e-5 && rel(jnum(o, "token_ppl"), exp(l)) < 1e-12 &&
			       rel(jnum(o, "byte_ppl"), exp2(bpb)) < 1e-12,
			       "word perplexity exp(NLL / words), token and byte perplexities exp(loss) and 2^bpb");
			int ok = 1;
			for (int f = 0; f < 2; f++) {
				json_t *s = find(recs, "ppl", "source", f ? f2 : f1);
				ok &= s && rel(jnum(s, "loss"), nll[f] / (double)toks[f]) < 1e-6 &&
				      jnum(s, "bytes") == (double)bytes[f];
			}
			tap_ok(ok, "per source: each file's loss and bytes are its closed form");
			json_t *cfg = find(recs, "eval-config", NULL, NULL);
			tap_ok(cfg && jnum(cfg, "update") == 7 && jnum(cfg, "tokens_trained") == 12345 &&
			       json_string_value(json_object_get(cfg, "tokenizer")) &&
			       !strcmp(json_string_value(json_object_get(cfg, "tokenizer")), tokp),
			       "eval-config: the update, the tokens trained, the run's tokenizer found from its config");
			json_t *ci = json_object_get(o, "loss_ci");
			tap_ok(json_array_size(ci) == 2 && jnum(o, "loss") >= json_number_value(json_array_get(ci, 0)) &&
			       jnum(o, "loss") <= json_number_value(json_array_get(ci, 1)),
			       "the loss lies in its bootstrap interval");
		}
		json_decref(recs);
	}
	tap_ok(rel(loss[1], loss[0]) < 1e-9 && rel(loss[2], loss[0]) < 1e-9,
	       "a context-independent model: the loss is the same for strides 12, 1 and 24 (%.15g %.15g %.15g)", loss[0],
	       loss[1], loss[2]);
	/* a tokenizer of another vocabulary is refused, naming both */
	char tok2[256];
	snprintf(tok2, sizeof tok2, "%s/other.lmtok", dir);
	struct lmt_tokenizer t2;
	struct lmt_err err = { 0 };
	lmt_tok_init(&t2);
	for (int c = 0; c < 256; c++) {
		uint8_t ch = (uint8_t)c;
		lmt_tok_add_token(&t2, &ch, 1, 0, NULL, &err);
	}
	lmt_tok_set_pattern(&t2, "gpt2", NULL, &err);
	lmt_tok_finalize(&t2, &err);
	lmt_tok_save(&t2, tok2, &err);
	snprintf(cmd, sizeof cmd, "%s/evalppl -q -t %s --text %s %s/ckpt/step-00000007 > %s 2> %s.err", bin, tok2, f1, run,
		 out, out);
	int rc = system(cmd);
	char *msg = NULL;
	size_t mn = 0;
	FILE *e = fopen(strcat(strcpy(cmd, out), ".err"), "r");
	if (e) {
		if (getdelim(&msg, &mn, 0, e) < 0 && msg)
			msg[0] = 0;
		if (msg && strchr(msg, '\n'))
			*strchr(msg, '\n') = 0;
		fclose(e);
	}
	tap_ok(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && msg && strstr(msg, tok2) && strstr(msg, "trained with tokenizer"),
	       "another tokenizer is refused with exit 1, naming it (%s)", msg ? msg : "");
	free(msg);
	lmt_tok_release(&t2);
	lmt_tok_release(&t);
	lmt_gpt_release(&g);
}

/* ---- the sampler ---- */

/* The reference the sampler is checked against: the forward pass recomputed over
 * the whole prefix for every token (once the library's second sampler; now only
 * this test's oracle, so the library has one). */
static int recompute_sample(struct lmt_gpt *g, const int32_t *prompt, int np, int n, double temperature, int top_k,
			    uint64_t seed, int32_t *out, struct lmt_err *err)
{
	struct lmt_backend *gb = g->be;
	int T = g->T, V = g->cfg.V, Vp = g->cfg.Vp;
	size_t N = (size_t)g->B * T;
	int32_t *ctx = malloc(((size_t)np + n + 1) * sizeof *ctx), *tok = calloc(N, 4), *tgt = malloc(N * 4);
	float *row = malloc((size_t)V * sizeof *row);
	int *idx = malloc((size_t)V * sizeof *idx);
	if (!ctx || !tok || !tgt || !row || !idx) {
		free(ctx), free(tok), free(tgt), free(row), free(idx);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	struct lmt_rng r;
	lmt_rng_seed(&r, seed, 0x5a3);
	memcpy(ctx, prompt, (size_t)np * sizeof *ctx);
	int len = np;
	for (size_t i = 0; i < N; i++)
		tgt[i] = -1;
	for (int k = 0; k < n; k++) {
		int start = len > T ? len - T : 0, used = len - start;
		memset(tok, 0, N * 4);
		memcpy(tok, ctx + start, (size_t)used * 4);
		gb->to_device(gb, g->tok, tok, N * 4);
		gb->to_device(gb, g->tgt, tgt, N * 4);
		lmt_gpt_logits(g, 0);
		gb->to_host(gb, row, g->a.logits + (size_t)(used - 1) * Vp, (size_t)V * sizeof *row);
		int next = lmt_pick_token(row, V, temperature, top_k, &r, idx);
		ctx[len++] = next;
		out[k] = next;
	}
	free(ctx), free(tok), free(tgt), free(row), free(idx);
	return 0;
}

static void test_sampler(void)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt g;
	enum { V = 50, T = 24 };
	if (make_model(&g, T, V, 2, 2, 16))
		return;
	random_params(&g);
	/* logits: cache steps against one full forward pass */
	int32_t seq[T];
	for (int i = 0; i < T; i++)
		seq[i] = (int32_t)lmt_rng_below(&rng, V);
	lmt_gpt_alloc_acts(&g, 1, T, &err);
	be.to_device(&be, g.tok, seq, sizeof seq);
	lmt_gpt_logits(&g, 0);
	float *full = xcalloc((size_t)T * g.cfg.Vp * sizeof *full), row[V];
	be.to_host(&be, full, g.a.logits, (size_t)T * g.cfg.Vp * sizeof *full);
	struct lmt_kv kv;
	double worst = 0, mag = 0;
	if (lmt_kv_init(&kv, &g, &err) == 0) {
		lmt_kv_prefill(&kv, seq, 3, row, &err);
		for (int j = 0; j < V; j++)
			worst = fmax(worst, fabs(row[j] - full[2 * g.cfg.Vp + j]));
		for (int p = 3; p < T; p++) {
			lmt_kv_step(&kv, seq[p], row, &err);
			for (int j = 0; j < V; j++) {
				worst = fmax(worst, fabs(row[j] - full[(size_t)p * g.cfg.Vp + j]));
				mag = fmax(mag, fabs(full[(size_t)p * g.cfg.Vp + j]));
			}
		}
		tap_ok(worst < 1e-4 && kv.len == T, "cache logits equal a full forward pass's at every position: worst "
		       "difference %.2g on logits up to %.1f (1e-4)", worst, mag);
		tap_ok(lmt_kv_step(&kv, 1, row, &err) == LMT_EINVAL, "a full cache refuses another step");
		lmt_kv_release(&kv);
	}
	free(full);
	/* ids: lmt_generate against the recompute sampler */
	static const double temps[] = { 0, 0.7, 1.0, 1.6 };
	static const int topks[] = { 0, 1, 5, 40 };
	int cases = 0, same = 0;
	int32_t prompt[12], a[40], b[40];
	for (int i = 0; i < 12; i++)
		prompt[i] = (int32_t)lmt_rng_below(&rng, V);
	for (int np = 1; np <= 12; np += 5)
		for (int ti = 0; ti < 4; ti++)
			for (int ki = 0; ki < 4; ki++)
				for (uint64_t seed = 1; seed <= 3; seed++) {
					int n = np == 11 ? 30 : 10; /* 11 + 30 > 24: past the context */
					lmt_gpt_alloc_acts(&g, 1, T, &err);
					int rc = recompute_sample(&g, prompt, np, n, temps[ti], topks[ki], seed, a, &err);
					rc |= lmt_generate(&g, prompt, np, n, temps[ti], topks[ki], seed, b, &err);
					cases++;
					same += !rc && !memcmp(a, b, (size_t)n * sizeof *a);
				}
	tap_ok(same == cases, "lmt_generate picks exactly the recompute sampler's ids: %d of %d (prompt, temperature, top-k, "
	       "seed) cases, some past the context", same, cases);
	lmt_gpt_release(&g);

	/* speed: a context of 256, 200 tokens */
	struct lmt_gpt h;
	if (make_model(&h, 256, 128, 2, 2, 64))
		return;
	random_params(&h);
	int32_t *o1 = xcalloc(200 * sizeof *o1), *o2 = xcalloc(200 * sizeof *o2);
	lmt_gpt_alloc_acts(&h, 1, 256, &err);
	double t0 = lmt_now();
	recompute_sample(&h, prompt, 8, 200, 1.0, 40, 5, o1, &err);
	double t_re = lmt_now() - t0;
	t0 = lmt_now();
	lmt_generate(&h, prompt, 8, 200, 1.0, 40, 5, o2, &err);
	double t_kv = lmt_now() - t0;
	tap_ok(t_re > 5 * t_kv && !memcmp(o1, o2, 200 * sizeof *o1),
	       "200 tokens at a context of 256: the cache %.1f ms, recomputing %.1f ms (%.0fx), the same ids", t_kv * 1e3,
	       t_re * 1e3, t_re / t_kv);
	free(o1);
	free(o2);
	lmt_gpt_release(&h);
}

/* ---- memorization ---- */

static void test_memorized(void)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt g;
	enum { V = 60, K = 6, M = 7, ND = 5 };
	if (make_model(&g, 32, V, 2, 2, 16))
		return;
	random_params(&g);
	uint32_t toks[ND][K + M + 3];
	struct lmt_eval_doc d[2 * ND];
	for (int i = 0; i < ND; i++) {
		int32_t p[K + 1], out[M + 3];
		p[0] = 2; /* the context token */
		for (int k = 0; k < K; k++)
			p[k + 1] = (int32_t)lmt_rng_below(&rng, V);
		lmt_generate(&g, p, K + 1, M + 3, 0, 0, 1, out, &err);
		for (int k = 0; k < K; k++)
			toks[i][k] = (uint32_t)p[k + 1];
		for (int k = 0; k < M + 3; k++)
			toks[i][K + k] = (uint32_t)out[k];
		d[i].tok = toks[i];
		d[i].n = K + M + 3;
	}
	/* the same documents with the last continuation token changed */
	uint32_t alt[ND][K + M + 3];
	memcpy(alt, toks, sizeof alt);
	for (int i = 0; i < ND; i++) {
		alt[i][K + M - 1] = (alt[i][K + M - 1] + 1) % V;
		d[ND + i].tok = alt[i];
		d[ND + i].n = K + M + 3;
	}
	uint8_t hit[2 * ND];
	int rc = lmt_eval_memorized(&g, 2, d, 2 * ND, K, M, 3, hit, &err);
	int ok = rc == 0;
	for (int i = 0; i < ND; i++)
		ok &= hit[i] == 1 && hit[ND + i] == 0;
	tap_ok(ok, "memorization by teacher forcing: the model's own greedy continuations are reproduced, one changed "
	       "token is not (%s)", err.msg);
	lmt_gpt_release(&g);
}

/* ---- figures ---- */

static void test_figures(void)
{
	struct lmt_err err = { 0 };
	enum { N = 2000 };
	double *nll = xcalloc(N * sizeof *nll);
	uint64_t *tok = xcalloc(N * sizeof *tok), *byt = xcalloc(N * sizeof *byt), *wd = xcalloc(N * sizeof *wd);
	size_t *idx = xcalloc(N * sizeof *idx);
	for (int i = 0; i < N; i++) {
		tok[i] = 5 + lmt_rng_below(&rng, 200);
		nll[i] = (double)tok[i] * unif(1.5, 3.5);
		byt[i] = tok[i] * 3 + lmt_rng_below(&rng, 20);
		wd[i] = tok[i] / 2 + 1;
		idx[i] = (size_t)i;
	}
	struct lmt_ppl small, big, again;
	lmt_ppl_compute(nll, tok, byt, wd, idx, 20, 1000, 0.95, 9, 1, &small, &err);
	lmt_ppl_compute(nll, tok, byt, wd, idx, N, 1000, 0.95, 9, 1, &big, &err);
	lmt_ppl_compute(nll, tok, byt, wd, idx, 20, 1000, 0.95, 9, 1, &again, &err);
	int inside = 1;
	for (int f = 0; f < LMT_PPL_N; f++) {
		inside &= small.lo[f] <= small.v[f] && small.v[f] <= small.hi[f];
		inside &= big.lo[f] <= big.v[f] && big.v[f] <= big.hi[f];
	}
	tap_ok(inside, "every interval contains its estimate (20 and 2000 documents)");
	double ws = small.hi[LMT_PPL_LOSS] - small.lo[LMT_PPL_LOSS], wb = big.hi[LMT_PPL_LOSS] - big.lo[LMT_PPL_LOSS];
	tap_ok(wb < ws / 4, "100 times the documents narrow the loss interval about 10-fold: %.4f -> %.4f", ws, wb);
	tap_ok(!memcmp(&small, &again, sizeof small), "the same seed and stream give the same intervals");
	double s = 0;
	uint64_t t = 0, b = 0;
	for (int i = 0; i < N; i++)
		s += nll[i], t += tok[i], b += byt[i];
	tap_ok(rel(big.v[LMT_PPL_LOSS], s / (double)t) < 1e-12 && rel(big.v[LMT_PPL_BPB], s / ((double)b * M_LN2)) < 1e-12 &&
	       rel(big.v[LMT_PPL_TOKEN], exp(s / (double)t)) < 1e-12, "the estimates are the ratios of sums");
	struct lmt_ppl nob;
	lmt_ppl_compute(nll, tok, NULL, NULL, idx, 50, 100, 0.95, 9, 1, &nob, &err);
	tap_ok(isnan(nob.v[LMT_PPL_BPB]) && isnan(nob.hi[LMT_PPL_WORD]) && isfinite(nob.hi[LMT_PPL_LOSS]),
	       "unknown bytes and words give no byte or word figures");
	double lo, hi;
	lmt_wilson(0, 10, 0.95, &lo, &hi);
	/* 0 of n: [0, z^2 / (n + z^2)] */
	double z = 1.959963984540054;
	tap_ok(fabs(lmt_normal_z(0.95) - z) < 1e-9 && fabs(lo) < 1e-15 && fabs(hi - z * z / (10 + z * z)) < 1e-12,
	       "z(0.95) = %.9f, Wilson's interval for 0 of 10 is [0, z^2 / (10 + z^2)] = [%.3g, %.6f]", lmt_normal_z(0.95),
	       lo, hi);
	lmt_wilson(5, 10, 0.95, &lo, &hi);
	tap_ok(fabs(lo - 0.2365930) < 1e-6 && fabs(hi - 0.7634070) < 1e-6, "Wilson's interval for 5 of 10: [%.7f, %.7f]",
	       lo, hi);
	tap_ok(lmt_count_words("  a bc\td\n\n e ", 13) == 4 && lmt_count_words("", 0) == 0 &&
	       lmt_count_words("caf\xc3\xa9 \xe2\x82\xac", 9) == 2, "words are runs of non-space bytes");
	free(nll), free(tok), free(byt), free(wd), free(idx);
}

int main(void)
{
	struct lmt_err err = { 0 };
	bin = getenv("LMT_BIN") ? getenv("LMT_BIN") : "build/bin";
	lmt_rng_seed(&rng, 777, 0);
	if (!mkdtemp(dir))
		return 1;
	/* one thread: the models are tiny (see test-model) */
	if (!tap_ok(lmt_backend_open(&be, "cpu", 1, &err) == 0, "the CPU backend, 1 thread (%s)", err.msg))
		return tap_done();
	test_windows();
	test_score_reference();
	test_closed_library();
	test_closed_binary();
	test_sampler();
	test_memorized();
	test_figures();
	be.release(&be);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		tap_diag("could not remove %s", dir);
	return tap_done();
}
