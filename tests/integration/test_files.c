/* test_files.c — the files kevo reads and writes that are not what they
 * should be (issue 15, items 4, 8 and 11), through the real kevo binary:
 * reads of configs, problems and sources bounded and refused for FIFOs and
 * devices (without blocking), an archive.mdb that is a FIFO refused, write
 * errors on stdout reported with exit status 1, and --out written through
 * links, FIFOs and devices instead of replacing them.
 *
 * KEVO_BIN names the binary under test, KEVO_SOURCE_DIR the source tree. */
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

static const char *bin;
static const char *src_dir;
static char dir[256]; /* scratch: captured output, made files */

typedef struct {
    int status;
    char err[4096];
} result;

/* Runs kevo with the NULL-terminated arguments, stdout into out (NULL: a
 * file in dir), within 5 s: a FIFO that blocks it shows as SIGALRM. */
static void kevo_out(result *r, const char *out, const char *first, ...)
{
    const char *argv[16];
    int argc = 0;
    argv[argc++] = bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 15; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    r->status = kv_test_spawn(argv, out ? out : out_path, err_path, 5);
    r->err[0] = 0;
    char *text = NULL;
    kv_err err;
    if (kv_read_file(err_path, &text, NULL, &err) == 0) {
        snprintf(r->err, sizeof r->err, "%s", text);
        free(text);
    }
    KV_CHECKF(strstr(r->err, "Sanitizer") == NULL && strstr(r->err, "runtime error:") == NULL,
              "kevo %s: %s", argv[1], r->err);
}

#define kevo(r, ...) kevo_out((r), NULL, __VA_ARGS__, (const char *)NULL)
#define kevo_to(r, out, ...) kevo_out((r), (out), __VA_ARGS__, (const char *)NULL)

#define CHECK_FAILS_WITH(r, text)                                                        \
    do {                                                                                 \
        KV_CHECKF((r).status == 1, "exit %d, want 1: %s", (r).status, (r).err);          \
        KV_CHECKF(strstr((r).err, (text)) != NULL, "want '%s' in: %s", (text), (r).err); \
    } while (0)

static void path_in(char *out, size_t cap, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    KV_CHECKF(n >= 0 && (size_t)n < cap, "%s/%s: path too long", dir, name);
}

/* ---- item 11: stdout --------------------------------------------------------------- */

static void test_stdout_full(void)
{
    char config[512], problems[512];
    snprintf(config, sizeof config, "%s/configs/quickstart.json", src_dir);
    snprintf(problems, sizeof problems, "%s/problems", src_dir);
    const char *want = "writing to standard output: No space left on device";
    result r;
    kevo_to(&r, "/dev/full", "config", "defaults");
    CHECK_FAILS_WITH(r, want);
    kevo_to(&r, "/dev/full", "config", "show", config);
    CHECK_FAILS_WITH(r, want);
    kevo_to(&r, "/dev/full", "problems", "--root", problems);
    CHECK_FAILS_WITH(r, want);
    kevo_to(&r, "/dev/full", "problems", "--root", problems, "--json");
    CHECK_FAILS_WITH(r, want);
    kevo_to(&r, "/dev/full", "--help");
    CHECK_FAILS_WITH(r, want);
    kevo_to(&r, "/dev/full", "--version");
    CHECK_FAILS_WITH(r, want);
    /* the same commands on a working stdout succeed */
    kevo(&r, "config", "defaults");
    KV_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
    kevo(&r, "problems", "--root", problems);
    KV_CHECKF(r.status == 0, "exit %d: %s", r.status, r.err);
}

/* ---- item 8: bounded, non-blocking reads ------------------------------------------- */

