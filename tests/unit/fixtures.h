/*
 * fixtures.h: model parameters for the unit tests that run GPT-2 (test-model,
 * test-evaluate, test-safetensors).
 */
#ifndef LMT_TEST_FIXTURES_H
#define LMT_TEST_FIXTURES_H

#include <string.h>

#include "model/model.h"

/*
 * Random parameters of order 1 (not GPT-2's 0.02), so that every path carries a
 * signal well above float noise: weight matrices U(-mat, mat), embeddings U(-1, 1),
 * biases U(-0.2, 0.2), LayerNorm gains U(0.7, 1.3), LayerNorm biases U(-0.2, 0.2),
 * into h (g->nparams host floats), drawn from unif(lo, hi). With zero_padding the
 * padding rows of wte and lm_head are 0 (as lmt_gpt_init_weights leaves them);
 * otherwise they get values too (they must not matter).
 */
static inline void fixture_params(const struct lmt_gpt *g, float *h, double mat, int zero_padding,
				  double (*unif)(double lo, double hi))
{
	for (int i = 0; i < g->nt; i++) {
		const struct lmt_tensor *t = &g->t[i];
		for (size_t k = 0; k < t->numel; k++) {
			double v;
			if (t->kind == LMT_PARAM_NORM)
				v = t->name[strlen(t->name) - 1] == 'w' ? unif(0.7, 1.3) : unif(-0.2, 0.2);
			else if (t->kind == LMT_PARAM_BIAS)
				v = unif(-0.2, 0.2);
			else if (t->kind == LMT_PARAM_EMBEDDING)
				v = unif(-1, 1);
			else
				v = unif(-mat, mat);
			if (zero_padding && (!strcmp(t->name, "wte") || !strcmp(t->name, "lm_head")) &&
			    k >= (size_t)g->cfg.V * (size_t)g->cfg.C)
				v = 0;
			h[t->offset + k] = (float)v;
		}
	}
}

#endif
