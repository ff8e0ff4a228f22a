/* size_best.h — a problem's best program at each size (kv_each_size_best,
 * archive/archive.h), in the order of the problem's own sizes: for kevo
 * archive best --per-size and kevo export. */
#ifndef KEVO_REPORT_SIZE_BEST_H
#define KEVO_REPORT_SIZE_BEST_H

#include <stddef.h>

#include "archive/archive.h"
#include "problem/problem.h"

typedef struct {
    kv_size_best *v;
    size_t n, cap;
    int *known; /* per entry: the index of its size in the problem, or -1 */
} kv_report_size_bests;

/* The best of every size of problem in snapshot t, ordered as def lists
 * its sizes (def NULL, or a size it does not list: after them, by name).
 * 0 (out->n may be 0), or -1 with err set (out of memory, or the
 * archive unreadable) and out empty. out owns v and known (malloc'ed)
 * until kv_report_size_bests_free. */
int kv_report_size_bests_load(kv_txn *t, const char *problem, const kv_problem *def,
                              kv_report_size_bests *out, kv_err *err);
void kv_report_size_bests_free(kv_report_size_bests *b);

#endif
