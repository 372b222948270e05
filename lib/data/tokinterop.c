/*
 * tokinterop.c: tiktoken, GPT-2 and HuggingFace tokenizer files in and out.
 *
 * Every importer first collects (id -> bytes, special?) in a table, fills holes in
 * the id space, then hands tokens to the tokenizer in id order and adds merges.
 */
#include "data/tokinterop.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomicfile.h"
#include "core/json.h"
#include "core/util.h"
#include "data/toktrain.h"

struct idtab {
	struct ent {
		uint8_t *s;
		uint32_t n;
		uint8_t set, special;
	} *e;
	size_t n, cap;
	uint64_t lim;            /* ids must be below this (idtab_limit) */
};

/* Every id below the largest is a token, a listed one or a hole filled with an
 * unused special: a few bytes of input must not ask for a billion of them. A file
 * of n bytes lists fewer than n tokens, so ids may reach n plus room for the
 * special tokens real files put past their vocabulary (cl100k's at 100257). */
static void idtab_limit(struct idtab *T, uint64_t file_bytes)
{
	T->lim = LMT_MIN(file_bytes + (1u << 17), 1u << 30);
}

static void idtab_free(struct idtab *T)
{
	for (size_t i = 0; i < T->n; i++)
		free(T->e[i].s);
	free(T->e);
	memset(T, 0, sizeof *T);
}

static int idtab_set(struct idtab *T, uint64_t id, const void *s, size_t n, int special,
		     const char *what, struct lmt_err *err)
{
	if (id >= (1u << 30))
		return lmt_err_set(err, LMT_EFORMAT, "%s: token id %llu is out of range", what,
				   (unsigned long long)id);
	if (T->lim && id >= T->lim)
		return lmt_err_set(err, LMT_EFORMAT, "%s: token id %llu would leave more ids unused than the file "
				   "has bytes (%llu at most)", what, (unsigned long long)id, (unsigned long long)T->lim - 1);
	if (id >= T->n) {
		if (LMT_GROW(T->e, T->cap, id + 1))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		memset(T->e + T->n, 0, (id + 1 - T->n) * sizeof *T->e);
		T->n = id + 1;
	}
	struct ent *e = &T->e[id];
	if (e->set) {
		/* the same token listed twice with the same bytes (GPT-2's <|endoftext|> is in
		 * both vocab and added_tokens): keep one, special wins */
		if (e->n == n && !memcmp(e->s, s, n)) {
			e->special |= special ? 1 : 0;
			return 0;
		}
		return lmt_err_set(err, LMT_EFORMAT, "%s: id %llu is given to two different tokens",
				   what, (unsigned long long)id);
	}
	e->s = malloc(n ? n : 1);
	if (!e->s)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	memcpy(e->s, s, n);
	e->n = (uint32_t)n;
	e->set = 1;
	e->special = special ? 1 : 0;
	return 0;
}

/* "STRING=ID" or "STRING": STRING's length; *has_id and *id say whether an id
 * came and which (one too large to hold reads as the largest, which no table
 * takes). */
static size_t special_spec(const char *spec, int *has_id, unsigned long long *id)
{
	const char *eq = strrchr(spec, '=');
	*has_id = eq && eq[1] && eq > spec && strspn(eq + 1, "0123456789") == strlen(eq + 1);
	*id = *has_id ? strtoull(eq + 1, NULL, 10) : 0;
	return *has_id ? (size_t)(eq - spec) : strlen(spec);
}

size_t lmt_tok_special_spec_len(const char *spec)
{
	int has_id;
	unsigned long long id;
	return special_spec(spec, &has_id, &id);
}

int lmt_tok_check_special_specs(const char *const *specs, int n, struct lmt_err *err)
{
	for (int i = 0; i < n; i++) {
		size_t len = lmt_tok_special_spec_len(specs[i]);
		if (!len)
			return lmt_err_set(err, LMT_EINVAL, "the special token is empty");
		for (int k = 0; k < i; k++)
			if (lmt_tok_special_spec_len(specs[k]) == len && !memcmp(specs[k], specs[i], len))
				return lmt_err_set(err, LMT_EINVAL, "'%.*s' given twice", (int)len, specs[i]);
	}
	return 0;
}

