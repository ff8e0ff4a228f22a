/* check.c — the host check of gemm_reducescatter (include/kevo/check.h):
 * C_r = rows [r·M/W, (r+1)·M/W) of Σ_s A_s · B_s (A_s: M × K/W,
 * B_s: K/W × N).
 *
 * The product is recomputed in double from the bf16 inputs (a product of two
 * bf16 values is exact, and so are sums of a few thousand of them to well
 * below a bf16 ulp). Each element's tolerance bounds what a correct
 * bf16/fp32 implementation can differ from the exact value by:
 *
 *  - fp32 accumulation of a dot product of n terms, in any order: at most
 *    n · 2^-24 · Σ|a_k·b_k|, and Σ|a_k·b_k| <= ‖a‖₂·‖b‖₂ (Cauchy-Schwarz);
 *  - the rounding of each rank's fp32 partial to bf16 (the reference's
 *    cuBLAS call writes bf16): half an ulp of it;
 *  - the sum over ranks with bf16 partial sums (NCCL's ring).
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
    const int64_t N = kevo_check_param(c, "N"), kw = kevo_check_param(c, "K") / c->world;
    const int64_t rows = kevo_check_param(c, "M") / c->world, row0 = c->rank * rows;
    const int64_t cells = rows * N;
    if (rows * N * kw * c->world > MAX_WORK)
        return KEVO_CHECK_SKIP;
    double *p = malloc((size_t)cells * sizeof *p);
    double *abs_sum = calloc((size_t)cells, sizeof *abs_sum);
    double *na = malloc((size_t)rows * sizeof *na), *nb = malloc((size_t)N * sizeof *nb);
    float *a = NULL, *b = NULL;
    int rc = -1;
    if (!p || !abs_sum || !na || !nb)
        goto out;
    double *want = c->want[0], *tol = c->tol[0]; /* tol holds Σ_s e_s until the end */
    for (int s = 0; s < c->world; s++) {
        a = load_f32(c, s, 0, row0 * kw, rows * kw);
        b = load_f32(c, s, 1, 0, kw * N);
        if (!a || !b)
            goto out;
        gemm_f64(a, b, rows, N, kw, p);
        norms(a, b, rows, N, kw, na, nb);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < N; j++) {
                const int64_t k = i * N + j;
                /* |bf16(fp32 partial) - exact partial| <= e */
                const double f = (double)kw * KEVO_CHECK_U_F32 * na[i] * nb[j];
                const double e = f + 0.5 * kevo_check_ulp_bf16(fabs(p[k]) + f);
                want[k] += p[k];
                tol[k] += e;
                abs_sum[k] += fabs(p[k]) + e;
            }
        free(a);
        free(b);
        a = b = NULL;
    }
    for (int64_t k = 0; k < cells; k++) {
        const double partials = tol[k]; /* |Σ rounded partials - want| <= partials */
        tol[k] = partials + kevo_check_bf16_sum_tol(fabs(want[k]) + partials, abs_sum[k], c->world);
    }
    rc = 0;
out:
    free(p);
    free(abs_sum);
    free(na);
    free(nb);
    free(a);
    free(b);
    return rc == 0 ? 0 : kevo_check_fail(c, "out of memory");
}
