/* load.c — problems/<name>/problem.json to one validated kv_problem
 * (problem/problem.h; the format is documented in docs/problems.md).
 *
 * Loading is strict. The table below describes every member, and the
 * schema engine (common/schema.h) reads the file against it in table order
 * (sizes are read against the params, an input's init against its dtype):
 * unknown keys get the nearest valid one suggested, every value is checked
 * against its type and range. The members that are not plain scalars
 * (worlds, params, sizes, tensors, expressions, texts) have readers here.
 * Then problem/validate.c checks what spans sections. Messages are
 * "<file>: <JSON path>: <what is wrong>", e.g.
 *   problems/foo/problem.json: $.outputs[0].dtype: unknown dtype "bf17";
 *     expected one of bf16, f16, f32, i32, i64, fp8_e4m3 (did you mean "bf16"?)
 *   problems/foo/problem.json: $.inputs[0].shape[0]: size "small" at W=8:
 *     inexact division in "N/W" (column 2): 12 / 8 leaves remainder 4
 * The JSON parser is cJSON, through kv_json_parse_strict (common/json.h): a
 * syntax error is placed by the parse-end pointer of cJSON_ParseWithOpts;
 * nesting deeper than KV_JSON_DEPTH_MAX and a NUL in any string (\u0000)
 * are refused, the latter with its JSON path. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "common/json.h"
#include "common/schema.h"
#include "problem/internal.h"

_Static_assert(sizeof(kevo_dtype) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(kv_init_kind) == sizeof(int), "enums are stored as int");

static const char *const categories[] = {
    "collective",    "tensor-parallel", "expert-parallel", "context-parallel",
    "data-parallel", "vocab-parallel",  "long-tail",
};
#define N_CATEGORIES (sizeof categories / sizeof categories[0])

static const char *const functions[] = {"min", "max", "ceil_div"};

/* ---- values -------------------------------------------------------------------- */

static int get_string(const cJSON *v, const char *jpath, char *out, size_t cap, kv_err *err)
{
    if (!cJSON_IsString(v))
        return kv_schema_fail(err, jpath, "expected a string, got %s", kv_json_type(v));
    size_t len = strlen(v->valuestring);
    if (len == 0)
        return kv_schema_fail(err, jpath, "must not be empty");
    if (len >= cap)
        return kv_schema_fail(err, jpath, "too long (%zu bytes, at most %zu)", len, cap - 1);
    memcpy(out, v->valuestring, len + 1);
    return KV_OK;
}

static int get_integer(const cJSON *v, const char *jpath, double min, double max, int64_t *out,
                       kv_err *err)
{
    double d;
    if (kv_schema_get_number(v, jpath, 1, min, max, &d, err))
        return KV_FAIL;
    *out = (int64_t)d;
    return KV_OK;
}

/* A finite number (any range; -0 reads as 0). */
static int get_finite(const cJSON *v, const char *jpath, double *out, kv_err *err)
{
    if (!cJSON_IsNumber(v))
        return kv_schema_fail(err, jpath, "expected a number, got %s", kv_json_type(v));
    if (!isfinite(v->valuedouble))
        return kv_schema_fail(err, jpath, "number too large to represent");
    *out = v->valuedouble == 0 ? 0.0 : v->valuedouble;
    return KV_OK;
}

/* A text: a string, or an array of strings (lines) joined with '\n'.
 * Returns a malloc'ed string in *out. */
static int get_text(const cJSON *v, const char *jpath, size_t max, char **out, kv_err *err)
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
                return kv_schema_fail(err, ipath, "expected a string (one line of text), got %s",
                                      kv_json_type(c));
            len += strlen(c->valuestring) + 1;
        }
        if (len)
            len--; /* no newline after the last line */
    } else {
        return kv_schema_fail(err, jpath,
                              "expected a string or an array of strings (lines), got %s",
                              kv_json_type(v));
    }
    if (len >= max)
        return kv_schema_fail(err, jpath, "too long (%zu bytes, at most %zu)", len, max - 1);
    char *s = malloc(len + 1);
    if (!s)
        return kv_schema_fail(err, jpath, "out of memory");
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
        return kv_schema_fail(err, jpath, "must not be empty");
    }
    *out = s;
    return KV_OK;
}

