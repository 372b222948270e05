/*
 * jsonseal.h: a JSON file that carries a checksum of itself.
 *
 * The manifests lmt's readers trust (a checkpoint's manifest.json, a dataset's
 * manifest.json, a run's config.json) end with one more member,
 * "KEY":"<SHA-256 hex>", the hash of the file's canonical bytes: the text as
 * written without that member, i.e. everything before its comma, then "}". It is
 * the last member written, so the writer hashes what it has and appends it; the
 * reader checks it before it believes any other field. The check is on bytes, not
 * on a re-serialisation, so every edit is caught, a changed digit and added white
 * space alike; a deliberate edit must be re-sealed by a tool that says so
 * (ckpt-inspect --rehash).
 *
 *	lmt_json_begin(&j); ... members ...
 *	lmt_jsonseal_add(&j, "manifest_sha256");   // last, before lmt_json_end
 *	lmt_json_end(&j);
 *
 *	if (lmt_jsonseal_check(text, n, "manifest_sha256", path, &err)) ...
 */
#ifndef LMT_JSONSEAL_H
#define LMT_JSONSEAL_H

#include <stddef.h>

#include "core/error.h"
#include "core/json.h"

/* Append "key":"<sha256 of the record so far, closed>" to the open top-level
 * object j (which has at least one member); call lmt_json_end next. */
void lmt_jsonseal_add(struct lmt_json *j, const char *key);

/* Check that text[0..n) (a JSON object, trailing white space allowed) ends with
 * its seal under key and that the seal matches. LMT_ECHECKSUM when it does not
 * match, LMT_EFORMAT when there is no seal; either message names path. */
int lmt_jsonseal_check(const char *text, size_t n, const char *key, const char *path, struct lmt_err *err);

/* What a sealed manifest must be, checked in this order before any other field
 * is believed: its "schema" names the kind, its "schema_version" is this build's
 * (an older one is named with older_hint, the way out), and its seal holds. */
struct lmt_jsonseal_kind {
	const char *schema;        /* "lmt-checkpoint" */
	const char *noun;          /* "checkpoint": "'PATH': not an lmt checkpoint manifest" */
	const char *version_label; /* "checkpoint schema version" */
	int version;
	const char *seal;          /* the seal's key */
	const char *older_hint;    /* appended for an older version: " (...)" */
};
/* m is text[0..n) parsed (a json_t *). */
int lmt_jsonseal_check_manifest(const char *text, size_t n, void *m, const struct lmt_jsonseal_kind *k,
				const char *path, struct lmt_err *err);

/* Re-seal text[0..n) (a sealed or an unsealed object) under key: *out gets a new
 * malloc'd text (the caller frees it), with a trailing newline. For deliberate
 * surgery only (ckpt-inspect --rehash). */
int lmt_jsonseal_reseal(const char *text, size_t n, const char *key, char **out, size_t *out_len,
			struct lmt_err *err);

#endif
