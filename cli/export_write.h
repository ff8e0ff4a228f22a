/* export_write.h — kevo export's files, written from a plan (export_plan.h):
 * the programs' sources, the dispatcher and its table, the harness, the C
 * header, CMakeLists.txt, README.md, and the headers the programs include.
 * The text of the generated code is in export_templates.c. */
#ifndef KEVO_CLI_EXPORT_WRITE_H
#define KEVO_CLI_EXPORT_WRITE_H

#include "export_plan.h"

/* Writes the export into out_dir, which must not exist or be empty: into a
 * new folder beside it first, renamed to out_dir once every file is
 * written (a failure leaves nothing). source_root: kevo's tree, for
 * include/kevo/kernel.h and patterns/. 0 or -1. */
int kv_export_write(const kv_export_plan *plan, const char *out_dir, const char *source_root,
                    kv_err *err);

/* The C identifier a problem's name gives ("allreduce"; other characters
 * become '_'), for the library's names (kevo_export_<id>_...). */
void kv_export_ident(const char *problem, char *out, size_t cap);

extern const char kv_export_tmpl_header[];
extern const char kv_export_tmpl_table[];
extern const char kv_export_tmpl_dispatch[];
extern const char kv_export_tmpl_harness[];

#endif
