/*
 * runcard.c: the run card (see runcard.h): its sources, the record built from
 * them with a provenance per value, and its YAML, Markdown and SVG renderings.
 *
 * The builder is written as a long list of take()/say() calls, one per field,
 * in the order of runcard.yaml, so that the code reads like the card. An error
 * (a field that cannot be filled, an allocation that fails) is therefore sticky
 * instead of returned by each call: the first one is kept in the card, every
 * later write is harmless, and lmt_runcard_new reports it once at the end, as
 * lmt_strbuf does for its writes.
 */
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/resumecfg.h"
#include "core/atomicfile.h"
#include "core/digest.h"
#include "core/jsonptr.h"
#include "core/strbuf.h"
#include "core/util.h"
#include "core/version.h"
#include "model/ledger.h"
#include "plan/runread.h"
#include "report/runcard.h"
#include "report/runview.h"
#include "report/svg.h"
#include "report/yaml.h"

/* ---- sources: the files the card is read from ---- */

enum { KIND_JSON, KIND_JSONL, KIND_BLOB };

struct src {
	const char *label;
	char *path;          /* NULL: unknown (why says so) */
	const char *option;  /* the option that names an optional source */
	int kind;
	int loaded, ok, used;
	char why[4096];
	char *raw;
	size_t nraw;
	json_t *doc;         /* KIND_JSON */
	json_t **line;       /* KIND_JSONL: each line parsed, NULL where it is not JSON */
	size_t nline;
	uint8_t sha[LMT_SHA256_LEN];
};

enum { S_CONFIG, S_PARAMS, S_METRICS, S_EVENTS, S_CKPT, S_DATASET, S_TOKENIZER, S_DEDUP, S_CORPUS, S_EVAL0 };

struct lmt_runcard {
	struct lmt_runcard_opts o;
	struct src *src;
	int nsrc;
	json_t *root;        /* the record, in the order of runcard.yaml */
	json_t *prov;        /* "path.to[0].field" -> provenance */
	json_t *missing;     /* [{field, why}] */
	char why[4096];
	char *ckpt_dir;      /* the newest checkpoint that opens, or NULL */
	int resolved_dataset, resolved_tokenizer;
	glob_t evals;        /* the .jsonl files of RUN/eval, when no eval file was given */
	struct lmt_err err;  /* the first failure (sticky: see the top) */
};