/* An expression: a string, or a non-negative integer written as a number. */
static int get_expr(const cJSON *v, const char *jpath, char out[KV_PROBLEM_EXPR_MAX], kv_err *err)
{
    if (cJSON_IsNumber(v)) {
        int64_t x;
        if (get_integer(v, jpath, 0, KV_JSON_INT_EXACT_MAX, &x, err))
            return KV_FAIL;
        snprintf(out, KV_PROBLEM_EXPR_MAX, "%lld", (long long)x);
        return KV_OK;
    }
    if (!cJSON_IsString(v))
        return kv_schema_fail(err, jpath,
                              "expected an expression (a string such as \"N/W\") or an "
                              "integer, got %s",
                              kv_json_type(v));
    return get_string(v, jpath, out, KV_PROBLEM_EXPR_MAX, err);
}

/* ---- readers of the table's custom rows ---------------------------------------- */

/* An expression at the row's offset (the cost model, scratch_bytes). */
static int read_expr(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                     void *base, kv_err *err)
{
    (void)s;
    return get_expr(v, jpath, kv_schema_field(k, base), err);
}

static int read_description(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                            const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    return get_text(v, jpath, KV_PROBLEM_DESCRIPTION_MAX, &((kv_problem *)base)->description, err);
}

static int read_reason(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                       const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_problem *p = base;
    char *text;
    if (get_text(v, jpath, sizeof p->tolerance_reason, &text, err))
        return KV_FAIL;
    snprintf(p->tolerance_reason, sizeof p->tolerance_reason, "%s", text);
    free(text);
    return KV_OK;
}

static int read_name(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                     void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_problem *p = base;
    if (get_string(v, jpath, p->name, sizeof p->name, err))
        return KV_FAIL;
    for (const char *c = p->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return kv_schema_fail(err, jpath,
                                  "\"%s\" is not a valid problem name (lower-case "
                                  "letters, digits and '_')",
                                  p->name);
    /* the folder's name, as written (or resolved, for "." and "..") */
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", p->dir);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    const char *dirname = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
    char real[PATH_MAX];
    if ((strcmp(dirname, ".") == 0 || strcmp(dirname, "..") == 0) && realpath(buf, real))
        dirname = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (strcmp(dirname, p->name) != 0)
        return kv_schema_fail(err, jpath,
                              "\"%s\" differs from the name of its folder \"%s\"; "
                              "they must be the same",
                              p->name, dirname);
    return KV_OK;
}

static int read_category(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                         const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_problem *p = base;
    if (!cJSON_IsString(v))
        return kv_schema_fail(err, jpath, "expected a string, got %s", kv_json_type(v));
    for (size_t i = 0; i < N_CATEGORIES; i++) {
        if (strcmp(v->valuestring, categories[i]) == 0) {
            snprintf(p->category, sizeof p->category, "%s", categories[i]);
            return KV_OK;
        }
    }
    return kv_schema_unknown_value(err, jpath, "category", v->valuestring, categories,
                                   N_CATEGORIES);
}

static int read_worlds(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                       const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_problem *p = base;
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array of world sizes, got %s",
                              kv_json_type(v));
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        int64_t w;
        if (get_integer(c, ipath, 2, KEVO_MAX_RANKS, &w, err))
            return KV_FAIL;
        if (i > 0 && w <= p->worlds[i - 1])
            return kv_schema_fail(err, ipath,
                                  "world sizes must be listed once each, in increasing order");
        if (i >= KV_PROBLEM_MAX_WORLDS)
            return kv_schema_fail(err, ipath, "too many world sizes (at most %d)",
                                  KV_PROBLEM_MAX_WORLDS);
        p->worlds[i] = (int)w;
    }
    if (i == 0)
        return kv_schema_fail(err, jpath, "must list at least one world size");
    p->n_worlds = i;
    return KV_OK;
}

