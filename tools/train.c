/*
 * train: GPT-2 training on a shard-pack dataset, one JSONL record per update.
 *
 *	train --data data/ --out run/ --layers 4 --heads 4 --channels 256 \
 *	      --micro-batch 8 --accum 4 --updates 2000 --lr 1e-3 | jq -c '{update, loss}'
 *
 * The model, the step and the optimizer live in the library (model.c, trainer.c)
 * and run on a backend (backend.h) and a communicator (comm.h); this file parses
 * options, wires them together, and reports. stdout: JSONL (updates, evaluations,
 * samples, summary); stderr: human progress. The run directory holds the resolved
 * configuration, the parameter breakdown, the metrics and the events.
 */
#include <errno.h>
#include <jansson.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "data/dataset.h"
#include "core/json.h"
#include "model/model.h"
#include "data/tokenizer.h"
#include "tool.h"
#include "ckpt/trainstate.h"
#include "model/trainer.h"
#include "core/util.h"
#include "core/version.h"

enum {
	OPT_DATA = OPT_TOOL_BASE,
	OPT_CONFIG,
	OPT_LAYERS,
	OPT_HEADS,
	OPT_CHANNELS,
	OPT_CONTEXT,
	OPT_UNTIE,
	OPT_MICRO_BATCH,
	OPT_ACCUM,
	OPT_UPDATES,
	OPT_LR,
	OPT_MIN_LR,
	OPT_WARMUP,
	OPT_SCHEDULE,
	OPT_BETA1,
	OPT_BETA2,
	OPT_EPS,
	OPT_WD,
	OPT_DECAY_EMB,
	OPT_CLIP,
	OPT_NONFINITE,
	OPT_SEED,
	OPT_INIT_SEED,
	OPT_SEG_MASK,
	OPT_DOC_TARGETS,
	OPT_EVAL_EVERY,
	OPT_EVAL_SEQS,
	OPT_SAMPLE_EVERY,
	OPT_SAMPLE_TOKENS,
	OPT_TEMPERATURE,
	OPT_TOP_K,
	OPT_PROMPT,
	OPT_PEAK,
	OPT_INIT_LLMC,
	OPT_EXPORT_LLMC,
	OPT_BACKEND,
	OPT_WINDOW,
	OPT_RESUME,
	OPT_CKPT_EVERY,
	OPT_CKPT_MINUTES,
	OPT_KEEP,
	OPT_KEEP_EVERY,
	OPT_CKPT_SYNC,
	OPT_MTBF,
	OPT_LOG_SAMPLES,
	OPT_STOP_AT,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "data", required_argument, NULL, OPT_DATA },
	{ "out", required_argument, NULL, 'o' },
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
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: train --data DIR [options]\n"
	       "\n"
	       "Train a GPT-2 model on a shard-pack dataset; one JSONL record per update.\n"
	       "\n"
	       "  --data DIR              the dataset (shard-pack's output)\n"
	       "  -o, --out RUN           run directory: config, parameters, metrics, events\n"
	       "  --config FILE           'key = value' lines, keys as the long options\n"
	       "                          (read where it appears: later options win)\n"
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
	       "                          -o's run, or a fresh start if it has none)\n"
	       "  --mtbf SECONDS          report the checkpoint interval sqrt(2 C MTBF)\n"
	       "  --log-samples           each update record lists its sample ids\n"
	       "  --stop-at N             stop after update N as on SIGTERM (save, exit 0)\n"
	       "Evaluation and samples:\n"
	       "  --eval-every N --eval-seqs N     validation loss (every 100; 64 sequences)\n"
	       "  --sample-every N --sample-tokens N --temperature X --top-k N --prompt TEXT\n"
	       "                          fixed-seed samples (0: never; 32; 1.0; 40)\n"
	       "Running:\n"
	       "  --backend cpu           the compute backend (cpu)\n"
	       "  -j, --threads N         CPU threads (OMP_NUM_THREADS, else all cores)\n"
	       "  --peak-flops X          FLOP/s for MFU (default: measured sgemm peak)\n"
	       "  -q, --quiet             no progress on stderr\n"
	       "  -h, --help  -V, --version\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See train(1).\n");
}

struct opts {
	const char *data, *out, *tokenizer, *init_llmc, *export_llmc, *prompt, *backend;
	struct lmt_gpt_config model;
	struct lmt_train_cfg tc;
	int context, threads;
	uint64_t init_seed;
	int init_seed_given, warmup_given, shape_given;
	uint64_t eval_every, eval_seqs, sample_every;
	const char *resume;
	uint64_t ckpt_every, keep_every, stop_at;
	double ckpt_minutes, mtbf;
	int keep, ckpt_sync, log_samples;
	int sample_tokens, top_k;
	double temperature, peak;
};

static void set_option(struct opts *o, int c, const char *arg, const char *where);

/* --config FILE: "key = value" lines, '#' comments; keys are long option names. */
static void read_config(struct opts *o, const char *path)
{
	char *data;
	size_t n;
	struct lmt_err err = { 0 };
	if (lmt_read_file(path, &data, &n, &err))
		die_err(&err);
	int lineno = 0;
	for (char *line = data, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		lineno++;
		char *h = strchr(line, '#');
		if (h)
			*h = 0;
		char *k = line;
		while (*k == ' ' || *k == '\t' || *k == '\r')
			k++;
		if (!*k)
			continue;
		char *eq = strchr(k, '=');
		char *ke = eq ? eq : k + strlen(k);
		while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
			ke--;
		char key[64];
		snprintf(key, sizeof key, "%.*s", (int)(ke - k), k);
		char *v = eq ? eq + 1 : NULL;
		while (v && (*v == ' ' || *v == '\t'))
			v++;
		if (v) {
			char *ve = v + strlen(v);
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
				*--ve = 0;
		}
		const struct option *opt = NULL;
		for (const struct option *x = longopts; x->name; x++)
			if (!strcmp(x->name, key))
				opt = x;
		char where[600];
		snprintf(where, sizeof where, "'%s': line %d", path, lineno);
		if (!opt || !strcmp(key, "config") || !strcmp(key, "help") || !strcmp(key, "version"))
			usage_error("%s: unknown key '%s'", where, key);
		if (opt->has_arg == required_argument && (!v || !*v))
			usage_error("%s: key '%s' needs a value", where, key);
		if (opt->has_arg == no_argument && v && strcmp(v, "true") && strcmp(v, "1"))
			usage_error("%s: key '%s' takes no value (or true)", where, key);
		tool_context = where;
		set_option(o, opt->val, v ? strdup(v) : NULL, where);
		tool_context = NULL;
	}
	free(data);
}

