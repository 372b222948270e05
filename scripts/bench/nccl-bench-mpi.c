/*
 * nccl-bench-mpi: the peer of scripts/bench/nccl-bench, a plain MPI_Allreduce
 * loop (in place, MPI_FLOAT, MPI_SUM) over nccl-bench's sizes with its warmup
 * and iteration counts, timed the same way (a barrier, the mean of the timed
 * iterations on each rank, then the mean over the ranks), so the two busbw
 * columns count the same bytes. One JSON line per size from rank 0.
 *
 *	mpirun -n 2 nccl-bench-mpi MINBYTES MAXBYTES FACTOR WARMUP ITERS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (argc != 6) {
		if (!rank)
			fprintf(stderr, "usage: nccl-bench-mpi MINBYTES MAXBYTES FACTOR WARMUP ITERS\n");
		MPI_Finalize();
		return 2;
	}
	unsigned long long lo = strtoull(argv[1], NULL, 10), hi = strtoull(argv[2], NULL, 10);
	unsigned long long f = strtoull(argv[3], NULL, 10);
	int warm = atoi(argv[4]), iters = atoi(argv[5]);
	float *buf = malloc(hi + 4);
	if (!buf || f < 2 || iters < 1)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (unsigned long long i = 0; i < hi / 4; i++)
		buf[i] = (float)(i % 7 + 1 + 2 * rank);
	for (unsigned long long size = lo; size <= hi; size *= f) {
		int count = (int)(size / 4);
		for (int i = 0; i < warm; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < iters; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double t = (MPI_Wtime() - t0) / iters, mean = 0;
		MPI_Allreduce(&t, &mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		mean /= n;
		double bytes = (double)count * 4, alg = bytes / 1e9 / mean;
		if (!rank)
			printf("{\"size\":%.0f,\"time_us\":%.17g,\"algbw_gbs\":%.17g,\"busbw_gbs\":%.17g}\n", bytes,
			       mean * 1e6, alg, alg * 2.0 * (n - 1) / n);
	}
	free(buf);
	MPI_Finalize();
	return 0;
}
