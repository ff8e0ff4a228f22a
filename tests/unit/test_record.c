/* test_record.c — the record encoding: round trips of every record kind,
 * forward compatibility (unknown fields skipped), and rejection of corrupt,
 * truncated, foreign and mutated bytes without crashing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "archive/codec.h"
#include "test.h"
#include "test_util.h"

static void sample_program(kv_program *p)
{
    memset(p, 0, sizeof *p);
    p->id = 42;
    snprintf(p->problem, sizeof p->problem, "gemm_reducescatter");
    for (int i = 0; i < KV_SHA256_LEN; i++)
        p->source_hash[i] = (uint8_t)(i * 7);
    p->source_len = 4321;
    p->n_parents = 2;
    p->parents[0] = 7;
    p->parents[1] = UINT64_MAX;
    p->island = -3;
    snprintf(p->op, sizeof p->op, "llm");
    snprintf(p->model, sizeof p->model, "some-model");
    p->created_ns = -5;
    p->verdict = KV_VERDICT_OK;
    p->n_sizes = 3;
    for (int i = 0; i < 3; i++) {
        snprintf(p->sizes[i].name, sizeof p->sizes[i].name, "size%d", i);
        p->sizes[i].ref_us = 10.5 * (i + 1);
        p->sizes[i].cand_us = 5.25 * (i + 1);
        p->sizes[i].cand_p10_us = 5.0;
        p->sizes[i].cand_p90_us = 6.0;
        p->sizes[i].roofline_us = 1e-3;
        p->sizes[i].ok = i != 1;
        p->sizes[i].timing = (kv_size_timing)i; /* unknown (not written), graph, call */
    }
    p->speedup = 2.0;
    p->roofline = 0.83;
    snprintf(p->cell, sizeof p->cell, "tma/fused");
    p->evidence = strdup("{\"sass\":[\"UBLKCP\"]}");
    p->evaluated_ns = INT64_MAX;
}

static void test_program_round_trip(void)
{
    kv_program p, q;
    sample_program(&p);
    kv_buf b = {0};
    KV_REQUIRE(kv_encode_program(&b, &p) == 0);
    kv_err err = {{0}};
    KV_REQUIRE(kv_decode_program(b.data, b.len, &q, &err) == 0);
    KV_CHECK(q.id == 42 && strcmp(q.problem, p.problem) == 0);
    KV_CHECK(memcmp(q.source_hash, p.source_hash, KV_SHA256_LEN) == 0 && q.source_len == 4321);
    KV_CHECK(q.n_parents == 2 && q.parents[1] == UINT64_MAX && q.island == -3);
    KV_CHECK(strcmp(q.op, "llm") == 0 && strcmp(q.model, "some-model") == 0);
    KV_CHECK(q.created_ns == -5 && q.evaluated_ns == INT64_MAX && q.verdict == KV_VERDICT_OK);
    KV_CHECK(q.n_sizes == 3 && q.sizes[2].ref_us == 31.5 && q.sizes[1].ok == 0 &&
             q.sizes[2].ok == 1 && strcmp(q.sizes[2].name, "size2") == 0);
    KV_CHECK(q.sizes[0].timing == KV_SIZE_TIMING_UNKNOWN &&
             q.sizes[1].timing == KV_SIZE_TIMING_GRAPH && q.sizes[2].timing == KV_SIZE_TIMING_CALL);
    KV_CHECK(q.speedup == 2.0 && q.roofline == 0.83 && strcmp(q.cell, "tma/fused") == 0);
    KV_CHECK(q.evidence && strcmp(q.evidence, p.evidence) == 0);
    kv_program_clear(&q);
    kv_program_clear(&p);
    kv_buf_free(&b);
}

