/*
 * test-corpus: the document reader on every input form it promises.
 *
 * The archives and compressed files are written here with libarchive's writer, so
 * the test needs no external tools. Each form must yield the same documents with
 * stable source names, ordinals and line numbers; bad input must fail with a message
 * naming the file (and line or member).
 */
#include <archive.h>
#include <jansson.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/json.h"
#include "data/corpus.h"
#include "tap.h"
#include "core/util.h"

static char dir[] = "/tmp/lmt-test-corpus.XXXXXX";

static void writef(const char *name, const void *data, size_t n)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	fwrite(data, 1, n, f);
	fclose(f);
}

struct member {
	const char *name;
	const void *data;
	size_t n;
};

/* format: "tar", "zip", "raw"; filter: NULL, "gzip", "zstd", "xz" */
static int write_archive(const char *name, const char *format, const char *filter,
			 const struct member *m, int nm)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	struct archive *a = archive_write_new();
	int rc = ARCHIVE_OK;
	if (filter && !strcmp(filter, "gzip")) rc = archive_write_add_filter_gzip(a);
	if (filter && !strcmp(filter, "zstd")) rc = archive_write_add_filter_zstd(a);
	if (filter && !strcmp(filter, "xz")) rc = archive_write_add_filter_xz(a);
	if (rc != ARCHIVE_OK) {
		tap_diag("filter %s: %s", filter, archive_error_string(a));
		archive_write_free(a);
		return -1;
	}
	if (!strcmp(format, "tar")) archive_write_set_format_pax_restricted(a);
	if (!strcmp(format, "zip")) archive_write_set_format_zip(a);
	if (!strcmp(format, "raw")) archive_write_set_format_raw(a);
	if (archive_write_open_filename(a, p) != ARCHIVE_OK) {
		tap_diag("open %s: %s", p, archive_error_string(a));
		archive_write_free(a);
		return -1;
	}
	for (int i = 0; i < nm; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, m[i].name);
		archive_entry_set_size(e, (la_int64_t)m[i].n);
		archive_entry_set_filetype(e, m[i].data ? AE_IFREG : AE_IFDIR);
		archive_entry_set_perm(e, 0644);
		archive_write_header(a, e);
		if (m[i].data)
			archive_write_data(a, m[i].data, m[i].n);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return 0;
}

/* Read everything; the documents rendered as "source|ordinal|line|text\n". */
/* a document as "source|ordinal|line|text\n", the source relative to dir */
static void put_doc(struct lmt_corpus *c, const struct lmt_doc *d, char **out, size_t *len, size_t *cap)
{
	const char *src = lmt_corpus_source_name(c, d->source);
	const char *base = strstr(src, dir) == src ? src + strlen(dir) + 1 : src;
	char head[600];
	int hl = snprintf(head, sizeof head, "%s|%llu|%llu|", base, (unsigned long long)d->ordinal,
			  (unsigned long long)d->line);
	LMT_GROW(*out, *cap, *len + (size_t)hl + d->len + 2);
	memcpy(*out + *len, head, (size_t)hl);
	*len += (size_t)hl;
	memcpy(*out + *len, d->text, d->len);
	*len += d->len;
	(*out)[(*len)++] = '\n';
	(*out)[*len] = 0;
}

static int read_all(const char *const *names, int n, const struct lmt_corpus_opts *o, char **out,
		    struct lmt_err *err)
{
	char *paths[16];
	for (int i = 0; i < n; i++) {
		paths[i] = malloc(512);
		if (!strcmp(names[i], "-"))
			strcpy(paths[i], "-");
		else
			snprintf(paths[i], 512, "%s/%s", dir, names[i]);
	}
	struct lmt_corpus *c;
	size_t len = 0, cap = 0;
	*out = NULL;
	int rc = lmt_corpus_open(&c, (const char *const *)paths, n, o, err);
	if (!rc) {
		struct lmt_doc d;
		while ((rc = lmt_corpus_next(c, &d, err)) == 1)
			put_doc(c, &d, out, &len, &cap);
		lmt_corpus_close(c);
	}
	LMT_GROW(*out, cap, len + 1);
	(*out)[len] = 0;
	for (int i = 0; i < n; i++)
		free(paths[i]);
	return rc;
}

static void expect(const char *what, const char *const *names, int n, const struct lmt_corpus_opts *o,
		   const char *want)
{
	char *got;
	struct lmt_err err = { 0 };
	int rc = read_all(names, n, o, &got, &err);
	if (!tap_ok(rc == 0 && !strcmp(got, want), "%s", what)) {
		if (rc)
			tap_diag("error: %s", err.msg);
		tap_diag("got:\n%s", got);
		tap_diag("want:\n%s", want);
	}
	free(got);
}

static void expect_error(const char *what, const char *const *names, int n, const struct lmt_corpus_opts *o,
			 const char *needle1, const char *needle2)
{
	char *got;
	struct lmt_err err = { 0 };
	int rc = read_all(names, n, o, &got, &err);
	int ok = rc < 0 && strstr(err.msg, needle1) && (!needle2 || strstr(err.msg, needle2));
	tap_ok(ok, "%s: %s", what, rc < 0 ? err.msg : "(no error)");
	free(got);
}

/* four Cyrillic letters (2 bytes each), four CJK ones (3 bytes each) */
#define CYR4 "\xd0\x96\xd0\xb6\xd1\x88\xd0\xb0"
#define CJK4 "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6"

