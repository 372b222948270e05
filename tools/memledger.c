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
#include "tool.h"

enum {
	OPT_CONFIG = OPT_TOOL_BASE, OPT_RUN, OPT_VOCAB, OPT_PRECISION, OPT_RECOMPUTE, OPT_WORLD, OPT_ZERO, OPT_TP, OPT_PP, OPT_CP, OPT_JSONL, OPT_FIT, OPT_SAFE,
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

static void set_option(int c, const char *arg);

static int plan_option(int c, const char *arg, struct lmt_plan_opts *p)
{
	switch (c) {
	case OPT_PARAMS: p->params = (double)opt_size("params", arg); break;
	case OPT_GPUS: p->gpus = (int)opt_int("gpus", arg, 1, 1 << 20); break;
	case OPT_GPN: p->gpus_per_node = (int)opt_int("gpus-per-node", arg, 1, 1 << 10); break;
	case OPT_INTRA: p->intra_bw = (double)opt_size("intra-bw", arg); break;
	case OPT_INTER: p->inter_bw = (double)opt_size("inter-bw", arg); break;
	case OPT_MFU: p->mfu = opt_double_above("mfu", arg, 0, 1); break;
	case OPT_PEAK: p->peak_flops = (double)opt_size("peak-flops", arg); break;
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
	case OPT_TARGET: b->target_tokens = (double)opt_size("target-tokens", arg); break;
	case OPT_MTBF: b->mtbf_s = opt_double_above("mtbf", arg, 0, 1e12); break;
	case OPT_RESTART: b->restart_s = opt_double("restart-cost", arg, 0, 1e12); break;
	case OPT_IDLE: b->idle_frac = opt_double("idle", arg, 0, 0.99); break;
	default: return 0;
	}
	return 1;
}

/* train's options that a train --config file may hold and the ledger does not use */
static int train_key(const char *k)
{
	static const char *const keys[] = { "data", "out", "no-save", "tokenizer", "accum", "updates", "lr", "min-lr",
		"warmup", "schedule", "beta1", "beta2", "eps", "weight-decay", "decay-embeddings", "clip", "on-nonfinite",
		"seed", "init-seed", "segment-mask", "doc-targets", "shuffle-window", "resume", "ckpt-every",
		"ckpt-minutes", "keep", "keep-every", "ckpt-sync", "log-samples", "stop-at", "eval-every", "eval-seqs",
		"sample-every", "sample-tokens", "temperature", "top-k", "prompt", "init-llmc", "export-llmc",
		"backend", "threads", "loss-scale", "loss-scale-window", "bucket-mb", "comm-timeout", "skew-alert",
		"alert", "stats-every", "audit-samples", "prefetch", NULL };
	for (int i = 0; keys[i]; i++)
		if (!strcmp(k, keys[i]))
			return 1;
	return 0;
}

static int config_entry(void *ctx, const struct lmt_config_entry *e)
{
	static char where[600];
	const struct option *opt = NULL;
	(void)ctx;
	snprintf(where, sizeof where, "'%s': line %d", e->path, e->line);
	for (const struct option *x = longopts; x->name; x++)
		if (!strcmp(x->name, e->key))
			opt = x;
	if (!opt && train_key(e->key))
		return 0;
	if (!opt || opt->val == OPT_CONFIG || opt->val == 'h' || opt->val == 'V')
		usage_error("%s: unknown key '%.63s'", where, e->key);
	if (opt->has_arg == required_argument && (!e->value || !*e->value))
		usage_error("%s: key '%s' needs a value", where, e->key);
	tool_context = where;
	set_option(opt->val, e->value ? strdup(e->value) : NULL);
	tool_context = NULL;
	return 0;
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
	case OPT_CONFIG: {
		FILE *f = fopen(arg, "r");
		int first = ' ';
		while (f && (first == ' ' || first == '\t' || first == '\n' || first == '\r'))
			first = fgetc(f);
		if (f)
			fclose(f);
		struct lmt_err err = { 0 };
		if (first == '{')
			config_json(arg);
		else if (lmt_config_read(arg, config_entry, NULL, &err))
			die_err(&err);
		break;
	}
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

static void put(struct lmt_json *j)
{
	if (lmt_json_end_line(j, stdout))
		die_write("<stdout>");
	lmt_json_reset(j);
}

static const char *human(double b, char buf[32])
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;
	while (fabs(b) >= 1024 && i < 5) {
		b /= 1024;
		i++;
	}
	snprintf(buf, 32, i ? "%.2f %s" : "%.0f %s", b, u[i]);
	return buf;
}

static const char *dtype_of(int d)
{
	return d < 0 ? "mixed" : lmt_dtype_name(d);
}

static void config_fields(struct lmt_json *j, const struct lmt_ledger_cfg *c)
{
	lmt_json_u64(j, "layers", (uint64_t)c->model.L);
	lmt_json_u64(j, "heads", (uint64_t)c->model.NH);
	lmt_json_u64(j, "channels", (uint64_t)c->model.C);
	lmt_json_u64(j, "context", (uint64_t)c->model.max_T);
	lmt_json_u64(j, "vocab", (uint64_t)c->model.V);
	lmt_json_bool(j, "untied", c->model.untied);
	lmt_json_u64(j, "micro_batch", (uint64_t)c->B);
	lmt_json_u64(j, "seq_len", (uint64_t)c->T);
	lmt_json_str(j, "precision", lmt_dtype_name(c->dtype));
	lmt_json_u64(j, "recompute_every", (uint64_t)c->recompute_every);
	lmt_json_u64(j, "world", (uint64_t)c->world);
	lmt_json_u64(j, "zero", (uint64_t)c->zero);
	lmt_json_u64(j, "tp", (uint64_t)c->tp);
	lmt_json_u64(j, "pp", (uint64_t)c->pp);
	lmt_json_u64(j, "cp", (uint64_t)c->cp);
}

static void build(const struct lmt_ledger_cfg *c, struct lmt_ledger *l)
{
	struct lmt_err err = { 0 };
	if (lmt_ledger_build(c, l, &err))
		usage_error("%s", err.msg);
}

/* The seed's rule of thumb: mixed-precision Adam keeps 16 bytes per parameter
 * before activations: 2 (16-bit weights) + 2 (16-bit gradients) + 4 (fp32 master)
 * + 4 + 4 (moments). */
static void rule_of_thumb(struct lmt_json *j, const struct lmt_ledger *l)
{
	double P = (double)l->nparams;
	lmt_json_obj(j, "bytes_per_param");
	lmt_json_num(j, "params", l->state.params / P);
	lmt_json_num(j, "weights_working", l->state.working / P);
	lmt_json_num(j, "grads", l->state.grads / P);
	lmt_json_num(j, "optimizer", l->state.optimizer / P);
	lmt_json_num(j, "staging", l->state.staging / P);
	lmt_json_num(j, "state", (double)(l->state.params + l->state.working + l->state.grads + l->state.optimizer +
					  l->state.staging) / P);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "rule_of_thumb");
	lmt_json_num(j, "bytes_per_param", 16);
	lmt_json_num(j, "weights_16bit", 2);
	lmt_json_num(j, "grads_16bit", 2);
	lmt_json_num(j, "master_fp32", 4);
	lmt_json_num(j, "moments_fp32", 8);
	lmt_json_obj_end(j);
}

