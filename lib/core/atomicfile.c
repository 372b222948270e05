/*
 * atomicfile.c: atomic output files and the registry of live temporaries.
 *
 * The registry is a fixed array of path pointers so that a signal handler can walk
 * it without locks or allocation. Registration takes a mutex; the handler does not,
 * which at worst misses a temporary being registered at that very instant.
 */
#include "core/atomicfile.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LIVE 256
static char *volatile live[MAX_LIVE];
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

static int live_add(char *tmp)
{
	pthread_mutex_lock(&live_mu);
	for (int i = 0; i < MAX_LIVE; i++) {
		if (!live[i]) {
			live[i] = tmp;
			pthread_mutex_unlock(&live_mu);
			return i;
		}
	}
	pthread_mutex_unlock(&live_mu);
	return -1;
}

static void live_del(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&live_mu);
	live[slot] = NULL;
	pthread_mutex_unlock(&live_mu);
}

void lmt_atomicfile_cleanup_signal(void)
{
	for (int i = 0; i < MAX_LIVE; i++) {
		char *p = live[i];
		if (p)
			unlink(p);
	}
}

static char *dir_of(const char *path)
{
	char *c = strdup(path);
	if (!c)
		return NULL;
	char *d = strdup(dirname(c));
	free(c);
	return d;
}

int lmt_fsync_dir(const char *path, struct lmt_err *err)
{
	struct stat st;
	char *d = NULL;
	const char *dir = path;
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		d = dir_of(path);
		if (!d)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		dir = d;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = lmt_err_errno(err, "'%s': open directory", dir);
		free(d);
		return rc;
	}
	int rc = 0;
	if (fsync(fd) != 0 && errno != EINVAL)
		rc = lmt_err_errno(err, "'%s': fsync directory", dir);
	close(fd);
	free(d);
	return rc;
}

int lmt_atomicfile_target(const char *path, char **resolved, struct lmt_err *err)
{
	struct stat st;
	*resolved = NULL;
	/* what a link leads to first: /dev/stdout into a pipe is a FIFO, not a link to nowhere */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_EINVAL,
				   "'%s' is not a regular file (a device, FIFO or socket): outputs are written whole "
				   "and renamed into place, which would replace it; give a file name",
				   path);
	/* a symlink: its file is written (renamed into place beside it), the link
	 * stays; a link to nowhere is refused rather than replaced */
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && !(*resolved = realpath(path, NULL)))
		return lmt_err_set(err, LMT_EINVAL, "'%s' is a symbolic link to a file that is not there: give a file name",
				   path);
	return 0;
}