/* The JSONL fast path must agree with jansson on every line, valid or not. */
static void check_jsonl_agrees(void)
{
	static const char *base[] = {
		"{\"text\": \"plain\"}",
		"{\"id\": 3, \"text\": \"caf\\u00e9 \\ud83d\\ude00 tab\\t nl\\n q\\\" bs\\\\ sl\\/\"}",
		"{\"meta\": {\"a\": [1, 2.5e-3, -0, true, false, null, \"x\"]}, \"text\": \"nested before\"}",
		"{\"text\": \"first\", \"text\": \"second wins\"}",
		"{\"text\": \"\\u0000nul\"}",
		"{\"text\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 raw utf-8\"}",
		"{\"other\": \"x\"}",
		"{\"text\": 42}",
		"[\"text\"]",
		"{\"text\": \"a\", }",
		"{\"text\": \"\\ud800 lone\"}",
		"{\"text\": \"\\udc00 low\"}",
		"{\"text\": \"bad \\x escape\"}",
		"{\"text\": \"\xc0\xaf overlong\"}",
		"{\"text\": \"\xed\xa0\x80 surrogate\"}",
		"{\"text\": \"\xf4\x90\x80\x80 above U+10FFFF\"}",
		"{\"text\": \"\xf0\x8f\xbf\xbf overlong of 4\"}",
		"{\"text\": \"\xf4\x8f\xbf\xbf U+10FFFF \xf0\x90\x80\x80 U+10000\"}",
		"{\"text\": \"cut at the end \xf0\x9f\x98\"}",
		"{\"n\": 01, \"text\": \"x\"}",
		"{\"n\": 1., \"text\": \"x\"}",
		"{\"n\": -, \"text\": \"x\"}",
		"{\"n\": tru, \"text\": \"x\"}",
		"{\"text\": \"x\"} trailing",
		"{\"t\\u0065xt\": \"escaped key\"}",
		"{\"text\": \"ctrl \x01 byte\"}",
		"  {\"text\":\"spaces around\"}  \r",
		/* texts of more than one 64-byte block of 2- and 3-byte characters, which
		 * the scan checks a block at a time, at three alignments (characters cut
		 * by a block's end), and with a bad sequence or a 4-byte one among them */
		"{\"text\": \"" CYR4 CYR4 " " CJK4 CJK4 CJK4 "\"}",
		"{\"text\": \"a" CJK4 CJK4 CJK4 CJK4 CYR4 "\"}",
		"{\"text\": \"ab" CJK4 CJK4 CJK4 CJK4 CYR4 "\"}",
		"{\"text\": \"" CYR4 CYR4 "\xed\xa0\x80" CJK4 CJK4 "\"}",
		"{\"text\": \"" CYR4 CYR4 "\xed\x9f\xbf\xe0\xa0\x80" CJK4 CJK4 "\"}",
		"{\"text\": \"" CYR4 CYR4 "\xe0\x9f\xbf" CJK4 CJK4 "\"}",
		"{\"text\": \"" CYR4 CJK4 "\x80" CYR4 CJK4 "\"}",
		"{\"text\": \"" CYR4 CJK4 "\xc3" CYR4 CJK4 "\"}",
		"{\"text\": \"" CYR4 CJK4 "\xe4\xb8 " CYR4 CJK4 "\"}",
		"{\"text\": \"" CYR4 CJK4 "\xf0\x9f\x98\x80" CYR4 CJK4 "\"}",
		"{\"text\": \"" CYR4 CJK4 "\xc1\xbf" CYR4 CJK4 "\"}",
	};
	uint64_t r = 99;
	int mismatch = 0, tried = 0;
	char path[512];
	snprintf(path, sizeof path, "%s/one.jsonl", dir);
	for (int round = 0; round < 2000; round++) {
		char line[512];
		const char *b = base[round % LMT_ARRAY_SIZE(base)];
		size_t n = strlen(b);
		memcpy(line, b, n);
		if (round >= (int)LMT_ARRAY_SIZE(base)) {
			/* mutate: delete, insert or replace one byte */
			r = lmt_mix64(r + round);
			size_t at = r % (n + 1);
			static const char pool[] = "{}[]\":,\\ 0123456789eE.-+tfnul\x80\xc3\xa9\xff\x01";
			char ch = pool[(r >> 20) % (sizeof pool - 1)];
			switch ((r >> 40) % 3) {
			case 0:
				if (at < n) {
					memmove(line + at, line + at + 1, n - at - 1);
					n--;
				}
				break;
			case 1:
				memmove(line + at + 1, line + at, n - at);
				line[at] = ch;
				n++;
				break;
			default:
				if (at < n)
					line[at] = ch;
			}
		}
		if (memchr(line, '\n', n))
			continue;
		line[n] = '\n';
		writef("one.jsonl", line, n + 1);
		/* what jansson says */
		json_error_t je;
		json_t *root = json_loadb(line, n, JSON_ALLOW_NUL, &je);
		json_t *t = root && json_is_object(root) ? json_object_get(root, "text") : NULL;
		int want_ok = t && json_is_string(t);
		/* what the reader says */
		struct lmt_corpus *c;
		struct lmt_doc d;
		struct lmt_err err = { 0 };
		const char *pp = path;
		struct lmt_corpus_opts o = { 0 };
		o.keep_empty = 1;
		lmt_corpus_open(&c, &pp, 1, &o, &err);
		int rc = lmt_corpus_next(c, &d, &err);
		int agree = want_ok ? rc == 1 && d.len == json_string_length(t) && !memcmp(d.text, json_string_value(t), d.len)
				    : rc < 0 || (rc == 0 && !root);
		if (!want_ok && rc == 0 && root)
			agree = 0;
		if (!agree && mismatch++ < 5)
			tap_diag("line %d disagrees (jansson %s, reader rc %d): %.*s", round, want_ok ? "ok" : "error", rc,
				 (int)n, line);
		tried++;
		lmt_corpus_close(c);
		json_decref(root);
	}
	tap_ok(mismatch == 0, "the JSONL fast path agrees with jansson on %d valid and mutated lines", tried);
}

