/* html.c — PLACEHOLDER report (see html.h): the section ids of the real page
 * and, per problem, its program count and elites; to be replaced at merge. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "archive/archive.h"
#include "common/fsutil.h"
#include "report/html.h"

typedef struct {
    FILE *f;
    kv_txn *t;
    uint64_t shown[256]; /* the elites of the problem listed so far (ids are unique) */
    int n_shown;
} page;

static int elite(const kv_elite *e, void *ctx, kv_err *err)
{
    (void)err;
    page *pg = ctx;
    for (int i = 0; i < pg->n_shown; i++)
        if (pg->shown[i] == e->program_id)
            return 0;
    if (pg->n_shown < (int)(sizeof pg->shown / sizeof pg->shown[0]))
        pg->shown[pg->n_shown++] = e->program_id;
    fprintf(pg->f, "<li id=\"elite-%" PRIu64 "\">#%" PRIu64 " island %d cell %s</li>\n",
            e->program_id, e->program_id, (int)e->island, e->cell);
    return 0;
}

static int problem(const kv_problem_stats *s, void *ctx, kv_err *err)
{
    page *pg = ctx;
    FILE *f = pg->f;
    const char *n = s->problem; /* problem names are [a-z0-9_] (problem/load.c) */
    fprintf(f, "<section id=\"problem-%s\"><h2>%s</h2><p>%" PRIu64 " programs</p>\n", n, n,
            s->programs);
    const char *parts[] = {"grid", "sizes", "anytime", "lineage"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        fprintf(f, "<div id=\"%s-%s\"></div>\n", parts[i], n);
    fputs("<ul>\n", f);
    pg->n_shown = 0;
    int rc = kv_each_elite(pg->t, n, -1, elite, pg, err);
    fputs("</ul></section>\n", f);
    return rc;
}

int kv_report_write(const char *run_dir, const char *out_path, kv_err *err)
{
    kv_archive_opts ao = {.readonly = 1};
    kv_archive *a = NULL;
    kv_atomic_file af = {0};
    page pg = {0};
    if (kv_archive_open(run_dir, &ao, &a, err) != 0)
        return -1;
    int rc = kv_read_begin(a, &pg.t, err);
    if (rc == 0)
        rc = kv_atomic_open(&af, out_path, err);
    if (rc == 0) {
        pg.f = af.f;
        fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kevo report</title>"
              "</head><body>\n<section id=\"run\"><h1>kevo run</h1></section>\n"
              "<section id=\"models\"></section>\n<section id=\"verdicts\"></section>\n",
              af.f);
        rc = kv_each_problem(pg.t, problem, &pg, err);
        fputs("</body></html>\n", af.f);
        rc = rc == 0 ? kv_atomic_commit(&af, err) : (kv_atomic_abandon(&af), -1);
    }
    kv_txn_abort(pg.t);
    kv_archive_close(a);
    return rc == 0 ? 0 : -1;
}
