/* asks.c — the search's side of the mutator (mutate/mutator.h): opening the
 * one the configuration names, a request for each of kv_run_choose's picks
 * (the same choice whatever the mutator), and what comes back: a candidate
 * (propose.c records and queues it), a refusal (a proposal attempt with its
 * reason), or no move (only counted). A model call's tokens and cost go
 * with the attempt into the run state, in the same commit, and each call is
 * an `llm` event. */
#include <stdlib.h>
#include <string.h>

#include "mutate/llm_mutator.h"
#include "mutate/template.h"
#include "search/run_state.h"

int kv_run_mut_check(kv_run *r, kv_err *err)
{
    if (r->env->mutator.ops || r->cfg->mutator != KV_MUTATOR_LLM)
        return 0;
    if (kv_llm_mutator_check(&r->cfg->llm, err) != 0)
        return -1;
    return kv_run_llm_text_load(r, err);
}

/* The LLM mutator's prompt callback: llm_prompt.c for the request's pick. */
static int llm_prompt(void *ctx, const kv_mut_request *rq, char **system, char **user, kv_err *err)
{
    kv_run_pick pk;
    memset(&pk, 0, sizeof pk);
    pk.problem = rq->problem;
    pk.island = rq->island;
    pk.parent = rq->parent;
    pk.target = rq->target;
    return kv_run_llm_prompt(ctx, &pk, rq->parent_src, system, user, err);
}

int kv_run_mut_open(kv_run *r, kv_err *err)
{
    if (r->env->mutator.ops) {
        r->mut = r->env->mutator;
        return 0;
    }
    int rc;
    if (r->cfg->mutator == KV_MUTATOR_LLM) {
        /* seeded from the run's random state without drawing from it, so a
         * resumed run jitters its back-offs differently but repeatably */
        kv_rng seed = r->rng;
        kv_llm_mutator_opts o = {
            .cfg = &r->cfg->llm, .seed = kv_rng_next(&seed), .prompt = llm_prompt, .prompt_ctx = r};
        rc = kv_llm_mutator_new(&o, &r->mut, err);
    } else {
        rc = kv_template_mutator_new(&r->mut, err);
    }
    r->mut_owned = rc == 0;
    return rc;
}

void kv_run_mut_close(kv_run *r)
{
    if (r->mut_owned)
        r->mut.ops->destroy(r->mut.self);
    memset(&r->mut, 0, sizeof r->mut);
    r->mut_owned = 0;
    while (r->asks) {
        kv_run_ask *a = r->asks;
        r->asks = a->next;
        free(a);
    }
    kv_run_llm_text_free(&r->text);
}

int kv_run_mut_in_flight(const kv_run *r)
{
    return r->mut.ops ? r->mut.ops->in_flight(r->mut.self) : 0;
}

const char *kv_run_mut_failing(const kv_run *r)
{
    return r->mut.ops ? r->mut.ops->failing(r->mut.self) : NULL;
}

static kv_mut_budget budget_of(const kv_run *r)
{
    kv_mut_budget b = {.tokens_limit = r->cfg->budget.llm_tokens,
                       .tokens_spent = r->state.tokens_in + r->state.tokens_out,
                       .usd_limit = r->cfg->budget.cost_usd,
                       .usd_spent = r->state.cost_usd};
    return b;
}

const char *kv_run_mut_budget(const kv_run *r, int with_in_flight)
{
    if (!r->mut.ops)
        return NULL;
    kv_mut_usage u;
    r->mut.ops->usage(r->mut.self, &u);
    if (u.full)
        return u.full;
    kv_mut_budget b = budget_of(r);
    return kv_mut_budget_over(&b, with_in_flight ? u.tokens : 0, with_in_flight ? u.usd : 0, 0);
}

