/*
 * fuzz.h: what the libFuzzer targets share: a scratch directory of their own, and
 * one fuzz input cut into the files of a directory.
 *
 * The library reads paths, not buffers, so each target writes its input to files
 * under a directory made once per process (removed at exit) and empties it after
 * every input: nothing one input leaves can change what the next one does.
 *
 * A directory input (a dataset, a checkpoint) is one byte string holding several
 * files: the first part, up to the first "\n--8<-- ", is the main file (its name is
 * the target's: manifest.json); every later part starts with its file name, ends
 * the name at "\n" and holds the file's bytes up to the next "\n--8<-- " or the
 * end. Names are kept to [A-Za-z0-9._-], not starting with '.', up to 64 bytes; a
 * part with any other name is dropped. scripts/gen-fuzz-seeds writes such inputs
 * from real directories.
 *
 * Static inline only (see HOUSE-STYLE.md): each target is one translation unit.
 */
#ifndef LMT_FUZZ_H
#define LMT_FUZZ_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomicfile.h"

#define FUZZ_SEP "\n--8<-- "

static char fuzz_dir_path[64];

static inline void fuzz_dir_cleanup(void)
{
	if (fuzz_dir_path[0])
		lmt_remove_dir(fuzz_dir_path);
}

/* The per-process scratch directory, made on first use, removed at exit. */
static inline const char *fuzz_dir(void)
{
	if (!fuzz_dir_path[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/lmt-fuzz.XXXXXX",
			 tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
		if (!mkdtemp(fuzz_dir_path))
			abort();
		atexit(fuzz_dir_cleanup);
	}
	return fuzz_dir_path;
}

/* Remove every file the last input left in the scratch directory. */
static inline void fuzz_dir_empty(void)
{
	DIR *d = opendir(fuzz_dir());
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
		if (unlink(p))
			lmt_remove_dir(p);
	}
	if (d)
		closedir(d);
}

/* Write n bytes to NAME in the scratch directory; the path goes to out. */
static inline const char *fuzz_file(const char *name, const void *data, size_t n, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", fuzz_dir(), name);
	FILE *f = fopen(out, "wb");
	if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f))
		abort();
	return out;
}

static inline const uint8_t *fuzz_find(const uint8_t *p, size_t n, const char *s)
{
	return memmem(p, n, s, strlen(s));
}

static inline int fuzz_name_ok(const uint8_t *s, size_t n)
{
	if (n == 0 || n > 64 || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/*
 * Cut data into files of the scratch directory (emptied first): the first part
 * becomes main_name, the others the files they name (see the top of this file).
 * A later part of the same name replaces an earlier one. Returns the number of
 * files written.
 */
static inline int fuzz_dir_write(const uint8_t *data, size_t n, const char *main_name)
{
	char p[512], name[65];
	size_t sl = strlen(FUZZ_SEP);
	const uint8_t *end = data + n, *at = fuzz_find(data, n, FUZZ_SEP);
	int files = 1;
	fuzz_dir_empty();
	fuzz_file(main_name, data, (size_t)((at ? at : end) - data), p, sizeof p);
	while (at) {
		const uint8_t *s = at + sl, *nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			break;
		const uint8_t *body = nl + 1;
		at = fuzz_find(body, (size_t)(end - body), FUZZ_SEP);
		if (!fuzz_name_ok(s, (size_t)(nl - s)))
			continue;
		memcpy(name, s, (size_t)(nl - s));
		name[nl - s] = 0;
		fuzz_file(name, body, (size_t)((at ? at : end) - body), p, sizeof p);
		files++;
	}
	return files;
}

#endif