/* Parse "STRING=ID" or "STRING" and mark/add it as special. */
static int add_special_spec(struct idtab *T, const char *spec, struct lmt_err *err)
{
	int has_id;
	unsigned long long id;
	size_t n = special_spec(spec, &has_id, &id);
	if (n == 0)
		return lmt_err_set(err, LMT_EINVAL, "special token '%s' is empty", spec);
	if (!has_id) {
		/* an existing vocabulary entry with these bytes becomes special */
		for (size_t i = 0; i < T->n; i++)
			if (T->e[i].set && T->e[i].n == n && !memcmp(T->e[i].s, spec, n)) {
				T->e[i].special = 1;
				return 0;
			}
		id = T->n;
	}
	return idtab_set(T, id, spec, n, 1, "special token", err);
}

static int build(struct lmt_tokenizer *t, struct idtab *T, struct lmt_err *err)
{
	for (size_t id = 0; id < T->n; id++) {
		struct ent *e = &T->e[id];
		int rc;
		if (!e->set) {
			char name[48];
			int n = snprintf(name, sizeof name, "<|lmt_unused_%zu|>", id);
			rc = lmt_tok_add_token(t, name, (size_t)n, 1, NULL, err);
		} else {
			rc = lmt_tok_add_token(t, e->s, e->n, e->special, NULL, err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+') return 62;
	if (c == '/') return 63;
	return -1;
}

/* Standard base64 with padding; returns length or -1. */
static long b64decode(const char *s, size_t n, uint8_t *out)
{
	if (n % 4)
		return -1;
	long k = 0;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;
		for (int j = 0; j < 4; j++) {
			if (s[i + j] == '=' && i + 4 == n && j >= 2) {
				v[j] = 0;
				pad++;
			} else if (pad || (v[j] = b64val((unsigned char)s[i + j])) < 0) {
				return -1;
			}
		}
		uint32_t x = (uint32_t)v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3];
		out[k++] = (uint8_t)(x >> 16);
		if (pad < 2)
			out[k++] = (uint8_t)(x >> 8);
		if (pad < 1)
			out[k++] = (uint8_t)x;
	}
	return k;
}

static int finish(struct lmt_tokenizer *t, struct lmt_err *err)
{
	int rc = lmt_tok_set_roles(t, NULL, NULL, NULL, err);
	return rc ? rc : lmt_tok_finalize(t, err);
}

int lmt_tok_import_tiktoken(struct lmt_tokenizer *t, const char *path, const char *pattern,
			    const char *const *specials, int nspecials, struct lmt_err *err)
{
	char *data;
	size_t len;
	struct idtab T = { 0 };
	lmt_tok_init(t);
	int rc = lmt_read_file(path, &data, &len, err);
	if (rc)
		return rc;
	idtab_limit(&T, len);
	uint8_t *buf = malloc(len / 4 * 3 + 4); /* no token is longer than the file */
	size_t lineno = 0;
	if (!buf) {
		free(data);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (char *p = data, *end = data + len; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		lineno++;
		if (le > p && le[-1] == '\r')
			le--;
		if (le == p) {
			p = nl ? nl + 1 : end;
			continue;
		}
		char *sp = memchr(p, ' ', (size_t)(le - p));
		char *rend;
		unsigned long long rank = sp ? strtoull(sp + 1, &rend, 10) : 0;
		long n = sp ? b64decode(p, (size_t)(sp - p), buf) : -1;
		if (!sp || rend != le || sp + 1 == le) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': line %zu: expected 'base64 rank'", path, lineno);
			goto out;
		}
		if (n <= 0) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': line %zu: bad base64 token", path, lineno);
			goto out;
		}
		if ((rc = idtab_set(&T, rank, buf, (size_t)n, 0, path, err))) {
			lmt_err_prefix(err, "line %zu", lineno);
			goto out;
		}
		p = nl ? nl + 1 : end;
	}
	for (int i = 0; i < nspecials; i++)
		if ((rc = add_special_spec(&T, specials[i], err)))
			goto out;
	if ((rc = build(t, &T, err)) || (rc = lmt_tok_set_pattern(t, pattern, NULL, err)))
		goto out;
	if ((rc = lmt_tok_finalize(t, err))) {
		lmt_err_prefix(err, "'%s'", path);
		goto out;
	}
	/* every split of a token into two tokens is a merge at the token's rank */
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		uint32_t n = lmt_tok_len(t, id);
		if (t->special[id] || n < 2)
			continue;
		const uint8_t *s = lmt_tok_bytes(t, id);
		for (uint32_t i = 1; i < n; i++) {
			uint32_t a = lmt_tok_find(t, s, i), b = a == LMT_NO_TOKEN ? a : lmt_tok_find(t, s + i, n - i);
			if (b != LMT_NO_TOKEN && (rc = lmt_tok_add_merge(t, a, b, id, id, err)))
				goto out;
		}
	}
	t->flags |= LMT_TOK_IGNORE_MERGES;
	if ((rc = finish(t, err)))
		lmt_err_prefix(err, "'%s'", path);
