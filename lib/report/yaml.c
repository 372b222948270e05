/*
 * yaml.c: the YAML writer described in yaml.h.
 *
 * Indentation is decided when a line starts: a container remembers its own
 * indentation and whether its first line has been begun by its parent ("- "
 * written, the rest of the line still to come), which is how a mapping that is a
 * sequence item gets its first key on the dash's line.
 */
#include "report/yaml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/utf8.h"
#include "core/util.h"

void lmt_yaml_init(struct lmt_yaml *y)
{
	memset(y, 0, sizeof *y);
}

void lmt_yaml_release(struct lmt_yaml *y)
{
	lmt_strbuf_release(&y->out);
	memset(y, 0, sizeof *y);
}

static void put(struct lmt_yaml *y, const char *s, size_t n)
{
	lmt_strbuf_put(&y->out, s, n);
}

static void puts_(struct lmt_yaml *y, const char *s)
{
	put(y, s, strlen(s));
}

static void spaces(struct lmt_yaml *y, int n)
{
	static const char sp[] = "                                                                ";
	while (n > 0) {
		int k = n < 64 ? n : 64;
		put(y, sp, (size_t)k);
		n -= k;
	}
}

/* ---- scalars ---- */

int lmt_yaml_plain_ok(const char *s)
{
	static const char *const words[] = { "y", "n", "yes", "no", "on", "off", "true", "false", "null" };
	if (!s[0])
		return 0;
	char c = s[0];
	if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '/'))
		return 0;
	for (const char *p = s; *p; p++) {
		c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '.' || c == '/' || c == '+' || c == '-'))
			return 0;
	}
	for (size_t i = 0; i < LMT_ARRAY_SIZE(words); i++)
		if (!strcasecmp(s, words[i]))
			return 0;
	return 1;
}

char *lmt_yaml_fmt_num(double v, char *buf)
{
	if (!isfinite(v)) {
		strcpy(buf, "null");
		return buf;
	}
	lmt_fmt_double(v, buf);
	char *e = strchr(buf, 'e');
	if (e && !memchr(buf, '.', (size_t)(e - buf))) {
		size_t n = strlen(e);
		memmove(e + 2, e, n + 1);
		e[0] = '.';
		e[1] = '0';
	}
	return buf;
}

static void quoted(struct lmt_yaml *y, const char *s)
{
	static const char hx[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
	put(y, "\"", 1);
	while (p < end) {
		uint32_t cp;
		int n = lmt_utf8_decode(p, (size_t)(end - p), &cp);
		if (cp >= LMT_UTF8_BAD) {
			put(y, "\xef\xbf\xbd", 3); /* U+FFFD */
			p++;
			continue;
		}
		switch (cp) {
		case '"': puts_(y, "\\\""); break;
		case '\\': puts_(y, "\\\\"); break;
		case '\n': puts_(y, "\\n"); break;
		case '\r': puts_(y, "\\r"); break;
		case '\t': puts_(y, "\\t"); break;
		case '\b': puts_(y, "\\b"); break;
		case '\f': puts_(y, "\\f"); break;
		default:
			/* not YAML's c-printable, or a YAML line break: \uXXXX */
			if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
			    cp == 0xfffe || cp == 0xffff) {
				char e[7] = { '\\', 'u', hx[cp >> 12 & 15], hx[cp >> 8 & 15], hx[cp >> 4 & 15], hx[cp & 15], 0 };
				put(y, e, 6);
			} else {
				put(y, (const char *)p, (size_t)n);
			}
		}
		p += n;
	}
	put(y, "\"", 1);
}

static void scalar_str(struct lmt_yaml *y, const char *s)
{
	if (lmt_yaml_plain_ok(s))
		puts_(y, s);
	else
		quoted(y, s);
}

/* ---- lines ---- */

static void trailing_comment(struct lmt_yaml *y, const char *comment)
{
	if (comment && comment[0]) {
		puts_(y, "  # ");
		for (const char *c = comment; *c; c++)
			put(y, (*c == '\n' || *c == '\r') ? " " : c, 1);
	}
}

/* Begin a line in the current container: its indentation (unless the parent's
 * "- " already began it), then "- " for a sequence item or "key:" in a mapping. */
static void line_start(struct lmt_yaml *y, const char *key)
{
	int d = y->depth;
	if (y->st[d].item_first)
		y->st[d].item_first = 0;
	else
		spaces(y, y->st[d].indent);
	y->st[d].count++;
	if (y->st[d].seq) {
		puts_(y, "- ");
	} else {
		scalar_str(y, key ? key : "");
		puts_(y, ":");
	}
}

