/* test_export.c — the archive's best program per size and kevo export, on
 * archives made through the archive API with made-up results:
 *  - the per-size ranking: the best correct full-protocol program of each
 *    size, updated when a better result arrives or the holder's result
 *    changes, blind to mismatches and screening runs, the same after
 *    reopening, and checked by the full walk;
 *  - archives without it (the schema-1 fixture upgraded; counters an older
 *    kevo rewrote): readers compute it from the programs, the next writer
 *    rebuilds it, and a ranking that disagrees with the programs is damage;
 *  - kevo archive best --per-size (text, JSON, usage errors);
 *  - kevo export: its files, its refusals, the dispatcher's choice at,
 *    between and beyond the measured sizes (the table compiled with the C
 *    compiler), and the whole export built with its CMake file and nvcc
 *    (the allreduce seeds and two made-up programs that define the same
 *    symbols as programs), skipped where nvcc is missing.
 *
 * KEVO_BIN, KEVO_SOURCE_DIR; KEVO_CC, KEVO_NVCC and KEVO_CMAKE (ctest). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <lmdb.h>

#include "archive/archive.h"
#include "archive/codec.h"
#include "archive/upgrade.h"
#include "common/fsutil.h"
#include "test.h"
#include "test_util.h"

static const char *bin, *source_dir;

/* The allreduce sizes the made-up results hold: the reference's time at
 * each; a speedup s gives the candidate s times less. The validation size is
 * checked, never timed. */
#define N_SIZES 4
static const char *const size_names[N_SIZES] = {"64KiB", "1MiB", "16MiB", "256MiB"};
static const double ref_us[N_SIZES] = {10, 20, 100, 1200};

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- made-up results ------------------------------------------------------------- */

typedef struct {
    kv_verdict verdict;
    kv_stage stage;     /* of the attempt; SCREEN also makes the protocol screening */
    double sp[N_SIZES]; /* speedup per size; 0: the size failed */
} made_up;

/* Stores src (a new program, or the one with the same source) with a result
 * timed in mode timing at every size and an attempt, in one transaction; its
 * id in *id. */
static int store_timed(kv_archive *a, const char *problem, const char *src, const made_up *m,
                       kv_size_timing timing, uint64_t *id)
{
    kv_err err = {{0}};
    kv_txn *t = NULL;
    kv_program p;
    memset(&p, 0, sizeof p);
    snprintf(p.problem, sizeof p.problem, "%s", problem);
    snprintf(p.op, sizeof p.op, "seed");
    snprintf(p.model, sizeof p.model, "test");
    p.island = -1;
    int existed = 0;
    if (kv_write_begin(a, &t, &err) != 0 ||
        kv_add_program(t, &p, src, strlen(src), id, &existed, &err) != 0)
        goto fail;
    p.id = *id;
    p.verdict = m->verdict;
    p.protocol = m->stage == KV_STAGE_SCREEN ? KV_PROTOCOL_SCREEN : KV_PROTOCOL_FULL;
    double logsum = 0;
    for (int i = 0; i < N_SIZES; i++) {
        kv_size_result *s = &p.sizes[p.n_sizes++];
        snprintf(s->name, sizeof s->name, "%s", size_names[i]);
        s->ref_us = ref_us[i];
        s->ok = m->sp[i] > 0 && m->verdict == KV_VERDICT_OK;
        s->cand_us = m->sp[i] > 0 ? ref_us[i] / m->sp[i] : 0;
        s->timing = timing;
        logsum += m->sp[i] > 0 ? log(m->sp[i]) : 0;
    }
    kv_size_result *v = &p.sizes[p.n_sizes++];
    snprintf(v->name, sizeof v->name, "validation");
    v->ok = m->verdict == KV_VERDICT_OK;
    p.speedup = m->verdict == KV_VERDICT_OK ? exp(logsum / N_SIZES) : 0;
    snprintf(p.cell, sizeof p.cell, "sm/fused");
    p.evaluated_ns = 1764150000000000000ll;
    if (kv_set_result(t, &p, &err) != 0)
        goto fail;
    kv_attempt at;
    memset(&at, 0, sizeof at);
    snprintf(at.problem, sizeof at.problem, "%s", problem);
    at.island = -1;
    at.stage = m->stage;
    at.verdict = m->verdict;
    at.program_id = *id;
    at.speedup = p.speedup;
    if (kv_add_attempt(t, &at, NULL, &err) != 0)
        goto fail;
    return kv_txn_commit(t, &err) == 0 ? 0 : (fprintf(stderr, "%s\n", err.msg), -1);
fail:
    fprintf(stderr, "store: %s\n", err.msg);
    kv_txn_abort(t);
    return -1;
}

/* The same, the mode not recorded (as older kevos stored results). */
static int store(kv_archive *a, const char *problem, const char *src, const made_up *m,
                 uint64_t *id)
{
    return store_timed(a, problem, src, m, KV_SIZE_TIMING_UNKNOWN, id);
}

/* ---- reading the best per size ------------------------------------------------------ */

typedef struct {
    int n;
    kv_size_best v[16];
} bests;

static int keep(const kv_size_best *b, void *ctx, kv_err *err)
{
    (void)err;
    bests *l = ctx;
    if (l->n < 16)
        l->v[l->n++] = *b;
    return 0;
}

