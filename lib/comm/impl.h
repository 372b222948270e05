/*
 * impl.h: the communicators' own constructors, for registry.c only. Everything
 * else opens one by name with lmt_comm_open (comm.h).
 */
#ifndef LMT_COMM_IMPL_H
#define LMT_COMM_IMPL_H

#include "comm/comm.h"

/* World of one: every collective is the identity (or a copy). */
int lmt_comm_self_init(struct lmt_comm *c, struct lmt_err *err);

#endif