static void ledger_table(const struct lmt_ledger_cfg *c, const struct lmt_ledger *l)
{
	char a[32], b[32], rc[32];
	double P = (double)l->nparams;
	if (c->recompute_every > 1)
		snprintf(rc, sizeof rc, "every:%d", c->recompute_every);
	else
		snprintf(rc, sizeof rc, "%s", c->recompute_every ? "block" : "none");
	printf("model: %d layers, %d heads, %d channels, context %d, vocabulary %d%s: %zu parameters\n", c->model.L,
	       c->model.NH, c->model.C, c->model.max_T, c->model.V, c->model.untied ? " (untied)" : "", l->nparams);
	printf("batch: %d x %d, %s, recompute %s; layout: world %d, ZeRO-%d, tp %d, pp %d, cp %d%s\n\n", c->B, c->T,
	       lmt_dtype_name(c->dtype), rc, c->world, c->zero, c->tp, c->pp, c->cp,
	       l->estimate ? " (estimate)" : "");
	printf("%-22s %-12s %-6s %12s %8s  %s\n", "term", "group", "dtype", "bytes", "B/param", "note");
	for (int i = 0; i < l->n; i++) {
		const struct lmt_ledger_term *t = &l->t[i];
		printf("%-22s %-12s %-6s %12s %8.2f  %s\n", t->name, lmt_ledger_group_names[t->group], dtype_of(t->dtype),
		       human((double)t->bytes, a), t->bytes / P, t->note ? t->note : "");
	}
	printf("\nper block %s; activations %s (%s without recompute); model state %s (%.2f B/param; the\n"
	       "rule of thumb: 16 = 2 + 2 + 4 + 8 for 16-bit weights and grads, fp32 master and moments)\n"
	       "total per device %s\n", human((double)l->per_block, a), human((double)l->acts_total, b),
	       human((double)l->acts_none.total, (char[32]){ 0 }), human((double)l->state_total, (char[32]){ 0 }),
	       l->state_total / P, human((double)l->total, (char[32]){ 0 }));
}

