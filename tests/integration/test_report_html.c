/* test_report_html.c — kevo report's page (report/html.h): a run built with
 * the archive API and a small events.jsonl, written as HTML and read back:
 * hostile sources shown as text (nothing raw: no tag, no ESC, no invalid
 * UTF-8), every section id, every problem, numbers computed from what was
 * stored, secrets of the configuration hidden, the line a writer is still
 * writing left out; budgets over time on the run's active time (a resumed
 * run's gap left out); and `kevo report` itself. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "common/text.h"
#include "problem/problem.h"
#include "report/html.h"
#include "test.h"
#include "test_util.h"

#define T0 1795000000000000000LL

#define HAS(page, s) KV_CHECKF(strstr((page), (s)) != NULL, "the page lacks \"%s\"", (s))
#define LACKS(page, s) KV_CHECKF(strstr((page), (s)) == NULL, "the page holds \"%s\"", (s))

/* The hostile part of program 2's source. */
static const char hostile[] = "// </script><img src=x onerror=alert(1)>\n"
                              "// <!-- \x1b[31m red \xff\xfe bad \xc3\x28 end\n";

static const char *source_of(int i, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "#include \"kevo/kernel.h\"\n__global__ void k%d(float *x) {\n"
             "    x[threadIdx.x] *= %d;\n}\n%s",
             i, i, i == 2 ? hostile : "// plain\n");
    return buf;
}

typedef struct {
    const char *problem, *op, *model, *cell;
    int island;
    uint64_t parent;
    kv_verdict verdict;
    double speedup;
    int elite_islands; /* bit i: an elite of island i */
} fx_program;

/* ids 1..6 */
static const fx_program fx[] = {
    {"allreduce", "seed", "ll_sm", "sm/fused", -1, 0, KV_VERDICT_OK, 1.2, 3},
    {"allreduce", "llm", "gpt-test", "tma/fused", 0, 1, KV_VERDICT_OK, 1.48, 1},
    {"allreduce", "template", "", "ce/unfused", 1, 2, KV_VERDICT_OK, 2.5, 2},
    {"allreduce", "template", "", "sm/fused", 1, 1, KV_VERDICT_MISMATCH, 0, 0},
    {"alltoall", "seed", "a2a", "sm/unfused", -1, 0, KV_VERDICT_OK, 0.8, 1},
    {"alltoall", "template", "", "sm/fused", 0, 5, KV_VERDICT_OK, 0.95, 0},
};
#define N_FX (sizeof fx / sizeof fx[0])

/* Times of size s of program i (speedup at both sizes = the program's). */
static double ref_us(int s)
{
    return s == 0 ? 20.0 : 80.0;
}

