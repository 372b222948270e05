/*
 * cudart.h: the little of the CUDA runtime that the C side uses, in one place:
 * device discovery, device buffers and the copies to and from them (the nccl
 * communicator, nccl-bench), and the C entry points of the kernels (device.cu
 * and convert.cu in kernels/).
 *
 * Everything here exists only in a build with CUDA (LMT_HAVE_CUDA). "No GPU" is
 * any CUDA error at discovery (error 35, "insufficient driver", where the
 * toolkit is installed without a driver) or no device: an LMT_EUNSUPPORTED
 * whose message says "no GPU" and why.
 */
#ifndef LMT_CUDART_H
#define LMT_CUDART_H

#include <stddef.h>

#include "core/error.h"

#ifdef LMT_HAVE_CUDA
/* kernels/device.cu: visible devices (0 on any error); the runtime's version */
int lmt_cuda_device_count(int *runtime_version);
/* kernels/convert.cu, on a stream (a cudaStream_t): bf16, fp16 or uint8 to fp32
 * and back (divided by divisor first; uint8 modulo 256); a cudaError_t */
int lmt_cuda_to_f32(float *dst, const void *src, size_t n, int dtype, void *stream);
int lmt_cuda_from_f32(void *dst, const float *src, size_t n, int dtype, float divisor, void *stream);

/* *n = the visible devices, at least 1; else LMT_EUNSUPPORTED "no GPU (...)" */
int lmt_cudart_devices(int *n, struct lmt_err *err);
int lmt_cudart_set_device(int dev, struct lmt_err *err);
int lmt_cudart_alloc(void **p, size_t bytes, struct lmt_err *err);
void lmt_cudart_free(void *p);
/* a synchronous copy in any direction (cudaMemcpyDefault) */
int lmt_cudart_copy(void *dst, const void *src, size_t bytes, struct lmt_err *err);
/* 1 when p is host memory that a kernel cannot use (pageable or pinned) */
int lmt_cudart_is_host(const void *p);
/* the rule behind it, for a cudaPointerAttributes type: unregistered and host
 * memory are host; device and managed memory are not */
int lmt_cudart_memtype_is_host(int type);
#endif

#endif
