/*
 * ckpt-reshard: a checkpoint rewritten for another world size, or its model
 * exported as a directory: a Hugging Face GPT-2 in safetensors, or llm.c's files
 * (lib/ckpt/export.h).
 *
 *	ckpt-reshard --world 3 run/ckpt/step-00001000 run3/step-00001000
 *	ckpt-reshard --export safetensors --dtype bf16 run/ckpt/step-00001000 hf
 *	ckpt-reshard --export llmc run/ckpt/step-00001000 llmc
 *
 * Resharding (lib/ckpt/reshard.h) copies every value bit for bit into the chunks
 * of the new world and rewrites what in the training state depends on the world
 * size, streaming a group of new ranks at a time. The new checkpoint is built in
 * a staging directory next to OUT, read back and verified, and renamed into
 * place; an existing OUT is never replaced. stdout: JSONL; stderr: messages.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/pathcheck.h"
#include "ckpt/ckpt.h"
#include "ckpt/resumecfg.h"
#include "ckpt/export.h"
#include "ckpt/reshard.h"
#include "ckpt/runlock.h"
#include "core/json.h"
#include "ckpt/safetensors.h"
#include "data/tokenizer.h"
#include "tool.h"
#include "core/util.h"

enum {
	OPT_EXPORT = OPT_TOOL_BASE,
	OPT_DTYPE,
	OPT_MAX_SHARD,
};

enum { EXPORT_NONE, EXPORT_ST, EXPORT_LLMC };

/* transformers' save_pretrained: max_shard_size="5GB" */
#define DEFAULT_MAX_SHARD 5000000000ull

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "world", required_argument, NULL, 'w' },
	{ "export", required_argument, NULL, OPT_EXPORT },
	{ "dtype", required_argument, NULL, OPT_DTYPE },
	{ "max-shard-size", required_argument, NULL, OPT_MAX_SHARD },
	{ "tokenizer", required_argument, NULL, 't' },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: ckpt-reshard [-q] -w N SRC OUT\n"
	       "       ckpt-reshard [-q] --export safetensors [--dtype T] [--max-shard-size SIZE]\n"
	       "                    [-t TOKENIZER] SRC OUTDIR\n"
	       "       ckpt-reshard [-q] --export llmc [-t TOKENIZER] SRC OUTDIR\n"
	       "\n"
	       "Rewrite the checkpoint SRC (a step-NNNNNNNN directory) for N ranks into the new\n"
	       "directory OUT, every value bit for bit and the training state remapped; or\n"
	       "export its model as a directory: Hugging Face's (as save_pretrained writes it)\n"
	       "or llm.c's model and tokenizer files.\n"
	       "\n"
	       "  -w, --world N           ranks of the new checkpoint (1 for one unsharded file)\n"
	       "      --export FORMAT     safetensors: OUTDIR gets model.safetensors (or shards and\n"
	       "                          an index), config.json, generation_config.json,\n"
	       "                          tokenizer.json, tokenizer_config.json, README.md;\n"
	       "                          llmc: OUTDIR gets model.bin and gpt2_tokenizer.bin;\n"
	       "                          both: lmt-export.json, the files and their SHA-256\n"
	       "      --dtype T           fp32 (default), bf16 or fp16, rounded to nearest even\n"
	       "      --max-shard-size SIZE  tensor bytes per safetensors file, as HF's: 5GB\n"
	       "                          (default), 500MB, 2GiB, or bytes\n"
	       "  -t, --tokenizer FILE    the checkpoint's tokenizer (default: the one its run\n"
	       "                          recorded); its SHA-256 must be the checkpoint's\n"
	       "  -q, --quiet             no messages on stderr but errors and warnings\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "SRC is verified (every file's SHA-256 and every chunk's CRC-32C) before use;\n"
	       "OUT must not exist when resharding; OUTDIR may be an earlier export, which is\n"
	       "replaced as a whole.\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See ckpt-reshard(1).\n");
}

