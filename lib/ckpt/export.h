/*
 * export.h: a checkpoint's model as a directory another toolkit loads whole: a
 * Hugging Face model directory as save_pretrained writes one, or llm.c's model and
 * tokenizer files.
 *
 * An export is all or nothing. It is written into a staging directory next to the
 * target (TARGET.partial-XXXXXX), sealed by a manifest, lmt-export.json,
 *
 *	{"schema": "lmt-export", "schema_version": 1, "format": "safetensors" | "llmc",
 *	 "source": {"update": N, "tokenizer_sha256": HEX | null},
 *	 "files": [{"path": NAME, "bytes": N, "sha256": HEX}, ...]}   (by name, itself excluded)
 *
 * and renamed into place only when complete. A target that exists is replaced
 * only if it is an earlier export (its lmt-export.json lists every file it holds),
 * and then as a whole, by exchanging the two directories (renameat2
 * RENAME_EXCHANGE) and removing the earlier one; every other existing target (a
 * file, a run or checkpoint directory, any other directory with something in it)
 * is refused and left as it was.
 *
 * llm.c's files (github.com/karpathy/llm.c, train_gpt2.c and llmc/tokenizer.h):
 *
 *	model file       256 int32 header words: 20240326, 3 (fp32), maxT, V, L, NH,
 *	                 C, Vp, then zeros; the parameters in fp32, in lmt's (= llm.c's)
 *	                 order, wte with its Vp rows (lmt_gpt_save_llmc's bytes)
 *	gpt2_tokenizer.bin  256 uint32 header words: 20240328, 2 (version), V, the
 *	                 end-of-text id, then zeros; per token id 0..V-1 a uint8
 *	                 length and that many bytes (a token longer than 255 bytes
 *	                 cannot be written: refused)
 */
#ifndef LMT_EXPORT_H
#define LMT_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "core/digest.h"
#include "core/error.h"
#include "data/tokenizer.h"

#define LMT_EXPORT_MANIFEST "lmt-export.json"
#define LMT_LLMC_TOKENIZER_MAGIC 20240328

/* May out be written? 0 (*earlier: 1 if it is an earlier export to replace, 0 if
 * it does not exist or is an empty directory), or LMT_EINVAL naming why not. */
int lmt_export_target(const char *out, int *earlier, struct lmt_err *err);

/* Make the staging directory next to out (mode as a mkdir would give it). */
int lmt_export_stage(const char *out, char *staging, size_t cap, struct lmt_err *err);

struct lmt_export_file {
	char name[256];
	uint64_t bytes;
	uint8_t sha256[LMT_SHA256_LEN];
};

/* Hash every file in staging and write lmt-export.json there; *files (malloc'd,
 * sorted by name, the manifest not among them) and *n for the caller's record. */
int lmt_export_seal(const char *staging, const char *format, const struct lmt_ckpt *c,
		    struct lmt_export_file **files, int *n, struct lmt_err *err);

/* Put staging in out's place (out: not there, empty, or an earlier export that is
 * removed), fsyncing both directories' parents. */
int lmt_export_commit(const char *staging, const char *out, int earlier, struct lmt_err *err);

/* The Hugging Face files beside the weights and config.json, into dir:
 * generation_config.json, tokenizer.json and tokenizer_config.json (if tok), and
 * README.md, a model card with HF's YAML metadata header filled from the
 * checkpoint's recorded run configuration (state.config). bos/eos: the ids
 * prompts start after and generation stops at (-1: none known). name: the
 * model's name for the card. */
int lmt_export_hf_extras(const char *dir, const struct lmt_ckpt *c, const struct lmt_tokenizer *tok, int64_t bos,
			 int64_t eos, int dtype, const char *name, struct lmt_err *err);

/* The ids HF's files give as bos and eos for tok (NULL: -1, none): documents
 * start after the end-of-text token in training (tok-encode, shard-pack put the
 * EOS between them), so a prompt starts after it too: bos is the tokenizer's BOS
 * where it has one, else its EOS, as in GPT-2. */
void lmt_export_bos_eos(const struct lmt_tokenizer *tok, int64_t *bos, int64_t *eos);

/* llm.c's model file of c at path (atomically); a model with an untied head is
 * refused (llm.c has none). */
int lmt_export_llmc_model(const struct lmt_ckpt *c, const char *path, struct lmt_err *err);
/* llm.c's tokenizer file (version 2) of tok at path (atomically). */
int lmt_export_llmc_tokenizer(const struct lmt_tokenizer *tok, const char *path, struct lmt_err *err);

#endif
