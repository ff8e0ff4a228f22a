/* schema.c — the strict-JSON schema engine (common/schema.h): reading a cJSON
 * object into a struct against a table of rows, the defaults, and writing
 * the struct back. Everything specific to one file format lives in its
 * table (search/config_schema.c, problem/load.c). */
#include "common/schema.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/suggest.h"

/* The most members one object may have in a table (a message lists them). */
#define MEMBERS_MAX 64

int(kv_schema_fail)(kv_err *err, const char *jpath, const char *fmt, ...)
{
    char what[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return kv_err_set(err, "%s: %s", jpath, what);
}

void *kv_schema_field(const kv_schema_key *key, void *base)
{
    return (char *)base + key->offset;
}

const void *kv_schema_cfield(const kv_schema_key *key, const void *base)
{
    return (const char *)base + key->offset;
}

/* ---- numbers ------------------------------------------------------------------ */

static int is_integral(double v)
{
    if (!isfinite(v))
        return 0;
    if (v >= 9223372036854775808.0 || v <= -9223372036854775808.0)
        return 1; /* every double this large is an integer */
    return (double)(long long)v == v;
}

static void range_text(double min, double max, char *out, size_t cap)
{
    char lo[32], hi[32];
    kv_json_fmt_number(min, lo);
    if (isinf(max)) {
        snprintf(out, cap, "must be >= %s", lo);
    } else if (max == KV_JSON_INT_EXACT_MAX) {
        snprintf(out, cap, "%s..2^53-1", lo);
    } else {
        kv_json_fmt_number(max, hi);
        snprintf(out, cap, "%s..%s", lo, hi);
    }
}

int kv_schema_get_number(const cJSON *item, const char *jpath, int integer, double min, double max,
                         double *out, kv_err *err)
{
    const char *what = integer ? "an integer" : "a number";
    if (!cJSON_IsNumber(item))
        return kv_schema_fail(err, jpath, "expected %s, got %s", what, kv_json_type(item));
    double v = item->valuedouble;
    char num[32], range[80];
    if (!isfinite(v))
        return kv_schema_fail(err, jpath, "number too large to represent (expected %s)", what);
    kv_json_fmt_number(v, num);
    if (integer && !is_integral(v))
        return kv_schema_fail(err, jpath, "expected an integer, got %s", num);
    if (v < min || v > max) {
        range_text(min, max, range, sizeof range);
        return kv_schema_fail(err, jpath, "%s is out of range (%s)", num, range);
    }
    *out = v == 0 ? 0.0 : v; /* no -0 */
    return KV_OK;
}

/* ---- names and enums ------------------------------------------------------------ */

int kv_schema_unknown_value(kv_err *err, const char *jpath, const char *what, const char *value,
                            const char *const *names, size_t n)
{
    char q[80], list[400];
    kv_json_quote(q, sizeof q, value);
    kv_json_join(list, sizeof list, names, n);
    const char *near = kv_suggest(value, names, n);
    if (near)
        return kv_schema_fail(err, jpath,
                              "unknown %s %s; expected one of %s (did you mean \"%s\"?)", what, q,
                              list, near);
    return kv_schema_fail(err, jpath, "unknown %s %s; expected one of %s", what, q, list);
}

/* "\"a\", \"b\" or \"c\"" */
static void one_of_text(const char *const *names, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(out + o, cap - o, "%s\"%s\"",
                         i == 0       ? ""
                         : i + 1 == n ? " or "
                                      : ", ",
                         names[i]);
        if (w < 0 || (size_t)w >= cap - o)
            break;
        o += (size_t)w;
    }
}

static int read_enum(const kv_schema_key *k, const cJSON *item, const char *jpath, int *out,
                     kv_err *err)
{
    size_t n = 0;
    while (k->names[n])
        n++;
    char one_of[200];
    one_of_text(k->names, n, one_of, sizeof one_of);
    if (!cJSON_IsString(item)) {
        if (k->what)
            return kv_schema_fail(err, jpath, "expected a string, got %s", kv_json_type(item));
        return kv_schema_fail(err, jpath, "expected %s, got %s", one_of, kv_json_type(item));
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(item->valuestring, k->names[i]) == 0) {
            *out = (int)i;
            return KV_OK;
        }
    if (k->what)
        return kv_schema_unknown_value(err, jpath, k->what, item->valuestring, k->names, n);
    char q[80];
    kv_json_quote(q, sizeof q, item->valuestring);
    const char *near = kv_suggest(item->valuestring, k->names, n);
    if (near)
        return kv_schema_fail(err, jpath, "unknown value %s; expected %s (did you mean \"%s\"?)", q,
                              one_of, near);
    return kv_schema_fail(err, jpath, "unknown value %s; expected %s", q, one_of);
}

