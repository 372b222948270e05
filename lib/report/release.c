/*
 * release.c: the release archive and its verification walk (see release.h).
 *
 * The archive is assembled from memory (the card's files, the tokenizer's bytes)
 * and from files exported into a staging directory next to the archive, so that
 * the export is on the archive's file system and the directory is removed on
 * every way out; SHA256SUMS is computed over the sorted members before the
 * archive is written.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/export.h"
#include "ckpt/safetensors.h"
#include "core/atomicfile.h"
#include "core/strbuf.h"
#include "core/util.h"
#include "data/tokenizer.h"
#include "data/tokinterop.h"
#include "report/release.h"
#include "report/tarball.h"

const char *const lmt_release_promised[LMT_RELEASE_NMEMBERS] = {
	"RUNCARD.md",           "SHA256SUMS",      "config.json",        "model.safetensors",
	"plots/grad_norm.svg",  "plots/loss.svg",  "plots/lr.svg",       "plots/memory.svg",
	"plots/throughput.svg", "runcard.yaml",    "tokenizer.json",     "tokenizer.lmtok",
};

/* ---- writing ---- */

struct member {
	char name[64];
	const char *data;  /* or path */
	size_t size;
	char *path;
	uint8_t sha[LMT_SHA256_LEN];
};

static int cmp_member(const void *a, const void *b)
{
	return strcmp(((const struct member *)a)->name, ((const struct member *)b)->name);
}

