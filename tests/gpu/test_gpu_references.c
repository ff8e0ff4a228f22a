/* test_gpu_references.c — every problem's NCCL reference against an
 * independent host computation in float64 (ctest label "gpu"; exit 77,
 * skipped, without the GPUs).
 *
 * For each problem under problems/ (or those named in
 * $KEVO_GPU_TEST_PROBLEMS, comma-separated), the reference runs once at its
 * smallest size and at its validation size through the evaluator with
 * --dump (worker/dump.c); every rank's inputs and outputs are read back and
 * compared, element by element, with the problem's host check
 * (problems/<name>/check.c, compiled and loaded through
 * evaluator/checks/hostcheck.h). tests/gpu_problems/nccl_misaligned, the shape
 * that met NCCL's symmetric-kernel defect, is checked the same way. Prints one line per problem and size: elements
 * compared, failures, the worst error as a fraction of its tolerance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/evaluator.h"
#include "refcheck/refcheck.h"
#include "test.h"
#include "test_util.h"

/* The non-validation size with the fewest input bytes at this world. */
static int smallest_size(const kv_problem *p, int world)
{
    int best = -1;
    size_t best_bytes = 0;
    for (int s = 0; s < p->n_sizes; s++) {
        if (p->sizes[s].validation)
            continue;
        kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
        kv_err err;
        if (kv_problem_shapes(p, s, world, in, out, &err) != 0)
            continue;
        size_t bytes = 0;
        for (int i = 0; i < p->n_inputs; i++)
            bytes += in[i].bytes;
        if (best < 0 || bytes < best_bytes) {
            best = s;
            best_bytes = bytes;
        }
    }
    return best;
}

static void check_problem(kv_eval_opts *base, const kv_problem *p)
{
    int sizes[2] = {smallest_size(p, base->world), -1};
    for (int s = 0; s < p->n_sizes; s++)
        if (p->sizes[s].validation)
            sizes[1] = s;
    KV_REQUIRE(sizes[0] >= 0 && sizes[1] >= 0);
    kv_eval_opts o = *base;
    o.n_sizes = 2;
    for (int k = 0; k < 2; k++)
        snprintf(o.sizes[k], sizeof o.sizes[k], "%s", p->sizes[sizes[k]].name);
    char dump[4096];
    kv_test_fresh_dir(dump, sizeof dump, "refdump");
    snprintf(o.dump_dir, sizeof o.dump_dir, "%s", dump);

    kv_evaluator *ev;
    kv_err err = {{0}};
    KV_REQUIRE(kv_evaluator_new(&o, &ev, &err) == 0);
    kv_eval_report r;
    int rc = kv_baseline(ev, p, &r, &err);
    KV_CHECKF(rc == 0, "%s: kevo baseline failed: %s", p->name, err.msg);
    if (rc == 0) {
        KV_CHECKF(r.verdict == KV_VERDICT_OK, "%s: the reference failed: %s", p->name, r.message);
        kv_eval_report_free(&r);
    }
    kv_evaluator_free(ev);

    kv_hostcheck *hc = NULL;
    if (rc == 0) {
        rc = kv_hostcheck_open(&base->compile, p, &hc, &err);
        KV_CHECKF(rc == 0, "%s: %s", p->name, err.msg);
    }
    for (int k = 0; k < 2 && rc == 0; k++) {
        kv_host_call d;
        if (kv_host_call_init(&d, p, sizes[k], base->world, &err) != 0 ||
            kv_host_call_load_dump(&d, dump, "reference", &err) != 0) {
            KV_CHECKF(0, "%s %s: %s", p->name, p->sizes[sizes[k]].name, err.msg);
            kv_host_call_free(&d);
            continue;
        }
        kv_hostcheck_outcome out;
        int bad = kv_hostcheck_run(hc, &d, &out, &err);
        const char *why = bad < 0                       ? err.msg
                          : bad == KV_HOSTCHECK_SKIPPED ? "skipped by check.c"
                                                        : out.first;
        printf("%-30s %-12s W=%d %11lld elements  %6lld failed  worst error/tolerance %.3f  "
               "(host %.1f s)%s%s\n",
               p->name, p->sizes[sizes[k]].name, base->world, (long long)out.checked,
               (long long)out.failed, out.worst_ratio, out.seconds, bad ? "  FIRST: " : "",
               bad ? why : "");
        fflush(stdout);
        KV_CHECKF(bad == 0, "%s %s: the reference disagrees with the host computation: %s", p->name,
                  p->sizes[sizes[k]].name, why);
        KV_CHECKF(out.checked > 0, "%s %s: nothing compared", p->name, p->sizes[sizes[k]].name);
        kv_host_call_free(&d);
    }
    kv_hostcheck_close(hc);
    kv_test_rm_rf(dump);
}

int main(void)
{
    char root[4096];
    kv_eval_opts o;
    int setup = kv_test_gpu_eval_setup(root, sizeof root, &o);
    if (setup != 0)
        return setup;
    o.warmup = 3;
    o.iters = 5;
    kv_err err = {{0}};

    char dir[4200];
    snprintf(dir, sizeof dir, "%s/problems", root);
    kv_problem *all = NULL;
    int n = kv_problems_load_all(dir, &all, NULL, NULL, &err);
    if (n <= 0) {
        fprintf(stderr, "no problems under %s: %s\n", dir, err.msg);
        return 1;
    }
    const char *only = getenv("KEVO_GPU_TEST_PROBLEMS");
    for (int i = 0; i < n; i++)
        if (kv_test_listed(only, all[i].name) && kv_problem_supports_world(&all[i], o.world))
            check_problem(&o, &all[i]);
    kv_problems_free(all, n);

    /* the shape that met NCCL 2.28.3's symmetric-kernel defect (docs/problems.md,
     * "NCCL on the window"): right because its reference runs on plain memory there */
    kv_problem p;
    snprintf(dir, sizeof dir, "%s/tests/gpu_problems/nccl_misaligned", root);
    if (kv_test_listed(only, "nccl_misaligned")) {
        int rc = kv_problem_load(dir, &p, &err);
        KV_CHECKF(rc == 0, "%s: %s", dir, err.msg);
        if (rc == 0) {
            check_problem(&o, &p);
            kv_problem_free(&p);
        }
    }
    return kv_test_summary();
}
