/* snapshot.c — hot snapshots (snapshot.h): LMDB's compacting copy of the
 * writer's environment into <run_dir>/snapshots, verified before it gets its
 * name, the oldest removed beyond the number to keep; and finding the newest
 * one that verifies. */
#define _GNU_SOURCE /* timegm */
#include "archive/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fsutil.h"
#include "archive/snapshot.h"

#define NAME_PREFIX "archive-"
#define NAME_SUFFIX ".mdb"
#define STAMP_LEN 16 /* 20261126T104500Z */
#define NAME_LEN (sizeof NAME_PREFIX - 1 + STAMP_LEN + sizeof NAME_SUFFIX - 1)

/* The time of a snapshot's name ("archive-20261126T104500Z.mdb"), or -1 when
 * name is not one. */
static int64_t name_time(const char *name)
{
    if (strlen(name) != NAME_LEN || strncmp(name, NAME_PREFIX, sizeof NAME_PREFIX - 1) != 0 ||
        strcmp(name + NAME_LEN - (sizeof NAME_SUFFIX - 1), NAME_SUFFIX) != 0)
        return -1;
    const char *s = name + sizeof NAME_PREFIX - 1;
    for (int i = 0; i < STAMP_LEN; i++)
        if (i == 8 ? s[i] != 'T' : i == 15 ? s[i] != 'Z' : (s[i] < '0' || s[i] > '9'))
            return -1;
    struct tm tm = {0};
    int v[6], offs[6] = {0, 4, 6, 9, 11, 13}, lens[6] = {4, 2, 2, 2, 2, 2};
    for (int i = 0; i < 6; i++) {
        v[i] = 0;
        for (int k = 0; k < lens[i]; k++)
            v[i] = v[i] * 10 + (s[offs[i] + k] - '0');
    }
    tm.tm_year = v[0] - 1900;
    tm.tm_mon = v[1] - 1;
    tm.tm_mday = v[2];
    tm.tm_hour = v[3];
    tm.tm_min = v[4];
    tm.tm_sec = v[5];
    time_t t = timegm(&tm);
    /* nanoseconds in an int64_t end in 2262: a name past that (or before
     * 1970) is not one kevo wrote */
    if (t < 0 || (int64_t)t > INT64_MAX / 1000000000)
        return -1;
    return (int64_t)t * 1000000000;
}

static int snapshot_dir(const char *run_dir, char *out, size_t cap, kv_err *err)
{
    return kv_path_join(out, cap, run_dir, KV_SNAPSHOT_DIR, err);
}

/* The snapshot names in dir, newest first (*names malloc'ed, each entry
 * too): 0, KV_NOTFOUND when dir does not exist, or -1. Temporary files left
 * by a killed snapshot go to *stale (may be NULL) the same way. */
typedef struct {
    char **v;
    size_t n, cap;
} name_list;

static void names_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int names_add(name_list *l, const char *name)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(name)))
        return -1;
    l->n++;
    return 0;
}

static int newest_first(const void *a, const void *b)
{
    return strcmp(*(char *const *)b, *(char *const *)a);
}

static int list_names(const char *dir, name_list *names, name_list *stale, kv_err *err)
{
    memset(names, 0, sizeof *names);
    if (stale)
        memset(stale, 0, sizeof *stale);
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? KV_NOTFOUND : kv_err_errno(err, errno, "opendir %s", dir);
    struct dirent *de;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (name_time(de->d_name) >= 0)
            rc = names_add(names, de->d_name);
        else if (stale && strncmp(de->d_name, NAME_PREFIX, sizeof NAME_PREFIX - 1) == 0 &&
                 strstr(de->d_name, NAME_SUFFIX ".tmp."))
            rc = names_add(stale, de->d_name);
        if (rc != 0)
            kv_err_set(err, "out of memory listing %s", dir);
        errno = 0;
    }
    if (rc == 0 && errno != 0)
        rc = kv_err_errno(err, errno, "readdir %s", dir);
    closedir(d);
    if (rc != 0) {
        names_free(names);
        if (stale)
            names_free(stale);
        return -1;
    }
    if (names->n > 1) /* qsort's array may not be NULL, which an empty list's is */
        qsort(names->v, names->n, sizeof *names->v, newest_first);
    return 0;
}

static int count_row(const MDB_val *key, const MDB_val *val, void *ctx, kv_err *err)
{
    (void)key;
    (void)val;
    (void)err;
    (*(uint64_t *)ctx)++;
    return 0;
}

/* kv_snapshot_verify; walk: in a child first. A copy this process has just
 * made is not walked: it is LMDB's own compacting copy of a sound archive,
 * and the snapshot thread must not fork (a child of a threaded process can
 * deadlock on a lock another thread held at the fork). */
static int verify(const char *path, int walk, kv_snapshot_info *info, kv_err *err)
{
    memset(info, 0, sizeof *info);
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_counters c;
    uint64_t rows = 0;
    /* a damaged page can crash or abort the reader of the file: walk it in a
     * child first (archive.h, kv_archive_walk), read it here only when sound */
    kv_walk_info walked;
    if (walk && kv_archive_walk(NULL, path, 0, NULL, &walked, err) != 0)
        return -1;
    if (kv_archive_open_file(path, &a, err) != 0)
        return -1;
    int rc = kv_read_begin(a, &t, err);
    if (rc == 0)
        rc = kv_get_counters(t, &c, err);
    if (rc == 0)
        rc = kv_db_walk(t, DB_PROGRAMS, NULL, 0, NULL, 0, count_row, &rows, err);
    if (rc == 0 && rows != c.programs)
        rc = kv_err_set(err, "%s: its counters say %llu programs, its programs database holds %llu",
                        path, (unsigned long long)c.programs, (unsigned long long)rows);
    kv_txn_abort(t);
    kv_archive_close(a);
    if (rc != 0)
        return -1;
    struct stat st;
    if (stat(path, &st) != 0)
        return kv_err_errno(err, errno, "stat %s", path);
    snprintf(info->path, sizeof info->path, "%s", path);
    const char *slash = strrchr(path, '/');
    int64_t taken = name_time(slash ? slash + 1 : path);
    info->taken_ns = taken > 0 ? taken : 0;
    info->programs = rows;
    info->bytes = (uint64_t)st.st_size;
    return 0;
}

