/* test_cli_problems.c — `kevo problems`: --json exact, `problems check` and its kept verdicts,
 * and a problem folder with a hostile name.
 *
 * KEVO_BIN names the binary under test (set by ctest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "evaluator/evaluator.h"
#include "problem/problem.h"
#include "cli_fixture.h"
#include "test.h"

/* kevo problems --json prints integers up to 2^53-1 exactly: allreduce with
 * its largest size at 2^53 - 1 elements (cJSON's printer gives
 * 9.00719925474099e+15, which reads back as 2^53 - 2). */
static void test_problems_json_exact(void)
{
    char src[320], root[320], dir[340], path[360];
    kv_err err = {{0}};
    char *text = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/problems/allreduce/problem.json", getenv("KEVO_SOURCE_DIR"));
    KV_REQUIRE(kv_read_file(src, &text, &len, &err) == 0);
    char *at = strstr(text, "\"N\": 134217728");
    KV_REQUIRE(at);
    char edited[16384];
    snprintf(edited, sizeof edited, "%.*s\"N\": 9007199254740991%s", (int)(at - text), text,
             at + strlen("\"N\": 134217728"));
    free(text);
    snprintf(root, sizeof root, "%s/exact-problems", scratch);
    snprintf(dir, sizeof dir, "%s/allreduce", root);
    KV_REQUIRE(kv_mkdir_p(dir, 0755, &err) == 0);
    snprintf(path, sizeof path, "%s/problem.json", dir);
    KV_REQUIRE(kv_write_file_atomic(path, edited, strlen(edited), &err) == 0);
    snprintf(path, sizeof path, "%s/reference.cu", dir);
    KV_REQUIRE(kv_write_file_atomic(path, "// ref\n", 7, &err) == 0);
    result r;
    kevo(&r, "problems", "--root", root, "--json");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "9007199254740991");
    KV_CHECKF(strstr(r.out, "e+15") == NULL, "%s", r.out);
    result_free(&r);
}

/* Keeps a verdict on the source's allreduce at W=2 in cache: passed
 * (host: the host check's result, KV_PCHECK_NOT_RUN as a run's start
 * keeps it), or failed. Returns the entry's path in path. */
static void keep_verdict(const char *cache, int ok, kv_pcheck_result host, kv_pcheck_result floor,
                         char *path)
{
    char dir[320], key[KV_SHA256_HEX_LEN];
    kv_problem p;
    kv_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/problems/allreduce", getenv("KEVO_SOURCE_DIR"));
    KV_REQUIRE(kv_problem_load(dir, &p, &err) == 0);
    KV_REQUIRE(kv_pcheck_key(&p, 2, key, &err) == 0);
    kv_pcheck v;
    memset(&v, 0, sizeof v);
    snprintf(v.problem, sizeof v.problem, "allreduce");
    v.world = 2;
    v.ok = ok;
    v.self = ok ? KV_PCHECK_PASS : KV_PCHECK_FAIL;
    v.host = host;
    v.floor = floor;
    if (!ok)
        snprintf(v.message, sizeof v.message,
                 "the reference does not agree with itself at size "
                 "%s (kept)",
                 p.sizes[0].name);
    v.n_sizes = p.n_sizes;
    for (int s = 0; s < p.n_sizes; s++) {
        snprintf(v.sizes[s].name, sizeof v.sizes[s].name, "%s", p.sizes[s].name);
        v.sizes[s].validation = p.sizes[s].validation;
        v.sizes[s].self = KV_PCHECK_PASS;
        v.sizes[s].ref_plain = s == 1;
        v.sizes[s].host = host == KV_PCHECK_PASS ? (s == 2 ? KV_PCHECK_SKIPPED : KV_PCHECK_PASS)
                                                 : KV_PCHECK_NOT_RUN;
        v.sizes[s].host_checked = v.sizes[s].host == KV_PCHECK_PASS ? 4096 : 0;
        v.sizes[s].host_worst = 0.25;
    }
    v.sizes[p.n_sizes - 1].host = KV_PCHECK_NOT_RUN;
    v.sizes[p.n_sizes - 1].host_too_large = 1;
    v.checked_at = 1764000000; /* 2025-11-24T16:00:00Z */
    KV_REQUIRE(kv_pcheck_put(cache, key, &v, &err) == 0);
    KV_REQUIRE(kv_pcheck_path(cache, key, path, &err) == 0);
    kv_problem_free(&p);
}

/* kevo problems check: its usage errors (exit 2); a kept pass said with its
 * date and per size, without a GPU; what needs the GPUs (no kept verdict,
 * --no-cache, a kept failure, a damaged entry, a pass of the self-check
 * alone, a pass not timed against the floor) fails with a clear message
 * where there are none, and passes where there are. */
