/*
 * version.c: build identity. LMT_REVISION is passed by the Makefile from git describe.
 */
#include "version.h"

#include <stdio.h>

#ifndef LMT_REVISION
#define LMT_REVISION "unknown"
#endif

const char *lmt_revision(void)
{
	return LMT_REVISION;
}

#ifdef LMT_HAVE_CUDA
int lmt_cuda_device_count(int *runtime_version);

const char *lmt_backends(void)
{
	/* the CUDA objects are built (device discovery), but no training backend on them
	 * yet: say so rather than list a backend --backend would refuse */
	return "cpu";
}

const char *lmt_cuda_status(void)
{
	static char buf[96];
	int rt = 0;
	int n = lmt_cuda_device_count(&rt);
	snprintf(buf, sizeof buf, "kernels built, runtime %d.%d, %d device%s visible; no cuda backend yet", rt / 1000,
		 (rt % 1000) / 10, n, n == 1 ? "" : "s");
	return buf;
}
#else
const char *lmt_backends(void)
{
	return "cpu";
}

const char *lmt_cuda_status(void)
{
	return "cuda not built (no nvcc at build time)";
}
#endif
