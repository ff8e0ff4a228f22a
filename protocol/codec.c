/* codec.c — the supervisor/worker protocol's messages: strict JSON
 * encoding and decoding of every message (protocol/protocol.h;
 * docs/evaluator.md, "Supervisor and workers"). The transport is
 * wire.c's. Both ends speak only through this file: the supervisor, and
 * kevo-worker (worker/main.c) and the tests' fake worker, so the tests of
 * this codec test what the real worker says.
 *
 * Encoding is cJSON's unformatted printer, so a message is one line whatever
 * its strings hold (the doctor report alone, printed for people too, is
 * formatted). Decoding is strict and goes through the schema engine
 * (common/schema.h, in its KV_SCHEMA_WIRE words): a message must be one JSON
 * object whose "type" is known, every member its type has (the table below)
 * must be present with the right JSON type and range, and a member it does
 * not have (or a duplicate) is an error. Messages name the member, e.g.
 *   result message: $.sizes[1].ref.median: expected a number, got a string
 * 64-bit integers that a double cannot hold exactly (beyond 2^53-1: job ids,
 * seeds) are written as decimal strings; decoding takes either form. Non-finite doubles
 * are written as null and read back as NaN. */
#include "common/json_out.h"
#include "protocol/protocol.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/json.h"
#include "common/schema.h"

/* Ranks in messages: far more than any node has GPUs. */
#define KV_PROTO_MAX_RANK 4095

/* ---- encoding helpers ----------------------------------------------------------------------- */

/* An encoder carries an "out of memory" flag so that callers can add members
 * one after another and check once. */
typedef struct {
    int oom;
} enc;

static cJSON *add(enc *e, cJSON *obj, const char *key, cJSON *item)
{
    if (!item || !obj) {
        e->oom = 1;
        cJSON_Delete(item);
        return NULL;
    }
    if (!cJSON_AddItemToObject(obj, key, item)) {
        e->oom = 1;
        cJSON_Delete(item);
        return NULL;
    }
    return item;
}

static void put_str(enc *e, cJSON *o, const char *key, const char *v)
{
    add(e, o, key, cJSON_CreateString(v));
}

/* Numbers are written by us, not by cJSON's printer: it checks its 15-digit
 * form with a tolerance, so it can lose the last bits of a double and prints
 * integers above 10^15 inexactly. Ours read back bit for bit (strtod is
 * correctly rounded). */
static void put_number_text(enc *e, cJSON *o, const char *key, const char *text)
{
    add(e, o, key, cJSON_CreateRaw(text));
}

static void put_i64(enc *e, cJSON *o, const char *key, int64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRId64, v);
    if (v >= -(int64_t)KV_JSON_INT_EXACT_MAX && v <= (int64_t)KV_JSON_INT_EXACT_MAX)
        put_number_text(e, o, key, s);
    else
        add(e, o, key, cJSON_CreateString(s)); /* a double would round it */
}

static void put_int(enc *e, cJSON *o, const char *key, int v)
{
    put_i64(e, o, key, v);
}

static void put_u64(enc *e, cJSON *o, const char *key, uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRIu64, v);
    if (v <= (uint64_t)KV_JSON_INT_EXACT_MAX)
        put_number_text(e, o, key, s);
    else
        add(e, o, key, cJSON_CreateString(s));
}

static void put_bool(enc *e, cJSON *o, const char *key, int v)
{
    add(e, o, key, cJSON_CreateBool(v != 0));
}

/* The shortest of %.15g, %.16g, %.17g that reads back exactly; null for
 * NaN and infinities, which JSON cannot hold. */
static void put_double(enc *e, cJSON *o, const char *key, double v)
{
    if (!isfinite(v)) {
        add(e, o, key, cJSON_CreateNull());
        return;
    }
    char s[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            break;
    }
    /* printf follows LC_NUMERIC; JSON's point is always '.' */
    char point = localeconv()->decimal_point[0];
    if (point != '.')
        for (char *p = s; *p; p++)
            if (*p == point)
                *p = '.';
    put_number_text(e, o, key, s);
}

/* A new object appended to array; NULL (and e->oom) when out of memory. */
static cJSON *add_element(enc *e, cJSON *array)
{
    cJSON *x = cJSON_CreateObject();
    if (!x || !array || !cJSON_AddItemToArray(array, x)) {
        cJSON_Delete(x);
        e->oom = 1;
        return NULL;
    }
    return x;
}

/* Prints (on one line unless formatted) and frees the object; NULL when
 * anything ran out of memory. */
