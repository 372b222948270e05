/*
 * fuzz-tiktoken.c: a tiktoken rank file through lmt_tok_import_tiktoken.
 *
 * The first byte picks the pre-tokenizer pattern and the special tokens given on
 * the command line (none, one at the next free id, one at a fixed id); the rest is
 * the rank file. What imports is used as the tools use it (fuzz-tok.h).
 */
#include "data/tokinterop.h"
#include "fuzz-tok.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const patterns[4] = { "gpt2", "cl100k", "o200k", "none" };
	static const char *const specials[2][1] = { { "<|endoftext|>" }, { "<|endoftext|>=300" } };
	if (size < 1)
		return 0;
	char path[512];
	struct lmt_tokenizer t;
	struct lmt_err err;
	int ns = data[0] >> 2 & 3;
	fuzz_dir_empty();
	fuzz_file("t.tiktoken", data + 1, size - 1, path, sizeof path);
	if (lmt_tok_import_tiktoken(&t, path, patterns[data[0] & 3], ns ? specials[(ns - 1) & 1] : NULL, ns ? 1 : 0,
				    &err))
		return 0;
	fuzz_use_tokenizer(&t);
	lmt_tok_release(&t);
	return 0;
}