static int ledger_mode(void)
{
	struct lmt_ledger l;
	struct lmt_json j;
	build(&O.c, &l);
	if (O.table) {
		ledger_table(&O.c, &l);
		return 0;
	}
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "model");
	config_fields(&j, &O.c);
	lmt_json_u64(&j, "params", l.nparams);
	lmt_json_u64(&j, "embedding", l.counts.embedding);
	lmt_json_u64(&j, "matrix", l.counts.matrix);
	lmt_json_u64(&j, "bias", l.counts.bias);
	lmt_json_u64(&j, "norm", l.counts.norm);
	lmt_json_u64(&j, "vocab_padding", l.counts.padding);
	lmt_json_bool(&j, "estimate", l.estimate);
	put(&j);
	for (int i = 0; i < l.n; i++) {
		const struct lmt_ledger_term *t = &l.t[i];
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "term");
		lmt_json_str(&j, "name", t->name);
		lmt_json_str(&j, "group", lmt_ledger_group_names[t->group]);
		lmt_json_str(&j, "dtype", dtype_of(t->dtype));
		lmt_json_u64(&j, "bytes", t->bytes);
		lmt_json_num(&j, "bytes_per_param", (double)t->bytes / (double)l.nparams);
		lmt_json_str(&j, "note", t->note);
		put(&j);
	}
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "activations");
	lmt_json_u64(&j, "per_block", l.per_block);
	lmt_json_u64(&j, "slot", l.acts.slot);
	lmt_json_u64(&j, "blocks_kept", (uint64_t)l.acts.kept);
	lmt_json_u64(&j, "total", l.acts_total);
	lmt_json_u64(&j, "no_recompute", l.acts_none.total);
	lmt_json_bool(&j, "attention_scores_stored", 0);
	put(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "total");
	lmt_json_u64(&j, "bytes", l.total);
	lmt_json_u64(&j, "state", l.state_total);
	lmt_json_u64(&j, "activations", l.acts_total);
	lmt_json_obj(&j, "by_dtype");
	for (int d = 0; d < LMT_DTYPE_COUNT; d++)
		if (l.by_dtype[d])
			lmt_json_u64(&j, lmt_dtype_name(d), l.by_dtype[d]);
	lmt_json_obj_end(&j);
	rule_of_thumb(&j, &l);
	put(&j);
	lmt_json_release(&j);
	return 0;
}

/* ---- measured against predicted ---- */

static void read_run(const char *dir, struct lmt_run_measured *m)
{
	struct lmt_err err = { 0 };
	if (lmt_run_measured_read(dir, m, &err))
		die_err(&err);
}

/* What a run measured beyond its model state: its peak allocation less the state
 * counters (the activations and the temporaries, as the ledger's terms do), or,
 * where train did not report a peak, its activations counter. */
