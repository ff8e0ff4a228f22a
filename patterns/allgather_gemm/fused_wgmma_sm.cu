// fused_wgmma_sm.cu — allgather_gemm in ONE kernel, like fused_mma_sm.cu but with a Hopper
// warpgroup GEMM: wgmma.mma_async m64n256k16 (bf16 in, fp32 accumulators) on 128 x 256 tiles,
// operands in 128-byte-swizzled shared memory filled by cp.async (no TMA: plain LDGSTS loads,
// plain SM loads from the peers, so the cell stays sm/fused), 4 stages of 48 KiB, one CTA of
// two warpgroups per SM. COPY_CTAS of the CTAs first pull the peers' rows of A into a private
// gathered buffer, chunk by chunk with a flag per chunk, then join the GEMM.
//
// One call (the protocol of fused_mma_sm.cu with 128 x 256 tiles):
//  0. CTA b signals "entered call e" to CTA b of every rank.
//  1. Copy CTAs wait until every peer has entered, then copy units (strip of 128 rows,
//     KCHUNK columns: the peer rows only) from A_s into G in the order the GEMM needs them
//     (from this rank's own strip onwards, cyclically), releasing the epoch into each unit's
//     flag; then they take GEMM items like the others.
//  2. GEMM items (tile, split) come from an atomic counter; tiles of C_r are 128 x 256, in the
//     cyclic strip order, GROUP_M strips at a time. Rows this rank owns come from A_r, the
//     others from G after thread 0 acquired the unit flag of that k-chunk (before the
//     __syncthreads that precedes the loads of each k-tile). Split partials meet in a local
//     fp32 workspace; the last split sums them in split order.
//  3. The tile is rounded once to bf16, staged in shared memory and written to C_r.
//  4. End barrier: no peer reads this rank's A_r after it returns.
//
// Why it should be fast: the gather hides under the GEMM of the own rows and the GEMM runs on
// wgmma. Without TMA multicast a 128 x 256 tile needs ~9 TB/s of L2 bandwidth at 800 TFLOP/s,
// so expect roughly 500-600 TFLOP/s: m8192 ~3.2-3.9 ms against the reference's 3.04 ms
// (probably a loss, the closest a fused seed here gets), m1024 ~140 us against 148 us (close),
// m64 poor (128-row tiles for 64 rows; use fused_mma_sm.cu).
// RISK: written without a GPU: the wgmma descriptors and the swizzled cp.async layout in
// kevo_wgmma_gemm_tile are what to check first if results are wrong (the core that all three
// fused_wgmma_sm.cu seeds share).
//
// Synchronisation: as fused_mma_sm.cu (peers' A read only after their start signal, end
// barrier before returning; epochs taken on the device (kevo_epoch_begin / kevo_epoch_end), so
// graph replays are as correct; unit flags are local epochs with release/acquire around
// __syncthreads; counters reset by the last CTA / last split arriver; co-resident grid of one
// CTA per SM, the same on every rank; copy CTAs never wait for GEMM work).
//
// Shared code: the wgmma core (kevo_wgmma_gemm_tile, kevo_wgmma_split_reduce,
// kevo_wgmma_stage_bf16) is kevo_gemm_wgmma.cuh; the copy units and their consumer side
// (kevo_gather_units, kevo_rows_gathered, kevo_chunk_hook), the item counter, the store into
// C_r and the host sizing come from kevo_gemm_mma.cuh (which it includes), the host checks
// from kevo_cublas.cuh.
//
// kevo:pattern problem=allgather_gemm transport=sm fusion=fused
// kevo:param COPY_CTAS default=16 values=4,8,16,32
// kevo:param KCHUNK default=512 values=128,256,512,1024,2048
// kevo:param GROUP_M default=8 values=1,2,4,8,16
#define COPY_CTAS 16
#define KCHUNK 512
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
constexpr int kSplitMax = 8;
constexpr int kCopyUnroll = 8; // 16-byte loads in flight per copying thread
constexpr const char *kWho = "allgather_gemm/fused_wgmma_sm";

static_assert(KCHUNK % kevo_wgmma_bk == 0, "a k-tile must lie inside one copy chunk");

