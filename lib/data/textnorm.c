/*
 * textnorm.c: the normaliser and word splitter described in textnorm.h.
 *
 * One pass over the input. ASCII goes through a 128-entry class table, 64 bytes
 * at a time where the CPU has AVX-512 VBMI2 (norm_avx512), else a character at a
 * time (lmt_textnorm_apply_scalar, the reference); other characters of the Basic
 * Multilingual Plane through a table of 65536 entries filled once from the
 * generated range tables in unitab.h (the binary searches of those tables, 4 or 5
 * of 9 or 10 probes for each character, were a sixth of dedup-minhash's time on
 * text in other scripts); characters beyond it through the binary searches
 * themselves.
 */
#include "data/textnorm.h"

#include "core/utf8.h"

#include <pthread.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "data/unitab.h"
#include "core/util.h"

_Static_assert(LMT_UNITAB_MAX_GROWTH <= 2, "lmt_textnorm_bound assumes growth of at most 2");

/* The last of a table's n entries (size bytes each, sorted by the uint32_t each
 * starts with: a range's lo, a pair's cp) whose key is at most cp; entry 0 when
 * none is, which the callers rule out first. */
static size_t last_at_most(const void *tab, size_t n, size_t size, uint32_t cp)
{
	size_t lo = 0, hi = n;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		uint32_t key;
		memcpy(&key, (const char *)tab + mid * size, sizeof key);
		if (key <= cp)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static int in_ranges(const struct lmt_unitab_range *r, size_t n, uint32_t cp)
{
	if (n == 0 || cp < r[0].lo || cp > r[n - 1].hi)
		return 0;
	return cp <= r[last_at_most(r, n, sizeof *r, cp)].hi;
}

uint32_t lmt_uni_lower(uint32_t cp)
{
	if (cp < 128)
		return (lmt_unitab_ascii[cp] & LMT_UNITAB_UPPER) ? cp + 32 : cp;
	const struct lmt_unitab_case *r = lmt_unitab_lower;
	size_t n = LMT_ARRAY_SIZE(lmt_unitab_lower);
	if (cp < r[0].lo || cp > r[n - 1].hi)
		return cp;
	size_t lo = last_at_most(r, n, sizeof *r, cp);
	if (cp <= r[lo].hi && (cp - r[lo].lo) % r[lo].stride == 0)
		return (uint32_t)((int32_t)cp + r[lo].delta);
	return cp;
}

uint32_t lmt_uni_base(uint32_t cp)
{
	const struct lmt_unitab_pair *p = lmt_unitab_base;
	size_t n = LMT_ARRAY_SIZE(lmt_unitab_base);
	if (cp < p[0].cp || cp > p[n - 1].cp)
		return cp;
	size_t lo = last_at_most(p, n, sizeof *p, cp);
	return p[lo].cp == cp ? p[lo].base : cp;
}

#define IN(table, cp) in_ranges(table, LMT_ARRAY_SIZE(table), cp)

/* The BMP table: lower and base of each character and its classes, or B_SLOW
 * where a mapping leaves the BMP (then the searches answer). */
enum { B_MARK = 16, B_SLOW = 32 };
static struct bmp {
	uint16_t lower, base;
	uint8_t cls;             /* LMT_UNITAB_DIGIT | _PUNCT | _SPACE, B_MARK, B_SLOW */
} bmp[0x10000];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

int lmt_uni_is_mark(uint32_t cp) { return cp >= 0x300 && IN(lmt_unitab_mn, cp); }
int lmt_uni_is_punct(uint32_t cp)
{
	return cp < 128 ? (lmt_unitab_ascii[cp] & LMT_UNITAB_PUNCT) != 0 : IN(lmt_unitab_punct, cp);
}
int lmt_uni_is_space(uint32_t cp)
{
	return cp < 128 ? (lmt_unitab_ascii[cp] & LMT_UNITAB_SPACE) != 0 : IN(lmt_unitab_space, cp);
}
int lmt_uni_is_digit(uint32_t cp)
{
	return cp < 128 ? (lmt_unitab_ascii[cp] & LMT_UNITAB_DIGIT) != 0 : IN(lmt_unitab_digit, cp);
}
const char *lmt_uni_version(void) { return LMT_UNITAB_VERSION; }

/* For each set of flags, the byte to write for an ASCII byte and what to do with
 * it, so that runs of ordinary letters are copied by a tight loop. */
enum { A_COPY, A_DIGIT, A_SPACE, A_PUNCT };
static unsigned char ascii_map[LMT_TEXTNORM_ALL + 1][128], ascii_act[LMT_TEXTNORM_ALL + 1][128];
/* the vector kernel's byte for a kept one: ascii_map's, and without the space
 * step a space for punctuation */
static unsigned char kernel_map[LMT_TEXTNORM_ALL + 1][128];
static pthread_once_t ascii_once = PTHREAD_ONCE_INIT;

static void bmp_init(void)
{
	for (uint32_t cp = 0; cp < 0x10000; cp++) {
		uint32_t lo = lmt_uni_lower(cp), ba = lmt_uni_base(cp);
		bmp[cp].lower = (uint16_t)lo;
		bmp[cp].base = (uint16_t)ba;
		bmp[cp].cls = (uint8_t)((lmt_uni_is_digit(cp) ? LMT_UNITAB_DIGIT : 0) |
					(lmt_uni_is_punct(cp) ? LMT_UNITAB_PUNCT : 0) |
					(lmt_uni_is_space(cp) ? LMT_UNITAB_SPACE : 0) |
					(lmt_uni_is_mark(cp) ? B_MARK : 0) | (lo > 0xffff || ba > 0xffff ? B_SLOW : 0));
	}
}

static void ascii_init(void)
{
	for (unsigned f = 0; f <= LMT_TEXTNORM_ALL; f++) {
		for (int c = 0; c < 128; c++) {
			int cls = lmt_unitab_ascii[c];
			ascii_map[f][c] = (unsigned char)((f & LMT_TEXTNORM_LOWER) && (cls & LMT_UNITAB_UPPER) ? c + 32 : c);
			ascii_act[f][c] = (f & LMT_TEXTNORM_DIGITS) && (cls & LMT_UNITAB_DIGIT) ? A_DIGIT
					: (cls & LMT_UNITAB_SPACE) ? A_SPACE
					: (f & LMT_TEXTNORM_PUNCT) && (cls & LMT_UNITAB_PUNCT) ? A_PUNCT : A_COPY;
			kernel_map[f][c] = ascii_act[f][c] == A_PUNCT && !(f & LMT_TEXTNORM_SPACE) ? ' '
					 : ascii_map[f][c];
		}
	}
}

/* The character at p after accent stripping and lowercasing, and its classes
 * (wide_char below says what it answers) */
static inline int wide_class(const unsigned char *p, const unsigned char *end, int lower, int accents,
			     uint32_t *cpp, int *clsp, int *lenp)
{
	uint32_t cp;
	int cls;
	*lenp = lmt_utf8_decode_fast(p, (size_t)(end - p), &cp);
	const struct bmp *e = cp < 0x10000 && !(bmp[cp].cls & B_SLOW) ? &bmp[cp] : NULL;
	if (cp >= LMT_UTF8_BAD) {
		cls = 0;
	} else if (e && (!accents || !(bmp[e->base].cls & B_SLOW))) {
		/* the same steps as below, by table */
		if (accents) {
			if (e->cls & B_MARK)
				return 1;
			cp = e->base;
			e = &bmp[cp];
		}
		if (lower)
			cp = e->lower;
		cls = bmp[cp].cls & (LMT_UNITAB_DIGIT | LMT_UNITAB_PUNCT | LMT_UNITAB_SPACE);
	} else {
		if (accents) {
			if (lmt_uni_is_mark(cp))
				return 1;
			cp = lmt_uni_base(cp);
		}
		if (lower)
			cp = lmt_uni_lower(cp);
		cls = (lmt_uni_is_digit(cp) ? LMT_UNITAB_DIGIT : 0) |
		      (lmt_uni_is_punct(cp) ? LMT_UNITAB_PUNCT : 0) |
		      (lmt_uni_is_space(cp) ? LMT_UNITAB_SPACE : 0);
	}
	*cpp = cp;
	*clsp = cls;
	return 0;
}

/*
 * One character of two or more bytes (or an invalid byte) at p: its length in
 * *len, and 0 with the character after accent stripping and lowercasing in *cp
 * and its classes (LMT_UNITAB_DIGIT | _PUNCT | _SPACE) in *cls, or 1 for a
 * character that writes nothing: a nonspacing mark the accents step drops
 * (invisible: it neither ends a digit run nor a word), or with the digits step a
 * digit after a digit. A digit that starts a run is '0' of no class; *in_digits
 * follows. An invalid byte has cp >= LMT_UTF8_BAD and no class.
 */
static inline int wide_char(const unsigned char *p, const unsigned char *end, int lower, int accents,
			    int digits, int *in_digits, uint32_t *cpp, int *clsp, int *lenp)
{
	int r = wide_class(p, end, lower, accents, cpp, clsp, lenp);
	if (r)
		return r;
	if (digits && (*clsp & LMT_UNITAB_DIGIT)) {
		if (*in_digits)
			return 1;
		*in_digits = 1;
		*cpp = '0';
		*clsp = 0;
	} else {
		*in_digits = 0;
	}
	return 0;
}

static inline size_t put_char(char *out, size_t o, uint32_t cp, const unsigned char *src)
{
	if (cp >= LMT_UTF8_BAD)
		out[o++] = (char)*src;
	else if (cp < 0x80)
		out[o++] = (char)cp;
	else
		o += (size_t)lmt_utf8_encode(cp, out + o);
	return o;
}

/*
 * The reference: one character at a time. A run of white space (and, with
 * punct, punctuation) is remembered as pending and its one space written before
 * the next character that is kept, so none is left at the end.
 */
size_t lmt_textnorm_apply_scalar(unsigned flags, const char *text, size_t n, char *out)
{
	const unsigned char *p = (const unsigned char *)text, *end = p + n;
	size_t o = 0;
	int in_digits = 0, pending = 0;
	const int lower = flags & LMT_TEXTNORM_LOWER, digits = flags & LMT_TEXTNORM_DIGITS;
	const int punct = flags & LMT_TEXTNORM_PUNCT, space = flags & LMT_TEXTNORM_SPACE;
	const int accents = flags & LMT_TEXTNORM_ACCENTS;
	pthread_once(&ascii_once, ascii_init);
	pthread_once(&bmp_once, bmp_init);
	const unsigned char *map = ascii_map[flags & LMT_TEXTNORM_ALL];
	const unsigned char *act = ascii_act[flags & LMT_TEXTNORM_ALL];
	/* with no step that joins, drops or replaces characters (only lower and
	 * accents), every ASCII byte maps to one byte whatever comes before it: 16 at
	 * a time (SSE2) until a non-ASCII one */
	const int bytewise = !(flags & (LMT_TEXTNORM_DIGITS | LMT_TEXTNORM_PUNCT | LMT_TEXTNORM_SPACE));
	while (p < end) {
		uint32_t cp;
		int len, cls;
#if defined(__SSE2__)
		if (bytewise) {
			const __m128i a1 = _mm_set1_epi8('A' - 1 - 128), z = _mm_set1_epi8('Z' - 128);
			const __m128i up = _mm_set1_epi8(lower ? 32 : 0);
			while (end - p >= 16) {
				__m128i v = _mm_loadu_si128((const __m128i *)p);
				unsigned hi = (unsigned)_mm_movemask_epi8(v);
				/* 'A' <= v <= 'Z' by signed compares of v - 128 */
				__m128i x = _mm_sub_epi8(v, _mm_set1_epi8(-128));
				__m128i is_up = _mm_andnot_si128(_mm_cmpgt_epi8(x, z), _mm_cmpgt_epi8(x, a1));
				/* 16 bytes stored even where some are not ASCII: out has room for
				 * them (2 bytes of bound for each input byte from p on) and the
				 * ones past the ASCII are written over next */
				_mm_storeu_si128((__m128i *)(out + o), _mm_add_epi8(v, _mm_and_si128(is_up, up)));
				if (hi) {
					/* the ASCII before the first other byte, not copied again a
					 * byte at a time below; that character is taken below */
					unsigned k = (unsigned)__builtin_ctz(hi);
					o += k;
					p += k;
					break;
				}
				o += 16;
				p += 16;
			}
			if (p >= end)
				break;
		}
#else
		(void)bytewise;
#endif
		if (*p < 0x80 && act[*p] == A_COPY) {
			if (pending) {
				out[o++] = ' ';
				pending = 0;
			}
			in_digits = 0;
			do
				out[o++] = (char)map[*p++];
			while (p < end && *p < 0x80 && act[*p] == A_COPY);
			continue;
		}
		if (*p < 0x80) {
			int a = act[*p], c = *p++;
			if (a == A_DIGIT) {
				if (!in_digits) {
					if (pending) {
						out[o++] = ' ';
						pending = 0;
					}
					out[o++] = '0';
					in_digits = 1;
				}
				continue;
			}
			in_digits = 0;
			if (space)
				pending = o > 0; /* white space or punctuation: one space, later */
			else
				out[o++] = a == A_PUNCT ? ' ' : (char)c;
			continue;
		}
		const unsigned char *src = p;
		int skip = wide_char(p, end, lower, accents, digits, &in_digits, &cp, &cls, &len);
		p += len;
		if (skip)
			continue;
		int is_sp = (cls & LMT_UNITAB_SPACE) || (punct && (cls & LMT_UNITAB_PUNCT));
		if (is_sp && space) {
			pending = o > 0;
			continue;
		}
		if (pending) {
			out[o++] = ' ';
			pending = 0;
		}
		if (is_sp && !(cls & LMT_UNITAB_SPACE))
			out[o++] = ' '; /* punctuation, without collapsing */
		else
			o = put_char(out, o, cp, src);
	}
	return o;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512_KERNEL 1

/*
 * 64 bytes at a time while they are ASCII (AVX-512 VBMI and VBMI2). Each byte's
 * action and mapped byte come from two 128-entry tables (vpermi2b); a byte is
 * written when it is kept, when it starts a digit run ("0") or, with the space
 * step, when it starts a run of space (" "), and the written bytes are packed
 * together (vpcompressb). The space of a run is written when the run starts,
 * not before the next kept character as the reference does, and taken back at
 * the end if nothing followed it; the output is the same (test-minhash compares
 * the two on random texts of every flag set). Other characters go one at a time
 * as in the reference, with the same rule.
 */
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi,bmi2,popcnt")))
static size_t norm_avx512(unsigned flags, const char *text, size_t n, char *out)
{
	const unsigned char *p = (const unsigned char *)text, *end = p + n;
	size_t o = 0;
	int in_digits = 0;
	uint64_t pending = 0; /* in a run of space, its space written */
	const int lower = flags & LMT_TEXTNORM_LOWER, digits = flags & LMT_TEXTNORM_DIGITS;
	const int punct = flags & LMT_TEXTNORM_PUNCT, space = flags & LMT_TEXTNORM_SPACE;
	const int accents = flags & LMT_TEXTNORM_ACCENTS;
	const unsigned char *map = kernel_map[flags & LMT_TEXTNORM_ALL];
	const unsigned char *act = ascii_act[flags & LMT_TEXTNORM_ALL];
	const __m512i act_lo = _mm512_loadu_si512(act), act_hi = _mm512_loadu_si512(act + 64);
	const __m512i map_lo = _mm512_loadu_si512(map), map_hi = _mm512_loadu_si512(map + 64);
	const __m512i one = _mm512_set1_epi8(A_DIGIT), two = _mm512_set1_epi8(A_SPACE);
	const __m512i zero_ch = _mm512_set1_epi8('0'), space_ch = _mm512_set1_epi8(' ');
	while (p < end) {
		if (*p < 0x80) {
			size_t r = (size_t)(end - p);
			__mmask64 valid = r >= 64 ? ~0ULL : _bzhi_u64(~0ULL, (unsigned)r);
			__m512i v = _mm512_maskz_loadu_epi8(valid, p);
			uint64_t hi = _mm512_movepi8_mask(v);
			if (hi)
				valid &= _blsmsk_u64(hi) >> 1; /* the ASCII before the first other byte */
			__m512i a = _mm512_permutex2var_epi8(act_lo, v, act_hi);
			__m512i w = _mm512_permutex2var_epi8(map_lo, v, map_hi);
			uint64_t d = _mm512_mask_cmpeq_epi8_mask(valid, a, one);
			uint64_t s = space ? _mm512_mask_cmpge_epu8_mask(valid, a, two) : 0;
			uint64_t l = valid & ~d & ~s;
			uint64_t start_d = d & ~(d << 1 | (uint64_t)in_digits), start_s = s & ~(s << 1 | pending);
			if (o == 0) { /* no space before the first kept byte */
				uint64_t kept = l | start_d;
				start_s &= kept ? ~_blsmsk_u64(kept) : 0;
			}
			w = _mm512_mask_mov_epi8(w, d, zero_ch);
			w = _mm512_mask_mov_epi8(w, s, space_ch);
			uint64_t keep = l | start_d | start_s;
			unsigned cnt = (unsigned)_mm_popcnt_u64(keep);
			_mm512_mask_storeu_epi8(out + o, _bzhi_u64(~0ULL, cnt), _mm512_maskz_compress_epi8(keep, w));
			o += cnt;
			unsigned nb = (unsigned)_mm_popcnt_u64(valid);
			in_digits = (int)(d >> (nb - 1) & 1);
			pending = s >> (nb - 1) & 1;
			p += nb;
			continue;
		}
		uint32_t cp;
		int len, cls;
		const unsigned char *src = p;
		int skip = wide_char(p, end, lower, accents, digits, &in_digits, &cp, &cls, &len);
		p += len;
		if (skip)
			continue;
		int is_sp = (cls & LMT_UNITAB_SPACE) || (punct && (cls & LMT_UNITAB_PUNCT));
		if (is_sp && space) {
			if (!pending && o > 0)
				out[o++] = ' ';
			pending = 1;
			continue;
		}
		pending = 0;
		if (is_sp && !(cls & LMT_UNITAB_SPACE))
			out[o++] = ' '; /* punctuation, without collapsing */
		else
			o = put_char(out, o, cp, src);
	}
	if (pending && o > 0) /* a run of space at the end: no space */
		o--;
	return o;
}
#endif

static int use_avx512;
static pthread_once_t kernel_once = PTHREAD_ONCE_INIT;

static void kernel_init(void)
{
	pthread_once(&ascii_once, ascii_init);
	pthread_once(&bmp_once, bmp_init);
#ifdef HAVE_AVX512_KERNEL
	use_avx512 = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi") &&
		     __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("bmi2");
#endif
}

size_t lmt_textnorm_apply(unsigned flags, const char *text, size_t n, char *out)
{
	pthread_once(&kernel_once, kernel_init);
#ifdef HAVE_AVX512_KERNEL
	if (use_avx512)
		return norm_avx512(flags, text, n, out);
#endif
	return lmt_textnorm_apply_scalar(flags, text, n, out);
}

const char *lmt_textnorm_kernel(void)
{
	pthread_once(&kernel_once, kernel_init);
	return use_avx512 ? "avx512" : "scalar";
}

static const char *const flag_names[] = { "lower", "digits", "punct", "space", "accents" };

int lmt_textnorm_parse(const char *s, unsigned *flags, const char **bad)
{
	*flags = 0;
	*bad = NULL;
	if (!strcmp(s, "none"))
		return 0;
	if (!strcmp(s, "all")) {
		*flags = LMT_TEXTNORM_ALL;
		return 0;
	}
	for (;;) {
		size_t l = strcspn(s, ",");
		int k;
		for (k = 0; k < (int)LMT_ARRAY_SIZE(flag_names); k++)
			if (l == strlen(flag_names[k]) && !strncmp(s, flag_names[k], l))
				break;
		if (k == (int)LMT_ARRAY_SIZE(flag_names)) {
			*bad = s;
			return -1;
		}
		*flags |= 1u << k;
		if (!s[l])
			return 0;
		s += l + 1;
	}
}

char *lmt_textnorm_format(unsigned flags, char *buf)
{
	buf[0] = 0;
	for (int k = 0; k < (int)LMT_ARRAY_SIZE(flag_names); k++) {
		if (flags & (1u << k)) {
			if (buf[0])
				strcat(buf, ",");
			strcat(buf, flag_names[k]);
		}
	}
	if (!buf[0])
		strcpy(buf, "none");
	return buf;
}

static inline int is_space(uint32_t cp)
{
	return cp < 0x10000 ? (bmp[cp].cls & LMT_UNITAB_SPACE) != 0 : lmt_uni_is_space(cp);
}

int lmt_textnorm_next_word(const char *text, size_t n, size_t *pos, size_t *start, size_t *len)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t i = *pos;
	uint32_t cp;
	pthread_once(&bmp_once, bmp_init);
	/* skip white space */
	while (i < n) {
		if (p[i] < 0x80) {
			if (!(lmt_unitab_ascii[p[i]] & LMT_UNITAB_SPACE))
				break;
			i++;
			continue;
		}
		int l = lmt_utf8_decode(p + i, n - i, &cp);
		if (cp >= LMT_UTF8_BAD || !is_space(cp))
			break;
		i += (size_t)l;
	}
	if (i >= n) {
		*pos = n;
		return 0;
	}
	size_t s = i;
	while (i < n) {
#if defined(__SSE2__)
		/* skip 16 bytes at a time to the first ASCII space (9-13, 32, as
		 * lmt_unitab_ascii has it) or non-ASCII byte */
		while (n - i >= 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(p + i));
			__m128i ctl = _mm_cmplt_epi8(_mm_sub_epi8(v, _mm_set1_epi8(9 - 128)), _mm_set1_epi8(5 - 128));
			__m128i stop = _mm_or_si128(_mm_or_si128(ctl, _mm_cmpeq_epi8(v, _mm_set1_epi8(' '))),
						    _mm_cmplt_epi8(v, _mm_setzero_si128()));
			int mask = _mm_movemask_epi8(stop);
			if (mask) {
				i += (size_t)__builtin_ctz((unsigned)mask);
				break;
			}
			i += 16;
		}
		if (i >= n)
			break;
#endif
		if (p[i] < 0x80) {
			if (lmt_unitab_ascii[p[i]] & LMT_UNITAB_SPACE)
				break;
			i++;
			continue;
		}
		int l = lmt_utf8_decode(p + i, n - i, &cp);
		if (cp < LMT_UTF8_BAD && is_space(cp))
			break;
		i += (size_t)l;
	}
	*start = s;
	*len = i - s;
	*pos = i;
	return 1;
}