static double measured_acts(const struct lmt_run_measured *m)
{
	if (m->peak_alloc < 0)
		return (double)m->activations;
	return (double)(m->peak_alloc - m->params - m->weights_working - m->grads - m->optimizer -
			(m->staging > 0 ? m->staging : 0));
}

static double pct(double pred, double meas)
{
	return meas != 0 ? 100 * (pred - meas) / meas : (pred == 0 ? 0 : INFINITY);
}

/* the coefficients of the activation model fitted to n runs */
static void fit_runs(const struct lmt_run_measured *m, int n, double beta[LMT_ACT_FEATURES])
{
	double *X = calloc((size_t)n * LMT_ACT_FEATURES, sizeof *X), *y = calloc((size_t)n, sizeof *y);
	struct lmt_err err = { 0 };
	if (!X || !y)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		lmt_act_features(&m[i].cfg, X + (size_t)i * LMT_ACT_FEATURES);
		y[i] = measured_acts(&m[i]);
	}
	if (lmt_lstsq(X, y, n, LMT_ACT_FEATURES, beta, &err))
		die_err(&err);
	free(X);
	free(y);
}

static void fit_term(struct lmt_json *j, const char *name, double pred, double meas)
{
	if (O.table) {
		char a[32], b[32];
		printf("  %-16s %14s %14s %+8.3f%%\n", name, human(pred, a), human(meas, b), pct(pred, meas));
		return;
	}
	lmt_json_obj(j, name);
	lmt_json_num(j, "predicted", pred);
	lmt_json_num(j, "measured", meas);
	lmt_json_num(j, "error_pct", pct(pred, meas));
	lmt_json_obj_end(j);
}

static int fit_mode(char **runs, int n)
{
	if (n < 1)
		usage_error("--fit needs run directories");
	struct lmt_run_measured *m = calloc((size_t)n, sizeof *m);
	double beta[LMT_ACT_FEATURES], worst = 0, worst_fit = 0;
	struct lmt_json j;
	if (!m)
		die("out of memory");
	for (int i = 0; i < n; i++)
		read_run(runs[i], &m[i]);
	fit_runs(m, n, beta);
	lmt_json_init(&j);
	for (int i = 0; i < n; i++) {
		struct lmt_ledger l;
		build(&m[i].cfg, &l);
		double acts = (double)(l.acts_total + lmt_ledger_bytes(&l, "inputs")), meas = measured_acts(&m[i]);
		double fitted = lmt_act_predict(beta, &m[i].cfg);
		worst = fmax(worst, fabs(pct(acts, meas)));
		worst_fit = fmax(worst_fit, fabs(pct(fitted, meas)));
		if (O.table) {
			printf("%s: %d layers, %d x %d, %s, recompute %d, world %d, ZeRO-%d\n", runs[i], m[i].cfg.model.L,
			       m[i].cfg.B, m[i].cfg.T, lmt_dtype_name(m[i].cfg.dtype), m[i].cfg.recompute_every,
			       m[i].cfg.world, m[i].cfg.zero);
			printf("  %-16s %14s %14s %9s\n", "term", "predicted", "measured", "error");
		} else {
			lmt_json_begin(&j);
			lmt_json_str(&j, "event", "fit_run");
			lmt_json_str(&j, "run", runs[i]);
			config_fields(&j, &m[i].cfg);
		}
		fit_term(&j, "params", (double)l.state.params, (double)m[i].params);
		fit_term(&j, "weights_working", (double)l.state.working, (double)m[i].weights_working);
		fit_term(&j, "grads", (double)l.state.grads, (double)m[i].grads);
		fit_term(&j, "optimizer", (double)l.state.optimizer, (double)m[i].optimizer);
		if (m[i].staging >= 0)
			fit_term(&j, "staging", (double)l.state.staging, (double)m[i].staging);
		fit_term(&j, "activations", acts, meas);
		fit_term(&j, "activations_fit", fitted, meas);
		if (m[i].peak_rss > 0)
			fit_term(&j, "peak_rss", (double)l.total, (double)m[i].peak_rss);
		if (!O.table)
			put(&j);
	}
	if (O.table) {
		printf("fit: activations = %.4g (L+1)NC + %.4g S NC + %.4g N(C+Vp) + %.4g bytes\n", beta[0], beta[1],
		       beta[2], beta[3]);
		printf("largest activation error: ledger %.3f%%, fit %.3f%% over %d runs\n", worst, worst_fit, n);
	} else {
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "fit");
		lmt_json_u64(&j, "runs", (uint64_t)n);
		lmt_json_arr(&j, "coefficients");
		for (int k = 0; k < LMT_ACT_FEATURES; k++)
			lmt_json_num(&j, NULL, beta[k]);
		lmt_json_arr_end(&j);
		lmt_json_str(&j, "features", "(L+1)*N*C, S*N*C, N*(C+Vp), 1");
		lmt_json_num(&j, "max_error_pct", worst);
		lmt_json_num(&j, "max_fit_error_pct", worst_fit);
		put(&j);
	}
	lmt_json_release(&j);
	free(m);
	return 0;
}

