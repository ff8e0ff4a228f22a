/* reference_verdicts.c — problem-check verdicts: their key, their making from a
 * self-check's report, and their entries in the cache (evaluator.h). */
#include "evaluator/evaluator.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fsutil.h"
#include "common/json.h"
#include "common/json_out.h"
#include "common/schema.h"

static const char *const result_names[] = {"not_run", "ok", "fail", "skipped", NULL};
#define N_RESULTS 4

const char *kv_pcheck_result_name(kv_pcheck_result r)
{
    return (int)r >= 0 && (int)r < N_RESULTS ? result_names[r] : "?";
}

/* ---- the key ------------------------------------------------------------------ */

/* One file into the digest: its name, its length, its bytes. */
static int hash_file(kv_sha256_ctx *h, const char *name, const char *path, kv_err *err)
{
    char *data = NULL;
    size_t len = 0;
    if (kv_read_file(path, &data, &len, err) != 0)
        return -1;
    char head[128];
    int n = snprintf(head, sizeof head, "%s %zu\n", name, len);
    kv_sha256_update(h, head, (size_t)n);
    kv_sha256_update(h, data, len);
    free(data);
    return 0;
}

int kv_pcheck_key(const kv_problem *p, int world, char key[KV_SHA256_HEX_LEN], kv_err *err)
{
    char json[PATH_MAX];
    key[0] = '\0';
    if (kv_path_join(json, sizeof json, p->dir, "problem.json", err) != 0)
        return -1;
    const char *names[] = {"problem.json", "reference.cu", "inputs.cu", "check.c"};
    const char *paths[] = {json, p->reference, p->inputs_hook, p->check};
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    char head[64];
    int n = snprintf(head, sizeof head, "kevo problem check %d\nW %d\n", KV_PCHECK_VERSION, world);
    kv_sha256_update(&h, head, (size_t)n);
    for (int i = 0; i < 4; i++) {
        if (!paths[i][0])
            continue; /* the problem has none */
        if (hash_file(&h, names[i], paths[i], err) != 0) {
            kv_sha256_discard(&h);
            return kv_err_prefix(err, "the check's key of problem %s", p->name);
        }
    }
    uint8_t digest[KV_SHA256_LEN];
    if (kv_sha256_final(&h, digest) != 0)
        return kv_err_set(err, "the check's key of problem %s: SHA-256 failed (libcrypto)",
                          p->name);
    kv_sha256_hex(digest, key);
    return 0;
}

/* ---- from a self-check's report ------------------------------------------------ */

int kv_pcheck_from_report(kv_pcheck *c, const kv_problem *p, int world, const kv_eval_report *r,
                          kv_err *err)
{
    if (r->verdict != KV_VERDICT_OK && r->verdict != KV_VERDICT_MISMATCH)
        return kv_err_set(err, "the reference of %s failed its self-check: %s: %s", p->name,
                          kv_verdict_name(r->verdict), r->message);
    memset(c, 0, sizeof *c);
    snprintf(c->problem, sizeof c->problem, "%s", p->name);
    c->world = world;
    c->ok = r->verdict == KV_VERDICT_OK;
    c->self = c->ok ? KV_PCHECK_PASS : KV_PCHECK_FAIL;
    if (!c->ok)
        snprintf(c->message, sizeof c->message, "%s", r->message);
    c->n_sizes = p->n_sizes;
    for (int s = 0; s < p->n_sizes; s++) {
        kv_pcheck_size *cs = &c->sizes[s];
        snprintf(cs->name, sizeof cs->name, "%s", p->sizes[s].name);
        cs->validation = p->sizes[s].validation;
        for (int k = 0; k < r->n_sizes; k++) {
            const kv_eval_size *es = &r->sizes[k];
            if (strcmp(es->name, cs->name) != 0 || !es->checked)
                continue;
            cs->self = es->ok ? KV_PCHECK_PASS : KV_PCHECK_FAIL;
            cs->ref_plain = es->ref_plain;
        }
    }
    return 0;
}

/* ---- the entry as JSON: one schema table, read and written ------------------- */

/* What the file holds: the verdict, the version and key it was made for,
 * and checked_at in UTC for a person reading it. */
typedef struct {
    int version;
    char key[KV_SHA256_HEX_LEN];
    char when[32];
    kv_pcheck c;
} entry;

static const char *const memory_names[] = {"window", "plain", NULL};

