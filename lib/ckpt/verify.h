/*
 * verify.h: the one definition of a valid checkpoint, as a walk that reports what
 * it finds, and what a directory that is not a checkpoint holds.
 *
 * git's fsck is the model: the library finds, the command prints. lmt_ckpt_verify
 * re-reads every data file a checkpoint's manifest lists (its header, its size, its
 * payload's SHA-256 and every chunk's CRC-32C, in one pass over the payload with
 * pread, in blocks of a few MiB, so a checkpoint of any size is verified in
 * constant memory) and reports every finding through a callback instead of
 * stopping at the first: ckpt-inspect --verify prints them all, lmt_ckpt_open
 * (verify) stops at the first and makes it its error, so train --resume, runcard,
 * evalppl and ckpt-reshard refuse exactly what ckpt-inspect --verify flags.
 */
#ifndef LMT_CKPT_VERIFY_H
#define LMT_CKPT_VERIFY_H

#include <stdint.h>

#include "ckpt/ckpt.h"
#include "core/binformat.h"
#include "core/error.h"

/* A data file as found on disk, checked against the manifest from its header alone. */
struct lmt_ckpt_dfile {
	char path[4096];
	int usable;             /* exists and is a regular file */
	uint64_t size;          /* on disk */
	uint64_t payload_at;    /* its header's size, or the size this build writes */
	int hdr_ok;
	struct lmt_hdr hdr;
	int code;               /* LMT_E* of the first problem; 0 when none */
	char problem[1024];     /* "" when the file is what the manifest says */
};

/* Look at data file i of c: everything that can be checked without reading its
 * payload (existence, size, header, rank, world, chunk count, dtype), each problem
 * appended to d->problem, "; " between them. Opens nothing it leaves open. */
void lmt_ckpt_dfile_check(const struct lmt_ckpt *c, int i, struct lmt_ckpt_dfile *d);

/* The checks of every file of c: an array of c->nfiles (caller frees), NULL when
 * out of memory. */
struct lmt_ckpt_dfile *lmt_ckpt_dfile_check_all(const struct lmt_ckpt *c);

enum lmt_ckpt_finding_kind {
	LMT_CKPT_FINDING_FILE,  /* a data file's verdict, ok or not: one per file, before its chunks */
	LMT_CKPT_FINDING_CHUNK, /* a chunk whose bytes are missing or do not match its CRC-32C */
	LMT_CKPT_FINDING_EXTRA, /* a *.lmckpt the manifest does not list: ignored, not a fault */
};

struct lmt_ckpt_finding {
	enum lmt_ckpt_finding_kind kind;
	int ok;                 /* FILE: the file is what the manifest says */
	int code;               /* LMT_E* when not ok */
	int file;               /* FILE, CHUNK: the file's index in c->files; EXTRA: -1 */
	const char *path;       /* the file */
	const struct lmt_ckpt_entry *tensor;  /* CHUNK: the tensor and its chunk */
	const struct lmt_ckpt_chunk *chunk;
	const char *msg;        /* what is wrong, naming file and tensor; "" when ok */
};

struct lmt_ckpt_verify_ops {
	/* Every finding, in order: the files in the manifest's order, each followed by
	 * its bad chunks in the manifest's tensor order; then the unlisted files.
	 * Returning non-zero stops the walk. */
	int (*report)(void *ctx, const struct lmt_ckpt_finding *f);
	void (*progress)(void *ctx, uint64_t bytes); /* payload bytes read so far; may be NULL */
	void *ctx;
};

struct lmt_ckpt_verify_result {
	int bad_files, bad_tensors;
	uint64_t bytes;         /* payload bytes read */
};

/*
 * Verify every data file of c (opened by lmt_ckpt_open, without verify). Returns 0
 * when nothing is wrong, 1 when something is (each reported), < 0 on an error that
 * stopped the walk (out of memory). res may be NULL.
 */
int lmt_ckpt_verify(const struct lmt_ckpt *c, const struct lmt_ckpt_verify_ops *ops,
		    struct lmt_ckpt_verify_result *res, struct lmt_err *err);

/* Read n bytes at off, or fewer at the end of the file; -1 on an error (errno).
 * The reads of verification and inspection, shared with inspect.c. */
long lmt_ckpt_pread(int fd, void *buf, size_t n, uint64_t off);

/* Append a problem to buf, "; " between problems; the first one wins if space
 * runs out. How the walk and the tensor reader gather what they find. */
void lmt_ckpt_note(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The last component of path (trailing slashes dropped), into b. */
const char *lmt_ckpt_base_name(const char *path, char *b, size_t cap);

/* ".tmp-step-NNNNNNNN-PID", an interrupted save: 1 with its update and pid, else 0. */
int lmt_ckpt_tmp_name(const char *name, unsigned long long *update, long *pid);

/*
 * What the name of dir says of c, the checkpoint in it: 1 when dir is an
 * interrupted save (.tmp-step-N-PID, never renamed into place), else 0; problem
 * (cap bytes) says so when a step-N name is not c's update, and is "" otherwise.
 */
int lmt_ckpt_name_check(const struct lmt_ckpt *c, const char *dir, char *problem, size_t cap);

/* ---- directories that are not checkpoints ---- */

struct lmt_ckpt_dirent {
	char *name;
	const char *kind;       /* "data", "data-temporary", "manifest", "manifest-temporary",
				   "directory", "other", or "missing" (listed, absent) */
	uint64_t bytes;
	int missing;            /* listed in the manifest, absent: no size */
	char *status;           /* what it is, in words */
};

struct lmt_ckpt_explanation {
	int tmp, step;          /* named .tmp-step-N-PID, or step-N */
	unsigned long long update;
	long pid;
	const char *manifest;   /* "absent", "invalid", "inconsistent" */
	char reason[2048];      /* why it is not a checkpoint, naming it */
	struct lmt_ckpt_dirent *ents;  /* what it holds, by name, then what it lacks */
	int nents;
};

/*
 * Say what dir holds and why it is not a checkpoint. why is lmt_ckpt_open's
 * message when there is a manifest.json that does not open, else NULL. Fails
 * (LMT_ENOTFOUND) when dir is neither a checkpoint nor a run directory: no
 * manifest.json and nothing that looks like checkpoint data.
 */
int lmt_ckpt_explain(struct lmt_ckpt_explanation *x, const char *dir, const char *why, struct lmt_err *err);
void lmt_ckpt_explanation_release(struct lmt_ckpt_explanation *x);

#endif
