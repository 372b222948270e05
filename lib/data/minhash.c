/*
 * minhash.c: words and shingles, MinHash signatures, LSH parameters, banding and
 * clustering, and the small hash tables the deduplicator needs (see minhash.h).
 *
 * Per shingle, signing was the hot loop; with one-permutation hashing (the
 * default) it is a few percent of dedup-minhash's time, and splitting and hashing
 * words is more: words are found 64 bytes at a time from a bit mask of White_Space
 * bytes and hashed 8 at a time where the CPU has AVX-512 DQ, and each word's hash
 * is mixed once for the n shingles it is in (8 shingles at a time, likewise),
 * giving the values lmt_hash_bytes and lmt_ngram_hash give. With OPH every
 * shingle goes through one permutation: the kernels compute pi(h) and its bin for
 * 8 or 4 shingles at a time in AVX-512 or AVX2 where the CPU has them, and update
 * the bin minima one lane at a time (a scatter: two lanes may share a bin).
 * Densification is the same code for every kernel. A document of more than
 * about K ln K shingles rarely has an empty bin; a short one probes about K/m
 * bins for each empty bin (m the non-empty ones): at worst, two shingles in two
 * bins, some 8000 probes of a few ns (one shingle is a shortcut). The classic method sends every shingle through every permutation (128
 * exact products mod 2^61 - 1 per shingle by default), permutations innermost,
 * over three small arrays (a, b and the running minima), 8 or 4 at a time. The
 * kernel is chosen at run time, so one binary runs everywhere; all compute the
 * same exact values, and test-minhash holds each to a 128-bit reference.
 */
#include "data/minhash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/textnorm.h"
#include "core/utf8.h"
#include "core/util.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define WORD_SEED 0x6c6d742d776f7264ULL    /* "lmt-word" */
#define SHINGLE_SEED 0x6c6d742d73686e67ULL /* "lmt-shng" */
#define BAND_SEED 0x6c6d742d62616e64ULL    /* "lmt-band" */
#define OPH_SEED 0x6c6d742d6f706831ULL     /* "lmt-oph1" */


static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in [lo, LMT_MINHASH_PRIME - 1] by rejection (61-bit draws) */
static uint64_t draw(uint64_t *s, uint64_t lo)
{
	for (;;) {
		uint64_t x = splitmix64(s) >> 3;
		if (x >= lo && x < LMT_MINHASH_PRIME)
			return x;
	}
}

/* lmt_hash_bytes(p, l, WORD_SEED), its last partial lane read as one 8-byte load
 * and masked where the text goes on for 8 more bytes (a word is short: the
 * variable-length copy was most of the cost) */
static inline uint64_t word_hash(const char *p, size_t l, size_t room)
{
	uint64_t h = WORD_SEED ^ (l * 0x9e3779b97f4a7c15ULL);
	size_t r = l;
	while (r >= 8) {
		h = (h ^ lmt_mix64(lmt_load_u64(p))) * 0x9e3779b97f4a7c15ULL;
		p += 8;
		r -= 8;
		room -= 8;
	}
	if (r) {
		uint64_t t = 0;
		if (room >= 8) /* little-endian (core/util.h): the first r bytes are the low ones */
			t = lmt_load_u64(p) & ((1ULL << (8 * r)) - 1);
		else
			memcpy(&t, p, r);
		h = (h ^ lmt_mix64(t ^ 0xff)) * 0x9e3779b97f4a7c15ULL;
	}
	return lmt_mix64(h);
}

#if defined(__SSE2__)
/* bit i: byte i of the 64 at p is ASCII White_Space (9-13, 32, as lmt_unitab_ascii
 * has it); *hi: bit i, byte i is above 0x7f */
static uint64_t space_mask(const char *p, uint64_t *hi)
{
	uint64_t m = 0, h = 0;
	for (int k = 0; k < 4; k++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
		__m128i ctl = _mm_cmplt_epi8(_mm_sub_epi8(v, _mm_set1_epi8(9 - 128)), _mm_set1_epi8(5 - 128));
		__m128i sp = _mm_or_si128(ctl, _mm_cmpeq_epi8(v, _mm_set1_epi8(' ')));
		m |= (uint64_t)(unsigned)_mm_movemask_epi8(sp) << (16 * k);
		h |= (uint64_t)(unsigned)_mm_movemask_epi8(v) << (16 * k);
	}
	*hi = h;
	return m;
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512dq"))) static inline __m512i mix64_x8(__m512i x)
{
	const __m512i c = _mm512_set1_epi64((long long)0xd6e8feb86659fd93ULL);
	x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 32));
	x = _mm512_mullo_epi64(x, c);
	x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 32));
	x = _mm512_mullo_epi64(x, c);
	return _mm512_xor_si512(x, _mm512_srli_epi64(x, 32));
}

/* word_hash of 8 words at once (AVX-512 DQ): lane j of every word that has one
 * gathered, a last partial lane masked and marked as word_hash marks it. Every
 * word's lanes must lie in the text: its start plus its length rounded up to 8. */