/*
 * A line's verdict does not depend on which of the reader's two parsers reads it.
 * The fast path hands jansson a line with an escaped key or nested too deep, and
 * once did so for valid lines: a number jansson refuses (beyond 64-bit integers or
 * doubles, which RFC 8259 allows and the fast path takes) was read in one line and
 * refused in the same line with one key escaped. Now the fast path decodes escaped
 * keys and nests as deep as jansson (a value at depth 2048, the top object at 1), so
 * it takes every such line, and jansson reads only lines that it refuses too.
 */
/* Write line (len bytes, its newline last) to name and read it: 1 if it gives the
 * one document want, else 0 and a diagnostic (quiet: none) */
static int reads_as(const char *name, const char *line, int len, const char *want, int quiet)
{
	writef(name, line, (size_t)len);
	char *got;
	char expect_doc[160];
	snprintf(expect_doc, sizeof expect_doc, "%s|0|1|%s\n", name, want);
	struct lmt_err err = { 0 };
	struct lmt_corpus_opts o = { 0 };
	const char *names[] = { name };
	int rc = read_all(names, 1, &o, &got, &err);
	int ok = rc == 0 && !strcmp(got, expect_doc);
	if (!ok && !quiet)
		tap_diag("%.*s: %s", len - 1, line, rc ? err.msg : got);
	free(got);
	return ok;
}

/* A NUL in an object's key: RFC 8259 allows it (a key is a string), jansson does not
 * ("NUL byte in object key not supported"); the reader keeps only the text, and takes
 * the line as Python's json module does, whether the key is the line's own or nested,
 * before the text field or after it. Found by fuzz-jsonl. */
static void check_jsonl_nul_keys(void)
{
	static const char *const lines[] = {
		"{\"a\\u0000b\": 1, \"text\": \"a key with a NUL\"}",
		"{\"text\": \"a NUL key after the text\", \"\\u0000\": [1, 2]}",
		"{\"meta\": {\"\\u0000x\": {\"y\\u0000\": null}}, \"text\": \"nested NUL keys\"}",
		"{\"t\\u0065xt\": \"escaped field, NUL key\", \"n\\u0000\": true}",
	};
	static const char *const want[] = { "a key with a NUL", "a NUL key after the text", "nested NUL keys",
					    "escaped field, NUL key" };
	int bad = 0;
	for (size_t k = 0; k < LMT_ARRAY_SIZE(lines); k++) {
		char line[256];
		int len = snprintf(line, sizeof line, "%s\n", lines[k]);
		/* jansson refuses the line: the check would pass without the NUL */
		json_error_t je;
		json_t *root = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &je);
		if (root || !strstr(je.text, "NUL byte in object key")) {
			tap_diag("%s: jansson took it, or refused it for another reason (%s)", lines[k],
				 root ? "took it" : je.text);
			bad++;
		}
		json_decref(root);
		bad += !reads_as("nul.jsonl", line, len, want[k], 0);
	}
	tap_ok(!bad, "%zu lines with a NUL in a key, which jansson refuses: the text read from each",
	       LMT_ARRAY_SIZE(lines));
}

static void check_jsonl_big_numbers(void)
{
	static const char *const numbers[] = { "1e400", "-1e999", "123456789012345678901234567890",
					       "18446744073709551615", "-9223372036854775809" };
	static const char *const shapes[] = {
		"{\"text\": \"plain\", \"n\": %s}",
		"{\"\\u006e\": %s, \"text\": \"escaped key\"}",
		"{\"t\\u0065xt\": \"escaped field\", \"n\": [%s]}",
		"{\"meta\": {\"h\\u0061sh\": %s}, \"text\": \"nested escaped key\"}",
	};
	static const char *const want[] = { "plain", "escaped key", "escaped field", "nested escaped key" };
	char line[256];
	int bad = 0, n = 0;
	for (size_t i = 0; i < LMT_ARRAY_SIZE(numbers); i++)
		for (size_t k = 0; k < LMT_ARRAY_SIZE(shapes); k++) {
			int len = snprintf(line, sizeof line, shapes[k], numbers[i]);
			line[len++] = '\n';
			/* jansson refuses the line: the check would pass without the number */
			json_error_t je;
			json_t *root = json_loadb(line, (size_t)len, 0, &je);
			bad += root != NULL;
			json_decref(root);
			bad += !reads_as("big.jsonl", line, len, want[k], bad >= 5);
			n++;
		}
	tap_ok(!bad, "%d lines with a number jansson refuses, four shapes (escaped keys among them): the text read "
	       "from each", n);

	/* the depth, with the field's key escaped: a line whose deepest value is at
	 * depth 2048 (the top object at 1) is read, whatever that value is; one at
	 * 2049 is refused, as jansson refuses it (a number it refuses says so first) */
	static const char *const tails[] = { "", "1e400", "\"\\u0041\"" };
	for (int depth = 2048; depth <= 2049; depth++)
		for (size_t t = 0; t < LMT_ARRAY_SIZE(tails); t++) {
			/* arrays down to the deepest value: an empty array, or a leaf in one */
			int arrays = depth - 1 - (*tails[t] != 0);
			char *deep = malloc(2 * (size_t)depth + 64);
			size_t m = (size_t)sprintf(deep, "{\"t\\u0065xt\": \"deep\", \"a\": ");
			for (int d = 0; d < arrays; d++)
				deep[m++] = '[';
			m += (size_t)sprintf(deep + m, "%s", tails[t]);
			for (int d = 0; d < arrays; d++)
				deep[m++] = ']';
			deep[m++] = '}';
			deep[m++] = '\n';
			writef("deep.jsonl", deep, m);
			free(deep);
			const char *names[] = { "deep.jsonl" };
			struct lmt_corpus_opts o = { 0 };
			char what[96];
			snprintf(what, sizeof what, "a value at depth %d (%s) %s", depth, *tails[t] ? tails[t] : "[]",
				 depth == 2048 ? "is read" : "is refused");
			if (depth == 2048)
				expect(what, names, 1, &o, "deep.jsonl|0|1|deep\n");
			else
				expect_error(what, names, 1, &o, "deep.jsonl': line 1", "invalid JSON");
		}
}

