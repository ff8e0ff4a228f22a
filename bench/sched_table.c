/* sched_table.c — loading a table of measured schedules (sched_table.h). */
#include "sched_table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fixed_cols[] = {"collective", "schedule", "aimed_cell", "measured_cell",
                                         "verdict"};
#define N_FIXED 5
#define MAX_COLS (N_FIXED + 2 * SQ_MAX_SIZES)

/* Splits line (modified) at tabs: the number of fields, at most max. */
static int split_tabs(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        f[n++] = p;
        char *tab = strchr(p, '\t');
        if (!tab)
            break;
        *tab = 0;
        p = tab + 1;
    }
    return n;
}

static int parse_cell(const char *s)
{
    return strcmp(s, "-") == 0 || !*s ? -1 : kv_cell_parse(s);
}

/* A time in µs: > 0, or 0 for '-'; -1 when it does not parse. */
static double parse_us(const char *s)
{
    if (strcmp(s, "-") == 0)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    return errno || end == s || *end || !(v > 0) || !isfinite(v) ? -1 : v;
}

static const sq_coll *cmp_coll; /* qsort has no context argument */

static int by_text(const void *a, const void *b)
{
    return strcmp(cmp_coll->e[*(const int *)a].text, cmp_coll->e[*(const int *)b].text);
}

static sq_coll *coll_of(sq_table *t, kv_sched_coll c)
{
    for (int i = 0; i < t->n_colls; i++)
        if (t->coll[i].coll == c)
            return &t->coll[i];
    sq_coll *x = &t->coll[t->n_colls++];
    memset(x, 0, sizeof *x);
    x->coll = c;
    return x;
}

static void finish(const sq_table *t, sq_coll *c)
{
    double cell_best[KV_CELL_COUNT] = {0};
    for (int i = 0; i < c->n; i++) {
        const sq_entry *e = &c->e[i];
        c->by_text[i] = i;
        if (!e->ok)
            continue;
        c->n_ok++;
        if (e->fitness > c->best)
            c->best = e->fitness;
        for (int s = 0; s < t->n_sizes; s++)
            if (e->speedup[s] > c->best_size[s])
                c->best_size[s] = e->speedup[s];
        if (e->cell >= 0) {
            c->cells |= 1u << e->cell;
            if (e->fitness > cell_best[e->cell])
                cell_best[e->cell] = e->fitness;
        }
    }
    for (int k = 0; k < KV_CELL_COUNT; k++)
        c->qd += cell_best[k];
    cmp_coll = c;
    qsort(c->by_text, (size_t)c->n, sizeof *c->by_text, by_text);
}

