/*
 * memledger: the bytes of a training step predicted before the run, checked
 * against measured runs, and turned into a safe micro-batch, a layout plan and a
 * compute budget.
 *
 *	memledger --layers 12 --heads 12 --channels 768 --context 1024 -B 8 --precision bf16
 *	memledger --run runs/latest                     # a run's own configuration
 *	memledger --fit runs/sweep-*                    # measured against predicted
 *	memledger --safe-microbatch -T 256 --memory 2G  # the largest micro-batch that fits
 *	memledger --plan --gpus 64 --gpus-per-node 8 --memory 80G ...
 *	memledger --compare --gpus 8                    # DDP, ZeRO-1/2/3, tensor, pipeline, context
 *	memledger --budget --target-tokens 1e10 --mtbf 86400 runs/pilot-*
 *
 * The arithmetic is the library's: the ledger asks the trainer's own model code
 * (model/ledger.h), the fits, the planner and the budget are lib/plan/. This file
 * parses, calls and prints: JSONL on stdout when it is not a terminal (--jsonl
 * forces it), a table on a terminal.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/json.h"
#include "model/ledger.h"
#include "plan/budget.h"
#include "plan/fit.h"
#include "plan/plan.h"
#include "plan/runread.h"
#include "core/pathcheck.h"
#include "plan/safebatch.h"
#include "report/planrec.h"
#include "cfgopts.h"
#include "tool.h"

enum {
	OPT_CONFIG = OPT_TOOL_BASE, OPT_RUN, OPT_VOCAB, OPT_PRECISION, OPT_RECOMPUTE, OPT_STATS_EVERY, OPT_WORLD, OPT_ZERO, OPT_TP, OPT_PP, OPT_CP, OPT_JSONL, OPT_FIT, OPT_SAFE,
	OPT_MEMORY, OPT_MARGIN, OPT_PLAN, OPT_COMPARE, OPT_BUDGET, OPT_PARAMS, OPT_GPUS, OPT_GPN, OPT_INTRA, OPT_INTER,
	OPT_MFU, OPT_PEAK, OPT_GLOBAL, OPT_TP_ACROSS, OPT_TOP, OPT_TARGET, OPT_MTBF, OPT_RESTART, OPT_IDLE,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "jsonl", no_argument, NULL, OPT_JSONL },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "run", required_argument, NULL, OPT_RUN },
	{ "layers", required_argument, NULL, OPT_MODEL_LAYERS },
	{ "heads", required_argument, NULL, OPT_MODEL_HEADS },
	{ "channels", required_argument, NULL, OPT_MODEL_CHANNELS },
	{ "context", required_argument, NULL, OPT_MODEL_CONTEXT },
	{ "vocab", required_argument, NULL, OPT_VOCAB },
	{ "untie", no_argument, NULL, OPT_MODEL_UNTIE },
	{ "micro-batch", required_argument, NULL, 'B' },
	{ "seq-len", required_argument, NULL, 'T' },
	{ "precision", required_argument, NULL, OPT_PRECISION },
	{ "recompute", required_argument, NULL, OPT_RECOMPUTE },
	{ "stats-every", required_argument, NULL, OPT_STATS_EVERY },
	{ "world", required_argument, NULL, OPT_WORLD },
	{ "zero", required_argument, NULL, OPT_ZERO },
	{ "tp", required_argument, NULL, OPT_TP },
	{ "pp", required_argument, NULL, OPT_PP },
	{ "cp", required_argument, NULL, OPT_CP },
	{ "fit", no_argument, NULL, OPT_FIT },
	{ "safe-microbatch", no_argument, NULL, OPT_SAFE },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "margin", required_argument, NULL, OPT_MARGIN },
	{ "plan", no_argument, NULL, OPT_PLAN },
	{ "compare", no_argument, NULL, OPT_COMPARE },
	{ "budget", no_argument, NULL, OPT_BUDGET },
	{ "params", required_argument, NULL, OPT_PARAMS },
	{ "gpus", required_argument, NULL, OPT_GPUS },
	{ "gpus-per-node", required_argument, NULL, OPT_GPN },
	{ "intra-bw", required_argument, NULL, OPT_INTRA },
	{ "inter-bw", required_argument, NULL, OPT_INTER },
	{ "mfu", required_argument, NULL, OPT_MFU },
	{ "peak-flops", required_argument, NULL, OPT_PEAK },
	{ "global-batch", required_argument, NULL, OPT_GLOBAL },
	{ "allow-tp-across-nodes", no_argument, NULL, OPT_TP_ACROSS },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "target-tokens", required_argument, NULL, OPT_TARGET },
	{ "mtbf", required_argument, NULL, OPT_MTBF },
	{ "restart-cost", required_argument, NULL, OPT_RESTART },
	{ "idle", required_argument, NULL, OPT_IDLE },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: memledger [model] [batch] [layout]            the byte ledger\n"
	       "       memledger --fit [options] RUN...               measured against predicted\n"
	       "       memledger --safe-microbatch --memory BYTES [RUN...]\n"
	       "       memledger --plan --gpus G --gpus-per-node K --memory BYTES [options]\n"
	       "       memledger --compare --gpus G [options]\n"
	       "       memledger --budget --target-tokens N [options] PILOT...\n"
	       "\n"
	       "The bytes per device of a training step, term by term, from train's own model\n"
	       "code; fits of measured runs; the safe micro-batch; a layout planner; a budget.\n"
	       "\n"
	       "Model (train's options and defaults):\n"
	       "  --layers N --heads N --channels N   (4, 4, 256)\n"
	       "  --context N             context length (default: --seq-len, else 256)\n"
	       "  --vocab N               vocabulary (50257), padded to a multiple of 128\n"
	       "  --untie                 an output head separate from the token embedding\n"
	       "  --config FILE           'key = value' lines (these long options' names; train's\n"
	       "                          other keys are skipped) or a run's config.json\n"
	       "  --run DIR               the configuration of train's run DIR (its config.json)\n"
	       "Batch and precision:\n"
	       "  -B, --micro-batch B     sequences per micro-batch (8)\n"
	       "  -T, --seq-len T         positions per sequence (default: the context)\n"
	       "  --precision P           fp32 (default), bf16 or fp16: the compute dtype; auto:\n"
	       "                          train's default (bf16 where the cpu backend has fast\n"
	       "                          bf16 GEMMs, else fp32)\n"
	       "  --recompute R           none, block or every:K (as train)\n"
	       "  --stats-every N         train's statistics every N updates (25; 0: none):\n"
	       "                          their copy of the parameters is a term\n"
	       "Layout:\n"
	       "  --world N --zero S      data-parallel ranks (1); ZeRO stage 0-3 (0)\n"
	       "  --tp N --pp N --cp N    tensor, pipeline, context degrees (1): an estimate;\n"
	       "                          with --plan, only layouts of the degrees given\n"
	       "Modes:\n"
	       "  --fit RUN...            fit activations to the runs' measured peaks; the\n"
	       "                          prediction error per term and per run\n"
	       "  --safe-microbatch       the largest micro-batch within --memory BYTES less\n"
	       "                          --margin F (0.1); fitted from RUN... if given\n"
	       "  --plan                  layouts dp x tp x pp x cp = --gpus with ZeRO stages,\n"
	       "                          ranked by predicted step time\n"
	       "  --compare               each strategy's sharding, collective, bytes, memory\n"
	       "  --budget PILOT...       device-hours of a plan from pilot runs\n"
	       "Planner (--plan, --compare):\n"
	       "  --params N              parameters (default: the model's), scaling its state\n"
	       "  --gpus G --gpus-per-node K       devices, and per node (8)\n"
	       "  --memory BYTES          per device (k, M, G, Ki, Mi, Gi suffixes)\n"
	       "  --intra-bw X --inter-bw Y        bytes/s inside a node (300G), across (25G)\n"
	       "  --mfu F --peak-flops X  model FLOPs utilisation (0.4); per device (989e12)\n"
	       "  --global-batch N        sequences per step (default: G x micro-batch)\n"
	       "  --allow-tp-across-nodes tensor parallel groups may span nodes\n"
	       "  --top N                 layouts shown (5)\n"
	       "Budget (--budget):\n"
	       "  --target-tokens N       tokens of the planned run\n"
	       "  --mtbf S --restart-cost S        mean seconds between failures (86400); a\n"
	       "                          restart's seconds (600)\n"
	       "  --idle F                idle fraction of the allocation (0.05)\n"
	       "Output:\n"
	       "  --jsonl                 JSONL even on a terminal\n"
	       "  -q, --quiet             no messages on stderr\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version\n"
	       "\n"
	       "Exit status: 0 ok, 1 a run that cannot be read or a layout that does not fit,\n"
	       "2 usage error (an impossible layout, a bad value). See memledger(1).\n");
}

static struct {
	struct lmt_ledger_cfg c;
	int context_given, seq_given, jsonl, table;
	int mode;                /* 0 ledger, else the mode's option */
	double memory, margin;
	struct lmt_plan_opts plan;
	struct lmt_budget_opts budget;
	const char **skipped;    /* train keys of a --config file that are not ours */
	int nskipped;
} O;

