/*
 * test-runcard: the three library pieces runcard(1) is built on.
 *
 *   yaml.h     the exact text of nested mappings and sequences, empty ones,
 *              comments, and the scalar forms: plain strings only where a YAML
 *              reader cannot take them for anything else, quoted ones with
 *              escapes (controls, U+2028, bytes that are not UTF-8), numbers
 *              that read back to the same double with a fraction in exponent
 *              forms, non-finite numbers as null;
 *   svg.h      tick steps of 1, 2, 2.5 and 5; a plot is well-formed XML (checked
 *              by a small XML reader here: every tag closed in order, attribute
 *              values quoted, only the five entities, no raw '<' or '&'), names
 *              with markup characters escaped, one polyline point per finite
 *              data point, non-finite points breaking the line, the data bounds
 *              mapping the points back to the data, log axes;
 *   tarball.h  an archive written from memory and from a file reads back with
 *              the same names in order, sizes and SHA-256; written twice it is
 *              byte-identical; it is zstd (its magic) with nothing after the
 *              frame; a missing file fails and leaves no archive or temporary.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/digest.h"
#include "report/svg.h"
#include "tap.h"
#include "report/tarball.h"
#include "report/yaml.h"

/* ---- yaml ---- */

static void yaml_tests(void)
{
	struct lmt_yaml y;
	lmt_yaml_init(&y);
	lmt_yaml_comment(&y, "head\n\nline 3");
	lmt_yaml_str(&y, "name", "gpt2", "c1");
	lmt_yaml_map(&y, "model", NULL);
	lmt_yaml_i64(&y, "layers", 12, "config#/model/layers");
	lmt_yaml_num(&y, "eps", 1e-8, NULL);
	lmt_yaml_map(&y, "empty", "none");
	lmt_yaml_end(&y);
	lmt_yaml_end(&y);
	lmt_yaml_seq(&y, "list", NULL);
	lmt_yaml_map(&y, NULL, NULL);
	lmt_yaml_i64(&y, "a", 1, NULL);
	lmt_yaml_bool(&y, "b", 0, "x");
	lmt_yaml_end(&y);
	lmt_yaml_str(&y, NULL, "plain", NULL);
	lmt_yaml_map(&y, NULL, NULL);
	lmt_yaml_end(&y);
	lmt_yaml_seq(&y, NULL, NULL);
	lmt_yaml_null(&y, NULL, NULL);
	lmt_yaml_end(&y);
	lmt_yaml_end(&y);
	lmt_yaml_seq(&y, "none", "c");
	lmt_yaml_end(&y);
	double ci[2] = { 0.5, 2 };
	lmt_yaml_nums(&y, "ci", ci, 2, "eval#/ci");
	const char *want = "# head\n#\n# line 3\n"
			   "name: gpt2  # c1\n"
			   "model:\n"
			   "  layers: 12  # config#/model/layers\n"
			   "  eps: 1.0e-08\n"
			   "  empty: {}  # none\n"
			   "list:\n"
			   "  - a: 1\n"
			   "    b: false  # x\n"
			   "  - plain\n"
			   "  - {}\n"
			   "  - - null\n"
			   "none: []  # c\n"
			   "ci: [0.5, 2]  # eval#/ci\n";
	if (!tap_ok(!y.out.oom && !strcmp(y.out.buf, want), "yaml: nested mappings and sequences, empty ones, comments"))
		tap_diag("got:\n%s", y.out.buf);
	lmt_yaml_release(&y);

	static const struct {
		const char *s;
		int plain;
	} cases[] = {
		{ "cpu", 1 },       { "/tmp/run_1/ckpt", 1 }, { "gpt2-normal", 1 }, { "a.b+c", 1 },
		{ "", 0 },          { "3de12ce", 0 },         { "1e5", 0 },         { "yes", 0 },
		{ "No", 0 },        { "null", 0 },            { "TRUE", 0 },        { "off", 0 },
		{ "a b", 0 },       { "a: b", 0 },            { "x#y", 0 },         { "-x", 0 },
		{ ".inf", 0 },      { "~", 0 },               { "[a]", 0 },         { "'q'", 0 },
	};
	int good = 1;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (lmt_yaml_plain_ok(cases[i].s) != cases[i].plain) {
			tap_diag("'%s': plain %d, expected %d", cases[i].s, !cases[i].plain, cases[i].plain);
			good = 0;
		}
	tap_ok(good, "yaml: plain strings only where nothing else could be read");

	lmt_yaml_init(&y);
	lmt_yaml_str(&y, "s", "a\"b\\c\n\t\x01\x7f\xe2\x80\xa8\xc3\xa9\xff", NULL);
	lmt_yaml_str(&y, "k", "1.5", NULL);
	const char *wq = "s: \"a\\\"b\\\\c\\n\\t\\u0001\\u007f\\u2028\xc3\xa9\xef\xbf\xbd\"\n"
			 "k: \"1.5\"\n";
	if (!tap_ok(!strcmp(y.out.buf, wq), "yaml: escapes in quoted strings; U+2028 escaped, bad UTF-8 as U+FFFD"))
		tap_diag("got: %s", y.out.buf);
	lmt_yaml_release(&y);

	char b[40];
	static const double nums[] = { 0.1, 1e-8, 6e-4, 1.5e300, -2.5e-7, 30950600000.0, 0.3, 1.0 / 3, 5e-324 };
	good = 1;
	for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
		lmt_yaml_fmt_num(nums[i], b);
		char *e = strchr(b, 'e');
		if (strtod(b, NULL) != nums[i] || (e && !memchr(b, '.', (size_t)(e - b)))) {
			tap_diag("%.17g written as %s", nums[i], b);
			good = 0;
		}
	}
	tap_ok(good, "yaml: numbers read back exactly, exponent forms with a fraction (1.0e-08)");
	tap_ok(!strcmp(lmt_yaml_fmt_num(NAN, b), "null") && !strcmp(lmt_yaml_fmt_num(INFINITY, b), "null"),
	       "yaml: non-finite numbers are null");
}

