/*
 * comm.h: the collectives the training step uses, behind a table of function
 * pointers, so one process is just a world of size 1.
 *
 * Implementations: self (one rank; self.c), and, in later work, mpi (CPU buffers,
 * Open MPI) and nccl (GPU buffers), wired up through PMIx. Buffers are the
 * backend's device pointers. Every call is collective over the whole world and
 * returns 0 or an LMT_E* code with a message.
 */
#ifndef LMT_COMM_H
#define LMT_COMM_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/error.h"

struct lmt_comm {
	const char *name;        /* "self", "mpi", "nccl" */
	int rank, world, local_rank;
	void *priv;
	/* buf[i] = sum over ranks of buf[i], in place */
	int (*allreduce_sum)(struct lmt_comm *c, void *buf, size_t n, int dtype, struct lmt_err *err);
	/* recv = this rank's block (n elements) of the sum of every rank's send (world * n) */
	int (*reduce_scatter_sum)(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype,
				  struct lmt_err *err);
	/* recv = the concatenation of every rank's send (bytes each), in rank order */
	int (*allgather)(struct lmt_comm *c, const void *send, void *recv, size_t bytes, struct lmt_err *err);
	int (*broadcast)(struct lmt_comm *c, void *buf, size_t bytes, int root, struct lmt_err *err);
	int (*barrier)(struct lmt_comm *c, struct lmt_err *err);
	int (*send)(struct lmt_comm *c, const void *buf, size_t bytes, int peer, struct lmt_err *err);
	int (*recv)(struct lmt_comm *c, void *buf, size_t bytes, int peer, struct lmt_err *err);
	void (*release)(struct lmt_comm *c);
};

/* Open the communicator called name ("self"; NULL or "auto" choose: one process
 * is "self"); an unknown name is an LMT_EINVAL naming the ones this build has. */
int lmt_comm_open(struct lmt_comm *c, const char *name, struct lmt_err *err);
const char *lmt_comm_names(void);

#endif