static int read_bests(kv_archive *a, const char *problem, bests *out)
{
    kv_err err = {{0}};
    kv_txn *t = NULL;
    memset(out, 0, sizeof *out);
    int rc = kv_read_begin(a, &t, &err);
    if (rc == 0)
        rc = kv_each_size_best(t, problem, keep, out, &err);
    if (rc != 0)
        fprintf(stderr, "read_bests: %s\n", err.msg);
    kv_txn_abort(t);
    return rc;
}

/* The same, from a read-only handle of run. */
static int read_bests_ro(const char *run, const char *problem, bests *out)
{
    kv_archive_opts ro = {.readonly = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    if (kv_archive_open(run, &ro, &a, &err) != 0) {
        fprintf(stderr, "open %s: %s\n", run, err.msg);
        return -1;
    }
    int rc = read_bests(a, problem, out);
    kv_archive_close(a);
    return rc;
}

static const kv_size_best *best_at(const bests *b, const char *size)
{
    for (int i = 0; i < b->n; i++)
        if (strcmp(b->v[i].size, size) == 0)
            return &b->v[i];
    return NULL;
}

static int same_bests(const bests *x, const bests *y)
{
    if (x->n != y->n)
        return 0;
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->v[i].size, y->v[i].size) != 0 || x->v[i].program_id != y->v[i].program_id ||
            x->v[i].speedup != y->v[i].speedup || x->v[i].cand_us != y->v[i].cand_us)
            return 0;
    return 1;
}

/* 0 when the full walk finds nothing; the report's text in *report. */
static int walk(const char *run, char **report)
{
    char path[4200];
    kv_test_fresh_dir(path, sizeof path, "export-walk");
    strcat(path, "/report");
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    kv_walk_info info;
    kv_err err = {{0}};
    int rc = kv_archive_walk(run, NULL, 1, f, &info, &err);
    fclose(f);
    *report = kv_test_slurp(path, NULL);
    if (rc != 0 && !strstr(*report, err.msg)) {
        size_t n = strlen(*report) + strlen(err.msg) + 2;
        char *both = malloc(n);
        snprintf(both, n, "%s%s\n", *report, err.msg);
        free(*report);
        *report = both;
    }
    return rc;
}

/* A source per program (k < 8): distinct code, not only comments, since
 * programs are told apart by their normalised text. */
static const char *src_of(int k)
{
    static char buf[8][128];
    snprintf(buf[k], sizeof buf[k], "extern \"C\" int kevo_run(void *c) { return %d; }\n", k);
    return buf[k];
}

/* ---- the ranking ------------------------------------------------------------------------ */

static void test_ranking(void)
{
    char run[4096];
    kv_test_fresh_dir(run, sizeof run, "export-rank");
    kv_archive_opts wo = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(run, &wo, &a, &err) == 0);
    uint64_t A, B, C, D, E;
    made_up ma = {KV_VERDICT_OK, KV_STAGE_FULL, {2.0, 1.2, 0.9, 0.8}};
    made_up mb = {KV_VERDICT_OK, KV_STAGE_FULL, {1.5, 1.6, 1.1, 0}};
    made_up mc = {KV_VERDICT_OK, KV_STAGE_SCREEN, {9, 9, 9, 9}};     /* screening: ignored */
    made_up md = {KV_VERDICT_MISMATCH, KV_STAGE_FULL, {9, 9, 9, 9}}; /* wrong: ignored */
    KV_REQUIRE(store(a, "allreduce", src_of(0), &ma, &A) == 0);
    KV_REQUIRE(store(a, "allreduce", src_of(1), &mb, &B) == 0);
    KV_REQUIRE(store(a, "allreduce", src_of(2), &mc, &C) == 0);
    KV_REQUIRE(store(a, "allreduce", src_of(3), &md, &D) == 0);
    KV_REQUIRE(store(a, "alltoall", src_of(4), &md, &E) == 0);

    bests b;
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECKF(b.n == 4, "%d sizes", b.n); /* 256MiB: A only (B failed there); no validation */
    const kv_size_best *s = best_at(&b, "64KiB");
    KV_CHECK(s && s->program_id == A && s->speedup == 2.0 && s->cand_us == 5.0 &&
             s->ref_us == 10.0 && strcmp(s->cell, "sm/fused") == 0);
    KV_CHECK((s = best_at(&b, "1MiB")) && s->program_id == B && s->speedup == 1.6);
    KV_CHECK((s = best_at(&b, "16MiB")) && s->program_id == B);
    KV_CHECK((s = best_at(&b, "256MiB")) && s->program_id == A && s->speedup == 0.8);
    KV_CHECK(best_at(&b, "validation") == NULL);
    KV_CHECK(strcmp(b.v[0].size, "16MiB") == 0); /* in the byte order of the names */
    KV_REQUIRE(read_bests(a, "alltoall", &b) == 0);
    KV_CHECK(b.n == 0);

    /* a better result arrives: A re-measured, now the best at 1MiB */
    made_up ma2 = {KV_VERDICT_OK, KV_STAGE_REMEASURE, {2.0, 3.0, 0.9, 0.8}};
    uint64_t again;
    KV_REQUIRE(store(a, "allreduce", src_of(0), &ma2, &again) == 0);
    KV_CHECK(again == A);
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECK((s = best_at(&b, "1MiB")) && s->program_id == A && s->speedup == 3.0);

    /* a new program at the same speedup as A at 64KiB: the lower id stays */
    uint64_t F;
    made_up mf = {KV_VERDICT_OK, KV_STAGE_FULL, {2.0, 0, 0, 0}};
    KV_REQUIRE(store(a, "allreduce", src_of(5), &mf, &F) == 0);
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECK((s = best_at(&b, "64KiB")) && s->program_id == A);

    /* A's next result is a mismatch: it leaves every size */
    made_up ma3 = {KV_VERDICT_MISMATCH, KV_STAGE_REMEASURE, {2.0, 3.0, 0.9, 0.8}};
    KV_REQUIRE(store(a, "allreduce", src_of(0), &ma3, &again) == 0);
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECK((s = best_at(&b, "64KiB")) && s->program_id == F);
    KV_CHECK((s = best_at(&b, "1MiB")) && s->program_id == B);
    KV_CHECK(best_at(&b, "256MiB") == NULL);

    /* a screening run of B replaces its full result: B leaves too */
    made_up mb2 = {KV_VERDICT_OK, KV_STAGE_SCREEN, {5, 5, 5, 5}};
    KV_REQUIRE(store(a, "allreduce", src_of(1), &mb2, &again) == 0);
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECK(b.n == 1 && best_at(&b, "64KiB") && best_at(&b, "64KiB")->program_id == F);
    /* and its full run brings it back */
    KV_REQUIRE(store(a, "allreduce", src_of(1), &mb, &again) == 0);
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECK(b.n == 3 && (s = best_at(&b, "1MiB")) && s->program_id == B);
    kv_archive_close(a);

    /* reopened, read-only: the same; the full walk checks it against the programs */
    bests again_b;
    KV_REQUIRE(read_bests_ro(run, "allreduce", &again_b) == 0);
    KV_CHECK(same_bests(&b, &again_b));
    char *report = NULL;
    KV_CHECK(walk(run, &report) == 0);
    KV_CHECKF(report[0] == 0, "%s", report);
    free(report);
    (void)C;
    (void)D;
    (void)E;
}

