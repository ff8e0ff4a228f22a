// reference.cu — the NCCL baseline of problems/reducescatter: one
// ncclReduceScatter (bf16, sum) of this rank's x (N elements) into its y
// (the N/W elements of block `rank`, summed over every rank), enqueued on
// ctx->stream. ncclReduceScatter is what frameworks call for this operation
// (ZeRO/FSDP gradient reduction, sequence-parallel outputs); no host
// synchronisation, no scratch. A candidate like any other
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
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n <= 0 || n % ctx->world != 0 ||
        n != x->numel || n / ctx->world != y->numel) {
        fprintf(stderr,
                "reducescatter reference: unexpected tensors (N=%lld, W=%d, "
                "x %lld elements, y %lld elements)\n",
                (long long)n, ctx->world, (long long)x->numel, (long long)y->numel);
        return 1;
    }
    // recvcount is the block size: y of rank r = sum over ranks of x[r*N/W .. (r+1)*N/W).
    ncclResult_t rc = ncclReduceScatter(x->ptr, y->ptr, (size_t)(n / ctx->world), ncclBfloat16,
                                        ncclSum, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "reducescatter reference: ncclReduceScatter: %s (%s)\n",
                ncclGetErrorString(rc), ncclGetLastError(ctx->comm));
        return 1;
    }
    return 0;
}
