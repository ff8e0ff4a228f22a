/* evalq.c — the evaluator on real GPUs (evaluator.h, "the queue"): a compile pool
 * running ahead of one supervised group per set of NVLink peers. The search
 * drives it from its loop; kv_evaluate submits one task and waits.
 *
 * A task is compiled (through the cache), checked statically (NVLS guard,
 * runtime lookups, SASS identical to another program's), then waits for an
 * idle group, runs one job (the screening protocol for KV_STAGE_SCREEN, the
 * full one otherwise) and is scored and classified; a baseline task runs the
 * reference alone and is scored. A screening candidate compiles for
 * seconds and runs for less than one, so the queue accepts, beyond one
 * running and one ready task per group, as many more as the compile pool
 * has workers (at most COMPILE_AHEAD per group): enough compiles run ahead
 * that a group never waits for nvcc. */
#include "evaluator/evaluator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/pipeline.h"
#include "common/clock.h"

/* Compilations run ahead per group, at most: more would only make the
 * proposals' view of the archive staler. */
#define COMPILE_AHEAD 8

typedef enum { T_COMPILING, T_READY, T_RUNNING, T_DONE } task_state;

typedef struct gtask {
    uint64_t id;
    kv_stage stage;
    int baseline, selfcheck;
    const kv_problem *problem;
    char *src;
    size_t len;
    task_state state;
    uint64_t ticket; /* compile pool */
    int group;       /* while running */
    double t_submit, t_job, group_s;
    kv_eval_static st;
    kv_eval_report rep;
    struct gtask *next;
} gtask;

/* A compiled reference per problem, and the SASS hashes seen for it. */
typedef struct {
    const kv_problem *problem;
    char dir[PATH_MAX];
    char ref_so[PATH_MAX];
    char inputs_so[PATH_MAX];
    int n_sass, cap_sass;
    struct {
        char hash[KV_SHA256_HEX_LEN];
        uint64_t id;
    } * sass;
} gproblem;

typedef struct {
    kv_evalq_gpu_opts o; /* o.screen and o.full: the protocols */
    kv_compile_pool *pool;
    int n_groups; /* formed; on demand, 0 until a task first needs one */
    kv_group *groups[KV_EVALQ_MAX_GROUPS];
    gtask *running[KV_EVALQ_MAX_GROUPS];
    int restarted[KV_EVALQ_MAX_GROUPS]; /* on demand: started since its last job */
    gtask *tasks;
    int n_tasks;
    int ahead; /* tasks accepted beyond two per group */
    gproblem *problems;
    int n_problems;
    uint64_t next_job;
    double busy_s;
} gpu_q;

static double now_s(void)
{
    return (double)kv_monotonic_ns() * 1e-9;
}

static const kv_eval_opts *protocol(const gpu_q *q, kv_stage stage)
{
    return stage == KV_STAGE_SCREEN ? &q->o.screen : &q->o.full;
}

/* A problem is known by its folder: a caller may load another problem into
 * the same struct (kevo seed does, one problem after the other). */
static gproblem *problem_of(gpu_q *q, const kv_problem *p, kv_err *err)
{
    for (int i = 0; i < q->n_problems; i++)
        if (q->problems[i].problem == p && strcmp(q->problems[i].dir, p->dir) == 0)
            return &q->problems[i];
    gproblem *np = realloc(q->problems, sizeof *np * (size_t)(q->n_problems + 1));
    if (!np) {
        kv_err_set(err, "out of memory");
        return NULL;
    }
    q->problems = np;
    gproblem *gp = &np[q->n_problems];
    memset(gp, 0, sizeof *gp);
    gp->problem = p;
    snprintf(gp->dir, sizeof gp->dir, "%s", p->dir);
    kv_compile_result ref;
    if (kv_eval_reference(&q->o.full.compile, p, &ref, err) != 0)
        return NULL;
    snprintf(gp->ref_so, sizeof gp->ref_so, "%s", ref.so_path);
    kv_compile_result_free(&ref);
    if (kv_eval_inputs_hook(&q->o.full.compile, p, gp->inputs_so, sizeof gp->inputs_so, err) != 0)
        return NULL;
    q->n_problems++;
    return gp;
}

