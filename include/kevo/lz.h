/* lz.h — a small, fast LZ77 byte compressor for stored kernel sources.
 *
 * Sources are text with much repetition; compressing them keeps the archive
 * below the size of the raw sources even though LMDB stores large values on
 * whole 4 KiB overflow pages. The decoder is strict: it never reads or writes
 * out of bounds whatever bytes it is given, and reports corrupt input. */
#ifndef KEVO_LZ_H
#define KEVO_LZ_H

#include <stddef.h>

/* Worst-case compressed size for n input bytes. */
size_t kv_lz_bound(size_t n);

/* Compresses src[0..n) into dst (capacity cap >= kv_lz_bound(n)).
 * Returns the compressed length, or 0 if cap is too small. */
size_t kv_lz_compress(const void *src, size_t n, void *dst, size_t cap);

/* Decompresses exactly out_len bytes from src[0..n) into dst.
 * Returns 0 on success, -1 if the input is corrupt or does not decode to
 * exactly out_len bytes. */
int kv_lz_decompress(const void *src, size_t n, void *dst, size_t out_len);

#endif