/* The bytes at micro-batch B: the ledger's, or its state plus the fitted
 * activations. */
static double bytes_at(int B, const double *beta)
{
	struct lmt_ledger_cfg c = O.c;
	struct lmt_ledger l;
	c.B = B;
	if (lmt_ledger_build(&c, &l, NULL))
		return INFINITY;
	return beta ? (double)l.state_total + lmt_act_predict(beta, &c) : (double)l.total;
}

static int safe_mode(char **runs, int n)
{
	if (!(O.memory > 0))
		usage_error("--safe-microbatch needs --memory BYTES");
	double beta[LMT_ACT_FEATURES], budget = O.memory * (1 - O.margin), *bp = NULL;
	if (n) {
		struct lmt_run_measured *m = calloc((size_t)n, sizeof *m);
		if (!m)
			die("out of memory");
		for (int i = 0; i < n; i++)
			read_run(runs[i], &m[i]);
		fit_runs(m, n, beta);
		bp = beta;
		free(m);
	}
	build(&O.c, &(struct lmt_ledger){ 0 }); /* the configuration checked once, as a usage error */
	int lo = 0, hi = 1;
	while (hi < (1 << 20) && bytes_at(hi, bp) <= budget) {
		lo = hi;
		hi *= 2;
	}
	while (hi - lo > 1) { /* bytes grow with B: the largest B within the budget */
		int mid = lo + (hi - lo) / 2;
		if (bytes_at(mid, bp) <= budget)
			lo = mid;
		else
			hi = mid;
	}
	char a[32], b[32], c[32];
	if (O.table) {
		if (lo)
			printf("micro-batch %d at %d positions: %s predicted within %s (%s less a %.0f%% margin); %d "
			       "would need %s\n", lo, O.c.T, human(bytes_at(lo, bp), a), human(budget, b),
			       human(O.memory, c), 100 * O.margin, lo + 1, human(bytes_at(lo + 1, bp), (char[32]){ 0 }));
	} else {
		struct lmt_json j;
		lmt_json_init(&j);
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "safe_microbatch");
		lmt_json_u64(&j, "micro_batch", (uint64_t)lo);
		lmt_json_u64(&j, "seq_len", (uint64_t)O.c.T);
		lmt_json_num(&j, "predicted_bytes", lo ? bytes_at(lo, bp) : 0);
		lmt_json_num(&j, "next_bytes", bytes_at(lo + 1, bp));
		lmt_json_num(&j, "budget_bytes", budget);
		lmt_json_num(&j, "memory", O.memory);
		lmt_json_num(&j, "margin", O.margin);
		lmt_json_str(&j, "source", bp ? "fit" : "ledger");
		put(&j);
		lmt_json_release(&j);
	}
	if (!lo)
		die("not even a micro-batch of 1 fits in %s (%s less a %.0f%% margin): it needs %s", human(budget, a),
		    human(O.memory, b), 100 * O.margin, human(bytes_at(1, bp), c));
	return 0;
}

