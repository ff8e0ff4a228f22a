// reference.cu — the NCCL baseline of tests/gpu_problems/inflated_cost, problems/allreduce's:
// one ncclAllReduce (bf16, sum) from this rank's x into its y, enqueued on ctx->stream. It is a
// candidate like any other (include/kevo/kernel.h): the evaluator loads it,
// checks candidates against its output and times it beside them.
#include "kevo/kernel.h"

#include <stdio.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    size_t n = (size_t)kevo_param(ctx, "N", -1);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || (int64_t)n != x->numel ||
        (int64_t)n != y->numel) {
        fprintf(stderr,
                "allreduce reference: unexpected tensors (N=%zu, x %lld elements, "
                "y %lld elements)\n",
                n, (long long)x->numel, (long long)y->numel);
        return 1;
    }
    ncclResult_t rc =
        ncclAllReduce(x->ptr, y->ptr, n, ncclBfloat16, ncclSum, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "allreduce reference: ncclAllReduce: %s (%s)\n", ncclGetErrorString(rc),
                ncclGetLastError(ctx->comm));
        return 1;
    }
    return 0;
}
