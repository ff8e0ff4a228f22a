/* validate.c — the checks of problem.json that span sections, run once
 * every value has been read (problem/load.c): every shape, bound and cost
 * expression names only the parameters and W; tolerances given per world
 * name exactly the problem's worlds and have a reason; valid_rows_from names
 * another, integer output; and every expression is evaluated at every size
 * for every supported world, with exact division, so that a problem that
 * loads can be run at any (size, W) it declares. Then the files beside it.
 * Messages are "<file>: <JSON path>: <what is wrong>". */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/json.h"
#include "common/schema.h"
#include "problem/internal.h"

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
    for (int i = 0; i < KV_PROBLEM_N_COSTS; i++) {
        const char *e = kv_problem_cost_expr(p, i);
        if (!e[0])
            continue;
        snprintf(jpath, sizeof jpath, "$.cost.%s", kv_problem_cost_keys[i]);
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
    if (kv_expr_check(expr, &((kv_problem_env *)arg)->env, &e))
        return fail(ld, jpath, "%s", e.msg);
    return KV_OK;
}

typedef struct {
    const kv_problem *p;
    int size, world;
    kv_problem_env env;
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
        return fail(ld, jpath,
                    "size \"%s\" at W=%d: %s is %lld; every dimension must be "
                    "positive",
                    size, a->world, q, (long long)v);
    if (kind == EXPR_COST && v < 0)
        return fail(ld, jpath, "size \"%s\" at W=%d: %s is %lld; it cannot be negative", size,
                    a->world, q, (long long)v);
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
        return fail(ld, jpath,
                    "size \"%s\" at W=%d: high (%lld) must be greater than low "
                    "(%lld): the range is [low, high)",
                    sname, world, (long long)hi, (long long)lo);
    if (t->dtype == KEVO_I32 && (lo < INT32_MIN || hi - 1 > INT32_MAX))
        return fail(ld, jpath, "size \"%s\" at W=%d: [%lld, %lld) does not fit in i32", sname,
                    world, (long long)lo, (long long)hi);
    int64_t row = shape->shape[shape->ndim - 1];
    if (t->init == KV_INIT_PERMUTATION && hi - lo < row)
        return fail(ld, jpath,
                    "size \"%s\" at W=%d: input %s: a permutation of rows of %lld "
                    "distinct values needs high - low >= %lld, got %lld",
                    sname, world, t->name, (long long)row, (long long)row, (long long)(hi - lo));
    return KV_OK;
}

static int check_rules(loader *ld, const kv_problem *p)
{
    /* every expression uses only the parameters and W */
    kv_problem_env env;
    kv_problem_env_make(p, -1, 0, &env);
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
                    return fail(ld, jpath,
                                "a value for W=%d, which is not one of the problem's "
                                "worlds",
                                w);
            }
        }
    }

    /* tolerances need a reason */
    int any_tol = 0;
    for (int i = 0; i < p->n_outputs; i++)
        any_tol |= p->outputs[i].atol > 0 || p->outputs[i].rtol > 0;
    if (any_tol && !p->tolerance_reason[0])
        return fail(ld, "$.tolerance_reason",
                    "required key is missing (an output has a "
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
            kv_schema_unknown_value(ld->err, jpath, "output", ref, names, (size_t)p->n_outputs);
            return kv_err_prefix(ld->err, "%s", ld->file);
        }
        if (j == i)
            return fail(ld, jpath,
                        "\"%s\" names this output itself; it must name another "
                        "(integer) output",
                        ref);
        if (!kv_dtype_is_int(p->outputs[j].dtype))
            return fail(ld, jpath,
                        "\"%s\" is a %s output; valid_rows_from must name an integer "
                        "output (i32 or i64) whose element sum is the number of "
                        "valid rows",
                        ref, kv_dtype_name(p->outputs[j].dtype));
        if (p->outputs[j].valid_rows_from[0])
            return fail(ld, jpath,
                        "\"%s\" has a valid_rows_from of its own; the row count must "
                        "be compared in full",
                        ref);
    }

    /* every shape at every size and world: exact, positive, representable */
    eval_arg a = {.p = p};
    for (int s = 0; s < p->n_sizes; s++) {
        for (int w = 0; w < p->n_worlds; w++) {
            a.size = s;
            a.world = p->worlds[w];
            kv_problem_env_make(p, s, a.world, &a.env);
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
        return kv_err_set(ld->err,
                          "%s: missing (every problem needs its NCCL reference, a "
                          "candidate per include/kevo/kernel.h)",
                          p->reference);
    char hook[PATH_MAX];
    if (kv_path_join(hook, sizeof hook, dir, "inputs.cu", &e))
        return fail(ld, NULL, "%s", e.msg);
    int have_hook = stat(hook, &st) == 0 && S_ISREG(st.st_mode);
    if (have_hook)
        snprintf(p->inputs_hook, sizeof p->inputs_hook, "%s", hook);
    char check[PATH_MAX];
    if (kv_path_join(check, sizeof check, dir, "check.c", &e))
        return fail(ld, NULL, "%s", e.msg);
    if (stat(check, &st) == 0 && S_ISREG(st.st_mode))
        snprintf(p->check, sizeof p->check, "%s", check);
    for (int i = 0; i < p->n_inputs; i++) {
        if (p->inputs[i].init == KV_INIT_HOOK && !have_hook) {
            char jpath[KV_JSON_PATH_MAX];
            snprintf(jpath, sizeof jpath, "$.inputs[%d].init.kind", i);
            return fail(ld, jpath, "\"hook\" needs %s, which is missing", hook);
        }
    }
    return KV_OK;
}

int kv_problem_validate(const char *file, const kv_problem *p, kv_err *err)
{
    loader ld = {.file = file, .err = err};
    return check_rules(&ld, p);
}

int kv_problem_check_files(const char *file, const char *dir, kv_problem *p, kv_err *err)
{
    loader ld = {.file = file, .err = err};
    return check_files(&ld, dir, p);
}
