/*
 * impl.h: the backends' own constructors, for registry.c only. Everything else
 * opens a backend by name with lmt_backend_open (backend.h).
 */
#ifndef LMT_BACKEND_IMPL_H
#define LMT_BACKEND_IMPL_H

#include "backend/backend.h"

/* The CPU backend with `threads` threads (0: all cores). */
int lmt_backend_cpu_init(struct lmt_backend *be, int threads, struct lmt_err *err);

/* The cuda backend (cuda.c; built with LMT_HAVE_CUDA) on the current device: an
 * LMT_EUNSUPPORTED "no GPU (...)" where none is visible. `threads` is unused. */
int lmt_backend_cuda_init(struct lmt_backend *be, int threads, struct lmt_err *err);
/* The libraries the cuda backend opens at run time rather than links (cuBLASLt):
 * loads them once and resolves every entry point it calls, GPU or not; 0, or
 * LMT_EUNSUPPORTED naming the library and what is missing. */
int lmt_backend_cuda_libs(struct lmt_err *err);

/*
 * The CPU backend's GEMMs (cpu_gemm.c, oneDNN's matmul primitive): primitives
 * created once per shape, dtype and transpose and cached. lmt_cpu_gemm returns 0 or
 * a negative LMT_E* code with err filled (the caller records it in the backend's
 * sticky status). lmt_cpu_gemm_impl: oneDNN's implementation name for a 1024^3
 * GEMM in dtype (a static string). lmt_cpu_gemm_release frees the cache.
 */
struct lmt_cpu_gemm_cache;
int lmt_cpu_gemm_init(struct lmt_cpu_gemm_cache **cache, int threads, struct lmt_err *err);
void lmt_cpu_gemm_release(struct lmt_cpu_gemm_cache *cache);
int lmt_cpu_gemm(struct lmt_cpu_gemm_cache *cache, const struct lmt_gemm *g, struct lmt_err *err);
const char *lmt_cpu_gemm_impl(struct lmt_cpu_gemm_cache *cache, int dtype);

#endif
