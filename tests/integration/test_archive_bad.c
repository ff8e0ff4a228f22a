/* test_archive_bad.c — bad archives are refused with a clear error and left
 * untouched: a missing run directory, a run "directory" that is a file, a
 * directory without an archive, files that are not LMDB, an empty file,
 * truncated copies of a real archive, a schema version from another kevo, an
 * LMDB file without kevo's databases, a read-only directory for the writer,
 * and a corrupt record inside a sound LMDB file.
 *
 * Every refused open must return -1 with a message naming the path and what
 * is wrong. Readers must not change anything: the run directory's listing and
 * the SHA-256 of every file in it are compared before and after. A refused
 * writer must leave archive.mdb byte-identical. Where the kevo command is
 * built ($KEVO_BIN), `kevo archive --run DIR list` must fail the same way
 * (exit status 1, the path on stderr). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/sha256.h"
#include "test.h"
#include "test_util.h"

static char root[256];  /* the test's own directory; each case uses a subdirectory */
static int cli_ok = -1; /* -1 unknown, 0 no CLI, 1 `kevo archive` works */
static const char *kevo_bin;

/* ---- small file helpers ---------------------------------------------------- */

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void case_dir(char *out, size_t cap, const char *name)
{
    if ((size_t)snprintf(out, cap, "%s/%s", root, name) >= cap) {
        fprintf(stderr, "case_dir: path too long\n");
        exit(2);
    }
}

static void archive_path(char *out, size_t cap, const char *dir)
{
    if ((size_t)snprintf(out, cap, "%s/%s", dir, KV_ARCHIVE_FILE) >= cap) {
        fprintf(stderr, "archive_path: path too long\n");
        exit(2);
    }
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0)
        die(path);
}

static void write_all(int fd, const void *buf, size_t n, const char *what)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die(what);
        p += w;
        n -= (size_t)w;
    }
}

static void write_file(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        die(path);
    write_all(fd, data, n, path);
    if (close(fd) != 0)
        die(path);
}

/* Copies the first len bytes of src to dst (all of it when len is (off_t)-1). */
static void copy_file(const char *src, const char *dst, off_t len)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        die(src);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        die(dst);
    char buf[65536];
    off_t done = 0;
    for (;;) {
        size_t want = sizeof buf;
        if (len >= 0 && (off_t)want > len - done)
            want = (size_t)(len - done);
        if (want == 0)
            break;
        ssize_t r = read(in, buf, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die(src);
        if (r == 0)
            break;
        write_all(out, buf, (size_t)r, dst);
        done += r;
    }
    if (close(in) != 0 || close(out) != 0)
        die(dst);
}

static off_t file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        die(path);
    return st.st_size;
}

static int hash_file(const char *path, uint8_t out[KV_SHA256_LEN])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    char buf[65536];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            kv_sha256_discard(&h);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        kv_sha256_update(&h, buf, (size_t)r);
    }
    close(fd);
    return kv_sha256_final(&h, out);
}

/* ---- snapshots of a run directory ---------------------------------------- */

#define SNAP_MAX 16

typedef struct {
    char name[128];
    mode_t mode;
    off_t size;
    struct timespec mtime;
    int hashed;
    uint8_t sha[KV_SHA256_LEN];
} snap_entry;

typedef struct {
    int exists;
    mode_t mode;
    int n;
    snap_entry e[SNAP_MAX];
} snap;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const snap_entry *)a)->name, ((const snap_entry *)b)->name);
}

static void snap_one(snap_entry *e, const char *path, const char *name)
{
    struct stat st;
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    if (lstat(path, &st) != 0)
        die(path);
    e->mode = st.st_mode;
    e->size = st.st_size;
    e->mtime = st.st_mtim;
    if (S_ISREG(st.st_mode)) {
        if (hash_file(path, e->sha) != 0)
            die(path);
        e->hashed = 1;
    }
}

/* What a path is: missing, a file (one entry named ""), or a directory (its
 * entries, sorted). */
static void take_snap(const char *path, snap *s)
{
    struct stat st;
    memset(s, 0, sizeof *s);
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            die(path);
        return;
    }
    s->exists = 1;
    s->mode = st.st_mode;
    if (!S_ISDIR(st.st_mode)) {
        snap_one(&s->e[s->n++], path, "");
        return;
    }
    DIR *d = opendir(path);
    if (!d)
        die(path);
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (s->n == SNAP_MAX) {
            fprintf(stderr, "take_snap: too many files in %s\n", path);
            exit(2);
        }
        char p[1024];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) >= sizeof p) {
            fprintf(stderr, "take_snap: path too long\n");
            exit(2);
        }
        snap_one(&s->e[s->n++], p, de->d_name);
    }
    if (errno != 0)
        die("readdir");
    if (closedir(d) != 0)
        die("closedir");
    qsort(s->e, (size_t)s->n, sizeof s->e[0], cmp_entry);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* 1 when b is a as it was. When lock_may_change, a lock file (LMDB's reader
 * table) must still be there but its bytes may differ: a reader with locking
 * takes a reader slot. Otherwise explains the difference in why. */
