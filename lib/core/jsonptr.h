/*
 * jsonptr.h: RFC 6901 JSON pointers ("/data/splits/train/tokens") into a
 * jansson tree.
 *
 * The run card names the origin of every value as a file and a pointer into it,
 * and reads the value back by the same pointer, so the reference it writes and
 * the lookup it does cannot disagree.
 */
#ifndef LMT_JSONPTR_H
#define LMT_JSONPTR_H

#include <jansson.h>

/* The value at ptr in v (borrowed from v), or NULL when there is none: "" is v
 * itself, "/a/0" member "a" then index 0; "~1" is '/', "~0" '~'. A token of
 * more than 255 bytes is looked up by its first 255 and ends the walk. */
json_t *lmt_jsonptr_get(json_t *v, const char *ptr);

#endif
