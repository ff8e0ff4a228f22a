/* evalq.h — an evaluator as a queue: tasks in, reports out, driven by the
 * caller's poll() loop. evalq.c runs tasks on GPU groups (compile pool, then
 * a job per task) for the search's loop and, one task at a time, for
 * kv_evaluate; the search's tests drive the same loop with a deterministic
 * fake (tests/fake_evalq.c). */
#ifndef KEVO_EVALUATOR_EVALQ_H
#define KEVO_EVALUATOR_EVALQ_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "evaluator/evaluate.h"
#include "common/err.h"
#include "problem/problem.h"
#include "common/stage.h"

typedef struct {
    uint64_t id;                /* the caller's: the program (the same id again: the same
                                   source, never a duplicate of itself) */
    const kv_problem *problem;  /* outlives the task */
    const char *src;            /* copied by submit */
    size_t len;
    kv_stage stage;             /* KV_STAGE_SEED, _SCREEN, _FULL or _REMEASURE: the protocol */
    int baseline;               /* the reference alone; src is ignored (kv_baseline) */
    int selfcheck;              /* the reference against itself on plain memory (kv_selfcheck);
                                   implies baseline: src is ignored */
} kv_eval_task;

typedef struct {
    uint64_t id;
    kv_stage stage;
    kv_eval_report report;      /* owned by the taker (kv_eval_report_free) */
    double group_s;             /* how long it held a GPU group (0: it never ran) */
} kv_eval_done;

typedef struct {
    int (*submit)(void *self, const kv_eval_task *t, kv_err *err);
    int (*capacity)(void *self);           /* tasks submit accepts now */
    int (*in_flight)(void *self);          /* submitted, not yet taken */
    int (*pollfds)(void *self, struct pollfd *fds, int cap, int *timeout_ms);
    int (*step)(void *self, kv_err *err);  /* after poll: advance; -1 only on kevo's own failure */
    int (*take)(void *self, kv_eval_done *out); /* 0, or KV_NOTFOUND */
    int (*groups)(void *self);             /* GPU groups behind it */
    double (*busy_s)(void *self);          /* group-seconds spent running jobs so far */
    void (*destroy)(void *self);           /* kills what is in flight */
} kv_evalq_ops;

typedef struct {
    const kv_evalq_ops *ops;
    void *self;
} kv_evalq;

#endif
