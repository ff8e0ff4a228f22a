/* test_report_lib.c — the report library (report/) called directly, on an
 * archive the test writes with the archive API:
 *  - the snapshot: a problem the archive does not know is refused, naming the
 *    ones it knows and the nearest;
 *  - the per-size ranking: the best program at each size, in the order of the
 *    problem's sizes, with the times stored;
 *  - a view's data: the behaviour grids of the elites read from the archive,
 *    per island and merged, their coverage and QD score, and each cell's
 *    speedup; the problems' summaries;
 *  - kevo export's plan: its rows (sizes by bytes, their winners and the
 *    boundaries between them), its programs and the pattern headers their
 *    sources include; a problem with no correct full-protocol program is
 *    refused;
 *  - the export's rows: one per program and size with its speedup, bus
 *    bandwidth and elite flag, one for a program without sizes, a problem
 *    without a definition noted once, and an empty archive;
 *  - the best over time from an events file: the steps in order (bests,
 *    programs, seeds, times), one problem's only, a torn last line, an empty
 *    file and a missing one.
 * Every expected value is computed from what the test stored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive/archive.h"
#include "problem/problem.h"
#include "report/export_plan.h"
#include "report/history.h"
#include "report/rows.h"
#include "report/size_best.h"
#include "report/snapshot.h"
#include "report/views.h"
#include "test.h"
#include "test_util.h"

static const char *source_dir;

/* The sizes of problems/allreduce (problem.json), largest input last, and
 * the reference's time the made-up results give each. */
#define N_SIZES 4
static const char *const size_names[N_SIZES] = {"64KiB", "1MiB", "16MiB", "256MiB"};
static const double ref_us[N_SIZES] = {12, 25, 140, 1500};

/* A made-up program (sources differ in code, not only in comments: the
 * archive keeps one program per normalised source): its speedup at each
 * size (0: the size failed), its cell, the island whose elite it is (-1:
 * none) and its protocol. */
typedef struct {
    const char *src;
    double sp[N_SIZES];
    const char *cell;
    int32_t island;
    kv_protocol protocol;
    uint64_t id; /* set by store */
} made_up;

static made_up progs[] = {
    /* includes a pattern header: the export plan copies it */
    {"#include \"kevo_sync.cuh\"\nint a;\n",
     {3.0, 1.2, 0.9, 0.8},
     "sm/fused",
     0,
     KV_PROTOCOL_FULL,
     0},
    {"int b;\n", {1.5, 2.2, 1.1, 0.7}, "tma/fused", 0, KV_PROTOCOL_FULL, 0},
    {"int c;\n", {0.5, 2.0, 1.7, 0}, "sm/fused", 1, KV_PROTOCOL_FULL, 0},
    {"int d;\n", {0.4, 0.6, 1.0, 1.3}, "ce/unfused", 1, KV_PROTOCOL_FULL, 0},
    /* faster everywhere, but only screened: never the best */
    {"int e;\n", {9, 9, 9, 9}, "ce/fused", -1, KV_PROTOCOL_SCREEN, 0},
};
#define N_PROGS (int)(sizeof progs / sizeof progs[0])

static double geomean(const double *sp)
{
    double s = 0;
    for (int i = 0; i < N_SIZES; i++)
        s += sp[i] > 0 ? log(sp[i]) : 0;
    return exp(s / N_SIZES);
}

