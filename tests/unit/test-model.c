/*
 * test-model: the GPT-2 model (model.h) and the training step (trainer.h) on the
 * CPU backend.
 *
 *   - gradients: a tiny model's every parameter gradient (untied without segment
 *     mask; tied with segments, a padding position and masked targets) against
 *     central differences of a double-precision GPT-2 written here from model.h's
 *     description, reading the parameters from g.params in the documented layout;
 *     the float loss against the double loss;
 *   - alignment: lmt_make_batch puts target p = token p + 1 and masks what it should;
 *     the loss at position n is the cross-entropy of logits row n against target n;
 *     changing the token at position t leaves the logits at positions < t (and of the
 *     other sequence) bitwise unchanged; with the segment mask a document's logits do
 *     not depend on the documents before it in the same sequence;
 *   - overfitting: AdamW on one fixed batch drives the loss from about ln V to below
 *     0.05;
 *   - accumulation through lmt_trainer_step on a real dataset (shard-pack --mode pad,
 *     documents of different lengths): B = 8 x 1 equals B = 2 x 4; normalising each
 *     micro-batch by its own count instead gives a clearly different gradient;
 *   - the schedule: lmt_lr_at against trainer.h's formulas, and the lr each update
 *     of lmt_trainer_step reports, with accum 1 and 3;
 *   - llm.c's model file: a hand-written file loads into the documented layout and
 *     saves back to the same bytes; bad magic, bf16 and truncation are refused;
 *   - determinism: two 3-update runs give bitwise identical parameters;
 *   - recompute (every block, every second block) gives bitwise the gradients of
 *     none, in fp32 and bf16, and shrinks the activations by the slots it saves;
 *     bf16 and fp16 forward losses close to fp32's.
 *
 * The dataset is made by the real tools (gen-corpus is not needed: the test writes
 * its own JSONL of short documents; tok-train, tok-encode, shard-pack from $LMT_BIN,
 * default build/bin) in a temporary directory.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "data/dataset.h"
#include "core/rng.h"
#include "data/loader.h"
#include "model/model.h"
#include "fixtures.h"
#include "tap.h"
#include "model/trainer.h"
#include "core/util.h"

static char dir[] = "/tmp/lmt-test-model.XXXXXX";
static const char *bin;
static struct lmt_backend be;
static struct lmt_rng rng;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	if (rc)
		tap_diag("command failed (%d): %s", rc, cmd);
	return rc;
}

static double unif(double lo, double hi)
{
	return lo + (hi - lo) * ((lmt_rng_next(&rng) >> 11) * 0x1.0p-53);
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		fprintf(stderr, "test-model: out of memory\n");
		exit(1);
	}
	return p;
}

/* Random parameters of order 1 (not GPT-2's 0.02), so every path carries a
 * gradient well above float noise: matrices U(-0.5, 0.5), embeddings U(-1, 1),
 * biases U(-0.2, 0.2), LayerNorm gains U(0.7, 1.3), LayerNorm biases U(-0.2, 0.2).
 * The padding rows of wte/lm_head get values too: they must not matter. */
static void random_params(struct lmt_gpt *g)
{
	float *h = xmalloc(g->nparams * sizeof *h);
	fixture_params(g, h, 0.5, 0, unif);
	lmt_gpt_scatter(g, g->params, h);
	lmt_gpt_sync_weights(g);
	free(h);
}

/* Forward on the current inputs; the loss sum through the model's device
 * accumulator (g->a.scalars[0], zeroed first), read back once. */
static double forward_sum(struct lmt_gpt *g, int use_seg, float dscale)
{
	double s = 0;
	be.to_device(&be, g->a.scalars, &s, sizeof s);
	lmt_gpt_forward(g, use_seg, dscale, g->a.scalars);
	be.to_host(&be, &s, g->a.scalars, sizeof s);
	return s;
}

static int make_model(struct lmt_gpt *g, int maxT, int V, int L, int NH, int C, int untied, int B, int T)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt_config cfg = { maxT, V, lmt_gpt_padded_vocab(V), L, NH, C, untied };
	if (lmt_gpt_init(g, &cfg, &be, &err) || lmt_gpt_alloc_acts(g, B, T, &err)) {
		tap_ok(0, "model L=%d NH=%d C=%d V=%d: %s", L, NH, C, V, err.msg);
		return -1;
	}
	return 0;
}

static void set_inputs(struct lmt_gpt *g, const int32_t *tok, const int32_t *tgt, const int32_t *seg)
{
	size_t N = (size_t)g->B * g->T;
	be.to_device(&be, g->tok, tok, N * 4);
	if (tgt)
		be.to_device(&be, g->tgt, tgt, N * 4);
	if (seg)
		be.to_device(&be, g->seg, seg, N * 4);
}

/* ---- the double-precision reference GPT-2 ---- */

