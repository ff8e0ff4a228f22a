/* prompt.h — the LLM mutator's prompt: what the model is told about the
 * problem, the machine, the ABI, the parent and what to aim for, within a
 * size budget (docs/mutation.md, "The prompt"). */
#ifndef KEVO_MUTATE_PROMPT_H
#define KEVO_MUTATE_PROMPT_H

#include "common/err.h"
#include "problem/problem.h"

#define KV_PROMPT_MAX_INSPIRATIONS 4

typedef struct {
    const kv_problem *problem;
    int world;
    const char *topology;        /* a paragraph on the GPUs and their links */
    const char *abi;             /* docs/abi.md, or the part of it to show */
    const char *parent_src;      /* NULL: write a candidate from scratch */
    const char *parent_feedback; /* its evaluation: verdict, compiler errors, mismatch, times */
    const char *target_cell;     /* e.g. "tma/fused" */
    int n_inspirations;
    const char *insp_src[KV_PROMPT_MAX_INSPIRATIONS];
    const char *insp_note[KV_PROMPT_MAX_INSPIRATIONS]; /* why it is shown: cell, speedup */
    const char *snippets;                              /* pattern-library text (headers) */
    int budget_chars;                                  /* system + user at most this long */
} kv_prompt_in;

/* Builds the two messages (malloc'ed). Over budget, parts are dropped in this
 * order: the snippets, the inspirations (last first), the ABI's tail (cut at
 * a line, with a note saying so; then all of it), the feedback's tail (its
 * head stays: the verdict and the first compiler errors). The problem, the
 * parent, the target and the reply format always stay, and when they alone
 * exceed the budget it is an error saying by how much. */
int kv_prompt_build(const kv_prompt_in *in, char **system, char **user, kv_err *err);

#endif
