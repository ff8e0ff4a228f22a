/* archive_print.h — what kevo archive prints of report/views.h's data: the
 * behaviour grid as a table, programs' fields as CSV, attempts as lines. */
#ifndef KEVO_CLI_ARCHIVE_PRINT_H
#define KEVO_CLI_ARCHIVE_PRINT_H

#include <stdio.h>

#include "archive/archive.h"
#include "report/views.h"

/* The glyph for an empty cell: "·" when the locale is UTF-8 and out is a
 * terminal, "-" otherwise (pipes and files get plain ASCII). */
const char *kv_grid_empty_glyph(FILE *out);

/* Prints the grid: one row per transport, one column per fusion; each cell
 * "2.31x #142" ("1.00x #1 reference" for the problem's reference) or the
 * empty glyph. Every line starts with indent. */
void kv_grid_print(FILE *out, const kv_grid *g, const char *indent, const char *empty);

/* CSV (RFC 4180): a field is quoted when it holds a comma, quote, CR or LF;
 * quotes inside are doubled. A field (a name, a label) has its control
 * characters escaped as on a terminal (common/text.h); -1 when out of
 * memory. */
int kv_csv_field(FILE *out, const char *s);
/* The source as two columns: source_encoding "text" and the source as it
 * is when it is valid UTF-8 with no control character but TAB and LF, else
 * "base64" and its bytes in base64 (RFC 4648): the exact source either way,
 * and no byte a terminal acts on. -1 when out of memory. */
int kv_csv_source(FILE *out, const char *src);

/* An attempt as one line of kevo archive attempts, under its header. */
void kv_attempt_print_header(FILE *out);
void kv_attempt_print(FILE *out, const kv_attempt *a);

#endif
