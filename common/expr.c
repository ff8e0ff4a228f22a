/* expr.c — integer expressions over named parameters (common/expr.h).
 *
 * A recursive-descent parser that evaluates as it parses:
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/' | '%') unary)*
 *   unary   := '-' unary | primary
 *   primary := NUMBER | NAME | FUNC '(' expr ',' expr ')' | '(' expr ')'
 *
 * FUNC is min, max or ceil_div. Every operation is checked (the
 * __builtin_*_overflow family, division by zero, INT64_MIN / -1); the first
 * error ends the parse. Messages name the problem, quote the expression and
 * give the 1-based column, e.g.
 *   unknown name "M" in "M/W" (column 1); did you mean "N"?
 *   division by zero in "N/(W-2)" (column 2)
 * Three modes share the parser: check (syntax and names only; no
 * arithmetic, so no value-dependent errors), eval, and exact (eval where '/'
 * must leave no remainder). Nesting is bounded so that a hostile expression
 * cannot exhaust the stack. */
#include "common/expr.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/suggest.h"

#define MAX_DEPTH 64
#define MAX_NAME 64

enum { MODE_CHECK, MODE_EVAL, MODE_EXACT };

typedef struct {
    const char *src;
    const char *p;
    const kv_expr_env *env;
    int mode;
    int depth;
    kv_err *err;
} parser;

static const char *const funcs[] = {"min", "max", "ceil_div"};
#define N_FUNCS (sizeof funcs / sizeof funcs[0])

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_name_char(char c)
{
    return is_name_start(c) || is_digit(c);
}

static void skip_space(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

/* The expression as it appears in messages: quoted, escaped, at most 120
 * characters. */
static void quote(char *out, size_t cap, const char *s)
{
    size_t o = 0, n = 0;
    out[o++] = '"';
    for (; *s && o + 8 < cap; s++, n++) {
        unsigned char c = (unsigned char)*s;
        if (n == 120) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* Sets "<what> in "<expr>" (column N)<tail>"; returns KV_FAIL. */
static int fail_at(parser *ps, const char *at, const char *what, const char *tail)
{
    char q[160];
    quote(q, sizeof q, ps->src);
    return kv_err_set(ps->err, "%s in %s (column %d)%s", what, q, (int)(at - ps->src) + 1,
                      tail ? tail : "");
}

/* What is at `at`, for "unexpected ..." messages: a whole name or number,
 * or one character. */
static void token_text(char *out, size_t cap, const char *at)
{
    if (*at == '\0') {
        snprintf(out, cap, "end of expression");
        return;
    }
    size_t n = 1;
    if (is_name_char(*at))
        while (is_name_char(at[n]) && n < 32)
            n++;
    char tok[40];
    memcpy(tok, at, n);
    tok[n] = '\0';
    quote(out, cap, tok);
}

static int parse_expr(parser *ps, int64_t *out);

static int overflow(parser *ps, const char *at, const char *op)
{
    char what[64];
    snprintf(what, sizeof what, "64-bit overflow in %s", op);
    return fail_at(ps, at, what, NULL);
}

/* a <op> b with every check; at points at the operator. */
static int apply(parser *ps, char op, const char *at, int64_t a, int64_t b, int64_t *out)
{
    if (ps->mode == MODE_CHECK) {
        *out = 0;
        return KV_OK;
    }
    switch (op) {
    case '+':
        if (__builtin_add_overflow(a, b, out))
            return overflow(ps, at, "addition");
        return KV_OK;
    case '-':
        if (__builtin_sub_overflow(a, b, out))
            return overflow(ps, at, "subtraction");
        return KV_OK;
    case 'n': /* unary minus */
        if (__builtin_sub_overflow((int64_t)0, b, out))
            return overflow(ps, at, "negation");
        return KV_OK;
    case '*':
        if (__builtin_mul_overflow(a, b, out))
            return overflow(ps, at, "multiplication");
        return KV_OK;
    case '/':
    case '%':
    case 'c': /* ceil_div */
        if (b == 0)
            return fail_at(ps, at, op == '%' ? "remainder of division by zero" : "division by zero",
                           NULL);
        if (a == INT64_MIN && b == -1)
            return overflow(ps, at, "division");
        if (op == '%') {
            *out = a % b;
        } else if (op == 'c') {
            *out = a / b + (a % b != 0 && ((a < 0) == (b < 0)));
        } else {
            if (ps->mode == MODE_EXACT && a % b != 0) {
                char tail[160];
                snprintf(tail, sizeof tail, ": %" PRId64 " / %" PRId64 " leaves remainder %" PRId64,
                         a, b, a % b);
                return fail_at(ps, at, "inexact division", tail);
            }
            *out = a / b;
        }
        return KV_OK;
    }
    return fail_at(ps, at, "internal error: unknown operator", NULL);
}

static int parse_number(parser *ps, int64_t *out)
{
    const char *start = ps->p;
    int64_t v = 0;
    int too_big = 0;
    while (is_digit(*ps->p)) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *ps->p - '0', &v))
            too_big = 1;
        ps->p++;
    }
    if (is_name_char(*ps->p) || *ps->p == '.') {
        const char *end = ps->p;
        while (is_name_char(*end) || *end == '.')
            end++;
        char tok[40], what[128];
        size_t n = (size_t)(end - start) < 32 ? (size_t)(end - start) : 32;
        memcpy(tok, start, n);
        tok[n] = '\0';
        char q[48];
        quote(q, sizeof q, tok);
        snprintf(what, sizeof what, "malformed number %s (integers only, in decimal)", q);
        return fail_at(ps, start, what, NULL);
    }
    if (too_big)
        return fail_at(ps, start, "number too large for 64 bits", NULL);
    *out = v;
    return KV_OK;
}

