/* upgrade.c — kv_archive_upgrade (archive/upgrade.h): a schema-1 archive,
 * whose sources are in kevo's own LZ77 coder, copied into a new file of
 * schema 2 (zstd with a dictionary), checked, and renamed into place. The
 * copy goes through LMDB directly, record by record in key order (so every
 * put appends), without the archive's op log: nothing else may have the
 * file open, and on any failure the new file is simply removed. */
#include "archive/upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/internal.h"
#include "archive/lz1.h"
#include "archive/srccode.h"
#include "common/fsutil.h"

#define UPGRADE_SUFFIX ".upgrade"
#define PUTS_PER_TXN 10000
#define MAP_TRIES 6 /* the map doubles on each try that finds it full */

typedef struct {
    const char *old_path, *new_path;
    MDB_env *old_env, *new_env;
    MDB_txn *rtxn, *wtxn;
    MDB_dbi rdbi[KV_DB_COUNT], wdbi[KV_DB_COUNT];
    ZSTD_DDict *ddict; /* the built-in dictionary, to check each new record */
    kv_buf raw, code;  /* one source, decoded; its new record */
    unsigned puts;     /* in the current write transaction */
    kv_upgrade_info *info;
} upgrade;

static int lmdb_fail(kv_err *err, const char *path, const char *call, int rc)
{
    if (rc == MDB_MAP_FULL)
        return KV_MAP_FULL;
    return kv_err_set(err, "%s: %s: %s", path, call, mdb_strerror(rc));
}

/* An LMDB file opened alone: MDB_NOLOCK, for the caller holds the run and
 * no process has the file open. */
static int open_env(const char *path, unsigned flags, size_t map, MDB_env **out, kv_err *err)
{
    MDB_env *e;
    int rc = mdb_env_create(&e);
    if (rc != 0)
        return kv_err_set(err, "mdb_env_create: %s", mdb_strerror(rc));
    rc = mdb_env_set_maxdbs(e, KV_DB_COUNT + 4);
    if (rc == 0 && map)
        rc = mdb_env_set_mapsize(e, map);
    if (rc == 0)
        rc = mdb_env_open(e, path, flags | MDB_NOSUBDIR | MDB_NOLOCK, 0644);
    if (rc != 0) {
        mdb_env_close(e);
        return kv_err_set(err, "%s: mdb_env_open: %s", path, mdb_strerror(rc));
    }
    *out = e;
    return 0;
}

static unsigned db_flags(int db)
{
    return db == DB_LINEAGE ? MDB_DUPSORT | MDB_DUPFIXED : 0;
}

/* The schema version in the open read transaction: 0 or -1. */
static int read_schema(upgrade *u, uint32_t *version, kv_err *err)
{
    MDB_val key = {6, "schema"}, val;
    int rc = mdb_get(u->rtxn, u->rdbi[DB_META], &key, &val);
    if (rc == MDB_NOTFOUND)
        return kv_err_set(err, "%s: not a kevo archive (no schema version)", u->old_path);
    if (rc != 0)
        return lmdb_fail(err, u->old_path, "mdb_get(meta/schema)", rc);
    const uint8_t *v = val.mv_data;
    if (val.mv_size != 4)
        return kv_err_set(err, "%s: a schema version of %zu bytes", u->old_path, val.mv_size);
    *version = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
    return 0;
}

/* Opens the old file read-only and its databases. */
static int open_old(upgrade *u, kv_err *err)
{
    if (open_env(u->old_path, MDB_RDONLY, 0, &u->old_env, err) != 0)
        return -1;
    int rc = mdb_txn_begin(u->old_env, NULL, MDB_RDONLY, &u->rtxn);
    if (rc != 0)
        return lmdb_fail(err, u->old_path, "mdb_txn_begin", rc);
    for (int i = 0; i < KV_DB_REQUIRED; i++) { /* schema 1 had no sizes database */
        rc = mdb_dbi_open(u->rtxn, kv_db_names[i], db_flags(i), &u->rdbi[i]);
        if (rc == MDB_NOTFOUND)
            return kv_err_set(err, "%s: not a kevo archive (no '%s' database)", u->old_path,
                              kv_db_names[i]);
        if (rc != 0)
            return lmdb_fail(err, u->old_path, "mdb_dbi_open", rc);
    }
    return 0;
}

static int begin_write(upgrade *u, kv_err *err)
{
    int rc = mdb_txn_begin(u->new_env, NULL, 0, &u->wtxn);
    u->puts = 0;
    if (rc != 0) {
        u->wtxn = NULL;
        return lmdb_fail(err, u->new_path, "mdb_txn_begin", rc);
    }
    return 0;
}

