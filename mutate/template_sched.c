/* template_sched.c — the template mutator on a program generated from a
 * schedule (template.h, kv_template_sched_propose; docs/mutation.md,
 * "Schedule moves"): the child's schedule comes from kv_sched_mutate, its
 * source from kv_sched_generate.
 *
 * The aim. When the search aims at a cell other than the parent's, half of
 * the requests (AIM_SHARE) draw moves that can change the cell on the axis
 * that differs (xport when the transport differs; launch, shape and xport
 * when the fusion does: a ce phase makes a call unfused) up to AIM_DRAWS
 * times and keep the first child in the target cell, else the first that
 * got closer (more data phases on the target's transport, or the target's
 * fusion), else none (the request falls back to any move). The other half,
 * and every request whose parent is in the target cell already, explore
 * without aim, so a cell that no move reaches in one step is still reached
 * through others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mutate/template.h"

#define AIM_SHARE 0.5   /* requests aimed at the target cell when it differs */
#define CROSS_SHARE 0.3 /* requests recombined when a second schedule is given */
#define AIM_DRAWS 24    /* children drawn for an aimed move */
#define CROSS_TRIES 8   /* crossovers drawn while they give the second parent back */

static const kv_sched_move local_moves[] = {KV_SMOVE_ALGO,  KV_SMOVE_DIR,   KV_SMOVE_XPORT,
                                            KV_SMOVE_PROTO, KV_SMOVE_SHAPE, KV_SMOVE_CHUNK,
                                            KV_SMOVE_LAUNCH};
#define N_LOCAL (int)(sizeof local_moves / sizeof local_moves[0])

typedef struct {
    kv_schedule s;
    kv_sched_move move;
    char note[192];
    char *src;
    size_t len;
} child;

static void child_free(child *c)
{
    free(c->src);
    c->src = NULL;
}

/* c->src generated from c->s: 0, or -1 (out of memory; or a valid schedule
 * the generator refuses, which is kevo's bug: the generator writes every
 * schedule kv_sched_check accepts). */
static int generate(child *c, kv_err *err)
{
    if (kv_sched_generate(&c->s, &c->src, &c->len, err) == 0)
        return 0;
    c->src = NULL;
    return -1;
}

/* One child by move m: 0, 1 (no such move; or a crossover that gave the
 * second parent back `tries` times; why in err), -1. */
static int draw(const kv_schedule *parent, const kv_schedule *other, kv_sched_move m, int nvls,
                int tries, kv_rng *rng, child *c, kv_err *err)
{
    for (int t = 0; t < tries; t++) {
        if (kv_sched_mutate(parent, other, m, nvls, rng, &c->s, c->note, sizeof c->note) != 0) {
            kv_err_set(err, "no %s move of the schedule", kv_sched_move_name(m));
            return 1;
        }
        c->move = m;
        if (m == KV_SMOVE_CROSS && other && kv_sched_equal(&c->s, other))
            continue; /* stored already: drawn again */
        return generate(c, err);
    }
    kv_err_set(err, "the crossover gave the second parent back");
    return 1;
}

/* A structural move in a random order of the local moves, the first that
 * gives a child. */
static int any_move(const kv_schedule *parent, int nvls, kv_rng *rng, child *c, kv_err *err)
{
    kv_sched_move order[N_LOCAL];
    memcpy(order, local_moves, sizeof order);
    for (int i = N_LOCAL - 1; i > 0; i--) {
        int j = (int)kv_rng_below(rng, (uint64_t)i + 1);
        kv_sched_move t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < N_LOCAL; i++) {
        int rc = draw(parent, NULL, order[i], nvls, 1, rng, c, err);
        if (rc != 1)
            return rc;
    }
    kv_err_set(err, "no structural move of the schedule gives a child");
    return 1;
}

static kv_transport cell_transport(int cell)
{
    return (kv_transport)(cell / KV_FUSION_COUNT);
}

static kv_fusion cell_fusion(int cell)
{
    return (kv_fusion)(cell % KV_FUSION_COUNT);
}

/* Data phases of s on transport t. */
static int on_transport(const kv_schedule *s, kv_transport t)
{
    int n = 0;
    for (int i = 0; i < s->n_phases; i++) {
        const kv_sched_phase *p = &s->phase[i];
        if (p->kind == KV_PH_QUANT || p->kind == KV_PH_LOCAL)
            continue;
        kv_transport pt = p->xport == KV_XP_TMA    ? KV_TRANSPORT_TMA
                          : p->xport == KV_XP_CE   ? KV_TRANSPORT_CE
                          : p->xport == KV_XP_NVLS ? KV_TRANSPORT_NVLS
                                                   : KV_TRANSPORT_SM;
        n += pt == t;
    }
    return n;
}

/* 2: c is in the target cell; 1: closer to it on an axis where the parent
 * differs; 0: neither. */
static int aim_score(const kv_schedule *parent, const kv_schedule *c, int target)
{
    int pc = kv_sched_cell(parent), cc = kv_sched_cell(c);
    if (cc == target)
        return 2;
    kv_transport tt = cell_transport(target);
    if (cell_transport(pc) != tt && on_transport(c, tt) > on_transport(parent, tt))
        return 1;
    if (cell_fusion(pc) != cell_fusion(target) && cell_fusion(cc) == cell_fusion(target))
        return 1;
    return 0;
}

