/* test_cli_eval.c — the evaluator's commands (eval, baseline, problems, doctor, seed) without
 * GPUs, and the escapes of kevo eval's report.
 *
 * KEVO_BIN names the binary under test (set by ctest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "cli_fixture.h"
#include "test.h"

/* kevo eval's report (kv_cli_print_report, shared with seed and baseline)
 * escapes what comes from outside: a compiler message holding an OSC title
 * sequence and a colour, a line of an included file holding ESC[2J, and a
 * FILE.cu whose name holds escapes. nvcc runs; no GPU is needed to reach a
 * compile_error. */
static void test_eval_report_escapes(void)
{
    char cache[512], home[512], inc[600], path[1024], cu[3][800];
    snprintf(cache, sizeof cache, "%s/eval-cache", scratch);
    snprintf(home, sizeof home, "%s/eval-home", scratch);
    snprintf(inc, sizeof inc, "%s/include", home);
    kv_err werr;
    KV_REQUIRE(kv_mkdir_p(inc, 0755, &werr) == 0);
    snprintf(path, sizeof path, "%s/patterns", home);
    KV_REQUIRE(kv_mkdir_p(path, 0755, &werr) == 0);
    snprintf(path, sizeof path, "%s/kevo", inc);
    KV_REQUIRE(kv_mkdir_p(path, 0755, &werr) == 0);
    for (int i = 0; i < 2; i++) { /* the reference is compiled too: kevo's own headers */
        static const char *const h[2] = {"kernel.h", "check.h"};
        char from[600], *text = NULL;
        size_t len;
        snprintf(from, sizeof from, "%s/include/kevo/%s", getenv("KEVO_SOURCE_DIR"), h[i]);
        snprintf(path, sizeof path, "%s/kevo/%s", inc, h[i]);
        KV_REQUIRE(kv_read_file(from, &text, &len, &werr) == 0);
        KV_REQUIRE(kv_write_file_atomic(path, text, len, &werr) == 0);
        free(text);
    }
    static const char evil_h[] = "int broken = ; const char *s = \"\x1b[2J\x1b[H cleared\";\n";
    snprintf(path, sizeof path, "%s/evil.h", inc);
    KV_REQUIRE(kv_write_file_atomic(path, evil_h, sizeof evil_h - 1, &werr) == 0);
    static const char *const srcs[3] = {
        "#error \"\x1b]0;pwned\x07\x1b[31mred\"\n",
        "#include \"evil.h\"\n",
        "#error plain\n",
    };
    snprintf(cu[0], sizeof cu[0], "%s/osc.cu", scratch);
    snprintf(cu[1], sizeof cu[1], "%s/include.cu", scratch);
    snprintf(cu[2], sizeof cu[2], "%s/\x1b]0;pwned\x07\x1b[2Jname.cu", scratch);
    static const char *const shown[3] = {"\\e]0;pwned\\a\\e[31mred", "\\e[2J\\e[H cleared",
                                         "\\e]0;pwned\\a\\e[2Jname.cu"};
    char problems[512];
    snprintf(problems, sizeof problems, "%s/problems", getenv("KEVO_SOURCE_DIR"));
    setenv("KEVO_CACHE_DIR", cache, 1);
    setenv("KEVO_HOME", home, 1);
    setenv("KEVO_PROBLEMS", problems, 1);
    for (int k = 0; k < 3; k++) {
        KV_REQUIRE(kv_write_file_atomic(cu[k], srcs[k], strlen(srcs[k]), &werr) == 0);
        result r;
        kevo(&r, "eval", "--problem", "allreduce", cu[k]);
        CHECK_STATUS(r, 4);
        KV_CHECK_STR_CONTAINS(str(r.out), "verdict: compile_error");
        check_inert(&r, "eval");
        KV_CHECK_STR_CONTAINS(str(r.out), shown[k]);
        result_free(&r);
    }
    unsetenv("KEVO_PROBLEMS");
    unsetenv("KEVO_HOME");
    unsetenv("KEVO_CACHE_DIR");
}

/* kevo eval, baseline, problems, doctor: usage errors (exit 2), and on a
 * machine without GPUs a clear runtime error (exit 1) rather than a hang. */
