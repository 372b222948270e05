/*
 * dashboard.c: the run as one HTML page (dashboard.h).
 *
 * The C side gathers the series into one JSON object (columns of numbers, one
 * per quantity, null where a record lacks it), the page's script draws them. The
 * script is below as lines of text: it is the page's, not a template, and is
 * written to need no library, so that the file opens anywhere a browser does.
 */
#include "report/dashboard.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonptr.h"
#include "core/util.h"
#include "report/explain.h"

const char *const lmt_dashboard_panels[LMT_DASHBOARD_NPANELS] = {
	"p-loss", "p-lr", "p-gnorm", "p-layers", "p-ratio", "p-throughput",
	"p-wait", "p-ranks", "p-comm", "p-memory", "p-events", "p-alerts",
};

static const char *const titles[LMT_DASHBOARD_NPANELS] = {
	"Loss: train, smoothed, validation",
	"Learning rate",
	"Gradient norm, clip threshold and clipped updates",
	"Gradient norm by unit (embeddings, layers, head)",
	"Update-to-parameter ratio by tensor kind",
	"Throughput and MFU",
	"Data wait",
	"Step time by rank",
	"Exposed communication",
	"Memory against memledger's prediction",
	"Checkpoints, resumes and stops",
	"Alerts and their explanations",
};

