/*
 * export.c: a checkpoint's model as a directory for another toolkit (export.h):
 * the target's checks, the staging directory, its manifest and the swap into
 * place; Hugging Face's files beside the weights; llm.c's model and tokenizer.
 *
 * Every file is written into the staging directory, so the all-or-nothing rule
 * is the directory's, not each file's: nothing the export writes is visible under
 * the target's name before lmt_export_commit.
 */
#include "ckpt/export.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "ckpt/trainstate.h"
#include "core/atomicfile.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "core/util.h"
#include "core/version.h"
#include "data/tokinterop.h"

/* ---- the target ---- */

static int has(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	return snprintf(p, sizeof p, "%s/%s", dir, name) < (int)sizeof p && lstat(p, &st) == 0;
}

/* The names an earlier export's manifest lists, as a jansson object (or NULL). */
static json_t *export_names(const char *dir)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", dir, LMT_EXPORT_MANIFEST) >= (int)sizeof p)
		return NULL;
	json_t *m = json_load_file(p, 0, NULL), *names = NULL;
	const char *schema = json_string_value(json_object_get(m, "schema"));
	json_t *files = json_object_get(m, "files"), *f;
	size_t i;
	if (schema && !strcmp(schema, "lmt-export") && json_is_array(files)) {
		names = json_object();
		json_array_foreach(files, i, f) {
			const char *n = json_string_value(json_object_get(f, "path"));
			if (n)
				json_object_set_new(names, n, json_true());
		}
	}
	json_decref(m);
	return names;
}

int lmt_export_target(const char *out, int *earlier, struct lmt_err *err)
{
	struct stat st;
	*earlier = 0;
	if (lstat(out, &st)) {
		if (errno == ENOENT)
			return 0;
		return lmt_err_errno(err, "'%s'", out);
	}
	if (!S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_EINVAL, "'%s' exists and is not a directory: an export is a directory, and "
				   "ckpt-reshard replaces only an earlier export", out);
	if (has(out, "manifest.json"))
		return lmt_err_set(err, LMT_EINVAL, "'%s' is a checkpoint (or data set) directory: it holds a manifest.json; "
				   "export into a directory of its own", out);
	if (has(out, "ckpt") || has(out, "metrics.jsonl") || has(out, "events.jsonl") || has(out, "lock"))
		return lmt_err_set(err, LMT_EINVAL, "'%s' is a run directory: export into a directory of its own", out);
	DIR *d = opendir(out);
	if (!d)
		return lmt_err_errno(err, "'%s'", out);
	json_t *names = has(out, LMT_EXPORT_MANIFEST) ? export_names(out) : NULL;
	int rc = 0, any = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		any = 1;
		if (!strcmp(e->d_name, LMT_EXPORT_MANIFEST) && names)
			continue;
		if (!names) {
			rc = lmt_err_set(err, LMT_EINVAL, "'%s' exists and is not an earlier export (no %s): ckpt-reshard "
					 "replaces only its own exports", out, LMT_EXPORT_MANIFEST);
			break;
		}
		if (!json_object_get(names, e->d_name)) {
			rc = lmt_err_set(err, LMT_EINVAL, "'%s' holds '%s', which its %s does not list: not replacing what "
					 "the export did not write", out, e->d_name, LMT_EXPORT_MANIFEST);
			break;
		}
	}
	closedir(d);
	json_decref(names);
	if (!rc)
		*earlier = any;
	return rc;
}

int lmt_export_stage(const char *out, char *staging, size_t cap, struct lmt_err *err)
{
	size_t ol = strlen(out);
	while (ol > 1 && out[ol - 1] == '/')
		ol--;
	if (snprintf(staging, cap, "%.*s.partial-XXXXXX", (int)ol, out) >= (int)cap)
		return lmt_err_set(err, LMT_ERANGE, "'%s': path too long", out);
	if (!lmt_mkdtemp(staging)) {
		int rc = lmt_err_errno(err, "'%.*s': cannot create a staging directory next to it", (int)ol, out);
		staging[0] = 0;
		return rc;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct lmt_export_file *)a)->name, ((const struct lmt_export_file *)b)->name);
}