out:
	free(data);
	free(buf);
	idtab_free(&T);
	if (rc)
		lmt_tok_release(t);
	return rc;
}

/* byte-level string -> bytes; fails for characters outside GPT-2's map */
static long bl_bytes(const char *s, size_t n, uint8_t **out)
{
	*out = malloc(n + 1);
	if (!*out)
		return -1;
	return lmt_bytelevel_decode(s, n, *out);
}

/* *bytes: the file's size */
static int load_json(const char *path, json_t **root, uint64_t *bytes, struct lmt_err *err)
{
	json_error_t je;
	struct stat st;
	*root = json_load_file(path, JSON_ALLOW_NUL, &je);
	*bytes = *root && !stat(path, &st) ? (uint64_t)st.st_size : 0;
	if (!*root) {
		FILE *f = fopen(path, "rb");
		if (!f)
			return lmt_err_errno(err, "'%s'", path);
		fclose(f);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: invalid JSON: %s", path, je.line, je.text);
	}
	return 0;
}

/* Whether an added_tokens array (or NULL) has a token of content s. */
static int is_added(json_t *added, const char *s)
{
	size_t i;
	json_t *x;
	json_array_foreach(added, i, x) {
		const char *c = json_string_value(json_object_get(x, "content"));
		if (c && !strcmp(c, s))
			return 1;
	}
	return 0;
}

/* vocab object (byte-level string -> id) into the id table. added: tokenizer.json's
 * added_tokens (or NULL), whose contents the vocab lists as they are, not
 * byte-level: those entries are left to the added tokens. */
static int read_vocab(struct idtab *T, json_t *vocab, json_t *added, const char *path, struct lmt_err *err)
{
	const char *key;
	json_t *v;
	json_object_foreach(vocab, key, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return lmt_err_set(err, LMT_EFORMAT, "'%s': vocab entry '%s' has no valid id", path, key);
		uint8_t *b;
		long n = bl_bytes(key, strlen(key), &b);
		if (n <= 0 && is_added(added, key)) {
			free(b);
			continue;
		}
		if (n <= 0) {
			free(b);
			return lmt_err_set(err, LMT_EUNSUPPORTED,
				"'%s': vocab entry '%s' is not a byte-level token (not a byte-level BPE?)",
				path, key);
		}
		int rc = idtab_set(T, (uint64_t)json_integer_value(v), b, (size_t)n, 0, path, err);
		free(b);
		if (rc)
			return rc;
	}
	return 0;
}

/* a merge "a b" (or a pair [a, b]) given as byte-level strings */
static int add_str_merge(struct lmt_tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
			 uint32_t prio, const char *where, struct lmt_err *err)
{
	uint8_t *ba, *bb;
	long la = bl_bytes(a, na, &ba), lb = bl_bytes(b, nb, &bb);
	int rc = 0;
	if (la <= 0 || lb <= 0) {
		rc = lmt_err_set(err, LMT_EFORMAT, "%s: not byte-level strings", where);
		goto out;
	}
	uint8_t *cat = malloc((size_t)(la + lb));
	if (!cat) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(cat, ba, (size_t)la);
	memcpy(cat + la, bb, (size_t)lb);
	uint32_t ia = lmt_tok_find(t, ba, (size_t)la), ib = lmt_tok_find(t, bb, (size_t)lb),
		 ic = lmt_tok_find(t, cat, (size_t)(la + lb));
	free(cat);
	if (ia == LMT_NO_TOKEN || ib == LMT_NO_TOKEN || ic == LMT_NO_TOKEN)
		rc = lmt_err_set(err, LMT_EFORMAT, "%s: merge '%.*s %.*s' names a token not in the vocabulary",
				 where, (int)na, a, (int)nb, b);
	else
		rc = lmt_tok_add_merge(t, ia, ib, ic, prio, err);
out:
	free(ba);
	free(bb);
	return rc;
}

