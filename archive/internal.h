/* internal.h — what the archive's files share: handles, keys, the op log. */
#ifndef KEVO_ARCHIVE_INTERNAL_H
#define KEVO_ARCHIVE_INTERNAL_H

#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <sys/types.h>

#include "archive/record.h"
#include "archive/zdict.h"
#include "archive/archive.h"
#include "archive/snapshot.h"

enum {
    DB_PROGRAMS,
    DB_CODE,
    DB_RANKING,
    DB_ELITES,
    DB_ATTEMPTS,
    DB_LINEAGE,
    DB_META,
    KV_DB_REQUIRED,            /* the databases above are in every archive of schema 2 */
    DB_SIZES = KV_DB_REQUIRED, /* the per-size ranking (sizes.c); absent from archives that
                                  a kevo before it made: a writer adds it, readers go without */
    KV_DB_COUNT
};

extern const char *const kv_db_names[KV_DB_COUNT];

/* The writer's in-memory dedup index (dedup.c). */
typedef struct kv_dedup kv_dedup;

struct kv_archive {
    MDB_env *env;
    kv_dedup *dedup;
    kv_zdict_cache *zdicts; /* the dictionaries of code records, loaded from meta */
    MDB_dbi dbi[KV_DB_COUNT];
    int has_sizes; /* the sizes database is in the file (dbi[DB_SIZES] is valid) */
    char dir[PATH_MAX];
    char path[PATH_MAX];
    int readonly;
    kv_txn *writer; /* the write transaction in progress, if any */
    /* Held while the map may not change: by a snapshot's copy (which reads
     * the map from another thread) and around mdb_env_set_mapsize. */
    pthread_mutex_t map_lock;
    /* The writer's check (guard.c): what this handle knows of its file. */
    kv_run_lock *run_lock; /* the run directory's writer lock; NULL for readers */
    int guard_fd;          /* a second descriptor of the data file; -1 for readers */
    dev_t dev;             /* of the file LMDB opened */
    ino_t ino;
    off_t size;                  /* its size after our last commit */
    uint64_t txnid;              /* the last commit we know of */
    char changed[256];           /* what the check found ("" when nothing): no commits or
                                * snapshots after that */
    int snapshotting;            /* a kv_snapshot_job is running (snapshot_job.c) */
    kv_commit_hook after_commit; /* tests' fault injection (kv_archive_opts) */
    uint64_t commits;            /* write transactions committed through this handle */
};

/* A logged write operation: enough to replay it on a fresh transaction. */
typedef enum {
    OP_ADD_PROGRAM,
    OP_SET_RESULT,
    OP_ADD_ATTEMPT,
    OP_OFFER_ELITE,
    OP_CLEAR_ISLAND,
    OP_PUT_STATE,
    OP_PUT_CONFIG,
    OP_REBUILD_SIZES,
} kv_op_type;

typedef struct {
    kv_op_type type;
    kv_buf data;     /* the encoded record the operation stores */
    kv_buf extra;    /* add_program: compressed source record; put_config: JSON */
    uint64_t out[2]; /* results of the first execution, checked on replay */
} kv_op;

struct kv_txn {
    kv_archive *a;
    MDB_txn *txn;
    int write;
    int failed;           /* a write failed: the transaction can only be aborted */
    kv_counters counters; /* write: loaded at begin, stored at commit */
    kv_op *ops;
    size_t n_ops, cap_ops;
    kv_buf scratch;  /* encoding buffer reused by operations */
    int dedup_ready; /* the dedup index is up to date for this transaction */
    int zdict_ready; /* meta holds the built-in dictionary (this transaction) */
};

/* ---- LMDB's header pages (header.c) and damage (damage.c) -------------------- */

/* One meta page as LMDB 0.9 (64-bit) writes it. */
typedef struct {
    uint16_t flags; /* page flags: P_META (0x08) */
    uint32_t magic, version, psize;
    uint64_t mapsize, last_pg, txnid;
} kv_lmdb_meta;

/* Reads and checks both header pages of the LMDB file open as fd, whose size
 * is size (> 0): magic, data version, page size, meta flag, a map size that
 * LMDB can map and that holds the file's last page, and a file as long as
 * the newer page says. Returns 0 with *newest (may be NULL) the page with the
 * larger txnid, or KV_DAMAGED with why (cap bytes) saying what is wrong. */