/* Per-call times carry launch costs that graph replays do not: at a size, a
 * call-timed result never outranks a graph-timed one whatever its speedup,
 * and results that did not record their mode rank between the two. The
 * index, the programs (read as for an archive without the index) and the
 * index rebuilt by the next writer agree. */
static int as_older_kevo(const char *run, int clear_marker, int drop);

static void test_timing_modes(void)
{
    char run[4096];
    kv_test_fresh_dir(run, sizeof run, "export-modes");
    kv_archive_opts wo = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(run, &wo, &a, &err) == 0);
    uint64_t G, C, U, again;
    const kv_size_timing graph = KV_SIZE_TIMING_GRAPH, call = KV_SIZE_TIMING_CALL;
    made_up mg = {KV_VERDICT_OK, KV_STAGE_FULL, {1.5, 1.5, 0, 0}};
    made_up mc = {KV_VERDICT_OK, KV_STAGE_FULL, {3, 3, 3, 3}};
    made_up mu = {KV_VERDICT_OK, KV_STAGE_FULL, {2, 0, 2, 0}}; /* the mode not recorded */
    KV_REQUIRE(store_timed(a, "allreduce", src_of(0), &mc, call, &C) == 0);
    KV_REQUIRE(store(a, "allreduce", src_of(1), &mu, &U) == 0);
    KV_REQUIRE(store_timed(a, "allreduce", src_of(2), &mg, graph, &G) == 0);
    bests b;
    const kv_size_best *s;
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECK((s = best_at(&b, "64KiB")) && s->program_id == G && s->speedup == 1.5 &&
             s->timing == KV_SIZE_TIMING_GRAPH);
    KV_CHECK((s = best_at(&b, "1MiB")) && s->program_id == G);
    KV_CHECK((s = best_at(&b, "16MiB")) && s->program_id == U &&
             s->timing == KV_SIZE_TIMING_UNKNOWN);
    KV_CHECK((s = best_at(&b, "256MiB")) && s->program_id == C && s->speedup == 3 &&
             s->timing == KV_SIZE_TIMING_CALL);

    /* the graph-timed program fails its next measurement: the others move up */
    made_up mg2 = {KV_VERDICT_MISMATCH, KV_STAGE_REMEASURE, {1.5, 1.5, 0, 0}};
    KV_REQUIRE(store_timed(a, "allreduce", src_of(2), &mg2, graph, &again) == 0);
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    KV_CHECK((s = best_at(&b, "64KiB")) && s->program_id == U);
    KV_CHECK((s = best_at(&b, "1MiB")) && s->program_id == C);
    KV_REQUIRE(store_timed(a, "allreduce", src_of(2), &mg, graph, &again) == 0);
    KV_REQUIRE(read_bests(a, "allreduce", &b) == 0);
    kv_archive_close(a);

    bests from_programs, rebuilt;
    KV_REQUIRE(as_older_kevo(run, 1, 1) == 0);
    KV_REQUIRE(read_bests_ro(run, "allreduce", &from_programs) == 0);
    KV_CHECK(same_bests(&b, &from_programs));
    KV_REQUIRE(kv_archive_open(run, &wo, &a, &err) == 0); /* rebuilds the index */
    KV_REQUIRE(read_bests(a, "allreduce", &rebuilt) == 0);
    kv_archive_close(a);
    KV_CHECK(same_bests(&b, &rebuilt));
    KV_CHECK((s = best_at(&rebuilt, "64KiB")) && s->program_id == G);
    char *report = NULL;
    KV_CHECK(walk(run, &report) == 0);
    KV_CHECKF(report[0] == 0, "%s", report);
    free(report);
}