static void test_problems_check(void)
{
    result r;
    kevo(&r, "problems", "check");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "kevo problems check: expected one problem");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "allgather");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unexpected argument 'allgather'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--bogus");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--bogus'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--sizes", "1MiB");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "unknown option '--sizes'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--world", "99");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "--world: expected 1 to 8, got '99'");
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--timeout");
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(str(r.err), "missing value for '--timeout'");
    result_free(&r);
    kevo(&r, "problems", "check", "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "usage: kevo problems check P");
    KV_CHECK_STR_CONTAINS(str(r.out), "256 MiB");
    result_free(&r);
    kevo(&r, "problems", "--help");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "kevo problems check P");
    result_free(&r);
    kevo(&r, "problems", "check", "alreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "no problem \"alreduce\" in ");
    KV_CHECK_STR_CONTAINS(str(r.err), "did you mean \"allreduce\"?");
    result_free(&r);

    char cache[320], path[PATH_MAX];
    snprintf(cache, sizeof cache, "%s/check-cache", scratch);
    setenv("KEVO_CACHE_DIR", cache, 1);
    /* a kept pass of both checks: said, with its date, per size, no GPU needed */
    keep_verdict(cache, 1, KV_PCHECK_PASS, KV_PCHECK_PASS, path);
    kevo(&r, "problems", "check", "allreduce");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(str(r.out), "problem allreduce at W=2: its NCCL reference against "
                                      "itself and against its host check (check.c)\n");
    KV_CHECK_STR_CONTAINS(str(r.out), "cached: checked on 2025-11-24T16:00:00Z (--no-cache "
                                      "checks again)\n");
    KV_CHECK_STR_CONTAINS(str(r.out), " ok          window     ok: 4096 elements, worst "
                                      "error/tolerance 0.250\n");
    KV_CHECK_STR_CONTAINS(str(r.out), " ok          plain      ok: 4096 elements");
    KV_CHECK_STR_CONTAINS(str(r.out), " skipped by check.c\n");
    KV_CHECK_STR_CONTAINS(str(r.out), " not run (its tensors pass 256 MiB)\n");
    KV_CHECK_STR_CONTAINS(str(r.out), "\nfloor: ok: the reference is slower than the floor at "
                                      "every timed size\npassed\n");
    KV_CHECKF(r.err[0] == '\0', "%s", r.err);
    result_free(&r);
    kevo(&r, "problems", "check", "allreduce", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_CHECKF(j != NULL, "%s", r.out);
    KV_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "cached")) &&
             cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "host_check")), "ok") == 0);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "floor_check")), "ok") == 0);
    cJSON_Delete(j);
    result_free(&r);

    /* what needs the GPUs: none here gives exit 1 naming them (with GPUs: a pass) */
    for (int k = 0; k < 5; k++) {
        if (k == 1) /* a kept failure is not taken */
            keep_verdict(cache, 0, KV_PCHECK_NOT_RUN, KV_PCHECK_NOT_RUN, path);
        if (k == 2) /* the self-check alone */
            keep_verdict(cache, 1, KV_PCHECK_NOT_RUN, KV_PCHECK_NOT_RUN, path);
        if (k == 3)
            KV_REQUIRE(kv_write_file_atomic(path, "{\"ok\": true", 12, NULL) == 0);
        if (k == 4) /* both checks, the reference not timed against its floor */
            keep_verdict(cache, 1, KV_PCHECK_PASS, KV_PCHECK_NOT_RUN, path);
        if (k == 0)
            kevo(&r, "problems", "check", "allreduce", "--no-cache");
        else
            kevo(&r, "problems", "check", "allreduce");
        KV_CHECKF(r.status == 1 || r.status == 0, "case %d: exit %d: %s", k, r.status, r.err);
        if (r.status == 1)
            KV_CHECKF(strstr(r.err, "GPU") != NULL, "case %d: %s", k, r.err);
        else
            KV_CHECK_STR_CONTAINS(str(r.out), "\npassed\n");
        KV_CHECK(strstr(r.out, "cached: checked on") == NULL);
        if (k == 3) {
            KV_CHECK_STR_CONTAINS(str(r.err), "kevo: warning: ");
            KV_CHECK_STR_CONTAINS(str(r.err), path);
            KV_CHECK_STR_CONTAINS(str(r.err), "not a problem check's verdict");
        }
        result_free(&r);
    }
    unsetenv("KEVO_CACHE_DIR");
}

/* A problem folder whose name would set the terminal's title, ring and
 * rewrite the line: kevo problems names it, escaped, never raw. */
static void test_problems_hostile_name(void)
{
    char root[512], dir[700], file[800];
    snprintf(root, sizeof root, "%s/hostile-problems", scratch);
    snprintf(dir, sizeof dir,
             "%s/\x1b]0;pwned\x07"
             "evil\r\x9b"
             "2J",
             root);
    snprintf(file, sizeof file, "%s/problem.json", dir);
    KV_REQUIRE((mkdir(root, 0755) == 0 || access(root, F_OK) == 0) &&
               (mkdir(dir, 0755) == 0 || access(dir, F_OK) == 0));
    FILE *f = fopen(file, "w");
    KV_REQUIRE(f != NULL);
    fputs("{\"name\": ", f);
    KV_REQUIRE(fclose(f) == 0);
    result r;
    kevo(&r, "problems", "--root", root);
    CHECK_STATUS(r, 1);
    check_inert(&r, "problems");
    KV_CHECK_STR_CONTAINS(str(r.err), "\\e]0;pwned\\aevil\\r\\x9B2J");
    result_free(&r);
}

int main(void)
{
    int rc = cli_test_start("test_cli_problems");
    if (rc != 0)
        return rc;
    KV_RUN(test_problems_hostile_name);
    KV_RUN(test_problems_json_exact);
    KV_RUN(test_problems_check);
    return kv_test_summary();
}
