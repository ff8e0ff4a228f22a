/* config.c — the run configuration: JSON text to one validated kv_config,
 * and back to canonical JSON.
 *
 * Everything key-specific lives in the schema table (config_schema.c); this
 * file is the engine that walks it. Parsing starts from the defaults, reads
 * every member of every object against the rows below it, and then checks
 * the rules that span keys; the caller's struct is written only on success.
 *
 * Messages are "<origin>: <JSON path>: <what is wrong>", e.g.
 *   quick.json: $.evaluation.screen_iter: unknown key; did you mean "screen_iters"?
 *   quick.json: $.world: 17 is out of range (2..16)
 *   quick.json: invalid JSON at line 4, column 1 near "}"
 * The JSON parser is cJSON, through kv_json_parse_strict (kevo/json.h): the
 * position of a syntax error is the one cJSON reports through the parse-end
 * pointer of cJSON_ParseWithOpts; nesting deeper than KV_JSON_DEPTH_MAX and
 * a NUL in any string (\u0000) are refused, the latter with its path. */
#include "kevo/config.h"
#include "kevo/strbuf.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_schema.h"
#include "kevo/fsutil.h"
#include "kevo/json.h"
#include "kevo/suggest.h"

/* ---- small helpers shared with the handlers ---------------------------- */

