/* long_tail.c — host checkers of the vocabulary-parallel, FSDP and convolution
 * problems: vocab_parallel_cross_entropy, fp8_allgather, halo_conv1d.
 *
 * Each recomputes its outputs from the definition in problem.json, in double,
 * from the inputs of every rank:
 *
 *  - vocab_parallel_cross_entropy: the exact log-sum-exp of every row minus
 *    the target's logit; the tolerance bounds an fp32 implementation that
 *    shifts by the row maximum, uses __expf or expf, sums with GPU-style
 *    reductions and applies logf or __logf (derived below);
 *  - fp8_allgather: the quantisation in exactly the fp32 steps the problem
 *    prescribes (every rounding reproduced), so the tolerance is 0;
 *  - halo_conv1d: the exact 7-tap sum; the tolerance is fp32 accumulation of
 *    7 exact products plus one rounding to bf16. */
#include <math.h>
#include <stdio.h>

#include "refcheck/checkers.h"

#define U32 (1.0 / 16777216.0) /* 2^-24: the unit roundoff of fp32 */

/* ---- vocab_parallel_cross_entropy ------------------------------------------------ */

/* loss[t] = log Σ_v exp(z[t, v]) - z[t, target[t]], where rank r holds
 * z[t, r·n .. r·n + n - 1] (n = V/W) as its logits[t, 0 .. n-1], on every rank.
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
RC_CHECKER(vocab_parallel_cross_entropy)
{
    (void)rank;
    const int64_t T = rc_param(d, "T"), V = rc_param(d, "V");
    const int W = d->world;
    if (V % W != 0) {
        snprintf(why, cap, "V = %lld is not a multiple of W = %d", (long long)V, W);
        return -1;
    }
    const int64_t n = V / W;
    const double depth = (double)((n + 127) / 128) + 10 + (W - 1);
    for (int64_t t = 0; t < T; t++) {
        const double tg = rc_in(d, 0, 1, t);
        for (int r = 1; r < W; r++)
            if (rc_in(d, r, 1, t) != tg) {
                snprintf(why, cap, "targets[%lld] differs between rank 0 (%g) and rank %d (%g)",
                         (long long)t, tg, r, rc_in(d, r, 1, t));
                return -1;
            }
        if (!(tg >= 0 && tg < (double)V)) {
            snprintf(why, cap, "targets[%lld] = %g is outside [0, %lld)", (long long)t, tg,
                     (long long)V);
            return -1;
        }
        double M = -INFINITY;
        for (int r = 0; r < W; r++)
            for (int64_t k = 0; k < n; k++) {
                const double z = rc_in(d, r, 0, t * n + k);
                if (z > M)
                    M = z;
            }
        double S = 0, err = 0;
        for (int r = 0; r < W; r++)
            for (int64_t k = 0; k < n; k++) {
                const double x = rc_in(d, r, 0, t * n + k) - M;
                const double term = exp(x);
                S += term;
                err += term * ((4 + 3.346 * fabs(x)) * U32 + depth * U32);
            }
        const int64_t v = (int64_t)tg;
        const double zt = rc_in(d, (int)(v / n), 0, t * n + v % n);
        const double logS = log(S), lse = M + logS, want = lse - zt;
        const double rel = err / S;
        double tol = rel / (1 - rel);
        tol += 3 * rc_ulp_f32(logS + tol) + ldexp(1, -21) * pow(2, -0.41);
        tol += 0.5 * rc_ulp_f32(fabs(lse) + tol);
        tol += 0.5 * rc_ulp_f32(fabs(want) + tol);
        e->want[0][t] = want;
        e->tol[0][t] = tol;
    }
    return 0;
}

/* ---- fp8_allgather --------------------------------------------------------------- */

/* On every rank, for every rank r's shard and each block of 128 elements (the
 * last one short): s = fp32(amax / 448) (1 when amax = 0) and
 * q = e4m3_satfinite(fp32(x / s)), both divisions IEEE round-to-nearest-even in
 * fp32. The double quotient of two floats rounded to fp32 is that correctly
 * rounded fp32 quotient: double rounding from 53 to 24 bits is innocuous for a
 * quotient because 53 >= 2·24 + 2 (Figueroa), subnormal results included (they
 * have fewer bits still). So every value is reproduced exactly: tolerance 0. */
RC_CHECKER(fp8_allgather)
{
    (void)rank;
    (void)why;
    (void)cap;
    const int64_t N = rc_param(d, "N"), nb = (N + 127) / 128;
    for (int r = 0; r < d->world; r++)
        for (int64_t b = 0; b < nb; b++) {
            const int64_t lo = b * 128, hi = lo + 128 < N ? lo + 128 : N;
            double amax = 0;
            for (int64_t i = lo; i < hi; i++)
                amax = fmax(amax, fabs(rc_in(d, r, 0, i)));
            const double s = amax == 0 ? 1.0 : rc_round_f32(amax / 448.0);
            e->want[1][r * nb + b] = s;
            e->tol[1][r * nb + b] = 0;
            for (int64_t i = lo; i < hi; i++) {
                e->want[0][r * N + i] = rc_round_fp8_e4m3(rc_round_f32(rc_in(d, r, 0, i) / s));
                e->tol[0][r * N + i] = 0;
            }
        }
    return 0;
}

/* ---- halo_conv1d ----------------------------------------------------------------- */

/* y[c, l] = Σ_j w[c, j] · x[c, p + j - 3] for this rank's global positions
 * p = rank·n + l (n = L/W), with x = 0 outside [0, L); rank q holds positions
 * q·n .. q·n + n - 1. The 7 products of bf16 values are exact in fp32; summing
 * them in fp32 in any order (FMA or not) errs by at most γ6·Σ|w·x|
 * (γ6 = 6u / (1 - 6u)), and the one rounding to bf16 adds half an ulp of the
 * fp32 value, which is at most |want| + that error. */
RC_CHECKER(halo_conv1d)
{
    const int64_t C = rc_param(d, "C"), L = rc_param(d, "L");
    const int W = d->world;
    if (L % W != 0) {
        snprintf(why, cap, "L = %lld is not a multiple of W = %d", (long long)L, W);
        return -1;
    }
    const int64_t n = L / W;
    for (int64_t i = 0; i < C * 7; i++)
        for (int r = 0; r < W; r++)
            if (rc_in(d, r, 1, i) != rc_in(d, rank, 1, i)) {
                snprintf(why, cap, "w[%lld] differs between rank %d and rank %d",
                         (long long)i, rank, r);
                return -1;
            }
    const double gamma6 = 6 * U32 / (1 - 6 * U32);
    for (int64_t c = 0; c < C; c++)
        for (int64_t l = 0; l < n; l++) {
            const int64_t p = (int64_t)rank * n + l;
            double sum = 0, abs_sum = 0;
            for (int j = 0; j < 7; j++) {
                const int64_t q = p + j - 3;
                if (q < 0 || q >= L)
                    continue;
                const double prod =
                    rc_in(d, rank, 1, c * 7 + j) * rc_in(d, (int)(q / n), 0, c * n + q % n);
                sum += prod;
                abs_sum += fabs(prod);
            }
            const double acc = gamma6 * abs_sum;
            e->want[0][c * n + l] = sum;
            e->tol[0][c * n + l] = acc + 0.5 * rc_ulp_bf16(fabs(sum) + acc);
        }
    return 0;
}
