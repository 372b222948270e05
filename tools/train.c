/*
 * train: GPT-2 training on a shard-pack dataset, one JSONL record per update.
 *
 *	train --data data/ --out run/ --layers 4 --heads 4 --channels 256 \
 *	      --micro-batch 8 --accum 4 --updates 2000 --lr 1e-3 | jq -c '{update, loss}'
 *
 * The session (model/session.c) opens the data, the model, the backend, the
 * communicator and the run directory, resumes, trains, evaluates, samples and
 * saves; the run's files and records are runstate.c's; --config files are read
 * by core/config.c (train/config.c applies them). This file parses options,
 * passes them to the session, and prints what it reports (train/display.c: the
 * lines for people). stdout: JSONL (updates, evaluations, samples, summary),
 * or on a terminal a line per record for people; stderr: human progress.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "ckpt/runstate.h"
#include "core/config.h"
#include "model/session.h"
#include "report/alerts.h"
#include "tool.h"
#include "train/train.h"

/* long-only options (getopt_long returns these) */
enum {
	OPT_DATA = OPT_TOOL_BASE, OPT_CONFIG, OPT_MICRO_BATCH, OPT_ACCUM, OPT_UPDATES, OPT_LR, OPT_MIN_LR, OPT_WARMUP, OPT_SCHEDULE, OPT_BETA1,
	OPT_BETA2, OPT_EPS, OPT_WD, OPT_DECAY_EMB, OPT_CLIP, OPT_NONFINITE, OPT_SEED, OPT_INIT_SEED, OPT_SEG_MASK,
	OPT_DOC_TARGETS, OPT_EVAL_EVERY, OPT_EVAL_SEQS, OPT_SAMPLE_EVERY, OPT_SAMPLE_TOKENS, OPT_TEMPERATURE,
	OPT_TOP_K, OPT_PROMPT, OPT_PEAK, OPT_INIT_LLMC, OPT_EXPORT_LLMC, OPT_BACKEND, OPT_COMM, OPT_WINDOW, OPT_RESUME,
	OPT_CKPT_EVERY, OPT_CKPT_MINUTES, OPT_KEEP, OPT_KEEP_EVERY, OPT_CKPT_SYNC, OPT_MTBF, OPT_LOG_SAMPLES,
	OPT_STOP_AT, OPT_JSONL, OPT_NO_SAVE, OPT_PRECISION, OPT_RECOMPUTE, OPT_LOSS_SCALE, OPT_LOSS_SCALE_WINDOW, OPT_BUCKET_MB, OPT_COMM_TIMEOUT, OPT_SKEW_ALERT, OPT_ALERT, OPT_STATS_EVERY, OPT_MEM_LIMIT, OPT_BUDGET,
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
	{ "layers", required_argument, NULL, OPT_MODEL_LAYERS },
	{ "heads", required_argument, NULL, OPT_MODEL_HEADS },
	{ "channels", required_argument, NULL, OPT_MODEL_CHANNELS },
	{ "context", required_argument, NULL, OPT_MODEL_CONTEXT },
	{ "untie", no_argument, NULL, OPT_MODEL_UNTIE },
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
	{ "comm", required_argument, NULL, OPT_COMM },
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
	{ "mem-limit", required_argument, NULL, OPT_MEM_LIMIT },
	{ "budget", required_argument, NULL, OPT_BUDGET },
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
	       "  --backend NAME          the compute backend: cpu, or cuda where built (cpu)\n"
	       "  --comm NAME             several ranks: self, mpi (host buffers) or nccl (device\n"
	       "                          buffers) where built (auto: mpi for cpu, nccl for cuda)\n"
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
	       "                          (0.25), skew (0.2), val_regression (0.02), comm (3x the\n"
	       "                          first updates'), memory (0.9 of --mem-limit), memory_ledger\n"
	       "                          (1.2x the ledger's), ckpt_slow (0.5), ckpt_age (1.5x the\n"
	       "                          interval), ckpt_verify (1: on), budget (0.2); window=N (50)\n"
	       "  --mem-limit BYTES       the memory alert's boundary (k, M, G, T; Ki, Mi, Gi, Ti)\n"
	       "  --budget FILE           memledger --budget's JSONL: the budget alert's tokens and\n"
	       "                          device-hours\n"
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

const struct option *const train_longopts = longopts;

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

/* --alert NAME=X: a threshold of alerts.h (0: that kind off), or window=N */
static void set_alert(struct lmt_alert_cfg *a, const char *arg)
{
	const char *eq = strchr(arg, '=');
	double *thr = eq ? lmt_alert_threshold(a, lmt_alert_kind(arg, (size_t)(eq - arg))) : NULL;
	if (eq && eq - arg == 6 && !strncmp(arg, "window", 6)) {
		a->window = (int)opt_int("alert window", eq + 1, 2, LMT_ALERT_WINDOW_MAX);
		return;
	}
	if (thr) {
		*thr = opt_double("alert", eq + 1, 0, 1e9);
		return;
	}
	char list[400] = "window";
	for (int i = 0; i < LMT_ALERT_COUNT; i++)
		if (lmt_alert_threshold(a, i))
			snprintf(list + strlen(list), sizeof list - strlen(list), ", %s", lmt_alert_name(i));
	usage_error("option '--alert': '%s': expected NAME=X with NAME one of %s", arg, list);
}

void train_set_option(struct opts *o, int c, const char *arg)
{
	if (!o->adopting)
		train_mark_given(o, c, arg);
	if (model_opt(c, arg, &o->cfg.model, &o->cfg.context)) {
		o->shape_given |= c != OPT_MODEL_UNTIE;
		return;
	}
	switch (c) {
	case OPT_DATA: o->cfg.data = arg; break;
	case 'o': o->cfg.out = arg; break;
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
			train_config_json(o, arg);
		else if (lmt_config_read(arg, train_config_entry, o, &err))
			die_err(&err);
		break;
	}
	case 't': o->cfg.tokenizer = arg; break;
	case OPT_MICRO_BATCH: o->cfg.tc.B = (int)opt_int("micro-batch", arg, 1, 1 << 20); break;
	case OPT_ACCUM: o->cfg.tc.accum = (int)opt_int("accum", arg, 1, 1 << 20); break;
	case OPT_UPDATES: o->cfg.tc.updates = (uint64_t)opt_int("updates", arg, 1, INT64_MAX); break;
	case OPT_LR: o->cfg.tc.lr = opt_double("lr", arg, 0, 10); break;
	case OPT_MIN_LR: o->cfg.tc.min_lr_frac = opt_double("min-lr", arg, 0, 1); break;
	case OPT_WARMUP:
		o->cfg.tc.warmup = (uint64_t)opt_int("warmup", arg, 0, INT64_MAX);
		o->warmup_given = 1;
		break;
	case OPT_SCHEDULE: /* in enum lmt_schedule's order */
		o->cfg.tc.schedule = choice("schedule", arg, (const char *const[]){ "cosine", "linear", "constant", NULL });
		break;
	case OPT_BETA1: o->cfg.tc.beta1 = opt_double("beta1", arg, 0, 0.999999); break;
	case OPT_BETA2: o->cfg.tc.beta2 = opt_double("beta2", arg, 0, 0.999999999); break;
	/* above 0, as AdamW needs: where a gradient has always been 0, m and v are 0,
	 * and with eps 0 the step m / (sqrt(v) + eps) is 0/0 (PyTorch's too) */
	case OPT_EPS: o->cfg.tc.eps = opt_double_above("eps", arg, 0, 1); break;
	case OPT_WD: o->cfg.tc.weight_decay = opt_double("weight-decay", arg, 0, 10); break;
	case OPT_DECAY_EMB: o->cfg.tc.decay_embeddings = 1; break;
	case OPT_CLIP: o->cfg.tc.clip = opt_double("clip", arg, 0, 1e30); break;
	case OPT_NONFINITE: /* in enum lmt_nonfinite's order */
		o->cfg.tc.on_nonfinite = choice("on-nonfinite", arg, (const char *const[]){ "stop", "skip", NULL });
		break;
	case OPT_SEED: o->cfg.tc.seed = (uint64_t)opt_int("seed", arg, 0, INT64_MAX); break;
	case OPT_INIT_SEED:
		o->cfg.init_seed = (uint64_t)opt_int("init-seed", arg, 0, INT64_MAX);
		o->init_seed_given = 1;
		break;
	case OPT_SEG_MASK: o->cfg.tc.seg_mask = 1; break;
	case OPT_DOC_TARGETS:
		o->cfg.tc.cross_doc_targets = !choice("doc-targets", arg, (const char *const[]){ "keep", "drop", NULL });
		break;
	case OPT_WINDOW: o->cfg.tc.shuffle_window = (uint64_t)opt_int("shuffle-window", arg, 1, INT64_MAX); break;
	case OPT_EVAL_EVERY: o->cfg.eval_every = (uint64_t)opt_int("eval-every", arg, 0, INT64_MAX); break;
	case OPT_EVAL_SEQS: o->cfg.eval_seqs = (uint64_t)opt_int("eval-seqs", arg, 1, INT64_MAX); break;
	case OPT_SAMPLE_EVERY: o->cfg.sample_every = (uint64_t)opt_int("sample-every", arg, 0, INT64_MAX); break;
	case OPT_SAMPLE_TOKENS: o->cfg.sample_tokens = (int)opt_int("sample-tokens", arg, 1, 1 << 20); break;
	case OPT_TEMPERATURE: o->cfg.temperature = opt_double("temperature", arg, 0, 100); break;
	case OPT_TOP_K: o->cfg.top_k = (int)opt_int("top-k", arg, 0, 1 << 30); break;
	case OPT_PROMPT: o->cfg.prompt = arg; break;
	case OPT_PEAK: o->cfg.peak = opt_double("peak-flops", arg, 1, 1e20); break;
	case OPT_INIT_LLMC: o->cfg.init_llmc = arg; break;
	case OPT_EXPORT_LLMC: o->cfg.export_llmc = arg; break;
	case OPT_BACKEND: {
		/* a name the registry knows (backend/registry.c) */
		const char *names = lmt_backend_names(), *p = strstr(names, arg);
		size_t n = strlen(arg);
		if (!n || !p || (p != names && p[-1] != ' ') || (p[n] && p[n] != ' '))
			usage_error("option '--backend': '%s' is not available in this build (%s)", arg, names);
		o->cfg.backend = arg;
		break;
	}
	case OPT_COMM: {
		/* a name the registry knows: "self, mpi, nccl" (comm/registry.c) */
		const char *names = lmt_comm_names(), *p = strstr(names, arg);
		size_t n = strlen(arg);
		if (!strcmp(arg, "auto"))
			break;
		if (!n || !p || (p != names && p[-1] != ' ') || (p[n] && p[n] != ','))
			usage_error("option '--comm': '%s' is not available in this build (%s)", arg, names);
		o->cfg.comm = arg;
		break;
	}
	case OPT_RESUME: o->cfg.resume = arg; break;
	case OPT_CKPT_EVERY: o->cfg.ckpt_every = (uint64_t)opt_int("ckpt-every", arg, 0, INT64_MAX); break;
	case OPT_CKPT_MINUTES: o->cfg.ckpt_minutes = opt_double("ckpt-minutes", arg, 0, 1e9); break;
	case OPT_KEEP: o->cfg.keep = (int)opt_int("keep", arg, 2, 1 << 20); o->keep_given = !o->adopting && !o->from_run_config; break;
	case OPT_KEEP_EVERY: o->cfg.keep_every = (uint64_t)opt_int("keep-every", arg, 0, INT64_MAX); break;
	case OPT_CKPT_SYNC: o->cfg.ckpt_sync = 1; break;
	case OPT_MTBF: o->cfg.mtbf = opt_double("mtbf", arg, 1, 1e12); break;
	case OPT_LOG_SAMPLES: o->cfg.log_samples = 1; break;
	case OPT_STOP_AT: o->cfg.stop_at = (uint64_t)opt_int("stop-at", arg, 1, INT64_MAX); break;
	case 'j': o->threads = (int)opt_int("threads", arg, 1, 4096); break;
	case 'q': tool_quiet = 1; break;
	case OPT_JSONL: o->jsonl = 1; break;
	case OPT_PRECISION:
		if (strcmp(arg, "auto") && lmt_dtype_parse(arg) != LMT_DTYPE_F32 && lmt_dtype_parse(arg) != LMT_DTYPE_BF16 &&
		    lmt_dtype_parse(arg) != LMT_DTYPE_F16)
			usage_error("option '--precision': '%s' is not fp32, bf16, fp16 or auto", arg);
		o->cfg.precision = strcmp(arg, "auto") ? lmt_dtype_name(lmt_dtype_parse(arg)) : NULL;
		break;
	case OPT_COMM_TIMEOUT: o->cfg.comm_timeout = opt_double("comm-timeout", arg, 0, 1e9); break;
	case OPT_SKEW_ALERT: o->cfg.alert.skew = opt_double("skew-alert", arg, 0, 1e9) / 100; break;
	case OPT_ALERT: set_alert(&o->cfg.alert, arg); break;
	case OPT_MEM_LIMIT: o->cfg.mem_limit = (double)opt_size("mem-limit", arg); break;
	case OPT_BUDGET: o->cfg.budget = arg; break;
	case OPT_STATS_EVERY: o->cfg.tc.stats_every = (uint64_t)opt_int("stats-every", arg, 0, INT64_MAX); break;
	case OPT_ZERO:
		o->cfg.tc.zero = (int)opt_int("zero", arg, 0, 3);
		break;
	case OPT_PREFETCH: o->cfg.tc.prefetch = 1; break;
	case OPT_AUDIT_SAMPLES: o->cfg.audit = (uint64_t)opt_int("audit-samples", arg, 0, INT64_MAX); break;
	case OPT_BUCKET_MB: o->cfg.tc.bucket_bytes = (size_t)(opt_double("bucket-mb", arg, 0, 1 << 20) * (1 << 20)); break;
	case OPT_LOSS_SCALE: o->cfg.tc.loss_scale = opt_double("loss-scale", arg, 1.0 / 65536, 1e30); break;
	case OPT_LOSS_SCALE_WINDOW:
		o->cfg.tc.loss_scale_window = (uint64_t)opt_int("loss-scale-window", arg, 1, INT64_MAX);
		break;
	case OPT_RECOMPUTE: o->cfg.tc.recompute_every = opt_recompute(arg); break;
	case OPT_NO_SAVE: o->cfg.no_save = 1; break;
	}
}