/* The program that first had this SASS, or 0 (then it is recorded as id's). */
static uint64_t sass_owner(gproblem *gp, const char *hash, uint64_t id)
{
    if (!*hash)
        return 0; /* no hash to compare: evaluate */
    for (int i = 0; i < gp->n_sass; i++)
        if (strcmp(gp->sass[i].hash, hash) == 0)
            return gp->sass[i].id == id ? 0 : gp->sass[i].id;
    if (gp->n_sass == gp->cap_sass) {
        int cap = gp->cap_sass ? 2 * gp->cap_sass : 64;
        void *n = realloc(gp->sass, sizeof *gp->sass * (size_t)cap);
        if (!n)
            return 0; /* dedup is an optimisation: without memory, evaluate */
        gp->sass = n;
        gp->cap_sass = cap;
    }
    snprintf(gp->sass[gp->n_sass].hash, sizeof gp->sass[0].hash, "%s", hash);
    gp->sass[gp->n_sass++].id = id;
    return 0;
}

static int q_submit(void *self, const kv_eval_task *et, kv_err *err)
{
    gpu_q *q = self;
    double t_submit = now_s(); /* the reference's first compile counts */
    if (!problem_of(q, et->problem, err))
        return -1;
    size_t len = et->baseline ? 0 : et->len;
    gtask *t = calloc(1, sizeof *t);
    if (!t || !(t->src = malloc(len + 1))) {
        free(t);
        return kv_err_set(err, "out of memory");
    }
    if (len)
        memcpy(t->src, et->src, len);
    t->src[len] = 0;
    t->len = len;
    t->id = et->id;
    t->stage = et->stage;
    t->baseline = et->baseline || et->selfcheck;
    t->selfcheck = et->selfcheck;
    t->problem = et->problem;
    t->t_submit = t_submit;
    if (t->baseline) {
        t->rep.baseline = 1;
        t->state = T_READY;
    } else if (kv_compile_submit(q->pool, t->src, t->len, &t->ticket, err) != 0) {
        free(t->src);
        free(t);
        return -1;
    }
    t->next = q->tasks;
    q->tasks = t;
    q->n_tasks++;
    return 0;
}

static int q_capacity(void *self)
{
    gpu_q *q = self;
    int groups = q->n_groups ? q->n_groups : 1;
    int cap = 2 * groups + q->ahead - q->n_tasks;
    return cap > 0 ? cap : 0;
}

static int q_in_flight(void *self)
{
    return ((gpu_q *)self)->n_tasks;
}

static int q_pollfds(void *self, struct pollfd *fds, int cap, int *timeout_ms)
{
    gpu_q *q = self;
    int n = 0, fdv[64];
    int k = kv_compile_pollfds(q->pool, fdv, 64);
    for (int i = 0; i < k && n < cap; i++)
        fds[n++] = (struct pollfd){.fd = fdv[i], .events = POLLIN};
    if (k > 0 && *timeout_ms > 100)
        *timeout_ms = 100; /* children are reaped by polling the pool */
    for (int g = 0; g < q->n_groups; g++) {
        int t = -1;
        if (cap - n < KV_GROUP_MAX_POLLFDS)
            return -1;
        n += kv_group_pollfds(q->groups[g], fds + n, cap - n, &t);
        if (t >= 0 && (*timeout_ms < 0 || t < *timeout_ms))
            *timeout_ms = t;
    }
    return n;
}

static gtask *find_ticket(gpu_q *q, uint64_t ticket)
{
    for (gtask *t = q->tasks; t; t = t->next)
        if (t->state == T_COMPILING && t->ticket == ticket)
            return t;
    return NULL;
}

/* A compiled task: final already (compile error, NVLS, runtime lookups,
 * duplicate SASS) or ready. */
static int compiled(gpu_q *q, gtask *t, kv_err *err)
{
    const kv_eval_opts *o = protocol(q, t->stage);
    int rc = kv_eval_after_compile(o, t->src, &t->rep, &t->st, err);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        t->state = T_DONE;
        return 0;
    }
    gproblem *gp = problem_of(q, t->problem, err);
    if (!gp)
        return -1;
    uint64_t owner = o->sass_dedup ? sass_owner(gp, t->rep.compile.sass_hash, t->id) : 0;
    if (owner) {
        t->rep.verdict = KV_VERDICT_DUPLICATE;
        t->rep.duplicate_of = owner;
        snprintf(t->rep.message, sizeof t->rep.message,
                 "the same SASS as program %llu: not evaluated again", (unsigned long long)owner);
        t->state = T_DONE;
        return 0;
    }
    t->state = T_READY;
    return 0;
}

/* The ready task to run next: the oldest follow-up stage (its result may
 * change the archive that proposals draw from), else the oldest screening. */
static gtask *next_ready(gpu_q *q)
{
    gtask *follow = NULL, *screen = NULL;
    for (gtask *t = q->tasks; t; t = t->next) /* newest first: the last match is the oldest */
        if (t->state == T_READY && t->stage == KV_STAGE_SCREEN)
            screen = t;
        else if (t->state == T_READY)
            follow = t;
    return follow ? follow : screen;
}

