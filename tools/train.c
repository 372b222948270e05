/*
 * train: GPT-2 training on a shard-pack dataset, one JSONL record per update.
 *
 *	train --data data/ --out run/ --layers 4 --heads 4 --channels 256 \
 *	      --micro-batch 8 --accum 4 --updates 2000 --lr 1e-3 | jq -c '{update, loss}'
 *
 * The model, the step and the optimizer live in the library (model.c, trainer.c)
 * and run on a backend (backend.h) and a communicator (comm.h); the run directory
 * and every record it prints in runstate.c; --config files are read by
 * core/config.c. This file parses options, wires them together, decides when
 * to evaluate, sample and save, and prints. stdout: JSONL (updates, evaluations,
 * samples, summary); stderr: human progress. The run directory holds the resolved
 * configuration, the parameter breakdown, the metrics and the events.
 */
#include <getopt.h>
#include <math.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "ckpt/resumecfg.h"
#include "ckpt/rundir.h"
#include "ckpt/runlock.h"
#include "ckpt/runranks.h"
#include "ckpt/runstate.h"
#include "comm/comm.h"
#include "core/config.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "core/util.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "model/model.h"
#include "model/trainer.h"
#include "report/alerts.h"
#include "tool.h"

/* long-only options (getopt_long returns these) */
enum {
	OPT_DATA = OPT_TOOL_BASE, OPT_CONFIG, OPT_LAYERS, OPT_HEADS, OPT_CHANNELS, OPT_CONTEXT, OPT_UNTIE,
	OPT_MICRO_BATCH, OPT_ACCUM, OPT_UPDATES, OPT_LR, OPT_MIN_LR, OPT_WARMUP, OPT_SCHEDULE, OPT_BETA1,
	OPT_BETA2, OPT_EPS, OPT_WD, OPT_DECAY_EMB, OPT_CLIP, OPT_NONFINITE, OPT_SEED, OPT_INIT_SEED, OPT_SEG_MASK,
	OPT_DOC_TARGETS, OPT_EVAL_EVERY, OPT_EVAL_SEQS, OPT_SAMPLE_EVERY, OPT_SAMPLE_TOKENS, OPT_TEMPERATURE,
	OPT_TOP_K, OPT_PROMPT, OPT_PEAK, OPT_INIT_LLMC, OPT_EXPORT_LLMC, OPT_BACKEND, OPT_WINDOW, OPT_RESUME,
	OPT_CKPT_EVERY, OPT_CKPT_MINUTES, OPT_KEEP, OPT_KEEP_EVERY, OPT_CKPT_SYNC, OPT_MTBF, OPT_LOG_SAMPLES,
	OPT_STOP_AT, OPT_JSONL, OPT_NO_SAVE, OPT_PRECISION, OPT_RECOMPUTE, OPT_LOSS_SCALE, OPT_LOSS_SCALE_WINDOW, OPT_BUCKET_MB, OPT_COMM_TIMEOUT, OPT_SKEW_ALERT, OPT_ALERT, OPT_STATS_EVERY,
	OPT_AUDIT_SAMPLES, OPT_ZERO, OPT_PREFETCH,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "data", required_argument, NULL, OPT_DATA },
	{ "out", required_argument, NULL, 'o' },
	{ "no-save", no_argument, NULL, OPT_NO_SAVE },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "tokenizer", required_argument, NULL, 't' },
	{ "layers", required_argument, NULL, OPT_LAYERS },
	{ "heads", required_argument, NULL, OPT_HEADS },
	{ "channels", required_argument, NULL, OPT_CHANNELS },
	{ "context", required_argument, NULL, OPT_CONTEXT },
	{ "untie", no_argument, NULL, OPT_UNTIE },
	{ "micro-batch", required_argument, NULL, OPT_MICRO_BATCH },
	{ "accum", required_argument, NULL, OPT_ACCUM },
	{ "updates", required_argument, NULL, OPT_UPDATES },
	{ "lr", required_argument, NULL, OPT_LR },
	{ "min-lr", required_argument, NULL, OPT_MIN_LR },
	{ "warmup", required_argument, NULL, OPT_WARMUP },
	{ "schedule", required_argument, NULL, OPT_SCHEDULE },
	{ "beta1", required_argument, NULL, OPT_BETA1 },
	{ "beta2", required_argument, NULL, OPT_BETA2 },
	{ "eps", required_argument, NULL, OPT_EPS },
	{ "weight-decay", required_argument, NULL, OPT_WD },
	{ "decay-embeddings", no_argument, NULL, OPT_DECAY_EMB },
	{ "clip", required_argument, NULL, OPT_CLIP },
	{ "on-nonfinite", required_argument, NULL, OPT_NONFINITE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "init-seed", required_argument, NULL, OPT_INIT_SEED },
	{ "segment-mask", no_argument, NULL, OPT_SEG_MASK },
	{ "doc-targets", required_argument, NULL, OPT_DOC_TARGETS },
	{ "shuffle-window", required_argument, NULL, OPT_WINDOW },
	{ "resume", required_argument, NULL, OPT_RESUME },
	{ "ckpt-every", required_argument, NULL, OPT_CKPT_EVERY },
	{ "ckpt-minutes", required_argument, NULL, OPT_CKPT_MINUTES },
	{ "keep", required_argument, NULL, OPT_KEEP },
	{ "keep-every", required_argument, NULL, OPT_KEEP_EVERY },
	{ "ckpt-sync", no_argument, NULL, OPT_CKPT_SYNC },
	{ "mtbf", required_argument, NULL, OPT_MTBF },
	{ "log-samples", no_argument, NULL, OPT_LOG_SAMPLES },
	{ "stop-at", required_argument, NULL, OPT_STOP_AT },
	{ "eval-every", required_argument, NULL, OPT_EVAL_EVERY },
	{ "eval-seqs", required_argument, NULL, OPT_EVAL_SEQS },
	{ "sample-every", required_argument, NULL, OPT_SAMPLE_EVERY },
	{ "sample-tokens", required_argument, NULL, OPT_SAMPLE_TOKENS },
	{ "temperature", required_argument, NULL, OPT_TEMPERATURE },
	{ "top-k", required_argument, NULL, OPT_TOP_K },
	{ "prompt", required_argument, NULL, OPT_PROMPT },
	{ "peak-flops", required_argument, NULL, OPT_PEAK },
	{ "init-llmc", required_argument, NULL, OPT_INIT_LLMC },
	{ "export-llmc", required_argument, NULL, OPT_EXPORT_LLMC },
	{ "backend", required_argument, NULL, OPT_BACKEND },
	{ "threads", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "jsonl", no_argument, NULL, OPT_JSONL },
	{ "precision", required_argument, NULL, OPT_PRECISION },
	{ "recompute", required_argument, NULL, OPT_RECOMPUTE },
	{ "loss-scale", required_argument, NULL, OPT_LOSS_SCALE },
	{ "loss-scale-window", required_argument, NULL, OPT_LOSS_SCALE_WINDOW },
	{ "bucket-mb", required_argument, NULL, OPT_BUCKET_MB },
	{ "comm-timeout", required_argument, NULL, OPT_COMM_TIMEOUT },
	{ "skew-alert", required_argument, NULL, OPT_SKEW_ALERT },
	{ "alert", required_argument, NULL, OPT_ALERT },
	{ "stats-every", required_argument, NULL, OPT_STATS_EVERY },
	{ "audit-samples", required_argument, NULL, OPT_AUDIT_SAMPLES },
	{ "zero", required_argument, NULL, OPT_ZERO },
	{ "prefetch", no_argument, NULL, OPT_PREFETCH },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: train --data DIR [options]\n"
	       "\n"
	       "Train a GPT-2 model on a shard-pack dataset; one JSONL record per update.\n"
	       "\n"
	       "  --data DIR              the dataset (shard-pack's output)\n"
	       "  -o, --out RUN           run directory: config, parameters, metrics, events,\n"
	       "                          checkpoints (default: a new runs/STAMP-TAG, and\n"
	       "                          runs/latest links to it)\n"
	       "  --no-save               no run directory: stdout and stderr only\n"
	       "  --config FILE           'key = value' lines, keys as the long options, or\n"
	       "                          a run's config.json (read where it appears: later\n"
	       "                          options win)\n"
	       "  -t, --tokenizer FILE    the dataset's tokenizer (checked against the\n"
	       "                          manifest; needed to show samples as text)\n"
	       "Model:\n"
	       "  --layers N --heads N --channels N   (4, 4, 256)\n"
	       "  --context N             context length (the dataset's sequence length)\n"
	       "  --untie                 an output head separate from the token embedding\n"
	       "  --init-llmc FILE        start from an llm.c GPT-2 checkpoint\n"
	       "  --export-llmc FILE      write the final model in llm.c's format\n"
	       "Batch and optimizer:\n"
	       "  --micro-batch B         sequences per micro-batch (8)\n"
	       "  --accum N               micro-batches per update (1)\n"
	       "  --updates N             optimizer updates (1000)\n"
	       "  --lr X --min-lr F       peak learning rate (6e-4); floor as a fraction (0.1)\n"
	       "  --warmup N              warm-up updates (updates/20)\n"
	       "  --schedule S            cosine (default), linear or constant\n"
	       "  --beta1 --beta2 --eps   AdamW (0.9, 0.95, 1e-8)\n"
	       "  --weight-decay X        on weight matrices (0.1)\n"
	       "  --decay-embeddings      decay wte and wpe too\n"
	       "  --clip X                global gradient-norm clip (1.0; 0: none)\n"
	       "  --on-nonfinite P        stop (default) or skip the update\n"
	       "  --seed N --init-seed N  data order (1); initialisation (the seed)\n"
	       "  --segment-mask          attention stays within each document\n"
	       "  --doc-targets T         keep (default) or drop targets crossing documents\n"
	       "  --shuffle-window N      shuffle window in sequences (8192)\n"
	       "Checkpoints (in RUN/ckpt; a final one at the end and on SIGINT/SIGTERM):\n"
	       "  --ckpt-every N          every N updates (0: none but the final one)\n"
	       "  --ckpt-minutes M        or every M minutes of training\n"
	       "  --keep N --keep-every K keep the N newest (3, at least 2), and every K-th\n"
	       "  --ckpt-sync             write while training waits (default: a snapshot, then\n"
	       "                          a background writer)\n"
	       "  --resume RUN|auto       continue RUN from its newest valid checkpoint (auto:\n"
	       "                          -o's run, or a fresh start if it has none), with its\n"
	       "                          recorded options (train(1), Resuming); the newest\n"
	       "                          default run is runs/latest\n"
	       "  --mtbf SECONDS          report the checkpoint interval sqrt(2 C MTBF)\n"
	       "  --log-samples           each update record lists its sample ids\n"
	       "  --stop-at N             stop after update N as on SIGTERM (save, exit 0)\n"
	       "Evaluation and samples:\n"
	       "  --eval-every N --eval-seqs N     validation loss (every 100; 64 sequences)\n"
	       "  --sample-every N --sample-tokens N --temperature X --top-k N --prompt TEXT\n"
	       "                          fixed-seed samples (0: never; 32; 1.0; 40)\n"
	       "Running:\n"
	       "  --backend cpu           the compute backend (cpu)\n"
	       "  --precision P           fp32, bf16 or fp16 (default: bf16 where the backend has\n"
	       "                          fast bf16 GEMMs, else fp32); master weights stay fp32\n"
	       "  --recompute R           none, block or every:K: keep only each (K-th) block's\n"
	       "                          input and recompute it in backward\n"
	       "  --loss-scale S --loss-scale-window N   fp16's dynamic loss scale: the first\n"
	       "                          scale and the updates without overflow before it\n"
	       "                          doubles (65536; 2000)\n"
	       "  --bucket-mb X           data parallel: gradient MiB per all-reduce bucket, each\n"
	       "                          started in backward as its layers finish (25; 0: a\n"
	       "                          bucket per layer)\n"
	       "  --zero N                several ranks: 1 shards AdamW's state (ZeRO-1), 2 and the\n"
	       "                          gradients, 3 and the parameters (FSDP); 0 none\n"
	       "  --prefetch              --zero 3: gather the next layer while this one computes\n"
	       "  --comm-timeout S        several ranks: a collective waiting longer fails the\n"
	       "                          job, naming the operation (300; 0: wait for ever)\n"
	       "  --skew-alert PCT        several ranks: an alert event when the slowest rank's\n"
	       "                          step is PCT%% over the median (20)\n"
	       "  --stats-every N         per-layer gradient and parameter norms, update ratios and\n"
	       "                          block output RMS every N updates (25; 0: none)\n"
	       "  --alert NAME=X          an alert's threshold, 0 off: loss_spike (6 sigma), grad_spike\n"
	       "                          (5x median), clipping (0.8), overflow (0.2), starvation\n"
	       "                          (0.25), skew (0.2), val_regression (0.02); window=N (50)\n"
	       "  --audit-samples N       several ranks: an audit record of every rank's sample\n"
	       "                          ids for each of the first N updates\n"
	       "  -j, --threads N         CPU threads (OMP_NUM_THREADS, else all cores)\n"
	       "  --peak-flops X          FLOP/s for MFU (default: the measured GEMM peak in the\n"
	       "                          run's precision)\n"
	       "  -q, --quiet             no progress on stderr\n"
	       "  --jsonl                 JSONL on stdout even on a terminal (where train\n"
	       "                          otherwise shows a line per update for people)\n"
	       "  -h, --help  -V, --version\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See train(1).\n");
}

