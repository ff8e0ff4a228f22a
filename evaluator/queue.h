/* queue.h — the evaluator's queue on this node's GPUs (evalq.c): a compile
 * pool running ahead of one supervised group per set of NVLink peers, each
 * task taken through the pipeline's stages (pipeline.h). */
#ifndef KEVO_EVALUATOR_QUEUE_H
#define KEVO_EVALUATOR_QUEUE_H

#include "evaluator/evalq.h"

#define KV_EVALQ_MAX_GROUPS 16

typedef struct {
    kv_eval_opts full;      /* the protocol of every stage but screening; the world, worker,
                               logs, compile options and confinement of every group */
    kv_eval_opts screen;    /* the protocol of KV_STAGE_SCREEN */
    int n_groups;           /* given groups, checked to be NVLink peers; 0: from the topology */
    int groups[KV_EVALQ_MAX_GROUPS][KV_GROUP_MAX_WORLD];
    const char *groups_name;/* names a given group in errors ("gpu_groups": "gpu_groups[1]: ...");
                               NULL: not named */
    int max_groups;         /* with n_groups 0: at most this many disjoint groups */
    int on_demand;          /* form and start the groups when a task first needs one, and fail
                               (not restart again) when one cannot start: kv_evaluate's use.
                               0: at once, restarting a group that dies: the search's */
} kv_evalq_gpu_opts;

int kv_evalq_gpu_new(const kv_evalq_gpu_opts *o, kv_evalq *out, kv_err *err);

/* Seconds the first group took to restart last (0 if it never did or does not exist). */
double kv_evalq_gpu_last_restart_s(const kv_evalq *q);

#endif
