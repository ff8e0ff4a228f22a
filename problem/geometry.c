/* geometry.c — a problem at one size and world: its concrete shapes, the
 * bounds of its integer inputs, its scratch, its tolerances and its roofline
 * (problem/problem.h). The worker uses these at run time; they need nothing but
 * the loaded kv_problem and the expression evaluator. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/machine.h"
#include "problem/internal.h"

void kv_problem_env_make(const kv_problem *p, int size, int world, kv_problem_env *e)
{
    for (int i = 0; i < p->n_params; i++) {
        e->names[i] = p->param_names[i];
        e->values[i] = size >= 0 ? p->sizes[size].values[i] : 0;
    }
    e->names[p->n_params] = "W";
    e->values[p->n_params] = world;
    e->env.n = p->n_params + 1;
    e->env.names = e->names;
    e->env.values = e->values;
}

const char *const kv_problem_cost_keys[KV_PROBLEM_N_COSTS] = {"send_bytes", "recv_bytes", "flops",
                                                              "hbm_bytes"};

const char *kv_problem_cost_expr(const kv_problem *p, int i)
{
    switch (i) {
    case 0: return p->cost_send_bytes;
    case 1: return p->cost_recv_bytes;
    case 2: return p->cost_flops;
    default: return p->cost_hbm_bytes;
    }
}

void kv_tensor_tolerance(const kv_tensor_spec *t, int world, double *atol, double *rtol)
{
    int w = world >= 0 && world <= KEVO_MAX_RANKS ? world : 0;
    *atol = t->atol_worlds && !(t->atol_worlds & 1u << w) ? t->atol : t->atol_at[w];
    *rtol = t->rtol_worlds && !(t->rtol_worlds & 1u << w) ? t->rtol : t->rtol_at[w];
}

int kv_problem_find_size(const kv_problem *p, const char *name)
{
    for (int i = 0; i < p->n_sizes; i++)
        if (strcmp(p->sizes[i].name, name) == 0)
            return i;
    return -1;
}

int kv_problem_supports_world(const kv_problem *p, int world)
{
    for (int i = 0; i < p->n_worlds; i++)
        if (p->worlds[i] == world)
            return 1;
    return 0;
}

static int check_size_world(const kv_problem *p, int size, int world, kv_err *err)
{
    if (size < 0 || size >= p->n_sizes)
        return kv_err_set(err, "problem %s: no size #%d (it has %d)", p->name, size, p->n_sizes);
    if (!kv_problem_supports_world(p, world)) {
        char list[64];
        size_t o = 0;
        list[0] = '\0';
        for (int i = 0; i < p->n_worlds; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? ", " : "", p->worlds[i]);
        return kv_err_set(err, "problem %s does not support W=%d (its worlds: %s)", p->name, world,
                          list);
    }
    return KV_OK;
}

static int tensor_shape(const kv_problem *p, const kv_tensor_spec *t, const char *what, int i,
                        const kv_problem_env *env, kv_shape *out, const char *size, int world,
                        kv_err *err)
{
    memset(out, 0, sizeof *out);
    out->ndim = t->ndim;
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t v;
        if (kv_expr_eval_exact(t->shape[d], &env->env, &v, err))
            return kv_err_prefix(err, "problem %s: $.%s[%d].shape[%d]: size \"%s\" at W=%d",
                                 p->name, what, i, d, size, world);
        if (v <= 0)
            return kv_err_set(err,
                              "problem %s: $.%s[%d].shape[%d]: size \"%s\" at W=%d: \"%s\" "
                              "is %lld; every dimension must be positive",
                              p->name, what, i, d, size, world, t->shape[d], (long long)v);
        out->shape[d] = v;
        if (__builtin_mul_overflow(numel, v, &numel))
            return kv_err_set(err,
                              "problem %s: $.%s[%d]: size \"%s\" at W=%d: the element count "
                              "overflows 64 bits",
                              p->name, what, i, size, world);
    }
    size_t bytes;
    if (__builtin_mul_overflow((uint64_t)numel, kevo_dtype_size(t->dtype), &bytes))
        return kv_err_set(err,
                          "problem %s: $.%s[%d]: size \"%s\" at W=%d: the byte count "
                          "overflows",
                          p->name, what, i, size, world);
    out->numel = numel;
    out->bytes = bytes;
    return KV_OK;
}

int kv_shapes_ref_plain(const kv_problem *p, const kv_shape *inputs, const kv_shape *outputs,
                        int world)
{
    size_t unit = 16u * (size_t)(world > 0 ? world : 1);
    for (int i = 0; i < p->n_inputs; i++)
        if (inputs[i].bytes % unit)
            return 1;
    for (int j = 0; j < p->n_outputs; j++)
        if (outputs[j].bytes % unit)
            return 1;
    return 0;
}

int kv_problem_shapes(const kv_problem *p, int size, int world, kv_shape *inputs, kv_shape *outputs,
                      kv_err *err)
{
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    kv_problem_env env;
    kv_problem_env_make(p, size, world, &env);
    const char *sname = p->sizes[size].name;
    for (int i = 0; i < p->n_inputs; i++)
        if (tensor_shape(p, &p->inputs[i], "inputs", i, &env, &inputs[i], sname, world, err))
            return KV_FAIL;
    for (int i = 0; i < p->n_outputs; i++)
        if (tensor_shape(p, &p->outputs[i], "outputs", i, &env, &outputs[i], sname, world, err))
            return KV_FAIL;
    return KV_OK;
}

int kv_problem_init_range(const kv_problem *p, int input, int size, int world, int64_t *lo,
                          int64_t *hi, kv_err *err)
{
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    if (input < 0 || input >= p->n_inputs)
        return kv_err_set(err, "problem %s: no input %d", p->name, input);
    const kv_tensor_spec *t = &p->inputs[input];
    if (t->init != KV_INIT_INT_RANGE && t->init != KV_INIT_PERMUTATION)
        return kv_err_set(err, "problem %s: input %s is not filled by int_range or permutation",
                          p->name, t->name);
    kv_problem_env env;
    kv_problem_env_make(p, size, world, &env);
    if (kv_expr_eval(t->init_low, &env.env, lo, err))
        return kv_err_prefix(err, "problem %s: $.inputs[%d].init.low: size \"%s\" at W=%d", p->name,
                             input, p->sizes[size].name, world);
    if (kv_expr_eval(t->init_high, &env.env, hi, err))
        return kv_err_prefix(err, "problem %s: $.inputs[%d].init.high: size \"%s\" at W=%d",
                             p->name, input, p->sizes[size].name, world);
    return KV_OK;
}

int kv_problem_scratch_bytes(const kv_problem *p, int size, int world, int64_t *out, kv_err *err)
{
    *out = 0;
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    if (!p->scratch_bytes[0])
        return KV_OK;
    kv_problem_env env;
    kv_problem_env_make(p, size, world, &env);
    if (kv_expr_eval(p->scratch_bytes, &env.env, out, err))
        return kv_err_prefix(err, "problem %s: $.scratch_bytes: size \"%s\" at W=%d", p->name,
                             p->sizes[size].name, world);
    return KV_OK; /* not negative: loading checked every size and world */
}

