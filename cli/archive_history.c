/* archive_history.c — kevo archive history: the best speedup over time, per
 * problem and size and of the geometric mean over the sizes, read from the
 * run's events.jsonl (its result events, docs/search.md). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_cmd.h"
#include "common/fsutil.h"
#include "common/text.h"

const char usage_history[] =
    "usage: kevo archive history [--run DIR] [--problem P] [--json]\n"
    "\n"
    "The best speedup over time, from DIR/events.jsonl: a row each time the best\n"
    "of a problem at a size, or of its geometric mean over the sizes (size\n"
    "\"geomean\"), or its best seed there, grows. Columns: time_s (seconds since the\n"
    "run's first start), evaluations (of the run so far), problem, size, best (the\n"
    "best speedup so far of a result an island took as an elite), program (its id),\n"
    "seed (the best correct seed so far: the reference line). Sizes come from the\n"
    "results' per-size speedups (events of an older kevo have none: geomean rows\n"
    "only). --json: an array of those rows as objects.\n";

#define GEOMEAN "geomean"

/* The bests of one problem at one size ("geomean": of its speedup). */
typedef struct {
    char problem[KV_NAME_MAX];
    char size[KV_NAME_MAX];
    double best, seed;
    uint64_t program;
} series;

typedef struct {
    const view_opts *o;
    series *v;
    size_t n, cap;
    double t0;
    int have_t0;
    cJSON *rows;   /* --json */
    uint64_t n_rows;
} history;

static series *series_of(history *h, const char *problem, const char *size)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->v[i].problem, problem) == 0 && strcmp(h->v[i].size, size) == 0)
            return &h->v[i];
    series *v = grow_array(h->v, &h->cap, h->n, sizeof *v, 16);
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

static int emit(history *h, const series *s, double t, double evaluations, kv_err *err)
{
    h->n_rows++;
    if (h->o->json) {
        cJSON *r = cJSON_CreateObject();
        int ok = r && cJSON_AddItemToArray(h->rows, r) &&
                 cJSON_AddNumberToObject(r, "time_s", t - h->t0) &&
                 cJSON_AddNumberToObject(r, "evaluations", evaluations) &&
                 cJSON_AddStringToObject(r, "problem", s->problem) &&
                 cJSON_AddStringToObject(r, "size", s->size) &&
                 cJSON_AddNumberToObject(r, "best", s->best) &&
                 (s->program ? cJSON_AddNumberToObject(r, "program", (double)s->program)
                             : cJSON_AddNullToObject(r, "program")) &&
                 cJSON_AddNumberToObject(r, "seed", s->seed);
        return ok ? 0 : kv_err_set(err, "out of memory");
    }
    char problem[4 * KV_NAME_MAX], size[4 * KV_NAME_MAX], prog[32];
    if (h->n_rows == 1)
        printf("%9s %11s  %-16s %-12s %9s %9s %9s\n", "time_s", "evaluations", "problem", "size",
               "best", "program", "seed");
    if (s->program)
        snprintf(prog, sizeof prog, "#%" PRIu64, s->program);
    else
        snprintf(prog, sizeof prog, "-");
    printf("%9.1f %11.0f  %-16s %-12s %8.3fx %9s %8.3fx\n", t - h->t0, evaluations,
           KV_TERM(problem, s->problem), KV_TERM(size, s->size), s->best, prog, s->seed);
    return 0;
}

/* One size's value of a result: the best and the seed grow by it. */
static int offer(history *h, const cJSON *ev, const char *size, double value, int elite,
                 int seed, kv_err *err)
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

static int on_event(history *h, const cJSON *ev, kv_err *err)
{
    const char *type = str(ev, "type");
    if (!h->have_t0 && (strcmp(type, "start") == 0 || strcmp(type, "resume") == 0 ||
                        strcmp(type, "result") == 0)) {
        h->t0 = num(ev, "t");
        h->have_t0 = 1;
    }
    if (strcmp(type, "result") != 0)
        return 0;
    if (h->o->problem && strcmp(str(ev, "problem"), h->o->problem) != 0)
        return 0;
    int elite = num(ev, "elite") > 0;
    int seed = strcmp(str(ev, "verdict"), "ok") == 0 && strcmp(str(ev, "op"), "seed") == 0;
    if (!elite && !seed)
        return 0;
    if (offer(h, ev, GEOMEAN, num(ev, "speedup"), elite, seed, err) != 0)
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

int run_history(const view_opts *o, const snapshot *s, kv_err *err)
{
    if (o->problem && require_problem(s, o->problem, err) != 0)
        return -1;
    char path[PATH_MAX];
    if (kv_path_join(path, sizeof path, o->run_dir, "events.jsonl", err) != 0)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return kv_err_errno(err, errno, "%s", path);
    history h = {.o = o};
    int rc = 0;
    if (o->json && !(h.rows = cJSON_CreateArray()))
        rc = kv_err_set(err, "out of memory");
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
    if (o->json) {
        cJSON *rows = h.rows;
        return rc == 0 ? print_json(rows, err) : (cJSON_Delete(rows), -1);
    }
    if (rc == 0 && h.n_rows == 0)
        printf("no result an island took yet in %s\n", path);
    return rc;
}
