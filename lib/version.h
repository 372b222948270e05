/*
 * version.h: what this build is: the library version, the code revision it was
 * built from, and which compute backends were compiled in.
 */
#ifndef LMT_VERSION_H
#define LMT_VERSION_H

#define LMT_VERSION "0.1.0"

/* "v0.1.0-12-gabcdef0" style revision, with "-dirty" for a modified tree, or
 * "unknown" outside a git checkout. */
const char *lmt_revision(void);
/* Space-separated training backends compiled in: "cpu" (later "cpu cuda"). */
const char *lmt_backends(void);
/* One line describing the CUDA side: "not built", or the runtime version and the
 * number of devices visible now (0 when no driver or GPU is present). */
const char *lmt_cuda_status(void);

#endif
