/* fake_evalq.c — a deterministic stand-in for the GPU evaluator (the
 * evaluator's kv_evalq interface), for the search's CPU tests and for measuring the
 * coordinator's own cost.
 *
 * A task takes `task_ms` of simulated group time; `groups` tasks run at
 * once and `groups` more may wait (as compilation runs ahead of the GPUs).
 * The verdict and speedup are functions of the source text alone, so a
 * run's results do not depend on timing:
 *   - the cell is the one the seed's annotation claims;
 *   - a source whose hash is ≡ 0 mod 13 "mismatches", ≡ 1 mod 29 "hangs";
 *   - the speedup is a smooth function of the #define values of the
 *     parameters (an optimum the search can climb towards), times a small
 *     stage-dependent factor (screen, full and re-measure differ by ±2%);
 *   - a source without annotations that begins with the text of its
 *     problem's reference.cu is that reference (ok, cell sm/unfused, speedup
 *     1 times the stage factor: NCCL against itself) or a child of it (the
 *     same cell, a speedup of 0.9 to 1.2 by its hash, and the rules of
 *     mismatches and hangs above); any other such source does not compile;
 *   - a correct source that holds the text KV_FAKE_IMPLAUSIBLE is timed
 *     below its floor: verdict implausible, classified, in the words of the
 *     real one (evaluator/pipeline.c), its size 100x faster than the reference.
 * A self-check task (the reference against itself) passes at every size of
 * its problem, unless the problem is one of opts.selfcheck_mismatch: then it
 * disagrees at the problem's first size, in the words of the real one. */
#include "fake_evalq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cell.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "mutate/pattern.h"

typedef struct fake_task {
    uint64_t id;
    kv_stage stage;
    const kv_problem *problem;
    int selfcheck;
    char *src;
    size_t len;
    int64_t done_ns; /* 0 while waiting for a group */
    struct fake_task *next;
} fake_task;

typedef struct {
    kv_fake_evalq_opts o;
    fake_task *tasks; /* submitted, in order */
    int n;
    double busy_s;
    uint64_t finished;
    uint64_t selfchecks; /* self-check tasks submitted */
} fake;

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static double stage_factor(uint64_t h, kv_stage st)
{
    uint64_t x = h ^ ((uint64_t)st * 0x9E3779B97F4A7C15ull);
    x ^= x >> 29;
    return 0.98 + 0.04 * (double)(x % 1000) / 1000.0;
}

/* 0: not the task's problem's reference nor a child of it; 1: the
 * reference itself; 2: a child (the reference's text and more). */
static int reference_kin(const fake_task *t)
{
    char *ref = NULL;
    size_t len = 0;
    if (!t->problem || kv_read_file(t->problem->reference, &ref, &len, NULL) != 0)
        return 0;
    int kin = t->len >= len && memcmp(t->src, ref, len) == 0 ? 1 + (t->len > len) : 0;
    free(ref);
    return kin;
}

static void score_ok(const fake_task *t, double s, kv_eval_report *r)
{
    r->verdict = KV_VERDICT_OK;
    r->speedup = s * stage_factor(fnv(t->src, t->len), t->stage);
    r->roofline = 0.5;
    r->n_sizes = 1;
    snprintf(r->sizes[0].name, sizeof r->sizes[0].name, "fake");
    r->sizes[0].ok = r->sizes[0].checked = r->sizes[0].timed = 1;
    r->sizes[0].ref.median = 10.0;
    r->sizes[0].cand.median = 10.0 / r->speedup;
    r->sizes[0].speedup = r->speedup;
    r->job.gpu_s = 0.001;
}

/* A correct report turned implausible, as kv_eval_score turns one. */
static void score_implausible(kv_eval_report *r)
{
    r->verdict = KV_VERDICT_IMPLAUSIBLE;
    r->speedup = r->roofline = 0;
    r->sizes[0].cand.median = r->sizes[0].ref.median / 100;
    r->sizes[0].floor_us = r->sizes[0].ref.median / 2;
    snprintf(r->message, sizeof r->message,
             "size fake: %.2f us is below the floor of %.2f us (the cost model at the machine's "
             "ceilings less a 10%% margin for noise): a kernel cannot move these bytes this "
             "fast; timing was gamed or the problem's cost model is wrong",
             r->sizes[0].cand.median, r->sizes[0].floor_us);
}

