// reference.cu — the NCCL baseline of problems/broadcast: one ncclBroadcast
// (bf16, root 0) from rank 0's x into y on every rank (rank 0's y included;
// the other ranks' x is not read), enqueued on ctx->stream. NCCL pipelines
// the broadcast along its ring, so the root sends each byte once: the
// bandwidth-optimal schedule a competent engineer gets with one call. No
// host synchronisation, no scratch. A candidate like any other
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
        n != y->numel) {
        fprintf(stderr,
                "broadcast reference: unexpected tensors (N=%lld, x %lld elements, "
                "y %lld elements)\n",
                (long long)n, (long long)x->numel, (long long)y->numel);
        return 1;
    }
    // Every rank passes its own x: NCCL reads the send buffer only on the root.
    ncclResult_t rc =
        ncclBroadcast(x->ptr, y->ptr, (size_t)n, ncclBfloat16, 0, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "broadcast reference: ncclBroadcast: %s (%s)\n", ncclGetErrorString(rc),
                ncclGetLastError(ctx->comm));
        return 1;
    }
    return 0;
}