/* ---- archives without the ranking ----------------------------------------------------- */

/* Rewrites the counters of run's archive as a kevo without the ranking
 * would (no size_index), and with drop, empties the ranking too. */
static int as_older_kevo(const char *run, int clear_marker, int drop)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/archive.mdb", run);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, sizes;
    int rc = mdb_env_create(&env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs(env, 16);
    if (rc == 0)
        rc = mdb_env_open(env, path, MDB_NOSUBDIR, 0644);
    if (rc == 0)
        rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (rc != 0) {
        fprintf(stderr, "as_older_kevo: %s\n", mdb_strerror(rc));
        mdb_env_close(env);
        return -1;
    }
    rc = mdb_dbi_open(txn, "meta", 0, &meta);
    if (rc == 0)
        rc = mdb_dbi_open(txn, "sizes", 0, &sizes);
    MDB_val key = {8, "counters"}, val;
    if (rc == 0 && clear_marker && (rc = mdb_get(txn, meta, &key, &val)) == 0) {
        kv_counters c;
        kv_err err = {{0}};
        kv_buf b = {0};
        if (kv_decode_counters(val.mv_data, val.mv_size, &c, &err) != 0)
            rc = -1;
        c.size_index = 0;
        if (rc == 0 && kv_encode_counters(&b, &c) == 0) {
            MDB_val nv = {b.len, b.data};
            rc = mdb_put(txn, meta, &key, &nv, 0);
        }
        kv_buf_free(&b);
    }
    if (rc == 0 && drop)
        rc = mdb_drop(txn, sizes, 0);
    if (rc == 0)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    mdb_env_close(env);
    return rc == 0 ? 0 : -1;
}

static void test_older_archives(void)
{
    /* the schema-1 fixture, upgraded: results without a protocol and no ranking */
    char run[4096], src[4200], dst[4200];
    kv_test_fresh_dir(run, sizeof run, "export-legacy");
    snprintf(src, sizeof src, "%s/tests/fixtures/archive-v1/archive.mdb", source_dir);
    snprintf(dst, sizeof dst, "%s/archive.mdb", run);
    char *data = NULL;
    size_t len = 0;
    kv_err err = {{0}};
    KV_REQUIRE(kv_read_file(src, &data, &len, &err) == 0);
    KV_REQUIRE(kv_write_file_atomic(dst, data, len, &err) == 0);
    free(data);
    kv_upgrade_info ui;
    KV_REQUIRE(kv_archive_upgrade(run, &ui, &err) == 0);

    /* read from the programs: the fixture's allreduce programs are correct at 1MiB, the
     * later ones faster (100 / (1 + i) us against 100) */
    bests lazy, indexed;
    KV_REQUIRE(read_bests_ro(run, "allreduce", &lazy) == 0);
    KV_CHECKF(lazy.n == 1 && strcmp(lazy.v[0].size, "1MiB") == 0, "%d", lazy.n);
    KV_CHECK(lazy.n == 1 && lazy.v[0].speedup > 10);
    char *report = NULL;
    KV_CHECK(walk(run, &report) == 0); /* no ranking yet: nothing to check, not damage */
    free(report);

    /* the next writer builds it, and readers then read it */
    kv_archive_opts wo = {0};
    kv_archive *a = NULL;
    KV_REQUIRE(kv_archive_open(run, &wo, &a, &err) == 0);
    kv_archive_close(a);
    KV_REQUIRE(read_bests_ro(run, "allreduce", &indexed) == 0);
    KV_CHECK(same_bests(&lazy, &indexed));
    KV_CHECK(walk(run, &report) == 0);
    KV_CHECKF(report[0] == 0, "%s", report);
    free(report);

    /* an archive an older kevo wrote last (its counters rewritten without the mark) and
     * whose ranking that kevo left behind (here: emptied) */
    char run2[4096];
    kv_test_fresh_dir(run2, sizeof run2, "export-stale");
    KV_REQUIRE(kv_archive_open(run2, &(kv_archive_opts){.create = 1}, &a, &err) == 0);
    uint64_t A, B;
    made_up ma = {KV_VERDICT_OK, KV_STAGE_FULL, {2.0, 1.0, 1.0, 1.0}};
    made_up mb = {KV_VERDICT_OK, KV_STAGE_FULL, {1.0, 2.0, 2.0, 2.0}};
    KV_REQUIRE(store(a, "allreduce", src_of(0), &ma, &A) == 0);
    KV_REQUIRE(store(a, "allreduce", src_of(1), &mb, &B) == 0);
    bests want;
    KV_REQUIRE(read_bests(a, "allreduce", &want) == 0);
    kv_archive_close(a);
    KV_REQUIRE(as_older_kevo(run2, 1, 1) == 0);
    bests got;
    KV_REQUIRE(read_bests_ro(run2, "allreduce", &got) == 0);
    KV_CHECK(same_bests(&want, &got)); /* from the programs */
    KV_CHECK(walk(run2, &report) == 0);
    free(report);
    KV_REQUIRE(kv_archive_open(run2, &wo, &a, &err) == 0); /* rebuilt */
    kv_archive_close(a);
    KV_REQUIRE(read_bests_ro(run2, "allreduce", &got) == 0);
    KV_CHECK(same_bests(&want, &got));
    KV_CHECK(walk(run2, &report) == 0);
    free(report);

    /* a ranking that says it is complete and is not: the full walk names each entry */
    KV_REQUIRE(as_older_kevo(run2, 0, 1) == 0);
    KV_CHECK(walk(run2, &report) == -1);
    KV_CHECK_STR_CONTAINS(report, "damaged: sizes allreduce/64KiB program 1: missing");
    KV_CHECK_STR_CONTAINS(report, "damaged: sizes allreduce/1MiB program 2: missing");
    free(report);
}

