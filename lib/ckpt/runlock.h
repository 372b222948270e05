/*
 * runlock.h: one owner per run directory.
 *
 * Every tool that writes into a run directory (train; evalppl when its stdout is
 * a file of the run; runcard writing its card into the run; ckpt-reshard writing
 * a checkpoint into RUN/ckpt/) first takes the run's lock, RUN/lock, and holds it
 * until it exits. Two trainers on one run would rewind each other's metrics and
 * set each other's checkpoints aside; a card written while training goes on
 * describes a run that is no longer there.
 *
 * The lock is a POSIX record lock (fcntl F_SETLK, F_WRLCK, the whole file), not a
 * lock file's existence: the kernel drops it when the process ends, however it
 * ends (SIGKILL included), so a crash never leaves a stale lock behind, and
 * F_GETLK names the process that holds it. The holder's PID is also written into
 * the file, for people (cat RUN/lock); the lock, not the text, is what counts,
 * and the file is not removed (removing it would let a second process lock a
 * new file while the first still holds the old one), except by the process that
 * made it, stopping before it wrote anything of the run (lmt_run_unlock_unused).
 *
 * POSIX drops all of a process's locks on a file when the process closes any
 * descriptor of that file: the holder keeps the one descriptor lmt_run_lock opened
 * (close-on-exec, so a child program does not inherit it) and nothing else in the
 * process may open RUN/lock. Readers (ckpt-inspect, evalppl to elsewhere) take no
 * lock: checkpoints appear by rename and go by rename (ckpt.h), so a reader sees
 * a whole checkpoint or none.
 */
#ifndef LMT_RUNLOCK_H
#define LMT_RUNLOCK_H

#include <limits.h>
#include <stddef.h>

#include "core/error.h"

struct lmt_run_lock {
	int fd;                 /* -1: not held */
	int made;               /* what lmt_run_lock made: 1 the run directory, 2 the lock file */
	char path[PATH_MAX];    /* RUN/lock */
};

/* A lock not held (what lmt_run_unlock then leaves alone). */
static inline void lmt_run_lock_init(struct lmt_run_lock *l)
{
	l->fd = -1;
	l->made = 0;
	l->path[0] = 0;
}

/*
 * Take the lock of run directory run_dir for the life of the process (or until
 * lmt_run_unlock). With create, run_dir is made first if missing (mkdir, then the
 * lock: of two processes starting one fresh run together, exactly one gets it);
 * without, it must exist. A run another process holds is refused at once, with a
 * message naming the run, the holder's PID and the lock file. l needs no
 * lmt_run_lock_init; on failure l->fd is -1.
 */
int lmt_run_lock(const char *run_dir, int create, struct lmt_run_lock *l, struct lmt_err *err);
/* Release the lock (the kernel does as much at exit); a lock not held is left alone. */
void lmt_run_unlock(struct lmt_run_lock *l);
/* For a process that stops before writing anything of the run: if run_dir holds
 * nothing but the lock, remove what lmt_run_lock made of it (the lock file, and
 * the directory if it made that too: a refused run leaves nothing behind);
 * otherwise only release the lock. */
void lmt_run_unlock_unused(struct lmt_run_lock *l, const char *run_dir);

/*
 * The run an output lies in, whatever its spelling: the nearest directory at or
 * above path (symlinks resolved; where path does not exist yet, its nearest
 * existing parent) that is a run directory, one holding its lock file RUN/lock (a
 * regular file, never a symlink) beside ckpt/ or config.json. 1 and RUN's real
 * path in run_dir (cap bytes), or 0. Writers into a run take the lock of the run
 * this names, so `L/step-9` with L a symlink to RUN/ckpt, or another run's
 * eval/, are no way past the owner.
 */
int lmt_run_holding(const char *path, char *run_dir, size_t cap);
/* 1 if path names a checkpoint of a run, RUN/ckpt/NAME (by its spelling: it need
 * not exist), with RUN (".", if path starts at ckpt/) in run_dir, cap bytes. */
int lmt_run_of_ckpt(const char *path, char *run_dir, size_t cap);
/* 1 if path (or, where it does not exist yet, its nearest existing parent) lies
 * in run_dir or is run_dir; 0 if not or either cannot be resolved. */
int lmt_run_contains(const char *run_dir, const char *path);
/* 1 if the open file fd is a regular file of run_dir or of run_dir/eval (where
 * `evalppl RUN > RUN/eval/ppl.jsonl` puts it); 0 otherwise. */
int lmt_run_contains_fd(const char *run_dir, int fd);


#endif
