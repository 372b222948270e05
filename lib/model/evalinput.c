/*
 * evalinput.c: the checkpoints, recorded files and documents an evaluation reads (see
 * evalinput.h). The messages are those evalppl printed when it did this itself, so
 * the tool reports library failures word for word as before.
 */
#include "model/evalinput.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/trainstate.h"
#include "core/atomicfile.h"
#include "core/digest.h"
#include "core/util.h"
#include "data/gencorpus.h"
#include "data/tokstream.h"
#include "model/evaluate.h"

static int oom(struct lmt_err *err)
{
	return lmt_err_set(err, LMT_ENOMEM, "out of memory");
}

/* ---- the checkpoints ---- */

void lmt_eval_ckrefs_free(struct lmt_eval_ckref *refs, int n)
{
	for (int i = 0; refs && i < n; i++)
		free(refs[i].path);
	free(refs);
}

static void free_names(char **names, uint64_t *ups, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ups);
}

int lmt_eval_ckpts_list(const char *target, int latest, struct lmt_eval_ckref **refs, int *n, char *run_dir,
			size_t cap, lmt_eval_warn_fn warn, void *warn_ctx, struct lmt_err *err)
{
	char mp[PATH_MAX], ck[PATH_MAX], p[PATH_MAX];
	struct stat st;
	struct lmt_eval_ckref *r;
	int rc;
	*refs = NULL;
	*n = 0;
	if ((rc = lmt_path_fmt(mp, sizeof mp, err, "%s/manifest.json", target)))
		return rc;
	if (stat(target, &st))
		return lmt_err_errno(err, "'%s'", target);
	if (access(mp, F_OK) == 0) {
		/* one checkpoint: its run is two levels up (RUN/ckpt/step-N) */
		if ((rc = lmt_path_fmt(run_dir, cap, err, "%s/../..", target)))
			return rc;
		if (!(r = calloc(1, sizeof *r)) || !(r[0].path = strdup(target))) {
			free(r);
			return oom(err);
		}
		*refs = r;
		*n = 1;
		return 0;
	}
	if ((rc = lmt_path_fmt(ck, sizeof ck, err, "%s/ckpt", target)))
		return rc;
	if (stat(ck, &st) || !S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_ENOTFOUND,
				   "'%s': neither a checkpoint (no manifest.json) nor a run directory (no ckpt/)", target);
	if ((rc = lmt_path_fmt(run_dir, cap, err, "%s", target)))
		return rc;
	char **names;
	uint64_t *ups;
	int count;
	if ((rc = lmt_ckpt_list(target, &names, &ups, &count, err)))
		return rc;
	if (count == 0) {
		free_names(names, ups, count);
		return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no checkpoint in %s/ckpt", target, target);
	}
	int first = 0, last = count;
	if (latest) {
		/* the newest that verifies (lmt_ckpt_latest would also remove interrupted
		 * saves, and an evaluation must not touch a run, which may be live) */
		int pick = -1;
		for (int i = count - 1; i >= 0 && pick < 0; i--) {
			struct lmt_ckpt c;
			struct lmt_err e = { 0 };
			if ((rc = lmt_path_fmt(p, sizeof p, err, "%s/ckpt/%s", target, names[i]))) {
				free_names(names, ups, count);
				return rc;
			}
			if (lmt_ckpt_open_listed(&c, p, ups[i], 1, &e) == 0) {
				lmt_ckpt_close(&c);
				pick = i;
			} else if (warn) {
				char msg[PATH_MAX + sizeof e.msg + 16];
				snprintf(msg, sizeof msg, "skipping '%s': %s", p, e.msg);
				warn(warn_ctx, msg);
			}
		}
		if (pick < 0) {
			free_names(names, ups, count);
			return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no checkpoint in %s/ckpt verifies", target, target);
		}
		first = pick;
		last = pick + 1;
	}
	if (!(r = calloc((size_t)(last - first), sizeof *r))) {
		free_names(names, ups, count);
		return oom(err);
	}
	for (int i = first; i < last; i++) {
		struct lmt_eval_ckref *x = &r[i - first];
		x->update = ups[i];
		if ((rc = lmt_path_fmt(p, sizeof p, err, "%s/ckpt/%s", target, names[i])) || !(x->path = strdup(p))) {
			lmt_eval_ckrefs_free(r, last - first);
			free_names(names, ups, count);
			return rc ? rc : oom(err);
		}
	}
	free_names(names, ups, count);
	*refs = r;
	*n = last - first;
	return 0;
}

