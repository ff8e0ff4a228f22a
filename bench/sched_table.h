/* sched_table.h — a table of measured schedules (bench/data/schedules-*.tsv,
 * tests/fixtures/schedules-synthetic.tsv), as bench/schedule_sweep.sh writes
 * it and bench/search_quality.c replays it (docs/schedules.md, "The
 * schedule benchmark").
 *
 * The file: lines starting with '#' are comments (date, machine, command);
 * the first other line is the header, then one row per schedule, fields
 * separated by tabs:
 *
 *   collective  schedule  aimed_cell  measured_cell  verdict  us_<size> ref_<size> ...
 *
 * schedule is the canonical text (kv_sched_format: one line, sections ended
 * by ';'), the cells "transport/fusion" or '-', the verdict kevo's
 * (ok, mismatch, ...; "duplicate": the same compiled code as another row,
 * whose times it carries), then per size class the candidate's and the
 * reference's median µs ('-' when not timed). */
#ifndef KEVO_BENCH_SCHED_TABLE_H
#define KEVO_BENCH_SCHED_TABLE_H

#include "common/cell.h"
#include "common/err.h"
#include "mutate/schedule.h"

#define SQ_MAX_SIZES 8

typedef struct {
    char *text; /* canonical (kv_sched_format of the parsed row) */
    kv_schedule s;
    int aimed;    /* cell index; -1 when '-' */
    int measured; /* cell index; -1 when '-' */
    int ok;       /* a candidate: verdict ok (or duplicate) and every size timed */
    char verdict[32];
    double us[SQ_MAX_SIZES], ref[SQ_MAX_SIZES];
    double speedup[SQ_MAX_SIZES]; /* ref / us; 0 when !ok */
    double fitness;               /* geometric mean of speedup over the sizes; 0 when !ok */
    int cell;                     /* where it lands: measured (aimed when not classified) */
} sq_entry;

typedef struct {
    kv_sched_coll coll;
    int n, cap;
    sq_entry *e;
    int *by_text; /* entry indices sorted by text, for sq_find */
    int n_ok;
    double best; /* the highest fitness of the table */
    double best_size[SQ_MAX_SIZES];
    unsigned cells; /* mask of the cells of ok entries */
    double qd;      /* sum over cells of the best fitness in it */
} sq_coll;

typedef struct {
    int n_sizes;
    char size[SQ_MAX_SIZES][32];
    int n_colls;
    sq_coll coll[KV_SC_COUNT]; /* in order of first appearance */
    int n_comments;
    char comment[16][256]; /* the first '#' lines, for the report */
} sq_table;

/* Loads path: 0, or -1 with err naming the line and what is wrong. A row
 * whose schedule repeats an earlier row of its collective is dropped. */
int sq_table_load(const char *path, sq_table *t, kv_err *err);
void sq_table_free(sq_table *t);
/* The entry of c whose canonical text is that of s, or -1. */
int sq_find(const sq_coll *c, const kv_schedule *s);
/* A distance between two schedules of one collective (for the projection of
 * a proposal that is not in the table, search_quality.c): 1 per differing
 * launch field, 1 per differing field of aligned phases, and 3 for another
 * phase sequence (the last phases are then compared). */
int sq_distance(const kv_schedule *a, const kv_schedule *b);

#endif
