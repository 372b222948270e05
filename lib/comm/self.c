/*
 * self.c: the self communicator (world size 1). A reduction over one rank is
 * its input (sum, avg and max alike); started operations are already done.
 */
#include "comm/comm.h"
#include "comm/impl.h"

#include <string.h>

static int self_allreduce(struct lmt_comm *c, void *buf, size_t n, int dtype, struct lmt_err *err)
{
	(void)c, (void)buf, (void)n, (void)dtype, (void)err;
	return 0;
}

static int self_reduce_scatter(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype,
			       struct lmt_err *err)
{
	(void)c, (void)err;
	if (recv != send)
		memmove(recv, send, n * lmt_dtype_size(dtype));
	return 0;
}

static int self_allreduce_op(struct lmt_comm *c, void *buf, size_t n, int dtype, int op, struct lmt_err *err)
{
	(void)c, (void)buf, (void)n;
	return lmt_comm_check_reduce("all-reduce", dtype, op, err);
}

static int self_reduce_scatter_op(struct lmt_comm *c, const void *send, void *recv, size_t n, int dtype, int op,
				  struct lmt_err *err)
{
	int rc = lmt_comm_check_reduce("reduce-scatter", dtype, op, err);
	return rc ? rc : self_reduce_scatter(c, send, recv, n, dtype, err);
}

static int self_allreduce_start(struct lmt_comm *c, void *buf, size_t n, int dtype, int op,
				struct lmt_comm_req **req, struct lmt_err *err)
{
	*req = NULL;
	return self_allreduce_op(c, buf, n, dtype, op, err);
}

static int self_wait(struct lmt_comm *c, struct lmt_comm_req *req, struct lmt_err *err)
{
	(void)c, (void)req, (void)err;
	return 0;
}

static int self_reduce_scatterv_start(struct lmt_comm *c, const void *send, void *recv, const size_t *counts,
				      int dtype, int op, struct lmt_comm_req **req, struct lmt_err *err)
{
	*req = NULL;
	return self_reduce_scatter_op(c, send, recv, counts[0], dtype, op, err);
}

static int self_allgatherv_start(struct lmt_comm *c, const void *send, void *recv, const size_t *counts, int dtype,
				 struct lmt_comm_req **req, struct lmt_err *err)
{
	*req = NULL;
	if (lmt_dtype_size(dtype) == 0)
		return lmt_err_set(err, LMT_EINVAL, "all-gather: unknown dtype %d", dtype);
	(void)c;
	if (recv != send)
		memmove(recv, send, counts[0] * lmt_dtype_size(dtype));
	return 0;
}

static int self_split(struct lmt_comm *c, int color, int key, struct lmt_comm *out, struct lmt_err *err)
{
	(void)key;
	if (color < 0)
		return lmt_err_set(err, LMT_EINVAL, "split: color %d, expected 0 or more", color);
	int rc = lmt_comm_self_init(out, err);
	if (!rc)
		out->timeout_s = c->timeout_s;
	return rc;
}

static int self_allgather(struct lmt_comm *c, const void *send, void *recv, size_t bytes, struct lmt_err *err)
{
	(void)c, (void)err;
	if (recv != send)
		memmove(recv, send, bytes);
	return 0;
}

static int self_broadcast(struct lmt_comm *c, void *buf, size_t bytes, int root, struct lmt_err *err)
{
	(void)c, (void)buf, (void)bytes;
	if (root != 0)
		return lmt_err_set(err, LMT_EINVAL, "broadcast from rank %d in a world of 1", root);
	return 0;
}

static int self_barrier(struct lmt_comm *c, struct lmt_err *err)
{
	(void)c, (void)err;
	return 0;
}

static int self_p2p(struct lmt_comm *c, void *buf, size_t bytes, int peer, struct lmt_err *err)
{
	(void)c, (void)buf, (void)bytes;
	return lmt_err_set(err, LMT_EINVAL, "send/recv with rank %d in a world of 1", peer);
}

static int self_send(struct lmt_comm *c, const void *buf, size_t bytes, int peer, struct lmt_err *err)
{
	return self_p2p(c, (void *)buf, bytes, peer, err);
}

static void self_release(struct lmt_comm *c)
{
	(void)c;
}

int lmt_comm_self_init(struct lmt_comm *c, struct lmt_err *err)
{
	(void)err;
	memset(c, 0, sizeof *c);
	c->name = "self";
	c->rank = 0;
	c->world = 1;
	c->local_rank = 0;
	c->local_world = 1;
	c->allreduce_sum = self_allreduce;
	c->reduce_scatter_sum = self_reduce_scatter;
	c->allgather = self_allgather;
	c->broadcast = self_broadcast;
	c->barrier = self_barrier;
	c->send = self_send;
	c->recv = self_p2p;
	c->release = self_release;
	c->allreduce = self_allreduce_op;
	c->reduce_scatter = self_reduce_scatter_op;
	c->allreduce_start = self_allreduce_start;
	c->wait = self_wait;
	c->split = self_split;
	c->reduce_scatterv_start = self_reduce_scatterv_start;
	c->allgatherv_start = self_allgatherv_start;
	return 0;
}
