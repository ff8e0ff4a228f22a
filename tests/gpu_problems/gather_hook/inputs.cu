// inputs.cu — the inputs hook of the gather_hook test problem: scale[i] in
// [0, 5) from the seed, so the evaluator's hook path is exercised.
#include "kevo/kernel.h"

#include <stdint.h>

__global__ void fill_scale(int32_t *scale, int64_t n, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + (uint64_t)i * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
        scale[i] = (int32_t)((z >> 33) % 5);
    }
}

extern "C" int kevo_inputs(kevo_ctx *ctx, int input, uint64_t seed)
{
    const kevo_tensor *t = &ctx->inputs[input];
    if (t->dtype != KEVO_I32)
        return 1;
    fill_scale<<<64, 256, 0, ctx->stream>>>((int32_t *)t->ptr, t->numel, seed);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
