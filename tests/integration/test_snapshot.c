/* test_snapshot.c — the archive survives what gets through: hot snapshots
 * (taken, verified, rotated; on a thread while the writer commits, timed),
 * damaged archives named as damaged with the newest snapshot (junk header
 * pages, a flipped magic number, a truncated file, junk in the middle), `kevo
 * archive restore` ($KEVO_BIN) putting a snapshot back and keeping the
 * damaged file aside, the writer's check refusing a commit after its file
 * was changed under it, and the search loop ($KEVO_SEARCH_DRIVER): snapshots
 * at every interval and at exit, only at exit with interval 0, and a run
 * killed, its archive overwritten, restored and resumed to its end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "common/sha256.h"
#include "archive/snapshot.h"
#include "search_check.h"
#include "test.h"
#include "test_util.h"

#define N_PROGRAMS 120

static char root[256];
static const char *kevo_bin;

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void path_of(char *out, size_t cap, const char *dir, const char *name)
{
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap) {
        fprintf(stderr, "path too long: %s/%s\n", dir, name);
        exit(2);
    }
}

/* ---- archives -------------------------------------------------------------- */

static kv_archive *open_writer(const char *dir)
{
    kv_archive_opts o = {.create = 1, .initial_map_bytes = 1 << 20};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    if (kv_archive_open(dir, &o, &a, &err) != 0) {
        fprintf(stderr, "open_writer: %s\n", err.msg);
        return NULL;
    }
    return a;
}

/* Adds n programs of len bytes each, batch to a transaction; 0 or -1. */
static int add_programs(kv_archive *a, int n, size_t len, int batch, uint64_t seed, kv_err *err)
{
    char *src = malloc(len + 1);
    if (!src)
        return kv_err_set(err, "out of memory");
    int rc = 0;
    for (int done = 0; done < n && rc == 0;) {
        kv_txn *t;
        if ((rc = kv_write_begin(a, &t, err)) != 0)
            break;
        for (int k = 0; k < batch && done < n && rc == 0; k++, done++) {
            kv_program p;
            memset(&p, 0, sizeof p);
            snprintf(p.problem, sizeof p.problem, "%s", done % 2 ? "allreduce" : "allgather");
            snprintf(p.op, sizeof p.op, "template");
            kv_test_random_source(src, len + 1, seed + (uint64_t)done, len);
            uint64_t id;
            rc = kv_add_program(t, &p, src, len, &id, NULL, err);
        }
        if (rc != 0)
            kv_txn_abort(t);
        else
            rc = kv_txn_commit(t, err);
    }
    free(src);
    return rc;
}

/* A run directory with an archive of n programs and, with snapshot, one
 * snapshot of it (its path into snap); the writer is closed and its lock file
 * removed, as a finished run leaves it. */
static int make_run(const char *dir, int n, int snapshot, char *snap, size_t cap)
{
    kv_archive *a = open_writer(dir);
    kv_err err = {{0}};
    if (!a)
        return -1;
    int rc = add_programs(a, n, 900, 40, 1000, &err);
    kv_snapshot_info info;
    if (rc == 0 && snapshot && (rc = kv_snapshot_take(a, 3, &info, &err)) == 0 &&
        (size_t)snprintf(snap, cap, "%s", info.path) >= cap)
        rc = kv_err_set(&err, "snapshot path %s: longer than %zu bytes", info.path, cap - 1);
    if (rc != 0)
        fprintf(stderr, "make_run %s: %s\n", dir, err.msg);
    kv_archive_close(a);
    char lock[600];
    path_of(lock, sizeof lock, dir, KV_ARCHIVE_FILE "-lock");
    if (unlink(lock) != 0 && errno != ENOENT)
        die(lock);
    return rc;
}

static int64_t count_programs(const char *dir)
{
    kv_archive_opts o = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_counters c;
    kv_err err = {{0}};
    int64_t n = -1;
    if (kv_archive_open(dir, &o, &a, &err) == 0 && kv_read_begin(a, &t, &err) == 0 &&
        kv_get_counters(t, &c, &err) == 0)
        n = (int64_t)c.programs;
    else
        fprintf(stderr, "count_programs %s: %s\n", dir, err.msg);
    kv_txn_abort(t);
    kv_archive_close(a);
    return n;
}

static int count_snapshots(const char *dir, char names[][64], int cap)
{
    char sd[600];
    path_of(sd, sizeof sd, dir, KV_SNAPSHOT_DIR);
    DIR *d = opendir(sd);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (names && n < cap)
            snprintf(names[n], 64, "%.63s", de->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* An archive passes kv_read_file's 1 MiB text limit once a run has gone far
 * enough before it is killed: read with a limit of its own. */
static void hash_file(const char *path, uint8_t out[KV_SHA256_LEN])
{
    char *data = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    if (kv_read_file_max(path, (size_t)1 << 30, &data, &len, &err) != 0) {
        fprintf(stderr, "hash_file: %s\n", err.msg);
        exit(2);
    }
    if (kv_sha256(data, len, out) != 0) {
        fprintf(stderr, "hash_file: %s: SHA-256 failed\n", path);
        exit(2);
    }
    free(data);
}

/* Writes n bytes (random when fill < 0, else fill) at off into path, through
 * a descriptor of its own. */
static void scribble(const char *path, off_t off, size_t n, int fill, uint64_t seed)
{
    uint8_t *buf = malloc(n);
    if (!buf)
        die("malloc");
    for (size_t i = 0; i < n; i++)
        buf[i] = fill >= 0 ? (uint8_t)fill : (uint8_t)(kv_test_rand(&seed) >> 56);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || pwrite(fd, buf, n, off) != (ssize_t)n || close(fd) != 0)
        die(path);
    free(buf);
}

static off_t size_of(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        die(path);
    return st.st_size;
}

static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\n')
            return 1;
    return 0;
}

/* ---- the kevo command and the search driver --------------------------------- */

typedef struct {
    int status; /* wait status */
    char *out, *err;
} cmd_result;

