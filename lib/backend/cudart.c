/*
 * cudart.c: device discovery, buffers and copies over the CUDA runtime's C API
 * (cudart.h). Compiled only with CUDA.
 */
#include "backend/cudart.h"

#ifdef LMT_HAVE_CUDA

#include <cuda_runtime_api.h>

static int cuda_fail(struct lmt_err *err, cudaError_t e, const char *what)
{
	return lmt_err_set(err, LMT_EIO, "cuda: %s: %s (error %d)", what, cudaGetErrorString(e), (int)e);
}

int lmt_cudart_devices(int *n, struct lmt_err *err)
{
	*n = 0;
	cudaError_t e = cudaGetDeviceCount(n);
	if (e != cudaSuccess) {
		(void)cudaGetLastError(); /* clear it: the process goes on without CUDA */
		*n = 0;
		return lmt_err_set(err, LMT_EUNSUPPORTED, "no GPU (cudaGetDeviceCount: %s, error %d)",
				   cudaGetErrorString(e), (int)e);
	}
	if (*n < 1)
		return lmt_err_set(err, LMT_EUNSUPPORTED, "no GPU (no CUDA device visible)");
	return 0;
}

int lmt_cudart_set_device(int dev, struct lmt_err *err)
{
	cudaError_t e = cudaSetDevice(dev);
	return e == cudaSuccess ? 0 : cuda_fail(err, e, "set the device");
}

int lmt_cudart_alloc(void **p, size_t bytes, struct lmt_err *err)
{
	cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
	if (e != cudaSuccess) {
		*p = NULL;
		return lmt_err_set(err, LMT_ENOMEM, "cuda: no device memory for %zu bytes: %s", bytes,
				   cudaGetErrorString(e));
	}
	return 0;
}

void lmt_cudart_free(void *p)
{
	if (p)
		(void)cudaFree(p); /* nothing to do about a failure to free */
}

int lmt_cudart_copy(void *dst, const void *src, size_t bytes, struct lmt_err *err)
{
	if (!bytes)
		return 0;
	cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
	return e == cudaSuccess ? 0 : cuda_fail(err, e, "copy");
}

int lmt_cudart_memtype_is_host(int type)
{
	return type == cudaMemoryTypeUnregistered || type == cudaMemoryTypeHost;
}

int lmt_cudart_is_host(const void *p)
{
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		(void)cudaGetLastError(); /* CUDA before 11 fails on pageable memory */
		return 1;
	}
	return lmt_cudart_memtype_is_host((int)a.type);
}

#endif /* LMT_HAVE_CUDA */
