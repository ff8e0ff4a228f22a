/* test_cli.c — the kevo command line, run as a real process: top-level dispatch, every
 * command's usage errors (exit 2) and runtime errors (exit 1). test_cli
 * --fixture DIR builds only the fixture archive (tests/support/cli_fixture.c),
 * for tests/integration/test_cli_pipe.sh.
 *
 * KEVO_BIN names the binary under test (set by ctest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "cli_fixture.h"
#include "test.h"
#include "test_util.h"

static void test_top_level(void)
{
    result r;
    kevo_env(&r, NULL, NULL);
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "usage: kevo");
    result_free(&r);

    kevo(&r, "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "archive");
    KV_CHECK_STR_CONTAINS(r.out, "config");
    result_free(&r);

    kevo(&r, "foo");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown command 'foo'");
    KV_CHECK(strstr(r.err, "did you mean") == NULL);
    result_free(&r);

    kevo(&r, "archiv");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "did you mean 'archive'");
    result_free(&r);
}

static void test_help_and_usage(void)
{
    static const char *const names[] = {"list",     "show",  "best",  "lineage",
                                        "attempts", "stats", "export"};
    result r;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        kevo(&r, "archive", names[i], "--help");
        CHECK_STATUS(r, 0);
        char want[64];
        snprintf(want, sizeof want, "usage: kevo archive %s", names[i]);
        KV_CHECK_STR_CONTAINS(r.out, want);
        result_free(&r);
    }
    kevo(&r, "archive", "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "lineage");
    result_free(&r);

    kevo(&r, "archive");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "missing view");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown view 'bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "usage: kevo archive");
    result_free(&r);

    kevo(&r, "archive", "lst");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "did you mean 'list'");
    result_free(&r);

    kevo(&r, "archive", "--bogus", "list");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown option '--bogus'");
    result_free(&r);

    kevo(&r, "archive", "list", "--run", run_dir, "--bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown option '--bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "usage: kevo archive list");
    result_free(&r);

    kevo(&r, "archive", "list", "-x");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown option '-x'");
    result_free(&r);

    kevo(&r, "archive", "list", "--island", "1"); /* an option of another view */
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "list", "extra");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unexpected argument 'extra'");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "missing PROBLEM");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "allgather");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unexpected extra argument 'allgather'");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--island");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "needs a value");
    result_free(&r);

    /* restore and upgrade take one run directory, as DIR or --run DIR */
    static const char *const one_dir[] = {"restore", "upgrade"};
    for (int k = 0; k < 2; k++) {
        kevo(&r, "archive", one_dir[k], "--run");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "option '--run' needs a value");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], "--run", run_dir, "--run", run_dir);
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "the run directory is given twice (at '--run')");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], run_dir, "other");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "unexpected argument 'other' (one run directory)");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], "");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "the run directory is empty");
        result_free(&r);
        kevo(&r, "archive", one_dir[k], "--bogus");
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "unknown option '--bogus'");
        result_free(&r);
        kevo(&r, "archive", one_dir[k]);
        CHECK_STATUS(r, 2);
        KV_CHECK_STR_CONTAINS(r.err, "missing the run directory DIR");
        result_free(&r);
    }

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--island", "x");
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage");
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "abc");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "not a program id");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--verdict", "bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown verdict 'bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "compile_error");
    KV_CHECK_STR_CONTAINS(r.err, "proposal_error");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--stage", "bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown stage 'bogus'");
    KV_CHECK_STR_CONTAINS(r.err, "remeasure");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--limit", "0");
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--cell", "tma/sideways");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "unknown cell 'tma/sideways'");
    KV_CHECK_STR_CONTAINS(r.err, "nvls/unfused");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "export", "--format", "xml");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "json, csv");
    result_free(&r);

    kevo(&r, "archive", "--run");
    CHECK_STATUS(r, 2);
    result_free(&r);
}

static void test_runtime_errors(void)
{
    result r;
    char missing[320];
    snprintf(missing, sizeof missing, "%s/no-such-run", scratch);
    kevo(&r, "archive", "--run", missing, "list");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "kevo: ");
    KV_CHECK_STR_CONTAINS(r.err, missing);
    KV_CHECK(r.out[0] == 0);
    result_free(&r);

    char empty[256];
    kv_test_fresh_dir(empty, sizeof empty, "cli-empty");
    kevo(&r, "archive", "stats", "--run", empty);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, empty);
    KV_CHECK_STR_CONTAINS(r.err, "no archive");
    result_free(&r);

    char bad[256], file[320];
    kv_test_fresh_dir(bad, sizeof bad, "cli-bad");
    snprintf(file, sizeof file, "%s/" KV_ARCHIVE_FILE, bad);
    char junk[8192];
    memset(junk, 'x', sizeof junk);
    kv_err err;
    KV_REQUIRE(kv_write_file_atomic(file, junk, sizeof junk, &err) == 0);
    kevo(&r, "archive", "--run", bad, "show", "allreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, file);
    KV_CHECK_STR_CONTAINS(r.err, "not an LMDB archive");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduse");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "unknown problem 'allreduse'");
    KV_CHECK_STR_CONTAINS(r.err, "did you mean 'allreduce'");
    KV_CHECK_STR_CONTAINS(r.err, "allgather, allreduce, moe_dispatch");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "best", "moe_dispatch");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "no ok program");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--cell", "ce/fused");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "no elite in cell ce/fused");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "999");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "program #999 not found");
    result_free(&r);

    char nodir[320];
    snprintf(nodir, sizeof nodir, "%s/no-such-dir/out.cu", scratch);
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--out", nodir);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, nodir);
    result_free(&r);
    kevo(&r, "archive", "--run", run_dir, "export", "--out", nodir);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, nodir);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "export", "--problem", "nope");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "unknown problem 'nope'");
    result_free(&r);
}

int main(int argc, char **argv)
{
    /* test_cli --fixture DIR: only the fixture archive, for the shell tests
     * (tests/integration/test_cli_pipe.sh) */
    if (argc == 3 && strcmp(argv[1], "--fixture") == 0)
        return build_fixture(argv[2]) != 0;
    int rc = cli_test_start("test_cli");
    if (rc != 0)
        return rc;
    KV_RUN(test_top_level);
    KV_RUN(test_help_and_usage);
    KV_RUN(test_runtime_errors);
    return kv_test_summary();
}
