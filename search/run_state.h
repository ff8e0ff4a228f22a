/* run_state.h — the coordinator's state, shared by the files of search/:
 * loop.c (the poll loop, budgets, stopping), propose.c (new candidates),
 * asks.c (requests to the mutator and what comes back), llm_prompt.c (what
 * an LLM request shows the model), results.c (what an evaluation changes),
 * resume.c (opening a run directory), seedless.c and check_references.c (the
 * problems a run skips), progress.c (status line and event log),
 * snapshots.c (hot snapshots of the archive), hook.c (the caller's periodic
 * hook). */
#ifndef KEVO_SEARCH_RUN_STATE_H
#define KEVO_SEARCH_RUN_STATE_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "archive/archive.h"
#include "problem/problem.h"
#include "common/rng.h"
#include "mutate/library.h"
#include "mutate/mutator.h"
#include "search/map.h"
#include "search/search.h"

/* A screened candidate goes on to the full protocol when it is within this
 * factor of its cell's elite: screening is short and noisy. */
#define KV_SCREEN_SLACK 0.95

/* One problem of the run. */
typedef struct {
    kv_problem problem;
    kv_library lib;
    unsigned reachable; /* cells some seed is written for (bit per cell); every
                                  * cell for a problem that starts from its reference */
    /* no seed in the library (seedless.c): */
    int from_reference; /* its reference is its first program */
    int skipped;        /* nothing of it is proposed or evaluated: the mutator only
                                    varies seeds (seedless.c), or its reference failed its
                                    check (check_references.c) */
    kv_map grid;
    uint64_t accepted; /* its ok evaluations, every process's: the clock of
                                  * migration and re-seeding */
    double best;       /* best fitness over all islands */
    int next_island;
    int done;             /* reached the target speedup */
    uint64_t evaluations; /* GPU jobs of this problem during this process */
    uint64_t implausible; /* of them, those with verdict implausible (the progress
                                    line shows them: a gamed timer or a wrong cost model) */
} kv_run_problem;

/* A program between its proposal and its last evaluation step. */
typedef struct kv_run_task {
    uint64_t id; /* program id */
    int problem;
    int island;     /* -1: a seed, offered to every island */
    kv_stage stage; /* the evaluation it waits for or is in */
    int submitted;
    char *src; /* owned */
    size_t len;
    char op[KV_NAME_MAX], model[KV_NAME_MAX];
    int n_parents;
    uint64_t parents[2];
    double full_speedup; /* after the full protocol (remeasure: the lower counts) */
    struct kv_run_task *next;
} kv_run_task;

/* Where a new candidate is to come from: kv_run_choose's pick. */
typedef struct {
    int problem, island;
    int parent_cell;
    uint64_t parent; /* program id of the parent elite */
    kv_pick_kind how;
    int target; /* the cell to aim for */
} kv_run_pick;

/* What a mutator's call to a model cost: carried by its proposal attempt and
 * added to the run state in the same commit. */
typedef struct {
    uint64_t tokens_in, tokens_out;
    double cost_usd;
    double wall_s;
} kv_run_spend;

/* A request to the mutator, not yet taken back, and the pick it is for. */
typedef struct kv_run_ask {
    uint64_t id;
    kv_run_pick pick;
    struct kv_run_ask *next;
} kv_run_ask;

/* What every LLM prompt may show, read once when the run opens. */
typedef struct {
    char *abi; /* docs/abi.md */
    int n_headers;
    struct kv_run_header {
        char name[KV_NAME_MAX]; /* e.g. "kevo_sync.cuh" */
        char *text;
    } * headers;        /* the pattern library's *.cuh, by name */
    char machine[1024]; /* the paragraph on the GPUs and their links */
} kv_run_llm_text;