/* ---- printing what the session reports ---- */

static struct lmt_session session;

/* stdout on a terminal: a line for people per record (JSONL still goes to the run) */
static int human;
static uint64_t human_updates; /* --updates, for the ETA */

/* A record: JSONL on stdout, or its line for people. */
static void on_record(void *ctx, const struct lmt_json *j)
{
	(void)ctx;
	if (human)
		train_show(j, human_updates);
	else if (j->out.oom || fwrite(j->out.buf, 1, j->out.len, stdout) != j->out.len || fflush(stdout))
		die_write("<stdout>");
}

static void on_notice(void *ctx, int level, const char *msg)
{
	(void)ctx;
	if (level == LMT_SESSION_WARN)
		warn("%s", msg);
	else if (level == LMT_SESSION_ERROR)
		fprintf(stderr, "%s: %s\n", tool_name, msg);
	else if (level == LMT_SESSION_INFO || !human) /* on a terminal a record's line is on stdout already */
		info("%s", msg);
}

/* The update's progress line on stderr, where it is a terminal. */
static void on_step(void *ctx, const struct lmt_step_stats *st)
{
	(void)ctx;
	if (!tool_quiet && !human && isatty(STDERR_FILENO))
		fprintf(stderr, "\rtrain: update %llu/%llu loss %.4f lr %.2e %.0f tok/s mfu %.1f%%   ",
			(unsigned long long)st->update, (unsigned long long)human_updates, st->loss, st->lr,
			st->valid_tokens / st->t_total, 100 * session.fpt * (double)st->positions / st->t_total / session.peak);
}

