/* lz1.c — the decoder of kevo's own LZ77 coder, the codec of code records in
 * archives of schema 1 (docs/archive.md). Kept for reading only: `kevo
 * archive upgrade` decodes schema-1 sources with it and stores them with
 * zstd; nothing writes this format any more.
 *
 * Format. The compressed stream is a series of sequences; nothing else (no
 * header: the record stores the decompressed length). Each sequence is
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
 * An empty input was the single token 0x00. */
#include "archive/lz1.h"

#include <stdint.h>
#include <string.h>

#define MIN_MATCH 4

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
