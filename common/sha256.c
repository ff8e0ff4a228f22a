/* sha256.c — SHA-256 through OpenSSL's libcrypto (EVP), in kevo's conventions
 * (common/sha256.h). The algorithm is fetched once per process
 * (EVP_MD_fetch) instead of on every digest, which is what EVP_sha256()
 * would make OpenSSL 3 do. libcrypto uses the CPU's SHA extensions where
 * it has them. */
#include "common/sha256.h"

#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <pthread.h>
#include <string.h>

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "kevo needs OpenSSL 3 (libssl-dev >= 3.0)"
#endif

static EVP_MD *sha256_md; /* process lifetime: fetched once, never freed */
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_md(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* The algorithm, or NULL when libcrypto has none. */
static const EVP_MD *md(void)
{
    if (pthread_once(&sha256_once, fetch_md) != 0)
        return NULL;
    return sha256_md;
}

void kv_sha256_init(kv_sha256_ctx *h)
{
    h->failed = 0;
    h->md = EVP_MD_CTX_new();
    const EVP_MD *m = md();
    if (!h->md || !m || EVP_DigestInit_ex(h->md, m, NULL) != 1)
        h->failed = 1;
}

void kv_sha256_update(kv_sha256_ctx *h, const void *data, size_t len)
{
    if (h->failed || len == 0)
        return;
    if (EVP_DigestUpdate(h->md, data, len) != 1)
        h->failed = 1;
}

int kv_sha256_final(kv_sha256_ctx *h, uint8_t out[KV_SHA256_LEN])
{
    unsigned n = 0;
    int ok = !h->failed && EVP_DigestFinal_ex(h->md, out, &n) == 1 && n == KV_SHA256_LEN;
    kv_sha256_discard(h);
    if (!ok) {
        memset(out, 0, KV_SHA256_LEN);
        return -1;
    }
    return 0;
}

void kv_sha256_discard(kv_sha256_ctx *h)
{
    EVP_MD_CTX_free(h->md); /* NULL is fine */
    h->md = NULL;
    h->failed = 0;
}

int kv_sha256(const void *data, size_t len, uint8_t out[KV_SHA256_LEN])
{
    unsigned n = 0;
    const EVP_MD *m = md();
    if (!m || EVP_Digest(len ? data : "", len, out, &n, m, NULL) != 1 || n != KV_SHA256_LEN) {
        memset(out, 0, KV_SHA256_LEN);
        return -1;
    }
    return 0;
}

void kv_sha256_hex(const uint8_t digest[KV_SHA256_LEN], char out[KV_SHA256_HEX_LEN])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < KV_SHA256_LEN; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * KV_SHA256_LEN] = '\0';
}
