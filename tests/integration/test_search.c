/* test_search.c — the search loop on the CPU: the grid's choices, the loop
 * against the deterministic fake evaluator (seeding, selection, migration,
 * re-seeding, budgets, determinism, a refused resume), the run's periodic
 * hook, and resumption after SIGKILL at random instants. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fake_evalq.h"
#include "archive/archive.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "mutate/pattern.h"
#include "common/rng.h"
#include "mutate/library.h"
#include "search/map.h"
#include "search/search.h"
#include "report/refresh.h"
#include "search_check.h"
#include "search_run.h"
#include "test.h"
#include "test_util.h"

static const char *const kProblems[] = {"allreduce", "allgather"};
static int n_seeds; /* of both problems, from the pattern library */

static void count_seeds(void)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/patterns", getenv("KEVO_SOURCE_DIR"));
    for (int i = 0; i < 2; i++) {
        kv_library lib;
        kv_err err;
        KV_CHECKF(kv_library_load(root, kProblems[i], &lib, NULL, NULL, &err) == 0, "%s", err.msg);
        n_seeds += lib.n;
        kv_library_free(&lib);
    }
    KV_CHECK(n_seeds >= 6);
}

static void test_rng(void)
{
    kv_rng a, b;
    kv_rng_seed(&a, 42);
    kv_rng_seed(&b, 42);
    int same = 1, in_range = 1;
    for (int i = 0; i < 1000; i++)
        same &= kv_rng_next(&a) == kv_rng_next(&b);
    for (int i = 0; i < 1000; i++)
        in_range &= kv_rng_below(&a, 7) < 7;
    KV_CHECK(same && in_range);
    double w[4] = {0, 1, 0, 3};
    int hits[4] = {0};
    for (int i = 0; i < 4000; i++)
        hits[kv_rng_weighted(&a, w, 4)]++;
    KV_CHECKF(hits[0] == 0 && hits[2] == 0 && hits[3] > 2 * hits[1], "%d %d %d %d", hits[0],
              hits[1], hits[2], hits[3]);
    double zero[2] = {0, 0};
    KV_CHECK(kv_rng_weighted(&a, zero, 2) == -1);
}

static void test_grid(void)
{
    kv_map g;
    KV_CHECK(kv_map_init(&g, 3) == 0);
    int sm = kv_cell_parse("sm/fused"), ce = kv_cell_parse("ce/unfused"),
        tma = kv_cell_parse("tma/fused");
    KV_CHECK(kv_map_offer(&g, 0, sm, 10, 1.2, "pull_sm") == 1);
    KV_CHECK(kv_map_offer(&g, 0, sm, 11, 1.1, "pull_sm") == 0); /* not better */
    KV_CHECK(kv_map_offer(&g, 0, sm, 11, 1.2, "pull_sm") == 0); /* equal: kept */
    KV_CHECK(kv_map_offer(&g, 0, sm, 12, 1.5, "pull_sm") == 1);
    KV_CHECK(kv_map_offer(&g, 0, ce, 13, 0.5, "ce") == 1);
    KV_CHECK(kv_map_offer(&g, 1, ce, 14, 0.9, "ce") == 1);
    KV_CHECK(kv_map_occupied(&g, 0) == 2 && kv_map_best_cell(&g, 0) == sm);
    KV_CHECK(kv_map_strongest(&g) == 0 && kv_map_weakest(&g, 0) == 2); /* 2 is empty */
    KV_CHECK(kv_map_weakest(&g, 2) == 1);
    kv_rng rng;
    kv_rng_seed(&rng, 1);
    int picked[KV_CELL_COUNT] = {0}, kinds[3] = {0};
    for (int i = 0; i < 3000; i++) {
        kv_pick_kind how;
        int c = kv_map_pick_parent(&g, 0, &rng, &how);
        KV_CHECK(c == sm || c == ce);
        picked[c]++;
        kinds[how]++;
    }
    /* fitness-weighting favours the better cell, every kind is used */
    KV_CHECKF(picked[sm] > picked[ce] && picked[ce] > 300, "%d %d", picked[sm], picked[ce]);
    KV_CHECK(kinds[0] > 900 && kinds[1] > 900 && kinds[2] > 300);
    KV_CHECK(kv_map_pick_parent(&g, 2, &rng, NULL) == -1);
    /* targets: reachable empty cells, the parent's own, or the weakest */
    unsigned reachable = 1u << sm | 1u << ce | 1u << tma;
    int t_tma = 0, t_own = 0, t_weak = 0, t_other = 0;
    for (int i = 0; i < 2000; i++) {
        int t = kv_map_pick_target(&g, 0, sm, reachable, &rng);
        t == tma ? t_tma++ : t == sm ? t_own++ : t == ce ? t_weak++ : t_other++;
    }
    KV_CHECKF(t_other == 0 && t_tma > 800 && t_own > 300 && t_weak > 200, "%d %d %d %d", t_tma,
              t_own, t_weak, t_other);
    /* recombination partners: same pattern, own island first */
    KV_CHECK(kv_map_same_pattern(&g, 0, "ce", 13, &rng) == 14);
    KV_CHECK(kv_map_same_pattern(&g, 0, "pull_sm", 12, &rng) == 0);
    kv_map_clear(&g, 0);
    KV_CHECK(kv_map_occupied(&g, 0) == 0);
    kv_map_free(&g);
}