static void set_option(struct opts *o, int c, const char *arg, const char *where)
{
	(void)where;
	switch (c) {
	case OPT_DATA: o->data = arg; break;
	case 'o': o->out = arg; break;
	case OPT_CONFIG: read_config(o, arg); break;
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
	case OPT_SCHEDULE:
		if (!strcmp(arg, "cosine"))
			o->tc.schedule = LMT_SCHED_COSINE;
		else if (!strcmp(arg, "linear"))
			o->tc.schedule = LMT_SCHED_LINEAR;
		else if (!strcmp(arg, "constant"))
			o->tc.schedule = LMT_SCHED_CONSTANT;
		else
			usage_error("option '--schedule': '%s' is not cosine, linear or constant", arg);
		break;
	case OPT_BETA1: o->tc.beta1 = opt_double("beta1", arg, 0, 0.999999); break;
	case OPT_BETA2: o->tc.beta2 = opt_double("beta2", arg, 0, 0.999999999); break;
	case OPT_EPS: o->tc.eps = opt_double("eps", arg, 0, 1); break;
	case OPT_WD: o->tc.weight_decay = opt_double("weight-decay", arg, 0, 10); break;
	case OPT_DECAY_EMB: o->tc.decay_embeddings = 1; break;
	case OPT_CLIP: o->tc.clip = opt_double("clip", arg, 0, 1e30); break;
	case OPT_NONFINITE:
		if (!strcmp(arg, "stop"))
			o->tc.on_nonfinite = LMT_NONFINITE_STOP;
		else if (!strcmp(arg, "skip"))
			o->tc.on_nonfinite = LMT_NONFINITE_SKIP;
		else
			usage_error("option '--on-nonfinite': '%s' is not stop or skip", arg);
		break;
	case OPT_SEED: o->tc.seed = (uint64_t)opt_int("seed", arg, 0, INT64_MAX); break;
	case OPT_INIT_SEED:
		o->init_seed = (uint64_t)opt_int("init-seed", arg, 0, INT64_MAX);
		o->init_seed_given = 1;
		break;
	case OPT_SEG_MASK: o->tc.seg_mask = 1; break;
	case OPT_DOC_TARGETS:
		if (!strcmp(arg, "keep"))
			o->tc.cross_doc_targets = 1;
		else if (!strcmp(arg, "drop"))
			o->tc.cross_doc_targets = 0;
		else
			usage_error("option '--doc-targets': '%s' is not keep or drop", arg);
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
	case OPT_BACKEND:
		if (strcmp(arg, "cpu"))
			usage_error("option '--backend': '%s' is not available in this build (cpu)", arg);
		o->backend = arg;
		break;
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
	}
}

/* ---- the run directory ---- */

struct run {
	char dir[PATH_MAX];
	FILE *metrics, *events;
};

static FILE *open_append(const char *dir, const char *name)
{
	char p[PATH_MAX];
	path_fmt(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "a");
	if (!f)
		die("'%s': %s", p, strerror(errno));
	return f;
}

static struct run *the_run;
static int run_finished;
static struct lmt_trainer the_trainer;

static void stop_trainer(void)
{
	if (the_trainer.loader.d)
		lmt_trainer_release(&the_trainer);
}

static void event(struct run *r, const char *what, const char *detail, uint64_t update);

/* On any exit before the end (die() included), the events file says the run failed. */
static void run_atexit(void)
{
	if (the_run && the_run->events && !run_finished)
		event(the_run, "failed", "the run stopped on an error (see stderr)", 0);
}

/* Write j's record to stdout and, if there is a run, to f. */
static void emit(struct lmt_json *j, FILE *f)
{
	if (lmt_json_end_line(j, stdout))
		die("'<stdout>': write error");
	if (f && (fwrite(j->out.buf, 1, j->out.len, f) != j->out.len || fflush(f)))
		die("run directory: write error");
}

/* Close j's record and append it to events.jsonl (if there is a run). */
static void write_event(struct run *r, struct lmt_json *j)
{
	lmt_json_end(j);
	if (!r->events)
		return;
	if (LMT_GROW(j->out.buf, j->out.cap, j->out.len + 2))
		die("out of memory");
	j->out.buf[j->out.len++] = '\n';
	if (fwrite(j->out.buf, 1, j->out.len, r->events) != j->out.len || fflush(r->events))
		die("run directory: write error");
}

static void event(struct run *r, const char *what, const char *detail, uint64_t update)
{
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", what);
	lmt_json_u64(&j, "update", update);
	if (detail)
		lmt_json_str(&j, "detail", detail);
	write_event(r, &j);
	lmt_json_release(&j);
}

/* The machine, for the run record: what ran it, as the OS reports it. */
static void hardware_record(struct lmt_json *j, const struct lmt_backend *be, const struct lmt_comm *comm)
{
	char model[256] = "unknown", host[256] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof line, f))
			if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
				snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
				model[strcspn(model, "\n")] = 0;
				break;
			}
		fclose(f);
	}
	gethostname(host, sizeof host - 1);
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	lmt_json_obj(j, "hardware");
	lmt_json_str(j, "host", host);
	lmt_json_str(j, "cpu", model);
	lmt_json_u64(j, "cpus_online", (uint64_t)LMT_MAX(sysconf(_SC_NPROCESSORS_ONLN), 1));
	lmt_json_u64(j, "memory_bytes", pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0);
	lmt_json_str(j, "accelerator", "none");
	lmt_json_u64(j, "devices", 0);
	lmt_json_obj_end(j);
	lmt_json_obj(j, "topology");
	lmt_json_u64(j, "world", (uint64_t)comm->world);
	lmt_json_u64(j, "nodes", 1);
	lmt_json_u64(j, "ranks_per_node", (uint64_t)comm->world);
	lmt_json_u64(j, "threads_per_rank", (uint64_t)be->threads);
	lmt_json_str(j, "communicator", comm->name);
	lmt_json_obj_end(j);
}

static void write_config(const struct run *r, const struct opts *o, const struct lmt_dataset *d,
			 const struct lmt_gpt *g, const struct lmt_backend *be, const struct lmt_comm *comm, double peak)
{
	struct lmt_json j;
	struct lmt_err err = { 0 };
	char hex[LMT_SHA256_HEX], p[PATH_MAX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "tool", "train");
	lmt_json_str(&j, "tool_version", LMT_VERSION);
	lmt_json_str(&j, "revision", lmt_revision());
	lmt_json_str(&j, "backend", be->name);
	lmt_json_u64(&j, "threads", (uint64_t)be->threads);
	hardware_record(&j, be, comm);
	lmt_json_obj(&j, "data");
	lmt_json_str(&j, "dir", o->data);
	lmt_json_str(&j, "manifest_sha256", lmt_sha256_hex(d->manifest_sha256, hex));
	lmt_json_str(&j, "tokenizer", o->tokenizer);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(d->tokenizer_sha256, hex));
	lmt_json_u64(&j, "seq_len", d->seq_len);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "model");
	lmt_json_u64(&j, "layers", (uint64_t)g->cfg.L);
	lmt_json_u64(&j, "heads", (uint64_t)g->cfg.NH);
	lmt_json_u64(&j, "channels", (uint64_t)g->cfg.C);
	lmt_json_u64(&j, "context", (uint64_t)g->cfg.max_T);
	lmt_json_u64(&j, "vocab", (uint64_t)g->cfg.V);
	lmt_json_u64(&j, "vocab_padded", (uint64_t)g->cfg.Vp);
	lmt_json_bool(&j, "untied", g->cfg.untied);
	lmt_json_str(&j, "init", o->init_llmc ? o->init_llmc : "gpt2-normal");
	if (o->init_llmc)
		lmt_json_null(&j, "init_seed");
	else
		lmt_json_u64(&j, "init_seed", o->init_seed);
	lmt_json_str(&j, "export_llmc", o->export_llmc);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "optimization");
	lmt_json_u64(&j, "micro_batch", (uint64_t)o->tc.B);
	lmt_json_u64(&j, "accum", (uint64_t)o->tc.accum);
	lmt_json_u64(&j, "global_batch_sequences", (uint64_t)o->tc.B * o->tc.accum);
	lmt_json_u64(&j, "global_batch_positions", (uint64_t)o->tc.B * o->tc.accum * d->seq_len);
	lmt_json_u64(&j, "updates", o->tc.updates);
	lmt_json_num(&j, "lr", o->tc.lr);
	lmt_json_num(&j, "min_lr_frac", o->tc.min_lr_frac);
	lmt_json_u64(&j, "warmup", o->tc.warmup);
	lmt_json_str(&j, "schedule", o->tc.schedule == LMT_SCHED_COSINE ? "cosine" :
				     o->tc.schedule == LMT_SCHED_LINEAR ? "linear" : "constant");
	lmt_json_num(&j, "beta1", o->tc.beta1);
	lmt_json_num(&j, "beta2", o->tc.beta2);
	lmt_json_num(&j, "eps", o->tc.eps);
	lmt_json_num(&j, "weight_decay", o->tc.weight_decay);
	lmt_json_bool(&j, "decay_embeddings", o->tc.decay_embeddings);
	lmt_json_num(&j, "clip", o->tc.clip);
	lmt_json_str(&j, "on_nonfinite", o->tc.on_nonfinite == LMT_NONFINITE_STOP ? "stop" : "skip");
	lmt_json_u64(&j, "seed", o->tc.seed);
	lmt_json_bool(&j, "segment_mask", o->tc.seg_mask);
	lmt_json_str(&j, "doc_targets", o->tc.cross_doc_targets ? "keep" : "drop");
	lmt_json_u64(&j, "shuffle_window", o->tc.shuffle_window);
	lmt_json_str(&j, "precision", "fp32");
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "eval");
	lmt_json_u64(&j, "every", o->eval_every);
	lmt_json_u64(&j, "sequences", o->eval_seqs);
	lmt_json_u64(&j, "sample_every", o->sample_every);
	lmt_json_u64(&j, "sample_tokens", (uint64_t)o->sample_tokens);
	lmt_json_num(&j, "temperature", o->temperature);
	lmt_json_u64(&j, "top_k", (uint64_t)o->top_k);
	lmt_json_str(&j, "prompt", o->prompt);
	lmt_json_obj_end(&j);
	lmt_json_num(&j, "peak_flops", peak);
	lmt_json_str(&j, "peak_source", o->peak > 0 ? "--peak-flops" : "measured sgemm");
	lmt_json_end(&j);
	if (LMT_GROW(j.out.buf, j.out.cap, j.out.len + 2))
		die("out of memory");
	j.out.buf[j.out.len++] = '\n';
	path_fmt(p, sizeof p, "%s/config.json", r->dir);
	if (lmt_write_file_atomic(p, j.out.buf, j.out.len, &err))
		die_err(&err);
	lmt_json_release(&j);
}

