/* propose.c — new candidates: the pattern library's seeds when a run
 * starts (and the reference of a problem without seeds, seedless.c), then
 * children of elites made by the mutator (asks.c); the choice of problem,
 * island, parent and target cell, whatever the mutator. A
 * proposal is stored as a program (no result yet)
 * with a proposal attempt before it is evaluated, so a run killed while the
 * program is in flight evaluates it again when it resumes. A proposal that
 * gave no candidate is an attempt alone. A template proposal whose source is
 * already stored for the problem is dropped, leaving only a count: once the
 * small neighbourhoods of the elites are used up, most proposals are such
 * duplicates (hundreds per second), and the template mutator is then asked
 * for jumps instead (kv_mut_request's `fruitless`). A proposal that came of
 * a model call and repeats a stored source is recorded (a duplicate attempt
 * naming that program), since it carries what it cost. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/fsutil.h"
#include "search/run_state.h"

/* The program (without result) and its proposal attempt, in one commit.
 * t->src NULL: no candidate came out, only the attempt is stored (verdict
 * proposal_error, the reason in note). sp: what a model call cost, carried
 * by the attempt and added to the run state in the same commit; NULL when
 * no call was made (the template mutator). *existed: the same source is already stored for the
 * problem; then, without sp, nothing is stored. */
static int record_proposal(kv_run *r, kv_run_task *t, const char *note, const kv_run_spend *sp,
                           int *existed, kv_err *err)
{
    kv_run_problem *p = &r->problems[t->problem];
    static const kv_run_spend none;
    const int paid = sp != NULL;
    if (!sp)
        sp = &none;
    kv_program prog;
    memset(&prog, 0, sizeof prog);
    snprintf(prog.problem, sizeof prog.problem, "%s", p->problem.name);
    snprintf(prog.op, sizeof prog.op, "%s", t->op);
    snprintf(prog.model, sizeof prog.model, "%s", t->model);
    prog.island = t->island;
    prog.n_parents = (uint32_t)t->n_parents;
    memcpy(prog.parents, t->parents, sizeof(uint64_t) * (size_t)t->n_parents);
    prog.created_ns = kv_wall_ns();

    kv_run_state saved = r->state;
    memcpy(r->state.rng, r->rng.s, sizeof r->state.rng);
    r->state.wall_s = r->wall_at_start + kv_run_elapsed_s(r);
    r->state.updated_ns = prog.created_ns;
    r->state.tokens_in += sp->tokens_in;
    r->state.tokens_out += sp->tokens_out;
    r->state.cost_usd += sp->cost_usd;
    *existed = 0;
    kv_txn *txn = NULL;
    if (kv_write_begin(r->archive, &txn, err) != 0)
        goto undo;
    if (t->src && kv_add_program(txn, &prog, t->src, t->len, &t->id, existed, err) != 0)
        goto fail;
    if (*existed && !paid) {
        kv_txn_abort(txn);
        r->state = saved;
        return 0;
    }
    kv_attempt a;
    memset(&a, 0, sizeof a);
    a.time_ns = prog.created_ns;
    snprintf(a.problem, sizeof a.problem, "%s", p->problem.name);
    a.island = t->island;
    a.stage = KV_STAGE_PROPOSAL;
    a.verdict = !t->src    ? KV_VERDICT_PROPOSAL_ERROR
                : *existed ? KV_VERDICT_DUPLICATE
                           : KV_VERDICT_NONE;
    a.program_id = t->src ? t->id : 0;
    a.parent_id = t->n_parents ? t->parents[0] : 0;
    snprintf(a.op, sizeof a.op, "%s", t->op);
    snprintf(a.model, sizeof a.model, "%s", t->model);
    a.wall_s = sp->wall_s;
    a.tokens_in = sp->tokens_in;
    a.tokens_out = sp->tokens_out;
    a.cost_usd = sp->cost_usd;
    a.detail = (char *)note; /* not freed by the archive */
    if (kv_add_attempt(txn, &a, NULL, err) != 0 || kv_put_state(txn, &r->state, err) != 0)
        goto fail;
    if (kv_txn_commit(txn, err) == 0)
        return 0;
    goto undo;
fail:
    kv_txn_abort(txn);
undo: /* the spend is only counted once it is stored */
    r->state.tokens_in = saved.tokens_in;
    r->state.tokens_out = saved.tokens_out;
    r->state.cost_usd = saved.cost_usd;
    return -1;
}

/* One program of a fresh run's start (a seed, or a problem's reference):
 * stored without result and queued at the seed stage, offered to every
 * island. src is taken (freed here either way). */
static int add_start(kv_run *r, int problem, char *src, size_t len, const char *op,
                     const char *model, kv_err *err)
{
    kv_run_task *t = calloc(1, sizeof *t);
    if (!t) {
        free(src);
        return kv_err_set(err, "out of memory");
    }
    t->src = src;
    t->len = len;
    t->problem = problem;
    t->island = -1;
    t->stage = KV_STAGE_SEED;
    snprintf(t->op, sizeof t->op, "%s", op);
    snprintf(t->model, sizeof t->model, "%s", model);
    int existed = 0;
    if (record_proposal(r, t, NULL, NULL, &existed, err) != 0) {
        kv_run_task_free(t);
        return -1;
    }
    /* existed: two seed files with one source, or stored by a run killed
     * before its configuration (restore() took it up); skipped: its reference
     * failed its check, and a later start evaluates what is stored now */
    if (existed || r->problems[problem].skipped) {
        kv_run_task_free(t);
        return 0;
    }
    kv_run_append(r, t);
    return 0;
}

