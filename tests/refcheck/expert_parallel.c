/* expert_parallel.c — host checkers of the expert-parallel problems (moe_dispatch,
 * moe_combine) and of the context-parallel reshuffle ulysses_seq_to_heads. Each one
 * recomputes the outputs from problem.json's definition, from the inputs of every rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "refcheck/checkers.h"

/* Reads a [rows, k] routing table (input `input` of rank `rank`) into ids and checks it: every
 * id in [0, E) and none repeated within a row. Returns 0, or -1 with a reason. */
static int read_routing(const rc_data *d, int rank, int input, int64_t rows, int64_t k,
                        int64_t E, int64_t *ids, char *why, size_t cap)
{
    for (int64_t g = 0; g < rows; g++)
        for (int64_t j = 0; j < k; j++) {
            double v = rc_in(d, rank, input, g * k + j);
            if (!(v >= 0 && v < (double)E)) {
                snprintf(why, cap, "rank %d: topk_ids[%lld][%lld] = %g is outside [0, %lld)",
                         rank, (long long)g, (long long)j, v, (long long)E);
                return -1;
            }
            ids[g * k + j] = (int64_t)v;
            for (int64_t i = 0; i < j; i++)
                if (ids[g * k + i] == ids[g * k + j]) {
                    snprintf(why, cap, "rank %d: topk_ids[%lld] repeats expert %lld", rank,
                             (long long)g, (long long)ids[g * k + j]);
                    return -1;
                }
        }
    return 0;
}

/* Does row g of ids (k per row) contain expert e? */
static int routes_to(const int64_t *ids, int64_t g, int64_t k, int64_t e)
{
    for (int64_t j = 0; j < k; j++)
        if (ids[g * k + j] == e)
            return 1;
    return 0;
}

/* Rank q receives x_s[t] once for each of its local experts l that token t of rank s is routed
 * to, rows ordered by (l, s, t); counts[l] = rows of expert l. Bit-exact. */
RC_CHECKER(moe_dispatch)
{
    const int64_t T = rc_param(d, "T"), H = rc_param(d, "H"), E = rc_param(d, "E");
    const int64_t k = rc_param(d, "k");
    const int W = d->world;
    const int64_t L = E / W, capacity = d->out_shape[0].shape[0];
    int64_t *ids = malloc((size_t)(W * T * k) * sizeof *ids);
    if (!ids) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    for (int s = 0; s < W; s++)
        if (read_routing(d, s, 1, T, k, E, ids + s * T * k, why, cap) != 0) {
            free(ids);
            return -1;
        }
    int64_t row = 0;
    for (int64_t l = 0; l < L; l++) {
        const int64_t expert = rank * L + l, first = row;
        for (int s = 0; s < W; s++)
            for (int64_t t = 0; t < T; t++) {
                if (!routes_to(ids + s * T * k, t, k, expert))
                    continue;
                if (row >= capacity) {
                    snprintf(why, cap, "rank %d receives more than the %lld rows of recv_x", rank,
                             (long long)capacity);
                    free(ids);
                    return -1;
                }
                for (int64_t h = 0; h < H; h++)
                    e->want[0][row * H + h] = rc_in(d, s, 0, t * H + h); /* tol stays 0 */
                row++;
            }
        e->want[1][l] = (double)(row - first);
    }
    e->valid[0] = row * H;
    free(ids);
    return 0;
}

/* y_r[t] = Σ_j w_r[t][j] · expert_out_{e/L}[pos(r, t, e)], e = topk_ids[r*T + t][j], where
 * pos(s, t, e) = rows of the owner's experts before e + rows (s', t') < (s, t) routed to e.
 * Tolerance: fp32 accumulation of k products (2k roundings of at most 2^-24 of S = Σ |w·v|),
 * pre-combining at the owners (one bf16 rounding per owner partial p, at most 2^-8 |p|, in all
 * at most 2^-8 S), and the final rounding to bf16 (half an ulp). */
