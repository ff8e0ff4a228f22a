/* test_expr.c — the integer expression evaluator (common/expr.h): precedence,
 * associativity, parentheses, unary minus, the functions, exact division,
 * check mode, and every error with its message. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/expr.h"
#include "test.h"

static const char *const names[] = {"N", "W", "H", "topk", "N_local"};
static const int64_t values[] = {12, 4, 7, 2, 3};
static const kv_expr_env env = {5, names, values};

static int64_t ev(const char *e)
{
    int64_t v = -999999;
    kv_err err = {{0}};
    if (kv_expr_eval(e, &env, &v, &err) != KV_OK)
        fprintf(stderr, "unexpected error for \"%s\": %s\n", e, err.msg);
    return v;
}

/* Evaluation fails and the message contains every given piece. */
static void fails(const char *e, const char *a, const char *b)
{
    int64_t v = 12345;
    kv_err err = {{0}};
    int rc = kv_expr_eval(e, &env, &v, &err);
    KV_CHECKF(rc == KV_FAIL, "\"%s\" evaluated to %lld", e, (long long)v);
    KV_CHECK(v == 12345); /* output untouched on failure */
    KV_CHECK_STR_CONTAINS(err.msg, a);
    if (b)
        KV_CHECK_STR_CONTAINS(err.msg, b);
}

static void test_literals_and_names(void)
{
    KV_CHECK(ev("0") == 0);
    KV_CHECK(ev("42") == 42);
    KV_CHECK(ev("  7  ") == 7);
    KV_CHECK(ev("9223372036854775807") == INT64_MAX);
    KV_CHECK(ev("N") == 12);
    KV_CHECK(ev("N_local") == 3);
    KV_CHECK(ev("topk") == 2);
    KV_CHECK(ev("\tN\n") == 12);
}

static void test_precedence(void)
{
    KV_CHECK(ev("1+2*3") == 7);
    KV_CHECK(ev("2*3+1") == 7);
    KV_CHECK(ev("N/W*H") == 21); /* left to right: (12/4)*7 */
    KV_CHECK(ev("N*H/W") == 21); /* (12*7)/4 = 84/4 */
    KV_CHECK(ev("10-4-3") == 3); /* left associative */
    KV_CHECK(ev("100/10/5") == 2);
    KV_CHECK(ev("17%5*2") == 4); /* (17%5)*2 */
    KV_CHECK(ev("1+17%5") == 3);
    KV_CHECK(ev("2*(W-1)*N*2/W") == 36);
}

static void test_parentheses(void)
{
    KV_CHECK(ev("(1+2)*3") == 9);
    KV_CHECK(ev("((((N))))") == 12);
    KV_CHECK(ev("2*(3+(4-1)*2)") == 18);
    KV_CHECK(ev("( N + W ) * ( H - topk )") == 80);
}

static void test_unary_minus(void)
{
    KV_CHECK(ev("-3") == -3);
    KV_CHECK(ev("--3") == 3);
    KV_CHECK(ev("-N+W") == -8);
    KV_CHECK(ev("-(N+W)") == -16);
    KV_CHECK(ev("2*-3") == -6);
    KV_CHECK(ev("2--3") == 5);
    KV_CHECK(ev("-9223372036854775807-1") == INT64_MIN);
    /* division truncates toward zero, as in C */
    KV_CHECK(ev("-7/2") == -3);
    KV_CHECK(ev("-7%2") == -1);
}

static void test_functions(void)
{
    KV_CHECK(ev("min(N, W)") == 4);
    KV_CHECK(ev("max(N, W)") == 12);
    KV_CHECK(ev("min(3,-3)") == -3);
    KV_CHECK(ev("ceil_div(N, W)") == 3);
    KV_CHECK(ev("ceil_div(13, 4)") == 4);
    KV_CHECK(ev("ceil_div(1, 4)") == 1);
    KV_CHECK(ev("ceil_div(0, 4)") == 0);
    KV_CHECK(ev("ceil_div(-7, 2)") == -3);
    KV_CHECK(ev("ceil_div(7, -2)") == -3);
    KV_CHECK(ev("ceil_div(-7, -2)") == 4);
    KV_CHECK(ev("max(min(N, H), ceil_div(N*H, W)) + 1") == 22);
    KV_CHECK(ev("min (1, 2)") == 1); /* space before '(' */
}

static void test_exact_division(void)
{
    int64_t v = 0;
    kv_err err = {{0}};
    KV_CHECK(kv_expr_eval_exact("N/W", &env, &v, &err) == KV_OK && v == 3);
    KV_CHECK(kv_expr_eval_exact("N*H/W", &env, &v, &err) == KV_OK && v == 21);
    KV_CHECK(kv_expr_eval_exact("H%W + ceil_div(H, W)", &env, &v, &err) == KV_OK && v == 5);
    v = -1;
    KV_CHECK(kv_expr_eval_exact("H/W", &env, &v, &err) == KV_FAIL);
    KV_CHECK(v == -1);
    KV_CHECK_STR_CONTAINS(err.msg,
                          "inexact division in \"H/W\" (column 2): 7 / 4 leaves remainder 3");
    /* the plain evaluator truncates */
    KV_CHECK(ev("H/W") == 1);
}

