/*
 * corpus.h: reading documents from whatever a user has lying around.
 *
 * Inputs are paths or "-" (stdin). A path may be:
 *   - a plain file: text (.txt and anything unrecognised) or JSONL (.jsonl, .ndjson,
 *     .json), each record an object whose text field (default "text") is a document;
 *   - a compressed file: .gz .zst .xz .bz2 .lz4 (decompressed through libarchive;
 *     the name without the suffix decides text or JSONL);
 *   - an archive: .tar .tar.gz .tgz .tar.zst .tar.xz .tar.bz2 .zip; each regular
 *     member is read as a file of its own (members may themselves be compressed);
 *   - a directory: its files, recursively, in byte order of their names, skipping
 *     names that start with '.'.
 *
 * Inputs found rather than named (the entries of a named directory, the members of a
 * named archive) are skipped when they cannot be read: a dangling symlink, a symlink
 * loop, a FIFO, socket or device, a file that cannot be opened, or a binary file
 * (lmt_corpus_binary says which). A file named on the command line, or stdin, is
 * never skipped: missing or unreadable it is an error, since the user asked for it;
 * binary it is read as given (byte-level tokenizers encode any bytes). With strict
 * set every skip is an error instead, and so is a named binary file. Skipped inputs take no source id, so the
 * documents of the rest are the same as without the skipped files.
 *
 * Text is split into documents per file (default), per line, at blank lines, or at
 * a separator string. stdin is sniffed: compressed or archived input is detected by
 * libarchive; text whose first byte is '{' is read as JSONL unless told otherwise.
 *
 * Every document carries a source id (the index of the file or archive member it
 * came from, in reading order; the same inputs always give the same ids) and its
 * ordinal within that source; for line-oriented input also its line number.
 * Reading is streaming: memory holds one document (and one input buffer) at a time.
 */
#ifndef LMT_CORPUS_H
#define LMT_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

enum lmt_corpus_format {
	LMT_CORPUS_AUTO = 0,
	LMT_CORPUS_TEXT,
	LMT_CORPUS_JSONL,
};

enum lmt_txt_docs {
	LMT_TXT_FILE = 0,    /* a whole file is one document */
	LMT_TXT_LINE,        /* each line is a document (without its "\n" or "\r\n") */
	LMT_TXT_BLANK,       /* documents are separated by one or more blank lines */
};

struct lmt_corpus_opts {
	int format;              /* enum lmt_corpus_format */
	int txt_docs;            /* enum lmt_txt_docs */
	const char *doc_sep;     /* split text at this string instead (e.g. "<|endoftext|>") */
	const char *text_field;  /* JSONL field holding the text; NULL means "text" */
	int keep_empty;          /* yield empty documents too (default: skip them) */
	int strict;              /* an input that would be skipped is an error */
	struct lmt_corpus_skips *skips; /* optional, caller-owned: filled with what was
					 * skipped; emptied by each lmt_corpus_open */
	int raw_hash;            /* fill lmt_doc.raw_hash */
	int keep_escaped;        /* JSONL: a text field is put in lmt_json_escape's form
				  * instead of decoded (lmt_doc.escaped) */
	uint64_t max_doc;        /* the most bytes a document (or a JSONL line) may hold;
				  * 0: LMT_CORPUS_MAX_DOC */
};
/* A document is held whole in memory: one longer than this is an error, not a
 * read that grows until the machine runs out (a file of no newlines read by lines,
 * /dev/zero). 1 GiB: the reader's buffer then holds at most 2 GiB. */
#define LMT_CORPUS_MAX_DOC ((uint64_t)1 << 30)

/* What a corpus passed over: the count, and the first few names with the reason. */
#define LMT_CORPUS_SKIP_NAMES 5
struct lmt_corpus_skips {
	uint64_t n;
	size_t nnames;           /* min(n, LMT_CORPUS_SKIP_NAMES) */
	struct lmt_corpus_skip {
		char *name;      /* "dir/file" or "archive.tar:member" (malloc'd) */
		char *why;       /* "dangling symlink", "binary: ..." (malloc'd) */
	} first[LMT_CORPUS_SKIP_NAMES];
};
/* Frees the names; the struct is then empty and reusable. */
void lmt_corpus_skips_release(struct lmt_corpus_skips *s);

/*
 * NULL if p[0..n) (the start of a file) reads as text, else why not, as a static
 * string. Binary means a NUL byte in the first 8 KiB, or more than 10% of the first
 * 64 KiB's bytes starting invalid UTF-8 sequences (a sequence cut off at the end of
 * the sample does not count). 10%, not less, so that Latin-1 prose stays text; random
 * or compressed bytes are around 40%.
 */
const char *lmt_corpus_binary(const void *p, size_t n);
#define LMT_CORPUS_SNIFF_NUL (8u << 10)
#define LMT_CORPUS_SNIFF_UTF8 (64u << 10)