static int same_snap(const snap *a, const snap *b, int lock_may_change, char *why, size_t cap)
{
    if (a->exists != b->exists) {
        snprintf(why, cap, "%s", a->exists ? "path disappeared" : "path was created");
        return 0;
    }
    if (a->mode != b->mode) {
        snprintf(why, cap, "mode changed");
        return 0;
    }
    if (a->n != b->n) {
        snprintf(why, cap, "%d entries before, %d after%s%s", a->n, b->n,
                 b->n > a->n ? ", new: " : "", b->n > a->n ? b->e[b->n - 1].name : "");
        return 0;
    }
    for (int i = 0; i < a->n; i++) {
        const snap_entry *x = &a->e[i], *y = &b->e[i];
        if (strcmp(x->name, y->name) != 0) {
            snprintf(why, cap, "entry %s became %s", x->name, y->name);
            return 0;
        }
        if (lock_may_change && ends_with(x->name, "-lock"))
            continue;
        if (x->mode != y->mode || x->size != y->size || x->hashed != y->hashed ||
            (x->hashed && memcmp(x->sha, y->sha, KV_SHA256_LEN) != 0)) {
            snprintf(why, cap, "%s: contents changed (%lld -> %lld bytes)", x->name,
                     (long long)x->size, (long long)y->size);
            return 0;
        }
        if (x->mtime.tv_sec != y->mtime.tv_sec || x->mtime.tv_nsec != y->mtime.tv_nsec) {
            snprintf(why, cap, "%s: modification time changed", x->name);
            return 0;
        }
    }
    return 1;
}

/* ---- the kevo command ---------------------------------------------------- */

/* Runs argv (argv[0] a path) with stdout discarded; stderr into errbuf.
 * Returns the wait status, or -1 if it could not be run. */
static int run_cmd(char *const argv[], char *errbuf, size_t cap)
{
    int p[2];
    if (pipe(p) != 0)
        die("pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(p[1], 2) < 0)
            _exit(126);
        if (close(p[0]) != 0 || close(p[1]) != 0 || (null > 2 && close(null) != 0))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (close(p[1]) != 0)
        die("close");
    size_t n = 0;
    for (;;) {
        char tmp[4096];
        ssize_t r = read(p[0], tmp, sizeof tmp);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("read");
        if (r == 0)
            break;
        size_t take = (size_t)r;
        if (n + take >= cap)
            take = cap - 1 - n;
        memcpy(errbuf + n, tmp, take);
        n += take;
    }
    errbuf[n] = 0;
    if (close(p[0]) != 0)
        die("close");
    int status;
    while (waitpid(pid, &status, 0) != pid)
        if (errno != EINTR)
            die("waitpid");
    return status;
}

static int have_cli(void)
{
    if (cli_ok >= 0)
        return cli_ok;
    cli_ok = 0;
    kevo_bin = getenv("KEVO_BIN");
    if (!kevo_bin || !*kevo_bin) {
        printf("note: KEVO_BIN is not set; skipping the CLI checks\n");
        return 0;
    }
    if (access(kevo_bin, X_OK) != 0) {
        printf("note: %s is not built; skipping the CLI checks\n", kevo_bin);
        return 0;
    }
    char *argv[] = {(char *)kevo_bin, "archive", "--help", NULL};
    char err[4096];
    int st = run_cmd(argv, err, sizeof err);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("note: `kevo archive --help` fails; skipping the CLI checks\n");
        return 0;
    }
    cli_ok = 1;
    return 1;
}

/* `kevo archive --run DIR <sub...>` must exit 1 naming dir on stderr and
 * leave the run directory as it was. */
static void cli_expect_fail(const char *what, const char *dir, char *const sub[])
{
    if (!have_cli())
        return;
    char *argv[16] = {(char *)kevo_bin, "archive", "--run", (char *)dir};
    int n = 4;
    for (int i = 0; sub[i] && n < 15; i++)
        argv[n++] = sub[i];
    argv[n] = NULL;
    snap before, after;
    take_snap(dir, &before);
    char err[8192];
    int st = run_cmd(argv, err, sizeof err);
    take_snap(dir, &after);
    KV_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: kevo archive %s: status %d, stderr: %s",
              what, sub[0], WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st), err);
    KV_CHECKF(strstr(err, dir) != NULL, "%s: kevo archive %s: stderr does not name %s: %s", what,
              sub[0], dir, err);
    char why[256];
    KV_CHECKF(same_snap(&before, &after, 1, why, sizeof why), "%s: kevo archive %s changed %s: %s",
              what, sub[0], dir, why);
}

static void cli_list_fails(const char *what, const char *dir)
{
    char *sub[] = {"list", NULL};
    cli_expect_fail(what, dir, sub);
}

/* ---- expectations -------------------------------------------------------- */

static int contains_any(const char *msg, const char *a, const char *b)
{
    return strstr(msg, a) != NULL || (b && strstr(msg, b) != NULL);
}

