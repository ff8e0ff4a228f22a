/* sha256.h — SHA-256 (FIPS 180-4), used for content addresses: source hashes,
 * compile-cache keys, config hashes. */
#ifndef KEVO_SHA256_H
#define KEVO_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define KV_SHA256_LEN 32
#define KV_SHA256_HEX_LEN 65 /* 64 hex digits + NUL */

/* Incremental state. (The type cannot be named kv_sha256: typedef names and
 * function names share one namespace in C, and kv_sha256() is the one-shot.) */
typedef struct kv_sha256_ctx {
    uint32_t state[8];
    uint64_t total_len;
    uint8_t block[64];
    size_t block_len;
} kv_sha256_ctx;

void kv_sha256_init(kv_sha256_ctx *h);
void kv_sha256_update(kv_sha256_ctx *h, const void *data, size_t len);
void kv_sha256_final(kv_sha256_ctx *h, uint8_t out[KV_SHA256_LEN]);

/* One-shot digest. */
void kv_sha256(const void *data, size_t len, uint8_t out[KV_SHA256_LEN]);

/* Lower-case hex of a digest into out (KV_SHA256_HEX_LEN bytes). */
void kv_sha256_hex(const uint8_t digest[KV_SHA256_LEN], char out[KV_SHA256_HEX_LEN]);

#endif