/* ---- a small XML well-formedness check ---- */

static int name_char(char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

/* Text between markup: '&' only as one of the five entities, no '<'. */
static const char *text_ok(const char *p, const char *end, char stop)
{
	static const char *const ents[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&apos;" };
	while (p < end && *p != stop) {
		if (*p == '<' && stop != '<')
			return NULL;
		if (*p == '&') {
			size_t k = 0;
			while (k < 5 && strncmp(p, ents[k], strlen(ents[k])))
				k++;
			if (k == 5)
				return NULL;
			p += strlen(ents[k]);
			continue;
		}
		p++;
	}
	return p;
}

/* 0 if s is one well-formed XML document (declaration, one root element). */
static int xml_wellformed(const char *s, char *why, size_t cap)
{
	const char *p = s, *end = s + strlen(s);
	char stack[64][64];
	int depth = 0, roots = 0;
	if (!strncmp(p, "<?xml", 5)) {
		const char *q = strstr(p, "?>");
		if (!q)
			return snprintf(why, cap, "unterminated declaration"), -1;
		p = q + 2;
	}
	while (p < end) {
		if (*p != '<') {
			const char *q = text_ok(p, end, '<');
			if (!q)
				return snprintf(why, cap, "bad text at %ld", (long)(p - s)), -1;
			if (!depth)
				for (const char *t = p; t < q; t++)
					if (*t != ' ' && *t != '\n')
						return snprintf(why, cap, "text outside the root at %ld", (long)(t - s)), -1;
			p = q;
			continue;
		}
		p++;
		int closing = *p == '/';
		if (closing)
			p++;
		char name[64];
		size_t n = 0;
		if (!name_char(*p, 1))
			return snprintf(why, cap, "bad tag name at %ld", (long)(p - s)), -1;
		while (name_char(*p, 0) && n + 1 < sizeof name)
			name[n++] = *p++;
		name[n] = 0;
		if (closing) {
			while (*p == ' ')
				p++;
			if (*p != '>' || !depth || strcmp(stack[depth - 1], name))
				return snprintf(why, cap, "</%s> does not close <%s>", name, depth ? stack[depth - 1] : ""), -1;
			depth--;
			p++;
			continue;
		}
		/* attributes: name="value", each name once */
		char seen[32][64];
		int ns = 0;
		for (;;) {
			int sp = 0;
			while (*p == ' ' || *p == '\n')
				p++, sp = 1;
			if (*p == '>' || (*p == '/' && p[1] == '>'))
				break;
			if (!sp || !name_char(*p, 1))
				return snprintf(why, cap, "bad attribute in <%s> at %ld", name, (long)(p - s)), -1;
			char an[64];
			size_t k = 0;
			while (name_char(*p, 0) && k + 1 < sizeof an)
				an[k++] = *p++;
			an[k] = 0;
			for (int i = 0; i < ns; i++)
				if (!strcmp(seen[i], an))
					return snprintf(why, cap, "attribute %s twice in <%s>", an, name), -1;
			if (ns < 32)
				snprintf(seen[ns++], sizeof seen[0], "%s", an);
			if (*p != '=' || (p[1] != '"' && p[1] != '\''))
				return snprintf(why, cap, "unquoted attribute %s in <%s>", an, name), -1;
			char q = p[1];
			p += 2;
			const char *e = text_ok(p, end, q);
			if (!e || e >= end)
				return snprintf(why, cap, "bad value of %s in <%s>", an, name), -1;
			p = e + 1;
		}
		if (!depth && roots++)
			return snprintf(why, cap, "a second root <%s>", name), -1;
		if (*p == '/') {
			p += 2;
			continue;
		}
		p++;
		if (depth >= 64)
			return snprintf(why, cap, "too deep"), -1;
		snprintf(stack[depth++], sizeof stack[0], "%s", name);
	}
	if (depth)
		return snprintf(why, cap, "<%s> not closed", stack[depth - 1]), -1;
	if (roots != 1)
		return snprintf(why, cap, "no root element"), -1;
	return 0;
}

/* The points of the polylines of series name, in order; returns the count of
 * polylines. */
static int polyline_points(const char *svg, const char *name, double *xy, int cap, int *np)
{
	char key[128];
	snprintf(key, sizeof key, "data-series=\"%s\"", name);
	int lines = 0;
	*np = 0;
	for (const char *p = svg; (p = strstr(p, "<polyline")); p++) {
		const char *e = strchr(p, '>');
		const char *k = strstr(p, key);
		if (!k || k > e)
			continue;
		lines++;
		const char *q = strstr(p, "points=\"") + 8;
		while (*q != '"') {
			double x = strtod(q, (char **)&q);
			q++; /* the comma */
			double y = strtod(q, (char **)&q);
			if (*np < cap)
				xy[2 * *np] = x, xy[2 * *np + 1] = y;
			(*np)++;
			while (*q == ' ')
				q++;
		}
	}
	return lines;
}

static int attr4(const char *svg, const char *attr, double v[4])
{
	char key[64];
	snprintf(key, sizeof key, " %s=\"", attr);
	const char *p = strstr(svg, key);
	return p && sscanf(p + strlen(key), "%lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3]) == 4 ? 0 : -1;
}

static void svg_tests(void)
{
	double t[64], a, b;
	int n = lmt_plot_ticks(128, 2560, 5, t, 64, &a, &b);
	tap_ok(n == 7 && a == 0 && b == 3000 && t[1] == 500, "ticks: 128..2560 by 500, from 0 to 3000 (got %d, %g..%g)",
	       n, a, b);
	n = lmt_plot_ticks(5.48, 5.71, 5, t, 64, &a, &b);
	tap_ok(n == 7 && fabs(t[1] - t[0] - 0.05) < 1e-12 && fabs(a - 5.45) < 1e-12 && fabs(b - 5.75) < 1e-12,
	       "ticks: 5.48..5.71 by 0.05, from 5.45 to 5.75 (got %d, %g..%g)", n, a, b);
	n = lmt_plot_ticks(0, 2560, 5, t, 64, &a, &b);
	tap_ok(n == 4 && a == 0 && b == 3000 && t[1] == 1000, "ticks: 0..2560 by 1000 (at most about 5 steps)");
	n = lmt_plot_ticks(0, 1, 4, t, 64, &a, &b);
	tap_ok(n == 5 && fabs(t[1] - 0.25) < 1e-12, "ticks: a step of 2.5 x 10^k");

	/* a series with a NaN in it, a sparse one with markers, a right axis */
	double x[20], y[20], y2[20], vx[4] = { 5, 10, 15, 20 }, vy[4] = { 3, 2.5, 2.2, 2.1 };
	for (int i = 0; i < 20; i++) {
		x[i] = i + 1;
		y[i] = 4.0 / (1 + 0.2 * i);
		y2[i] = i / 19.0;
	}
	struct lmt_plot_series s[] = {
		{ "train <loss> & \"more\"", x, y, 20, 0, 0, 0, 0 },
		{ "val loss", vx, vy, 4, 0, 1, 0, 0 },
		{ "fraction", x, y2, 20, 1, 0, 0, 0 },
	};
	struct lmt_plot_hline h[] = { { "clip", 1.0, 0, 0 } };
	struct lmt_plot p = { .title = "A & B <plot>", .xlabel = "update", .ylabel = "loss", .y2label = "fraction",
			      .y2range = { 0, 1 }, .series = s, .nseries = 3, .hlines = h, .nhlines = 1 };
	char *svg, why[256] = "";
	size_t len;
	struct lmt_err err = { 0 };
	if (!tap_ok(lmt_plot_svg(&p, &svg, &len, &err) == 0, "a plot renders"))
		return;
	tap_ok(len == strlen(svg), "its length is the string's");
	if (!tap_ok(xml_wellformed(svg, why, sizeof why) == 0, "it is well-formed XML"))
		tap_diag("%s", why);
	tap_ok(strstr(svg, "data-series=\"train &lt;loss&gt; &amp; &quot;more&quot;\"") &&
		       strstr(svg, "<title>A &amp; B &lt;plot&gt;</title>"),
	       "names and titles are escaped");
	double xy[64], dx[4], dy[4];
	int np;
	char esc[] = "train &lt;loss&gt; &amp; &quot;more&quot;";
	int lines = polyline_points(svg, esc, xy, 32, &np);
	tap_ok(lines == 1 && np == 20, "one polyline of 20 points (got %d of %d)", lines, np);
	int good = attr4(svg, "data-x", dx) == 0 && attr4(svg, "data-y", dy) == 0;
	/* back from pixels: 2 decimals, so within 0.005 px of the data */
	for (int i = 0; good && i < 20; i++) {
		double xb = dx[0] + (xy[2 * i] - dx[2]) * (dx[1] - dx[0]) / (dx[3] - dx[2]);
		double yb = dy[0] + (xy[2 * i + 1] - dy[2]) * (dy[1] - dy[0]) / (dy[3] - dy[2]);
		double tx = 0.005 * fabs(dx[1] - dx[0]) / fabs(dx[3] - dx[2]) * 1.001;
		double ty = 0.005 * fabs(dy[1] - dy[0]) / fabs(dy[3] - dy[2]) * 1.001;
		if (fabs(xb - x[i]) > tx || fabs(yb - y[i]) > ty) {
			tap_diag("point %d: (%g, %g) reads back as (%g, %g)", i, x[i], y[i], xb, yb);
			good = 0;
		}
	}
	tap_ok(good, "the data bounds map every point back to its value, within half a hundredth of a pixel");
	double r2[4];
	tap_ok(attr4(svg, "data-y2", r2) == 0 && r2[0] == 0 && r2[1] == 1, "the right axis has its fixed range 0..1");
	int circles = 0;
	for (const char *q = strstr(svg, "class=\"markers\""); q && (q = strstr(q + 1, "<circle")); )
		circles++;
	tap_ok(circles == 4, "markers at the 4 points of the sparse series (got %d)", circles);
	free(svg);

	y[7] = NAN;
	y[12] = INFINITY;
	s[0].name = "broken";
	p.logy = 1;
	p.nseries = 1;
	if (!tap_ok(lmt_plot_svg(&p, &svg, &len, &err) == 0, "a log plot with non-finite points renders"))
		return;
	lines = polyline_points(svg, "broken", xy, 32, &np);
	tap_ok(lines == 3 && np == 18, "non-finite points are left out and break the line (%d lines, %d points)", lines, np);
	good = strstr(svg, "data-y-scale=\"log\"") && attr4(svg, "data-y", dy) == 0;
	tap_ok(good && dy[0] == -1 && dy[1] == 1, "a log axis over whole decades, bounds in log10 (%g..%g)", dy[0], dy[1]);
	tap_ok(xml_wellformed(svg, why, sizeof why) == 0, "still well-formed");
	free(svg);

	/* reference levels that must not stretch the axis, and markers */
	for (int i = 0; i < 20; i++)
		y[i] = 3 - i * 0.05; /* 3 .. 2.05 */
	struct lmt_plot_hline nh[] = { { "near & below", 1.8, 0, 1 }, { "far above", 9, 0, 1 }, { "far below", -5, 0, 1 } };
	struct lmt_plot_vline vl[] = { { "resume @ 5", 5 }, { "resume @ 12", 12 }, { "outside", 99 } };
	struct lmt_plot pn = { .title = "near", .xlabel = "x", .ylabel = "y", .series = s, .nseries = 1, .hlines = nh,
			       .nhlines = 3, .vlines = vl, .nvlines = 3 };
	s[0].name = "curve";
	if (!tap_ok(lmt_plot_svg(&pn, &svg, &len, &err) == 0, "a plot with near lines and markers renders"))
		return;
	good = attr4(svg, "data-y", dy) == 0 && attr4(svg, "data-x", dx) == 0;
	tap_ok(good && dy[0] <= 1.8 && dy[1] >= 3 && dy[1] < 4 && dy[0] > 1,
	       "the axis takes in the near line (1.8) and the data, not the far ones (%g..%g)", dy[0], dy[1]);
	const char *q = strstr(svg, "<line class=\"hline\" data-name=\"near &amp; below\" data-value=\"1.8\"");
	double y1 = NAN;
	if (q && (q = strstr(q, " y1=\"")))
		y1 = strtod(q + 5, NULL);
	double want = dy[2] + (1.8 - dy[0]) / (dy[1] - dy[0]) * (dy[3] - dy[2]);
	tap_ok(fabs(y1 - want) <= 0.005, "the near line is drawn at its value's pixel (%.2f, expected %.2f)", y1, want);
	tap_ok(!strstr(svg, "class=\"hline\" data-name=\"far") &&
		       strstr(svg, "class=\"hline-clipped\" data-name=\"far above\" data-value=\"9\" data-side=\"above\"") &&
		       strstr(svg, "class=\"hline-clipped\" data-name=\"far below\" data-value=\"-5\" data-side=\"below\""),
	       "far lines are not drawn but named at the frame edge they lie beyond");
	int nv = 0;
	for (q = svg; (q = strstr(q, "<line class=\"vline\"")); q++)
		nv++;
	double vx5 = NAN;
	if ((q = strstr(svg, "data-name=\"resume @ 5\"")) && (q = strstr(q, " x1=\"")))
		vx5 = strtod(q + 5, NULL);
	want = dx[2] + (5 - dx[0]) / (dx[1] - dx[0]) * (dx[3] - dx[2]);
	tap_ok(nv == 2 && fabs(vx5 - want) <= 0.005 && strstr(svg, ">resume @ 12</text>"),
	       "a labelled marker per x inside the axis (%d), at its pixel (%.2f, expected %.2f)", nv, vx5, want);
	tap_ok(xml_wellformed(svg, why, sizeof why) == 0, "... well-formed");
	free(svg);
	pn.nvlines = 0;
	if (tap_ok(lmt_plot_svg(&pn, &svg, &len, &err) == 0, "without markers") )
		tap_ok(!strstr(svg, "class=\"vline"), "... none drawn");
	free(svg);

	struct lmt_plot empty = { .title = "nothing", .xlabel = "x", .ylabel = "y" };
	tap_ok(lmt_plot_svg(&empty, &svg, &len, &err) == 0 && xml_wellformed(svg, why, sizeof why) == 0,
	       "a plot without data is still a well-formed document");
	free(svg);

	/* the checker itself can fail */
	static const char *const bad[] = {
		"<a><b></a></b>", "<a x=1/>", "<a>&nbsp;</a>", "<a>x < y</a>", "<a/><b/>", "<a x=\"1\" x=\"2\"/>", "<a>",
	};
	good = 1;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (xml_wellformed(bad[i], why, sizeof why) == 0) {
			tap_diag("accepted: %s", bad[i]);
			good = 0;
		}
	tap_ok(good && xml_wellformed("<?xml version=\"1.0\"?>\n<a x='1'><b/>t &amp; u</a>\n", why, sizeof why) == 0,
	       "the XML check rejects 7 malformed documents and accepts a good one");
}

/* ---- tarball ---- */

struct scanned {
	char name[8][64];
	uint64_t size[8];
	uint8_t sha[8][32];
	int n;
};

static int collect(void *ctx, const struct lmt_tar_entry *e)
{
	struct scanned *s = ctx;
	if (s->n < 8 && e->regular) {
		snprintf(s->name[s->n], sizeof s->name[0], "%s", e->name);
		s->size[s->n] = e->size;
		memcpy(s->sha[s->n], e->sha256, 32);
		s->n++;
	}
	return 0;
}

static void tarball_tests(void)
{
	char dir[] = "/tmp/lmt-test-runcard.XXXXXX";
	if (!mkdtemp(dir)) {
		tap_ok(0, "a scratch directory");
		return;
	}
	char big[256], a1[256], a2[256], a3[256];
	snprintf(big, sizeof big, "%s/big.bin", dir);
	snprintf(a1, sizeof a1, "%s/a.tar.zst", dir);
	snprintf(a2, sizeof a2, "%s/b.tar.zst", dir);
	snprintf(a3, sizeof a3, "%s/c.tar.zst", dir);
	size_t nb = 200000;
	unsigned char *data = malloc(nb);
	uint32_t st = 1;
	for (size_t i = 0; i < nb; i++)
		data[i] = (unsigned char)((st = st * 1103515245u + 12345u) >> 24);
	struct lmt_err err = { 0 };
	lmt_write_file_atomic(big, data, nb, &err);
	const char *text = "hello\n";
	struct lmt_tar_member m[] = {
		{ "top/README", text, strlen(text), NULL },
		{ "top/data/big.bin", NULL, 0, big },
		{ "top/empty", "", 0, NULL },
	};
	tap_ok(lmt_tarball_write(a1, m, 3, &err) == 0, "an archive from memory and a file");
	tap_ok(lmt_tarball_write(a2, m, 3, &err) == 0, "... written again");
	char *x, *y;
	size_t nx = 0, ny = 0;
	lmt_read_file(a1, &x, &nx, &err);
	lmt_read_file(a2, &y, &ny, &err);
	tap_ok(nx && nx == ny && !memcmp(x, y, nx), "the same members give the same bytes");
	tap_ok(nx > 4 && (unsigned char)x[0] == 0x28 && (unsigned char)x[1] == 0xb5 && (unsigned char)x[2] == 0x2f &&
		       (unsigned char)x[3] == 0xfd,
	       "it is zstd (magic 28 b5 2f fd)");
	free(x);
	free(y);
	struct scanned s;
	memset(&s, 0, sizeof s);
	int rc = lmt_tarball_scan(a1, 1 << 20, collect, &s, &err);
	uint8_t h[3][32];
	lmt_sha256(text, strlen(text), h[0]);
	lmt_sha256(data, nb, h[1]);
	lmt_sha256("", 0, h[2]);
	int good = rc == 0 && s.n == 3;
	for (int i = 0; good && i < 3; i++)
		good = !strcmp(s.name[i], m[i].name) && !memcmp(s.sha[i], h[i], 32) &&
		       s.size[i] == (i == 1 ? nb : m[i].size);
	if (!tap_ok(good, "it reads back: the names in order, sizes, SHA-256 (%s)", rc ? err.msg : "scanned"))
		tap_diag("%d members", s.n);

	struct lmt_tar_member bad[] = { { "top/x", NULL, 0, "/nonexistent/file" } };
	err.msg[0] = 0;
	tap_ok(lmt_tarball_write(a3, bad, 1, &err) != 0 && strstr(err.msg, "/nonexistent/file"),
	       "a missing file fails, naming it: %s", err.msg);
	struct stat sb;
	int left = 0;
	char cmd[512];
	snprintf(cmd, sizeof cmd, "ls -A %s | grep -c c.tar.zst", dir);
	FILE *f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%d", &left) != 1)
			left = -1;
		pclose(f);
	}
	tap_ok(stat(a3, &sb) != 0 && left == 0, "... and leaves neither the archive nor a temporary");
	tap_ok(lmt_tarball_scan(big, 0, collect, &s, &err) != 0, "a file that is not an archive is refused: %s", err.msg);
	unlink(big);
	unlink(a1);
	unlink(a2);
	rmdir(dir);
	free(data);
}

int main(void)
{
	yaml_tests();
	svg_tests();
	tarball_tests();
	return tap_done();
}