/* the page's script (see dashboard.h for what it draws and checks) */
static const char *const script[] = {
	"'use strict';",
	"var D = JSON.parse(document.getElementById('lmt-data').textContent);",
	"var errors = [];",
	"window.addEventListener('error', function (e) { errors.push(String(e.message || e)); });",
	"var clock = 'updates';",
	"var CLOCKS = { updates: 'updates', wall: 'wall time (s)', tokens: 'valid tokens', device_h: 'device-hours' };",
	"var U = D.updates;",
	"function col(name) { return U[name] || []; }",
	"function xs() { return col(clock === 'updates' ? 'u' : clock); }",
	"/* the clock value of update n: the nearest update record at or after it */",
	"function xAt(n) {",
	"  var u = col('u'), lo = 0, hi = u.length - 1;",
	"  if (!u.length) return n;",
	"  if (clock === 'updates') return n;",
	"  while (lo < hi) { var m = (lo + hi) >> 1; if (u[m] < n) lo = m + 1; else hi = m; }",
	"  return xs()[lo];",
	"}",
	"function esc(s) { return String(s).replace(/[&<>\"]/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '\"': '&quot;' }[c]; }); }",
	"function fmt(v) {",
	"  if (v === null || v === undefined || !isFinite(v)) return '-';",
	"  var a = Math.abs(v);",
	"  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);",
	"  return String(+v.toPrecision(4));",
	"}",
	"var W = 560, H = 220, L = 58, R = 12, T = 10, B = 34;",
	"function scale(lo, hi, a, b, log) {",
	"  if (log) { lo = Math.log10(lo); hi = Math.log10(hi); }",
	"  if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }",
	"  return function (v) { if (log) v = Math.log10(v); return a + (v - lo) / (hi - lo) * (b - a); };",
	"}",
	"function range(vals, log) {",
	"  var lo = Infinity, hi = -Infinity;",
	"  vals.forEach(function (v) { if (v !== null && isFinite(v) && (!log || v > 0)) { if (v < lo) lo = v; if (v > hi) hi = v; } });",
	"  if (lo === Infinity) { lo = log ? 1 : 0; hi = log ? 10 : 1; }",
	"  if (!log && lo === hi) { lo -= 0.5; hi += 0.5; }",
	"  return [lo, hi];",
	"}",
	"function axes(sx, sy, xr, yr, ylabel, log) {",
	"  var s = '<g class=\"axis\">';",
	"  s += '<line x1=\"' + L + '\" y1=\"' + (H - B) + '\" x2=\"' + (W - R) + '\" y2=\"' + (H - B) + '\"/>';",
	"  s += '<line x1=\"' + L + '\" y1=\"' + T + '\" x2=\"' + L + '\" y2=\"' + (H - B) + '\"/>';",
	"  for (var i = 0; i <= 4; i++) {",
	"    var xv = xr[0] + (xr[1] - xr[0]) * i / 4;",
	"    s += '<text x=\"' + sx(xv).toFixed(1) + '\" y=\"' + (H - B + 14) + '\" text-anchor=\"middle\">' + fmt(xv) + '</text>';",
	"    var yv = log ? Math.pow(10, Math.log10(yr[0]) + (Math.log10(yr[1]) - Math.log10(yr[0])) * i / 4) : yr[0] + (yr[1] - yr[0]) * i / 4;",
	"    s += '<text x=\"' + (L - 4) + '\" y=\"' + (sy(yv) + 4).toFixed(1) + '\" text-anchor=\"end\">' + fmt(yv) + '</text>';",
	"  }",
	"  s += '<text x=\"' + ((L + W - R) / 2) + '\" y=\"' + (H - 4) + '\" text-anchor=\"middle\">' + esc(CLOCKS[clock]) + '</text>';",
	"  s += '<text x=\"12\" y=\"' + ((T + H - B) / 2) + '\" transform=\"rotate(-90 12 ' + ((T + H - B) / 2) + ')\" text-anchor=\"middle\">' + esc(ylabel) + '</text>';",
	"  return s + '</g>';",
	"}",
	"var COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];",
	"/* series: [{name, x:[], y:[], color, dots}] ; o: {ylabel, log, hlines:[{y,name}], marks:[{x,name,color}]} */",
	"function chart(series, o) {",
	"  var allx = [], ally = [];",
	"  series.forEach(function (s) { allx = allx.concat(s.x); ally = ally.concat(s.y); });",
	"  (o.hlines || []).forEach(function (h) { ally.push(h.y); });",
	"  var xr = range(allx, false), yr = range(ally, o.log);",
	"  var sx = scale(xr[0], xr[1], L, W - R, false), sy = scale(yr[0], yr[1], H - B, T, o.log);",
	"  var svg = '<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"' + W + '\" height=\"' + H + '\" viewBox=\"0 0 ' + W + ' ' + H + '\">';",
	"  svg += axes(sx, sy, xr, yr, o.ylabel, o.log);",
	"  var legend = '';",
	"  series.forEach(function (s, k) {",
	"    var c = s.color || COLORS[k % COLORS.length], d = '', n = 0;",
	"    for (var i = 0; i < s.x.length; i++) {",
	"      var y = s.y[i];",
	"      if (y === null || !isFinite(y) || (o.log && y <= 0)) continue;",
	"      var px = sx(s.x[i]).toFixed(1), py = sy(y).toFixed(1);",
	"      if (s.dots) d += '<circle cx=\"' + px + '\" cy=\"' + py + '\" r=\"2.5\" fill=\"' + c + '\"/>';",
	"      else d += (n ? 'L' : 'M') + px + ' ' + py;",
	"      n++;",
	"    }",
	"    if (s.dots) svg += '<g class=\"series\" data-n=\"' + n + '\">' + d + '</g>';",
	"    else if (n) svg += '<path class=\"series\" data-n=\"' + n + '\" d=\"' + d + '\" fill=\"none\" stroke=\"' + c + '\" stroke-width=\"' + (s.width || 1.2) + '\"/>';",
	"    legend += '<span style=\"color:' + c + '\">&#9632; ' + esc(s.name) + '</span> ';",
	"  });",
	"  (o.hlines || []).forEach(function (h, k) {",
	"    var y = sy(h.y).toFixed(1);",
	"    svg += '<line class=\"hline\" x1=\"' + L + '\" x2=\"' + (W - R) + '\" y1=\"' + y + '\" y2=\"' + y + '\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>';",
	"    legend += '<span class=\"hl\">- - ' + esc(h.name) + ' ' + fmt(h.y) + '</span> ';",
	"  });",
	"  (o.marks || []).forEach(function (m) {",
	"    var x = sx(m.x).toFixed(1);",
	"    svg += '<line class=\"mark\" x1=\"' + x + '\" x2=\"' + x + '\" y1=\"' + T + '\" y2=\"' + (H - B) + '\" stroke=\"' + (m.color || '#999') + '\" stroke-width=\"1\"><title>' + esc(m.name) + '</title></line>';",
	"  });",
	"  return svg + '</svg><div class=\"legend\">' + legend + '</div>';",
	"}",
	"function heat(rows, x, vals, o) {",
	"  /* vals[r][i]: row r at column i; colour by log of the value over the row set's range */",
	"  var flat = [];",
	"  vals.forEach(function (r) { r.forEach(function (v) { if (v !== null && isFinite(v) && v > 0) flat.push(v); }); });",
	"  var vr = range(flat, true), xr = range(x, false);",
	"  var lv0 = Math.log10(vr[0]), lv1 = Math.log10(vr[1]);",
	"  var top = T, rh = Math.max(4, Math.min(18, (H - B - T) / Math.max(rows.length, 1)));",
	"  var h = top + rh * rows.length + B;",
	"  var cw = Math.max(1, (W - R - L - 40) / Math.max(x.length, 1)), n = 0;",
	"  var sx = scale(xr[0], xr[1], L + 40 + cw / 2, W - R - cw / 2, false);",
	"  var svg = '<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"' + W + '\" height=\"' + h + '\" viewBox=\"0 0 ' + W + ' ' + h + '\">';",
	"  rows.forEach(function (name, r) {",
	"    svg += '<text class=\"axis\" x=\"' + (L + 36) + '\" y=\"' + (top + rh * r + rh * 0.75).toFixed(1) + '\" text-anchor=\"end\">' + esc(name) + '</text>';",
	"    for (var i = 0; i < x.length; i++) {",
	"      var v = vals[r][i];",
	"      if (v === null || !isFinite(v) || v <= 0) continue;",
	"      var t = lv1 > lv0 ? (Math.log10(v) - lv0) / (lv1 - lv0) : 0.5;",
	"      var col = 'hsl(' + (240 - 240 * t).toFixed(0) + ',80%,' + (30 + 30 * t).toFixed(0) + '%)';",
	"      svg += '<rect x=\"' + (sx(x[i]) - cw / 2).toFixed(1) + '\" y=\"' + (top + rh * r).toFixed(1) + '\" width=\"' + cw.toFixed(1) + '\" height=\"' + rh.toFixed(1) + '\" fill=\"' + col + '\"><title>' + esc(name) + ' at ' + fmt(x[i]) + ': ' + fmt(v) + '</title></rect>';",
	"      n++;",
	"    }",
	"  });",
	"  svg += '<text class=\"axis\" x=\"' + ((L + W - R) / 2) + '\" y=\"' + (h - 6) + '\" text-anchor=\"middle\">' + esc(CLOCKS[clock]) + '; colour: ' + esc(o.what) + ' from ' + fmt(vr[0]) + ' (blue) to ' + fmt(vr[1]) + ' (red), log scale</text>';",
	"  return svg.replace('<svg ', '<svg data-n=\"' + n + '\" ') + '</svg>';",
	"}",
	"function panel(id, html, why) {",
	"  var el = document.getElementById(id), p = el.querySelector('.plot'), w = el.querySelector('.why');",
	"  if (why) { el.setAttribute('data-state', 'nodata'); p.innerHTML = ''; w.textContent = 'no data: ' + why; }",
	"  else { el.setAttribute('data-state', 'data'); p.innerHTML = html; w.textContent = ''; }",
	"}",
	"function has(name) { return col(name).some(function (v) { return v !== null && isFinite(v); }); }",
	"function series(name, label, extra) {",
	"  var s = { name: label, x: xs(), y: col(name) };",
	"  for (var k in extra || {}) s[k] = extra[k];",
	"  return s;",
	"}",
	"function smooth(y) {",
	"  var out = [], m = null, a = 0.1;",
	"  y.forEach(function (v) { if (v !== null && isFinite(v)) m = m === null ? v : m + a * (v - m); out.push(m); });",
	"  return out;",
	"}",
	"function eventMarks() {",
	"  var c = { checkpoint: '#2ca02c', resume: '#9467bd', stop: '#d62728', failed: '#d62728', start: '#7f7f7f' };",
	"  return D.events.filter(function (e) { return c[e.event]; }).map(function (e) {",
	"    return { x: xAt(e.update), name: e.event + ' at update ' + e.update + (e.detail ? ': ' + e.detail : ''), color: c[e.event] };",
	"  });",
	"}",
	"function render() {",
	"  var n = col('u').length;",
	"  if (!n) {",
	"    ['p-loss', 'p-lr', 'p-gnorm', 'p-layers', 'p-ratio', 'p-throughput', 'p-wait', 'p-ranks', 'p-comm', 'p-memory'].forEach(function (id) {",
	"      panel(id, '', 'the run has no update records yet');",
	"    });",
	"  } else {",
	"    var ls = [series('loss', 'train'), { name: 'smoothed (EMA 0.1)', x: xs(), y: smooth(col('loss')), width: 2 }];",
	"    if (D.evals.length) ls.push({ name: 'validation', x: D.evals.map(function (e) { return xAt(e[0]); }), y: D.evals.map(function (e) { return e[1]; }), dots: true });",
	"    var hl = [];",
	"    if (D.unigram !== null) hl.push({ y: D.unigram, name: 'unigram baseline' });",
	"    if (D.floor !== null) hl.push({ y: D.floor, name: 'entropy floor' });",
	"    panel('p-loss', chart(ls, { ylabel: 'loss (nats/token)', hlines: hl, marks: eventMarks() }) +",
	"      '<p class=\"note\">' + esc(D.baseline_note) + '</p>');",
	"    panel('p-lr', chart([series('lr', 'learning rate')], { ylabel: 'learning rate' }));",
	"    var cx = [], cy = [];",
	"    col('clipped').forEach(function (c, i) { if (c) { cx.push(xs()[i]); cy.push(col('gnorm')[i]); } });",
	"    var gs = [series('gnorm', 'gradient norm')];",
	"    if (cx.length) gs.push({ name: 'clipped updates (' + cx.length + ')', x: cx, y: cy, dots: true, color: '#d62728' });",
	"    panel('p-gnorm', chart(gs, { ylabel: 'gradient norm', log: true, hlines: D.clip > 0 ? [{ y: D.clip, name: 'clip threshold' }] : [] }));",
	"    if (D.stats.updates.length) {",
	"      var sxs = D.stats.updates.map(xAt);",
	"      panel('p-layers', heat(D.stats.units, sxs, D.stats.grad, { what: 'gradient norm' }));",
	"      var rs = [];",
	"      for (var k in D.stats.ratio) rs.push({ name: k, x: sxs, y: D.stats.ratio[k] });",
	"      panel('p-ratio', chart(rs, { ylabel: 'update / parameter norm', log: true }));",
	"    } else {",
	"      panel('p-layers', '', D.stats.why);",
	"      panel('p-ratio', '', D.stats.why);",
	"    }",
	"    panel('p-throughput', chart([series('tps', 'valid tokens/s')], { ylabel: 'tokens/s' }) +",
	"      chart([series('mfu', 'MFU')], { ylabel: 'MFU' }));",
	"    panel('p-wait', has('wait') ? chart([series('wait', 'data wait (s)'), series('step', 'step (s)')], { ylabel: 'seconds', log: true }) : '',",
	"      has('wait') ? null : 'the update records carry no time.data_wait');",
	"    if (D.ranks.heat.length) {",
	"      var rows = [], vals = [];",
	"      for (var r = 0; r < D.ranks.world; r++) { rows.push('rank ' + r); vals.push(D.ranks.heat.map(function (h) { return h[r]; })); }",
	"      panel('p-ranks', heat(rows, D.ranks.updates.map(xAt), vals, { what: 'step seconds' }) + '<p class=\"note\">' + esc(D.ranks.note) + '</p>');",
	"    } else panel('p-ranks', '', D.ranks.why);",
	"    panel('p-comm', has('comm') ? chart([series('comm', 'communication (s)'), series('step', 'step (s)')], { ylabel: 'seconds', log: true }) : '',",
	"      has('comm') ? null : 'the update records carry no time.comm');",
	"    var mh = D.ledger > 0 ? [{ y: D.ledger, name: 'memledger prediction' }] : [];",
	"    panel('p-memory', has('peak_alloc') ? chart([series('peak_alloc', 'backend peak (bytes)'), series('peak_rss', 'process peak RSS (bytes)')], { ylabel: 'bytes', log: true, hlines: mh }) +",
	"      (D.ledger > 0 ? '' : '<p class=\"note\">no ledger: ' + esc(D.ledger_why) + '</p>') : '', has('peak_alloc') ? null : 'the update records carry no memory.peak_alloc');",
	"  }",
	"  var marks = D.events.filter(function (e) { return e.event !== 'alert' && e.event !== 'alert-cleared'; });",
	"  if (marks.length) {",
	"    var t = '<table><tr><th>update</th><th>' + esc(CLOCKS[clock]) + '</th><th>event</th><th>detail</th></tr>';",
	"    marks.forEach(function (e) { t += '<tr class=\"ev-' + esc(e.event) + '\"><td>' + e.update + '</td><td>' + fmt(xAt(e.update)) + '</td><td>' + esc(e.event) + '</td><td>' + esc(e.detail || '') + '</td></tr>'; });",
	"    panel('p-events', t + '</table>');",
	"  } else panel('p-events', '', D.events_why || 'events.jsonl has no checkpoint, resume or stop events');",
	"  if (D.alerts.length) {",
	"    var am = D.alerts.map(function (a) { return { x: xAt(a.update), name: a.kind + ' at ' + a.update, color: '#d62728' }; });",
	"    var h = chart([series('loss', 'train loss')], { ylabel: 'loss', marks: am });",
	"    h += '<ol class=\"alerts\">';",
	"    D.alerts.forEach(function (a) {",
	"      h += '<li><b>' + esc(a.kind) + '</b> at update ' + a.update + ' (' + fmt(a.value) + ' over ' + fmt(a.threshold) + '): ' + esc(a.evidence);",
	"      if (a.explain) {",
	"        h += '<div class=\"explain\"><b>explanation</b> (' + esc(a.explain.confidence) + '): ' + esc(a.explain.verdict) + '<ul>';",
	"        a.explain.findings.forEach(function (f) { h += '<li>' + esc(f.cause) + ' (' + esc(f.confidence) + '): ' + esc(f.text) + '</li>'; });",
	"        if (a.explain.checkpoint) h += '<li>roll back to: ' + esc(a.explain.checkpoint) + '</li>';",
	"        h += '</ul></div>';",
	"      }",
	"      h += '</li>';",
	"    });",
	"    panel('p-alerts', h + '</ol>');",
	"  } else panel('p-alerts', '', 'no alert was raised in this run (metrics.jsonl has no alert record)');",
	"}",
	"function selfcheck() {",
	"  var bad = [];",
	"  document.querySelectorAll('section.panel').forEach(function (el) {",
	"    var st = el.getAttribute('data-state');",
	"    if (st === 'data') {",
	"      var n = 0;",
	"      el.querySelectorAll('[data-n]').forEach(function (g) { n += +g.getAttribute('data-n'); });",
	"      if (!n && !el.querySelector('table,li')) bad.push(el.id + ': drawn but empty');",
	"    } else if (st === 'nodata') {",
	"      if (!el.querySelector('.why').textContent.trim()) bad.push(el.id + ': no data and no reason');",
	"    } else bad.push(el.id + ': not rendered');",
	"  });",
	"  var s = document.getElementById('selfcheck'), ok = !bad.length && !errors.length;",
	"  s.setAttribute('data-ok', ok ? '1' : '0');",
	"  s.setAttribute('data-errors', String(errors.length));",
	"  s.setAttribute('data-panels', String(document.querySelectorAll('section.panel').length));",
	"  s.textContent = ok ? 'self-check passed: every panel has data or says why not; no script error'",
	"    : 'self-check failed: ' + bad.concat(errors.map(function (e) { return 'script error: ' + e; })).join('; ');",
	"}",
	"try {",
	"  var sel = document.getElementById('clock');",
	"  for (var c in CLOCKS) { var o = document.createElement('option'); o.value = c; o.textContent = CLOCKS[c]; sel.appendChild(o); }",
	"  /* #clock=NAME in the URL picks the clock the page opens with (a link to a view) */",
	"  var want = /clock=(\\w+)/.exec(location.hash);",
	"  if (want && CLOCKS[want[1]]) clock = want[1];",
	"  sel.value = clock;",
	"  document.body.setAttribute('data-clock', clock);",
	"  sel.addEventListener('change', function () { clock = sel.value; document.body.setAttribute('data-clock', clock); try { render(); } catch (e) { errors.push(String(e)); } selfcheck(); });",
	"  render();",
	"} catch (e) { errors.push(String(e && e.stack || e)); }",
	"selfcheck();",
	NULL,
};

