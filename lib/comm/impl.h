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
#ifdef LMT_HAVE_NCCL
/* One GPU a rank over NCCL, wired up through PMIx; LMT_EUNSUPPORTED "no GPU"
 * where CUDA finds no device. */
int lmt_comm_nccl_init(struct lmt_comm *c, struct lmt_err *err);
/* NCCL's ncclDataType_t for a dtype (-1 if unknown); *via_f32: reduced as an
 * fp32 copy (bf16, fp16, uint8) */
int lmt_nccl_dtype(int dtype, int *via_f32);
/* NCCL's ncclRedOp_t for an enum lmt_comm_op (-1 if unknown) */
int lmt_nccl_op(int op);
#endif

/* 0, or LMT_EINVAL naming what (e.g. "all-reduce") when dtype or op is unknown */
int lmt_comm_check_reduce(const char *what, int dtype, int op, struct lmt_err *err);

#endif
