/*
 * fuzz-tokstream.c: a token stream (.lmtoks) through lmt_tokstream_reader_open,
 * with and without verify; what opens is read whole: every document's record,
 * every token, every source name.
 */
#include <string.h>

#include "data/tokstream.h"
#include "fuzz.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[512];
	struct lmt_err err;
	fuzz_dir_empty();
	fuzz_file("s.lmtoks", data, size, path, sizeof path);
	for (int verify = 0; verify < 2; verify++) {
		struct lmt_tokstream_reader r;
		if (lmt_tokstream_reader_open(&r, path, verify, &err))
			continue;
		uint64_t sum = 0;
		for (uint64_t i = 0; i < r.info.n_docs; i++) {
			struct lmt_tokstream_doc d;
			lmt_tokstream_reader_doc(&r, i, &d);
			for (uint64_t k = 0; k < d.n_tok; k++)
				sum += lmt_tokstream_reader_token(&r, d.tok_off + k);
			sum += strlen(r.sources[d.source]);
		}
		sink = sum;
		lmt_tokstream_reader_close(&r);
	}
	return 0;
}
