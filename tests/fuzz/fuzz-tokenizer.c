/*
 * fuzz-tokenizer.c: lmt's own tokenizer file (.lmtok) through lmt_tok_load, and
 * what loads used as the tools use it (fuzz-tok.h).
 */
#include "data/tokenizer.h"
#include "fuzz-tok.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[512];
	struct lmt_tokenizer t;
	struct lmt_err err;
	fuzz_dir_empty();
	if (lmt_tok_load(&t, fuzz_file("t.lmtok", data, size, path, sizeof path), &err))
		return 0;
	fuzz_use_tokenizer(&t);
	lmt_tok_release(&t);
	return 0;
}