static int plan_option(int c, const char *arg, struct lmt_plan_opts *p)
{
	switch (c) {
	case OPT_PARAMS: p->params = (double)opt_size_nz("params", arg); break;
	case OPT_GPUS: p->gpus = (int)opt_int("gpus", arg, 1, 1 << 20); break;
	case OPT_GPN: p->gpus_per_node = (int)opt_int("gpus-per-node", arg, 1, 1 << 10); break;
	case OPT_INTRA: p->intra_bw = (double)opt_size_nz("intra-bw", arg); break;
	case OPT_INTER: p->inter_bw = (double)opt_size_nz("inter-bw", arg); break;
	case OPT_MFU: p->mfu = opt_double_above("mfu", arg, 0, 1); break;
	case OPT_PEAK: p->peak_flops = (double)opt_size_nz("peak-flops", arg); break;
	case OPT_GLOBAL: p->global_batch = (int)opt_int("global-batch", arg, 1, 1 << 30); break;
	case OPT_TP_ACROSS: p->tp_across_nodes = 1; break;
	case OPT_TOP: p->top = (int)opt_int("top", arg, 1, 1000); break;
	default: return 0;
	}
	return 1;
}

static int budget_option(int c, const char *arg, struct lmt_budget_opts *b)
{
	switch (c) {
	case OPT_TARGET: b->target_tokens = (double)opt_size_nz("target-tokens", arg); break;
	case OPT_MTBF: b->mtbf_s = opt_double_above("mtbf", arg, 0, 1e12); break;
	case OPT_RESTART: b->restart_s = opt_double("restart-cost", arg, 0, 1e12); break;
	case OPT_IDLE: b->idle_frac = opt_double("idle", arg, 0, 0.99); break;
	default: return 0;
	}
	return 1;
}

