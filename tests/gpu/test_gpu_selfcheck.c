/* test_gpu_selfcheck.c — the self-check of every problem's reference
 * (kv_selfcheck: the reference as evaluations place it against a copy of
 * itself on plain memory shifted by KV_SELFCHECK_SHIFT bytes, at every size
 * and on every rank) on the GPUs (ctest label "gpu"; exit 77, skipped,
 * without them).
 *
 * Every problem under problems/ (or those of $KEVO_GPU_TEST_PROBLEMS,
 * comma-separated) and tests/gpu_problems/nccl_misaligned (the shape that
 * met NCCL's symmetric-kernel defect) must agree with itself; the reference
 * of tests/gpu_problems/wrong_reference, wrong on purpose on buffers that
 * are not 256-byte aligned, must not, with the message kevo problems check
 * prints; nor must tests/gpu_problems/oob_reference, which writes past its
 * output at the validation size, where it runs on plain memory. Prints one line per problem: the verdict, the sizes whose
 * reference ran on plain memory, the message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/evaluator.h"
#include "test.h"
#include "test_util.h"

/* Runs the self-check of p; returns its verdict (-1: kevo failed) with the
 * message in msg. */
static int selfcheck(const kv_eval_opts *o, const kv_problem *p, char *msg, size_t cap)
{
    kv_evaluator *ev;
    kv_err err = {{0}};
    if (kv_evaluator_new(o, &ev, &err) != 0) {
        snprintf(msg, cap, "%s", err.msg);
        return -1;
    }
    kv_eval_report r;
    int verdict = -1;
    if (kv_selfcheck(ev, p, &r, &err) != 0) {
        snprintf(msg, cap, "%s", err.msg);
    } else {
        verdict = (int)r.verdict;
        char plain[256] = "";
        size_t used = 0;
        int all_checked = r.n_sizes == p->n_sizes;
        for (int i = 0; i < r.n_sizes; i++) {
            all_checked &= r.sizes[i].checked;
            if (r.sizes[i].ref_plain && used < sizeof plain)
                used += (size_t)snprintf(plain + used, sizeof plain - used, " %s", r.sizes[i].name);
        }
        printf("%-30s W=%d %-9s %d sizes%s; plain memory at:%s\n", p->name, o->world,
               kv_verdict_name(r.verdict), r.n_sizes, all_checked ? "" : " (NOT ALL CHECKED)",
               plain[0] ? plain : " none");
        if (r.verdict == KV_VERDICT_OK && !all_checked) {
            verdict = -1;
            snprintf(msg, cap, "not every size was checked");
        } else {
            snprintf(msg, cap, "%s", r.message);
        }
        if (r.verdict != KV_VERDICT_OK)
            printf("    %s\n", r.message);
        kv_eval_report_free(&r);
    }
    fflush(stdout);
    kv_evaluator_free(ev);
    return verdict;
}

static void load_one(const char *dir, kv_problem *p)
{
    kv_err err = {{0}};
    int rc = kv_problem_load(dir, p, &err);
    KV_CHECKF(rc == 0, "%s: %s", dir, err.msg);
    KV_REQUIRE(rc == 0);
}

int main(void)
{
    char root[4096];
    kv_eval_opts o;
    int setup = kv_test_gpu_eval_setup(root, sizeof root, &o);
    if (setup != 0)
        return setup;
    kv_err err = {{0}};

    char dir[4200], msg[KV_JOB_MSG_MAX];
    snprintf(dir, sizeof dir, "%s/problems", root);
    kv_problem *all = NULL;
    int n = kv_problems_load_all(dir, &all, NULL, NULL, &err);
    if (n <= 0) {
        fprintf(stderr, "no problems under %s: %s\n", dir, err.msg);
        return 1;
    }
    const char *only = getenv("KEVO_GPU_TEST_PROBLEMS");
    for (int i = 0; i < n; i++) {
        if (!kv_test_listed(only, all[i].name) || !kv_problem_supports_world(&all[i], o.world))
            continue;
        int v = selfcheck(&o, &all[i], msg, sizeof msg);
        KV_CHECKF(v == KV_VERDICT_OK, "%s: the self-check failed: %s", all[i].name, msg);
    }
    kv_problems_free(all, n);

    /* the shape of NCCL's defect: agrees with itself because the reference
     * runs on plain memory at the validation size */
    kv_problem p;
    snprintf(dir, sizeof dir, "%s/tests/gpu_problems/nccl_misaligned", root);
    load_one(dir, &p);
    int v = selfcheck(&o, &p, msg, sizeof msg);
    KV_CHECKF(v == KV_VERDICT_OK, "nccl_misaligned: the self-check failed: %s", msg);
    kv_problem_free(&p);

    /* wrong on purpose: the self-check must say so */
    snprintf(dir, sizeof dir, "%s/tests/gpu_problems/wrong_reference", root);
    load_one(dir, &p);
    v = selfcheck(&o, &p, msg, sizeof msg);
    KV_CHECKF(v == KV_VERDICT_MISMATCH, "wrong_reference: verdict %d, not mismatch: %s", v, msg);
    KV_CHECKF(strstr(msg, "the reference does not agree with itself at size ") != NULL &&
                  strstr(msg, "y[") != NULL && strstr(msg, "shifted by 272 bytes") != NULL,
              "wrong_reference: the message does not say what kevo problems check says: %s", msg);
    kv_problem_free(&p);

    /* a stray write past y at the validation size, where both copies of the
     * reference are on plain memory: the plain copies' guard bands see it */
    snprintf(dir, sizeof dir, "%s/tests/gpu_problems/oob_reference", root);
    load_one(dir, &p);
    v = selfcheck(&o, &p, msg, sizeof msg);
    KV_CHECKF(v == KV_VERDICT_MISMATCH, "oob_reference: verdict %d, not mismatch: %s", v, msg);
    KV_CHECKF(strstr(msg, "at size validation: ") != NULL &&
                  strstr(msg, "written outside the tensors") != NULL,
              "oob_reference: the stray write is not what the message names: %s", msg);
    kv_problem_free(&p);
    return kv_test_summary();
}
