/* protocol_codec.c — the supervisor/worker protocol's messages: strict JSON
 * encoding and decoding of every message (evaluator/protocol.h;
 * docs/evaluator.md, "Supervisor and workers"). The transport is
 * protocol_wire.c's.
 *
 * Encoding is cJSON's unformatted printer, so a message is one line whatever
 * its strings hold. Decoding is strict: a message must be one JSON object
 * whose "type" is known, every member its type has must be present with the
 * right JSON type and range, and a member it does not have (or a duplicate)
 * is an error. Messages name the member, e.g.
 *   result message: $.sizes[1].ref.median: expected a number, got a string
 * 64-bit integers that a double cannot hold exactly (job ids, seeds) are
 * written as decimal strings; decoding takes either form. Non-finite doubles
 * are written as null and read back as NaN. */
#include "kevo/json_out.h"
#include "evaluator/protocol.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kevo/json.h"

/* 2^53: integers up to this are exact in a double. */
#define EXACT_INT_MAX 9007199254740992.0
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
    if (v >= -((int64_t)1 << 53) && v <= (int64_t)1 << 53)
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
    if (v <= (uint64_t)1 << 53)
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

/* Prints and frees the object; NULL when anything ran out of memory. */
static char *finish(enc *e, cJSON *root)
{
    char *s = NULL;
    if (root && !e->oom)
        s = kv_json_print(root, 0, NULL);
    cJSON_Delete(root);
    return s;
}

/* ---- decoding helpers ----------------------------------------------------------------------- */

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

/* Every member of o must be one of keys (NULL-terminated), once. */
static int check_members(const cJSON *o, const char *path, const char *const *keys, kv_err *err)
{
    for (const cJSON *c = o->child; c; c = c->next) {
        int known = 0;
        for (int i = 0; keys[i]; i++)
            if (strcmp(c->string, keys[i]) == 0)
                known = 1;
        if (!known)
            return kv_err_set(err, "%s.%s: unknown member", path, c->string);
        if (kv_json_is_duplicate(o, c))
            return kv_err_set(err, "%s.%s: duplicate member", path, c->string);
    }
    return 0;
}

static const cJSON *member(const cJSON *o, const char *path, const char *key, kv_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        kv_err_set(err, "%s.%s: missing", path, key);
    return v;
}

/* An integer in [lo, hi]; a decimal string too where strings is set (the
 * form put_i64 uses beyond 2^53). */
static int get_integer(const cJSON *o, const char *path, const char *key, int64_t lo, int64_t hi,
                       int strings, int64_t *out, kv_err *err)
{
    const cJSON *v = member(o, path, key, err);
    if (!v)
        return -1;
    int64_t x;
    if (cJSON_IsString(v) && !strings)
        return kv_err_set(err, "%s.%s: expected an integer, got the string \"%.40s\"", path, key,
                          v->valuestring);
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d != floor(d) || fabs(d) > EXACT_INT_MAX)
            return kv_err_set(err, "%s.%s: expected an integer, got %.17g", path, key, d);
        x = (int64_t)d;
    } else if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        char *end;
        errno = 0;
        long long ll = strtoll(s, &end, 10);
        if (!*s || *end || errno || !((*s >= '0' && *s <= '9') || *s == '-'))
            return kv_err_set(err, "%s.%s: expected an integer, got the string \"%.40s\"",
                              path, key, s);
        x = (int64_t)ll;
    } else {
        return kv_err_set(err, "%s.%s: expected an integer, got %s", path, key, kv_json_type(v));
    }
    if (x < lo || x > hi)
        return kv_err_set(err, "%s.%s: %" PRId64 " is out of range (%" PRId64 "..%" PRId64 ")",
                          path, key, x, lo, hi);
    *out = x;
    return 0;
}

static int get_i64(const cJSON *o, const char *path, const char *key, int64_t *out, kv_err *err)
{
    return get_integer(o, path, key, INT64_MIN, INT64_MAX, 1, out, err);
}

static int get_int(const cJSON *o, const char *path, const char *key, int lo, int hi, int *out,
                   kv_err *err)
{
    int64_t x;
    if (get_integer(o, path, key, lo, hi, 0, &x, err) != 0)
        return -1;
    *out = (int)x;
    return 0;
}

