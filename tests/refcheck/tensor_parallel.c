/* tensor_parallel.c — host checkers of the tensor-parallel problems:
 * gemm_allreduce, allgather_gemm, gemm_reducescatter, tp_rmsnorm.
 *
 * The GEMMs are recomputed in double from the bf16 inputs (every product
 * of two bf16 values is exact, and so are sums of a few thousand of them
 * to well below a bf16 ulp). Each output element gets the bound of what a
 * correct bf16/fp32 implementation can differ from the exact value by:
 *
 *  - fp32 accumulation of a dot product a·b of n terms, in any order
 *    (cuBLAS, split-K, a tiled kernel): at most n · 2^-24 · Σ|a_k·b_k| (each
 *    of the n - 1 additions errs by at most 2^-24 of a partial sum, every
 *    partial sum is at most Σ|a_k·b_k|, and the products of two bf16 values
 *    are exact in fp32), and Σ|a_k·b_k| <= ‖a‖₂·‖b‖₂ (Cauchy-Schwarz; for
 *    random data about 1.6 times Σ|a_k·b_k|), which costs O(MK + KN)
 *    instead of a second pass over the M·N·K products;
 *  - the rounding of an fp32 value to bf16: half an ulp of it;
 *  - a sum over ranks with bf16 partial sums (NCCL's ring): rc_bf16_sum_tol.
 *
 * The worst-case accumulation bound is far above what fp32 sums of random
 * values really show (about sqrt(n) times smaller), but it is derived and
 * holds for every order. At the validation sizes it is a fifth of a bf16
 * ulp of a typical |C| or less; at K = 4096 (the smallest timed size, the
 * one the GPU test checks) it is about 0.02, two to three ulps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refcheck/checkers.h"

#define U32 (1.0 / 16777216.0) /* 2^-24: the unit roundoff of fp32 */

/* Rows of the GEMM kept hot in cache while B streams past (see gemm_f64). */
#define ROW_BLOCK 16

/* Input `input` of rank `rank`, elements [from, from + count), as floats
 * (bf16 values are exact in fp32). NULL when memory runs out. */
static float *load_f32(const rc_data *d, int rank, int input, int64_t from, int64_t count)
{
    float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (int64_t i = 0; i < count; i++)
        v[i] = (float)rc_in(d, rank, input, from + i);
    return v;
}

/* Row-major p = a · b in double, for a: m × kk (row stride lda), b: kk × n,
 * p: m × n. Blocks of ROW_BLOCK rows of p stay in cache while b streams
 * past once per block. */
static void gemm_f64(const float *a, int64_t lda, const float *b, int64_t m, int64_t n,
                     int64_t kk, double *p)
{
    for (int64_t i = 0; i < m * n; i++)
        p[i] = 0;
    for (int64_t i0 = 0; i0 < m; i0 += ROW_BLOCK) {
        int64_t i1 = i0 + ROW_BLOCK < m ? i0 + ROW_BLOCK : m;
        for (int64_t k = 0; k < kk; k++) {
            const float *brow = b + k * n;
            for (int64_t i = i0; i < i1; i++) {
                double aik = a[i * lda + k];
                if (aik == 0)
                    continue;
                double *prow = p + i * n;
                for (int64_t j = 0; j < n; j++)
                    prow[j] += aik * brow[j];
            }
        }
    }
}

/* The Euclidean norm of every row (m × kk, row stride lda) into out[m]. */
static void row_norms(const float *a, int64_t lda, int64_t m, int64_t kk, double *out)
{
    for (int64_t i = 0; i < m; i++) {
        double s = 0;
        for (int64_t k = 0; k < kk; k++)
            s += (double)a[i * lda + k] * a[i * lda + k];
        out[i] = sqrt(s);
    }
}

/* The Euclidean norm of every column of b (kk × n) into out[n]. */
static void col_norms(const float *b, int64_t kk, int64_t n, double *out)
{
    for (int64_t j = 0; j < n; j++)
        out[j] = 0;
    for (int64_t k = 0; k < kk; k++)
        for (int64_t j = 0; j < n; j++)
            out[j] += (double)b[k * n + j] * b[k * n + j];
    for (int64_t j = 0; j < n; j++)
        out[j] = sqrt(out[j]);
}

