/* llm_propose.c — candidates from the LLM mutator. A request is sent for
 * the search's pick (kv_run_choose, as for the template mutator) and kept
 * with it until its reply comes. A reply whose text applies to the parent
 * (mutate/reply.h) becomes a candidate exactly like a template proposal;
 * a failed request or an unusable reply becomes a proposal attempt without
 * a program, its reason in the detail. Either way the attempt carries the
 * request's tokens and cost, added to the run state in the same commit. */
#include <stdlib.h>
#include <string.h>

#include "mutate/reply.h"
#include "search/run_state.h"

int kv_run_llm_open(kv_run *r, kv_err *err)
{
    /* seeded from the run's random state without drawing from it, so a
     * resumed run jitters its back-offs differently but repeatably */
    kv_rng seed = r->rng;
    return kv_llm_new(&r->cfg->llm, kv_rng_next(&seed), &r->llm, err);
}

void kv_run_llm_close(kv_run *r)
{
    kv_llm_free(r->llm);
    r->llm = NULL;
    while (r->asks) {
        kv_run_ask *a = r->asks;
        r->asks = a->next;
        free(a->parent_src);
        free(a);
    }
    kv_run_llm_text_free(&r->text);
}

int kv_run_llm_in_flight(const kv_run *r)
{
    return r->llm ? kv_llm_in_flight(r->llm) : 0;
}

const char *kv_run_llm_dead(const kv_run *r)
{
    return r->llm && r->llm_failures >= KV_LLM_DEAD_AFTER ? r->llm_last_error : NULL;
}

const char *kv_run_llm_budget(const kv_run *r, int with_in_flight)
{
    const kv_cfg_budget *b = &r->cfg->budget;
    if (!r->llm)
        return NULL;
    if (r->llm_no_room)
        return r->llm_no_room;
    uint64_t tokens = r->state.tokens_in + r->state.tokens_out, more = 0;
    double cost = r->state.cost_usd, usd = 0;
    if (with_in_flight)
        kv_llm_max_in_flight(r->llm, &more, &usd);
    if (b->llm_tokens > 0 && tokens + more >= (uint64_t)b->llm_tokens)
        return "LLM token budget spent";
    if (b->cost_usd > 0 && cost + usd >= b->cost_usd)
        return "LLM cost budget spent";
    return NULL;
}

/* Whether a request that may take up to `tokens` and `usd` fits in the
 * budgets beside what is spent and what the requests in flight may still
 * take: NULL, or the budget it could overshoot. */
static const char *no_room(const kv_run *r, uint64_t tokens, double usd)
{
    const kv_cfg_budget *b = &r->cfg->budget;
    uint64_t more;
    double more_usd;
    kv_llm_max_in_flight(r->llm, &more, &more_usd);
    tokens += r->state.tokens_in + r->state.tokens_out + more;
    usd += r->state.cost_usd + more_usd;
    if (b->llm_tokens > 0 && tokens > (uint64_t)b->llm_tokens)
        return "LLM token budget spent";
    if (b->cost_usd > 0 && usd > b->cost_usd)
        return "LLM cost budget spent";
    return NULL;
}

static void emit_llm(kv_run *r, int problem, const kv_llm_reply *rep, const char *reason)
{
    cJSON *ev = kv_run_event_new(r, "llm");
    cJSON_AddStringToObject(ev, "problem", r->problems[problem].problem.name);
    cJSON_AddNumberToObject(ev, "ticket", (double)rep->ticket);
    cJSON_AddStringToObject(ev, "model", rep->model);
    cJSON_AddBoolToObject(ev, "ok", rep->ok);
    cJSON_AddNumberToObject(ev, "tokens_in", (double)rep->tokens_in);
    cJSON_AddNumberToObject(ev, "tokens_out", (double)rep->tokens_out);
    if (rep->tokens_estimated)
        cJSON_AddBoolToObject(ev, "tokens_estimated", 1);
    cJSON_AddNumberToObject(ev, "cost_usd", rep->cost_usd);
    cJSON_AddNumberToObject(ev, "wall_s", rep->wall_s);
    cJSON_AddNumberToObject(ev, "attempts", rep->attempts);
    cJSON_AddStringToObject(ev, "reason", reason);
    kv_run_event_emit(r, ev);
}

