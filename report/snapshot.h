/* snapshot.h — one consistent read of a run's archive for the views and the
 * export: the archive opened read-only and one read transaction, and the
 * problems it knows. */
#ifndef KEVO_REPORT_SNAPSHOT_H
#define KEVO_REPORT_SNAPSHOT_H

#include <stddef.h>

#include "archive/archive.h"
#include "common/err.h"

typedef struct {
    kv_archive *a;
    kv_txn *t;
} kv_report_snapshot;

/* Opens the archive in dir read-only and begins one read transaction.
 * 0, or -1 with err set (s holds nothing to close). The snapshot lasts
 * until kv_report_snapshot_close; what it reads never changes meanwhile. */
int kv_report_snapshot_open(const char *dir, kv_report_snapshot *s, kv_err *err);
/* Ends the transaction and closes the archive; s may be closed twice. */
void kv_report_snapshot_close(kv_report_snapshot *s);

typedef struct {
    kv_problem_stats *v;
    size_t n, cap;
} kv_report_problems;

/* Every problem's stats, in name order, into l (l->v is malloc'ed: free it).
 * 0, or -1 with err set and l empty. */
int kv_report_problems_load(kv_txn *t, kv_report_problems *l, kv_err *err);

/* 0 when the archive knows the problem; otherwise -1 with a message that
 * lists the problems it knows (and suggests the nearest), or -1 when the
 * archive cannot be read. */
int kv_report_require_problem(const kv_report_snapshot *s, const char *problem, kv_err *err);

/* Room for one more element in a growing array v of n used elements of size
 * bytes: v itself while n < *cap, else v reallocated to twice *cap (first
 * when 0) with *cap updated; NULL when out of memory (v is still valid). */
void *kv_report_grow(void *v, size_t *cap, size_t n, size_t size, size_t first);

#endif