/* The largest |got - exact| of a dot product of n terms whose vectors have
 * Euclidean norms na and nb, accumulated in fp32 (any order) and rounded
 * once to bf16. */
static double dot_bf16_tol(double exact, double na, double nb, int64_t n)
{
    double f = (double)n * U32 * na * nb;
    return f + 0.5 * rc_ulp_bf16(fabs(exact) + f);
}

/* Sum over the W ranks of the row-parallel GEMM partials, rows [row0,
 * row0 + rows) of C = Σ_s A_s · B_s (A_s: M × K/W, input 0; B_s: K/W × N,
 * input 1), into want and tol (rows × N each). Each partial is accumulated
 * in fp32 and may be rounded to bf16 before the sum (the reference's cuBLAS
 * call writes bf16); the sum over ranks may round to bf16 at each hop. */
static int row_parallel_sum(const rc_data *d, int64_t row0, int64_t rows, double *want,
                            double *tol, char *why, size_t cap)
{
    const int64_t n = rc_param(d, "N"), kw = rc_param(d, "K") / d->world;
    const int64_t cells = rows * n;
    double *p = malloc((size_t)cells * sizeof *p);
    double *abs_sum = calloc((size_t)cells, sizeof *abs_sum);
    double *na = malloc((size_t)rows * sizeof *na), *nb = malloc((size_t)n * sizeof *nb);
    float *a = NULL, *b = NULL;
    int rc = -1;
    if (!p || !abs_sum || !na || !nb)
        goto out;
    for (int64_t i = 0; i < cells; i++)
        want[i] = tol[i] = 0; /* tol holds Σ_s e_s until the end */
    for (int s = 0; s < d->world; s++) {
        a = load_f32(d, s, 0, row0 * kw, rows * kw);
        b = load_f32(d, s, 1, 0, kw * n);
        if (!a || !b)
            goto out;
        gemm_f64(a, kw, b, rows, n, kw, p);
        row_norms(a, kw, rows, kw, na);
        col_norms(b, kw, n, nb);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++) {
                int64_t c = i * n + j;
                /* |bf16(fp32 partial) - exact partial| <= e */
                double e = dot_bf16_tol(p[c], na[i], nb[j], kw);
                want[c] += p[c];
                tol[c] += e;
                abs_sum[c] += fabs(p[c]) + e;
            }
        free(a);
        free(b);
        a = b = NULL;
    }
    for (int64_t i = 0; i < cells; i++) {
        double partials = tol[i]; /* |Σ rounded partials - want| <= partials */
        tol[i] = partials + rc_bf16_sum_tol(fabs(want[i]) + partials, abs_sum[i], d->world);
    }
    rc = 0;
out:
    if (rc != 0)
        snprintf(why, cap, "out of memory");
    free(p);
    free(abs_sum);
    free(na);
    free(nb);
    free(a);
    free(b);
    return rc;
}

/* gemm_allreduce's result is the same on every rank and costs M·N·K
 * multiply-adds, so the last one is kept and reused while the inputs are
 * the same (a hash of every rank's input bytes, the size, M, N, K and W): W ranks
 * then cost one computation, not W. Checkers run on one thread. */
static struct {
    uint64_t key;
    int64_t cells;
    double *want, *tol;
} ar_memo;

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *c = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

static uint64_t inputs_key(const rc_data *d)
{
    uint64_t h = 14695981039346656037ull;
    int64_t tag[5] = {d->size, d->world, rc_param(d, "M"), rc_param(d, "N"), rc_param(d, "K")};
    h = fnv1a(h, tag, sizeof tag);
    for (int r = 0; r < d->world; r++)
        for (int i = 0; i < d->p->n_inputs; i++)
            h = fnv1a(h, d->in[r][i], d->in_shape[i].bytes);
    return h;
}