static void test_check(void)
{
    kv_err err = {{0}};
    KV_CHECK(kv_expr_check("N/W + ceil_div(H, topk)", &env, &err) == KV_OK);
    /* no arithmetic in check mode: value-dependent errors do not arise */
    KV_CHECK(kv_expr_check("N/(W-W)", &env, &err) == KV_OK);
    KV_CHECK(kv_expr_check("9223372036854775807 + 1", &env, &err) == KV_OK);
    /* values may be absent */
    kv_expr_env no_values = {2, names, NULL};
    KV_CHECK(kv_expr_check("N*W", &no_values, &err) == KV_OK);
    KV_CHECK(kv_expr_check("N*Q", &no_values, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "unknown name \"Q\" in \"N*Q\" (column 3)");
    KV_CHECK(kv_expr_check("N*", &env, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "found end of expression");
    KV_CHECK(kv_expr_check("", &env, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "empty expression");
}

static void test_errors(void)
{
    /* unknown names: the name, the expression, the column, a suggestion */
    fails("M/W", "unknown name \"M\" in \"M/W\" (column 1)",
          "; did you mean \"N\"? (known names: N, W, H, topk, N_local)");
    fails("N_locl + 1", "unknown name \"N_locl\"", "did you mean \"N_local\"?");
    fails("N + world_size", "unknown name \"world_size\" in \"N + world_size\" (column 5)",
          "known names: N, W, H, topk, N_local");
    fails("mni(N, W)", "unknown function \"mni\"", "did you mean \"min\"?");
    fails("sqrt(N, W)", "unknown function \"sqrt\"", "functions are min, max and ceil_div");
    fails("min + 1", "min is a function; expected '(' after it", NULL);
    /* division by zero */
    fails("N/(W-4)", "division by zero in \"N/(W-4)\" (column 2)", NULL);
    fails("N%0", "remainder of division by zero", NULL);
    fails("ceil_div(N, 0)", "division by zero", NULL);
    /* overflow */
    fails("9223372036854775807 + 1", "64-bit overflow in addition", "(column 21)");
    fails("-9223372036854775807 - 2", "64-bit overflow in subtraction", NULL);
    fails("4294967296 * 4294967296", "64-bit overflow in multiplication", NULL);
    fails("(-9223372036854775807-1) / -1", "64-bit overflow in division", NULL);
    fails("-(-9223372036854775807-1)", "64-bit overflow in negation", "(column 1)");
    fails("9223372036854775808", "number too large for 64 bits", NULL);
    /* syntax */
    fails("", "empty expression", NULL);
    fails("   ", "empty expression", NULL);
    fails("N W", "unexpected \"W\" after a complete expression in \"N W\" (column 3)", NULL);
    fails("(N))", "unexpected \")\" after a complete expression", "unbalanced parentheses");
    fails("N + 1 ;", "unexpected \";\"", NULL);
    fails("(N + 1", "expected ')' to close the '(' of column 1, found end of expression", NULL);
    fails("N +", "expected a number, a name or '(', found end of expression", "(column 4)");
    fails("* N", "expected a number, a name or '(', found \"*\"", "(column 1)");
    fails("+N", "found \"+\"", NULL); /* no unary plus */
    fails("min(N)", "expected ',' after the first argument of min", NULL);
    fails("max(N, W, H)", "expected ')' after the second argument of max", NULL);
    fails("1.5*N", "malformed number \"1.5\"", NULL);
    fails("2N", "malformed number \"2N\"", NULL);
    fails("1e6", "malformed number \"1e6\"", NULL);
    fails("N # W", "unexpected \"#\"", NULL);
    fails("N \"W\"", "unexpected \"\\\"\"", NULL);
    fails("N/W\x01", "unexpected \"\\x01\"", NULL);

    /* nesting is bounded */
    char deep[400];
    memset(deep, '(', 200);
    deep[200] = '1';
    memset(deep + 201, ')', 198);
    deep[399] = '\0';
    fails(deep, "nested too deeply", NULL);
    char minus[300];
    memset(minus, '-', 299);
    minus[299] = '\0';
    minus[298] = '1';
    fails(minus, "nested too deeply", NULL);

    /* a NULL kv_err is allowed */
    int64_t v;
    KV_CHECK(kv_expr_eval("N/0", &env, &v, NULL) == KV_FAIL);
    /* no env at all */
    kv_err err = {{0}};
    KV_CHECK(kv_expr_eval("1+2", NULL, &v, &err) == KV_OK && v == 3);
    KV_CHECK(kv_expr_eval("N", NULL, &v, &err) == KV_FAIL);
    KV_CHECK_STR_CONTAINS(err.msg, "no names are defined here");
}

int main(void)
{
    KV_RUN(test_literals_and_names);
    KV_RUN(test_precedence);
    KV_RUN(test_parentheses);
    KV_RUN(test_unary_minus);
    KV_RUN(test_functions);
    KV_RUN(test_exact_division);
    KV_RUN(test_check);
    KV_RUN(test_errors);
    return kv_test_summary();
}
