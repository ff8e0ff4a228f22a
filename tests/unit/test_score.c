/* test_score.c — kv_eval_score (evaluator/pipeline.h) on job results made
 * by hand for problems/allreduce at W = 2: a time below a size's floor
 * (the cost model at the physical ceilings less the margin) is the verdict
 * implausible with the numbers, the candidate's or the reference's; just
 * above it is ok. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/pipeline.h"
#include "test.h"

static kv_problem *problem;

/* The floor of size name at W = 2, in µs. */
static double floor_us(const char *name)
{
    kv_roofline r;
    kv_err err = {{0}};
    int s = kv_problem_find_size(problem, name);
    if (s < 0 || kv_problem_roofline(problem, s, 2, &r, &err) != 0) {
        fprintf(stderr, "no floor of %s: %s\n", name, err.msg);
        abort();
    }
    return r.floor_s * 1e6;
}

/* An ok job at every size of the problem, both sides at 1.01 x the floor
 * (the validation size checked, not timed). */
static kv_eval_report *ok_report(int baseline)
{
    kv_eval_report *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    r->baseline = baseline;
    r->job.verdict = KV_VERDICT_OK;
    for (int i = 0; i < problem->n_sizes; i++) {
        kv_size_outcome *o = &r->job.sizes[r->job.n_sizes++];
        snprintf(o->name, sizeof o->name, "%s", problem->sizes[i].name);
        o->checked = o->ok = 1;
        if (problem->sizes[i].validation)
            continue;
        o->timed = 1;
        o->graph_calls = 8;
        o->ref.median = 2 * floor_us(o->name);
        o->cand.median = baseline ? 0 : 1.01 * floor_us(o->name);
    }
    return r;
}

static kv_size_outcome *size_of(kv_eval_report *r, const char *name)
{
    for (int i = 0; i < r->job.n_sizes; i++)
        if (strcmp(r->job.sizes[i].name, name) == 0)
            return &r->job.sizes[i];
    abort();
}

static int score(kv_eval_report *r)
{
    kv_err err = {{0}};
    int rc = kv_eval_score(problem, 2, r, &err);
    if (rc != 0)
        fprintf(stderr, "kv_eval_score: %s\n", err.msg);
    return rc;
}

static void test_above_floor_is_ok(void)
{
    kv_eval_report *r = ok_report(0);
    KV_REQUIRE(score(r) == 0);
    KV_CHECKF(r->verdict == KV_VERDICT_OK, "%s: %s", kv_verdict_name(r->verdict), r->message);
    KV_CHECK(r->speedup > 1.9 && r->roofline > 0);
    /* the floor is reported per size: 16 MiB over 386 GB/s, less 10% */
    KV_CHECK(r->sizes[2].floor_us > 39.1 && r->sizes[2].floor_us < 39.2);
    free(r);
}

static void test_candidate_below_floor(void)
{
    kv_eval_report *r = ok_report(0);
    size_of(r, "16MiB")->cand.median = 15.7; /* 223% of the roofline, as the issue saw */
    KV_REQUIRE(score(r) == 0);
    KV_CHECKF(r->verdict == KV_VERDICT_IMPLAUSIBLE, "%s", kv_verdict_name(r->verdict));
    char want[160];
    snprintf(want, sizeof want, "size 16MiB: 15.70 us is below the floor of %.2f us",
             floor_us("16MiB"));
    KV_CHECK_STR_CONTAINS(r->message, want);
    KV_CHECK_STR_CONTAINS(r->message, "less a 10% margin for noise");
    KV_CHECK_STR_CONTAINS(r->message, "timing was gamed or the problem's cost model is wrong");
    KV_CHECK(r->speedup == 0 && r->roofline == 0);
    free(r);
}

static void test_reference_below_floor(void)
{
    kv_eval_report *r = ok_report(0);
    size_of(r, "256MiB")->ref.median = 300; /* below 626 us */
    size_of(r, "1MiB")->cand.median = 0.01; /* the reference is named first */
    KV_REQUIRE(score(r) == 0);
    KV_CHECKF(r->verdict == KV_VERDICT_IMPLAUSIBLE, "%s", kv_verdict_name(r->verdict));
    char want[160];
    snprintf(want, sizeof want,
             "the reference runs 300.00 us at size 256MiB, below the floor "
             "of %.2f us",
             floor_us("256MiB"));
    KV_CHECK_STR_CONTAINS(r->message, want);
    KV_CHECK_STR_CONTAINS(r->message, "the problem's cost model (problem.json, \"cost\") is wrong");
    KV_CHECK_STR_CONTAINS(r->message, "no speedup is claimed and no elite made");
    KV_CHECK(r->speedup == 0);
    free(r);

    /* kevo baseline: the reference is the timed side */
    r = ok_report(1);
    size_of(r, "64KiB")->ref.median = 0.1;
    KV_REQUIRE(score(r) == 0);
    KV_CHECK(r->verdict == KV_VERDICT_IMPLAUSIBLE);
    KV_CHECK_STR_CONTAINS(r->message, "the reference runs 0.10 us at size 64KiB");
    KV_CHECK(strstr(r->message, "no speedup") == NULL);
    free(r);
}

/* Only an ok job is implausible: a wrong result says more; an untimed size
 * has no time to judge. */
static void test_only_ok_and_timed(void)
{
    kv_eval_report *r = ok_report(0);
    r->job.verdict = KV_VERDICT_MISMATCH;
    snprintf(r->job.message, sizeof r->job.message, "y[3] differs");
    size_of(r, "16MiB")->cand.median = 1;
    KV_REQUIRE(score(r) == 0);
    KV_CHECK(r->verdict == KV_VERDICT_MISMATCH && strcmp(r->message, "y[3] differs") == 0);
    free(r);

    r = ok_report(0);
    kv_size_outcome *v = size_of(r, "validation");
    v->cand.median = v->ref.median = 0.001; /* not timed: a leftover number */
    kv_size_outcome *s = size_of(r, "1MiB");
    s->timed = 0;
    s->cand.median = 0.001;
    KV_REQUIRE(score(r) == 0);
    KV_CHECKF(r->verdict == KV_VERDICT_OK, "%s", r->message);
    free(r);
}

int main(void)
{
    const char *root = getenv("KEVO_SOURCE_DIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/problems/allreduce", root && *root ? root : ".");
    problem = calloc(1, sizeof *problem);
    kv_err err = {{0}};
    if (!problem || kv_problem_load(dir, problem, &err) != 0) {
        fprintf(stderr, "loading %s: %s\n", dir, err.msg);
        return 1;
    }
    KV_RUN(test_above_floor_is_ok);
    KV_RUN(test_candidate_below_floor);
    KV_RUN(test_reference_below_floor);
    KV_RUN(test_only_ok_and_timed);
    kv_problem_free(problem);
    free(problem);
    return kv_test_summary();
}