/* A reader must be refused with a message naming dir and containing want
 * (or alt), and leave everything as it was (a lock file's reader table
 * excepted when lock_may_change). */
static void reader_refused(const char *what, const char *dir, const char *want, const char *alt,
                           int lock_may_change)
{
    snap before, after;
    take_snap(dir, &before);
    kv_archive_opts o = {.readonly = 1};
    kv_archive *a = (kv_archive *)1;
    kv_err err;
    memset(&err, 0, sizeof err);
    int rc = kv_archive_open(dir, &o, &a, &err);
    KV_CHECKF(rc == -1 && a == NULL, "%s: reader open returned %d", what, rc);
    if (rc == 0)
        kv_archive_close(a);
    KV_CHECKF(strstr(err.msg, dir) != NULL, "%s: reader message does not name %s: %s", what, dir,
              err.msg);
    KV_CHECKF(contains_any(err.msg, want, alt), "%s: reader message lacks \"%s\": %s", what, want,
              err.msg);
    take_snap(dir, &after);
    char why[256];
    KV_CHECKF(same_snap(&before, &after, lock_may_change, why, sizeof why),
              "%s: the reader changed %s: %s", what, dir, why);
    printf("  %-28s reader: %s\n", what, err.msg);
}

/* A writer must be refused the same way; archive.mdb (if any) must stay
 * byte-identical and a missing path must stay missing. */
static void writer_refused(const char *what, const char *dir, int create, const char *want,
                           const char *alt)
{
    char path[512];
    archive_path(path, sizeof path, dir);
    snap dir_before, dir_after;
    take_snap(dir, &dir_before);
    uint8_t h0[KV_SHA256_LEN], h1[KV_SHA256_LEN];
    struct stat st0, st1;
    int existed = lstat(path, &st0) == 0;
    int had = existed && S_ISREG(st0.st_mode) && hash_file(path, h0) == 0;
    kv_archive_opts o = {.create = create, .initial_map_bytes = 1 << 20};
    kv_archive *a = (kv_archive *)1;
    kv_err err;
    memset(&err, 0, sizeof err);
    int rc = kv_archive_open(dir, &o, &a, &err);
    KV_CHECKF(rc == -1 && a == NULL, "%s: writer (create=%d) open returned %d", what, create, rc);
    if (rc == 0)
        kv_archive_close(a);
    KV_CHECKF(strstr(err.msg, dir) != NULL, "%s: writer message does not name %s: %s", what, dir,
              err.msg);
    KV_CHECKF(contains_any(err.msg, want, alt), "%s: writer message lacks \"%s\": %s", what, want,
              err.msg);
    take_snap(dir, &dir_after);
    KV_CHECKF(dir_before.exists == dir_after.exists, "%s: the writer %s %s", what,
              dir_before.exists ? "removed" : "created", dir);
    if (!dir_before.exists || !S_ISDIR(dir_before.mode)) {
        char why[256];
        KV_CHECKF(same_snap(&dir_before, &dir_after, 0, why, sizeof why),
                  "%s: the writer changed %s: %s", what, dir, why);
    }
    if (had) {
        KV_CHECKF(hash_file(path, h1) == 0 && memcmp(h0, h1, sizeof h0) == 0,
                  "%s: the writer changed %s", what, path);
    } else if (existed) {
        KV_CHECKF(lstat(path, &st1) == 0 && st1.st_mode == st0.st_mode, "%s: the writer changed %s",
                  what, path);
    } else if (dir_before.exists && S_ISDIR(dir_before.mode)) {
        KV_CHECKF(access(path, F_OK) != 0, "%s: the writer created %s", what, path);
    }
    printf("  %-28s writer: %s\n", what, err.msg);
}

/* ---- building archives ---------------------------------------------------- */

#define N_PROGRAMS 300

static void src_for(char *buf, size_t cap, uint64_t k)
{
    uint64_t s = k + 100;
    size_t len = 1024 + (size_t)(kv_test_rand(&s) % (8192 - 1024));
    kv_test_random_source(buf, cap, k + 1, len);
}

/* A real archive: n programs (1-8 KiB sources, parents, results with speedup
 * growing with the id, so the last is the best), an attempt each, elites,
 * state and config. */
