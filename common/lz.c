/* lz.c — a small LZ77 compressor with an LZ4-like sequence format.
 *
 * Format. The compressed stream is a series of sequences; nothing else (no
 * header: the caller stores the decompressed length). Each sequence is
 *
 *     token       1 byte: high nibble = literal count L (0..15),
 *                         low nibble  = match length M - 4 (0..15)
 *     [L ext]     if the high nibble is 15: bytes added to L, each 255 byte
 *                 meaning "add 255 and continue", the first byte < 255 ends
 *     literals    L bytes, copied to the output
 *     offset      2 bytes little-endian, 1..65535: the match starts this many
 *                 bytes before the current output position
 *     [M ext]     if the low nibble is 15: bytes added to M - 4, as for L
 *
 * The last sequence stops after its literals (no offset, no match): the
 * stream ends exactly there, and the low nibble of its token must be 0. A
 * match may overlap the bytes it produces (offset < M repeats a pattern).
 * Empty input compresses to the single token 0x00.
 *
 * The compressor never starts a match in the last MFLIMIT bytes and ends
 * every match at least LAST_LITERALS bytes before the end, so it can read 8
 * bytes at a time without running off the input; the decoder does not rely
 * on this and accepts any stream that obeys the format above.
 *
 * Parsing is greedy with a single-entry hash table of 4-byte sequences; on
 * data that does not compress the search step grows, so random input goes
 * through quickly. */
#include "kevo/lz.h"

#include <stdint.h>
#include <string.h>

#define MIN_MATCH 4
#define MAX_OFFSET 65535
#define MFLIMIT 12
#define LAST_LITERALS 5
#define SKIP_TRIGGER 6 /* step grows by 1 every 2^6 failed probes */

static inline uint32_t read32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t read64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t hash4(uint32_t v, unsigned hashlog)
{
    return (v * 2654435761u) >> (32 - hashlog);
}

/* Number of equal leading bytes of two 8-byte words known to differ. */
static inline unsigned diff_bytes(uint64_t x)
{
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (unsigned)__builtin_ctzll(x) >> 3;
#elif defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (unsigned)__builtin_clzll(x) >> 3;
#else
    /* Portable fallback: find the first differing byte in memory order. */
    uint8_t b[8];
    memcpy(b, &x, 8);
    unsigned i = 0;
    while (b[i] == 0)
        i++;
    return i;
#endif
}

/* Length of the common prefix of p and q, not going past limit (for p). */
static inline size_t match_len(const uint8_t *p, const uint8_t *q, const uint8_t *limit)
{
    const uint8_t *start = p;
    while (p + 8 <= limit) {
        uint64_t x = read64(p) ^ read64(q);
        if (x)
            return (size_t)(p - start) + diff_bytes(x);
        p += 8;
        q += 8;
    }
    while (p < limit && *p == *q) {
        p++;
        q++;
    }
    return (size_t)(p - start);
}

/* Bytes needed to extend a nibble length field carrying value v. */
static inline size_t ext_len(size_t v)
{
    return v >= 15 ? (v - 15) / 255 + 1 : 0;
}

static inline uint8_t *put_ext(uint8_t *op, size_t v)
{
    v -= 15;
    while (v >= 255) {
        *op++ = 255;
        v -= 255;
    }
    *op++ = (uint8_t)v;
    return op;
}

/* Writes one sequence; match_length 0 means the final, literal-only one.
 * Returns the new output position, or NULL if it would not fit. */
static uint8_t *put_sequence(uint8_t *op, const uint8_t *oend, const uint8_t *lit,
                             size_t nlit, size_t offset, size_t match_length)
{
    size_t need = 1 + ext_len(nlit) + nlit;
    size_t mcode = 0;
    if (match_length) {
        mcode = match_length - MIN_MATCH;
        need += 2 + ext_len(mcode);
    }
    if ((size_t)(oend - op) < need)
        return NULL;

    uint8_t *token = op++;
    *token = (uint8_t)((nlit >= 15 ? 15 : nlit) << 4);
    if (nlit >= 15)
        op = put_ext(op, nlit);
    memcpy(op, lit, nlit);
    op += nlit;
    if (match_length) {
        *token |= (uint8_t)(mcode >= 15 ? 15 : mcode);
        *op++ = (uint8_t)offset;
        *op++ = (uint8_t)(offset >> 8);
        if (mcode >= 15)
            op = put_ext(op, mcode);
    }
    return op;
}

size_t kv_lz_bound(size_t n)
{
    /* Literals cost n + ext_len(n) + 1 at worst; every match saves at least
     * one byte, which covers the token and extension byte its literal run
     * may add. The slack of 16 keeps the arithmetic obviously safe. */
    return n + n / 255 + 16;
}

