/*
 * pretok.c: the PCRE2-backed pre-tokenizer.
 *
 * The pattern sources are the ones published with tiktoken (gpt2, cl100k_base,
 * o200k_base), written without possessive quantifiers; PCRE2 splits identically with
 * or without them. One substitution is made: PCRE2's \s under UCP also matches
 * U+180E (MONGOLIAN VOWEL SEPARATOR), which is not White_Space since Unicode 6.3
 * and is not matched by the regex engine tiktoken uses; the built-in patterns spell
 * \s out as the Unicode White_Space set so both agree.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pretok.h"

#include "core/utf8.h"

#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS "\\t\\n\\x{0b}\\f\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}" \
	   "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

static const struct {
	const char *name;
	const char *src;      /* as published */
	const char *pcre;     /* what we compile: \s spelled out */
	int ascii;            /* its hand split of ASCII (lmt_pretok_next) */
} builtins[] = {
	{ "gpt2",
	  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
	  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS
	  "])|[" WS "]+", LMT_PRETOK_ASCII_GPT2 },
	{ "cl100k",
	  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
	  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS
	  "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+",
	  LMT_PRETOK_ASCII_CL100K },
	{ "o200k",
	  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
	  "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
	  "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
	  "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
	  "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
	  "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^" WS
	  "\\p{L}\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+",
	  LMT_PRETOK_ASCII_O200K },
};

const char *lmt_pretok_builtin(const char *name)
{
	for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
		if (!strcmp(builtins[i].name, name))
			return builtins[i].src;
	return NULL;
}

const char *lmt_pretok_name_of(const char *regex)
{
	for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
		if (!strcmp(builtins[i].src, regex) || !strcmp(builtins[i].pcre, regex))
			return builtins[i].name;
	return NULL;
}

int lmt_pretok_init(struct lmt_pretok *p, const char *name, const char *regex,
		    struct lmt_err *err)
{
	memset(p, 0, sizeof *p);
	const char *src = NULL, *pcre = NULL;
	int ascii = 0;
	if (!name || !*name)
		name = regex ? "custom" : "none";
	if (!strcmp(name, "none")) {
		snprintf(p->name, sizeof p->name, "none");
		return 0;
	}
	for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
		if (!strcmp(builtins[i].name, name)) {
			src = builtins[i].src;
			pcre = builtins[i].pcre;
			ascii = builtins[i].ascii;
		}
	if (!src) {
		if (strcmp(name, "custom") || !regex)
			return lmt_err_set(err, LMT_EINVAL,
				"unknown pattern '%s' (expected gpt2, cl100k, o200k, none or a regex)", name);
		/* a tokenizer file stores "no regex" as an empty one: an empty custom
		 * regex would be saved as a pattern that does not load */
		if (!*regex)
			return lmt_err_set(err, LMT_EINVAL, "pattern 'custom': the regex is empty");
		/* a custom regex equal to a built-in's source gets the built-in treatment */
		const char *bn = lmt_pretok_name_of(regex);
		if (bn)
			return lmt_pretok_init(p, bn, NULL, err);
		src = pcre = regex;
	}
	snprintf(p->name, sizeof p->name, "%s", name);
	p->regex = strdup(src);
	if (!p->regex)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	int ec;
	PCRE2_SIZE eo;
	pcre2_code *code = pcre2_compile((PCRE2_SPTR)pcre, PCRE2_ZERO_TERMINATED,
					 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
	if (!code) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(ec, msg, sizeof msg);
		free(p->regex);
		p->regex = NULL;
		return lmt_err_set(err, LMT_EFORMAT, "pattern '%s': %s at offset %zu", name,
				   (char *)msg, (size_t)eo);
	}
	p->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
	p->code = code;
	p->ascii = ascii;
	p->builtin = src != regex;
	return 0;
}

void lmt_pretok_release(struct lmt_pretok *p)
{
	if (p->code)
		pcre2_code_free(p->code);
	free(p->regex);
	memset(p, 0, sizeof *p);
}

/*
 * An iterator's PCRE2 objects are allocated a cache line at a time: every match
 * writes its match data (the offsets), and the iterators of the threads, made one
 * after another in one thread, got match data that could share a line, which the
 * threads then wrote in turns. Whether they did depended on what else the heap held
 * (tok-encode -j2's output path moved it): with cl100k's pattern, which goes through
 * PCRE2, the threads' user time was 20% higher when they did.
 */
static void *line_alloc(PCRE2_SIZE n, void *data)
{
	(void)data;
	return aligned_alloc(64, (n + 63) & ~(PCRE2_SIZE)63);
}

