/* search_quality.c — replays search policies over a table of measured
 * schedules (sched_table.h), on the CPU: a tabular benchmark of the search,
 * as NAS-Bench is for architectures (docs/schedules.md, "The schedule
 * benchmark"). Per collective of the table, for every seed and policy, one
 * run restricted to the table's schedules, each evaluation a table look-up:
 *
 *   kevo       the search's policy (search/map.c, search/propose.c,
 *              search/results.c, mutate/template_mutator.c): K islands of
 *              MAP-Elites grids over the cells, parent 40/40/20 uniform,
 *              fitness², curiosity (kv_map_pick_parent), target cell
 *              (kv_map_pick_target), children by kv_sched_mutate, ring
 *              migration and re-seeding every so many accepted
 *              evaluations; started from the seed schedules
 *   random     uniform sampling of the table's entries without repetition
 *   hillclimb  one population (no cells, no islands): the best P so far;
 *              a child of a random member by kv_sched_mutate
 *
 * Fitness: the geometric mean over the sizes of ref/candidate medians; a
 * row whose verdict is not ok is no candidate (its evaluation counts, it
 * enters nothing). Deterministic for a given table, options and seed.
 *
 * A proposal is matched to the table by its canonical text. One that is
 * there and was evaluated before in this run is a duplicate: dropped
 * without cost, as the search drops a stored source (after 8 such in a row
 * the policy jumps, as the template mutator does). One that is not there
 * (most of them: the table samples a space of millions) is, by default,
 * projected onto the nearest entry not yet evaluated (sq_distance; ties
 * drawn), which keeps a move's locality; with --absent redraw it is redrawn
 * without cost up to --redraws times, then counts as an evaluation that
 * returned nothing. The report gives the exact hits and projections. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "sched_table.h"
#include "search/config.h"
#include "search/map.h"

#define MAX_BUDGETS 8
#define MAX_SEEDS 1000
#define JUMP_AFTER 8     /* as mutate/template_mutator.c */
#define FREE_LIMIT 10000 /* free proposals in a row before one counts as a failed evaluation */

enum { P_KEVO, P_RANDOM, P_HILL, P_COUNT };
static const char *const policy_names[P_COUNT] = {"kevo", "random", "hillclimb"};
static const char *const policy_letters[P_COUNT] = {"a", "b", "c"};

typedef struct {
    const char *table;
    int n_seeds;
    uint64_t seed0;
    int n_budgets;
    int budgets[MAX_BUDGETS];
    int islands, migration, reseed; /* kevo's, from kv_config_defaults unless given */
    int pop;                        /* hillclimb's population */
    int project;                    /* absent proposals: 1 projected, 0 redrawn */
    int redraws;
    const char *out, *curves, *runs;
    char only[256]; /* collectives to replay, "" = all */
} sq_opts;

typedef struct {
    int evals; /* evaluations spent (<= the budget) */
    double best;
    double best_size[SQ_MAX_SIZES];
    double qd;
    int coverage;
    int reached; /* the evaluation that found the table's best, 0: not found */
} sq_snap;

typedef struct {
    const sq_table *t;
    const sq_coll *c;
    const sq_opts *o;
    kv_rng rng;
    unsigned char *done;
    int n_done, evals, max_budget;
    double best, best_size[SQ_MAX_SIZES], cell_best[KV_CELL_COUNT];
    int reached;
    double *curve; /* best after evaluation i + 1 */
    long proposals, hits, projected, dups, absent, no_moves, failed;
    int fruitless;
    sq_snap snap[MAX_BUDGETS];
} sq_run;

/* ---- evaluations ---------------------------------------------------------- */

static void snapshot(sq_run *r, sq_snap *s)
{
    s->evals = r->evals;
    s->best = r->best;
    memcpy(s->best_size, r->best_size, sizeof s->best_size);
    s->qd = 0;
    s->coverage = 0;
    for (int k = 0; k < KV_CELL_COUNT; k++) {
        s->qd += r->cell_best[k];
        s->coverage += r->cell_best[k] > 0;
    }
    s->reached = r->reached;
}

static void after_eval(sq_run *r)
{
    r->curve[r->evals - 1] = r->best;
    for (int b = 0; b < r->o->n_budgets; b++)
        if (r->o->budgets[b] == r->evals)
            snapshot(r, &r->snap[b]);
}

