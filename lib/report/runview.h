/*
 * runview.h: a training run directory read back for the dashboard and the
 * explanations (dashboard.h, explain.h): every record of metrics.jsonl and
 * events.jsonl parsed, the update records indexed by update, and what the run's
 * other files know (config.json's clip threshold and data directory, the
 * dataset manifest's unigram baseline, memledger's predicted bytes).
 *
 * The view is a snapshot: a run still training is read up to its last complete
 * line (with partial_ok; a line without its newline is being written), and
 * reading again gives a newer snapshot. A line that is complete but not a JSON
 * object fails the read naming the file and the line, so a damaged file is never
 * drawn as if it were whole.
 *
 * The dataset (the shards, documents.jsonl and the sources) is opened only when an
 * explanation needs it (lmt_runview_dataset), since a dashboard does not.
 */
#ifndef LMT_RUNVIEW_H
#define LMT_RUNVIEW_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>

#include "core/error.h"
#include "data/dataset.h"

struct lmt_runview {
	char run[PATH_MAX];
	char metrics_path[PATH_MAX], events_path[PATH_MAX], config_path[PATH_MAX];
	json_t *config;          /* config.json, or NULL (absent: the dashboard says so) */
	json_t **rec;            /* metrics.jsonl, one object per line, in order */
	size_t nrec;
	json_t **ev;             /* events.jsonl */
	size_t nev;
	json_t **upd;            /* the update records, in file order */
	uint64_t *upd_n;         /* their update numbers */
	size_t nupd;
	double clip;             /* config's clip threshold (0: none or unknown) */
	double ledger_total;     /* memledger's predicted bytes per device (0: unknown) */
	double unigram;          /* the manifest's train unigram nats/token (NAN: unknown) */
	int world;               /* ranks (1 if unknown) */
	int done;                /* the last process of the run has ended (summary, end, stop, failed) */
	size_t metrics_cut, events_cut; /* a last line left out, cut short (partial_ok), or 0 */
	/* the dataset, for explanations: data_dir from the caller or config.json */
	char data_dir[PATH_MAX];
	int ds_state;            /* 0 not tried, 1 open, -1 failed (ds_why says why) */
	char ds_why[512];
	struct lmt_dataset ds;
	uint32_t *doc_source;    /* documents.jsonl: each document's source */
	uint64_t ndocs;
	char **source;           /* the manifest's source names */
	uint32_t nsources;
	double *logp;            /* the train split's unigram log-probabilities (vocab) */
	double entropy;          /* the train split's unigram entropy, nats/token */
};

/* what a last line left out is called, after "'FILE': ": the run card and the
 * views say it in the same words */
#define LMT_RUNVIEW_CUT "line %zu is cut short (the run stopped while writing it): left out"

/*
 * Read run directory run: metrics.jsonl is required; events.jsonl and
 * config.json are read where present. data names the dataset directory (NULL:
 * config.json's data.dir). partial_ok: a last line without its newline that is
 * not a whole object is left out (a run being written, or one killed while
 * writing it: v->metrics_cut, events_cut) instead of being an error. LMT_ENOTFOUND when run
 * or its metrics.jsonl does not exist, LMT_EFORMAT naming file and line.
 */
int lmt_runview_load(struct lmt_runview **out, const char *run, const char *data, int partial_ok,
		     struct lmt_err *err);
void lmt_runview_free(struct lmt_runview *v);

/* The update record of update n (borrowed), or NULL. */
json_t *lmt_runview_update(const struct lmt_runview *v, uint64_t n);
/* The index into v->upd of update n, or -1. */
long lmt_runview_update_index(const struct lmt_runview *v, uint64_t n);
/* Open the dataset (once); 0, or -1 with v->ds_why saying why it cannot be. */
int lmt_runview_dataset(struct lmt_runview *v);

/* A number at pointer ptr of o, or dflt. */
double lmt_jnum(json_t *o, const char *ptr, double dflt);

#endif
