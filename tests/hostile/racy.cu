// expect: mismatch
// racy.cu — a push all-reduce without its barrier. Each rank stores its x into slot [rank] of
// every peer's scratch, then at once reads slots [q] of its own scratch for the peers' x, sums
// and writes y. Nothing tells a rank that a peer's stores have landed, so it reads whatever the
// slot held: the previous call's x of that peer (zeros on the first call), a mix, or, when the
// peer ran far enough ahead, the right values. Wrong in most calls, right in some; no hang, no
// error, nothing written outside its scratch and y. Caught by the output comparison of the
// checked calls (fresh inputs each trial, so a previous call's x is always wrong): "mismatch".
// Scratch: W slots of C elements (C = N when it fits, else what the scratch area allows;
// element i uses index i mod C, which only adds more races).
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    __nv_bfloat16 *local;                    // this rank's scratch: W slots of c elements
    __nv_bfloat16 *peer[KEVO_MAX_RANKS];     // every rank's scratch
    int64_t c;
} state;

typedef struct {
    const __nv_bfloat16 *x;
    __nv_bfloat16 *y;
    int64_t n, c;
    __nv_bfloat16 *local, *peer[KEVO_MAX_RANKS];
    int rank, world;
} args;

__global__ void push_then_read(const args a)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < a.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i % a.c;
        __nv_bfloat16 mine = a.x[i];
        for (int q = 0; q < a.world; q++)
            if (q != a.rank)
                a.peer[q][(int64_t)a.rank * a.c + j] = mine; // push to rank q
        float acc = 0; // no barrier: read what is there now
        for (int q = 0; q < a.world; q++)
            acc += __bfloat162float(q == a.rank ? mine : a.local[(int64_t)q * a.c + j]);
        a.y[i] = __float2bfloat16_rn(acc);
    }
}

extern "C" int kevo_init(kevo_ctx *ctx)
{
    state *st = (state *)calloc(1, sizeof *st);
    if (!st)
        return 1;
    ctx->user = st;
    int64_t n = ctx->inputs[0].numel;
    size_t per = (size_t)ctx->world * sizeof(__nv_bfloat16);
    int64_t c = n;
    if ((size_t)c * per > ctx->scratch_bytes_left)
        c = (int64_t)(ctx->scratch_bytes_left / per) / 2048 * 2048;
    if (c < 1)
        c = 1;
    void *local = NULL;
    void *peer[KEVO_MAX_RANKS];
    if (ctx->scratch_alloc(ctx, (size_t)c * per, &local, peer, NULL) != 0) {
        fprintf(stderr, "racy: scratch_alloc failed\n");
        return 1;
    }
    st->local = (__nv_bfloat16 *)local;
    for (int q = 0; q < ctx->world; q++)
        st->peer[q] = (__nv_bfloat16 *)peer[q];
    st->c = c;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const state *st = (const state *)ctx->user;
    args a = {};
    a.x = (const __nv_bfloat16 *)ctx->inputs[0].ptr;
    a.y = (__nv_bfloat16 *)ctx->outputs[0].ptr;
    a.n = ctx->inputs[0].numel;
    a.c = st->c;
    a.local = st->local;
    for (int q = 0; q < ctx->world; q++)
        a.peer[q] = st->peer[q];
    a.rank = ctx->rank;
    a.world = ctx->world;
    push_then_read<<<2 * ctx->sm_count, 256, 0, ctx->stream>>>(a);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user);
    ctx->user = NULL;
}