static char *print_and_free(enc *e, cJSON *root, int formatted)
{
    char *s = NULL;
    if (root && !e->oom)
        s = kv_json_print(root, formatted, NULL);
    cJSON_Delete(root);
    return s;
}

static char *finish(enc *e, cJSON *root)
{
    return print_and_free(e, root, 0);
}

/* ---- message types -------------------------------------------------------------------------- */

static const char *const type_names[] = {
    [KV_MSG_HELLO] = "hello",   [KV_MSG_UID] = "uid",   [KV_MSG_INIT] = "init",
    [KV_MSG_READY] = "ready",   [KV_MSG_JOB] = "job",   [KV_MSG_PROGRESS] = "progress",
    [KV_MSG_RESULT] = "result", [KV_MSG_EXIT] = "exit",
};
#define N_TYPES ((int)(sizeof type_names / sizeof type_names[0]))

const char *kv_msg_type_name(kv_msg_type t)
{
    if ((int)t < 0 || (int)t >= N_TYPES)
        return "unknown";
    return type_names[t];
}

/* Parses one line as a JSON object. */
static cJSON *parse_object(const char *line, kv_err *err)
{
    char what[KV_JSON_MSG_MAX];
    if (kv_json_too_deep(line, what, sizeof what))
        return kv_err_set(err, "%s", what), NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(line, &end, 1);
    if (!root) {
        size_t at = end && end >= line ? (size_t)(end - line) : 0;
        return kv_err_set(err, "invalid JSON at byte %zu", at), NULL;
    }
    if (kv_json_find_nul(line, root, what, sizeof what)) {
        cJSON_Delete(root);
        return kv_err_set(err, "%s", what), NULL;
    }
    if (!cJSON_IsObject(root)) {
        kv_err_set(err, "$: expected an object, got %s", kv_json_type(root));
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int get_type(const cJSON *o, kv_msg_type *type, kv_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!v)
        return kv_err_set(err, "$.type: missing");
    if (!cJSON_IsString(v))
        return kv_err_set(err, "$.type: expected a string, got %s", kv_json_type(v));
    for (int i = 0; i < N_TYPES; i++) {
        if (strcmp(v->valuestring, type_names[i]) == 0) {
            *type = (kv_msg_type)i;
            return 0;
        }
    }
    return kv_err_set(err, "$.type: unknown message type \"%.40s\"", v->valuestring);
}

/* Parses a line that must be a message of type want. */
static cJSON *parse_message(const char *line, kv_msg_type want, kv_err *err)
{
    cJSON *root = parse_object(line, err);
    if (!root)
        return NULL;
    kv_msg_type t;
    if (get_type(root, &t, err) != 0) {
        cJSON_Delete(root);
        return NULL;
    }
    if (t != want) {
        kv_err_set(err, "$.type: expected \"%s\", got \"%s\"", kv_msg_type_name(want),
                   kv_msg_type_name(t));
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

int kv_proto_type(const char *line, kv_msg_type *type, kv_err *err)
{
    cJSON *root = parse_object(line, err);
    if (!root)
        return kv_err_prefix(err, "message");
    int rc = get_type(root, type, err);
    cJSON_Delete(root);
    return rc ? kv_err_prefix(err, "message") : 0;
}

/* ---- encoding ------------------------------------------------------------------------------- */

char *kv_proto_msg_to_json(const kv_proto_msg *m)
{
    enc e = {0};
    cJSON *o = cJSON_CreateObject();
    put_str(&e, o, "type", kv_msg_type_name(m->type));
    switch (m->type) {
    case KV_MSG_HELLO:
        put_int(&e, o, "rank", m->rank);
        put_int(&e, o, "pid", m->pid);
        put_int(&e, o, "device", m->device);
        break;
    case KV_MSG_UID:
    case KV_MSG_INIT: put_str(&e, o, "uid", m->uid); break;
    case KV_MSG_READY: put_int(&e, o, "rank", m->rank); break;
    case KV_MSG_PROGRESS:
        put_u64(&e, o, "job", m->job);
        put_int(&e, o, "rank", m->rank);
        put_str(&e, o, "phase", m->phase);
        break;
    case KV_MSG_EXIT: break;
    default: /* job and result have their own encoders */ e.oom = 1; break;
    }
    return finish(&e, o);
}

int kv_proto_send_msg(int fd, const kv_proto_msg *m, kv_err *err)
{
    char *line = kv_proto_msg_to_json(m);
    if (!line)
        return kv_err_set(err,
                          "%s message: cannot be encoded (out of memory, or not a small "
                          "message)",
                          kv_msg_type_name(m->type));
    int rc = kv_proto_send(fd, line, err);
    free(line);
    return rc;
}

char *kv_proto_job_to_json(const kv_job *job)
{
    enc e = {0};
    cJSON *o = cJSON_CreateObject();
    put_str(&e, o, "type", "job");
    put_u64(&e, o, "id", job->id);
    put_str(&e, o, "problem_dir", job->problem_dir);
    put_str(&e, o, "reference_so", job->reference_so);
    put_str(&e, o, "candidate_so", job->candidate_so);
    put_str(&e, o, "inputs_so", job->inputs_so);
    cJSON *sizes = add(&e, o, "sizes", cJSON_CreateArray());
    for (int i = 0; sizes && i < job->n_sizes && i < KV_JOB_MAX_SIZES; i++) {
        cJSON *s = cJSON_CreateString(job->sizes[i]);
        if (!s || !cJSON_AddItemToArray(sizes, s)) {
            cJSON_Delete(s);
            e.oom = 1;
        }
    }
    put_int(&e, o, "trials", job->trials);
    put_int(&e, o, "warmup", job->warmup);
    put_double(&e, o, "warmup_ms", job->warmup_ms);
    put_int(&e, o, "iters", job->iters);
    put_int(&e, o, "time_sizes_mask", job->time_sizes_mask);
    put_u64(&e, o, "seed", job->seed);
    put_bool(&e, o, "capture", job->capture);
    put_bool(&e, o, "graph_timing", job->graph_timing);
    put_bool(&e, o, "selfcheck", job->selfcheck);
    put_u64(&e, o, "scratch_bytes", job->scratch_bytes);
    put_str(&e, o, "dump_dir", job->dump_dir);
    return finish(&e, o);
}

static void put_timing(enc *e, cJSON *o, const char *key, const kv_timing *t)
{
    cJSON *x = add(e, o, key, cJSON_CreateObject());
    if (!x)
        return;
    put_double(e, x, "median", t->median);
    put_double(e, x, "p10", t->p10);
    put_double(e, x, "p90", t->p90);
    put_double(e, x, "mean", t->mean);
    put_double(e, x, "cv", t->cv);
    put_int(e, x, "n", t->n);
}

char *kv_proto_result_to_json(uint64_t job_id, int rank, const kv_job_result *r)
{
    enc e = {0};
    cJSON *o = cJSON_CreateObject();
    put_str(&e, o, "type", "result");
    put_u64(&e, o, "job", job_id);
    put_int(&e, o, "rank", rank);
    put_str(&e, o, "verdict", kv_verdict_name(r->verdict));
    put_str(&e, o, "message", r->message);
    put_bool(&e, o, "origin", r->origin);
    cJSON *sizes = add(&e, o, "sizes", cJSON_CreateArray());
    for (int i = 0; sizes && i < r->n_sizes && i < KV_JOB_MAX_SIZES; i++) {
        const kv_size_outcome *s = &r->sizes[i];
        cJSON *x = add_element(&e, sizes);
        if (!x)
            break;
        put_str(&e, x, "name", s->name);
        put_bool(&e, x, "checked", s->checked);
        put_bool(&e, x, "ok", s->ok);
        put_bool(&e, x, "timed", s->timed);
        put_timing(&e, x, "ref", &s->ref);
        put_timing(&e, x, "cand", &s->cand);
        put_int(&e, x, "graph_calls", s->graph_calls);
        put_str(&e, x, "timing_note", s->timing_note);
        put_bool(&e, x, "ref_plain", s->ref_plain);
        put_int(&e, x, "bad_rank", s->bad_rank);
        put_str(&e, x, "bad_tensor", s->bad_tensor);
        put_i64(&e, x, "bad_index", s->bad_index);
        put_double(&e, x, "expected", s->expected);
        put_double(&e, x, "got", s->got);
        put_double(&e, x, "max_abs_err", s->max_abs_err);
        put_double(&e, x, "max_rel_err", s->max_rel_err);
        put_i64(&e, x, "bad_count", s->bad_count);
        put_str(&e, x, "detail", s->detail);
    }
    put_bool(&e, o, "graph_captured", r->graph_captured);
    put_int(&e, o, "kernel_nodes", r->kernel_nodes);
    put_int(&e, o, "memcpy_nodes", r->memcpy_nodes);
    put_int(&e, o, "memset_nodes", r->memset_nodes);
    put_int(&e, o, "other_nodes", r->other_nodes);
    put_double(&e, o, "peer_copy_bytes", r->peer_copy_bytes);
    put_str(&e, o, "graph_json", r->graph_json);
    put_double(&e, o, "wall_s", r->wall_s);
    put_double(&e, o, "gpu_s", r->gpu_s);
    return finish(&e, o);
}

/* ---- a result's graph_json ------------------------------------------------------------------ */

/* The whole document into out, or "" when it does not fit. */
static void put_document(enc *e, cJSON *o, char *out, size_t cap)
{
    char *s = finish(e, o);
    if (s && strlen(s) < cap)
        strcpy(out, s);
    else if (cap > 0)
        out[0] = '\0';
    free(s);
}

void kv_proto_graph_failed(char *out, size_t cap, const char *error)
{
    enc e = {0};
    cJSON *o = cJSON_CreateObject();
    put_bool(&e, o, "captured", 0);
    put_str(&e, o, "error", error);
    put_document(&e, o, out, cap);
}

void kv_proto_graph_begin(char *out, size_t cap)
{
    enc e = {0};
    cJSON *o = cJSON_CreateObject();
    put_bool(&e, o, "captured", 1);
    add(&e, o, "nodes", cJSON_CreateArray());
    put_document(&e, o, out, cap);
}

int kv_proto_graph_add(char *out, size_t cap, const char *type, const char *name)
{
    char cut[41];
    snprintf(cut, sizeof cut, "%s", name ? name : "");
    enc e = {0};
    cJSON *o = cJSON_CreateObject();
    put_str(&e, o, "type", type);
    put_str(&e, o, "name", cut);
    char *node = finish(&e, o);
    /* out ends "[...]}": the node goes before "]}", after a comma unless first */
    size_t len = strlen(out);
    if (!node || len < 3 || strcmp(out + len - 2, "]}") != 0) {
        free(node);
        return -1;
    }
    int first = out[len - 3] == '[';
    size_t need = len + !first + strlen(node) + 1;
    if (need > cap) {
        free(node);
        return -1;
    }
    snprintf(out + len - 2, cap - (len - 2), "%s%s]}", first ? "" : ",", node);
    free(node);
    return 0;
}

char *kv_proto_doctor_to_json(const kv_proto_doctor *d)
{
    enc e = {0};
    cJSON *o = cJSON_CreateObject();
    if (d->error[0])
        put_str(&e, o, "error", d->error);
    put_int(&e, o, "cuda_driver", d->cuda_driver);
    put_int(&e, o, "cuda_runtime", d->cuda_runtime);
    put_int(&e, o, "nccl", d->nccl);
    put_str(&e, o, "NCCL_NVLS_ENABLE", d->nvls_enable);
    cJSON *devs = add(&e, o, "devices", cJSON_CreateArray());
    for (int i = 0; devs && i < d->n_gpus && i < KV_PROTO_MAX_GPUS; i++) {
        const kv_proto_gpu *g = &d->gpus[i];
        cJSON *x = add_element(&e, devs);
        if (!x)
            break;
        put_int(&e, x, "index", g->index);
        put_str(&e, x, "name", g->name);
        put_int(&e, x, "cc_major", g->cc_major);
        put_int(&e, x, "cc_minor", g->cc_minor);
        put_int(&e, x, "sms", g->sms);
        put_u64(&e, x, "memory_bytes", g->memory_bytes);
        put_int(&e, x, "l2_bytes", g->l2_bytes);
        cJSON *peers = add(&e, x, "peers", cJSON_CreateArray());
        for (int k = 0; peers && k < g->n_peers && k < KV_PROTO_MAX_GPUS - 1; k++) {
            const kv_proto_peer *q = &g->peers[k];
            cJSON *y = add_element(&e, peers);
            if (!y)
                break;
            put_int(&e, y, "device", q->device);
            put_bool(&e, y, "access", q->access);
            put_bool(&e, y, "native_atomics", q->native_atomics);
            put_int(&e, y, "performance_rank", q->performance_rank);
        }
    }
    return print_and_free(&e, o, 1);
}

/* ---- decoding: the table of every message's members ---------------------------------------- */

/* A result message's members outside kv_job_result. */
typedef struct {
    uint64_t job;
    int rank;
    kv_job_result r;
} result_msg;

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "scratch_bytes is read as a uint64_t");
_Static_assert(KV_PROTO_UID_HEX == 2 * KV_PROTO_UID_BYTES, "two hex digits a byte");

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int is_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (hex_digit(s[i]) < 0)
            return 0;
    return 1;
}

void kv_proto_uid_to_hex(const unsigned char id[KV_PROTO_UID_BYTES], char hex[KV_PROTO_UID_HEX + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < KV_PROTO_UID_BYTES; i++) {
        hex[2 * i] = digits[id[i] >> 4];
        hex[2 * i + 1] = digits[id[i] & 15];
    }
    hex[KV_PROTO_UID_HEX] = '\0';
}

int kv_proto_uid_from_hex(const char *hex, unsigned char id[KV_PROTO_UID_BYTES], kv_err *err)
{
    if (strlen(hex) != KV_PROTO_UID_HEX)
        return kv_err_set(err, "uid: expected %d hex digits", KV_PROTO_UID_HEX);
    for (size_t i = 0; i < KV_PROTO_UID_BYTES; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return kv_err_set(err, "uid: expected %d hex digits", KV_PROTO_UID_HEX);
        id[i] = (unsigned char)((unsigned)hi << 4 | (unsigned)lo);
    }
    return 0;
}

static int check_uid(const kv_schema_key *k, const void *base, const char *jpath, kv_err *err)
{
    if (!is_hex(kv_schema_cfield(k, base), KV_PROTO_UID_HEX))
        return kv_schema_fail(err, jpath, "expected %d hex digits", KV_PROTO_UID_HEX);
    return KV_OK;
}

/* "type" was read before the table (it chooses the table's rows). */
static int read_type(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                     void *base, kv_err *err)
{
    (void)s;
    (void)k;
    (void)v;
    (void)jpath;
    (void)base;
    (void)err;
    return KV_OK;
}

static int read_job_sizes(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                          const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_job *j = base;
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array, got %s", kv_json_type(v));
    int n = cJSON_GetArraySize(v);
    if (n < 1 || n > KV_JOB_MAX_SIZES)
        return kv_schema_fail(err, jpath, "%d sizes, expected 1..%d", n, KV_JOB_MAX_SIZES);
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        if (!cJSON_IsString(c))
            return kv_schema_fail(err, ipath, "expected a string, got %s", kv_json_type(c));
        if (strlen(c->valuestring) >= sizeof j->sizes[i])
            return kv_schema_fail(err, ipath, "longer than %zu bytes", sizeof j->sizes[i] - 1);
        strcpy(j->sizes[i], c->valuestring);
    }
    j->n_sizes = n;
    return KV_OK;
}

