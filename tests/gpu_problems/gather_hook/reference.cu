// reference.cu — gather_hook: y[i, :] = x[idx[i, 0], :] + scale[i] * x[idx[i, 1], :],
// summed in fp32 and rounded once to bf16. Local to each rank.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>

__global__ void gather(const __nv_bfloat16 *x, const int32_t *idx, const int32_t *scale,
                       __nv_bfloat16 *y, int64_t T, int64_t H)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < T * H;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e / H, h = e % H;
        float a = __bfloat162float(x[(int64_t)idx[2 * i] * H + h]);
        float b = __bfloat162float(x[(int64_t)idx[2 * i + 1] * H + h]);
        y[e] = __float2bfloat16_rn(a + (float)scale[i] * b);
    }
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    int64_t T = kevo_param(ctx, "T", 0), H = kevo_param(ctx, "H", 0);
    gather<<<2 * ctx->sm_count, 256, 0, ctx->stream>>>(
        (const __nv_bfloat16 *)ctx->inputs[0].ptr, (const int32_t *)ctx->inputs[1].ptr,
        (const int32_t *)ctx->inputs[2].ptr, (__nv_bfloat16 *)ctx->outputs[0].ptr, T, H);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
