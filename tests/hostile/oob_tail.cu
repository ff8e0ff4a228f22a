// expect: mismatch
// oob_tail.cu — the classic tail bug of a vectorised kernel: after a correct ncclAllReduce into
// y, a kernel rewrites the last 16-byte vector of y whole (its in-bounds elements unchanged, the
// rest set to 1.0). When N is not a multiple of 8 (the validation size, N = 1000003) that store
// puts up to 7 bf16 past the end of y; when N is a multiple of 8 it writes nothing out of
// bounds. y itself stays right.
// The bytes land between the end of y and the next 4 KiB boundary, where the guard band
// begins. The evaluator sees them only if it guards that gap too (fills and checks from the
// end of each tensor, not from the next 4 KiB boundary); it then reports "mismatch" (written
// outside the tensors).
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

__global__ void rewrite_last_vector(__nv_bfloat16 *y, int64_t n)
{
    if (threadIdx.x != 0 || n % 8 == 0)
        return;
    uint4 *last = reinterpret_cast<uint4 *>(y) + (n - 1) / 8;
    uint4 v = *last;
    __nv_bfloat16 *lane = reinterpret_cast<__nv_bfloat16 *>(&v);
    for (int k = (int)(n % 8); k < 8; k++) // the lanes past the end
        lane[k] = __float2bfloat16_rn(1.0f);
    *last = v;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "oob_tail: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    rewrite_last_vector<<<1, 32, 0, ctx->stream>>>((__nv_bfloat16 *)y->ptr, y->numel);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