static const char style[] =
	"body{font:13px/1.4 sans-serif;margin:16px;color:#222;background:#fafafa}"
	"h1{font-size:18px;margin:0 0 4px}h2{font-size:14px;margin:0 0 6px}"
	".grid{display:flex;flex-wrap:wrap;gap:12px}"
	".panel{box-sizing:border-box;background:#fff;border:1px solid #ddd;border-radius:4px;padding:8px;width:580px}"
	".panel[data-state=nodata] .why{color:#a33;font-style:italic}"
	".axis text,text.axis{font-size:10px;fill:#444}.axis line{stroke:#888}"
	".legend{font-size:11px}.note{font-size:11px;color:#666;margin:2px 0}"
	"table{border-collapse:collapse;font-size:11px}td,th{border-bottom:1px solid #eee;padding:1px 6px;text-align:left}"
	".alerts{font-size:12px;padding-left:18px}.explain{background:#f4f4ff;padding:3px 6px;margin:3px 0}"
	"#selfcheck{font-size:11px;color:#666;margin:4px 0}#selfcheck[data-ok='0']{color:#a33}";

static void col_push(json_t *cols, const char *name, json_t *v)
{
	json_array_append_new(json_object_get(cols, name), v ? v : json_null());
}

static json_t *num_or_null(json_t *o, const char *ptr)
{
	json_t *x = lmt_jsonptr_get(o, ptr);
	return json_is_number(x) ? json_real(json_number_value(x)) : json_null();
}

