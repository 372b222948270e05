/*
 * test-session.c: the training session (model/session.h) run as a library: its
 * records reach the record callback and nothing reaches stdout, a stopped run and
 * its resume adopt the recorded options through the adopt callback, and errors
 * come back as codes with the message, the options' errors marked as such. The
 * dataset is made with the tools in LMT_BIN (build/bin).
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/session.h"
#include "tap.h"

static char dir[] = "/tmp/lmt-test-session.XXXXXX";
static const char *bin;

/* What the callbacks saw. */
struct seen {
	int records, bad_records, updates, evals, samples, checkpoints, summaries, resumes, steps, adopted;
	int infos, warnings;
	char last_status[32];
	char notices[4096];
};

static void on_record(void *ctx, const struct lmt_json *j)
{
	struct seen *s = ctx;
	s->records++;
	/* closed and newline-terminated, one JSON object */
	json_t *r = j->out.len && j->out.buf[j->out.len - 1] == '\n' ? json_loadb(j->out.buf, j->out.len, 0, NULL) : NULL;
	const char *ev = json_string_value(json_object_get(r, "event"));
	if (!ev)
		s->bad_records++;
	else if (!strcmp(ev, "update"))
		s->updates++;
	else if (!strcmp(ev, "eval"))
		s->evals++;
	else if (!strcmp(ev, "sample"))
		s->samples++;
	else if (!strcmp(ev, "checkpoint"))
		s->checkpoints++;
	else if (!strcmp(ev, "resume"))
		s->resumes++;
	else if (!strcmp(ev, "summary")) {
		s->summaries++;
		snprintf(s->last_status, sizeof s->last_status, "%s", json_string_value(json_object_get(r, "status")));
	}
	json_decref(r);
}

static void on_notice(void *ctx, int level, const char *msg)
{
	struct seen *s = ctx;
	if (level == LMT_SESSION_WARN)
		s->warnings++;
	else
		s->infos++;
	size_t n = strlen(s->notices);
	snprintf(s->notices + n, sizeof s->notices - n, "%s\n", msg);
}

static void on_step(void *ctx, const struct lmt_step_stats *st)
{
	((struct seen *)ctx)->steps++;
}

static void on_adopt(void *ctx, const char *opt, const char *value)
{
	((struct seen *)ctx)->adopted++;
}

static int same(void *ctx, const char *opt, const char *a, const char *b)
{
	return !strcmp(a, b);
}

static struct lmt_session_cfg base_cfg(const char *data)
{
	struct lmt_session_cfg c;
	memset(&c, 0, sizeof c);
	c.data = data;
	c.model = (struct lmt_gpt_config){ 0, 0, 0, 2, 2, 32, 0 };
	c.tc = (struct lmt_train_cfg){ 4, 1, 0, 1, 4, 1e-3, 0.1, 0, LMT_SCHED_COSINE, 0.9, 0.95, 1e-8, 0.1, 0,
				       1.0, LMT_NONFINITE_STOP, 1, 8192, LMT_DTYPE_F32, 0, 65536, 2000, 25 << 20, 0, 0, 0 };
	lmt_alert_cfg_default(&c.alert);
	c.alert.starve_frac = 0; /* timing alerts off: the machine's, not the test's */
	c.alert.skew = 0;
	c.eval_every = 2;
	c.eval_seqs = 4;
	c.sample_every = 2;
	c.sample_tokens = 4;
	c.top_k = 10;
	c.temperature = 1;
	c.keep = 3;
	c.peak = 1e12;
	c.init_seed = 1;
	c.precision = "fp32";
	return c;
}

/* Every phase of a session on cfg; returns the first failing phase's code. */
static int run_session(struct lmt_session *s, struct lmt_session_cfg *cfg, struct seen *seen, struct lmt_err *err)
{
	const struct lmt_session_cb cb = { seen, on_record, on_notice, on_step, on_adopt, same };
	int rc;
	if ((rc = lmt_session_connect(s, cfg, &cb, NULL, err)) || (rc = lmt_session_claim(s, NULL, 0, err)) ||
	    (rc = lmt_session_open(s, 1, err)) < 0 || (rc = lmt_session_start(s, err)) || (rc = lmt_session_begin(s, err)) ||
	    (rc = lmt_session_train(s, err)) || (rc = lmt_session_finish(s, err)))
		return rc;
	return 0;
}

/* Bytes in file path (-1: none). */
static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) ? -1 : (long)st.st_size;
}

static int file_has(const char *path, const char *text)
{
	char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	return strstr(buf, text) != NULL;
}

