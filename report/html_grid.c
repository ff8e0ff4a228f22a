/* html_grid.c — a problem's behaviour grids (id="grid-<problem>"): one per
 * island and the merged one, rows the transports, columns the fusions, each
 * cell coloured by its elite's speedup and linked to its source. */
#include "html_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/cell.h"

typedef struct {
    uint64_t id; /* 0: empty */
    double fitness;
    double speedup;
    int32_t island;
} grid_cell;

typedef struct {
    grid_cell (*islands)[KV_CELL_COUNT];
    int n_islands;
    grid_cell merged[KV_CELL_COUNT];
} grids;

static void offer(grid_cell *c, const kv_elite *e)
{
    if (c->id == 0 || e->fitness > c->fitness ||
        (e->fitness == c->fitness && e->program_id < c->id)) {
        c->id = e->program_id;
        c->fitness = e->fitness;
        c->island = e->island;
    }
}

static int collect(const kv_elite *e, void *ctx, kv_err *err)
{
    grids *g = ctx;
    int cell = kv_cell_parse(e->cell);
    if (cell < 0 || e->island < 0 || e->island > 4096)
        return 0; /* not one of the grid's cells */
    if (e->island >= g->n_islands) {
        int n = e->island + 1;
        grid_cell(*v)[KV_CELL_COUNT] = realloc(g->islands, (size_t)n * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        memset(v + g->n_islands, 0, (size_t)(n - g->n_islands) * sizeof *v);
        g->islands = v;
        g->n_islands = n;
    }
    offer(&g->islands[e->island][cell], e);
    offer(&g->merged[cell], e);
    return 0;
}

static int fill_speedup(kv_rp *r, grid_cell *c, kv_err *err)
{
    if (c->id == 0)
        return 0;
    kv_program p;
    int got = kv_get_program(r->t, c->id, &p, err);
    if (got == KV_FAIL)
        return -1;
    c->speedup = got == KV_OK ? p.speedup : 0;
    kv_program_clear(&p);
    if (kv_rp_ids_add(&r->shown, c->id) != 0)
        return kv_err_set(err, "out of memory");
    return 0;
}

static void write_grid(FILE *f, const char *title, const grid_cell *cells)
{
    fprintf(f, "<table class=\"grid\"><caption>%s</caption><tr><th></th>", title);
    for (int x = 0; x < KV_FUSION_COUNT; x++)
        fprintf(f, "<th>%s</th>", kv_fusion_name((kv_fusion)x));
    fputs("</tr>\n", f);
    for (int y = 0; y < KV_TRANSPORT_COUNT; y++) {
        fprintf(f, "<tr><th>%s</th>", kv_transport_name((kv_transport)y));
        for (int x = 0; x < KV_FUSION_COUNT; x++) {
            const grid_cell *c = &cells[kv_cell_index((kv_transport)y, (kv_fusion)x)];
            if (c->id == 0) {
                fputs("<td class=\"sn\">&#183;</td>", f);
                continue;
            }
            fprintf(f, "<td class=\"%s\"><a href=\"#elite-%llu\">", kv_rp_speedup_class(c->speedup),
                    (unsigned long long)c->id);
            if (c->speedup > 0)
                fprintf(f, "%.2fx", c->speedup);
            else
                fputs("-", f);
            fprintf(f, " #%llu</a></td>", (unsigned long long)c->id);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

int kv_rp_grid(kv_rp *r, const char *problem, kv_err *err)
{
    FILE *f = r->f;
    grids g;
    memset(&g, 0, sizeof g);
    int rc = -1;
    if (kv_each_elite(r->t, problem, -1, collect, &g, err) != 0)
        goto done;
    for (int c = 0; c < KV_CELL_COUNT; c++) {
        if (fill_speedup(r, &g.merged[c], err) != 0)
            goto done;
        for (int i = 0; i < g.n_islands; i++) {
            if (g.islands[i][c].id == g.merged[c].id)
                g.islands[i][c].speedup = g.merged[c].speedup;
            else if (fill_speedup(r, &g.islands[i][c], err) != 0)
                goto done;
        }
    }
    fputs("<section id=\"grid-", f);
    kv_html_str(f, problem);
    fputs("\">\n<h3>Behaviour grid</h3>\n", f);
    kv_rp_speedup_legend(f);
    fputs("<div class=\"grids\">\n", f);
    write_grid(f, "merged", g.merged);
    for (int i = 0; i < g.n_islands; i++) {
        char title[32];
        snprintf(title, sizeof title, "island %d", i);
        write_grid(f, title, g.islands[i]);
    }
    fputs("</div>\n</section>\n", f);
    rc = 0;
done:
    free(g.islands);
    return rc;
}
