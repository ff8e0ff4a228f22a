/* html_events.c — the `result` events of events.jsonl, read for the
 * report's curves (html_int.h). */
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

/* One complete line; 0, or -1 when out of memory. */
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
    const char *type = str(o, "type");
    int rc = 0;
    if (strcmp(type, "start") == 0 || strcmp(type, "resume") == 0) {
        /* the process before ended with its last event read */
        ev->capacity_s += ev->groups * (ev->t_end - ev->proc_t);
        ev->groups = (int)num(o, "groups");
        ev->proc_t = t - *t0;
    }
    ev->t_end = t - *t0;
    if (strcmp(type, "result") == 0) {
        ev->group_s += num(o, "group_s");
        kv_rp_result r = {.t = t - *t0, .evaluations = (uint64_t)num(o, "evaluations"),
                          .island = (int32_t)num(o, "island"),
                          .seed = strcmp(str(o, "stage"), "seed") == 0,
                          .speedup = num(o, "speedup")};
        if (kv_verdict_parse(str(o, "verdict"), &r.verdict) != 0)
            r.verdict = KV_VERDICT_NONE;
        if (intern_problem(ev, str(o, "problem"), &r.problem) != 0) {
            rc = -1;
        } else {
            if (ev->n == ev->cap) {
                size_t cap = ev->cap ? 2 * ev->cap : 1024;
                kv_rp_result *v = realloc(ev->v, cap * sizeof *v);
                if (!v)
                    rc = -1;
                else {
                    ev->v = v;
                    ev->cap = cap;
                }
            }
            if (rc == 0)
                ev->v[ev->n++] = r;
        }
    }
    cJSON_Delete(o);
    return rc;
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
         * and the starts of processes */
        if (ev->lines > 0 && !strstr(line, "\"type\":\"result\"") &&
            !strstr(line, "\"type\":\"start\"") && !strstr(line, "\"type\":\"resume\"")) {
            ev->lines++;
            continue;
        }
        if (take_line(ev, line, &t0) != 0) {
            rc = kv_err_set(err, "%s: out of memory", path);
            break;
        }
    }
    ev->capacity_s += ev->groups * (ev->t_end - ev->proc_t);
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
    memset(ev, 0, sizeof *ev);
}
