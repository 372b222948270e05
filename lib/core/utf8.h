/*
 * utf8.h: the one UTF-8 decoder and encoder (the normaliser, the JSON, YAML and
 * SVG writers, and the tokenizer's byte handling all use these).
 */
#ifndef LMT_UTF8_H
#define LMT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decode one UTF-8 character from p[0..n), n > 0: sets *cp and returns its length
 * (1 to 4). A byte that starts no valid sequence gives *cp = LMT_UTF8_BAD + byte
 * and length 1. */
#define LMT_UTF8_BAD 0x110000u
int lmt_utf8_decode(const unsigned char *p, size_t n, uint32_t *cp);

/* lmt_utf8_decode, with 2- and 3-byte characters (most scripts) decoded inline:
 * for the loops that meet one every few bytes (the normaliser, word splitting),
 * where the call was most of a character's cost. */
static inline int lmt_utf8_decode_fast(const unsigned char *p, size_t n, uint32_t *cp)
{
	unsigned c = p[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf && n >= 2 && (p[1] & 0xc0) == 0x80) {
		*cp = (c & 0x1f) << 6 | (p[1] & 0x3f);
		return 2;
	}
	if (c >= 0xe0 && c <= 0xef && n >= 3 && (p[1] & 0xc0) == 0x80 && (p[2] & 0xc0) == 0x80) {
		uint32_t v = (c & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
		if (v >= 0x800 && (v < 0xd800 || v > 0xdfff)) { /* no overlongs, no surrogates */
			*cp = v;
			return 3;
		}
	}
	return lmt_utf8_decode(p, n, cp);
}
/* Encode cp (<= 0x10FFFF) at out; returns the length. */
int lmt_utf8_encode(uint32_t cp, char *out);

#endif
