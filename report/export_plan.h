/* export_plan.h — what kevo export writes, decided before anything is
 * written: a problem's best program at each measured size (the archive's
 * per-size ranking), each size's input bytes per rank, the range of call
 * sizes each measured size's program takes, the distinct programs with
 * their sources, and the pattern headers those sources include. Written
 * out by export_write.c. */
#ifndef KEVO_REPORT_EXPORT_PLAN_H
#define KEVO_REPORT_EXPORT_PLAN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "archive/archive.h"
#include "problem/problem.h"

#define KV_EXPORT_NO_LIMIT UINT64_MAX
#define KV_EXPORT_MAX_HEADERS 32

/* One measured size: a call of lo <= bytes < hi runs its best program. */
typedef struct {
    kv_size_best best;
    uint64_t bytes;  /* the bytes of one rank's inputs at this size and the world */
    uint64_t lo, hi; /* hi KV_EXPORT_NO_LIMIT: no upper bound */
    int program;     /* index into kv_export_plan.programs */
} kv_export_row;

typedef struct {
    kv_program prog; /* owned (evidence) */
    char *src;       /* owned; as stored */
    size_t len;
} kv_export_program;

typedef struct {
    char problem[KV_NAME_MAX];
    char run_dir[PATH_MAX];
    char archive[PATH_MAX];
    int world;      /* the world the sizes' bytes are computed at */
    kv_problem def; /* owned */
    int n_rows;
    kv_export_row rows[KV_PROBLEM_MAX_SIZES]; /* by bytes, smallest first */
    int n_programs;
    kv_export_program programs[KV_PROBLEM_MAX_SIZES];
    int n_headers;
    char headers[KV_EXPORT_MAX_HEADERS][128]; /* pattern headers to copy (file names) */
    char notes[2048];                         /* measured sizes left out, and why ("" when none) */
} kv_export_plan;

/* Loads the definition of the problem called name into p: 0, or -1 with
 * err naming what is wrong (kevo's loader looks in its problems/ folder). */
typedef int (*kv_problem_loader)(const char *name, kv_problem *p, kv_err *err);

/* Reads the plan from the archive of run_dir (read-only, one snapshot) and
 * the problem's definition (load_problem). world 0: the run's configured
 * world, else 2. patterns_dir: where the headers the sources include are
 * looked for. Refuses, naming what is missing, a problem the archive does
 * not know or that has no correct program measured with the full protocol.
 * 0, or -1 with err set and plan holding nothing. On 0 the plan owns its
 * programs, sources and definition until kv_export_plan_free. */
int kv_export_plan_make(const char *run_dir, const char *problem, int world,
                        const char *patterns_dir, kv_problem_loader load_problem,
                        kv_export_plan *plan, kv_err *err);
/* Frees what the plan owns. */
void kv_export_plan_free(kv_export_plan *plan);

/* The world (W) of the run's stored configuration in snapshot t, else 2
 * (kevo seed's): 0, or -1 when the stored configuration does not parse. */
int kv_report_run_world(kv_txn *t, int *world, kv_err *err);

/* The boundaries (rows sorted by bytes): the first row from 0, the last
 * without an upper bound, and between two neighbours the geometric
 * midpoint of their byte counts, rounded. */
void kv_export_bounds(kv_export_row *rows, int n);

#endif