static void line_free(void *p, void *data)
{
	(void)data;
	free(p);
}

int lmt_pretok_iter_init(struct lmt_pretok_iter *it, const struct lmt_pretok *p)
{
	memset(it, 0, sizeof *it);
	it->p = p;
	if (!p->code)
		return 0;
	/* each object keeps a copy of the allocator: the context can go at once */
	pcre2_general_context *g = pcre2_general_context_create(line_alloc, line_free, NULL);
	if (!g)
		return LMT_ENOMEM;
	it->md = pcre2_match_data_create_from_pattern(p->code, g);
	it->mctx = pcre2_match_context_create(g);
	if (p->jit)
		it->jstack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, g);
	pcre2_general_context_free(g);
	if (!it->md || !it->mctx || (p->jit && !it->jstack)) {
		lmt_pretok_iter_release(it);
		return LMT_ENOMEM;
	}
	if (it->jstack)
		pcre2_jit_stack_assign(it->mctx, NULL, it->jstack);
	return 0;
}

void lmt_pretok_iter_release(struct lmt_pretok_iter *it)
{
	if (it->md)
		pcre2_match_data_free(it->md);
	if (it->mctx)
		pcre2_match_context_free(it->mctx);
	if (it->jstack)
		pcre2_jit_stack_free(it->jstack);
	memset(it, 0, sizeof *it);
}

void lmt_pretok_iter_reset(struct lmt_pretok_iter *it, const char *text, size_t len)
{
	it->text = text;
	it->len = len;
	it->pos = 0;
	it->have = 0;
}

void lmt_pretok_iter_seek(struct lmt_pretok_iter *it, size_t pos)
{
	it->pos = pos;
	it->have = 0;
}

/*
 * The built-in patterns on ASCII text, by hand: the length of the match PCRE2 would
 * find at pos, or 0 where that depends on a byte above 0x7f (a letter, digit or
 * space of another script may extend a run, or decide a look-ahead; U+017F, long
 * s, is an s to a caseless contraction), which PCRE2 then settles. In ASCII, \p{L}
 * is [A-Za-z] (o200k's cased classes: \p{Lu} [A-Z], \p{Ll} [a-z], none of \p{Lt},
 * \p{Lm}, \p{Lo} or \p{M}), \p{N} is [0-9] and \s is [\t\n\v\f\r ] (the
 * White_Space set the patterns spell out: 0x1c-0x1f are not in it). Real text is
 * mostly ASCII, and this split costs a table lookup a byte where PCRE2's JIT code
 * cost about a tenth of tok-train's counting with gpt2, and a fifth of tok-encode's
 * time with cl100k. The alternatives are tried in each pattern's order, as PCRE2
 * does (the first that matches wins, not the longest); test-tokenizer and the
 * pretok fuzz target compare each split with PCRE2's.
 *
 * gpt2:   's|'t|'re|'ve|'m|'ll|'d   ?\p{L}+   ?\p{N}+   ?[^\s\p{L}\p{N}]+
 *         \s+(?!\S)   \s+
 */
enum { C_OTHER, C_LETTER, C_DIGIT, C_SPACE, C_HIGH };

static const unsigned char ascii_class[256] = {
	['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\v'] = C_SPACE, ['\f'] = C_SPACE, ['\r'] = C_SPACE,
	[' '] = C_SPACE,
	['0' ... '9'] = C_DIGIT,
	['A' ... 'Z'] = C_LETTER, ['a' ... 'z'] = C_LETTER,
	[0x80 ... 0xff] = C_HIGH,
};

/* At whitespace t[pos]: \s+(?!\S) | \s+ (the whole run if what follows is
 * whitespace or the end, else all but its last character if that leaves any,
 * else the one character), and with lines \s*[\r\n]+ before them (up to the
 * run's last line end, if it has one) */
static size_t ws_ascii(const unsigned char *t, size_t pos, size_t len, int lines)
{
	size_t i = pos, nl = 0;
	for (; i < len && ascii_class[t[i]] == C_SPACE; i++)
		if (lines && (t[i] == '\r' || t[i] == '\n'))
			nl = i + 1;
	if (i < len && ascii_class[t[i]] == C_HIGH)
		return 0; /* a space of another script would extend the run */
	if (nl)
		return nl - pos;
	if (i == len)
		return i - pos;
	return i - pos > 1 ? i - pos - 1 : 1;
}