static void test_config_not_regular(void)
{
    char fifo[512], link[512], big[512];
    path_in(fifo, sizeof fifo, "config.fifo");
    path_in(link, sizeof link, "zero.json");
    path_in(big, sizeof big, "big.json");
    KV_REQUIRE(mkfifo(fifo, 0644) == 0);
    KV_REQUIRE(symlink("/dev/zero", link) == 0);

    result r;
    kevo(&r, "config", "check", "/dev/zero");
    CHECK_FAILS_WITH(r, "/dev/zero is a character device, not a regular file");
    kevo(&r, "config", "check", link);
    CHECK_FAILS_WITH(r, "zero.json is a character device, not a regular file");
    kevo(&r, "config", "check", fifo); /* would block on open without O_NONBLOCK */
    CHECK_FAILS_WITH(r, "config.fifo is a FIFO, not a regular file");
    kevo(&r, "config", "show", dir);
    CHECK_FAILS_WITH(r, "is a directory, not a regular file");

    /* a config over the limit: valid JSON, padded with spaces */
    FILE *f = fopen(big, "w");
    KV_REQUIRE(f != NULL);
    fputs("{", f);
    for (size_t i = 0; i < KV_MAX_CONFIG_BYTES; i++)
        fputc(' ', f);
    fputs("}\n", f);
    KV_REQUIRE(fclose(f) == 0);
    kevo(&r, "config", "check", big);
    char want[128];
    snprintf(want, sizeof want, "big.json is larger than the limit of %zu bytes",
             (size_t)KV_MAX_CONFIG_BYTES);
    CHECK_FAILS_WITH(r, want);
}

/* A problem folder whose problem.json is a link to /dev/zero, then a FIFO. */
static void test_problem_not_regular(void)
{
    char root[256], prob[512], json[600];
    path_in(root, sizeof root, "problems");
    snprintf(prob, sizeof prob, "%s/zero", root);
    snprintf(json, sizeof json, "%s/problem.json", prob);
    kv_err err;
    KV_REQUIRE(kv_mkdir_p(prob, 0755, &err) == 0);
    KV_REQUIRE(symlink("/dev/zero", json) == 0);
    result r;
    kevo(&r, "problems", "--root", root);
    KV_CHECKF(r.status != 0 && r.status < 128, "exit %d: %s", r.status, r.err);
    KV_CHECK_STR_CONTAINS(r.err, "problem.json is a character device, not a regular file");

    KV_REQUIRE(unlink(json) == 0);
    KV_REQUIRE(mkfifo(json, 0644) == 0);
    kevo(&r, "problems", "--root", root);
    KV_CHECKF(r.status != 0 && r.status < 128, "exit %d: %s", r.status, r.err);
    KV_CHECK_STR_CONTAINS(r.err, "problem.json is a FIFO, not a regular file");
}

/* kv_read_file_max itself: the limit holds for a file the size of the limit
 * plus one, and a file of exactly the limit is read whole. */
static void test_read_limit(void)
{
    char path[512];
    path_in(path, sizeof path, "limit.txt");
    char buf[65];
    memset(buf, 'x', sizeof buf);
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(path, buf, 64, &err) == 0);
    char *text = NULL;
    size_t len = 0;
    KV_CHECK(kv_read_file_max(path, 64, &text, &len, &err) == 0 && len == 64);
    free(text);
    text = NULL;
    KV_CHECK(kv_read_file_max(path, 63, &text, &len, &err) != 0 && text == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "is larger than the limit of 63 bytes");
    /* a device reports size 0 and never ends: refused before a byte is read */
    KV_CHECK(kv_read_file_max("/dev/zero", 64, &text, &len, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "/dev/zero is a character device, not a regular file");
}

/* archive.mdb as a FIFO: refused, not waited on, by every reader. */
static void test_archive_fifo(void)
{
    char run[256], mdb[512];
    path_in(run, sizeof run, "fifo-run");
    snprintf(mdb, sizeof mdb, "%s/archive.mdb", run);
    kv_err err;
    KV_REQUIRE(kv_mkdir_p(run, 0755, &err) == 0);
    KV_REQUIRE(mkfifo(mdb, 0644) == 0);
    result r;
    kevo(&r, "archive", "--run", run, "list");
    CHECK_FAILS_WITH(r, "archive.mdb is a FIFO, not a regular file");
    kevo(&r, "archive", "--run", run, "stats");
    CHECK_FAILS_WITH(r, "archive.mdb is a FIFO, not a regular file");
}

