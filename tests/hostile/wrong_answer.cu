// expect: mismatch
// wrong_answer.cu — writes y = 2 * x (this rank's input doubled) instead of the sum over ranks.
// Every element of y is written and nothing else is touched, so the only thing that fails is
// the comparison with the reference after the first checked call: |2 x_r - sum_q x_q| is far
// above the tolerance (0.25 + 2^-6 |ref|) for most elements of normal(0, 1) inputs.
#include "kevo/kernel.h"

#include <cuda_bf16.h>

__global__ void twice(const __nv_bfloat16 *x, __nv_bfloat16 *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(2.0f * __bfloat162float(x[i]));
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    int64_t blocks = (x->numel + 255) / 256;
    if (blocks > 4 * (int64_t)ctx->sm_count)
        blocks = 4 * (int64_t)ctx->sm_count;
    if (blocks < 1)
        blocks = 1;
    twice<<<(int)blocks, 256, 0, ctx->stream>>>((const __nv_bfloat16 *)x->ptr,
                                                 (__nv_bfloat16 *)y->ptr, x->numel);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