static int read_verdict(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                        const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_job_result *r = &((result_msg *)base)->r;
    if (!cJSON_IsString(v))
        return kv_schema_fail(err, jpath, "expected a string, got %s", kv_json_type(v));
    if (strlen(v->valuestring) >= 32)
        return kv_schema_fail(err, jpath, "longer than 31 bytes");
    if (kv_verdict_parse(v->valuestring, &r->verdict) != 0)
        return kv_schema_fail(err, jpath, "\"%s\" is not a verdict", v->valuestring);
    return KV_OK;
}

/* Reads an array of at most max objects, each by the rows below row (e.g.
 * "doctor.devices[]"), into elements of size bytes from first; *n its length. */
static int read_objects(const kv_schema *s, const char *row, const cJSON *v, const char *jpath,
                        void *first, size_t size, int max, int *n, kv_err *err)
{
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array, got %s", kv_json_type(v));
    int len = cJSON_GetArraySize(v);
    if (len > max)
        return kv_schema_fail(err, jpath, "%d elements, at most %d", len, max);
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        if (kv_schema_read(s, row, c, ipath, (char *)first + (size_t)i * size, err))
            return KV_FAIL;
    }
    *n = len;
    return KV_OK;
}

static int read_result_sizes(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                             const char *jpath, void *base, kv_err *err)
{
    (void)k;
    kv_job_result *r = &((result_msg *)base)->r;
    return read_objects(s, "result.sizes[]", v, jpath, r->sizes, sizeof r->sizes[0],
                        KV_JOB_MAX_SIZES, &r->n_sizes, err);
}

