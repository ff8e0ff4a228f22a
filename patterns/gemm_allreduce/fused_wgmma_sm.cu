// fused_wgmma_sm.cu — gemm_allreduce in ONE kernel, like fused_mma_sm.cu but with a Hopper
// warpgroup GEMM: wgmma.mma_async m64n256k16 (bf16 in, fp32 accumulators) on 128 x 256 tiles,
// operands in 128-byte-swizzled shared memory filled by cp.async (no TMA: the loads are plain
// LDGSTS, the peer traffic plain SM stores, so the cell stays sm/fused), 4 stages of 48 KiB,
// one CTA of two warpgroups per SM. The epilogue does the all-reduce tile by tile while the
// other CTAs keep multiplying.
//
// One call (the same protocol as fused_mma_sm.cu, with 128 x 256 tiles):
//  0. CTA b signals "entered call e" (e: the launch's epoch, kevo_epoch_begin) to CTA b of
//     every rank (the wait comes before the first store into a peer's C).
//  1. Tiles of C, 128 x 256, numbered GROUP_M strips at a time, column by column; with fewer
//     tiles than CTAs (decode) each tile's K/W range is split S ways. CTA b takes items b,
//     b + G, ... (G = SMs).
//  2. The CTA multiplies (k-tiles of 64: 4 wgmma per warpgroup per k-tile, one wgmma group in
//     flight, two k-tiles of cp.async in flight); split partials meet in a local fp32
//     workspace, the last split to arrive sums them in split order.
//  3. The rank's partial of tile t is rounded to bf16, staged in shared memory and stored with
//     16-byte stores into the receive slot [this rank][t / W] of the owner, rank t % W, then
//     published with st.release.sys of the epoch into the owner's flag [t / W][this rank].
//  4. The owner's CTA waits for the W flags (acquire), sums the W partials in rank order in
//     fp32, rounds once and stores the tile into every rank's C.
//  5. End barrier (kevo_cta_barrier phase 1).
//
// Why it should be fast: the same overlap as fused_mma_sm.cu (the all-reduce of a tile rides
// over NVLink while the other CTAs multiply), with a GEMM that can approach the tensor cores'
// wgmma rate instead of mma.sync's. Without TMA multicast a 128 x 256 tile needs ~9 TB/s of L2
// bandwidth at 800 TFLOP/s, so expect roughly 500-600 TFLOP/s: at m8192 (1.9 PFLOP per rank
// at W = 2) that is ~3.2-3.9 ms against the reference's 3.25 ms — a toss-up, the closest a
// fused seed here can get; at m1024 ~140 us against 182 us (expected win); at m64 the tile is
// too tall (use fused_mma_sm.cu there).
// RISK: written without a GPU. The wgmma descriptors (K-major A and N-major B, 128-byte
// swizzle, LBO/SBO as in the kevo_wgmma_desc calls of kevo_wgmma_gemm_tile) and the swizzled
// cp.async layout are the parts to check first if results are wrong; everything after the
// GEMM is the communication code of fused_mma_sm.cu.
//
// Synchronisation: exactly as fused_mma_sm.cu (slots written once per call and published by
// release/acquire .sys after a __syncthreads(); epochs never reset, taken on the device
// (kevo_epoch_begin / kevo_epoch_end), so graph replays are as correct; slot reuse and C stores
// covered by the split start barrier and the end barrier; co-resident grid of one CTA per SM,
// the same on every rank).
//
// Shared code: the wgmma core (kevo_wgmma_gemm_tile, kevo_wgmma_split_reduce,
// kevo_wgmma_stage_bf16) is kevo_gemm_wgmma.cuh, shared by the three fused_wgmma_sm.cu seeds;
// the slot store, the tile order and the host sizing come from kevo_gemm_mma.cuh (which it
// includes), the host checks from kevo_cublas.cuh.
//
// kevo:pattern problem=gemm_allreduce transport=sm fusion=fused
// kevo:param KSPLIT_MAX default=8 values=1,2,4,8
// kevo:param GROUP_M default=8 values=1,2,4,8,16
#define KSPLIT_MAX 8
#define GROUP_M 8

#include "kevo/kernel.h"
#include "kevo_gemm_wgmma.cuh"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = kevo_wgmma_threads; // two warpgroups: rows 0-63 and 64-127 of the tile
constexpr int BM = kevo_wgmma_bm;
constexpr int BN = kevo_wgmma_bn;
constexpr int kPitch = kevo_wgmma_pitch;
constexpr int kSplitMinKtiles = 4;
constexpr const char *kWho = "gemm_allreduce/fused_wgmma_sm";

