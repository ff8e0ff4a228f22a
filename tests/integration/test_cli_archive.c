/* test_cli_archive.c — `kevo archive`'s views (list, show, best, lineage, attempts, stats,
 * history) on the fixture archive (tests/support/cli_fixture.c), an empty
 * archive and one whose first program is a reference, and a reader running
 * while a writer holds an open write transaction.
 *
 * KEVO_BIN names the binary under test (set by ctest). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "cli_fixture.h"
#include "test.h"
#include "test_util.h"

static void check_list_line(const char *out, const char *problem)
{
    expect e;
    expected(problem, -1, &e);
    char line[512], want[256];
    KV_REQUIRE(find_line(out, NULL, problem, line, sizeof line) == 0);
    char prob[64], best[64], cov[32];
    long programs = -1, attempts = -1, ok = -1;
    int n = sscanf(line, "%63s %ld %ld %ld", prob, &programs, &attempts, &ok);
    KV_CHECKF(n == 4 && programs == e.programs && attempts == e.attempts && ok == e.ok, "%s: %s",
              problem, line);
    if (e.best_id)
        snprintf(best, sizeof best, "%.2fx #%d", e.best, e.best_id);
    else
        snprintf(best, sizeof best, " - ");
    snprintf(cov, sizeof cov, "%d/8", e.coverage);
    KV_CHECK_STR_CONTAINS(str(line), best);
    snprintf(want, sizeof want, " %s", cov);
    KV_CHECK_STR_CONTAINS(str(line), want);
}

static void test_list(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "list");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "coverage");
    check_list_line(r.out, "allreduce");
    check_list_line(r.out, "allgather");
    check_list_line(r.out, "moe_dispatch");
    KV_CHECK(count_lines(r.out) == 4);
    result_free(&r);

    /* the default run directory ($KEVO_RUN), and --run=DIR after the view */
    kevo_env(&r, run_dir, "archive", "list", (const char *)NULL);
    CHECK_STATUS(r, 0);
    check_list_line(r.out, "allreduce");
    result_free(&r);
    char opt[300];
    snprintf(opt, sizeof opt, "--run=%s", run_dir);
    kevo(&r, "archive", "list", opt, "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_CHECK(j != NULL);
    cJSON *probs = cJSON_GetObjectItem(j, "problems");
    KV_CHECK(cJSON_GetArraySize(probs) == 3);
    for (int i = 0; i < cJSON_GetArraySize(probs); i++) {
        cJSON *p = cJSON_GetArrayItem(probs, i);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(p, "problem"));
        KV_REQUIRE(name);
        expect e;
        expected(name, -1, &e);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "programs")) == e.programs);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "attempts")) == e.attempts);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "ok")) == e.ok);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "coverage")) == e.coverage);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "cells")) == 8);
        cJSON *best = cJSON_GetObjectItem(p, "best");
        if (e.best_id) {
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(best, "program")) == e.best_id);
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(best, "speedup")) == e.best);
        } else {
            KV_CHECK(cJSON_IsNull(best));
        }
    }
    cJSON_Delete(j);
    result_free(&r);
}

/* Checks one grid row of the text output against the expectation. */
static void check_grid_row(const char *out, const char *section, const expect *e, int t)
{
    static const char *const rows[] = {"  ce ", "  sm ", "  tma ", "  nvls "};
    char line[512];
    KV_REQUIRE(find_line(out, section, rows[t], line, sizeof line) == 0);
    /* the two cells, in column order */
    const char *p = line + strlen(rows[t]);
    for (int f = 0; f < 2; f++) {
        int c = t * 2 + f;
        while (*p == ' ')
            p++;
        char want[64];
        if (e->cell_id[c])
            snprintf(want, sizeof want, "%.2fx #%d", e->cell_fit[c], e->cell_id[c]);
        else
            snprintf(want, sizeof want, "-");
        KV_CHECKF(strncmp(p, want, strlen(want)) == 0, "%s row %s: want '%s' in '%s'", section,
                  rows[t], want, line);
        p += strlen(want);
    }
}

