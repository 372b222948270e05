/*
 * jsonseal.c: JSON files sealed by a checksum of their own bytes (jsonseal.h).
 */
#include "core/jsonseal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/util.h"

/* sha256 of text[0..n) followed by "}" */
static void canonical_hash(const char *text, size_t n, char hex[LMT_SHA256_HEX])
{
	struct lmt_sha256 s;
	uint8_t d[LMT_SHA256_LEN];
	lmt_sha256_init(&s);
	lmt_sha256_update(&s, text, n);
	lmt_sha256_update(&s, "}", 1);
	lmt_sha256_final(&s, d);
	lmt_sha256_release(&s);
	lmt_sha256_hex(d, hex);
}

void lmt_jsonseal_add(struct lmt_json *j, const char *key)
{
	char hex[LMT_SHA256_HEX];
	if (j->out.oom)
		return;
	canonical_hash(j->out.buf, j->out.len, hex);
	lmt_json_str(j, key, hex);
}

/* Where the seal member starts (its comma) in text[0..n), n without trailing
 * white space; 0 when there is none. The member is ,"KEY":"<64 hex>"} exactly,
 * as lmt_jsonseal_add writes it. */
static size_t seal_at(const char *text, size_t n, const char *key, const char **hex)
{
	size_t kl = strlen(key), tail = 2 + kl + 3 + 64 + 2; /* ,"KEY":"...."} */
	if (n < tail + 1)
		return 0;
	const char *p = text + n - tail;
	if (p[0] != ',' || p[1] != '"' || memcmp(p + 2, key, kl) || memcmp(p + 2 + kl, "\":\"", 3) ||
	    memcmp(p + tail - 2, "\"}", 2))
		return 0;
	for (int i = 0; i < 64; i++) {
		char c = p[2 + kl + 3 + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	*hex = p + 2 + kl + 3;
	return (size_t)(p - text);
}

static size_t trim(const char *text, size_t n)
{
	while (n && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r' || text[n - 1] == '\t'))
		n--;
	return n;
}

int lmt_jsonseal_check(const char *text, size_t n, const char *key, const char *path, struct lmt_err *err)
{
	const char *hex = NULL;
	n = trim(text, n);
	size_t at = seal_at(text, n, key, &hex);
	if (!at)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': does not end with its checksum (\"%s\"): not a sealed file, "
				   "or cut or edited at the end", path, key);
	char want[LMT_SHA256_HEX];
	canonical_hash(text, at, want);
	if (!LMT_FUZZING && memcmp(want, hex, 64)) /* LMT_FUZZING: skipped in the fuzz build */
		return lmt_err_set(err, LMT_ECHECKSUM, "'%s': its contents do not match its own checksum (%s %.16s..., "
				   "the contents hash to %.16s...): the file was changed after it was written", path, key,
				   hex, want);
	return 0;
}

int lmt_jsonseal_reseal(const char *text, size_t n, const char *key, char **out, size_t *out_len,
			struct lmt_err *err)
{
	const char *hex;
	n = trim(text, n);
	size_t at = seal_at(text, n, key, &hex);
	if (!at) {
		/* unsealed: the object's closing brace goes, the seal takes its place */
		if (!n || text[n - 1] != '}')
			return lmt_err_set(err, LMT_EFORMAT, "not a JSON object: it does not end with '}'");
		at = trim(text, n - 1);
		if (at < 2 || text[at - 1] == '{')
			return lmt_err_set(err, LMT_EFORMAT, "an empty JSON object has nothing to seal");
	}
	char dig[LMT_SHA256_HEX];
	canonical_hash(text, at, dig);
	size_t kl = strlen(key), len = at + 2 + kl + 3 + 64 + 3;
	char *o = malloc(len + 1);
	if (!o)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	memcpy(o, text, at);
	snprintf(o + at, len + 1 - at, ",\"%s\":\"%s\"}\n", key, dig);
	*out = o;
	*out_len = len;
	return 0;
}

int lmt_jsonseal_check_manifest(const char *text, size_t n, void *m, const struct lmt_jsonseal_kind *k,
				const char *path, struct lmt_err *err)
{
	json_t *schema = json_object_get(m, "schema"), *v = json_object_get(m, "schema_version");
	if (!json_is_string(schema) || strcmp(json_string_value(schema), k->schema) || !json_is_integer(v) ||
	    json_integer_value(v) < 0)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': not an lmt %s manifest", path, k->noun);
	unsigned long long ver = (unsigned long long)json_integer_value(v);
	if (ver != (unsigned long long)k->version)
		return lmt_err_set(err, LMT_EVERSION, "'%s': %s %llu, this build reads %d%s", path, k->version_label, ver,
				   k->version, ver < (unsigned long long)k->version ? k->older_hint : "");
	return lmt_jsonseal_check(text, n, k->seal, path, err);
}
