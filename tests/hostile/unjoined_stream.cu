// expect: runtime_error
// unjoined_stream.cu — computes y correctly on ctx->stream (ncclAllReduce), and also forks a
// side stream from ctx->stream where it runs a kernel that keeps one SM busy for 2 ms, but never
// joins that stream back (docs/abi.md rule 4): ctx->stream, and with it the timer, finishes
// before the side stream does. The capture of one kevo_run fails on the unjoined fork
// (cudaErrorStreamCaptureUnjoined): "runtime_error". Were the capture to pass, the busy-device
// check after the timed calls would find the side kernel still running.
// tests/candidates/allreduce_side_stream.cu forks and joins, and is ok.
#include "kevo/kernel.h"

#include <stdio.h>

static cudaStream_t side;
static cudaEvent_t forked;

__global__ void busy_2ms()
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < 2000000ull);
}

extern "C" int kevo_init(kevo_ctx *ctx)
{
    (void)ctx;
    if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&forked, cudaEventDisableTiming) != cudaSuccess)
        return 1;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "unjoined_stream: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    if (cudaEventRecord(forked, ctx->stream) != cudaSuccess ||
        cudaStreamWaitEvent(side, forked, 0) != cudaSuccess)
        return 1;
    busy_2ms<<<1, 32, 0, side>>>();
    return cudaGetLastError() == cudaSuccess ? 0 : 1; // no join
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    (void)ctx;
    cudaStreamSynchronize(side);
    cudaEventDestroy(forked);
    cudaStreamDestroy(side);
}
