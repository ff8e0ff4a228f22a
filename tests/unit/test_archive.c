/* test_archive.c — the archive API: programs and dedup, results and ranking,
 * attempts and counters, elites, lineage, state and config, map growth,
 * snapshots seen by readers while the writer works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "archive/archive.h"
#include "test.h"
#include "test_util.h"

static char dir[256];

static kv_archive *open_rw(size_t map)
{
    kv_archive_opts o = {.create = 1, .initial_map_bytes = map};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    if (kv_archive_open(dir, &o, &a, &err) != 0)
        fprintf(stderr, "open: %s\n", err.msg);
    return a;
}

static kv_archive *open_ro(void)
{
    kv_archive_opts o = {.readonly = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    if (kv_archive_open(dir, &o, &a, &err) != 0)
        fprintf(stderr, "open ro: %s\n", err.msg);
    return a;
}

static void program(kv_program *p, const char *problem, uint64_t parent)
{
    memset(p, 0, sizeof *p);
    snprintf(p->problem, sizeof p->problem, "%s", problem);
    snprintf(p->op, sizeof p->op, "template");
    snprintf(p->model, sizeof p->model, "allreduce_sm");
    p->island = 1;
    p->created_ns = 1234;
    if (parent) {
        p->n_parents = 1;
        p->parents[0] = parent;
    }
}

static void test_programs_and_dedup(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive");
    kv_archive *a = open_rw(0);
    KV_REQUIRE(a);
    kv_err err = {{0}};
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    kv_program p;
    program(&p, "allreduce", 0);
    const char *src1 = "__global__ void k() { int x = 1; } // first\n";
    const char *src1b = "__global__   void k() {  int x = 1; }  /* same code */\n\n";
    const char *src2 = "__global__ void k() { int x = 2; }";
    uint64_t id1, id1b, id2, id3;
    int ex1, ex1b, ex2, ex3;
    KV_CHECK(kv_add_program(t, &p, src1, strlen(src1), &id1, &ex1, &err) == 0);
    KV_CHECK(kv_add_program(t, &p, src1b, strlen(src1b), &id1b, &ex1b, &err) == 0);
    program(&p, "allreduce", id1);
    KV_CHECK(kv_add_program(t, &p, src2, strlen(src2), &id2, &ex2, &err) == 0);
    program(&p, "allgather", 0);
    KV_CHECK(kv_add_program(t, &p, src1, strlen(src1), &id3, &ex3, &err) == 0);
    KV_CHECK(id1 == 1 && ex1 == 0);
    KV_CHECK(id1b == id1 && ex1b == 1); /* comments and whitespace do not make a new program */
    KV_CHECK(id2 == 2 && ex2 == 0);
    KV_CHECK(id3 == 3 && ex3 == 0); /* the same source for another problem is another program */
    KV_CHECK(kv_txn_commit(t, &err) == 0);

    kv_txn *r;
    KV_REQUIRE(kv_read_begin(a, &r, &err) == 0);
    kv_program got;
    KV_CHECK(kv_get_program(r, id2, &got, &err) == 0);
    KV_CHECK(strcmp(got.problem, "allreduce") == 0 && got.n_parents == 1 && got.parents[0] == id1);
    KV_CHECK(got.island == 1 && strcmp(got.op, "template") == 0 && got.created_ns == 1234);
    KV_CHECK(got.source_len == strlen(src2) && got.verdict == KV_VERDICT_NONE);
    char *src = NULL;
    size_t len = 0;
    KV_CHECK(kv_get_source(r, got.id, &src, &len, &err) == 0);
    KV_CHECK(src && len == strlen(src2) && strcmp(src, src2) == 0);
    free(src);
    kv_program_clear(&got);
    KV_CHECK(kv_get_program(r, 999, &got, &err) == KV_NOTFOUND);
    kv_counters c;
    KV_CHECK(kv_get_counters(r, &c, &err) == 0);
    KV_CHECK(c.programs == 3 && c.next_program_id == 4);
    kv_problem_stats ps;
    KV_CHECK(kv_get_problem_stats(r, "allreduce", &ps, &err) == 0 && ps.programs == 2);
    KV_CHECK(kv_get_problem_stats(r, "nope", &ps, &err) == KV_NOTFOUND);
    kv_txn_abort(r);
    kv_archive_close(a);
}