/* The first failure is the one reported; the ones it causes are not. */
static void fail(struct lmt_runcard *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(struct lmt_runcard *c, int code, const char *fmt, ...)
{
	if (c->err.code)
		return;
	va_list ap;
	va_start(ap, fmt);
	char msg[sizeof c->err.msg];
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	lmt_err_set(&c->err, code, "%s", msg);
}

static void oom(struct lmt_runcard *c)
{
	fail(c, LMT_ENOMEM, "out of memory");
}

/* A new string (the caller frees it), or NULL after an allocation failure,
 * which fails the card. */
static char *str(struct lmt_runcard *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *str(struct lmt_runcard *c, const char *fmt, ...)
{
	struct lmt_strbuf b = { 0 };
	va_list ap;
	va_start(ap, fmt);
	lmt_strbuf_vprintf(&b, fmt, ap);
	va_end(ap);
	char *r = lmt_strbuf_detach(&b);
	if (!r)
		oom(c);
	return r;
}

static char *dup(struct lmt_runcard *c, const char *s)
{
	return str(c, "%s", s);
}

/* For a string that an allocation failure may have left NULL. */
static const char *nz(const char *s)
{
	return s ? s : "";
}

static int load(struct lmt_runcard *c, int i)
{
	struct src *s = &c->src[i];
	if (s->loaded)
		return s->ok;
	s->loaded = 1;
	if (!s->path)
		return 0; /* why was set when the path was looked for */
	struct stat st;
	if (stat(s->path, &st)) {
		int e = errno;
		if (e == ENOENT)
			snprintf(s->why, sizeof s->why, "'%s' is missing", s->path);
		else
			snprintf(s->why, sizeof s->why, "'%s': %s", s->path, strerror(e));
		return 0;
	}
	struct lmt_err err = { 0 };
	if (!S_ISREG(st.st_mode) || lmt_read_file(s->path, &s->raw, &s->nraw, &err)) {
		snprintf(s->why, sizeof s->why, "'%s' cannot be read%s%s", s->path, err.msg[0] ? ": " : "",
			 err.msg[0] ? err.msg : " (not a file)");
		return 0;
	}
	lmt_sha256(s->raw, s->nraw, s->sha);
	if (s->kind == KIND_JSON) {
		json_error_t je;
		s->doc = json_loadb(s->raw, s->nraw, 0, &je);
		if (!s->doc) {
			snprintf(s->why, sizeof s->why, "'%s' is not JSON: line %d: %s", s->path, je.line, je.text);
			return 0;
		}
	} else if (s->kind == KIND_JSONL) {
		size_t cap = 0;
		char *p = s->raw, *end = s->raw + s->nraw;
		while (p < end) {
			char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
			if (LMT_GROW(s->line, cap, s->nline + 1)) {
				oom(c);
				return 0;
			}
			/* a line cut short by a killed process is not JSON: skipped, and said,
			 * as is a damaged line anywhere (the card names each value's line) */
			s->line[s->nline++] = json_loadb(p, n, 0, NULL);
			if (!s->line[s->nline - 1] && n && c->o.warn) {
				char *w = str(c, nl ? "'%s': line %zu is not JSON: left out"
						    : "'%s': " LMT_RUNVIEW_CUT,
					      s->path, s->nline);
				if (w)
					c->o.warn(c->o.ctx, w);
				free(w);
			}
			p += n + 1;
		}
	}
	s->ok = 1;
	return 1;
}

/* Where a value comes from: a JSON file (line 0), or a line of a JSONL file
 * (line 0 there: the record was not found; what describes it). */
struct rec {
	int s;
	size_t line;
	const char *what;
};

static struct rec whole(int s)
{
	struct rec r = { s, 0, NULL };
	return r;
}

static const char *ev(json_t *o)
{
	return json_string_value(json_object_get(o, "event"));
}

/* The last record of a JSONL source whose "event" is event. */
static struct rec find_rec(struct lmt_runcard *c, int s, const char *event, const char *what)
{
	struct rec r = { s, 0, what };
	if (!load(c, s))
		return r;
	struct src *S = &c->src[s];
	for (size_t i = S->nline; i-- > 0;) {
		const char *e = S->line[i] ? ev(S->line[i]) : NULL;
		if (e && !strcmp(e, event)) {
			r.line = i + 1;
			break;
		}
	}
	return r;
}

/* The value at ptr of r, borrowed; NULL with c->why set when it cannot be had. */
static json_t *lookup(struct lmt_runcard *c, struct rec r, const char *ptr)
{
	struct src *s = &c->src[r.s];
	if (!load(c, r.s)) {
		snprintf(c->why, sizeof c->why, "%s", s->why);
		return NULL;
	}
	json_t *base = s->doc;
	if (s->kind == KIND_JSONL) {
		if (!r.line) {
			snprintf(c->why, sizeof c->why, "'%s' has no %s", s->path, r.what ? r.what : "such record");
			return NULL;
		}
		base = s->line[r.line - 1];
	}
	json_t *v = lmt_jsonptr_get(base, ptr);
	if (!v) {
		if (r.line)
			snprintf(c->why, sizeof c->why, "'%s' line %zu has no %s", s->path, r.line, ptr);
		else
			snprintf(c->why, sizeof c->why, "'%s' has no %s", s->path, ptr);
		return NULL;
	}
	s->used = 1;
	return v;
}

/* "label#ptr" or "label:N#ptr" */
static char *ref(struct lmt_runcard *c, struct rec r, const char *ptr)
{
	if (r.line)
		return str(c, "%s:%zu#%s", c->src[r.s].label, r.line, ptr);
	return str(c, "%s#%s", c->src[r.s].label, ptr);
}

static char *child_path(struct lmt_runcard *c, const char *opath, const char *key)
{
	return opath[0] ? str(c, "%s.%s", opath, key) : dup(c, key);
}

/* v (a new reference) under key in object o, with its provenance (none when
 * prov is NULL); 0, or -1 (and the card fails) when it cannot be stored. */
static int put(struct lmt_runcard *c, json_t *o, const char *opath, const char *key, json_t *v, const char *prov)
{
	if (!v || json_object_set_new(o, key, v)) {
		oom(c);
		return -1;
	}
	if (prov) {
		char *p = child_path(c, opath, key);
		if (!p || json_object_set_new(c->prov, p, json_string(prov)))
			oom(c);
		free(p);
	}
	return 0;
}

/* A field that cannot be filled: the card fails, unless allow_missing. */
static void unfilled(struct lmt_runcard *c, json_t *o, const char *opath, const char *key, const char *why)
{
	char *p = why ? child_path(c, opath, key) : NULL;
	if (!p)
		return; /* out of memory, and the card failed */
	if (!c->o.allow_missing) {
		fail(c, LMT_ENOTFOUND, "cannot fill %s: %s", p, why);
		free(p);
		return;
	}
	json_t *m = json_object();
	if (!m || json_object_set_new(m, "field", json_string(p)) || json_object_set_new(m, "why", json_string(why)) ||
	    json_array_append(c->missing, m))
		oom(c);
	json_decref(m);
	char *pr = str(c, "(missing: %s)", why);
	if (pr)
		put(c, o, opath, key, json_null(), pr);
	free(pr);
	free(p);
}

/* The value at ptr of r, copied under key; returns it (borrowed from the card)
 * or NULL when it cannot be filled. */
static json_t *take(struct lmt_runcard *c, json_t *o, const char *opath, const char *key, struct rec r, const char *ptr)
{
	json_t *v = lookup(c, r, ptr);
	if (!v) {
		unfilled(c, o, opath, key, c->why);
		return NULL;
	}
	char *p = ref(c, r, ptr);
	json_t *copy = json_deep_copy(v);
	int bad = !p || put(c, o, opath, key, copy, p);
	free(p);
	return bad ? NULL : copy;
}

/* A value the tool states itself (prose provenance). */
static void say(struct lmt_runcard *c, json_t *o, const char *opath, const char *key, json_t *v, const char *prose)
{
	char *p = prose ? str(c, "(%s)", prose) : NULL;
	if (p)
		put(c, o, opath, key, v, p);
	else
		json_decref(v);
	free(p);
}

/* A new object under key of parent (appended, when parent is an array);
 * borrowed, or NULL (and the card fails). */
static json_t *obj(struct lmt_runcard *c, json_t *parent, const char *key)
{
	json_t *o = json_object();
	if (json_is_array(parent) ? json_array_append_new(parent, o) : json_object_set_new(parent, key, o)) {
		oom(c);
		return NULL;
	}
	return o;
}

static json_t *arr(struct lmt_runcard *c, json_t *parent, const char *key)
{
	json_t *a = json_array();
	if (json_object_set_new(parent, key, a)) {
		oom(c);
		return NULL;
	}
	return a;
}

static double num(json_t *v)
{
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* ---- finding the run's files ---- */

static void src_path(struct lmt_runcard *c, int i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void src_path(struct lmt_runcard *c, int i, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&c->src[i].path, fmt, ap) < 0) {
		c->src[i].path = NULL;
		oom(c);
	}
	va_end(ap);
}

/* The newest checkpoint whose manifest reads (not verified here: --release
 * verifies the one it exports). */
static void find_checkpoint(struct lmt_runcard *c)
{
	struct lmt_err err = { 0 };
	char **names;
	uint64_t *ups;
	int n;
	if (lmt_ckpt_list(c->o.run, &names, &ups, &n, &err)) {
		if (!c->err.code)
			c->err = err;
		return;
	}
	for (int i = n - 1; i >= 0 && !c->ckpt_dir; i--) {
		char *dir = str(c, "%s/ckpt/%s", c->o.run, names[i]);
		if (!dir)
			break;
		struct lmt_ckpt k;
		struct lmt_err e2 = { 0 };
		if (lmt_ckpt_open(&k, dir, 0, &e2) == 0) {
			c->ckpt_dir = dir;
			lmt_ckpt_close(&k);
		} else {
			if (c->o.warn) {
				char *w = str(c, "skipping checkpoint '%s': %s", dir, e2.msg);
				if (w)
					c->o.warn(c->o.ctx, w);
				free(w);
			}
			free(dir);
		}
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ups);
	if (c->ckpt_dir)
		src_path(c, S_CKPT, "%s/manifest.json", c->ckpt_dir);
	else
		snprintf(c->src[S_CKPT].why, sizeof c->src[S_CKPT].why, "'%s/ckpt' holds no checkpoint that opens",
			 c->o.run);
}

/* The dataset manifest and the tokenizer: named by options or config.json, and
 * checked to be the run's by their SHA-256. which: S_DATASET or S_TOKENIZER;
 * given: the option's path (the dataset directory, or the tokenizer file). */
static void find_input(struct lmt_runcard *c, int which, const char *given, const char *path_ptr, const char *sha_ptr,
		       const char *unknown, const char *what)
{
	struct src *d = &c->src[which];
	const char *fmt = which == S_DATASET ? "%s/manifest.json" : "%s";
	if (given) {
		src_path(c, which, fmt, given);
	} else {
		json_t *dir = lookup(c, whole(S_CONFIG), path_ptr);
		if (!json_is_string(dir)) {
			if (dir)
				snprintf(d->why, sizeof d->why, "%s", unknown);
			else
				snprintf(d->why, sizeof d->why, "the %s is unknown: %.3900s", what, c->why);
			return;
		}
		char rp[PATH_MAX]; /* relative to where train ran, not to here */
		src_path(c, which, fmt, lmt_recorded_path(c->src[S_CONFIG].doc, json_string_value(dir), 0, rp, sizeof rp));
	}
	if (!load(c, which))
		return;
	json_t *want = lookup(c, whole(S_CONFIG), sha_ptr);
	char hex[LMT_SHA256_HEX];
	lmt_sha256_hex(d->sha, hex);
	if (json_is_string(want) && strcmp(json_string_value(want), hex))
		fail(c, LMT_ECHECKSUM, "'%s' is not the run's %s: its SHA-256 is %.16s..., config.json records %.16s...",
		     d->path, what, hex, json_string_value(want));
}

static void find_dataset(struct lmt_runcard *c)
{
	if (c->resolved_dataset)
		return;
	c->resolved_dataset = 1;
	find_input(c, S_DATASET, c->o.data, "/data/dir", "/data/manifest_sha256",
		   "the dataset is unknown: config.json's data.dir is not a string", "dataset manifest");
}

static void find_tokenizer(struct lmt_runcard *c)
{
	if (c->resolved_tokenizer)
		return;
	c->resolved_tokenizer = 1;
	find_input(c, S_TOKENIZER, c->o.tokenizer, "/data/tokenizer", "/data/tokenizer_sha256",
		   "the tokenizer is unknown: config.json's data.tokenizer is null (train ran without -t); give -t",
		   "tokenizer");
}

/* ---- the record ---- */

/* Copy fields of the same names: "k" from ptr "/base/k". */
static void take_all(struct lmt_runcard *c, json_t *o, const char *opath, struct rec r, const char *base,
		     const char *const *keys)
{
	for (const char *const *k = keys; *k; k++) {
		char ptr[256];
		snprintf(ptr, sizeof ptr, "%s/%s", base, *k);
		take(c, o, opath, *k, r, ptr);
	}
}

static void sanitize_name(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	for (const char *p = in; *p && n + 1 < cap && n < 40; p++) {
		char ch = *p;
		int okc = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
			  ch == '_' || ch == '-';
		out[n++] = okc ? ch : '_';
	}
	out[n] = 0;
	if (!n || !strcmp(out, ".") || !strcmp(out, ".."))
		snprintf(out, cap, "run");
}

static void card_ids(struct lmt_runcard *c, json_t *R)
{
	say(c, R, "", "schema", json_string("lmt-runcard"), "runcard");
	say(c, R, "", "schema_version", json_integer(1), "runcard");

	/* run_id: the directory's name and a hash of the resolved configuration and
	 * the first event, so that the same run files give the same id */
	char real[PATH_MAX], name[64];
	const char *base = c->o.run;
	if (realpath(c->o.run, real)) {
		char *sl = strrchr(real, '/');
		base = sl && sl[1] ? sl + 1 : real;
	}
	sanitize_name(base, name, sizeof name);
	int ok = load(c, S_CONFIG), oke = ok && load(c, S_EVENTS);
	if (!oke) {
		unfilled(c, R, "", "run_id", ok ? c->src[S_EVENTS].why : c->src[S_CONFIG].why);
	} else {
		struct src *e = &c->src[S_EVENTS];
		char *nl = memchr(e->raw, '\n', e->nraw);
		size_t n1 = nl ? (size_t)(nl - e->raw) + 1 : e->nraw;
		struct lmt_sha256 h;
		uint8_t d[LMT_SHA256_LEN];
		char hex[LMT_SHA256_HEX];
		if (lmt_sha256_init(&h)) {
			oom(c);
			return;
		}
		lmt_sha256_update(&h, c->src[S_CONFIG].raw, c->src[S_CONFIG].nraw);
		lmt_sha256_update(&h, e->raw, n1);
		lmt_sha256_final(&h, d);
		lmt_sha256_hex(d, hex);
		char *id = str(c, "%s-%.12s", name, hex);
		say(c, R, "", "run_id", json_string(id),
		    "the run directory's name, '-', and the first 12 hex digits of the SHA-256 of config's bytes "
		    "followed by events line 1 with its newline");
		free(id);
		c->src[S_CONFIG].used = c->src[S_EVENTS].used = 1;
	}
	say(c, R, "", "run_dir", json_string(c->o.run), "the RUN operand");
	take(c, R, "", "status", find_rec(c, S_METRICS, "summary", "\"summary\" record"), "/status");
	take(c, R, "", "code_revision", whole(S_CONFIG), "/revision");
	take(c, R, "", "code_dirty", whole(S_CKPT), "/state/code/dirty");
	take(c, R, "", "library_version", whole(S_CONFIG), "/tool_version");
	take(c, R, "", "backend", whole(S_CONFIG), "/backend");
	take(c, R, "", "dataset_manifest_sha256", whole(S_CONFIG), "/data/manifest_sha256");
	take(c, R, "", "tokenizer_sha256", whole(S_CONFIG), "/data/tokenizer_sha256");
}

static void card_model(struct lmt_runcard *c, json_t *R)
{
	json_t *m = obj(c, R, "model");
	say(c, m, "model", "architecture", json_string("gpt2"), "runcard: the one architecture train builds");
	static const char *const keys[] = { "layers", "heads", "channels", "context", "vocab", "vocab_padded",
					    "untied", "init", "init_seed", NULL };
	take_all(c, m, "model", whole(S_CONFIG), "/model", keys);
	take(c, m, "model", "parameters", whole(S_PARAMS), "/total");
	take(c, m, "model", "parameters_embedding", whole(S_PARAMS), "/embedding");
	take(c, m, "model", "parameters_matrix", whole(S_PARAMS), "/matrix");
	take(c, m, "model", "parameters_bias", whole(S_PARAMS), "/bias");
	take(c, m, "model", "parameters_norm", whole(S_PARAMS), "/norm");
	take(c, m, "model", "parameters_vocab_padding", whole(S_PARAMS), "/vocab_padding");
	take(c, m, "model", "flops_per_token", whole(S_PARAMS), "/flops_per_token");
}

static void card_optimization(struct lmt_runcard *c, json_t *R)
{
	json_t *o = obj(c, R, "optimization");
	say(c, o, "optimization", "optimizer", json_string("adamw"), "runcard: the one optimizer train has");
	static const char *const k1[] = { "lr", "min_lr_frac", "warmup", "schedule", "beta1", "beta2", "eps",
					  "weight_decay", "decay_embeddings", "clip", "on_nonfinite", "micro_batch",
					  "accum", "global_batch_sequences", NULL };
	take_all(c, o, "optimization", whole(S_CONFIG), "/optimization", k1);
	/* every position of the batch, padding included: valid targets can be fewer
	 * (each update record's "tokens") */
	take(c, o, "optimization", "global_batch_tokens", whole(S_CONFIG), "/optimization/global_batch_positions");
	take(c, o, "optimization", "seq_len", whole(S_CONFIG), "/data/seq_len");
	take(c, o, "optimization", "updates_planned", whole(S_CONFIG), "/optimization/updates");
	static const char *const k2[] = { "seed", "shuffle_window", "segment_mask", "doc_targets", "precision", NULL };
	take_all(c, o, "optimization", whole(S_CONFIG), "/optimization", k2);
}

static void card_hardware(struct lmt_runcard *c, json_t *R)
{
	json_t *h = obj(c, R, "hardware");
	static const char *const k[] = { "host", "cpu", "cpus_online", "memory_bytes", "accelerator", "devices", NULL };
	take_all(c, h, "hardware", whole(S_CONFIG), "/hardware", k);
	take(c, h, "hardware", "threads", whole(S_CONFIG), "/threads");
	take(c, h, "hardware", "peak_flops", whole(S_CONFIG), "/peak_flops");
	take(c, h, "hardware", "peak_source", whole(S_CONFIG), "/peak_source");
	json_t *t = obj(c, R, "topology");
	static const char *const kt[] = { "world", "nodes", "ranks_per_node", "threads_per_rank", "communicator", NULL };
	take_all(c, t, "topology", whole(S_CONFIG), "/topology", kt);
}

static void card_clocks(struct lmt_runcard *c, json_t *R, struct rec U, struct rec S)
{
	json_t *k = obj(c, R, "clocks");
	take(c, k, "clocks", "wall_s", U, "/clocks/wall_s");
	take(c, k, "clocks", "device_s", U, "/clocks/device_s");
	take(c, k, "clocks", "updates", U, "/clocks/updates");
	take(c, k, "clocks", "tokens", U, "/clocks/tokens");
	take(c, k, "clocks", "wall_s_total", S, "/wall_s_total");
	take(c, k, "clocks", "wall_s_last_process", S, "/wall_s");

	json_t *cost = obj(c, R, "cost");
	json_t *ds = lookup(c, U, "/clocks/device_s");
	if (!ds) {
		unfilled(c, cost, "cost", "device_hours", c->why);
	} else {
		char *r = ref(c, U, "/clocks/device_s"), *p = str(c, "%s / 3600", nz(r));
		put(c, cost, "cost", "device_hours", json_real(num(ds) / 3600), p);
		if (c->o.usd_per_device_hour > 0) {
			/* an expression, as every comment not in parentheses is (runcard(1)) */
			char *q = str(c, "%s / 3600 * %.17g", nz(r), c->o.usd_per_device_hour);
			put(c, cost, "cost", "usd_per_device_hour", json_real(c->o.usd_per_device_hour),
			    "(given: --usd-per-device-hour)");
			put(c, cost, "cost", "usd", json_real(num(ds) / 3600 * c->o.usd_per_device_hour), q);
			free(q);
		}
		free(r);
		free(p);
	}
	json_t *acc = lookup(c, whole(S_CONFIG), "/hardware/accelerator");
	if (json_is_string(acc) && strcmp(json_string_value(acc), "none"))
		take(c, cost, "cost", "device", whole(S_CONFIG), "/hardware/accelerator");
	else if (acc)
		take(c, cost, "cost", "device", whole(S_CONFIG), "/hardware/cpu");
	else
		unfilled(c, cost, "cost", "device", c->why);
	take(c, cost, "cost", "devices", whole(S_CONFIG), "/topology/world");
	take(c, cost, "cost", "threads_per_device", whole(S_CONFIG), "/topology/threads_per_rank");
}

static void card_data(struct lmt_runcard *c, json_t *R, struct rec U)
{
	find_dataset(c);
	json_t *d = obj(c, R, "data");
	take(c, d, "data", "dir", whole(S_CONFIG), "/data/dir");
	take(c, d, "data", "seq_len", whole(S_DATASET), "/seq_len");
	take(c, d, "data", "input_documents", whole(S_DATASET), "/input/documents");
	take(c, d, "data", "input_tokens", whole(S_DATASET), "/input/tokens");
	take(c, d, "data", "input_text_bytes", whole(S_DATASET), "/input/text_bytes");
	take(c, d, "data", "split_rule", whole(S_DATASET), "/split/rule");
	json_t *sp = obj(c, d, "splits");
	static const char *const names[] = { "train", "val", "test" };
	for (size_t i = 0; i < 3; i++) {
		char path[32], ptr[64];
		snprintf(path, sizeof path, "data.splits.%s", names[i]);
		json_t *o = obj(c, sp, names[i]);
		static const char *const k[] = { "documents", "sequences", "tokens", NULL };
		snprintf(ptr, sizeof ptr, "/splits/%s", names[i]);
		take_all(c, o, path, whole(S_DATASET), ptr, k);
	}
	json_t *srcs = lookup(c, whole(S_DATASET), "/sources");
	if (!json_is_array(srcs)) {
		unfilled(c, d, "data", "sources", srcs ? "the dataset manifest's sources is not a list" : c->why);
	} else {
		json_t *a = arr(c, d, "sources");
		for (size_t i = 0; i < json_array_size(srcs); i++) {
			char path[64], ptr[64];
			snprintf(path, sizeof path, "data.sources[%zu]", i);
			json_t *o = obj(c, a, NULL);
			snprintf(ptr, sizeof ptr, "/sources/%zu/name", i);
			take(c, o, path, "name", whole(S_DATASET), ptr);
			for (size_t k = 0; k < 3; k++) {
				char key[32];
				snprintf(key, sizeof key, "%s_documents", names[k]);
				snprintf(ptr, sizeof ptr, "/sources/%zu/%s/documents", i, names[k]);
				take(c, o, path, key, whole(S_DATASET), ptr);
				snprintf(key, sizeof key, "%s_tokens", names[k]);
				snprintf(ptr, sizeof ptr, "/sources/%zu/%s/tokens", i, names[k]);
				take(c, o, path, key, whole(S_DATASET), ptr);
			}
		}
	}
	take(c, d, "data", "tokens_trained", U, "/clocks/tokens");
	/* passes over the train split: sequences read over sequences there */
	json_t *u = lookup(c, U, "/clocks/updates");
	json_t *g = u ? lookup(c, whole(S_CONFIG), "/optimization/global_batch_sequences") : NULL;
	json_t *ts = g ? lookup(c, whole(S_DATASET), "/splits/train/sequences") : NULL;
	if (!ts) {
		unfilled(c, d, "data", "epochs", c->why);
	} else {
		char *r1 = ref(c, U, "/clocks/updates"), *r2 = ref(c, whole(S_CONFIG), "/optimization/global_batch_sequences"),
		     *r3 = ref(c, whole(S_DATASET), "/splits/train/sequences");
		char *p = str(c, "%s * %s / %s", nz(r1), nz(r2), nz(r3));
		put(c, d, "data", "epochs", json_real(num(u) * num(g) / num(ts)), p);
		free(r1), free(r2), free(r3), free(p);
	}

	/* deduplication: from dedup-minhash's summary, if given */
	if (!c->o.dedup) {
		say(c, d, "data", "dedup", json_null(), "not given: --dedup FILE, dedup-minhash's --summary");
	} else {
		json_t *x = obj(c, d, "dedup");
		take(c, x, "data.dedup", "documents", whole(S_DEDUP), "/documents");
		take(c, x, "data.dedup", "kept", whole(S_DEDUP), "/kept");
		take(c, x, "data.dedup", "removed_exact", whole(S_DEDUP), "/removed/exact");
		take(c, x, "data.dedup", "removed_near", whole(S_DEDUP), "/removed/near");
		take(c, x, "data.dedup", "removed_contamination", whole(S_DEDUP), "/removed/contamination");
		take(c, x, "data.dedup", "clusters", whole(S_DEDUP), "/clusters");
		static const char *const k[] = { "threshold", "num_perm", "bands", "rows", "shingle", "normalize", NULL };
		take_all(c, x, "data.dedup", whole(S_DEDUP), "", k);
		json_t *ed = load(c, S_DEDUP) ? lmt_jsonptr_get(c->src[S_DEDUP].doc, "/evaluation_documents") : NULL;
		if (ed) {
			take(c, x, "data.dedup", "decontamination_documents", whole(S_DEDUP), "/evaluation_documents");
			take(c, x, "data.dedup", "decontamination_ngram", whole(S_DEDUP), "/ngram");
		} else if (c->src[S_DEDUP].ok) {
			say(c, x, "data.dedup", "decontamination_documents", json_null(),
			    "the summary has no evaluation_documents: dedup-minhash ran without --against");
		}
	}
	/* the unigram baseline: what a model that knows only the train split's token
	 * frequencies scores; shard-pack records it (older manifests do not) */
	if (load(c, S_DATASET) && !lmt_jsonptr_get(c->src[S_DATASET].doc, "/splits/train/unigram_nats_per_token"))
		say(c, d, "data", "unigram_baseline_nats_per_token", json_null(),
		    "the manifest has no /splits/train/unigram_nats_per_token: packed by an older shard-pack");
	else
		take(c, d, "data", "unigram_baseline_nats_per_token", whole(S_DATASET), "/splits/train/unigram_nats_per_token");
	/* the corpus's entropy floor: from gen-corpus's summary, if given */
	if (!c->o.corpus) {
		say(c, d, "data", "corpus", json_null(), "not given: --corpus FILE, gen-corpus's summary");
	} else {
		json_t *x = obj(c, d, "corpus");
		struct rec r = find_rec(c, S_CORPUS, "summary", "\"summary\" or \"check\" record");
		if (!r.line)
			r = find_rec(c, S_CORPUS, "check", "\"summary\" or \"check\" record");
		take(c, x, "data.corpus", "documents", r, "/docs");
		take(c, x, "data.corpus", "bytes", r, "/bytes");
		take(c, x, "data.corpus", "nats", r, "/nats");
		take(c, x, "data.corpus", "entropy_bits_per_byte", r, "/bits_per_byte");
	}

	find_tokenizer(c);
	json_t *t = obj(c, R, "tokenizer");
	if (c->o.tokenizer)
		say(c, t, "tokenizer", "path", json_string(c->o.tokenizer), "-t");
	else if (c->src[S_TOKENIZER].path)
		take(c, t, "tokenizer", "path", whole(S_CONFIG), "/data/tokenizer");
	else
		unfilled(c, t, "tokenizer", "path", c->src[S_TOKENIZER].why);
	if (load(c, S_TOKENIZER)) {
		char hex[LMT_SHA256_HEX];
		c->src[S_TOKENIZER].used = 1;
		put(c, t, "tokenizer", "sha256", json_string(lmt_sha256_hex(c->src[S_TOKENIZER].sha, hex)),
		    "sha256(tokenizer)");
	} else {
		unfilled(c, t, "tokenizer", "sha256", c->src[S_TOKENIZER].why);
	}
	take(c, t, "tokenizer", "vocab", whole(S_DATASET), "/vocab_size");
	take(c, t, "tokenizer", "eos_id", whole(S_DATASET), "/packing/eos_id");
}

/* ---- the history: checkpoints, processes, interruptions ---- */

static int is_event(json_t *l, const char *e)
{
	const char *x = l ? ev(l) : NULL;
	return x && !strcmp(x, e);
}

static void card_checkpoints(struct lmt_runcard *c, json_t *R)
{
	if (!load(c, S_EVENTS)) {
		unfilled(c, R, "", "checkpoints", c->src[S_EVENTS].why);
		return;
	}
	struct src *E = &c->src[S_EVENTS];
	int have_metrics = load(c, S_METRICS);
	struct src *M = &c->src[S_METRICS];
	json_t *a = arr(c, R, "checkpoints");
	size_t idx = 0, *mck = NULL, nmck = 0, capm = 0; /* metrics' checkpoint records */
	for (size_t k = 0; have_metrics && k < M->nline; k++)
		if (is_event(M->line[k], "checkpoint")) {
			if (LMT_GROW(mck, capm, nmck + 1)) {
				oom(c);
				break;
			}
			mck[nmck++] = k;
		}
	for (size_t i = 0; i < E->nline; i++) {
		if (!is_event(E->line[i], "checkpoint"))
			continue;
		char path[64];
		snprintf(path, sizeof path, "checkpoints[%zu]", idx++);
		json_t *o = obj(c, a, NULL);
		struct rec r = { S_EVENTS, i + 1, NULL };
		json_t *u = take(c, o, path, "update", r, "/update");
		json_t *p = take(c, o, path, "path", r, "/detail");
		/* a later checkpoint of the same update (after a crash and a replay)
		 * supersedes this one */
		int later = 0;
		for (size_t k = i + 1; k < E->nline; k++)
			if (is_event(E->line[k], "checkpoint") && json_equal(json_object_get(E->line[k], "update"), u))
				later = 1;
		char *man = json_is_string(p) ? str(c, "%s/manifest.json", json_string_value(p)) : NULL;
		struct stat st;
		int exists = man && !later && stat(man, &st) == 0;
		char *why = str(c, "%s %s", man ? man : "its manifest", exists ? "exists" : "does not exist");
		say(c, o, path, "retained", json_boolean(exists), later ? "a later checkpoint of the same update replaced it" : why);
		free(why);
		free(man);
		/* the details are in metrics.jsonl's checkpoint record, unless the run
		 * was rewound past it at a resume */
		size_t line = 0;
		for (size_t k = 0; !later && k < nmck; k++)
			if (json_equal(json_object_get(M->line[mck[k]], "update"), u) &&
			    json_equal(json_object_get(M->line[mck[k]], "path"), p))
				line = mck[k] + 1;
		static const char *const keys[] = { "bytes", "pause_s", "write_s", "async", "cost_s" };
		for (size_t k = 0; k < LMT_ARRAY_SIZE(keys); k++) {
			char ptr[32];
			snprintf(ptr, sizeof ptr, "/%s", keys[k]);
			if (line) {
				struct rec m = { S_METRICS, line, NULL };
				take(c, o, path, keys[k], m, ptr);
			} else if (!have_metrics) {
				unfilled(c, o, path, keys[k], M->why);
			} else {
				say(c, o, path, keys[k], json_null(),
				    later ? "superseded" :
					    "not recorded: metrics has no record of it; a resume from a checkpoint cuts "
					    "metrics.jsonl back to before the checkpoint's own record, and a process killed "
					    "right after a save never writes one");
			}
		}
	}
	free(mck);
}

static void card_final_checkpoint(struct lmt_runcard *c, json_t *R)
{
	json_t *f = obj(c, R, "final_checkpoint");
	if (c->ckpt_dir)
		say(c, f, "final_checkpoint", "path", json_string(c->ckpt_dir),
		    "the newest step-* directory of RUN/ckpt whose manifest reads");
	else
		unfilled(c, f, "final_checkpoint", "path", c->src[S_CKPT].why);
	take(c, f, "final_checkpoint", "update", whole(S_CKPT), "/update");
	take(c, f, "final_checkpoint", "world", whole(S_CKPT), "/world");
	take(c, f, "final_checkpoint", "tokens", whole(S_CKPT), "/state/tokens");
	take(c, f, "final_checkpoint", "code_revision", whole(S_CKPT), "/state/code/revision");
	if (load(c, S_CKPT)) {
		char hex[LMT_SHA256_HEX];
		put(c, f, "final_checkpoint", "manifest_sha256",
		    json_string(lmt_sha256_hex(c->src[S_CKPT].sha, hex)), "sha256(checkpoint)");
	} else {
		unfilled(c, f, "final_checkpoint", "manifest_sha256", c->src[S_CKPT].why);
	}
}

static void card_history(struct lmt_runcard *c, json_t *R)
{
	json_t *h = obj(c, R, "history");
	if (!load(c, S_EVENTS)) {
		unfilled(c, h, "history", "processes", c->src[S_EVENTS].why);
		return;
	}
	struct src *E = &c->src[S_EVENTS];
	json_t *a = arr(c, h, "processes");
	size_t np = 0;
	long interruptions = 0, resumes = 0, replayed = 0;
	double lost = 0;
	char *sum_prov = NULL, *lost_prov = NULL;
	json_t *cur = NULL;
	char path[64] = "";
	int term = 0, stopped = 0; /* the open process has a terminal event; one of them not "end" */
	for (size_t i = 0; i <= E->nline; i++) {
		json_t *l = i < E->nline ? E->line[i] : NULL;
		int begin = l && (is_event(l, "start") || is_event(l, "restart") || is_event(l, "resume"));
		if ((begin || !l) && cur) {
			if (!term) {
				char *w = str(c, "no end, stop or failed event %s: the process was killed or crashed",
						    l ? "before the next start" : "after it");
				say(c, cur, path, "ended", json_null(), w);
				free(w);
			}
			interruptions += !term || stopped;
			cur = NULL;
		}
		if (!l)
			continue;
		struct rec r = { S_EVENTS, i + 1, NULL };
		if (begin) {
			snprintf(path, sizeof path, "history.processes[%zu]", np++);
			cur = obj(c, a, NULL);
			term = stopped = 0;
			take(c, cur, path, "began", r, "/event");
			take(c, cur, path, "at_update", r, "/update");
			if (is_event(l, "resume")) {
				take(c, cur, path, "from", r, "/from");
				json_t *rp = take(c, cur, path, "replayed_updates", r, "/replayed_updates");
				resumes++;
				replayed += json_is_integer(rp) ? (long)json_integer_value(rp) : 0;
				char *x = ref(c, r, "/replayed_updates");
				char *s2 = sum_prov ? str(c, "%s + %s", sum_prov, nz(x)) : dup(c, nz(x));
				free(x);
				free(sum_prov);
				sum_prov = s2;
				if (json_is_number(json_object_get(l, "lost_wall_s"))) {
					json_t *lw = take(c, cur, path, "lost_wall_s", r, "/lost_wall_s");
					lost += json_number_value(lw);
					x = ref(c, r, "/lost_wall_s");
					s2 = lost_prov ? str(c, "%s + %s", lost_prov, nz(x)) : dup(c, nz(x));
					free(x);
					free(lost_prov);
					lost_prov = s2;
				}
			}
		} else if (cur && (is_event(l, "end") || is_event(l, "stop") || is_event(l, "failed"))) {
			/* a "failed" follows a "stop" on an error: each says its part */
			term = 1;
			stopped |= !is_event(l, "end");
			take(c, cur, path, "ended", r, "/event");
			take(c, cur, path, "ended_at_update", r, "/update");
			if (json_object_get(l, "detail"))
				take(c, cur, path, "detail", r, "/detail");
		}
	}
	say(c, h, "history", "interruptions", json_integer(interruptions),
	    "processes that ended by a stop, a failure, or without an end event");
	say(c, h, "history", "resumes", json_integer(resumes), "resume events in events");
	if (sum_prov)
		put(c, h, "history", "replayed_updates", json_integer(replayed), sum_prov);
	else
		say(c, h, "history", "replayed_updates", json_integer(0), "no resume events in events");
	if (lost_prov)
		put(c, h, "history", "lost_wall_s", json_real(lost), lost_prov);
	else
		say(c, h, "history", "lost_wall_s", json_real(0), "no resume event records lost work");
	free(sum_prov);
	free(lost_prov);
}

/* The byte ledger memledger predicts for the run's configuration (model/ledger.h:
 * the trainer's own sizing code), beside the measured memory above. */
static void card_ledger(struct lmt_runcard *c, json_t *f)
{
	struct lmt_ledger_cfg lc;
	struct lmt_ledger l;
	struct lmt_err e = { 0 };
	const char *why = "memledger's prediction from config (model/ledger.c)";
	if (!c->src[S_CONFIG].ok || !c->src[S_CONFIG].path || lmt_run_config_read(c->src[S_CONFIG].path, &lc, &e) ||
	    lmt_ledger_build(&lc, &l, &e))
		return;
	json_t *o = obj(c, f, "ledger");
	if (!o)
		return;
	static const char *const names[] = { "params", "weights_working", "grads", "optimizer", "staging", "inputs" };
	for (size_t i = 0; i < LMT_ARRAY_SIZE(names); i++)
		say(c, o, "final.ledger", names[i], json_integer((json_int_t)lmt_ledger_bytes(&l, names[i])), why);
	say(c, o, "final.ledger", "activations", json_integer((json_int_t)l.acts_total), why);
	say(c, o, "final.ledger", "total", json_integer((json_int_t)l.total), why);
}

static void card_final(struct lmt_runcard *c, json_t *R, struct rec U, struct rec E, struct rec S)
{
	json_t *f = obj(c, R, "final");
	take(c, f, "final", "update", U, "/update");
	take(c, f, "final", "tokens", U, "/tokens_total");
	take(c, f, "final", "train_loss", U, "/loss");
	json_t *every = E.line ? NULL : lookup(c, whole(S_CONFIG), "/eval/every");
	static const char *const vk[][2] = { { "val_loss", "/loss" }, { "val_loss_update", "/update" },
					     { "val_loss_tokens", "/tokens" } };
	for (size_t i = 0; i < LMT_ARRAY_SIZE(vk); i++) {
		if (json_is_integer(every) && json_integer_value(every) == 0 && c->src[S_METRICS].ok)
			say(c, f, "final", vk[i][0], json_null(),
			    "not measured: train ran with --eval-every 0 (config#/eval/every)");
		else
			take(c, f, "final", vk[i][0], E, vk[i][1]);
	}
	take(c, f, "final", "lr", U, "/lr");
	take(c, f, "final", "grad_norm", U, "/grad_norm");
	take(c, f, "final", "clipped_fraction", U, "/clipped_fraction");
	take(c, f, "final", "tokens_per_s", U, "/tokens_per_s");
	take(c, f, "final", "mfu", U, "/mfu");
	take(c, f, "final", "tokens_per_s_last_process", S, "/tokens_per_s");
	json_t *m = obj(c, f, "memory");
	static const char *const k[] = { "params", "grads", "optimizer", "activations", "peak_rss", NULL };
	take_all(c, m, "final.memory", U, "/memory", k);
	card_ledger(c, f);
}

/*
 * evalppl's results: one entry per file and checkpoint. The records are copied
 * field by field (numbers, strings, booleans, lists of numbers such as
 * intervals, and objects of those), so that a field evalppl adds comes along
 * with its provenance.
 */
static int skipped(const char *k, const char *const *skip)
{
	for (const char *const *s = skip; *s; s++)
		if (!strcmp(*s, k))
			return 1;
	return 0;
}

static void eval_fields(struct lmt_runcard *c, json_t *o, const char *path, struct rec r, const char *base, json_t *l,
			const char *const *skip)
{
	static const char *const none[] = { NULL };
	const char *k;
	json_t *v;
	json_object_foreach(l, k, v) {
		if (skipped(k, skip) || strchr(k, '/') || strchr(k, '~') || strlen(k) > 64)
			continue; /* not a plain key: left out */
		char ptr[512];
		snprintf(ptr, sizeof ptr, "%s/%s", base, k);
		if (json_is_object(v)) {
			char *sp = child_path(c, path, k);
			eval_fields(c, obj(c, o, k), sp, r, ptr, v, none);
			free(sp);
			continue;
		}
		if (json_is_array(v)) {
			size_t i;
			json_t *x;
			int nums = 1;
			json_array_foreach(v, i, x)
				nums &= json_is_number(x);
			if (!nums)
				continue;
		}
		take(c, o, path, k, r, ptr);
	}
}

struct ev_entry {
	json_t *ck;          /* its "checkpoint" (borrowed from the source) */
	json_t *o, *by_source, *by_length, *mem, *samples;
	char path[48];
};

static void card_eval(struct lmt_runcard *c, json_t *R)
{
	if (c->nsrc == S_EVAL0) {
		say(c, R, "", "evaluation", json_null(), "not given: --eval FILE or RUN/eval/*.jsonl, evalppl's results");
		return;
	}
	json_t *a = arr(c, R, "evaluation");
	size_t ne = 0;
	static const char *const head[] = { "event", "checkpoint", "update", "tokens_trained", NULL };
	static const char *const head_scope[] = { "event", "checkpoint", "update", "tokens_trained", "scope", "key", NULL };
	for (int s = S_EVAL0; s < c->nsrc; s++) {
		struct src *S = &c->src[s];
		if (!load(c, s)) {
			char path[48];
			snprintf(path, sizeof path, "evaluation[%zu]", ne++);
			unfilled(c, obj(c, a, NULL), path, "checkpoint", S->why);
			continue;
		}
		struct ev_entry *E = NULL, *cur = NULL;
		size_t nE = 0, capE = 0;
		int any_ppl = 0;
		for (size_t i = 0; i < S->nline; i++) {
			json_t *l = S->line[i];
			const char *e = l ? ev(l) : NULL;
			if (!e)
				continue;
			struct rec r = { s, i + 1, NULL };
			/* the entry of the record's checkpoint, or the last one */
			json_t *ck = json_object_get(l, "checkpoint");
			if (ck) {
				cur = NULL;
				for (size_t k = 0; k < nE && !cur; k++)
					if (json_equal(E[k].ck, ck))
						cur = &E[k];
			}
			int opens = !strcmp(e, "eval-config") || !strcmp(e, "ppl");
			if (!cur && opens) {
				if (LMT_GROW(E, capE, nE + 1)) {
					oom(c);
					break;
				}
				cur = &E[nE++];
				memset(cur, 0, sizeof *cur);
				cur->ck = ck;
				snprintf(cur->path, sizeof cur->path, "evaluation[%zu]", ne++);
				cur->o = obj(c, a, NULL);
				say(c, cur->o, cur->path, "file", json_string(S->label), "the label of its input");
				take(c, cur->o, cur->path, "checkpoint", r, "/checkpoint");
				take(c, cur->o, cur->path, "update", r, "/update");
				take(c, cur->o, cur->path, "tokens_trained", r, "/tokens_trained");
			}
			if (!cur)
				continue;
			char sp[96];
			const char *scope = json_string_value(json_object_get(l, "scope"));
			if (!strcmp(e, "eval-config") && !json_object_get(cur->o, "config")) {
				snprintf(sp, sizeof sp, "%s.config", cur->path);
				eval_fields(c, obj(c, cur->o, "config"), sp, r, "", l, head);
			} else if (!strcmp(e, "ppl") && scope && !strcmp(scope, "overall")) {
				any_ppl = 1;
				snprintf(sp, sizeof sp, "%s.overall", cur->path);
				eval_fields(c, obj(c, cur->o, "overall"), sp, r, "", l, head_scope);
			} else if (!strcmp(e, "ppl") && scope && (!strcmp(scope, "source") || !strcmp(scope, "length"))) {
				any_ppl = 1;
				int src = !strcmp(scope, "source");
				json_t **list = src ? &cur->by_source : &cur->by_length;
				const char *lk = src ? "by_source" : "by_length";
				if (!*list)
					*list = arr(c, cur->o, lk);
				snprintf(sp, sizeof sp, "%s.%s[%zu]", cur->path, lk, json_array_size(*list));
				json_t *o = obj(c, *list, NULL);
				take(c, o, sp, "key", r, "/key");
				eval_fields(c, o, sp, r, "", l, head_scope);
			} else if (!strcmp(e, "floor") && (!scope || !strcmp(scope, "overall")) &&
				   !json_object_get(cur->o, "floor")) {
				snprintf(sp, sizeof sp, "%s.floor", cur->path);
				eval_fields(c, obj(c, cur->o, "floor"), sp, r, "", l, head_scope);
			} else if (!strcmp(e, "memorization") || !strcmp(e, "sample")) {
				int mem = !strcmp(e, "memorization");
				json_t **list = mem ? &cur->mem : &cur->samples;
				const char *lk = mem ? "memorization" : "samples";
				if (!*list)
					*list = arr(c, cur->o, lk);
				snprintf(sp, sizeof sp, "%s.%s[%zu]", cur->path, lk, json_array_size(*list));
				eval_fields(c, obj(c, *list, NULL), sp, r, "", l, head);
			}
		}
		free(E);
		if (!any_ppl) {
			char path[48];
			snprintf(path, sizeof path, "evaluation[%zu]", ne++);
			char *w = str(c, "'%s' has no \"ppl\" record", S->path);
			unfilled(c, obj(c, a, NULL), path, "overall", w);
			free(w);
		}
	}
}

static const char *const plot_names[] = { "loss", "lr", "grad_norm", "throughput", "memory" };

/* Limitation *n of the list a, in words, and the fields it is inferred from. */
static void limit(struct lmt_runcard *c, json_t *a, size_t *n, const char *prose, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void limit(struct lmt_runcard *c, json_t *a, size_t *n, const char *prose, const char *fmt, ...)
{
	char path[64];
	snprintf(path, sizeof path, "known_limitations[%zu]", (*n)++);
	struct lmt_strbuf t = { 0 }, p = { 0 };
	va_list ap;
	va_start(ap, fmt);
	lmt_strbuf_vprintf(&t, fmt, ap);
	va_end(ap);
	lmt_strbuf_printf(&p, "(%s)", prose);
	if (t.oom || p.oom || json_array_append_new(a, json_string(t.buf)) ||
	    json_object_set_new(c->prov, path, json_string(p.buf)))
		oom(c);
	lmt_strbuf_release(&t);
	lmt_strbuf_release(&p);
}

static void card_limitations(struct lmt_runcard *c, json_t *R)
{
	json_t *a = arr(c, R, "known_limitations");
	size_t n = 0;
	json_t *params = lmt_jsonptr_get(R, "/model/parameters"), *tok = lmt_jsonptr_get(R, "/data/tokens_trained"),
	       *ctx = lmt_jsonptr_get(R, "/model/context"), *ep = lmt_jsonptr_get(R, "/data/epochs"), *srcs = lmt_jsonptr_get(R, "/data/sources");
	if (json_is_integer(params) && json_is_integer(tok))
		limit(c, a, &n, "model.parameters, data.tokens_trained, data.sources",
		      "A model of %lld parameters trained on %lld tokens (%.3g passes over the train split) from %zu "
		      "source(s): it continues text like its training data and knows nothing else.",
		      (long long)json_integer_value(params), (long long)json_integer_value(tok), num(ep),
		      json_array_size(srcs));
	if (json_is_integer(ctx))
		limit(c, a, &n, "optimization.seq_len",
		      "It was trained on sequences of %lld positions: longer contexts were never seen.",
		      (long long)json_integer_value(json_is_integer(lmt_jsonptr_get(R, "/optimization/seq_len"))
							    ? lmt_jsonptr_get(R, "/optimization/seq_len") : ctx));
	json_t *st = lmt_jsonptr_get(R, "/status");
	if (json_is_string(st) && strcmp(json_string_value(st), "done"))
		limit(c, a, &n, "status", "The run did not finish: its last process ended with status \"%s\".",
		      json_string_value(st));
	json_t *fu = lmt_jsonptr_get(R, "/final/update"), *cu = lmt_jsonptr_get(R, "/final_checkpoint/update");
	if (json_is_integer(fu) && json_is_integer(cu) && !json_equal(fu, cu))
		limit(c, a, &n, "final.update, final_checkpoint.update",
		      "The newest checkpoint (what --release exports) is of update %lld; the metrics run to update "
		      "%lld.", (long long)json_integer_value(cu), (long long)json_integer_value(fu));
	json_t *dd = lmt_jsonptr_get(R, "/data/dedup");
	if (!json_is_object(dd))
		limit(c, a, &n, "data.dedup", "No deduplication figures were given (--dedup): this card cannot say whether the "
				    "training data was deduplicated.");
	else if (json_is_null(json_object_get(dd, "decontamination_documents")))
		limit(c, a, &n, "data.dedup.decontamination_documents",
		      "The training data was not decontaminated against evaluation sets (dedup-minhash ran without "
		      "--against).");
	limit(c, a, &n, "data.split_rule", "The validation split is drawn from the same sources as the training split: its "
				 "figures measure fit to that distribution, not to other text.");
	if (!json_is_array(lmt_jsonptr_get(R, "/evaluation")))
		limit(c, a, &n, "evaluation", "No evaluation results were given (evalppl): the only held-out figure is train's "
				    "validation loss, without an interval.");
	json_t *prs = lmt_jsonptr_get(R, "/history/processes");
	int killed = 0;
	size_t i;
	json_t *x;
	json_array_foreach(prs, i, x)
		killed |= json_is_null(json_object_get(x, "ended"));
	limit(c, a, &n, "cost.device_hours, history",
	      "Device-hours are the clocks of the updates that make the final model (they continue across resumes)%s; "
	      "start-up and the work after the last update are not counted.",
	      killed ? ", so the work lost to the processes that were killed and redone is not in them (history.lost_wall_s "
		       "gives the wall time of the lost updates their records showed)" : "");
	if (json_array_size(prs) > 1)
		limit(c, a, &n, "history.processes",
		      "config.json holds the options of the last of %zu processes; earlier ones may have run with "
		      "others (thread count, --updates).", json_array_size(prs));
}

static void card_plots(struct lmt_runcard *c, json_t *R)
{
	json_t *a = arr(c, R, "plots");
	for (size_t i = 0; i < LMT_ARRAY_SIZE(plot_names); i++) {
		char path[32];
		snprintf(path, sizeof path, "plots[%zu]", i);
		if (json_array_append_new(a, json_sprintf("plots/%s.svg", plot_names[i])) ||
		    json_object_set_new(c->prov, path, json_string("(drawn by runcard from metrics)")))
			oom(c);
	}
}

static void card_inputs(struct lmt_runcard *c, json_t *R)
{
	json_t *a = arr(c, R, "inputs");
	size_t n = 0;
	for (int i = 0; i < c->nsrc; i++) {
		struct src *s = &c->src[i];
		if (!s->used || !s->ok)
			continue;
		char path[32], hex[LMT_SHA256_HEX];
		snprintf(path, sizeof path, "inputs[%zu]", n++);
		json_t *o = obj(c, a, NULL);
		say(c, o, path, "label", json_string(s->label), "runcard's name for it");
		say(c, o, path, "path", json_string(s->path), s->option ? s->option : "found from RUN");
		char *p = str(c, "bytes(%s)", s->label);
		put(c, o, path, "bytes", json_integer((json_int_t)s->nraw), p);
		free(p);
		p = str(c, "sha256(%s)", s->label);
		put(c, o, path, "sha256", json_string(lmt_sha256_hex(s->sha, hex)), p);
		free(p);
	}
}

static void build_card(struct lmt_runcard *c)
{
	json_t *R = c->root;
	find_checkpoint(c);
	card_ids(c, R);
	card_model(c, R);
	card_optimization(c, R);
	card_hardware(c, R);
	struct rec U = find_rec(c, S_METRICS, "update", "\"update\" record");
	struct rec E = find_rec(c, S_METRICS, "eval", "\"eval\" record");
	struct rec S = find_rec(c, S_METRICS, "summary", "\"summary\" record");
	card_clocks(c, R, U, S);
	card_data(c, R, U);
	card_checkpoints(c, R);
	card_final_checkpoint(c, R);
	card_history(c, R);
	card_final(c, R, U, E, S);
	card_eval(c, R);
	card_plots(c, R);
	card_limitations(c, R);
	card_inputs(c, R);
	json_object_set(R, "missing", c->missing);
	json_object_set_new(c->prov, "missing", json_string("(fields --allow-missing left null)"));
}

/* ---- runcard.yaml ---- */

static void yaml_value(struct lmt_runcard *c, struct lmt_yaml *y, const char *key, json_t *v, const char *path)
{
	const char *cm = json_string_value(json_object_get(c->prov, path));
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *x;
		lmt_yaml_map(y, key, cm);
		json_object_foreach(v, k, x) {
			char *p = child_path(c, path, k);
			yaml_value(c, y, k, x, p);
			free(p);
		}
		lmt_yaml_end(y);
		break;
	}
	case JSON_ARRAY: {
		size_t i, nn = json_array_size(v);
		json_t *x;
		int nums = nn > 0;
		json_array_foreach(v, i, x)
			nums &= json_is_number(x);
		if (nums) { /* intervals, token ids: one line */
			double *d = malloc(nn * sizeof *d);
			if (!d) {
				oom(c);
				break;
			}
			json_array_foreach(v, i, x)
				d[i] = json_number_value(x);
			lmt_yaml_nums(y, key, d, nn, cm);
			free(d);
			break;
		}
		lmt_yaml_seq(y, key, cm);
		json_array_foreach(v, i, x) {
			char *p = str(c, "%s[%zu]", path, i);
			yaml_value(c, y, NULL, x, p);
			free(p);
		}
		lmt_yaml_end(y);
		break;
	}
	case JSON_STRING: lmt_yaml_str(y, key, json_string_value(v), cm); break;
	case JSON_INTEGER: lmt_yaml_i64(y, key, (int64_t)json_integer_value(v), cm); break;
	case JSON_REAL: lmt_yaml_num(y, key, json_real_value(v), cm); break;
	case JSON_TRUE: lmt_yaml_bool(y, key, 1, cm); break;
	case JSON_FALSE: lmt_yaml_bool(y, key, 0, cm); break;
	case JSON_NULL: lmt_yaml_null(y, key, cm); break;
	}
}

static void card_yaml(struct lmt_runcard *c, struct lmt_runcard_files *f)
{
	struct lmt_yaml y;
	lmt_yaml_init(&y);
	lmt_yaml_comment(&y, "runcard.yaml: the record of a training run, written by runcard (lmt " LMT_VERSION ").\n"
			     "\n"
			     "Each value's comment says where it comes from. LABEL#POINTER is the value at that\n"
			     "RFC 6901 pointer in the JSON file LABEL; LABEL:N#POINTER the same in line N of the\n"
			     "JSONL file LABEL; an expression of such references (+ - * /, numbers) is computed\n"
			     "from them as written, left to right; sha256(LABEL) and bytes(LABEL) are the file's\n"
			     "digest and size. The labels are listed under inputs:, with each file's path. A\n"
			     "comment in parentheses is prose: the tool's own words, or why a value is null.\n"
			     "Fields listed under missing: could not be filled (runcard --allow-missing).");
	const char *k;
	json_t *v;
	json_object_foreach(c->root, k, v)
		yaml_value(c, &y, k, v, k);
	if (y.out.oom)
		oom(c);
	f->nyaml = y.out.len;
	f->yaml = lmt_strbuf_detach(&y.out);
}

/* ---- plots ---- */

struct series {
	double *x, *y;
	size_t n, cap;
	int oom;
};

static void sadd(struct series *s, double x, double y)
{
	if (s->oom)
		return;
	if (LMT_GROW(s->x, s->cap, s->n + 1)) {
		s->oom = 1;
		return;
	}
	size_t cap = s->cap;
	void *p = realloc(s->y, cap * sizeof *s->y);
	if (!p) {
		s->oom = 1;
		return;
	}
	s->y = p;
	s->x[s->n] = x;
	s->y[s->n] = y;
	s->n++;
}

static double jnum(json_t *o, const char *ptr)
{
	return num(lmt_jsonptr_get(o, ptr));
}

static void render(struct lmt_runcard *c, struct lmt_runcard_plot *pf, const char *name, const struct lmt_plot *p)
{
	struct lmt_err err = { 0 };
	snprintf(pf->name, sizeof pf->name, "%s.svg", name);
	if (lmt_plot_svg(p, &pf->svg, &pf->len, &err) && !c->err.code)
		c->err = err;
}

static const char *val(json_t *R, const char *ptr, char tmp[64]);

/* The five plots, from metrics.jsonl's update and eval records. */
static void make_plots(struct lmt_runcard *c, struct lmt_runcard_plot pf[LMT_RUNCARD_NPLOTS])
{
	enum { TOK, UPD, LOSS, LR, GN, CF, TPS, MFU, MP, MG, MO, MA, MR, NS };
	struct series s[NS], ev = { 0 };
	memset(s, 0, sizeof s);
	if (load(c, S_METRICS)) {
		struct src *M = &c->src[S_METRICS];
		for (size_t i = 0; i < M->nline; i++) {
			json_t *l = M->line[i];
			if (is_event(l, "update")) {
				double u = jnum(l, "/update"), t = jnum(l, "/tokens_total");
				sadd(&s[LOSS], t, jnum(l, "/loss"));
				sadd(&s[UPD], t, u); /* tokens by update, for the resume markers */
				sadd(&s[LR], u, jnum(l, "/lr"));
				sadd(&s[GN], u, jnum(l, "/grad_norm"));
				sadd(&s[CF], u, jnum(l, "/clipped_fraction"));
				sadd(&s[TPS], u, jnum(l, "/tokens_per_s"));
				sadd(&s[MFU], u, jnum(l, "/mfu"));
				sadd(&s[MP], u, jnum(l, "/memory/params") / 1e6);
				sadd(&s[MG], u, jnum(l, "/memory/grads") / 1e6);
				sadd(&s[MO], u, jnum(l, "/memory/optimizer") / 1e6);
				sadd(&s[MA], u, jnum(l, "/memory/activations") / 1e6);
				sadd(&s[MR], u, jnum(l, "/memory/peak_rss") / 1e6);
			} else if (is_event(l, "eval")) {
				sadd(&ev, jnum(l, "/tokens_total"), jnum(l, "/loss"));
			}
		}
	}
	for (int i = 0; i < NS; i++)
		if (s[i].oom || ev.oom)
			oom(c);
	json_t *clip = lmt_jsonptr_get(c->root, "/optimization/clip");
	/* the training loss smoothed (an exponential moving average, debiased as Adam
	 * debiases its moments, so the first points are not pulled towards 0), the raw
	 * points faint beneath it */
	double *sm = s[LOSS].n ? malloc(s[LOSS].n * sizeof *sm) : NULL;
	if (s[LOSS].n && !sm)
		oom(c);
	double ema = 0, w = 0;
	for (size_t i = 0; sm && i < s[LOSS].n; i++) {
		if (isfinite(s[LOSS].y[i])) {
			ema = 0.9 * ema + 0.1 * s[LOSS].y[i];
			w = 0.9 * w + 0.1;
		}
		sm[i] = w > 0 ? ema / w : NAN;
	}
	struct lmt_plot_series ls[] = {
		{ "train loss (smoothed: EMA 0.9)", s[LOSS].x, sm, sm ? s[LOSS].n : 0, 0, 0, 0, 0 },
		{ "train loss", s[LOSS].x, s[LOSS].y, s[LOSS].n, 0, 0, 1, 1 },
		{ "val loss (train's estimate)", ev.x, ev.y, ev.n, 0, 1, 0, 0 },
	};
	/* the reference levels, named and valued as the card's text gives them */
	char ub[64], fb[64], uname[128], fname[160];
	struct lmt_plot_hline lh[2];
	int nlh = 0;
	json_t *R = c->root;
	if (json_is_number(lmt_jsonptr_get(R, "/data/unigram_baseline_nats_per_token"))) {
		snprintf(uname, sizeof uname, "unigram baseline: %s nats/token",
			 val(R, "/data/unigram_baseline_nats_per_token", ub));
		lh[nlh++] = (struct lmt_plot_hline){ uname, jnum(R, "/data/unigram_baseline_nats_per_token"), 0, 1 };
	}
	size_t k;
	json_t *e;
	json_array_foreach(lmt_jsonptr_get(R, "/evaluation"), k, e) {
		if (!json_is_number(lmt_jsonptr_get(e, "/floor/nats_per_token")))
			continue;
		snprintf(fname, sizeof fname, "the evaluated documents' own entropy floor: %s nats/token",
			 val(e, "/floor/nats_per_token", fb));
		lh[nlh++] = (struct lmt_plot_hline){ fname, jnum(e, "/floor/nats_per_token"), 0, 1 };
		break;
	}
	/* a marker where each process after the first began (a resume or a
	 * restart), at the tokens trained by then: the update record of that update */
	struct lmt_plot_vline *vl = NULL;
	char (*vname)[64] = NULL;
	int nvl = 0;
	json_t *procs = lmt_jsonptr_get(R, "/history/processes");
	size_t np = json_array_size(procs);
	if (np > 1 && (!(vl = calloc(np, sizeof *vl)) || !(vname = calloc(np, sizeof *vname))))
		oom(c);
	for (size_t i = 1; vname && i < np; i++) {
		json_t *pr = json_array_get(procs, i);
		const char *how = json_string_value(lmt_jsonptr_get(pr, "/began"));
		double u = jnum(pr, "/at_update"), x = u == 0 ? 0 : NAN;
		for (size_t j = 0; j < s[UPD].n; j++)
			if (s[UPD].y[j] == u)
				x = s[UPD].x[j];
		if (!how || !isfinite(x))
			continue;
		snprintf(vname[nvl], sizeof vname[nvl], "%s @ %.0f", how, u);
		vl[nvl] = (struct lmt_plot_vline){ vname[nvl], x };
		nvl++;
	}
	struct lmt_plot p = { .title = "Loss", .xlabel = "tokens trained (valid targets)",
			      .ylabel = "loss (nats per token)", .series = ls, .nseries = 3, .hlines = lh, .nhlines = nlh,
			      .vlines = vl, .nvlines = nvl };
	render(c, &pf[0], "loss", &p);
	free(sm);
	free(vl);
	free(vname);

	struct lmt_plot_series lr[] = { { "learning rate", s[LR].x, s[LR].y, s[LR].n, 0, 0, 0, 0 } };
	struct lmt_plot p2 = { .title = "Learning rate", .xlabel = "update", .ylabel = "learning rate",
			       .series = lr, .nseries = 1 };
	render(c, &pf[1], "lr", &p2);

	struct lmt_plot_series gn[] = {
		{ "gradient norm", s[GN].x, s[GN].y, s[GN].n, 0, 0, 0, 0 },
		{ "clipped fraction", s[CF].x, s[CF].y, s[CF].n, 1, 0, 0, 0 },
	};
	struct lmt_plot_hline ch[] = { { "clip threshold", num(clip), 0, 0 } };
	struct lmt_plot p3 = { .title = "Gradient norm and clipping", .xlabel = "update",
			       .ylabel = "gradient L2 norm (before clipping)",
			       .y2label = "fraction of updates clipped so far", .logy = 1, .y2range = { 0, 1 },
			       .series = gn, .nseries = 2, .hlines = ch, .nhlines = json_is_number(clip) };
	render(c, &pf[2], "grad_norm", &p3);

	struct lmt_plot_series tp[] = {
		{ "tokens per second", s[TPS].x, s[TPS].y, s[TPS].n, 0, 0, 0, 0 },
		{ "MFU", s[MFU].x, s[MFU].y, s[MFU].n, 1, 0, 0, 0 },
	};
	struct lmt_plot p4 = { .title = "Throughput", .xlabel = "update", .ylabel = "valid tokens per second",
			       .y2label = "model FLOPs utilisation", .yrange = { 0, 0 }, .series = tp, .nseries = 2 };
	render(c, &pf[3], "throughput", &p4);

	/* parameters and gradients are the same size (fp32 both): one line, named so,
	 * rather than one drawn over the other */
	int same = s[MP].n == s[MG].n;
	for (size_t i = 0; same && i < s[MP].n; i++)
		same = s[MP].y[i] == s[MG].y[i];
	struct lmt_plot_series mm[] = {
		{ same ? "parameters = gradients" : "parameters", s[MP].x, s[MP].y, s[MP].n, 0, 0, 0, 0 },
		{ "gradients", s[MG].x, s[MG].y, same ? 0 : s[MG].n, 0, 0, 0, 0 },
		{ "optimizer state", s[MO].x, s[MO].y, s[MO].n, 0, 0, 0, 0 },
		{ "activations", s[MA].x, s[MA].y, s[MA].n, 0, 0, 0, 0 },
		{ "peak RSS", s[MR].x, s[MR].y, s[MR].n, 0, 0, 0, 0 },
	};
	struct lmt_plot p5 = { .title = "Memory", .xlabel = "update", .ylabel = "MB (10^6 bytes)", .series = mm,
			       .nseries = 5 };
	render(c, &pf[4], "memory", &p5);

	for (int i = 0; i < NS; i++)
		free(s[i].x), free(s[i].y);
	free(ev.x), free(ev.y);
}

/* ---- RUNCARD.md ---- */

/* Text for Markdown; in a code span (code) nothing is escaped, and a backtick,
 * which would end the span, becomes a quote. */
static void md(struct lmt_strbuf *b, const char *s, int code)
{
	for (const char *p = s ? s : ""; *p; p++) {
		if (*p == '\n' || *p == '\r') {
			lmt_strbuf_put(b, " ", 1);
			continue;
		}
		if (code && *p == '`') {
			lmt_strbuf_put(b, "'", 1);
			continue;
		}
		if (!code && strchr("\\`*_[]<>|#", *p))
			lmt_strbuf_put(b, "\\", 1);
		lmt_strbuf_put(b, p, 1);
	}
}

/* A value of the card as text: "not recorded" for null or absent. A string is
 * borrowed from R; a number is formatted in tmp. */
/* For people (RUNCARD.md only; runcard.yaml keeps every value exact): sizes in
 * bytes as kB/MB/GB, FLOP counts and rates with their unit, large counts with
 * thousands separators. NULL: no rule for this key. */
static const char *human(const char *ptr, double x, char tmp[64])
{
	const char *k = strrchr(ptr, '/');
	k = k ? k + 1 : ptr;
	static const char *const si[] = { "", "k", "M", "G", "T", "P" };
	int bytes = strstr(k, "bytes") || strstr(k, "rss") || strstr(ptr, "/memory/");
	int flops = strstr(k, "flops") && !strstr(k, "per_token");
	if ((bytes || flops) && fabs(x) >= 1000) {
		int e = 0;
		double m = x;
		while (fabs(m) >= 1000 && e < 5)
			m /= 1000, e++;
		snprintf(tmp, 64, "%.3g %s%s", m, si[e], bytes ? "B" : strstr(k, "per_s") || !strcmp(k, "peak_flops")
								    ? "FLOP/s" : "FLOP");
		return tmp;
	}
	if (!bytes && !flops && fabs(x) >= 10000 && fabs(x) < 1e15 && x == floor(x)) {
		char d[32];
		int n = snprintf(d, sizeof d, "%.0f", fabs(x)), o = 0;
		if (x < 0)
			tmp[o++] = '-';
		for (int i = 0; i < n; i++) {
			if (i && (n - i) % 3 == 0)
				tmp[o++] = ',';
			tmp[o++] = d[i];
		}
		tmp[o] = 0;
		return tmp;
	}
	return NULL;
}

static const char *val(json_t *R, const char *ptr, char tmp[64])
{
	json_t *v = lmt_jsonptr_get(R, ptr);
	if (v && json_is_number(v) && human(ptr, json_number_value(v), tmp))
		return tmp;
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING: return json_string_value(v);
	case JSON_INTEGER: snprintf(tmp, 64, "%lld", (long long)json_integer_value(v)); return tmp;
	case JSON_REAL: /* 4 significant digits, but whole numbers from 1000 up */
		if (fabs(json_real_value(v)) >= 1000 && fabs(json_real_value(v)) < 1e15)
			snprintf(tmp, 64, "%.0f", json_real_value(v));
		else
			snprintf(tmp, 64, "%.4g", json_real_value(v));
		return tmp;
	case JSON_TRUE: return "yes";
	case JSON_FALSE: return "no";
	default: return "not recorded";
	}
}