/* Takes the top-level key out of the configuration stored in dir's archive,
 * as a kevo from before that key would have written it: 1 done, 0 no such
 * key, -1 failed. */
static int drop_stored_key(const char *dir, const char *key)
{
    kv_archive_opts ao = {0};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err;
    char *json = NULL, *out = NULL, hash[KV_SHA256_HEX_LEN];
    cJSON *o = NULL;
    int rc = -1;
    if (kv_archive_open(dir, &ao, &a, &err) != 0 || kv_write_begin(a, &t, &err) != 0 ||
        kv_get_config(t, &json, hash, &err) != 0 || !(o = cJSON_Parse(json)))
        goto out;
    rc = 0;
    if (cJSON_GetObjectItemCaseSensitive(o, key)) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, key);
        rc = (out = cJSON_PrintUnformatted(o)) && kv_put_config(t, out, &err) == 0 &&
                     kv_txn_commit(t, &err) == 0
                 ? 1
                 : -1;
        t = NULL;
    }
out:
    if (t)
        kv_txn_abort(t);
    if (a)
        kv_archive_close(a);
    cJSON_Delete(o);
    free(json);
    free(out);
    return rc;
}

/* The hook run_fake gives its runs (test_hook); fn NULL: none. */
static kv_search_hook run_hook;

/* One run with the fake evaluator, in this process. */
static int run_fake(const char *dir, uint64_t seed, int64_t evals, double wall_hours, double target,
                    double task_ms, volatile sig_atomic_t *stop, kv_err *err)
{
    kv_search_test t;
    kv_search_test_init(&t, dir, kProblems, 2);
    t.cfg.islands = 3;
    t.cfg.migration_interval = 3;
    t.cfg.reseed_interval = 9;
    t.cfg.seed = seed;
    t.cfg.budget.evaluations = evals;
    t.cfg.budget.wall_hours = wall_hours;
    t.cfg.budget.target_speedup = target;
    if (stop)
        t.env.stop = stop;
    t.env.hook = run_hook;
    t.fo.task_ms = task_ms;
    return kv_search_test_run(&t, err);
}

static int count_text(const char *dir, const char *needle)
{
    return kv_search_count_text(dir, needle);
}

/* Lines of the run's event log holding both texts. */
static int count_lines(const char *dir, const char *a, const char *b)
{
    char path[4200], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    if (kv_read_file(path, &text, &len, NULL) != 0)
        return -1;
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        n += strstr(line, a) && strstr(line, b);
    free(text);
    return n;
}

static int count_events(const char *dir, const char *type)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"type\":\"%s\"", type);
    return count_text(dir, needle);
}

