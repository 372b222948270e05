/*
 * resumecfg.c: train's recorded options, and a resume's and a --config file's
 * use of them; see resumecfg.h.
 *
 * The code came out of the train tool, which printed and died where this returns:
 * the refusal, the warnings and the event details are its words, kept as they
 * were, so that train prints them unchanged.
 */
#include "ckpt/resumecfg.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/json.h"
#include "core/util.h"

enum { REFUSE = LMT_RESUMECFG_REFUSE, WARN = LMT_RESUMECFG_WARN, FREE = LMT_RESUMECFG_FREE };

const struct lmt_resumecfg_opt lmt_resumecfg_opts[] = {
	/* the dataset's identity is its manifest (checked against the checkpoint): its path may move */
	{ "data", "data", "dir", WARN, 1 }, { "tokenizer", "data", "tokenizer", WARN, 1 },
	{ "layers", "model", "layers", REFUSE, 0 }, { "heads", "model", "heads", REFUSE, 0 },
	{ "channels", "model", "channels", REFUSE, 0 }, { "context", "model", "context", REFUSE, 0 },
	{ "untie", "model", "untied", REFUSE, 0 }, { "init-llmc", "model", "init", REFUSE, 1 },
	{ "init-seed", "model", "init_seed", REFUSE, 0 }, { "export-llmc", "model", "export_llmc", FREE, 1 },
	{ "micro-batch", "optimization", "micro_batch", REFUSE, 0 }, { "accum", "optimization", "accum", REFUSE, 0 },
	{ "updates", "optimization", "updates", WARN, 0 }, { "lr", "optimization", "lr", WARN, 0 },
	{ "min-lr", "optimization", "min_lr_frac", WARN, 0 }, { "warmup", "optimization", "warmup", WARN, 0 },
	{ "schedule", "optimization", "schedule", WARN, 1 }, { "beta1", "optimization", "beta1", WARN, 0 },
	{ "beta2", "optimization", "beta2", WARN, 0 }, { "eps", "optimization", "eps", WARN, 0 },
	{ "weight-decay", "optimization", "weight_decay", WARN, 0 },
	{ "decay-embeddings", "optimization", "decay_embeddings", WARN, 0 }, { "clip", "optimization", "clip", WARN, 0 },
	{ "on-nonfinite", "optimization", "on_nonfinite", WARN, 1 }, { "seed", "optimization", "seed", REFUSE, 0 },
	{ "segment-mask", "optimization", "segment_mask", REFUSE, 0 },
	{ "doc-targets", "optimization", "doc_targets", REFUSE, 1 },
	{ "shuffle-window", "optimization", "shuffle_window", REFUSE, 0 },
	{ "eval-every", "eval", "every", WARN, 0 }, { "eval-seqs", "eval", "sequences", WARN, 0 },
	{ "sample-every", "eval", "sample_every", WARN, 0 }, { "sample-tokens", "eval", "sample_tokens", WARN, 0 },
	{ "temperature", "eval", "temperature", WARN, 0 }, { "top-k", "eval", "top_k", WARN, 0 },
	{ "prompt", "eval", "prompt", WARN, 1 }, { "peak-flops", NULL, "peak_flops", FREE, 0 },
	{ "ckpt-every", "checkpoints", "every", WARN, 0 }, { "ckpt-minutes", "checkpoints", "minutes", WARN, 0 },
	{ "keep", "checkpoints", "keep", WARN, 0 }, { "keep-every", "checkpoints", "keep_every", WARN, 0 },
	{ "ckpt-sync", "checkpoints", "sync", WARN, 0 },
	/* master weights and moments are fp32: a resume may change the precision */
	{ "precision", "optimization", "precision", WARN, 1 },
	{ "loss-scale", "optimization", "loss_scale", WARN, 0 },
	{ "loss-scale-window", "optimization", "loss_scale_window", WARN, 0 },
};

const size_t lmt_resumecfg_nopts = LMT_ARRAY_SIZE(lmt_resumecfg_opts);

_Static_assert(LMT_ARRAY_SIZE(lmt_resumecfg_opts) <= LMT_RESUMECFG_MAX, "LMT_RESUMECFG_MAX holds the table");

const struct lmt_resumecfg_opt *lmt_resumecfg_find(const char *name)
{
	for (size_t i = 0; i < LMT_ARRAY_SIZE(lmt_resumecfg_opts); i++)
		if (!strcmp(lmt_resumecfg_opts[i].opt, name))
			return &lmt_resumecfg_opts[i];
	return NULL;
}

