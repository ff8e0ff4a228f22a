// halo_conv1d_fused_sm.cu — sequence-parallel depthwise conv1d (k = 7, 'same') in one kernel:
// the interior is computed while the start barrier is in flight, then the edge columns read
// their 3 halo columns straight from the neighbours' x through peer pointers.
//
// What one call does (one kernel on ctx->stream, same grid on every rank):
//  1. Arrive: thread 0 (1) of CTA b sets flag [0][b][rank] in the left (right) neighbour's
//     pad (st.release.sys, with the launch's epoch: kevo_epoch_begin). It does not wait yet.
//  2. Interior (no peer data): rows of 16-byte vectors (8 bf16), one warp per unit of
//     32*K consecutive vectors of one channel (K <= UNROLL, chosen so every warp has work).
//     All K loads are issued first; each lane gets the 3 columns on either side of its vector
//     from its neighbour lanes with shuffles (lanes 0 and 31 from the previous/next group of
//     the unit, or one 8-byte load at the unit's ends), and computes 8 outputs with 7 fp32
//     FMAs each, rounded once to bf16, one 16-byte store. The first and the last vector of
//     every row (which need the halo) are left for step 4.
//  3. Wait for the neighbours' arrival flags (thread 0 left, thread 1 right), __syncthreads.
//  4. Edges: one thread per (row, side) computes the first (last) vector of the row, taking
//     columns < 0 from the left neighbour's x (its last 3 columns) and columns >= L/W from the
//     right neighbour's x (its first 3 columns), zeros at the global ends (rank 0, rank W-1).
//  5. End barrier with the neighbours: __syncthreads (every halo read of this CTA is done),
//     flag [1][b][rank] in both neighbours' pads, wait for theirs. When all CTAs have passed,
//     no neighbour reads this rank's x any more.
//  When L/W is not a multiple of 8 or a pointer is not 16-byte aligned (the validation size),
//  steps 2 and 4 run one output per thread instead (interior columns 3 .. L/W-4, then the
//  first and last 3), with the same barriers.
//
// Why it should be fast: the reference runs pack + ncclSend/Recv + conv (19.3 us at C128,
// 503 us at C4096 for W = 2). Here x is read once and y written once (HBM-bound: 4*C*L/W
// bytes, ~136 us at the largest size), in one launch, and the barrier round trip (~2-3 us)
// hides behind the interior; only 2 vectors per row wait for it. Small sizes: one launch and
// the barrier latency, nothing else.
//
// Synchronisation: a neighbour's x is read only after its arrival flag (it has entered this
// call, so its x holds this call's values), and this rank returns only after both
// neighbours' CTAs b have signalled that their reads are done (same grid on every rank: CTA b
// pairs with CTA b; every CTA of a neighbour that reads this rank's x pairs with some CTA of
// this rank). y is written only on this rank. Flags: epochs in the signal pad,
// [phase][cta][rank], never reset; waits bounded (5 s, then __trap). The epoch is the device's
// (kevo_epoch_begin / kevo_epoch_end on channel 0, one launch per call on every rank), so a
// call replayed from a CUDA graph is as correct as one made from the host.
//
// kevo:pattern problem=halo_conv1d transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param UNROLL default=4 values=1,2,4,8
#define CTAS_PER_SM 2
#define THREADS 256
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
constexpr int kTaps = 7, kHalo = 3;

struct Args {
    const __nv_bfloat16 *x;  // this rank's x [C, n]
    const __nv_bfloat16 *xl; // left neighbour's x, or null at rank 0
    const __nv_bfloat16 *xr; // right neighbour's x, or null at rank W-1
    const __nv_bfloat16 *w;  // [C, 7]
    __nv_bfloat16 *y;        // [C, n]
    int64_t C, n;
    int64_t nv;    // vectors per row (vector path)
    int64_t units; // interior units (vector path)
    int64_t upr;   // units per row
    int kper;      // vectors per lane per unit (1 .. UNROLL)
    int vec;
    int left, right; // neighbour ranks, or -1
    kevo_pads p;
};

struct State {
    int max_grid;
};

__device__ __forceinline__ float lo_f(uint32_t u)
{
    return __uint_as_float(u << 16);
}
__device__ __forceinline__ float hi_f(uint32_t u)
{
    return __uint_as_float(u & 0xffff0000u);
}

// 8 outputs from 14 inputs e[0..13] (columns 8i-3 .. 8i+10).
__device__ __forceinline__ uint4 conv8(const float (&wf)[kTaps], const float (&e)[14])
{
    kevo_f32x8 o;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < kTaps; k++)
            acc = fmaf(wf[k], e[j + k], acc);
        o.v[j] = acc;
    }
    return kevo_f32x8_to_bf16(o);
}

