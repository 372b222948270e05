/*
 * release.h: the release archive of a run (runcard --release), and its
 * verification (runcard --verify).
 *
 * A release is a zstd-compressed tar of the promised files under one top
 * directory named by the run id: the newest checkpoint exported as safetensors
 * with its config.json, the tokenizer (native and tokenizer.json), the card, its
 * plots, and SHA256SUMS (sha256sum -c format) of every other member. It is
 * deterministic (tarball.h): the same run gives the same bytes.
 *
 * The verification walk reports what it finds through callbacks, as git's fsck
 * does: the library finds, the command prints.
 */
#ifndef LMT_RELEASE_H
#define LMT_RELEASE_H

#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/error.h"
#include "report/runcard.h"

/* The members of a release, under its top directory, sorted. */
#define LMT_RELEASE_NMEMBERS 12
extern const char *const lmt_release_promised[LMT_RELEASE_NMEMBERS];

struct lmt_release_opts {
	const char *archive;    /* OUT.tar.zst; a staging directory is made next to it */
	int dtype;              /* the exported weights: enum lmt_st_dtype */
	/* Progress and warnings, one line of text each without the tool's name;
	 * either may be NULL. */
	void (*info)(void *ctx, const char *msg);
	void (*warn)(void *ctx, const char *msg);
	/* Called once the staging directory exists: from then on every failure
	 * removes it again, and a non-zero stop() (polled between the long steps)
	 * ends the release with LMT_EIO and the message "interrupted". stop may be
	 * NULL. */
	void (*staging)(void *ctx, const char *dir);
	int (*stop)(void *ctx);
	void *ctx;
};

struct lmt_release_member {
	char name[128];         /* TOP/NAME */
	uint8_t sha256[LMT_SHA256_LEN];
};

struct lmt_release_result {
	const char *top;        /* the top directory (the run id; borrowed from the card) */
	uint64_t update;        /* of the exported checkpoint */
	struct lmt_release_member member[LMT_RELEASE_NMEMBERS];  /* in archive order */
	int nmembers;
	uint64_t bytes;         /* of the archive */
	uint8_t sha256[LMT_SHA256_LEN];
};

/*
 * Write the release of card c, whose rendered files are f, at o->archive. The
 * checkpoint exported (the card's newest) is verified as it is read, and the
 * tokenizer must be the one it records.
 */
int lmt_release_write(const struct lmt_runcard *c, const struct lmt_runcard_files *f,
		      const struct lmt_release_opts *o, struct lmt_release_result *r, struct lmt_err *err);

/* One member's verdict: status "ok", "mismatch", "unlisted", "outside",
 * "not-a-file", "sums" (SHA256SUMS itself) or "missing" (listed, not there). */
struct lmt_release_finding {
	const char *name;
	uint64_t size;
	const uint8_t *sha256;  /* NULL: not hashed (not a file, or missing) */
	const char *status;
};

struct lmt_release_verify_cb {
	/* A problem, in words, naming the archive first ("'OUT.tar.zst': ..."). */
	void (*problem)(void *ctx, const char *msg);
	void (*member)(void *ctx, const struct lmt_release_finding *f);
	void *ctx;
};

struct lmt_release_summary {
	char *top;              /* "TOP/", or "" when there is none; the caller frees it */
	size_t members;         /* entries in the archive */
	size_t listed;          /* lines of SHA256SUMS that parse */
	int problems;
};

/*
 * Check the archive at path against its SHA256SUMS and the promised files,
 * reporting each member and each problem in archive order. Returns 0 when the
 * walk was done (s->problems says whether it verifies), or an error for an
 * archive that cannot be read or is empty.
 */
int lmt_release_verify(const char *path, const struct lmt_release_verify_cb *cb, struct lmt_release_summary *s,
		       struct lmt_err *err);

#endif