static int commit_write(upgrade *u, kv_err *err)
{
    int rc = mdb_txn_commit(u->wtxn);
    u->wtxn = NULL;
    return rc == 0 ? 0 : lmdb_fail(err, u->new_path, "mdb_txn_commit", rc);
}

static int put(upgrade *u, int db, MDB_val *k, MDB_val *v, unsigned flags, kv_err *err)
{
    int rc = mdb_put(u->wtxn, u->wdbi[db], k, v, flags);
    if (rc != 0)
        return lmdb_fail(err, u->new_path, "mdb_put", rc);
    if (++u->puts < PUTS_PER_TXN)
        return 0;
    if ((rc = commit_write(u, err)) != 0)
        return rc;
    return begin_write(u, err);
}

/* The code record of program id, re-encoded with zstd in u->code and
 * checked: decoded again, it must be the bytes the old record held. */
static int reencode(upgrade *u, uint64_t id, const MDB_val *v, kv_err *err)
{
    kv_code old, neu;
    if (kv_code_parse(v->mv_data, v->mv_size, &old, err) != 0)
        return kv_err_prefix(err, "%s: code of program %llu", u->old_path, (unsigned long long)id);
    kv_buf_reset(&u->raw);
    if (kv_buf_reserve(&u->raw, old.raw_len + 1) != 0)
        return kv_err_set(err, "out of memory");
    if (old.codec == KV_CODEC_RAW)
        memcpy(u->raw.data, old.bytes, old.raw_len);
    else if (old.codec != KV_CODEC_LZ ||
             kv_lz_decompress(old.bytes, old.n, u->raw.data, old.raw_len) != 0)
        return kv_err_set(err, "%s: code of program %llu: corrupt compressed source", u->old_path,
                          (unsigned long long)id);
    kv_buf_reset(&u->code);
    if (kv_code_encode(&u->code, (const char *)u->raw.data, old.raw_len, err) != 0)
        return kv_err_prefix(err, "program %llu", (unsigned long long)id);
    if (kv_code_parse(u->code.data, u->code.len, &neu, err) != 0)
        return kv_err_prefix(err, "program %llu: the new code record", (unsigned long long)id);
    int same = neu.raw_len == old.raw_len;
    if (same && neu.codec == KV_CODEC_RAW) {
        same = memcmp(neu.bytes, u->raw.data, old.raw_len) == 0;
    } else if (same) {
        char *back = malloc(old.raw_len + 1);
        if (!back)
            return kv_err_set(err, "out of memory");
        same = kv_code_unzstd(&neu, u->ddict, back, err) == 0 &&
               memcmp(back, u->raw.data, old.raw_len) == 0;
        free(back);
    }
    if (!same)
        return kv_err_set(err, "program %llu: its source does not come back the same from zstd",
                          (unsigned long long)id);
    u->info->sources++;
    u->info->source_bytes += old.raw_len;
    return 0;
}

/* Copies database db record by record. 0, KV_MAP_FULL or -1. */
static int copy_db(upgrade *u, int db, kv_err *err)
{
    MDB_cursor *c;
    int rc = mdb_cursor_open(u->rtxn, u->rdbi[db], &c);
    if (rc != 0)
        return lmdb_fail(err, u->old_path, "mdb_cursor_open", rc);
    unsigned flags = db == DB_LINEAGE ? MDB_APPEND | MDB_APPENDDUP : MDB_APPEND;
    MDB_val k, v;
    static const uint8_t schema[4] = {KV_ARCHIVE_SCHEMA_VERSION & 0xff,
                                      (KV_ARCHIVE_SCHEMA_VERSION >> 8) & 0xff, 0, 0};
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        MDB_val out = v;
        if (db == DB_CODE) {
            if (k.mv_size != 8) {
                mdb_cursor_close(c);
                return kv_err_set(err, "%s: code: a key of %zu bytes", u->old_path, k.mv_size);
            }
            if (reencode(u, kv_key_get_u64(k.mv_data), &v, err) != 0) {
                mdb_cursor_close(c);
                return -1;
            }
            out.mv_data = u->code.data;
            out.mv_size = u->code.len;
        } else if (db == DB_META && k.mv_size == 6 && memcmp(k.mv_data, "schema", 6) == 0) {
            out.mv_data = (void *)schema;
            out.mv_size = sizeof schema;
        }
        int prc = put(u, db, &k, &out, flags, err);
        if (prc != 0) {
            mdb_cursor_close(c);
            return prc;
        }
        u->info->records++;
    }
    mdb_cursor_close(c);
    if (rc != MDB_NOTFOUND) {
        if (kv_lmdb_damage(rc))
            return kv_damaged(err, u->old_path, NULL, mdb_strerror(rc));
        return lmdb_fail(err, u->old_path, "mdb_cursor_get", rc);
    }
    return 0;
}

