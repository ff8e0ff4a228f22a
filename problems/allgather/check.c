/* check.c — the host check of allgather (include/kevo/check.h):
 * y[s*N + i] = x_s[i], every rank's shard in rank order, bit-exact. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t n = kevo_check_param(c, "N");
    if (c->outputs[0].numel != c->world * n)
        return kevo_check_fail(c, "y has %lld elements, expected W*N = %lld",
                               (long long)c->outputs[0].numel, (long long)(c->world * n));
    for (int s = 0; s < c->world; s++)
        for (int64_t i = 0; i < n; i++)
            c->want[0][s * n + i] = kevo_check_in(c, s, 0, i); /* tol stays 0: exact */
    return 0;
}
