/*
 * error.c: filling struct lmt_err. Kept tiny so every other file can depend on it.
 */
#include "core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lmt_err_set(struct lmt_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

int lmt_err_errno(struct lmt_err *err, const char *fmt, ...)
{
	int e = errno;
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < sizeof err->msg)
			snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(e));
		err->code = LMT_EIO;
	}
	return LMT_EIO;
}

void lmt_err_prefix(struct lmt_err *err, const char *fmt, ...)
{
	if (!err)
		return;
	char pre[512], old[sizeof err->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	/* assembled by hand: the result is cut to the buffer, which is intended */
	size_t n = 0, cap = sizeof err->msg - 1;
	for (const char *parts[3] = { pre, ": ", old }, **q = parts; q < parts + 3; q++) {
		size_t l = strlen(*q);
		if (l > cap - n)
			l = cap - n;
		memcpy(err->msg + n, *q, l);
		n += l;
	}
	err->msg[n] = 0;
}

const char *lmt_strerror(int code)
{
	switch (code) {
	case LMT_OK: return "success";
	case LMT_EIO: return "i/o error";
	case LMT_EFORMAT: return "bad format";
	case LMT_EVERSION: return "unsupported version";
	case LMT_ECHECKSUM: return "checksum mismatch";
	case LMT_ENOMEM: return "out of memory";
	case LMT_EINVAL: return "invalid argument";
	case LMT_ENOTFOUND: return "not found";
	case LMT_EUNSUPPORTED: return "unsupported";
	case LMT_ERANGE: return "out of range";
	}
	return "unknown error";
}

char lmt_assert_msg[512];
static void (*assert_handler)(const char *msg);

void lmt_set_assert_handler(void (*fn)(const char *msg))
{
	assert_handler = fn;
}

void lmt_assert_fail(const char *expr, const char *file, int line)
{
	snprintf(lmt_assert_msg, sizeof lmt_assert_msg, "internal error: assertion '%s' failed at %s:%d", expr, file,
		 line);
	if (assert_handler) {
		void (*fn)(const char *) = assert_handler;
		assert_handler = NULL; /* an assertion inside the handler aborts at once */
		fn(lmt_assert_msg);
	}
	abort();
}

/* (lmt_peak_rss and lmt_page_bytes live here because util.h is inline-only and
 * needs one .c home) */
#include <sys/resource.h>
#include <stdint.h>
#include <unistd.h>

size_t lmt_page_bytes(void)
{
	long v = sysconf(_SC_PAGESIZE);
	return v > 0 && !(v & (v - 1)) ? (size_t)v : 4096;
}

uint64_t lmt_peak_rss(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (uint64_t)ru.ru_maxrss * 1024;
}
