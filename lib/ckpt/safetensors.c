/*
 * safetensors.c: a checkpoint's model as GPT-2 in safetensors, and its config.json
 * (see safetensors.h for both layouts and the conversions).
 *
 * The header is computed from the model's shape before any tensor is read, so the
 * file is written front to back in one pass: one source tensor in memory at a
 * time, each converted (and transposed where GPT-2's Conv1D wants (in, out))
 * straight into an output buffer of one layer's slice.
 */
#include "ckpt/safetensors.h"
#include "ckpt/trainstate.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/json.h"
#include "core/util.h"
#include "core/version.h"

/* ---- dtypes ---- */

int lmt_st_dtype_parse(const char *s)
{
	if (!strcmp(s, "fp32") || !strcmp(s, "f32") || !strcmp(s, "float32"))
		return LMT_ST_DTYPE_F32;
	if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16"))
		return LMT_ST_DTYPE_BF16;
	if (!strcmp(s, "fp16") || !strcmp(s, "f16") || !strcmp(s, "float16"))
		return LMT_ST_DTYPE_F16;
	return -1;
}

const char *lmt_st_dtype_name(int dtype)
{
	return dtype == LMT_ST_DTYPE_BF16 ? "BF16" : dtype == LMT_ST_DTYPE_F16 ? "F16" : "F32";
}

const char *lmt_st_dtype_torch(int dtype)
{
	return dtype == LMT_ST_DTYPE_BF16 ? "bfloat16" : dtype == LMT_ST_DTYPE_F16 ? "float16" : "float32";
}

/* ---- the GPT-2 mapping ---- */

/* lmt's parameters (model.h order) and GPT-2's names for them. */
static const struct param {
	const char *src;
	const char *dst;             /* printf format; %d: the layer */
	int layered, transpose, vocab_rows;
} params[] = {
	{ "wte", "transformer.wte.weight", 0, 0, 1 },
	{ "wpe", "transformer.wpe.weight", 0, 0, 0 },
	{ "ln1w", "transformer.h.%d.ln_1.weight", 1, 0, 0 },
	{ "ln1b", "transformer.h.%d.ln_1.bias", 1, 0, 0 },
	{ "qkvw", "transformer.h.%d.attn.c_attn.weight", 1, 1, 0 },
	{ "qkvb", "transformer.h.%d.attn.c_attn.bias", 1, 0, 0 },
	{ "attprojw", "transformer.h.%d.attn.c_proj.weight", 1, 1, 0 },
	{ "attprojb", "transformer.h.%d.attn.c_proj.bias", 1, 0, 0 },
	{ "ln2w", "transformer.h.%d.ln_2.weight", 1, 0, 0 },
	{ "ln2b", "transformer.h.%d.ln_2.bias", 1, 0, 0 },
	{ "fcw", "transformer.h.%d.mlp.c_fc.weight", 1, 1, 0 },
	{ "fcb", "transformer.h.%d.mlp.c_fc.bias", 1, 0, 0 },
	{ "fcprojw", "transformer.h.%d.mlp.c_proj.weight", 1, 1, 0 },
	{ "fcprojb", "transformer.h.%d.mlp.c_proj.bias", 1, 0, 0 },
	{ "lnfw", "transformer.ln_f.weight", 0, 0, 0 },
	{ "lnfb", "transformer.ln_f.bias", 0, 0, 0 },
	{ "lm_head", "lm_head.weight", 0, 0, 1 },
};
#define NPARAMS ((int)LMT_ARRAY_SIZE(params))

struct cfg {
	int L, NH, C, maxT, V, Vp, untied;
};

