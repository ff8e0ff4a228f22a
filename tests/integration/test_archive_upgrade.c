/* test_archive_upgrade.c — kevo archive upgrade on a schema-1 archive that
 * the kevo of that schema wrote (tests/fixtures/archive-v1, made by its
 * make_fixture.c): schema 2 refuses to open it and names the upgrade; an
 * upgrade killed half way by a full disk (RLIMIT_FSIZE) leaves the archive
 * byte for byte as it was; the upgrade then gives every program's source
 * back byte for byte (the SHA-256s the old kevo read back), keeps the old
 * file aside unchanged, passes the full walk, accepts new programs, and a
 * second upgrade does nothing. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "archive/upgrade.h"
#include "test.h"
#include "test_util.h"

static const char *bin;
static char fixture[4096];

static int hash_file(const char *path, uint8_t out[KV_SHA256_LEN])
{
    char *data = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    if (kv_read_file_max(path, (size_t)1 << 30, &data, &len, &err) != 0)
        return -1;
    int rc = kv_sha256(data, len, out);
    free(data);
    return rc;
}

/* Copies the fixture's archive into a new run directory. */
static void fresh_run(char *run, size_t cap, const char *tag)
{
    kv_test_fresh_dir(run, cap, tag);
    char src[4200], dst[4200];
    snprintf(src, sizeof src, "%s/archive.mdb", fixture);
    snprintf(dst, sizeof dst, "%s/archive.mdb", run);
    char *data = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    KV_REQUIRE(kv_read_file(src, &data, &len, &err) == 0);
    KV_REQUIRE(kv_write_file_atomic(dst, data, len, &err) == 0);
    free(data);
}

