// expect: mismatch
// partial_output.cu — all-reduces only the first half of the elements (ncclAllReduce of N/2
// elements into y) and leaves the second half of y alone. Before every checked call the
// evaluator fills y with NaN (bf16 0xFFFF); the comparison finds the untouched half still NaN
// ("never written") and NaN never passes: "mismatch".
#include "kevo/kernel.h"

#include <stdio.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel / 2, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "partial_output: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
