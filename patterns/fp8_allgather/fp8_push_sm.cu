// fp8_push_sm.cu — FP8 weight all-gather in one kernel: every rank quantises its own bf16
// shard (e4m3, one fp32 scale per 128 elements) and pushes the bytes straight into every
// rank's q and scales with 16-byte SM stores.
//
// What one call does (one kernel on ctx->stream, same grid on every rank):
//  1. Each thread owns 16 consecutive elements (one 8-lane group of a warp = one block of 128,
//     a warp = 4 blocks) for UNROLL items at a time, grid-stride. It loads its 32 bytes of x
//     (two 16-byte loads), and the group computes amax with three xor-shuffles; then
//     s = amax == 0 ? 1 : __fdiv_rn(amax, 448) and q = satfinite RN e4m3 of __fdiv_rn(x, s)
//     (cvt.rn.satfinite.e4m3x2.f32, two at a time), exactly the prescribed arithmetic, so the
//     bits equal the reference's. The first batch is loaded and quantised BEFORE the start
//     barrier, so the HBM read overlaps the barrier's round trip.
//  2. Start barrier (kevo_cta_barrier phase 0): every peer has entered this call (its outputs
//     are no longer being poisoned/prepared by the harness for an earlier call).
//  3. Each thread stores its 16 q bytes as one 16-byte store into q[rank*N + i] of every rank
//     (destinations in the order rank, rank+1, ... so the ranks do not all hit one peer
//     first), and lane 0 of each group stores the block's scale into scales[rank*nb + b].
//     Where this rank's slice of q is not 16-byte aligned (odd N, odd rank: the validation
//     size) or the block is the short last one, the bytes are stored one by one.
//  4. End barrier (phase 1): CTA b of every rank has finished all of its stores (into this
//     rank's outputs among others) before CTA b of this rank passes; when all CTAs have
//     passed, this rank's q and scales are complete, so the call may return.
//
// Why it should be fast: the reference quantises into staging, then runs two ncclAllGathers
// (13.7 us at 64 KiB, 796 us at 256 MiB for W = 2). Here x is read once, the fp8 bytes go
// straight to their final place on every rank (no staging, no second pass), in one launch.
// Small sizes: one launch + one barrier round trip, the quantisation hidden under it. Large
// sizes: bound by SM stores over NVLink (~370 GB/s a direction, measured): 128 MiB each way
// at W = 2 is ~360 us, while both directions of the link are used at once.
//
// Synchronisation: no peer's input is read. Peers' outputs are written only after the start
// barrier (the peer is in this call) and this rank returns only after the end barrier (every
// peer's stores into this rank are done: each CTA's stores come before its release flag
// through __syncthreads + st.release.sys). Flags: epochs, [phase][cta][rank] words of the
// signal pad, never reset; waits bounded (5 s, then __trap). The epoch is the device's
// (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as correct as
// one made from the host.
//
// kevo:pattern problem=fp8_allgather transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512,1024
// kevo:param UNROLL default=2 values=1,2,4
#define CTAS_PER_SM 2
#define THREADS 256
#define UNROLL 2

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kMinBlocks = CTAS_PER_SM * THREADS <= 2048 ? CTAS_PER_SM : 2048 / THREADS;
constexpr int kBlock = 128;
constexpr float kE4m3Max = 448.0f;

struct Args {
    const __nv_bfloat16 *x;        // this rank's shard
    uint8_t *q[KEVO_MAX_RANKS];    // every rank's q [W*N]
    float *scales[KEVO_MAX_RANKS]; // every rank's scales [W*nb]
    int64_t n, nb;
    int64_t items; // nb * 8: 16-element pieces
    int x_vec;     // x 16-byte aligned
    int q_vec;     // q + rank*N 16-byte aligned on every rank
    kevo_pads p;
};

struct State {
    int max_grid;
};

// Rank d's q and scales slices of this rank, by a chain of selects (no local-memory copy of
// the arrays; the compiler keeps the global address space: STG rather than generic ST).
__device__ __forceinline__ uint8_t *q_of(const Args &a, int d)
{
    uint8_t *p = a.q[0];
#pragma unroll
    for (int k = 1; k < KEVO_MAX_RANKS; k++)
        if (d == k)
            p = a.q[k];
    return p + (int64_t)a.p.rank * a.n;
}

__device__ __forceinline__ float *scales_of(const Args &a, int d)
{
    float *p = a.scales[0];
#pragma unroll
    for (int k = 1; k < KEVO_MAX_RANKS; k++)
        if (d == k)
            p = a.scales[k];
    return p + (int64_t)a.p.rank * a.nb;
}

// One 16-element piece, quantised.
struct Piece {
    uint4 q;
    float s;
};

