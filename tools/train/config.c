/*
 * train/config.c: train's --config files (key = value lines, keys as the long
 * options, or a run's config.json) and the record of which recorded options
 * (ckpt/resumecfg.h) were given, which a resume compares with what its run
 * recorded. Tool code: bad input is a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"
#include "train.h"

/* One line of a --config file, applied as its option would be there (keys are
 * the long option names). */
int train_config_entry(void *ctx, const struct lmt_config_entry *e)
{
	const struct option *opt = NULL;
	char where[600];
	snprintf(where, sizeof where, "'%s': line %d", e->path, e->line);
	for (const struct option *x = train_longopts; x->name; x++)
		if (!strcmp(x->name, e->key))
			opt = x;
	if (!opt || !strcmp(e->key, "config") || !strcmp(e->key, "help") || !strcmp(e->key, "version"))
		usage_error("%s: unknown key '%.63s'", where, e->key);
	if (opt->has_arg == required_argument && (!e->value || !*e->value))
		usage_error("%s: key '%s' needs a value", where, e->key);
	if (opt->has_arg == no_argument && e->value && strcmp(e->value, "true") && strcmp(e->value, "1"))
		usage_error("%s: key '%s' takes no value (or true)", where, e->key);
	tool_context = where;
	train_set_option(ctx, opt->val, e->value ? strdup(e->value) : NULL);
	tool_context = NULL;
	return 0;
}

int train_option_val(const char *name)
{
	for (const struct option *x = train_longopts; x->name; x++)
		if (!strcmp(x->name, name))
			return x->val;
	return 0;
}

/* The value given for option name (a recorded one), or NULL. */
const char *train_given_value(const struct opts *o, const char *name)
{
	for (size_t i = 0; i < o->ngiven; i++)
		if (!strcmp(o->given[i].opt, name))
			return o->given[i].value;
	return NULL;
}

void train_mark_given(struct opts *o, int c, const char *arg)
{
	const struct lmt_resumecfg_opt *r = NULL;
	for (const struct option *x = train_longopts; x->name && !r; x++)
		if (x->val == c)
			r = lmt_resumecfg_find(x->name);
	if (!r)
		return;
	size_t i = 0;
	while (i < o->ngiven && strcmp(o->given[i].opt, r->opt))
		i++;
	o->given[i] = (struct lmt_resumecfg_pair){ r->opt, arg ? arg : "true" };
	if (i == o->ngiven)
		o->ngiven++;
}

/* A --config file in config.json's form: its recorded options, applied as
 * they are, so a run's own config.json runs it again. */
void train_config_json(struct opts *o, const char *path)
{
	struct lmt_err err = { 0 };
	struct lmt_resumecfg_result res;
	int rc = lmt_resumecfg_read(path, &res, &err);
	if (rc == LMT_EFORMAT) /* bytes a config file cannot hold: exit 1, as in the 'key = value' form */
		die_err(&err);
	if (rc)
		usage_error("%s", err.msg);
	for (size_t i = 0; i < res.n; i++) {
		tool_context = res.items[i].detail;
		o->from_run_config = 1;
		train_set_option(o, train_option_val(res.items[i].opt), strdup(res.items[i].value));
		o->from_run_config = 0;
		tool_context = NULL;
	}
	lmt_resumecfg_release(&res);
}

/* Whether option name's values a and b are the same, as set_option parses them. */
int train_same_value(void *ctx, const char *name, const char *a, const char *b)
{
	struct opts x, y;
	int c = train_option_val(name);
	(void)ctx;
	memset(&x, 0, sizeof x);
	memset(&y, 0, sizeof y);
	x.adopting = y.adopting = 1;
	train_set_option(&x, c, a);
	train_set_option(&y, c, b);
	return !memcmp(&x, &y, offsetof(struct opts, given));
}

/* A resume adopts a recorded value: set as the command line would, but not given. */
void train_adopt(void *ctx, const char *opt, const char *value)
{
	struct opts *o = ctx;
	o->adopting = 1;
	train_set_option(o, train_option_val(opt), strdup(value));
	o->adopting = 0;
}