/*
 * Markdown from a template: "{/pointer}" is the value at that pointer of R (as
 * val() gives it), escaped unless it is inside a code span of the template.
 */
static void tpl(struct lmt_strbuf *b, json_t *R, const char *t)
{
	int code = 0;
	while (*t) {
		if (*t == '{' && t[1] == '/') {
			const char *e = strchr(t, '}');
			LMT_ASSERT(e);
			char ptr[256];
			snprintf(ptr, sizeof ptr, "%.*s", (int)(e - t - 1), t + 1);
			char tmp[64];
			md(b, val(R, ptr, tmp), code);
			t = e + 1;
			continue;
		}
		if (*t == '`')
			code = !code;
		lmt_strbuf_put(b, t, 1);
		t++;
	}
}

/* " x [lo, hi] |" from field k and k_ci of an evaluation row */
static void md_ci(struct lmt_strbuf *b, json_t *row, const char *k)
{
	json_t *v = json_object_get(row, k);
	char ck[64];
	snprintf(ck, sizeof ck, "%s_ci", k);
	json_t *ci = json_object_get(row, ck);
	if (!json_is_number(v)) {
		lmt_strbuf_printf(b, " — |");
		return;
	}
	lmt_strbuf_printf(b, " %.4g", json_number_value(v));
	if (json_is_array(ci) && json_array_size(ci) == 2)
		lmt_strbuf_printf(b, " [%.4g, %.4g]", num(json_array_get(ci, 0)), num(json_array_get(ci, 1)));
	lmt_strbuf_printf(b, " |");
}

