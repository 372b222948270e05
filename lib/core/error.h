/*
 * error.h: error codes and messages for the lmt core library.
 *
 * The library never exits and never prints. A function that can fail returns 0 (or a
 * count) on success and a negative LMT_E* code on failure, and fills an optional
 * struct lmt_err with a lower-case message that names its subject in quotes and gives
 * the value found and the value expected. Tools turn that into one line on stderr.
 */
#ifndef LMT_ERROR_H
#define LMT_ERROR_H

#include <stddef.h>

enum lmt_errcode {
	LMT_OK = 0,
	LMT_EIO = -1,        /* open/read/write/fsync/rename failed */
	LMT_EFORMAT = -2,    /* input is not what it claims: bad magic, bad field, bad JSON */
	LMT_EVERSION = -3,   /* a format version this build cannot read */
	LMT_ECHECKSUM = -4,  /* a checksum does not match */
	LMT_ENOMEM = -5,
	LMT_EINVAL = -6,     /* a caller-supplied argument is out of range */
	LMT_ENOTFOUND = -7,  /* a named thing (file, key, member) does not exist */
	LMT_EUNSUPPORTED = -8,
	LMT_ERANGE = -9,     /* a value does not fit (vocab too large for uint16, ...) */
};

struct lmt_err {
	int code;
	char msg[1024];
};

/* Fill err (if non-NULL) with a printf-style message and return code. */
int lmt_err_set(struct lmt_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like lmt_err_set, with ": strerror(errno)" appended; returns LMT_EIO. */
int lmt_err_errno(struct lmt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prefix an existing message with "prefix: " (used when a caller adds context). */
void lmt_err_prefix(struct lmt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

const char *lmt_strerror(int code);

/*
 * For bugs only, never for bad input: a failed assertion aborts. The library
 * never prints, so the failure ("internal error: assertion 'EXPR' failed at
 * FILE:LINE") is kept in lmt_assert_msg (for a debugger or a core dump) and given
 * to the handler a program installed, which tells it where that program writes
 * its messages (the tools: stderr, tools/common/tool.c), before abort().
 */
#define LMT_ASSERT(c) \
	do { if (!(c)) lmt_assert_fail(#c, __FILE__, __LINE__); } while (0)
void lmt_assert_fail(const char *expr, const char *file, int line)
	__attribute__((noreturn));
extern char lmt_assert_msg[512];
/* The handler (NULL: none, the default): called once, with lmt_assert_msg. */
void lmt_set_assert_handler(void (*fn)(const char *msg));

#endif