static void cmd_free(cmd_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

/* Runs argv with stdout and stderr into files; NULL-terminated argv. */
static cmd_result run_cmd(char *const argv[])
{
    char out[300], err[300];
    path_of(out, sizeof out, root, "cmd.out");
    path_of(err, sizeof err, root, "cmd.err");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    cmd_result r = {0};
    while (waitpid(pid, &r.status, 0) != pid)
        if (errno != EINTR)
            die("waitpid");
    size_t len;
    if (kv_read_file(out, &r.out, &len, NULL) != 0 || kv_read_file(err, &r.err, &len, NULL) != 0)
        die("reading a command's output");
    return r;
}

static int exited(const cmd_result *r, int code)
{
    return WIFEXITED(r->status) && WEXITSTATUS(r->status) == code;
}

/* `kevo archive restore DIR`: it must succeed, say how many programs the
 * archive holds, and keep the file it replaced (whose hash was had). */
static void restore_ok(const char *what, const char *dir, int64_t programs, const uint8_t *had)
{
    char *argv[] = {(char *)kevo_bin, "archive", "restore", (char *)dir, NULL};
    cmd_result r = run_cmd(argv);
    char want[64];
    snprintf(want, sizeof want, "holds %lld programs", (long long)programs);
    KV_CHECKF(exited(&r, 0) && strstr(r.out, want), "%s: restore: status %d, out %s, err %s", what,
              r.status, r.out, r.err);
    const char *aside = strstr(r.out, "kept as ");
    KV_CHECKF(aside != NULL, "%s: restore names no file kept aside: %s", what, r.out);
    if (aside && had) {
        char path[1024];
        size_t n = strcspn(aside + 8, "\n");
        snprintf(path, sizeof path, "%.*s", (int)n, aside + 8);
        KV_CHECK_STR_CONTAINS(path, ".damaged-");
        uint8_t h[KV_SHA256_LEN];
        hash_file(path, h);
        KV_CHECKF(memcmp(h, had, sizeof h) == 0, "%s: %s is not the damaged archive", what, path);
    }
    KV_CHECKF(count_programs(dir) == programs, "%s: %lld programs after restore", what,
              (long long)count_programs(dir));
    printf("  %-22s restore: %s", what, r.out);
    cmd_free(&r);
}

/* ---- snapshots and rotation ----------------------------------------------------- */

static void test_take_and_rotate(void)
{
    char dir[300], snap[1024], sd[600], old[700];
    path_of(dir, sizeof dir, root, "rotate");
    KV_REQUIRE(make_run(dir, N_PROGRAMS, 1, snap, sizeof snap) == 0);
    kv_snapshot_info info;
    kv_err err = {{0}};
    KV_CHECKF(kv_snapshot_verify(snap, &info, &err) == 0 && info.programs == N_PROGRAMS,
              "%s (%llu programs)", err.msg, (unsigned long long)info.programs);
    KV_CHECK(info.taken_ns > 0 && llabs(info.taken_ns - kv_wall_ns()) < 120 * 1000000000LL);
    /* four older snapshots and a temporary file a killed snapshot left, in
     * place of make_run's (taken in another second than the one below, when
     * the machine is slow, it would be kept in place of the third oldest) */
    path_of(sd, sizeof sd, dir, KV_SNAPSHOT_DIR);
    char *data = NULL;
    size_t len = 0;
    KV_REQUIRE(kv_read_file(snap, &data, &len, &err) == 0);
    KV_REQUIRE(unlink(snap) == 0);
    for (int i = 1; i <= 4; i++) {
        snprintf(old, sizeof old, "%s/archive-2020010%dT000000Z.mdb", sd, i);
        KV_REQUIRE(kv_write_file_atomic(old, data, len, &err) == 0);
    }
    snprintf(old, sizeof old, "%s/archive-20200105T000000Z.mdb.tmp.1.0", sd);
    KV_REQUIRE(kv_write_file_atomic(old, data, 100, &err) == 0);
    free(data);
    KV_CHECK(count_snapshots(dir, NULL, 0) == 5);

    kv_archive_opts o = {0};
    kv_archive *a = NULL;
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0);
    KV_CHECK(add_programs(a, 5, 700, 5, 77, &err) == 0);
    KV_CHECKF(kv_snapshot_take(a, 3, &info, &err) == 0, "%s", err.msg);
    KV_CHECK(info.programs == N_PROGRAMS + 5);
    char names[8][64];
    int n = count_snapshots(dir, names, 8);
    KV_CHECKF(n == 3, "%d files in snapshots/ with keep 3", n);
    int newest = 0, old4 = 0, old3 = 0;
    for (int i = 0; i < n && i < 8; i++) {
        newest += strstr(info.path, names[i]) != NULL;
        old4 += strcmp(names[i], "archive-20200104T000000Z.mdb") == 0;
        old3 += strcmp(names[i], "archive-20200103T000000Z.mdb") == 0;
    }
    KV_CHECKF(newest == 1 && old4 == 1 && old3 == 1, "kept the wrong ones");
    KV_CHECKF(kv_snapshot_take(a, 1, &info, &err) == 0, "%s", err.msg);
    KV_CHECK(count_snapshots(dir, NULL, 0) == 1);
    KV_CHECK(kv_snapshot_newest(dir, &info, &err) == 0 && info.programs == N_PROGRAMS + 5);
    kv_archive_close(a);
    /* a reader takes none */
    o.readonly = 1;
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0);
    KV_CHECK(kv_snapshot_take(a, 3, &info, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "read-only");
    kv_archive_close(a);
}

/* A snapshot of a sizable archive, timed; and on a thread while the writer
 * commits: the commits do not wait for it. */
static void test_snapshot_timing(void)
{
    enum { N = 20000 };
    char dir[300];
    kv_err err = {{0}};
    path_of(dir, sizeof dir, root, "timing");
    kv_archive *a = open_writer(dir);
    KV_REQUIRE(a);
    int64_t t0 = kv_monotonic_ns();
    KV_REQUIRE(add_programs(a, N, 3000, 500, 5, &err) == 0);
    double fill = (double)(kv_monotonic_ns() - t0) * 1e-9;
    char path[600];
    path_of(path, sizeof path, dir, KV_ARCHIVE_FILE);
    kv_snapshot_info info;
    KV_CHECKF(kv_snapshot_take(a, 3, &info, &err) == 0, "%s", err.msg);
    KV_CHECK(info.programs == N);
    printf("  snapshot of %d programs (archive %.1f MiB, copy %.1f MiB): %.3f s "
           "(filling it took %.1f s)\n",
           N, (double)size_of(path) / (1 << 20), (double)info.bytes / (1 << 20), info.seconds,
           fill);

    kv_snapshot_job *j = NULL;
    t0 = kv_monotonic_ns();
    KV_REQUIRE(kv_snapshot_start(a, 3, &j, &err) == 0);
    double start_s = (double)(kv_monotonic_ns() - t0) * 1e-9;
    KV_CHECK(kv_snapshot_take(a, 3, NULL, &err) == -1); /* one at a time */
    double worst = 0;
    int commits = 0;
    while (!kv_snapshot_done(j) || commits == 0) {
        int64_t c0 = kv_monotonic_ns();
        KV_REQUIRE(add_programs(a, 1, 3000, 1, 900000 + (uint64_t)commits, &err) == 0);
        double d = (double)(kv_monotonic_ns() - c0) * 1e-9;
        worst = d > worst ? d : worst;
        commits++;
    }
    KV_CHECKF(kv_snapshot_finish(j, &info, &err) == 0, "%s", err.msg);
    KV_CHECKF(info.programs >= N && info.programs <= (uint64_t)(N + commits), "%llu programs",
              (unsigned long long)info.programs);
    printf("  on a thread: started in %.6f s, took %.3f s; meanwhile %d commits, the slowest "
           "%.4f s\n",
           start_s, info.seconds, commits, worst);
    kv_archive_close(a);
}