/* Evaluates entry i: 1 a candidate (ok), 0 not. */
static int evaluate(sq_run *r, int i)
{
    const sq_entry *e = &r->c->e[i];
    r->done[i] = 1;
    r->n_done++;
    r->evals++;
    if (e->ok) {
        if (e->fitness > r->best)
            r->best = e->fitness;
        for (int s = 0; s < r->t->n_sizes; s++)
            if (e->speedup[s] > r->best_size[s])
                r->best_size[s] = e->speedup[s];
        if (e->cell >= 0 && e->fitness > r->cell_best[e->cell])
            r->cell_best[e->cell] = e->fitness;
        if (!r->reached && r->best >= r->c->best)
            r->reached = r->evals;
    }
    after_eval(r);
    return e->ok;
}

static void failed_eval(sq_run *r)
{
    r->evals++;
    r->failed++;
    after_eval(r);
}

enum { R_ABSENT = -1, R_DUP = -2, R_EXHAUSTED = -3 };

/* The entry a proposal evaluates (>= 0), or R_DUP, R_ABSENT, R_EXHAUSTED. */
static int resolve(sq_run *r, const kv_schedule *s)
{
    int i = sq_find(r->c, s);
    if (i >= 0) {
        if (r->done[i])
            return R_DUP;
        r->hits++;
        return i;
    }
    if (!r->o->project)
        return R_ABSENT;
    int best = -1, best_d = 0, ties = 0;
    for (int k = 0; k < r->c->n; k++) {
        if (r->done[k])
            continue;
        int d = sq_distance(s, &r->c->e[k].s);
        if (best < 0 || d < best_d) {
            best = k;
            best_d = d;
            ties = 1;
        } else if (d == best_d && kv_rng_below(&r->rng, (uint64_t)++ties) == 0) {
            best = k; /* reservoir: uniform over the nearest */
        }
    }
    if (best < 0)
        return R_EXHAUSTED;
    r->projected++;
    return best;
}

/* A proposer writes a child into *out: 0, or 1 when it has no move. */
typedef int (*sq_propose_fn)(void *ctx, sq_run *r, kv_schedule *out);

/* One evaluation's worth of proposals: *idx the entry to evaluate (1), or
 * a failed evaluation counted here (0), or the table is used up (-1). */
static int child_step(sq_run *r, sq_propose_fn propose, void *ctx, int *idx)
{
    int absent = 0;
    for (int free_left = FREE_LIMIT; free_left > 0; free_left--) {
        if (r->n_done == r->c->n)
            return -1;
        kv_schedule child;
        r->proposals++;
        if (propose(ctx, r, &child) != 0) {
            r->no_moves++;
            r->fruitless++;
            continue;
        }
        int i = resolve(r, &child);
        if (i >= 0) {
            r->fruitless = 0;
            *idx = i;
            return 1;
        }
        if (i == R_EXHAUSTED)
            return -1;
        r->fruitless++;
        if (i == R_DUP) {
            r->dups++;
            continue;
        }
        r->absent++;
        if (++absent > r->o->redraws)
            break;
    }
    failed_eval(r);
    return 0;
}

/* ---- the seeds: the schedules a run with seeds=schedules starts from ----- */

/* The collective's default schedule, and per cell the table's schedule
 * written for that cell nearest to the default (ties: the first row): the
 * table's stand-in for a default schedule per cell. Entry indices, each
 * once, into seeds; how many. */
static int seed_entries(const sq_coll *c, int *seeds)
{
    kv_schedule d;
    kv_sched_default(c->coll, &d);
    int n = 0, at = sq_find(c, &d);
    if (at >= 0)
        seeds[n++] = at;
    for (int cell = 0; cell < KV_CELL_COUNT; cell++) {
        int best = -1, best_d = 0;
        for (int k = 0; k < c->n; k++) {
            int aimed = c->e[k].aimed >= 0 ? c->e[k].aimed : kv_sched_cell(&c->e[k].s);
            if (aimed != cell)
                continue;
            int dist = sq_distance(&d, &c->e[k].s);
            if (best < 0 || dist < best_d) {
                best = k;
                best_d = dist;
            }
        }
        int seen = best < 0;
        for (int j = 0; j < n && !seen; j++)
            seen = seeds[j] == best;
        if (!seen)
            seeds[n++] = best;
    }
    return n;
}

