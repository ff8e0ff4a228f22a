// fused_wgmma_sm.cu — gemm_reducescatter in ONE kernel, like fused_mma_sm.cu but with a
// Hopper warpgroup GEMM: wgmma.mma_async m64n256k16 (bf16 in, fp32 accumulators) on 128 x 256
// tiles, operands in 128-byte-swizzled shared memory filled by cp.async (no TMA: plain LDGSTS
// loads and SM stores to the peers, so the cell stays sm/fused), 4 stages of 48 KiB, one CTA
// of two warpgroups per SM. The epilogue sends each finished tile of this rank's partial to
// the rank that owns its rows while the other CTAs keep multiplying.
//
// One call (the protocol of fused_mma_sm.cu with 128 x 256 tiles):
//  1. Each rank's block of M/W output rows is cut into 128 x 256 tiles (never straddling two
//     ranks' rows); tile t belongs to rank t % W and is its (t / W)-th tile, numbered GROUP_M
//     strips at a time, column by column. Few tiles (decode): each tile's K/W range is split S
//     ways. CTA b takes items b, b + G, ... (G = SMs).
//  2. The CTA multiplies (k-tiles of 64, 4 wgmma per warpgroup per k-tile, one wgmma group and
//     two cp.async k-tiles in flight); split partials meet in a local fp32 workspace and the
//     last split to arrive sums them in split order.
//  3. This rank's partial of tile t, rounded to bf16 and staged in shared memory, goes with
//     16-byte stores into the owner's receive slot [parity][this rank][t / W] (the parity of
//     the launch's epoch, taken on the device), published by
//     st.release.sys of the epoch into the owner's flag [t / W][this rank].
//  4. The owner's CTA waits for the W flags, sums the W partials in rank order in fp32, rounds
//     once and writes its rows of C_r.
//  5. No end barrier with two sets of receive slots (epoch parity), else kevo_cta_barrier.
//
// Why it should be fast: the reduce-scatter rides over NVLink under the GEMM of the other
// tiles, and the GEMM runs on wgmma. Without TMA multicast a 128 x 256 tile needs ~9 TB/s of L2
// bandwidth at 800 TFLOP/s, so expect roughly 500-600 TFLOP/s: m8192 ~3.2-3.9 ms against the
// reference's 3.07 ms (probably a loss, the closest a fused seed here gets), m1024 ~140 us
// against 148 us (close), m64 poor (use fused_mma_sm.cu).
// RISK: written without a GPU: the wgmma descriptors and the swizzled cp.async layout in
// kevo_wgmma_gemm_tile are what to check first if results are wrong (the core that all three
// fused_wgmma_sm.cu seeds share).
//
// Synchronisation: as fused_mma_sm.cu (slots written once per call, published by release /
// acquire .sys after a __syncthreads(); epochs never reset, taken on the device
// (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as correct as
// one made from the host; two sets of slots by the epoch's parity (one symmetric allocation,
// chosen in the kernel) or an end barrier; no peer input or output is touched, so no start
// barrier; co-resident grid of one CTA per SM, the same on every rank).
//
// Shared code: the wgmma core (kevo_wgmma_gemm_tile, kevo_wgmma_split_reduce,
// kevo_wgmma_stage_bf16) is kevo_gemm_wgmma.cuh; the slot store, the tile order and the host
// sizing come from kevo_gemm_mma.cuh (which it includes), the host checks from kevo_cublas.cuh.
//
// kevo:pattern problem=gemm_reducescatter transport=sm fusion=fused
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
constexpr const char *kWho = "gemm_reducescatter/fused_wgmma_sm";

typedef __nv_bfloat16 bf16;

// ---- the kernel ------------------------------------------------------------------------------

