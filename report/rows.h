/* rows.h — one row per program and size, with the size's times, its spread,
 * speedup and bus bandwidth, and whether the program is an elite: the data
 * behind kevo archive export --format csv|jsonl (docs/analysis.md). */
#ifndef KEVO_REPORT_ROWS_H
#define KEVO_REPORT_ROWS_H

#include <stddef.h>

#include "archive/archive.h"
#include "common/err.h"
#include "report/export_plan.h"

/* One row of a program. size points into the program given to
 * kv_report_rows_of and lives as long as it; NULL for the one row of a
 * program without sizes. The doubles are NaN when unknown: cv when the
 * evaluator's evidence holds none, speedup when the size failed or a time is
 * missing, gbps when the problem's cost model or the run's world is not at
 * hand. */
typedef struct {
    const kv_size_result *size;
    double cv, speedup, gbps;
    int elite;
} kv_report_row;

/* What the rows need beyond a program's record: the ids of every elite (of
 * any island, any problem), the run's world, and each problem's cost model
 * at that world (loaded once per problem with load_problem). */
typedef struct kv_report_rows kv_report_rows;

/* Reads the elites of snapshot t and the run's world. *out holds copies
 * (t may end before it) and is freed with kv_report_rows_free. 0, or -1
 * with err set (an archive read, out of memory). When the run's world is unknown (no GB/s in
 * any row), note is set to why, else note->msg is "". */
int kv_report_rows_open(kv_txn *t, kv_problem_loader load_problem, kv_report_rows **out,
                        kv_err *note, kv_err *err);
void kv_report_rows_free(kv_report_rows *r); /* NULL is fine */

/* Fills rows[0..*n) with program p's rows, one per size in p's order
 * (*n = 1 and rows[0].size NULL when p has none). The first time a problem's
 * definition cannot be used (not loadable, not defined at the run's world),
 * note is set to why ("no GB/s for P: ..."); otherwise note->msg is "".
 * 0, or -1 with err set (out of memory). */
int kv_report_rows_of(kv_report_rows *r, const kv_program *p, kv_report_row rows[KV_MAX_SIZES],
                      size_t *n, kv_err *note, kv_err *err);

#endif
