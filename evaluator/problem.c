/* problem.c — problems/<name>/problem.json to one validated kv_problem
 * (kevo/problem.h; the format is documented in docs/problems.md).
 *
 * Loading is strict: every object's members are checked against the keys
 * valid there (an unknown key gets the nearest valid one suggested), every
 * value against its type and range, every shape and cost expression against
 * the declared parameters plus W, and then every shape is evaluated at every
 * size for every supported world size, with exact division, so that a
 * problem that loads can be run at any (size, W) it declares. Messages are
 * "<file>: <JSON path>: <what is wrong>", e.g.
 *   problems/foo/problem.json: $.outputs[0].dtype: unknown dtype "bf17";
 *     expected one of bf16, f16, f32, i32, i64, fp8_e4m3 (did you mean "bf16"?)
 *   problems/foo/problem.json: $.inputs[0].shape[0]: size "small" at W=8:
 *     inexact division in "N/W" (column 2): 12 / 8 leaves remainder 4
 * The JSON parser is cJSON, through kv_json_parse_strict (kevo/json.h): a
 * syntax error is placed by the parse-end pointer of cJSON_ParseWithOpts;
 * nesting deeper than KV_JSON_DEPTH_MAX and a NUL in any string (\u0000)
 * are refused, the latter with its JSON path. */
#include "kevo/problem.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kevo/expr.h"
#include "kevo/fsutil.h"
#include "kevo/json.h"
#include "kevo/machine.h"
#include "kevo/suggest.h"

#define INT_EXACT_MAX 9007199254740991.0 /* 2^53 - 1: integers a double holds exactly */

/* ---- names --------------------------------------------------------------- */

static const char *const dtype_names[KEVO_DTYPE_COUNT] = {
    [KEVO_BF16] = "bf16", [KEVO_F16] = "f16", [KEVO_F32] = "f32",
    [KEVO_I32] = "i32",   [KEVO_I64] = "i64", [KEVO_FP8_E4M3] = "fp8_e4m3",
};

static const char *const init_names[] = {
    [KV_INIT_NORMAL] = "normal", [KV_INIT_UNIFORM] = "uniform", [KV_INIT_INT_RANGE] = "int_range",
    [KV_INIT_ZEROS] = "zeros",   [KV_INIT_HOOK] = "hook",       [KV_INIT_PERMUTATION] = "permutation",
};
#define N_INITS (sizeof init_names / sizeof init_names[0])

static const char *const categories[] = {
    "collective",       "tensor-parallel", "expert-parallel", "context-parallel",
    "data-parallel",    "vocab-parallel",  "long-tail",
};
#define N_CATEGORIES (sizeof categories / sizeof categories[0])

static const char *const functions[] = {"min", "max", "ceil_div"};

const char *kv_dtype_name(kevo_dtype t)
{
    return (unsigned)t < KEVO_DTYPE_COUNT ? dtype_names[t] : "?";
}

int kv_dtype_parse(const char *name, kevo_dtype *out)
{
    for (int i = 0; i < KEVO_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_names[i]) == 0) {
            *out = (kevo_dtype)i;
            return 0;
        }
    }
    return -1;
}

const char *kv_init_name(kv_init_kind k)
{
    return (unsigned)k < N_INITS ? init_names[k] : "?";
}

static int is_int_dtype(kevo_dtype t)
{
    return t == KEVO_I32 || t == KEVO_I64;
}

/* ---- messages -------------------------------------------------------------- */

typedef struct {
    const char *file; /* problem.json, as messages name it */
    kv_err *err;
} loader;

static int fail(loader *ld, const char *jpath, const char *fmt, ...) KV_PRINTF(3, 4);

static int fail(loader *ld, const char *jpath, const char *fmt, ...)
{
    char what[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (jpath)
        return kv_err_set(ld->err, "%s: %s: %s", ld->file, jpath, what);
    return kv_err_set(ld->err, "%s: %s", ld->file, what);
}

/* "unknown <what> "x"; expected one of a, b, c (did you mean "b"?)" */
static int unknown_value(loader *ld, const char *jpath, const char *what, const char *value,
                         const char *const *names, size_t n)
{
    char q[80], list[400];
    kv_json_quote(q, sizeof q, value);
    kv_json_join(list, sizeof list, names, n);
    const char *near = kv_suggest(value, names, n);
    if (near)
        return fail(ld, jpath, "unknown %s %s; expected one of %s (did you mean \"%s\"?)", what, q,
                    list, near);
    return fail(ld, jpath, "unknown %s %s; expected one of %s", what, q, list);
}

/* ---- members and values ------------------------------------------------- */

/* Every member of obj must be one of keys[0..n) and appear once. */
static int check_members(loader *ld, const cJSON *obj, const char *jpath,
                         const char *const *keys, size_t n)
{
    if (!cJSON_IsObject(obj))
        return fail(ld, jpath, "expected an object, got %s", kv_json_type(obj));
    for (const cJSON *m = obj->child; m; m = m->next) {
        char mpath[KV_JSON_PATH_MAX];
        kv_json_path_key(mpath, sizeof mpath, jpath, m->string);
        if (kv_json_is_duplicate(obj, m))
            return fail(ld, mpath, "duplicate key");
        int known = 0;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(keys[i], m->string) == 0;
        if (known)
            continue;
        char what[KV_JSON_MSG_MAX];
        kv_json_unknown_key(what, sizeof what, m->string, keys, n);
        return fail(ld, mpath, "%s", what);
    }
    return KV_OK;
}

/* The member key of obj, or an error when it is required and absent. */
static const cJSON *member(loader *ld, const cJSON *obj, const char *jpath, const char *key,
                           int required, int *failed)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v && required) {
        char mpath[KV_JSON_PATH_MAX];
        kv_json_path_key(mpath, sizeof mpath, jpath, key);
        fail(ld, mpath, "required key is missing");
        *failed = 1;
    }
    return v;
}

static int get_string(loader *ld, const cJSON *v, const char *jpath, char *out, size_t cap)
{
    if (!cJSON_IsString(v))
        return fail(ld, jpath, "expected a string, got %s", kv_json_type(v));
    size_t len = strlen(v->valuestring);
    if (len == 0)
        return fail(ld, jpath, "must not be empty");
    if (len >= cap)
        return fail(ld, jpath, "too long (%zu bytes, at most %zu)", len, cap - 1);
    memcpy(out, v->valuestring, len + 1);
    return KV_OK;
}

static void fmt_num(double v, char out[32])
{
    if (v == floor(v) && fabs(v) <= INT_EXACT_MAX)
        snprintf(out, 32, "%.0f", v);
    else
        snprintf(out, 32, "%.17g", v);
}