/* ---- the planner and the comparison ---- */

static void layout_json(struct lmt_json *j, const char *event, int rank, const struct lmt_plan_layout *l,
			const char *why)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", event);
	if (rank)
		lmt_json_u64(j, "rank", (uint64_t)rank);
	lmt_json_u64(j, "dp", (uint64_t)l->dp);
	lmt_json_u64(j, "tp", (uint64_t)l->tp);
	lmt_json_u64(j, "pp", (uint64_t)l->pp);
	lmt_json_u64(j, "cp", (uint64_t)l->cp);
	lmt_json_u64(j, "zero", (uint64_t)l->zero);
	lmt_json_u64(j, "micro_batches", (uint64_t)l->m);
	lmt_json_num(j, "memory", l->mem);
	lmt_json_num(j, "step_s", l->t_step);
	lmt_json_num(j, "compute_s", l->t_compute);
	lmt_json_num(j, "bubble", l->bubble);
	lmt_json_obj(j, "comm_s");
	lmt_json_num(j, "dp", l->t_dp);
	lmt_json_num(j, "tp", l->t_tp);
	lmt_json_num(j, "pp", l->t_pp);
	lmt_json_num(j, "cp", l->t_cp);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "comm_bytes");
	lmt_json_num(j, "dp", l->b_dp);
	lmt_json_num(j, "tp", l->b_tp);
	lmt_json_num(j, "pp", l->b_pp);
	lmt_json_num(j, "cp", l->b_cp);
	lmt_json_obj_end(j);
	lmt_json_bool(j, "dp_across_nodes", l->dp_inter);
	lmt_json_bool(j, "tp_across_nodes", l->tp_inter);
	if (l->drop)
		lmt_json_str(j, "dropped", l->drop);
	if (why)
		lmt_json_str(j, "loses_by", why);
	put(j);
}

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
	int cap = 16384, n = 0, fit = 0;
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
		if (O.table)
			printf("%4d %4d %4d %4d %4d %4d %12s %9.4g %6.1f%% %9.3g %9.3g %9.3g %9.3g  %s\n", i + 1, L[i].dp,
			       L[i].tp, L[i].pp, L[i].cp, L[i].zero, human(L[i].mem, a), L[i].t_step, 100 * L[i].bubble,
			       L[i].t_dp, L[i].t_tp, L[i].t_pp, L[i].t_cp, i ? why : "-");
		else
			layout_json(&j, "layout", i + 1, &L[i], i ? why : NULL);
	}
	/* the dropped ones, counted by reason */
	static const char *const reasons[] = { "over memory", "tensor parallel across nodes",
		"tensor degree does not divide the heads", "pipeline degree does not divide the layers",
		"context degree does not divide the sequence", "global batch is not a multiple of dp x micro-batch",
		"the ledger refuses the layout" };
	for (size_t r = 0; r < sizeof reasons / sizeof reasons[0]; r++) {
		int k = 0;
		for (int i = fit; i < n; i++)
			k += !strcmp(L[i].drop, reasons[r]);
		if (!k)
			continue;
		if (O.table) {
			printf("dropped: %d %s\n", k, reasons[r]);
		} else {
			lmt_json_begin(&j);
			lmt_json_str(&j, "event", "dropped");
			lmt_json_str(&j, "reason", reasons[r]);
			lmt_json_u64(&j, "layouts", (uint64_t)k);
			put(&j);
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
	static const struct {
		const char *name, *shards, *collective;
		int dp, tp, pp, cp, zero;
	} S[] = {
		{ "DDP", "nothing (a full replica per device)", "all-reduce of the gradients", 1, 0, 0, 0, 0 },
		{ "ZeRO-1", "optimizer state", "reduce-scatter of the gradients, all-gather of the parameters", 1, 0, 0,
		  0, 1 },
		{ "ZeRO-2", "optimizer state, gradients", "reduce-scatter per layer in backward, all-gather", 1, 0, 0, 0,
		  2 },
		{ "ZeRO-3", "optimizer state, gradients, parameters", "all-gather per layer (forward and backward), "
		  "reduce-scatter", 1, 0, 0, 0, 3 },
		{ "tensor", "weight matrices by heads and MLP columns; the blocks' activations",
		  "all-reduce of activations, 4 per layer", 0, 1, 0, 0, 0 },
		{ "pipeline", "layers (L / pp per stage)", "send/recv of activations between stages", 0, 0, 1, 0, 0 },
		{ "context", "positions (sequence chunks) and their activations",
		  "all-gather of K and V per layer, reduce-scatter of their gradients", 0, 0, 0, 1, 0 },
	};
	int G = O.plan.gpus;
	struct lmt_json j;
	char a[32], b[32];
	lmt_json_init(&j);
	if (O.table)
		printf("%d devices, micro-batch %d x %d: each strategy alone at degree %d\n%-9s %12s %12s  %-44s %s\n",
		       G, O.c.B, O.c.T, G, "strategy", "bytes/step", "memory", "shards", "collective");
	for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
		struct lmt_plan_layout l = { .dp = S[i].dp ? G : 1, .tp = S[i].tp ? G : 1, .pp = S[i].pp ? G : 1,
					     .cp = S[i].cp ? G : 1, .zero = S[i].zero };
		lmt_plan_eval(&O.c, &O.plan, &l);
		double bytes = l.b_dp + l.b_tp + l.b_pp + l.b_cp;
		int impossible = l.drop && strcmp(l.drop, "over memory");
		if (O.table) {
			printf("%-9s %12s %12s  %-44s %s%s%s\n", S[i].name, impossible ? "-" : human(bytes, a),
			       impossible ? "-" : human(l.mem, b), S[i].shards, S[i].collective, l.drop ? "; " : "",
			       l.drop ? l.drop : "");
			continue;
		}
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "strategy");
		lmt_json_str(&j, "name", S[i].name);
		lmt_json_u64(&j, "degree", (uint64_t)G);
		lmt_json_str(&j, "shards", S[i].shards);
		lmt_json_str(&j, "collective", S[i].collective);
		if (impossible) {
			lmt_json_null(&j, "bytes_per_step");
			lmt_json_null(&j, "memory");
		} else {
			lmt_json_num(&j, "bytes_per_step", bytes);
			lmt_json_num(&j, "memory", l.mem);
		}
		if (l.drop)
			lmt_json_str(&j, "note", l.drop);
		put(&j);
	}
	lmt_json_release(&j);
	return 0;
}

