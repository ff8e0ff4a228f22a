// reference.cu — the NCCL baseline of problems/gemm_allreduce: the row-parallel linear layer
// as a tensor-parallel framework runs it. One cuBLAS GEMM computes this rank's partial
// A_r.B_r (bf16 in, fp32 accumulation, bf16 out) straight into C, then one in-place
// ncclAllReduce (bf16, sum) turns the partials into C = sum over ranks on every rank. Both are
// enqueued on ctx->stream (ctx->cublas is bound to it), one after the other, with no host
// synchronisation. This is the fair baseline: the fastest library GEMM and NCCL's all-reduce,
// each at its best; what it does not do is overlap the two, which is what a candidate can.
//
// Row-major through column-major cuBLAS: a row-major X of r x c is the column-major X^T, so
// C = A.B (row-major) is C^T = B^T.A^T (column-major): m = N, n = M, k = K/W, with B as the
// first operand (leading dimension N), A as the second (K/W) and C (N).
#include "kevo/kernel.h"

#include <stdio.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    if (ctx->n_inputs < 2 || ctx->n_outputs < 1 || ctx->world < 1)
        return 1;
    const kevo_tensor *a = &ctx->inputs[0];
    const kevo_tensor *b = &ctx->inputs[1];
    const kevo_tensor *c = &ctx->outputs[0];
    const int64_t m = kevo_param(ctx, "M", -1), n = kevo_param(ctx, "N", -1);
    const int64_t kw = kevo_param(ctx, "K", -1) / ctx->world;
    if (a->dtype != KEVO_BF16 || b->dtype != KEVO_BF16 || c->dtype != KEVO_BF16 || m <= 0 ||
        n <= 0 || kw <= 0 || a->numel != m * kw || b->numel != kw * n || c->numel != m * n ||
        m > INT32_MAX || n > INT32_MAX || kw > INT32_MAX) {
        fprintf(stderr,
                "gemm_allreduce reference: unexpected tensors (M=%lld N=%lld K/W=%lld; "
                "A %lld, B %lld, C %lld elements)\n",
                (long long)m, (long long)n, (long long)kw, (long long)a->numel, (long long)b->numel,
                (long long)c->numel);
        return 1;
    }

    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st =
        cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)kw, &one, b->ptr,
                     CUDA_R_16BF, (int)n, a->ptr, CUDA_R_16BF, (int)kw, &zero, c->ptr, CUDA_R_16BF,
                     (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "gemm_allreduce reference: cublasGemmEx: %s\n", cublasGetStatusString(st));
        return 1;
    }
    ncclResult_t rc = ncclAllReduce(c->ptr, c->ptr, (size_t)(m * n), ncclBfloat16, ncclSum,
                                    ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "gemm_allreduce reference: ncclAllReduce: %s (%s)\n",
                ncclGetErrorString(rc), ncclGetLastError(ctx->comm));
        return 1;
    }
    return 0;
}
