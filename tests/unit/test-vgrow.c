/*
 * test-vgrow: lmt_vgrow grows an array in place in the address space and keeps its
 * contents; new room reads as zero; lmt_vfree unmaps it.
 *
 * Checks, and how each can fail:
 *   - growing from nothing: the first call maps room for at least the need, in
 *     whole pages (cap * elt fills the last page to within one element); fails if
 *     cap is short of the need or past the page;
 *   - 20 doublings of an array of 40-byte elements (a pair table's) to 40 MB, each
 *     element written when reached with a value of its index: after each growth every
 *     element written so far still holds its value (fails if the move loses or
 *     shifts data, e.g. a wrong old length to mremap) and the new room is zero;
 *   - a need at or under the capacity changes nothing (same pointer, same cap);
 *   - an impossible need (SIZE_MAX / 2) answers -1 and leaves the array as it was;
 *   - lmt_vfree(NULL) returns; after lmt_vfree the range is unmapped (mincore fails
 *     with ENOMEM on it; fails if the free unmapped a different length).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/vgrow.h"
#include "tap.h"

struct elt {
	uint64_t a, b, c, d;
	uint32_t e, f;
};

int main(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct elt *v = NULL;
	size_t cap = 0;
	int rc = LMT_VGROW(v, cap, 3);
	tap_ok(rc == 0 && v && cap >= 3 && cap * sizeof *v <= (size_t)pg && (cap + 1) * sizeof *v > (size_t)pg,
	       "first growth maps one page: cap %zu of %zu-byte elements", cap, sizeof *v);

	size_t written = 0, need = 1;
	int kept = 1, zero = 1;
	for (int round = 0; round < 20; round++) {
		need *= 2;
		if (LMT_VGROW(v, cap, need)) {
			tap_ok(0, "growth to %zu elements", need);
			break;
		}
		for (size_t i = 0; i < written && kept; i++)
			kept = v[i].a == i && v[i].f == (uint32_t)~i;
		for (size_t i = written; i < cap && zero; i++)
			zero = !v[i].a && !v[i].b && !v[i].c && !v[i].d && !v[i].e && !v[i].f;
		for (; written < need; written++) {
			v[written].a = written;
			v[written].f = (uint32_t)~written;
		}
	}
	tap_ok(kept, "20 doublings to %zu elements (%zu MB): every element written keeps its value", written,
	       written * sizeof *v >> 20);
	tap_ok(zero, "the room each growth adds reads as zero");

	struct elt *same = v;
	size_t capsame = cap;
	rc = LMT_VGROW(v, cap, cap);
	tap_ok(rc == 0 && v == same && cap == capsame, "a need within the capacity changes nothing");
	rc = LMT_VGROW(v, cap, SIZE_MAX / 2);
	tap_ok(rc == -1 && v == same && cap == capsame && v[written - 1].a == written - 1,
	       "an impossible need answers -1 and keeps the array");

	lmt_vfree(NULL, 0, 8);
	tap_ok(1, "lmt_vfree(NULL) returns");
	unsigned char vec[1];
	void *last_page = (char *)v + ((cap * sizeof *v - 1) / (size_t)pg) * (size_t)pg;
	LMT_VFREE(v, cap);
	errno = 0;
	tap_ok(mincore(v, (size_t)pg, vec) == -1 && errno == ENOMEM && mincore(last_page, (size_t)pg, vec) == -1,
	       "after lmt_vfree the array's first and last pages are unmapped");
	return tap_done();
}