static int ju64(json_t *o, const char *key, const char *dir, const char *what, uint64_t *v, struct lmt_err *err)
{
	json_t *x = json_object_get(o, key);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return lmt_err_set(err, LMT_EFORMAT, "'%s/manifest.json': state.%s%s is missing or not a count", dir, what,
				   key);
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

int lmt_eval_ckinfo_read(const struct lmt_ckpt *c, struct lmt_eval_ckinfo *ci, struct lmt_err *err)
{
	memset(ci, 0, sizeof *ci);
	json_t *st = json_object_get(c->manifest, "state"), *m = json_object_get(st, "model");
	int rc;
	if ((rc = ju64(st, "update", c->dir, "", &ci->update, err)) || (rc = ju64(st, "tokens", c->dir, "", &ci->tokens, err)))
		return rc;
	if (!json_is_object(m))
		return lmt_err_set(err, LMT_EFORMAT, "'%s/manifest.json': no state.model: not a checkpoint of train",
				   c->dir);
	static const char *const keys[6] = { "layers", "heads", "channels", "context", "vocab", "vocab_padded" };
	int *dst[6] = { &ci->cfg.L, &ci->cfg.NH, &ci->cfg.C, &ci->cfg.max_T, &ci->cfg.V, &ci->cfg.Vp };
	for (int i = 0; i < 6; i++) {
		uint64_t v;
		if ((rc = ju64(m, keys[i], c->dir, "model.", &v, err)))
			return rc;
		*dst[i] = (int)v;
	}
	ci->cfg.untied = json_is_true(json_object_get(m, "untied"));
	const char *ts = json_string_value(json_object_get(st, "tokenizer_sha256"));
	if (!ts || lmt_sha256_parse(ts, ci->tok_sha))
		return lmt_err_set(err, LMT_EFORMAT,
				   "'%s/manifest.json': state.tokenizer_sha256 is missing or not a SHA-256", c->dir);
	const char *ds = json_string_value(json_object_get(st, "dataset_manifest_sha256"));
	ci->has_data_sha = ds && !lmt_sha256_parse(ds, ci->data_sha);
	json_t *data = json_object_get(json_object_get(st, "config"), "data");
	ci->cfg_tokenizer = json_string_value(json_object_get(data, "tokenizer"));
	ci->cfg_data = json_string_value(json_object_get(data, "dir"));
	return 0;
}

int lmt_eval_ckpt_open(struct lmt_ckpt *c, struct lmt_eval_ckinfo *ci, const char *path,
		       const struct lmt_eval_ckinfo *first, const char *first_path, struct lmt_err *err)
{
	char hex[LMT_SHA256_HEX], hex2[LMT_SHA256_HEX];
	int rc = lmt_ckpt_open(c, path, 1, err);
	if (rc)
		return rc;
	if ((rc = lmt_eval_ckinfo_read(c, ci, err)))
		goto fail;
	if (first && memcmp(ci->tok_sha, first->tok_sha, 32)) {
		rc = lmt_err_set(err, LMT_EINVAL, "'%s' was trained with tokenizer %.16s..., '%s' with %.16s...", path,
				 lmt_sha256_hex(ci->tok_sha, hex), first_path, lmt_sha256_hex(first->tok_sha, hex2));
		goto fail;
	}
	if (first && ci->cfg.V != first->cfg.V) {
		rc = lmt_err_set(err, LMT_EINVAL, "'%s' has a vocabulary of %d, '%s' %d", path, ci->cfg.V, first_path,
				 first->cfg.V);
		goto fail;
	}
	return 0;
fail:
	lmt_ckpt_close(c);
	return rc;
}

int lmt_eval_model_load(struct lmt_gpt *g, int *have, struct lmt_backend *be, const struct lmt_ckpt *c,
			const struct lmt_eval_ckinfo *ci, struct lmt_err *err)
{
	if (*have && memcmp(&g->cfg, &ci->cfg, sizeof ci->cfg)) {
		lmt_gpt_release(g);
		*have = 0;
	}
	if (!*have) {
		if (ci->cfg.Vp != lmt_gpt_padded_vocab(ci->cfg.V))
			return lmt_err_set(err, LMT_EFORMAT, "'%s': vocab_padded %d, this build pads a vocabulary of %d to %d",
					   c->dir, ci->cfg.Vp, ci->cfg.V, lmt_gpt_padded_vocab(ci->cfg.V));
		int rc = lmt_gpt_init(g, &ci->cfg, be, err);
		if (rc) {
			lmt_err_prefix(err, "'%s'", c->dir);
			return rc;
		}
		*have = 1;
	}
	return lmt_trainstate_load_params(g, c, err);
}

/* ---- the files a run names ---- */

static int file_sha_is(const char *path, const uint8_t want[32], char *why, size_t cap)
{
	struct stat st;
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return 0;
	uint8_t got[32];
	struct lmt_err err = { 0 };
	if (lmt_sha256_file(path, got, &err)) {
		snprintf(why, cap, "%s", err.msg);
		return 0;
	}
	if (memcmp(got, want, 32)) {
		char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
		snprintf(why, cap, "'%s' has SHA-256 %.16s..., the record says %.16s...", path, lmt_sha256_hex(got, a),
			 lmt_sha256_hex(want, b));
		return 0;
	}
	return 1;
}

int lmt_eval_find_recorded(const char *path, const char *base, const uint8_t want[32], char *out, size_t cap,
			   char *why, size_t whycap, struct lmt_err *err)
{
	int rc;
	snprintf(why, whycap, "'%s' not found", path);
	if (file_sha_is(path, want, why, whycap))
		return (rc = lmt_path_fmt(out, cap, err, "%s", path)) ? rc : 1;
	if (path[0] == '/' || !base)
		return 0;
	char dir[PATH_MAX];
	if (!realpath(base, dir))
		return 0;
	for (int up = 0; up < 6 && dir[0]; up++) {
		char cand[PATH_MAX * 2];
		snprintf(cand, sizeof cand, "%s/%s", dir, path);
		if (file_sha_is(cand, want, why, whycap))
			return (rc = lmt_path_fmt(out, cap, err, "%s", cand)) ? rc : 1;
		char *sl = strrchr(dir, '/');
		if (!sl || sl == dir)
			break;
		*sl = 0;
	}
	return 0;
}

int lmt_eval_tokenizer_open(struct lmt_tokenizer *tok, const char *given, const struct lmt_eval_ckinfo *ci,
			    const char *ck_path, const char *run_dir, char *path, size_t cap, char *why, size_t whycap,
			    struct lmt_err *err)
{
	char hex[LMT_SHA256_HEX], hex2[LMT_SHA256_HEX];
	int rc;
	why[0] = 0;
	if (given) {
		if ((rc = lmt_tok_load(tok, given, err)))
			return rc;
		if (memcmp(tok->sha256, ci->tok_sha, 32)) {
			rc = lmt_err_set(err, LMT_EINVAL,
					 "'%s' is tokenizer %.16s..., but the checkpoint '%s' was trained with tokenizer %.16s...",
					 given, lmt_sha256_hex(tok->sha256, hex), ck_path, lmt_sha256_hex(ci->tok_sha, hex2));
			lmt_tok_release(tok);
			return rc;
		}
		if ((rc = lmt_path_fmt(path, cap, err, "%s", given))) {
			lmt_tok_release(tok);
			return rc;
		}
	} else if (ci->cfg_tokenizer) {
		rc = lmt_eval_find_recorded(ci->cfg_tokenizer, run_dir, ci->tok_sha, path, cap, why, whycap, err);
		if (rc <= 0)
			return rc;
		if ((rc = lmt_tok_load(tok, path, err)))
			return rc;
	} else {
		return 0;
	}
	if ((int)tok->n_vocab != ci->cfg.V) {
		rc = lmt_err_set(err, LMT_EINVAL, "'%s' has a vocabulary of %u, the model in '%s' %d", path, tok->n_vocab,
				 ck_path, ci->cfg.V);
		lmt_tok_release(tok);
		return rc;
	}
	return 1;
}

int lmt_eval_dsinfo_read(const struct lmt_dataset *d, struct lmt_eval_dsinfo *x, struct lmt_err *err)
{
	char p[PATH_MAX];
	int rc;
	memset(x, 0, sizeof *x);
	if ((rc = lmt_path_fmt(p, sizeof p, err, "%s/manifest.json", d->dir)))
		return rc;
	json_error_t je;
	json_t *m = json_load_file(p, 0, &je);
	if (!m)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: %s", p, je.line, je.text);
	x->m = m;
	json_t *in = json_object_get(m, "input");
	x->input_path = json_string_value(json_object_get(in, "path"));
	const char *sha = json_string_value(json_object_get(in, "sha256"));
	x->has_input = x->input_path && sha && !lmt_sha256_parse(sha, x->input_sha);
	const char *eos = json_string_value(json_object_get(json_object_get(m, "packing"), "eos"));
	x->add_eos = eos && !strcmp(eos, "add") && !json_is_true(json_object_get(in, "eos_in_stream"));
	const char *mode = json_string_value(json_object_get(json_object_get(m, "packing"), "mode"));
	x->pad_mode = mode && !strcmp(mode, "pad");
	for (int s = 0; s < 3; s++) {
		json_t *t = json_object_get(json_object_get(json_object_get(m, "splits"), lmt_split_name(s)),
					    "tail_dropped");
		x->tail_dropped[s] = json_is_integer(t) ? (uint64_t)json_integer_value(t) : 0;
	}
	return 0;
}

void lmt_eval_dsinfo_release(struct lmt_eval_dsinfo *x)
{
	json_decref(x->m);
	x->m = NULL;
}

int lmt_eval_dataset_open(struct lmt_dataset *ds, struct lmt_eval_dsinfo *x, const char *given,
			  const struct lmt_eval_ckinfo *ci, const char *ck_path, const char *run_dir, char *dir,
			  size_t cap, int *same_data, char *why, size_t whycap, struct lmt_err *err)
{
	char hex[LMT_SHA256_HEX], hex2[LMT_SHA256_HEX];
	int rc;
	why[0] = 0;
	*same_data = 0;
	if (given) {
		if ((rc = lmt_path_fmt(dir, cap, err, "%s", given)))
			return rc;
	} else if (ci->cfg_data && ci->has_data_sha) {
		char mf[PATH_MAX];
		if ((rc = lmt_path_fmt(mf, sizeof mf, err, "%s/manifest.json", ci->cfg_data)))
			return rc;
		if ((rc = lmt_eval_find_recorded(mf, run_dir, ci->data_sha, dir, cap, why, whycap, err)) <= 0)
			return rc;
		*strrchr(dir, '/') = 0;
	} else {
		return 0;
	}
	if ((rc = lmt_dataset_open(ds, dir, err)))
		return rc;
	*same_data = ci->has_data_sha && !memcmp(ds->manifest_sha256, ci->data_sha, 32);
	if (memcmp(ds->tokenizer_sha256, ci->tok_sha, 32))
		rc = lmt_err_set(err, LMT_EINVAL, "'%s' was made with tokenizer %.16s..., the checkpoint '%s' with %.16s...",
				 dir, lmt_sha256_hex(ds->tokenizer_sha256, hex), ck_path, lmt_sha256_hex(ci->tok_sha, hex2));
	else if ((int)ds->vocab_size != ci->cfg.V)
		rc = lmt_err_set(err, LMT_EINVAL, "'%s' has a vocabulary of %u, the model in '%s' %d", dir, ds->vocab_size,
				 ck_path, ci->cfg.V);
	else
		rc = lmt_eval_dsinfo_read(ds, x, err);
	if (rc) {
		lmt_dataset_close(ds);
		return rc;
	}
	return 1;
}

/* ---- the documents ---- */

/*
 * How documents are framed: as the run's dataset presented them to the model. Packed
 * (shard-pack's default), a document follows the EOS of the one before it, so it is
 * scored after an EOS and its first token is a target too; padded (--mode pad), it
 * starts a sequence, so nothing precedes it and its first token is not scored. Raw
 * text gets the dataset's EOS appended, as shard-pack does. Without the dataset at
 * hand, the tokenizer's EOS plays both parts.
 */
void lmt_eval_docset_init(struct lmt_eval_docset *s, const struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x,
			  const struct lmt_tokenizer *tok)
{
	memset(s, 0, sizeof *s);
	uint32_t eos = ds ? ds->eos_id : tok ? tok->eos : LMT_NO_TOKEN;
	if (eos == UINT32_MAX)
		eos = LMT_NO_TOKEN;
	s->append = eos;
	s->ctx = eos != LMT_NO_TOKEN && !(x && x->pad_mode) ? eos : LMT_EVAL_NO_CTX;
	if (s->ctx != LMT_EVAL_NO_CTX)
		snprintf(s->framing, sizeof s->framing, "each document follows token %u (EOS, as the end of the one before "
			 "in %s), so its first token is scored too", s->ctx, ds ? "the dataset's packed sequences" :
			 "packed training");
	else if (x && x->pad_mode)
		snprintf(s->framing, sizeof s->framing, "each document starts a sequence, as the dataset's pad mode "
			 "presented it: its first token is not scored");
	else
		snprintf(s->framing, sizeof s->framing, "no EOS token: a document's first token is not scored");
}

void lmt_eval_docset_release(struct lmt_eval_docset *s)
{
	for (uint32_t i = 0; i < s->nsources; i++)
		free(s->sources[i]);
	free(s->sources);
	free(s->d);
	free(s->tok);
	s->sources = NULL;
	s->d = NULL;
	s->tok = NULL;
	s->n = s->ntok = 0;
	s->nsources = 0;
}

static int pool_add(struct lmt_eval_docset *s, const uint32_t *t, size_t n, uint64_t *at, struct lmt_err *err)
{
	if (LMT_GROW(s->tok, s->tokcap, s->ntok + n + 1))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for %zu tokens", s->ntok + n);
	memcpy(s->tok + s->ntok, t, n * sizeof *t);
	*at = s->ntok;
	s->ntok += n;
	return 0;
}

static struct lmt_eval_docinfo *doc_add(struct lmt_eval_docset *s)
{
	if (LMT_GROW(s->d, s->cap, s->n + 1))
		return NULL;
	struct lmt_eval_docinfo *d = &s->d[s->n++];
	memset(d, 0, sizeof *d);
	d->source = UINT32_MAX;
	d->gen_lp = d->field_lp = NAN;
	return d;
}

static int set_sources(struct lmt_eval_docset *s, uint32_t n, const char *(*name)(const void *, uint32_t),
		       const void *from, struct lmt_err *err)
{
	s->nsources = 0;
	if (!(s->sources = calloc(n ? n : 1, sizeof *s->sources)))
		return oom(err);
	for (uint32_t i = 0; i < n; i++) {
		if (!(s->sources[i] = strdup(name(from, i))))
			return oom(err);
		s->nsources = i + 1;
	}
	return 0;
}

static double gen_logprob(const char *text, size_t len)
{
	double lp;
	if (lmt_gen_parse(text, len, &lp, NULL, NULL))
		return NAN;
	return lp;
}

static int is_plain_jsonl(const char *name)
{
	static const char *const sfx[] = { ".jsonl", ".ndjson", ".json" };
	struct stat st;
	if (stat(name, &st) || !S_ISREG(st.st_mode))
		return 0;
	size_t n = strlen(name);
	for (size_t i = 0; i < LMT_ARRAY_SIZE(sfx); i++)
		if (n >= strlen(sfx[i]) && !strcasecmp(name + n - strlen(sfx[i]), sfx[i]))
			return 1;
	return 0;
}

/* The floor field: each JSONL document's field, read again from its record's line. */
static void read_field(struct lmt_eval_docset *s, const char *field)
{
	for (uint32_t src = 0; src < s->nsources; src++) {
		if (!is_plain_jsonl(s->sources[src]))
			continue;
		FILE *f = fopen(s->sources[src], "r");
		if (!f)
			continue;
		char *line = NULL;
		size_t cap = 0;
		uint64_t lineno = 0;
		for (size_t i = 0; i < s->n; i++) {
			struct lmt_eval_docinfo *d = &s->d[i];
			if (d->source != src || !d->line)
				continue;
			ssize_t got = 0;
			while (lineno < d->line && (got = getline(&line, &cap, f)) >= 0)
				lineno++;
			if (lineno != d->line)
				break;
			json_t *rec = json_loads(line, 0, NULL);
			json_t *v = json_object_get(rec, field);
			if (json_is_number(v))
				d->field_lp = json_number_value(v);
			json_decref(rec);
		}
		free(line);
		fclose(f);
	}
}

static const char *corpus_source(const void *c, uint32_t i)
{
	return lmt_corpus_source_name(c, i);
}

int lmt_eval_docset_read_text(struct lmt_eval_docset *s, const char **texts, int ntexts,
			      const struct lmt_corpus_opts *copts, struct lmt_tokenizer *tok, uint64_t max_docs,
			      uint64_t max_tokens, const char *floor_field, struct lmt_err *err)
{
	struct lmt_corpus *c;
	int rc = lmt_corpus_open(&c, texts, ntexts, copts, err);
	if (rc)
		return rc;
	struct lmt_tok_state *ts = lmt_tok_state_new(tok);
	struct lmt_u32vec v = { 0 };
	struct lmt_doc d;
	if (!ts) {
		rc = oom(err);
		goto out;
	}
	while ((rc = lmt_corpus_next(c, &d, err)) == 1) {
		if (max_docs && s->n >= max_docs)
			break;
		if (max_tokens && s->ntok >= max_tokens)
			break;
		v.n = 0;
		if (lmt_tok_encode(tok, ts, d.text, d.len, 0, &v)) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory encoding");
			goto out;
		}
		if (s->append != LMT_NO_TOKEN) {
			if (LMT_GROW(v.v, v.cap, v.n + 1)) {
				rc = oom(err);
				goto out;
			}
			v.v[v.n++] = s->append;
		}
		struct lmt_eval_docinfo *x = doc_add(s);
		if (!x) {
			rc = oom(err);
			goto out;
		}
		if ((rc = pool_add(s, v.v, v.n, &x->off, err)))
			goto out;
		x->n = v.n;
		x->bytes = d.len;
		x->words = lmt_count_words(d.text, d.len);
		x->source = d.source;
		x->line = d.line;
		x->gen_lp = gen_logprob(d.text, d.len);
	}
	if (rc < 0)
		goto out;
	if ((rc = set_sources(s, lmt_corpus_nsources(c), corpus_source, c, err)))
		goto out;
	s->has_bytes = s->has_words = s->has_sources = 1;
	s->bytes_from = "the text";
	read_field(s, floor_field);
out:
	free(v.v);
	lmt_tok_state_free(ts);
	lmt_corpus_close(c);
	return rc < 0 ? rc : 0;
}