static int build_run(const char *dir, kv_err *err)
{
    kv_archive_opts o = {.create = 1};
    kv_archive *a = NULL;
    kv_txn *t = NULL;
    if (kv_archive_open(dir, &o, &a, err) != 0)
        return -1;
    int rc = kv_write_begin(a, &t, err);
    for (size_t i = 0; i < N_FX && rc == 0; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        snprintf(p.problem, sizeof p.problem, "%s", fx[i].problem);
        snprintf(p.op, sizeof p.op, "%s", fx[i].op);
        snprintf(p.model, sizeof p.model, "%s", fx[i].model);
        p.island = fx[i].island;
        p.created_ns = T0 + (int64_t)i;
        if (fx[i].parent)
            p.parents[p.n_parents++] = fx[i].parent;
        char src[1024];
        source_of((int)i + 1, src, sizeof src);
        uint64_t id = 0;
        rc = kv_add_program(t, &p, src, strlen(src), &id, NULL, err);
        if (rc == 0 && id != i + 1)
            rc = kv_err_set(err, "program %zu got id %llu", i + 1, (unsigned long long)id);
        if (rc != 0)
            break;
        p.id = id;
        p.verdict = fx[i].verdict;
        p.speedup = fx[i].speedup;
        snprintf(p.cell, sizeof p.cell, "%s", fx[i].cell);
        p.evaluated_ns = T0 + (int64_t)id * 1000000000LL;
        p.protocol = KV_PROTOCOL_FULL;
        p.evidence = id == 2 ? "{\"note\":\"<script>alert(2)</script>\"}" : NULL;
        if (fx[i].verdict == KV_VERDICT_OK) {
            p.n_sizes = 2;
            for (int s = 0; s < 2; s++) {
                kv_size_result *z = &p.sizes[s];
                snprintf(z->name, sizeof z->name, "%s", s == 0 ? "64KiB" : "1MiB");
                z->ref_us = ref_us(s);
                z->cand_us = ref_us(s) / fx[i].speedup;
                z->cand_p10_us = z->cand_us * 0.9;
                z->cand_p90_us = z->cand_us * 1.1;
                z->roofline_us = ref_us(s) / 4;
                z->ok = 1;
                z->timing = KV_SIZE_TIMING_GRAPH;
            }
            p.roofline = 0.5;
        }
        rc = kv_set_result(t, &p, err);
        for (int isl = 0; isl < 2 && rc == 0; isl++) {
            if (!(fx[i].elite_islands & (1 << isl)))
                continue;
            kv_elite e = {.island = isl,
                          .program_id = id,
                          .fitness = fx[i].speedup,
                          .since_ns = p.evaluated_ns};
            snprintf(e.problem, sizeof e.problem, "%s", fx[i].problem);
            snprintf(e.cell, sizeof e.cell, "%s", fx[i].cell);
            rc = kv_offer_elite(t, &e, NULL, NULL, err);
        }
        kv_attempt at = {.time_ns = p.evaluated_ns,
                         .island = fx[i].island,
                         .stage = KV_STAGE_FULL,
                         .verdict = fx[i].verdict,
                         .program_id = id,
                         .parent_id = fx[i].parent,
                         .speedup = fx[i].speedup};
        snprintf(at.problem, sizeof at.problem, "%s", fx[i].problem);
        snprintf(at.op, sizeof at.op, "%s", fx[i].op);
        if (rc == 0)
            rc = kv_add_attempt(t, &at, NULL, err);
    }
    if (rc == 0)
        rc = kv_put_config(t,
                           "{\"world\":2,\"budget\":{\"evaluations\":100,\"llm_tokens\":5000},"
                           "\"mutator\":{\"llm\":{\"api_key_env\":\"KEVO_TEST_HIDDEN_NAME\","
                           "\"model\":\"gpt-test\"}},\"secret_token\":\"tok-not-shown\"}",
                           err);
    kv_run_state st = {
        .evaluations = 42, .wall_s = 7200, .tokens_in = 1234, .tokens_out = 567, .cost_usd = 3.21};
    if (rc == 0)
        rc = kv_put_state(t, &st, err);
    if (rc == 0)
        rc = kv_txn_commit(t, err);
    else if (t)
        kv_txn_abort(t);
    kv_archive_close(a);
    return rc;
}

/* The time result i held a GPU group. */
static double group_s(size_t i)
{
    return 100.0 * (double)(i + 1);
}

/* events.jsonl: a start, a result of each program, and a last line cut
 * short (a writer still writing it) whose speedup must not be drawn. */
static int write_events(const char *dir)
{
    char path[4096];
    if (kv_path_join(path, sizeof path, dir, "events.jsonl", NULL) != 0)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"t\":1000.0,\"type\":\"start\",\"evaluations\":0,\"run_dir\":\"x\","
               "\"groups\":2}\n");
    for (size_t i = 0; i < N_FX; i++)
        fprintf(f,
                "{\"t\":%.1f,\"type\":\"result\",\"evaluations\":%zu,\"problem\":\"%s\","
                "\"program\":%zu,\"island\":%d,\"stage\":\"%s\",\"op\":\"%s\","
                "\"verdict\":\"%s\",\"cell\":\"%s\",\"speedup\":%g,\"group_s\":%g}\n",
                1000.0 + 600.0 * (double)(i + 1), i + 1, fx[i].problem, i + 1, fx[i].island,
                fx[i].parent ? "full" : "seed", fx[i].op, kv_verdict_name(fx[i].verdict),
                fx[i].cell, fx[i].speedup, group_s(i));
    fprintf(f, "{\"t\":9000.0,\"type\":\"result\",\"evaluations\":7,\"problem\":\"allreduce\","
               "\"program\":7,\"island\":0,\"stage\":\"full\",\"verdict\":\"ok\",\"speedup\":9.87");
    return fclose(f);
}

