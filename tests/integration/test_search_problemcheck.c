/* test_search_problemcheck.c — a run's start checks every problem's
 * reference (search/check_references.c, docs/search.md "Checking the
 * references"), with the fake evaluator: a problem whose reference
 * disagrees with itself is skipped, said in events.jsonl and on the
 * progress output, while another problem is searched, and its stored
 * seeds are evaluated by a later start once its reference is mended; a run
 * whose only problem fails is refused with the self-check's message; a pass
 * is kept, so that the next start submits no self-check; a kept failure
 * skips the problem without a self-check; a damaged entry is no pass. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "evaluator/evaluator.h"
#include "fake_evalq.h"
#include "problem/problem.h"
#include "search/search.h"
#include "search_check.h"
#include "search_run.h"
#include "test.h"
#include "test_util.h"

static const char *const kAllgather[] = {"allgather", NULL};
static const char *const kAllreduce[] = {"allreduce", NULL};

typedef struct {
    const char *problems_root; /* NULL: problems/ of the source */
    const char *const *problems;
    int n_problems;
    int64_t evaluations;
    const char *cache_dir;       /* NULL: nothing kept */
    const char *const *mismatch; /* the fake's selfcheck_mismatch */
    const char *const *hang;     /* the fake's selfcheck_hang */
    FILE *progress;
} run_opts;

static void source_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", getenv("KEVO_SOURCE_DIR"), rel);
}

/* One run (or resumption) of dir with the template mutator and the fake
 * evaluator: kv_search_run's result; the self-check tasks the fake was
 * given into *selfchecks. */
static int run(const char *dir, const run_opts *o, uint64_t *selfchecks, kv_err *err)
{
    kv_search_test t;
    kv_search_test_init(&t, dir, o->problems, o->n_problems);
    t.cfg.world = 2;
    t.cfg.islands = 2;
    t.cfg.seed = 9;
    t.cfg.budget.evaluations = o->evaluations;
    if (o->problems_root)
        t.env.problems_root = o->problems_root;
    t.env.progress = o->progress;
    t.env.progress_every_s = 1000;
    t.env.cache_dir = o->cache_dir;
    t.fo.selfcheck_mismatch = o->mismatch;
    t.fo.selfcheck_hang = o->hang;
    int rc = kv_search_test_run(&t, err);
    *selfchecks = t.selfchecks;
    return rc;
}

/* Programs and evaluations of one problem in the archive. */
typedef struct {
    const char *problem;
    uint64_t programs, evaluations, unevaluated;
} counts;

static int on_program(const kv_program *p, void *arg, kv_err *err)
{
    (void)err;
    counts *c = arg;
    if (strcmp(p->problem, c->problem) == 0) {
        c->programs++;
        c->unevaluated += p->verdict == KV_VERDICT_NONE;
    }
    return 0;
}

static int on_attempt(const kv_attempt *a, void *arg, kv_err *err)
{
    (void)err;
    counts *c = arg;
    c->evaluations += strcmp(a->problem, c->problem) == 0 && a->stage != KV_STAGE_PROPOSAL;
    return 0;
}

