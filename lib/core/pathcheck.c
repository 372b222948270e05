/*
 * pathcheck.c: outputs compared with inputs by device and inode (pathcheck.h).
 */
#include "core/pathcheck.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The chain of (dev, ino) from path (or its nearest existing ancestor) up to "/". */
struct chain {
	dev_t dev[256];
	ino_t ino[256];
	int n;
	int exact; /* chain[0] is path itself, not an ancestor standing in for it */
};

static void chain_of(const char *path, struct chain *c)
{
	char buf[PATH_MAX], real[PATH_MAX];
	c->n = 0;
	c->exact = 1;
	if (strlen(path) >= sizeof buf)
		return;
	strcpy(buf, path);
	/* an output that does not exist yet stands for the nearest ancestor that does */
	while (!realpath(buf, real)) {
		char *slash = strrchr(buf, '/');
		c->exact = 0;
		if (!slash) {
			if (!realpath(".", real))
				return;
			break;
		}
		if (slash == buf) {
			strcpy(real, "/");
			break;
		}
		*slash = 0;
	}
	/* real is absolute and free of symlinks, so its textual parents are the real ones */
	for (;;) {
		struct stat st;
		if (c->n >= (int)(sizeof c->dev / sizeof c->dev[0]) || stat(real, &st))
			return;
		c->dev[c->n] = st.st_dev;
		c->ino[c->n] = st.st_ino;
		c->n++;
		char *slash = strrchr(real, '/');
		if (!strcmp(real, "/") || !slash)
			return;
		if (slash == real)
			real[1] = 0;
		else
			*slash = 0;
	}
}

/* Does chain `inner` pass through the file `outer` names (chain[0] of outer)? An
 * inner chain that starts at a stand-in ancestor still lies inside outer when that
 * ancestor is outer or inside it. */
static int inside(const struct chain *inner, const struct chain *outer)
{
	if (!outer->n || !outer->exact)
		return 0;
	for (int i = 0; i < inner->n; i++)
		if (inner->dev[i] == outer->dev[0] && inner->ino[i] == outer->ino[0])
			return 1;
	return 0;
}

static int relation(const char *a, const char *b)
{
	struct chain ca, cb; /* 4 KiB each */
	chain_of(a, &ca);
	chain_of(b, &cb);
	if (!ca.n || !cb.n)
		return 0;
	if (ca.exact && cb.exact && ca.dev[0] == cb.dev[0] && ca.ino[0] == cb.ino[0])
		return 1; /* the same file */
	if (inside(&ca, &cb))
		return 2; /* a lies inside b */
	if (inside(&cb, &ca))
		return 3; /* a contains b */
	return 0;
}

int lmt_path_overlap(const char *a, const char *b)
{
	return relation(a, b) != 0;
}

int lmt_path_check_output(const char *output, const char *what, const char *const *inputs, int n,
			  struct lmt_err *err)
{
	static const char *const says[] = { "", "is the input", "lies inside the input", "contains the input" };
	for (int i = 0; i < n; i++) {
		if (!inputs[i])
			continue;
		int r = relation(output, inputs[i]);
		if (r)
			return lmt_err_set(err, LMT_EINVAL, "'%s' (%s) %s '%s': not writing over an input", output,
					   what, says[r], inputs[i]);
	}
	return 0;
}