__attribute__((target("avx512f,avx512dq")))
static void word_hash_x8(const char *text, const size_t *start, const size_t *len, uint64_t *out)
{
	const __m512i c = _mm512_set1_epi64((long long)0x9e3779b97f4a7c15ULL);
	const __m512i ones = _mm512_set1_epi64(-1), ff = _mm512_set1_epi64(0xff), s64 = _mm512_set1_epi64(64);
	const __m512i st = _mm512_loadu_si512(start), l = _mm512_loadu_si512(len);
	__m512i h = _mm512_xor_si512(_mm512_set1_epi64((long long)WORD_SEED), _mm512_mullo_epi64(l, c));
	size_t lanes = (_mm512_reduce_max_epu64(l) + 7) / 8;
	for (size_t j = 0; j < lanes; j++) {
		const __m512i off = _mm512_set1_epi64((long long)(8 * j));
		__mmask8 active = _mm512_cmpgt_epu64_mask(l, off);
		__mmask8 full = _mm512_cmpge_epu64_mask(l, _mm512_add_epi64(off, _mm512_set1_epi64(8)));
		__m512i t = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), active, _mm512_add_epi64(st, off),
							text, 1);
		/* the r < 8 bytes left: the low 8r bits (a shift by 64 or more gives 0) */
		__m512i m = _mm512_srlv_epi64(ones, _mm512_sub_epi64(s64, _mm512_slli_epi64(_mm512_sub_epi64(l, off), 3)));
		t = _mm512_mask_mov_epi64(_mm512_xor_si512(_mm512_and_si512(t, m), ff), full, t);
		h = _mm512_mask_mov_epi64(h, active, _mm512_mullo_epi64(_mm512_xor_si512(h, mix64_x8(t)), c));
	}
	_mm512_storeu_si512(out, mix64_x8(h));
}
#endif

/*
 * The words of a text 64 bytes at a time: a bit mask of the White_Space bytes
 * (for ASCII from byte compares; each character of other bytes decoded, as
 * lmt_textnorm_next_word decodes it, all its bytes taking its class), words the
 * runs of zeros, their starts and ends the mask's edges. What
 * lmt_textnorm_next_word finds, without a call and two byte loops a word (they
 * were a fifth of dedup-minhash's time).
 */
static size_t block_words(const char *text, size_t len, uint64_t *out, int vec)
{
	const unsigned char *u = (const unsigned char *)text;
	size_t k = 0, start = 0, owed = 0; /* owed: bytes of a character begun in the last block */
	size_t ws[8], wl[8], nw = 0;        /* with vec, words waiting to be hashed 8 at a time */
	int owed_sp = 0;
	uint64_t carry = 1;      /* the text begins as after a space */
	for (size_t base = 0; base < len; base += 64) {
		uint64_t sp, hi;
		const size_t nb = LMT_MIN(len - base, (size_t)64);
		if (nb == 64) {
			sp = space_mask(text + base, &hi);
		} else {
			char tail[64];
			memset(tail, ' ', sizeof tail);
			memcpy(tail, text + base, nb);
			sp = space_mask(tail, &hi); /* past the end: spaces, which end the last word */
		}
		if (owed) {
			uint64_t m = (1ULL << owed) - 1;
			sp = owed_sp ? sp | m : sp & ~m;
			hi &= ~m;
			owed = 0;
		}
		while (hi) {
			size_t j = (size_t)__builtin_ctzll(hi);
			uint32_t cp;
			size_t l = (size_t)lmt_utf8_decode_fast(u + base + j, len - base - j, &cp);
			/* White_Space beyond ASCII is U+0085, U+00A0 and a few in U+1680..U+3000
			 * (test-minhash checks the table against this filter) */
			int is = (cp == 0x85 || cp == 0xa0 || (cp >= 0x1680 && cp <= 0x3000)) && lmt_uni_is_space(cp);
			size_t in = LMT_MIN(l, 64 - j);
			uint64_t m = (in == 64 ? ~0ULL : (1ULL << in) - 1) << j;
			sp = is ? sp | m : sp & ~m;
			hi &= ~m;
			if (l > in) {
				owed = l - in;
				owed_sp = is;
			}
		}
		uint64_t prev = sp << 1 | carry;
		uint64_t edges = (~sp & prev) | (sp & ~prev); /* starts and ends alternate */
		carry = sp >> 63;
		while (edges) {
			size_t at = base + (size_t)__builtin_ctzll(edges);
			if (!(sp >> (at - base) & 1)) {
				start = at;
			} else if (!vec) {
				out[k++] = word_hash(text + start, at - start, len - start);
			} else {
				ws[nw] = start;
				wl[nw] = at - start;
				if (++nw == 8) {
					/* the last word's lanes in the text: the others' are too */
					if (len - start >= ((at - start + 7) & ~(size_t)7))
						word_hash_x8(text, ws, wl, out + k);
					else
						for (size_t i = 0; i < 8; i++)
							out[k + i] = word_hash(text + ws[i], wl[i], len - ws[i]);
					k += 8;
					nw = 0;
				}
			}
			edges &= edges - 1;
		}
	}
	for (size_t i = 0; i < nw; i++)
		out[k++] = word_hash(text + ws[i], wl[i], len - ws[i]);
	if (!carry) /* a word up to the end of a text of a multiple of 64 bytes */
		out[k++] = word_hash(text + start, len - start, len - start);
	return k;
}
#endif

int lmt_word_hashes(const char *text, size_t len, uint64_t **v, size_t *cap, size_t *n)
{
	size_t k = *n, pos = 0, s, l;
	/* a word and its separator take 2 bytes at least */
	if (LMT_GROW(*v, *cap, k + len / 2 + 1))
		return LMT_ENOMEM;
#if defined(__SSE2__)
	(void)pos, (void)s, (void)l;
#if defined(__x86_64__)
	*n = k + block_words(text, len, *v + k, __builtin_cpu_supports("avx512dq"));
#else
	*n = k + block_words(text, len, *v + k, 0);
#endif
#else
	while (lmt_textnorm_next_word(text, len, &pos, &s, &l))
		(*v)[k++] = word_hash(text + s, l, len - s);
	*n = k;
#endif
	return 0;
}

