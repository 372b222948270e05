/*
 * fuzz-dataset.c: a dataset directory (manifest.json, its shards and its documents
 * table) through lmt_dataset_open, lmt_dataset_verify of the whole (in one thread
 * or two, by the input's length: the work pool's pieces, the chunk digests, the
 * documents table), then every shard through lmt_dataset_shard (mapped and
 * checked against the manifest) and lmt_dataset_verify_shard, and one sequence of
 * each read. The input is the directory as fuzz.h cuts it: manifest.json first,
 * then "\n--8<-- NAME\n" and each file's bytes.
 */
#include <stdlib.h>

#include "data/dataset.h"
#include "fuzz.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lmt_dataset d;
	struct lmt_err err;
	fuzz_dir_write(data, size, "manifest.json");
	if (lmt_dataset_open(&d, fuzz_dir(), &err))
		return 0;
	lmt_dataset_verify(&d, 1 + (int)(size & 1), NULL, NULL, &err);
	for (size_t i = 0; i < d.nshards; i++) {
		const struct lmt_shard *sh;
		lmt_dataset_verify_shard(&d, i, &err);
		if (lmt_dataset_shard(&d, i, &sh, &err) || !sh->info.n_seqs)
			continue;
		uint32_t w = sh->info.seq_len + 1, *toks = malloc((size_t)w * 4);
		if (toks) {
			lmt_shard_tokens(sh, sh->info.n_seqs - 1, toks);
			sink += toks[w - 1];
		}
		free(toks);
	}
	lmt_dataset_close(&d);
	return 0;
}