/* C = Σ_s A_s · B_s on every rank (M × N). */
RC_CHECKER(gemm_allreduce)
{
    (void)rank;
    const int64_t cells = d->out_shape[0].numel;
    const uint64_t key = inputs_key(d);
    if (!ar_memo.want || ar_memo.key != key || ar_memo.cells != cells) {
        free(ar_memo.want);
        free(ar_memo.tol);
        ar_memo.want = malloc((size_t)cells * sizeof(double));
        ar_memo.tol = malloc((size_t)cells * sizeof(double));
        ar_memo.cells = cells;
        if (!ar_memo.want || !ar_memo.tol ||
            row_parallel_sum(d, 0, rc_param(d, "M"), ar_memo.want, ar_memo.tol, why, cap) != 0) {
            free(ar_memo.want);
            free(ar_memo.tol);
            ar_memo.want = ar_memo.tol = NULL;
            snprintf(why, cap, "out of memory");
            return -1;
        }
        ar_memo.key = key;
    }
    memcpy(e->want[0], ar_memo.want, (size_t)cells * sizeof(double));
    memcpy(e->tol[0], ar_memo.tol, (size_t)cells * sizeof(double));
    return 0;
}

/* C_r = rows [r·M/W, (r+1)·M/W) of Σ_s A_s · B_s. */
RC_CHECKER(gemm_reducescatter)
{
    const int64_t rows = rc_param(d, "M") / d->world;
    return row_parallel_sum(d, rank * rows, rows, e->want[0], e->tol[0], why, cap);
}

/* C_r = A · B_r, A the row-wise concatenation of every rank's A_s (M/W × K),
 * B_r this rank's K × N/W. */
RC_CHECKER(allgather_gemm)
{
    const int64_t m = rc_param(d, "M"), k = rc_param(d, "K");
    const int64_t nw = rc_param(d, "N") / d->world, mw = m / d->world;
    float *a = malloc((size_t)(m * k) * sizeof *a);
    float *b = load_f32(d, rank, 1, 0, k * nw);
    double *na = malloc((size_t)m * sizeof *na), *nb = malloc((size_t)nw * sizeof *nb);
    int rc = -1;
    if (!a || !b || !na || !nb) {
        snprintf(why, cap, "out of memory");
        goto out;
    }
    for (int s = 0; s < d->world; s++)
        for (int64_t i = 0; i < mw * k; i++)
            a[s * mw * k + i] = (float)rc_in(d, s, 0, i);
    gemm_f64(a, k, b, m, nw, k, e->want[0]);
    row_norms(a, k, m, k, na);
    col_norms(b, k, nw, nb);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < nw; j++)
            e->tol[0][i * nw + j] = dot_bf16_tol(e->want[0][i * nw + j], na[i], nb[j], k);
    rc = 0;
out:
    free(a);
    free(b);
    free(na);
    free(nb);
    return rc;
}

/* y_r[t][c] = x_r[t][c] · γ_r[c] / sqrt(Σ_s Σ_c' x_s[t][c']² / H + 1e-6). */
RC_CHECKER(tp_rmsnorm)
{
    (void)why;
    (void)cap;
    const int64_t t_rows = rc_param(d, "T"), h = rc_param(d, "H");
    const int64_t hw = h / d->world;
    /* fp32 relative error of a correct kernel before the bf16 rounding: the
     * sum of H squares (exact in fp32) in any order, at most (H - 1) u,
     * halved by the square root; the division by H, the + eps and the two
     * multiplications, u each; rsqrtf, 2 ulp = 4 u at most; the sum over
     * ranks is part of the H - 1 additions. (H/2 + 16) u covers it all. */
    const double rel = ((double)h / 2 + 16) * U32;
    for (int64_t t = 0; t < t_rows; t++) {
        double ss = 0;
        for (int s = 0; s < d->world; s++)
            for (int64_t c = 0; c < hw; c++) {
                double v = rc_in(d, s, 0, t * hw + c);
                ss += v * v;
            }
        double rstd = 1.0 / sqrt(ss / (double)h + 1e-6);
        for (int64_t c = 0; c < hw; c++) {
            double y = rc_in(d, rank, 0, t * hw + c) * rstd * rc_in(d, rank, 1, c);
            double f = fabs(y) * rel;
            e->want[0][t * hw + c] = y;
            e->tol[0][t * hw + c] = f + 0.5 * rc_ulp_bf16(fabs(y) + f);
        }
    }
    return 0;
}