uint64_t lmt_ngram_hash(const uint64_t *words, size_t k)
{
	return lmt_hash_bytes(words, k * sizeof *words, SHINGLE_SEED);
}

#if defined(__x86_64__)
/* lmt_shingles' two loops 8 lanes or windows at a time (vpmullq): every word's
 * lane mixed, then the windows from the first while 8 of them fit; returns the
 * first window left to the scalar loop. Window i + 8 reads lanes from i + 8 on,
 * which the 8 windows stored at i did not overwrite. */
__attribute__((target("avx512f,avx512dq")))
static size_t shingles_avx512(const uint64_t *words, size_t nwords, size_t g, uint64_t h0, uint64_t *out)
{
	size_t k = 0;
	for (; k + 8 <= nwords; k += 8)
		_mm512_storeu_si512(out + k, mix64_x8(_mm512_loadu_si512(words + k)));
	for (; k < nwords; k++)
		out[k] = lmt_mix64(words[k]);
	const __m512i c = _mm512_set1_epi64((long long)0x9e3779b97f4a7c15ULL);
	size_t i = 0;
	for (; i + 8 + g - 1 <= nwords; i += 8) {
		__m512i h = _mm512_set1_epi64((long long)h0);
		for (size_t j = 0; j < g; j++)
			h = _mm512_mullo_epi64(_mm512_xor_si512(h, _mm512_loadu_si512(out + i + j)), c);
		_mm512_storeu_si512(out + i, mix64_x8(h));
	}
	return i;
}
#endif

size_t lmt_shingles(const uint64_t *words, size_t nwords, int ngram, uint64_t *out)
{
	if (nwords == 0)
		return 0;
	size_t g = (size_t)ngram;
	if (nwords < g) {
		out[0] = lmt_ngram_hash(words, nwords);
		return 1;
	}
	/* lmt_ngram_hash of each window, lmt_hash_bytes unrolled: each word's lane is
	 * mixed once, not once for every window it is in; out holds the mixed lanes,
	 * and window i overwrites lane i only when no later window needs it */
	const uint64_t h0 = SHINGLE_SEED ^ (g * sizeof *words * 0x9e3779b97f4a7c15ULL);
	size_t i = 0;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx512dq"))
		i = shingles_avx512(words, nwords, g, h0, out);
	else
#endif
		for (size_t k = 0; k < nwords; k++)
			out[k] = lmt_mix64(words[k]);
	for (; i + g <= nwords; i++) {
		uint64_t h = h0;
		for (size_t k = 0; k < g; k++)
			h = (h ^ out[i + k]) * 0x9e3779b97f4a7c15ULL;
		out[i] = lmt_mix64(h);
	}
	return nwords - g + 1;
}

/*
 * Signing kernels. All compute, for each permutation j, the minimum over the
 * shingles of (a_j * h + b_j) mod p, exactly, into mn[0..npad).
 *
 * The scalar kernel uses the 128-bit product. The vector kernels have only
 * 32 x 32 -> 64-bit multiplies (vpmuludq), so they split a = a1 2^32 + a0 and
 * h = h1 2^32 + h0 (a1, h1 < 2^29) and use 2^61 = 1 (mod p):
 *
 *	a h = a1 h1 2^64 + (a1 h0 + a0 h1) 2^32 + a0 h0
 *	    = 8 a1 h1 + (mid >> 29) + (mid mod 2^29) 2^32 + a0 h0      (mod p)
 *
 * with mid = a1 h0 + a0 h1 < 2^62; a0 h0 is folded as (x mod 2^61) + (x >> 61).
 * The sum with b is below 2^64, one more fold leaves it below p + 4, and one
 * conditional subtraction makes it canonical. test-minhash checks every kernel
 * against a 128-bit reference.
 */
static void sign_scalar(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint64_t *mn)
{
	const int np = m->num_perm;
	const uint64_t *restrict a = m->a, *restrict b = m->b;
	for (int j = 0; j < np; j++)
		mn[j] = LMT_MINHASH_PRIME;
	for (size_t i = 0; i < n; i++) {
		const uint64_t h = lmt_mod61(sh[i]);
		for (int j = 0; j < np; j++) {
			uint64_t x = lmt_mod61_affine(a[j], b[j], h);
			mn[j] = x < mn[j] ? x : mn[j];
		}
	}
}

/*
 * OPH kernels: mn[0..num_perm) = the minimum of pi(h) over the shingles of each
 * bin, LMT_MINHASH_NOBIN where none fell. The vector kernels use the same split
 * product as the classic ones, with h in the lanes and a broadcast, and the bin
 * ((v >> 29) * K) >> 32 with a 32 x 32 -> 64-bit multiply (v >> 29 < 2^32).
 */
static void oph_init(const struct lmt_minhash *m, uint64_t *mn)
{
	for (int j = 0; j < m->num_perm; j++)
		mn[j] = LMT_MINHASH_NOBIN;
}

static inline void oph_put(uint64_t *mn, uint32_t bin, uint64_t v)
{
	mn[bin] = v < mn[bin] ? v : mn[bin];
}

static void oph_scalar(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint64_t *mn)
{
	const uint32_t k = (uint32_t)m->num_perm;
	oph_init(m, mn);
	for (size_t i = 0; i < n; i++) {
		uint64_t v = lmt_mod61_affine(m->oa, m->ob, lmt_mod61(sh[i]));
		oph_put(mn, lmt_minhash_bin(v, k), v);
	}
}

