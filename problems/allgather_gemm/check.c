/* check.c — the host check of allgather_gemm (include/kevo/check.h):
 * C_r = A · B_r, A the row-wise concatenation of every rank's A_s
 * (M/W × K), B_r this rank's K × N/W.
 *
 * The product is recomputed in double from the bf16 inputs (a product of two
 * bf16 values is exact). Each element's tolerance is fp32 accumulation of K
 * terms in any order, at most K · 2^-24 · ‖a‖₂·‖b‖₂ (Cauchy-Schwarz bounds
 * Σ|a_k·b_k|), plus the one rounding to bf16, half an ulp.
 *
 * Sizes beyond 2^31 multiply-adds per rank (a second or so of one core) are
 * not checked on the host. */
#include <kevo/check.h>
#include <math.h>

#define MAX_WORK ((int64_t)1 << 31)
#define ROW_BLOCK 16 /* rows of the product kept hot in cache while B streams past */

/* Elements [from, from + count) of input `input` of rank `rank`, as floats
 * (bf16 values are exact in fp32); NULL when memory runs out. */
static float *load_f32(const kevo_check_call *c, int rank, int input, int64_t from, int64_t count)
{
    float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (int64_t i = 0; i < count; i++)
        v[i] = (float)kevo_check_in(c, rank, input, from + i);
    return v;
}

/* Row-major p = a · b in double; a: m × kk, b: kk × n, p: m × n. */
static void gemm_f64(const float *a, const float *b, int64_t m, int64_t n, int64_t kk, double *p)
{
    for (int64_t i = 0; i < m * n; i++)
        p[i] = 0;
    for (int64_t i0 = 0; i0 < m; i0 += ROW_BLOCK) {
        const int64_t i1 = i0 + ROW_BLOCK < m ? i0 + ROW_BLOCK : m;
        for (int64_t k = 0; k < kk; k++)
            for (int64_t i = i0; i < i1; i++) {
                const double aik = a[i * kk + k];
                if (aik == 0)
                    continue;
                for (int64_t j = 0; j < n; j++)
                    p[i * n + j] += aik * b[k * n + j];
            }
    }
}

/* The Euclidean norms of a's rows (m × kk) and of b's columns (kk × n). */
static void norms(const float *a, const float *b, int64_t m, int64_t n, int64_t kk, double *na,
                  double *nb)
{
    for (int64_t i = 0; i < m; i++) {
        double s = 0;
        for (int64_t k = 0; k < kk; k++)
            s += (double)a[i * kk + k] * a[i * kk + k];
        na[i] = sqrt(s);
    }
    for (int64_t j = 0; j < n; j++)
        nb[j] = 0;
    for (int64_t k = 0; k < kk; k++)
        for (int64_t j = 0; j < n; j++)
            nb[j] += (double)b[k * n + j] * b[k * n + j];
    for (int64_t j = 0; j < n; j++)
        nb[j] = sqrt(nb[j]);
}

int kevo_check(kevo_check_call *c)
{
    const int64_t M = kevo_check_param(c, "M"), K = kevo_check_param(c, "K");
    const int64_t nw = kevo_check_param(c, "N") / c->world, mw = M / c->world;
    if (M * nw * K > MAX_WORK)
        return KEVO_CHECK_SKIP;
    float *a = malloc((size_t)(M * K) * sizeof *a);
    float *b = load_f32(c, c->rank, 1, 0, K * nw);
    double *na = malloc((size_t)M * sizeof *na), *nb = malloc((size_t)nw * sizeof *nb);
    int rc = -1;
    if (!a || !b || !na || !nb)
        goto out;
    for (int s = 0; s < c->world; s++)
        for (int64_t i = 0; i < mw * K; i++)
            a[s * mw * K + i] = (float)kevo_check_in(c, s, 0, i);
    gemm_f64(a, b, M, nw, K, c->want[0]);
    norms(a, b, M, nw, K, na, nb);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < nw; j++) {
            const double f = (double)K * KEVO_CHECK_U_F32 * na[i] * nb[j];
            c->tol[0][i * nw + j] = f + 0.5 * kevo_check_ulp_bf16(fabs(c->want[0][i * nw + j]) + f);
        }
    rc = 0;
out:
    free(a);
    free(b);
    free(na);
    free(nb);
    return rc == 0 ? 0 : kevo_check_fail(c, "out of memory");
}
