/* check.c — the host check of fp8_allgather (include/kevo/check.h).
 *
 * On every rank, for every rank r's shard and each block of 128 elements (the
 * last one short): s = fp32(amax / 448) (1 when amax = 0) and
 * q = e4m3_satfinite(fp32(x / s)), both divisions IEEE round-to-nearest-even in
 * fp32. The double quotient of two floats rounded to fp32 is that correctly
 * rounded fp32 quotient: double rounding from 53 to 24 bits is innocuous for a
 * quotient because 53 >= 2·24 + 2 (Figueroa), subnormal results included (they
 * have fewer bits still). So every value is reproduced exactly: tolerance 0
 * (on values: the evaluator, which compares bits, also tells -0 from 0). */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t N = kevo_check_param(c, "N"), nb = (N + 127) / 128;
    for (int r = 0; r < c->world; r++)
        for (int64_t b = 0; b < nb; b++) {
            const int64_t lo = b * 128, hi = lo + 128 < N ? lo + 128 : N;
            double amax = 0;
            for (int64_t i = lo; i < hi; i++)
                amax = fmax(amax, fabs(kevo_check_in(c, r, 0, i)));
            const double s = amax == 0 ? 1.0 : kevo_check_round_f32(amax / 448.0);
            c->want[1][r * nb + b] = s;
            for (int64_t i = lo; i < hi; i++)
                c->want[0][r * N + i] =
                    kevo_check_round_fp8_e4m3(kevo_check_round_f32(kevo_check_in(c, r, 0, i) / s));
        }
    return 0;
}
