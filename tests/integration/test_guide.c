/* test_guide.c — docs/new-problem.md against its own files.
 *
 * The guide walks through a new problem whose files live in
 * tests/fixtures/new-problem/allreduce_bias/. This test keeps the two
 * together: every code block of the guide preceded by a line
 *   <!-- file: tests/fixtures/new-problem/... -->
 * must be byte-identical to that file, and every file of the example must be
 * quoted so. Then the example itself: problem.json loads with the problem
 * loader; reference.cu compiles with nvcc through the evaluator's compile
 * path (skipped, not failed, where nvcc is missing); check.c compiles and
 * runs through the host-check path at the validation size, W = 2 and 8, on
 * host-generated inputs: its own expectation rounded to bf16 passes, a host
 * simulation of the reference's arithmetic (bf16 partial sums in ring order,
 * then the bias added in fp32 and rounded) passes, and an element moved past
 * its tolerance fails. The run configuration passes `kevo config check`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/evaluator.h"
#include "kevo/check.h"
#include "problem/problem.h"
#include "refcheck/refcheck.h"
#include "test.h"
#include "test_util.h"

#define FIXTURE "tests/fixtures/new-problem"
#define EXAMPLE FIXTURE "/allreduce_bias"

static const char *src_root(void)
{
    const char *s = getenv("KEVO_SOURCE_DIR");
    return s && *s ? s : ".";
}

/* The file at rel (under the source tree), or NULL where there is none. */
static char *read_src(const char *rel, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src_root(), rel);
    return access(path, F_OK) == 0 ? kv_test_slurp(path, len) : NULL;
}

/* ---- the guide quotes the fixture ---------------------------------------------- */

static const char *const example_files[] = {"problem.json", "reference.cu", "check.c"};
#define N_FILES (sizeof example_files / sizeof example_files[0])

static void test_blocks_match_files(void)
{
    char *doc = read_src("docs/new-problem.md", NULL);
    KV_REQUIRE(doc != NULL);
    static const char marker[] = "<!-- file: ";
    int quoted[N_FILES] = {0};
    int blocks = 0;
    for (char *m = strstr(doc, marker); m; m = strstr(m + 1, marker)) {
        KV_REQUIRE(m == doc || m[-1] == '\n'); /* a marker is a line of its own */
        char *name = m + strlen(marker);
        char *end = strstr(name, " -->\n");
        KV_REQUIRE(end != NULL);
        char rel[1024];
        KV_REQUIRE((size_t)(end - name) < sizeof rel);
        memcpy(rel, name, (size_t)(end - name));
        rel[end - name] = 0;
        /* the next line opens a fence; the block runs to a line "```" */
        char *open = end + strlen(" -->\n");
        KV_CHECKF(strncmp(open, "```", 3) == 0, "%s: the marker is not followed by a code block",
                  rel);
        char *body = strchr(open, '\n');
        KV_REQUIRE(body != NULL);
        body++;
        char *close = strstr(body, "\n```\n");
        KV_REQUIRE(close != NULL);
        size_t blen = (size_t)(close - body) + 1; /* with the last newline */
        size_t flen;
        char *file = read_src(rel, &flen);
        KV_CHECKF(file != NULL, "the guide quotes %s, which does not exist", rel);
        if (file) {
            int same = flen == blen && memcmp(file, body, blen) == 0;
            if (!same) {
                size_t i = 0;
                while (i < flen && i < blen && file[i] == body[i])
                    i++;
                KV_CHECKF(0,
                          "docs/new-problem.md quotes %s differently from the file (first "
                          "difference at byte %zu of %zu; the block has %zu)",
                          rel, i, flen, blen);
            }
            free(file);
        }
        for (size_t k = 0; k < N_FILES; k++) {
            char want[256];
            snprintf(want, sizeof want, "%s/%s", EXAMPLE, example_files[k]);
            if (strcmp(rel, want) == 0)
                quoted[k] = 1;
        }
        KV_CHECKF(strncmp(rel, FIXTURE "/", strlen(FIXTURE) + 1) == 0,
                  "%s is not a file of " FIXTURE, rel);
        blocks++;
    }
    for (size_t k = 0; k < N_FILES; k++)
        KV_CHECKF(quoted[k], "docs/new-problem.md does not quote %s/%s", EXAMPLE, example_files[k]);
    printf("%d quoted files match\n", blocks);
    free(doc);
}

