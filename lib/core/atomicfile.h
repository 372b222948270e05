/*
 * atomicfile.h: atomic file output.
 *
 * Every lmt output file is written under a temporary name in the destination's
 * directory, flushed and fsynced, renamed over the final name, and the directory is
 * fsynced, so a reader sees either the old file or the complete new one, never a
 * partial one. A tool that fails, or is interrupted by a signal, removes its
 * temporaries: lmt_atomicfile_abort() on error paths, lmt_atomicfile_cleanup_signal() from a
 * signal handler (async-signal-safe: it only calls unlink).
 *
 *	struct lmt_atomicfile af;
 *	if (lmt_atomicfile_open(&af, "out.bin", &err)) ...
 *	fwrite(..., af.fp);             // or write(af.fd, ...)
 *	if (lmt_atomicfile_commit(&af, &err)) ...   // on error the temporary is gone
 */
#ifndef LMT_ATOMICFILE_H
#define LMT_ATOMICFILE_H

#include <stdio.h>

#include "core/error.h"

struct lmt_atomicfile {
	char *path;   /* final name */
	char *tmp;    /* temporary name, in the same directory */
	FILE *fp;     /* buffered stream on the temporary */
	int slot;     /* index in the cleanup registry, or -1 */
};

/* What an output path will be written as: LMT_EINVAL when it is a device, FIFO or
 * socket (the rename into place would replace it) or a symbolic link to nothing;
 * else 0, with *resolved the link's target (malloc'd) for a symlink, NULL for any
 * other path (a directory is the caller's to judge). lmt_atomicfile_open checks
 * this, and a tool checks it before the work the output comes from. */
int lmt_atomicfile_target(const char *path, char **resolved, struct lmt_err *err);
int lmt_atomicfile_open(struct lmt_atomicfile *af, const char *path, struct lmt_err *err);
/* fflush + fsync + rename + fsync(dir). Releases af either way. */
int lmt_atomicfile_commit(struct lmt_atomicfile *af, struct lmt_err *err);
/* fflush + fsync + close, keeping the temporary (still removed on a signal or by
 * abort) for a later commit; af->fp is NULL afterwards. On error af is released
 * and its temporary gone. A finished file's commit only renames. */
int lmt_atomicfile_finish(struct lmt_atomicfile *af, struct lmt_err *err);
/*
 * A tool's several outputs, committed together: every file is finished (and its
 * final name checked not to be a directory) before the first rename, so a write
 * error in any of them leaves none in place. Only a rename itself failing midway
 * (which those checks make rare) can leave the earlier ones committed. Entries
 * never opened (zeroed, tmp NULL) are skipped. Releases every af either way.
 */
int lmt_atomicfile_commit_all(struct lmt_atomicfile *const *afs, size_t n, struct lmt_err *err);
/* Close and unlink the temporary. Safe to call on a released or zeroed struct. */
void lmt_atomicfile_abort(struct lmt_atomicfile *af);

/* Unlink every temporary still open in this process; async-signal-safe. */
void lmt_atomicfile_cleanup_signal(void);

/* fsync the directory that holds path (or path itself if it is a directory). */
int lmt_fsync_dir(const char *path, struct lmt_err *err);

/* Write a whole buffer atomically. */
int lmt_write_file_atomic(const char *path, const void *data, size_t n, struct lmt_err *err);

/* Read a whole file into a malloc'd buffer (NUL-terminated; *n excludes the NUL).
 * The caller frees *data. */
int lmt_read_file(const char *path, char **data, size_t *n, struct lmt_err *err);

/* snprintf for paths: LMT_ERANGE ("path too long") instead of a cut name. */
int lmt_path_fmt(char *out, size_t cap, struct lmt_err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Remove dir and the files directly inside it, best effort (lmt's staging,
 * temporary and checkpoint directories are flat). */
void lmt_remove_dir(const char *dir);
/* mkdtemp(3) for a staging directory that becomes an output (renamed into place):
 * given the usual mode, 0777 less the umask, not mkdtemp's 0700. NULL with errno
 * set on failure. */
char *lmt_mkdtemp(char *tmpl);

#endif
