/*
 * test-ledger: the byte ledger (model/ledger.h) and the planning arithmetic
 * (plan/fit.h, plan/plan.h, plan/budget.h) against allocations and hand-computed
 * values.
 *
 *  - predicted = allocated: models built on the CPU backend in fp32, bf16 and fp16,
 *    tied and untied, with and without recompute: the ledger's total (state,
 *    activations, inputs) equals the bytes the backend holds (be.mem_now), exactly;
 *  - GPT-2 124M's parameter count (124,475,904 with the vocabulary padded to 50304)
 *    and its 16 (fp32) and 18 (bf16) bytes per parameter of model state;
 *  - the ZeRO formulas, each term written out by hand from the layout's sizes;
 *  - a small model's activations summed by hand, part by part;
 *  - least squares recovers planted coefficients; the power law a planted exponent;
 *  - Young's interval and the expected lost work, hand-computed;
 *  - the planner: a hand-computed communication volume; nothing kept over memory;
 *    tensor parallel inside a node unless allowed; the dropped layouts counted by
 *    reason; the comparison's strategies at the full degree;
 *  - the safe micro-batch: within the budget, one more is not (plan/safebatch.h);
 *  - a run's measured activations, the error percentage and the budget's inputs
 *    from pilots, hand-computed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model/ledger.h"
#include "model/model.h"
#include "plan/budget.h"
#include "plan/fit.h"
#include "plan/plan.h"
#include "plan/safebatch.h"
#include "tap.h"

static struct lmt_ledger_cfg cfg(int L, int NH, int C, int T, int V, int untied, int B, int dtype, int rc)
{
	struct lmt_ledger_cfg c = { .model = { .L = L, .NH = NH, .C = C, .max_T = T, .V = V, .untied = untied },
				    .B = B, .T = T, .dtype = dtype, .recompute_every = rc, .world = 1, .tp = 1, .pp = 1,
				    .cp = 1 };
	c.model.Vp = lmt_gpt_padded_vocab(V);
	return c;
}

/* the model train would build for c, on the CPU backend: be.mem_now after it */
static void predicted_is_allocated(struct lmt_backend *be, const struct lmt_ledger_cfg *c, const char *what)
{
	struct lmt_gpt g;
	struct lmt_err err = { 0 };
	struct lmt_ledger l;
	size_t before = be->mem_now;
	int rc = lmt_gpt_init(&g, &c->model, be, &err) || lmt_gpt_set_precision(&g, c->dtype, &err) ||
		 lmt_gpt_set_recompute(&g, c->recompute_every, &err) || lmt_gpt_alloc_optimizer(&g, &err) ||
		 lmt_gpt_alloc_acts(&g, c->B, c->T, &err);
	if (!tap_ok(!rc && !lmt_ledger_build(c, &l, &err), "%s: model built and ledger made", what)) {
		tap_diag("%s", err.msg);
		return;
	}
	TAP_EQ_U64(be->mem_now - before, l.total, "%s: the ledger's total is the bytes allocated", what);
	TAP_EQ_U64(g.nacts, l.acts_total, "%s: activations as lmt_gpt_alloc_acts carved them", what);
	int same = 1;
	for (int d = 0; d < LMT_DTYPE_COUNT; d++)
		same &= g.act_bytes.by_dtype[d] == l.acts.by_dtype[d];
	tap_ok(same, "%s: activation bytes by dtype", what);
	lmt_gpt_release(&g);
}

static void test_gpt2(void)
{
	struct lmt_ledger_cfg c = cfg(12, 12, 768, 1024, 50257, 0, 1, LMT_DTYPE_F32, 0);
	struct lmt_ledger l;
	lmt_ledger_build(&c, &l, NULL);
	/* wte 50304 x 768, wpe 1024 x 768, 12 layers of 12 C^2 + 13 C, lnf 2 C */
	size_t C = 768, want = 50304 * C + 1024 * C + 12 * (12 * C * C + 13 * C) + 2 * C;
	TAP_EQ_U64(l.nparams, want, "GPT-2 124M: %zu parameters", want);
	TAP_EQ_U64(want, 124475904, "GPT-2 124M: the count llm.c prints for the padded vocabulary");
	TAP_EQ_U64(l.state_total, 16 * want, "fp32 Adam: 16 bytes per parameter (4 + 4 + 8)");
	c.dtype = LMT_DTYPE_BF16;
	lmt_ledger_build(&c, &l, NULL);
	TAP_EQ_U64(l.state_total, 18 * want, "bf16 Adam here: 18 bytes per parameter (4 + 2 + 4 + 8: fp32 grads)");
}