typedef __nv_bfloat16 bf16;

// ---- the kernel ------------------------------------------------------------------------------

struct Args {
    const bf16 *a[KEVO_MAX_RANKS]; // every rank's A_s [M/W][K]
    const bf16 *a_own;             // this rank's A_r (== a[rank])
    bf16 *g;                       // gathered A, private [M][K] (only peer rows are written)
    const bf16 *b;                 // B_r [K][N/W]
    bf16 *c;                       // C_r [M][N/W]
    uint64_t *uflag;               // unit flags [nstrip][nkc] (local)
    float *ws;                     // split-K partials [tiles][splits][BM * BN] (local)
    int *cnt;                      // split-K arrivals [tiles] (local)
    int *ctr;                      // [0] next item, [1] CTAs done (local)
    kevo_pads pads;
    int m, mw, k, nw;
    int nstrip, first_strip, ncol, tiles, splits, kper, nkc, copy_ctas;
    int cvec;  // N/W % 8 == 0 and C_r 16-byte aligned
    int cpvec; // K % 8 == 0 and every A_s and G 16-byte aligned
};

template <bool VEC> __global__ void __launch_bounds__(kThreads, 1) ag_gemm_wgmma(const Args a)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *smem = kevo_wgmma_aligned_smem(smem_raw);
    bf16 *stage = reinterpret_cast<bf16 *>(smem);
    __shared__ int s_flag, s_item;
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int tid = threadIdx.x;
    const int W = p.world, rank = p.rank;

    if (tid < W)
        kevo_signal(p, tid, kevo_start_slot(blockIdx.x, rank, W));

    if ((int)blockIdx.x < a.copy_ctas) {
        Args ga = a; // kevo_gather_units takes the epoch from its argument's pads
        ga.pads = p;
        kevo_gather_units<BM, KCHUNK, kThreads, kCopyUnroll>(ga);
    }

    const int own_lo = rank * a.mw, own_hi = own_lo + a.mw;
    const int items = a.tiles * a.splits;
    for (;;) {
        const int item = kevo_next_item(a.ctr, &s_item);
        if (item >= items)
            break;
        const int t = item / a.splits, s = item - t * a.splits;
        int j, col;
        // strip (in the cyclic need order) and column of tile t
        kevo_tile_order<GROUP_M>(t, a.nstrip, a.ncol, &j, &col);
        const int strip = (a.first_strip + j) % a.nstrip;
        const int m0 = strip * BM, n0 = col * BN;
        const int rows = min(BM, a.m - m0), cols = min(BN, a.nw - n0);
        const int kb = s * a.kper, ke = min(a.k, kb + a.kper);

        kevo_rows_gathered arow = {a.a_own, a.g, m0, own_lo, own_hi, a.k};
        const bool has_peer_rows = m0 < own_lo || m0 + rows > own_hi;
        kevo_chunk_hook<KCHUNK> hook = {
            has_peer_rows ? a.uflag + (size_t)strip * a.nkc : (const uint64_t *)0, p.epoch, 0};

        float acc[kevo_wgmma_acc];
        kevo_wgmma_gemm_tile<VEC>(acc, arow, rows, a.b + n0, a.nw, cols, kb, ke, smem, hook);
        if (a.splits > 1 && !kevo_wgmma_split_reduce(acc, a.ws + (size_t)t * a.splits * BM * BN, s,
                                                     a.splits, a.cnt + t, &s_flag))
            continue;

        kevo_wgmma_stage_bf16(acc, stage);
        kevo_tile_store<BN, kPitch, kThreads>(a, m0, n0, stage, rows, cols);
        __syncthreads(); // staging reads done before the next item's loads
    }

    kevo_items_done(a.ctr); // the last CTA to finish resets the item counters for the next call

    kevo_cta_barrier(p, 1); // no peer reads A_r after this rank returns
    kevo_epoch_end(p);
}

// ---- host ------------------------------------------------------------------------------------

struct State {
    int grid, splits, kper, ncol, nstrip, tiles, nkc, copy_ctas;
    bf16 *g;
    uint64_t *uflag;
    float *ws;
    int *cnt;
    int *ctr;
};

