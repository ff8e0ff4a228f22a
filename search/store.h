/* store.h — an evaluation into the archive: the program (deduplicated by
 * source), its result, an attempt in the log and, when it is correct, an
 * offer to the elite grid of every island given. Used by `kevo seed` and by
 * the search. */
#ifndef KEVO_SEARCH_STORE_H
#define KEVO_SEARCH_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "evaluator/evaluator.h"
#include "archive/archive.h"

typedef struct {
    const char *problem;
    const char *op;    /* "seed", "template", "llm", ... */
    const char *model; /* the pattern's name, or the LLM model */
    kv_stage stage;
    int screen;     /* the screening protocol ran (kevo seed --screen); the stage
                                KV_STAGE_SCREEN says so too. Its times stay out of the
                                per-size ranking (kv_each_size_best) */
    int32_t island; /* of the program (-1: none) */
    int n_parents;
    const uint64_t *parents;
    int n_islands;             /* offer to islands [0, n_islands) when ok; 0: offer nowhere */
    int offer_own_island;      /* offer to `island` only (n_islands is then ignored) */
    double fitness;            /* > 0: the elite's fitness instead of the report's speedup */
    const kv_run_state *state; /* written in the same transaction when not NULL */
    const char *next;          /* the attempt's detail when ok: the step that follows, so a
                                resumed run knows it is due ("full", "remeasure") */
} kv_store_what;

typedef struct {
    uint64_t program_id;
    int existed;      /* the same source was already stored */
    int elites_taken; /* islands whose cell it entered */
} kv_store_outcome;

/* One write transaction: kv_add_program, kv_set_result, kv_add_attempt,
 * kv_offer_elite (fitness: the speedup unless w->fitness is set) and the
 * run state. Returns 0 or -1 (nothing written). */
int kv_store_evaluation(kv_archive *a, const kv_store_what *w, const char *src, size_t len,
                        const kv_eval_report *r, kv_store_outcome *out, kv_err *err);

#endif
