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
	LMT_DTYPE_F64,           /* host-side sums and the collectives' scalars */
	LMT_DTYPE_I64,
	LMT_DTYPE_U8,
};
#define LMT_DTYPE_COUNT 7

/* Bytes per element (0 for an unknown dtype). */
size_t lmt_dtype_size(int dtype);
/* "fp32", "bf16", "fp16", "int32", "fp64", "int64", "uint8" ("?" if unknown). */
const char *lmt_dtype_name(int dtype);
/* A name as above (also "f32", "float32", "bfloat16", "f16", "float16", "half") to
 * its dtype, or -1. */
int lmt_dtype_parse(const char *s);

#include <string.h>

static inline uint32_t lmt_bits_of(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

static inline float lmt_float_of(uint32_t u)
{
	float x;
	memcpy(&x, &u, 4);
	return x;
}

/* bf16 is the top half of an fp32: add half an ulp of the kept part (less one
 * when the kept part is even, so that a tie goes to even) and truncate. */
static inline uint16_t lmt_f32_to_bf16(float x)
{
	uint32_t u = lmt_bits_of(x);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t q = (u >> 16) | 0x0040u; /* NaN: quiet, sign and top payload kept */
	/* a select rather than a branch, so that loops of it vectorise */
	return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

static inline float lmt_bf16_to_f32(uint16_t h)
{
	return lmt_float_of((uint32_t)h << 16);
}

/*
 * fp16: 1 sign, 5 exponent (bias 15), 10 fraction bits. Normal results drop 13
 * fraction bits with round-to-nearest-even (a carry out of the fraction correctly
 * bumps the exponent); results below 2^-14 are multiples of 2^-24 (subnormals),
 * rounded the same way from the full 24-bit significand. 65520 = 65504 + half an
 * ulp is a tie whose even neighbour is 2^16, beyond the range: infinity.
 */
static inline uint16_t lmt_f32_to_f16(float x)
{
	uint32_t u = lmt_bits_of(x), ax = u & 0x7fffffffu;
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	if (ax > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
	if (ax >= 0x477ff000u) /* 65520 and above, and infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (ax >= 0x38800000u) { /* 2^-14 and above: normal */
		uint32_t r = ax - 0x38000000u, q = r >> 13, rem = r & 0x1fffu;
		if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
			q++;
		return (uint16_t)(sign | q);
	}
	if (ax <= 0x33000000u) /* up to 2^-25, half the smallest subnormal: a tie to 0 */
		return sign;
	uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
	uint32_t shift = 126 - e; /* value = m * 2^(e - 150) = (m >> shift) * 2^-24 */
	uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1u)))
		q++;
	return (uint16_t)(sign | q);
}

static inline float lmt_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0x1f)
		return lmt_float_of(sign | 0x7f800000u | (m << 13));
	if (e)
		return lmt_float_of(sign | ((e + 112) << 23) | (m << 13));
	return (sign ? -1.0f : 1.0f) * (float)m * 0x1p-24f;
}


#endif
