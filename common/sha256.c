/* sha256.c — SHA-256 as specified in FIPS 180-4.
 *
 * Portable C: the 64 rounds are unrolled with a macro that rotates the roles
 * of the eight working variables instead of shuffling them, and the message
 * schedule is kept in a 16-word ring. Whole blocks are compressed straight
 * from the caller's buffer; only a partial head or tail goes through
 * h->block. On x86 CPUs with the SHA extensions the block function runs on
 * them instead (compress_ni; same result, about 4x faster). */
#include "kevo/sha256.h"

#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define CH(x, y, z) (((x) & ((y) ^ (z))) ^ (z))
#define MAJ(x, y, z) (((x) & (y)) | ((z) & ((x) | (y))))
#define BSIG0(x) (ROTR(x, 2) ^ ROTR(x, 13) ^ ROTR(x, 22))
#define BSIG1(x) (ROTR(x, 6) ^ ROTR(x, 11) ^ ROTR(x, 25))
#define SSIG0(x) (ROTR(x, 7) ^ ROTR(x, 18) ^ ((x) >> 3))
#define SSIG1(x) (ROTR(x, 17) ^ ROTR(x, 19) ^ ((x) >> 10))

static inline uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           (uint32_t)p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* W[t] for t >= 16, computed in place in the 16-word ring. */
#define SCHED(t)                                                              \
    (W[(t) & 15] += SSIG1(W[((t) - 2) & 15]) + W[((t) - 7) & 15] +            \
                    SSIG0(W[((t) - 15) & 15]))

/* One round; the caller rotates the variable names instead of the values. */
#define ROUND(a, b, c, d, e, f, g, h, t, w)                                   \
    do {                                                                      \
        uint32_t t1_ = h + BSIG1(e) + CH(e, f, g) + K[t] + (w);               \
        uint32_t t2_ = BSIG0(a) + MAJ(a, b, c);                               \
        d += t1_;                                                             \
        h = t1_ + t2_;                                                        \
    } while (0)

#define ROUND8(t, w)                                                          \
    do {                                                                      \
        ROUND(a, b, c, d, e, f, g, h, (t) + 0, w((t) + 0));                   \
        ROUND(h, a, b, c, d, e, f, g, (t) + 1, w((t) + 1));                   \
        ROUND(g, h, a, b, c, d, e, f, (t) + 2, w((t) + 2));                   \
        ROUND(f, g, h, a, b, c, d, e, (t) + 3, w((t) + 3));                   \
        ROUND(e, f, g, h, a, b, c, d, (t) + 4, w((t) + 4));                   \
        ROUND(d, e, f, g, h, a, b, c, (t) + 5, w((t) + 5));                   \
        ROUND(c, d, e, f, g, h, a, b, (t) + 6, w((t) + 6));                   \
        ROUND(b, c, d, e, f, g, h, a, (t) + 7, w((t) + 7));                   \
    } while (0)

#define WLOAD(t) (W[t])
#define WSCHED(t) SCHED(t)

/* Compresses nblocks consecutive 64-byte blocks from p into state. */
static void compress(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    uint32_t W[16];
    while (nblocks--) {
        uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
        uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
        for (int i = 0; i < 16; i++)
            W[i] = load_be32(p + 4 * i);

        ROUND8(0, WLOAD);
        ROUND8(8, WLOAD);
        ROUND8(16, WSCHED);
        ROUND8(24, WSCHED);
        ROUND8(32, WSCHED);
        ROUND8(40, WSCHED);
        ROUND8(48, WSCHED);
        ROUND8(56, WSCHED);

        state[0] += a;
        state[1] += b;
        state[2] += c;
        state[3] += d;
        state[4] += e;
        state[5] += f;
        state[6] += g;
        state[7] += h;
        p += 64;
    }
}