/* The groups: the given ones (checked to be NVLink peers), or as many
 * disjoint groups of W peers as the node has, up to max_groups. */
static int form_groups(const kv_evalq_gpu_opts *o, int groups[][KV_GROUP_MAX_WORLD], kv_err *err)
{
    kv_topology topo;
    int w = o->full.world;
    if (kv_topology_probe(o->full.worker_path, &topo, err) != 0)
        return -1;
    if (w < 1 || w > KV_GROUP_MAX_WORLD)
        return kv_err_set(err, "a group of %d GPUs: kevo runs groups of 1 to %d", w,
                          KV_GROUP_MAX_WORLD);
    if (o->n_groups == 0) {
        int n = kv_topology_groups(&topo, w, o->max_groups, groups);
        if (n == 0)
            return kv_err_set(err,
                              "no group of %d GPUs that are all NVLink peers on this node "
                              "(%d GPU%s visible; kevo doctor shows the links)",
                              w, topo.n, topo.n == 1 ? "" : "s");
        return n;
    }
    for (int g = 0; g < o->n_groups; g++) {
        memcpy(groups[g], o->groups[g], sizeof(int) * (size_t)w);
        if (kv_topology_check_group(&topo, groups[g], w, err) != 0)
            return o->groups_name ? kv_err_prefix(err, "%s[%d]", o->groups_name, g) : -1;
    }
    return o->n_groups;
}

/* Forms and starts the groups. */
static int start_groups(gpu_q *q, kv_err *err)
{
    int devs[KV_EVALQ_MAX_GROUPS][KV_GROUP_MAX_WORLD];
    int n = form_groups(&q->o, devs, err);
    if (n < 0)
        return -1;
    for (int g = 0; g < n; g++) {
        kv_group_opts go;
        kv_eval_group_opts(&q->o.full, g, devs[g], &go);
        if (kv_group_new(&go, &q->groups[g], err) != 0)
            return -1;
        q->n_groups = g + 1;
        if (kv_group_start(q->groups[g], err) != 0)
            return -1;
        q->restarted[g] = 1;
    }
    return 0;
}

/* Ready tasks onto idle groups. */
static int start_jobs(gpu_q *q, kv_err *err)
{
    if (q->n_groups == 0 && next_ready(q) && start_groups(q, err) != 0)
        return -1;
    for (int g = 0; g < q->n_groups; g++) {
        if (q->running[g] || kv_group_get_state(q->groups[g]) != KV_GROUP_IDLE)
            continue;
        gtask *pick = next_ready(q);
        if (!pick)
            return 0;
        const kv_eval_opts *o = protocol(q, pick->stage);
        gproblem *gp = problem_of(q, pick->problem, err);
        if (!gp)
            return -1;
        kv_job job;
        if (pick->selfcheck)
            kv_eval_make_selfcheck_job(o, q->next_job++, pick->problem, gp->ref_so, &job);
        else
            kv_eval_make_job(o, q->next_job++, pick->problem, gp->ref_so,
                             pick->baseline ? NULL : pick->rep.compile.so_path, &job);
        snprintf(job.inputs_so, sizeof job.inputs_so, "%s", gp->inputs_so);
        if (kv_group_submit(q->groups[g], &job, o->job_timeout_s, err) != 0)
            return -1;
        pick->state = T_RUNNING;
        pick->group = g;
        pick->t_job = now_s();
        q->running[g] = pick;
        q->restarted[g] = 0;
    }
    return 0;
}

/* A group that is DEAD (could not start) is started again; on demand, only
 * once for the task that waits for it: then its reason is the error. */
static int revive(gpu_q *q, int g, kv_err *err)
{
    if (kv_group_get_state(q->groups[g]) != KV_GROUP_DEAD)
        return 0;
    if (q->o.on_demand && q->restarted[g])
        return kv_err_set(err, "%s", kv_group_last_error(q->groups[g]));
    if (kv_group_start(q->groups[g], err) != 0)
        return kv_err_prefix(err, "GPU group %d", g);
    q->restarted[g] = q->o.on_demand;
    return 0;
}

