/*
 * inspect.h: reading a checkpoint's tensors for inspection, their statistics, and
 * how two checkpoints differ, tensor by tensor and state field by state field.
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

/* ---- comparing ---- */

struct lmt_ckpt_tdiff {
	uint64_t differing, nonfinite_mismatch;
	double max_abs, max_ref; /* the largest |a-b| and |a| or |b| (finite ones) */
};

enum lmt_ckpt_tstatus {
	LMT_CKPT_TSTATUS_SAME,
	LMT_CKPT_TSTATUS_DIFFER,
	LMT_CKPT_TSTATUS_SHAPE,
	LMT_CKPT_TSTATUS_ONLY_A,
	LMT_CKPT_TSTATUS_ONLY_B,
	LMT_CKPT_TSTATUS_ERROR,
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

/*
 * Every dotted path under key ("state", "state.loader.cursors[0].cursor") where the
 * JSON values a and b (json_t *; either NULL: absent) differ, through fn(ctx, path,
 * a, b) with a or b NULL where only the other has it. A path under an ignored key
 * (given with or without "state.") is left out with what it holds.
 */
void lmt_ckpt_state_diff(const char *key, void *a, void *b, const char *const *ignore, int nignore,
			 void (*fn)(void *ctx, const char *path, void *a, void *b), void *ctx);

#endif