int lmt_atomicfile_open(struct lmt_atomicfile *af, const char *path, struct lmt_err *err)
{
	memset(af, 0, sizeof *af);
	af->slot = -1;
	const char *base = strrchr(path, '/');
	size_t dlen = base ? (size_t)(base - path + 1) : 0;
	base = base ? base + 1 : path;
	if (!*base)
		return lmt_err_set(err, LMT_EINVAL, "'%s': not a file name", path);
	/* said now, before the work whose output it is (commit checks again) */
	char *resolved;
	int rc = lmt_atomicfile_target(path, &resolved, err);
	if (rc)
		return rc;
	if (resolved) {
		path = resolved;
		base = strrchr(path, '/') + 1;
		dlen = (size_t)(base - path);
	}
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = lmt_err_set(err, LMT_EINVAL, "'%s' is a directory: give a file name", path);
		free(resolved);
		return rc;
	}
	size_t n = strlen(path) + 32;
	af->path = strdup(path);
	af->tmp = malloc(n);
	if (!af->path || !af->tmp) {
		free(af->path);
		free(af->tmp);
		free(resolved);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	snprintf(af->tmp, n, "%.*s.%s.tmp.XXXXXX", (int)dlen, path, base);
	free(resolved);
	path = af->path;
	int fd = mkostemp(af->tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = lmt_err_errno(err, "'%s': cannot create", path);
		free(af->path);
		free(af->tmp);
		memset(af, 0, sizeof *af);
		af->slot = -1;
		return rc;
	}
	/* mkstemp makes 0600; output files get the usual umask-derived mode */
	mode_t um = umask(0);
	umask(um);
	fchmod(fd, 0666 & ~um);
	af->slot = live_add(af->tmp);
	af->fp = fdopen(fd, "w+b"); /* readable: writers may hash what they wrote */
	if (!af->fp) {
		close(fd);
		lmt_atomicfile_abort(af);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	setvbuf(af->fp, NULL, _IOFBF, 1 << 20);
	return 0;
}

static void afile_free(struct lmt_atomicfile *af)
{
	live_del(af->slot);
	free(af->path);
	free(af->tmp);
	af->path = af->tmp = NULL;
	af->fp = NULL;
	af->slot = -1;
}

void lmt_atomicfile_abort(struct lmt_atomicfile *af)
{
	if (!af->tmp)
		return;
	if (af->fp)
		fclose(af->fp);
	unlink(af->tmp);
	afile_free(af);
}

int lmt_atomicfile_finish(struct lmt_atomicfile *af, struct lmt_err *err)
{
	if (!af->fp)
		return 0;
	int rc = 0;
	if (fflush(af->fp) != 0 || ferror(af->fp))
		rc = lmt_err_errno(err, "'%s': write", af->path);
	else if (fsync(fileno(af->fp)) != 0)
		rc = lmt_err_errno(err, "'%s': fsync", af->path);
	if (fclose(af->fp) != 0 && !rc)
		rc = lmt_err_errno(err, "'%s': close", af->path);
	af->fp = NULL;
	if (rc) {
		unlink(af->tmp);
		afile_free(af);
	}
	return rc;
}

int lmt_atomicfile_commit(struct lmt_atomicfile *af, struct lmt_err *err)
{
	int rc = lmt_atomicfile_finish(af, err);
	if (rc)
		return rc;
	if (rename(af->tmp, af->path) != 0) {
		rc = lmt_err_errno(err, "'%s': rename into place", af->path);
		unlink(af->tmp);
		afile_free(af);
		return rc;
	}
	live_del(af->slot);
	af->slot = -1;
	rc = lmt_fsync_dir(af->path, err);
	afile_free(af);
	return rc;
}

int lmt_atomicfile_commit_all(struct lmt_atomicfile *const *afs, size_t n, struct lmt_err *err)
{
	int rc = 0;
	struct stat st;
	/* everything that can fail short of rename itself, for every file, first */
	for (size_t i = 0; i < n && !rc; i++) {
		if (!afs[i]->tmp)
			continue;
		if ((rc = lmt_atomicfile_finish(afs[i], err)))
			break;
		if (stat(afs[i]->path, &st) == 0 && S_ISDIR(st.st_mode))
			rc = lmt_err_set(err, LMT_EIO, "'%s': rename into place: %s", afs[i]->path, strerror(EISDIR));
	}
	for (size_t i = 0; i < n; i++) {
		if (!afs[i]->tmp)
			continue;
		if (rc)
			lmt_atomicfile_abort(afs[i]);
		else
			rc = lmt_atomicfile_commit(afs[i], err);
	}
	return rc;
}

int lmt_write_file_atomic(const char *path, const void *data, size_t n, struct lmt_err *err)
{
	struct lmt_atomicfile af;
	int rc = lmt_atomicfile_open(&af, path, err);
	if (rc)
		return rc;
	if (n && fwrite(data, 1, n, af.fp) != n) {
		rc = lmt_err_errno(err, "'%s': write", path);
		lmt_atomicfile_abort(&af);
		return rc;
	}
	return lmt_atomicfile_commit(&af, err);
}

int lmt_read_file(const char *path, char **data, size_t *n, struct lmt_err *err)
{
	*data = NULL;
	*n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return lmt_err_errno(err, "'%s'", path);
	size_t cap = 0, len = 0;
	char *buf = NULL;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return lmt_err_set(err, LMT_EIO, "'%s': is a directory", path);
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		cap = (size_t)st.st_size + 2; /* room for the EOF probe and the NUL */
	for (;;) {
		if (len + 1 >= cap) {
			size_t nc = cap ? cap * 2 : 65536;
			char *b = realloc(buf, nc);
			if (!b) {
				free(buf);
				close(fd);
				return lmt_err_set(err, LMT_ENOMEM, "'%s': out of memory", path);
			}
			buf = b;
			cap = nc;
		} else if (!buf) {
			buf = malloc(cap);
			if (!buf) {
				close(fd);
				return lmt_err_set(err, LMT_ENOMEM, "'%s': out of memory", path);
			}
		}
		ssize_t r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = lmt_err_errno(err, "'%s': read", path);
			free(buf);
			close(fd);
			return rc;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (!buf) {
		buf = malloc(1);
		if (!buf)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	buf[len] = 0;
	*data = buf;
	*n = len;
	return 0;
}

void lmt_remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[PATH_MAX];
			if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p)
				unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

int lmt_path_fmt(char *out, size_t cap, struct lmt_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap)
		return lmt_err_set(err, LMT_ERANGE, "path too long: '%.60s...'", out);
	return 0;
}

char *lmt_mkdtemp(char *tmpl)
{
	if (!mkdtemp(tmpl))
		return NULL;
	mode_t um = umask(0);
	umask(um);
	chmod(tmpl, 0777 & ~um);
	return tmpl;
}
