/* mutator.h — what a mutator hands the search: a candidate source and how
 * it was made. Both mutators (template.c, and the LLM path: prompt.c,
 * llm_client.c, reply.c) produce these; the search stores `op` and `model`
 * with the program and its attempt. */
#ifndef KEVO_MUTATE_MUTATOR_H
#define KEVO_MUTATE_MUTATOR_H

#include <stddef.h>
#include <stdint.h>

#include "kevo/archive.h"

typedef struct {
    char *src;                      /* the candidate's whole source; owned */
    size_t len;
    char op[KV_NAME_MAX];           /* "perturb", "recombine", "sibling", "llm", ... */
    char model[KV_NAME_MAX];        /* the pattern it derives from, or the LLM model */
    int n_parents;
    uint64_t parents[2];            /* program ids (0 = a library seed, not yet stored) */
    char note[256];                 /* what changed, for the event log */
} kv_proposal;

void kv_proposal_free(kv_proposal *p); /* frees src; zeroes the struct */

#endif
