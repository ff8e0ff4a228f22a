/* problemcheck.c — problem-check verdicts: their key, their making from a
 * self-check's report, and their entries in the cache (problemcheck.h). */
#include "evaluator/problemcheck.h"

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

static const char *const result_names[] = {"not_run", "ok", "fail", "skipped"};
#define N_RESULTS ((int)(sizeof result_names / sizeof result_names[0]))

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

int kv_pcheck_from_report(kv_pcheck *c, const kv_problem *p, int world,
                          const kv_eval_report *r, kv_err *err)
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

/* ---- the entry as JSON --------------------------------------------------------- */

/* Adds v to o under name; 0, or -1 when out of memory (v freed). */
static int add(cJSON *o, const char *name, cJSON *v)
{
    if (!v)
        return -1;
    if (!cJSON_AddItemToObject(o, name, v)) {
        cJSON_Delete(v);
        return -1;
    }
    return 0;
}

static cJSON *size_json(const kv_pcheck_size *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    int bad = add(o, "name", cJSON_CreateString(s->name)) ||
              add(o, "validation", cJSON_CreateBool(s->validation)) ||
              add(o, "selfcheck", cJSON_CreateString(kv_pcheck_result_name(s->self))) ||
              add(o, "reference_memory", cJSON_CreateString(s->ref_plain ? "plain" : "window")) ||
              add(o, "host_check", cJSON_CreateString(kv_pcheck_result_name(s->host))) ||
              add(o, "host_too_large", cJSON_CreateBool(s->host_too_large)) ||
              add(o, "host_elements", cJSON_CreateNumber((double)s->host_checked)) ||
              add(o, "host_failed", cJSON_CreateNumber((double)s->host_failed)) ||
              add(o, "host_worst_ratio", cJSON_CreateNumber(s->host_worst));
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *kv_pcheck_json(const kv_pcheck *c, const char *key)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char when[32];
    kv_format_utc(c->checked_at * 1000000000, when, sizeof when);
    cJSON *sizes = cJSON_CreateArray();
    int bad = add(o, "version", cJSON_CreateNumber(KV_PCHECK_VERSION)) ||
              add(o, "key", cJSON_CreateString(key)) ||
              add(o, "problem", cJSON_CreateString(c->problem)) ||
              add(o, "world", cJSON_CreateNumber(c->world)) ||
              add(o, "ok", cJSON_CreateBool(c->ok)) ||
              add(o, "message", cJSON_CreateString(c->message)) ||
              add(o, "selfcheck", cJSON_CreateString(kv_pcheck_result_name(c->self))) ||
              add(o, "host_check", cJSON_CreateString(kv_pcheck_result_name(c->host))) ||
              add(o, "checked_at", cJSON_CreateNumber((double)c->checked_at)) ||
              add(o, "checked_at_utc", cJSON_CreateString(when)) || add(o, "sizes", sizes);
    for (int s = 0; !bad && s < c->n_sizes; s++) {
        cJSON *so = size_json(&c->sizes[s]);
        bad = !so || !cJSON_AddItemToArray(sizes, so);
        if (bad)
            cJSON_Delete(so);
    }
    if (bad || kv_json_exact_numbers(o) != 0) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ---- reading an entry back ------------------------------------------------------- */

/* The members of an entry; each returns 0, or -1 with what is wrong in why. */
typedef struct {
    char why[256];
} reader;

static int bad(reader *rd, const char *where, const char *name, const char *what)
{
    snprintf(rd->why, sizeof rd->why, "%s%s %s", where, name, what);
    return -1;
}

static int get_str(reader *rd, const cJSON *o, const char *where, const char *name, char *out,
                   size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v))
        return bad(rd, where, name, "is missing or not a string");
    if (strlen(v->valuestring) >= cap)
        return bad(rd, where, name, "is too long");
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

