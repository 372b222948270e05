/*
 * config.c: "key = value" configuration files (config.h).
 *
 * Two passes: the first checks every byte (so that a NUL cannot end the file
 * early, as it did when lines were C strings, and a stray CR or an invalid UTF-8
 * sequence cannot become part of a key or a value), the second cuts the lines
 * in a copy of the text and hands out the entries.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomicfile.h"
#include "core/config.h"
#include "core/utf8.h"

/* The first byte the format cannot hold, as an error naming its line; 0 if none. */
static int check_text(const char *path, const unsigned char *p, size_t n, struct lmt_err *err)
{
	int line = 1;
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		uint32_t cp;
		int len = lmt_utf8_decode(p + i, n - i, &cp);
		char what[64] = "";
		if (c == 0)
			snprintf(what, sizeof what, "a NUL byte");
		else if (c == '\r' && (i + 1 == n || p[i + 1] != '\n'))
			snprintf(what, sizeof what, "a carriage return not followed by a line feed");
		else if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
			snprintf(what, sizeof what, "control character 0x%02x", c);
		else if (cp >= LMT_UTF8_BAD)
			snprintf(what, sizeof what, "byte 0x%02x is not UTF-8", c);
		if (what[0])
			return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: %s (a config file is UTF-8 text)", path,
					   line, what);
		if (c == '\n')
			line++;
		i += (size_t)len;
	}
	return 0;
}

static int blank(char c)
{
	return c == ' ' || c == '\t';
}

int lmt_config_parse(const char *path, const char *text, size_t n, lmt_config_fn fn, void *ctx,
		     struct lmt_err *err)
{
	int rc = check_text(path, (const unsigned char *)text, n, err);
	if (rc)
		return rc;
	char *data = malloc(n + 1);
	if (!data)
		return lmt_err_set(err, LMT_ENOMEM, "'%s': out of memory", path);
	memcpy(data, text, n);
	data[n] = 0;
	int lineno = 0;
	for (char *line = data, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next) {
			if (next > line && next[-1] == '\r')
				next[-1] = 0;
			*next++ = 0;
		}
		lineno++;
		char *h = strchr(line, '#');
		if (h)
			*h = 0;
		char *k = line;
		while (blank(*k))
			k++;
		if (!*k)
			continue;
		char *eq = strchr(k, '=');
		char *ke = eq ? eq : k + strlen(k);
		char *v = eq ? eq + 1 : NULL;
		while (ke > k && blank(ke[-1]))
			ke--;
		*ke = 0;
		while (v && blank(*v))
			v++;
		if (v) {
			char *ve = v + strlen(v);
			while (ve > v && blank(ve[-1]))
				*--ve = 0;
		}
		struct lmt_config_entry e = { path, lineno, k, v };
		if ((rc = fn(ctx, &e)))
			break;
	}
	free(data);
	return rc;
}

int lmt_config_read(const char *path, lmt_config_fn fn, void *ctx, struct lmt_err *err)
{
	char *data;
	size_t n;
	int rc = lmt_read_file(path, &data, &n, err);
	if (rc)
		return rc;
	rc = lmt_config_parse(path, data, n, fn, ctx, err);
	free(data);
	return rc;
}