/* the brief's per-rank formulas, with the layer stride and the outer units by hand */
static void test_zero(void)
{
	for (int untied = 0; untied <= 1; untied++)
		for (int W = 1; W <= 3; W++)
			for (int z = 0; z <= 3; z++) {
				struct lmt_ledger_cfg c = cfg(3, 2, 32, 16, 300, untied, 2, LMT_DTYPE_BF16, 0);
				struct lmt_ledger l;
				c.world = W;
				c.zero = z;
				lmt_ledger_build(&c, &l, NULL);
				size_t C = 32, Vp = 384, ls = 12 * C * C + 13 * C;
				size_t outer = Vp * C + 16 * C + 2 * C + (untied ? Vp * C : 0), P = outer + 3 * ls;
				size_t S = (P + W - 1) / W, pad = S * W, ds = 2, e[5];
				int zz = W == 1 ? 0 : z;
				size_t whole = zz ? pad : P;
				e[0] = zz == 3 ? 4 * S : 4 * whole;
				e[1] = zz == 3 ? 0 : ds * whole;
				e[2] = zz >= 2 ? 4 * S : 4 * whole;
				e[3] = zz ? 8 * S : 8 * P;
				e[4] = zz == 2 ? 4 * (outer + 4 * ls)
				       : zz == 3 ? 4 * (outer + 4 * ls) + (4 + ds) * (outer + 2 * ls) : 0;
				const struct lmt_state_bytes *s = &l.state;
				int ok = l.nparams == P && s->params == e[0] && s->working == e[1] && s->grads == e[2] &&
					 s->optimizer == e[3] && s->staging == e[4];
				if (!tap_ok(ok, "ZeRO-%d on %d ranks (%s): the five state terms by hand", z, W,
					    untied ? "untied" : "tied"))
					tap_diag("got %zu %zu %zu %zu %zu, want %zu %zu %zu %zu %zu", s->params, s->working,
						 s->grads, s->optimizer, s->staging, e[0], e[1], e[2], e[3], e[4]);
			}
}

/* fp32, no recompute, every part a multiple of 64 bytes (N = 16, C = 64): the sum
 * of model.c's parts written out */
static void test_acts_by_hand(void)
{
	struct lmt_ledger_cfg c = cfg(2, 4, 64, 16, 200, 0, 1, LMT_DTYPE_F32, 0);
	struct lmt_ledger l;
	lmt_ledger_build(&c, &l, NULL);
	size_t N = 16, C = 64, NH = 4, L = 2, Vp = 256;
	size_t slot = N * C + 2 * N + 3 * N * C + N * C + N * NH + N * C + N * C + 2 * N + 4 * N * C + 4 * N * C;
	size_t want = 4 * ((L + 1) * N * C + L * slot + N * C + 2 * N + N * Vp + N + N * C + 4 * N * C + N * C +
			   3 * N * C) + 16 * 8;
	TAP_EQ_U64(l.acts_total, want, "activations of a 2-layer model summed by hand");
	TAP_EQ_U64(l.acts.slot, 4 * slot, "one block's slot by hand");
	c.recompute_every = 1;
	lmt_ledger_build(&c, &l, NULL);
	TAP_EQ_U64(l.acts_total, want - 4 * slot, "recompute every block: one shared slot instead of two");
	TAP_EQ_U64(lmt_ledger_bytes(&l, "attention_scores"), 1 * 1 * NH * 16 * 16 * 4,
		   "the what-if T x T scores: one slot's B NH T^2 fp32");
}

