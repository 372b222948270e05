/*
 * train/display.c: train's records as lines for people, what stdout shows on a
 * terminal (train.h); the run's metrics hold the same records as JSONL.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tool.h"
#include "train.h"

static void clock_str(char *buf, size_t cap, double s)
{
	long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
	if (t >= 3600)
		snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* nanoGPT's compact update line, validation and samples as they happen,
 * checkpoints on their own line. */
void train_show(const struct lmt_json *j, uint64_t updates)
{
	json_t *r = json_loadb(j->out.buf, j->out.len, 0, NULL);
	const char *ev = json_string_value(json_object_get(r, "event"));
	double uf = num(r, "update");
	unsigned long long u = isfinite(uf) && uf >= 0 ? (unsigned long long)uf : 0; /* NaN: no update field */
	char a[32], b[32];
	if (!ev) {
	} else if (!strcmp(ev, "update")) {
		double wall = num(json_object_get(r, "clocks"), "wall_s");
		double step = num(json_object_get(r, "time"), "step");
		clock_str(a, sizeof a, wall);
		clock_str(b, sizeof b, step * (double)(updates > u ? updates - u : 0));
		printf("update %5llu/%llu | loss %.4f | lr %.2e | norm %6.3f%s | %7.0f tok/s | mfu %5.1f%% | %s, eta %s\n",
		       u, (unsigned long long)updates, num(r, "loss"), num(r, "lr"), num(r, "grad_norm"),
		       json_is_true(json_object_get(r, "clipped")) ? "*" : " ", num(r, "tokens_per_s"),
		       100 * num(r, "mfu"), a, b);
	} else if (!strcmp(ev, "eval")) {
		printf("update %5llu: val loss %.4f (train's estimate: %.0f sequences of the val split; evalppl "
		       "scores all of it)\n", u, num(r, "loss"), num(r, "sequences"));
	} else if (!strcmp(ev, "sample")) {
		const char *t = json_string_value(json_object_get(r, "text"));
		printf("update %5llu: sample: %s\n", u, t ? t : "(ids only: no tokenizer)");
	} else if (!strcmp(ev, "alert") || !strcmp(ev, "alert-cleared")) {
		printf("update %5llu: %s %s: %s\n", u, ev, json_string_value(json_object_get(r, "kind")),
		       json_string_value(json_object_get(r, "evidence")));
	} else if (!strcmp(ev, "checkpoint")) {
		printf("checkpoint  %s (%.1f MB, %.2f s%s)\n", json_string_value(json_object_get(r, "path")),
		       num(r, "bytes") / 1e6, num(r, "write_s"), json_is_true(json_object_get(r, "async")) ? ", async" : "");
	} else if (!strcmp(ev, "summary")) {
		clock_str(a, sizeof a, num(r, "wall_s"));
		double tps = num(r, "tokens_per_s");
		if (isnan(tps))
			printf("done: nothing to do (the run was already at update %llu)\n",
			       (unsigned long long)num(r, "updates"));
		else
			printf("%s: %llu updates, %.0f tokens in %s (%.0f tok/s)\n", json_string_value(json_object_get(r, "status")),
			       (unsigned long long)num(r, "updates"), num(r, "tokens"), a, tps);
	}
	json_decref(r);
	if (fflush(stdout))
		die_write("<stdout>");
}