// Element col of row c as fp32, with the halos and the zero padding (col in [-3, n+3)).
__device__ __forceinline__ float at(const Args &a, int64_t c, int64_t col)
{
    if (col < 0)
        return a.xl ? __bfloat162float(a.xl[c * a.n + a.n + col]) : 0.0f;
    if (col >= a.n)
        return a.xr ? __bfloat162float(a.xr[c * a.n + (col - a.n)]) : 0.0f;
    return __bfloat162float(a.x[c * a.n + col]);
}

__device__ __forceinline__ void load_w(const Args &a, int64_t c, float (&wf)[kTaps])
{
#pragma unroll
    for (int k = 0; k < kTaps; k++)
        wf[k] = __bfloat162float(a.w[c * kTaps + k]);
}

// Step 2, vector path: the interior vectors 1 .. nv-2 of every row.
__device__ void interior_vec(const Args &a)
{
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * THREADS + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * THREADS) >> 5;
    const int K = a.kper;
    for (int64_t u = warp; u < a.units; u += nwarps) {
        const int64_t c = u / a.upr;
        const int64_t i0 = (u - c * a.upr) * 32 * K; // first vector of the unit
        const uint4 *xv = reinterpret_cast<const uint4 *>(a.x + c * a.n);
        uint4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const int64_t i = i0 + k * 32 + lane;
            v[k] = k < K && i < a.nv ? xv[i] : make_uint4(0, 0, 0, 0);
        }
        // the columns just outside the unit: lane 0 takes the 4 before it, lane 31 the 4 after
        uint2 before = make_uint2(0, 0), after = make_uint2(0, 0);
        const uint2 *x2 = reinterpret_cast<const uint2 *>(a.x + c * a.n);
        if (lane == 0 && i0 > 0)
            before = x2[2 * i0 - 1];
        if (lane == 31 && i0 + 32 * K < a.nv)
            after = x2[2 * (i0 + 32 * K)];
        float wf[kTaps];
        load_w(a, c, wf);
        uint4 *yv = reinterpret_cast<uint4 *>(a.y + c * a.n);
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            if (k >= K)
                break; // warp-uniform
            // left: elements 4..7 of vector i-1 (words z, w); right: 0..3 of i+1 (x, y)
            uint32_t lz = __shfl_up_sync(0xffffffffu, v[k].z, 1);
            uint32_t lw = __shfl_up_sync(0xffffffffu, v[k].w, 1);
            uint32_t rx = __shfl_down_sync(0xffffffffu, v[k].x, 1);
            uint32_t ry = __shfl_down_sync(0xffffffffu, v[k].y, 1);
            const uint32_t pz = __shfl_sync(0xffffffffu, k > 0 ? v[k > 0 ? k - 1 : 0].z : 0u, 31);
            const uint32_t pw = __shfl_sync(0xffffffffu, k > 0 ? v[k > 0 ? k - 1 : 0].w : 0u, 31);
            const uint32_t nx =
                __shfl_sync(0xffffffffu, k + 1 < K ? v[k + 1 < UNROLL ? k + 1 : k].x : 0u, 0);
            const uint32_t ny =
                __shfl_sync(0xffffffffu, k + 1 < K ? v[k + 1 < UNROLL ? k + 1 : k].y : 0u, 0);
            if (lane == 0) {
                lz = k > 0 ? pz : before.x;
                lw = k > 0 ? pw : before.y;
            }
            if (lane == 31) {
                rx = k + 1 < K ? nx : after.x;
                ry = k + 1 < K ? ny : after.y;
            }
            const int64_t i = i0 + k * 32 + lane;
            if (i >= 1 && i + 1 < a.nv) { // edges wait for the halo (step 4)
                const float e[14] = {hi_f(lz),     lo_f(lw),     hi_f(lw),     lo_f(v[k].x),
                                     hi_f(v[k].x), lo_f(v[k].y), hi_f(v[k].y), lo_f(v[k].z),
                                     hi_f(v[k].z), lo_f(v[k].w), hi_f(v[k].w), lo_f(rx),
                                     hi_f(rx),     lo_f(ry)};
                yv[i] = conv8(wf, e);
            }
        }
    }
}

// Step 4, vector path: the first and the last vector of every row.
__device__ void edges_vec(const Args &a)
{
    const int64_t sides = a.nv > 1 ? 2 : 1;
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    for (int64_t it = (int64_t)blockIdx.x * THREADS + threadIdx.x; it < a.C * sides; it += stride) {
        const int64_t c = it / sides;
        const int64_t i = it - c * sides == 0 ? 0 : a.nv - 1;
        float e[14];
#pragma unroll
        for (int k = 0; k < 14; k++)
            e[k] = at(a, c, 8 * i - kHalo + k);
        float wf[kTaps];
        load_w(a, c, wf);
        reinterpret_cast<uint4 *>(a.y + c * a.n)[i] = conv8(wf, e);
    }
}

// One output, any alignment.
__device__ __forceinline__ void one_output(const Args &a, int64_t c, int64_t l)
{
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < kTaps; k++)
        acc = fmaf(__bfloat162float(a.w[c * kTaps + k]), at(a, c, l - kHalo + k), acc);
    a.y[c * a.n + l] = __float2bfloat16_rn(acc);
}

