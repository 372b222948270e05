/*
 * pack.h: the packing pipeline behind shard-pack: a token stream's documents, each
 * sent to train, val or test by a hash of its tokens, packed into fixed-length
 * sequences, written as shards into a staging dataset directory; then the
 * manifest, written last, and the directory moved into place.
 *
 *	lmt_pack_stage(out, force, staging, sizeof staging, &err);
 *	lmt_pack_init(&pk, &params, staging, &reader, &err);
 *	for each document i: lmt_pack_doc(&pk, &reader, i, &err);
 *	lmt_pack_finish(&pk, &err);
 *	lmt_pack_write_manifest(&pk, &reader, &input, &err);
 *	lmt_pack_commit(staging, out, &err);
 *	lmt_pack_release(&pk);
 *
 * Shards are written as sequences fill, so memory holds one sequence per split,
 * never a shard. The staging directory sits next to the output and is renamed
 * into place only when complete, so a directory named as the output is either
 * absent, the previous dataset, or the new one whole; the caller removes the
 * staging directory (lmt_remove_dir) when it gives up before the commit.
 */
#ifndef LMT_PACK_H
#define LMT_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/shard.h"
#include "data/tokstream.h"

struct lmt_pack_params {
	uint32_t seq_len;        /* a sequence holds seq_len + 1 tokens */
	int pad_mode;            /* each document starts a sequence, padded */
	int tail_pad;            /* pack mode: pad the last partial sequence of a split (else drop it) */
	int eos_none;            /* documents as they are (else each ends with EOS) */
	uint32_t eos;            /* the stream's EOS, or LMT_NO_TOKEN */
	int eos_in_stream;       /* the stream's documents already end with it */
	uint32_t pad_id;         /* the token written at padding positions */
	double frac[3];          /* of documents per split (LMT_SPLIT_*); they sum to 1 */
	uint64_t seed;           /* of the split */
	uint64_t shard_tokens;   /* at most this many tokens per shard (at least one sequence) */
	uint64_t chunk_bytes;    /* the manifest lists the SHA-256 of every chunk_bytes of each
	                          * shard's payload (0: none) */
};

/* One shard written, as the manifest records it. */
struct lmt_pack_shard {
	int split;
	char name[64];           /* relative to the dataset directory */
	uint64_t bytes, tokens, seqs, segments;
	uint8_t sha[32];         /* of the payload */
	uint8_t *chunk_sha;      /* nchunks digests of its chunks of chunk_bytes */
	size_t nchunks;
};

/* One split being packed, and its accounting. */
struct lmt_pack_split {
	uint64_t docs, doc_tokens, eos_added, pad_tokens, tail_dropped, sequences;
	uint32_t shard_no;       /* shards written so far */
	uint64_t *freq;          /* vocab_size counts: its document tokens by id, for the unigram entropy */
	/* the pipeline's */
	int split;
	uint32_t *buf;           /* the sequence being filled: seq_len + 1 tokens */
	uint32_t fill;
	struct lmt_segment *segs;
	uint32_t nseg, segcap;
	struct lmt_shardw w;
	int open;
};

/* Documents and tokens of one source of the stream, per split. */
struct lmt_pack_source {
	uint64_t docs[3], tokens[3];
};

struct lmt_pack {
	struct lmt_pack_params p;
	const char *dir;         /* the staging directory (the caller's string) */
	uint32_t token_bytes;
	uint32_t vocab;          /* the stream's vocab_size */
	int add_eos;             /* an EOS is appended to every document */
	uint64_t seqs_per_shard;
	struct lmt_pack_split S[3];
	struct lmt_pack_source *sources;   /* one per stream source */
	/* shards in the order written; after lmt_pack_finish: train, val, test, each by index */
	struct lmt_pack_shard *shards;
	size_t nshards, capshards;
};

/* What the manifest says about the input. */
struct lmt_pack_input {
	const char *path;        /* as given ("<stdin>") */
	const uint8_t *sha256;   /* of the whole stream file */
	const char *tool;        /* the writer, e.g. "shard-pack" */
};

/* Check that out may receive a new dataset (absent; with force, a dataset or an
 * empty directory) and create the staging directory next to it, its path in
 * staging (cap bytes). */
int lmt_pack_stage(const char *out, int force, char *staging, size_t cap, struct lmt_err *err);
/* Move the complete staging directory into place at out; an old dataset there
 * moves aside first and is removed after. */
int lmt_pack_commit(const char *staging, const char *out, struct lmt_err *err);

int lmt_pack_init(struct lmt_pack *pk, const struct lmt_pack_params *params, const char *dir,
		  const struct lmt_tokstream_reader *r, struct lmt_err *err);
void lmt_pack_release(struct lmt_pack *pk);
/* The split of document d: a hash of its tokens and the seed alone. */
int lmt_pack_split_of(const struct lmt_pack_params *p, const struct lmt_tokstream_reader *r,
		      const struct lmt_tokstream_doc *d);
/* Pack document i of r (documents in stream order). */
int lmt_pack_doc(struct lmt_pack *pk, const struct lmt_tokstream_reader *r, uint64_t i, struct lmt_err *err);
/* Close each split (its tail padded or dropped) and sort the shard list. */
int lmt_pack_finish(struct lmt_pack *pk, struct lmt_err *err);
/* manifest.json in the staging directory, written atomically. */
int lmt_pack_write_manifest(const struct lmt_pack *pk, const struct lmt_tokstream_reader *r,
			    const struct lmt_pack_input *in, struct lmt_err *err);

#endif