/* 1 when name is one of the NULL-terminated names (NULL: none). */
static int listed(const char *const *names, const char *name)
{
    for (int i = 0; names && names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* A self-check's report: every size of the problem checked, ok, or a
 * disagreement at its first size. */
static void score_selfcheck(const fake *f, const fake_task *t, kv_eval_report *r)
{
    const kv_problem *p = t->problem;
    int bad = listed(f->o.selfcheck_mismatch, p->name);
    r->baseline = 1;
    r->wall_s = 0.001;
    if (listed(f->o.selfcheck_hang, p->name)) {
        r->verdict = KV_VERDICT_HANG;
        snprintf(r->message, sizeof r->message,
                 "deadline of 120 s passed in phase correctness (rank 0) (fake)");
        return;
    }
    r->verdict = bad ? KV_VERDICT_MISMATCH : KV_VERDICT_OK;
    r->n_sizes = p->n_sizes < KV_JOB_MAX_SIZES ? p->n_sizes : KV_JOB_MAX_SIZES;
    for (int s = 0; s < r->n_sizes; s++) {
        snprintf(r->sizes[s].name, sizeof r->sizes[s].name, "%s", p->sizes[s].name);
        r->sizes[s].validation = p->sizes[s].validation;
        r->sizes[s].checked = 1;
        r->sizes[s].ok = !(bad && s == 0);
    }
    if (bad)
        snprintf(r->message, sizeof r->message,
                 "the reference does not agree with itself at size %s: %s[0] is 1 on window "
                 "buffers and 2 on plain memory shifted by 272 bytes (fake)",
                 p->sizes[0].name, p->outputs[0].name);
}

/* The report of a task: a pure function of (source, stage) and the
 * problem's reference. */
static void score(const fake_task *t, kv_eval_report *r)
{
    memset(r, 0, sizeof *r);
    uint64_t h = fnv(t->src, t->len);
    kv_pattern_meta m;
    kv_err e;
    r->wall_s = 0.001;
    int kin = 0;
    if (kv_pattern_parse(t->src, t->len, "fake", &m, &e) != 0 && !(kin = reference_kin(t))) {
        r->verdict = KV_VERDICT_COMPILE_ERROR;
        snprintf(r->message, sizeof r->message, "fake: %s", e.msg);
        return;
    }
    r->cell = kin ? kv_cell_index(KV_TRANSPORT_SM, KV_FUSION_UNFUSED) : m.cell;
    r->classified = 1; /* the cell is set; cls stays empty (kv_class_free is safe on zeros) */
    if (kin == 1) {
        score_ok(t, 1.0, r);
        return;
    }
    if (h % 13 == 0) {
        r->verdict = KV_VERDICT_MISMATCH;
        snprintf(r->message, sizeof r->message, "fake mismatch at element %llu",
                 (unsigned long long)(h % 4096));
        return;
    }
    if (h % 29 == 1) {
        r->verdict = KV_VERDICT_HANG;
        snprintf(r->message, sizeof r->message, "fake hang");
        return;
    }
    if (kin == 2) {
        score_ok(t, 0.9 + 0.3 * (double)(h % 1000) / 1000.0, r);
        return;
    }
    double s = 0.8 + 0.1 * (double)(fnv(m.problem, strlen(m.problem)) % 5);
    for (int i = 0; i < m.n_params; i++) {
        const kv_pattern_param *p = &m.params[i];
        /* each parameter has a best value: a hash picks it among its allowed ones */
        double lo = p->has_range ? (double)p->lo : (double)p->values[0];
        double hi = p->has_range ? (double)p->hi : (double)p->values[p->n_values - 1];
        double span = hi > lo ? hi - lo : 1;
        double best = lo + span * (double)(fnv(p->name, strlen(p->name)) % 100) / 100.0;
        double d = ((double)p->value - best) / span;
        s *= 1.0 + 0.3 * exp(-8 * d * d);
    }
    score_ok(t, s, r);
    if (strstr(t->src, KV_FAKE_IMPLAUSIBLE)) /* NUL-terminated: f_submit */
        score_implausible(r);
}

static int running(const fake *f)
{
    int n = 0;
    for (const fake_task *t = f->tasks; t; t = t->next)
        n += t->done_ns != 0;
    return n;
}

static void start_waiting(fake *f)
{
    int64_t now = kv_monotonic_ns();
    for (fake_task *t = f->tasks; t && running(f) < f->o.groups; t = t->next)
        if (!t->done_ns)
            t->done_ns = now + (int64_t)(f->o.task_ms * 1e6);
}

static int f_submit(void *self, const kv_eval_task *et, kv_err *err)
{
    fake *f = self;
    size_t len = et->baseline ? 0 : et->len; /* a baseline has no source */
    fake_task *t = calloc(1, sizeof *t);
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
    t->problem = et->problem;
    t->selfcheck = et->selfcheck;
    f->selfchecks += et->selfcheck != 0;
    fake_task **p = &f->tasks;
    while (*p)
        p = &(*p)->next;
    *p = t;
    f->n++;
    f->o.submitted++;
    start_waiting(f);
    return 0;
}

static int f_capacity(void *self)
{
    fake *f = self;
    int cap = 2 * f->o.groups - f->n;
    return cap > 0 ? cap : 0;
}

static int f_in_flight(void *self)
{
    return ((fake *)self)->n;
}

static int f_pollfds(void *self, struct pollfd *fds, int cap, int *timeout_ms)
{
    (void)fds;
    (void)cap;
    fake *f = self;
    int64_t now = kv_monotonic_ns(), next = -1;
    for (const fake_task *t = f->tasks; t; t = t->next)
        if (t->done_ns && (next < 0 || t->done_ns < next))
            next = t->done_ns;
    if (next >= 0)
        *timeout_ms = next <= now ? 0 : (int)((next - now) / 1000000 + 1);
    return 0;
}

static int f_step(void *self, kv_err *err)
{
    (void)err;
    start_waiting(self);
    return 0;
}

static int f_take(void *self, kv_eval_done *out)
{
    fake *f = self;
    int64_t now = kv_monotonic_ns();
    for (fake_task **p = &f->tasks; *p; p = &(*p)->next) {
        fake_task *t = *p;
        if (!t->done_ns || t->done_ns > now)
            continue;
        *p = t->next;
        f->n--;
        memset(out, 0, sizeof *out);
        out->id = t->id;
        out->stage = t->stage;
        if (t->selfcheck) {
            memset(&out->report, 0, sizeof out->report);
            score_selfcheck(f, t, &out->report);
        } else {
            score(t, &out->report);
        }
        out->group_s = f->o.task_ms * 1e-3;
        f->busy_s += f->o.task_ms * 1e-3;
        f->finished++;
        free(t->src);
        free(t);
        start_waiting(f);
        return 0;
    }
    return KV_NOTFOUND;
}

static int f_groups(void *self)
{
    return ((fake *)self)->o.groups;
}

static double f_busy(void *self)
{
    return ((fake *)self)->busy_s;
}

static void f_destroy(void *self)
{
    fake *f = self;
    while (f->tasks) {
        fake_task *t = f->tasks;
        f->tasks = t->next;
        free(t->src);
        free(t);
    }
    free(f);
}

static const kv_evalq_ops fake_ops = {f_submit, f_capacity, f_in_flight, f_pollfds, f_step,
                                      f_take,   f_groups,   f_busy,      f_destroy};

int kv_fake_evalq_new(const kv_fake_evalq_opts *o, kv_evalq *out)
{
    fake *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->o = *o;
    if (f->o.groups < 1)
        f->o.groups = 1;
    out->ops = &fake_ops;
    out->self = f;
    return 0;
}

/* The verdict and speedup the fake gives a source at a stage, for tests
 * that check what the search stored. */
void kv_fake_evalq_score(const char *src, size_t len, kv_stage stage, kv_eval_report *r)
{
    fake_task t = {.stage = stage, .src = (char *)src, .len = len};
    score(&t, r);
}

uint64_t kv_fake_evalq_selfchecks(kv_evalq q)
{
    return ((const fake *)q.self)->selfchecks;
}