static int read_gpus(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                     void *base, kv_err *err)
{
    (void)k;
    kv_proto_doctor *d = base;
    return read_objects(s, "doctor.devices[]", v, jpath, d->gpus, sizeof d->gpus[0],
                        KV_PROTO_MAX_GPUS, &d->n_gpus, err);
}

static int read_peers(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                      void *base, kv_err *err)
{
    (void)k;
    kv_proto_gpu *g = base;
    return read_objects(s, "doctor.devices[].peers[]", v, jpath, g->peers, sizeof g->peers[0],
                        KV_PROTO_MAX_GPUS - 1, &g->n_peers, err);
}

#define FIELD(type, m) .offset = offsetof(type, m), .size = sizeof(((type *)0)->m)
#define M(m) FIELD(kv_proto_msg, m)
#define J(m) FIELD(kv_job, m)
#define R(m) FIELD(result_msg, m)
#define Z(m) FIELD(kv_size_outcome, m)
#define D(m) FIELD(kv_proto_doctor, m)
#define G(m) FIELD(kv_proto_gpu, m)
#define P(m) FIELD(kv_proto_peer, m)
#define REQ KV_SCHEMA_REQUIRED
#define TYPE_ROW(msg)                                                                  \
    {                                                                                  \
        .path = msg ".type", .type = KV_SCHEMA_CUSTOM, .flags = REQ, .read = read_type \
    }