int kv_cfg_fail(kv_err *err, const char *jpath, const char *fmt, ...)
{
    char what[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return kv_err_set(err, "%s: %s", jpath, what);
}

/* The kv_cfg_ names config_schema.c uses, kept for it (kevo/json.h). */

const char *kv_cfg_json_type(const cJSON *item)
{
    return kv_json_type(item);
}

void kv_cfg_path_index(char *out, size_t cap, const char *jpath, int i)
{
    kv_json_path_index(out, cap, jpath, i);
}

void kv_cfg_quote(char *out, size_t cap, const char *s)
{
    kv_json_quote(out, cap, s);
}

void kv_cfg_path_key(char *out, size_t cap, const char *jpath, const char *key)
{
    kv_json_path_key(out, cap, jpath, key);
}

static int is_integral(double v)
{
    if (!isfinite(v))
        return 0;
    if (v >= 9223372036854775808.0 || v <= -9223372036854775808.0)
        return 1; /* every double this large is an integer */
    return (double)(long long)v == v;
}

void kv_cfg_fmt_num(double v, char out[32])
{
    kv_json_fmt_number(v, out);
}

static void range_text(double min, double max, char *out, size_t cap)
{
    char lo[32], hi[32];
    kv_cfg_fmt_num(min, lo);
    if (isinf(max)) {
        snprintf(out, cap, "must be >= %s", lo);
    } else if (max == KV_CFG_INT_EXACT_MAX) {
        snprintf(out, cap, "%s..2^53-1", lo);
    } else {
        kv_cfg_fmt_num(max, hi);
        snprintf(out, cap, "%s..%s", lo, hi);
    }
}

static int get_number(const cJSON *item, const char *jpath, int integer, double min, double max,
                      double *out, kv_err *err)
{
    const char *what = integer ? "an integer" : "a number";
    if (!cJSON_IsNumber(item))
        return kv_cfg_fail(err, jpath, "expected %s, got %s", what, kv_json_type(item));
    double v = item->valuedouble;
    char num[32], range[80];
    if (!isfinite(v))
        return kv_cfg_fail(err, jpath, "number too large to represent (expected %s)", what);
    kv_cfg_fmt_num(v, num);
    if (integer && !is_integral(v))
        return kv_cfg_fail(err, jpath, "expected an integer, got %s", num);
    if (v < min || v > max) {
        range_text(min, max, range, sizeof range);
        return kv_cfg_fail(err, jpath, "%s is out of range (%s)", num, range);
    }
    *out = v == 0 ? 0.0 : v; /* no -0 */
    return KV_OK;
}

int kv_cfg_get_integer(const cJSON *item, const char *jpath, double min, double max,
                       double *out, kv_err *err)
{
    return get_number(item, jpath, 1, min, max, out, err);
}

/* ---- walking the table ------------------------------------------------- */

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
static int is_child(const kv_cfg_key *k, const char *prefix)
{
    const char *rest = below(k->path, prefix);
    return rest && !strchr(rest, '.');
}

static const kv_cfg_key *find_child(const char *prefix, const char *name)
{
    for (size_t i = 0; i < kv_cfg_schema_len; i++) {
        const kv_cfg_key *k = &kv_cfg_schema[i];
        if (is_child(k, prefix) && strcmp(kv_cfg_key_name(k), name) == 0)
            return k;
    }
    return NULL;
}

static int unknown_key(const char *prefix, const char *name, const char *mpath, kv_err *err)
{
    const char *cand[64];
    size_t n = 0;
    for (size_t i = 0; i < kv_cfg_schema_len && n < 64; i++)
        if (is_child(&kv_cfg_schema[i], prefix))
            cand[n++] = kv_cfg_key_name(&kv_cfg_schema[i]);
    char what[KV_JSON_MSG_MAX];
    kv_json_unknown_key(what, sizeof what, name, cand, n);
    return kv_cfg_fail(err, mpath, "%s", what);
}

static int parse_scalar(const kv_cfg_key *k, const cJSON *item, const char *jpath,
                        void *base, kv_err *err)
{
    char *field = (char *)base + k->offset;
    double v;
    switch (k->type) {
    case KV_CFG_INT:
    case KV_CFG_INT64:
    case KV_CFG_UINT64:
        if (get_number(item, jpath, 1, k->min, k->max, &v, err))
            return KV_FAIL;
        if (k->type == KV_CFG_INT) {
            int x = (int)v;
            memcpy(field, &x, sizeof x);
        } else if (k->type == KV_CFG_INT64) {
            int64_t x = (int64_t)v;
            memcpy(field, &x, sizeof x);
        } else {
            uint64_t x = (uint64_t)v;
            memcpy(field, &x, sizeof x);
        }
        break;
    case KV_CFG_NUMBER:
        if (get_number(item, jpath, 0, k->min, k->max, &v, err))
            return KV_FAIL;
        memcpy(field, &v, sizeof v);
        break;
    case KV_CFG_BOOL: {
        if (!cJSON_IsBool(item))
            return kv_cfg_fail(err, jpath, "expected true or false, got %s", kv_json_type(item));
        int x = cJSON_IsTrue(item) ? 1 : 0;
        memcpy(field, &x, sizeof x);
        break;
    }
    case KV_CFG_STRING: {
        if (!cJSON_IsString(item))
            return kv_cfg_fail(err, jpath, "expected a string, got %s", kv_json_type(item));
        size_t len = strlen(item->valuestring);
        if (len >= k->size)
            return kv_cfg_fail(err, jpath, "string too long (%zu bytes, at most %zu)", len,
                               k->size - 1);
        memset(field, 0, k->size);
        memcpy(field, item->valuestring, len);
        break;
    }
    case KV_CFG_ENUM: {
        char one_of[200];
        size_t o = 0;
        one_of[0] = '\0';
        size_t n = 0;
        while (k->names[n])
            n++;
        for (size_t i = 0; i < n; i++) {
            int w = snprintf(one_of + o, sizeof one_of - o, "%s\"%s\"",
                             i == 0 ? "" : i + 1 == n ? " or " : ", ", k->names[i]);
            if (w < 0 || (size_t)w >= sizeof one_of - o)
                break;
            o += (size_t)w;
        }
        if (!cJSON_IsString(item))
            return kv_cfg_fail(err, jpath, "expected %s, got %s", one_of, kv_json_type(item));
        for (size_t i = 0; i < n; i++)
            if (strcmp(item->valuestring, k->names[i]) == 0) {
                int x = (int)i;
                memcpy(field, &x, sizeof x);
                return k->check ? k->check(k, field, jpath, err) : KV_OK;
            }
        char q[80];
        kv_json_quote(q, sizeof q, item->valuestring);
        const char *near = kv_suggest(item->valuestring, (const char *const *)k->names, n);
        if (near)
            return kv_cfg_fail(err, jpath, "unknown value %s; expected %s (did you mean \"%s\"?)",
                               q, one_of, near);
        return kv_cfg_fail(err, jpath, "unknown value %s; expected %s", q, one_of);
    }
    case KV_CFG_OBJECT:
    case KV_CFG_CUSTOM:
        return kv_cfg_fail(err, jpath, "internal error: key is not a scalar");
    }
    return k->check ? k->check(k, field, jpath, err) : KV_OK;
}

int kv_cfg_parse_row(const kv_cfg_key *k, const cJSON *item, const char *jpath,
                     void *base, kv_err *err)
{
    if (k->type == KV_CFG_OBJECT)
        return kv_cfg_parse_members(k->path, item, jpath, base, err);
    if (k->type == KV_CFG_CUSTOM)
        return k->parse(k, item, jpath, base, err);
    return parse_scalar(k, item, jpath, base, err);
}

int kv_cfg_parse_members(const char *prefix, const cJSON *obj, const char *jpath,
                         void *base, kv_err *err)
{
    if (!cJSON_IsObject(obj))
        return kv_cfg_fail(err, jpath, "expected an object, got %s", kv_json_type(obj));
    for (const cJSON *m = obj->child; m; m = m->next) {
        char mpath[KV_CFG_PATH_MAX];
        kv_json_path_key(mpath, sizeof mpath, jpath, m->string);
        /* Bounded: at most a few dozen keys are valid, and the first repeat
         * or unknown key ends the walk. */
        if (kv_json_is_duplicate(obj, m))
            return kv_cfg_fail(err, mpath, "duplicate key");
        const kv_cfg_key *k = find_child(prefix, m->string);
        if (!k)
            return unknown_key(prefix, m->string, mpath, err);
        if (kv_cfg_parse_row(k, m, mpath, base, err))
            return KV_FAIL;
    }
    for (size_t i = 0; i < kv_cfg_schema_len; i++) {
        const kv_cfg_key *k = &kv_cfg_schema[i];
        if ((k->flags & KV_CFG_REQUIRED) && is_child(k, prefix) &&
            !cJSON_GetObjectItemCaseSensitive(obj, kv_cfg_key_name(k))) {
            char mpath[KV_CFG_PATH_MAX];
            kv_json_path_key(mpath, sizeof mpath, jpath, kv_cfg_key_name(k));
            return kv_cfg_fail(err, mpath, "required key is missing");
        }
    }
    return KV_OK;
}

void kv_cfg_apply_defaults(const char *prefix, void *base)
{
    for (size_t i = 0; i < kv_cfg_schema_len; i++) {
        const kv_cfg_key *k = &kv_cfg_schema[i];
        const char *rest = below(k->path, prefix);
        if (!rest || strstr(rest, "[]"))
            continue;
        char *field = (char *)base + k->offset;
        switch (k->type) {
        case KV_CFG_INT:
        case KV_CFG_BOOL:
        case KV_CFG_ENUM: {
            int x = (int)k->def;
            memcpy(field, &x, sizeof x);
            break;
        }
        case KV_CFG_INT64: {
            int64_t x = (int64_t)k->def;
            memcpy(field, &x, sizeof x);
            break;
        }
        case KV_CFG_UINT64: {
            uint64_t x = (uint64_t)k->def;
            memcpy(field, &x, sizeof x);
            break;
        }
        case KV_CFG_NUMBER:
            memcpy(field, &k->def, sizeof k->def);
            break;
        case KV_CFG_STRING: {
            memset(field, 0, k->size);
            size_t len = k->def_str ? strlen(k->def_str) : 0;
            if (len >= k->size)
                len = k->size - 1;
            if (len)
                memcpy(field, k->def_str, len);
            break;
        }
        case KV_CFG_OBJECT:
        case KV_CFG_CUSTOM:
            break; /* custom keys default to zero: no problems, auto groups, no models */
        }
    }
}

static cJSON *raw_number(const char *text)
{
    return cJSON_CreateRaw(text);
}

static cJSON *emit_scalar(const kv_cfg_key *k, const void *base)
{
    const char *field = (const char *)base + k->offset;
    char num[32];
    switch (k->type) {
    case KV_CFG_INT: {
        int x;
        memcpy(&x, field, sizeof x);
        snprintf(num, sizeof num, "%d", x);
        return raw_number(num);
    }
    case KV_CFG_INT64: {
        int64_t x;
        memcpy(&x, field, sizeof x);
        snprintf(num, sizeof num, "%" PRId64, x);
        return raw_number(num);
    }
    case KV_CFG_UINT64: {
        uint64_t x;
        memcpy(&x, field, sizeof x);
        snprintf(num, sizeof num, "%" PRIu64, x);
        return raw_number(num);
    }
    case KV_CFG_NUMBER: {
        double x;
        memcpy(&x, field, sizeof x);
        if (!isfinite(x))
            return cJSON_CreateNull(); /* not a valid config; parse will say so */
        return cJSON_CreateNumber(x);
    }
    case KV_CFG_BOOL: {
        int x;
        memcpy(&x, field, sizeof x);
        return cJSON_CreateBool(x != 0);
    }
    case KV_CFG_STRING:
        return cJSON_CreateString(field); /* NUL-terminated by construction */
    case KV_CFG_ENUM: {
        int x;
        memcpy(&x, field, sizeof x);
        for (int i = 0; k->names[i]; i++)
            if (i == x)
                return cJSON_CreateString(k->names[i]);
        snprintf(num, sizeof num, "%d", x); /* invalid value: written as is */
        return raw_number(num);
    }
    case KV_CFG_OBJECT:
    case KV_CFG_CUSTOM:
        break;
    }
    return NULL;
}

cJSON *kv_cfg_emit_members(const char *prefix, const void *base)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return NULL;
    for (size_t i = 0; i < kv_cfg_schema_len; i++) {
        const kv_cfg_key *k = &kv_cfg_schema[i];
        if (!is_child(k, prefix))
            continue;
        cJSON *v;
        if (k->type == KV_CFG_OBJECT)
            v = kv_cfg_emit_members(k->path, base);
        else if (k->type == KV_CFG_CUSTOM)
            v = k->emit(k, base);
        else
            v = emit_scalar(k, base);
        if (!v || !cJSON_AddItemToObject(obj, kv_cfg_key_name(k), v)) {
            cJSON_Delete(v);
            cJSON_Delete(obj);
            return NULL;
        }
    }
    return obj;
}