static int collect_child(uint64_t id, void *ctx, kv_err *err)
{
    (void)err;
    uint64_t *v = ctx;
    v[++v[0]] = id;
    return 0;
}

static void test_results_ranking_lineage(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive");
    kv_archive *a = open_rw(0);
    KV_REQUIRE(a);
    kv_err err = {{0}};
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    uint64_t ids[6];
    for (int i = 0; i < 6; i++) {
        kv_program p;
        program(&p, "allreduce", i > 0 ? ids[0] : 0);
        char src[64];
        snprintf(src, sizeof src, "int v%d;", i);
        KV_CHECK(kv_add_program(t, &p, src, strlen(src), &ids[i], NULL, &err) == 0);
    }
    double speed[6] = {1.0, 2.5, 0.5, 3.0, 2.5, 0};
    for (int i = 0; i < 6; i++) {
        kv_program p;
        memset(&p, 0, sizeof p);
        p.id = ids[i];
        p.verdict = i == 5 ? KV_VERDICT_MISMATCH : KV_VERDICT_OK;
        p.speedup = speed[i];
        p.n_sizes = 2;
        snprintf(p.sizes[0].name, sizeof p.sizes[0].name, "small");
        p.sizes[0].ref_us = 10;
        p.sizes[0].cand_us = 10 / (speed[i] + 1);
        p.sizes[0].ok = 1;
        snprintf(p.sizes[1].name, sizeof p.sizes[1].name, "large");
        snprintf(p.cell, sizeof p.cell, "sm/fused");
        p.evidence = "{\"sass\":[\"LDG\"]}";
        p.evaluated_ns = 99;
        KV_CHECK(kv_set_result(t, &p, &err) == 0);
    }
    /* a re-measurement lowers program 3's speedup: the ranking follows */
    kv_program p;
    memset(&p, 0, sizeof p);
    p.id = ids[3];
    p.verdict = KV_VERDICT_OK;
    p.speedup = 0.9;
    KV_CHECK(kv_set_result(t, &p, &err) == 0);
    p.id = 12345;
    KV_CHECK(kv_set_result(t, &p, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "no program 12345");
    kv_txn_abort(t); /* the failed write poisoned the transaction: nothing is kept */

    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    kv_counters c;
    KV_CHECK(kv_get_counters(t, &c, &err) == 0 && c.programs == 0);
    for (int i = 0; i < 6; i++) {
        program(&p, "allreduce", i > 0 ? ids[0] : 0);
        char src[64];
        snprintf(src, sizeof src, "int v%d;", i);
        KV_CHECK(kv_add_program(t, &p, src, strlen(src), &ids[i], NULL, &err) == 0);
        memset(&p, 0, sizeof p);
        p.id = ids[i];
        p.verdict = i == 5 ? KV_VERDICT_MISMATCH : KV_VERDICT_OK;
        p.speedup = i == 3 ? 0.9 : speed[i];
        p.evidence = "{\"x\":1}";
        KV_CHECK(kv_set_result(t, &p, &err) == 0);
    }
    KV_CHECK(kv_txn_commit(t, &err) == 0);

    kv_txn *r;
    KV_REQUIRE(kv_read_begin(a, &r, &err) == 0);
    uint64_t top[8];
    double sp[8];
    int n = kv_top_k(r, "allreduce", 8, top, sp, &err);
    KV_CHECK(n == 5); /* the mismatch is not ranked */
    KV_CHECK(n >= 4 && sp[0] == 2.5 && sp[1] == 2.5 && sp[2] == 1.0 && sp[3] == 0.9);
    KV_CHECK(n >= 2 && top[0] == ids[1] && top[1] == ids[4]); /* ties: lower id first */
    KV_CHECK(kv_top_k(r, "allgather", 8, top, sp, &err) == 0);
    KV_CHECK(kv_top_k(r, "allreduce", 1, top, sp, &err) == 1);
    kv_program got;
    KV_CHECK(kv_get_program(r, ids[0], &got, &err) == 0);
    KV_CHECK(got.verdict == KV_VERDICT_OK && got.speedup == 1.0);
    KV_CHECK(got.evidence && strcmp(got.evidence, "{\"x\":1}") == 0);
    kv_program_clear(&got);
    uint64_t kids[16] = {0};
    KV_CHECK(kv_each_child(r, ids[0], collect_child, kids, &err) == 0);
    KV_CHECK(kids[0] == 5 && kids[1] == ids[1] && kids[5] == ids[5]);
    kids[0] = 0;
    KV_CHECK(kv_each_child(r, ids[3], collect_child, kids, &err) == 0 && kids[0] == 0);
    kv_txn_abort(r);
    kv_archive_close(a);
}

static int count_elite(const kv_elite *e, void *ctx, kv_err *err)
{
    (void)e;
    (void)err;
    (*(int *)ctx)++;
    return 0;
}

static void test_elites(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive");
    kv_archive *a = open_rw(0);
    KV_REQUIRE(a);
    kv_err err = {{0}};
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    kv_elite e = {
        .problem = "allreduce", .island = 0, .cell = "sm/fused", .program_id = 1, .fitness = 1.5};
    int acc;
    uint64_t disp;
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == 0 && acc == 1 && disp == 0);
    e.program_id = 2;
    e.fitness = 1.5; /* equal is not better */
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == 0 && acc == 0);
    e.fitness = 1.7;
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == 0 && acc == 1 && disp == 1);
    e.island = 1;
    e.program_id = 3;
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == 0 && acc == 1);
    snprintf(e.cell, sizeof e.cell, "tma/unfused");
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == 0 && acc == 1);
    e.island = -1; /* islands are numbered from 0 */
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "island");
    e.island = 2;
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == 0 && acc == 1);
    snprintf(e.problem, sizeof e.problem, "allreduce2"); /* a prefix-sharing name */
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == 0 && acc == 1);
    e.fitness = 0.0 / 0.0;
    KV_CHECK(kv_offer_elite(t, &e, &acc, &disp, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "NaN");
    KV_CHECK(kv_txn_commit(t, &err) == 0);

    kv_txn *r;
    KV_REQUIRE(kv_read_begin(a, &r, &err) == 0);
    int n = 0;
    KV_CHECK(kv_each_elite(r, "allreduce", -1, count_elite, &n, &err) == 0 && n == 4);
    n = 0;
    KV_CHECK(kv_each_elite(r, "allreduce", 1, count_elite, &n, &err) == 0 && n == 2);
    kv_elite got;
    KV_CHECK(kv_get_elite(r, "allreduce", 0, "sm/fused", &got, &err) == 0);
    KV_CHECK(got.program_id == 2 && got.fitness == 1.7);
    KV_CHECK(kv_get_elite(r, "allreduce", 0, "ce/fused", &got, &err) == KV_NOTFOUND);
    kv_counters c;
    KV_CHECK(kv_get_counters(r, &c, &err) == 0 && c.elites == 5);
    kv_txn_abort(r);

    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    uint64_t removed = 0;
    KV_CHECK(kv_clear_island(t, "allreduce", 1, &removed, &err) == 0 && removed == 2);
    KV_CHECK(kv_txn_commit(t, &err) == 0);
    KV_REQUIRE(kv_read_begin(a, &r, &err) == 0);
    n = 0;
    KV_CHECK(kv_each_elite(r, "allreduce", -1, count_elite, &n, &err) == 0 && n == 2);
    KV_CHECK(kv_get_counters(r, &c, &err) == 0 && c.elites == 3);
    kv_txn_abort(r);
    kv_archive_close(a);
}