static void test_lstsq(void)
{
	double X[6 * 3], y[6], beta[3], want[3] = { 3.5, -2, 1e6 };
	for (int i = 0; i < 6; i++) {
		X[i * 3] = 1e6 * (i + 1);
		X[i * 3 + 1] = 1e3 * (i * i);
		X[i * 3 + 2] = 1;
		y[i] = want[0] * X[i * 3] + want[1] * X[i * 3 + 1] + want[2];
	}
	int rc = lmt_lstsq(X, y, 6, 3, beta, NULL);
	/* exact data: only rounding (and the 1e-12 ridge) separate the result from the
	 * plant; 1e-6 relative is far above both and far below any wrong solve */
	int ok = !rc;
	for (int k = 0; k < 3; k++)
		ok &= fabs(beta[k] - want[k]) <= 1e-6 * fabs(want[k]);
	tap_ok(ok, "least squares recovers planted coefficients (%g %g %g)", beta[0], beta[1], beta[2]);
}

static void test_powerlaw(void)
{
	/* L(C) = 1.7 + 400 C^-0.12 at 8 compute budgets over 4 decades, with a
	 * deterministic +-0.3% wiggle */
	double C[8], L[8], E = 1.7, A = 400, alpha = 0.12;
	for (int i = 0; i < 8; i++) {
		C[i] = 1e15 * pow(10, i * 4.0 / 7);
		L[i] = (E + A * pow(C[i], -alpha)) * (1 + 0.003 * ((i % 2) ? 1 : -1));
	}
	struct lmt_powerlaw p;
	int rc = lmt_powerlaw_fit(C, L, 8, 0, &p, NULL);
	/* tolerance: with a 0.3% wiggle on losses about 1.3 above E over 4 decades the
	 * exponent is determined to about +-0.01 (E and alpha trade off); a wrong fit
	 * (E pinned at 0, a sign error) is off by far more: E pinned at 0 gives alpha ~ 0.08 */
	tap_ok(!rc && fabs(p.alpha - alpha) < 0.015, "power law: planted exponent 0.12 recovered (%.4f, E %.3f)",
	       p.alpha, p.E);
	double hw, pred = lmt_powerlaw_predict(&p, 1e20, &hw);
	double truth = E + A * pow(1e20, -alpha);
	tap_ok(fabs(pred - truth) < 0.02 * truth && isfinite(hw) && hw > 0,
	       "power law: extrapolated a decade on within 2%% (%.4f vs %.4f), with an interval (+-%.4f)", pred, truth,
	       hw);
	for (int i = 0; i < 8; i++)
		L[i] = E + A * pow(C[i], -alpha);
	lmt_powerlaw_fit(C, L, 8, 0, &p, NULL);
	/* exact data: the scan's grid on E (lmin / 400 / 400 / 400 after three passes)
	 * limits alpha to ~1e-4 */
	tap_ok(fabs(p.alpha - alpha) < 1e-3 && fabs(p.E - E) < 0.01, "power law on exact data: alpha %.5f, E %.4f",
	       p.alpha, p.E);
	tap_ok(lmt_powerlaw_fit(C, L, 1, 0, &p, NULL) < 0, "one point is refused");
}

static void test_budget(void)
{
	/* C = 60 s per checkpoint, MTBF one day: tau = sqrt(2 * 60 * 86400) = 3219.94 s */
	double tau = lmt_young_interval(60, 86400);
	tap_ok(fabs(tau - 3219.937888) < 1e-3, "Young's interval sqrt(2 C M) = 3219.94 s (%.6f)", tau);
	tap_ok(fabs(lmt_lost_per_failure(tau, 600) - (1609.968944 + 600)) < 1e-3,
	       "expected lost work per failure: tau / 2 + restart = 2209.97 s");
	struct lmt_budget_opts o = { .target_tokens = 1e9, .mtbf_s = 86400, .restart_s = 600, .idle_frac = 0.05 };
	struct lmt_budget_in in = { .tokens_per_s = 1e5, .devices = 8, .ckpt_cost_s = 60 };
	struct lmt_budget b;
	int rc = lmt_budget_compute(&o, &in, &b, NULL);
	/* by hand: 1e4 s of training, 3 checkpoints (180 s), w = 10180 / (1 - 2209.97 /
	 * 86400) = 10447.22 s, 0.120917 failures, 267.22 s lost; wall w / 0.95 */
	double w = 10180 / (1 - 2209.968944 / 86400);
	tap_ok(!rc && b.ckpts == 3 && fabs(b.failures - w / 86400) < 1e-9 && fabs(b.fail_s - w / 86400 * 2209.968944) <
	       1e-6 && fabs(b.wall_s - w / 0.95) < 1e-6, "budget: checkpoints, failures and wall time by hand (%g %g %g)",
	       b.ckpts, b.failures, b.wall_s);
	tap_ok(fabs(b.device_h_total - 8 * w / 0.95 / 3600) < 1e-9, "budget: device-hours are 8 x the wall time");
	tap_ok(fabs(b.overhead_frac - (60 / tau + tau / (2 * 86400))) < 1e-12, "checkpoint overhead C/tau + tau/2M");
}