static void set_option(int c, const char *arg);

static void set_from_file(void *ctx, int c, const char *arg)
{
	(void)ctx;
	set_option(c, arg);
}
static void config_json(const char *path)
{
	struct lmt_err err = { 0 };
	if (lmt_run_config_read(path, &O.c, &err))
		die_err(&err);
	O.context_given = O.seq_given = 1;
}

static void set_option(int c, const char *arg)
{
	struct lmt_gpt_config *m = &O.c.model;
	if (model_opt(c, arg, m, &m->max_T)) {
		O.context_given |= c == OPT_MODEL_CONTEXT;
		return;
	}
	switch (c) {
	case OPT_CONFIG:
		if (tool_file_is_json(arg))
			config_json(arg);
		else
			tool_cfgopts_read(arg, &(struct tool_cfgopts){ .longopts = longopts, .skip = lmt_run_config_foreign_key,
								 .set = set_from_file });
		break;
	case OPT_RUN: {
		char p[4096];
		path_fmt(p, sizeof p, "%s/config.json", arg);
		config_json(p);
		break;
	}
	case OPT_VOCAB: m->V = (int)opt_int("vocab", arg, 1, 1 << 24); break;
	case 'B': O.c.B = (int)opt_int("micro-batch", arg, 1, 1 << 20); break;
	case 'T': O.c.T = (int)opt_int("seq-len", arg, 1, 1 << 20); O.seq_given = 1; break;
	case OPT_PRECISION:
		if (!strcmp(arg, "auto")) { /* train's default, by the same rule */
			struct lmt_backend be;
			struct lmt_err err = { 0 };
			if (lmt_backend_open(&be, "cpu", 1, &err))
				die_err(&err);
			O.c.dtype = be.fast_dtypes & (1u << LMT_DTYPE_BF16) ? LMT_DTYPE_BF16 : LMT_DTYPE_F32;
			be.release(&be);
			break;
		}
		O.c.dtype = lmt_dtype_parse(arg);
		if (O.c.dtype != LMT_DTYPE_F32 && O.c.dtype != LMT_DTYPE_BF16 && O.c.dtype != LMT_DTYPE_F16)
			usage_error("option '--precision': '%s' is not fp32, bf16, fp16 or auto", arg);
		break;
	case OPT_RECOMPUTE: O.c.recompute_every = opt_recompute(arg); break;
	case OPT_STATS_EVERY: O.c.stats_every = (int)opt_int("stats-every", arg, 0, INT_MAX); break;
	case OPT_WORLD: O.c.world = (int)opt_int("world", arg, 1, 1 << 24); break;
	case OPT_ZERO: O.c.zero = (int)opt_int("zero", arg, 0, 3); break;
	case OPT_TP: O.plan.fix_tp = O.c.tp = (int)opt_int("tp", arg, 1, 1 << 16); break;
	case OPT_PP: O.plan.fix_pp = O.c.pp = (int)opt_int("pp", arg, 1, 1 << 16); break;
	case OPT_CP: O.plan.fix_cp = O.c.cp = (int)opt_int("cp", arg, 1, 1 << 16); break;
	case OPT_JSONL: O.jsonl = 1; break;
	case OPT_FIT: case OPT_SAFE: case OPT_PLAN: case OPT_COMPARE: case OPT_BUDGET:
		if (O.mode && O.mode != c)
			usage_error("--fit, --safe-microbatch, --plan, --compare and --budget exclude each other");
		O.mode = c;
		break;
	case OPT_MEMORY:
		if (arg[0] == '-')
			usage_error("option '--memory': '%s': bytes cannot be negative", arg);
		O.memory = (double)opt_size("memory", arg);
		O.plan.memory = O.memory;
		break;
	case OPT_MARGIN: O.margin = opt_double("margin", arg, 0, 0.99); break;
	default:
		if (!plan_option(c, arg, &O.plan) && !budget_option(c, arg, &O.budget))
			usage_error("option %d: not handled", c);
	}
}