static void test_other_round_trips(void)
{
    kv_err err = {{0}};
    kv_buf b = {0};
    kv_attempt a = {.seq = 9,
                    .time_ns = 123,
                    .problem = "allreduce",
                    .island = 2,
                    .stage = KV_STAGE_REMEASURE,
                    .verdict = KV_VERDICT_HANG,
                    .program_id = 5,
                    .parent_id = 4,
                    .op = "template",
                    .model = "m",
                    .speedup = 1.25,
                    .wall_s = 0.5,
                    .gpu_s = 0.25,
                    .tokens_in = 1000,
                    .tokens_out = 2000,
                    .cost_usd = 0.003,
                    .detail = "deadline of 60 s passed\nline 2"};
    kv_attempt a2;
    KV_REQUIRE(kv_encode_attempt(&b, &a) == 0);
    KV_REQUIRE(kv_decode_attempt(b.data, b.len, &a2, &err) == 0);
    KV_CHECK(a2.seq == 9 && a2.time_ns == 123 && a2.island == 2 && a2.stage == KV_STAGE_REMEASURE);
    KV_CHECK(a2.verdict == KV_VERDICT_HANG && a2.program_id == 5 && a2.parent_id == 4);
    KV_CHECK(a2.tokens_out == 2000 && a2.cost_usd == 0.003 && strcmp(a2.detail, a.detail) == 0);
    kv_attempt_clear(&a2);

    kv_buf_reset(&b);
    kv_elite e = {.problem = "alltoall",
                  .island = -1,
                  .cell = "ce/unfused",
                  .program_id = 77,
                  .fitness = 3.5,
                  .since_ns = 1};
    kv_elite e2;
    KV_REQUIRE(kv_encode_elite(&b, &e) == 0);
    KV_REQUIRE(kv_decode_elite(b.data, b.len, &e2, &err) == 0);
    KV_CHECK(memcmp(&e, &e2, sizeof e) == 0);

    kv_buf_reset(&b);
    kv_counters c = {
        .next_program_id = 11, .programs = 10, .next_attempt_seq = 21, .attempts = 20, .elites = 3};
    for (int i = 0; i < KV_VERDICT_COUNT; i++)
        c.attempts_by_verdict[i] = (uint64_t)i * 1000000007ull;
    kv_counters c2;
    KV_REQUIRE(kv_encode_counters(&b, &c) == 0);
    KV_REQUIRE(kv_decode_counters(b.data, b.len, &c2, &err) == 0);
    KV_CHECK(memcmp(&c, &c2, sizeof c) == 0);

    kv_buf_reset(&b);
    kv_run_state s = {.rng = {1, UINT64_MAX, 0, 42},
                      .evaluations = 5,
                      .wall_s = 3600.5,
                      .tokens_in = 1,
                      .tokens_out = 2,
                      .cost_usd = 9.75,
                      .updated_ns = 77};
    kv_run_state s2;
    KV_REQUIRE(kv_encode_state(&b, &s) == 0);
    KV_REQUIRE(kv_decode_state(b.data, b.len, &s2, &err) == 0);
    KV_CHECK(memcmp(&s, &s2, sizeof s) == 0);

    kv_buf_reset(&b);
    kv_problem_stats q = {.problem = "halo_conv1d", .programs = 3, .attempts = 9, .ok = 2}, q2;
    KV_REQUIRE(kv_encode_problem(&b, &q) == 0);
    KV_REQUIRE(kv_decode_problem(b.data, b.len, &q2, &err) == 0);
    KV_CHECK(memcmp(&q, &q2, sizeof q) == 0);
    kv_buf_free(&b);
}

/* A record written by a later kevo with fields this one does not know. */
static void test_unknown_fields_are_skipped(void)
{
    kv_buf b = {0};
    kv_rec_begin(&b, KV_REC_ELITE);
    kv_rec_str(&b, 1, "allreduce");
    kv_rec_u64(&b, 99, 12345);            /* unknown varint */
    kv_rec_f64(&b, 100, 1.5);             /* unknown double */
    kv_rec_bytes(&b, 101, "\x01\x02", 2); /* unknown bytes */
    kv_rec_u64(&b, 4, 8);
    KV_REQUIRE(kv_rec_end(&b, 0) == 0);
    kv_elite e;
    kv_err err = {{0}};
    KV_CHECK(kv_decode_elite(b.data, b.len, &e, &err) == 0);
    KV_CHECK(strcmp(e.problem, "allreduce") == 0 && e.program_id == 8);
    kv_buf_free(&b);
}