static void test_loop(void)
{
    char dir[4096], why[512];
    kv_err err = {{0}};
    kv_test_fresh_dir(dir, sizeof dir, "search");
    KV_CHECKF(run_fake(dir, 7, 150, 0, 0, 0.2, NULL, &err) == 0, "%s", err.msg);
    kv_search_facts f;
    KV_CHECKF(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(f.evaluations == 150 && f.unevaluated == 0, "%llu evaluations, %llu left",
              (unsigned long long)f.evaluations, (unsigned long long)f.unevaluated);
    /* the library went in first, then screening, full and re-measurements */
    KV_CHECK(f.by_stage[KV_STAGE_SEED] == (uint64_t)n_seeds);
    KV_CHECKF(f.by_stage[KV_STAGE_SCREEN] > 50 && f.by_stage[KV_STAGE_FULL] > 5 &&
                  f.by_stage[KV_STAGE_REMEASURE] > 2,
              "screen %llu full %llu remeasure %llu",
              (unsigned long long)f.by_stage[KV_STAGE_SCREEN],
              (unsigned long long)f.by_stage[KV_STAGE_FULL],
              (unsigned long long)f.by_stage[KV_STAGE_REMEASURE]);
    KV_CHECK(f.islands_used == 3);
    /* migration every 3 and re-seeding every 9 ok evaluations of a problem
     * (run_fake's intervals), whether or not they brought new elites */
    int want_migrate = 0, want_reseed = 0;
    for (int i = 0; i < 2; i++) {
        char prob[128];
        snprintf(prob, sizeof prob, "\"problem\":\"%s\"", kProblems[i]);
        int ok = count_lines(dir, prob, "\"verdict\":\"ok\""); /* result events */
        want_migrate += ok / 3;
        want_reseed += ok / 9;
    }
    KV_CHECKF(count_events(dir, "migrate") == want_migrate && want_migrate > 10 &&
                  count_events(dir, "reseed") == want_reseed,
              "migrate %d of %d, reseed %d of %d", count_events(dir, "migrate"), want_migrate,
              count_events(dir, "reseed"), want_reseed);
    KV_CHECK(count_events(dir, "stop") == 1);
    /* every correct result says each size's speedup (kevo archive history) */
    int ok_results = count_lines(dir, "\"type\":\"result\"", "\"verdict\":\"ok\"");
    KV_CHECKF(ok_results > 0 &&
                  count_lines(dir, "\"verdict\":\"ok\"", "\"sizes\":{\"") == ok_results,
              "%d correct results, %d with sizes", ok_results,
              count_lines(dir, "\"verdict\":\"ok\"", "\"sizes\":{\""));

    /* the search climbs: its best beats the best seed (the fake's landscape
     * rewards parameter values other than the seeds' defaults) */
    kv_search_facts seeds_only;
    char dir2[4096];
    kv_test_fresh_dir(dir2, sizeof dir2, "search-seeds");
    KV_CHECKF(run_fake(dir2, 7, n_seeds, 0, 0, 0.2, NULL, &err) == 0, "%s", err.msg);
    KV_CHECKF(kv_search_check(dir2, kProblems, 2, &seeds_only, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(f.best > seeds_only.best * 1.02, "best %.4f, seeds %.4f", f.best, seeds_only.best);

    /* the same seed gives the same run */
    char dir3[4096];
    kv_search_facts g;
    kv_test_fresh_dir(dir3, sizeof dir3, "search-again");
    KV_CHECKF(run_fake(dir3, 7, 150, 0, 0, 0.2, NULL, &err) == 0, "%s", err.msg);
    KV_CHECKF(kv_search_check(dir3, kProblems, 2, &g, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(g.programs == f.programs && g.best == f.best && g.proposals == f.proposals,
              "programs %llu/%llu best %.6f/%.6f", (unsigned long long)g.programs,
              (unsigned long long)f.programs, g.best, f.best);

    /* a finished run resumed with the same configuration stops at once; with
     * another one it is refused, naming the run directory */
    KV_CHECKF(run_fake(dir, 7, 150, 0, 0, 0.2, NULL, &err) == 0, "%s", err.msg);
    kv_search_facts h;
    KV_CHECK(kv_search_check(dir, kProblems, 2, &h, why, sizeof why) == 0 && h.evaluations == 150 &&
             h.programs == f.programs);
    KV_CHECK(run_fake(dir, 8, 150, 0, 0, 0.2, NULL, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "was started with another configuration");

    /* a run started by a kevo that had no `seeds` key (its default since)
     * resumes: the stored configuration is compared with every default filled */
    KV_CHECKF(drop_stored_key(dir, "seeds") == 1, "the stored configuration had no 'seeds'");
    KV_CHECKF(run_fake(dir, 7, 150, 0, 0, 0.2, NULL, &err) == 0, "%s", err.msg);
    KV_CHECKF(drop_stored_key(dir, "report") == 1, "the stored configuration had no 'report'");
    KV_CHECKF(run_fake(dir, 7, 150, 0, 0, 0.2, NULL, &err) == 0, "%s", err.msg);
    KV_CHECK(drop_stored_key(dir, "seed") == 1);
    KV_CHECK(run_fake(dir, 7, 150, 0, 0, 0.2, NULL, &err) != 0); /* its default is not 7 */
    KV_CHECK_STR_CONTAINS(err.msg, "was started with another configuration");
}

/* What the test's hook saw. */
typedef struct {
    int calls;
    int fail; /* fail every call */
    char dir[4096];
    double first_s, last_s;
} hook_seen;

static int hook_fn(void *ctx, const char *run_dir, kv_err *err)
{
    hook_seen *h = ctx;
    double now = (double)kv_monotonic_ns() / 1e9;
    if (h->calls++ == 0)
        h->first_s = now;
    h->last_s = now;
    snprintf(h->dir, sizeof h->dir, "%s", run_dir);
    return h->fail ? kv_err_set(err, "the disk is full (test)") : 0;
}

/* The hook is called every every_s seconds and once at the end, with the run
 * directory; a failing hook is a warning event and the run goes on; with
 * every_s 0 it is called at the end only. */
static void test_hook(void)
{
    char dir[4096];
    kv_err err = {{0}};
    hook_seen h = {0};
    run_hook = (kv_search_hook){.fn = hook_fn, .ctx = &h, .every_s = 0.05, .name = "report"};
    kv_test_fresh_dir(dir, sizeof dir, "search-hook");
    int64_t t0 = kv_monotonic_ns();
    KV_CHECKF(run_fake(dir, 7, 120, 0, 0, 3, NULL, &err) == 0, "%s", err.msg);
    double wall = (double)(kv_monotonic_ns() - t0) / 1e9;
    KV_CHECKF(strcmp(h.dir, dir) == 0, "hook called with %s", h.dir);
    int intervals = count_lines(dir, "\"type\":\"report\"", "\"when\":\"interval\"");
    int exits = count_lines(dir, "\"type\":\"report\"", "\"when\":\"exit\"");
    KV_CHECKF(exits == 1, "%d exit calls", exits);
    KV_CHECKF(intervals + exits == h.calls, "%d events, %d calls", intervals + exits, h.calls);
    /* at most one call per period (and the exit's), and some while it ran */
    KV_CHECKF(intervals >= 2 && intervals <= wall / 0.05 + 1, "%d interval calls in %.2f s",
              intervals, wall);
    KV_CHECK(count_events(dir, "report_error") == 0);

    hook_seen failing = {.fail = 1};
    run_hook.ctx = &failing;
    kv_test_fresh_dir(dir, sizeof dir, "search-hook-fail");
    KV_CHECKF(run_fake(dir, 7, 60, 0, 0, 3, NULL, &err) == 0, "%s", err.msg);
    kv_search_facts f;
    char why[512];
    KV_CHECKF(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECK(f.evaluations == 60);
    KV_CHECKF(failing.calls >= 2 && count_events(dir, "report_error") == failing.calls,
              "%d calls, %d error events", failing.calls, count_events(dir, "report_error"));
    KV_CHECK(count_text(dir, "the disk is full (test)") == failing.calls);

    hook_seen at_exit = {0};
    run_hook = (kv_search_hook){.fn = hook_fn, .ctx = &at_exit, .every_s = 0, .name = "report"};
    kv_test_fresh_dir(dir, sizeof dir, "search-hook-exit");
    KV_CHECKF(run_fake(dir, 7, 60, 0, 0, 3, NULL, &err) == 0, "%s", err.msg);
    KV_CHECKF(at_exit.calls == 1, "%d calls", at_exit.calls);

    /* kevo run's hook: the report written from a child; its failure named */
    run_hook = (kv_search_hook){0};
    char path[4200];
    snprintf(path, sizeof path, "%s/report.html", dir);
    unlink(path);
    KV_CHECKF(kv_report_refresh(NULL, dir, &err) == 0, "%s", err.msg);
    KV_CHECK(access(path, R_OK) == 0);
    KV_CHECK(kv_report_refresh(NULL, "/nonexistent-kevo-run", &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "/nonexistent-kevo-run/report.html");
}

/* Points of the parameter spaces of the problems' seeds. */
static int space_points(void)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/patterns", getenv("KEVO_SOURCE_DIR"));
    int total = 0;
    for (int i = 0; i < 2; i++) {
        kv_library lib;
        kv_err err;
        if (kv_library_load(root, kProblems[i], &lib, NULL, NULL, &err) != 0)
            return 0;
        for (int s = 0; s < lib.n; s++)
            total += (int)kv_pattern_points(&lib.seeds[s].meta);
        kv_library_free(&lib);
    }
    return total;
}

/* A long run outlives the small steps around its elites: the mutator jumps,
 * duplicates are only counted, and the budget ends the run; only a run that
 * has stored nearly every point of the seeds' spaces (750 for allreduce and
 * allgather) ends with "nothing left to try". */
static void test_long_run(void)
{
    char dir[4096], why[512];
    kv_err err = {{0}};
    kv_search_facts f;
    kv_test_fresh_dir(dir, sizeof dir, "search-long");
    KV_CHECKF(run_fake(dir, 5, 500, 0, 0, 0.05, NULL, &err) == 0, "%s", err.msg);
    KV_CHECKF(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECKF(f.evaluations == 500, "%llu evaluations", (unsigned long long)f.evaluations);
    KV_CHECK(count_text(dir, "evaluation budget spent") == 1);
    KV_CHECKF(count_text(dir, "\"op\":\"jump\"") > 10, "%d jumps",
              count_text(dir, "\"op\":\"jump\""));
    KV_CHECK(count_text(dir, "\"duplicates\":") == 1 && count_events(dir, "duplicate") == 0);

    int points = space_points();
    kv_test_fresh_dir(dir, sizeof dir, "search-exhaust");
    KV_CHECKF(run_fake(dir, 5, 100000, 0, 0, 0.05, NULL, &err) == 0, "%s", err.msg);
    KV_CHECKF(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECK(count_text(dir, "nothing left to try") == 1);
    KV_CHECKF(points > 0 && f.programs >= (uint64_t)points * 95 / 100 &&
                  f.programs <= (uint64_t)points,
              "%llu programs of %d points", (unsigned long long)f.programs, points);
}

static void test_budgets(void)
{
    char dir[4096], why[512];
    kv_err err = {{0}};
    kv_search_facts f;
    /* a target speedup ends the run once every problem reached it */
    kv_test_fresh_dir(dir, sizeof dir, "search-target");
    KV_CHECKF(run_fake(dir, 3, 5000, 0, 0.5, 0.2, NULL, &err) == 0, "%s", err.msg);
    KV_CHECK(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0);
    KV_CHECKF(f.evaluations < 60, "%llu evaluations", (unsigned long long)f.evaluations);
    /* the wall-time budget (3.6 s) */
    kv_test_fresh_dir(dir, sizeof dir, "search-wall");
    KV_CHECKF(run_fake(dir, 3, 0, 0.001, 0, 40, NULL, &err) == 0, "%s", err.msg);
    KV_CHECK(count_events(dir, "stop") == 1 && count_text(dir, "wall-time budget spent") == 1);
    KV_CHECK(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0);
    KV_CHECKF(f.wall_s >= 3.6 && f.wall_s < 8, "wall %.2f s", f.wall_s);
    KV_CHECK(f.unevaluated == 0);
    /* a stop request before anything: the seeds are recorded, nothing runs */
    volatile sig_atomic_t stop = 1;
    kv_test_fresh_dir(dir, sizeof dir, "search-stop");
    KV_CHECKF(run_fake(dir, 3, 100, 0, 0, 0.2, &stop, &err) == 0, "%s", err.msg);
    KV_CHECK(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0);
    KV_CHECK(f.evaluations == 0 && f.unevaluated == (uint64_t)n_seeds);
    /* and the next run evaluates them */
    KV_CHECKF(run_fake(dir, 3, 100, 0, 0, 0.2, NULL, &err) == 0, "%s", err.msg);
    KV_CHECK(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0);
    KV_CHECK(f.evaluations == 100 && f.unevaluated == 0 &&
             f.by_stage[KV_STAGE_SEED] == (uint64_t)n_seeds);
}

/* Whether the run in dir has stored its configuration, which a fresh run
 * does once its seeds are stored (before that, an archive may not even have
 * its databases). */
static int started(const char *dir)
{
    kv_err err;
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    char *json = NULL, hash[KV_SHA256_HEX_LEN];
    int found = 0;
    if (kv_archive_open(dir, &ao, &a, &err) == 0 && kv_read_begin(a, &t, &err) == 0) {
        found = kv_get_config(t, &json, hash, &err) == 0;
        kv_txn_abort(t);
    }
    free(json);
    kv_archive_close(a);
    return found;
}

/* SIGKILL at random instants, resume, again, until the budget is spent:
 * nothing recorded is lost or evaluated twice. */
static void test_kill_resume(void)
{
    const char *driver = getenv("KEVO_SEARCH_DRIVER");
    if (!driver) {
        KV_CHECKF(0, "KEVO_SEARCH_DRIVER is not set");
        return;
    }
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-kill");
    uint64_t rs = (uint64_t)time(NULL);
    int kills = 0, finished = 0;
    uint64_t last_evals = 0;
    for (int round = 0; round < 60 && !finished; round++) {
        pid_t pid = kv_search_spawn_driver(driver, dir, "250", NULL);
        KV_CHECK(pid > 0);
        int status = 0;
        if (kills < 12) {
            struct timespec ts = {0, (long)(10 + kv_test_rand(&rs) % 100) * 1000000L};
            nanosleep(&ts, NULL);
            if (waitpid(pid, &status, WNOHANG) == 0) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                kills++;
            } else {
                finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            }
        } else {
            waitpid(pid, &status, 0);
            KV_CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "driver status %d", status);
            finished = 1;
        }
        kv_search_facts f;
        if (!started(dir) && last_evals == 0)
            continue; /* killed before the run was stored: nothing to check yet */
        int ok = kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0;
        KV_CHECKF(ok, "after kill %d: %s", kills, why);
        KV_CHECKF(f.evaluations >= last_evals, "evaluations went back from %llu to %llu",
                  (unsigned long long)last_evals, (unsigned long long)f.evaluations);
        last_evals = f.evaluations;
        if (!ok)
            return;
    }
    kv_search_facts f;
    KV_CHECK(kv_search_check(dir, kProblems, 2, &f, why, sizeof why) == 0);
    KV_CHECKF(kills >= 10 && finished, "%d kills, finished %d", kills, finished);
    KV_CHECKF(f.evaluations == 250 && f.unevaluated == 0, "%llu evaluations, %llu unevaluated",
              (unsigned long long)f.evaluations, (unsigned long long)f.unevaluated);
    printf("    %d kills at random instants; then the run finished: %llu evaluations, %llu "
           "programs\n",
           kills, (unsigned long long)f.evaluations, (unsigned long long)f.programs);
}

int main(void)
{
    KV_RUN(count_seeds);
    KV_RUN(test_rng);
    KV_RUN(test_grid);
    KV_RUN(test_loop);
    KV_RUN(test_hook);
    KV_RUN(test_long_run);
    KV_RUN(test_budgets);
    KV_RUN(test_kill_resume);
    return kv_test_summary();
}