static void test_show(void)
{
    result r;
    kevo(&r, "archive", "show", "allreduce", "--run", run_dir);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "fused");
    KV_CHECK_STR_CONTAINS(r.out, "unfused");
    for (int island = 0; island < 3; island++) {
        char section[64];
        snprintf(section, sizeof section, "\nisland %d:", island);
        KV_CHECK_STR_CONTAINS(r.out, section);
        expect e;
        expected("allreduce", island, &e);
        for (int t = 0; t < 4; t++)
            check_grid_row(r.out, section, &e, t);
    }
    expect m;
    expected("allreduce", -1, &m);
    KV_CHECK(m.coverage == 4 && m.cell_id[cell_index_of("tma/fused")] == 4);
    for (int t = 0; t < 4; t++)
        check_grid_row(r.out, "\nmerged", &m, t);
    char want[128];
    snprintf(want, sizeof want, "coverage %d/8, QD score %.4f", m.coverage, m.qd);
    KV_CHECK_STR_CONTAINS(r.out, want);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--island", "2");
    CHECK_STATUS(r, 0);
    expect e2;
    expected("allreduce", 2, &e2);
    for (int t = 0; t < 4; t++)
        check_grid_row(r.out, "island 2", &e2, t);
    KV_CHECK(strstr(r.out, "merged") == NULL && strstr(r.out, "island 1") == NULL);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "show", "allreduce", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "problem")), "allreduce") == 0);
    KV_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "cells")) == 8);
    cJSON *islands = cJSON_GetObjectItem(j, "islands");
    KV_CHECK(cJSON_GetArraySize(islands) == 3);
    for (int i = 0; i < cJSON_GetArraySize(islands); i++) {
        cJSON *is = cJSON_GetArrayItem(islands, i);
        int island = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(is, "island"));
        KV_CHECK(island == i);
        expect e;
        expected("allreduce", island, &e);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(is, "coverage")) == e.coverage);
        KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(is, "qd_score")) - e.qd) < 1e-9);
        cJSON *grid = cJSON_GetObjectItem(is, "grid");
        KV_CHECK(cJSON_GetArraySize(grid) == 8);
        for (int c = 0; c < 8; c++) {
            cJSON *cell = cJSON_GetArrayItem(grid, c);
            KV_CHECK(cell_index_of(cell->string) == c);
            if (!e.cell_id[c]) {
                KV_CHECK(cJSON_IsNull(cell));
                continue;
            }
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(cell, "program")) == e.cell_id[c]);
            KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(cell, "speedup")) == e.cell_fit[c]);
        }
    }
    cJSON *merged = cJSON_GetObjectItem(j, "merged");
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(merged, "coverage")) == m.coverage);
    KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(merged, "qd_score")) - m.qd) < 1e-9);
    cJSON *mg = cJSON_GetObjectItem(merged, "grid");
    cJSON *nvls = cJSON_GetObjectItem(mg, "nvls/unfused");
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(nvls, "program")) == 7);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(nvls, "island")) == 2);
    cJSON *tma = cJSON_GetObjectItem(mg, "tma/fused");
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(tma, "program")) == 4);
    KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(mg, "ce/fused")));
    cJSON_Delete(j);
    result_free(&r);

    /* a problem with programs but no elites: empty grids */
    kevo(&r, "archive", "--run", run_dir, "show", "moe_dispatch");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "coverage 0/8");
    result_free(&r);
}

