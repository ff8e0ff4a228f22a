/* buf.c — the growable binary buffer (common/buf.h). */
#include "common/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void kv_buf_free(kv_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void kv_buf_reset(kv_buf *b)
{
    b->len = 0;
    b->failed = 0;
}

int kv_buf_reserve(kv_buf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (extra > SIZE_MAX - b->len) {
        b->failed = 1;
        return -1;
    }
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void kv_buf_append(kv_buf *b, const void *p, size_t n)
{
    if (n == 0 || kv_buf_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void kv_buf_varint(kv_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    kv_buf_append(b, tmp, n);
}
