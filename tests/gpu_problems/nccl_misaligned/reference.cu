// reference.cu — nccl_misaligned's reference: ncclAllGather of ids into symmetric scratch,
// copied to ids_all; x copied into symmetric scratch and ncclReduceScatter'd from there into
// y. Both collectives run on window buffers (scratch and y) when the harness places the
// reference in the window, as the user's problem that found NCCL's defect did.
#include "kevo/kernel.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    void *gathered; // W*G int32
    void *staged;   // W*N bf16
} Scratch;

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int64_t G = kevo_param(ctx, "G", 0), N = kevo_param(ctx, "N", 0);
    Scratch *s = (Scratch *)calloc(1, sizeof *s);
    if (!s || G <= 0 || N <= 0) {
        fprintf(stderr, "nccl_misaligned reference: bad G=%lld N=%lld or no memory\n", (long long)G,
                (long long)N);
        free(s);
        return 1;
    }
    ctx->user = s;
    if (ctx->scratch_alloc(ctx, (size_t)(ctx->world * G) * 4, &s->gathered, NULL, NULL) ||
        ctx->scratch_alloc(ctx, (size_t)(ctx->world * N) * 2, &s->staged, NULL, NULL)) {
        fprintf(stderr, "nccl_misaligned reference: symmetric scratch exhausted\n");
        return 1;
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user);
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const Scratch *s = (const Scratch *)ctx->user;
    const kevo_tensor *ids = &ctx->inputs[0], *x = &ctx->inputs[1];
    const kevo_tensor *ids_all = &ctx->outputs[0], *y = &ctx->outputs[1];
    const int64_t G = kevo_param(ctx, "G", 0), N = kevo_param(ctx, "N", 0);
    ncclResult_t rc =
        ncclAllGather(ids->ptr, s->gathered, (size_t)G, ncclInt32, ctx->comm, ctx->stream);
    if (rc == ncclSuccess &&
        cudaMemcpyAsync(ids_all->ptr, s->gathered, ids_all->bytes, cudaMemcpyDeviceToDevice,
                        ctx->stream) == cudaSuccess &&
        cudaMemcpyAsync(s->staged, x->ptr, x->bytes, cudaMemcpyDeviceToDevice, ctx->stream) ==
            cudaSuccess)
        rc = ncclReduceScatter(s->staged, y->ptr, (size_t)N, ncclBfloat16, ncclSum, ctx->comm,
                               ctx->stream);
    else if (rc == ncclSuccess)
        rc = ncclUnhandledCudaError;
    if (rc != ncclSuccess) {
        fprintf(stderr, "nccl_misaligned reference: %s\n", ncclGetErrorString(rc));
        return 1;
    }
    return 0;
}
