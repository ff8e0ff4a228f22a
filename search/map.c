/* map.c — islands of MAP-Elites grids and the search's choices on them. */
#include "search/map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kv_pick_name(kv_pick_kind k)
{
    static const char *const names[] = {"uniform", "fitness", "curiosity"};
    return k >= 0 && k <= KV_PICK_CURIOSITY ? names[k] : "unknown";
}

int kv_map_init(kv_map *g, int n_islands)
{
    g->n_islands = n_islands;
    g->islands = calloc((size_t)(n_islands > 0 ? n_islands : 1), sizeof *g->islands);
    return g->islands ? 0 : -1;
}

void kv_map_free(kv_map *g)
{
    free(g->islands);
    memset(g, 0, sizeof *g);
}

static int valid(const kv_map *g, int island, int cell)
{
    return island >= 0 && island < g->n_islands && cell >= 0 && cell < KV_CELL_COUNT;
}

int kv_map_offer(kv_map *g, int island, int cell, uint64_t id, double fitness, const char *pattern)
{
    if (!valid(g, island, cell) || id == 0)
        return 0;
    kv_map_cell *c = &g->islands[island].cells[cell];
    if (c->id && fitness <= c->fitness)
        return 0;
    c->id = id;
    c->fitness = fitness;
    c->picks = 0;
    snprintf(c->pattern, sizeof c->pattern, "%s", pattern ? pattern : "");
    return 1;
}

void kv_map_clear(kv_map *g, int island)
{
    if (island >= 0 && island < g->n_islands)
        memset(&g->islands[island], 0, sizeof g->islands[island]);
}

int kv_map_occupied(const kv_map *g, int island)
{
    int n = 0;
    for (int c = 0; c < KV_CELL_COUNT; c++)
        n += g->islands[island].cells[c].id != 0;
    return n;
}

int kv_map_best_cell(const kv_map *g, int island)
{
    int best = -1;
    for (int c = 0; c < KV_CELL_COUNT; c++) {
        const kv_map_cell *x = &g->islands[island].cells[c];
        if (x->id && (best < 0 || x->fitness > g->islands[island].cells[best].fitness))
            best = c;
    }
    return best;
}

double kv_map_best_fitness(const kv_map *g, int island)
{
    int c = kv_map_best_cell(g, island);
    return c < 0 ? 0 : g->islands[island].cells[c].fitness;
}

int kv_map_strongest(const kv_map *g)
{
    int s = 0;
    for (int i = 1; i < g->n_islands; i++) {
        double fi = kv_map_best_fitness(g, i), fs = kv_map_best_fitness(g, s);
        if (fi > fs || (fi == fs && kv_map_occupied(g, i) > kv_map_occupied(g, s)))
            s = i;
    }
    return s;
}

int kv_map_weakest(const kv_map *g, int exclude)
{
    int w = -1;
    for (int i = 0; i < g->n_islands; i++) {
        if (i == exclude)
            continue;
        double fi = kv_map_best_fitness(g, i), fw = w < 0 ? 0 : kv_map_best_fitness(g, w);
        if (w < 0 || fi < fw || (fi == fw && kv_map_occupied(g, i) <= kv_map_occupied(g, w)))
            w = i;
    }
    return w;
}

int kv_map_pick_parent(kv_map *g, int island, kv_rng *rng, kv_pick_kind *how)
{
    if (island < 0 || island >= g->n_islands || kv_map_occupied(g, island) == 0)
        return -1;
    kv_map_cell *cells = g->islands[island].cells;
    double u = kv_rng_double(rng), w[KV_CELL_COUNT];
    kv_pick_kind kind = u < 0.4 ? KV_PICK_UNIFORM : u < 0.8 ? KV_PICK_FITNESS : KV_PICK_CURIOSITY;
    for (int c = 0; c < KV_CELL_COUNT; c++) {
        if (!cells[c].id)
            w[c] = 0;
        else if (kind == KV_PICK_UNIFORM)
            w[c] = 1;
        else if (kind == KV_PICK_FITNESS)
            w[c] = cells[c].fitness * cells[c].fitness + 1e-9;
        else
            w[c] = 1.0 / (1.0 + cells[c].picks);
    }
    int c = kv_rng_weighted(rng, w, KV_CELL_COUNT);
    if (c >= 0)
        cells[c].picks++;
    if (how)
        *how = kind;
    return c;
}

int kv_map_pick_target(const kv_map *g, int island, int parent_cell, unsigned reachable,
                       kv_rng *rng)
{
    const kv_map_cell *cells = g->islands[island].cells;
    double u = kv_rng_double(rng);
    if (u < 0.5) {
        double w[KV_CELL_COUNT];
        for (int c = 0; c < KV_CELL_COUNT; c++)
            w[c] = !cells[c].id && (reachable >> c & 1u) ? 1 : 0;
        int c = kv_rng_weighted(rng, w, KV_CELL_COUNT);
        if (c >= 0)
            return c;
    }
    if (u < 0.75 || kv_map_occupied(g, island) < 2)
        return parent_cell;
    int weakest = -1;
    for (int c = 0; c < KV_CELL_COUNT; c++)
        if (cells[c].id && (weakest < 0 || cells[c].fitness < cells[weakest].fitness))
            weakest = c;
    return weakest >= 0 ? weakest : parent_cell;
}

uint64_t kv_map_same_pattern(const kv_map *g, int island, const char *pattern, uint64_t exclude,
                             kv_rng *rng)
{
    uint64_t found[KV_CELL_COUNT];
    int n = 0;
    for (int k = 0; k < g->n_islands && n == 0; k++) {
        /* the own island first; others only when it has none */
        int i = k == 0 ? island : (k <= island ? k - 1 : k);
        for (int c = 0; c < KV_CELL_COUNT && n < (int)(sizeof found / sizeof found[0]); c++) {
            const kv_map_cell *x = &g->islands[i].cells[c];
            if (x->id && x->id != exclude && strcmp(x->pattern, pattern) == 0)
                found[n++] = x->id;
        }
    }
    return n ? found[kv_rng_below(rng, (uint64_t)n)] : 0;
}
