/*
 * test-pathcheck: outputs compared with inputs by device and inode
 * (lib/core/pathcheck.h), through every spelling that names the same file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core/pathcheck.h"
#include "tap.h"

static char dir[] = "/tmp/lmt-test-pathcheck.XXXXXX";

static const char *P(const char *rel)
{
	static char buf[64][512];
	static int k;
	k = (k + 1) % 64;
	snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
	return buf[k];
}

static void touch(const char *p)
{
	FILE *f = fopen(p, "w");
	if (f)
		fclose(f);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	mkdir(P("in"), 0777);
	mkdir(P("in/sub"), 0777);
	touch(P("in/file"));
	mkdir(P("inside"), 0777); /* a sibling whose name starts with the input's */
	touch(P("other"));
	if (link(P("other"), P("other-hardlink")) || symlink(P("in"), P("in-link")))
		return 1;

	struct {
		const char *a, *b;
		int want;
		const char *what;
	} cases[] = {
		{ P("in"), P("in"), 1, "a directory is itself" },
		{ P("in/file"), P("in/file"), 1, "a file is itself" },
		{ P("other-hardlink"), P("other"), 1, "a hard link is the same file" },
		{ P("in/file"), P("in"), 1, "a file lies inside its directory" },
		{ P("in/sub/new/deeper"), P("in"), 1, "a path that does not exist yet, below the input" },
		{ P("in-link/new"), P("in"), 1, "a new file through a symlink to the input" },
		{ P("in/sub/../file"), P("in/file"), 1, "a spelling with .. " },
		{ dir, P("in/file"), 1, "a directory that contains the input" },
		{ P("inside/x"), P("in"), 0, "a sibling with a common prefix is not inside" },
		{ P("other"), P("in"), 0, "an unrelated file" },
		{ P("new-file"), P("in"), 0, "a new file beside the input" },
		{ P("in"), P("does-not-exist"), 0, "an input that does not exist overlaps nothing" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		int got = lmt_path_overlap(cases[i].a, cases[i].b);
		tap_ok(got == cases[i].want, "%s: overlap('%s', '%s') = %d", cases[i].what, cases[i].a + strlen(dir),
		       cases[i].b + strlen(dir), got);
	}

	struct lmt_err err = { 0 };
	const char *inputs[] = { P("other"), NULL, P("in") };
	int rc = lmt_path_check_output(P("in-link/manifest.json"), "--export", inputs, 3, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "in-link/manifest.json' (--export) lies inside the input") &&
		       strstr(err.msg, "not writing over an input"),
	       "the refusal names the output, the option, the relation and the input: %s", err.msg);
	memset(&err, 0, sizeof err);
	rc = lmt_path_check_output(P("other-hardlink"), "-o", inputs, 3, &err);
	tap_ok(rc == LMT_EINVAL && strstr(err.msg, "is the input"), "a hard link to an input is the input: %s", err.msg);
	tap_ok(lmt_path_check_output(P("out/x"), "-o", inputs, 3, &err) == 0, "an output apart from every input passes");

	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		tap_diag("could not remove %s", dir);
	return tap_done();
}