/* The data of the chart series name (data-series="name" data-values="x,y
 * ..."): how many pairs, at most max, or -1 when the page has no such series. */
static int series_of(const char *page, const char *name, double *x, double *y, int max)
{
    char want[96];
    snprintf(want, sizeof want, "data-series=\"%s\" data-values=\"", name);
    const char *s = strstr(page, want);
    if (!s)
        return -1;
    s += strlen(want);
    int n = 0;
    while (*s != '"' && n < max) {
        char *end;
        x[n] = strtod(s, &end);
        if (*end != ',')
            return -1;
        y[n] = strtod(end + 1, &end);
        if (*end != ' ' && *end != '"')
            return -1;
        n++;
        s = *end == ' ' ? end + 1 : end;
    }
    return n;
}

/* The data-xmax of the first chart after the title title, or -1. */
static double xmax_of(const char *page, const char *title)
{
    char want[128];
    snprintf(want, sizeof want, "<title>%s</title>", title);
    const char *t = strstr(page, want);
    if (!t)
        return -1;
    const char *m = t;
    while (m > page && strncmp(m, "data-xmax=\"", 11) != 0)
        m--; /* the attribute of the <svg> that title opens */
    return m > page ? strtod(m + 11, NULL) : -1;
}

/* Whether all n bytes of s are valid UTF-8. */
static int valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = kv_utf8_seq((const unsigned char *)s + i, n - i, NULL);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
}