/* ---- damage ---------------------------------------------------------------------- */

typedef enum { JUNK_HEADER, FLIP_MAGIC, FLIP_MAGIC_1, TRUNCATED, JUNK_MIDDLE } damage_kind;

static void damage(const char *path, damage_kind k)
{
    off_t size = size_of(path);
    switch (k) {
    case JUNK_HEADER: /* the incident: the first 64 KiB overwritten */
        scribble(path, 0, size < 65536 ? (size_t)size : 65536, -1, 99);
        break;
    case FLIP_MAGIC: {
        uint8_t b;
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 || pread(fd, &b, 1, 16) != 1)
            die(path);
        b ^= 0x40;
        if (pwrite(fd, &b, 1, 16) != 1 || close(fd) != 0)
            die(path);
        break;
    }
    case FLIP_MAGIC_1: scribble(path, 4096 + 16, 4, 0, 0); break;
    case TRUNCATED:
        if (truncate(path, size / 2) != 0)
            die(path);
        break;
    case JUNK_MIDDLE: /* the middle third of the pages, zeroed: tree pages among them */
        scribble(path, (size / 4096 / 3) * 4096, (size_t)(size / 4096 / 3) * 4096, 0, 0);
        break;
    }
}

static void damage_case(const char *what, const char *name, damage_kind k)
{
    char dir[300], snap[1024], path[600];
    path_of(dir, sizeof dir, root, name);
    KV_REQUIRE(make_run(dir, N_PROGRAMS, 1, snap, sizeof snap) == 0);
    path_of(path, sizeof path, dir, KV_ARCHIVE_FILE);
    damage(path, k);
    uint8_t had[KV_SHA256_LEN];
    hash_file(path, had);

    /* the library: damage named on open (junk in the middle is not in the
     * header: LMDB finds it when it reads those pages) */
    if (k != JUNK_MIDDLE) {
        kv_archive_opts ro = {.readonly = 1}, rw = {.create = 1};
        kv_archive *a = (kv_archive *)1;
        kv_err err = {{0}};
        KV_CHECK(kv_archive_open(dir, &ro, &a, &err) == -1 && a == NULL);
        KV_CHECK_STR_CONTAINS(err.msg, "damaged (");
        KV_CHECK_STR_CONTAINS(err.msg, snap);
        KV_CHECK_STR_CONTAINS(err.msg, "120 programs");
        KV_CHECK_STR_CONTAINS(err.msg, "'kevo archive restore ");
        KV_CHECKF(!has_control(err.msg), "control characters in: %s", err.msg);
        KV_CHECKF(strstr(err.msg, "Cannot allocate memory") == NULL, "%s", err.msg);
        printf("  %-22s %s\n", what, err.msg);
        KV_CHECK(kv_archive_open(dir, &rw, &a, &err) == -1);
        KV_CHECK_STR_CONTAINS(err.msg, "damaged (");
    }
    /* the command: views that read the damaged pages (LMDB may stop the
     * process on a page that cannot be: the damage is named first) */
    char *list[] = {(char *)kevo_bin, "archive", "--run", dir, "list", NULL};
    char *walk[] = {(char *)kevo_bin, "archive", "--run", dir, "export", "--format", "json", NULL};
    char *all[] = {(char *)kevo_bin, "archive", "--run",         dir, "export",
                   "--format",       "json",    "--with-source", NULL};
    char **views[] = {k == JUNK_MIDDLE ? walk : list, k == JUNK_MIDDLE ? all : NULL};
    for (int v = 0; v < 2 && views[v]; v++) {
        cmd_result r = run_cmd(views[v]);
        KV_CHECKF(!exited(&r, 0), "%s: kevo archive %s succeeded", what, views[v][4]);
        KV_CHECK_STR_CONTAINS(r.err, "damaged (");
        KV_CHECK_STR_CONTAINS(r.err, snap);
        KV_CHECK_STR_CONTAINS(r.err, "kevo archive restore");
        KV_CHECKF(!has_control(r.err), "control characters in: %s", r.err);
        if (k == JUNK_MIDDLE)
            printf("  %-22s %s: %.*s\n", what, views[v][4], (int)strcspn(r.err, "\n"), r.err);
        cmd_free(&r);
    }
    restore_ok(what, dir, N_PROGRAMS, had);
    /* the restored archive takes writes again */
    kv_archive *w = open_writer(dir);
    kv_err err = {{0}};
    KV_CHECK(w && add_programs(w, 3, 500, 3, 4242, &err) == 0);
    kv_archive_close(w);
    KV_CHECK(count_programs(dir) == N_PROGRAMS + 3);
}