/* ---- the budget ---- */

static void loss_fit(struct lmt_json *j, const struct lmt_run_measured *m, int n)
{
	double *C = calloc((size_t)n, sizeof *C), *L = calloc((size_t)n, sizeof *L);
	struct lmt_powerlaw p;
	struct lmt_err err = { 0 };
	int k = 0;
	if (!C || !L)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		double fpt = m[i].flops_per_token > 0 ? m[i].flops_per_token : 6.0 * (double)m[i].nparams;
		double loss = isfinite(m[i].val_loss) ? m[i].val_loss : m[i].loss;
		if (fpt > 0 && m[i].tokens_total && isfinite(loss)) {
			C[k] = fpt * (double)m[i].tokens_total;
			L[k++] = loss;
		}
	}
	if (k >= 2 && !lmt_powerlaw_fit(C, L, k, 0, &p, &err)) {
		struct lmt_gpt_config mc = O.c.model;
		mc.Vp = lmt_gpt_padded_vocab(mc.V);
		double fpt = O.plan.params > 0 ? 6 * O.plan.params : lmt_gpt_flops_per_token(&mc, O.c.T);
		double x = fpt * O.budget.target_tokens, hw, pred = lmt_powerlaw_predict(&p, x, &hw);
		if (O.table) {
			printf("loss = %.4g + %.4g C^-%.4g over %d pilots; at %.3g FLOPs: %.4f", p.E, p.A, p.alpha, k, x,
			       pred);
			if (isfinite(hw))
				printf(" +- %.4f (one standard error)\n", hw);
			else
				printf(" (no uncertainty: %d points leave no degree of freedom)\n", k);
		} else {
			lmt_json_begin(j);
			lmt_json_str(j, "event", "loss_fit");
			lmt_json_u64(j, "pilots", (uint64_t)k);
			lmt_json_num(j, "E", p.E);
			lmt_json_num(j, "A", p.A);
			lmt_json_num(j, "alpha", p.alpha);
			lmt_json_num(j, "target_flops", x);
			lmt_json_num(j, "predicted_loss", pred);
			lmt_json_num(j, "halfwidth", hw);
			put(j);
		}
	} else if (k >= 2) {
		warn("%s", err.msg);
	}
	free(C);
	free(L);
}