/* A failed phase of the session: a usage error (exit 2) or a runtime one (1). */
static void session_die(const struct lmt_err *err)
{
	const char *msg = session.msg ? session.msg : err->msg[0] ? err->msg : lmt_strerror(err->code);
	if (session.usage)
		usage_error("%s", msg);
	die("%s", msg);
}

/* registered once the trainer runs, so it runs first at exit: stop the read-ahead
 * thread before the libraries it uses are torn down */
static void stop_trainer(void)
{
	lmt_session_halt(&session);
}

/* On any exit before the end (die() included), the events file says the run failed,
 * at the update it had reached. This runs inside exit(), so a failure only warns:
 * dying here would call exit() again. */
static void run_atexit(void)
{
	struct lmt_err err = { 0 };
	if (lmt_session_mark_failed(&session, &err))
		warn("%s", err.msg);
}

static void parse_args(struct opts *o, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->cfg.model = (struct lmt_gpt_config){ 0, 0, 0, 4, 4, 256, 0 };
	o->cfg.tc = (struct lmt_train_cfg){ 8, 1, 0, 1, 1000, 6e-4, 0.1, 0, LMT_SCHED_COSINE, 0.9, 0.95, 1e-8, 0.1, 0,
					1.0, LMT_NONFINITE_STOP, 1, 8192, LMT_DTYPE_F32, 0, 65536, 2000, 25 << 20, 0, 0, 25 };
	o->cfg.eval_every = 100;
	o->cfg.comm_timeout = 300;
	lmt_alert_cfg_default(&o->cfg.alert);
	o->cfg.keep = 3;
	o->cfg.eval_seqs = 64;
	o->cfg.sample_tokens = 32;
	o->cfg.temperature = 1.0;
	o->cfg.top_k = 40;
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
		train_set_option(o, c, optarg);
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (o->cfg.no_save && o->cfg.out)
		usage_error("--no-save writes no run directory, but -o names one");
	if (o->cfg.no_save && o->cfg.resume)
		usage_error("--resume continues a run directory; --no-save has none");
	/* --resume RUN, --resume RUN/ckpt/step-N, or --resume auto (with -o RUN) */
	if (o->cfg.resume && !strcmp(o->cfg.resume, "auto")) {
		if (!o->cfg.out)
			usage_error("--resume auto continues the run in -o RUN: give -o (-o runs/latest: the newest run train "
				    "named itself)");
		o->cfg.resume_auto = 1;
	} else if (o->cfg.resume) {
		struct lmt_err err = { 0 };
		char *rundir;
		int named, rc = lmt_run_resolve(o->cfg.resume, o->cfg.out, &rundir, &named, &err);
		if (rc == LMT_EINVAL)
			usage_error("%s", err.msg);
		if (rc)
			die_err(&err);
		o->cfg.resume_from = named ? o->cfg.resume : NULL;
		o->cfg.out = rundir;
	}
}