static int get_u64(const cJSON *o, const char *path, const char *key, uint64_t *out, kv_err *err)
{
    const cJSON *v = member(o, path, key, err);
    if (!v)
        return -1;
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d != floor(d) || d < 0 || d > EXACT_INT_MAX)
            return kv_err_set(err, "%s.%s: expected an unsigned integer, got %.17g", path, key,
                              d);
        *out = (uint64_t)d;
        return 0;
    }
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        char *end;
        errno = 0;
        unsigned long long ull = strtoull(s, &end, 10);
        if (!(*s >= '0' && *s <= '9') || *end || errno)
            return kv_err_set(err,
                              "%s.%s: expected an unsigned integer, got the string \"%.40s\"",
                              path, key, s);
        *out = (uint64_t)ull;
        return 0;
    }
    return kv_err_set(err, "%s.%s: expected an unsigned integer, got %s", path, key,
                      kv_json_type(v));
}

static int get_double(const cJSON *o, const char *path, const char *key, double *out,
                      kv_err *err)
{
    const cJSON *v = member(o, path, key, err);
    if (!v)
        return -1;
    if (cJSON_IsNull(v)) {
        *out = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return kv_err_set(err, "%s.%s: expected a number, got %s", path, key, kv_json_type(v));
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *o, const char *path, const char *key, int *out, kv_err *err)
{
    const cJSON *v = member(o, path, key, err);
    if (!v)
        return -1;
    if (!cJSON_IsBool(v))
        return kv_err_set(err, "%s.%s: expected a boolean, got %s", path, key, kv_json_type(v));
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
}

/* A string that must fit in cap bytes (with its NUL), unless cut is set. */
static int get_str(const cJSON *o, const char *path, const char *key, char *out, size_t cap,
                   int cut, kv_err *err)
{
    const cJSON *v = member(o, path, key, err);
    if (!v)
        return -1;
    if (!cJSON_IsString(v))
        return kv_err_set(err, "%s.%s: expected a string, got %s", path, key, kv_json_type(v));
    size_t n = strlen(v->valuestring);
    if (n >= cap) {
        if (!cut)
            return kv_err_set(err, "%s.%s: longer than %zu bytes", path, key, cap - 1);
        n = cap - 1;
    }
    memcpy(out, v->valuestring, n);
    out[n] = '\0';
    return 0;
}

static int get_type(const cJSON *o, kv_msg_type *type, kv_err *err);

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

/* ---- message types -------------------------------------------------------------------------- */

static const char *const type_names[] = {
    [KV_MSG_HELLO] = "hello", [KV_MSG_UID] = "uid",       [KV_MSG_INIT] = "init",
    [KV_MSG_READY] = "ready", [KV_MSG_JOB] = "job",       [KV_MSG_PROGRESS] = "progress",
    [KV_MSG_RESULT] = "result", [KV_MSG_EXIT] = "exit",
};
#define N_TYPES ((int)(sizeof type_names / sizeof type_names[0]))
#define KV_MSG_COUNT_ ((kv_msg_type)N_TYPES)

const char *kv_msg_type_name(kv_msg_type t)
{
    if ((int)t < 0 || (int)t >= N_TYPES)
        return "unknown";
    return type_names[t];
}

static int get_type(const cJSON *o, kv_msg_type *type, kv_err *err)
{
    const cJSON *v = member(o, "$", "type", err);
    if (!v)
        return -1;
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

int kv_proto_type(const char *line, kv_msg_type *type, kv_err *err)
{
    cJSON *root = parse_object(line, err);
    if (!root)
        return kv_err_prefix(err, "message");
    int rc = get_type(root, type, err);
    cJSON_Delete(root);
    return rc ? kv_err_prefix(err, "message") : 0;
}

/* ---- small messages ------------------------------------------------------------------------- */

static int is_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F')))
            return 0;
    return 1;
}

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
    case KV_MSG_INIT:
        put_str(&e, o, "uid", m->uid);
        break;
    case KV_MSG_READY:
        put_int(&e, o, "rank", m->rank);
        break;
    case KV_MSG_PROGRESS:
        put_u64(&e, o, "job", m->job);
        put_int(&e, o, "rank", m->rank);
        put_str(&e, o, "phase", m->phase);
        break;
    case KV_MSG_EXIT:
        break;
    default: /* job and result have their own encoders */
        e.oom = 1;
        break;
    }
    return finish(&e, o);
}