int sq_find(const sq_coll *c, const kv_schedule *s)
{
    char text[KV_SCHED_TEXT_MAX];
    if (kv_sched_format(s, text, sizeof text) != 0)
        return -1;
    int lo = 0, hi = c->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, k = c->by_text[mid];
        int d = strcmp(text, c->e[k].text);
        if (d == 0)
            return k;
        if (d < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

static int phase_distance(const kv_sched_phase *a, const kv_sched_phase *b)
{
    return (a->kind != b->kind) + (a->algo != b->algo) + (a->dir != b->dir) +
           (a->xport != b->xport) + (a->proto != b->proto) + (a->chunk != b->chunk) +
           (a->inflight != b->inflight) + (a->sync != b->sync) + (a->order != b->order) +
           (a->fuse != b->fuse);
}

int sq_distance(const kv_schedule *a, const kv_schedule *b)
{
    int d = (a->threads != b->threads) + (a->ctas != b->ctas) + (a->launch != b->launch) +
            (a->ll_max != b->ll_max);
    int same = a->n_phases == b->n_phases;
    for (int i = 0; same && i < a->n_phases; i++)
        same = a->phase[i].kind == b->phase[i].kind;
    if (same) {
        for (int i = 0; i < a->n_phases; i++)
            d += phase_distance(&a->phase[i], &b->phase[i]);
        return d;
    }
    if (a->n_phases > 0 && b->n_phases > 0)
        d += phase_distance(&a->phase[a->n_phases - 1], &b->phase[b->n_phases - 1]);
    return d + 3;
}

int sq_table_load(const char *path, sq_table *t, kv_err *err)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f)
        return kv_err_errno(err, errno, "open %s", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, header = 0, rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (len == 0)
            continue;
        if (line[0] == '#') {
            if (t->n_comments < (int)(sizeof t->comment / sizeof t->comment[0]))
                snprintf(t->comment[t->n_comments++], sizeof t->comment[0], "%s", line);
            continue;
        }
        char *fld[MAX_COLS + 1];
        int n = split_tabs(line, fld, MAX_COLS + 1);
        if (!header) {
            for (int i = 0; i < N_FIXED; i++)
                if (i >= n || strcmp(fld[i], fixed_cols[i]) != 0) {
                    rc = kv_err_set(err, "%s:%d: the header's column %d is not '%s'", path, lineno,
                                    i + 1, fixed_cols[i]);
                    break;
                }
            if (rc)
                break;
            if (n > MAX_COLS || (n - N_FIXED) % 2 != 0 || n == N_FIXED) {
                rc = kv_err_set(err,
                                "%s:%d: expected 1 to %d pairs us_<size> ref_<size> after "
                                "the verdict",
                                path, lineno, SQ_MAX_SIZES);
                break;
            }
            t->n_sizes = (n - N_FIXED) / 2;
            for (int s = 0; s < t->n_sizes && rc == 0; s++) {
                const char *u = fld[N_FIXED + 2 * s], *r = fld[N_FIXED + 2 * s + 1];
                if (strncmp(u, "us_", 3) != 0 || strncmp(r, "ref_", 4) != 0 ||
                    strcmp(u + 3, r + 4) != 0 || strlen(u + 3) >= sizeof t->size[0])
                    rc = kv_err_set(err,
                                    "%s:%d: columns %d and %d: expected us_<size> and "
                                    "ref_<size>",
                                    path, lineno, N_FIXED + 2 * s + 1, N_FIXED + 2 * s + 2);
                else
                    snprintf(t->size[s], sizeof t->size[s], "%s", u + 3);
            }
            header = 1;
            continue;
        }
        if (n != N_FIXED + 2 * t->n_sizes) {
            rc = kv_err_set(err, "%s:%d: %d fields, expected %d", path, lineno, n,
                            N_FIXED + 2 * t->n_sizes);
            break;
        }
        int coll = kv_sched_coll_parse(fld[0]);
        if (coll < 0) {
            rc = kv_err_set(err, "%s:%d: '%s' is not a collective with schedules", path, lineno,
                            fld[0]);
            break;
        }
        sq_entry e;
        memset(&e, 0, sizeof e);
        kv_err perr = {{0}};
        if (kv_sched_parse(fld[1], &e.s, &perr) != 0) {
            rc = kv_err_set(err, "%s:%d: %s", path, lineno, perr.msg);
            break;
        }
        if ((int)e.s.coll != coll) {
            rc = kv_err_set(err, "%s:%d: a schedule of %s in a row of %s", path, lineno,
                            kv_sched_coll_name(e.s.coll), fld[0]);
            break;
        }
        e.aimed = parse_cell(fld[2]);
        e.measured = parse_cell(fld[3]);
        if ((e.aimed < 0 && strcmp(fld[2], "-") != 0) ||
            (e.measured < 0 && strcmp(fld[3], "-") != 0)) {
            rc = kv_err_set(err, "%s:%d: a cell is 'transport/fusion' or '-'", path, lineno);
            break;
        }
        snprintf(e.verdict, sizeof e.verdict, "%s", fld[4]);
        int timed = 1;
        for (int s = 0; s < t->n_sizes && rc == 0; s++) {
            e.us[s] = parse_us(fld[N_FIXED + 2 * s]);
            e.ref[s] = parse_us(fld[N_FIXED + 2 * s + 1]);
            if (e.us[s] < 0 || e.ref[s] < 0)
                rc = kv_err_set(err, "%s:%d: size %s: a time is a positive number of µs or '-'",
                                path, lineno, t->size[s]);
            timed &= e.us[s] > 0 && e.ref[s] > 0;
        }
        if (rc)
            break;
        e.ok = timed && (strcmp(e.verdict, "ok") == 0 || strcmp(e.verdict, "duplicate") == 0);
        e.cell = e.measured >= 0 ? e.measured : e.aimed;
        if (e.ok) {
            double lg = 0;
            for (int s = 0; s < t->n_sizes; s++) {
                e.speedup[s] = e.ref[s] / e.us[s];
                lg += log(e.speedup[s]);
            }
            e.fitness = exp(lg / t->n_sizes);
        }
        char text[KV_SCHED_TEXT_MAX];
        if (kv_sched_format(&e.s, text, sizeof text) != 0 || !(e.text = strdup(text))) {
            rc = kv_err_set(err, "%s:%d: out of memory", path, lineno);
            break;
        }
        sq_coll *c = coll_of(t, (kv_sched_coll)coll);
        int dup = 0;
        for (int i = 0; i < c->n && !dup; i++)
            dup = strcmp(c->e[i].text, e.text) == 0;
        if (dup) {
            free(e.text);
            continue;
        }
        if (c->n == c->cap) {
            int ncap = c->cap ? 2 * c->cap : 64;
            sq_entry *ne = realloc(c->e, sizeof *ne * (size_t)ncap);
            if (!ne) {
                free(e.text);
                rc = kv_err_set(err, "out of memory");
                break;
            }
            c->e = ne;
            c->cap = ncap;
        }
        c->e[c->n++] = e;
    }
    free(line);
    fclose(f);
    if (rc == 0 && !header)
        rc = kv_err_set(err, "%s: no header line", path);
    for (int i = 0; rc == 0 && i < t->n_colls; i++) {
        sq_coll *c = &t->coll[i];
        if (!(c->by_text = malloc(sizeof *c->by_text * (size_t)(c->n ? c->n : 1))))
            rc = kv_err_set(err, "out of memory");
        else
            finish(t, c);
    }
    if (rc != 0) {
        sq_table_free(t);
        return -1;
    }
    return 0;
}

void sq_table_free(sq_table *t)
{
    for (int i = 0; i < t->n_colls; i++) {
        for (int k = 0; k < t->coll[i].n; k++)
            free(t->coll[i].e[k].text);
        free(t->coll[i].e);
        free(t->coll[i].by_text);
    }
    memset(t, 0, sizeof *t);
}