/* The token stream the dataset was packed from, if it is where the manifest says
 * (or next to the dataset) with the recorded SHA-256; why says otherwise. */
static int open_stream(const struct lmt_dataset *d, const struct lmt_eval_dsinfo *x, struct lmt_tokstream_reader *r,
		       char *p, char *why, size_t cap, struct lmt_err *err)
{
	struct lmt_err e = { 0 };
	if (!x->has_input) {
		snprintf(why, cap, "the dataset manifest names no input token stream");
		return 0;
	}
	if (!strcmp(x->input_path, "<stdin>")) {
		snprintf(why, cap, "the dataset was packed from stdin: no token stream to read byte counts from");
		return 0;
	}
	int rc = lmt_eval_find_recorded(x->input_path, d->dir, x->input_sha, p, PATH_MAX, why, cap, err);
	if (rc <= 0)
		return rc;
	if (lmt_tokstream_reader_open(r, p, 0, &e)) {
		snprintf(why, cap, "%s", e.msg);
		return 0;
	}
	return 1;
}

/* The decoded text of tokens, specials left out (BOS and EOS are markers, not text). */
static char *decode(const struct lmt_tokenizer *tok, const uint32_t *t, size_t n, size_t *len)
{
	size_t need = lmt_tok_decode(tok, t, n, 1, NULL, 0);
	char *b = malloc(need + 1);
	if (!b)
		return NULL;
	lmt_tok_decode(tok, t, n, 1, (uint8_t *)b, need);
	b[need] = 0;
	*len = need;
	return b;
}

