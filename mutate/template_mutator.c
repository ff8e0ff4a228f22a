/* template_mutator.c — the template mutator behind the mutator interface
 * (mutator.h): each request is answered at once by template.c's moves on the
 * parent (and the second parent of its pattern), kept until taken; a parent
 * generated from a schedule gets structural moves (template_sched.c). */
#include <stdlib.h>
#include <string.h>

#include "mutate/template.h"

/* Fruitless proposals in a row (duplicates, no move) after which a jump to a
 * random point of the pattern's space is asked for rather than a step around
 * the parent. */
#define JUMP_AFTER 8

typedef struct {
    kv_mut_done_list done; /* answered, not yet taken */
} tpl_mutator;

static int tpl_room(void *self, int eval_room)
{
    (void)self;
    return eval_room > 0 ? eval_room : 0; /* answered at once: no more than can be evaluated */
}

static int tpl_ask(void *self, const kv_mut_request *rq, kv_err *err)
{
    tpl_mutator *m = self;
    kv_tpl_in in = {.lib = rq->lib,
                    .pattern = rq->pattern,
                    .parent_src = rq->parent_src,
                    .parent_len = rq->parent_len,
                    .parent_id = rq->parent,
                    .other_src = rq->other_src,
                    .other_len = rq->other_len,
                    .other_id = rq->other,
                    .target_cell = rq->target,
                    .allow_nvls = rq->allow_nvls,
                    .op = rq->fruitless >= JUMP_AFTER ? KV_TPL_JUMP : KV_TPL_ANY};
    kv_mut_done d;
    memset(&d, 0, sizeof d);
    kv_err why = {{0}};
    int rc = kv_template_propose(&in, rq->rng, &d.prop, &why);
    if (rc == 1 && in.op == KV_TPL_JUMP) { /* nothing to draw: the usual moves */
        in.op = KV_TPL_ANY;
        rc = kv_template_propose(&in, rq->rng, &d.prop, &why);
    }
    if (rc < 0)
        return kv_err_set(err, "template mutator: %s", why.msg);
    d.id = rq->id;
    d.outcome = rc == 0 ? KV_MUT_CANDIDATE : KV_MUT_NO_MOVE; /* no move: nothing new from
                                                                * this parent now */
    if (kv_mut_done_list_push(&m->done, &d) != 0) {
        kv_mut_done_free(&d);
        return kv_err_set(err, "out of memory");
    }
    return 1;
}

static int tpl_in_flight(void *self)
{
    return ((tpl_mutator *)self)->done.n;
}

static int tpl_pollfds(void *self, struct pollfd *fds, int cap, int *timeout_ms)
{
    (void)self, (void)fds, (void)cap, (void)timeout_ms;
    return 0;
}

static int tpl_step(void *self, kv_err *err)
{
    (void)self, (void)err;
    return 0;
}

static int tpl_take(void *self, kv_mut_done *out)
{
    return kv_mut_done_list_take(&((tpl_mutator *)self)->done, out);
}

static void tpl_usage(void *self, kv_mut_usage *out)
{
    (void)self;
    memset(out, 0, sizeof *out); /* no calls, nothing spent */
}

static const char *tpl_failing(void *self)
{
    (void)self;
    return NULL;
}

static void tpl_destroy(void *self)
{
    tpl_mutator *m = self;
    if (!m)
        return;
    kv_mut_done_list_free(&m->done);
    free(m);
}

static const kv_mutator_ops tpl_ops = {
    .recombines = 1,
    .needs_seeds = 1,
    .room = tpl_room,
    .ask = tpl_ask,
    .in_flight = tpl_in_flight,
    .pollfds = tpl_pollfds,
    .step = tpl_step,
    .take = tpl_take,
    .usage = tpl_usage,
    .failing = tpl_failing,
    .destroy = tpl_destroy,
};

int kv_template_mutator_new(kv_mutator *out, kv_err *err)
{
    tpl_mutator *m = calloc(1, sizeof *m);
    if (!m)
        return kv_err_set(err, "out of memory");
    kv_mut_done_list_init(&m->done);
    out->ops = &tpl_ops;
    out->self = m;
    return 0;
}
