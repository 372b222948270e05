/*
 * test-binformat: the common binary header's checks, through the tokenizer file.
 *
 * A valid tokenizer file is corrupted one way at a time: every byte of every header
 * field, a byte of the payload, truncation at several lengths, trailing bytes, the
 * magic of another lmt format, a newer major version. Each must be rejected with the
 * right code and a message naming the file. A newer minor version with a longer
 * header must be accepted (readers skip header bytes they do not know). Also the
 * basics the header rests on: SHA-256 and CRC-32C test vectors, and atomic writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/binformat.h"
#include "core/digest.h"
#include "core/json.h"
#include "tap.h"
#include "data/tokenizer.h"
#include "data/tokinterop.h"
#include "core/util.h"

static char dir[] = "/tmp/lmt-test-bin.XXXXXX";
static char path[256];

static void put(const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	fwrite(b, 1, n, f);
	fclose(f);
}

static int load(struct lmt_err *err)
{
	struct lmt_tokenizer t;
	int rc = lmt_tok_load(&t, path, err);
	if (!rc)
		lmt_tok_release(&t);
	return rc;
}

static uint32_t crc_of(const uint8_t *b, size_t hs)
{
	uint8_t *c = malloc(hs);
	memcpy(c, b, hs);
	memset(c + 56, 0, 4);
	uint32_t r = lmt_crc32c(0, c, hs);
	free(c);
	return r;
}

static void check_vectors(void)
{
	uint8_t d[32];
	char hex[65];
	lmt_sha256("abc", 3, d);
	tap_ok(!strcmp(lmt_sha256_hex(d, hex), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	       "sha256(\"abc\") matches FIPS 180-2");
	tap_ok(lmt_crc32c(0, "123456789", 9) == 0xe3069283u, "crc32c(\"123456789\") = 0xe3069283 (RFC 3720)");
	/* the hardware path (where the CPU has one) against a bitwise reference, at
	 * every alignment and length up to 200, and chained */
	unsigned char buf[256];
	for (int i = 0; i < 256; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	int same = 1;
	for (int off = 0; off < 8; off++)
		for (int len = 0; len <= 200; len++) {
			uint32_t c = ~0u;
			for (int k = 0; k < len; k++) {
				c ^= buf[off + k];
				for (int b = 0; b < 8; b++)
					c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
			}
			c = ~c;
			uint32_t half = lmt_crc32c(lmt_crc32c(0, buf + off, (size_t)len / 2), buf + off + len / 2,
						   (size_t)(len - len / 2));
			same &= lmt_crc32c(0, buf + off, (size_t)len) == c && half == c;
		}
	tap_ok(same, "crc32c equals a bitwise reference at 8 alignments and 201 lengths, also chained");
	uint8_t back[32];
	tap_ok(lmt_sha256_parse(hex, back) == 0 && !memcmp(back, d, 32), "sha256 hex parses back");
	tap_ok(lmt_sha256_parse("zz", back) != 0, "bad hex is rejected");
}

static void check_json(void)
{
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "s", "q\"b\\n\n\x01\xff\xc3\xa9");
	lmt_json_num(&j, "x", 0.1);
	lmt_json_num(&j, "nan", 0.0 / 0.0);
	lmt_json_i64(&j, "i", -3);
	lmt_json_arr(&j, "a");
	lmt_json_u64(&j, NULL, 1);
	lmt_json_bool(&j, NULL, 0);
	lmt_json_arr_end(&j);
	lmt_json_end(&j);
	const char *want = "{\"s\":\"q\\\"b\\\\n\\n\\u0001\xef\xbf\xbd\xc3\xa9\",\"x\":0.1,\"nan\":null,\"i\":-3,"
			   "\"a\":[1,false]}";
	if (!tap_ok(!strcmp(j.out.buf, want), "JSON writer: escapes, invalid UTF-8 as U+FFFD, shortest doubles"))
		tap_diag("got %s", j.out.buf);
	char b[32];
	tap_ok(!strcmp(lmt_fmt_double(1.0 / 3, b), "0.3333333333333333") && !strcmp(lmt_fmt_double(2.5, b), "2.5"),
	       "doubles round-trip in the shortest form");
	lmt_json_release(&j);
}