/* ---- walking the table ------------------------------------------------------------ */

/* The part of path below prefix ("" = root), or NULL when path is not below it. */
static const char *below(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    if (n == 0)
        return path;
    if (strncmp(path, prefix, n) != 0 || path[n] != '.')
        return NULL;
    return path + n + 1;
}

/* Whether the row is a member of the object at prefix. */
static int is_child(const kv_schema_key *k, const char *prefix)
{
    const char *rest = below(k->path, prefix);
    return rest && !strchr(rest, '.');
}

const kv_schema_key *kv_schema_find(const kv_schema *s, const char *path)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i].path, path) == 0)
            return &s->keys[i];
    return NULL;
}

const char *kv_schema_key_name(const kv_schema_key *key)
{
    const char *dot = strrchr(key->path, '.');
    return dot ? dot + 1 : key->path;
}

const char *kv_schema_type_name(const kv_schema_key *key)
{
    if (key->type_doc)
        return key->type_doc;
    switch (key->type) {
    case KV_SCHEMA_OBJECT: return "object";
    case KV_SCHEMA_INT:
    case KV_SCHEMA_INT64:
    case KV_SCHEMA_UINT64: return "integer";
    case KV_SCHEMA_NUMBER: return "number";
    case KV_SCHEMA_BOOL: return "boolean";
    case KV_SCHEMA_STRING: return "string";
    case KV_SCHEMA_ENUM: return "enum";
    case KV_SCHEMA_CUSTOM: break;
    }
    return "value";
}

/* Every member of obj is one of names[0..n), once; wire: the words of
 * KV_SCHEMA_WIRE. */
static int check_keys(const cJSON *obj, const char *jpath, const char *const *names, size_t n,
                      int wire, kv_err *err)
{
    if (!cJSON_IsObject(obj))
        return kv_schema_fail(err, jpath, "expected an object, got %s", kv_json_type(obj));
    for (const cJSON *m = obj->child; m; m = m->next) {
        char mpath[KV_JSON_PATH_MAX];
        kv_json_path_key(mpath, sizeof mpath, jpath, m->string);
        /* Bounded: at most a few dozen keys are valid, and the first repeat
         * or unknown key ends the walk. */
        if (kv_json_is_duplicate(obj, m))
            return kv_schema_fail(err, mpath, wire ? "duplicate member" : "duplicate key");
        int known = 0;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(names[i], m->string) == 0;
        if (known)
            continue;
        if (wire)
            return kv_schema_fail(err, mpath, "unknown member");
        char what[KV_JSON_MSG_MAX];
        kv_json_unknown_key(what, sizeof what, m->string, names, n);
        return kv_schema_fail(err, mpath, "%s", what);
    }
    return KV_OK;
}

int kv_schema_check_keys(const cJSON *obj, const char *jpath, const char *const *names, size_t n,
                         kv_err *err)
{
    return check_keys(obj, jpath, names, n, 0, err);
}

/* An integer of a KV_SCHEMA_WIRE message: a number (at most 2^53-1 in
 * magnitude), or with KV_SCHEMA_DIGITS a decimal string; messages name a
 * string's text. INT and INT64 rows with a finite range are checked
 * against it. */
