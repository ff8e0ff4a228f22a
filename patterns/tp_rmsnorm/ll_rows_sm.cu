// ll_rows_sm.cu — tp_rmsnorm in one kernel with no barrier at all: every row's partial sum of
// squares travels to every rank as one 8-byte word that carries its own flag (value in the low
// 32 bits, the launch's tag in the high 32: NCCL's "LL" idea), so each group of lanes handles its
// row on its own and the row stays in registers across the exchange (x is read once).
//
// One call, one kernel (persistent grid, the same on every rank):
//  for each row (a group of G lanes per row, G = 8, 16 or 32 so that the row fits in at most
//  MAXV 16-byte vectors per lane; several rows per warp when H/W is small):
//   1. load the row of x_r into registers (16-byte loads), sum its squares in fp32 (lanes, then
//      xor shuffles inside the group);
//   2. lane q < W of the group stores the word {sum, tag} with one 64-bit st.relaxed.sys into
//      rank q's scratch slot [parity][this rank][row] (rank q may be this rank);
//   3. lane q < W spins (ld.relaxed.sys, bounded: 5 s then __trap) on its own slot
//      [parity][q][row] until the tag is this launch's, takes the value, and the group adds the
//      W values in rank order (shuffles; every lane gets the same fp32 sum);
//   4. y = x * rsqrtf(sum / H + 1e-6) * gamma in fp32, rounded once, 16-byte stores.
//  Rows that are not whole 16-byte vectors (H/W % 8 != 0, the validation size) or too long for
//  the registers take a scalar path with one warp per row that reads x twice (the second read
//  hits L2).
//
// Why it should be fast: the reference launches three kernels (sum of squares, ncclAllReduce of
// T floats, normalise) and reads x twice. Here: one launch, x read once, and the exchange is a
// single NVLink store + a local poll per row with no barrier and no separate flag (data and
// flag arrive together), overlapped across rows by the many warps in flight. t16: one round
// trip (~2-3 us) plus a launch vs 19.7 us. t1024-t32768: HBM-bound, read x once + write y
// (the roofline) vs the reference's extra read of x: ~1.3-1.5x at t8192/t32768, more at t1024
// where NCCL's latency dominates.
//
// Synchronisation: a 64-bit aligned store is single-copy atomic, so a reader that sees the tag
// sees the value of the same store (this is what NCCL's LL protocol relies on); relaxed .sys
// accesses keep the poll from being served by a stale L1 line. Tag = the launch's epoch e mod
// 2^32, and the parity of e picks the set of slots, both in the kernel: e comes from the device
// (kevo_epoch_begin / kevo_epoch_end, channel 0, one launch per call), so it grows by one per
// call on every rank, also when a call is replayed from a CUDA graph (which repeats every host
// value). Slots start at 0 (the scratch is zeroed) and tags are >= 1. Slot reuse: two sets
// (one symmetric allocation) by the epoch's parity. A rank finishes launch e + 1 only after
// reading every peer's words of launch e + 1, which the peers write only after finishing
// launch e; so a rank writing set (e + 2) & 1 in launch e + 2 never overwrites a word a peer
// still waits for in launch e. No peer input or output is touched: x, gamma and y are local,
// so no start or end barrier is needed.
//
// kevo:pattern problem=tp_rmsnorm transport=sm fusion=fused
// kevo:param MAXV default=16 values=4,8,16
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param WARPS default=8 values=4,8,16
#define MAXV 16
#define CTAS_PER_SM 2
#define WARPS 8

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

constexpr int kThreads = WARPS * 32;
constexpr float kEps = 1e-6f;

constexpr const char *kWho = "tp_rmsnorm/ll_rows_sm";

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *x;                       // x_r [T][cols]
    const bf16 *gamma;                   // gamma_r [cols]
    bf16 *y;                             // y_r [T][cols]
    uint64_t *slot_mine;                 // this rank's slots, set 0 [W][T]
    uint64_t *slot_peer[KEVO_MAX_RANKS]; // every rank's slots, set 0 [W][T]
    int64_t set_words;                   // set 1 starts set_words words after set 0
    kevo_pads pads;                      // for the launch's epoch (tag and set)
    int t, cols, world, rank;
    int glanes;  // lanes per row (8, 16, 32)
    float inv_h; // 1 / H
};

// arr[q] with a constant-index select: a dynamic index into a kernel parameter array would
// copy the array to local memory.
template <class P> __device__ __forceinline__ P select_rank(const P (&arr)[KEVO_MAX_RANKS], int q)
{
    P r = arr[0];
#pragma unroll
    for (int i = 1; i < KEVO_MAX_RANKS; i++)
        if (q == i)
            r = arr[i];
    return r;
}