static void test_damage(void)
{
    if (!kevo_bin) {
        KV_CHECKF(0, "KEVO_BIN is not set");
        return;
    }
    damage_case("junk header pages", "junk-header", JUNK_HEADER);
    damage_case("flipped magic", "flip-magic", FLIP_MAGIC);
    damage_case("bad magic, page 1", "flip-magic-1", FLIP_MAGIC_1);
    damage_case("truncated", "truncated", TRUNCATED);
    damage_case("junk in the middle", "junk-middle", JUNK_MIDDLE);

    /* without a snapshot, the message says so; restore has nothing to put back */
    char dir[300], path[600];
    path_of(dir, sizeof dir, root, "no-snapshot");
    KV_REQUIRE(make_run(dir, 10, 0, NULL, 0) == 0);
    path_of(path, sizeof path, dir, KV_ARCHIVE_FILE);
    damage(path, FLIP_MAGIC);
    kv_archive_opts ro = {.readonly = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_CHECK(kv_archive_open(dir, &ro, &a, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "damaged (");
    KV_CHECK_STR_CONTAINS(err.msg, "no snapshot");
    char *argv[] = {(char *)kevo_bin, "archive", "restore", dir, NULL};
    cmd_result r = run_cmd(argv);
    KV_CHECKF(exited(&r, 1) && strstr(r.err, "nothing to restore"), "status %d: %s", r.status,
              r.err);
    KV_CHECK(access(path, F_OK) == 0); /* nothing was moved */
    cmd_free(&r);
    char *usage[] = {(char *)kevo_bin, "archive", "restore", NULL};
    r = run_cmd(usage);
    KV_CHECK(exited(&r, 2));
    cmd_free(&r);
    char *help[] = {(char *)kevo_bin, "archive", "restore", "--help", NULL};
    r = run_cmd(help);
    KV_CHECK(exited(&r, 0) && strstr(r.out, "usage: kevo archive restore"));
    cmd_free(&r);
}

/* Restore is refused while another process has the archive open. */
/* restore refused while a writer holds the run (its run lock) and while a
 * reader has the archive open (LMDB's lock file) */
static void restore_in_use(const char *dir, int writer, const char *want)
{
    int p[2];
    if (pipe(p) != 0)
        die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        kv_archive_opts ro = {.readonly = 1};
        kv_archive *a = NULL;
        kv_err err;
        if (writer)
            a = open_writer(dir);
        else if (kv_archive_open(dir, &ro, &a, &err) != 0)
            a = NULL;
        if (write(p[1], a ? "y" : "n", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c = 0;
    KV_REQUIRE(pid > 0 && read(p[0], &c, 1) == 1 && c == 'y');
    char *argv[] = {(char *)kevo_bin, "archive", "restore", (char *)dir, NULL};
    cmd_result r = run_cmd(argv);
    KV_CHECKF(exited(&r, 1) && strstr(r.err, want), "status %d: %s", r.status, r.err);
    cmd_free(&r);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(p[0]);
    close(p[1]);
}

static void test_restore_in_use(void)
{
    if (!kevo_bin)
        return;
    char dir[300], snap[1024];
    path_of(dir, sizeof dir, root, "in-use");
    KV_REQUIRE(make_run(dir, 10, 1, snap, sizeof snap) == 0);
    restore_in_use(dir, 1, "; one writer per run");
    /* a reader first needs the lock file a writer made */
    restore_in_use(dir, 0, "is open in process");
}

/* ---- damaged pages: every view and verify, exit codes and no signals ------------ */

#define PAGE 4096
enum { P_BRANCH = 0x01, P_LEAF = 0x02, P_OVERFLOW = 0x04 };

static unsigned u16_at(const uint8_t *b)
{
    return (unsigned)b[0] | (unsigned)b[1] << 8;
}

/* A compact archive (a snapshot: every page in use) with branch, leaf and
 * overflow pages (sources of 6,000 bytes do not fit a leaf). */
static void make_pristine(char *snap, size_t cap)
{
    char dir[300];
    path_of(dir, sizeof dir, root, "pages-src");
    kv_archive *a = open_writer(dir);
    KV_REQUIRE(a != NULL);
    kv_err err = {{0}};
    kv_snapshot_info info;
    KV_REQUIRE(add_programs(a, 150, 900, 50, 7, &err) == 0);
    KV_REQUIRE(add_programs(a, 6, 6000, 3, 77, &err) == 0);
    KV_REQUIRE(kv_snapshot_take(a, 3, &info, &err) == 0);
    KV_CHECK((size_t)snprintf(snap, cap, "%s", info.path) < cap);
    kv_archive_close(a);
}

typedef struct {
    const char *kind;
    long page;
    unsigned off; /* in the page */
    uint8_t mask; /* xor */
    int add;      /* when not 0: added to the 16-bit field at off instead */
} flip;

/* The flips: in the header (flags, lower, upper) and the first node pointer
 * of a branch page, two leaf pages and an overflow page, and in a node of
 * each: a branch's child page number, a leaf's sizes and its data. */
static int plan_flips(const uint8_t *f, size_t size, flip *out, int cap)
{
    int n = 0, nb = 0, nl = 0, no = 0;
    for (long p = 2; (size_t)(p + 1) * PAGE <= size && n + 8 <= cap;) {
        const uint8_t *pg = f + (size_t)p * PAGE;
        unsigned flags = u16_at(pg + 10), ptr0 = u16_at(pg + 16);
        long next = p + 1;
        if (flags & P_OVERFLOW) {
            unsigned count = (unsigned)u16_at(pg + 12) | (unsigned)u16_at(pg + 14) << 16;
            next = p + (count ? count : 1);
            if (no++ < 1) {
                out[n++] = (flip){"overflow", p, 10, 0x06, 0};
                out[n++] = (flip){"overflow", p, 12, 0x7f, 0};
                out[n++] = (flip){"overflow", p, 200, 0x20, 0};
            }
        } else if ((flags & P_BRANCH) && nb++ < 1) {
            out[n++] = (flip){"branch", p, 10, 0x03, 0};
            out[n++] = (flip){"branch", p, 12, 0x40, 0};
            out[n++] = (flip){"branch", p, 14, 0x10, 0};
            out[n++] = (flip){"branch", p, 16, 0x08, 0};
            if (ptr0 + 8 < PAGE) {
                out[n++] = (flip){"branch", p, ptr0 + 0, 0x01, 0}; /* child page number */
                out[n++] = (flip){"branch", p, ptr0 + 4, 0x01, 0}; /* its bits 32.. */
            }
        } else if ((flags & P_LEAF) && (nl == 0 || p % 7 == 0) && nl++ < 2) {
            out[n++] = (flip){"leaf", p, 10, 0x03, 0};
            out[n++] = (flip){"leaf", p, 12, 0x40, 0};
            out[n++] = (flip){"leaf", p, 14, 0x10, 0};
            out[n++] = (flip){"leaf", p, 16, 0x08, 0};
            if (ptr0 + 16 < PAGE) {
                out[n++] = (flip){"leaf", p, ptr0 + 0, 0x40, 0};  /* data size */
                out[n++] = (flip){"leaf", p, ptr0 + 6, 0x20, 0};  /* key size */
                out[n++] = (flip){"leaf", p, ptr0 + 15, 0x01, 0}; /* data */
            }
        }
        p = next;
    }
    KV_CHECKF(nb > 0 && nl > 1 && no > 0, "pages: %d branch, %d leaf, %d overflow", nb, nl, no);
    return n;
}

/* In every leaf page of two records or more, the header's "lower" made two bytes smaller:
 * the last record of the page is gone, and every page is still well formed. */
static int plan_drops(const uint8_t *f, size_t size, flip *out, int cap)
{
    int n = 0;
    for (long p = 2; (size_t)(p + 1) * PAGE <= size && n < cap;) {
        const uint8_t *pg = f + (size_t)p * PAGE;
        unsigned flags = u16_at(pg + 10);
        if (flags & P_OVERFLOW) {
            unsigned count = (unsigned)u16_at(pg + 12) | (unsigned)u16_at(pg + 14) << 16;
            p += count ? count : 1;
            continue;
        }
        if ((flags & P_LEAF) && u16_at(pg + 12) >= 16 + 2 * 2)
            out[n++] = (flip){"leaf -1", p, 12, 0, -2};
        p++;
    }
    return n;
}

static const char *const page_views[][4] = {
    {"verify"},
    {"list"},
    {"stats"},
    {"show", "allreduce"},
    {"best", "allreduce"},
    {"export"},
    {"export", "--with-source"},
    {"lineage", "1"},
    {"attempts"},
};
#define N_PAGE_VIEWS (sizeof page_views / sizeof page_views[0])

static cmd_result run_view(const char *dir, size_t v)
{
    char *argv[9] = {(char *)kevo_bin, "archive", "--run", (char *)dir};
    for (int i = 0; i < 4 && page_views[v][i]; i++)
        argv[4 + i] = (char *)page_views[v][i];
    return run_cmd(argv);
}

/* Puts a copy of snap in dir as its archive, with fl applied when not NULL. */
static void flipped_copy(const char *snap, const char *dir, const flip *fl)
{
    char path[600];
    KV_REQUIRE(kv_rm_rf(dir) == 0);
    kv_err err = {{0}};
    KV_REQUIRE(kv_mkdir_p(dir, 0755, &err) == 0);
    path_of(path, sizeof path, dir, KV_ARCHIVE_FILE);
    kv_atomic_file af;
    KV_REQUIRE(kv_atomic_open(&af, path, &err) == 0);
    KV_REQUIRE(kv_copy_into(snap, &af, SIZE_MAX, &err) == 0 && kv_atomic_commit(&af, &err) == 0);
    if (!fl)
        return;
    uint8_t b[2];
    off_t at = (off_t)fl->page * PAGE + fl->off;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || pread(fd, b, 2, at) != 2)
        die(path);
    if (fl->add) {
        unsigned v = (u16_at(b) + (unsigned)fl->add) & 0xffff;
        b[0] = (uint8_t)v;
        b[1] = (uint8_t)(v >> 8);
    } else {
        b[0] ^= fl->mask;
    }
    if (pwrite(fd, b, 2, at) != 2 || close(fd) != 0)
        die(path);
}

/* Every view on the flipped archive ends with an exit status (no signal);
 * verify names the damage, and a view that succeeded on the sound archive
 * and fails on this one names it too; a view that succeeds prints what it
 * printed on the sound archive (records dropped by a damaged page header are
 * not a shorter answer). pristine_ok[v]: view v succeeded, printing
 * pristine_out[v]. */
static void flip_case(const char *snap, const flip *fl, const int *pristine_ok,
                      char *const *pristine_out)
{
    char dir[300];
    path_of(dir, sizeof dir, root, "pages");
    flipped_copy(snap, dir, fl);
    const char *const(*views)[4] = page_views;
    for (size_t v = 0; v < N_PAGE_VIEWS; v++) {
        cmd_result r = run_view(dir, v);
        const char *name = views[v][0];
        KV_CHECKF(WIFEXITED(r.status) && WEXITSTATUS(r.status) <= 1,
                  "%s page %ld +%u ^%#x: %s %s: %s %d: %s", fl->kind, fl->page, fl->off, fl->mask,
                  name, views[v][1] ? views[v][1] : "", WIFEXITED(r.status) ? "exit" : "signal",
                  WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status), r.err);
        /* verify finds every flip (each is in a page in use); a view that
         * fails names the damage */
        if (v == 0 || (pristine_ok[v] && !exited(&r, 0)))
            KV_CHECKF(!exited(&r, 0) && strstr(r.err, "damaged") != NULL,
                      "%s page %ld +%u ^%#x: %s %s: exit %d: %s", fl->kind, fl->page, fl->off,
                      fl->mask, name, views[v][1] ? views[v][1] : "", WEXITSTATUS(r.status), r.err);
        if (v != 0 && exited(&r, 0))
            KV_CHECKF(strcmp(r.out, pristine_out[v]) == 0,
                      "%s page %ld +%u ^%#x: %s %s: exit 0 with another answer than on the sound "
                      "archive (%zu bytes instead of %zu)",
                      fl->kind, fl->page, fl->off, fl->mask, name, views[v][1] ? views[v][1] : "",
                      strlen(r.out), strlen(pristine_out[v]));
        KV_CHECKF(!has_control(r.err), "control characters in: %s", r.err);
        if (v == 0)
            printf("  %-8s page %3ld +%-4u ^%#04x  %.*s\n", fl->kind, fl->page, fl->off, fl->mask,
                   (int)strcspn(r.err, "\n"), r.err);
        cmd_free(&r);
    }
}

static void test_page_damage(void)
{
    if (!kevo_bin)
        return;
    char snap[1024];
    make_pristine(snap, sizeof snap);
    char *file = NULL;
    size_t size = 0;
    kv_err err = {{0}};
    KV_REQUIRE(kv_read_file_max(snap, 64u << 20, &file, &size, &err) == 0);
    flip flips[40 + 200];
    int n = plan_flips((const uint8_t *)file, size, flips, 40);
    n += plan_drops((const uint8_t *)file, size, flips + n, 200);
    free(file);
    /* the views on the sound copy: verify says sound */
    char dir[300];
    path_of(dir, sizeof dir, root, "pages");
    flipped_copy(snap, dir, NULL);
    int ok[N_PAGE_VIEWS];
    char *out[N_PAGE_VIEWS];
    for (size_t v = 0; v < N_PAGE_VIEWS; v++) {
        cmd_result r = run_view(dir, v);
        ok[v] = exited(&r, 0);
        KV_CHECKF(v != 0 || (ok[v] && strstr(r.out, ": sound (")), "verify: %s", r.err);
        out[v] = strdup(r.out);
        KV_REQUIRE(out[v]);
        cmd_free(&r);
    }
    for (int i = 0; i < n; i++)
        flip_case(snap, &flips[i], ok, out);
    for (size_t v = 0; v < N_PAGE_VIEWS; v++)
        free(out[v]);
}

/* ---- the writer's check ------------------------------------------------------------ */

typedef enum { META_JUNK, META_TXNID, REPLACED, SHRUNK, META_JUNK_BEFORE_BEGIN } change_kind;

static void change(const char *dir, const char *path, change_kind k)
{
    switch (k) {
    case META_JUNK:
    case META_JUNK_BEFORE_BEGIN: scribble(path, 0, 2 * 4096, -1, 7); break;
    case META_TXNID: { /* a sound header whose newest commit is not ours */
        uint8_t page[2][160];
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 || pread(fd, page[0], 160, 0) != 160 || pread(fd, page[1], 160, 4096) != 160)
            die(path);
        uint64_t t0, t1;
        memcpy(&t0, page[0] + 144, 8);
        memcpy(&t1, page[1] + 144, 8);
        int newer = t1 > t0;
        uint64_t t = (newer ? t1 : t0) + 2;
        memcpy(page[newer] + 144, &t, 8);
        if (pwrite(fd, page[newer], 160, newer ? 4096 : 0) != 160 || close(fd) != 0)
            die(path);
        break;
    }
    case REPLACED: {
        char tmp[700], *data = NULL;
        size_t len = 0;
        snprintf(tmp, sizeof tmp, "%s/other.mdb", dir);
        if (kv_read_file(path, &data, &len, NULL) != 0)
            die(path);
        kv_err err;
        if (kv_write_file_atomic(tmp, data, len, &err) != 0 || rename(tmp, path) != 0)
            die(tmp);
        free(data);
        break;
    }
    case SHRUNK:
        if (truncate(path, size_of(path) - 8192) != 0)
            die(path);
        break;
    }
}

static void writer_case(const char *what, const char *name, change_kind k, const char *want)
{
    char dir[300], path[600];
    path_of(dir, sizeof dir, root, name);
    path_of(path, sizeof path, dir, KV_ARCHIVE_FILE);
    kv_err err = {{0}};
    kv_archive *a = open_writer(dir);
    KV_REQUIRE(a);
    KV_REQUIRE(add_programs(a, 30, 800, 10, 3, &err) == 0);
    kv_snapshot_info snap;
    KV_REQUIRE(kv_snapshot_take(a, 3, &snap, &err) == 0);
    KV_REQUIRE(add_programs(a, 5, 800, 5, 300, &err) == 0); /* a commit after the snapshot */

    kv_txn *t = NULL;
    if (k == META_JUNK_BEFORE_BEGIN) {
        change(dir, path, k);
        KV_CHECK(kv_write_begin(a, &t, &err) == -1);
    } else {
        KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "allreduce");
        uint64_t id;
        KV_REQUIRE(kv_add_program(t, &p, "int refused;", 12, &id, NULL, &err) == 0);
        change(dir, path, k);
        KV_CHECK(kv_txn_commit(t, &err) == -1);
    }
    KV_CHECK_STR_CONTAINS(err.msg, "was changed by another process since this run's last commit");
    KV_CHECK_STR_CONTAINS(err.msg, want);
    KV_CHECK_STR_CONTAINS(err.msg, "stopped before writing to it");
    KV_CHECK_STR_CONTAINS(err.msg, snap.path);
    KV_CHECK_STR_CONTAINS(err.msg, "holds 30 programs");
    KV_CHECK_STR_CONTAINS(err.msg, "then 'kevo run ");
    KV_CHECKF(!has_control(err.msg), "control characters in: %s", err.msg);
    printf("  %-22s %s\n", what, err.msg);
    /* refused from now on; no snapshot may replace the good ones */
    KV_CHECK(kv_write_begin(a, &t, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "changed by another process");
    KV_CHECK(kv_snapshot_take(a, 1, NULL, &err) == -1);
    kv_archive_close(a);
    kv_snapshot_info again;
    KV_CHECKF(kv_snapshot_verify(snap.path, &again, &err) == 0 && again.programs == 30,
              "the snapshot: %s", err.msg);
    KV_CHECK(count_snapshots(dir, NULL, 0) == 1);
}

static void test_writer_check(void)
{
    writer_case("header pages junk", "w-junk", META_JUNK, "bad magic number in header page 0");
    writer_case("junk before begin", "w-junk-begin", META_JUNK_BEFORE_BEGIN, "header page 0");
    writer_case("another commit id", "w-txnid", META_TXNID, "newest commit is transaction");
    writer_case("file replaced", "w-replaced", REPLACED, "the file was replaced");
    writer_case("file shrank", "w-shrunk", SHRUNK, "the file shrank");
}

/* ---- the search loop ---------------------------------------------------------------- */

static int wait_ok(pid_t pid)
{
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

static const char *const kProblems[] = {"allreduce", "allgather"};

static void test_run_snapshots(void)
{
    const char *driver = getenv("KEVO_SEARCH_DRIVER");
    if (!driver) {
        KV_CHECKF(0, "KEVO_SEARCH_DRIVER is not set");
        return;
    }
    char dir[300], why[512];
    kv_search_facts f;
    /* interval 0: one snapshot, at exit, holding everything */
    path_of(dir, sizeof dir, root, "run-exit-only");
    KV_REQUIRE(wait_ok(kv_search_spawn_driver(driver, dir, "120", "0")));
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"snapshot\"") == 1);
    KV_CHECK(kv_search_count_text(dir, "\"when\":\"exit\"") == 1 &&
             kv_search_count_text(dir, "\"when\":\"interval\"") == 0);
    KV_CHECK(count_snapshots(dir, NULL, 0) == 1);
    kv_snapshot_info info;
    kv_err err = {{0}};
    KV_CHECK(kv_snapshot_newest(dir, &info, &err) == 0 &&
             (int64_t)info.programs == count_programs(dir));
    /* every 0.003 min (0.18 s) of a run of 2.4 s or more (600 evaluations of
     * 8 ms on 2 groups): several, named by the second (one taken in the
     * second of the one before replaces it), the newest 3 kept */
    path_of(dir, sizeof dir, root, "run-interval");
    KV_REQUIRE(wait_ok(kv_search_spawn_driver(driver, dir, "600", "0.003")));
    int n = kv_search_count_text(dir, "\"when\":\"interval\"");
    KV_CHECKF(n >= 6, "%d interval snapshots", n);
    KV_CHECK(kv_search_count_text(dir, "\"when\":\"exit\"") == 1 &&
             kv_search_count_text(dir, "snapshot_error") == 0);
    KV_CHECK(count_snapshots(dir, NULL, 0) == 3);
    KV_CHECK(kv_snapshot_newest(dir, &info, &err) == 0 &&
             (int64_t)info.programs == count_programs(dir));
    KV_CHECKF(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0 && f.evaluations == 600,
              "%s; %llu evaluations", why, (unsigned long long)f.evaluations);
    printf("  run: %d snapshots on the way, one at exit\n", n);
}

