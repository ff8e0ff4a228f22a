/* pipeline.h — the stages of one evaluation, inside the evaluator: the
 * queue (evalq.c) runs them, on its compile pool and groups, for every
 * caller (kv_evaluate, kv_baseline and the search all submit to a queue).
 * Not for the search or the command line, which see evaluator.h;
 * tests/unit/test_runtime_lookups.c checks the guard stage directly. */
#ifndef KEVO_EVALUATOR_PIPELINE_H
#define KEVO_EVALUATOR_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "evaluator/evaluator.h"
#include "evaluator/group/group.h"

/* The options of worker group `index` on `devices` (world of them) for o. */
void kv_eval_group_opts(const kv_eval_opts *o, int index, const int *devices, kv_group_opts *go);

/* The reference compiled through the cache (an error when it does not compile). */
int kv_eval_reference(const kv_compile_opts *o, const kv_problem *p, kv_compile_result *ref,
                      kv_err *err);
/* The problem's inputs hook compiled; so = "" when it has none. */
int kv_eval_inputs_hook(const kv_compile_opts *o, const kv_problem *p, char *so, size_t cap,
                        kv_err *err);
/* The job of one evaluation with o's protocol (trials, warm-up, iterations,
 * sizes); cand_so NULL: the reference alone (a baseline). */
void kv_eval_make_job(const kv_eval_opts *o, uint64_t id, const kv_problem *p, const char *ref_so,
                      const char *cand_so, kv_job *job);
/* Plain trials per size of a self-check job, at least. */
#define KV_SELFCHECK_TRIALS 2
/* The self-check job (kv_selfcheck): the reference as both sides, the
 * second on plain memory at shifted offsets; every size, nothing timed. */
void kv_eval_make_selfcheck_job(const kv_eval_opts *o, uint64_t id, const kv_problem *p,
                                const char *ref_so, kv_job *job);

/* The compiled candidate's static evidence (SASS, PTX, imports), loaded once. */
typedef struct {
    char *sass, *ptx, *imports;
} kv_eval_static;
void kv_eval_static_free(kv_eval_static *st);

/* After out->compile is filled: 0 when the candidate may run (*st loaded),
 * 1 when its verdict is already final (compile error, NVLS refused, runtime
 * lookups refused), -1 when the toolchain itself failed. */
int kv_eval_after_compile(const kv_eval_opts *o, const char *src, kv_eval_report *out,
                          kv_eval_static *st, kv_err *err);
/* After out->job is filled: verdict, per-size scores, speedup (and, unless
 * out->baseline, the roofline fractions of the reference). */
int kv_eval_score(const kv_problem *p, int world, kv_eval_report *out, kv_err *err);
/* After out->job is filled for a candidate: kv_eval_score, then the cell. */
int kv_eval_after_job(const kv_problem *p, int world, const char *src, const kv_eval_static *st,
                      kv_eval_report *out, kv_err *err);

#endif
