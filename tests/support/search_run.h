/* search_run.h — the set-up the search tests (and search_driver) share: a configuration and a
 * search environment on the source tree's problems and patterns
 * ($KEVO_SOURCE_DIR, else "."), run with the fake evaluator (and the fake
 * mutator where asked), in this process or in a child that its archive's
 * commit hook ends. */
#ifndef KEVO_TESTS_SEARCH_RUN_H
#define KEVO_TESTS_SEARCH_RUN_H

#include <signal.h>
#include <stdint.h>

#include "common/err.h"
#include "fake_evalq.h"
#include "fake_mutator.h"
#include "search/search.h"

/* The exit status of a child run that its commit hook ended. */
#define KV_SEARCH_TEST_CRASHED 42

typedef struct {
    kv_config cfg;
    kv_search_env env;              /* points into this struct: do not copy or move it */
    kv_fake_evalq_opts fo;          /* the fake evaluator's options */
    const kv_fake_mutator_opts *fm; /* NULL: the configured mutator */
    uint64_t crash_after;           /* > 0: the run, in a child, dies right after this commit */
    /* after kv_search_test_run in this process (not for a crashed child) */
    kv_fake_mutator_counts counts; /* the fake mutator's (with fm) */
    uint64_t selfchecks;           /* the self-check tasks the fake evaluator was given */
    char problems[4096], patterns[4096], abi[4096];
    volatile sig_atomic_t no_stop;
} kv_search_test;

/* Fills t for a run in dir of the n problems: cfg from kv_config_defaults
 * with those problems and that run_dir; env on cfg with problems_root
 * <source>/problems, patterns_root <source>/patterns, abi_path
 * <source>/docs/abi.md, stop never raised and stop_fd -1; fo 2 groups of
 * 1 ms tasks; no fake mutator, no crash. The caller then changes what its
 * test needs, in t->cfg, t->env and the options. */
void kv_search_test_init(kv_search_test *t, const char *dir, const char *const *problems, int n);

/* Runs t->env with a fake evaluator of t->fo (and a fake mutator of *t->fm
 * where set; both made and destroyed here), filling t->counts and
 * t->selfchecks. With crash_after > 0 the run goes in a forked child whose
 * commit hook _exits with KV_SEARCH_TEST_CRASHED after that commit: 0 when
 * it died so, else -1 with err (the child never returns). Otherwise
 * kv_search_run's result: 0, or -1 with err. */
int kv_search_test_run(kv_search_test *t, kv_err *err);

#endif
