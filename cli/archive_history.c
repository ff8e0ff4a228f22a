/* archive_history.c — kevo archive history: the best speedup over time, per
 * problem and size and of the geometric mean over the sizes, read from the
 * run's events.jsonl (report/history.c finds the steps; this file prints
 * them). */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "archive_cmd.h"
#include "common/fsutil.h"
#include "common/text.h"
#include "report/history.h"

const char kv_view_history_usage[] =
    "usage: kevo archive history [--run DIR] [--problem P] [--json]\n"
    "\n"
    "The best speedup over time, from DIR/events.jsonl: a row each time the best\n"
    "of a problem at a size, or of its geometric mean over the sizes (size\n"
    "\"geomean\"), or its best seed there, grows. Columns: time_s (seconds since the\n"
    "run's first start), evaluations (of the run so far), problem, size, best (the\n"
    "best speedup so far of a result an island took as an elite), program (its id),\n"
    "seed (the best correct seed so far: the reference line). Sizes come from the\n"
    "results' per-size speedups (events of an older kevo have none: geomean rows\n"
    "only). --json: an array of those rows as objects.\n";

/* One step as a JSON object (a member of rows); -1 when out of memory. */
static int add_row(cJSON *rows, const kv_history_row *s)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    if (!cJSON_AddItemToArray(rows, r)) {
        cJSON_Delete(r);
        return -1;
    }
    return cJSON_AddNumberToObject(r, "time_s", s->time_s) &&
                   cJSON_AddNumberToObject(r, "evaluations", s->evaluations) &&
                   cJSON_AddStringToObject(r, "problem", s->problem) &&
                   cJSON_AddStringToObject(r, "size", s->size) &&
                   cJSON_AddNumberToObject(r, "best", s->best) &&
                   (s->program ? cJSON_AddNumberToObject(r, "program", (double)s->program)
                               : cJSON_AddNullToObject(r, "program")) &&
                   cJSON_AddNumberToObject(r, "seed", s->seed)
               ? 0
               : -1;
}

static void print_row(const kv_history_row *s, int first)
{
    char problem[4 * KV_NAME_MAX], size[4 * KV_NAME_MAX], prog[32];
    if (first)
        printf("%9s %11s  %-16s %-12s %9s %9s %9s\n", "time_s", "evaluations", "problem", "size",
               "best", "program", "seed");
    if (s->program)
        snprintf(prog, sizeof prog, "#%" PRIu64, s->program);
    else
        snprintf(prog, sizeof prog, "-");
    printf("%9.1f %11.0f  %-16s %-12s %8.3fx %9s %8.3fx\n", s->time_s, s->evaluations,
           KV_TERM(problem, s->problem), KV_TERM(size, s->size), s->best, prog, s->seed);
}

int kv_view_history(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    if (o->problem && require_problem(s, o->problem, err) != 0)
        return -1;
    char path[PATH_MAX];
    if (kv_path_join(path, sizeof path, o->run_dir, "events.jsonl", err) != 0)
        return -1;
    kv_report_history h;
    if (kv_report_history_load(path, o->problem, &h, err) != 0)
        return -1;
    if (o->json) {
        cJSON *rows = cJSON_CreateArray();
        for (size_t i = 0; rows && i < h.n; i++)
            if (add_row(rows, &h.v[i]) != 0) {
                cJSON_Delete(rows);
                rows = NULL;
            }
        kv_report_history_free(&h);
        return rows ? kv_cli_print_json(rows, err) : kv_err_set(err, "out of memory");
    }
    for (size_t i = 0; i < h.n; i++)
        print_row(&h.v[i], i == 0);
    if (h.n == 0)
        printf("no result an island took yet in %s\n", path);
    kv_report_history_free(&h);
    return 0;
}
