// expect: ok
// printf_loop.cu — a correct all-reduce, then a kernel whose every thread prints 16 lines with
// device printf on every call: tens of MiB of output per job, as a debugging printf left in a
// loop produces by accident. The output is capped per job like any other (flood_output.cu);
// the kernel is only slow.
#include "kevo/kernel.h"

#include <stdio.h>

#define TAG "printf_loop"

__global__ void chatter(int rank)
{
    for (int i = 0; i < 16; i++)
        printf("printf_loop: rank %d block %d thread %d line %d\n", rank, blockIdx.x, threadIdx.x, i);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "%s: ncclAllReduce: %s\n", TAG, ncclGetErrorString(r));
        return 1;
    }
    chatter<<<8, 64, 0, ctx->stream>>>(ctx->rank);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