static void test_page(void)
{
    char dir[4096], out[4200];
    kv_test_fresh_dir(dir, sizeof dir, "report");
    kv_err err = {{0}};
    KV_REQUIRE(build_run(dir, &err) == 0 || (fprintf(stderr, "%s\n", err.msg), 0));
    KV_REQUIRE(write_events(dir) == 0);
    const char *src_dir = getenv("KEVO_SOURCE_DIR");
    char problems[4096];
    snprintf(problems, sizeof problems, "%s/problems", src_dir ? src_dir : "..");
    setenv("KEVO_PROBLEMS", problems, 1);

    snprintf(out, sizeof out, "%s/page.html", dir);
    KV_REQUIRE(kv_report_write(dir, out, NULL, &err) == 0 || (fprintf(stderr, "%s\n", err.msg), 0));
    char *page = NULL;
    size_t len = 0;
    KV_REQUIRE(kv_read_file_max(out, 64u << 20, &page, &len, &err) == 0);

    /* nothing hostile raw */
    LACKS(page, "<script");
    LACKS(page, "<img");
    LACKS(page, "<!--");
    LACKS(page, "onerror=alert(1)>");
    KV_CHECK(memchr(page, 0x1b, len) == NULL);
    KV_CHECK(valid_utf8(page, len));
    KV_CHECK(strlen(page) == len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)page[i] < 0x20 && page[i] != '\n' && page[i] != '\t') {
            KV_CHECKF(0, "control byte 0x%02x at %zu", (unsigned char)page[i], i);
            break;
        }
    /* ... and shown as text */
    HAS(page, "// &lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;");
    HAS(page, "// &lt;!-- \\x1b[31m red \xEF\xBF\xBD\xEF\xBF\xBD bad \xEF\xBF\xBD( end");
    HAS(page, "&quot;note&quot;:&quot;&lt;script&gt;alert(2)&lt;/script&gt;&quot;");
    LACKS(page, "<script>alert(2)");

    /* every section, every problem */
    const char *ids[] = {"run", "models", "verdicts", "elite-1", "elite-2", "elite-3", "elite-5"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "id=\"%s\"", ids[i]);
        HAS(page, want);
    }
    const char *probs[] = {"allreduce", "alltoall"};
    const char *kinds[] = {"problem", "grid", "sizes", "anytime", "lineage"};
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 5; k++) {
            char want[64];
            snprintf(want, sizeof want, "id=\"%s-%s\"", kinds[k], probs[p]);
            HAS(page, want);
        }
    LACKS(page, "id=\"elite-4\""); /* the mismatch is no elite, no best, no ancestor */

    /* the grids: cells of what was stored, linked to their sources */
    char want[256];
    for (size_t i = 0; i < N_FX; i++) {
        if (!fx[i].elite_islands)
            continue;
        snprintf(want, sizeof want, "<a href=\"#elite-%zu\">%.2fx #%zu</a>", i + 1, fx[i].speedup,
                 i + 1);
        HAS(page, want);
    }
    /* the best per size: times, speedup, bus bandwidth from the cost model at W = 2 */
    kv_problem def;
    memset(&def, 0, sizeof def);
    char pdir[4200];
    snprintf(pdir, sizeof pdir, "%s/allreduce", problems);
    if (kv_problem_load(pdir, &def, &err) == 0) {
        for (int s = 0; s < 2; s++) {
            int k = kv_problem_find_size(&def, s == 0 ? "64KiB" : "1MiB");
            kv_roofline rl;
            KV_REQUIRE(k >= 0 && kv_problem_roofline(&def, k, 2, &rl, &err) == 0);
            double cand = ref_us(s) / 2.5;
            snprintf(want, sizeof want,
                     "<td><a href=\"#elite-3\">#3</a></td><td>%.2f</td><td>%.2f</td>"
                     "<td class=\"s5\">2.50x</td><td class=\"l\">ce/unfused</td>"
                     "<td>%.1f</td><td>%.1f</td><td>%.0f%%</td><td>%.0f%%</td>",
                     cand, ref_us(s), rl.send_bytes / (cand * 1e3),
                     rl.send_bytes / (ref_us(s) * 1e3), 100 * (ref_us(s) / 4) / cand,
                     100 * rl.send_bytes / (cand * 1e3) / 386);
            HAS(page, want);
        }
        kv_problem_free(&def);
    } else {
        KV_CHECKF(0, "%s", err.msg);
    }
    /* the run: budgets spent, secrets hidden */
    HAS(page, "<td class=\"l\">evaluations</td><td>42</td><td>100</td>");
    HAS(page, "<td>2.00 h</td>");
    HAS(page, "<td>1234 in, 567 out</td><td>5000</td>");
    HAS(page, "<td>$3.21</td>");
    LACKS(page, "KEVO_TEST_HIDDEN_NAME");
    LACKS(page, "tok-not-shown");
    HAS(page, "(hidden)");
    /* budgets over time: evaluations against their limit; no LLM spend, said */
    HAS(page, "id=\"budgets\"");
    double bx[16], by[16];
    int nb = series_of(page, "evaluations", bx, by, 16);
    KV_CHECKF(nb == (int)N_FX, "evaluations over time: %d points", nb);
    for (int i = 0; i < nb && i < (int)N_FX; i++)
        KV_CHECKF(bx[i] == 600.0 * (i + 1) && by[i] == i + 1, "point %d: %g,%g", i, bx[i], by[i]);
    KV_CHECK(series_of(page, "llm_tokens", bx, by, 16) == -1);
    HAS(page, "No LLM calls in events.jsonl");
    LACKS(page, "class=\"resume\"");
    /* the models: accepted children 2 (llm), 3 and 6 (template); 4 was a mismatch */
    HAS(page, "<td class=\"l\">llm</td><td class=\"l\">gpt-test</td><td>1</td><td>1</td>"
              "<td>33.3%</td>");
    HAS(page, "<td class=\"l\">template</td><td class=\"l\">-</td><td>3</td><td>2</td>"
              "<td>66.7%</td>");
    /* the anytime curves: the islands' bests and the best seed; not the cut line */
    HAS(page, "best seed 1.20x");
    HAS(page, "island 0 1.48x");
    HAS(page, "island 1 2.50x");
    LACKS(page, "9.87");
    /* verdicts: 6 complete results over 3600 s */
    HAS(page, "6 results over 1.00 h: 6.0 evaluations per hour.");
    HAS(page, "<td class=\"l\">mismatch</td><td>1</td>");
    /* GPU busy: the results' group time over 2 groups for 3600 s */
    double held = 0;
    for (size_t i = 0; i < N_FX; i++)
        held += group_s(i);
    snprintf(want, sizeof want, "GPU busy: %.0f%% (results held a GPU group %.2f h of 2.00 ",
             100 * held / (2 * 3600.0), held / 3600);
    HAS(page, want);
    /* the link ceiling: the lent machine's measured figure unless told another */
    HAS(page, "over the link's ceiling, 386 GB/s per direction (measured on 2 x H200");
    /* the lineage of #3: #1 > #2 > #3, each diff against its parent */
    const char *l1 = strstr(page, "id=\"lineage-allreduce\"");
    KV_REQUIRE(l1 != NULL);
    const char *a1 = strstr(l1, "href=\"#elite-1\""), *a2 = strstr(l1, "href=\"#elite-2\""),
               *a3 = strstr(l1, "href=\"#elite-3\"");
    KV_CHECK(a1 && a2 && a3 && a1 < a2 && a2 < a3);
    HAS(l1, "diff against #1");
    HAS(l1, "<span class=\"add\">+ // &lt;/script&gt;");
    HAS(l1, "<span class=\"del\">-     x[threadIdx.x] *= 2;</span>");
    free(page);

    /* a ceiling given by the caller is the one used, and said */
    kv_report_opts opts = {.link_gbps = 100};
    KV_REQUIRE(kv_report_write(dir, out, &opts, &err) == 0);
    KV_REQUIRE(kv_read_file_max(out, 64u << 20, &page, &len, &err) == 0);
    HAS(page, "over the link's ceiling, 100 GB/s per direction (given to kevo report");
    if (kv_problem_load(pdir, &def, &err) == 0) {
        int k = kv_problem_find_size(&def, "1MiB");
        kv_roofline rl;
        KV_REQUIRE(k >= 0 && kv_problem_roofline(&def, k, 2, &rl, &err) == 0);
        snprintf(want, sizeof want, "<td>%.0f%%</td></tr>",
                 100 * rl.send_bytes / (ref_us(1) / 2.5 * 1e3) / 100);
        HAS(page, want);
        kv_problem_free(&def);
    }
    free(page);

    /* what cannot be read is said */
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/none", dir);
    KV_CHECK(kv_report_write(missing, out, NULL, &err) == -1 && err.msg[0]);
}

