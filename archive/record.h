/* record.h — the versioned record encoding of the archive (docs/archive.md).
 *
 *   record  := 'k' 'v' version:u8 kind:u8 length:u32le crc32:u32le payload
 *   payload := field*
 *   field   := key:varint (tag << 3 | wire) value
 *   wire 0  := varint            (unsigned; signed values zigzag-encoded)
 *   wire 1  := 8 bytes LE        (IEEE-754 double)
 *   wire 2  := length:varint bytes (strings, hashes, nested field lists)
 *
 * Readers skip fields with tags they do not know, so fields can be added
 * without a version change; a change of meaning bumps KV_RECORD_VERSION. */
#ifndef KEVO_ARCHIVE_RECORD_H
#define KEVO_ARCHIVE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"

#define KV_RECORD_VERSION 1
#define KV_RECORD_HEADER 12

enum {
    KV_REC_PROGRAM = 1,
    KV_REC_ATTEMPT = 2,
    KV_REC_ELITE = 3,
    KV_REC_COUNTERS = 4,
    KV_REC_STATE = 5,
    KV_REC_PROBLEM = 6,
    KV_REC_CODE = 7,
    KV_REC_SCHEMA = 8,
    KV_REC_OPLOG = 9, /* in-memory only: a logged write operation */
};

enum { KV_WIRE_VARINT = 0, KV_WIRE_F64 = 1, KV_WIRE_BYTES = 2 };

uint32_t kv_crc32(const void *data, size_t n);

/* Writing: kv_rec_begin, fields, kv_rec_end (fills length and CRC). */
void kv_rec_begin(kv_buf *b, uint8_t kind);
void kv_rec_u64(kv_buf *b, unsigned tag, uint64_t v);
void kv_rec_i64(kv_buf *b, unsigned tag, int64_t v);
void kv_rec_f64(kv_buf *b, unsigned tag, double v);
void kv_rec_bytes(kv_buf *b, unsigned tag, const void *p, size_t n);
void kv_rec_str(kv_buf *b, unsigned tag, const char *s); /* skipped when s is NULL or "" */
/* Returns 0, or -1 if an allocation failed along the way. */
int kv_rec_end(kv_buf *b, size_t start);

/* Reading. */
typedef struct {
    unsigned tag;
    int wire;
    uint64_t u;       /* wire 0 */
    double d;         /* wire 1 */
    const uint8_t *p; /* wire 2 */
    size_t n;
} kv_field;

typedef struct {
    const uint8_t *p, *end;
} kv_fields;

/* Validates header (magic, version, kind, length, CRC) and positions `out`
 * on the payload. Errors name what is wrong. */
int kv_rec_open(const void *data, size_t len, uint8_t kind, kv_fields *out, kv_err *err);
/* Next field: 1 = got one, 0 = end, -1 = malformed. */
int kv_rec_next(kv_fields *it, kv_field *f);
/* One bare varint (lists of varints inside a wire-2 field): 0 or -1. */
int kv_read_varint(kv_fields *it, uint64_t *v);
/* Nested field list inside a wire-2 field. */
void kv_fields_of(const kv_field *f, kv_fields *out);

int64_t kv_unzigzag(uint64_t v);
/* Copies a wire-2 string field into a fixed buffer; -1 if it does not fit. */
int kv_field_str(const kv_field *f, char *dst, size_t cap);
/* Duplicates a wire-2 field as a NUL-terminated string; NULL on OOM. */
char *kv_field_strdup(const kv_field *f);

#endif
