/*
 * jsonptr.c: RFC 6901 pointers into jansson trees (see jsonptr.h).
 */
#include <stdlib.h>

#include "core/jsonptr.h"

json_t *lmt_jsonptr_get(json_t *v, const char *ptr)
{
	if (!*ptr)
		return v;
	if (*ptr != '/')
		return NULL;
	char tok[256];
	while (v && *ptr == '/') {
		ptr++;
		size_t n = 0;
		while (*ptr && *ptr != '/' && n + 1 < sizeof tok) {
			if (ptr[0] == '~' && (ptr[1] == '0' || ptr[1] == '1')) {
				tok[n++] = ptr[1] == '0' ? '~' : '/';
				ptr += 2;
			} else {
				tok[n++] = *ptr++;
			}
		}
		tok[n] = 0;
		if (json_is_object(v)) {
			v = json_object_get(v, tok);
		} else if (json_is_array(v)) {
			char *e;
			unsigned long k = strtoul(tok, &e, 10);
			v = (*tok && !*e) ? json_array_get(v, k) : NULL;
		} else {
			v = NULL;
		}
	}
	return v;
}
