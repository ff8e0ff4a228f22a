/* rows.c — the per-program, per-size rows of kevo archive export (rows.h). */
#include "rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "problem/problem.h"
#include "report/snapshot.h"

typedef struct {
    char name[KV_NAME_MAX];
    kv_problem *def; /* NULL: its definition is not at hand (no GB/s) */
} problem_def;

struct kv_report_rows {
    int world;
    kv_problem_loader load_problem;
    uint64_t *elites; /* sorted */
    size_t n_elites, cap_elites;
    problem_def *defs;
    size_t n_defs, cap_defs;
};

static int collect_elite(const kv_elite *e, void *ctx, kv_err *err)
{
    kv_report_rows *r = ctx;
    uint64_t *v = kv_report_grow(r->elites, &r->cap_elites, r->n_elites, sizeof *v, 64);
    if (!v)
        return kv_err_set(err, "out of memory");
    r->elites = v;
    r->elites[r->n_elites++] = e->program_id;
    return 0;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int kv_report_rows_open(kv_txn *t, kv_problem_loader load_problem, kv_report_rows **out,
                        kv_err *note, kv_err *err)
{
    note->msg[0] = 0;
    kv_report_rows *r = calloc(1, sizeof *r);
    if (!r)
        return kv_err_set(err, "out of memory");
    r->load_problem = load_problem;
    kv_report_problems l;
    if (kv_report_problems_load(t, &l, err) != 0) {
        free(r);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        rc = kv_each_elite(t, l.v[i].problem, -1, collect_elite, r, err);
    free(l.v);
    if (rc != 0) {
        kv_report_rows_free(r);
        return -1;
    }
    if (r->n_elites > 1) /* qsort of NULL, 0 is undefined */
        qsort(r->elites, r->n_elites, sizeof *r->elites, by_id);
    if (kv_report_run_world(t, &r->world, note) != 0)
        r->world = 0;
    else
        note->msg[0] = 0;
    *out = r;
    return 0;
}

void kv_report_rows_free(kv_report_rows *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_defs; i++) {
        if (r->defs[i].def)
            kv_problem_free(r->defs[i].def);
        free(r->defs[i].def);
    }
    free(r->defs);
    free(r->elites);
    free(r);
}

static int is_elite(const kv_report_rows *r, uint64_t id)
{
    return r->n_elites && bsearch(&id, r->elites, r->n_elites, sizeof id, by_id) != NULL;
}

/* The problem's definition (loaded on first use, note set then when it
 * cannot be used); NULL when it is not at hand or not defined at the run's
 * world. -1 only when out of memory. */
static int problem_of(kv_report_rows *r, const char *name, const kv_problem **def, kv_err *note,
                      kv_err *err)
{
    for (size_t i = 0; i < r->n_defs; i++)
        if (strcmp(r->defs[i].name, name) == 0) {
            *def = r->defs[i].def;
            return 0;
        }
    problem_def *v = kv_report_grow(r->defs, &r->cap_defs, r->n_defs, sizeof *v, 8);
    if (!v)
        return kv_err_set(err, "out of memory");
    r->defs = v;
    problem_def *d = &r->defs[r->n_defs++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->def = malloc(sizeof *d->def);
    if (!d->def)
        return kv_err_set(err, "out of memory");
    kv_err why = {{0}};
    if (r->load_problem(name, d->def, &why) != 0) {
        free(d->def); /* a failed load holds nothing */
        d->def = NULL;
        kv_err_set(note, "no GB/s for %s: %s", name, why.msg);
    } else if (r->world <= 0 || !kv_problem_supports_world(d->def, r->world)) {
        kv_err_set(note, "no GB/s for %s: not defined for W=%d", name, r->world);
        kv_problem_free(d->def);
        free(d->def);
        d->def = NULL;
    }
    *def = d->def;
    return 0;
}

/* Bus bandwidth (GB/s) of size s: the bytes one rank sends by the cost
 * model, at the run's world, over the candidate's median; NaN when unknown. */
static double bus_gbps(const kv_report_rows *r, const kv_problem *def, const kv_size_result *s)
{
    int k = def ? kv_problem_find_size(def, s->name) : -1;
    kv_roofline rl;
    kv_err ignored = {{0}};
    if (k < 0 || !s->ok || !(s->cand_us > 0) ||
        kv_problem_roofline(def, k, r->world, &rl, &ignored) != 0)
        return NAN;
    return rl.send_bytes / (s->cand_us * 1e-6) / 1e9;
}

/* The candidate's coefficient of variation at a size, from the evidence
 * the evaluator stored (sizes[].candidate.cv); NaN when it holds none. */
static double evidence_cv(const cJSON *ev, const char *size)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(ev, "sizes"))
    {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "name"));
        if (!name || strcmp(name, size) != 0)
            continue;
        const cJSON *cv = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(s, "candidate"), "cv");
        return cJSON_IsNumber(cv) ? cv->valuedouble : NAN;
    }
    return NAN;
}

int kv_report_rows_of(kv_report_rows *r, const kv_program *p, kv_report_row rows[KV_MAX_SIZES],
                      size_t *n, kv_err *note, kv_err *err)
{
    note->msg[0] = 0;
    const kv_problem *def = NULL;
    if (problem_of(r, p->problem, &def, note, err) != 0)
        return -1;
    cJSON *ev = p->evidence ? cJSON_Parse(p->evidence) : NULL; /* NULL: no CV */
    uint32_t k = p->n_sizes < KV_MAX_SIZES ? p->n_sizes : KV_MAX_SIZES;
    for (uint32_t i = 0; i < (k ? k : 1); i++) {
        kv_report_row *w = &rows[i];
        *w = (kv_report_row){.size = k ? &p->sizes[i] : NULL,
                             .cv = NAN,
                             .speedup = NAN,
                             .gbps = NAN,
                             .elite = is_elite(r, p->id)};
        if (w->size) {
            const kv_size_result *s = w->size;
            w->cv = evidence_cv(ev, s->name);
            if (s->ok && s->ref_us > 0 && s->cand_us > 0)
                w->speedup = s->ref_us / s->cand_us;
            w->gbps = bus_gbps(r, def, s);
        }
    }
    cJSON_Delete(ev);
    *n = k ? k : 1;
    return 0;
}