static void test_best(void)
{
    char src[512];
    fx_source(7, src, sizeof src);
    result r;
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce");
    CHECK_STATUS(r, 0);
    size_t ol = strlen(r.out), sl = strlen(src);
    KV_CHECK(ol > sl && strcmp(r.out + ol - sl, src) == 0); /* the exact source, last */
    const char *head = "// kevo program #7 of problem allreduce\n";
    KV_CHECK(strncmp(r.out, head, strlen(head)) == 0);
    KV_CHECK_STR_CONTAINS(r.out, "// problem:    allreduce\n");
    KV_CHECK_STR_CONTAINS(r.out, "3.05x (geometric mean over 2 sizes");
    KV_CHECK_STR_CONTAINS(r.out, "small");
    KV_CHECK_STR_CONTAINS(r.out, "10.000 us");
    KV_CHECK_STR_CONTAINS(r.out, "large");
    KV_CHECK_STR_CONTAINS(r.out, "1000.000 us");
    KV_CHECK_STR_CONTAINS(r.out, "nvls/unfused");
    KV_CHECK_STR_CONTAINS(r.out, "{\"sass\":[\"LDG\",\"STG\"],\"kernels\":1}");
    KV_CHECK_STR_CONTAINS(r.out, "// operator:   template\n");
    KV_CHECK_STR_CONTAINS(r.out, "// model:      allreduce_nvls\n");
    KV_CHECK_STR_CONTAINS(r.out, "// parents:    #5\n");
    char when[64], want[128];
    kv_format_utc(T0 + 7 * 60000000000LL, when, sizeof when);
    snprintf(want, sizeof want, "// evaluated:  %s\n", when);
    KV_CHECK_STR_CONTAINS(r.out, want);
    KV_CHECK_STR_CONTAINS(r.out, "// exported by kevo ");
    /* every header line is a comment */
    for (const char *p = r.out; p < r.out + ol - sl; p = strchr(p, '\n') + 1)
        KV_CHECKF(strncmp(p, "//", 2) == 0, "header line: %.40s", p);
    char *first = strdup(r.out);
    result_free(&r);

    /* the best of one cell over islands */
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--cell", "tma/fused");
    CHECK_STATUS(r, 0);
    fx_source(4, src, sizeof src);
    ol = strlen(r.out);
    sl = strlen(src);
    KV_CHECK(ol > sl && strcmp(r.out + ol - sl, src) == 0);
    KV_CHECK_STR_CONTAINS(r.out, "// parents:    #2, #3\n");
    result_free(&r);

    /* --out writes the same text to a file */
    char out[320];
    snprintf(out, sizeof out, "%s/best.cu", scratch);
    kevo(&r, "archive", "--run", run_dir, "best", "allreduce", "--out", out);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, out);
    char *file = kv_test_slurp(out, NULL);
    /* identical up to the export date (the last header line) */
    const char *a = strstr(first, "// exported by"), *b = strstr(file, "// exported by");
    KV_CHECK(a && b && a - first == b - file && strncmp(first, file, (size_t)(a - first)) == 0);
    KV_CHECK(a && b && strcmp(strchr(a, '\n'), strchr(b, '\n')) == 0);
    free(file);
    free(first);
    result_free(&r);
}

static void test_lineage(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "lineage", "4");
    CHECK_STATUS(r, 0);
    const char *anc = strstr(r.out, "ancestors"), *desc = strstr(r.out, "descendants");
    KV_REQUIRE(anc && desc && anc < desc);
    KV_CHECK(strncmp(r.out, "#4  llm  ok  2.31x  tma/fused", 29) == 0);
    /* parents 2 and 3 at the first level, 1 under each (the second time as "shown above") */
    KV_CHECK_STR_CONTAINS(anc, "\n  #2  template  ok  0.80x  ce/unfused\n    #1  seed  ok  1.20x");
    KV_CHECK_STR_CONTAINS(anc, "\n  #3  llm  ok  1.50x  sm/fused\n    #1  ");
    KV_CHECK_STR_CONTAINS(anc, "(shown above)");
    /* children 5 and 6, grandchild 7 under 5 */
    KV_CHECK_STR_CONTAINS(desc, "\n  #5  llm  ok  1.90x  tma/fused\n    #7  template  ok  3.05x");
    KV_CHECK_STR_CONTAINS(desc, "\n  #6  llm  mismatch  -  -\n");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "#4", "--depth", "1");
    CHECK_STATUS(r, 0);
    KV_CHECK(strstr(r.out, "#1 ") == NULL && strstr(r.out, "#7 ") == NULL);
    KV_CHECK_STR_CONTAINS(r.out, "#5 ");
    KV_CHECK_STR_CONTAINS(r.out, "#3 ");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "lineage", "1");
    CHECK_STATUS(r, 0);
    anc = strstr(r.out, "ancestors");
    KV_CHECK(anc && strstr(anc, "(none)") && strstr(anc, "(none)") < strstr(anc, "descendants"));
    KV_CHECK_STR_CONTAINS(r.out, "        #7  "); /* 1 -> 2 -> 4 -> 5 -> 7: level 4 */
    result_free(&r);
}

static int attempt_lines(const char *out)
{
    return count_lines(out) - 1; /* the header */
}