static void param_record(struct lmt_json *j, const struct lmt_gpt *g)
{
	struct lmt_gpt_counts c;
	lmt_gpt_count(g, &c);
	lmt_json_begin(j);
	lmt_json_str(j, "event", "parameters");
	lmt_json_u64(j, "total", c.total);
	lmt_json_u64(j, "embedding", c.embedding);
	lmt_json_u64(j, "matrix", c.matrix);
	lmt_json_u64(j, "bias", c.bias);
	lmt_json_u64(j, "norm", c.norm);
	lmt_json_u64(j, "vocab_padding", c.padding);
	lmt_json_bool(j, "tied", !g->cfg.untied);
	lmt_json_obj(j, "tensors");
	for (int i = 0; i < g->nt; i++) {
		lmt_json_arr(j, g->t[i].name);
		for (int k = 0; k < g->t[i].ndim; k++)
			lmt_json_u64(j, NULL, (uint64_t)g->t[i].shape[k]);
		lmt_json_arr_end(j);
	}
	lmt_json_obj_end(j);
}

/* Text to token ids with the tokenizer, or the EOS/BOS token alone. */
static int32_t *make_prompt(const struct opts *o, struct lmt_tokenizer *tok, int have_tok, uint32_t eos, int *np)
{
	int32_t *p = NULL;
	if (o->prompt && have_tok) {
		struct lmt_tok_state *s = lmt_tok_state_new(tok);
		struct lmt_u32vec v = { 0 };
		if (!s || lmt_tok_encode(tok, s, o->prompt, strlen(o->prompt), 0, &v))
			die("out of memory");
		lmt_tok_state_free(s);
		p = malloc((v.n + 1) * sizeof *p);
		for (size_t i = 0; i < v.n; i++)
			p[i] = (int32_t)v.v[i];
		*np = (int)v.n;
		free(v.v);
	}
	if (!p || *np == 0) {
		free(p);
		p = malloc(sizeof *p);
		p[0] = (int32_t)(eos != UINT32_MAX ? eos : 0);
		*np = 1;
	}
	return p;
}

/* ---- checkpoints ---- */

struct ckpt_ctx {
	const struct opts *o;
	const struct lmt_dataset *d;
	struct lmt_gpt *g;
	struct lmt_trainer *tr;
	struct lmt_backend *be;
	struct lmt_comm *comm;
	struct run *run;
	double wall_offset, t_start;
	struct lmt_ckpt_async async;
	uint64_t last_saved;
	double last_save_time, last_due;
};

/* The manifest's "state" object: everything but the tensors. */
static char *state_json(struct ckpt_ctx *k, double wall)
{
	const struct opts *o = k->o;
	struct lmt_trainer *tr = k->tr;
	struct lmt_json j;
	char hex[LMT_SHA256_HEX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_u64(&j, "update", tr->update);
	lmt_json_u64(&j, "opt_steps", tr->opt_steps);
	lmt_json_u64(&j, "tokens", tr->tokens);
	lmt_json_u64(&j, "clipped_updates", tr->clipped_updates);
	lmt_json_obj(&j, "clocks");
	lmt_json_num(&j, "wall_s", wall);
	lmt_json_num(&j, "device_s", wall * k->comm->world);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "scheduler");
	lmt_json_str(&j, "schedule", o->tc.schedule == LMT_SCHED_COSINE ? "cosine" :
				     o->tc.schedule == LMT_SCHED_LINEAR ? "linear" : "constant");
	lmt_json_num(&j, "lr", o->tc.lr);
	lmt_json_num(&j, "min_lr_frac", o->tc.min_lr_frac);
	lmt_json_u64(&j, "warmup", o->tc.warmup);
	lmt_json_u64(&j, "updates", o->tc.updates);
	lmt_json_num(&j, "next_lr", lmt_lr_at(&o->tc, tr->update));
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "loss_scaler");
	lmt_json_str(&j, "type", "none");
	lmt_json_num(&j, "scale", 1.0);
	lmt_json_obj_end(&j);
	lmt_json_arr(&j, "rng");
	for (int r = 0; r < k->comm->world; r++) {
		lmt_json_obj(&j, NULL);
		lmt_json_u64(&j, "rank", (uint64_t)r);
		lmt_json_obj(&j, "cpu");
		lmt_json_str(&j, "generator", "xoshiro256**");
		lmt_json_u64(&j, "seed", o->tc.seed);
		lmt_json_str(&j, "use", "sampling only; each sample is drawn from a stream seeded by --seed alone");
		lmt_json_obj_end(&j);
		lmt_json_null(&j, "device");
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_obj(&j, "loader");
	lmt_json_u64(&j, "order", LMT_LOADER_ORDER);
	lmt_json_u64(&j, "seed", o->tc.seed);
	lmt_json_u64(&j, "window", o->tc.shuffle_window);
	lmt_json_u64(&j, "world", (uint64_t)k->comm->world);
	lmt_json_arr(&j, "cursors");
	lmt_json_obj(&j, NULL);
	lmt_json_u64(&j, "rank", (uint64_t)k->comm->rank);
	lmt_json_u64(&j, "cursor", lmt_loader_cursor(&tr->loader));
	lmt_json_obj_end(&j);
	lmt_json_arr_end(&j);
	lmt_json_obj_end(&j);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(k->d->tokenizer_sha256, hex));
	lmt_json_str(&j, "dataset_manifest_sha256", lmt_sha256_hex(k->d->manifest_sha256, hex));
	lmt_json_obj(&j, "model");
	lmt_json_u64(&j, "layers", (uint64_t)k->g->cfg.L);
	lmt_json_u64(&j, "heads", (uint64_t)k->g->cfg.NH);
	lmt_json_u64(&j, "channels", (uint64_t)k->g->cfg.C);
	lmt_json_u64(&j, "context", (uint64_t)k->g->cfg.max_T);
	lmt_json_u64(&j, "vocab", (uint64_t)k->g->cfg.V);
	lmt_json_u64(&j, "vocab_padded", (uint64_t)k->g->cfg.Vp);
	lmt_json_bool(&j, "untied", k->g->cfg.untied);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "code");
	lmt_json_str(&j, "revision", lmt_revision());
	lmt_json_bool(&j, "dirty", strstr(lmt_revision(), "-dirty") != NULL);
	lmt_json_str(&j, "library", LMT_VERSION);
	lmt_json_str(&j, "backend", k->be->name);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "sharding");
	lmt_json_u64(&j, "world", (uint64_t)k->comm->world);
	lmt_json_str(&j, "rule", "rank r holds elements [r*n/W, (r+1)*n/W) of every tensor");
	lmt_json_obj_end(&j);
	long off = 0;
	if (k->run->metrics) {
		fflush(k->run->metrics);
		off = ftell(k->run->metrics);
	}
	lmt_json_u64(&j, "metrics_offset", (uint64_t)(off > 0 ? off : 0));
	if (k->run->dir[0]) {
		char p[PATH_MAX], *cfg;
		size_t n;
		struct lmt_err err = { 0 };
		path_fmt(p, sizeof p, "%s/config.json", k->run->dir);
		if (lmt_read_file(p, &cfg, &n, &err) == 0) {
			while (n && (cfg[n - 1] == '\n' || cfg[n - 1] == ' '))
				cfg[--n] = 0;
			lmt_json_raw(&j, "config", cfg);
			free(cfg);
		}
	}
	lmt_json_end(&j);
	if (j.out.oom)
		die("out of memory");
	char *out = strdup(j.out.buf);
	lmt_json_release(&j);
	if (!out)
		die("out of memory");
	return out;
}