/* ---- output: a JSONL record, or a table line on a terminal ---- */

static const char *human(double b, char buf[32])
{
	return lmt_fmt_bytes(b, buf);
}

static void build(const struct lmt_ledger_cfg *c, struct lmt_ledger *l)
{
	struct lmt_err err = { 0 };
	if (lmt_ledger_build(c, l, &err))
		usage_error("%s", err.msg);
}

/* the table lines lib/report/planrec.h renders, on stdout */
static void put_text(struct lmt_strbuf *b)
{
	if (b->oom)
		die("out of memory");
	if (b->len && fputs(b->buf, stdout) == EOF)
		die_write("<stdout>");
	lmt_strbuf_release(b);
}

static int ledger_mode(void)
{
	struct lmt_ledger l;
	struct lmt_json j;
	build(&O.c, &l);
	if (O.table) {
		struct lmt_strbuf b = { 0 };
		lmt_plantext_ledger(&b, &O.c, &l);
		put_text(&b);
		return 0;
	}
	lmt_json_init(&j);
	lmt_planrec_model(&j, &O.c, &l);
	put_record(&j);
	for (int i = 0; i < l.n; i++) {
		lmt_planrec_term(&j, &l, i);
		put_record(&j);
	}
	lmt_planrec_activations(&j, &l);
	put_record(&j);
	lmt_planrec_total(&j, &l);
	put_record(&j);
	lmt_json_release(&j);
	return 0;
}

