/*
 * safetensors.h: a checkpoint's model as a Hugging Face GPT-2: the weights in the
 * safetensors format and the config.json that transformers' GPT2LMHeadModel loads.
 *
 * The safetensors format (github.com/huggingface/safetensors): an 8-byte
 * little-endian u64 N, then N bytes of UTF-8 JSON, then the byte buffer. The JSON
 * is an object mapping each tensor name to {"dtype": "F32" | "BF16" | "F16",
 * "shape": [...], "data_offsets": [begin, end]}, offsets in bytes relative to the
 * start of the buffer, row-major little-endian elements; the tensors tile the
 * buffer with no gap and the last ends at the end of the file. An optional
 * "__metadata__" object maps strings to strings. Like the reference writer, this
 * one pads the JSON with spaces to a multiple of 8 bytes, so the buffer (and every
 * tensor) starts 8-aligned.
 *
 * The names and layouts are those of transformers' GPT-2 (modeling_gpt2.py):
 *
 *	transformer.wte.weight              [V, C]    wte, the V real rows (not the padding)
 *	transformer.wpe.weight              [maxT, C] wpe
 *	transformer.h.N.ln_1.weight, .bias  [C]       ln1w, ln1b of layer N
 *	transformer.h.N.attn.c_attn.weight  [C, 3C]   qkvw of layer N, transposed
 *	transformer.h.N.attn.c_attn.bias    [3C]      qkvb
 *	transformer.h.N.attn.c_proj.weight  [C, C]    attprojw, transposed
 *	transformer.h.N.attn.c_proj.bias    [C]       attprojb
 *	transformer.h.N.ln_2.weight, .bias  [C]       ln2w, ln2b
 *	transformer.h.N.mlp.c_fc.weight     [C, 4C]   fcw, transposed
 *	transformer.h.N.mlp.c_fc.bias       [4C]      fcb
 *	transformer.h.N.mlp.c_proj.weight   [4C, C]   fcprojw, transposed
 *	transformer.h.N.mlp.c_proj.bias     [C]       fcprojb
 *	transformer.ln_f.weight, .bias      [C]       lnfw, lnfb
 *	lm_head.weight                      [V, C]    lm_head, V rows; untied models only
 *
 * GPT-2's projections are Conv1D modules, y = x W + b with W stored (in, out); lmt
 * (like llm.c) stores (out, in) and computes x W^T, hence the transposes. The
 * output head is a Linear, (out, in) like lmt's, so it is not transposed; a tied
 * model has none (transformers ties it to wte). q, k and v keep their order
 * within c_attn, and heads their order within each. Tensors appear in the file in
 * lmt's parameter order (model.h), layer by layer within each parameter.
 *
 * Conversions from fp32: bf16 and fp16 round to nearest, ties to even (IEEE 754),
 * through subnormals; finite values beyond the format's range become infinities of
 * their sign (counted: 65520 and above in fp16); NaN stays NaN (quiet, sign kept).
 */
#ifndef LMT_SAFETENSORS_H
#define LMT_SAFETENSORS_H

#include <stdint.h>

#include "ckpt/ckpt.h"
#include "core/digest.h"
#include "core/dtype.h"
#include "core/error.h"

enum lmt_st_dtype {
	LMT_ST_DTYPE_F32 = 0,
	LMT_ST_DTYPE_BF16,
	LMT_ST_DTYPE_F16,
};

/* "fp32", "bf16", "fp16" (also "f32", "float32", ...) to an lmt_st_dtype, or -1. */
int lmt_st_dtype_parse(const char *s);
/* The safetensors name ("F32", "BF16", "F16") and torch's ("float32", ...). */
const char *lmt_st_dtype_name(int dtype);
const char *lmt_st_dtype_torch(int dtype);

/* the scalar conversions (lmt_f32_to_bf16 ...) are core/dtype.h's */

struct lmt_st_opts {
	const char *path;           /* the .safetensors file (written atomically) */
	const char *config_path;    /* config.json (written atomically), or NULL */
	int dtype;                  /* enum lmt_st_dtype */
	int64_t bos_id, eos_id;     /* token ids for config.json; -1: unknown, omitted */
	uint64_t max_shard;         /* bytes of tensor data a file holds at most; 0: no limit */
};

/*
 * Sharding, as transformers' save_pretrained does it: where the tensor data
 * exceeds max_shard, PATH (say DIR/model.safetensors) is not written; instead
 * DIR/model-00001-of-0000N.safetensors ... (each a complete safetensors file with
 * the same __metadata__) and DIR/model.safetensors.index.json,
 *	{"metadata": {"total_size": BYTES}, "weight_map": {"NAME": "FILE", ...}}
 * (keys sorted, two-space indent, as Python's json.dumps(indent=2, sort_keys=True)
 * writes it; total_size: the bytes of tensor data, headers excluded). Tensors fill
 * shards in file order; one that would take a shard past max_shard starts the
 * next, and one larger than max_shard has a shard of its own.
 */
#define LMT_ST_SHARD_MAX 99999

/* "5GB" (10^9), "500MiB" (2^20), "1KB", plain bytes "123": HF's sizes. 0 or
 * LMT_EINVAL with a message naming what. */
int lmt_st_parse_size(const char *s, uint64_t *bytes, struct lmt_err *err);

struct lmt_st_result {
	uint64_t bytes;             /* the .safetensors file */
	uint64_t header_bytes;      /* N: the JSON header, padding included */
	int tensors;
	uint64_t elements;
	uint64_t overflow;          /* finite values that became infinite */
	uint64_t nan;               /* NaN values (kept NaN) */
	uint64_t peak_buffer;       /* bytes of tensor data held at once */
	uint8_t sha256[LMT_SHA256_LEN]; /* of the whole file (unsharded), of the index (sharded) */
	int shards;                 /* 1: PATH; N > 1: N shard files and the index */
	uint64_t data_bytes;        /* tensor data, headers excluded (the index's total_size) */
};

/*
 * Write the model of checkpoint c (its param/NAME tensors; its shape from the
 * manifest's state.model: layers, heads, channels, context, vocab, vocab_padded,
 * untied) as GPT-2 in safetensors, and config.json. Every tensor the model needs
 * must be present with the shape state.model implies, or the message names it.
 * One source tensor is held at a time (the largest: wte, Vp * C floats, or an MLP
 * weight of all layers, L * 4C * C) with one layer's converted slice. Chunk CRCs
 * are checked as the tensors are read.
 */
int lmt_safetensors_export_gpt2(const struct lmt_ckpt *c, const struct lmt_st_opts *o, struct lmt_st_result *r,
				struct lmt_err *err);

#endif