/* ---- item 4: --out through links and special files -------------------------------- */

#define OUT_SOURCE "__global__ void k() {} // the only program\n"

/* A run with one ok program of allreduce, for best and export. */
static void make_run(char *run, size_t cap)
{
    path_in(run, cap, "out-run");
    kv_archive_opts ao = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "allreduce");
    snprintf(p.op, sizeof p.op, "seed");
    uint64_t id;
    KV_REQUIRE(kv_archive_open(run, &ao, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    KV_REQUIRE(kv_add_program(t, &p, OUT_SOURCE, strlen(OUT_SOURCE), &id, NULL, &err) == 0);
    p.id = id;
    p.verdict = KV_VERDICT_OK;
    p.speedup = 1.5;
    p.n_sizes = 1;
    snprintf(p.sizes[0].name, sizeof p.sizes[0].name, "small");
    p.sizes[0].ref_us = 15;
    p.sizes[0].cand_us = 10;
    p.sizes[0].ok = 1;
    KV_REQUIRE(kv_set_result(t, &p, &err) == 0 && kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);
}

/* kevo archive best/export --out out (with the view's words); exit 0. */
static void write_out(const char *run, const char *view, const char *out)
{
    result r;
    if (strcmp(view, "best") == 0)
        kevo(&r, "archive", "--run", run, "best", "allreduce", "--out", out);
    else
        kevo(&r, "archive", "--run", run, "export", "--format", "json", "--out", out);
    KV_CHECKF(r.status == 0, "%s --out %s: exit %d: %s", view, out, r.status, r.err);
}

static void test_out_link(void)
{
    char run[256], target[512], link[512];
    make_run(run, sizeof run);
    path_in(target, sizeof target, "target.txt");
    path_in(link, sizeof link, "link.txt");
    kv_err err;
    const char *views[] = {"best", "export"};
    for (int v = 0; v < 2; v++) {
        unlink(link);
        KV_REQUIRE(kv_write_file_atomic(target, "old\n", 4, &err) == 0);
        KV_REQUIRE(symlink(target, link) == 0);
        write_out(run, views[v], link);
        struct stat st;
        KV_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode)); /* the link stays */
        char *text = NULL;
        KV_REQUIRE(kv_read_file(target, &text, NULL, &err) == 0);
        KV_CHECKF(strstr(text, v == 0 ? "the only program" : "\"allreduce\""), "%s: %s", views[v],
                  text);
        free(text);
    }
    /* a regular file is still replaced by rename: a new inode */
    struct stat before, after;
    KV_REQUIRE(stat(target, &before) == 0);
    write_out(run, "export", target);
    KV_CHECK(stat(target, &after) == 0 && after.st_ino != before.st_ino);
    /* a dangling link: its target is created */
    char dangling[512], made[512];
    path_in(dangling, sizeof dangling, "dangling.txt");
    path_in(made, sizeof made, "made.txt");
    KV_REQUIRE(symlink(made, dangling) == 0);
    write_out(run, "best", dangling);
    struct stat st;
    KV_CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    KV_CHECK(stat(made, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0);
}