int kv_run_mut_ask(kv_run *r, kv_err *err)
{
    kv_run_pick pk;
    if (kv_run_choose(r, &pk) !=
        0) { /* no elite anywhere: nothing to derive from until a result comes */
        r->fruitless++;
        return 0;
    }
    kv_run_problem *p = &r->problems[pk.problem];
    const kv_map_cell *parent = &p->grid.islands[pk.island].cells[pk.parent_cell];
    kv_mut_request rq = {.id = ++r->next_ask,
                         .problem = pk.problem,
                         .lib = &p->lib,
                         .island = pk.island,
                         .parent = pk.parent,
                         .pattern = parent->pattern,
                         .target = pk.target,
                         .allow_nvls = r->cfg->eval.allow_nvls,
                         .fruitless = r->fruitless,
                         .budget = budget_of(r),
                         .rng = &r->rng};
    if (r->mut.ops->recombines)
        rq.other = kv_map_same_pattern(&p->grid, pk.island, parent->pattern, parent->id, &r->rng);
    char *psrc = NULL, *osrc = NULL;
    kv_txn *txn = NULL;
    if (kv_read_begin(r->archive, &txn, err) != 0)
        return -1;
    int rc = kv_get_source(txn, pk.parent, &psrc, &rq.parent_len, err);
    if (rc == 0 && rq.other)
        rc = kv_get_source(txn, rq.other, &osrc, &rq.other_len, err);
    kv_txn_abort(txn);
    kv_run_ask *a = rc == 0 ? calloc(1, sizeof *a) : NULL;
    if (rc == 0 && !a)
        rc = kv_err_set(err, "out of memory");
    if (rc == 0) {
        a->id = rq.id;
        a->pick = pk;
        rq.parent_src = psrc;
        rq.other_src = osrc;
        rc = r->mut.ops->ask(r->mut.self, &rq, err);
    } else if (rc == KV_NOTFOUND) {
        rc =
            kv_err_set(err, "program %llu (a parent) has no source", (unsigned long long)pk.parent);
    }
    free(psrc);
    free(osrc);
    if (rc != 1) {
        free(a);
        return rc < 0 ? -1 : 2;
    }
    a->next = r->asks;
    r->asks = a;
    r->proposals++;
    return 1;
}

static kv_run_ask *unlink_ask(kv_run *r, uint64_t id)
{
    for (kv_run_ask **p = &r->asks; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            kv_run_ask *a = *p;
            *p = a->next;
            return a;
        }
    return NULL;
}

static void emit_call(kv_run *r, int problem, const kv_mut_call *c)
{
    cJSON *ev = kv_run_event_new(r, "llm");
    cJSON_AddStringToObject(ev, "problem", r->problems[problem].problem.name);
    cJSON_AddNumberToObject(ev, "ticket", (double)c->ticket);
    cJSON_AddStringToObject(ev, "model", c->model);
    cJSON_AddBoolToObject(ev, "ok", c->ok);
    cJSON_AddNumberToObject(ev, "tokens_in", (double)c->tokens_in);
    cJSON_AddNumberToObject(ev, "tokens_out", (double)c->tokens_out);
    if (c->tokens_estimated)
        cJSON_AddBoolToObject(ev, "tokens_estimated", 1);
    cJSON_AddNumberToObject(ev, "cost_usd", c->cost_usd);
    cJSON_AddNumberToObject(ev, "wall_s", c->wall_s);
    cJSON_AddNumberToObject(ev, "attempts", c->attempts);
    cJSON_AddStringToObject(ev, "reason", c->reason);
    kv_run_event_emit(r, ev);
}

/* One finished request: 0, or -1. */
static int handle(kv_run *r, kv_mut_done *d, kv_err *err)
{
    kv_run_ask *a = unlink_ask(r, d->id);
    if (!a) /* cannot happen */
        return kv_err_set(err, "the mutator returned an unknown request %llu",
                          (unsigned long long)d->id);
    kv_run_pick pk = a->pick;
    free(a);
    const kv_mut_call *c = &d->call;
    kv_run_spend sp = {c->tokens_in, c->tokens_out, c->cost_usd, c->wall_s};
    if (c->made)
        emit_call(r, pk.problem, c);
    if (d->outcome == KV_MUT_NO_MOVE) { /* nothing new to try from this parent now */
        r->no_moves++;
        r->fruitless++;
        return 0;
    }
    if (d->outcome == KV_MUT_REFUSED)
        return kv_run_add_refusal(r, &pk, d->prop.op, d->prop.model, d->why, c->made ? &sp : NULL,
                                  err) < 0
                   ? -1
                   : 0;
    kv_run_task *t = calloc(1, sizeof *t);
    if (!t)
        return kv_err_set(err, "out of memory");
    t->src = d->prop.src; /* taken over */
    t->len = d->prop.len;
    d->prop.src = NULL;
    snprintf(t->op, sizeof t->op, "%s", d->prop.op);
    snprintf(t->model, sizeof t->model, "%s", d->prop.model);
    t->n_parents = d->prop.n_parents < 2 ? d->prop.n_parents : 2;
    memcpy(t->parents, d->prop.parents, sizeof(uint64_t) * (size_t)t->n_parents);
    return kv_run_add_candidate(r, t, &pk, d->prop.note, c->made ? &sp : NULL, err) < 0 ? -1 : 0;
}

int kv_run_mut_take(kv_run *r, kv_err *err)
{
    kv_mut_done d;
    while (r->mut.ops->take(r->mut.self, &d) == 0) {
        int rc = handle(r, &d, err);
        kv_mut_done_free(&d);
        if (rc != 0)
            return -1;
    }
    return 0;
}