/* the update records' columns, every stride-th record (and the last) */
static json_t *updates(const struct lmt_runview *v, size_t stride)
{
	static const char *const names[] = { "u", "wall", "tokens", "device_h", "loss", "lr", "gnorm", "clipped",
					     "tps", "mfu", "wait", "step", "comm", "peak_alloc", "peak_rss" };
	json_t *cols = json_object();
	for (size_t i = 0; i < LMT_ARRAY_SIZE(names); i++)
		json_object_set_new(cols, names[i], json_array());
	for (size_t i = 0; i < v->nupd; i++) {
		json_t *u = v->upd[i];
		/* a clipped update is kept whatever the stride, so that none goes unmarked */
		int clipped = json_is_true(json_object_get(u, "clipped"));
		if (i % stride && i + 1 != v->nupd && !clipped)
			continue;
		col_push(cols, "u", json_integer((json_int_t)v->upd_n[i]));
		col_push(cols, "wall", num_or_null(u, "/clocks/wall_s"));
		col_push(cols, "tokens", num_or_null(u, "/clocks/tokens"));
		double ds = lmt_jnum(u, "/clocks/device_s", NAN);
		col_push(cols, "device_h", isfinite(ds) ? json_real(ds / 3600) : NULL);
		col_push(cols, "loss", num_or_null(u, "/loss"));
		col_push(cols, "lr", num_or_null(u, "/lr"));
		col_push(cols, "gnorm", num_or_null(u, "/grad_norm"));
		col_push(cols, "clipped", json_integer(clipped));
		col_push(cols, "tps", num_or_null(u, "/tokens_per_s"));
		col_push(cols, "mfu", num_or_null(u, "/mfu"));
		col_push(cols, "wait", num_or_null(u, "/time/data_wait"));
		col_push(cols, "step", num_or_null(u, "/time/step"));
		col_push(cols, "comm", num_or_null(u, "/time/comm"));
		col_push(cols, "peak_alloc", num_or_null(u, "/memory/peak_alloc"));
		col_push(cols, "peak_rss", num_or_null(u, "/memory/peak_rss"));
	}
	return cols;
}

