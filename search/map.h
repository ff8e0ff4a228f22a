/* map.h — one problem's islands in memory: per island a MAP-Elites grid
 * over the behaviour cells, mirroring the archive's `elites` database (the
 * archive is the truth; the grid is rebuilt from it on resume), and the
 * choices the search makes on it: parent, target cell, a second parent of
 * the same pattern, the best and the weakest island. */
#ifndef KEVO_SEARCH_MAP_H
#define KEVO_SEARCH_MAP_H

#include <stdint.h>

#include "archive/archive.h"
#include "common/cell.h"
#include "common/rng.h"

typedef struct {
    uint64_t id; /* program; 0 = empty */
    double fitness;
    char pattern[KV_NAME_MAX]; /* the seed it derives from (the program's model) */
    uint32_t picks;            /* times chosen as a parent: curiosity favours few */
} kv_map_cell;

typedef struct {
    kv_map_cell cells[KV_CELL_COUNT];
} kv_map_island;

typedef struct {
    int n_islands;
    kv_map_island *islands;
} kv_map;

/* How a parent was chosen (for the event log). */
typedef enum { KV_PICK_UNIFORM, KV_PICK_FITNESS, KV_PICK_CURIOSITY } kv_pick_kind;
const char *kv_pick_name(kv_pick_kind k);

int kv_map_init(kv_map *g, int n_islands); /* -1: out of memory */
void kv_map_free(kv_map *g);

/* Insert-if-better, as kv_offer_elite: 1 when the cell took it. */
int kv_map_offer(kv_map *g, int island, int cell, uint64_t id, double fitness, const char *pattern);
/* Empties an island (re-seeding). */
void kv_map_clear(kv_map *g, int island);
int kv_map_occupied(const kv_map *g, int island);
/* The island's best cell, or -1 when it is empty. */
int kv_map_best_cell(const kv_map *g, int island);
double kv_map_best_fitness(const kv_map *g, int island); /* 0 when empty */
/* The island with the highest best fitness (ties: more occupied cells, then
 * the lower index). */
int kv_map_strongest(const kv_map *g);
/* The island other than `exclude` with the lowest best fitness (ties: fewer
 * occupied cells, then the higher index); -1 with fewer than two islands. */
int kv_map_weakest(const kv_map *g, int exclude);

/* A parent cell of an island: uniform over occupied cells, fitness-weighted
 * (weight = fitness²) or curiosity (weight 1 / (1 + picks)), mixed 40/40/20.
 * Counts the pick. -1 when the island is empty. */
int kv_map_pick_parent(kv_map *g, int island, kv_rng *rng, kv_pick_kind *how);

/* The cell to aim for: half the time an empty cell among `reachable` (a
 * mask of cells some seed is written for), else the parent's own cell (to
 * improve it) or, a quarter of the time, the island's weakest occupied cell. */
int kv_map_pick_target(const kv_map *g, int island, int parent_cell, unsigned reachable,
                       kv_rng *rng);

/* Another program of the same pattern than `exclude`, from any island
 * (its own first), for recombination; 0 when there is none. */
uint64_t kv_map_same_pattern(const kv_map *g, int island, const char *pattern, uint64_t exclude,
                             kv_rng *rng);

#endif
