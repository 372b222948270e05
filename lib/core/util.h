/*
 * util.h: small inline helpers shared by the library: little-endian loads and
 * stores (every lmt file format is little-endian), checked array growth, a 64-bit
 * hash, monotonic time and the page size. Declarations and static inline only.
 */
#ifndef LMT_UTIL_H
#define LMT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LMT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LMT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define LMT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline uint16_t lmt_load_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t lmt_load_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t lmt_load_u64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline void lmt_store_u16(void *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void lmt_store_u32(void *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void lmt_store_u64(void *p, uint64_t v) { memcpy(p, &v, 8); }
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lmt file formats are little-endian; add byte swapping for this target"
#endif

/*
 * Make room for at least `need` elements of size `elt` in *p (capacity *cap).
 * Grows geometrically. Returns 0, or -1 on overflow or allocation failure (the old
 * block stays valid).
 */
static inline int lmt_grow(void **p, size_t *cap, size_t need, size_t elt)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 16;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -1;
		n *= 2;
	}
	if (n > SIZE_MAX / elt)
		return -1;
	void *q = realloc(*p, n * elt);
	if (!q)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}
#define LMT_GROW(arr, cap, need) lmt_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/*
 * n zeroed elements of size elt, every page written now (malloc and memset), or
 * NULL. For hash tables that are read before they are written, in processes with
 * more than one thread: calloc takes a large block fresh from the kernel, whose
 * pages a first read maps to the shared zero page; the first write to each of
 * them then replaces that mapping, and the kernel must flush it from the TLB of
 * every core the process runs on, an interrupt to each (measured: 7% of
 * tok-train -j2's time). A page first written is mapped once, with no flush.
 */
static inline void *lmt_zalloc(size_t n, size_t elt)
{
	if (elt && n > SIZE_MAX / elt)
		return NULL;
	size_t bytes = n * elt;
	void *p = malloc(bytes ? bytes : 1);
	/* GCC turns malloc then memset to 0 into calloc, which is what this must not
	 * be: the empty asm, which may read p and change any memory, stops it */
	__asm__ volatile("" : : "r"(p) : "memory");
	if (p)
		memset(p, 0, bytes);
	return p;
}

/* 64-bit hash of a byte string (a multiply-xorshift mix over 8-byte lanes). Not
 * cryptographic; used for hash tables and deterministic sampling. */
static inline uint64_t lmt_mix64(uint64_t x)
{
	x ^= x >> 32;
	x *= 0xd6e8feb86659fd93ULL;
	x ^= x >> 32;
	x *= 0xd6e8feb86659fd93ULL;
	x ^= x >> 32;
	return x;
}

static inline uint64_t lmt_hash_bytes(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ULL);
	while (n >= 8) {
		h = (h ^ lmt_mix64(lmt_load_u64(p))) * 0x9e3779b97f4a7c15ULL;
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t t = 0;
		memcpy(&t, p, n);
		h = (h ^ lmt_mix64(t ^ 0xff)) * 0x9e3779b97f4a7c15ULL;
	}
	return lmt_mix64(h);
}

static inline double lmt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The system's page size (a power of two; 4096 where sysconf does not say). */
size_t lmt_page_bytes(void);

/* Peak resident set size of this process in bytes (getrusage). */
uint64_t lmt_peak_rss(void);

/* 1 only in the fuzz build (make fuzz compiles the library with -DLMT_FUZZ): checksum
 * comparisons are skipped there, so that mutated inputs reach the parsers behind them
 * instead of stopping at the first CRC. Never set by make, make check or check-sanitize. */
#ifdef LMT_FUZZ
#define LMT_FUZZING 1
#else
#define LMT_FUZZING 0
#endif

#endif
