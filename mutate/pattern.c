/* pattern.c — parsing a seed kernel's annotations (mutate/pattern.h). */
#include "mutate/pattern.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line of the source: [s, s + n), 1-based number. */
typedef struct {
    const char *s;
    size_t n, off;
    int number;
} line_t;

static const char *skip_space(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* The next whitespace-separated word of [*p, end) into out. */
static int next_word(const char **p, const char *end, char *out, size_t cap)
{
    const char *s = skip_space(*p, end);
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t' && *e != '\r')
        e++;
    if (e == s || (size_t)(e - s) >= cap)
        return -1;
    memcpy(out, s, (size_t)(e - s));
    out[e - s] = 0;
    *p = e;
    return 0;
}

static int parse_int(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return -1;
    *out = v;
    return 0;
}

static int is_param_name(const char *s)
{
    if (!(*s >= 'A' && *s <= 'Z') && *s != '_')
        return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

static int fail(kv_err *err, const char *path, int line, const char *fmt, ...) KV_PRINTF(4, 5);
static int fail(kv_err *err, const char *path, int line, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return kv_err_set(err, "%s:%d: %s", path, line, what);
}

static int parse_pattern_line(const line_t *l, const char *p, const char *path, kv_pattern_meta *m,
                              kv_err *err)
{
    const char *end = l->s + l->n;
    int have_t = 0, have_f = 0;
    char word[128];
    while (next_word(&p, end, word, sizeof word) == 0) {
        char *eq = strchr(word, '=');
        if (!eq)
            return fail(err, path, l->number, "expected key=value, got \"%s\"", word);
        *eq = 0;
        const char *v = eq + 1;
        if (strcmp(word, "problem") == 0) {
            if (!*v || strlen(v) >= sizeof m->problem)
                return fail(err, path, l->number, "bad problem \"%s\"", v);
            snprintf(m->problem, sizeof m->problem, "%s", v);
        } else if (strcmp(word, "transport") == 0) {
            int t = -1;
            for (int i = 0; i < KV_TRANSPORT_COUNT; i++)
                if (strcmp(v, kv_transport_name((kv_transport)i)) == 0)
                    t = i;
            if (t < 0)
                return fail(err, path, l->number, "unknown transport \"%s\" (ce, sm, tma or nvls)",
                            v);
            m->transport = (kv_transport)t;
            have_t = 1;
        } else if (strcmp(word, "fusion") == 0) {
            if (strcmp(v, "fused") == 0)
                m->fusion = KV_FUSION_FUSED;
            else if (strcmp(v, "unfused") == 0)
                m->fusion = KV_FUSION_UNFUSED;
            else
                return fail(err, path, l->number, "unknown fusion \"%s\" (fused or unfused)", v);
            have_f = 1;
        } else {
            return fail(err, path, l->number,
                        "unknown key \"%s\" in kevo:pattern (problem, transport, fusion)", word);
        }
    }
    if (!m->problem[0] || !have_t || !have_f)
        return fail(err, path, l->number, "kevo:pattern needs problem=, transport= and fusion=");
    m->cell = kv_cell_index(m->transport, m->fusion);
    return 0;
}

static int parse_list(const char *v, kv_pattern_param *prm, const char *path, int line, kv_err *err)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    prm->n_values = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (prm->n_values >= KV_PATTERN_MAX_VALUES)
            return fail(err, path, line, "more than 16 values for %s", prm->name);
        int64_t x;
        if (parse_int(t, &x) != 0)
            return fail(err, path, line, "\"%s\" is not an integer (in values of %s)", t,
                        prm->name);
        for (int k = 0; k < prm->n_values; k++)
            if (prm->values[k] == x)
                return fail(err, path, line, "value %s listed twice for %s", t, prm->name);
        prm->values[prm->n_values++] = x;
    }
    if (prm->n_values == 0)
        return fail(err, path, line, "empty values list for %s", prm->name);
    return 0;
}

