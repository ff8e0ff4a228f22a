/* refresh.h — the report of a run written while the run holds its archive
 * (kevo run's periodic hook, search/search.h kv_search_hook). */
#ifndef KEVO_REPORT_REFRESH_H
#define KEVO_REPORT_REFRESH_H

#include "common/err.h"

/* The name of the report in a run directory. */
#define KV_REPORT_FILE "report.html"

/* Writes <run_dir>/report.html (kv_report_write) in a child process, which
 * opens the archive on its own (LMDB forbids a second open of an environment
 * in the process that holds it; a damaged page crashes the child, not the
 * run), and waits for it. Returns 0, or -1 with err: the child's own message,
 * or how it ended. Fits kv_search_hook.fn: ctx is unused. Call it from a
 * process with no other thread running. */
int kv_report_refresh(void *ctx, const char *run_dir, kv_err *err);

#endif
