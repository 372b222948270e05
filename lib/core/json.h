/*
 * json.h: a small JSON writer for JSONL records and manifests.
 *
 * A record is built in a growable buffer and written with one fwrite and a flush, so
 * lines never interleave and `tool | jq` sees each record as soon as it exists.
 * Parsing JSON is jansson's job; this file only writes.
 *
 *	struct lmt_json j;
 *	lmt_json_init(&j);
 *	lmt_json_begin(&j);
 *	lmt_json_str(&j, "event", "summary");
 *	lmt_json_u64(&j, "merges", n);
 *	lmt_json_end_line(&j, stdout);   // writes "{...}\n" and flushes
 *	lmt_json_release(&j);
 *
 * Strings are escaped per RFC 8259; bytes that are not valid UTF-8 are written as
 * U+FFFD (JSON cannot carry them). Non-finite numbers are written as null.
 * Numbers are written in the shortest form that reads back to the same double.
 *
 * A value parsed with jansson can be written back through the writer
 * (lmt_json_jansson), so that it keeps that shortest form: jansson's own
 * json_dumps writes 17 significant digits, and a manifest's 0.1 would come back
 * as 0.10000000000000001.
 */
#ifndef LMT_JSON_H
#define LMT_JSON_H

#include "core/strbuf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json_t;                  /* jansson's; this header does not need <jansson.h> */

struct lmt_json {
	struct lmt_strbuf out;  /* the text so far */
	int depth;
	unsigned char first[32]; /* per nesting level: no comma needed yet */
};

void lmt_json_init(struct lmt_json *j);
void lmt_json_release(struct lmt_json *j);
void lmt_json_reset(struct lmt_json *j);

/* Containers. key is NULL inside arrays and at top level. */
void lmt_json_begin(struct lmt_json *j);                 /* top-level "{" */
void lmt_json_obj(struct lmt_json *j, const char *key);  /* nested "{" */
void lmt_json_obj_end(struct lmt_json *j);
void lmt_json_arr(struct lmt_json *j, const char *key);
void lmt_json_arr_end(struct lmt_json *j);

void lmt_json_str(struct lmt_json *j, const char *key, const char *s);
void lmt_json_strn(struct lmt_json *j, const char *key, const char *s, size_t n);
void lmt_json_i64(struct lmt_json *j, const char *key, int64_t v);
void lmt_json_u64(struct lmt_json *j, const char *key, uint64_t v);
void lmt_json_num(struct lmt_json *j, const char *key, double v);
void lmt_json_bool(struct lmt_json *j, const char *key, int v);
void lmt_json_null(struct lmt_json *j, const char *key);
/* Insert pre-formatted JSON text as a value (caller guarantees it is valid). */
void lmt_json_raw(struct lmt_json *j, const char *key, const char *text);

/*
 * Write the jansson value v (any type) as a value. Containers nested more than 20
 * levels below v are written by json_dumps (the writer tracks a bounded depth).
 * Out of memory sets j->out.oom, as every write does.
 */
void lmt_json_jansson(struct lmt_json *j, const char *key, struct json_t *v);
/* The JSON text of v, written as lmt_json_jansson does (caller frees); NULL when
 * out of memory. */
char *lmt_json_jansson_text(struct json_t *v);

/* Close the top-level object; the buffer then holds one JSON text (no newline). */
void lmt_json_end(struct lmt_json *j);
/* Close, append "\n", write to fp and fflush. Returns 0, or -1 on a write error. */
int lmt_json_end_line(struct lmt_json *j, FILE *fp);

/* Append s as a JSON string literal (quotes included) to an arbitrary buffer. */
void lmt_json_escape(struct lmt_json *j, const char *s, size_t n);
/* A string value given already escaped, as lmt_json_escape writes it (without the
 * quotes): copied between quotes as it is. */
void lmt_json_str_escaped(struct lmt_json *j, const char *key, const char *s, size_t n);

/* Shortest %g form that round-trips a double; buf must hold 32 bytes. */
char *lmt_fmt_double(double v, char *buf);

#endif