static int read_wire_integer(const kv_schema_key *k, const cJSON *item, const char *jpath,
                             void *field, kv_err *err)
{
    int is_unsigned = k->type == KV_SCHEMA_UINT64;
    const char *what = is_unsigned ? "an unsigned integer" : "an integer";
    int64_t x = 0;
    uint64_t u = 0;
    if (cJSON_IsNumber(item)) {
        double d = item->valuedouble;
        if (!isfinite(d) || d != floor(d) || fabs(d) > KV_JSON_INT_EXACT_MAX ||
            (is_unsigned && d < 0))
            return kv_schema_fail(err, jpath, "expected %s, got %.17g", what, d);
        x = (int64_t)d;
        u = (uint64_t)(is_unsigned ? d : 0);
    } else if (cJSON_IsString(item) && (k->flags & KV_SCHEMA_DIGITS)) {
        const char *s = item->valuestring;
        char *end;
        errno = 0;
        if (is_unsigned) {
            unsigned long long ull = strtoull(s, &end, 10);
            if (!(*s >= '0' && *s <= '9') || *end || errno)
                return kv_schema_fail(err, jpath, "expected %s, got the string \"%.40s\"", what, s);
            u = (uint64_t)ull;
        } else {
            long long ll = strtoll(s, &end, 10);
            if (!*s || *end || errno || !((*s >= '0' && *s <= '9') || *s == '-'))
                return kv_schema_fail(err, jpath, "expected %s, got the string \"%.40s\"", what, s);
            x = (int64_t)ll;
        }
    } else if (cJSON_IsString(item)) {
        return kv_schema_fail(err, jpath, "expected %s, got the string \"%.40s\"", what,
                              item->valuestring);
    } else {
        return kv_schema_fail(err, jpath, "expected %s, got %s", what, kv_json_type(item));
    }
    if (is_unsigned) {
        memcpy(field, &u, sizeof u);
        return KV_OK;
    }
    if (isfinite(k->min) && isfinite(k->max) && (x < (int64_t)k->min || x > (int64_t)k->max))
        return kv_schema_fail(err, jpath, "%" PRId64 " is out of range (%" PRId64 "..%" PRId64 ")",
                              x, (int64_t)k->min, (int64_t)k->max);
    if (k->type == KV_SCHEMA_INT) {
        int i = (int)x;
        memcpy(field, &i, sizeof i);
    } else {
        memcpy(field, &x, sizeof x);
    }
    return KV_OK;
}

static int read_scalar(const kv_schema *s, const kv_schema_key *k, const cJSON *item,
                       const char *jpath, void *base, kv_err *err)
{
    char *field = kv_schema_field(k, base);
    int wire = (s->flags & KV_SCHEMA_WIRE) != 0;
    double v;
    switch (k->type) {
    case KV_SCHEMA_INT:
    case KV_SCHEMA_INT64:
    case KV_SCHEMA_UINT64:
        if (wire) {
            if (read_wire_integer(k, item, jpath, field, err))
                return KV_FAIL;
            break;
        }
        if (kv_schema_get_number(item, jpath, 1, k->min, k->max, &v, err))
            return KV_FAIL;
        if (k->type == KV_SCHEMA_INT) {
            int x = (int)v;
            memcpy(field, &x, sizeof x);
        } else if (k->type == KV_SCHEMA_INT64) {
            int64_t x = (int64_t)v;
            memcpy(field, &x, sizeof x);
        } else {
            uint64_t x = (uint64_t)v;
            memcpy(field, &x, sizeof x);
        }
        break;
    case KV_SCHEMA_NUMBER:
        if ((k->flags & KV_SCHEMA_NULL_NAN) && (cJSON_IsNull(item) || cJSON_IsNumber(item))) {
            v = cJSON_IsNull(item) ? NAN : item->valuedouble;
        } else if (kv_schema_get_number(item, jpath, 0, k->min, k->max, &v, err)) {
            return KV_FAIL;
        }
        memcpy(field, &v, sizeof v);
        break;
    case KV_SCHEMA_BOOL: {
        if (!cJSON_IsBool(item))
            return kv_schema_fail(err, jpath, "expected %s, got %s",
                                  wire ? "a boolean" : "true or false", kv_json_type(item));
        int x = cJSON_IsTrue(item) ? 1 : 0;
        memcpy(field, &x, sizeof x);
        break;
    }
    case KV_SCHEMA_STRING: {
        if (!cJSON_IsString(item))
            return kv_schema_fail(err, jpath, "expected a string, got %s", kv_json_type(item));
        size_t len = strlen(item->valuestring);
        if (len == 0 && (k->flags & KV_SCHEMA_NONEMPTY))
            return kv_schema_fail(err, jpath, "must not be empty");
        if (len >= k->size && (k->flags & KV_SCHEMA_CUT))
            len = k->size - 1;
        else if (len >= k->size && wire)
            return kv_schema_fail(err, jpath, "longer than %zu bytes", k->size - 1);
        else if (len >= k->size)
            return kv_schema_fail(err, jpath, "string too long (%zu bytes, at most %zu)", len,
                                  k->size - 1);
        memset(field, 0, k->size);
        memcpy(field, item->valuestring, len);
        break;
    }
    case KV_SCHEMA_ENUM: {
        int x = 0;
        if (read_enum(k, item, jpath, &x, err))
            return KV_FAIL;
        memcpy(field, &x, sizeof x);
        break;
    }
    case KV_SCHEMA_OBJECT:
    case KV_SCHEMA_CUSTOM: return kv_schema_fail(err, jpath, "internal error: key is not a scalar");
    }
    return k->check ? k->check(k, base, jpath, err) : KV_OK;
}

