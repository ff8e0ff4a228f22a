/* history.h — the best speedup over time, per problem and size and of the
 * geometric mean over the sizes ("geomean"), read from a run's events.jsonl
 * (its result events, docs/search.md): for kevo archive history. */
#ifndef KEVO_REPORT_HISTORY_H
#define KEVO_REPORT_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "archive/archive.h"
#include "common/err.h"

#define KV_HISTORY_GEOMEAN "geomean"

/* One step: the best of a problem at a size, or its best seed there, grew. */
typedef struct {
    double time_s;      /* since the run's first start, resume or result event */
    double evaluations; /* of the run so far */
    char problem[KV_NAME_MAX];
    char size[KV_NAME_MAX]; /* a size's name, or KV_HISTORY_GEOMEAN */
    double best;            /* the best speedup so far of a result an island took */
    uint64_t program;       /* its id; 0: none yet (only the seed grew) */
    double seed;            /* the best correct seed's speedup so far */
} kv_history_row;

typedef struct {
    kv_history_row *v;
    size_t n, cap;
} kv_report_history;

/* The steps of the events file at path, in the file's order (problem NULL:
 * every problem's; else that problem's only). A line that does not parse
 * (one cut short by a kill) is skipped. Sizes come from the results'
 * per-size speedups (events of an older kevo have none: geomean steps
 * only). 0 (out->n may be 0), or -1 with err set (the file cannot be opened
 * or read, out of memory) and out empty. out->v is malloc'ed until
 * kv_report_history_free. */
int kv_report_history_load(const char *path, const char *problem, kv_report_history *out,
                           kv_err *err);
void kv_report_history_free(kv_report_history *h);

#endif
