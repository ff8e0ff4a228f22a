/* history.c — the best over time from a run's events.jsonl (history.h). */
#include "history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "report/snapshot.h"

/* The bests so far of one problem at one size. */
typedef struct {
    char problem[KV_NAME_MAX];
    char size[KV_NAME_MAX];
    double best, seed;
    uint64_t program;
} series;

typedef struct {
    const char *problem; /* NULL: every problem */
    series *v;
    size_t n, cap;
    double t0;
    int have_t0;
    kv_report_history *out;
} walk;

static series *series_of(walk *h, const char *problem, const char *size)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->v[i].problem, problem) == 0 && strcmp(h->v[i].size, size) == 0)
            return &h->v[i];
    series *v = kv_report_grow(h->v, &h->cap, h->n, sizeof *v, 16);
    if (!v)
        return NULL;
    h->v = v;
    series *s = &h->v[h->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->problem, sizeof s->problem, "%s", problem);
    snprintf(s->size, sizeof s->size, "%s", size);
    return s;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
    return s ? s : "";
}

static int emit(walk *h, const series *s, double t, double evaluations, kv_err *err)
{
    kv_report_history *o = h->out;
    kv_history_row *v = kv_report_grow(o->v, &o->cap, o->n, sizeof *v, 64);
    if (!v)
        return kv_err_set(err, "out of memory");
    o->v = v;
    kv_history_row *r = &o->v[o->n++];
    memset(r, 0, sizeof *r);
    r->time_s = t - h->t0;
    r->evaluations = evaluations;
    memcpy(r->problem, s->problem, sizeof r->problem);
    memcpy(r->size, s->size, sizeof r->size);
    r->best = s->best;
    r->program = s->program;
    r->seed = s->seed;
    return 0;
}

/* One size's value of a result: the best and the seed grow by it. */
static int offer(walk *h, const cJSON *ev, const char *size, double value, int elite, int seed,
                 kv_err *err)
{
    series *s = series_of(h, str(ev, "problem"), size);
    if (!s)
        return kv_err_set(err, "out of memory");
    int grew = 0;
    if (elite && value > s->best) {
        s->best = value;
        s->program = (uint64_t)num(ev, "program");
        grew = 1;
    }
    if (seed && value > s->seed) {
        s->seed = value;
        grew = 1;
    }
    return grew ? emit(h, s, num(ev, "t"), num(ev, "evaluations"), err) : 0;
}

static int on_event(walk *h, const cJSON *ev, kv_err *err)
{
    const char *type = str(ev, "type");
    if (!h->have_t0 && (strcmp(type, "start") == 0 || strcmp(type, "resume") == 0 ||
                        strcmp(type, "result") == 0)) {
        h->t0 = num(ev, "t");
        h->have_t0 = 1;
    }
    if (strcmp(type, "result") != 0)
        return 0;
    if (h->problem && strcmp(str(ev, "problem"), h->problem) != 0)
        return 0;
    int elite = num(ev, "elite") > 0;
    int seed = strcmp(str(ev, "verdict"), "ok") == 0 && strcmp(str(ev, "op"), "seed") == 0;
    if (!elite && !seed)
        return 0;
    if (offer(h, ev, KV_HISTORY_GEOMEAN, num(ev, "speedup"), elite, seed, err) != 0)
        return -1;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(ev, "sizes"))
    {
        if (cJSON_IsNumber(s) && s->string &&
            offer(h, ev, s->string, s->valuedouble, elite, seed, err) != 0)
            return -1;
    }
    return 0;
}

int kv_report_history_load(const char *path, const char *problem, kv_report_history *out,
                           kv_err *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f)
        return kv_err_errno(err, errno, "%s", path);
    walk h = {.problem = problem, .out = out};
    int rc = 0;
    char *line = NULL;
    size_t cap = 0;
    uint64_t lineno = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0) {
        lineno++;
        cJSON *ev = cJSON_Parse(line);
        if (!ev) /* a line cut short by a kill: the end of what was written */
            continue;
        rc = on_event(&h, ev, err);
        cJSON_Delete(ev);
    }
    if (rc == 0 && ferror(f))
        rc = kv_err_errno(err, errno ? errno : EIO, "reading %s (line %" PRIu64 ")", path,
                          lineno + 1);
    free(line);
    fclose(f);
    free(h.v);
    if (rc != 0)
        kv_report_history_free(out);
    return rc;
}

void kv_report_history_free(kv_report_history *h)
{
    free(h->v);
    memset(h, 0, sizeof *h);
}
