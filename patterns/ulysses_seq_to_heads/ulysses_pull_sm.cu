// ulysses_pull_sm.cu — DeepSpeed-Ulysses sequence-to-heads all-to-all in one kernel: every
// rank pulls its heads straight from every peer's x into its own y with 16-byte SM loads.
//
// What one call does (one kernel on ctx->stream, same grid on every rank):
//  1. Start barrier (kevo_cta_barrier phase 0): CTA b of this rank meets CTA b of every rank.
//     After it every peer has entered this call, so its x holds this call's values.
//  2. Copy. y_r[b, q*S/W + i, h, d] = x_q[b, i, r*NH/W + h, d]: for every (b, q, i) one
//     contiguous run of R = NH/W*D elements of x_q (row stride NH*D, offset r*NH/W*D) lands in
//     one contiguous run of y. The grid strides over all of y in units of 16 bytes (8 bf16);
//     the rows are enumerated (b, i, k) with k fastest and q = (r + k) mod W, so at every moment
//     the threads of a rank read from all W sources at once (every link busy, no hot spot on
//     one peer), and each warp reads 512 contiguous bytes of one run. UNROLL loads are issued
//     per thread before the first store, to keep enough bytes in flight over NVLink.
//     When R is not a multiple of 8 or a pointer is not 16-byte aligned (the validation size:
//     D = 99), the same loop runs one bf16 at a time (correct, not fast; that size is not
//     timed).
//  3. End barrier (phase 1): CTA b waits until CTA b of every rank has finished its loads.
//     Every CTA of every rank arrives only after all of its loads, so once all CTAs of this
//     rank have passed, no peer reads this rank's x any more and the call may return.
//
// Why it should be fast: the reference packs, exchanges with ncclSend/Recv and (B > 1)
// unpacks: two or three passes over HBM plus NCCL's protocol. Here x is read once (from the
// peers, over NVLink) and y is written once, in one launch. Small sizes (S256: 1 MiB of x a
// rank) are latency-bound: one launch, one barrier round trip (~2-3 us) and one wave of loads
// (every thread moves about one vector). Large sizes (B2xS32768: 256 MiB) are bound by SM
// loads over NVLink (~370 GB/s a direction, measured), against NCCL's 670 us at W = 2 for
// 128 MiB each way: ~360 us is the target.
//
// Synchronisation: peers' x are only read between the start and the end barrier; the start
// barrier's acquire makes the peer's entry (and so its x, written before its launch) visible;
// y is written only on this rank, so nothing of a peer's is written. Flags are epochs in the
// signal pad, [phase][cta][rank], never reset; waits are bounded (5 s, then __trap). The epoch
// is the device's (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is
// as correct as one made from the host.
//
// kevo:pattern problem=ulysses_seq_to_heads transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=512 values=128,256,512,1024
// kevo:param UNROLL default=4 values=1,2,4,8
#define CTAS_PER_SM 2
#define THREADS 512
#define UNROLL 4

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

constexpr int kMinBlocks = CTAS_PER_SM * THREADS <= 2048 ? CTAS_PER_SM : 2048 / THREADS;

struct Args {
    const void *x[KEVO_MAX_RANKS]; // every rank's x (x[rank] is this rank's)
    void *y;                       // this rank's y
    uint32_t total;                // units (16-byte vectors or bf16) of y
    uint32_t row_units;            // R in units
    uint32_t x_stride_units;       // NH*D in units
    uint32_t x_off_units;          // rank*NH/W*D in units
    uint32_t S, Sl, W, rank;
    int vec; // 16-byte units (else bf16)
    kevo_pads p;
};

struct State {
    int max_grid; // co-resident CTAs (occupancy x SMs), same on every rank
};

// a.x[q] by a chain of selects: no local-memory copy of the array, and the compiler keeps
// the global address space (LDG rather than generic LD).
__device__ __forceinline__ const void *pick(const Args &a, uint32_t q)
{
    const void *p = a.x[0];
#pragma unroll
    for (uint32_t k = 1; k < KEVO_MAX_RANKS; k++)
        if (q == k)
            p = a.x[k];
    return p;
}