struct Args {
    const bf16 *a;                  // A_r [M][KW]
    const bf16 *b;                  // B_r [KW][N]
    bf16 *c;                        // C_r [M/W][N]
    bf16 *recv[KEVO_MAX_RANKS];     // every rank's receive slots, set 0 [src][nown][BM * BN]
    int64_t recv_set;               // set 1 starts recv_set elements after set 0 (0: one)
    uint64_t *flag[KEVO_MAX_RANKS]; // every rank's tile flags [nown][src]
    float *ws;                      // split-K partials [tiles][splits][BM * BN] (local)
    int *cnt;                       // split-K arrivals [tiles] (local)
    kevo_pads pads;
    int mw, n, kw;
    int spb, ncol, nown, splits, kper; // strips per block, columns, tiles per rank
    int cvec;                          // N % 8 == 0 and C_r 16-byte aligned
    int end_barrier;                   // a single set of receive slots
};

template <bool VEC> __global__ void __launch_bounds__(kThreads, 1) gemm_rs_wgmma(const Args a)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *smem = kevo_wgmma_aligned_smem(smem_raw);
    bf16 *stage = reinterpret_cast<bf16 *>(smem);
    kevo_no_hook hook;
    __shared__ int s_flag;
    const int tid = threadIdx.x;
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int W = p.world, rank = p.rank;
    const uint64_t epoch = p.epoch;

    const int tiles = a.nown * W;
    const int items = tiles * a.splits;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int t = item / a.splits, s = item - t * a.splits;
        const int owner = t % W, oidx = t / W;
        int ls, col;
        // strip and column of the owner's tile oidx
        kevo_tile_order<GROUP_M>(oidx, a.spb, a.ncol, &ls, &col);
        const int lr0 = ls * BM; // first row inside the owner's block
        const int m0 = owner * a.mw + lr0, n0 = col * BN;
        const int rows = min(BM, a.mw - lr0), cols = min(BN, a.n - n0);
        const int kb = s * a.kper, ke = min(a.kw, kb + a.kper);

        float acc[kevo_wgmma_acc];
        kevo_rows_strided arow = {a.a + (int64_t)m0 * a.kw, a.kw};
        kevo_wgmma_gemm_tile<VEC>(acc, arow, rows, a.b + n0, a.n, cols, kb, ke, smem, hook);
        if (a.splits > 1 && !kevo_wgmma_split_reduce(acc, a.ws + (size_t)t * a.splits * BM * BN, s,
                                                     a.splits, a.cnt + t, &s_flag))
            continue;

        // step 3: this rank's bf16 partial of tile t -> the owner's slot [rank][oidx] of the
        // set of this launch's parity
        const size_t set = (size_t)(epoch & 1) * (size_t)a.recv_set;
        kevo_wgmma_stage_bf16(acc, stage);
        kevo_tile_put<BN, kPitch, kThreads>(kevo_select_rank(a.recv, owner) + set +
                                                ((size_t)rank * a.nown + oidx) * BM * BN,
                                            stage, rows);
        __syncthreads(); // every thread's stores precede the release; smem reads are done
        if (tid == 0)
            kevo_store_release_sys(kevo_select_rank(a.flag, owner) + (size_t)oidx * W + rank,
                                   epoch);
        if (owner != rank)
            continue;

        // step 4: the owner sums the W partials into its rows of C_r
        if (tid < W)
            kevo_wait_flag(kevo_select_rank(a.flag, rank) + (size_t)oidx * W + tid, epoch);
        __syncthreads();
        const bf16 *slot0 = kevo_select_rank(a.recv, rank) + set + (size_t)oidx * BM * BN;
        const size_t slot_stride = (size_t)a.nown * BM * BN;
        for (int v = tid; v < rows * (BN / 8); v += kThreads) {
            const int r = v / (BN / 8), c = v % (BN / 8);
            if (c * 8 >= cols)
                continue;
            kevo_f32x8 sum = kevo_bf16x8_to_f32(kevo_ldcg16(slot0 + v * 8));
            for (int q = 1; q < W; q++)
                kevo_acc_bf16x8(sum, kevo_ldcg16(slot0 + q * slot_stride + v * 8));
            const uint4 out = kevo_f32x8_to_bf16(sum);
            const int64_t off = (int64_t)(lr0 + r) * a.n + n0 + c * 8;
            if (a.cvec) {
                *reinterpret_cast<uint4 *>(a.c + off) = out;
            } else {
                const int ne = min(8, cols - c * 8);
                for (int e = 0; e < ne; e++)
                    a.c[off + e] = kevo_bf16x8_elem(out, e);
            }
        }
    }

    if (a.end_barrier)
        kevo_cta_barrier(p, 0);
    kevo_epoch_end(p);
}

