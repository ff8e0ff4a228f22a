/* test_refcheck.c — the shipped problems' host checks (problems/<name>/check.c)
 * on the CPU, through the path every problem's check takes: compiled with
 * the C compiler into a cache (once per problem), dlopen'ed and called by
 * evaluator/checks/hostcheck.c.
 *
 * The number formats of include/kevo/check.h against hand-worked values;
 * then, for every problem (or those named on the command line) at its
 * validation size and W = 2 and 8: inputs generated on the host as the
 * evaluator would (same kinds and ranges, not the same values), outputs
 * written as the check's expectation rounded to the output's dtype, which
 * must pass; then one element of each output moved past its tolerance, or
 * made NaN, which must fail and be named. A dump written as the evaluator
 * lays it out, with tensors larger than the text limit, loads back byte for
 * byte. The GPU side (the references against these checks) is
 * tests/gpu/test_gpu_references.c; the errors of broken checks are
 * tests/unit/test_hostcheck.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fsutil.h"
#include "kevo/check.h"
#include "refcheck/refcheck.h"
#include "test.h"
#include "test_util.h"

static void test_formats(void)
{
    KV_CHECK(kevo_check_round_bf16(1.0 + 1.0 / 256) == 1.0);             /* a tie goes to even */
    KV_CHECK(kevo_check_round_bf16(1.0 + 3.0 / 256) == 1.0 + 4.0 / 256); /* a tie goes to even */
    KV_CHECK(kevo_check_round_bf16(1.0 + 1.0 / 256 + 1e-9) == 1.0 + 2.0 / 256);
    KV_CHECK(kevo_check_round_bf16(-3.0) == -3.0);
    KV_CHECK(kevo_check_ulp_bf16(1.0) == 1.0 / 128 && kevo_check_ulp_bf16(1.5) == 1.0 / 128);
    KV_CHECK(kevo_check_ulp_bf16(2.0) == 1.0 / 64 && kevo_check_ulp_bf16(0.0) == ldexp(1, -133));
    KV_CHECK(kevo_check_ulp_bf16(1.0) == 2 * KEVO_CHECK_U_BF16);
    KV_CHECK(kevo_check_ulp_f32(1.0) == ldexp(1, -23) &&
             kevo_check_ulp_f32(1.0) == 2 * KEVO_CHECK_U_F32);
    KV_CHECK(kevo_check_ulp_f16(1.0) == ldexp(1, -10) && kevo_check_ulp_f16(0.0) == ldexp(1, -24));
    KV_CHECK(kevo_check_round_f32(1.0 + ldexp(1, -24)) == 1.0);
    KV_CHECK(kevo_check_round_f32(0.1) == (double)0.1f);
    KV_CHECK(kevo_check_round_f16(65519.0) == 65504.0 && isinf(kevo_check_round_f16(65520.0)));
    KV_CHECK(kevo_check_round_f16(1.0 + ldexp(1, -11)) == 1.0); /* a tie goes to even */
    KV_CHECK(kevo_check_round_fp8_e4m3(500) == 448 && kevo_check_round_fp8_e4m3(-1e9) == -448);
    KV_CHECK(kevo_check_round_fp8_e4m3(1.0625) == 1.0 && kevo_check_round_fp8_e4m3(1.1875) == 1.25);
    KV_CHECK(kevo_check_round_fp8_e4m3(ldexp(1, -9)) == ldexp(1, -9));  /* smallest subnormal */
    KV_CHECK(kevo_check_round_fp8_e4m3(ldexp(3, -11)) == ldexp(1, -9)); /* 0.75 of it rounds up */
    KV_CHECK(kevo_check_bf16_sum_tol(1.0, 4.0, 2) == 1.0 / 256);
    KV_CHECK(kevo_check_bf16_sum_tol(1.0, 4.0, 4) == 1.0 / 256 + 2 * (4.0 / 256));

    /* integers, and the parameter lookup and failure of a check */
    int32_t i32[2] = {-7, 2147483647};
    int64_t i64[1] = {(int64_t)1 << 40};
    KV_CHECK(rc_load(i32, KEVO_I32, 0) == -7 && rc_load(i32, KEVO_I32, 1) == 2147483647.0);
    KV_CHECK(rc_load(i64, KEVO_I64, 0) == ldexp(1, 40));
    static kevo_check_call c;
    c.n_params = 2;
    c.param_names[0] = "N";
    c.param_names[1] = "H";
    c.param_values[0] = 12;
    c.param_values[1] = 34;
    KV_CHECK(kevo_check_param(&c, "H") == 34 && kevo_check_param(&c, "N") == 12);
    KV_CHECK(c.missing_param == NULL);
    KV_CHECK(kevo_check_param(&c, "K") == -1 && c.missing_param &&
             strcmp(c.missing_param, "K") == 0);
    KV_CHECK(kevo_check_fail(&c, "x[%d] = %g", 3, 0.5) == -1 && strcmp(c.error, "x[3] = 0.5") == 0);

    /* encodings: known bit patterns, and a round trip of each format */
    uint16_t h[2];
    uint8_t b[4];
    h[0] = 0x3F80;
    KV_CHECK(rc_load(h, KEVO_BF16, 0) == 1.0);
    h[0] = 0x3C00;
    h[1] = 0x7BFF;
    KV_CHECK(rc_load(h, KEVO_F16, 0) == 1.0 && rc_load(h, KEVO_F16, 1) == 65504.0);
    b[0] = 0x7E;
    b[1] = 0x7F;
    b[2] = 0x01;
    b[3] = 0xB8;
    KV_CHECK(rc_load(b, KEVO_FP8_E4M3, 0) == 448.0 && isnan(rc_load(b, KEVO_FP8_E4M3, 1)));
    KV_CHECK(rc_load(b, KEVO_FP8_E4M3, 2) == ldexp(1, -9) && rc_load(b, KEVO_FP8_E4M3, 3) == -1.0);
    static const kevo_dtype floats[] = {KEVO_BF16, KEVO_F16, KEVO_F32, KEVO_FP8_E4M3};
    static const double values[] = {0.0, 1.0, -2.5, 0.1, 300.0, 1e-3, -7.75};
    for (size_t t = 0; t < sizeof floats / sizeof floats[0]; t++) {
        double buf[1];
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            rc_store(buf, floats[t], 0, values[v]);
            double back = rc_load(buf, floats[t], 0);
            double want = floats[t] == KEVO_BF16       ? kevo_check_round_bf16(values[v])
                          : floats[t] == KEVO_F32      ? kevo_check_round_f32(values[v])
                          : floats[t] == KEVO_FP8_E4M3 ? kevo_check_round_fp8_e4m3(values[v])
                                                       : kevo_check_round_f16(values[v]);
            KV_CHECKF(back == want, "dtype %d: %g stored and loaded as %g, want %g", floats[t],
                      values[v], back, want);
            if (floats[t] == KEVO_F16)
                KV_CHECKF(fabs(back - values[v]) <= ldexp(fabs(values[v]), -11) + ldexp(1, -25),
                          "f16: %g came back as %g", values[v], back);
        }
    }
}