const char *lmt_resumecfg_value(json_t *cfg, const struct lmt_resumecfg_opt *r, char *buf, size_t cap)
{
	json_t *v = json_object_get(r->obj ? json_object_get(cfg, r->obj) : cfg, r->key);
	json_t *model = json_object_get(cfg, "model");
	const char *init = json_string_value(json_object_get(model, "init"));
	const char *peak_source = json_string_value(json_object_get(cfg, "peak_source"));
	if (!strcmp(r->opt, "peak-flops") && (!peak_source || strcmp(peak_source, "--peak-flops")))
		return NULL;
	if (r->obj && !strcmp(r->obj, "model") && init && strcmp(init, "gpt2-normal") && strcmp(r->opt, "init-llmc") &&
	    strcmp(r->opt, "export-llmc"))
		return NULL;
	if (json_is_string(v))
		return strcmp(r->opt, "init-llmc") || strcmp(json_string_value(v), "gpt2-normal") ? json_string_value(v)
												    : NULL;
	if (json_is_integer(v))
		snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		lmt_fmt_double(json_real_value(v), buf); /* as config.json writes it */
	else if (json_is_true(v))
		snprintf(buf, cap, "true");
	else
		return NULL;
	return buf;
}

const char *lmt_recorded_path(json_t *cfg, const char *recorded, int output, char *buf, size_t cap)
{
	const char *cwd = json_string_value(json_object_get(cfg, "cwd"));
	if (!recorded || !*recorded || recorded[0] == '/' || !cwd || cwd[0] != '/' ||
	    (size_t)snprintf(buf, cap, "%s/%s", cwd, recorded) >= cap)
		return recorded;
	return access(output ? cwd : buf, F_OK) == 0 ? buf : recorded;
}

/* 1 for an option whose value is an input path, 2 an output path, 0 neither */
static int path_opt(const struct lmt_resumecfg_opt *r)
{
	if (!strcmp(r->opt, "data") || !strcmp(r->opt, "tokenizer") || !strcmp(r->opt, "init-llmc"))
		return 1;
	return !strcmp(r->opt, "export-llmc") ? 2 : 0;
}

/* Whether the run recorded cwd is the current directory (the same directory,
 * however spelled). */
static int in_recorded_cwd(json_t *cfg)
{
	const char *cwd = json_string_value(json_object_get(cfg, "cwd"));
	char here[PATH_MAX], there[PATH_MAX];
	return !cwd || !getcwd(here, sizeof here) || !realpath(cwd, there) || !strcmp(here, there);
}

/* A recorded option's value as a resume or a --config file takes it: as recorded
 * where train ran here (what it was before runs recorded their directory), else a
 * path resolved against the directory the run was trained in (lmt_recorded_path) */
static const char *taken_value(json_t *cfg, const struct lmt_resumecfg_opt *r, const char *v, char *buf, size_t cap)
{
	int kind = path_opt(r);
	return kind && !in_recorded_cwd(cfg) ? lmt_recorded_path(cfg, v, kind == 2, buf, cap) : v;
}

void lmt_resumecfg_release(struct lmt_resumecfg_result *res)
{
	for (size_t i = 0; i < res->n; i++) {
		free(res->items[i].value);
		free(res->items[i].detail);
		free(res->items[i].warning);
	}
	free(res->items);
	res->items = NULL;
	res->n = 0;
	lmt_strbuf_release(&res->refused);
}

/* res empty, with room for an item per option (each option gives at most one). */
static int result_init(struct lmt_resumecfg_result *res, struct lmt_err *err)
{
	res->n = 0;
	lmt_strbuf_init(&res->refused);
	res->items = calloc(LMT_ARRAY_SIZE(lmt_resumecfg_opts), sizeof *res->items);
	return res->items ? 0 : lmt_err_set(err, LMT_ENOMEM, "out of memory");
}

static struct lmt_resumecfg_item *add_item(struct lmt_resumecfg_result *res, const char *opt)
{
	struct lmt_resumecfg_item *it = &res->items[res->n++];
	it->opt = opt;
	return it;
}

/* s copied; a failed copy is counted in *oom, for one ENOMEM at the end. */
static char *dup_str(const char *s, int *oom)
{
	char *d = strdup(s);
	*oom |= !d;
	return d;
}

/* The value given for opt: the last pair of it, or NULL. */
static const char *given_value(const struct lmt_resumecfg_pair *given, size_t ngiven, const char *opt)
{
	const char *v = NULL;
	for (size_t i = 0; i < ngiven; i++)
		if (!strcmp(given[i].opt, opt))
			v = given[i].value;
	return v;
}