static int get_integer(loader *ld, const cJSON *v, const char *jpath, double min, double max,
                       int64_t *out)
{
    if (!cJSON_IsNumber(v))
        return fail(ld, jpath, "expected an integer, got %s", kv_json_type(v));
    double d = v->valuedouble;
    char num[32];
    fmt_num(d, num);
    if (!isfinite(d) || d != floor(d))
        return fail(ld, jpath, "expected an integer, got %s", num);
    if (d < min || d > max) {
        char lo[32], hi[32];
        fmt_num(min, lo);
        if (max == INT_EXACT_MAX)
            snprintf(hi, sizeof hi, "2^53-1");
        else
            fmt_num(max, hi);
        return fail(ld, jpath, "%s is out of range (%s..%s)", num, lo, hi);
    }
    *out = (int64_t)d;
    return KV_OK;
}

static int get_number(loader *ld, const cJSON *v, const char *jpath, double *out)
{
    if (!cJSON_IsNumber(v))
        return fail(ld, jpath, "expected a number, got %s", kv_json_type(v));
    if (!isfinite(v->valuedouble))
        return fail(ld, jpath, "number too large to represent");
    *out = v->valuedouble == 0 ? 0.0 : v->valuedouble;
    return KV_OK;
}

static int get_bool(loader *ld, const cJSON *v, const char *jpath, int *out)
{
    if (!cJSON_IsBool(v))
        return fail(ld, jpath, "expected true or false, got %s", kv_json_type(v));
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return KV_OK;
}

/* A text: a string, or an array of strings (lines) joined with '\n'.
 * Returns a malloc'ed string in *out. */
static int get_text(loader *ld, const cJSON *v, const char *jpath, size_t max, char **out)
{
    size_t len = 0;
    int n = 0;
    if (cJSON_IsString(v)) {
        len = strlen(v->valuestring);
    } else if (cJSON_IsArray(v)) {
        for (const cJSON *c = v->child; c; c = c->next, n++) {
            char ipath[KV_JSON_PATH_MAX];
            kv_json_path_index(ipath, sizeof ipath, jpath, n);
            if (!cJSON_IsString(c))
                return fail(ld, ipath, "expected a string (one line of text), got %s",
                            kv_json_type(c));
            len += strlen(c->valuestring) + 1;
        }
        if (len)
            len--; /* no newline after the last line */
    } else {
        return fail(ld, jpath, "expected a string or an array of strings (lines), got %s",
                    kv_json_type(v));
    }
    if (len >= max)
        return fail(ld, jpath, "too long (%zu bytes, at most %zu)", len, max - 1);
    char *s = malloc(len + 1);
    if (!s)
        return fail(ld, jpath, "out of memory");
    if (cJSON_IsString(v)) {
        memcpy(s, v->valuestring, len + 1);
    } else {
        size_t o = 0;
        for (const cJSON *c = v->child; c; c = c->next) {
            size_t l = strlen(c->valuestring);
            memcpy(s + o, c->valuestring, l);
            o += l;
            if (c->next)
                s[o++] = '\n';
        }
        s[o] = '\0';
    }
    if (s[strspn(s, " \t\r\n")] == '\0') {
        free(s);
        return fail(ld, jpath, "must not be empty");
    }
    *out = s;
    return KV_OK;
}

/* An expression: a string, or a non-negative integer written as a number. */
static int get_expr(loader *ld, const cJSON *v, const char *jpath, char out[KV_PROBLEM_EXPR_MAX])
{
    if (cJSON_IsNumber(v)) {
        int64_t x;
        if (get_integer(ld, v, jpath, 0, INT_EXACT_MAX, &x))
            return KV_FAIL;
        snprintf(out, KV_PROBLEM_EXPR_MAX, "%lld", (long long)x);
        return KV_OK;
    }
    if (!cJSON_IsString(v))
        return fail(ld, jpath, "expected an expression (a string such as \"N/W\") or an integer, "
                               "got %s", kv_json_type(v));
    return get_string(ld, v, jpath, out, KV_PROBLEM_EXPR_MAX);
}

/* ---- sections ------------------------------------------------------------- */

static int parse_name(loader *ld, const cJSON *v, const char *dir, kv_problem *p)
{
    if (get_string(ld, v, "$.name", p->name, sizeof p->name))
        return KV_FAIL;
    for (const char *c = p->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return fail(ld, "$.name", "\"%s\" is not a valid problem name (lower-case letters, "
                                      "digits and '_')", p->name);
    /* the folder's name, as written (or resolved, for "." and "..") */
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
    char real[PATH_MAX];
    if ((strcmp(base, ".") == 0 || strcmp(base, "..") == 0) && realpath(buf, real)) {
        base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    }
    if (strcmp(base, p->name) != 0)
        return fail(ld, "$.name", "\"%s\" differs from the name of its folder \"%s\"; they must "
                                  "be the same", p->name, base);
    return KV_OK;
}

static int parse_category(loader *ld, const cJSON *v, kv_problem *p)
{
    if (!cJSON_IsString(v))
        return fail(ld, "$.category", "expected a string, got %s", kv_json_type(v));
    for (size_t i = 0; i < N_CATEGORIES; i++) {
        if (strcmp(v->valuestring, categories[i]) == 0) {
            snprintf(p->category, sizeof p->category, "%s", categories[i]);
            return KV_OK;
        }
    }
    return unknown_value(ld, "$.category", "category", v->valuestring, categories, N_CATEGORIES);
}

static int parse_worlds(loader *ld, const cJSON *v, kv_problem *p)
{
    if (!cJSON_IsArray(v))
        return fail(ld, "$.worlds", "expected an array of world sizes, got %s", kv_json_type(v));
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, "$.worlds", i);
        int64_t w;
        if (get_integer(ld, c, ipath, 2, KEVO_MAX_RANKS, &w))
            return KV_FAIL;
        if (i > 0 && w <= p->worlds[i - 1])
            return fail(ld, ipath, "world sizes must be listed once each, in increasing order");
        if (i >= KV_PROBLEM_MAX_WORLDS)
            return fail(ld, ipath, "too many world sizes (at most %d)", KV_PROBLEM_MAX_WORLDS);
        p->worlds[i] = (int)w;
    }
    if (i == 0)
        return fail(ld, "$.worlds", "must list at least one world size");
    p->n_worlds = i;
    return KV_OK;
}

static int parse_params(loader *ld, const cJSON *v, kv_problem *p)
{
    if (!cJSON_IsArray(v))
        return fail(ld, "$.params", "expected an array of parameter names, got %s",
                    kv_json_type(v));
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, "$.params", i);
        if (i >= KV_PROBLEM_MAX_PARAMS)
            return fail(ld, ipath, "too many parameters (at most %d)", KV_PROBLEM_MAX_PARAMS);
        char *name = p->param_names[i];
        if (get_string(ld, c, ipath, name, KEVO_NAME_MAX))
            return KV_FAIL;
        if (!kv_json_is_identifier(name))
            return fail(ld, ipath, "\"%s\" is not a valid parameter name (a letter or '_', then "
                                   "letters, digits and '_')", name);
        if (strcmp(name, "W") == 0)
            return fail(ld, ipath, "\"W\" is the world size, always defined; it cannot be a "
                                   "parameter");
        if (strcmp(name, "name") == 0 || strcmp(name, "validation") == 0)
            return fail(ld, ipath, "\"%s\" is a key of every size; it cannot be a parameter",
                        name);
        for (size_t f = 0; f < sizeof functions / sizeof functions[0]; f++)
            if (strcmp(name, functions[f]) == 0)
                return fail(ld, ipath, "\"%s\" is a function of expressions; it cannot be a "
                                       "parameter", name);
        for (int j = 0; j < i; j++)
            if (strcmp(p->param_names[j], name) == 0)
                return fail(ld, ipath, "parameter \"%s\" is listed twice", name);
    }
    if (i == 0)
        return fail(ld, "$.params", "must name at least one parameter");
    p->n_params = i;
    return KV_OK;
}