static void test_plan(void)
{
	struct lmt_ledger_cfg c = cfg(4, 4, 64, 32, 300, 0, 2, LMT_DTYPE_BF16, 0);
	struct lmt_plan_opts o = { .gpus = 4, .gpus_per_node = 2, .intra_bw = 100e9, .inter_bw = 10e9, .mfu = 0.5,
				   .peak_flops = 1e12, .global_batch = 8 };
	struct lmt_ledger l;
	lmt_plan_defaults(&o);
	lmt_ledger_build(&c, &l, NULL);
	struct lmt_plan_layout x = { .dp = 2, .tp = 2, .pp = 1, .cp = 1, .zero = 0 };
	lmt_plan_eval(&c, &o, &x);
	/* by hand: m = 8 / (2 x 2) = 2 micro-batches; tensor: 2 x 4 layers x 4
	 * all-reduces x 2 (1/2) x (2 x 32 x 64 x 2 bytes); data: 2 (1/2) x 4 x P / 2,
	 * across nodes (stride 2 x 2 ranks > 2 per node) */
	double P = (double)l.nparams, tp_bytes = 2 * 4 * 4 * 2 * 0.5 * (2 * 32 * 64 * 2.0);
	double dp_bytes = 2 * 0.5 * 4 * P / 2;
	tap_ok(x.m == 2 && fabs(x.b_tp - tp_bytes) < 1e-6 && fabs(x.b_dp - dp_bytes) < 1e-6,
	       "planner: tensor %.0f and data %.0f bytes per step by hand", tp_bytes, dp_bytes);
	tap_ok(fabs(x.t_dp - dp_bytes / 10e9) < 1e-15 && fabs(x.t_tp - tp_bytes / 100e9) < 1e-15 && x.dp_inter &&
	       !x.tp_inter, "planner: data parallel over the inter-node link, tensor inside the node");
	struct lmt_plan_layout all[256];
	int n = 0, over = 0, tp_out = 0;
	o.memory = 0.6 * (double)l.total; /* below a full replica: some layouts must go */
	lmt_plan_enumerate(&c, &o, all, 256, &n, NULL);
	for (int i = 0; i < n; i++) {
		over += !all[i].drop && all[i].mem > o.memory;
		tp_out += !all[i].drop && all[i].tp > o.gpus_per_node;
	}
	int dropped_mem = 0;
	for (int i = 0; i < n; i++)
		dropped_mem += all[i].drop && !strcmp(all[i].drop, "over memory");
	tap_ok(n > 0 && !over && dropped_mem > 0, "planner: %d layouts, none kept over memory, %d dropped for it", n,
	       dropped_mem);
	tap_ok(!tp_out, "planner: no tensor-parallel group kept across nodes");
	o.tp_across_nodes = 1;
	o.memory = 0;
	lmt_plan_enumerate(&c, &o, all, 256, &n, NULL);
	for (int i = 0; i < n; i++)
		tp_out += !all[i].drop && all[i].tp > o.gpus_per_node;
	tap_ok(tp_out > 0, "planner: with --allow-tp-across-nodes, tp 4 over 2-device nodes is kept");
	/* fixed degrees: only their layouts; degrees not dividing G and a global batch
	 * that is not a multiple of the micro-batch are refused with the reason */
	o.fix_tp = 2;
	int rc = lmt_plan_enumerate(&c, &o, all, 256, &n, NULL), other = 0;
	for (int i = 0; i < n; i++)
		other += all[i].tp != 2;
	tap_ok(!rc && n > 0 && !other, "planner: --tp 2 keeps %d layouts, all of tp 2", n);
	struct lmt_err err = { 0 };
	o.fix_tp = 3;
	rc = lmt_plan_enumerate(&c, &o, all, 256, &n, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "tensor parallel 3 does not divide the 4 devices"),
	       "planner: tp 3 of 4 devices refused: %s", err.msg);
	o.fix_tp = 2;
	o.fix_pp = 4;
	rc = lmt_plan_enumerate(&c, &o, all, 256, &n, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "tp x pp x cp = 8"), "planner: tp 2 x pp 4 of 4 refused: %s",
	       err.msg);
	o.fix_tp = o.fix_pp = 0;
	o.global_batch = 7;
	rc = lmt_plan_enumerate(&c, &o, all, 256, &n, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "global batch 7 is not a multiple of the micro-batch 2"),
	       "planner: global batch 7 of micro-batch 2 refused: %s", err.msg);
}