static void test_attempts(void)
{
    result r;
    kevo(&r, "archive", "--run", run_dir, "attempts");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == N_ATTEMPTS);
    KV_CHECK_STR_CONTAINS(r.out, "2026-01-01T00:01:00Z");      /* program 1's evaluation */
    KV_CHECK_STR_CONTAINS(r.out, "cudaErrorIllegalAddress\n"); /* first line of the detail only */
    KV_CHECK(strstr(r.out, "at rank 3") == NULL);
    KV_CHECK_STR_CONTAINS(r.out, "mismatch at index 7, expected \"1.0\" got \"1.5\"");
    char line[512];
    KV_REQUIRE(find_line(r.out, NULL, "      1 ", line, sizeof line) == 0);
    KV_CHECK_STR_CONTAINS(str(line), "allreduce");
    KV_CHECK_STR_CONTAINS(str(line), "seed");
    KV_CHECK_STR_CONTAINS(str(line), "#1");
    KV_CHECK_STR_CONTAINS(str(line), "1.20x");
    KV_CHECK_STR_CONTAINS(str(line), "12.5");
    KV_CHECK_STR_CONTAINS(str(line), "1200");
    KV_CHECK_STR_CONTAINS(str(line), "0.0125");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--problem", "allgather");
    CHECK_STATUS(r, 0);
    expect e;
    expected("allgather", -1, &e);
    KV_CHECK(attempt_lines(r.out) == e.attempts);
    KV_CHECK(strstr(r.out, "allreduce") == NULL);
    result_free(&r);

    for (int v = 0; v < KV_VERDICT_COUNT; v++) {
        int want = 0;
        for (int i = 0; i < N_FX; i++)
            want += fx[i].verdict == (kv_verdict)v;
        for (int i = 0; i < N_EXTRA; i++)
            want += fx_extra[i].verdict == (kv_verdict)v;
        KV_CHECK(want > 0); /* the fixture has every verdict */
        kevo(&r, "archive", "--run", run_dir, "attempts", "--verdict", kv_verdict_name(v));
        CHECK_STATUS(r, 0);
        KV_CHECKF(attempt_lines(r.out) == want, "verdict %s: %d lines", kv_verdict_name(v),
                  attempt_lines(r.out));
        result_free(&r);
    }

    kevo(&r, "archive", "--run", run_dir, "attempts", "--stage", "proposal", "--problem",
         "allreduce");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 1);
    result_free(&r);

    /* --limit alone: the last N; with --from: N from there */
    kevo(&r, "archive", "--run", run_dir, "attempts", "--limit", "3");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 3);
    KV_CHECK(find_line(r.out, NULL, "     18 ", line, sizeof line) == 0);
    KV_CHECK(find_line(r.out, NULL, "     16 ", line, sizeof line) == 0);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--limit", "2", "--problem", "allreduce");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 2);
    KV_CHECK(find_line(r.out, NULL, "     18 ", line, sizeof line) == 0); /* implausible */
    KV_CHECK(find_line(r.out, NULL, "     14 ", line, sizeof line) == 0); /* nvls_refused */
    result_free(&r);

    /* a time below the floor is listed with its numbers */
    kevo(&r, "archive", "--run", run_dir, "attempts", "--verdict", "implausible");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 1);
    KV_REQUIRE(find_line(r.out, NULL, "     18 ", line, sizeof line) == 0);
    KV_CHECK_STR_CONTAINS(str(line), "implausible");
    KV_CHECK_STR_CONTAINS(str(line), "size 16MiB: 15.70 us is below the floor of 39.13 us");
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--from", "5", "--limit", "2");
    CHECK_STATUS(r, 0);
    KV_CHECK(attempt_lines(r.out) == 2);
    KV_CHECK(find_line(r.out, NULL, "      5 ", line, sizeof line) == 0);
    KV_CHECK(find_line(r.out, NULL, "      6 ", line, sizeof line) == 0);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--json", "--from", "10");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetArraySize(j) == N_ATTEMPTS - 9);
    cJSON *a12 = cJSON_GetArrayItem(j, 2);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(a12, "seq")) == 12);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a12, "verdict")), "runtime_error") ==
             0);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a12, "detail")),
                    "cudaErrorIllegalAddress\nat rank 3") == 0);
    KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a12, "stage")), "screen") == 0);
    KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(a12, "program")));
    cJSON_Delete(j);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "attempts", "--json", "--verdict", "crash", "--problem",
         "allreduce");
    CHECK_STATUS(r, 0);
    j = cJSON_Parse(r.out);
    KV_CHECK(j && cJSON_IsArray(j) && cJSON_GetArraySize(j) == 0);
    cJSON_Delete(j);
    result_free(&r);
}