static void note(void (*fn)(void *, const char *), void *ctx, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(void (*fn)(void *, const char *), void *ctx, const char *fmt, ...)
{
	if (!fn)
		return;
	struct lmt_strbuf b = { 0 };
	va_list ap;
	va_start(ap, fmt);
	lmt_strbuf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (!b.oom)
		fn(ctx, b.buf);
	lmt_strbuf_release(&b);
}

static int stopped(const struct lmt_release_opts *o, struct lmt_err *err)
{
	if (o->stop && o->stop(o->ctx))
		return lmt_err_set(err, LMT_EIO, "interrupted");
	return 0;
}

/* The members, from the staging directory's exports and from memory, with
 * SHA256SUMS of the others; sorted. Returns how many, or an error. */
static int gather(struct member m[LMT_RELEASE_NMEMBERS], char *paths[3], const struct lmt_runcard_input *tk,
		  const struct lmt_runcard_files *f, struct lmt_strbuf *sums, struct lmt_err *err)
{
	memset(m, 0, LMT_RELEASE_NMEMBERS * sizeof *m);
	int n = 0;
#define MEM(nm_, data_, size_, path_)                                        \
	do {                                                                 \
		snprintf(m[n].name, sizeof m[n].name, "%.60s", nm_);          \
		m[n].data = data_;                                           \
		m[n].size = size_;                                           \
		m[n].path = path_;                                           \
		n++;                                                         \
	} while (0)
	MEM("model.safetensors", NULL, 0, paths[0]);
	MEM("config.json", NULL, 0, paths[1]);
	MEM("tokenizer.json", NULL, 0, paths[2]);
	MEM("tokenizer.lmtok", tk->data, tk->size, NULL);
	MEM("runcard.yaml", f->yaml, f->nyaml, NULL);
	MEM("RUNCARD.md", f->md, f->nmd, NULL);
	for (int i = 0; i < LMT_RUNCARD_NPLOTS; i++) {
		char nm_[64];
		snprintf(nm_, sizeof nm_, "plots/%.31s", f->plot[i].name);
		MEM(nm_, f->plot[i].svg, f->plot[i].len, NULL);
	}
#undef MEM
	/* SHA256SUMS: sha256sum -c format, of every other member, sorted */
	qsort(m, (size_t)n, sizeof m[0], cmp_member);
	char hex[LMT_SHA256_HEX];
	for (int i = 0; i < n; i++) {
		if (m[i].data)
			lmt_sha256(m[i].data, m[i].size, m[i].sha);
		else if (lmt_sha256_file(m[i].path, m[i].sha, err))
			return err ? err->code : LMT_EIO;
		lmt_strbuf_printf(sums, "%s  %s\n", lmt_sha256_hex(m[i].sha, hex), m[i].name);
	}
	if (sums->oom)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	snprintf(m[n].name, sizeof m[n].name, "SHA256SUMS");
	m[n].data = sums->buf;
	m[n].size = sums->len;
	lmt_sha256(sums->buf, sums->len, m[n].sha);
	n++;
	qsort(m, (size_t)n, sizeof m[0], cmp_member);
	LMT_ASSERT(n == LMT_RELEASE_NMEMBERS);
	return n;
}

int lmt_release_write(const struct lmt_runcard *c, const struct lmt_runcard_files *f,
		      const struct lmt_release_opts *o, struct lmt_release_result *r, struct lmt_err *err)
{
	memset(r, 0, sizeof *r);
	struct lmt_runcard_input cfg, ckin, tk;
	lmt_runcard_input(c, "config", &cfg);
	lmt_runcard_input(c, "checkpoint", &ckin);
	lmt_runcard_input(c, "tokenizer", &tk);
	const char *id = lmt_runcard_run_id(c), *ckdir = lmt_runcard_checkpoint(c);
	if (!id)
		return lmt_err_set(err, LMT_ENOTFOUND, "cannot release: the run has no run_id (%s)", cfg.why);
	if (!ckdir)
		return lmt_err_set(err, LMT_ENOTFOUND, "cannot release: %s", ckin.why);
	if (!tk.ok)
		return lmt_err_set(err, LMT_ENOTFOUND, "cannot release: %s", tk.why);
	r->top = id;

	/* the model, from the newest checkpoint, verified as it is exported */
	struct lmt_ckpt ck;
	note(o->info, o->ctx, "verifying '%s'", ckdir);
	int rc = lmt_ckpt_open(&ck, ckdir, 1, err);
	if (rc)
		return rc;
	struct lmt_tokenizer tok;
	if ((rc = lmt_tok_load(&tok, tk.path, err))) {
		lmt_ckpt_close(&ck);
		return rc;
	}
	char staging[PATH_MAX] = "", *paths[3] = { NULL, NULL, NULL };
	struct lmt_strbuf sums = { 0 };
	char hex[LMT_SHA256_HEX];
	const char *ts = json_string_value(lmt_ckpt_state(&ck, "tokenizer_sha256"));
	lmt_sha256_hex(tok.sha256, hex);
	if (!ts || strcmp(ts, hex)) {
		rc = lmt_err_set(err, LMT_ECHECKSUM,
				 "'%s' is not the tokenizer of '%s': sha256 %.16s..., the checkpoint records %.16s...",
				 tk.path, ckdir, hex, ts ? ts : "none");
		goto out;
	}

	if ((size_t)snprintf(staging, sizeof staging, "%s.partial-XXXXXX", o->archive) >= sizeof staging) {
		staging[0] = 0;
		rc = lmt_err_set(err, LMT_EINVAL, "path too long: '%.60s...'", o->archive);
		goto out;
	}
	if (!mkdtemp(staging)) {
		int e = errno;
		staging[0] = 0;
		rc = lmt_err_set(err, LMT_EIO, "'%s': cannot create a staging directory next to it: %s", o->archive,
				 strerror(e));
		goto out;
	}
	if (o->staging)
		o->staging(o->ctx, staging);

	static const char *const exported[3] = { "model.safetensors", "config.json", "tokenizer.json" };
	for (int i = 0; i < 3; i++)
		if (asprintf(&paths[i], "%s/%s", staging, exported[i]) < 0) {
			paths[i] = NULL;
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			goto out;
		}
	struct lmt_st_opts so = { paths[0], paths[1], o->dtype, -1, -1, 0 };
	lmt_export_bos_eos(&tok, &so.bos_id, &so.eos_id); /* as ckpt-reshard's export */
	struct lmt_st_result sr;
	if ((rc = lmt_safetensors_export_gpt2(&ck, &so, &sr, err)))
		goto out;
	if (sr.overflow)
		note(o->warn, o->ctx, "%llu finite values are beyond %s's range and became infinite",
		     (unsigned long long)sr.overflow, lmt_st_dtype_torch(o->dtype));
	if ((rc = stopped(o, err)) || (rc = lmt_tok_export_hf(&tok, paths[2], err)) || (rc = stopped(o, err)))
		goto out;

	struct member m[LMT_RELEASE_NMEMBERS];
	int n = gather(m, paths, &tk, f, &sums, err);
	if (n < 0) {
		rc = n;
		goto out;
	}
	struct lmt_tar_member tm[LMT_RELEASE_NMEMBERS];
	for (int i = 0; i < n; i++) {
		if ((size_t)snprintf(r->member[i].name, sizeof r->member[i].name, "%s/%s", id, m[i].name) >=
		    sizeof r->member[i].name) {
			rc = lmt_err_set(err, LMT_EINVAL, "path too long: '%.60s...'", r->member[i].name);
			goto out;
		}
		memcpy(r->member[i].sha256, m[i].sha, LMT_SHA256_LEN);
		tm[i].name = r->member[i].name;
		tm[i].data = m[i].data;
		tm[i].size = m[i].size;
		tm[i].path = m[i].path;
	}
	r->nmembers = n;
	if ((rc = stopped(o, err)) || (rc = lmt_tarball_write(o->archive, tm, n, err)))
		goto out;
	lmt_remove_dir(staging);
	staging[0] = 0;

	if ((rc = lmt_sha256_file(o->archive, r->sha256, err)))
		goto out;
	struct stat st;
	if (stat(o->archive, &st) == 0)
		r->bytes = (uint64_t)st.st_size;
	r->update = ck.update;
out:
	if (staging[0])
		lmt_remove_dir(staging);
	for (int i = 0; i < 3; i++)
		free(paths[i]);
	lmt_strbuf_release(&sums);
	lmt_tok_release(&tok);
	lmt_ckpt_close(&ck);
	return rc;
}

/* ---- verifying ---- */

struct ventry {
	char *name;
	int regular;
	uint64_t size;
	uint8_t sha[LMT_SHA256_LEN];
};

struct sumline {
	char *name;
	uint8_t sha[LMT_SHA256_LEN];
	int seen;
};

struct vstate {
	const char *archive;
	const struct lmt_release_verify_cb *cb;
	struct ventry *e;
	size_t n, cap;
	char *sums;
	char *sums_name;
	struct sumline *sl;
	size_t ns, capn;
	int problems, oom;
};

static int collect(void *ctx, const struct lmt_tar_entry *t)
{
	struct vstate *v = ctx;
	if (LMT_GROW(v->e, v->cap, v->n + 1) || !(v->e[v->n].name = strdup(t->name))) {
		v->oom = 1;
		return LMT_ENOMEM;
	}
	struct ventry *e = &v->e[v->n++];
	e->regular = t->regular;
	e->size = t->size;
	memcpy(e->sha, t->sha256, sizeof e->sha);
	const char *sl = strchr(t->name, '/');
	if (t->regular && sl && !strcmp(sl + 1, "SHA256SUMS") && t->data && !v->sums) {
		v->sums = strdup(t->data);
		v->sums_name = strdup(t->name);
		if (!v->sums || !v->sums_name) {
			v->oom = 1;
			return LMT_ENOMEM;
		}
	}
	return 0;
}

static void problem(struct vstate *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct vstate *v, const char *fmt, ...)
{
	struct lmt_strbuf b = { 0 };
	lmt_strbuf_printf(&b, "'%s': ", v->archive);
	va_list ap;
	va_start(ap, fmt);
	lmt_strbuf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (b.oom)
		v->oom = 1;
	else if (v->cb->problem)
		v->cb->problem(v->cb->ctx, b.buf);
	lmt_strbuf_release(&b);
	v->problems++;
}

static void member(struct vstate *v, const char *name, uint64_t size, const uint8_t *sha, const char *status)
{
	struct lmt_release_finding f = { name, size, sha, status };
	if (v->cb->member)
		v->cb->member(v->cb->ctx, &f);
}

static int listed(const struct vstate *v, const char *name)
{
	for (size_t k = 0; k < v->ns; k++)
		if (!strcmp(v->sl[k].name, name))
			return 1;
	return 0;
}

/* SHA256SUMS: "HEX  NAME" (or "HEX *NAME") lines, names under top */
static void parse_sums(struct vstate *v, const char *top)
{
	char *p = v->sums;
	size_t lineno = 0;
	while (*p) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		lineno++;
		if (*p) {
			char hexs[65];
			size_t L = strlen(p);
			if (L < 67 || (p[65] != ' ' && p[65] != '*') || p[64] != ' ') {
				problem(v, "%s line %zu is not 'SHA-256  NAME'", v->sums_name, lineno);
			} else {
				memcpy(hexs, p, 64);
				hexs[64] = 0;
				if (LMT_GROW(v->sl, v->capn, v->ns + 1)) {
					v->oom = 1;
					return;
				}
				if (lmt_sha256_parse(hexs, v->sl[v->ns].sha)) {
					problem(v, "%s line %zu: '%s' is not a SHA-256", v->sums_name, lineno, hexs);
				} else if (asprintf(&v->sl[v->ns].name, "%s%s", top, p + 66) < 0) {
					v->oom = 1;
					return;
				} else if (listed(v, v->sl[v->ns].name)) {
					/* kept once: a second listing would be checked (or
					 * reported missing) a second time, and it may disagree */
					problem(v, "%s line %zu: '%s' is listed twice", v->sums_name, lineno,
						v->sl[v->ns].name);
					free(v->sl[v->ns].name);
				} else {
					v->sl[v->ns].seen = 0;
					v->ns++;
				}
			}
		}
		if (!nl)
			break;
		p = nl + 1;
	}
}