/* One try at writing the new file with a map of map bytes: 0, KV_MAP_FULL
 * (the caller removes the file and tries a larger map) or -1. */
static int write_new(upgrade *u, size_t map, kv_err *err)
{
    int rc = open_env(u->new_path, 0, map, &u->new_env, err);
    if (rc != 0)
        return rc;
    if ((rc = begin_write(u, err)) != 0)
        return rc;
    for (int i = 0; i < KV_DB_REQUIRED; i++) {
        int r = mdb_dbi_open(u->wtxn, kv_db_names[i], MDB_CREATE | db_flags(i), &u->wdbi[i]);
        if (r != 0)
            return lmdb_fail(err, u->new_path, "mdb_dbi_open", r);
    }
    u->info->records = u->info->sources = u->info->source_bytes = 0;
    for (int i = 0; i < KV_DB_REQUIRED; i++)
        if ((rc = copy_db(u, i, err)) != 0)
            return rc;
    /* the dictionary the new code records name */
    size_t dn;
    uint32_t id;
    const void *d = kv_zdict_builtin(&dn, &id);
    char key[KV_ZDICT_KEY_MAX];
    MDB_val k = {kv_zdict_key(key, id), key}, v = {dn, (void *)d};
    if ((rc = put(u, DB_META, &k, &v, MDB_NOOVERWRITE, err)) != 0)
        return rc;
    u->info->records++;
    if ((rc = commit_write(u, err)) != 0)
        return rc;
    rc = mdb_env_sync(u->new_env, 1);
    if (rc != 0)
        return kv_err_set(err, "%s: mdb_env_sync: %s", u->new_path, strerror(rc));
    return 0;
}

static void close_new(upgrade *u)
{
    if (u->wtxn)
        mdb_txn_abort(u->wtxn);
    u->wtxn = NULL;
    if (u->new_env)
        mdb_env_close(u->new_env);
    u->new_env = NULL;
}

/* Removes the new file (and a lock file LMDB may have made): 0 or -1. */
static int remove_new(const char *path, kv_err *err)
{
    char lock[PATH_MAX];
    snprintf(lock, sizeof lock, "%s-lock", path);
    if (unlink(path) != 0 && errno != ENOENT)
        return kv_err_errno(err, errno, "removing %s", path);
    if (unlink(lock) != 0 && errno != ENOENT)
        return kv_err_errno(err, errno, "removing %s", lock);
    return 0;
}

/* After a failure (err says which): removes the unfinished new file, and
 * adds to err when that fails too. Returns -1. */
static int also_remove(const char *path, kv_err *err)
{
    kv_err rerr = {{0}};
    if (remove_new(path, &rerr) != 0) {
        kv_err first = *err;
        kv_err_set(err, "%s; the unfinished %s stays: %s", first.msg, path, rerr.msg);
    }
    return -1;
}

/* Writes and checks the new file: 0 or -1 (the file is then removed). */
static int convert(upgrade *u, off_t old_size, kv_err *err)
{
    size_t dn;
    uint32_t id;
    const void *d = kv_zdict_builtin(&dn, &id);
    u->ddict = ZSTD_createDDict(d, dn);
    if (!u->ddict)
        return kv_err_set(err, "zstd: the built-in dictionary does not load");
    size_t map = (size_t)old_size * 2 + ((size_t)64 << 20);
    int rc = KV_MAP_FULL;
    for (int t = 0; t < MAP_TRIES && rc == KV_MAP_FULL; t++, map *= 2) {
        if (remove_new(u->new_path, err) != 0)
            return -1;
        rc = write_new(u, map, err);
        close_new(u);
    }
    if (rc == KV_MAP_FULL)
        rc = kv_err_set(err, "%s: the map stayed full up to %zu bytes", u->new_path, map / 2);
    if (rc == 0) {
        /* an independent check: every record of the new file decoded */
        kv_walk_info w;
        kv_err werr = {{0}};
        if (kv_archive_walk(NULL, u->new_path, 1, NULL, &w, &werr) != 0)
            rc = kv_err_set(err, "the upgraded archive does not walk: %s", werr.msg);
        else if (w.records != u->info->records || w.damaged != 0)
            rc = kv_err_set(err, "%s: %llu records copied, the walk found %llu (%llu damaged)",
                            u->new_path, (unsigned long long)u->info->records,
                            (unsigned long long)w.records, (unsigned long long)w.damaged);
    }
    struct stat st;
    if (rc == 0 && stat(u->new_path, &st) != 0)
        rc = kv_err_errno(err, errno, "stat %s", u->new_path);
    if (rc == 0)
        u->info->new_bytes = (uint64_t)st.st_size;
    if (rc != 0)
        also_remove(u->new_path, err);
    return rc;
}

