/* test_protocol.c — protocol/wire.c and codec.c: job and result messages round
 * trip field by field, the small messages, strict decoding (errors name the
 * member), every message kevo-worker sends or reads through the calls it
 * makes (each member missing, mistyped, oversize, or beside an unknown
 * one), kv_job_result_merge, the line reader (split reads, long lines, EOF)
 * and kv_proto_send (no SIGPIPE, bounded waits). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "protocol/protocol.h"
#include "common/clock.h"
#include "common/json.h"
#include "test.h"
#include "test_util.h"

static char tmp_dir[PATH_MAX];

/* Equal as the protocol sees doubles: bit for bit, or both NaN. */
static int same_d(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static int same_timing(const kv_timing *a, const kv_timing *b)
{
    return same_d(a->median, b->median) && same_d(a->p10, b->p10) && same_d(a->p90, b->p90) &&
           same_d(a->mean, b->mean) && same_d(a->cv, b->cv) && a->n == b->n;
}

static int same_job(const kv_job *a, const kv_job *b)
{
    if (a->id != b->id || strcmp(a->problem_dir, b->problem_dir) ||
        strcmp(a->reference_so, b->reference_so) || strcmp(a->candidate_so, b->candidate_so) ||
        strcmp(a->inputs_so, b->inputs_so) || strcmp(a->dump_dir, b->dump_dir) ||
        a->n_sizes != b->n_sizes || a->trials != b->trials || a->warmup != b->warmup ||
        a->warmup_ms != b->warmup_ms || a->iters != b->iters ||
        a->time_sizes_mask != b->time_sizes_mask || a->seed != b->seed ||
        a->capture != b->capture || a->graph_timing != b->graph_timing ||
        a->selfcheck != b->selfcheck || a->scratch_bytes != b->scratch_bytes)
        return 0;
    for (int i = 0; i < a->n_sizes; i++)
        if (strcmp(a->sizes[i], b->sizes[i]))
            return 0;
    return 1;
}

static int same_result(const kv_job_result *a, const kv_job_result *b)
{
    if (a->verdict != b->verdict || strcmp(a->message, b->message) || a->origin != b->origin ||
        a->n_sizes != b->n_sizes || a->graph_captured != b->graph_captured ||
        a->kernel_nodes != b->kernel_nodes || a->memcpy_nodes != b->memcpy_nodes ||
        a->memset_nodes != b->memset_nodes || a->other_nodes != b->other_nodes ||
        a->peer_copy_bytes != b->peer_copy_bytes || strcmp(a->graph_json, b->graph_json) ||
        !same_d(a->wall_s, b->wall_s) || !same_d(a->gpu_s, b->gpu_s))
        return 0;
    for (int i = 0; i < a->n_sizes; i++) {
        const kv_size_outcome *x = &a->sizes[i], *y = &b->sizes[i];
        if (strcmp(x->name, y->name) || x->checked != y->checked || x->ok != y->ok ||
            x->timed != y->timed || !same_timing(&x->ref, &y->ref) ||
            !same_timing(&x->cand, &y->cand) || x->bad_rank != y->bad_rank ||
            strcmp(x->bad_tensor, y->bad_tensor) || x->bad_index != y->bad_index ||
            !same_d(x->expected, y->expected) || !same_d(x->got, y->got) ||
            !same_d(x->max_abs_err, y->max_abs_err) || !same_d(x->max_rel_err, y->max_rel_err) ||
            x->bad_count != y->bad_count || strcmp(x->detail, y->detail) ||
            x->graph_calls != y->graph_calls || strcmp(x->timing_note, y->timing_note) ||
            x->ref_plain != y->ref_plain)
            return 0;
    }
    return 1;
}

static void full_job(kv_job *j, uint64_t id, uint64_t seed)
{
    memset(j, 0, sizeof *j);
    j->id = id;
    snprintf(j->problem_dir, sizeof j->problem_dir, "/runs/a b/\"quoted\"\\back\nslash/é/\t");
    snprintf(j->reference_so, sizeof j->reference_so, "/cache/ref-%016llx.so",
             (unsigned long long)seed);
    snprintf(j->candidate_so, sizeof j->candidate_so, "/cache/cand.so");
    snprintf(j->inputs_so, sizeof j->inputs_so, "/cache/inputs.so");
    snprintf(j->dump_dir, sizeof j->dump_dir, "/tmp/dump \"here\"");
    j->n_sizes = KV_JOB_MAX_SIZES;
    for (int i = 0; i < KV_JOB_MAX_SIZES; i++)
        snprintf(j->sizes[i], sizeof j->sizes[i], "size-%d-%s", i, i == 3 ? "{\"json\":1}" : "x");
    memset(j->sizes[5], 'z', sizeof j->sizes[5] - 1); /* the longest that fits */
    j->trials = 3;
    j->warmup = 5;
    j->warmup_ms = 12.5;
    j->iters = 100;
    j->time_sizes_mask = 0x7ff;
    j->seed = seed;
    j->capture = 1;
    j->graph_timing = 1;
    j->selfcheck = 1;
    j->scratch_bytes = (size_t)1 << 40;
}

static void full_result(kv_job_result *r, uint64_t salt)
{
    memset(r, 0, sizeof *r);
    r->verdict = KV_VERDICT_MISMATCH;
    snprintf(r->message, sizeof r->message, "size 2: out[7] = 3 \"expected\" 1\nsecond line\\");
    r->origin = salt % 2 == 0;
    r->n_sizes = KV_JOB_MAX_SIZES;
    uint64_t st = salt;
    for (int i = 0; i < KV_JOB_MAX_SIZES; i++) {
        kv_size_outcome *s = &r->sizes[i];
        snprintf(s->name, sizeof s->name, "s%d", i);
        s->checked = 1;
        s->ok = i != 2;
        s->timed = i % 3 != 0;
        kv_timing *t[2] = {&s->ref, &s->cand};
        for (int k = 0; k < 2; k++) {
            t[k]->median = (double)(kv_test_rand(&st) % 100000) / 7.0;
            t[k]->p10 = t[k]->median * 0.9;
            t[k]->p90 = t[k]->median * 1.1 + 1e-9;
            t[k]->mean = t[k]->median + 0.1;
            t[k]->cv = 1.0 / 3.0;
            t[k]->n = 50 + i;
        }
        s->bad_rank = i % 5 - 1; /* -1: no bad rank */
        snprintf(s->bad_tensor, sizeof s->bad_tensor, "out%d", i);
        s->bad_index = i == 4 ? INT64_MAX : i == 5 ? INT64_MIN / 8 : i == 7 ? INT64_MIN : 7 * i;
        s->expected = 1.0 / (i + 1);
        s->got = -3.25e-300;
        s->max_abs_err = 1e300;
        s->max_rel_err = 5e-324; /* the smallest subnormal */
        s->bad_count = i == 6 ? ((int64_t)1 << 53) + 1 : i;
        snprintf(s->detail, sizeof s->detail, "detail %d: unwritten (poison)", i);
        s->graph_calls = i * 37;
        s->ref_plain = i % 2;
        if (i == 3)
            snprintf(s->timing_note, sizeof s->timing_note, "timed per call: \"note\" %d", i);
    }
    r->sizes[1].ref.cv = NAN; /* non-finite: written as null, read as NaN */
    r->graph_captured = 1;
    r->kernel_nodes = 2;
    r->memcpy_nodes = 1;
    r->memset_nodes = 3;
    r->other_nodes = 4;
    r->peer_copy_bytes = 3.5e6;
    snprintf(r->graph_json, sizeof r->graph_json,
             "[{\"kind\":\"kernel\",\"name\":\"allreduce_oneshot<8>\"}]");
    r->wall_s = 1.25;
    r->gpu_s = 0.125;
}

/* ---- round trips ---------------------------------------------------------------------------- */

static void test_job_round_trip(void)
{
    const uint64_t ids[] = {0, 1, (uint64_t)1 << 53, ((uint64_t)1 << 53) + 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        kv_job a, b;
        full_job(&a, ids[i], ids[(i + 3) % 5] ^ 0xFEDCBA9876543210ull);
        if (i == 1) {
            a.candidate_so[0] = '\0'; /* a baseline */
            a.n_sizes = 1;
            a.capture = 0;
        }
        char *line = kv_proto_job_to_json(&a);
        KV_REQUIRE(line);
        KV_CHECK(strchr(line, '\n') == NULL);
        kv_msg_type t;
        KV_CHECK(kv_proto_type(line, &t, NULL) == 0 && t == KV_MSG_JOB);
        kv_err err = {{0}};
        memset(&b, 0x5a, sizeof b);
        KV_CHECKF(kv_proto_job_from_json(line, &b, &err) == 0, "%s", err.msg);
        KV_CHECKF(same_job(&a, &b), "job %zu differs after a round trip: %s", i, line);
        free(line);
    }
}

static void test_result_round_trip(void)
{
    for (int v = 0; v < KV_VERDICT_COUNT; v++) {
        kv_job_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
        KV_REQUIRE(a && b);
        full_result(a, (uint64_t)v);
        a->verdict = (kv_verdict)v;
        if (v == KV_VERDICT_CRASH)
            a->n_sizes = 0;
        char *line = kv_proto_result_to_json(UINT64_MAX - (uint64_t)v, v % 8, a);
        KV_REQUIRE(line);
        KV_CHECK(strchr(line, '\n') == NULL);
        uint64_t id = 0;
        int rank = -1;
        kv_err err = {{0}};
        memset(b, 0x5a, sizeof *b);
        KV_CHECKF(kv_proto_result_from_json(line, &id, &rank, b, &err) == 0, "%s", err.msg);
        KV_CHECK(id == UINT64_MAX - (uint64_t)v && rank == v % 8);
        KV_CHECKF(same_result(a, b), "result (%s) differs after a round trip",
                  kv_verdict_name(a->verdict));
        KV_CHECK(isnan(b->sizes[1].ref.cv) || a->n_sizes == 0);
        free(line);
        free(a);
        free(b);
    }
    /* infinities go out as null and come back as NaN */
    kv_job_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    KV_REQUIRE(a && b);
    a->verdict = KV_VERDICT_OK;
    a->wall_s = INFINITY;
    char *line = kv_proto_result_to_json(1, 0, a);
    KV_CHECK_STR_CONTAINS(line, "\"wall_s\":null");
    uint64_t id;
    int rank;
    KV_CHECK(kv_proto_result_from_json(line, &id, &rank, b, NULL) == 0 && isnan(b->wall_s));
    free(line);
    free(a);
    free(b);
}

static void test_small_messages(void)
{
    kv_proto_msg m, n;
    memset(&m, 0, sizeof m);
    kv_err err = {{0}};
    for (int t = KV_MSG_HELLO; t <= KV_MSG_EXIT; t++) {
        if (t == KV_MSG_JOB || t == KV_MSG_RESULT) {
            m.type = (kv_msg_type)t;
            KV_CHECK(kv_proto_msg_to_json(&m) == NULL); /* they have their own encoders */
            continue;
        }
        memset(&m, 0, sizeof m);
        m.type = (kv_msg_type)t;
        m.rank = 3;
        m.pid = 12345;
        m.device = 7;
        memset(m.uid, 'a', KV_PROTO_UID_HEX);
        m.uid[0] = 'F';
        m.uid[KV_PROTO_UID_HEX - 1] = '9';
        m.job = UINT64_MAX;
        snprintf(m.phase, sizeof m.phase, "timing size \"2\"");
        char *line = kv_proto_msg_to_json(&m);
        KV_REQUIRE(line);
        kv_msg_type got;
        KV_CHECK(kv_proto_type(line, &got, &err) == 0 && got == (kv_msg_type)t);
        KV_CHECKF(kv_proto_msg_from_json(line, &n, &err) == 0, "%s: %s", line, err.msg);
        KV_CHECK(n.type == m.type);
        if (t == KV_MSG_HELLO)
            KV_CHECK(n.rank == 3 && n.pid == 12345 && n.device == 7);
        if (t == KV_MSG_UID || t == KV_MSG_INIT)
            KV_CHECK(strcmp(n.uid, m.uid) == 0);
        if (t == KV_MSG_READY)
            KV_CHECK(n.rank == 3);
        if (t == KV_MSG_PROGRESS)
            KV_CHECK(n.rank == 3 && n.job == UINT64_MAX && strcmp(n.phase, m.phase) == 0);
        if (t == KV_MSG_EXIT)
            KV_CHECK(strcmp(line, "{\"type\":\"exit\"}") == 0);
        free(line);
    }
    KV_CHECK(strcmp(kv_msg_type_name(KV_MSG_PROGRESS), "progress") == 0);
    KV_CHECK(strcmp(kv_msg_type_name((kv_msg_type)99), "unknown") == 0);

    /* a job id as a plain number, as the encoder writes ids up to 2^53 */
    KV_CHECK(
        kv_proto_msg_from_json("{\"type\":\"progress\",\"job\":17,\"rank\":1,\"phase\":\"timing\"}",
                               &n, &err) == 0);
    KV_CHECK(n.job == 17 && n.rank == 1 && strcmp(n.phase, "timing") == 0);
    /* a long phase is cut, not refused */
    char line[512];
    snprintf(line, sizeof line, "{\"type\":\"progress\",\"job\":1,\"rank\":0,\"phase\":\"%0100d\"}",
             0);
    KV_CHECK(kv_proto_msg_from_json(line, &n, &err) == 0 &&
             strlen(n.phase) == KV_PROTO_PHASE_MAX - 1);
}

/* ---- decoding errors ------------------------------------------------------------------------ */

/* A valid job line with one member changed by a cJSON edit. */
static char *edited_job(const char *key, cJSON *value)
{
    kv_job j;
    full_job(&j, 5, 6);
    j.n_sizes = 2;
    char *line = kv_proto_job_to_json(&j);
    cJSON *o = cJSON_Parse(line);
    free(line);
    if (value)
        cJSON_ReplaceItemInObjectCaseSensitive(o, key, value);
    else
        cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return line;
}

static void check_job_error(const char *line, const char *says)
{
    kv_job j;
    kv_err err = {{0}};
    KV_CHECKF(kv_proto_job_from_json(line, &j, &err) == -1, "accepted %s", line);
    KV_CHECK_STR_CONTAINS(err.msg, says);
    KV_CHECK(strncmp(err.msg, "job message: ", 13) == 0);
}

static void check_edit(const char *key, cJSON *value, const char *says)
{
    char *line = edited_job(key, value);
    check_job_error(line, says);
    free(line);
}

static void test_decode_errors(void)
{
    check_job_error("", "invalid JSON at byte 0");
    check_job_error("{\"type\":\"job\"", "invalid JSON");
    check_job_error("{\"type\":\"job\"} trailing", "invalid JSON at byte 15");
    check_job_error("[1,2]", "$: expected an object, got an array");
    check_job_error("{}", "$.type: missing");
    check_job_error("{\"type\":7}", "$.type: expected a string, got a number");
    check_job_error("{\"type\":\"jobs\"}", "$.type: unknown message type \"jobs\"");
    check_job_error("{\"type\":\"exit\"}", "$.type: expected \"job\", got \"exit\"");

    check_edit("trials", NULL, "$.trials: missing");
    check_edit("trials", cJSON_CreateString("3"), "$.trials: expected an integer, got the string");
    check_edit("trials", cJSON_CreateNumber(1.5), "$.trials: expected an integer, got 1.5");
    check_edit("trials", cJSON_CreateNumber(-1), "$.trials: -1 is out of range");
    check_edit("iters", cJSON_CreateNumber(1e12), "$.iters: 1000000000000 is out of range");
    check_edit("capture", cJSON_CreateNumber(1), "$.capture: expected a boolean, got a number");
    check_edit("seed", cJSON_CreateNumber(-1), "$.seed: expected an unsigned integer");
    check_edit("seed", cJSON_CreateString("12x"),
               "$.seed: expected an unsigned integer, got the string \"12x\"");
    check_edit("seed", cJSON_CreateString("18446744073709551616"), "$.seed");
    check_edit("id", cJSON_CreateNumber(9007199254740993.0 * 2),
               "$.id: expected an unsigned integer");
    check_edit("problem_dir", cJSON_CreateNull(), "$.problem_dir: expected a string, got null");
    check_edit("sizes", cJSON_CreateObject(), "$.sizes: expected an array, got an object");
    check_edit("sizes", cJSON_CreateArray(), "$.sizes: 0 sizes, expected 1..12");
    cJSON *many = cJSON_CreateArray();
    for (int i = 0; i < KV_JOB_MAX_SIZES + 1; i++)
        cJSON_AddItemToArray(many, cJSON_CreateString("s"));
    check_edit("sizes", many, "$.sizes: 13 sizes");
    const char *two[] = {"a", "b"};
    cJSON *bad = cJSON_CreateStringArray(two, 2);
    cJSON_ReplaceItemInArray(bad, 1, cJSON_CreateNumber(5));
    check_edit("sizes", bad, "$.sizes[1]: expected a string, got a number");
    char long_name[100];
    memset(long_name, 'n', 64);
    long_name[64] = '\0';
    const char *one[] = {long_name};
    check_edit("sizes", cJSON_CreateStringArray(one, 1), "$.sizes[0]: longer than 63 bytes");
    char *big = malloc(PATH_MAX + 10);
    memset(big, 'p', PATH_MAX);
    big[PATH_MAX] = '\0';
    check_edit("reference_so", cJSON_CreateString(big), "$.reference_so: longer than 4095 bytes");
    free(big);

    /* unknown and duplicate members */
    char *line = edited_job("trials", cJSON_CreateNumber(2));
    char with_extra[8192];
    snprintf(with_extra, sizeof with_extra, "%.*s,\"tirals\":2}", (int)strlen(line) - 1, line);
    check_job_error(with_extra, "$.tirals: unknown member");
    snprintf(with_extra, sizeof with_extra, "%.*s,\"trials\":2}", (int)strlen(line) - 1, line);
    check_job_error(with_extra, "$.trials: duplicate member");
    free(line);

    /* a NUL character (\u0000) in a string is refused with its path, not cut;
     * nesting deeper than KV_JSON_DEPTH_MAX is refused as such */
    line = edited_job("problem_dir", cJSON_CreateString("PDIR"));
    char *at = strstr(line, "\"PDIR\"");
    KV_REQUIRE(at);
    snprintf(with_extra, sizeof with_extra, "%.*s\"/p\\u0000x\"%s", (int)(at - line), line, at + 6);
    check_job_error(with_extra, "$.problem_dir: contains a NUL character (\\u0000)");
    snprintf(with_extra, sizeof with_extra, "%.*s,\"x\\u0000\":1}", (int)strlen(line) - 1, line);
    check_job_error(with_extra, "$: a key contains a NUL character (\\u0000)");
    free(line);
    char deep[2 * 1001 + 1];
    memset(deep, '[', 1001);
    memset(deep + 1001, ']', 1001);
    deep[2 * 1001] = '\0';
    check_job_error(deep, "nested too deep (more than 64 levels)");

    /* result messages */
    kv_job_result *r = calloc(1, sizeof *r), *x = calloc(1, sizeof *x);
    full_result(r, 1);
    char *good = kv_proto_result_to_json(9, 1, r);
    cJSON *o = cJSON_Parse(good);
    cJSON_ReplaceItemInObjectCaseSensitive(o, "verdict", cJSON_CreateString("great"));
    char *l1 = cJSON_PrintUnformatted(o);
    cJSON_ReplaceItemInObjectCaseSensitive(o, "verdict", cJSON_CreateString("ok"));
    cJSON *s1 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "sizes"), 1);
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItem(s1, "ref"), "median",
                                           cJSON_CreateString("fast"));
    char *l2 = cJSON_PrintUnformatted(o);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "sizes"), 0),
                                            "detail");
    char *l3 = cJSON_PrintUnformatted(o);
    cJSON_AddItemToObject(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "sizes"), 0), "detail",
                          cJSON_CreateString("d"));
    cJSON_ReplaceItemInObjectCaseSensitive(o, "origin", cJSON_CreateNumber(1));
    char *l4 = cJSON_PrintUnformatted(o);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "origin");
    char *l5 = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    uint64_t id;
    int rank;
    kv_err err = {{0}};
    KV_CHECK(kv_proto_result_from_json(l1, &id, &rank, x, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "result message: $.verdict: \"great\" is not a verdict");
    KV_CHECK(kv_proto_result_from_json(l2, &id, &rank, x, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.sizes[1].ref.median: expected a number, got a string");
    KV_CHECK(kv_proto_result_from_json(l3, &id, &rank, x, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.sizes[0].detail: missing");
    KV_CHECK(kv_proto_result_from_json(l4, &id, &rank, x, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "result message: $.origin: expected a boolean, got a number");
    KV_CHECK(kv_proto_result_from_json(l5, &id, &rank, x, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "result message: $.origin: missing");
    KV_CHECK(kv_proto_result_from_json("{\"type\":\"ready\",\"rank\":0}", &id, &rank, x, &err) ==
             -1);
    KV_CHECK_STR_CONTAINS(err.msg, "$.type: expected \"result\", got \"ready\"");
    free(l1);
    free(l2);
    free(l3);
    free(l4);
    free(l5);
    free(good);
    free(r);
    free(x);

    /* small messages */
    kv_proto_msg m;
    struct {
        const char *line, *says;
    } small[] = {
        {"{\"type\":\"hello\",\"rank\":0,\"device\":1}", "hello message: $.pid: missing"},
        {"{\"type\":\"hello\",\"rank\":0,\"pid\":5,\"device\":1,\"gpu\":1}",
         "$.gpu: unknown member"},
        {"{\"type\":\"ready\",\"rank\":-1}", "ready message: $.rank: -1 is out of range"},
        {"{\"type\":\"uid\",\"uid\":\"abc\"}", "uid message: $.uid: expected 256 hex digits"},
        {"{\"type\":\"exit\",\"now\":true}", "exit message: $.now: unknown member"},
        {"{\"type\":\"job\"}", "$.type: \"job\" is not a small message"},
        {"{\"type\":\"bye\"}", "message: $.type: unknown message type \"bye\""},
        {"nonsense", "message: invalid JSON at byte 0"},
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        KV_CHECKF(kv_proto_msg_from_json(small[i].line, &m, &err) == -1, "accepted %s",
                  small[i].line);
        KV_CHECK_STR_CONTAINS(err.msg, small[i].says);
    }
    kv_msg_type t;
    KV_CHECK(kv_proto_type("{\"type\":\"bye\"}", &t, &err) == -1);
    KV_CHECK(kv_proto_type("\"result\"", &t, &err) == -1);
    KV_CHECK(kv_proto_type("{\"type\":\"result\",\"anything\":1}", &t, &err) == 0 &&
             t == KV_MSG_RESULT);
}

/* ---- what kevo-worker speaks ---------------------------------------------------------------- */

/* The decoders of the two ends, each as "line in, 0 or -1 out": the
 * supervisor's for what a worker sends, the worker's for what it receives. */
typedef int (*decode_fn)(const char *line, kv_err *err);

static int decode_small_msg(const char *line, kv_err *err)
{
    kv_proto_msg m;
    return kv_proto_msg_from_json(line, &m, err);
}

static int decode_result(const char *line, kv_err *err)
{
    kv_job_result *r = malloc(sizeof *r);
    uint64_t id;
    int rank;
    int rc = r ? kv_proto_result_from_json(line, &id, &rank, r, err) : -1;
    free(r);
    return rc;
}

static int decode_doctor(const char *text, kv_err *err)
{
    kv_proto_doctor *d = malloc(sizeof *d);
    int rc = d ? kv_proto_doctor_from_json(text, d, err) : -1;
    free(d);
    return rc;
}

static int decode_worker_in(const char *line, kv_err *err)
{
    kv_proto_msg m;
    kv_job job;
    return kv_proto_worker_in_from_json(line, &m, &job, err);
}

/* Prints root and requires dec to refuse it with an error holding
 * "<path>: <says>". */
static void expect_refused(const cJSON *root, decode_fn dec, const char *path, const char *says)
{
    char *line = cJSON_PrintUnformatted(root);
    KV_REQUIRE(line);
    kv_err err = {{0}};
    char want[KV_JSON_PATH_MAX + 64];
    snprintf(want, sizeof want, "%s: %s", path, says);
    KV_CHECKF(dec(line, &err) == -1, "accepted (%s changed): %.300s", path, line);
    KV_CHECKF(strstr(err.msg, want) != NULL, "error \"%s\" does not say \"%s\"", err.msg, want);
    free(line);
}

/* A value of another JSON type than v (a string's: a boolean, since a big
 * integer is written as a string and then a number would do). */
static cJSON *other_type(const cJSON *v)
{
    if (cJSON_IsString(v))
        return cJSON_CreateTrue();
    if (cJSON_IsNumber(v) || cJSON_IsNull(v))
        return cJSON_CreateString("x");
    if (cJSON_IsBool(v))
        return cJSON_CreateNumber(1);
    if (cJSON_IsObject(v))
        return cJSON_CreateArray();
    return cJSON_CreateObject();
}

static size_t n_mutations;

/* A change to one copy of a message: the node at steps (child indexes from
 * the root) of a fresh copy of root. */
typedef struct {
    const cJSON *root;
    int steps[8], depth;
} where;

static cJSON *node_at(cJSON *copy, const where *w, int depth)
{
    cJSON *n = copy;
    for (int i = 0; i < depth; i++)
        n = cJSON_GetArrayItem(n, w->steps[i]);
    return n;
}

/* The copy of the message with the node at w replaced by v (NULL: removed),
 * decoded: refused with "<path>: <says>". */
static void refuse_change(const where *w, cJSON *v, decode_fn dec, const char *path,
                          const char *says)
{
    cJSON *copy = cJSON_Duplicate(w->root, 1);
    KV_REQUIRE(copy && w->depth > 0);
    cJSON *parent = node_at(copy, w, w->depth - 1);
    int at = w->steps[w->depth - 1];
    if (!v)
        cJSON_DeleteItemFromArray(parent, at);
    else if (cJSON_IsArray(parent))
        cJSON_ReplaceItemInArray(parent, at, v);
    else
        cJSON_ReplaceItemInObjectCaseSensitive(parent, cJSON_GetArrayItem(parent, at)->string, v);
    expect_refused(copy, dec, path, says);
    cJSON_Delete(copy);
    n_mutations++;
}

/* Every member of the object at w (at path) in turn: removed ("missing"), of
 * another JSON type, and for strings oversize (every string member has a
 * bound; a phase alone is cut, not refused); an unknown member added; the
 * objects and arrays below walked too (an array's first element, and the
 * array grown past every array's bound: 12 sizes, 64 GPUs). */
static void mutate_object(where *w, const char *path, decode_fn dec)
{
    static char big[8192];
    memset(big, 'b', sizeof big - 1);
    const cJSON *obj = node_at((cJSON *)w->root, w, w->depth);
    KV_REQUIRE(w->depth + 2 < (int)(sizeof w->steps / sizeof w->steps[0]));
    int n = cJSON_GetArraySize(obj);
    for (int i = 0; i < n; i++) {
        const cJSON *child = cJSON_GetArrayItem(obj, i);
        char cpath[KV_JSON_PATH_MAX];
        snprintf(cpath, sizeof cpath, "%s.%s", path, child->string);
        w->steps[w->depth++] = i;
        refuse_change(w, NULL, dec, cpath, "missing");
        refuse_change(w, other_type(child), dec, cpath, "");
        if (cJSON_IsString(child) && strcmp(cpath, "$.phase") != 0)
            refuse_change(w, cJSON_CreateString(big), dec, cpath, "");
        if (cJSON_IsObject(child))
            mutate_object(w, cpath, dec);
        if (cJSON_IsArray(child) && cJSON_GetArraySize(child) > 0) {
            const cJSON *first = cJSON_GetArrayItem(child, 0);
            cJSON *grown = cJSON_Duplicate(child, 1);
            while (cJSON_GetArraySize(grown) <= KV_PROTO_MAX_GPUS)
                cJSON_AddItemToArray(grown, cJSON_Duplicate(first, 1));
            refuse_change(w, grown, dec, cpath, "");
            char epath[KV_JSON_PATH_MAX];
            kv_json_path_index(epath, sizeof epath, cpath, 0);
            w->steps[w->depth++] = 0;
            refuse_change(w, other_type(first), dec, epath, "");
            if (cJSON_IsObject(first))
                mutate_object(w, epath, dec);
            w->depth--;
        }
        w->depth--;
    }
    cJSON *copy = cJSON_Duplicate(w->root, 1);
    KV_REQUIRE(copy);
    cJSON_AddNumberToObject(node_at(copy, w, w->depth), "zz_extra", 1);
    char xpath[KV_JSON_PATH_MAX];
    snprintf(xpath, sizeof xpath, "%s.zz_extra", path);
    expect_refused(copy, dec, xpath, "unknown member");
    cJSON_Delete(copy);
    n_mutations++;
}

/* line is accepted by dec as it is, and refused after every mutation. */
static void check_strict(const char *line, decode_fn dec)
{
    KV_REQUIRE(line);
    kv_err err = {{0}};
    KV_CHECKF(dec(line, &err) == 0, "%s: %s", line, err.msg);
    cJSON *root = cJSON_Parse(line);
    KV_REQUIRE(root);
    where w = {.root = root};
    mutate_object(&w, "$", dec);
    cJSON_Delete(root);
}

/* Every message kevo-worker sends goes out through kv_proto_send_msg (or the
 * result encoder) and is read back by the supervisor's decoder; every message
 * it receives is read by kv_proto_worker_in_from_json, as it reads them. */
static void test_worker_round_trip(void)
{
    int sv[2];
    kv_err err = {{0}};
    KV_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    unsigned char id[KV_PROTO_UID_BYTES], back[KV_PROTO_UID_BYTES];
    for (int i = 0; i < KV_PROTO_UID_BYTES; i++)
        id[i] = (unsigned char)(i * 2 + 1 + (i > 64 ? 128 : 0));
    kv_proto_msg out[] = {
        {.type = KV_MSG_HELLO, .rank = 5, .pid = 4242, .device = 3},
        {.type = KV_MSG_UID},
        {.type = KV_MSG_READY, .rank = 5},
        {.type = KV_MSG_PROGRESS,
         .job = ((uint64_t)1 << 53) + 3,
         .rank = 5,
         .phase = "timing size 2"},
    };
    kv_proto_uid_to_hex(id, out[1].uid);
    kv_line_reader rd;
    kv_line_reader_init(&rd, sv[1]);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        KV_CHECKF(kv_proto_send_msg(sv[0], &out[i], &err) == 0, "%s", err.msg);
        KV_REQUIRE(kv_line_reader_fill(&rd, &err) == 0);
        char *line = kv_line_reader_next(&rd);
        KV_REQUIRE(line);
        kv_proto_msg in;
        kv_job unused;
        memset(&in, 0x5a, sizeof in);
        KV_CHECKF(kv_proto_msg_from_json(line, &in, &err) == 0, "%s: %s", line, err.msg);
        KV_CHECKF(in.type == out[i].type && in.rank == out[i].rank && in.pid == out[i].pid &&
                      in.device == out[i].device && in.job == out[i].job &&
                      strcmp(in.uid, out[i].uid) == 0 && strcmp(in.phase, out[i].phase) == 0,
                  "%s differs after a round trip: %s", kv_msg_type_name(out[i].type), line);
        /* the supervisor sends none of these */
        KV_CHECK(kv_proto_worker_in_from_json(line, &in, &unused, &err) == -1);
        KV_CHECK_STR_CONTAINS(err.msg, "a worker does not receive");
        free(line);
    }
    kv_line_reader_free(&rd);
    /* the uid: bytes to hex and back, every bit kept; either case read */
    KV_CHECK(strlen(out[1].uid) == KV_PROTO_UID_HEX && strncmp(out[1].uid, "01030507", 8) == 0);
    KV_CHECK(kv_proto_uid_from_hex(out[1].uid, back, &err) == 0 &&
             memcmp(id, back, sizeof id) == 0);
    for (char *p = out[1].uid; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 'a' + 'A');
    memset(back, 0, sizeof back);
    KV_CHECK(kv_proto_uid_from_hex(out[1].uid, back, &err) == 0 &&
             memcmp(id, back, sizeof id) == 0);
    out[1].uid[7] = 'g';
    KV_CHECK(kv_proto_uid_from_hex(out[1].uid, back, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "expected 256 hex digits");
    KV_CHECK(kv_proto_uid_from_hex("0a", back, &err) == -1);
    /* job and result have their own encoders */
    kv_proto_msg job_msg = {.type = KV_MSG_JOB};
    KV_CHECK(kv_proto_send_msg(sv[0], &job_msg, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "job message: cannot be encoded");
    close(sv[0]);
    close(sv[1]);

    /* what the worker receives */
    kv_proto_msg m = {.type = KV_MSG_INIT};
    kv_proto_uid_to_hex(id, m.uid);
    char *line = kv_proto_msg_to_json(&m);
    kv_proto_msg in;
    kv_job job, job_in;
    memset(&job_in, 0x5a, sizeof job_in);
    kv_job untouched = job_in;
    KV_CHECKF(kv_proto_worker_in_from_json(line, &in, &job_in, &err) == 0, "%s", err.msg);
    KV_CHECK(in.type == KV_MSG_INIT && strcmp(in.uid, m.uid) == 0);
    KV_CHECK(memcmp(&job_in, &untouched, sizeof job_in) == 0);
    free(line);
    full_job(&job, UINT64_MAX, 99);
    line = kv_proto_job_to_json(&job);
    memset(&in, 0x5a, sizeof in);
    KV_CHECKF(kv_proto_worker_in_from_json(line, &in, &job_in, &err) == 0, "%s", err.msg);
    KV_CHECK(in.type == KV_MSG_JOB && same_job(&job, &job_in));
    free(line);
    m = (kv_proto_msg){.type = KV_MSG_EXIT};
    line = kv_proto_msg_to_json(&m);
    KV_CHECK(kv_proto_worker_in_from_json(line, &in, &job_in, &err) == 0 && in.type == KV_MSG_EXIT);
    free(line);
    /* a result is the worker's own message, never one it reads */
    kv_job_result *r = calloc(1, sizeof *r);
    KV_REQUIRE(r);
    full_result(r, 3);
    line = kv_proto_result_to_json(1, 0, r);
    KV_CHECK(kv_proto_worker_in_from_json(line, &in, &job_in, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "message: $.type: a worker does not receive \"result\"");
    free(line);
    free(r);
}

/* Every member of every message the worker sends or receives: missing, of
 * the wrong type, oversize, and an unknown member beside it, at every level. */
static void test_worker_malformed(void)
{
    unsigned char id[KV_PROTO_UID_BYTES];
    memset(id, 0xab, sizeof id);
    kv_proto_msg small[] = {
        {.type = KV_MSG_HELLO, .rank = 1, .pid = 99, .device = 1},
        {.type = KV_MSG_UID},
        {.type = KV_MSG_READY, .rank = 1},
        {.type = KV_MSG_PROGRESS, .job = 12, .rank = 1, .phase = "correctness"},
        {.type = KV_MSG_INIT},
        {.type = KV_MSG_EXIT},
    };
    kv_proto_uid_to_hex(id, small[1].uid);
    kv_proto_uid_to_hex(id, small[4].uid);
    n_mutations = 0;
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        char *line = kv_proto_msg_to_json(&small[i]);
        int to_worker = small[i].type == KV_MSG_INIT || small[i].type == KV_MSG_EXIT;
        check_strict(line, to_worker ? decode_worker_in : decode_small_msg);
        free(line);
    }
    kv_job job;
    full_job(&job, 77, 5);
    job.n_sizes = 2;
    char *line = kv_proto_job_to_json(&job);
    check_strict(line, decode_worker_in);
    free(line);
    kv_job_result *r = calloc(1, sizeof *r);
    KV_REQUIRE(r);
    full_result(r, 4);
    r->n_sizes = 2;
    line = kv_proto_result_to_json(77, 1, r);
    check_strict(line, decode_result);
    free(line);
    free(r);
    /* each of the ~40 members of a result at least, not a walk that saw nothing */
    KV_CHECKF(n_mutations > 150, "%zu mutations", n_mutations);

    /* values out of range */
    struct {
        const char *line, *says;
    } range[] = {
        {"{\"type\":\"hello\",\"rank\":4096,\"pid\":5,\"device\":0}",
         "$.rank: 4096 is out of range"},
        {"{\"type\":\"hello\",\"rank\":0,\"pid\":0,\"device\":0}", "$.pid: 0 is out of range"},
        {"{\"type\":\"progress\",\"job\":\"18446744073709551616\",\"rank\":0,\"phase\":\"p\"}",
         "$.job"},
        {"{\"type\":\"progress\",\"job\":-1,\"rank\":0,\"phase\":\"p\"}", "$.job"},
    };
    kv_err err = {{0}};
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        KV_CHECKF(decode_small_msg(range[i].line, &err) == -1, "accepted %s", range[i].line);
        KV_CHECK_STR_CONTAINS(err.msg, range[i].says);
    }
    KV_CHECK(decode_worker_in("{\"type\":\"init\",\"uid\":\"\"}", &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "init message: $.uid: expected 256 hex digits");
    KV_CHECK(decode_worker_in("{\"type\":\"exit\"", &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "message: invalid JSON");
}

/* `kevo-worker --doctor`: a node of n GPUs, every pair linked but (0, 1). */
static void doctor_of(kv_proto_doctor *d, int n)
{
    memset(d, 0, sizeof *d);
    d->cuda_driver = 13000;
    d->cuda_runtime = 12090;
    d->nccl = 22803;
    snprintf(d->nvls_enable, sizeof d->nvls_enable, "0");
    d->n_gpus = n;
    for (int i = 0; i < n; i++) {
        kv_proto_gpu *g = &d->gpus[i];
        g->index = i;
        snprintf(g->name, sizeof g->name, "NVIDIA H200 \"%d\"", i);
        g->cc_major = 9;
        g->cc_minor = i % 2;
        g->sms = 132;
        g->memory_bytes = ((uint64_t)1 << 53) + 1 + (uint64_t)i; /* beyond a double's exact range */
        g->l2_bytes = 50 << 20;
        for (int q = 0; q < n; q++) {
            if (q == i)
                continue;
            kv_proto_peer *p = &g->peers[g->n_peers++];
            p->device = q;
            p->access = 1;
            p->native_atomics = !(i + q == 1);
            p->performance_rank = q % 3;
        }
    }
}

static int same_doctor(const kv_proto_doctor *a, const kv_proto_doctor *b)
{
    if (strcmp(a->error, b->error) || a->cuda_driver != b->cuda_driver ||
        a->cuda_runtime != b->cuda_runtime || a->nccl != b->nccl ||
        strcmp(a->nvls_enable, b->nvls_enable) || a->n_gpus != b->n_gpus)
        return 0;
    for (int i = 0; i < a->n_gpus; i++) {
        const kv_proto_gpu *x = &a->gpus[i], *y = &b->gpus[i];
        if (x->index != y->index || strcmp(x->name, y->name) || x->cc_major != y->cc_major ||
            x->cc_minor != y->cc_minor || x->sms != y->sms || x->memory_bytes != y->memory_bytes ||
            x->l2_bytes != y->l2_bytes || x->n_peers != y->n_peers ||
            memcmp(x->peers, y->peers, (size_t)x->n_peers * sizeof x->peers[0]))
            return 0;
    }
    return 1;
}

/* The doctor report round-trips at every node size, with and without an
 * error, and is strict like the messages. */
static void test_doctor(void)
{
    kv_proto_doctor *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    KV_REQUIRE(a && b);
    kv_err err = {{0}};
    const int sizes[] = {0, 1, 2, 8, KV_PROTO_MAX_GPUS};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        doctor_of(a, sizes[i]);
        if (sizes[i] == 0)
            snprintf(a->error, sizeof a->error, "no CUDA-capable device is detected");
        char *text = kv_proto_doctor_to_json(a);
        KV_REQUIRE(text);
        KV_CHECK(strchr(text, '\n') != NULL); /* formatted for people too */
        KV_CHECK((strstr(text, "\"error\"") != NULL) == (sizes[i] == 0));
        memset(b, 0x5a, sizeof *b);
        KV_CHECKF(kv_proto_doctor_from_json(text, b, &err) == 0, "%s", err.msg);
        KV_CHECKF(same_doctor(a, b), "a report of %d GPUs differs after a round trip", sizes[i]);
        free(text);
    }
    doctor_of(a, 2);
    char *text = kv_proto_doctor_to_json(a);
    check_strict(text, decode_doctor);
    free(text);
    KV_CHECK(decode_doctor("{\"error\":\"\",\"cuda_driver\":1,\"cuda_runtime\":1,\"nccl\":1,"
                           "\"NCCL_NVLS_ENABLE\":\"\",\"devices\":[]}",
                           &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "doctor report: $.error: ");
    KV_CHECK(decode_doctor("[]", &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "doctor report: $: expected an object");
    free(a);
    free(b);
}

/* A result's graph_json: escaped names, cut by whole nodes, always a whole
 * JSON document that fits. */
static void test_graph_json(void)
{
    kv_job_result *r = calloc(1, sizeof *r);
    KV_REQUIRE(r);
    char *out = r->graph_json;
    size_t cap = sizeof r->graph_json;
    kv_proto_graph_failed(out, cap, "cudaErrorStreamCaptureUnsupported");
    KV_CHECK(strcmp(out, "{\"captured\":false,\"error\":\"cudaErrorStreamCaptureUnsupported\"}") ==
             0);
    kv_proto_graph_begin(out, cap);
    KV_CHECK(strcmp(out, "{\"captured\":true,\"nodes\":[]}") == 0);
    KV_CHECK(kv_proto_graph_add(out, cap, "kernel", "allreduce<8>") == 0);
    KV_CHECK(kv_proto_graph_add(out, cap, "memcpy", NULL) == 0);
    KV_CHECK(strcmp(out, "{\"captured\":true,\"nodes\":[{\"type\":\"kernel\",\"name\":"
                         "\"allreduce<8>\"},{\"type\":\"memcpy\",\"name\":\"\"}]}") == 0);
    /* a name that needs escaping, and one cut to 40 bytes */
    KV_CHECK(kv_proto_graph_add(out, cap, "kernel", "k\"q\\") == 0);
    char long_name[100];
    memset(long_name, 'L', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    KV_CHECK(kv_proto_graph_add(out, cap, "kernel", long_name) == 0);
    int added = 4;
    while (kv_proto_graph_add(out, cap, "kernel", long_name) == 0)
        added++;
    KV_CHECK(added > 10 && strlen(out) < cap);
    char before[sizeof r->graph_json];
    strcpy(before, out);
    KV_CHECK(kv_proto_graph_add(out, cap, "kernel", long_name) == -1 && strcmp(out, before) == 0);
    cJSON *g = cJSON_Parse(out);
    KV_REQUIRE(g);
    cJSON *nodes = cJSON_GetObjectItem(g, "nodes");
    KV_CHECK(cJSON_GetArraySize(nodes) >= added);
    KV_CHECK(strcmp(cJSON_GetArrayItem(nodes, 2)->child->next->valuestring, "k\"q\\") == 0);
    KV_CHECK(strlen(cJSON_GetArrayItem(nodes, 3)->child->next->valuestring) == 40);
    cJSON_Delete(g);
    /* and it travels in a result */
    r->verdict = KV_VERDICT_OK;
    char *line = kv_proto_result_to_json(1, 0, r);
    kv_job_result *back = calloc(1, sizeof *back);
    uint64_t id;
    int rank;
    kv_err err = {{0}};
    KV_CHECKF(kv_proto_result_from_json(line, &id, &rank, back, &err) == 0, "%s", err.msg);
    KV_CHECK(strcmp(back->graph_json, r->graph_json) == 0);
    free(line);
    free(back);
    free(r);
}

/* ---- merge ---------------------------------------------------------------------------------- */

static void rank_result(kv_job_result *r, kv_verdict v, int rank)
{
    memset(r, 0, sizeof *r);
    r->verdict = v;
    snprintf(r->message, sizeof r->message, "rank %d says %s", rank, kv_verdict_name(v));
    r->n_sizes = 2;
    for (int i = 0; i < 2; i++) {
        kv_size_outcome *s = &r->sizes[i];
        snprintf(s->name, sizeof s->name, "s%d", i);
        s->checked = s->ok = s->timed = 1;
        s->bad_rank = rank;
        s->max_abs_err = 0.1 * (rank + 1);
        s->max_rel_err = 0.01 * (rank + 1);
    }
    r->wall_s = 1.0 + rank;
    r->gpu_s = 3.0 - rank;
}

static void test_merge(void)
{
    kv_job_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *m = calloc(1, sizeof *m);
    KV_REQUIRE(a && b && m);
    /* the worst verdict wins, with its message; a tie keeps the first */
    static const kv_verdict order[] = {KV_VERDICT_OK, KV_VERDICT_MISMATCH, KV_VERDICT_RUNTIME_ERROR,
                                       KV_VERDICT_HANG, KV_VERDICT_CRASH};
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 5; j++) {
            rank_result(a, order[i], 0);
            rank_result(b, order[j], 1);
            kv_job_result_merge(m, a, 1);
            kv_job_result_merge(m, b, 0);
            int worse = j > i ? j : i;
            KV_CHECKF(m->verdict == order[worse], "%s + %s gave %s", kv_verdict_name(order[i]),
                      kv_verdict_name(order[j]), kv_verdict_name(m->verdict));
            KV_CHECK_STR_CONTAINS(m->message, j > i ? "rank 1" : "rank 0");
        }
    }
    /* a verdict a worker should never send counts as a runtime error */
    rank_result(a, KV_VERDICT_OK, 0);
    rank_result(b, KV_VERDICT_NONE, 1);
    kv_job_result_merge(m, a, 1);
    kv_job_result_merge(m, b, 0);
    KV_CHECK(m->verdict == KV_VERDICT_NONE);
    rank_result(b, KV_VERDICT_COMPILE_ERROR, 1);
    a->verdict = KV_VERDICT_HANG;
    kv_job_result_merge(m, a, 1);
    kv_job_result_merge(m, b, 0);
    KV_CHECK(m->verdict == KV_VERDICT_HANG);

    /* three ranks: the first mismatch with its rank; the slowest median's
     * whole timing; the first captured graph; max of wall and gpu time */
    kv_job_result *rs = calloc(3, sizeof *rs);
    KV_REQUIRE(rs);
    const double ref_med[3] = {10, 30, 20}, cand_med[3] = {NAN, 5, 9};
    for (int k = 0; k < 3; k++) {
        rank_result(&rs[k], k == 0 ? KV_VERDICT_OK : KV_VERDICT_MISMATCH, k);
        for (int i = 0; i < 2; i++) {
            kv_size_outcome *s = &rs[k].sizes[i];
            s->ref = (kv_timing){
                ref_med[k], ref_med[k] - 1 - k, ref_med[k] + 1 + k, ref_med[k] + 0.5, 0.1 * k,
                10 + k};
            s->cand = (kv_timing){cand_med[k], cand_med[k] - 1, cand_med[k] + k, 0, 0, 20 + k};
            if (k > 0 && i == 0) {
                s->ok = 0;
                s->bad_index = 100 * k;
                s->got = k;
                s->bad_count = k;
                snprintf(s->bad_tensor, sizeof s->bad_tensor, "t%d", k);
                snprintf(s->detail, sizeof s->detail, "detail of rank %d", k);
            }
        }
        if (k > 0) {
            rs[k].graph_captured = 1;
            rs[k].kernel_nodes = k;
            snprintf(rs[k].graph_json, sizeof rs[k].graph_json, "[\"rank %d\"]", k);
        }
    }
    rs[2].sizes[1].timed = 0;
    rs[1].sizes[1].checked = 0;
    for (int k = 0; k < 3; k++)
        kv_job_result_merge(m, &rs[k], k == 0);
    KV_CHECK(m->verdict == KV_VERDICT_MISMATCH);
    KV_CHECK_STR_CONTAINS(m->message, "rank 1 says mismatch");
    const kv_size_outcome *s0 = &m->sizes[0], *s1 = &m->sizes[1];
    KV_CHECK(!s0->ok && s0->bad_rank == 1 && s0->bad_index == 100 && s0->got == 1 &&
             s0->bad_count == 1 && strcmp(s0->bad_tensor, "t1") == 0 &&
             strcmp(s0->detail, "detail of rank 1") == 0);
    KV_CHECK(s0->max_abs_err == 0.2); /* the mismatching rank's */
    KV_CHECK(s1->ok && s1->max_abs_err == 0.1 * 3 && s1->max_rel_err == 0.01 * 3);
    KV_CHECK(s1->checked == 0 && s1->timed == 0 && s0->checked && s0->timed);
    KV_CHECK(s0->ref.median == 30 && s0->ref.p10 == 28 && s0->ref.p90 == 32 &&
             s0->ref.mean == 30.5 && s0->ref.n == 11);
    KV_CHECK(s0->cand.median == 9 && s0->cand.p10 == 8 && s0->cand.p90 == 11 && s0->cand.n == 22);
    KV_CHECK(m->graph_captured && m->kernel_nodes == 1 &&
             strcmp(m->graph_json, "[\"rank 1\"]") == 0);
    KV_CHECK(m->wall_s == 3.0 && m->gpu_s == 3.0);
    /* a rank that reports more sizes adds them */
    rank_result(a, KV_VERDICT_OK, 0);
    a->n_sizes = 1;
    rank_result(b, KV_VERDICT_OK, 1);
    kv_job_result_merge(m, a, 1);
    kv_job_result_merge(m, b, 0);
    KV_CHECK(m->n_sizes == 2 && strcmp(m->sizes[1].name, "s1") == 0);
    free(rs);
    free(a);
    free(b);
    free(m);
}

/* A failure observed on one rank and learned by the others through the
 * agreement: whatever the rank order, the merged verdict, message and
 * mismatch fields are those of the rank where it happened. */
static void learned_elsewhere(kv_job_result *r, kv_verdict v, int rank)
{
    rank_result(r, v, rank);
    r->origin = 0;
    r->sizes[1].ok = 0;
    r->sizes[1].bad_rank = -1;
    snprintf(r->message, sizeof r->message, "rank %d: %s on another rank", rank,
             kv_verdict_name(v));
}

static void observed_here(kv_job_result *r, kv_verdict v, int rank)
{
    rank_result(r, v, rank);
    r->origin = 1;
    r->sizes[1].ok = 0;
    r->sizes[1].bad_index = 123;
    r->sizes[1].expected = 1.5;
    r->sizes[1].got = NAN;
    snprintf(r->sizes[1].bad_tensor, sizeof r->sizes[1].bad_tensor, "y");
    snprintf(r->message, sizeof r->message, "rank %d: %s at size s1: y[123]: expected 1.5, got nan",
             rank, kv_verdict_name(v));
}

static void test_merge_origin(void)
{
    kv_job_result *rs = calloc(3, sizeof *rs), *m = calloc(1, sizeof *m);
    KV_REQUIRE(rs && m);
    static const kv_verdict verdicts[] = {KV_VERDICT_MISMATCH, KV_VERDICT_RUNTIME_ERROR,
                                          KV_VERDICT_REFUSED};
    for (size_t v = 0; v < sizeof verdicts / sizeof verdicts[0]; v++) {
        /* the origin at rank 0, 1 or 2 of three; the others learned it */
        for (int at = 0; at < 3; at++) {
            for (int k = 0; k < 3; k++) {
                if (k == at)
                    observed_here(&rs[k], verdicts[v], k);
                else
                    learned_elsewhere(&rs[k], verdicts[v], k);
            }
            int spoke = -1;
            for (int k = 0; k < 3; k++)
                if (kv_job_result_merge(m, &rs[k], k == 0))
                    spoke = k;
            char want[64];
            snprintf(want, sizeof want, "rank %d: %s at size s1: y[123]", at,
                     kv_verdict_name(verdicts[v]));
            KV_CHECKF(m->verdict == verdicts[v] && m->origin && spoke == at,
                      "origin at rank %d: %s, origin %d, message of rank %d", at,
                      kv_verdict_name(m->verdict), m->origin, spoke);
            KV_CHECK_STR_CONTAINS(m->message, want);
            const kv_size_outcome *s = &m->sizes[1];
            KV_CHECKF(!s->ok && s->bad_rank == at && s->bad_index == 123 && isnan(s->got) &&
                          strcmp(s->bad_tensor, "y") == 0,
                      "size s1: bad_rank %d, index %lld", s->bad_rank, (long long)s->bad_index);
            KV_CHECK(m->sizes[0].ok);
        }
    }
    /* a worse verdict still wins over an origin */
    observed_here(&rs[0], KV_VERDICT_MISMATCH, 0);
    learned_elsewhere(&rs[1], KV_VERDICT_RUNTIME_ERROR, 1);
    kv_job_result_merge(m, &rs[0], 1);
    KV_CHECK(kv_job_result_merge(m, &rs[1], 0) == 1);
    KV_CHECK(m->verdict == KV_VERDICT_RUNTIME_ERROR && !m->origin);
    /* two origins: the first keeps the word */
    observed_here(&rs[0], KV_VERDICT_MISMATCH, 0);
    observed_here(&rs[1], KV_VERDICT_MISMATCH, 1);
    kv_job_result_merge(m, &rs[0], 1);
    KV_CHECK(kv_job_result_merge(m, &rs[1], 0) == 0);
    KV_CHECK_STR_CONTAINS(m->message, "rank 0:");
    KV_CHECK(m->sizes[1].bad_rank == 0);
    /* refused ranks between runtime_error and hang */
    rank_result(&rs[0], KV_VERDICT_REFUSED, 0);
    rank_result(&rs[1], KV_VERDICT_RUNTIME_ERROR, 1);
    kv_job_result_merge(m, &rs[1], 1);
    kv_job_result_merge(m, &rs[0], 0);
    KV_CHECK(m->verdict == KV_VERDICT_REFUSED);
    rank_result(&rs[1], KV_VERDICT_HANG, 1);
    kv_job_result_merge(m, &rs[0], 1);
    kv_job_result_merge(m, &rs[1], 0);
    KV_CHECK(m->verdict == KV_VERDICT_HANG);
    free(rs);
    free(m);
}

/* ---- line reader ---------------------------------------------------------------------------- */

static void test_line_reader_split(void)
{
    int sv[2];
    KV_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    KV_REQUIRE(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
    kv_line_reader rd;
    kv_line_reader_init(&rd, sv[0]);
    kv_err err = {{0}};
    /* nothing there: no line, no error, no EOF */
    KV_CHECK(kv_line_reader_fill(&rd, &err) == 0 && rd.len == 0 && !rd.eof);
    KV_CHECK(kv_line_reader_next(&rd) == NULL);

    const char *text = "{\"type\":\"hello\"}\n\n{\"type\":\"ready\",\"rank\":1}\nlast";
    const char *want[] = {"{\"type\":\"hello\"}", "", "{\"type\":\"ready\",\"rank\":1}"};
    int got = 0;
    for (const char *p = text; *p; p++) { /* one byte at a time */
        KV_CHECK(write(sv[1], p, 1) == 1);
        KV_CHECK(kv_line_reader_fill(&rd, &err) == 0);
        char *line;
        while ((line = kv_line_reader_next(&rd)) != NULL) {
            KV_CHECK(got < 3 && strcmp(line, want[got]) == 0);
            got++;
            free(line);
        }
    }
    KV_CHECK(got == 3);
    /* at EOF, a line without its newline is a cut message: never returned */
    close(sv[1]);
    KV_CHECK(kv_line_reader_fill(&rd, &err) == 0 && rd.eof);
    KV_CHECK(kv_line_reader_next(&rd) == NULL && rd.len == 4);
    KV_CHECK(kv_line_reader_fill(&rd, &err) == 0 && rd.eof);
    kv_line_reader_free(&rd);
    close(sv[0]);

    /* many lines in one read */
    KV_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    char buf[64 * 20];
    size_t n = 0;
    for (int i = 0; i < 64; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "line %d\n", i);
    KV_CHECK(write(sv[1], buf, n) == (ssize_t)n);
    kv_line_reader_init(&rd, sv[0]);
    KV_CHECK(kv_line_reader_fill(&rd, &err) == 0);
    got = 0;
    char *line;
    while ((line = kv_line_reader_next(&rd)) != NULL) {
        char w[32];
        snprintf(w, sizeof w, "line %d", got++);
        KV_CHECK(strcmp(line, w) == 0);
        free(line);
    }
    KV_CHECK(got == 64);
    /* a peer that leaves with our data unread: ECONNRESET reads as the end,
     * after everything it sent */
    KV_CHECK(write(sv[0], "unread\n", 7) == 7);
    KV_CHECK(write(sv[1], "bye\n", 4) == 4);
    close(sv[1]);
    KV_CHECK(kv_line_reader_fill(&rd, &err) == 0);
    line = kv_line_reader_next(&rd);
    KV_CHECK(line && strcmp(line, "bye") == 0);
    free(line);
    KV_CHECKF(kv_line_reader_fill(&rd, &err) == 0, "%s", err.msg);
    KV_CHECK(rd.eof);
    kv_line_reader_free(&rd);
    close(sv[0]);
}

static int file_with(const char *name, size_t line_len, int newline)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (size_t i = 0; i < line_len; i++)
        fputc('x', f);
    if (newline)
        fputs("\n{\"after\":1}\n", f);
    fclose(f);
    return open(path, O_RDONLY | O_CLOEXEC);
}

static void test_line_reader_long(void)
{
    kv_err err = {{0}};
    /* the longest line allowed, then another */
    int fd = file_with("max", KV_PROTO_LINE_MAX, 1);
    KV_REQUIRE(fd >= 0);
    kv_line_reader rd;
    kv_line_reader_init(&rd, fd);
    char *lines[2] = {NULL, NULL};
    int n = 0, rc = 0;
    while (n < 2 && !rd.eof && (rc = kv_line_reader_fill(&rd, &err)) == 0) {
        char *l;
        while (n < 2 && (l = kv_line_reader_next(&rd)) != NULL)
            lines[n++] = l;
    }
    KV_CHECKF(rc == 0, "%s", err.msg);
    KV_CHECK(n == 2 && strlen(lines[0]) == KV_PROTO_LINE_MAX &&
             strcmp(lines[1], "{\"after\":1}") == 0);
    free(lines[0]);
    free(lines[1]);
    kv_line_reader_free(&rd);
    close(fd);

    /* one byte more: an error, not an ever-growing buffer */
    fd = file_with("over", (size_t)KV_PROTO_LINE_MAX + 1, 1);
    KV_REQUIRE(fd >= 0);
    kv_line_reader_init(&rd, fd);
    rc = 0;
    for (int i = 0; i < 1000 && rc == 0 && !rd.eof; i++) {
        rc = kv_line_reader_fill(&rd, &err);
        KV_CHECK(kv_line_reader_next(&rd) == NULL);
    }
    KV_CHECK(rc == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "a line is longer than 1048576 bytes");
    KV_CHECK(rd.cap <= (size_t)KV_PROTO_LINE_MAX + 1);
    kv_line_reader_free(&rd);
    close(fd);
}

/* ---- send ----------------------------------------------------------------------------------- */

static void test_send(void)
{
    int sv[2];
    kv_err err = {{0}};
    KV_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    KV_CHECK(kv_proto_send(sv[0], "two\nlines", &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "newline");
    KV_CHECK(kv_proto_send(sv[0], "{\"type\":\"exit\"}", &err) == 0);
    char buf[64];
    KV_CHECK(read(sv[1], buf, sizeof buf) == 16 && memcmp(buf, "{\"type\":\"exit\"}\n", 16) == 0);
    /* the peer is gone: EPIPE, and no SIGPIPE (its default would kill us) */
    signal(SIGPIPE, SIG_DFL);
    close(sv[1]);
    errno = 0;
    KV_CHECK(kv_proto_send(sv[0], "{}", &err) == -1 && errno == EPIPE);
    KV_CHECK_STR_CONTAINS(err.msg, "Broken pipe");
    close(sv[0]);

    /* a big line on a non-blocking socket: waits for a slow reader */
    size_t big = 900 * 1024;
    char *line = malloc(big + 1);
    KV_REQUIRE(line);
    memset(line, 'y', big);
    line[big] = '\0';
    KV_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    KV_REQUIRE(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
    pid_t pid = fork();
    KV_REQUIRE(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        size_t total = 0;
        char chunk[4096];
        for (;;) {
            usleep(200);
            ssize_t r = read(sv[1], chunk, sizeof chunk);
            if (r <= 0)
                break;
            total += (size_t)r;
            if (chunk[r - 1] == '\n')
                break;
        }
        _exit(total == big + 1 ? 0 : 1);
    }
    close(sv[1]);
    KV_CHECKF(kv_proto_send(sv[0], line, &err) == 0, "%s", err.msg);
    int st;
    KV_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(sv[0]);

    /* ... but never forever on a peer that does not read */
    KV_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    KV_REQUIRE(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
    int64_t t0 = kv_monotonic_ns();
    KV_CHECK(kv_proto_send(sv[0], line, &err) == -1);
    double took = (double)(kv_monotonic_ns() - t0) / 1e9;
    KV_CHECK_STR_CONTAINS(err.msg, "has not read for 2000 ms");
    KV_CHECKF(took >= 1.9 && took < 3.0, "took %.3f s", took);
    close(sv[0]);
    close(sv[1]);
    free(line);
}

int main(void)
{
    kv_test_fresh_dir(tmp_dir, sizeof tmp_dir, "protocol");
    KV_RUN(test_job_round_trip);
    KV_RUN(test_result_round_trip);
    KV_RUN(test_small_messages);
    KV_RUN(test_decode_errors);
    KV_RUN(test_worker_round_trip);
    KV_RUN(test_worker_malformed);
    KV_RUN(test_doctor);
    KV_RUN(test_graph_json);
    KV_RUN(test_merge);
    KV_RUN(test_merge_origin);
    KV_RUN(test_line_reader_split);
    KV_RUN(test_line_reader_long);
    KV_RUN(test_send);
    return kv_test_summary();
}
