/* refcheck.c — number formats, the comparison of a call's outputs with a
 * checker's expectations, and the helpers checkers use (refcheck.h). */
#include "refcheck/refcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- number formats ---------------------------------------------------------- */

/* A binary floating-point format: `digits` significant bits, smallest
 * normal exponent emin (2^emin), largest finite value. */
typedef struct {
    int digits, emin;
    double max;
} fp_format;

static const fp_format BF16 = {8, -126, 3.3895313892515355e38};
static const fp_format F16 = {11, -14, 65504.0};
static const fp_format F32 = {24, -126, 3.4028234663852886e38};
static const fp_format FP8_E4M3 = {4, -6, 448.0};

static double ulp_in(const fp_format *f, double v)
{
    int e = -100000;
    if (v != 0 && isfinite(v))
        (void)frexp(fabs(v), &e); /* |v| = m * 2^e, m in [0.5, 1): floor(log2 |v|) = e - 1 */
    int exp = e - 1 > f->emin ? e - 1 : f->emin;
    return ldexp(1.0, exp - (f->digits - 1));
}

/* Round to nearest even; saturate instead of overflowing when asked. */
static double round_in(const fp_format *f, double v, int saturate)
{
    if (!isfinite(v) || v == 0)
        return v;
    double u = ulp_in(f, v);
    double r = nearbyint(v / u) * u; /* exact: u is a power of two; default mode is nearest even */
    if (fabs(r) > f->max) {
        if (saturate)
            return r > 0 ? f->max : -f->max;
        /* IEEE: overflow to infinity only from half an ulp past the largest finite */
        return fabs(v) >= f->max + ulp_in(f, f->max) / 2 ? copysign(INFINITY, v)
                                                          : copysign(f->max, v);
    }
    return r;
}

double rc_round_bf16(double v) { return round_in(&BF16, v, 0); }
double rc_round_f32(double v) { return round_in(&F32, v, 0); }
double rc_round_fp8_e4m3(double v) { return round_in(&FP8_E4M3, v, 1); }
double rc_ulp_bf16(double v) { return ulp_in(&BF16, v); }
double rc_ulp_f32(double v) { return ulp_in(&F32, v); }

double rc_bf16_sum_tol(double want, double abs_sum, int terms)
{
    double tol = 0.5 * rc_ulp_bf16(want);
    if (terms > 2)
        tol += (terms - 2) * 0.5 * rc_ulp_bf16(abs_sum);
    return tol;
}