static int parse_param_line(const line_t *l, const char *p, const char *path, kv_pattern_meta *m,
                            kv_err *err)
{
    const char *end = l->s + l->n;
    if (m->n_params >= KV_PATTERN_MAX_PARAMS)
        return fail(err, path, l->number, "more than 16 parameters");
    kv_pattern_param *prm = &m->params[m->n_params];
    memset(prm, 0, sizeof *prm);
    prm->line = l->number;
    if (next_word(&p, end, prm->name, sizeof prm->name) != 0 || !is_param_name(prm->name))
        return fail(err, path, l->number,
                    "kevo:param needs a NAME in capitals (A-Z, 0-9, _), under 32 characters");
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, prm->name) == 0)
            return fail(err, path, l->number, "parameter %s is declared twice", prm->name);
    int have_def = 0;
    char word[256];
    while (next_word(&p, end, word, sizeof word) == 0) {
        char *eq = strchr(word, '=');
        if (!eq)
            return fail(err, path, l->number, "expected key=value, got \"%s\"", word);
        *eq = 0;
        const char *v = eq + 1;
        if (strcmp(word, "default") == 0) {
            if (parse_int(v, &prm->def) != 0)
                return fail(err, path, l->number, "default \"%s\" is not an integer", v);
            have_def = 1;
        } else if (strcmp(word, "range") == 0) {
            const char *dots = strstr(v, "..");
            char lo[64];
            if (!dots || (size_t)(dots - v) >= sizeof lo)
                return fail(err, path, l->number, "range \"%s\" is not LO..HI", v);
            memcpy(lo, v, (size_t)(dots - v));
            lo[dots - v] = 0;
            if (parse_int(lo, &prm->lo) != 0 || parse_int(dots + 2, &prm->hi) != 0 ||
                prm->hi < prm->lo)
                return fail(err, path, l->number, "range \"%s\" is not LO..HI with LO <= HI", v);
            prm->has_range = 1;
        } else if (strcmp(word, "values") == 0) {
            if (parse_list(v, prm, path, l->number, err) != 0)
                return -1;
        } else {
            return fail(err, path, l->number,
                        "unknown key \"%s\" in kevo:param (default, range, values)", word);
        }
    }
    if (!have_def)
        return fail(err, path, l->number, "parameter %s has no default=", prm->name);
    if (prm->has_range == (prm->n_values > 0))
        return fail(err, path, l->number,
                    "parameter %s needs exactly one of range= and values=", prm->name);
    if (!kv_pattern_param_allows(prm, prm->def))
        return fail(err, path, l->number, "the default of %s is not among its allowed values",
                    prm->name);
    m->n_params++;
    return 0;
}

/* "#define NAME V" (optionally followed by a // comment): binds NAME's line. */
static int match_define(const line_t *l, kv_pattern_meta *m, const char *path, kv_err *err)
{
    const char *end = l->s + l->n;
    const char *p = skip_space(l->s, end);
    if (p >= end || *p != '#')
        return 0;
    p = skip_space(p + 1, end);
    if ((size_t)(end - p) < 7 || strncmp(p, "define", 6) != 0 || (p[6] != ' ' && p[6] != '\t'))
        return 0;
    p += 6;
    char name[64], value[64];
    if (next_word(&p, end, name, sizeof name) != 0)
        return 0;
    for (int i = 0; i < m->n_params; i++) {
        kv_pattern_param *prm = &m->params[i];
        if (strcmp(prm->name, name) != 0)
            continue;
        int64_t v;
        if (next_word(&p, end, value, sizeof value) != 0 || parse_int(value, &v) != 0)
            return fail(err, path, l->number, "#define %s must be an integer literal", name);
        p = skip_space(p, end);
        if (p < end && *p != '\r' && !(end - p >= 2 && p[0] == '/' && p[1] == '/'))
            return fail(err, path, l->number, "#define %s: only a // comment may follow its value",
                        name);
        if (prm->define_len)
            return fail(err, path, l->number, "#define %s appears twice", name);
        if (!kv_pattern_param_allows(prm, v))
            return fail(err, path, l->number, "#define %s: %s is not an allowed value", name,
                        value);
        prm->value = v;
        prm->define_off = l->off;
        prm->define_len = l->n;
    }
    return 0;
}