static size_t gpt2_ascii(const unsigned char *t, size_t pos, size_t len)
{
	size_t i = pos;
	unsigned c0 = ascii_class[t[i]];
	if (t[i] == '\'' && i + 1 < len) {
		unsigned char a = t[i + 1], b = i + 2 < len ? t[i + 2] : 0;
		if (a == 's' || a == 't' || a == 'm' || a == 'd')
			return 2;
		if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
			return 3;
	}
	if (c0 == C_HIGH)
		return 0;
	/* " ?" then a run of one class: the space joins a letter, digit or other run */
	unsigned run = c0;
	if (t[i] == ' ' && i + 1 < len && ascii_class[t[i + 1]] != C_SPACE) {
		run = ascii_class[t[i + 1]];
		if (run == C_HIGH)
			return 0;
		i++;
	}
	if (run != C_SPACE) {
		while (i < len && ascii_class[t[i]] == run)
			i++;
		if (i < len && ascii_class[t[i]] == C_HIGH)
			return 0; /* the run might go on */
		return i - pos;
	}
	return ws_ascii(t, pos, len, 0);
}

/*
 * cl100k: (?i:'s|'t|'re|'ve|'m|'ll|'d)   [^\r\n\p{L}\p{N}]?\p{L}+   \p{N}{1,3}
 *         ?[^\s\p{L}\p{N}]+[\r\n]*   \s*[\r\n]+   \s+(?!\S)   \s+
 * o200k:  [^\r\n\p{L}\p{N}]?\p{Lu}*\p{Ll}+(?i:'s|...)?   [^\r\n\p{L}\p{N}]?\p{Lu}+\p{Ll}*(?i:'s|...)?
 *         \p{N}{1,3}   ?[^\s\p{L}\p{N}]+[\r\n/]*   \s*[\r\n]+   \s+(?!\S)   \s+
 * (o200k's classes as they are in ASCII). The two share all but the contraction's
 * place and the characters after a run of others.
 */

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at t[k] (an apostrophe): its length, 0 if none
 * matches, -1 where a byte above 0x7f decides */
static int contraction_i(const unsigned char *t, size_t k, size_t len)
{
	if (k + 1 >= len)
		return 0;
	unsigned a = t[k + 1], b = k + 2 < len ? t[k + 2] : 0;
	if (a >= 0x80)
		return -1;
	a |= 0x20; /* only 'S' and 's' become 's', and so on for the letters */
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return 2;
	if (a != 'r' && a != 'v' && a != 'l')
		return 0;
	if (b >= 0x80)
		return -1;
	b |= 0x20;
	return (a == 'l' ? b == 'l' : b == 'e') ? 3 : 0;
}

static size_t cl_o200k_ascii(const unsigned char *t, size_t pos, size_t len, int o200k)
{
	const unsigned c0 = ascii_class[t[pos]];
	if (c0 == C_HIGH)
		return 0;
	if (!o200k && t[pos] == '\'') {
		int m = contraction_i(t, pos, len);
		if (m)
			return m < 0 ? 0 : (size_t)m;
	}
	/* a letter run, after at most one character that is no line end, letter or digit */
	size_t i = pos;
	if ((c0 == C_OTHER || (c0 == C_SPACE && t[pos] != '\r' && t[pos] != '\n')) && pos + 1 < len) {
		unsigned c1 = ascii_class[t[pos + 1]];
		if (c1 == C_HIGH)
			return 0;
		i += c1 == C_LETTER;
	}
	if (ascii_class[t[i]] == C_LETTER) {
		if (o200k) /* upper case, then lower case: \p{Lu}*\p{Ll}+ or \p{Lu}+\p{Ll}* */
			while (i < len && t[i] >= 'A' && t[i] <= 'Z')
				i++;
		if (i < len && t[i] >= 0x80)
			return 0;
		while (i < len && ascii_class[t[i]] == C_LETTER && (!o200k || t[i] >= 'a'))
			i++;
		if (i < len && t[i] >= 0x80)
			return 0;
		if (o200k && i < len && t[i] == '\'') {
			int m = contraction_i(t, i, len);
			if (m < 0)
				return 0;
			i += (size_t)m;
		}
		return i - pos;
	}
	if (c0 == C_DIGIT) {
		while (i < len && i - pos < 3 && ascii_class[t[i]] == C_DIGIT)
			i++;
		if (i - pos < 3 && i < len && t[i] >= 0x80)
			return 0; /* a digit of another script would go on */
		return i - pos;
	}
	/* others, after at most one space, then line ends (and slashes, o200k) */
	if (t[i] == ' ' && i + 1 < len && ascii_class[t[i + 1]] == C_OTHER)
		i++;
	if (ascii_class[t[i]] == C_OTHER) {
		while (i < len && ascii_class[t[i]] == C_OTHER)
			i++;
		if (i < len && t[i] >= 0x80)
			return 0;
		while (i < len && (t[i] == '\r' || t[i] == '\n' || (o200k && t[i] == '/')))
			i++;
		return i - pos;
	}
	return ws_ascii(t, pos, len, 1);
}

