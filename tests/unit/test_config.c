/* test_config.c — the run configuration: defaults, the shipped configs,
 * round trips through kv_config_to_json, every malformed config under
 * tests/configs/bad with its expected message, the schema table itself, and
 * that docs/config.md documents every key of the table.
 *
 * The malformed configs: tests/configs/bad/EXPECTED has one line per check,
 * "<file name><TAB><substring>"; loading the file must fail with a message
 * that starts with "<path>: " and contains the substring (a substring that
 * starts with '!' must not appear). Every *.json there must be listed.
 *
 * Files are found below $KEVO_SOURCE_DIR (set by ctest), or "." without it. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/config.h"
#include "common/fsutil.h"
#include "search/config_schema.h"
#include "evaluator/evaluator.h"
#include "test.h"

static const char *src_dir(void)
{
    const char *d = getenv("KEVO_SOURCE_DIR");
    return d && *d ? d : ".";
}

static void src_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", src_dir(), rel);
}

/* A small valid document, with the key/value text `extra` spliced in. */
static int parse_with(const char *extra, kv_config *cfg, kv_err *err)
{
    char text[4096];
    snprintf(text, sizeof text, "{ \"problems\": [\"allreduce\"]%s%s }", extra[0] ? ", " : "",
             extra);
    memset(cfg, 0, sizeof *cfg);
    return kv_config_parse(text, "inline.json", cfg, err);
}

static void test_defaults(void)
{
    kv_config c;
    kv_config_defaults(&c);
    KV_CHECK(c.n_problems == 0);
    KV_CHECK(c.world == 2);
    KV_CHECK(c.n_groups == 0);
    KV_CHECK(c.islands == 4);
    KV_CHECK(c.migration_interval == 50);
    KV_CHECK(c.reseed_interval == 500);
    KV_CHECK(c.seed == 1);
    KV_CHECK(strcmp(c.run_dir, "runs/default") == 0);
    KV_CHECK(c.budget.evaluations == 0);
    KV_CHECK(c.budget.wall_hours == 0);
    KV_CHECK(c.budget.llm_tokens == 0);
    KV_CHECK(c.budget.cost_usd == 0);
    KV_CHECK(c.budget.target_speedup == 0);
    KV_CHECK(c.mutator == KV_MUTATOR_TEMPLATE);
    KV_CHECK(c.llm.api == KV_LLM_API_OPENAI);
    KV_CHECK(c.llm.endpoint[0] == '\0');
    KV_CHECK(strcmp(c.llm.api_key_env, "OPENAI_API_KEY") == 0);
    KV_CHECK(c.llm.n_models == 0);
    KV_CHECK(c.llm.concurrency == 4);
    KV_CHECK(c.llm.temperature == 0.8);
    KV_CHECK(c.llm.max_tokens == 8192);
    KV_CHECK(c.llm.timeout_s == 300);
    KV_CHECK(c.llm.max_retries == 5);
    KV_CHECK(c.llm.prompt_budget_chars == 120000);
    KV_CHECK(c.eval.trials == 3);
    KV_CHECK(c.eval.screen_warmup == 20);
    KV_CHECK(c.eval.screen_iters == 50);
    KV_CHECK(c.eval.full_warmup == 500);
    KV_CHECK(c.eval.full_iters == 100);
    KV_CHECK(c.eval.compile_timeout_s == 120);
    KV_CHECK(c.eval.job_timeout_s == 60);
    KV_CHECK(c.eval.compile_jobs == 0);
    KV_CHECK(c.eval.recycle_every == 200);
    KV_CHECK(c.eval.allow_nvls == 0);

    /* A minimal document is the defaults plus its problems. */
    kv_config p;
    kv_err err = {{0}};
    KV_REQUIRE(parse_with("", &p, &err) == 0);
    KV_CHECK(p.n_problems == 1 && strcmp(p.problems[0], "allreduce") == 0);
    c.n_problems = 1;
    memcpy(c.problems[0], "allreduce", sizeof "allreduce");
    KV_CHECK(memcmp(&c, &p, sizeof c) == 0);
}