size_t kv_lz_compress(const void *src_, size_t n, void *dst_, size_t cap)
{
    /* NULL is fine with a zero length; pointer arithmetic on it is not. */
    static const uint8_t no_input[1];
    uint8_t no_room[1];
    const uint8_t *src = n ? src_ : no_input;
    uint8_t *dst = cap ? dst_ : no_room;
    uint8_t *op = dst;
    const uint8_t *oend = op + cap;
    const uint8_t *anchor = src;

    if (n < MFLIMIT + 1)
        goto last_literals;

    /* Small inputs get a small table: clearing it is part of the cost. */
    unsigned hashlog = n <= 65536 ? 12 : 14;
    uint32_t table[1u << 14];
    memset(table, 0, sizeof(uint32_t) << hashlog);

    const uint8_t *ip = src;
    const uint8_t *iend = src + n;
    const uint8_t *mflimit = iend - MFLIMIT;
    const uint8_t *matchlimit = iend - LAST_LITERALS;

    /* Positions are stored as 32-bit offsets from src. On inputs beyond
     * 4 GiB they wrap; that is harmless because every candidate is checked
     * against the bytes it claims to match. */
    table[hash4(read32(ip), hashlog)] = 0;
    ip++;

    for (;;) {
        const uint8_t *cand;
        unsigned probes = 1u << SKIP_TRIGGER;

        /* Find a 4-byte match. */
        for (;;) {
            size_t step = probes++ >> SKIP_TRIGGER;
            if (ip > mflimit)
                goto last_literals;
            uint32_t seq = read32(ip);
            uint32_t h = hash4(seq, hashlog);
            uint32_t pos = (uint32_t)(ip - src);
            uint32_t dist = pos - table[h];
            table[h] = pos;
            if (dist >= 1 && dist <= MAX_OFFSET && dist <= (size_t)(ip - src)) {
                cand = ip - dist;
                if (read32(cand) == seq)
                    break;
            }
            ip += step;
        }

        /* Extend backwards over pending literals. */
        while (ip > anchor && cand > src && ip[-1] == cand[-1]) {
            ip--;
            cand--;
        }

        for (;;) {
            size_t len = MIN_MATCH + match_len(ip + MIN_MATCH, cand + MIN_MATCH, matchlimit);
            op = put_sequence(op, oend, anchor, (size_t)(ip - anchor),
                              (size_t)(ip - cand), len);
            if (!op)
                return 0;
            ip += len;
            anchor = ip;
            if (ip > mflimit)
                goto last_literals;

            /* Index a position inside the match, then try for an immediate
             * follow-on match without emitting literals. */
            table[hash4(read32(ip - 2), hashlog)] = (uint32_t)(ip - 2 - src);
            uint32_t seq = read32(ip);
            uint32_t h = hash4(seq, hashlog);
            uint32_t pos = (uint32_t)(ip - src);
            uint32_t dist = pos - table[h];
            table[h] = pos;
            if (dist >= 1 && dist <= MAX_OFFSET && dist <= (size_t)(ip - src) &&
                read32(ip - dist) == seq) {
                cand = ip - dist;
                continue;
            }
            ip++;
            break;
        }
    }

last_literals:
    op = put_sequence(op, oend, anchor, (size_t)(src + n - anchor), 0, 0);
    if (!op)
        return 0;
    return (size_t)(op - dst);
}

/* Reads an extended length; adds to *v. Returns -1 on truncated input or a
 * length beyond limit (which also rules out overflow). */
static int get_ext(const uint8_t **ipp, const uint8_t *iend, size_t *v, size_t limit)
{
    const uint8_t *ip = *ipp;
    for (;;) {
        if (ip >= iend)
            return -1;
        uint8_t b = *ip++;
        *v += b;
        if (*v > limit)
            return -1;
        if (b != 255)
            break;
    }
    *ipp = ip;
    return 0;
}

int kv_lz_decompress(const void *src_, size_t n, void *dst_, size_t out_len)
{
    uint8_t no_room[1];
    if (n == 0)
        return -1; /* even empty input compresses to one token */
    const uint8_t *ip = src_;
    const uint8_t *iend = ip + n;
    uint8_t *dst = out_len ? dst_ : no_room;
    uint8_t *op = dst;
    uint8_t *oend = dst + out_len;

    while (ip < iend) {
        unsigned token = *ip++;

        size_t nlit = token >> 4;
        if (nlit == 15 && get_ext(&ip, iend, &nlit, out_len) != 0)
            return -1;
        if (nlit > (size_t)(iend - ip) || nlit > (size_t)(oend - op))
            return -1;
        if (nlit) {
            memcpy(op, ip, nlit);
            op += nlit;
            ip += nlit;
        }

        if (ip == iend) {
            /* The final sequence carries no match. */
            if ((token & 15) != 0)
                return -1;
            return op == oend ? 0 : -1;
        }

        if (iend - ip < 2)
            return -1;
        size_t offset = (size_t)ip[0] | (size_t)ip[1] << 8;
        ip += 2;
        if (offset == 0 || offset > (size_t)(op - dst))
            return -1;

        size_t mlen = token & 15;
        if (mlen == 15 && get_ext(&ip, iend, &mlen, out_len) != 0)
            return -1;
        mlen += MIN_MATCH;
        if (mlen > (size_t)(oend - op))
            return -1;

        const uint8_t *m = op - offset;
        if (offset >= mlen) {
            memcpy(op, m, mlen);
            op += mlen;
        } else if (offset == 1) {
            memset(op, *m, mlen);
            op += mlen;
        } else {
            /* Overlapping copy: repeats the last offset bytes. */
            uint8_t *end = op + mlen;
            while (op < end)
                *op++ = *m++;
        }
    }
    /* The stream ended after a match. */
    return -1;
}