/* The hand split of p's pattern at pos, or 0 to ask PCRE2. */
static size_t ascii_piece(int kind, const unsigned char *t, size_t pos, size_t len)
{
	switch (kind) {
	case LMT_PRETOK_ASCII_GPT2:
		return gpt2_ascii(t, pos, len);
	case LMT_PRETOK_ASCII_CL100K:
		return cl_o200k_ascii(t, pos, len, 0);
	default:
		return cl_o200k_ascii(t, pos, len, 1);
	}
}

int lmt_pretok_next(struct lmt_pretok_iter *it, size_t *start, size_t *n)
{
	if (it->pos >= it->len)
		return 0;
	if (!it->p->code) {
		*start = 0;
		*n = it->len;
		it->pos = it->len;
		return 1;
	}
	if (!it->have && it->p->ascii) {
		size_t m = ascii_piece(it->p->ascii, (const unsigned char *)it->text, it->pos, it->len);
		if (m) {
			*start = it->pos;
			*n = m;
			it->pos += m;
			return 1;
		}
	}
	if (!it->have) {
		int rc;
		size_t from = it->pos;
		for (;;) {
			rc = it->p->jit
				? pcre2_jit_match(it->p->code, (PCRE2_SPTR)it->text, it->len, from, 0, it->md, it->mctx)
				: pcre2_match(it->p->code, (PCRE2_SPTR)it->text, it->len, from, 0, it->md, it->mctx);
			if (rc < 0)
				break;
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(it->md);
			if (ov[1] > ov[0]) {
				it->ms = ov[0];
				it->me = ov[1];
				break;
			}
			/* an empty match covers nothing: look again one byte on */
			if (++from >= it->len) {
				rc = -1;
				break;
			}
		}
		if (rc < 0) { /* no match in the rest: it is one unmatched piece */
			it->ms = it->me = it->len;
		}
		it->have = 1;
	}
	if (it->ms > it->pos) { /* bytes no match covers come first, as a piece */
		*start = it->pos;
		*n = it->ms - it->pos;
		it->pos = it->ms;
		if (it->ms == it->me)
			it->have = 0;
		return 1;
	}
	*start = it->ms;
	*n = it->me - it->ms;
	it->pos = it->me;
	it->have = 0;
	return 1;
}

/*
 * Why a cut between a letter and a character that is not a letter, a mark or an
 * apostrophe keeps the pieces. The built-in patterns have no look-behind, so the
 * matches from the cut on are the same whether the text before it is there or
 * not. Before the cut: the letter is in a letter run's match (with, at most, a
 * prefix of one non-letter before it, or a contraction such as 's, which also
 * ends with a letter; no other alternative takes a letter), and the classes that
 * go on a letter run hold only letters and marks (\p{L}+, and o200k's cased runs
 * with \p{M}), then o200k's optional contraction begins with an apostrophe; so
 * that match ends at the cut with the text after it or without. Every
 * alternative tried before it, there or at an earlier start, reads the character
 * after the cut only as one that stops a run, as the end of the text does, or in
 * a whitespace run's look-ahead (?!\S), which no run ending in a letter reaches.
 * So the part before the cut splits as the whole does up to the cut. (After a
 * letter, a mark is not a place, nor is an apostrophe: o200k's letter runs take
 * marks and a contraction after them.)
 *
 * Which characters are letters and marks is asked of PCRE2 itself, so the cuts
 * agree with the matching whatever its Unicode version: ASCII by a table here,
 * the rest of the Basic Multilingual Plane by a table that \p{L}+ and \p{M}+
 * fill the first time a cut search meets a character beyond ASCII. Characters
 * beyond the plane and invalid UTF-8 are never next to a place (fewer places,
 * never a wrong one). The tests check the rule on random text of every class
 * (check_pretok_cut in tests/unit/test-tokenizer.c), through PCRE2 alone and the
 * hand splits of ASCII alike, and the pretok fuzz target on any bytes.
 */
enum { CUT_AFTER, CUT_LETTER, CUT_NONE }; /* CUT_AFTER: may follow a letter at a cut */

static const unsigned char cut_ascii[128] = {
	['A' ... 'Z'] = CUT_LETTER, ['a' ... 'z'] = CUT_LETTER, ['\''] = CUT_NONE,
};