#if defined(__x86_64__)
#define P61 ((long long)LMT_MINHASH_PRIME)

__attribute__((target("avx512f")))
static void sign_avx512(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint64_t *mn)
{
	const int np = m->npad;
	const __m512i p = _mm512_set1_epi64(P61), m29 = _mm512_set1_epi64((1LL << 29) - 1);
	for (int j = 0; j < np; j++)
		mn[j] = LMT_MINHASH_PRIME;
	for (size_t i = 0; i < n; i++) {
		const uint64_t h = lmt_mod61(sh[i]);
		const __m512i h0 = _mm512_set1_epi64((long long)(h & 0xffffffffu));
		const __m512i h1 = _mm512_set1_epi64((long long)(h >> 32));
		for (int j = 0; j < np; j += 8) {
			__m512i a = _mm512_loadu_si512(m->a + j), a1 = _mm512_srli_epi64(a, 32);
			__m512i hh = _mm512_mul_epu32(a1, h1);
			__m512i mid = _mm512_add_epi64(_mm512_mul_epu32(a1, h0), _mm512_mul_epu32(a, h1));
			__m512i ll = _mm512_mul_epu32(a, h0);
			__m512i s = _mm512_add_epi64(_mm512_slli_epi64(hh, 3), _mm512_srli_epi64(mid, 29));
			s = _mm512_add_epi64(s, _mm512_slli_epi64(_mm512_and_si512(mid, m29), 32));
			s = _mm512_add_epi64(s, _mm512_and_si512(ll, p));
			s = _mm512_add_epi64(s, _mm512_srli_epi64(ll, 61));
			s = _mm512_add_epi64(s, _mm512_loadu_si512(m->b + j));
			s = _mm512_add_epi64(_mm512_and_si512(s, p), _mm512_srli_epi64(s, 61));
			s = _mm512_min_epu64(s, _mm512_sub_epi64(s, p)); /* s - p wraps when s < p */
			_mm512_storeu_si512(mn + j, _mm512_min_epu64(s, _mm512_loadu_si512(mn + j)));
		}
	}
}

__attribute__((target("avx2")))
static void sign_avx2(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint64_t *mn)
{
	const int np = m->npad;
	const __m256i p = _mm256_set1_epi64x(P61), pm1 = _mm256_set1_epi64x(P61 - 1);
	const __m256i m29 = _mm256_set1_epi64x((1LL << 29) - 1);
	for (int j = 0; j < np; j++)
		mn[j] = LMT_MINHASH_PRIME;
	for (size_t i = 0; i < n; i++) {
		const uint64_t h = lmt_mod61(sh[i]);
		const __m256i h0 = _mm256_set1_epi64x((long long)(h & 0xffffffffu));
		const __m256i h1 = _mm256_set1_epi64x((long long)(h >> 32));
		for (int j = 0; j < np; j += 4) {
			__m256i a = _mm256_loadu_si256((const __m256i *)(m->a + j)), a1 = _mm256_srli_epi64(a, 32);
			__m256i hh = _mm256_mul_epu32(a1, h1);
			__m256i mid = _mm256_add_epi64(_mm256_mul_epu32(a1, h0), _mm256_mul_epu32(a, h1));
			__m256i ll = _mm256_mul_epu32(a, h0);
			__m256i s = _mm256_add_epi64(_mm256_slli_epi64(hh, 3), _mm256_srli_epi64(mid, 29));
			s = _mm256_add_epi64(s, _mm256_slli_epi64(_mm256_and_si256(mid, m29), 32));
			s = _mm256_add_epi64(s, _mm256_and_si256(ll, p));
			s = _mm256_add_epi64(s, _mm256_srli_epi64(ll, 61));
			s = _mm256_add_epi64(s, _mm256_loadu_si256((const __m256i *)(m->b + j)));
			s = _mm256_add_epi64(_mm256_and_si256(s, p), _mm256_srli_epi64(s, 61));
			/* s < p + 4 < 2^63 and the minima are < 2^63: signed compares are safe */
			s = _mm256_sub_epi64(s, _mm256_and_si256(_mm256_cmpgt_epi64(s, pm1), p));
			__m256i cur = _mm256_loadu_si256((const __m256i *)(mn + j));
			cur = _mm256_blendv_epi8(cur, s, _mm256_cmpgt_epi64(cur, s));
			_mm256_storeu_si256((__m256i *)(mn + j), cur);
		}
	}
}

