/* mutator.h — the search's view of a mutator: requests in (a parent on an
 * island and a cell to aim for), proposals out, driven by the coordinator's
 * poll() loop like the evaluator (evaluator/evaluator.h). The template mutator
 * (template_mutator.c) answers every request at once; the LLM mutator
 * (llm_mutator.c) sends a chat request and answers when its reply comes; the
 * tests drive the same loop with a scripted fake (tests/support/fake_mutator.c).
 * Either hands the search a kv_proposal: a candidate source and how it was
 * made, which the search stores with `op` and `model`. */
#ifndef KEVO_MUTATE_MUTATOR_H
#define KEVO_MUTATE_MUTATOR_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "common/names.h"
#include "mutate/llm_config.h"
#include "common/err.h"
#include "common/rng.h"
#include "mutate/library.h"

typedef struct {
    char *src; /* the candidate's whole source; owned */
    size_t len;
    char op[KV_NAME_MAX];    /* "perturb", "recombine", "sibling", "llm", ... */
    char model[KV_NAME_MAX]; /* the pattern it derives from, or the LLM model */
    int n_parents;
    uint64_t parents[2]; /* program ids (0 = a library seed, not yet stored) */
    char note[256];      /* what changed, for the event log */
} kv_proposal;

void kv_proposal_free(kv_proposal *p); /* frees src; zeroes the struct */

/* The LLM budgets (budget.llm_tokens, budget.cost_usd) and what the run
 * spent of them, every process of the run counted. A limit of 0: none. */
typedef struct {
    int64_t tokens_limit;
    uint64_t tokens_spent;
    double usd_limit;
    double usd_spent;
} kv_mut_budget;

/* The budget that `tokens` and `usd` more would reach (strict 0: spent +
 * more >= limit) or overshoot (strict 1: spent + more > limit): "LLM token
 * budget spent", "LLM cost budget spent", or NULL. */
const char *kv_mut_budget_over(const kv_mut_budget *b, uint64_t tokens, double usd, int strict);

/* One request: the search's choice of parent and aim. Pointers are the
 * caller's and valid during ask only; a mutator that keeps one copies it. */
typedef struct {
    uint64_t id;           /* the caller's; comes back in kv_mut_done */
    int problem;           /* the caller's index of the problem (for its callbacks) */
    const kv_library *lib; /* the problem's seeds */
    int island;
    uint64_t parent; /* program id of the parent elite */
    const char *parent_src;
    size_t parent_len;
    const char *pattern; /* the seed the parent derives from (its program's model) */
    uint64_t other;      /* a second elite of the same pattern, or 0: only for a
                                  * mutator whose ops say `recombines` */
    const char *other_src;
    size_t other_len;
    int target;         /* the behaviour cell to aim for */
    int allow_nvls;     /* schedule moves may use nvls (evaluation.allow_nvls) */
    uint64_t fruitless; /* proposals in a row that gave nothing to evaluate */
    kv_mut_budget budget;
    kv_rng *rng; /* the run's random state: every draw comes from it */
} kv_mut_request;

/* A call to a model made (or meant) for a request: what it cost, which the
 * search records with the proposal's attempt and in the run state, and what
 * the event log shows of it. */
typedef struct {
    int made;                        /* 0: no call (the template mutator) */
    uint64_t ticket;                 /* 0: none was sent (the prompt did not fit its budget) */
    char model[KV_CFG_NAME_MAX * 2]; /* as configured */
    int ok;                          /* the request got an answer */
    uint64_t tokens_in, tokens_out;
    int tokens_estimated; /* some count was estimated (mutate/llm.h) */
    double cost_usd;
    double wall_s;
    int attempts;      /* HTTP requests, retries included */
    char reason[1024]; /* why no candidate came of it; "" when one did */
} kv_mut_call;

typedef enum {
    KV_MUT_CANDIDATE, /* prop holds a source to evaluate */
    KV_MUT_REFUSED,   /* no candidate: recorded (a proposal_error attempt, `why`) */
    KV_MUT_NO_MOVE    /* no candidate, nothing to record: only counted */
} kv_mut_outcome;

typedef struct {
    uint64_t id; /* the request's */
    kv_mut_outcome outcome;
    kv_proposal prop; /* CANDIDATE: all of it; REFUSED: op and model; owned by
                                  * the taker (kv_mut_done_free) */
    char why[1024];   /* REFUSED: the attempt's detail */
    kv_mut_call call;
} kv_mut_done;

void kv_mut_done_free(kv_mut_done *d); /* frees the proposal; zeroes the struct */

/* The finished requests a mutator holds until the search takes them, oldest
 * first (both mutators' take). Start it with kv_mut_done_list_init. */
typedef struct kv_mut_done_node kv_mut_done_node;
typedef struct {
    kv_mut_done_node *head, **tail;
    int n;
} kv_mut_done_list;

void kv_mut_done_list_init(kv_mut_done_list *l);
/* Appends *d, whose proposal the list then owns, and zeroes *d: 0, or -1 (out
 * of memory; *d untouched, still the caller's). */
int kv_mut_done_list_push(kv_mut_done_list *l, kv_mut_done *d);
/* The oldest into *out (the taker's, kv_mut_done_free): 0, or KV_NOTFOUND. */
int kv_mut_done_list_take(kv_mut_done_list *l, kv_mut_done *out);
/* Frees what was never taken. */
void kv_mut_done_list_free(kv_mut_done_list *l);

/* The most the requests in flight can still cost, counted against the
 * budgets before the next request; and `full`: set when, with nothing in
 * flight, the next request's own maximum would overshoot a budget (which
 * one: the run then ends on it). */
typedef struct {
    uint64_t tokens;
    double usd;
    const char *full;
} kv_mut_usage;

typedef struct {
    int recombines; /* requests carry `other` (the search draws it) */
    /* it only varies a problem's seeds (their kevo:param annotations: the
     * template mutator): a problem without seeds gives it nothing to vary,
     * and the search skips it (docs/search.md, "Problems without seeds") */
    int needs_seeds;
    /* Requests ask takes now; eval_room: tasks the evaluator would take now
     * (a mutator that answers at once asks no more than that). */
    int (*room)(void *self, int eval_room);
    /* 1: asked, a kv_mut_done will come from take (at once, for a synchronous
     * mutator); 0: not now (its cost does not fit the budgets beside the
     * requests in flight; room says when to ask again); -1 on failure. */
    int (*ask)(void *self, const kv_mut_request *rq, kv_err *err);
    int (*in_flight)(void *self); /* asked, not yet taken */
    int (*pollfds)(void *self, struct pollfd *fds, int cap, int *timeout_ms);
    int (*step)(void *self, kv_err *err); /* after poll: advance; -1 only on kevo's own failure */
    int (*take)(void *self, kv_mut_done *out); /* 0, or KV_NOTFOUND */
    void (*usage)(void *self, kv_mut_usage *out);
    /* Why no request can succeed any more (an endpoint that failed too many
     * in a row), or NULL; what is in flight still comes back. */
    const char *(*failing)(void *self);
    void (*destroy)(void *self); /* abandons what is in flight */
} kv_mutator_ops;

typedef struct {
    const kv_mutator_ops *ops;
    void *self;
} kv_mutator;

#endif
