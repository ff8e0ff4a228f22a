/* export_rows.h — kevo archive export --format csv|jsonl: one row per
 * program and size, with the size's times, its spread, speedup and bus
 * bandwidth, and whether the program is an elite (docs/analysis.md); the
 * values come from report/rows.h, this file only formats them. */
#ifndef KEVO_CLI_EXPORT_ROWS_H
#define KEVO_CLI_EXPORT_ROWS_H

#include <stdint.h>
#include <stdio.h>

#include "archive/archive.h"
#include "common/err.h"
#include "report/rows.h"

/* The CSV header row (with_source: the two source columns too). */
void kv_export_rows_csv_header(FILE *out, int with_source);

/* Writes program p's rows (report/rows.h's kv_report_rows_of): CSV
 * (RFC 4180) when csv, else JSON lines. src (may be NULL) is repeated on
 * each row. 0, or -1 with err set (out of memory). */
int kv_export_rows_write(FILE *out, int csv, const kv_program *p, const kv_report_row *rows,
                         size_t n, const char *src, kv_err *err);

#endif
