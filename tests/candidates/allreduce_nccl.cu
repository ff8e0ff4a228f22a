// allreduce_nccl.cu — the trivially correct candidate: one ncclAllReduce (bf16, sum) from this
// rank's x into its y on ctx->stream, as the reference does. The GPU tests run it after every
// hostile candidate to show that the evaluator's group recovered.
#include "kevo/kernel.h"

#include <stdio.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel) {
        fprintf(stderr, "allreduce_nccl: expected bf16 x and y of equal size\n");
        return 1;
    }
    ncclResult_t r = ncclAllReduce(x->ptr, y->ptr, (size_t)x->numel, ncclBfloat16, ncclSum,
                                   ctx->comm, ctx->stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "allreduce_nccl: ncclAllReduce: %s\n", ncclGetErrorString(r));
        return 1;
    }
    return 0;
}
