/* check.c — the host check of alltoall (include/kevo/check.h):
 * y_r[s*C + i] = x_s[r*C + i] with C = N/W, chunk r of every sender in
 * sender order, bit-exact. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t n = kevo_check_param(c, "N");
    if (n % c->world != 0 || c->outputs[0].numel != n)
        return kevo_check_fail(c, "y has %lld elements, expected N = %lld divisible by W = %d",
                               (long long)c->outputs[0].numel, (long long)n, c->world);
    const int64_t chunk = n / c->world;
    for (int s = 0; s < c->world; s++)
        for (int64_t i = 0; i < chunk; i++)
            c->want[0][s * chunk + i] =
                kevo_check_in(c, s, 0, (int64_t)c->rank * chunk + i); /* exact */
    return 0;
}