/* ---- the canonical printer -----------------------------------------------
 * Two-space indentation, keys in table order, arrays without objects on one
 * line, numbers in their shortest exact form. */

static void put_indent(kv_strbuf *b, int depth)
{
    for (int i = 0; i < depth; i++)
        kv_sb_put(b, "  ", 2);
}

static void put_string(kv_strbuf *b, const char *s)
{
    kv_sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        switch (c) {
        case '"': kv_sb_put(b, "\\\"", 2); break;
        case '\\': kv_sb_put(b, "\\\\", 2); break;
        case '\b': kv_sb_put(b, "\\b", 2); break;
        case '\f': kv_sb_put(b, "\\f", 2); break;
        case '\n': kv_sb_put(b, "\\n", 2); break;
        case '\r': kv_sb_put(b, "\\r", 2); break;
        case '\t': kv_sb_put(b, "\\t", 2); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                kv_sb_puts(b, esc);
            } else {
                kv_sb_put(b, s, 1);
            }
        }
    }
    kv_sb_put(b, "\"", 1);
}

static int has_object(const cJSON *v)
{
    if (cJSON_IsObject(v))
        return 1;
    for (const cJSON *c = cJSON_IsArray(v) ? v->child : NULL; c; c = c->next)
        if (has_object(c))
            return 1;
    return 0;
}