static void test_shipped_configs(void)
{
    char path[1024];
    kv_config c;
    kv_err err = {{0}};

    src_path(path, sizeof path, "configs/quickstart.json");
    KV_CHECKF(kv_config_load(path, &c, &err) == 0, "%s", err.msg);
    KV_CHECK(c.mutator == KV_MUTATOR_TEMPLATE);
    KV_CHECK(c.n_problems == 3);
    KV_CHECK(strcmp(c.problems[0], "allreduce") == 0);
    KV_CHECK(strcmp(c.problems[1], "allgather") == 0);
    KV_CHECK(strcmp(c.problems[2], "reducescatter") == 0);
    KV_CHECK(c.world == 2);
    KV_CHECK(c.islands == 2);
    KV_CHECK(c.budget.wall_hours > 0.16 && c.budget.wall_hours < 0.17);
    KV_CHECK(strcmp(c.run_dir, "runs/quickstart") == 0);

    src_path(path, sizeof path, "configs/multigroup-w4.json");
    KV_CHECKF(kv_config_load(path, &c, &err) == 0, "%s", err.msg);
    KV_CHECK(c.world == 4 && c.n_groups == 0 && c.mutator == KV_MUTATOR_TEMPLATE);

    src_path(path, sizeof path, "configs/llm-example.json");
    KV_CHECKF(kv_config_load(path, &c, &err) == 0, "%s", err.msg);
    KV_CHECK(c.mutator == KV_MUTATOR_LLM);
    KV_CHECK(c.llm.api == KV_LLM_API_OPENAI);
    KV_CHECK(strncmp(c.llm.endpoint, "https://", 8) == 0);
    KV_CHECK(strcmp(c.llm.api_key_env, "OPENAI_API_KEY") == 0);
    KV_CHECK(c.llm.n_models == 2);
    for (int i = 0; i < c.llm.n_models; i++) {
        KV_CHECK(c.llm.models[i].weight > 0);
        KV_CHECK(c.llm.models[i].price_in_per_mtok > 0);
        KV_CHECK(c.llm.models[i].price_out_per_mtok > 0);
    }
    KV_CHECK(c.budget.cost_usd > 0);
}

/* to_json -> parse gives the same struct, and the same text again. */
static void check_round_trip(const kv_config *c, const char *what)
{
    char *j1 = kv_config_to_json(c);
    KV_REQUIRE(j1 != NULL);
    kv_config back;
    kv_err err = {{0}};
    memset(&back, 0, sizeof back);
    int rc = kv_config_parse(j1, what, &back, &err);
    KV_CHECKF(rc == 0, "%s: %s\n%s", what, err.msg, j1);
    if (rc == 0) {
        KV_CHECKF(memcmp(c, &back, sizeof back) == 0, "%s: struct differs after round trip", what);
        char *j2 = kv_config_to_json(&back);
        KV_CHECKF(j2 && strcmp(j1, j2) == 0, "%s: text differs:\n%s\n%s", what, j1, j2 ? j2 : "");
        free(j2);
    }
    free(j1);
}