static void test_rejections(void)
{
    kv_program p, q;
    sample_program(&p);
    kv_buf b = {0};
    KV_REQUIRE(kv_encode_program(&b, &p) == 0);
    kv_program_clear(&p);
    kv_err err = {{0}};

    uint8_t *copy = malloc(b.len);
    KV_REQUIRE(copy);
    memcpy(copy, b.data, b.len);
    copy[b.len / 2] ^= 0x40;
    KV_CHECK(kv_decode_program(copy, b.len, &q, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "checksum");

    memcpy(copy, b.data, b.len);
    copy[2] = 9;
    KV_CHECK(kv_decode_program(copy, b.len, &q, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "version 9");

    KV_CHECK(kv_decode_elite(b.data, b.len, (kv_elite *)&q, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "kind");

    KV_CHECK(kv_decode_program(b.data, b.len - 1, &q, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "length");
    KV_CHECK(kv_decode_program("hello", 5, &q, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "not a kevo record");

    /* a field of the wrong type, with a valid checksum */
    kv_buf w = {0};
    kv_rec_begin(&w, KV_REC_PROGRAM);
    kv_rec_f64(&w, 1, 3.0); /* id as a double */
    KV_REQUIRE(kv_rec_end(&w, 0) == 0);
    KV_CHECK(kv_decode_program(w.data, w.len, &q, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "program.id");
    kv_buf_free(&w);

    /* too many sizes */
    kv_rec_begin(&w, KV_REC_PROGRAM);
    for (int i = 0; i < KV_MAX_SIZES + 1; i++)
        kv_rec_bytes(&w, 10, "", 0);
    KV_REQUIRE(kv_rec_end(&w, 0) == 0);
    KV_CHECK(kv_decode_program(w.data, w.len, &q, &err) == -1);
    kv_buf_free(&w);

    /* a string longer than its field */
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    kv_rec_begin(&w, KV_REC_PROGRAM);
    kv_rec_str(&w, 2, longname);
    KV_REQUIRE(kv_rec_end(&w, 0) == 0);
    KV_CHECK(kv_decode_program(w.data, w.len, &q, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "program.problem");
    kv_buf_free(&w);

    /* random mutations of the payload, with the checksum fixed up so the
     * field parser sees them: never a crash, never a leak */
    uint64_t st = 1;
    int decoded = 0, rejected = 0;
    for (int i = 0; i < 20000; i++) {
        memcpy(copy, b.data, b.len);
        size_t n = b.len;
        int flips = 1 + (int)(kv_test_rand(&st) % 4);
        for (int k = 0; k < flips; k++)
            copy[KV_RECORD_HEADER + kv_test_rand(&st) % (n - KV_RECORD_HEADER)] =
                (uint8_t)kv_test_rand(&st);
        if (kv_test_rand(&st) % 3 == 0)
            n = KV_RECORD_HEADER + kv_test_rand(&st) % (n - KV_RECORD_HEADER);
        uint32_t len = (uint32_t)(n - KV_RECORD_HEADER);
        uint32_t crc = kv_crc32(copy + KV_RECORD_HEADER, len);
        for (int k = 0; k < 4; k++) {
            copy[4 + k] = (uint8_t)(len >> (8 * k));
            copy[8 + k] = (uint8_t)(crc >> (8 * k));
        }
        if (kv_decode_program(copy, n, &q, &err) == 0) {
            decoded++;
            kv_program_clear(&q);
        } else {
            rejected++;
        }
    }
    KV_CHECK(decoded > 0 && rejected > 0);
    free(copy);
    kv_buf_free(&b);
}

static void test_crc32_vector(void)
{
    KV_CHECK(kv_crc32("123456789", 9) == 0xCBF43926u);
    KV_CHECK(kv_crc32("", 0) == 0);
}

int main(void)
{
    KV_RUN(test_program_round_trip);
    KV_RUN(test_other_round_trips);
    KV_RUN(test_unknown_fields_are_skipped);
    KV_RUN(test_rejections);
    KV_RUN(test_crc32_vector);
    return kv_test_summary();
}
