/*
 * fuzz-release.c: a release archive (runcard --release) through the verification
 * walk, lmt_release_verify. The input is the archive's bytes, written as
 * r.tar.zst; libarchive takes any format and filter, so mutations that leave zstd
 * (or tar) still reach the walk.
 *
 * The walk is checked against a second read of the same archive
 * (lmt_tarball_scan, the names in archive order): every member it reports is
 * one of the archive's, in archive order, each entry at most once; a name
 * reported "missing" is in no entry and reported once, after the others; every
 * status is one release.h lists, with a digest exactly where one is promised;
 * every problem names the archive first, and the summary counts what was
 * reported. Under LMT_FUZZ the SHA-256 comparison against SHA256SUMS is skipped,
 * so a mutated member is reported "ok" and the walk goes on past it.
 */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "fuzz.h"
#include "report/release.h"
#include "report/tarball.h"

struct names {
	char **name;
	size_t n, cap;
};

static void names_add(struct names *s, const char *name)
{
	if (LMT_GROW(s->name, s->cap, s->n + 1) || !(s->name[s->n] = strdup(name)))
		abort();
	s->n++;
}

static void names_release(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->name[i]);
	free(s->name);
	memset(s, 0, sizeof *s);
}

static int scanned(void *ctx, const struct lmt_tar_entry *e)
{
	names_add(ctx, e->name);
	return 0;
}

struct walk {
	const char *path;
	struct names archive;   /* the entries, as lmt_tarball_scan reads them */
	size_t at;              /* the next archive entry a finding may be */
	struct names missing;
	int problems;
};

static void on_problem(void *ctx, const char *msg)
{
	struct walk *w = ctx;
	size_t pl = strlen(w->path);
	if (msg[0] != '\'' || strncmp(msg + 1, w->path, pl) || strncmp(msg + 1 + pl, "': ", 3))
		abort();
	w->problems++;
}

static void on_member(void *ctx, const struct lmt_release_finding *f)
{
	struct walk *w = ctx;
	static const char *const hashed[] = { "ok", "mismatch", "unlisted", "outside", "sums" };
	int has_sha = 0, known = 0;
	for (size_t k = 0; k < sizeof hashed / sizeof *hashed; k++)
		has_sha |= !strcmp(f->status, hashed[k]);
	known = has_sha || !strcmp(f->status, "not-a-file") || !strcmp(f->status, "missing");
	if (!known || !f->sha256 != !has_sha)
		abort();
	if (!strcmp(f->status, "missing")) {
		for (size_t i = 0; i < w->archive.n; i++)
			if (!strcmp(w->archive.name[i], f->name))
				abort(); /* it is there */
		for (size_t i = 0; i < w->missing.n; i++)
			if (!strcmp(w->missing.name[i], f->name))
				abort(); /* reported twice */
		names_add(&w->missing, f->name);
		return;
	}
	if (w->missing.n)
		abort(); /* the missing come last */
	while (w->at < w->archive.n && strcmp(w->archive.name[w->at], f->name))
		w->at++;
	if (w->at == w->archive.n)
		abort(); /* not an entry, out of order, or the same entry twice */
	w->at++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[512];
	struct lmt_err err = { 0 };
	struct walk w = { 0 };
	struct lmt_release_verify_cb cb = { on_problem, on_member, &w };
	struct lmt_release_summary s;
	fuzz_dir_empty();
	w.path = fuzz_file("r.tar.zst", data, size, path, sizeof path);
	if (lmt_tarball_scan(path, 0, scanned, &w.archive, &err)) {
		names_release(&w.archive);
	}
	int rc = lmt_release_verify(path, &cb, &s, &err);
	if (!rc) {
		if (!s.top || s.members != w.archive.n || s.problems != w.problems || (!s.problems && w.missing.n))
			abort();
		free(s.top);
	} else if (rc == LMT_ENOMEM || !err.msg[0]) {
		abort();
	}
	names_release(&w.archive);
	names_release(&w.missing);
	return 0;
}