static void test_stats(void)
{
    static const char *const problems[] = {"allgather", "allreduce", "moe_dispatch"};
    double total = 0;
    expect e[3];
    for (int i = 0; i < 3; i++) {
        expected(problems[i], -1, &e[i]);
        total += e[i].qd;
    }
    KV_CHECK(fabs(e[1].qd - (0.80 + 1.50 + 2.31 + 3.05)) < 1e-9);

    result r;
    kevo(&r, "archive", "--run", run_dir, "stats", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "programs")) == N_FX);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "attempts")) == N_ATTEMPTS);
    int elites = 0;
    for (int i = 0; i < N_FX; i++)
        elites += fx[i].elite;
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "elites")) == elites);
    cJSON *by = cJSON_GetObjectItem(j, "attempts_by_verdict");
    KV_CHECK(cJSON_GetArraySize(by) == KV_VERDICT_COUNT);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(by, "ok")) == 7);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(by, "hang")) == 1);
    KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(by, "proposal_error")) == 1);
    KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "qd_score")) - total) < 1e-9);
    cJSON *probs = cJSON_GetObjectItem(j, "problems");
    KV_CHECK(cJSON_GetArraySize(probs) == 3);
    for (int i = 0; i < 3 && i < cJSON_GetArraySize(probs); i++) {
        cJSON *p = cJSON_GetArrayItem(probs, i);
        KV_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p, "problem")), problems[i]) == 0);
        KV_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "coverage")) == e[i].coverage);
        KV_CHECK(fabs(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "qd_score")) - e[i].qd) < 1e-9);
    }
    KV_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "state")));
    cJSON_Delete(j);
    result_free(&r);

    kevo(&r, "archive", "--run", run_dir, "stats");
    CHECK_STATUS(r, 0);
    char want[128], line[512];
    KV_REQUIRE(find_line(r.out, NULL, "allreduce ", line, sizeof line) == 0);
    snprintf(want, sizeof want, "%.4f", e[1].qd);
    KV_CHECK_STR_CONTAINS(str(line), want);
    KV_CHECK_STR_CONTAINS(str(line), "4/8");
    KV_CHECK_STR_CONTAINS(str(line), "3.05x #7");
    KV_REQUIRE(find_line(r.out, NULL, "total ", line, sizeof line) == 0);
    snprintf(want, sizeof want, "%.4f", total);
    KV_CHECK_STR_CONTAINS(str(line), want);
    KV_REQUIRE(find_line(r.out, NULL, "  compile_error ", line, sizeof line) == 0);
    KV_CHECK_STR_CONTAINS(str(line), " 1");
    result_free(&r);
}

/* kevo archive history on an events.jsonl written here: a row each time a
 * problem's best (of a result an island took) or best seed grows, at each
 * size of the results and of the geometric mean; a result no island took
 * moves no best; an event of an older kevo (no sizes) only the geomean; a
 * line cut short at the end is passed over. */
