/* json.c — the message helpers of kevo's strict JSON readers (common/json.h). */
#include "common/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/suggest.h"

const char *kv_json_type(const cJSON *v)
{
    if (!v || cJSON_IsNull(v))
        return "null";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "an unknown value";
}

void kv_json_quote(char *out, size_t cap, const char *s)
{
    size_t o = 0, limit = 48;
    if (cap < 8) {
        if (cap)
            out[0] = '\0';
        return;
    }
    out[o++] = '"';
    for (size_t n = 0; *s; s++, n++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            snprintf(esc, sizeof esc, "%c", c);
        size_t el = strlen(esc);
        if (n >= limit || o + el + 5 > cap) { /* room for ...", NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, esc, el);
        o += el;
    }
    out[o++] = '"';
    out[o] = '\0';
}

int kv_json_is_identifier(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* Marks a path snprintf could not fit (n is its return value). */
static void path_fit(char *out, size_t cap, int n)
{
    if ((n < 0 || (size_t)n >= cap) && cap >= 4)
        memcpy(out + cap - 4, "...", 4);
}

void kv_json_path_key(char *out, size_t cap, const char *jpath, const char *key)
{
    if (kv_json_is_identifier(key) && strlen(key) <= 64) {
        path_fit(out, cap, snprintf(out, cap, "%s.%s", jpath, key));
    } else {
        char q[80];
        kv_json_quote(q, sizeof q, key);
        path_fit(out, cap, snprintf(out, cap, "%s[%s]", jpath, q));
    }
}

void kv_json_path_index(char *out, size_t cap, const char *jpath, int i)
{
    path_fit(out, cap, snprintf(out, cap, "%s[%d]", jpath, i));
}

void kv_json_line_col(const char *text, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)*p & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

void kv_json_error_at(char *out, size_t cap, const char *text, const char *at)
{
    if (!at || at < text) {
        snprintf(out, cap, "invalid JSON (or out of memory while parsing)");
        return;
    }
    /* cJSON reports some errors one token late, after the whitespace that
     * follows the token it gave up on (e.g. the '}' after a trailing comma):
     * point at that token instead. */
    while (at > text && (*at == ' ' || *at == '\t' || *at == '\r' || *at == '\n'))
        at--;
    int line, col;
    kv_json_line_col(text, at, &line, &col);
    if (*at == '\0') {
        snprintf(out, cap, "invalid JSON at line %d, column %d: unexpected end of input", line,
                 col);
        return;
    }
    char near[24], q[80];
    size_t n = 0;
    while (at[n] && at[n] != '\n' && at[n] != '\r' && n < 16)
        n++;
    memcpy(near, at, n);
    near[n] = '\0';
    kv_json_quote(q, sizeof q, near);
    snprintf(out, cap, "invalid JSON at line %d, column %d near %s", line, col, q);
}

int kv_json_is_duplicate(const cJSON *obj, const cJSON *m)
{
    for (const cJSON *p = obj->child; p && p != m; p = p->next)
        if (strcmp(p->string, m->string) == 0)
            return 1;
    return 0;
}

void kv_json_join(char *out, size_t cap, const char *const *names, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && o < cap; i++) {
        int w = snprintf(out + o, cap - o, "%s%s", i ? ", " : "", names[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

void kv_json_unknown_key(char *out, size_t cap, const char *key, const char *const *valid, size_t n)
{
    const char *near = kv_suggest(key, valid, n);
    if (near) {
        snprintf(out, cap, "unknown key; did you mean \"%s\"?", near);
        return;
    }
    char list[600];
    kv_json_join(list, sizeof list, valid, n);
    snprintf(out, cap, "unknown key (valid keys here: %s)", list);
}

/* ---- the strict parse: depth and NUL checks --------------------------------
 * cJSON neither says why it gave up on deep nesting (it stops at its own
 * limit, 1000, with a plain syntax error) nor keeps the length of a string:
 * it decodes \u0000 into a NUL byte and the string silently ends there
 * ("allreduce\u0000x" reads as "allreduce"). No raw NUL byte reaches the
 * parser (the readers refuse them, and cJSON stops at the first), so a NUL
 * inside a string can only come from a \u0000 escape. Scanning the raw text
 * for that escape finds it but not where it is in the document; the tree
 * knows where but not that it was there. kv_json_find_nul therefore walks
 * the text and cJSON's tree together: the text was just accepted by cJSON,
 * so its tokens and the tree's nodes come in the same order, and the node
 * at hand names the JSON path of the token at hand. */

/* *p past JSON whitespace. */
static void skip_space(const char **p)
{
    while (**p == ' ' || **p == '\t' || **p == '\r' || **p == '\n')
        (*p)++;
}

/* *p at the opening quote of a string token: moves it past the closing
 * quote (or to the end of an unterminated string); whether the string held
 * a \u0000 escape. */
static int skip_string(const char **p)
{
    const char *s = *p + 1;
    int nul = 0;
    while (*s && *s != '"') {
        if (*s == '\\' && s[1]) {
            if (s[1] == 'u' && strncmp(s + 2, "0000", 4) == 0)
                nul = 1;
            s += 2; /* the escaped character; \uXXXX's digits follow as plain text */
        } else {
            s++;
        }
    }
    *p = *s ? s + 1 : s;
    return nul;
}

int kv_json_too_deep(const char *text, char *msg, size_t cap)
{
    int depth = 0;
    for (const char *p = text; *p;) {
        if (*p == '"') {
            skip_string(&p);
            continue;
        }
        if (*p == '[' || *p == '{') {
            if (++depth > KV_JSON_DEPTH_MAX) {
                int line, col;
                kv_json_line_col(text, p, &line, &col);
                snprintf(msg, cap, "nested too deep (more than %d levels) at line %d, column %d",
                         KV_JSON_DEPTH_MAX, line, col);
                return 1;
            }
        } else if (*p == ']' || *p == '}') {
            if (--depth < 0)
                return 0; /* unbalanced: cJSON reports the syntax error here */
        }
        p++;
    }
    return 0;
}

static int find_nul_in(const char **p, const cJSON *v, const char *jpath, char *msg, size_t cap);

/* *p just past '{' (or '['): the members (or elements) of v, in order. */
static int find_nul_in_children(const char **p, const cJSON *v, const char *jpath, char *msg,
                                size_t cap)
{
    int object = cJSON_IsObject(v), i = 0;
    char close = object ? '}' : ']';
    skip_space(p);
    if (**p == close) {
        (*p)++;
        return 0;
    }
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char cpath[KV_JSON_PATH_MAX];
        skip_space(p);
        if (object) {
            if (skip_string(p)) {
                snprintf(msg, cap, "%s: a key contains a NUL character (\\u0000)", jpath);
                return 1;
            }
            skip_space(p);
            (*p)++; /* ':' */
            kv_json_path_key(cpath, sizeof cpath, jpath, c->string);
        } else {
            kv_json_path_index(cpath, sizeof cpath, jpath, i);
        }
        if (find_nul_in(p, c, cpath, msg, cap))
            return 1;
        skip_space(p);
        if (**p)
            (*p)++; /* ',' or the closing bracket */
    }
    return 0;
}

/* *p at (or before whitespace before) the token of v: moves past it. */
static int find_nul_in(const char **p, const cJSON *v, const char *jpath, char *msg, size_t cap)
{
    skip_space(p);
    if (**p == '"') {
        if (skip_string(p)) {
            snprintf(msg, cap, "%s: contains a NUL character (\\u0000)", jpath);
            return 1;
        }
        return 0;
    }
    if (**p == '{' || **p == '[') {
        (*p)++;
        return find_nul_in_children(p, v, jpath, msg, cap);
    }
    while (**p && !strchr(",]} \t\r\n", **p)) /* a number or a literal */
        (*p)++;
    return 0;
}

int kv_json_find_nul(const char *text, const cJSON *root, char *msg, size_t cap)
{
    if (!strstr(text, "\\u0000"))
        return 0; /* the common case, without the walk */
    const char *p = text;
    if (strncmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3; /* a UTF-8 byte-order mark, which cJSON skips too */
    return find_nul_in(&p, root, "$", msg, cap);
}

cJSON *kv_json_parse_strict(const char *text, char *msg, size_t cap)
{
    if (kv_json_too_deep(text, msg, cap))
        return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        kv_json_error_at(msg, cap, text, end);
        return NULL;
    }
    if (kv_json_find_nul(text, root, msg, cap)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ---- exact numbers ----------------------------------------------------------- */

void kv_json_fmt_number(double v, char out[32])
{
    if (v == 0) {
        memcpy(out, "0", 2);
        return;
    }
    if (!isfinite(v)) {
        snprintf(out, 32, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    if (v == floor(v) && fabs(v) <= KV_JSON_INT_EXACT_MAX) {
        snprintf(out, 32, "%.0f", v);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

int kv_json_exact_numbers(cJSON *root)
{
    for (cJSON *c = root ? root->child : NULL; c; c = c->next) {
        if (cJSON_IsNumber(c) && isfinite(c->valuedouble)) {
            char num[32];
            kv_json_fmt_number(c->valuedouble, num);
            cJSON *raw = cJSON_CreateRaw(num);
            /* the member's key moves with it (kevo installs no cJSON hooks:
             * cJSON frees keys with free) */
            if (raw && c->string && !(raw->string = strdup(c->string))) {
                cJSON_Delete(raw);
                return -1;
            }
            if (!raw || !cJSON_ReplaceItemViaPointer(root, c, raw)) {
                cJSON_Delete(raw);
                return -1;
            }
            c = raw;
        } else if (kv_json_exact_numbers(c) != 0) {
            return -1;
        }
    }
    return 0;
}
