/* problem.h — a problem: what to compute across W GPUs, its sizes, its
 * tolerances and its cost model, read from problems/<name>/problem.json.
 * docs/problems.md documents the file format. */
#ifndef KEVO_PROBLEM_H
#define KEVO_PROBLEM_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "kevo/kernel.h"

#define KV_PROBLEM_NAME_MAX 64
#define KV_PROBLEM_EXPR_MAX 256
#define KV_PROBLEM_MAX_PARAMS KEVO_MAX_PARAMS
#define KV_PROBLEM_MAX_SIZES 12
#define KV_PROBLEM_MAX_WORLDS 8
#define KV_PROBLEM_TEXT_MAX 1024 /* tolerance_reason */
#define KV_PROBLEM_DESCRIPTION_MAX (64 * 1024)

typedef enum {
    KV_INIT_NORMAL,    /* floats: normal(a = mean, b = std) */
    KV_INIT_UNIFORM,   /* floats: uniform [a, b) */
    KV_INIT_INT_RANGE, /* integers: uniform in [a, b) */
    KV_INIT_ZEROS,
    KV_INIT_HOOK,        /* filled by the problem's inputs.cu hook */
    KV_INIT_PERMUTATION, /* integers: each row (last dimension) distinct values of [a, b) */
} kv_init_kind;

typedef struct {
    char name[KEVO_NAME_MAX];
    kevo_dtype dtype;
    int ndim;
    char shape[KEVO_MAX_DIMS][KV_PROBLEM_EXPR_MAX]; /* expressions of params and W */
    /* inputs */
    kv_init_kind init;
    double init_a, init_b;               /* normal: mean, std; uniform: low, high */
    char init_low[KV_PROBLEM_EXPR_MAX];  /* int_range, permutation: [low, high) as */
    char init_high[KV_PROBLEM_EXPR_MAX]; /* expressions of params and W (kv_problem_init_range) */
    int same_on_all_ranks;               /* e.g. routing targets every rank must agree on */
    /* outputs */
    double atol, rtol; /* |got - want| <= atol + rtol * |want|; 0/0: bit-exact;
                                    the largest over the worlds (kv_tensor_tolerance) */
    double atol_at[KEVO_MAX_RANKS + 1], rtol_at[KEVO_MAX_RANKS + 1]; /* by world size */
    unsigned atol_worlds, rtol_worlds;   /* bit W: given per world ("atol": {"2": 0, ...});
                                          0: one number for every world */
    char valid_rows_from[KEVO_NAME_MAX]; /* "" = all rows; else the name of an int output
                                            whose element sum (as the reference wrote it)
                                            is the number of valid leading rows */
} kv_tensor_spec;

typedef struct {
    char name[KV_PROBLEM_NAME_MAX];
    int64_t values[KV_PROBLEM_MAX_PARAMS]; /* in the order of kv_problem.param_names */
    int validation;                        /* never shown to mutators */
} kv_size_spec;

typedef struct {
    char name[KV_PROBLEM_NAME_MAX];
    char category[KV_PROBLEM_NAME_MAX];
    char *description;                          /* owned; goes into prompts; lines joined
                                              with '\n' */
    char tolerance_reason[KV_PROBLEM_TEXT_MAX]; /* lines joined with '\n' */
    int n_worlds;
    int worlds[KV_PROBLEM_MAX_WORLDS];
    int n_params;
    char param_names[KV_PROBLEM_MAX_PARAMS][KEVO_NAME_MAX];
    int n_sizes;
    kv_size_spec sizes[KV_PROBLEM_MAX_SIZES];
    int n_inputs, n_outputs;
    kv_tensor_spec inputs[KEVO_MAX_TENSORS];
    kv_tensor_spec outputs[KEVO_MAX_TENSORS];
    /* cost model, per rank, expressions of params and W */
    char cost_send_bytes[KV_PROBLEM_EXPR_MAX];
    char cost_recv_bytes[KV_PROBLEM_EXPR_MAX];
    char cost_flops[KV_PROBLEM_EXPR_MAX];
    char cost_hbm_bytes[KV_PROBLEM_EXPR_MAX]; /* local memory traffic; may be "" */
    char scratch_bytes[KV_PROBLEM_EXPR_MAX];  /* symmetric scratch per side; "" = default */
    char dir[PATH_MAX];
    char reference[PATH_MAX];   /* <dir>/reference.cu */
    char inputs_hook[PATH_MAX]; /* <dir>/inputs.cu, or "" */
    char check[PATH_MAX];       /* <dir>/check.c (the host check), or "" */
} kv_problem;

