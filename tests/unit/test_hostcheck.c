/* test_hostcheck.c — a problem's host check (evaluator/checks/hostcheck.h) on the
 * CPU: compiled once and then served from the cache, recompiled when its
 * source changes; and what a broken one gets: the compiler's message naming
 * the file and line, the missing function, the problem, size, W and rank
 * of a check that fails, and of one that crashes, exits or never returns
 * (tests/fixtures/checks/). The shipped
 * problems' checks are test_refcheck's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/fsutil.h"
#include "refcheck/refcheck.h"
#include "test.h"
#include "test_util.h"

static char src_root[4096];
static kv_compile_opts opts;

static void load_fixture(const char *name, kv_problem *p)
{
    char dir[8192];
    kv_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/tests/fixtures/checks/%s", src_root, name);
    if (kv_problem_load(dir, p, &err) != 0) {
        fprintf(stderr, "cannot load the fixture %s: %s\n", dir, err.msg);
        exit(1);
    }
}

/* d at size `size` with x = i - 3 on rank r (times r + 1) and y = 2x. */
static void make_call(kv_host_call *d, const kv_problem *p, const char *size, int world)
{
    kv_err err = {{0}};
    int s = kv_problem_find_size(p, size);
    if (s < 0 || kv_host_call_init(d, p, s, world, &err) != 0) {
        fprintf(stderr, "%s at %s: %s\n", p->name, size, err.msg);
        exit(1);
    }
    for (int r = 0; r < world; r++)
        for (int64_t i = 0; i < d->in_shape[0].numel; i++) {
            rc_store(d->in[r][0], KEVO_BF16, i, (double)((i - 3) * (r + 1)));
            rc_store(d->out[r][0], KEVO_BF16, i, (double)(2 * (i - 3) * (r + 1)));
        }
}

