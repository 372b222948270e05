/*
 * runcard.h: the record of a training run (runcard.yaml), its model card
 * (RUNCARD.md) and plots (SVG), built from the run directory's own files.
 *
 * Every value of the record is read from a file of the run (or one the caller
 * names) and says where: its YAML comment is a reference, LABEL#POINTER or
 * LABEL:LINE#POINTER (an RFC 6901 pointer into a JSON file, or into one line of a
 * JSONL file), or an arithmetic expression of such references, which a program
 * can evaluate to check the value; a comment in parentheses is prose, for the
 * few values that are the tool's own words or inferences. The labels are listed
 * under "inputs" with each file's path, size and SHA-256. A value that cannot be
 * filled (a file missing, a field absent) fails the build with a message naming
 * the field and the file, unless allow_missing leaves it null and lists it
 * under "missing". Nothing is invented: what a run never recorded is null with a
 * comment saying why.
 *
 * The card is built once, as a JSON tree with a provenance per path, and then
 * written as YAML and read back for the Markdown, so the two cannot disagree.
 * The card is opaque: the tools read it through the renderers and the few
 * accessors below, and release.h through lmt_runcard_input.
 *
 *	struct lmt_runcard *c;
 *	struct lmt_runcard_files f;
 *	if (lmt_runcard_new(&c, &opts, &err) || lmt_runcard_render(c, &f, &err) ||
 *	    lmt_runcard_files_write(&f, outdir, &err))
 *		...
 *	lmt_runcard_files_release(&f);
 *	lmt_runcard_free(c);
 */
#ifndef LMT_RUNCARD_H
#define LMT_RUNCARD_H

#include <stddef.h>

#include "core/error.h"

struct lmt_runcard_opts {
	const char *run;              /* the run directory */
	const char *data;             /* the dataset directory, or NULL: config.json's data.dir */
	const char *tokenizer;        /* the tokenizer file, or NULL: config.json's data.tokenizer */
	const char *dedup;            /* dedup-minhash's --summary file, or NULL */
	const char *corpus;           /* gen-corpus's summary (JSONL), or NULL */
	const char *const *eval;      /* evalppl's results; neval 0: the .jsonl files of RUN/eval */
	int neval;
	int allow_missing;            /* leave what cannot be filled null, listed under missing */
	double usd_per_device_hour;   /* > 0: the cost in money too (cost.usd) */
	/* Told what the build skips (a checkpoint that does not open), one line of
	 * text without the tool's name; may be NULL. */
	void (*warn)(void *ctx, const char *msg);
	void *ctx;
};

struct lmt_runcard;

/*
 * Build the card of the run opts->run. The strings of opts are borrowed and
 * must outlive the card. Fails (*out NULL) on a field that cannot be filled
 * without allow_missing ("cannot fill model.parameters: 'RUN/params.json' is
 * missing"), on a dataset or tokenizer whose SHA-256 is not the one config.json
 * records, and when opts->run is not a directory.
 */
int lmt_runcard_new(struct lmt_runcard **out, const struct lmt_runcard_opts *opts, struct lmt_err *err);
void lmt_runcard_free(struct lmt_runcard *c);

/* The run's id ("DIR-0123456789ab"), or NULL when it could not be filled;
 * borrowed from the card. */
const char *lmt_runcard_run_id(const struct lmt_runcard *c);
/* How many fields allow_missing left null. */
size_t lmt_runcard_nmissing(const struct lmt_runcard *c);
/* The newest checkpoint directory whose manifest reads, or NULL; borrowed. */
const char *lmt_runcard_checkpoint(const struct lmt_runcard *c);

/* One of the card's input files, by its label ("config", "checkpoint",
 * "tokenizer", ...); everything borrowed from the card. */
struct lmt_runcard_input {
	const char *path;   /* NULL: not known (why says so) */
	int ok;             /* read (and parsed, for JSON) */
	const char *why;    /* why not, when !ok */
	const char *data;   /* its bytes, when ok */
	size_t size;
};
/* 0, or LMT_ENOTFOUND for a label the card does not have. */
int lmt_runcard_input(const struct lmt_runcard *c, const char *label, struct lmt_runcard_input *in);

#define LMT_RUNCARD_NPLOTS 5

struct lmt_runcard_plot {
	char name[32];      /* "loss.svg" */
	char *svg;          /* owned */
	size_t len;
};

/* What the card is written as: runcard.yaml, RUNCARD.md and plots/NAME.svg. */
struct lmt_runcard_files {
	char *yaml, *md;    /* owned */
	size_t nyaml, nmd;
	struct lmt_runcard_plot plot[LMT_RUNCARD_NPLOTS];
};

/* Render the card (its inputs are read as needed, hence not const); f is
 * filled (release it) whether or not this fails. */
int lmt_runcard_render(struct lmt_runcard *c, struct lmt_runcard_files *f, struct lmt_err *err);
/* Write them under dir (created, with dir/plots, where missing), atomically and
 * together: every file is written and fsynced before the first rename, so a
 * write error in any leaves none in place (and the directories this made
 * removed); the renames go plots first, the record last, so that a reader that
 * finds runcard.yaml new finds the rest new too. */
int lmt_runcard_files_write(const struct lmt_runcard_files *f, const char *dir, struct lmt_err *err);
void lmt_runcard_files_release(struct lmt_runcard_files *f);

#endif