static counts count(const char *dir, const char *problem)
{
    counts c = {.problem = problem};
    kv_err err = {{0}};
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    int rc = kv_archive_open(dir, &ao, &a, &err);
    if (rc == 0)
        rc = kv_read_begin(a, &t, &err);
    if (rc == 0)
        rc = kv_each_program(t, on_program, &c, &err);
    if (rc == 0)
        rc = kv_each_attempt(t, 1, on_attempt, &c, &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    if (t)
        kv_txn_abort(t);
    kv_archive_close(a);
    return c;
}

/* The verdict kept for problem name (under root) at W=2: 0, KV_NOTFOUND. */
static int kept(const char *cache, const char *root, const char *name, kv_pcheck *v)
{
    char dir[4200], key[KV_SHA256_HEX_LEN];
    kv_problem p;
    kv_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    if (kv_problem_load(dir, &p, &err) != 0) {
        KV_CHECKF(0, "%s", err.msg);
        return -1;
    }
    int rc = kv_pcheck_key(&p, 2, key, &err);
    kv_problem_free(&p);
    KV_CHECKF(rc == 0, "%s", err.msg);
    return rc == 0 ? kv_pcheck_get(cache, key, v, NULL, NULL, &err) : -1;
}

/* A copy of problems/<name> under root (problem.json, reference.cu, check.c). */
static void copy_problem(const char *root, const char *name)
{
    static const char *const files[] = {"problem.json", "reference.cu", "check.c"};
    char dir[4200], from[4200], to[4400];
    kv_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    KV_REQUIRE(kv_mkdir_p(dir, 0755, &err) == 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *text = NULL;
        size_t len = 0;
        snprintf(from, sizeof from, "%s/problems/%s/%s", getenv("KEVO_SOURCE_DIR"), name, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        KV_REQUIRE(kv_read_file(from, &text, &len, &err) == 0);
        KV_REQUIRE(kv_write_file_atomic(to, text, len, &err) == 0);
        free(text);
    }
}

/* s with the first `from` replaced by `to`, malloc'ed. */
static char *replaced(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    size_t head = at ? (size_t)(at - s) : 0, n = strlen(s) - strlen(from) + strlen(to);
    char *out = at ? malloc(n + 1) : NULL;
    KV_CHECKF(out != NULL, "no %s in the entry, or out of memory", from);
    if (!out)
        return strdup(s);
    memcpy(out, s, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

static void append(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    KV_REQUIRE(f != NULL);
    KV_CHECK(fputs(text, f) >= 0);
    KV_CHECK(fclose(f) == 0);
}

/* allreduce and allgather, allgather's reference disagreeing with itself:
 * allgather is skipped (progress output, `skipped` event with the
 * self-check's message and what to do), allreduce searched to the end of
 * the budget, both verdicts kept. The next start keeps skipping allgather
 * from its kept failure, with no self-check. Once allgather's reference is
 * changed (another key), a start checks it again, and the seeds the first
 * start stored for it are evaluated. */
static void test_failing_problem_skipped(void)
{
    char dir[4096], root[4096], cache[4096], out[32768], why[512], ref[4400];
    kv_test_fresh_dir(dir, sizeof dir, "pcheck-skip");
    kv_test_fresh_dir(root, sizeof root, "pcheck-problems");
    kv_test_fresh_dir(cache, sizeof cache, "pcheck-cache");
    copy_problem(root, "allreduce");
    copy_problem(root, "allgather");
    static const char *const both[] = {"allreduce", "allgather"};
    FILE *progress = tmpfile();
    KV_REQUIRE(progress != NULL);
    run_opts o = {.problems_root = root,
                  .problems = both,
                  .n_problems = 2,
                  .evaluations = 16,
                  .cache_dir = cache,
                  .mismatch = kAllgather,
                  .progress = progress};
    kv_err err = {{0}};
    uint64_t checks = 0;
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECKF(checks == 2, "%llu self-checks", (unsigned long long)checks);
    KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);
    KV_CHECK_STR_CONTAINS(out, "kevo: checking the references of 2 problems against themselves");
    KV_CHECK_STR_CONTAINS(out, "kevo: problem allgather skipped: the reference does not agree "
                               "with itself at size ");
    KV_CHECK_STR_CONTAINS(out, "; fix the reference and run kevo problems check allgather\n");
    KV_CHECK(strstr(out, "allreduce skipped") == NULL);
    KV_CHECK_STR_CONTAINS(out, " | allgather skipped\n");
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"skipped\"") == 1);
    KV_CHECK(kv_search_count_text(dir, "\"reason\":\"problem allgather skipped: the reference "
                                       "does not agree with itself at size ") == 1);
    KV_CHECK(kv_search_count_text(dir, "fix the reference and run kevo problems check "
                                       "allgather\"") == 1);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"problem_check\"") == 2);
    counts ag = count(dir, "allgather"), ar = count(dir, "allreduce");
    KV_CHECKF(ag.evaluations == 0 && ag.programs > 0 && ag.unevaluated == ag.programs,
              "allgather: %llu programs, %llu evaluations", (unsigned long long)ag.programs,
              (unsigned long long)ag.evaluations);
    KV_CHECKF(ar.evaluations == 16, "allreduce: %llu evaluations",
              (unsigned long long)ar.evaluations);
    kv_pcheck v;
    KV_CHECK(kept(cache, root, "allgather", &v) == 0 && !v.ok && v.self == KV_PCHECK_FAIL &&
             v.host == KV_PCHECK_NOT_RUN &&
             strstr(v.message, "the reference does not agree with itself") == v.message);
    KV_CHECK(kept(cache, root, "allreduce", &v) == 0 && v.ok && v.self == KV_PCHECK_PASS &&
             v.n_sizes > 0 && v.sizes[0].self == KV_PCHECK_PASS);

    /* resumed, the fake's allgather now agreeing: the kept failure still
     * skips it, and nothing is checked again */
    o.mismatch = NULL;
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECKF(checks == 0, "%llu self-checks on resume", (unsigned long long)checks);
    KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);
    KV_CHECK_STR_CONTAINS(out, "kevo: problem allgather skipped: the reference does not agree "
                               "with itself at size ");
    KV_CHECK(strstr(out, "kevo: checking") == NULL);
    KV_CHECK(count(dir, "allgather").evaluations == 0);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"skipped\"") == 2);

    /* the reference mended (another key): checked again, passes, and what
     * the first start stored of allgather is evaluated */
    snprintf(ref, sizeof ref, "%s/allgather/reference.cu", root);
    append(ref, "\n/* mended */\n");
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECKF(checks == 1, "%llu self-checks after the change", (unsigned long long)checks);
    KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);
    KV_CHECK(strstr(out, "skipped") == NULL);
    ag = count(dir, "allgather");
    KV_CHECKF(ag.evaluations > 0 && ag.unevaluated == 0,
              "allgather: %llu evaluations, %llu "
              "programs without one",
              (unsigned long long)ag.evaluations, (unsigned long long)ag.unevaluated);
    kv_search_facts sf;
    KV_CHECKF(kv_search_check(dir, both, 2, &sf, why, sizeof why) == 0, "%s", why);
    fclose(progress);
}