int lmt_export_seal(const char *staging, const char *format, const struct lmt_ckpt *c,
		    struct lmt_export_file **files, int *n, struct lmt_err *err)
{
	*files = NULL;
	*n = 0;
	DIR *d = opendir(staging);
	if (!d)
		return lmt_err_errno(err, "'%s'", staging);
	struct lmt_export_file *f = NULL;
	size_t cap = 0;
	int k = 0, rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !strcmp(e->d_name, LMT_EXPORT_MANIFEST))
			continue;
		if (LMT_GROW(f, cap, (size_t)k + 1)) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			break;
		}
		snprintf(f[k].name, sizeof f[k].name, "%s", e->d_name);
		k++;
	}
	closedir(d);
	if (rc) {
		free(f);
		return rc;
	}
	if (k)
		qsort(f, (size_t)k, sizeof *f, by_name);
	struct lmt_json j;
	char hex[LMT_SHA256_HEX], p[PATH_MAX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "schema", "lmt-export");
	lmt_json_u64(&j, "schema_version", 1);
	lmt_json_str(&j, "format", format);
	lmt_json_str(&j, "tool_version", LMT_VERSION);
	lmt_json_obj(&j, "source");
	lmt_json_u64(&j, "update", c->update);
	lmt_json_str(&j, "tokenizer_sha256", json_string_value(lmt_ckpt_state(c, "tokenizer_sha256")));
	lmt_json_obj_end(&j);
	lmt_json_arr(&j, "files");
	for (int i = 0; i < k && !rc; i++) {
		struct stat st;
		if ((rc = lmt_path_fmt(p, sizeof p, err, "%s/%s", staging, f[i].name)) ||
		    (rc = lmt_sha256_file(p, f[i].sha256, err)))
			break;
		if (stat(p, &st)) {
			rc = lmt_err_errno(err, "'%s'", p);
			break;
		}
		f[i].bytes = (uint64_t)st.st_size;
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "path", f[i].name);
		lmt_json_u64(&j, "bytes", f[i].bytes);
		lmt_json_str(&j, "sha256", lmt_sha256_hex(f[i].sha256, hex));
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_end(&j);
	if (!rc && (j.out.oom || LMT_GROW(j.out.buf, j.out.cap, j.out.len + 2)))
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	if (!rc) {
		j.out.buf[j.out.len++] = '\n';
		if (!(rc = lmt_path_fmt(p, sizeof p, err, "%s/%s", staging, LMT_EXPORT_MANIFEST)))
			rc = lmt_write_file_atomic(p, j.out.buf, j.out.len, err);
	}
	lmt_json_release(&j);
	if (rc) {
		free(f);
		return rc;
	}
	*files = f;
	*n = k;
	return 0;
}

static void parent_of(const char *path, char *parent, size_t cap)
{
	snprintf(parent, cap, "%s", path);
	size_t l = strlen(parent);
	while (l > 1 && parent[l - 1] == '/')
		parent[--l] = 0;
	char *sl = strrchr(parent, '/');
	if (!sl)
		snprintf(parent, cap, ".");
	else if (sl == parent)
		parent[1] = 0;
	else
		*sl = 0;
}

int lmt_export_commit(const char *staging, const char *out, int earlier, struct lmt_err *err)
{
	char parent[PATH_MAX];
	int rc = lmt_fsync_dir(staging, err);
	if (rc)
		return rc;
	if (earlier) {
		/* one step: the target is the earlier export or the new one, never neither */
		if (renameat2(AT_FDCWD, staging, AT_FDCWD, out, RENAME_EXCHANGE))
			return lmt_err_errno(err, "'%s': cannot swap the new export into place", out);
		lmt_remove_dir(staging); /* now the earlier export */
	} else {
		/* an empty directory is replaced by rename; anything else made meanwhile is not */
		struct stat st;
		int there = lstat(out, &st) == 0;
		if (there ? rename(staging, out) : renameat2(AT_FDCWD, staging, AT_FDCWD, out, RENAME_NOREPLACE))
			return lmt_err_errno(err, "'%s': cannot rename the export into place", out);
	}
	parent_of(out, parent, sizeof parent);
	if ((rc = lmt_fsync_dir(out, err)) || (rc = lmt_fsync_dir(parent, err)))
		return rc;
	return 0;
}

/* ---- Hugging Face's files beside the weights ---- */

static int write_json(const char *dir, const char *name, struct lmt_json *j, struct lmt_err *err)
{
	char p[PATH_MAX];
	int rc = lmt_path_fmt(p, sizeof p, err, "%s/%s", dir, name);
	if (!rc && (j->out.oom || LMT_GROW(j->out.buf, j->out.cap, j->out.len + 2)))
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	if (!rc) {
		j->out.buf[j->out.len++] = '\n';
		rc = lmt_write_file_atomic(p, j->out.buf, j->out.len, err);
	}
	lmt_json_release(j);
	return rc;
}