/* ---- (a) kevo's policy ------------------------------------------------------ */

typedef struct {
    kv_map g;
    int next_island, island;
    uint64_t accepted;
    unsigned reachable;  /* the cells some seed is written for */
    const char *pattern; /* the collective's name: every elite is of one "pattern" */
} kevo_ctx;

static int kevo_propose(void *vctx, sq_run *r, kv_schedule *out)
{
    kevo_ctx *x = vctx;
    kv_map *g = &x->g;
    int island = -1;
    for (int k = 0; k < g->n_islands && island < 0; k++) {
        int i = (x->next_island + k) % g->n_islands;
        if (kv_map_occupied(g, i))
            island = i;
    }
    char note[256];
    if (island < 0) { /* every seed failed: random schedules until one is a candidate */
        kv_schedule d;
        kv_sched_default(r->c->coll, &d);
        return kv_sched_mutate(&d, NULL, KV_SMOVE_JUMP, 0, &r->rng, out, note, sizeof note);
    }
    x->next_island = island + 1;
    x->island = island;
    int pc = kv_map_pick_parent(g, island, &r->rng, NULL);
    uint64_t pid = g->islands[island].cells[pc].id;
    const kv_schedule *parent = &r->c->e[pid - 1].s;
    int target = kv_map_pick_target(g, island, pc, x->reachable, &r->rng);
    if (r->fruitless >= JUMP_AFTER &&
        kv_sched_mutate(parent, NULL, KV_SMOVE_JUMP, 0, &r->rng, out, note, sizeof note) == 0)
        return 0;
    /* as the template mutator: toward another cell 80% of the time when one
     * is aimed for, else a crossover with another elite 30% of the time,
     * else one move of the mover's choice */
    if (target != pc && kv_rng_double(&r->rng) < 0.8) {
        int got = 0;
        for (int k = 0; k < 16; k++) {
            kv_schedule c;
            if (kv_sched_mutate(parent, NULL, KV_SMOVE_ANY, 0, &r->rng, &c, note, sizeof note))
                continue;
            *out = c;
            got = 1;
            if (kv_sched_cell(&c) == target)
                break;
        }
        if (got)
            return 0;
    }
    uint64_t oid = kv_map_same_pattern(g, island, x->pattern, pid, &r->rng);
    if (oid && kv_rng_double(&r->rng) < 0.3 &&
        kv_sched_mutate(parent, &r->c->e[oid - 1].s, KV_SMOVE_CROSS, 0, &r->rng, out, note,
                        sizeof note) == 0)
        return 0;
    return kv_sched_mutate(parent, NULL, KV_SMOVE_ANY, 0, &r->rng, out, note, sizeof note);
}

/* search/results.c's after_acceptance on the in-memory grid: the ring
 * migration every `migration` accepted evaluations, re-seeding the weakest
 * island from the strongest every `reseed`. */
static void kevo_accepted(kevo_ctx *x, const sq_opts *o)
{
    kv_map *g = &x->g;
    int K = g->n_islands;
    x->accepted++;
    kv_map_island snap[64];
    if (K < 2 || K > 64)
        return;
    if (o->migration > 0 && x->accepted % (uint64_t)o->migration == 0) {
        memcpy(snap, g->islands, sizeof *snap * (size_t)K);
        for (int i = 0; i < K; i++) {
            int best = -1;
            for (int c = 0; c < KV_CELL_COUNT; c++)
                if (snap[i].cells[c].id &&
                    (best < 0 || snap[i].cells[c].fitness > snap[i].cells[best].fitness))
                    best = c;
            if (best >= 0)
                kv_map_offer(g, (i + 1) % K, best, snap[i].cells[best].id,
                             snap[i].cells[best].fitness, snap[i].cells[best].pattern);
        }
    }
    if (o->reseed > 0 && x->accepted % (uint64_t)o->reseed == 0) {
        int best = kv_map_strongest(g), weak = kv_map_weakest(g, best);
        if (weak >= 0) {
            memcpy(snap, g->islands, sizeof *snap * (size_t)K);
            kv_map_clear(g, weak);
            for (int c = 0; c < KV_CELL_COUNT; c++)
                if (snap[best].cells[c].id)
                    kv_map_offer(g, weak, c, snap[best].cells[c].id, snap[best].cells[c].fitness,
                                 snap[best].cells[c].pattern);
        }
    }
}