static int parse_size(loader *ld, const cJSON *v, const char *jpath, kv_problem *p,
                      kv_size_spec *s)
{
    const char *keys[KV_PROBLEM_MAX_PARAMS + 2];
    size_t nk = 0;
    keys[nk++] = "name";
    keys[nk++] = "validation";
    for (int i = 0; i < p->n_params; i++)
        keys[nk++] = p->param_names[i];
    if (check_members(ld, v, jpath, keys, nk))
        return KV_FAIL;
    int failed = 0;
    char mpath[KV_JSON_PATH_MAX];
    const cJSON *name = member(ld, v, jpath, "name", 1, &failed);
    if (failed)
        return KV_FAIL;
    kv_json_path_key(mpath, sizeof mpath, jpath, "name");
    if (get_string(ld, name, mpath, s->name, sizeof s->name))
        return KV_FAIL;
    for (const char *c = s->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-' || *c == '.'))
            return fail(ld, mpath, "\"%s\" is not a valid size name (letters, digits, '_', '-' "
                                   "and '.')", s->name);
    const cJSON *val = member(ld, v, jpath, "validation", 0, &failed);
    kv_json_path_key(mpath, sizeof mpath, jpath, "validation");
    if (val && get_bool(ld, val, mpath, &s->validation))
        return KV_FAIL;
    for (int i = 0; i < p->n_params; i++) {
        const cJSON *x = member(ld, v, jpath, p->param_names[i], 0, &failed);
        kv_json_path_key(mpath, sizeof mpath, jpath, p->param_names[i]);
        if (!x)
            return fail(ld, mpath, "size \"%s\" does not give parameter %s (every size gives "
                                   "every parameter)", s->name, p->param_names[i]);
        if (get_integer(ld, x, mpath, 0, INT_EXACT_MAX, &s->values[i]))
            return KV_FAIL;
    }
    return KV_OK;
}

static int parse_sizes(loader *ld, const cJSON *v, kv_problem *p)
{
    if (!cJSON_IsArray(v))
        return fail(ld, "$.sizes", "expected an array of sizes, got %s", kv_json_type(v));
    int i = 0, n_valid = 0, first_valid = -1;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, "$.sizes", i);
        if (i >= KV_PROBLEM_MAX_SIZES)
            return fail(ld, ipath, "too many sizes (at most %d)", KV_PROBLEM_MAX_SIZES);
        kv_size_spec *s = &p->sizes[i];
        if (parse_size(ld, c, ipath, p, s))
            return KV_FAIL;
        for (int j = 0; j < i; j++)
            if (strcmp(p->sizes[j].name, s->name) == 0)
                return fail(ld, ipath, "size name \"%s\" is used twice", s->name);
        if (s->validation) {
            if (n_valid++ > 0) {
                char vpath[KV_JSON_PATH_MAX];
                kv_json_path_key(vpath, sizeof vpath, ipath, "validation");
                return fail(ld, vpath, "a second validation size (\"%s\" is one already); "
                                       "exactly one size has \"validation\": true",
                            p->sizes[first_valid].name);
            }
            first_valid = i;
        }
    }
    p->n_sizes = i;
    if (n_valid == 0)
        return fail(ld, "$.sizes", "no validation size; exactly one size must have "
                                   "\"validation\": true (it is never shown to mutators)");
    if (i - n_valid < 3)
        return fail(ld, "$.sizes", "%d size%s besides the validation size; at least 3 are "
                                   "needed (from latency-bound to bandwidth-bound)",
                    i - n_valid, i - n_valid == 1 ? "" : "s");
    return KV_OK;
}

static int parse_init(loader *ld, const cJSON *v, const char *jpath, kv_tensor_spec *t)
{
    if (!cJSON_IsObject(v))
        return fail(ld, jpath, "expected an object such as {\"kind\": \"normal\", \"mean\": 0, "
                               "\"std\": 1}, got %s", kv_json_type(v));
    char mpath[KV_JSON_PATH_MAX];
    int failed = 0;
    const cJSON *kind = member(ld, v, jpath, "kind", 1, &failed);
    if (failed)
        return KV_FAIL;
    kv_json_path_key(mpath, sizeof mpath, jpath, "kind");
    if (!cJSON_IsString(kind))
        return fail(ld, mpath, "expected a string, got %s", kv_json_type(kind));
    int k = -1;
    for (size_t i = 0; i < N_INITS; i++)
        if (strcmp(kind->valuestring, init_names[i]) == 0)
            k = (int)i;
    if (k < 0)
        return unknown_value(ld, mpath, "init kind", kind->valuestring, init_names, N_INITS);
    t->init = (kv_init_kind)k;

    static const char *const normal_keys[] = {"kind", "mean", "std"};
    static const char *const range_keys[] = {"kind", "low", "high"};
    static const char *const kind_keys[] = {"kind"};
    const char *const *keys = kind_keys;
    size_t nk = 1;
    const char *a_key = NULL, *b_key = NULL;
    if (t->init == KV_INIT_NORMAL) {
        keys = normal_keys;
        nk = 3;
        a_key = "mean";
        b_key = "std";
    } else if (t->init == KV_INIT_UNIFORM || t->init == KV_INIT_INT_RANGE ||
               t->init == KV_INIT_PERMUTATION) {
        keys = range_keys;
        nk = 3;
        a_key = "low";
        b_key = "high";
    }
    if (check_members(ld, v, jpath, keys, nk))
        return KV_FAIL;

    int is_int = is_int_dtype(t->dtype);
    if ((t->init == KV_INIT_NORMAL || t->init == KV_INIT_UNIFORM) && is_int)
        return fail(ld, mpath, "\"%s\" fills floating-point tensors; this one is %s (use "
                               "\"int_range\")", init_names[k], kv_dtype_name(t->dtype));
    if ((t->init == KV_INIT_INT_RANGE || t->init == KV_INIT_PERMUTATION) && !is_int)
        return fail(ld, mpath, "\"%s\" fills integer tensors (i32, i64); this one is %s "
                               "(use \"normal\" or \"uniform\")", init_names[k],
                    kv_dtype_name(t->dtype));
    if (!a_key)
        return KV_OK;

    const cJSON *a = member(ld, v, jpath, a_key, 1, &failed);
    if (failed)
        return KV_FAIL;
    const cJSON *b = member(ld, v, jpath, b_key, 1, &failed);
    if (failed)
        return KV_FAIL;
    char apath[KV_JSON_PATH_MAX], bpath[KV_JSON_PATH_MAX];
    kv_json_path_key(apath, sizeof apath, jpath, a_key);
    kv_json_path_key(bpath, sizeof bpath, jpath, b_key);
    if (t->init == KV_INIT_INT_RANGE || t->init == KV_INIT_PERMUTATION) {
        /* integers or expressions (an expert count that varies by size); the
         * range is checked at every size and world by check_rules */
        double lim = t->dtype == KEVO_I32 ? 2147483648.0 : INT_EXACT_MAX;
        const cJSON *ends[2] = {a, b};
        const char *paths[2] = {apath, bpath};
        char *outs[2] = {t->init_low, t->init_high};
        for (int i = 0; i < 2; i++) {
            int64_t x;
            if (cJSON_IsNumber(ends[i])) {
                if (get_integer(ld, ends[i], paths[i], -lim, lim, &x))
                    return KV_FAIL;
                snprintf(outs[i], KV_PROBLEM_EXPR_MAX, "%lld", (long long)x);
            } else if (cJSON_IsString(ends[i])) {
                if (get_string(ld, ends[i], paths[i], outs[i], KV_PROBLEM_EXPR_MAX))
                    return KV_FAIL;
            } else {
                return fail(ld, paths[i], "expected an integer or an expression (a string such "
                                          "as \"E\"), got %s", kv_json_type(ends[i]));
            }
        }
        return KV_OK;
    }
    if (get_number(ld, a, apath, &t->init_a) || get_number(ld, b, bpath, &t->init_b))
        return KV_FAIL;
    if (t->init == KV_INIT_NORMAL && !(t->init_b > 0))
        return fail(ld, bpath, "must be positive");
    if (t->init == KV_INIT_UNIFORM && !(t->init_b > t->init_a))
        return fail(ld, bpath, "must be greater than low (the range is [low, high))");
    return KV_OK;
}

