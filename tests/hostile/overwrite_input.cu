// expect: mismatch
// overwrite_input.cu — computes y correctly (ncclAllReduce), then also stores the result into
// its own input x (an "in place" habit). Inputs are read-only: the evaluator checksums every
// rank's inputs before the candidate runs and compares after it; x changed, so the job is a
// "mismatch" (input x was modified) although y is right.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdio.h>

__global__ void copy(const __nv_bfloat16 *from, __nv_bfloat16 *to, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        to[i] = from[i];
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "overwrite_input: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    copy<<<2 * ctx->sm_count, 256, 0, ctx->stream>>>((const __nv_bfloat16 *)y->ptr,
                                                     (__nv_bfloat16 *)x->ptr, x->numel);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
