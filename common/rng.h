/* rng.h — the search's random numbers: xoshiro256** over four 64-bit words,
 * the state kept in the archive (kv_run_state.rng) so a resumed run draws
 * the same numbers it would have drawn. */
#ifndef KEVO_RNG_H
#define KEVO_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} kv_rng;

/* A state from a seed (splitmix64 expansion; never all zero). */
void kv_rng_seed(kv_rng *r, uint64_t seed);
uint64_t kv_rng_next(kv_rng *r);
/* Uniform in [0, n); n > 0 (unbiased). */
uint64_t kv_rng_below(kv_rng *r, uint64_t n);
/* Uniform in [0, 1). */
double kv_rng_double(kv_rng *r);
/* An index drawn with probability weights[i] / sum (weights >= 0, sum > 0);
 * -1 when every weight is 0. */
int kv_rng_weighted(kv_rng *r, const double *weights, int n);

#endif
