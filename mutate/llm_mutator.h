/* llm_mutator.h — the LLM mutator behind the mutator interface (mutator.h):
 * a chat request per request of the search, sent through the client
 * (llm.h) within the concurrency and the LLM budgets, and its reply applied
 * to the parent (reply.h): a candidate, or a refusal with its reason. What
 * a request shows the model is the caller's (a prompt callback): the search
 * knows the archive, the islands and the texts a prompt holds. */
#ifndef KEVO_MUTATE_LLM_MUTATOR_H
#define KEVO_MUTATE_LLM_MUTATOR_H

#include <stdint.h>

#include "mutate/llm_config.h"
#include "common/err.h"
#include "mutate/mutator.h"

/* After this many failed requests in a row (retries spent, or refused at
 * once: 401, 403, 404, a bad URL) the endpoint counts as dead (`failing`),
 * rather than paying for retries until a budget ends the run. */
#define KV_LLM_DEAD_AFTER 8

/* The two messages of a request (malloc'ed into *system and *user): 0, 1
 * when the parent cannot be shown (err says why: it does not fit
 * mutator.llm.prompt_budget_chars), or -1. */
typedef int (*kv_mut_prompt_fn)(void *ctx, const kv_mut_request *rq, char **system, char **user,
                                kv_err *err);

typedef struct {
    const kv_cfg_llm *cfg; /* copied */
    uint64_t seed;         /* the back-off jitter's random state */
    kv_mut_prompt_fn prompt;
    void *prompt_ctx;
} kv_llm_mutator_opts;

/* What kv_llm_mutator_new would refuse, before anything is started (the key
 * variable, the models, the concurrency: kv_llm_check). */
int kv_llm_mutator_check(const kv_cfg_llm *cfg, kv_err *err);
int kv_llm_mutator_new(const kv_llm_mutator_opts *o, kv_mutator *out, kv_err *err);

#endif
