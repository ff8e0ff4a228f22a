/* llm_mutator.c — the LLM mutator (llm_mutator.h). A request is sent for
 * each of the search's requests, with the parent's source kept until its
 * reply comes. A reply whose text applies to the parent (reply.h) is a
 * candidate (op "llm", the model, the parent; "llm-schedule" when it is a
 * schedule, the candidate generated from it); a failed request or an
 * unusable reply is a refusal with its reason. Either carries the call's
 * tokens and cost, which the search records and counts in the budgets. A
 * request is sent only when its own maximum (kv_llm_request_max) fits the
 * budgets beside what is spent and what the requests in flight may still
 * take. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cell.h"
#include "mutate/llm.h"
#include "mutate/llm_mutator.h"
#include "mutate/reply.h"

/* A request in flight and what its reply is for. */
typedef struct ask {
    uint64_t ticket;
    uint64_t id; /* the search's request */
    uint64_t parent;
    int target;
    char *parent_src; /* owned: the reply's edits apply to it */
    size_t parent_len;
    struct ask *next;
} ask;

typedef struct {
    kv_cfg_llm cfg;
    kv_llm *client;
    kv_mut_prompt_fn prompt;
    void *prompt_ctx;
    ask *asks;             /* sent, no reply yet */
    kv_mut_done_list done; /* finished, not yet taken */
    int failures;          /* requests in a row that failed (no reply to use) */
    char last_error[512];  /* the last one's reason, scrubbed of the key */
    char failing[640];
    const char *no_room; /* set when, nothing in flight, the next request's
                                  * maximum would overshoot a budget: which one */
    int wait_below;      /* > 0: the last request did not fit beside this many
                                  * in flight; the next waits until fewer are */
} llm_mutator;

/* Hands d to the list; on failure frees it: 0 or -1. */
static int push(llm_mutator *m, kv_mut_done *d, kv_err *err)
{
    if (kv_mut_done_list_push(&m->done, d) == 0)
        return 0;
    kv_mut_done_free(d);
    return kv_err_set(err, "out of memory");
}

static void free_ask(ask *a)
{
    if (a) {
        free(a->parent_src);
        free(a);
    }
}

static int llm_room(void *self, int eval_room)
{
    llm_mutator *m = self;
    (void)eval_room; /* replies come later: asked whatever the evaluator's room */
    int flying = kv_llm_in_flight(m->client);
    /* the last request did not fit beside those in flight: none is built
     * again before one of them has answered */
    if (m->wait_below > 0 && flying >= m->wait_below)
        return 0;
    return m->cfg.concurrency > flying ? m->cfg.concurrency - flying : 0;
}

static int llm_ask(void *self, const kv_mut_request *rq, kv_err *err)
{
    llm_mutator *m = self;
    m->wait_below = 0;
    ask *a = calloc(1, sizeof *a);
    if (!a || !(a->parent_src = malloc(rq->parent_len + 1))) {
        free(a);
        return kv_err_set(err, "out of memory");
    }
    memcpy(a->parent_src, rq->parent_src, rq->parent_len);
    a->parent_src[rq->parent_len] = '\0';
    a->parent_len = rq->parent_len;
    a->id = rq->id;
    a->parent = rq->parent;
    a->target = rq->target;
    char *sys = NULL, *user = NULL;
    kv_err why = {{0}};
    int rc = m->prompt(m->prompt_ctx, rq, &sys, &user, &why);
    if (rc == 0) {
        /* the request's own maximum counts before it is sent: a budget is
         * never overshot by the request that spends it */
        int model = kv_llm_draw_model(m->client, rq->rng);
        uint64_t max_tokens, more;
        double max_usd, more_usd;
        kv_llm_request_max(&m->cfg, model, strlen(sys) + strlen(user), &max_tokens, &max_usd);
        kv_llm_max_in_flight(m->client, &more, &more_usd);
        const char *full =
            kv_mut_budget_over(&rq->budget, max_tokens + more, max_usd + more_usd, 1);
        if (full) {
            /* with requests in flight, their replies may leave room (they
             * count at their maximum); with none, nothing will */
            if (kv_llm_in_flight(m->client) == 0)
                m->no_room = full;
            else
                m->wait_below = kv_llm_in_flight(m->client);
            rc = 3;
        } else if (kv_llm_submit(m->client, sys, user, model, rq->rng, &a->ticket, err) != 0) {
            rc = -1;
        }
    } else if (rc < 0) {
        *err = why;
    }
    free(sys);
    free(user);
    if (rc == 0) {
        a->next = m->asks;
        m->asks = a;
        return 1;
    }
    free_ask(a);
    if (rc != 1) /* -1, or 3: no room in the budgets, not sent, nothing to record */
        return rc < 0 ? -1 : 0;
    /* no request: the parent does not fit the prompt's budget */
    kv_mut_done d;
    memset(&d, 0, sizeof d);
    d.id = rq->id;
    d.outcome = KV_MUT_REFUSED;
    snprintf(d.prop.op, sizeof d.prop.op, "llm");
    snprintf(d.why, sizeof d.why, "%s", why.msg);
    d.call.made = 1;
    snprintf(d.call.reason, sizeof d.call.reason, "%s", why.msg);
    return push(m, &d, err) == 0 ? 1 : -1;
}