static void test_history(void)
{
    char dir[320], path[400];
    snprintf(dir, sizeof dir, "%s/history-run", scratch);
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    static const char *const problems[] = {"allreduce", "allgather"};
    for (int i = 0; i < 2; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "%s", problems[i]);
        char src[64];
        snprintf(src, sizeof src, "__global__ void h%d() {}\n", i);
        KV_REQUIRE(kv_add_program(t, &p, src, strlen(src), NULL, NULL, &err) == 0);
    }
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);
    static const char events[] =
        "{\"t\":1000.5,\"type\":\"start\",\"evaluations\":0,\"groups\":1}\n"
        "{\"t\":1002.5,\"type\":\"result\",\"evaluations\":1,\"problem\":\"allreduce\","
        "\"program\":1,\"op\":\"seed\",\"verdict\":\"ok\",\"speedup\":1.2,\"elite\":2,"
        "\"sizes\":{\"1MiB\":1.5,\"256MiB\":0.96}}\n"
        "{\"t\":1003.5,\"type\":\"result\",\"evaluations\":2,\"problem\":\"allreduce\","
        "\"program\":2,\"op\":\"seed\",\"verdict\":\"ok\",\"speedup\":1.1,\"elite\":0,"
        "\"sizes\":{\"1MiB\":1.1,\"256MiB\":1.1}}\n"
        "{\"t\":1010.5,\"type\":\"result\",\"evaluations\":3,\"problem\":\"allreduce\","
        "\"program\":3,\"op\":\"llm\",\"verdict\":\"ok\",\"speedup\":1.9,\"elite\":0,"
        "\"sizes\":{\"1MiB\":1.9,\"256MiB\":1.9}}\n"
        "{\"t\":1020.5,\"type\":\"result\",\"evaluations\":4,\"problem\":\"allreduce\","
        "\"program\":3,\"op\":\"llm\",\"verdict\":\"ok\",\"speedup\":1.3,\"elite\":1,"
        "\"sizes\":{\"1MiB\":1.4,\"256MiB\":1.2}}\n"
        "{\"t\":1030.5,\"type\":\"result\",\"evaluations\":5,\"problem\":\"allgather\","
        "\"program\":4,\"op\":\"seed\",\"verdict\":\"ok\",\"speedup\":1.05,\"elite\":1}\n"
        "{\"t\":1040.5,\"type\":\"res";
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    KV_REQUIRE(kv_write_file_atomic(path, events, sizeof events - 1, &err) == 0);
    /* what the events above make, by the rules in the comment */
    static const struct {
        double t, evaluations;
        const char *problem, *size;
        double best;
        int program;
        double seed;
    } want[] = {
        {2, 1, "allreduce", "geomean", 1.2, 1, 1.2},
        {2, 1, "allreduce", "1MiB", 1.5, 1, 1.5},
        {2, 1, "allreduce", "256MiB", 0.96, 1, 0.96},
        {3, 2, "allreduce", "256MiB", 0.96, 1, 1.1}, /* a seed no island took: the seed line */
        {20, 4, "allreduce", "geomean", 1.3, 3, 1.2},
        {20, 4, "allreduce", "256MiB", 1.2, 3, 1.1},
        {30, 5, "allgather", "geomean", 1.05, 4, 1.05},
    };
    const int n_want = (int)(sizeof want / sizeof want[0]);

    result r;
    kevo(&r, "archive", "--run", dir, "history", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_REQUIRE(j);
    KV_CHECKF(cJSON_GetArraySize(j) == n_want, "%d rows:\n%s", cJSON_GetArraySize(j), r.out);
    for (int i = 0; i < n_want && i < cJSON_GetArraySize(j); i++) {
        cJSON *row = cJSON_GetArrayItem(j, i);
        KV_CHECKF(
            cJSON_GetNumberValue(cJSON_GetObjectItem(row, "time_s")) == want[i].t &&
                cJSON_GetNumberValue(cJSON_GetObjectItem(row, "evaluations")) ==
                    want[i].evaluations &&
                strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(row, "problem")),
                       want[i].problem) == 0 &&
                strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(row, "size")), want[i].size) == 0 &&
                cJSON_GetNumberValue(cJSON_GetObjectItem(row, "best")) == want[i].best &&
                cJSON_GetNumberValue(cJSON_GetObjectItem(row, "program")) == want[i].program &&
                cJSON_GetNumberValue(cJSON_GetObjectItem(row, "seed")) == want[i].seed,
            "row %d:\n%s", i, r.out);
    }
    cJSON_Delete(j);
    result_free(&r);

    /* the table, and --problem */
    kevo(&r, "archive", "--run", dir, "history", "--problem", "allgather");
    CHECK_STATUS(r, 0);
    KV_CHECK(count_lines(r.out) == 2);
    char line[256];
    KV_REQUIRE(find_line(r.out, NULL, "     30.0 ", line, sizeof line) == 0);
    double t_s, evals, best, seed;
    char problem[64], size[64], prog[32];
    KV_CHECK(sscanf(line, "%lf %lf %63s %63s %lfx %31s %lfx", &t_s, &evals, problem, size, &best,
                    prog, &seed) == 7);
    KV_CHECK(t_s == 30 && evals == 5 && strcmp(problem, "allgather") == 0 &&
             strcmp(size, "geomean") == 0 && best == 1.05 && strcmp(prog, "#4") == 0 &&
             seed == 1.05);
    result_free(&r);

    kevo(&r, "archive", "--run", dir, "history", "--problem", "alreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(str(r.err), "did you mean 'allreduce'?");
    result_free(&r);
}

/* A reader works while the writer (this process) holds an open write
 * transaction, and sees only the committed snapshot. */
static void test_reader_during_write(void)
{
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(run_dir, &o, &a, &err) == 0);
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "inflight");
    snprintf(p.op, sizeof p.op, "seed");
    KV_CHECK(kv_add_program(t, &p, "int inflight;", 13, NULL, NULL, &err) == 0);

    result r;
    kevo(&r, "archive", "--run", run_dir, "list");
    CHECK_STATUS(r, 0);
    check_list_line(r.out, "allreduce");
    KV_CHECK(strstr(r.out, "inflight") == NULL);
    result_free(&r);
    kevo(&r, "archive", "--run", run_dir, "show", "allreduce");
    CHECK_STATUS(r, 0);
    result_free(&r);

    kv_txn_abort(t);
    kv_archive_close(a);
}