/* A FIFO is written through, to a reader (a child here), and stays a FIFO. */
static void test_out_fifo(void)
{
    char run[256], fifo[512], got[512];
    make_run(run, sizeof run);
    path_in(fifo, sizeof fifo, "out.fifo");
    path_in(got, sizeof got, "from-fifo.txt");
    KV_REQUIRE(mkfifo(fifo, 0644) == 0);
    const char *views[] = {"best", "export"};
    for (int v = 0; v < 2; v++) {
        fflush(NULL);
        pid_t reader = fork();
        KV_REQUIRE(reader >= 0);
        if (reader == 0) { /* cat fifo > got; a kevo that never writes it fails the test */
            alarm(10);
            int in = open(fifo, O_RDONLY), out = open(got, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            char buf[4096];
            ssize_t n;
            while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
                if (write(out, buf, (size_t)n) != n)
                    _exit(1);
            _exit(in >= 0 && out >= 0 ? 0 : 1);
        }
        write_out(run, views[v], fifo);
        int status = 0;
        KV_CHECK(waitpid(reader, &status, 0) == reader && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0);
        struct stat st;
        KV_CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
        char *text = NULL;
        kv_err err;
        KV_REQUIRE(kv_read_file(got, &text, NULL, &err) == 0);
        KV_CHECKF(strstr(text, v == 0 ? "the only program" : "\"allreduce\""), "%s: %s", views[v],
                  text);
        free(text);
    }
}

/* Our own node of /dev/<name> (major 1, minor) in the scratch directory
 * when we may make one (root), else /dev/<name> itself. */
static void dev_node(char *out, size_t cap, const char *name, unsigned minor)
{
    path_in(out, cap, name);
    if (mknod(out, S_IFCHR | 0666, makedev(1, minor)) != 0)
        snprintf(out, cap, "/dev/%s", name);
}

/* A null device stays a device: a rename would have replaced it. As root
 * (who could rename over /dev/null) the test makes its own node of it, so
 * that a kevo without the fix damages nothing outside the test; otherwise
 * /dev/null itself, where a user cannot put a temporary file either. */
static void test_out_dev_null(void)
{
    char run[256], null_dev[512], full_dev[512];
    make_run(run, sizeof run);
    dev_node(null_dev, sizeof null_dev, "null", 3);
    dev_node(full_dev, sizeof full_dev, "full", 7);
    write_out(run, "best", null_dev);
    write_out(run, "export", null_dev);
    struct stat st;
    KV_CHECK(stat(null_dev, &st) == 0 && S_ISCHR(st.st_mode));
    result r;
    kevo(&r, "archive", "--run", run, "export", "--format", "json", "--out", full_dev);
    CHECK_FAILS_WITH(r, "full: No space left on device");
    KV_CHECK(stat(full_dev, &st) == 0 && S_ISCHR(st.st_mode));
    kevo(&r, "archive", "--run", run, "export", "--format", "json", "--out", dir);
    CHECK_FAILS_WITH(r, "is a directory, not a file to write");
    /* item 11 for the archive views: their stdout on a full device */
    kevo_to(&r, "/dev/full", "archive", "--run", run, "stats");
    CHECK_FAILS_WITH(r, "writing to standard output: No space left on device");
    kevo_to(&r, "/dev/full", "archive", "--run", run, "export", "--format", "json");
    CHECK_FAILS_WITH(r, "writing to standard output: No space left on device");
}

/* The files kevo writes in a run directory (kv_open_own: events.jsonl, the
 * workers' logs) are never written through a symbolic link planted at their
 * name, nor a FIFO: refused with a message, the link's target untouched. */
static void test_own_file_link(void)
{
    char target[512], link[512], fifo[512], own[512];
    path_in(target, sizeof target, "outside.txt");
    path_in(link, sizeof link, "events-link.jsonl");
    path_in(fifo, sizeof fifo, "events-fifo.jsonl");
    path_in(own, sizeof own, "events-own.jsonl");
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(target, "keep\n", 5, &err) == 0);
    unlink(link);
    KV_REQUIRE(symlink(target, link) == 0);
    for (int append = 0; append < 2; append++) {
        err.msg[0] = 0;
        FILE *f = kv_fopen_own(link, append, &err);
        KV_CHECKF(f == NULL && strstr(err.msg, "is a symbolic link"), "append %d: %s", append,
                  err.msg);
        if (f)
            fclose(f);
    }
    char *text = NULL;
    KV_REQUIRE(kv_read_file(target, &text, NULL, &err) == 0);
    KV_CHECKF(strcmp(text, "keep\n") == 0, "the target became: %s", text);
    free(text);
    unlink(fifo);
    KV_REQUIRE(mkfifo(fifo, 0600) == 0);
    KV_CHECKF(kv_open_own(fifo, 1, &err) < 0, "a FIFO was opened");
    /* a regular file: appended to */
    unlink(own);
    for (int i = 0; i < 2; i++) {
        FILE *f = kv_fopen_own(own, 1, &err);
        KV_REQUIRE(f != NULL);
        KV_CHECK(fputs("line\n", f) >= 0 && fclose(f) == 0);
    }
    KV_REQUIRE(kv_read_file(own, &text, NULL, &err) == 0);
    KV_CHECK(strcmp(text, "line\nline\n") == 0);
    free(text);
}

