/*
 * config.h: the reader of configuration files, "key = value" lines, as train's
 * --config takes them (man/train.1, CONFIGURATION FILES).
 *
 * One entry per line: the key is what stands before '=' (or the whole line),
 * the value what follows it, blanks (space, tab) around both removed; '#' starts
 * a comment to the end of the line; blank lines are skipped; a line may end in
 * LF or CR LF. There is no quoting, so no value holds a '#' or a line break.
 *
 * The reader knows nothing of the keys: it hands each entry, with its file and
 * line, to a callback, and the tool applies it as the option it names, so one
 * option table serves the command line and the file, and an entry's errors can
 * name the file and the line. The file is checked as a whole before the first
 * entry is handed over, so a file that is not text applies nothing: it must be
 * UTF-8 without NUL or other control characters (tab and the line ends aside).
 */
#ifndef LMT_CONFIG_H
#define LMT_CONFIG_H

#include <stddef.h>

#include "core/error.h"

struct lmt_config_entry {
	const char *path;   /* the file, as the caller named it */
	int line;           /* 1-based */
	const char *key;    /* "" for a line that starts with '=' */
	const char *value;  /* NULL: the key stood alone (no '='); "" : nothing after '=' */
};

/* Returns 0 to go on; anything else stops the walk and is returned by it. The
 * entry's strings live until the callback returns: copy what is kept. */
typedef int (*lmt_config_fn)(void *ctx, const struct lmt_config_entry *e);

/*
 * Walk the n bytes of text (path names it in messages). Returns 0, the
 * callback's nonzero return, or LMT_EFORMAT ("'PATH': line N: ...") for bytes
 * the format cannot hold, or LMT_ENOMEM.
 */
int lmt_config_parse(const char *path, const char *text, size_t n, lmt_config_fn fn, void *ctx,
		     struct lmt_err *err);
/* Read the file path and walk it as lmt_config_parse does. */
int lmt_config_read(const char *path, lmt_config_fn fn, void *ctx, struct lmt_err *err);

#endif