static int read_sizes(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                      void *base, kv_err *err)
{
    (void)k;
    kv_pcheck *c = &((entry *)base)->c;
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array, got %s", kv_json_type(v));
    int n = cJSON_GetArraySize(v);
    if (n > KV_PROBLEM_MAX_SIZES)
        return kv_schema_fail(err, jpath, "%d sizes, at most %d", n, KV_PROBLEM_MAX_SIZES);
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        if (!cJSON_IsObject(e))
            return kv_schema_fail(err, ipath, "expected an object, got %s", kv_json_type(e));
        if (kv_schema_read(s, "sizes[]", e, ipath, &c->sizes[i], err) != 0)
            return -1;
    }
    c->n_sizes = n;
    return 0;
}

static cJSON *emit_sizes(const kv_schema *s, const kv_schema_key *k, const void *base)
{
    (void)k;
    const kv_pcheck *c = &((const entry *)base)->c;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < c->n_sizes; i++) {
        cJSON *o = kv_schema_emit(s, "sizes[]", &c->sizes[i]);
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

#define FIELD(type, m) .offset = offsetof(type, m), .size = sizeof(((type *)0)->m)
#define E(m) FIELD(entry, m)
#define Z(m) FIELD(kv_pcheck_size, m)
#define REQ KV_SCHEMA_REQUIRED
#define COUNT(p, base, m)                                                    \
    {                                                                        \
        .path = p, .type = KV_SCHEMA_INT64, .flags = REQ, base(m), .min = 0, \
        .max = KV_SCHEMA_INT_EXACT_MAX                                       \
    }
#define RESULT(p, base, m)                                                              \
    {                                                                                   \
        .path = p, .type = KV_SCHEMA_ENUM, .flags = REQ, base(m), .names = result_names \
    }

static const kv_schema_key entry_rows[] = {
    {.path = "version", .type = KV_SCHEMA_INT, .flags = REQ, E(version), .min = 0, .max = 1000000},
    {.path = "key", .type = KV_SCHEMA_STRING, .flags = REQ, E(key)},
    {.path = "problem", .type = KV_SCHEMA_STRING, .flags = REQ, E(c.problem)},
    {.path = "world",
     .type = KV_SCHEMA_INT,
     .flags = REQ,
     E(c.world),
     .min = 1,
     .max = KEVO_MAX_RANKS},
    {.path = "ok", .type = KV_SCHEMA_BOOL, .flags = REQ, E(c.ok)},
    {.path = "message", .type = KV_SCHEMA_STRING, .flags = REQ, E(c.message)},
    RESULT("selfcheck", E, c.self),
    RESULT("host_check", E, c.host),
    RESULT("floor_check", E, c.floor),
    COUNT("checked_at", E, c.checked_at),
    {.path = "checked_at_utc", .type = KV_SCHEMA_STRING, .flags = REQ, E(when)},
    {.path = "sizes",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     .read = read_sizes,
     .emit = emit_sizes},
    {.path = "sizes[].name", .type = KV_SCHEMA_STRING, .flags = REQ, Z(name)},
    {.path = "sizes[].validation", .type = KV_SCHEMA_BOOL, .flags = REQ, Z(validation)},
    RESULT("sizes[].selfcheck", Z, self),
    {.path = "sizes[].reference_memory",
     .type = KV_SCHEMA_ENUM,
     .flags = REQ,
     Z(ref_plain),
     .names = memory_names},
    RESULT("sizes[].host_check", Z, host),
    {.path = "sizes[].host_too_large", .type = KV_SCHEMA_BOOL, .flags = REQ, Z(host_too_large)},
    COUNT("sizes[].host_elements", Z, host_checked),
    COUNT("sizes[].host_failed", Z, host_failed),
    {.path = "sizes[].host_worst_ratio",
     .type = KV_SCHEMA_NUMBER,
     .flags = REQ,
     Z(host_worst),
     .min = 0,
     .max = INFINITY},
};

static const kv_schema entry_schema = {entry_rows, sizeof entry_rows / sizeof entry_rows[0],
                                       KV_SCHEMA_WIRE};

cJSON *kv_pcheck_json(const kv_pcheck *c, const char *key)
{
    entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->version = KV_PCHECK_VERSION;
    snprintf(e->key, sizeof e->key, "%s", key);
    kv_format_utc(c->checked_at * 1000000000, e->when, sizeof e->when);
    e->c = *c;
    cJSON *o = kv_schema_emit(&entry_schema, "", e);
    free(e);
    return o;
}

/* What a read entry says that no row checks: 0, or -1 with why. */
static int consistent(const entry *e, const char *key, char *why, size_t cap)
{
    const kv_pcheck *c = &e->c;
    if (e->version != KV_PCHECK_VERSION)
        snprintf(why, cap, "version %d, not this kevo's %d", e->version, KV_PCHECK_VERSION);
    else if (strcmp(e->key, key) != 0)
        snprintf(why, cap, "its key is not the key of the file's name");
    else if (c->self != KV_PCHECK_PASS && c->self != KV_PCHECK_FAIL)
        snprintf(why, cap, "selfcheck is neither ok nor fail");
    else if (c->host == KV_PCHECK_SKIPPED || c->floor == KV_PCHECK_SKIPPED)
        snprintf(why, cap, "host_check or floor_check is skipped, which only a size can be");
    else if (c->ok != (c->self == KV_PCHECK_PASS && c->host != KV_PCHECK_FAIL &&
                       c->floor != KV_PCHECK_FAIL) ||
             (!c->ok && !c->message[0]))
        snprintf(why, cap, "ok does not agree with the checks' results");
    else
        return 0;
    return -1;
}

int kv_pcheck_path(const char *cache_dir, const char *key, char *out, kv_err *err)
{
    if ((size_t)snprintf(out, PATH_MAX, "%s/problemcheck/%s.json", cache_dir, key) >= PATH_MAX)
        return kv_err_set(err, "%s/problemcheck/%s.json: path too long", cache_dir, key);
    return 0;
}

int kv_pcheck_get(const char *cache_dir, const char *key, kv_pcheck *out,
                  void (*warn)(const char *msg, void *ctx), void *ctx, kv_err *err)
{
    char path[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (kv_pcheck_path(cache_dir, key, path, err) != 0)
        return -1;
    char *text = NULL;
    size_t len = 0;
    kv_err rerr = {{0}};
    if (kv_read_file(path, &text, &len, &rerr) != 0) {
        if (access(path, F_OK) != 0 && errno == ENOENT)
            return KV_NOTFOUND; /* none kept */
        if (warn) {
            kv_err w;
            kv_err_set(&w, "%s; checking again", rerr.msg);
            warn(w.msg, ctx);
        }
        return KV_NOTFOUND;
    }
    kv_err perr = {{0}};
    char why[sizeof perr.msg] = "";
    entry *e = calloc(1, sizeof *e);
    cJSON *o = e ? kv_json_parse_strict(text, why, sizeof why) : NULL;
    free(text);
    int rc = -1;
    if (!e)
        snprintf(why, sizeof why, "out of memory");
    else if (o && kv_schema_read(&entry_schema, "", o, "$", e, &perr) != 0)
        snprintf(why, sizeof why, "%s", perr.msg);
    else if (o)
        rc = consistent(e, key, why, sizeof why);
    cJSON_Delete(o);
    if (rc == 0)
        *out = e->c;
    free(e);
    if (rc == 0)
        return 0;
    if (warn) {
        kv_err w;
        kv_err_set(&w, "%s: not a problem check's verdict (%s); checking again", path, why);
        warn(w.msg, ctx);
    }
    memset(out, 0, sizeof *out);
    return KV_NOTFOUND;
}

int kv_pcheck_put(const char *cache_dir, const char *key, kv_pcheck *c, kv_err *err)
{
    char dir[PATH_MAX], path[PATH_MAX];
    if (kv_path_join(dir, sizeof dir, cache_dir, "problemcheck", err) != 0 ||
        kv_pcheck_path(cache_dir, key, path, err) != 0 || kv_mkdir_p(dir, 0755, err) != 0)
        return -1;
    if (c->checked_at == 0)
        c->checked_at = kv_wall_ns() / 1000000000;
    cJSON *o = kv_pcheck_json(c, key);
    char *text = o ? kv_json_print(o, 1, NULL) : NULL;
    cJSON_Delete(o);
    if (!text)
        return kv_err_set(err, "%s: out of memory", path);
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (!line) {
        free(text);
        return kv_err_set(err, "%s: out of memory", path);
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    int rc = kv_write_file_atomic(path, line, n + 1, err);
    free(line);
    return rc;
}
