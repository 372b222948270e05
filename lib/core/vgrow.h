/*
 * vgrow.h: arrays of millions of elements that grow by doubling, kept in their own
 * mappings and grown in place in the address space (mremap).
 *
 * realloc of a block in the malloc heap copies it to a new place at each doubling,
 * faulting in the new pages while the old are still mapped; and glibc serves even
 * large blocks from the heap once a process has freed a large mapping (its mmap
 * threshold rises to 32 MiB), as tok-train has after counting. mremap moves only
 * the page tables: the pages written stay, and only the new ones fault in.
 *
 *	struct pair *v = NULL;
 *	size_t cap = 0;
 *	if (LMT_VGROW(v, cap, n + 1))
 *		return LMT_ENOMEM;
 *	...
 *	LMT_VFREE(v, cap);
 */
#ifndef LMT_VGROW_H
#define LMT_VGROW_H

#include <stddef.h>

/* Room for at least need elements of size elt in *p (capacity *cap, 0 with *p
 * NULL at first); the contents are kept and new pages are zero. 0, or -1 (the old
 * array stays valid). */
int lmt_vgrow(void **p, size_t *cap, size_t need, size_t elt);
/* Unmap an array of lmt_vgrow (NULL: nothing). */
void lmt_vfree(void *p, size_t cap, size_t elt);

#define LMT_VGROW(arr, cap, need) lmt_vgrow((void **)&(arr), &(cap), (need), sizeof(*(arr)))
#define LMT_VFREE(arr, cap) lmt_vfree((arr), (cap), sizeof(*(arr)))

#endif
