/* check.c — the host check of tp_rmsnorm (include/kevo/check.h):
 * y_r[t][c] = x_r[t][c] · γ_r[c] / sqrt(Σ_s Σ_c' x_s[t][c']² / H + 1e-6),
 * the RMS over the whole row of H columns, of which rank r holds H/W. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t rows = kevo_check_param(c, "T"), H = kevo_check_param(c, "H");
    const int64_t hw = H / c->world;
    /* fp32 relative error of a correct kernel before the bf16 rounding: the
     * sum of H squares (exact in fp32) in any order, at most (H - 1) u,
     * halved by the square root; the division by H, the + eps and the two
     * multiplications, u each; rsqrtf, 2 ulp = 4 u at most; the sum over
     * ranks is part of the H - 1 additions. (H/2 + 16) u covers it all. */
    const double rel = ((double)H / 2 + 16) * KEVO_CHECK_U_F32;
    for (int64_t t = 0; t < rows; t++) {
        double ss = 0;
        for (int s = 0; s < c->world; s++)
            for (int64_t k = 0; k < hw; k++) {
                const double v = kevo_check_in(c, s, 0, t * hw + k);
                ss += v * v;
            }
        const double rstd = 1.0 / sqrt(ss / (double)H + 1e-6);
        for (int64_t k = 0; k < hw; k++) {
            const double y =
                kevo_check_in(c, c->rank, 0, t * hw + k) * rstd * kevo_check_in(c, c->rank, 1, k);
            const double f = fabs(y) * rel;
            c->want[0][t * hw + k] = y;
            c->tol[0][t * hw + k] = f + 0.5 * kevo_check_ulp_bf16(fabs(y) + f);
        }
    }
    return 0;
}