/* a, recorded in cfg, and b, given here, name the same existing file */
static int same_file(json_t *cfg, const char *a, const char *b)
{
	char buf[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];
	const char *pa = lmt_recorded_path(cfg, a, 0, buf, sizeof buf);
	return realpath(pa, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

static int same_value(json_t *cfg, const struct lmt_resumecfg_opt *r, const char *a, const char *b,
		      lmt_resumecfg_same_fn same, void *ctx)
{
	if (!a || !b)
		return a == b;
	if (r->text) /* a path: the same file, however spelled (a resume from elsewhere records it whole) */
		return !strcmp(a, b) || (path_opt(r) == 1 && same_file(cfg, a, b));
	return same(ctx, r->opt, a, b);
}

int lmt_resumecfg_adopt(json_t *cfg, const char *ckdir, uint64_t update, const struct lmt_resumecfg_pair *given,
			size_t ngiven, lmt_resumecfg_same_fn same, void *ctx, struct lmt_resumecfg_result *res,
			struct lmt_err *err)
{
	int oom = 0;
	if (result_init(res, err))
		return LMT_ENOMEM;
	if (!json_is_object(cfg))
		return 0; /* a checkpoint of a run without -o records none */
	/* the refusals first: a refused resume changes nothing, records nothing */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < LMT_ARRAY_SIZE(lmt_resumecfg_opts); i++) {
			const struct lmt_resumecfg_opt *r = &lmt_resumecfg_opts[i];
			char buf[64], detail[256];
			const char *v = lmt_resumecfg_value(cfg, r, buf, sizeof buf);
			const char *g = given_value(given, ngiven, r->opt);
			if (pass && !g && v) {
				char path[PATH_MAX];
				add_item(res, r->opt)->value = dup_str(taken_value(cfg, r, v, path, sizeof path), &oom);
			}
			if (!g || r->change == FREE || (r->change == REFUSE) == pass || same_value(cfg, r, v, g, same, ctx))
				continue;
			if (!pass) {
				lmt_strbuf_printf(&res->refused, "%s--%s %s (the run: %s)", res->refused.len ? ", " : "",
						  r->opt, g, v ? v : "not set");
				continue;
			}
			snprintf(detail, sizeof detail, "--%s %.100s (the run recorded %.100s)", r->opt, g, v ? v : "none");
			struct lmt_resumecfg_item *it = add_item(res, r->opt);
			it->detail = dup_str(detail, &oom);
			struct lmt_strbuf w;
			lmt_strbuf_init(&w);
			lmt_strbuf_printf(&w, "%s: applied from update %llu on", detail, (unsigned long long)update);
			it->warning = lmt_strbuf_detach(&w);
			oom |= !it->warning;
		}
		if (res->refused.len) {
			struct lmt_strbuf m;
			lmt_strbuf_init(&m);
			lmt_strbuf_printf(&m,
					  "'%s': a resume continues the run as it was; these options differ from what it "
					  "recorded: %s (leave them out, or start a new run)",
					  ckdir, res->refused.buf);
			lmt_strbuf_release(&res->refused);
			res->refused = m;
			return m.oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory")
				     : lmt_err_set(err, LMT_EINVAL, "%s", m.buf);
		}
	}
	return oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory") : 0;
}

static int read_into(const char *path, struct lmt_resumecfg_result *res, struct lmt_err *err)
{
	json_error_t je;
	int oom = 0;
	if (result_init(res, err))
		return LMT_ENOMEM;
	/* the bytes first: json_load_file ends the text at a NUL, and what follows it
	 * would be silently lost, as it once was for the 'key = value' form */
	char *text;
	size_t n;
	int rc = lmt_read_file(path, &text, &n, err);
	if (rc)
		return rc;
	const char *nul = memchr(text, 0, n);
	if (nul) {
		int line = 1;
		for (const char *q = text; q < nul; q++)
			line += *q == '\n';
		free(text);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: a NUL byte (a config file is UTF-8 text)", path, line);
	}
	json_t *cfg = json_loadb(text, n, 0, &je);
	free(text);
	if (!json_is_object(cfg)) {
		rc = lmt_err_set(err, LMT_EINVAL, "'%s': line %d: %s", path, je.line, cfg ? "not a JSON object" : je.text);
		json_decref(cfg);
		return rc;
	}
	/* only a run's own config.json: any other object would set nothing, silently
	 * (its keys are not where a run records its options) */
	const char *tool = json_string_value(json_object_get(cfg, "tool"));
	if (!tool || strcmp(tool, "train")) {
		json_decref(cfg);
		return lmt_err_set(err, LMT_EINVAL,
				   "'%s': JSON, but not a run's config.json (its \"tool\" is not \"train\"): write the "
				   "options as 'key = value' lines",
				   path);
	}
	for (size_t i = 0; i < LMT_ARRAY_SIZE(lmt_resumecfg_opts); i++) {
		const struct lmt_resumecfg_opt *r = &lmt_resumecfg_opts[i];
		char buf[64], where[600];
		const char *v = lmt_resumecfg_value(cfg, r, buf, sizeof buf);
		if (!v)
			continue;
		snprintf(where, sizeof where, "'%s': %s.%s", path, r->obj ? r->obj : "", r->key);
		struct lmt_resumecfg_item *it = add_item(res, r->opt);
		char rp[PATH_MAX];
		it->value = dup_str(taken_value(cfg, r, v, rp, sizeof rp), &oom);
		it->detail = dup_str(where, &oom);
	}
	json_decref(cfg);
	return oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory") : 0;
}

int lmt_resumecfg_read(const char *path, struct lmt_resumecfg_result *res, struct lmt_err *err)
{
	int rc = read_into(path, res, err);
	if (rc) /* nothing held on failure */
		lmt_resumecfg_release(res);
	return rc;
}