static const char *stream_source(const void *r, uint32_t i)
{
	return ((const struct lmt_tokstream_reader *)r)->sources[i];
}

/*
 * The byte counts and sources of the documents, from the token stream the dataset
 * was packed from or, when that is gone (packed from a pipe) or not found, from the
 * dataset's own documents table (the manifest's "documents", written by shard-pack
 * from the same index records): either gives the same numbers.
 */
struct doctab {
	int from;                        /* 0 none, 1 the stream r, 2 the table below */
	struct lmt_tokstream_reader r;
	struct lmt_tokstream_doc *d;     /* from the table: one per document */
	uint64_t n;
	json_t *names;                   /* the manifest's sources, borrowed */
	char path[PATH_MAX];
};

static const char *table_source(const void *t, uint32_t i)
{
	json_t *src = json_array_get(((const struct doctab *)t)->names, i);
	const char *n = json_string_value(json_object_get(src, "name"));
	return n ? n : "";
}

/* The dataset's documents table: 1 read, 0 the manifest names none, or an error. */
static int read_table(const struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x, struct doctab *t,
		      struct lmt_err *err)
{
	json_t *m = x->m, *dj = json_object_get(m, "documents");
	const char *name = json_string_value(json_object_get(dj, "path"));
	const char *hex = json_string_value(json_object_get(dj, "sha256"));
	json_t *cnt = json_object_get(dj, "count");
	uint8_t want[LMT_SHA256_LEN], got[LMT_SHA256_LEN];
	int rc;
	if (!name || !hex || !json_is_integer(cnt) || lmt_sha256_parse(hex, want))
		return 0;
	if (strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))
		return lmt_err_set(err, LMT_EFORMAT, "'%s': the documents table '%s' is not a file of the dataset",
				   ds->dir, name);
	if ((rc = lmt_path_fmt(t->path, sizeof t->path, err, "%s/%s", ds->dir, name)) ||
	    (rc = lmt_sha256_file(t->path, got, err)))
		return rc;
	if (memcmp(got, want, LMT_SHA256_LEN))
		return lmt_err_set(err, LMT_EFORMAT, "'%s': SHA-256 differs from the one the manifest records",
				   t->path);
	uint64_t n = (uint64_t)json_integer_value(cnt);
	t->names = json_object_get(m, "sources");
	uint32_t nsources = (uint32_t)json_array_size(t->names);
	FILE *f = fopen(t->path, "r");
	if (!f)
		return lmt_err_errno(err, "'%s'", t->path);
	if (!(t->d = calloc(n ? n : 1, sizeof *t->d))) {
		fclose(f);
		return oom(err);
	}
	char line[256];
	uint64_t off = 0;
	for (t->n = 0; t->n < n && fgets(line, sizeof line, f); t->n++) {
		unsigned long long tok, bytes;
		unsigned src;
		struct lmt_tokstream_doc *d = &t->d[t->n];
		if (sscanf(line, "{\"tokens\":%llu,\"bytes\":%llu,\"source\":%u}", &tok, &bytes, &src) != 3 ||
		    src >= nsources)
			break;
		*d = (struct lmt_tokstream_doc){ off, tok, bytes, src, 0 };
		off += tok;
	}
	int extra = fgets(line, sizeof line, f) != NULL;
	fclose(f);
	if (t->n != n || extra)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': line %llu is not a document record of the %llu the "
				   "manifest counts", t->path, (unsigned long long)t->n + 1, (unsigned long long)n);
	t->from = 2;
	return 1;
}

