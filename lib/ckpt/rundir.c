/*
 * rundir.c: default run directories and PARENT/latest; see rundir.h.
 *
 * mkdir is the arbiter of a name, never a test for existence followed by a
 * create: between the two another run could take it.
 */
#include "ckpt/rundir.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"

/* mkdir -p dir */
static int make_parents(const char *dir, struct lmt_err *err)
{
	char p[PATH_MAX];
	int rc = lmt_path_fmt(p, sizeof p, err, "%s", dir);
	if (rc)
		return rc;
	for (char *s = p + 1;; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = 0;
		struct stat st;
		if (mkdir(p, 0755) && errno != EEXIST)
			return lmt_err_errno(err, "'%s'", p);
		if (stat(p, &st))
			return lmt_err_errno(err, "'%s'", p);
		if (!S_ISDIR(st.st_mode))
			return lmt_err_set(err, LMT_EINVAL, "'%s' is not a directory", p);
		if (!(*s = c))
			return 0;
	}
}

int lmt_rundir_new(const char *parent, time_t t, const char *tag, char *out, size_t cap, struct lmt_err *err)
{
	char stamp[32];
	struct tm tm;
	int rc;
	if (!*tag || strspn(tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") != strlen(tag))
		return lmt_err_set(err, LMT_EINVAL, "'%s': a run name's tag is letters, digits, '-', '.' and '_'", tag);
	if (!localtime_r(&t, &tm) || !strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm))
		return lmt_err_set(err, LMT_EINVAL, "the time %lld has no date", (long long)t);
	if ((rc = make_parents(parent, err)))
		return rc;
	/* a name taken by a file (not only a directory) counts as taken too */
	for (unsigned n = 1; n < 10000; n++) {
		if ((rc = n == 1 ? lmt_path_fmt(out, cap, err, "%s/%s-%s", parent, stamp, tag)
				 : lmt_path_fmt(out, cap, err, "%s/%s-%s-%u", parent, stamp, tag, n)))
			return rc;
		if (mkdir(out, 0755) == 0)
			return 0;
		if (errno != EEXIST)
			return lmt_err_errno(err, "'%s'", out);
	}
	return lmt_err_set(err, LMT_EIO, "'%s/%s-%s': 9999 runs of that name already", parent, stamp, tag);
}

int lmt_rundir_link_latest(const char *parent, const char *name, struct lmt_err *err)
{
	char tmp[PATH_MAX], latest[PATH_MAX];
	int rc = lmt_path_fmt(tmp, sizeof tmp, err, "%s/.latest-%ld", parent, (long)getpid());
	if (rc || (rc = lmt_path_fmt(latest, sizeof latest, err, "%s/latest", parent)))
		return rc;
	(void)unlink(tmp); /* a crashed process's, whose PID this one now has */
	if (symlink(name, tmp))
		return lmt_err_errno(err, "'%s'", tmp);
	/* rename(2) replaces a link but not a directory: a real PARENT/latest stays */
	if (rename(tmp, latest)) {
		rc = lmt_err_errno(err, "'%s'", latest);
		(void)unlink(tmp);
		return rc;
	}
	return 0;
}
