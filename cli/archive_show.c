/* archive_show.c — kevo archive show and best: a problem's behaviour grids,
 * and the source of its best program. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "archive_cmd.h"
#include "archive_print.h"
#include "common/cell.h"
#include "common/clock.h"
#include "common/fsutil.h"

const char kv_view_show_usage[] =
    "usage: kevo archive show PROBLEM [--run DIR] [--island N] [--json]\n"
    "\n"
    "The MAP-Elites grids of a problem: rows are transports (ce, sm, tma, nvls),\n"
    "columns fusion (fused, unfused); each cell shows the elite's speedup and\n"
    "program id (\"2.31x #142\"), '-' (or '\xc2\xb7' on a UTF-8 terminal) when empty. One\n"
    "grid per island, then the grid merged over islands (best fitness per cell),\n"
    "with coverage and QD score (sum of the elites' fitness). --island N shows\n"
    "that island only. --json gives the same data: {\"problem\", \"cells\",\n"
    "\"islands\": [{\"island\", \"coverage\", \"qd_score\", \"grid\"}], \"merged\"}.\n";

/* ---- show ---------------------------------------------------------------------------- */

static cJSON *grid_section(const kv_grid *g, int32_t island, int is_merged)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *grid = kv_grid_to_json(g, is_merged);
    if (!o || !grid) {
        cJSON_Delete(o);
        cJSON_Delete(grid);
        return NULL;
    }
    int ok = (is_merged || cJSON_AddNumberToObject(o, "island", island)) &&
             cJSON_AddNumberToObject(o, "coverage", kv_grid_coverage(g)) &&
             cJSON_AddNumberToObject(o, "qd_score", kv_grid_qd_score(g));
    if (!ok || !cJSON_AddItemToObject(o, "grid", grid)) {
        cJSON_Delete(grid);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *show_json(const char *problem, const kv_problem_grids *g, const kv_island_grid *only,
                        int one_island)
{
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddStringToObject(root, "problem", problem);
    cJSON *cells = ok ? cJSON_AddArrayToObject(root, "cells") : NULL;
    cJSON *islands = cells ? cJSON_AddArrayToObject(root, "islands") : NULL;
    ok = islands != NULL;
    for (int i = 0; ok && i < KV_CELL_COUNT; i++) {
        char name[KV_CELL_NAME_MAX];
        kv_cell_name(i, name);
        cJSON *c = cJSON_CreateString(name);
        ok = c && cJSON_AddItemToArray(cells, c);
    }
    if (one_island) {
        cJSON *sec = ok ? grid_section(&only->grid, only->island, 0) : NULL;
        ok = sec && cJSON_AddItemToArray(islands, sec);
    } else {
        for (size_t i = 0; ok && i < g->n; i++) {
            cJSON *sec = grid_section(&g->v[i].grid, g->v[i].island, 0);
            ok = sec && cJSON_AddItemToArray(islands, sec);
        }
        cJSON *m = ok ? grid_section(&g->merged, 0, 1) : NULL;
        ok = m && cJSON_AddItemToObject(root, "merged", m);
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static void show_text(const char *problem, const kv_problem_grids *g, const kv_island_grid *only,
                      int one_island)
{
    const char *empty = kv_grid_empty_glyph(stdout);
    char shown[4 * KV_NAME_MAX];
    problem = KV_TERM(shown, problem);
    if (one_island) {
        const kv_grid *grid = &only->grid;
        printf("%s, island %d: coverage %d/%d, QD score %.4f\n\n", problem, (int)only->island,
               kv_grid_coverage(grid), KV_CELL_COUNT, kv_grid_qd_score(grid));
        kv_grid_print(stdout, grid, "  ", empty);
        if (kv_grid_coverage(grid) == 0) {
            printf("\nno elites on island %d; islands with elites:", (int)only->island);
            for (size_t i = 0; i < g->n; i++)
                printf("%s %d", i ? "," : "", (int)g->v[i].island);
            printf("%s\n", g->n ? "" : " none");
        }
        return;
    }
    printf("%s: %zu island%s, coverage %d/%d, QD score %.4f\n", problem, g->n, g->n == 1 ? "" : "s",
           kv_grid_coverage(&g->merged), KV_CELL_COUNT, kv_grid_qd_score(&g->merged));
    for (size_t i = 0; i < g->n; i++) {
        const kv_grid *grid = &g->v[i].grid;
        printf("\nisland %d: coverage %d/%d, QD score %.4f\n", (int)g->v[i].island,
               kv_grid_coverage(grid), KV_CELL_COUNT, kv_grid_qd_score(grid));
        kv_grid_print(stdout, grid, "  ", empty);
    }
    printf("\nmerged (best over islands): coverage %d/%d, QD score %.4f\n",
           kv_grid_coverage(&g->merged), KV_CELL_COUNT, kv_grid_qd_score(&g->merged));
    kv_grid_print(stdout, &g->merged, "  ", empty);
}

int kv_view_show(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    const char *problem = o->pos[0];
    kv_problem_grids g;
    if (require_problem(s, problem, err) != 0 ||
        kv_problem_grids_load(s->t, problem, 1, &g, err) != 0)
        return -1;
    kv_island_grid only = {.island = o->island};
    kv_grid_init(&only.grid);
    for (size_t i = 0; o->has_island && i < g.n; i++)
        if (g.v[i].island == o->island)
            only = g.v[i];
    int rc = 0;
    if (o->json)
        rc = kv_cli_print_json(show_json(problem, &g, &only, o->has_island), err);
    else
        show_text(problem, &g, &only, o->has_island);
    kv_problem_grids_free(&g);
    return rc;
}

const char kv_view_best_usage[] =
    "usage: kevo archive best PROBLEM [--run DIR] [--cell CELL] [--out FILE.cu]\n"
    "       kevo archive best PROBLEM --per-size [--run DIR] [--json]\n"
    "\n"
    "Prints the source of the problem's best ok program (highest speedup), or of\n"
    "the best elite of CELL over all islands (e.g. --cell tma/fused), after a\n"
    "comment header: problem, id, speedup and per-size times, cell and evidence,\n"
    "operator and model, parents, evaluation date. --out writes it to FILE\n"
    "instead of stdout: a regular file (or a link's target) is replaced\n"
    "atomically; a FIFO or a device is written through.\n"
    "\n"
    "--per-size lists the best correct program at each size instead: size,\n"
    "program id, speedup at that size (reference time / candidate time of one\n"
    "run), candidate and reference microseconds, cell. Only results measured with\n"
    "the full protocol count (not screening). --json prints {\"problem\", \"sizes\":\n"
    "[{\"size\", \"program\", \"speedup\", \"candidate_us\", \"reference_us\",\n"
    "\"cell\"}]}. PROBLEM may also be given as --problem PROBLEM.\n";

int kv_view_best_check(const view *v, view_opts *o)
{
    if (o->problem && o->n_pos == 1 && strcmp(o->problem, o->pos[0]) != 0)
        return kv_view_usage(v, "two problems: '%s' and --problem '%s'", o->pos[0], o->problem);
    if (o->problem && o->n_pos == 0)
        o->pos[o->n_pos++] = o->problem;
    if (o->n_pos == 0)
        return kv_view_usage(v, "missing PROBLEM");
    if (o->per_size && (o->cell >= 0 || o->out))
        return kv_view_usage(v, "--per-size lists sizes; it takes neither %s",
                             o->cell >= 0 ? "--cell" : "--out");
    if (o->json && !o->per_size)
        return kv_view_usage(v, "--json goes with --per-size (the best program is printed as "
                                "source)");
    return 0;
}

/* ---- best ---------------------------------------------------------------------------- */

/* The id of the best program: overall (ranking) or of one cell (merged grid). */
static int find_best(const kv_report_snapshot *s, const char *problem, int cell, uint64_t *id,
                     kv_err *err)
{
    if (cell < 0) {
        double sp;
        int n = kv_top_k(s->t, problem, 1, id, &sp, err);
        if (n < 0)
            return -1;
        if (n == 0)
            return kv_err_set(err, "problem '%s' has no ok program yet in %s", problem,
                              kv_archive_path(s->a));
        return 0;
    }
    kv_problem_grids g;
    if (kv_problem_grids_load(s->t, problem, 0, &g, err) != 0)
        return -1;
    const kv_grid_cell *c = &g.merged.cell[cell];
    int occupied = c->occupied;
    *id = c->program_id;
    char name[KV_CELL_NAME_MAX], occ[256];
    kv_cell_name(cell, name);
    size_t used = 0;
    occ[0] = 0;
    for (int i = 0; !occupied && i < KV_CELL_COUNT; i++) {
        if (!g.merged.cell[i].occupied)
            continue;
        char other[KV_CELL_NAME_MAX];
        kv_cell_name(i, other);
        int n = snprintf(occ + used, sizeof occ - used, "%s%s", used ? ", " : "", other);
        used += n > 0 ? (size_t)n : 0;
    }
    kv_problem_grids_free(&g);
    if (!occupied)
        return kv_err_set(err, "problem '%s' has no elite in cell %s in %s (occupied cells: %s)",
                          problem, name, kv_archive_path(s->a), used ? occ : "none");
    return 0;
}

/* Header + source, malloc'ed. */
static char *export_text(const kv_program *p, const char *src, size_t len, size_t *out_len)
{
    char now[64];
    kv_format_utc(kv_wall_ns(), now, sizeof now);
    char *header = kv_export_header(p, now);
    if (!header)
        return NULL;
    size_t hl = strlen(header);
    char *text = malloc(hl + len + 1);
    if (text) {
        memcpy(text, header, hl);
        memcpy(text + hl, src, len);
        text[hl + len] = 0;
        *out_len = hl + len;
    }
    free(header);
    return text;
}

int kv_view_best(const view_opts *o, const kv_report_snapshot *s, kv_err *err)
{
    if (o->per_size)
        return kv_view_best_sizes(o, s, err);
    const char *problem = o->pos[0];
    uint64_t id = 0;
    kv_program p;
    memset(&p, 0, sizeof p);
    char *src = NULL, *text = NULL;
    size_t len = 0, text_len = 0;
    int rc = require_problem(s, problem, err);
    if (rc == 0)
        rc = find_best(s, problem, o->cell, &id, err);
    if (rc == 0) {
        rc = kv_get_program(s->t, id, &p, err);
        if (rc == KV_NOTFOUND)
            rc = kv_err_set(err, "%s: elite program #%" PRIu64 " of '%s' is missing",
                            kv_archive_path(s->a), id, problem);
    }
    if (rc == 0) {
        rc = kv_get_source(s->t, p.id, &src, &len, err);
        if (rc == KV_NOTFOUND)
            rc = kv_err_set(err, "%s: the source of program #%" PRIu64 " is missing",
                            kv_archive_path(s->a), id);
    }
    if (rc == 0 && !(text = export_text(&p, src, len, &text_len)))
        rc = kv_err_set(err, "out of memory");
    if (rc == 0 && o->out) {
        rc = kv_write_output(o->out, text, text_len, err);
        if (rc == 0) {
            char sp[32];
            kv_fmt_speedup(p.speedup, sp, sizeof sp);
            char shown[4 * sizeof p.problem];
            printf("wrote %s: program #%" PRIu64 " of %s, %s\n", o->out, p.id,
                   KV_TERM(shown, p.problem), sp);
        }
    } else if (rc == 0 && isatty(STDOUT_FILENO) && !kv_text_is_inert(text, text_len)) {
        /* a terminal acts on no byte of a source; a pipe or --out gets it exactly */
        kv_text_fput(stdout, text, KV_TEXT_MULTI_LINE);
    } else if (rc == 0) {
        fwrite(text, 1, text_len, stdout);
    }
    free(text);
    free(src);
    kv_program_clear(&p);
    return rc;
}