static void test_ok_and_cache(void)
{
    kv_problem p;
    kv_err err = {{0}};
    load_fixture("check_ok", &p);
    KV_CHECK_STR_CONTAINS(p.check, "check_ok/check.c");
    kv_hostcheck *hc = NULL;
    KV_REQUIRE(kv_hostcheck_open(&opts, &p, &hc, &err) == 0);
    KV_CHECK(!kv_hostcheck_cached(hc));
    char so[4096];
    snprintf(so, sizeof so, "%s", kv_hostcheck_so(hc));
    KV_CHECK_STR_CONTAINS(so, "/hostcheck/");

    kv_host_call d;
    kv_hostcheck_outcome o;
    make_call(&d, &p, "validation", 4);
    KV_CHECKF(kv_hostcheck_run(hc, &d, &o, &err) == 0, "%s %s", err.msg, o.first);
    KV_CHECK(o.checked == 4 * 6 && o.failed == 0 && o.bad_rank == -1);
    /* a wrong element: the first one is named, with both values */
    rc_store(d.out[2][0], KEVO_BF16, 5, 1000.0);
    rc_store(d.out[3][0], KEVO_BF16, 1, NAN);
    KV_CHECK(kv_hostcheck_run(hc, &d, &o, &err) == KV_HOSTCHECK_MISMATCH);
    KV_CHECK(o.failed == 2 && o.bad_rank == 2 && o.bad_output == 0 && o.bad_index == 5);
    KV_CHECK(o.got == 1000.0 && o.want == 2 * (5 - 3) * 3 && o.tol == 0);
    KV_CHECK_STR_CONTAINS(o.first, "rank 2, y[5]: got 1000, want 12");
    kv_host_call_free(&d);

    /* past 1000 elements the check skips the size */
    make_call(&d, &p, "big", 2);
    KV_CHECK(kv_hostcheck_run(hc, &d, &o, &err) == KV_HOSTCHECK_SKIPPED && o.checked == 0);
    kv_host_call_free(&d);
    kv_hostcheck_close(hc);

    /* the second time, from the cache */
    KV_REQUIRE(kv_hostcheck_open(&opts, &p, &hc, &err) == 0);
    KV_CHECK(kv_hostcheck_cached(hc) && strcmp(kv_hostcheck_so(hc), so) == 0);
    kv_hostcheck_close(hc);

    /* a damaged entry is compiled again */
    KV_REQUIRE(kv_write_file_atomic(so, "not an ELF", 10, &err) == 0);
    KV_CHECKF(kv_hostcheck_open(&opts, &p, &hc, &err) == 0, "%s", err.msg);
    if (hc) {
        KV_CHECK(!kv_hostcheck_cached(hc) && strcmp(kv_hostcheck_so(hc), so) == 0);
        kv_hostcheck_close(hc);
    }

    /* a changed source is another entry */
    char dir[4096], path[8192];
    kv_test_fresh_dir(dir, sizeof dir, "hostcheck-copy");
    char *text = NULL;
    size_t len = 0;
    KV_REQUIRE(kv_read_file(p.check, &text, &len, &err) == 0);
    const char *files[] = {"problem.json", "reference.cu"};
    for (int i = 0; i < 2; i++) {
        char from[8192], *t = NULL;
        size_t n = 0;
        snprintf(from, sizeof from, "%s/%s", p.dir, files[i]);
        snprintf(path, sizeof path, "%s/check_ok/%s", dir, files[i]);
        KV_REQUIRE(kv_read_file(from, &t, &n, &err) == 0);
        snprintf(from, sizeof from, "%s/check_ok", dir);
        KV_REQUIRE(kv_mkdir_p(from, 0755, &err) == 0);
        KV_REQUIRE(kv_write_file_atomic(path, t, n, &err) == 0);
        free(t);
    }
    snprintf(path, sizeof path, "%s/check_ok/check.c", dir);
    KV_REQUIRE(kv_write_file_atomic(path, text, len, &err) == 0);
    kv_problem q;
    snprintf(path, sizeof path, "%s/check_ok", dir);
    KV_REQUIRE(kv_problem_load(path, &q, &err) == 0);
    KV_REQUIRE(kv_hostcheck_open(&opts, &q, &hc, &err) == 0);
    KV_CHECK(!kv_hostcheck_cached(hc) && strcmp(kv_hostcheck_so(hc), so) != 0); /* its path */
    char so2[4096];
    snprintf(so2, sizeof so2, "%s", kv_hostcheck_so(hc));
    kv_hostcheck_close(hc);
    snprintf(path, sizeof path, "%s/check_ok/check.c", dir);
    char *more = malloc(len + 32);
    KV_REQUIRE(more != NULL);
    memcpy(more, text, len);
    memcpy(more + len, "/* changed */\n", 14);
    KV_REQUIRE(kv_write_file_atomic(path, more, len + 14, &err) == 0);
    KV_REQUIRE(kv_hostcheck_open(&opts, &q, &hc, &err) == 0);
    KV_CHECK(!kv_hostcheck_cached(hc) && strcmp(kv_hostcheck_so(hc), so2) != 0);
    kv_hostcheck_close(hc);
    free(more);
    free(text);
    kv_problem_free(&q);

    /* a check of one problem does not judge another */
    kv_problem other;
    load_fixture("check_fails", &other);
    KV_REQUIRE(kv_hostcheck_open(&opts, &p, &hc, &err) == 0);
    make_call(&d, &other, "validation", 2);
    KV_CHECK(kv_hostcheck_run(hc, &d, &o, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "is the check of check_ok, not of check_fails");
    kv_host_call_free(&d);
    kv_hostcheck_close(hc);
    kv_problem_free(&other);
    kv_problem_free(&p);
}

static void test_compile_error(void)
{
    kv_problem p;
    kv_err err = {{0}};
    kv_hostcheck *hc = NULL;
    load_fixture("check_syntax", &p);
    KV_CHECK(kv_hostcheck_open(&opts, &p, &hc, &err) == -1 && hc == NULL);
    /* the file, its line, and the compiler's words */
    KV_CHECK_STR_CONTAINS(err.msg, "check_syntax/check.c does not compile");
    KV_CHECK_STR_CONTAINS(err.msg, "check_syntax/check.c:9:");
    KV_CHECK_STR_CONTAINS(err.msg, "kevo_check_inn");
    KV_CHECK(strstr(err.msg, ".tmp-") == NULL); /* not the private copy's name */
    printf("%s\n", err.msg);
    kv_problem_free(&p);
}

static void test_no_function(void)
{
    kv_problem p;
    kv_err err = {{0}};
    kv_hostcheck *hc = NULL;
    load_fixture("check_nofunc", &p);
    KV_CHECK(kv_hostcheck_open(&opts, &p, &hc, &err) == -1 && hc == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "check_nofunc/check.c: defines no function kevo_check");
    printf("%s\n", err.msg);
    kv_problem_free(&p);

    /* a problem without check.c */
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/problems/good_basic", src_root);
    KV_REQUIRE(kv_problem_load(dir, &p, &err) == 0);
    KV_CHECK(p.check[0] == 0);
    KV_CHECK(kv_hostcheck_open(&opts, &p, &hc, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "problem good_basic has no host check");
    kv_problem_free(&p);
}

static void expect_error(const kv_hostcheck *hc, const kv_problem *p, const char *size,
                         const char *what)
{
    kv_host_call d;
    kv_hostcheck_outcome o;
    kv_err err = {{0}};
    make_call(&d, p, size, 2);
    int rc = kv_hostcheck_run(hc, &d, &o, &err);
    KV_CHECKF(rc == -1, "size %s: rc %d", size, rc);
    KV_CHECK_STR_CONTAINS(err.msg, "check_fails/check.c: problem check_fails, size \"");
    KV_CHECK_STR_CONTAINS(err.msg, size);
    KV_CHECK_STR_CONTAINS(err.msg, what);
    printf("%s\n", err.msg);
    kv_host_call_free(&d);
}

static void test_check_failures(void)
{
    kv_problem p;
    kv_err err = {{0}};
    kv_hostcheck *hc = NULL;
    load_fixture("check_fails", &p);
    KV_REQUIRE(kv_hostcheck_open(&opts, &p, &hc, &err) == 0);
    expect_error(hc, &p, "fail", "W=2, rank 1: x[3] is not what rank 1 expects");
    expect_error(hc, &p, "silent", "rank 0: kevo_check returned 7 without a reason");
    expect_error(hc, &p, "valid", "valid[0] (output y) = 11 is outside 0..10");
    expect_error(hc, &p, "param",
                 "kevo_check_param(\"K\"): check_fails has no such parameter "
                 "(its parameters: N)");
    expect_error(hc, &p, "skip1", "rank 1: skipped this rank (KEVO_CHECK_SKIP) but not rank 0");
    kv_host_call d;
    kv_hostcheck_outcome o;
    make_call(&d, &p, "validation", 8);
    for (int r = 0; r < 8; r++)
        memcpy(d.out[r][0], d.in[r][0], d.in_shape[0].bytes);
    KV_CHECKF(kv_hostcheck_run(hc, &d, &o, &err) == 0, "%s", err.msg);
    kv_host_call_free(&d);
    kv_hostcheck_close(hc);
    kv_problem_free(&p);
}

/* A check that crashes, aborts, exits or never returns costs that call,
 * not the process: each gets -1 saying how it ended and at which rank, and
 * the next call works. */
static void test_check_crashes(void)
{
    kv_problem p;
    kv_err err = {{0}};
    kv_hostcheck *hc = NULL;
    load_fixture("check_crashes", &p);
    KV_REQUIRE(kv_hostcheck_open(&opts, &p, &hc, &err) == 0);
    kv_hostcheck_set_timeout(hc, 2);
    static const struct {
        const char *size, *what;
    } cases[] = {
#ifdef __SANITIZE_ADDRESS__ /* ASan's handler reports the SIGSEGV and exits 1 */
        {"segv", "W=2, rank 1: kevo_check exited with status 1"},
#else
        {"segv", "W=2, rank 1: kevo_check crashed (signal 11, "},
#endif
        {"abort", "W=2, rank 0: kevo_check crashed (signal 6, "},
        {"exit", "W=2, rank 0: kevo_check exited with status 0; a check must return"},
        {"loop", "W=2, rank 0: kevo_check did not finish within 2 s (stopped)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_host_call d;
        kv_hostcheck_outcome o;
        make_call(&d, &p, cases[i].size, 2);
        int64_t t0 = kv_monotonic_ns();
        int rc = kv_hostcheck_run(hc, &d, &o, &err);
        double s = (double)(kv_monotonic_ns() - t0) / 1e9;
        KV_CHECKF(rc == -1, "size %s: rc %d", cases[i].size, rc);
        KV_CHECK_STR_CONTAINS(err.msg, "check_crashes/check.c: problem check_crashes, size \"");
        KV_CHECK_STR_CONTAINS(err.msg, cases[i].what);
        KV_CHECKF(s < 10, "size %s took %.1f s", cases[i].size, s);
        printf("%s\n", err.msg);
        kv_host_call_free(&d);
    }
    /* the next call: the child of a sound size reports as before */
    kv_host_call d;
    kv_hostcheck_outcome o;
    make_call(&d, &p, "validation", 2);
    for (int r = 0; r < 2; r++)
        memcpy(d.out[r][0], d.in[r][0], d.in_shape[0].bytes);
    KV_CHECKF(kv_hostcheck_run(hc, &d, &o, &err) == 0, "%s", err.msg);
    KV_CHECK(o.checked == 2 * 6 && o.failed == 0);
    memset(d.out[1][0], 0, d.in_shape[0].bytes); /* rank 1 wrong: the mismatch comes back */
    KV_CHECK(kv_hostcheck_run(hc, &d, &o, &err) == KV_HOSTCHECK_MISMATCH);
    KV_CHECK(o.bad_rank == 1 && o.failed > 0);
    kv_host_call_free(&d);
    kv_hostcheck_close(hc);
    kv_problem_free(&p);
}

static void test_compiler_trouble(void)
{
    kv_problem p;
    kv_err err = {{0}};
    kv_hostcheck *hc = NULL;
    load_fixture("check_fails", &p);
    KV_REQUIRE(setenv("KEVO_CC", "/nonexistent/cc", 1) == 0);
    KV_CHECK(kv_hostcheck_open(&opts, &p, &hc, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "cannot run the C compiler /nonexistent/cc");
    KV_CHECK_STR_CONTAINS(err.msg, "KEVO_CC");
    KV_REQUIRE(unsetenv("KEVO_CC") == 0);

    /* killed at its deadline (a fresh cache: nothing to serve) */
    kv_compile_opts quick = opts;
    kv_test_fresh_dir(quick.cache_dir, sizeof quick.cache_dir, "hostcheck-quick");
    quick.timeout_s = 0.001;
    KV_CHECK(kv_hostcheck_open(&quick, &p, &hc, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "check_fails/check.c: the C compiler");
    KV_CHECK_STR_CONTAINS(err.msg, "did not finish");
    kv_problem_free(&p);
}

int main(void)
{
    const char *src = getenv("KEVO_SOURCE_DIR");
    snprintf(src_root, sizeof src_root, "%s", src ? src : ".");
    kv_compile_defaults(&opts, src_root);
    kv_test_fresh_dir(opts.cache_dir, sizeof opts.cache_dir, "hostcheck-cache");
    KV_RUN(test_ok_and_cache);
    KV_RUN(test_compile_error);
    KV_RUN(test_no_function);
    KV_RUN(test_check_failures);
    KV_RUN(test_check_crashes);
    KV_RUN(test_compiler_trouble);
    return kv_test_summary();
}
