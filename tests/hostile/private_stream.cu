// expect: runtime_error
// private_stream.cu — does correct work on the wrong stream: kevo_init creates its own
// non-blocking stream, and kevo_run launches a correct one-shot all-reduce kernel (start and
// end barriers with epochs, bounded waits) there and returns at once, leaving ctx->stream empty.
// The evaluator captures one kevo_run of ctx->stream into a graph: the graph has no nodes (the
// kernel ran outside the capture), so the job ends as "runtime_error" (kevo_run put no work on
// ctx->stream). Without the capture, the timer would see empty intervals; the check after the
// timed calls (the device stays busy after ctx->stream is done) is the second line of defence.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdio.h>

#define CTAS 8
#define THREADS 256

typedef struct {
    const __nv_bfloat16 *x[KEVO_MAX_RANKS];
    __nv_bfloat16 *y;
    int64_t n;
    uint64_t *pad, *peer_pad[KEVO_MAX_RANKS];
    int rank, world;
    uint64_t epoch;
} args;

__device__ void barrier(const args &a, int phase)
{
    __syncthreads();
    if ((int)threadIdx.x < a.world) {
        int q = threadIdx.x;
        size_t slot = ((size_t)phase * CTAS + blockIdx.x) * a.world;
        asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(a.peer_pad[q] + slot + a.rank),
                     "l"(a.epoch)
                     : "memory");
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        for (;;) {
            uint64_t v;
            asm volatile("ld.acquire.sys.global.u64 %0, [%1];"
                         : "=l"(v)
                         : "l"(a.pad + slot + q)
                         : "memory");
            if (v >= a.epoch)
                break;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            if (t - t0 > 5000000000ull)
                __trap();
        }
    }
    __syncthreads();
}

__global__ void __launch_bounds__(THREADS) oneshot(const args a)
{
    barrier(a, 0);
    for (int64_t i = blockIdx.x * (int64_t)THREADS + threadIdx.x; i < a.n; i += CTAS * THREADS) {
        float acc = 0;
        for (int p = 0; p < a.world; p++)
            acc += __bfloat162float(a.x[p][i]);
        a.y[i] = __float2bfloat16_rn(acc);
    }
    barrier(a, 1);
}

static cudaStream_t mine;

extern "C" int kevo_init(kevo_ctx *ctx)
{
    (void)ctx;
    return cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking) == cudaSuccess ? 0 : 1;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    args a = {};
    for (int p = 0; p < ctx->world; p++) {
        a.x[p] = (const __nv_bfloat16 *)ctx->inputs[0].peer[p];
        a.peer_pad[p] = ctx->signal_peer[p];
    }
    a.y = (__nv_bfloat16 *)ctx->outputs[0].ptr;
    a.n = ctx->inputs[0].numel;
    a.pad = ctx->signal;
    a.rank = ctx->rank;
    a.world = ctx->world;
    a.epoch = ctx->call_index + 1;
    oneshot<<<CTAS, THREADS, 0, mine>>>(a); // not ctx->stream
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    (void)ctx;
    cudaStreamSynchronize(mine);
    cudaStreamDestroy(mine);
}