struct lmt_doc {
	const char *text;        /* valid until the next lmt_corpus_next call */
	size_t len;
	uint32_t source;         /* index into the source table */
	uint64_t ordinal;        /* 0-based index of the document within its source */
	uint64_t line;           /* 1-based first line for line-oriented input, else 0 */
	/*
	 * With lmt_corpus_opts.keep_escaped: 1 when text..len are what
	 * lmt_json_escape writes for the decoded text, without the quotes: the JSONL
	 * string as the fast reader checked it, its escapes \" \\ \b \f \n \r \t
	 * kept, \/ and \u of other characters decoded, \u of control characters
	 * written as lmt_json_escape writes them. A writer can copy it as it is;
	 * dedup-minhash's second pass does, instead of decoding and encoding again.
	 * 0 for a line jansson read (the decoded text).
	 */
	int escaped;
	/* With lmt_corpus_opts.raw_hash: a 64-bit hash of the text as the input has it
	 * (a JSONL string undecoded where the fast reader took it; else the text), so
	 * that two reads of one input can be compared whether or not they decoded */
	uint64_t raw_hash;
};

struct lmt_corpus;

/* Expands directories and checks that every path exists and is readable. */
int lmt_corpus_open(struct lmt_corpus **c, const char *const *paths, int npaths,
		    const struct lmt_corpus_opts *opts, struct lmt_err *err);
/* 1: *doc filled; 0: end of input; < 0: error (message names file and line/member). */
int lmt_corpus_next(struct lmt_corpus *c, struct lmt_doc *doc, struct lmt_err *err);
void lmt_corpus_close(struct lmt_corpus *c);

uint32_t lmt_corpus_nsources(const struct lmt_corpus *c);
/* "path", "archive.tar:member/name" or "<stdin>"; owned by the corpus. */
const char *lmt_corpus_source_name(const struct lmt_corpus *c, uint32_t id);
/* Input bytes consumed so far (compressed bytes for compressed input) and the total
 * size of the input files (0 if unknown, e.g. stdin). For progress bars. */
void lmt_corpus_progress(const struct lmt_corpus *c, uint64_t *done, uint64_t *total);

/* Parse "file", "line" or "blank". Returns the enum or -1. */
int lmt_txt_docs_parse(const char *s);
int lmt_corpus_format_parse(const char *s);

/*
 * Batches: documents copied out of the reader so threads can work on many at once.
 * lmt_corpus_read_batch appends documents until the batch holds max_bytes or
 * max_docs; keep (optional) sees each document first and returns 1 to keep it, 0
 * to skip it, -1 to stop reading (the document is not kept). Returns the number of
 * documents in the batch (0 at the end of input), or < 0 on error.
 */
struct lmt_docbatch {
	char *text;              /* all documents' bytes, back to back */
	size_t len, cap;
	struct lmt_doc *docs;    /* docs[i].text points into text */
	size_t n, capdocs;
	int stopped;             /* keep returned -1, or the input ended */
};

int lmt_corpus_read_batch(struct lmt_corpus *c, struct lmt_docbatch *b, size_t max_bytes,
			  size_t max_docs, int (*keep)(void *ctx, const struct lmt_doc *d),
			  void *ctx, struct lmt_err *err);
void lmt_docbatch_release(struct lmt_docbatch *b);

/*
 * Read-ahead: a thread fills the next batch while the caller works on the current
 * one, so reading and decompressing overlap with encoding. Batches come in input
 * order; the first three are limited to an eighth, a quarter and a half of
 * max_bytes, so that the caller's threads start soon. The corpus must not be used
 * directly while the queue runs. With ahead 0 there is no thread: lmt_batchq_get
 * reads the batch itself, so that a tool asked for one thread (-j1) runs on one
 * core, unless lmt_batchq_fill read it before; the same batches come either way.
 *
 *	struct lmt_batchq *q = lmt_batchq_start(c, 8 << 20, 1 << 15, keep, ctx, threads > 1);
 *	struct lmt_docbatch *b;
 *	while ((rc = lmt_batchq_get(q, &b, &err)) > 0) { ...; lmt_batchq_put(q, b); }
 *	lmt_batchq_stop(q);
 */
struct lmt_batchq;
struct lmt_batchq *lmt_batchq_start(struct lmt_corpus *c, size_t max_bytes, size_t max_docs,
				    int (*keep)(void *ctx, const struct lmt_doc *d), void *ctx, int ahead);
/* 1: *b holds a batch; 0: end of input; < 0: the reader's error (in err). */
int lmt_batchq_get(struct lmt_batchq *q, struct lmt_docbatch **b, struct lmt_err *err);
void lmt_batchq_put(struct lmt_batchq *q, struct lmt_docbatch *b);
/*
 * Without the thread (ahead 0): read the next batch now, into the slot that the
 * batch last got does not use, for the next lmt_batchq_get to hand over (its
 * error, if any, too). A caller whose threads work on a batch runs this as one
 * of their tasks, so that reading takes a share of the same cores instead of a
 * thread of its own competing with them; never while lmt_batchq_get runs, or
 * twice at once. Nothing with a thread, at the end of input, or when the next
 * batch is read already.
 */
void lmt_batchq_fill(struct lmt_batchq *q);
void lmt_batchq_stop(struct lmt_batchq *q);

#endif