/* Each member against SHA256SUMS, in archive order. */
static void check_members(struct vstate *v, const char *top, size_t tl)
{
	for (size_t i = 0; i < v->n; i++) {
		struct ventry *e = &v->e[i];
		for (size_t k = 0; k < i; k++)
			if (!strcmp(v->e[k].name, e->name))
				problem(v, "'%s' appears twice", e->name);
		if (tl && strncmp(e->name, top, tl)) {
			problem(v, "'%s' is outside the top directory '%s'", e->name, top);
			member(v, e->name, e->size, e->sha, "outside");
			continue;
		}
		if (!e->regular) {
			size_t L = strlen(e->name);
			if (L && e->name[L - 1] == '/')
				continue; /* a directory entry */
			problem(v, "'%s' is not a regular file", e->name);
			member(v, e->name, e->size, NULL, "not-a-file");
			continue;
		}
		if (v->sums_name && !strcmp(e->name, v->sums_name)) {
			member(v, e->name, e->size, e->sha, "sums");
			continue;
		}
		struct sumline *s = NULL;
		for (size_t k = 0; k < v->ns && !s; k++)
			if (!strcmp(v->sl[k].name, e->name))
				s = &v->sl[k];
		if (!s) {
			problem(v, "'%s' is in the archive but not in SHA256SUMS", e->name);
			member(v, e->name, e->size, e->sha, "unlisted");
			continue;
		}
		s->seen = 1;
		if (!LMT_FUZZING && memcmp(s->sha, e->sha, LMT_SHA256_LEN)) { /* LMT_FUZZING: skipped in the fuzz build */
			char h1[LMT_SHA256_HEX], h2[LMT_SHA256_HEX];
			problem(v, "'%s': SHA-256 %s, SHA256SUMS says %s", e->name, lmt_sha256_hex(e->sha, h1),
				lmt_sha256_hex(s->sha, h2));
			member(v, e->name, e->size, e->sha, "mismatch");
		} else {
			member(v, e->name, e->size, e->sha, "ok");
		}
	}
	for (size_t k = 0; k < v->ns; k++)
		if (!v->sl[k].seen) {
			int there = 0;
			for (size_t i = 0; i < v->n; i++)
				there |= !strcmp(v->e[i].name, v->sl[k].name);
			if (!there) {
				problem(v, "'%s' is listed in SHA256SUMS but not in the archive", v->sl[k].name);
				member(v, v->sl[k].name, 0, NULL, "missing");
			}
		}
}

