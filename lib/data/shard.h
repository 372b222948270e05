/*
 * shard.h: the packed training sequences that shard-pack writes and the loader reads.
 *
 * A shard holds n_seqs sequences of seq_len + 1 tokens each: a model reads tokens
 * [0, seq_len) as inputs and [1, seq_len + 1) as targets. Sequences do not overlap:
 * every token of the input stream is in exactly one sequence (or counted as dropped
 * tail in the manifest). Which positions belong to which document is recorded as
 * segments, so a trainer can mask attention across documents and drop targets that
 * cross a boundary; positions covered by no segment are padding, whatever token
 * they hold.
 *
 * File (magic "\x89LMTSHD\n", version 1.0): the common header of binformat.h, then 64
 * bytes of fields:
 *	 0 u32 token_bytes   2 or 4          4 u32 seq_len (a sequence is seq_len + 1 tokens)
 *	 8 u64 n_seqs       16 u64 n_segments
 *	24 u32 split         0 train, 1 val, 2 test
 *	28 u32 shard_index   position of this shard in its split
 *	32 u32 pad_id        the token written at padding positions
 *	36 u32 flags         1: packed (documents run on across sequences), 2: padded
 *	                     (each document starts a sequence)
 *	40 u64 seg_index_offset   byte offsets into the payload
 *	48 u64 segments_offset
 *	56..63 zero
 * Payload, each section padded to 8 bytes:
 *	tokens        n_seqs * (seq_len + 1) little-endian integers of token_bytes
 *	seg_index     n_seqs + 1 u64: sequence i's segments are [seg_index[i], seg_index[i+1])
 *	segments      n_segments records of 16 bytes: u32 start (position in the
 *	              sequence), u32 length (tokens), u64 document (its number in the
 *	              input token stream)
 * Segments of a sequence are in position order and do not overlap.
 */
#ifndef LMT_SHARD_H
#define LMT_SHARD_H

#include <stdint.h>

#include "core/binformat.h"
#include "core/error.h"

enum lmt_split { LMT_SPLIT_TRAIN = 0, LMT_SPLIT_VAL = 1, LMT_SPLIT_TEST = 2 };
#define LMT_SHARD_PACKED 1u
#define LMT_SHARD_PADDED 2u
#define LMT_SEG_REC 16

const char *lmt_split_name(int split);

struct lmt_shard_info {
	uint32_t token_bytes, seq_len;
	uint64_t n_seqs, n_segments;
	uint32_t split, shard_index, pad_id, flags;
};

struct lmt_segment {
	uint32_t start, len;
	uint64_t doc;
};

/* Writer: sequences stream to the file as they come; the segment tables are kept in
 * memory and written at the end, then the header. The file appears only complete. */
struct lmt_shardw {
	struct lmt_binwriter w;
	struct lmt_shard_info info;
	uint64_t *seg_index;
	size_t si_cap;
	uint8_t *segs;
	size_t seg_len, seg_cap;
	uint8_t *conv;
	size_t conv_cap;
	/* lmt_shardw_chunks: the SHA-256 of every chunk_bytes of the payload */
	uint64_t chunk_bytes, chunk_fill;
	struct lmt_sha256 chunk;
	uint8_t *chunk_sha;      /* nchunks digests of 32 bytes; after finish, the caller's */
	size_t nchunks, chunk_cap;
};

int lmt_shardw_open(struct lmt_shardw *w, const char *path, const struct lmt_shard_info *info,
		    struct lmt_err *err);
/* toks: seq_len + 1 tokens; segs: nseg segments in position order. */
int lmt_shardw_add(struct lmt_shardw *w, const uint32_t *toks, const struct lmt_segment *segs,
		   uint32_t nseg, struct lmt_err *err);
/* Also hash the payload in chunks of chunk_bytes (the last one shorter), for a
 * manifest that lets one shard be verified by several threads; call before the
 * first lmt_shardw_add. */
void lmt_shardw_chunks(struct lmt_shardw *w, uint64_t chunk_bytes);
/* Finish and commit; sha_out receives the payload SHA-256, *bytes the file size.
 * With chunks, w->chunk_sha (w->nchunks digests, malloc'd) is then the caller's
 * to free (after a failure, nothing is). */
int lmt_shardw_finish(struct lmt_shardw *w, uint8_t sha_out[32], uint64_t *bytes, struct lmt_err *err);
void lmt_shardw_abort(struct lmt_shardw *w);

/* Reader: the file mapped; checks header, sizes, segment consistency and (with
 * verify) the payload SHA-256. */
struct lmt_shard {
	struct lmt_binreader f;
	struct lmt_shard_info info;
	const uint8_t *tokens;
	const uint8_t *seg_index;
	const uint8_t *segs;
};

int lmt_shard_open(struct lmt_shard *s, const char *path, int verify, struct lmt_err *err);
/* The same checks but the payload's, of a shard the caller has mapped and checked
 * as it saw fit: s takes f over (f is left empty), and is closed on failure. */
int lmt_shard_adopt(struct lmt_shard *s, struct lmt_binreader *f, struct lmt_err *err);
void lmt_shard_close(struct lmt_shard *s);
/* Copy sequence i's tokens (seq_len + 1) to out. */
void lmt_shard_tokens(const struct lmt_shard *s, uint64_t i, uint32_t *out);
/* Sequence i's segments: count, and the records (up to max) in out. */
uint32_t lmt_shard_segments(const struct lmt_shard *s, uint64_t i, struct lmt_segment *out, uint32_t max);

#endif
