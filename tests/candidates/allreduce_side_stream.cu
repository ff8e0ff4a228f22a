// allreduce_side_stream.cu — a correct candidate that runs its work on a side stream, as
// docs/abi.md rule 4 allows: kevo_init creates the stream and two events; every kevo_run forks
// the side stream from ctx->stream (an event recorded there, waited for on the side), runs one
// ncclAllReduce (bf16, sum) there, and joins it back (an event recorded on the side, waited for
// on ctx->stream). The GPU tests expect "ok": the capture holds the fork and the join, the
// timer's events on ctx->stream enclose the collective, and the device is idle once ctx->stream
// is. tests/hostile/unjoined_stream.cu is the same call without the join.
#include "kevo/kernel.h"

#include <stdio.h>

static cudaStream_t side;
static cudaEvent_t forked, joined;

extern "C" int kevo_init(kevo_ctx *ctx)
{
    (void)ctx;
    if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&forked, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&joined, cudaEventDisableTiming) != cudaSuccess) {
        fprintf(stderr, "allreduce_side_stream: creating the side stream or its events failed\n");
        return 1;
    }
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (cudaEventRecord(forked, ctx->stream) != cudaSuccess ||
        cudaStreamWaitEvent(side, forked, 0) != cudaSuccess) {
        fprintf(stderr, "allreduce_side_stream: fork failed\n");
        return 1;
    }
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, side);
    if (r != ncclSuccess) {
        fprintf(stderr, "allreduce_side_stream: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    if (cudaEventRecord(joined, side) != cudaSuccess ||
        cudaStreamWaitEvent(ctx->stream, joined, 0) != cudaSuccess) {
        fprintf(stderr, "allreduce_side_stream: join failed\n");
        return 1;
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    (void)ctx;
    cudaEventDestroy(forked);
    cudaEventDestroy(joined);
    cudaStreamDestroy(side);
}
