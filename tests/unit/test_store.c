/* test_store.c — evaluation reports into the archive (search/store.h): the
 * program with its result and evidence, the attempt, elite offers to every
 * island in the measured cell; a rejected report stores its verdict and
 * message and enters no grid; the same source twice is one program; a
 * better report displaces the elite, a worse one does not; a result records
 * the protocol it was measured with (screening or full). The stored
 * evidence decodes to the report's typed summary (evaluator/evaluator.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator/evaluator.h"
#include "search/store.h"
#include "test.h"
#include "test_util.h"

static void report(kv_eval_report *r, kv_verdict v, double speedup, const char *cell)
{
    memset(r, 0, sizeof *r);
    r->verdict = v;
    snprintf(r->message, sizeof r->message, "%s", v == KV_VERDICT_OK ? "" : "y[7] mismatch");
    r->classified = cell != NULL;
    if (cell)
        r->cell = kv_cell_parse(cell);
    r->n_sizes = 2;
    snprintf(r->sizes[0].name, sizeof r->sizes[0].name, "64KiB");
    r->sizes[0].timed = r->sizes[0].ok = 1;
    r->sizes[0].ref.median = 11.0;
    r->sizes[0].cand.median = 11.0 / speedup;
    r->sizes[0].roofline_us = 0.14;
    r->sizes[0].graph_calls = 8; /* graph-timed */
    snprintf(r->sizes[1].name, sizeof r->sizes[1].name, "validation");
    r->sizes[1].validation = r->sizes[1].checked = 1;
    r->sizes[1].ok = v == KV_VERDICT_OK;
    r->speedup = speedup;
    r->roofline = 0.012;
    r->wall_s = 3.5;
}

static void test_store(void)
{
    char dir[256];
    kv_test_fresh_dir(dir, sizeof dir, "store");
    kv_archive_opts ao = {.create = 1};
    kv_archive *a = NULL;
    kv_err err = {{0}};
    KV_REQUIRE(kv_archive_open(dir, &ao, &a, &err) == 0);

    const char *src = "// seed\n__global__ void k() {}\n";
    kv_eval_report r;
    report(&r, KV_VERDICT_OK, 1.5, "sm/fused");
    kv_store_what w = {.problem = "allreduce",
                       .op = "seed",
                       .model = "oneshot_sm",
                       .stage = KV_STAGE_SEED,
                       .island = -1,
                       .n_islands = 3};
    kv_store_outcome o;
    KV_REQUIRE(kv_store_evaluation(a, &w, src, strlen(src), &r, &o, &err) == 0);
    KV_CHECK(o.program_id == 1 && !o.existed && o.elites_taken == 3);

    kv_txn *t;
    KV_REQUIRE(kv_read_begin(a, &t, &err) == 0);
    kv_program p;
    KV_REQUIRE(kv_get_program(t, o.program_id, &p, &err) == 0);
    KV_CHECK(p.verdict == KV_VERDICT_OK && p.speedup == 1.5 && strcmp(p.cell, "sm/fused") == 0);
    KV_CHECK(strcmp(p.op, "seed") == 0 && strcmp(p.model, "oneshot_sm") == 0);
    KV_CHECK(p.n_sizes == 2 && p.sizes[0].ref_us == 11.0 && p.sizes[1].ok == 1);
    KV_CHECK(p.sizes[0].timing == KV_SIZE_TIMING_GRAPH &&
             p.sizes[1].timing == KV_SIZE_TIMING_UNKNOWN);
    KV_CHECK(p.evidence && strstr(p.evidence, "\"verdict\"") != NULL);
    kv_program_clear(&p);
    for (int island = 0; island < 3; island++) {
        kv_elite e;
        KV_CHECK(kv_get_elite(t, "allreduce", island, "sm/fused", &e, &err) == 0 &&
                 e.program_id == 1 && e.fitness == 1.5);
    }
    kv_elite e;
    KV_CHECK(kv_get_elite(t, "allreduce", 3, "sm/fused", &e, &err) == KV_NOTFOUND);
    kv_counters c;
    KV_REQUIRE(kv_get_counters(t, &c, &err) == 0);
    KV_CHECK(c.programs == 1 && c.attempts == 1 && c.elites == 3);
    kv_txn_abort(t);

    /* a rejected seed: stored with its verdict and message, no elite */
    const char *bad = "// wrong\n__global__ void k2() {}\n";
    report(&r, KV_VERDICT_MISMATCH, 0, "tma/fused");
    KV_REQUIRE(kv_store_evaluation(a, &w, bad, strlen(bad), &r, &o, &err) == 0);
    KV_CHECK(o.program_id == 2 && o.elites_taken == 0);
    KV_REQUIRE(kv_read_begin(a, &t, &err) == 0);
    KV_CHECK(kv_get_elite(t, "allreduce", 0, "tma/fused", &e, &err) == KV_NOTFOUND);
    KV_REQUIRE(kv_get_program(t, 2, &p, &err) == 0);
    KV_CHECK(p.verdict == KV_VERDICT_MISMATCH && p.speedup == 0);
    kv_eval_summary sum;
    KV_CHECK(kv_eval_summary_decode(p.evidence, &sum, &err) == 0);
    KV_CHECK(sum.verdict == KV_VERDICT_MISMATCH && strcmp(sum.message, "y[7] mismatch") == 0 &&
             sum.cell == kv_cell_parse("tma/fused") && sum.compile_report == NULL);
    kv_eval_summary_free(&sum);
    kv_program_clear(&p);
    KV_REQUIRE(kv_get_counters(t, &c, &err) == 0);
    KV_CHECK(c.attempts == 2 && c.attempts_by_verdict[KV_VERDICT_MISMATCH] == 1);
    kv_txn_abort(t);

    /* the same source again, better: one program, the elite keeps it (same id) with
     * the new fitness; a worse third report displaces nothing */
    report(&r, KV_VERDICT_OK, 2.0, "sm/fused");
    KV_REQUIRE(kv_store_evaluation(a, &w, src, strlen(src), &r, &o, &err) == 0);
    KV_CHECK(o.program_id == 1 && o.existed && o.elites_taken == 3);
    report(&r, KV_VERDICT_OK, 1.1, "sm/fused");
    const char *other = "// other\n__global__ void k3() {}\n";
    KV_REQUIRE(kv_store_evaluation(a, &w, other, strlen(other), &r, &o, &err) == 0);
    KV_CHECK(o.program_id == 3 && o.elites_taken == 0);
    KV_REQUIRE(kv_read_begin(a, &t, &err) == 0);
    KV_CHECK(kv_get_elite(t, "allreduce", 1, "sm/fused", &e, &err) == 0 && e.program_id == 1 &&
             e.fitness == 2.0);
    KV_REQUIRE(kv_get_program(t, 1, &p, &err) == 0);
    KV_CHECK(p.protocol == KV_PROTOCOL_FULL); /* kevo seed's default: the full protocol */
    kv_program_clear(&p);
    kv_txn_abort(t);

    /* the protocol of each result: screening for the screening stage and for kevo seed
     * --screen, whose times stay out of the best per size */
    kv_store_what screened = w;
    screened.stage = KV_STAGE_SCREEN;
    report(&r, KV_VERDICT_OK, 9.0, "sm/fused");
    KV_REQUIRE(kv_store_evaluation(a, &screened, other, strlen(other), &r, &o, &err) == 0);
    kv_store_what seed_screen = w;
    seed_screen.screen = 1;
    const char *fourth = "// fourth\n__global__ void k4() {}\n";
    KV_REQUIRE(kv_store_evaluation(a, &seed_screen, fourth, strlen(fourth), &r, &o, &err) == 0);
    KV_REQUIRE(kv_read_begin(a, &t, &err) == 0);
    KV_REQUIRE(kv_get_program(t, 3, &p, &err) == 0);
    KV_CHECK(p.protocol == KV_PROTOCOL_SCREEN);
    kv_program_clear(&p);
    KV_REQUIRE(kv_get_program(t, o.program_id, &p, &err) == 0);
    KV_CHECK(p.protocol == KV_PROTOCOL_SCREEN);
    kv_program_clear(&p);
    kv_txn_abort(t);
    kv_archive_close(a);
}