/*
 * The read-ahead queue's three ways give the same batches, in order, and the same
 * error after the same documents: a thread of its own (ahead 1), lmt_batchq_get
 * reading each batch itself (ahead 0), and lmt_batchq_fill reading the next one
 * while the caller holds the current one, as tok-train's counting pool does. The
 * file: 3000 documents, then a bad line; batches of at most 4 KiB, the first three
 * smaller; then the same with keep skipping every tenth document and stopping at
 * document 2990, after which nothing is read. The batch the bad line is in never
 * comes (no partial batch).
 */
/* skips every tenth, and stops at 2990 as --max-bytes stops at a document that
 * does not fit: the ones after it would be kept if asked, and must not be */
static int bq_keep(void *ctx, const struct lmt_doc *d)
{
	(void)ctx;
	if (d->ordinal == 2990)
		return -1;
	return d->ordinal % 10 != 3;
}

/* the slots the batches came in: 1 if every batch of the way came in the same one */
static int bq_one_slot[3];

static void bq_trace(int way, int stop, char **out, size_t *len, size_t *cap)
{
	const struct lmt_docbatch *first = NULL;
	char path[512];
	snprintf(path, sizeof path, "%s/bq.jsonl", dir);
	const char *pp = path;
	struct lmt_corpus *c;
	struct lmt_err err = { 0 };
	struct lmt_corpus_opts o = { 0 };
	*len = 0;
	if (lmt_corpus_open(&c, &pp, 1, &o, &err))
		return;
	struct lmt_batchq *q = lmt_batchq_start(c, 4096, 1000, stop ? bq_keep : NULL, NULL, way == 1);
	struct lmt_docbatch *b;
	int rc;
	while ((rc = lmt_batchq_get(q, &b, &err)) > 0) {
		if (way == 2)
			lmt_batchq_fill(q); /* the next batch, while this one is held */
		if (!first) {
			first = b;
			bq_one_slot[way] = 1;
		}
		bq_one_slot[way] &= b == first;
		char head[64];
		int hl = snprintf(head, sizeof head, "batch of %zu:", b->n);
		LMT_GROW(*out, *cap, *len + (size_t)hl + 1);
		memcpy(*out + *len, head, (size_t)hl);
		*len += (size_t)hl;
		for (size_t i = 0; i < b->n; i++) {
			LMT_GROW(*out, *cap, *len + b->docs[i].len + 2);
			(*out)[(*len)++] = ' ';
			memcpy(*out + *len, b->docs[i].text, b->docs[i].len);
			*len += b->docs[i].len;
		}
		(*out)[(*len)++] = '\n';
		lmt_batchq_put(q, b);
	}
	const char *end = rc < 0 ? err.msg : "end";
	LMT_GROW(*out, *cap, *len + strlen(end) + 1);
	memcpy(*out + *len, end, strlen(end) + 1);
	*len += strlen(end);
	lmt_batchq_stop(q);
	lmt_corpus_close(c);
}

static void check_batchq(void)
{
	size_t n = 0, cap = 0;
	char *file = NULL;
	for (int i = 0; i < 3000; i++) {
		LMT_GROW(file, cap, n + 64);
		n += (size_t)snprintf(file + n, 64, "{\"text\": \"document %d\"}\n", i);
	}
	LMT_GROW(file, cap, n + 64);
	n += (size_t)snprintf(file + n, 64, "{\"text\": unquoted}\n");
	writef("bq.jsonl", file, n);
	free(file);
	static const char *const name[] = { "get", "thread", "fill" };
	for (int stop = 0; stop <= 1; stop++) {
		char *want = NULL, *got = NULL;
		size_t wl, wcap = 0, gl, gcap = 0;
		bq_trace(0, stop, &want, &wl, &wcap);
		int batches = 0;
		for (size_t i = 0; i < wl; i++)
			batches += want[i] == '\n';
		for (int way = 1; way <= 2; way++) {
			bq_trace(way, stop, &got, &gl, &gcap);
			if (!tap_ok(gl == wl && !memcmp(got, want, wl), "read-ahead by %s: the batches of reading by get "
				    "(%d batches, then %s)", name[way], batches, stop ? "keep's stop" : "the bad line's error"))
				tap_diag("got %.300s\nwant %.300s", got, want);
		}
		/* the trace itself: the bad line's error, or keep's skips and stop */
		const char *tail = strrchr(want, '\n');
		tap_ok(batches > 4 && tail && (stop ? !strcmp(tail + 1, "end") && strstr(want, " document 2989\n") &&
						      !strstr(want, "document 2990") && !strstr(want, "document 2991") &&
						      !strstr(want, " document 2983 ") &&
						      strstr(want, " document 2984 ")
						    : strstr(tail + 1, "bq.jsonl': line 3001") != NULL),
		       "%s: %s", stop ? "keep skips and stops at document 2990" : "the error names line 3001",
		       tail ? tail + 1 : "");
		free(want);
		free(got);
	}
	/* without fill or a thread one batch is kept at a time; with them, two */
	tap_ok(bq_one_slot[0] && !bq_one_slot[1] && !bq_one_slot[2],
	       "one slot without read-ahead, two with it (get %d, thread %d, fill %d)", bq_one_slot[0], bq_one_slot[1],
	       bq_one_slot[2]);
}