/* The incident: a run's archive overwritten while it runs (here after a
 * SIGKILL); named as damaged, restored, and the run resumed to its end. */
static void test_restore_resume(void)
{
    const char *driver = getenv("KEVO_SEARCH_DRIVER");
    if (!driver || !kevo_bin) {
        KV_CHECKF(0, "KEVO_SEARCH_DRIVER or KEVO_BIN is not set");
        return;
    }
    char dir[300], path[600], why[512];
    path_of(dir, sizeof dir, root, "run-restore");
    path_of(path, sizeof path, dir, KV_ARCHIVE_FILE);
    pid_t pid = kv_search_spawn_driver(driver, dir, "400", "0.002");
    KV_REQUIRE(pid > 0);
    /* until two snapshots are there, then kill it in mid-run */
    int waited = 0, status = 0;
    while (count_snapshots(dir, NULL, 0) < 2 && waited++ < 400) {
        struct timespec ts = {0, 25 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int running = waitpid(pid, &status, WNOHANG) == 0;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    KV_REQUIRE(running);
    damage(path, JUNK_HEADER);
    char *list[] = {(char *)kevo_bin, "archive", "--run", dir, "list", NULL};
    cmd_result r = run_cmd(list);
    KV_CHECKF(exited(&r, 1) && strstr(r.err, "damaged (") && strstr(r.err, "/snapshots/archive-"),
              "status %d: %s", r.status, r.err);
    cmd_free(&r);
    kv_snapshot_info info;
    kv_err err = {{0}};
    KV_REQUIRE(kv_snapshot_newest(dir, &info, &err) == 0);
    uint8_t had[KV_SHA256_LEN];
    hash_file(path, had);
    restore_ok("killed run", dir, (int64_t)info.programs, had);
    kv_search_facts f;
    KV_CHECKF(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0, "restored: %s", why);
    uint64_t at_restore = f.evaluations;
    KV_REQUIRE(wait_ok(kv_search_spawn_driver(driver, dir, "400", "0.002")));
    KV_CHECKF(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0, "resumed: %s", why);
    KV_CHECKF(f.evaluations == 400 && f.unevaluated == 0, "%llu evaluations, %llu left",
              (unsigned long long)f.evaluations, (unsigned long long)f.unevaluated);
    printf("  resumed from a snapshot at %llu evaluations to the end, 400\n",
           (unsigned long long)at_restore);
}

/* The leaf pages of one database in a compact archive: leaf pages whose
 * first record is of that kind ('k' 'v' version kind: 1 a program, 2 an
 * attempt). */
static int record_leaves(const uint8_t *f, size_t size, int kind, long *out, int cap)
{
    int n = 0;
    for (long p = 2; (size_t)(p + 1) * PAGE <= size && n < cap;) {
        const uint8_t *pg = f + (size_t)p * PAGE;
        unsigned flags = u16_at(pg + 10), ptr0 = u16_at(pg + 16);
        if (flags & P_OVERFLOW) {
            unsigned count = (unsigned)u16_at(pg + 12) | (unsigned)u16_at(pg + 14) << 16;
            p += count ? count : 1;
            continue;
        }
        if ((flags & P_LEAF) && ptr0 + 8 + 8 + 4 < PAGE && u16_at(pg + ptr0 + 6) == 8) {
            const uint8_t *d = pg + ptr0 + 16;
            if (d[0] == 'k' && d[1] == 'v' && d[3] == kind)
                out[n++] = p;
        }
        p++;
    }
    return n;
}

/* A run directory whose archive has one byte changed in a leaf page of the
 * attempts database: resuming it stops with a message that names the
 * damage and the restore (exit 1, never a signal or a sanitizer's report,
 * which one of these flips made before the writer walked its archive in a
 * child), and leaves the archive as it was; a view on it ends with an exit
 * status, naming the damage when it fails (never a sanitizer's report). */
static void test_resume_damage(void)
{
    const char *driver = getenv("KEVO_SEARCH_DRIVER");
    if (!driver || !kevo_bin) {
        KV_CHECKF(0, "KEVO_SEARCH_DRIVER or KEVO_BIN is not set");
        return;
    }
    char dir[300], path[600], lock[620];
    path_of(dir, sizeof dir, root, "run-damaged");
    path_of(path, sizeof path, dir, KV_ARCHIVE_FILE);
    snprintf(lock, sizeof lock, "%s-lock", path);
    KV_REQUIRE(wait_ok(kv_search_spawn_driver(driver, dir, "60", "0")));
    kv_snapshot_info info;
    kv_err err = {{0}};
    KV_REQUIRE(kv_snapshot_newest(dir, &info, &err) == 0);
    /* the snapshot as the archive: compact, so every page is in use */
    char *file = NULL;
    size_t size = 0;
    KV_REQUIRE(kv_read_file_max(info.path, 64u << 20, &file, &size, &err) == 0);
    long leaves[4];
    int nl = record_leaves((const uint8_t *)file, size, 2, leaves, 4);
    KV_REQUIRE(nl >= 2);
    static const struct {
        unsigned off;
        uint8_t mask;
    } flips[] = {{10, 0x03}, {12, 0x40}, {14, 0x10}, {16, 0x08}};
    char *resume[] = {(char *)driver, dir, "11", "60", "8", "2", "3", "0", NULL};
    char *view[] = {(char *)kevo_bin, "archive", "--run", dir, "attempts", NULL};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
            size_t at = (size_t)leaves[l] * PAGE + flips[i].off;
            file[at] ^= (char)flips[i].mask;
            (void)unlink(lock);
            KV_REQUIRE(kv_write_file_atomic(path, file, size, &err) == 0);
            file[at] ^= (char)flips[i].mask;
            uint8_t had[KV_SHA256_LEN], now[KV_SHA256_LEN];
            hash_file(path, had);
            cmd_result r = run_cmd(resume);
            KV_CHECKF(exited(&r, 1) && strstr(r.err, "damaged (") && strstr(r.err, "attempts") &&
                          strstr(r.err, "kevo archive restore") && !strstr(r.err, "Sanitizer") &&
                          !strstr(r.err, "runtime error"),
                      "page %ld +%u ^%#x: resume %s %d: %s", leaves[l], flips[i].off, flips[i].mask,
                      WIFEXITED(r.status) ? "exit" : "signal",
                      WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status), r.err);
            hash_file(path, now);
            KV_CHECKF(memcmp(had, now, sizeof had) == 0, "page %ld +%u: resume changed %s",
                      leaves[l], flips[i].off, path);
            cmd_free(&r);
            r = run_cmd(view);
            KV_CHECKF((exited(&r, 0) || (exited(&r, 1) && strstr(r.err, "damaged ("))) &&
                          !strstr(r.err, "Sanitizer"),
                      "page %ld +%u ^%#x: attempts %s %d: %s", leaves[l], flips[i].off,
                      flips[i].mask, WIFEXITED(r.status) ? "exit" : "signal",
                      WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status), r.err);
            cmd_free(&r);
        }
    }
    free(file);
}