int kv_snapshot_verify(const char *path, kv_snapshot_info *info, kv_err *err)
{
    return verify(path, 1, info, err);
}

int kv_snapshot_newest(const char *run_dir, kv_snapshot_info *info, kv_err *err)
{
    char dir[PATH_MAX], path[PATH_MAX];
    name_list names;
    if (snapshot_dir(run_dir, dir, sizeof dir, err) != 0)
        return -1;
    int rc = list_names(dir, &names, NULL, err);
    if (rc < 0)
        return -1;
    if (rc == KV_NOTFOUND || names.n == 0) {
        names_free(&names);
        kv_err_set(err, "no snapshot in %s", dir);
        return KV_NOTFOUND;
    }
    kv_err first = {{0}};
    for (size_t i = 0; i < names.n; i++) {
        kv_err e = {{0}};
        if (kv_path_join(path, sizeof path, dir, names.v[i], &e) == 0 &&
            kv_snapshot_verify(path, info, &e) == 0) {
            names_free(&names);
            return 0;
        }
        if (i == 0)
            first = e;
    }
    kv_err_set(err, "none of the %zu snapshots in %s opens; the newest: %s", names.n, dir,
               first.msg);
    names_free(&names);
    return KV_NOTFOUND;
}

/* Removes all but the newest keep snapshots in dir, and stale temporary
 * files (one writer per run: no other snapshot is being written). */
static int rotate(const char *dir, int keep, kv_err *err)
{
    name_list names, stale;
    char path[PATH_MAX];
    if (list_names(dir, &names, &stale, err) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < stale.n; i++)
        if (kv_path_join(path, sizeof path, dir, stale.v[i], err) == 0)
            (void)unlink(path); /* best effort: a leftover only takes space */
    for (size_t i = (size_t)(keep > 0 ? keep : 1); i < names.n && rc == 0; i++) {
        if (kv_path_join(path, sizeof path, dir, names.v[i], err) != 0)
            rc = -1;
        else if (unlink(path) != 0 && errno != ENOENT)
            rc = kv_err_errno(err, errno, "removing the old snapshot %s", path);
    }
    names_free(&names);
    names_free(&stale);
    return rc;
}

int kv_snapshot_run(kv_archive *a, int keep, int64_t now_ns, kv_snapshot_info *info, kv_err *err)
{
    int64_t t0 = kv_monotonic_ns();
    char dir[PATH_MAX], path[PATH_MAX], name[NAME_LEN + 1];
    time_t secs = (time_t)(now_ns / 1000000000);
    struct tm tm;
    if (!gmtime_r(&secs, &tm) ||
        strftime(name, sizeof name, NAME_PREFIX "%Y%m%dT%H%M%SZ" NAME_SUFFIX, &tm) != NAME_LEN)
        return kv_err_set(err, "%s: cannot name a snapshot for time %lld", a->dir, (long long)secs);
    if (snapshot_dir(a->dir, dir, sizeof dir, err) != 0 || kv_mkdir_p(dir, 0755, err) != 0 ||
        kv_path_join(path, sizeof path, dir, name, err) != 0)
        return -1;
    kv_atomic_file af;
    if (kv_atomic_open(&af, path, err) != 0)
        return -1;
    pthread_mutex_lock(&a->map_lock);
    int rc = mdb_env_copyfd2(a->env, fileno(af.f), MDB_CP_COMPACT);
    pthread_mutex_unlock(&a->map_lock);
    if (rc != 0) {
        kv_err_set(err, "%s: copying it to %s (mdb_env_copyfd2): %s", a->path, af.tmp,
                   mdb_strerror(rc));
        kv_atomic_abandon(&af);
        return -1;
    }
    /* verified before it takes its name: a name always holds a good copy */
    kv_snapshot_info got;
    if (verify(af.tmp, 0, &got, err) != 0) {
        kv_err_prefix(err, "the snapshot of %s does not open", a->path);
        kv_atomic_abandon(&af);
        return -1;
    }
    if (kv_atomic_commit(&af, err) != 0)
        return -1;
    snprintf(got.path, sizeof got.path, "%s", path);
    got.taken_ns = (int64_t)secs * 1000000000;
    rc = rotate(dir, keep, err);
    got.seconds = (double)(kv_monotonic_ns() - t0) * 1e-9;
    if (info)
        *info = got;
    return rc;
}

/* Why no snapshot may be taken of a now, or NULL. */
const char *kv_snapshot_refusal(const kv_archive *a)
{
    if (a->readonly || a->guard_fd < 0)
        return "opened read-only";
    if (a->changed[0])
        return "its file was changed by another process; the snapshots there are kept";
    if (a->snapshotting)
        return "a snapshot is being taken";
    return NULL;
}

int kv_snapshot_take(kv_archive *a, int keep, kv_snapshot_info *info, kv_err *err)
{
    const char *no = kv_snapshot_refusal(a);
    if (no)
        return kv_err_set(err, "%s: no snapshot taken: %s", a->path, no);
    return kv_snapshot_run(a, keep, kv_wall_ns(), info, err);
}