/* Remove all but the newest keep checkpoints and the keep_every milestones. */
static void retain(struct ckpt_ctx *k)
{
	struct lmt_err err = { 0 };
	char **names;
	uint64_t *ups;
	int n;
	if (lmt_ckpt_list(k->run->dir, &names, &ups, &n, &err)) {
		warn("%s", err.msg);
		return;
	}
	for (int i = 0; i < n - k->o->keep; i++) {
		if (k->o->keep_every && ups[i] % k->o->keep_every == 0)
			continue;
		if (lmt_ckpt_remove(k->run->dir, names[i], &err))
			warn("%s", err.msg);
		else
			event(k->run, "checkpoint-removed", names[i], ups[i]);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ups);
}

static void report_ckpt(struct ckpt_ctx *k, const struct lmt_ckpt_result *r, double pause, int async)
{
	uint64_t update = async ? k->async.save.update : k->tr->update;
	/* the checkpoint's cost C to the run: the time training stood still for it */
	double cost = async ? pause : r->write_s;
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "checkpoint");
	lmt_json_u64(&j, "update", update);
	lmt_json_str(&j, "path", r->path);
	lmt_json_u64(&j, "bytes", r->bytes);
	lmt_json_num(&j, "pause_s", pause);
	lmt_json_num(&j, "write_s", r->write_s);
	lmt_json_num(&j, "mb_per_s", r->write_s > 0 ? r->bytes / r->write_s / 1e6 : 0);
	lmt_json_bool(&j, "async", async);
	lmt_json_num(&j, "cost_s", cost);
	/* Young's interval: the checkpoint period that minimises the expected overhead
	 * for a cost C per checkpoint and a mean time between failures */
	double best = k->o->mtbf > 0 ? sqrt(2.0 * cost * k->o->mtbf) : 0;
	if (best > 0)
		lmt_json_num(&j, "optimal_interval_s", best);
	emit(&j, k->run->metrics);
	lmt_json_release(&j);
	event(k->run, "checkpoint", r->path, update);
	char tail[96] = "";
	if (best > 0)
		snprintf(tail, sizeof tail, "; with an MTBF of %.0f s the best interval is %.0f s", k->o->mtbf, best);
	info("checkpoint of update %llu: %.1f MB written in %.2f s; cost %.3f s (training %s)%s",
	     (unsigned long long)update, r->bytes / 1e6, r->write_s, cost,
	     async ? "paused for the snapshot" : "waited for the write", tail);
	retain(k);
}

/* Collect a finished background save, if any. */
static void ckpt_poll(struct ckpt_ctx *k, int wait)
{
	struct lmt_ckpt_result r;
	struct lmt_err err = { 0 };
	int rc = 0;
	double pause = k->async.save.update ? k->last_save_time : 0;
	int got = wait ? lmt_ckpt_async_wait(&k->async, &r, &rc, &err) : lmt_ckpt_async_poll(&k->async, &r, &rc, &err);
	if (!got)
		return;
	if (rc)
		die("checkpoint of update %llu failed: %s", (unsigned long long)k->async.save.update, err.msg);
	report_ckpt(k, &r, pause, 1);
}

static void ckpt_save(struct ckpt_ctx *k, int sync)
{
	struct lmt_err err = { 0 };
	if (!k->run->dir[0] || k->last_saved == k->tr->update)
		return;
	/* one save at a time: a final (synchronous) save waits for the one in flight; a
	 * periodic one is refused, and says so */
	ckpt_poll(k, sync);
	if (k->async.started) {
		char detail[160];
		snprintf(detail, sizeof detail, "not saving update %llu: the save of update %llu is still in flight",
			 (unsigned long long)k->tr->update, (unsigned long long)k->async.save.update);
		warn("%s", detail);
		event(k->run, "checkpoint-refused", detail, k->tr->update);
		return;
	}
	struct lmt_ckpt_tensor *t;
	int n;
	float *host;
	double t0 = lmt_now();
	if (lmt_trainstate_tensors(k->g, &t, &n, &host, &err))
		die_err(&err);
	double wall = k->wall_offset + (lmt_now() - k->t_start);
	char *state = state_json(k, wall);
	struct lmt_ckpt_save sv = { k->run->dir, k->tr->update, k->comm->world, t, n, state };
	if (sync) {
		struct lmt_ckpt_result r;
		if (lmt_ckpt_write(&sv, &r, &err))
			die_err(&err);
		k->last_saved = k->tr->update;
		report_ckpt(k, &r, lmt_now() - t0, 0);
	} else {
		if (lmt_ckpt_async_start(&k->async, &sv, &err))
			die_err(&err);
		k->last_saved = k->tr->update;
		k->last_save_time = lmt_now() - t0; /* the training pause: the snapshot */
	}
	free(t);
	free(host);
	free(state);
}

static uint64_t ju64(json_t *o, const char *key)
{
	json_t *x = json_object_get(o, key);
	return json_is_integer(x) && json_integer_value(x) >= 0 ? (uint64_t)json_integer_value(x) : UINT64_MAX;
}