typedef struct {
    const kv_search_env *env;
    const kv_config *cfg;
    kv_archive *archive;
    kv_run_state state; /* stored with every commit */
    kv_rng rng;
    double wall_at_start; /* state.wall_s when this process began */
    int64_t t0_ns;        /* monotonic start of this process */
    int n_problems;
    kv_run_problem *problems;
    kv_run_task *tasks; /* waiting or in flight, oldest first */
    int next_problem;   /* round robin of proposals */
    FILE *events;       /* <run>/events.jsonl */
    /* hot snapshots (snapshots.c) */
    struct kv_snapshot_job *snapshot; /* in flight, or NULL */
    double next_snapshot_s;           /* elapsed seconds when the next one is due */
    double next_hook_s;               /* elapsed seconds when env->hook is next due (hook.c) */
    /* progress */
    double last_progress_s;
    double busy_at_minute; /* evalq busy seconds after the first minute */
    int busy_marked;
    uint64_t proposals, duplicates, no_moves;
    uint64_t fruitless; /* proposals in a row that gave nothing to evaluate */
    /* the mutator (asks.c): the configuration's, or the caller's (env->mutator) */
    kv_mutator mut;
    int mut_owned;    /* made by the run: destroyed with it */
    kv_run_ask *asks; /* requests not yet taken back */
    uint64_t next_ask;
    kv_run_llm_text text; /* what LLM prompts show (the LLM mutator only) */
} kv_run;

/* results.c */
/* One commit of `what` (a store of a report) with the run state. */
int kv_run_store(kv_run *r, kv_run_task *t, const kv_eval_report *rep, kv_stage stage, int offer,
                 double fitness, const char *next, int *taken, kv_err *err);
/* The attempt details that say which step follows (resume.c reads them). */
#define KV_NEXT_FULL "next: full"
#define KV_NEXT_REMEASURE "next: remeasure"
int kv_run_handle_done(kv_run *r, kv_eval_done *d, kv_err *err);
void kv_run_task_free(kv_run_task *t);
void kv_run_unlink(kv_run *r, kv_run_task *t);
void kv_run_append(kv_run *r, kv_run_task *t);

/* propose.c */
/* Adds the library's seeds of every problem as programs to evaluate, and
 * the reference of every problem that starts from it (a fresh run). */
int kv_run_add_seeds(kv_run *r, kv_err *err);
/* Problem (round robin over those not done), island (round robin over the
 * occupied ones), parent and target cell for the next candidate, whatever
 * the mutator: 0, or 1 when no problem has an elite yet. */
int kv_run_choose(kv_run *r, kv_run_pick *pk);
/* Records t (src, op, model and parents set; takes it) as a new candidate
 * of the pick, with its proposal attempt, logs it and queues it for
 * screening, unless its source is already stored for the problem: then,
 * with sp (a model call's cost), a duplicate attempt, and without it
 * nothing but r->duplicates. sp may be NULL. Returns 1 (stored), 0
 * (nothing stored), or -1. */
int kv_run_add_candidate(kv_run *r, kv_run_task *t, const kv_run_pick *pk, const char *note,
                         const kv_run_spend *sp, kv_err *err);
/* A proposal that gave no candidate: a proposal attempt without program,
 * verdict proposal_error, `why` as its detail. Returns 1 or -1. */
int kv_run_add_refusal(kv_run *r, const kv_run_pick *pk, const char *op, const char *model,
                       const char *why, const kv_run_spend *sp, kv_err *err);

/* seedless.c */
/* The problems without seeds: each starts from its reference, or, with a
 * mutator that only varies seeds, is skipped (said on the progress output
 * and as a `skipped` event). -1 (err: the problems and what to add) when
 * every problem is skipped. After kv_run_mut_open. */
int kv_run_plan_seedless(kv_run *r, kv_err *err);

/* check_references.c */
/* Every problem not skipped has its reference checked before the run
 * trusts it: a pass kept in env->cache_dir (evaluator/evaluator.h) is
 * taken; else a self-check task runs on env->evalq (all of them at once,
 * driven here until their reports are back) and its verdict is kept. A
 * problem whose reference failed (kept or fresh) is skipped, said on the
 * progress output and as a `skipped` event, and the work restore() took up
 * for it is dropped. Returns 0; -1 when kevo itself failed, or (err naming
 * the problems and why) when no problem is left. A second stop request
 * ends the wait: 0, the rest unchecked (the loop then stops at once). After
 * kv_run_plan_seedless, before kv_run_add_seeds. */
int kv_run_check_problems(kv_run *r, kv_err *err);

/* llm_prompt.c */
/* Reads docs/abi.md (env->abi_path) and the pattern headers, and writes the
 * machine paragraph; a missing file is an error. */