static int is(json_t *o, const char *ev)
{
	const char *e = json_string_value(json_object_get(o, "event"));
	return e && !strcmp(e, ev);
}

/* the stats records: the units' gradient norms (a row per unit) and the update ratios */
static json_t *stats(const struct lmt_runview *v)
{
	json_t *s = json_object(), *ups = json_array(), *units = json_array(), *grad = json_array(), *ratio = json_object();
	size_t nl = 0, k = 0;
	for (size_t i = 0; i < v->nrec; i++) {
		json_t *r = v->rec[i];
		if (!is(r, "stats"))
			continue;
		json_t *L = json_object_get(r, "layers");
		if (!k) {
			nl = json_array_size(L);
			json_array_append_new(units, json_string("embeddings"));
			for (size_t l = 0; l < nl; l++) {
				char nm[32];
				snprintf(nm, sizeof nm, "layer %zu", l);
				json_array_append_new(units, json_string(nm));
			}
			json_array_append_new(units, json_string("head"));
			for (size_t l = 0; l < nl + 2; l++)
				json_array_append_new(grad, json_array());
		}
		k++;
		json_array_append_new(ups, json_integer((json_int_t)lmt_jnum(r, "/update", 0)));
		json_array_append_new(json_array_get(grad, 0), num_or_null(r, "/embeddings/grad_norm"));
		for (size_t l = 0; l < nl; l++)
			json_array_append_new(json_array_get(grad, l + 1), num_or_null(json_array_get(L, l), "/grad_norm"));
		json_array_append_new(json_array_get(grad, nl + 1), num_or_null(r, "/head/grad_norm"));
		const char *key;
		json_t *val;
		json_object_foreach(json_object_get(r, "update_ratio"), key, val) {
			if (!json_object_get(ratio, key)) {
				/* a kind first seen now: nulls for the records before */
				json_t *a = json_array();
				for (size_t q = 0; q + 1 < k; q++)
					json_array_append_new(a, json_null());
				json_object_set_new(ratio, key, a);
			}
			json_array_append_new(json_object_get(ratio, key),
					      json_is_number(val) ? json_real(json_number_value(val)) : json_null());
		}
	}
	json_object_set_new(s, "updates", ups);
	json_object_set_new(s, "units", units);
	json_object_set_new(s, "grad", grad);
	json_object_set_new(s, "ratio", ratio);
	json_object_set_new(s, "why", json_string("metrics.jsonl has no stats record: run train with --stats-every N"));
	return s;
}