/* ---- the command line ------------------------------------------------------------------ */

typedef struct {
    int status;
    char *out, *err;
} result;

static char scratch[4096];

static void run_argv(result *r, const char *const *argv)
{
    char out[4200], err[4200];
    snprintf(out, sizeof out, "%s/stdout", scratch);
    snprintf(err, sizeof err, "%s/stderr", scratch);
    r->status = kv_test_spawn(argv, out, err, 600);
    r->out = kv_test_slurp(out, NULL);
    r->err = kv_test_slurp(err, NULL);
}

static void kevo(result *r, const char *first, ...)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = bin;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s && n < 31; s = va_arg(ap, const char *))
        argv[n++] = s;
    va_end(ap);
    argv[n] = NULL;
    run_argv(r, argv);
}

static void result_free(result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

#define CHECK_STATUS(r, want)                                                               \
    KV_CHECKF((r).status == (want), "exit %d, want %d; stdout: %s; stderr: %s", (r).status, \
              (want), (r).out, (r).err)

/* Two made-up programs that define the same kernel and helper with external
 * linkage: linked into one library without care, they would clash (or one
 * would run the other's kernel). The second has no kevo_init: it is optional. */
static const char clash_a[] =
    "// clash_a.cu: a made-up program of test_export\n"
    "#include \"kevo/kernel.h\"\n"
    "__global__ void kevo_test_fill(float *p, float v) { if (p) p[threadIdx.x] = v; }\n"
    "int kevo_test_helper(void) { return 1; }\n"
    "extern \"C\" int kevo_init(kevo_ctx *ctx) { (void)ctx; return 0; }\n"
    "extern \"C\" int kevo_run(kevo_ctx *ctx)\n"
    "{\n"
    "    kevo_test_fill<<<1, 32, 0, ctx->stream>>>(nullptr, 1.0f);\n"
    "    return kevo_test_helper() - 1;\n"
    "}\n"
    "extern \"C\" void kevo_fini(kevo_ctx *ctx) { (void)ctx; }\n";
static const char clash_b[] =
    "// clash_b.cu: a made-up program of test_export\n"
    "#include \"kevo/kernel.h\"\n"
    "__global__ void kevo_test_fill(float *p, float v) { if (p) p[threadIdx.x] = 2 * v; }\n"
    "int kevo_test_helper(void) { return 2; }\n"
    "extern \"C\" int kevo_run(kevo_ctx *ctx)\n"
    "{\n"
    "    kevo_test_fill<<<1, 64, 0, ctx->stream>>>(nullptr, 2.0f);\n"
    "    return kevo_test_helper() - 2;\n"
    "}\n";

static char export_run[4096];
static uint64_t id_ll, id_oneshot, id_clash_a, id_clash_b, id_twoshot, id_ce, id_tma;

static char *read_seed(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/patterns/allreduce/%s", source_dir, name);
    return kv_test_slurp(path, NULL);
}

/* The allreduce seeds and the two made-up programs, each winning one size. */
static int make_export_archive(void)
{
    kv_test_fresh_dir(export_run, sizeof export_run, "export-run");
    kv_archive *a = NULL;
    kv_err err = {{0}};
    if (kv_archive_open(export_run, &(kv_archive_opts){.create = 1}, &a, &err) != 0)
        return -1;
    char *ll = read_seed("ll_sm.cu"), *one = read_seed("oneshot_sm.cu");
    char *two = read_seed("twoshot_sm.cu"), *ce = read_seed("ce_pipelined.cu");
    char *tma = read_seed("twoshot_tma.cu");
    made_up m_ll = {KV_VERDICT_OK, KV_STAGE_SEED, {3.0, 1.0, 0.5, 0.4}};
    made_up m_one = {KV_VERDICT_OK, KV_STAGE_SEED, {2.0, 2.5, 1.0, 0.6}};
    made_up m_a = {KV_VERDICT_OK, KV_STAGE_FULL, {1.0, 1.0, 1.8, 1.0}};
    made_up m_b = {KV_VERDICT_OK, KV_STAGE_FULL, {0.5, 0.5, 1.0, 1.4}};
    made_up m_two = {KV_VERDICT_OK, KV_STAGE_SEED, {1.0, 1.0, 1.0, 1.0}};
    made_up m_ce = {KV_VERDICT_OK, KV_STAGE_SCREEN, {9, 9, 9, 9}};
    made_up m_tma = {KV_VERDICT_MISMATCH, KV_STAGE_SEED, {9, 9, 9, 9}};
    int rc = ll[0] && one[0] && two[0] && ce[0] && tma[0] ? 0 : -1;
    if (rc == 0)
        rc = store(a, "allreduce", ll, &m_ll, &id_ll) ||
             store(a, "allreduce", one, &m_one, &id_oneshot) ||
             store(a, "allreduce", clash_a, &m_a, &id_clash_a) ||
             store(a, "allreduce", clash_b, &m_b, &id_clash_b) ||
             store(a, "allreduce", two, &m_two, &id_twoshot) ||
             store(a, "allreduce", ce, &m_ce, &id_ce) ||
             store(a, "allreduce", tma, &m_tma, &id_tma);
    /* a problem whose only correct results are screening runs */
    uint64_t id;
    if (rc == 0)
        rc = store(a, "allgather", src_of(6), &m_ce, &id);
    free(ll);
    free(one);
    free(two);
    free(ce);
    free(tma);
    kv_archive_close(a);
    return rc;
}

static void test_cli_per_size(void)
{
    result r;
    kevo(&r, "archive", "--run", export_run, "best", "allreduce", "--per-size", NULL);
    CHECK_STATUS(r, 0);
    char line[256];
    snprintf(line, sizeof line,
             "#%" PRIu64 "     3.00x          3.333         10.000 unknown  sm/fused", id_ll);
    KV_CHECK_STR_CONTAINS(r.out, line);
    KV_CHECK_STR_CONTAINS(r.out, "full protocol");
    /* in the problem's order of sizes */
    const char *p64 = strstr(r.out, "64KiB"), *p1 = strstr(r.out, "1MiB"),
               *p16 = strstr(r.out, "16MiB"), *p256 = strstr(r.out, "256MiB");
    KV_CHECK(p64 && p1 && p16 && p256 && p64 < p1 && p1 < p16 && p16 < p256);
    result_free(&r);

    kevo(&r, "archive", "best", "--per-size", "--problem", "allreduce", "--run", export_run,
         "--json", NULL);
    CHECK_STATUS(r, 0);
    cJSON *j = cJSON_Parse(r.out);
    cJSON *sizes = cJSON_GetObjectItem(j, "sizes");
    KV_CHECK(cJSON_GetArraySize(sizes) == 4);
    cJSON *first = cJSON_GetArrayItem(sizes, 0);
    KV_CHECK(first && strcmp(cJSON_GetObjectItem(first, "size")->valuestring, "64KiB") == 0 &&
             (uint64_t)cJSON_GetObjectItem(first, "program")->valuedouble == id_ll &&
             cJSON_GetObjectItem(first, "speedup")->valuedouble == 3.0 &&
             cJSON_GetObjectItem(first, "reference_us")->valuedouble == 10.0 &&
             strcmp(cJSON_GetObjectItem(first, "timing")->valuestring, "unknown") == 0);
    cJSON *last = cJSON_GetArrayItem(sizes, 3);
    KV_CHECK(last && (uint64_t)cJSON_GetObjectItem(last, "program")->valuedouble == id_clash_b);
    cJSON_Delete(j);
    result_free(&r);

    kevo(&r, "archive", "--run", export_run, "best", "allgather", "--per-size", NULL);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "no correct program measured with the full protocol");
    result_free(&r);

    kevo(&r, "archive", "--run", export_run, "best", "allreduce", "--per-size", "--cell",
         "sm/fused", NULL);
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "--per-size lists sizes");
    result_free(&r);

    kevo(&r, "archive", "--run", export_run, "best", "allreduce", "--json", NULL);
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "archive", "--run", export_run, "best", "allreduce", "--problem", "allgather", NULL);
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "two problems");
    result_free(&r);

    kevo(&r, "archive", "--run", export_run, "best", NULL);
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "missing PROBLEM");
    result_free(&r);
}

