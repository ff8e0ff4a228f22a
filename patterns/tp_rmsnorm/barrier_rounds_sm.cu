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
//      [parity][this rank][row];
//   3. kevo_cta_barrier: CTA b meets CTA b of every rank (release/acquire .sys, after a
//      __syncthreads that orders every thread's stores). The barrier's flag value is
//      (call_index + 1) * 2^20 + j + 1, so one pad slot serves every round of every call and
//      values only grow;
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
// call later rounds use other rows. Across calls the sums use two sets by call parity: a rank
// writes set (c + 2) & 1 only in call c + 2, after call c + 1's barriers, which every peer
// reaches only after finishing call c. (Only the captured call 0 never runs; executed calls are
// consecutive.) x, gamma and y are local: no other barrier is needed.
//
// kevo:pattern problem=tp_rmsnorm transport=sm fusion=fused
// kevo:param MAXV default=16 values=4,8,16
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param WARPS default=8 values=4,8,16
#define MAXV 16
#define CTAS_PER_SM 2
#define WARPS 8

#include "kevo/kernel.h"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = WARPS * 32;
constexpr float kEps = 1e-6f;
constexpr int kRoundBits = 20; // rounds per call < 2^20

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *x;                    // x_r [T][cols]
    const bf16 *gamma;                // gamma_r [cols]
    bf16 *y;                          // y_r [T][cols]
    const float *sum_mine;            // this rank's sums of this call's parity [W][T]
    float *sum_peer[KEVO_MAX_RANKS];  // every rank's sums of this call's parity [W][T]
    kevo_pads pads;
    int t, cols, rounds;
    int glanes;                       // lanes per row (8, 16, 32)
    float inv_h;                      // 1 / H
};

template <class P>
__device__ __forceinline__ P select_rank(const P (&arr)[KEVO_MAX_RANKS], int q)
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

// Lane q < W of an active group stores this row's sum into rank q's slot.
__device__ __forceinline__ void push_sum(const Args &a, int row, int gl, bool active, float ss)
{
    if (active && gl < a.pads.world)
        select_rank(a.sum_peer, gl)[(size_t)a.pads.rank * a.t + row] = ss;
}

// After the barrier: the W sums of the row, in rank order, in every lane of the group.
__device__ __forceinline__ float gather_sum(const Args &a, int row, int gl, int base, bool active)
{
    float got = 0.f;
    if (active && gl < a.pads.world)
        got = __ldcg(a.sum_mine + (size_t)gl * a.t + row);
    float total = 0.f;
    for (int q = 0; q < a.pads.world; q++)
        total += __shfl_sync(0xffffffffu, got, base + q);
    return total;
}

__device__ __forceinline__ void round_barrier(const Args &a, int j)
{
    kevo_pads p = a.pads;
    p.epoch = (a.pads.epoch << kRoundBits) + (uint64_t)j + 1;
    kevo_cta_barrier(p, 0);
}

// Rows held in registers: cols % 8 == 0, cols / 8 <= glanes * MAXV, 16-byte aligned pointers.
__device__ __forceinline__ void rounds_vec(const Args &a)
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
        push_sum(a, row, gl, active, ss);
        round_barrier(a, j);
        const float total = gather_sum(a, row, gl, grp * a.glanes, active);
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
__device__ __forceinline__ void rounds_scalar(const Args &a)
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
        push_sum(a, row, lane, active, ss);
        round_barrier(a, j);
        const float total = gather_sum(a, row, lane, 0, active);
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
    if (VEC)
        rounds_vec(a);
    else
        rounds_scalar(a);
}

struct State {
    float *sum_peer[2][KEVO_MAX_RANKS]; // [parity][rank] -> [W][T] floats
    int glanes;                          // 0: scalar path
    int grid_vec, grid_scalar, rounds_vec, rounds_scalar;
};

int read_params(const kevo_ctx *ctx, int64_t *t, int64_t *cols)
{
    *t = kevo_param(ctx, "T", -1);
    const int64_t h = kevo_param(ctx, "H", -1);
    *cols = ctx->world > 0 ? h / ctx->world : -1;
    if (*t <= 0 || *t > (1 << 30) || *cols <= 0 || h % ctx->world != 0 || *cols > (1 << 30)) {
        fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: bad parameters T=%lld H=%lld (W=%d)\n",
                (long long)*t, (long long)h, ctx->world);
        return 0;
    }
    return 1;
}

// Grid (co-resident, within the pad) and rounds for R rows per CTA per round.
int plan(kevo_ctx *ctx, void (*f)(Args), int64_t rows_per_cta, int64_t t, int *grid,
         int *rounds)
{
    int occ = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f, kThreads, 0);
    if (e != cudaSuccess || occ < 1) {
        fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: occupancy: %s\n", cudaGetErrorString(e));
        return 0;
    }
    int64_t g = (int64_t)(occ < CTAS_PER_SM ? occ : CTAS_PER_SM) * ctx->sm_count;
    const int64_t need = (t + rows_per_cta - 1) / rows_per_cta;
    kevo_pads pads = kevo_pads_of(ctx);
    if (g > need)
        g = need;
    if (g > kevo_pads_max_ctas(pads, 1))
        g = kevo_pads_max_ctas(pads, 1);
    if (g < 1) {
        fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: signal pad too small\n");
        return 0;
    }
    const int64_t r = (t + g * rows_per_cta - 1) / (g * rows_per_cta);
    if (r >= ((int64_t)1 << kRoundBits) - 1) {
        fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: too many rounds (%lld)\n", (long long)r);
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
    State *st = (State *)calloc(1, sizeof(State));
    if (!st) {
        fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: out of host memory\n");
        return 1;
    }
    ctx->user = st;
    const size_t bytes = (size_t)W * t * sizeof(float);
    for (int b = 0; b < 2; b++) {
        void *local = NULL, *peer[KEVO_MAX_RANKS] = {0};
        if (ctx->scratch_alloc(ctx, bytes, &local, peer, NULL) != 0) {
            fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: scratch_alloc of %zu bytes failed\n",
                    bytes);
            return 1;
        }
        for (int q = 0; q < W; q++)
            st->sum_peer[b][q] = (float *)peer[q];
    }
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
    free(ctx->user);
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    const int W = ctx->world;
    int64_t t, cols;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &t, &cols))
        return 1;
    const kevo_tensor *tx = &ctx->inputs[0], *tg = &ctx->inputs[1], *ty = &ctx->outputs[0];
    if (tx->dtype != KEVO_BF16 || tg->dtype != KEVO_BF16 || ty->dtype != KEVO_BF16 ||
        tx->numel != t * cols || tg->numel != cols || ty->numel != t * cols) {
        fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: unexpected tensors\n");
        return 1;
    }
    const int set = (int)((ctx->call_index + 1) & 1);

    Args a = {};
    a.x = (const bf16 *)tx->ptr;
    a.gamma = (const bf16 *)tg->ptr;
    a.y = (bf16 *)ty->ptr;
    a.sum_mine = st->sum_peer[set][ctx->rank];
    for (int q = 0; q < W; q++)
        a.sum_peer[q] = st->sum_peer[set][q];
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
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "tp_rmsnorm barrier_rounds_sm: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