RC_CHECKER(moe_combine)
{
    const int64_t T = rc_param(d, "T"), H = rc_param(d, "H"), E = rc_param(d, "E");
    const int64_t k = rc_param(d, "k");
    const int W = d->world;
    const int64_t L = E / W, capacity = d->in_shape[0].shape[0], rows = W * T;
    int64_t *ids = malloc((size_t)(rows * k) * sizeof *ids);
    int64_t *other = malloc((size_t)(rows * k) * sizeof *other);
    int64_t *pos = malloc((size_t)(rows * k) * sizeof *pos);   /* row within expert */
    int64_t *base = calloc((size_t)E + 1, sizeof *base);       /* rows per expert, then bases */
    int rc = -1;
    if (!ids || !other || !pos || !base) {
        snprintf(why, cap, "out of memory");
        goto out;
    }
    /* the table is global: every rank must hold the same one */
    if (read_routing(d, rank, 1, rows, k, E, ids, why, cap) != 0)
        goto out;
    for (int q = 0; q < W; q++) {
        if (read_routing(d, q, 1, rows, k, E, other, why, cap) != 0)
            goto out;
        for (int64_t i = 0; i < rows * k; i++)
            if (other[i] != ids[i]) {
                snprintf(why, cap, "topk_ids differs between ranks %d and %d at %lld", rank, q,
                         (long long)i);
                goto out;
            }
    }
    /* positions within each expert, in (rank, token) order */
    for (int64_t g = 0; g < rows; g++)
        for (int64_t j = 0; j < k; j++)
            pos[g * k + j] = base[ids[g * k + j]]++;
    /* base[e]: rows of the owner's experts before e */
    for (int64_t q = 0; q < W; q++) {
        int64_t acc = 0;
        for (int64_t l = 0; l < L; l++) {
            const int64_t n = base[q * L + l];
            base[q * L + l] = acc;
            acc += n;
        }
        if (acc > capacity) {
            snprintf(why, cap, "rank %lld owns %lld rows, more than the %lld of expert_out",
                     (long long)q, (long long)acc, (long long)capacity);
            goto out;
        }
    }
    const double per_term = ldexp(1, -8) + 2.0 * (double)k * ldexp(1, -24);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            double sum = 0, abs_sum = 0;
            for (int64_t j = 0; j < k; j++) {
                const int64_t slot = (rank * T + t) * k + j, ex = ids[slot];
                const double w = rc_in(d, rank, 2, t * k + j);
                const double v = rc_in(d, (int)(ex / L), 0, (base[ex] + pos[slot]) * H + h);
                sum += w * v;
                abs_sum += fabs(w * v);
            }
            const double a = per_term * abs_sum;
            e->want[0][t * H + h] = sum;
            e->tol[0][t * H + h] = a + 0.5 * rc_ulp_bf16(fabs(sum) + a);
        }
    rc = 0;
out:
    free(ids);
    free(other);
    free(pos);
    free(base);
    return rc;
}

/* y_r[b, s*(S/W) + i, h, d] = x_s[b, i, r*(NH/W) + h, d]. Bit-exact. */
RC_CHECKER(ulysses_seq_to_heads)
{
    (void)why;
    (void)cap;
    const int64_t B = rc_param(d, "B"), S = rc_param(d, "S"), NH = rc_param(d, "NH");
    const int64_t D = rc_param(d, "D");
    const int W = d->world;
    const int64_t Sl = S / W, Hl = NH / W;
    for (int64_t b = 0; b < B; b++)
        for (int s = 0; s < W; s++)
            for (int64_t i = 0; i < Sl; i++)
                for (int64_t h = 0; h < Hl; h++)
                    for (int64_t x = 0; x < D; x++) {
                        const int64_t out = ((b * S + s * Sl + i) * Hl + h) * D + x;
                        const int64_t in = ((b * Sl + i) * NH + rank * Hl + h) * D + x;
                        e->want[0][out] = rc_in(d, s, 0, in); /* tol stays 0 */
                    }
    return 0;
}
