// expect: runtime_error
// alloc_all.cu — leaks 8 GiB of device memory per call: every kevo_run does cudaMalloc(8 GiB),
// never frees it, and returns 1 as soon as an allocation fails; while allocations succeed it
// computes y correctly (ncclAllReduce). After about 16 calls on a 141 GB H200 (or at once if
// the runtime refuses cudaMalloc while ctx->stream is being captured) kevo_run returns non-zero,
// which the evaluator reports as "runtime_error" (kevo_run returned 1). The allocation is tried
// before anything is enqueued, so a failing rank leaves no half-issued collective behind.
#include "kevo/kernel.h"

#include <stdio.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t)8 << 30);
    if (e != cudaSuccess) {
        fprintf(stderr, "alloc_all: cudaMalloc(8 GiB) at call %llu: %s\n",
                (unsigned long long)ctx->call_index, cudaGetErrorString(e));
        return 1;
    }
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "alloc_all: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