static void md_eval_row(struct lmt_strbuf *b, json_t *row, const char *scope, const char *key)
{
	lmt_strbuf_printf(b, "| %s%s", scope, key[0] ? " " : "");
	md(b, key, 0);
	lmt_strbuf_printf(b, " |");
	static const char *const counts[] = { "documents", "tokens" };
	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(row, counts[i]);
		if (json_is_integer(v))
			lmt_strbuf_printf(b, " %lld |", (long long)json_integer_value(v));
		else
			lmt_strbuf_printf(b, " — |");
	}
	md_ci(b, row, "loss");
	md_ci(b, row, "token_ppl");
	md_ci(b, row, "bits_per_byte");
	lmt_strbuf_printf(b, "\n");
}

static void md_evaluation(struct lmt_strbuf *b, json_t *x)
{
	tpl(b, x, "\n### evalppl: checkpoint `{/checkpoint}` (update {/update}, {/tokens_trained} tokens trained)\n\n");
	json_t *lvl = NULL;
	static const char *const lk[] = { "/config/bootstrap/level", "/config/level" };
	for (size_t k = 0; k < LMT_ARRAY_SIZE(lk) && !lvl; k++)
		lvl = json_is_number(lmt_jsonptr_get(x, lk[k])) ? lmt_jsonptr_get(x, lk[k]) : NULL;
	if (lvl)
		lmt_strbuf_printf(b, "Intervals in brackets: %g%% confidence, as evalppl computed them.\n\n",
			  num(lvl) * (num(lvl) <= 1 ? 100 : 1));
	else
		lmt_strbuf_printf(b, "Intervals in brackets, as evalppl computed them.\n\n");
	lmt_strbuf_printf(b, "| scope | documents | tokens | loss (nats/token) | token perplexity | bits per byte |\n"
		     "|---|---:|---:|---:|---:|---:|\n");
	if (json_is_object(json_object_get(x, "overall")))
		md_eval_row(b, json_object_get(x, "overall"), "overall", "");
	static const char *const lists[] = { "by_source", "by_length" };
	for (size_t k = 0; k < 2; k++) {
		size_t j;
		json_t *row;
		json_array_foreach(json_object_get(x, lists[k]), j, row) {
			char tmp[64];
			md_eval_row(b, row, k ? "length" : "source", val(row, "/key", tmp));
		}
	}
	if (json_is_object(json_object_get(x, "floor")))
		tpl(b, x, "\nGap to the evaluated documents' own entropy floor (their exact information content, "
			  "{/floor/bits_per_byte} bits per byte, {/floor/nats_per_token} nats per token; not the whole "
			  "corpus's figure): "
			  "{/floor/gap_bits_per_byte} bits per byte, {/floor/gap_nats_per_token} nats per token.\n");
	size_t j;
	json_t *m;
	json_array_foreach(json_object_get(x, "samples"), j, m) {
		lmt_strbuf_printf(b, "%s", j ? "" : "\nSamples:\n\n");
		if (json_is_string(json_object_get(m, "prompt")))
			tpl(b, m, "- {/prompt} → {/text}\n");
		else
			tpl(b, m, "- {/text}\n");
	}
	json_array_foreach(json_object_get(x, "memorization"), j, m) {
		tpl(b, m, j ? "" : "\n");
		tpl(b, m, "Memorization, {/split} split: {/fraction}");
		json_t *ci = json_object_get(m, "fraction_ci");
		if (json_array_size(ci) == 2)
			lmt_strbuf_printf(b, " [%.4g, %.4g]", num(json_array_get(ci, 0)), num(json_array_get(ci, 1)));
		tpl(b, m, " of {/documents} documents continue with their next {/continuation} tokens exactly, "
			  "given their first {/prefix}.\n\n");
	}
}

