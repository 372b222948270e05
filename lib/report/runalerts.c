/*
 * runalerts.c: the observations and the plan of train's alerts (runalerts.h).
 */
#include "report/runalerts.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "model/ledger.h"

int lmt_run_budget_read(const char *path, double *tokens, double *device_h, struct lmt_err *err)
{
	FILE *f = fopen(path, "r");
	char line[8192];
	int n = 0;
	if (!f)
		return lmt_err_set(err, LMT_EIO, "'%s': %s", path, strerror(errno));
	while (fgets(line, sizeof line, f)) {
		n++;
		json_error_t je;
		json_t *r = json_loads(line, 0, &je);
		if (!r) {
			fclose(f);
			return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: not JSON (%s)", path, n, je.text);
		}
		const char *ev = json_string_value(json_object_get(r, "event"));
		if (ev && !strcmp(ev, "budget")) {
			json_t *t = json_object_get(r, "target_tokens");
			json_t *h = json_object_get(json_object_get(r, "device_hours"), "total");
			int ok = json_is_number(t) && json_number_value(t) > 0 && json_is_number(h) &&
				 json_number_value(h) > 0;
			if (ok) {
				*tokens = json_number_value(t);
				*device_h = json_number_value(h);
			}
			json_decref(r);
			fclose(f);
			return ok ? 0
				  : lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: the budget record needs a positive "
						"target_tokens and device_hours.total", path, n);
		}
		json_decref(r);
	}
	fclose(f);
	return lmt_err_set(err, LMT_EFORMAT, "'%s': no \"budget\" record (the output of memledger --budget)", path);
}

void lmt_run_alert_plan(struct lmt_alert_plan *p, const struct lmt_trainer *tr, uint64_t ckpt_every,
			double ckpt_minutes, double mem_limit, double budget_tokens, double budget_device_h)
{
	const struct lmt_gpt *g = tr->g;
	struct lmt_ledger_cfg c = { g->cfg, tr->cfg.B, tr->T, g->dtype, tr->cfg.recompute_every, tr->comm->world,
				    tr->cfg.zero, 1, 1, 1, (int)(tr->cfg.stats_every > 0) };
	struct lmt_ledger l;
	memset(p, 0, sizeof *p);
	p->mem_limit = mem_limit;
	/* a configuration the ledger cannot build is no prediction, not an error */
	if (!lmt_ledger_build(&c, &l, NULL))
		p->mem_predicted = (double)l.total;
	p->ckpt_every = ckpt_every;
	p->ckpt_interval_s = ckpt_every ? 0 : ckpt_minutes * 60;
	p->updates = tr->cfg.updates;
	p->budget_tokens = budget_tokens;
	p->budget_device_h = budget_device_h;
	p->devices = tr->comm->world;
}

void lmt_run_alert_obs(struct lmt_alert_obs *o, const struct lmt_trainer *tr, const struct lmt_step_stats *st,
		       double data_wait, double wall)
{
	double busy = st->t_total - st->t_comm - data_wait;
	*o = (struct lmt_alert_obs){ .update = st->update, .loss = st->loss, .grad_norm = st->grad_norm,
				     .clipped = st->clipped, .overflow = st->overflow,
				     .nonfinite = st->nonfinite_what != NULL, .data_wait = data_wait,
				     .step = st->t_total, .busy_max = busy, .busy_median = busy,
				     .slowest = tr->comm->rank, .ranks = tr->comm->world, .comm = st->t_comm,
				     .mem_peak = (double)tr->be->mem_peak, .wall = wall, .tokens = tr->tokens };
}
