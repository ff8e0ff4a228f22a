/* internal.h — what the files of problem/ share and nothing else uses: the
 * environment expressions are evaluated in, the cost keys, and the steps of
 * loading that live in files of their own. The public API is
 * problem/problem.h. */
#ifndef KEVO_PROBLEM_INTERNAL_H
#define KEVO_PROBLEM_INTERNAL_H

#include "common/err.h"
#include "common/expr.h"
#include "problem/problem.h"

/* The names an expression may use: the parameters, then W. */
typedef struct {
    const char *names[KV_PROBLEM_MAX_PARAMS + 1];
    int64_t values[KV_PROBLEM_MAX_PARAMS + 1];
    kv_expr_env env;
} kv_problem_env;

/* The environment of one size (-1: the names only, values 0) at world. */
void kv_problem_env_make(const kv_problem *p, int size, int world, kv_problem_env *e);

/* The cost model's keys below $.cost, and the expression of key i (0..3). */
#define KV_PROBLEM_N_COSTS 4
extern const char *const kv_problem_cost_keys[KV_PROBLEM_N_COSTS];
const char *kv_problem_cost_expr(const kv_problem *p, int i);

/* Whether t is an integer dtype (i32, i64). */
int kv_dtype_is_int(kevo_dtype t);

/* The names of every dtype and init kind, NULL-terminated, in the order of
 * their enums (for the schema's enums and messages). */
extern const char *const kv_problem_dtype_names[KEVO_DTYPE_COUNT + 1];
extern const char *const kv_problem_init_names[];
extern const size_t kv_problem_n_inits;

/* The checks that span sections, after every value has been read: names in
 * expressions, tolerances by world, valid_rows_from, every shape at every
 * size and world (problem/validate.c). Messages start with file. */
int kv_problem_validate(const char *file, const kv_problem *p, kv_err *err);

/* The files beside problem.json: reference.cu (required), inputs.cu (needed
 * by "hook" inputs), check.c (optional); fills p->reference, p->inputs_hook
 * and p->check. */
int kv_problem_check_files(const char *file, const char *dir, kv_problem *p, kv_err *err);

#endif
