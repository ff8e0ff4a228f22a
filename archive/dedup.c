/* dedup.c — the writer's index of (problem, source hash) -> program id.
 *
 * A hash-keyed B-tree in LMDB would cost every insert a copy of a random
 * 4 KiB leaf (at a million programs that doubled the bytes each commit
 * writes). The index is derived data, so the writer keeps it in memory
 * instead: built from the `programs` database the first time a transaction
 * adds a program, and brought up to date at each write transaction from the
 * programs committed since (ids only grow, so that is a cursor walk from the
 * last id seen; it also picks up what another writer process committed).
 * Entries added by the running transaction are undone if it aborts or is
 * replayed: they are the newest entries, each at the head of its chain. */
#include "archive/codec.h"
#include "archive/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t hash[KV_SHA256_LEN];
    uint32_t problem; /* index into problems[] */
    uint32_t next;    /* next entry of the chain + 1; 0 ends it */
    uint64_t id;
} entry;

struct kv_dedup {
    entry *entries;
    size_t n, cap;
    uint32_t *buckets; /* first entry + 1 */
    size_t n_buckets;  /* power of two */
    char (*problems)[KV_NAME_MAX];
    size_t n_problems, cap_problems;
    uint64_t indexed_upto; /* every committed program <= this id is in */
    size_t committed;      /* entries[0..committed) are committed ones */
};

static uint64_t bucket_of(const kv_dedup *d, const uint8_t *hash, uint32_t problem)
{
    uint64_t h;
    memcpy(&h, hash, sizeof h); /* SHA-256 bits are uniform */
    h ^= (uint64_t)problem * 0x9E3779B97F4A7C15ull;
    return h & (d->n_buckets - 1);
}

void kv_dedup_free(kv_dedup *d)
{
    if (!d)
        return;
    free(d->entries);
    free(d->buckets);
    free(d->problems);
    free(d);
}

static int problem_index(kv_dedup *d, const char *name, int add, uint32_t *out)
{
    for (size_t i = 0; i < d->n_problems; i++)
        if (strcmp(d->problems[i], name) == 0) {
            *out = (uint32_t)i;
            return 0;
        }
    if (!add)
        return KV_NOTFOUND;
    if (d->n_problems == d->cap_problems) {
        size_t cap = d->cap_problems ? d->cap_problems * 2 : 16;
        void *p = realloc(d->problems, cap * sizeof *d->problems);
        if (!p)
            return -1;
        d->problems = p;
        d->cap_problems = cap;
    }
    snprintf(d->problems[d->n_problems], KV_NAME_MAX, "%s", name);
    *out = (uint32_t)d->n_problems++;
    return 0;
}

static int rehash(kv_dedup *d, size_t n_buckets)
{
    uint32_t *b = calloc(n_buckets, sizeof *b);
    if (!b)
        return -1;
    free(d->buckets);
    d->buckets = b;
    d->n_buckets = n_buckets;
    for (size_t i = 0; i < d->n; i++) { /* in order: newer entries end up first */
        uint64_t k = bucket_of(d, d->entries[i].hash, d->entries[i].problem);
        d->entries[i].next = d->buckets[k];
        d->buckets[k] = (uint32_t)(i + 1);
    }
    return 0;
}

static int add(kv_dedup *d, const char *problem, const uint8_t *hash, uint64_t id)
{
    uint32_t pi;
    if (problem_index(d, problem, 1, &pi) != 0)
        return -1;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        entry *e = realloc(d->entries, cap * sizeof *e);
        if (!e)
            return -1;
        d->entries = e;
        d->cap = cap;
    }
    if (d->n + 1 > d->n_buckets / 2 && rehash(d, d->n_buckets ? d->n_buckets * 2 : 2048) != 0)
        return -1;
    entry *e = &d->entries[d->n];
    memcpy(e->hash, hash, KV_SHA256_LEN);
    e->problem = pi;
    e->id = id;
    uint64_t k = bucket_of(d, hash, pi);
    e->next = d->buckets[k];
    d->buckets[k] = (uint32_t)(++d->n);
    return 0;
}

int kv_dedup_find(const kv_dedup *d, const char *problem, const uint8_t *hash, uint64_t *id)
{
    uint32_t pi;
    if (!d || d->n_buckets == 0 || problem_index((kv_dedup *)d, problem, 0, &pi) != 0)
        return KV_NOTFOUND;
    for (uint32_t i = d->buckets[bucket_of(d, hash, pi)]; i; i = d->entries[i - 1].next) {
        const entry *e = &d->entries[i - 1];
        if (e->problem == pi && memcmp(e->hash, hash, KV_SHA256_LEN) == 0) {
            *id = e->id;
            return 0;
        }
    }
    return KV_NOTFOUND;
}

int kv_dedup_add_pending(kv_dedup *d, const char *problem, const uint8_t *hash, uint64_t id)
{
    return add(d, problem, hash, id);
}

void kv_dedup_rollback(kv_dedup *d)
{
    /* newest first: each is the head of its chain when it is removed */
    while (d && d->n > d->committed) {
        entry *e = &d->entries[d->n - 1];
        uint64_t k = bucket_of(d, e->hash, e->problem);
        d->buckets[k] = e->next;
        d->n--;
    }
}

void kv_dedup_commit(kv_dedup *d, uint64_t last_id)
{
    if (!d)
        return;
    d->committed = d->n;
    if (last_id > d->indexed_upto)
        d->indexed_upto = last_id;
}

typedef struct {
    kv_txn *t;
    kv_dedup *d;
} refresh_walk;

static int refresh_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    refresh_walk *w = ctx;
    kv_program p;
    if (kv_decode_program(val->mv_data, val->mv_size, &p, err) != 0)
        return kv_err_prefix(err, "%s: program %llu", w->t->a->path,
                             key->mv_size == 8 ? (unsigned long long)kv_key_get_u64(key->mv_data)
                                               : 0);
    uint64_t id = key->mv_size == 8 ? kv_key_get_u64(key->mv_data) : 0;
    int rc = add(w->d, p.problem, p.source_hash, id);
    kv_program_clear(&p);
    if (rc != 0)
        return kv_err_set(err, "out of memory indexing sources");
    if (id > w->d->indexed_upto)
        w->d->indexed_upto = id;
    return 0;
}

int kv_dedup_refresh(kv_txn *t, kv_dedup **dp, kv_err *err)
{
    if (!*dp && !(*dp = calloc(1, sizeof **dp)))
        return kv_err_set(err, "out of memory");
    kv_dedup *d = *dp;
    kv_dedup_rollback(d); /* nothing pending survives into a new transaction */
    uint8_t start[8];
    kv_key_u64(start, d->indexed_upto + 1);
    refresh_walk w = {t, d};
    if (kv_db_walk(t, DB_PROGRAMS, NULL, 0, start, sizeof start, refresh_row, &w, err) != 0)
        return -1;
    d->committed = d->n;
    return 0;
}
