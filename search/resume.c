/* resume.c — opening a run directory: a fresh run stores its configuration
 * and evaluates the pattern library first (a problem without seeds: its
 * reference, seedless.c; a problem whose reference fails its check is
 * skipped, check_references.c); an existing one must have been
 * started with the same configuration, and gets back its random state, its
 * budget spent (evaluations, wall time, LLM tokens and cost), its grids, and
 * the work that was in flight when it stopped (programs proposed but not
 * evaluated, would-be elites not re-measured; LLM requests in flight are
 * not: nothing of theirs was recorded). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "search/run_state.h"

static void library_error(const char *msg, void *ctx)
{
    kv_run_say(ctx, "library_error", NULL, "message", "pattern skipped: ", msg);
}

static int load_problems(kv_run *r, kv_err *err)
{
    const kv_config *cfg = r->cfg;
    r->problems = calloc((size_t)cfg->n_problems, sizeof *r->problems);
    if (!r->problems)
        return kv_err_set(err, "out of memory");
    for (int i = 0; i < cfg->n_problems; i++) {
        kv_run_problem *p = &r->problems[i];
        char dir[PATH_MAX];
        if (kv_path_join(dir, sizeof dir, r->env->problems_root, cfg->problems[i], err) != 0 ||
            kv_problem_load(dir, &p->problem, err) != 0)
            return -1;
        r->n_problems = i + 1;
        if (!kv_problem_supports_world(&p->problem, cfg->world))
            return kv_err_set(err, "problem %s is not defined for W=%d", p->problem.name,
                              cfg->world);
        if (kv_library_load_from(r->env->patterns_root, p->problem.name, cfg->seeds, &p->lib,
                                 library_error, r, err) != 0)
            return -1;
        for (int s = 0; s < p->lib.n; s++)
            p->reachable |= 1u << p->lib.seeds[s].meta.cell;
        if (kv_map_init(&p->grid, cfg->islands) != 0)
            return kv_err_set(err, "out of memory");
    }
    return 0;
}

const char *kv_run_dir(const kv_run *r)
{
    return r->env->run_dir ? r->env->run_dir : r->cfg->run_dir;
}

static int problem_index(const kv_run *r, const char *name)
{
    for (int i = 0; i < r->n_problems; i++)
        if (strcmp(r->problems[i].problem.name, name) == 0)
            return i;
    return -1;
}

typedef struct {
    kv_run *r;
    kv_txn *t;
    int problem;
} elite_ctx;

static int add_elite(const kv_elite *e, void *arg, kv_err *err)
{
    elite_ctx *c = arg;
    kv_program p;
    if (kv_get_program(c->t, e->program_id, &p, err) != 0)
        return -1;
    kv_run_problem *rp = &c->r->problems[c->problem];
    kv_map_offer(&rp->grid, e->island, kv_cell_parse(e->cell), e->program_id, e->fitness, p.model);
    if (e->fitness > rp->best)
        rp->best = e->fitness;
    kv_program_clear(&p);
    return 0;
}

/* The step each program's last evaluation said follows, from the attempt
 * log: KV_STAGE_FULL, KV_STAGE_REMEASURE, or KV_STAGE_PROPOSAL for none;
 * and each problem's ok evaluations (the clock of migration). */
typedef struct {
    kv_run *r;
    uint8_t *next; /* by program id */
    uint64_t n;
} next_steps;

static int note_step(const kv_attempt *a, void *arg, kv_err *err)
{
    (void)err;
    next_steps *ns = arg;
    if (a->stage != KV_STAGE_PROPOSAL && a->verdict == KV_VERDICT_OK) {
        int pi = problem_index(ns->r, a->problem);
        if (pi >= 0)
            ns->r->problems[pi].accepted++;
    }
    if (a->program_id >= ns->n || a->stage == KV_STAGE_PROPOSAL)
        return 0;
    kv_stage next = KV_STAGE_PROPOSAL;
    if (a->verdict == KV_VERDICT_OK && a->detail && strcmp(a->detail, KV_NEXT_FULL) == 0)
        next = KV_STAGE_FULL;
    else if (a->verdict == KV_VERDICT_OK && a->detail && strcmp(a->detail, KV_NEXT_REMEASURE) == 0)
        next = KV_STAGE_REMEASURE;
    ns->next[a->program_id] = (uint8_t)next;
    return 0;
}

typedef struct {
    kv_run *r;
    kv_txn *t;
    const next_steps *ns;
} pending_ctx;

