/* html_events.c — events.jsonl read once for the report's charts
 * (html_int.h): the `result` events, the `llm` events' spend, and the
 * processes (`start`, `resume`) that map wall time to the run's active time. */
#include "html_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"

int kv_rp_events_problem(const kv_rp_events *ev, const char *problem)
{
    for (size_t i = 0; i < ev->n_problems; i++)
        if (strcmp(ev->problems[i], problem) == 0)
            return (int)i;
    return -1;
}

static int intern_problem(kv_rp_events *ev, const char *problem, uint32_t *out)
{
    int i = kv_rp_events_problem(ev, problem);
    if (i < 0) {
        if (ev->n_problems == ev->cap_problems) {
            size_t cap = ev->cap_problems ? 2 * ev->cap_problems : 8;
            char(*v)[KV_NAME_MAX] = realloc(ev->problems, cap * sizeof *v);
            if (!v)
                return -1;
            ev->problems = v;
            ev->cap_problems = cap;
        }
        snprintf(ev->problems[ev->n_problems], KV_NAME_MAX, "%s", problem);
        i = (int)ev->n_problems++;
    }
    *out = (uint32_t)i;
    return 0;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* v (n elements used of *cap, each size bytes) with room for one more:
 * v itself, a larger copy (v freed), or NULL when out of memory (v kept). */
static void *grow(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return v;
    size_t c = *cap ? 2 * *cap : first;
    void *nv = realloc(v, c * size);
    if (nv)
        *cap = c;
    return nv;
}

/* A new process starting at t (seconds since the first event); o its
 * `start` or `resume` event, or NULL (a file whose first line is neither). */
static int begin_proc(kv_rp_events *ev, double t, const cJSON *o)
{
    kv_rp_proc *v = grow(ev->procs, ev->n_procs, &ev->cap_procs, sizeof *v, 4);
    if (!v)
        return -1;
    ev->procs = v;
    double active = 0;
    if (ev->n_procs > 0) {
        const kv_rp_proc *b = &ev->procs[ev->n_procs - 1];
        active = b->active + (b->t_last - b->t);
    }
    const cJSON *w = o ? cJSON_GetObjectItemCaseSensitive(o, "wall_s") : NULL;
    ev->procs[ev->n_procs++] = (kv_rp_proc){
        .t = t,
        .t_last = t,
        .active = active,
        // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): cJSON_IsNumber(NULL) is false
        .wall_s = cJSON_IsNumber(w) ? w->valuedouble : -1,
        .groups = o ? (int)num(o, "groups") : 0};
    return 0;
}

static int take_result(kv_rp_events *ev, const cJSON *o, double t)
{
    ev->group_s += num(o, "group_s");
    kv_rp_result r = {.t = t,
                      .evaluations = (uint64_t)num(o, "evaluations"),
                      .island = (int32_t)num(o, "island"),
                      .seed = strcmp(str(o, "stage"), "seed") == 0,
                      .speedup = num(o, "speedup")};
    if (kv_verdict_parse(str(o, "verdict"), &r.verdict) != 0)
        r.verdict = KV_VERDICT_NONE;
    if (intern_problem(ev, str(o, "problem"), &r.problem) != 0)
        return -1;
    kv_rp_result *v = grow(ev->v, ev->n, &ev->cap, sizeof *v, 1024);
    if (!v)
        return -1;
    ev->v = v;
    ev->v[ev->n++] = r;
    return 0;
}

static int take_call(kv_rp_events *ev, const cJSON *o, double t)
{
    kv_rp_call *v = grow(ev->calls, ev->n_calls, &ev->cap_calls, sizeof *v, 64);
    if (!v)
        return -1;
    ev->calls = v;
    ev->calls[ev->n_calls++] =
        (kv_rp_call){.t = t,
                     .tokens = (uint64_t)(num(o, "tokens_in") + num(o, "tokens_out")),
                     .cost_usd = num(o, "cost_usd")};
    return 0;
}

/* One complete line that parses; 0, or -1 when out of memory. */
static int take_line(kv_rp_events *ev, const char *line, double *t0)
{
    cJSON *o = cJSON_Parse(line);
    if (!o) {
        ev->skipped++;
        return 0;
    }
    double t = num(o, "t");
    if (ev->lines++ == 0)
        *t0 = t;
    t -= *t0;
    const char *type = str(o, "type");
    int rc = 0;
    int starts = strcmp(type, "start") == 0 || strcmp(type, "resume") == 0;
    if (ev->n_procs == 0 || starts)
        rc = begin_proc(ev, t, starts ? o : NULL);
    if (rc == 0) {
        ev->procs[ev->n_procs - 1].t_last = t;
        ev->t_end = t;
    }
    if (rc == 0 && strcmp(type, "result") == 0)
        rc = take_result(ev, o, t);
    else if (rc == 0 && strcmp(type, "llm") == 0)
        rc = take_call(ev, o, t);
    cJSON_Delete(o);
    return rc;
}

/* A line the report does not parse still ends its process later: its `t`,
 * the first member of every event (search/progress.c). Not after the
 * process's `stop` or `error`, and not a `requeue`: a resuming process writes
 * those before its `resume` event (search/resume.c), so they belong to the
 * next process, not to the gap. */
static void take_time(kv_rp_events *ev, const char *line, double t0)
{
    ev->lines++;
    if (strncmp(line, "{\"t\":", 5) != 0 || ev->n_procs == 0)
        return;
    kv_rp_proc *p = &ev->procs[ev->n_procs - 1];
    if (p->ended || strstr(line, "\"type\":\"requeue\""))
        return;
    char *end;
    double t = strtod(line + 5, &end);
    if (end == line + 5 || t - t0 < ev->t_end)
        return;
    p->t_last = t - t0;
    p->ended = strstr(line, "\"type\":\"stop\"") || strstr(line, "\"type\":\"error\"");
    ev->t_end = t - t0;
}

double kv_rp_active(const kv_rp_events *ev, double t)
{
    if (ev->n_procs == 0)
        return t;
    size_t lo = 0, hi = ev->n_procs; /* the last process starting at or before t */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ev->procs[mid].t <= t)
            lo = mid;
        else
            hi = mid;
    }
    const kv_rp_proc *p = &ev->procs[lo];
    double in = t - p->t;
    return p->active + (in < 0 ? 0 : in);
}