/* ---- the example loads and compiles ------------------------------------------- */

static int find_nvcc(void)
{
    const char *env = getenv("KEVO_NVCC");
    if (env && *env)
        return access(env, X_OK) == 0;
    const char *path = getenv("PATH");
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", path ? path : "");
    for (char *save = NULL, *dir = strtok_r(buf, ":", &save); dir;
         dir = strtok_r(NULL, ":", &save)) {
        char cand[8300];
        snprintf(cand, sizeof cand, "%s/nvcc", dir);
        if (access(cand, X_OK) == 0)
            return 1;
    }
    return access("/usr/local/cuda/bin/nvcc", X_OK) == 0;
}

static void test_reference_compiles(void)
{
    if (!find_nvcc()) {
        printf("skipped test_reference_compiles: nvcc not found\n");
        return;
    }
    size_t len;
    char *src = read_src(EXAMPLE "/reference.cu", &len);
    KV_REQUIRE(src != NULL);
    kv_compile_opts o;
    kv_compile_defaults(&o, src_root());
    kv_test_fresh_dir(o.cache_dir, sizeof o.cache_dir, "guide-cache");
    o.timeout_s = 600;
    kv_compile_result r;
    kv_err err = {{0}};
    KV_REQUIRE(kv_compile(&o, src, len, &r, &err) == 0);
    KV_CHECKF(r.status == KV_COMPILE_OK, "reference.cu does not compile (status %d): %s", r.status,
              r.errors ? r.errors : err.msg);
    printf("reference.cu compiled in %.1f s\n", r.seconds);
    kv_compile_result_free(&r);
    free(src);
}

/* ---- the host check ------------------------------------------------------------- */

