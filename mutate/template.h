/* template.h — the template mutator (the default; no network): children of
 * pattern-library programs made by changing the parameters their seeds
 * declare (docs/patterns.md, "The template mutator").
 *
 *   perturb    1 or 2 parameters moved: to a neighbouring allowed value most
 *              of the time, sometimes to any other allowed value;
 *   recombine  each parameter from one of two programs of the same pattern;
 *   sibling    the seed written for another cell (the target cell when one
 *              exists), with the parent's values of parameters of the same
 *              name where the sibling allows them: how empty cells are reached.
 */
#ifndef KEVO_MUTATE_TEMPLATE_H
#define KEVO_MUTATE_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "kevo/err.h"
#include "kevo/rng.h"
#include "mutate/library.h"
#include "mutate/mutator.h"

typedef enum { KV_TPL_PERTURB, KV_TPL_RECOMBINE, KV_TPL_SIBLING, KV_TPL_ANY } kv_tpl_op;

typedef struct {
    const kv_library *lib;
    const char *pattern;          /* the parent's seed name (its program's model) */
    const char *parent_src;
    size_t parent_len;
    uint64_t parent_id;
    const char *other_src;        /* recombine: a second program of the same pattern, or NULL */
    size_t other_len;
    uint64_t other_id;
    int target_cell;              /* the cell the search aims at, or -1 */
    kv_tpl_op op;                 /* KV_TPL_ANY: the mutator picks (template.c says how) */
} kv_tpl_in;

/* 0: *out filled; 1: no move possible (why in err: no parameters, nothing
 * left to change, no sibling, a parent without annotations); -1: an error
 * (out of memory, a second parent whose annotations do not parse). */
int kv_template_propose(const kv_tpl_in *in, kv_rng *rng, kv_proposal *out, kv_err *err);

#endif