static int store(kv_archive *a, const char *problem, made_up *m)
{
    kv_err err = {{0}};
    kv_txn *t = NULL;
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "%s", problem);
    snprintf(p.op, sizeof p.op, "seed");
    snprintf(p.model, sizeof p.model, "test");
    p.island = m->island;
    int existed = 0;
    if (kv_write_begin(a, &t, &err) != 0 ||
        kv_add_program(t, &p, m->src, strlen(m->src), &m->id, &existed, &err) != 0)
        goto fail;
    p.id = m->id;
    p.verdict = KV_VERDICT_OK;
    p.protocol = m->protocol;
    for (int i = 0; i < N_SIZES; i++) {
        kv_size_result *s = &p.sizes[p.n_sizes++];
        snprintf(s->name, sizeof s->name, "%s", size_names[i]);
        s->ref_us = ref_us[i];
        s->ok = m->sp[i] > 0;
        s->cand_us = m->sp[i] > 0 ? ref_us[i] / m->sp[i] : 0;
        s->timing = KV_SIZE_TIMING_GRAPH;
    }
    p.speedup = geomean(m->sp);
    snprintf(p.cell, sizeof p.cell, "%s", m->cell);
    p.evaluated_ns = 1764150000000000000ll;
    if (kv_set_result(t, &p, &err) != 0)
        goto fail;
    if (m->island >= 0) {
        kv_elite e;
        memset(&e, 0, sizeof e);
        snprintf(e.problem, sizeof e.problem, "%s", problem);
        e.island = m->island;
        snprintf(e.cell, sizeof e.cell, "%s", m->cell);
        e.program_id = m->id;
        e.fitness = p.speedup;
        if (kv_offer_elite(t, &e, NULL, NULL, &err) != 0)
            goto fail;
    }
    if (kv_txn_commit(t, &err) == 0)
        return 0;
    t = NULL;
fail:
    fprintf(stderr, "store: %s\n", err.msg);
    if (t)
        kv_txn_abort(t);
    return -1;
}

static char run_dir[4096];

static int make_archive(void)
{
    kv_test_fresh_dir(run_dir, sizeof run_dir, "report-lib");
    kv_archive *a = NULL;
    kv_err err = {{0}};
    if (kv_archive_open(run_dir, &(kv_archive_opts){.create = 1}, &a, &err) != 0) {
        fprintf(stderr, "open %s: %s\n", run_dir, err.msg);
        return -1;
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < N_PROGS; i++)
        rc = store(a, "allreduce", &progs[i]);
    /* a problem with only a screened program: nothing to export */
    static made_up screened = {"int f;\n", {2, 2, 2, 2}, "sm/fused", 0, KV_PROTOCOL_SCREEN, 0};
    if (rc == 0)
        rc = store(a, "allgather", &screened);
    kv_archive_close(a);
    return rc;
}

/* The problem loader the export plan is given: problems/ of the tree. */
static int load_problem(const char *name, kv_problem *p, kv_err *err)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/problems/%s", source_dir, name);
    return kv_problem_load(dir, p, err);
}

/* The index into progs of the best full-protocol program at size k (the
 * greatest speedup; ties: the lower id), or -1. */
static int expected_best(int k)
{
    int best = -1;
    for (int i = 0; i < N_PROGS; i++) {
        if (progs[i].protocol != KV_PROTOCOL_FULL || progs[i].sp[k] <= 0)
            continue;
        if (best < 0 || progs[i].sp[k] > progs[best].sp[k])
            best = i;
    }
    return best;
}

static int size_index(const char *name)
{
    for (int k = 0; k < N_SIZES; k++)
        if (strcmp(size_names[k], name) == 0)
            return k;
    return -1;
}

/* ---- the snapshot --------------------------------------------------------------- */