int kv_proto_msg_from_json(const char *line, kv_proto_msg *m, kv_err *err)
{
    static const char *const k_hello[] = {"type", "rank", "pid", "device", NULL};
    static const char *const k_uid[] = {"type", "uid", NULL};
    static const char *const k_ready[] = {"type", "rank", NULL};
    static const char *const k_progress[] = {"type", "job", "rank", "phase", NULL};
    static const char *const k_exit[] = {"type", NULL};

    kv_msg_type t = KV_MSG_COUNT_;
    cJSON *o = parse_object(line, err);
    if (!o)
        return kv_err_prefix(err, "message");
    if (get_type(o, &t, err) != 0)
        goto fail;
    memset(m, 0, sizeof *m);
    m->type = t;
    switch (t) {
    case KV_MSG_HELLO:
        if (check_members(o, "$", k_hello, err) ||
            get_int(o, "$", "rank", 0, KV_PROTO_MAX_RANK, &m->rank, err) ||
            get_int(o, "$", "pid", 1, INT32_MAX, &m->pid, err) ||
            get_int(o, "$", "device", 0, INT32_MAX, &m->device, err))
            goto fail;
        break;
    case KV_MSG_UID:
    case KV_MSG_INIT:
        if (check_members(o, "$", k_uid, err) ||
            get_str(o, "$", "uid", m->uid, sizeof m->uid, 0, err))
            goto fail;
        if (!is_hex(m->uid, KV_PROTO_UID_HEX)) {
            kv_err_set(err, "$.uid: expected %d hex digits", KV_PROTO_UID_HEX);
            goto fail;
        }
        break;
    case KV_MSG_READY:
        if (check_members(o, "$", k_ready, err) ||
            get_int(o, "$", "rank", 0, KV_PROTO_MAX_RANK, &m->rank, err))
            goto fail;
        break;
    case KV_MSG_PROGRESS:
        if (check_members(o, "$", k_progress, err) || get_u64(o, "$", "job", &m->job, err) ||
            get_int(o, "$", "rank", 0, KV_PROTO_MAX_RANK, &m->rank, err) ||
            get_str(o, "$", "phase", m->phase, sizeof m->phase, 1, err))
            goto fail;
        break;
    case KV_MSG_EXIT:
        if (check_members(o, "$", k_exit, err))
            goto fail;
        break;
    default:
        kv_err_set(err, "$.type: \"%s\" is not a small message", kv_msg_type_name(t));
        goto fail;
    }
    cJSON_Delete(o);
    return 0;
fail:
    cJSON_Delete(o);
    if (t == KV_MSG_COUNT_)
        return kv_err_prefix(err, "message");
    return kv_err_prefix(err, "%s message", kv_msg_type_name(t));
}

/* ---- job ------------------------------------------------------------------------------------ */

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
    put_u64(&e, o, "scratch_bytes", job->scratch_bytes);
    put_str(&e, o, "dump_dir", job->dump_dir);
    return finish(&e, o);
}

