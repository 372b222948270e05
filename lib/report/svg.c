/*
 * svg.c: the line plots described in svg.h.
 *
 * Text widths are estimated (0.6 em a character), which is enough to lay out a
 * legend and axis labels without a font; everything else is arithmetic on the
 * data bounds. Coordinates are written with 2 decimals: a hundredth of a pixel
 * is far below what a viewer shows and keeps a long series compact.
 */
#include "report/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "core/strbuf.h"
#include "core/util.h"

/* Text for XML content and attribute values: the five special characters as
 * entities; characters XML 1.0 does not allow, and bytes that are not UTF-8, as
 * U+FFFD. */
static void xml_text(struct lmt_strbuf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : ""), *end = p + strlen((const char *)p);
	while (p < end) {
		uint32_t cp;
		int n = lmt_utf8_decode(p, (size_t)(end - p), &cp);
		switch (cp) {
		case '&': lmt_strbuf_put(b, "&amp;", 5); break;
		case '<': lmt_strbuf_put(b, "&lt;", 4); break;
		case '>': lmt_strbuf_put(b, "&gt;", 4); break;
		case '"': lmt_strbuf_put(b, "&quot;", 6); break;
		case '\'': lmt_strbuf_put(b, "&apos;", 6); break;
		default:
			if (cp >= LMT_UTF8_BAD || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xfffe ||
			    cp == 0xffff)
				lmt_strbuf_put(b, "\xef\xbf\xbd", 3);
			else
				lmt_strbuf_put(b, (const char *)p, (size_t)n);
		}
		p += n;
	}
}

/* ---- axes ---- */

int lmt_plot_ticks(double lo, double hi, int n, double *ticks, int cap, double *a, double *b)
{
	if (!(hi > lo) || n < 1) {
		*a = lo, *b = hi;
		if (cap > 0)
			ticks[0] = lo;
		return cap > 0;
	}
	double raw = (hi - lo) / n, mag = pow(10, floor(log10(raw))), step = 10 * mag;
	static const double m[] = { 1, 2, 2.5, 5, 10 };
	for (size_t i = 0; i < LMT_ARRAY_SIZE(m); i++)
		if (m[i] * mag >= raw * (1 - 1e-12)) {
			step = m[i] * mag;
			break;
		}
	double k0 = floor(lo / step + 1e-9), k1 = ceil(hi / step - 1e-9);
	*a = k0 * step;
	*b = k1 * step;
	int c = 0;
	for (double k = k0; k <= k1 + 0.5 && c < cap; k++)
		ticks[c++] = k * step;
	return c;
}

#define MAXT 64

struct axis {
	int used, log;
	double lo, hi;     /* data bounds; log10 of them on a log axis */
	double t[MAXT];    /* tick values, in data units */
	int nt;
	double step;       /* linear: the tick step, for labels */
};

static int usable(double v, int log)
{
	return isfinite(v) && (!log || v > 0);
}

static double tf(const struct axis *a, double v)
{
	return a->log ? log10(v) : v;
}

static void axis_fit(struct axis *ax, double lo, double hi, int any)
{
	if (!any) {
		lo = ax->log ? 1 : 0;
		hi = ax->log ? 10 : 1;
	}
	if (ax->log) {
		double a = floor(log10(lo) + 1e-9), b = ceil(log10(hi) - 1e-9);
		if (b <= a)
			b = a + 1;
		ax->lo = a, ax->hi = b;
		ax->nt = 0;
		for (double e = a; e <= b + 0.5 && ax->nt < MAXT; e++) {
			double d = pow(10, e);
			ax->t[ax->nt++] = d;
			if (b - a <= 2 && e < b) {
				if (ax->nt < MAXT)
					ax->t[ax->nt++] = 2 * d;
				if (ax->nt < MAXT)
					ax->t[ax->nt++] = 5 * d;
			}
		}
		return;
	}
	if (!(hi > lo)) {
		double d = lo == 0 ? 1 : fabs(lo) * 0.1;
		lo -= d, hi += d;
	}
	ax->nt = lmt_plot_ticks(lo, hi, 5, ax->t, MAXT, &ax->lo, &ax->hi);
	ax->step = ax->nt > 1 ? ax->t[1] - ax->t[0] : 1;
}

