/* expr.h — integer expressions over named parameters (problem shapes, cost
 * models): + - * / % and parentheses, unary minus, min(a,b), max(a,b),
 * ceil_div(a,b), decimal literals, names [A-Za-z_][A-Za-z0-9_]*. 64-bit
 * signed arithmetic; overflow, division by zero and unknown names are errors
 * that name the expression and the offending part. '/' and '%' truncate
 * toward zero as in C; ceil_div(a, b) is the quotient rounded up. */
#ifndef KEVO_EXPR_H
#define KEVO_EXPR_H

#include <stdint.h>

#include "common/err.h"

typedef struct {
    int n;
    const char *const *names;
    const int64_t *values;
} kv_expr_env;

int kv_expr_eval(const char *expr, const kv_expr_env *env, int64_t *out, kv_err *err);

/* Like kv_expr_eval, but every '/' must divide exactly: shapes written as
 * divisions ("N/W") must split evenly, and an inexact division is an error
 * that names both operands and the remainder. '%' and ceil_div are exact by
 * definition and unaffected. */
int kv_expr_eval_exact(const char *expr, const kv_expr_env *env, int64_t *out, kv_err *err);

/* Checks syntax and that every name is in env (values are not used beyond
 * evaluation, and env->values may be NULL); used to validate problem files
 * before any size is chosen. */
int kv_expr_check(const char *expr, const kv_expr_env *env, kv_err *err);

#endif