static void put_value(kv_strbuf *b, const cJSON *v, int depth)
{
    char num[32];
    if (cJSON_IsNull(v)) {
        kv_sb_puts(b, "null");
    } else if (cJSON_IsBool(v)) {
        kv_sb_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNumber(v)) {
        kv_cfg_fmt_num(v->valuedouble, num);
        kv_sb_puts(b, num);
    } else if (cJSON_IsRaw(v)) {
        kv_sb_puts(b, v->valuestring);
    } else if (cJSON_IsString(v)) {
        put_string(b, v->valuestring);
    } else if (cJSON_IsArray(v)) {
        if (!v->child) {
            kv_sb_puts(b, "[]");
        } else if (!has_object(v)) {
            kv_sb_puts(b, "[");
            for (const cJSON *c = v->child; c; c = c->next) {
                put_value(b, c, depth);
                if (c->next)
                    kv_sb_puts(b, ", ");
            }
            kv_sb_puts(b, "]");
        } else {
            kv_sb_puts(b, "[\n");
            for (const cJSON *c = v->child; c; c = c->next) {
                put_indent(b, depth + 1);
                put_value(b, c, depth + 1);
                kv_sb_puts(b, c->next ? ",\n" : "\n");
            }
            put_indent(b, depth);
            kv_sb_puts(b, "]");
        }
    } else if (cJSON_IsObject(v)) {
        if (!v->child) {
            kv_sb_puts(b, "{}");
            return;
        }
        kv_sb_puts(b, "{\n");
        for (const cJSON *c = v->child; c; c = c->next) {
            put_indent(b, depth + 1);
            put_string(b, c->string);
            kv_sb_puts(b, ": ");
            put_value(b, c, depth + 1);
            kv_sb_puts(b, c->next ? ",\n" : "\n");
        }
        put_indent(b, depth);
        kv_sb_puts(b, "}");
    }
}

