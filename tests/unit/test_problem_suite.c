/* test_problem_suite.c — the shipped problems (problems/), on the CPU:
 *  - all fifteen load with no error, each for W = 2, 4 and 8, with at least
 *    three timed sizes and a validation size, and every shape and cost
 *    evaluates at every size and world;
 *  - the sizes run from latency-bound to bandwidth- or compute-bound (the
 *    largest roofline is far above the smallest);
 *  - the cost model gives the bytes and FLOPs worked out by hand below;
 *  - every reference.cu compiles with the evaluator's flags (nvcc needs no
 *    GPU; nothing runs).
 * Malformed problems are covered by test_problem.c and its fixtures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/evaluator.h"
#include "common/fsutil.h"
#include "problem/problem.h"
#include "test.h"
#include "test_util.h"

static const char *const expected[] = {
    "allreduce",
    "allgather",
    "reducescatter",
    "alltoall",
    "broadcast",
    "gemm_allreduce",
    "allgather_gemm",
    "gemm_reducescatter",
    "tp_rmsnorm",
    "moe_dispatch",
    "moe_combine",
    "ulysses_seq_to_heads",
    "vocab_parallel_cross_entropy",
    "fp8_allgather",
    "halo_conv1d",
};
#define N_EXPECTED (sizeof expected / sizeof expected[0])

/* Costs worked out by hand from each problem's definition. */
typedef struct {
    const char *problem, *size;
    int world;
    double send, recv, flops, hbm;
} cost_case;

static const cost_case costs[] = {
#include "problem_costs.inc"
};

typedef struct {
    int n;
    char msgs[32][1024];
} errors;

static void collect(const char *msg, void *ctx)
{
    errors *e = ctx;
    if (e->n < 32)
        snprintf(e->msgs[e->n], sizeof e->msgs[0], "%s", msg);
    e->n++;
}

static const kv_problem *find(const kv_problem *v, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

static void check_shape_of_suite(const kv_problem *p)
{
    static const int worlds[] = {2, 4, 8};
    for (size_t w = 0; w < 3; w++)
        KV_CHECKF(kv_problem_supports_world(p, worlds[w]), "%s: W=%d", p->name, worlds[w]);
    int timed = 0, validation = 0;
    double lo = 0, hi = 0;
    for (int s = 0; s < p->n_sizes; s++) {
        if (p->sizes[s].validation) {
            validation++;
            continue;
        }
        timed++;
        for (size_t w = 0; w < 3; w++) {
            kv_roofline roof;
            kv_err err = {{0}};
            int rc = kv_problem_roofline(p, s, worlds[w], &roof, &err);
            KV_CHECKF(rc == 0 && roof.seconds > 0, "%s %s W=%d: roofline %g: %s", p->name,
                      p->sizes[s].name, worlds[w], roof.seconds, err.msg);
            if (worlds[w] == 2 && rc == 0) {
                if (lo == 0 || roof.seconds < lo)
                    lo = roof.seconds;
                if (roof.seconds > hi)
                    hi = roof.seconds;
            }
        }
    }
    KV_CHECKF(timed >= 3 && validation == 1, "%s: %d timed sizes, %d validation", p->name, timed,
              validation);
    KV_CHECKF(hi >= 50 * lo,
              "%s: rooflines at W=2 span %.2f..%.2f us: not latency- to "
              "bandwidth-bound",
              p->name, lo * 1e6, hi * 1e6);
    KV_CHECKF(strlen(p->description) > 600,
              "%s: a %zu-byte description is too thin for a "
              "kernel engineer",
              p->name, strlen(p->description));
}

static void check_costs(const kv_problem *v, int n)
{
    for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++) {
        const cost_case *k = &costs[c];
        const kv_problem *p = find(v, n, k->problem);
        KV_CHECKF(p != NULL, "cost case for unknown problem %s", k->problem);
        if (!p)
            continue;
        int s = kv_problem_find_size(p, k->size);
        KV_CHECKF(s >= 0, "%s has no size %s", k->problem, k->size);
        if (s < 0)
            continue;
        kv_roofline roof;
        kv_err err = {{0}};
        KV_CHECKF(kv_problem_roofline(p, s, k->world, &roof, &err) == 0, "%s", err.msg);
        KV_CHECKF(roof.send_bytes == k->send && roof.recv_bytes == k->recv &&
                      roof.flops == k->flops && roof.hbm_bytes == k->hbm,
                  "%s %s W=%d: send %.0f recv %.0f flops %.0f hbm %.0f, by hand %.0f %.0f %.0f "
                  "%.0f",
                  k->problem, k->size, k->world, roof.send_bytes, roof.recv_bytes, roof.flops,
                  roof.hbm_bytes, k->send, k->recv, k->flops, k->hbm);
    }
    /* every problem has at least two hand-checked cases */
    for (int i = 0; i < n; i++) {
        int count = 0;
        for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++)
            count += strcmp(costs[c].problem, v[i].name) == 0;
        KV_CHECKF(count >= 2, "%s: %d hand-checked cost cases", v[i].name, count);
    }
}

