/*
 * strbuf.h: the growable string buffer every text writer builds on (JSON records,
 * YAML, SVG, Markdown).
 *
 * The buffer is always NUL-terminated once anything was written. An allocation
 * failure sets oom and turns every later write into a no-op, so a writer checks
 * once at the end instead of after every call (the JSON, YAML and SVG writers
 * report it as LMT_ENOMEM).
 *
 *	struct lmt_strbuf b = { 0 };       // or lmt_strbuf_init(&b)
 *	lmt_strbuf_printf(&b, "%d items", n);
 *	if (b.oom) ...                     // out of memory somewhere above
 *	use(b.buf, b.len);
 *	lmt_strbuf_release(&b);
 */
#ifndef LMT_STRBUF_H
#define LMT_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

struct lmt_strbuf {
	char *buf;      /* NUL-terminated once len > 0; owned */
	size_t len, cap;
	int oom;        /* an allocation failed: the contents are incomplete */
};

void lmt_strbuf_init(struct lmt_strbuf *b);
/* Free the memory; b is empty (and usable) again. */
void lmt_strbuf_release(struct lmt_strbuf *b);
/* Empty b, keeping its memory (oom is cleared). */
void lmt_strbuf_reset(struct lmt_strbuf *b);
/* Make room for n more bytes (and the NUL); 0, or -1 with oom set. */
int lmt_strbuf_reserve(struct lmt_strbuf *b, size_t n);
void lmt_strbuf_put(struct lmt_strbuf *b, const char *s, size_t n);
void lmt_strbuf_puts(struct lmt_strbuf *b, const char *s);
void lmt_strbuf_putc(struct lmt_strbuf *b, char c);
void lmt_strbuf_printf(struct lmt_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lmt_strbuf_vprintf(struct lmt_strbuf *b, const char *fmt, va_list ap);
/* Hand the string over to the caller (who frees it); b is empty again. Returns
 * NULL after an allocation failure (and frees what there was). */
char *lmt_strbuf_detach(struct lmt_strbuf *b);

/* A byte count for people into buf: "512 B", "1.50 KiB" ... "2.00 PiB" (powers of
 * 1024, two decimals above bytes). Returns buf. */
const char *lmt_fmt_bytes(double bytes, char buf[32]);

/* The same in powers of 1000, as the tools' size options read them: "512 B",
 * "10.0 kB", "2.4 MB" ... (one decimal above bytes; 999,999 B is "1.0 MB", not
 * "1000.0 kB"). Returns buf. */
const char *lmt_fmt_bytes_si(double bytes, char buf[32]);

#endif