static const char *tok_text(const struct lmt_tokenizer *t, int64_t id, char *buf, size_t cap)
{
	if (!t || id < 0 || (uint64_t)id >= t->n_vocab)
		return NULL;
	uint32_t n = lmt_tok_len(t, (uint32_t)id);
	if (n >= cap)
		return NULL;
	memcpy(buf, lmt_tok_bytes(t, (uint32_t)id), n);
	buf[n] = 0;
	return strlen(buf) == n ? buf : NULL;
}

/* tokenizer.json with a post-processor that starts every sequence with bos, as
 * lmt's prompts start after the end-of-text token (sample, evalppl): transformers'
 * fast tokenizers apply tokenizer.json's post_processor, not tokenizer_config's
 * add_bos_token. */
static int write_tokenizer_json(const char *dir, const struct lmt_tokenizer *tok, const char *bos_s, int64_t bos,
				struct lmt_err *err)
{
	char *text;
	size_t len;
	int rc = lmt_tok_export_hf_text(tok, &text, &len, err);
	if (rc)
		return rc;
	/* the exporter's text with its "post_processor":null replaced, so that the
	 * rest stays byte for byte what tok-train --export-hf writes */
	static const char nul[] = "\"post_processor\":null";
	char *at = strstr(text, nul), *pp = NULL;
	if (!at) {
		free(text);
		return lmt_err_set(err, LMT_EFORMAT, "tokenizer.json as exported has no post_processor to set");
	}
	if (bos_s) {
		json_t *single = json_pack("[{s:{s:s,s:i}},{s:{s:s,s:i}}]", "SpecialToken", "id", bos_s, "type_id", 0,
					   "Sequence", "id", "A", "type_id", 0);
		json_t *pair = json_pack("[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}]", "SpecialToken", "id",
					 bos_s, "type_id", 0, "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id",
					 bos_s, "type_id", 1, "Sequence", "id", "B", "type_id", 1);
		json_t *sp = json_pack("{s:{s:s,s:[I],s:[s]}}", bos_s, "id", bos_s, "ids", (json_int_t)bos, "tokens", bos_s);
		json_t *o = json_pack("{s:s,s:o,s:o,s:o}", "type", "TemplateProcessing", "single", single, "pair", pair,
				      "special_tokens", sp);
		pp = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
		json_decref(o);
		if (!pp) {
			free(text);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
	}
	struct lmt_strbuf b;
	lmt_strbuf_init(&b);
	lmt_strbuf_put(&b, text, (size_t)(at - text));
	lmt_strbuf_puts(&b, "\"post_processor\":");
	lmt_strbuf_puts(&b, pp ? pp : "null");
	lmt_strbuf_put(&b, at + strlen(nul), len - (size_t)(at - text) - strlen(nul));
	free(text);
	free(pp);
	char p[PATH_MAX];
	if (b.oom)
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
	else if (!(rc = lmt_path_fmt(p, sizeof p, err, "%s/tokenizer.json", dir)))
		rc = lmt_write_file_atomic(p, b.buf, b.len, err);
	lmt_strbuf_release(&b);
	return rc;
}

static const char *cfg_str(json_t *cfg, const char *obj, const char *key)
{
	return json_string_value(json_object_get(obj ? json_object_get(cfg, obj) : cfg, key));
}

static void card_num(struct lmt_strbuf *b, const char *label, json_t *v)
{
	if (json_is_integer(v))
		lmt_strbuf_printf(b, "| %s | %lld |\n", label, (long long)json_integer_value(v));
	else if (json_is_real(v))
		lmt_strbuf_printf(b, "| %s | %g |\n", label, json_real_value(v));
	else if (json_is_string(v))
		lmt_strbuf_printf(b, "| %s | %s |\n", label, json_string_value(v));
}

static int write_card(const char *dir, const struct lmt_ckpt *c, const struct lmt_gpt_config *m, int dtype,
		      const char *name, int has_tok, struct lmt_err *err)
{
	json_t *cfg = lmt_ckpt_state(c, "config"), *opt = json_object_get(cfg, "optimization");
	double nparams = (double)m->V * m->C + (double)m->max_T * m->C + (double)m->L * (12.0 * m->C * m->C + 13.0 * m->C) +
			 2.0 * m->C + (m->untied ? (double)m->V * m->C : 0);
	struct lmt_strbuf b;
	lmt_strbuf_init(&b);
	/* HF's model card metadata (huggingface.co/docs/hub/model-cards) */
	lmt_strbuf_printf(&b, "---\nlibrary_name: transformers\npipeline_tag: text-generation\ntags:\n- gpt2\n"
			      "- text-generation\n- lmt\n- safetensors\n---\n\n");
	lmt_strbuf_printf(&b, "# %s\n\n", name);
	lmt_strbuf_printf(&b, "A GPT-2 language model trained with lmt %s and exported from its checkpoint at update "
			      "%llu by `ckpt-reshard --export safetensors`. It loads with transformers' "
			      "`AutoModelForCausalLM` and `AutoTokenizer`%s.\n\n",
			  cfg_str(cfg, NULL, "tool_version") ? cfg_str(cfg, NULL, "tool_version") : "(version unrecorded)",
			  (unsigned long long)c->update, has_tok ? "" : " (no tokenizer was exported: give ckpt-reshard -t)");
	lmt_strbuf_printf(&b, "## Model\n\n| | |\n|---|---|\n| architecture | GPT2LMHeadModel |\n"
			      "| layers | %d |\n| heads | %d |\n| channels | %d |\n| context | %d |\n| vocabulary | %d |\n"
			      "| parameters | %.0f |\n| output head | %s |\n| weights | %s |\n\n",
			  m->L, m->NH, m->C, m->max_T, m->V, nparams, m->untied ? "untied" : "tied to the embedding",
			  lmt_st_dtype_torch(dtype));
	lmt_strbuf_printf(&b, "## Training\n\n| | |\n|---|---|\n| updates | %llu |\n", (unsigned long long)c->update);
	card_num(&b, "tokens", lmt_ckpt_state(c, "tokens"));
	card_num(&b, "micro batch", json_object_get(opt, "micro_batch"));
	card_num(&b, "global batch (sequences)", json_object_get(opt, "global_batch_sequences"));
	card_num(&b, "learning rate", json_object_get(opt, "lr"));
	card_num(&b, "schedule", json_object_get(opt, "schedule"));
	card_num(&b, "warmup", json_object_get(opt, "warmup"));
	card_num(&b, "dataset manifest sha256", lmt_ckpt_state(c, "dataset_manifest_sha256"));
	card_num(&b, "tokenizer sha256", lmt_ckpt_state(c, "tokenizer_sha256"));
	card_num(&b, "code revision", json_object_get(lmt_ckpt_state(c, "code"), "revision"));
	lmt_strbuf_printf(&b, "\nPrompts start after the end-of-text token, as documents did in training; "
			      "tokenizer.json's post-processor adds it.\n\n"
			      "## Use\n\n```python\nfrom transformers import pipeline\n"
			      "generate = pipeline(\"text-generation\", model=\"%s\")\nprint(generate(\"Once upon a time\")"
			      "[0][\"generated_text\"])\n```\n\nThe files and their SHA-256 are listed in %s.\n",
			  name, LMT_EXPORT_MANIFEST);
	char p[PATH_MAX];
	int rc = b.oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory") : lmt_path_fmt(p, sizeof p, err, "%s/README.md", dir);
	if (!rc)
		rc = lmt_write_file_atomic(p, b.buf, b.len, err);
	lmt_strbuf_release(&b);
	return rc;
}

int lmt_export_hf_extras(const char *dir, const struct lmt_ckpt *c, const struct lmt_tokenizer *tok, int64_t bos,
			 int64_t eos, int dtype, const char *name, struct lmt_err *err)
{
	struct lmt_gpt_config m;
	int rc = lmt_trainstate_model(c, &m, err);
	if (rc)
		return rc;
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_bool(&j, "_from_model_config", 1);
	if (bos >= 0)
		lmt_json_i64(&j, "bos_token_id", bos);
	if (eos >= 0)
		lmt_json_i64(&j, "eos_token_id", eos);
	lmt_json_end(&j);
	if ((rc = write_json(dir, "generation_config.json", &j, err)))
		return rc;
	if (tok) {
		char bs[256], es[256];
		const char *bos_s = tok_text(tok, bos, bs, sizeof bs), *eos_s = tok_text(tok, eos, es, sizeof es);
		if ((rc = write_tokenizer_json(dir, tok, bos_s, bos, err)))
			return rc;
		lmt_json_init(&j);
		lmt_json_begin(&j);
		lmt_json_bool(&j, "add_bos_token", bos_s != NULL);
		lmt_json_bool(&j, "add_eos_token", 0);
		if (bos_s)
			lmt_json_str(&j, "bos_token", bos_s);
		if (eos_s)
			lmt_json_str(&j, "eos_token", eos_s);
		lmt_json_bool(&j, "clean_up_tokenization_spaces", 0);
		lmt_json_u64(&j, "model_max_length", (uint64_t)m.max_T);
		lmt_json_str(&j, "tokenizer_class", "PreTrainedTokenizerFast");
		lmt_json_end(&j);
		if ((rc = write_json(dir, "tokenizer_config.json", &j, err)))
			return rc;
	}
	return write_card(dir, c, &m, dtype, name, tok != NULL, err);
}

void lmt_export_bos_eos(const struct lmt_tokenizer *tok, int64_t *bos, int64_t *eos)
{
	*eos = tok && tok->eos != LMT_NO_TOKEN ? (int64_t)tok->eos : -1;
	*bos = tok && tok->bos != LMT_NO_TOKEN ? (int64_t)tok->bos : *eos;
}

/* ---- llm.c ---- */

/* llm.c's parameter order, which is lmt's (model.h) */
static const char *const llmc_params[] = { "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
					   "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb" };

int lmt_export_llmc_model(const struct lmt_ckpt *c, const char *path, struct lmt_err *err)
{
	struct lmt_gpt_config m;
	int rc = lmt_trainstate_model(c, &m, err);
	if (rc)
		return rc;
	if (m.untied)
		return lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': the model has an untied output head, which llm.c's format "
				   "has no place for", c->dir);
	const struct lmt_ckpt_entry *e[LMT_ARRAY_SIZE(llmc_params)];
	uint64_t maxn = 0;
	for (size_t i = 0; i < LMT_ARRAY_SIZE(llmc_params); i++) {
		char nm[64];
		snprintf(nm, sizeof nm, "param/%s", llmc_params[i]);
		if (!(e[i] = lmt_ckpt_find(c, nm)))
			return lmt_err_set(err, LMT_EFORMAT, "'%s': no tensor '%s' (llm.c's model needs it)", c->dir, nm);
		maxn = LMT_MAX(maxn, e[i]->numel);
	}
	int32_t h[256] = { 0 };
	h[0] = 20240326; /* lmt_gpt_save_llmc's magic and version: fp32 */
	h[1] = 3;
	h[2] = m.max_T, h[3] = m.V, h[4] = m.L, h[5] = m.NH, h[6] = m.C, h[7] = m.Vp;
	float *buf = malloc((size_t)maxn * 4 + 4);
	if (!buf)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	struct lmt_atomicfile af;
	if ((rc = lmt_atomicfile_open(&af, path, err))) {
		free(buf);
		return rc;
	}
	if (fwrite(h, sizeof h, 1, af.fp) != 1)
		rc = lmt_err_errno(err, "'%s': write", path);
	for (size_t i = 0; !rc && i < LMT_ARRAY_SIZE(llmc_params); i++) {
		if ((rc = lmt_ckpt_read(c, e[i], buf, err)))
			break;
		if (e[i]->numel && fwrite(buf, 4, (size_t)e[i]->numel, af.fp) != (size_t)e[i]->numel)
			rc = lmt_err_errno(err, "'%s': write", path);
	}
	free(buf);
	if (rc) {
		lmt_atomicfile_abort(&af);
		return rc;
	}
	return lmt_atomicfile_commit(&af, err);
}