/* A program whose evaluation did not finish becomes a task again. */
static int requeue(const kv_program *p, void *arg, kv_err *err)
{
    pending_ctx *c = arg;
    int pi = problem_index(c->r, p->problem);
    if (pi < 0)
        return 0;
    kv_stage next = p->id < c->ns->n ? (kv_stage)c->ns->next[p->id] : KV_STAGE_PROPOSAL;
    if (p->verdict == KV_VERDICT_NONE)
        next = strcmp(p->op, KV_OP_SEED) == 0 || strcmp(p->op, KV_OP_REFERENCE) == 0
                   ? KV_STAGE_SEED
                   : KV_STAGE_SCREEN;
    else if (next == KV_STAGE_PROPOSAL || p->island < 0)
        return 0; /* finished */
    kv_run_task *t = calloc(1, sizeof *t);
    if (!t)
        return kv_err_set(err, "out of memory");
    t->id = p->id;
    t->problem = pi;
    t->island = p->island;
    t->stage = next;
    t->full_speedup = p->speedup;
    snprintf(t->op, sizeof t->op, "%s", p->op);
    snprintf(t->model, sizeof t->model, "%s", p->model);
    t->n_parents = p->n_parents < 2 ? (int)p->n_parents : 2;
    memcpy(t->parents, p->parents, sizeof(uint64_t) * (size_t)t->n_parents);
    if (kv_get_source(c->t, p->id, &t->src, &t->len, err) != 0) {
        free(t);
        return -1;
    }
    kv_run_append(c->r, t);
    cJSON *ev = kv_run_event_new(c->r, "requeue");
    cJSON_AddStringToObject(ev, "problem", p->problem);
    cJSON_AddNumberToObject(ev, "program", (double)p->id);
    cJSON_AddStringToObject(ev, "stage", kv_stage_name(next));
    kv_run_event_emit(c->r, ev);
    return 0;
}

/* Grids and unfinished work, from the archive. */
static int restore(kv_run *r, kv_err *err)
{
    kv_txn *t = NULL;
    kv_counters cnt;
    if (kv_read_begin(r->archive, &t, err) != 0)
        return -1;
    int rc = kv_get_counters(t, &cnt, err);
    for (int i = 0; i < r->n_problems && rc == 0; i++) {
        elite_ctx ec = {r, t, i};
        rc = kv_each_elite(t, r->problems[i].problem.name, -1, add_elite, &ec, err);
    }
    next_steps ns = {r, NULL, 0};
    if (rc == 0) {
        ns.n = cnt.next_program_id + 1;
        ns.next = calloc((size_t)ns.n, 1);
        rc =
            ns.next ? kv_each_attempt(t, 1, note_step, &ns, err) : kv_err_set(err, "out of memory");
    }
    if (rc == 0) {
        pending_ctx pc = {r, t, &ns};
        rc = kv_each_program(t, requeue, &pc, err);
    }
    free(ns.next);
    kv_txn_abort(t);
    return rc;
}

/* restore(), whose reads of a damaged record fail (a checksum, a length):
 * then the full walk, in a child, says whether the archive is damaged and
 * where, with the snapshot that can replace it. (A damaged page that would
 * crash this process was found before, when the archive was opened.) */
static int restore_checked(kv_run *r, kv_err *err)
{
    if (restore(r, err) == 0)
        return 0;
    kv_err why = {{0}};
    kv_walk_info walked;
    if (kv_archive_walk(kv_run_dir(r), NULL, 1, NULL, &walked, &why) != 0)
        *err = why;
    return -1;
}

/* The stored configuration against this one: a resumed run must not change
 * what it searches for or how. */
/* 1 when the stored configuration, parsed by this kevo and written back with
 * every default, is json: a run started by an older kevo, before a key with a
 * default was added, resumes. */
static int same_config(const char *stored, const char *json)
{
    kv_config *old = malloc(sizeof *old);
    kv_err ignored;
    char *canonical = NULL;
    if (old && kv_config_parse(stored, "the stored configuration", old, &ignored) == 0)
        canonical = kv_config_to_json(old);
    int same = canonical && strcmp(canonical, json) == 0;
    free(canonical);
    free(old);
    return same;
}

