/* export_write.h — kevo export's files, written from a plan (export_plan.h):
 * the programs' sources, the dispatcher and its table, the harness, the C
 * header, CMakeLists.txt, README.md, and the headers the programs include.
 * The text of the generated code is in report/templates/ (export_templates
 * below). */
#ifndef KEVO_REPORT_EXPORT_WRITE_H
#define KEVO_REPORT_EXPORT_WRITE_H

#include "report/export_plan.h"

/* Writes the export into out_dir, which must not exist or be empty: into a
 * new folder beside it first, renamed to out_dir once every file is
 * written (a failure leaves nothing). source_root: kevo's tree, for
 * include/kevo/kernel.h and patterns/. 0, or -1 with err naming the file
 * that could not be written (out_dir is then left as it was). */
int kv_export_write(const kv_export_plan *plan, const char *out_dir, const char *source_root,
                    kv_err *err);

/* The C identifier a problem's name gives ("allreduce"; other characters
 * become '_'), for the library's names (kevo_export_<id>_...). */
void kv_export_ident(const char *problem, char *out, size_t cap);

/* The text of the files kevo export writes, with @NAME@ marks that
 * export_write.c fills in: @P@ the problem's name as an identifier,
 * @PROBLEM@ as written, @GUARD@ its include guard, @ORIGIN@ where the
 * export came from, and the generated parts (@ROWS@, @SPECS@, ...). Each is
 * a file of report/templates/ (kevo_export.h.in: include/kevo_export_@P@.h,
 * kevo_export_table.h.in, kevo_export.cu.in: the dispatcher,
 * kevo_export_harness.cu.in), compiled in by CMakeLists.txt as its bytes and
 * a terminating NUL; static, never freed. */
extern const char kv_export_tmpl_header[];
extern const char kv_export_tmpl_table[];
extern const char kv_export_tmpl_dispatch[];
extern const char kv_export_tmpl_harness[];

#endif
