/*
 * names.c: which backends this build has, and what the CUDA runtime says, apart
 * from registry.c so that a tool printing them in --version does not link the
 * backends: the CPU backend brings in oneDNN, whose shared library takes about
 * 1.7 ms to load, a twentieth of shard-pack --verify on an 80 MB dataset.
 *
 * CUDA device discovery lives here: kernels/device.cu answers how many devices
 * the runtime sees, and any CUDA error (error 35 without a driver) counts as none.
 */
#include "backend/backend.h"

#include <stdio.h>

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
