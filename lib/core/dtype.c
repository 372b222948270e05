/*
 * dtype.c: element types and the scalar conversions between them (dtype.h).
 */
#include "core/dtype.h"

#include <string.h>
#include <strings.h>

size_t lmt_dtype_size(int dtype)
{
	switch (dtype) {
	case LMT_DTYPE_F32: return 4;
	case LMT_DTYPE_BF16: return 2;
	case LMT_DTYPE_F16: return 2;
	case LMT_DTYPE_I32: return 4;
	case LMT_DTYPE_F64: return 8;
	case LMT_DTYPE_I64: return 8;
	case LMT_DTYPE_U8: return 1;
	default: return 0;
	}
}

const char *lmt_dtype_name(int dtype)
{
	static const char *const names[] = { "fp32", "bf16", "fp16", "int32", "fp64", "int64", "uint8" };
	return dtype >= 0 && dtype < LMT_DTYPE_COUNT ? names[dtype] : "?";
}

int lmt_dtype_parse(const char *s)
{
	static const struct {
		const char *name;
		int dtype;
	} names[] = {
		{ "fp32", LMT_DTYPE_F32 }, { "f32", LMT_DTYPE_F32 }, { "float32", LMT_DTYPE_F32 },
		{ "float", LMT_DTYPE_F32 }, { "bf16", LMT_DTYPE_BF16 }, { "bfloat16", LMT_DTYPE_BF16 },
		{ "fp16", LMT_DTYPE_F16 }, { "f16", LMT_DTYPE_F16 }, { "float16", LMT_DTYPE_F16 },
		{ "half", LMT_DTYPE_F16 }, { "int32", LMT_DTYPE_I32 }, { "i32", LMT_DTYPE_I32 },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcasecmp(s, names[i].name))
			return names[i].dtype;
	return -1;
}
