/* srccode.h — code records: a program's source as the archive stores it,
 * compressed with zstd and a dictionary (docs/archive.md, "Sources").
 *
 *   code record (kind 7) := 1 raw length (0), 2 codec (0), 3 bytes (2),
 *                           4 dictionary id (0; absent = none)
 *
 * Codecs: 0 raw, 1 kevo's own LZ77 (schema 1 only; read by the upgrade),
 * 2 a zstd frame. */
#ifndef KEVO_ARCHIVE_SRCCODE_H
#define KEVO_ARCHIVE_SRCCODE_H

#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "common/buf.h"
#include "common/err.h"

enum { KV_CODEC_RAW = 0, KV_CODEC_LZ = 1, KV_CODEC_ZSTD = 2 };

/* zstd's level for sources (docs/results/2026-11-22.md, "zstd and libcrypto in the archive"). */
#define KV_ZSTD_LEVEL 1

/* A parsed code record; bytes point into the record. */
typedef struct {
    uint64_t raw_len;
    uint64_t codec;
    uint32_t dict_id; /* 0: none */
    const uint8_t *bytes;
    size_t n;
} kv_code;

/* Appends the code record of src[0..len) to b: zstd with the built-in
 * dictionary, or raw when that is not smaller. Thread-safe (the compression
 * contexts come from a pool). 0, or -1 with err. */
int kv_code_encode(kv_buf *b, const char *src, size_t len, kv_err *err);

/* Checks a code record's header and fields: 0, or -1 with err. */
int kv_code_parse(const void *rec, size_t n, kv_code *out, kv_err *err);

/* Decompresses a zstd code into dst (c->raw_len bytes) with dictionary d
 * (NULL when c->dict_id is 0): 0, or -1 with err when it is not exactly
 * c->raw_len bytes of a frame made with that dictionary. Thread-safe. */
int kv_code_unzstd(const kv_code *c, const ZSTD_DDict *d, char *dst, kv_err *err);

#endif