typedef void (*kernel_fn)(Args);

kernel_fn pick(bool vec)
{
    return vec ? ag_gemm_wgmma<true> : ag_gemm_wgmma<false>;
}

int read_params(const kevo_ctx *ctx, int64_t *m, int64_t *nw, int64_t *k)
{
    return kevo_gemm_params(ctx, kWho, KEVO_GEMM_SPLIT_N | KEVO_GEMM_SPLIT_M, 1 << 30, 0, m, nw, k);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, nw, k;
    if (W < 1 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &nw, &k))
        return 1;
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;

    // one CTA per SM (two warpgroups, ~193 KiB of shared memory)
    if (kevo_gemm_occupancy(kWho, pick(false), pick(true), kThreads, kevo_wgmma_smem, 1) < 1)
        return 1;
    const int64_t resident = ctx->sm_count;

    st->ncol = (int)((nw + BN - 1) / BN);
    st->nstrip = (int)((m + BM - 1) / BM);
    st->tiles = st->nstrip * st->ncol;
    st->nkc = (int)((k + KCHUNK - 1) / KCHUNK);
    kevo_gemm_split_k(st->tiles, resident, k, kevo_wgmma_bk, kSplitMax, kSplitMinKtiles, &st->kper,
                      &st->splits);

    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    const int64_t grid = resident < pad_limit ? resident : pad_limit;
    st->copy_ctas = W > 1 ? COPY_CTAS : 0;
    if (grid < st->copy_ctas + 1)
        return kevo_fail(kWho, "grid of %lld CTAs is too small", (long long)grid);
    st->grid = (int)grid;

    cudaError_t e = kevo_gather_alloc(m, k, st->nstrip, st->nkc, &st->g, &st->uflag, &st->ctr);
    if (e == cudaSuccess && st->splits > 1)
        e = kevo_gemm_split_ws(st->tiles, st->splits, (size_t)BM * BN, &st->ws, &st->cnt);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return kevo_fail(kWho, "buffers: %s", cudaGetErrorString(e));
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    kevo_free_checked(kWho, st->g, "gathered A");
    kevo_free_checked(kWho, st->uflag, "unit flags");
    kevo_free_checked(kWho, st->ctr, "item counters");
    kevo_free_checked(kWho, st->ws, "split-K workspace");
    kevo_free_checked(kWho, st->cnt, "split-K counters");
    kevo_state_free(ctx);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    int64_t m, nw, k;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &nw, &k))
        return 1;
    const int64_t mw = m / W;
    if (!kevo_gemm_tensors_ok(ctx, kWho, mw * k, k * nw, m * nw))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];

    Args a = {};
    int cpvec = k % 8 == 0 && kevo_aligned16(st->g);
    for (int q = 0; q < W; q++) {
        a.a[q] = (const bf16 *)ta->peer[q];
        cpvec = cpvec && kevo_aligned16(ta->peer[q]);
    }
    a.a_own = (const bf16 *)ta->ptr;
    a.g = st->g;
    a.b = (const bf16 *)tb->ptr;
    a.c = (bf16 *)tc->ptr;
    a.uflag = st->uflag;
    a.ws = st->ws;
    a.cnt = st->cnt;
    a.ctr = st->ctr;
    a.pads = kevo_pads_of(ctx);
    a.m = (int)m;
    a.mw = (int)mw;
    a.k = (int)k;
    a.nw = (int)nw;
    a.nstrip = st->nstrip;
    a.first_strip = (int)((int64_t)ctx->rank * mw / BM);
    a.ncol = st->ncol;
    a.tiles = st->tiles;
    a.splits = st->splits;
    a.kper = st->kper;
    a.nkc = st->nkc;
    a.copy_ctas = st->copy_ctas;
    a.cvec = nw % 8 == 0 && kevo_aligned16(tc->ptr);
    a.cpvec = cpvec;
    // the same on every rank: equal shapes, 4 KiB-aligned tensors
    const bool vec = cpvec && nw % 8 == 0 && kevo_aligned16(tb->ptr);

    pick(vec)<<<st->grid, kThreads, kevo_wgmma_smem, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