struct opts {
	int world, export_fmt, dtype, dtype_given, shard_given;
	uint64_t max_shard;
	const char *tokenizer, *src, *out;
};

/* ---- the staging directory ---- */

static char staging[PATH_MAX];


static void cleanup_staging(void)
{
	if (staging[0])
		lmt_remove_dir(staging);
}

/* ---- resharding ---- */

static void note(void *ctx, const char *msg)
{
	(void)ctx;
	warn("%s", msg);
}

static int interrupted(void *ctx)
{
	(void)ctx;
	return tool_interrupted != 0;
}

/* the library's error, or the signal that stopped it */
static void die_reshard(const struct lmt_err *err)
{
	tool_check_interrupt();
	die_err(err);
}

static int reshard(const struct opts *o)
{
	struct lmt_err err = { 0 };
	double t0 = lmt_now();
	struct stat st;
	size_t ol = strlen(o->out);
	while (ol > 1 && o->out[ol - 1] == '/')
		ol--;
	char out[PATH_MAX];
	path_fmt(out, sizeof out, "%.*s", (int)ol, o->out);
	if (lstat(out, &st) == 0)
		die("'%s' exists; ckpt-reshard writes a new checkpoint directory and never replaces one", out);
	const char *inputs[] = { o->src };
	if (lmt_path_check_output(out, "the new checkpoint", inputs, 1, &err))
		die_err(&err);
	/* a checkpoint written into a run (RUN/ckpt/step-N) makes this one of the run's
	 * writers: refused while train owns it (its retention and set-aside rename
	 * what is in RUN/ckpt); a RUN that is not there is the staging's error below.
	 * The run is found by what the path is too, so a symlink to RUN/ckpt is no way
	 * round its owner. */
	char run_dir[PATH_MAX];
	if (lmt_run_of_ckpt(out, run_dir, sizeof run_dir) && stat(run_dir, &st) == 0)
		tool_lock_run(run_dir);
	tool_lock_output(out);

	struct lmt_ckpt c;
	info("verifying '%s'", o->src);
	if (lmt_ckpt_open(&c, o->src, 1, &err))
		die_err(&err);
	const int N = o->world;
	uint64_t consumed;
	char *state;
	if (lmt_reshard_state(&c, N, &state, &consumed, note, NULL, &err))
		die_err(&err);

	path_fmt(staging, sizeof staging, "%s.partial-XXXXXX", out);
	if (!lmt_mkdtemp(staging)) {
		int e = errno;
		staging[0] = 0;
		die("'%s': cannot create a staging directory next to it: %s", out, strerror(e));
	}
	atexit(cleanup_staging);
	tool_defer_signals(); /* a signal now stops at the next tensor, removing the staging directory */

	struct lmt_reshard_result r;
	if (lmt_reshard_write(&c, N, staging, state, interrupted, NULL, &r, &err))
		die_reshard(&err);
	if (lmt_reshard_commit(staging, out, &err))
		die_err(&err);
	staging[0] = 0;

	char mp[PATH_MAX], hex[LMT_SHA256_HEX];
	uint8_t msha[32];
	path_fmt(mp, sizeof mp, "%s/manifest.json", out);
	if (lmt_sha256_file(mp, msha, &err))
		die_err(&err);
	double secs = lmt_now() - t0;
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "reshard");
	lmt_json_str(&j, "source", o->src);
	lmt_json_str(&j, "output", out);
	lmt_json_u64(&j, "update", c.update);
	lmt_json_u64(&j, "from_world", (uint64_t)c.world);
	lmt_json_u64(&j, "world", (uint64_t)N);
	lmt_json_u64(&j, "tensors", (uint64_t)c.nt);
	lmt_json_u64(&j, "bytes", r.bytes);
	lmt_json_u64(&j, "loader_consumed", consumed);
	lmt_json_u64(&j, "peak_buffer_bytes", r.peak_buffer_bytes);
	lmt_json_str(&j, "manifest_sha256", lmt_sha256_hex(msha, hex));
	lmt_json_num(&j, "seconds", secs);
	put_record(&j);
	lmt_json_release(&j);
	info("'%s': update %llu, %d rank%s to %d, %d tensors, %.1f MB in %.2f s", out, (unsigned long long)c.update,
	     c.world, c.world == 1 ? "" : "s", N, c.nt, r.bytes / 1e6, secs);
	free(state);
	lmt_ckpt_close(&c);
	return 0;
}