static double normal(uint64_t *s)
{
    double u = (double)(kv_test_rand(s) >> 11) * (1.0 / 9007199254740992.0);
    double v = (double)(kv_test_rand(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

/* Inputs as the evaluator draws them (normal, same_on_all_ranks), not the same values. */
static void fill_inputs(kv_host_call *d)
{
    for (int i = 0; i < d->p->n_inputs; i++) {
        const kv_tensor_spec *t = &d->p->inputs[i];
        KV_REQUIRE(t->init == KV_INIT_NORMAL);
        for (int r = 0; r < d->world; r++) {
            uint64_t s =
                1000003u * (uint64_t)(i + 1) + (t->same_on_all_ranks ? 0 : (uint64_t)r + 1);
            for (int64_t k = 0; k < d->in_shape[i].numel; k++)
                rc_store(d->in[r][i], t->dtype, k, t->init_a + t->init_b * normal(&s));
        }
    }
}

/* The reference's arithmetic on the host: NCCL's ring rounds every partial
 * sum to bf16, then add_bias adds in fp32 and rounds. */
static void simulate_reference(kv_host_call *d)
{
    const int64_t n = d->out_shape[0].numel, H = d->in_shape[1].numel;
    for (int r = 0; r < d->world; r++)
        for (int64_t i = 0; i < n; i++) {
            double s = rc_load(d->in[(r + 1) % d->world][0], KEVO_BF16, i);
            for (int k = 2; k <= d->world; k++)
                s = kevo_check_round_bf16(
                    kevo_check_round_f32(s + rc_load(d->in[(r + k) % d->world][0], KEVO_BF16, i)));
            double b = rc_load(d->in[r][1], KEVO_BF16, i % H);
            rc_store(d->out[r][0], KEVO_BF16, i, kevo_check_round_f32(s + b));
        }
}

static void test_check(const kv_hostcheck *hc, const kv_problem *p, int world)
{
    int size = -1;
    for (int s = 0; s < p->n_sizes; s++)
        if (p->sizes[s].validation)
            size = s;
    KV_REQUIRE(size >= 0);
    kv_host_call d;
    kv_err err = {{0}};
    KV_REQUIRE(kv_host_call_init(&d, p, size, world, &err) == 0);
    fill_inputs(&d);

    /* its own expectation, rounded to bf16 */
    for (int r = 0; r < world; r++) {
        kv_host_expect e;
        KV_REQUIRE(kv_hostcheck_expect(hc, &d, r, &e, &err) == 0);
        for (int64_t i = 0; i < d.out_shape[0].numel; i++)
            rc_store(d.out[r][0], KEVO_BF16, i, e.want[0][i]);
        kv_host_expect_free(&e);
    }
    kv_hostcheck_outcome o;
    int rc = kv_hostcheck_run(hc, &d, &o, &err);
    KV_CHECKF(rc == 0 && o.checked == world * d.out_shape[0].numel,
              "W=%d: the expectation rounded to bf16 fails: rc %d, %s", world, rc,
              rc < 0 ? err.msg : o.first);
    printf("W=%d  expectation: %lld elements, worst error/tolerance %.3f\n", world,
           (long long)o.checked, o.worst_ratio);

    /* the reference's own roundings */
    simulate_reference(&d);
    rc = kv_hostcheck_run(hc, &d, &o, &err);
    KV_CHECKF(rc == 0, "W=%d: the simulated reference fails: rc %d, %s", world, rc,
              rc < 0 ? err.msg : o.first);
    printf("W=%d  simulated reference: worst error/tolerance %.3f\n", world, o.worst_ratio);

    /* one element past its tolerance (a bias added twice), then NaN */
    const int64_t i = d.out_shape[0].numel / 2, H = d.in_shape[1].numel;
    double keep = rc_load(d.out[world - 1][0], KEVO_BF16, i);
    double b = rc_load(d.in[0][1], KEVO_BF16, i % H);
    rc_store(d.out[world - 1][0], KEVO_BF16, i, keep + (fabs(b) > 0.5 ? b : 1.0));
    rc = kv_hostcheck_run(hc, &d, &o, &err);
    KV_CHECKF(
        rc == KV_HOSTCHECK_MISMATCH && o.failed == 1 && o.bad_rank == world - 1 && o.bad_index == i,
        "W=%d: a wrong element is not caught: rc %d, %lld failed", world, rc, (long long)o.failed);
    rc_store(d.out[world - 1][0], KEVO_BF16, i, NAN);
    rc = kv_hostcheck_run(hc, &d, &o, &err);
    KV_CHECKF(rc == KV_HOSTCHECK_MISMATCH && o.failed == 1, "W=%d: NaN is not caught", world);
    kv_host_call_free(&d);
}

/* The guide's run configuration loads its problem from the fixture, as
 * `KEVO_PROBLEMS=tests/fixtures/new-problem kevo config check` does. */
static void test_run_config(void)
{
    const char *bin = getenv("KEVO_BIN");
    if (!bin || !*bin) {
        printf("skipped test_run_config: KEVO_BIN not set\n");
        return;
    }
    char root[4096], cfg[4096];
    snprintf(root, sizeof root, "%s/%s", src_root(), FIXTURE);
    snprintf(cfg, sizeof cfg, "%s/%s/run.json", src_root(), FIXTURE);
    KV_REQUIRE(setenv("KEVO_PROBLEMS", root, 1) == 0);
    const char *argv[] = {bin, "config", "check", cfg, NULL};
    int rc = kv_test_spawn(argv, NULL, NULL, 60);
    KV_CHECKF(rc == 0, "kevo config check %s exits %d", cfg, rc);
    unsetenv("KEVO_PROBLEMS");
}

int main(void)
{
    test_blocks_match_files();

    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", src_root(), EXAMPLE);
    kv_problem p;
    kv_err err = {{0}};
    int loaded = kv_problem_load(dir, &p, &err) == 0;
    KV_CHECKF(loaded, "%s: %s", dir, err.msg);
    if (!loaded)
        return kv_test_summary();
    KV_CHECK(strcmp(p.name, "allreduce_bias") == 0 && p.check[0] != 0);

    kv_compile_opts co;
    kv_compile_defaults(&co, src_root());
    kv_test_fresh_dir(co.cache_dir, sizeof co.cache_dir, "guide-check-cache");
    kv_hostcheck *hc;
    int rc = kv_hostcheck_open(&co, &p, &hc, &err);
    KV_CHECKF(rc == 0, "check.c: %s", err.msg);
    if (rc == 0) {
        test_check(hc, &p, 2);
        test_check(hc, &p, 8);
        kv_hostcheck_close(hc);
    }
    kv_problem_free(&p);

    test_reference_compiles();
    test_run_config();
    return kv_test_summary();
}
