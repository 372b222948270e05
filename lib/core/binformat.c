/*
 * binformat.c: reading, checking and writing the common lmt binary header.
 */
#include "core/binformat.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"

const struct lmt_format lmt_format_tokenizer = {
	"\x89LMTTOK\n", 1, 0, "tokenizer", 64,
};
const struct lmt_format lmt_format_tokens = {
	"\x89LMTTKS\n", 1, 0, "token stream", 128,
};
const struct lmt_format lmt_format_shard = {
	"\x89LMTSHD\n", 1, 0, "shard", 64,
};

static const struct { const char *magic, *name; } known[] = {
	{ "\x89LMTTOK\n", "lmt tokenizer" },
	{ "\x89LMTTKS\n", "lmt token stream" },
	{ "\x89LMTSHD\n", "lmt shard" },
	{ "\x89LMTCKP\n", "lmt checkpoint data file" },
};

const char *lmt_magic_name(const uint8_t magic[8])
{
	for (size_t i = 0; i < LMT_ARRAY_SIZE(known); i++)
		if (!memcmp(magic, known[i].magic, 8))
			return known[i].name;
	return NULL;
}

/* Render 8 magic bytes as a C-like escaped string for messages. */
static char *show_magic(const uint8_t *m, char *out)
{
	char *o = out;
	for (int i = 0; i < 8; i++) {
		if (m[i] == '\n')
			o += sprintf(o, "\\n");
		else if (isprint(m[i]) && m[i] != '\\' && m[i] != '"')
			*o++ = (char)m[i];
		else
			o += sprintf(o, "\\x%02x", m[i]);
	}
	*o = 0;
	return out;
}

static void hdr_decode(struct lmt_hdr *h, const uint8_t *b)
{
	memcpy(h->magic, b, 8);
	h->major = lmt_load_u16(b + 8);
	h->minor = lmt_load_u16(b + 10);
	h->header_size = lmt_load_u32(b + 12);
	h->payload_size = lmt_load_u64(b + 16);
	memcpy(h->payload_sha256, b + 24, 32);
	h->header_crc = lmt_load_u32(b + 56);
	h->flags = lmt_load_u32(b + 60);
}

static void hdr_encode(const struct lmt_hdr *h, uint8_t *b)
{
	memcpy(b, h->magic, 8);
	lmt_store_u16(b + 8, h->major);
	lmt_store_u16(b + 10, h->minor);
	lmt_store_u32(b + 12, h->header_size);
	lmt_store_u64(b + 16, h->payload_size);
	memcpy(b + 24, h->payload_sha256, 32);
	lmt_store_u32(b + 56, h->header_crc);
	lmt_store_u32(b + 60, h->flags);
}

static uint32_t header_crc(const uint8_t *b, size_t n)
{
	static const uint8_t zero[4];
	uint32_t c = lmt_crc32c(0, b, 56);
	c = lmt_crc32c(c, zero, 4);
	return lmt_crc32c(c, b + 60, n - 60);
}

/* The checks that need only the fixed 64 bytes. */
static int check_fixed(struct lmt_hdr *h, const uint8_t *buf, size_t avail, const char *path,
		       const struct lmt_format *fmt, struct lmt_err *err)
{
	char found[40], want[40];
	if (avail < 8 || memcmp(buf, fmt->magic, 8)) {
		if (avail < 8)
			return lmt_err_set(err, LMT_EFORMAT,
				"'%s': file is %zu bytes, too short for an lmt %s (64-byte header)",
				path, avail, fmt->name);
		const char *other = lmt_magic_name(buf);
		if (other)
			return lmt_err_set(err, LMT_EFORMAT,
				"'%s': this is an %s, expected an lmt %s", path, other, fmt->name);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': bad magic \"%s\", expected \"%s\" (an lmt %s)",
				   path, show_magic(buf, found), show_magic((const uint8_t *)fmt->magic, want),
				   fmt->name);
	}
	if (avail < LMT_HDR_SIZE)
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': truncated header: %zu bytes, expected at least %d",
			path, avail, LMT_HDR_SIZE);
	hdr_decode(h, buf);
	if (h->major != fmt->major)
		return lmt_err_set(err, LMT_EVERSION,
			"'%s': %s format version %u.%u, this build reads %u.x",
			path, fmt->name, h->major, h->minor, fmt->major);
	if (h->header_size < LMT_HDR_SIZE || h->header_size % 8 || h->header_size > (1u << 24))
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': header size %u is invalid (expected a multiple of 8, at least %d)",
			path, h->header_size, LMT_HDR_SIZE);
	if (h->header_size < LMT_HDR_SIZE + fmt->ext_size && h->minor <= fmt->minor)
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': header size %u, expected at least %u for %s version %u.%u",
			path, h->header_size, LMT_HDR_SIZE + fmt->ext_size, fmt->name, h->major, h->minor);
	if (h->header_size < LMT_HDR_SIZE + fmt->ext_size)
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': header size %u is smaller than the %u bytes version %u.%u needs",
			path, h->header_size, LMT_HDR_SIZE + fmt->ext_size, fmt->major, fmt->minor);
	return 0;
}

