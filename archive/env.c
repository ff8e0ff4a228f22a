/* env.c — opening and closing the archive's LMDB environment, with checks
 * made before LMDB maps the file (LMDB trusts its file: a truncated one would
 * fault on access, a foreign one would be misread). A file that fails them,
 * or that LMDB reports as corrupt, is named as damaged, with the newest
 * snapshot that could replace it (damage.c). */
#include "archive/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"

const char *const kv_db_names[KV_DB_COUNT] = {
    [DB_PROGRAMS] = "programs", [DB_CODE] = "code",         [DB_RANKING] = "ranking",
    [DB_ELITES] = "elites",     [DB_ATTEMPTS] = "attempts", [DB_LINEAGE] = "lineage",
    [DB_META] = "meta",         [DB_SIZES] = "sizes",
};

#define DEFAULT_MAP_BYTES ((size_t)256 << 20)

/* Checks that path holds a whole LMDB file (header.c). Returns 0,
 * KV_NOTFOUND for an empty file, KV_DAMAGED with err holding what is wrong
 * (no path: the caller names it), or -1 with a message. */
static int check_lmdb_file(const char *path, kv_err *err)
{
    struct stat st; /* a FIFO in its place is refused, not waited on */
    int fd = kv_open_regular(path, &st, err);
    if (fd < 0)
        return -1;
    if (st.st_size == 0) {
        close(fd);
        return KV_NOTFOUND;
    }
    char why[256];
    int rc = kv_lmdb_read_header(fd, st.st_size, NULL, why, sizeof why);
    close(fd);
    if (rc != 0)
        kv_err_set(err, "%s", why);
    return rc;
}

/* An LMDB failure while opening: KV_DAMAGED with the detail in err when rc
 * says the file is damaged, else -1 with the whole message. */
static int lmdb_fail(kv_archive *a, const char *call, int rc, kv_err *err)
{
    if (kv_lmdb_damage(rc)) {
        kv_err_set(err, "%s: %s", call, mdb_strerror(rc));
        return KV_DAMAGED;
    }
    return kv_err_set(err, "%s: %s: %s", a->path, call, mdb_strerror(rc));
}

/* Whether a kevo database other than number `missing` is in the file: then
 * the missing one was lost to damage (a main-database page that lost a
 * record), and the file is a damaged archive rather than a foreign one. */
static int has_other_database(MDB_txn *txn, int missing)
{
    for (int j = 0; j < KV_DB_REQUIRED; j++) {
        MDB_dbi dbi;
        if (j != missing && mdb_dbi_open(txn, kv_db_names[j], 0, &dbi) == 0)
            return 1;
    }
    return 0;
}

/* Opens every named database; creates them when the archive is writable.
 * Readers go without the sizes database, which archives made before it lack. */
