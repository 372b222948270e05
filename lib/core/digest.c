/*
 * digest.c: SHA-256 wrappers over OpenSSL EVP, and a table-driven CRC-32C.
 */
#include "core/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"

int lmt_sha256_init(struct lmt_sha256 *s)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(c);
		s->ctx = NULL;
		return LMT_ENOMEM;
	}
	s->ctx = c;
	return 0;
}

void lmt_sha256_update(struct lmt_sha256 *s, const void *data, size_t n)
{
	if (n)
		EVP_DigestUpdate(s->ctx, data, n);
}

void lmt_sha256_final(struct lmt_sha256 *s, uint8_t out[LMT_SHA256_LEN])
{
	unsigned len = LMT_SHA256_LEN;
	EVP_DigestFinal_ex(s->ctx, out, &len);
	lmt_sha256_release(s);
}

void lmt_sha256_release(struct lmt_sha256 *s)
{
	EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
}

void lmt_sha256(const void *data, size_t n, uint8_t out[LMT_SHA256_LEN])
{
	unsigned len = LMT_SHA256_LEN;
	EVP_Digest(data, n, out, &len, EVP_sha256(), NULL);
}

char *lmt_sha256_hex(const uint8_t d[LMT_SHA256_LEN], char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < LMT_SHA256_LEN; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[64] = 0;
	return out;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

int lmt_sha256_parse(const char *hex, uint8_t d[LMT_SHA256_LEN])
{
	for (int i = 0; i < LMT_SHA256_LEN; i++) {
		int h = hexval(hex[2 * i]), l = h < 0 ? -1 : hexval(hex[2 * i + 1]);
		if (h < 0 || l < 0)
			return -1;
		d[i] = (uint8_t)(h << 4 | l);
	}
	return hex[64] == 0 ? 0 : -1;
}

int lmt_sha256_file(const char *path, uint8_t out[LMT_SHA256_LEN], struct lmt_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return lmt_err_errno(err, "'%s'", path);
	struct lmt_sha256 s;
	if (lmt_sha256_init(&s)) {
		close(fd);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	size_t bufsz = 1 << 20;
	char *buf = malloc(bufsz);
	if (!buf) {
		lmt_sha256_release(&s);
		close(fd);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (;;) {
		ssize_t n = read(fd, buf, bufsz);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = lmt_err_errno(err, "'%s': read", path);
			free(buf);
			lmt_sha256_release(&s);
			close(fd);
			return rc;
		}
		if (n == 0)
			break;
		lmt_sha256_update(&s, buf, (size_t)n);
	}
	free(buf);
	close(fd);
	lmt_sha256_final(&s, out);
	return 0;
}

/* Reflected CRC-32C, polynomial 0x82F63B78; the table is built on first use. */
static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
	__atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc32c_table(uint32_t crc, const unsigned char *p, size_t n)
{
	if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
		crc_init();
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
/* The SSE4.2 crc32 instruction computes CRC-32C itself, 8 bytes at a time. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t n)
{
	uint64_t c = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t lmt_crc32c(uint32_t crc, const void *data, size_t n)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return crc32c_hw(crc, data, n);
#endif
	return crc32c_table(crc, data, n);
}
