/*
 * llmctokens.h: writing llm.c's token file (tok-encode --format llmc), so a
 * corpus encoded here trains in llm.c unchanged.
 *
 * The layout is llm.c's (dev/data/data_common.py): a header of 256 int32 (magic
 * 20240520, version, token count), then the tokens: version 1 as uint16 (GPT-2's
 * vocabularies), version 2 as uint32 (written for LLaMA 3's 128256), chosen by
 * the vocabulary. It has no checksum and no document index: a format of another
 * project, written as it is. The header is written last, once the count is
 * known, and the file renamed into place then (core/atomicfile.h).
 */
#ifndef LMT_LLMCTOKENS_H
#define LMT_LLMCTOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "core/atomicfile.h"
#include "core/error.h"

struct lmt_llmc_tokens {
	struct lmt_atomicfile af;
	uint64_t ntok;
	int version;                 /* 1: uint16 tokens; 2: uint32 */
	uint16_t *conv;              /* version 1's narrowing buffer */
	size_t cap;
};

/* Start the file at path for a vocabulary of n_vocab (a zero header for now). */
int lmt_llmc_tokens_open(struct lmt_llmc_tokens *l, const char *path, uint32_t n_vocab, struct lmt_err *err);
/* Append n tokens. */
int lmt_llmc_tokens_write(struct lmt_llmc_tokens *l, const uint32_t *t, size_t n, struct lmt_err *err);
/* Write the header and rename the file into place; LMT_ERANGE beyond llm.c's int32
 * count. Frees what l holds either way (the temporary is removed on failure). */
int lmt_llmc_tokens_finish(struct lmt_llmc_tokens *l, struct lmt_err *err);

#endif