/* ---- measured against predicted ---- */

/* The runs' measurements, and with beta the activation model fitted to them. */
static struct lmt_run_measured *read_runs(char **runs, int n, double *beta)
{
	struct lmt_run_measured *m = calloc((size_t)n, sizeof *m);
	struct lmt_err err = { 0 };
	if (!m)
		die("out of memory");
	for (int i = 0; i < n; i++)
		if (lmt_run_measured_read(runs[i], &m[i], &err))
			die_err(&err);
	if (beta && lmt_act_fit_runs(m, n, beta, &err))
		die_err(&err);
	return m;
}

static void fit_term(struct lmt_json *j, const char *name, double pred, double meas)
{
	if (O.table) {
		char a[32], b[32];
		printf("  %-16s %14s %14s %+8.3f%%\n", name, human(pred, a), human(meas, b),
		       lmt_fit_error_pct(pred, meas));
		return;
	}
	lmt_planrec_fit_term(j, name, pred, meas);
}

static int fit_mode(char **runs, int n)
{
	if (n < 1)
		usage_error("--fit needs run directories");
	double beta[LMT_ACT_FEATURES], worst = 0, worst_fit = 0;
	struct lmt_run_measured *m = read_runs(runs, n, beta);
	struct lmt_json j;
	lmt_json_init(&j);
	for (int i = 0; i < n; i++) {
		struct lmt_ledger l;
		build(&m[i].cfg, &l);
		double acts = (double)(l.acts_total + lmt_ledger_bytes(&l, "inputs")), meas = lmt_run_measured_acts(&m[i]);
		double fitted = lmt_act_predict(beta, &m[i].cfg);
		worst = fmax(worst, fabs(lmt_fit_error_pct(acts, meas)));
		worst_fit = fmax(worst_fit, fabs(lmt_fit_error_pct(fitted, meas)));
		if (O.table) {
			printf("%s: %d layers, %d x %d, %s, recompute %d, world %d, ZeRO-%d\n", runs[i], m[i].cfg.model.L,
			       m[i].cfg.B, m[i].cfg.T, lmt_dtype_name(m[i].cfg.dtype), m[i].cfg.recompute_every,
			       m[i].cfg.world, m[i].cfg.zero);
			printf("  %-16s %14s %14s %9s\n", "term", "predicted", "measured", "error");
		} else {
			lmt_planrec_fit_run(&j, runs[i], &m[i].cfg);
		}
		fit_term(&j, "params", (double)l.state.params, (double)m[i].params);
		fit_term(&j, "weights_working", (double)l.state.working, (double)m[i].weights_working);
		fit_term(&j, "grads", (double)l.state.grads, (double)m[i].grads);
		fit_term(&j, "optimizer", (double)l.state.optimizer, (double)m[i].optimizer);
		if (m[i].staging >= 0)
			fit_term(&j, "staging", (double)l.state.staging, (double)m[i].staging);
		/* the stats copy is made at the first stats update: a run that stopped
		 * before it has none to compare */
		if (m[i].stats >= 0 && m[i].updates >= (uint64_t)m[i].cfg.stats_every)
			fit_term(&j, "stats", (double)lmt_ledger_bytes(&l, "stats"), (double)m[i].stats);
		fit_term(&j, "activations", acts, meas);
		fit_term(&j, "activations_fit", fitted, meas);
		if (m[i].peak_rss > 0)
			fit_term(&j, "peak_rss", (double)l.total, (double)m[i].peak_rss);
		if (!O.table)
			put_record(&j);
	}
	if (O.table) {
		printf("fit: activations = %.4g (L+1)NC + %.4g S NC + %.4g N(C+Vp) + %.4g bytes\n", beta[0], beta[1],
		       beta[2], beta[3]);
		printf("largest activation error: ledger %.3f%%, fit %.3f%% over %d runs\n", worst, worst_fit, n);
	} else {
		lmt_planrec_fit(&j, n, beta, worst, worst_fit);
		put_record(&j);
	}
	lmt_json_release(&j);
	free(m);
	return 0;
}

