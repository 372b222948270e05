/*
 * fuzz-config.c: train's configuration file ("key = value" lines) through
 * lmt_config_parse, and through lmt_config_read from a file (the two must agree).
 *
 * What is handed out is checked against the format (core/config.h) rather than
 * against a second parser: every entry has a line >= 1, later than the one
 * before; its key has no '=' and no blank at either end, and neither key nor
 * value holds '#', a line end or a control character (tab aside) and both are
 * UTF-8 (checked here, apart from core/utf8.c). A text that is accepted holds no
 * NUL and no bare CR, and written back as "key = value" lines it parses to the
 * same entries; a callback's stop ends the walk and is returned.
 *
 * The same bytes go through the JSON form's reader too (lmt_resumecfg_read, a
 * run's config.json given as --config): a NUL anywhere is refused as a format
 * error naming the file; whatever is accepted holds no NUL, and each option it
 * hands out has a value and says where in the file it came from.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/resumecfg.h"
#include "core/config.h"
#include "core/strbuf.h"
#include "fuzz.h"

#define MAXE 4096

struct got {
	const char *path;
	int n, stop_at, last_line;
	char *key[MAXE], *value[MAXE];  /* value NULL: the key stood alone */
	int line[MAXE];
};

/* Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF). */
static int utf8_ok(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s, n = c < 0x80 ? 0 : c >= 0xc2 && c < 0xe0 ? 1 : c >= 0xe0 && c < 0xf0 ? 2 : c >= 0xf0 && c < 0xf5 ? 3 : 9;
		if (n == 9)
			return 0;
		uint32_t cp = n ? c & (0x3fu >> n) : c;
		for (unsigned i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i] & 0x3fu);
		}
		if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return 0;
		s += n + 1;
	}
	return 1;
}

static int text_ok(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f || *p == '#')
			return 0;
	return utf8_ok((const unsigned char *)s);
}

static int blank(char c)
{
	return c == ' ' || c == '\t';
}

static int take(void *ctx, const struct lmt_config_entry *e)
{
	struct got *g = ctx;
	size_t kl = strlen(e->key), vl = e->value ? strlen(e->value) : 0;
	if (e->line < 1 || e->line <= g->last_line || strcmp(e->path, g->path))
		abort();
	if (strchr(e->key, '=') || (kl && (blank(e->key[0]) || blank(e->key[kl - 1]))) || !text_ok(e->key))
		abort();
	if (!kl && !e->value)
		abort(); /* a blank line is skipped, not handed out */
	if (e->value && ((vl && (blank(e->value[0]) || blank(e->value[vl - 1]))) || !text_ok(e->value)))
		abort();
	g->last_line = e->line;
	if (g->n == g->stop_at)
		return 99;
	if (g->n < MAXE) {
		g->line[g->n] = e->line;
		g->key[g->n] = strdup(e->key);
		g->value[g->n] = e->value ? strdup(e->value) : NULL;
		if (!g->key[g->n] || (e->value && !g->value[g->n]))
			abort();
	}
	g->n++;
	return 0;
}

static void got_release(struct got *g)
{
	for (int i = 0; i < g->n && i < MAXE; i++) {
		free(g->key[i]);
		free(g->value[i]);
	}
	g->n = 0;
}

static struct got *got_init(struct got *g, const char *path, int stop_at)
{
	g->path = path;
	g->n = 0;
	g->last_line = 0;
	g->stop_at = stop_at;
	return g;
}

static int parse(struct got *g, const char *text, size_t n, int stop_at, struct lmt_err *err)
{
	return lmt_config_parse("t.cfg", text, n, take, got_init(g, "t.cfg", stop_at), err);
}

static int same(const struct got *a, const struct got *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n && i < MAXE; i++)
		if (strcmp(a->key[i], b->key[i]) || !a->value[i] != !b->value[i] ||
		    (a->value[i] && strcmp(a->value[i], b->value[i])))
			return 0;
	return 1;
}

static void json_form(const uint8_t *data, size_t size)
{
	char path[512];
	struct lmt_err err = { 0 };
	struct lmt_resumecfg_result res;
	fuzz_dir_empty();
	fuzz_file("c.json", data, size, path, sizeof path);
	int rc = lmt_resumecfg_read(path, &res, &err);
	int nul = memchr(data, 0, size) != NULL;
	if (rc) {
		if ((nul && rc != LMT_EFORMAT) || (rc != LMT_EFORMAT && rc != LMT_EINVAL && rc != LMT_ENOMEM) ||
		    (rc != LMT_ENOMEM && (err.msg[0] != '\'' || strncmp(err.msg + 1, path, strlen(path)))))
			abort();
		return;
	}
	if (nul)
		abort();
	for (size_t i = 0; i < res.n; i++)
		if (!res.items[i].opt || !res.items[i].value || !res.items[i].detail ||
		    strncmp(res.items[i].detail + 1, path, strlen(path)))
			abort();
	lmt_resumecfg_release(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_form(data, size);
	static struct got a, b;
	struct lmt_err err = { 0 };
	const char *text = (const char *)data;
	int rc = parse(&a, text, size, -1, &err);
	if (rc) {
		/* refused before any entry, with the file and the line named */
		if (rc != LMT_EFORMAT || a.n || strncmp(err.msg, "'t.cfg': line ", 14))
			abort();
		return 0;
	}
	for (size_t i = 0; i < size; i++)
		if (!data[i] || (data[i] == '\r' && (i + 1 == size || data[i + 1] != '\n')))
			abort();

	/* the file reader gives the same */
	char path[512];
	fuzz_dir_empty();
	fuzz_file("t.cfg", data, size, path, sizeof path);
	if (lmt_config_read(path, take, got_init(&b, path, -1), &err) || !same(&a, &b))
		abort();
	got_release(&b);

	/* written back and read again: the same entries, one a line */
	struct lmt_strbuf s = { 0 };
	for (int i = 0; i < a.n && i < MAXE; i++) {
		if (a.value[i])
			lmt_strbuf_printf(&s, "%s = %s\n", a.key[i], a.value[i]);
		else
			lmt_strbuf_printf(&s, "%s\n", a.key[i]);
	}
	if (s.oom)
		abort();
	if (a.n <= MAXE) {
		if (parse(&b, s.buf ? s.buf : "", s.len, -1, &err) || !same(&a, &b) || (b.n && b.line[b.n - 1] != b.n))
			abort();
		got_release(&b);
		/* a stop half way is returned, and nothing after it is handed out */
		if (a.n && (parse(&b, s.buf, s.len, a.n / 2, &err) != 99 || b.n != a.n / 2))
			abort();
		got_release(&b);
	}
	lmt_strbuf_release(&s);
	got_release(&a);
	return 0;
}
