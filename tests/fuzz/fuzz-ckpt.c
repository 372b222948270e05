/*
 * fuzz-ckpt.c: a checkpoint directory (manifest.json and its rank-RRRRR.lmckpt
 * data files) through lmt_ckpt_open, without and with verify, and every tensor of
 * what opens read whole (lmt_ckpt_read) and in two halves (lmt_ckpt_read_range),
 * which must agree. The input is the directory as fuzz.h cuts it: manifest.json
 * first, then "\n--8<-- NAME\n" and each data file's bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lmt_ckpt c;
	struct lmt_err err;
	fuzz_dir_write(data, size, "manifest.json");
	if (lmt_ckpt_open(&c, fuzz_dir(), 0, &err))
		return 0;
	for (int i = 0; i < c.nt; i++) {
		const struct lmt_ckpt_entry *e = &c.t[i];
		if (e->numel > (1u << 22))
			continue; /* chunks lie inside the files, so this is a big input */
		float *a = malloc(e->numel * 4 + 4), *b = malloc(e->numel * 4 + 4);
		uint64_t h = e->numel / 2;
		if (a && b && !lmt_ckpt_read(&c, e, a, &err)) {
			if (lmt_ckpt_read_range(&c, e, 0, h, b, &err) ||
			    lmt_ckpt_read_range(&c, e, h, e->numel - h, b + h, &err) || memcmp(a, b, e->numel * 4))
				abort(); /* a tensor that reads whole must read in pieces, the same */
		}
		free(a);
		free(b);
	}
	lmt_ckpt_close(&c);
	if (!lmt_ckpt_open(&c, fuzz_dir(), 1, &err))
		lmt_ckpt_close(&c);
	return 0;
}