int lmt_tok_import_gpt2(struct lmt_tokenizer *t, const char *encoder_json, const char *vocab_bpe,
			const char *const *specials, int nspecials, struct lmt_err *err)
{
	struct idtab T = { 0 };
	json_t *root = NULL;
	char *data = NULL;
	size_t len;
	lmt_tok_init(t);
	uint64_t bytes;
	int rc = load_json(encoder_json, &root, &bytes, err);
	if (rc)
		return rc;
	idtab_limit(&T, bytes);
	if (!json_is_object(root)) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': expected a JSON object", encoder_json);
		goto out;
	}
	if ((rc = read_vocab(&T, root, NULL, encoder_json, err)))
		goto out;
	static const char *const dflt[] = { "<|endoftext|>" };
	if (nspecials == 0) {
		for (size_t i = 0; i < T.n; i++)
			if (T.e[i].set && T.e[i].n == 13 && !memcmp(T.e[i].s, dflt[0], 13))
				T.e[i].special = 1;
	}
	for (int i = 0; i < nspecials; i++)
		if ((rc = add_special_spec(&T, specials[i], err)))
			goto out;
	if ((rc = build(t, &T, err)) || (rc = lmt_tok_set_pattern(t, "gpt2", NULL, err)) ||
	    (rc = lmt_tok_finalize(t, err)))
		goto out;
	if ((rc = lmt_read_file(vocab_bpe, &data, &len, err)))
		goto out;
	/* GPT-2's merges file opens with its version line ("#version: 0.2"): without
	 * it, or without a single merge, this is not that file (an empty one would
	 * leave every multi-byte token unreachable) */
	if (len < 9 || memcmp(data, "#version:", 9)) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': line 1: expected GPT-2's \"#version:\" line", vocab_bpe);
		goto out;
	}
	size_t lineno = 0;
	uint32_t prio = 0;
	for (char *p = data, *end = data + len; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		lineno++;
		if (le > p && le[-1] == '\r')
			le--;
		if (le > p && !(lineno == 1 && *p == '#')) {
			char *sp = memchr(p, ' ', (size_t)(le - p));
			char where[600];
			snprintf(where, sizeof where, "'%s': line %zu", vocab_bpe, lineno);
			if (!sp) {
				rc = lmt_err_set(err, LMT_EFORMAT, "%s: expected two tokens", where);
				goto out;
			}
			if ((rc = add_str_merge(t, p, (size_t)(sp - p), sp + 1, (size_t)(le - sp - 1), prio++,
						where, err)))
				goto out;
		}
		p = nl ? nl + 1 : end;
	}
	if (prio == 0) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': no merges after the version line", vocab_bpe);
		goto out;
	}
	rc = finish(t, err);
out:
	json_decref(root);
	free(data);
	idtab_free(&T);
	if (rc)
		lmt_tok_release(t);
	return rc;
}

static int json_str_eq(json_t *o, const char *key, const char *val)
{
	json_t *v = json_object_get(o, key);
	return v && json_is_string(v) && !strcmp(json_string_value(v), val);
}

