// reference.cu — the NCCL baseline of problems/allgather: one ncclAllGather
// (bf16) of this rank's x (N elements) into its y (W*N elements, shard s at
// s*N), enqueued on ctx->stream. ncclAllGather is what any framework calls
// for this operation (FSDP parameter gathers, tensor-parallel activations);
// no host synchronisation, no scratch. A candidate like any other
// (include/kevo/kernel.h): the evaluator loads it, checks candidates against
// its output and times it beside them.
#include "kevo/kernel.h"

#include <stdio.h>

extern "C" int kevo_run(kevo_ctx *ctx)
{
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    int64_t n = kevo_param(ctx, "N", -1);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n <= 0 || n != x->numel ||
        n * ctx->world != y->numel) {
        fprintf(stderr,
                "allgather reference: unexpected tensors (N=%lld, W=%d, x %lld elements, "
                "y %lld elements)\n",
                (long long)n, ctx->world, (long long)x->numel, (long long)y->numel);
        return 1;
    }
    ncclResult_t rc =
        ncclAllGather(x->ptr, y->ptr, (size_t)n, ncclBfloat16, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "allgather reference: ncclAllGather: %s (%s)\n", ncclGetErrorString(rc),
                ncclGetLastError(ctx->comm));
        return 1;
    }
    return 0;
}
