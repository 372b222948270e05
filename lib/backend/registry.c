/*
 * registry.c: backends by name. Tools and tests get a backend here
 * (lmt_backend_open) and never call a backend's own init, so adding the cuda
 * backend changes this table, not the tools.
 *
 * CUDA device discovery lives here too: kernels/device.cu answers how many devices
 * the runtime sees, and any CUDA error (error 35 without a driver) counts as none.
 */
#include "backend/backend.h"

#include <stdio.h>
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

const char *lmt_backend_names(void)
{
	/* what lmt_backend_open accepts; cuda opens only where a GPU is visible */
#ifdef LMT_HAVE_CUDA
	return "cpu cuda";
#else
	return "cpu";
#endif
}

#ifdef LMT_HAVE_CUDA
int lmt_cuda_device_count(int *runtime_version);

const char *lmt_backend_cuda_status(void)
{
	static char buf[96];
	int rt = 0;
	int n = lmt_cuda_device_count(&rt);
	snprintf(buf, sizeof buf, "cuda backend built, cuda runtime %d.%d, %d device%s visible", rt / 1000,
		 (rt % 1000) / 10, n, n == 1 ? "" : "s");
	return buf;
}
#else
const char *lmt_backend_cuda_status(void)
{
	return "cuda not built (no nvcc at build time)";
}
#endif
