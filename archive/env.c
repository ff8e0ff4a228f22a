/* env.c — opening and closing the archive's LMDB environment, with checks
 * made before LMDB maps the file (LMDB trusts its file: a truncated one would
 * fault on access, a foreign one would be misread). */
#include "archive/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kevo/fsutil.h"

const char *const kv_db_names[KV_DB_COUNT] = {
    [DB_PROGRAMS] = "programs", [DB_CODE] = "code",         [DB_RANKING] = "ranking",
    [DB_ELITES] = "elites",     [DB_ATTEMPTS] = "attempts", [DB_LINEAGE] = "lineage",
    [DB_META] = "meta",
};

#define DEFAULT_MAP_BYTES ((size_t)256 << 20)

/* LMDB's on-disk meta page (lmdb 0.9, 64-bit): a 16-byte page header, then
 * magic u32, version u32, address ptr, mapsize, two 48-byte db records (the
 * first's md_pad holds the page size), last_pg, txnid. */
#define LMDB_MAGIC 0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
#define META_MAGIC_OFF 16
#define META_VERSION_OFF 20
#define META_PSIZE_OFF 40
#define META_LAST_PG_OFF 136
#define META_TXNID_OFF 144

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int read_at(int fd, void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* Checks that path holds a whole LMDB file. Returns 0, KV_NOTFOUND for an
 * empty file, or -1 with a message. */
static int check_lmdb_file(const char *path, kv_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kv_err_errno(err, errno, "%s: open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "%s: stat", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kv_err_set(err, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return KV_NOTFOUND;
    }
    uint8_t page0[160], page1[160];
    if (st.st_size < (off_t)sizeof page0 || read_at(fd, page0, sizeof page0, 0) != 0) {
        close(fd);
        return kv_err_set(err, "%s: not an LMDB archive (only %lld bytes)", path,
                          (long long)st.st_size);
    }
    if (rd32(page0 + META_MAGIC_OFF) != LMDB_MAGIC) {
        close(fd);
        return kv_err_set(err, "%s: not an LMDB archive (bad magic number)", path);
    }
    if (rd32(page0 + META_VERSION_OFF) != LMDB_DATA_VERSION) {
        close(fd);
        return kv_err_set(err, "%s: LMDB data format %u, this build reads %u", path,
                          rd32(page0 + META_VERSION_OFF), LMDB_DATA_VERSION);
    }
    uint32_t psize = rd32(page0 + META_PSIZE_OFF);
    if (psize < 512 || psize > 65536 || (psize & (psize - 1)) != 0) {
        close(fd);
        return kv_err_set(err, "%s: corrupt LMDB header (page size %u)", path, psize);
    }
    if (st.st_size < 2 * (off_t)psize || read_at(fd, page1, sizeof page1, psize) != 0) {
        close(fd);
        return kv_err_set(err, "%s: truncated archive (%lld bytes, less than its two header pages)",
                          path, (long long)st.st_size);
    }
    close(fd);
    /* The live meta page is the one with the larger transaction id, unless
     * its magic is bad (a torn header write): then the other one. */
    const uint8_t *live = page0;
    if (rd32(page1 + META_MAGIC_OFF) == LMDB_MAGIC &&
        rd64(page1 + META_TXNID_OFF) > rd64(page0 + META_TXNID_OFF))
        live = page1;
    uint64_t last_pg = rd64(live + META_LAST_PG_OFF);
    uint64_t need = (last_pg + 1) * (uint64_t)psize;
    if ((uint64_t)st.st_size < need)
        return kv_err_set(err,
                          "%s: truncated archive (%lld bytes; its header says %llu pages of %u bytes)",
                          path, (long long)st.st_size, (unsigned long long)(last_pg + 1), psize);
    return 0;
}

static int lmdb_fail(kv_archive *a, const char *call, int rc, kv_err *err)
{
    return kv_err_set(err, "%s: %s: %s", a->path, call, mdb_strerror(rc));
}

/* Opens every named database; creates them when the archive is writable. */
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
        if (rc == MDB_NOTFOUND) {
            mdb_txn_abort(txn);
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
        uint8_t v[4] = {KV_ARCHIVE_SCHEMA_VERSION & 0xff, (KV_ARCHIVE_SCHEMA_VERSION >> 8) & 0xff, 0, 0};
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
            return kv_err_set(err, "%s: archive schema version %u; this kevo reads version %u",
                              a->path, version, KV_ARCHIVE_SCHEMA_VERSION);
        }
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0)
        return lmdb_fail(a, "mdb_txn_commit", rc, err);
    return 0;
}

