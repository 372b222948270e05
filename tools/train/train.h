/*
 * train/train.h: what the train tool's files share. tools/train.c holds the
 * option table, the parsing, the session's callbacks and main; config.c the
 * --config files and the given options a resume compares with the run's;
 * display.c the records shown as lines for people. Tool code: it exits through
 * tool.h's die() and usage_error().
 */
#ifndef LMT_TRAIN_TOOL_H
#define LMT_TRAIN_TOOL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/resumecfg.h"
#include "core/config.h"
#include "core/json.h"
#include "model/session.h"

struct opts {
	struct lmt_session_cfg cfg; /* what the session trains (model/session.h) */
	int jsonl, threads;
	int init_seed_given, warmup_given, shape_given, keep_given;
	/* the value each recorded option (ckpt/resumecfg.h) was given on the command
	 * line or in a --config file; one not here was not given, so a resume adopts
	 * the run's */
	struct lmt_resumecfg_pair given[LMT_RESUMECFG_MAX];
	size_t ngiven;
	int adopting; /* set_option is applying a recorded value: not given */
	int from_run_config; /* ... one of a run's config.json given as --config (keep_given ignores it) */
	const char *configs[64]; /* the --config files read: inputs --export-llmc must not overwrite */
	int nconfigs;
};

/* train.c: the long options; one option's value applied to o (usage errors exit) */
extern const struct option *const train_longopts;
void train_set_option(struct opts *o, int c, const char *arg);

/* config.c */
/* One line of a --config file (core/config.h's callback; ctx: the struct opts). */
int train_config_entry(void *ctx, const struct lmt_config_entry *e);
/* A --config file in config.json's form. */
void train_config_json(struct opts *o, const char *path);
/* The getopt value of the long option name (0: none). */
int train_option_val(const char *name);
/* The value given for option name (a recorded one), or NULL. */
const char *train_given_value(const struct opts *o, const char *name);
/* Note option c's value as given, if it is a recorded option. */
void train_mark_given(struct opts *o, int c, const char *arg);
/* Whether option name's values a and b are the same (ckpt/resumecfg.h's callback). */
int train_same_value(void *ctx, const char *name, const char *a, const char *b);
/* A resume adopts a recorded value (the session's adopt callback; ctx: the struct opts). */
void train_adopt(void *ctx, const char *opt, const char *value);

/* display.c: the record j (closed) as a line for people on stdout; updates: the
 * run's total, for the ETA. */
void train_show(const struct lmt_json *j, uint64_t updates);

#endif