int lmt_hdr_parse(struct lmt_hdr *h, const uint8_t *buf, size_t avail, const char *path,
		  const struct lmt_format *fmt, struct lmt_err *err)
{
	int rc = check_fixed(h, buf, avail, path, fmt, err);
	if (rc)
		return rc;
	if (avail < h->header_size)
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': truncated header: %zu bytes, header size says %u", path, avail, h->header_size);
	uint32_t crc = header_crc(buf, h->header_size);
	if (!LMT_FUZZING && crc != h->header_crc) /* LMT_FUZZING: skipped in the fuzz build */
		return lmt_err_set(err, LMT_ECHECKSUM,
			"'%s': header checksum 0x%08x does not match computed 0x%08x (header corrupted)",
			path, h->header_crc, crc);
	if (h->flags)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': unknown header flags 0x%x", path, h->flags);
	return 0;
}

static int check_payload(const struct lmt_hdr *h, const uint8_t *payload, const char *path,
			 struct lmt_err *err)
{
	uint8_t d[32];
	char a[65], b[65];
	lmt_sha256(payload, h->payload_size, d);
	if (!LMT_FUZZING && memcmp(d, h->payload_sha256, 32)) /* LMT_FUZZING: skipped in the fuzz build */
		return lmt_err_set(err, LMT_ECHECKSUM,
			"'%s': payload sha256 %s does not match the header's %s (payload corrupted)",
			path, lmt_sha256_hex(d, a), lmt_sha256_hex(h->payload_sha256, b));
	return 0;
}

int lmt_binreader_open(struct lmt_binreader *f, const char *path, const struct lmt_format *fmt,
		     int flags, struct lmt_err *err)
{
	memset(f, 0, sizeof *f);
	f->path = path;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return lmt_err_errno(err, "'%s'", path);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int rc = lmt_err_errno(err, "'%s': stat", path);
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': not a regular file", path);
	}
	f->size = (size_t)st.st_size;
	if (f->size) {
		f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (f->map == MAP_FAILED) {
			f->map = NULL;
			int rc = lmt_err_errno(err, "'%s': mmap", path);
			close(fd);
			return rc;
		}
	}
	close(fd);
	const uint8_t *b = f->map;
	int rc = lmt_hdr_parse(&f->hdr, b ? b : (const uint8_t *)"", f->size, path, fmt, err);
	if (rc)
		goto fail;
	if (f->hdr.payload_size != f->size - f->hdr.header_size) {
		rc = lmt_err_set(err, LMT_EFORMAT,
			"'%s': file is %zu bytes, header says %u + %llu = %llu (%s)",
			path, f->size, f->hdr.header_size, (unsigned long long)f->hdr.payload_size,
			(unsigned long long)(f->hdr.header_size + f->hdr.payload_size),
			f->size < f->hdr.header_size + f->hdr.payload_size ? "truncated" : "trailing bytes");
		goto fail;
	}
	f->ext = b + LMT_HDR_SIZE;
	f->ext_len = f->hdr.header_size - LMT_HDR_SIZE;
	f->payload = b + f->hdr.header_size;
	f->payload_size = f->hdr.payload_size;
	if ((flags & LMT_BIN_VERIFY) && (rc = check_payload(&f->hdr, f->payload, path, err)))
		goto fail;
	return 0;
fail:
	lmt_binreader_close(f);
	return rc;
}

void lmt_binreader_close(struct lmt_binreader *f)
{
	if (f->map && f->size)
		munmap(f->map, f->size);
	else
		free(f->map);
	memset(f, 0, sizeof *f);
}

