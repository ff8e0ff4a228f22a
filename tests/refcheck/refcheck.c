/* refcheck.c — encoding values into a dtype, for tests that write outputs
 * by hand (refcheck.h). Rounding and decoding are check.h's. */
#include "refcheck/refcheck.h"

#include <math.h>
#include <string.h>

#include "kevo/check.h"

/* The bits of a value already representable in a small float of `ebits`
 * exponent and `mbits` stored mantissa bits; e4m3 has no infinities (they
 * saturate) and one NaN pattern, S.1111.111. */
static unsigned small_float_encode(double v, int ebits, int mbits, int e4m3)
{
    unsigned sign = signbit(v) ? 1u : 0u;
    unsigned all = (1u << ebits) - 1;
    unsigned out;
    if (isnan(v))
        out = e4m3 ? (all << mbits | ((1u << mbits) - 1)) : (all << mbits | 1u << (mbits - 1));
    else if (isinf(v))
        out = e4m3 ? (all << mbits | ((1u << mbits) - 2)) : all << mbits;
    else if (v == 0)
        out = 0;
    else {
        int bias = (1 << (ebits - 1)) - 1;
        int e;
        double m = frexp(fabs(v), &e); /* |v| = m 2^e */
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
    return kevo_check_load(buf, (kevo_check_dtype)t, i);
}

void rc_store(void *buf, kevo_dtype t, int64_t i, double v)
{
    switch (t) {
    case KEVO_BF16: {
        float f = (float)kevo_check_round_bf16(v); /* exact: 8 significant bits */
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        ((uint16_t *)buf)[i] = (uint16_t)(isnan(f) ? 0x7FC0u : u >> 16);
        break;
    }
    case KEVO_F16:
        ((uint16_t *)buf)[i] = (uint16_t)small_float_encode(kevo_check_round_f16(v), 5, 10, 0);
        break;
    case KEVO_F32: ((float *)buf)[i] = (float)v; break;
    case KEVO_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case KEVO_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case KEVO_FP8_E4M3:
        ((uint8_t *)buf)[i] = (uint8_t)small_float_encode(kevo_check_round_fp8_e4m3(v), 4, 3, 1);
        break;
    default: break;
    }
}
