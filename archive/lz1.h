/* lz1.h — reading kevo's own LZ77 coder of schema-1 archives (lz1.c).
 *
 * The decoder is strict: it never reads or writes out of bounds whatever
 * bytes it is given, and reports corrupt input. */
#ifndef KEVO_ARCHIVE_LZ1_H
#define KEVO_ARCHIVE_LZ1_H

#include <stddef.h>

/* Decompresses exactly out_len bytes from src[0..n) into dst.
 * Returns 0 on success, -1 if the input is corrupt or does not decode to
 * exactly out_len bytes. */
int kv_lz_decompress(const void *src, size_t n, void *dst, size_t out_len);

#endif
