/*
 * fuzz-hf.c: a HuggingFace tokenizer.json through lmt_tok_import_hf; what imports
 * is used as the tools use it (fuzz-tok.h) and exported to tokenizer.json again,
 * and that export must import.
 */
#include <stdio.h>

#include "data/tokinterop.h"
#include "fuzz-tok.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[512], out[512];
	struct lmt_tokenizer t, u;
	struct lmt_err err;
	fuzz_dir_empty();
	if (lmt_tok_import_hf(&t, fuzz_file("tokenizer.json", data, size, path, sizeof path), &err))
		return 0;
	fuzz_use_tokenizer(&t);
	snprintf(out, sizeof out, "%s/export.json", fuzz_dir());
	if (!lmt_tok_export_hf(&t, out, &err)) {
		if (lmt_tok_import_hf(&u, out, &err)) {
			fprintf(stderr, "fuzz: the exported tokenizer.json does not import: %s\n", err.msg);
			abort(); /* what lmt exports, lmt must import */
		}
		lmt_tok_release(&u);
	}
	lmt_tok_release(&t);
	return 0;
}