static int tolerance_value(loader *ld, const cJSON *v, const char *jpath, double *out)
{
    if (get_number(ld, v, jpath, out))
        return KV_FAIL;
    if (*out < 0)
        return fail(ld, jpath, "must be >= 0");
    return KV_OK;
}

/* A number for every world, or an object by world ({"2": 0, "8": 0.25}):
 * reductions in bf16 are exact at W = 2 and need slack at W = 8. That the
 * keys are exactly the problem's worlds is checked by check_rules. */
static int parse_tolerance(loader *ld, const cJSON *v, const char *jpath, double *max,
                           double at[KEVO_MAX_RANKS + 1], unsigned *worlds)
{
    *worlds = 0;
    if (!cJSON_IsObject(v)) {
        if (tolerance_value(ld, v, jpath, max))
            return KV_FAIL;
        for (int w = 0; w <= KEVO_MAX_RANKS; w++)
            at[w] = *max;
        return KV_OK;
    }
    *max = 0;
    char kpath[KV_JSON_PATH_MAX];
    for (const cJSON *c = v->child; c; c = c->next) {
        kv_json_path_key(kpath, sizeof kpath, jpath, c->string);
        char *end;
        long w = strtol(c->string, &end, 10);
        if (!c->string[0] || *end || w < 2 || w > KEVO_MAX_RANKS)
            return fail(ld, kpath, "expected a world size (2..%d) as the key", KEVO_MAX_RANKS);
        if (*worlds & 1u << w)
            return fail(ld, kpath, "W=%ld is given twice", w);
        if (tolerance_value(ld, c, kpath, &at[w]))
            return KV_FAIL;
        *worlds |= 1u << w;
        if (at[w] > *max)
            *max = at[w];
    }
    return KV_OK;
}

void kv_tensor_tolerance(const kv_tensor_spec *t, int world, double *atol, double *rtol)
{
    int w = world >= 0 && world <= KEVO_MAX_RANKS ? world : 0;
    *atol = t->atol_worlds && !(t->atol_worlds & 1u << w) ? t->atol : t->atol_at[w];
    *rtol = t->rtol_worlds && !(t->rtol_worlds & 1u << w) ? t->rtol : t->rtol_at[w];
}

static int parse_tensor(loader *ld, const cJSON *v, const char *jpath, int is_output,
                        kv_tensor_spec *t)
{
    static const char *const in_keys[] = {"name", "dtype", "shape", "init", "same_on_all_ranks"};
    static const char *const out_keys[] = {"name",  "dtype", "shape",
                                           "atol",  "rtol",  "valid_rows_from"};
    if (check_members(ld, v, jpath, is_output ? out_keys : in_keys, is_output ? 6 : 5))
        return KV_FAIL;
    int failed = 0;
    char mpath[KV_JSON_PATH_MAX];
    const cJSON *name = member(ld, v, jpath, "name", 1, &failed);
    const cJSON *dtype = failed ? NULL : member(ld, v, jpath, "dtype", 1, &failed);
    const cJSON *shape = failed ? NULL : member(ld, v, jpath, "shape", 1, &failed);
    if (failed)
        return KV_FAIL;

    kv_json_path_key(mpath, sizeof mpath, jpath, "name");
    if (get_string(ld, name, mpath, t->name, sizeof t->name))
        return KV_FAIL;
    if (!kv_json_is_identifier(t->name))
        return fail(ld, mpath, "\"%s\" is not a valid tensor name (a letter or '_', then letters, "
                               "digits and '_')", t->name);

    kv_json_path_key(mpath, sizeof mpath, jpath, "dtype");
    if (!cJSON_IsString(dtype))
        return fail(ld, mpath, "expected a string, got %s", kv_json_type(dtype));
    if (kv_dtype_parse(dtype->valuestring, &t->dtype) != 0)
        return unknown_value(ld, mpath, "dtype", dtype->valuestring, dtype_names,
                             KEVO_DTYPE_COUNT);

    kv_json_path_key(mpath, sizeof mpath, jpath, "shape");
    if (!cJSON_IsArray(shape))
        return fail(ld, mpath, "expected an array of dimensions (expressions such as \"N/W\"), "
                               "got %s", kv_json_type(shape));
    int d = 0;
    for (const cJSON *c = shape->child; c; c = c->next, d++) {
        char dpath[KV_JSON_PATH_MAX];
        kv_json_path_index(dpath, sizeof dpath, mpath, d);
        if (d >= KEVO_MAX_DIMS)
            return fail(ld, dpath, "too many dimensions (at most %d)", KEVO_MAX_DIMS);
        if (get_expr(ld, c, dpath, t->shape[d]))
            return KV_FAIL;
    }
    if (d == 0)
        return fail(ld, mpath, "must have at least one dimension (write [\"1\"] for a scalar)");
    t->ndim = d;

    if (!is_output) {
        const cJSON *init = member(ld, v, jpath, "init", 1, &failed);
        if (failed)
            return KV_FAIL;
        kv_json_path_key(mpath, sizeof mpath, jpath, "init");
        if (parse_init(ld, init, mpath, t))
            return KV_FAIL;
        const cJSON *same = member(ld, v, jpath, "same_on_all_ranks", 0, &failed);
        kv_json_path_key(mpath, sizeof mpath, jpath, "same_on_all_ranks");
        if (same && get_bool(ld, same, mpath, &t->same_on_all_ranks))
            return KV_FAIL;
        return KV_OK;
    }

    int is_int = is_int_dtype(t->dtype);
    const cJSON *atol = member(ld, v, jpath, "atol", !is_int, &failed);
    const cJSON *rtol = failed ? NULL : member(ld, v, jpath, "rtol", !is_int, &failed);
    if (failed)
        return KV_FAIL;
    kv_json_path_key(mpath, sizeof mpath, jpath, "atol");
    if (atol && parse_tolerance(ld, atol, mpath, &t->atol, t->atol_at, &t->atol_worlds))
        return KV_FAIL;
    kv_json_path_key(mpath, sizeof mpath, jpath, "rtol");
    if (rtol && parse_tolerance(ld, rtol, mpath, &t->rtol, t->rtol_at, &t->rtol_worlds))
        return KV_FAIL;
    const cJSON *vrf = member(ld, v, jpath, "valid_rows_from", 0, &failed);
    kv_json_path_key(mpath, sizeof mpath, jpath, "valid_rows_from");
    if (vrf && get_string(ld, vrf, mpath, t->valid_rows_from, sizeof t->valid_rows_from))
        return KV_FAIL;
    return KV_OK;
}