int kv_run_llm_text_load(kv_run *r, kv_err *err);
void kv_run_llm_text_free(kv_run_llm_text *x);
/* Which pattern headers a prompt shows (wanted[i] for x->headers[i]): those the parent's source
 * includes, kevo_tma.cuh for a TMA target cell, kevo_side.cuh for a copy-engine one, and every
 * header those include in turn (the whole library would not fit a prompt). Returns how many. */
int kv_run_llm_wanted_headers(const kv_run_llm_text *x, const char *psrc, int target, int *wanted);
/* The two messages of a request for pick pk whose parent's source is psrc
 * (malloc'ed into *system and *user): 0, 1 when the prompt cannot be built
 * (err says why: the parent does not fit mutator.llm.prompt_budget_chars),
 * or -1. */
int kv_run_llm_prompt(kv_run *r, const kv_run_pick *pk, const char *psrc, char **system,
                      char **user, kv_err *err);

/* asks.c */
/* Before anything is written: what the configured mutator needs (the LLM
 * mutator: its key variable, docs/abi.md and the pattern headers). */
int kv_run_mut_check(kv_run *r, kv_err *err);
/* The mutator: env->mutator when the caller gives one, else the configured
 * one (the LLM client seeded from the run's random state). */
int kv_run_mut_open(kv_run *r, kv_err *err);
/* Abandons the requests in flight (nothing of theirs is recorded). */
void kv_run_mut_close(kv_run *r);
/* One request for kv_run_choose's pick: 1 when asked, 0 when no problem has
 * an elite yet, 2 when the mutator takes none now (its cost does not fit the
 * budgets beside those in flight), -1 on failure. */
int kv_run_mut_ask(kv_run *r, kv_err *err);
/* Everything the mutator has finished becomes a candidate, a refusal or a
 * count: 0, or -1. */
int kv_run_mut_take(kv_run *r, kv_err *err);
int kv_run_mut_in_flight(const kv_run *r);
/* The LLM budget that is spent, or NULL: budget.llm_tokens and
 * budget.cost_usd (what is spent, plus with with_in_flight the most the
 * requests in flight can still take), or the budget that the next request's
 * own maximum would overshoot with nothing in flight (the mutator checks
 * each request so before sending it). */
const char *kv_run_mut_budget(const kv_run *r, int with_in_flight);
/* Why the mutator can make no more requests (kv_mutator_ops.failing), or NULL. */
const char *kv_run_mut_failing(const kv_run *r);

/* resume.c */
/* The run directory (the command line's, else the configuration's). */
const char *kv_run_dir(const kv_run *r);
int kv_run_open(kv_run *r, const kv_search_env *env, kv_err *err);
void kv_run_close(kv_run *r);

/* snapshots.c */
/* Takes the result of a finished background snapshot, and starts one when
 * snapshots.interval_min (> 0) has passed since the last start (or the run's). */
void kv_run_snapshot_tick(kv_run *r);
/* Waits for the background snapshot in flight, if any (before the archive
 * closes). */
void kv_run_snapshot_wait(kv_run *r);
/* The snapshot of an exit: waits for the one in flight, then takes one. */
void kv_run_snapshot_exit(kv_run *r);

/* hook.c */
/* Calls env->hook when hook.every_s (> 0) has passed since the last call (or
 * the run's start) and no snapshot is in flight. */
void kv_run_hook_tick(kv_run *r);
/* The call of the run's end (after the exit's snapshot). */
void kv_run_hook_exit(kv_run *r);

/* progress.c */
double kv_run_elapsed_s(const kv_run *r);
/* Events of the JSONL log: make one (type, time and the run's evaluation
 * count filled in), add members, emit it (written, flushed and freed; NULL
 * from an allocation failure is ignored: the log is best effort, the
 * archive is the record). */
cJSON *kv_run_event_new(const kv_run *r, const char *type);
void kv_run_event_emit(kv_run *r, cJSON *ev);
/* What a person must know at once: an event of `type` with the member `key`
 * set to text (and "problem" to problem unless it is NULL), and the line
 * "kevo: <prefix><text>" on the progress output. */
void kv_run_say(kv_run *r, const char *type, const char *problem, const char *key,
                const char *prefix, const char *text);
void kv_run_progress(kv_run *r, int force);

#endif
