/*
 * comm.h: the collectives the training step uses, behind a table of function
 * pointers, so one process is just a world of size 1.
 *
 * Implementations: self (one rank; self.c), mpi (host buffers, Open MPI; mpi.c)
 * and nccl (one GPU a rank; nccl.c), wired up through PMIx (pmix.h). Buffers
 * are the backend's device pointers (host memory for self and mpi; nccl takes
 * device memory and stages host buffers through it). Every call is
 * collective over the communicator's group (send/recv: the two ranks named) and
 * returns 0 or an LMT_E* code with a message.
 *
 * Reductions take every dtype of core/dtype.h. bf16 and fp16 are summed in fp32
 * and rounded once at the end (mpi: converted to fp32 buffers around the MPI
 * call; nccl: the same on the device); avg is the sum divided by the group's
 * size (integers: truncated toward zero; nccl's fp32 and fp64 multiply by 1/size
 * before summing, which may differ in the last bit); uint8 sums wrap modulo 256. A count of elements or bytes beyond INT_MAX is
 * an LMT_ERANGE on mpi (MPI counts are ints).
 *
 * timeout_s (0 by default: wait for ever) bounds each wait for a collective or a
 * send/recv: past it the call fails with LMT_EIO naming the operation ("a peer may
 * have died"), and the communicator is broken: every later call fails at once and
 * release does not finalize MPI, so the process can exit and its launcher end the
 * job. The caller may set it at any time; split copies it.
 */
#ifndef LMT_COMM_H
#define LMT_COMM_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/error.h"

enum lmt_comm_op {
	LMT_COMM_OP_SUM = 0,
	LMT_COMM_OP_AVG,     /* sum / size of the group */
	LMT_COMM_OP_MAX,
};
#define LMT_COMM_OP_COUNT 3

/* A started operation (allreduce_start, reduce_scatterv_start, allgatherv_start); owned by the communicator until wait. */
struct lmt_comm_req;

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

	/* ranks on this node (the shared-memory group), this rank's place among them is local_rank */
	int local_world;
	/* seconds a wait may last (0: for ever); see above */
	double timeout_s;
	/* buf[i] = op over ranks of buf[i], in place (enum lmt_comm_op) */
	int (*allreduce)(struct lmt_comm *c, void *buf, size_t n, int dtype, int op, struct lmt_err *err);
	/* as reduce_scatter_sum, with op */
	int (*reduce_scatter)(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype, int op,
			      struct lmt_err *err);
	/* Start allreduce(buf) and return at once with *req; buf is the operation's
	 * until wait(*req) returns (do not read or write it). Every rank starts the
	 * same operations in the same order. wait completes the operation (its
	 * timeout counts from the call to wait) and frees req; wait(NULL) is 0. */
	int (*allreduce_start)(struct lmt_comm *c, void *buf, size_t n, int dtype, int op,
			       struct lmt_comm_req **req, struct lmt_err *err);
	int (*wait)(struct lmt_comm *c, struct lmt_comm_req *req, struct lmt_err *err);
	/* Collective: *out = the group of the ranks that gave the same color (>= 0),
	 * ranked by key (ties by rank here). out is released apart, before or after c. */
	int (*split)(struct lmt_comm *c, int color, int key, struct lmt_comm *out, struct lmt_err *err);
	/*
	 * Uneven parts, for ZeRO-2 and -3 over flat shards (a layer's range meets
	 * one or two ranks' shards): counts[r] (world entries, kept valid until
	 * wait) elements are rank r's part, the parts laid end to end in rank order.
	 * reduce_scatterv: recv (counts[rank] elements) = this rank's part of the
	 * op over ranks of send (the sum of counts); allgatherv: recv (the sum of
	 * counts) = every rank's send (counts[rank] elements) end to end. Both are
	 * started and completed by wait, as allreduce_start; a rank's part may be
	 * empty.
	 */
	int (*reduce_scatterv_start)(struct lmt_comm *c, const void *send, void *recv, const size_t *counts,
				     int dtype, int op, struct lmt_comm_req **req, struct lmt_err *err);
	int (*allgatherv_start)(struct lmt_comm *c, const void *send, void *recv, const size_t *counts, int dtype,
				struct lmt_comm_req **req, struct lmt_err *err);
};

/* Open the communicator called name ("self"; "mpi" and "nccl" where built, nccl
 * only by name; NULL or "auto" choose: "mpi" when a launcher started more than one process (PMIx's job size,
 * or OMPI_COMM_WORLD_SIZE, above 1), else "self"); an unknown name is an
 * LMT_EINVAL naming the ones this build has; more than one process and no mpi in
 * this build is an LMT_EUNSUPPORTED. */
int lmt_comm_open(struct lmt_comm *c, const char *name, struct lmt_err *err);
/* The same for a backend whose buffers are device memory (device: 1; the cuda
 * backend): "auto" chooses "nccl" when more than one process was launched, and
 * "mpi" (host buffers) is an LMT_EINVAL; for a host backend "nccl" is one; and
 * "self" when a launcher started more than one process. */
int lmt_comm_open_for(struct lmt_comm *c, const char *name, int device, struct lmt_err *err);
const char *lmt_comm_names(void);
/* "sum", "avg", "max" ("?" if unknown) */
const char *lmt_comm_op_name(int op);

#endif
