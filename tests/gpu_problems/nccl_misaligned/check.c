/* check.c — the host check of nccl_misaligned (include/kevo/check.h):
 * ids_all[r*G + i] = ids of rank r at i; y[i] = the sum over ranks of x at
 * rank*N + i, in double. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t G = kevo_check_param(c, "G"), N = kevo_check_param(c, "N");
    for (int64_t i = 0; i < c->world * G; i++) {
        c->want[0][i] = kevo_check_in(c, (int)(i / G), 0, i % G);
        c->tol[0][i] = 0;
    }
    for (int64_t i = 0; i < N; i++) {
        double sum = 0, abs_sum = 0;
        for (int r = 0; r < c->world; r++) {
            const double v = kevo_check_in(c, r, 1, c->rank * N + i);
            sum += v;
            abs_sum += fabs(v);
        }
        c->want[1][i] = sum;
        c->tol[1][i] = kevo_check_bf16_sum_tol(sum, abs_sum, c->world);
    }
    return 0;
}