/* The upgrade with the run's writer lock held. */
static int upgrade_locked(const char *run_dir, const char *archive, kv_upgrade_info *info,
                          kv_err *err)
{
    char lock[PATH_MAX], tmp[PATH_MAX], tag[64];
    if (snprintf(lock, sizeof lock, "%s-lock", archive) >= (int)sizeof lock ||
        snprintf(tmp, sizeof tmp, "%s" UPGRADE_SUFFIX, archive) >= (int)sizeof tmp)
        return kv_err_set(err, "%s: path too long", archive);
    if (kv_archive_unused(archive, "upgrading", err) != 0)
        return -1;
    /* the checks kv_archive_open makes before LMDB sees the file */
    struct stat st;
    int fd = kv_open_regular(archive, &st, err);
    if (fd < 0)
        return -1;
    char why[256];
    int rc = st.st_size == 0 ? (snprintf(why, sizeof why, "empty file"), KV_DAMAGED)
                             : kv_lmdb_read_header(fd, st.st_size, NULL, why, sizeof why);
    close(fd);
    if (rc != 0)
        return kv_damaged(err, archive, run_dir, why);
    info->old_bytes = (uint64_t)st.st_size;

    upgrade u = {.old_path = archive, .new_path = tmp, .info = info};
    rc = open_old(&u, err);
    if (rc == 0)
        rc = read_schema(&u, &info->from_version, err);
    if (rc == 0 && info->from_version == KV_ARCHIVE_SCHEMA_VERSION) {
        info->upgraded = 0; /* nothing to do */
    } else if (rc == 0 && info->from_version != 1) {
        rc = kv_err_set(err, "%s: archive schema version %u: this kevo upgrades version 1 to %u",
                        archive, info->from_version, KV_ARCHIVE_SCHEMA_VERSION);
    } else if (rc == 0) {
        rc = convert(&u, st.st_size, err);
        info->upgraded = rc == 0;
    }
    if (u.rtxn)
        mdb_txn_abort(u.rtxn);
    if (u.old_env)
        mdb_env_close(u.old_env);
    ZSTD_freeDDict(u.ddict);
    kv_buf_free(&u.raw);
    kv_buf_free(&u.code);
    if (rc != 0 || !info->upgraded)
        return rc == 0 ? 0 : -1;

    /* into place: the old file keeps a name of its own first */
    char stamp[32];
    snprintf(tag, sizeof tag, ".v%u", info->from_version);
    if (kv_file_stamp(stamp, sizeof stamp) != 0)
        rc = kv_err_set(err, "%s: no time for the name of the old archive", run_dir);
    if (rc == 0)
        rc = kv_move_aside(archive, tag, stamp, 1, info->aside, sizeof info->aside, err);
    if (rc == 0)
        rc = kv_move_aside(lock, tag, stamp, 0, info->lock_aside, sizeof info->lock_aside, err);
    if (rc == 0 && rename(tmp, archive) != 0)
        rc = kv_err_errno(err, errno, "renaming %s to %s", tmp, archive);
    if (rc != 0) {
        also_remove(tmp, err);
        return kv_err_prefix(err, "%s is unchanged%s%s", archive,
                             info->aside[0] ? ", and also kept as " : "", info->aside);
    }
    int dfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return kv_err_errno(err, e, "fsync of %s after the upgrade", run_dir);
    }
    if (close(dfd) != 0)
        return kv_err_errno(err, errno, "close %s", run_dir);
    return 0;
}

int kv_archive_upgrade(const char *run_dir, kv_upgrade_info *info, kv_err *err)
{
    memset(info, 0, sizeof *info);
    char archive[PATH_MAX];
    struct stat st;
    if (stat(run_dir, &st) != 0)
        return kv_err_errno(err, errno, "run directory %s", run_dir);
    if (!S_ISDIR(st.st_mode))
        return kv_err_set(err, "run directory %s: not a directory", run_dir);
    if (kv_path_join(archive, sizeof archive, run_dir, KV_ARCHIVE_FILE, err) != 0)
        return -1;
    kv_run_lock *lock;
    if (kv_run_lock_take(run_dir, &lock, err) != 0)
        return kv_err_prefix(err, "cannot upgrade");
    int rc = upgrade_locked(run_dir, archive, info, err);
    kv_run_lock_release(lock);
    return rc;
}
