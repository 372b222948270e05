/*
 * runranks.c: what a run of several ranks gathers (runranks.h).
 */
#include "ckpt/runranks.h"

#include <stdlib.h>
#include <string.h>

#include "core/digest.h"

#define RANKS_LISTED 64

/* The median of n values (sorted in place). */
static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
			double t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int lmt_run_rank_times(struct lmt_json *j, struct lmt_comm *comm, const struct lmt_step_stats *st, double data_wait,
		       double *skew, int *slowest_step, struct lmt_err *err)
{
	int W = comm->world;
	double mine[3] = { st->t_total, data_wait, st->t_comm };
	double *all = malloc((size_t)W * 3 * sizeof *all), *v = malloc((size_t)W * sizeof *v);
	int rc = !all || !v ? lmt_err_set(err, LMT_ENOMEM, "out of memory")
			    : comm->allgather(comm, mine, all, sizeof mine, err);
	if (rc) {
		free(all);
		free(v);
		return rc;
	}
	static const char *const names[3] = { "step_s", "data_wait_s", "comm_s" };
	*skew = 0;
	*slowest_step = 0;
	lmt_json_obj(j, "ranks");
	for (int k = 0; k < 3; k++) {
		int slowest = 0;
		for (int r = 0; r < W; r++) {
			v[r] = all[r * 3 + k];
			if (v[r] > all[slowest * 3 + k])
				slowest = r;
		}
		double mx = all[slowest * 3 + k];
		lmt_json_obj(j, names[k]);
		/* each rank's value, for the dashboard's rank x update heat map (up to
		 * RANKS_LISTED ranks: beyond, the line would outweigh the record) */
		if (W <= RANKS_LISTED) {
			lmt_json_arr(j, "by_rank");
			for (int r = 0; r < W; r++)
				lmt_json_num(j, NULL, v[r]);
			lmt_json_arr_end(j);
		}
		double med = median(v, W);
		lmt_json_num(j, "min", v[0]);
		lmt_json_num(j, "median", med);
		lmt_json_num(j, "max", mx);
		lmt_json_u64(j, "slowest", (uint64_t)slowest);
		lmt_json_obj_end(j);
		if (k == 0) {
			*skew = med > 0 ? mx / med - 1 : 0;
			*slowest_step = slowest;
		}
	}
	lmt_json_num(j, "skew", *skew);
	lmt_json_obj_end(j);
	free(all);
	free(v);
	return 0;
}

int lmt_run_audit_record(struct lmt_json *j, struct lmt_comm *comm, const struct lmt_trainer *tr, uint64_t update,
			 struct lmt_err *err)
{
	int n = tr->cfg.B * tr->cfg.accum, W = comm->world;
	uint64_t *mine = malloc((size_t)n * 2 * sizeof *mine), *all = malloc((size_t)W * n * 2 * sizeof *all);
	int rc = 0;
	if (!mine || !all) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		mine[2 * i] = tr->samples[i].shard;
		mine[2 * i + 1] = tr->samples[i].index;
	}
	if ((rc = comm->allgather(comm, mine, all, (size_t)n * 2 * sizeof *mine, err)))
		goto out;
	lmt_json_begin(j);
	lmt_json_str(j, "event", "audit");
	lmt_json_u64(j, "update", update);
	lmt_json_arr(j, "ranks");
	for (int r = 0; r < W; r++) {
		lmt_json_arr(j, NULL);
		for (int i = 0; i < n; i++) {
			lmt_json_arr(j, NULL);
			lmt_json_u64(j, NULL, all[((size_t)r * n + i) * 2]);
			lmt_json_u64(j, NULL, all[((size_t)r * n + i) * 2 + 1]);
			lmt_json_arr_end(j);
		}
		lmt_json_arr_end(j);
	}
	lmt_json_arr_end(j);
out:
	free(mine);
	free(all);
	return rc;
}

int lmt_run_ranks_agree(struct lmt_comm *comm, const char *text, struct lmt_err *err)
{
	uint8_t mine[LMT_SHA256_LEN];
	lmt_sha256(text, strlen(text), mine);
	uint8_t *all = malloc((size_t)comm->world * LMT_SHA256_LEN);
	if (!all)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	int rc = comm->allgather(comm, mine, all, LMT_SHA256_LEN, err);
	for (int r = 1; !rc && r < comm->world; r++)
		if (memcmp(all, all + (size_t)r * LMT_SHA256_LEN, LMT_SHA256_LEN))
			rc = lmt_err_set(err, LMT_EINVAL,
					 "rank %d of %d trains another run than rank 0 (its dataset, model, optimisation, "
					 "seed or precision differ)", r, comm->world);
	free(all);
	return rc;
}
