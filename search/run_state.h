/* run_state.h — the coordinator's state, shared by the files of search/:
 * loop.c (the poll loop, budgets, stopping), propose.c (new candidates),
 * results.c (what an evaluation changes), resume.c (opening a run
 * directory), progress.c (status line and event log). */
#ifndef KEVO_SEARCH_RUN_STATE_H
#define KEVO_SEARCH_RUN_STATE_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "kevo/archive.h"
#include "kevo/problem.h"
#include "kevo/rng.h"
#include "mutate/library.h"
#include "search/map.h"
#include "search/search.h"

/* A screened candidate goes on to the full protocol when it is within this
 * factor of its cell's elite: screening is short and noisy. */
#define KV_SCREEN_SLACK 0.95

/* One problem of the run. */
typedef struct {
    kv_problem problem;
    kv_library lib;
    unsigned reachable;          /* cells some seed is written for (bit per cell) */
    kv_map grid;
    uint64_t accepted;           /* elites entered during this process */
    double best;                 /* best fitness over all islands */
    int next_island;
    int done;                    /* reached the target speedup */
    uint64_t evaluations;        /* GPU jobs of this problem during this process */
} kv_run_problem;

/* A program between its proposal and its last evaluation step. */
typedef struct kv_run_task {
    uint64_t id;                 /* program id */
    int problem;
    int island;                  /* -1: a seed, offered to every island */
    kv_stage stage;              /* the evaluation it waits for or is in */
    int submitted;
    char *src;                   /* owned */
    size_t len;
    char op[KV_NAME_MAX], model[KV_NAME_MAX];
    int n_parents;
    uint64_t parents[2];
    double full_speedup;         /* after the full protocol (remeasure: the lower counts) */
    struct kv_run_task *next;
} kv_run_task;

typedef struct {
    const kv_search_env *env;
    const kv_config *cfg;
    kv_archive *archive;
    kv_run_state state;          /* stored with every commit */
    kv_rng rng;
    double wall_at_start;        /* state.wall_s when this process began */
    int64_t t0_ns;               /* monotonic start of this process */
    int n_problems;
    kv_run_problem *problems;
    kv_run_task *tasks;          /* waiting or in flight, oldest first */
    int next_problem;            /* round robin of proposals */
    long commits;
    FILE *events;                /* <run>/events.jsonl */
    /* progress */
    double last_progress_s;
    double busy_at_minute;       /* evalq busy seconds after the first minute */
    int busy_marked;
    uint64_t proposals, duplicates, no_moves;
    uint64_t fruitless;          /* proposals in a row that gave nothing to evaluate */
} kv_run;

/* results.c */
/* One commit of `what` (a store of a report) with the run state. */
int kv_run_store(kv_run *r, kv_run_task *t, const kv_eval_report *rep, kv_stage stage,
                 int offer, double fitness, const char *next, int *taken, kv_err *err);
/* The attempt details that say which step follows (resume.c reads them). */
#define KV_NEXT_FULL "next: full"
#define KV_NEXT_REMEASURE "next: remeasure"
int kv_run_handle_done(kv_run *r, kv_eval_done *d, kv_err *err);
void kv_run_task_free(kv_run_task *t);
void kv_run_unlink(kv_run *r, kv_run_task *t);
void kv_run_append(kv_run *r, kv_run_task *t);
/* The commit counter: the tests' crash point. Returns 1 when the loop must
 * be abandoned now. */
int kv_run_count_commit(kv_run *r);

/* propose.c */
/* Adds the library's seeds of every problem as programs to evaluate
 * (a fresh run). */
int kv_run_add_seeds(kv_run *r, kv_err *err);
/* One new candidate on some problem's island: 1 when a task was queued, 0
 * when none could be made now, -1 on failure. */
int kv_run_propose(kv_run *r, kv_err *err);

/* resume.c */
int kv_run_open(kv_run *r, const kv_search_env *env, kv_err *err);
void kv_run_close(kv_run *r);

/* progress.c */
double kv_run_elapsed_s(const kv_run *r);
/* Events of the JSONL log: make one (type, time and the run's evaluation
 * count filled in), add members, emit it (written, flushed and freed; NULL
 * from an allocation failure is ignored: the log is best effort, the
 * archive is the record). */
cJSON *kv_run_event_new(const kv_run *r, const char *type);
void kv_run_event_emit(kv_run *r, cJSON *ev);
void kv_run_progress(kv_run *r, int force);

#endif