#define RANK_ROW(msg, base)                                                             \
    {                                                                                   \
        .path = msg ".rank", .type = KV_SCHEMA_INT, .flags = REQ, base(rank), .min = 0, \
        .max = KV_PROTO_MAX_RANK                                                        \
    }
#define INT_ROW(p, base, m)                                                                 \
    {                                                                                       \
        .path = p, .type = KV_SCHEMA_INT, .flags = REQ, base(m), .min = 0, .max = INT32_MAX \
    }
#define NUM_ROW(p, base, m)                                                             \
    {                                                                                   \
        .path = p, .type = KV_SCHEMA_NUMBER, .flags = REQ | KV_SCHEMA_NULL_NAN, base(m) \
    }
#define U64_ROW(p, base, m)                                                           \
    {                                                                                 \
        .path = p, .type = KV_SCHEMA_UINT64, .flags = REQ | KV_SCHEMA_DIGITS, base(m) \
    }
#define I64_ROW(p, base, m)                                                           \
    {                                                                                 \
        .path = p, .type = KV_SCHEMA_INT64, .flags = REQ | KV_SCHEMA_DIGITS, base(m), \
        .min = -INFINITY, .max = INFINITY                                             \
    }
#define STR_ROW(p, base, m)                                        \
    {                                                              \
        .path = p, .type = KV_SCHEMA_STRING, .flags = REQ, base(m) \
    }
