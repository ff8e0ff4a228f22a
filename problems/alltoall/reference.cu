// reference.cu — the NCCL baseline of problems/alltoall: chunk q of this
// rank's x goes to rank q, which stores it at y + rank*C (C = N/W). One NCCL
// group with an ncclSend and an ncclRecv per rank, this rank included, on
// ctx->stream: the way nccl-tests' alltoall and PyTorch's
// all_to_all_single (equal splits) do it. NCCL runs the whole group as one
// kernel and turns the send/recv pair to self into a local copy inside it,
// so the own chunk overlaps with the transfers instead of being a separate
// cudaMemcpyAsync before or after them. No host synchronisation, no
// scratch. A candidate like any other (include/kevo/kernel.h): the evaluator
// loads it, checks candidates against its output and times it beside them.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdio.h>

static int nccl_failed(kevo_ctx *ctx, const char *call, int peer, ncclResult_t rc)
{
    fprintf(stderr, "alltoall reference: %s (peer %d): %s (%s)\n", call, peer,
            ncclGetErrorString(rc), ncclGetLastError(ctx->comm));
    return 1;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    int64_t n = kevo_param(ctx, "N", -1);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n <= 0 || n % ctx->world != 0 ||
        n != x->numel || n != y->numel) {
        fprintf(stderr,
                "alltoall reference: unexpected tensors (N=%lld, W=%d, x %lld elements, "
                "y %lld elements)\n",
                (long long)n, ctx->world, (long long)x->numel, (long long)y->numel);
        return 1;
    }
    size_t c = (size_t)(n / ctx->world);
    const __nv_bfloat16 *src = (const __nv_bfloat16 *)x->ptr;
    __nv_bfloat16 *dst = (__nv_bfloat16 *)y->ptr;

    ncclResult_t rc = ncclGroupStart();
    if (rc != ncclSuccess)
        return nccl_failed(ctx, "ncclGroupStart", -1, rc);
    for (int q = 0; q < ctx->world; q++) {
        rc = ncclSend(src + (size_t)q * c, c, ncclBfloat16, q, ctx->comm, ctx->stream);
        if (rc != ncclSuccess) {
            ncclGroupEnd();
            return nccl_failed(ctx, "ncclSend", q, rc);
        }
        rc = ncclRecv(dst + (size_t)q * c, c, ncclBfloat16, q, ctx->comm, ctx->stream);
        if (rc != ncclSuccess) {
            ncclGroupEnd();
            return nccl_failed(ctx, "ncclRecv", q, rc);
        }
    }
    rc = ncclGroupEnd();
    if (rc != ncclSuccess)
        return nccl_failed(ctx, "ncclGroupEnd", -1, rc);
    return 0;
}