__attribute__((target("avx512f")))
static void oph_avx512(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint64_t *mn)
{
	const uint32_t k = (uint32_t)m->num_perm;
	const __m512i p = _mm512_set1_epi64(P61), m29 = _mm512_set1_epi64((1LL << 29) - 1);
	const __m512i a = _mm512_set1_epi64((long long)m->oa), a1 = _mm512_srli_epi64(a, 32);
	const __m512i b = _mm512_set1_epi64((long long)m->ob), kk = _mm512_set1_epi64(k);
	uint64_t v[8], bin[8];
	oph_init(m, mn);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m512i h = _mm512_loadu_si512(sh + i);
		h = _mm512_add_epi64(_mm512_and_si512(h, p), _mm512_srli_epi64(h, 61));
		h = _mm512_min_epu64(h, _mm512_sub_epi64(h, p));
		__m512i h1 = _mm512_srli_epi64(h, 32);
		__m512i hh = _mm512_mul_epu32(a1, h1);
		__m512i mid = _mm512_add_epi64(_mm512_mul_epu32(a1, h), _mm512_mul_epu32(a, h1));
		__m512i ll = _mm512_mul_epu32(a, h);
		__m512i s = _mm512_add_epi64(_mm512_slli_epi64(hh, 3), _mm512_srli_epi64(mid, 29));
		s = _mm512_add_epi64(s, _mm512_slli_epi64(_mm512_and_si512(mid, m29), 32));
		s = _mm512_add_epi64(s, _mm512_and_si512(ll, p));
		s = _mm512_add_epi64(s, _mm512_srli_epi64(ll, 61));
		s = _mm512_add_epi64(s, b);
		s = _mm512_add_epi64(_mm512_and_si512(s, p), _mm512_srli_epi64(s, 61));
		s = _mm512_min_epu64(s, _mm512_sub_epi64(s, p));
		__m512i bn = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(s, 29), kk), 32);
		_mm512_storeu_si512(v, s);
		_mm512_storeu_si512(bin, bn);
		for (int l = 0; l < 8; l++)
			oph_put(mn, (uint32_t)bin[l], v[l]);
	}
	for (; i < n; i++) {
		uint64_t x = lmt_mod61_affine(m->oa, m->ob, lmt_mod61(sh[i]));
		oph_put(mn, lmt_minhash_bin(x, k), x);
	}
}

__attribute__((target("avx2")))
static void oph_avx2(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint64_t *mn)
{
	const uint32_t k = (uint32_t)m->num_perm;
	const __m256i p = _mm256_set1_epi64x(P61), pm1 = _mm256_set1_epi64x(P61 - 1);
	const __m256i m29 = _mm256_set1_epi64x((1LL << 29) - 1);
	const __m256i a = _mm256_set1_epi64x((long long)m->oa), a1 = _mm256_srli_epi64(a, 32);
	const __m256i b = _mm256_set1_epi64x((long long)m->ob), kk = _mm256_set1_epi64x(k);
	uint64_t v[4], bin[4];
	oph_init(m, mn);
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(sh + i));
		/* h < p + 8 < 2^63 after the fold: signed compares are safe */
		h = _mm256_add_epi64(_mm256_and_si256(h, p), _mm256_srli_epi64(h, 61));
		h = _mm256_sub_epi64(h, _mm256_and_si256(_mm256_cmpgt_epi64(h, pm1), p));
		__m256i h1 = _mm256_srli_epi64(h, 32);
		__m256i hh = _mm256_mul_epu32(a1, h1);
		__m256i mid = _mm256_add_epi64(_mm256_mul_epu32(a1, h), _mm256_mul_epu32(a, h1));
		__m256i ll = _mm256_mul_epu32(a, h);
		__m256i s = _mm256_add_epi64(_mm256_slli_epi64(hh, 3), _mm256_srli_epi64(mid, 29));
		s = _mm256_add_epi64(s, _mm256_slli_epi64(_mm256_and_si256(mid, m29), 32));
		s = _mm256_add_epi64(s, _mm256_and_si256(ll, p));
		s = _mm256_add_epi64(s, _mm256_srli_epi64(ll, 61));
		s = _mm256_add_epi64(s, b);
		s = _mm256_add_epi64(_mm256_and_si256(s, p), _mm256_srli_epi64(s, 61));
		s = _mm256_sub_epi64(s, _mm256_and_si256(_mm256_cmpgt_epi64(s, pm1), p));
		__m256i bn = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(s, 29), kk), 32);
		_mm256_storeu_si256((__m256i *)v, s);
		_mm256_storeu_si256((__m256i *)bin, bn);
		for (int l = 0; l < 4; l++)
			oph_put(mn, (uint32_t)bin[l], v[l]);
	}
	for (; i < n; i++) {
		uint64_t x = lmt_mod61_affine(m->oa, m->ob, lmt_mod61(sh[i]));
		oph_put(mn, lmt_minhash_bin(x, k), x);
	}
}
#endif

typedef void (*kernel_fn)(const struct lmt_minhash *, const uint64_t *, size_t, uint64_t *);

static const struct kernel {
	const char *name;
	kernel_fn fn[2];         /* by method: OPH, classic */
} kernels[] = {
#if defined(__x86_64__)
	{ "avx512", { oph_avx512, sign_avx512 } },
	{ "avx2", { oph_avx2, sign_avx2 } },
#endif
	{ "scalar", { oph_scalar, sign_scalar } },
};

static int kernel_supported(int k)
{
#if defined(__x86_64__)
	if (!strcmp(kernels[k].name, "avx512"))
		return __builtin_cpu_supports("avx512f");
	if (!strcmp(kernels[k].name, "avx2"))
		return __builtin_cpu_supports("avx2");
#endif
	return 1;
}

const char *lmt_minhash_kernel(const struct lmt_minhash *m)
{
	return kernels[m->kernel].name;
}

int lmt_minhash_set_kernel(struct lmt_minhash *m, const char *name)
{
	for (int k = 0; k < (int)LMT_ARRAY_SIZE(kernels); k++) {
		if (!strcmp(kernels[k].name, name)) {
			if (!kernel_supported(k))
				return -1;
			m->kernel = k;
			return 0;
		}
	}
	return -1;
}

static const char *const method_names[] = { "oph", "classic" };

const char *lmt_minhash_method(const struct lmt_minhash *m)
{
	return method_names[m->method];
}

int lmt_minhash_set_method(struct lmt_minhash *m, const char *name)
{
	for (int k = 0; k < (int)LMT_ARRAY_SIZE(method_names); k++) {
		if (!strcmp(method_names[k], name)) {
			m->method = k;
			return 0;
		}
	}
	return -1;
}