static void card_md(struct lmt_runcard *c, struct lmt_runcard_files *f)
{
	json_t *R = c->root;
	struct lmt_strbuf b = { 0 };
	size_t i;
	json_t *x;
	tpl(&b, R, "# Model card: {/run_id}\n\n"
		   "A GPT-2 language model trained with lmt. Generated by runcard from the run's own files: every "
		   "figure here is in `runcard.yaml` with the file it comes from.\n\n");

	tpl(&b, R, "## Model details\n\n"
		   "- Architecture: GPT-2 (decoder-only transformer, pre-LayerNorm, learned positions, GELU): "
		   "{/model/layers} layers, {/model/heads} heads, {/model/channels} channels, a context of "
		   "{/model/context} tokens, ");
	lmt_strbuf_printf(&b, "the output head %s the token embedding.\n",
		  json_is_true(lmt_jsonptr_get(R, "/model/untied")) ? "separate from" : "tied to");
	tpl(&b, R, "- Parameters: {/model/parameters} (embeddings {/model/parameters_embedding}, matrices "
		   "{/model/parameters_matrix}, biases {/model/parameters_bias}, norms {/model/parameters_norm}; "
		   "{/model/parameters_vocab_padding} of them in the vocabulary's padding rows).\n"
		   "- Vocabulary: {/tokenizer/vocab} tokens, byte-level BPE (tokenizer SHA-256 "
		   "`{/tokenizer_sha256}`).\n"
		   "- Initialisation: {/model/init}, seed {/model/init_seed}.\n"
		   "- Trained by lmt {/library_version}, revision `{/code_revision}`");
	lmt_strbuf_printf(&b, "%s", json_is_true(lmt_jsonptr_get(R, "/code_dirty")) ? " (with uncommitted changes)" : "");
	tpl(&b, R, "; run id `{/run_id}`; status {/status}.\n\n");

	lmt_strbuf_printf(&b, "## Intended uses\n\n"
		      "A record of what this run produced: a model that continues text like its training data, for "
		      "studying training, comparing runs, and testing tools that load GPT-2 checkpoints. The owner "
		      "of the run should state any further intended use here.\n\n");
	tpl(&b, R, "## Out-of-scope uses\n\n"
		   "- Anything that relies on facts, reasoning or safe behaviour: the model was neither trained nor "
		   "evaluated for them.\n"
		   "- Text unlike the training data (other languages, domains or formats), and contexts longer than "
		   "{/optimization/seq_len} tokens.\n"
		   "- Decisions about people.\n\n");

	tpl(&b, R, "## Training data\n\n"
		   "The dataset `{/data/dir}` (manifest SHA-256 `{/dataset_manifest_sha256}`): {/data/input_documents} "
		   "documents, {/data/input_tokens} tokens from {/data/input_text_bytes} of text, packed into "
		   "sequences of {/data/seq_len} tokens and split by document ({/data/split_rule}).\n\n"
		   "| split | documents | sequences | tokens |\n|---|---:|---:|---:|\n"
		   "| train | {/data/splits/train/documents} | {/data/splits/train/sequences} | "
		   "{/data/splits/train/tokens} |\n"
		   "| val | {/data/splits/val/documents} | {/data/splits/val/sequences} | {/data/splits/val/tokens} |\n"
		   "| test | {/data/splits/test/documents} | {/data/splits/test/sequences} | "
		   "{/data/splits/test/tokens} |\n");
	if (json_is_number(lmt_jsonptr_get(R, "/data/unigram_baseline_nats_per_token")))
		tpl(&b, R, "\nUnigram baseline: {/data/unigram_baseline_nats_per_token} nats per token, the loss of a "
			   "model that predicts every token by its frequency in the train split, ignoring the context "
			   "(a dashed line in the loss plot).\n");
	json_t *srcs = lmt_jsonptr_get(R, "/data/sources");
	if (json_array_size(srcs))
		lmt_strbuf_printf(&b, "\n| source | train documents | train tokens | val documents | val tokens |\n"
			      "|---|---:|---:|---:|---:|\n");
	json_array_foreach(srcs, i, x)
		tpl(&b, x, "| `{/name}` | {/train_documents} | {/train_tokens} | {/val_documents} | {/val_tokens} |\n");
	json_t *dd = lmt_jsonptr_get(R, "/data/dedup");
	if (json_is_object(dd)) {
		tpl(&b, dd, "\nDeduplication (dedup-minhash: MinHash signatures of {/num_perm} values, Jaccard threshold "
			    "{/threshold}): of {/documents} documents {/kept} were kept; {/removed_exact} exact and "
			    "{/removed_near} near duplicates were removed. Decontamination: ");
		if (json_is_null(json_object_get(dd, "decontamination_documents")))
			lmt_strbuf_printf(&b, "none (dedup-minhash was given no evaluation sets).\n");
		else
			tpl(&b, dd, "{/removed_contamination} documents removed for overlap with "
				    "{/decontamination_documents} evaluation documents ({/decontamination_ngram}-word "
				    "n-grams).\n");
	} else {
		lmt_strbuf_printf(&b, "\nDeduplication and decontamination: not given to runcard (--dedup).\n");
	}
	if (json_is_object(lmt_jsonptr_get(R, "/data/corpus")))
		tpl(&b, R, "\nThe corpus is generated (gen-corpus) with a known probability per document: its "
			   "whole corpus's entropy is {/data/corpus/entropy_bits_per_byte} bits per byte, a floor no model "
			   "can beat on it ({/data/corpus/documents} documents, {/data/corpus/bytes}); the evaluated "
			   "split's own floor, below, differs by which documents it holds.\n");

	tpl(&b, R, "\n## Training procedure\n\n"
		   "- Optimizer: AdamW; learning rate {/optimization/lr} after {/optimization/warmup} warm-up "
		   "updates, {/optimization/schedule} decay to {/optimization/min_lr_frac} of it; betas "
		   "{/optimization/beta1}, {/optimization/beta2}, eps {/optimization/eps}, weight decay "
		   "{/optimization/weight_decay}, gradients clipped to norm {/optimization/clip}.\n"
		   "- Batch: {/optimization/global_batch_sequences} sequences, {/optimization/global_batch_tokens} "
		   "tokens per update ({/optimization/micro_batch} sequences per micro-batch, {/optimization/accum} "
		   "micro-batch(es), {/topology/world} rank(s)); precision {/optimization/precision}.\n"
		   "- Length: {/clocks/updates} updates of {/optimization/updates_planned} planned, "
		   "{/data/tokens_trained} tokens (valid targets), {/data/epochs} passes over the train split.\n"
		   "- Time and cost: {/clocks/wall_s} s of wall time to the last update ({/clocks/wall_s_total} s to "
		   "the end of the run, start-up excluded); {/cost/device_hours} device-hours on {/cost/devices} "
		   "× {/cost/device}.\n");
	if (lmt_jsonptr_get(R, "/cost/usd"))
		tpl(&b, R, "- Money: {/cost/usd} USD at {/cost/usd_per_device_hour} USD per device-hour (as given).\n");
	tpl(&b, R, ""
		   "- At the end: training loss {/final/train_loss}, validation loss {/final/val_loss} nats per token "
		   "(update {/final/val_loss_update}); {/final/tokens_per_s} tokens per second, MFU {/final/mfu}.\n"
		   "- History: {/history/interruptions} interruption(s), {/history/resumes} resume(s), "
		   "{/history/replayed_updates} update(s) replayed:\n");
	json_array_foreach(lmt_jsonptr_get(R, "/history/processes"), i, x) {
		tpl(&b, x, "  - {/began} at update {/at_update}");
		if (json_object_get(x, "from"))
			tpl(&b, x, " from `{/from}`");
		if (json_is_null(json_object_get(x, "ended"))) {
			lmt_strbuf_printf(&b, "; no end recorded (killed or crashed)\n");
			continue;
		}
		tpl(&b, x, "; {/ended} at update {/ended_at_update}");
		if (json_object_get(x, "detail"))
			tpl(&b, x, " ({/detail})");
		lmt_strbuf_printf(&b, "\n");
	}
	json_t *cks = lmt_jsonptr_get(R, "/checkpoints");
	if (json_array_size(cks))
		lmt_strbuf_printf(&b, "\n| checkpoint of update | bytes | write s | pause s | async | retained |\n"
			      "|---:|---:|---:|---:|---|---|\n");
	json_array_foreach(cks, i, x)
		tpl(&b, x, "| {/update} | {/bytes} | {/write_s} | {/pause_s} | {/async} | {/retained} |\n");

	tpl(&b, R, "\n## Evaluation\n\n"
		   "train's validation loss: {/final/val_loss} nats per token on {/final/val_loss_tokens} tokens of "
		   "the val split at update {/final/val_loss_update} (no interval).\n");
	json_t *evs = lmt_jsonptr_get(R, "/evaluation");
	if (!json_is_array(evs))
		lmt_strbuf_printf(&b, "\nNo results of evalppl were given (--eval, or RUN/eval/*.jsonl).\n");
	json_array_foreach(evs, i, x)
		md_evaluation(&b, x);

	lmt_strbuf_printf(&b, "\n## Limitations\n\n");
	json_array_foreach(lmt_jsonptr_get(R, "/known_limitations"), i, x) {
		lmt_strbuf_printf(&b, "- ");
		md(&b, json_string_value(x), 0);
		lmt_strbuf_printf(&b, "\n");
	}
	json_t *miss = lmt_jsonptr_get(R, "/missing");
	if (json_array_size(miss))
		lmt_strbuf_printf(&b, "- This card is incomplete: %zu field(s) could not be filled:\n", json_array_size(miss));
	json_array_foreach(miss, i, x)
		tpl(&b, x, "  - `{/field}`: {/why}\n");

	tpl(&b, R, "\n## Technical specifications\n\n"
		   "- Hardware: {/hardware/cpu} ({/hardware/cpus_online} CPUs online, {/hardware/memory_bytes} "
		   "of memory), accelerator {/hardware/accelerator}; host `{/hardware/host}`.\n"
		   "- Topology: {/topology/world} rank(s) on {/topology/nodes} node(s), {/topology/threads_per_rank} "
		   "thread(s) per rank, communicator {/topology/communicator}; backend {/backend}.\n"
		   "- Compute: {/model/flops_per_token} training FLOPs per token; peak {/hardware/peak_flops} "
		   "({/hardware/peak_source}).\n"
		   "- Memory at the last update: parameters {/final/memory/params}, gradients "
		   "{/final/memory/grads}, optimizer state {/final/memory/optimizer}, activations "
		   "{/final/memory/activations}; peak resident size {/final/memory/peak_rss}.\n"
		   "- Release (runcard --release): the newest checkpoint, of update {/final_checkpoint/update}, as a "
		   "Hugging Face GPT-2 (`model.safetensors`, `config.json`), the tokenizer as `tokenizer.lmtok` "
		   "(lmt) and `tokenizer.json` (Hugging Face), this card, its plots, and `SHA256SUMS`.\n");

	lmt_strbuf_printf(&b, "\n## Plots\n\n");
	static const char *const titles[] = { "Training and validation loss against tokens", "Learning rate",
					      "Gradient norm and clipped fraction", "Throughput and MFU", "Memory" };
	for (size_t k = 0; k < LMT_ARRAY_SIZE(plot_names); k++)
		lmt_strbuf_printf(&b, "![%s](plots/%s.svg)\n\n", titles[k], plot_names[k]);
	if (b.oom)
		oom(c);
	f->nmd = b.len;
	f->md = lmt_strbuf_detach(&b);
}