/* A resumed run: two processes with hours between them, model calls with
 * tokens and cost. Process i's events at start[i] + off[k]; the last of
 * each (a stop, which the report does not parse) ends its span. */
static const double start_t[2] = {1000.0, 1000.0 + 800.0 + 36000.0};
static const double span_t[2] = {800.0, 600.0};
static const struct {
    int proc;
    double off;
    int evaluations; /* > 0: a result */
    int tokens_in, tokens_out;
    double cost; /* an llm event when tokens_in > 0 */
} resumed[] = {
    {0, 100, 0, 300, 200, 0.5},   {0, 200, 1, 0, 0, 0}, {0, 600, 2, 0, 0, 0},
    {1, 100, 0, 1000, 500, 1.25}, {1, 400, 3, 0, 0, 0},
};
#define N_RESUMED (sizeof resumed / sizeof resumed[0])

static int write_resumed_events(const char *dir)
{
    char path[4096];
    if (kv_path_join(path, sizeof path, dir, "events.jsonl", NULL) != 0)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (int p = 0; p < 2; p++) {
        /* as kevo run writes them: a resuming process requeues the work in
         * flight at the stop before its `resume` event (search/resume.c) */
        for (int q = 0; p && q < 3; q++)
            fprintf(f,
                    "{\"t\":%.3f,\"type\":\"requeue\",\"evaluations\":3,"
                    "\"problem\":\"allreduce\",\"program\":%d,\"stage\":\"full\"}\n",
                    start_t[p] - 0.004 + 0.001 * q, q + 1);
        fprintf(f,
                "{\"t\":%.1f,\"type\":\"%s\",\"evaluations\":0,\"groups\":1,"
                "\"wall_s\":%.1f}\n",
                start_t[p], p ? "resume" : "start", p ? span_t[0] : 0);
        for (size_t i = 0; i < N_RESUMED; i++) {
            if (resumed[i].proc != p)
                continue;
            double t = start_t[p] + resumed[i].off;
            if (resumed[i].tokens_in)
                fprintf(f,
                        "{\"t\":%.1f,\"type\":\"llm\",\"evaluations\":0,"
                        "\"problem\":\"allreduce\",\"model\":\"gpt-test\",\"ok\":true,"
                        "\"tokens_in\":%d,\"tokens_out\":%d,\"cost_usd\":%g}\n",
                        t, resumed[i].tokens_in, resumed[i].tokens_out, resumed[i].cost);
            else
                fprintf(f,
                        "{\"t\":%.1f,\"type\":\"result\",\"evaluations\":%d,"
                        "\"problem\":\"allreduce\",\"program\":%d,\"island\":0,"
                        "\"stage\":\"full\",\"verdict\":\"ok\",\"speedup\":%d}\n",
                        t, resumed[i].evaluations, resumed[i].evaluations, resumed[i].evaluations);
        }
        fprintf(f, "{\"t\":%.1f,\"type\":\"stop\",\"evaluations\":3,\"reason\":\"x\"}\n",
                start_t[p] + span_t[p]);
    }
    return fclose(f);
}

