/*
 * cfgopts.c: options from 'key = value' files; see cfgopts.h.
 */
#include "cfgopts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "tool.h"

static int entry(void *ctx, const struct lmt_config_entry *e)
{
	const struct tool_cfgopts *c = ctx;
	const struct option *opt = NULL;
	char where[600];
	snprintf(where, sizeof where, "'%s': line %d", e->path, e->line);
	for (const struct option *x = c->longopts; x->name; x++)
		if (!strcmp(x->name, e->key))
			opt = x;
	if (!opt && c->skip && c->skip(e->key))
		return 0;
	if (!opt || !strcmp(e->key, "config") || !strcmp(e->key, "help") || !strcmp(e->key, "version"))
		usage_error("%s: unknown key '%.63s'", where, e->key);
	if (opt->has_arg == required_argument && (!e->value || !*e->value))
		usage_error("%s: key '%s' needs a value", where, e->key);
	if (c->strict_flags && opt->has_arg == no_argument && e->value && strcmp(e->value, "true") &&
	    strcmp(e->value, "1"))
		usage_error("%s: key '%s' takes no value (or true)", where, e->key);
	tool_context = where;
	c->set(c->ctx, opt->val, e->value ? strdup(e->value) : NULL);
	tool_context = NULL;
	return 0;
}

void tool_cfgopts_read(const char *path, const struct tool_cfgopts *c)
{
	struct lmt_err err = { 0 };
	if (lmt_config_read(path, entry, (void *)c, &err))
		die_err(&err);
}

int tool_file_is_json(const char *path)
{
	FILE *f = fopen(path, "r");
	int first = ' ';
	while (f && (first == ' ' || first == '\t' || first == '\n' || first == '\r'))
		first = fgetc(f);
	if (f)
		fclose(f);
	return first == '{';
}
