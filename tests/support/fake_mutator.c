/* fake_mutator.c — a scripted stand-in for the mutators (mutate/mutator.h),
 * for driving the search loop on the CPU: each request is answered
 * `delay_ms` after it was made (the loop is woken by the timeout alone, as
 * no descriptor is polled), with the outcome the script names for it. Like
 * the LLM mutator, a request whose cost (`tokens`, `usd`) does not fit the
 * budgets beside those in flight is not taken. */
#include "fake_mutator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

typedef struct fake_ask {
    kv_mut_done d;
    int64_t due_ns;
    char letter;
    struct fake_ask *next;
} fake_ask;

typedef struct {
    kv_fake_mutator_opts o;
    fake_ask *asks; /* in the order made */
    int n;
    int failed_in_row;
    const char *full;
    char failing[128];
    kv_fake_mutator_counts c;
} fake;

static int due(const fake_ask *a)
{
    return a->due_ns <= kv_monotonic_ns();
}

static int fk_room(void *self, int eval_room)
{
    fake *f = self;
    (void)eval_room;
    return f->o.concurrency > f->n ? f->o.concurrency - f->n : 0;
}

static int fk_ask(void *self, const kv_mut_request *rq, kv_err *err)
{
    fake *f = self;
    if (f->o.tokens > 0) {
        uint64_t n = (uint64_t)f->n + 1;
        const char *over =
            kv_mut_budget_over(&rq->budget, n * f->o.tokens, (double)n * f->o.usd, 1);
        if (over) {
            if (f->n == 0)
                f->full = over;
            f->c.declined++;
            return 0;
        }
    }
    fake_ask *a = calloc(1, sizeof *a);
    if (!a)
        return kv_err_set(err, "out of memory");
    if (rq->island >= 0 && rq->island < KV_FAKE_MUTATOR_ISLANDS &&
        f->c.first_parent[rq->island] == 0) {
        f->c.first_parent[rq->island] = rq->parent;
        f->c.first_parent_len[rq->island] = rq->parent_len;
    }
    size_t len = strlen(f->o.script);
    a->letter = f->o.script[f->c.asked % len];
    a->due_ns = kv_monotonic_ns() + (int64_t)(f->o.delay_ms * 1e6);
    kv_mut_done *d = &a->d;
    d->id = rq->id;
    kv_proposal *p = &d->prop;
    /* paid calls stand for a model's (search_check.c: only those record duplicates) */
    snprintf(p->op, sizeof p->op, "%s", f->o.tokens > 0 ? "llm" : "fake");
    snprintf(p->model, sizeof p->model, "%s",
             a->letter == 'c' || a->letter == 'd' ? rq->pattern : "fake");
    p->n_parents = 1;
    p->parents[0] = rq->parent;
    if (a->letter == 'c' || a->letter == 'd') {
        char line[64];
        int k = a->letter == 'c'
                    ? snprintf(line, sizeof line, "\nstatic const int fake_%llu = 1;\n",
                               (unsigned long long)f->c.asked)
                    : 0;
        p->src = malloc(rq->parent_len + (size_t)k + 1);
        if (!p->src) {
            free(a);
            return kv_err_set(err, "out of memory");
        }
        memcpy(p->src, rq->parent_src, rq->parent_len);
        memcpy(p->src + rq->parent_len, line, (size_t)k);
        p->len = rq->parent_len + (size_t)k;
        p->src[p->len] = '\0';
        snprintf(p->note, sizeof p->note, "fake %c", a->letter);
        d->outcome = KV_MUT_CANDIDATE;
    } else if (a->letter == 'r' || a->letter == 'x') {
        d->outcome = KV_MUT_REFUSED;
        snprintf(d->why, sizeof d->why, "%s",
                 a->letter == 'r' ? "fake: refused" : "fake: the call failed");
    } else {
        d->outcome = KV_MUT_NO_MOVE;
    }
    if (f->o.tokens > 0 && a->letter != 'n') {
        d->call.made = 1;
        d->call.ticket = f->c.asked + 1;
        d->call.ok = a->letter != 'x';
        d->call.tokens_in = f->o.tokens;
        d->call.cost_usd = f->o.usd;
        d->call.attempts = 1;
        snprintf(d->call.model, sizeof d->call.model, "fake");
        snprintf(d->call.reason, sizeof d->call.reason, "%s", d->why);
    }
    fake_ask **q = &f->asks;
    while (*q)
        q = &(*q)->next;
    *q = a;
    f->n++;
    f->c.asked++;
    return 1;
}

static int fk_in_flight(void *self)
{
    return ((fake *)self)->n;
}

static int fk_pollfds(void *self, struct pollfd *fds, int cap, int *timeout_ms)
{
    fake *f = self;
    (void)fds, (void)cap;
    int64_t now = kv_monotonic_ns();
    for (const fake_ask *a = f->asks; a; a = a->next) {
        int ms = a->due_ns <= now ? 0 : (int)((a->due_ns - now) / 1000000) + 1;
        if (*timeout_ms < 0 || ms < *timeout_ms)
            *timeout_ms = ms;
    }
    return 0;
}

static int fk_step(void *self, kv_err *err)
{
    (void)self, (void)err;
    return 0;
}

/* The oldest answer that is due (answers come in the order asked). */
static int fk_take(void *self, kv_mut_done *out)
{
    fake *f = self;
    fake_ask *a = f->asks;
    if (!a || !due(a))
        return KV_NOTFOUND;
    f->asks = a->next;
    f->n--;
    f->c.taken++;
    f->c.answered[(unsigned char)a->letter & 127]++;
    f->failed_in_row = a->letter == 'x'   ? f->failed_in_row + 1
                       : a->letter == 'n' ? f->failed_in_row
                                          : 0;
    *out = a->d;
    free(a);
    return 0;
}

static void fk_usage(void *self, kv_mut_usage *out)
{
    fake *f = self;
    out->tokens = (uint64_t)f->n * f->o.tokens;
    out->usd = f->n * f->o.usd;
    out->full = f->full;
}

static const char *fk_failing(void *self)
{
    fake *f = self;
    if (f->o.fail_after <= 0 || f->failed_in_row < f->o.fail_after)
        return NULL;
    snprintf(f->failing, sizeof f->failing, "fake: %d calls failed in a row", f->failed_in_row);
    return f->failing;
}

static void fk_destroy(void *self)
{
    fake *f = self;
    while (f && f->asks) {
        fake_ask *a = f->asks;
        f->asks = a->next;
        kv_mut_done_free(&a->d);
        free(a);
    }
    free(f);
}

static const kv_mutator_ops fk_ops = {
    .recombines = 0,
    .room = fk_room,
    .ask = fk_ask,
    .in_flight = fk_in_flight,
    .pollfds = fk_pollfds,
    .step = fk_step,
    .take = fk_take,
    .usage = fk_usage,
    .failing = fk_failing,
    .destroy = fk_destroy,
};

int kv_fake_mutator_new(const kv_fake_mutator_opts *o, kv_mutator *out)
{
    fake *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->o = *o;
    out->ops = &fk_ops;
    out->self = f;
    return 0;
}

void kv_fake_mutator_counts_of(const kv_mutator *m, kv_fake_mutator_counts *out)
{
    *out = ((const fake *)m->self)->c;
}