// Copies the units of y in grid-stride order, UNROLL loads in flight per thread.
template <typename T> __device__ __forceinline__ void copy_all(const Args &a, T *y)
{
    const uint32_t stride = gridDim.x * THREADS;
    const uint32_t Ru = a.row_units, W = a.W, Sl = a.Sl;
    const uint32_t rows_per_b = Sl * W;
    for (uint32_t u0 = blockIdx.x * THREADS + threadIdx.x; u0 < a.total; u0 += stride * UNROLL) {
        T v[UNROLL];
        uint64_t dst[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const uint32_t u = u0 + (uint32_t)k * stride;
            if (u < a.total) {
                const uint32_t L = u / Ru, col = u - L * Ru; // logical row, unit in the row
                const uint32_t b = L / rows_per_b, rem = L - b * rows_per_b;
                const uint32_t i = rem / W, kq = rem - i * W;
                uint32_t q = kq + a.rank;
                if (q >= W)
                    q -= W;
                const uint64_t src =
                    (uint64_t)(b * Sl + i) * a.x_stride_units + a.x_off_units + col;
                dst[k] = ((uint64_t)b * a.S + (uint64_t)q * Sl + i) * Ru + col;
                v[k] = reinterpret_cast<const T *>(pick(a, q))[src];
            }
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++)
            if (u0 + (uint32_t)k * stride < a.total)
                y[dst[k]] = v[k];
    }
}

__global__ void __launch_bounds__(THREADS, kMinBlocks) ulysses_pull_sm(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    kevo_cta_barrier(p, 0); // start: every rank's x holds this call's values

    if (a.vec)
        copy_all<uint4>(a, (uint4 *)a.y);
    else
        copy_all<unsigned short>(a, (unsigned short *)a.y);

    kevo_cta_barrier(p, 1); // end: no rank reads this rank's x after this
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "ulysses_seq_to_heads/ulysses_pull_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)ulysses_pull_sm, THREADS, 0, CTAS_PER_SM, &per_sm) !=
        0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context");
    const int64_t B = kevo_param(ctx, "B", 0), S = kevo_param(ctx, "S", 0);
    const int64_t NH = kevo_param(ctx, "NH", 0), D = kevo_param(ctx, "D", 0);
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (B < 1 || S < 1 || NH < 1 || D < 1 || S % W || NH % W || x->dtype != KEVO_BF16 ||
        y->dtype != KEVO_BF16 || x->numel != B * (S / W) * NH * D || y->numel != x->numel)
        return kevo_fail(kWho, "unexpected sizes or tensors");
    const int64_t Sl = S / W, R = NH / W * D;
    bool vec = R % 8 == 0 && kevo_aligned16(y->ptr);
    Args a = {};
    for (int q = 0; q < W; q++) {
        a.x[q] = x->peer[q];
        vec = vec && kevo_aligned16(x->peer[q]);
    }
    const int64_t unit = vec ? 8 : 1;
    const int64_t total = y->numel / unit;
    if (y->numel >= ((int64_t)1 << 31))
        return kevo_fail(kWho, "%lld elements are too many", (long long)y->numel);
    a.y = y->ptr;
    a.total = (uint32_t)total;
    a.row_units = (uint32_t)(R / unit);
    a.x_stride_units = (uint32_t)(NH * D / unit);
    a.x_off_units = (uint32_t)(ctx->rank * R / unit);
    a.S = (uint32_t)S;
    a.Sl = (uint32_t)Sl;
    a.W = (uint32_t)W;
    a.rank = (uint32_t)ctx->rank;
    a.vec = vec;
    a.p = kevo_pads_of(ctx);

    // The grid depends only on sizes, W and the SM count (not on a pointer's alignment): the
    // same on every rank.
    const int64_t sized_units = y->numel / (R % 8 == 0 ? 8 : 1);
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t most = st->max_grid < pad_limit ? st->max_grid : pad_limit;
    const int64_t grid = kevo_clamp_grid((sized_units + THREADS - 1) / THREADS, most);
    ulysses_pull_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
