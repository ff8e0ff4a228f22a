// reference.cu — the NCCL baseline of problems/allgather_gemm: the sequence-parallel
// all-gather and column-parallel linear layer as a tensor-parallel framework runs them. One
// ncclAllGather (bf16) collects every rank's M/W rows of A into an M x K buffer, in rank
// order, then one cuBLAS GEMM (bf16 in, fp32 accumulation, bf16 out) multiplies it by this
// rank's B_r into C_r. Both are enqueued on ctx->stream (ctx->cublas is bound to it), one
// after the other, with no host synchronisation. This is the fair baseline: NCCL's all-gather
// and the fastest library GEMM, each at its best; what it does not do is overlap the two,
// which is what a candidate can.
//
// The gathered A (M x K bf16) is allocated once in kevo_init, sized from the parameters, and
// kept in ctx->user; kevo_fini frees it.
//
// Row-major through column-major cuBLAS: a row-major X of r x c is the column-major X^T, so
// C = A.B (row-major) is C^T = B^T.A^T (column-major): m = N/W, n = M, k = K, with B as the
// first operand (leading dimension N/W), the gathered A as the second (K) and C (N/W).
#include "kevo/kernel.h"

#include <stdio.h>

namespace
{

struct Params {
    int64_t m, nw, k;
};

// M, N/W and K from the parameters, or 0 with a message when they do not fit.
int read_params(const kevo_ctx *ctx, Params *p)
{
    p->m = kevo_param(ctx, "M", -1);
    p->nw = ctx->world > 0 ? kevo_param(ctx, "N", -1) / ctx->world : -1;
    p->k = kevo_param(ctx, "K", -1);
    if (p->m <= 0 || p->nw <= 0 || p->k <= 0 || p->m % ctx->world != 0 || p->m > INT32_MAX ||
        p->nw > INT32_MAX || p->k > INT32_MAX) {
        fprintf(stderr, "allgather_gemm reference: bad parameters M=%lld N/W=%lld K=%lld\n",
                (long long)p->m, (long long)p->nw, (long long)p->k);
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
    void *gathered = NULL;
    cudaError_t e = cudaMalloc(&gathered, (size_t)(p.m * p.k) * 2);
    if (e != cudaSuccess) {
        fprintf(stderr, "allgather_gemm reference: cudaMalloc of the gathered %lld x %lld A: %s\n",
                (long long)p.m, (long long)p.k, cudaGetErrorString(e));
        return 1;
    }
    ctx->user = gathered;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    if (ctx->user) {
        cudaError_t e = cudaFree(ctx->user);
        if (e != cudaSuccess)
            fprintf(stderr, "allgather_gemm reference: cudaFree: %s\n", cudaGetErrorString(e));
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
    const int64_t rows = p.m / ctx->world; // of A on this rank
    if (a->dtype != KEVO_BF16 || b->dtype != KEVO_BF16 || c->dtype != KEVO_BF16 ||
        a->numel != rows * p.k || b->numel != p.k * p.nw || c->numel != p.m * p.nw) {
        fprintf(stderr,
                "allgather_gemm reference: unexpected tensors (M=%lld N/W=%lld K=%lld; "
                "A %lld, B %lld, C %lld elements)\n",
                (long long)p.m, (long long)p.nw, (long long)p.k, (long long)a->numel,
                (long long)b->numel, (long long)c->numel);
        return 1;
    }

    void *gathered = ctx->user; // M x K bf16: rank s's rows at s*M/W
    ncclResult_t rc =
        ncclAllGather(a->ptr, gathered, (size_t)(rows * p.k), ncclBfloat16, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "allgather_gemm reference: ncclAllGather: %s (%s)\n",
                ncclGetErrorString(rc), ncclGetLastError(ctx->comm));
        return 1;
    }
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st =
        cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)p.nw, (int)p.m, (int)p.k, &one,
                     b->ptr, CUDA_R_16BF, (int)p.nw, gathered, CUDA_R_16BF, (int)p.k, &zero, c->ptr,
                     CUDA_R_16BF, (int)p.nw, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "allgather_gemm reference: cublasGemmEx: %s\n", cublasGetStatusString(st));
        return 1;
    }
    return 0;
}