/* Every reference through the compile pool, two at a time. */
static void check_references_compile(const kv_problem *v, int n, const char *src_root)
{
    kv_compile_opts o;
    kv_compile_defaults(&o, src_root);
    kv_test_fresh_dir(o.cache_dir, sizeof o.cache_dir, "suite-cache");
    o.jobs = 2;
    o.timeout_s = 300;
    kv_compile_pool *pool;
    kv_err err = {{0}};
    KV_REQUIRE(kv_compile_pool_new(&o, &pool, &err) == 0);
    uint64_t tickets[64];
    for (int i = 0; i < n && i < 64; i++) {
        char *text = NULL;
        size_t len = 0;
        KV_REQUIRE(kv_read_file(v[i].reference, &text, &len, &err) == 0);
        KV_REQUIRE(kv_compile_submit(pool, text, len, &tickets[i], &err) == 0);
        free(text);
    }
    KV_CHECKF(kv_compile_wait_all(pool, &err) == 0, "%s", err.msg);
    uint64_t t;
    kv_compile_result r;
    int done = 0;
    while (kv_compile_take(pool, &t, &r) == 0) {
        int i = 0;
        while (i < n && tickets[i] != t)
            i++;
        KV_CHECKF(i < n && r.status == KV_COMPILE_OK, "%s does not compile:\n%s",
                  i < n ? v[i].reference : "?", kv_test_str(r.errors));
        printf("compiled %-32s %5.1f s\n", i < n ? v[i].name : "?", r.seconds);
        kv_compile_result_free(&r);
        done++;
    }
    KV_CHECKF(done == n, "%d of %d references compiled", done, n);
    kv_compile_pool_free(pool);
}

int main(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    char root[4096];
    snprintf(root, sizeof root, "%s/problems", src ? src : ".");
    errors errs;
    memset(&errs, 0, sizeof errs);
    kv_problem *v = NULL;
    kv_err err = {{0}};
    int n = kv_problems_load_all(root, &v, collect, &errs, &err);
    KV_CHECKF(n >= 0, "%s", err.msg);
    for (int i = 0; i < errs.n && i < 32; i++)
        KV_CHECKF(0, "%s", errs.msgs[i]);
    KV_CHECKF(n == (int)N_EXPECTED, "%d problems, expected %zu", n, N_EXPECTED);
    for (size_t k = 0; k < N_EXPECTED; k++)
        KV_CHECKF(find(v, n, expected[k]) != NULL, "problem %s is missing", expected[k]);
    for (int i = 0; i < n; i++)
        check_shape_of_suite(&v[i]);
    check_costs(v, n);
    check_references_compile(v, n, src ? src : ".");
    kv_problems_free(v, n);
    return kv_test_summary();
}