/* the ranks' step times: every rank's where the records carry them (by_rank),
 * else what they do carry: the slowest rank at the maximum, the others at the
 * median */
static json_t *ranks(const struct lmt_runview *v, size_t stride)
{
	json_t *o = json_object(), *ups = json_array(), *heat = json_array();
	int exact = 1;
	for (size_t i = 0; i < v->nupd; i++) {
		json_t *rk = json_object_get(v->upd[i], "ranks"), *st = json_object_get(rk, "step_s");
		if (!st || (i % stride && i + 1 != v->nupd))
			continue;
		json_t *by = json_object_get(st, "by_rank"), *row = json_array();
		if (json_is_array(by)) {
			for (size_t r = 0; r < json_array_size(by); r++)
				json_array_append_new(row, num_or_null(json_array_get(by, r), ""));
		} else {
			exact = 0;
			int slow = (int)lmt_jnum(st, "/slowest", -1);
			for (int r = 0; r < v->world; r++)
				json_array_append_new(row, num_or_null(st, r == slow ? "/max" : "/median"));
		}
		json_array_append_new(ups, json_integer((json_int_t)v->upd_n[i]));
		json_array_append_new(heat, row);
	}
	json_object_set_new(o, "world", json_integer(v->world));
	json_object_set_new(o, "updates", ups);
	json_object_set_new(o, "heat", heat);
	json_object_set_new(o, "note", json_string(exact ? "each rank's step time, as the update records carry it"
							 : "the records carry the slowest rank and the median: the "
							   "slowest rank is drawn at the maximum, the others at the median"));
	json_object_set_new(o, "why", json_string(v->world > 1 ? "the update records carry no per-rank times (ranks)"
								: "one rank: run on several ranks for per-rank step times"));
	return o;
}