static void run_kevo(sq_run *r)
{
    kevo_ctx x;
    memset(&x, 0, sizeof x);
    x.pattern = kv_sched_coll_name(r->c->coll);
    if (kv_map_init(&x.g, r->o->islands) != 0) {
        fprintf(stderr, "search_quality: out of memory\n");
        exit(1);
    }
    int seeds[KV_CELL_COUNT + 1], n = seed_entries(r->c, seeds);
    for (int k = 0; k < n; k++) {
        const sq_entry *e = &r->c->e[seeds[k]];
        x.reachable |= 1u << (e->aimed >= 0 ? e->aimed : kv_sched_cell(&e->s));
    }
    for (int k = 0; k < n && r->evals < r->max_budget; k++)
        if (evaluate(r, seeds[k])) /* a seed is offered to every island's cell */
            for (int i = 0; i < x.g.n_islands; i++)
                kv_map_offer(&x.g, i, r->c->e[seeds[k]].cell, (uint64_t)seeds[k] + 1,
                             r->c->e[seeds[k]].fitness, x.pattern);
    while (r->evals < r->max_budget) {
        int idx, rc = child_step(r, kevo_propose, &x, &idx);
        if (rc < 0)
            break;
        if (rc == 0 || !evaluate(r, idx))
            continue;
        const sq_entry *e = &r->c->e[idx];
        int any = 0;
        for (int i = 0; i < x.g.n_islands && !any; i++)
            any = kv_map_occupied(&x.g, i);
        if (!any) /* every seed failed: the first candidate enters every island */
            for (int i = 0; i < x.g.n_islands; i++)
                kv_map_offer(&x.g, i, e->cell, (uint64_t)idx + 1, e->fitness, x.pattern);
        else
            kv_map_offer(&x.g, x.island, e->cell, (uint64_t)idx + 1, e->fitness, x.pattern);
        kevo_accepted(&x, r->o);
    }
    kv_map_free(&x.g);
}

/* ---- (b) uniform random sampling ------------------------------------------ */