#define KV_DAMAGED 4
int kv_lmdb_read_header(int fd, off_t size, kv_lmdb_meta *newest, char *why, size_t cap);
/* 1 for LMDB's results that mean its file is damaged (MDB_CORRUPTED,
 * MDB_PAGE_NOTFOUND, MDB_INVALID, MDB_VERSION_MISMATCH, and ENOMEM: LMDB's
 * only allocation that large is the map its header asks for). */
int kv_lmdb_damage(int rc);
/* Sets err to "<path>: damaged (<detail>); " and what the newest good
 * snapshot of run_dir is and how to restore it, or that there is none;
 * with run_dir NULL (a snapshot file itself) just "<path>: damaged
 * (<detail>)". Control characters are replaced. Returns -1. */
int kv_damaged(kv_err *err, const char *path, const char *run_dir, const char *detail);

/* The refusal of a write to an archive whose file was changed under the
 * writer (a->changed says how), with the newest snapshot: -1. */
int kv_changed(kv_err *err, const kv_archive *a);

/* ---- the writer's check (guard.c) -------------------------------------------- */

/* Records what the writer knows of its file after opening it: 0 or -1. */
int kv_guard_open(kv_archive *a, kv_err *err);
void kv_guard_close(kv_archive *a);
/* Before a write: the file at the archive's path is still the one LMDB has
 * open, it did not shrink, its header pages are sound, and its newest commit
 * is expect_txnid (the last commit LMDB's lock knows of, inside a write
 * transaction) or, with expect_txnid 0, not older than ours. On a
 * difference a->changed says what, and err has the refusal: -1. */
int kv_guard_check(kv_archive *a, uint64_t expect_txnid, kv_err *err);
/* After our commit of transaction txnid: its size and txnid are ours. */
void kv_guard_committed(kv_archive *a, uint64_t txnid);

/* ---- snapshots (snapshot.c, snapshot_job.c) ----------------------------------- */

/* Why no snapshot may be taken of a now, or NULL. */
const char *kv_snapshot_refusal(const kv_archive *a);
/* Takes one snapshot named for now_ns and rotates (kv_snapshot_take without
 * its refusals); only a->env, a->map_lock, a->path and a->dir are used, so
 * it may run on another thread while the writer goes on. */
int kv_snapshot_run(kv_archive *a, int keep, int64_t now_ns, kv_snapshot_info *info, kv_err *err);

/* ---- opening a snapshot file (env.c) ----------------------------------------- */

/* Opens an archive file by its path, read-only and lock-free (a snapshot:
 * nothing else has it open), with every check of kv_archive_open; damage is
 * named as such, without a snapshot to restore. */
int kv_archive_open_file(const char *path, kv_archive **out, kv_err *err);

/* ---- moving files aside (restore.c; also the upgrade) -------------------------- */

/* 0 when no process has the archive open through LMDB's lock file (each
 * holds a shared fcntl lock on its first byte while it does), else -1 with
 * err saying who has it and that it must stop before `doing`. */
int kv_archive_unused(const char *archive, const char *doing, kv_err *err);
/* Now as basic ISO 8601 UTC ("20261126T104500Z"): 0, or -1. */
int kv_file_stamp(char *out, size_t cap);
/* Links path (if it exists) as "<path><tag>-<stamp>", or with ".N" added
 * when that name is taken: never over another file; then removes path
 * unless keep. out gets the new name ("" when path did not exist). */
int kv_move_aside(const char *path, const char *tag, const char *stamp, int keep, char *out,
                  size_t cap, kv_err *err);

/* Executors return 0, KV_MAP_FULL (the caller grows the map and replays), or
 * -1 with err set. */
#define KV_MAP_FULL 2
/* kv_db_put with MDB_NOOVERWRITE/MDB_NODUPDATA: the key (or pair) is already there. */
#define KV_EXISTS 3

typedef int (*kv_op_exec_fn)(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);

/* Appends an op to the log (taking ownership of its buffers) and executes it,
 * replaying the whole transaction on a larger map when it is full. On return
 * out[] holds the op's results. */
int kv_txn_run(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);

