/*
 * ckpt.h: checkpoints: a run's whole state, written transactionally, readable at
 * any world size.
 *
 * Layout: RUN/ckpt/step-NNNNNNNN/ holds one data file per rank,
 * rank-RRRRR.lmckpt, and manifest.json. Every tensor of the state (the parameters
 * "param/NAME", AdamW's moments "adam_m/NAME" and "adam_v/NAME") is a global tensor
 * stored as contiguous chunks of its flattened elements: with world size W, rank r
 * holds elements [r*n/W, (r+1)*n/W) of each, so any world size can read any
 * checkpoint and ckpt-reshard can cut it anew. The manifest lists every file (size,
 * payload SHA-256), every chunk (tensor, element range, byte offset, CRC-32C of its
 * bytes) and the training state (update count, optimizer steps, valid tokens,
 * clocks, scheduler, loss scaler, RNG state and loader cursor of every rank, the
 * resolved configuration, the tokenizer and dataset identities, the code revision,
 * the world size, a schema version).
 *
 * Data file (magic "\x89LMTCKP\n", version 1.0): the common header, then 32 bytes of
 * fields: u32 rank, u32 world, u64 n_chunks, u32 dtype (0: f32), 12 bytes zero; the
 * payload is the chunks' bytes back to back, each starting at a multiple of 64.
 *
 * Protocol: everything is written into RUN/ckpt/.tmp-step-NNNNNNNN-PID/, each file
 * fsynced; the manifest is written last (atomically), the directory fsynced and
 * renamed to step-NNNNNNNN, and RUN/ckpt fsynced. Only a directory named step-* with
 * a manifest that parses and files that match it is a checkpoint; anything else is
 * ignored by resume and reported.
 */
#ifndef LMT_CKPT_H
#define LMT_CKPT_H

#include <pthread.h>
#include <stdint.h>

#include "digest.h"
#include "error.h"

#define LMT_CKPT_SCHEMA 1

/* One global tensor to save: its host data (fp32) and shape. */
struct lmt_ckpt_tensor {
	char name[64];
	const float *data;       /* host memory, numel floats */
	size_t numel;
	int ndim, shape[3];
};

/* What a save writes besides the tensors: the manifest's training-state fields,
 * as a JSON object's text without its braces (the caller renders it). */
struct lmt_ckpt_save {
	const char *run_dir;
	uint64_t update;
	int world;
	const struct lmt_ckpt_tensor *tensors;
	int ntensors;
	const char *state_json;  /* e.g. "\"update\":10,\"tokens\":...": spliced in */
};

/* Result of a save, for metrics. */
struct lmt_ckpt_result {
	char path[4096];         /* RUN/ckpt/step-NNNNNNNN */
	uint64_t bytes;
	double write_s;          /* from the start of writing to the fsync of RUN/ckpt */
};

/* Write a checkpoint now (the tensors' host memory must stay valid until it returns). */
int lmt_ckpt_write(const struct lmt_ckpt_save *s, struct lmt_ckpt_result *r, struct lmt_err *err);

/*
 * Asynchronous saving: lmt_ckpt_async_start copies the tensors into the writer's own
 * host buffer (the training pause) and returns; a thread writes the checkpoint.
 * Only one save is in flight: starting another while one runs is refused with
 * LMT_EINVAL and a message saying so. lmt_ckpt_async_poll reports a finished save
 * (1, with its result or error), 0 while running or idle.
 */
struct lmt_ckpt_async {
	pthread_t th;
	pthread_mutex_t mu;
	int running, done, started;
	float *buf;              /* the snapshot */
	size_t cap;
	struct lmt_ckpt_tensor *t;
	int nt;
	char *state_json;
	char *run_dir;
	struct lmt_ckpt_save save;
	struct lmt_ckpt_result res;
	int rc;
	struct lmt_err err;
};

