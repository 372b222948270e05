/*
 * pmix.h: process wire-up through PMIx, so that any PMIx launcher (Open MPI's
 * mpirun, Slurm's srun --mpi=pmix) tells each process its rank, the job's size and
 * its place on the node, and lets the processes exchange small blobs by key (the
 * NCCL unique id: rank 0 puts it, every rank fences with collect and gets it).
 *
 * Without a launcher (PMIx_Init fails with no PMIX_RANK / PMIX_NAMESPACE in the
 * environment, e.g. PMIX_ERR_UNREACHABLE) the process is a job of one: launched is
 * 0, rank 0 of 1, and put/get keep the blobs in the process, so the same code runs
 * either way. A build without PMIx (no LMT_HAVE_PMIX) always reports that.
 *
 * Open MPI 4.1 cannot start as a singleton (MPI_Init without mpirun) after a failed
 * PMIx_Init in the same process: open the mpi communicator without launcher before
 * calling lmt_pmix_init, or not at all (lmt_comm_open's "auto" checks the
 * environment first).
 */
#ifndef LMT_PMIX_H
#define LMT_PMIX_H

#include <stddef.h>

#include "core/error.h"

struct lmt_pmix {
	int launched;            /* 1: a PMIx server answered; 0: a job of one */
	int rank, size;          /* in the job */
	int local_rank, local_size; /* on this node */
	void *priv;
};

/* 1 when the environment names a PMIx server (PMIX_RANK or PMIX_NAMESPACE set) */
int lmt_pmix_env(void);
/* Connect to the launcher's PMIx server and fill p; 0 with launched 0 when there
 * is none. A server named by the environment that fails is an LMT_EIO with
 * PMIx's error string. */
int lmt_pmix_init(struct lmt_pmix *p, struct lmt_err *err);
/* Publish bytes of data under key (at most 511 characters) for every rank;
 * visible to the others after commit and a fence. */
int lmt_pmix_put(struct lmt_pmix *p, const char *key, const void *data, size_t bytes, struct lmt_err *err);
int lmt_pmix_commit(struct lmt_pmix *p, struct lmt_err *err);
/* Collective over the job: returns when every rank has called it; collect 1
 * brings every rank's committed data to every rank. */
int lmt_pmix_fence(struct lmt_pmix *p, int collect, struct lmt_err *err);
/* Copy the blob rank put under key into data, which holds bytes; a blob of
 * another size is an LMT_EFORMAT, a missing one LMT_ENOTFOUND. Only what a fence
 * with collect brought here is found (PMIX_OPTIONAL: the server is not asked). */
int lmt_pmix_get(struct lmt_pmix *p, int rank, const char *key, void *data, size_t bytes, struct lmt_err *err);
/* Disconnect (PMIx_Finalize) and free what p holds. */
void lmt_pmix_release(struct lmt_pmix *p);

#endif