double kv_roofline_floor_s(double send_bytes, double recv_bytes, double flops, double hbm_bytes)
{
    double link = (send_bytes > recv_bytes ? send_bytes : recv_bytes) / KV_FLOOR_LINK_BYTES_PER_S;
    double t = link;
    if (flops / KV_FLOOR_BF16_FLOPS_PER_S > t)
        t = flops / KV_FLOOR_BF16_FLOPS_PER_S;
    if (hbm_bytes / KV_FLOOR_HBM_BYTES_PER_S > t)
        t = hbm_bytes / KV_FLOOR_HBM_BYTES_PER_S;
    return t * (1 - KV_FLOOR_MARGIN);
}

int kv_problem_roofline(const kv_problem *p, int size, int world, kv_roofline *out, kv_err *err)
{
    if (check_size_world(p, size, world, err))
        return KV_FAIL;
    kv_problem_env env;
    kv_problem_env_make(p, size, world, &env);
    double v[4] = {0, 0, 0, 0};
    for (int i = 0; i < KV_PROBLEM_N_COSTS; i++) {
        const char *e = kv_problem_cost_expr(p, i);
        if (!e[0])
            continue;
        int64_t x;
        if (kv_expr_eval(e, &env.env, &x, err))
            return kv_err_prefix(err, "problem %s: $.cost.%s: size \"%s\" at W=%d", p->name,
                                 kv_problem_cost_keys[i], p->sizes[size].name, world);
        v[i] = (double)x;
    }
    memset(out, 0, sizeof *out);
    out->send_bytes = v[0];
    out->recv_bytes = v[1];
    out->flops = v[2];
    out->hbm_bytes = v[3];
    out->link_s = (v[0] > v[1] ? v[0] : v[1]) / KV_LINK_BYTES_PER_S;
    out->compute_s = v[2] / KV_BF16_FLOPS_PER_S;
    out->hbm_s = v[3] / KV_HBM_BYTES_PER_S;
    out->seconds = out->link_s;
    if (out->compute_s > out->seconds)
        out->seconds = out->compute_s;
    if (out->hbm_s > out->seconds)
        out->seconds = out->hbm_s;
    out->floor_s =
        kv_roofline_floor_s(out->send_bytes, out->recv_bytes, out->flops, out->hbm_bytes);
    return KV_OK;
}