struct opts {
	const char *data, *out, *tokenizer, *init_llmc, *export_llmc, *prompt, *backend;
	const char *precision;   /* NULL: the backend's best */
	double comm_timeout;
	struct lmt_alert_cfg alert;
	uint64_t audit;
	int jsonl, no_save;
	struct lmt_gpt_config model;
	struct lmt_train_cfg tc;
	int context, threads;
	uint64_t init_seed;
	int init_seed_given, warmup_given, shape_given;
	uint64_t eval_every, eval_seqs, sample_every;
	const char *resume, *resume_from; /* resume_from: the checkpoint --resume names, if it names one */
	int resume_auto;
	uint64_t ckpt_every, keep_every, stop_at;
	double ckpt_minutes, mtbf;
	int keep, ckpt_sync, log_samples;
	int sample_tokens, top_k;
	double temperature, peak;
	/* the value each recorded option (ckpt/resumecfg.h) was given on the command
	 * line or in a --config file; one not here was not given, so a resume adopts
	 * the run's */
	struct lmt_resumecfg_pair given[LMT_RESUMECFG_MAX];
	size_t ngiven;
	int adopting; /* set_option is applying a recorded value: not given */
	const char *configs[64]; /* the --config files read: inputs --export-llmc must not overwrite */
	int nconfigs;
};

static void set_option(struct opts *o, int c, const char *arg);
static void config_json(struct opts *o, const char *path);

/* arg's index in words (NULL-terminated), or a usage error listing them. */
static int choice(const char *opt, const char *arg, const char *const *words)
{
	char list[128] = "";
	for (int i = 0; words[i]; i++) {
		if (!strcmp(arg, words[i]))
			return i;
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? words[i + 1] ? ", " : " or " : "",
			 words[i]);
	}
	usage_error("option '--%s': '%s' is not %s", opt, arg, list);
}

/* One line of a --config file, applied as its option would be there (keys are
 * the long option names). */
static int config_entry(void *ctx, const struct lmt_config_entry *e)
{
	const struct option *opt = NULL;
	char where[600];
	snprintf(where, sizeof where, "'%s': line %d", e->path, e->line);
	for (const struct option *x = longopts; x->name; x++)
		if (!strcmp(x->name, e->key))
			opt = x;
	if (!opt || !strcmp(e->key, "config") || !strcmp(e->key, "help") || !strcmp(e->key, "version"))
		usage_error("%s: unknown key '%.63s'", where, e->key);
	if (opt->has_arg == required_argument && (!e->value || !*e->value))
		usage_error("%s: key '%s' needs a value", where, e->key);
	if (opt->has_arg == no_argument && e->value && strcmp(e->value, "true") && strcmp(e->value, "1"))
		usage_error("%s: key '%s' takes no value (or true)", where, e->key);
	tool_context = where;
	set_option(ctx, opt->val, e->value ? strdup(e->value) : NULL);
	tool_context = NULL;
	return 0;
}

static void mark_given(struct opts *o, int c, const char *arg);

/* --alert NAME=X: a threshold of alerts.h (0: that kind off), or window=N */
static void set_alert(struct lmt_alert_cfg *a, const char *arg)
{
	static const char *const names[] = { "window", "loss_spike", "grad_spike", "clipping", "overflow", "starvation",
					     "skew", "val_regression" };
	double *at[] = { NULL, &a->loss_sigma, &a->grad_ratio, &a->clip_frac, &a->overflow_frac, &a->starve_frac,
			 &a->skew, &a->val_frac };
	const char *eq = strchr(arg, '=');
	for (size_t i = 0; eq && i < sizeof names / sizeof names[0]; i++)
		if (strlen(names[i]) == (size_t)(eq - arg) && !strncmp(arg, names[i], (size_t)(eq - arg))) {
			if (!at[i])
				a->window = (int)opt_int("alert window", eq + 1, 2, LMT_ALERT_WINDOW_MAX);
			else
				*at[i] = opt_double("alert", eq + 1, 0, 1e9);
			return;
		}
	usage_error("option '--alert': '%s': expected NAME=X with NAME one of window, loss_spike, grad_spike, "
		    "clipping, overflow, starvation, skew, val_regression", arg);
}