static void run_random(sq_run *r)
{
    int n = r->c->n;
    int *perm = malloc(sizeof *perm * (size_t)(n ? n : 1));
    if (!perm) {
        fprintf(stderr, "search_quality: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = 0; i < n && r->evals < r->max_budget; i++) {
        int j = i + (int)kv_rng_below(&r->rng, (uint64_t)(n - i));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
        r->proposals++;
        r->hits++;
        evaluate(r, perm[i]);
    }
    free(perm);
}

/* ---- (c) one hill-climbing population -------------------------------------- */

typedef struct {
    int n, cap;
    int *member; /* entry indices */
} hill_ctx;

static int hill_propose(void *vctx, sq_run *r, kv_schedule *out)
{
    hill_ctx *h = vctx;
    char note[256];
    if (h->n == 0) {
        kv_schedule d;
        kv_sched_default(r->c->coll, &d);
        return kv_sched_mutate(&d, NULL, KV_SMOVE_JUMP, 0, &r->rng, out, note, sizeof note);
    }
    int a = (int)kv_rng_below(&r->rng, (uint64_t)h->n);
    const kv_schedule *parent = &r->c->e[h->member[a]].s;
    if (r->fruitless >= JUMP_AFTER &&
        kv_sched_mutate(parent, NULL, KV_SMOVE_JUMP, 0, &r->rng, out, note, sizeof note) == 0)
        return 0;
    const kv_schedule *other = NULL;
    if (h->n >= 2) {
        int b = (int)kv_rng_below(&r->rng, (uint64_t)(h->n - 1));
        other = &r->c->e[h->member[b >= a ? b + 1 : b]].s;
    }
    return kv_sched_mutate(parent, other, KV_SMOVE_ANY, 0, &r->rng, out, note, sizeof note);
}

static void hill_take(hill_ctx *h, const sq_coll *c, int idx)
{
    if (h->n < h->cap) {
        h->member[h->n++] = idx;
        return;
    }
    int worst = 0;
    for (int k = 1; k < h->n; k++)
        if (c->e[h->member[k]].fitness < c->e[h->member[worst]].fitness)
            worst = k;
    if (c->e[idx].fitness > c->e[h->member[worst]].fitness)
        h->member[worst] = idx;
}

static void run_hill(sq_run *r)
{
    hill_ctx h = {0, r->o->pop, malloc(sizeof(int) * (size_t)r->o->pop)};
    if (!h.member) {
        fprintf(stderr, "search_quality: out of memory\n");
        exit(1);
    }
    int seeds[KV_CELL_COUNT + 1], n = seed_entries(r->c, seeds);
    for (int k = 0; k < n && r->evals < r->max_budget; k++)
        if (evaluate(r, seeds[k]))
            hill_take(&h, r->c, seeds[k]);
    while (r->evals < r->max_budget) {
        int idx, rc = child_step(r, hill_propose, &h, &idx);
        if (rc < 0)
            break;
        if (rc == 1 && evaluate(r, idx))
            hill_take(&h, r->c, idx);
    }
    free(h.member);
}

/* ---- one run, and the statistics over seeds -------------------------------- */

static void run_one(const sq_table *t, const sq_coll *c, const sq_opts *o, int policy,
                    uint64_t seed, sq_run *r, double *curve)
{
    memset(r, 0, sizeof *r);
    r->t = t;
    r->c = c;
    r->o = o;
    r->max_budget = o->budgets[o->n_budgets - 1];
    r->curve = curve;
    r->done = calloc((size_t)(c->n ? c->n : 1), 1);
    if (!r->done) {
        fprintf(stderr, "search_quality: out of memory\n");
        exit(1);
    }
    /* the same seed draws the same numbers whatever else the table holds */
    kv_rng_seed(&r->rng, seed * 1000003u + (uint64_t)c->coll * 101u + (uint64_t)policy);
    if (policy == P_KEVO)
        run_kevo(r);
    else if (policy == P_RANDOM)
        run_random(r);
    else
        run_hill(r);
    /* budgets the run did not reach (the table was used up) see its end */
    for (int i = r->evals; i < r->max_budget; i++)
        curve[i] = r->best;
    for (int b = 0; b < o->n_budgets; b++)
        if (o->budgets[b] > r->evals)
            snapshot(r, &r->snap[b]);
    free(r->done);
    r->done = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean, and the q10 and q90 quantiles (linear between order statistics). */
static void stats(const double *v, int n, double *mean, double *p10, double *p90)
{
    double s[MAX_SEEDS], sum = 0;
    for (int i = 0; i < n; i++) {
        s[i] = v[i];
        sum += v[i];
    }
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *mean = n ? sum / n : 0;
    double q[2] = {0.1, 0.9}, *out[2] = {p10, p90};
    for (int k = 0; k < 2; k++) {
        double pos = q[k] * (n - 1);
        int lo = (int)pos;
        double fr = pos - lo;
        *out[k] = n == 0 ? 0 : lo + 1 < n ? s[lo] * (1 - fr) + s[lo + 1] * fr : s[lo];
    }
}

/* ---- options ------------------------------------------------------------------ */

static const char usage[] =
    "usage: search_quality TABLE [options]\n"
    "\n"
    "Replays kevo's search policy (a), uniform random sampling (b) and one\n"
    "hill-climbing population (c) over a table of measured schedules\n"
    "(bench/data/schedules-*.tsv; docs/schedules.md, \"The schedule benchmark\").\n"
    "\n"
    "  --seeds N          runs per policy and collective, seeds 1..N (default 20)\n"
    "  --seed0 S          the first seed (default 1)\n"
    "  --budgets a,b,c    evaluations (default 50,150,500); the verdict is at the last\n"
    "  --problems 'x y'   only these collectives\n"
    "  --islands K        kevo's islands (default: the configuration's default)\n"
    "  --migration N      accepted evaluations between migrations (default: idem)\n"
    "  --reseed N         accepted evaluations between re-seedings (default: idem)\n"
    "  --pop P            the hill climber's population (default 8)\n"
    "  --absent MODE      a proposal not in the table: project (onto the nearest\n"
    "                     entry not yet evaluated; default) or redraw (free, up to\n"
    "                     --redraws times, then a failed evaluation)\n"
    "  --redraws K        (default 16)\n"
    "  -o FILE            the markdown report (default: standard output)\n"
    "  --curves FILE      anytime curves, CSV: collective,policy,evals,mean,p10,p90\n"
    "  --runs FILE        one TSV line per run and budget (for checks)\n";

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static int parse_args(int argc, char **argv, sq_opts *o)
{
    kv_config cfg;
    kv_config_defaults(&cfg);
    memset(o, 0, sizeof *o);
    o->n_seeds = 20;
    o->seed0 = 1;
    o->n_budgets = 3;
    o->budgets[0] = 50;
    o->budgets[1] = 150;
    o->budgets[2] = 500;
    o->islands = cfg.islands;
    o->migration = cfg.migration_interval;
    o->reseed = cfg.reseed_interval;
    o->pop = 8;
    o->project = 1;
    o->redraws = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (a[0] != '-') {
            if (o->table)
                return -1;
            o->table = a;
            continue;
        }
        if (!v)
            return -1;
        i++;
        if (strcmp(a, "--seeds") == 0 && parse_int(v, 1, MAX_SEEDS, &n) == 0)
            o->n_seeds = (int)n;
        else if (strcmp(a, "--seed0") == 0 && parse_int(v, 0, 1L << 30, &n) == 0)
            o->seed0 = (uint64_t)n;
        else if (strcmp(a, "--islands") == 0 && parse_int(v, 1, 64, &n) == 0)
            o->islands = (int)n;
        else if (strcmp(a, "--migration") == 0 && parse_int(v, 0, 1000000, &n) == 0)
            o->migration = (int)n;
        else if (strcmp(a, "--reseed") == 0 && parse_int(v, 0, 10000000, &n) == 0)
            o->reseed = (int)n;
        else if (strcmp(a, "--pop") == 0 && parse_int(v, 1, 1000, &n) == 0)
            o->pop = (int)n;
        else if (strcmp(a, "--redraws") == 0 && parse_int(v, 0, 1000000, &n) == 0)
            o->redraws = (int)n;
        else if (strcmp(a, "--absent") == 0 && (!strcmp(v, "project") || !strcmp(v, "redraw")))
            o->project = strcmp(v, "project") == 0;
        else if (strcmp(a, "-o") == 0)
            o->out = v;
        else if (strcmp(a, "--curves") == 0)
            o->curves = v;
        else if (strcmp(a, "--runs") == 0)
            o->runs = v;
        else if (strcmp(a, "--problems") == 0 && strlen(v) + 3 < sizeof o->only) {
            snprintf(o->only, sizeof o->only, " %s ", v);
            for (char *q = o->only; *q; q++)
                if (*q == ',' || *q == '\t')
                    *q = ' ';
        } else if (strcmp(a, "--budgets") == 0) {
            char buf[256], *save = NULL;
            snprintf(buf, sizeof buf, "%s", v);
            o->n_budgets = 0;
            for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o->n_budgets == MAX_BUDGETS || parse_int(tok, 1, 1000000, &n) != 0)
                    return -1;
                o->budgets[o->n_budgets++] = (int)n;
            }
            if (o->n_budgets == 0)
                return -1;
            qsort(o->budgets, (size_t)o->n_budgets, sizeof *o->budgets, cmp_int);
        } else
            return -1;
    }
    return o->table ? 0 : -1;
}

