/* check.c — the host check of vocab_parallel_cross_entropy
 * (include/kevo/check.h).
 *
 * loss[t] = log Σ_v exp(z[t, v]) - z[t, target[t]], where rank r holds
 * z[t, r·n .. r·n + n - 1] (n = V/W) as its logits[t, 0 .. n-1], on every
 * rank: the exact log-sum-exp of every row minus the target's logit.
 *
 * Tolerance, first order in the fp32 unit roundoff u = 2^-24, for
 * S = Σ exp(z - M) with M the row maximum (S >= 1), and loss = (log S + M) - z_t:
 *
 *  - each term exp(x), x = z - M <= 0: the fp32 subtraction errs by at most
 *    u·|x| (z and M are bf16), which moves exp by a relative u·|x|; __expf then
 *    errs by at most 2 + 1.173·|x| ulps (CUDA's documented bound; expf: 2), an
 *    ulp being at most 2u relative: (4 + 2.346·|x| + |x|)·u relative per term;
 *  - the sum: every term passes through at most D roundings of a partial sum,
 *    each at most u relative, with D = ceil(n / 128) (a thread of a CTA of at
 *    least 128 threads summing its share in sequence) + 10 (a tree over at most
 *    1024 threads) + W - 1 (the partial sums of the ranks, in any order);
 *  - so S carries a relative error r <= Σ_i t_i·(e_i + D·u) / S, and log S an
 *    absolute error of at most r / (1 - r); logf adds one ulp of log S, __logf
 *    at most 3 ulps or 2^-21.41 absolute: both are covered by 3 ulps + 2^-21.41;
 *  - log S + M and then - z_t are each rounded once: half an ulp of each.
 * The target's logit is exact (one rank holds it, bf16 is exact in fp32). */
#include <kevo/check.h>
#include <math.h>

#define U32 KEVO_CHECK_U_F32

int kevo_check(kevo_check_call *c)
{
    const int64_t T = kevo_check_param(c, "T"), V = kevo_check_param(c, "V");
    const int W = c->world;
    if (V % W != 0)
        return kevo_check_fail(c, "V = %lld is not a multiple of W = %d", (long long)V, W);
    const int64_t n = V / W;
    const double depth = (double)((n + 127) / 128) + 10 + (W - 1);
    for (int64_t t = 0; t < T; t++) {
        const double tg = kevo_check_in(c, 0, 1, t);
        for (int r = 1; r < W; r++)
            if (kevo_check_in(c, r, 1, t) != tg)
                return kevo_check_fail(c,
                                       "targets[%lld] differs between rank 0 (%g) and rank %d (%g)",
                                       (long long)t, tg, r, kevo_check_in(c, r, 1, t));
        if (!(tg >= 0 && tg < (double)V))
            return kevo_check_fail(c, "targets[%lld] = %g is outside [0, %lld)", (long long)t, tg,
                                   (long long)V);
        double M = -INFINITY;
        for (int r = 0; r < W; r++)
            for (int64_t k = 0; k < n; k++) {
                const double z = kevo_check_in(c, r, 0, t * n + k);
                if (z > M)
                    M = z;
            }
        double S = 0, err = 0;
        for (int r = 0; r < W; r++)
            for (int64_t k = 0; k < n; k++) {
                const double x = kevo_check_in(c, r, 0, t * n + k) - M;
                const double term = exp(x);
                S += term;
                err += term * ((4 + 3.346 * fabs(x)) * U32 + depth * U32);
            }
        const int64_t v = (int64_t)tg;
        const double zt = kevo_check_in(c, (int)(v / n), 0, t * n + v % n);
        const double logS = log(S), lse = M + logS, want = lse - zt;
        const double rel = err / S;
        double tol = rel / (1 - rel);
        tol += 3 * kevo_check_ulp_f32(logS + tol) + ldexp(1, -21) * pow(2, -0.41);
        tol += 0.5 * kevo_check_ulp_f32(fabs(lse) + tol);
        tol += 0.5 * kevo_check_ulp_f32(fabs(want) + tol);
        c->want[0][t] = want;
        c->tol[0][t] = tol;
    }
    return 0;
}