static unsigned char cut_bmp[0x10000];
static int cut_bmp_ready;
static pthread_once_t cut_bmp_once = PTHREAD_ONCE_INIT;

/* Give each character of s[0..n) that the matches of pat cover the class cls; 0,
 * or -1 if PCRE2 fails. */
static int cut_mark(const char *pat, const unsigned char *s, size_t n, unsigned char cls)
{
	int ec, rc = -1;
	PCRE2_SIZE eo;
	pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
					 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
	pcre2_match_data *md = code ? pcre2_match_data_create_from_pattern(code, NULL) : NULL;
	if (md) {
		pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* 1 ms, where matching alone took 40 */
		size_t at = 0;
		int m = 0;
		while (at < n && (m = pcre2_match(code, s, n, at, 0, md, NULL)) > 0) {
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
			for (size_t o = ov[0]; o < ov[1];) {
				uint32_t cp;
				o += (size_t)lmt_utf8_decode(s + o, ov[1] - o, &cp);
				if (cp < 0x10000)
					cut_bmp[cp] = cls;
			}
			at = ov[1] > at ? ov[1] : at + 1;
		}
		rc = at >= n || m == PCRE2_ERROR_NOMATCH ? 0 : -1;
	}
	pcre2_match_data_free(md);
	pcre2_code_free(code);
	return rc;
}

/* The classes of U+0080 to U+FFFF (surrogates, which never decode, left as they
 * are); all none if PCRE2 fails. */
static void cut_bmp_fill(void)
{
	unsigned char *s = malloc(0x10000 * 3);
	size_t n = 0;
	for (uint32_t cp = 0x80; s && cp < 0x10000; cp++)
		if (cp < 0xd800 || cp > 0xdfff)
			n += (size_t)lmt_utf8_encode(cp, (char *)s + n);
	if (!s || cut_mark("\\p{M}+", s, n, CUT_NONE) || cut_mark("\\p{L}+", s, n, CUT_LETTER))
		memset(cut_bmp, CUT_NONE, sizeof cut_bmp);
	free(s);
	__atomic_store_n(&cut_bmp_ready, 1, __ATOMIC_RELEASE);
}

/* The class of the character at t[0..n) (n > 0), and its length (1 for a byte
 * that starts no valid character). */
static inline unsigned cut_class(const unsigned char *t, size_t n, int *len)
{
	if (t[0] < 0x80) {
		*len = 1;
		return cut_ascii[t[0]];
	}
	uint32_t cp;
	*len = lmt_utf8_decode_fast(t, n, &cp);
	if (cp >= 0x10000)
		return CUT_NONE; /* beyond the plane, or invalid */
	if (!__atomic_load_n(&cut_bmp_ready, __ATOMIC_ACQUIRE))
		pthread_once(&cut_bmp_once, cut_bmp_fill);
	return cut_bmp[cp];
}

/* Whether the character that ends just before t[i] (i > 0) is a letter. */
static int letter_before(const unsigned char *t, size_t i)
{
	size_t s = i - 1;
	while (s > 0 && i - s < 4 && (t[s] & 0xc0) == 0x80)
		s--;
	int len;
	return cut_class(t + s, i - s, &len) == CUT_LETTER && (size_t)len == i - s;
}

size_t lmt_pretok_cut(const struct lmt_pretok *p, const char *text, size_t len, size_t from)
{
	if (!p->builtin)
		return len;
	const unsigned char *t = (const unsigned char *)text;
	size_t i = from ? from : 1;
	while (i < len && (t[i] & 0xc0) == 0x80) /* not where a character starts */
		i++;
	if (i >= len)
		return len;
	/* then character by character, each decoded once */
	for (int letter = letter_before(t, i), l; i < len; i += (size_t)l) {
		unsigned c = cut_class(t + i, len - i, &l);
		if (c == CUT_AFTER && letter)
			return i;
		letter = c == CUT_LETTER;
	}
	return len;
}

size_t lmt_pretok_guess(const char *text, size_t len, size_t from, size_t window)
{
	const unsigned char *t = (const unsigned char *)text;
	size_t lim = len - from < window ? len : from + window;
	for (size_t c = from > 0 ? from : 1; c < lim; c++)
		if (t[c - 1] == '\n' && t[c] != ' ' && t[c] != '\t' && t[c] != '\r' && t[c] != '\n')
			return c;
	size_t c = from;
	while (c < len && (t[c] & 0xc0) == 0x80)
		c++;
	return c;
}
