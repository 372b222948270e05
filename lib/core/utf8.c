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

