/*
 * tarball.c: reproducible release archives; see tarball.h.
 *
 * Everything that tar would take from the machine (times, owners, modes, the
 * order of a directory listing) is fixed here, so that the archive is a function
 * of the members' names and bytes alone.
 */
#include "report/tarball.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomicfile.h"
#include "core/util.h"

#define CHUNK (1 << 16)

static const char *aerr(struct archive *a)
{
	const char *s = archive_error_string(a);
	return s ? s : "unknown libarchive error";
}

static int write_member(struct archive *a, const struct lmt_tar_member *m, char *buf, const char *path,
			struct lmt_err *err)
{
	uint64_t size = m->size;
	FILE *fp = NULL;
	if (!m->data) {
		struct stat st;
		fp = fopen(m->path, "rb");
		if (!fp || fstat(fileno(fp), &st)) {
			int rc = lmt_err_errno(err, "'%s'", m->path);
			if (fp)
				fclose(fp);
			return rc;
		}
		if (!S_ISREG(st.st_mode)) {
			fclose(fp);
			return lmt_err_set(err, LMT_EINVAL, "'%s' is not a regular file", m->path);
		}
		size = (uint64_t)st.st_size;
	}
	struct archive_entry *e = archive_entry_new();
	if (!e) {
		if (fp)
			fclose(fp);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	archive_entry_set_pathname(e, m->name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_uname(e, "root");
	archive_entry_set_gname(e, "root");
	archive_entry_set_mtime(e, LMT_TARBALL_MTIME, 0);
	int rc = 0;
	if (archive_write_header(a, e) != ARCHIVE_OK) {
		rc = lmt_err_set(err, LMT_EIO, "'%s': member '%s': %s", path, m->name, aerr(a));
		goto out;
	}
	uint64_t done = 0;
	while (done < size) {
		size_t k = (size_t)LMT_MIN((uint64_t)CHUNK, size - done);
		const void *src;
		if (m->data) {
			src = (const char *)m->data + done;
		} else {
			if (fread(buf, 1, k, fp) != k) {
				rc = ferror(fp) ? lmt_err_errno(err, "'%s'", m->path)
						: lmt_err_set(err, LMT_EIO, "'%s': shorter than it was (changed while read)",
							      m->path);
				goto out;
			}
			src = buf;
		}
		if (archive_write_data(a, src, k) != (la_ssize_t)k) {
			rc = lmt_err_set(err, LMT_EIO, "'%s': member '%s': %s", path, m->name, aerr(a));
			goto out;
		}
		done += k;
	}
out:
	archive_entry_free(e);
	if (fp)
		fclose(fp);
	return rc;
}

int lmt_tarball_write(const char *path, const struct lmt_tar_member *m, int n, struct lmt_err *err)
{
	struct lmt_atomicfile af;
	int r = lmt_atomicfile_open(&af, path, err);
	if (r)
		return r;
	struct archive *a = archive_write_new();
	char *buf = malloc(CHUNK);
	int rc = 0;
	if (!a || !buf) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto fail;
	}
	if (archive_write_set_format_ustar(a) != ARCHIVE_OK || archive_write_add_filter_zstd(a) != ARCHIVE_OK) {
		rc = lmt_err_set(err, LMT_EUNSUPPORTED, "'%s': this libarchive cannot write ustar with zstd: %s", path,
				 aerr(a));
		goto fail;
	}
	/* no padding after the compressed stream (a block device's habit, which
	 * zstd would read as a bad frame) */
	if (archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK || archive_write_open_FILE(a, af.fp) != ARCHIVE_OK) {
		rc = lmt_err_set(err, LMT_EIO, "'%s': %s", path, aerr(a));
		goto fail;
	}
	for (int i = 0; i < n; i++)
		if ((rc = write_member(a, &m[i], buf, path, err)))
			goto fail;
	if (archive_write_close(a) != ARCHIVE_OK) {
		rc = lmt_err_set(err, LMT_EIO, "'%s': %s", path, aerr(a));
		goto fail;
	}
	archive_write_free(a);
	free(buf);
	return lmt_atomicfile_commit(&af, err);
fail:
	if (a)
		archive_write_free(a);
	free(buf);
	lmt_atomicfile_abort(&af);
	return rc ? rc : LMT_EIO;
}

int lmt_tarball_scan(const char *path, size_t keep_max, int (*fn)(void *ctx, const struct lmt_tar_entry *e),
		     void *ctx, struct lmt_err *err)
{
	struct archive *a = archive_read_new();
	char *buf = malloc(CHUNK), *keep = NULL;
	size_t keep_cap = 0;
	int rc = 0;
	if (!a || !buf) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_all(a);
	struct stat st;
	if (stat(path, &st)) {
		rc = lmt_err_errno(err, "'%s'", path);
		goto out;
	}
	if (archive_read_open_filename(a, path, CHUNK) != ARCHIVE_OK) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': %s", path, aerr(a));
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': not an archive that can be read: %s", path, aerr(a));
			goto out;
		}
		struct lmt_tar_entry t;
		memset(&t, 0, sizeof t);
		t.name = archive_entry_pathname(e);
		if (!t.name)
			t.name = "";
		t.regular = archive_entry_filetype(e) == AE_IFREG;
		struct lmt_sha256 h;
		if (lmt_sha256_init(&h)) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			goto out;
		}
		int keepit = t.regular && archive_entry_size_is_set(e) && (uint64_t)archive_entry_size(e) <= keep_max;
		size_t kl = 0;
		for (;;) {
			la_ssize_t k = archive_read_data(a, buf, CHUNK);
			if (k == 0)
				break;
			if (k < 0) {
				lmt_sha256_release(&h);
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': member '%s': %s", path, t.name, aerr(a));
				goto out;
			}
			lmt_sha256_update(&h, buf, (size_t)k);
			t.size += (uint64_t)k;
			if (keepit) {
				if (kl + (size_t)k > keep_max) {
					keepit = 0; /* larger than its header said */
				} else {
					if (LMT_GROW(keep, keep_cap, kl + (size_t)k + 1)) {
						lmt_sha256_release(&h);
						rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
						goto out;
					}
					memcpy(keep + kl, buf, (size_t)k);
					kl += (size_t)k;
				}
			}
		}
		lmt_sha256_final(&h, t.sha256);
		if (keepit) {
			if (LMT_GROW(keep, keep_cap, kl + 1)) {
				rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
				goto out;
			}
			keep[kl] = 0;
			t.data = keep;
		}
		if ((rc = fn(ctx, &t)))
			goto out;
	}
out:
	if (a)
		archive_read_free(a);
	free(buf);
	free(keep);
	return rc;
}
