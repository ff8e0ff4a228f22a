/* search_check.h — invariants of a search's archive, checked by the search
 * tests after normal runs and after runs killed at random instants. */
#ifndef KEVO_TESTS_SEARCH_CHECK_H
#define KEVO_TESTS_SEARCH_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "archive/archive.h"

typedef struct {
    uint64_t programs, unevaluated, proposals, elites, evaluations;
    uint64_t refusals; /* proposal attempts without a candidate (proposal_error) */
    uint64_t by_stage[KV_STAGE_COUNT];
    uint64_t tokens_in, tokens_out; /* of the run state (equal to the attempts' sums) */
    double cost_usd;
    int islands_used;
    double best, wall_s;
} kv_search_facts;

/* 0 when every invariant holds (facts filled); -1 with the first broken one in why. */
int kv_search_check(const char *run_dir, const char *const *problems, int n_problems,
                    kv_search_facts *f, char *why, size_t cap);

/* Starts KEVO_SEARCH_DRIVER's driver on dir (seed 11, task 8 ms, 2 groups;
 * with snapshot_min, 3 islands and that snapshots.interval_min), its stdout
 * discarded: the child's pid, or -1. */
pid_t kv_search_spawn_driver(const char *driver, const char *dir, const char *evals,
                             const char *snapshot_min);

/* What was written to f (a tmpfile given as a run's progress output) since
 * the last call, into out (cap bytes, NUL-terminated), and f emptied:
 * 0, or -1 when it cannot be emptied. */
int kv_search_progress_text(FILE *f, char *out, size_t cap);

/* Occurrences of a text in the run's event log, or -1 when it cannot be read. */
int kv_search_count_text(const char *dir, const char *needle);

#endif