typedef __nv_bfloat16 bf16;

// ---- the kernel ------------------------------------------------------------------------------

struct Args {
    const bf16 *a;                  // A_r [M][KW]
    const bf16 *b;                  // B_r [KW][N]
    bf16 *c[KEVO_MAX_RANKS];        // every rank's C [M][N]
    bf16 *recv[KEVO_MAX_RANKS];     // every rank's receive slots [src][nown][BM * BN]
    uint64_t *flag[KEVO_MAX_RANKS]; // every rank's tile flags [nown][src]
    float *ws;                      // split-K partials [tiles][splits][BM * BN] (local)
    int *cnt;                       // split-K arrivals [tiles] (local)
    kevo_pads pads;
    int m, n, kw;
    int nstrip, ncol, tiles, nown, splits, kper;
    int cvec; // N % 8 == 0 and every C 16-byte aligned
};

template <bool VEC> __global__ void __launch_bounds__(kThreads, 1) gemm_ar_wgmma(const Args a)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *smem = kevo_wgmma_aligned_smem(smem_raw);
    bf16 *stage = reinterpret_cast<bf16 *>(smem);
    __shared__ int s_flag;
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int tid = threadIdx.x;
    const int W = p.world, rank = p.rank;
    const uint64_t epoch = p.epoch;

    if (tid < W)
        kevo_signal(p, tid, kevo_start_slot(blockIdx.x, rank, W));
    bool started = false;
    kevo_no_hook hook;

    const int items = a.tiles * a.splits;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int t = item / a.splits, s = item - t * a.splits;
        int strip, col;
        kevo_tile_order<GROUP_M>(t, a.nstrip, a.ncol, &strip, &col);
        const int m0 = strip * BM, n0 = col * BN;
        const int rows = min(BM, a.m - m0), cols = min(BN, a.n - n0);
        const int kb = s * a.kper, ke = min(a.kw, kb + a.kper);

        float acc[kevo_wgmma_acc];
        kevo_rows_strided arow = {a.a + (int64_t)m0 * a.kw, a.kw};
        kevo_wgmma_gemm_tile<VEC>(acc, arow, rows, a.b + n0, a.n, cols, kb, ke, smem, hook);
        if (a.splits > 1 && !kevo_wgmma_split_reduce(acc, a.ws + (size_t)t * a.splits * BM * BN, s,
                                                     a.splits, a.cnt + t, &s_flag))
            continue;

        kevo_wgmma_stage_bf16(acc, stage);
        const int owner = t % W, oidx = t / W;
        kevo_tile_put<BN, kPitch, kThreads>(kevo_select_rank(a.recv, owner) +
                                                ((size_t)rank * a.nown + oidx) * BM * BN,
                                            stage, rows);
        __syncthreads(); // every thread's stores precede the release; smem reads are done
        if (tid == 0)
            kevo_store_release_sys(kevo_select_rank(a.flag, owner) + (size_t)oidx * W + rank,
                                   epoch);
        if (owner != rank)
            continue;

        if (tid < W) {
            kevo_wait_flag(kevo_select_rank(a.flag, rank) + (size_t)oidx * W + tid, epoch);
            if (!started)
                kevo_wait(p, kevo_start_slot(blockIdx.x, tid, W));
        }
        started = true;
        __syncthreads();
        const bf16 *slot0 = kevo_select_rank(a.recv, rank) + (size_t)oidx * BM * BN;
        const size_t slot_stride = (size_t)a.nown * BM * BN;
        for (int v = tid; v < rows * (BN / 8); v += kThreads) {
            const int r = v / (BN / 8), c = v % (BN / 8);
            if (c * 8 >= cols)
                continue;
            kevo_f32x8 sum = kevo_bf16x8_to_f32(kevo_ldcg16(slot0 + v * 8));
            for (int q = 1; q < W; q++)
                kevo_acc_bf16x8(sum, kevo_ldcg16(slot0 + q * slot_stride + v * 8));
            const uint4 out = kevo_f32x8_to_bf16(sum);
            const int64_t off = (int64_t)(m0 + r) * a.n + n0 + c * 8;
            if (a.cvec) {
                for (int q = 0; q < W; q++)
                    *reinterpret_cast<uint4 *>(kevo_select_rank(a.c, q) + off) = out;
            } else {
                const int ne = min(8, cols - c * 8);
                for (int q = 0; q < W; q++)
                    for (int e = 0; e < ne; e++)
                        kevo_select_rank(a.c, q)[off + e] = kevo_bf16x8_elem(out, e);
            }
        }
    }

    kevo_cta_barrier(p, 1); // every rank's stores into this rank's C are done
    kevo_epoch_end(p);
}

