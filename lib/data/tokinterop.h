/*
 * tokinterop.h: importing and exporting other tokenizers' files.
 *
 *   tiktoken rank file   one line per token: base64(bytes) SP rank. Imported with
 *                        tiktoken's semantics: a piece that is itself a token is
 *                        that token (ignore_merges); otherwise every split of a token
 *                        of rank r into two tokens is a merge of priority r.
 *   GPT-2 files          encoder.json (byte-level string -> id) and vocab.bpe (the
 *                        merges in order, after a "#version" line). Merge i has
 *                        priority i.
 *   HuggingFace          tokenizer.json with a byte-level BPE model (ByteLevel
 *                        pre-tokenizer, alone or after a Split regex). Merge i of
 *                        model.merges has priority i; ignore_merges is honoured.
 *
 * Ids are kept exactly as the source numbers them. Where the source leaves holes in
 * the id space (cl100k has none at 100256 and between 100261 and 100275), each hole
 * gets a special token "<|lmt_unused_N|>" so ids stay identical; such tokens are
 * never produced by encoding.
 *
 * Special tokens for formats that do not list them (tiktoken, GPT-2) are given as
 * "STRING=ID" (or "STRING" for the next free id).
 */
#ifndef LMT_TOKINTEROP_H
#define LMT_TOKINTEROP_H

#include "core/error.h"
#include "data/tokenizer.h"

/* The length of the string of a special token given to an import as "STRING=ID"
 * or "STRING" (the last '=' followed by digits only starts the id). */
size_t lmt_tok_special_spec_len(const char *spec);
/* An import's special token specs: none with an empty string, no string twice
 * (at two ids, say); LMT_EINVAL with a message naming the first that is not. */
int lmt_tok_check_special_specs(const char *const *specs, int n, struct lmt_err *err);
int lmt_tok_import_tiktoken(struct lmt_tokenizer *t, const char *path, const char *pattern,
			    const char *const *specials, int nspecials, struct lmt_err *err);
int lmt_tok_import_gpt2(struct lmt_tokenizer *t, const char *encoder_json, const char *vocab_bpe,
			const char *const *specials, int nspecials, struct lmt_err *err);
int lmt_tok_import_hf(struct lmt_tokenizer *t, const char *path, struct lmt_err *err);

/* Write a HuggingFace tokenizer.json (atomically). */
/* The same tokenizer.json as text (caller frees *text). */
int lmt_tok_export_hf_text(const struct lmt_tokenizer *t, char **text, size_t *len, struct lmt_err *err);
int lmt_tok_export_hf(const struct lmt_tokenizer *t, const char *path, struct lmt_err *err);

/*
 * A tokenizer's files, committed together so that neither is in place unless both
 * are (core/atomicfile.h's lmt_atomicfile_commit_all): the lmt file at out (NULL:
 * none; its name completed by lmt_tok_output_name, into final, cap bytes) and
 * HuggingFace's tokenizer.json at hf (NULL: none). Serialising also fixes the
 * SHA-256 the name may carry.
 */
int lmt_tok_write_files(struct lmt_tokenizer *t, const char *out, char *final, size_t cap, const char *hf,
			struct lmt_err *err);

#endif