/* A child moved toward the target cell (the file's head says how). */
static int aimed_move(const kv_schedule *parent, int target, int nvls, kv_rng *rng, child *best,
                      kv_err *err)
{
    int pc = kv_sched_cell(parent);
    kv_sched_move moves[3];
    int n = 0;
    if (cell_transport(pc) != cell_transport(target))
        moves[n++] = KV_SMOVE_XPORT;
    if (cell_fusion(pc) != cell_fusion(target)) {
        if (n == 0)
            moves[n++] = KV_SMOVE_XPORT;
        moves[n++] = KV_SMOVE_LAUNCH;
        moves[n++] = KV_SMOVE_SHAPE;
    }
    int best_score = 0;
    for (int d = 0; d < AIM_DRAWS && best_score < 2; d++) {
        child c = {0};
        kv_sched_move m = moves[kv_rng_below(rng, (uint64_t)n)];
        if (kv_sched_mutate(parent, NULL, m, nvls, rng, &c.s, c.note, sizeof c.note) != 0)
            continue;
        int score = aim_score(parent, &c.s, target);
        if (score <= best_score)
            continue;
        c.move = m;
        if (generate(&c, err) != 0)
            return -1;
        child_free(best);
        *best = c;
        best_score = score;
    }
    if (best_score == 0) {
        char cell[KV_CELL_NAME_MAX];
        kv_cell_name(target, cell);
        kv_err_set(err, "no move of the schedule toward %s", cell);
        return 1;
    }
    char cell[KV_CELL_NAME_MAX];
    kv_cell_name(target, cell);
    size_t l = strlen(best->note);
    snprintf(best->note + l, sizeof best->note - l, " (toward %s)", cell);
    return 0;
}

static int jump_move(const kv_schedule *parent, int nvls, kv_rng *rng, child *c, kv_err *err)
{
    return draw(parent, NULL, KV_SMOVE_JUMP, nvls, 1, rng, c, err);
}

typedef enum { PLAN_ANY, PLAN_AIM, PLAN_CROSS, PLAN_JUMP } plan;

int kv_template_sched_propose(const kv_tpl_in *in, const kv_schedule *parent, kv_rng *rng,
                              kv_proposal *out, kv_err *err)
{
    memset(out, 0, sizeof *out);
    kv_schedule other;
    int has_other = in->other_src &&
                    kv_sched_from_source(in->other_src, in->other_len, &other, NULL) == 1 &&
                    other.coll == parent->coll && !kv_sched_equal(&other, parent);
    const int nvls = in->allow_nvls;
    int target = in->target_cell;
    if (target >= 0 && target < KV_CELL_COUNT && cell_transport(target) == KV_TRANSPORT_NVLS &&
        !nvls)
        target = -1; /* a cell the run may not enter */
    const int can_aim = target >= 0 && target < KV_CELL_COUNT && target != kv_sched_cell(parent);
    plan first;
    switch (in->op) {
    case KV_TPL_JUMP: first = PLAN_JUMP; break;
    case KV_TPL_RECOMBINE:
        if (!has_other) {
            kv_err_set(err, "no second schedule of the collective to recombine with");
            return 1;
        }
        first = PLAN_CROSS;
        break;
    case KV_TPL_SIBLING:
        if (!can_aim) {
            kv_err_set(err, "the parent's schedule aims at the target cell already");
            return 1;
        }
        first = PLAN_AIM;
        break;
    case KV_TPL_PERTURB: first = PLAN_ANY; break;
    default:
        first = can_aim && kv_rng_double(rng) < AIM_SHARE       ? PLAN_AIM
                : has_other && kv_rng_double(rng) < CROSS_SHARE ? PLAN_CROSS
                                                                : PLAN_ANY;
    }
    child c = {0};
    int rc;
    switch (first) {
    case PLAN_JUMP: rc = jump_move(parent, nvls, rng, &c, err); break;
    case PLAN_CROSS:
        rc = draw(parent, &other, KV_SMOVE_CROSS, nvls, CROSS_TRIES, rng, &c, err);
        break;
    case PLAN_AIM: rc = aimed_move(parent, target, nvls, rng, &c, err); break;
    default: rc = any_move(parent, nvls, rng, &c, err);
    }
    /* the fallbacks: any move, then a jump */
    if (rc == 1 && first != PLAN_ANY && first != PLAN_JUMP)
        rc = any_move(parent, nvls, rng, &c, err);
    if (rc == 1 && first != PLAN_JUMP)
        rc = jump_move(parent, nvls, rng, &c, err);
    if (rc == 1 && first == PLAN_JUMP)
        rc = any_move(parent, nvls, rng, &c, err);
    if (rc != 0) {
        child_free(&c);
        return rc;
    }
    out->src = c.src;
    out->len = c.len;
    snprintf(out->op, sizeof out->op, "sched-%s", kv_sched_move_name(c.move));
    snprintf(out->model, sizeof out->model, "schedule");
    snprintf(out->note, sizeof out->note, "%s", c.note);
    out->n_parents = 1;
    out->parents[0] = in->parent_id;
    if (c.move == KV_SMOVE_CROSS) {
        out->n_parents = 2;
        out->parents[1] = in->other_id;
    }
    return 0;
}