/* the evaluated documents' entropy floor, from evalppl's results in RUN/eval */
static double eval_floor(const struct lmt_runview *v)
{
	char pat[PATH_MAX + 32];
	glob_t g;
	double floor_ = NAN;
	snprintf(pat, sizeof pat, "%s/eval/*.jsonl", v->run);
	if (glob(pat, 0, NULL, &g))
		return NAN;
	for (size_t i = 0; i < g.gl_pathc && !isfinite(floor_); i++) {
		FILE *f = fopen(g.gl_pathv[i], "r");
		char *line = NULL;
		size_t cap = 0;
		while (f && getline(&line, &cap, f) > 0 && !isfinite(floor_)) {
			json_error_t je;
			json_t *r = json_loads(line, 0, &je);
			floor_ = lmt_jnum(r, "/floor/nats_per_token", NAN);
			json_decref(r);
		}
		free(line);
		if (f)
			fclose(f);
	}
	globfree(&g);
	return floor_;
}

static json_t *explain_alert(struct lmt_runview *v, uint64_t n)
{
	json_t *e;
	struct lmt_err err = { 0 };
	if (lmt_explain(v, n, &e, &err))
		return NULL;
	json_t *o = json_object();
	json_object_set(o, "verdict", json_object_get(e, "verdict"));
	json_object_set(o, "confidence", json_object_get(e, "confidence"));
	json_object_set(o, "findings", json_object_get(e, "findings"));
	json_object_set(o, "checkpoint", lmt_jsonptr_get(e, "/checkpoint/path") ? lmt_jsonptr_get(e, "/checkpoint/path")
										  : json_null());
	json_decref(e);
	return o;
}

static json_t *data(struct lmt_runview *v, const struct lmt_dashboard_opts *o)
{
	size_t stride = v->nupd > LMT_DASHBOARD_MAX_POINTS ? (v->nupd + LMT_DASHBOARD_MAX_POINTS - 1) / LMT_DASHBOARD_MAX_POINTS : 1;
	json_t *D = json_object(), *evals = json_array(), *events = json_array(), *alerts = json_array();
	json_object_set_new(D, "run", json_string(v->run));
	json_object_set_new(D, "done", json_boolean(v->done));
	json_object_set_new(D, "updates", updates(v, stride));
	json_object_set_new(D, "stride", json_integer((json_int_t)stride));
	for (size_t i = 0; i < v->nrec; i++) {
		json_t *r = v->rec[i];
		if (is(r, "eval")) {
			json_t *p = json_array();
			json_array_append_new(p, json_integer((json_int_t)lmt_jnum(r, "/update", 0)));
			json_array_append_new(p, num_or_null(r, "/loss"));
			json_array_append_new(evals, p);
		} else if (is(r, "alert")) {
			json_t *a = json_object();
			uint64_t n = (uint64_t)lmt_jnum(r, "/update", 0);
			json_object_set_new(a, "update", json_integer((json_int_t)n));
			json_object_set(a, "kind", json_object_get(r, "kind") ? json_object_get(r, "kind") : json_null());
			json_object_set_new(a, "value", num_or_null(r, "/value"));
			json_object_set_new(a, "threshold", num_or_null(r, "/threshold"));
			json_object_set(a, "evidence", json_object_get(r, "evidence") ? json_object_get(r, "evidence") : json_null());
			json_t *x = o->explain ? explain_alert(v, n) : NULL;
			json_object_set_new(a, "explain", x ? x : json_null());
			json_array_append_new(alerts, a);
		}
	}
	for (size_t i = 0; i < v->nev; i++) {
		json_t *e = v->ev[i], *x = json_object();
		json_object_set_new(x, "update", json_integer((json_int_t)lmt_jnum(e, "/update", 0)));
		json_object_set(x, "event", json_object_get(e, "event") ? json_object_get(e, "event") : json_string("?"));
		json_object_set(x, "detail", json_object_get(e, "detail") ? json_object_get(e, "detail") : json_null());
		json_array_append_new(events, x);
	}
	json_object_set_new(D, "evals", evals);
	json_object_set_new(D, "events", events);
	if (!v->nev)
		json_object_set_new(D, "events_why", json_string("the run has no events.jsonl"));
	json_object_set_new(D, "alerts", alerts);
	json_object_set_new(D, "stats", stats(v));
	json_object_set_new(D, "ranks", ranks(v, stride));
	double fl = eval_floor(v);
	json_object_set_new(D, "unigram", isfinite(v->unigram) ? json_real(v->unigram) : json_null());
	json_object_set_new(D, "floor", isfinite(fl) ? json_real(fl) : json_null());
	char note[256];
	snprintf(note, sizeof note, "%s; %s",
		 isfinite(v->unigram) ? "unigram baseline: the dataset manifest's train split"
				      : "no unigram baseline: the dataset manifest is not found or has none",
		 isfinite(fl) ? "entropy floor: evalppl's results in RUN/eval"
			      : "no entropy floor: no evalppl result with a floor in RUN/eval");
	json_object_set_new(D, "baseline_note", json_string(note));
	json_object_set_new(D, "clip", json_real(v->clip));
	json_object_set_new(D, "ledger", json_real(v->ledger_total));
	json_object_set_new(D, "ledger_why", json_string("config.json is missing or does not describe the model"));
	return D;
}

