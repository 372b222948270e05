/*
 * strbuf.c: the growable string buffer (strbuf.h).
 */
#include "core/strbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

void lmt_strbuf_init(struct lmt_strbuf *b)
{
	memset(b, 0, sizeof *b);
}

void lmt_strbuf_release(struct lmt_strbuf *b)
{
	free(b->buf);
	memset(b, 0, sizeof *b);
}

void lmt_strbuf_reset(struct lmt_strbuf *b)
{
	b->len = 0;
	b->oom = 0;
	if (b->buf)
		b->buf[0] = 0;
}

int lmt_strbuf_reserve(struct lmt_strbuf *b, size_t n)
{
	if (b->oom)
		return -1;
	if (n > SIZE_MAX - b->len - 1 || LMT_GROW(b->buf, b->cap, b->len + n + 1)) {
		b->oom = 1;
		return -1;
	}
	return 0;
}

void lmt_strbuf_put(struct lmt_strbuf *b, const char *s, size_t n)
{
	if (lmt_strbuf_reserve(b, n))
		return;
	memcpy(b->buf + b->len, s, n);
	b->len += n;
	b->buf[b->len] = 0;
}

void lmt_strbuf_puts(struct lmt_strbuf *b, const char *s)
{
	lmt_strbuf_put(b, s, strlen(s));
}

void lmt_strbuf_putc(struct lmt_strbuf *b, char c)
{
	lmt_strbuf_put(b, &c, 1);
}

void lmt_strbuf_vprintf(struct lmt_strbuf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if (lmt_strbuf_reserve(b, (size_t)n))
		return;
	vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void lmt_strbuf_printf(struct lmt_strbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	lmt_strbuf_vprintf(b, fmt, ap);
	va_end(ap);
}

char *lmt_strbuf_detach(struct lmt_strbuf *b)
{
	char *s = b->oom ? NULL : b->buf;
	if (!s) {
		free(b->buf);
		s = b->oom ? NULL : calloc(1, 1);
	}
	memset(b, 0, sizeof *b);
	return s;
}

const char *lmt_fmt_bytes(double b, char buf[32])
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;
	while (fabs(b) >= 1024 && i < 5) {
		b /= 1024;
		i++;
	}
	snprintf(buf, 32, i ? "%.2f %s" : "%.0f %s", b, u[i]);
	return buf;
}

const char *lmt_fmt_bytes_si(double b, char buf[32])
{
	static const char *const u[] = { "B", "kB", "MB", "GB", "TB", "PB" };
	int i = 0;
	while (fabs(b) >= (i ? 999.95 : 1000) && i < 5) {
		b /= 1000;
		i++;
	}
	snprintf(buf, 32, i ? "%.1f %s" : "%.0f %s", b, u[i]);
	return buf;
}