static int budget_mode(char **runs, int n)
{
	if (n < 1)
		usage_error("--budget needs pilot run directories");
	if (!(O.budget.target_tokens > 0))
		usage_error("--budget needs --target-tokens N");
	lmt_budget_defaults(&O.budget);
	struct lmt_run_measured *m = calloc((size_t)n, sizeof *m);
	struct lmt_budget_in in = { 0 };
	struct lmt_budget b;
	struct lmt_err err = { 0 };
	struct lmt_json j;
	if (!m)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		read_run(runs[i], &m[i]);
		double wall = m[i].wall_s > 0 ? m[i].wall_s : m[i].step_s * (double)m[i].updates;
		in.pilots_device_s += wall * m[i].cfg.world;
	}
	const struct lmt_run_measured *last = &m[n - 1];
	in.devices = O.plan.gpus ? O.plan.gpus : last->cfg.world;
	/* the rate scaled linearly from the pilot's devices (an assumption: perfect scaling) */
	in.tokens_per_s = last->tokens_per_s * in.devices / last->cfg.world;
	in.ckpt_cost_s = last->ckpt_cost_s;
	in.eval_s = last->eval_s;
	in.eval_every_s = (double)last->eval_every * last->step_s;
	if (lmt_budget_compute(&O.budget, &in, &b, &err))
		die("%s: %s", runs[n - 1], err.msg);
	lmt_json_init(&j);
	if (O.table) {
		printf("%.4g tokens at %.4g tokens/s on %g devices: %.4g s of training\n", O.budget.target_tokens,
		       in.tokens_per_s, in.devices, b.train_s);
		printf("checkpoint: %.3g s each, every %.4g s (sqrt(2 C MTBF), MTBF %.4g s): overhead %.2f%%; %.3g "
		       "failures expected, %.4g s lost each\n", in.ckpt_cost_s, b.interval_s, O.budget.mtbf_s,
		       100 * b.overhead_frac, b.failures, b.lost_per_failure_s);
		for (int i = 0; i < 6; i++)
			printf("  %-12s %12.4g device-hours\n", lmt_budget_terms[i], b.device_h[i]);
		printf("  %-12s %12.4g device-hours (%.4g h of wall time)\n", "total", b.device_h_total, b.wall_s / 3600);
	} else {
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "budget");
		lmt_json_num(&j, "target_tokens", O.budget.target_tokens);
		lmt_json_num(&j, "tokens_per_s", in.tokens_per_s);
		lmt_json_num(&j, "devices", in.devices);
		lmt_json_num(&j, "train_s", b.train_s);
		lmt_json_num(&j, "ckpt_cost_s", in.ckpt_cost_s);
		lmt_json_num(&j, "ckpt_interval_s", b.interval_s);
		lmt_json_num(&j, "ckpt_overhead", b.overhead_frac);
		lmt_json_num(&j, "failures", b.failures);
		lmt_json_num(&j, "lost_per_failure_s", b.lost_per_failure_s);
		lmt_json_num(&j, "wall_s", b.wall_s);
		lmt_json_obj(&j, "device_hours");
		for (int i = 0; i < 6; i++)
			lmt_json_num(&j, lmt_budget_terms[i], b.device_h[i]);
		lmt_json_num(&j, "total", b.device_h_total);
		lmt_json_obj_end(&j);
		put(&j);
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
				       .dtype = LMT_DTYPE_F32, .world = 1, .tp = 1, .pp = 1, .cp = 1 };
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
