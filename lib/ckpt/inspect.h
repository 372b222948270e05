/*
 * inspect.h: what ckpt-inspect finds, as data and as its JSONL records: which
 * checkpoint a run stands for, each tensor read for inspection with its
 * statistics (the listing's scan, over every rank's file), and how two
 * checkpoints differ, tensor by tensor and state field by state field.
 *
 * Unlike lmt_ckpt_read, which refuses a chunk whose CRC-32C does not match, the
 * reader here reads on and notes it, so a damaged checkpoint is described in full
 * rather than refused; it reads in element order, a block at a time, so a
 * checkpoint of any size is inspected in constant memory (one block, two for a
 * comparison). The caller prints: these functions return numbers and messages.
 */
#ifndef LMT_CKPT_INSPECT_H
#define LMT_CKPT_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "ckpt/verify.h"
#include "core/error.h"
#include "core/json.h"

/*
 * The newest checkpoint of run (RUN/ckpt/step-N, by update) whose manifest opens,
 * into out (cap bytes). Unlike lmt_ckpt_latest it verifies nothing and removes no
 * interrupted save: an inspection must not change a run, which may be live. Each
 * interrupted save, then each checkpoint passed over, is told to skip(ctx, msg)
 * (may be NULL) as it is found. Returns 1 with the path in out, 0 when none
 * opens (*seen: there were checkpoints or interrupted saves), < 0 on an error.
 */
int lmt_ckpt_newest(const char *run, char *out, size_t cap, int *seen, void (*skip)(void *ctx, const char *msg),
		    void *ctx, struct lmt_err *err);

/*
 * What an inspection's argument names: a checkpoint (a directory holding
 * manifest.json), else a run (a directory holding ckpt/: its newest checkpoint
 * that opens, as lmt_ckpt_newest, telling skip what it passes over), else the
 * directory itself, which will not open. path gets it (cap bytes), *from_run
 * whether it came from a run. LMT_EIO: arg cannot be stat'ed; LMT_EINVAL: not a
 * directory; LMT_ENOTFOUND: a run none of whose checkpoints opens.
 */
int lmt_ckpt_resolve(const char *arg, char *path, size_t cap, int *from_run, void (*skip)(void *ctx, const char *msg),
		     void *ctx, struct lmt_err *err);

/* An opened checkpoint: its manifest and what its files look like on disk. */
struct lmt_ckpt_target {
	struct lmt_ckpt c;
	const char *path;
	struct lmt_ckpt_dfile *f;  /* parallel to c.files (lmt_ckpt_dfile_check_all) */
	int uncommitted;           /* a .tmp-step-* directory (lmt_ckpt_name_check) */
	char name_problem[256];
	int no_manifest;           /* set when opening failed because there is no manifest.json */
};
/* Open the checkpoint at path without verifying it, and look at its files. On
 * failure nothing is held; k->no_manifest says whether there was a manifest. */
int lmt_ckpt_target_open(struct lmt_ckpt_target *k, const char *path, struct lmt_err *err);
void lmt_ckpt_target_close(struct lmt_ckpt_target *k);

/* ---- reading a tensor in element order ---- */

struct lmt_ckpt_treader {
	const struct lmt_ckpt *c;
	const struct lmt_ckpt_dfile *f; /* lmt_ckpt_dfile_check_all(c) */
	const struct lmt_ckpt_entry *e;
	int q;                  /* the chunk being read */
	uint64_t at;            /* its elements read so far */
	uint32_t crc, whole;    /* CRC-32C of chunk q so far, of the tensor so far */
	int bad_chunks;
	int fd, fd_file;        /* the one file held open, and its index (-1: none) */
	char err[1024];
};

void lmt_ckpt_treader_init(struct lmt_ckpt_treader *r, const struct lmt_ckpt *c, const struct lmt_ckpt_dfile *f,
			   const struct lmt_ckpt_entry *e);
/*
 * The next n elements of the tensor (fewer only at its end; 0 at its end) into dst.
 * A chunk whose CRC does not match is counted in bad_chunks, noted in r->err and
 * read on; elements that cannot be read at all (a missing or short file) end the
 * reading: -1, with r->err set.
 */
long lmt_ckpt_treader_read(struct lmt_ckpt_treader *r, float *dst, size_t n);
void lmt_ckpt_treader_release(struct lmt_ckpt_treader *r);

/* ---- statistics ---- */

struct lmt_ckpt_stats {
	uint64_t n, nonfinite;  /* finite values, and the others */
	double sum, sumsq, min, max;
};

void lmt_ckpt_stats_init(struct lmt_ckpt_stats *s);
/* Finite values enter the sums; the others are only counted. */
void lmt_ckpt_stats_add(struct lmt_ckpt_stats *s, const float *x, size_t n);

