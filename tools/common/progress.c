/*
 * progress.c: see progress.h.
 */
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "core/util.h"

void lmt_progress_init(struct lmt_progress *p, const char *what, const char *unit,
		       uint64_t total, int quiet)
{
	memset(p, 0, sizeof *p);
	p->on = !quiet && isatty(STDERR_FILENO);
	p->what = what;
	p->unit = unit;
	p->total = total;
	p->t0 = p->last = lmt_now();
}

static void human(double v, const char *unit, char *out, size_t n)
{
	if (strcmp(unit, "B")) {
		snprintf(out, n, "%.0f %s", v, unit);
		return;
	}
	char b[32];
	snprintf(out, n, "%s", lmt_fmt_bytes_si(v, b));
}

void lmt_progress_update(struct lmt_progress *p, uint64_t done)
{
	if (!p->on)
		return;
	double now = lmt_now();
	if (now - p->last < 0.1)
		return;
	p->last = now;
	double el = now - p->t0;
	char d[32], r[32], line[160];
	human((double)done, p->unit, d, sizeof d);
	human(el > 0 ? done / el : 0, p->unit, r, sizeof r);
	int n;
	if (p->total && done <= p->total) {
		double f = (double)done / p->total;
		double eta = f > 0 ? el * (1 - f) / f : 0;
		n = snprintf(line, sizeof line, "%s: %3.0f%% %s %s/s eta %d:%02d", p->what, 100 * f, d, r,
			     (int)eta / 60, (int)eta % 60);
	} else {
		n = snprintf(line, sizeof line, "%s: %s %s/s %d:%02d", p->what, d, r, (int)el / 60,
			     (int)el % 60);
	}
	int pad = p->width > n ? p->width - n : 0;
	fprintf(stderr, "\r%s%*s", line, pad, "");
	p->width = n;
}

void lmt_progress_done(struct lmt_progress *p)
{
	if (p->on && p->width)
		fprintf(stderr, "\r%*s\r", p->width, "");
	p->width = 0;
}
