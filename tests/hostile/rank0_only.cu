// expect: hang
// rank0_only.cu — a collective step that only one rank takes. Rank 0 launches a one-shot
// kernel whose start barrier (epochs in the signal pad, no time bound) waits for every peer's
// arrival; the other ranks launch only a local kernel (y = x) and never arrive. The other
// ranks' kernels do put work on ctx->stream, so the captured graph is not empty anywhere and the
// capture check passes; in the first checked call rank 0's kernel waits forever while the
// others finish, wait for rank 0 in the evaluator's agreement step, and nobody answers: the
// supervisor's deadline records "hang".
#include "kevo/kernel.h"

#include <cuda_bf16.h>

typedef struct {
    const __nv_bfloat16 *x[KEVO_MAX_RANKS];
    __nv_bfloat16 *y;
    int64_t n;
    uint64_t *pad, *peer_pad[KEVO_MAX_RANKS];
    int rank, world;
    uint64_t epoch;
} args;

__global__ void oneshot_unbounded(const args a)
{
    if ((int)threadIdx.x < a.world) {
        int q = threadIdx.x;
        size_t slot = (size_t)blockIdx.x * a.world;
        asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(a.peer_pad[q] + slot + a.rank),
                     "l"(a.epoch)
                     : "memory");
        uint64_t v;
        do
            asm volatile("ld.acquire.sys.global.u64 %0, [%1];"
                         : "=l"(v)
                         : "l"(a.pad + slot + q)
                         : "memory");
        while (v < a.epoch); // no deadline
    }
    __syncthreads();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float acc = 0;
        for (int p = 0; p < a.world; p++)
            acc += __bfloat162float(a.x[p][i]);
        a.y[i] = __float2bfloat16_rn(acc);
    }
}

__global__ void local_copy(const __nv_bfloat16 *x, __nv_bfloat16 *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i];
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (ctx->rank == 0) {
        args a = {};
        for (int p = 0; p < ctx->world; p++) {
            a.x[p] = (const __nv_bfloat16 *)x->peer[p];
            a.peer_pad[p] = ctx->signal_peer[p];
        }
        a.y = (__nv_bfloat16 *)y->ptr;
        a.n = x->numel;
        a.pad = ctx->signal;
        a.rank = ctx->rank;
        a.world = ctx->world;
        a.epoch = ctx->call_index + 1;
        oneshot_unbounded<<<8, 256, 0, ctx->stream>>>(a);
    } else {
        local_copy<<<8, 256, 0, ctx->stream>>>((const __nv_bfloat16 *)x->ptr,
                                               (__nv_bfloat16 *)y->ptr, x->numel);
    }
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
