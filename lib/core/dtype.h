/*
 * dtype.h: the element types tensors are stored in, and the scalar conversions
 * between them (the reference the backends' casts are tested against).
 *
 * bf16 is the top half of an fp32 (8 exponent bits, 7 fraction bits); fp16 is IEEE
 * binary16 (5 exponent bits, bias 15, 10 fraction bits, largest finite 65504).
 * Conversions from fp32 round to nearest, ties to even; NaN stays a quiet NaN with
 * its sign; fp16 overflows to infinity.
 */
#ifndef LMT_DTYPE_H
#define LMT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

enum lmt_dtype {
	LMT_DTYPE_F32 = 0,
	LMT_DTYPE_BF16,
	LMT_DTYPE_F16,
	LMT_DTYPE_I32,
};
#define LMT_DTYPE_COUNT 4

/* Bytes per element (0 for an unknown dtype). */
size_t lmt_dtype_size(int dtype);
/* "fp32", "bf16", "fp16", "int32" ("?" for an unknown dtype). */
const char *lmt_dtype_name(int dtype);
/* A name as above (also "f32", "float32", "bfloat16", "f16", "float16", "half") to
 * its dtype, or -1. */
int lmt_dtype_parse(const char *s);

uint16_t lmt_f32_to_bf16(float x);
float lmt_bf16_to_f32(uint16_t h);
uint16_t lmt_f32_to_f16(float x);
float lmt_f16_to_f32(uint16_t h);

#endif