/* The executor of each op type (programs.c, elites.c, attempts.c, meta.c). */
int kv_exec_add_program(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);
int kv_exec_set_result(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);
int kv_exec_add_attempt(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);
int kv_exec_offer_elite(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);
int kv_exec_clear_island(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);
int kv_exec_put_state(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);
int kv_exec_put_config(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);
int kv_exec_rebuild_sizes(kv_txn *t, kv_op *op, uint64_t out[2], kv_err *err);

/* ---- the per-size ranking (sizes.c) ------------------------------------------- */

/* Removes the entries of program p's stored result (those it may have: a
 * missing one is fine), and adds those of its new result q; in the
 * transaction of kv_set_result. */
int kv_sizes_replace(kv_txn *t, const kv_program *p, const kv_program *q, kv_err *err);
/* A writer's open: when the counters do not say the ranking is complete,
 * rebuilds it from the programs in one write transaction (0 or -1). */
int kv_sizes_open(kv_archive *a, kv_err *err);
/* The full walk's check (verify.c): every entry the programs call for is in
 * the ranking and nothing else is. Each difference is given to bad (key: the
 * problem, size and program; what: why). Returns 0 (*checked: the entries
 * the programs call for; *skipped: 1 when the counters say the ranking is
 * incomplete, which is not damage), or -1 when the check could not read. */
typedef void (*kv_sizes_bad_fn)(void *ctx, const char *key, const char *what);
int kv_sizes_check(kv_txn *t, kv_sizes_bad_fn bad, void *ctx, uint64_t *checked, int *skipped,
                   kv_err *err);
/* An entry's key shape (problem NUL size NUL 16 bytes, no value): 0 or -1. */
int kv_sizes_entry_check(const MDB_val *k, const MDB_val *v, kv_err *err);

/* LMDB helpers: they turn an LMDB error into a message naming the archive,
 * the database and the call. put/del return KV_MAP_FULL when the map is full. */
int kv_db_get(kv_txn *t, int db, const void *key, size_t klen, MDB_val *val, kv_err *err);
int kv_db_put(kv_txn *t, int db, const void *key, size_t klen, const void *val, size_t vlen,
              unsigned flags, kv_err *err);
int kv_db_del(kv_txn *t, int db, const void *key, size_t klen, const void *val, size_t vlen,
              kv_err *err);
int kv_db_fail(kv_txn *t, int db, const char *call, int rc, kv_err *err);

/* Walks the entries of db whose keys start with prefix[0..plen), in key
 * order (plen 0: the whole database), from the first key >= start (start
 * NULL: from the prefix). fn returns 0 to go on, 1 to stop, -1 to fail (it
 * sets err). Returns 0 or -1. */
typedef int (*kv_row_fn)(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err);
int kv_db_walk(kv_txn *t, int db, const void *prefix, size_t plen, const void *start, size_t slen,
               kv_row_fn fn, void *ctx, kv_err *err);
int kv_require_write(kv_txn *t, const char *what, kv_err *err);

/* Keys. */
void kv_key_u64(uint8_t out[8], uint64_t v); /* big-endian: sorts numerically */
uint64_t kv_key_get_u64(const uint8_t in[8]);
/* problem NUL island(u32 BE, offset so negative islands sort first) cell */
size_t kv_elite_key(uint8_t *out, size_t cap, const char *problem, int32_t island,
                    const char *cell);
/* problem NUL */
size_t kv_problem_prefix(uint8_t *out, size_t cap, const char *problem);

/* Problem statistics kept in meta ("problem/<name>"). */
int kv_bump_problem(kv_txn *t, const char *problem, uint64_t programs, uint64_t attempts,
                    uint64_t ok, kv_err *err);
int kv_load_counters(kv_txn *t, kv_counters *c, kv_err *err);

/* dedup.c */
int kv_dedup_refresh(kv_txn *t, kv_dedup **d, kv_err *err);
int kv_dedup_find(const kv_dedup *d, const char *problem, const uint8_t *hash, uint64_t *id);
int kv_dedup_add_pending(kv_dedup *d, const char *problem, const uint8_t *hash, uint64_t id);
void kv_dedup_commit(kv_dedup *d, uint64_t last_id);
void kv_dedup_rollback(kv_dedup *d);
void kv_dedup_free(kv_dedup *d);
int kv_store_counters(kv_txn *t, kv_err *err);

#endif
