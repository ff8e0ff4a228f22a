/* buf.h — the project's growable binary buffer.
 *
 * A kv_buf owns its bytes (data, len used of cap). A zeroed struct is an
 * empty buffer; kv_buf_free releases it. Allocation failure sets `failed`;
 * later appends are ignored, so a sequence of appends is checked once at
 * the end (failed, or kv_buf_reserve's result). Text buffers are
 * common/strbuf.h. */
#ifndef KEVO_BUF_H
#define KEVO_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *data;
    size_t len, cap;
    int failed;
} kv_buf;

/* Frees the bytes and zeroes the struct. */
void kv_buf_free(kv_buf *b);
/* Empties the buffer (keeps its memory) and clears `failed`. */
void kv_buf_reset(kv_buf *b);
/* Makes room for extra more bytes: 0, or -1 (and `failed` set) without memory. */
int kv_buf_reserve(kv_buf *b, size_t extra);
void kv_buf_append(kv_buf *b, const void *p, size_t n);
/* Appends v as an unsigned LEB128 varint (1 to 10 bytes). */
void kv_buf_varint(kv_buf *b, uint64_t v);

#endif
