/*
 * reshard.h: a checkpoint rewritten for another world size (ckpt-reshard(1)),
 * as three steps a tool (or a job restarting on fewer ranks) calls in turn.
 *
 * Resharding copies every value bit for bit into the chunks of the new world
 * (ckpt.h: rank r holds [r*n/W, (r+1)*n/W) of each tensor), recomputes the
 * manifest (files, chunks, sizes, SHA-256, CRC-32C) and rewrites what in the
 * training state depends on the world size: the loader's cursors (loader.h's
 * rule, lmt_loader_rebase), its world, the sharding's world and the per-rank RNG
 * list. It streams: a group of up to LMT_RESHARD_GROUP new ranks is written at
 * once, tensor by tensor, so memory holds one tensor (or GROUP/N of one), not the
 * state. The caller makes the staging directory; the writing reads the new
 * checkpoint back and verifies it before the commit renames it into place, never
 * over an existing directory.
 */
#ifndef LMT_RESHARD_H
#define LMT_RESHARD_H

#include <stdint.h>

#include "ckpt/ckpt.h"
#include "core/error.h"

#define LMT_RESHARD_GROUP 64 /* new ranks written at once: their files are open together */

/*
 * The training state of c for a world of N ranks, as JSON text (*state,
 * malloc'd); *consumed gets K, the global indices the ranks read before their
 * cursors. Loader ranks in lockstep have cursors K + r for a common K; new rank
 * r' continues at K + r'. The new ranks' RNG entries are copies of the old ones,
 * refused (LMT_EFORMAT) unless those differ only in their rank. Keys named
 * "world" other than the two rewritten are told to note(ctx, msg) (may be NULL)
 * and left as they were; state.config, the record of the run, stays as it was.
 */
int lmt_reshard_state(const struct lmt_ckpt *c, int N, char **state, uint64_t *consumed,
		      void (*note)(void *ctx, const char *msg), void *ctx, struct lmt_err *err);

struct lmt_reshard_result {
	uint64_t bytes;              /* of the new shard files */
	uint64_t peak_buffer_bytes;  /* the buffer of one group's run of a tensor */
};
/*
 * c's tensors for N ranks, with state, written into the existing empty directory
 * dir, then read back and verified. interrupted(ctx) (may be NULL) is asked
 * before each tensor and before the read-back: nonzero stops with LMT_EIO
 * "interrupted".
 */
int lmt_reshard_write(const struct lmt_ckpt *c, int N, const char *dir, const char *state,
		      int (*interrupted)(void *ctx), void *ctx, struct lmt_reshard_result *r, struct lmt_err *err);
/* staging renamed to out, failing rather than replacing anything made there
 * meanwhile (even an empty directory); then out and its parent fsynced. */
int lmt_reshard_commit(const char *staging, const char *out, struct lmt_err *err);

#endif
