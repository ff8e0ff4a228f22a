/* collectives.c — host checkers of the collectives: allreduce, allgather,
 * reducescatter, alltoall, broadcast. */
#include <math.h>
#include <stdio.h>

#include "refcheck/checkers.h"

/* y = Σ_r x_r on every rank. */
RC_CHECKER(allreduce)
{
    (void)why;
    (void)cap;
    (void)rank;
    int64_t n = d->out_shape[0].numel;
    for (int64_t i = 0; i < n; i++) {
        double sum = 0, abs_sum = 0;
        for (int r = 0; r < d->world; r++) {
            double v = rc_in(d, r, 0, i);
            sum += v;
            abs_sum += fabs(v);
        }
        e->want[0][i] = sum;
        e->tol[0][i] = rc_bf16_sum_tol(sum, abs_sum, d->world);
    }
    return 0;
}

/* y[s*N + i] = x_s[i]: every rank's shard, in rank order. Bit-exact. */
RC_CHECKER(allgather)
{
    (void)rank;
    int64_t n = rc_param(d, "N");
    if (d->out_shape[0].numel != (int64_t)d->world * n) {
        snprintf(why, cap, "allgather: y has %lld elements, expected W*N = %lld",
                 (long long)d->out_shape[0].numel, (long long)d->world * n);
        return -1;
    }
    for (int s = 0; s < d->world; s++)
        for (int64_t i = 0; i < n; i++) {
            e->want[0][s * n + i] = rc_in(d, s, 0, i);
            e->tol[0][s * n + i] = 0;
        }
    return 0;
}

/* y_r[i] = Σ_s x_s[r*C + i], C = N/W: block r of the sum lands on rank r.
 * The reference (a ring) keeps bf16 partial sums, as allreduce's does. */
RC_CHECKER(reducescatter)
{
    int64_t n = rc_param(d, "N");
    int64_t c = d->out_shape[0].numel;
    if (n % d->world != 0 || c != n / d->world) {
        snprintf(why, cap, "reducescatter: y has %lld elements, expected N/W = %lld/%d",
                 (long long)c, (long long)n, d->world);
        return -1;
    }
    for (int64_t i = 0; i < c; i++) {
        double sum = 0, abs_sum = 0;
        for (int s = 0; s < d->world; s++) {
            double v = rc_in(d, s, 0, (int64_t)rank * c + i);
            sum += v;
            abs_sum += fabs(v);
        }
        e->want[0][i] = sum;
        e->tol[0][i] = rc_bf16_sum_tol(sum, abs_sum, d->world);
    }
    return 0;
}

/* y_r[s*C + i] = x_s[r*C + i], C = N/W: chunk r of every sender, in sender
 * order. Bit-exact. */
RC_CHECKER(alltoall)
{
    int64_t n = rc_param(d, "N");
    if (n % d->world != 0 || d->out_shape[0].numel != n) {
        snprintf(why, cap, "alltoall: y has %lld elements, expected N = %lld divisible by W = %d",
                 (long long)d->out_shape[0].numel, (long long)n, d->world);
        return -1;
    }
    int64_t c = n / d->world;
    for (int s = 0; s < d->world; s++)
        for (int64_t i = 0; i < c; i++) {
            e->want[0][s * c + i] = rc_in(d, s, 0, (int64_t)rank * c + i);
            e->tol[0][s * c + i] = 0;
        }
    return 0;
}

/* y = x_0 on every rank (the other ranks' x is ignored). Bit-exact. */
RC_CHECKER(broadcast)
{
    (void)rank;
    int64_t n = rc_param(d, "N");
    if (d->out_shape[0].numel != n) {
        snprintf(why, cap, "broadcast: y has %lld elements, expected N = %lld",
                 (long long)d->out_shape[0].numel, (long long)n);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        e->want[0][i] = rc_in(d, 0, 0, i);
        e->tol[0][i] = 0;
    }
    return 0;
}