/* model.h's documented parameter order; offsets computed here, not taken from g->t */
enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, APW, APB, LN2W, LN2B, FCW, FCB, FPW, FPB, LNFW, LNFB, HEAD, NT };
static const char *const tname[NT] = { "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w",
				      "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "lm_head" };

struct ref {
	int maxT, V, Vp, L, NH, C, untied, B, T;
	size_t off[NT + 1], n;
	double *p;
	const int32_t *tok, *tgt, *seg;  /* seg NULL: causal only */
	double *x, *h, *qkv, *y, *t, *f, *logits;
};

static void ref_layout(struct ref *r)
{
	size_t C = r->C, L = r->L, sz[NT] = { r->Vp * C, r->maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
					      L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C,
					      C, C, r->untied ? r->Vp * C : 0 };
	size_t o = 0;
	for (int i = 0; i < NT; i++) {
		r->off[i] = o;
		o += sz[i];
	}
	r->off[NT] = r->n = o;
}

static void ref_init(struct ref *r, const struct lmt_gpt *g, const int32_t *tok, const int32_t *tgt, const int32_t *seg)
{
	memset(r, 0, sizeof *r);
	r->maxT = g->cfg.max_T, r->V = g->cfg.V, r->Vp = g->cfg.Vp, r->L = g->cfg.L, r->NH = g->cfg.NH;
	r->C = g->cfg.C, r->untied = g->cfg.untied, r->B = g->B, r->T = g->T;
	ref_layout(r);
	r->tok = tok, r->tgt = tgt, r->seg = seg;
	float *h = xmalloc(g->nparams * 4);
	lmt_gpt_gather(g, h, g->params);
	r->p = xmalloc(r->n * sizeof *r->p);
	for (size_t i = 0; i < r->n && i < g->nparams; i++)
		r->p[i] = h[i];
	free(h);
	size_t N = (size_t)r->B * r->T, C = r->C;
	r->x = xmalloc(N * C * 8), r->h = xmalloc(N * C * 8), r->qkv = xmalloc(N * 3 * C * 8);
	r->y = xmalloc(N * C * 8), r->t = xmalloc(N * C * 8), r->f = xmalloc(N * 4 * C * 8);
	r->logits = xmalloc(N * r->V * 8);
}

static void ref_free(struct ref *r)
{
	free(r->p), free(r->x), free(r->h), free(r->qkv), free(r->y), free(r->t), free(r->f), free(r->logits);
}

static void ref_ln(const double *x, double *o, const double *w, const double *b, int N, int C)
{
	for (int n = 0; n < N; n++) {
		const double *v = x + (size_t)n * C;
		double m = 0, var = 0;
		for (int c = 0; c < C; c++)
			m += v[c];
		m /= C;
		for (int c = 0; c < C; c++)
			var += (v[c] - m) * (v[c] - m);
		double s = 1 / sqrt(var / C + 1e-5);
		for (int c = 0; c < C; c++)
			o[(size_t)n * C + c] = (v[c] - m) * s * w[c] + b[c];
	}
}

/* o (N, OC) = x (N, IC) W^T + b, W (OC, IC) as llm.c stores it */
static void ref_linear(const double *x, double *o, const double *w, const double *b, int N, int IC, int OC)
{
	for (int n = 0; n < N; n++)
		for (int j = 0; j < OC; j++) {
			double s = b ? b[j] : 0;
			for (int c = 0; c < IC; c++)
				s += x[(size_t)n * IC + c] * w[(size_t)j * IC + c];
			o[(size_t)n * OC + j] = s;
		}
}

/* mean cross-entropy over valid targets; logits (N, V) left in r->logits */
static double ref_loss(struct ref *r)
{
	int B = r->B, T = r->T, N = B * T, C = r->C, NH = r->NH, HS = C / NH, V = r->V;
	const double *P = r->p;
	double *x = r->x;
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			x[n * C + c] = P[r->off[WTE] + (size_t)r->tok[n] * C + c] + P[r->off[WPE] + (size_t)(n % T) * C + c];
	for (int l = 0; l < r->L; l++) {
		ref_ln(x, r->h, P + r->off[LN1W] + l * C, P + r->off[LN1B] + l * C, N, C);
		ref_linear(r->h, r->qkv, P + r->off[QKVW] + (size_t)l * 3 * C * C, P + r->off[QKVB] + l * 3 * C, N, C, 3 * C);
		/* causal attention, optionally within a segment: softmax(q k / sqrt(HS)) v */
		for (int b = 0; b < B; b++)
			for (int hd = 0; hd < NH; hd++)
				for (int i = 0; i < T; i++) {
					double s[64], mx = -INFINITY, sum = 0;
					const double *q = r->qkv + ((size_t)b * T + i) * 3 * C + hd * HS;
					for (int j = 0; j <= i; j++) {
						s[j] = -INFINITY;
						if (r->seg && r->seg[b * T + j] != r->seg[b * T + i])
							continue;
						const double *k = r->qkv + ((size_t)b * T + j) * 3 * C + C + hd * HS;
						double d = 0;
						for (int e = 0; e < HS; e++)
							d += q[e] * k[e];
						s[j] = d / sqrt((double)HS);
						mx = fmax(mx, s[j]);
					}
					for (int j = 0; j <= i; j++)
						sum += exp(s[j] - mx);
					double *y = r->y + ((size_t)b * T + i) * C + hd * HS;
					for (int e = 0; e < HS; e++)
						y[e] = 0;
					for (int j = 0; j <= i; j++) {
						const double *v = r->qkv + ((size_t)b * T + j) * 3 * C + 2 * C + hd * HS;
						for (int e = 0; e < HS; e++)
							y[e] += exp(s[j] - mx) / sum * v[e];
					}
				}
		ref_linear(r->y, r->t, P + r->off[APW] + (size_t)l * C * C, P + r->off[APB] + l * C, N, C, C);
		for (int i = 0; i < N * C; i++)
			x[i] += r->t[i];
		ref_ln(x, r->h, P + r->off[LN2W] + l * C, P + r->off[LN2B] + l * C, N, C);
		ref_linear(r->h, r->f, P + r->off[FCW] + (size_t)l * 4 * C * C, P + r->off[FCB] + l * 4 * C, N, C, 4 * C);
		for (int i = 0; i < N * 4 * C; i++) {
			double v = r->f[i];
			r->f[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
		}
		ref_linear(r->f, r->t, P + r->off[FPW] + (size_t)l * 4 * C * C, P + r->off[FPB] + l * C, N, 4 * C, C);
		for (int i = 0; i < N * C; i++)
			x[i] += r->t[i];
	}
	ref_ln(x, r->h, P + r->off[LNFW], P + r->off[LNFB], N, C);
	/* the head: only the V real rows; padding columns are never predicted */
	ref_linear(r->h, r->logits, P + r->off[r->untied ? HEAD : WTE], NULL, N, C, V);
	double total = 0;
	int valid = 0;
	for (int n = 0; n < N; n++) {
		if (r->tgt[n] < 0)
			continue;
		const double *z = r->logits + (size_t)n * V;
		double mx = -INFINITY, s = 0;
		for (int j = 0; j < V; j++)
			mx = fmax(mx, z[j]);
		for (int j = 0; j < V; j++)
			s += exp(z[j] - mx);
		total += mx + log(s) - z[r->tgt[n]];
		valid++;
	}
	return total / valid;
}

/* ---- whole-model gradient ---- */

static void gradient_case(int untied, int use_seg)
{
	enum { L = 2, NH = 2, C = 8, V = 11, T = 6, B = 2, N = B * T };
	struct lmt_gpt g;
	if (make_model(&g, 8, V, L, NH, C, untied, B, T))
		return;
	random_params(&g);
	int32_t tok[N], tgt[N];
	/* sequence 0: documents of 3 and 2 positions, then padding (its own id, no
	 * target); sequence 1: one document. Targets -1 where lmt_make_batch puts them
	 * (before padding); without use_seg, all targets valid. */
	const int32_t seg[N] = { 0, 0, 0, 1, 1, -6, 0, 0, 0, 0, 0, 0 };
	for (int n = 0; n < N; n++) {
		tok[n] = (int32_t)(lmt_rng_next(&rng) % V);
		tgt[n] = (int32_t)(lmt_rng_next(&rng) % V);
	}
	tok[0] = tok[7] = tok[8] = 4; /* repeated ids */
	if (use_seg)
		tgt[4] = tgt[5] = -1;
	int valid = 0;
	for (int n = 0; n < N; n++)
		valid += tgt[n] >= 0;
	set_inputs(&g, tok, tgt, seg);
	be.zero(&be, g.grads, g.nparams * 4);
	double ls = forward_sum(&g, use_seg, (float)(1.0 / valid));
	lmt_gpt_backward(&g, use_seg);
	float *gr = xmalloc(g.nparams * 4);
	lmt_gpt_gather(&g, gr, g.grads);

	struct ref r;
	ref_init(&r, &g, tok, tgt, use_seg ? seg : NULL);
	char label[64];
	snprintf(label, sizeof label, "%s%s", untied ? "untied" : "tied", use_seg ? ", segment mask" : "");
	int layout = r.n == g.nparams && g.nt == NT - !untied;
	for (int i = 0; layout && i < g.nt; i++)
		layout = !strcmp(g.t[i].name, tname[i]) && g.t[i].offset == r.off[i] &&
			 g.t[i].numel == r.off[i + 1 + (i == LNFB && !untied)] - r.off[i];
	tap_ok(layout, "%s: the tensors are llm.c's order and sizes (%zu parameters)", label, g.nparams);
	double L0 = ref_loss(&r), lf = ls / valid;
	/* float forward of a 2-layer model: ~1e-6 relative */
	tap_ok(fabs(lf - L0) <= 1e-5 * fabs(L0), "%s: float loss %.9f, double loss %.9f (1e-5 relative)", label, lf, L0);

	/*
	 * Central differences in double, h = 1e-5 on parameters of order 1: truncation
	 * ~h^2 = 1e-10, rounding ~1e-16 / h = 1e-11; negligible. The float gradient
	 * carries float rounding through ~20 kernels: observed up to ~1.5e-6 of each
	 * tensor's largest gradient. Tolerance per element: 1e-4 |fd| + 1e-5 max|fd| of
	 * its tensor (the absolute part for elements that cancel to near zero), about 7
	 * times the worst observed. A wrong or missing term in any backward kernel makes
	 * errors of the order of the gradient itself.
	 */
	const double h = 1e-5;
	size_t bad = 0, checked = 0;
	double worst_all = 0, worst_rel = 0;
	for (int ti = 0; ti < g.nt; ti++) {
		const struct lmt_tensor *t = &g.t[ti];
		double *fd = xmalloc(t->numel * 8), mx = 0, worst = 0;
		size_t wi = 0, tbad = 0;
		for (size_t k = 0; k < t->numel; k++) {
			double *p = &r.p[t->offset + k], p0 = *p;
			*p = p0 + h;
			double lp = ref_loss(&r);
			*p = p0 - h;
			double lm = ref_loss(&r);
			*p = p0;
			fd[k] = (lp - lm) / (2 * h);
			mx = fmax(mx, fabs(fd[k]));
		}
		for (size_t k = 0; k < t->numel; k++) {
			double e = fabs(gr[t->offset + k] - fd[k]), lim = 1e-4 * fabs(fd[k]) + 1e-5 * mx;
			if (!(e <= lim))
				tbad++;
			worst_all = fmax(worst_all, lim > 0 ? e / lim : e > 0 ? INFINITY : 0);
			worst_rel = fmax(worst_rel, mx > 0 ? e / mx : 0);
			if (mx > 0 && !(e / mx <= worst))
				worst = e / mx, wi = k;
			checked++;
		}
		if (tbad || mx == 0)
			tap_diag("%s: %s: %zu bad, largest |fd| %.3g, worst error %.3g of it at [%zu]: float %.9g, fd %.9g",
				 label, t->name, tbad, mx, worst, wi, gr[t->offset + wi], fd[wi]);
		bad += tbad + (mx == 0);
		free(fd);
	}
	tap_ok(bad == 0, "%s: all %zu parameter gradients match central differences of the double model "
			 "(1e-4 relative + 1e-5 of the tensor's largest; worst at %.2g of the limit, %.2g of its "
			 "tensor's largest)", label, checked, worst_all, worst_rel);
	/* the vocabulary's padding rows carry no gradient */
	const struct lmt_tensor *head = lmt_gpt_tensor(&g, untied ? "lm_head" : "wte");
	int zero = 1;
	for (size_t k = (size_t)V * C; k < head->numel; k++)
		zero &= gr[head->offset + k] == 0;
	tap_ok(zero, "%s: the %s rows of the padding vocabulary (%d..%d) have zero gradient", label, head->name, V,
	       g.cfg.Vp - 1);
	ref_free(&r);
	free(gr);
	lmt_gpt_release(&g);
}

/* ---- alignment and masking ---- */

/* ---- precision and recompute ---- */

/* A model computing in dtype dt, recomputing every K-th block, sized for B x T,
 * with the parameters random_params draws from a fixed seed (the same in every
 * model made here). */
static int make_model_pk(struct lmt_gpt *g, int dt, int K, int V, int L, int NH, int C, int B, int T)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt_config cfg = { T, V, lmt_gpt_padded_vocab(V), L, NH, C, 0 };
	if (lmt_gpt_init(g, &cfg, &be, &err) || lmt_gpt_set_precision(g, dt, &err) ||
	    lmt_gpt_set_recompute(g, K, &err) || lmt_gpt_alloc_acts(g, B, T, &err)) {
		tap_ok(0, "model %s recompute %d: %s", lmt_dtype_name(dt), K, err.msg);
		return -1;
	}
	struct lmt_rng save = rng;
	lmt_rng_seed(&rng, 77, 0);
	random_params(g);
	rng = save;
	return 0;
}

/* One slot's bytes for N positions, from model.h's field list: each part 64-byte
 * aligned; GEMM inputs (ln1, ln2, fchg, and atty_lp when not fp32) in dt. */
static size_t slot_bytes(size_t N, size_t C, size_t NH, int dt)
{
	size_t e = lmt_dtype_size(dt), s = 0;
	size_t parts[][2] = { { N * C, e }, { N, 4 }, { N, 4 }, { N * 3 * C, 4 }, { N * C, 4 },
			      { dt == LMT_DTYPE_F32 ? 0 : N * C, e }, { N * NH, 4 }, { N * C, 4 }, { N * C, e },
			      { N, 4 }, { N, 4 }, { N * 4 * C, 4 }, { N * 4 * C, e } };
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
		if (parts[i][0])
			s += (parts[i][0] * parts[i][1] + 63) & ~(size_t)63;
	return s;
}

static void test_recompute(void)
{
	enum { V = 50, L = 3, NH = 2, C = 16, B = 2, T = 12, N = B * T };
	int32_t tok[N], tgt[N];
	const int32_t seg[N] = { 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, -12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	for (int n = 0; n < N; n++)
		tok[n] = (int32_t)(lmt_rng_next(&rng) % V), tgt[n] = n % 7 == 6 ? -1 : (int32_t)(lmt_rng_next(&rng) % V);
	const int dts[2] = { LMT_DTYPE_F32, LMT_DTYPE_BF16 };
	for (int di = 0; di < 2; di++) {
		int dt = dts[di];
		float *ref = NULL;
		double ref_loss = 0;
		size_t ref_bytes = 0, np = 0;
		for (int K = 0; K <= 2; K++) {
			struct lmt_gpt g;
			if (make_model_pk(&g, dt, K, V, L, NH, C, B, T))
				return;
			set_inputs(&g, tok, tgt, seg);
			be.zero(&be, g.grads, g.nparams * 4);
			double loss = forward_sum(&g, 1, 1.0f / N);
			lmt_gpt_backward(&g, 1);
			np = g.nparams;
			float *gr = xmalloc(np * 4);
			lmt_gpt_gather(&g, gr, g.grads);
			if (K == 0) {
				ref = gr, ref_loss = loss, ref_bytes = g.act_bytes.total;
			} else {
				int nrc = 0;
				for (int l = 0; l < L; l++)
					nrc += l % K == 0;
				/* the recomputed blocks share one slot: nrc - 1 slots fewer */
				size_t drop = (size_t)(nrc - 1) * slot_bytes(N, C, NH, dt);
				tap_ok(!memcmp(gr, ref, np * 4) && loss == ref_loss,
				       "%s, recompute every %d block(s) of %d: loss and all %zu gradients bitwise those without",
				       lmt_dtype_name(dt), K, L, np);
				tap_ok(ref_bytes - g.act_bytes.total == drop,
				       "%s, recompute every %d: activations drop by %zu bytes (%d blocks recomputed, one slot of "
				       "%zu kept), expected %zu", lmt_dtype_name(dt), K, ref_bytes - g.act_bytes.total, nrc,
				       slot_bytes(N, C, NH, dt), drop);
				free(gr);
			}
			lmt_gpt_release(&g);
		}
		free(ref);
	}
}

/* The grads-ready hook's calls: the layer, its range, and a copy of that range of
 * the gradients as they were at the call. */
struct ready {
	struct lmt_gpt *g;
	int n, layer[8];
	size_t off[8], cnt[8];
	float *snap[8];
};

static void on_ready(void *ctx, int layer, size_t off, size_t n)
{
	struct ready *r = ctx;
	if (r->n >= 8)
		return;
	r->layer[r->n] = layer, r->off[r->n] = off, r->cnt[r->n] = n;
	r->snap[r->n] = xmalloc(n * 4);
	be.to_host(&be, r->snap[r->n], r->g->grads + off, n * 4);
	r->n++;
}

/*
 * The layer-major layout: every layer's twelve pieces tile its range exactly, the
 * ranges tile the layers' region in order, gather and scatter are inverses, and the
 * grads-ready hook fires once per layer, last layer first, with gradients that are
 * already final (backward changes them no more afterwards).
 */
static void test_layout(void)
{
	enum { V = 40, L = 3, NH = 2, C = 8, B = 2, T = 6, N = B * T };
	struct lmt_gpt g;
	if (make_model(&g, T, V, L, NH, C, 1, B, T))
		return;
	int tiled = 1;
	size_t prev_end = 0;
	for (int l = 0; l < L; l++) {
		size_t off, n = lmt_gpt_layer_range(&g, l, &off), covered = 0;
		if (l && off != prev_end)
			tiled = 0;
		prev_end = off + n;
		for (int i = 0; i < g.nt; i++) {
			const struct lmt_tensor *t = &g.t[i];
			if (!t->layered)
				continue;
			float *p = lmt_gpt_piece(&g, g.params, t->name, l);
			size_t at = (size_t)(p - g.params);
			tiled &= at >= off && at + t->lnumel <= off + n && t->lnumel * L == t->numel;
			covered += t->lnumel;
		}
		tiled &= covered == n;
	}
	int unlayered = 0;
	for (int i = 0; i < g.nt; i++)
		unlayered += !g.t[i].layered;
	tap_ok(tiled && unlayered == 5, "layer-major: each layer's 12 pieces tile its range, the ranges follow one "
	       "another; wte, wpe, lnfw, lnfb, lm_head outside them");
	float *h = xmalloc(g.nparams * 4), *h2 = xmalloc(g.nparams * 4);
	for (size_t k = 0; k < g.nparams; k++)
		h[k] = (float)k;
	lmt_gpt_scatter(&g, g.params, h);
	lmt_gpt_gather(&g, h2, g.params);
	const struct lmt_tensor *q = lmt_gpt_tensor(&g, "qkvw");
	float *q1 = lmt_gpt_piece(&g, g.params, "qkvw", 1);
	tap_ok(!memcmp(h, h2, g.nparams * 4) && *q1 == (float)(q->offset + q->lnumel),
	       "gather(scatter(x)) = x; layer 1 of qkvw on the device holds the canonical element %zu",
	       q->offset + q->lnumel);
	/* the hook */
	int32_t tok[N], tgt[N];
	for (int n = 0; n < N; n++)
		tok[n] = (int32_t)(lmt_rng_next(&rng) % V), tgt[n] = (int32_t)(lmt_rng_next(&rng) % V);
	random_params(&g);
	set_inputs(&g, tok, tgt, NULL);
	struct ready r = { &g, 0, { 0 }, { 0 }, { 0 }, { NULL } };
	g.grads_ready = on_ready;
	g.grads_ready_ctx = &r;
	be.zero(&be, g.grads, g.nparams * 4);
	forward_sum(&g, 0, 1.0f / N);
	lmt_gpt_backward(&g, 0);
	int order = r.n == L, final = 1;
	for (int k = 0; k < r.n; k++) {
		size_t off, n = lmt_gpt_layer_range(&g, L - 1 - k, &off);
		order &= r.layer[k] == L - 1 - k && r.off[k] == off && r.cnt[k] == n;
		be.to_host(&be, h, g.grads + r.off[k], r.cnt[k] * 4);
		final &= !memcmp(h, r.snap[k], r.cnt[k] * 4);
		free(r.snap[k]);
	}
	tap_ok(order, "grads_ready fires once per layer, last first, with the layer's range (%d calls)", r.n);
	tap_ok(final, "... and each layer's gradients are final when it fires");
	free(h);
	free(h2);
	lmt_gpt_release(&g);
}

/*
 * bf16 and fp16 forward losses against fp32 on the same tiny random model (weights
 * of order 0.5, 2 blocks): each GEMM input rounded to 8 (bf16) or 11 (fp16)
 * significant bits, relative errors 2^-9 and 2^-12 per element, which average over
 * the K-term sums and the tokens: the mean loss within 1e-2 relative for bf16 and
 * 1e-3 for fp16 (observed here: 2e-5 and 1e-4).
 */
static void test_precision_loss(void)
{
	enum { V = 50, L = 2, NH = 2, C = 16, B = 2, T = 12, N = B * T };
	int32_t tok[N], tgt[N];
	for (int n = 0; n < N; n++)
		tok[n] = (int32_t)(lmt_rng_next(&rng) % V), tgt[n] = (int32_t)(lmt_rng_next(&rng) % V);
	const int dts[3] = { LMT_DTYPE_F32, LMT_DTYPE_BF16, LMT_DTYPE_F16 };
	const double tol[3] = { 0, 1e-2, 1e-3 };
	double l32 = 0;
	for (int di = 0; di < 3; di++) {
		struct lmt_gpt g;
		if (make_model_pk(&g, dts[di], 0, V, L, NH, C, B, T))
			return;
		set_inputs(&g, tok, tgt, NULL);
		double l = forward_sum(&g, 0, 1.0f / N) / N;
		if (di == 0)
			l32 = l;
		else
			tap_ok(isfinite(l) && fabs(l - l32) <= tol[di] * l32,
			       "%s forward loss %.6f against fp32 %.6f: %.2g relative, within %.0e", lmt_dtype_name(dts[di]), l,
			       l32, fabs(l - l32) / l32, tol[di]);
		lmt_gpt_release(&g);
	}
}

static void test_make_batch(void)
{
	enum { T = 12 };
	uint32_t toks[T + 1] = { 10, 11, 12, 13, 20, 21, 22, 23, 24, 99, 99, 99, 99 };
	struct lmt_segment segs[2] = { { 0, 4, 7 }, { 4, 5, 8 } };
	struct lmt_sample s = { 0 };
	s.tokens = toks, s.segs = segs, s.nseg = 2;
	int32_t tok[T], tgt[T], seg[T];
	uint64_t v1 = lmt_make_batch(&s, 1, T, 1, tok, tgt, seg);
	static const int32_t et1[T] = { 11, 12, 13, 20, 21, 22, 23, 24, -1, -1, -1, -1 };
	static const int32_t es[T] = { 0, 0, 0, 0, 1, 1, 1, 1, 1, -10, -11, -12 };
	int ok = v1 == 8 && !memcmp(tgt, et1, sizeof tgt) && !memcmp(seg, es, sizeof seg);
	for (int p = 0; p < T; p++)
		ok &= tok[p] == (int32_t)toks[p];
	tap_ok(ok, "lmt_make_batch: token p is input p, target p is token p + 1 inside documents, -1 before padding; "
		   "segments numbered, padding -(p+1); 8 valid");
	uint64_t v0 = lmt_make_batch(&s, 1, T, 0, tok, tgt, seg);
	tap_ok(v0 == 7 && tgt[3] == -1 && tgt[2] == 13 && tgt[4] == 21,
	       "lmt_make_batch without cross-document targets: the last position of a document has none (7 valid)");
}

static int rows_equal(const float *a, const float *b, int r0, int r1, int Vp)
{
	return r1 <= r0 || !memcmp(a + (size_t)r0 * Vp, b + (size_t)r0 * Vp, (size_t)(r1 - r0) * Vp * 4);
}

static void test_alignment(void)
{
	enum { V = 50, T = 12, B = 2, N = B * T };
	struct lmt_gpt g;
	if (make_model(&g, T, V, 2, 2, 16, 0, B, T))
		return;
	random_params(&g);
	int Vp = g.cfg.Vp;
	int32_t tok[N], tgt[N];
	int32_t seg[N] = { 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, -12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	for (int n = 0; n < N; n++)
		tok[n] = (int32_t)(lmt_rng_next(&rng) % V), tgt[n] = n % 5 == 4 ? -1 : (int32_t)(lmt_rng_next(&rng) % V);
	float *base = xmalloc((size_t)N * Vp * 4), *cur = xmalloc((size_t)N * Vp * 4), *ls = xmalloc(N * 4);
	set_inputs(&g, tok, tgt, seg);
	lmt_gpt_logits(&g, 0);
	be.to_host(&be, base, g.a.logits, (size_t)N * Vp * 4);

	/* the loss at n is -log softmax(logits row n over V)[target n]: computed in double
	 * from the logits, 1e-5 relative */
	lmt_gpt_forward(&g, 0, 0.0f, NULL);
	be.to_host(&be, ls, g.a.losses, N * 4);
	int lok = 1;
	for (int n = 0; n < N; n++) {
		double want = 0;
		if (tgt[n] >= 0) {
			double mx = -INFINITY, s = 0;
			for (int j = 0; j < V; j++)
				mx = fmax(mx, base[(size_t)n * Vp + j]);
			for (int j = 0; j < V; j++)
				s += exp(base[(size_t)n * Vp + j] - mx);
			want = mx + log(s) - base[(size_t)n * Vp + tgt[n]];
		}
		lok &= fabs(ls[n] - want) <= 1e-5 * fabs(want) + 1e-6;
	}
	tap_ok(lok, "the loss at each position is the cross-entropy of that position's logits and target; 0 without one");

	/* causal: change token t of sequence 0 */
	int causal = 1, moved = 1;
	for (int t = 0; t < T; t++) {
		int32_t save = tok[t];
		tok[t] = (save + 1 + t) % V;
		set_inputs(&g, tok, NULL, NULL);
		lmt_gpt_logits(&g, 0);
		be.to_host(&be, cur, g.a.logits, (size_t)N * Vp * 4);
		causal &= rows_equal(base, cur, 0, t, Vp) && rows_equal(base, cur, T, N, Vp);
		moved &= !rows_equal(base, cur, t, t + 1, Vp);
		tok[t] = save;
	}
	tap_ok(causal, "changing the token at position t (each of 0..%d) leaves the logits at positions < t and of "
		       "the other sequence bitwise unchanged", T - 1);
	tap_ok(moved, "... and changes the logits at position t (the check can fail)");

	/* segment mask: sequence 0 = document A (0..4), document B (5..10), padding 11 */
	set_inputs(&g, tok, NULL, seg);
	lmt_gpt_logits(&g, 1);
	be.to_host(&be, base, g.a.logits, (size_t)N * Vp * 4);
	int indep = 1, leak = 1, later = 1;
	for (int t = 0; t < 5; t++) {
		int32_t save = tok[t];
		tok[t] = (save + 7) % V;
		set_inputs(&g, tok, NULL, NULL);
		lmt_gpt_logits(&g, 1);
		be.to_host(&be, cur, g.a.logits, (size_t)N * Vp * 4);
		indep &= rows_equal(base, cur, 5, N, Vp) && rows_equal(base, cur, 0, t, Vp);
		lmt_gpt_logits(&g, 0);
		be.to_host(&be, cur, g.a.logits, (size_t)N * Vp * 4);
		leak &= !rows_equal(base, cur, 5, 6, Vp) && !rows_equal(base, cur, 11, 12, Vp);
		tok[t] = save;
	}
	for (int t = 5; t < T; t++) {
		int32_t save = tok[t];
		tok[t] = (save + 7) % V;
		set_inputs(&g, tok, NULL, NULL);
		lmt_gpt_logits(&g, 1);
		be.to_host(&be, cur, g.a.logits, (size_t)N * Vp * 4);
		later &= rows_equal(base, cur, 0, t, Vp) && rows_equal(base, cur, T, N, Vp) &&
			 (t == 11 || rows_equal(base, cur, 11, 12, Vp));
		tok[t] = save;
	}
	tap_ok(indep, "segment mask: changing any token of document A (positions 0..4) leaves document B's logits "
		      "(5..10), the padding position's (11) and the other sequence's bitwise unchanged");
	tap_ok(leak, "... while without the mask the same changes reach document B and the padding position");
	tap_ok(later, "segment mask: changing a token of document B or the padding leaves every earlier position "
		      "bitwise unchanged, and a padding position depends on its own token only");
	free(base), free(cur), free(ls);
	lmt_gpt_release(&g);
}

/* ---- overfitting one batch ---- */

static void test_overfit(void)
{
	enum { V = 64, T = 16, B = 4, N = B * T, STEPS = 300 };
	struct lmt_gpt g;
	struct lmt_err err = { 0 };
	if (make_model(&g, T, V, 2, 2, 32, 0, B, T))
		return;
	lmt_gpt_init_weights(&g, 5, &err);
	lmt_gpt_alloc_optimizer(&g, &err);
	int32_t tok[N], tgt[N];
	for (int n = 0; n < N; n++)
		tok[n] = (int32_t)(lmt_rng_next(&rng) % V);
	for (int n = 0; n < N; n++)
		tgt[n] = n % T == T - 1 ? (int32_t)(lmt_rng_next(&rng) % V) : tok[n + 1];
	set_inputs(&g, tok, tgt, NULL);
	double first = 0, loss = 0;
	const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f;
	for (int s = 1; s <= STEPS; s++) {
		be.zero(&be, g.grads, g.nparams * 4);
		loss = forward_sum(&g, 0, 1.0f / N) / N;
		lmt_gpt_backward(&g, 0);
		if (s == 1)
			first = loss;
		struct lmt_adamw ah = { .lr = lr, .b1 = b1, .b2 = b2, .eps = 1e-8f, .wd = 0.0f,
					.bc1 = (float)(1 - pow(b1, s)), .bc2 = (float)(1 - pow(b2, s)), .gscale = 1.0f };
		be.adamw(&be, g.params, NULL, LMT_DTYPE_F32, g.grads, g.m, g.v, g.nparams, &ah, NULL);
	}
	lmt_gpt_eval(&g, 0, &loss);
	loss /= N;
	tap_ok(fabs(first - log(V)) < 0.1 && loss < 0.05,
	       "AdamW (lr %g) on one batch of %d random tokens, %d steps: loss %.4f -> %.2e (ln V = %.4f), below 0.05",
	       lr, N, STEPS, first, loss, log(V));
	lmt_gpt_release(&g);
}

/* ---- schedule formulas ---- */

/* trainer.h's formulas, written out again */
static double lr_formula(int sched, double lr, double frac, double W, double U, double u)
{
	double lo = lr * frac;
	if (u < W)
		return lr * (u + 1) / W;
	if (u >= U)
		return lo;
	double q = (u - W) / (U - W);
	if (sched == LMT_SCHED_COSINE)
		return lo + (lr - lo) * (1 + cos(M_PI * q)) / 2;
	if (sched == LMT_SCHED_LINEAR)
		return lr - (lr - lo) * q;
	return lr;
}

static void test_lr_formulas(void)
{
	static const char *const names[] = { "cosine", "linear", "constant" };
	for (int s = 0; s < 3; s++) {
		int ok = 1, beyond = 1;
		for (int w = 0; w <= 4; w += 4) {
			struct lmt_train_cfg c = { 0 };
			c.lr = 3e-3, c.min_lr_frac = 0.1, c.warmup = (uint64_t)w, c.updates = 20, c.schedule = s;
			for (uint64_t u = 0; u < 26; u++) {
				double want = lr_formula(s, c.lr, c.min_lr_frac, w, 20, (double)u), got = lmt_lr_at(&c, u);
				int close = fabs(got - want) <= 1e-12 * want;
				if (u < c.updates)
					ok &= close;
				else
					beyond &= close;
				if (!close)
					tap_diag("%s, warm-up %d, update %llu: lmt_lr_at %.17g, trainer.h's formula %.17g",
						 names[s], w, (unsigned long long)u, got, want);
			}
		}
		tap_ok(ok, "lmt_lr_at, %s, warm-up 0 and 4 of 20 updates: trainer.h's formula (1e-12 relative) for "
			   "every update below 20", names[s]);
		tap_ok(beyond, "lmt_lr_at, %s: updates 20..25 (u >= U) give lr_min as trainer.h says", names[s]);
	}
}

/* ---- the step on a real dataset ---- */

static struct lmt_dataset ds;
static int have_ds;

static int make_dataset(void)
{
	static const char *const words[] = { "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far",
					     "away", "from", "home", "red", "blue", "big", "small", "tree", "river",
					     "sun", "moon", "said", "hello", "to", "friend" };
	char path[600];
	snprintf(path, sizeof path, "%s/c.jsonl", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	/* 300 documents of 1 to 24 words: 2 to ~40 tokens, so sequences of 32 carry
	 * very different numbers of valid targets */
	for (int d = 0; d < 300; d++) {
		int nw = 1 + (int)(lmt_rng_next(&rng) % 24);
		fputs("{\"text\":\"", f);
		for (int w = 0; w < nw; w++)
			fprintf(f, "%s%s", w ? " " : "", words[lmt_rng_next(&rng) % (sizeof words / sizeof *words)]);
		fputs(".\"}\n", f);
	}
	fclose(f);
	int rc = sh("%s/tok-train -q -v 300 -o %s/t.lmtok %s/c.jsonl > /dev/null", bin, dir, dir) ||
		 sh("%s/tok-encode -q -t %s/t.lmtok -o %s/s.lmtoks %s/c.jsonl > /dev/null", bin, dir, dir, dir) ||
		 sh("%s/shard-pack -q -L 32 --mode pad --split val=0 -o %s/P %s/s.lmtoks > /dev/null", bin, dir, dir);
	struct lmt_err err = { 0 };
	snprintf(path, sizeof path, "%s/P", dir);
	if (!rc)
		rc = lmt_dataset_open(&ds, path, &err);
	have_ds = tap_ok(rc == 0, "made a padded dataset with the tools in %s (%s)", bin, err.msg);
	if (have_ds)
		tap_diag("dataset: vocabulary %u, %llu training sequences of %u", ds.vocab_size,
			 (unsigned long long)ds.split_seqs[LMT_SPLIT_TRAIN], ds.seq_len);
	return rc;
}

static struct lmt_train_cfg train_cfg(int B, int accum)
{
	struct lmt_train_cfg c = { B, accum, 1, 1, 10, 1e-3, 0.1, 3, LMT_SCHED_COSINE, 0.9, 0.95, 1e-8, 0.1, 0, 1.0,
				   LMT_NONFINITE_STOP, 11, 0, LMT_DTYPE_F32, 0, 65536, 2000, 0, 0, 0, 0 };
	return c;
}

/* A small model for the dataset, GPT-2 initialisation from seed 3, and a trainer. */
static int make_trainer(struct lmt_gpt *g, struct lmt_trainer *tr, struct lmt_comm *comm, int B, int accum)
{
	struct lmt_err err = { 0 };
	struct lmt_train_cfg c = train_cfg(B, accum);
	if (make_model(g, (int)ds.seq_len, (int)ds.vocab_size, 2, 2, 16, 0, B, (int)ds.seq_len))
		return -1;
	if (lmt_gpt_init_weights(g, 3, &err) || lmt_trainer_init(tr, &c, &be, comm, g, &ds, 0, &err)) {
		tap_ok(0, "trainer B=%d accum=%d: %s", B, accum, err.msg);
		return -1;
	}
	return 0;
}

static double *host_grads(const struct lmt_gpt *g)
{
	float *f = xmalloc(g->nparams * 4);
	double *d = xmalloc(g->nparams * 8);
	lmt_gpt_gather(g, f, g->grads);
	for (size_t i = 0; i < g->nparams; i++)
		d[i] = f[i];
	free(f);
	return d;
}

/* ||a - b|| / ||a|| over all parameters; the worst tensor's max|a - b| / max|a| in *tw */
static double rel_diff(const struct lmt_gpt *g, const double *a, const double *b, double *tw, const char **tn)
{
	double num = 0, den = 0;
	*tw = 0;
	for (int i = 0; i < g->nt; i++) {
		double mx = 0, md = 0;
		for (size_t k = g->t[i].offset; k < g->t[i].offset + g->t[i].numel; k++) {
			num += (a[k] - b[k]) * (a[k] - b[k]);
			den += a[k] * a[k];
			mx = fmax(mx, fabs(a[k]));
			md = fmax(md, fabs(a[k] - b[k]));
		}
		if (mx > 0 && md / mx > *tw)
			*tw = md / mx, *tn = g->t[i].name;
	}
	return sqrt(num / den);
}

static void test_accumulation(void)
{
	struct lmt_comm comm;
	struct lmt_err err = { 0 };
	lmt_comm_open(&comm, NULL, &err);
	struct lmt_gpt g8, g2, gh;
	struct lmt_trainer t8, t2;
	struct lmt_step_stats s8, s2;
	if (make_trainer(&g8, &t8, &comm, 8, 1) || make_trainer(&g2, &t2, &comm, 2, 4))
		return;
	int rc8 = lmt_trainer_step(&t8, &s8, &err), rc2 = lmt_trainer_step(&t2, &s2, &err);
	if (!tap_ok(rc8 == 0 && rc2 == 0, "one update with B=8 x 1 and with B=2 x 4 (%s)", err.msg))
		return;
	/* the micro-batches' own counts of valid targets */
	size_t N2 = 2 * ds.seq_len;
	uint64_t cnt[4] = { 0 };
	for (int m = 0; m < 4; m++)
		for (size_t i = 0; i < N2; i++)
			cnt[m] += t2.h_tgt[m * N2 + i] >= 0;
	TAP_EQ_U64(s8.valid_tokens, s2.valid_tokens, "both count the same %llu valid targets (micro-batches: %llu %llu "
			"%llu %llu)", (unsigned long long)s8.valid_tokens, (unsigned long long)cnt[0],
			(unsigned long long)cnt[1], (unsigned long long)cnt[2], (unsigned long long)cnt[3]);
	/* the losses are sums of the same per-position float losses in the same order;
	 * the GEMMs see 64 instead of 256 rows, which may change roundings: 1e-6 */
	tap_ok(fabs(s8.loss - s2.loss) <= 1e-6 * s8.loss, "the loss is the same: %.9f and %.9f (%s)", s8.loss, s2.loss,
	       s8.loss == s2.loss ? "bitwise" : "1e-6 relative");
	double *a = host_grads(&g8), *b = host_grads(&g2), tw;
	const char *tn = "";
	double rd = rel_diff(&g8, a, b, &tw, &tn);
	/*
	 * Tolerance: the same sums in another order (per micro-batch partial sums in the
	 * weight GEMMs, bias and LayerNorm gradients): float rounding ~1e-7 per term,
	 * observed ~1e-7..1e-6. Norm-wise 1e-5, and every tensor's largest difference
	 * within 1e-4 of its largest gradient.
	 */
	tap_ok(rd <= 1e-5 && tw <= 1e-4,
	       "gradients of B=8 x 1 and B=2 x 4 agree: relative difference %.2g (<= 1e-5), worst tensor %s %.2g "
	       "(<= 1e-4)", rd, tn, tw);

	/* by hand on a third model with the same weights, from the step's micro-batches */
	if (make_model(&gh, (int)ds.seq_len, (int)ds.vocab_size, 2, 2, 16, 0, 2, (int)ds.seq_len))
		return;
	lmt_gpt_init_weights(&gh, 3, &err);
	double total = (double)s2.valid_tokens;
	be.zero(&be, gh.grads, gh.nparams * 4);
	for (int m = 0; m < 4; m++) {
		set_inputs(&gh, t2.h_tok + m * N2, t2.h_tgt + m * N2, t2.h_seg + m * N2);
		lmt_gpt_forward(&gh, 1, (float)(1.0 / total), NULL);
		lmt_gpt_backward(&gh, 1);
	}
	double *c = host_grads(&gh);
	tap_ok(!memcmp(c, b, gh.nparams * 8),
	       "lmt_trainer_step's gradient is bitwise the sum of forward/backward per micro-batch with dscale = "
	       "1 / %.0f", total);
	be.zero(&be, gh.grads, gh.nparams * 4);
	int usable = 1;
	for (int m = 0; m < 4; m++) {
		if (!cnt[m]) {
			usable = 0;
			continue;
		}
		set_inputs(&gh, t2.h_tok + m * N2, t2.h_tgt + m * N2, t2.h_seg + m * N2);
		lmt_gpt_forward(&gh, 1, (float)(1.0 / (4.0 * (double)cnt[m])), NULL);
		lmt_gpt_backward(&gh, 1);
	}
	double *w = host_grads(&gh), tw2;
	double rw = rel_diff(&g8, a, w, &tw2, &tn);
	tap_ok(usable && rw > 100 * 1e-5,
	       "the mean of per-micro-batch means (each normalised by its own count) differs by %.3g relative, "
	       "over 100 times the tolerance", rw);
	free(a), free(b), free(c), free(w);
	lmt_trainer_release(&t8), lmt_trainer_release(&t2);
	lmt_gpt_release(&g8), lmt_gpt_release(&g2), lmt_gpt_release(&gh);
}

static void test_schedule_in_step(void)
{
	struct lmt_comm comm;
	struct lmt_err err = { 0 };
	lmt_comm_open(&comm, NULL, &err);
	for (int accum = 1; accum <= 3; accum += 2) {
		struct lmt_gpt g;
		struct lmt_trainer tr;
		if (make_trainer(&g, &tr, &comm, 2, accum))
			return;
		int ok = 1;
		for (uint64_t u = 0; u < 12; u++) {
			struct lmt_step_stats st;
			if (lmt_trainer_step(&tr, &st, &err)) {
				tap_diag("update %llu: %s", (unsigned long long)u + 1, err.msg);
				ok = 0;
				break;
			}
			double want = lmt_lr_at(&tr.cfg, u), f = lr_formula(tr.cfg.schedule, tr.cfg.lr, tr.cfg.min_lr_frac,
									      (double)tr.cfg.warmup, (double)tr.cfg.updates, (double)u);
			if (st.lr != want || st.update != u + 1 || fabs(st.lr - f) > 1e-12 * f) {
				tap_diag("accum %d, update %llu: lr %.17g, lmt_lr_at %.17g, formula %.17g", accum,
					 (unsigned long long)u + 1, st.lr, want, f);
				ok = 0;
			}
		}
		tap_ok(ok, "accum %d: the lr of each of 12 updates (warm-up 3, 10 scheduled, 2 beyond) is lmt_lr_at(u) "
			   "exactly and the formula: the schedule advances once per update", accum);
		lmt_trainer_release(&tr);
		lmt_gpt_release(&g);
	}
}

static void test_determinism(void)
{
	struct lmt_comm comm;
	struct lmt_err err = { 0 };
	lmt_comm_open(&comm, NULL, &err);
	struct lmt_gpt g[2];
	struct lmt_trainer tr[2];
	double loss[2][3];
	for (int r = 0; r < 2; r++) {
		if (make_trainer(&g[r], &tr[r], &comm, 2, 2))
			return;
		for (int u = 0; u < 3; u++) {
			struct lmt_step_stats st;
			lmt_trainer_step(&tr[r], &st, &err);
			loss[r][u] = st.loss;
		}
	}
	size_t n = g[0].nparams * 4;
	float *p0 = xmalloc(n), *p1 = xmalloc(n), *m0 = xmalloc(n), *m1 = xmalloc(n);
	lmt_gpt_gather(&g[0], p0, g[0].params);
	lmt_gpt_gather(&g[1], p1, g[1].params);
	be.to_host(&be, m0, g[0].v, n), be.to_host(&be, m1, g[1].v, n);
	size_t moved = 0;
	struct lmt_gpt fresh;
	make_model(&fresh, (int)ds.seq_len, (int)ds.vocab_size, 2, 2, 16, 0, 2, (int)ds.seq_len);
	lmt_gpt_init_weights(&fresh, 3, &err);
	float *p00 = xmalloc(n);
	lmt_gpt_gather(&fresh, p00, fresh.params);
	for (size_t i = 0; i < n / 4; i++)
		moved += p00[i] != p0[i];
	tap_ok(!memcmp(p0, p1, n) && !memcmp(m0, m1, n) && !memcmp(loss[0], loss[1], sizeof loss[0]) && moved > n / 8,
	       "two 3-update runs (same seed, %d threads) give bitwise identical losses, parameters and moments "
	       "(%zu of %zu parameters moved)", be.threads, moved, n / 4);
	free(p0), free(p1), free(m0), free(m1), free(p00);
	lmt_gpt_release(&fresh);
	for (int r = 0; r < 2; r++)
		lmt_trainer_release(&tr[r]), lmt_gpt_release(&g[r]);
}

/* ---- llm.c's model file ---- */

static void test_llmc(void)
{
	enum { maxT = 8, V = 11, L = 2, NH = 2, C = 8, Vp = 128 };
	struct ref r = { .maxT = maxT, .V = V, .Vp = Vp, .L = L, .NH = NH, .C = C, .untied = 0 };
	ref_layout(&r);
	int32_t hdr[256] = { 20240326, 3, maxT, V, L, NH, C, Vp };
	size_t bytes = 1024 + r.n * 4;
	char *buf = xmalloc(bytes), path[600], out[600];
	memcpy(buf, hdr, 1024);
	/* recognisable values: tensor i, element k holds 1000 (i + 1) + k, exact in float */
	for (int i = 0; i < NT - 1; i++)
		for (size_t k = 0; k < r.off[i + 1] - r.off[i]; k++) {
			float v = (float)(1000 * (i + 1) + k);
			memcpy(buf + 1024 + (r.off[i] + k) * 4, &v, 4);
		}
	snprintf(path, sizeof path, "%s/gpt2-tiny.bin", dir);
	snprintf(out, sizeof out, "%s/gpt2-tiny-out.bin", dir);
	FILE *f = fopen(path, "wb");
	fwrite(buf, 1, bytes, f);
	fclose(f);
	struct lmt_gpt g;
	struct lmt_err err = { 0 };
	int rc = lmt_gpt_load_llmc(&g, path, &be, &err);
	if (!tap_ok(rc == 0, "load a hand-written llm.c model file (%s)", err.msg))
		goto out;
	tap_ok(g.cfg.max_T == maxT && g.cfg.V == V && g.cfg.Vp == Vp && g.cfg.L == L && g.cfg.NH == NH && g.cfg.C == C &&
	       !g.cfg.untied && g.nparams == r.n,
	       "its header gives maxT %d, V %d, Vp %d, L %d, NH %d, C %d, tied, %zu parameters", g.cfg.max_T, g.cfg.V,
	       g.cfg.Vp, g.cfg.L, g.cfg.NH, g.cfg.C, g.nparams);
	float *h = xmalloc(g.nparams * 4);
	lmt_gpt_gather(&g, h, g.params);
	int layout = 1;
	for (int i = 0; i < NT - 1; i++) {
		const struct lmt_tensor *t = lmt_gpt_tensor(&g, tname[i]);
		if (!t || t->numel != r.off[i + 1] - r.off[i]) {
			layout = 0;
			continue;
		}
		for (size_t k = 0; k < t->numel; k++)
			layout &= h[t->offset + k] == (float)(1000 * (i + 1) + k);
	}
	tap_ok(layout, "every tensor (wte .. lnfb) reads back from its documented place");
	free(h);
	rc = lmt_gpt_save_llmc(&g, out, &err);
	char *back = NULL;
	size_t nb = 0;
	if (!rc)
		rc = lmt_read_file(out, &back, &nb, &err);
	tap_ok(rc == 0 && nb == bytes && !memcmp(back, buf, bytes), "saved again, the file is byte-identical (%zu bytes)",
	       nb);
	free(back);
	lmt_gpt_release(&g);
	struct lmt_gpt_config ucfg = { maxT, V, Vp, L, NH, C, 1 };
	if (lmt_gpt_init(&g, &ucfg, &be, &err) == 0) {
		rc = lmt_gpt_save_llmc(&g, out, &err);
		tap_ok(rc == LMT_EUNSUPPORTED && strstr(err.msg, out), "an untied model is not saved in llm.c's format: %s",
		       err.msg);
		lmt_gpt_release(&g);
	}

	/* refusals, each naming the file */
	struct {
		const char *what;
		int field, value;
		size_t size;
		int code;
	} bad[] = {
		{ "a wrong magic", 0, 20240327, 0, LMT_EFORMAT },
		{ "version 5 (llm.c's bf16)", 1, 5, 0, LMT_EVERSION },
		{ "a file cut inside the header", -1, 0, 600, LMT_EFORMAT },
		{ "a file cut inside the parameters", -1, 0, 0, LMT_EFORMAT },
		{ "a file with 4 bytes too many", -1, 0, 1, LMT_EFORMAT },
		{ "a non-zero reserved header word (9)", 9, 1, 0, LMT_EFORMAT },
		{ "a non-zero last header word (255)", 255, -7, 0, LMT_EFORMAT },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char p[600];
		snprintf(p, sizeof p, "%s/bad-%zu.bin", dir, i);
		int32_t old = bad[i].field >= 0 ? ((int32_t *)buf)[bad[i].field] : 0;
		if (bad[i].field >= 0)
			((int32_t *)buf)[bad[i].field] = bad[i].value;
		size_t n = bad[i].size == 600 ? 600 : bad[i].size == 1 ? bytes + 4 : bad[i].field < 0 ? bytes - 4 : bytes;
		char *tmp = xmalloc(bytes + 4);
		memcpy(tmp, buf, bytes);
		f = fopen(p, "wb");
		fwrite(tmp, 1, n, f);
		fclose(f);
		free(tmp);
		if (bad[i].field >= 0)
			((int32_t *)buf)[bad[i].field] = old;
		memset(&err, 0, sizeof err);
		rc = lmt_gpt_load_llmc(&g, p, &be, &err);
		tap_ok(rc == bad[i].code && strstr(err.msg, p), "%s is refused, naming the file: %s", bad[i].what, err.msg);
		if (rc == 0)
			lmt_gpt_release(&g);
	}
out:
	free(buf);
}

int main(void)
{
	struct lmt_err err = { 0 };
	bin = getenv("LMT_BIN") ? getenv("LMT_BIN") : "build/bin";
	lmt_rng_seed(&rng, 424242, 0);
	if (!mkdtemp(dir))
		return 1;
	/* one thread: these models are so small that OpenMP's spinning between
	 * parallel regions costs more than it saves, badly so on a loaded machine;
	 * the determinism check at the end runs with two */
	if (!tap_ok(lmt_backend_open(&be, "cpu", 1, &err) == 0, "the CPU backend, 1 thread (%s)", err.msg))
		return tap_done();
	gradient_case(1, 0);
	gradient_case(0, 1);
	test_make_batch();
	test_alignment();
	test_overfit();
	test_recompute();
	test_layout();
	test_precision_loss();
	test_lr_formulas();
	test_llmc();
	if (make_dataset() == 0) {
		test_accumulation();
		test_schedule_in_step();
		be.release(&be);
		lmt_backend_open(&be, "cpu", 2, &err);
		test_determinism();
		lmt_dataset_close(&ds);
	}
	be.release(&be);
	sh("rm -rf '%s'", dir);
	return tap_done();
}