/* ---- kevo export ------------------------------------------------------------------------ */

static char out_dir[4300];

static void file_in(char *path, size_t cap, const char *name)
{
    int n = snprintf(path, cap, "%s/%s", out_dir, name);
    KV_CHECKF(n >= 0 && (size_t)n < cap, "%s/%s: path too long", out_dir, name);
}

static void test_export_refusals(void)
{
    result r;
    char dir[4096], busy[4200];
    kv_test_fresh_dir(dir, sizeof dir, "export-refused");
    snprintf(busy, sizeof busy, "%s/busy", dir);

    kevo(&r, "export", "--run", export_run, "--problem", "allgather", "--out", busy, NULL);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "problem 'allgather' has no correct program measured with the "
                                 "full protocol");
    KV_CHECK_STR_CONTAINS(r.err, "1 program");
    KV_CHECK_STR_CONTAINS(r.err, "kevo seed --problem allgather");
    KV_CHECK(!exists(busy));
    result_free(&r);

    kevo(&r, "export", "--run", export_run, "--problem", "allreduc", "--out", busy, NULL);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "did you mean 'allreduce'");
    result_free(&r);

    KV_REQUIRE(mkdir(busy, 0755) == 0);
    char f[4300];
    snprintf(f, sizeof f, "%s/keep", busy);
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(f, "x", 1, &err) == 0);
    kevo(&r, "export", "--run", export_run, "--problem", "allreduce", "--out", busy, NULL);
    CHECK_STATUS(r, 1);
    KV_CHECK_STR_CONTAINS(r.err, "exists and is not empty");
    result_free(&r);

    kevo(&r, "export", "--run", export_run, "--problem", "allreduce", NULL);
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "missing --out");
    result_free(&r);

    kevo(&r, "export", "--run", export_run, "--out", busy, NULL);
    CHECK_STATUS(r, 2);
    KV_CHECK_STR_CONTAINS(r.err, "missing --problem");
    result_free(&r);

    kevo(&r, "export", "--run", export_run, "--problem", "allreduce", "--out", busy, "--world", "9",
         NULL);
    CHECK_STATUS(r, 2);
    result_free(&r);

    kevo(&r, "--help", NULL);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "export");
    result_free(&r);
}

