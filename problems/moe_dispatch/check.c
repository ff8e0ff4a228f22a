/* check.c — the host check of moe_dispatch (include/kevo/check.h).
 *
 * E experts, L = E/W per rank (global expert e is local expert e % L of rank
 * e / L). Rank q receives x_s[t] once for each of its local experts l that
 * token t of rank s is routed to (topk_ids_s[t] holds q·L + l), rows ordered
 * by (l, s, t); counts[l] is the number of rows of expert l. Only the first
 * Σ counts rows of recv_x are valid. Bit-exact. */
#include <kevo/check.h>
#include <math.h>

/* Reads rank `rank`'s [rows, k] routing table into ids and checks it: every
 * id in [0, E), none repeated within a row. */
static int read_routing(kevo_check_call *c, int rank, int64_t rows, int64_t k, int64_t E,
                        int64_t *ids)
{
    for (int64_t g = 0; g < rows; g++)
        for (int64_t j = 0; j < k; j++) {
            const double v = kevo_check_in(c, rank, 1, g * k + j);
            if (!(v >= 0 && v < (double)E))
                return kevo_check_fail(c, "rank %d: topk_ids[%lld][%lld] = %g is outside [0, %lld)",
                                       rank, (long long)g, (long long)j, v, (long long)E);
            ids[g * k + j] = (int64_t)v;
            for (int64_t i = 0; i < j; i++)
                if (ids[g * k + i] == ids[g * k + j])
                    return kevo_check_fail(c, "rank %d: topk_ids[%lld] repeats expert %lld", rank,
                                           (long long)g, (long long)ids[g * k + j]);
        }
    return 0;
}

/* Does row g of ids (k per row) hold expert e? */
static int routes_to(const int64_t *ids, int64_t g, int64_t k, int64_t e)
{
    for (int64_t j = 0; j < k; j++)
        if (ids[g * k + j] == e)
            return 1;
    return 0;
}

int kevo_check(kevo_check_call *c)
{
    const int64_t T = kevo_check_param(c, "T"), H = kevo_check_param(c, "H");
    const int64_t E = kevo_check_param(c, "E"), k = kevo_check_param(c, "k");
    const int W = c->world;
    const int64_t L = E / W, capacity = c->outputs[0].shape[0];
    int64_t *ids = malloc((size_t)(W * T * k) * sizeof *ids);
    if (!ids)
        return kevo_check_fail(c, "out of memory");
    for (int s = 0; s < W; s++)
        if (read_routing(c, s, T, k, E, ids + s * T * k) != 0) {
            free(ids);
            return -1;
        }
    int64_t row = 0;
    for (int64_t l = 0; l < L; l++) {
        const int64_t expert = c->rank * L + l, first = row;
        for (int s = 0; s < W; s++)
            for (int64_t t = 0; t < T; t++) {
                if (!routes_to(ids + s * T * k, t, k, expert))
                    continue;
                if (row >= capacity) {
                    free(ids);
                    return kevo_check_fail(c, "rank %d receives more than the %lld rows of recv_x",
                                           c->rank, (long long)capacity);
                }
                for (int64_t h = 0; h < H; h++)
                    c->want[0][row * H + h] = kevo_check_in(c, s, 0, t * H + h); /* exact */
                row++;
            }
        c->want[1][l] = (double)(row - first);
    }
    c->valid[0] = row * H; /* the rows past Σ counts are not compared */
    free(ids);
    return 0;
}
