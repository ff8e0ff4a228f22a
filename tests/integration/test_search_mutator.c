/* test_search_mutator.c — the search loop against a scripted mutator
 * (fake_mutator.c) and the fake evaluator: proposals that arrive late,
 * refusals, duplicates and no moves, each counted where it belongs; a
 * mutator that starts failing ends the run with its reason once what is in
 * flight is back; and a run whose process dies right after an archive
 * commit (the archive's commit hook) resumes to the same invariants. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_evalq.h"
#include "fake_mutator.h"
#include "archive/archive.h"
#include "search/search.h"
#include "search_check.h"
#include "search_run.h"
#include "test.h"
#include "test_util.h"

static const char *const kProblems[] = {"allreduce"};

typedef struct {
    kv_fake_mutator_opts fm;
    int64_t evaluations;
    uint64_t crash_after; /* > 0: the run, in a child, dies right after this commit */
} run_opts;

/* One run; the mutator's counts into *c (not for a crashed child). */
static int run(const char *dir, const run_opts *o, kv_fake_mutator_counts *c, kv_err *err)
{
    kv_search_test t;
    kv_search_test_init(&t, dir, kProblems, 1);
    t.cfg.islands = 2;
    t.cfg.migration_interval = 3;
    t.cfg.reseed_interval = 9;
    t.cfg.seed = 7;
    t.cfg.budget.evaluations = o->evaluations;
    t.fm = &o->fm;
    t.crash_after = o->crash_after;
    int rc = kv_search_test_run(&t, err);
    *c = t.counts;
    return rc;
}

/* The fake's proposal attempts in the archive (op "llm": it makes paid calls). */
typedef struct {
    uint64_t proposals, duplicates, refusals, programs, unevaluated;
} fake_facts;

static int on_attempt(const kv_attempt *a, void *arg, kv_err *err)
{
    (void)err;
    fake_facts *f = arg;
    if (a->stage != KV_STAGE_PROPOSAL || strcmp(a->op, "llm") != 0)
        return 0;
    f->proposals++;
    f->duplicates += a->verdict == KV_VERDICT_DUPLICATE;
    f->refusals += a->verdict == KV_VERDICT_PROPOSAL_ERROR;
    return 0;
}

static int on_program(const kv_program *p, void *arg, kv_err *err)
{
    (void)err;
    fake_facts *f = arg;
    if (strcmp(p->op, "llm") == 0) {
        f->programs++;
        f->unevaluated += p->verdict == KV_VERDICT_NONE;
    }
    return 0;
}

static void read_facts(const char *dir, fake_facts *f)
{
    memset(f, 0, sizeof *f);
    kv_err err = {{0}};
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    int rc = kv_archive_open(dir, &ao, &a, &err);
    if (rc == 0)
        rc = kv_read_begin(a, &t, &err);
    if (rc == 0)
        rc = kv_each_attempt(t, 1, on_attempt, f, &err);
    if (rc == 0)
        rc = kv_each_program(t, on_program, f, &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    if (t)
        kv_txn_abort(t);
    kv_archive_close(a);
}

static int count(const char *dir, const char *fmt, ...) KV_PRINTF(2, 3);
static int count(const char *dir, const char *fmt, ...)
{
    char needle[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(needle, sizeof needle, fmt, ap);
    va_end(ap);
    return kv_search_count_text(dir, needle);
}

/* Answers 15 ms late, three at a time: candidates, a duplicate, a refusal
 * and a no move, each a paid call but the no move. The run ends on its
 * evaluation budget with every answer taken and each counted where it
 * belongs. */
static void test_late_answers(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-mutator");
    run_opts o = {
        .fm = {.concurrency = 3, .delay_ms = 15, .script = "ccdrn", .tokens = 100, .usd = 0.001},
        .evaluations = 40};
    kv_fake_mutator_counts c;
    kv_err err = {{0}};
    KV_CHECKF(run(dir, &o, &c, &err) == 0, "%s", err.msg);
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &sf, why, sizeof why) == 0, "%s", why);
    fake_facts ff;
    read_facts(dir, &ff);
    uint64_t cands = c.answered['c'], dups = c.answered['d'], refused = c.answered['r'],
             calls = cands + dups + refused;
    KV_CHECKF(c.asked >= 10 && c.taken == c.asked && c.declined == 0, "%llu asked, %llu taken",
              (unsigned long long)c.asked, (unsigned long long)c.taken);
    KV_CHECK(calls + c.answered['n'] == c.taken);
    KV_CHECKF(ff.programs == cands && ff.duplicates == dups && ff.refusals == refused &&
                  ff.proposals == calls && sf.refusals == refused,
              "%llu programs, %llu duplicates, %llu refusals, %llu proposals; the fake's "
              "%llu c, %llu d, %llu r",
              (unsigned long long)ff.programs, (unsigned long long)ff.duplicates,
              (unsigned long long)ff.refusals, (unsigned long long)ff.proposals,
              (unsigned long long)cands, (unsigned long long)dups, (unsigned long long)refused);
    KV_CHECK(ff.unevaluated == 0 && sf.unevaluated == 0);
    KV_CHECKF(sf.evaluations <= 40 && sf.tokens_in == 100 * calls &&
                  sf.cost_usd > 0.001 * calls - 1e-9 && sf.cost_usd < 0.001 * calls + 1e-9,
              "%llu evaluations, %llu tokens, $%g", (unsigned long long)sf.evaluations,
              (unsigned long long)sf.tokens_in, sf.cost_usd);
    KV_CHECK(kv_search_count_text(dir, "\"reason\":\"evaluation budget spent\"") == 1);
    KV_CHECK(count(dir, "\"proposals\":%" PRIu64 ",", c.asked) == 1);
    KV_CHECK(count(dir, "\"no_moves\":%" PRIu64 "}", c.answered['n']) == 1);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"llm\"") == (int)calls);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"proposal\"") == (int)cands);
}