/* Loads and validates <dir>/problem.json. Errors name the file and the JSON
 * path. */
int kv_problem_load(const char *dir, kv_problem *p, kv_err *err);
void kv_problem_free(kv_problem *p);

/* Loads every problems/<name>/ under root. Problems that fail are skipped;
 * for each, on_error (if not NULL) receives its message. Returns the number
 * loaded (*out, malloc'ed array), or -1 if root cannot be read.
 * Subfolders are visited in name order; those without a problem.json, and
 * names that start with '.', are not problems and are passed over silently. */
int kv_problems_load_all(const char *root, kv_problem **out,
                         void (*on_error)(const char *msg, void *ctx), void *ctx, kv_err *err);
/* Frees what kv_problems_load_all returned (each problem, then the array). */
void kv_problems_free(kv_problem *v, int n);

int kv_problem_find_size(const kv_problem *p, const char *name); /* index or -1 */
int kv_problem_supports_world(const kv_problem *p, int world);

/* The concrete shapes of one size at world size W. */
typedef struct {
    int ndim;
    int64_t shape[KEVO_MAX_DIMS];
    int64_t numel;
    size_t bytes;
} kv_shape;

int kv_problem_shapes(const kv_problem *p, int size, int world, kv_shape *inputs, kv_shape *outputs,
                      kv_err *err);

/* 1 when the reference runs on plain device memory, off the symmetric window,
 * at these shapes: some tensor's bytes are not a multiple of 16 x world, so a
 * rank's block inside it may not start on a 16-byte boundary, where NCCL
 * 2.28.3's symmetric kernels return wrong elements (docs/problems.md, "NCCL
 * on the window"). 0: it stays in the window. */
int kv_shapes_ref_plain(const kv_problem *p, const kv_shape *inputs, const kv_shape *outputs,
                        int world);

/* The tolerance of an output at world size W. */
void kv_tensor_tolerance(const kv_tensor_spec *t, int world, double *atol, double *rtol);

/* The bounds [lo, hi) of an int_range or permutation input at one size
 * and world (its low and high expressions evaluated). */
int kv_problem_init_range(const kv_problem *p, int input, int size, int world, int64_t *lo,
                          int64_t *hi, kv_err *err);

/* The symmetric scratch the problem asks for at one size and world (its
 * scratch_bytes expression), 0 when it asks for none beyond the default. */
int kv_problem_scratch_bytes(const kv_problem *p, int size, int world, int64_t *out, kv_err *err);

/* The roofline of one size: the time no implementation can beat, from the
 * cost model and the ceilings in common/machine.h. */
typedef struct {
    double send_bytes, recv_bytes, flops, hbm_bytes;
    double link_s, compute_s, hbm_s;
    double seconds; /* the max of the three */
    double floor_s; /* the time no honest kernel beats: the cost model at the
                       KV_FLOOR_* ceilings less KV_FLOOR_MARGIN (common/machine.h) */
} kv_roofline;

int kv_problem_roofline(const kv_problem *p, int size, int world, kv_roofline *out, kv_err *err);
/* The floor of a cost (bytes sent and received per GPU, FLOPs, HBM bytes):
 * the slowest of the three at the KV_FLOOR_* ceilings, less KV_FLOOR_MARGIN. */
double kv_roofline_floor_s(double send_bytes, double recv_bytes, double flops, double hbm_bytes);

/* "bf16", "f16", "f32", "i32", "i64", "fp8_e4m3"; "?" for other values.
 * kv_dtype_parse returns 0, or -1 for an unknown name. */
const char *kv_dtype_name(kevo_dtype t);
int kv_dtype_parse(const char *name, kevo_dtype *out);

/* "normal", "uniform", "int_range", "zeros", "hook"; "?" for other values. */
const char *kv_init_name(kv_init_kind k);

/* The folder that holds the problems: $KEVO_PROBLEMS if set, else
 * "<data root>/problems" (common/datadir.h). Writes it into out and returns
 * out. */
const char *kv_problems_default_root(char *out, size_t cap);

#endif