/* documents as read_all writes them, of a corpus read one at a time (batched 0)
 * or in batches of at most 2 documents and 1 MiB; skip: leave out every third */
static int keep_skip(void *ctx, const struct lmt_doc *d)
{
	(void)d;
	return ++*(int *)ctx % 3 != 2;
}


static size_t read_docs(const char *const *paths, int n, const struct lmt_corpus_opts *o, int batched, int skip,
			char **out)
{
	struct lmt_corpus *c;
	struct lmt_err err = { 0 };
	size_t len = 0, cap = 0;
	int seen = 0;
	*out = NULL;
	if (lmt_corpus_open(&c, paths, n, o, &err))
		return 0;
	if (batched) {
		struct lmt_docbatch b = { 0 };
		while (lmt_corpus_read_batch(c, &b, 1u << 20, 2, skip ? keep_skip : NULL, &seen, &err) > 0)
			for (size_t i = 0; i < b.n; i++)
				put_doc(c, &b.docs[i], out, &len, &cap);
		lmt_docbatch_release(&b);
	} else {
		struct lmt_doc d;
		while (lmt_corpus_next(c, &d, &err) == 1)
			if (!skip || keep_skip(&seen, &d))
				put_doc(c, &d, out, &len, &cap);
	}
	lmt_corpus_close(c);
	return len;
}

/*
 * A batch's first document that is all the reader's buffer holds is handed over
 * by swapping the buffers (lmt_corpus_read_batch), and the reader goes on in the
 * batch's old buffer. Files of one document of sizes about the reader's buffer
 * (1 MiB, doubling) and the batch's first buffer (64 KiB), between small ones, and
 * files of lines where one line is the first read's whole buffer: read in batches
 * of two, keeping all or leaving out every third, the same documents as read one
 * at a time.
 */
static void check_batch_swap(void)
{
	static const size_t sizes[] = { 65535, 65536, 65537, 1048575, 1048576, 1048577, 2097151, 2097152, 2097153,
					3, 0, 10 };
	enum { NS = sizeof sizes / sizeof *sizes };
	char *paths[NS + 1];
	const char *pp[NS];
	size_t maxs = NS * 64;
	for (int i = 0; i < NS; i++)
		maxs += sizes[i];
	char *buf = malloc(maxs);
	for (int i = 0; i < NS; i++) {
		for (size_t k = 0; k < sizes[i]; k++)
			buf[k] = (char)('a' + (k * 7 + (size_t)i) % 26);
		paths[i] = malloc(600);
		char name[32];
		snprintf(name, sizeof name, "swap%02d.txt", i);
		writef(name, buf, sizes[i]);
		snprintf(paths[i], 600, "%s/%s", dir, name);
		pp[i] = paths[i];
	}
	/* an order that puts big and small documents first in batches */
	static const int order[] = { 3, 9, 4, 10, 5, 11, 6, 0, 7, 1, 8, 2 };
	const char *po[NS + 1];
	for (int i = 0; i < NS; i++)
		po[i] = pp[order[i]];
	for (int mode = 0; mode < 2; mode++) {
		struct lmt_corpus_opts o = { .txt_docs = mode ? LMT_TXT_LINE : LMT_TXT_FILE };
		if (mode) { /* lines: one of each size, ending in a newline, then short ones */
			size_t n = 0;
			for (int i = 0; i < NS; i++) {
				for (size_t k = 0; k + 1 < sizes[i]; k++)
					buf[n + k] = (char)('a' + k % 26);
				n += sizes[i] ? sizes[i] - 1 : 0;
				buf[n++] = '\n';
				n += (size_t)snprintf(buf + n, 64, "short %d\n", i);
			}
			writef("swaplines.txt", buf, n);
			paths[NS] = malloc(600);
			snprintf(paths[NS], 600, "%s/swaplines.txt", dir);
			po[NS] = paths[NS];
			for (int i = 0; i < NS; i++) { /* each line the first of a file's reads */
				snprintf(buf, 64, "swapl%02d.txt", i);
				size_t l = sizes[i] ? sizes[i] - 1 : 0;
				char *t = malloc(l + 16);
				memset(t, 'q', l);
				memcpy(t + l, "\nafter\n", 7);
				writef(buf, t, l + 7);
				free(t);
				snprintf(paths[i], 600, "%s/%s", dir, buf);
				po[i] = paths[i];
			}
		}
		for (int skip = 0; skip <= 1; skip++) {
			char *one, *batched;
			size_t n1 = read_docs(po, NS + mode, &o, 0, skip, &one),
			       n2 = read_docs(po, NS + mode, &o, 1, skip, &batched);
			tap_ok(n1 > (skip ? 3000000 : 6000000) && n1 == n2 && !memcmp(one, batched, n1),
			       "%s, batches of two%s: the documents read one at a time (%zu bytes)",
			       mode ? "files of lines, each first line the size of a buffer, and a file of them all" :
				      "files of 0 bytes to 2 MiB, each a document",
			       skip ? ", every third left out" : "", n2);
			free(one);
			free(batched);
		}
	}
	for (int i = 0; i <= NS; i++)
		free(paths[i]);
	free(buf);
}