/* A mutator whose calls start failing: once three failed in a row, nothing
 * more is asked, what is in flight comes back, and the run ends with an
 * error naming the mutator's reason, everything stored. */
static void test_failing(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-mutator-failing");
    run_opts o = {.fm = {.concurrency = 1,
                         .delay_ms = 5,
                         .script = "cxxx",
                         .tokens = 10,
                         .usd = 0.0001,
                         .fail_after = 3},
                  .evaluations = 200};
    kv_fake_mutator_counts c;
    kv_err err = {{0}};
    KV_CHECK(run(dir, &o, &c, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg,
                          "fake: 3 calls failed in a row; what was found so far is stored");
    KV_CHECKF(c.asked == 4 && c.taken == 4 && c.answered['x'] == 3, "%llu asked, %llu taken",
              (unsigned long long)c.asked, (unsigned long long)c.taken);
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &sf, why, sizeof why) == 0, "%s", why);
    KV_CHECK(sf.refusals == 3 && sf.unevaluated == 0 && sf.tokens_in == 40);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"error\"") == 1);
}

/* The process dies right after its 15th commit (the archive's commit hook,
 * in a child); the resumed run ends on its budget with every invariant
 * holding, tokens and cost counted once. */
static void test_crash_resume(void)
{
    char dir[4096], why[512];
    kv_test_fresh_dir(dir, sizeof dir, "search-mutator-crash");
    run_opts o = {
        .fm = {.concurrency = 2, .delay_ms = 2, .script = "ccrd", .tokens = 100, .usd = 0.001},
        .evaluations = 40,
        .crash_after = 15};
    kv_fake_mutator_counts c;
    kv_err err = {{0}};
    KV_CHECKF(run(dir, &o, &c, &err) == 0, "%s", err.msg);
    kv_search_facts a, b;
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &a, why, sizeof why) == 0, "%s", why);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"stop\"") == 0); /* it died */
    o.crash_after = 0;
    KV_CHECKF(run(dir, &o, &c, &err) == 0, "%s", err.msg);
    KV_CHECKF(kv_search_check(dir, kProblems, 1, &b, why, sizeof why) == 0, "%s", why);
    KV_CHECK(b.unevaluated == 0 && b.evaluations <= 40 && b.evaluations > a.evaluations);
    KV_CHECK(b.tokens_in > a.tokens_in && b.tokens_in % 100 == 0);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"resume\"") == 1);
    KV_CHECK(kv_search_count_text(dir, "\"reason\":\"evaluation budget spent\"") == 1);
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    KV_RUN(test_late_answers);
    KV_RUN(test_failing);
    KV_RUN(test_crash_resume);
    return kv_test_summary();
}