static int wanted(const sq_opts *o, kv_sched_coll c)
{
    if (!o->only[0])
        return 1;
    char key[64];
    snprintf(key, sizeof key, " %s ", kv_sched_coll_name(c));
    return strstr(o->only, key) != NULL;
}

/* ---- the report --------------------------------------------------------------- */

static void cells_text(unsigned mask, char *out, size_t cap)
{
    out[0] = 0;
    size_t used = 0;
    for (int k = 0; k < KV_CELL_COUNT; k++)
        if (mask >> k & 1u) {
            char name[KV_CELL_NAME_MAX];
            kv_cell_name(k, name);
            used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s",
                                     used ? ", " : "", name);
        }
    if (!used)
        snprintf(out, cap, "none");
}

int main(int argc, char **argv)
{
    sq_opts o;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (parse_args(argc, argv, &o) != 0) {
        fputs(usage, stderr);
        return 2;
    }
    sq_table t;
    kv_err err = {{0}};
    if (sq_table_load(o.table, &t, &err) != 0) {
        fprintf(stderr, "search_quality: %s\n", err.msg);
        return 1;
    }
    FILE *out = o.out ? fopen(o.out, "w") : stdout;
    FILE *curves = o.curves ? fopen(o.curves, "w") : NULL;
    FILE *runs = o.runs ? fopen(o.runs, "w") : NULL;
    if (!out || (o.curves && !curves) || (o.runs && !runs)) {
        fprintf(stderr, "search_quality: cannot write %s: %s\n",
                !out                  ? o.out
                : o.curves && !curves ? o.curves
                                      : o.runs,
                strerror(errno));
        return 1;
    }
    const int B = o.budgets[o.n_budgets - 1], S = o.n_seeds;
    double *curve = malloc(sizeof *curve * (size_t)B * (size_t)S * P_COUNT);
    sq_run *res = malloc(sizeof *res * (size_t)S * P_COUNT);
    if (!curve || !res) {
        fprintf(stderr, "search_quality: out of memory\n");
        return 1;
    }
    if (curves)
        fprintf(curves, "collective,policy,evals,mean,p10,p90\n");
    if (runs)
        fprintf(runs, "collective\tpolicy\tseed\tbudget\tevals\tbest\tqd\tcoverage\treached\t"
                      "proposals\thits\tprojected\tdups\tabsent\tfailed\ttable_n\ttable_cells\n");

    fprintf(out, "# Search quality over measured schedules\n\n");
    fprintf(out, "Table `%s`:\n\n", o.table);
    for (int i = 0; i < t.n_comments; i++)
        fprintf(out, "    %s\n", t.comment[i]);
    fprintf(out,
            "\nPolicies, restricted to the table's schedules: (a) `kevo` (%d islands, "
            "migration every %d and re-seeding every %d accepted evaluations), (b) "
            "`random` (uniform sampling without repetition), (c) `hillclimb` (the best %d, "
            "no cells, no islands). Seeds %llu..%llu; budgets",
            o.islands, o.migration, o.reseed, o.pop, (unsigned long long)o.seed0,
            (unsigned long long)(o.seed0 + (uint64_t)S - 1));
    for (int b = 0; b < o.n_budgets; b++)
        fprintf(out, "%s %d", b ? "," : "", o.budgets[b]);
    fprintf(out, " evaluations. A proposal not in the table is %s.\n\n",
            o.project ? "projected onto the nearest schedule not yet evaluated (free)"
                      : "redrawn for free, then counted as a failed evaluation");
    fprintf(out, "Fitness: the geometric mean over the sizes of reference/candidate median "
                 "times; a row whose verdict is not ok is no candidate. *best*: the highest "
                 "fitness evaluated; per size: the highest speedup at that size over the "
                 "evaluated candidates; *QD*: the sum over cells of the best fitness evaluated "
                 "in the cell (empty cells add 0); *coverage*: cells with a candidate; "
                 "*found*: runs that evaluated the table's best; *hit/proj/dup*: proposals "
                 "found in the table, projected onto it, dropped as repeats (per run, mean). "
                 "Cells over [p10, p90] are the 10th and 90th percentiles over seeds.\n");

    int verdict_fail = 0;
    for (int ci = 0; ci < t.n_colls; ci++) {
        const sq_coll *c = &t.coll[ci];
        if (!wanted(&o, c->coll))
            continue;
        const char *cname = kv_sched_coll_name(c->coll);
        char cells[128];
        cells_text(c->cells, cells, sizeof cells);
        fprintf(out, "\n## %s\n\n", cname);
        fprintf(out,
                "Table: %d schedules, %d candidates (verdict ok), cells: %s; best %.3fx, "
                "QD %.3f (the most any run can reach).\n\n",
                c->n, c->n_ok, cells, c->best, c->qd);
        fprintf(out, "| policy | budget | best: mean [p10, p90] |");
        for (int s = 0; s < t.n_sizes; s++)
            fprintf(out, " %s |", t.size[s]);
        fprintf(out, " QD | coverage | found | hit/proj/dup |\n|---|---:|---|");
        for (int s = 0; s < t.n_sizes; s++)
            fprintf(out, "---:|");
        fprintf(out, "---:|---:|---:|---|\n");

        for (int p = 0; p < P_COUNT; p++)
            for (int k = 0; k < S; k++)
                run_one(&t, c, &o, p, o.seed0 + (uint64_t)k, &res[p * S + k],
                        curve + ((size_t)p * S + (size_t)k) * (size_t)B);
        double final_mean[P_COUNT];
        for (int p = 0; p < P_COUNT; p++) {
            for (int b = 0; b < o.n_budgets; b++) {
                double v[MAX_SEEDS], mean, p10, p90, qd = 0, cov = 0, size[SQ_MAX_SIZES] = {0};
                double hits = 0, proj = 0, dups = 0;
                int found = 0;
                for (int k = 0; k < S; k++) {
                    const sq_run *r = &res[p * S + k];
                    const sq_snap *sn = &r->snap[b];
                    v[k] = sn->best;
                    qd += sn->qd / S;
                    cov += (double)sn->coverage / S;
                    for (int s = 0; s < t.n_sizes; s++)
                        size[s] += sn->best_size[s] / S;
                    found += sn->reached > 0;
                    hits += (double)r->hits / S;
                    proj += (double)r->projected / S;
                    dups += (double)r->dups / S;
                    if (runs)
                        fprintf(runs,
                                "%s\t%s\t%llu\t%d\t%d\t%.6f\t%.6f\t%d\t%d\t%ld\t%ld\t%ld\t"
                                "%ld\t%ld\t%ld\t%d\t%d\n",
                                cname, policy_names[p], (unsigned long long)(o.seed0 + (uint64_t)k),
                                o.budgets[b], sn->evals, sn->best, sn->qd, sn->coverage,
                                sn->reached, r->proposals, r->hits, r->projected, r->dups,
                                r->absent, r->failed, c->n, __builtin_popcount(c->cells));
                }
                stats(v, S, &mean, &p10, &p90);
                if (b == o.n_budgets - 1)
                    final_mean[p] = mean;
                fprintf(out, "| (%s) %s | %d | %.3fx [%.3f, %.3f] |", policy_letters[p],
                        policy_names[p], o.budgets[b], mean, p10, p90);
                for (int s = 0; s < t.n_sizes; s++)
                    fprintf(out, " %.3fx |", size[s]);
                fprintf(out, " %.3f | %.2f | %d/%d | %.0f/%.0f/%.0f |\n", qd, cov, found, S, hits,
                        proj, dups);
            }
            if (curves)
                for (int e = 0; e < B; e++) {
                    double v[MAX_SEEDS], mean, p10, p90;
                    for (int k = 0; k < S; k++)
                        v[k] = curve[((size_t)p * S + (size_t)k) * (size_t)B + (size_t)e];
                    stats(v, S, &mean, &p10, &p90);
                    fprintf(curves, "%s,%s,%d,%.6f,%.6f,%.6f\n", cname, policy_names[p], e + 1,
                            mean, p10, p90);
                }
        }
        double xb =
            final_mean[P_RANDOM] > 0 ? 100 * (final_mean[P_KEVO] / final_mean[P_RANDOM] - 1) : 0;
        double xc =
            final_mean[P_HILL] > 0 ? 100 * (final_mean[P_KEVO] / final_mean[P_HILL] - 1) : 0;
        int wins =
            final_mean[P_KEVO] > final_mean[P_RANDOM] && final_mean[P_KEVO] > final_mean[P_HILL];
        verdict_fail |= !wins;
        fprintf(out,
                "\n**%s at %d: (a) kevo %s (b) random by %+.2f%% and (c) hillclimb by "
                "%+.2f%%** (mean best %.3fx against %.3fx and %.3fx)%s\n",
                cname, B, wins ? "beats" : "does not beat both of", xb, xc, final_mean[P_KEVO],
                final_mean[P_RANDOM], final_mean[P_HILL],
                B >= c->n ? "; the budget covers the whole table, so a run that evaluates "
                            "every schedule finds its best"
                          : "");
    }
    fprintf(out, "\n%s\n",
            verdict_fail ? "Verdict: (a) does not beat (b) and (c) on every "
                           "collective at the largest budget."
                         : "Verdict: (a) beats (b) and (c) on every collective "
                           "at the largest budget.");
    free(curve);
    free(res);
    if (out != stdout)
        fclose(out);
    if (curves)
        fclose(curves);
    if (runs)
        fclose(runs);
    sq_table_free(&t);
    return 0;
}