static int parse_tensors(loader *ld, const cJSON *v, const char *jpath, int is_output,
                         kv_problem *p)
{
    if (!cJSON_IsArray(v))
        return fail(ld, jpath, "expected an array of tensors, got %s", kv_json_type(v));
    kv_tensor_spec *ts = is_output ? p->outputs : p->inputs;
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        if (i >= KEVO_MAX_TENSORS)
            return fail(ld, ipath, "too many %s (at most %d)", is_output ? "outputs" : "inputs",
                        KEVO_MAX_TENSORS);
        if (parse_tensor(ld, c, ipath, is_output, &ts[i]))
            return KV_FAIL;
        char npath[KV_JSON_PATH_MAX];
        kv_json_path_key(npath, sizeof npath, ipath, "name");
        for (int j = 0; j < i; j++)
            if (strcmp(ts[j].name, ts[i].name) == 0)
                return fail(ld, npath, "tensor name \"%s\" is used twice", ts[i].name);
        for (int j = 0; is_output && j < p->n_inputs; j++)
            if (strcmp(p->inputs[j].name, ts[i].name) == 0)
                return fail(ld, npath, "\"%s\" is already the name of $.inputs[%d]", ts[i].name,
                            j);
    }
    if (i == 0)
        return fail(ld, jpath, "must list at least one tensor");
    if (is_output)
        p->n_outputs = i;
    else
        p->n_inputs = i;
    return KV_OK;
}

static int parse_cost(loader *ld, const cJSON *v, kv_problem *p)
{
    static const char *const keys[] = {"send_bytes", "recv_bytes", "flops", "hbm_bytes"};
    char *fields[] = {p->cost_send_bytes, p->cost_recv_bytes, p->cost_flops, p->cost_hbm_bytes};
    if (check_members(ld, v, "$.cost", keys, 4))
        return KV_FAIL;
    for (int i = 0; i < 4; i++) {
        int failed = 0;
        const cJSON *x = member(ld, v, "$.cost", keys[i], i < 3, &failed);
        if (failed)
            return KV_FAIL;
        char mpath[KV_JSON_PATH_MAX];
        kv_json_path_key(mpath, sizeof mpath, "$.cost", keys[i]);
        if (x && get_expr(ld, x, mpath, fields[i]))
            return KV_FAIL;
    }
    return KV_OK;
}

/* ---- rules that span sections --------------------------------------------- */

/* The names an expression may use: the parameters, then W. */
typedef struct {
    const char *names[KV_PROBLEM_MAX_PARAMS + 1];
    int64_t values[KV_PROBLEM_MAX_PARAMS + 1];
    kv_expr_env env;
} problem_env;

static void make_env(const kv_problem *p, int size, int world, problem_env *e)
{
    for (int i = 0; i < p->n_params; i++) {
        e->names[i] = p->param_names[i];
        e->values[i] = size >= 0 ? p->sizes[size].values[i] : 0;
    }
    e->names[p->n_params] = "W";
    e->values[p->n_params] = world;
    e->env.n = p->n_params + 1;
    e->env.names = e->names;
    e->env.values = e->values;
}

static const char *const cost_keys[] = {"send_bytes", "recv_bytes", "flops", "hbm_bytes"};

static const char *cost_expr(const kv_problem *p, int i)
{
    switch (i) {
    case 0: return p->cost_send_bytes;
    case 1: return p->cost_recv_bytes;
    case 2: return p->cost_flops;
    default: return p->cost_hbm_bytes;
    }
}

/* What an expression gives: a dimension (positive, exact divisions), a cost
 * (not negative) or an integer input's bound (any value). */
enum { EXPR_COST, EXPR_SHAPE, EXPR_BOUND };

/* Every expression, by its JSON path, through fn; stops at the first error. */
typedef int expr_fn(loader *ld, const char *jpath, const char *expr, int kind, void *arg);

static int each_expr(loader *ld, const kv_problem *p, expr_fn *fn, void *arg)
{
    char jpath[KV_JSON_PATH_MAX];
    for (int io = 0; io < 2; io++) {
        const kv_tensor_spec *ts = io ? p->outputs : p->inputs;
        int n = io ? p->n_outputs : p->n_inputs;
        for (int i = 0; i < n; i++) {
            for (int d = 0; d < ts[i].ndim; d++) {
                snprintf(jpath, sizeof jpath, "$.%s[%d].shape[%d]", io ? "outputs" : "inputs", i,
                         d);
                if (fn(ld, jpath, ts[i].shape[d], EXPR_SHAPE, arg))
                    return KV_FAIL;
            }
        }
    }
    for (int i = 0; i < p->n_inputs; i++) {
        const kv_tensor_spec *t = &p->inputs[i];
        if (t->init != KV_INIT_INT_RANGE && t->init != KV_INIT_PERMUTATION)
            continue;
        snprintf(jpath, sizeof jpath, "$.inputs[%d].init.low", i);
        if (fn(ld, jpath, t->init_low, EXPR_BOUND, arg))
            return KV_FAIL;
        snprintf(jpath, sizeof jpath, "$.inputs[%d].init.high", i);
        if (fn(ld, jpath, t->init_high, EXPR_BOUND, arg))
            return KV_FAIL;
    }
    for (int i = 0; i < 4; i++) {
        const char *e = cost_expr(p, i);
        if (!e[0])
            continue;
        snprintf(jpath, sizeof jpath, "$.cost.%s", cost_keys[i]);
        if (fn(ld, jpath, e, EXPR_COST, arg))
            return KV_FAIL;
    }
    if (p->scratch_bytes[0] && fn(ld, "$.scratch_bytes", p->scratch_bytes, EXPR_COST, arg))
        return KV_FAIL;
    return KV_OK;
}

