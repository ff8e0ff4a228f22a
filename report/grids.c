/* grids.c — a problem's behaviour grids read from the archive: one per
 * island and the merged one (views.h). */
#include "report/views.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int collect_elite(const kv_elite *e, void *ctx, kv_err *err)
{
    kv_problem_grids *g = ctx;
    /* elites come sorted by island: a new island starts a new grid */
    if (g->n == 0 || g->v[g->n - 1].island != e->island) {
        if (g->n == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 8;
            kv_island_grid *v = realloc(g->v, cap * sizeof *v);
            if (!v)
                return kv_err_set(err, "out of memory");
            g->v = v;
            g->cap = cap;
        }
        g->v[g->n].island = e->island;
        kv_grid_init(&g->v[g->n].grid);
        g->n++;
    }
    kv_grid_offer(&g->v[g->n - 1].grid, e);
    return 0;
}

void kv_problem_grids_free(kv_problem_grids *g)
{
    free(g->v);
    memset(g, 0, sizeof *g);
}

int kv_problem_grids_load(kv_txn *t, const char *problem, int speedups, kv_problem_grids *g,
                          kv_err *err)
{
    memset(g, 0, sizeof *g);
    kv_grid_init(&g->merged);
    if (kv_each_elite(t, problem, -1, collect_elite, g, err) != 0) {
        kv_problem_grids_free(g);
        return -1;
    }
    for (size_t i = 0; i < g->n; i++)
        kv_grid_merge(&g->merged, &g->v[i].grid);
    if (!speedups)
        return 0;
    for (size_t i = 0; i < g->n; i++) {
        for (int c = 0; c < KV_CELL_COUNT; c++) {
            kv_grid_cell *cell = &g->v[i].grid.cell[c];
            if (!cell->occupied || !isnan(cell->speedup))
                continue; /* empty, or already filled from another grid */
            kv_program p;
            int rc = kv_get_program(t, cell->program_id, &p, err);
            if (rc < 0) {
                kv_problem_grids_free(g);
                return -1;
            }
            if (rc == KV_NOTFOUND) /* an elite without its program: show its fitness */
                continue;
            for (size_t j = 0; j < g->n; j++)
                kv_grid_set_program(&g->v[j].grid, &p);
            kv_grid_set_program(&g->merged, &p);
            kv_program_clear(&p);
        }
    }
    return 0;
}