int lmt_export_llmc_tokenizer(const struct lmt_tokenizer *tok, const char *path, struct lmt_err *err)
{
	if (tok->eos == LMT_NO_TOKEN)
		return lmt_err_set(err, LMT_EINVAL, "the tokenizer has no end-of-text token, which llm.c's tokenizer "
				   "file records (tok-train --eos)");
	uint32_t h[256] = { 0 };
	h[0] = LMT_LLMC_TOKENIZER_MAGIC;
	h[1] = 2;
	h[2] = tok->n_vocab;
	h[3] = tok->eos;
	struct lmt_strbuf b;
	lmt_strbuf_init(&b);
	lmt_strbuf_put(&b, (const char *)h, sizeof h);
	for (uint32_t id = 0; id < tok->n_vocab; id++) {
		uint32_t n = lmt_tok_len(tok, id);
		if (n == 0 || n > 255) {
			lmt_strbuf_release(&b);
			return lmt_err_set(err, LMT_ERANGE, "token %u is %u bytes long; llm.c's tokenizer file holds 1 to 255",
					   id, n);
		}
		lmt_strbuf_putc(&b, (char)n);
		lmt_strbuf_put(&b, (const char *)lmt_tok_bytes(tok, id), n);
	}
	int rc = b.oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory") : lmt_write_file_atomic(path, b.buf, b.len, err);
	lmt_strbuf_release(&b);
	return rc;
}