int lmt_release_verify(const char *path, const struct lmt_release_verify_cb *cb, struct lmt_release_summary *s,
		       struct lmt_err *err)
{
	memset(s, 0, sizeof *s);
	struct vstate v;
	memset(&v, 0, sizeof v);
	v.archive = path;
	v.cb = cb;
	int rc = lmt_tarball_scan(path, 1 << 20, collect, &v, err);
	char *top = NULL;
	if (rc) {
		if (v.oom)
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	if (!v.n) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': the archive is empty", path);
		goto out;
	}
	/* one top directory */
	const char *sl = strchr(v.e[0].name, '/');
	size_t tl = sl ? (size_t)(sl - v.e[0].name) + 1 : 0;
	top = tl ? strndup(v.e[0].name, tl) : strdup("");
	if (!top) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	if (!tl)
		problem(&v, "'%s' is not under a top directory", v.e[0].name);
	if (!v.sums)
		problem(&v, "no %sSHA256SUMS in the archive", top);
	else
		parse_sums(&v, top);
	if (!v.oom)
		check_members(&v, top, tl);
	/* the promised files */
	for (size_t k = 0; k < LMT_RELEASE_NMEMBERS && !v.oom; k++) {
		const char *p = lmt_release_promised[k];
		size_t lt = strlen(top);
		int there = 0;
		for (size_t i = 0; i < v.n; i++)
			there |= v.e[i].regular && !strncmp(v.e[i].name, top, lt) && !strcmp(v.e[i].name + lt, p);
		if (!there && strcmp(p, "SHA256SUMS"))
			problem(&v, "'%s%s' is missing: a release holds %s", top, p, p);
	}
	if (v.oom) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	s->top = top;
	top = NULL;
	s->members = v.n;
	s->listed = v.ns;
	s->problems = v.problems;
out:
	free(top);
	for (size_t i = 0; i < v.n; i++)
		free(v.e[i].name);
	for (size_t k = 0; k < v.ns; k++)
		free(v.sl[k].name);
	free(v.sl);
	free(v.e);
	free(v.sums);
	free(v.sums_name);
	return rc;
}
