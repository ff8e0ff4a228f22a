/* test_cli_export.c — `kevo archive export` (CSV and JSON Lines) of the fixture archive
 * (tests/support/cli_fixture.c): its fields, its escapes and its per-size rows.
 *
 * KEVO_BIN names the binary under test (set by ctest). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "common/base64.h"
#include "problem/problem.h"
#include "cli_fixture.h"
#include "test.h"
#include "test_util.h"

static void test_export(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "export", "--format", "json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetArraySize(j) == N_FX);
    cJSON *p4 = cJSON_GetArrayItem(j, 3);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p4, "id")) == 4);
    cJSON *parents = cJSON_GetObjectItem(p4, "parents");
    KV_CHECK(cJSON_GetArraySize(parents) == 2 &&
             cJSON_GetNumberValue(cJSON_GetArrayItem(parents, 1)) == 3);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p4, "cell")), "tma/fused") == 0);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p4, "speedup")) == 2.31);
    KV_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(p4, "sizes")) == 2);
    KV_CHECK(cJSON_GetObjectItem(p4, "source") == NULL);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p4, "created")),
                    "2026-01-01T00:00:03Z") == 0);
    cJSON_Delete(j);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "export", "--problem", "allreduce", "--with-source");
    CHECK_STATUS(r, 0);
    j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetArraySize(j) == 7);
    char src[512];
    fx_source(6, src, sizeof src);
    const char *got = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 5), "source"));
    KV_CHECK(got && strcmp(got, src) == 0);
    cJSON_Delete(j);
    result_free(&r);

    /* csv: one row per program and size; a program without sizes has one */
    int want_rows = 0;
    for (int i = 0; i < N_FX; i++)
        want_rows += fx[i].verdict == KV_VERDICT_OK ? 2 : 1;
    csv_row rows[32];
    kevo(&r, "archive", "--run", run_dir, "export", "--format", "csv");
    CHECK_STATUS(r, 0);
    KV_CHECK(count_lines(r.out) == want_rows + 1);
    int n = csv_parse(r.out, rows, 32);
    KV_CHECK(n == want_rows + 1);
    for (int i = 0; i < n; i++)
        KV_CHECKF(rows[i].n == 19, "row %d has %d fields", i, rows[i].n);
    if (n == want_rows + 1) {
        KV_CHECK(strcmp(rows[0].field[0], "id") == 0 && strcmp(rows[0].field[2], "size") == 0 &&
                 strcmp(rows[0].field[11], "elite") == 0 &&
                 strcmp(rows[0].field[16], "model") == 0);
        int row = 1;
        for (int i = 0; i < N_FX && row < n; i++) {
            int sizes = fx[i].verdict == KV_VERDICT_OK ? 2 : 1;
            for (int k = 0; k < sizes && row < n; k++, row++) {
                char **f = rows[row].field;
                char id[16];
                snprintf(id, sizeof id, "%d", i + 1);
                KV_CHECKF(strcmp(f[0], id) == 0, "row %d: id %s, want %s", row, f[0], id);
                KV_CHECK(strcmp(f[1], fx[i].problem) == 0);
                KV_CHECK(strcmp(f[10], fx[i].cell) == 0);
                KV_CHECKF(strcmp(f[11], fx_is_elite(i) ? "true" : "false") == 0,
                          "program %d: elite %s", i + 1, f[11]);
                KV_CHECK(strcmp(f[12], kv_verdict_name(fx[i].verdict)) == 0);
                KV_CHECK(strcmp(f[13], fx[i].op) == 0);
                KV_CHECK(atoi(f[14]) == fx[i].island);
                KV_CHECK(strcmp(f[16], fx[i].model) == 0); /* comma and quotes */
                if (fx[i].verdict != KV_VERDICT_OK) {
                    KV_CHECK(f[2][0] == 0 && f[3][0] == 0 && f[8][0] == 0);
                    continue;
                }
                double ref = k == 0 ? 10 : 1000, cand = ref / fx[i].speedup;
                KV_CHECK(strcmp(f[2], k == 0 ? "small" : "large") == 0);
                KV_CHECK(strtod(f[3], NULL) == cand && strtod(f[7], NULL) == ref);
                KV_CHECK(strtod(f[8], NULL) == ref / cand);
                KV_CHECK(f[6][0] == 0); /* no CV in this evidence */
                KV_CHECK(f[9][0] == 0); /* small, large: not sizes of the definitions */
                KV_CHECK(strcmp(f[17], "true") == 0);
            }
        }
        KV_CHECK(row == n);
        KV_CHECK(strcmp(rows[8].field[15], "2;3") == 0); /* program 4 */
    }
    KV_CHECK_STR_CONTAINS(r.out, ",\"gpt-4o, \"\"mini\"\"\",");
    csv_free(rows, n > 0 ? n : 0);
    result_free(&r);

    char out[320];
    snprintf(out, sizeof out, "%s/export.csv", scratch);
    kevo(&r, "archive", "--run", run_dir, "export", "--format", "csv", "--with-source", "--out",
         out);
    CHECK_STATUS(r, 0);
    KV_CHECK(r.out[0] == 0);
    char *file = kv_test_slurp(out, NULL);
    n = csv_parse(file, rows, 32);
    KV_CHECK(n == want_rows + 1);
    fx_source(9, src, sizeof src); /* program 9: no sizes, the last row but one */
    KV_CHECK(n == want_rows + 1 && rows[n - 2].n == 21 && strcmp(rows[n - 2].field[0], "9") == 0 &&
             strcmp(rows[n - 2].field[19], "text") == 0 && strcmp(rows[n - 2].field[20], src) == 0);
    fx_source(1, src, sizeof src); /* on each of a program's rows */
    KV_CHECK(n > 2 && rows[1].n == 21 && strcmp(rows[1].field[20], src) == 0 &&
             strcmp(rows[2].field[20], src) == 0);
    KV_CHECK(n > 0 && strcmp(rows[0].field[19], "source_encoding") == 0 &&
             strcmp(rows[0].field[20], "source") == 0);
    csv_free(rows, n > 0 ? n : 0);
    free(file);
    result_free(&r);
}