static void test_snapshot(void)
{
    kv_report_snapshot s;
    kv_err err = {{0}};
    KV_CHECK(kv_report_snapshot_open(run_dir, &s, &err) == 0);
    KV_CHECK(kv_report_require_problem(&s, "allreduce", &err) == 0);
    KV_CHECK(kv_report_require_problem(&s, "allreduc", &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "did you mean 'allreduce'?");
    KV_CHECK_STR_CONTAINS(err.msg, "known problems: allgather, allreduce");

    kv_report_problems l;
    KV_CHECK(kv_report_problems_load(s.t, &l, &err) == 0);
    KV_CHECK(l.n == 2);
    if (l.n == 2) {
        KV_CHECK(strcmp(l.v[0].problem, "allgather") == 0 && l.v[0].programs == 1);
        KV_CHECK(strcmp(l.v[1].problem, "allreduce") == 0 && l.v[1].programs == (uint64_t)N_PROGS);
    }
    free(l.v);
    kv_report_snapshot_close(&s);
    KV_CHECK(kv_report_snapshot_open("/nonexistent/kevo-run", &s, &err) == -1);
    KV_CHECK(err.msg[0] != 0);
}

/* ---- the per-size ranking ------------------------------------------------------- */

static void test_size_bests(void)
{
    kv_problem def;
    kv_err err = {{0}};
    KV_CHECK(load_problem("allreduce", &def, &err) == 0);
    kv_report_snapshot s;
    KV_CHECK(kv_report_snapshot_open(run_dir, &s, &err) == 0);
    kv_report_size_bests b;
    KV_CHECK(kv_report_size_bests_load(s.t, "allreduce", &def, &b, &err) == 0);
    KV_CHECK(b.n == N_SIZES);
    int last_known = -1;
    for (size_t i = 0; i < b.n && i < N_SIZES; i++) {
        int k = size_index(b.v[i].size);
        KV_CHECK(k >= 0);
        if (k < 0)
            continue;
        /* in the order of the definition's sizes */
        KV_CHECK(b.known[i] > last_known && strcmp(def.sizes[b.known[i]].name, b.v[i].size) == 0);
        last_known = b.known[i];
        int want = expected_best(k);
        KV_CHECK(want >= 0 && b.v[i].program_id == progs[want].id);
        KV_CHECK(fabs(b.v[i].speedup - progs[want].sp[k]) < 1e-9);
        KV_CHECK(fabs(b.v[i].ref_us - ref_us[k]) < 1e-9);
        KV_CHECK(fabs(b.v[i].cand_us - ref_us[k] / progs[want].sp[k]) < 1e-9);
    }
    kv_report_size_bests_free(&b);
    /* the screened problem has no ranking */
    KV_CHECK(kv_report_size_bests_load(s.t, "allgather", NULL, &b, &err) == 0);
    KV_CHECK(b.n == 0);
    kv_report_size_bests_free(&b);
    kv_report_snapshot_close(&s);
    kv_problem_free(&def);
}

/* ---- a view's data: the behaviour grids ------------------------------------------ */

static void test_grids(void)
{
    kv_report_snapshot s;
    kv_err err = {{0}};
    KV_CHECK(kv_report_snapshot_open(run_dir, &s, &err) == 0);
    kv_problem_grids pg;
    KV_CHECK(kv_problem_grids_load(s.t, "allreduce", 1, &pg, &err) == 0);
    /* islands 0 and 1, in order */
    KV_CHECK(pg.n == 2 && pg.v[0].island == 0 && pg.v[1].island == 1);
    if (pg.n != 2) {
        kv_problem_grids_free(&pg);
        kv_report_snapshot_close(&s);
        return;
    }
    const kv_grid *island[2] = {&pg.v[0].grid, &pg.v[1].grid}, *merged = &pg.merged;

    /* expected: per island, each program's cell; merged, the fitter per cell */
    double qd[2] = {0, 0}, qd_merged = 0;
    int cover[2] = {0, 0}, cover_merged = 0;
    for (int i = 0; i < N_PROGS; i++) {
        if (progs[i].island < 0)
            continue;
        int c = kv_cell_parse(progs[i].cell);
        KV_CHECK(c >= 0);
        if (c < 0)
            continue;
        double f = geomean(progs[i].sp);
        const kv_grid_cell *cell = &island[progs[i].island]->cell[c];
        KV_CHECK(cell->occupied && cell->program_id == progs[i].id);
        KV_CHECK(fabs(cell->speedup - f) < 1e-9);
        qd[progs[i].island] += f;
        cover[progs[i].island]++;
        /* the merged cell: the fittest program stored in this cell */
        int fittest = 1;
        for (int j = 0; j < N_PROGS; j++)
            if (j != i && progs[j].island >= 0 && strcmp(progs[j].cell, progs[i].cell) == 0 &&
                geomean(progs[j].sp) > f)
                fittest = 0;
        if (fittest) {
            KV_CHECK(merged->cell[c].program_id == progs[i].id &&
                     merged->cell[c].island == progs[i].island &&
                     fabs(merged->cell[c].speedup - f) < 1e-9);
            qd_merged += f;
            cover_merged++;
        }
    }
    for (int i = 0; i < 2; i++) {
        KV_CHECK(kv_grid_coverage(island[i]) == cover[i]);
        KV_CHECK(fabs(kv_grid_qd_score(island[i]) - qd[i]) < 1e-9);
    }
    KV_CHECK(kv_grid_coverage(merged) == cover_merged);
    KV_CHECK(cover_merged < cover[0] + cover[1]); /* two islands share a cell */
    KV_CHECK(fabs(kv_grid_qd_score(merged) - qd_merged) < 1e-9);
    kv_problem_grids_free(&pg);

    /* the problems' summaries (kevo archive list): the same merged grid, and
     * the best correct program by speedup, whatever its protocol */
    int best = 0;
    for (int i = 1; i < N_PROGS; i++)
        if (geomean(progs[i].sp) > geomean(progs[best].sp))
            best = i;
    kv_problem_summary *sum = NULL;
    size_t n = 0;
    KV_CHECK(kv_problem_summaries_load(s.t, &sum, &n, &err) == 0);
    KV_CHECK(n == 2);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(sum[i].st.problem, "allreduce") != 0)
            continue;
        KV_CHECK(sum[i].st.programs == (uint64_t)N_PROGS);
        KV_CHECK(sum[i].has_best && sum[i].best_id == progs[best].id &&
                 fabs(sum[i].best - geomean(progs[best].sp)) < 1e-9);
        KV_CHECK(sum[i].coverage == cover_merged && fabs(sum[i].qd - qd_merged) < 1e-9);
    }
    free(sum);
    kv_report_snapshot_close(&s);
}