__device__ __forceinline__ void st_relaxed_sys_u64(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t ld_relaxed_sys_u64(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// tag: the launch's epoch mod 2^32, whose parity picks the set of slots.

// Lane q < W of an active group: send this row's sum to rank q, wait for rank q's; returns rank
// q's sum in lane q (0 elsewhere).
__device__ __forceinline__ float exchange(const Args &a, uint32_t tag, int row, int gl, bool active,
                                          float ss)
{
    float got = 0.f;
    if (active && gl < a.world) {
        const int q = gl;
        const size_t set = (size_t)(tag & 1) * (size_t)a.set_words;
        const uint64_t word = ((uint64_t)tag << 32) | (uint64_t)__float_as_uint(ss);
        st_relaxed_sys_u64(select_rank(a.slot_peer, q) + set + (size_t)a.rank * a.t + row, word);
        const uint64_t *mine = a.slot_mine + set + (size_t)q * a.t + row;
        uint64_t v = ld_relaxed_sys_u64(mine);
        if ((uint32_t)(v >> 32) != tag) {
            const unsigned long long t0 = kevo_globaltimer_ns();
            do {
                v = ld_relaxed_sys_u64(mine);
                if (kevo_globaltimer_ns() - t0 > KEVO_WAIT_TIMEOUT_NS)
                    __trap();
            } while ((uint32_t)(v >> 32) != tag);
        }
        got = __uint_as_float((uint32_t)v);
    }
    return got;
}

// Sum of the W values held by lanes base .. base + W - 1, in rank order (same bits everywhere).
__device__ __forceinline__ float sum_ranks(float got, int base, int world)
{
    float total = 0.f;
    for (int q = 0; q < world; q++)
        total += __shfl_sync(0xffffffffu, got, base + q);
    return total;
}

__device__ __forceinline__ float group_sum(float v, int glanes)
{
    for (int o = glanes >> 1; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Rows held in registers: cols % 8 == 0, cols / 8 <= glanes * MAXV, 16-byte aligned pointers.
__device__ __forceinline__ void rows_vec(const Args &a, uint32_t tag)
{
    const int lane = threadIdx.x & 31;
    const int gl = lane & (a.glanes - 1), grp = lane / a.glanes, gpw = 32 / a.glanes;
    const int warp = blockIdx.x * WARPS + (threadIdx.x >> 5);
    const int nwarps = gridDim.x * WARPS;
    const int nv = a.cols / 8;
    const uint4 *gv = reinterpret_cast<const uint4 *>(a.gamma);

    for (int base = warp * gpw; base < a.t; base += nwarps * gpw) { // warp-uniform loop
        const int row = base + grp;
        const bool active = row < a.t;
        const uint4 *xv = reinterpret_cast<const uint4 *>(a.x + (size_t)row * a.cols);
        uint4 v[MAXV];
#pragma unroll
        for (int j = 0; j < MAXV; j++) {
            const int i = j * a.glanes + gl;
            v[j] = (active && i < nv) ? xv[i] : make_uint4(0, 0, 0, 0);
        }
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < MAXV; j++) {
            const kevo_f32x8 f = kevo_bf16x8_to_f32(v[j]);
#pragma unroll
            for (int e = 0; e < 8; e++)
                ss += f.v[e] * f.v[e];
        }
        ss = group_sum(ss, a.glanes);
        const float got = exchange(a, tag, row, gl, active, ss);
        __syncwarp();
        const float total = sum_ranks(got, grp * a.glanes, a.world);
        const float rstd = rsqrtf(total * a.inv_h + kEps);
        if (!active)
            continue;
        uint4 *yv = reinterpret_cast<uint4 *>(a.y + (size_t)row * a.cols);
#pragma unroll
        for (int j = 0; j < MAXV; j++) {
            const int i = j * a.glanes + gl;
            if (i < nv) {
                const kevo_f32x8 xf = kevo_bf16x8_to_f32(v[j]);
                const kevo_f32x8 g = kevo_bf16x8_to_f32(__ldg(gv + i));
                kevo_f32x8 o;
#pragma unroll
                for (int e = 0; e < 8; e++)
                    o.v[e] = xf.v[e] * rstd * g.v[e];
                yv[i] = kevo_f32x8_to_bf16(o);
            }
        }
    }
}

// Any shape: one warp per row, scalar loads, x read twice (the second read from L2).
__device__ __forceinline__ void rows_scalar(const Args &a, uint32_t tag)
{
    const int lane = threadIdx.x & 31;
    const int warp = blockIdx.x * WARPS + (threadIdx.x >> 5);
    const int nwarps = gridDim.x * WARPS;
    for (int row = warp; row < a.t; row += nwarps) {
        const bf16 *xr = a.x + (size_t)row * a.cols;
        float ss = 0.f;
        for (int c = lane; c < a.cols; c += 32) {
            const float f = __bfloat162float(xr[c]);
            ss += f * f;
        }
        ss = group_sum(ss, 32);
        const float got = exchange(a, tag, row, lane, true, ss);
        __syncwarp();
        const float total = sum_ranks(got, 0, a.world);
        const float rstd = rsqrtf(total * a.inv_h + kEps);
        bf16 *yr = a.y + (size_t)row * a.cols;
        for (int c = lane; c < a.cols; c += 32)
            yr[c] =
                __float2bfloat16_rn(__bfloat162float(xr[c]) * rstd * __bfloat162float(a.gamma[c]));
    }
}

// One kernel (one family for the classifier); VEC picks the path, the same on every rank.
template <bool VEC>
__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) rmsnorm_ll(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const uint32_t tag = (uint32_t)p.epoch;
    if (VEC)
        rows_vec(a, tag);
    else
        rows_scalar(a, tag);
    kevo_epoch_end(p);
}

struct State {
    uint64_t *slot_peer[KEVO_MAX_RANKS]; // every rank's two sets of [W][T] words
    int64_t set_words;                   // from set 0 to set 1
    int glanes;                          // 0: scalar path
    int grid_vec, grid_scalar;
};

int read_params(const kevo_ctx *ctx, int64_t *t, int64_t *cols)
{
    *t = kevo_param(ctx, "T", -1);
    const int64_t h = kevo_param(ctx, "H", -1);
    *cols = ctx->world > 0 ? h / ctx->world : -1;
    if (*t <= 0 || *t > (1 << 30) || *cols <= 0 || h % ctx->world != 0 || *cols > (1 << 30)) {
        kevo_fail(kWho, "bad parameters T=%lld H=%lld (W=%d)", (long long)*t, (long long)h,
                  ctx->world);
        return 0;
    }
    return 1;
}

int grid_for(kevo_ctx *ctx, void (*f)(Args), int64_t rows_per_cta, int64_t t, int *grid)
{
    int occ = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)f, kThreads, 0, CTAS_PER_SM, &occ) != 0)
        return 0;
    const int64_t resident = (int64_t)occ * ctx->sm_count;
    *grid = (int)kevo_clamp_grid((t + rows_per_cta - 1) / rows_per_cta, resident);
    return 1;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t t, cols;
    if (W < 1 || W > KEVO_MAX_RANKS || !read_params(ctx, &t, &cols))
        return 1;
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    // both sets of slots in one symmetric allocation (the kernel picks one by its epoch's parity)
    const size_t bytes = ((size_t)W * t * sizeof(uint64_t) + 255) / 256 * 256;
    void *local = NULL, *peer[KEVO_MAX_RANKS] = {0};
    if (ctx->scratch_alloc(ctx, 2 * bytes, &local, peer, NULL) != 0)
        return kevo_fail(kWho, "scratch_alloc of %zu bytes failed", 2 * bytes);
    for (int q = 0; q < W; q++)
        st->slot_peer[q] = (uint64_t *)peer[q];
    st->set_words = (int64_t)(bytes / sizeof(uint64_t));
    st->glanes = 0;
    if (cols % 8 == 0) {
        const int64_t nv = cols / 8;
        for (int g = 8; g <= 32 && !st->glanes; g *= 2)
            if (nv <= (int64_t)g * MAXV && g >= W)
                st->glanes = g;
    }
    if (!grid_for(ctx, rmsnorm_ll<true>, (int64_t)WARPS * (st->glanes ? 32 / st->glanes : 1), t,
                  &st->grid_vec) ||
        !grid_for(ctx, rmsnorm_ll<false>, WARPS, t, &st->grid_scalar))
        return 1;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    int64_t t, cols;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &t, &cols))
        return 1;
    const kevo_tensor *tx = &ctx->inputs[0], *tg = &ctx->inputs[1], *ty = &ctx->outputs[0];
    if (tx->dtype != KEVO_BF16 || tg->dtype != KEVO_BF16 || ty->dtype != KEVO_BF16 ||
        tx->numel != t * cols || tg->numel != cols || ty->numel != t * cols)
        return kevo_fail(kWho, "unexpected tensors");

    Args a = {};
    a.x = (const bf16 *)tx->ptr;
    a.gamma = (const bf16 *)tg->ptr;
    a.y = (bf16 *)ty->ptr;
    a.slot_mine = st->slot_peer[ctx->rank];
    for (int q = 0; q < W; q++)
        a.slot_peer[q] = st->slot_peer[q];
    a.set_words = st->set_words;
    a.pads = kevo_pads_of(ctx);
    a.t = (int)t;
    a.cols = (int)cols;
    a.world = W;
    a.rank = ctx->rank;
    a.glanes = st->glanes ? st->glanes : 32;
    a.inv_h = 1.0f / (float)(cols * W);
    // the same on every rank: equal shapes, 4 KiB-aligned tensors
    const bool vec = st->glanes != 0 && kevo_aligned16(tx->ptr) && kevo_aligned16(tg->ptr) &&
                     kevo_aligned16(ty->ptr);
    if (vec)
        rmsnorm_ll<true><<<st->grid_vec, kThreads, 0, ctx->stream>>>(a);
    else
        rmsnorm_ll<false><<<st->grid_scalar, kThreads, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