int kv_archive_open(const char *run_dir, const kv_archive_opts *opts, kv_archive **out,
                    kv_err *err)
{
    kv_archive_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    *out = NULL;
    kv_archive *a = calloc(1, sizeof *a);
    if (!a)
        return kv_err_set(err, "out of memory");
    a->readonly = opts->readonly;
    if (snprintf(a->dir, sizeof a->dir, "%s", run_dir) >= (int)sizeof a->dir ||
        kv_path_join(a->path, sizeof a->path, run_dir, KV_ARCHIVE_FILE, err) != 0) {
        free(a);
        return kv_err_set(err, "%s: path too long", run_dir);
    }

    struct stat st;
    int fresh = 0;
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
        int rc = check_lmdb_file(a->path, err);
        if (rc == KV_NOTFOUND && !opts->readonly && opts->create) {
            fresh = 1; /* killed while first creating it: nothing was stored */
        } else if (rc == KV_NOTFOUND) {
            kv_err_set(err, "%s: empty archive file", a->path);
            goto fail;
        } else if (rc != 0) {
            goto fail;
        }
    }

    unsigned flags = MDB_NOSUBDIR | MDB_NOTLS;
    if (opts->readonly) {
        flags |= MDB_RDONLY;
        /* The lock file exists once a writer has opened the archive. Without
         * one no writer is active, and a reader must not create files. */
        char lock[PATH_MAX];
        if (snprintf(lock, sizeof lock, "%s-lock", a->path) >= (int)sizeof lock) {
            kv_err_set(err, "%s: path too long", a->path);
            goto fail;
        }
        if (access(lock, F_OK) != 0)
            flags |= MDB_NOLOCK;
    }
    int rc = mdb_env_create(&a->env);
    if (rc != 0) {
        a->env = NULL;
        kv_err_set(err, "mdb_env_create: %s", mdb_strerror(rc));
        goto fail;
    }
    rc = mdb_env_set_maxdbs(a->env, KV_DB_COUNT + 4);
    if (rc == 0 && !opts->readonly)
        rc = mdb_env_set_mapsize(a->env, opts->initial_map_bytes ? opts->initial_map_bytes
                                                                 : DEFAULT_MAP_BYTES);
    if (rc != 0) {
        lmdb_fail(a, "mdb_env_set", rc, err);
        goto fail;
    }
    rc = mdb_env_open(a->env, a->path, flags, 0644);
    if (rc != 0) {
        if ((rc == EACCES || rc == EPERM) && opts->readonly)
            kv_err_set(err, "%s: cannot open for reading: %s (readers need write access to "
                       "its lock file %s-lock, where LMDB registers them)", a->path, strerror(rc),
                       a->path);
        else if (rc == EACCES || rc == EROFS || rc == EPERM)
            kv_err_set(err, "%s: cannot open for writing (read-only directory?): %s", a->path,
                       strerror(rc));
        else
            lmdb_fail(a, "mdb_env_open", rc, err);
        goto fail;
    }
    if (!opts->readonly) {
        int dead = 0;
        rc = mdb_reader_check(a->env, &dead); /* clear slots of killed readers */
        if (rc != 0) {
            lmdb_fail(a, "mdb_reader_check", rc, err);
            goto fail;
        }
    }
    if (!opts->readonly && opts->create && !fresh) {
        MDB_envinfo info;
        rc = mdb_env_info(a->env, &info);
        if (rc != 0) {
            lmdb_fail(a, "mdb_env_info", rc, err);
            goto fail;
        }
        fresh = info.me_last_txnid == 0; /* killed before its first commit: nothing was stored */
    }
    if (open_databases(a, fresh, err) != 0)
        goto fail;
    *out = a;
    return 0;

fail:
    kv_archive_close(a);
    return -1;
}

void kv_archive_close(kv_archive *a)
{
    if (!a)
        return;
    if (a->writer)
        kv_txn_abort(a->writer);
    if (a->env)
        mdb_env_close(a->env);
    kv_dedup_free(a->dedup);
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