static void test_evaluator_commands(void)
{
    result r;
    kevo(&r, "eval");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--problem is required");
    result_free(&r);
    kevo(&r, "eval", "--problem", "allreduce", "--bogus", "x.cu");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--bogus'");
    result_free(&r);
    kevo(&r, "eval", "--problem", "allreduce", "--world", "99", "x.cu");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--world");
    result_free(&r);
    kevo(&r, "eval", "--problem", "allreduce");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "expected one FILE.cu");
    result_free(&r);
    kevo(&r, "eval", "--problem", "no_such_problem", "x.cu");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "no problem \"no_such_problem\" in ");
    result_free(&r);
    char empty_cu[512];
    snprintf(empty_cu, sizeof empty_cu, "%s/empty.cu", scratch);
    kv_err werr;
    KV_REQUIRE(kv_write_file_atomic(empty_cu, "", 0, &werr) == 0);
    kevo(&r, "eval", "--problem", "allreduce", "--sizes", "huge", empty_cu);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "has no size 'huge'");
    result_free(&r);
    /* a kernel source must be a regular file: /dev/null is refused */
    kevo(&r, "eval", "--problem", "allreduce", "/dev/null");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "/dev/null is a character device, not a regular file");
    result_free(&r);
    kevo(&r, "baseline", "--problem", "allreduce", "extra");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unexpected argument 'extra'");
    result_free(&r);
    kevo(&r, "problems");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "allreduce");
    KV_CHECK_STR_CONTAINS(str(r.out), "561.58"); /* the 256 MiB roofline at W=2 */
    result_free(&r);
    for (int k = 0; k < 3; k++) { /* --timing: the same words in all three commands */
        const char *cmd = k == 0 ? "eval" : k == 1 ? "baseline" : "seed";
        kevo(&r, cmd, "--problem", "allreduce", "--timing", "graphs", "x.cu");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(str(r.err), "--timing: expected graph or call, got 'graphs'");
        result_free(&r);
    }
    kevo(&r, "seed", "--islands", "0");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--islands: expected 1 to 1024, got '0'");
    result_free(&r);
    kevo(&r, "seed", "--bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--bogus'");
    result_free(&r);
    char seed_run[4200];
    snprintf(seed_run, sizeof seed_run, "%s/seed-run", scratch);
    kevo(&r, "seed", "--problem", "no_such_problem", "--run", seed_run);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "no seeds for problem no_such_problem (no folder ");
    result_free(&r);
    kevo(&r, "doctor", "--bogus");
    CHECK_STATUS(r, 2);
    result_free(&r);
    /* without a GPU: doctor reports none usable, its last line says no group
     * can run, and it exits 1; with a group it lists it and exits 0 */
    kevo(&r, "doctor");
    KV_CHECKF(r.status == 0 || r.status == 1, "doctor exit %d", r.status);
    KV_CHECK_STR_CONTAINS(str(r.out), "NVLS");
    if (strstr(str(r.out), "GPUs: none usable") || !strstr(str(r.out), "groups at W=2: {")) {
        CHECK_STATUS(r, 1);
        const char *last = "no evaluation group can run here: kevo run and kevo eval need at "
                           "least 2 GPUs that are NVLink peers\n";
        size_t n = strlen(str(r.out)), k = strlen(last);
        KV_CHECKF(n >= k && strcmp(str(r.out) + n - k, last) == 0, "doctor's last line: %s",
                  str(r.out));
    } else {
        CHECK_STATUS(r, 0);
    }
    result_free(&r);
    kevo(&r, "doctor", "--json");
    KV_CHECKF(r.status == 0 || r.status == 1, "doctor --json exit %d", r.status);
    KV_CHECK_STR_CONTAINS(str(r.out), "\"usable_groups\":");
    if (r.status == 1)
        KV_CHECK_STR_CONTAINS(str(r.err), "no evaluation group can run here");
    result_free(&r);
}

int main(void)
{
    int rc = cli_test_start("test_cli_eval");
    if (rc != 0)
        return rc;
    KV_RUN(test_evaluator_commands);
    KV_RUN(test_eval_report_escapes);
    return kv_test_summary();
}