/* A source and a model name holding escapes: the CSV export writes no byte
 * a terminal acts on, and the exact source comes back from its base64. */
static void test_export_escapes(void)
{
    static const char src[] = "// \x1b]0;pwned\x07\x1b[2J\r\n__global__ void k() {}\n";
    char dir[320];
    snprintf(dir, sizeof dir, "%s/escapes-run", scratch);
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "allreduce");
    snprintf(p.op, sizeof p.op, "seed");
    snprintf(p.model, sizeof p.model, "m\x1b[31m");
    KV_REQUIRE(kv_add_program(t, &p, src, strlen(src), NULL, NULL, &err) == 0);
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);

    result r;
    kevo(&r, "archive", "--run", dir, "export", "--format", "csv", "--with-source");
    CHECK_STATUS(r, 0);
    check_inert(&r, "archive export");
    csv_row rows[4];
    int n = csv_parse(r.out, rows, 4);
    char *b64 = kv_base64(src, strlen(src));
    KV_REQUIRE(b64);
    KV_CHECK(n == 2 && rows[1].n == 21 && strcmp(rows[1].field[16], "m\\e[31m") == 0 &&
             strcmp(rows[1].field[19], "base64") == 0 && strcmp(rows[1].field[20], b64) == 0);
    free(b64);
    csv_free(rows, n > 0 ? n : 0);
    result_free(&r);
}

/* The per-size rows of export --format csv|jsonl on an archive of real
 * sizes of allreduce, a stored world of 4 and evaluator evidence: times,
 * spread, CV from the evidence, speedup, GB/s from the problem's cost model
 * (send_bytes = 2 (W-1)/W x 2N, written out here), the elite flag. */
