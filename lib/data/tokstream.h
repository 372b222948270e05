/*
 * tokstream.h: the token stream that tok-encode writes and shard-pack reads.
 *
 * File (magic "\x89LMTTKS\n", version 1.0): the common header of binformat.h, then
 * 128 bytes of fields:
 *	  0 u32 token_bytes    2 (uint16 tokens, vocab <= 65536) or 4
 *	  4 u32 flags          1: a BOS token starts each document, 2: an EOS ends it
 *	  8 u64 n_tokens      16 u64 n_docs      24 u32 n_sources   28 u32 vocab_size
 *	 32 u8[32] tokenizer_sha256 (the identity of the tokenizer that made the stream)
 *	 64 u64 index_offset  72 u64 sources_offset   (byte offsets into the payload)
 *	 80 u64 text_bytes     sum of the documents' byte counts
 *	 88 u32 bos_id        92 u32 eos_id  (0xffffffff: none)
 *	 96..127 zero
 * Payload:
 *	tokens            n_tokens little-endian integers of token_bytes each, padded to 8
 *	index             n_docs records of 40 bytes, in token order:
 *	                  u64 token_offset, u64 n_tokens, u64 n_bytes (of the source text),
 *	                  u32 source, u32 reserved (0), u64 ordinal (within its source)
 *	sources           n_sources records: u32 length, then the name's bytes; padded to 8
 * Documents are contiguous: document i+1 starts where document i ends. Inserted
 * BOS/EOS tokens are part of a document's tokens.
 */
#ifndef LMT_TOKSTREAM_H
#define LMT_TOKSTREAM_H

#include <stdint.h>
#include <stdio.h>

#include "core/binformat.h"
#include "core/error.h"

#define LMT_TS_BOS 1u
#define LMT_TS_EOS 2u
#define LMT_TS_INDEX_REC 40
/* The writer keeps at most this many bytes of index records in memory, the older in
 * a temporary file (tmpfile(3): glibc's is in /tmp, whatever $TMPDIR says) until the
 * stream is finished: 16 MiB, 419,430 documents; a stream of 100 million short
 * documents held 4 GB. */
#define LMT_TS_INDEX_MEM ((size_t)16 << 20)

struct lmt_tokstream_info {
	uint32_t token_bytes, flags;
	uint64_t n_tokens, n_docs;
	uint32_t n_sources, vocab_size;
	uint8_t tokenizer_sha256[LMT_SHA256_LEN];
	uint64_t text_bytes;
	uint32_t bos, eos;
};

struct lmt_tokstream_doc {
	uint64_t tok_off, n_tok, n_bytes;
	uint32_t source;
	uint64_t ordinal;
};

struct lmt_tokstream_writer {
	struct lmt_binwriter w;
	struct lmt_tokstream_info info;
	uint8_t *index;          /* the newest index records, index_len bytes; the older
				  * ones in spill, once index_limit bytes were reached */
	size_t index_len, index_cap;
	size_t index_limit;      /* 0: LMT_TS_INDEX_MEM (set before the first record: the tests') */
	FILE *spill;             /* a temporary file, or NULL */
	uint8_t *conv;           /* scratch for narrowing to uint16 */
	size_t conv_cap;
	uint64_t written;        /* tokens written; n_tokens counts indexed ones */
};

int lmt_tokstream_writer_open(struct lmt_tokstream_writer *w, const char *path, const struct lmt_tokstream_info *info,
		 struct lmt_err *err);
int lmt_tokstream_writer_doc(struct lmt_tokstream_writer *w, const uint32_t *toks, size_t n, uint64_t nbytes,
		uint32_t source, uint64_t ordinal, struct lmt_err *err);
/* The same in two steps, for writers that batch: the tokens of any number of
 * documents, then one index record per document, in the same order. */
int lmt_tokstream_writer_tokens(struct lmt_tokstream_writer *w, const uint32_t *toks, size_t n, struct lmt_err *err);
int lmt_tokstream_writer_index(struct lmt_tokstream_writer *w, uint64_t ntok, uint64_t nbytes, uint32_t source,
		  uint64_t ordinal, struct lmt_err *err);
/* Writes index and source names, then the header; sha_out gets the file's SHA-256. */
int lmt_tokstream_writer_finish(struct lmt_tokstream_writer *w, const char *const *sources, uint32_t nsources,
		   uint8_t *sha_out, struct lmt_err *err);
void lmt_tokstream_writer_abort(struct lmt_tokstream_writer *w);

struct lmt_tokstream_reader {
	struct lmt_binreader f;
	struct lmt_tokstream_info info;
	const uint8_t *tokens;
	const uint8_t *index;
	char **sources;
};

/* Open and check a stream (path "-" reads stdin). verify: also check the payload
 * SHA-256 and that every token is below vocab_size. */
int lmt_tokstream_reader_open(struct lmt_tokstream_reader *r, const char *path, int verify, struct lmt_err *err);
void lmt_tokstream_reader_close(struct lmt_tokstream_reader *r);
void lmt_tokstream_reader_doc(const struct lmt_tokstream_reader *r, uint64_t i, struct lmt_tokstream_doc *d);
static inline uint32_t lmt_tokstream_reader_token(const struct lmt_tokstream_reader *r, uint64_t i)
{
	if (r->info.token_bytes == 2) {
		uint16_t v;
		__builtin_memcpy(&v, r->tokens + 2 * i, 2);
		return v;
	}
	uint32_t v;
	__builtin_memcpy(&v, r->tokens + 4 * i, 4);
	return v;
}

#endif
