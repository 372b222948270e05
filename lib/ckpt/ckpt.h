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

#include "core/digest.h"
#include "core/error.h"

/* 2: the manifest ends with "manifest_sha256", a checksum of itself (jsonseal.h);
 * 1 (wave 1) had none and is refused by name (ckpt-inspect --rehash seals one). */
#define LMT_CKPT_SCHEMA 2
#define LMT_CKPT_SEAL "manifest_sha256"

/* One global tensor to save: its host data (fp32) and shape. */
struct lmt_ckpt_tensor {
	char name[64];
	const float *data;       /* host memory, numel floats */
	size_t numel;
	int ndim, shape[3];
};

/* What a save writes besides the tensors: the manifest's "state", a JSON object's
 * text (the caller renders it). */
struct lmt_ckpt_save {
	const char *run_dir;
	uint64_t update;
	int world;
	const struct lmt_ckpt_tensor *tensors;
	int ntensors;
	const char *state_json;  /* "{\"update\":10,...}", spliced in as is */
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
 * The same save by every rank of comm at once (a collective): rank 0 makes the
 * temporary directory, each rank writes its own data file into it in parallel and
 * reports its size, SHA-256 and chunk CRCs (an all-gather that is also the barrier),
 * and rank 0 writes the manifest only once every rank's file is written and
 * fsynced, then renames. A rank failing or dying leaves no directory that resume
 * accepts. Every rank gets the result; s->world must be comm's.
 */
struct lmt_comm;
int lmt_ckpt_write_ranks(const struct lmt_ckpt_save *s, struct lmt_comm *comm, struct lmt_ckpt_result *r,
			 struct lmt_err *err);

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
	int started;             /* a writer thread runs or awaits collection */
	int done;                /* it has finished (under mu) */
	float *buf;              /* the snapshot */
	size_t cap;
	int threads;             /* for the snapshot copy (0: 1) */
	pthread_t prep;          /* allocating and touching buf (lmt_ckpt_async_reserve) */
	int preparing;
	size_t prep_n;
	struct lmt_ckpt_tensor *t;
	char *state_json;
	char *run_dir;
	struct lmt_ckpt_save save;
	struct lmt_ckpt_result res;
	int rc;
	struct lmt_err err;
};

void lmt_ckpt_async_init(struct lmt_ckpt_async *a);
/* Allocate the snapshot buffer for numel floats and touch its pages on a thread, now,
 * so that the first save's pause is a copy and not a copy plus page faults (on a
 * virtual machine, first-touch faults cost several times the copy). */
void lmt_ckpt_async_reserve(struct lmt_ckpt_async *a, size_t numel);
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

/* a chunk by where it is in the manifest: tensor t's chunk q */
struct lmt_ckpt_cref {
	int t, q;
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
	/* indexes, so that nothing costs world x chunks (a checkpoint of thousands of
	 * ranks has millions of chunks): rank -> its file (world entries), and each
	 * rank's chunks in tensor order, rank r's at rank_chunk[rank_first[r] ..
	 * rank_first[r + 1]) */
	int *file_of_rank;
	size_t *rank_first;
	struct lmt_ckpt_cref *rank_chunk;
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
/* lmt_ckpt_open of a checkpoint lmt_ckpt_list found as step-UPDATE: one whose
 * manifest says another update is refused (LMT_EFORMAT, closed), as a resume and
 * every tool taking a run's newest checkpoint refuse it. */
int lmt_ckpt_open_listed(struct lmt_ckpt *c, const char *dir, uint64_t update, int verify, struct lmt_err *err);

/* Chunk r of n elements over w ranks: [r*n/w, (r+1)*n/w) */
static inline void lmt_ckpt_split(uint64_t n, int w, int r, uint64_t *off, uint64_t *count)
{
	uint64_t a = (uint64_t)((unsigned __int128)n * (unsigned)r / (unsigned)w);
	uint64_t b = (uint64_t)((unsigned __int128)n * ((unsigned)r + 1) / (unsigned)w);
	*off = a;
	*count = b - a;
}

/* ---- reading part of a tensor, writing chunk by chunk (ckpt-reshard) ---- */

/*
 * Read elements [off, off + count) of a global tensor into dst (count floats). Every
 * chunk the range touches is checked whole against its CRC-32C (a CRC covers a
 * chunk), so reading a tensor in k pieces checks a chunk up to k times.
 */
int lmt_ckpt_read_range(const struct lmt_ckpt *c, const struct lmt_ckpt_entry *e, uint64_t off, uint64_t count,
			float *dst, struct lmt_err *err);

/*
 * A checkpoint written piece by piece into a directory the caller made (and
 * renames into place), for tools that hold one tensor at a time instead of the
 * whole state. The files and the manifest are those lmt_ckpt_write makes for the
 * same tensors, world and state.
 *
 *	lmt_ckpt_writer_open(&w, tmpdir, world, tensors, n, &err);  // names, shapes
 *	for each rank r, for each tensor i in order:
 *		lmt_ckpt_writer_chunk(&w, r, i, elements of chunk r of tensor i, &err);
 *	lmt_ckpt_writer_finish(&w, update, state_json, &err);       // manifest last
 *	lmt_ckpt_writer_release(&w);
 *
 * A rank's chunks come in tensor order; ranks may interleave (tensor-major order
 * keeps every rank's file open at once: one descriptor each). A rank's file is
 * created at its first chunk and completed (header, fsync, rename) at its last.
 * finish writes manifest.json atomically and fsyncs the directory; release
 * removes what an unfinished writer left open (the caller removes the directory).
 */
struct lmt_ckpt_wrank;
struct lmt_ckpt_writer {
	char *dir;
	int world, ntensors;
	struct lmt_ckpt_tensor *t;      /* names and shapes (data unused) */
	struct lmt_ckpt_wrank *ranks;   /* world entries */
	uint64_t bytes;                 /* data files and manifest, once finished */
};

int lmt_ckpt_writer_open(struct lmt_ckpt_writer *w, const char *dir, int world, const struct lmt_ckpt_tensor *t,
			 int ntensors, struct lmt_err *err);
/* Append chunk `rank` of tensor i (lmt_ckpt_split(numel, world, rank) elements). */
int lmt_ckpt_writer_chunk(struct lmt_ckpt_writer *w, int rank, int i, const float *data, struct lmt_err *err);
/* state_json: the manifest's "state" object, braces included (NULL: {}). */
int lmt_ckpt_writer_finish(struct lmt_ckpt_writer *w, uint64_t update, const char *state_json,
			   struct lmt_err *err);
void lmt_ckpt_writer_release(struct lmt_ckpt_writer *w);

/*
 * Deliberate surgery: seal RUN/ckpt/step-N/manifest.json anew as it now stands (an
 * older schema is carried to the current one), so that a hand edit someone stands
 * behind is accepted. Writes the manifest atomically; checks nothing else (verify
 * afterwards). r says what was re-signed.
 */
struct lmt_ckpt_rehash_result {
	int old_schema;                         /* the schema_version it had */
	int was_sealed;                         /* its seal matched before */
	uint8_t old_sha256[LMT_SHA256_LEN];     /* of the file before */
	uint8_t new_sha256[LMT_SHA256_LEN];     /* and after */
};
int lmt_ckpt_rehash(const char *dir, struct lmt_ckpt_rehash_result *r, struct lmt_err *err);

#endif
