/* record.c — the versioned record encoding (archive/record.h) and its CRC-32. */
#include "archive/record.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* CRC-32 (IEEE 802.3, reflected), slicing by 4. */
static uint32_t crc_table[4][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 4; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t kv_crc32(const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init); /* kv_program_prepare may run on several threads */
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 4) {
        c ^= (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        c = crc_table[3][c & 0xff] ^ crc_table[2][(c >> 8) & 0xff] ^
            crc_table[1][(c >> 16) & 0xff] ^ crc_table[0][c >> 24];
        p += 4;
        n -= 4;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void put_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void kv_rec_begin(kv_buf *b, uint8_t kind)
{
    uint8_t h[KV_RECORD_HEADER] = {'k', 'v', KV_RECORD_VERSION, kind};
    kv_buf_append(b, h, sizeof h);
}

void kv_rec_u64(kv_buf *b, unsigned tag, uint64_t v)
{
    kv_buf_varint(b, (uint64_t)tag << 3 | KV_WIRE_VARINT);
    kv_buf_varint(b, v);
}

void kv_rec_i64(kv_buf *b, unsigned tag, int64_t v)
{
    kv_rec_u64(b, tag, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void kv_rec_f64(kv_buf *b, unsigned tag, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint8_t tmp[8];
    for (int i = 0; i < 8; i++)
        tmp[i] = (uint8_t)(bits >> (8 * i));
    kv_buf_varint(b, (uint64_t)tag << 3 | KV_WIRE_F64);
    kv_buf_append(b, tmp, sizeof tmp);
}

void kv_rec_bytes(kv_buf *b, unsigned tag, const void *p, size_t n)
{
    kv_buf_varint(b, (uint64_t)tag << 3 | KV_WIRE_BYTES);
    kv_buf_varint(b, n);
    kv_buf_append(b, p, n);
}

void kv_rec_str(kv_buf *b, unsigned tag, const char *s)
{
    if (s && *s)
        kv_rec_bytes(b, tag, s, strlen(s));
}

int kv_rec_end(kv_buf *b, size_t start)
{
    if (b->failed)
        return -1;
    uint8_t *h = b->data + start;
    size_t payload = b->len - start - KV_RECORD_HEADER;
    put_u32le(h + 4, (uint32_t)payload);
    put_u32le(h + 8, kv_crc32(h + KV_RECORD_HEADER, payload));
    return 0;
}

int kv_rec_open(const void *data, size_t len, uint8_t kind, kv_fields *out, kv_err *err)
{
    const uint8_t *h = data;
    if (len < KV_RECORD_HEADER || h[0] != 'k' || h[1] != 'v')
        return kv_err_set(err, "not a kevo record (%zu bytes)", len);
    if (h[2] != KV_RECORD_VERSION)
        return kv_err_set(err, "record format version %u, this kevo reads %u", h[2],
                          KV_RECORD_VERSION);
    if (h[3] != kind)
        return kv_err_set(err, "record of kind %u where kind %u was expected", h[3], kind);
    uint32_t payload = get_u32le(h + 4);
    if (payload != len - KV_RECORD_HEADER)
        return kv_err_set(err, "record length %u does not match its %zu stored bytes", payload,
                          len - KV_RECORD_HEADER);
    if (kv_crc32(h + KV_RECORD_HEADER, payload) != get_u32le(h + 8))
        return kv_err_set(err, "record checksum mismatch (corrupt record)");
    out->p = h + KV_RECORD_HEADER;
    out->end = h + len;
    return 0;
}

int kv_read_varint(kv_fields *it, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (it->p >= it->end)
            return -1;
        uint8_t byte = *it->p++;
        r |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

int kv_rec_next(kv_fields *it, kv_field *f)
{
    if (it->p >= it->end)
        return 0;
    uint64_t key;
    if (kv_read_varint(it, &key) != 0)
        return -1;
    f->tag = (unsigned)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
    case KV_WIRE_VARINT: return kv_read_varint(it, &f->u) == 0 ? 1 : -1;
    case KV_WIRE_F64: {
        if (it->end - it->p < 8)
            return -1;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits |= (uint64_t)it->p[i] << (8 * i);
        memcpy(&f->d, &bits, sizeof f->d);
        it->p += 8;
        return 1;
    }
    case KV_WIRE_BYTES: {
        uint64_t n;
        if (kv_read_varint(it, &n) != 0 || n > (uint64_t)(it->end - it->p))
            return -1;
        f->p = it->p;
        f->n = (size_t)n;
        it->p += n;
        return 1;
    }
    default: return -1;
    }
}

void kv_fields_of(const kv_field *f, kv_fields *out)
{
    out->p = f->p;
    out->end = f->p + f->n;
}

int64_t kv_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

int kv_field_str(const kv_field *f, char *dst, size_t cap)
{
    if (f->wire != KV_WIRE_BYTES || f->n >= cap || memchr(f->p, 0, f->n))
        return -1;
    memcpy(dst, f->p, f->n);
    dst[f->n] = 0;
    return 0;
}

char *kv_field_strdup(const kv_field *f)
{
    char *s = malloc(f->n + 1);
    if (!s)
        return NULL;
    memcpy(s, f->p, f->n);
    s[f->n] = 0;
    return s;
}
