/* refcheck.h — an independent host computation of every problem, in float64,
 * to check that the NCCL references compute what problem.json says.
 *
 * tests/test_gpu_references.c runs each reference once on the GPUs with its
 * inputs and outputs dumped (kevo baseline --dump), loads the dump into an
 * rc_data and asks the problem's checker what every output element should
 * be and how far from that the reference may be; tests/test_refcheck.c runs
 * the same checkers on host-generated inputs, on the CPU, to show that the
 * comparison fails where it must.
 *
 * A checker knows the problem's semantics and nothing of the reference's
 * code: it recomputes each output from the inputs of every rank, in double
 * precision, and bounds the error of a correct bf16/fp32 implementation
 * (the rounding of the result, of partial sums the reference keeps in
 * bf16, of fp32 accumulation). */
#ifndef KEVO_TESTS_REFCHECK_H
#define KEVO_TESTS_REFCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "problem/problem.h"

/* Every rank's inputs and outputs of one call, on the host. */
typedef struct {
    const kv_problem *p;
    int size;                                  /* index into p->sizes */
    int world;
    kv_shape in_shape[KEVO_MAX_TENSORS];
    kv_shape out_shape[KEVO_MAX_TENSORS];
    void *in[KEVO_MAX_RANKS][KEVO_MAX_TENSORS];  /* raw bytes in the tensor's dtype */
    void *out[KEVO_MAX_RANKS][KEVO_MAX_TENSORS]; /* what the code under test wrote */
} rc_data;

/* What one rank's outputs should be. The checker fills want[j][i] and
 * tol[j][i] (the largest |got - want| a correct implementation can show;
 * 0 for bit-exact) for i < valid[j]; rc_check compares only those. The
 * arrays are allocated by rc_check with out_shape[j].numel elements each,
 * and valid[j] starts at numel. */
typedef struct {
    double *want[KEVO_MAX_TENSORS];
    double *tol[KEVO_MAX_TENSORS];
    int64_t valid[KEVO_MAX_TENSORS];
} rc_expect;

/* Fills e for rank `rank`. Returns 0, or -1 with a reason in why (an input
 * the problem cannot have, e.g. an expert id out of range). */
typedef int (*rc_expect_fn)(const rc_data *d, int rank, rc_expect *e, char *why, size_t cap);

typedef struct {
    const char *problem;
    rc_expect_fn expect;
} rc_checker;

/* The checker of a problem, or NULL. */
const rc_checker *rc_find(const char *problem);

/* The outcome of comparing one rank's outputs. */
typedef struct {
    int64_t checked, failed;
    double worst_ratio;          /* max over elements of |got - want| / tol (0/0 = 0) */
    char first[512];             /* the first failing element, "" when none */
} rc_outcome;

/* Runs the checker for every rank and compares. Returns 0 when every
 * compared element is within its tolerance (NaN never is), 1 when some are
 * not, -1 when the checker failed or memory ran out (why says). out sums
 * over ranks. */
int rc_check(const rc_data *d, rc_outcome *out, char *why, size_t cap);

/* ---- helpers for checkers --------------------------------------------------- */

/* The value of parameter `name` at d's size; aborts on an unknown name (a
 * checker bug). */
int64_t rc_param(const rc_data *d, const char *name);
/* Input `input` of rank `rank`, element i (flat, row-major), as a double:
 * floats decoded exactly (bf16, f16, fp8 e4m3), integers converted. */
double rc_in(const rc_data *d, int rank, int input, int64_t i);
/* The same for an output, as the code under test wrote it. */
double rc_out(const rc_data *d, int rank, int output, int64_t i);

/* Round-to-nearest-even to a narrower type, returned as a double. */
double rc_round_bf16(double v);
double rc_round_f32(double v);
/* Saturating (to ±448) round-to-nearest-even to fp8 e4m3. */
double rc_round_fp8_e4m3(double v);
/* The spacing of representable numbers at |v| (one ulp): bf16 has 8
 * significant bits, fp32 24; below the normal range the subnormal spacing. */
double rc_ulp_bf16(double v);
double rc_ulp_f32(double v);
/* The error bound of a sum of `terms` values computed with bf16 partial
 * sums (as NCCL's ring does: each hop rounds): the final rounding, half an
 * ulp of |want|, plus half an ulp of abs_sum (the sum of the terms'
 * magnitudes, which bounds every partial sum) for each of the terms - 2
 * intermediate roundings. With 2 terms, exactly the final rounding. */
double rc_bf16_sum_tol(double want, double abs_sum, int terms);

/* ---- buffers and dumps (data.c) --------------------------------------------- */

/* Shapes of (size, world) and zeroed host buffers for every tensor of every
 * rank. Returns 0, or -1 with why. */
int rc_data_init(rc_data *d, const kv_problem *p, int size, int world, char *why, size_t cap);
void rc_data_free(rc_data *d);
/* Reads what `kevo baseline --dump DIR` wrote for d's size: every rank's
 * inputs and the outputs of `side` ("reference" or "candidate"); each file
 * must have exactly the tensor's size. Returns 0, or -1 with why. */
int rc_data_load_dump(rc_data *d, const char *dir, const char *side, char *why, size_t cap);

/* ---- encoding (tests that build dumps by hand) ---------------------------- */

/* Stores v into element i of a buffer of dtype t, rounding to nearest even
 * (integers: truncated toward zero). */
void rc_store(void *buf, kevo_dtype t, int64_t i, double v);
/* Loads element i of a buffer of dtype t as a double. */
double rc_load(const void *buf, kevo_dtype t, int64_t i);

#endif
