/*
 * resumecfg.h: what config.json records of train's options, and what a resume
 * and a --config file in config.json's form do with it.
 *
 * A resume continues the run as it was: the options not given take the values
 * the run recorded (the checkpoint's state.config, config.json's content), and
 * a given option that differs is refused, applied with a warning, or taken as
 * given, by its class in one table. The table names each option by its long
 * name and config.json's place for it, so train turns its options into (name,
 * value text) pairs and applies what comes back; the library never parses an
 * option's value, so the comparison of two numbers is the tool's (same()), and
 * every message is built here word for word as train printed it.
 */
#ifndef LMT_RESUMECFG_H
#define LMT_RESUMECFG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"

/* What a resume does with a value given that differs from the one the run
 * recorded: REFUSE what would change the model, the data order or what the model
 * is trained on (the run could not continue as itself), WARN and apply what a
 * user changes between segments (the length, the optimizer from here on,
 * evaluation, samples; a "config-change" event records it), and take as given
 * what is this process's output, not the run (FREE). man/train.1, RESUMING. */
enum lmt_resumecfg_class { LMT_RESUMECFG_REFUSE, LMT_RESUMECFG_WARN, LMT_RESUMECFG_FREE };

struct lmt_resumecfg_opt {
	const char *opt, *obj, *key; /* the long option; config.json's object (NULL: the top) and key */
	int change;                  /* enum lmt_resumecfg_class */
	int text;                    /* compared as written (paths, words), else as the value parsed */
};

/* The table's size is at most this: a caller's array of pairs can hold one per option. */
#define LMT_RESUMECFG_MAX 64

extern const struct lmt_resumecfg_opt lmt_resumecfg_opts[];
extern const size_t lmt_resumecfg_nopts;

/* The entry for long option name, or NULL where config.json records none. */
const struct lmt_resumecfg_opt *lmt_resumecfg_find(const char *name);

/* The option value config.json (cfg) records for r, as option text (into buf,
 * or cfg's own string), or NULL where it records none: null, false, the default
 * initialisation, a measured peak, or a shape that an llm.c checkpoint sets. */
const char *lmt_resumecfg_value(json_t *cfg, const struct lmt_resumecfg_opt *r, char *buf, size_t cap);
/*
 * A path a run's config.json records (data.dir, data.tokenizer, model.init,
 * model.export_llmc) is the one train was given: a relative one is relative to the
 * directory train ran in, which config.json records as "cwd". The path to use from
 * here, whatever the current directory: as recorded when absolute, when the run
 * recorded no cwd, or when cwd/recorded does not exist (a tree moved whole still
 * reads from its new top); else cwd/recorded, written into buf (PATH_MAX). An
 * output (output 1) is put under cwd when that directory exists.
 */
const char *lmt_recorded_path(json_t *cfg, const char *recorded, int output, char *buf, size_t cap);

/* An option given (on the command line or in a --config file) and its value text. */
struct lmt_resumecfg_pair {
	const char *opt, *value;
};

/* One thing to apply, in the table's order: set option opt to value (value
 * non-NULL), or warn of and record a change (detail: the event's detail,
 * warning: the line to warn; value NULL). From lmt_resumecfg_read, every item
 * sets a value and detail says where it was read, for messages about it. */
struct lmt_resumecfg_item {
	const char *opt;
	char *value, *detail, *warning;
};

/* What comes back; lmt_resumecfg_release frees the items and their strings. */
struct lmt_resumecfg_result {
	struct lmt_resumecfg_item *items;
	size_t n;
	struct lmt_strbuf refused; /* a refused resume's whole message (err holds it cut at its size) */
};

void lmt_resumecfg_release(struct lmt_resumecfg_result *res);

/* Whether the values a and b of option opt (neither NULL) are the same, as the
 * tool parses them; called for the options not compared as text. */
typedef int (*lmt_resumecfg_same_fn)(void *ctx, const char *opt, const char *a, const char *b);

/* A resume from checkpoint ckdir at update `update`, whose run recorded cfg
 * (NULL or not an object: a run without -o, nothing to adopt): the given pairs
 * (a later pair of one option wins) against it. LMT_EINVAL where any REFUSE
 * option differs, all of them in one message (res->refused, and err), and then
 * nothing to apply: the refusals are found before any change is. Else 0 and
 * res->items: the recorded values to adopt and the changes to warn of. */
int lmt_resumecfg_adopt(json_t *cfg, const char *ckdir, uint64_t update, const struct lmt_resumecfg_pair *given,
			size_t ngiven, lmt_resumecfg_same_fn same, void *ctx, struct lmt_resumecfg_result *res,
			struct lmt_err *err);

/* A --config file in config.json's form, flattened into its recorded options
 * (res->items), so a run's own config.json runs it again. LMT_EFORMAT for a NUL
 * byte (naming its line); LMT_EINVAL where it is not a JSON object, or not a
 * run's config.json (its "tool" is not "train"); res holds nothing then. */
int lmt_resumecfg_read(const char *path, struct lmt_resumecfg_result *res, struct lmt_err *err);

#endif
