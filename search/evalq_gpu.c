/* evalq_gpu.c — the search's evaluator on real GPUs (evalq.h): a compile
 * pool running ahead of one supervised group per set of NVLink peers.
 *
 * A task is compiled (through the cache), checked statically (NVLS guard,
 * SASS identical to another program's), then waits for an idle group, runs
 * one job (the screening protocol for KV_STAGE_SCREEN, the full one
 * otherwise) and is scored and classified. A screening candidate compiles
 * for seconds and runs for less than one, so the queue accepts, beyond one
 * running and one ready task per group, as many more as the compile pool
 * has workers (at most COMPILE_AHEAD per group): enough compiles run ahead
 * that a group never waits for nvcc. */
#include "search/evalq_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evaluator/topology.h"
#include "kevo/clock.h"

/* Compilations run ahead per group, at most: more would only make the
 * proposals' view of the archive staler. */
#define COMPILE_AHEAD 8

typedef enum { T_COMPILING, T_READY, T_RUNNING, T_DONE } task_state;

typedef struct gtask {
    uint64_t id;
    kv_stage stage;
    const kv_problem *problem;
    char *src;
    size_t len;
    task_state state;
    uint64_t ticket;          /* compile pool */
    int group;                /* while running */
    double t_submit, t_job, group_s;
    kv_eval_static st;
    kv_eval_report rep;
    struct gtask *next;
} gtask;

/* A compiled reference per problem, and the SASS hashes seen for it. */
typedef struct {
    const kv_problem *problem;
    char ref_so[PATH_MAX];
    char inputs_so[PATH_MAX];
    int n_sass, cap_sass;
    struct {
        char hash[KV_SHA256_HEX_LEN];
        uint64_t id;
    } *sass;
} gproblem;

typedef struct {
    kv_eval_opts screen, full;
    kv_compile_pool *pool;
    int n_groups;
    kv_group *groups[KV_CFG_MAX_GROUPS];
    gtask *running[KV_CFG_MAX_GROUPS];
    gtask *tasks;
    int n_tasks;
    int ahead;                /* tasks accepted beyond two per group */
    gproblem *problems;
    int n_problems;
    uint64_t next_job;
    double busy_s;
} gpu_q;

static double now_s(void)
{
    return (double)kv_monotonic_ns() * 1e-9;
}

static gproblem *problem_of(gpu_q *q, const kv_problem *p, kv_err *err)
{
    for (int i = 0; i < q->n_problems; i++)
        if (q->problems[i].problem == p)
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
    kv_compile_result ref;
    if (kv_eval_reference(&q->full.compile, p, &ref, err) != 0)
        return NULL;
    snprintf(gp->ref_so, sizeof gp->ref_so, "%s", ref.so_path);
    kv_compile_result_free(&ref);
    if (kv_eval_inputs_hook(&q->full.compile, p, gp->inputs_so, sizeof gp->inputs_so, err) != 0)
        return NULL;
    q->n_problems++;
    return gp;
}

