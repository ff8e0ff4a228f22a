/* txn.c — read snapshots and the write transaction, with its op log.
 *
 * Every write operation is logged (its encoded record) before it runs. When
 * LMDB reports the map full, the transaction is aborted, the map doubled, and
 * the logged operations replayed on a fresh transaction; since they start from
 * the same committed state they produce the same ids, which is checked. */
#include "archive/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MAP_BYTES ((size_t)1 << 40) /* 1 TiB of address space */
#define FILE_HEADROOM_BYTES ((off_t)64 << 20)

void kv_key_u64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

uint64_t kv_key_get_u64(const uint8_t in[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | in[i];
    return v;
}

size_t kv_problem_prefix(uint8_t *out, size_t cap, const char *problem)
{
    size_t n = strlen(problem);
    if (n + 1 > cap)
        return 0;
    memcpy(out, problem, n + 1);
    return n + 1;
}

size_t kv_elite_key(uint8_t *out, size_t cap, const char *problem, int32_t island, const char *cell)
{
    size_t n = kv_problem_prefix(out, cap, problem);
    if (n == 0 || n + 4 > cap)
        return 0;
    uint32_t u = (uint32_t)island ^ 0x80000000u; /* negative islands sort first */
    out[n++] = (uint8_t)(u >> 24);
    out[n++] = (uint8_t)(u >> 16);
    out[n++] = (uint8_t)(u >> 8);
    out[n++] = (uint8_t)u;
    if (!cell)
        return n;
    size_t c = strlen(cell);
    if (n + c > cap)
        return 0;
    memcpy(out + n, cell, c);
    return n + c;
}

/* The run directory to name in a damage message; NULL for a snapshot file. */
static const char *run_dir_of(const kv_archive *a)
{
    return a->dir[0] ? a->dir : NULL;
}

int kv_db_fail(kv_txn *t, int db, const char *call, int rc, kv_err *err)
{
    if (kv_lmdb_damage(rc) && rc != ENOMEM) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s(%s): %s", call, kv_db_names[db], mdb_strerror(rc));
        return kv_damaged(err, t->a->path, run_dir_of(t->a), detail);
    }
    return kv_err_set(err, "%s: %s(%s): %s", t->a->path, call, kv_db_names[db], mdb_strerror(rc));
}

int kv_require_write(kv_txn *t, const char *what, kv_err *err)
{
    if (!t->write)
        return kv_err_set(err, "%s: %s needs a write transaction", t->a->path, what);
    if (t->failed)
        return kv_err_set(err, "%s: %s: an earlier write of this transaction failed; abort it",
                          t->a->path, what);
    return 0;
}

int kv_db_get(kv_txn *t, int db, const void *key, size_t klen, MDB_val *val, kv_err *err)
{
    MDB_val k = {klen, (void *)key};
    int rc = mdb_get(t->txn, t->a->dbi[db], &k, val);
    if (rc == MDB_NOTFOUND)
        return KV_NOTFOUND;
    if (rc != 0)
        return kv_db_fail(t, db, "mdb_get", rc, err);
    return 0;
}

int kv_db_put(kv_txn *t, int db, const void *key, size_t klen, const void *val, size_t vlen,
              unsigned flags, kv_err *err)
{
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    int rc = mdb_put(t->txn, t->a->dbi[db], &k, &v, flags);
    if (rc == MDB_MAP_FULL)
        return KV_MAP_FULL;
    if (rc == MDB_KEYEXIST && (flags & (MDB_NOOVERWRITE | MDB_NODUPDATA | MDB_APPEND)))
        return KV_EXISTS;
    if (rc != 0)
        return kv_db_fail(t, db, "mdb_put", rc, err);
    return 0;
}

int kv_db_del(kv_txn *t, int db, const void *key, size_t klen, const void *val, size_t vlen,
              kv_err *err)
{
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    int rc = mdb_del(t->txn, t->a->dbi[db], &k, val ? &v : NULL);
    if (rc == MDB_NOTFOUND)
        return KV_NOTFOUND;
    if (rc == MDB_MAP_FULL)
        return KV_MAP_FULL;
    if (rc != 0)
        return kv_db_fail(t, db, "mdb_del", rc, err);
    return 0;
}