static void test_export_rows(void)
{
    char dir[320];
    snprintf(dir, sizeof dir, "%s/rows-run", scratch);
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    KV_REQUIRE(kv_put_config(t, "{\"problems\": [\"allreduce\"], \"world\": 4}", &err) == 0);
    /* program 1: an elite, two sizes, CV in its evidence for 1MiB only;
     * program 2: not an elite (its cell holds 1), and a size that is not the problem's */
    static const struct {
        const char *size;
        double ref, cand, p10, p90;
    } sz[2][2] = {{{"1MiB", 16, 12.5, 12.25, 13.75}, {"256MiB", 1170, 780, 779, 790.5}},
                  {{"1MiB", 16, 20, 19, 21}, {"bogus", 5, 4, 3.5, 4.5}}};
    for (int i = 0; i < 2; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "allreduce");
        snprintf(p.op, sizeof p.op, i ? "llm" : "seed");
        p.island = 0;
        if (i)
            p.parents[p.n_parents++] = 1;
        char src[64];
        snprintf(src, sizeof src, "__global__ void k%d() {}\n", i + 1);
        uint64_t id;
        KV_REQUIRE(kv_add_program(t, &p, src, strlen(src), &id, NULL, &err) == 0);
        p.id = id;
        p.verdict = KV_VERDICT_OK;
        p.n_sizes = 2;
        for (int k = 0; k < 2; k++) {
            kv_size_result *r = &p.sizes[k];
            snprintf(r->name, sizeof r->name, "%s", sz[i][k].size);
            r->ref_us = sz[i][k].ref;
            r->cand_us = sz[i][k].cand;
            r->cand_p10_us = sz[i][k].p10;
            r->cand_p90_us = sz[i][k].p90;
            r->ok = 1;
            r->timing = KV_SIZE_TIMING_GRAPH;
        }
        p.speedup = 1.3;
        snprintf(p.cell, sizeof p.cell, "sm/fused");
        p.evidence = i ? NULL
                       : "{\"sizes\":[{\"name\":\"1MiB\",\"candidate\":{\"median_us\":12.5,"
                         "\"cv\":0.0325}},{\"name\":\"256MiB\"}]}";
        p.evaluated_ns = T0;
        KV_REQUIRE(kv_set_result(t, &p, &err) == 0);
        kv_elite e = {.island = 0, .program_id = id, .fitness = i ? 0.9 : 1.3};
        snprintf(e.problem, sizeof e.problem, "allreduce");
        snprintf(e.cell, sizeof e.cell, "sm/fused");
        KV_REQUIRE(kv_offer_elite(t, &e, NULL, NULL, &err) == 0);
    }
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);

    /* N of each size from the problem's file; the cost model written out */
    char pdir[512];
    snprintf(pdir, sizeof pdir, "%s/problems/allreduce", getenv("KEVO_SOURCE_DIR"));
    kv_problem def;
    KV_REQUIRE(kv_problem_load(pdir, &def, &err) == 0);
    double gbps[2][2];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            int at = kv_problem_find_size(&def, sz[i][k].size);
            double n = at >= 0 ? (double)def.sizes[at].values[0] : NAN;
            gbps[i][k] = 2.0 * (4 - 1) * (2 * n) / 4 / (sz[i][k].cand * 1e-6) / 1e9;
        }
    kv_problem_free(&def);

    result r;
    kevo(&r, "archive", "--run", dir, "export", "--format", "csv");
    CHECK_STATUS(r, 0);
    csv_row rows[8];
    int n = csv_parse(r.out, rows, 8);
    KV_CHECKF(n == 5, "%d rows:\n%s\nstderr: %s", n, r.out, r.err);
    for (int row = 1; row < n && n == 5; row++) {
        int i = (row - 1) / 2, k = (row - 1) % 2;
        char **f = rows[row].field;
        KV_REQUIRE(rows[row].n == 19);
        KV_CHECK(atoi(f[0]) == i + 1 && strcmp(f[2], sz[i][k].size) == 0);
        KV_CHECK(strtod(f[3], NULL) == sz[i][k].cand && strtod(f[4], NULL) == sz[i][k].p10 &&
                 strtod(f[5], NULL) == sz[i][k].p90 && strtod(f[7], NULL) == sz[i][k].ref);
        KV_CHECK(strtod(f[8], NULL) == sz[i][k].ref / sz[i][k].cand);
        if (i == 0 && k == 0)
            KV_CHECKF(strtod(f[6], NULL) == 0.0325, "cv %s", f[6]);
        else
            KV_CHECKF(f[6][0] == 0, "cv %s, want empty", f[6]);
        if (isnan(gbps[i][k]))
            KV_CHECKF(f[9][0] == 0, "gbps %s at %s, want empty", f[9], f[2]);
        else
            KV_CHECKF(fabs(strtod(f[9], NULL) - gbps[i][k]) < 1e-9 * gbps[i][k],
                      "gbps %s at %s, want %.6f", f[9], f[2], gbps[i][k]);
        KV_CHECK(strcmp(f[11], i == 0 ? "true" : "false") == 0);
        KV_CHECK(strcmp(f[15], i == 0 ? "" : "1") == 0);
        KV_CHECK(strcmp(f[18], "graph") == 0);
    }
    csv_free(rows, n > 0 ? n : 0);
    result_free(&r);

    /* jsonl: the same rows, one object a line */
    kevo(&r, "archive", "--run", dir, "export", "--format", "jsonl");
    CHECK_STATUS(r, 0);
    KV_CHECK(count_lines(r.out) == 4);
    char *line = r.out;
    for (int row = 0; row < 4 && line && *line; row++) {
        int i = row / 2, k = row % 2;
        char *eol = strchr(line, '\n');
        if (eol)
            *eol = 0;
        cJSON *j = cJSON_Parse(line);
        KV_REQUIRE(j);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "id")) == i + 1);
        KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "size")), sz[i][k].size) == 0);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "cand_p90_us")) == sz[i][k].p90);
        KV_CHECK(cJSON_IsBool(cJSON_GetObjectItem(j, "elite")) &&
                 cJSON_IsTrue(cJSON_GetObjectItem(j, "elite")) == (i == 0));
        cJSON *g = cJSON_GetObjectItem(j, "gbps");
        if (isnan(gbps[i][k]))
            KV_CHECK(cJSON_IsNull(g));
        else
            KV_CHECK(fabs(cJSON_GetNumberValue(g) - gbps[i][k]) < 1e-9 * gbps[i][k]);
        KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "cand_cv")) == !(i == 0 && k == 0));
        KV_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "parents")) == i);
        cJSON_Delete(j);
        line = eol ? eol + 1 : NULL;
    }
    result_free(&r);
}

int main(void)
{
    int rc = cli_test_start("test_cli_export");
    if (rc != 0)
        return rc;
    KV_RUN(test_export);
    KV_RUN(test_export_escapes);
    KV_RUN(test_export_rows);
    return kv_test_summary();
}