/* Decoding. bf16 is the top half of an fp32. */
static double bf16_decode(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Formats with `ebits` exponent bits and `mbits` stored mantissa bits. e4m3
 * has no infinities: its all-ones pattern (S.1111.111) is NaN. */
static double small_float_decode(unsigned bits, int ebits, int mbits, int e4m3)
{
    unsigned sign = bits >> (ebits + mbits) & 1;
    unsigned exp = bits >> mbits & ((1u << ebits) - 1);
    unsigned man = bits & ((1u << mbits) - 1);
    int bias = (1 << (ebits - 1)) - 1;
    double v;
    if (e4m3 && exp == (1u << ebits) - 1 && man == (1u << mbits) - 1)
        v = NAN;
    else if (!e4m3 && exp == (1u << ebits) - 1)
        v = man ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexp((double)man, 1 - bias - mbits);
    else
        v = ldexp((double)(man | 1u << mbits), (int)exp - bias - mbits);
    return sign ? -v : v;
}

static unsigned small_float_encode(double v, int ebits, int mbits, int e4m3)
{
    unsigned sign = signbit(v) ? 1u : 0u;
    unsigned all = (1u << ebits) - 1;
    unsigned out;
    if (isnan(v))
        out = e4m3 ? (all << mbits | ((1u << mbits) - 1)) : (all << mbits | 1u << (mbits - 1));
    else if (isinf(v))
        out = e4m3 ? (all << mbits | ((1u << mbits) - 2)) : all << mbits; /* e4m3: saturate */
    else if (v == 0)
        out = 0;
    else {
        int bias = (1 << (ebits - 1)) - 1;
        int e;
        double m = frexp(fabs(v), &e); /* |v| = m 2^e; the value is already representable */
        int exp = e - 1 + bias;
        if (exp <= 0) /* subnormal */
            out = (unsigned)ldexp(fabs(v), bias - 1 + mbits);
        else
            out = (unsigned)exp << mbits | ((unsigned)ldexp(m, mbits + 1) & ((1u << mbits) - 1));
    }
    return sign << (ebits + mbits) | out;
}

double rc_load(const void *buf, kevo_dtype t, int64_t i)
{
    switch (t) {
    case KEVO_BF16: return bf16_decode(((const uint16_t *)buf)[i]);
    case KEVO_F16: return small_float_decode(((const uint16_t *)buf)[i], 5, 10, 0);
    case KEVO_F32: return ((const float *)buf)[i];
    case KEVO_I32: return ((const int32_t *)buf)[i];
    case KEVO_I64: return (double)((const int64_t *)buf)[i];
    case KEVO_FP8_E4M3: return small_float_decode(((const uint8_t *)buf)[i], 4, 3, 1);
    default: return NAN;
    }
}

void rc_store(void *buf, kevo_dtype t, int64_t i, double v)
{
    switch (t) {
    case KEVO_BF16: {
        float f = (float)rc_round_bf16(v); /* exact: the value has 8 significant bits */
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        ((uint16_t *)buf)[i] = (uint16_t)(isnan(f) ? 0x7FC0u : u >> 16);
        break;
    }
    case KEVO_F16:
        ((uint16_t *)buf)[i] = (uint16_t)small_float_encode(round_in(&F16, v, 0), 5, 10, 0);
        break;
    case KEVO_F32: ((float *)buf)[i] = (float)v; break;
    case KEVO_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case KEVO_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case KEVO_FP8_E4M3:
        ((uint8_t *)buf)[i] = (uint8_t)small_float_encode(rc_round_fp8_e4m3(v), 4, 3, 1);
        break;
    default: break;
    }
}

/* ---- accessors ----------------------------------------------------------------- */

int64_t rc_param(const rc_data *d, const char *name)
{
    for (int i = 0; i < d->p->n_params; i++)
        if (strcmp(d->p->param_names[i], name) == 0)
            return d->p->sizes[d->size].values[i];
    fprintf(stderr, "refcheck: problem %s has no parameter %s (a checker bug)\n", d->p->name,
            name);
    abort();
}

double rc_in(const rc_data *d, int rank, int input, int64_t i)
{
    return rc_load(d->in[rank][input], d->p->inputs[input].dtype, i);
}

double rc_out(const rc_data *d, int rank, int output, int64_t i)
{
    return rc_load(d->out[rank][output], d->p->outputs[output].dtype, i);
}

/* ---- the comparison -------------------------------------------------------------- */

static void expect_free(rc_expect *e, int n)
{
    for (int j = 0; j < n; j++) {
        free(e->want[j]);
        free(e->tol[j]);
    }
    memset(e, 0, sizeof *e);
}

static int expect_alloc(const rc_data *d, rc_expect *e)
{
    memset(e, 0, sizeof *e);
    for (int j = 0; j < d->p->n_outputs; j++) {
        size_t n = (size_t)d->out_shape[j].numel;
        e->want[j] = calloc(n ? n : 1, sizeof(double));
        e->tol[j] = calloc(n ? n : 1, sizeof(double));
        e->valid[j] = d->out_shape[j].numel;
        if (!e->want[j] || !e->tol[j]) {
            expect_free(e, d->p->n_outputs);
            return -1;
        }
    }
    return 0;
}

/* Row and column of flat index i, for messages. */
static void where(const kv_shape *s, int64_t i, char *out, size_t cap)
{
    int64_t idx[KEVO_MAX_DIMS];
    for (int k = s->ndim - 1; k >= 0; k--) {
        idx[k] = i % s->shape[k];
        i /= s->shape[k];
    }
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int k = 0; k < s->ndim && o < cap; k++)
        o += (size_t)snprintf(out + o, cap - o, "%s%lld", k ? ", " : "", (long long)idx[k]);
    if (o < cap)
        snprintf(out + o, cap - o, "]");
}

static void compare_rank(const rc_data *d, int rank, const rc_expect *e, rc_outcome *out)
{
    for (int j = 0; j < d->p->n_outputs; j++) {
        int64_t n = e->valid[j];
        if (n < 0 || n > d->out_shape[j].numel)
            n = d->out_shape[j].numel;
        for (int64_t i = 0; i < n; i++) {
            double got = rc_out(d, rank, j, i);
            double want = e->want[j][i], tol = e->tol[j][i];
            double err = fabs(got - want);
            int ok = !isnan(got) && !isnan(want) && err <= tol;
            out->checked++;
            if (ok) {
                double ratio = tol > 0 ? err / tol : 0;
                if (ratio > out->worst_ratio)
                    out->worst_ratio = ratio;
                continue;
            }
            out->failed++;
            if (!out->first[0]) {
                char at[96];
                where(&d->out_shape[j], i, at, sizeof at);
                snprintf(out->first, sizeof out->first,
                         "rank %d, %s%s: got %.9g, want %.9g (error %.3g, tolerance %.3g)", rank,
                         d->p->outputs[j].name, at, got, want, err, tol);
            }
        }
    }
}

int rc_check(const rc_data *d, rc_outcome *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    const rc_checker *c = rc_find(d->p->name);
    if (!c) {
        snprintf(why, cap, "no host checker for problem %s (tests/refcheck/registry.c)",
                 d->p->name);
        return -1;
    }
    for (int rank = 0; rank < d->world; rank++) {
        rc_expect e;
        if (expect_alloc(d, &e) != 0) {
            snprintf(why, cap, "out of memory");
            return -1;
        }
        if (c->expect(d, rank, &e, why, cap) != 0) {
            expect_free(&e, d->p->n_outputs);
            return -1;
        }
        compare_rank(d, rank, &e, out);
        expect_free(&e, d->p->n_outputs);
    }
    return out->failed ? 1 : 0;
}
