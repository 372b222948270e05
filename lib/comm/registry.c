/*
 * registry.c: communicators by name. Tools and tests get one here
 * (lmt_comm_open) and never call a communicator's own init, so the mpi and nccl
 * communicators join by a line in this table (nccl only by name). "auto" asks
 * the launcher how many processes it started: Open MPI's OMPI_COMM_WORLD_SIZE
 * when set, else PMIx's job size when the environment names a PMIx server
 * (Slurm's srun --mpi=pmix), and never calls PMIx_Init without one (see pmix.h: Open MPI's singleton start).
 */
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

#include "comm/impl.h"
#include "comm/pmix.h"

static const struct {
	const char *name;
	int (*init)(struct lmt_comm *c, struct lmt_err *err);
} comms[] = {
	{ "self", lmt_comm_self_init },
#ifdef LMT_HAVE_MPI
	{ "mpi", lmt_comm_mpi_init },
#endif
#ifdef LMT_HAVE_NCCL
	{ "nccl", lmt_comm_nccl_init }, /* only by name: "auto" never chooses it */
#endif
};

/* the number of processes the launcher started (1 without one) */
static int launched_world(struct lmt_err *err)
{
	const char *s = getenv("OMPI_COMM_WORLD_SIZE");
	if (s && *s) {
		char *end;
		long n = strtol(s, &end, 10);
		if (*end || n < 1 || n > 1 << 24)
			return lmt_err_set(err, LMT_EFORMAT, "OMPI_COMM_WORLD_SIZE '%s': expected a count of processes", s);
		return (int)n;
	}
	if (!lmt_pmix_env())
		return 1;
	struct lmt_pmix p;
	int rc = lmt_pmix_init(&p, err);
	if (rc)
		return rc;
	int n = p.size;
	lmt_pmix_release(&p);
	return n;
}

int lmt_comm_open(struct lmt_comm *c, const char *name, struct lmt_err *err)
{
	if (!name || !strcmp(name, "auto")) {
		int n = launched_world(err);
		if (n < 0)
			return n;
		name = n > 1 ? "mpi" : "self";
#ifndef LMT_HAVE_MPI
		if (n > 1)
			return lmt_err_set(err, LMT_EUNSUPPORTED, "launched as %d processes, but this build has no mpi "
					   "communicator (built without Open MPI)", n);
#endif
	}
	for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++)
		if (!strcmp(comms[i].name, name))
			return comms[i].init(c, err);
	return lmt_err_set(err, LMT_EINVAL, "unknown communicator '%s' (this build has: %s)", name, lmt_comm_names());
}

int lmt_comm_open_for(struct lmt_comm *c, const char *name, int device, struct lmt_err *err)
{
	int any = !name || !strcmp(name, "auto");
	if (any && device) {
		int n = launched_world(err);
		if (n < 0)
			return n;
		name = n > 1 ? "nccl" : "self";
	}
	if (!any && device && !strcmp(name, "mpi"))
		return lmt_err_set(err, LMT_EINVAL, "the mpi communicator reduces host buffers; a device backend's "
				   "ranks need nccl");
	if (!any && !device && !strcmp(name, "nccl"))
		return lmt_err_set(err, LMT_EINVAL, "the nccl communicator reduces device buffers; it needs the cuda "
				   "backend");
	if (!any && !strcmp(name, "self")) {
		int n = launched_world(err);
		if (n < 0)
			return n;
		if (n > 1)
			return lmt_err_set(err, LMT_EINVAL, "the launcher started %d processes; the self communicator is "
					   "one", n);
	}
	return lmt_comm_open(c, name, err);
}

const char *lmt_comm_names(void)
{
#if defined LMT_HAVE_MPI && defined LMT_HAVE_NCCL
	return "self, mpi, nccl";
#elif defined LMT_HAVE_MPI
	return "self, mpi";
#elif defined LMT_HAVE_NCCL
	return "self, nccl";
#else
	return "self";
#endif
}

const char *lmt_comm_op_name(int op)
{
	static const char *const names[LMT_COMM_OP_COUNT] = { "sum", "avg", "max" };
	return op >= 0 && op < LMT_COMM_OP_COUNT ? names[op] : "?";
}

int lmt_comm_check_reduce(const char *what, int dtype, int op, struct lmt_err *err)
{
	if (lmt_dtype_size(dtype) == 0)
		return lmt_err_set(err, LMT_EINVAL, "%s: unknown dtype %d", what, dtype);
	if (op < 0 || op >= LMT_COMM_OP_COUNT)
		return lmt_err_set(err, LMT_EINVAL, "%s: unknown op %d (expected sum, avg or max)", what, op);
	return 0;
}