static void set_option(struct opts *o, int c, const char *arg)
{
	if (!o->adopting)
		mark_given(o, c, arg);
	switch (c) {
	case OPT_DATA: o->data = arg; break;
	case 'o': o->out = arg; break;
	case OPT_CONFIG: { /* "key = value" lines (core/config.h), read here: later options win */
		struct lmt_err err = { 0 };
		if (o->nconfigs == (int)(sizeof o->configs / sizeof o->configs[0]))
			usage_error("more than %d --config files", o->nconfigs);
		o->configs[o->nconfigs++] = arg;
		FILE *f = fopen(arg, "r");
		int first = ' ';
		while (f && (first == ' ' || first == '\t' || first == '\n' || first == '\r'))
			first = fgetc(f);
		if (f)
			fclose(f);
		if (first == '{') /* config.json's form */
			config_json(o, arg);
		else if (lmt_config_read(arg, config_entry, o, &err))
			die_err(&err);
		break;
	}
	case 't': o->tokenizer = arg; break;
	case OPT_LAYERS: o->model.L = (int)opt_int("layers", arg, 1, 1024); o->shape_given = 1; break;
	case OPT_HEADS: o->model.NH = (int)opt_int("heads", arg, 1, 1024); o->shape_given = 1; break;
	case OPT_CHANNELS: o->model.C = (int)opt_int("channels", arg, 1, 1 << 16); o->shape_given = 1; break;
	case OPT_CONTEXT: o->context = (int)opt_int("context", arg, 1, 1 << 20); o->shape_given = 1; break;
	case OPT_UNTIE: o->model.untied = 1; break;
	case OPT_MICRO_BATCH: o->tc.B = (int)opt_int("micro-batch", arg, 1, 1 << 20); break;
	case OPT_ACCUM: o->tc.accum = (int)opt_int("accum", arg, 1, 1 << 20); break;
	case OPT_UPDATES: o->tc.updates = (uint64_t)opt_int("updates", arg, 1, INT64_MAX); break;
	case OPT_LR: o->tc.lr = opt_double("lr", arg, 0, 10); break;
	case OPT_MIN_LR: o->tc.min_lr_frac = opt_double("min-lr", arg, 0, 1); break;
	case OPT_WARMUP:
		o->tc.warmup = (uint64_t)opt_int("warmup", arg, 0, INT64_MAX);
		o->warmup_given = 1;
		break;
	case OPT_SCHEDULE: /* in enum lmt_schedule's order */
		o->tc.schedule = choice("schedule", arg, (const char *const[]){ "cosine", "linear", "constant", NULL });
		break;
	case OPT_BETA1: o->tc.beta1 = opt_double("beta1", arg, 0, 0.999999); break;
	case OPT_BETA2: o->tc.beta2 = opt_double("beta2", arg, 0, 0.999999999); break;
	/* above 0, as AdamW needs: where a gradient has always been 0, m and v are 0,
	 * and with eps 0 the step m / (sqrt(v) + eps) is 0/0 (PyTorch's too) */
	case OPT_EPS: o->tc.eps = opt_double_above("eps", arg, 0, 1); break;
	case OPT_WD: o->tc.weight_decay = opt_double("weight-decay", arg, 0, 10); break;
	case OPT_DECAY_EMB: o->tc.decay_embeddings = 1; break;
	case OPT_CLIP: o->tc.clip = opt_double("clip", arg, 0, 1e30); break;
	case OPT_NONFINITE: /* in enum lmt_nonfinite's order */
		o->tc.on_nonfinite = choice("on-nonfinite", arg, (const char *const[]){ "stop", "skip", NULL });
		break;
	case OPT_SEED: o->tc.seed = (uint64_t)opt_int("seed", arg, 0, INT64_MAX); break;
	case OPT_INIT_SEED:
		o->init_seed = (uint64_t)opt_int("init-seed", arg, 0, INT64_MAX);
		o->init_seed_given = 1;
		break;
	case OPT_SEG_MASK: o->tc.seg_mask = 1; break;
	case OPT_DOC_TARGETS:
		o->tc.cross_doc_targets = !choice("doc-targets", arg, (const char *const[]){ "keep", "drop", NULL });
		break;
	case OPT_WINDOW: o->tc.shuffle_window = (uint64_t)opt_int("shuffle-window", arg, 1, INT64_MAX); break;
	case OPT_EVAL_EVERY: o->eval_every = (uint64_t)opt_int("eval-every", arg, 0, INT64_MAX); break;
	case OPT_EVAL_SEQS: o->eval_seqs = (uint64_t)opt_int("eval-seqs", arg, 1, INT64_MAX); break;
	case OPT_SAMPLE_EVERY: o->sample_every = (uint64_t)opt_int("sample-every", arg, 0, INT64_MAX); break;
	case OPT_SAMPLE_TOKENS: o->sample_tokens = (int)opt_int("sample-tokens", arg, 1, 1 << 20); break;
	case OPT_TEMPERATURE: o->temperature = opt_double("temperature", arg, 0, 100); break;
	case OPT_TOP_K: o->top_k = (int)opt_int("top-k", arg, 0, 1 << 30); break;
	case OPT_PROMPT: o->prompt = arg; break;
	case OPT_PEAK: o->peak = opt_double("peak-flops", arg, 1, 1e20); break;
	case OPT_INIT_LLMC: o->init_llmc = arg; break;
	case OPT_EXPORT_LLMC: o->export_llmc = arg; break;
	case OPT_BACKEND: {
		/* a name the registry knows (backend/registry.c) */
		const char *names = lmt_backend_names(), *p = strstr(names, arg);
		size_t n = strlen(arg);
		if (!n || !p || (p != names && p[-1] != ' ') || (p[n] && p[n] != ' '))
			usage_error("option '--backend': '%s' is not available in this build (%s)", arg, names);
		o->backend = arg;
		break;
	}
	case OPT_RESUME: o->resume = arg; break;
	case OPT_CKPT_EVERY: o->ckpt_every = (uint64_t)opt_int("ckpt-every", arg, 0, INT64_MAX); break;
	case OPT_CKPT_MINUTES: o->ckpt_minutes = opt_double("ckpt-minutes", arg, 0, 1e9); break;
	case OPT_KEEP: o->keep = (int)opt_int("keep", arg, 2, 1 << 20); break;
	case OPT_KEEP_EVERY: o->keep_every = (uint64_t)opt_int("keep-every", arg, 0, INT64_MAX); break;
	case OPT_CKPT_SYNC: o->ckpt_sync = 1; break;
	case OPT_MTBF: o->mtbf = opt_double("mtbf", arg, 1, 1e12); break;
	case OPT_LOG_SAMPLES: o->log_samples = 1; break;
	case OPT_STOP_AT: o->stop_at = (uint64_t)opt_int("stop-at", arg, 1, INT64_MAX); break;
	case 'j': o->threads = (int)opt_int("threads", arg, 1, 4096); break;
	case 'q': tool_quiet = 1; break;
	case OPT_JSONL: o->jsonl = 1; break;
	case OPT_PRECISION:
		if (strcmp(arg, "auto") && lmt_dtype_parse(arg) != LMT_DTYPE_F32 && lmt_dtype_parse(arg) != LMT_DTYPE_BF16 &&
		    lmt_dtype_parse(arg) != LMT_DTYPE_F16)
			usage_error("option '--precision': '%s' is not fp32, bf16, fp16 or auto", arg);
		o->precision = strcmp(arg, "auto") ? lmt_dtype_name(lmt_dtype_parse(arg)) : NULL;
		break;
	case OPT_COMM_TIMEOUT: o->comm_timeout = opt_double("comm-timeout", arg, 0, 1e9); break;
	case OPT_SKEW_ALERT: o->alert.skew = opt_double("skew-alert", arg, 0, 1e9) / 100; break;
	case OPT_ALERT: set_alert(&o->alert, arg); break;
	case OPT_STATS_EVERY: o->tc.stats_every = (uint64_t)opt_int("stats-every", arg, 0, INT64_MAX); break;
	case OPT_ZERO:
		o->tc.zero = (int)opt_int("zero", arg, 0, 3);
		break;
	case OPT_PREFETCH: o->tc.prefetch = 1; break;
	case OPT_AUDIT_SAMPLES: o->audit = (uint64_t)opt_int("audit-samples", arg, 0, INT64_MAX); break;
	case OPT_BUCKET_MB: o->tc.bucket_bytes = (size_t)(opt_double("bucket-mb", arg, 0, 1 << 20) * (1 << 20)); break;
	case OPT_LOSS_SCALE: o->tc.loss_scale = opt_double("loss-scale", arg, 1.0 / 65536, 1e30); break;
	case OPT_LOSS_SCALE_WINDOW:
		o->tc.loss_scale_window = (uint64_t)opt_int("loss-scale-window", arg, 1, INT64_MAX);
		break;
	case OPT_RECOMPUTE:
		if (!strcmp(arg, "none"))
			o->tc.recompute_every = 0;
		else if (!strcmp(arg, "block"))
			o->tc.recompute_every = 1;
		else if (!strncmp(arg, "every:", 6))
			o->tc.recompute_every = (int)opt_int("recompute", arg + 6, 1, 1 << 20);
		else
			usage_error("option '--recompute': '%s' is not none, block or every:K", arg);
		break;
	case OPT_NO_SAVE: o->no_save = 1; break;
	}
}