void lmt_binreader_drop(const struct lmt_binreader *f, const void *p, size_t n)
{
	if (!f->map || !f->size || !n)
		return;
	uintptr_t page = lmt_page_bytes(), a = (uintptr_t)p, b = a + n;
	a = (a + page - 1) & ~(page - 1);
	b &= ~(page - 1);
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

int lmt_binreader_read_stream(struct lmt_binreader *f, FILE *in, const char *name,
			    const struct lmt_format *fmt, struct lmt_err *err)
{
	memset(f, 0, sizeof *f);
	f->path = name;
	uint8_t first[LMT_HDR_SIZE];
	size_t got = fread(first, 1, sizeof first, in);
	if (ferror(in))
		return lmt_err_errno(err, "'%s': read", name);
	int rc = check_fixed(&f->hdr, first, got, name, fmt, err);
	if (rc)
		return rc;
	uint64_t total = (uint64_t)f->hdr.header_size + f->hdr.payload_size;
	if (total > ((uint64_t)1 << 40))
		return lmt_err_set(err, LMT_EFORMAT, "'%s': header claims %llu bytes", name,
				   (unsigned long long)total);
	uint8_t *buf = malloc(total ? total : 1);
	if (!buf)
		return lmt_err_set(err, LMT_ENOMEM, "'%s': cannot hold %llu bytes", name,
				   (unsigned long long)total);
	memcpy(buf, first, LMT_HDR_SIZE);
	size_t want = total - LMT_HDR_SIZE;
	size_t n = fread(buf + LMT_HDR_SIZE, 1, want, in);
	if (ferror(in)) {
		free(buf);
		return lmt_err_errno(err, "'%s': read", name);
	}
	if (n < want) {
		free(buf);
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': stream ended after %zu bytes, header says %llu (truncated)",
			name, n + LMT_HDR_SIZE, (unsigned long long)total);
	}
	if (fgetc(in) != EOF) {
		free(buf);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': trailing bytes after %llu-byte %s", name,
				   (unsigned long long)total, fmt->name);
	}
	if ((rc = lmt_hdr_parse(&f->hdr, buf, total, name, fmt, err)) ||
	    (rc = check_payload(&f->hdr, buf + f->hdr.header_size, name, err))) {
		free(buf);
		return rc;
	}
	f->map = buf;
	f->size = 0; /* marks "malloc'd" for close */
	f->ext = buf + LMT_HDR_SIZE;
	f->ext_len = f->hdr.header_size - LMT_HDR_SIZE;
	f->payload = buf + f->hdr.header_size;
	f->payload_size = f->hdr.payload_size;
	return 0;
}

int lmt_bin_pack(const struct lmt_format *fmt, const void *ext, const void *payload, size_t n,
		 uint8_t **out, size_t *outlen, struct lmt_err *err)
{
	size_t hs = LMT_HDR_SIZE + fmt->ext_size;
	uint8_t *b = calloc(1, hs + n);
	if (!b)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	struct lmt_hdr h = { 0 };
	memcpy(h.magic, fmt->magic, 8);
	h.major = fmt->major;
	h.minor = fmt->minor;
	h.header_size = (uint32_t)hs;
	h.payload_size = n;
	lmt_sha256(payload, n, h.payload_sha256);
	hdr_encode(&h, b);
	memcpy(b + LMT_HDR_SIZE, ext, fmt->ext_size);
	lmt_store_u32(b + 56, header_crc(b, hs));
	if (n)
		memcpy(b + hs, payload, n);
	*out = b;
	*outlen = hs + n;
	return 0;
}

int lmt_binwriter_open(struct lmt_binwriter *w, const char *path, const struct lmt_format *fmt,
		  struct lmt_err *err)
{
	memset(w, 0, sizeof *w);
	w->af.slot = -1;
	w->fmt = fmt;
	w->header_size = LMT_HDR_SIZE + fmt->ext_size;
	w->name = "<stdout>";
	if (lmt_sha256_init(&w->sha))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	if (!path || !strcmp(path, "-")) {
		/* stdout can be a pipe, and even a redirected file is write-only, so the
		 * header cannot be patched in place: spill, then copy */
		w->to_stdout = 1;
		w->spill = 1;
		w->fp = tmpfile();
		if (!w->fp) {
			lmt_sha256_release(&w->sha);
			return lmt_err_errno(err, "cannot create a spill file for stdout");
		}
	} else {
		int rc = lmt_atomicfile_open(&w->af, path, err);
		if (rc) {
			lmt_sha256_release(&w->sha);
			return rc;
		}
		w->fp = w->af.fp;
		/* the atomic file's copy, not path: a caller's path may be a buffer
		 * that is gone (or reused) before a later write fails */
		w->name = w->af.path;
	}
	static const uint8_t zero[LMT_HDR_SIZE + 256];
	if (w->header_size > sizeof zero || fwrite(zero, 1, w->header_size, w->fp) != w->header_size) {
		int rc = lmt_err_errno(err, "'%s': write", w->name);
		lmt_binwriter_abort(w);
		return rc;
	}
	return 0;
}