static int open_databases(kv_archive *a, int fresh, kv_err *err)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(a->env, NULL, a->readonly ? MDB_RDONLY : 0, &txn);
    if (rc != 0)
        return lmdb_fail(a, "mdb_txn_begin", rc, err);
    for (int i = 0; i < KV_DB_COUNT; i++) {
        unsigned flags = a->readonly ? 0 : MDB_CREATE;
        if (i == DB_LINEAGE)
            flags |= MDB_DUPSORT | MDB_DUPFIXED;
        rc = mdb_dbi_open(txn, kv_db_names[i], flags, &a->dbi[i]);
        if (rc == MDB_NOTFOUND && i == DB_SIZES)
            continue;
        if (rc == 0 && i == DB_SIZES)
            a->has_sizes = 1;
        if (rc == MDB_NOTFOUND) {
            int others = has_other_database(txn, i);
            mdb_txn_abort(txn);
            if (others) {
                kv_err_set(err, "the '%s' database is missing", kv_db_names[i]);
                return KV_DAMAGED;
            }
            return kv_err_set(err, "%s: not a kevo archive (no '%s' database)", a->path,
                              kv_db_names[i]);
        }
        if (rc == MDB_INCOMPATIBLE) {
            mdb_txn_abort(txn);
            return kv_err_set(err, "%s: not a kevo archive ('%s' has other flags)", a->path,
                              kv_db_names[i]);
        }
        if (rc != 0) {
            mdb_txn_abort(txn);
            return lmdb_fail(a, "mdb_dbi_open", rc, err);
        }
    }
    /* The schema version: written once when the archive is made, checked on every open. */
    MDB_val key = {6, "schema"}, val;
    rc = mdb_get(txn, a->dbi[DB_META], &key, &val);
    if (rc == MDB_NOTFOUND && fresh && !a->readonly) {
        uint8_t v[4] = {KV_ARCHIVE_SCHEMA_VERSION & 0xff, (KV_ARCHIVE_SCHEMA_VERSION >> 8) & 0xff,
                        0, 0};
        val.mv_size = sizeof v;
        val.mv_data = v;
        rc = mdb_put(txn, a->dbi[DB_META], &key, &val, 0);
        if (rc != 0) {
            mdb_txn_abort(txn);
            return lmdb_fail(a, "mdb_put(meta/schema)", rc, err);
        }
    } else if (rc == MDB_NOTFOUND) {
        mdb_txn_abort(txn);
        return kv_err_set(err, "%s: not a kevo archive (no schema version)", a->path);
    } else if (rc != 0) {
        mdb_txn_abort(txn);
        return lmdb_fail(a, "mdb_get(meta/schema)", rc, err);
    } else {
        const uint8_t *v = val.mv_data;
        uint32_t version = val.mv_size == 4 ? (uint32_t)v[0] | (uint32_t)v[1] << 8 |
                                                  (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24
                                            : 0;
        if (version != KV_ARCHIVE_SCHEMA_VERSION) {
            mdb_txn_abort(txn);
            if (version >= 1 && version < KV_ARCHIVE_SCHEMA_VERSION)
                return kv_err_set(err,
                                  "%s: archive schema version %u; this kevo reads version "
                                  "%u: 'kevo archive upgrade %s' converts it (the old file is "
                                  "kept beside it)",
                                  a->path, version, KV_ARCHIVE_SCHEMA_VERSION,
                                  a->dir[0] ? a->dir : a->path);
            return kv_err_set(err, "%s: archive schema version %u; this kevo reads version %u",
                              a->path, version, KV_ARCHIVE_SCHEMA_VERSION);
        }
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0)
        return lmdb_fail(a, "mdb_txn_commit", rc, err);
    return 0;
}

static kv_archive *new_handle(int readonly, kv_err *err)
{
    kv_archive *a = calloc(1, sizeof *a);
    if (!a) {
        kv_err_set(err, "out of memory");
        return NULL;
    }
    int rc = pthread_mutex_init(&a->map_lock, NULL);
    if (rc != 0) {
        free(a);
        kv_err_errno(err, rc, "pthread_mutex_init");
        return NULL;
    }
    a->zdicts = kv_zdict_cache_new();
    if (!a->zdicts) {
        pthread_mutex_destroy(&a->map_lock);
        free(a);
        kv_err_set(err, "out of memory");
        return NULL;
    }
    a->readonly = readonly;
    a->guard_fd = -1;
    return a;
}

/* LMDB stops the process (abort) when it finds a page that cannot be, which
 * junk in the middle of the file can make it find: name the damage first. */
static void on_lmdb_assert(MDB_env *env, const char *msg)
{
    const kv_archive *a = mdb_env_get_userctx(env);
    kv_err err = {{0}};
    char detail[512];
    snprintf(detail, sizeof detail, "LMDB stopped on a page that cannot be: %s", msg);
    kv_damaged(&err, a ? a->path : "archive", a && a->dir[0] ? a->dir : NULL, detail);
    fprintf(stderr, "kevo: %s\n", err.msg);
    fflush(stderr);
}

/* Opens a->path with LMDB (the file passed check_lmdb_file, or is new when
 * fresh): 0, KV_DAMAGED with the detail in err, or -1 with a message. */