static int q_step(void *self, kv_err *err)
{
    gpu_q *q = self;
    if (kv_compile_poll(q->pool, err) < 0)
        return -1;
    uint64_t ticket;
    kv_compile_result cr;
    while (kv_compile_take(q->pool, &ticket, &cr) == 0) {
        gtask *t = find_ticket(q, ticket);
        if (!t) {
            kv_compile_result_free(&cr);
            continue;
        }
        t->rep.compile = cr;
        if (compiled(q, t, err) != 0)
            return -1;
    }
    for (int g = 0; g < q->n_groups; g++) {
        if (revive(q, g, err) != 0)
            return -1;
        kv_job_result res;
        int rc = kv_group_step(q->groups[g], &res, err);
        if (rc < 0)
            return kv_err_prefix(err, "GPU group %d", g);
        if (rc == 1 && q->running[g]) {
            gtask *t = q->running[g];
            q->running[g] = NULL;
            t->group_s = now_s() - t->t_job;
            q->busy_s += t->group_s;
            t->rep.job = res;
            const kv_eval_opts *o = protocol(q, t->stage);
            if ((t->baseline
                     ? kv_eval_score(t->problem, o->world, &t->rep, err)
                     : kv_eval_after_job(t->problem, o->world, t->src, &t->st, &t->rep, err)) != 0)
                return -1;
            t->state = T_DONE;
        }
    }
    return start_jobs(q, err);
}

static void task_free(gtask *t)
{
    kv_eval_static_free(&t->st);
    kv_eval_report_free(&t->rep);
    free(t->src);
    free(t);
}

static int q_take(void *self, kv_eval_done *out)
{
    gpu_q *q = self;
    for (gtask **p = &q->tasks; *p; p = &(*p)->next) {
        gtask *t = *p;
        if (t->state != T_DONE)
            continue;
        *p = t->next;
        q->n_tasks--;
        memset(out, 0, sizeof *out);
        out->id = t->id;
        out->stage = t->stage;
        t->rep.program = t->id;
        out->report = t->rep; /* ownership moves to the taker */
        out->report.wall_s = now_s() - t->t_submit;
        out->group_s = t->group_s;
        memset(&t->rep, 0, sizeof t->rep);
        task_free(t);
        return 0;
    }
    return KV_NOTFOUND;
}

static int q_groups(void *self)
{
    return ((gpu_q *)self)->n_groups;
}

static double q_busy(void *self)
{
    gpu_q *q = self;
    double busy = q->busy_s, now = now_s();
    for (int g = 0; g < q->n_groups; g++)
        if (q->running[g])
            busy += now - q->running[g]->t_job;
    return busy;
}

static void q_destroy(void *self)
{
    gpu_q *q = self;
    if (!q)
        return;
    for (int g = 0; g < q->n_groups; g++)
        kv_group_free(q->groups[g]);
    kv_compile_pool_free(q->pool);
    while (q->tasks) {
        gtask *t = q->tasks;
        q->tasks = t->next;
        task_free(t);
    }
    for (int i = 0; i < q->n_problems; i++)
        free(q->problems[i].sass);
    free(q->problems);
    free(q);
}

static const kv_evalq_ops gpu_ops = {q_submit, q_capacity, q_in_flight, q_pollfds, q_step,
                                     q_take,   q_groups,   q_busy,      q_destroy};

int kv_evalq_gpu_new(const kv_evalq_gpu_opts *o, kv_evalq *out, kv_err *err)
{
    if (o->n_groups < 0 || o->n_groups > KV_EVALQ_MAX_GROUPS || o->max_groups < 0 ||
        o->max_groups > KV_EVALQ_MAX_GROUPS)
        return kv_err_set(err,
                          "evaluator queue: %d groups given, up to %d formed: "
                          "it holds 0 to %d",
                          o->n_groups, o->max_groups, KV_EVALQ_MAX_GROUPS);
    gpu_q *q = calloc(1, sizeof *q);
    if (!q)
        return kv_err_set(err, "out of memory");
    q->o = *o;
    if (q->o.n_groups == 0 && q->o.max_groups == 0)
        q->o.max_groups = 1;
    q->next_job = 1;
    if ((!o->on_demand && start_groups(q, err) != 0) ||
        kv_compile_pool_new(&q->o.full.compile, &q->pool, err) != 0) {
        q_destroy(q);
        return -1;
    }
    /* enough compiles ahead that a group never waits for nvcc */
    int n = o->n_groups ? o->n_groups : q->n_groups ? q->n_groups : 1;
    long workers = o->full.compile.jobs > 0 ? o->full.compile.jobs : sysconf(_SC_NPROCESSORS_ONLN);
    q->ahead = workers < 1 ? 1 : workers < COMPILE_AHEAD * n ? (int)workers : COMPILE_AHEAD * n;
    out->ops = &gpu_ops;
    out->self = q;
    return 0;
}

double kv_evalq_gpu_last_restart_s(const kv_evalq *q)
{
    const gpu_q *g = q->self;
    return g && g->n_groups > 0 ? kv_group_last_restart_s(g->groups[0]) : 0;
}