static int check_config(kv_run *r, const char *json, int *fresh, kv_err *err)
{
    kv_txn *t = NULL;
    char *stored = NULL, hash[KV_SHA256_HEX_LEN];
    if (kv_read_begin(r->archive, &t, err) != 0)
        return -1;
    int rc = kv_get_config(t, &stored, hash, err);
    if (rc == KV_NOTFOUND) {
        *fresh = 1;
        rc = 0;
    } else if (rc == 0) {
        *fresh = 0;
        if (strcmp(stored, json) != 0 && !same_config(stored, json))
            rc = kv_err_set(err,
                            "%s was started with another configuration (stored hash %.16s); "
                            "resume it with the same one (kevo run %s), or use a new run "
                            "directory",
                            kv_archive_path(r->archive), hash, kv_run_dir(r));
        else
            rc = kv_get_state(t, &r->state, err);
        if (rc == KV_NOTFOUND)
            rc = kv_err_set(err, "%s has a configuration but no run state: not a run of kevo run",
                            kv_archive_path(r->archive));
    }
    free(stored);
    kv_txn_abort(t);
    return rc;
}

/* A fresh run's configuration, with the run state, in one commit. */
static int put_config(kv_run *r, const char *json, kv_err *err)
{
    kv_txn *t = NULL;
    memcpy(r->state.rng, r->rng.s, sizeof r->state.rng);
    if (kv_write_begin(r->archive, &t, err) != 0)
        return -1;
    if (kv_put_config(t, json, err) != 0 || kv_put_state(t, &r->state, err) != 0) {
        kv_txn_abort(t);
        return -1;
    }
    return kv_txn_commit(t, err);
}

int kv_run_open(kv_run *r, const kv_search_env *env, kv_err *err)
{
    memset(r, 0, sizeof *r);
    r->env = env;
    r->cfg = env->cfg;
    r->t0_ns = kv_monotonic_ns();
    /* what the mutator needs is checked before anything is written */
    if (kv_run_mut_check(r, err) != 0)
        return -1;
    const char *dir = kv_run_dir(r);
    kv_archive_opts ao = {.create = 1, .after_commit = env->after_commit};
    if (kv_archive_open(dir, &ao, &r->archive, err) != 0)
        return -1;
    char events[PATH_MAX];
    if (kv_path_join(events, sizeof events, dir, "events.jsonl", err) != 0)
        return -1;
    if (!(r->events = kv_fopen_own(events, 1, err)))
        return -1;
    char *json = kv_config_to_json(r->cfg);
    if (!json)
        return kv_err_set(err, "out of memory");
    int fresh = 0;
    int rc = check_config(r, json, &fresh, err);
    if (rc == 0 && fresh)
        kv_rng_seed(&r->rng, r->cfg->seed);
    else if (rc == 0)
        memcpy(r->rng.s, r->state.rng, sizeof r->rng.s);
    r->wall_at_start = r->state.wall_s;
    r->next_snapshot_s = r->cfg->snapshots.interval_min * 60;
    r->next_hook_s = env->hook.every_s;
    if (rc != 0 || load_problems(r, err) != 0 || restore_checked(r, err) != 0 ||
        kv_run_mut_open(r, err) != 0) {
        free(json);
        return -1;
    }
    cJSON *ev = kv_run_event_new(r, fresh ? "start" : "resume");
    cJSON_AddStringToObject(ev, "run_dir", dir);
    cJSON_AddNumberToObject(ev, "groups", env->evalq.ops->groups(env->evalq.self));
    cJSON_AddNumberToObject(ev, "wall_s", r->state.wall_s);
    kv_run_event_emit(r, ev);
    /* what a problem without seeds starts from, said at every start; then
     * the references of the others checked (kept verdicts, else a self-check) */
    if (kv_run_plan_seedless(r, err) != 0 || kv_run_check_problems(r, err) != 0) {
        free(json);
        return -1;
    }
    /* the seeds (and references) before the configuration: a run killed
     * while storing them has none and starts afresh (restore() took up
     * those stored, and they come back as duplicates) */
    if (fresh && (rc = kv_run_add_seeds(r, err)) == 0)
        rc = put_config(r, json, err);
    free(json);
    return rc;
}

void kv_run_close(kv_run *r)
{
    kv_run_snapshot_wait(r); /* its thread reads the archive */
    kv_run_mut_close(r);
    while (r->tasks) {
        kv_run_task *t = r->tasks;
        kv_run_unlink(r, t);
        kv_run_task_free(t);
    }
    for (int i = 0; i < r->n_problems; i++) {
        kv_problem_free(&r->problems[i].problem);
        kv_library_free(&r->problems[i].lib);
        kv_map_free(&r->problems[i].grid);
    }
    free(r->problems);
    if (r->events)
        fclose(r->events);
    kv_archive_close(r->archive);
    memset(r, 0, sizeof *r);
}
