/* template.h — the template mutator (the default; no network): children of
 * pattern-library programs made by changing the parameters their seeds
 * declare (docs/patterns.md, "The template mutator").
 *
 *   perturb    1 or 2 parameters moved: to a neighbouring allowed value most
 *              of the time, sometimes to any other allowed value;
 *   recombine  each parameter from one of two programs of the same pattern;
 *   sibling    another seed of the problem (the target cell's when one
 *              exists, else another cell's, else any), with the parent's
 *              values of parameters of the same name where the sibling allows
 *              them: how empty cells are reached;
 *   jump       every parameter drawn anew from all it allows: a random point
 *              of the pattern's space, for when the small steps around the
 *              elites only give programs already stored.
 *
 * A parent generated from a schedule (its source carries a `// kevo:schedule`
 * line: kv_sched_from_source == 1) has no parameters: its children are
 * structural (template_sched.c), the schedule changed by kv_sched_mutate and
 * the program generated again (kv_sched_generate); op "sched-<move>", model
 * "schedule" (docs/mutation.md, "Schedule moves").
 */
#ifndef KEVO_MUTATE_TEMPLATE_H
#define KEVO_MUTATE_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/rng.h"
#include "mutate/library.h"
#include "mutate/mutator.h"
#include "mutate/schedule.h"

typedef enum {
    KV_TPL_PERTURB,
    KV_TPL_RECOMBINE,
    KV_TPL_SIBLING,
    KV_TPL_JUMP,
    KV_TPL_ANY
} kv_tpl_op;

typedef struct {
    const kv_library *lib;
    const char *pattern; /* the parent's seed name (its program's model) */
    const char *parent_src;
    size_t parent_len;
    uint64_t parent_id;
    const char *other_src; /* recombine: a second program of the same pattern, or NULL */
    size_t other_len;
    uint64_t other_id;
    int target_cell; /* the cell the search aims at, or -1 */
    int allow_nvls;  /* schedule moves may use nvls (evaluation.allow_nvls) */
    kv_tpl_op op;    /* KV_TPL_ANY: the mutator picks (template.c says how) */
} kv_tpl_in;

/* 0: *out filled (op "perturb", "recombine", "sibling" or "jump"; model the
 * resulting pattern; parents; a note such as "CTAS 16->32, UNROLL 4->2");
 * 1: no move possible (why in err: no parameter that can change, parents too
 * alike, no sibling, a parent without annotations); -1: an error (out of
 * memory, a second parent whose annotations do not parse). Unless 0, *out is
 * zeroed. All randomness is drawn from rng. */
int kv_template_propose(const kv_tpl_in *in, kv_rng *rng, kv_proposal *out, kv_err *err);

/* template_sched.c: kv_template_propose for a parent generated from the
 * schedule *parent. in->op: KV_TPL_JUMP a jump (kv_sched_random); RECOMBINE
 * a crossover with the second parent's schedule; SIBLING a move aimed at the
 * target cell; PERTURB one structural move; ANY: aimed at the target cell
 * half of the time when the parent's cell differs from it, else a crossover
 * 30% of the time when a second parent has a schedule of the collective,
 * else a structural move; an operator with no move falls back to any move,
 * then to a jump. A child the generator cannot write yet ("not generated
 * yet: ...") is drawn again. Same returns as kv_template_propose. */
int kv_template_sched_propose(const kv_tpl_in *in, const kv_schedule *parent, kv_rng *rng,
                              kv_proposal *out, kv_err *err);

/* template_mutator.c: the mutator interface (mutator.h) over
 * kv_template_propose. Each request is answered at once: a candidate, or no
 * move; from the eighth fruitless proposal in a row (kv_mut_request's
 * `fruitless`) a jump is tried first. -1 only when out of memory. */
int kv_template_mutator_new(kv_mutator *out, kv_err *err);

#endif