static int get_bool(reader *rd, const cJSON *o, const char *where, const char *name, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsBool(v))
        return bad(rd, where, name, "is missing or not true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_int(reader *rd, const cJSON *o, const char *where, const char *name, int64_t lo,
                   int64_t hi, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return bad(rd, where, name, "is missing or not an integer in range");
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int get_result(reader *rd, const cJSON *o, const char *where, const char *name,
                      kv_pcheck_result *out)
{
    char word[16];
    if (get_str(rd, o, where, name, word, sizeof word) != 0)
        return -1;
    for (int i = 0; i < N_RESULTS; i++)
        if (strcmp(word, result_names[i]) == 0) {
            *out = (kv_pcheck_result)i;
            return 0;
        }
    return bad(rd, where, name, "is not one of not_run, ok, fail, skipped");
}

static int get_size(reader *rd, const cJSON *so, int i, kv_pcheck_size *s)
{
    char where[48], mem[16];
    snprintf(where, sizeof where, "sizes[%d].", i);
    if (!cJSON_IsObject(so)) {
        snprintf(rd->why, sizeof rd->why, "sizes[%d] is not an object", i);
        return -1;
    }
    if (get_str(rd, so, where, "name", s->name, sizeof s->name) != 0 ||
        get_bool(rd, so, where, "validation", &s->validation) != 0 ||
        get_result(rd, so, where, "selfcheck", &s->self) != 0 ||
        get_str(rd, so, where, "reference_memory", mem, sizeof mem) != 0 ||
        get_result(rd, so, where, "host_check", &s->host) != 0 ||
        get_bool(rd, so, where, "host_too_large", &s->host_too_large) != 0 ||
        get_int(rd, so, where, "host_elements", 0, INT64_C(1) << 53, &s->host_checked) != 0 ||
        get_int(rd, so, where, "host_failed", 0, INT64_C(1) << 53, &s->host_failed) != 0)
        return -1;
    if (strcmp(mem, "plain") != 0 && strcmp(mem, "window") != 0)
        return bad(rd, where, "reference_memory", "is not plain or window");
    s->ref_plain = mem[0] == 'p';
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(so, "host_worst_ratio");
    if (!cJSON_IsNumber(w) || !(w->valuedouble >= 0))
        return bad(rd, where, "host_worst_ratio", "is missing or not a number >= 0");
    s->host_worst = w->valuedouble;
    return 0;
}

/* The entry's JSON into c: 0, or -1 with rd->why. */
static int decode(reader *rd, const cJSON *o, const char *key, kv_pcheck *c)
{
    char stored_key[KV_SHA256_HEX_LEN + 1];
    int64_t version, world, when;
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(o))
        return bad(rd, "", "the entry", "is not a JSON object");
    if (get_int(rd, o, "", "version", 0, 1000000, &version) != 0 ||
        get_str(rd, o, "", "key", stored_key, sizeof stored_key) != 0 ||
        get_str(rd, o, "", "problem", c->problem, sizeof c->problem) != 0 ||
        get_int(rd, o, "", "world", 1, KEVO_MAX_RANKS, &world) != 0 ||
        get_bool(rd, o, "", "ok", &c->ok) != 0 ||
        get_str(rd, o, "", "message", c->message, sizeof c->message) != 0 ||
        get_result(rd, o, "", "selfcheck", &c->self) != 0 ||
        get_result(rd, o, "", "host_check", &c->host) != 0 ||
        get_int(rd, o, "", "checked_at", 0, INT64_C(1) << 53, &when) != 0)
        return -1;
    if (version != KV_PCHECK_VERSION) {
        snprintf(rd->why, sizeof rd->why, "version %lld, not this kevo's %d", (long long)version,
                 KV_PCHECK_VERSION);
        return -1;
    }
    if (strcmp(stored_key, key) != 0)
        return bad(rd, "", "key", "is not the key of the file's name");
    c->world = (int)world;
    c->checked_at = when;
    if (c->self != KV_PCHECK_PASS && c->self != KV_PCHECK_FAIL)
        return bad(rd, "", "selfcheck", "is neither ok nor fail");
    if (c->host == KV_PCHECK_SKIPPED)
        return bad(rd, "", "host_check", "is skipped, which only a size can be");
    int passed = c->self == KV_PCHECK_PASS && c->host != KV_PCHECK_FAIL;
    if (c->ok != passed || (!c->ok && !c->message[0]))
        return bad(rd, "", "ok", "does not agree with the checks' results");
    const cJSON *sizes = cJSON_GetObjectItemCaseSensitive(o, "sizes");
    int n = cJSON_GetArraySize(sizes);
    if (!cJSON_IsArray(sizes) || n > KV_PROBLEM_MAX_SIZES)
        return bad(rd, "", "sizes", "is missing, not an array or too long");
    for (int i = 0; i < n; i++)
        if (get_size(rd, cJSON_GetArrayItem(sizes, i), i, &c->sizes[i]) != 0)
            return -1;
    c->n_sizes = n;
    return 0;
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
    kv_err why = {{0}};
    if (kv_read_file(path, &text, &len, &why) != 0) {
        if (access(path, F_OK) != 0 && errno == ENOENT)
            return KV_NOTFOUND; /* none kept */
        if (warn) {
            kv_err w;
            kv_err_set(&w, "%s; checking again", why.msg);
            warn(w.msg, ctx);
        }
        return KV_NOTFOUND;
    }
    reader rd = {{0}};
    cJSON *o = kv_json_parse_strict(text, rd.why, sizeof rd.why);
    free(text);
    int rc = o ? decode(&rd, o, key, out) : -1;
    cJSON_Delete(o);
    if (rc == 0)
        return 0;
    if (warn) {
        kv_err w;
        kv_err_set(&w, "%s: not a problem check's verdict (%s); checking again", path, rd.why);
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
