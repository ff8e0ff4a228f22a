// expect: mismatch
// stale_result.cu — computes the right answer once, then serves it from a cache: the first call
// that really runs does ncclAllReduce into y and copies y into its scratch; every later call
// only copies that scratch back into y (a kernel that "remembers" its result). The captured
// call (cudaStreamIsCapturing) is treated as not having run, so the first checked call is right.
// The next checked call has fresh inputs (every trial draws new ones), so the copied result is
// the sum of the previous inputs: "mismatch". (With one trial, the check after timing, on
// other inputs again, catches it.)
#include "kevo/kernel.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    void *saved; // scratch: one y
    int have;    // a result is saved
} state;

extern "C" int kevo_init(kevo_ctx *ctx)
{
    state *st = (state *)calloc(1, sizeof *st);
    if (!st)
        return 1;
    ctx->user = st;
    if (ctx->scratch_alloc(ctx, ctx->outputs[0].bytes, &st->saved, NULL, NULL) != 0) {
        fprintf(stderr, "stale_result: scratch_alloc failed\n");
        return 1;
    }
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    state *st = (state *)ctx->user;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (st->have)
        return cudaMemcpyAsync(y->ptr, st->saved, y->bytes, cudaMemcpyDeviceToDevice,
                               ctx->stream) == cudaSuccess ? 0 : 1;
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "stale_result: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    if (cudaMemcpyAsync(st->saved, y->ptr, y->bytes, cudaMemcpyDeviceToDevice, ctx->stream) !=
        cudaSuccess)
        return 1;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(ctx->stream, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone)
        st->have = 1;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user);
    ctx->user = NULL;
}