/* The shape model.h gives parameter p (without the leading L of a layered one). */
static void src_shape(const struct cfg *m, int p, int *ndim, uint64_t *shape)
{
	uint64_t C = (uint64_t)m->C;
	const char *n = params[p].src;
	*ndim = 1;
	if (!strcmp(n, "wte") || !strcmp(n, "lm_head")) {
		*ndim = 2, shape[0] = (uint64_t)m->Vp, shape[1] = C;
	} else if (!strcmp(n, "wpe")) {
		*ndim = 2, shape[0] = (uint64_t)m->maxT, shape[1] = C;
	} else if (!strcmp(n, "qkvw")) {
		*ndim = 2, shape[0] = 3 * C, shape[1] = C;
	} else if (!strcmp(n, "attprojw")) {
		*ndim = 2, shape[0] = C, shape[1] = C;
	} else if (!strcmp(n, "fcw")) {
		*ndim = 2, shape[0] = 4 * C, shape[1] = C;
	} else if (!strcmp(n, "fcprojw")) {
		*ndim = 2, shape[0] = C, shape[1] = 4 * C;
	} else if (!strcmp(n, "qkvb")) {
		shape[0] = 3 * C;
	} else if (!strcmp(n, "fcb")) {
		shape[0] = 4 * C;
	} else {
		shape[0] = C;
	}
}

static int read_cfg(const struct lmt_ckpt *c, struct cfg *m, struct lmt_err *err)
{
	struct lmt_gpt_config g;
	int rc = lmt_trainstate_model(c, &g, err);
	if (!rc)
		*m = (struct cfg){ g.L, g.NH, g.C, g.max_T, g.V, g.Vp, g.untied };
	return rc;
}

/* One output tensor: a slice of a source tensor. */
struct item {
	char name[96];
	int p, layer;
	uint64_t rows, cols;       /* the slice as (rows, cols) of the source (cols 1: a vector) */
	int ndim;
	uint64_t shape[2];         /* as written */
	uint64_t begin, end;       /* data_offsets, within its shard */
	int shard;
};

struct out {
	struct lmt_atomicfile af;
	struct lmt_sha256 sha;
	uint64_t bytes;
	const char *path;
};

static int out_write(struct out *o, const void *p, size_t n, struct lmt_err *err)
{
	if (n && fwrite(p, 1, n, o->af.fp) != n)
		return lmt_err_errno(err, "'%s': write", o->path);
	lmt_sha256_update(&o->sha, p, n);
	o->bytes += n;
	return 0;
}

/* dst[k] = convert(src[k]) for the slice, transposed if asked: src is (rows, cols)
 * row-major, the output (cols, rows). */
static void convert(const float *src, uint64_t rows, uint64_t cols, int transpose, int dtype, uint8_t *dst,
		    struct lmt_st_result *r)
{
	uint64_t n = rows * cols, over = 0, nan = 0;
	for (uint64_t k = 0; k < n; k++) {
		/* output element k: row k / cols of the source, or for a transpose, output
		 * row k / rows is source column, output column k % rows is source row */
		float v = transpose ? src[(k % rows) * cols + k / rows] : src[k];
		nan += isnan(v) != 0;
		if (dtype == LMT_ST_DTYPE_F32) {
			memcpy(dst + 4 * k, &v, 4);
			continue;
		}
		uint16_t h = dtype == LMT_ST_DTYPE_BF16 ? lmt_f32_to_bf16(v) : lmt_f32_to_f16(v);
		/* an infinity made from a finite value */
		over += isfinite(v) && (h & 0x7fffu) == (dtype == LMT_ST_DTYPE_BF16 ? 0x7f80u : 0x7c00u);
		memcpy(dst + 2 * k, &h, 2);
	}
	r->overflow += over;
	r->nan += nan;
}

