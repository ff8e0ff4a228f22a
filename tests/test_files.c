/* test_files.c — the files kevo reads and writes that are not what they
 * should be (issue 15, items 4, 8 and 11), through the real kevo binary:
 * reads of configs, problems and sources bounded and refused for FIFOs and
 * devices (without blocking), an archive.mdb that is a FIFO refused, and
 * write errors on stdout reported with exit status 1.
 *
 * KEVO_BIN names the binary under test, KEVO_SOURCE_DIR the source tree. */
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kevo/fsutil.h"
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

#define CHECK_FAILS_WITH(r, text)                                                          \
    do {                                                                                   \
        KV_CHECKF((r).status == 1, "exit %d, want 1: %s", (r).status, (r).err);            \
        KV_CHECKF(strstr((r).err, (text)) != NULL, "want '%s' in: %s", (text), (r).err);   \
    } while (0)

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
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

int main(void)
{
    bin = getenv("KEVO_BIN");
    src_dir = getenv("KEVO_SOURCE_DIR");
    if (!bin || !src_dir) {
        fprintf(stderr, "test_files: KEVO_BIN or KEVO_SOURCE_DIR is not set (ctest sets them); "
                        "skipping\n");
        return 0;
    }
    kv_test_fresh_dir(dir, sizeof dir, "files");
    KV_RUN(test_stdout_full);
    KV_RUN(test_read_limit);
    KV_RUN(test_config_not_regular);
    KV_RUN(test_problem_not_regular);
    KV_RUN(test_archive_fifo);
    return kv_test_summary();
}