static void test_round_trip(void)
{
    static const char rich[] =
        "{\n"
        "  \"problems\": [\"allreduce\", \"allgather\", \"x_2\"],\n"
        "  \"world\": 4,\n"
        "  \"gpu_groups\": [[0, 1, 2, 3], [7, 6, 5, 4]],\n"
        "  \"islands\": 7, \"migration_interval\": 13, \"reseed_interval\": 0,\n"
        "  \"seed\": 9007199254740991,\n"
        "  \"run_dir\": \"runs/\\\"q\\\"\\\\p\\ttab \xc3\xbcn\xc3\xaf\",\n"
        "  \"budget\": {\"evaluations\": 123456789012, \"wall_hours\": 0.1667, \"llm_tokens\": "
        "5000000,\n"
        "             \"cost_usd\": 12.34, \"target_speedup\": 1.5},\n"
        "  \"mutator\": {\"kind\": \"llm\", \"llm\": {\"api\": \"anthropic\",\n"
        "    \"endpoint\": \"http://localhost:8000/v1\", \"api_key_env\": \"MY_KEY_2\",\n"
        "    \"models\": [\"org/model-a\", {\"name\": \"m2\", \"weight\": 0.1, "
        "\"price_in_per_mtok\": 0.3,\n"
        "                 \"price_out_per_mtok\": 1e-7}],\n"
        "    \"concurrency\": 256, \"temperature\": 0.1, \"max_tokens\": 1, \"timeout_s\": 3600,\n"
        "    \"max_retries\": 0, \"prompt_budget_chars\": 1000}},\n"
        "  \"evaluation\": {\"trials\": 100, \"screen_warmup\": 0, \"screen_iters\": 1, "
        "\"full_warmup\": 0,\n"
        "    \"full_iters\": 1000000, \"compile_timeout_s\": 1.5, \"job_timeout_s\": 59.999,\n"
        "    \"compile_jobs\": 1024, \"recycle_every\": 1, \"allow_nvls\": true}\n"
        "}\n";
    kv_config c;
    kv_err err = {{0}};
    memset(&c, 0, sizeof c);
    KV_REQUIRE(kv_config_parse(rich, "rich.json", &c, &err) == 0 ||
               (fprintf(stderr, "%s\n", err.msg), 0));
    KV_CHECK(c.n_problems == 3 && strcmp(c.problems[2], "x_2") == 0);
    KV_CHECK(c.world == 4 && c.n_groups == 2);
    KV_CHECK(c.group_size[0] == 4 && c.group_size[1] == 4);
    KV_CHECK(c.groups[1][0] == 7 && c.groups[1][3] == 4);
    KV_CHECK(c.islands == 7 && c.migration_interval == 13 && c.reseed_interval == 0);
    KV_CHECK(c.seed == UINT64_C(9007199254740991));
    KV_CHECK(strcmp(c.run_dir, "runs/\"q\"\\p\ttab \xc3\xbcn\xc3\xaf") == 0);
    KV_CHECK(c.budget.evaluations == INT64_C(123456789012));
    KV_CHECK(c.budget.wall_hours == 0.1667 && c.budget.llm_tokens == 5000000);
    KV_CHECK(c.budget.cost_usd == 12.34 && c.budget.target_speedup == 1.5);
    KV_CHECK(c.mutator == KV_MUTATOR_LLM && c.llm.api == KV_LLM_API_ANTHROPIC);
    KV_CHECK(strcmp(c.llm.endpoint, "http://localhost:8000/v1") == 0);
    KV_CHECK(strcmp(c.llm.api_key_env, "MY_KEY_2") == 0);
    KV_CHECK(c.llm.n_models == 2);
    KV_CHECK(strcmp(c.llm.models[0].name, "org/model-a") == 0);
    KV_CHECK(c.llm.models[0].weight == 1 && c.llm.models[0].price_in_per_mtok == 0);
    KV_CHECK(c.llm.models[0].price_out_per_mtok == 0);
    KV_CHECK(strcmp(c.llm.models[1].name, "m2") == 0 && c.llm.models[1].weight == 0.1);
    KV_CHECK(c.llm.models[1].price_in_per_mtok == 0.3 &&
             c.llm.models[1].price_out_per_mtok == 1e-7);
    KV_CHECK(c.llm.concurrency == 256 && c.llm.temperature == 0.1 && c.llm.max_tokens == 1);
    KV_CHECK(c.llm.timeout_s == 3600 && c.llm.max_retries == 0 &&
             c.llm.prompt_budget_chars == 1000);
    KV_CHECK(c.eval.trials == 100 && c.eval.screen_warmup == 0 && c.eval.screen_iters == 1);
    KV_CHECK(c.eval.full_warmup == 0 && c.eval.full_iters == 1000000);
    KV_CHECK(c.eval.compile_timeout_s == 1.5 && c.eval.job_timeout_s == 59.999);
    KV_CHECK(c.eval.compile_jobs == 1024 && c.eval.recycle_every == 1 && c.eval.allow_nvls == 1);
    check_round_trip(&c, "rich");

    /* Doubles that need all 17 digits come back bit for bit. */
    c.llm.temperature = 0.1 + 0.2;
    c.budget.wall_hours = 1.0 / 3.0;
    c.budget.cost_usd = 1e-300;
    c.llm.models[1].weight = 123456.789e-3;
    check_round_trip(&c, "doubles");

    /* The defaults plus one problem; the template mutator with LLM fields set. */
    kv_config d;
    kv_config_defaults(&d);
    d.n_problems = 1;
    memcpy(d.problems[0], "allgather", sizeof "allgather");
    check_round_trip(&d, "defaults");
    memcpy(d.llm.endpoint, "https://e.example/v1", sizeof "https://e.example/v1");
    d.llm.n_models = 1;
    memcpy(d.llm.models[0].name, "m", 2);
    d.llm.models[0].weight = 2;
    check_round_trip(&d, "template with llm");

    /* The shipped configs. */
    char path[1024];
    src_path(path, sizeof path, "configs/quickstart.json");
    memset(&d, 0, sizeof d);
    if (kv_config_load(path, &d, &err) == 0)
        check_round_trip(&d, "quickstart");
    src_path(path, sizeof path, "configs/llm-example.json");
    memset(&d, 0, sizeof d);
    if (kv_config_load(path, &d, &err) == 0)
        check_round_trip(&d, "llm-example");

    /* The canonical text is the documented shape. */
    char *j = kv_config_to_json(&c);
    KV_REQUIRE(j != NULL);
    KV_CHECK_STR_CONTAINS(j, "\"gpu_groups\": [[0, 1, 2, 3], [7, 6, 5, 4]]");
    KV_CHECK_STR_CONTAINS(j, "\"seed\": 9007199254740991");
    KV_CHECK_STR_CONTAINS(j, "\"kind\": \"llm\"");
    KV_CHECK_STR_CONTAINS(j, "\"allow_nvls\": true");
    free(j);
    kv_config_defaults(&d);
    j = kv_config_to_json(&d);
    KV_REQUIRE(j != NULL);
    KV_CHECK_STR_CONTAINS(j, "\"gpu_groups\": \"auto\"");
    KV_CHECK_STR_CONTAINS(j, "\"problems\": []");
    /* Every row of the table is written. */
    for (size_t i = 0; i < kv_cfg_schema_len; i++) {
        if (strstr(kv_cfg_schema[i].path, "[]"))
            continue;
        char key[128];
        snprintf(key, sizeof key, "\"%s\":", kv_schema_key_name(&kv_cfg_schema[i]));
        KV_CHECK_STR_CONTAINS(j, key);
    }
    /* The defaults alone are not a run: the problems must be named. */
    KV_CHECK(kv_config_parse(j, "defaults.json", &d, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "defaults.json: $.problems: must list at least one problem");
    free(j);
}

/* ---- the malformed configs ------------------------------------------------ */

#define MAX_CHECKS 512

static void test_bad_configs(void)
{
    char dir[1024], listing[1100];
    src_path(dir, sizeof dir, "tests/configs/bad");
    snprintf(listing, sizeof listing, "%s/EXPECTED", dir);
    char *text = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    KV_REQUIRE(kv_read_file(listing, &text, &len, &err) == 0 ||
               (fprintf(stderr, "%s\n", err.msg), 0));

    char *names[MAX_CHECKS];
    int n_checks = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *tab = strchr(line, '\t');
        KV_CHECKF(tab != NULL, "EXPECTED line without a tab: %s", line);
        if (!tab || n_checks == MAX_CHECKS)
            continue;
        *tab = '\0';
        const char *name = line, *want = tab + 1;
        names[n_checks++] = line;

        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        kv_config c;
        kv_config_defaults(&c);
        kv_config before;
        memcpy(&before, &c, sizeof c);
        memset(&err, 0, sizeof err);
        int rc = kv_config_load(path, &c, &err);
        KV_CHECKF(rc == -1, "%s parsed but should fail", name);
        KV_CHECKF(memcmp(&c, &before, sizeof c) == 0, "%s: failed parse changed the struct", name);
        char prefix[1500];
        snprintf(prefix, sizeof prefix, "%s: ", path);
        KV_CHECKF(strncmp(err.msg, prefix, strlen(prefix)) == 0,
                  "%s: message \"%s\" does not start with \"%s\"", name, err.msg, prefix);
        if (want[0] == '!')
            KV_CHECKF(strstr(err.msg, want + 1) == NULL,
                      "%s: message \"%s\" must not contain \"%s\"", name, err.msg, want + 1);
        else
            KV_CHECK_STR_CONTAINS(err.msg, want);
    }

    /* Every file is listed, and there are enough of them. */
    DIR *d = opendir(dir);
    KV_REQUIRE(d != NULL);
    int n_files = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name);
        if (nl < 5 || strcmp(de->d_name + nl - 5, ".json") != 0)
            continue;
        n_files++;
        int listed = 0;
        for (int i = 0; i < n_checks && !listed; i++)
            listed = strcmp(names[i], de->d_name) == 0;
        KV_CHECKF(listed, "%s/%s has no line in EXPECTED", dir, de->d_name);
    }
    closedir(d);
    KV_CHECKF(n_files >= 25, "only %d malformed configs", n_files);
    free(text);
}

