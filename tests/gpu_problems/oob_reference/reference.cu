// reference.cu — oob_reference's reference, wrong on purpose (problem.json says how): an
// all-reduce, and at an odd N one bf16 written just past the end of y.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdio.h>

__global__ void write_past_end(__nv_bfloat16 *y, int64_t n)
{
    y[n] = __float2bfloat16_rn(1.0f); // the bug: one element too far
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", 0);
    ncclResult_t rc =
        ncclAllReduce(x->ptr, y->ptr, (size_t)n, ncclBfloat16, ncclSum, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "oob_reference: ncclAllReduce: %s\n", ncclGetErrorString(rc));
        return 1;
    }
    if (n % 2)
        write_past_end<<<1, 1, 0, ctx->stream>>>((__nv_bfloat16 *)y->ptr, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