/* A report's summary, and the same decoded from its evidence text; what
 * is not the evidence's JSON is an error, no evidence an empty summary. */
static void test_summary(void)
{
    kv_err err = {{0}};
    kv_eval_report r;
    report(&r, KV_VERDICT_OK, 1.5, "ce/unfused");
    r.compile.report = strdup("ptxas info    : Used 40 registers");
    KV_REQUIRE(r.compile.report != NULL);
    char *json = kv_eval_report_json(&r);
    KV_REQUIRE(json != NULL);
    kv_eval_summary of, dec;
    KV_REQUIRE(kv_eval_summary_of(&r, &of, &err) == 0);
    KV_REQUIRE(kv_eval_summary_decode(json, &dec, &err) == 0);
    KV_CHECK(of.verdict == KV_VERDICT_OK && dec.verdict == KV_VERDICT_OK);
    KV_CHECK(of.cell == kv_cell_parse("ce/unfused") && dec.cell == of.cell);
    KV_CHECK(of.message[0] == 0 && dec.message[0] == 0);
    KV_CHECK(dec.compile_report && strcmp(dec.compile_report, r.compile.report) == 0 &&
             strcmp(of.compile_report, r.compile.report) == 0);
    kv_eval_summary_free(&of);
    kv_eval_summary_free(&dec);
    free(json);
    kv_eval_report_free(&r);

    report(&r, KV_VERDICT_COMPILE_ERROR, 0, NULL);
    snprintf(r.message, sizeof r.message, "candidate.cu(3): error: expected a \";\"");
    json = kv_eval_report_json(&r);
    KV_REQUIRE(json != NULL);
    KV_REQUIRE(kv_eval_summary_decode(json, &dec, &err) == 0);
    KV_CHECK(dec.verdict == KV_VERDICT_COMPILE_ERROR && dec.cell == -1 &&
             strcmp(dec.message, r.message) == 0 && dec.compile_report == NULL);
    kv_eval_summary_free(&dec);
    free(json);
    kv_eval_report_free(&r);

    KV_CHECK(kv_eval_summary_decode(NULL, &dec, &err) == 0 && dec.cell == -1 &&
             dec.message[0] == 0);
    KV_CHECK(kv_eval_summary_decode("not json", &dec, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "evidence");
    KV_CHECK(kv_eval_summary_decode("{\"verdict\": \"ok\", \"cell\": \"warp/fused\"}", &dec,
                                    &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "warp/fused");
}

int main(void)
{
    test_store();
    test_summary();
    return kv_test_summary();
}