/* A tick label: decimals as the step needs; large values with an SI suffix. */
static void fmt_tick(double v, double step, int log, char *out, size_t cap)
{
	double av = fabs(v);
	if (av < fabs(step) * 1e-9)
		v = 0, av = 0;
	if (av >= 1e4) {
		static const char *const sfx[] = { "k", "M", "G", "T", "P" };
		double u = 1e3;
		size_t i = 0;
		while (i + 1 < LMT_ARRAY_SIZE(sfx) && av >= u * 1e3)
			u *= 1e3, i++;
		snprintf(out, cap, "%.4g%s", v / u, sfx[i]);
	} else if (log) {
		snprintf(out, cap, "%g", v);
	} else if (step >= 1 || v == 0) {
		snprintf(out, cap, "%.0f", v);
	} else {
		int d = (int)ceil(-log10(step) - 1e-9);
		double mant = step / pow(10, -d);
		if (fabs(mant - round(mant)) > 1e-6)
			d++; /* 2.5 x 10^k */
		if (d <= 6)
			snprintf(out, cap, "%.*f", d, v);
		else
			snprintf(out, cap, "%.3g", v);
	}
}

static const char *const palette[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
};

static double text_w(const char *s, double size)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		n += (*p & 0xc0) != 0x80; /* characters, not bytes */
	return 0.6 * size * (double)n;
}

