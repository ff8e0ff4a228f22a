/* check.c — the host check of ulysses_seq_to_heads (include/kevo/check.h):
 * y_r[b, s·(S/W) + i, h, d] = x_s[b, i, r·(NH/W) + h, d], bit-exact. */
#include <kevo/check.h>
#include <math.h>

int kevo_check(kevo_check_call *c)
{
    const int64_t B = kevo_check_param(c, "B"), S = kevo_check_param(c, "S");
    const int64_t NH = kevo_check_param(c, "NH"), D = kevo_check_param(c, "D");
    const int W = c->world;
    const int64_t Sl = S / W, Hl = NH / W;
    for (int64_t b = 0; b < B; b++)
        for (int s = 0; s < W; s++)
            for (int64_t i = 0; i < Sl; i++)
                for (int64_t h = 0; h < Hl; h++)
                    for (int64_t x = 0; x < D; x++) {
                        const int64_t out = ((b * S + s * Sl + i) * Hl + h) * D + x;
                        const int64_t in = ((b * Sl + i) * NH + c->rank * Hl + h) * D + x;
                        c->want[0][out] = kevo_check_in(c, s, 0, in); /* tol stays 0 */
                    }
    return 0;
}