/* ---- kevo export's plan ------------------------------------------------------------ */

static void test_export_plan(void)
{
    char patterns[4200];
    snprintf(patterns, sizeof patterns, "%s/patterns", source_dir);
    kv_export_plan *plan = malloc(sizeof *plan);
    kv_err err = {{0}};
    KV_CHECK(plan != NULL);
    if (!plan)
        return;
    int rc = kv_export_plan_make(run_dir, "allreduce", 2, patterns, load_problem, plan, &err);
    if (rc != 0)
        fprintf(stderr, "plan: %s\n", err.msg);
    KV_CHECK(rc == 0);
    if (rc != 0) {
        free(plan);
        return;
    }
    KV_CHECK(plan->world == 2 && strcmp(plan->problem, "allreduce") == 0);
    KV_CHECK(plan->n_rows == N_SIZES);

    /* the distinct winners of the sizes */
    int distinct = 0;
    for (int k = 0; k < N_SIZES; k++) {
        int seen = 0;
        for (int j = 0; j < k; j++)
            seen |= expected_best(j) == expected_best(k);
        distinct += !seen;
    }
    KV_CHECK(plan->n_programs == distinct);

    for (int i = 0; i < plan->n_rows; i++) {
        const kv_export_row *r = &plan->rows[i];
        int k = size_index(r->best.size);
        KV_CHECK(k >= 0);
        if (k < 0)
            continue;
        int want = expected_best(k);
        KV_CHECK(want >= 0 && r->best.program_id == progs[want].id);
        KV_CHECK(r->program >= 0 && r->program < plan->n_programs &&
                 plan->programs[r->program].prog.id == progs[want].id &&
                 strcmp(plan->programs[r->program].src, progs[want].src) == 0);
        /* the bytes of one rank's inputs at this size and W=2 */
        int s = -1;
        for (int j = 0; j < plan->def.n_sizes; j++)
            if (strcmp(plan->def.sizes[j].name, r->best.size) == 0)
                s = j;
        kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
        KV_CHECK(s >= 0 && kv_problem_shapes(&plan->def, s, 2, in, out, &err) == 0);
        uint64_t bytes = 0;
        for (int j = 0; s >= 0 && j < plan->def.n_inputs; j++)
            bytes += in[j].bytes;
        KV_CHECK(r->bytes == bytes);
        /* sorted by bytes; the boundaries tile [0, no limit) at the geometric midpoints */
        if (i == 0)
            KV_CHECK(r->lo == 0);
        else
            KV_CHECK(r->lo == plan->rows[i - 1].hi && r->bytes > plan->rows[i - 1].bytes);
        if (i + 1 == plan->n_rows) {
            KV_CHECK(r->hi == KV_EXPORT_NO_LIMIT);
        } else {
            double mid = sqrt((double)r->bytes * (double)plan->rows[i + 1].bytes);
            KV_CHECK(fabs((double)r->hi - mid) <= 1.0);
        }
    }

    int has_sync = 0;
    for (int i = 0; i < plan->n_headers; i++)
        has_sync |= strcmp(plan->headers[i], "kevo_sync.cuh") == 0;
    KV_CHECK(has_sync);
    KV_CHECK(plan->notes[0] == 0);
    kv_export_plan_free(plan);

    /* refusals, naming what is missing */
    rc = kv_export_plan_make(run_dir, "allgather", 2, patterns, load_problem, plan, &err);
    KV_CHECK(rc == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "no correct program measured with the full protocol");
    rc = kv_export_plan_make(run_dir, "alltoall", 2, patterns, load_problem, plan, &err);
    KV_CHECK(rc == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "unknown problem 'alltoall'");
    free(plan);
}

