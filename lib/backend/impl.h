/*
 * impl.h: the backends' own constructors, for registry.c only. Everything else
 * opens a backend by name with lmt_backend_open (backend.h).
 */
#ifndef LMT_BACKEND_IMPL_H
#define LMT_BACKEND_IMPL_H

#include "backend/backend.h"

/* The CPU backend with `threads` threads (0: all cores). */
int lmt_backend_cpu_init(struct lmt_backend *be, int threads, struct lmt_err *err);

#endif