static int count_attempt(const kv_attempt *at, void *ctx, kv_err *err)
{
    (void)err;
    uint64_t *v = ctx;
    if (at->seq != v[1] + 1)
        v[2] = 1; /* out of order */
    v[1] = at->seq;
    v[0]++;
    return 0;
}

static void test_attempts_state_config(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive");
    kv_archive *a = open_rw(0);
    KV_REQUIRE(a);
    kv_err err = {{0}};
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    for (int i = 0; i < 10; i++) {
        kv_attempt at = {.time_ns = i,
                         .problem = "allreduce",
                         .island = i % 3,
                         .stage = KV_STAGE_FULL,
                         .verdict = i % 2 ? KV_VERDICT_OK : KV_VERDICT_HANG,
                         .program_id = (uint64_t)i,
                         .tokens_in = 10,
                         .cost_usd = 0.01};
        at.detail = i == 4 ? "deadline 60 s passed" : NULL;
        uint64_t seq;
        KV_CHECK(kv_add_attempt(t, &at, &seq, &err) == 0 && seq == (uint64_t)i + 1);
    }
    kv_run_state s = {.rng = {1, 2, 3, 0xffffffffffffffffull},
                      .evaluations = 10,
                      .wall_s = 1.5,
                      .tokens_in = 100,
                      .cost_usd = 0.1};
    KV_CHECK(kv_put_state(t, &s, &err) == 0);
    KV_CHECK(kv_put_config(t, "{\"world\":2}", &err) == 0);
    KV_CHECK(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);

    a = open_ro();
    KV_REQUIRE(a);
    kv_txn *r;
    KV_REQUIRE(kv_read_begin(a, &r, &err) == 0);
    uint64_t v[3] = {0};
    KV_CHECK(kv_each_attempt(r, 1, count_attempt, v, &err) == 0 && v[0] == 10 && v[2] == 0);
    v[0] = 0;
    v[1] = 6;
    KV_CHECK(kv_each_attempt(r, 7, count_attempt, v, &err) == 0 && v[0] == 4);
    kv_counters c;
    KV_CHECK(kv_get_counters(r, &c, &err) == 0);
    KV_CHECK(c.attempts == 10 && c.attempts_by_verdict[KV_VERDICT_OK] == 5 &&
             c.attempts_by_verdict[KV_VERDICT_HANG] == 5);
    kv_problem_stats ps;
    KV_CHECK(kv_get_problem_stats(r, "allreduce", &ps, &err) == 0 && ps.attempts == 10 &&
             ps.ok == 5);
    kv_run_state got;
    KV_CHECK(kv_get_state(r, &got, &err) == 0);
    KV_CHECK(memcmp(got.rng, s.rng, sizeof s.rng) == 0 && got.evaluations == 10 &&
             got.wall_s == 1.5 && got.cost_usd == 0.1);
    char *json = NULL, hex[KV_SHA256_HEX_LEN];
    KV_CHECK(kv_get_config(r, &json, hex, &err) == 0);
    KV_CHECK(json && strcmp(json, "{\"world\":2}") == 0 && strlen(hex) == 64);
    free(json);
    /* writes are refused on a read-only handle */
    kv_txn *w;
    KV_CHECK(kv_write_begin(a, &w, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "read-only");
    kv_txn_abort(r);
    kv_archive_close(a);
}

/* A tiny initial map forces MDB_MAP_FULL many times inside big transactions:
 * the replay must keep every id the caller was given. */
static void test_map_growth(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive");
    kv_archive *a = open_rw(64 * 1024);
    KV_REQUIRE(a);
    uint64_t before = kv_archive_map_bytes(a);
    kv_err err = {{0}};
    char *src = malloc(8192);
    KV_REQUIRE(src);
    int ok = 1;
    for (int batch = 0; batch < 4 && ok; batch++) {
        kv_txn *t;
        KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
        for (int i = 0; i < 300; i++) {
            int k = batch * 300 + i;
            kv_test_random_source(src, 8192, (uint64_t)k + 1, 1000 + (k * 37) % 7000);
            kv_program p;
            program(&p, "allreduce", 0);
            uint64_t id;
            int existed;
            if (kv_add_program(t, &p, src, strlen(src), &id, &existed, &err) != 0 ||
                id != (uint64_t)k + 1 || existed) {
                fprintf(stderr, "add %d: id %llu: %s\n", k, (unsigned long long)id, err.msg);
                ok = 0;
                break;
            }
            kv_attempt at = {.problem = "allreduce", .program_id = id, .stage = KV_STAGE_PROPOSAL};
            uint64_t seq;
            if (kv_add_attempt(t, &at, &seq, &err) != 0 || seq != (uint64_t)k + 1) {
                ok = 0;
                break;
            }
        }
        if (ok)
            KV_CHECK(kv_txn_commit(t, &err) == 0);
        else
            kv_txn_abort(t);
    }
    KV_CHECK(ok);
    KV_CHECK(kv_archive_map_bytes(a) > before);
    kv_txn *r;
    KV_REQUIRE(kv_read_begin(a, &r, &err) == 0);
    kv_counters c;
    KV_CHECK(kv_get_counters(r, &c, &err) == 0 && c.programs == 1200 && c.attempts == 1200);
    kv_program p;
    KV_CHECK(kv_get_program(r, 777, &p, &err) == 0);
    char *got = NULL;
    KV_CHECK(kv_get_source(r, p.id, &got, NULL, &err) == 0);
    kv_test_random_source(src, 8192, 777, 1000 + (776 * 37) % 7000);
    KV_CHECK(got && strcmp(got, src) == 0);
    free(got);
    kv_program_clear(&p);
    kv_txn_abort(r);
    free(src);
    kv_archive_close(a);
}

/* A reader in another process sees the last committed snapshot while the
 * writer holds an uncommitted transaction, and is not blocked by it. */
static void test_reader_snapshot(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive");
    kv_archive *a = open_rw(0);
    KV_REQUIRE(a);
    kv_err err = {{0}};
    kv_txn *t;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    kv_program p;
    program(&p, "allreduce", 0);
    KV_CHECK(kv_add_program(t, &p, "int a;", 6, NULL, NULL, &err) == 0);
    KV_CHECK(kv_txn_commit(t, &err) == 0);
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    KV_CHECK(kv_add_program(t, &p, "int b;", 6, NULL, NULL, &err) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        kv_archive *ro = open_ro();
        kv_txn *r;
        kv_counters c;
        int code = 3;
        if (ro && kv_read_begin(ro, &r, &err) == 0) {
            code = kv_get_counters(r, &c, &err) == 0 && c.programs == 1 ? 0 : 4;
            kv_txn_abort(r);
        }
        _exit(code);
    }
    int status = 0;
    KV_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    KV_CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader exit %d", WEXITSTATUS(status));
    KV_CHECK(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);
}

/* The writer's dedup index is kept in memory: a program another writer
 * process committed meanwhile is still found, and an aborted transaction's
 * programs are forgotten. */
static void test_dedup_index(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive");
    kv_archive *a = open_rw(0);
    KV_REQUIRE(a);
    kv_err err = {{0}};
    kv_txn *t;
    kv_program p;
    program(&p, "allreduce", 0);
    uint64_t id;
    int existed;
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    KV_CHECK(kv_add_program(t, &p, "int first;", 10, &id, &existed, &err) == 0 && id == 1);
    KV_CHECK(kv_txn_commit(t, &err) == 0);
    /* an aborted insert leaves nothing behind, in LMDB or in the index */
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    KV_CHECK(kv_add_program(t, &p, "int aborted;", 12, &id, &existed, &err) == 0 && id == 2);
    kv_txn_abort(t);
    /* another writer process adds a program while this handle stays open */
    pid_t pid = fork();
    if (pid == 0) {
        kv_archive *b = open_rw(0);
        kv_txn *u;
        uint64_t bid = 0;
        int ok = b && kv_write_begin(b, &u, &err) == 0 &&
                 kv_add_program(u, &p, "int other;", 10, &bid, NULL, &err) == 0 &&
                 kv_txn_commit(u, &err) == 0;
        kv_archive_close(b);
        _exit(ok && bid == 2 ? 0 : 3);
    }
    int status = 0;
    KV_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
             WEXITSTATUS(status) == 0);
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    KV_CHECK(kv_add_program(t, &p, "int other;", 10, &id, &existed, &err) == 0 && id == 2 &&
             existed == 1);
    KV_CHECK(kv_add_program(t, &p, "int aborted;", 12, &id, &existed, &err) == 0 && id == 3 &&
             existed == 0);
    KV_CHECK(kv_add_program(t, &p, "int first;  ", 12, &id, &existed, &err) == 0 && id == 1 &&
             existed == 1);
    KV_CHECK(kv_txn_commit(t, &err) == 0);
    kv_archive_close(a);
    /* a new handle builds the index from the programs database */
    a = open_rw(0);
    KV_REQUIRE(a);
    KV_REQUIRE(kv_write_begin(a, &t, &err) == 0);
    KV_CHECK(kv_add_program(t, &p, "int aborted;", 12, &id, &existed, &err) == 0 && id == 3 &&
             existed == 1);
    kv_txn_abort(t);
    kv_archive_close(a);
}