static int obj_true(json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

/* Pattern from a pre_tokenizer: sets *name and *regex (borrowed from the JSON) or fails. */
static int hf_pattern(json_t *pt, const char *path, const char **name, const char **regex,
		      struct lmt_err *err)
{
	json_t *bl = NULL, *split = NULL;
	if (json_str_eq(pt, "type", "ByteLevel")) {
		bl = pt;
	} else if (json_str_eq(pt, "type", "Sequence")) {
		json_t *list = json_object_get(pt, "pretokenizers");
		size_t i;
		json_t *x;
		json_array_foreach(list, i, x) {
			if (json_str_eq(x, "type", "ByteLevel") && !bl)
				bl = x;
			else if (json_str_eq(x, "type", "Split") && !split && !bl)
				split = x;
			else
				return lmt_err_set(err, LMT_EUNSUPPORTED,
					"'%s': pre_tokenizer sequence is not [Split, ByteLevel]", path);
		}
	}
	if (!bl)
		return lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': no ByteLevel pre_tokenizer (not a byte-level BPE)",
				   path);
	if (obj_true(bl, "add_prefix_space"))
		return lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': ByteLevel add_prefix_space is not supported", path);
	if (split) {
		json_t *pat = json_object_get(split, "pattern");
		json_t *re = json_object_get(pat, "Regex");
		if (!json_is_string(re) || !json_str_eq(split, "behavior", "Isolated") || obj_true(split, "invert"))
			return lmt_err_set(err, LMT_EUNSUPPORTED,
				"'%s': only Split with a Regex pattern, behavior Isolated, not inverted", path);
		if (obj_true(bl, "use_regex"))
			return lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': Split followed by ByteLevel use_regex", path);
		*regex = json_string_value(re);
		*name = "custom";
		return 0;
	}
	json_t *ur = json_object_get(bl, "use_regex");
	if (!ur || json_is_true(ur)) {
		*name = "gpt2";
		*regex = NULL;
	} else {
		*name = "none";
		*regex = NULL;
	}
	return 0;
}

int lmt_tok_import_hf(struct lmt_tokenizer *t, const char *path, struct lmt_err *err)
{
	struct idtab T = { 0 };
	json_t *root = NULL;
	lmt_tok_init(t);
	uint64_t bytes;
	int rc = load_json(path, &root, &bytes, err);
	if (rc)
		return rc;
	idtab_limit(&T, bytes);
	json_t *model = json_object_get(root, "model");
	json_t *vocab = json_object_get(model, "vocab");
	json_t *merges = json_object_get(model, "merges");
	json_t *norm = json_object_get(root, "normalizer");
	const char *name = NULL, *regex = NULL;
	if (!json_is_object(model) || !json_str_eq(model, "type", "BPE")) {
		rc = lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': model is not BPE", path);
		goto out;
	}
	if (!json_is_object(vocab) || !json_is_array(merges)) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': model has no vocab object or merges array", path);
		goto out;
	}
	if (norm && !json_is_null(norm)) {
		rc = lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': normalizers are not supported", path);
		goto out;
	}
	if (obj_true(model, "byte_fallback")) {
		rc = lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': byte_fallback models are not byte-level", path);
		goto out;
	}
	const char *affix[] = { "continuing_subword_prefix", "end_of_word_suffix" };
	for (int i = 0; i < 2; i++) {
		json_t *a = json_object_get(model, affix[i]);
		if (a && json_is_string(a) && *json_string_value(a)) {
			rc = lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': %s is not supported", path, affix[i]);
			goto out;
		}
	}
	if ((rc = hf_pattern(json_object_get(root, "pre_tokenizer"), path, &name, &regex, err)))
		goto out;
	if ((rc = read_vocab(&T, vocab, json_object_get(root, "added_tokens"), path, err)))
		goto out;
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(root, "added_tokens"), i, x) {
		json_t *id = json_object_get(x, "id"), *content = json_object_get(x, "content");
		if (!json_is_integer(id) || json_integer_value(id) < 0 || !json_is_string(content)) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': added_tokens[%zu] lacks id or content", path, i);
			goto out;
		}
		/* the vocab may list the same id under its byte-level spelling: replace it */
		uint64_t k = (uint64_t)json_integer_value(id);
		if (k < T.n && T.e[k].set) {
			free(T.e[k].s);
			T.e[k].set = 0;
		}
		if ((rc = idtab_set(&T, k, json_string_value(content), json_string_length(content), 1, path, err)))
			goto out;
	}
	if ((rc = build(t, &T, err)) || (rc = lmt_tok_set_pattern(t, name, regex, err)) ||
	    (rc = lmt_tok_finalize(t, err))) {
		lmt_err_prefix(err, "'%s'", path);
		goto out;
	}
	json_array_foreach(merges, i, x) {
		char where[600];
		snprintf(where, sizeof where, "'%s': merges[%zu]", path, i);
		const char *a, *b;
		size_t na, nb;
		if (json_is_string(x)) {
			a = json_string_value(x);
			const char *sp = strchr(a, ' ');
			if (!sp || strchr(sp + 1, ' ')) {
				rc = lmt_err_set(err, LMT_EFORMAT, "%s: expected 'a b'", where);
				goto out;
			}
			na = (size_t)(sp - a);
			b = sp + 1;
			nb = strlen(b);
		} else if (json_is_array(x) && json_array_size(x) == 2 &&
			   json_is_string(json_array_get(x, 0)) && json_is_string(json_array_get(x, 1))) {
			a = json_string_value(json_array_get(x, 0));
			b = json_string_value(json_array_get(x, 1));
			na = strlen(a);
			nb = strlen(b);
		} else {
			rc = lmt_err_set(err, LMT_EFORMAT, "%s: expected a string or a pair", where);
			goto out;
		}
		if ((rc = add_str_merge(t, a, na, b, nb, (uint32_t)i, where, err)))
			goto out;
	}
	if (obj_true(model, "ignore_merges"))
		t->flags |= LMT_TOK_IGNORE_MERGES;
	if ((rc = finish(t, err)))
		lmt_err_prefix(err, "'%s'", path);
