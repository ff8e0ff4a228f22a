/* sha256.h — SHA-256 (FIPS 180-4), used for content addresses: source hashes,
 * compile-cache keys, config hashes. The digest is OpenSSL's (libcrypto,
 * EVP); these functions only wrap it in kevo's conventions.
 *
 * libcrypto can fail (no memory, no provider of SHA-256): the one-shot and
 * kv_sha256_final return 0, or -1 with the digest zeroed. The incremental
 * calls latch a failure the way kv_buf does, so a sequence of updates is
 * checked once, at kv_sha256_final. */
#ifndef KEVO_SHA256_H
#define KEVO_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define KV_SHA256_LEN 32
#define KV_SHA256_HEX_LEN 65 /* 64 hex digits + NUL */

/* Incremental state. (The type cannot be named kv_sha256: typedef names and
 * function names share one namespace in C, and kv_sha256() is the one-shot.)
 * It owns a libcrypto context from kv_sha256_init until kv_sha256_final or
 * kv_sha256_discard, one of which must end every init. */
typedef struct kv_sha256_ctx {
    struct evp_md_ctx_st *md; /* libcrypto's EVP_MD_CTX; NULL when not started */
    int failed;               /* a libcrypto call failed: final returns -1 */
} kv_sha256_ctx;

void kv_sha256_init(kv_sha256_ctx *h);
void kv_sha256_update(kv_sha256_ctx *h, const void *data, size_t len);
/* Writes the digest and frees the context: 0, or -1 (out zeroed) when a call
 * since init failed. */
int kv_sha256_final(kv_sha256_ctx *h, uint8_t out[KV_SHA256_LEN]);
/* Frees the context without a digest (a caller that stops half way). */
void kv_sha256_discard(kv_sha256_ctx *h);

/* One-shot digest: 0, or -1 (out zeroed). */
int kv_sha256(const void *data, size_t len, uint8_t out[KV_SHA256_LEN]);

/* Lower-case hex of a digest into out (KV_SHA256_HEX_LEN bytes). */
void kv_sha256_hex(const uint8_t digest[KV_SHA256_LEN], char out[KV_SHA256_HEX_LEN]);

#endif