/* "384x32": the shape of e, into b (cap bytes, truncated if short). */
const char *lmt_ckpt_shape_str(const struct lmt_ckpt_entry *e, char *b, size_t cap);

/* ---- listing: what each tensor holds ---- */

/* What a listing says of one tensor: from its manifest entry alone, or from its
 * data as found in every rank's file. */
struct lmt_ckpt_tscan {
	const struct lmt_ckpt_entry *e;
	char shape[64];         /* lmt_ckpt_shape_str */
	int read;               /* its data was read (else: the manifest alone) */
	int readable;           /* every element could be read (1 when not read) */
	int bad_chunks;
	int ok;                 /* readable, and every chunk's CRC-32C matches */
	uint32_t crc32c;        /* read: of the data as found; else its single chunk's (0: none) */
	struct lmt_ckpt_stats s;
	int has_stats;          /* read, readable, some finite values: s.min, s.max, mean, rms hold */
	double mean, rms;
	char err[1024];         /* why not ok */
};

/* A listing's pass over the tensors, in whatever order and selection the caller
 * scans them, with the totals so far. */
struct lmt_ckpt_scan {
	const struct lmt_ckpt *c;
	const struct lmt_ckpt_dfile *f; /* lmt_ckpt_dfile_check_all(c) */
	float *buf;             /* a block of the data; NULL: the manifest alone */
	void (*progress)(void *ctx, uint64_t bytes); /* bytes read in this scan so far; may be NULL */
	void *ctx;
	int tensors, bad_tensors, nonfinite_tensors;
	uint64_t elements, bytes, nonfinite, bytes_read;
	uint64_t file_bytes;    /* of every data file, on disk */
	int bad_files;          /* data files with a problem (f[i].problem) */
};

/* read: read the data (statistics, CRC-32C of what is found), else describe the
 * tensors from the manifest alone. Fails only when out of memory. */
int lmt_ckpt_scan_init(struct lmt_ckpt_scan *s, const struct lmt_ckpt *c, const struct lmt_ckpt_dfile *f, int read,
		       void (*progress)(void *ctx, uint64_t bytes), void *ctx, struct lmt_err *err);
/* Describe tensor e into t, adding it to the totals. */
void lmt_ckpt_scan_tensor(struct lmt_ckpt_scan *s, const struct lmt_ckpt_entry *e, struct lmt_ckpt_tscan *t);
void lmt_ckpt_scan_release(struct lmt_ckpt_scan *s);

/* ---- comparing ---- */

struct lmt_ckpt_tdiff {
	uint64_t differing, nonfinite_mismatch;
	double max_abs, max_ref; /* the largest |a-b| and |a| or |b| (finite ones) */
	double rel;             /* max_abs relative to max_ref (at least FLT_MIN) */
};

enum lmt_ckpt_tstatus {
	LMT_CKPT_TSTATUS_SAME,
	LMT_CKPT_TSTATUS_DIFFER,
	LMT_CKPT_TSTATUS_SHAPE,
	LMT_CKPT_TSTATUS_ONLY_A,
	LMT_CKPT_TSTATUS_ONLY_B,
	LMT_CKPT_TSTATUS_ERROR,
	LMT_CKPT_TSTATUS_COUNT, /* how many there are, not a status */
};

/* "same", "differ", "shape", "only-a", "only-b", "error" */
const char *lmt_ckpt_tstatus_name(enum lmt_ckpt_tstatus s);

/*
 * Compare a tensor of checkpoint A with one of B (either entry may be NULL: only in
 * the other), bb and ba blocks of n floats each. Elements are equal when bitwise
 * equal, or both finite and within atol (atol > 0), or both NaN. progress (may be
 * NULL) gets the bytes of A compared in this call so far. On LMT_CKPT_TSTATUS_ERROR
 * err holds why.
 */
struct lmt_ckpt_side {
	const struct lmt_ckpt *c;
	const struct lmt_ckpt_dfile *f;
};
enum lmt_ckpt_tstatus lmt_ckpt_tensor_diff(struct lmt_ckpt_side a, const struct lmt_ckpt_entry *ea,
					   struct lmt_ckpt_side b, const struct lmt_ckpt_entry *eb, double atol,
					   float *ba, float *bb, size_t n, void (*progress)(void *ctx, uint64_t bytes),
					   void *ctx, struct lmt_ckpt_tdiff *t, char *err, size_t cap);