static int near(double a, double b)
{
    return a - b < 1e-3 && b - a < 1e-3;
}

static void test_resumed(void)
{
    char dir[4096], out[4200];
    kv_test_fresh_dir(dir, sizeof dir, "report-resumed");
    kv_err err = {{0}};
    KV_REQUIRE(build_run(dir, &err) == 0 || (fprintf(stderr, "%s\n", err.msg), 0));
    KV_REQUIRE(write_resumed_events(dir) == 0);
    snprintf(out, sizeof out, "%s/page.html", dir);
    KV_REQUIRE(kv_report_write(dir, out, NULL, &err) == 0 || (fprintf(stderr, "%s\n", err.msg), 0));
    char *page = NULL;
    size_t len = 0;
    KV_REQUIRE(kv_read_file_max(out, 64u << 20, &page, &len, &err) == 0);
    HAS(page, "id=\"budgets\"");
    LACKS(page, "No LLM calls");

    /* what each series should hold: active time (the gap left out), spent */
    double wx[3][8], wy[3][8]; /* evaluations, llm_tokens, cost_usd */
    int wn[3] = {0, 1, 1};
    wx[1][0] = wy[1][0] = wx[2][0] = wy[2][0] = 0;
    double tokens = 0, cost = 0;
    for (size_t i = 0; i < N_RESUMED; i++) {
        double at = (resumed[i].proc ? span_t[0] : 0) + resumed[i].off;
        if (resumed[i].tokens_in) {
            tokens += resumed[i].tokens_in + resumed[i].tokens_out;
            cost += resumed[i].cost;
            wx[1][wn[1]] = wx[2][wn[2]] = at;
            wy[1][wn[1]++] = tokens;
            wy[2][wn[2]++] = cost;
        } else {
            wx[0][wn[0]] = at;
            wy[0][wn[0]++] = resumed[i].evaluations;
        }
    }
    const char *names[] = {"evaluations", "llm_tokens", "cost_usd"};
    double active = span_t[0] + span_t[1];
    for (int k = 0; k < 3; k++) {
        double x[16], y[16];
        int n = series_of(page, names[k], x, y, 16);
        KV_CHECKF(n == wn[k], "%s: %d points, want %d", names[k], n, wn[k]);
        for (int i = 0; i < n && i < wn[k]; i++) {
            KV_CHECKF(x[i] <= active,
                      "%s: point %d at %g s, past the active %g s (the gap "
                      "is on the axis)",
                      names[k], i, x[i], active);
            KV_CHECKF(near(x[i], wx[k][i]) && near(y[i], wy[k][i]),
                      "%s: point %d is %g,%g, want %g,%g", names[k], i, x[i], y[i], wx[k][i],
                      wy[k][i]);
        }
    }
    /* evaluations and tokens have limits (100, 5000): one chart in percent;
     * the cost has none: its own chart, in USD */
    HAS(page, "<title>budgets spent against wall time</title>");
    HAS(page, "<title>LLM cost (USD) spent against wall time (no limit)</title>");
    char want[96];
    snprintf(want, sizeof want, "tokens %.0f%%</text>", 100 * tokens / 5000);
    HAS(page, want);
    /* every wall-time axis: active minutes, a mark at the resume */
    KV_CHECKF(near(xmax_of(page, "budgets spent against wall time"), active / 60),
              "budget chart's axis to %g", xmax_of(page, "budgets spent against wall time"));
    KV_CHECKF(near(xmax_of(page, "verdicts over time"), active / 60), "verdicts' axis to %g",
              xmax_of(page, "verdicts over time"));
    double last = span_t[0] + resumed[N_RESUMED - 1].off; /* the last result */
    KV_CHECKF(near(xmax_of(page, "best speedup against wall time"), last / 60),
              "anytime axis to %g", xmax_of(page, "best speedup against wall time"));
    snprintf(want, sizeof want, "class=\"resume\" data-t=\"%.1f\"", span_t[0]);
    HAS(page, want);
    snprintf(want, sizeof want, "%zu results over %.2f h", (size_t)wn[0], active / 3600);
    HAS(page, want); /* per hour of active time */
    free(page);
}

