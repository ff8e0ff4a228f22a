/* archive_sizes.c — kevo archive best --per-size: a problem's best correct
 * program at each size (the archive's per-size ranking), with its speedup,
 * times and cell. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "archive_cmd.h"
#include "common/text.h"
#include "eval_setup.h"
#include "report/size_best.h"

static cJSON *sizes_json(const char *problem, const kv_report_size_bests *b)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddStringToObject(root, "problem", problem);
    cJSON *arr = ok ? cJSON_AddArrayToObject(root, "sizes") : NULL;
    ok = arr != NULL;
    for (size_t i = 0; ok && i < b->n; i++) {
        const kv_size_best *s = &b->v[i];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o) && cJSON_AddStringToObject(o, "size", s->size) &&
             cJSON_AddNumberToObject(o, "program", (double)s->program_id) &&
             cJSON_AddNumberToObject(o, "speedup", s->speedup) &&
             cJSON_AddNumberToObject(o, "candidate_us", s->cand_us) &&
             cJSON_AddNumberToObject(o, "reference_us", s->ref_us) &&
             cJSON_AddStringToObject(o, "timing", kv_size_timing_name(s->timing)) &&
             cJSON_AddStringToObject(o, "cell", s->cell);
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static void sizes_text(const char *problem, const kv_report_size_bests *b)
{
    char shown[4 * KV_NAME_MAX], name[4 * KV_NAME_MAX], cell[4 * KV_NAME_MAX];
    printf("%s: the best correct program at each size (full protocol; speedup = reference time "
           "/ candidate time, one run; graph-timed results before call-timed ones)\n",
           KV_TERM(shown, problem));
    printf("%-14s %9s %9s %14s %14s %-7s  %s\n", "size", "program", "speedup", "candidate us",
           "reference us", "timing", "cell");
    for (size_t i = 0; i < b->n; i++) {
        const kv_size_best *s = &b->v[i];
        char id[32], sp[32];
        snprintf(id, sizeof id, "#%" PRIu64, s->program_id);
        kv_fmt_speedup(s->speedup, sp, sizeof sp);
        printf("%-14s %9s %9s %14.3f %14.3f %-7s  %s\n", KV_TERM(name, s->size), id, sp, s->cand_us,
               s->ref_us, kv_size_timing_name(s->timing),
               s->cell[0] ? KV_TERM(cell, s->cell) : "-");
    }
}

int kv_view_best_sizes(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    const char *problem = o->pos[0];
    if (require_problem(s, problem, err) != 0)
        return -1;
    /* the problem's own order of sizes when its definition is at hand; by name otherwise */
    kv_problem def;
    kv_err ignored = {{0}};
    int have_def = kv_cli_load_problem(problem, &def, &ignored) == 0;
    kv_report_size_bests b;
    int rc = kv_report_size_bests_load(s->t, problem, have_def ? &def : NULL, &b, err);
    if (have_def)
        kv_problem_free(&def);
    if (rc != 0)
        return -1;
    if (b.n == 0)
        rc = kv_err_set(err,
                        "problem '%s' has no correct program measured with the full "
                        "protocol in %s",
                        problem, kv_archive_path(s->a));
    else if (o->json)
        rc = kv_cli_print_json(sizes_json(problem, &b), err);
    else
        sizes_text(problem, &b);
    kv_report_size_bests_free(&b);
    return rc;
}
