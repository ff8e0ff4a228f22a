/* check.c — the host check of allreduce (include/kevo/check.h): y = Σ_r x_r
 * on every rank, in double, within what bf16 partial sums can lose. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t n = c->outputs[0].numel;
    for (int64_t i = 0; i < n; i++) {
        double sum = 0, abs_sum = 0;
        for (int r = 0; r < c->world; r++) {
            const double v = kevo_check_in(c, r, 0, i);
            sum += v;
            abs_sum += fabs(v);
        }
        c->want[0][i] = sum;
        /* NCCL's ring rounds every partial sum to bf16 */
        c->tol[0][i] = kevo_check_bf16_sum_tol(sum, abs_sum, c->world);
    }
    return 0;
}
