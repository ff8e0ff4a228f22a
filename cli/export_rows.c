/* export_rows.c — kevo archive export's per-size rows (export_rows.h). */
#include "export_rows.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "archive_cmd.h"
#include "common/json_out.h"
#include "common/text.h"
#include "eval_setup.h"
#include "report/export_plan.h"
#include "problem/problem.h"

typedef struct {
    char name[KV_NAME_MAX];
    kv_problem *def; /* NULL: its definition is not at hand (no GB/s) */
} problem_def;

struct kv_export_rows {
    int world;
    uint64_t *elites; /* sorted */
    size_t n_elites, cap_elites;
    problem_def *defs;
    size_t n_defs, cap_defs;
};

static int collect_elite(const kv_elite *e, void *ctx, kv_err *err)
{
    kv_export_rows *r = ctx;
    uint64_t *v = grow_array(r->elites, &r->cap_elites, r->n_elites, sizeof *v, 64);
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

int kv_export_rows_open(kv_txn *t, kv_export_rows **out, kv_err *err)
{
    kv_export_rows *r = calloc(1, sizeof *r);
    if (!r)
        return kv_err_set(err, "out of memory");
    problem_list l;
    if (load_problems(t, &l, err) != 0) {
        free(r);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        rc = kv_each_elite(t, l.v[i].problem, -1, collect_elite, r, err);
    free(l.v);
    if (rc != 0) {
        kv_export_rows_free(r);
        return -1;
    }
    if (r->n_elites > 1) /* qsort of NULL, 0 is undefined */
        qsort(r->elites, r->n_elites, sizeof *r->elites, by_id);
    kv_err bad = {{0}};
    if (kv_report_run_world(t, &r->world, &bad) != 0) {
        char msg[4 * sizeof bad.msg];
        fprintf(stderr, "kevo archive export: no GB/s: %s\n", KV_TERM(msg, bad.msg));
        r->world = 0;
    }
    *out = r;
    return 0;
}

void kv_export_rows_free(kv_export_rows *r)
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

static int is_elite(const kv_export_rows *r, uint64_t id)
{
    return r->n_elites && bsearch(&id, r->elites, r->n_elites, sizeof id, by_id) != NULL;
}

/* The problem's definition (loaded on first use); NULL when it is not at
 * hand or not defined at the run's world. -1 only when out of memory. */
static int problem_of(kv_export_rows *r, const char *name, const kv_problem **def, kv_err *err)
{
    for (size_t i = 0; i < r->n_defs; i++)
        if (strcmp(r->defs[i].name, name) == 0) {
            *def = r->defs[i].def;
            return 0;
        }
    problem_def *v = grow_array(r->defs, &r->cap_defs, r->n_defs, sizeof *v, 8);
    if (!v)
        return kv_err_set(err, "out of memory");
    r->defs = v;
    problem_def *d = &r->defs[r->n_defs++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->def = malloc(sizeof *d->def);
    if (!d->def)
        return kv_err_set(err, "out of memory");
    kv_err why = {{0}};
    char shown[4 * KV_NAME_MAX], msg[4 * sizeof why.msg];
    if (kv_cli_load_problem(name, d->def, &why) != 0) {
        free(d->def); /* a failed load holds nothing */
        d->def = NULL;
        fprintf(stderr, "kevo archive export: no GB/s for %s: %s\n", KV_TERM(shown, name),
                KV_TERM(msg, why.msg));
    } else if (r->world <= 0 || !kv_problem_supports_world(d->def, r->world)) {
        fprintf(stderr, "kevo archive export: no GB/s for %s: not defined for W=%d\n",
                KV_TERM(shown, name), r->world);
        kv_problem_free(d->def);
        free(d->def);
        d->def = NULL;
    }
    *def = d->def;
    return 0;
}

/* Bus bandwidth (GB/s) of size s: the bytes one rank sends by the cost
 * model, at the run's world, over the candidate's median; NaN when unknown. */
static double bus_gbps(const kv_export_rows *r, const kv_problem *def, const kv_size_result *s)
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

/* ---- one row --------------------------------------------------------------------- */

typedef struct {
    const kv_size_result *s; /* NULL: a program without sizes */
    double cv, speedup, gbps;
    int elite;
} row;

enum { COL_TEXT, COL_NUM, COL_BOOL, COL_INT };

static const char *const columns[] = {
    "id", "problem", "size", "cand_us", "cand_p10_us", "cand_p90_us", "cand_cv", "ref_us",
    "speedup", "gbps", "cell", "elite", "verdict", "op", "island", "parents", "model", "ok",
    "timing",
};
#define N_COLUMNS (sizeof columns / sizeof columns[0])

void kv_export_rows_csv_header(FILE *out, int with_source)
{
    for (size_t i = 0; i < N_COLUMNS; i++)
        fprintf(out, "%s%s", i ? "," : "", columns[i]);
    fputs(with_source ? ",source_encoding,source\n" : "\n", out);
}

/* A number's text: the shortest that reads back exactly; "" when NaN. */
static void num_text(double v, char *out, size_t cap)
{
    if (isnan(v))
        out[0] = 0;
    else
        kv_fmt_double(v, out, cap);
}

static int write_csv(FILE *out, const kv_program *p, const row *w, const char *src)
{
    const kv_size_result *s = w->s;
    double nums[] = {s ? s->cand_us : NAN, s ? s->cand_p10_us : NAN, s ? s->cand_p90_us : NAN,
                     w->cv, s ? s->ref_us : NAN, w->speedup, w->gbps};
    char parents[KV_MAX_PARENTS * 24], num[40];
    kv_fmt_parents(p, ";", parents, sizeof parents);
    int rc = 0;
    fprintf(out, "%" PRIu64 ",", p->id);
    rc |= kv_csv_field(out, p->problem);
    fputc(',', out);
    rc |= kv_csv_field(out, s ? s->name : "");
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        num_text(nums[i], num, sizeof num);
        fprintf(out, ",%s", num);
    }
    fputc(',', out);
    rc |= kv_csv_field(out, p->cell);
    fprintf(out, ",%s,%s,", w->elite ? "true" : "false", kv_verdict_name(p->verdict));
    rc |= kv_csv_field(out, p->op);
    fprintf(out, ",%d,%s,", (int)p->island, parents);
    rc |= kv_csv_field(out, p->model);
    fprintf(out, ",%s,%s", s ? (s->ok ? "true" : "false") : "",
            s ? kv_size_timing_name(s->timing) : "");
    if (src) {
        fputc(',', out);
        rc |= kv_csv_source(out, src);
    }
    fputc('\n', out);
    return rc;
}

static int add_num(cJSON *o, const char *name, double v)
{
    return (isnan(v) ? cJSON_AddNullToObject(o, name) : cJSON_AddNumberToObject(o, name, v)) !=
           NULL;
}

static int write_json(FILE *out, const kv_program *p, const row *w, const char *src,
                      size_t *replaced)
{
    const kv_size_result *s = w->s;
    cJSON *o = cJSON_CreateObject();
    cJSON *parents = cJSON_CreateArray();
    int ok = o && parents;
    for (uint32_t i = 0; ok && i < p->n_parents && i < KV_MAX_PARENTS; i++)
        ok = cJSON_AddItemToArray(parents, cJSON_CreateNumber((double)p->parents[i]));
    ok = ok && cJSON_AddNumberToObject(o, "id", (double)p->id) &&
         cJSON_AddStringToObject(o, "problem", p->problem) &&
         (s ? cJSON_AddStringToObject(o, "size", s->name) != NULL
            : cJSON_AddNullToObject(o, "size") != NULL) &&
         add_num(o, "cand_us", s ? s->cand_us : NAN) &&
         add_num(o, "cand_p10_us", s ? s->cand_p10_us : NAN) &&
         add_num(o, "cand_p90_us", s ? s->cand_p90_us : NAN) && add_num(o, "cand_cv", w->cv) &&
         add_num(o, "ref_us", s ? s->ref_us : NAN) && add_num(o, "speedup", w->speedup) &&
         add_num(o, "gbps", w->gbps) &&
         (p->cell[0] ? cJSON_AddStringToObject(o, "cell", p->cell) != NULL
                     : cJSON_AddNullToObject(o, "cell") != NULL) &&
         cJSON_AddBoolToObject(o, "elite", w->elite) &&
         cJSON_AddStringToObject(o, "verdict", kv_verdict_name(p->verdict)) &&
         cJSON_AddStringToObject(o, "op", p->op) &&
         cJSON_AddNumberToObject(o, "island", p->island) &&
         cJSON_AddItemToObject(o, "parents", parents);
    if (ok)
        parents = NULL;
    ok = ok && cJSON_AddStringToObject(o, "model", p->model) &&
         (s ? cJSON_AddBoolToObject(o, "ok", s->ok != 0) != NULL
            : cJSON_AddNullToObject(o, "ok") != NULL) &&
         (s ? cJSON_AddStringToObject(o, "timing", kv_size_timing_name(s->timing)) != NULL
            : cJSON_AddNullToObject(o, "timing") != NULL) &&
         (!src || cJSON_AddStringToObject(o, "source", src));
    size_t bad = 0;
    char *text = ok ? kv_json_print(o, 0, &bad) : NULL;
    cJSON_Delete(o);
    cJSON_Delete(parents);
    if (!text)
        return -1;
    *replaced += bad;
    fprintf(out, "%s\n", text);
    free(text);
    return 0;
}

int kv_export_rows_write(kv_export_rows *r, FILE *out, int csv, const kv_program *p,
                         const char *src, kv_err *err)
{
    const kv_problem *def = NULL;
    if (problem_of(r, p->problem, &def, err) != 0)
        return -1;
    cJSON *ev = p->evidence ? cJSON_Parse(p->evidence) : NULL; /* NULL: no CV */
    uint32_t n = p->n_sizes < KV_MAX_SIZES ? p->n_sizes : KV_MAX_SIZES;
    size_t replaced = 0;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < (n ? n : 1); i++) {
        row w = {.s = n ? &p->sizes[i] : NULL, .cv = NAN, .speedup = NAN, .gbps = NAN,
                 .elite = is_elite(r, p->id)};
        if (w.s) {
            w.cv = evidence_cv(ev, w.s->name);
            if (w.s->ok && w.s->ref_us > 0 && w.s->cand_us > 0)
                w.speedup = w.s->ref_us / w.s->cand_us;
            w.gbps = bus_gbps(r, def, w.s);
        }
        rc = csv ? write_csv(out, p, &w, src) : write_json(out, p, &w, src, &replaced);
    }
    cJSON_Delete(ev);
    if (replaced)
        fprintf(stderr, "kevo archive export: program #%" PRIu64 ": %zu bytes that were not "
                "UTF-8 written as U+FFFD\n", p->id, replaced);
    return rc == 0 ? 0 : kv_err_set(err, "out of memory");
}
