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
/* Encode cp (<= 0x10FFFF) at out; returns the length. */
int lmt_utf8_encode(uint32_t cp, char *out);

#endif