static void check_afile(void)
{
	char p[300], tmpname[300];
	struct lmt_err err;
	snprintf(p, sizeof p, "%s/atomic.txt", dir);
	tap_ok(lmt_write_file_atomic(p, "one", 3, &err) == 0, "atomic write");
	struct lmt_atomicfile af;
	lmt_atomicfile_open(&af, p, &err);
	snprintf(tmpname, sizeof tmpname, "%s", af.tmp);
	fputs("two, but abandoned", af.fp);
	fflush(af.fp);
	struct stat st;
	tap_ok(stat(tmpname, &st) == 0, "an open atomic file writes to a temporary name");
	lmt_atomicfile_abort(&af);
	char *d;
	size_t n;
	lmt_read_file(p, &d, &n, &err);
	tap_ok(n == 3 && !memcmp(d, "one", 3) && stat(tmpname, &st) != 0,
	       "abort leaves the old file and removes the temporary");
	free(d);
	unlink(p);
}

/* Resident bytes of the mapping that holds p, from /proc/self/smaps (-1: not found). */
static long rss_of(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	long rss = -1;
	int in = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
			continue;
		}
		if (in && sscanf(line, "Rss: %ld kB", &rss) == 1)
			break;
	}
	if (f)
		fclose(f);
	return in ? rss * 1024 : -1;
}

/*
 * lmt_binreader_drop: the pages of a mapped file's payload leave the mapping (its
 * resident size falls) and read back the same bytes; a file read into memory keeps
 * its bytes.
 */
static void check_drop(void)
{
	size_t n = (size_t)1 << 20;
	uint8_t *pay = malloc(n), *bin, ext[256] = { 0 }; /* at least any format's ext_size */
	size_t binlen;
	struct lmt_err err = { 0 };
	for (size_t i = 0; i < n; i++)
		pay[i] = (uint8_t)(i * 2654435761u >> 13);
	if (lmt_bin_pack(&lmt_format_tokens, ext, pay, n, &bin, &binlen, &err)) {
		tap_ok(0, "pack a 1 MiB payload: %s", err.msg);
		free(pay);
		return;
	}
	snprintf(path, sizeof path, "%s/drop.lmtoks", dir);
	put(bin, binlen);
	struct lmt_binreader f;
	int rc = lmt_binreader_open(&f, path, &lmt_format_tokens, LMT_BIN_VERIFY, &err);
	tap_ok(rc == 0, "a 1 MiB payload maps (%s)", err.msg);
	if (!rc) {
		long before = rss_of(f.payload + n / 2);
		lmt_binreader_drop(&f, f.payload, (size_t)f.payload_size);
		long after = rss_of(f.payload + n / 2);
		/* every whole page of the payload leaves: at most the header's page and
		 * the last partial one stay */
		long page = sysconf(_SC_PAGESIZE);
		tap_ok(before >= (long)n && after >= 0 && after <= 2 * page,
		       "dropping the payload unmaps its pages: resident %ld bytes before, %ld after", before, after);
		tap_ok(!memcmp(f.payload, pay, n), "the dropped payload reads back the same bytes");
		lmt_binreader_close(&f);
	}
	FILE *in = fopen(path, "rb");
	rc = in ? lmt_binreader_read_stream(&f, in, path, &lmt_format_tokens, &err) : -1;
	if (in)
		fclose(in);
	tap_ok(rc == 0, "the same file reads from a stream (%s)", err.msg);
	if (!rc) {
		lmt_binreader_drop(&f, f.payload, (size_t)f.payload_size);
		tap_ok(!memcmp(f.payload, pay, n), "dropping a payload read into memory keeps its bytes");
		lmt_binreader_close(&f);
	}
	unlink(path);
	free(bin);
	free(pay);
}