/* ---- the public functions ------------------------------------------------ */

void kv_config_defaults(kv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    kv_cfg_apply_defaults("", cfg);
}

char *kv_config_to_json(const kv_config *cfg)
{
    cJSON *root = kv_cfg_emit_members("", cfg);
    if (!root)
        return NULL;
    kv_strbuf b = {0};
    put_value(&b, root, 0);
    kv_sb_puts(&b, "\n");
    cJSON_Delete(root);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static int parse_text(const char *json, kv_config *cfg, kv_err *err)
{
    if (!json)
        return kv_err_set(err, "no configuration text");
    if ((unsigned char)json[0] == 0xEF && (unsigned char)json[1] == 0xBB &&
        (unsigned char)json[2] == 0xBF)
        json += 3; /* a UTF-8 byte-order mark, as some editors write */
    if (json[strspn(json, " \t\r\n")] == '\0')
        return kv_err_set(err, "empty document; expected a JSON object");

    char what[KV_JSON_MSG_MAX];
    cJSON *root = kv_json_parse_strict(json, what, sizeof what);
    if (!root)
        return kv_err_set(err, "%s", what);
    int rc = KV_OK;
    if (!cJSON_IsObject(root))
        rc = kv_cfg_fail(err, "$", "expected an object, got %s", kv_json_type(root));
    else
        rc = kv_cfg_parse_members("", root, "$", cfg, err);
    cJSON_Delete(root);
    if (rc == KV_OK)
        rc = kv_cfg_check_rules(cfg, err);
    return rc;
}

int kv_config_parse(const char *json, const char *origin, kv_config *cfg, kv_err *err)
{
    kv_config *tmp = malloc(sizeof *tmp);
    if (!tmp) {
        kv_err_set(err, "out of memory");
        goto fail;
    }
    kv_config_defaults(tmp);
    if (parse_text(json, tmp, err) != KV_OK)
        goto fail;
    memcpy(cfg, tmp, sizeof *cfg); /* padding too: equal configs compare equal */
    free(tmp);
    return KV_OK;

fail:
    free(tmp);
    if (origin)
        kv_err_prefix(err, "%s", origin);
    return KV_FAIL;
}

int kv_config_load(const char *path, kv_config *cfg, kv_err *err)
{
    char *text = NULL;
    size_t len = 0;
    if (kv_read_file_max(path, KV_MAX_CONFIG_BYTES, &text, &len, err) != KV_OK)
        return KV_FAIL;
    size_t nul = strlen(text);
    if (nul != len) {
        free(text);
        return kv_err_set(err, "%s: contains a NUL byte at offset %zu; not a JSON text", path, nul);
    }
    int rc = kv_config_parse(text, path, cfg, err);
    free(text);
    return rc;
}