/* A parameter's name: an identifier that is not W, a key of every size or a
 * function of expressions, and not listed before. */
static int check_param(const kv_problem *p, int i, const char *ipath, kv_err *err)
{
    const char *name = p->param_names[i];
    if (!kv_json_is_identifier(name))
        return kv_schema_fail(err, ipath,
                              "\"%s\" is not a valid parameter name (a letter or "
                              "'_', then letters, digits and '_')",
                              name);
    if (strcmp(name, "W") == 0)
        return kv_schema_fail(err, ipath,
                              "\"W\" is the world size, always defined; it cannot "
                              "be a parameter");
    if (strcmp(name, "name") == 0 || strcmp(name, "validation") == 0)
        return kv_schema_fail(err, ipath,
                              "\"%s\" is a key of every size; it cannot be a "
                              "parameter",
                              name);
    for (size_t f = 0; f < sizeof functions / sizeof functions[0]; f++)
        if (strcmp(name, functions[f]) == 0)
            return kv_schema_fail(err, ipath,
                                  "\"%s\" is a function of expressions; it cannot "
                                  "be a parameter",
                                  name);
    for (int j = 0; j < i; j++)
        if (strcmp(p->param_names[j], name) == 0)
            return kv_schema_fail(err, ipath, "parameter \"%s\" is listed twice", name);
    return KV_OK;
}

static int read_params(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                       const char *jpath, void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_problem *p = base;
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array of parameter names, got %s",
                              kv_json_type(v));
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        if (i >= KV_PROBLEM_MAX_PARAMS)
            return kv_schema_fail(err, ipath, "too many parameters (at most %d)",
                                  KV_PROBLEM_MAX_PARAMS);
        if (get_string(c, ipath, p->param_names[i], KEVO_NAME_MAX, err) ||
            check_param(p, i, ipath, err))
            return KV_FAIL;
    }
    if (i == 0)
        return kv_schema_fail(err, jpath, "must name at least one parameter");
    p->n_params = i;
    return KV_OK;
}

/* One size: its name, whether it is the validation size, and a value of
 * every parameter (its keys are the params, so they are checked here). */
static int read_size(const kv_schema *s, const cJSON *v, const char *jpath, const kv_problem *p,
                     kv_size_spec *sz, kv_err *err)
{
    const char *keys[KV_PROBLEM_MAX_PARAMS + 2];
    size_t nk = 0;
    keys[nk++] = "name";
    keys[nk++] = "validation";
    for (int i = 0; i < p->n_params; i++)
        keys[nk++] = p->param_names[i];
    if (kv_schema_check_keys(v, jpath, keys, nk, err))
        return KV_FAIL;
    char mpath[KV_JSON_PATH_MAX];
    for (int i = 0; i < 2; i++) {
        const kv_schema_key *row = kv_schema_find(s, i ? "sizes[].validation" : "sizes[].name");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, kv_schema_key_name(row));
        kv_json_path_key(mpath, sizeof mpath, jpath, kv_schema_key_name(row));
        if (!m && (row->flags & KV_SCHEMA_REQUIRED))
            return kv_schema_fail(err, mpath, "required key is missing");
        if (m && kv_schema_read_value(s, row, m, mpath, sz, err))
            return KV_FAIL;
    }
    for (int i = 0; i < p->n_params; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, p->param_names[i]);
        kv_json_path_key(mpath, sizeof mpath, jpath, p->param_names[i]);
        if (!x)
            return kv_schema_fail(err, mpath,
                                  "size \"%s\" does not give parameter %s (every "
                                  "size gives every parameter)",
                                  sz->name, p->param_names[i]);
        if (get_integer(x, mpath, 0, KV_JSON_INT_EXACT_MAX, &sz->values[i], err))
            return KV_FAIL;
    }
    return KV_OK;
}