// ---- host ------------------------------------------------------------------------------------

struct State {
    int vec_shape, nbuf;
    int grid, splits, kper, spb, ncol, nown;
    bf16 *recv_peer[KEVO_MAX_RANKS]; // both sets (one allocation), every rank's
    int64_t recv_set;                // elements from set 0 to set 1 (0: one set)
    uint64_t *flag_peer[KEVO_MAX_RANKS];
    float *ws;
    int *cnt;
};

typedef void (*kernel_fn)(Args);

kernel_fn pick(bool vec)
{
    return vec ? gemm_rs_wgmma<true> : gemm_rs_wgmma<false>;
}

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *n, int64_t *kw)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_K | KEVO_GEMM_SPLIT_M, 1 << 30,
                            (int64_t)1 << 40, m, n, kw);
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
    const int64_t mw = m / W;
    // one CTA per SM (two warpgroups, ~193 KiB of shared memory)
    if (kevo_gemm_occupancy(kWho, pick(false), pick(true), kThreads, kevo_wgmma_smem, 1) < 1)
        return 1;

    st->ncol = (int)((n + BN - 1) / BN);
    st->spb = (int)((mw + BM - 1) / BM);
    st->nown = st->spb * st->ncol;
    const int64_t tiles = (int64_t)st->nown * W;

    const int64_t resident = ctx->sm_count;
    kevo_gemm_split_k(tiles, resident, kw, kevo_wgmma_bk, KSPLIT_MAX, kSplitMinKtiles, &st->kper,
                      &st->splits);

    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 1);
    if (pad_limit < 1)
        return kevo_fail(kWho, "signal pad too small");
    st->grid =
        (int)kevo_clamp_grid(tiles * st->splits, resident < pad_limit ? resident : pad_limit);

    // symmetric scratch: flags, then one or two sets of receive slots (same order everywhere)
    const size_t set_bytes = (size_t)W * st->nown * BM * BN * sizeof(bf16);
    const size_t flag_bytes = (size_t)st->nown * W * sizeof(uint64_t);
    if (!kevo_scratch_peers(ctx, kWho, flag_bytes, st->flag_peer))
        return 1;
    st->nbuf = kevo_scratch_sets(ctx, kWho, set_bytes, st->recv_peer, &st->recv_set);
    if (st->nbuf < 1)
        return 1;

    if (st->splits > 1) {
        cudaError_t e = kevo_gemm_split_ws(tiles, st->splits, (size_t)BM * BN, &st->ws, &st->cnt);
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
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &n, &kw))
        return 1;
    const int64_t mw = m / W;
    if (!kevo_gemm_tensors_ok(ctx, kWho, m * kw, kw * n, mw * n))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];

    Args a = {};
    a.a = (const bf16 *)ta->ptr;
    a.b = (const bf16 *)tb->ptr;
    a.c = (bf16 *)tc->ptr;
    for (int q = 0; q < W; q++) {
        a.recv[q] = st->recv_peer[q];
        a.flag[q] = st->flag_peer[q];
    }
    a.recv_set = st->recv_set;
    a.ws = st->ws;
    a.cnt = st->cnt;
    a.pads = kevo_pads_of(ctx);
    a.mw = (int)mw;
    a.n = (int)n;
    a.kw = (int)kw;
    a.spb = st->spb;
    a.ncol = st->ncol;
    a.nown = st->nown;
    a.splits = st->splits;
    a.kper = st->kper;
    a.cvec = n % 8 == 0 && kevo_aligned16(tc->ptr);
    a.end_barrier = st->nbuf == 1;
    const bool vec = st->vec_shape && kevo_aligned16(ta->ptr) && kevo_aligned16(tb->ptr);

    pick(vec)<<<st->grid, kThreads, kevo_wgmma_smem, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