/* The only problem's reference disagrees with itself: the run is refused
 * with the self-check's message and what to do, and nothing is evaluated. */
static void test_only_problem_refused(void)
{
    char dir[4096], cache[4096];
    kv_test_fresh_dir(dir, sizeof dir, "pcheck-refused");
    kv_test_fresh_dir(cache, sizeof cache, "pcheck-refused-cache");
    static const char *const one[] = {"allreduce"};
    run_opts o = {.problems = one,
                  .n_problems = 1,
                  .evaluations = 10,
                  .cache_dir = cache,
                  .mismatch = kAllreduce};
    kv_err err = {{0}};
    uint64_t checks = 0;
    KV_CHECK(run(dir, &o, &checks, &err) != 0);
    KV_CHECK_STR_CONTAINS(err.msg, "problem allreduce cannot be searched: the reference does "
                                   "not agree with itself at size ");
    KV_CHECK_STR_CONTAINS(err.msg, "(fake); fix the reference and run kevo problems check "
                                   "allreduce");
    KV_CHECK(count(dir, "allreduce").evaluations == 0);
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"error\"") == 1);
    /* refused again from the kept failure, without a self-check */
    o.mismatch = NULL;
    kv_err again = {{0}};
    KV_CHECK(run(dir, &o, &checks, &again) != 0);
    KV_CHECK(checks == 0);
    KV_CHECK(strcmp(again.msg, err.msg) == 0);
    /* without a cache nothing is kept: checked afresh, and it passes */
    o.cache_dir = NULL;
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECK(checks == 1);
}

/* A reference that hangs in its self-check: the problem is skipped for this
 * start with the verdict and its message, but nothing is kept (a hang says
 * nothing of the code), so the next start checks it again, and it passes. */
static void test_hang_not_kept(void)
{
    char dir[4096], cache[4096], root[4096], out[16384];
    kv_test_fresh_dir(dir, sizeof dir, "pcheck-hang");
    kv_test_fresh_dir(cache, sizeof cache, "pcheck-hang-cache");
    kv_test_fresh_dir(root, sizeof root, "pcheck-hang-problems");
    copy_problem(root, "allreduce");
    copy_problem(root, "allgather");
    static const char *const both[] = {"allreduce", "allgather"};
    FILE *progress = tmpfile();
    KV_REQUIRE(progress != NULL);
    run_opts o = {.problems_root = root,
                  .problems = both,
                  .n_problems = 2,
                  .evaluations = 8,
                  .cache_dir = cache,
                  .hang = kAllgather,
                  .progress = progress};
    kv_err err = {{0}};
    uint64_t checks = 0;
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECK(checks == 2);
    KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);
    KV_CHECK_STR_CONTAINS(out, "kevo: problem allgather skipped: the reference of allgather "
                               "failed its self-check: hang: deadline of 120 s passed");
    KV_CHECK(count(dir, "allgather").evaluations == 0);
    kv_pcheck v;
    KV_CHECK(kept(cache, root, "allgather", &v) == KV_NOTFOUND);
    KV_CHECK(kept(cache, root, "allreduce", &v) == 0 && v.ok);
    /* the next start: allgather checked again (it no longer hangs) and searched */
    o.hang = NULL;
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECKF(checks == 1, "%llu self-checks after the hang", (unsigned long long)checks);
    KV_CHECK(kept(cache, root, "allgather", &v) == 0 && v.ok);
    KV_CHECK(count(dir, "allgather").evaluations > 0);
    fclose(progress);
}

