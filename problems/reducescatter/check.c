/* check.c — the host check of reducescatter (include/kevo/check.h):
 * y_r[i] = Σ_s x_s[r*C + i] with C = N/W (block r of the sum lands on rank
 * r), within what bf16 partial sums can lose (the reference is a ring). */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t n = kevo_check_param(c, "N"), chunk = c->outputs[0].numel;
    if (n % c->world != 0 || chunk != n / c->world)
        return kevo_check_fail(c, "y has %lld elements, expected N/W = %lld/%d", (long long)chunk,
                               (long long)n, c->world);
    for (int64_t i = 0; i < chunk; i++) {
        double sum = 0, abs_sum = 0;
        for (int s = 0; s < c->world; s++) {
            const double v = kevo_check_in(c, s, 0, (int64_t)c->rank * chunk + i);
            sum += v;
            abs_sum += fabs(v);
        }
        c->want[0][i] = sum;
        c->tol[0][i] = kevo_check_bf16_sum_tol(sum, abs_sum, c->world);
    }
    return 0;
}
