/* test_runlock.c — one writer per run directory (issue 15, item 1): while
 * a search ($KEVO_SEARCH_DRIVER) writes a run, a second search, `kevo run
 * DIR`, `kevo seed` and `kevo archive restore` are refused at once with the holder's pid
 * and start time, readers (`kevo archive list`, `stats`) work, and once the
 * first writer is gone, stopped or killed, a new one gets in. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "search_check.h"
#include "test.h"
#include "test_util.h"

static const char *bin, *driver;
static char scratch[256];

typedef struct {
    int status;
    char *err;
} result;

/* Runs argv (NULL-terminated) within 60 s, stderr kept. */
static void run(result *r, const char *const *argv)
{
    char err_path[512];
    snprintf(err_path, sizeof err_path, "%s/stderr", scratch);
    r->status = kv_test_spawn(argv, NULL, err_path, 60);
    kv_err err;
    if (kv_read_file(err_path, &r->err, NULL, &err) != 0)
        r->err = strdup("");
    KV_CHECKF(strstr(r->err, "Sanitizer") == NULL && strstr(r->err, "runtime error:") == NULL,
              "%s: %s", argv[1], r->err);
}

/* Waits (10 s at most) until dir's lock file names pid: 0, or -1. */
static int wait_for_lock(const char *dir, pid_t pid)
{
    char path[512], want[64];
    snprintf(path, sizeof path, "%s/%s", dir, KV_RUN_LOCK_FILE);
    snprintf(want, sizeof want, "kevo pid %ld since ", (long)pid);
    for (int i = 0; i < 1000; i++) {
        char *text = NULL;
        kv_err err;
        int found = kv_read_file(path, &text, NULL, &err) == 0 && strstr(text, want) == text;
        free(text);
        if (found)
            return 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static int wait_exit(pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A search on dir that holds its lock (10 s at most to take it): its pid,
 * or -1. */
static pid_t start_writer(const char *dir)
{
    pid_t pid = kv_search_spawn_driver(driver, dir, "100000", NULL);
    if (pid > 0 && wait_for_lock(dir, pid) == 0)
        return pid;
    if (pid > 0) {
        kill(pid, SIGKILL);
        wait_exit(pid);
    }
    return -1;
}

/* A new search on dir takes the lock (its pid in the lock file) and stops
 * on SIGTERM with exit status 0: 1 when all of that happened. */
static int writer_gets_in(const char *dir)
{
    pid_t pid = kv_search_spawn_driver(driver, dir, "100000", NULL);
    if (pid <= 0)
        return 0;
    int in = wait_for_lock(dir, pid) == 0;
    kill(pid, SIGTERM);
    return wait_exit(pid) == 0 && in;
}

static void test_second_writer_refused(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "runlock");
    pid_t first = start_writer(dir);
    KV_REQUIRE(first > 0);
    /* wait for its first result, so that readers find a whole archive: the
     * run's configuration is committed after the seeds, after "start" */
    for (int i = 0; i < 1000 && kv_search_count_text(dir, "\"type\":\"result\"") < 1; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    char holder[64];
    snprintf(holder, sizeof holder, "is in use by kevo pid %ld since 20", (long)first);

    result r;
    const char *second[] = {driver, dir, "11", "100000", NULL};
    run(&r, second);
    KV_CHECKF(r.status == 1, "second writer: exit %d: %s", r.status, r.err);
    KV_CHECK_STR_CONTAINS(r.err, holder);
    KV_CHECK_STR_CONTAINS(r.err, "; one writer per run");
    free(r.err);

    const char *resume[] = {bin, "run", dir, NULL};
    run(&r, resume);
    KV_CHECKF(r.status == 1, "kevo run: exit %d: %s", r.status, r.err);
    KV_CHECK_STR_CONTAINS(r.err, holder);
    free(r.err);

    const char *seed[] = {bin, "seed", "--run", dir, "--problem", "allreduce", NULL};
    run(&r, seed);
    KV_CHECKF(r.status == 1, "kevo seed: exit %d: %s", r.status, r.err);
    KV_CHECK_STR_CONTAINS(r.err, holder);
    free(r.err);

    const char *restore[] = {bin, "archive", "--run", dir, "restore", NULL};
    run(&r, restore);
    KV_CHECKF(r.status == 1, "restore: exit %d: %s", r.status, r.err);
    KV_CHECK_STR_CONTAINS(r.err, holder);
    free(r.err);

    /* readers are not writers */
    const char *list[] = {bin, "archive", "--run", dir, "list", NULL};
    run(&r, list);
    KV_CHECKF(r.status == 0, "list during the run: exit %d: %s", r.status, r.err);
    free(r.err);
    const char *stats[] = {bin, "archive", "--run", dir, "stats", NULL};
    run(&r, stats);
    KV_CHECKF(r.status == 0, "stats during the run: exit %d: %s", r.status, r.err);
    free(r.err);

    /* the first stops (SIGTERM, as kevo run does): a new writer gets in */
    KV_REQUIRE(kill(first, SIGTERM) == 0);
    KV_CHECK(wait_exit(first) == 0);
    KV_CHECK(writer_gets_in(dir));
}

/* A writer killed with SIGKILL leaves its lock file, naming it: no matter. */
static void test_stale_lock_file(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "runlock-stale");
    pid_t first = start_writer(dir);
    KV_REQUIRE(first > 0);
    KV_REQUIRE(kill(first, SIGKILL) == 0);
    KV_CHECK(wait_exit(first) == 128 + SIGKILL);
    KV_CHECK(wait_for_lock(dir, first) == 0); /* the file still names the dead process */

    KV_CHECK(writer_gets_in(dir));
}

/* In one process the lock is counted: a second writer handle on the same
 * run is not refused, and the lock lasts until the last one closes. */
static void test_same_process(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "runlock-self");
    kv_archive_opts ao = {.create = 1};
    kv_archive *a = NULL, *b = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &ao, &a, &err) == 0);
    KV_CHECKF(kv_archive_open(dir, &ao, &b, &err) == 0, "%s", err.msg);
    kv_archive_close(b);
    /* still held: another process is refused */
    result r;
    const char *other[] = {driver, dir, "11", "100000", NULL};
    run(&r, other);
    KV_CHECK(r.status == 1);
    KV_CHECK_STR_CONTAINS(r.err, "one writer per run");
    free(r.err);
    kv_archive_close(a);
    KV_CHECK(writer_gets_in(dir));
}

int main(void)
{
    bin = getenv("KEVO_BIN");
    driver = getenv("KEVO_SEARCH_DRIVER");
    if (!bin || !*bin || !driver) {
        fprintf(stderr, "test_runlock: KEVO_BIN or KEVO_SEARCH_DRIVER is not set (ctest sets "
                        "them); skipping\n");
        return 77;
    }
    kv_test_fresh_dir(scratch, sizeof scratch, "runlock-out");
    KV_RUN(test_second_writer_refused);
    KV_RUN(test_stale_lock_file);
    KV_RUN(test_same_process);
    return kv_test_summary();
}