static int each_line(const char *src, size_t len, int (*fn)(const line_t *, void *), void *arg)
{
    size_t off = 0;
    int number = 1;
    while (off < len) {
        const char *nl = memchr(src + off, '\n', len - off);
        size_t n = nl ? (size_t)(nl - (src + off)) : len - off;
        line_t l = {src + off, n, off, number++};
        if (fn(&l, arg) != 0)
            return -1;
        off += n + (nl ? 1 : 0);
    }
    return 0;
}

typedef struct {
    const char *path;
    kv_pattern_meta *m;
    kv_err *err;
    int patterns;
} parse_ctx;

static int annotation(const line_t *l, void *arg)
{
    parse_ctx *c = arg;
    const char *end = l->s + l->n;
    const char *p = skip_space(l->s, end);
    if ((size_t)(end - p) < 8 || strncmp(p, "// kevo:", 8) != 0)
        return 0;
    p += 8;
    char kind[32];
    if (next_word(&p, end, kind, sizeof kind) != 0)
        return fail(c->err, c->path, l->number, "empty kevo: annotation");
    if (strcmp(kind, "pattern") == 0) {
        if (c->patterns++)
            return fail(c->err, c->path, l->number, "a second kevo:pattern line");
        return parse_pattern_line(l, p, c->path, c->m, c->err);
    }
    if (strcmp(kind, "param") == 0)
        return parse_param_line(l, p, c->path, c->m, c->err);
    if (strcmp(kind, "schedule") == 0) /* a generated candidate's schedule (mutate/schedule.h) */
        return 0;
    return fail(c->err, c->path, l->number,
                "unknown annotation kevo:%s (pattern, param or schedule)", kind);
}

static int define_line(const line_t *l, void *arg)
{
    parse_ctx *c = arg;
    return match_define(l, c->m, c->path, c->err);
}

int kv_pattern_parse(const char *src, size_t len, const char *path, kv_pattern_meta *m, kv_err *err)
{
    memset(m, 0, sizeof *m);
    parse_ctx c = {path, m, err, 0};
    if (each_line(src, len, annotation, &c) != 0 || each_line(src, len, define_line, &c) != 0)
        return -1;
    if (!c.patterns)
        return kv_err_set(err, "%s: no kevo:pattern line (docs/patterns.md)", path);
    for (int i = 0; i < m->n_params; i++)
        if (!m->params[i].define_len)
            return fail(err, path, m->params[i].line,
                        "parameter %s has no \"#define %s <default>\" line", m->params[i].name,
                        m->params[i].name);
    return 0;
}

int kv_pattern_param_allows(const kv_pattern_param *p, int64_t v)
{
    if (p->has_range)
        return v >= p->lo && v <= p->hi;
    for (int i = 0; i < p->n_values; i++)
        if (p->values[i] == v)
            return 1;
    return 0;
}

int64_t kv_pattern_points(const kv_pattern_meta *m)
{
    int64_t n = 1;
    for (int i = 0; i < m->n_params; i++) {
        const kv_pattern_param *p = &m->params[i];
        n *= p->has_range ? p->hi - p->lo + 1 : p->n_values;
    }
    return n;
}

int kv_pattern_with_param(const char *src, size_t len, const kv_pattern_meta *m, int i, int64_t v,
                          char **out, size_t *out_len, kv_err *err)
{
    if (i < 0 || i >= m->n_params)
        return kv_err_set(err, "no parameter %d", i);
    const kv_pattern_param *p = &m->params[i];
    if (!kv_pattern_param_allows(p, v))
        return kv_err_set(err, "%lld is not an allowed value of %s", (long long)v, p->name);
    if (p->define_off + p->define_len > len)
        return kv_err_set(err, "parameter %s: the source changed since it was parsed", p->name);
    char line[128];
    int n = snprintf(line, sizeof line, "#define %s %lld", p->name, (long long)v);
    size_t total = len - p->define_len + (size_t)n;
    char *s = malloc(total + 1);
    if (!s)
        return kv_err_set(err, "out of memory");
    memcpy(s, src, p->define_off);
    memcpy(s + p->define_off, line, (size_t)n);
    memcpy(s + p->define_off + n, src + p->define_off + p->define_len,
           len - p->define_off - p->define_len);
    s[total] = 0;
    *out = s;
    *out_len = total;
    return 0;
}