/* ---- export ---- */

/* The tokenizer: -t, else the one the run recorded (the checkpoint's copy of the
 * run's configuration, then RUN/config.json), which must be the checkpoint's: 1;
 * 0 when none is recorded; -1 when the one recorded is not there (its path in used). */
static int find_tokenizer(const struct opts *o, const struct lmt_ckpt *c, struct lmt_tokenizer *tok, char *used,
			  size_t cap)
{
	struct lmt_err err = { 0 };
	const char *ts = json_string_value(lmt_ckpt_state(c, "tokenizer_sha256"));
	char cand[3][PATH_MAX];
	int nc = 0;
	if (o->tokenizer) {
		path_fmt(cand[nc++], sizeof cand[0], "%s", o->tokenizer);
	} else {
		/* recorded relative to where train ran, not to here */
		json_t *cfg = lmt_ckpt_state(c, "config");
		char rp[PATH_MAX];
		const char *t = json_string_value(json_object_get(json_object_get(cfg, "data"), "tokenizer"));
		if (t)
			path_fmt(cand[nc++], sizeof cand[0], "%s", lmt_recorded_path(cfg, t, 0, rp, sizeof rp));
		char run[PATH_MAX], rc[PATH_MAX];
		if (lmt_run_of_ckpt(o->src, run, sizeof run)) {
			path_fmt(rc, sizeof rc, "%s/config.json", run);
			json_t *r = json_load_file(rc, 0, NULL);
			t = json_string_value(json_object_get(json_object_get(r, "data"), "tokenizer"));
			if (t)
				t = lmt_recorded_path(r, t, 0, rp, sizeof rp);
			if (t && (!nc || strcmp(t, cand[0])))
				path_fmt(cand[nc++], sizeof cand[0], "%s", t);
			json_decref(r);
		}
	}
	for (int i = 0; i < nc; i++) {
		if (!o->tokenizer && access(cand[i], R_OK))
			continue;
		char hex[LMT_SHA256_HEX];
		if (lmt_tok_load(tok, cand[i], &err))
			die_err(&err);
		lmt_sha256_hex(tok->sha256, hex);
		if (!ts || strcmp(ts, hex))
			die("'%s' is not the checkpoint's tokenizer: sha256 %.16s..., '%s' was trained with %.16s...",
			    cand[i], hex, o->src, ts ? ts : "an unrecorded one");
		path_fmt(used, cap, "%s", cand[i]);
		return 1;
	}
	if (nc)
		path_fmt(used, cap, "%s", cand[0]);
	return nc ? -1 : 0;
}

static char export_staging[PATH_MAX];

static void cleanup_export(void)
{
	if (export_staging[0])
		lmt_remove_dir(export_staging);
}

