/* test_srccode.c — code records (archive/srccode.c): sources through zstd
 * and the built-in dictionary and back, byte for byte; the raw fallback;
 * rejection of damaged records and of the wrong dictionary; and the
 * schema-1 LZ decoder (archive/lz1.c) on corrupt input. */
#include <stdlib.h>
#include <string.h>

#include "archive/lz1.h"
#include "archive/record.h"
#include "archive/srccode.h"
#include "archive/zdict.h"
#include "test.h"
#include "test_util.h"

static uint64_t rng_state = 0x5eed;

/* Encodes, parses and decodes src: 1 when the bytes come back unchanged. */
static int round_trip(const ZSTD_DDict *d, const char *src, size_t len, uint64_t *codec,
                      size_t *stored)
{
    kv_buf b = {0};
    kv_err err = {{0}};
    kv_code c;
    int ok = kv_code_encode(&b, src, len, &err) == 0 && kv_code_parse(b.data, b.len, &c, &err) == 0;
    char *out = ok ? malloc(c.raw_len + 1) : NULL;
    if (ok && out && c.raw_len == len) {
        if (c.codec == KV_CODEC_RAW)
            memcpy(out, c.bytes, c.raw_len);
        else
            ok = c.codec == KV_CODEC_ZSTD && kv_code_unzstd(&c, d, out, &err) == 0;
        ok = ok && memcmp(out, src, len) == 0;
        *codec = c.codec;
        *stored = c.n;
    } else {
        ok = 0;
    }
    if (!ok)
        fprintf(stderr, "  round trip of %zu bytes: %s\n", len, err.msg);
    free(out);
    kv_buf_free(&b);
    return ok;
}

static void test_round_trips(void)
{
    size_t dn;
    uint32_t id;
    const void *dict = kv_zdict_builtin(&dn, &id);
    kv_err err = {{0}};
    KV_CHECK(id > KV_ZDICT_ID_BASE && id < 0x80000000u);
    KV_CHECK(kv_zdict_check(dict, dn, id, &err) == 0);
    KV_CHECK(kv_zdict_check(dict, dn, id + 1, &err) == -1);
    KV_CHECK(kv_zdict_check("not a dictionary", 16, id, &err) == -1);
    ZSTD_DDict *d = ZSTD_createDDict(dict, dn);
    KV_REQUIRE(d != NULL);

    /* kernel-like text of many sizes compresses, and comes back whole */
    size_t raw = 0, stored = 0;
    int ok = 1;
    char *src = malloc(70000);
    KV_REQUIRE(src != NULL);
    for (int i = 0; i < 300; i++) {
        size_t len = 64 + kv_test_rand(&rng_state) % 9000;
        if (i == 299)
            len = 65000; /* beyond one zstd block */
        kv_test_random_source(src, len + 1, (uint64_t)i, len);
        uint64_t codec = 99;
        size_t n = 0;
        ok &= round_trip(d, src, len, &codec, &n);
        ok &= codec == KV_CODEC_ZSTD;
        raw += len;
        stored += n;
    }
    KV_CHECK(ok);
    KV_CHECKF(stored * 2 < raw, "%zu bytes stored for %zu raw", stored, raw);

    /* what zstd cannot shrink is stored raw: the empty source, one byte,
     * random bytes */
    uint64_t codec = 99;
    size_t n = 0;
    KV_CHECK(round_trip(d, "", 0, &codec, &n) && codec == KV_CODEC_RAW && n == 0);
    KV_CHECK(round_trip(d, "x", 1, &codec, &n) && codec == KV_CODEC_RAW && n == 1);
    for (size_t i = 0; i < 4096; i++)
        src[i] = (char)(kv_test_rand(&rng_state) >> 13);
    KV_CHECK(round_trip(d, src, 4096, &codec, &n) && codec == KV_CODEC_RAW && n == 4096);

    /* a frame decoded without its dictionary, or with another, is refused */
    kv_test_random_source(src, 3001, 7, 3000);
    kv_buf b = {0};
    KV_REQUIRE(kv_code_encode(&b, src, 3000, &err) == 0);
    kv_code c;
    KV_REQUIRE(kv_code_parse(b.data, b.len, &c, &err) == 0);
    KV_CHECK(c.codec == KV_CODEC_ZSTD && c.dict_id == id);
    char out[3000];
    KV_CHECK(kv_code_unzstd(&c, NULL, out, &err) == -1);
    KV_CHECKF(strstr(err.msg, "corrupt compressed source") != NULL, "%s", err.msg);
    ZSTD_DDict *other = ZSTD_createDDict(src, 3000); /* raw content: a dictionary of id 0 */
    KV_REQUIRE(other != NULL);
    KV_CHECK(kv_code_unzstd(&c, other, out, &err) == -1);
    ZSTD_freeDDict(other);
    /* a raw length that disagrees with the frame */
    kv_code shorter = c;
    shorter.raw_len = 2999;
    KV_CHECK(kv_code_unzstd(&shorter, d, out, &err) == -1);
    KV_CHECK(kv_code_unzstd(&c, d, out, &err) == 0 && memcmp(out, src, 3000) == 0);

    /* every flipped bit of the record is caught (the record's CRC) */
    int caught = 1;
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x10;
        if (kv_code_parse(b.data, b.len, &c, &err) == 0)
            caught = 0;
        b.data[i] ^= 0x10;
    }
    KV_CHECK(caught);
    /* and every truncation */
    for (size_t t = 0; t < b.len; t++)
        if (kv_code_parse(b.data, t, &c, &err) == 0)
            caught = 0;
    KV_CHECK(caught);
    kv_buf_free(&b);
    free(src);
    ZSTD_freeDDict(d);
}

