/* names.c — the names of dtypes and init kinds (problem/problem.h). */
#include <string.h>

#include "problem/internal.h"

const char *const kv_problem_dtype_names[KEVO_DTYPE_COUNT + 1] = {
    [KEVO_BF16] = "bf16",      [KEVO_F16] = "f16", [KEVO_F32] = "f32",
    [KEVO_I32] = "i32",        [KEVO_I64] = "i64", [KEVO_FP8_E4M3] = "fp8_e4m3",
    [KEVO_DTYPE_COUNT] = NULL,
};

const char *const kv_problem_init_names[] = {
    [KV_INIT_NORMAL] = "normal",
    [KV_INIT_UNIFORM] = "uniform",
    [KV_INIT_INT_RANGE] = "int_range",
    [KV_INIT_ZEROS] = "zeros",
    [KV_INIT_HOOK] = "hook",
    [KV_INIT_PERMUTATION] = "permutation",
    NULL,
};
const size_t kv_problem_n_inits =
    sizeof kv_problem_init_names / sizeof kv_problem_init_names[0] - 1;

const char *kv_dtype_name(kevo_dtype t)
{
    return (unsigned)t < KEVO_DTYPE_COUNT ? kv_problem_dtype_names[t] : "?";
}

int kv_dtype_parse(const char *name, kevo_dtype *out)
{
    for (int i = 0; i < KEVO_DTYPE_COUNT; i++) {
        if (strcmp(name, kv_problem_dtype_names[i]) == 0) {
            *out = (kevo_dtype)i;
            return 0;
        }
    }
    return -1;
}

const char *kv_init_name(kv_init_kind k)
{
    return (size_t)k < kv_problem_n_inits ? kv_problem_init_names[k] : "?";
}

int kv_dtype_is_int(kevo_dtype t)
{
    return t == KEVO_I32 || t == KEVO_I64;
}
