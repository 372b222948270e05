/*
 * rng.c: xoshiro256** seeded through splitmix64 (rng.h).
 */
#include "core/rng.h"

#include "core/error.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void lmt_rng_seed(struct lmt_rng *r, uint64_t seed, uint64_t stream)
{
	/* splitmix64 is a bijection of its counter, so distinct streams of one seed start
	 * from distinct counters; the four outputs are never all zero. */
	uint64_t x = seed;
	uint64_t k = splitmix64(&x);
	x = k ^ (stream * 0xd1342543de82ef95ULL);
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t lmt_rng_next(struct lmt_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t lmt_rng_below(struct lmt_rng *r, uint64_t n)
{
	LMT_ASSERT(n >= 1);
	/* Draws below 2^64 mod n are rejected so that the accepted range is a whole
	 * number of copies of [0, n) (as OpenBSD's arc4random_uniform). */
	uint64_t threshold = (0 - n) % n;
	for (;;) {
		uint64_t x = lmt_rng_next(r);
		if (x >= threshold)
			return x % n;
	}
}