/* ---- the card ---- */

int lmt_runcard_new(struct lmt_runcard **out, const struct lmt_runcard_opts *opts, struct lmt_err *err)
{
	*out = NULL;
	struct stat st;
	if (stat(opts->run, &st) || !S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_ENOTFOUND, "'%s' is not a run directory", opts->run);
	struct lmt_runcard *c = calloc(1, sizeof *c);
	if (!c)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	c->o = *opts;

	/* the sources, in the order of the inputs: list */
	const char *const *evals = opts->eval;
	int neval = opts->neval;
	if (!neval) {
		char *pat = str(c, "%s/eval/*.jsonl", opts->run);
		if (pat && glob(pat, 0, NULL, &c->evals) == 0) { /* sorted */
			evals = (const char *const *)c->evals.gl_pathv;
			neval = (int)c->evals.gl_pathc;
		}
		free(pat);
	}
	c->nsrc = S_EVAL0 + neval;
	c->src = calloc((size_t)c->nsrc, sizeof *c->src);
	c->root = json_object();
	c->prov = json_object();
	c->missing = json_array();
	if (!c->src || !c->root || !c->prov || !c->missing) {
		c->nsrc = 0;
		oom(c);
		goto out;
	}
	static const struct {
		const char *label;
		int kind;
	} fixed[] = {
		{ "config", KIND_JSON },  { "params", KIND_JSON },  { "metrics", KIND_JSONL }, { "events", KIND_JSONL },
		{ "checkpoint", KIND_JSON }, { "dataset", KIND_JSON }, { "tokenizer", KIND_BLOB }, { "dedup", KIND_JSON },
		{ "corpus", KIND_JSONL },
	};
	for (int i = 0; i < S_EVAL0; i++) {
		c->src[i].label = fixed[i].label;
		c->src[i].kind = fixed[i].kind;
	}
	src_path(c, S_CONFIG, "%s/config.json", opts->run);
	src_path(c, S_PARAMS, "%s/params.json", opts->run);
	src_path(c, S_METRICS, "%s/metrics.jsonl", opts->run);
	src_path(c, S_EVENTS, "%s/events.jsonl", opts->run);
	if (opts->dedup) {
		src_path(c, S_DEDUP, "%s", opts->dedup);
		c->src[S_DEDUP].option = "--dedup";
	}
	if (opts->corpus) {
		src_path(c, S_CORPUS, "%s", opts->corpus);
		c->src[S_CORPUS].option = "--corpus";
	}
	c->src[S_DATASET].option = opts->data ? "--data, and manifest.json in it" : "config#/data/dir, and manifest.json in it";
	c->src[S_TOKENIZER].option = opts->tokenizer ? "-t" : "config#/data/tokenizer";
	for (int i = 0; i < neval; i++) {
		struct src *s = &c->src[S_EVAL0 + i];
		s->label = str(c, "eval%d", i + 1);
		s->kind = KIND_JSONL;
		s->option = opts->neval ? "--eval" : "RUN/eval/*.jsonl";
		src_path(c, S_EVAL0 + i, "%s", evals[i]);
	}
	if (!c->err.code)
		build_card(c);
out:
	if (c->err.code) {
		if (err)
			*err = c->err;
		int code = c->err.code;
		lmt_runcard_free(c);
		return code;
	}
	*out = c;
	return 0;
}