static int safe_mode(char **runs, int n)
{
	if (!(O.memory > 0))
		usage_error("--safe-microbatch needs --memory BYTES");
	double beta[LMT_ACT_FEATURES], budget = O.memory * (1 - O.margin), *bp = NULL;
	build(&O.c, &(struct lmt_ledger){ 0 }); /* the configuration checked once, as a usage error */
	if (n) {
		struct lmt_run_measured *m = read_runs(runs, n, beta);
		/* the fit answers only where its runs determine it: one run, or runs of one
		 * shape, say nothing of another model's activations */
		if (lmt_act_determined(m, n, &O.c))
			bp = beta;
		else
			warn("the %d run%s given %s not determine the activation fit for this model (%d coefficients; "
			     "a sweep that varies depth, context and micro-batch does): the ledger's bytes instead",
			     n, n == 1 ? "" : "s", n == 1 ? "does" : "do", LMT_ACT_FEATURES);
		free(m);
	}
	int lo = lmt_safe_microbatch(&O.c, bp, budget);
	char a[32], b[32], c[32];
	/* nothing fits: the message, and no record (no partial output) */
	if (!lo)
		die("not even a micro-batch of 1 fits in %s (%s less a %.0f%% margin): it needs %s", human(budget, a),
		    human(O.memory, b), 100 * O.margin, human(lmt_safe_bytes_at(&O.c, 1, bp), c));
	if (O.table) {
		if (lo)
			printf("micro-batch %d at %d positions: %s predicted within %s (%s less a %.0f%% margin); %d "
			       "would need %s\n", lo, O.c.T, human(lmt_safe_bytes_at(&O.c, lo, bp), a), human(budget, b),
			       human(O.memory, c), 100 * O.margin, lo + 1,
			       human(lmt_safe_bytes_at(&O.c, lo + 1, bp), (char[32]){ 0 }));
	} else {
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_planrec_safe(&j, &O.c, bp, lo, O.memory, O.margin);
		put_record(&j);
		lmt_json_release(&j);
	}
	return 0;
}

/* ---- the planner and the comparison ---- */

static void plan_setup(void)
{
	struct lmt_err err = { 0 };
	lmt_plan_defaults(&O.plan);
	if (!O.plan.gpus)
		usage_error("--plan and --compare need --gpus G");
	if (lmt_plan_check(&O.plan, &err) || lmt_ledger_check(&O.c, &err))
		usage_error("%s", err.msg);
}