/* The defaults that follow from other options, and the checks across options:
 * after a resume has adopted the run's configuration. */
static void finish_args(struct opts *o)
{
	if (!o->cfg.data)
		usage_error("no dataset: give --data DIR (shard-pack's output)");
	if (!o->init_seed_given)
		o->cfg.init_seed = o->cfg.tc.seed;
	if (!o->warmup_given)
		o->cfg.tc.warmup = o->cfg.tc.updates / 20;
	/* a resume's fewer --updates than the warm-up it adopted just ends in the warm-up */
	if (o->cfg.tc.warmup > o->cfg.tc.updates && (!o->cfg.resume || train_given_value(o, "warmup")))
		usage_error("--warmup %llu is more than --updates %llu", (unsigned long long)o->cfg.tc.warmup,
			    (unsigned long long)o->cfg.tc.updates);
	if (o->cfg.init_llmc && (o->cfg.model.untied || o->shape_given))
		usage_error("--init-llmc sets the model's shape; --layers, --heads, --channels, --context and --untie do "
			    "not apply");
	if (o->cfg.export_llmc && o->cfg.model.untied)
		usage_error("--export-llmc writes llm.c's format, which has no untied head (--untie)");
	if (o->cfg.prompt && !o->cfg.tokenizer)
		usage_error("--prompt is text: give the tokenizer with -t");
	if (o->cfg.tc.prefetch && o->cfg.tc.zero != 3)
		usage_error("--prefetch gathers ZeRO-3's parameters ahead: it goes with --zero 3 (it did nothing)");
	if (!o->cfg.init_llmc && o->cfg.model.C % o->cfg.model.NH)
		usage_error("--channels %d is not a multiple of --heads %d", o->cfg.model.C, o->cfg.model.NH);
	if ((o->cfg.ckpt_every || o->cfg.ckpt_minutes > 0 || o->keep_given || o->cfg.keep_every || o->cfg.ckpt_sync ||
	     o->cfg.mtbf > 0 || o->cfg.stop_at) && o->cfg.no_save)
		usage_error("checkpoints are written into the run directory, and --no-save has none (--ckpt-every, "
			    "--ckpt-minutes, --keep, --keep-every, --ckpt-sync, --mtbf, --stop-at)");
}