static void make_archive(const char *dir, int n)
{
    kv_archive_opts o = {.create = 1, .initial_map_bytes = 1 << 20};
    kv_archive *a;
    kv_err err;
    memset(&err, 0, sizeof err);
    if (kv_archive_open(dir, &o, &a, &err) != 0) {
        fprintf(stderr, "make_archive: %s\n", err.msg);
        exit(2);
    }
    char *src = malloc(8192);
    if (!src)
        die("malloc");
    kv_txn *t = NULL;
    for (int k = 0; k < n; k++) {
        if (k % 50 == 0 && kv_write_begin(a, &t, &err) != 0)
            goto fail;
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "%s", k % 3 ? "allreduce" : "allgather");
        snprintf(p.op, sizeof p.op, "template");
        snprintf(p.model, sizeof p.model, "pattern_%d", k % 5);
        p.island = k % 4;
        p.created_ns = 1000 + k;
        if (k > 0) {
            p.n_parents = 1;
            p.parents[0] = (uint64_t)(k / 2 + 1);
        }
        src_for(src, 8192, (uint64_t)k);
        uint64_t id;
        int existed;
        if (kv_add_program(t, &p, src, strlen(src), &id, &existed, &err) != 0)
            goto fail;
        p.id = id;
        p.verdict = KV_VERDICT_OK;
        p.speedup = 1.0 + k * 0.01;
        p.n_sizes = 1;
        snprintf(p.sizes[0].name, sizeof p.sizes[0].name, "1MiB");
        p.sizes[0].ref_us = 10;
        p.sizes[0].cand_us = 10 / p.speedup;
        p.sizes[0].ok = 1;
        snprintf(p.cell, sizeof p.cell, "%s", k % 2 ? "sm/fused" : "tma/unfused");
        p.evidence = "{\"sass\":[\"LDG.E\"]}";
        if (kv_set_result(t, &p, &err) != 0)
            goto fail;
        kv_attempt at;
        memset(&at, 0, sizeof at);
        snprintf(at.problem, sizeof at.problem, "%s", p.problem);
        at.stage = KV_STAGE_FULL;
        at.verdict = KV_VERDICT_OK;
        at.program_id = id;
        at.speedup = p.speedup;
        if (kv_add_attempt(t, &at, NULL, &err) != 0)
            goto fail;
        kv_elite e;
        memset(&e, 0, sizeof e);
        snprintf(e.problem, sizeof e.problem, "%s", p.problem);
        e.island = p.island;
        snprintf(e.cell, sizeof e.cell, "%s", p.cell);
        e.program_id = id;
        e.fitness = p.speedup;
        if (kv_offer_elite(t, &e, NULL, NULL, &err) != 0)
            goto fail;
        if (k % 50 == 49 || k == n - 1) {
            kv_run_state s = {.rng = {1, 2, 3, 4}, .evaluations = (uint64_t)k + 1};
            if (kv_put_state(t, &s, &err) != 0 ||
                (k < 50 && kv_put_config(t, "{\"world\":8}", &err) != 0))
                goto fail;
            kv_txn *c = t;
            t = NULL;
            if (kv_txn_commit(c, &err) != 0)
                goto fail;
        }
    }
    free(src);
    kv_archive_close(a);
    return;
fail:
    fprintf(stderr, "make_archive: %s\n", err.msg);
    exit(2);
}

static void remove_lock(const char *dir)
{
    char lock[512];
    if ((size_t)snprintf(lock, sizeof lock, "%s/%s-lock", dir, KV_ARCHIVE_FILE) >= sizeof lock)
        die("lock path");
    if (unlink(lock) != 0 && errno != ENOENT)
        die(lock);
}

static void lmdb_die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s\n", what, mdb_strerror(rc));
    exit(2);
}

/* Puts key -> val into the named database (NULL: the main one) of the LMDB
 * file at path with raw LMDB calls; creates the file and database when
 * create is set. */
static void raw_put(const char *path, const char *db, int create, const void *key, size_t klen,
                    const void *val, size_t vlen)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    int rc = mdb_env_create(&env);
    if (rc != 0)
        lmdb_die("mdb_env_create", rc);
    if ((rc = mdb_env_set_maxdbs(env, 16)) != 0)
        lmdb_die("mdb_env_set_maxdbs", rc);
    if ((rc = mdb_env_open(env, path, MDB_NOSUBDIR, 0644)) != 0)
        lmdb_die(path, rc);
    if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) != 0)
        lmdb_die("mdb_txn_begin", rc);
    if ((rc = mdb_dbi_open(txn, db, create ? MDB_CREATE : 0, &dbi)) != 0)
        lmdb_die("mdb_dbi_open", rc);
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    if ((rc = mdb_put(txn, dbi, &k, &v, 0)) != 0)
        lmdb_die("mdb_put", rc);
    if ((rc = mdb_txn_commit(txn)) != 0)
        lmdb_die("mdb_txn_commit", rc);
    mdb_env_close(env);
}

/* Reads the value of key in the named database of the LMDB file at path. */
static size_t raw_get(const char *path, const char *db, const void *key, size_t klen, void *out,
                      size_t cap)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    int rc = mdb_env_create(&env);
    if (rc != 0)
        lmdb_die("mdb_env_create", rc);
    if ((rc = mdb_env_set_maxdbs(env, 16)) != 0)
        lmdb_die("mdb_env_set_maxdbs", rc);
    if ((rc = mdb_env_open(env, path, MDB_NOSUBDIR | MDB_RDONLY, 0644)) != 0)
        lmdb_die(path, rc);
    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) != 0)
        lmdb_die("mdb_txn_begin", rc);
    if ((rc = mdb_dbi_open(txn, db, 0, &dbi)) != 0)
        lmdb_die("mdb_dbi_open", rc);
    MDB_val k = {klen, (void *)key}, v;
    if ((rc = mdb_get(txn, dbi, &k, &v)) != 0)
        lmdb_die("mdb_get", rc);
    size_t n = v.mv_size < cap ? v.mv_size : cap;
    memcpy(out, v.mv_data, n);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return v.mv_size;
}

