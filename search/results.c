/* results.c — what a finished evaluation changes: the program's result and
 * attempt in the archive, the next step of its evaluation (screening → full
 * protocol → re-measurement), the island's grid, migration along the ring
 * of islands and re-seeding of the weakest island. Every change is one
 * archive transaction that also carries the run state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "search/run_state.h"
#include "search/store.h"

void kv_run_task_free(kv_run_task *t)
{
    if (!t)
        return;
    free(t->src);
    free(t);
}

void kv_run_append(kv_run *r, kv_run_task *t)
{
    t->next = NULL;
    kv_run_task **p = &r->tasks;
    while (*p)
        p = &(*p)->next;
    *p = t;
}

void kv_run_unlink(kv_run *r, kv_run_task *t)
{
    for (kv_run_task **p = &r->tasks; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            t->next = NULL;
            return;
        }
}

static void sync_state(kv_run *r)
{
    memcpy(r->state.rng, r->rng.s, sizeof r->state.rng);
    r->state.wall_s = r->wall_at_start + kv_run_elapsed_s(r);
    r->state.updated_ns = kv_wall_ns();
}

int kv_run_store(kv_run *r, kv_run_task *t, const kv_eval_report *rep, kv_stage stage, int offer,
                 double fitness, const char *next, int *taken, kv_err *err)
{
    sync_state(r);
    kv_run_problem *p = &r->problems[t->problem];
    kv_store_what w = {.problem = p->problem.name,
                       .op = t->op,
                       .model = t->model,
                       .stage = stage,
                       .island = t->island,
                       .n_parents = t->n_parents,
                       .parents = t->parents,
                       .n_islands = offer && t->island < 0 ? r->cfg->islands : 0,
                       .offer_own_island = offer && t->island >= 0,
                       .fitness = fitness,
                       .state = &r->state,
                       .next = next};
    kv_store_outcome so;
    if (kv_store_evaluation(r->archive, &w, t->src, t->len, rep, &so, err) != 0)
        return -1;
    if (taken)
        *taken = so.elites_taken;
    return 0;
}

/* One write transaction around fn, with the run state. */
static int with_txn(kv_run *r, int (*fn)(kv_run *, kv_txn *, void *, kv_err *), void *arg,
                    kv_err *err)
{
    kv_txn *t = NULL;
    sync_state(r);
    if (kv_write_begin(r->archive, &t, err) != 0)
        return -1;
    if (fn(r, t, arg, err) != 0 || kv_put_state(t, &r->state, err) != 0) {
        kv_txn_abort(t);
        return -1;
    }
    return kv_txn_commit(t, err);
}

typedef struct {
    int problem;
    int from, to;              /* islands (re-seeding) */
    const kv_map_island *snap; /* the islands before the move */
    int moved;
} move_arg;

static int offer_cell(kv_run *r, kv_txn *t, move_arg *m, int to, int cell, const kv_map_cell *c,
                      kv_err *err)
{
    kv_elite e;
    memset(&e, 0, sizeof e);
    snprintf(e.problem, sizeof e.problem, "%s", r->problems[m->problem].problem.name);
    e.island = to;
    kv_cell_name(cell, e.cell);
    e.program_id = c->id;
    e.fitness = c->fitness;
    e.since_ns = kv_wall_ns();
    int accepted = 0;
    if (kv_offer_elite(t, &e, &accepted, NULL, err) != 0)
        return -1;
    if (accepted)
        kv_map_offer(&r->problems[m->problem].grid, to, cell, c->id, c->fitness, c->pattern);
    m->moved += accepted;
    return 0;
}

static int best_of(const kv_map_island *is)
{
    int best = -1;
    for (int c = 0; c < KV_CELL_COUNT; c++)
        if (is->cells[c].id && (best < 0 || is->cells[c].fitness > is->cells[best].fitness))
            best = c;
    return best;
}

/* Every island sends its best elite (as it was before the migration) to the
 * next one on the ring. */
static int migrate_txn(kv_run *r, kv_txn *t, void *arg, kv_err *err)
{
    move_arg *m = arg;
    int K = r->problems[m->problem].grid.n_islands;
    for (int i = 0; i < K; i++) {
        int best = best_of(&m->snap[i]);
        if (best >= 0 && offer_cell(r, t, m, (i + 1) % K, best, &m->snap[i].cells[best], err))
            return -1;
    }
    return 0;
}

