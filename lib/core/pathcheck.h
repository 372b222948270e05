/*
 * pathcheck.h: a tool never writes over one of its own inputs.
 *
 * Strings cannot tell (a relative path, a symlink, a bind mount or a hard link all
 * name the same file differently), so paths are compared by what they are: the
 * device and inode of the path, or of its nearest existing ancestor for an output
 * that does not exist yet, and of every directory above it once symlinks are
 * resolved. An output overlaps an input when it is the input, lies inside it, or
 * contains it (an output directory that would be replaced or cleaned).
 */
#ifndef LMT_PATHCHECK_H
#define LMT_PATHCHECK_H

#include "core/error.h"

/* 1 if a and b are the same file, or one lies inside the other; 0 if not (or
 * either cannot be examined: then there is nothing to overwrite). */
int lmt_path_overlap(const char *a, const char *b);

/* LMT_EINVAL naming both paths and the relation if output overlaps any of the n
 * inputs; 0 otherwise. `what` names the output in the message ("--export"). */
int lmt_path_check_output(const char *output, const char *what, const char *const *inputs, int n,
			  struct lmt_err *err);

#endif
