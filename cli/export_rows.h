/* export_rows.h — kevo archive export --format csv|jsonl: one row per
 * program and size, with the size's times, its spread, speedup and bus
 * bandwidth, and whether the program is an elite (docs/analysis.md). */
#ifndef KEVO_CLI_EXPORT_ROWS_H
#define KEVO_CLI_EXPORT_ROWS_H

#include <stdint.h>
#include <stdio.h>

#include "archive/archive.h"
#include "common/err.h"

/* What the rows need beyond a program's record: the ids of every elite (of
 * any island, any problem), the run's world, and each problem's cost model
 * at that world (loaded once per problem; a problem whose definition is not
 * at hand has no GB/s). */
typedef struct kv_export_rows kv_export_rows;

/* Reads the elites of snapshot t and the run's world. *out is freed with
 * kv_export_rows_free. 0, or -1 with err set (an archive read). */
int kv_export_rows_open(kv_txn *t, kv_export_rows **out, kv_err *err);
void kv_export_rows_free(kv_export_rows *r); /* NULL is fine */

/* The CSV header row (with_source: the two source columns too). */
void kv_export_rows_csv_header(FILE *out, int with_source);

/* The rows of program p, one per size (one with empty size columns when it
 * has none): CSV (RFC 4180) when csv, else JSON lines. src (may be NULL) is
 * repeated on each row. 0, or -1 with err set (out of memory). */
int kv_export_rows_write(kv_export_rows *r, FILE *out, int csv, const kv_program *p,
                         const char *src, kv_err *err);

#endif
