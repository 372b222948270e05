/*
 * vgrow.c: arrays grown with mremap (vgrow.h).
 */
#include "core/vgrow.h"
#include "core/util.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN 1
#endif
#endif
#ifndef TSAN
#define TSAN 0
#endif

/* the bytes mapped for cap elements: cap * elt rounded up to pages */
static size_t mapped(size_t cap, size_t elt)
{
	size_t pg = lmt_page_bytes(); /* asked each time: a growth is rare */
	return (cap * elt + pg - 1) / pg * pg;
}

int lmt_vgrow(void **p, size_t *cap, size_t need, size_t elt)
{
	if (need <= *cap)
		return 0;
	if (!elt || need > SIZE_MAX / 2 / elt)
		return -1;
	size_t n = *cap ? *cap : 1;
	while (n < need)
		n *= 2;
	size_t bytes = mapped(n, elt);
	void *q;
#if TSAN
	/* ThreadSanitizer does not see mremap free the old range, and takes two
	 * threads' writes to arrays that occupy it in turn for a race: copy */
	q = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q != MAP_FAILED && *p) {
		memcpy(q, *p, mapped(*cap, elt));
		munmap(*p, mapped(*cap, elt));
	}
#else
	if (*p)
		q = mremap(*p, mapped(*cap, elt), bytes, MREMAP_MAYMOVE);
	else
		q = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#endif
	if (q == MAP_FAILED)
		return -1;
	*p = q;
	*cap = bytes / elt; /* the rest of the last page too */
	return 0;
}

void lmt_vfree(void *p, size_t cap, size_t elt)
{
	if (p)
		munmap(p, mapped(cap, elt));
}