static int open_lmdb(kv_archive *a, const kv_archive_opts *opts, int fresh, kv_err *err)
{
    unsigned flags = MDB_NOSUBDIR | MDB_NOTLS;
    if (opts->readonly) {
        flags |= MDB_RDONLY;
        /* The lock file exists once a writer has opened the archive. Without
         * one no writer is active, and a reader must not create files. */
        char lock[PATH_MAX];
        if (snprintf(lock, sizeof lock, "%s-lock", a->path) >= (int)sizeof lock)
            return kv_err_set(err, "%s: path too long", a->path);
        if (access(lock, F_OK) != 0)
            flags |= MDB_NOLOCK;
    }
    int rc = mdb_env_create(&a->env);
    if (rc != 0) {
        a->env = NULL;
        return kv_err_set(err, "mdb_env_create: %s", mdb_strerror(rc));
    }
    rc = mdb_env_set_maxdbs(a->env, KV_DB_COUNT + 4);
    if (rc == 0)
        rc = mdb_env_set_userctx(a->env, a);
    if (rc == 0)
        rc = mdb_env_set_assert(a->env, on_lmdb_assert);
    if (rc == 0 && !opts->readonly)
        rc = mdb_env_set_mapsize(a->env, opts->initial_map_bytes ? opts->initial_map_bytes
                                                                 : DEFAULT_MAP_BYTES);
    if (rc != 0)
        return lmdb_fail(a, "mdb_env_set", rc, err);
    rc = mdb_env_open(a->env, a->path, flags, 0644);
    if ((rc == EACCES || rc == EPERM) && opts->readonly)
        return kv_err_set(err,
                          "%s: cannot open for reading: %s (readers need write access to "
                          "its lock file %s-lock, where LMDB registers them)",
                          a->path, strerror(rc), a->path);
    if (rc == EACCES || rc == EROFS || rc == EPERM)
        return kv_err_set(err, "%s: cannot open for writing (read-only directory?): %s", a->path,
                          strerror(rc));
    if (rc != 0)
        return lmdb_fail(a, "mdb_env_open", rc, err);
    if (!opts->readonly) {
        int dead = 0;
        rc = mdb_reader_check(a->env, &dead); /* clear slots of killed readers */
        if (rc != 0)
            return lmdb_fail(a, "mdb_reader_check", rc, err);
    }
    if (!opts->readonly && opts->create && !fresh) {
        MDB_envinfo info;
        rc = mdb_env_info(a->env, &info);
        if (rc != 0)
            return lmdb_fail(a, "mdb_env_info", rc, err);
        fresh = info.me_last_txnid == 0; /* killed before its first commit: nothing was stored */
    }
    rc = open_databases(a, fresh, err);
    if (rc != 0)
        return rc;
    return opts->readonly ? 0 : kv_guard_open(a, err);
}

/* A writer's archive that holds a commit, walked in a child
 * (kv_archive_walk, quick): 0 when sound or empty, else -1 with err naming
 * the damage and the snapshot that can replace it. */
static int walk_first(kv_archive *a, const char *run_dir, kv_err *err)
{
    MDB_envinfo info;
    int rc = mdb_env_info(a->env, &info);
    if (rc != 0)
        return kv_err_set(err, "%s: mdb_env_info: %s", a->path, mdb_strerror(rc));
    if (info.me_last_txnid == 0)
        return 0; /* nothing stored yet */
    kv_walk_info walked;
    return kv_archive_walk(run_dir, NULL, 0, NULL, &walked, err);
}

/* Fails when path is a symbolic link (absent is fine). */
static int refuse_link(const char *path, kv_err *err)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        return kv_err_set(err,
                          "%s is a symbolic link: kevo writes its archive in place, never "
                          "through a link",
                          path);
    return 0;
}

/* The same for LMDB's lock file beside the archive (<archive>-lock). */
static int refuse_link_lock(const char *archive, kv_err *err)
{
    char lock[PATH_MAX];
    if (snprintf(lock, sizeof lock, "%s-lock", archive) >= (int)sizeof lock)
        return kv_err_set(err, "%s: path too long", archive);
    return refuse_link(lock, err);
}

