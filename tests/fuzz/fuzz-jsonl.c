/*
 * fuzz-jsonl.c: the JSONL reader's fast path against jansson, on one line.
 *
 * The reader checks and decodes a line's text field in one pass of its own and
 * hands a line it does not take to jansson. Whatever the line, what it yields
 * must be what jansson makes of it: the same decoded text for a valid line
 * (jansson: an object whose "text" is a string), an error for an invalid one.
 * With keep_escaped (the first byte's bit 0) the text must be what lmt's writer,
 * lmt_json_escape, writes for jansson's text, when the reader says it is in that
 * form. The rest of the input is the line (a newline in it ends the line early).
 * Two differences are allowed, lines that RFC 8259 allows and jansson refuses, which
 * the reader, keeping only the text, takes whatever else the line holds: a number
 * too large for jansson (an integer beyond 64 bits, a real beyond a double;
 * test-corpus's check_jsonl_big_numbers), and a NUL (\u0000) in an object's key
 * (check_jsonl_nul_keys). Such lines are skipped here, where jansson's text is what
 * the reader's is checked against. And the reader skips a UTF-8 byte order mark
 * before a file's first line, as jq does: jansson gets the line without it.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "data/corpus.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const int keep = data[0] & 1;
	const char *line = (const char *)data + 1;
	size_t n = size - 1;
	const char *nl = memchr(line, '\n', n);
	if (nl)
		n = (size_t)(nl - line);
	if (lmt_corpus_binary(line, n))
		return 0; /* skipped as binary, not read as JSONL */
	char path[512];
	fuzz_dir_empty();
	const char *paths[1] = { fuzz_file("l.jsonl", line, n, path, sizeof path) };
	const char *jl = line; /* what jansson gets */
	size_t jn = n;
	if (jn >= 3 && !memcmp(jl, "\xef\xbb\xbf", 3)) {
		jl += 3;
		jn -= 3;
	}
	json_error_t je;
	json_t *root = json_loadb(jl, jn, JSON_ALLOW_NUL, &je);
	if (!root && (strstr(je.text, "too big") || strstr(je.text, "overflow") ||
		      strstr(je.text, "NUL byte in object key")))
		return 0;
	json_t *t = root && json_is_object(root) ? json_object_get(root, "text") : NULL;
	int want_ok = t && json_is_string(t);
	int blank = 1;
	for (size_t i = 0; i < jn; i++)
		blank &= jl[i] == ' ' || jl[i] == '\t' || jl[i] == '\r';
	struct lmt_corpus *c;
	struct lmt_err err;
	struct lmt_corpus_opts o = { .format = LMT_CORPUS_AUTO, .keep_empty = 1, .keep_escaped = keep };
	if (lmt_corpus_open(&c, paths, 1, &o, &err))
		abort();
	struct lmt_doc d;
	int rc = lmt_corpus_next(c, &d, &err);
	if (blank) {
		if (rc != 0)
			abort(); /* a blank line is no document */
	} else if (!want_ok) {
		if (rc >= 0)
			abort(); /* jansson refuses the line: so must the reader */
	} else {
		if (rc != 1)
			abort();
		if (d.escaped) {
			struct lmt_json j;
			lmt_json_init(&j);
			lmt_json_escape(&j, json_string_value(t), json_string_length(t));
			if (!keep || j.out.oom || d.len != j.out.len - 2 || memcmp(d.text, j.out.buf + 1, d.len))
				abort();
			lmt_json_release(&j);
		} else if (d.len != json_string_length(t) || memcmp(d.text, json_string_value(t), d.len)) {
			abort();
		}
	}
	lmt_corpus_close(c);
	json_decref(root);
	return 0;
}
