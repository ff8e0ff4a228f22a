// reference.cu — the NCCL baseline of problems/gemm_reducescatter: the row-parallel linear
// layer of sequence-parallel tensor parallelism as a framework runs it. One cuBLAS GEMM
// computes this rank's partial A_r.B_r for all M rows (bf16 in, fp32 accumulation, bf16 out)
// into a scratch buffer, then one ncclReduceScatter (bf16, sum) sums the partials over the
// ranks and leaves rank r its M/W rows in C. Both are enqueued on ctx->stream (ctx->cublas is
// bound to it), one after the other, with no host synchronisation. This is the fair baseline:
// the fastest library GEMM and NCCL's reduce-scatter, each at its best; what it does not do
// is overlap the two, which is what a candidate can.
//
// The scratch (M x N bf16) is allocated once in kevo_init, sized from the parameters, and
// kept in ctx->user; kevo_fini frees it.
//
// Row-major through column-major cuBLAS: a row-major X of r x c is the column-major X^T, so
// P = A.B (row-major) is P^T = B^T.A^T (column-major): m = N, n = M, k = K/W, with B as the
// first operand (leading dimension N), A as the second (K/W) and P (N).
#include "kevo/kernel.h"

#include <stdio.h>

namespace
{

struct Params {
    int64_t m, n, kw;
};

// M, N and K/W from the parameters, or 0 with a message when they do not fit.
int read_params(const kevo_ctx *ctx, Params *p)
{
    p->m = kevo_param(ctx, "M", -1);
    p->n = kevo_param(ctx, "N", -1);
    p->kw = ctx->world > 0 ? kevo_param(ctx, "K", -1) / ctx->world : -1;
    if (p->m <= 0 || p->n <= 0 || p->kw <= 0 || p->m % ctx->world != 0 || p->m > INT32_MAX ||
        p->n > INT32_MAX || p->kw > INT32_MAX) {
        fprintf(stderr, "gemm_reducescatter reference: bad parameters M=%lld N=%lld K/W=%lld\n",
                (long long)p->m, (long long)p->n, (long long)p->kw);
        return 0;
    }
    return 1;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    Params p;
    if (!read_params(ctx, &p))
        return 1;
    void *scratch = NULL;
    cudaError_t e = cudaMalloc(&scratch, (size_t)(p.m * p.n) * 2);
    if (e != cudaSuccess) {
        fprintf(stderr, "gemm_reducescatter reference: cudaMalloc of the %lld x %lld partial: %s\n",
                (long long)p.m, (long long)p.n, cudaGetErrorString(e));
        return 1;
    }
    ctx->user = scratch;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    if (ctx->user) {
        cudaError_t e = cudaFree(ctx->user);
        if (e != cudaSuccess)
            fprintf(stderr, "gemm_reducescatter reference: cudaFree: %s\n", cudaGetErrorString(e));
        ctx->user = NULL;
    }
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    Params p;
    if (ctx->n_inputs < 2 || ctx->n_outputs < 1 || !ctx->user || !read_params(ctx, &p))
        return 1;
    const kevo_tensor *a = &ctx->inputs[0];
    const kevo_tensor *b = &ctx->inputs[1];
    const kevo_tensor *c = &ctx->outputs[0];
    const int64_t rows = p.m / ctx->world; // of C on this rank
    if (a->dtype != KEVO_BF16 || b->dtype != KEVO_BF16 || c->dtype != KEVO_BF16 ||
        a->numel != p.m * p.kw || b->numel != p.kw * p.n || c->numel != rows * p.n) {
        fprintf(stderr,
                "gemm_reducescatter reference: unexpected tensors (M=%lld N=%lld "
                "K/W=%lld; A %lld, B %lld, C %lld elements)\n",
                (long long)p.m, (long long)p.n, (long long)p.kw, (long long)a->numel,
                (long long)b->numel, (long long)c->numel);
        return 1;
    }

    void *partial = ctx->user; // M x N bf16
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st =
        cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)p.n, (int)p.m, (int)p.kw, &one,
                     b->ptr, CUDA_R_16BF, (int)p.n, a->ptr, CUDA_R_16BF, (int)p.kw, &zero, partial,
                     CUDA_R_16BF, (int)p.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gemm_reducescatter reference: cublasGemmEx: %s\n",
                cublasGetStatusString(st));
        return 1;
    }
    // Rank r receives the sum of rows [r*M/W, (r+1)*M/W): NCCL's chunk r of the buffer.
    ncclResult_t rc = ncclReduceScatter(partial, c->ptr, (size_t)(rows * p.n), ncclBfloat16,
                                        ncclSum, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "gemm_reducescatter reference: ncclReduceScatter: %s (%s)\n",
                ncclGetErrorString(rc), ncclGetLastError(ctx->comm));
        return 1;
    }
    return 0;
}