int kv_archive_open(const char *run_dir, const kv_archive_opts *opts, kv_archive **out, kv_err *err)
{
    kv_archive_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    *out = NULL;
    kv_archive *a = new_handle(opts->readonly, err);
    if (!a)
        return -1;
    a->after_commit = opts->after_commit;
    if (snprintf(a->dir, sizeof a->dir, "%s", run_dir) >= (int)sizeof a->dir ||
        kv_path_join(a->path, sizeof a->path, run_dir, KV_ARCHIVE_FILE, err) != 0) {
        kv_archive_close(a);
        return kv_err_set(err, "%s: path too long", run_dir);
    }

    struct stat st;
    int fresh = 0, rc = 0;
    if (stat(run_dir, &st) != 0) {
        if (errno != ENOENT || opts->readonly || !opts->create) {
            kv_err_errno(err, errno, "run directory %s", run_dir);
            goto fail;
        }
        if (kv_mkdir_p(run_dir, 0755, err) != 0)
            goto fail;
    } else if (!S_ISDIR(st.st_mode)) {
        kv_err_set(err, "run directory %s: not a directory", run_dir);
        goto fail;
    }

    /* one writer per run: before anything is created or opened */
    if (!opts->readonly && kv_run_lock_take(run_dir, &a->run_lock, err) != 0)
        goto fail;
    /* a writer writes its archive in place: LMDB opens its files by path and
     * would follow a link planted at either name out of the run directory */
    if (!opts->readonly && (refuse_link(a->path, err) != 0 || refuse_link_lock(a->path, err) != 0))
        goto fail;

    if (stat(a->path, &st) != 0) {
        if (errno == ENOENT && !opts->readonly && opts->create) {
            fresh = 1;
        } else if (errno == ENOENT) {
            kv_err_set(err, "%s: no archive here (is %s a kevo run directory?)", a->path, run_dir);
            goto fail;
        } else {
            kv_err_errno(err, errno, "%s", a->path);
            goto fail;
        }
    } else {
        rc = check_lmdb_file(a->path, err);
        if (rc == KV_NOTFOUND && !opts->readonly && opts->create) {
            fresh = 1; /* killed while first creating it: nothing was stored */
            rc = 0;
        } else if (rc == KV_NOTFOUND) {
            kv_err_set(err, "%s: empty archive file", a->path);
            goto fail;
        }
    }
    if (rc == 0)
        rc = open_lmdb(a, opts, fresh, err);
    if (rc == KV_DAMAGED) {
        kv_err detail = *err;
        kv_damaged(err, a->path, run_dir, detail.msg);
    }
    /* a writer walks its archive in this process (the dedup index, the
     * per-size ranking, a resume), and LMDB trusts its pages: a quick walk in
     * a child first, where a damaged page cannot take this process down */
    if (rc == 0 && !opts->readonly && walk_first(a, run_dir, err) != 0)
        goto fail;
    /* a writer completes the per-size ranking of an archive an older kevo wrote last */
    if (rc == 0 && !opts->readonly && kv_sizes_open(a, err) != 0)
        goto fail;
    if (rc == 0) {
        *out = a;
        return 0;
    }

fail:
    kv_archive_close(a);
    return -1;
}

int kv_archive_open_file(const char *path, kv_archive **out, kv_err *err)
{
    *out = NULL;
    kv_archive *a = new_handle(1, err);
    if (!a)
        return -1;
    if (snprintf(a->path, sizeof a->path, "%s", path) >= (int)sizeof a->path) {
        kv_archive_close(a);
        return kv_err_set(err, "%s: path too long", path);
    }
    kv_archive_opts opts = {.readonly = 1};
    int rc = check_lmdb_file(path, err);
    if (rc == KV_NOTFOUND)
        rc = kv_err_set(err, "%s: empty file", path);
    if (rc == 0)
        rc = open_lmdb(a, &opts, 0, err);
    if (rc == KV_DAMAGED) {
        kv_err detail = *err;
        kv_damaged(err, path, NULL, detail.msg);
    }
    if (rc != 0) {
        kv_archive_close(a);
        return -1;
    }
    *out = a;
    return 0;
}

void kv_archive_close(kv_archive *a)
{
    if (!a)
        return;
    if (a->writer)
        kv_txn_abort(a->writer);
    /* a snapshot's copy still reading the map finishes first */
    pthread_mutex_lock(&a->map_lock);
    if (a->env)
        mdb_env_close(a->env);
    a->env = NULL;
    pthread_mutex_unlock(&a->map_lock);
    pthread_mutex_destroy(&a->map_lock);
    kv_guard_close(a);
    kv_run_lock_release(a->run_lock);
    kv_dedup_free(a->dedup);
    kv_zdict_cache_free(a->zdicts);
    free(a);
}

const char *kv_archive_path(const kv_archive *a)
{
    return a->path;
}

uint64_t kv_archive_map_bytes(const kv_archive *a)
{
    MDB_envinfo info;
    if (mdb_env_info(a->env, &info) != 0)
        return 0;
    return (uint64_t)info.me_mapsize;
}