static ask *unlink_ask(llm_mutator *m, uint64_t ticket)
{
    for (ask **p = &m->asks; *p; p = &(*p)->next)
        if ((*p)->ticket == ticket) {
            ask *a = *p;
            *p = a->next;
            return a;
        }
    return NULL;
}

/* One reply into d: a candidate, or a refusal. 0, or -1 (err). */
static int from_reply(llm_mutator *m, const kv_llm_reply *rep, kv_mut_done *d, kv_err *err)
{
    ask *a = unlink_ask(m, rep->ticket);
    if (!a) /* cannot happen */
        return kv_err_set(err, "the LLM client returned an unknown ticket %llu",
                          (unsigned long long)rep->ticket);
    kv_mut_call *c = &d->call;
    c->made = 1;
    c->ticket = rep->ticket;
    snprintf(c->model, sizeof c->model, "%s", rep->model);
    c->ok = rep->ok;
    c->tokens_in = rep->tokens_in;
    c->tokens_out = rep->tokens_out;
    c->tokens_estimated = rep->tokens_estimated;
    c->cost_usd = rep->cost_usd;
    c->wall_s = rep->wall_s;
    c->attempts = rep->attempts;
    d->id = a->id;
    char model[KV_NAME_MAX], why[600] = "", refused[512];
    snprintf(model, sizeof model, "%.*s", KV_NAME_MAX - 1, rep->model);
    char *src = NULL;
    size_t len = 0;
    int rc = 0;
    kv_reply_kind kind = KV_REPLY_CODE;
    if (!rep->ok) {
        snprintf(why, sizeof why, "the request failed: %s", rep->error);
        m->failures++;
        snprintf(m->last_error, sizeof m->last_error, "%s", rep->error);
    } else {
        m->failures = 0;
        rc = kv_reply_use(a->parent_src, a->parent_len, rep->text, &src, &len, &kind, refused,
                          sizeof refused);
        if (rc == 1)
            snprintf(why, sizeof why, "the reply cannot be used: %s", refused);
    }
    if (rc < 0) {
        free_ask(a);
        return kv_err_set(err, "out of memory");
    }
    snprintf(c->reason, sizeof c->reason, "%s", why);
    /* the attempt says when its tokens are an estimate (llm.h) */
    const char *est =
        rep->tokens_estimated ? " [tokens estimated: no usable usage in the reply]" : "";
    kv_proposal *p = &d->prop;
    /* a schedule answer: the candidate generated from it (docs/mutation.md) */
    snprintf(p->op, sizeof p->op, "%s", kind == KV_REPLY_SCHEDULE ? "llm-schedule" : "llm");
    snprintf(p->model, sizeof p->model, "%s", model);
    if (src) {
        char cell[KV_CELL_NAME_MAX];
        kv_cell_name(a->target, cell);
        d->outcome = KV_MUT_CANDIDATE;
        p->src = src; /* taken over */
        p->len = len;
        p->n_parents = 1;
        p->parents[0] = a->parent;
        snprintf(p->note, sizeof p->note, "%s's %s to #%llu, aiming at %s%s", model,
                 kind == KV_REPLY_SCHEDULE ? "schedule" : "reply", (unsigned long long)a->parent,
                 cell, est);
    } else {
        size_t l = strlen(why);
        snprintf(why + l, sizeof why - l, "%s", est);
        d->outcome = KV_MUT_REFUSED;
        snprintf(d->why, sizeof d->why, "%s", why);
    }
    free_ask(a);
    return 0;
}