void lmt_runcard_free(struct lmt_runcard *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nsrc; i++) {
		struct src *s = &c->src[i];
		free(s->path);
		free(s->raw);
		json_decref(s->doc);
		for (size_t k = 0; k < s->nline; k++)
			json_decref(s->line[k]);
		free(s->line);
		if (i >= S_EVAL0)
			free((char *)s->label);
	}
	free(c->src);
	free(c->ckpt_dir);
	json_decref(c->root);
	json_decref(c->prov);
	json_decref(c->missing);
	globfree(&c->evals);
	free(c);
}

const char *lmt_runcard_run_id(const struct lmt_runcard *c)
{
	return json_string_value(json_object_get(c->root, "run_id"));
}

size_t lmt_runcard_nmissing(const struct lmt_runcard *c)
{
	return json_array_size(c->missing);
}

const char *lmt_runcard_checkpoint(const struct lmt_runcard *c)
{
	return c->ckpt_dir;
}

int lmt_runcard_input(const struct lmt_runcard *c, const char *label, struct lmt_runcard_input *in)
{
	for (int i = 0; i < c->nsrc; i++) {
		const struct src *s = &c->src[i];
		if (!s->label || strcmp(s->label, label))
			continue;
		in->path = s->path;
		in->ok = s->ok;
		in->why = s->why;
		in->data = s->raw;
		in->size = s->nraw;
		return 0;
	}
	return LMT_ENOTFOUND;
}