// ---- host ------------------------------------------------------------------------------------

struct State {
    int vec_shape;
    int grid, splits, kper, nstrip, ncol, tiles, nown;
    bf16 *recv_peer[KEVO_MAX_RANKS];
    uint64_t *flag_peer[KEVO_MAX_RANKS];
    float *ws;
    int *cnt;
};

typedef void (*kernel_fn)(Args);

kernel_fn pick(bool vec)
{
    return vec ? gemm_ar_wgmma<true> : gemm_ar_wgmma<false>;
}

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *n, int64_t *kw)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_K, 1 << 30, (int64_t)1 << 40, m, n, kw);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, n, kw;
    if (W < 1 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &n, &kw))
        return 1;
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    st->vec_shape = kw % 8 == 0 && n % 8 == 0;
    // one CTA per SM (two warpgroups, ~193 KiB of shared memory)
    if (kevo_gemm_occupancy(kWho, pick(false), pick(true), kThreads, kevo_wgmma_smem, 1) < 1)
        return 1;

    st->ncol = (int)((n + BN - 1) / BN);
    st->nstrip = (int)((m + BM - 1) / BM);
    st->tiles = st->nstrip * st->ncol;
    st->nown = (st->tiles + W - 1) / W;

    const int64_t resident = ctx->sm_count;
    kevo_gemm_split_k(st->tiles, resident, kw, kevo_wgmma_bk, KSPLIT_MAX, kSplitMinKtiles,
                      &st->kper, &st->splits);

    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "signal pad too small");
    st->grid = (int)kevo_clamp_grid((int64_t)st->tiles * st->splits,
                                    resident < pad_limit ? resident : pad_limit);

    // symmetric scratch: receive slots, then flags (same sizes, same order on every rank)
    const size_t recv_bytes = (size_t)W * st->nown * BM * BN * sizeof(bf16);
    const size_t flag_bytes = (size_t)st->nown * W * sizeof(uint64_t);
    if (!kevo_scratch_peers(ctx, kWho, recv_bytes, st->recv_peer) ||
        !kevo_scratch_peers(ctx, kWho, flag_bytes, st->flag_peer))
        return 1;

    if (st->splits > 1) {
        cudaError_t e =
            kevo_gemm_split_ws(st->tiles, st->splits, (size_t)BM * BN, &st->ws, &st->cnt);
        if (e == cudaSuccess)
            e = cudaDeviceSynchronize();
        if (e != cudaSuccess)
            return kevo_fail(kWho, "split-K workspace: %s", cudaGetErrorString(e));
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    kevo_free_checked(kWho, st->ws, "split-K workspace");
    kevo_free_checked(kWho, st->cnt, "split-K counters");
    kevo_state_free(ctx);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    int64_t m, n, kw;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &n, &kw) ||
        !kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, m * n))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];

    Args a = {};
    a.a = (const bf16 *)ta->ptr;
    a.b = (const bf16 *)tb->ptr;
    int cvec = n % 8 == 0;
    for (int q = 0; q < W; q++) {
        a.c[q] = (bf16 *)tc->peer[q];
        a.recv[q] = st->recv_peer[q];
        a.flag[q] = st->flag_peer[q];
        cvec = cvec && kevo_aligned16(tc->peer[q]);
    }
    a.ws = st->ws;
    a.cnt = st->cnt;
    a.pads = kevo_pads_of(ctx);
    a.m = (int)m;
    a.n = (int)n;
    a.kw = (int)kw;
    a.nstrip = st->nstrip;
    a.ncol = st->ncol;
    a.tiles = st->tiles;
    a.nown = st->nown;
    a.splits = st->splits;
    a.kper = st->kper;
    a.cvec = cvec;
    const bool vec = st->vec_shape && kevo_aligned16(ta->ptr) && kevo_aligned16(tb->ptr);

    pick(vec)<<<st->grid, kThreads, kevo_wgmma_smem, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