static void key_u64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* ---- the cases ------------------------------------------------------------ */

static void test_missing_dir(void)
{
    char dir[512];
    case_dir(dir, sizeof dir, "missing/run");
    reader_refused("missing run dir", dir, "No such file or directory", NULL, 0);
    writer_refused("missing run dir", dir, 0, "No such file or directory", NULL);
    char parent[512];
    case_dir(parent, sizeof parent, "missing");
    KV_CHECKF(access(parent, F_OK) != 0, "a refused open created %s", parent);
    cli_list_fails("missing run dir", dir);
}

static void test_dir_is_file(void)
{
    char dir[512];
    case_dir(dir, sizeof dir, "file-not-dir");
    write_file(dir, "just a file\n", 12);
    reader_refused("run dir is a file", dir, "not a directory", NULL, 0);
    writer_refused("run dir is a file", dir, 0, "not a directory", NULL);
    writer_refused("run dir is a file", dir, 1, "not a directory", NULL);
    cli_list_fails("run dir is a file", dir);
}

static void test_no_archive(void)
{
    char dir[512], other[600];
    case_dir(dir, sizeof dir, "no-archive");
    make_dir(dir);
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    write_file(other, "not a run\n", 10);
    reader_refused("dir without archive.mdb", dir, "no archive here", NULL, 0);
    writer_refused("dir without archive.mdb", dir, 0, "no archive here", NULL);
    cli_list_fails("dir without archive.mdb", dir);
}

/* One run directory whose archive.mdb holds data[0..n). */
static void not_lmdb_case(const char *what, const char *name, const void *data, size_t n)
{
    char dir[512], path[600];
    case_dir(dir, sizeof dir, name);
    make_dir(dir);
    archive_path(path, sizeof path, dir);
    write_file(path, data, n);
    reader_refused(what, dir, "not an LMDB archive", NULL, 0);
    writer_refused(what, dir, 0, "not an LMDB archive", NULL);
    writer_refused(what, dir, 1, "not an LMDB archive", NULL);
    cli_list_fails(what, dir);
}

static void test_not_lmdb(void)
{
    static uint8_t buf[8192];
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof buf; i += 8) {
        uint64_t r = kv_test_rand(&s);
        memcpy(buf + i, &r, 8);
    }
    not_lmdb_case("random bytes", "random", buf, sizeof buf);

    char text[2048];
    size_t n = 0;
    while (n + 64 < sizeof text)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "{\"problem\": \"allreduce\", \"speedup\": %zu.5}\n", n);
    not_lmdb_case("text file", "text", text, n);
    not_lmdb_case("short text file", "short-text", "hello\n", 6);

    static uint8_t png[4096];
    static const uint8_t head[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0,    0,
                                   13,   'I', 'H', 'D', 'R',  0,    0,    1,    0,    0,    0,
                                   1,    0,   8,   6,   0,    0,    0,    0x5c, 0x72, 0xa8, 0x66};
    memcpy(png, head, sizeof head);
    for (size_t i = sizeof head; i < sizeof png; i++)
        png[i] = (uint8_t)(kv_test_rand(&s) >> 56);
    not_lmdb_case("PNG-like header", "png", png, sizeof png);

    /* archive.mdb that is a directory */
    char dir[512], path[600];
    case_dir(dir, sizeof dir, "archive-is-dir");
    make_dir(dir);
    archive_path(path, sizeof path, dir);
    make_dir(path);
    reader_refused("archive.mdb is a directory", dir, "not a regular file", NULL, 0);
    writer_refused("archive.mdb is a directory", dir, 1, "not a regular file", NULL);
    cli_list_fails("archive.mdb is a directory", dir);
}

static void test_empty(void)
{
    char dir[512], path[600];
    case_dir(dir, sizeof dir, "empty");
    make_dir(dir);
    archive_path(path, sizeof path, dir);
    write_file(path, NULL, 0);
    reader_refused("empty archive.mdb", dir, "empty archive file", NULL, 0);
    writer_refused("empty archive.mdb", dir, 0, "empty archive file", NULL);
    cli_list_fails("empty archive.mdb", dir);
}

/* An LMDB file whose creator was killed before its first commit (the header
 * pages written, nothing else): a writer that may create makes the archive
 * in it; nothing had been stored. */
