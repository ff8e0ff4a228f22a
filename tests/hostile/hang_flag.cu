// expect: hang
// hang_flag.cu — waits for a flag that no rank ever sets, with no time bound.
// Every rank launches the same one-CTA kernel: its first thread spins with ld.acquire.sys on the
// last word of this rank's own signal pad until it holds call_index + 1, which nobody writes,
// and there is no %globaltimer deadline and no __trap(). The kernel never ends, no CUDA error is
// ever raised and no rank fails first, so the only thing that can end the job is the
// supervisor's deadline: it records "hang" and kills and restarts the group.
#include "kevo/kernel.h"

#include <cuda_bf16.h>

__global__ void wait_then_copy(const uint64_t *flag, uint64_t want, const __nv_bfloat16 *x,
                               __nv_bfloat16 *y, int64_t n)
{
    if (threadIdx.x == 0) {
        uint64_t v;
        do
            asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(flag) : "memory");
        while (v < want);
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) // never reached
        y[i] = x[i];
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const uint64_t *flag = ctx->signal + ctx->signal_words - 1; // nobody writes this word
    wait_then_copy<<<1, 256, 0, ctx->stream>>>(flag, ctx->call_index + 1,
                                                (const __nv_bfloat16 *)ctx->inputs[0].ptr,
                                                (__nv_bfloat16 *)ctx->outputs[0].ptr,
                                                ctx->inputs[0].numel);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
