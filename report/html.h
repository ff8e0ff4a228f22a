/* html.h — kevo report: one self-contained HTML page of a run (docs/report.md).
 *
 * The page is one file: inline CSS and inline SVG, no script and no external
 * resource. It reads the archive in one read transaction (a snapshot, so a
 * running search may keep writing) and <run_dir>/events.jsonl up to its last
 * complete line. Every byte that comes from the archive, the events or the
 * configuration is written through kv_html_text (html_int.h). */
#ifndef KEVO_REPORT_HTML_H
#define KEVO_REPORT_HTML_H

#include "common/err.h"

/* What a caller may set; a zeroed struct (or NULL) takes the run's own. */
typedef struct {
    /* the link's measured ceiling per direction in GB/s, for the "of link"
     * column; 0 takes the run's report.link_gbps (search/config_schema.c) */
    double link_gbps;
} kv_report_opts;

/* Writes the report of the run in run_dir to out_path (a temporary file
 * beside it, then rename); opts may be NULL: 0, or -1 with err set. */
int kv_report_write(const char *run_dir, const char *out_path, const kv_report_opts *opts,
                    kv_err *err);

#endif
