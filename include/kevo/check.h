/* check.h — the host check of a problem: what problems/<name>/check.c is
 * compiled against.
 *
 * A problem may ship check.c, C11 code that kevo compiles on the host with
 * the system C compiler into a shared object and loads with dlopen. It
 * defines, with C linkage,
 *
 *   int kevo_check(kevo_check_call *c);
 *
 * which computes, from the inputs of one call on every rank, what every
 * output element of rank c->rank should be (c->want, in double precision)
 * and how far from that a correct implementation may be (c->tol). kevo
 * then compares what a reference or candidate wrote:
 *
 *   |got - want| <= tol    (NaN on either side never passes)
 *
 * for the first c->valid[j] elements of every output j. The function
 * returns 0 when it filled c, KEVO_CHECK_SKIP when it does not check this
 * size (too large to compute on the host in reasonable time: decide from
 * the parameters and W alone, the same way for every rank), or -1 with a
 * reason in c->error (kevo_check_fail) for inputs the problem cannot have.
 *
 * Rules (docs/problems.md, "The host check"):
 *  - deterministic: the same inputs give the same want and tol, whatever
 *    ran before (no state kept between calls);
 *  - single-threaded, bounded in time and memory: it runs in a child
 *    process of kevo, stopped after KV_HOSTCHECK_TIMEOUT_S (900 s); a
 *    crash, an exit or a timeout fails the size, naming the rank;
 *  - it reads only what c gives it, writes only c->want, c->tol, c->valid
 *    and c->error, and frees whatever it allocates before returning;
 *  - one file: it includes this header (which brings <math.h>, <stdint.h>,
 *    <stddef.h>, <stdio.h>, <stdlib.h> and <string.h>) and system headers,
 *    nothing of its folder.
 *
 * Ownership: kevo owns every pointer in c (the names, the inputs' bytes,
 * want and tol); they are valid during the call only.
 *
 * Everything below the structs is static inline: a check needs no library
 * but libc and libm. */
#ifndef KEVO_CHECK_H
#define KEVO_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Incremented when the structs or the meaning of a field change; kevo sets
 * c->version to the version it was built with, and compiles check.c
 * against the same header. */
#define KEVO_CHECK_VERSION 1

#define KEVO_CHECK_SKIP 1 /* kevo_check's "this size is not checked" */

#define KEVO_CHECK_MAX_RANKS 8
#define KEVO_CHECK_MAX_TENSORS 8
#define KEVO_CHECK_MAX_PARAMS 16
#define KEVO_CHECK_MAX_DIMS 4
#define KEVO_CHECK_ERROR_MAX 512