int kv_rp_events_load(const char *run_dir, kv_rp_events *ev, kv_err *err)
{
    memset(ev, 0, sizeof *ev);
    char path[PATH_MAX];
    if (kv_path_join(path, sizeof path, run_dir, "events.jsonl", err) != 0)
        return -1;
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT)
        return 0;
    int fd = kv_open_regular(path, &st, err);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return kv_err_errno(err, errno, "%s: fdopen", path);
    }
    ev->present = 1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    double t0 = 0;
    int rc = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            break; /* the line a writer is still writing */
        line[n - 1] = '\0';
        /* only the lines the report reads are parsed: the first, results,
         * model calls and the starts of processes; of the others, the time */
        if (ev->lines > 0 && !strstr(line, "\"type\":\"result\"") &&
            !strstr(line, "\"type\":\"llm\"") && !strstr(line, "\"type\":\"start\"") &&
            !strstr(line, "\"type\":\"resume\"")) {
            take_time(ev, line, t0);
            continue;
        }
        if (take_line(ev, line, &t0) != 0) {
            rc = kv_err_set(err, "%s: out of memory", path);
            break;
        }
    }
    for (size_t i = 0; i < ev->n_procs; i++)
        ev->capacity_s += ev->procs[i].groups * (ev->procs[i].t_last - ev->procs[i].t);
    if (rc == 0 && ferror(f))
        rc = kv_err_errno(err, errno, "%s: read", path);
    free(line);
    fclose(f);
    if (rc != 0)
        kv_rp_events_free(ev);
    return rc;
}

void kv_rp_events_free(kv_rp_events *ev)
{
    free(ev->v);
    free(ev->problems);
    free(ev->procs);
    free(ev->calls);
    memset(ev, 0, sizeof *ev);
}