/* The binary threshold the man pages state: a NUL in the first 8 KiB; more than
 * 10% of the first 64 KiB's bytes starting invalid UTF-8; a cut-off sequence at the
 * sample's end is no fault. */
/*
 * The fast path decodes the text field as it checks it. 400 lines of random
 * strings, 0 to 700 bytes, dense with escapes (each simple one, \u of 1 to 3
 * bytes in UTF-8 with upper and lower hex digits, surrogate pairs) between runs
 * of ASCII and raw UTF-8 of every length (short runs are copied 16 bytes at a
 * time), read one at a time, in batches, and with keep_escaped: each text is
 * jansson's, or with keep_escaped what lmt_json_escape writes for it.
 */
static void check_jsonl_decoding(void)
{
	static const char *const piece[] = {
		"\\n", "\\t", "\\r", "\\b", "\\f", "\\\"", "\\\\", "\\/", "\\u00e9", "\\u00C9", "\\u4e2D", "\\u0001",
		"\\u0000", "\\u007f", "\\u07ff", "\\u0800", "\\uffff", "\\ud83d\\ude00", "\\uDBFF\\uDFFF",
		"\\u0022", "\\u005C", "\\u000a", "\\u001f", "\\u0008", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
	};
	enum { LINES = 400 };
	static char file[LINES * 760];
	static size_t at[LINES], len[LINES];
	size_t fl = 0;
	uint64_t r = 5;
	for (int i = 0; i < LINES; i++) {
		size_t want = (size_t)(lmt_mix64(r++) % 700);
		fl += (size_t)sprintf(file + fl, "{\"text\": \"");
		at[i] = fl;
		while (fl - at[i] < want) {
			uint64_t x = lmt_mix64(r++);
			if (x % 3 == 0) {
				/* every fifth line: only the escapes lmt_json_escape writes */
				const char *pc = piece[(x >> 8) % (i % 5 ? LMT_ARRAY_SIZE(piece) : 7)];
				memcpy(file + fl, pc, strlen(pc));
				fl += strlen(pc);
			} else {
				for (size_t k = (x >> 16) % ((i % 4) ? 5 : 40); k > 0; k--)
					file[fl++] = (char)('a' + (x >> (k % 32)) % 26);
			}
		}
		len[i] = fl - at[i];
		fl += (size_t)sprintf(file + fl, "\"}\n");
	}
	writef("dec.jsonl", file, fl);
	char path[512];
	snprintf(path, sizeof path, "%s/dec.jsonl", dir);
	const char *pp = path;
	for (int mode = 0; mode < 3; mode++) { /* one at a time, in batches, keep_escaped */
		struct lmt_corpus *c;
		struct lmt_err err = { 0 };
		struct lmt_corpus_opts o = { 0 };
		o.keep_empty = 1;
		o.keep_escaped = mode == 2;
		struct lmt_docbatch b = { 0 };
		int wrong = 0, seen = 0, kept_raw = 0, rc = lmt_corpus_open(&c, &pp, 1, &o, &err);
		while (rc == 0 && seen < LINES + 1) {
			struct lmt_doc one, *d = &one;
			size_t nd = 1;
			if (mode == 1) {
				if (lmt_corpus_read_batch(c, &b, 1000 + (size_t)seen * 50, 7, NULL, NULL, &err) < 0 || !b.n)
					break;
				nd = b.n;
				d = b.docs;
			} else if (lmt_corpus_next(c, &one, &err) != 1) {
				break;
			}
			for (size_t k = 0; k < nd && seen < LINES; k++, seen++) {
				json_t *t = json_loadb(file + at[seen] - 10, len[seen] + 12, JSON_ALLOW_NUL, NULL);
				json_t *v = json_object_get(t, "text");
				int ok = v != NULL;
				if (mode == 2) {
					/* what the writer would write for jansson's text, quotes off */
					struct lmt_json j;
					lmt_json_init(&j);
					if (v)
						lmt_json_escape(&j, json_string_value(v), json_string_length(v));
					kept_raw += d[k].escaped;
					ok = ok && d[k].escaped && !j.out.oom && d[k].len == j.out.len - 2 &&
					     !memcmp(d[k].text, j.out.buf + 1, d[k].len);
					lmt_json_release(&j);
				} else {
					ok = ok && !d[k].escaped && d[k].len == json_string_length(v) &&
					     !memcmp(d[k].text, json_string_value(v), d[k].len);
				}
				if (!ok && wrong++ < 3)
					tap_diag("mode %d, line %d: %zu bytes decoded", mode, seen + 1, d[k].len);
				json_decref(t);
			}
		}
		tap_ok(rc == 0 && seen == LINES && wrong == 0 && (mode != 2 || kept_raw == LINES),
		       "JSONL strings dense with escapes decode as jansson decodes them, %s (%d lines, %d wrong)",
		       mode == 0 ? "one at a time" : mode == 1 ? "in batches" :
		       "with keep_escaped, in lmt_json_escape's form", seen, wrong);
		lmt_docbatch_release(&b);
		lmt_corpus_close(c);
	}
}

