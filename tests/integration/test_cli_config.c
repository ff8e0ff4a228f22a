/* test_cli_config.c — `kevo run`'s usage and the errors it gives before any GPU is needed, and
 * `kevo config check`.
 *
 * KEVO_BIN names the binary under test (set by ctest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "cli_fixture.h"
#include "test.h"
#include "test_util.h"

/* kevo run's usage and the errors it gives before any GPU is needed. */
static void test_run_command(void)
{
    result r;
    kevo(&r, "run");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "missing --config FILE");
    result_free(&r);
    kevo(&r, "run", "--config", "a.json", "dir");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "either --config FILE or one run DIR");
    result_free(&r);
    char missing[320];
    snprintf(missing, sizeof missing, "%s/no-such.json", scratch);
    kevo(&r, "run", "--config", missing);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), missing);
    result_free(&r);
    char empty[256];
    kv_test_fresh_dir(empty, sizeof empty, "cli-run-empty");
    kevo(&r, "run", empty);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), empty);
    result_free(&r);
    /* an LLM configuration whose key variable is unset: an error naming the
     * variable, before anything is made */
    char cfg[320], llm_run[320];
    snprintf(cfg, sizeof cfg, "%s/configs/llm-example.json", getenv("KEVO_SOURCE_DIR"));
    snprintf(llm_run, sizeof llm_run, "%s/llm-run", scratch);
    unsetenv("OPENAI_API_KEY");
    kevo(&r, "run", "--config", cfg, "--run", llm_run);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "the API key variable OPENAI_API_KEY "
                                      "(mutator.llm.api_key_env) is not set");
    KV_CHECK(access(llm_run, F_OK) != 0);
    result_free(&r);
    /* a problem name with a typo: refused at once with the near name, before
     * any GPU work and before the run directory is made (no GPU needed) */
    char typo[320], typo_run[320];
    snprintf(typo, sizeof typo, "%s/typo.json", scratch);
    snprintf(typo_run, sizeof typo_run, "%s/typo-run", scratch);
    static const char typo_json[] = "{\"problems\": [\"allreduce\", \"alreduce\"]}";
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(typo, typo_json, strlen(typo_json), &err) == 0);
    kevo(&r, "run", "--config", typo, "--run", typo_run);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "typo.json: $.problems[1]: no problem \"alreduce\" in ");
    KV_CHECK_STR_CONTAINS(str(r.err), "; did you mean \"allreduce\"?");
    KV_CHECK(strstr(r.err, "GPU") == NULL && strstr(r.err, "CUDA") == NULL);
    KV_CHECK(access(typo_run, F_OK) != 0);
    result_free(&r);
    /* the template mutator on a problem without seeds (tests/fixtures/seedless):
     * nothing to vary, said with the problem and what to add, before any GPU
     * work and before the run directory is made */
    char seedless[320], seedless_run[320], fixtures[320];
    snprintf(seedless, sizeof seedless, "%s/seedless.json", scratch);
    snprintf(seedless_run, sizeof seedless_run, "%s/seedless-run", scratch);
    snprintf(fixtures, sizeof fixtures, "%s/tests/fixtures/seedless", getenv("KEVO_SOURCE_DIR"));
    static const char seedless_json[] = "{\"problems\": [\"seedless_max\"]}";
    KV_REQUIRE(kv_write_file_atomic(seedless, seedless_json, strlen(seedless_json), &err) == 0);
    setenv("KEVO_PROBLEMS", fixtures, 1);
    kevo(&r, "run", "--config", seedless, "--run", seedless_run);
    unsetenv("KEVO_PROBLEMS");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "seedless.json: nothing to vary: problem seedless_max has "
                                      "no seed in ");
    KV_CHECK_STR_CONTAINS(str(r.err), "/patterns/seedless_max/, and the template mutator");
    KV_CHECK_STR_CONTAINS(str(r.err), "docs/patterns.md");
    KV_CHECK_STR_CONTAINS(str(r.err), "or use the LLM mutator (mutator.kind \"llm\"");
    KV_CHECK(strstr(r.err, "GPU") == NULL && strstr(r.err, "CUDA") == NULL);
    KV_CHECK(access(seedless_run, F_OK) != 0);
    result_free(&r);
}

/* kevo config check on a config of the given text fails, saying each of says. */
static void config_check_fails(const char *text, const char *say1, const char *say2)
{
    char path[320];
    kv_err err = {{0}};
    result r;
    snprintf(path, sizeof path, "%s/check.json", scratch);
    KV_REQUIRE(kv_write_file_atomic(path, text, strlen(text), &err) == 0);
    kevo(&r, "config", "check", path);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), say1);
    if (say2)
        KV_CHECK_STR_CONTAINS(str(r.err), say2);
    result_free(&r);
}

/* kevo config check loads every problem the config names, as kevo run does. */
static void test_config_check_problems(void)
{
    char shipped[320];
    result r;
    snprintf(shipped, sizeof shipped, "%s/configs/quickstart.json", getenv("KEVO_SOURCE_DIR"));
    kevo(&r, "config", "check", shipped);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), ": ok (");
    result_free(&r);
    config_check_fails("{\"problems\": [\"allgather\", \"alltoal\"]}",
                       "check.json: $.problems[1]: no problem \"alltoal\" in ",
                       "; did you mean \"alltoall\"?");
    config_check_fails("{\"problems\": [\"zzzzzzzzzzzz\"]}", "(there are: allgather, ", NULL);
    config_check_fails("{\"problems\": [\"allreduce\"], \"world\": 3}",
                       "$.problems[0]: problem allreduce is not defined for W=3", NULL);
}

int main(void)
{
    int rc = cli_test_start("test_cli_config");
    if (rc != 0)
        return rc;
    KV_RUN(test_run_command);
    KV_RUN(test_config_check_problems);
    return kv_test_summary();
}
