// expect: mismatch
// oob_write.cu — computes y correctly (ncclAllReduce), then a kernel writes the 4096 bytes that
// follow the end of y: a store loop that runs "a little" past its tensor but stays inside the
// symmetric window. In the evaluator's layout every tensor is followed, at the next 4 KiB
// boundary, by a 4 KiB guard band of seeded bytes; a run of 4096 bytes starting at the end of
// y always covers the start of that band (and never goes beyond it), so the guard check after
// the first checked call finds changed bytes and reports "mismatch" (written outside the
// tensors), even though y itself is right.
#include "kevo/kernel.h"

#include <stdio.h>

__global__ void scribble(unsigned char *p, int bytes)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += gridDim.x * blockDim.x)
        p[i] = (unsigned char)(0xA5 ^ i);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "oob_write: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    scribble<<<16, 256, 0, ctx->stream>>>((unsigned char *)y->ptr + y->bytes, 4096);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
