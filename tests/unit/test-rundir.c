/*
 * test-rundir: default run directories (lib/ckpt/rundir.h): the name from the
 * time and the tag, a taken name never reused (also one taken by a file), the
 * parents made, and PARENT/latest replaced, relative, never left missing.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/rundir.h"
#include "tap.h"

static char dir[] = "/tmp/lmt-test-rundir.XXXXXX";

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	setenv("TZ", "UTC", 1);
	tzset();
	time_t t = 1795962301; /* 2026-11-29 14:25:01 UTC */
	char parent[256], a[512], b[512], c[512], link[512], want[PATH_MAX], got[PATH_MAX];
	struct lmt_err err = { 0 };
	snprintf(parent, sizeof parent, "%s/deep/runs", dir);

	int rc = lmt_rundir_new(parent, t, "d4-h4-c256", a, sizeof a, &err);
	snprintf(want, sizeof want, "%s/20261129-142501-d4-h4-c256", parent);
	tap_ok(rc == 0 && !strcmp(a, want) && is_dir(a), "the name is PARENT/STAMP-TAG, made with its parents (%s)",
	       rc ? err.msg : a);
	rc = lmt_rundir_new(parent, t, "d4-h4-c256", b, sizeof b, &err);
	snprintf(want, sizeof want, "%s/20261129-142501-d4-h4-c256-2", parent);
	tap_ok(rc == 0 && !strcmp(b, want) && is_dir(b), "the same second again: -2, the first left alone (%s)",
	       rc ? err.msg : b);
	/* a file on the next name counts as taken */
	snprintf(want, sizeof want, "%s/20261129-142501-d4-h4-c256-3", parent);
	FILE *f = fopen(want, "w");
	if (f)
		fclose(f);
	rc = lmt_rundir_new(parent, t, "d4-h4-c256", c, sizeof c, &err);
	snprintf(want, sizeof want, "%s/20261129-142501-d4-h4-c256-4", parent);
	tap_ok(rc == 0 && !strcmp(c, want), "a name a file holds is skipped (%s)", rc ? err.msg : c);

	rc = lmt_rundir_new(parent, t, "a/b", c, sizeof c, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "'a/b'"), "a tag with a slash is refused (%s)", err.msg);
	snprintf(want, sizeof want, "%s/file", dir);
	f = fopen(want, "w");
	if (f)
		fclose(f);
	snprintf(want, sizeof want, "%s/file/runs", dir);
	rc = lmt_rundir_new(want, t, "x", c, sizeof c, &err);
	tap_ok(rc < 0 && strstr(err.msg, "/file'"), "a parent that is a file is refused, naming it (%s)", err.msg);

	snprintf(link, sizeof link, "%s/latest", parent);
	rc = lmt_rundir_link_latest(parent, strrchr(a, '/') + 1, &err);
	ssize_t n = readlink(link, got, sizeof got - 1);
	got[n > 0 ? n : 0] = 0;
	tap_ok(rc == 0 && !strcmp(got, strrchr(a, '/') + 1), "latest links to the run, by its name only (%s)",
	       rc ? err.msg : got);
	rc = lmt_rundir_link_latest(parent, strrchr(b, '/') + 1, &err);
	n = readlink(link, got, sizeof got - 1);
	got[n > 0 ? n : 0] = 0;
	snprintf(want, sizeof want, "%s/lock", link);
	f = fopen(want, "w"); /* through the link: into run b */
	if (f)
		fclose(f);
	snprintf(want, sizeof want, "%s/lock", b);
	tap_ok(rc == 0 && !strcmp(got, strrchr(b, '/') + 1) && access(want, F_OK) == 0,
	       "latest replaced by the newer run, and a path through it lands there (%s)", rc ? err.msg : got);
	snprintf(want, sizeof want, "%s/.latest-%ld", parent, (long)getpid());
	tap_ok(access(want, F_OK) && errno == ENOENT, "no temporary link left behind");

	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		tap_diag("could not remove %s", dir);
	return tap_done();
}