int main(void)
{
	check_vectors();
	check_json();
	if (!mkdtemp(dir))
		return 1;
	check_afile();
	check_drop();
	snprintf(path, sizeof path, "%s/t.lmtok", dir);
	struct lmt_tokenizer t;
	struct lmt_err err = { 0 };
	const char *spec[] = { "<|endoftext|>=3000" };
	if (lmt_tok_import_tiktoken(&t, "tests/data/tiktoken/gpt2-3000.tiktoken", "gpt2", spec, 1, &err)) {
		tap_ok(0, "import fixture: %s", err.msg);
		return tap_done();
	}
	uint8_t *good;
	size_t n;
	lmt_tok_serialize(&t, &good, &n, &err);
	lmt_tok_release(&t);
	uint8_t *b = malloc(n + 64);
	uint32_t hs = lmt_load_u32(good + 12);

	memcpy(b, good, n);
	put(b, n);
	tap_ok(load(&err) == 0, "the unmodified file loads");

	/* every header byte: the CRC (or an earlier check) must catch it */
	int all = 1;
	for (uint32_t i = 0; i < hs; i++) {
		memcpy(b, good, n);
		b[i] ^= 0x40;
		put(b, n);
		int rc = load(&err);
		if (rc == 0 || !strstr(err.msg, path)) {
			tap_diag("flipping header byte %u: rc %d, '%s'", i, rc, err.msg);
			all = 0;
		}
	}
	tap_ok(all, "a flipped bit in any of the %u header bytes is rejected, naming the file", hs);

	memcpy(b, good, n);
	b[0] = 'X';
	put(b, n);
	tap_ok(load(&err) == LMT_EFORMAT && strstr(err.msg, "bad magic"), "wrong magic: %s", err.msg);

	memcpy(b, good, n);
	memcpy(b, "\x89LMTTKS\n", 8);
	put(b, n);
	tap_ok(load(&err) == LMT_EFORMAT && strstr(err.msg, "token stream"), "another lmt format is named: %s",
	       err.msg);

	memcpy(b, good, n);
	lmt_store_u16(b + 8, 2);
	lmt_store_u32(b + 56, crc_of(b, hs));
	put(b, n);
	tap_ok(load(&err) == LMT_EVERSION && strstr(err.msg, "version 2.0") && strstr(err.msg, "reads 1.x"),
	       "newer major version: %s", err.msg);

	memcpy(b, good, n);
	b[n - 5] ^= 1;
	put(b, n);
	tap_ok(load(&err) == LMT_ECHECKSUM && strstr(err.msg, "payload"), "flipped payload byte: %s", err.msg);

	size_t cuts[] = { 0, 7, 40, 64, hs - 1, hs, hs + 1, n / 2, n - 1 };
	all = 1;
	for (size_t k = 0; k < LMT_ARRAY_SIZE(cuts); k++) {
		put(good, cuts[k]);
		int rc = load(&err);
		if (rc != LMT_EFORMAT || !strstr(err.msg, path)) {
			tap_diag("truncated to %zu: rc %d '%s'", cuts[k], rc, err.msg);
			all = 0;
		}
	}
	tap_ok(all, "truncation at 9 lengths is rejected as a format error");
	put(good, n - 1);
	load(&err);
	tap_ok(strstr(err.msg, "truncated") != NULL, "truncation is called that: %s", err.msg);

	memcpy(b, good, n);
	memset(b + n, 0, 8);
	put(b, n + 8);
	tap_ok(load(&err) == LMT_EFORMAT && strstr(err.msg, "trailing"), "trailing bytes: %s", err.msg);

	/* header fields consistent with the CRC but not with the payload */
	memcpy(b, good, n);
	lmt_store_u32(b + 64, lmt_load_u32(b + 64) + 1); /* n_vocab */
	lmt_store_u32(b + 56, crc_of(b, hs));
	put(b, n);
	tap_ok(load(&err) == LMT_EFORMAT && strstr(err.msg, "do not match"), "vocab count off by one: %s", err.msg);

	/* a newer minor version with 8 more header bytes is read */
	memcpy(b, good, hs);
	memset(b + hs, 0xab, 8);
	memcpy(b + hs + 8, good + hs, n - hs);
	lmt_store_u16(b + 10, 7);
	lmt_store_u32(b + 12, hs + 8);
	lmt_store_u32(b + 56, crc_of(b, hs + 8));
	put(b, n + 8);
	tap_ok(load(&err) == 0, "minor version 1.7 with a longer header loads (%s)", err.msg);

	free(b);
	free(good);
	unlink(path);
	rmdir(dir);
	return tap_done();
}