__global__ void __launch_bounds__(THREADS, kMinBlocks) halo_conv1d_fused(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    const uint64_t W = (uint64_t)p.world, me = (uint64_t)p.rank;
    const uint64_t start = (uint64_t)blockIdx.x * W;             // phase 0 flags of this CTA
    const uint64_t end = ((uint64_t)gridDim.x + blockIdx.x) * W; // phase 1
    // 1. arrive at the neighbours (no data of ours to publish: x was written before launch)
    if (threadIdx.x == 0 && a.left >= 0)
        kevo_signal(p, a.left, start + me);
    if (threadIdx.x == 1 && a.right >= 0)
        kevo_signal(p, a.right, start + me);

    // 2. interior
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int64_t inner = a.n > 2 * kHalo ? a.n - 2 * kHalo : 0; // columns 3 .. n-4
    if (a.vec) {
        interior_vec(a);
    } else {
        for (int64_t e = tid; e < a.C * inner; e += stride) {
            const int64_t c = e / inner;
            one_output(a, c, kHalo + (e - c * inner));
        }
    }

    // 3. the neighbours are in this call: their x may be read
    if (threadIdx.x == 0 && a.left >= 0)
        kevo_wait(p, start + (uint64_t)a.left);
    if (threadIdx.x == 1 && a.right >= 0)
        kevo_wait(p, start + (uint64_t)a.right);
    __syncthreads();

    // 4. edges
    if (a.vec) {
        edges_vec(a);
    } else {
        const int64_t head = a.n < kHalo ? a.n : kHalo;                // columns 0 .. head-1
        const int64_t tail0 = a.n - kHalo > head ? a.n - kHalo : head; // tail0 .. n-1
        const int64_t per_row = head + (a.n - tail0);
        for (int64_t e = tid; e < a.C * per_row; e += stride) {
            const int64_t c = e / per_row, k = e - c * per_row;
            one_output(a, c, k < head ? k : tail0 + (k - head));
        }
    }

    // 5. end barrier with the neighbours: our reads of their x are done, and theirs of ours
    __syncthreads();
    if (threadIdx.x == 0 && a.left >= 0) {
        kevo_signal(p, a.left, end + me);
        kevo_wait(p, end + (uint64_t)a.left);
    }
    if (threadIdx.x == 1 && a.right >= 0) {
        kevo_signal(p, a.right, end + me);
        kevo_wait(p, end + (uint64_t)a.right);
    }
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "halo_conv1d/halo_conv1d_fused_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)halo_conv1d_fused, THREADS, 0, CTAS_PER_SM, &per_sm) !=
        0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world, me = ctx->rank;
    if (!st)
        return 1;
    if (ctx->n_inputs < 2 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context");
    const int64_t C = kevo_param(ctx, "C", 0), L = kevo_param(ctx, "L", 0);
    const kevo_tensor *x = &ctx->inputs[0], *w = &ctx->inputs[1], *y = &ctx->outputs[0];
    const int64_t n = L / W;
    if (C < 1 || L % W || n < kHalo || x->dtype != KEVO_BF16 || w->dtype != KEVO_BF16 ||
        y->dtype != KEVO_BF16 || x->numel != C * n || w->numel != C * kTaps || y->numel != C * n)
        return kevo_fail(kWho, "unexpected sizes or tensors");
    Args a = {};
    a.x = (const __nv_bfloat16 *)x->ptr;
    a.left = me > 0 ? me - 1 : -1;
    a.right = me < W - 1 ? me + 1 : -1;
    a.xl = a.left >= 0 ? (const __nv_bfloat16 *)x->peer[a.left] : nullptr;
    a.xr = a.right >= 0 ? (const __nv_bfloat16 *)x->peer[a.right] : nullptr;
    a.w = (const __nv_bfloat16 *)w->ptr;
    a.y = (__nv_bfloat16 *)y->ptr;
    a.C = C;
    a.n = n;
    a.vec = n % 8 == 0 && kevo_aligned16(x->ptr) && kevo_aligned16(y->ptr);
    a.p = kevo_pads_of(ctx);

    // The grid from sizes, W and the SM count only: the same on every rank.
    const int64_t work = n % 8 == 0 ? C * (n / 8) : C * n;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t grid = kevo_clamp_grid((work + THREADS - 1) / THREADS,
                                         st->max_grid < pad_limit ? st->max_grid : pad_limit);
    if (a.vec) {
        a.nv = n / 8;
        const int64_t warps = grid * THREADS / 32;
        int64_t k = (C * a.nv + 32 * warps - 1) / (32 * warps); // vectors per lane for all warps
        if (k > UNROLL)
            k = UNROLL;
        if (k < 1)
            k = 1;
        a.kper = (int)k;
        a.upr = (a.nv + 32 * k - 1) / (32 * k);
        a.units = C * a.upr;
    }
    halo_conv1d_fused<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