int kv_proto_job_from_json(const char *line, kv_job *job, kv_err *err)
{
    static const char *const keys[] = {
        "type",   "id",     "problem_dir",     "reference_so", "candidate_so", "inputs_so",
        "sizes",  "trials", "warmup", "warmup_ms", "iters",        "time_sizes_mask",
        "seed",   "capture", "scratch_bytes",  "dump_dir",     NULL,
    };
    kv_job j;
    memset(&j, 0, sizeof j);
    cJSON *o = parse_message(line, KV_MSG_JOB, err);
    if (!o)
        return kv_err_prefix(err, "job message");
    uint64_t scratch = 0;
    if (check_members(o, "$", keys, err) || get_u64(o, "$", "id", &j.id, err) ||
        get_str(o, "$", "problem_dir", j.problem_dir, sizeof j.problem_dir, 0, err) ||
        get_str(o, "$", "reference_so", j.reference_so, sizeof j.reference_so, 0, err) ||
        get_str(o, "$", "candidate_so", j.candidate_so, sizeof j.candidate_so, 0, err) ||
        get_str(o, "$", "inputs_so", j.inputs_so, sizeof j.inputs_so, 0, err) ||
        get_str(o, "$", "dump_dir", j.dump_dir, sizeof j.dump_dir, 0, err))
        goto fail;
    const cJSON *sizes = member(o, "$", "sizes", err);
    if (!sizes)
        goto fail;
    if (!cJSON_IsArray(sizes)) {
        kv_err_set(err, "$.sizes: expected an array, got %s", kv_json_type(sizes));
        goto fail;
    }
    int n = cJSON_GetArraySize(sizes);
    if (n < 1 || n > KV_JOB_MAX_SIZES) {
        kv_err_set(err, "$.sizes: %d sizes, expected 1..%d", n, KV_JOB_MAX_SIZES);
        goto fail;
    }
    int i = 0;
    for (const cJSON *s = sizes->child; s; s = s->next, i++) {
        if (!cJSON_IsString(s)) {
            kv_err_set(err, "$.sizes[%d]: expected a string, got %s", i, kv_json_type(s));
            goto fail;
        }
        if (strlen(s->valuestring) >= sizeof j.sizes[i]) {
            kv_err_set(err, "$.sizes[%d]: longer than %zu bytes", i, sizeof j.sizes[i] - 1);
            goto fail;
        }
        strcpy(j.sizes[i], s->valuestring);
    }
    j.n_sizes = n;
    if (get_int(o, "$", "trials", 0, INT32_MAX, &j.trials, err) ||
        get_int(o, "$", "warmup", 0, INT32_MAX, &j.warmup, err) ||
        get_double(o, "$", "warmup_ms", &j.warmup_ms, err) ||
        get_int(o, "$", "iters", 0, INT32_MAX, &j.iters, err) ||
        get_int(o, "$", "time_sizes_mask", 0, INT32_MAX, &j.time_sizes_mask, err) ||
        get_u64(o, "$", "seed", &j.seed, err) || get_bool(o, "$", "capture", &j.capture, err) ||
        get_u64(o, "$", "scratch_bytes", &scratch, err))
        goto fail;
    if (scratch > SIZE_MAX) {
        kv_err_set(err, "$.scratch_bytes: out of range");
        goto fail;
    }
    j.scratch_bytes = (size_t)scratch;
    cJSON_Delete(o);
    *job = j;
    return 0;
fail:
    cJSON_Delete(o);
    return kv_err_prefix(err, "job message");
}

/* ---- result --------------------------------------------------------------------------------- */

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
        cJSON *x = cJSON_CreateObject();
        if (!x || !cJSON_AddItemToArray(sizes, x)) {
            cJSON_Delete(x);
            e.oom = 1;
            break;
        }
        put_str(&e, x, "name", s->name);
        put_bool(&e, x, "checked", s->checked);
        put_bool(&e, x, "ok", s->ok);
        put_bool(&e, x, "timed", s->timed);
        put_timing(&e, x, "ref", &s->ref);
        put_timing(&e, x, "cand", &s->cand);
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

static int get_timing(const cJSON *o, const char *path, const char *key, kv_timing *t,
                      kv_err *err)
{
    static const char *const keys[] = {"median", "p10", "p90", "mean", "cv", "n", NULL};
    const cJSON *x = member(o, path, key, err);
    if (!x)
        return -1;
    char p[96];
    kv_json_path_key(p, sizeof p, path, key);
    if (!cJSON_IsObject(x))
        return kv_err_set(err, "%s: expected an object, got %s", p, kv_json_type(x));
    if (check_members(x, p, keys, err) || get_double(x, p, "median", &t->median, err) ||
        get_double(x, p, "p10", &t->p10, err) || get_double(x, p, "p90", &t->p90, err) ||
        get_double(x, p, "mean", &t->mean, err) || get_double(x, p, "cv", &t->cv, err) ||
        get_int(x, p, "n", 0, INT32_MAX, &t->n, err))
        return -1;
    return 0;
}

