// fused_mma_sm.cu — allgather_gemm in ONE kernel: a few copy CTAs pull the peers' rows of A over
// NVLink (16-byte SM loads) into a local gathered buffer, chunk by chunk with a flag per chunk,
// while the other CTAs run a persistent tensor-core GEMM (mma.sync m16n8k16 bf16, fp32
// accumulators, cp.async multistage pipeline) that starts with this rank's own rows and reaches
// each peer's rows in the order the copies deliver them.
//
// Why one kernel: all work goes on ctx->stream, where two kernels never run at the same time;
// only one kernel can multiply while the gather is in flight.
//
// One call:
//  0. Every CTA b signals "entered call e" (e: the launch's epoch, taken on the device with
//     kevo_epoch_begin) to CTA b of every rank.
//  1. Copy CTAs (blockIdx < COPY_CTAS): wait until every peer has entered (its A is ready), then
//     copy units (strip, k-chunk) — the peer rows of a BM-row strip of A, KCHUNK columns — from
//     A_s (through ctx->inputs[0].peer[s]) into G, a private M x K buffer, in the order the
//     GEMM needs them: strips from this rank's own rows onwards, cyclically. After each unit:
//     __syncthreads(), one st.release of the epoch into the unit's flag (local memory). Then
//     the copy CTA joins the GEMM.
//  2. GEMM: C_r = A . B_r is cut into BM x 128 tiles (BM = 64 when M <= 64, else 128), grouped
//     GROUP_M strips at a time for L2 reuse of B_r, in the same cyclic strip order; with few
//     tiles (decode) each tile's K is split S ways and the last split to arrive sums the fp32
//     partials in split order. CTAs take items from an atomic counter (dynamic scheduling, so
//     the copy CTAs can join once their units are done). Row r of the A tile is read from A_r
//     when this rank owns it, otherwise from G, after thread 0 has acquired the flag of the
//     unit that holds that k-chunk (checked once per chunk, before the __syncthreads that
//     precedes the cp.async loads of that k-tile).
//  3. The tile is rounded to bf16 once, staged in shared memory, and stored into C_r with
//     16-byte stores (scalar stores when N/W % 8 != 0).
//  4. End barrier (kevo_cta_barrier phase 1): no peer reads this rank's A_r after it returns.
//
// Why it should be fast: the reference gathers (NCCL, ~10 us at m64, ~290 us for 64 MiB at
// m8192 W = 2) and then multiplies. Here the gather (SM pulls at up to ~370 GB/s per link)
// runs under the GEMM of the own rows, which at W = 2 is half of the work: at m8192 the
// gather (64 MiB, ~180 us) ends long before the own rows do. At m64 the whole layer is one
// launch (B_r streamed from HBM by S-way split-K CTAs) instead of two. The GEMM is mma.sync
// (no wgmma, no TMA) at maybe 55-70% of cuBLAS's throughput, so expect a LOSS at m8192 (and
// likely at m1024 at W = 2) against the reference; cublas_pull_sm.cu covers those. Expected
// wins: m64 at every W; m1024 at W = 8, where the gather dominates.
//
// Synchronisation:
//  - A peer's A_s is read only after CTA b saw CTA b of that peer enter this call (its inputs
//    are ready); the end barrier keeps this rank in the call until every peer's copy CTAs have
//    finished reading A_r (they arrive after their last load).
//  - G is private: a unit's rows are written by one copy CTA, __syncthreads(), then a release
//    (.sys) of the epoch into the unit flag; a GEMM CTA's thread 0 acquires the flag (>= epoch),
//    __syncthreads(), then its threads load the rows. Flags are epochs (never reset), so a flag
//    of call c never satisfies call c + 1; G of call c is only read by call c's kernel. Epochs
//    are the device's (kevo_epoch_begin / kevo_epoch_end, channel 0, one launch per call; the
//    copy units get them through a copy of the kernel's arguments whose pads carry the
//    launch's epoch), so a call replayed from a CUDA graph gets a new one.
//  - The item counter and the done counter are reset by the last CTA to finish (it observes
//    every other CTA's last ticket through the done counter, with fences); split-K counters
//    are reset by their last arriver; the next call starts after this kernel ends.
//  - No deadlock: copy CTAs wait only for the peers' start signals; GEMM CTAs wait only for
//    copy units; every CTA is co-resident (occupancy-checked grid, the same on every rank).
//
// Shared code (kevo_gemm_mma.cuh, host checks in kevo_cublas.cuh): the copy units of step 1
// (kevo_gather_units) and their consumer side (kevo_rows_gathered, kevo_chunk_hook), the GEMM
// tile (kevo_mma_gemm_tile, kevo_mma_split_reduce), the item counter (kevo_next_item,
// kevo_items_done), the staging and the store of step 3 (kevo_mma_stage_bf16,
// kevo_tile_store) and the host sizing; this file holds the schedule and the call protocol.
//
// kevo:pattern problem=allgather_gemm transport=sm fusion=fused
// kevo:param COPY_CTAS default=16 values=4,8,16,32
// kevo:param KCHUNK default=512 values=128,256,512,1024,2048
// kevo:param STAGES default=4 values=2,3,4,5
// kevo:param GROUP_M default=8 values=1,2,4,8,16
#define COPY_CTAS 16
#define KCHUNK 512
#define STAGES 4
#define GROUP_M 8