/* Files in run whose names start with prefix. */
static int count_named(const char *run, const char *prefix)
{
    DIR *d = opendir(run);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

/* `kevo archive upgrade run` with files limited to fsize bytes (0: no
 * limit); its exit status, stderr in errfile. */
static int upgrade_cli(const char *run, long fsize, const char *outfile, const char *errfile)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (fsize > 0) {
            struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
            signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG */
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(126);
        }
        if (!freopen(outfile, "w", stdout) || !freopen(errfile, "w", stderr))
            _exit(126);
        execl(bin, bin, "archive", "upgrade", run, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_refused_before_upgrade(void)
{
    char run[4096];
    fresh_run(run, sizeof run, "upg-refused");
    kv_archive_opts ro = {.readonly = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_CHECK(kv_archive_open(run, &ro, &a, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "archive schema version 1; this kevo reads version 2");
    KV_CHECK_STR_CONTAINS(err.msg, "kevo archive upgrade");
    kv_archive_opts wo = {0};
    KV_CHECK(kv_archive_open(run, &wo, &a, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "schema version 1");
}

static void test_failure_loses_nothing(void)
{
    char run[4096], path[4200], out[4200], errf[4200];
    fresh_run(run, sizeof run, "upg-fail");
    snprintf(path, sizeof path, "%s/archive.mdb", run);
    snprintf(out, sizeof out, "%s.out", run);
    snprintf(errf, sizeof errf, "%s.err", run);
    uint8_t before[KV_SHA256_LEN], after[KV_SHA256_LEN];
    KV_REQUIRE(hash_file(path, before) == 0);
    struct stat st;
    KV_REQUIRE(stat(path, &st) == 0);
    /* files may not grow past half the old archive: the new one fails as
     * it is written, after its header and some of its pages */
    int rc = upgrade_cli(run, (long)st.st_size / 2, out, errf);
    char *msg = kv_test_slurp(errf, NULL);
    KV_CHECKF(rc == 1, "exit %d: %s", rc, msg);
    KV_CHECK_STR_CONTAINS(msg, "archive.mdb.upgrade");
    free(msg);
    KV_CHECK(hash_file(path, after) == 0 && memcmp(before, after, sizeof before) == 0);
    KV_CHECK(count_named(run, "archive.mdb.upgrade") == 0); /* removed */
    KV_CHECK(count_named(run, "archive.mdb.v1") == 0);      /* nothing moved */
    KV_CHECK(count_named(run, "archive.mdb") == 1);
    /* and the same archive upgrades afterwards */
    rc = upgrade_cli(run, 0, out, errf);
    msg = kv_test_slurp(errf, NULL);
    KV_CHECKF(rc == 0, "exit %d: %s", rc, msg);
    free(msg);
}

/* Every program of sources.txt reads back with its length and SHA-256. */
static void check_sources(const char *run)
{
    char list[4200];
    snprintf(list, sizeof list, "%s/sources.txt", fixture);
    FILE *f = fopen(list, "r");
    KV_REQUIRE(f != NULL);
    kv_archive_opts ro = {.readonly = 1};
    kv_archive *a;
    kv_txn *t;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(run, &ro, &a, &err) == 0);
    KV_REQUIRE(kv_read_begin(a, &t, &err) == 0);
    unsigned long long id;
    size_t want_len;
    char want_hex[80];
    int n = 0, same = 0;
    while (fscanf(f, "%llu %zu %79s", &id, &want_len, want_hex) == 3) {
        n++;
        char *src = NULL;
        size_t len = 0;
        uint8_t d[KV_SHA256_LEN];
        char hex[KV_SHA256_HEX_LEN];
        if (kv_get_source(t, id, &src, &len, &err) != 0) {
            fprintf(stderr, "  program %llu: %s\n", id, err.msg);
            continue;
        }
        if (kv_sha256(src, len, d) == 0) {
            kv_sha256_hex(d, hex);
            if (len == want_len && strcmp(hex, want_hex) == 0)
                same++;
            else
                fprintf(stderr, "  program %llu: %zu bytes %s, want %zu %s\n", id, len, hex,
                        want_len, want_hex);
        }
        free(src);
    }
    fclose(f);
    KV_CHECK(n == 13);
    KV_CHECKF(same == n, "%d of %d sources the same", same, n);
    kv_counters c;
    KV_CHECK(kv_get_counters(t, &c, &err) == 0 && c.programs == 13 && c.attempts == 13);
    kv_run_state s;
    KV_CHECK(kv_get_state(t, &s, &err) == 0 && s.evaluations == 13 && s.rng[3] == 4);
    char *json = NULL;
    char hash[KV_SHA256_HEX_LEN];
    KV_CHECK(kv_get_config(t, &json, hash, &err) == 0 && strcmp(json, "{\"fixture\":1}") == 0);
    free(json);
    kv_program p;
    KV_CHECK(kv_get_program(t, 4, &p, &err) == 0 && p.n_parents == 1 && p.parents[0] == 2 &&
             p.verdict == KV_VERDICT_MISMATCH && strcmp(p.problem, "alltoall") == 0);
    kv_program_clear(&p);
    uint64_t ids[4];
    KV_CHECK(kv_top_k(t, "allreduce", 4, ids, NULL, &err) == 4 && ids[0] == 13);
    kv_txn_abort(t);
    kv_archive_close(a);
}

static void test_upgrade(void)
{
    char run[4096], path[4200], out[4200], errf[4200], junk[4200];
    fresh_run(run, sizeof run, "upg");
    snprintf(path, sizeof path, "%s/archive.mdb", run);
    snprintf(out, sizeof out, "%s.out", run);
    snprintf(errf, sizeof errf, "%s.err", run);
    uint8_t before[KV_SHA256_LEN], kept[KV_SHA256_LEN];
    KV_REQUIRE(hash_file(path, before) == 0);
    /* what a killed upgrade left behind is replaced */
    snprintf(junk, sizeof junk, "%s/archive.mdb.upgrade", run);
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(junk, "junk", 4, &err) == 0);

    int rc = upgrade_cli(run, 0, out, errf);
    char *o = kv_test_slurp(out, NULL), *e = kv_test_slurp(errf, NULL);
    KV_CHECKF(rc == 0, "exit %d: %s", rc, e);
    KV_CHECK_STR_CONTAINS(o, "from schema version 1 to 2");
    KV_CHECK_STR_CONTAINS(o, "13 sources");
    KV_CHECK_STR_CONTAINS(o, "kept as");
    free(o);
    free(e);
    KV_CHECK(count_named(run, "archive.mdb.upgrade") == 0);
    KV_CHECK(count_named(run, "archive.mdb.v1-") == 1);
    /* the old file is kept, unchanged */
    DIR *d = opendir(run);
    KV_REQUIRE(d != NULL);
    struct dirent *de;
    char aside[4400] = "";
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, "archive.mdb.v1-", 15) == 0)
            snprintf(aside, sizeof aside, "%s/%s", run, de->d_name);
    closedir(d);
    KV_CHECK(aside[0] && hash_file(aside, kept) == 0 && memcmp(kept, before, sizeof kept) == 0);

    check_sources(run);
    kv_walk_info w;
    KV_CHECKF(kv_archive_walk(run, NULL, 1, stderr, &w, &err) == 0 && w.damaged == 0, "%s",
              err.msg);

    /* a second upgrade has nothing to do */
    rc = upgrade_cli(run, 0, out, errf);
    o = kv_test_slurp(out, NULL);
    KV_CHECK(rc == 0);
    KV_CHECK_STR_CONTAINS(o, "already has schema version 2");
    free(o);

    /* the upgraded archive takes new programs, and they read back */
    kv_archive_opts wo = {0};
    kv_archive *a;
    kv_txn *t;
    KV_REQUIRE(kv_archive_open(run, &wo, &a, &err) == 0);
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    char src[5000];
    kv_test_random_source(src, sizeof src, 77, 4000);
    kv_program p = {0};
    snprintf(p.problem, sizeof p.problem, "allreduce");
    uint64_t id;
    int existed;
    KV_REQUIRE(kv_add_program(t, &p, src, 4000, &id, &existed, &err) == 0);
    KV_CHECK(id == 14 && !existed);
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    KV_REQUIRE(kv_read_begin(a, &t, &err) == 0);
    char *back = NULL;
    size_t blen = 0;
    KV_CHECK(kv_get_source(t, 14, &back, &blen, &err) == 0 && blen == 4000 &&
             memcmp(back, src, 4000) == 0);
    free(back);
    kv_txn_abort(t);
    kv_archive_close(a);

    /* refused while another process has the archive open (this one, reading) */
    kv_archive_opts ro = {.readonly = 1};
    KV_REQUIRE(kv_archive_open(run, &ro, &a, &err) == 0);
    rc = upgrade_cli(run, 0, out, errf);
    e = kv_test_slurp(errf, NULL);
    KV_CHECK(rc == 1);
    KV_CHECK_STR_CONTAINS(e, "is open in process");
    free(e);
    kv_archive_close(a);
}

int main(void)
{
    bin = getenv("KEVO_BIN");
    const char *srcdir = getenv("KEVO_SOURCE_DIR");
    if (!bin || !srcdir) {
        fprintf(stderr, "KEVO_BIN and KEVO_SOURCE_DIR must be set (ctest sets them)\n");
        return 1;
    }
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/archive-v1", srcdir);
    KV_RUN(test_refused_before_upgrade);
    KV_RUN(test_failure_loses_nothing);
    KV_RUN(test_upgrade);
    return kv_test_summary();
}