/* The newest snapshot damaged in a leaf page of its programs database:
 * `kevo archive restore` walks a snapshot in a child before it reads it, so
 * it passes over that one to the older, sound one (never a signal or a
 * sanitizer's report from reading the damaged file in its own process). */
static void test_damaged_snapshot(void)
{
    const char *driver = getenv("KEVO_SEARCH_DRIVER");
    if (!driver || !kevo_bin) {
        KV_CHECKF(0, "KEVO_SEARCH_DRIVER or KEVO_BIN is not set");
        return;
    }
    char dir[300], newer[700];
    path_of(dir, sizeof dir, root, "run-damaged-snapshot");
    KV_REQUIRE(wait_ok(kv_search_spawn_driver(driver, dir, "60", "0")));
    kv_snapshot_info good;
    kv_err err = {{0}};
    KV_REQUIRE(kv_snapshot_newest(dir, &good, &err) == 0);
    /* a newer name in the same folder: the damaged copy is the first tried */
    snprintf(newer, sizeof newer, "%.*s/archive-22001231T235959Z.mdb",
             (int)(strrchr(good.path, '/') - good.path), good.path);
    char *file = NULL;
    size_t size = 0;
    KV_REQUIRE(kv_read_file_max(good.path, 64u << 20, &file, &size, &err) == 0);
    long leaves[4];
    int nl = record_leaves((const uint8_t *)file, size, 1, leaves, 4);
    KV_REQUIRE(nl >= 1);
    static const struct {
        unsigned off;
        uint8_t mask;
    } flips[] = {{10, 0x03}, {12, 0x40}, {14, 0x10}, {16, 0x08}, {16, 0x80}};
    char *restore[] = {(char *)kevo_bin, "archive", "restore", dir, NULL};
    for (int l = 0; l < nl && l < 2; l++) {
        for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
            size_t at = (size_t)leaves[l] * PAGE + flips[i].off;
            file[at] ^= (char)flips[i].mask;
            KV_REQUIRE(kv_write_file_atomic(newer, file, size, &err) == 0);
            file[at] ^= (char)flips[i].mask;
            cmd_result r = run_cmd(restore);
            KV_CHECKF(WIFEXITED(r.status) && !strstr(r.err, "Sanitizer") &&
                          !strstr(r.err, "runtime error"),
                      "page %ld +%u ^%#x: restore %s %d: %s", leaves[l], flips[i].off,
                      flips[i].mask, WIFEXITED(r.status) ? "exit" : "signal",
                      WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status), r.err);
            /* a damage that a walk sees makes restore take the sound one */
            if (exited(&r, 0) && !strstr(r.out, "22001231"))
                KV_CHECKF(strstr(r.out, strrchr(good.path, '/') + 1) != NULL,
                          "page %ld +%u: restored from neither snapshot: %s", leaves[l],
                          flips[i].off, r.out);
            cmd_free(&r);
            (void)unlink(newer);
        }
    }
    free(file);
}