static int get_size(const cJSON *x, int i, kv_size_outcome *s, kv_err *err)
{
    static const char *const keys[] = {
        "name",     "checked", "ok",          "timed",       "ref",       "cand",
        "bad_rank", "bad_tensor", "bad_index", "expected",   "got",       "max_abs_err",
        "max_rel_err", "bad_count", "detail",  NULL,
    };
    char p[32];
    kv_json_path_index(p, sizeof p, "$.sizes", i);
    if (!cJSON_IsObject(x))
        return kv_err_set(err, "%s: expected an object, got %s", p, kv_json_type(x));
    if (check_members(x, p, keys, err) ||
        get_str(x, p, "name", s->name, sizeof s->name, 0, err) ||
        get_bool(x, p, "checked", &s->checked, err) || get_bool(x, p, "ok", &s->ok, err) ||
        get_bool(x, p, "timed", &s->timed, err) || get_timing(x, p, "ref", &s->ref, err) ||
        get_timing(x, p, "cand", &s->cand, err) ||
        get_int(x, p, "bad_rank", -1, KV_PROTO_MAX_RANK, &s->bad_rank, err) || /* -1: none */
        get_str(x, p, "bad_tensor", s->bad_tensor, sizeof s->bad_tensor, 0, err) ||
        get_i64(x, p, "bad_index", &s->bad_index, err) ||
        get_double(x, p, "expected", &s->expected, err) ||
        get_double(x, p, "got", &s->got, err) ||
        get_double(x, p, "max_abs_err", &s->max_abs_err, err) ||
        get_double(x, p, "max_rel_err", &s->max_rel_err, err) ||
        get_i64(x, p, "bad_count", &s->bad_count, err) ||
        get_str(x, p, "detail", s->detail, sizeof s->detail, 0, err))
        return -1;
    return 0;
}

int kv_proto_result_from_json(const char *line, uint64_t *job_id, int *rank, kv_job_result *r,
                              kv_err *err)
{
    static const char *const keys[] = {
        "type",         "job",         "rank",           "verdict",      "message",
        "origin",       "sizes",       "graph_captured", "kernel_nodes", "memcpy_nodes",
        "memset_nodes", "other_nodes", "peer_copy_bytes", "graph_json", "wall_s",
        "gpu_s",        NULL,
    };
    /* kv_job_result is large; decode into the heap and copy on success */
    kv_job_result *x = calloc(1, sizeof *x);
    if (!x)
        return kv_err_set(err, "result message: out of memory");
    cJSON *o = parse_message(line, KV_MSG_RESULT, err);
    if (!o) {
        free(x);
        return kv_err_prefix(err, "result message");
    }
    uint64_t id = 0;
    int rk = 0;
    char verdict[32];
    if (check_members(o, "$", keys, err) || get_u64(o, "$", "job", &id, err) ||
        get_int(o, "$", "rank", 0, KV_PROTO_MAX_RANK, &rk, err) ||
        get_str(o, "$", "verdict", verdict, sizeof verdict, 0, err))
        goto fail;
    if (kv_verdict_parse(verdict, &x->verdict) != 0) {
        kv_err_set(err, "$.verdict: \"%s\" is not a verdict", verdict);
        goto fail;
    }
    if (get_str(o, "$", "message", x->message, sizeof x->message, 0, err) ||
        get_bool(o, "$", "origin", &x->origin, err))
        goto fail;
    const cJSON *sizes = member(o, "$", "sizes", err);
    if (!sizes)
        goto fail;
    if (!cJSON_IsArray(sizes)) {
        kv_err_set(err, "$.sizes: expected an array, got %s", kv_json_type(sizes));
        goto fail;
    }
    int n = cJSON_GetArraySize(sizes);
    if (n > KV_JOB_MAX_SIZES) {
        kv_err_set(err, "$.sizes: %d sizes, at most %d", n, KV_JOB_MAX_SIZES);
        goto fail;
    }
    int i = 0;
    for (const cJSON *s = sizes->child; s; s = s->next, i++)
        if (get_size(s, i, &x->sizes[i], err) != 0)
            goto fail;
    x->n_sizes = n;
    if (get_bool(o, "$", "graph_captured", &x->graph_captured, err) ||
        get_int(o, "$", "kernel_nodes", 0, INT32_MAX, &x->kernel_nodes, err) ||
        get_int(o, "$", "memcpy_nodes", 0, INT32_MAX, &x->memcpy_nodes, err) ||
        get_int(o, "$", "memset_nodes", 0, INT32_MAX, &x->memset_nodes, err) ||
        get_int(o, "$", "other_nodes", 0, INT32_MAX, &x->other_nodes, err) ||
        get_double(o, "$", "peer_copy_bytes", &x->peer_copy_bytes, err) ||
        get_str(o, "$", "graph_json", x->graph_json, sizeof x->graph_json, 0, err) ||
        get_double(o, "$", "wall_s", &x->wall_s, err) ||
        get_double(o, "$", "gpu_s", &x->gpu_s, err))
        goto fail;
    cJSON_Delete(o);
    *job_id = id;
    *rank = rk;
    memcpy(r, x, sizeof *r);
    free(x);
    return 0;
fail:
    cJSON_Delete(o);
    free(x);
    return kv_err_prefix(err, "result message");
}