/* ---- what --resume and --config do with config.json (ckpt/resumecfg.h) ---- */

static int long_option_val(const char *name)
{
	for (const struct option *x = longopts; x->name; x++)
		if (!strcmp(x->name, name))
			return x->val;
	return 0;
}

/* The value given for option name (a recorded one), or NULL. */
static const char *given_value(const struct opts *o, const char *name)
{
	for (size_t i = 0; i < o->ngiven; i++)
		if (!strcmp(o->given[i].opt, name))
			return o->given[i].value;
	return NULL;
}

static void mark_given(struct opts *o, int c, const char *arg)
{
	const struct lmt_resumecfg_opt *r = NULL;
	for (const struct option *x = longopts; x->name && !r; x++)
		if (x->val == c)
			r = lmt_resumecfg_find(x->name);
	if (!r)
		return;
	size_t i = 0;
	while (i < o->ngiven && strcmp(o->given[i].opt, r->opt))
		i++;
	o->given[i] = (struct lmt_resumecfg_pair){ r->opt, arg ? arg : "true" };
	if (i == o->ngiven)
		o->ngiven++;
}

/* A --config file in config.json's form: its recorded options, applied as
 * they are, so a run's own config.json runs it again. */
static void config_json(struct opts *o, const char *path)
{
	struct lmt_err err = { 0 };
	struct lmt_resumecfg_result res;
	int rc = lmt_resumecfg_read(path, &res, &err);
	if (rc == LMT_EFORMAT) /* bytes a config file cannot hold: exit 1, as in the 'key = value' form */
		die_err(&err);
	if (rc)
		usage_error("%s", err.msg);
	for (size_t i = 0; i < res.n; i++) {
		tool_context = res.items[i].detail;
		set_option(o, long_option_val(res.items[i].opt), strdup(res.items[i].value));
		tool_context = NULL;
	}
	lmt_resumecfg_release(&res);
}

/* Whether option name's values a and b are the same, as set_option parses them. */
static int same_value(void *ctx, const char *name, const char *a, const char *b)
{
	struct opts x, y;
	int c = long_option_val(name);
	(void)ctx;
	memset(&x, 0, sizeof x);
	memset(&y, 0, sizeof y);
	x.adopting = y.adopting = 1;
	set_option(&x, c, a);
	set_option(&y, c, b);
	return !memcmp(&x, &y, offsetof(struct opts, given));
}

static void event(const char *what, const char *detail, uint64_t update);

/* Resuming from checkpoint c (at update `update`): the options not given take
 * the values its run recorded; given ones that differ are refused, all of them
 * in one message (REFUSE), or applied with a warning and a "config-change"
 * event (WARN). */
static void adopt_recorded(struct opts *o, const struct lmt_ckpt *c, uint64_t update)
{
	struct lmt_err err = { 0 };
	struct lmt_resumecfg_result res;
	int rc = lmt_resumecfg_adopt(lmt_ckpt_state(c, "config"), c->dir, update, o->given, o->ngiven, same_value, NULL,
				     &res, &err);
	if (rc == LMT_EINVAL)
		usage_error("%s", res.refused.buf);
	if (rc)
		die_err(&err);
	for (size_t i = 0; i < res.n; i++) {
		const struct lmt_resumecfg_item *it = &res.items[i];
		if (it->value) {
			o->adopting = 1;
			set_option(o, long_option_val(it->opt), strdup(it->value));
			o->adopting = 0;
		} else {
			warn("%s", it->warning);
			event("config-change", it->detail, update);
		}
	}
	lmt_resumecfg_release(&res);
}

/* ---- the run directory (lib/ckpt/runstate.h); this file prints ---- */

static struct lmt_run run;
static struct lmt_run_lock run_lock; /* held until exit: the kernel drops it however train ends */
static int run_finished;
static struct lmt_trainer the_trainer;
/* the update the run had reached: stop_trainer, which runs before run_atexit,
 * clears the trainer, and the failed event must still say it */
static uint64_t run_reached;

static void stop_trainer(void)
{
	run_reached = the_trainer.update;
	if (the_trainer.loader.d)
		lmt_trainer_release(&the_trainer);
}

static void notice(void *ctx, const char *msg)
{
	(void)ctx;
	warn("%s", msg);
}

static void event(const char *what, const char *detail, uint64_t update)
{
	struct lmt_err err = { 0 };
	if (lmt_run_event(&run, what, detail, update, &err))
		die_err(&err);
}

/* On any exit before the end (die() included), the events file says the run failed,
 * at the update it had reached. This runs inside exit(), so a failure only warns:
 * dying here would call exit() again. */
static void run_atexit(void)
{
	struct lmt_err err = { 0 };
	if (run.events && !run_finished &&
	    lmt_run_event(&run, "failed", "the run stopped on an error (see stderr)", run_reached, &err))
		warn("%s", err.msg);
}

/* Write j's record to stdout and, with to_run, to the run's metrics. */
/* stdout on a terminal: a line for people per record (JSONL still goes to the run) */
static int human;
static uint64_t human_updates; /* --updates, for the ETA */

