/* rng.c — xoshiro256** (Blackman and Vigna) seeded by splitmix64. */
#include "common/rng.h"

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void kv_rng_seed(kv_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
        r->s[0] = 1;
}

uint64_t kv_rng_next(kv_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t kv_rng_below(kv_rng *r, uint64_t n)
{
    /* reject the top partial copy of [0, n) so every value is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
    do
        x = kv_rng_next(r);
    while (x >= limit);
    return x % n;
}

double kv_rng_double(kv_rng *r)
{
    return (double)(kv_rng_next(r) >> 11) * 0x1.0p-53;
}

int kv_rng_weighted(kv_rng *r, const double *weights, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += weights[i] > 0 ? weights[i] : 0;
    if (sum <= 0)
        return -1;
    double x = kv_rng_double(r) * sum;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (weights[i] <= 0)
            continue;
        last = i;
        if (x < weights[i])
            return i;
        x -= weights[i];
    }
    return last; /* rounding left x just above the last weight */
}