/* Fields that do not fit together are refused, whatever the CRC says. */
static void test_bad_fields(void)
{
    kv_err err = {{0}};
    kv_code c;
    kv_buf b = {0};
    /* raw codec with fewer bytes than its length */
    size_t start = b.len;
    kv_rec_begin(&b, KV_REC_CODE);
    kv_rec_u64(&b, 1, 10);
    kv_rec_u64(&b, 2, KV_CODEC_RAW);
    kv_rec_bytes(&b, 3, "abc", 3);
    KV_REQUIRE(kv_rec_end(&b, start) == 0);
    KV_CHECK(kv_code_parse(b.data, b.len, &c, &err) == -1);
    /* an unknown codec */
    kv_buf_reset(&b);
    kv_rec_begin(&b, KV_REC_CODE);
    kv_rec_u64(&b, 1, 3);
    kv_rec_u64(&b, 2, 7);
    kv_rec_bytes(&b, 3, "abc", 3);
    KV_REQUIRE(kv_rec_end(&b, 0) == 0);
    KV_CHECK(kv_code_parse(b.data, b.len, &c, &err) == -1);
    KV_CHECK(strstr(err.msg, "codec 7") != NULL);
    /* a dictionary on a raw record */
    kv_buf_reset(&b);
    kv_rec_begin(&b, KV_REC_CODE);
    kv_rec_u64(&b, 1, 3);
    kv_rec_u64(&b, 2, KV_CODEC_RAW);
    kv_rec_u64(&b, 4, 12345);
    kv_rec_bytes(&b, 3, "abc", 3);
    KV_REQUIRE(kv_rec_end(&b, 0) == 0);
    KV_CHECK(kv_code_parse(b.data, b.len, &c, &err) == -1);
    /* no bytes at all */
    kv_buf_reset(&b);
    kv_rec_begin(&b, KV_REC_CODE);
    kv_rec_u64(&b, 1, 0);
    kv_rec_u64(&b, 2, KV_CODEC_RAW);
    KV_REQUIRE(kv_rec_end(&b, 0) == 0);
    KV_CHECK(kv_code_parse(b.data, b.len, &c, &err) == -1);
    kv_buf_free(&b);
}

/* Decodes into an exactly-sized heap buffer, so ASan catches any overrun. */
static int lz_decode_checked(const uint8_t *src, size_t n, size_t out_len)
{
    uint8_t *in = malloc(n ? n : 1);
    uint8_t *out = malloc(out_len ? out_len : 1);
    if (!in || !out) {
        free(in);
        free(out);
        return 0;
    }
    memcpy(in, src, n);
    int rc = kv_lz_decompress(in, n, out, out_len);
    free(in);
    free(out);
    return rc == -1 || rc == 0;
}

/* The schema-1 decoder: garbage never makes it read or write out of bounds,
 * and hand-made streams decode or fail as the format says. (Real schema-1
 * streams are decoded by test_archive_upgrade's fixture.) */
static void test_lz1_decoder(void)
{
    uint8_t m[300];
    int ok = 1;
    for (int iter = 0; iter < 20000; iter++) {
        size_t gl = 1 + kv_test_rand(&rng_state) % sizeof m;
        for (size_t i = 0; i < gl; i++) {
            uint64_t r = kv_test_rand(&rng_state);
            m[i] = (uint8_t)(r % 3 == 0 ? 0xff : r % 3 == 1 ? (uint8_t)(r >> 8) : 0x0f);
        }
        ok &= lz_decode_checked(m, gl, kv_test_rand(&rng_state) % 2000);
    }
    KV_CHECK(ok);

    uint8_t out[64];
    static const uint8_t zero_offset[] = {0x10, 'a', 0x00, 0x00, 0x00};
    KV_CHECK(kv_lz_decompress(zero_offset, sizeof zero_offset, out, 5) == -1);
    static const uint8_t far_offset[] = {0x10, 'a', 0x02, 0x00, 0x00};
    KV_CHECK(kv_lz_decompress(far_offset, sizeof far_offset, out, 5) == -1);
    /* 'a', then a match of 4 at offset 1, then the empty last sequence */
    static const uint8_t good[] = {0x10, 'a', 0x01, 0x00, 0x00};
    KV_CHECK(kv_lz_decompress(good, sizeof good, out, 5) == 0 && memcmp(out, "aaaaa", 5) == 0);
    KV_CHECK(kv_lz_decompress(good, sizeof good, out, 4) == -1);
    KV_CHECK(kv_lz_decompress(good, sizeof good, out, 6) == -1);
    static const uint8_t ends_after_match[] = {0x10, 'a', 0x01, 0x00};
    KV_CHECK(kv_lz_decompress(ends_after_match, sizeof ends_after_match, out, 5) == -1);
    static const uint8_t huge_ext[] = {0xf0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    KV_CHECK(kv_lz_decompress(huge_ext, sizeof huge_ext, out, sizeof out) == -1);
    KV_CHECK(kv_lz_decompress(NULL, 0, out, 0) == -1);
    static const uint8_t empty[] = {0x00};
    KV_CHECK(kv_lz_decompress(empty, 1, out, 0) == 0);
    KV_CHECK(kv_lz_decompress(empty, 1, out, 1) == -1);
    /* literals only */
    static const uint8_t lits[] = {0x30, 'a', 'b', 'c'};
    KV_CHECK(kv_lz_decompress(lits, sizeof lits, out, 3) == 0 && memcmp(out, "abc", 3) == 0);
}

int main(void)
{
    KV_RUN(test_round_trips);
    KV_RUN(test_bad_fields);
    KV_RUN(test_lz1_decoder);
    return kv_test_summary();
}