#include "kevo/kernel.h"
#include "kevo_gemm_mma.cuh"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = kevo_mma_threads; // 8 warps: 2 (rows) x 4 (columns)
constexpr int kCtasPerSm = 2;
constexpr int BK = kevo_mma_bk;
constexpr int BN = kevo_mma_bn;
constexpr int kPitch = kevo_mma_pitch;
constexpr int kSplitMax = 8;
constexpr int kSplitMinKtiles = 4;
constexpr int kCopyUnroll = 8; // 16-byte loads in flight per copying thread
constexpr const char *kWho = "allgather_gemm/fused_mma_sm";

static_assert(KCHUNK % BK == 0, "a k-tile must lie inside one copy chunk");

typedef __nv_bfloat16 bf16;

template <int BM> using Tile = kevo_mma_tile<BM, STAGES>;

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

template <int BM, bool VEC>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) ag_gemm_fused(const Args a)
{
    typedef Tile<BM> T;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *smem = reinterpret_cast<bf16 *>(smem_raw);
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

        float acc[T::MI][4][4];
        kevo_mma_gemm_tile<BM, STAGES, VEC>(acc, arow, rows, a.b + n0, a.nw, cols, kb, ke, smem,
                                            hook);
        if (a.splits > 1 && !kevo_mma_split_reduce<BM>(acc, a.ws + (size_t)t * a.splits * BM * BN,
                                                       s, a.splits, a.cnt + t, &s_flag))
            continue;

        kevo_mma_stage_bf16<BM>(acc, smem);
        kevo_tile_store<BN, kPitch, kThreads>(a, m0, n0, smem, rows, cols);
        __syncthreads(); // staging reads done before the next item's loads
    }

    kevo_items_done(a.ctr); // the last CTA to finish resets the item counters for the next call

    kevo_cta_barrier(p, 1); // no peer reads A_r after this rank returns
    kevo_epoch_end(p);
}

// ---- host ------------------------------------------------------------------------------------

struct State {
    int bm, grid, splits, kper, ncol, nstrip, tiles, nkc, copy_ctas;
    bf16 *g;
    uint64_t *uflag;
    float *ws;
    int *cnt;
    int *ctr;
};

typedef void (*kernel_fn)(Args);

kernel_fn pick(int bm, bool vec)
{
    if (bm == 64)
        return vec ? ag_gemm_fused<64, true> : ag_gemm_fused<64, false>;
    return vec ? ag_gemm_fused<128, true> : ag_gemm_fused<128, false>;
}

int smem_of(int bm)
{
    return bm == 64 ? Tile<64>::SMEM : Tile<128>::SMEM;
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

    st->bm = m <= 64 ? 64 : 128;
    const int occ = kevo_gemm_occupancy(kWho, pick(st->bm, false), pick(st->bm, true), kThreads,
                                        smem_of(st->bm), kCtasPerSm);
    if (occ < 1)
        return 1;
    const int64_t resident = (int64_t)occ * ctx->sm_count;

    st->ncol = (int)((nw + BN - 1) / BN);
    st->nstrip = (int)((m + st->bm - 1) / st->bm);
    st->tiles = st->nstrip * st->ncol;
    st->nkc = (int)((k + KCHUNK - 1) / KCHUNK);
    kevo_gemm_split_k(st->tiles, resident, k, BK, kSplitMax, kSplitMinKtiles, &st->kper,
                      &st->splits);

    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    const int64_t grid = resident < pad_limit ? resident : pad_limit;
    st->copy_ctas = W > 1 ? COPY_CTAS : 0;
    if (grid < st->copy_ctas + 1)
        return kevo_fail(kWho, "grid of %lld CTAs is too small", (long long)grid);
    st->grid = (int)grid;

    cudaError_t e = kevo_gather_alloc(m, k, st->nstrip, st->nkc, &st->g, &st->uflag, &st->ctr);
    if (e == cudaSuccess && st->splits > 1)
        e = kevo_gemm_split_ws(st->tiles, st->splits, (size_t)st->bm * BN, &st->ws, &st->cnt);
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
    a.first_strip = (int)((int64_t)ctx->rank * mw / st->bm);
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

    pick(st->bm, vec)<<<st->grid, kThreads, smem_of(st->bm), ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