/* A symbolic link planted at a run directory's events.jsonl, to a file
 * outside it: the run is refused, naming the link, and the target is
 * untouched (kevo opened it with fopen(..., "a") and wrote through it). */
static void test_events_link(void)
{
    const char *driver = getenv("KEVO_SEARCH_DRIVER");
    if (!driver) {
        KV_CHECKF(0, "KEVO_SEARCH_DRIVER is not set");
        return;
    }
    char dir[300], events[600], target[300];
    path_of(dir, sizeof dir, root, "run-events-link");
    path_of(events, sizeof events, dir, "events.jsonl");
    path_of(target, sizeof target, root, "outside.txt");
    kv_err err = {{0}};
    KV_REQUIRE(kv_mkdir_p(dir, 0755, &err) == 0);
    KV_REQUIRE(kv_write_file_atomic(target, "keep\n", 5, &err) == 0);
    KV_REQUIRE(symlink(target, events) == 0);
    char *run[] = {(char *)driver, dir, "11", "20", "8", "2", "3", "0", NULL};
    cmd_result r = run_cmd(run);
    KV_CHECKF(exited(&r, 1) && strstr(r.err, "events.jsonl is a symbolic link"), "%s %d: %s",
              WIFEXITED(r.status) ? "exit" : "signal",
              WIFEXITED(r.status) ? WEXITSTATUS(r.status) : WTERMSIG(r.status), r.err);
    cmd_free(&r);
    char *text = NULL;
    KV_REQUIRE(kv_read_file(target, &text, NULL, &err) == 0);
    KV_CHECKF(strcmp(text, "keep\n") == 0, "the target became: %.200s", text);
    free(text);
}

int main(void)
{
    kv_test_fresh_dir(root, sizeof root, "snapshot");
    kevo_bin = getenv("KEVO_BIN");
    if (kevo_bin && access(kevo_bin, X_OK) != 0)
        kevo_bin = NULL;
    KV_RUN(test_take_and_rotate);
    KV_RUN(test_snapshot_timing);
    KV_RUN(test_damage);
    KV_RUN(test_restore_in_use);
    KV_RUN(test_page_damage);
    KV_RUN(test_writer_check);
    KV_RUN(test_run_snapshots);
    KV_RUN(test_restore_resume);
    KV_RUN(test_resume_damage);
    KV_RUN(test_damaged_snapshot);
    KV_RUN(test_events_link);
    return kv_test_summary();
}