out:
	json_decref(root);
	idtab_free(&T);
	if (rc)
		lmt_tok_release(t);
	return rc;
}

static void bl_string(struct lmt_tokenizer const *t, uint32_t id, char *out)
{
	size_t k = 0;
	const uint8_t *s = lmt_tok_bytes(t, id);
	for (uint32_t i = 0; i < lmt_tok_len(t, id); i++) {
		const char *c = lmt_bytelevel_char(s[i]);
		while (*c)
			out[k++] = *c++;
	}
	out[k] = 0;
}

static const struct lmt_tokenizer *sort_tok;

static int cmp_merge_prio(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	uint32_t pa = sort_tok->merges[a].prio, pb = sort_tok->merges[b].prio;
	if (pa != pb)
		return pa < pb ? -1 : 1;
	return a < b ? -1 : a > b;
}

int lmt_tok_export_hf_text(const struct lmt_tokenizer *t, char **text, size_t *len, struct lmt_err *err)
{
	*text = NULL;
	*len = 0;
	struct lmt_json j;
	lmt_json_init(&j);
	char *s = malloc((size_t)t->max_token_len * 2 + 64), *s2 = NULL;
	uint32_t *ord = malloc(((size_t)t->n_merges + 1) * sizeof *ord);
	int rc = 0;
	if (!s || !ord) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	s2 = malloc((size_t)t->max_token_len * 2 + 64);
	if (!s2) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	lmt_json_begin(&j);
	lmt_json_str(&j, "version", "1.0");
	lmt_json_null(&j, "truncation");
	lmt_json_null(&j, "padding");
	lmt_json_arr(&j, "added_tokens");
	for (uint32_t k = 0; k < t->n_special; k++) {
		uint32_t id = t->special_ids[k];
		lmt_json_obj(&j, NULL);
		lmt_json_u64(&j, "id", id);
		lmt_json_strn(&j, "content", (const char *)lmt_tok_bytes(t, id), lmt_tok_len(t, id));
		lmt_json_bool(&j, "single_word", 0);
		lmt_json_bool(&j, "lstrip", 0);
		lmt_json_bool(&j, "rstrip", 0);
		lmt_json_bool(&j, "normalized", 0);
		lmt_json_bool(&j, "special", 1);
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_null(&j, "normalizer");
	lmt_json_obj(&j, "pre_tokenizer");
	if (t->pt.regex) {
		lmt_json_str(&j, "type", "Sequence");
		lmt_json_arr(&j, "pretokenizers");
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "type", "Split");
		lmt_json_obj(&j, "pattern");
		lmt_json_str(&j, "Regex", t->pt.regex);
		lmt_json_obj_end(&j);
		lmt_json_str(&j, "behavior", "Isolated");
		lmt_json_bool(&j, "invert", 0);
		lmt_json_obj_end(&j);
		lmt_json_obj(&j, NULL);
	}
	lmt_json_str(&j, "type", "ByteLevel");
	lmt_json_bool(&j, "add_prefix_space", 0);
	lmt_json_bool(&j, "trim_offsets", 1);
	lmt_json_bool(&j, "use_regex", 0);
	if (t->pt.regex) {
		lmt_json_obj_end(&j);
		lmt_json_arr_end(&j);
	}
	lmt_json_obj_end(&j);
	lmt_json_null(&j, "post_processor");
	lmt_json_obj(&j, "decoder");
	lmt_json_str(&j, "type", "ByteLevel");
	lmt_json_bool(&j, "add_prefix_space", 1);
	lmt_json_bool(&j, "trim_offsets", 1);
	lmt_json_bool(&j, "use_regex", 1);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "model");
	lmt_json_str(&j, "type", "BPE");
	lmt_json_null(&j, "dropout");
	lmt_json_null(&j, "unk_token");
	lmt_json_null(&j, "continuing_subword_prefix");
	lmt_json_null(&j, "end_of_word_suffix");
	lmt_json_bool(&j, "fuse_unk", 0);
	lmt_json_bool(&j, "byte_fallback", 0);
	lmt_json_bool(&j, "ignore_merges", (t->flags & LMT_TOK_IGNORE_MERGES) != 0);
	lmt_json_obj(&j, "vocab");
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		if (t->special[id]) {
			char *raw = strndup((const char *)lmt_tok_bytes(t, id), lmt_tok_len(t, id));
			if (!raw) {
				rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
				goto out;
			}
			lmt_json_u64(&j, raw, id);
			free(raw);
			continue;
		}
		bl_string(t, id, s);
		lmt_json_u64(&j, s, id);
	}
	lmt_json_obj_end(&j);
	for (uint32_t m = 0; m < t->n_merges; m++)
		ord[m] = m;
	sort_tok = t;
	qsort(ord, t->n_merges, sizeof *ord, cmp_merge_prio);
	lmt_json_arr(&j, "merges");
	for (uint32_t k = 0; k < t->n_merges; k++) {
		const struct lmt_merge *g = &t->merges[ord[k]];
		bl_string(t, g->a, s);
		bl_string(t, g->b, s2);
		size_t la = strlen(s);
		s[la] = ' ';
		strcpy(s + la + 1, s2);
		lmt_json_str(&j, NULL, s);
	}
	lmt_json_arr_end(&j);
	lmt_json_obj_end(&j);
	lmt_json_end(&j);
	if (j.out.oom) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	*len = j.out.len;
	*text = lmt_strbuf_detach(&j.out);