static int read_sizes(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                      void *base, kv_err *err)
{
    (void)k;
    kv_problem *p = base;
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array of sizes, got %s", kv_json_type(v));
    int i = 0, n_valid = 0, first_valid = -1;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        if (i >= KV_PROBLEM_MAX_SIZES)
            return kv_schema_fail(err, ipath, "too many sizes (at most %d)", KV_PROBLEM_MAX_SIZES);
        kv_size_spec *sz = &p->sizes[i];
        if (read_size(s, c, ipath, p, sz, err))
            return KV_FAIL;
        for (int j = 0; j < i; j++)
            if (strcmp(p->sizes[j].name, sz->name) == 0)
                return kv_schema_fail(err, ipath, "size name \"%s\" is used twice", sz->name);
        if (sz->validation) {
            if (n_valid++ > 0) {
                char vpath[KV_JSON_PATH_MAX];
                kv_json_path_key(vpath, sizeof vpath, ipath, "validation");
                return kv_schema_fail(err, vpath,
                                      "a second validation size (\"%s\" is one "
                                      "already); exactly one size has "
                                      "\"validation\": true",
                                      p->sizes[first_valid].name);
            }
            first_valid = i;
        }
    }
    p->n_sizes = i;
    if (n_valid == 0)
        return kv_schema_fail(err, jpath,
                              "no validation size; exactly one size must have "
                              "\"validation\": true (it is never shown to mutators)");
    if (i - n_valid < 3)
        return kv_schema_fail(err, jpath,
                              "%d size%s besides the validation size; at least 3 are "
                              "needed (from latency-bound to bandwidth-bound)",
                              i - n_valid, i - n_valid == 1 ? "" : "s");
    return KV_OK;
}

static int read_shape(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                      void *base, kv_err *err)
{
    (void)s;
    (void)k;
    kv_tensor_spec *t = base;
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath,
                              "expected an array of dimensions (expressions such as "
                              "\"N/W\"), got %s",
                              kv_json_type(v));
    int d = 0;
    for (const cJSON *c = v->child; c; c = c->next, d++) {
        char dpath[KV_JSON_PATH_MAX];
        kv_json_path_index(dpath, sizeof dpath, jpath, d);
        if (d >= KEVO_MAX_DIMS)
            return kv_schema_fail(err, dpath, "too many dimensions (at most %d)", KEVO_MAX_DIMS);
        if (get_expr(c, dpath, t->shape[d], err))
            return KV_FAIL;
    }
    if (d == 0)
        return kv_schema_fail(err, jpath,
                              "must have at least one dimension (write [\"1\"] for "
                              "a scalar)");
    t->ndim = d;
    return KV_OK;
}

/* The bounds of an int_range or permutation: integers or expressions (an
 * expert count that varies by size); the range is checked at every size and
 * world by problem/validate.c. */
static int read_int_bounds(const cJSON *const ends[2], const char *const paths[2],
                           kv_tensor_spec *t, kv_err *err)
{
    double lim = t->dtype == KEVO_I32 ? 2147483648.0 : KV_JSON_INT_EXACT_MAX;
    char *outs[2] = {t->init_low, t->init_high};
    for (int i = 0; i < 2; i++) {
        int64_t x;
        if (cJSON_IsNumber(ends[i])) {
            if (get_integer(ends[i], paths[i], -lim, lim, &x, err))
                return KV_FAIL;
            snprintf(outs[i], KV_PROBLEM_EXPR_MAX, "%lld", (long long)x);
        } else if (cJSON_IsString(ends[i])) {
            if (get_string(ends[i], paths[i], outs[i], KV_PROBLEM_EXPR_MAX, err))
                return KV_FAIL;
        } else {
            return kv_schema_fail(err, paths[i],
                                  "expected an integer or an expression (a string "
                                  "such as \"E\"), got %s",
                                  kv_json_type(ends[i]));
        }
    }
    return KV_OK;
}

/* An input's init: its kind decides its other keys, and must suit the
 * input's dtype (read before it, in table order). */
