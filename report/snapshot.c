/* snapshot.c — a read-only snapshot of a run's archive, and its problems
 * (snapshot.h). */
#include "snapshot.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/suggest.h"

int kv_report_snapshot_open(const char *dir, kv_report_snapshot *s, kv_err *err)
{
    kv_archive_opts opts = {.readonly = 1};
    s->a = NULL;
    s->t = NULL;
    if (kv_archive_open(dir, &opts, &s->a, err) != 0)
        return -1;
    if (kv_read_begin(s->a, &s->t, err) != 0) {
        kv_archive_close(s->a);
        s->a = NULL;
        return -1;
    }
    return 0;
}

void kv_report_snapshot_close(kv_report_snapshot *s)
{
    if (s->t)
        kv_txn_abort(s->t);
    kv_archive_close(s->a);
    s->a = NULL;
    s->t = NULL;
}

static int collect_problem(const kv_problem_stats *s, void *ctx, kv_err *err)
{
    kv_report_problems *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        kv_problem_stats *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return kv_err_set(err, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *s;
    return 0;
}

int kv_report_problems_load(kv_txn *t, kv_report_problems *l, kv_err *err)
{
    memset(l, 0, sizeof *l);
    if (kv_each_problem(t, collect_problem, l, err) != 0) {
        free(l->v);
        memset(l, 0, sizeof *l);
        return -1;
    }
    return 0;
}

static int stop_at_first(const kv_elite *e, void *ctx, kv_err *err)
{
    (void)e;
    (void)err;
    *(int *)ctx = 1;
    return 1;
}

int kv_report_require_problem(const kv_report_snapshot *s, const char *problem, kv_err *err)
{
    kv_problem_stats st;
    int rc = kv_get_problem_stats(s->t, problem, &st, err);
    if (rc <= 0)
        return rc;
    int has_elites = 0;
    if (kv_each_elite(s->t, problem, -1, stop_at_first, &has_elites, err) != 0)
        return -1;
    if (has_elites)
        return 0;
    kv_report_problems l;
    if (kv_report_problems_load(s->t, &l, err) != 0)
        return -1;
    const char *path = kv_archive_path(s->a);
    if (l.n == 0) {
        free(l.v);
        return kv_err_set(err, "unknown problem '%s': %s has no problems yet", problem, path);
    }
    const char **names = malloc(l.n * sizeof *names);
    char known[768];
    size_t used = 0;
    known[0] = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (names)
            names[i] = l.v[i].problem;
        if (used < sizeof known) {
            int n =
                snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", l.v[i].problem);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    const char *near = names ? kv_suggest(problem, names, l.n) : NULL;
    if (near)
        kv_err_set(err, "unknown problem '%s' in %s; did you mean '%s'? known problems: %s",
                   problem, path, near, known);
    else
        kv_err_set(err, "unknown problem '%s' in %s; known problems: %s", problem, path, known);
    free(names);
    free(l.v);
    return -1;
}

void *kv_report_grow(void *v, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return v;
    size_t ncap = *cap ? 2 * *cap : first;
    if (ncap > SIZE_MAX / size)
        return NULL;
    void *nv = realloc(v, ncap * size);
    if (nv)
        *cap = ncap;
    return nv;
}