/* A link planted at a run's archive.mdb or at LMDB's lock file beside it,
 * to an archive elsewhere: a writer refuses it, naming the link, and the
 * archive it points at is not touched. */
static void test_archive_link(void)
{
    char target[600], link[600];
    kv_test_fresh_dir(dir, sizeof dir, "archive-link-target");
    kv_archive *a = open_rw(0);
    KV_REQUIRE(a);
    kv_archive_close(a);
    snprintf(target, sizeof target, "%s/%s", dir, KV_ARCHIVE_FILE);
    struct stat before, after;
    KV_REQUIRE(stat(target, &before) == 0);
    const char *names[] = {KV_ARCHIVE_FILE, KV_ARCHIVE_FILE "-lock"};
    for (int i = 0; i < 2; i++) {
        kv_test_fresh_dir(dir, sizeof dir, "archive-link");
        snprintf(link, sizeof link, "%s/%s", dir, names[i]);
        char to[620];
        snprintf(to, sizeof to, "%s%s", target, i ? "-lock" : "");
        KV_REQUIRE(symlink(to, link) == 0);
        kv_archive_opts o = {.create = 1};
        kv_err err = {{0}};
        a = NULL;
        int rc = kv_archive_open(dir, &o, &a, &err);
        KV_CHECKF(rc != 0 && strstr(err.msg, "is a symbolic link"), "%s: opened (%s)", names[i],
                  err.msg);
        if (rc == 0)
            kv_archive_close(a);
    }
    KV_REQUIRE(stat(target, &after) == 0);
    KV_CHECK(after.st_size == before.st_size && after.st_mtime == before.st_mtime);
}

int main(void)
{
    KV_RUN(test_archive_link);
    KV_RUN(test_programs_and_dedup);
    KV_RUN(test_results_ranking_lineage);
    KV_RUN(test_elites);
    KV_RUN(test_attempts_state_config);
    KV_RUN(test_map_growth);
    KV_RUN(test_reader_snapshot);
    KV_RUN(test_dedup_index);
    return kv_test_summary();
}