static int plan_mode(void)
{
	plan_setup();
	int cap = 16384, n = 0, fit = 0, dropped[LMT_PLAN_DROP_COUNT];
	struct lmt_plan_layout *L = calloc((size_t)cap, sizeof *L);
	struct lmt_err err = { 0 };
	struct lmt_json j;
	char why[160], a[32];
	if (!L)
		die("out of memory");
	if (lmt_plan_enumerate(&O.c, &O.plan, L, cap, &n, &err))
		usage_error("%s", err.msg);
	while (fit < n && !L[fit].drop)
		fit++;
	lmt_json_init(&j);
	if (O.table)
		printf("%d layouts of %d devices (%d per node): %d fit in %s, ranked by step time\n"
		       "%4s %4s %4s %4s %4s %4s %12s %9s %7s %9s %9s %9s %9s  %s\n", n, O.plan.gpus,
		       O.plan.gpus_per_node, fit, O.plan.memory > 0 ? human(O.plan.memory, a) : "any memory", "rank", "dp",
		       "tp", "pp", "cp", "zero", "memory", "step s", "bubble", "dp s", "tp s", "pp s", "cp s",
		       "loses to the first by");
	for (int i = 0; i < fit && i < O.plan.top; i++) {
		if (i)
			lmt_plan_why(&L[0], &L[i], why, sizeof why);
		if (O.table) {
			printf("%4d %4d %4d %4d %4d %4d %12s %9.4g %6.1f%% %9.3g %9.3g %9.3g %9.3g  %s\n", i + 1, L[i].dp,
			       L[i].tp, L[i].pp, L[i].cp, L[i].zero, human(L[i].mem, a), L[i].t_step, 100 * L[i].bubble,
			       L[i].t_dp, L[i].t_tp, L[i].t_pp, L[i].t_cp, i ? why : "-");
		} else {
			lmt_planrec_layout(&j, "layout", i + 1, &L[i], i ? why : NULL);
			put_record(&j);
		}
	}
	lmt_plan_count_dropped(L, n, dropped);
	for (int r = 0; r < LMT_PLAN_DROP_COUNT; r++) {
		if (!dropped[r])
			continue;
		if (O.table) {
			printf("dropped: %d %s\n", dropped[r], lmt_plan_drop_reasons[r]);
		} else {
			lmt_planrec_dropped(&j, r, dropped[r]);
			put_record(&j);
		}
	}
	lmt_json_release(&j);
	free(L);
	if (!fit)
		die("no layout of %d devices fits in %s per device", O.plan.gpus, human(O.plan.memory, a));
	return 0;
}

static int compare_mode(void)
{
	plan_setup();
	int G = O.plan.gpus;
	struct lmt_json j;
	char a[32], b[32];
	lmt_json_init(&j);
	if (O.table)
		printf("%d devices, micro-batch %d x %d: each strategy alone at degree %d\n%-9s %12s %12s  %-44s %s\n",
		       G, O.c.B, O.c.T, G, "strategy", "bytes/step", "memory", "shards", "collective");
	for (int i = 0; i < LMT_PLAN_STRATEGY_COUNT; i++) {
		const struct lmt_plan_strategy *s = &lmt_plan_strategies[i];
		struct lmt_plan_layout l;
		lmt_plan_strategy_eval(&O.c, &O.plan, s, &l);
		if (!O.table) {
			lmt_planrec_strategy(&j, s, G, &l);
			put_record(&j);
			continue;
		}
		int impossible = l.drop && l.drop != lmt_plan_drop_reasons[LMT_PLAN_DROP_MEMORY];
		printf("%-9s %12s %12s  %-44s %s%s%s\n", s->name, impossible ? "-" : human(l.b_dp + l.b_tp + l.b_pp + l.b_cp, a),
		       impossible ? "-" : human(l.mem, b), s->shards, s->collective, l.drop ? "; " : "",
		       l.drop ? l.drop : "");
	}
	lmt_json_release(&j);
	return 0;
}

/* ---- the budget ---- */