static void put_esc(struct lmt_strbuf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': lmt_strbuf_puts(b, "&lt;"); break;
		case '>': lmt_strbuf_puts(b, "&gt;"); break;
		case '&': lmt_strbuf_puts(b, "&amp;"); break;
		case '"': lmt_strbuf_puts(b, "&quot;"); break;
		default: lmt_strbuf_putc(b, *s);
		}
	}
}

int lmt_dashboard_html(struct lmt_runview *v, const struct lmt_dashboard_opts *o, struct lmt_strbuf *b,
		       struct lmt_err *err)
{
	json_t *D = data(v, o);
	char *text = D ? json_dumps(D, JSON_COMPACT) : NULL;
	json_decref(D);
	if (!text)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	lmt_strbuf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
	/* nothing leaves the page: no network at all, scripts only inline */
	lmt_strbuf_puts(b, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
			   "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n");
	if (o->refresh_s > 0)
		lmt_strbuf_printf(b, "<meta http-equiv=\"refresh\" content=\"%d\">\n", o->refresh_s);
	lmt_strbuf_puts(b, "<title>lmt dashboard: ");
	put_esc(b, v->run);
	lmt_strbuf_printf(b, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>Run ", style);
	put_esc(b, v->run);
	lmt_strbuf_printf(b, "</h1>\n<p>%zu updates%s; %s. Clock: <select id=\"clock\"></select></p>\n", v->nupd,
			  v->done ? ", ended" : ", still running",
			  o->refresh_s > 0 ? "this page reloads itself while runcard --watch rewrites it"
					   : "written by runcard --dashboard");
	lmt_strbuf_puts(b, "<div id=\"selfcheck\" data-ok=\"0\" data-errors=\"0\">self-check did not run "
			   "(scripts disabled?)</div>\n<div class=\"grid\">\n");
	for (int i = 0; i < LMT_DASHBOARD_NPANELS; i++)
		lmt_strbuf_printf(b,
				  "<section class=\"panel\" id=\"%s\"><h2>%s</h2><div class=\"plot\"></div>"
				  "<p class=\"why\"></p></section>\n",
				  lmt_dashboard_panels[i], titles[i]);
	lmt_strbuf_puts(b, "</div>\n<script type=\"application/json\" id=\"lmt-data\">");
	/* '<' appears in JSON only inside strings, where \u003c means the same and
	 * cannot close the script element */
	for (const char *p = text; *p; p++)
		if (*p == '<')
			lmt_strbuf_puts(b, "\\u003c");
		else
			lmt_strbuf_putc(b, *p);
	free(text);
	lmt_strbuf_puts(b, "</script>\n<script>\n");
	for (int i = 0; script[i]; i++) {
		lmt_strbuf_puts(b, script[i]);
		lmt_strbuf_putc(b, '\n');
	}
	lmt_strbuf_puts(b, "</script>\n</body>\n</html>\n");
	return b->oom ? lmt_err_set(err, LMT_ENOMEM, "out of memory") : 0;
}