/* kevo report --run DIR writes DIR/report.html */
static void test_command(void)
{
    const char *bin = getenv("KEVO_BIN");
    if (!bin) {
        printf("skipped: no KEVO_BIN\n");
        return;
    }
    char dir[4096];
    kv_test_fresh_dir(dir, sizeof dir, "report-cli");
    kv_err err = {{0}};
    KV_REQUIRE(build_run(dir, &err) == 0);
    const char *argv[] = {bin, "report", "--run", dir, NULL};
    char log[4200], page[4200];
    snprintf(log, sizeof log, "%s/out.txt", dir);
    KV_CHECK(kv_test_spawn(argv, log, NULL, 60) == 0);
    snprintf(page, sizeof page, "%s/report.html", dir);
    char *text = NULL;
    size_t len;
    KV_REQUIRE(kv_read_file_max(page, 64u << 20, &text, &len, &err) == 0);
    HAS(text, "id=\"grid-allreduce\"");
    HAS(text, "No events.jsonl");
    free(text);
    const char *bad[] = {bin, "report", "--bogus", NULL};
    KV_CHECK(kv_test_spawn(bad, NULL, NULL, 60) == 2);
    const char *bad_link[] = {bin, "report", "--run", dir, "--link-gbps", "fast", NULL};
    KV_CHECK(kv_test_spawn(bad_link, NULL, NULL, 60) == 2);
    const char *link[] = {bin, "report", "--run", dir, "--link-gbps=250", NULL};
    KV_CHECK(kv_test_spawn(link, log, NULL, 60) == 0);
    KV_REQUIRE(kv_read_file_max(page, 64u << 20, &text, &len, &err) == 0);
    HAS(text, "250 GB/s per direction (given to kevo report");
    free(text);
}

int main(void)
{
    KV_RUN(test_page);
    KV_RUN(test_resumed);
    KV_RUN(test_command);
    return kv_test_summary();
}
