/*
 * fuzz-gpt2.c: GPT-2's encoder.json and vocab.bpe through lmt_tok_import_gpt2.
 *
 * The input is the two files as fuzz.h cuts a directory: encoder.json first, then
 * "\n--8<-- vocab.bpe\n" and the merges (no second part: an empty vocab.bpe). What
 * imports is used as the tools use it (fuzz-tok.h).
 */
#include "data/tokinterop.h"
#include "fuzz-tok.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char enc[512], bpe[512];
	struct lmt_tokenizer t;
	struct lmt_err err;
	fuzz_dir_write(data, size, "encoder.json");
	snprintf(enc, sizeof enc, "%s/encoder.json", fuzz_dir());
	snprintf(bpe, sizeof bpe, "%s/vocab.bpe", fuzz_dir());
	if (access(bpe, F_OK))
		fuzz_file("vocab.bpe", "", 0, bpe, sizeof bpe);
	if (lmt_tok_import_gpt2(&t, enc, bpe, NULL, 0, &err))
		return 0;
	fuzz_use_tokenizer(&t);
	lmt_tok_release(&t);
	return 0;
}