static int doctab_open(struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x, struct doctab *t,
		       struct lmt_eval_docset *s, struct lmt_err *err)
{
	memset(t, 0, sizeof *t);
	int rc = open_stream(ds, x, &t->r, s->stream_path, s->bytes_why, sizeof s->bytes_why, err);
	if (rc > 0) {
		t->from = 1;
		t->n = t->r.info.n_docs;
		snprintf(t->path, sizeof t->path, "%s", t->r.f.path);
		snprintf(s->bytes_from_buf, sizeof s->bytes_from_buf, "the token stream '%s'", s->stream_path);
	} else if (rc == 0 && (rc = read_table(ds, x, t, err)) > 0) {
		snprintf(s->bytes_from_buf, sizeof s->bytes_from_buf, "the dataset's documents '%s'", t->path);
	}
	if (rc > 0)
		s->bytes_why[0] = 0;
	return rc;
}

static void doctab_get(const struct doctab *t, uint64_t i, struct lmt_tokstream_doc *d)
{
	if (t->from == 1)
		lmt_tokstream_reader_doc(&t->r, i, d);
	else
		*d = t->d[i];
}

static int doctab_sources(const struct doctab *t, struct lmt_eval_docset *s, struct lmt_err *err)
{
	if (t->from == 1)
		return set_sources(s, t->r.info.n_sources, stream_source, &t->r, err);
	return set_sources(s, (uint32_t)json_array_size(t->names), table_source, t, err);
}