/* ---- the export's rows ---------------------------------------------------------- */

static int no_problem(const char *name, kv_problem *p, kv_err *err)
{
    (void)p;
    return kv_err_set(err, "no definition of %s here", name);
}

static void test_rows(void)
{
    kv_problem def;
    kv_err err = {{0}}, note = {{0}};
    KV_CHECK(load_problem("allreduce", &def, &err) == 0);
    kv_report_snapshot s;
    KV_CHECK(kv_report_snapshot_open(run_dir, &s, &err) == 0);
    int world = 0;
    KV_CHECK(kv_report_run_world(s.t, &world, &err) == 0 && world > 0);
    kv_report_rows *r = NULL;
    KV_CHECK(kv_report_rows_open(s.t, load_problem, &r, &note, &err) == 0);
    KV_CHECK(note.msg[0] == 0);
    int gbps_seen = 0;
    for (int i = 0; r && i < N_PROGS; i++) {
        kv_program p;
        KV_CHECK(kv_get_program(s.t, progs[i].id, &p, &err) == 0);
        kv_report_row rows[KV_MAX_SIZES];
        size_t n = 0;
        KV_CHECK(kv_report_rows_of(r, &p, rows, &n, &note, &err) == 0);
        KV_CHECK(note.msg[0] == 0);
        KV_CHECKF(n == N_SIZES, "program %d: %zu rows", i, n);
        for (size_t j = 0; j < n && j < N_SIZES; j++) {
            int k = size_index(rows[j].size ? rows[j].size->name : "");
            KV_CHECK(k == (int)j);
            if (k < 0)
                continue;
            KV_CHECK(rows[j].elite == (progs[i].island >= 0));
            KV_CHECK(isnan(rows[j].cv)); /* no evidence stored */
            if (progs[i].sp[k] <= 0) {
                KV_CHECK(isnan(rows[j].speedup) && isnan(rows[j].gbps));
                continue;
            }
            KV_CHECKF(fabs(rows[j].speedup - progs[i].sp[k]) < 1e-9, "program %d %s: %g", i,
                      size_names[k], rows[j].speedup);
            kv_roofline rl;
            int dk = kv_problem_find_size(&def, size_names[k]);
            KV_CHECK(dk >= 0 && kv_problem_roofline(&def, dk, world, &rl, &err) == 0);
            double want = rl.send_bytes / (ref_us[k] / progs[i].sp[k] * 1e-6) / 1e9;
            KV_CHECKF(fabs(rows[j].gbps - want) <= 1e-9 * want, "gbps %g, want %g", rows[j].gbps,
                      want);
            gbps_seen += want > 0;
        }
        kv_program_clear(&p);
    }
    KV_CHECK(gbps_seen > 0);

    /* a program without sizes: one row without a size */
    kv_program bare;
    memset(&bare, 0, sizeof bare);
    snprintf(bare.problem, sizeof bare.problem, "allreduce");
    bare.id = progs[0].id;
    kv_report_row rows[KV_MAX_SIZES];
    size_t n = 0;
    KV_CHECK(r && kv_report_rows_of(r, &bare, rows, &n, &note, &err) == 0);
    KV_CHECK(n == 1 && rows[0].size == NULL && rows[0].elite && isnan(rows[0].speedup));
    kv_report_rows_free(r);

    /* a problem without a definition: no GB/s, said once */
    r = NULL;
    KV_CHECK(kv_report_rows_open(s.t, no_problem, &r, &note, &err) == 0);
    kv_program p;
    KV_CHECK(kv_get_program(s.t, progs[1].id, &p, &err) == 0);
    KV_CHECK(r && kv_report_rows_of(r, &p, rows, &n, &note, &err) == 0);
    KV_CHECK_STR_CONTAINS(note.msg, "no GB/s for allreduce: no definition of allreduce here");
    KV_CHECK(n == N_SIZES && isnan(rows[0].gbps) && fabs(rows[0].speedup - progs[1].sp[0]) < 1e-9);
    KV_CHECK(r && kv_report_rows_of(r, &p, rows, &n, &note, &err) == 0);
    KV_CHECK(note.msg[0] == 0);
    kv_program_clear(&p);
    kv_report_rows_free(r);
    kv_report_snapshot_close(&s);
    kv_problem_free(&def);

    /* an empty archive: rows open, nothing is an elite */
    char empty[4096];
    kv_test_fresh_dir(empty, sizeof empty, "report-lib-empty");
    kv_archive *a = NULL;
    KV_CHECK(kv_archive_open(empty, &(kv_archive_opts){.create = 1}, &a, &err) == 0);
    kv_archive_close(a);
    KV_CHECK(kv_report_snapshot_open(empty, &s, &err) == 0);
    r = NULL;
    KV_CHECK(kv_report_rows_open(s.t, load_problem, &r, &note, &err) == 0);
    KV_CHECK(r && kv_report_rows_of(r, &bare, rows, &n, &note, &err) == 0);
    KV_CHECK(n == 1 && rows[0].elite == 0);
    kv_report_rows_free(r);
    kv_report_snapshot_close(&s);
}