static int check_one(loader *ld, const char *jpath, const char *expr, int kind, void *arg)
{
    (void)kind;
    kv_err e;
    if (kv_expr_check(expr, &((problem_env *)arg)->env, &e))
        return fail(ld, jpath, "%s", e.msg);
    return KV_OK;
}

typedef struct {
    const kv_problem *p;
    int size, world;
    problem_env env;
} eval_arg;

static int eval_one(loader *ld, const char *jpath, const char *expr, int kind, void *arg)
{
    eval_arg *a = arg;
    kv_err e;
    int64_t v;
    int rc = kind == EXPR_SHAPE ? kv_expr_eval_exact(expr, &a->env.env, &v, &e)
                                : kv_expr_eval(expr, &a->env.env, &v, &e);
    const char *size = a->p->sizes[a->size].name;
    if (rc)
        return fail(ld, jpath, "size \"%s\" at W=%d: %s", size, a->world, e.msg);
    char q[80];
    kv_json_quote(q, sizeof q, expr);
    if (kind == EXPR_SHAPE && v <= 0)
        return fail(ld, jpath, "size \"%s\" at W=%d: %s is %lld; every dimension must be "
                               "positive", size, a->world, q, (long long)v);
    if (kind == EXPR_COST && v < 0)
        return fail(ld, jpath, "size \"%s\" at W=%d: %s is %lld; it cannot be negative",
                    size, a->world, q, (long long)v);
    return KV_OK;
}

/* An int_range or permutation input's bounds at one size and world: low <
 * high, both within the dtype, and wide enough for a permutation's rows. */
static int check_int_range(loader *ld, const kv_problem *p, int i, int size, int world,
                           const kv_shape *shape)
{
    const kv_tensor_spec *t = &p->inputs[i];
    if (t->init != KV_INIT_INT_RANGE && t->init != KV_INIT_PERMUTATION)
        return KV_OK;
    int64_t lo, hi;
    kv_err e;
    if (kv_problem_init_range(p, i, size, world, &lo, &hi, &e))
        return fail(ld, NULL, "%s", e.msg);
    char jpath[KV_JSON_PATH_MAX];
    snprintf(jpath, sizeof jpath, "$.inputs[%d].init.high", i);
    const char *sname = p->sizes[size].name;
    if (hi <= lo)
        return fail(ld, jpath, "size \"%s\" at W=%d: high (%lld) must be greater than low "
                               "(%lld): the range is [low, high)", sname, world, (long long)hi,
                    (long long)lo);
    if (t->dtype == KEVO_I32 && (lo < INT32_MIN || hi - 1 > INT32_MAX))
        return fail(ld, jpath, "size \"%s\" at W=%d: [%lld, %lld) does not fit in i32", sname,
                    world, (long long)lo, (long long)hi);
    int64_t row = shape->shape[shape->ndim - 1];
    if (t->init == KV_INIT_PERMUTATION && hi - lo < row)
        return fail(ld, jpath, "size \"%s\" at W=%d: input %s: a permutation of rows of %lld "
                               "distinct values needs high - low >= %lld, got %lld", sname, world,
                    t->name, (long long)row, (long long)row, (long long)(hi - lo));
    return KV_OK;
}

static int check_rules(loader *ld, kv_problem *p)
{
    /* every expression uses only the parameters and W */
    problem_env env;
    make_env(p, -1, 0, &env);
    env.env.values = NULL;
    if (each_expr(ld, p, check_one, &env))
        return KV_FAIL;

    /* tolerances given per world name exactly the problem's worlds */
    unsigned worlds = 0;
    for (int w = 0; w < p->n_worlds; w++)
        worlds |= 1u << p->worlds[w];
    for (int i = 0; i < p->n_outputs; i++) {
        const kv_tensor_spec *t = &p->outputs[i];
        const unsigned given[2] = {t->atol_worlds, t->rtol_worlds};
        for (int k = 0; k < 2; k++) {
            if (!given[k] || given[k] == worlds)
                continue;
            char jpath[KV_JSON_PATH_MAX];
            snprintf(jpath, sizeof jpath, "$.outputs[%d].%s", i, k ? "rtol" : "atol");
            for (int w = 2; w <= KEVO_MAX_RANKS; w++) {
                if ((worlds & 1u << w) && !(given[k] & 1u << w))
                    return fail(ld, jpath, "no value for W=%d, one of the problem's worlds", w);
                if (!(worlds & 1u << w) && (given[k] & 1u << w))
                    return fail(ld, jpath, "a value for W=%d, which is not one of the problem's "
                                           "worlds", w);
            }
        }
    }

    /* tolerances need a reason */
    int any_tol = 0;
    for (int i = 0; i < p->n_outputs; i++)
        any_tol |= p->outputs[i].atol > 0 || p->outputs[i].rtol > 0;
    if (any_tol && !p->tolerance_reason[0])
        return fail(ld, "$.tolerance_reason", "required key is missing (an output has a "
                                              "non-zero atol or rtol: say why it is needed)");

    /* valid_rows_from names an integer output that is compared in full */
    for (int i = 0; i < p->n_outputs; i++) {
        const char *ref = p->outputs[i].valid_rows_from;
        if (!ref[0])
            continue;
        char jpath[KV_JSON_PATH_MAX];
        snprintf(jpath, sizeof jpath, "$.outputs[%d].valid_rows_from", i);
        int j = 0;
        while (j < p->n_outputs && strcmp(p->outputs[j].name, ref) != 0)
            j++;
        if (j == p->n_outputs) {
            const char *names[KEVO_MAX_TENSORS];
            for (int k = 0; k < p->n_outputs; k++)
                names[k] = p->outputs[k].name;
            return unknown_value(ld, jpath, "output", ref, names, (size_t)p->n_outputs);
        }
        if (j == i)
            return fail(ld, jpath, "\"%s\" names this output itself; it must name another "
                                   "(integer) output", ref);
        if (!is_int_dtype(p->outputs[j].dtype))
            return fail(ld, jpath, "\"%s\" is a %s output; valid_rows_from must name an integer "
                                   "output (i32 or i64) whose element sum is the number of "
                                   "valid rows", ref, kv_dtype_name(p->outputs[j].dtype));
        if (p->outputs[j].valid_rows_from[0])
            return fail(ld, jpath, "\"%s\" has a valid_rows_from of its own; the row count must "
                                   "be compared in full", ref);
    }

    /* every shape at every size and world: exact, positive, representable */
    eval_arg a = {.p = p};
    for (int s = 0; s < p->n_sizes; s++) {
        for (int w = 0; w < p->n_worlds; w++) {
            a.size = s;
            a.world = p->worlds[w];
            make_env(p, s, a.world, &a.env);
            if (each_expr(ld, p, eval_one, &a))
                return KV_FAIL;
            kv_shape in[KEVO_MAX_TENSORS], out[KEVO_MAX_TENSORS];
            kv_err e;
            if (kv_problem_shapes(p, s, a.world, in, out, &e))
                return fail(ld, NULL, "%s", e.msg);
            for (int i = 0; i < p->n_inputs; i++)
                if (check_int_range(ld, p, i, s, a.world, &in[i]))
                    return KV_FAIL;
        }
    }
    return KV_OK;
}