/* Into af, opened here; the caller commits it with the weights. */
static int write_config(const struct lmt_st_opts *o, const struct cfg *m, struct lmt_atomicfile *af,
			struct lmt_err *err)
{
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_arr(&j, "architectures");
	lmt_json_str(&j, NULL, "GPT2LMHeadModel");
	lmt_json_arr_end(&j);
	lmt_json_str(&j, "model_type", "gpt2");
	lmt_json_u64(&j, "vocab_size", (uint64_t)m->V);
	lmt_json_u64(&j, "n_positions", (uint64_t)m->maxT);
	lmt_json_u64(&j, "n_ctx", (uint64_t)m->maxT);
	lmt_json_u64(&j, "n_embd", (uint64_t)m->C);
	lmt_json_u64(&j, "n_layer", (uint64_t)m->L);
	lmt_json_u64(&j, "n_head", (uint64_t)m->NH);
	lmt_json_null(&j, "n_inner");
	lmt_json_str(&j, "activation_function", "gelu_new");
	lmt_json_num(&j, "layer_norm_epsilon", 1e-5);
	lmt_json_bool(&j, "scale_attn_weights", 1);
	lmt_json_bool(&j, "tie_word_embeddings", !m->untied);
	if (o->bos_id >= 0)
		lmt_json_i64(&j, "bos_token_id", o->bos_id);
	if (o->eos_id >= 0)
		lmt_json_i64(&j, "eos_token_id", o->eos_id);
	lmt_json_str(&j, "torch_dtype", lmt_st_dtype_torch(o->dtype));
	lmt_json_end(&j);
	int rc = 0;
	if (j.out.oom || LMT_GROW(j.out.buf, j.out.cap, j.out.len + 2))
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	else {
		j.out.buf[j.out.len++] = '\n';
		if (!(rc = lmt_atomicfile_open(af, o->config_path, err)) &&
		    fwrite(j.out.buf, 1, j.out.len, af->fp) != j.out.len) {
			rc = lmt_err_errno(err, "'%s': write", o->config_path);
			lmt_atomicfile_abort(af);
		}
	}
	lmt_json_release(&j);
	return rc;
}

/* Shards as consecutive runs of items (whose begin/end are offsets in the data as
 * one file): made relative to their shard here. Returns the count. */
static int shard_layout(struct item *it, int n, uint64_t max)
{
	int s = 0;
	uint64_t used = 0;
	for (int i = 0; i < n; i++) {
		uint64_t sz = it[i].end - it[i].begin;
		if (max && used && (used + sz > max || sz > max))
			s++, used = 0;
		it[i].shard = s;
		it[i].begin = used;
		used += sz;
		it[i].end = used;
		if (max && sz > max && i + 1 < n)
			s++, used = 0; /* alone in its shard */
	}
	return s + 1;
}

/* Open shard s (out->path set) and write its header; *want: the bytes it will hold. */
static int shard_begin(struct out *out, const struct lmt_ckpt *c, const struct lmt_st_opts *o, const struct item *items,
		       int n, int s, uint64_t *want, struct lmt_st_result *r, struct lmt_err *err)
{
	struct lmt_json j;
	char upd[32];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_obj(&j, "__metadata__");
	lmt_json_str(&j, "format", "pt");
	lmt_json_str(&j, "producer", "lmt " LMT_VERSION);
	snprintf(upd, sizeof upd, "%llu", (unsigned long long)c->update);
	lmt_json_str(&j, "lmt_update", upd);
	json_t *ts = lmt_ckpt_state(c, "tokenizer_sha256");
	if (json_is_string(ts))
		lmt_json_str(&j, "lmt_tokenizer_sha256", json_string_value(ts));
	lmt_json_obj_end(&j);
	uint64_t data = 0;
	for (int i = 0; i < n; i++) {
		if (items[i].shard != s)
			continue;
		lmt_json_obj(&j, items[i].name);
		lmt_json_str(&j, "dtype", lmt_st_dtype_name(o->dtype));
		lmt_json_arr(&j, "shape");
		for (int d = 0; d < items[i].ndim; d++)
			lmt_json_u64(&j, NULL, items[i].shape[d]);
		lmt_json_arr_end(&j);
		lmt_json_arr(&j, "data_offsets");
		lmt_json_u64(&j, NULL, items[i].begin);
		lmt_json_u64(&j, NULL, items[i].end);
		lmt_json_arr_end(&j);
		lmt_json_obj_end(&j);
		data = items[i].end;
	}
	lmt_json_end(&j);
	while (!j.out.oom && j.out.len % 8 && !LMT_GROW(j.out.buf, j.out.cap, j.out.len + 1))
		j.out.buf[j.out.len++] = ' ';
	int rc = 0;
	out->bytes = 0;
	if (j.out.oom || j.out.len % 8)
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	else if (!(rc = lmt_atomicfile_open(&out->af, out->path, err))) {
		if (lmt_sha256_init(&out->sha)) {
			lmt_atomicfile_abort(&out->af);
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		} else {
			uint8_t len8[8];
			lmt_store_u64(len8, (uint64_t)j.out.len);
			if (!(rc = out_write(out, len8, 8, err)))
				rc = out_write(out, j.out.buf, j.out.len, err);
		}
	}
	if (s == 0)
		r->header_bytes = j.out.len;
	*want = 8 + j.out.len + data;
	lmt_json_release(&j);
	return rc;
}

