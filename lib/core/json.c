/*
 * json.c: the JSON writer described in json.h.
 */
#include "core/json.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/jsonscan.h"
#include "core/utf8.h"
#include "core/util.h"

void lmt_json_init(struct lmt_json *j)
{
	memset(j, 0, sizeof *j);
}

void lmt_json_release(struct lmt_json *j)
{
	lmt_strbuf_release(&j->out);
	memset(j, 0, sizeof *j);
}

void lmt_json_reset(struct lmt_json *j)
{
	lmt_strbuf_reset(&j->out);
	j->depth = 0;
}

static void put(struct lmt_json *j, const char *s, size_t n)
{
	lmt_strbuf_put(&j->out, s, n);
}

static void putc_(struct lmt_json *j, char c)
{
	put(j, &c, 1);
}

void lmt_json_escape(struct lmt_json *j, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;
	struct lmt_jsonstops t = { NULL, 0 };
	putc_(j, '"');
	while (p < end) {
		p = lmt_json_next_stop(&t, p, end);
		if (p >= end)
			break;
		unsigned c = *p;
		if (c >= 0x80) {
			/* one UTF-8 character (RFC 3629, utf8.h); a valid one stays in the run */
			uint32_t cp;
			int len = lmt_utf8_decode_fast(p, (size_t)(end - p), &cp);
			if (cp < LMT_UTF8_BAD) {
				p += len;
				continue;
			}
		}
		if (p > run)
			put(j, (const char *)run, (size_t)(p - run));
		if (c >= 0x80) {
			put(j, "\xef\xbf\xbd", 3); /* U+FFFD for one bad byte */
		} else {
			char e[6];
			put(j, e, (size_t)lmt_json_escape_ascii(c, e));
		}
		run = ++p;
	}
	if (end > run)
		put(j, (const char *)run, (size_t)(end - run));
	putc_(j, '"');
}

static void sep(struct lmt_json *j, const char *key)
{
	if (j->depth > 0) {
		if (!j->first[j->depth])
			putc_(j, ',');
		j->first[j->depth] = 0;
	}
	if (key) {
		lmt_json_escape(j, key, strlen(key));
		putc_(j, ':');
	}
}

static void open_(struct lmt_json *j, const char *key, char c)
{
	sep(j, key);
	putc_(j, c);
	if (j->depth + 1 < (int)sizeof j->first)
		j->depth++;
	j->first[j->depth] = 1;
}

void lmt_json_begin(struct lmt_json *j)
{
	lmt_json_reset(j);
	open_(j, NULL, '{');
}

void lmt_json_obj(struct lmt_json *j, const char *key) { open_(j, key, '{'); }
void lmt_json_arr(struct lmt_json *j, const char *key) { open_(j, key, '['); }

void lmt_json_obj_end(struct lmt_json *j)
{
	putc_(j, '}');
	if (j->depth > 0)
		j->depth--;
}

void lmt_json_arr_end(struct lmt_json *j)
{
	putc_(j, ']');
	if (j->depth > 0)
		j->depth--;
}

void lmt_json_str(struct lmt_json *j, const char *key, const char *s)
{
	if (!s) {
		lmt_json_null(j, key);
		return;
	}
	lmt_json_strn(j, key, s, strlen(s));
}

void lmt_json_strn(struct lmt_json *j, const char *key, const char *s, size_t n)
{
	sep(j, key);
	lmt_json_escape(j, s, n);
}

void lmt_json_str_escaped(struct lmt_json *j, const char *key, const char *s, size_t n)
{
	sep(j, key);
	putc_(j, '"');
	put(j, s, n);
	putc_(j, '"');
}

void lmt_json_i64(struct lmt_json *j, const char *key, int64_t v)
{
	char b[32];
	int n = snprintf(b, sizeof b, "%lld", (long long)v);
	sep(j, key);
	put(j, b, (size_t)n);
}

void lmt_json_u64(struct lmt_json *j, const char *key, uint64_t v)
{
	char b[32];
	int n = snprintf(b, sizeof b, "%llu", (unsigned long long)v);
	sep(j, key);
	put(j, b, (size_t)n);
}

char *lmt_fmt_double(double v, char *buf)
{
	/* %g drops trailing zeros, so the first of 15, 16, 17 digits that reads back is
	 * also the shortest form (a shorter one would print the same at 15 digits) */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, 32, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

void lmt_json_num(struct lmt_json *j, const char *key, double v)
{
	if (!isfinite(v)) {
		lmt_json_null(j, key);
		return;
	}
	char b[32];
	lmt_fmt_double(v, b);
	sep(j, key);
	put(j, b, strlen(b));
}

void lmt_json_bool(struct lmt_json *j, const char *key, int v)
{
	sep(j, key);
	put(j, v ? "true" : "false", v ? 4 : 5);
}

void lmt_json_null(struct lmt_json *j, const char *key)
{
	sep(j, key);
	put(j, "null", 4);
}

void lmt_json_raw(struct lmt_json *j, const char *key, const char *text)
{
	sep(j, key);
	put(j, text, strlen(text));
}

void lmt_json_end(struct lmt_json *j)
{
	while (j->depth > 0) {
		putc_(j, '}');
		j->depth--;
	}
}

int lmt_json_end_line(struct lmt_json *j, FILE *fp)
{
	lmt_json_end(j);
	putc_(j, '\n');
	if (j->out.oom)
		return -1;
	if (fwrite(j->out.buf, 1, j->out.len, fp) != j->out.len)
		return -1;
	return fflush(fp) == 0 ? 0 : -1;
}

/* depth: levels below the value the caller gave */
static void put_jansson(struct lmt_json *j, const char *key, json_t *v, int depth)
{
	const char *k;
	json_t *x;
	size_t i;
	if ((json_is_object(v) || json_is_array(v)) && depth > 20) {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (!s) {
			j->out.oom = 1;
			return;
		}
		lmt_json_raw(j, key, s);
		free(s);
		return;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		lmt_json_obj(j, key);
		json_object_foreach(v, k, x)
			put_jansson(j, k, x, depth + 1);
		lmt_json_obj_end(j);
		break;
	case JSON_ARRAY:
		lmt_json_arr(j, key);
		json_array_foreach(v, i, x)
			put_jansson(j, NULL, x, depth + 1);
		lmt_json_arr_end(j);
		break;
	case JSON_STRING: lmt_json_strn(j, key, json_string_value(v), json_string_length(v)); break;
	case JSON_INTEGER: lmt_json_i64(j, key, (int64_t)json_integer_value(v)); break;
	case JSON_REAL: lmt_json_num(j, key, json_real_value(v)); break;
	case JSON_TRUE: lmt_json_bool(j, key, 1); break;
	case JSON_FALSE: lmt_json_bool(j, key, 0); break;
	default: lmt_json_null(j, key); break;
	}
}

void lmt_json_jansson(struct lmt_json *j, const char *key, json_t *v)
{
	put_jansson(j, key, v, 0);
}

char *lmt_json_jansson_text(json_t *v)
{
	struct lmt_json j;
	lmt_json_init(&j);
	put_jansson(&j, NULL, v, 0);
	return lmt_strbuf_detach(&j.out);
}