int lmt_minhash_init(struct lmt_minhash *m, int num_perm, int ngram, uint64_t seed,
		     struct lmt_err *err)
{
	memset(m, 0, sizeof *m);
	if (num_perm < 1 || num_perm > LMT_MINHASH_MAX_PERM)
		return lmt_err_set(err, LMT_EINVAL, "number of permutations %d is out of range [1, %d]",
				   num_perm, LMT_MINHASH_MAX_PERM);
	if (ngram < 1)
		return lmt_err_set(err, LMT_EINVAL, "shingle length %d words, expected at least 1", ngram);
	m->npad = (num_perm + 7) & ~7;
	m->a = calloc((size_t)m->npad, sizeof *m->a);
	m->b = calloc((size_t)m->npad, sizeof *m->b);
	if (!m->a || !m->b) {
		lmt_minhash_release(m);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	m->num_perm = num_perm;
	m->ngram = ngram;
	m->seed = seed;
	uint64_t s = seed;
	for (int i = 0; i < num_perm; i++) {
		m->a[i] = draw(&s, 1);
		m->b[i] = draw(&s, 0);
	}
	/* the padding lanes compute (1 * h + 0) mod p, which no one reads */
	for (int i = num_perm; i < m->npad; i++)
		m->a[i] = 1;
	uint64_t t = seed ^ OPH_SEED;
	m->oa = draw(&t, 1);
	m->ob = draw(&t, 0);
	m->oc = splitmix64(&t);
	m->method = LMT_MINHASH_METHOD_OPH;
	/* sigma_j for each bin j: a Fisher-Yates shuffle of the bins driven by
	 * splitmix64 from mix64(c + j) (not from c + j * splitmix's own increment,
	 * which made sigma_j+1's draws those of sigma_j shifted by one: 1.17 times the
	 * variance at 24 shingles), index i drawn as the high word of a 64 x 64-bit
	 * product with i + 1 (bias below 2^-53); order and rank */
	const size_t K = (size_t)num_perm;
	m->dorder = malloc(K * K * sizeof *m->dorder);
	m->drank = malloc(K * K * sizeof *m->drank);
	if (!m->dorder || !m->drank) {
		lmt_minhash_release(m);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (size_t j = 0; j < K; j++) {
		uint16_t *o = m->dorder + j * K, *r = m->drank + j * K;
		uint64_t st = lmt_mix64(m->oc + j);
		for (size_t i = 0; i < K; i++)
			o[i] = (uint16_t)i;
		for (size_t i = K - 1; i > 0; i--) {
			size_t x = (size_t)(((unsigned __int128)splitmix64(&st) * (i + 1)) >> 64);
			uint16_t tmp = o[i];
			o[i] = o[x];
			o[x] = tmp;
		}
		for (size_t i = 0; i < K; i++)
			r[o[i]] = (uint16_t)i;
	}
	for (int k = 0; k < (int)LMT_ARRAY_SIZE(kernels); k++) {
		if (kernel_supported(k)) {
			m->kernel = k;
			break;
		}
	}
	return 0;
}

void lmt_minhash_release(struct lmt_minhash *m)
{
	free(m->a);
	free(m->b);
	free(m->dorder);
	free(m->drank);
	m->a = m->b = NULL;
	m->dorder = m->drank = NULL;
}

/*
 * Optimal densification (minhash.h): an empty bin j takes the minimum of the
 * first non-empty bin in sigma_j. With m non-empty bins that is found either by
 * walking sigma_j (about K/m steps) or as the non-empty bin of lowest rank in
 * sigma_j (m steps), the same bin: the cheaper way is taken, so a document costs
 * at most about K sqrt(K) table reads (where the probes of the paper's hash cost
 * about K^2/m hashes, 8000 for 2 shingles). Where only one bin is non-empty all
 * values are its.
 */
static void densify(const struct lmt_minhash *m, const uint64_t *mn, uint32_t *sig)
{
	const uint32_t k = (uint32_t)m->num_perm;
	uint16_t full[LMT_MINHASH_MAX_PERM];
	uint32_t nf = 0;
	for (uint32_t j = 0; j < k; j++) {
		if (mn[j] != LMT_MINHASH_NOBIN) {
			full[nf++] = (uint16_t)j;
			sig[j] = (uint32_t)mn[j];
		}
	}
	if (nf == k)
		return;
	if (nf == 1) {
		for (uint32_t j = 0; j < k; j++)
			sig[j] = (uint32_t)mn[full[0]];
		return;
	}
	const int by_rank = nf * nf < k;
	for (uint32_t j = 0; j < k; j++) {
		if (mn[j] != LMT_MINHASH_NOBIN)
			continue;
		uint32_t d;
		if (by_rank) {
			const uint16_t *r = m->drank + (size_t)j * k;
			d = full[0];
			for (uint32_t i = 1; i < nf; i++)
				d = r[full[i]] < r[d] ? full[i] : d;
		} else {
			const uint16_t *o = m->dorder + (size_t)j * k;
			while (mn[*o] == LMT_MINHASH_NOBIN)
				o++;
			d = *o;
		}
		sig[j] = (uint32_t)mn[d];
	}
}

void lmt_minhash_sign(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint32_t *sig,
		      uint64_t *mins)
{
	if (n == 0) {
		for (int j = 0; j < m->num_perm; j++)
			sig[j] = LMT_MINHASH_EMPTY;
		return;
	}
	kernels[m->kernel].fn[m->method](m, sh, n, mins);
	if (m->method == LMT_MINHASH_METHOD_CLASSIC) {
		for (int j = 0; j < m->num_perm; j++)
			sig[j] = (uint32_t)mins[j];
		return;
	}
	densify(m, mins, sig);
}

double lmt_minhash_similarity(const uint32_t *x, const uint32_t *y, int num_perm)
{
	int eq = 0;
	for (int j = 0; j < num_perm; j++)
		eq += x[j] == y[j];
	return num_perm ? (double)eq / num_perm : 0;
}

uint64_t lmt_lsh_band_key(const uint32_t *sig, int band, int rows)
{
	return lmt_hash_bytes(sig + (size_t)band * rows, (size_t)rows * sizeof *sig,
			      BAND_SEED + (uint64_t)band * 0x9e3779b97f4a7c15ULL);
}

/* ---- choosing bands and rows ---- */

#define SIMPSON_STEPS 1000 /* even */

/* composite Simpson over [lo, hi] of 1 - (1 - s^r)^b (fp) or (1 - s^r)^b (fn) */
static double simpson(double lo, double hi, int b, int r, int fp)
{
	double h = (hi - lo) / SIMPSON_STEPS, sum = 0;
	for (int k = 0; k <= SIMPSON_STEPS; k++) {
		double s = lo + k * h;
		double q = pow(1 - pow(s, r), b);
		double f = fp ? 1 - q : q;
		double w = (k == 0 || k == SIMPSON_STEPS) ? 1 : (k & 1) ? 4 : 2;
		sum += w * f;
	}
	return sum * h / 3;
}

double lmt_lsh_false_positive(double t, int b, int r)
{
	return simpson(0, t, b, r, 1);
}

double lmt_lsh_false_negative(double t, int b, int r)
{
	return simpson(t, 1, b, r, 0);
}

double lmt_lsh_probability(double s, int b, int r)
{
	return 1 - pow(1 - pow(s, r), b);
}

int lmt_lsh_params(double t, int num_perm, double wfp, double wfn, int *bands, int *rows)
{
	/* The sums of lmt_lsh_false_positive/negative, with log(1 - s^r) computed once
	 * per r: (1 - s^r)^b = exp(b * log1p(-s^r)). r is the outer loop for that, so
	 * the errors are kept in a table and compared afterwards in datasketch's order
	 * (b ascending, then r ascending; strictly smaller wins). */
	const double hp = t / SIMPSON_STEPS, hn = (1 - t) / SIMPSON_STEPS;
	size_t *off = malloc(((size_t)num_perm + 2) * sizeof *off);
	double *lp = malloc(2 * (SIMPSON_STEPS + 1) * sizeof *lp), *e = NULL;
	if (off && lp) {
		off[1] = 0;
		for (int b = 1; b <= num_perm; b++)
			off[b + 1] = off[b] + (size_t)(num_perm / b);
		e = malloc(off[num_perm + 1] * sizeof *e);
	}
	if (!off || !lp || !e) {
		free(off);
		free(lp);
		free(e);
		return LMT_ENOMEM;
	}
	double *ln = lp + SIMPSON_STEPS + 1;
	for (int r = 1; r <= num_perm; r++) {
		for (int k = 0; k <= SIMPSON_STEPS; k++) {
			lp[k] = log1p(-pow(k * hp, r));
			ln[k] = log1p(-pow(t + k * hn, r));
		}
		for (int b = 1; b * r <= num_perm; b++) {
			double sp = 0, sn = 0;
			for (int k = 0; k <= SIMPSON_STEPS; k++) {
				double w = (k == 0 || k == SIMPSON_STEPS) ? 1 : (k & 1) ? 4 : 2;
				sp += w * (1 - exp(b * lp[k]));
				sn += w * exp(b * ln[k]);
			}
			e[off[b] + (size_t)r - 1] = wfp * sp * hp / 3 + wfn * sn * hn / 3;
		}
	}
	double best = INFINITY;
	*bands = *rows = 1;
	for (int b = 1; b <= num_perm; b++)
		for (int r = 1; b * r <= num_perm; r++)
			if (e[off[b] + (size_t)r - 1] < best) {
				best = e[off[b] + (size_t)r - 1];
				*bands = b;
				*rows = r;
			}
	free(off);
	free(lp);
	free(e);
	return 0;
}

/* ---- clustering ---- */

static size_t pow2_at_least(size_t n)
{
	size_t c = 16;
	while (c < n)
		c *= 2;
	return c;
}

int lmt_sigstore_reserve(struct lmt_sigstore *s, size_t n)
{
	size_t need = (n + LMT_SIGSTORE_CHUNK - 1) / LMT_SIGSTORE_CHUNK;
	if (LMT_GROW(s->chunks, s->capchunks, need))
		return LMT_ENOMEM;
	while (s->nchunks < need) {
		uint32_t *c = malloc((size_t)LMT_SIGSTORE_CHUNK * (size_t)s->num_perm * sizeof *c);
		if (!c)
			return LMT_ENOMEM;
		s->chunks[s->nchunks++] = c;
	}
	return 0;
}

void lmt_sigstore_release(struct lmt_sigstore *s)
{
	for (size_t i = 0; i < s->nchunks; i++)
		free(s->chunks[i]);
	free(s->chunks);
	s->chunks = NULL;
	s->nchunks = s->capchunks = 0;
}

int lmt_lsh_cluster(const struct lmt_sigstore *sigs, size_t n, int bands, int rows,
		    const uint8_t *flags, uint8_t skip, uint32_t *parent, struct lmt_err *err)
{
	size_t active = 0;
	for (size_t i = 0; i < n; i++)
		active += !(flags && (flags[i] & skip));
	size_t cap = pow2_at_least(2 * active + 1), mask = cap - 1;
	uint64_t *keys = malloc(cap * sizeof *keys);
	uint32_t *vals = malloc(cap * sizeof *vals);
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory clustering %zu documents", n);
	}
	for (int k = 0; k < bands; k++) {
		memset(vals, 0xff, cap * sizeof *vals);
		for (size_t i = 0; i < n; i++) {
			if (flags && (flags[i] & skip))
				continue;
			uint64_t key = lmt_lsh_band_key(lmt_sigstore_at(sigs, i), k, rows);
			size_t s = lmt_mix64(key) & mask;
			while (vals[s] != UINT32_MAX && keys[s] != key)
				s = (s + 1) & mask;
			if (vals[s] == UINT32_MAX) {
				keys[s] = key;
				vals[s] = (uint32_t)i;
			} else {
				lmt_uf_union(parent, vals[s], (uint32_t)i);
			}
		}
	}
	free(keys);
	free(vals);
	return 0;
}

/* ---- hash tables ---- */

static int u64map_grow(uint64_t **keys, uint32_t **vals, size_t *cap, size_t n)
{
	if (2 * (n + 1) <= *cap)
		return 0;
	size_t nc = pow2_at_least(4 * (n + 1)), mask = nc - 1;
	uint64_t *k = malloc(nc * sizeof *k);
	uint32_t *v = malloc(nc * sizeof *v);
	if (!k || !v) {
		free(k);
		free(v);
		return LMT_ENOMEM;
	}
	memset(v, 0xff, nc * sizeof *v);
	for (size_t i = 0; i < *cap; i++) {
		if ((*vals)[i] == UINT32_MAX)
			continue;
		size_t s = lmt_mix64((*keys)[i]) & mask;
		while (v[s] != UINT32_MAX)
			s = (s + 1) & mask;
		k[s] = (*keys)[i];
		v[s] = (*vals)[i];
	}
	free(*keys);
	free(*vals);
	*keys = k;
	*vals = v;
	*cap = nc;
	return 0;
}

int lmt_u64map_put(struct lmt_u64map *m, uint64_t key, uint32_t val)
{
	if (u64map_grow(&m->keys, &m->vals, &m->cap, m->n))
		return LMT_ENOMEM;
	size_t mask = m->cap - 1, s = lmt_mix64(key) & mask;
	while (m->vals[s] != UINT32_MAX) {
		if (m->keys[s] == key)
			return 0;
		s = (s + 1) & mask;
	}
	m->keys[s] = key;
	m->vals[s] = val;
	m->n++;
	return 0;
}

uint32_t lmt_u64map_get(const struct lmt_u64map *m, uint64_t key)
{
	if (!m->cap)
		return UINT32_MAX;
	size_t mask = m->cap - 1, s = lmt_mix64(key) & mask;
	while (m->vals[s] != UINT32_MAX) {
		if (m->keys[s] == key)
			return m->vals[s];
		s = (s + 1) & mask;
	}
	return UINT32_MAX;
}

void lmt_u64map_release(struct lmt_u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}

int lmt_lsh_table_init(struct lmt_lsh_table *t, int bands, int rows)
{
	memset(t, 0, sizeof *t);
	t->bands = bands;
	t->rows = rows;
	return 0;
}

void lmt_lsh_table_release(struct lmt_lsh_table *t)
{
	free(t->keys);
	free(t->vals);
	memset(t, 0, sizeof *t);
}

int lmt_lsh_table_add(struct lmt_lsh_table *t, const uint32_t *sig, uint32_t id)
{
	struct lmt_u64map m = { t->keys, t->vals, t->cap, t->n };
	int rc = 0;
	for (int k = 0; k < t->bands && !rc; k++)
		rc = lmt_u64map_put(&m, lmt_lsh_band_key(sig, k, t->rows), id);
	t->keys = m.keys;
	t->vals = m.vals;
	t->cap = m.cap;
	t->n = m.n;
	return rc;
}

uint32_t lmt_lsh_table_query(const struct lmt_lsh_table *t, const uint32_t *sig)
{
	struct lmt_u64map m = { t->keys, t->vals, t->cap, t->n };
	for (int k = 0; k < t->bands; k++) {
		uint32_t v = lmt_u64map_get(&m, lmt_lsh_band_key(sig, k, t->rows));
		if (v != UINT32_MAX)
			return v;
	}
	return UINT32_MAX;
}

/* ---- sets ---- */

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

void lmt_u64_sort_unique(uint64_t *v, size_t *n)
{
	if (*n < 2)
		return;
	qsort(v, *n, sizeof *v, cmp_u64);
	size_t k = 1;
	for (size_t i = 1; i < *n; i++)
		if (v[i] != v[k - 1])
			v[k++] = v[i];
	*n = k;
}

double lmt_jaccard_sorted(const uint64_t *x, size_t nx, const uint64_t *y, size_t ny)
{
	if (nx == 0 && ny == 0)
		return 1;
	size_t i = 0, j = 0, inter = 0;
	while (i < nx && j < ny) {
		if (x[i] == y[j]) {
			inter++;
			i++;
			j++;
		} else if (x[i] < y[j]) {
			i++;
		} else {
			j++;
		}
	}
	return (double)inter / (double)(nx + ny - inter);
}