// Lanes 8g .. 8g+7 of a warp hold one block; all 32 lanes must call this together.
__device__ __forceinline__ Piece quantise(const Args &a, int64_t ti, bool full)
{
    float v[16];
    const int64_t first = ti * 16;
    if (full && a.x_vec) {
        const uint4 *xv = reinterpret_cast<const uint4 *>(a.x + first);
        const kevo_f32x8 lo = kevo_bf16x8_to_f32(xv[0]);
        const kevo_f32x8 hi = kevo_bf16x8_to_f32(xv[1]);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            v[k] = lo.v[k];
            v[8 + k] = hi.v[k];
        }
    } else {
#pragma unroll
        for (int k = 0; k < 16; k++)
            v[k] = first + k < a.n ? __bfloat162float(a.x[first + k]) : 0.0f;
    }
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < 16; k++)
        amax = fmaxf(amax, fabsf(v[k]));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    Piece r;
    r.s = amax == 0.0f ? 1.0f : __fdiv_rn(amax, kE4m3Max);
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const uint32_t p0 = __nv_cvt_float2_to_fp8x2(
            make_float2(__fdiv_rn(v[4 * k], r.s), __fdiv_rn(v[4 * k + 1], r.s)), __NV_SATFINITE,
            __NV_E4M3);
        const uint32_t p1 = __nv_cvt_float2_to_fp8x2(
            make_float2(__fdiv_rn(v[4 * k + 2], r.s), __fdiv_rn(v[4 * k + 3], r.s)), __NV_SATFINITE,
            __NV_E4M3);
        w[k] = p0 | p1 << 16;
    }
    r.q = make_uint4(w[0], w[1], w[2], w[3]);
    return r;
}

__global__ void __launch_bounds__(THREADS, kMinBlocks) fp8_push_sm(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    const int W = p.world, me = p.rank;
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    int64_t base = (int64_t)blockIdx.x * THREADS + threadIdx.x;

    Piece pc[UNROLL];
    bool full[UNROLL];
    auto load_batch = [&](int64_t b0) {
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const int64_t ti = b0 + k * stride;
            full[k] = false;
            if (ti - lane < a.items) { // warp-uniform: the whole warp quantises together
                full[k] = (ti / 8 + 1) * kBlock <= a.n;
                pc[k] = quantise(a, ti, full[k]);
            }
        }
    };
    if (base - lane < a.items)
        load_batch(base); // before the barrier: the read of x overlaps its round trip

    kevo_cta_barrier(p, 0); // start: every rank is in this call

    while (base - lane < a.items) {
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const int64_t ti = base + k * stride;
            if (ti >= a.items)
                continue;
            const int64_t first = ti * 16;
            const bool vec = full[k] && a.q_vec;
            for (int j = 0, d = me; j < W; j++, d = d + 1 < W ? d + 1 : 0) { // me, me+1, ...
                uint8_t *dq = q_of(a, d) + first;
                if (vec) {
                    *reinterpret_cast<uint4 *>(dq) = pc[k].q;
                } else {
                    const uint32_t w[4] = {pc[k].q.x, pc[k].q.y, pc[k].q.z, pc[k].q.w};
#pragma unroll
                    for (int e = 0; e < 16; e++)
                        if (first + e < a.n)
                            dq[e] = (uint8_t)(w[e >> 2] >> (8 * (e & 3)));
                }
                if ((ti & 7) == 0)
                    scales_of(a, d)[ti / 8] = pc[k].s;
            }
        }
        base += stride * UNROLL;
        if (base - lane < a.items)
            load_batch(base);
    }

    kevo_cta_barrier(p, 1); // end: every rank's stores into this rank are done
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "fp8_allgather/fp8_push_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)fp8_push_sm, THREADS, 0, CTAS_PER_SM, &per_sm) != 0)
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
    if (ctx->n_inputs < 1 || ctx->n_outputs < 2 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context");
    const kevo_tensor *x = &ctx->inputs[0], *q = &ctx->outputs[0], *sc = &ctx->outputs[1];
    const int64_t n = kevo_param(ctx, "N", 0), nb = (n + kBlock - 1) / kBlock;
    if (n < 1 || x->dtype != KEVO_BF16 || q->dtype != KEVO_FP8_E4M3 || sc->dtype != KEVO_F32 ||
        x->numel != n || q->numel != W * n || sc->numel != W * nb)
        return kevo_fail(kWho, "unexpected tensors");
    Args a = {};
    a.x = (const __nv_bfloat16 *)x->ptr;
    a.n = n;
    a.nb = nb;
    a.items = nb * 8;
    a.x_vec = kevo_aligned16(x->ptr);
    bool qv = true;
    for (int r = 0; r < W; r++) {
        a.q[r] = (uint8_t *)q->peer[r];
        a.scales[r] = (float *)sc->peer[r];
        qv = qv && kevo_aligned16((const uint8_t *)q->peer[r] + (int64_t)ctx->rank * n);
    }
    a.q_vec = qv;
    a.p = kevo_pads_of(ctx);

    // From sizes, W and the SM count only: the same grid on every rank.
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t most = st->max_grid < pad_limit ? st->max_grid : pad_limit;
    const int64_t grid = kevo_clamp_grid((a.items + THREADS - 1) / THREADS, most);
    fp8_push_sm<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
