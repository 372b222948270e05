/*
 * rng.h: the one random number generator of lmt: xoshiro256** (Blackman & Vigna,
 * 2018), seeded through splitmix64. Everything random in lmt (the built-in corpus,
 * initialisation, sampling, bootstrap resampling) draws from it, so the same seed
 * gives the same bits on every machine.
 */
#ifndef LMT_RNG_H
#define LMT_RNG_H

#include <stdint.h>

struct lmt_rng {
	uint64_t s[4];
};

/* Seed the state from (seed, stream) through splitmix64; every stream is a distinct
 * sequence. */
void lmt_rng_seed(struct lmt_rng *r, uint64_t seed, uint64_t stream);
uint64_t lmt_rng_next(struct lmt_rng *r);
/* Uniform in [0, n), n >= 1, without modulo bias (rejects draws below 2^64 mod n). */
uint64_t lmt_rng_below(struct lmt_rng *r, uint64_t n);

#endif
