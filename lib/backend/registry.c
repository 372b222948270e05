/*
 * registry.c: backends by name. Tools and tests get a backend here
 * (lmt_backend_open) and never call a backend's own init, so adding the cuda
 * backend changes this table, not the tools.
 *
 * The names this build has, and what CUDA says, are in names.c: every tool's
 * --version prints them, and only the tools that open a backend should link the
 * backends (and load oneDNN).
 */
#include "backend/backend.h"

#include <string.h>

#include "backend/impl.h"

static const struct {
	const char *name;
	int (*init)(struct lmt_backend *be, int threads, struct lmt_err *err);
} backends[] = {
	{ "cpu", lmt_backend_cpu_init },
#ifdef LMT_HAVE_CUDA
	{ "cuda", lmt_backend_cuda_init },
#endif
};

int lmt_backend_open(struct lmt_backend *be, const char *name, int threads, struct lmt_err *err)
{
	if (!name)
		name = "cpu";
	for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
		if (!strcmp(backends[i].name, name))
			return backends[i].init(be, threads, err);
	return lmt_err_set(err, LMT_EINVAL, "unknown backend '%s' (this build has: %s)", name, lmt_backend_names());
}
