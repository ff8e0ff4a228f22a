/* export_plan.c — what kevo export writes (export_plan.h): read from the
 * archive and the problem's definition, before anything is written. */
#include "report/export_plan.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "report/snapshot.h"
#include "search/config.h"
#include "report/size_best.h"

void kv_export_bounds(kv_export_row *rows, int n)
{
    for (int i = 0; i < n; i++) {
        rows[i].lo = i == 0 ? 0 : rows[i - 1].hi;
        if (i + 1 == n) {
            rows[i].hi = KV_EXPORT_NO_LIMIT;
            continue;
        }
        double mid = sqrt((double)rows[i].bytes) * sqrt((double)rows[i + 1].bytes);
        uint64_t hi = (uint64_t)llround(mid);
        /* strictly above this size and not above the next (neighbours 1 byte apart) */
        if (hi <= rows[i].bytes)
            hi = rows[i].bytes + 1;
        if (hi > rows[i + 1].bytes)
            hi = rows[i + 1].bytes;
        rows[i].hi = hi;
    }
}

void kv_export_plan_free(kv_export_plan *plan)
{
    for (int i = 0; i < plan->n_programs; i++) {
        kv_program_clear(&plan->programs[i].prog);
        free(plan->programs[i].src);
    }
    plan->n_programs = 0;
    kv_problem_free(&plan->def);
}

static void note(kv_export_plan *plan, const char *fmt, ...) KV_PRINTF(2, 3);
static void note(kv_export_plan *plan, const char *fmt, ...)
{
    size_t used = strlen(plan->notes);
    if (used + 2 >= sizeof plan->notes)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(plan->notes + used, sizeof plan->notes - used, fmt, ap);
    va_end(ap);
    used = strlen(plan->notes);
    if (used + 1 < sizeof plan->notes) {
        plan->notes[used] = '\n';
        plan->notes[used + 1] = 0;
    }
}

int kv_report_run_world(kv_txn *t, int *world, kv_err *err)
{
    char *json = NULL;
    int rc = kv_get_config(t, &json, NULL, err);
    *world = 2;
    if (rc == KV_NOTFOUND)
        return 0;
    if (rc != 0)
        return -1;
    kv_config cfg;
    rc = kv_config_parse(json, "the run's stored configuration", &cfg, err);
    free(json);
    if (rc != 0)
        return -1;
    *world = cfg.world;
    return 0;
}

/* The refusal when nothing can be exported: what the archive does hold. */
static int nothing_to_export(const kv_report_snapshot *s, const char *problem, const char *run_dir,
                             kv_err *err)
{
    kv_problem_stats st;
    kv_err ignored = {{0}};
    char held[160] = "";
    if (kv_get_problem_stats(s->t, problem, &st, &ignored) == 0)
        snprintf(held, sizeof held, " (%" PRIu64 " program%s, %" PRIu64 " correct evaluation%s)",
                 st.programs, st.programs == 1 ? "" : "s", st.ok, st.ok == 1 ? "" : "s");
    return kv_err_set(err,
                      "problem '%s' has no correct program measured with the full protocol "
                      "in %s%s: nothing to export; 'kevo seed --problem %s --run %s' measures "
                      "the pattern library's seeds",
                      problem, kv_archive_path(s->a), held, problem, run_dir);
}

/* The bytes of one rank's inputs at size k and world w. */
static int input_bytes(const kv_problem *def, int k, int world, uint64_t *out, kv_err *err)
{
    kv_shape in[KEVO_MAX_TENSORS], outs[KEVO_MAX_TENSORS];
    if (kv_problem_shapes(def, k, world, in, outs, err) != 0)
        return -1;
    uint64_t b = 0;
    for (int i = 0; i < def->n_inputs; i++)
        b += in[i].bytes;
    *out = b;
    return 0;
}

