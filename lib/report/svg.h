/*
 * svg.h: line plots as standalone SVG documents, drawn without any plotting
 * program, for run cards.
 *
 * A plot has a title, an x axis, a left y axis and optionally a right one, each
 * linear or (y only) logarithmic, with ticks at "nice" values (1, 2, 2.5 or 5
 * times a power of ten; powers of ten, and 2 and 5 times them when the range is
 * short, on a log axis), grid lines, axis labels, a legend, and any number of
 * series drawn as polylines (and, for sparse series, a marker at each point).
 * Horizontal reference lines (a clipping threshold, a baseline) and vertical
 * markers (a resume) are dashed.
 *
 * The document is well-formed XML (every text escaped) and says how to read the
 * data back: the plot area is a <g class="plot-area"> whose attributes give each
 * axis's data interval and pixel interval,
 *
 *	data-x="X0 X1 PX0 PX1"   x maps linearly from [X0, X1] to [PX0, PX1]
 *	data-y="Y0 Y1 PY0 PY1"   y (log10 y on a log axis) from [Y0, Y1] to [PY0, PY1]
 *	data-y-scale="linear" or "log"; data-y2, data-y2-scale for the right axis
 *
 * (the data bounds with 17 significant digits), and each series is one or more
 * <polyline class="series" data-series="NAME" data-axis="left|right"> whose
 * points are its data points in order, with 2 decimals. A point whose x or y is
 * not finite (or not positive on a log axis) is left out and breaks the line, so
 * a series with no such point is exactly one polyline of n points.
 * A reference line is a <line class="hline" data-name="NAME" data-value="Y">
 * across the plot area, or, a near line beyond the axis, a <text
 * class="hline-clipped" data-name="NAME" data-value="Y" data-side="above|below">
 * at the frame edge; a marker is a <line class="vline" data-name="NAME"
 * data-value="X"> with its name as a <text class="vline-label"> beside it.
 */
#ifndef LMT_SVG_H
#define LMT_SVG_H

#include <stddef.h>

#include "core/error.h"

struct lmt_plot_series {
	const char *name;
	const double *x, *y;
	size_t n;
	int right;   /* on the right-hand axis */
	int markers; /* a marker at each point (for series of few points) */
	int faint;   /* drawn thin and faint: raw points under their smoothed curve */
	int color;   /* 0: the series' own colour; k > 0: series k-1's (raw and smoothed alike) */
};

struct lmt_plot_hline {
	const char *name;
	double y;
	int right;
	/* a reference level (a baseline, a floor) that is not to stretch the axis:
	 * taken into the y range only when within one data range of the data;
	 * otherwise not drawn, and named at the frame edge it lies beyond */
	int near;
};

/* A dashed vertical marker (a resume) at x, labelled with its name. */
struct lmt_plot_vline {
	const char *name;
	double x;
};

struct lmt_plot {
	const char *title, *xlabel, *ylabel, *y2label;
	int logy, logy2;
	double yrange[2], y2range[2]; /* fixed axis bounds when [0] < [1] (linear axes) */
	const struct lmt_plot_series *series;
	int nseries;
	const struct lmt_plot_hline *hlines;
	int nhlines;
	const struct lmt_plot_vline *vlines;
	int nvlines;
	int width, height; /* pixels; 0 for 720 x 420 */
};

/*
 * Render p as an SVG document: *out is malloc'd, NUL-terminated, *len bytes
 * (the caller frees it). A plot with no finite point still gets its axes (over
 * [0, 1]) and legend. Fails only on allocation failure or a bad argument.
 */
int lmt_plot_svg(const struct lmt_plot *p, char **out, size_t *len, struct lmt_err *err);

/* The ticks of a linear axis over [lo, hi]: at most cap values from a step of 1,
 * 2, 2.5 or 5 times a power of ten, about n of them; the axis bounds widened to
 * the ticks go to *a and *b. Returns the count. */
int lmt_plot_ticks(double lo, double hi, int n, double *ticks, int cap, double *a, double *b);

#endif
