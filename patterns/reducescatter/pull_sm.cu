// pull_sm.cu — reduce-scatter (bf16, sum) in one kernel: every rank pulls its own block of
// every rank's x with 16-byte SM loads through the symmetric window and sums it in fp32.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank):
//  1. Start barrier (kevo_cta_barrier, phase 0): CTA b of this rank meets CTA b of every rank.
//     On entry only this rank's x is known to hold this call's values; a peer's x does once
//     that peer has entered the call, so no peer data is read before this barrier.
//  2. Pull and sum. Rank r owns block r: y[i] = sum_s x_s[r*C + i], C = N/W. Each thread
//     takes a grid-stride share of 16-byte vectors (8 bf16) of the block and loads vector i
//     from every rank (x.peer[s] + r*C, this rank's own x included), UNROLL vectors per rank
//     in flight, then adds them in rank order 0, 1, ..., W-1 in fp32 and rounds once
//     (kevo_sum_bf16x8): at W = 2 that is bit for bit the reference's x_0 + x_1. The elements
//     after the last whole vector are summed one at a time. When r*C is not a multiple of 8
//     elements (the validation size: C = 400012 / 200006 / 100003), the blocks of x are not
//     16-byte aligned and the whole block is summed one element at a time (slow, correct;
//     that size is not timed).
//  3. End barrier (phase 1): a CTA arrives only after all of its loads, so once CTA b of every
//     rank has passed it nobody reads this rank's x any more and the caller may overwrite it.
//
// Why it should be fast: one launch and two barrier round trips at small sizes (64 KiB and
// 1 MiB): every thread has all of its loads in flight at once (one vector per thread and rank
// when the grid is large enough), so the data costs one NVLink load round trip. At large sizes
// it is bound by NVLink reads (~370 GB/s a direction): each rank reads (W-1)/W * 2N bytes from
// its peers once and writes 2N/W bytes of y, with no intermediate copy, against NCCL's ring
// (739 us at 256 MiB, W = 2; this kernel should take about 2N/2 / 370 GB/s = 363 us).
//
// Synchronisation: peers' x are read only between the two barriers; y is written only on this
// rank, by this rank. Barrier flags are words [phase][cta][rank] of the signal pad holding
// epochs, written with st.release.sys and read with ld.acquire.sys (kevo_sync.cuh), never
// reset; every wait gives up after 5 s with __trap(). The epoch is the device's
// (kevo_epoch_begin / kevo_epoch_end on channel 0, one launch per call), so a call replayed
// from a CUDA graph is as correct as one made from the host.
//
// Grid: the same on every rank (it depends on C, the SM count and the pad only, never on the
// alignment of a pointer: the scalar path strides over whatever grid it gets), at most
// CTAS_PER_SM CTAs per SM (checked against the occupancy in kevo_init) so that every CTA is
// resident while CTAs of other ranks wait for it.
//
// kevo:pattern problem=reducescatter transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=64,128,256,512
// kevo:param UNROLL default=2 values=1,2,4,8
#define CTAS_PER_SM 2
#define THREADS 256
#define UNROLL 2

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

// CTAs per SM that __launch_bounds__ asks for (2048 threads per SM at most).
constexpr int kMinBlocks = THREADS * CTAS_PER_SM <= 2048 ? CTAS_PER_SM : 2048 / THREADS;

struct Args {
    const __nv_bfloat16 *src[KEVO_MAX_RANKS]; // x_s + rank*C for every rank s
    __nv_bfloat16 *y;                         // this rank's y (C elements)
    int64_t c;                                // elements of y
    int vector;                               // every src[s] and y 16-byte aligned
    int world;
    kevo_pads p;
};

struct State {
    int max_grid; // co-resident CTAs
};

// Block sum for a world of W ranks (W known at compile time: loads unrolled).
template <int W> __device__ __forceinline__ void sum_block(const Args &a)
{
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int64_t c = a.c;
    int64_t done = 0; // elements handled by the vector path
    if (a.vector) {
        const int64_t nvec = c >> 3;
        const uint4 *src[W];
#pragma unroll
        for (int s = 0; s < W; s++)
            src[s] = reinterpret_cast<const uint4 *>(a.src[s]);
        uint4 *y = reinterpret_cast<uint4 *>(a.y);
        int64_t i = tid;
        for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
            uint4 v[UNROLL][W];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int s = 0; s < W; s++)
                    v[u][s] = src[s][i + u * stride];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                y[i + u * stride] = kevo_sum_bf16x8<W>(v[u]);
        }
        for (; i < nvec; i += stride) {
            uint4 v[W];
#pragma unroll
            for (int s = 0; s < W; s++)
                v[s] = src[s][i];
            y[i] = kevo_sum_bf16x8<W>(v);
        }
        done = nvec << 3;
    }
    // the tail after the last whole vector, or everything when a pointer is misaligned
    for (int64_t e = done + tid; e < c; e += stride) {
        float acc = __bfloat162float(a.src[0][e]);
#pragma unroll
        for (int s = 1; s < W; s++)
            acc += __bfloat162float(a.src[s][e]);
        a.y[e] = __float2bfloat16_rn(acc);
    }
}

__global__ void __launch_bounds__(THREADS, kMinBlocks)
    reducescatter_pull_sm(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    kevo_cta_barrier(p, 0); // start: every rank's x holds this call's values

    switch (a.world) {
    case 1: sum_block<1>(a); break;
    case 2: sum_block<2>(a); break;
    case 3: sum_block<3>(a); break;
    case 4: sum_block<4>(a); break;
    case 5: sum_block<5>(a); break;
    case 6: sum_block<6>(a); break;
    case 7: sum_block<7>(a); break;
    default: sum_block<8>(a); break;
    }

    kevo_cta_barrier(p, 1); // end: no rank reads this rank's x after this
    kevo_epoch_end(p);
}

int check_tensors(const kevo_ctx *ctx, const char **why)
{
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS) {
        *why = "bad context (tensors or world)";
        return -1;
    }
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel * W) {
        *why = "expected bf16 x of N and y of N/W elements";
        return -1;
    }
    return 0;
}

} // namespace

constexpr const char *kWho = "reducescatter/pull_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)reducescatter_pull_sm, THREADS, 0, CTAS_PER_SM,
                         &per_sm) != 0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const char *why = NULL;
    if (!st)
        return 1;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t c = y->numel;

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.y = (__nv_bfloat16 *)y->ptr;
    a.c = c;
    a.world = W;
    bool vec = kevo_aligned16(y->ptr);
    for (int s = 0; s < W; s++) {
        a.src[s] = (const __nv_bfloat16 *)x->peer[s] + (int64_t)r * c;
        vec = vec && kevo_aligned16(a.src[s]);
    }
    a.vector = vec;
    a.p = kevo_pads_of(ctx);

    // Same grid on every rank: one vector per thread when that fits, from C alone.
    const int64_t items = (c + 7) / 8;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t most = st->max_grid < pad_limit ? st->max_grid : pad_limit;
    const int64_t grid = kevo_clamp_grid((items + THREADS - 1) / THREADS, most);
    reducescatter_pull_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
