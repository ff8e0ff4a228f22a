// barrier_rounds_sm.cu — tp_rmsnorm in one kernel, in rounds of rows separated by
// kevo_cta_barrier: CTA b of every rank handles the same rows in the same round, pushes the
// rows' fp32 partial sums of squares into every rank's scratch, meets CTA b of every rank, then
// normalises the rows it still holds in registers (x is read once).
//
// One call, one kernel (persistent grid G, the same on every rank):
//  for round j = 0, 1, ... (every CTA runs every round):
//   1. CTA b takes rows [(j G + b) R, (j G + b + 1) R), R = WARPS x rows per warp (a group of
//      8, 16 or 32 lanes per row so that a row fits in at most MAXV 16-byte vectors per lane).
//      Each group loads its row into registers and sums the squares in fp32;
//   2. lane q < W of the group stores the sum (fp32) into rank q's scratch slot
//      [parity][this rank][row] (parity: of the launch's epoch e);
//   3. kevo_cta_barrier: CTA b meets CTA b of every rank (release/acquire .sys, after a
//      __syncthreads that orders every thread's stores). The barrier's flag value is
//      e * 2^20 + j + 1, so one pad slot serves every round of every call and values only
//      grow;
//   4. lane q < W reads rank q's sum of the row from its own scratch, the group adds the W
//      sums in rank order (same bits on every rank), and writes y = x * rsqrtf(sum / H + 1e-6)
//      * gamma (fp32, one rounding, 16-byte stores).
//  Rows that are not whole 16-byte vectors (the validation size) or too long for the registers
//  take a scalar path (a warp per row, x read again from L2 after the barrier).
//
// Why it should be fast: one launch instead of three (sum of squares, ncclAllReduce, normalise),
// x read once instead of twice, and the exchange of each round is one barrier round trip that
// the other CTA on the SM hides (CTAS_PER_SM = 2). t16: one round, one round trip + a launch
// vs 19.7 us; t8192/t32768: HBM-bound, with a round trip every round (R rows per CTA) that
// ll_rows_sm.cu avoids (it exchanges per row with no barrier); this seed is the simpler,
// barrier-based variant.
//
// Synchronisation: after the barrier of round j, CTA b of every rank has stored its sums of
// round j's rows (the rows of CTA b, the same on every rank) and they are visible. Within a
// call later rounds use other rows. The epoch e is the device's: the kernel takes its launch's
// with kevo_epoch_begin and hands it on with kevo_epoch_end (channel 0, one launch per call),
// so it grows by one per call on every rank, also when a call is replayed from a CUDA graph
// (which repeats every host value). Across calls the sums use two sets by the epoch's parity,
// chosen in the kernel (both sets are one symmetric allocation): a rank writes set (e + 2) & 1
// only in launch e + 2, after launch e + 1's barriers, which every peer reaches only after
// finishing launch e. x, gamma and y are local: no other barrier is needed.
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
constexpr int kRoundBits = 20; // rounds per call < 2^20

constexpr const char *kWho = "tp_rmsnorm/barrier_rounds_sm";

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *x;                   // x_r [T][cols]
    const bf16 *gamma;               // gamma_r [cols]
    bf16 *y;                         // y_r [T][cols]
    const float *sum_mine;           // this rank's sums, set 0 [W][T]
    float *sum_peer[KEVO_MAX_RANKS]; // every rank's sums, set 0 [W][T]
    int64_t set_floats;              // set 1 starts set_floats floats after set 0
    kevo_pads pads;
    int t, cols, rounds;
    int glanes;  // lanes per row (8, 16, 32)
    float inv_h; // 1 / H
};

template <class P> __device__ __forceinline__ P select_rank(const P (&arr)[KEVO_MAX_RANKS], int q)
{
    P r = arr[0];
#pragma unroll
    for (int i = 1; i < KEVO_MAX_RANKS; i++)
        if (q == i)
            r = arr[i];
    return r;
}

