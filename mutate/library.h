/* library.h — the pattern library of one problem: the seeds under
 * patterns/<problem>/ (every .cu file) with their parsed annotations (docs/patterns.md),
 * and, for a collective, seeds generated from schedules (docs/schedules.md).
 * `kevo seed` evaluates them; the template mutator derives children from
 * them. */
#ifndef KEVO_MUTATE_LIBRARY_H
#define KEVO_MUTATE_LIBRARY_H

#include <stddef.h>

#include "common/err.h"
#include "mutate/pattern.h"

typedef struct {
    char name[KV_PATTERN_NAME_MAX * 2]; /* file name without .cu */
    char *src;                          /* owned, NUL-terminated */
    size_t len;
    kv_pattern_meta meta;
} kv_seed;

typedef struct {
    int n;
    kv_seed *seeds; /* sorted by name */
} kv_library;

/* Loads every .cu file of <patterns_root>/<problem>/. A seed whose annotations do not
 * parse is skipped, its error ("path:line: what") passed to on_error (may be
 * NULL), so one bad file costs only itself. A missing folder is an empty
 * library; an unreadable one, or a file that cannot be read, an error. */
int kv_library_load(const char *patterns_root, const char *problem, kv_library *out,
                    void (*on_error)(const char *msg, void *ctx), void *ctx, kv_err *err);
void kv_library_free(kv_library *lib);

/* Where a problem's seeds come from (the configuration's `seeds`, `kevo seed
 * --seeds`): the hand-written seeds of patterns/<problem>/, the schedules
 * generated for a collective (kv_library_add_schedules), or both. */
typedef enum { KV_SEEDS_PATTERNS, KV_SEEDS_SCHEDULES, KV_SEEDS_BOTH, KV_SEEDS_COUNT } kv_seeds_from;
extern const char *const kv_seeds_names[]; /* "patterns", "schedules", "both", NULL */

/* Appends the generated seeds of a collective (kv_sched_coll_parse(problem)
 * >= 0; any other problem gets none): "sched_default", the collective's
 * default schedule, and one fixed schedule aimed at each non-NVLS cell the
 * collective can reach, "sched_<transport>_<fusion>" (sched_sm_fused,
 * sched_sm_unfused, sched_tma_fused, sched_tma_unfused, sched_ce_unfused).
 * Deterministic; no random draw. Each carries its kevo:schedule and
 * kevo:pattern lines and no kevo:param. The seeds stay sorted by name; a
 * name already in lib is skipped. 0, or -1 (out of memory, a schedule that
 * does not generate). */
int kv_library_add_schedules(kv_library *lib, const char *problem, kv_err *err);

/* kv_library_load and/or kv_library_add_schedules, as `from` says. */
int kv_library_load_from(const char *patterns_root, const char *problem, kv_seeds_from from,
                         kv_library *out, void (*on_error)(const char *msg, void *ctx), void *ctx,
                         kv_err *err);
const kv_seed *kv_library_find(const kv_library *lib, const char *name);

#endif
