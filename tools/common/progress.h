/*
 * progress.h: a one-line progress display on stderr.
 *
 * Shown only when stderr is a terminal and the tool was not asked to be quiet, so
 * logs and CI output never fill with carriage returns. Redrawn at most ten times a
 * second; lmt_progress_done() clears the line.
 */
#ifndef LMT_PROGRESS_H
#define LMT_PROGRESS_H

#include <stdint.h>

struct lmt_progress {
	int on;
	const char *what;
	const char *unit;     /* "B" for bytes (scaled), or a word like "merges" */
	uint64_t total;       /* 0 if unknown */
	double t0, last;
	int width;            /* characters last drawn */
};

void lmt_progress_init(struct lmt_progress *p, const char *what, const char *unit,
		       uint64_t total, int quiet);
void lmt_progress_update(struct lmt_progress *p, uint64_t done);
void lmt_progress_done(struct lmt_progress *p);

#endif
