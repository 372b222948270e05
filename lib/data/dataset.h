/*
 * dataset.h: a shard-pack dataset directory: its manifest and its shards.
 *
 * The manifest (manifest.json, written last by shard-pack) is the dataset: a
 * directory without one is not a dataset. lmt_dataset_open parses and checks it;
 * shards are mapped on demand and checked against it when first mapped (size,
 * header, payload SHA-256 as the manifest records it), so corruption is found
 * before any of a shard's tokens are used. The SHA-256 of manifest.json is the
 * dataset's identity.
 */
#ifndef LMT_DATASET_H
#define LMT_DATASET_H

#include <pthread.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/error.h"
#include "data/shard.h"

/* 2: the manifest ends with "manifest_sha256", a checksum of itself (jsonseal.h);
 * 1 had none, and is refused by name: pack the dataset again. */
#define LMT_DATASET_SCHEMA 2
#define LMT_DATASET_SEAL "manifest_sha256"

struct lmt_dataset_shard {
	char *name;              /* as in the manifest, relative to the directory */
	char *path;              /* directory + name */
	int split;
	uint32_t index;          /* position within its split */
	uint64_t bytes, tokens, seqs, segments;
	uint8_t sha256[LMT_SHA256_LEN];   /* of the payload, as in the shard header */
	uint64_t chunk_bytes;    /* 0, or the manifest lists the SHA-256 of each chunk of */
	uint8_t *chunk_sha;      /* this many payload bytes: nchunks digests */
	size_t nchunks;
	struct lmt_shard sh;
	int open;
};

struct lmt_dataset {
	char *dir;
	uint8_t manifest_sha256[LMT_SHA256_LEN];
	uint8_t tokenizer_sha256[LMT_SHA256_LEN];
	uint32_t seq_len, token_bytes, vocab_size, pad_id, eos_id;
	uint64_t split_seqs[3];
	uint32_t split_shards[3];
	struct lmt_dataset_shard *shards;
	size_t nshards;
	/* the documents table (documents.jsonl), if the manifest lists one */
	char *docs_path;         /* directory + name, or NULL */
	uint8_t docs_sha256[LMT_SHA256_LEN];
	uint64_t docs_count;     /* its lines */
	uint64_t docs_bytes;     /* its size: the manifest's (a manifest written before
				  * it had one: UINT64_MAX, then the size read, once
				  * lmt_dataset_verify has found the table sound) */
	pthread_mutex_t mu;      /* guards opening shards */
};

int lmt_dataset_open(struct lmt_dataset *d, const char *dir, struct lmt_err *err);
void lmt_dataset_close(struct lmt_dataset *d);
/* Map shard i if not yet (thread-safe), verifying it against the manifest. */
int lmt_dataset_shard(struct lmt_dataset *d, size_t i, const struct lmt_shard **out, struct lmt_err *err);
/* Re-read shard i from disk: size, header, payload SHA-256 against the manifest
 * (where the manifest lists chunk digests, each chunk's, in place of the whole
 * payload's), then its fields as lmt_dataset_shard checks them. */
int lmt_dataset_verify_shard(struct lmt_dataset *d, size_t i, struct lmt_err *err);
/*
 * Verify every shard as lmt_dataset_verify_shard does, and the documents table
 * (its size, SHA-256 and lines against the manifest), in nt threads: each shard's
 * chunks (or, without chunk digests, its whole payload) and the documents table
 * are items of a work pool, a window of shards mapped at a time. Then report each
 * file, the shards in manifest order and the documents table last, through
 * report: problem is NULL for a sound file, else what is wrong with it. The
 * library finds, the caller prints. Returns the number of bad files, or a
 * negative code (LMT_ENOMEM, or what report returned).
 */
typedef int (*lmt_dataset_report_fn)(void *ctx, const char *path, const struct lmt_err *problem);
int lmt_dataset_verify(struct lmt_dataset *d, int nt, lmt_dataset_report_fn report, void *ctx,
		       struct lmt_err *err);
int lmt_split_parse(const char *s);

#endif