static int read_init(const kv_schema *s, const kv_schema_key *k, const cJSON *v, const char *jpath,
                     void *base, kv_err *err)
{
    kv_tensor_spec *t = base;
    if (!cJSON_IsObject(v))
        return kv_schema_fail(err, jpath,
                              "expected an object such as {\"kind\": \"normal\", "
                              "\"mean\": 0, \"std\": 1}, got %s",
                              kv_json_type(v));
    char mpath[KV_JSON_PATH_MAX];
    kv_json_path_key(mpath, sizeof mpath, jpath, "kind");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(v, "kind");
    if (!kind)
        return kv_schema_fail(err, mpath, "required key is missing");
    char kind_row[64];
    snprintf(kind_row, sizeof kind_row, "%s.kind", k->path);
    if (kv_schema_read_value(s, kv_schema_find(s, kind_row), kind, mpath, t, err))
        return KV_FAIL;

    static const char *const normal_keys[] = {"kind", "mean", "std"};
    static const char *const range_keys[] = {"kind", "low", "high"};
    static const char *const kind_keys[] = {"kind"};
    const char *const *keys = kind_keys;
    size_t nk = 1;
    if (t->init == KV_INIT_NORMAL) {
        keys = normal_keys;
        nk = 3;
    } else if (t->init == KV_INIT_UNIFORM || t->init == KV_INIT_INT_RANGE ||
               t->init == KV_INIT_PERMUTATION) {
        keys = range_keys;
        nk = 3;
    }
    if (kv_schema_check_keys(v, jpath, keys, nk, err))
        return KV_FAIL;

    const char *name = kv_init_name(t->init);
    int is_int = kv_dtype_is_int(t->dtype);
    if ((t->init == KV_INIT_NORMAL || t->init == KV_INIT_UNIFORM) && is_int)
        return kv_schema_fail(err, mpath,
                              "\"%s\" fills floating-point tensors; this one is %s "
                              "(use \"int_range\")",
                              name, kv_dtype_name(t->dtype));
    if ((t->init == KV_INIT_INT_RANGE || t->init == KV_INIT_PERMUTATION) && !is_int)
        return kv_schema_fail(err, mpath,
                              "\"%s\" fills integer tensors (i32, i64); this one is "
                              "%s (use \"normal\" or \"uniform\")",
                              name, kv_dtype_name(t->dtype));
    if (nk == 1)
        return KV_OK;

    const cJSON *ends[2];
    char apath[KV_JSON_PATH_MAX], bpath[KV_JSON_PATH_MAX];
    const char *const paths[2] = {apath, bpath};
    for (int i = 0; i < 2; i++) {
        kv_json_path_key(i ? bpath : apath, KV_JSON_PATH_MAX, jpath, keys[i + 1]);
        if (!(ends[i] = cJSON_GetObjectItemCaseSensitive(v, keys[i + 1])))
            return kv_schema_fail(err, paths[i], "required key is missing");
    }
    if (t->init == KV_INIT_INT_RANGE || t->init == KV_INIT_PERMUTATION)
        return read_int_bounds(ends, paths, t, err);
    if (get_finite(ends[0], apath, &t->init_a, err) || get_finite(ends[1], bpath, &t->init_b, err))
        return KV_FAIL;
    if (t->init == KV_INIT_NORMAL && !(t->init_b > 0))
        return kv_schema_fail(err, bpath, "must be positive");
    if (t->init == KV_INIT_UNIFORM && !(t->init_b > t->init_a))
        return kv_schema_fail(err, bpath, "must be greater than low (the range is [low, high))");
    return KV_OK;
}

static int tolerance_value(const cJSON *v, const char *jpath, double *out, kv_err *err)
{
    if (get_finite(v, jpath, out, err))
        return KV_FAIL;
    if (*out < 0)
        return kv_schema_fail(err, jpath, "must be >= 0");
    return KV_OK;
}