/* An archive with nothing in it yet. */
static void test_empty_archive(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "cli-fresh");
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0);
    kv_archive_close(a);
    result r;
    kevo(&r, "archive", "--run", dir, "list");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "no problems yet");
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "stats", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    KV_CHECK(j && cJSON_GetNumberValue(cJSON_GetObjectItem(j, "programs")) == 0);
    cJSON_Delete(j);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "best", "allreduce");
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "has no problems yet");
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "export");
    CHECK_STATUS(r, 0);
    KV_CHECK(strcmp(r.out, "[\n]\n") == 0);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "attempts", "--json");
    CHECK_STATUS(r, 0);
    KV_CHECK(strcmp(r.out, "[\n]\n") == 0);
    result_free(&r);
}

/* A problem's reference stored as its first program (a problem without
 * seeds, docs/search.md): the views say which program it is. */
static void test_reference_views(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "cli-reference");
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &o, &a, &err) == 0 && kv_write_begin(a, &t, &err) == 0);
    static const struct {
        const char *op, *cell;
        double speedup;
        int islands;
    } progs[] = {{KV_OP_REFERENCE, "sm/unfused", 1.0, 2}, {"llm", "tma/fused", 1.4, 1}};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "seedless_max");
        snprintf(p.op, sizeof p.op, "%s", progs[i].op);
        snprintf(p.model, sizeof p.model, "%s", i ? "gpt-4o" : "reference");
        p.island = i ? 0 : -1;
        p.n_parents = (uint32_t)i;
        p.parents[0] = 1;
        char src[512];
        fx_source(100 + i, src, sizeof src);
        uint64_t id = 0;
        rc = kv_add_program(t, &p, src, strlen(src), &id, NULL, &err);
        p.id = id;
        p.verdict = KV_VERDICT_OK;
        p.speedup = progs[i].speedup;
        snprintf(p.cell, sizeof p.cell, "%s", progs[i].cell);
        if (rc == 0)
            rc = kv_set_result(t, &p, &err);
        for (int is = 0; is < progs[i].islands && rc == 0; is++) {
            kv_elite e = {.island = is, .program_id = id, .fitness = progs[i].speedup};
            snprintf(e.problem, sizeof e.problem, "seedless_max");
            snprintf(e.cell, sizeof e.cell, "%s", progs[i].cell);
            rc = kv_offer_elite(t, &e, NULL, NULL, &err);
        }
    }
    KV_CHECKF(rc == 0, "%s", err.msg);
    KV_REQUIRE(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);

    result r;
    kevo(&r, "archive", "--run", dir, "show", "seedless_max");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "\nisland 1: coverage 1/8");
    KV_CHECK_STR_CONTAINS(strstr(r.out, "\nisland 1:"), "1.00x #1 reference");
    KV_CHECK_STR_CONTAINS(strstr(r.out, "\nmerged"), "1.00x #1 reference");
    KV_CHECK_STR_CONTAINS(r.out, "  tma    1.40x #2  ");
    KV_CHECK(strstr(r.out, "#2 reference") == NULL);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "show", "seedless_max", "--json");
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    cJSON *grid =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "islands"), 0), "grid");
    KV_CHECK(
        cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(grid, "sm/unfused"), "reference")));
    KV_CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(grid, "tma/fused"), "reference") == NULL);
    cJSON_Delete(j);
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "lineage", "2");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "\n  #1  reference  ok  1.00x  sm/unfused\n");
    result_free(&r);
    kevo(&r, "archive", "--run", dir, "best", "seedless_max", "--cell", "sm/unfused");
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "// operator:   reference\n");
    result_free(&r);
}

int main(void)
{
    int rc = cli_test_start("test_cli_archive");
    if (rc != 0)
        return rc;
    KV_RUN(test_list);
    KV_RUN(test_show);
    KV_RUN(test_best);
    KV_RUN(test_lineage);
    KV_RUN(test_attempts);
    KV_RUN(test_stats);
    KV_RUN(test_history);
    KV_RUN(test_reader_during_write);
    KV_RUN(test_empty_archive);
    KV_RUN(test_reference_views);
    return kv_test_summary();
}
