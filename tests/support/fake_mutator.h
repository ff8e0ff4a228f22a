/* fake_mutator.h — a scripted mutator for the search's CPU tests
 * (fake_mutator.c says what it answers and when). */
#ifndef KEVO_TESTS_FAKE_MUTATOR_H
#define KEVO_TESTS_FAKE_MUTATOR_H

#include <stddef.h>
#include <stdint.h>

#include "mutate/mutator.h"

typedef struct {
    int concurrency; /* requests in flight at most */
    double delay_ms; /* from a request to its answer */
    /* what request k gets: script[k % strlen(script)]:
     *   c  a candidate (the parent with one line added, new each time)
     *   d  the parent's source unchanged (a duplicate)
     *   r  a refusal ("fake: refused")
     *   x  a failed call (a refusal, "fake: the call failed"); fail_after of
     *      them in a row and the mutator is failing
     *   n  no move (nothing to record, no call) */
    const char *script;
    uint64_t tokens; /* > 0: every answer but `n` is a paid call of these tokens in,
                          * its op "llm" (else "fake") */
    double usd;      /* and this cost */
    int fail_after;
} kv_fake_mutator_opts;

#define KV_FAKE_MUTATOR_ISLANDS 8

typedef struct {
    uint64_t asked, declined; /* requests taken, and refused for the budgets */
    /* the parent of the first request taken for each island (0: none yet),
     * and the length of the source it came with */
    uint64_t first_parent[KV_FAKE_MUTATOR_ISLANDS];
    size_t first_parent_len[KV_FAKE_MUTATOR_ISLANDS];
    uint64_t answered[128]; /* by script letter, once taken */
    uint64_t taken;
} kv_fake_mutator_counts;

int kv_fake_mutator_new(const kv_fake_mutator_opts *o, kv_mutator *out); /* -1: out of memory */
void kv_fake_mutator_counts_of(const kv_mutator *m, kv_fake_mutator_counts *out);

#endif
