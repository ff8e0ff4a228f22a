/* srccode.c — code records (archive/srccode.h): zstd with the built-in
 * dictionary. The dictionary is digested once per process (a ZSTD_CDict,
 * shared read-only by every thread), and the compression and decompression
 * contexts are reused from a small pool: making a context for each source
 * costs more than compressing it. */
#include "archive/srccode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "archive/record.h"
#include "archive/zdict.h"

enum { CODE_RAW_LEN = 1, CODE_CODEC = 2, CODE_BYTES = 3, CODE_DICT = 4 };

/* ---- context pools -------------------------------------------------------- */

#define POOL_MAX 16 /* contexts kept for reuse; more threads make their own */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static ZSTD_CCtx *cpool[POOL_MAX];
static int n_cpool;
static ZSTD_DCtx *dpool[POOL_MAX];
static int n_dpool;

static ZSTD_CCtx *take_cctx(void)
{
    ZSTD_CCtx *c = NULL;
    if (pthread_mutex_lock(&pool_lock) == 0) {
        if (n_cpool > 0)
            c = cpool[--n_cpool];
        pthread_mutex_unlock(&pool_lock);
    }
    return c ? c : ZSTD_createCCtx();
}

static void give_cctx(ZSTD_CCtx *c)
{
    if (pthread_mutex_lock(&pool_lock) == 0) {
        if (n_cpool < POOL_MAX) {
            cpool[n_cpool++] = c;
            c = NULL;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    ZSTD_freeCCtx(c); /* NULL is fine */
}

static ZSTD_DCtx *take_dctx(void)
{
    ZSTD_DCtx *d = NULL;
    if (pthread_mutex_lock(&pool_lock) == 0) {
        if (n_dpool > 0)
            d = dpool[--n_dpool];
        pthread_mutex_unlock(&pool_lock);
    }
    return d ? d : ZSTD_createDCtx();
}

static void give_dctx(ZSTD_DCtx *d)
{
    if (pthread_mutex_lock(&pool_lock) == 0) {
        if (n_dpool < POOL_MAX) {
            dpool[n_dpool++] = d;
            d = NULL;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    ZSTD_freeDCtx(d);
}

/* ---- the built-in dictionary, digested for compression ---------------------- */

static ZSTD_CDict *cdict; /* process lifetime */
static uint32_t cdict_id;
static pthread_once_t cdict_once = PTHREAD_ONCE_INIT;

static void make_cdict(void)
{
    size_t n;
    const void *d = kv_zdict_builtin(&n, &cdict_id);
    kv_err err = {{0}};
    if (kv_zdict_check(d, n, cdict_id, &err) == 0)
        cdict = ZSTD_createCDict(d, n, KV_ZSTD_LEVEL);
}

/* ---- encode ----------------------------------------------------------------- */

int kv_code_encode(kv_buf *b, const char *src, size_t len, kv_err *err)
{
    if (pthread_once(&cdict_once, make_cdict) != 0 || !cdict)
        return kv_err_set(err, "zstd: the built-in dictionary does not load");
    size_t cap = ZSTD_compressBound(len);
    uint8_t *tmp = malloc(cap ? cap : 1);
    ZSTD_CCtx *c = tmp ? take_cctx() : NULL;
    if (!c) {
        free(tmp);
        return kv_err_set(err, "out of memory compressing a source");
    }
    size_t clen = ZSTD_compress_usingCDict(c, tmp, cap, src, len, cdict);
    give_cctx(c);
    if (ZSTD_isError(clen)) {
        free(tmp);
        return kv_err_set(err, "zstd: compressing a source of %zu bytes: %s", len,
                          ZSTD_getErrorName(clen));
    }
    size_t start = b->len;
    kv_rec_begin(b, KV_REC_CODE);
    kv_rec_u64(b, CODE_RAW_LEN, len);
    if (clen < len) {
        kv_rec_u64(b, CODE_CODEC, KV_CODEC_ZSTD);
        kv_rec_u64(b, CODE_DICT, cdict_id);
        kv_rec_bytes(b, CODE_BYTES, tmp, clen);
    } else {
        kv_rec_u64(b, CODE_CODEC, KV_CODEC_RAW);
        kv_rec_bytes(b, CODE_BYTES, src, len);
    }
    free(tmp);
    if (kv_rec_end(b, start) != 0)
        return kv_err_set(err, "out of memory encoding a source");
    return 0;
}

/* ---- decode ------------------------------------------------------------------ */

int kv_code_parse(const void *rec, size_t n, kv_code *out, kv_err *err)
{
    kv_fields it;
    kv_field f;
    if (kv_rec_open(rec, n, KV_REC_CODE, &it, err) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->codec = UINT64_MAX;
    uint64_t dict = 0;
    int r;
    while ((r = kv_rec_next(&it, &f)) == 1) {
        if (f.tag == CODE_RAW_LEN && f.wire == KV_WIRE_VARINT)
            out->raw_len = f.u;
        else if (f.tag == CODE_CODEC && f.wire == KV_WIRE_VARINT)
            out->codec = f.u;
        else if (f.tag == CODE_DICT && f.wire == KV_WIRE_VARINT)
            dict = f.u;
        else if (f.tag == CODE_BYTES && f.wire == KV_WIRE_BYTES) {
            out->bytes = f.p;
            out->n = f.n;
        }
    }
    if (r != 0 || !out->bytes)
        return kv_err_set(err, "corrupt code record");
    if (out->raw_len > UINT32_MAX)
        return kv_err_set(err, "corrupt code record (a source of %llu bytes)",
                          (unsigned long long)out->raw_len);
    if (dict > UINT32_MAX || (dict != 0 && out->codec != KV_CODEC_ZSTD))
        return kv_err_set(err, "corrupt code record (dictionary %llu)", (unsigned long long)dict);
    out->dict_id = (uint32_t)dict;
    if (out->codec != KV_CODEC_RAW && out->codec != KV_CODEC_LZ && out->codec != KV_CODEC_ZSTD)
        return kv_err_set(err, "corrupt code record (codec %llu)", (unsigned long long)out->codec);
    if (out->codec == KV_CODEC_RAW && out->n != out->raw_len)
        return kv_err_set(err, "corrupt code record (%zu raw bytes for a source of %llu)", out->n,
                          (unsigned long long)out->raw_len);
    return 0;
}

int kv_code_unzstd(const kv_code *c, const ZSTD_DDict *d, char *dst, kv_err *err)
{
    ZSTD_DCtx *x = take_dctx();
    if (!x)
        return kv_err_set(err, "out of memory decompressing a source");
    size_t r = d ? ZSTD_decompress_usingDDict(x, dst, c->raw_len, c->bytes, c->n, d)
                 : ZSTD_decompressDCtx(x, dst, c->raw_len, c->bytes, c->n);
    give_dctx(x);
    if (ZSTD_isError(r))
        return kv_err_set(err, "corrupt compressed source (zstd: %s)", ZSTD_getErrorName(r));
    if (r != c->raw_len)
        return kv_err_set(err, "corrupt compressed source (%zu bytes, not %llu)", r,
                          (unsigned long long)c->raw_len);
    return 0;
}