static int export_dir(const struct opts *o)
{
	struct lmt_err err = { 0 };
	double t0 = lmt_now();
	char out[PATH_MAX], path[PATH_MAX], cfg[PATH_MAX], run[PATH_MAX], tokpath[PATH_MAX] = "";
	size_t ol = strlen(o->out);
	while (ol > 1 && o->out[ol - 1] == '/')
		ol--;
	path_fmt(out, sizeof out, "%.*s", (int)ol, o->out);
	const char *inputs[] = { o->src, o->tokenizer };
	if (lmt_path_check_output(out, "the export", inputs, o->tokenizer ? 2 : 1, &err))
		die_err(&err);
	if (lmt_run_of_ckpt(out, run, sizeof run))
		die("'%s' lies in the checkpoints of the run '%s': export into a directory of its own", out, run);
	int earlier;
	if (lmt_export_target(out, &earlier, &err))
		die_err(&err);
	/* the same by what the path is (a symlink to RUN/ckpt); an export elsewhere in
	 * a run makes this one of the run's writers */
	if (lmt_run_holding(out, run, sizeof run)) {
		char ckd[PATH_MAX];
		path_fmt(ckd, sizeof ckd, "%s/ckpt", run);
		if (lmt_run_contains(ckd, out))
			die("'%s' lies in the checkpoints of the run '%s': export into a directory of its own", out, run);
		tool_lock_run(run);
	}

	struct lmt_ckpt c;
	info("verifying '%s'", o->src);
	if (lmt_ckpt_open(&c, o->src, 1, &err))
		die_err(&err);
	struct lmt_tokenizer tok;
	int have_tok = find_tokenizer(o, &c, &tok, tokpath, sizeof tokpath);
	char why[PATH_MAX + 64];
	if (have_tok < 0)
		snprintf(why, sizeof why, "the tokenizer its run recorded, '%s', is not there", tokpath);
	else
		snprintf(why, sizeof why, "no tokenizer recorded for this checkpoint's run");
	if (have_tok <= 0 && o->export_fmt == EXPORT_LLMC)
		die("'%s': %s: give -t FILE (llm.c's export writes gpt2_tokenizer.bin)", o->src, why);
	if (have_tok <= 0)
		warn("'%s': %s (give -t FILE): no tokenizer.json, tokenizer_config.json, bos or eos in the export",
		     o->src, why);
	have_tok = have_tok > 0;

	if (lmt_export_stage(out, export_staging, sizeof export_staging, &err))
		die_err(&err);
	atexit(cleanup_export);
	tool_defer_signals();

	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "export");
	lmt_json_str(&j, "format", o->export_fmt == EXPORT_LLMC ? "llmc" : "safetensors");
	lmt_json_str(&j, "source", o->src);
	lmt_json_str(&j, "output", out);
	lmt_json_bool(&j, "replaced", earlier);
	lmt_json_u64(&j, "update", c.update);
	lmt_json_str(&j, "tokenizer", have_tok ? tokpath : NULL);
	if (o->export_fmt == EXPORT_LLMC) {
		path_fmt(path, sizeof path, "%s/model.bin", export_staging);
		if (lmt_export_llmc_model(&c, path, &err))
			die_err(&err);
		path_fmt(path, sizeof path, "%s/gpt2_tokenizer.bin", export_staging);
		if (lmt_export_llmc_tokenizer(&tok, path, &err))
			die_err(&err);
	} else {
		int64_t bos, eos;
		lmt_export_bos_eos(have_tok ? &tok : NULL, &bos, &eos);
		path_fmt(path, sizeof path, "%s/model.safetensors", export_staging);
		path_fmt(cfg, sizeof cfg, "%s/config.json", export_staging);
		struct lmt_st_opts so = { path, cfg, o->dtype, bos, eos, o->max_shard };
		struct lmt_st_result r;
		if (lmt_safetensors_export_gpt2(&c, &so, &r, &err))
			die_err(&err);
		if (r.overflow)
			warn("%llu finite values are beyond %s's range and became infinite", (unsigned long long)r.overflow,
			     lmt_st_dtype_torch(o->dtype));
		if (r.nan)
			warn("%llu values are NaN (written as NaN)", (unsigned long long)r.nan);
		const char *name = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
		if (lmt_export_hf_extras(export_staging, &c, have_tok ? &tok : NULL, bos, eos, o->dtype, name, &err))
			die_err(&err);
		lmt_json_str(&j, "dtype", lmt_st_dtype_name(o->dtype));
		lmt_json_u64(&j, "tensors", (uint64_t)r.tensors);
		lmt_json_u64(&j, "elements", r.elements);
		lmt_json_u64(&j, "shards", (uint64_t)r.shards);
		lmt_json_u64(&j, "max_shard_size", o->max_shard);
		lmt_json_u64(&j, "total_size", r.data_bytes);
		lmt_json_u64(&j, "overflow", r.overflow);
		lmt_json_u64(&j, "nan", r.nan);
		lmt_json_u64(&j, "peak_buffer_bytes", r.peak_buffer);
	}
	tool_check_interrupt();
	struct lmt_export_file *f;
	int nf;
	if (lmt_export_seal(export_staging, o->export_fmt == EXPORT_LLMC ? "llmc" : "safetensors", &c, &f, &nf, &err))
		die_err(&err);
	tool_check_interrupt();
	if (lmt_export_commit(export_staging, out, earlier, &err))
		die_err(&err);
	export_staging[0] = 0;
	uint64_t bytes = 0;
	char hex[LMT_SHA256_HEX];
	lmt_json_arr(&j, "files");
	for (int i = 0; i < nf; i++) {
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "path", f[i].name);
		lmt_json_u64(&j, "bytes", f[i].bytes);
		lmt_json_str(&j, "sha256", lmt_sha256_hex(f[i].sha256, hex));
		lmt_json_obj_end(&j);
		bytes += f[i].bytes;
	}
	lmt_json_arr_end(&j);
	lmt_json_u64(&j, "bytes", bytes);
	double secs = lmt_now() - t0;
	lmt_json_num(&j, "seconds", secs);
	put_record(&j);
	lmt_json_release(&j);
	info("'%s': %s export of update %llu, %d files, %.1f MB in %.2f s%s", out,
	     o->export_fmt == EXPORT_LLMC ? "llm.c" : "Hugging Face", (unsigned long long)c.update, nf, bytes / 1e6, secs,
	     earlier ? " (the earlier export replaced)" : "");
	free(f);
	if (have_tok)
		lmt_tok_release(&tok);
	lmt_ckpt_close(&c);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	tool_init("ckpt-reshard");
	int c;
	while ((c = getopt_long(argc, argv, "hVw:t:q", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case 'w': o.world = (int)opt_int("world", optarg, 1, 1 << 20); break;
		case OPT_EXPORT:
			if (!strcmp(optarg, "safetensors"))
				o.export_fmt = EXPORT_ST;
			else if (!strcmp(optarg, "llmc"))
				o.export_fmt = EXPORT_LLMC;
			else
				usage_error("option '--export': '%s' is not a format this tool writes (safetensors, llmc)",
					    optarg);
			break;
		case OPT_MAX_SHARD: {
			struct lmt_err err = { 0 };
			if (lmt_st_parse_size(optarg, &o.max_shard, &err))
				usage_error("option '--max-shard-size': %s", err.msg);
			o.shard_given = 1;
			break;
		}
		case OPT_DTYPE:
			if ((o.dtype = lmt_st_dtype_parse(optarg)) < 0)
				usage_error("option '--dtype': '%s' is not fp32, bf16 or fp16", optarg);
			o.dtype_given = 1;
			break;
		case 't': o.tokenizer = optarg; break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	if (!o.world && !o.export_fmt)
		usage_error("nothing to do: give --world N or --export safetensors|llmc");
	if (o.world && o.export_fmt)
		usage_error("--world and --export are separate runs: reshard, or export");
	if (o.world && (o.dtype_given || o.tokenizer || o.shard_given))
		usage_error("--dtype, --max-shard-size and --tokenizer apply to --export (a checkpoint keeps fp32 and has "
			    "no config)");
	if (o.export_fmt == EXPORT_LLMC && (o.dtype_given || o.shard_given))
		usage_error("--dtype and --max-shard-size apply to --export safetensors (llm.c's file is one, in fp32)");
	if (!o.shard_given)
		o.max_shard = DEFAULT_MAX_SHARD;
	if (argc - optind != 2)
		usage_error("give SRC (a checkpoint directory) and OUT%s",
			    argc - optind > 2 ? ", nothing more" : "");
	o.src = argv[optind];
	o.out = argv[optind + 1];
	if (!*o.out)
		usage_error("OUT is empty");
	return o.export_fmt ? export_dir(&o) : reshard(&o);
}