out:
	free(s);
	free(s2);
	free(ord);
	lmt_json_release(&j);
	return rc;
}

int lmt_tok_export_hf(const struct lmt_tokenizer *t, const char *path, struct lmt_err *err)
{
	char *text;
	size_t n;
	int rc = lmt_tok_export_hf_text(t, &text, &n, err);
	if (!rc)
		rc = lmt_write_file_atomic(path, text, n, err);
	free(text);
	return rc;
}

int lmt_tok_write_files(struct lmt_tokenizer *t, const char *out, char *final, size_t cap, const char *hf,
			struct lmt_err *err)
{
	struct lmt_atomicfile lm = { .slot = -1 }, h = { .slot = -1 };
	int rc = 0;
	if (out) {
		uint8_t *buf;
		size_t n;
		if ((rc = lmt_tok_serialize(t, &buf, &n, err)))
			return rc;
		lmt_tok_output_name(t, out, final, cap);
		if (!(rc = lmt_atomicfile_open(&lm, final, err)) && fwrite(buf, 1, n, lm.fp) != n)
			rc = lmt_err_errno(err, "'%s': write", final);
		free(buf);
	}
	if (!rc && hf) {
		char *text;
		size_t n;
		if (!(rc = lmt_tok_export_hf_text(t, &text, &n, err))) {
			if (!(rc = lmt_atomicfile_open(&h, hf, err)) && fwrite(text, 1, n, h.fp) != n)
				rc = lmt_err_errno(err, "'%s': write", hf);
			free(text);
		}
	}
	if (rc) {
		lmt_atomicfile_abort(&lm);
		lmt_atomicfile_abort(&h);
		return rc;
	}
	struct lmt_atomicfile *const all[] = { &lm, &h };
	return lmt_atomicfile_commit_all(all, 2, err);
}