void lmt_yaml_comment(struct lmt_yaml *y, const char *text)
{
	int d = y->depth;
	if (y->st[d].item_first) { /* after a bare "- ": the item continues below */
		puts_(y, "\n");
		y->st[d].item_first = 0;
	}
	const char *p = text;
	for (;;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		spaces(y, y->st[d].indent);
		puts_(y, n ? "# " : "#");
		put(y, p, n);
		puts_(y, "\n");
		if (!nl)
			break;
		p = nl + 1;
	}
}

static void open_(struct lmt_yaml *y, const char *key, const char *comment, int seq)
{
	if (y->depth + 1 >= LMT_YAML_MAX_DEPTH) {
		y->out.oom = 1;
		return;
	}
	int d = y->depth;
	int in_seq = y->st[d].seq;
	if (in_seq && comment && comment[0])
		lmt_yaml_comment(y, comment);
	line_start(y, key);
	int child_indent = y->st[d].indent + 2;
	y->depth++;
	memset(&y->st[y->depth], 0, sizeof y->st[0]);
	y->st[y->depth].seq = (unsigned char)seq;
	y->st[y->depth].indent = child_indent;
	y->st[y->depth].key_at = y->out.len;
	if (in_seq) {
		y->st[y->depth].item_first = 1; /* its first line goes after the "- " */
	} else {
		trailing_comment(y, comment);
		puts_(y, "\n");
	}
}

void lmt_yaml_map(struct lmt_yaml *y, const char *key, const char *comment)
{
	open_(y, key, comment, 0);
}

void lmt_yaml_seq(struct lmt_yaml *y, const char *key, const char *comment)
{
	open_(y, key, comment, 1);
}

void lmt_yaml_end(struct lmt_yaml *y)
{
	if (y->depth == 0 || y->out.oom)
		return;
	int d = y->depth;
	const char *empty = y->st[d].seq ? "[]" : "{}";
	if (y->st[d].count == 0) {
		if (y->st[d].item_first) {
			puts_(y, empty);
			puts_(y, "\n");
		} else {
			/* "key:<comment>\n" becomes "key: {}<comment>\n" */
			size_t at = y->st[d].key_at, tail = y->out.len - at - 1;
			if (LMT_GROW(y->out.buf, y->out.cap, y->out.len + 4)) {
				y->out.oom = 1;
				return;
			}
			memmove(y->out.buf + at + 3, y->out.buf + at, tail);
			memcpy(y->out.buf + at, " ", 1);
			memcpy(y->out.buf + at + 1, empty, 2);
			y->out.len = at + 3 + tail;
			y->out.buf[y->out.len++] = '\n';
			y->out.buf[y->out.len] = 0;
		}
	}
	y->depth--;
}

static void scalar_line(struct lmt_yaml *y, const char *key, const char *text, int is_str, const char *comment)
{
	line_start(y, key);
	if (!y->st[y->depth].seq)
		puts_(y, " ");
	if (is_str)
		scalar_str(y, text);
	else
		puts_(y, text);
	trailing_comment(y, comment);
	puts_(y, "\n");
}

void lmt_yaml_str(struct lmt_yaml *y, const char *key, const char *s, const char *comment)
{
	if (!s)
		lmt_yaml_null(y, key, comment);
	else
		scalar_line(y, key, s, 1, comment);
}

void lmt_yaml_i64(struct lmt_yaml *y, const char *key, int64_t v, const char *comment)
{
	char b[32];
	snprintf(b, sizeof b, "%lld", (long long)v);
	scalar_line(y, key, b, 0, comment);
}

void lmt_yaml_num(struct lmt_yaml *y, const char *key, double v, const char *comment)
{
	char b[40];
	scalar_line(y, key, lmt_yaml_fmt_num(v, b), 0, comment);
}

void lmt_yaml_bool(struct lmt_yaml *y, const char *key, int v, const char *comment)
{
	scalar_line(y, key, v ? "true" : "false", 0, comment);
}

void lmt_yaml_null(struct lmt_yaml *y, const char *key, const char *comment)
{
	scalar_line(y, key, "null", 0, comment);
}

void lmt_yaml_nums(struct lmt_yaml *y, const char *key, const double *v, size_t n, const char *comment)
{
	struct lmt_yaml t; /* the flow sequence, built first */
	lmt_yaml_init(&t);
	put(&t, "[", 1);
	for (size_t i = 0; i < n; i++) {
		char b[40];
		if (i)
			put(&t, ", ", 2);
		puts_(&t, lmt_yaml_fmt_num(v[i], b));
	}
	put(&t, "]", 1);
	if (t.out.oom)
		y->out.oom = 1;
	else
		scalar_line(y, key, t.out.buf, 0, comment);
	lmt_yaml_release(&t);
}
