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
static inline int lmt_utf8_encode(uint32_t cp, char *out)
{
	unsigned char *o = (unsigned char *)out;
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/*
 * The bytes >= 0x80 (hi: bit i for b[i]) of the 64 at b that a scan must still
 * stop at, to check their characters one at a time: none but a character cut by
 * the block's end when the block is of 2- and 3-byte characters only (most
 * scripts), every one otherwise (4-byte characters, bad bytes). Checked whole:
 * each lead byte C2-DF has one continuation byte 80-BF after it, each E0-EF two,
 * and no continuation byte is without its lead (the continuations are exactly
 * the leads shifted, so a block that begins inside a character fails); E0 is
 * followed by A0-BF (no overlongs), ED by 80-9F (no surrogates). For the JSON
 * string scan and the JSON writer, which stopped at every character (a stop, a
 * load and a few branches each).
 */
static inline uint64_t lmt_utf8_stops64(const unsigned char *b, uint64_t hi)
{
	if (!hi)
		return 0;
	uint64_t l2 = 0, l3 = 0, cont = 0, conthi = 0, e0 = 0, ed = 0;
#define JRANGE(v, a, z) _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - (a)))), _mm_set1_epi8((char)((z) - (a) + 1 - 128)))
	for (int k = 0; k < 4; k++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(b + 16 * k));
		l2 |= (uint64_t)(unsigned)_mm_movemask_epi8(JRANGE(v, 0xc2, 0xdf)) << (16 * k);
		l3 |= (uint64_t)(unsigned)_mm_movemask_epi8(JRANGE(v, 0xe0, 0xef)) << (16 * k);
		cont |= (uint64_t)(unsigned)_mm_movemask_epi8(JRANGE(v, 0x80, 0xbf)) << (16 * k);
		conthi |= (uint64_t)(unsigned)_mm_movemask_epi8(JRANGE(v, 0xa0, 0xbf)) << (16 * k);
		e0 |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xe0))) << (16 * k);
		ed |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xed))) << (16 * k);
	}
#undef JRANGE
	uint64_t cut = (l2 & 1ULL << 63) | (l3 & 3ULL << 62); /* continued in the next block */
	int ok = (hi & ~(l2 | l3 | cont)) == 0 && cont == ((l2 << 1) | (l3 << 1) | (l3 << 2)) &&
		 ((e0 << 1) & ~conthi) == 0 && ((ed << 1) & conthi) == 0;
	return ok ? cut : hi;
}
#endif

#endif