static void test_export_files(void)
{
    char dir[4096];
    kv_test_fresh_dir(dir, sizeof dir, "export-out");
    snprintf(out_dir, sizeof out_dir, "%s/libs/allreduce-lib", dir); /* its parent is made too */
    result r;
    kevo(&r, "export", "--run", export_run, "--problem", "allreduce", "--out", out_dir, NULL);
    CHECK_STATUS(r, 0);
    KV_CHECK_STR_CONTAINS(r.out, "4 measured sizes, 4 programs (W=2)");
    KV_CHECK_STR_CONTAINS(r.out, "[262144, 4194304)");
    result_free(&r);

    static const char *const files[] = {"README.md",
                                        "CMakeLists.txt",
                                        "include/kevo_export_allreduce.h",
                                        "include/kevo_export_allreduce_table.h",
                                        "include/kevo/kernel.h",
                                        "include/kevo_sync.cuh",
                                        "src/kevo_export_allreduce.cu",
                                        "src/kevo_export_allreduce_harness.cu"};
    char path[4300];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        file_in(path, sizeof path, files[i]);
        KV_CHECKF(exists(path), "%s", path);
    }
    /* one source per chosen program, as stored after a comment; none of the others */
    uint64_t chosen[] = {id_ll, id_oneshot, id_clash_a, id_clash_b};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "programs/p%" PRIu64 ".cu", chosen[i]);
        file_in(path, sizeof path, name);
        char *text = kv_test_slurp(path, NULL);
        KV_CHECKF(strstr(text, "// kevo program #") == text, "%s", path);
        if (chosen[i] == id_clash_b)
            KV_CHECK(strlen(text) > sizeof clash_b &&
                     strcmp(text + strlen(text) - (sizeof clash_b - 1), clash_b) == 0);
        free(text);
    }
    uint64_t not_chosen[] = {id_twoshot, id_ce, id_tma};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "programs/p%" PRIu64 ".cu", not_chosen[i]);
        file_in(path, sizeof path, name);
        KV_CHECKF(!exists(path), "%s", path);
    }
    file_in(path, sizeof path, "README.md");
    char *readme = kv_test_slurp(path, NULL);
    char row[256];
    snprintf(row, sizeof row,
             "| 64KiB | 65536 | [0, 262144) | #%" PRIu64 " (`programs/p%" PRIu64
             ".cu`) | 3.00x | 3.333 | 10.000 | sm/fused |",
             id_ll, id_ll);
    KV_CHECK_STR_CONTAINS(readme, row);
    snprintf(row, sizeof row, "| 256MiB | 268435456 | [67108864, no limit) | #%" PRIu64,
             id_clash_b);
    KV_CHECK_STR_CONTAINS(readme, row);
    KV_CHECK_STR_CONTAINS(readme, "geometric");
    free(readme);
    file_in(path, sizeof path, "CMakeLists.txt");
    char *cmake = kv_test_slurp(path, NULL);
    KV_CHECK_STR_CONTAINS(cmake, "-Dkevo_run=${name}_run");
    KV_CHECK_STR_CONTAINS(cmake, "--force-group-allocation");
    char call[64];
    snprintf(call, sizeof call, "kevo_export_program(%" PRIu64 ")", id_clash_a);
    KV_CHECK_STR_CONTAINS(cmake, call);
    free(cmake);
    /* written whole: no folder of an unfinished export is left beside it */
    char left[4400];
    snprintf(left, sizeof left, "ls -d %s.kevo-export-* >/dev/null 2>&1", out_dir);
    KV_CHECK(system(left) != 0);
}