static int check_files(loader *ld, const char *dir, kv_problem *p)
{
    struct stat st;
    kv_err e;
    if (kv_path_join(p->reference, sizeof p->reference, dir, "reference.cu", &e))
        return fail(ld, NULL, "%s", e.msg);
    if (stat(p->reference, &st) != 0 || !S_ISREG(st.st_mode))
        return kv_err_set(ld->err, "%s: missing (every problem needs its NCCL reference, a "
                                   "candidate per include/kevo/kernel.h)", p->reference);
    char hook[PATH_MAX];
    if (kv_path_join(hook, sizeof hook, dir, "inputs.cu", &e))
        return fail(ld, NULL, "%s", e.msg);
    int have_hook = stat(hook, &st) == 0 && S_ISREG(st.st_mode);
    if (have_hook)
        snprintf(p->inputs_hook, sizeof p->inputs_hook, "%s", hook);
    for (int i = 0; i < p->n_inputs; i++) {
        if (p->inputs[i].init == KV_INIT_HOOK && !have_hook) {
            char jpath[KV_JSON_PATH_MAX];
            snprintf(jpath, sizeof jpath, "$.inputs[%d].init.kind", i);
            return fail(ld, jpath, "\"hook\" needs %s, which is missing", hook);
        }
    }
    return KV_OK;
}

/* ---- the file ----------------------------------------------------------------- */

static int parse_root(loader *ld, const cJSON *root, const char *dir, kv_problem *p)
{
    static const char *const keys[] = {"name",   "category", "description",      "worlds",
                                       "params", "sizes",    "inputs",           "outputs",
                                       "cost",   "tolerance_reason", "scratch_bytes"};
    if (check_members(ld, root, "$", keys, sizeof keys / sizeof keys[0]))
        return KV_FAIL;
    const cJSON *v[9];
    int failed = 0;
    for (int i = 0; i < 9 && !failed; i++)
        v[i] = member(ld, root, "$", keys[i], 1, &failed);
    if (failed)
        return KV_FAIL;
    if (parse_name(ld, v[0], dir, p) || parse_category(ld, v[1], p) ||
        get_text(ld, v[2], "$.description", KV_PROBLEM_DESCRIPTION_MAX, &p->description) ||
        parse_worlds(ld, v[3], p) || parse_params(ld, v[4], p) || parse_sizes(ld, v[5], p) ||
        parse_tensors(ld, v[6], "$.inputs", 0, p) || parse_tensors(ld, v[7], "$.outputs", 1, p) ||
        parse_cost(ld, v[8], p))
        return KV_FAIL;
    const cJSON *reason = member(ld, root, "$", "tolerance_reason", 0, &failed);
    if (reason) {
        char *text;
        if (get_text(ld, reason, "$.tolerance_reason", sizeof p->tolerance_reason, &text))
            return KV_FAIL;
        snprintf(p->tolerance_reason, sizeof p->tolerance_reason, "%s", text);
        free(text);
    }
    const cJSON *scratch = member(ld, root, "$", "scratch_bytes", 0, &failed);
    if (scratch && get_expr(ld, scratch, "$.scratch_bytes", p->scratch_bytes))
        return KV_FAIL;
    return check_rules(ld, p);
}

int kv_problem_load(const char *dir, kv_problem *p, kv_err *err)
{
    memset(p, 0, sizeof *p);
    char file[PATH_MAX];
    if (kv_path_join(file, sizeof file, dir, "problem.json", err))
        return KV_FAIL;
    if (strlen(dir) >= sizeof p->dir)
        return kv_err_set(err, "%s: path too long", dir);
    loader ld = {.file = file, .err = err};
    char *text = NULL;
    size_t len = 0;
    if (kv_read_file_max(file, KV_MAX_PROBLEM_BYTES, &text, &len, err))
        return KV_FAIL;
    int rc = KV_FAIL;
    cJSON *root = NULL;
    const char *json = text;
    if (strlen(text) != len) {
        fail(&ld, NULL, "contains a NUL byte at offset %zu; not a JSON text", strlen(text));
        goto done;
    }
    if ((unsigned char)json[0] == 0xEF && (unsigned char)json[1] == 0xBB &&
        (unsigned char)json[2] == 0xBF)
        json += 3; /* a UTF-8 byte-order mark */
    if (json[strspn(json, " \t\r\n")] == '\0') {
        fail(&ld, NULL, "empty file; expected a JSON object");
        goto done;
    }
    char what[KV_JSON_MSG_MAX];
    root = kv_json_parse_strict(json, what, sizeof what);
    if (!root) {
        fail(&ld, NULL, "%s", what);
        goto done;
    }
    snprintf(p->dir, sizeof p->dir, "%s", dir);
    if (parse_root(&ld, root, dir, p) || check_files(&ld, dir, p))
        goto done;
    rc = KV_OK;
done:
    cJSON_Delete(root);
    free(text);
    if (rc != KV_OK) {
        kv_problem_free(p);
        memset(p, 0, sizeof *p);
    }
    return rc;
}

void kv_problem_free(kv_problem *p)
{
    if (!p)
        return;
    free(p->description);
    p->description = NULL;
}

/* ---- every problem under a root ---------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int kv_problems_load_all(const char *root, kv_problem **out,
                         void (*on_error)(const char *msg, void *ctx), void *ctx, kv_err *err)
{
    *out = NULL;
    DIR *d = opendir(root);
    if (!d)
        return kv_err_errno(err, errno, "open problems folder %s", root);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = KV_FAIL;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) {
                kv_err_set(err, "%s: out of memory", root);
                goto done;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(de->d_name))) {
            kv_err_set(err, "%s: out of memory", root);
            goto done;
        }
        n++;
    }
    if (errno != 0) {
        kv_err_errno(err, errno, "read problems folder %s", root);
        goto done;
    }
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_names);

    kv_problem *v = NULL;
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char dir[PATH_MAX], file[PATH_MAX];
        struct stat st;
        kv_err e = {{0}};
        if (kv_path_join(dir, sizeof dir, root, names[i], &e) ||
            kv_path_join(file, sizeof file, dir, "problem.json", &e)) {
            if (on_error)
                on_error(e.msg, ctx);
            continue;
        }
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || lstat(file, &st) != 0)
            continue; /* not a problem folder */
        kv_problem *nv = realloc(v, (size_t)(count + 1) * sizeof *nv);
        if (!nv) {
            kv_problems_free(v, count);
            kv_err_set(err, "%s: out of memory", root);
            goto done;
        }
        v = nv;
        if (kv_problem_load(dir, &v[count], &e) == KV_OK)
            count++;
        else if (on_error)
            on_error(e.msg, ctx);
    }
    if (count == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    rc = count;
done:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

void kv_problems_free(kv_problem *v, int n)
{
    for (int i = 0; v && i < n; i++)
        kv_problem_free(&v[i]);
    free(v);
}

const char *kv_problems_default_root(char *out, size_t cap)
{
    const char *env = getenv("KEVO_PROBLEMS");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return out;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[PATH_MAX + 16];
            struct stat st;
            snprintf(cand, sizeof cand, "%s/../problems", exe);
            if (stat(cand, &st) == 0 && S_ISDIR(st.st_mode) && strlen(cand) < cap) {
                snprintf(out, cap, "%s", cand);
                return out;
            }
        }
    }