/* the dropped layouts counted by reason; the comparison's strategies */
static void test_plan_reports(void)
{
	struct lmt_ledger_cfg c = cfg(4, 4, 64, 32, 300, 0, 2, LMT_DTYPE_BF16, 0);
	struct lmt_plan_opts o = { .gpus = 4, .gpus_per_node = 2, .global_batch = 8 };
	struct lmt_plan_layout all[256];
	struct lmt_ledger l;
	int n = 0, counts[LMT_PLAN_DROP_COUNT], by_hand[LMT_PLAN_DROP_COUNT] = { 0 }, total = 0, fit = 0;
	lmt_plan_defaults(&o);
	lmt_ledger_build(&c, &l, NULL);
	o.memory = 0.6 * (double)l.total;
	lmt_plan_enumerate(&c, &o, all, 256, &n, NULL);
	lmt_plan_count_dropped(all, n, counts);
	for (int i = 0; i < n; i++) {
		fit += !all[i].drop;
		for (int r = 0; r < LMT_PLAN_DROP_COUNT; r++)
			by_hand[r] += all[i].drop == lmt_plan_drop_reasons[r];
	}
	int same = 1;
	for (int r = 0; r < LMT_PLAN_DROP_COUNT; r++) {
		same &= counts[r] == by_hand[r];
		total += counts[r];
	}
	tap_ok(same && total + fit == n && counts[LMT_PLAN_DROP_MEMORY] > 0 && counts[LMT_PLAN_DROP_TP_NODES] > 0,
	       "dropped layouts by reason: %d over memory, %d tp across nodes, %d kept, of %d",
	       counts[LMT_PLAN_DROP_MEMORY], counts[LMT_PLAN_DROP_TP_NODES], fit, n);
	struct lmt_plan_layout s;
	lmt_plan_strategy_eval(&c, &o, &lmt_plan_strategies[3], &s);
	tap_ok(!strcmp(lmt_plan_strategies[3].name, "ZeRO-3") && s.dp == 4 && s.tp == 1 && s.zero == 3 &&
	       fabs(s.b_dp - 3 * 0.75 * 4 * (double)l.nparams) < 1e-6,
	       "ZeRO-3 alone on 4 devices: dp 4, 3 (n-1)/n x 4 bytes per parameter (%.0f)", s.b_dp);
	lmt_plan_strategy_eval(&c, &o, &lmt_plan_strategies[4], &s);
	tap_ok(s.tp == 4 && s.dp == 1 && s.drop == lmt_plan_drop_reasons[LMT_PLAN_DROP_TP_NODES],
	       "tensor alone at 4 over 2-device nodes: dropped for crossing nodes");
}

