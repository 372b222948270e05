/*
 * version.h: what this build is: the library version, the code revision it was
 * built from. (Which backends were compiled in: lmt_backend_names, backend.h.)
 */
#ifndef LMT_VERSION_H
#define LMT_VERSION_H

#define LMT_VERSION "0.1.0"

/* "v0.1.0-12-gabcdef0" style revision, with "-dirty" for a modified tree, or
 * "unknown" outside a git checkout. */
const char *lmt_revision(void);

#endif