/* The checkpoint must belong to this data and model; say what differs. */
static void check_compat(const struct lmt_ckpt *c, const struct opts *o, const struct lmt_dataset *d,
			 const struct lmt_gpt *g)
{
	char hex[LMT_SHA256_HEX];
	json_t *m = lmt_ckpt_state(c, "model"), *l = lmt_ckpt_state(c, "loader");
	const char *ts = json_string_value(lmt_ckpt_state(c, "tokenizer_sha256"));
	const char *ds = json_string_value(lmt_ckpt_state(c, "dataset_manifest_sha256"));
	if (!ts || strcmp(ts, lmt_sha256_hex(d->tokenizer_sha256, hex)))
		die("'%s': made with tokenizer %.16s..., the dataset '%s' uses %.16s...", c->dir, ts ? ts : "?", o->data,
		    hex);
	if (!ds || strcmp(ds, lmt_sha256_hex(d->manifest_sha256, hex)))
		die("'%s': made on dataset %.16s..., '%s' is %.16s...", c->dir, ds ? ds : "?", o->data, hex);
	struct { const char *key; uint64_t have; } f[] = {
		{ "layers", (uint64_t)g->cfg.L }, { "heads", (uint64_t)g->cfg.NH }, { "channels", (uint64_t)g->cfg.C },
		{ "context", (uint64_t)g->cfg.max_T }, { "vocab", (uint64_t)g->cfg.V }, { "vocab_padded", (uint64_t)g->cfg.Vp },
	};
	for (size_t i = 0; i < LMT_ARRAY_SIZE(f); i++)
		if (ju64(m, f[i].key) != f[i].have)
			die("'%s': the model has %s %llu, this run %llu", c->dir, f[i].key, (unsigned long long)ju64(m, f[i].key),
			    (unsigned long long)f[i].have);
	if (json_is_true(json_object_get(m, "untied")) != g->cfg.untied)
		die("'%s': the model is %s, this run %s", c->dir, g->cfg.untied ? "tied" : "untied",
		    g->cfg.untied ? "untied" : "tied");
	if (ju64(l, "order") != LMT_LOADER_ORDER || ju64(l, "seed") != o->tc.seed ||
	    ju64(l, "window") != o->tc.shuffle_window)
		die("'%s': its data order (order %llu, seed %llu, window %llu) is not this run's (%d, %llu, %llu); the "
		    "next samples would differ", c->dir, (unsigned long long)ju64(l, "order"),
		    (unsigned long long)ju64(l, "seed"), (unsigned long long)ju64(l, "window"), LMT_LOADER_ORDER,
		    (unsigned long long)o->tc.seed, (unsigned long long)o->tc.shuffle_window);
}

static void report_skipped(void *ctx, const char *path, const char *why)
{
	struct run *r = ctx;
	warn("ignoring '%s': %s", path, why);
	char detail[1200];
	snprintf(detail, sizeof detail, "%s: %s", path, why);
	event(r, "checkpoint-ignored", detail, 0);
}

/* --resume RUN: the newest checkpoint must be valid (auto falls back instead). */
static void report_strict(void *ctx, const char *path, const char *why)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (!strncmp(base, "step-", 5))
		die("%s\n(--resume auto would fall back to the newest valid checkpoint; --resume %s names one)", why,
		    "RUN/ckpt/step-N");
	report_skipped(ctx, path, why);
}

static uint64_t state_u64(const struct lmt_ckpt *c, const char *key)
{
	json_t *x = lmt_ckpt_state(c, key);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		die("'%s/manifest.json': state.%s is missing or not a count", c->dir, key);
	return (uint64_t)json_integer_value(x);
}

/* This rank's loader cursor: its own if the world size is the same, else rebased
 * from rank 0's (ranks step in lockstep, so all consumed the same count). */
static uint64_t resume_cursor(const struct lmt_ckpt *c, const struct lmt_comm *comm)
{
	json_t *l = lmt_ckpt_state(c, "loader");
	json_t *cs = json_object_get(l, "cursors"), *e;
	uint64_t world = ju64(l, "world");
	size_t i;
	if (!json_is_array(cs) || world == UINT64_MAX || world == 0)
		die("'%s/manifest.json': state.loader has no cursors or world", c->dir);
	uint64_t want = world == (uint64_t)comm->world ? (uint64_t)comm->rank : 0;
	json_array_foreach(cs, i, e) {
		if (ju64(e, "rank") != want)
			continue;
		uint64_t cur = ju64(e, "cursor");
		if (cur == UINT64_MAX)
			die("'%s/manifest.json': state.loader.cursors[%zu] has no cursor", c->dir, i);
		if (world == (uint64_t)comm->world)
			return cur;
		uint64_t out;
		struct lmt_err err = { 0 };
		if (lmt_loader_rebase(cur, 0, (uint32_t)world, (uint32_t)comm->rank, (uint32_t)comm->world, &out, &err))
			die("'%s': %s", c->dir, err.msg);
		return out;
	}
	die("'%s/manifest.json': no loader cursor for rank %llu", c->dir, (unsigned long long)want);
}

/* Checkpoints past the one resumed from (invalid ones auto skipped, or newer ones
 * when an older checkpoint is named) would collide with the saves of the replayed
 * updates: move them aside, keeping them for inspection. */
static void set_aside_newer(struct run *r, uint64_t update, int fresh)
{
	struct lmt_err err = { 0 };
	char **names;
	uint64_t *ups;
	int n;
	if (lmt_ckpt_list(r->dir, &names, &ups, &n, &err))
		die_err(&err);
	for (int i = 0; i < n; i++) {
		if (fresh || ups[i] > update) {
			char a[PATH_MAX], b[PATH_MAX];
			path_fmt(a, sizeof a, "%s/ckpt/%s", r->dir, names[i]);
			path_fmt(b, sizeof b, "%s/ckpt/stale-%s-%d", r->dir, names[i], (int)getpid());
			if (rename(a, b))
				die("'%s': cannot move it aside: %s", a, strerror(errno));
			warn("'%s' is past the resumed state; moved to '%s'", a, b);
			event(r, "checkpoint-set-aside", b, ups[i]);
		}
		free(names[i]);
	}
	free(names);
	free(ups);
}

/* Cut metrics.jsonl back to what it held at the checkpoint: the update records past
 * it are work that will be done again (counted in *replayed; the last one's wall
 * clock in *last_wall, or -1). The records of checkpoints at or before update upto,
 * written after their own snapshot and so past the offset, are kept. */
