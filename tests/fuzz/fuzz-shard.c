/*
 * fuzz-shard.c: a shard (.lmsh) through lmt_shard_open, with and without verify;
 * what opens is read whole: every sequence's tokens and segments, and each segment
 * must lie inside its sequence, in order (what the loader relies on).
 */
#include <stdlib.h>

#include "data/shard.h"
#include "fuzz.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[512];
	struct lmt_err err;
	fuzz_dir_empty();
	fuzz_file("s.lmsh", data, size, path, sizeof path);
	for (int verify = 0; verify < 2; verify++) {
		struct lmt_shard s;
		if (lmt_shard_open(&s, path, verify, &err))
			continue;
		uint32_t w = s.info.seq_len + 1, *toks = malloc((size_t)w * 4);
		struct lmt_segment *segs = malloc((size_t)w * sizeof *segs);
		uint64_t sum = 0;
		for (uint64_t i = 0; toks && segs && i < s.info.n_seqs; i++) {
			lmt_shard_tokens(&s, i, toks);
			for (uint32_t k = 0; k < w; k++)
				sum += toks[k];
			uint32_t n = lmt_shard_segments(&s, i, segs, w), end = 0;
			if (n > w)
				abort(); /* more segments than positions */
			for (uint32_t k = 0; k < n; k++) {
				if (segs[k].start < end || !segs[k].len || (uint64_t)segs[k].start + segs[k].len > w)
					abort();
				end = segs[k].start + segs[k].len;
			}
		}
		sink = sum;
		free(toks);
		free(segs);
		lmt_shard_close(&s);
	}
	return 0;
}