int lmt_runcard_render(struct lmt_runcard *c, struct lmt_runcard_files *f, struct lmt_err *err)
{
	memset(f, 0, sizeof *f);
	card_yaml(c, f);
	make_plots(c, f->plot);
	card_md(c, f);
	if (c->err.code) {
		if (err)
			*err = c->err;
		return c->err.code;
	}
	return 0;
}

/* Open dir/name's temporary and write data into it; the rename waits for
 * lmt_atomicfile_commit_all. */
static int write_out(struct lmt_atomicfile *af, const char *dir, const char *name, const char *data, size_t n,
		     struct lmt_err *err)
{
	struct lmt_strbuf p = { 0 };
	lmt_strbuf_printf(&p, "%s/%s", dir, name);
	int rc = p.oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory") : lmt_atomicfile_open(af, p.buf, err);
	if (!rc && n && fwrite(data, 1, n, af->fp) != n) {
		rc = lmt_err_errno(err, "'%s': write", p.buf);
		lmt_atomicfile_abort(af);
	}
	lmt_strbuf_release(&p);
	return rc;
}

/* mkdir d; *made says whether this call made it (a failed card removes only that) */
static int mkdir_1(const char *d, int *made, struct lmt_err *err)
{
	*made = mkdir(d, 0755) == 0;
	if (!*made && errno != EEXIST)
		return lmt_err_errno(err, "'%s'", d);
	return 0;
}

/* The card's files are committed together (lmt_atomicfile_commit_all): a write
 * error in any of them (a full disk) leaves none in place, and an earlier card
 * whole, rather than new plots beside an old card. */
int lmt_runcard_files_write(const struct lmt_runcard_files *f, const char *dir, struct lmt_err *err)
{
	struct lmt_strbuf pd = { 0 };
	lmt_strbuf_printf(&pd, "%s/plots", dir);
	if (pd.oom)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	struct lmt_atomicfile af[LMT_RUNCARD_NPLOTS + 2];
	struct lmt_atomicfile *afs[LMT_RUNCARD_NPLOTS + 2];
	memset(af, 0, sizeof af);
	for (int i = 0; i < LMT_RUNCARD_NPLOTS + 2; i++)
		afs[i] = &af[i];
	int made_dir = 0, made_plots = 0;
	int rc = mkdir_1(dir, &made_dir, err);
	if (!rc)
		rc = mkdir_1(pd.buf, &made_plots, err);
	for (int i = 0; i < LMT_RUNCARD_NPLOTS && !rc; i++)
		rc = write_out(&af[i], pd.buf, f->plot[i].name, f->plot[i].svg, f->plot[i].len, err);
	if (!rc)
		rc = write_out(&af[LMT_RUNCARD_NPLOTS], dir, "RUNCARD.md", f->md, f->nmd, err);
	if (!rc)
		rc = write_out(&af[LMT_RUNCARD_NPLOTS + 1], dir, "runcard.yaml", f->yaml, f->nyaml, err);
	if (rc) {
		for (int i = 0; i < LMT_RUNCARD_NPLOTS + 2; i++)
			lmt_atomicfile_abort(&af[i]);
	} else {
		rc = lmt_atomicfile_commit_all(afs, LMT_RUNCARD_NPLOTS + 2, err);
	}
	if (rc && made_plots) /* remove(): rmdir for a directory, and no unistd.h's dup() */
		remove(pd.buf);
	if (rc && made_dir)
		remove(dir);
	lmt_strbuf_release(&pd);
	return rc;
}

void lmt_runcard_files_release(struct lmt_runcard_files *f)
{
	free(f->yaml);
	free(f->md);
	for (int i = 0; i < LMT_RUNCARD_NPLOTS; i++)
		free(f->plot[i].svg);
	memset(f, 0, sizeof *f);
}