static void clock_str(char *buf, size_t cap, double s)
{
	long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
	if (t >= 3600)
		snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The record j (closed) as a line for people: nanoGPT's compact update line,
 * validation and samples as they happen, checkpoints on their own line. */
static void show(const struct lmt_json *j)
{
	json_t *r = json_loadb(j->out.buf, j->out.len, 0, NULL);
	const char *ev = json_string_value(json_object_get(r, "event"));
	double uf = num(r, "update");
	unsigned long long u = isfinite(uf) && uf >= 0 ? (unsigned long long)uf : 0; /* NaN: no update field */
	char a[32], b[32];
	if (!ev) {
	} else if (!strcmp(ev, "update")) {
		double wall = num(json_object_get(r, "clocks"), "wall_s");
		double step = num(json_object_get(r, "time"), "step");
		clock_str(a, sizeof a, wall);
		clock_str(b, sizeof b, step * (double)(human_updates > u ? human_updates - u : 0));
		printf("update %5llu/%llu | loss %.4f | lr %.2e | norm %6.3f%s | %7.0f tok/s | mfu %5.1f%% | %s, eta %s\n",
		       u, (unsigned long long)human_updates, num(r, "loss"), num(r, "lr"), num(r, "grad_norm"),
		       json_is_true(json_object_get(r, "clipped")) ? "*" : " ", num(r, "tokens_per_s"),
		       100 * num(r, "mfu"), a, b);
	} else if (!strcmp(ev, "eval")) {
		printf("update %5llu: val loss %.4f (train's estimate: %.0f sequences of the val split; evalppl "
		       "scores all of it)\n", u, num(r, "loss"), num(r, "sequences"));
	} else if (!strcmp(ev, "sample")) {
		const char *t = json_string_value(json_object_get(r, "text"));
		printf("update %5llu: sample: %s\n", u, t ? t : "(ids only: no tokenizer)");
	} else if (!strcmp(ev, "alert") || !strcmp(ev, "alert-cleared")) {
		printf("update %5llu: %s %s: %s\n", u, ev, json_string_value(json_object_get(r, "kind")),
		       json_string_value(json_object_get(r, "evidence")));
	} else if (!strcmp(ev, "checkpoint")) {
		printf("checkpoint  %s (%.1f MB, %.2f s%s)\n", json_string_value(json_object_get(r, "path")),
		       num(r, "bytes") / 1e6, num(r, "write_s"), json_is_true(json_object_get(r, "async")) ? ", async" : "");
	} else if (!strcmp(ev, "summary")) {
		clock_str(a, sizeof a, num(r, "wall_s"));
		double tps = num(r, "tokens_per_s");
		if (isnan(tps))
			printf("done: nothing to do (the run was already at update %llu)\n",
			       (unsigned long long)num(r, "updates"));
		else
			printf("%s: %llu updates, %.0f tokens in %s (%.0f tok/s)\n", json_string_value(json_object_get(r, "status")),
			       (unsigned long long)num(r, "updates"), num(r, "tokens"), a, tps);
	}
	json_decref(r);
	if (fflush(stdout))
		die_write("<stdout>");
}

/* Data parallel: every rank trains, rank 0 alone owns the run directory and
 * writes stdout; the others (followers) compute and take part in every collective. */
static int follower;
static struct lmt_comm the_comm;

static void emit(struct lmt_json *j, int to_run)
{
	struct lmt_err err = { 0 };
	if (follower) {
		lmt_json_end(j);
		return;
	}
	if (human) {
		lmt_json_end(j);
		lmt_strbuf_putc(&j->out, '\n');
		show(j);
	} else if (lmt_json_end_line(j, stdout)) {
		die_write("<stdout>");
	}
	if (to_run && lmt_run_metrics_append(&run, j, &err))
		die_err(&err);
}

/* A finished checkpoint: its record and a progress line. */
static void ckpt_saved(void *ctx, const struct lmt_run_saved *s)
{
	const struct opts *o = ctx;
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_run_save_record(&j, s);
	emit(&j, 1);
	lmt_json_release(&j);
	char tail[96] = "";
	if (s->best_interval_s > 0)
		snprintf(tail, sizeof tail, "; with an MTBF of %.0f s the best interval is %.0f s", o->mtbf,
			 s->best_interval_s);
	if (!human) /* on a terminal its line is on stdout already */
		info("checkpoint of update %llu: %.1f MB written in %.2f s; cost %.3f s (training %s)%s",
		     (unsigned long long)s->update, s->r->bytes / 1e6, s->r->write_s, s->cost_s,
		     s->async ? "paused for the snapshot" : "waited for the write", tail);
}

/* The saver of the run's checkpoints, from t_start on (a resumed run's checkpoint
 * is not saved again). */
static void start_saver(struct lmt_run_saver *sv, const struct opts *o, struct lmt_trainer *tr, double wall_offset,
			double t_start, int resumed)
{
	lmt_run_saver_init(sv, &run, tr);
	sv->keep = o->keep;
	sv->keep_every = o->keep_every;
	sv->mtbf = o->mtbf;
	sv->wall_offset = wall_offset;
	sv->t_start = t_start;
	sv->saved = ckpt_saved;
	sv->saved_ctx = (void *)o;
	sv->last_saved = resumed ? tr->update : UINT64_MAX;
	if (o->out && !o->ckpt_sync && (o->ckpt_every || o->ckpt_minutes > 0) && tr->comm->world == 1)
		lmt_ckpt_async_reserve(&sv->async, tr->g->nparams * 3);
}

static void parse_args(struct opts *o, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->model = (struct lmt_gpt_config){ 0, 0, 0, 4, 4, 256, 0 };
	o->tc = (struct lmt_train_cfg){ 8, 1, 0, 1, 1000, 6e-4, 0.1, 0, LMT_SCHED_COSINE, 0.9, 0.95, 1e-8, 0.1, 0,
					1.0, LMT_NONFINITE_STOP, 1, 8192, LMT_DTYPE_F32, 0, 65536, 2000, 25 << 20, 0, 0, 25 };
	o->eval_every = 100;
	o->comm_timeout = 300;
	lmt_alert_cfg_default(&o->alert);
	o->keep = 3;
	o->eval_seqs = 64;
	o->sample_tokens = 32;
	o->temperature = 1.0;
	o->top_k = 40;
	int c;
	while ((c = getopt_long(argc, argv, "hVo:t:j:q", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage();
			exit(0);
		}
		if (c == 'V') {
			print_version();
			exit(0);
		}
		if (c == '?' || c == ':')
			bad_option(argv);
		set_option(o, c, optarg);
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (o->no_save && o->out)
		usage_error("--no-save writes no run directory, but -o names one");
	if (o->no_save && o->resume)
		usage_error("--resume continues a run directory; --no-save has none");
	/* --resume RUN, --resume RUN/ckpt/step-N, or --resume auto (with -o RUN) */
	if (o->resume && !strcmp(o->resume, "auto")) {
		if (!o->out)
			usage_error("--resume auto continues the run in -o RUN: give -o (-o runs/latest: the newest run train "
				    "named itself)");
		o->resume_auto = 1;
	} else if (o->resume) {
		struct lmt_err err = { 0 };
		char *rundir;
		int named, rc = lmt_run_resolve(o->resume, o->out, &rundir, &named, &err);
		if (rc == LMT_EINVAL)
			usage_error("%s", err.msg);
		if (rc)
			die_err(&err);
		o->resume_from = named ? o->resume : NULL;
		o->out = rundir;
	}
}

/* The defaults that follow from other options, and the checks across options:
 * after a resume has adopted the run's configuration. */
static void finish_args(struct opts *o)
{
	if (!o->data)
		usage_error("no dataset: give --data DIR (shard-pack's output)");
	if (!o->init_seed_given)
		o->init_seed = o->tc.seed;
	if (!o->warmup_given)
		o->tc.warmup = o->tc.updates / 20;
	/* a resume's fewer --updates than the warm-up it adopted just ends in the warm-up */
	if (o->tc.warmup > o->tc.updates && (!o->resume || given_value(o, "warmup")))
		usage_error("--warmup %llu is more than --updates %llu", (unsigned long long)o->tc.warmup,
			    (unsigned long long)o->tc.updates);
	if (o->init_llmc && (o->model.untied || o->shape_given))
		usage_error("--init-llmc sets the model's shape; --layers, --heads, --channels, --context and --untie do "
			    "not apply");
	if (o->export_llmc && o->model.untied)
		usage_error("--export-llmc writes llm.c's format, which has no untied head (--untie)");
	if (o->prompt && !o->tokenizer)
		usage_error("--prompt is text: give the tokenizer with -t");
	if (!o->init_llmc && o->model.C % o->model.NH)
		usage_error("--channels %d is not a multiple of --heads %d", o->model.C, o->model.NH);
	if ((o->ckpt_every || o->ckpt_minutes > 0 || o->keep_every || o->stop_at) && o->no_save)
		usage_error("checkpoints are written into the run directory, and --no-save has none (--ckpt-every, "
			    "--ckpt-minutes, --keep-every, --stop-at)");
}

/* A run given no -o (nor --no-save) gets a new directory of its own, runs/STAMP-TAG
 * (ckpt/rundir.h), named on stderr and in a "run" record on stdout (not in the
 * run's files: they stay the same wherever the run lives), and runs/latest
 * points at it. Made once the model is built, so a run refused for its data or
 * model leaves none behind, and locked at once, as -o's is before it is read. */
static void default_run(struct opts *o, const struct lmt_gpt *g)
{
	struct lmt_err err = { 0 };
	static char dir[PATH_MAX];
	char tag[64];
	snprintf(tag, sizeof tag, "d%d-h%d-c%d", g->cfg.L, g->cfg.NH, g->cfg.C);
	if (lmt_rundir_new("runs", time(NULL), tag, dir, sizeof dir, &err) || lmt_run_lock(dir, 0, &run_lock, &err))
		die_err(&err);
	o->out = dir;
	int linked = !lmt_rundir_link_latest("runs", dir + strlen("runs/"), &err);
	if (!linked)
		warn("runs/latest not updated: %s (the run goes on in '%s')", err.msg, dir);
	info("run directory '%s'", dir);
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "run");
	lmt_json_str(&j, "dir", dir);
	if (linked)
		lmt_json_str(&j, "latest", "runs/latest");
	emit(&j, 0);
	lmt_json_release(&j);
}

/* The run directory and --export-llmc stay apart from every input, and the
 * export from the run's checkpoints. */
static void check_paths(const struct opts *o)
{
	char ck[PATH_MAX] = "";
	if (o->out)
		snprintf(ck, sizeof ck, "%s/ckpt", o->out);
	const char *ins[] = { o->data, o->tokenizer, o->init_llmc, ck[0] ? ck : NULL };
	const char *outs[] = { o->out, o->export_llmc }, *what[] = { "-o", "--export-llmc" };
	check_outputs(outs, what, 1, ins, 3);
	check_outputs(outs + 1, what + 1, 1, ins, 4);
	/* the --config files too (a run directory beside them writes only its own names) */
	check_outputs(outs + 1, what + 1, 1, o->configs, o->nconfigs);
}

/* The dataset, and the tokenizer if given (it must be the dataset's); 1 with a tokenizer. */
static int open_data(struct opts *o, struct lmt_dataset *d, struct lmt_tokenizer *tok)
{
	struct lmt_err err = { 0 };
	int have_tok = 0;
	if (lmt_dataset_open(d, o->data, &err))
		die_err(&err);
	if (o->tokenizer) {
		if (lmt_tok_load(tok, o->tokenizer, &err))
			die_err(&err);
		if (memcmp(tok->sha256, d->tokenizer_sha256, 32)) {
			char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
			die("'%s' is tokenizer %.16s..., but the dataset '%s' was made with %.16s...", o->tokenizer,
			    lmt_sha256_hex(tok->sha256, a), o->data, lmt_sha256_hex(d->tokenizer_sha256, b));
		}
		have_tok = 1;
	}
	int T = (int)d->seq_len;
	if (!o->context)
		o->context = T;
	if (T > o->context)
		die("'%s': sequences of %d tokens are longer than the model's context of %d (--context)", o->data, T,
		    o->context);
	return have_tok;
}

/* The model: from an llm.c checkpoint, or of the options' shape (weights later). */
static void open_model(struct opts *o, const struct lmt_dataset *d, struct lmt_backend *be, struct lmt_gpt *g)
{
	struct lmt_err err = { 0 };
	int T = (int)d->seq_len;
	if (o->init_llmc) {
		if (lmt_gpt_load_llmc(g, o->init_llmc, be, &err))
			die_err(&err);
		if (g->cfg.V != (int)d->vocab_size)
			die("'%s': vocabulary of %d, the dataset's tokenizer has %u", o->init_llmc, g->cfg.V, d->vocab_size);
		if (g->cfg.max_T < T)
			die("'%s': context of %d, shorter than the dataset's sequences of %d", o->init_llmc, g->cfg.max_T, T);
	} else {
		o->model.max_T = o->context;
		o->model.V = (int)d->vocab_size;
		o->model.Vp = lmt_gpt_padded_vocab(o->model.V);
		if (lmt_gpt_init(g, &o->model, be, &err))
			die_err(&err);
	}
}

/* The compute precision: asked for, or the backend's fastest (bf16 where its GEMMs
 * have native bf16 kernels); recorded in the run's config; recompute with it. */
static void set_precision(struct opts *o, struct lmt_backend *be, struct lmt_gpt *g)
{
	struct lmt_err err = { 0 };
	const char *env = getenv("LMT_PRECISION");
	if (!o->precision && env && *env && strcmp(env, "auto")) {
		int e = lmt_dtype_parse(env);
		if (e != LMT_DTYPE_F32 && e != LMT_DTYPE_BF16 && e != LMT_DTYPE_F16)
			usage_error("LMT_PRECISION: '%s' is not fp32, bf16, fp16 or auto", env);
		o->precision = lmt_dtype_name(e);
	}
	int dt = o->precision ? lmt_dtype_parse(o->precision)
			      : (be->fast_dtypes & (1u << LMT_DTYPE_BF16)) ? LMT_DTYPE_BF16 : LMT_DTYPE_F32;
	if (!(be->dtypes & (1u << dt))) {
		char offers[64] = "";
		for (int d = 0; d < LMT_DTYPE_COUNT; d++)
			if (be->dtypes & (1u << d))
				snprintf(offers + strlen(offers), sizeof offers - strlen(offers), "%s%s", offers[0] ? ", " : "",
					 lmt_dtype_name(d));
		usage_error("option '--precision': the %s backend computes in %s, not %s", be->name, offers,
			    lmt_dtype_name(dt));
	}
	o->tc.precision = dt;
	if (lmt_gpt_set_precision(g, dt, &err) || lmt_gpt_set_recompute(g, o->tc.recompute_every, &err))
		die_err(&err);
	info("precision %s (GEMMs: %s)%s", lmt_dtype_name(dt), be->gemm_impl(be, dt),
	     o->tc.recompute_every ? ", recomputing blocks in backward" : "");
}

/* The checkpoint to resume from, if there is one (1), and the configuration its
 * run recorded adopted (adopt_recorded). */
static int open_checkpoint(struct opts *o, struct lmt_ckpt *ck)
{
	struct lmt_err err = { 0 };
	uint64_t update;
	int found = lmt_run_resume_open(&run, o->resume_from, o->resume_auto, ck, &err);
	if (found < 0)
		die_err(&err);
	if (found) {
		if (lmt_run_state_u64(ck, "update", &update, &err))
			die_err(&err);
		adopt_recorded(o, ck, update);
	}
	return found;
}

/* The checkpoint checked against this run's data and model. */
static void check_checkpoint(const struct opts *o, const struct lmt_dataset *d, const struct lmt_gpt *g,
			     const struct lmt_comm *comm, struct lmt_ckpt *ck, uint64_t *cursor)
{
	struct lmt_err err = { 0 };
	uint64_t update;
	if (lmt_run_check_compat(ck, o->data, d, &g->cfg, o->tc.seed, o->tc.shuffle_window, &err) ||
	    lmt_run_resume_cursor(ck, comm->rank, comm->world, cursor, &err) ||
	    lmt_run_state_u64(ck, "update", &update, &err))
		die_err(&err);
	if (update > o->tc.updates)
		die("'%s' is at update %llu, past --updates %llu", ck->dir, (unsigned long long)update,
		    (unsigned long long)o->tc.updates);
}

/* config.json, the parameters record and params.json. */
static void report_setup(const struct opts *o, const struct lmt_dataset *d, const struct lmt_gpt *g,
			 const struct lmt_backend *be, const struct lmt_comm *comm, double peak, double fpt, int resumed)
{
	struct lmt_err err = { 0 };
	const char *peak_source = o->peak > 0 ? "--peak-flops" : "measured gemm";
	if (o->out) {
		struct lmt_run_config rc = { o->data, o->tokenizer, o->init_llmc, o->export_llmc, o->init_seed,
					     o->eval_every, o->eval_seqs, o->sample_every, o->sample_tokens, o->top_k,
					     o->temperature, o->prompt, peak, peak_source, o->ckpt_every, o->keep_every,
					     o->ckpt_minutes, o->keep, o->ckpt_sync };
		if (lmt_run_write_config(&run, &rc, &o->tc, d, g, be, comm, &err))
			die_err(&err);
	}
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_run_param_record(&j, g, fpt, peak, peak_source, be->gemm_impl((struct lmt_backend *)be, g->dtype));
	/* a resumed run's metrics already hold it */
	emit(&j, !resumed);
	if (o->out && lmt_run_write_params(&run, &j, &err))
		die_err(&err);
	lmt_json_release(&j);
}

/* The resume record on stdout and in metrics.jsonl, and its event. */
static void report_resume(const struct lmt_trainer *tr, const char *from, const struct lmt_run_resumed *rs,
			  uint64_t cursor)
{
	struct lmt_err err = { 0 };
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_run_resume_record(&j, tr, from, rs, cursor);
	emit(&j, 1);
	if (lmt_run_resume_event(&run, tr, from, rs, &err))
		die_err(&err);
	lmt_json_release(&j);
}

/* A non-finite update: recorded; under --on-nonfinite stop (rc), the run ends (1). */
static int report_nonfinite(const struct lmt_step_stats *st, int rc, const struct lmt_err *step_err)
{
	struct lmt_err err = { 0 };
	char detail[256];
	if (lmt_run_nonfinite(&run, st, rc ? step_err->msg : NULL, detail, sizeof detail, &err))
		die_err(&err);
	if (rc) {
		fprintf(stderr, "train: %s (--on-nonfinite stop)\n", step_err->msg);
		return 1;
	}
	warn("update %llu skipped: %s", (unsigned long long)st->update, detail);
	return 0;
}

static void report_end(struct lmt_json *j, const struct opts *o, const struct lmt_trainer *tr, uint64_t tokens0,
		       uint64_t updates0, double wall, double wall_offset, int status, int interrupted)
{
	struct lmt_err err = { 0 };
	if (interrupted) {
		char detail[128];
		if (lmt_run_stopped(&run, interrupted > 0 ? interrupted : 0, o->stop_at, tr->update, detail,
				    sizeof detail, &err))
			die_err(&err);
		info("%s", detail);
	}
	lmt_run_summary_record(j, tr, tr->tokens - tokens0, tr->update - updates0, wall, wall_offset,
			       status ? "stopped" : interrupted ? "interrupted" : "done");
	emit(j, 1);
	if (!interrupted)
		event(status ? "failed" : "end", NULL, tr->update);
	run_finished = 1;
	if (tr->update == updates0)
		info("nothing to do: the run was already at update %llu (--updates %llu)", (unsigned long long)tr->update,
		     (unsigned long long)o->tc.updates);
	else
		info("%llu updates, %llu tokens in %.1f s (%.0f tokens/s)", (unsigned long long)(tr->update - updates0),
		     (unsigned long long)(tr->tokens - tokens0), wall, (tr->tokens - tokens0) / wall);
}

/* Every rank's times in the update record (a collective); the skew (slowest step
 * over the median, less 1) and the slowest rank for the alerts. */
static void rank_times(struct lmt_json *j, struct lmt_comm *comm, const struct lmt_step_stats *st, double data_wait,
		       double *skew, int *slowest)
{
	struct lmt_err err = { 0 };
	if (lmt_run_rank_times(j, comm, st, data_wait, skew, slowest, &err))
		die_err(&err);
}

/* An alert's episode began or ended: a record on stdout and in the metrics, an
 * event, and a line on stderr. */
static struct lmt_json *alert_json;
static void on_alert(void *ctx, int kind, int fired, uint64_t update, double value, double threshold,
		     const char *evidence)
{
	struct lmt_json *j = alert_json;
	char detail[300];
	(void)ctx;
	if (follower)
		return;
	snprintf(detail, sizeof detail, "%s: %s", lmt_alert_name(kind), evidence);
	event(fired ? "alert" : "alert-cleared", detail, update);
	lmt_json_begin(j);
	lmt_json_str(j, "event", fired ? "alert" : "alert-cleared");
	lmt_json_u64(j, "update", update);
	lmt_json_str(j, "kind", lmt_alert_name(kind));
	lmt_json_num(j, "value", value);
	lmt_json_num(j, "threshold", threshold);
	lmt_json_str(j, "evidence", evidence);
	emit(j, 1);
	if (fired)
		warn("update %llu: alert %s", (unsigned long long)update, detail);
	else
		info("update %llu: alert %s cleared", (unsigned long long)update, lmt_alert_name(kind));
}

static void audit_samples(struct lmt_json *j, struct lmt_comm *comm, const struct lmt_trainer *tr, uint64_t update)
{
	struct lmt_err err = { 0 };
	if (lmt_run_audit_record(j, comm, tr, update, &err))
		die_err(&err);
	emit(j, 1);
}

/* With world > 1 the save's state needs every rank's loader cursor: gathered from
 * every rank (a collective: each rank calls this at the same update). */
static void gather_cursors(struct lmt_run_saver *sv, const struct lmt_trainer *tr, uint64_t *cursors)
{
	struct lmt_err err = { 0 };
	if (!cursors)
		return;
	uint64_t mine = lmt_loader_cursor(&tr->loader);
	if (the_comm.allgather(&the_comm, &mine, cursors, sizeof mine, &err))
		die_err(&err);
	sv->cursors = cursors;
}

/* The checkpoint rank 0 resumes from, opened by every other rank too (rank 0 has
 * chosen it and cleaned up after interrupted saves before the others look). */
static int share_checkpoint(struct opts *o, struct lmt_comm *comm, const char *chosen, struct lmt_ckpt *ck, int have)
{
	struct lmt_err err = { 0 };
	char path[PATH_MAX] = "";
	if (!follower && chosen)
		snprintf(path, sizeof path, "%s", chosen);
	if (comm->broadcast(comm, path, sizeof path, 0, &err))
		die_err(&err);
	if (!follower)
		return have;
	if (!path[0])
		return 0;
	uint64_t update;
	if (lmt_ckpt_open(ck, path, 1, &err) || lmt_run_state_u64(ck, "update", &update, &err))
		die_err(&err);
	adopt_recorded(o, ck, update);
	return 1;
}

/* Every rank must train the same run: a hash of what determines it (the dataset,
 * the model, the optimisation, the seed, the precision), compared with rank 0's. */
static void check_ranks_agree(const struct opts *o, const struct lmt_dataset *d, struct lmt_comm *comm)
{
	struct lmt_err err = { 0 };
	char text[1024], hex[LMT_SHA256_HEX];
	const struct lmt_train_cfg *t = &o->tc;
	snprintf(text, sizeof text,
		 "data %s; model L%d H%d C%d T%d V%u untied %d init %s/%llu; B %d accum %d updates %llu lr %.17g "
		 "min %.17g warmup %llu schedule %d betas %.17g %.17g eps %.17g wd %.17g decay-emb %d clip %.17g "
		 "seed %llu window %llu mask %d doc %d precision %s zero %d",
		 lmt_sha256_hex(d->manifest_sha256, hex), o->model.L, o->model.NH, o->model.C, o->context,
		 d->vocab_size, o->model.untied, o->init_llmc ? o->init_llmc : "gpt2", (unsigned long long)o->init_seed,
		 t->B, t->accum, (unsigned long long)t->updates, t->lr, t->min_lr_frac, (unsigned long long)t->warmup,
		 t->schedule, t->beta1, t->beta2, t->eps, t->weight_decay, t->decay_embeddings, t->clip,
		 (unsigned long long)t->seed, (unsigned long long)t->shuffle_window, t->seg_mask, t->cross_doc_targets,
		 o->precision ? o->precision : "auto", t->zero);
	if (lmt_run_ranks_agree(comm, text, &err))
		die("%s (%s)", err.msg, follower ? text : "see that rank's options");
}

int main(int argc, char **argv)
{
	struct opts o;
	tool_init("train");
	tool_passive_threads(argv);
	parse_args(&o, argc, argv);
	if (!o.resume)
		finish_args(&o);
	check_paths(&o);

	struct lmt_err err = { 0 };
	/* the ranks first: under a launcher every rank runs this, rank 0 owns the run */
	struct lmt_comm *comm = &the_comm;
	if (lmt_comm_open(comm, NULL, &err))
		die_err(&err);
	follower = comm->rank > 0;
	comm->timeout_s = o.comm_timeout;
	if (comm->world > 1) {
		if (!o.out && !o.no_save)
			usage_error("%d ranks train one run: name it with -o RUN (or --no-save)", comm->world);
		if (o.ckpt_minutes > 0)
			usage_error("--ckpt-minutes with %d ranks: give --ckpt-every (every rank must save at the same update)",
				    comm->world);
		if (follower)
			tool_quiet = 1;
	}
	lmt_run_lock_init(&run_lock);
	/* one process owns a run: taken before anything of it is read (the checkpoint
	 * to resume, the metrics to rewind) or made */
	if (o.out && !follower && lmt_run_lock(o.out, 1, &run_lock, &err))
		die_err(&err);
	lmt_run_init(&run, notice, NULL);
	struct lmt_ckpt ck;
	int have_ck = 0;
	const char *run_out = o.out; /* the run's directory, whichever rank this is */
	if (o.resume) {
		/* the run's recorded configuration is the resume's: read before the rest */
		if (!follower) {
			if (lmt_run_open(&run, o.out, 1, &err))
				die_err(&err);
			have_ck = open_checkpoint(&o, &ck);
		}
		if (comm->world > 1)
			have_ck = share_checkpoint(&o, comm, have_ck ? ck.dir : NULL, &ck, have_ck);
		finish_args(&o);
		check_paths(&o);
	}
	if (follower)
		o.out = NULL; /* nothing of the run is written here */
	/* under a launcher stdout may be a pty of its own (Open MPI): JSONL there */
	human = !o.jsonl && isatty(STDOUT_FILENO) && comm->world == 1;
	human_updates = o.tc.updates;
	struct lmt_dataset d;
	struct lmt_tokenizer tok;
	int have_tok = open_data(&o, &d, &tok);
	int T = (int)d.seq_len;
	struct lmt_backend be;
	if (lmt_backend_open(&be, o.backend, tool_threads(o.threads), &err))
		die_err(&err);
	struct lmt_gpt g;
	open_model(&o, &d, &be, &g);
	if (!o.out && !o.no_save && !follower) {
		default_run(&o, &g);
		check_paths(&o);
		run_out = o.out;
	}
	if (o.out && !o.resume && lmt_run_open(&run, o.out, 0, &err))
		die_err(&err);
	if (o.out)
		atexit(run_atexit);
	uint64_t cursor = (uint64_t)comm->rank;
	if (have_ck)
		check_checkpoint(&o, &d, &g, comm, &ck, &cursor);
	if (comm->world > 1)
		check_ranks_agree(&o, &d, comm);
	/* a resumed run's weights come from the checkpoint */
	if (!o.init_llmc && !have_ck && lmt_gpt_init_weights(&g, o.init_seed, &err))
		die_err(&err);
	set_precision(&o, &be, &g);
	if (lmt_gpt_alloc_acts(&g, o.tc.B, T, &err))
		die_err(&err);
	if (lmt_trainer_init(&the_trainer, &o.tc, &be, comm, &g, &d, cursor, &err))
		die_err(&err);
	/* registered last, so it runs first at exit: stop the read-ahead thread before
	 * the libraries it uses are torn down */
	atexit(stop_trainer);
	struct lmt_trainer *tr = &the_trainer;
	struct lmt_run_resumed rs = { 0 };
	if (have_ck) {
		double t0 = lmt_now();
		if ((tr->shard && lmt_gpt_alloc_optimizer(&g, &err)) || lmt_run_resume(&run, &ck, tr, &rs, &err) ||
		    lmt_trainer_take_moments(tr, &err))
			die_err(&err);
		info("resumed from '%s' at update %llu (%.2f s to load; %llu updates to redo)", ck.dir,
		     (unsigned long long)tr->update, lmt_now() - t0, (unsigned long long)rs.replayed);
	} else if (o.resume && run.metrics) {
		if (lmt_run_restart(&run, &rs.replayed, &err))
			die_err(&err);
		if (rs.replayed)
			warn("'%s' has no valid checkpoint: starting again from update 0 (%llu updates to redo)", o.out,
			     (unsigned long long)rs.replayed);
	}

	double peak = o.peak > 0 ? o.peak : lmt_backend_peak_flops(&be, g.dtype, 1);
	/* the measured peak (memory.peak_alloc) is the training's: from here, after the
	 * setup's transients (padding, the peak probe's matrices) are freed */
	be.mem_peak = be.mem_now;
	double fpt = lmt_gpt_flops_per_token(&g.cfg, T);
	report_setup(&o, &d, &g, &be, comm, peak, fpt, have_ck);
	if (have_ck) {
		report_resume(tr, ck.dir, &rs, cursor);
		lmt_ckpt_close(&ck);
	} else {
		event(o.resume ? "restart" : "start", NULL, 0);
	}
	struct lmt_gpt_counts pc;
	lmt_gpt_count(&g, &pc);
	info("%s: %zu parameters (%d layers, %d heads, %d channels, vocabulary %d), %d x %d x %d tokens per update",
	     be.name, pc.total, g.cfg.L, g.cfg.NH, g.cfg.C, g.cfg.V, o.tc.accum, o.tc.B, T);

	double t_start = lmt_now();
	struct lmt_run_sampling smp;
	if (lmt_run_sampling_init(&smp, o.prompt, have_tok ? &tok : NULL, d.eos_id, &err))
		die_err(&err);
	smp.tokens = o.sample_tokens;
	smp.top_k = o.top_k;
	smp.temperature = o.temperature;
	smp.seed = o.tc.seed;
	int status = 0, interrupted = 0;
	double wait_before = 0;
	struct lmt_run_saver sv;
	start_saver(&sv, &o, tr, rs.wall_offset, t_start, have_ck);
	sv.run_dir = run_out;
	uint64_t *cursors = comm->world > 1 ? calloc((size_t)comm->world, sizeof *cursors) : NULL;
	if (comm->world > 1 && !cursors)
		die("out of memory");
	double last_due = t_start;
	struct lmt_json j, aj;
	lmt_json_init(&j);
	lmt_json_init(&aj);
	alert_json = &aj;
	struct lmt_alerts alerts;
	lmt_alerts_init(&alerts, &o.alert);
	uint64_t stats_at = tr->update, stats_clipped = tr->clipped_updates;
	tool_defer_signals(); /* SIGINT, SIGTERM: finish the update, save, exit 0 */
	const uint64_t tokens0 = tr->tokens, updates0 = tr->update; /* this process's share starts here */
	while (tr->update < o.tc.updates) {
		struct lmt_step_stats st;
		int rc = lmt_trainer_step(tr, &st, &err);
		if (rc && !st.nonfinite_what)
			die_err(&err);
		double wall = rs.wall_offset + (lmt_now() - t_start);
		lmt_run_update_record(&j, tr, &st, tr->loader.wait_seconds - wait_before, wall, fpt, peak, o.log_samples);
		struct lmt_alert_obs ao = { st.update, st.loss, st.grad_norm, st.clipped, st.overflow,
					    st.nonfinite_what != NULL, tr->loader.wait_seconds - wait_before, st.t_total,
					    0, 0 };
		if (comm->world > 1)
			rank_times(&j, comm, &st, ao.data_wait, &ao.skew, &ao.slowest);
		wait_before = tr->loader.wait_seconds;
		emit(&j, 1);
		if (st.have_stats) {
			lmt_run_stats_record(&j, tr, st.update, st.update - stats_at, tr->clipped_updates - stats_clipped);
			emit(&j, 1);
			stats_at = st.update;
			stats_clipped = tr->clipped_updates;
		}
		lmt_alerts_update(&alerts, &ao, on_alert, NULL);
		if (comm->world > 1 && st.update <= o.audit)
			audit_samples(&j, comm, tr, st.update);
		if (st.nonfinite_what && (status = report_nonfinite(&st, rc, &err)))
			break;
		if (!tool_quiet && !human && isatty(STDERR_FILENO))
			fprintf(stderr, "\rtrain: update %llu/%llu loss %.4f lr %.2e %.0f tok/s mfu %.1f%%   ",
				(unsigned long long)st.update, (unsigned long long)o.tc.updates, st.loss, st.lr,
				st.valid_tokens / st.t_total, 100 * fpt * (double)st.positions / st.t_total / peak);
		int last = st.update == o.tc.updates;
		int eval_due = o.eval_every && d.split_seqs[LMT_SPLIT_VAL] && (st.update % o.eval_every == 0 || last);
		int sample_due = o.sample_every && (st.update % o.sample_every == 0 || last);
		/* ZeRO-3: every parameter on every rank for these (collective, so on followers too) */
		if ((eval_due || sample_due) && lmt_trainer_unshard(tr, &err))
			die_err(&err);
		if (eval_due) {
			double vl;
			if (lmt_run_eval_record(&j, tr, o.eval_seqs, st.update, &vl, &err))
				die_err(&err);
			emit(&j, 1);
			lmt_alerts_eval(&alerts, st.update, vl, on_alert, NULL);
		}
		if (sample_due && !follower) {
			if (lmt_run_sample_record(&j, &g, &smp, st.update, &err))
				die_err(&err);
			emit(&j, 1);
		}
		lmt_trainer_reshard(tr);
		/* a signal to any rank stops every rank after this update */
		int stop = tool_interrupted;
		if (comm->world > 1 && comm->allreduce(comm, &stop, 1, LMT_DTYPE_I32, LMT_COMM_OP_MAX, &err))
			die_err(&err);
		if (stop && !tool_interrupted)
			tool_interrupted = stop;
		if (run_out) {
			if (o.out && lmt_run_save_poll(&sv, 0, &err))
				die_err(&err);
			int due = (o.ckpt_every && st.update % o.ckpt_every == 0) ||
				  (o.ckpt_minutes > 0 && lmt_now() - last_due >= o.ckpt_minutes * 60);
			if (due && !last && !tool_interrupted && tr->update != o.stop_at) {
				last_due = lmt_now();
				gather_cursors(&sv, tr, cursors);
				if (lmt_trainer_gather_moments(tr, &err) || lmt_run_save(&sv, o.ckpt_sync, &err))
					die_err(&err);
				lmt_trainer_drop_moments(tr);
			}
		}
		if (tool_interrupted) {
			interrupted = tool_interrupted;
			break;
		}
		if (o.stop_at && tr->update == o.stop_at && !last) {
			interrupted = -1;
			break;
		}
	}
	if (!tool_quiet && !human && isatty(STDERR_FILENO))
		fputc('\n', stderr);
	/* the final checkpoint, written before exit 0 (a failed run's state is not saved) */
	if (run_out && !status) {
		gather_cursors(&sv, tr, cursors);
		if (lmt_trainer_gather_moments(tr, &err))
			die_err(&err);
	}
	if (run_out && (status ? lmt_run_save_poll(&sv, 1, &err) : lmt_run_save(&sv, 1, &err)))
		die_err(&err);
	lmt_trainer_drop_moments(tr);
	lmt_run_saver_release(&sv);
	free(cursors);
	if (!status && !interrupted && o.export_llmc &&
	    (lmt_trainer_unshard(tr, &err) || (!follower && lmt_gpt_save_llmc(&g, o.export_llmc, &err))))
		die_err(&err);
	report_end(&j, &o, tr, tokens0, updates0, lmt_now() - t_start, rs.wall_offset, status, interrupted);
	lmt_run_close(&run);
	lmt_run_unlock(&run_lock);
	lmt_run_sampling_release(&smp);
	lmt_json_release(&j);
	lmt_json_release(&aj);
	lmt_trainer_release(tr);
	lmt_gpt_release(&g);
	if (have_tok)
		lmt_tok_release(&tok);
	be.release(&be);
	lmt_dataset_close(&d);
	comm->release(comm);
	return status;
}
