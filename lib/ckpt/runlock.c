/*
 * runlock.c: the run directory's owner lock; see runlock.h.
 *
 * fcntl record locks rather than flock: F_GETLK tells a refused process who holds
 * the lock, so the message can name the PID, and they work on NFS where flock may
 * not. Their one trap (any close of the file drops them) is why the descriptor
 * lives in struct lmt_run_lock and nothing else opens RUN/lock.
 */
#include "ckpt/runlock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"

static int busy(struct lmt_run_lock *l, const char *run_dir, pid_t pid, struct lmt_err *err)
{
	close(l->fd);
	l->fd = -1;
	if (pid > 0)
		return lmt_err_set(err, LMT_EIO, "'%s' is in use by process %ld (its lock %s): one process owns a run at a time",
				   run_dir, (long)pid, l->path);
	/* the holder is in another PID namespace, or let go and took it again meanwhile */
	return lmt_err_set(err, LMT_EIO, "'%s' is in use by another process (its lock %s): one process owns a run at a time",
			   run_dir, l->path);
}

static int lock_once(const char *run_dir, int create, struct lmt_run_lock *l, struct lmt_err *err);

int lmt_run_lock(const char *run_dir, int create, struct lmt_run_lock *l, struct lmt_err *err)
{
	l->fd = -1;
	l->made = 0;
	int rc = lmt_path_fmt(l->path, sizeof l->path, err, "%s/lock", run_dir);
	if (rc)
		return rc;
	for (int attempt = 0;; attempt++) {
		if ((rc = lock_once(run_dir, create, l, err)))
			return rc;
		/* the lock is on the file still at RUN/lock: one whose maker removed it
		 * (lmt_run_unlock_unused) between this open and the lock is taken afresh */
		struct stat a, b;
		if (fstat(l->fd, &a) == 0 && a.st_nlink > 0 && stat(l->path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			break;
		close(l->fd);
		l->fd = -1;
		if (attempt == 8)
			return lmt_err_set(err, LMT_EIO, "'%s' keeps being removed while it is locked", l->path);
	}
	/* the PID is for people reading the file; a failure to write it is no reason
	 * to refuse the run */
	char pid[32];
	int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(l->fd, 0) == 0 && pwrite(l->fd, pid, (size_t)n, 0) != n)
		(void)ftruncate(l->fd, 0);
	return 0;
}

/* Open RUN/lock (making RUN with create) and take the lock: 0 or the error. */
static int lock_once(const char *run_dir, int create, struct lmt_run_lock *l, struct lmt_err *err)
{
	int rc;
	l->made &= ~2;
	if (create) {
		if (mkdir(run_dir, 0755) == 0)
			l->made = 1;
		else if (errno != EEXIST)
			return lmt_err_errno(err, "'%s'", run_dir);
	}
	/* O_NOFOLLOW: a symlink planted as RUN/lock would have the PID written (and
	 * the file truncated) wherever it points */
	l->fd = open(l->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (l->fd >= 0)
		l->made |= 2;
	else if (errno == EEXIST)
		l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (l->fd < 0 && errno == ELOOP)
		return lmt_err_set(err, LMT_EIO, "'%s' is a symbolic link: a run's lock is a plain file of the run", l->path);
	if (l->fd < 0)
		return lmt_err_errno(err, "'%s'", l->path);
	/* between a refused F_SETLK and the F_GETLK the holder may exit: then the
	 * lock is free and taking it again succeeds; a few rounds bound a holder that
	 * keeps coming and going */
	for (int round = 0;; round++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
		if (fcntl(l->fd, F_SETLK, &fl) == 0)
			break;
		if (errno != EACCES && errno != EAGAIN) {
			rc = lmt_err_errno(err, "'%s': cannot lock it", l->path);
			close(l->fd);
			l->fd = -1;
			return rc;
		}
		struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
		if (fcntl(l->fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK)
			return busy(l, run_dir, q.l_pid, err);
		if (round == 8)
			return busy(l, run_dir, 0, err);
	}
	return 0;
}

void lmt_run_unlock(struct lmt_run_lock *l)
{
	if (l->fd < 0)
		return;
	/* no PID of a process that no longer holds it */
	(void)ftruncate(l->fd, 0);
	close(l->fd);
	l->fd = -1;
}

void lmt_run_unlock_unused(struct lmt_run_lock *l, const char *run_dir)
{
	if (l->fd < 0)
		return;
	int only_lock = l->made != 0;
	DIR *d = only_lock ? opendir(run_dir) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "lock"))
			only_lock = 0;
	if (d)
		closedir(d);
	else
		only_lock = 0;
	/* a process that opened the lock meanwhile sees it unlinked once it has it,
	 * and takes it afresh (lmt_run_lock) */
	if (only_lock && unlink(l->path) == 0) {
		close(l->fd);
		l->fd = -1;
		if (l->made & 1)
			rmdir(run_dir);
		return;
	}
	lmt_run_unlock(l);
}

/* path's real path, or its nearest existing parent's (a file about to be made). */
static char *real_or_parent(const char *path)
{
	char *p = strdup(path), *r = NULL;
	while (p && !(r = realpath(p, NULL)) && errno == ENOENT) {
		char *sl = strrchr(p, '/');
		while (sl && sl > p && sl[1] == 0) { /* trailing slashes */
			*sl = 0;
			sl = strrchr(p, '/');
		}
		if (!sl) {
			strcpy(p, ".");
		} else if (sl == p) {
			p[1] = 0;
		} else {
			*sl = 0;
		}
	}
	free(p);
	return r;
}

/* dir/name exists as a file of the kind asked (lstat: a symlink is neither) */
static int has(const char *dir, const char *name, int want_dir)
{
	char p[PATH_MAX];
	struct stat st;
	if (lmt_path_fmt(p, sizeof p, NULL, "%s/%s", dir, name) || lstat(p, &st))
		return 0;
	return want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

int lmt_run_holding(const char *path, char *run_dir, size_t cap)
{
	char *d = real_or_parent(path);
	int found = 0;
	/* d is absolute and free of symlinks, so its textual parents are the real ones */
	while (d && !found) {
		found = has(d, "lock", 0) && (has(d, "ckpt", 1) || has(d, "config.json", 0));
		if (found) {
			found = !lmt_path_fmt(run_dir, cap, NULL, "%s", d);
			break;
		}
		char *sl = strrchr(d, '/');
		if (!sl || !strcmp(d, "/"))
			break;
		if (sl == d)
			d[1] = 0;
		else
			*sl = 0;
	}
	free(d);
	return found;
}

int lmt_run_contains(const char *run_dir, const char *path)
{
	char *run = realpath(run_dir, NULL), *p = real_or_parent(path);
	int in = 0;
	if (run && p) {
		size_t n = strlen(run);
		in = !strncmp(p, run, n) && (p[n] == 0 || p[n] == '/' || (n == 1 && run[0] == '/'));
	}
	free(run);
	free(p);
	return in;
}

/* 1 if dir has an entry that is the file st (compared by device and inode). */
static int dir_has(const char *dir, const struct stat *st)
{
	DIR *d = opendir(dir);
	int found = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		struct stat es;
		/* fstatat opens nothing, so RUN/lock is never opened (and closed) here */
		if (fstatat(dirfd(d), e->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(es.st_mode))
			found = es.st_dev == st->st_dev && es.st_ino == st->st_ino;
	}
	closedir(d);
	return found;
}

int lmt_run_contains_fd(const char *run_dir, int fd)
{
	struct stat st;
	char ev[PATH_MAX];
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return 0;
	if (dir_has(run_dir, &st))
		return 1;
	return !lmt_path_fmt(ev, sizeof ev, NULL, "%s/eval", run_dir) && dir_has(ev, &st);
}

int lmt_run_of_ckpt(const char *path, char *run_dir, size_t cap)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/') /* RUN/ckpt/step-N/ */
		n--;
	while (n && path[n - 1] != '/') /* the checkpoint's name */
		n--;
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n < 4 || strncmp(path + n - 4, "ckpt", 4) || (n > 4 && path[n - 5] != '/'))
		return 0;
	n -= 4;
	while (n > 1 && path[n - 1] == '/')
		n--;
	return !lmt_path_fmt(run_dir, cap, NULL, "%.*s", (int)(n ? n : 1), n ? path : ".");
}
