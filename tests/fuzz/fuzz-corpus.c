/*
 * fuzz-corpus.c: the corpus reader (lmt_corpus_open/next) on one input file.
 *
 * The first byte picks how the rest is read: bits 0-2 the file's name, hence its
 * treatment (plain text, JSONL, a tar or zip archive, gzip- or zstd-compressed
 * text or JSONL, a compressed tar), bits 3-4 how text splits into documents
 * (per file, per line, at blank lines, at "<|endoftext|>"), bit 5 whether empty
 * documents are kept, bit 6 the JSONL text field ("text" or "content"), bit 7
 * whether documents come one by one or in batches. Every document must name a
 * source the corpus has.
 */
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "fuzz.h"

static volatile uint64_t sink;

static int keep_all(void *ctx, const struct lmt_doc *d)
{
	(void)ctx;
	return d->len != 3 || memcmp(d->text, "END", 3) ? 1 : -1; /* a stop, now and then */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[8] = { "c.txt", "c.jsonl", "c.tar", "c.zip",
					       "c.txt.gz", "c.jsonl.gz", "c.tar.gz", "c.jsonl.zst" };
	if (size < 1)
		return 0;
	char path[512];
	struct lmt_err err;
	struct lmt_corpus *c;
	uint8_t f = data[0];
	struct lmt_corpus_opts o = {
		.format = LMT_CORPUS_AUTO,
		.txt_docs = (f >> 3 & 3) == 3 ? LMT_TXT_FILE : f >> 3 & 3,
		.doc_sep = (f >> 3 & 3) == 3 ? "<|endoftext|>" : NULL,
		.text_field = f & 64 ? "content" : NULL,
		.keep_empty = f >> 5 & 1,
	};
	fuzz_dir_empty();
	const char *paths[1] = { fuzz_file(names[f & 7], data + 1, size - 1, path, sizeof path) };
	if (lmt_corpus_open(&c, paths, 1, &o, &err))
		return 0;
	uint64_t sum = 0, done, total;
	if (f & 128) {
		struct lmt_docbatch b = { 0 };
		int rc;
		while ((rc = lmt_corpus_read_batch(c, &b, 4096, 16, keep_all, NULL, &err)) > 0) {
			for (size_t i = 0; i < b.n; i++) {
				if (b.docs[i].source >= lmt_corpus_nsources(c))
					abort();
				sum += b.docs[i].len + strlen(lmt_corpus_source_name(c, b.docs[i].source));
			}
			if (b.stopped)
				break;
		}
		lmt_docbatch_release(&b);
	} else {
		struct lmt_doc d;
		while (lmt_corpus_next(c, &d, &err) > 0) {
			if (d.source >= lmt_corpus_nsources(c) || (!d.len && !o.keep_empty))
				abort();
			for (size_t i = 0; i < d.len; i++)
				sum += (uint8_t)d.text[i];
			sum += strlen(lmt_corpus_source_name(c, d.source));
		}
	}
	lmt_corpus_progress(c, &done, &total);
	sink = sum + done + total;
	lmt_corpus_close(c);
	return 0;
}