static void test_uncommitted(void)
{
    char dir[512], path[600];
    case_dir(dir, sizeof dir, "uncommitted");
    make_dir(dir);
    archive_path(path, sizeof path, dir);
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc != 0)
        lmdb_die("mdb_env_create", rc);
    if ((rc = mdb_env_open(env, path, MDB_NOSUBDIR, 0644)) != 0)
        lmdb_die(path, rc);
    mdb_env_close(env);
    writer_refused("uncommitted archive.mdb", dir, 0, "not a kevo archive", NULL);
    kv_archive_opts o = {.create = 1, .initial_map_bytes = 1 << 20};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_CHECKF(kv_archive_open(dir, &o, &a, &err) == 0, "%s", err.msg);
    kv_archive_close(a);
    a = NULL;
    o.create = 0;
    KV_CHECKF(kv_archive_open(dir, &o, &a, &err) == 0, "reopening: %s", err.msg);
    kv_archive_close(a);
}

static unsigned lmdb_page_size(const char *path)
{
    MDB_env *env;
    MDB_stat st;
    int rc = mdb_env_create(&env);
    if (rc != 0)
        lmdb_die("mdb_env_create", rc);
    if ((rc = mdb_env_open(env, path, MDB_NOSUBDIR | MDB_RDONLY, 0644)) != 0)
        lmdb_die(path, rc);
    if ((rc = mdb_env_stat(env, &st)) != 0)
        lmdb_die("mdb_env_stat", rc);
    mdb_env_close(env);
    return st.ms_psize;
}

static void test_truncated(void)
{
    char real[512], path[600];
    case_dir(real, sizeof real, "real");
    make_archive(real, N_PROGRAMS);
    archive_path(path, sizeof path, real);
    off_t size = file_size(path);
    off_t ps = (off_t)lmdb_page_size(path);
    printf("  real archive: %d programs, %lld bytes, pages of %lld bytes\n", N_PROGRAMS,
           (long long)size, (long long)ps);
    KV_REQUIRE(size > 8 * ps);
    struct {
        const char *what;
        off_t len;
    } cuts[] = {
        {"truncated in meta page 0", 100},      {"truncated in page 0", ps / 2},
        {"truncated after page 0", ps},         {"truncated in meta page 1", ps + ps / 2},
        {"truncated after both metas", 2 * ps}, {"truncated at half", size / 2},
        {"truncated by one page", size - ps},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char dir[512], name[64], copy[600];
        snprintf(name, sizeof name, "trunc-%zu", i);
        case_dir(dir, sizeof dir, name);
        make_dir(dir);
        archive_path(copy, sizeof copy, dir);
        copy_file(path, copy, cuts[i].len);
        KV_REQUIRE(file_size(copy) == cuts[i].len);
        reader_refused(cuts[i].what, dir, "truncated", "not an LMDB archive", 0);
        writer_refused(cuts[i].what, dir, 1, "truncated", "not an LMDB archive");
        cli_list_fails(cuts[i].what, dir);
    }
    /* the whole copy opens: the cuts, not the copying, made the others fail */
    char dir[512], copy[600];
    case_dir(dir, sizeof dir, "whole-copy");
    make_dir(dir);
    archive_path(copy, sizeof copy, dir);
    copy_file(path, copy, -1);
    kv_archive_opts o = {.readonly = 1};
    kv_archive *a = NULL;
    kv_err err;
    memset(&err, 0, sizeof err);
    KV_CHECKF(kv_archive_open(dir, &o, &a, &err) == 0, "whole copy: %s", err.msg);
    if (a) {
        kv_txn *r;
        kv_counters c;
        KV_CHECK(kv_read_begin(a, &r, &err) == 0);
        KV_CHECK(kv_get_counters(r, &c, &err) == 0 && c.programs == N_PROGRAMS);
        kv_txn_abort(r);
        kv_archive_close(a);
    }
}

static void test_schema_version(void)
{
    char dir[512], path[600];
    case_dir(dir, sizeof dir, "schema");
    make_archive(dir, 20);
    archive_path(path, sizeof path, dir);
    uint8_t v[4] = {999 & 0xff, 999 >> 8, 0, 0}, got[8];
    raw_put(path, "meta", 0, "schema", 6, v, sizeof v);
    KV_REQUIRE(raw_get(path, "meta", "schema", 6, got, sizeof got) == 4 && memcmp(got, v, 4) == 0);
    /* with the lock file a finished run leaves behind: a reader takes a
     * reader slot in it, but the archive itself must not change */
    reader_refused("schema 999 (lock file)", dir, "schema version 999", NULL, 1);
    remove_lock(dir);
    reader_refused("schema 999 (no lock file)", dir, "schema version 999", NULL, 0);
    writer_refused("schema 999", dir, 0, "schema version 999", NULL);
    writer_refused("schema 999", dir, 1, "schema version 999", NULL);
    remove_lock(dir);
    cli_list_fails("schema 999", dir);
}