#ifdef KEVO_SOURCE_DIR
    /* the source tree kevo was built from (a build directory is usually not
     * beside problems/) */
    const char *home = getenv("KEVO_HOME");
    snprintf(out, cap, "%s/problems", home && *home ? home : KEVO_SOURCE_DIR);
#else
    snprintf(out, cap, "./problems");
#endif
    return out;
}

/* ---- lookups, shapes, roofline --------------------------------------------- */

int kv_problem_find_size(const kv_problem *p, const char *name)
{
    for (int i = 0; i < p->n_sizes; i++)
        if (strcmp(p->sizes[i].name, name) == 0)
            return i;
    return -1;
}

int kv_problem_supports_world(const kv_problem *p, int world)
{
    for (int i = 0; i < p->n_worlds; i++)
        if (p->worlds[i] == world)
            return 1;
    return 0;
}

static int check_size_world(const kv_problem *p, int size, int world, kv_err *err)
{
    if (size < 0 || size >= p->n_sizes)
        return kv_err_set(err, "problem %s: no size #%d (it has %d)", p->name, size, p->n_sizes);
    if (!kv_problem_supports_world(p, world)) {
        char list[64];
        size_t o = 0;
        list[0] = '\0';
        for (int i = 0; i < p->n_worlds; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? ", " : "", p->worlds[i]);
        return kv_err_set(err, "problem %s does not support W=%d (its worlds: %s)", p->name,
                          world, list);
    }
    return KV_OK;
}

static int tensor_shape(const kv_problem *p, const kv_tensor_spec *t, const char *what, int i,
                        const problem_env *env, kv_shape *out, const char *size, int world,
                        kv_err *err)
{
    memset(out, 0, sizeof *out);
    out->ndim = t->ndim;
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t v;
        if (kv_expr_eval_exact(t->shape[d], &env->env, &v, err))
            return kv_err_prefix(err, "problem %s: $.%s[%d].shape[%d]: size \"%s\" at W=%d",
                                 p->name, what, i, d, size, world);
        if (v <= 0)
            return kv_err_set(err, "problem %s: $.%s[%d].shape[%d]: size \"%s\" at W=%d: \"%s\" "
                                   "is %lld; every dimension must be positive", p->name, what, i,
                              d, size, world, t->shape[d], (long long)v);
        out->shape[d] = v;
        if (__builtin_mul_overflow(numel, v, &numel))
            return kv_err_set(err, "problem %s: $.%s[%d]: size \"%s\" at W=%d: the element count "
                                   "overflows 64 bits", p->name, what, i, size, world);
    }
    size_t bytes;
    if (__builtin_mul_overflow((uint64_t)numel, kevo_dtype_size(t->dtype), &bytes))
        return kv_err_set(err, "problem %s: $.%s[%d]: size \"%s\" at W=%d: the byte count "
                               "overflows", p->name, what, i, size, world);
    out->numel = numel;
    out->bytes = bytes;
    return KV_OK;
}

int kv_problem_shapes(const kv_problem *p, int size, int world, kv_shape *inputs,
                      kv_shape *outputs, kv_err *err)
{
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    problem_env env;
    make_env(p, size, world, &env);
    const char *sname = p->sizes[size].name;
    for (int i = 0; i < p->n_inputs; i++)
        if (tensor_shape(p, &p->inputs[i], "inputs", i, &env, &inputs[i], sname, world, err))
            return KV_FAIL;
    for (int i = 0; i < p->n_outputs; i++)
        if (tensor_shape(p, &p->outputs[i], "outputs", i, &env, &outputs[i], sname, world, err))
            return KV_FAIL;
    return KV_OK;
}

int kv_problem_init_range(const kv_problem *p, int input, int size, int world, int64_t *lo,
                          int64_t *hi, kv_err *err)
{
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    if (input < 0 || input >= p->n_inputs)
        return kv_err_set(err, "problem %s: no input %d", p->name, input);
    const kv_tensor_spec *t = &p->inputs[input];
    if (t->init != KV_INIT_INT_RANGE && t->init != KV_INIT_PERMUTATION)
        return kv_err_set(err, "problem %s: input %s is not filled by int_range or permutation",
                          p->name, t->name);
    problem_env env;
    make_env(p, size, world, &env);
    if (kv_expr_eval(t->init_low, &env.env, lo, err))
        return kv_err_prefix(err, "problem %s: $.inputs[%d].init.low: size \"%s\" at W=%d",
                             p->name, input, p->sizes[size].name, world);
    if (kv_expr_eval(t->init_high, &env.env, hi, err))
        return kv_err_prefix(err, "problem %s: $.inputs[%d].init.high: size \"%s\" at W=%d",
                             p->name, input, p->sizes[size].name, world);
    return KV_OK;
}

int kv_problem_scratch_bytes(const kv_problem *p, int size, int world, int64_t *out, kv_err *err)
{
    *out = 0;
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    if (!p->scratch_bytes[0])
        return KV_OK;
    problem_env env;
    make_env(p, size, world, &env);
    if (kv_expr_eval(p->scratch_bytes, &env.env, out, err))
        return kv_err_prefix(err, "problem %s: $.scratch_bytes: size \"%s\" at W=%d", p->name,
                             p->sizes[size].name, world);
    return KV_OK; /* not negative: loading checked every size and world */
}

int kv_problem_roofline(const kv_problem *p, int size, int world, kv_roofline *out, kv_err *err)
{
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    problem_env env;
    make_env(p, size, world, &env);
    double v[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        const char *e = cost_expr(p, i);
        if (!e[0])
            continue;
        int64_t x;
        if (kv_expr_eval(e, &env.env, &x, err))
            return kv_err_prefix(err, "problem %s: $.cost.%s: size \"%s\" at W=%d", p->name,
                                 cost_keys[i], p->sizes[size].name, world);
        v[i] = (double)x;
    }
    memset(out, 0, sizeof *out);
    out->send_bytes = v[0];
    out->recv_bytes = v[1];
    out->flops = v[2];
    out->hbm_bytes = v[3];
    out->link_s = (v[0] > v[1] ? v[0] : v[1]) / KV_LINK_BYTES_PER_S;
    out->compute_s = v[2] / KV_BF16_FLOPS_PER_S;
    out->hbm_s = v[3] / KV_HBM_BYTES_PER_S;
    out->seconds = out->link_s;
    if (out->compute_s > out->seconds)
        out->seconds = out->compute_s;
    if (out->hbm_s > out->seconds)
        out->seconds = out->hbm_s;
    return KV_OK;
}
