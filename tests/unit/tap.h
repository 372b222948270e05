/*
 * tap.h: a tiny TAP producer for the C unit tests.
 *
 * Each check prints "ok N - name" or "not ok N - name" (with a diagnostic line
 * starting with '#'); tap_done() prints the plan and returns the exit status.
 * tests/run counts the lines.
 */
#ifndef LMT_TAP_H
#define LMT_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_fail;

static inline int tap_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	if (!cond)
		tap_fail++;
	fflush(stdout);
	return cond;
}

static inline void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
}

#define TAP_EQ_U64(a, b, ...) \
	(tap_ok((a) == (b), __VA_ARGS__) ? 1 : \
	 (tap_diag("  got %llu, expected %llu", (unsigned long long)(a), (unsigned long long)(b)), 0))

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_fail ? 1 : 0;
}

#endif
