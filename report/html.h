/* html.h — the run's report: one self-contained HTML page (kevo report).
 *
 * PLACEHOLDER (issue 26, branch r-refresh): a minimal stand-in for the
 * report generator written on another branch, so that `kevo run`'s refresh
 * and its Chromium test build and run. Replace this file and html.c with
 * that generator's at merge. */
#ifndef KEVO_REPORT_HTML_H
#define KEVO_REPORT_HTML_H

#include "common/err.h"

/* Writes the report of the run in run_dir to out_path (a temporary file
 * beside it, then rename): 0, or -1 with err set (the archive does not open
 * or read, or the file cannot be written). Opens the archive read-only: in a
 * process that holds the run's archive open (kevo run) call it from a child
 * (refresh.h), as LMDB forbids opening one environment twice in a process. */
int kv_report_write(const char *run_dir, const char *out_path, kv_err *err);

#endif