/* Cases that need no file, and properties of the messages. */
static void test_inline_cases(void)
{
    kv_config c;
    kv_err err = {{0}};

    /* origin prefixes the message; without one the message starts at the path */
    KV_CHECK(parse_with("\"world\": 1", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "inline.json: $.world: 1 is out of range (2..16)");
    KV_CHECK(kv_config_parse("{\"world\": true}", NULL, &c, &err) == -1);
    KV_CHECK(strncmp(err.msg, "$.world: expected an integer, got a boolean", 43) == 0);
    KV_CHECK(kv_config_parse(NULL, "x.json", &c, &err) == -1);

    /* a missing file names its path */
    KV_CHECK(kv_config_load("/nonexistent/kevo.json", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "/nonexistent/kevo.json");

    /* valid shapes */
    KV_CHECK(parse_with("\"gpu_groups\": \"auto\"", &c, &err) == 0 && c.n_groups == 0);
    KV_CHECKF(parse_with("\"world\": 3, \"gpu_groups\": [[0, 1, 2], [15, 14, 13]]", &c, &err) == 0,
              "%s", err.msg);
    KV_CHECK(c.n_groups == 2 && c.groups[1][0] == 15 && c.group_size[1] == 3);
    KV_CHECK(parse_with("\"seed\": 0, \"reseed_interval\": 0, \"budget\": {\"target_speedup\": 1}",
                        &c, &err) == 0);
    KV_CHECK(parse_with("\"islands\": 4.0", &c, &err) == 0 && c.islands == 4); /* integral */
    KV_CHECK(parse_with("\"islands\": 4e0", &c, &err) == 0 && c.islands == 4);
    KV_CHECK(parse_with("\"mutator\": {}, \"budget\": {}, \"evaluation\": {}", &c, &err) == 0);
    KV_CHECKF(parse_with("\"mutator\": {\"kind\": \"template\", \"llm\": {\"api\": \"anthropic\", "
                         "\"api_key_env\": \"ANTHROPIC_API_KEY\"}}",
                         &c, &err) == 0,
              "%s", err.msg);
    KV_CHECK(c.mutator == KV_MUTATOR_TEMPLATE && c.llm.api == KV_LLM_API_ANTHROPIC);
    KV_CHECKF(
        parse_with("\"mutator\": {\"kind\": \"llm\", \"llm\": {\"endpoint\": \"https://h/v1\", "
                   "\"models\": [\"a\", {\"name\": \"b\", \"weight\": 2.5}]}}",
                   &c, &err) == 0,
        "%s", err.msg);
    KV_CHECK(c.llm.n_models == 2 && c.llm.models[0].weight == 1 && c.llm.models[1].weight == 2.5);

    /* a UTF-8 byte-order mark is allowed */
    KV_CHECK(kv_config_parse("\xef\xbb\xbf{\"problems\": [\"a\"]}", "bom.json", &c, &err) == 0);

    /* a failed parse leaves the struct alone */
    kv_config keep;
    kv_config_defaults(&keep);
    memcpy(&c, &keep, sizeof c);
    KV_CHECK(kv_config_parse("{\"problems\": [\"a\"], \"islands\": 65}", "k.json", &c, &err) == -1);
    KV_CHECK(memcmp(&c, &keep, sizeof c) == 0);

    /* messages: type names, values, odd keys */
    KV_CHECK(parse_with("\"budget\": {\"evaluations\": \"10\"}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.budget.evaluations: expected an integer, got a string");
    KV_CHECK(parse_with("\"budget\": {\"llm_tokens\": 1.25}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.budget.llm_tokens: expected an integer, got 1.25");
    KV_CHECK(parse_with("\"budget\": {\"evaluations\": 9007199254740993}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "out of range (0..2^53-1)");
    KV_CHECK(parse_with("\"evaluation\": {\"allow_nvls\": \"yes\"}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.evaluation.allow_nvls: expected true or false, got a string");
    KV_CHECK(parse_with("\"evaluation\": {\"timing\": \"graphs\"}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.evaluation.timing:");
    KV_CHECK_STR_CONTAINS(err.msg, "did you mean \"graph\"?");
    KV_CHECK(parse_with("\"evaluation\": {\"timing\": \"call\"}", &c, &err) == 0 &&
             c.eval.timing == KV_TIMING_CALL);
    KV_CHECK(parse_with("\"mutator\": {\"kind\": 1}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg,
                          "$.mutator.kind: expected \"template\" or \"llm\", got a number");
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"api\": \"openia\"}}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "did you mean \"openai\"?");
    KV_CHECK(parse_with("\"bad key\\n\": 1", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$[\"bad key\\u000a\"]: unknown key");
    KV_CHECK(parse_with("\"World\": 2", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.World: unknown key; did you mean \"world\"?");
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"models\": [{\"name\": \"m\", \"weigth\": 1}]}}",
                        &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg,
                          "$.mutator.llm.models[0].weigth: unknown key; did you mean \"weight\"?");
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"models\": [3]}}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.mutator.llm.models[0]: expected a model name or an object");
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"models\": [\"\"]}}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.mutator.llm.models[0]: must not be empty");
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"endpoint\": \"https://\"}}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.mutator.llm.endpoint: URL has no host");
    /* credentials in the URL: refused, and never repeated */
    static const char *const secret_urls[] = {
        "https://u:SECRETSECRET@h/v1", "https://h/v1?key=SECRETSECRET",
        "https://h/v1?x=1&API_KEY=SECRETSECRET", "https://h/v1?access_token=SECRETSECRET#f",
        "http://h:8000/v1?region=eu&Api-Key=SECRETSECRET"};
    for (size_t i = 0; i < sizeof secret_urls / sizeof secret_urls[0]; i++) {
        char cfg[256];
        snprintf(cfg, sizeof cfg, "\"mutator\": {\"llm\": {\"endpoint\": \"%s\"}}", secret_urls[i]);
        KV_CHECKF(parse_with(cfg, &c, &err) == -1, "%s accepted", secret_urls[i]);
        KV_CHECK_STR_CONTAINS(err.msg, "$.mutator.llm.endpoint: URL must not carry credentials");
        KV_CHECKF(strstr(err.msg, "SECRET") == NULL, "the secret is echoed: %s", err.msg);
    }
    KV_CHECKF(parse_with("\"mutator\": {\"llm\": {\"endpoint\": \"https://h/v1?region=eu\"}}", &c,
                         &err) == 0,
              "%s", err.msg);
    KV_CHECK(parse_with("\"gpu_groups\": [[0, 1.5]]", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.gpu_groups[0][1]: expected an integer, got 1.5");
    KV_CHECK(parse_with("\"gpu_groups\": [3]", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg,
                          "$.gpu_groups[0]: expected an array of GPU indices, got a number");
    KV_CHECK(parse_with("\"gpu_groups\": [[0, 1], []]", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.gpu_groups[1]: empty group");
    KV_CHECK(parse_with("\"gpu_groups\": [[0, 1]], \"world\": 3", &c, &err) ==
             -1); /* world after groups */
    KV_CHECK_STR_CONTAINS(err.msg, "$.gpu_groups[0]: group has 2 GPUs but world is 3");

    /* API keys are never echoed, whatever their shape */
    static const char *const keys[] = {"sk-ant-api03-SECRETSECRET", "AIzaSyA-SECRETSECRET",
                                       "abcdEFGH1234ijklMNOP5678qrst", "Bearer SECRETSECRET"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char extra[256];
        snprintf(extra, sizeof extra, "\"mutator\": {\"llm\": {\"api_key_env\": \"%s\"}}", keys[i]);
        KV_CHECK(parse_with(extra, &c, &err) == -1);
        KV_CHECK_STR_CONTAINS(err.msg, "$.mutator.llm.api_key_env: looks like an API key");
        KV_CHECKF(strstr(err.msg, "SECRET") == NULL && strstr(err.msg, "1234") == NULL, "%s",
                  err.msg);
    }
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"api_key_env\": \"TOGETHER_API_KEY\"}}", &c,
                        &err) == 0);
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"api_key_env\": \"1ABC\"}}", &c, &err) == -1);
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"api_key_env\": \"\"}}", &c, &err) == -1);

    /* a NUL character (\u0000) is refused with its path, not cut at */
    KV_CHECK(kv_config_parse("{\"problems\": [\"allreduce\\u0000x\"]}", "quick.json", &c, &err) ==
             -1);
    KV_CHECK_STR_CONTAINS(err.msg, "quick.json: $.problems[0]: contains a NUL character (\\u0000)");
    KV_CHECK(parse_with("\"run_dir\": \"runs/a\\u0000/etc\"", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "inline.json: $.run_dir: contains a NUL character (\\u0000)");
    KV_CHECK(parse_with("\"mutator\": {\"llm\": {\"models\": [{\"name\": \"m\\u0000\"}]}}", &c,
                        &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "inline.json: $.mutator.llm.models[0].name: contains a NUL");
    KV_CHECK(parse_with("\"evaluation\": {\"warmup\\u0000\": 1}", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "inline.json: $.evaluation: a key contains a NUL character");

    /* nesting deeper than the strict readers allow says so */
    {
        static char deep[100000 * 2 + 32];
        size_t n = 100000, o = 0;
        o += (size_t)snprintf(deep, sizeof deep, "{\"seed\": ");
        memset(deep + o, '[', n);
        memset(deep + o + n, ']', n);
        memcpy(deep + o + 2 * n, "}", 2);
        KV_CHECK(kv_config_parse(deep, "deep.json", &c, &err) == -1);
        KV_CHECK_STR_CONTAINS(
            err.msg, "deep.json: nested too deep (more than 64 levels) at line 1, column 73");
    }

    /* syntax errors carry line and column; columns count characters */
    KV_CHECK(kv_config_parse("{\n  \"run_dir\": \"\xc3\xa9\xc3\xa9\" x\n}", "u.json", &c, &err) ==
             -1);
    KV_CHECK_STR_CONTAINS(err.msg, "u.json: invalid JSON at line 2, column 19");
    KV_CHECK(kv_config_parse("{\"problems\": [\"a\"]} {}", "two.json", &c, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "two.json: invalid JSON at line 1, column 21");
}

/* ---- the table ------------------------------------------------------------ */

static void test_schema(void)
{
    for (size_t i = 0; i < kv_cfg_schema_len; i++) {
        const kv_schema_key *k = &kv_cfg_schema[i];
        KV_CHECKF(k->doc && k->doc[0], "%s has no doc", k->path);
        KV_CHECK(kv_schema_type_name(k)[0] != '\0');
        for (size_t j = 0; j < i; j++)
            KV_CHECKF(strcmp(kv_cfg_schema[j].path, k->path) != 0, "%s twice", k->path);

        /* the parent is an object, or (for "x[].y") the custom array x */
        const char *dot = strrchr(k->path, '.');
        if (dot) {
            char parent[128];
            snprintf(parent, sizeof parent, "%.*s", (int)(dot - k->path), k->path);
            size_t pl = strlen(parent);
            int element = pl > 2 && strcmp(parent + pl - 2, "[]") == 0;
            if (element)
                parent[pl - 2] = '\0';
            const kv_schema_key *p = kv_schema_find(&kv_cfg_table, parent);
            KV_CHECKF(p && p->type == (element ? KV_SCHEMA_CUSTOM : KV_SCHEMA_OBJECT) && p < k,
                      "%s: bad parent %s", k->path, parent);
        }

        switch (k->type) {
        case KV_SCHEMA_INT:
        case KV_SCHEMA_BOOL:
        case KV_SCHEMA_ENUM:
            KV_CHECKF(k->size == sizeof(int), "%s: field size %zu", k->path, k->size);
            break;
        case KV_SCHEMA_INT64:
        case KV_SCHEMA_UINT64:
            KV_CHECKF(k->size == 8, "%s: field size %zu", k->path, k->size);
            KV_CHECKF(k->max <= KV_SCHEMA_INT_EXACT_MAX, "%s: max beyond 2^53-1", k->path);
            break;
        case KV_SCHEMA_NUMBER:
            KV_CHECKF(k->size == sizeof(double), "%s: field size %zu", k->path, k->size);
            break;
        case KV_SCHEMA_STRING:
            KV_CHECKF(k->def_str && strlen(k->def_str) < k->size, "%s: default does not fit",
                      k->path);
            break;
        case KV_SCHEMA_CUSTOM:
            KV_CHECKF(k->read && k->emit && k->type_doc, "%s: handlers missing", k->path);
            break;
        case KV_SCHEMA_OBJECT: break;
        }
        if (k->type == KV_SCHEMA_INT || k->type == KV_SCHEMA_INT64 || k->type == KV_SCHEMA_UINT64 ||
            k->type == KV_SCHEMA_NUMBER)
            KV_CHECKF(k->min <= k->def && k->def <= k->max, "%s: default outside its range",
                      k->path);
        if (k->type == KV_SCHEMA_ENUM) {
            int n = 0;
            while (k->names && k->names[n])
                n++;
            KV_CHECKF(n > 0 && k->def >= 0 && k->def < n, "%s: bad enum", k->path);
        }
    }
    KV_CHECK(kv_schema_find(&kv_cfg_table, "evaluation.screen_iters") != NULL);
    KV_CHECK(kv_schema_find(&kv_cfg_table, "nope") == NULL);
}

/* docs/config.md names every key of the table as `path`. */
static void test_docs(void)
{
    char path[1024];
    src_path(path, sizeof path, "docs/config.md");
    char *text = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    KV_REQUIRE(kv_read_file(path, &text, &len, &err) == 0 || (fprintf(stderr, "%s\n", err.msg), 0));
    for (size_t i = 0; i < kv_cfg_schema_len; i++) {
        char want[160];
        snprintf(want, sizeof want, "`%s`", kv_cfg_schema[i].path);
        KV_CHECKF(strstr(text, want) != NULL, "docs/config.md does not document %s", want);
    }
    KV_CHECK_STR_CONTAINS(text, "--run");
    free(text);
}

int main(void)
{
    KV_RUN(test_defaults);
    KV_RUN(test_shipped_configs);
    KV_RUN(test_round_trip);
    KV_RUN(test_bad_configs);
    KV_RUN(test_inline_cases);
    KV_RUN(test_schema);
    KV_RUN(test_docs);
    return kv_test_summary();
}
