/*
 * rundir.h: a fresh run directory for a run not given one, and the "latest" link.
 *
 * `train` without -o still leaves its run behind, as llm.c's and nanoGPT's users
 * expect: in PARENT/STAMP-TAG (runs/20261129-142501-d4-h4-c256), where STAMP is
 * the local start time and TAG says what was trained. The directory is made
 * with mkdir, which fails when the name exists, so a run never lands in another
 * run's directory, also when two start in the same second: the later one takes
 * STAMP-TAG-2 (-3, ...). PARENT/latest is a symbolic link to the newest such
 * directory, relative (the name only), so moving PARENT keeps it working; it is
 * replaced by making a link under a temporary name and renaming it over the old
 * one, so a reader sees the old link or the new one, never none.
 */
#ifndef LMT_RUNDIR_H
#define LMT_RUNDIR_H

#include <stddef.h>
#include <time.h>

#include "core/error.h"

/*
 * Make a new run directory PARENT/STAMP-TAG[-N] (PARENT and its parents made
 * as needed; STAMP is t as local YYYYmmdd-HHMMSS) and write its path into out,
 * cap bytes. tag: letters, digits, '-', '.' and '_' only (LMT_EINVAL otherwise).
 */
int lmt_rundir_new(const char *parent, time_t t, const char *tag, char *out, size_t cap, struct lmt_err *err);
/* Point PARENT/latest at PARENT/name (name: a directory in parent), atomically. */
int lmt_rundir_link_latest(const char *parent, const char *name, struct lmt_err *err);

#endif
