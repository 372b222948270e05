/*
 * cfgopts.h: a tool's options read from a file, as train --config and memledger
 * --config read them: 'key = value' lines (core/config.h) whose keys are the long
 * option names, each applied as that option would be on the command line, so a
 * file and a command line mean the same and later options win.
 *
 * Tools only: bad keys and values are usage errors (exit 2) naming the file and
 * line, and tool_context names the line while its option is applied.
 */
#ifndef LMT_CFGOPTS_H
#define LMT_CFGOPTS_H

#include <getopt.h>

struct tool_cfgopts {
	const struct option *longopts;  /* the tool's table; config, help and version are refused */
	int (*skip)(const char *key);   /* NULL, or 1 for a key to pass over (another tool's option) */
	int strict_flags;               /* a flag's value must be absent, "true" or "1" */
	void (*set)(void *ctx, int val, const char *arg); /* arg: a copy the tool keeps, NULL for a flag */
	void *ctx;
};

/* Apply every entry of the file at path; a file that cannot be read or parsed dies (exit 1). */
void tool_cfgopts_read(const char *path, const struct tool_cfgopts *c);
/* Whether the file at path starts, after white space, with '{': a JSON file (a run's
 * config.json) rather than 'key = value' lines. 0 for a file that cannot be opened. */
int tool_file_is_json(const char *path);

#endif