int lmt_plot_svg(const struct lmt_plot *p, char **out, size_t *len, struct lmt_err *err)
{
	if (p->nseries < 0 || p->nhlines < 0 || p->nvlines < 0 || (p->nseries && !p->series) ||
	    (p->nhlines && !p->hlines) || (p->nvlines && !p->vlines))
		return lmt_err_set(err, LMT_EINVAL, "plot: bad series or reference-line list");
	const double W = p->width > 0 ? p->width : 720, H = p->height > 0 ? p->height : 420;
	struct axis ax = { 0 }, ay[2] = { { 0 }, { 0 } };
	ay[0].log = p->logy;
	ay[1].log = p->logy2;

	/* bounds */
	double xlo = INFINITY, xhi = -INFINITY, ylo[2] = { INFINITY, INFINITY }, yhi[2] = { -INFINITY, -INFINITY };
	int anyx = 0, anyy[2] = { 0, 0 };
	for (int s = 0; s < p->nseries; s++) {
		const struct lmt_plot_series *S = &p->series[s];
		int r = S->right != 0;
		ay[r].used = 1;
		for (size_t i = 0; i < S->n; i++) {
			if (!isfinite(S->x[i]) || !usable(S->y[i], ay[r].log))
				continue;
			xlo = fmin(xlo, S->x[i]), xhi = fmax(xhi, S->x[i]);
			ylo[r] = fmin(ylo[r], S->y[i]), yhi[r] = fmax(yhi[r], S->y[i]);
			anyx = anyy[r] = 1;
		}
	}
	/* a near line counts when within one data range of the data (in log10 on a
	 * log axis), so a baseline far above the curve does not flatten it */
	double dlo[2], dhi[2];
	for (int r = 0; r < 2; r++) {
		dlo[r] = anyy[r] ? tf(&ay[r], ylo[r]) : 0, dhi[r] = anyy[r] ? tf(&ay[r], yhi[r]) : 0;
		double span = dhi[r] - dlo[r] > 0 ? dhi[r] - dlo[r] : fabs(dhi[r]) * 0.1 + 1e-12;
		dlo[r] -= span, dhi[r] += span;
	}
	for (int h = 0; h < p->nhlines; h++) {
		const struct lmt_plot_hline *L = &p->hlines[h];
		int r = L->right != 0;
		ay[r].used = 1;
		if (L->near && anyy[r] && usable(L->y, ay[r].log) && (tf(&ay[r], L->y) < dlo[r] || tf(&ay[r], L->y) > dhi[r]))
			continue;
		if (usable(p->hlines[h].y, ay[r].log)) {
			ylo[r] = fmin(ylo[r], p->hlines[h].y), yhi[r] = fmax(yhi[r], p->hlines[h].y);
			anyy[r] = 1;
		}
	}
	ay[0].used = 1; /* the left axis is always drawn */
	axis_fit(&ax, xlo, xhi, anyx);
	for (int r = 0; r < 2; r++) {
		const double *fix = r ? p->y2range : p->yrange;
		if (fix[0] < fix[1] && !ay[r].log) {
			/* fixed bounds, widened to take in every point */
			ylo[r] = anyy[r] ? fmin(ylo[r], fix[0]) : fix[0];
			yhi[r] = anyy[r] ? fmax(yhi[r], fix[1]) : fix[1];
			anyy[r] = 1;
		}
		/* a margin, so that the lowest and highest points (a final validation loss,
		 * say) do not sit on the frame */
		if (anyy[r] && !ay[r].log && yhi[r] > ylo[r] && !(fix[0] < fix[1])) {
			double m = 0.04 * (yhi[r] - ylo[r]);
			ylo[r] -= ylo[r] >= 0 && ylo[r] - m < 0 ? ylo[r] : m;
			yhi[r] += m;
		}
		axis_fit(&ay[r], ylo[r], yhi[r], anyy[r]);
	}
	/* the x axis ends where the data end, not at the next round tick */
	if (anyx && !ax.log && xhi > xlo && ax.hi > xhi) {
		ax.hi = xhi;
		while (ax.nt > 1 && ax.t[ax.nt - 1] > xhi + 1e-9 * (xhi - xlo))
			ax.nt--;
	}

	/* legend entries, laid out in rows above the plot area */
	const double fs = 12, left = 74, right = ay[1].used ? 74 : 24, bottom = 54;
	const double px0 = left, px1 = W - right;
	int nleg = p->nseries + p->nhlines;
	double *lx = calloc((size_t)nleg + 1, sizeof *lx), *ly = calloc((size_t)nleg + 1, sizeof *ly);
	if (!lx || !ly) {
		free(lx);
		free(ly);
		return lmt_err_set(err, LMT_ENOMEM, "plot: out of memory");
	}
	double cx = px0, cy = 46;
	for (int i = 0; i < nleg; i++) {
		const char *name = i < p->nseries ? p->series[i].name : p->hlines[i - p->nseries].name;
		int on_right = i < p->nseries ? p->series[i].right : p->hlines[i - p->nseries].right;
		double w = 28 + text_w(name ? name : "", fs) + (on_right && p->y2label ? text_w(" (right)", fs) : 0) + 18;
		if (cx > px0 && cx + w > px1)
			cx = px0, cy += 18;
		lx[i] = cx, ly[i] = cy;
		cx += w;
	}
	const double top = cy + 16, py0 = H - bottom, py1 = top; /* py0: the bottom edge */

	struct lmt_strbuf b = { 0 };
	lmt_strbuf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	lmt_strbuf_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
		    "font-family=\"sans-serif\" font-size=\"%g\">\n", W, H, W, H, fs);
	lmt_strbuf_put(&b, "<title>", 7);
	xml_text(&b, p->title);
	lmt_strbuf_put(&b, "</title>\n", 9);
	lmt_strbuf_printf(&b, "<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"#ffffff\"/>\n", W, H);
	lmt_strbuf_printf(&b, "<text class=\"title\" x=\"%.2f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" "
		    "font-weight=\"bold\">", (px0 + px1) / 2);
	xml_text(&b, p->title);
	lmt_strbuf_put(&b, "</text>\n", 8);

	/* grid, ticks and tick labels */
	lmt_strbuf_put(&b, "<g class=\"axes\" stroke=\"#000000\" stroke-width=\"1\">\n", 51);
	lmt_strbuf_printf(&b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\"/>\n", px0, py1,
		px1 - px0, py0 - py1);
	lmt_strbuf_put(&b, "</g>\n", 5);
	lmt_strbuf_put(&b, "<g class=\"grid\" stroke=\"#dddddd\" stroke-width=\"1\">\n", 51);
	for (int i = 0; i < ax.nt; i++) {
		double X = px0 + (ax.t[i] - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
		lmt_strbuf_printf(&b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", X, py0, X, py1);
	}
	for (int i = 0; i < ay[0].nt; i++) {
		double Y = py0 + (tf(&ay[0], ay[0].t[i]) - ay[0].lo) / (ay[0].hi - ay[0].lo) * (py1 - py0);
		lmt_strbuf_printf(&b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", px0, Y, px1, Y);
	}
	lmt_strbuf_put(&b, "</g>\n", 5);
	lmt_strbuf_put(&b, "<g class=\"ticks\" fill=\"#000000\">\n", 33);
	char lab[64];
	for (int i = 0; i < ax.nt; i++) {
		double X = px0 + (ax.t[i] - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
		fmt_tick(ax.t[i], ax.step, 0, lab, sizeof lab);
		lmt_strbuf_printf(&b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000000\"/>", X, py0, X, py0 + 5);
		lmt_strbuf_printf(&b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%s</text>\n", X, py0 + 18, lab);
	}
	for (int r = 0; r < 2; r++) {
		if (!ay[r].used)
			continue;
		double ex = r ? px1 : px0, dx = r ? 5 : -5;
		for (int i = 0; i < ay[r].nt; i++) {
			double Y = py0 + (tf(&ay[r], ay[r].t[i]) - ay[r].lo) / (ay[r].hi - ay[r].lo) * (py1 - py0);
			fmt_tick(ay[r].t[i], ay[r].step, ay[r].log, lab, sizeof lab);
			lmt_strbuf_printf(&b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000000\"/>", ex, Y,
				ex + dx, Y);
			lmt_strbuf_printf(&b, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\">%s</text>\n", ex + 1.6 * dx, Y + 4,
				r ? "start" : "end", lab);
		}
	}
	lmt_strbuf_put(&b, "</g>\n", 5);

	/* axis labels */
	lmt_strbuf_printf(&b, "<text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", (px0 + px1) / 2, H - 14);
	xml_text(&b, p->xlabel);
	lmt_strbuf_put(&b, "</text>\n", 8);
	for (int r = 0; r < 2; r++) {
		const char *l = r ? p->y2label : p->ylabel;
		if (!ay[r].used || !l)
			continue;
		double X = r ? W - 14 : 18, Y = (py0 + py1) / 2;
		lmt_strbuf_printf(&b, "<text class=\"ylabel\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" "
			    "transform=\"rotate(%d %.2f %.2f)\">", X, Y, r ? 90 : -90, X, Y);
		xml_text(&b, l);
		lmt_strbuf_put(&b, "</text>\n", 8);
	}

	/* the data */
	lmt_strbuf_printf(&b, "<g class=\"plot-area\" data-x=\"%.17g %.17g %.2f %.2f\" data-y=\"%.17g %.17g %.2f %.2f\" "
		    "data-y-scale=\"%s\"", ax.lo, ax.hi, px0, px1, ay[0].lo, ay[0].hi, py0, py1,
		ay[0].log ? "log" : "linear");
	if (ay[1].used)
		lmt_strbuf_printf(&b, " data-y2=\"%.17g %.17g %.2f %.2f\" data-y2-scale=\"%s\"", ay[1].lo, ay[1].hi, py0, py1,
			ay[1].log ? "log" : "linear");
	lmt_strbuf_put(&b, ">\n", 2);
	for (int h = 0; h < p->nhlines; h++) {
		const struct lmt_plot_hline *L = &p->hlines[h];
		const struct axis *a = &ay[L->right != 0];
		if (!usable(L->y, a->log))
			continue;
		double Y = py0 + (tf(a, L->y) - a->lo) / (a->hi - a->lo) * (py1 - py0);
		const char *col = palette[(p->nseries + h) % LMT_ARRAY_SIZE(palette)];
		if (Y < py1 - 0.005 || Y > py0 + 0.005) { /* only a near line can lie beyond the axis */
			int above = Y < py1;
			lmt_strbuf_printf(&b, "<text class=\"hline-clipped\" data-name=\"");
			xml_text(&b, L->name);
			lmt_strbuf_printf(&b, "\" data-value=\"%.17g\" data-side=\"%s\" x=\"%.2f\" y=\"%.2f\" "
				    "text-anchor=\"end\" font-size=\"10\" fill=\"%s\">%s ", L->y, above ? "above" : "below",
				px1 - 4, above ? py1 + 12 : py0 - 5, col, above ? "\xe2\x86\x91" : "\xe2\x86\x93");
			xml_text(&b, L->name);
			lmt_strbuf_printf(&b, " (off the axis)</text>\n");
			continue;
		}
		lmt_strbuf_printf(&b, "<line class=\"hline\" data-name=\"");
		xml_text(&b, L->name);
		lmt_strbuf_printf(&b, "\" data-value=\"%.17g\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
			    "stroke-width=\"1.2\" stroke-dasharray=\"6 4\"/>\n", L->y, px0, Y, px1, Y, col);
	}
	for (int v = 0; v < p->nvlines; v++) {
		const struct lmt_plot_vline *V = &p->vlines[v];
		if (!isfinite(V->x) || V->x < ax.lo || V->x > ax.hi)
			continue;
		double X = px0 + (V->x - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
		lmt_strbuf_printf(&b, "<line class=\"vline\" data-name=\"");
		xml_text(&b, V->name);
		lmt_strbuf_printf(&b, "\" data-value=\"%.17g\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
			    "stroke=\"#555555\" stroke-width=\"0.8\" stroke-dasharray=\"3 3\"/>\n", V->x, X, py0, X, py1);
		lmt_strbuf_printf(&b, "<text class=\"vline-label\" x=\"%.2f\" y=\"%.2f\" font-size=\"10\" "
			    "fill=\"#555555\">", X + 3, py1 + 12 + 12 * (v % 2));
		xml_text(&b, V->name);
		lmt_strbuf_put(&b, "</text>\n", 8);
	}
	for (int s = 0; s < p->nseries; s++) {
		const struct lmt_plot_series *S = &p->series[s];
		const struct axis *a = &ay[S->right != 0];
		const char *col = palette[(S->color > 0 ? S->color - 1 : s) % LMT_ARRAY_SIZE(palette)];
		const char *width = S->faint ? "1\" stroke-opacity=\"0.3" : "1.5";
		int open = 0;
		for (size_t i = 0; i <= S->n; i++) {
			int ok = i < S->n && isfinite(S->x[i]) && usable(S->y[i], a->log);
			if (!ok) {
				if (open)
					lmt_strbuf_printf(&b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" "
						    "stroke-linejoin=\"round\"/>\n", col, width);
				open = 0;
				continue;
			}
			double X = px0 + (S->x[i] - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
			double Y = py0 + (tf(a, S->y[i]) - a->lo) / (a->hi - a->lo) * (py1 - py0);
			if (!open) {
				lmt_strbuf_printf(&b, "<polyline class=\"series\" data-series=\"");
				xml_text(&b, S->name);
				lmt_strbuf_printf(&b, "\" data-axis=\"%s\" points=\"%.2f,%.2f", S->right ? "right" : "left", X, Y);
				open = 1;
			} else {
				lmt_strbuf_printf(&b, " %.2f,%.2f", X, Y);
			}
		}
		if (S->markers) {
			lmt_strbuf_printf(&b, "<g class=\"markers\" data-series=\"");
			xml_text(&b, S->name);
			lmt_strbuf_printf(&b, "\" fill=\"%s\">\n", col);
			for (size_t i = 0; i < S->n; i++) {
				if (!isfinite(S->x[i]) || !usable(S->y[i], a->log))
					continue;
				double X = px0 + (S->x[i] - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
				double Y = py0 + (tf(a, S->y[i]) - a->lo) / (a->hi - a->lo) * (py1 - py0);
				lmt_strbuf_printf(&b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\"/>\n", X, Y);
			}
			lmt_strbuf_put(&b, "</g>\n", 5);
		}
	}
	lmt_strbuf_put(&b, "</g>\n", 5);

	/* legend */
	lmt_strbuf_put(&b, "<g class=\"legend\">\n", 19);
	for (int i = 0; i < nleg; i++) {
		int is_s = i < p->nseries;
		const char *name = is_s ? p->series[i].name : p->hlines[i - p->nseries].name;
		int k = is_s && p->series[i].color > 0 ? p->series[i].color - 1 : i; /* the colour it is drawn in */
		const char *col = palette[k % LMT_ARRAY_SIZE(palette)];
		int on_right = is_s ? p->series[i].right : p->hlines[i - p->nseries].right;
		lmt_strbuf_printf(&b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"2\"%s/>",
			lx[i], ly[i] - 4, lx[i] + 22, ly[i] - 4, col, is_s ? "" : " stroke-dasharray=\"6 4\"");
		lmt_strbuf_printf(&b, "<text x=\"%.2f\" y=\"%.2f\">", lx[i] + 28, ly[i]);
		xml_text(&b, name);
		if (on_right && p->y2label)
			lmt_strbuf_put(&b, " (right)", 8);
		lmt_strbuf_put(&b, "</text>\n", 8);
	}
	lmt_strbuf_put(&b, "</g>\n", 5);
	lmt_strbuf_put(&b, "</svg>\n", 7);
	free(lx);
	free(ly);
	if (b.oom) {
		free(b.buf);
		return lmt_err_set(err, LMT_ENOMEM, "plot: out of memory");
	}
	*out = b.buf;
	*len = b.len;
	return 0;
}
