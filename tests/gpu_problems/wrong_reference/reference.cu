// reference.cu — wrong_reference's reference, wrong on purpose (problem.json says how):
// right on 256-byte-aligned buffers, one element short on any other.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

__global__ void rescale_vector(uint4 *y, int64_t packs)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < packs;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint4 v = y[i];
        __nv_bfloat16 *e = (__nv_bfloat16 *)&v;
        for (int k = 0; k < 8; k++)
            e[k] = __float2bfloat16_rn(__bfloat162float(e[k]) * 0.5f * 2.0f);
        y[i] = v;
    }
}

__global__ void rescale_scalar(__nv_bfloat16 *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = i == n - 1 ? __float2bfloat16_rn(0.0f) // the bug
                          : __float2bfloat16_rn(__bfloat162float(y[i]) * 0.5f * 2.0f);
}

__global__ void rescale_tail(__nv_bfloat16 *y, int64_t from, int64_t n)
{
    for (int64_t i = from + threadIdx.x; i < n; i += blockDim.x)
        y[i] = __float2bfloat16_rn(__bfloat162float(y[i]) * 0.5f * 2.0f);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", 0);
    ncclResult_t rc =
        ncclAllReduce(x->ptr, y->ptr, (size_t)n, ncclBfloat16, ncclSum, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "wrong_reference: ncclAllReduce: %s\n", ncclGetErrorString(rc));
        return 1;
    }
    if ((uintptr_t)y->ptr % 256 == 0) {
        rescale_vector<<<ctx->sm_count, 256, 0, ctx->stream>>>((uint4 *)y->ptr, n / 8);
        rescale_tail<<<1, 32, 0, ctx->stream>>>((__nv_bfloat16 *)y->ptr, n / 8 * 8, n);
    } else {
        rescale_scalar<<<ctx->sm_count, 256, 0, ctx->stream>>>((__nv_bfloat16 *)y->ptr, n);
    }
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