/* A number for every world, or an object by world ({"2": 0, "8": 0.25}):
 * reductions in bf16 are exact at W = 2 and need slack at W = 8. That the
 * keys are exactly the problem's worlds is checked by problem/validate.c. */
static int read_tolerance(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                          const char *jpath, void *base, kv_err *err)
{
    (void)s;
    kv_tensor_spec *t = base;
    int rtol = strcmp(kv_schema_key_name(k), "rtol") == 0;
    double *max = rtol ? &t->rtol : &t->atol;
    double *at = rtol ? t->rtol_at : t->atol_at;
    unsigned *worlds = rtol ? &t->rtol_worlds : &t->atol_worlds;
    *worlds = 0;
    if (!cJSON_IsObject(v)) {
        if (tolerance_value(v, jpath, max, err))
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
            return kv_schema_fail(err, kpath, "expected a world size (2..%d) as the key",
                                  KEVO_MAX_RANKS);
        if (*worlds & 1u << w)
            return kv_schema_fail(err, kpath, "W=%ld is given twice", w);
        if (tolerance_value(c, kpath, &at[w], err))
            return KV_FAIL;
        *worlds |= 1u << w;
        if (at[w] > *max)
            *max = at[w];
    }
    return KV_OK;
}

static int check_tensor_name(const kv_schema_key *k, const void *base, const char *jpath,
                             kv_err *err)
{
    const char *name = kv_schema_cfield(k, base);
    if (!kv_json_is_identifier(name))
        return kv_schema_fail(err, jpath,
                              "\"%s\" is not a valid tensor name (a letter or '_', "
                              "then letters, digits and '_')",
                              name);
    return KV_OK;
}

static int check_size_name(const kv_schema_key *k, const void *base, const char *jpath, kv_err *err)
{
    const char *name = kv_schema_cfield(k, base);
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-' || *c == '.'))
            return kv_schema_fail(err, jpath,
                                  "\"%s\" is not a valid size name (letters, digits, "
                                  "'_', '-' and '.')",
                                  name);
    return KV_OK;
}

/* $.inputs or $.outputs: each element against the rows below "inputs[]" or
 * "outputs[]"; names unique across both. */
static int read_tensors(const kv_schema *s, const kv_schema_key *k, const cJSON *v,
                        const char *jpath, void *base, kv_err *err)
{
    kv_problem *p = base;
    int is_output = strcmp(k->path, "outputs") == 0;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s[]", k->path);
    if (!cJSON_IsArray(v))
        return kv_schema_fail(err, jpath, "expected an array of tensors, got %s", kv_json_type(v));
    kv_tensor_spec *ts = is_output ? p->outputs : p->inputs;
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char ipath[KV_JSON_PATH_MAX];
        kv_json_path_index(ipath, sizeof ipath, jpath, i);
        if (i >= KEVO_MAX_TENSORS)
            return kv_schema_fail(err, ipath, "too many %s (at most %d)",
                                  is_output ? "outputs" : "inputs", KEVO_MAX_TENSORS);
        if (kv_schema_read(s, prefix, c, ipath, &ts[i], err))
            return KV_FAIL;
        /* an integer output may be compared bit-exact without tolerances */
        for (int tol = 0; is_output && tol < 2 && !kv_dtype_is_int(ts[i].dtype); tol++) {
            const char *key = tol ? "rtol" : "atol";
            if (!cJSON_GetObjectItemCaseSensitive(c, key)) {
                char mpath[KV_JSON_PATH_MAX];
                kv_json_path_key(mpath, sizeof mpath, ipath, key);
                return kv_schema_fail(err, mpath, "required key is missing");
            }
        }
        char npath[KV_JSON_PATH_MAX];
        kv_json_path_key(npath, sizeof npath, ipath, "name");
        for (int j = 0; j < i; j++)
            if (strcmp(ts[j].name, ts[i].name) == 0)
                return kv_schema_fail(err, npath, "tensor name \"%s\" is used twice", ts[i].name);
        for (int j = 0; is_output && j < p->n_inputs; j++)
            if (strcmp(p->inputs[j].name, ts[i].name) == 0)
                return kv_schema_fail(err, npath, "\"%s\" is already the name of $.inputs[%d]",
                                      ts[i].name, j);
    }
    if (i == 0)
        return kv_schema_fail(err, jpath, "must list at least one tensor");
    if (is_output)
        p->n_outputs = i;
    else
        p->n_inputs = i;
    return KV_OK;
}

