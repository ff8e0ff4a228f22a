/* views.h — views of archive records for `kevo archive`, kevo export and
 * reports: behaviour grids and their QD scores (a problem's grids read from
 * a transaction: grids.c), and the text and JSON forms of programs and
 * attempts (printing them is cli/archive_print.h's). Apart from kv_problem_grids_load nothing here reads the
 * archive; the caller (cli/cmd_archive.c, report/snapshot.h) opens it and
 * hands records in. Records passed in are only read, never kept. */
#ifndef KEVO_REPORT_VIEWS_H
#define KEVO_REPORT_VIEWS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "common/cell.h"

/* ---- behaviour grids --------------------------------------------------------- */

typedef struct {
    int occupied;
    uint64_t program_id;
    double fitness; /* the elite's fitness: what the grid keeps the best of */
    double speedup; /* the program's speedup; NAN until kv_grid_set_program */
    int32_t island; /* where the elite lives (merged grids: the winning island) */
    int reference;  /* the program is its problem's reference (operator "reference") */
} kv_grid_cell;

/* One MAP-Elites grid: cell index = transport * KV_FUSION_COUNT + fusion. */
typedef struct {
    kv_grid_cell cell[KV_CELL_COUNT];
} kv_grid;

void kv_grid_init(kv_grid *g);

/* Offers an elite: kept when its cell is empty or its fitness is strictly
 * greater (equal fitness: the lower program id). Returns the cell index, or
 * -1 when e->cell is not one of the grid's cells (the elite is ignored). */
int kv_grid_offer(kv_grid *g, const kv_elite *e);

/* Offers every occupied cell of src to dst (merging islands). */
void kv_grid_merge(kv_grid *dst, const kv_grid *src);

/* What every occupied cell that holds program p shows of it: its speedup,
 * and whether it is its problem's reference. */
void kv_grid_set_program(kv_grid *g, const kv_program *p);

/* Occupied cells (0..KV_CELL_COUNT). */
int kv_grid_coverage(const kv_grid *g);

/* Quality-diversity score: the sum of the fitness of the occupied cells. */
double kv_grid_qd_score(const kv_grid *g);

/* {"ce/fused": {"program": 142, "speedup": 2.31, "fitness": 2.31[, "island": 0]
 *  [, "reference": true]} or null, ...} in cell order; NULL when out of memory. */
cJSON *kv_grid_to_json(const kv_grid *g, int with_island);

/* A problem's grids as the archive holds them: one per island that has
 * elites (in island order) and the grid merged over them. */
typedef struct {
    int32_t island;
    kv_grid grid;
} kv_island_grid;

typedef struct {
    kv_island_grid *v; /* malloc'ed; n used of cap */
    size_t n, cap;
    kv_grid merged;
} kv_problem_grids;

/* Reads the elites of a problem in transaction t into one grid per island
 * and the merged grid (grids.c); with speedups, reads each elite's program
 * for its speedup and whether it is the reference too (an elite whose
 * program is missing keeps speedup NaN). 0, or -1 with err set and g empty.
 * g owns g->v until kv_problem_grids_free. */
int kv_problem_grids_load(kv_txn *t, const char *problem, int speedups, kv_problem_grids *g,
                          kv_err *err);
void kv_problem_grids_free(kv_problem_grids *g);

/* One problem of an archive at a glance (kevo archive list and stats). */
typedef struct {
    kv_problem_stats st;
    int has_best;
    uint64_t best_id; /* the best ok program by speedup (kv_top_k), when has_best */
    double best;      /* its speedup */
    int coverage;     /* occupied cells of the merged grid */
    double qd;        /* the merged grid's QD score */
} kv_problem_summary;

/* The summary of every problem in transaction t, in name order (summary.c):
 * *out malloc'ed (never NULL on success, even for none), *n entries. 0, or
 * -1 with err set and nothing to free. */
int kv_problem_summaries_load(kv_txn *t, kv_problem_summary **out, size_t *n, kv_err *err);

/* ---- numbers and text ----------------------------------------------------------- */

/* "2.31x"; "-" for zero, negative or NaN speedups. */
void kv_fmt_speedup(double s, char *out, size_t cap);

/* The shortest "%.*g" text that reads back as v exactly (CSV exports). */
void kv_fmt_double(double v, char *out, size_t cap);

/* "2026-11-22T05:00:00Z", or "-" for a zero time. */
void kv_fmt_time(int64_t ns, char *out, size_t cap);

/* The first line of s (without CR/LF), truncated to fit; "" for NULL. */
void kv_first_line(const char *s, char *out, size_t cap);

/* "1;4;7" (parents), "" when none; out >= KV_MAX_PARENTS * 21 bytes. */
void kv_fmt_parents(const kv_program *p, const char *sep, char *out, size_t cap);

/* One-line summary used by lineage: "#142  llm  ok  2.31x  tma/fused". */
void kv_program_summary(const kv_program *p, char *out, size_t cap);

/* ---- program export --------------------------------------------------------------- */

/* The comment block that precedes an exported source: problem, id,
 * speedup and per-size times, cell, evidence, operator/model, parents,
 * evaluation date, and "exported by kevo <version> <exported_utc>". Every
 * line starts with "// ". Returns a malloc'ed string, NULL when out of memory. */
char *kv_export_header(const kv_program *p, const char *exported_utc);

/* The program as JSON (src may be NULL: no "source" member). */
cJSON *kv_program_to_json(const kv_program *p, const char *src);

/* ---- attempts --------------------------------------------------------------------- */

cJSON *kv_attempt_to_json(const kv_attempt *a);

#endif