/* A folder kevo writes its own files in, at a name another user could make
 * first (the default log folder, the compile cache's fallback): taken only
 * when it is kevo's own directory and others may not write it. */
static void test_own_dir(void)
{
    char fresh[512], open_dir[512], link[512], other[512];
    path_in(fresh, sizeof fresh, "own-fresh/logs");
    path_in(open_dir, sizeof open_dir, "own-open");
    path_in(link, sizeof link, "own-link");
    path_in(other, sizeof other, "own-other");
    kv_err err = {{0}};
    KV_CHECKF(kv_mkdir_own(fresh, 0755, &err) == 0, "a new folder: %s", err.msg);
    KV_CHECKF(kv_mkdir_own(fresh, 0755, &err) == 0, "the same folder again: %s", err.msg);
    /* made first, open to everyone (as /tmp/kevo-logs-0 could be) */
    KV_REQUIRE(mkdir(open_dir, 0700) == 0 && chmod(open_dir, 0777) == 0);
    err.msg[0] = 0;
    KV_CHECKF(kv_mkdir_own(open_dir, 0755, &err) != 0 && strstr(err.msg, "writable by others"),
              "a folder open to all was taken: %s", err.msg);
    /* a link to a folder of kevo's own */
    unlink(link);
    KV_REQUIRE(symlink(fresh, link) == 0);
    err.msg[0] = 0;
    KV_CHECKF(kv_mkdir_own(link, 0755, &err) != 0 && strstr(err.msg, "not a directory"),
              "a link was taken: %s", err.msg);
    /* another user's (only root can make one here) */
    if (geteuid() == 0) {
        KV_REQUIRE(mkdir(other, 0755) == 0 && chown(other, 65534, 65534) == 0);
        err.msg[0] = 0;
        KV_CHECKF(kv_mkdir_own(other, 0755, &err) != 0 && strstr(err.msg, "belongs to uid 65534"),
                  "another user's folder was taken: %s", err.msg);
    }
}

int main(void)
{
    bin = getenv("KEVO_BIN");
    src_dir = getenv("KEVO_SOURCE_DIR");
    if (!bin || !*bin || !src_dir) {
        fprintf(stderr, "test_files: KEVO_BIN or KEVO_SOURCE_DIR is not set (ctest sets them); "
                        "skipping\n");
        return 77;
    }
    kv_test_fresh_dir(dir, sizeof dir, "files");
    KV_RUN(test_stdout_full);
    KV_RUN(test_read_limit);
    KV_RUN(test_config_not_regular);
    KV_RUN(test_problem_not_regular);
    KV_RUN(test_archive_fifo);
    KV_RUN(test_out_link);
    KV_RUN(test_out_fifo);
    KV_RUN(test_out_dev_null);
    KV_RUN(test_own_file_link);
    KV_RUN(test_own_dir);
    return kv_test_summary();
}