struct lmt_ckpt_diff_ops {
	/* Is the tensor called name compared? NULL: every one is. */
	int (*selected)(void *ctx, const char *name);
	/* Each comparison, as lmt_ckpt_tensor_diff made it: A's tensors in A's order,
	 * then those only in B in B's order (ea NULL). err is "" unless st is ERROR. */
	void (*report)(void *ctx, const struct lmt_ckpt_entry *ea, const struct lmt_ckpt_entry *eb,
		       enum lmt_ckpt_tstatus st, const struct lmt_ckpt_tdiff *t, const char *err);
	void (*progress)(void *ctx, uint64_t bytes); /* bytes of A compared so far; may be NULL */
	void *ctx;
};

/*
 * Compare every selected tensor of A with B's of the same name, and report those
 * only in B, counting each status in count. Reads in blocks of a few MiB (two at a
 * time); fails only when out of memory.
 */
int lmt_ckpt_diff(struct lmt_ckpt_side a, struct lmt_ckpt_side b, double atol, const struct lmt_ckpt_diff_ops *ops,
		  int count[LMT_CKPT_TSTATUS_COUNT], struct lmt_err *err);

/*
 * Every dotted path under key ("state", "state.loader.cursors[0].cursor") where the
 * JSON values a and b (json_t *; either NULL: absent) differ, through fn(ctx, path,
 * a, b) with a or b NULL where only the other has it. A path under an ignored key
 * (given with or without "state.") is left out with what it holds.
 */
void lmt_ckpt_state_diff(const char *key, void *a, void *b, const char *const *ignore, int nignore,
			 void (*fn)(void *ctx, const char *path, void *a, void *b), void *ctx);

/* ---- the JSONL records (ckpt-inspect(1) documents each field) ----
 *
 * As report/evalrec.h does: each function begins a record in j (lmt_json_begin
 * empties it) and leaves it open for the caller to end and write
 * (lmt_json_end_line), so the tool emits it with its own error handling. The
 * fields and their order are the format: the tests compare them byte for byte.
 */

/* "checkpoint": c, opened from path, its files as found (f) and its state. */
void lmt_ckpt_record_checkpoint(struct lmt_json *j, const char *path, const struct lmt_ckpt *c,
				const struct lmt_ckpt_dfile *f, int committed);
/* "tensor": one tensor of a listing. */
void lmt_ckpt_record_tensor(struct lmt_json *j, const struct lmt_ckpt_tscan *t);
/* "summary": a listing's totals; read: its data was read. */
void lmt_ckpt_record_summary(struct lmt_json *j, const char *path, const struct lmt_ckpt *c,
			     const struct lmt_ckpt_scan *s, int read, int committed);
/* "tensor": one comparison of lmt_ckpt_diff, as its report gets it. */
void lmt_ckpt_record_tdiff(struct lmt_json *j, const struct lmt_ckpt_entry *ea, const struct lmt_ckpt_entry *eb,
			   enum lmt_ckpt_tstatus st, const struct lmt_ckpt_tdiff *t, const char *err);
/* "diff": checkpoints a and b (opened from pa and pb) and the tolerance. */
void lmt_ckpt_record_diff(struct lmt_json *j, const char *pa, const struct lmt_ckpt *a, const char *pb,
			  const struct lmt_ckpt *b, double atol);
/* "state": a state field that differs, its JSON texts in a and b (NULL: absent). */
void lmt_ckpt_record_state(struct lmt_json *j, const char *key, const char *a, const char *b);
/* "summary" of a comparison: lmt_ckpt_diff's counts, errors (the unreadable tensors
 * and files), state fields that differ. */
void lmt_ckpt_record_diff_summary(struct lmt_json *j, const int count[LMT_CKPT_TSTATUS_COUNT], int errors,
				  int state_differ, int identical);
/* "verify-summary": lmt_ckpt_verify's result for c at path; ok: nothing is wrong,
 * its name and its commit included. */
void lmt_ckpt_record_verify_summary(struct lmt_json *j, const char *path, const struct lmt_ckpt *c,
				    const struct lmt_ckpt_verify_result *res, int ok, int committed, double seconds);
/* "verify": a file's verdict or a bad chunk (not an unlisted file). */
void lmt_ckpt_record_finding(struct lmt_json *j, const struct lmt_ckpt_finding *f);
/* "rehash": the manifest re-sealed (hex: its file's SHA-256 before and after). */
void lmt_ckpt_record_rehash(struct lmt_json *j, const char *dir, const struct lmt_ckpt_rehash_result *r,
			    const char *old_hex, const char *new_hex);
/* "incomplete": dir, which is not a checkpoint, as lmt_ckpt_explain explained it. */
void lmt_ckpt_record_explanation(struct lmt_json *j, const char *dir, const struct lmt_ckpt_explanation *x);

#endif