/* The names of env, ", "-separated, for a message tail. */
static void known_names(const kv_expr_env *env, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; env && i < env->n && o < cap; i++) {
        int w = snprintf(out + o, cap - o, "%s%s", i ? ", " : "", env->names[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
}

static int unknown_name(parser *ps, const char *at, const char *name, int is_call)
{
    char what[128], tail[400], q[80];
    quote(q, sizeof q, name);
    const char *near;
    if (is_call) {
        snprintf(what, sizeof what, "unknown function %s", q);
        near = kv_suggest(name, funcs, N_FUNCS);
        if (near)
            snprintf(tail, sizeof tail, "; did you mean \"%s\"?", near);
        else
            snprintf(tail, sizeof tail, "; functions are min, max and ceil_div");
        return fail_at(ps, at, what, tail);
    }
    snprintf(what, sizeof what, "unknown name %s", q);
    near = ps->env && ps->env->n > 0 ? kv_suggest(name, ps->env->names, (size_t)ps->env->n) : NULL;
    char names[300];
    known_names(ps->env, names, sizeof names);
    if (!names[0])
        snprintf(tail, sizeof tail, "; no names are defined here");
    else if (near)
        snprintf(tail, sizeof tail, "; did you mean \"%s\"? (known names: %s)", near, names);
    else
        snprintf(tail, sizeof tail, "; known names: %s", names);
    return fail_at(ps, at, what, tail);
}

static int expect(parser *ps, char c, const char *context)
{
    skip_space(ps);
    if (*ps->p == c) {
        ps->p++;
        return KV_OK;
    }
    char tok[64], what[256];
    token_text(tok, sizeof tok, ps->p);
    snprintf(what, sizeof what, "expected '%c' %s, found %s", c, context, tok);
    return fail_at(ps, ps->p, what, NULL);
}

static int parse_call(parser *ps, const char *name, const char *at, int64_t *out)
{
    int f = -1;
    for (size_t i = 0; i < N_FUNCS; i++)
        if (strcmp(name, funcs[i]) == 0)
            f = (int)i;
    if (f < 0)
        return unknown_name(ps, at, name, 1);
    char ctx[128];
    ps->p++; /* '(' */
    int64_t a, b;
    if (parse_expr(ps, &a))
        return KV_FAIL;
    snprintf(ctx, sizeof ctx, "after the first argument of %s (it takes two)", name);
    if (expect(ps, ',', ctx))
        return KV_FAIL;
    if (parse_expr(ps, &b))
        return KV_FAIL;
    snprintf(ctx, sizeof ctx, "after the second argument of %s (it takes two)", name);
    if (expect(ps, ')', ctx))
        return KV_FAIL;
    if (ps->mode == MODE_CHECK) {
        *out = 0;
        return KV_OK;
    }
    switch (f) {
    case 0: *out = a < b ? a : b; return KV_OK;
    case 1: *out = a > b ? a : b; return KV_OK;
    default: return apply(ps, 'c', at, a, b, out);
    }
}

static int parse_name(parser *ps, int64_t *out)
{
    const char *at = ps->p;
    size_t n = 0;
    while (is_name_char(ps->p[n]))
        n++;
    char name[MAX_NAME + 4];
    if (n > MAX_NAME) {
        memcpy(name, at, MAX_NAME);
        memcpy(name + MAX_NAME, "...", 4);
        return unknown_name(ps, at, name, 0);
    }
    memcpy(name, at, n);
    name[n] = '\0';
    ps->p += n;
    skip_space(ps);
    if (*ps->p == '(')
        return parse_call(ps, name, at, out);
    for (int i = 0; ps->env && i < ps->env->n; i++) {
        if (strcmp(ps->env->names[i], name) == 0) {
            *out = ps->mode == MODE_CHECK || !ps->env->values ? 0 : ps->env->values[i];
            return KV_OK;
        }
    }
    for (size_t i = 0; i < N_FUNCS; i++) {
        if (strcmp(name, funcs[i]) == 0) {
            char what[128];
            snprintf(what, sizeof what, "%s is a function; expected '(' after it", name);
            return fail_at(ps, at, what, NULL);
        }
    }
    return unknown_name(ps, at, name, 0);
}

static int parse_unary(parser *ps, int64_t *out)
{
    skip_space(ps);
    if (++ps->depth > MAX_DEPTH)
        return fail_at(ps, ps->p, "expression nested too deeply", NULL);
    int rc;
    const char *at = ps->p;
    if (*ps->p == '-') {
        ps->p++;
        int64_t v = 0;
        rc = parse_unary(ps, &v);
        if (rc == KV_OK)
            rc = apply(ps, 'n', at, 0, v, out);
    } else if (is_digit(*ps->p)) {
        rc = parse_number(ps, out);
    } else if (is_name_start(*ps->p)) {
        rc = parse_name(ps, out);
    } else if (*ps->p == '(') {
        ps->p++;
        rc = parse_expr(ps, out);
        if (rc == KV_OK) {
            char ctx[48];
            snprintf(ctx, sizeof ctx, "to close the '(' of column %d", (int)(at - ps->src) + 1);
            rc = expect(ps, ')', ctx);
        }
    } else {
        char tok[64], what[160];
        token_text(tok, sizeof tok, ps->p);
        snprintf(what, sizeof what, "expected a number, a name or '(', found %s", tok);
        rc = fail_at(ps, ps->p, what, NULL);
    }
    ps->depth--;
    return rc;
}

static int parse_term(parser *ps, int64_t *out)
{
    if (parse_unary(ps, out))
        return KV_FAIL;
    for (;;) {
        skip_space(ps);
        char op = *ps->p;
        if (op != '*' && op != '/' && op != '%')
            return KV_OK;
        const char *at = ps->p++;
        int64_t b = 0;
        if (parse_unary(ps, &b) || apply(ps, op, at, *out, b, out))
            return KV_FAIL;
    }
}

static int parse_expr(parser *ps, int64_t *out)
{
    if (parse_term(ps, out))
        return KV_FAIL;
    for (;;) {
        skip_space(ps);
        char op = *ps->p;
        if (op != '+' && op != '-')
            return KV_OK;
        const char *at = ps->p++;
        int64_t b;
        if (parse_term(ps, &b) || apply(ps, op, at, *out, b, out))
            return KV_FAIL;
    }
}

static int run(const char *expr, const kv_expr_env *env, int mode, int64_t *out, kv_err *err)
{
    if (!expr)
        return kv_err_set(err, "empty expression");
    parser ps = {.src = expr, .p = expr, .env = env, .mode = mode, .err = err};
    skip_space(&ps);
    if (*ps.p == '\0')
        return kv_err_set(err, "empty expression");
    int64_t v = 0;
    if (parse_expr(&ps, &v))
        return KV_FAIL;
    skip_space(&ps);
    if (*ps.p != '\0') {
        char tok[64], what[160];
        token_text(tok, sizeof tok, ps.p);
        snprintf(what, sizeof what, "unexpected %s after a complete expression", tok);
        return fail_at(&ps, ps.p, what, *ps.p == ')' ? " (unbalanced parentheses)" : NULL);
    }
    if (out)
        *out = v;
    return KV_OK;
}

int kv_expr_eval(const char *expr, const kv_expr_env *env, int64_t *out, kv_err *err)
{
    return run(expr, env, MODE_EVAL, out, err);
}

int kv_expr_eval_exact(const char *expr, const kv_expr_env *env, int64_t *out, kv_err *err)
{
    return run(expr, env, MODE_EXACT, out, err);
}

int kv_expr_check(const char *expr, const kv_expr_env *env, kv_err *err)
{
    return run(expr, env, MODE_CHECK, NULL, err);
}