int kv_run_add_seeds(kv_run *r, kv_err *err)
{
    for (int i = 0; i < r->n_problems; i++) {
        kv_run_problem *p = &r->problems[i];
        for (int s = 0; s < p->lib.n; s++) {
            const kv_seed *seed = &p->lib.seeds[s];
            char *src = malloc(seed->len + 1);
            if (!src)
                return kv_err_set(err, "out of memory");
            memcpy(src, seed->src, seed->len + 1);
            if (add_start(r, i, src, seed->len, KV_OP_SEED, seed->name, err) != 0)
                return -1;
        }
        if (p->from_reference) { /* the reference as it is now, a candidate like any other */
            char *src = NULL;
            size_t len = 0;
            if (kv_read_file(p->problem.reference, &src, &len, err) != 0)
                return kv_err_prefix(err, "the reference of problem %s, which has no seeds",
                                     p->problem.name);
            if (add_start(r, i, src, len, KV_OP_REFERENCE, "reference", err) != 0)
                return -1;
        }
    }
    return 0;
}

/* The next problem that can take a proposal (round robin): not done, and
 * with at least one elite somewhere. -1 when none. */
static int next_problem(kv_run *r)
{
    for (int k = 0; k < r->n_problems; k++) {
        int i = (r->next_problem + k) % r->n_problems;
        kv_run_problem *p = &r->problems[i];
        if (p->done || p->skipped)
            continue;
        for (int is = 0; is < p->grid.n_islands; is++)
            if (kv_map_occupied(&p->grid, is)) {
                r->next_problem = i + 1;
                return i;
            }
    }
    return -1;
}

static void emit_proposal(kv_run *r, const kv_run_task *t, const kv_run_pick *pk, const char *note)
{
    cJSON *ev = kv_run_event_new(r, "proposal");
    char cell[KV_CELL_NAME_MAX];
    kv_cell_name(pk->target, cell);
    cJSON_AddStringToObject(ev, "problem", r->problems[t->problem].problem.name);
    cJSON_AddNumberToObject(ev, "program", (double)t->id);
    cJSON_AddNumberToObject(ev, "island", t->island);
    cJSON_AddNumberToObject(ev, "parent", (double)(t->n_parents ? t->parents[0] : 0));
    cJSON_AddStringToObject(ev, "pick", kv_pick_name(pk->how));
    cJSON_AddStringToObject(ev, "target", cell);
    cJSON_AddStringToObject(ev, "op", t->op);
    cJSON_AddStringToObject(ev, "pattern", t->model);
    cJSON_AddStringToObject(ev, "note", note);
    kv_run_event_emit(r, ev);
}

int kv_run_choose(kv_run *r, kv_run_pick *pk)
{
    int pi = next_problem(r);
    if (pi < 0)
        return 1;
    kv_run_problem *p = &r->problems[pi];
    int K = p->grid.n_islands, island = -1;
    for (int k = 0; k < K && island < 0; k++) {
        int i = (p->next_island + k) % K;
        if (kv_map_occupied(&p->grid, i))
            island = i;
    }
    p->next_island = island + 1;
    memset(pk, 0, sizeof *pk);
    pk->problem = pi;
    pk->island = island;
    pk->parent_cell = kv_map_pick_parent(&p->grid, island, &r->rng, &pk->how);
    pk->parent = p->grid.islands[island].cells[pk->parent_cell].id;
    pk->target = kv_map_pick_target(&p->grid, island, pk->parent_cell, p->reachable, &r->rng);
    return 0;
}

int kv_run_add_candidate(kv_run *r, kv_run_task *t, const kv_run_pick *pk, const char *note,
                         const kv_run_spend *sp, kv_err *err)
{
    int existed = 0;
    t->problem = pk->problem;
    t->island = pk->island;
    t->stage = KV_STAGE_SCREEN;
    if (record_proposal(r, t, note, sp, &existed, err) != 0) {
        kv_run_task_free(t);
        return -1;
    }
    if (existed) {
        r->duplicates++;
        r->fruitless++;
        kv_run_task_free(t);
        return sp ? 1 : 0; /* committed only when paid for */
    }
    emit_proposal(r, t, pk, note);
    r->fruitless = 0;
    kv_run_append(r, t);
    return 1;
}

int kv_run_add_refusal(kv_run *r, const kv_run_pick *pk, const char *op, const char *model,
                       const char *why, const kv_run_spend *sp, kv_err *err)
{
    kv_run_task t;
    memset(&t, 0, sizeof t);
    t.problem = pk->problem;
    t.island = pk->island;
    t.n_parents = 1;
    t.parents[0] = pk->parent;
    snprintf(t.op, sizeof t.op, "%s", op);
    snprintf(t.model, sizeof t.model, "%s", model);
    int existed = 0;
    if (record_proposal(r, &t, why, sp, &existed, err) != 0)
        return -1;
    r->fruitless++;
    return 1;
}