int kv_schema_read_value(const kv_schema *s, const kv_schema_key *key, const cJSON *item,
                         const char *jpath, void *base, kv_err *err)
{
    if (key->type == KV_SCHEMA_OBJECT)
        return kv_schema_read(s, key->path, item, jpath, base, err);
    if (key->type == KV_SCHEMA_CUSTOM)
        return key->read(s, key, item, jpath, base, err);
    return read_scalar(s, key, item, jpath, base, err);
}

/* Every REQUIRED row below prefix is present in obj. */
static int check_required(const kv_schema *s, const char *prefix, const cJSON *obj,
                          const char *jpath, kv_err *err)
{
    for (size_t i = 0; i < s->n; i++) {
        const kv_schema_key *k = &s->keys[i];
        if ((k->flags & KV_SCHEMA_REQUIRED) && is_child(k, prefix) &&
            !cJSON_GetObjectItemCaseSensitive(obj, kv_schema_key_name(k))) {
            char mpath[KV_JSON_PATH_MAX];
            kv_json_path_key(mpath, sizeof mpath, jpath, kv_schema_key_name(k));
            return kv_schema_fail(
                err, mpath, (s->flags & KV_SCHEMA_WIRE) ? "missing" : "required key is missing");
        }
    }
    return KV_OK;
}

/* Document order: each member's key, then its value, as they come. */
static int read_in_document_order(const kv_schema *s, const char *prefix, const cJSON *obj,
                                  const char *jpath, const char *const *names, size_t n, void *base,
                                  kv_err *err)
{
    int wire = (s->flags & KV_SCHEMA_WIRE) != 0;
    for (const cJSON *m = obj->child; m; m = m->next) {
        const kv_schema_key *k = NULL;
        for (size_t i = 0; i < s->n && !k; i++)
            if (is_child(&s->keys[i], prefix) &&
                strcmp(kv_schema_key_name(&s->keys[i]), m->string) == 0)
                k = &s->keys[i];
        char mpath[KV_JSON_PATH_MAX];
        kv_json_path_key(mpath, sizeof mpath, jpath, m->string);
        /* Bounded: at most a few dozen keys are valid, and the first repeat
         * or unknown key ends the walk. */
        if (kv_json_is_duplicate(obj, m))
            return kv_schema_fail(err, mpath, wire ? "duplicate member" : "duplicate key");
        if (!k && wire)
            return kv_schema_fail(err, mpath, "unknown member");
        if (!k) {
            char what[KV_JSON_MSG_MAX];
            kv_json_unknown_key(what, sizeof what, m->string, names, n);
            return kv_schema_fail(err, mpath, "%s", what);
        }
        if (kv_schema_read_value(s, k, m, mpath, base, err))
            return KV_FAIL;
    }
    return check_required(s, prefix, obj, jpath, err);
}

/* Table order: every key first, then every required row, then the values
 * in the order of the rows. */
static int read_in_table_order(const kv_schema *s, const char *prefix, const cJSON *obj,
                               const char *jpath, const char *const *names, size_t n, void *base,
                               kv_err *err)
{
    if (check_keys(obj, jpath, names, n, (s->flags & KV_SCHEMA_WIRE) != 0, err) ||
        check_required(s, prefix, obj, jpath, err))
        return KV_FAIL;
    for (size_t i = 0; i < s->n; i++) {
        const kv_schema_key *k = &s->keys[i];
        if (!is_child(k, prefix))
            continue;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, kv_schema_key_name(k));
        if (!m)
            continue;
        char mpath[KV_JSON_PATH_MAX];
        kv_json_path_key(mpath, sizeof mpath, jpath, m->string);
        if (kv_schema_read_value(s, k, m, mpath, base, err))
            return KV_FAIL;
    }
    return KV_OK;
}

int kv_schema_read(const kv_schema *s, const char *prefix, const cJSON *obj, const char *jpath,
                   void *base, kv_err *err)
{
    if (!cJSON_IsObject(obj))
        return kv_schema_fail(err, jpath, "expected an object, got %s", kv_json_type(obj));
    const char *names[MEMBERS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!is_child(&s->keys[i], prefix))
            continue;
        if (n == MEMBERS_MAX)
            return kv_schema_fail(err, jpath, "internal error: more than %d keys in one object",
                                  MEMBERS_MAX);
        names[n++] = kv_schema_key_name(&s->keys[i]);
    }
    if (s->flags & KV_SCHEMA_TABLE_ORDER)
        return read_in_table_order(s, prefix, obj, jpath, names, n, base, err);
    return read_in_document_order(s, prefix, obj, jpath, names, n, base, err);
}