#ifdef __cplusplus
extern "C" {
#endif

/* The dtypes of problem.json, with the values of kevo_dtype (kernel.h). */
typedef enum {
    KEVO_CHECK_BF16 = 0,
    KEVO_CHECK_F16 = 1,
    KEVO_CHECK_F32 = 2,
    KEVO_CHECK_I32 = 3,
    KEVO_CHECK_I64 = 4,
    KEVO_CHECK_FP8_E4M3 = 5,
} kevo_check_dtype;

/* One tensor of problem.json at this size and world. */
typedef struct {
    const char *name;
    kevo_check_dtype dtype;
    int ndim;
    int64_t shape[KEVO_CHECK_MAX_DIMS];     /* per rank, row-major, contiguous */
    int64_t numel;                          /* the product of shape */
    size_t bytes;                           /* numel times the element size */
    const void *data[KEVO_CHECK_MAX_RANKS]; /* inputs: rank r's raw bytes in dtype, for
                                               r < world; outputs: NULL (a check computes
                                               from the inputs alone) */
} kevo_check_tensor;

/* One call of kevo_check: the inputs of every rank, and what to fill for
 * one rank. */
typedef struct {
    int version;         /* KEVO_CHECK_VERSION of the caller */
    const char *problem; /* problem.json's "name" */
    const char *size;    /* the size's "name" */
    int validation;      /* 1 at the validation size */
    int world;           /* W, 2..8 */
    int rank;            /* the rank whose outputs to fill, 0..W-1 */
    int n_params;
    const char *param_names[KEVO_CHECK_MAX_PARAMS]; /* problem.json's "params" */
    int64_t param_values[KEVO_CHECK_MAX_PARAMS];    /* at this size */
    int n_inputs, n_outputs;
    kevo_check_tensor inputs[KEVO_CHECK_MAX_TENSORS];
    kevo_check_tensor outputs[KEVO_CHECK_MAX_TENSORS];

    /* Filled by kevo_check, for output j: */
    double *want[KEVO_CHECK_MAX_TENSORS];  /* outputs[j].numel values, zeroed */
    double *tol[KEVO_CHECK_MAX_TENSORS];   /* outputs[j].numel bounds, zeroed (exact) */
    int64_t valid[KEVO_CHECK_MAX_TENSORS]; /* leading elements compared; starts at
                                              numel, may be lowered (a row count) */
    char error[KEVO_CHECK_ERROR_MAX];      /* why -1 was returned (kevo_check_fail) */
    const char *missing_param;             /* set by kevo_check_param for a name the
                                              problem lacks; kevo reports it */
} kevo_check_call;

/* The function check.c defines. */
int kevo_check(kevo_check_call *c);

/* ---- parameters and errors ---------------------------------------------------- */

/* The value of parameter `name` at this size. A name the problem does not
 * have gives -1 and is recorded in c->missing_param: kevo then reports the
 * call as failed, naming it, whatever kevo_check returns. */
static inline int64_t kevo_check_param(kevo_check_call *c, const char *name)
{
    for (int i = 0; i < c->n_params; i++)
        if (strcmp(c->param_names[i], name) == 0)
            return c->param_values[i];
    if (!c->missing_param)
        c->missing_param = name;
    return -1;
}

/* Writes a printf-style reason into c->error and returns -1:
 * `return kevo_check_fail(c, "targets[%lld] = %g is out of range", ...);` */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline int
kevo_check_fail(kevo_check_call *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- number formats ----------------------------------------------------------- */

/* The unit roundoff (half an ulp of 1) of each floating-point format. */
#define KEVO_CHECK_U_BF16 (1.0 / 256.0)     /* 2^-8: 8 significant bits */
#define KEVO_CHECK_U_F16 (1.0 / 2048.0)     /* 2^-11 */
#define KEVO_CHECK_U_F32 (1.0 / 16777216.0) /* 2^-24 */
#define KEVO_CHECK_U_FP8_E4M3 (1.0 / 16.0)  /* 2^-4 */

/* A binary format: `digits` significant bits, smallest normal exponent emin
 * (2^emin), largest finite value. */
typedef struct {
    int digits, emin;
    double max;
} kevo_check_format;

static const kevo_check_format kevo_check_bf16_format = {8, -126, 3.3895313892515355e38};
static const kevo_check_format kevo_check_f16_format = {11, -14, 65504.0};
static const kevo_check_format kevo_check_f32_format = {24, -126, 3.4028234663852886e38};
static const kevo_check_format kevo_check_fp8_e4m3_format = {4, -6, 448.0};

/* The spacing of representable numbers at |v| (one ulp); below the normal
 * range the subnormal spacing (also for v = 0). */
static inline double kevo_check_ulp_in(const kevo_check_format *f, double v)
{
    int e = -100000;
    if (v != 0 && isfinite(v))
        (void)frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1): floor(log2 |v|) = e - 1 */
    int x = e - 1 > f->emin ? e - 1 : f->emin;
    return ldexp(1.0, x - (f->digits - 1));
}

/* Round to nearest even; past the largest finite value, infinity (IEEE) or,
 * with saturate, the largest finite value. */
static inline double kevo_check_round_in(const kevo_check_format *f, double v, int saturate)
{
    if (!isfinite(v) || v == 0)
        return v;
    double u = kevo_check_ulp_in(f, v);
    double r = nearbyint(v / u) * u; /* exact: u is a power of two */
    if (fabs(r) > f->max) {
        if (saturate)
            return r > 0 ? f->max : -f->max;
        return fabs(v) >= f->max + kevo_check_ulp_in(f, f->max) / 2 ? copysign(INFINITY, v)
                                                                    : copysign(f->max, v);
    }
    return r;
}

static inline double kevo_check_ulp_bf16(double v)
{
    return kevo_check_ulp_in(&kevo_check_bf16_format, v);
}
static inline double kevo_check_ulp_f16(double v)
{
    return kevo_check_ulp_in(&kevo_check_f16_format, v);
}
static inline double kevo_check_ulp_f32(double v)
{
    return kevo_check_ulp_in(&kevo_check_f32_format, v);
}
static inline double kevo_check_round_bf16(double v)
{
    return kevo_check_round_in(&kevo_check_bf16_format, v, 0);
}
static inline double kevo_check_round_f16(double v)
{
    return kevo_check_round_in(&kevo_check_f16_format, v, 0);
}
static inline double kevo_check_round_f32(double v)
{
    return kevo_check_round_in(&kevo_check_f32_format, v, 0);
}
/* Saturating (to ±448) round to nearest even, as __NV_SATFINITE converts. */
static inline double kevo_check_round_fp8_e4m3(double v)
{
    return kevo_check_round_in(&kevo_check_fp8_e4m3_format, v, 1);
}

/* The error bound of a sum of `terms` values computed with bf16 partial
 * sums (as NCCL's ring does: each hop rounds): half an ulp of |want| for
 * the final rounding, plus half an ulp of abs_sum (the sum of the terms'
 * magnitudes, which bounds every partial sum) for each of the terms - 2
 * roundings before it. With 2 terms, exactly the final rounding. */
static inline double kevo_check_bf16_sum_tol(double want, double abs_sum, int terms)
{
    double tol = 0.5 * kevo_check_ulp_bf16(want);
    if (terms > 2)
        tol += (terms - 2) * 0.5 * kevo_check_ulp_bf16(abs_sum);
    return tol;
}

/* ---- reading elements ---------------------------------------------------------- */

/* A small float of `ebits` exponent and `mbits` stored mantissa bits; e4m3
 * has no infinities, its all-ones pattern (S.1111.111) is NaN. */
static inline double kevo_check_small_float(unsigned bits, int ebits, int mbits, int e4m3)
{
    unsigned sign = bits >> (ebits + mbits) & 1;
    unsigned ex = bits >> mbits & ((1u << ebits) - 1);
    unsigned man = bits & ((1u << mbits) - 1);
    int bias = (1 << (ebits - 1)) - 1;
    double v;
    if (e4m3 && ex == (1u << ebits) - 1 && man == (1u << mbits) - 1)
        v = NAN;
    else if (!e4m3 && ex == (1u << ebits) - 1)
        v = man ? NAN : INFINITY;
    else if (ex == 0)
        v = ldexp((double)man, 1 - bias - mbits);
    else
        v = ldexp((double)(man | 1u << mbits), (int)ex - bias - mbits);
    return sign ? -v : v;
}

/* Element i (flat, row-major) of a buffer of dtype t, as a double: floats
 * exactly, integers converted (i64 beyond 2^53 rounded); NaN for an unknown
 * dtype. */
static inline double kevo_check_load(const void *buf, kevo_check_dtype t, int64_t i)
{
    switch (t) {
    case KEVO_CHECK_BF16: {
        uint16_t h;
        memcpy(&h, (const unsigned char *)buf + 2 * i, 2);
        uint32_t u = (uint32_t)h << 16; /* bf16 is the top half of an fp32 */
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case KEVO_CHECK_F16: {
        uint16_t h;
        memcpy(&h, (const unsigned char *)buf + 2 * i, 2);
        return kevo_check_small_float(h, 5, 10, 0);
    }
    case KEVO_CHECK_F32: {
        float f;
        memcpy(&f, (const unsigned char *)buf + 4 * i, 4);
        return f;
    }
    case KEVO_CHECK_I32: {
        int32_t v;
        memcpy(&v, (const unsigned char *)buf + 4 * i, 4);
        return v;
    }
    case KEVO_CHECK_I64: {
        int64_t v;
        memcpy(&v, (const unsigned char *)buf + 8 * i, 8);
        return (double)v;
    }
    case KEVO_CHECK_FP8_E4M3:
        return kevo_check_small_float(((const unsigned char *)buf)[i], 4, 3, 1);
    }
    return NAN;
}

/* Element i of input `input` of rank `rank`, as a double. */
static inline double kevo_check_in(const kevo_check_call *c, int rank, int input, int64_t i)
{
    return kevo_check_load(c->inputs[input].data[rank], c->inputs[input].dtype, i);
}

#ifdef __cplusplus
}
#endif

#endif