/* The weakest island `to` is emptied and gets every elite of `from`. */
static int reseed_txn(kv_run *r, kv_txn *t, void *arg, kv_err *err)
{
    move_arg *m = arg;
    kv_run_problem *p = &r->problems[m->problem];
    if (kv_clear_island(t, p->problem.name, m->to, NULL, err) != 0)
        return -1;
    kv_map_clear(&p->grid, m->to);
    for (int c = 0; c < KV_CELL_COUNT; c++)
        if (m->snap[m->from].cells[c].id &&
            offer_cell(r, t, m, m->to, c, &m->snap[m->from].cells[c], err) != 0)
            return -1;
    return 0;
}

static void emit_move(kv_run *r, const char *type, const move_arg *m)
{
    cJSON *ev = kv_run_event_new(r, type);
    cJSON_AddStringToObject(ev, "problem", r->problems[m->problem].problem.name);
    if (m->from >= 0) {
        cJSON_AddNumberToObject(ev, "from", m->from);
        cJSON_AddNumberToObject(ev, "to", m->to);
    }
    cJSON_AddNumberToObject(ev, "elites", m->moved);
    kv_run_event_emit(r, ev);
}

/* One move in one transaction. The grid is changed with the archive; when
 * the commit fails the grid is rebuilt from the snapshot, so both agree. */
static int move(kv_run *r, int (*fn)(kv_run *, kv_txn *, void *, kv_err *), move_arg *m,
                const char *type, kv_err *err)
{
    kv_map *g = &r->problems[m->problem].grid;
    size_t bytes = sizeof *g->islands * (size_t)g->n_islands;
    kv_map_island *snap = malloc(bytes);
    if (!snap)
        return kv_err_set(err, "out of memory");
    memcpy(snap, g->islands, bytes);
    m->snap = snap;
    int rc = with_txn(r, fn, m, err);
    if (rc != 0)
        memcpy(g->islands, snap, bytes);
    free(snap);
    m->snap = NULL;
    if (rc != 0)
        return -1;
    emit_move(r, type, m);
    return 0;
}

/* After an ok evaluation of problem pi (an accepted one: the candidate is a
 * correct member of the population): the ring migration every
 * migration_interval of them, re-seeding every reseed_interval. Counting
 * new elites instead would rarely move anything once improvements get
 * rare (the first GPU runs: 0 migrations in 1,482 evaluations). */
static int after_acceptance(kv_run *r, int pi, kv_err *err)
{
    kv_run_problem *p = &r->problems[pi];
    kv_map *g = &p->grid;
    int K = g->n_islands, rc = 0;
    p->accepted++;
    if (K >= 2 && r->cfg->migration_interval > 0 &&
        p->accepted % (uint64_t)r->cfg->migration_interval == 0) {
        move_arg m = {pi, -1, -1, NULL, 0};
        if ((rc = move(r, migrate_txn, &m, "migrate", err)) != 0)
            return rc;
    }
    if (K >= 2 && r->cfg->reseed_interval > 0 &&
        p->accepted % (uint64_t)r->cfg->reseed_interval == 0) {
        int best = kv_map_strongest(g), weak = kv_map_weakest(g, best);
        if (weak >= 0) {
            move_arg m = {pi, best, weak, NULL, 0};
            rc = move(r, reseed_txn, &m, "reseed", err);
        }
    }
    return rc;
}

static kv_run_task *find_task(kv_run *r, uint64_t id, kv_stage stage)
{
    for (kv_run_task *t = r->tasks; t; t = t->next)
        if (t->id == id && t->stage == stage && t->submitted)
            return t;
    return NULL;
}

/* The elite a candidate competes with on its island (NULL: none, or the cell
 * is unknown). */
static const kv_map_cell *rival(kv_run *r, const kv_run_task *t, const kv_eval_report *rep,
                                int *cell)
{
    *cell = rep->classified ? rep->cell : -1;
    if (*cell < 0 || t->island < 0)
        return NULL;
    const kv_map_cell *c = &r->problems[t->problem].grid.islands[t->island].cells[*cell];
    return c->id ? c : NULL;
}

