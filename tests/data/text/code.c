/* A small ring buffer, the kind every program grows one of. */
#include <stddef.h>
#include <string.h>

struct ring {
	unsigned char *buf;
	size_t cap, head, tail;
};

static size_t ring_used(const struct ring *r)
{
	return (r->head - r->tail + r->cap) % r->cap;
}

int ring_push(struct ring *r, const void *p, size_t n)
{
	if (n >= r->cap - ring_used(r))
		return -1;   // full: refuse rather than overwrite
	for (size_t i = 0; i < n; i++) {
		r->buf[r->head] = ((const unsigned char *)p)[i];
		r->head = (r->head + 1) % r->cap;
	}
	return 0;
}

def python_too(x: int) -> list[str]:
    return [f"{x:08x}", "tab\there", 'quote\'s']