static void rewind_metrics(const char *dir, uint64_t offset, uint64_t upto, uint64_t *replayed, double *last_wall)
{
	char p[PATH_MAX], *data;
	size_t n;
	struct lmt_err err = { 0 };
	*replayed = 0;
	*last_wall = -1;
	path_fmt(p, sizeof p, "%s/metrics.jsonl", dir);
	if (lmt_read_file(p, &data, &n, &err))
		die_err(&err);
	if (offset > n) {
		/* a checkpoint copied into another run directory (after ckpt-reshard, say):
		 * these metrics are not its run's, and nothing is cut */
		warn("'%s' is shorter (%zu bytes) than its run's was at the checkpoint (%llu): not that run's metrics; "
		     "appending to them", p, n, (unsigned long long)offset);
		free(data);
		return;
	}
	struct lmt_json keep;
	lmt_json_init(&keep);
	for (char *q = data + offset, *e; q < data + n && (e = memchr(q, '\n', (size_t)(data + n - q))); q = e + 1) {
		*e = 0;
		if (!strncmp(q, "{\"event\":\"update\"", 17)) {
			char *w = strstr(q, "\"clocks\":{\"wall_s\":");
			(*replayed)++;
			if (w)
				*last_wall = strtod(w + 19, NULL);
		} else if (!strncmp(q, "{\"event\":\"checkpoint\",\"update\":", 31) &&
			   strtoull(q + 31, NULL, 10) <= upto) {
			size_t len = (size_t)(e - q);
			if (LMT_GROW(keep.out.buf, keep.out.cap, keep.out.len + len + 2))
				die("out of memory");
			memcpy(keep.out.buf + keep.out.len, q, len);
			keep.out.len += len;
			keep.out.buf[keep.out.len++] = '\n';
		}
	}
	free(data);
	if (truncate(p, (off_t)offset))
		die("'%s': %s", p, strerror(errno));
	if (keep.out.len) {
		FILE *f = fopen(p, "a");
		if (!f || fwrite(keep.out.buf, 1, keep.out.len, f) != keep.out.len || fclose(f))
			die("'%s': %s", p, strerror(errno));
	}
	lmt_json_release(&keep);
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	o.model = (struct lmt_gpt_config){ 0, 0, 0, 4, 4, 256, 0 };
	o.tc = (struct lmt_train_cfg){ 8, 1, 0, 1, 1000, 6e-4, 0.1, 0, LMT_SCHED_COSINE, 0.9, 0.95, 1e-8, 0.1, 0,
				       1.0, LMT_NONFINITE_STOP, 1, 8192 };
	o.eval_every = 100;
	o.keep = 3;
	o.eval_seqs = 64;
	o.sample_tokens = 32;
	o.temperature = 1.0;
	o.top_k = 40;
	tool_init("train");
	tool_passive_threads(argv);
	int c;
	while ((c = getopt_long(argc, argv, "hVo:t:j:q", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage();
			return 0;
		}
		if (c == 'V') {
			print_version();
			return 0;
		}
		if (c == '?' || c == ':')
			bad_option(argv);
		set_option(&o, c, optarg, NULL);
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!o.data)
		usage_error("no dataset: give --data DIR (shard-pack's output)");
	if (!o.init_seed_given)
		o.init_seed = o.tc.seed;
	if (!o.warmup_given)
		o.tc.warmup = o.tc.updates / 20;
	if (o.tc.warmup > o.tc.updates)
		usage_error("--warmup %llu is more than --updates %llu", (unsigned long long)o.tc.warmup,
			    (unsigned long long)o.tc.updates);
	if (o.init_llmc && (o.model.untied || o.shape_given))
		usage_error("--init-llmc sets the model's shape; --layers, --heads, --channels, --context and --untie do "
			    "not apply");
	if (o.export_llmc && o.model.untied)
		usage_error("--export-llmc writes llm.c's format, which has no untied head (--untie)");
	if (o.prompt && !o.tokenizer)
		usage_error("--prompt is text: give the tokenizer with -t");
	if (!o.init_llmc && o.model.C % o.model.NH)
		usage_error("--channels %d is not a multiple of --heads %d", o.model.C, o.model.NH);
	/* --resume RUN, --resume RUN/ckpt/step-N, or --resume auto (with -o RUN) */
	const char *resume_from = NULL;
	int resume_auto = 0;
	if (o.resume && !strcmp(o.resume, "auto")) {
		if (!o.out)
			usage_error("--resume auto continues the run in -o RUN: give -o");
		resume_auto = 1;
	} else if (o.resume) {
		char mp[PATH_MAX], *rundir;
		path_fmt(mp, sizeof mp, "%s/manifest.json", o.resume);
		if (access(mp, F_OK) == 0) {
			/* one checkpoint, named: RUN/ckpt/step-N */
			char *full = realpath(o.resume, NULL), *sl;
			if (!full)
				die("'%s': %s", o.resume, strerror(errno));
			sl = strrchr(full, '/');
			if (sl && sl > full) {
				*sl = 0;
				sl = strrchr(full, '/');
			}
			if (!sl || strcmp(sl + 1, "ckpt"))
				usage_error("--resume %s: a checkpoint directory must be RUN/ckpt/step-N", o.resume);
			*sl = 0;
			resume_from = o.resume;
			rundir = full;
		} else {
			rundir = strdup(o.resume);
		}
		if (!rundir)
			die("out of memory");
		struct stat a, b;
		if (o.out && (stat(o.out, &a) || stat(rundir, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino))
			usage_error("--resume %s continues run '%s', but -o names '%s'", o.resume, rundir, o.out);
		if (access(rundir, F_OK))
			die("'%s': no such run to resume: %s", rundir, strerror(errno));
		o.out = rundir;
	}
	if ((o.ckpt_every || o.ckpt_minutes > 0 || o.keep_every || o.stop_at) && !o.out)
		usage_error("checkpoints are written into the run directory: give -o RUN");

	struct lmt_err err = { 0 };
	struct lmt_dataset d;
	if (lmt_dataset_open(&d, o.data, &err))
		die_err(&err);
	struct lmt_tokenizer tok;
	int have_tok = 0;
	if (o.tokenizer) {
		if (lmt_tok_load(&tok, o.tokenizer, &err))
			die_err(&err);
		if (memcmp(tok.sha256, d.tokenizer_sha256, 32)) {
			char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
			die("'%s' is tokenizer %.16s..., but the dataset '%s' was made with %.16s...", o.tokenizer,
			    lmt_sha256_hex(tok.sha256, a), o.data, lmt_sha256_hex(d.tokenizer_sha256, b));
		}
		have_tok = 1;
	}
	int T = (int)d.seq_len;
	if (!o.context)
		o.context = T;
	if (T > o.context)
		die("'%s': sequences of %d tokens are longer than the model's context of %d (--context)", o.data, T,
		    o.context);

	struct lmt_backend be;
	if (lmt_backend_open(&be, "cpu", tool_threads(o.threads), &err))
		die_err(&err);
	struct lmt_comm comm;
	if (lmt_comm_open(&comm, NULL, &err))
		die_err(&err);

	struct lmt_gpt g;
	if (o.init_llmc) {
		if (lmt_gpt_load_llmc(&g, o.init_llmc, &be, &err))
			die_err(&err);
		if (g.cfg.V != (int)d.vocab_size)
			die("'%s': vocabulary of %d, the dataset's tokenizer has %u", o.init_llmc, g.cfg.V, d.vocab_size);
		if (g.cfg.max_T < T)
			die("'%s': context of %d, shorter than the dataset's sequences of %d", o.init_llmc, g.cfg.max_T, T);
	} else {
		o.model.max_T = o.context;
		o.model.V = (int)d.vocab_size;
		o.model.Vp = lmt_gpt_padded_vocab(o.model.V);
		if (lmt_gpt_init(&g, &o.model, &be, &err))
			die_err(&err);
	}
	/* the run directory */
	struct run run;
	memset(&run, 0, sizeof run);
	if (o.out) {
		char prev[PATH_MAX];
		path_fmt(prev, sizeof prev, "%s/metrics.jsonl", o.out);
		if (access(prev, F_OK) == 0 && !o.resume)
			die("'%s' holds a previous run (metrics.jsonl); give a new directory, or --resume", o.out);
		if (mkdir(o.out, 0755) && errno != EEXIST)
			die("'%s': %s", o.out, strerror(errno));
		path_fmt(run.dir, sizeof run.dir, "%s", o.out);
		char ck[PATH_MAX];
		path_fmt(ck, sizeof ck, "%s/ckpt", o.out);
		if (mkdir(ck, 0755) && errno != EEXIST)
			die("'%s': %s", ck, strerror(errno));
		run.metrics = open_append(o.out, "metrics.jsonl");
		run.events = open_append(o.out, "events.jsonl");
		the_run = &run;
		atexit(run_atexit);
	}
	/* the checkpoint to resume from */
	struct lmt_ckpt ck;
	int have_ck = 0;
	uint64_t cursor = (uint64_t)comm.rank;
	if (o.resume) {
		char path[PATH_MAX];
		int found = 1;
		if (resume_from) {
			path_fmt(path, sizeof path, "%s", resume_from);
		} else {
			found = lmt_ckpt_latest(o.out, 1, path, sizeof path, resume_auto ? report_skipped : report_strict, &run,
						&err);
			if (found < 0)
				die_err(&err);
			if (!found && !resume_auto)
				die("'%s': no checkpoint to resume from in %s/ckpt", o.out, o.out);
		}
		if (found) {
			if (lmt_ckpt_open(&ck, path, resume_from != NULL, &err))
				die_err(&err);
			have_ck = 1;
			check_compat(&ck, &o, &d, &g);
			cursor = resume_cursor(&ck, &comm);
			if (state_u64(&ck, "update") > o.tc.updates)
				die("'%s' is at update %llu, past --updates %llu", path,
				    (unsigned long long)state_u64(&ck, "update"), (unsigned long long)o.tc.updates);
		}
	}
	/* a resumed run's weights come from the checkpoint */
	if (!o.init_llmc && !have_ck && lmt_gpt_init_weights(&g, o.init_seed, &err))
		die_err(&err);
	if (lmt_gpt_alloc_acts(&g, o.tc.B, T, &err))
		die_err(&err);
	if (lmt_trainer_init(&the_trainer, &o.tc, &be, &comm, &g, &d, cursor, &err))
		die_err(&err);
	/* registered last, so it runs first at exit: stop the read-ahead thread before
	 * the libraries it uses are torn down */
	atexit(stop_trainer);
	struct lmt_trainer *tr = &the_trainer;
	double wall_offset = 0, lost_wall = 0;
	uint64_t replayed = 0;
	if (have_ck) {
		double t0 = lmt_now();
		if (lmt_trainstate_restore(&g, &ck, &err))
			die_err(&err);
		tr->update = state_u64(&ck, "update");
		tr->opt_steps = state_u64(&ck, "opt_steps");
		tr->tokens = state_u64(&ck, "tokens");
		tr->clipped_updates = state_u64(&ck, "clipped_updates");
		json_t *clk = lmt_ckpt_state(&ck, "clocks");
		wall_offset = json_number_value(json_object_get(clk, "wall_s"));
		double last_wall;
		rewind_metrics(o.out, state_u64(&ck, "metrics_offset"), tr->update, &replayed, &last_wall);
		if (last_wall > wall_offset)
			lost_wall = last_wall - wall_offset;
		set_aside_newer(&run, tr->update, 0);
		info("resumed from '%s' at update %llu (%.2f s to load; %llu updates to redo)", ck.dir,
		     (unsigned long long)tr->update, lmt_now() - t0, (unsigned long long)replayed);
	} else if (o.resume && run.metrics) {
		double last_wall;
		rewind_metrics(o.out, 0, 0, &replayed, &last_wall);
		set_aside_newer(&run, 0, 1);
		if (replayed)
			warn("'%s' has no valid checkpoint: starting again from update 0 (%llu updates to redo)", o.out,
			     (unsigned long long)replayed);
	}

	double peak = o.peak > 0 ? o.peak : lmt_backend_peak_flops(&be, 1);
	if (o.out)
		write_config(&run, &o, &d, &g, &be, &comm, peak);
	double fpt = lmt_gpt_flops_per_token(&g.cfg, T);
	struct lmt_json j;
	lmt_json_init(&j);
	param_record(&j, &g);
	lmt_json_num(&j, "flops_per_token", fpt);
	lmt_json_num(&j, "peak_flops", peak);
	lmt_json_str(&j, "peak_source", o.peak > 0 ? "--peak-flops" : "measured sgemm");
	/* a resumed run's metrics already hold it */
	emit(&j, have_ck ? NULL : run.metrics);
	if (o.out) {
		char p[PATH_MAX];
		path_fmt(p, sizeof p, "%s/params.json", o.out);
		lmt_json_end(&j);
		if (lmt_write_file_atomic(p, j.out.buf, j.out.len, &err))
			die_err(&err);
	}
	if (have_ck) {
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "resume");
		lmt_json_u64(&j, "update", tr->update);
		lmt_json_str(&j, "from", ck.dir);
		lmt_json_u64(&j, "replayed_updates", replayed);
		lmt_json_num(&j, "lost_wall_s", lost_wall);
		lmt_json_u64(&j, "tokens_total", tr->tokens);
		lmt_json_u64(&j, "cursor", cursor);
		lmt_json_num(&j, "wall_s", wall_offset);
		emit(&j, run.metrics);
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "resume");
		lmt_json_u64(&j, "update", tr->update);
		lmt_json_str(&j, "from", ck.dir);
		lmt_json_u64(&j, "replayed_updates", replayed);
		lmt_json_num(&j, "lost_wall_s", lost_wall);
		write_event(&run, &j);
		lmt_ckpt_close(&ck);
	} else {
		event(&run, o.resume ? "restart" : "start", NULL, 0);
	}
	struct lmt_gpt_counts pc;
	lmt_gpt_count(&g, &pc);
	info("%s: %zu parameters (%d layers, %d heads, %d channels, vocabulary %d), %d x %d x %d tokens per update",
	     be.name, pc.total, g.cfg.L, g.cfg.NH, g.cfg.C, g.cfg.V, o.tc.accum, o.tc.B, T);

	size_t bytes_params = g.nparams * 4, bytes_acts = g.nacts * 4;
	double t_start = lmt_now();
	int32_t *sample = malloc((size_t)o.sample_tokens * sizeof *sample);
	int np = 0;
	int32_t *prompt = make_prompt(&o, &tok, have_tok, d.eos_id, &np);
	int status = 0;
	double wait_before = 0;
	struct ckpt_ctx ckc;
	memset(&ckc, 0, sizeof ckc);
	ckc.o = &o;
	ckc.d = &d;
	ckc.g = &g;
	ckc.tr = tr;
	ckc.be = &be;
	ckc.comm = &comm;
	ckc.run = &run;
	ckc.wall_offset = wall_offset;
	ckc.t_start = t_start;
	ckc.last_saved = have_ck ? tr->update : UINT64_MAX;
	ckc.last_due = t_start;
	lmt_ckpt_async_init(&ckc.async);
	ckc.async.threads = be.threads;
	if (o.out && !o.ckpt_sync && (o.ckpt_every || o.ckpt_minutes > 0))
		lmt_ckpt_async_reserve(&ckc.async, g.nparams * 3);
	int interrupted = 0;
	tool_defer_signals(); /* SIGINT, SIGTERM: finish the update, save, exit 0 */
	while (tr->update < o.tc.updates) {
		struct lmt_step_stats st;
		int rc = lmt_trainer_step(tr, &st, &err);
		if (rc && !st.nonfinite_what)
			die_err(&err);
		double wall = wall_offset + (lmt_now() - t_start);
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "update");
		lmt_json_u64(&j, "update", st.update);
		lmt_json_u64(&j, "microsteps", (uint64_t)o.tc.accum);
		lmt_json_u64(&j, "tokens", st.valid_tokens);
		lmt_json_u64(&j, "tokens_total", tr->tokens);
		lmt_json_num(&j, "loss", st.loss);
		lmt_json_num(&j, "lr", st.lr);
		lmt_json_num(&j, "grad_norm", st.grad_norm);
		lmt_json_bool(&j, "clipped", st.clipped);
		lmt_json_num(&j, "clipped_fraction", (double)tr->clipped_updates / (double)tr->update);
		lmt_json_bool(&j, "skipped", st.skipped);
		lmt_json_num(&j, "tokens_per_s", st.valid_tokens / st.t_total);
		lmt_json_num(&j, "flops_per_s", fpt * (double)st.positions / st.t_total);
		lmt_json_num(&j, "mfu", fpt * (double)st.positions / st.t_total / peak);
		lmt_json_obj(&j, "time");
		lmt_json_num(&j, "data", st.t_data);
		lmt_json_num(&j, "data_wait", tr->loader.wait_seconds - wait_before);
		wait_before = tr->loader.wait_seconds;
		lmt_json_num(&j, "forward", st.t_forward);
		lmt_json_num(&j, "backward", st.t_backward);
		lmt_json_num(&j, "optimizer", st.t_optimizer);
		lmt_json_num(&j, "comm", st.t_comm);
		lmt_json_num(&j, "step", st.t_total);
		lmt_json_obj_end(&j);
		lmt_json_obj(&j, "clocks");
		lmt_json_num(&j, "wall_s", wall);
		lmt_json_u64(&j, "updates", tr->update);
		lmt_json_u64(&j, "tokens", tr->tokens);
		lmt_json_num(&j, "device_s", wall * comm.world);
		lmt_json_obj_end(&j);
		lmt_json_obj(&j, "memory");
		lmt_json_u64(&j, "params", bytes_params);
		lmt_json_u64(&j, "grads", bytes_params);
		lmt_json_u64(&j, "optimizer", 2 * bytes_params);
		lmt_json_u64(&j, "activations", bytes_acts);
		lmt_json_u64(&j, "peak_rss", lmt_peak_rss());
		lmt_json_obj_end(&j);
		if (o.log_samples) {
			/* the stable ids (shard, sequence) of the samples this update consumed */
			lmt_json_arr(&j, "samples");
			for (int i = 0; i < o.tc.B * o.tc.accum; i++) {
				lmt_json_arr(&j, NULL);
				lmt_json_u64(&j, NULL, tr->samples[i].shard);
				lmt_json_u64(&j, NULL, tr->samples[i].index);
				lmt_json_arr_end(&j);
			}
			lmt_json_arr_end(&j);
		}
		if (st.nonfinite_what) {
			lmt_json_str(&j, "nonfinite", st.nonfinite_what);
			if (st.nonfinite_tensor)
				lmt_json_str(&j, "nonfinite_tensor", st.nonfinite_tensor);
		}
		emit(&j, run.metrics);
		if (st.nonfinite_what) {
			char detail[256];
			snprintf(detail, sizeof detail, "non-finite %s%s%s", st.nonfinite_what,
				 st.nonfinite_tensor ? " in " : "", st.nonfinite_tensor ? st.nonfinite_tensor : "");
			event(&run, "nonfinite", detail, st.update);
			if (rc) {
				event(&run, "stop", err.msg, st.update);
				fprintf(stderr, "train: %s (--on-nonfinite stop)\n", err.msg);
				status = 1;
				break;
			}
			warn("update %llu skipped: %s", (unsigned long long)st.update, detail);
		}
		if (!tool_quiet && isatty(STDERR_FILENO))
			fprintf(stderr, "\rtrain: update %llu/%llu loss %.4f lr %.2e %.0f tok/s mfu %.1f%%   ",
				(unsigned long long)st.update, (unsigned long long)o.tc.updates, st.loss, st.lr,
				st.valid_tokens / st.t_total, 100 * fpt * (double)st.positions / st.t_total / peak);
		int last = st.update == o.tc.updates;
		if (o.eval_every && d.split_seqs[LMT_SPLIT_VAL] && (st.update % o.eval_every == 0 || last)) {
			double vl;
			uint64_t vt;
			double t0 = lmt_now();
			if (lmt_evaluate(&g, &comm, &d, LMT_SPLIT_VAL, o.eval_seqs, o.tc.seg_mask, o.tc.cross_doc_targets, &vl,
					 &vt, &err))
				die_err(&err);
			lmt_json_begin(&j);
			lmt_json_str(&j, "event", "eval");
			lmt_json_u64(&j, "update", st.update);
			lmt_json_str(&j, "split", "val");
			lmt_json_num(&j, "loss", vl);
			lmt_json_u64(&j, "tokens", vt);
			lmt_json_u64(&j, "tokens_total", tr->tokens);
			lmt_json_u64(&j, "sequences", LMT_MIN(o.eval_seqs, d.split_seqs[LMT_SPLIT_VAL]));
			lmt_json_num(&j, "seconds", lmt_now() - t0);
			emit(&j, run.metrics);
		}
		if (o.sample_every && (st.update % o.sample_every == 0 || last)) {
			if (lmt_sample_tokens(&g, prompt, np, o.sample_tokens, o.temperature, o.top_k, o.tc.seed, sample, &err))
				die_err(&err);
			lmt_json_begin(&j);
			lmt_json_str(&j, "event", "sample");
			lmt_json_u64(&j, "update", st.update);
			lmt_json_arr(&j, "prompt_ids");
			for (int k = 0; k < np; k++)
				lmt_json_u64(&j, NULL, (uint64_t)prompt[k]);
			lmt_json_arr_end(&j);
			lmt_json_arr(&j, "ids");
			for (int k = 0; k < o.sample_tokens; k++)
				lmt_json_u64(&j, NULL, (uint64_t)sample[k]);
			lmt_json_arr_end(&j);
			if (have_tok) {
				uint32_t *ids = malloc((size_t)o.sample_tokens * sizeof *ids);
				for (int k = 0; k < o.sample_tokens; k++)
					ids[k] = (uint32_t)sample[k];
				size_t n = lmt_tok_decode(&tok, ids, (size_t)o.sample_tokens, 0, NULL, 0);
				uint8_t *txt = malloc(n + 1);
				lmt_tok_decode(&tok, ids, (size_t)o.sample_tokens, 0, txt, n);
				lmt_json_strn(&j, "text", (const char *)txt, n);
				free(txt);
				free(ids);
			}
			emit(&j, run.metrics);
		}
		if (o.out) {
			ckpt_poll(&ckc, 0);
			int due = (o.ckpt_every && st.update % o.ckpt_every == 0) ||
				  (o.ckpt_minutes > 0 && lmt_now() - ckc.last_due >= o.ckpt_minutes * 60);
			if (due && !last && !tool_interrupted && tr->update != o.stop_at) {
				ckc.last_due = lmt_now();
				ckpt_save(&ckc, o.ckpt_sync);
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
	if (!tool_quiet && isatty(STDERR_FILENO))
		fputc('\n', stderr);
	/* the final checkpoint, written before exit 0 (a failed run's state is not saved) */
	if (o.out && !status)
		ckpt_save(&ckc, 1);
	else if (o.out)
		ckpt_poll(&ckc, 1);
	lmt_ckpt_async_release(&ckc.async);
	if (interrupted) {
		char detail[128], why[32];
		if (interrupted > 0)
			snprintf(why, sizeof why, "signal %d", interrupted);
		else
			snprintf(why, sizeof why, "--stop-at %llu", (unsigned long long)o.stop_at);
		snprintf(detail, sizeof detail, "%s: stopped after update %llu%s", why, (unsigned long long)tr->update,
			 o.out ? ", checkpoint saved" : "");
		event(&run, "stop", detail, tr->update);
		info("%s", detail);
	}
	if (!status && !interrupted && o.export_llmc && lmt_gpt_save_llmc(&g, o.export_llmc, &err))
		die_err(&err);
	double wall = lmt_now() - t_start;
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "summary");
	lmt_json_u64(&j, "updates", tr->update);
	lmt_json_u64(&j, "tokens", tr->tokens);
	lmt_json_num(&j, "wall_s", wall);
	lmt_json_num(&j, "wall_s_total", wall_offset + wall);
	lmt_json_num(&j, "device_s", wall * comm.world);
	lmt_json_num(&j, "tokens_per_s", tr->tokens / wall);
	lmt_json_u64(&j, "clipped_updates", tr->clipped_updates);
	lmt_json_u64(&j, "peak_rss", lmt_peak_rss());
	lmt_json_str(&j, "status", status ? "stopped" : interrupted ? "interrupted" : "done");
	emit(&j, run.metrics);
	if (!interrupted)
		event(&run, status ? "failed" : "end", NULL, tr->update);
	run_finished = 1;
	info("%llu updates, %llu tokens in %.1f s (%.0f tokens/s)", (unsigned long long)tr->update,
	     (unsigned long long)tr->tokens, wall, tr->tokens / wall);
	if (run.metrics)
		fclose(run.metrics);
	if (run.events)
		fclose(run.events);
	free(sample);
	free(prompt);
	lmt_json_release(&j);
	lmt_trainer_release(tr);
	lmt_gpt_release(&g);
	if (have_tok)
		lmt_tok_release(&tok);
	be.release(&be);
	lmt_dataset_close(&d);
	return status;
}