static void test_foreign_lmdb(void)
{
    char dir[512], path[600];
    case_dir(dir, sizeof dir, "foreign");
    make_dir(dir);
    archive_path(path, sizeof path, dir);
    raw_put(path, NULL, 0, "hello", 5, "world", 5);
    raw_put(path, "other", 1, "key", 3, "value", 5);
    remove_lock(dir);
    reader_refused("LMDB without kevo dbs", dir, "not a kevo archive", NULL, 0);
    writer_refused("LMDB without kevo dbs", dir, 0, "not a kevo archive", NULL);
    writer_refused("LMDB without kevo dbs", dir, 1, "not a kevo archive", NULL);
    remove_lock(dir);
    cli_list_fails("LMDB without kevo dbs", dir);
}

/* Opens dir in a child process, as uid/gid 65534 when running as root (root
 * ignores permissions), and writes the outcome into msg: "OPENED" or the
 * error. Returns 0, or 77 when the child could not drop its privileges. */
static int open_as_other(const char *dir, int readonly, char *msg, size_t cap)
{
    int p[2];
    if (pipe(p) != 0)
        die("pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        char out[1100];
        int code = 0;
        if (close(p[0]) != 0)
            _exit(2);
        if (geteuid() == 0 &&
            (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
            snprintf(out, sizeof out, "cannot drop to uid 65534: %s", strerror(errno));
            code = 77;
        } else {
            kv_archive_opts o = {.readonly = readonly, .create = !readonly};
            kv_archive *a = NULL;
            kv_err err;
            memset(&err, 0, sizeof err);
            if (kv_archive_open(dir, &o, &a, &err) == 0) {
                snprintf(out, sizeof out, "OPENED");
                kv_archive_close(a);
            } else {
                snprintf(out, sizeof out, "%s", err.msg);
            }
        }
        size_t n = strlen(out);
        if (write(p[1], out, n) != (ssize_t)n)
            _exit(2);
        _exit(code); /* not exit(): the parent's atexit handlers remove the test dirs */
    }
    if (close(p[1]) != 0)
        die("close");
    size_t n = 0;
    for (;;) {
        ssize_t r = read(p[0], msg + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("read");
        if (r == 0 || (n += (size_t)r) == cap - 1)
            break;
    }
    msg[n] = 0;
    if (close(p[0]) != 0)
        die("close");
    int status;
    while (waitpid(pid, &status, 0) != pid)
        if (errno != EINTR)
            die("waitpid");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        return 77;
    KV_CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "open_as_other: child status %d: %s",
              status, msg);
    return 0;
}

static void chmod_or_die(const char *path, mode_t mode)
{
    if (chmod(path, mode) != 0)
        die(path);
}

static void readonly_case(const char *what, const char *dir, const char *path)
{
    snap before, after;
    take_snap(dir, &before);
    char msg[1100];
    if (open_as_other(dir, 0, msg, sizeof msg) == 77) {
        printf("note: %s: %s; skipped\n", what, msg);
        return;
    }
    take_snap(dir, &after);
    KV_CHECKF(strcmp(msg, "OPENED") != 0, "%s: the writer opened a read-only archive", what);
    KV_CHECKF(strstr(msg, dir) != NULL, "%s: message does not name %s: %s", what, dir, msg);
    KV_CHECKF(contains_any(msg, "read-only", "Permission denied"),
              "%s: message says neither read-only nor Permission denied: %s", what, msg);
    char why[256];
    KV_CHECKF(same_snap(&before, &after, 1, why, sizeof why), "%s: %s changed: %s", what, dir, why);
    uint8_t h[KV_SHA256_LEN];
    int i;
    for (i = 0; i < before.n && strcmp(before.e[i].name, KV_ARCHIVE_FILE) != 0; i++)
        ;
    KV_CHECKF(i < before.n && hash_file(path, h) == 0 && memcmp(h, before.e[i].sha, sizeof h) == 0,
              "%s: %s changed", what, path);
    printf("  %-28s writer: %s\n", what, msg);

    /* a reader may still read it; LMDB cannot use a lock file it cannot
     * write, so this is only reported */
    if (open_as_other(dir, 1, msg, sizeof msg) == 0)
        printf("  %-28s reader: %s\n", what, strcmp(msg, "OPENED") == 0 ? "opens" : msg);
}

static void test_readonly_dir(void)
{
    char dir[512], path[600];
    case_dir(dir, sizeof dir, "readonly");
    make_archive(dir, 20);
    archive_path(path, sizeof path, dir);
    chmod_or_die(path, 0444);
    chmod_or_die(dir, 0555);
    readonly_case("read-only dir (lock file)", dir, path);
    chmod_or_die(dir, 0755);
    remove_lock(dir);
    chmod_or_die(dir, 0555);
    readonly_case("read-only dir (no lock file)", dir, path);
    chmod_or_die(dir, 0755); /* so that the test directory can be removed */
    chmod_or_die(path, 0644);
}

static int count_program(const kv_program *p, void *ctx, kv_err *err)
{
    (void)p;
    (void)err;
    (*(int *)ctx)++;
    return 0;
}

static void test_corrupt_record(void)
{
    enum { N = 61, BAD_GARBAGE = 7, BAD_CRC = N };
    char dir[512], path[600];
    case_dir(dir, sizeof dir, "corrupt");
    make_archive(dir, N);
    archive_path(path, sizeof path, dir);

    /* program 7: garbage; program N (the best of its problem): a whole record
     * with one payload byte flipped */
    uint8_t key[8], garbage[300], rec[4096];
    uint64_t s = 7;
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (uint8_t)(kv_test_rand(&s) >> 56);
    garbage[0] = 'x';
    key_u64(key, BAD_GARBAGE);
    raw_put(path, "programs", 0, key, 8, garbage, sizeof garbage);
    key_u64(key, BAD_CRC);
    size_t n = raw_get(path, "programs", key, 8, rec, sizeof rec);
    KV_REQUIRE(n > 20 && n <= sizeof rec && rec[0] == 'k' && rec[1] == 'v');
    rec[n - 3] ^= 0x5a;
    raw_put(path, "programs", 0, key, 8, rec, n);
    remove_lock(dir);

    snap before, after;
    take_snap(dir, &before);
    kv_archive_opts o = {.readonly = 1};
    kv_archive *a = NULL;
    kv_err err;
    memset(&err, 0, sizeof err);
    KV_CHECKF(kv_archive_open(dir, &o, &a, &err) == 0, "corrupt record: open: %s", err.msg);
    KV_REQUIRE(a);
    kv_txn *r;
    KV_REQUIRE(kv_read_begin(a, &r, &err) == 0);
    kv_program p;
    KV_CHECK(kv_get_program(r, 1, &p, &err) == 0);
    kv_program_clear(&p);
    memset(&err, 0, sizeof err);
    KV_CHECK(kv_get_program(r, BAD_GARBAGE, &p, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, dir);
    KV_CHECK_STR_CONTAINS(err.msg, "program 7");
    KV_CHECKF(contains_any(err.msg, "checksum", "not a kevo record"), "%s", err.msg);
    printf("  %-28s get 7: %s\n", "corrupt record", err.msg);
    memset(&err, 0, sizeof err);
    KV_CHECK(kv_get_program(r, BAD_CRC, &p, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, dir);
    KV_CHECK_STR_CONTAINS(err.msg, "checksum");
    printf("  %-28s get %d: %s\n", "corrupt record", BAD_CRC, err.msg);
    memset(&err, 0, sizeof err);
    int seen = 0;
    KV_CHECK(kv_each_program(r, count_program, &seen, &err) == -1);
    KV_CHECKF(seen == BAD_GARBAGE - 1, "kv_each_program went on past the bad record: %d", seen);
    KV_CHECK_STR_CONTAINS(err.msg, dir);
    KV_CHECKF(contains_any(err.msg, "checksum", "not a kevo record"), "%s", err.msg);
    printf("  %-28s each: %s\n", "corrupt record", err.msg);
    kv_txn_abort(r);
    kv_archive_close(a);
    take_snap(dir, &after);
    char why[256];
    KV_CHECKF(same_snap(&before, &after, 0, why, sizeof why),
              "corrupt record: reader changed %s: %s", dir, why);

    /* a write that has to read the bad record fails, and nothing is committed */
    uint8_t h0[KV_SHA256_LEN], h1[KV_SHA256_LEN];
    KV_REQUIRE(hash_file(path, h0) == 0);
    kv_archive_opts w = {.initial_map_bytes = 1 << 20};
    KV_CHECKF(kv_archive_open(dir, &w, &a, &err) == 0, "corrupt record: writer open: %s", err.msg);
    KV_REQUIRE(a);
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    memset(&p, 0, sizeof p);
    p.id = BAD_GARBAGE;
    p.verdict = KV_VERDICT_OK;
    p.speedup = 2;
    memset(&err, 0, sizeof err);
    KV_CHECK(kv_set_result(t, &p, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, dir);
    KV_CHECK(kv_txn_commit(t, &err) == -1);
    kv_archive_close(a);
    KV_CHECK(hash_file(path, h1) == 0 && memcmp(h0, h1, sizeof h0) == 0);
    remove_lock(dir);

    /* the CLI: every record (export) and the best program (the bad one) */
    char *exp[] = {"export", "--format", "json", NULL};
    cli_expect_fail("corrupt record", dir, exp);
    char *best[] = {"best", (N - 1) % 3 ? "allreduce" : "allgather", NULL};
    cli_expect_fail("corrupt record", dir, best);
}

int main(void)
{
    kv_test_fresh_dir(root, sizeof root, "archive-bad");
    /* traversable by the unprivileged child of the read-only case */
    if (chmod(root, 0755) != 0)
        die(root);
    KV_RUN(test_missing_dir);
    KV_RUN(test_dir_is_file);
    KV_RUN(test_no_archive);
    KV_RUN(test_not_lmdb);
    KV_RUN(test_empty);
    KV_RUN(test_uncommitted);
    KV_RUN(test_truncated);
    KV_RUN(test_schema_version);
    KV_RUN(test_foreign_lmdb);
    KV_RUN(test_readonly_dir);
    KV_RUN(test_corrupt_record);
    return kv_test_summary();
}
