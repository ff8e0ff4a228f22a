/* archive_list.c — kevo archive list and stats: one summary per problem
 * (programs, attempts, best, coverage, QD score), and the archive's
 * counters. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "archive_cmd.h"
#include "common/cell.h"

const char kv_view_list_usage[] =
    "usage: kevo archive list [--run DIR] [--json]\n"
    "\n"
    "One line per problem: programs, attempts, ok attempts, the best program\n"
    "(speedup and id) and coverage (occupied cells of the grid merged over islands,\n"
    "out of 8). --json prints {\"archive\", \"problems\": [{\"problem\", \"programs\",\n"
    "\"attempts\", \"ok\", \"best\": {\"program\", \"speedup\"} or null, \"coverage\",\n"
    "\"cells\"}]}.\n";

/* ---- list ------------------------------------------------------------------------------ */

static cJSON *summary_to_json(const kv_problem_summary *s, int with_qd)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int ok = cJSON_AddStringToObject(o, "problem", s->st.problem) &&
             cJSON_AddNumberToObject(o, "programs", (double)s->st.programs) &&
             cJSON_AddNumberToObject(o, "attempts", (double)s->st.attempts) &&
             cJSON_AddNumberToObject(o, "ok", (double)s->st.ok);
    if (ok && s->has_best) {
        cJSON *b = cJSON_AddObjectToObject(o, "best");
        ok = b && cJSON_AddNumberToObject(b, "program", (double)s->best_id) &&
             cJSON_AddNumberToObject(b, "speedup", s->best);
    } else if (ok) {
        ok = cJSON_AddNullToObject(o, "best") != NULL;
    }
    ok = ok && cJSON_AddNumberToObject(o, "coverage", s->coverage) &&
         cJSON_AddNumberToObject(o, "cells", KV_CELL_COUNT) &&
         (!with_qd || cJSON_AddNumberToObject(o, "qd_score", s->qd));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static void fmt_best(const kv_problem_summary *s, char *out, size_t cap)
{
    if (!s->has_best) {
        snprintf(out, cap, "-");
        return;
    }
    char sp[32];
    kv_fmt_speedup(s->best, sp, sizeof sp);
    snprintf(out, cap, "%s #%" PRIu64, sp, s->best_id);
}

int kv_view_list(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    kv_problem_summary *sum;
    size_t n;
    if (kv_problem_summaries_load(s->t, &sum, &n, err) != 0)
        return -1;
    int rc = 0;
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        int ok = root && cJSON_AddStringToObject(root, "archive", kv_archive_path(s->a));
        cJSON *arr = ok ? cJSON_AddArrayToObject(root, "problems") : NULL;
        ok = arr != NULL;
        for (size_t i = 0; ok && i < n; i++) {
            cJSON *p = summary_to_json(&sum[i], 0);
            ok = p && cJSON_AddItemToArray(arr, p);
        }
        if (!ok) {
            cJSON_Delete(root);
            root = NULL;
        }
        rc = kv_cli_print_json(root, err);
    } else if (n == 0) {
        printf("no problems yet in %s\n", kv_archive_path(s->a));
    } else {
        printf("%-24s %10s %10s %10s  %-18s %s\n", "problem", "programs", "attempts", "ok", "best",
               "coverage");
        for (size_t i = 0; i < n; i++) {
            char best[64];
            fmt_best(&sum[i], best, sizeof best);
            char problem[4 * KV_NAME_MAX];
            printf("%-24s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "  %-18s %d/%d\n",
                   KV_TERM(problem, sum[i].st.problem), sum[i].st.programs, sum[i].st.attempts,
                   sum[i].st.ok, best, sum[i].coverage, KV_CELL_COUNT);
        }
    }
    free(sum);
    return rc;
}

const char kv_view_stats_usage[] =
    "usage: kevo archive stats [--run DIR] [--json]\n"
    "\n"
    "Counters (programs, attempts, elites), attempts by verdict, and per problem the\n"
    "coverage of the merged grid, its QD score (sum over occupied cells of the best\n"
    "fitness) and the best speedup; then the total QD score over problems.\n";

/* ---- stats ----------------------------------------------------------------------------- */