/* A pass is kept: the second start submits no self-check. An entry damaged
 * in any of several ways is no pass: the next start warns, naming the file,
 * and checks again (then keeps a good entry). */
static void test_pass_cached(void)
{
    char dir[4096], cache[4096], root[4096], path[4400], key[KV_SHA256_HEX_LEN];
    kv_test_fresh_dir(dir, sizeof dir, "pcheck-cached");
    kv_test_fresh_dir(cache, sizeof cache, "pcheck-cached-cache");
    source_path(root, sizeof root, "problems");
    static const char *const one[] = {"allreduce"};
    FILE *progress = tmpfile();
    KV_REQUIRE(progress != NULL);
    run_opts o = {.problems = one,
                  .n_problems = 1,
                  .evaluations = 6,
                  .cache_dir = cache,
                  .progress = progress};
    kv_err err = {{0}};
    uint64_t checks = 0;
    char out[16384];
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECK(checks == 1);
    KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
    KV_CHECKF(checks == 0, "%llu self-checks with a kept pass", (unsigned long long)checks);
    KV_CHECK(kv_search_count_text(dir, "\"cached\":true") == 1);
    KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);

    kv_problem p;
    snprintf(path, sizeof path, "%s/allreduce", root);
    KV_REQUIRE(kv_problem_load(path, &p, &err) == 0);
    KV_REQUIRE(kv_pcheck_key(&p, 2, key, &err) == 0 && kv_pcheck_path(cache, key, path, &err) == 0);
    kv_problem_free(&p);
    char *good = NULL;
    size_t len = 0;
    KV_REQUIRE(kv_read_file(path, &good, &len, &err) == 0);
    /* cut short; not JSON; a pass whose self-check failed; another key */
    char other_key[KV_SHA256_HEX_LEN];
    memcpy(other_key, key, sizeof key);
    other_key[0] = key[0] == 'a' ? 'b' : 'a';
    char *other = replaced(good, key, other_key);
    char *failed_pass = replaced(good, "\"selfcheck\":\t\"ok\"", "\"selfcheck\":\t\"fail\"");
    const char *damaged[] = {NULL, "garbage", failed_pass, other};
    for (int i = 0; i < 4; i++) {
        if (i == 0)
            KV_REQUIRE(kv_write_file_atomic(path, good, len / 2, &err) == 0);
        else
            KV_REQUIRE(kv_write_file_atomic(path, damaged[i], strlen(damaged[i]), &err) == 0);
        KV_CHECKF(run(dir, &o, &checks, &err) == 0, "%s", err.msg);
        KV_CHECKF(checks == 1, "damage %d: %llu self-checks", i, (unsigned long long)checks);
        KV_CHECK(kv_search_progress_text(progress, out, sizeof out) == 0);
        KV_CHECK_STR_CONTAINS(out, "kevo: warning: ");
        KV_CHECK_STR_CONTAINS(out, path);
        KV_CHECK_STR_CONTAINS(out, "; checking again\n");
        kv_pcheck v;
        KV_CHECKF(kept(cache, root, "allreduce", &v) == 0 && v.ok, "damage %d not replaced", i);
    }
    KV_CHECK(kv_search_count_text(dir, "\"type\":\"warning\"") == 4);
    free(good);
    free(other);
    free(failed_pass);
    fclose(progress);
}

int main(void)
{
    if (!getenv("KEVO_SOURCE_DIR")) {
        fprintf(stderr, "KEVO_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    KV_RUN(test_failing_problem_skipped);
    KV_RUN(test_only_problem_refused);
    KV_RUN(test_hang_not_kept);
    KV_RUN(test_pass_cached);
    return kv_test_summary();
}
