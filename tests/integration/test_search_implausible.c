/* test_search_implausible.c — a search whose evaluator finds some programs
 * implausible (timed below the problem's floor), with the fake evaluator:
 * one seed of allreduce carries the fake's marker. It never becomes an
 * elite (so never a parent) or a size's best; it is stored with its
 * attempt under the verdict implausible and counted by the archive; the
 * progress line counts it, and the first such result's message is said. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "fake_evalq.h"
#include "search/search.h"
#include "search_check.h"
#include "search_run.h"
#include "test.h"
#include "test_util.h"

static const char *const kProblems[] = {"allreduce"};
static const char *const kSeeds[] = {"ce_pipelined.cu", "ll_sm.cu", "oneshot_sm.cu",
                                     "twoshot_sm.cu", "twoshot_tma.cu"};
#define MARKED "ll_sm.cu"

/* <root>/allreduce: the shipped seeds of allreduce, MARKED with the marker. */
static int make_patterns(const char *root, kv_err *err)
{
    char dir[4096], path[4200];
    if (kv_path_join(dir, sizeof dir, root, "allreduce", err) != 0 ||
        kv_mkdir_p(dir, 0755, err) != 0)
        return -1;
    for (size_t i = 0; i < sizeof kSeeds / sizeof kSeeds[0]; i++) {
        char *text = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/patterns/allreduce/%s", getenv("KEVO_SOURCE_DIR"),
                 kSeeds[i]);
        if (kv_read_file(path, &text, &len, err) != 0)
            return -1;
        snprintf(path, sizeof path, "%s/%s", dir, kSeeds[i]);
        static const char mark[] = "\n// " KV_FAKE_IMPLAUSIBLE "\n";
        char *marked = strcmp(kSeeds[i], MARKED) == 0 ? malloc(len + sizeof mark) : NULL;
        if (marked) {
            memcpy(marked, text, len);
            memcpy(marked + len, mark, sizeof mark);
        }
        int rc = marked ? kv_write_file_atomic(path, marked, len + sizeof mark - 1, err)
                        : kv_write_file_atomic(path, text, len, err);
        free(marked);
        free(text);
        if (rc)
            return -1;
    }
    return 0;
}

static int run(const char *dir, const char *patterns, FILE *progress, kv_err *err)
{
    kv_search_test t;
    kv_search_test_init(&t, dir, kProblems, 1);
    t.cfg.islands = 2;
    t.cfg.seed = 3;
    t.cfg.budget.evaluations = 60;
    t.env.patterns_root = patterns;
    t.env.progress = progress;
    t.env.progress_every_s = 1000;
    t.fo.task_ms = 0.2;
    return kv_search_test_run(&t, err);
}

typedef struct {
    kv_txn *t;
    uint64_t implausible, bad; /* attempts implausible; elites or bests that are not ok */
} walk;

static int count_attempt(const kv_attempt *a, void *ctx, kv_err *err)
{
    (void)err;
    walk *w = ctx;
    w->implausible += a->verdict == KV_VERDICT_IMPLAUSIBLE;
    if (a->verdict == KV_VERDICT_IMPLAUSIBLE &&
        (a->speedup != 0 || !a->detail || !strstr(a->detail, "below the floor")))
        w->bad++;
    return 0;
}

/* Program id's verdict ok, and its source without the marker; else counted. */
static int check_ok(walk *w, uint64_t id, kv_err *err)
{
    kv_program p;
    char *src = NULL;
    size_t len = 0;
    if (kv_get_program(w->t, id, &p, err) != 0 || kv_get_source(w->t, id, &src, &len, err) != 0)
        return -1;
    if (p.verdict != KV_VERDICT_OK || strstr(src, KV_FAKE_IMPLAUSIBLE))
        w->bad++;
    kv_program_clear(&p);
    free(src);
    return 0;
}

static int check_elite(const kv_elite *e, void *ctx, kv_err *err)
{
    return check_ok(ctx, e->program_id, err);
}

static int check_best(const kv_size_best *b, void *ctx, kv_err *err)
{
    return check_ok(ctx, b->program_id, err);
}

static void test_never_an_elite(void)
{
    char dir[4096], patterns[4096], why[512], out[1 << 16];
    kv_err err = {{0}};
    kv_test_fresh_dir(dir, sizeof dir, "implausible");
    kv_test_fresh_dir(patterns, sizeof patterns, "implausible-patterns");
    int made = make_patterns(patterns, &err);
    KV_CHECKF(made == 0, "%s", err.msg);
    if (made != 0)
        return;
    FILE *progress = tmpfile();
    KV_REQUIRE(progress != NULL);
    KV_CHECKF(run(dir, patterns, progress, &err) == 0, "%s", err.msg);
    kv_search_facts f;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &f, why, sizeof why) == 0, "%s", why);
    KV_CHECK(f.elites > 0);

    kv_archive *a = NULL;
    kv_archive_opts ro = {.readonly = 1};
    KV_REQUIRE(kv_archive_open(dir, &ro, &a, &err) == 0);
    walk w = {0};
    kv_counters c;
    KV_REQUIRE(kv_read_begin(a, &w.t, &err) == 0);
    KV_CHECKF(kv_each_attempt(w.t, 1, count_attempt, &w, &err) == 0, "%s", err.msg);
    KV_CHECK(kv_get_counters(w.t, &c, &err) == 0);
    uint64_t counted = w.implausible;
    KV_CHECKF(counted >= 1 && c.attempts_by_verdict[KV_VERDICT_IMPLAUSIBLE] == counted,
              "%llu implausible attempts, %llu counted", (unsigned long long)counted,
              (unsigned long long)c.attempts_by_verdict[KV_VERDICT_IMPLAUSIBLE]);
    KV_CHECKF(kv_each_elite(w.t, "allreduce", -1, check_elite, &w, &err) == 0, "%s", err.msg);
    KV_CHECKF(kv_each_size_best(w.t, "allreduce", check_best, &w, &err) == 0, "%s", err.msg);
    KV_CHECKF(w.bad == 0, "%llu implausible elites, bests or attempts without the message",
              (unsigned long long)w.bad);
    kv_txn_abort(w.t);
    kv_archive_close(a);

    /* the progress line counts them; the first one is said with its message */
    char want[64];
    snprintf(want, sizeof want, " | allreduce ");
    KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);
    KV_CHECK_STR_CONTAINS(out, want);
    snprintf(want, sizeof want, "x, %llu implausible\n", (unsigned long long)counted);
    KV_CHECK_STR_CONTAINS(out, want);
    KV_CHECK_STR_CONTAINS(out, "kevo: allreduce: program ");
    KV_CHECK_STR_CONTAINS(out, " is implausible: size fake: ");
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"implausible\"") == 1);
    KV_CHECK(kv_search_count_text(dir, "\"verdict\":\"implausible\"") == (int)counted);
    fclose(progress);
}

int main(void)
{
    KV_RUN(test_never_an_elite);
    return kv_test_summary();
}