/* ---- host inputs --------------------------------------------------------------- */

static double uniform01(uint64_t *s)
{
    return (double)(kv_test_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

static double normal(uint64_t *s)
{
    double u = uniform01(s), v = uniform01(s);
    return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

static int fill_inputs(kv_host_call *d, uint64_t seed)
{
    const kv_problem *p = d->p;
    for (int i = 0; i < p->n_inputs; i++) {
        const kv_tensor_spec *t = &p->inputs[i];
        int64_t lo = 0, hi = 0;
        kv_err err = {{0}};
        if ((t->init == KV_INIT_INT_RANGE || t->init == KV_INIT_PERMUTATION) &&
            kv_problem_init_range(p, i, d->size, d->world, &lo, &hi, &err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            return -1;
        }
        for (int r = 0; r < d->world; r++) {
            uint64_t s = seed * 1000003u + (uint64_t)i * 7919u +
                         (t->same_on_all_ranks ? 0 : (uint64_t)r + 1);
            const kv_shape *sh = &d->in_shape[i];
            int64_t row = sh->shape[sh->ndim - 1];
            for (int64_t k = 0; k < sh->numel; k++) {
                double v = 0;
                switch (t->init) {
                case KV_INIT_NORMAL: v = t->init_a + t->init_b * normal(&s); break;
                case KV_INIT_UNIFORM:
                    v = t->init_a + (t->init_b - t->init_a) * uniform01(&s);
                    break;
                case KV_INIT_INT_RANGE:
                    v = (double)(lo + (int64_t)(kv_test_rand(&s) % (uint64_t)(hi - lo)));
                    break;
                case KV_INIT_PERMUTATION: {
                    /* distinct values within the row: draw until new */
                    int64_t first = k - k % row;
                    for (;;) {
                        v = (double)(lo + (int64_t)(kv_test_rand(&s) % (uint64_t)(hi - lo)));
                        int64_t q = first;
                        while (q < k && rc_load(d->in[r][i], t->dtype, q) != v)
                            q++;
                        if (q == k)
                            break;
                    }
                    break;
                }
                case KV_INIT_ZEROS: v = 0; break;
                case KV_INIT_HOOK:
                    fprintf(stderr,
                            "%s: input %s uses an inputs.cu hook, which the CPU test "
                            "cannot run\n",
                            p->name, t->name);
                    return -1;
                }
                rc_store(d->in[r][i], t->dtype, k, v);
            }
        }
    }
    return 0;
}

/* ---- one problem ------------------------------------------------------------------ */

/* Writes every rank's outputs from the check's expectation (rounded to the
 * dtype); elements past a valid count get NaN or -1. */
static int write_expected(const kv_hostcheck *hc, kv_host_call *d, kv_err *err)
{
    for (int r = 0; r < d->world; r++) {
        kv_host_expect e;
        if (kv_hostcheck_expect(hc, d, r, &e, err) != 0)
            return -1;
        for (int j = 0; j < d->p->n_outputs; j++) {
            kevo_dtype t = d->p->outputs[j].dtype;
            int is_int = t == KEVO_I32 || t == KEVO_I64;
            for (int64_t i = 0; i < d->out_shape[j].numel; i++)
                rc_store(d->out[r][j], t, i, i < e.valid[j] ? e.want[j][i] : is_int ? -1 : NAN);
        }
        kv_host_expect_free(&e);
    }
    return 0;
}

static int validation_size(const kv_problem *p)
{
    for (int s = 0; s < p->n_sizes; s++)
        if (p->sizes[s].validation)
            return s;
    return -1;
}

static void check_problem(const kv_hostcheck *hc, const kv_problem *p, int world)
{
    int size = validation_size(p);
    KV_REQUIRE(size >= 0);
    kv_host_call d;
    kv_err err = {{0}};
    if (kv_host_call_init(&d, p, size, world, &err) != 0) {
        KV_CHECKF(0, "%s W=%d: %s", p->name, world, err.msg);
        return;
    }
    KV_CHECKF(fill_inputs(&d, 42) == 0, "%s: inputs", p->name);
    int wrote = write_expected(hc, &d, &err);
    KV_CHECKF(wrote == 0, "%s W=%d: the check failed on valid inputs: %s", p->name, world, err.msg);
    if (wrote != 0) {
        kv_host_call_free(&d);
        return;
    }
    kv_hostcheck_outcome o;
    int rc = kv_hostcheck_run(hc, &d, &o, &err);
    KV_CHECKF(rc == 0, "%s W=%d: its own expectation, rounded to the dtype, fails: %s", p->name,
              world,
              rc < 0                       ? err.msg
              : rc == KV_HOSTCHECK_SKIPPED ? "skipped"
                                           : o.first);
    KV_CHECKF(o.checked > 0, "%s W=%d: nothing compared", p->name, world);
    KV_CHECKF(o.bad_rank == -1 && o.first[0] == 0, "%s W=%d: a failure named: %s", p->name, world,
              o.first);
    printf("%-30s W=%d  %9lld elements  worst error/tolerance %.3f  (check %.2f s)\n", p->name,
           world, (long long)o.checked, o.worst_ratio, o.seconds);

    /* one wrong element per output (at rank world-1, the middle of its valid part) */
    int last = world - 1;
    kv_host_expect e;
    KV_REQUIRE(kv_hostcheck_expect(hc, &d, last, &e, &err) == 0);
    for (int j = 0; j < p->n_outputs; j++) {
        int64_t valid = e.valid[j];
        if (valid <= 0)
            continue;
        int64_t i = valid / 2;
        double keep = rc_load(d.out[last][j], p->outputs[j].dtype, i);
        double want = e.want[j][i], tol = e.tol[j][i];
        kevo_dtype t = p->outputs[j].dtype;
        double bad = want + 2 * tol + fabs(want) * 0.25 + 1;
        if (t == KEVO_FP8_E4M3 && fabs(bad) > 448)
            bad = want > 0 ? -want - 1 : -want + 1;
        rc_store(d.out[last][j], t, i, bad);
        rc = kv_hostcheck_run(hc, &d, &o, &err);
        KV_CHECKF(rc == KV_HOSTCHECK_MISMATCH && o.failed == 1 &&
                      strstr(o.first, p->outputs[j].name) && o.bad_rank == last &&
                      o.bad_output == j && o.bad_index == i && o.want == want,
                  "%s W=%d: output %s[%lld] = %g (want %g, tolerance %g) not caught: rc %d, "
                  "%lld failed, first: %s",
                  p->name, world, p->outputs[j].name, (long long)i, bad, want, tol, rc,
                  (long long)o.failed, rc < 0 ? err.msg : o.first);
        if (t != KEVO_I32 && t != KEVO_I64) {
            rc_store(d.out[last][j], t, i, NAN);
            rc = kv_hostcheck_run(hc, &d, &o, &err);
            KV_CHECKF(rc == KV_HOSTCHECK_MISMATCH && o.failed == 1 && isnan(o.got),
                      "%s W=%d: NaN in %s not caught", p->name, world, p->outputs[j].name);
        }
        rc_store(d.out[last][j], t, i, keep);
    }
    kv_host_expect_free(&e);
    kv_host_call_free(&d);
}

static void write_tensor(const char *dir, const char *size, int rank, const char *side,
                         const char *name, const void *data, size_t bytes)
{
    char path[8192];
    kv_err err = {{0}};
    snprintf(path, sizeof path, "%s/%s/rank%d/%s", dir, size, rank, side);
    KV_REQUIRE(kv_mkdir_p(path, 0700, &err) == 0);
    snprintf(path, sizeof path, "%s/%s/rank%d/%s/%s.bin", dir, size, rank, side, name);
    KV_REQUIRE(kv_write_file_atomic(path, data, bytes, &err) == 0);
}

/* The evaluator's --dump layout read back by kv_host_call_load_dump, for the
 * problem's largest tensors at its validation size; then one output a byte
 * short, which must be named. */
static void check_dump_loads(const kv_hostcheck *hc, const kv_problem *p, int world)
{
    int size = validation_size(p);
    KV_REQUIRE(size >= 0);
    kv_host_call d, back;
    kv_err err = {{0}};
    char dir[4096];
    KV_REQUIRE(kv_host_call_init(&d, p, size, world, &err) == 0);
    KV_REQUIRE(fill_inputs(&d, 7) == 0 && write_expected(hc, &d, &err) == 0);
    size_t largest = 0;
    kv_test_fresh_dir(dir, sizeof dir, "dump");
    const char *sname = p->sizes[size].name;
    for (int r = 0; r < world; r++) {
        for (int i = 0; i < p->n_inputs; i++) {
            write_tensor(dir, sname, r, "inputs", p->inputs[i].name, d.in[r][i],
                         d.in_shape[i].bytes);
            largest = d.in_shape[i].bytes > largest ? d.in_shape[i].bytes : largest;
        }
        for (int j = 0; j < p->n_outputs; j++)
            write_tensor(dir, sname, r, "reference", p->outputs[j].name, d.out[r][j],
                         d.out_shape[j].bytes);
    }
    KV_REQUIRE(kv_host_call_init(&back, p, size, world, &err) == 0);
    int rc = kv_host_call_load_dump(&back, dir, "reference", &err);
    KV_CHECKF(rc == 0, "%s: a dump with a %zu-byte tensor does not load: %s", p->name, largest,
              err.msg);
    for (int r = 0; r < world && rc == 0; r++) {
        for (int i = 0; i < p->n_inputs; i++)
            KV_CHECKF(memcmp(d.in[r][i], back.in[r][i], d.in_shape[i].bytes) == 0,
                      "%s: input %s of rank %d changed on the way", p->name, p->inputs[i].name, r);
        for (int j = 0; j < p->n_outputs; j++)
            KV_CHECKF(memcmp(d.out[r][j], back.out[r][j], d.out_shape[j].bytes) == 0,
                      "%s: output %s of rank %d changed on the way", p->name, p->outputs[j].name,
                      r);
    }
    kv_hostcheck_outcome o;
    KV_CHECKF(rc == 0 && kv_hostcheck_run(hc, &back, &o, &err) == 0,
              "%s: the dump read back does not pass its check: %s", p->name, o.first);
    write_tensor(dir, sname, world - 1, "reference", p->outputs[0].name, d.out[0][0],
                 d.out_shape[0].bytes - 1);
    rc = kv_host_call_load_dump(&back, dir, "reference", &err);
    KV_CHECKF(rc != 0 && strstr(err.msg, p->outputs[0].name) && strstr(err.msg, "expected"),
              "%s: a short output is not named: rc %d, %s", p->name, rc, err.msg);
    kv_host_call_free(&back);
    kv_host_call_free(&d);
}

int main(int argc, char **argv)
{
    test_formats();
    const char *src = getenv("KEVO_SOURCE_DIR");
    char root[4096];
    snprintf(root, sizeof root, "%s/problems", src ? src : ".");
    kv_problem *all = NULL;
    kv_err err = {{0}};
    int n = kv_problems_load_all(root, &all, NULL, NULL, &err);
    if (n <= 0) {
        fprintf(stderr, "no problems under %s: %s\n", root, err.msg);
        return 1;
    }
    /* the checks compile into a cache of this run's own */
    kv_compile_opts co;
    kv_compile_defaults(&co, src ? src : ".");
    kv_test_fresh_dir(co.cache_dir, sizeof co.cache_dir, "refcheck-cache");
    for (int i = 0; i < n; i++) {
        int wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            wanted |= strcmp(argv[a], all[i].name) == 0;
        if (!wanted)
            continue;
        KV_CHECKF(all[i].check[0] != 0, "problem %s ships no check.c", all[i].name);
        kv_hostcheck *hc;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = kv_hostcheck_open(&co, &all[i], &hc, &err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        KV_CHECKF(rc == 0, "%s: %s", all[i].name, err.msg);
        if (rc != 0)
            continue;
        KV_CHECKF(!kv_hostcheck_cached(hc), "%s: a fresh cache served %s", all[i].name,
                  kv_hostcheck_so(hc));
        printf("%-30s compiled in %.2f s\n", all[i].name,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        check_problem(hc, &all[i], 2);
        check_problem(hc, &all[i], 8);
        if (strcmp(all[i].name, "broadcast") == 0)
            check_dump_loads(hc, &all[i], 2);
        kv_hostcheck_close(hc);
    }
    kv_problems_free(all, n);
    return kv_test_summary();
}
