/* check.c — the host check of moe_combine (include/kevo/check.h).
 *
 * y_r[t] = Σ_j w_r[t][j] · expert_out_{e/L}[pos(r, t, e)], e = topk_ids[r*T + t][j],
 * where pos(s, t, e) = the rows of the owner's experts before e plus the
 * (s', t') < (s, t) routed to e: the layout moe_dispatch's recv_x has.
 *
 * Tolerance: fp32 accumulation of the k products (2k roundings of at most
 * 2^-24 of S = Σ |w·v|), pre-combining at the owners (one bf16 rounding per
 * owner partial p, at most 2^-8 |p|, in all at most 2^-8 S), and the final
 * rounding to bf16 (half an ulp). */
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

/* Fills the rows of every slot of the global table ids (rows × k): pos, the
 * row within its expert, and base[e], the rows of e's owner before e. */
static int layout(kevo_check_call *c, const int64_t *ids, int64_t rows, int64_t k, int64_t L,
                  int64_t *pos, int64_t *base)
{
    const int64_t capacity = c->inputs[0].shape[0];
    for (int64_t g = 0; g < rows; g++) /* (rank, token) order */
        for (int64_t j = 0; j < k; j++)
            pos[g * k + j] = base[ids[g * k + j]]++;
    for (int q = 0; q < c->world; q++) {
        int64_t acc = 0;
        for (int64_t l = 0; l < L; l++) {
            const int64_t n = base[q * L + l];
            base[q * L + l] = acc;
            acc += n;
        }
        if (acc > capacity)
            return kevo_check_fail(c, "rank %d owns %lld rows, more than the %lld of expert_out", q,
                                   (long long)acc, (long long)capacity);
    }
    return 0;
}

int kevo_check(kevo_check_call *c)
{
    const int64_t T = kevo_check_param(c, "T"), H = kevo_check_param(c, "H");
    const int64_t E = kevo_check_param(c, "E"), k = kevo_check_param(c, "k");
    const int W = c->world, rank = c->rank;
    const int64_t L = E / W, rows = W * T;
    int64_t *ids = malloc((size_t)(rows * k) * sizeof *ids);
    int64_t *other = malloc((size_t)(rows * k) * sizeof *other);
    int64_t *pos = malloc((size_t)(rows * k) * sizeof *pos);
    int64_t *base = calloc((size_t)E + 1, sizeof *base); /* rows per expert, then bases */
    int rc = -1;
    if (!ids || !other || !pos || !base) {
        rc = kevo_check_fail(c, "out of memory");
        goto out;
    }
    /* the table is global: every rank must hold the same one */
    if (read_routing(c, rank, rows, k, E, ids) != 0)
        goto out;
    for (int q = 0; q < W; q++) {
        if (read_routing(c, q, rows, k, E, other) != 0)
            goto out;
        for (int64_t i = 0; i < rows * k; i++)
            if (other[i] != ids[i]) {
                kevo_check_fail(c, "topk_ids differs between ranks %d and %d at %lld", rank, q,
                                (long long)i);
                goto out;
            }
    }
    if (layout(c, ids, rows, k, L, pos, base) != 0)
        goto out;
    const double per_term = ldexp(1, -8) + 2.0 * (double)k * KEVO_CHECK_U_F32;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            double sum = 0, abs_sum = 0;
            for (int64_t j = 0; j < k; j++) {
                const int64_t slot = (rank * T + t) * k + j, ex = ids[slot];
                const double w = kevo_check_in(c, rank, 2, t * k + j);
                const double v = kevo_check_in(c, (int)(ex / L), 0, (base[ex] + pos[slot]) * H + h);
                sum += w * v;
                abs_sum += fabs(w * v);
            }
            const double a = per_term * abs_sum;
            c->want[0][t * H + h] = sum;
            c->tol[0][t * H + h] = a + 0.5 * kevo_check_ulp_bf16(fabs(sum) + a);
        }
    rc = 0;
out:
    free(ids);
    free(other);
    free(pos);
    free(base);
    return rc;
}