/* The run directory and --export-llmc stay apart from every input, and the
 * export from the run's checkpoints. */
static void check_paths(const struct opts *o)
{
	char ck[PATH_MAX] = "";
	if (o->cfg.out)
		snprintf(ck, sizeof ck, "%s/ckpt", o->cfg.out);
	const char *ins[] = { o->cfg.data, o->cfg.tokenizer, o->cfg.init_llmc, ck[0] ? ck : NULL };
	const char *outs[] = { o->cfg.out, o->cfg.export_llmc }, *what[] = { "-o", "--export-llmc" };
	check_outputs(outs, what, 1, ins, 3);
	check_outputs(outs + 1, what + 1, 1, ins, 4);
	/* the --config files too (a run directory beside them writes only its own names) */
	check_outputs(outs + 1, what + 1, 1, o->configs, o->nconfigs);
	/* written when the run ends: found now if it cannot be */
	check_output_dir(o->cfg.export_llmc, "--export-llmc", 0);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct lmt_err err = { 0 };
	struct lmt_session *s = &session;
	const struct lmt_session_cb cb = { &o, on_record, on_notice, on_step, train_adopt, train_same_value };
	tool_init("train");
	tool_passive_threads(argv);
	parse_args(&o, argc, argv);
	if (!o.cfg.resume)
		finish_args(&o);
	check_paths(&o);

	/* the ranks first: under a launcher every rank runs this, rank 0 owns the run */
	if (lmt_session_connect(s, &o.cfg, &cb, &tool_interrupted, &err))
		session_die(&err);
	if (s->comm.world > 1) {
		if (!o.cfg.out && !o.cfg.no_save)
			usage_error("%d ranks train one run: name it with -o RUN (or --no-save)", s->comm.world);
		if (o.cfg.ckpt_minutes > 0)
			usage_error("--ckpt-minutes with %d ranks: give --ckpt-every (every rank must save at the same update)",
				    s->comm.world);
		if (s->follower)
			tool_quiet = 1;
	}
	/* from the lock on, any exit before the end marks the run (or, refused before
	 * it began, leaves it as it was: lmt_session_mark_failed) */
	if (o.cfg.out)
		atexit(run_atexit);
	if (lmt_session_claim(s, o.given, o.ngiven, &err))
		session_die(&err);
	if (o.cfg.resume) {
		finish_args(&o);
		check_paths(&o);
	}
	/* under a launcher stdout may be a pty of its own (Open MPI): JSONL there */
	human = !o.jsonl && isatty(STDOUT_FILENO) && s->comm.world == 1;
	human_updates = o.cfg.tc.updates;
	o.cfg.precision_env = getenv("LMT_PRECISION");
	int made = lmt_session_open(s, tool_threads(o.threads), &err);
	if (made < 0)
		session_die(&err);
	if (made) {
		atexit(run_atexit); /* the default run's directory, made just now */
		check_paths(&o);
	}
	if (lmt_session_start(s, &err))
		session_die(&err);
	atexit(stop_trainer);
	if (lmt_session_begin(s, &err))
		session_die(&err);
	tool_defer_signals(); /* SIGINT, SIGTERM: finish the update, save, exit 0 */
	if (lmt_session_train(s, &err))
		session_die(&err);
	if (!tool_quiet && !human && isatty(STDERR_FILENO))
		fputc('\n', stderr);
	if (lmt_session_finish(s, &err))
		session_die(&err);
	int status = s->status;
	lmt_session_release(s);
	return status;
}