int kv_run_llm_ask(kv_run *r, kv_err *err)
{
    kv_run_pick pk;
    /* the last request did not fit beside those in flight: none is built
     * again before one of them has answered */
    if (r->llm_wait_below > 0 && kv_llm_in_flight(r->llm) >= r->llm_wait_below)
        return 0;
    r->llm_wait_below = 0;
    if (kv_run_choose(r, &pk) != 0) { /* no elite anywhere yet */
        r->fruitless++;
        return 0;
    }
    r->proposals++;
    kv_run_ask *a = calloc(1, sizeof *a);
    if (!a)
        return kv_err_set(err, "out of memory");
    a->pick = pk;
    kv_txn *t = NULL;
    if (kv_read_begin(r->archive, &t, err) != 0) {
        free(a);
        return -1;
    }
    int rc = kv_get_source(t, pk.parent, &a->parent_src, &a->parent_len, err);
    kv_txn_abort(t);
    if (rc != 0) {
        free(a);
        return rc < 0 ? -1 : kv_err_set(err, "program %llu (a parent) has no source",
                                         (unsigned long long)pk.parent);
    }
    char *sys = NULL, *user = NULL;
    kv_err why = {{0}};
    rc = kv_run_llm_prompt(r, &pk, a->parent_src, &sys, &user, &why);
    if (rc == 0) {
        /* the request's own maximum counts before it is sent: a budget is
         * never overshot by the request that spends it */
        int model = kv_llm_draw_model(r->llm, &r->rng);
        uint64_t max_tokens;
        double max_usd;
        kv_llm_request_max(&r->cfg->llm, model, strlen(sys) + strlen(user), &max_tokens, &max_usd);
        const char *full = no_room(r, max_tokens, max_usd);
        if (full) {
            /* with requests in flight, their replies may leave room (they
             * count at their maximum); with none, nothing will */
            if (kv_llm_in_flight(r->llm) == 0)
                r->llm_no_room = full;
            else
                r->llm_wait_below = kv_llm_in_flight(r->llm);
            rc = 3;
        } else if (kv_llm_submit(r->llm, sys, user, model, &r->rng, &a->ticket, err) != 0) {
            rc = -1;
        }
    } else if (rc < 0) {
        *err = why;
    }
    free(sys);
    free(user);
    if (rc == 0) {
        a->next = r->asks;
        r->asks = a;
        return 1;
    }
    free(a->parent_src);
    free(a);
    if (rc < 0)
        return -1;
    if (rc == 3) { /* no room in the budgets: not sent, nothing to record */
        r->proposals--;
        return 0;
    }
    /* no request: the parent does not fit the prompt's budget */
    kv_llm_reply none;
    memset(&none, 0, sizeof none);
    emit_llm(r, pk.problem, &none, why.msg);
    return kv_run_add_refusal(r, &pk, "llm", "", why.msg, NULL, err);
}

static kv_run_ask *unlink_ask(kv_run *r, uint64_t ticket)
{
    for (kv_run_ask **p = &r->asks; *p; p = &(*p)->next)
        if ((*p)->ticket == ticket) {
            kv_run_ask *a = *p;
            *p = a->next;
            return a;
        }
    return NULL;
}

/* One reply: a candidate, or a refusal. 0, 2 at the tests' crash point, -1. */
static int handle_reply(kv_run *r, const kv_llm_reply *rep, kv_err *err)
{
    kv_run_ask *a = unlink_ask(r, rep->ticket);
    if (!a) /* cannot happen */
        return kv_err_set(err, "the LLM client returned an unknown ticket %llu",
                          (unsigned long long)rep->ticket);
    kv_run_spend sp = {rep->tokens_in, rep->tokens_out, rep->cost_usd, rep->wall_s};
    char model[KV_NAME_MAX], why[600] = "", refused[512];
    snprintf(model, sizeof model, "%.*s", KV_NAME_MAX - 1, rep->model);
    char *src = NULL;
    size_t len = 0;
    int rc = 0;
    if (!rep->ok) {
        snprintf(why, sizeof why, "the request failed: %s", rep->error);
        r->llm_failures++;
        snprintf(r->llm_last_error, sizeof r->llm_last_error, "%s", rep->error);
    } else {
        r->llm_failures = 0;
        rc = kv_reply_apply(a->parent_src, a->parent_len, rep->text, &src, &len, refused,
                            sizeof refused);
        if (rc == 1)
            snprintf(why, sizeof why, "the reply cannot be used: %s", refused);
    }
    if (rc < 0) {
        free(a->parent_src);
        free(a);
        return kv_err_set(err, "out of memory");
    }
    emit_llm(r, a->pick.problem, rep, why);
    /* the attempt says when its tokens are an estimate (llm.h) */
    const char *est = rep->tokens_estimated ? " [tokens estimated: no usable usage in the reply]"
                                            : "";
    if (!src && est[0]) {
        size_t l = strlen(why);
        snprintf(why + l, sizeof why - l, "%s", est);
    }
    if (src) {
        kv_run_task *t = calloc(1, sizeof *t);
        if (!t) {
            free(src);
            rc = kv_err_set(err, "out of memory");
        } else {
            char note[256], cell[KV_CELL_NAME_MAX];
            kv_cell_name(a->pick.target, cell);
            snprintf(note, sizeof note, "%s's reply to #%llu, aiming at %s%s", model,
                     (unsigned long long)a->pick.parent, cell, est);
            t->src = src; /* taken over */
            t->len = len;
            snprintf(t->op, sizeof t->op, "llm");
            snprintf(t->model, sizeof t->model, "%s", model);
            t->n_parents = 1;
            t->parents[0] = a->pick.parent;
            rc = kv_run_add_candidate(r, t, &a->pick, note, &sp, err);
        }
    } else {
        rc = kv_run_add_refusal(r, &a->pick, "llm", model, why, &sp, err);
    }
    free(a->parent_src);
    free(a);
    return rc;
}

int kv_run_llm_take(kv_run *r, kv_err *err)
{
    kv_llm_reply rep;
    int rc = 0;
    while (rc >= 0 && rc != 2 && kv_llm_take(r->llm, &rep) == 0) {
        rc = handle_reply(r, &rep, err);
        kv_llm_reply_free(&rep);
    }
    return rc < 0 ? -1 : rc == 2 ? 2 : 0;
}