/* Check a shard's size and finish it (its temporary kept for the commit). */
static int shard_end(struct out *out, uint64_t want, struct lmt_st_result *r, struct lmt_err *err)
{
	if (out->bytes != want)
		return lmt_err_set(err, LMT_EINVAL, "'%s': wrote %llu bytes, the header accounts for %llu", out->path,
				   (unsigned long long)out->bytes, (unsigned long long)want);
	uint8_t sha[LMT_SHA256_LEN];
	lmt_sha256_final(&out->sha, sha);
	memcpy(r->sha256, sha, sizeof sha);
	r->bytes += out->bytes;
	return lmt_atomicfile_finish(&out->af, err);
}

/* PATH.index.json, as transformers writes it: json.dumps(index, indent=2,
 * sort_keys=True) + "\n" (jansson's JSON_INDENT(2) | JSON_SORT_KEYS is that form
 * for these ASCII names). */
static int write_index(const char *path, const struct item *items, int n, const char *names, size_t stride,
		       uint64_t total, struct lmt_atomicfile *af, uint8_t *sha, struct lmt_err *err)
{
	char ip[4200];
	if (snprintf(ip, sizeof ip, "%s.index.json", path) >= (int)sizeof ip)
		return lmt_err_set(err, LMT_ERANGE, "'%s': path too long", path);
	json_t *idx = json_object(), *md = json_object(), *wm = json_object();
	json_object_set_new(md, "total_size", json_integer((json_int_t)total));
	json_object_set_new(idx, "metadata", md);
	json_object_set_new(idx, "weight_map", wm);
	for (int i = 0; i < n; i++) {
		const char *f = names + (size_t)items[i].shard * stride, *sl = strrchr(f, '/');
		json_object_set_new(wm, items[i].name, json_string(sl ? sl + 1 : f));
	}
	char *text = json_dumps(idx, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(idx);
	size_t len = text ? strlen(text) : 0;
	char *nl = text ? realloc(text, len + 2) : NULL;
	if (!nl) {
		free(text);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	text = nl;
	text[len++] = '\n';
	lmt_sha256(text, len, sha);
	int rc = lmt_atomicfile_open(af, ip, err);
	if (!rc && fwrite(text, 1, len, af->fp) != len) {
		rc = lmt_err_errno(err, "'%s': write", ip);
		lmt_atomicfile_abort(af);
	}
	free(text);
	if (!rc)
		rc = lmt_atomicfile_finish(af, err);
	return rc;
}

int lmt_st_parse_size(const char *s, uint64_t *bytes, struct lmt_err *err)
{
	static const struct { const char *u; double m; } units[] = {
		{ "", 1 }, { "B", 1 }, { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 }, { "TB", 1e12 },
		{ "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 }, { "TiB", 1099511627776.0 },
	};
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !(v > 0) || *s == '-' || *s == '+' || *s == ' ')
		return lmt_err_set(err, LMT_EINVAL, "'%s' is not a size (bytes, or a number with KB, MB, GB, KiB, MiB, GiB)", s);
	for (size_t k = 0; k < LMT_ARRAY_SIZE(units); k++)
		if (!strcmp(end, units[k].u)) {
			double b = v * units[k].m;
			if (b < 1 || b > 1e18)
				break;
			*bytes = (uint64_t)b;
			return 0;
		}
	return lmt_err_set(err, LMT_EINVAL, "'%s' is not a size (bytes, or a number with KB, MB, GB, KiB, MiB, GiB)", s);
}

int lmt_safetensors_export_gpt2(const struct lmt_ckpt *c, const struct lmt_st_opts *o, struct lmt_st_result *r,
				struct lmt_err *err)
{
	memset(r, 0, sizeof *r);
	struct cfg m;
	int rc = read_cfg(c, &m, err);
	if (rc)
		return rc;
	size_t es = o->dtype == LMT_ST_DTYPE_F32 ? 4 : 2;

	/* the source tensors, checked, and the output tensors they make */
	const struct lmt_ckpt_entry *src[NPARAMS] = { 0 };
	struct item *items = NULL;
	int n = 0;
	uint64_t off = 0, max_src = 0, max_slice = 0;
	for (int p = 0; p < NPARAMS; p++) {
		if (!strcmp(params[p].src, "lm_head") && !m.untied)
			continue;
		char name[80];
		snprintf(name, sizeof name, "param/%s", params[p].src);
		const struct lmt_ckpt_entry *e = lmt_ckpt_find(c, name);
		int nd;
		uint64_t sh[2] = { 1, 1 }, want[3];
		src_shape(&m, p, &nd, sh);
		int wnd = 0;
		if (params[p].layered)
			want[wnd++] = (uint64_t)m.L;
		for (int d = 0; d < nd; d++)
			want[wnd++] = sh[d];
		int same = e && e->ndim == wnd;
		for (int d = 0; same && d < wnd; d++)
			same = (uint64_t)e->shape[d] == want[d];
		if (!same) {
			char ws[96] = "", hs[96] = "";
			for (int d = 0; d < wnd; d++)
				snprintf(ws + strlen(ws), sizeof ws - strlen(ws), "%s%llu", d ? " " : "", (unsigned long long)want[d]);
			for (int d = 0; e && d < e->ndim; d++)
				snprintf(hs + strlen(hs), sizeof hs - strlen(hs), "%s%d", d ? " " : "", e->shape[d]);
			rc = e ? lmt_err_set(err, LMT_EFORMAT, "'%s': tensor '%s' has shape [%s], state.model implies [%s]",
					     c->dir, name, hs, ws)
			       : lmt_err_set(err, LMT_EFORMAT, "'%s': no tensor '%s' (state.model needs it)", c->dir, name);
			return rc;
		}
		src[p] = e;
	}
	/* the shapes first: state.model's layer count sizes this only once the tensors
	 * have been found to hold that many layers */
	items = calloc((size_t)NPARAMS * (size_t)m.L + 1, sizeof *items);
	if (!items)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int p = 0; p < NPARAMS; p++) {
		const struct lmt_ckpt_entry *e = src[p];
		int nd;
		uint64_t sh[2] = { 1, 1 };
		if (!e)
			continue; /* lm_head of a tied model */
		src_shape(&m, p, &nd, sh);
		max_src = LMT_MAX(max_src, e->numel);
		for (int l = 0; l < (params[p].layered ? m.L : 1); l++) {
			struct item *it = &items[n++];
			snprintf(it->name, sizeof it->name, params[p].dst, l);
			it->p = p;
			it->layer = l;
			it->rows = params[p].vocab_rows ? (uint64_t)m.V : sh[0];
			it->cols = nd == 2 ? sh[1] : 1;
			it->ndim = nd;
			if (params[p].transpose)
				it->shape[0] = it->cols, it->shape[1] = it->rows;
			else
				it->shape[0] = it->rows, it->shape[1] = it->cols;
			it->begin = off; /* of the data as one file; shard_layout makes them the shards' */
			off += it->rows * it->cols * es;
			it->end = off;
			max_slice = LMT_MAX(max_slice, it->rows * it->cols);
		}
	}

	r->data_bytes = off;
	int nsh = shard_layout(items, n, o->max_shard);
	if (nsh > LMT_ST_SHARD_MAX) {
		free(items);
		return lmt_err_set(err, LMT_ERANGE, "'%s': %d shards, more than the %d that HF's names number",
				   o->path, nsh, LMT_ST_SHARD_MAX);
	}
	size_t pl = strlen(o->path);
	const char *ext = ".safetensors";
	size_t stem = pl >= strlen(ext) && !strcmp(o->path + pl - strlen(ext), ext) ? pl - strlen(ext) : pl;
	char *names = calloc((size_t)nsh, pl + 32);
	if (!names) {
		free(items);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (int s = 0; s < nsh; s++) {
		char *nm = names + (size_t)s * (pl + 32);
		if (nsh == 1)
			memcpy(nm, o->path, pl + 1);
		else
			snprintf(nm, pl + 32, "%.*s-%05d-of-%05d.safetensors", (int)stem, o->path, s + 1, nsh);
	}

	float *buf = malloc((size_t)max_src * 4 + 4);
	uint8_t *cv = malloc((size_t)max_slice * es + 4);
	struct lmt_atomicfile *afs = calloc((size_t)nsh + 2, sizeof *afs);
	struct out out = { .af.slot = -1 };
	struct lmt_json j;
	lmt_json_init(&j);
	if (!buf || !cv || !afs) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto done;
	}
	for (int s = 0; s < nsh + 2; s++)
		afs[s].slot = -1;
	r->peak_buffer = max_src * 4 + max_slice * es;

	/* the tensors, one source tensor at a time, into the shard each belongs to */
	int cur = -1;
	uint64_t want = 0;
	for (int i = 0; i < n;) {
		int p = items[i].p;
		if ((rc = lmt_ckpt_read(c, src[p], buf, err)))
			goto fail;
		for (; i < n && items[i].p == p; i++) {
			const struct item *it = &items[i];
			if (it->shard != cur) {
				if (cur >= 0) {
					if ((rc = shard_end(&out, want, r, err)))
						goto fail;
					afs[cur] = out.af;
					out.af = (struct lmt_atomicfile){ .slot = -1 };
				}
				cur = it->shard;
				out.path = names + (size_t)cur * (pl + 32);
				if ((rc = shard_begin(&out, c, o, items, n, cur, &want, r, err)))
					goto fail;
			}
			uint64_t slice = src[p]->numel / (params[p].layered ? (uint64_t)m.L : 1);
			convert(buf + (uint64_t)it->layer * slice, it->rows, it->cols, params[p].transpose, o->dtype, cv, r);
			if ((rc = out_write(&out, cv, (size_t)(it->end - it->begin), err)))
				goto fail;
			r->elements += it->rows * it->cols;
		}
	}
	if ((rc = shard_end(&out, want, r, err)))
		goto fail;
	afs[cur] = out.af; /* finished: its temporary kept for the commit */
	out.af = (struct lmt_atomicfile){ .slot = -1 };
	r->tensors = n;
	r->shards = nsh;
	if (nsh > 1) {
		if ((rc = write_index(o->path, items, n, names, pl + 32, off, &afs[nsh], r->sha256, err)))
			goto fail;
	}
	if (o->config_path && (rc = write_config(o, &m, &afs[nsh + 1], err)))
		goto fail;
	/* the weights, the index and the config are committed together, so they never disagree */
	struct lmt_atomicfile **ptrs = calloc((size_t)nsh + 2, sizeof *ptrs);
	if (!ptrs) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto fail;
	}
	for (int s = 0; s < nsh + 2; s++)
		ptrs[s] = &afs[s];
	rc = lmt_atomicfile_commit_all(ptrs, (size_t)nsh + 2, err);
	free(ptrs);
	goto done;
fail:
	lmt_sha256_release(&out.sha);
	lmt_atomicfile_abort(&out.af);
	for (int s = 0; afs && s < nsh + 2; s++)
		lmt_atomicfile_abort(&afs[s]);
done:
	lmt_json_release(&j);
	free(buf);
	free(cv);
	free(afs);
	free(names);
	free(items);
	return rc;
}
