/*
 * peak.c: the GEMM peak of a backend in a dtype, measured, for MFU (backend.h).
 *
 * Five products of 1024^3 (A and B in the dtype, C fp32) through be->gemm after one
 * untimed (it creates the kernel or primitive), the best taken. With cache, the best
 * ever measured is kept per machine (the CPU's model name), backend, thread count,
 * dtype and kernel (be->gemm_impl) in $XDG_CACHE_HOME/lmt/gemm-peak-<dtype>-<hash>
 * (or ~/.cache/lmt), a number and a comment line saying what it measured; a new
 * kernel or thread count is a new file. A failed product (be->status) gives 0.
 */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/util.h"

static void cpu_model(char *model, size_t n)
{
	snprintf(model, n, "cpu");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10)) {
			char *p = strchr(line, ':');
			if (p)
				snprintf(model, n, "%s", p + 2);
			model[strcspn(model, "\n")] = 0;
			break;
		}
	fclose(f);
}

/* The best of five timed 1024^3 products, in FLOP/s (0 if one failed). */
static double measure(struct lmt_backend *be, int dtype)
{
	const int n = 1024;
	size_t nn = (size_t)n * n, es = lmt_dtype_size(dtype);
	void *hA = malloc(nn * es), *hB = malloc(nn * es);
	void *A = be->alloc(be, nn * es), *B = be->alloc(be, nn * es), *C = be->alloc(be, nn * 4);
	double best = 0;
	if (hA && hB && A && B && C) {
		for (size_t i = 0; i < nn; i++) {
			float a = (float)(i % 13) * 0.01f, b = (float)(i % 7) * 0.01f;
			if (dtype == LMT_DTYPE_F32) {
				((float *)hA)[i] = a;
				((float *)hB)[i] = b;
			} else {
				uint16_t (*cv)(float) = dtype == LMT_DTYPE_BF16 ? lmt_f32_to_bf16 : lmt_f32_to_f16;
				((uint16_t *)hA)[i] = cv(a);
				((uint16_t *)hB)[i] = cv(b);
			}
		}
		be->to_device(be, A, hA, nn * es);
		be->to_device(be, B, hB, nn * es);
		struct lmt_gemm g = {
			.ta = 0, .tb = 1, .M = n, .N = n, .K = n, .alpha = 1.0f, .beta = 0.0f, .A = A, .lda = n,
			.B = B, .ldb = n, .C = C, .ldc = n, .batch = 1, .ab_dtype = dtype, .c_dtype = LMT_DTYPE_F32,
		};
		be->gemm(be, &g);
		be->sync(be);
		for (int r = 0; r < 5; r++) {
			double t = lmt_now();
			be->gemm(be, &g);
			be->sync(be);
			t = lmt_now() - t;
			double fl = 2.0 * n * n * n / t;
			best = fl > best ? fl : best;
		}
		struct lmt_err err;
		if (be->status(be, &err))
			best = 0;
	}
	free(hA);
	free(hB);
	if (A)
		be->free(be, A);
	if (B)
		be->free(be, B);
	if (C)
		be->free(be, C);
	return best;
}

double lmt_backend_peak_flops(struct lmt_backend *be, int dtype, int cache)
{
	if (dtype != LMT_DTYPE_F32 && dtype != LMT_DTYPE_BF16 && dtype != LMT_DTYPE_F16)
		return 0;
	char path[512] = "", model[128];
	double cached = 0;
	const char *impl = be->gemm_impl(be, dtype), *dname = lmt_dtype_name(dtype);
	cpu_model(model, sizeof model);
	char what[512];
	snprintf(what, sizeof what, "%s|%s|%d|%s|%s", model, be->name, be->threads, dname, impl);
	uint64_t key = lmt_hash_bytes(what, strlen(what), 0x7065616b);
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (cache && (xdg || home)) {
		char parent[380], dir[400];
		snprintf(parent, sizeof parent, "%s%s", xdg ? xdg : home, xdg ? "" : "/.cache");
		snprintf(dir, sizeof dir, "%s/lmt", parent);
		snprintf(path, sizeof path, "%s/gemm-peak-%s-%016llx", dir, dname, (unsigned long long)key);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%lf", &cached) != 1 || !(cached > 0))
				cached = 0;
			fclose(f);
		}
		mkdir(parent, 0755);
		mkdir(dir, 0755);
	}
	double best = measure(be, dtype);
	/* a peak measured while other work shared the cores is low: keep the best seen */
	if (cached >= best)
		return cached;
	if (path[0] && best > 0) {
		char tmp[560];
		snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
		FILE *f = fopen(tmp, "w");
		if (f) {
			fprintf(f, "%.6g\n# gemm 1024x1024x1024 %s, backend %s, %d threads, kernel %s, %s\n", best, dname,
				be->name, be->threads, impl, model);
			if (fclose(f) == 0)
				rename(tmp, path);
			else
				unlink(tmp);
		}
	}
	return best;
}