static cJSON *stats_json(const kv_report_snapshot *s, const kv_counters *c, const kv_run_state *st,
                         int has_state, const kv_problem_summary *sum, size_t n, double total)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    int ok = cJSON_AddStringToObject(root, "archive", kv_archive_path(s->a)) &&
             cJSON_AddNumberToObject(root, "programs", (double)c->programs) &&
             cJSON_AddNumberToObject(root, "attempts", (double)c->attempts) &&
             cJSON_AddNumberToObject(root, "elites", (double)c->elites);
    cJSON *by = ok ? cJSON_AddObjectToObject(root, "attempts_by_verdict") : NULL;
    ok = by != NULL;
    for (int i = 0; ok && i < KV_VERDICT_COUNT; i++)
        ok = cJSON_AddNumberToObject(by, kv_verdict_name(i), (double)c->attempts_by_verdict[i]) !=
             NULL;
    cJSON *arr = ok ? cJSON_AddArrayToObject(root, "problems") : NULL;
    ok = arr != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *p = summary_to_json(&sum[i], 1);
        ok = p && cJSON_AddItemToArray(arr, p);
    }
    ok = ok && cJSON_AddNumberToObject(root, "qd_score", total);
    if (ok && has_state) {
        char updated[32];
        snprintf(updated, sizeof updated, "%" PRId64, st->updated_ns);
        cJSON *so = cJSON_AddObjectToObject(root, "state");
        ok = so && cJSON_AddNumberToObject(so, "evaluations", (double)st->evaluations) &&
             cJSON_AddNumberToObject(so, "wall_s", st->wall_s) &&
             cJSON_AddNumberToObject(so, "tokens_in", (double)st->tokens_in) &&
             cJSON_AddNumberToObject(so, "tokens_out", (double)st->tokens_out) &&
             cJSON_AddNumberToObject(so, "cost_usd", st->cost_usd) &&
             cJSON_AddRawToObject(so, "updated_ns", updated) != NULL;
    } else if (ok) {
        ok = cJSON_AddNullToObject(root, "state") != NULL;
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static void stats_text(const kv_report_snapshot *s, const kv_counters *c, const kv_run_state *st,
                       int has_state, const kv_problem_summary *sum, size_t n, double total)
{
    printf("archive     %s\n", kv_archive_path(s->a));
    printf("programs    %" PRIu64 "\n", c->programs);
    printf("attempts    %" PRIu64 "\n", c->attempts);
    printf("elites      %" PRIu64 "\n", c->elites);
    if (has_state) {
        char when[64];
        kv_fmt_time(st->updated_ns, when, sizeof when);
        printf("spent       %" PRIu64 " evaluations, %.1f s, %" PRIu64 " tokens, $%.4f (at %s)\n",
               st->evaluations, st->wall_s, st->tokens_in + st->tokens_out, st->cost_usd, when);
    }
    printf("\nattempts by verdict\n");
    for (int i = 0; i < KV_VERDICT_COUNT; i++)
        printf("  %-16s %10" PRIu64 "\n", kv_verdict_name(i), c->attempts_by_verdict[i]);
    printf("\n%-24s %9s %12s  %s\n", "problem", "coverage", "QD score", "best");
    for (size_t i = 0; i < n; i++) {
        char best[64], cov[32];
        fmt_best(&sum[i], best, sizeof best);
        snprintf(cov, sizeof cov, "%d/%d", sum[i].coverage, KV_CELL_COUNT);
        char problem[4 * KV_NAME_MAX];
        printf("%-24s %9s %12.4f  %s\n", KV_TERM(problem, sum[i].st.problem), cov, sum[i].qd, best);
    }
    printf("%-24s %9s %12.4f\n", "total", "", total);
}

int kv_view_stats(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    kv_counters c;
    kv_run_state st;
    kv_problem_summary *sum = NULL;
    size_t n = 0;
    int has_state = 0;
    int rc = kv_get_counters(s->t, &c, err);
    if (rc == 0) {
        rc = kv_get_state(s->t, &st, err);
        has_state = rc == 0;
        rc = rc == KV_NOTFOUND ? 0 : rc;
    }
    if (rc == 0)
        rc = kv_problem_summaries_load(s->t, &sum, &n, err);
    if (rc != 0)
        return -1;
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += sum[i].qd;
    if (o->json)
        rc = kv_cli_print_json(stats_json(s, &c, &st, has_state, sum, n, total), err);
    else
        stats_text(s, &c, &st, has_state, sum, n, total);
    free(sum);
    return rc;
}
