/*
 * self.c: the self communicator (world size 1).
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
	c->allreduce_sum = self_allreduce;
	c->reduce_scatter_sum = self_reduce_scatter;
	c->allgather = self_allgather;
	c->broadcast = self_broadcast;
	c->barrier = self_barrier;
	c->send = self_send;
	c->recv = self_p2p;
	c->release = self_release;
	return 0;
}