/* The program that first had this SASS, or 0 (then it is recorded as id's). */
static uint64_t sass_owner(gproblem *gp, const char *hash, uint64_t id)
{
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
    if (!problem_of(q, et->problem, err))
        return -1;
    gtask *t = calloc(1, sizeof *t);
    if (!t || !(t->src = malloc(et->len + 1))) {
        free(t);
        return kv_err_set(err, "out of memory");
    }
    memcpy(t->src, et->src, et->len);
    t->src[et->len] = 0;
    t->len = et->len;
    t->id = et->id;
    t->stage = et->stage;
    t->problem = et->problem;
    t->t_submit = now_s();
    if (kv_compile_submit(q->pool, t->src, t->len, &t->ticket, err) != 0) {
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
    int cap = 2 * q->n_groups + q->ahead - q->n_tasks;
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

/* A compiled task: final already (compile error, NVLS, duplicate SASS) or ready. */
static int compiled(gpu_q *q, gtask *t, kv_err *err)
{
    const kv_eval_opts *o = t->stage == KV_STAGE_SCREEN ? &q->screen : &q->full;
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
    uint64_t owner = sass_owner(gp, t->rep.compile.sass_hash, t->id);
    if (owner) {
        t->rep.verdict = KV_VERDICT_DUPLICATE;
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

/* Ready tasks onto idle groups. */
static int start_jobs(gpu_q *q, kv_err *err)
{
    for (int g = 0; g < q->n_groups; g++) {
        if (q->running[g] || kv_group_get_state(q->groups[g]) != KV_GROUP_IDLE)
            continue;
        gtask *pick = next_ready(q);
        if (!pick)
            return 0;
        const kv_eval_opts *o = pick->stage == KV_STAGE_SCREEN ? &q->screen : &q->full;
        gproblem *gp = problem_of(q, pick->problem, err);
        if (!gp)
            return -1;
        kv_job job;
        kv_eval_make_job(o, q->next_job++, pick->problem, gp->ref_so, pick->rep.compile.so_path,
                         &job);
        snprintf(job.inputs_so, sizeof job.inputs_so, "%s", gp->inputs_so);
        if (kv_group_submit(q->groups[g], &job, o->job_timeout_s, err) != 0)
            return -1;
        pick->state = T_RUNNING;
        pick->group = g;
        pick->t_job = now_s();
        q->running[g] = pick;
    }
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
        kv_group_state st = kv_group_get_state(q->groups[g]);
        if (st == KV_GROUP_DEAD && kv_group_start(q->groups[g], err) != 0)
            return kv_err_prefix(err, "GPU group %d", g);
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
            const kv_eval_opts *o = t->stage == KV_STAGE_SCREEN ? &q->screen : &q->full;
            if (kv_eval_after_job(t->problem, o->world, t->src, &t->st, &t->rep, err) != 0)
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

/* The groups: the configured ones (checked to be NVLink peers), or as many
 * disjoint groups of W peers as the node has. */
static int form_groups(const kv_config *cfg, const char *worker, int groups[][KV_GROUP_MAX_WORLD],
                       kv_err *err)
{
    kv_topology topo;
    if (kv_topology_probe(worker, &topo, err) != 0)
        return -1;
    if (cfg->n_groups == 0) {
        int n = kv_topology_groups(&topo, cfg->world, KV_CFG_MAX_GROUPS, groups);
        if (n == 0)
            return kv_err_set(err, "no group of %d GPUs that are all NVLink peers on this node "
                                   "(%d GPU%s visible; kevo doctor shows the links)",
                              cfg->world, topo.n, topo.n == 1 ? "" : "s");
        return n;
    }
    for (int g = 0; g < cfg->n_groups; g++) {
        if (cfg->group_size[g] != cfg->world)
            return kv_err_set(err, "gpu_groups[%d] has %d GPUs; world is %d", g,
                              cfg->group_size[g], cfg->world);
        memcpy(groups[g], cfg->groups[g], sizeof(int) * (size_t)cfg->world);
        if (kv_topology_check_group(&topo, groups[g], cfg->world, err) != 0)
            return kv_err_prefix(err, "gpu_groups[%d]", g);
    }
    return cfg->n_groups;
}

int kv_evalq_gpu_new(const kv_config *cfg, const kv_eval_opts *base, kv_evalq *out, kv_err *err)
{
    gpu_q *q = calloc(1, sizeof *q);
    if (!q)
        return kv_err_set(err, "out of memory");
    q->next_job = 1;
    q->full = *base;
    q->full.world = cfg->world;
    q->full.trials = cfg->eval.trials;
    q->full.warmup = cfg->eval.full_warmup;
    q->full.iters = cfg->eval.full_iters;
    q->full.job_timeout_s = cfg->eval.job_timeout_s;
    q->full.recycle_every = cfg->eval.recycle_every;
    q->full.allow_nvls = cfg->eval.allow_nvls;
    q->full.allow_runtime_lookups = cfg->eval.allow_runtime_lookups;
    q->full.allow_unconfined = cfg->eval.allow_unconfined;
    q->full.output_cap_kib = cfg->eval.worker_output_kib;
    q->full.log_max_mib = cfg->eval.worker_log_mib;
    q->full.scratch_mib = cfg->eval.scratch_mib;
    q->full.worker_uid = (uint32_t)cfg->eval.worker_uid;
    q->full.seed = cfg->seed;
    q->full.compile.timeout_s = cfg->eval.compile_timeout_s;
    q->full.compile.jobs = cfg->eval.compile_jobs;
    q->screen = q->full;
    q->screen.warmup = cfg->eval.screen_warmup;
    q->screen.iters = cfg->eval.screen_iters;
    int devs[KV_CFG_MAX_GROUPS][KV_GROUP_MAX_WORLD];
    int n = form_groups(cfg, base->worker_path, devs, err);
    if (n < 0 || kv_compile_pool_new(&q->full.compile, &q->pool, err) != 0) {
        free(q);
        return -1;
    }
    for (int g = 0; g < n; g++) {
        kv_group_opts go;
        kv_eval_group_opts(&q->full, g, devs[g], &go);
        if (kv_group_new(&go, &q->groups[g], err) != 0 || kv_group_start(q->groups[g], err) != 0) {
            q->n_groups = g + (q->groups[g] != NULL);
            q_destroy(q);
            return -1;
        }
        q->n_groups = g + 1;
    }
    long workers = cfg->eval.compile_jobs > 0 ? cfg->eval.compile_jobs
                                              : sysconf(_SC_NPROCESSORS_ONLN);
    q->ahead = workers < 1 ? 1 : workers < COMPILE_AHEAD * n ? (int)workers : COMPILE_AHEAD * n;
    out->ops = &gpu_ops;
    out->self = q;
    return 0;
}