/* ---- the table ------------------------------------------------------------------- */

#define P(m) .offset = offsetof(kv_problem, m), .size = sizeof(((kv_problem *)0)->m)
#define T(m) .offset = offsetof(kv_tensor_spec, m), .size = sizeof(((kv_tensor_spec *)0)->m)
#define S(m) .offset = offsetof(kv_size_spec, m), .size = sizeof(((kv_size_spec *)0)->m)
#define REQ KV_SCHEMA_REQUIRED
#define NONEMPTY_REQ (KV_SCHEMA_REQUIRED | KV_SCHEMA_NONEMPTY)

/* The tensor rows, the same below "inputs[]" and "outputs[]". */
#define TENSOR_ROWS(arr)                                                          \
    {.path = arr "[].name",                                                       \
     .type = KV_SCHEMA_STRING,                                                    \
     .flags = NONEMPTY_REQ,                                                       \
     T(name),                                                                     \
     .check = check_tensor_name,                                                  \
     .doc = "the tensor's name: an identifier"},                                  \
        {.path = arr "[].dtype",                                                  \
         .type = KV_SCHEMA_ENUM,                                                  \
         .flags = REQ,                                                            \
         T(dtype),                                                                \
         .names = kv_problem_dtype_names,                                         \
         .what = "dtype",                                                         \
         .doc = "element type"},                                                  \
    {                                                                             \
        .path = arr "[].shape", .type = KV_SCHEMA_CUSTOM, .flags = REQ, T(shape), \
        .read = read_shape, .doc = "dimensions: expressions of the params and W"  \
    }

static const kv_schema_key rows[] = {
    {.path = "name",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(name),
     .read = read_name,
     .doc = "the problem's name, that of its folder"},
    {.path = "category",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(category),
     .read = read_category,
     .doc = "the kind of parallelism"},
    {.path = "description",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(description),
     .read = read_description,
     .doc = "what to compute, for prompts: a string or lines"},
    {.path = "worlds",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(worlds),
     .read = read_worlds,
     .doc = "the world sizes W it runs at, increasing"},
    {.path = "params",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(param_names),
     .read = read_params,
     .doc = "the names of its size parameters"},
    {.path = "sizes",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(sizes),
     .read = read_sizes,
     .doc = "named sizes, each a value of every parameter"},
    {.path = "sizes[].name",
     .type = KV_SCHEMA_STRING,
     .flags = NONEMPTY_REQ,
     S(name),
     .check = check_size_name,
     .doc = "the size's name"},
    {.path = "sizes[].validation",
     .type = KV_SCHEMA_BOOL,
     S(validation),
     .doc = "the one size never shown to mutators"},
    {.path = "inputs",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(inputs),
     .read = read_tensors,
     .doc = "the input tensors"},
    TENSOR_ROWS("inputs"),
    {.path = "inputs[].init",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     T(init),
     .read = read_init,
     .doc = "how the input is filled"},
    {.path = "inputs[].init.kind",
     .type = KV_SCHEMA_ENUM,
     .flags = REQ,
     T(init),
     .names = kv_problem_init_names,
     .what = "init kind",
     .doc = "the distribution"},
    {.path = "inputs[].same_on_all_ranks",
     .type = KV_SCHEMA_BOOL,
     T(same_on_all_ranks),
     .doc = "every rank gets the same values"},
    {.path = "outputs",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(outputs),
     .read = read_tensors,
     .doc = "the output tensors"},
    TENSOR_ROWS("outputs"),
    {.path = "outputs[].atol",
     .type = KV_SCHEMA_CUSTOM,
     T(atol),
     .read = read_tolerance,
     .doc = "absolute tolerance, or one by world; required for floating-point outputs"},
    {.path = "outputs[].rtol",
     .type = KV_SCHEMA_CUSTOM,
     T(rtol),
     .read = read_tolerance,
     .doc = "relative tolerance, or one by world; required for floating-point outputs"},
    {.path = "outputs[].valid_rows_from",
     .type = KV_SCHEMA_STRING,
     .flags = KV_SCHEMA_NONEMPTY,
     T(valid_rows_from),
     .doc = "an integer output whose sum counts the valid rows"},
    {.path = "cost", .type = KV_SCHEMA_OBJECT, .flags = REQ, .doc = "the cost model, per rank"},
    {.path = "cost.send_bytes",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(cost_send_bytes),
     .read = read_expr,
     .doc = "bytes a rank sends"},
    {.path = "cost.recv_bytes",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(cost_recv_bytes),
     .read = read_expr,
     .doc = "bytes a rank receives"},
    {.path = "cost.flops",
     .type = KV_SCHEMA_CUSTOM,
     .flags = REQ,
     P(cost_flops),
     .read = read_expr,
     .doc = "floating-point operations of a rank"},
    {.path = "cost.hbm_bytes",
     .type = KV_SCHEMA_CUSTOM,
     P(cost_hbm_bytes),
     .read = read_expr,
     .doc = "local memory traffic of a rank"},
    {.path = "tolerance_reason",
     .type = KV_SCHEMA_CUSTOM,
     P(tolerance_reason),
     .read = read_reason,
     .doc = "why an output needs a tolerance"},
    {.path = "scratch_bytes",
     .type = KV_SCHEMA_CUSTOM,
     P(scratch_bytes),
     .read = read_expr,
     .doc = "symmetric scratch per side beyond the default"},
};