static void emit_result(kv_run *r, const kv_run_task *t, const kv_eval_done *d, int taken)
{
    const kv_eval_report *rep = &d->report;
    cJSON *ev = kv_run_event_new(r, "result");
    cJSON_AddStringToObject(ev, "problem", r->problems[t->problem].problem.name);
    cJSON_AddNumberToObject(ev, "program", (double)t->id);
    cJSON_AddNumberToObject(ev, "island", t->island);
    cJSON_AddStringToObject(ev, "stage", kv_stage_name(t->stage));
    cJSON_AddStringToObject(ev, "op", t->op);
    cJSON_AddStringToObject(ev, "pattern", t->model);
    cJSON_AddStringToObject(ev, "verdict", kv_verdict_name(rep->verdict));
    char cell[KV_CELL_NAME_MAX];
    cJSON_AddStringToObject(ev, "cell", kv_eval_cell_name(rep, cell));
    cJSON_AddNumberToObject(ev, "speedup", rep->speedup);
    cJSON_AddNumberToObject(ev, "roofline", rep->roofline);
    cJSON_AddNumberToObject(ev, "gpu_s", rep->job.gpu_s);
    cJSON_AddNumberToObject(ev, "wall_s", rep->wall_s);
    cJSON_AddNumberToObject(ev, "group_s", d->group_s);
    cJSON_AddNumberToObject(ev, "elite", taken);
    cJSON_AddNumberToObject(ev, "best", r->problems[t->problem].best);
    /* each timed size's speedup, which kevo archive history follows */
    cJSON *sizes = cJSON_AddObjectToObject(ev, "sizes");
    for (int i = 0; sizes && i < rep->n_sizes; i++) {
        const kv_eval_size *s = &rep->sizes[i];
        if (s->timed && s->ok && !s->validation && s->speedup > 0)
            cJSON_AddNumberToObject(sizes, s->name, s->speedup);
    }
    kv_run_event_emit(r, ev);
}

int kv_run_handle_done(kv_run *r, kv_eval_done *d, kv_err *err)
{
    kv_run_task *t = find_task(r, d->id, d->stage);
    if (!t) /* not ours (cannot happen) */
        return kv_err_set(err, "the evaluator returned an unknown task %llu (%s)",
                          (unsigned long long)d->id, kv_stage_name(d->stage));
    kv_eval_report *rep = &d->report;
    kv_run_problem *p = &r->problems[t->problem];
    int ok = rep->verdict == KV_VERDICT_OK, cell = -1, taken = 0, next = 0;
    const kv_map_cell *c = rival(r, t, rep, &cell);
    double fitness = 0;
    r->state.evaluations++;
    p->evaluations++;
    if (rep->verdict == KV_VERDICT_IMPLAUSIBLE && p->implausible++ == 0) {
        char prefix[KV_NAME_MAX + 64];
        snprintf(prefix, sizeof prefix, "%s: program %llu is implausible: ", p->problem.name,
                 (unsigned long long)t->id);
        kv_run_say(r, "implausible", p->problem.name, "message", prefix, rep->message);
    }
    switch (t->stage) {
    case KV_STAGE_SEED:
        if (kv_run_store(r, t, rep, KV_STAGE_SEED, 1, 0, NULL, &taken, err) != 0)
            return -1;
        if (ok && cell >= 0)
            for (int i = 0; i < p->grid.n_islands; i++)
                kv_map_offer(&p->grid, i, cell, t->id, rep->speedup, t->model);
        break;
    case KV_STAGE_SCREEN:
        next = ok && cell >= 0 && (!c || rep->speedup >= KV_SCREEN_SLACK * c->fitness);
        if (kv_run_store(r, t, rep, KV_STAGE_SCREEN, 0, 0, next ? KV_NEXT_FULL : NULL, NULL, err) !=
            0)
            return -1;
        break;
    case KV_STAGE_FULL:
        next = ok && cell >= 0 && (!c || rep->speedup > c->fitness);
        if (kv_run_store(r, t, rep, KV_STAGE_FULL, 0, 0, next ? KV_NEXT_REMEASURE : NULL, NULL,
                         err) != 0)
            return -1;
        t->full_speedup = rep->speedup;
        break;
    default: /* KV_STAGE_REMEASURE: the elite's fitness is the lower of the two */
        fitness = ok && rep->speedup < t->full_speedup ? rep->speedup : t->full_speedup;
        if (kv_run_store(r, t, rep, KV_STAGE_REMEASURE, ok, ok ? fitness : 0, NULL, &taken, err) !=
            0)
            return -1;
        if (taken)
            kv_map_offer(&p->grid, t->island, cell, t->id, fitness, t->model);
        break;
    }
    if (taken) {
        double f = t->stage == KV_STAGE_SEED ? rep->speedup : fitness;
        if (f > p->best)
            p->best = f;
        if (r->cfg->budget.target_speedup > 0 && p->best >= r->cfg->budget.target_speedup)
            p->done = 1;
    }
    emit_result(r, t, d, taken);
    int rc = 0;
    if (ok)
        rc = after_acceptance(r, t->problem, err);
    if (next) {
        t->stage = t->stage == KV_STAGE_SCREEN ? KV_STAGE_FULL : KV_STAGE_REMEASURE;
        t->submitted = 0;
    } else {
        kv_run_unlink(r, t);
        kv_run_task_free(t);
    }
    return rc;
}