int lmt_binwriter_write(struct lmt_binwriter *w, const void *data, size_t n, struct lmt_err *err)
{
	if (n && fwrite(data, 1, n, w->fp) != n)
		return lmt_err_errno(err, "'%s': write", w->name);
	if (!w->external_sha)
		lmt_sha256_update(&w->sha, data, n);
	w->payload_size += n;
	return 0;
}

void lmt_binwriter_external_sha(struct lmt_binwriter *w, const uint8_t *sha)
{
	w->external_sha = 1;
	if (sha)
		memcpy(w->payload_sha256, sha, LMT_SHA256_LEN);
}

/* Hash the whole file through fp, from offset 0 to EOF. */
static int hash_stream(FILE *fp, uint8_t *out, const char *name, struct lmt_err *err)
{
	struct lmt_sha256 s;
	if (lmt_sha256_init(&s))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	char *buf = malloc(1 << 20);
	if (!buf || fseeko(fp, 0, SEEK_SET)) {
		free(buf);
		lmt_sha256_release(&s);
		return lmt_err_errno(err, "'%s': rewind", name);
	}
	size_t n;
	while ((n = fread(buf, 1, 1 << 20, fp)) > 0)
		lmt_sha256_update(&s, buf, n);
	int bad = ferror(fp);
	free(buf);
	if (bad) {
		lmt_sha256_release(&s);
		return lmt_err_errno(err, "'%s': read back", name);
	}
	lmt_sha256_final(&s, out);
	return 0;
}

int lmt_binwriter_finish(struct lmt_binwriter *w, const void *ext, uint8_t *sha_out, struct lmt_err *err)
{
	struct lmt_hdr h = { 0 };
	uint8_t hb[LMT_HDR_SIZE + 256];
	int rc;
	memcpy(h.magic, w->fmt->magic, 8);
	h.major = w->fmt->major;
	h.minor = w->fmt->minor;
	h.header_size = w->header_size;
	h.payload_size = w->payload_size;
	lmt_sha256_final(&w->sha, h.payload_sha256);
	if (w->external_sha)
		memcpy(h.payload_sha256, w->payload_sha256, LMT_SHA256_LEN);
	memcpy(w->payload_sha256, h.payload_sha256, LMT_SHA256_LEN);
	memset(hb, 0, sizeof hb);
	hdr_encode(&h, hb);
	memcpy(hb + LMT_HDR_SIZE, ext, w->fmt->ext_size);
	h.header_crc = header_crc(hb, w->header_size);
	lmt_store_u32(hb + 56, h.header_crc);

	if (fflush(w->fp) || fseeko(w->fp, 0, SEEK_SET) ||
	    fwrite(hb, 1, w->header_size, w->fp) != w->header_size || fflush(w->fp)) {
		rc = lmt_err_errno(err, "'%s': write header", w->name);
		goto fail;
	}
#ifdef SYNC_FILE_RANGE_WRITE
	/* the commit's fsync waits for every page to reach the disk: start writing
	 * them back now, while the file is read back for its hash (a hint: an error
	 * here shows again at the fsync) */
	if (sha_out && !w->spill)
		(void)sync_file_range(fileno(w->fp), 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
	if (sha_out && (rc = hash_stream(w->fp, sha_out, w->name, err)))
		goto fail;
	if (w->spill) {
		char *buf = malloc(1 << 20);
		size_t n;
		if (!buf || fseeko(w->fp, 0, SEEK_SET)) {
			free(buf);
			rc = lmt_err_errno(err, "spill file");
			goto fail;
		}
		while ((n = fread(buf, 1, 1 << 20, w->fp)) > 0) {
			if (fwrite(buf, 1, n, stdout) != n) {
				free(buf);
				rc = lmt_err_errno(err, "'<stdout>': write");
				goto fail;
			}
		}
		free(buf);
		fclose(w->fp);
		w->fp = NULL;
		if (fflush(stdout))
			return lmt_err_errno(err, "'<stdout>': write");
		return 0;
	}
	rc = lmt_atomicfile_commit(&w->af, err);
	w->fp = NULL;
	return rc;
fail:
	lmt_binwriter_abort(w);
	return rc;
}

void lmt_binwriter_abort(struct lmt_binwriter *w)
{
	if (w->sha.ctx)
		lmt_sha256_release(&w->sha);
	if (w->spill && w->fp)
		fclose(w->fp);
	else if (!w->to_stdout)
		lmt_atomicfile_abort(&w->af);
	w->fp = NULL;
}
