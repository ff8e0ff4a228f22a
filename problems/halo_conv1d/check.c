/* check.c — the host check of halo_conv1d (include/kevo/check.h).
 *
 * y[c, l] = Σ_j w[c, j] · x[c, p + j - 3] for this rank's global positions
 * p = rank·n + l (n = L/W), with x = 0 outside [0, L); rank q holds positions
 * q·n .. q·n + n - 1. The 7 products of bf16 values are exact in fp32; summing
 * them in fp32 in any order (FMA or not) errs by at most γ6·Σ|w·x|
 * (γ6 = 6u / (1 - 6u)), and the one rounding to bf16 adds half an ulp of the
 * fp32 value, which is at most |want| + that error. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t C = kevo_check_param(c, "C"), L = kevo_check_param(c, "L");
    const int W = c->world, rank = c->rank;
    if (L % W != 0)
        return kevo_check_fail(c, "L = %lld is not a multiple of W = %d", (long long)L, W);
    const int64_t n = L / W;
    for (int64_t i = 0; i < C * 7; i++)
        for (int r = 0; r < W; r++)
            if (kevo_check_in(c, r, 1, i) != kevo_check_in(c, rank, 1, i))
                return kevo_check_fail(c, "w[%lld] differs between rank %d and rank %d",
                                       (long long)i, rank, r);
    const double gamma6 = 6 * KEVO_CHECK_U_F32 / (1 - 6 * KEVO_CHECK_U_F32);
    for (int64_t ch = 0; ch < C; ch++)
        for (int64_t l = 0; l < n; l++) {
            const int64_t p = (int64_t)rank * n + l;
            double sum = 0, abs_sum = 0;
            for (int j = 0; j < 7; j++) {
                const int64_t q = p + j - 3;
                if (q < 0 || q >= L)
                    continue;
                const double prod = kevo_check_in(c, rank, 1, ch * 7 + j) *
                                    kevo_check_in(c, (int)(q / n), 0, ch * n + q % n);
                sum += prod;
                abs_sum += fabs(prod);
            }
            const double acc = gamma6 * abs_sum;
            c->want[0][ch * n + l] = sum;
            c->tol[0][ch * n + l] = acc + 0.5 * kevo_check_ulp_bf16(fabs(sum) + acc);
        }
    return 0;
}