#define BOOL_ROW(p, base, m)                                     \
    {                                                            \
        .path = p, .type = KV_SCHEMA_BOOL, .flags = REQ, base(m) \
    }
#define TIMING_ROWS(side)                                                      \
    {.path = "result.sizes[]." #side, .type = KV_SCHEMA_OBJECT, .flags = REQ}, \
        NUM_ROW("result.sizes[]." #side ".median", Z, side.median),            \
        NUM_ROW("result.sizes[]." #side ".p10", Z, side.p10),                  \
        NUM_ROW("result.sizes[]." #side ".p90", Z, side.p90),                  \
        NUM_ROW("result.sizes[]." #side ".mean", Z, side.mean),                \
        NUM_ROW("result.sizes[]." #side ".cv", Z, side.cv),                    \
        INT_ROW("result.sizes[]." #side ".n", Z, side.n)

/* Each message's rows below its type's name; in the order they are read. */
static const kv_schema_key rows[] = {
    TYPE_ROW("hello"),
    RANK_ROW("hello", M),
    {.path = "hello.pid", .type = KV_SCHEMA_INT, .flags = REQ, M(pid), .min = 1, .max = INT32_MAX},
    INT_ROW("hello.device", M, device),
    TYPE_ROW("uid"),
    {.path = "uid.uid", .type = KV_SCHEMA_STRING, .flags = REQ, M(uid), .check = check_uid},
    TYPE_ROW("init"),
    {.path = "init.uid", .type = KV_SCHEMA_STRING, .flags = REQ, M(uid), .check = check_uid},
    TYPE_ROW("ready"),
    RANK_ROW("ready", M),
    TYPE_ROW("progress"),
    U64_ROW("progress.job", M, job),
    RANK_ROW("progress", M),
    {.path = "progress.phase", .type = KV_SCHEMA_STRING, .flags = REQ | KV_SCHEMA_CUT, M(phase)},
    TYPE_ROW("exit"),

    TYPE_ROW("job"),
    U64_ROW("job.id", J, id),
    STR_ROW("job.problem_dir", J, problem_dir),
    STR_ROW("job.reference_so", J, reference_so),
    STR_ROW("job.candidate_so", J, candidate_so),
    STR_ROW("job.inputs_so", J, inputs_so),
    STR_ROW("job.dump_dir", J, dump_dir),
    {.path = "job.sizes", .type = KV_SCHEMA_CUSTOM, .flags = REQ, J(sizes), .read = read_job_sizes},
    INT_ROW("job.trials", J, trials),
    INT_ROW("job.warmup", J, warmup),
    NUM_ROW("job.warmup_ms", J, warmup_ms),
    INT_ROW("job.iters", J, iters),
    INT_ROW("job.time_sizes_mask", J, time_sizes_mask),
    U64_ROW("job.seed", J, seed),
    BOOL_ROW("job.capture", J, capture),
    BOOL_ROW("job.graph_timing", J, graph_timing),
    BOOL_ROW("job.selfcheck", J, selfcheck),
    U64_ROW("job.scratch_bytes", J, scratch_bytes),

    TYPE_ROW("result"),
    U64_ROW("result.job", R, job),
    RANK_ROW("result", R),
    {.path = "result.verdict",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     R(r.verdict),
     .read = read_verdict},
    STR_ROW("result.message", R, r.message),
    BOOL_ROW("result.origin", R, r.origin),
    {.path = "result.sizes",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     R(r.sizes),
     .read = read_result_sizes},
    STR_ROW("result.sizes[].name", Z, name),
    BOOL_ROW("result.sizes[].checked", Z, checked),
    BOOL_ROW("result.sizes[].ok", Z, ok),
    BOOL_ROW("result.sizes[].timed", Z, timed),
    TIMING_ROWS(ref),
    TIMING_ROWS(cand),
    INT_ROW("result.sizes[].graph_calls", Z, graph_calls),
    STR_ROW("result.sizes[].timing_note", Z, timing_note),
    BOOL_ROW("result.sizes[].ref_plain", Z, ref_plain),
    {.path = "result.sizes[].bad_rank",
     .type = KV_SCHEMA_INT,
     .flags = REQ,
     Z(bad_rank),
     .min = -1,
     .max = KV_PROTO_MAX_RANK}, /* -1: none */
    STR_ROW("result.sizes[].bad_tensor", Z, bad_tensor),
    I64_ROW("result.sizes[].bad_index", Z, bad_index),
    NUM_ROW("result.sizes[].expected", Z, expected),
    NUM_ROW("result.sizes[].got", Z, got),
    NUM_ROW("result.sizes[].max_abs_err", Z, max_abs_err),
    NUM_ROW("result.sizes[].max_rel_err", Z, max_rel_err),
    I64_ROW("result.sizes[].bad_count", Z, bad_count),
    STR_ROW("result.sizes[].detail", Z, detail),
    BOOL_ROW("result.graph_captured", R, r.graph_captured),
    INT_ROW("result.kernel_nodes", R, r.kernel_nodes),
    INT_ROW("result.memcpy_nodes", R, r.memcpy_nodes),
    INT_ROW("result.memset_nodes", R, r.memset_nodes),
    INT_ROW("result.other_nodes", R, r.other_nodes),
    NUM_ROW("result.peer_copy_bytes", R, r.peer_copy_bytes),
    STR_ROW("result.graph_json", R, r.graph_json),
    NUM_ROW("result.wall_s", R, r.wall_s),
    NUM_ROW("result.gpu_s", R, r.gpu_s),

    /* the doctor report: no "type"; "error" only when the GPUs cannot be counted */
    {.path = "doctor.error", .type = KV_SCHEMA_STRING, .flags = KV_SCHEMA_NONEMPTY, D(error)},
    INT_ROW("doctor.cuda_driver", D, cuda_driver),
    INT_ROW("doctor.cuda_runtime", D, cuda_runtime),
    INT_ROW("doctor.nccl", D, nccl),
    STR_ROW("doctor.NCCL_NVLS_ENABLE", D, nvls_enable),
    {.path = "doctor.devices", .type = KV_SCHEMA_CUSTOM, .flags = REQ, D(gpus), .read = read_gpus},
    {.path = "doctor.devices[].index",
     .type = KV_SCHEMA_INT,
     .flags = REQ,
     G(index),
     .min = 0,
     .max = KV_PROTO_MAX_GPUS - 1},
    STR_ROW("doctor.devices[].name", G, name),
    INT_ROW("doctor.devices[].cc_major", G, cc_major),
    INT_ROW("doctor.devices[].cc_minor", G, cc_minor),
    INT_ROW("doctor.devices[].sms", G, sms),
    U64_ROW("doctor.devices[].memory_bytes", G, memory_bytes),
    INT_ROW("doctor.devices[].l2_bytes", G, l2_bytes),
    {.path = "doctor.devices[].peers",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     G(peers),
     .read = read_peers},
    {.path = "doctor.devices[].peers[].device",
     .type = KV_SCHEMA_INT,
     .flags = REQ,
     P(device),
     .min = 0,
     .max = KV_PROTO_MAX_GPUS - 1},
    BOOL_ROW("doctor.devices[].peers[].access", P, access),
    BOOL_ROW("doctor.devices[].peers[].native_atomics", P, native_atomics),
    INT_ROW("doctor.devices[].peers[].performance_rank", P, performance_rank),
};

static const kv_schema messages = {.keys = rows,
                                   .n = sizeof rows / sizeof rows[0],
                                   .flags = KV_SCHEMA_TABLE_ORDER | KV_SCHEMA_WIRE};

/* ---- decoding ------------------------------------------------------------------------------- */

/* Reads a small message of type t from its parsed object. */
static int decode_small(const cJSON *o, kv_msg_type t, kv_proto_msg *m, kv_err *err)
{
    memset(m, 0, sizeof *m);
    m->type = t;
    if (kv_schema_read(&messages, kv_msg_type_name(t), o, "$", m, err))
        return kv_err_prefix(err, "%s message", kv_msg_type_name(t));
    return 0;
}

/* Reads a job message from its parsed object; job is untouched on failure. */
static int decode_job(const cJSON *o, kv_job *job, kv_err *err)
{
    kv_job j;
    memset(&j, 0, sizeof j);
    if (kv_schema_read(&messages, "job", o, "$", &j, err) != KV_OK)
        return kv_err_prefix(err, "job message");
    *job = j;
    return 0;
}

int kv_proto_msg_from_json(const char *line, kv_proto_msg *m, kv_err *err)
{
    kv_msg_type t;
    cJSON *o = parse_object(line, err);
    if (!o)
        return kv_err_prefix(err, "message");
    int rc;
    if (get_type(o, &t, err) != 0)
        rc = kv_err_prefix(err, "message");
    else if (t == KV_MSG_JOB || t == KV_MSG_RESULT)
        rc = kv_err_set(err, "%s message: $.type: \"%s\" is not a small message",
                        kv_msg_type_name(t), kv_msg_type_name(t));
    else
        rc = decode_small(o, t, m, err);
    cJSON_Delete(o);
    return rc;
}

int kv_proto_worker_in_from_json(const char *line, kv_proto_msg *m, kv_job *job, kv_err *err)
{
    kv_msg_type t;
    cJSON *o = parse_object(line, err);
    if (!o)
        return kv_err_prefix(err, "message");
    int rc;
    if (get_type(o, &t, err) != 0)
        rc = kv_err_prefix(err, "message");
    else if (t == KV_MSG_JOB) {
        rc = decode_job(o, job, err);
        if (rc == 0) {
            memset(m, 0, sizeof *m);
            m->type = KV_MSG_JOB;
        }
    } else if (t == KV_MSG_INIT || t == KV_MSG_EXIT)
        rc = decode_small(o, t, m, err);
    else
        rc = kv_err_set(err, "message: $.type: a worker does not receive \"%s\"",
                        kv_msg_type_name(t));
    cJSON_Delete(o);
    return rc;
}

int kv_proto_job_from_json(const char *line, kv_job *job, kv_err *err)
{
    cJSON *o = parse_message(line, KV_MSG_JOB, err);
    if (!o)
        return kv_err_prefix(err, "job message");
    int rc = decode_job(o, job, err);
    cJSON_Delete(o);
    return rc;
}

int kv_proto_result_from_json(const char *line, uint64_t *job_id, int *rank, kv_job_result *r,
                              kv_err *err)
{
    /* kv_job_result is large; decode into the heap and copy on success */
    result_msg *x = calloc(1, sizeof *x);
    if (!x)
        return kv_err_set(err, "result message: out of memory");
    cJSON *o = parse_message(line, KV_MSG_RESULT, err);
    if (!o) {
        free(x);
        return kv_err_prefix(err, "result message");
    }
    int rc = kv_schema_read(&messages, "result", o, "$", x, err);
    cJSON_Delete(o);
    if (rc != KV_OK) {
        free(x);
        return kv_err_prefix(err, "result message");
    }
    *job_id = x->job;
    *rank = x->rank;
    memcpy(r, &x->r, sizeof *r);
    free(x);
    return 0;
}

int kv_proto_doctor_from_json(const char *text, kv_proto_doctor *d, kv_err *err)
{
    cJSON *o = parse_object(text, err);
    if (!o)
        return kv_err_prefix(err, "doctor report");
    memset(d, 0, sizeof *d);
    int rc = kv_schema_read(&messages, "doctor", o, "$", d, err);
    cJSON_Delete(o);
    return rc != KV_OK ? kv_err_prefix(err, "doctor report") : 0;
}