__device__ __forceinline__ float group_sum(float v, int glanes)
{
    for (int o = glanes >> 1; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// p: the launch's pads (kevo_epoch_begin); set: floats from set 0 to this launch's set.

// Lane q < W of an active group stores this row's sum into rank q's slot.
__device__ __forceinline__ void push_sum(const Args &a, const kevo_pads &p, size_t set, int row,
                                         int gl, bool active, float ss)
{
    if (active && gl < p.world)
        select_rank(a.sum_peer, gl)[set + (size_t)p.rank * a.t + row] = ss;
}

// After the barrier: the W sums of the row, in rank order, in every lane of the group.
__device__ __forceinline__ float gather_sum(const Args &a, const kevo_pads &p, size_t set, int row,
                                            int gl, int base, bool active)
{
    float got = 0.f;
    if (active && gl < p.world)
        got = __ldcg(a.sum_mine + set + (size_t)gl * a.t + row);
    float total = 0.f;
    for (int q = 0; q < p.world; q++)
        total += __shfl_sync(0xffffffffu, got, base + q);
    return total;
}

__device__ __forceinline__ void round_barrier(const kevo_pads &p, int j)
{
    kevo_pads r = p;
    r.epoch = (p.epoch << kRoundBits) + (uint64_t)j + 1;
    kevo_cta_barrier(r, 0);
}

// Rows held in registers: cols % 8 == 0, cols / 8 <= glanes * MAXV, 16-byte aligned pointers.
__device__ __forceinline__ void rounds_vec(const Args &a, const kevo_pads &p, size_t set)
{
    const int lane = threadIdx.x & 31;
    const int gl = lane & (a.glanes - 1), grp = lane / a.glanes, gpw = 32 / a.glanes;
    const int rows_per_cta = WARPS * gpw;
    const int nv = a.cols / 8;
    const uint4 *gv = reinterpret_cast<const uint4 *>(a.gamma);

    for (int j = 0; j < a.rounds; j++) {
        const int row =
            (j * gridDim.x + blockIdx.x) * rows_per_cta + (threadIdx.x >> 5) * gpw + grp;
        const bool active = row < a.t;
        const uint4 *xv =
            reinterpret_cast<const uint4 *>(a.x + (size_t)(active ? row : 0) * a.cols);
        uint4 v[MAXV];
#pragma unroll
        for (int k = 0; k < MAXV; k++) {
            const int i = k * a.glanes + gl;
            v[k] = (active && i < nv) ? xv[i] : make_uint4(0, 0, 0, 0);
        }
        float ss = 0.f;
#pragma unroll
        for (int k = 0; k < MAXV; k++) {
            const kevo_f32x8 f = kevo_bf16x8_to_f32(v[k]);
#pragma unroll
            for (int e = 0; e < 8; e++)
                ss += f.v[e] * f.v[e];
        }
        ss = group_sum(ss, a.glanes);
        push_sum(a, p, set, row, gl, active, ss);
        round_barrier(p, j);
        const float total = gather_sum(a, p, set, row, gl, grp * a.glanes, active);
        const float rstd = rsqrtf(total * a.inv_h + kEps);
        if (active) {
            uint4 *yv = reinterpret_cast<uint4 *>(a.y + (size_t)row * a.cols);
#pragma unroll
            for (int k = 0; k < MAXV; k++) {
                const int i = k * a.glanes + gl;
                if (i < nv) {
                    const kevo_f32x8 xf = kevo_bf16x8_to_f32(v[k]);
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
}

// Any shape: a warp per row, scalar loads, x read again after the barrier.
__device__ __forceinline__ void rounds_scalar(const Args &a, const kevo_pads &p, size_t set)
{
    const int lane = threadIdx.x & 31;
    for (int j = 0; j < a.rounds; j++) {
        const int row = (j * gridDim.x + blockIdx.x) * WARPS + (threadIdx.x >> 5);
        const bool active = row < a.t;
        float ss = 0.f;
        if (active) {
            const bf16 *xr = a.x + (size_t)row * a.cols;
            for (int c = lane; c < a.cols; c += 32) {
                const float f = __bfloat162float(xr[c]);
                ss += f * f;
            }
        }
        ss = group_sum(ss, 32);
        push_sum(a, p, set, row, lane, active, ss);
        round_barrier(p, j);
        const float total = gather_sum(a, p, set, row, lane, 0, active);
        const float rstd = rsqrtf(total * a.inv_h + kEps);
        if (active) {
            const bf16 *xr = a.x + (size_t)row * a.cols;
            bf16 *yr = a.y + (size_t)row * a.cols;
            for (int c = lane; c < a.cols; c += 32)
                yr[c] = __float2bfloat16_rn(__bfloat162float(xr[c]) * rstd *
                                            __bfloat162float(a.gamma[c]));
        }
    }
}

// One kernel (one family for the classifier); VEC picks the path, the same on every rank.
template <bool VEC>
__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) rmsnorm_rounds(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const size_t set = (size_t)(p.epoch & 1) * (size_t)a.set_floats;
    if (VEC)
        rounds_vec(a, p, set);
    else
        rounds_scalar(a, p, set);
    kevo_epoch_end(p);
}

struct State {
    float *sum_peer[KEVO_MAX_RANKS]; // every rank's two sets of [W][T] floats
    int64_t set_floats;              // from set 0 to set 1
    int glanes;                      // 0: scalar path
    int grid_vec, grid_scalar, rounds_vec, rounds_scalar;
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

// Grid (co-resident, within the pad) and rounds for R rows per CTA per round.
int plan(kevo_ctx *ctx, void (*f)(Args), int64_t rows_per_cta, int64_t t, int *grid, int *rounds)
{
    int occ = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)f, kThreads, 0, CTAS_PER_SM, &occ) != 0)
        return 0;
    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 1);
    if (pad_limit < 1) {
        kevo_fail(kWho, "signal pad too small");
        return 0;
    }
    const int64_t resident = (int64_t)occ * ctx->sm_count;
    const int64_t g = kevo_clamp_grid((t + rows_per_cta - 1) / rows_per_cta,
                                      resident < pad_limit ? resident : pad_limit);
    const int64_t r = (t + g * rows_per_cta - 1) / (g * rows_per_cta);
    if (r >= ((int64_t)1 << kRoundBits) - 1) {
        kevo_fail(kWho, "too many rounds (%lld)", (long long)r);
        return 0;
    }
    *grid = (int)g;
    *rounds = (int)r;
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
    // both sets of sums in one symmetric allocation (the kernel picks one by its epoch's parity)
    const size_t bytes = ((size_t)W * t * sizeof(float) + 255) / 256 * 256;
    void *local = NULL, *peer[KEVO_MAX_RANKS] = {0};
    if (ctx->scratch_alloc(ctx, 2 * bytes, &local, peer, NULL) != 0)
        return kevo_fail(kWho, "scratch_alloc of %zu bytes failed", 2 * bytes);
    for (int q = 0; q < W; q++)
        st->sum_peer[q] = (float *)peer[q];
    st->set_floats = (int64_t)(bytes / sizeof(float));
    st->glanes = 0;
    if (cols % 8 == 0) {
        const int64_t nv = cols / 8;
        for (int g = 8; g <= 32 && !st->glanes; g *= 2)
            if (nv <= (int64_t)g * MAXV && g >= W)
                st->glanes = g;
    }
    const int64_t rpc_vec = (int64_t)WARPS * (st->glanes ? 32 / st->glanes : 1);
    if (!plan(ctx, rmsnorm_rounds<true>, rpc_vec, t, &st->grid_vec, &st->rounds_vec) ||
        !plan(ctx, rmsnorm_rounds<false>, WARPS, t, &st->grid_scalar, &st->rounds_scalar))
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
    a.sum_mine = st->sum_peer[ctx->rank];
    for (int q = 0; q < W; q++)
        a.sum_peer[q] = st->sum_peer[q];
    a.set_floats = st->set_floats;
    a.pads = kevo_pads_of(ctx);
    a.t = (int)t;
    a.cols = (int)cols;
    a.glanes = st->glanes ? st->glanes : 32;
    a.inv_h = 1.0f / (float)(cols * W);
    // the same on every rank: equal shapes, 4 KiB-aligned tensors
    const bool vec = st->glanes != 0 && kevo_aligned16(tx->ptr) && kevo_aligned16(tg->ptr) &&
                     kevo_aligned16(ty->ptr);
    if (vec) {
        a.rounds = st->rounds_vec;
        rmsnorm_rounds<true><<<st->grid_vec, kThreads, 0, ctx->stream>>>(a);
    } else {
        a.rounds = st->rounds_scalar;
        rmsnorm_rounds<false><<<st->grid_scalar, kThreads, 0, ctx->stream>>>(a);
    }
    return kevo_launched(kWho, "launch");
}