static void test_safe_microbatch(void)
{
	struct lmt_ledger_cfg c = cfg(2, 2, 64, 64, 300, 0, 1, LMT_DTYPE_F32, 0);
	double at4 = lmt_safe_bytes_at(&c, 4, NULL), at5 = lmt_safe_bytes_at(&c, 5, NULL);
	double budget = (at4 + at5) / 2; /* strictly between B = 4 and 5: the answer is 4 */
	tap_ok(at4 < at5 && lmt_safe_microbatch(&c, NULL, budget) == 4, "safe micro-batch: 4 within %.0f bytes "
	       "(4 needs %.0f, 5 %.0f)", budget, at4, at5);
	tap_ok(lmt_safe_microbatch(&c, NULL, at4) == 4, "safe micro-batch: a budget of exactly B = 4's bytes gives 4");
	tap_ok(lmt_safe_microbatch(&c, NULL, lmt_safe_bytes_at(&c, 1, NULL) - 1) == 0,
	       "safe micro-batch: 0 where not even 1 fits");
	/* with a fit: the state plus the fitted activations, here only the constant term: 1000 bytes */
	double beta[LMT_ACT_FEATURES] = { 0, 0, 0, 1000 };
	struct lmt_ledger l;
	c.B = 3;
	lmt_ledger_build(&c, &l, NULL);
	tap_ok(lmt_safe_bytes_at(&c, 3, beta) == (double)l.state_total + 1000, "with a fit: state + fitted bytes");
}

static void test_measured(void)
{
	struct lmt_run_measured m[2];
	memset(m, 0, sizeof m);
	m[0] = (struct lmt_run_measured){ .params = 100, .weights_working = 50, .grads = 100, .optimizer = 200,
					   .staging = -1, .activations = 7, .peak_alloc = 1000, .cfg = { .world = 2 },
					   .wall_s = 30, .tokens_per_s = 500 };
	m[1] = (struct lmt_run_measured){ .peak_alloc = -1, .activations = 123, .staging = 10, .cfg = { .world = 4 },
					   .step_s = 0.5, .updates = 100, .tokens_per_s = 1000, .ckpt_cost_s = 9,
					   .eval_s = 2, .eval_every = 20 };
	tap_ok(lmt_run_measured_acts(&m[0]) == 1000 - 100 - 50 - 100 - 200 && lmt_run_measured_acts(&m[1]) == 123,
	       "measured activations: the peak less the state (550), else the counter (123)");
	tap_ok(lmt_fit_error_pct(110, 100) == 10 && lmt_fit_error_pct(0, 0) == 0 && isinf(lmt_fit_error_pct(1, 0)),
	       "error percentage: 110 against 100 is +10%%; 0 against 0 is 0; 1 against 0 infinite");
	struct lmt_budget_in in;
	lmt_budget_in_from_pilots(m, 2, 16, &in);
	/* by hand: 30 s x 2 + 0.5 s x 100 x 4 = 260 device-seconds; 1000 tokens/s on 4 scaled to 16 */
	tap_ok(in.pilots_device_s == 260 && in.devices == 16 && in.tokens_per_s == 4000 && in.ckpt_cost_s == 9 &&
	       in.eval_s == 2 && in.eval_every_s == 10, "budget inputs from pilots by hand (%g device-s, %g tokens/s)",
	       in.pilots_device_s, in.tokens_per_s);
	lmt_budget_in_from_pilots(m, 2, 0, &in);
	tap_ok(in.devices == 4 && in.tokens_per_s == 1000, "budget inputs: devices default to the last pilot's world");
}

int main(void)
{
	struct lmt_backend be;
	struct lmt_err err = { 0 };
	if (lmt_backend_open(&be, "cpu", 1, &err)) {
		printf("not ok 1 - cpu backend: %s\n1..1\n", err.msg);
		return 1;
	}
	static const int dts[] = { LMT_DTYPE_F32, LMT_DTYPE_BF16, LMT_DTYPE_F16 };
	for (int d = 0; d < 3; d++)
		for (int untied = 0; untied <= 1; untied++)
			for (int rc = 0; rc <= 2; rc++) {
				char what[96];
				struct lmt_ledger_cfg c = cfg(3, 2, 48, 24, 333, untied, 3, dts[d], rc);
				snprintf(what, sizeof what, "%s, %s, recompute %d", lmt_dtype_name(dts[d]),
					 untied ? "untied" : "tied", rc);
				predicted_is_allocated(&be, &c, what);
			}
	test_gpt2();
	test_zero();
	test_acts_by_hand();
	test_lstsq();
	test_powerlaw();
	test_budget();
	test_plan();
	test_plan_reports();
	test_safe_microbatch();
	test_measured();
	be.release(&be);
	return tap_done();
}