void kv_schema_defaults(const kv_schema *s, const char *prefix, void *base)
{
    for (size_t i = 0; i < s->n; i++) {
        const kv_schema_key *k = &s->keys[i];
        const char *rest = below(k->path, prefix);
        if (!rest || strstr(rest, "[]"))
            continue;
        char *field = kv_schema_field(k, base);
        switch (k->type) {
        case KV_SCHEMA_INT:
        case KV_SCHEMA_BOOL:
        case KV_SCHEMA_ENUM: {
            int x = (int)k->def;
            memcpy(field, &x, sizeof x);
            break;
        }
        case KV_SCHEMA_INT64: {
            int64_t x = (int64_t)k->def;
            memcpy(field, &x, sizeof x);
            break;
        }
        case KV_SCHEMA_UINT64: {
            uint64_t x = (uint64_t)k->def;
            memcpy(field, &x, sizeof x);
            break;
        }
        case KV_SCHEMA_NUMBER: memcpy(field, &k->def, sizeof k->def); break;
        case KV_SCHEMA_STRING: {
            memset(field, 0, k->size);
            size_t len = k->def_str ? strlen(k->def_str) : 0;
            if (len >= k->size)
                len = k->size - 1;
            if (len)
                memcpy(field, k->def_str, len);
            break;
        }
        case KV_SCHEMA_OBJECT:
        case KV_SCHEMA_CUSTOM: break; /* custom rows default to what the caller zeroed */
        }
    }
}

/* ---- writing -------------------------------------------------------------------- */

static cJSON *emit_scalar(const kv_schema_key *k, const void *base)
{
    const char *field = kv_schema_cfield(k, base);
    char num[32];
    switch (k->type) {
    case KV_SCHEMA_INT: {
        int x;
        memcpy(&x, field, sizeof x);
        snprintf(num, sizeof num, "%d", x);
        return cJSON_CreateRaw(num);
    }
    case KV_SCHEMA_INT64: {
        int64_t x;
        memcpy(&x, field, sizeof x);
        snprintf(num, sizeof num, "%" PRId64, x);
        return cJSON_CreateRaw(num);
    }
    case KV_SCHEMA_UINT64: {
        uint64_t x;
        memcpy(&x, field, sizeof x);
        snprintf(num, sizeof num, "%" PRIu64, x);
        return cJSON_CreateRaw(num);
    }
    case KV_SCHEMA_NUMBER: {
        double x;
        memcpy(&x, field, sizeof x);
        if (!isfinite(x))
            return cJSON_CreateNull(); /* not readable; reading it back says so */
        return cJSON_CreateNumber(x);
    }
    case KV_SCHEMA_BOOL: {
        int x;
        memcpy(&x, field, sizeof x);
        return cJSON_CreateBool(x != 0);
    }
    case KV_SCHEMA_STRING: return cJSON_CreateString(field); /* NUL-terminated by construction */
    case KV_SCHEMA_ENUM: {
        int x;
        memcpy(&x, field, sizeof x);
        for (int i = 0; k->names[i]; i++)
            if (i == x)
                return cJSON_CreateString(k->names[i]);
        snprintf(num, sizeof num, "%d", x); /* invalid value: written as is */
        return cJSON_CreateRaw(num);
    }
    case KV_SCHEMA_OBJECT:
    case KV_SCHEMA_CUSTOM: break;
    }
    return NULL;
}

cJSON *kv_schema_emit(const kv_schema *s, const char *prefix, const void *base)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        const kv_schema_key *k = &s->keys[i];
        if (!is_child(k, prefix))
            continue;
        cJSON *v;
        if (k->type == KV_SCHEMA_OBJECT)
            v = kv_schema_emit(s, k->path, base);
        else if (k->type == KV_SCHEMA_CUSTOM)
            v = k->emit ? k->emit(s, k, base) : NULL;
        else
            v = emit_scalar(k, base);
        if (!v || !cJSON_AddItemToObject(obj, kv_schema_key_name(k), v)) {
            cJSON_Delete(v);
            cJSON_Delete(obj);
            return NULL;
        }
    }
    return obj;
}