/* x86 SHA extensions (SHA-NI): the same compression function in hardware,
 * about 5x faster than the portable code above. Used when the CPU has them
 * (checked once with CPUID); the result is identical. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <immintrin.h>
#define KV_SHA_NI 1

__attribute__((target("sha,sse4.1"))) static void compress_ni(uint32_t state[8],
                                                             const uint8_t *p, size_t nblocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    /* state as ABEF / CDGH, the layout SHA256RNDS2 works on */
    __m128i tmp = _mm_loadu_si128((const __m128i *)&state[0]);    /* DCBA */
    __m128i st1 = _mm_loadu_si128((const __m128i *)&state[4]);    /* HGFE */
    tmp = _mm_shuffle_epi32(tmp, 0xB1);                           /* CDAB */
    st1 = _mm_shuffle_epi32(st1, 0x1B);                           /* EFGH */
    __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                   /* ABEF */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);                        /* CDGH */

    while (nblocks--) {
        __m128i abef = st0, cdgh = st1, msg, m[4];
        for (int i = 0; i < 4; i++)
            m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) { /* 16 groups of 4 rounds */
            __m128i w = m[r & 3];
            msg = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&K[4 * r]));
            st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
            msg = _mm_shuffle_epi32(msg, 0x0E);
            st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
            if (r < 12) {
                /* W[4(r+4) .. 4(r+4)+3] from W of groups r .. r+3 */
                __m128i next = _mm_sha256msg1_epu32(m[r & 3], m[(r + 1) & 3]);
                next = _mm_add_epi32(next, _mm_alignr_epi8(m[(r + 3) & 3], m[(r + 2) & 3], 4));
                m[r & 3] = _mm_sha256msg2_epu32(next, m[(r + 3) & 3]);
            }
        }
        st0 = _mm_add_epi32(st0, abef);
        st1 = _mm_add_epi32(st1, cdgh);
        p += 64;
    }

    tmp = _mm_shuffle_epi32(st0, 0x1B);                           /* FEBA */
    st1 = _mm_shuffle_epi32(st1, 0xB1);                           /* DCHG */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0);                        /* DCBA */
    st1 = _mm_alignr_epi8(st1, tmp, 8);                           /* HGFE */
    _mm_storeu_si128((__m128i *)&state[0], st0);
    _mm_storeu_si128((__m128i *)&state[4], st1);
}

static int sha_ni;
static pthread_once_t sha_ni_once = PTHREAD_ONCE_INIT;

static void detect_sha_ni(void)
{
    unsigned a, b, c, d;
    int ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_1) && (c & bit_SSSE3);
    ok = ok && __get_cpuid_max(0, NULL) >= 7;
    if (ok) {
        __cpuid_count(7, 0, a, b, c, d);
        ok = (b & bit_SHA) != 0;
    }
    /* KEVO_SHA256_PORTABLE=1 forces the portable code (tests compare both) */
    const char *force = getenv("KEVO_SHA256_PORTABLE");
    sha_ni = ok && !(force && *force == '1');
}

static int have_sha_ni(void)
{
    pthread_once(&sha_ni_once, detect_sha_ni);
    return sha_ni;
}
#endif

static void compress_any(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
#ifdef KV_SHA_NI
    if (have_sha_ni()) {
        compress_ni(state, p, nblocks);
        return;
    }
#endif
    compress(state, p, nblocks);
}

void kv_sha256_init(kv_sha256_ctx *h)
{
    static const uint32_t H0[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(h->state, H0, sizeof H0);
    h->total_len = 0;
    h->block_len = 0;
}

void kv_sha256_update(kv_sha256_ctx *h, const void *data, size_t len)
{
    const uint8_t *p = data;
    if (len == 0)
        return;
    h->total_len += len;

    if (h->block_len > 0) {
        size_t take = 64 - h->block_len;
        if (take > len)
            take = len;
        memcpy(h->block + h->block_len, p, take);
        h->block_len += take;
        p += take;
        len -= take;
        if (h->block_len < 64)
            return;
        compress_any(h->state, h->block, 1);
        h->block_len = 0;
    }
    if (len >= 64) {
        size_t nblocks = len / 64;
        compress_any(h->state, p, nblocks);
        p += nblocks * 64;
        len -= nblocks * 64;
    }
    if (len > 0) {
        memcpy(h->block, p, len);
        h->block_len = len;
    }
}

void kv_sha256_final(kv_sha256_ctx *h, uint8_t out[KV_SHA256_LEN])
{
    uint64_t bits = h->total_len * 8;
    size_t n = h->block_len;

    /* Padding: 0x80, zeros up to 56 mod 64, then the 64-bit big-endian bit
     * length; spills into a second block when fewer than 9 bytes remain. */
    h->block[n++] = 0x80;
    if (n > 56) {
        memset(h->block + n, 0, 64 - n);
        compress_any(h->state, h->block, 1);
        n = 0;
    }
    memset(h->block + n, 0, 56 - n);
    store_be32(h->block + 56, (uint32_t)(bits >> 32));
    store_be32(h->block + 60, (uint32_t)bits);
    compress_any(h->state, h->block, 1);

    for (int i = 0; i < 8; i++)
        store_be32(out + 4 * i, h->state[i]);
    memset(h, 0, sizeof *h);
}

void kv_sha256(const void *data, size_t len, uint8_t out[KV_SHA256_LEN])
{
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    kv_sha256_update(&h, data, len);
    kv_sha256_final(&h, out);
}

void kv_sha256_hex(const uint8_t digest[KV_SHA256_LEN], char out[KV_SHA256_HEX_LEN])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < KV_SHA256_LEN; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * KV_SHA256_LEN] = '\0';
}