static void loss_fit(struct lmt_json *j, const struct lmt_run_measured *m, int n)
{
	struct lmt_powerlaw p;
	struct lmt_err err = { 0 };
	int k = 0;
	if (lmt_budget_loss_fit(m, n, &p, &k, &err)) {
		if (err.code == LMT_ENOMEM)
			die_err(&err);
		warn("%s", err.msg);
		return;
	}
	if (k < 2)
		return;
	double x = lmt_budget_target_flops(&O.c, O.plan.params, O.budget.target_tokens), hw;
	double pred = lmt_powerlaw_predict(&p, x, &hw);
	if (O.table) {
		printf("loss = %.4g + %.4g C^-%.4g over %d pilots; at %.3g FLOPs: %.4f", p.E, p.A, p.alpha, k, x, pred);
		if (isfinite(hw))
			printf(" +- %.4f (one standard error)\n", hw);
		else
			printf(" (no uncertainty: %d points leave no degree of freedom)\n", k);
	} else {
		lmt_planrec_loss_fit(j, &p, k, x, pred, hw);
		put_record(j);
	}
}

static int budget_mode(char **runs, int n)
{
	if (n < 1)
		usage_error("--budget needs pilot run directories");
	if (!(O.budget.target_tokens > 0))
		usage_error("--budget needs --target-tokens N");
	for (int i = 0; i < n; i++) /* a pilot twice would weigh twice in every fit */
		for (int k = 0; k < i; k++)
			if (lmt_path_overlap(runs[i], runs[k]))
				usage_error("the pilot '%s' is given twice ('%s')", runs[k], runs[i]);
	lmt_budget_defaults(&O.budget);
	struct lmt_run_measured *m = read_runs(runs, n, NULL);
	struct lmt_budget_in in;
	struct lmt_budget b;
	struct lmt_err err = { 0 };
	struct lmt_json j;
	lmt_budget_in_from_pilots(m, n, O.plan.gpus, &in);
	if (lmt_budget_compute(&O.budget, &in, &b, &err))
		die("%s: %s", runs[n - 1], err.msg);
	lmt_json_init(&j);
	if (O.table) {
		struct lmt_strbuf t = { 0 };
		lmt_plantext_budget(&t, &O.budget, &in, &b);
		put_text(&t);
	} else {
		lmt_planrec_budget(&j, &O.budget, &in, &b);
		put_record(&j);
	}
	loss_fit(&j, m, n);
	lmt_json_release(&j);
	free(m);
	return 0;
}

int main(int argc, char **argv)
{
	tool_init("memledger");
	O.c = (struct lmt_ledger_cfg){ .model = { .L = 4, .NH = 4, .C = 256, .V = 50257 }, .B = 8,
				       .dtype = LMT_DTYPE_F32, .world = 1, .tp = 1, .pp = 1, .cp = 1,
				       .stats_every = 25 };
	O.margin = 0.1;
	int c;
	while ((c = getopt_long(argc, argv, "hVqB:T:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case 'q': tool_quiet = 1; break;
		case '?': bad_option(argv);
		default: set_option(c, optarg);
		}
	}
	struct lmt_gpt_config *m = &O.c.model;
	if (!O.context_given)
		m->max_T = O.seq_given ? O.c.T : 256;
	if (!O.seq_given)
		O.c.T = m->max_T;
	m->Vp = lmt_gpt_padded_vocab(m->V);
	if (m->C % m->NH)
		usage_error("%d channels are not a multiple of %d heads", m->C, m->NH);
	O.table = !O.jsonl && isatty(STDOUT_FILENO);
	char **rest = argv + optind;
	int nrest = argc - optind;
	if (nrest && O.mode != OPT_FIT && O.mode != OPT_SAFE && O.mode != OPT_BUDGET)
		usage_error("unexpected argument '%s' (run directories go with --fit, --safe-microbatch, --budget)",
			    rest[0]);
	switch (O.mode) {
	case OPT_FIT: return fit_mode(rest, nrest);
	case OPT_SAFE: return safe_mode(rest, nrest);
	case OPT_PLAN: return plan_mode();
	case OPT_COMPARE: return compare_mode();
	case OPT_BUDGET: return budget_mode(rest, nrest);
	default: return ledger_mode();
	}
}
