/*
 * impl.h: the communicators' own constructors, for registry.c only, and the
 * argument checks they share. Everything else opens one by name with
 * lmt_comm_open (comm.h).
 */
#ifndef LMT_COMM_IMPL_H
#define LMT_COMM_IMPL_H

#include "comm/comm.h"

/* World of one: every collective is the identity (or a copy). */
int lmt_comm_self_init(struct lmt_comm *c, struct lmt_err *err);
#ifdef LMT_HAVE_MPI
/* MPI_COMM_WORLD of Open MPI (MPI_Init_thread on the first open). */
int lmt_comm_mpi_init(struct lmt_comm *c, struct lmt_err *err);
#endif

/* 0, or LMT_EINVAL naming what (e.g. "all-reduce") when dtype or op is unknown */
int lmt_comm_check_reduce(const char *what, int dtype, int op, struct lmt_err *err);

#endif