static void check_binary_threshold(void)
{
	static char b[80 << 10];
	memset(b, 'a', sizeof b);
	tap_ok(!lmt_corpus_binary(b, sizeof b), "plain ASCII is text");
	b[8191] = 0;
	tap_ok(lmt_corpus_binary(b, sizeof b) != NULL, "a NUL at byte 8191 is binary");
	b[8191] = 'a';
	b[8192] = 0;
	tap_ok(!lmt_corpus_binary(b, sizeof b), "a NUL past the first 8 KiB is not looked for");
	b[8192] = 'a';
	for (size_t i = 0; i < 1000; i++)
		b[i * 10] = (char)0xe9; /* Latin-1 e-acute: 10% of 10000 bytes, not over */
	tap_ok(!lmt_corpus_binary(b, 10000), "10%% invalid UTF-8 is still text");
	b[9999] = (char)0xe9;
	b[9995] = (char)0xe9;
	tap_ok(lmt_corpus_binary(b, 10000) != NULL, "over 10%% invalid UTF-8 is binary");
	memset(b, 'a', sizeof b);
	b[0] = (char)0xe2;
	tap_ok(!lmt_corpus_binary(b, 1) && !lmt_corpus_binary("\xe2\x82", 2), "a sequence cut off at the end is no fault");
	tap_ok(!lmt_corpus_binary("\xe2\x82\xac euro", 8), "valid UTF-8 is text");
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	check_batch_swap();
	struct lmt_corpus_opts o = { 0 };
	const char *text = "first line\r\nsecond line\n\n\nthird para\nstill third\n";
	const char *jsonl = "{\"text\": \"alpha\", \"id\": 1}\n\n{\"text\": \"be\\u0000ta\\n\", \"other\": \"x\"}\r\n"
			    "{\"body\": \"gamma\", \"text\": \"\"}\n{\"text\": \"delta\"}";
	writef("a.txt", text, strlen(text));
	writef("b.jsonl", jsonl, strlen(jsonl));
	const char *n1[] = { "a.txt" };
	expect("a text file is one document", n1, 1, &o,
	       "a.txt|0|0|first line\r\nsecond line\n\n\nthird para\nstill third\n\n");
	o.txt_docs = LMT_TXT_LINE;
	expect("line mode: one document per line, CR stripped, empty lines skipped, line numbers", n1, 1, &o,
	       "a.txt|0|1|first line\na.txt|1|2|second line\na.txt|2|5|third para\na.txt|3|6|still third\n");
	o.txt_docs = LMT_TXT_BLANK;
	expect("blank mode: paragraphs keep their inner line breaks", n1, 1, &o,
	       "a.txt|0|1|first line\r\nsecond line\na.txt|1|5|third para\nstill third\n");
	o.txt_docs = LMT_TXT_FILE;
	o.keep_empty = 0;
	const char *n2[] = { "b.jsonl" };
	char want_jsonl[] = "b.jsonl|0|1|alpha\nb.jsonl|1|3|be\0ta\n\nb.jsonl|2|5|delta\n";
	char *got;
	struct lmt_err err = { 0 };
	read_all(n2, 1, &o, &got, &err);
	tap_ok(!memcmp(got, want_jsonl, sizeof want_jsonl - 1), "JSONL: text field, NUL kept, blank lines and empty text skipped");
	free(got);
	o.keep_empty = 1;
	char want_keep[] = "b.jsonl|0|1|alpha\nb.jsonl|1|3|be\0ta\n\nb.jsonl|2|4|\nb.jsonl|3|5|delta\n";
	read_all(n2, 1, &o, &got, &err);
	tap_ok(!memcmp(got, want_keep, sizeof want_keep), "JSONL with --keep-empty keeps the empty text");
	free(got);
	o.keep_empty = 0;
	o.text_field = "body";
	expect_error("a record without the chosen field", n2, 1, &o, "b.jsonl': line 1", "no field 'body'");
	o.text_field = NULL;
	const char *bad = "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"text\": oops}\n";
	writef("bad.jsonl", bad, strlen(bad));
	const char *n3[] = { "bad.jsonl" };
	expect_error("malformed JSONL names file and line", n3, 1, &o, "bad.jsonl': line 3", "invalid JSON");
	/* a byte order mark before the first line is read past, as jq does (it was an
	 * invalid JSON error pointing at an invisible character); on any other line
	 * it is named */
	const char *bom = "\xef\xbb\xbf{\"text\": \"one\"}\n{\"text\": \"two\"}\n",
		   *bom2 = "{\"text\": \"one\"}\n\xef\xbb\xbf{\"text\": \"two\"}\n";
	writef("bom.jsonl", bom, strlen(bom));
	writef("bom2.jsonl", bom2, strlen(bom2));
	const char *n3b[] = { "bom.jsonl" }, *n3c[] = { "bom2.jsonl" };
	expect("a byte order mark before a JSONL file's first line is skipped", n3b, 1, &o,
	       "bom.jsonl|0|1|one\nbom.jsonl|1|2|two\n");
	expect_error("a byte order mark on a later line is named", n3c, 1, &o, "bom2.jsonl': line 2",
		     "byte order mark (EF BB BF)");
	const char *n4[] = { "missing.txt" };
	expect_error("a missing file is an error at open", n4, 1, &o, "missing.txt", "No such file");

	/* separators, also across the reader's 1 MiB buffer */
	size_t big = 3u << 20;
	char *sep = malloc(big + 64);
	size_t k = 0, docs = 0;
	while (k < big) {
		int l = snprintf(sep + k, 64, "doc %zu body<|endoftext|>", docs++);
		k += (size_t)l;
	}
	writef("sep.txt", sep, k);
	o.doc_sep = "<|endoftext|>";
	const char *n5[] = { "sep.txt" };
	struct lmt_corpus *c;
	struct lmt_doc d;
	char p[512];
	snprintf(p, sizeof p, "%s/sep.txt", dir);
	const char *pp = p;
	lmt_corpus_open(&c, &pp, 1, &o, &err);
	size_t nd = 0;
	int ok = 1;
	while (lmt_corpus_next(c, &d, &err) == 1) {
		char w[64];
		int l = snprintf(w, sizeof w, "doc %zu body", nd);
		if (d.len != (size_t)l || memcmp(d.text, w, d.len))
			ok = 0;
		nd++;
	}
	lmt_corpus_close(c);
	tap_ok(ok && nd == docs, "separator split over 3 MiB: %zu of %zu documents intact", nd, docs);
	(void)n5;
	o.doc_sep = NULL;
	free(sep);

	/* compressed files and archives give the same documents */
	struct member one = { "x", text, strlen(text) };
	write_archive("a.txt.gz", "raw", "gzip", &one, 1);
	write_archive("a.txt.zst", "raw", "zstd", &one, 1);
	write_archive("a.txt.xz", "raw", "xz", &one, 1);
	struct member js = { "x", jsonl, strlen(jsonl) };
	write_archive("b.jsonl.gz", "raw", "gzip", &js, 1);
	const char *n6[] = { "a.txt.gz", "a.txt.zst", "a.txt.xz" };
	o.txt_docs = LMT_TXT_LINE;
	expect("gz, zst and xz files decompress; sources are the files", n6, 3, &o,
	       "a.txt.gz|0|1|first line\na.txt.gz|1|2|second line\na.txt.gz|2|5|third para\na.txt.gz|3|6|still third\n"
	       "a.txt.zst|0|1|first line\na.txt.zst|1|2|second line\na.txt.zst|2|5|third para\na.txt.zst|3|6|still third\n"
	       "a.txt.xz|0|1|first line\na.txt.xz|1|2|second line\na.txt.xz|2|5|third para\na.txt.xz|3|6|still third\n");
	const char *n7[] = { "b.jsonl.gz" };
	expect("a .jsonl.gz is JSONL", n7, 1, &o, "b.jsonl.gz|0|1|alpha\nb.jsonl.gz|1|3|be");

	/* archives: tar.gz with a nested compressed member and a directory entry */
	char gzjs[4096];
	FILE *tmp;
	snprintf(p, sizeof p, "%s/b.jsonl.gz", dir);
	tmp = fopen(p, "rb");
	size_t gzn = fread(gzjs, 1, sizeof gzjs, tmp);
	fclose(tmp);
	struct member mem[] = {
		{ "docs/", NULL, 0 },
		{ "docs/one.txt", "one\ntwo\n", 8 },
		{ "docs/two.jsonl", "{\"text\":\"three\"}\n", 17 },
		{ "docs/three.jsonl.gz", gzjs, gzn },
	};
	write_archive("arch.tar.gz", "tar", "gzip", mem, 4);
	write_archive("arch.tar.zst", "tar", "zstd", mem, 4);
	write_archive("arch.zip", "zip", NULL, mem, 4);
	const char *want_arch =
		"arch.%s:docs/one.txt|0|1|one\narch.%s:docs/one.txt|1|2|two\narch.%s:docs/two.jsonl|0|1|three\n"
		"arch.%s:docs/three.jsonl.gz|0|1|alpha\narch.%s:docs/three.jsonl.gz|1|3|be";
	const char *kinds[] = { "tar.gz", "tar.zst", "zip" };
	for (int i = 0; i < 3; i++) {
		char name[64], want[1024];
		snprintf(name, sizeof name, "arch.%s", kinds[i]);
		snprintf(want, sizeof want, want_arch, kinds[i], kinds[i], kinds[i], kinds[i], kinds[i]);
		const char *n8[] = { name };
		read_all(n8, 1, &o, &got, &err);
		tap_ok(strncmp(got, want, strlen(want)) == 0, "%s: members are sources, nested .jsonl.gz is read", name);
		free(got);
	}

	/* a truncated archive: the error names archive and member */
	snprintf(p, sizeof p, "%s/arch.tar.gz", dir);
	char *full;
	size_t fn;
	lmt_read_file(p, &full, &fn, &err);
	char *big2 = malloc(200000);
	for (int i = 0; i < 200000; i++)
		big2[i] = (char)('a' + (lmt_mix64((uint64_t)i) % 26));
	struct member m2[] = { { "long.txt", big2, 200000 } };
	write_archive("long.tar.gz", "tar", "gzip", m2, 1);
	snprintf(p, sizeof p, "%s/long.tar.gz", dir);
	free(full);
	lmt_read_file(p, &full, &fn, &err);
	writef("cut.tar.gz", full, fn / 2);
	const char *n9[] = { "cut.tar.gz" };
	o.txt_docs = LMT_TXT_FILE;
	expect_error("a truncated tar.gz names the archive and member", n9, 1, &o, "cut.tar.gz' member 'long.txt'", NULL);
	free(full);
	free(big2);

	/* directories: byte order, recursion, hidden files skipped */
	snprintf(p, sizeof p, "%s/tree", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/tree/sub", dir);
	mkdir(p, 0755);
	writef("tree/b.txt", "B", 1);
	writef("tree/A.txt", "A", 1);
	writef("tree/.hidden", "H", 1);
	writef("tree/sub/c.txt", "C", 1);
	const char *n10[] = { "tree" };
	expect("a directory: files in byte order, recursively, dot files skipped", n10, 1, &o,
	       "tree/A.txt|0|0|A\ntree/b.txt|0|0|B\ntree/sub/c.txt|0|0|C\n");
	const char *n11[] = { "a.txt", "-", "-" };
	expect_error("stdin twice is refused", n11, 3, &o, "more than once", NULL);
	check_jsonl_agrees();
	check_jsonl_decoding();
	check_jsonl_big_numbers();
	check_jsonl_nul_keys();
	check_batchq();
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", dir);
	check_binary_threshold();
	return tap_done();
}
