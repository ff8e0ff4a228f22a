/* check.c — the host check of broadcast (include/kevo/check.h): y = x_0 on
 * every rank (the other ranks' x is ignored), bit-exact. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t n = kevo_check_param(c, "N");
    if (c->outputs[0].numel != n)
        return kevo_check_fail(c, "y has %lld elements, expected N = %lld",
                               (long long)c->outputs[0].numel, (long long)n);
    for (int64_t i = 0; i < n; i++)
        c->want[0][i] = kevo_check_in(c, 0, 0, i); /* tol stays 0: exact */
    return 0;
}
