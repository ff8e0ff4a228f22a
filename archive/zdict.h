/* zdict.h — the zstd dictionaries of program sources (docs/archive.md,
 * "Sources"). kevo is built with one (archive/zdict/src-N.zdict, named by
 * CMakeLists.txt's KEVO_ZDICT); every archive keeps each dictionary its code
 * records use in its meta database, under "zdict/<id, 8 hex digits>", so
 * that it stays readable whatever dictionary a later kevo is built with. */
#ifndef KEVO_ARCHIVE_ZDICT_H
#define KEVO_ARCHIVE_ZDICT_H

#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "common/err.h"

/* Dictionary ids: 0x6B760000 ("kv") + the dictionary's version. */
#define KV_ZDICT_ID_BASE 0x6B760000u
#define KV_ZDICT_KEY_PREFIX "zdict/"
#define KV_ZDICT_KEY_MAX 16

typedef struct kv_txn kv_txn;
typedef struct kv_zdict_cache kv_zdict_cache;

/* The built-in dictionary: its bytes (*size) and *id. */
const void *kv_zdict_builtin(size_t *size, uint32_t *id);

/* meta's key of dictionary id: its length. */
size_t kv_zdict_key(char out[KV_ZDICT_KEY_MAX], uint32_t id);

/* Checks bytes[0..n) as the dictionary stored under id: a zstd dictionary
 * whose own id is id. 0, or -1 with err. */
int kv_zdict_check(const void *bytes, size_t n, uint32_t id, kv_err *err);

/* In a write transaction: makes sure meta holds the built-in dictionary
 * (id), writing it when missing; refuses a different dictionary stored
 * under the same id. 0, KV_MAP_FULL, or -1 with err. */
int kv_zdict_store(kv_txn *t, uint32_t id, kv_err *err);

/* The decompression dictionary id of t's archive, read from its meta once
 * per archive handle and kept (thread-safe). 0, or -1 with err (also when
 * the archive does not hold it). */
int kv_zdict_get(kv_txn *t, uint32_t id, const ZSTD_DDict **out, kv_err *err);

/* The archive handle's cache: made with the handle, freed with it. */
kv_zdict_cache *kv_zdict_cache_new(void);
void kv_zdict_cache_free(kv_zdict_cache *c);

#endif
