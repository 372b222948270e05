/*
 * digest.h: SHA-256 (through OpenSSL's libcrypto, which uses the CPU's SHA
 * extensions where present) and CRC-32C (for small header checksums).
 *
 * SHA-256 is the identity of every lmt artifact: tokenizers, token streams, shards,
 * checkpoints. Hex strings are lower case, 64 characters plus NUL.
 */
#ifndef LMT_DIGEST_H
#define LMT_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define LMT_SHA256_LEN 32
#define LMT_SHA256_HEX 65

struct lmt_sha256 {
	void *ctx; /* EVP_MD_CTX */
};

int lmt_sha256_init(struct lmt_sha256 *s);
void lmt_sha256_update(struct lmt_sha256 *s, const void *data, size_t n);
/* Writes the digest and releases the context. */
void lmt_sha256_final(struct lmt_sha256 *s, uint8_t out[LMT_SHA256_LEN]);
void lmt_sha256_release(struct lmt_sha256 *s);
void lmt_sha256(const void *data, size_t n, uint8_t out[LMT_SHA256_LEN]);

/* out must hold LMT_SHA256_HEX bytes. Returns out. */
char *lmt_sha256_hex(const uint8_t d[LMT_SHA256_LEN], char *out);
/* Parse 64 hex digits. Returns 0 or -1. */
int lmt_sha256_parse(const char *hex, uint8_t d[LMT_SHA256_LEN]);

/* SHA-256 of a whole file. */
int lmt_sha256_file(const char *path, uint8_t out[LMT_SHA256_LEN], struct lmt_err *err);

/* CRC-32C (Castagnoli), as used by iSCSI and ext4; crc starts at 0. */
uint32_t lmt_crc32c(uint32_t crc, const void *data, size_t n);

#endif
