/*
 * tarball.h: reproducible release archives (tar + zstd through libarchive), and
 * reading one back member by member with each member's SHA-256.
 *
 * The same members give the same bytes: POSIX ustar entries in the order given,
 * no directory entries, every member a regular file of mode 0644 owned by 0:0
 * ("root"), with one fixed modification time (LMT_TARBALL_MTIME, not the time
 * of writing), compressed by zstd at its default level on one thread. The
 * archive is written atomically (atomicfile.h).
 */
#ifndef LMT_TARBALL_H
#define LMT_TARBALL_H

#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/error.h"

/* 2000-01-01T00:00:00Z: a fixed time that no tar reader takes for a mistake. */
#define LMT_TARBALL_MTIME 946684800

struct lmt_tar_member {
	const char *name;   /* path inside the archive */
	const void *data;   /* the bytes, or NULL to read them from path */
	size_t size;        /* with data */
	const char *path;   /* a file to copy, when data is NULL */
};

/* Write the members, in order, as a zstd-compressed ustar archive at path. */
int lmt_tarball_write(const char *path, const struct lmt_tar_member *m, int n, struct lmt_err *err);

struct lmt_tar_entry {
	const char *name;
	int regular;        /* a regular file (otherwise a directory, a link, ...) */
	uint64_t size;
	uint8_t sha256[LMT_SHA256_LEN];
	const char *data;   /* the bytes (NUL-terminated), for regular members of at
			       most keep_max bytes; NULL otherwise */
};

/*
 * Read the archive at path (any format and filter libarchive reads) and call
 * fn(ctx, entry) for each member in archive order, after hashing its data. A
 * non-zero return from fn stops the scan and is returned. The entry's strings
 * and data live until fn returns.
 */
int lmt_tarball_scan(const char *path, size_t keep_max, int (*fn)(void *ctx, const struct lmt_tar_entry *e),
		     void *ctx, struct lmt_err *err);

#endif
