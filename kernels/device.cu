/*
 * device.cu: the CUDA side's entry point into the build: device discovery.
 *
 * Built only where nvcc exists. Any CUDA error (error 35, "insufficient driver",
 * on a machine with the toolkit but no driver) means "no GPU": the tools then run
 * on the CPU backend.
 */
#include <cuda_runtime.h>

extern "C" int lmt_cuda_device_count(int *runtime_version)
{
	int n = 0;
	if (runtime_version && cudaRuntimeGetVersion(runtime_version) != cudaSuccess)
		*runtime_version = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError(); /* clear the sticky error */
		return 0;
	}
	return n;
}
