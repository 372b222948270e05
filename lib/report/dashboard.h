/*
 * dashboard.h: a training run as one self-contained HTML page.
 *
 * The page holds the run's series as a JSON block and a script that draws them
 * as inline SVG: nothing is fetched (no network, no external script or style),
 * so it reads the same from a file:// URL as from a web server. Its panels (each
 * a <section class="panel"> with the id below) are the loss against any of the
 * four clocks (updates, wall time, valid tokens, device-hours; a selector on the
 * page switches them all, and #clock=wall|tokens|device_h in the URL opens the
 * page on one), with the validation losses, the unigram baseline and
 * the entropy floor where the run's files know them; the learning rate; the
 * gradient norm with the clip threshold and the clipped updates; the units'
 * gradient norms as a heat map and the update-to-parameter ratios (train
 * --stats-every); throughput and MFU; the data wait; the ranks' step times as a
 * rank x update heat map; the communication time; memory against memledger's
 * prediction; checkpoints, resumes and stops; and the alerts on a timeline,
 * each with its explanation (explain.h).
 *
 *	p-loss p-lr p-gnorm p-layers p-ratio p-throughput p-wait p-ranks p-comm
 *	p-memory p-events p-alerts
 *
 * A panel whose data the run lacks says why ("no data: run train with
 * --stats-every"). The page checks itself once drawn: every panel has data or a
 * reason, and no script error was raised; the verdict is the element
 * id="selfcheck", with data-ok="1" (or "0"), data-errors (the count) and
 * data-panels, so that a headless browser's DOM dump shows it.
 */
#ifndef LMT_DASHBOARD_H
#define LMT_DASHBOARD_H

#include "core/error.h"
#include "core/strbuf.h"
#include "report/runview.h"

#define LMT_DASHBOARD_NPANELS 12
extern const char *const lmt_dashboard_panels[LMT_DASHBOARD_NPANELS];

/* More series points than this are thinned to every k-th update (alerts and
 * events keep their own updates), so that a long run's page stays small. */
#define LMT_DASHBOARD_MAX_POINTS 4000

struct lmt_dashboard_opts {
	int refresh_s;           /* > 0: the page reloads itself every refresh_s seconds (--watch) */
	int explain;             /* explain each alert (reads the dataset when samples were logged) */
};

/* The page of v into out (appended). LMT_ENOMEM, or an explanation's error. */
int lmt_dashboard_html(struct lmt_runview *v, const struct lmt_dashboard_opts *o, struct lmt_strbuf *out,
		       struct lmt_err *err);

#endif