static int llm_in_flight(void *self)
{
    llm_mutator *m = self;
    return kv_llm_in_flight(m->client) + m->done.n;
}

static int llm_pollfds(void *self, struct pollfd *fds, int cap, int *timeout_ms)
{
    llm_mutator *m = self;
    if (m->done.n > 0)
        *timeout_ms = 0; /* something to take now */
    return kv_llm_pollfds(m->client, fds, cap, timeout_ms);
}

/* Drives the client, and turns every finished reply into a finished request. */
static int llm_step(void *self, kv_err *err)
{
    llm_mutator *m = self;
    if (kv_llm_step(m->client, err) != 0)
        return -1;
    kv_llm_reply rep;
    int rc = 0;
    while (rc == 0 && kv_llm_take(m->client, &rep) == 0) {
        kv_mut_done d;
        memset(&d, 0, sizeof d);
        rc = from_reply(m, &rep, &d, err);
        if (rc == 0)
            rc = push(m, &d, err);
        kv_llm_reply_free(&rep);
    }
    return rc;
}

static int llm_take(void *self, kv_mut_done *out)
{
    return kv_mut_done_list_take(&((llm_mutator *)self)->done, out);
}

static void llm_usage(void *self, kv_mut_usage *out)
{
    llm_mutator *m = self;
    memset(out, 0, sizeof *out);
    kv_llm_max_in_flight(m->client, &out->tokens, &out->usd);
    out->full = m->no_room;
}

static const char *llm_failing(void *self)
{
    llm_mutator *m = self;
    if (m->failures < KV_LLM_DEAD_AFTER)
        return NULL;
    snprintf(m->failing, sizeof m->failing,
             "the LLM endpoint failed %d requests in a row, the last: %s", KV_LLM_DEAD_AFTER,
             m->last_error);
    return m->failing;
}

static void llm_destroy(void *self)
{
    llm_mutator *m = self;
    if (!m)
        return;
    kv_llm_free(m->client);
    while (m->asks) {
        ask *a = m->asks;
        m->asks = a->next;
        free_ask(a);
    }
    kv_mut_done_list_free(&m->done);
    free(m);
}

static const kv_mutator_ops llm_ops = {
    .recombines = 0,
    .needs_seeds = 0, /* it writes code: a problem without seeds starts from its reference */
    .room = llm_room,
    .ask = llm_ask,
    .in_flight = llm_in_flight,
    .pollfds = llm_pollfds,
    .step = llm_step,
    .take = llm_take,
    .usage = llm_usage,
    .failing = llm_failing,
    .destroy = llm_destroy,
};

int kv_llm_mutator_check(const kv_cfg_llm *cfg, kv_err *err)
{
    return kv_llm_check(cfg, err);
}

int kv_llm_mutator_new(const kv_llm_mutator_opts *o, kv_mutator *out, kv_err *err)
{
    llm_mutator *m = calloc(1, sizeof *m);
    if (!m)
        return kv_err_set(err, "out of memory");
    m->cfg = *o->cfg;
    m->prompt = o->prompt;
    m->prompt_ctx = o->prompt_ctx;
    kv_mut_done_list_init(&m->done);
    if (kv_llm_new(o->cfg, o->seed, &m->client, err) != 0) {
        free(m);
        return -1;
    }
    out->ops = &llm_ops;
    out->self = m;
    return 0;
}