/* ---- the best over time --------------------------------------------------------- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    KV_CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

typedef struct {
    double time_s, evaluations;
    const char *problem, *size;
    double best;
    uint64_t program;
    double seed;
} step;

static void check_steps(const kv_report_history *h, const step *want, size_t n)
{
    KV_CHECKF(h->n == n, "%zu steps, want %zu", h->n, n);
    for (size_t i = 0; i < h->n && i < n; i++) {
        const kv_history_row *r = &h->v[i];
        KV_CHECKF(
            fabs(r->time_s - want[i].time_s) < 1e-9 && r->evaluations == want[i].evaluations &&
                strcmp(r->problem, want[i].problem) == 0 && strcmp(r->size, want[i].size) == 0 &&
                r->best == want[i].best && r->program == want[i].program && r->seed == want[i].seed,
            "step %zu: %g %g %s %s %g #%llu %g", i, r->time_s, r->evaluations, r->problem, r->size,
            r->best, (unsigned long long)r->program, r->seed);
    }
}

static void test_history(void)
{
    char dir[4096], path[4200];
    kv_test_fresh_dir(dir, sizeof dir, "report-lib-history");
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    write_text(path,
               "{\"type\":\"start\",\"t\":100}\n"
               "{\"type\":\"result\",\"t\":101,\"evaluations\":1,\"problem\":\"allreduce\","
               "\"op\":\"seed\",\"verdict\":\"ok\",\"elite\":1,\"program\":1,\"speedup\":1.0,"
               "\"sizes\":{\"64KiB\":1.5,\"1MiB\":0.8}}\n"
               /* not an elite, not a seed: no step */
               "{\"type\":\"result\",\"t\":105,\"evaluations\":2,\"problem\":\"allreduce\","
               "\"op\":\"mutate\",\"verdict\":\"ok\",\"elite\":0,\"program\":2,\"speedup\":3.0}\n"
               /* grows the geomean and 1MiB, not 64KiB */
               "{\"type\":\"result\",\"t\":110,\"evaluations\":3,\"problem\":\"allreduce\","
               "\"op\":\"mutate\",\"verdict\":\"ok\",\"elite\":1,\"program\":3,\"speedup\":1.2,"
               "\"sizes\":{\"64KiB\":1.4,\"1MiB\":2.0}}\n"
               "{\"type\":\"result\",\"t\":112.5,\"evaluations\":4,\"problem\":\"allgather\","
               "\"op\":\"mutate\",\"verdict\":\"ok\",\"elite\":1,\"program\":4,\"speedup\":2.0}\n"
               /* torn by a kill */
               "{\"type\":\"result\",\"t\":130,\"evaluations\":5,\"problem\":\"allreduce\","
               "\"op\":\"mutate\",\"elite\":1,\"program\":6,\"speedup\":9");
    static const step all[] = {
        {1, 1, "allreduce", "geomean", 1.0, 1, 1.0}, {1, 1, "allreduce", "64KiB", 1.5, 1, 1.5},
        {1, 1, "allreduce", "1MiB", 0.8, 1, 0.8},    {10, 3, "allreduce", "geomean", 1.2, 3, 1.0},
        {10, 3, "allreduce", "1MiB", 2.0, 3, 0.8},   {12.5, 4, "allgather", "geomean", 2.0, 4, 0},
    };
    kv_report_history h;
    kv_err err = {{0}};
    KV_CHECK(kv_report_history_load(path, NULL, &h, &err) == 0);
    check_steps(&h, all, sizeof all / sizeof all[0]);
    kv_report_history_free(&h);
    KV_CHECK(kv_report_history_load(path, "allgather", &h, &err) == 0);
    check_steps(&h, &all[5], 1);
    kv_report_history_free(&h);

    write_text(path, "");
    KV_CHECK(kv_report_history_load(path, NULL, &h, &err) == 0);
    KV_CHECK(h.n == 0 && h.v == NULL);
    snprintf(path, sizeof path, "%s/none.jsonl", dir);
    KV_CHECK(kv_report_history_load(path, NULL, &h, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "none.jsonl");
    KV_CHECK(h.n == 0 && h.v == NULL);
}

int main(void)
{
    source_dir = getenv("KEVO_SOURCE_DIR");
    if (!source_dir) {
        fprintf(stderr, "test_report_lib: KEVO_SOURCE_DIR must be set\n");
        return 1;
    }
    if (make_archive() != 0) {
        fprintf(stderr, "test_report_lib: could not make the archive\n");
        return 1;
    }
    KV_RUN(test_snapshot);
    KV_RUN(test_size_bests);
    KV_RUN(test_grids);
    KV_RUN(test_export_plan);
    KV_RUN(test_rows);
    KV_RUN(test_history);
    return kv_test_summary();
}
