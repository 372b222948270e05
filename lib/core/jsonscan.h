/*
 * jsonscan.h: the byte scan under both JSON string paths, the reader's
 * (data/corpus.c, JSONL texts) and the writer's (core/json.c, lmt_json_escape).
 *
 * Its stops are the bytes a JSON string cannot hold as they are or that need
 * checking: control bytes, '"', '\\' and bytes above 0x7f. Where SSE2 is there
 * (always on x86-64) a mask of them is made for 64 bytes at a time and kept from
 * stop to stop, and a block's valid 2- and 3-byte UTF-8 characters are checked
 * whole (lmt_utf8_stops64) rather than stopped at: text with a line break every
 * few dozen bytes or in another script costs a bit scan a stop, not a new scan
 * (the byte-at-a-time scan was a sixth of dedup-minhash's time).
 *
 *	struct lmt_jsonstops t = { NULL, 0 };
 *	while ((p = lmt_json_next_stop(&t, p, end)) < end) { ...look at *p, move p on... }
 *
 * A mask is of the 64 bytes it starts at; p may only move forward.
 */
#ifndef LMT_JSONSCAN_H
#define LMT_JSONSCAN_H

#include <stdint.h>
#include <string.h>

#include "core/utf8.h"

struct lmt_jsonstops {
	const unsigned char *b;  /* the 64 bytes the mask is of */
	uint64_t m;              /* bit i: b[i] is a stop (past the end: all stops) */
};

#if defined(__SSE2__)
static inline uint64_t lmt_json_stops64(const unsigned char *b, const unsigned char *end)
{
	unsigned char tmp[64];
	if (end - b < 64) {
		memset(tmp, 0, sizeof tmp); /* NUL is a stop: the scan stops at the end */
		memcpy(tmp, b, (size_t)(end - b));
		b = tmp;
	}
	const __m128i lo = _mm_set1_epi8(0x20), q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
	uint64_t m = 0, hi = 0;
	for (int k = 0; k < 4; k++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(b + 16 * k));
		/* signed: bytes >= 0x80 are negative, so below 0x20 too */
		__m128i stop = _mm_or_si128(_mm_cmplt_epi8(v, lo), _mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)));
		m |= (uint64_t)(unsigned)_mm_movemask_epi8(stop) << (16 * k);
		hi |= (uint64_t)(unsigned)_mm_movemask_epi8(v) << (16 * k);
	}
	if (!hi)
		return m;
	return (m & ~hi) | lmt_utf8_stops64(b, hi);
}
#endif

/* The first stop at or after p <= end (end if none). */
static inline const unsigned char *lmt_json_next_stop(struct lmt_jsonstops *t, const unsigned char *p,
						      const unsigned char *end)
{
#if defined(__SSE2__)
	for (;;) {
		/* a block shorter than 64 ends in stops from end on: only a full block is
		 * ever passed whole, so p never passes end */
		size_t off = t->b ? (size_t)(p - t->b) : 64;
		if (off < 64) {
			uint64_t m = t->m & (~0ULL << off);
			if (m)
				return t->b + __builtin_ctzll(m);
			p = t->b + 64;
		}
		if (p >= end)
			return end;
		t->b = p;
		t->m = lmt_json_stops64(p, end);
	}
#else
	(void)t;
	while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
		p++;
	return p;
#endif
}

/* The escape lmt_json_escape writes for c, a control byte, '"' or '\\', at
 * out (room for 6); its length. Shared with the reader, which writes kept texts
 * in the writer's form without decoding them (data/corpus.c). */
static inline int lmt_json_escape_ascii(unsigned c, char *out)
{
	static const char hx[] = "0123456789abcdef";
	char e = c == '"' ? '"' : c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't'
	       : c == '\b' ? 'b' : c == '\f' ? 'f' : 0;
	out[0] = '\\';
	if (e) {
		out[1] = e;
		return 2;
	}
	out[1] = 'u';
	out[2] = '0';
	out[3] = '0';
	out[4] = hx[c >> 4];
	out[5] = hx[c & 15];
	return 6;
}

#endif