static const kv_schema problem_schema = {
    .keys = rows, .n = sizeof rows / sizeof rows[0], .flags = KV_SCHEMA_TABLE_ORDER};

/* ---- the file ---------------------------------------------------------------------- */

/* text (NUL-terminated, len bytes) to p, without the files beside it. */
static int read_text(const char *text, size_t len, kv_problem *p, kv_err *err)
{
    if (strlen(text) != len)
        return kv_err_set(err, "contains a NUL byte at offset %zu; not a JSON text", strlen(text));
    const char *json = text;
    if ((unsigned char)json[0] == 0xEF && (unsigned char)json[1] == 0xBB &&
        (unsigned char)json[2] == 0xBF)
        json += 3; /* a UTF-8 byte-order mark */
    if (json[strspn(json, " \t\r\n")] == '\0')
        return kv_err_set(err, "empty file; expected a JSON object");
    char what[KV_JSON_MSG_MAX];
    cJSON *root = kv_json_parse_strict(json, what, sizeof what);
    if (!root)
        return kv_err_set(err, "%s", what);
    int rc = kv_schema_read(&problem_schema, "", root, "$", p, err);
    cJSON_Delete(root);
    return rc;
}

int kv_problem_load(const char *dir, kv_problem *p, kv_err *err)
{
    memset(p, 0, sizeof *p);
    char file[PATH_MAX];
    if (kv_path_join(file, sizeof file, dir, "problem.json", err))
        return KV_FAIL;
    if (strlen(dir) >= sizeof p->dir)
        return kv_err_set(err, "%s: path too long", dir);
    char *text = NULL;
    size_t len = 0;
    if (kv_read_file_max(file, KV_MAX_PROBLEM_BYTES, &text, &len, err))
        return KV_FAIL;
    snprintf(p->dir, sizeof p->dir, "%s", dir);
    int rc = read_text(text, len, p, err);
    free(text);
    if (rc != KV_OK)
        kv_err_prefix(err, "%s", file);
    else
        rc =
            kv_problem_validate(file, p, err) ? KV_FAIL : kv_problem_check_files(file, dir, p, err);
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
