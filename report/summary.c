/* summary.c — one summary per problem of an archive: its counts, its best
 * program, and the coverage and QD score of its merged grid (views.h). */
#include "report/views.h"

#include <stdlib.h>
#include <string.h>

#include "report/snapshot.h"

static int summarize(kv_txn *t, const kv_problem_stats *st, kv_problem_summary *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    out->st = *st;
    int n = kv_top_k(t, st->problem, 1, &out->best_id, &out->best, err);
    if (n < 0)
        return -1;
    out->has_best = n > 0;
    kv_problem_grids g;
    if (kv_problem_grids_load(t, st->problem, 0, &g, err) != 0)
        return -1;
    out->coverage = kv_grid_coverage(&g.merged);
    out->qd = kv_grid_qd_score(&g.merged);
    kv_problem_grids_free(&g);
    return 0;
}

int kv_problem_summaries_load(kv_txn *t, kv_problem_summary **out, size_t *n, kv_err *err)
{
    kv_report_problems l;
    *out = NULL;
    *n = 0;
    if (kv_report_problems_load(t, &l, err) != 0)
        return -1;
    kv_problem_summary *v = calloc(l.n ? l.n : 1, sizeof *v);
    if (!v) {
        free(l.v);
        return kv_err_set(err, "out of memory");
    }
    for (size_t i = 0; i < l.n; i++) {
        if (summarize(t, &l.v[i], &v[i], err) != 0) {
            free(v);
            free(l.v);
            return -1;
        }
    }
    free(l.v);
    *out = v;
    *n = l.n;
    return 0;
}
