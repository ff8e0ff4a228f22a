/* config.c — the run configuration: JSON text to one validated kv_config,
 * and back to canonical JSON.
 *
 * Everything key-specific lives in the schema table (config_schema.c), which
 * the schema engine (common/schema.h) walks. Parsing starts from the defaults,
 * reads every member of every object against the rows below it, and then
 * checks the rules that span keys; the caller's struct is written only on
 * success. This file adds the text around it: the canonical printer and the
 * file.
 *
 * Messages are "<origin>: <JSON path>: <what is wrong>", e.g.
 *   quick.json: $.evaluation.screen_iter: unknown key; did you mean "screen_iters"?
 *   quick.json: $.world: 17 is out of range (2..16)
 *   quick.json: invalid JSON at line 4, column 1 near "}"
 * The JSON parser is cJSON, through kv_json_parse_strict (common/json.h): the
 * position of a syntax error is the one cJSON reports through the parse-end
 * pointer of cJSON_ParseWithOpts; nesting deeper than KV_JSON_DEPTH_MAX and
 * a NUL in any string (\u0000) are refused, the latter with its path. */
#include "search/config.h"
#include "common/strbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_schema.h"
#include "common/fsutil.h"
#include "common/json.h"
#include "common/schema.h"

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
        kv_json_fmt_number(v->valuedouble, num);
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
    kv_schema_defaults(&kv_cfg_table, "", cfg);
}

char *kv_config_to_json(const kv_config *cfg)
{
    cJSON *root = kv_schema_emit(&kv_cfg_table, "", cfg);
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
        rc = kv_schema_fail(err, "$", "expected an object, got %s", kv_json_type(root));
    else
        rc = kv_schema_read(&kv_cfg_table, "", root, "$", cfg, err);
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