/* The dispatcher's choice: the table header, compiled with the C compiler. */
static void test_export_choice(void)
{
    const char *cc = getenv("KEVO_CC");
    if (!cc || !*cc)
        cc = "cc";
    char dir[4096], csrc[4200], exe[4200], inc[4400];
    kv_test_fresh_dir(dir, sizeof dir, "export-choice");
    snprintf(csrc, sizeof csrc, "%s/choice.c", dir);
    snprintf(exe, sizeof exe, "%s/choice", dir);
    snprintf(inc, sizeof inc, "-I%s/include", out_dir);
    static const char prog[] =
        "#include <inttypes.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        "#include \"kevo_export_allreduce_table.h\"\n"
        "int main(int argc, char **argv)\n{\n"
        "    for (int i = 1; i < argc; i++)\n"
        "        printf(\"%\" PRIu64 \"\\n\", kevo_export_allreduce_rows[\n"
        "            kevo_export_allreduce_row_for(strtoull(argv[i], NULL, 10))].program);\n"
        "    return 0;\n}\n";
    kv_err err = {{0}};
    KV_REQUIRE(kv_write_file_atomic(csrc, prog, sizeof prog - 1, &err) == 0);
    result r;
    const char *cargv[] = {cc,  "-std=c11", "-Wall", "-Wextra", "-Werror",
                           inc, csrc,       "-o",    exe,       NULL};
    run_argv(&r, cargv);
    CHECK_STATUS(r, 0);
    result_free(&r);
    /* at, between and beyond the measured sizes (65536, 1 MiB, 16 MiB, 256 MiB; the
     * midpoints 256 KiB, 4 MiB, 64 MiB) */
    static const char *const at[] = {
        "0",       "1",        "65536",    "262143",   "262144",    "1048576",      "4194303",
        "4194304", "16777216", "67108863", "67108864", "268435456", "1099511627776"};
    uint64_t want[] = {id_ll,      id_ll,      id_ll,      id_ll,      id_oneshot,
                       id_oneshot, id_oneshot, id_clash_a, id_clash_a, id_clash_a,
                       id_clash_b, id_clash_b, id_clash_b};
    const char *argv[16];
    int n = 0;
    argv[n++] = exe;
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        argv[n++] = at[i];
    argv[n] = NULL;
    run_argv(&r, argv);
    CHECK_STATUS(r, 0);
    const char *p = r.out;
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        char *end;
        uint64_t got = strtoull(p, &end, 10);
        KV_CHECKF(end != p && got == want[i],
                  "a call of %s bytes runs #%" PRIu64 ", want #%" PRIu64, at[i], got, want[i]);
        p = end;
    }
    result_free(&r);
}

/* The whole export built with its CMake file: nvcc on the dispatcher, the
 * harness and the programs (the seeds, and the two made-up programs whose
 * symbols would clash), linked into one shared library. */
static void test_export_builds(void)
{
    const char *nvcc = getenv("KEVO_NVCC"), *cmake = getenv("KEVO_CMAKE");
    if (!nvcc || access(nvcc, X_OK) != 0 || !cmake || access(cmake, X_OK) != 0) {
        printf("skipped: building the export needs nvcc and cmake (KEVO_NVCC, KEVO_CMAKE)\n");
        return;
    }
    char build[4400], nvcc_var[4200], lib[4500], log[4600], entry[4600];
    snprintf(build, sizeof build, "%s/build", out_dir);
    snprintf(nvcc_var, sizeof nvcc_var, "-DCMAKE_CUDA_COMPILER=%s", nvcc);
    result r;
    const char *conf[] = {cmake, "-S", out_dir, "-B", build, nvcc_var, NULL};
    run_argv(&r, conf);
    CHECK_STATUS(r, 0);
    result_free(&r);
    const char *make[] = {cmake, "--build", build, "-j", "2", NULL};
    run_argv(&r, make);
    CHECK_STATUS(r, 0);
    result_free(&r);
    snprintf(lib, sizeof lib, "%s/libkevo_export_allreduce.so", build);
    KV_CHECKF(exists(lib), "%s", lib);
    /* the programs' own symbols stayed local: only entry points are global */
    snprintf(log, sizeof log, "nm -D --defined-only %s | grep -q kevo_test_helper", lib);
    KV_CHECK(system(log) != 0);
    snprintf(entry, sizeof entry,
             "nm -D --defined-only %s | grep -q kevo_allreduce_p%" PRIu64 "_run", lib, id_clash_b);
    KV_CHECK(system(entry) == 0);
    printf("built %s\n", lib);
}

int main(void)
{
    bin = getenv("KEVO_BIN");
    source_dir = getenv("KEVO_SOURCE_DIR");
    if (!bin || !source_dir) {
        fprintf(stderr, "test_export: KEVO_BIN and KEVO_SOURCE_DIR must be set\n");
        return 1;
    }
    kv_test_fresh_dir(scratch, sizeof scratch, "export-scratch");
    KV_RUN(test_ranking);
    KV_RUN(test_timing_modes);
    KV_RUN(test_older_archives);
    if (make_export_archive() != 0) {
        fprintf(stderr, "test_export: could not make the export's archive\n");
        return 1;
    }
    KV_RUN(test_cli_per_size);
    KV_RUN(test_export_refusals);
    KV_RUN(test_export_files);
    KV_RUN(test_export_choice);
    KV_RUN(test_export_builds);
    return kv_test_summary();
}