int main(void)
{
	char data[600], path[700], run[600];
	bin = getenv("LMT_BIN") ? getenv("LMT_BIN") : "build/bin";
	if (!mkdtemp(dir)) {
		tap_ok(0, "temporary directory");
		return 1;
	}
	snprintf(data, sizeof data, "%s/d", dir);
	char cmd[4096];
	snprintf(cmd, sizeof cmd,
		 "B='%s' D='%s' && \"$B/gen-corpus\" -q --docs 200 --seed 7 -o \"$D/c.jsonl\" > /dev/null && "
		 "\"$B/tok-train\" -q -v 300 -o \"$D/t.lmtok\" \"$D/c.jsonl\" > /dev/null && "
		 "\"$B/tok-encode\" -q -t \"$D/t.lmtok\" -o \"$D/s.lmtoks\" \"$D/c.jsonl\" > /dev/null && "
		 "\"$B/shard-pack\" -q -L 32 --split val=0.1 -o \"$D/d\" \"$D/s.lmtoks\" > /dev/null",
		 bin, dir);
	int rc = system(cmd);
	if (!tap_ok(rc == 0, "made a dataset with the tools in %s (%s)", bin, cmd)) {
		printf("1..%d\n", tap_n);
		return 1;
	}

	/* ---- no run directory: records to the callback, nothing on stdout ---- */
	snprintf(path, sizeof path, "%s/stdout", dir);
	fflush(stdout);
	int saved = dup(STDOUT_FILENO), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	struct lmt_session s;
	struct lmt_err err = { 0 };
	struct seen a = { 0 };
	struct lmt_session_cfg ca = base_cfg(data);
	ca.no_save = 1;
	rc = run_session(&s, &ca, &a, &err);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	tap_ok(rc == 0 && s.status == 0 && !s.interrupted, "a session without a run directory trains to its end (%s)",
	       err.msg);
	tap_ok(a.updates == 4 && a.steps == 4, "an update record and a step callback per update (%d, %d)", a.updates,
	       a.steps);
	tap_ok(a.evals == 2 && a.samples == 2, "evaluations and samples every 2 updates (%d, %d)", a.evals, a.samples);
	tap_ok(a.summaries == 1 && !strcmp(a.last_status, "done"), "one summary, status done (%d, '%s')", a.summaries,
	       a.last_status);
	tap_ok(a.bad_records == 0, "every record is one closed JSON line with an event (%d bad of %d)", a.bad_records,
	       a.records);
	tap_ok(file_size(path) == 0, "the library wrote nothing to stdout (%ld bytes)", file_size(path));
	tap_ok(strstr(a.notices, "precision fp32") && strstr(a.notices, "4 updates, "),
	       "progress lines go to the notice callback");
	if (!rc)
		lmt_session_release(&s);

	/* ---- a run stopped at update 2, then resumed ---- */
	snprintf(run, sizeof run, "%s/run", dir);
	struct seen b = { 0 }, c = { 0 };
	struct lmt_session_cfg cb = base_cfg(data);
	cb.out = run;
	cb.ckpt_every = 2;
	cb.stop_at = 2;
	rc = run_session(&s, &cb, &b, &err);
	tap_ok(rc == 0 && s.interrupted == -1 && s.tr.update == 2, "--stop-at 2: the session stops after update 2 (%s)",
	       err.msg);
	tap_ok(b.checkpoints == 1 && !strcmp(b.last_status, "interrupted"), "its checkpoint and an interrupted summary");
	if (!rc)
		lmt_session_release(&s);
	struct lmt_session_cfg cc = base_cfg(data);
	cc.out = run;
	cc.resume = "auto";
	cc.resume_auto = 1;
	rc = run_session(&s, &cc, &c, &err);
	tap_ok(rc == 0 && s.status == 0 && s.tr.update == 4, "the resume trains updates 3 and 4 (%s)", err.msg);
	tap_ok(c.resumes == 1 && c.updates == 2, "a resume record, then 2 update records (%d, %d)", c.resumes, c.updates);
	tap_ok(c.adopted > 0, "the run's recorded options go to the adopt callback (%d)", c.adopted);
	if (!rc)
		lmt_session_release(&s);
	snprintf(path, sizeof path, "%s/events.jsonl", run);
	tap_ok(file_has(path, "\"event\":\"resume\"") && file_has(path, "\"event\":\"end\""),
	       "the run's events hold the resume and the end");

	/* ---- errors come back, the options' marked as usage errors ---- */
	struct seen d = { 0 };
	struct lmt_session_cfg cd = base_cfg(data);
	cd.no_save = 1;
	cd.context = 8;
	rc = run_session(&s, &cd, &d, &err);
	tap_ok(rc < 0 && !s.usage && strstr(err.msg, "longer than the model's context of 8"),
	       "a context shorter than the sequences: an error naming it, not a usage error (%s)", err.msg);
	struct lmt_session_cfg ce = base_cfg(data);
	snprintf(run, sizeof run, "%s/run-e", dir);
	ce.out = run;
	ce.precision = NULL;
	ce.precision_env = "fp8";
	rc = run_session(&s, &ce, &d, &err);
	tap_ok(rc == LMT_EINVAL && s.usage && s.msg && !strcmp(s.msg, "LMT_PRECISION: 'fp8' is not fp32, bf16, fp16 or auto"),
	       "a bad precision is a usage error, its whole message in msg (%s)", err.msg);
	/* what train's exit handler does: a run refused before it began is left as
	 * it was found, here none, so the directory its lock made goes */
	lmt_session_halt(&s);
	tap_ok(lmt_session_mark_failed(&s, &err) == 0, "the refused run is cleaned up");
	lmt_run_close(&s.run);
	tap_ok(access(run, F_OK) != 0, "no run directory is left behind (it held its lock alone)");

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		tap_diag("'%s' not removed", dir);
	printf("1..%d\n", tap_n);
	return tap_fail ? 1 : 0;
}
