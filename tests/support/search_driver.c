/* search_driver.c — the search loop with the fake evaluator, as a process:
 * test_search kills it at random instants and resumes it, and
 * bench/search_overhead measures the coordinator's CPU use with it.
 *
 *   search_driver RUN_DIR SEED EVALUATIONS [TASK_MS] [GROUPS] [ISLANDS] [SNAPSHOT_MIN]
 *                 [REPORT_MIN]
 *
 * SNAPSHOT_MIN sets snapshots.interval_min (default 10: only the exit's in
 * a short run); test_snapshot takes snapshots every fraction of a second.
 * REPORT_MIN, when given, has the run write RUN_DIR/report.html as kevo run
 * does (report/refresh.h), every REPORT_MIN minutes (0: at exit only).
 * Problems allreduce and allgather at W=2, the real pattern library, the
 * template mutator. SIGINT/SIGTERM stop it as they stop kevo run. Prints
 * "done evaluations=N cpu_s=C wall_s=W" at the end. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fake_evalq.h"
#include "archive/archive.h"
#include "common/clock.h"
#include "search/config.h"
#include "search/search.h"
#include "report/refresh.h"
#include "search_run.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    if (stop < 2)
        stop++;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: search_driver RUN_DIR SEED EVALUATIONS [TASK_MS] [GROUPS] "
                        "[ISLANDS] [SNAPSHOT_MIN] [REPORT_MIN]\n");
        return 2;
    }
    /* the source tree it was built from, unless KEVO_SOURCE_DIR names another */
    if (setenv("KEVO_SOURCE_DIR", KEVO_SOURCE_DIR, 0) != 0) {
        perror("setenv");
        return 1;
    }
    static const char *const problems[] = {"allreduce", "allgather"};
    kv_search_test run;
    kv_search_test_init(&run, argv[1], problems, 2);
    kv_config *cfg = &run.cfg;
    cfg->world = 2;
    cfg->islands = argc > 6 ? atoi(argv[6]) : 3;
    cfg->migration_interval = 4;
    cfg->reseed_interval = 12;
    cfg->seed = strtoull(argv[2], NULL, 10);
    cfg->budget.evaluations = atoll(argv[3]);
    if (argc > 7)
        cfg->snapshots.interval_min = atof(argv[7]);
    run.fo.groups = argc > 5 ? atoi(argv[5]) : 2;
    run.fo.task_ms = argc > 4 ? atof(argv[4]) : 5;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
        perror("sigaction");
        return 1;
    }
    run.env.stop = &stop;
    run.env.progress = getenv("SEARCH_DRIVER_PROGRESS") ? stderr : NULL;
    run.env.progress_every_s = 1;
    if (argc > 8)
        run.env.hook = (kv_search_hook){
            .fn = kv_report_refresh, .every_s = atof(argv[8]) * 60, .name = "report"};
    kv_err err = {{0}};
    int64_t t0 = kv_monotonic_ns();
    int rc = kv_search_test_run(&run, &err);
    if (rc != 0) {
        fprintf(stderr, "search_driver: %s\n", err.msg);
        return 1;
    }
    /* the evaluations the run state counts (a small search space can end
     * the run before its budget: nothing left to try) */
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_run_state st = {0};
    if (kv_archive_open(argv[1], &ao, &a, &err) != 0 || kv_read_begin(a, &t, &err) != 0 ||
        kv_get_state(t, &st, &err) != 0) {
        fprintf(stderr, "search_driver: %s\n", err.msg);
        return 1;
    }
    kv_txn_abort(t);
    kv_archive_close(a);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
                 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    printf("done evaluations=%llu cpu_s=%.3f wall_s=%.3f\n", (unsigned long long)st.evaluations,
           cpu, (double)(kv_monotonic_ns() - t0) * 1e-9);
    return 0;
}