static void doctab_release(struct doctab *t)
{
	if (t->from == 1)
		lmt_tokstream_reader_close(&t->r);
	free(t->d);
	t->d = NULL;
	t->from = 0;
}

int lmt_eval_docset_read_split(struct lmt_eval_docset *s, struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x,
			       int split, const struct lmt_tokenizer *tok, uint64_t max_docs, uint64_t max_tokens,
			       struct lmt_err *err)
{
	struct lmt_split_doc *sd;
	size_t n;
	uint32_t *tokens;
	struct doctab t;
	const char *sname = lmt_split_name(split);
	int rc = lmt_split_docs(ds, split, NULL, 0, 1, max_docs, max_tokens, &sd, &n, &tokens, err);
	if (rc)
		return rc;
	if (n == 0) {
		free(sd);
		free(tokens);
		return lmt_err_set(err, LMT_ENOTFOUND, "'%s': the %s split has no documents", ds->dir, sname);
	}
	int have_stream = doctab_open(ds, x, &t, s, err);
	if (have_stream < 0) {
		doctab_release(&t);
		free(sd);
		free(tokens);
		return have_stream;
	}
	s->tok = tokens;
	s->ntok = sd[n - 1].off + sd[n - 1].n;
	for (size_t i = 0; i < n; i++) {
		int cut = sd[i].at_tail && x->tail_dropped[split];
		struct lmt_tokstream_doc td;
		if (have_stream) {
			if (sd[i].doc >= t.n) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': document %llu of the %s split is not in the %s "
						 "'%s' (%llu documents)", ds->dir, (unsigned long long)sd[i].doc, sname,
						 t.from == 1 ? "token stream" : "documents table", t.path,
						 (unsigned long long)t.n);
				goto out;
			}
			doctab_get(&t, sd[i].doc, &td);
			uint64_t want = td.n_tok + (x->add_eos ? 1 : 0);
			if (sd[i].n != want && !(cut && sd[i].n < want)) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': document %llu has %llu tokens in the %s split, %llu "
						 "in the %s '%s'", ds->dir, (unsigned long long)sd[i].doc,
						 (unsigned long long)sd[i].n, sname, (unsigned long long)want,
						 t.from == 1 ? "token stream" : "documents table", t.path);
				goto out;
			}
			cut = sd[i].n < want;
		}
		if (cut) {
			s->cut++;
			continue;
		}
		struct lmt_eval_docinfo *d = doc_add(s);
		if (!d) {
			rc = oom(err);
			goto out;
		}
		d->off = sd[i].off;
		d->n = sd[i].n;
		if (have_stream) {
			d->bytes = td.n_bytes;
			d->source = td.source;
		}
		if (tok) {
			size_t len;
			char *text = decode(tok, tokens + sd[i].off, sd[i].n, &len);
			if (!text) {
				rc = oom(err);
				goto out;
			}
			d->words = lmt_count_words(text, len);
			d->gen_lp = gen_logprob(text, len);
			free(text);
		}
	}
	if (s->n == 0) {
		rc = lmt_err_set(err, LMT_ENOTFOUND, "'%s': no complete document in the %s split", ds->dir, sname);
		goto out;
	}
	s->has_words = tok != NULL;
	if (have_stream) {
		s->has_bytes = s->has_sources = 1;
		if ((rc = doctab_sources(&t, s, err)))
			goto out;
		s->bytes_from = s->bytes_from_buf;
	}
out:
	doctab_release(&t);
	free(sd);
	return rc;
}

int lmt_eval_docset_choose_floor(struct lmt_eval_docset *s, int floor_given, const char *floor_field,
				 int floor_field_given)
{
	int field = s->n > 0, gen = s->n > 0;
	for (size_t i = 0; i < s->n; i++) {
		field &= isfinite(s->d[i].field_lp);
		gen &= isfinite(s->d[i].gen_lp);
	}
	if (floor_given) {
		snprintf(s->floor_source, sizeof s->floor_source, "--floor-bpb");
		return 0;
	}
	if (field) {
		s->floor_kind = LMT_EVAL_FLOOR_FIELD;
		snprintf(s->floor_source, sizeof s->floor_source, "field '%s' of each JSONL record", floor_field);
	} else if (gen) {
		s->floor_kind = LMT_EVAL_FLOOR_GEN;
		snprintf(s->floor_source, sizeof s->floor_source,
			 "gen-corpus language %d: each document's exact log-probability, recovered by parsing its text",
			 LMT_GEN_LANGUAGE);
	} else if (floor_field_given) {
		return 1;
	}
	return 0;
}
