/* fake_evalq.h — a deterministic evaluator for the search's CPU tests
 * (fake_evalq.c says how it scores). */
#ifndef KEVO_TESTS_FAKE_EVALQ_H
#define KEVO_TESTS_FAKE_EVALQ_H

#include "evaluator/evaluator.h"

typedef struct {
    int groups;         /* simulated GPU groups */
    double task_ms;     /* simulated time of one task on a group */
    uint64_t submitted; /* (counted by the fake in its own copy) */
    /* self-check tasks (.selfcheck): the references of these problems
     * (names, NULL-terminated; NULL: none) disagree with themselves, the
     * others agree */
    const char *const *selfcheck_mismatch;
    /* ... and these hang in their self-check (verdict hang: no verdict on
     * the reference's code) */
    const char *const *selfcheck_hang;
} kv_fake_evalq_opts;

/* A correct source holding this text is implausible (fake_evalq.c). */
#define KV_FAKE_IMPLAUSIBLE "kevo-fake: implausible"

int kv_fake_evalq_new(const kv_fake_evalq_opts *o, kv_evalq *out); /* -1: out of memory */
void kv_fake_evalq_score(const char *src, size_t len, kv_stage stage, kv_eval_report *r);
/* The self-check tasks q (a fake) has been given so far. */
uint64_t kv_fake_evalq_selfchecks(kv_evalq q);

#endif