static int by_bytes(const void *a, const void *b)
{
    const kv_export_row *x = a, *y = b;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* The measured sizes the dispatcher can tell apart, by bytes. */
static int make_rows(kv_export_plan *plan, const kv_report_size_bests *b, kv_err *err)
{
    for (size_t i = 0; i < b->n; i++) {
        const kv_size_best *s = &b->v[i];
        if (b->known[i] < 0) {
            note(plan, "size %s: not a size of the problem's definition (%s): left out", s->size,
                 plan->def.dir);
            continue;
        }
        uint64_t bytes;
        if (input_bytes(&plan->def, b->known[i], plan->world, &bytes, err) != 0)
            return kv_err_prefix(err, "size %s at W=%d", s->size, plan->world);
        const kv_export_row *same = NULL;
        for (int r = 0; r < plan->n_rows; r++)
            if (plan->rows[r].bytes == bytes)
                same = &plan->rows[r];
        if (same) {
            note(plan,
                 "size %s: the same input bytes (%" PRIu64 ") as size %s, and the "
                 "dispatcher tells sizes apart by bytes: left out",
                 s->size, bytes, same->best.size);
            continue;
        }
        if (plan->n_rows == KV_PROBLEM_MAX_SIZES)
            return kv_err_set(err, "more than %d measured sizes", KV_PROBLEM_MAX_SIZES);
        kv_export_row *row = &plan->rows[plan->n_rows++];
        memset(row, 0, sizeof *row);
        row->best = *s;
        row->bytes = bytes;
    }
    qsort(plan->rows, (size_t)plan->n_rows, sizeof plan->rows[0], by_bytes);
    kv_export_bounds(plan->rows, plan->n_rows);
    return 0;
}

/* Each distinct program of the rows, with its record and source. */
static int read_programs(kv_export_plan *plan, kv_txn *t, kv_err *err)
{
    for (int r = 0; r < plan->n_rows; r++) {
        uint64_t id = plan->rows[r].best.program_id;
        int p = 0;
        while (p < plan->n_programs && plan->programs[p].prog.id != id)
            p++;
        plan->rows[r].program = p;
        if (p < plan->n_programs)
            continue;
        kv_export_program *e = &plan->programs[plan->n_programs];
        memset(e, 0, sizeof *e);
        int rc = kv_get_program(t, id, &e->prog, err);
        if (rc == KV_NOTFOUND)
            return kv_err_set(err, "%s: program %" PRIu64 ", the best of %s at %s, is missing",
                              plan->archive, id, plan->problem, plan->rows[r].best.size);
        if (rc != 0)
            return -1;
        plan->n_programs++; /* its record is owned from here */
        rc = kv_get_source(t, id, &e->src, &e->len, err);
        if (rc == KV_NOTFOUND)
            return kv_err_set(err, "%s: the source of program %" PRIu64 " is missing",
                              plan->archive, id);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* ---- the pattern headers the sources include ------------------------------------- */

static int have_header(const kv_export_plan *plan, const char *name)
{
    for (int i = 0; i < plan->n_headers; i++)
        if (strcmp(plan->headers[i], name) == 0)
            return 1;
    return 0;
}

/* Adds every header of patterns_dir that text includes by a plain file name
 * ("kevo_sync.cuh"), and those they include; kevo/kernel.h is always copied. */
static int scan_includes(kv_export_plan *plan, const char *text, const char *patterns_dir,
                         int depth, kv_err *err)
{
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#') {
            p++;
            while (*p == ' ' || *p == '\t')
                p++;
            if (strncmp(p, "include", 7) == 0) {
                p += 7;
                while (*p == ' ' || *p == '\t')
                    p++;
                const char *q = *p == '"' ? strchr(p + 1, '"') : NULL;
                size_t n = q ? (size_t)(q - p - 1) : 0;
                char name[128];
                if (q && (!end || q < end) && n > 0 && n < sizeof name) {
                    memcpy(name, p + 1, n);
                    name[n] = 0;
                    char path[PATH_MAX];
                    struct stat st;
                    if (!strchr(name, '/') && !have_header(plan, name) &&
                        kv_path_join(path, sizeof path, patterns_dir, name, err) == 0 &&
                        stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                        if (plan->n_headers == KV_EXPORT_MAX_HEADERS)
                            return kv_err_set(err, "more than %d pattern headers included",
                                              KV_EXPORT_MAX_HEADERS);
                        snprintf(plan->headers[plan->n_headers++], sizeof plan->headers[0], "%s",
                                 name);
                        char *h = NULL;
                        size_t hl = 0;
                        if (depth > 16)
                            return kv_err_set(err, "%s: includes nested too deep", path);
                        if (kv_read_file(path, &h, &hl, err) != 0)
                            return -1;
                        int rc = scan_includes(plan, h, patterns_dir, depth + 1, err);
                        free(h);
                        if (rc != 0)
                            return -1;
                    }
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

/* ---- the plan ------------------------------------------------------------------------ */

static int plan_from(kv_export_plan *plan, const kv_report_snapshot *s, int world,
                     const char *patterns_dir, kv_problem_loader load_problem, kv_err *err)
{
    if (kv_report_require_problem(s, plan->problem, err) != 0)
        return -1;
    if (world == 0 && kv_report_run_world(s->t, &world, err) != 0)
        return -1;
    plan->world = world;
    if (load_problem(plan->problem, &plan->def, err) != 0)
        return kv_err_prefix(err, "the export needs the problem's definition (its sizes and "
                                  "tensors)");
    if (!kv_problem_supports_world(&plan->def, world))
        return kv_err_set(err, "problem %s is not defined for W=%d (%s)", plan->problem, world,
                          plan->def.dir);
    kv_report_size_bests b;
    if (kv_report_size_bests_load(s->t, plan->problem, &plan->def, &b, err) != 0)
        return -1;
    int rc = b.n == 0 ? nothing_to_export(s, plan->problem, plan->run_dir, err)
                      : make_rows(plan, &b, err);
    kv_report_size_bests_free(&b);
    if (rc != 0)
        return -1;
    if (plan->n_rows == 0)
        return kv_err_set(err,
                          "problem '%s': no measured size of %s is a size of its "
                          "definition:\n%s",
                          plan->problem, plan->archive, plan->notes);
    if (read_programs(plan, s->t, err) != 0)
        return -1;
    for (int i = 0; i < plan->n_programs; i++)
        if (scan_includes(plan, plan->programs[i].src, patterns_dir, 0, err) != 0)
            return -1;
    return 0;
}

int kv_export_plan_make(const char *run_dir, const char *problem, int world,
                        const char *patterns_dir, kv_problem_loader load_problem,
                        kv_export_plan *plan, kv_err *err)
{
    memset(plan, 0, sizeof *plan);
    if (snprintf(plan->problem, sizeof plan->problem, "%s", problem) >= (int)sizeof plan->problem)
        return kv_err_set(err, "problem name '%.40s...' too long", problem);
    snprintf(plan->run_dir, sizeof plan->run_dir, "%s", run_dir);
    kv_report_snapshot s;
    if (kv_report_snapshot_open(run_dir, &s, err) != 0)
        return -1;
    snprintf(plan->archive, sizeof plan->archive, "%s", kv_archive_path(s.a));
    int rc = plan_from(plan, &s, world, patterns_dir, load_problem, err);
    kv_report_snapshot_close(&s);
    if (rc != 0)
        kv_export_plan_free(plan);
    return rc;
}
