/*
 * yaml.h: a small YAML writer, block style, for records people read and programs
 * parse (runcard.yaml).
 *
 * Block mappings and sequences, indented by two spaces a level; a sequence of
 * mappings puts the first key on the "- " line. Every scalar is on a line of its
 * own and may carry a trailing comment ("key: value  # comment"), which is how a
 * record says where each value comes from. Scalars:
 *
 *	numbers   as JSON prints them (the shortest form that reads back the same
 *	          double), except that an exponent form gets a fraction, "1.0e-08" for
 *	          "1e-08", which YAML 1.1 readers (PyYAML) would otherwise take for a
 *	          string; non-finite numbers are written as null
 *	strings   plain when that cannot be read as anything else (letters, digits and
 *	          _ . / + - only, starting with a letter, _ or /, and not a YAML 1.1
 *	          keyword such as yes, no, on, off, null); otherwise double-quoted with
 *	          JSON's escapes, which are also YAML's, and \x85, \u2028, \u2029
 *	          escaped since YAML takes them for line breaks; bytes that are not
 *	          valid UTF-8 become U+FFFD
 *	true, false, null
 *	flow sequences of numbers, "[1, 2.5]", for short vectors such as intervals
 *
 * An empty mapping or sequence is written "{}" or "[]". The output is built in a
 * growable buffer (like json.h's writer); an allocation failure sets oom and the
 * buffer stops growing. Keys are written as given: callers use plain keys.
 *
 *	struct lmt_yaml y;
 *	lmt_yaml_init(&y);
 *	lmt_yaml_map(&y, "model");
 *	lmt_yaml_i64(&y, "layers", 12, "config#/model/layers");
 *	lmt_yaml_end(&y);
 *	fwrite(y.buf, 1, y.len, fp);
 *	lmt_yaml_release(&y);
 */
#ifndef LMT_YAML_H
#define LMT_YAML_H

#include "core/strbuf.h"

#include <stddef.h>
#include <stdint.h>

#define LMT_YAML_MAX_DEPTH 32

struct lmt_yaml {
	struct lmt_strbuf out;  /* the text so far */
	int depth;
	/* per open container: a sequence?, its items so far, where its key line
	 * starts (so that an empty one can be closed as {} or []), and whether the
	 * next key is the first of a sequence item (written after "- ") */
	struct {
		unsigned char seq, item_first;
		size_t count;
		size_t key_at;
		int indent;
	} st[LMT_YAML_MAX_DEPTH];
};

void lmt_yaml_init(struct lmt_yaml *y);
void lmt_yaml_release(struct lmt_yaml *y);

/* A comment line (or lines: text may hold newlines) at the current indentation. */
void lmt_yaml_comment(struct lmt_yaml *y, const char *text);

/* Containers. key is NULL for an item of a sequence and must be non-NULL in a
 * mapping (the top level is a mapping). comment goes on the key's line. */
void lmt_yaml_map(struct lmt_yaml *y, const char *key, const char *comment);
void lmt_yaml_seq(struct lmt_yaml *y, const char *key, const char *comment);
void lmt_yaml_end(struct lmt_yaml *y);

/* Scalars; comment may be NULL. */
void lmt_yaml_str(struct lmt_yaml *y, const char *key, const char *s, const char *comment);
void lmt_yaml_i64(struct lmt_yaml *y, const char *key, int64_t v, const char *comment);
void lmt_yaml_num(struct lmt_yaml *y, const char *key, double v, const char *comment);
void lmt_yaml_bool(struct lmt_yaml *y, const char *key, int v, const char *comment);
void lmt_yaml_null(struct lmt_yaml *y, const char *key, const char *comment);
void lmt_yaml_nums(struct lmt_yaml *y, const char *key, const double *v, size_t n, const char *comment);

/* The scalar forms, for callers that build their own lines: the number as above
 * (buf holds 40 bytes; returns buf), and whether s may be written plain. */
char *lmt_yaml_fmt_num(double v, char *buf);
int lmt_yaml_plain_ok(const char *s);

#endif
