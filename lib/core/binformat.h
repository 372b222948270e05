/*
 * binformat.h: the common header of every lmt binary file, its reader and its writer.
 *
 * Layout (little-endian), 64 bytes, followed by format-specific header fields and
 * then the payload:
 *
 *	off size field
 *	  0    8 magic           0x89 'L' 'M' 'T' + 3 type letters + '\n' (non-ASCII
 *	                         first byte, like PNG, so text tools see binary)
 *	  8    2 major           readers reject a major they do not know
 *	 10    2 minor           readers accept any minor of a known major
 *	 12    4 header_size     bytes from file start to payload start (>= 64, 8-aligned);
 *	                         readers skip header bytes they do not know
 *	 16    8 payload_size    bytes of payload; header_size + payload_size == file size
 *	 24   32 payload_sha256  SHA-256 of the payload bytes
 *	 56    4 header_crc32c   CRC-32C of bytes [0, header_size) with this field as 0
 *	 60    4 flags           reserved, 0
 *	 64    . format fields   (header_size - 64 bytes, defined by each format)
 *
 * The header CRC catches a corrupted field in the format-specific part as well as in
 * the common part; the SHA-256 catches a corrupted payload. Each format documents
 * its own fields in its header file and in lmt-formats(5).
 */
#ifndef LMT_BINFORMAT_H
#define LMT_BINFORMAT_H

#include <stdint.h>
#include <stdio.h>

#include "core/atomicfile.h"
#include "core/digest.h"
#include "core/error.h"

#define LMT_HDR_SIZE 64

struct lmt_hdr {
	uint8_t magic[8];
	uint16_t major, minor;
	uint32_t header_size;
	uint64_t payload_size;
	uint8_t payload_sha256[LMT_SHA256_LEN];
	uint32_t header_crc;
	uint32_t flags;
};

/* What a reader expects: magic, the major it reads, a name for messages. */
struct lmt_format {
	const char *magic;   /* 8 bytes */
	uint16_t major, minor;
	const char *name;    /* "tokenizer", "token stream", ... */
	uint32_t ext_size;   /* format-specific header bytes this build writes */
};

extern const struct lmt_format lmt_format_tokenizer;
extern const struct lmt_format lmt_format_tokens;
extern const struct lmt_format lmt_format_shard;
extern const struct lmt_format lmt_format_ckpt;

/* A file mapped into memory and checked. */
struct lmt_binreader {
	const char *path;        /* borrowed, for messages */
	void *map;
	size_t size;
	struct lmt_hdr hdr;
	const uint8_t *ext;      /* format-specific header fields */
	size_t ext_len;          /* header_size - 64 */
	const uint8_t *payload;
	uint64_t payload_size;
};

enum {
	LMT_BIN_VERIFY = 1,      /* check the payload SHA-256 (default for small files) */
};

/*
 * Map and check path: magic, major version, header size, header CRC, file size
 * against header_size + payload_size and, with LMT_BIN_VERIFY, the payload SHA-256.
 * Each failure names the file and gives the found and expected values.
 */
int lmt_binreader_open(struct lmt_binreader *f, const char *path, const struct lmt_format *fmt,
		     int flags, struct lmt_err *err);
void lmt_binreader_close(struct lmt_binreader *f);

/*
 * Done with bytes [p, p + n) of f's payload for now: the whole pages among them
 * leave the mapping (a later read maps them again from the page cache), so that
 * close has less to unmap and the threads that read a large file share that
 * work. Nothing for a file read into memory (lmt_binreader_read_stream).
 */
void lmt_binreader_drop(const struct lmt_binreader *f, const void *p, size_t n);

/* Check a header already in memory (avail bytes of it); fills *h. */
int lmt_hdr_parse(struct lmt_hdr *h, const uint8_t *buf, size_t avail, const char *path,
		  const struct lmt_format *fmt, struct lmt_err *err);

/*
 * Read a file from a stream (stdin): header, then payload into memory; same checks.
 * *buf receives the whole file (header + payload), caller frees.
 */
int lmt_binreader_read_stream(struct lmt_binreader *f, FILE *in, const char *name,
			    const struct lmt_format *fmt, struct lmt_err *err);

/* Name a magic if it is one of lmt's formats ("token stream"), else NULL. */
const char *lmt_magic_name(const uint8_t magic[8]);

/* Build a whole file in memory: header (with format fields ext) + payload.
 * *out is malloc'd; the caller frees it. */
int lmt_bin_pack(const struct lmt_format *fmt, const void *ext, const void *payload, size_t n,
		 uint8_t **out, size_t *outlen, struct lmt_err *err);

/*
 * Writer. Payload bytes stream through lmt_binwriter_write (hashed on the way); the header
 * is written last. Output goes to an atomic file, or to stdout when path is NULL or
 * "-" (through a temporary spill file, since the header comes first).
 */
struct lmt_binwriter {
	struct lmt_atomicfile af;
	FILE *fp;                /* where payload bytes go now */
	int to_stdout;
	int spill;               /* fp is a tmpfile to be copied to stdout */
	const struct lmt_format *fmt;
	uint32_t header_size;
	uint64_t payload_size;
	struct lmt_sha256 sha;
	const char *name;        /* for messages: "<stdout>" or af.path, never the caller's path */
	uint8_t payload_sha256[LMT_SHA256_LEN]; /* set by lmt_binwriter_finish */
	int external_sha;        /* the caller hashes the payload (lmt_binwriter_external_sha) */
};

int lmt_binwriter_open(struct lmt_binwriter *w, const char *path, const struct lmt_format *fmt,
		  struct lmt_err *err);
int lmt_binwriter_write(struct lmt_binwriter *w, const void *data, size_t n, struct lmt_err *err);
/* For writers that hash the payload on another thread while this one writes it:
 * from now on lmt_binwriter_write does not hash, and lmt_binwriter_finish puts sha (the
 * payload's SHA-256, which must be right: readers check it) in the header. Call
 * before the first payload byte, then again with the digest before finishing. */
void lmt_binwriter_external_sha(struct lmt_binwriter *w, const uint8_t *sha);
/* Write the header (with the format fields ext, fmt->ext_size bytes) and commit.
 * If sha_out is non-NULL it receives the SHA-256 of the whole file. */
int lmt_binwriter_finish(struct lmt_binwriter *w, const void *ext, uint8_t *sha_out, struct lmt_err *err);
void lmt_binwriter_abort(struct lmt_binwriter *w);

#endif