/* A walk of a whole database must meet as many records as the database's root
 * counts: a damaged leaf page header (a lowered "lower" field) drops records
 * without any error from LMDB, and a view would print less and exit 0. */
static int check_walk_count(kv_txn *t, int db, size_t visited, kv_err *err)
{
    MDB_stat st;
    int rc = mdb_stat(t->txn, t->a->dbi[db], &st);
    if (rc != 0)
        return kv_db_fail(t, db, "mdb_stat", rc, err);
    if (st.ms_entries == visited)
        return 0;
    char detail[256];
    snprintf(detail, sizeof detail, "%s: %zu records met in a walk of %zu counted", kv_db_names[db],
             visited, st.ms_entries);
    return kv_damaged(err, t->a->path, run_dir_of(t->a), detail);
}

int kv_db_walk(kv_txn *t, int db, const void *prefix, size_t plen, const void *start, size_t slen,
               kv_row_fn fn, void *ctx, kv_err *err)
{
    MDB_cursor *c;
    int rc = mdb_cursor_open(t->txn, t->a->dbi[db], &c);
    if (rc != 0)
        return kv_db_fail(t, db, "mdb_cursor_open", rc, err);
    if (!start) {
        start = prefix;
        slen = plen;
    }
    MDB_val key = {slen, (void *)start}, val;
    int result = 0;
    size_t visited = 0;
    for (rc = mdb_cursor_get(c, &key, &val, slen ? MDB_SET_RANGE : MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
        if (plen && (key.mv_size < plen || memcmp(key.mv_data, prefix, plen) != 0))
            break;
        visited++;
        int r = fn(&key, &val, ctx, err);
        if (r != 0) {
            result = r < 0 ? -1 : 0;
            rc = 0;
            break;
        }
    }
    if (result == 0 && rc != 0 && rc != MDB_NOTFOUND)
        result = kv_db_fail(t, db, "mdb_cursor_get", rc, err);
    mdb_cursor_close(c);
    if (result == 0 && rc == MDB_NOTFOUND && slen == 0)
        result = check_walk_count(t, db, visited, err);
    return result;
}

/* mdb_env_set_mapsize, while no snapshot copies the map (snapshot.c) */
static int set_mapsize(kv_archive *a, size_t size)
{
    pthread_mutex_lock(&a->map_lock);
    int rc = mdb_env_set_mapsize(a->env, size);
    pthread_mutex_unlock(&a->map_lock);
    return rc;
}

static int begin_mdb(kv_archive *a, int write, MDB_txn **out, kv_err *err)
{
    for (int tries = 0;; tries++) {
        int rc = mdb_txn_begin(a->env, NULL, write ? 0 : MDB_RDONLY, out);
        if (rc == MDB_MAP_RESIZED && tries < 3) {
            /* the writer grew the map: adopt its size and try again */
            rc = set_mapsize(a, 0);
            if (rc == 0)
                continue;
        }
        if (rc != 0 && kv_lmdb_damage(rc)) {
            /* LMDB read a header it cannot use (a map it cannot make: ENOMEM) */
            char detail[256];
            snprintf(detail, sizeof detail, "mdb_txn_begin: %s", mdb_strerror(rc));
            return kv_damaged(err, a->path, run_dir_of(a), detail);
        }
        if (rc != 0)
            return kv_err_set(err, "%s: mdb_txn_begin: %s", a->path, mdb_strerror(rc));
        return 0;
    }
}

int kv_read_begin(kv_archive *a, kv_txn **out, kv_err *err)
{
    kv_txn *t = calloc(1, sizeof *t);
    if (!t)
        return kv_err_set(err, "out of memory");
    t->a = a;
    if (begin_mdb(a, 0, &t->txn, err) != 0) {
        free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int kv_write_begin(kv_archive *a, kv_txn **out, kv_err *err)
{
    if (a->readonly)
        return kv_err_set(err, "%s: opened read-only", a->path);
    if (a->writer)
        return kv_err_set(err, "%s: a write transaction is already open", a->path);
    /* before LMDB reads the header pages: junk there makes it ask for a map
     * it cannot get; the check names the change instead */
    if (kv_guard_check(a, 0, err) != 0)
        return -1;
    kv_txn *t = calloc(1, sizeof *t);
    if (!t)
        return kv_err_set(err, "out of memory");
    t->a = a;
    t->write = 1;
    if (begin_mdb(a, 1, &t->txn, err) != 0) {
        free(t);
        return -1;
    }
    if (kv_load_counters(t, &t->counters, err) != 0) {
        mdb_txn_abort(t->txn);
        free(t);
        return -1;
    }
    a->writer = t;
    *out = t;
    return 0;
}

static void free_txn(kv_txn *t)
{
    for (size_t i = 0; i < t->n_ops; i++) {
        kv_buf_free(&t->ops[i].data);
        kv_buf_free(&t->ops[i].extra);
    }
    free(t->ops);
    kv_buf_free(&t->scratch);
    if (t->write)
        t->a->writer = NULL;
    free(t);
}

void kv_txn_abort(kv_txn *t)
{
    if (!t)
        return;
    if (t->txn)
        mdb_txn_abort(t->txn);
    if (t->write)
        kv_dedup_rollback(t->a->dedup);
    free_txn(t);
}

static kv_op_exec_fn exec_of(kv_op_type type)
{
    switch (type) {
    case OP_ADD_PROGRAM: return kv_exec_add_program;
    case OP_SET_RESULT: return kv_exec_set_result;
    case OP_ADD_ATTEMPT: return kv_exec_add_attempt;
    case OP_OFFER_ELITE: return kv_exec_offer_elite;
    case OP_CLEAR_ISLAND: return kv_exec_clear_island;
    case OP_PUT_STATE: return kv_exec_put_state;
    case OP_PUT_CONFIG: return kv_exec_put_config;
    case OP_REBUILD_SIZES: return kv_exec_rebuild_sizes;
    }
    return NULL;
}

/* Aborts, doubles the map, begins again and replays ops[0..n). Returns 0 when
 * the replay fits, -1 with a message otherwise. */
static int regrow_and_replay(kv_txn *t, size_t n, kv_err *err)
{
    kv_archive *a = t->a;
    for (;;) {
        if (t->txn) {
            mdb_txn_abort(t->txn);
            t->txn = NULL;
        }
        kv_dedup_rollback(a->dedup); /* the replay adds them again */
        t->dedup_ready = 0;
        t->zdict_ready = 0;
        size_t size = (size_t)kv_archive_map_bytes(a);
        if (size == 0 || size >= MAX_MAP_BYTES)
            return kv_err_set(err, "%s: map full at %zu bytes", a->path, size);
        int rc = set_mapsize(a, size * 2);
        if (rc != 0)
            return kv_err_set(err, "%s: mdb_env_set_mapsize(%zu): %s", a->path, size * 2,
                              mdb_strerror(rc));
        if (begin_mdb(a, 1, &t->txn, err) != 0)
            return -1;
        if (kv_load_counters(t, &t->counters, err) != 0)
            return -1;
        int full = 0;
        for (size_t i = 0; i < n && !full; i++) {
            uint64_t out[2] = {0, 0};
            rc = exec_of(t->ops[i].type)(t, &t->ops[i], out, err);
            if (rc == KV_MAP_FULL) {
                full = 1;
            } else if (rc != 0) {
                return -1;
            } else if (out[0] != t->ops[i].out[0] || out[1] != t->ops[i].out[1]) {
                return kv_err_set(err, "%s: replay after growing the map diverged at operation %zu",
                                  a->path, i);
            }
        }
        if (!full)
            return 0;
    }
}

int kv_txn_run(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err)
{
    if (t->n_ops == t->cap_ops) {
        size_t cap = t->cap_ops ? t->cap_ops * 2 : 16;
        kv_op *ops = realloc(t->ops, cap * sizeof *ops);
        if (!ops) {
            kv_buf_free(&op->data);
            kv_buf_free(&op->extra);
            t->failed = 1;
            return kv_err_set(err, "out of memory");
        }
        t->ops = ops;
        t->cap_ops = cap;
    }
    size_t idx = t->n_ops++;
    t->ops[idx] = *op;
    for (;;) {
        uint64_t res[2] = {0, 0};
        int rc = exec_of(t->ops[idx].type)(t, &t->ops[idx], res, err);
        if (rc == 0) {
            t->ops[idx].out[0] = res[0];
            t->ops[idx].out[1] = res[1];
            if (out) {
                out[0] = res[0];
                out[1] = res[1];
            }
            return 0;
        }
        if (rc != KV_MAP_FULL || regrow_and_replay(t, idx, err) != 0) {
            t->failed = 1;
            return -1;
        }
    }
}

/* LMDB (without MDB_WRITEMAP) leaves the file short of its last page when
 * the top pages were allocated and freed in one transaction: they are never
 * written. The open check (env.c) refuses files shorter than their header
 * says, which is how truncated copies are caught, so the writer keeps the
 * file at least that long: before a commit it extends the file (sparse, so
 * no disk is used) to the committed size plus headroom for the commit, and
 * after it to the exact size should one commit outgrow the headroom. */
static int keep_file_whole(kv_archive *a, off_t headroom, kv_err *err)
{
    MDB_envinfo info;
    MDB_stat st;
    int fd, rc;
    if ((rc = mdb_env_info(a->env, &info)) != 0 || (rc = mdb_env_stat(a->env, &st)) != 0 ||
        (rc = mdb_env_get_fd(a->env, &fd)) != 0)
        return kv_err_set(err, "%s: mdb_env_info: %s", a->path, mdb_strerror(rc));
    off_t need = ((off_t)info.me_last_pgno + 1) * (off_t)st.ms_psize;
    off_t want = need + headroom;
    if (want > (off_t)info.me_mapsize)
        want = need > (off_t)info.me_mapsize ? need : (off_t)info.me_mapsize;
    struct stat fst;
    if (fstat(fd, &fst) != 0)
        return kv_err_errno(err, errno, "%s: fstat", a->path);
    if (fst.st_size >= need)
        return 0;
    if (ftruncate(fd, want) != 0)
        return kv_err_errno(err, errno, "%s: extending the file to %lld bytes", a->path,
                            (long long)want);
    return 0;
}

int kv_txn_commit(kv_txn *t, kv_err *err)
{
    if (!t->write) {
        int rc = mdb_txn_commit(t->txn);
        t->txn = NULL;
        free_txn(t);
        return rc == 0 ? 0 : kv_err_set(err, "mdb_txn_commit: %s", mdb_strerror(rc));
    }
    if (t->failed) {
        kv_err_set(err, "%s: commit refused: a write of this transaction failed", t->a->path);
        kv_txn_abort(t);
        return -1;
    }
    kv_archive *a = t->a;
    /* the file must be as our last commit (or another writer's, through
     * LMDB's lock) left it: nothing of this transaction is written yet */
    if (kv_guard_check(a, (uint64_t)mdb_txn_id(t->txn) - 1, err) != 0 ||
        keep_file_whole(a, FILE_HEADROOM_BYTES, err) != 0) {
        kv_txn_abort(t);
        return -1;
    }
    for (;;) {
        int rc = kv_store_counters(t, err);
        if (rc == 0) {
            uint64_t id = (uint64_t)mdb_txn_id(t->txn);
            rc = mdb_txn_commit(t->txn);
            t->txn = NULL; /* freed by LMDB whatever the outcome */
            if (rc == 0) {
                kv_dedup_commit(a->dedup, t->counters.next_program_id - 1);
                free_txn(t);
                /* committed: the pre-commit headroom normally covers this */
                (void)keep_file_whole(a, 0, NULL);
                kv_guard_committed(a, id);
                a->commits++;
                if (a->after_commit.fn)
                    a->after_commit.fn(a->after_commit.ctx, a->commits);
                return 0;
            }
            if (rc != MDB_MAP_FULL) {
                kv_err_set(err, "%s: mdb_txn_commit: %s", t->a->path, mdb_strerror(rc));
                kv_dedup_rollback(a->dedup);
                free_txn(t);
                return -1;
            }
        } else if (rc != KV_MAP_FULL) {
            kv_txn_abort(t);
            return -1;
        }
        if (regrow_and_replay(t, t->n_ops, err) != 0) {
            kv_txn_abort(t);
            return -1;
        }
    }
}