void lmt_ckpt_async_init(struct lmt_ckpt_async *a);
int lmt_ckpt_async_start(struct lmt_ckpt_async *a, const struct lmt_ckpt_save *s, struct lmt_err *err);
int lmt_ckpt_async_poll(struct lmt_ckpt_async *a, struct lmt_ckpt_result *r, int *rc, struct lmt_err *err);
/* Block until the save in flight (if any) ends; then like poll. */
int lmt_ckpt_async_wait(struct lmt_ckpt_async *a, struct lmt_ckpt_result *r, int *rc, struct lmt_err *err);
void lmt_ckpt_async_release(struct lmt_ckpt_async *a);

/* ---- reading ---- */

struct lmt_ckpt_chunk {
	int rank;
	uint64_t offset, count;  /* elements of the global tensor */
	uint64_t byte_offset;    /* into the file's payload */
	uint32_t crc32c;
};

struct lmt_ckpt_entry {
	char *name;
	int ndim, shape[3];
	uint64_t numel;
	struct lmt_ckpt_chunk *chunks;
	int nchunks;
};

struct lmt_ckpt_file {
	char *name;              /* rank-RRRRR.lmckpt */
	int rank;
	uint64_t bytes;
	uint8_t sha256[LMT_SHA256_LEN];
};

struct lmt_ckpt {
	char *dir;
	void *manifest;          /* json_t * */
	uint64_t update;
	int world;
	struct lmt_ckpt_file *files;
	int nfiles;
	struct lmt_ckpt_entry *t;
	int nt;
};

/*
 * Open a checkpoint directory: parse and check its manifest (schema, every field
 * the state needs, chunks tiling each tensor exactly, files listed); with verify,
 * also re-read every data file: header, size, payload SHA-256, each chunk's CRC-32C.
 * Messages name the directory and the file or tensor at fault.
 */
int lmt_ckpt_open(struct lmt_ckpt *c, const char *dir, int verify, struct lmt_err *err);
void lmt_ckpt_close(struct lmt_ckpt *c);
const struct lmt_ckpt_entry *lmt_ckpt_find(const struct lmt_ckpt *c, const char *name);
/* Read a whole global tensor into dst (numel floats), checking each chunk's CRC. */
int lmt_ckpt_read(const struct lmt_ckpt *c, const struct lmt_ckpt_entry *e, float *dst, struct lmt_err *err);
/* The manifest's state fields (json_t *, borrowed). */
void *lmt_ckpt_state(const struct lmt_ckpt *c, const char *key);

/*
 * The newest checkpoint of RUN (by update) that opens and verifies. Invalid or
 * incomplete directories (including .tmp-* from interrupted saves) are reported
 * through report(ctx, path, why) and skipped. Returns 1 and the path in out, 0 if
 * none, < 0 on error.
 */
int lmt_ckpt_latest(const char *run_dir, int verify, char *out, size_t cap,
		    void (*report)(void *ctx, const char *path, const char *why), void *ctx,
		    struct lmt_err *err);

/* Remove RUN/ckpt/NAME: renamed to .del-NAME-PID first (so a crash midway never
 * leaves a step-* directory with files missing), then deleted. */
int lmt_ckpt_remove(const char *run_dir, const char *name, struct lmt_err *err);

/* Checkpoint directories of RUN (step-*), sorted by update; caller frees each and the array. */
int lmt_ckpt_list(const char *run_dir, char ***names, uint64_t **updates, int *n, struct lmt_err *err);

/* Chunk r of n elements over w ranks: [r*n/w, (r+1)*n/w) */
static inline void lmt_ckpt_split(uint64_t n, int w, int r, uint64_t *off, uint64_t *count)
{
	uint64_t a = (uint64_t)((unsigned __int128)n * (unsigned)r / (unsigned)w);
	uint64_t b = (uint64_t)((unsigned __int128)n * ((unsigned)r + 1) / (unsigned)w);
	*off = a;
	*count = b - a;
}

#endif
