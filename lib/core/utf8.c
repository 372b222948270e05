/*
 * utf8.c: UTF-8 decoding and encoding (utf8.h).
 */
#include "core/utf8.h"

int lmt_utf8_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
	unsigned c = p[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	int len;
	uint32_t v;
	if (c >= 0xc2 && c <= 0xdf) { len = 2; v = c & 0x1f; }
	else if (c >= 0xe0 && c <= 0xef) { len = 3; v = c & 0x0f; }
	else if (c >= 0xf0 && c <= 0xf4) { len = 4; v = c & 0x07; }
	else goto bad;
	if (n < (size_t)len)
		goto bad;
	for (int k = 1; k < len; k++) {
		if ((p[k] & 0xc0) != 0x80)
			goto bad;
		v = v << 6 | (p[k] & 0x3f);
	}
	/* RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF */
	if ((len == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) ||
	    (len == 4 && (v < 0x10000 || v > 0x10ffff)))
		goto bad;
	*cp = v;
	return len;
bad:
	*cp = LMT_UTF8_BAD + c;
	return 1;
}

int lmt_utf8_encode(uint32_t cp, char *out)
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
