/* search.h — `kevo run`: the coordinator. One process, one poll() loop:
 * proposals (the mutator's, mutate/mutator.h) → dedup by
 * source → the evaluator queue (screening, then the full protocol for
 * candidates that could enter the archive, then a re-measurement of each
 * would-be elite) → the archive, with K islands per problem, migration,
 * re-seeding, budgets, a clean stop on SIGINT/SIGTERM and resumption of an
 * existing run directory. docs/search.md describes the policy. */
#ifndef KEVO_SEARCH_SEARCH_H
#define KEVO_SEARCH_SEARCH_H

#include <signal.h>
#include <stdio.h>

#include "search/config.h"
#include "common/err.h"
#include "archive/archive.h"
#include "mutate/mutator.h"
#include "evaluator/evaluator.h"

/* A periodic hook of the run (kevo run: it writes <run>/report.html). The
 * loop calls fn between its polls at most once every every_s seconds (never
 * while a snapshot's thread runs: fn may fork), and once at the end of a run
 * that opened, after its last commit and snapshot. fn runs on the loop:
 * evaluations in flight go on on their GPUs, but nothing new is taken or
 * submitted until it returns, so it must be short (seconds). It returns 0, or
 * -1 with err set: a warning (an event "<name>_error" and a line on the
 * progress output), never a stop. */
typedef struct {
    int (*fn)(void *ctx, const char *run_dir, kv_err *err); /* NULL: no hook */
    void *ctx;
    double every_s;   /* seconds between calls; <= 0: only at the end */
    const char *name; /* in events and messages, e.g. "report" */
} kv_search_hook;

typedef struct {
    const kv_config *cfg;
    const char *run_dir; /* overrides cfg->run_dir when not NULL */
    const char *problems_root;
    const char *patterns_root; /* the seeds, and the headers LLM prompts show */
    const char *abi_path;      /* docs/abi.md, which LLM prompts show (LLM mutator only) */
    kv_evalq evalq;            /* owned by the caller */
    /* 1: finish what is in flight, take nothing new; 2: stop now. Set from
     * signal handlers. */
    volatile sig_atomic_t *stop;
    int stop_fd;    /* read end of the signal handlers' self-pipe, or -1 */
    FILE *progress; /* status output; NULL for none */
    /* where the verdicts of problem checks are kept (<cache_dir>/problemcheck/,
     * evaluator/evaluator.h; kevo run: the compile cache); NULL: none kept,
     * every problem's reference is checked at every start */
    const char *cache_dir;
    int progress_tty; /* rewrite one line (else a line every progress_every_s) */
    double progress_every_s;
    /* tests: a mutator of the caller's (owned by it) instead of the one the
     * configuration names; NULL ops: the configuration's */
    kv_mutator mutator;
    /* tests: fault injection, given to the run's archive (kv_archive_opts) */
    kv_commit_hook after_commit;
    kv_search_hook hook; /* fn NULL: none */
} kv_search_env;

/* Whether a run of cfg has something to vary: with the template mutator
 * (mutator.kind "template"), which only varies seeds, some problem must have
 * a seed in <patterns_root>/<problem>/; else -1, err naming the problems and
 * what to add. `kevo run` asks before it starts the GPUs; kv_search_run
 * decides the same again, and skips (saying so) the problems without seeds
 * when others have some (docs/search.md, "Problems without seeds"). */
int kv_search_check_seeds(const kv_config *cfg, const char *patterns_root, kv_err *err);

/* Runs (or resumes) the search until a budget or target is reached, or a
 * stop is asked for. Returns 0 then, -1 when kevo itself fails (err). */
int kv_search_run(const kv_search_env *env, kv_err *err);

#endif
