/*
 * generate.h: sampling from a GPT-2 with a key/value cache.
 *
 * The one sampler of lmt (training's samples, evalppl's, the sample tool): each
 * layer's keys and values of the positions seen so far are kept, so a new token
 * costs one pass of the weights over one position plus attention of one query over
 * the cached keys: O(T C) per layer instead of recomputing the prefix, O(T^2 C).
 *
 * Everything runs through the backend, with the model's own block function
 * (lmt_gpt_block_fwd): the cache is each layer's (max_T, 3C) qkv rows on the
 * device, a prompt is one block pass over its n rows (queries 0..n-1), and a step
 * is the same pass for one new row (query p over keys 0..p). There is no second
 * copy of the block here, and the model's training activations are not touched.
 * The logits of a step agree with a batched forward pass over the same prefix to
 * float rounding (one-row GEMMs against batched ones; test-evaluate checks a 1e-4
 * bound). The window is the model's context, max_T: past it, every new token
 * restarts the cache on the last max_T tokens.
 */
#ifndef LMT_GENERATE_H
#define LMT_GENERATE_H

#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "model/model.h"

struct lmt_kv {
	struct lmt_gpt *g;
	int len;                 /* positions cached: the next token goes at position len */
	float **qkv;             /* device, per layer: (max_T, 3C), the cache */
	struct lmt_gpt_slot slot;    /* one block's activations for max_T rows */
	void *slot_mem;
	float *x, *y;            /* device (max_T, C): a block's input and output */
	void *ln;                /* device (C) in the compute dtype: the final norm of the last row */
	float *logits;           /* device (Vp) */
	int32_t *tok;            /* device (max_T) */
};

/* Cache and scratch for g (g must outlive it). */
int lmt_kv_init(struct lmt_kv *kv, struct lmt_gpt *g, struct lmt_err *err);
void lmt_kv_release(struct lmt_kv *kv);

/*
 * Start over with n tokens (1 <= n <= max_T) at positions 0 .. n-1: one block pass
 * per layer over the n rows, their keys and values cached; the logits of the last
 * position (V floats) into logits. g's training activations are not touched.
 */
int lmt_kv_prefill(struct lmt_kv *kv, const int32_t *tok, int n, float *logits, struct lmt_err *err);
/* Append one token at position kv->len (< max_T); its logits (V floats) into logits. */
int lmt_kv_step(struct lmt_kv *kv, int32_t tok, float *logits, struct lmt_err *err);

/*
 * The next token from a row of V logits: the argmax (lowest id on a tie) when
 * temperature <= 0, else a draw from the softmax at temperature over the top_k
 * largest (0: all), by one draw from r. idx: V ints of scratch.
 */
int lmt_pick_token(const float *row, int V, double temperature, int top_k, struct lmt_rng *r, int *idx);
/*
 * lmt_pick_token with a nucleus (top-p) filter after top-k: of the top_k candidates,
 * only the fewest most probable whose probabilities (at temperature) sum to at least
 * top_p, the draw renormalised over them. top_p >= 1 (or <= 0) keeps every candidate
 * and gives lmt_pick_token's draws bit for bit.
 */
int lmt_pick_token_p(const float *row, int V, double temperature, int top_k, double top_p, struct lmt_rng *r,
		     int *idx);

/* n tokens continuing the np >= 1 tokens of prompt into out, each from
 * lmt_pick_token with one random stream seeded by seed alone (the same tokens for
 * the same seed, model and settings, whichever tool samples); past the context the
 * window slides (generate.h, above). */
int lmt_generate(struct lmt_gpt *g, const int32_t *prompt, int np, int n, double temperature, int top_k,
		 uint64_t seed, int32_t *out, struct lmt_err *err);

/* How the next token is drawn: lmt_pick_token_p's arguments and the seed. */
struct lmt_sampler {
	double temperature;  /* <= 0: greedy */
	int top_k;           /* 0: all */
	double top_p;        /* 1: no nucleus filter */
	uint64_t seed;
};

/* Called with each token as it is drawn (k: its index in out); nonzero stops the
 * generation there (the token is kept), so a caller can print as it goes or stop at
 * the end of a document. */
typedef int (*lmt_generate_fn)(void *ctx, int32_t tok, int k);

/*
 * lmt_generate with a nucleus filter and a callback (fn NULL: none): up to n tokens
 * into out, how many into *nout (NULL: not wanted; set also on error, to those
 * drawn). With top_p 1 and no early stop its tokens are lmt_generate's.
 */
int lmt_generate_stream(struct lmt_gpt *g, const int32_t *prompt, int np, int n, const struct lmt_sampler *sp,
			int32_t *out, int *nout, lmt_generate_fn fn, void *fn_ctx, struct lmt_err *err);

#endif
