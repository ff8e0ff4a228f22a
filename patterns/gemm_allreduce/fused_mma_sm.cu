// fused_mma_sm.cu — gemm_allreduce in ONE kernel: a persistent tensor-core GEMM (mma.sync
// m16n8k16 bf16, fp32 accumulators, cp.async multistage shared-memory pipeline) whose epilogue
// does the all-reduce tile by tile over NVLink with SM stores, while the other CTAs keep
// multiplying.
//
// Why one kernel: every piece of work goes on ctx->stream, and two kernels on one stream never
// run at the same time, so a cuBLAS GEMM followed by a communication kernel cannot overlap.
// Inside one persistent kernel the CTAs that finished a tile push it over NVLink while the
// others are still in their main loops: the link and the tensor cores work at the same time.
//
// One call:
//  0. Every CTA b tells CTA b of every rank "entered call e" (e: the launch's epoch, taken on
//     the device with kevo_epoch_begin) and goes on without waiting (the wait comes before the
//     first store into a peer's C, step 4).
//  1. Work items: C is cut into BM x 128 tiles (BM = 64 when M <= 64, else 128), numbered
//     GROUP_M strips at a time, column by column (L2 reuse of A_r and B_r); each tile's K/W
//     range may be cut into S splits (S > 1 only when there are fewer tiles than CTAs, the
//     decode size: more CTAs stream B_r from HBM). Item i =
//     (tile i / S, split i % S); CTA b takes items b, b + G, b + 2G, ... (G = grid).
//  2. Each item: the CTA multiplies its A_r rows by the B_r column panel over its K range
//     (128 x 128 x 32 or 64 x 128 x 32 tiles, STAGES-deep cp.async pipeline, ldmatrix with an
//     XOR swizzle, 8 warps of 64x32 or 32x32). With S > 1 the fp32 partial goes to a local
//     workspace and the last split to arrive (atomic counter) sums the S partials in split
//     order: from here one CTA holds this rank's whole partial of tile t.
//  3. The partial is rounded to bf16 (as cuBLAS does in the reference), staged in shared memory
//     and stored with 16-byte stores into the receive slot [this rank][t / W] of the tile's
//     owner, rank t % W (a symmetric scratch; the owner may be this rank). Then one thread
//     publishes it: st.release.sys of the epoch into the owner's tile flag [t / W][this rank].
//  4. On the owner only, the same CTA waits for the W flags of tile t (acquire), sums the W
//     partials in rank order in fp32, rounds once, and stores the tile into the C of every rank
//     (16-byte stores; scalar stores when N % 8 != 0). Every rank gets the same bits.
//  5. End barrier (kevo_cta_barrier, phase 1): CTA b waits for CTA b of every rank.
//
// Why it should be fast: at m64 (decode) the whole layer is one launch instead of a cuBLAS
// GEMM + ncclAllReduce (26 us): the GEMM is HBM-bound on B_r (16 MiB at W = 2, ~5 us with
// 256 CTAs streaming it thanks to split-K), the exchange is 2 x 16 KiB per tile and the only
// full round trips are the split start barrier (hidden behind the GEMM) and the end barrier.
// At m1024 the all-reduce traffic (16 MiB per rank) rides under the GEMM of the other tiles.
// At m8192 the communication is hidden completely, but the GEMM is mma.sync (no wgmma, no TMA)
// and should reach only ~55-70% of cuBLAS's tensor-core throughput: expect it to LOSE to the
// reference at m8192 (and possibly at m1024 at W = 2); cublas_oneshot_sm.cu is the seed for
// those sizes. Expected wins: m64 at every W, m1024 at W = 4 and 8 (there the all-reduce is a
// larger share of the reference's time).
//
// Synchronisation (why nothing stale or half-written is read):
//  - Partials: a slot is written by exactly one CTA of one rank per call, then published by a
//    release of the epoch after a __syncthreads() that orders every thread's stores; the owner
//    acquires the flag (>= epoch) and __syncthreads() before any thread reads the slot (with
//    ld.global.cg, never the non-coherent path).
//  - Slot reuse across calls: a rank starts call c + 1 only after its call c kernel ended,
//    which needed CTA b of every rank at the end barrier of call c, i.e. every owner had
//    finished reading its slots of call c. Flags hold epochs (never reset, compare >=), so a
//    flag of call c cannot satisfy a wait of call c + 1. Epochs are the device's (the kernel
//    takes its launch's with kevo_epoch_begin and hands it on with kevo_epoch_end: channel 0,
//    one launch per call), so a call replayed from a CUDA graph, which repeats every host
//    value, gets a new one as a call made from the host does.
//  - C: nothing is stored into rank q's C before CTA b has seen CTA b of rank q enter this call
//    (the split start barrier); rank q's kernel ends only after CTA b of every rank reached
//    the end barrier, after all of that CTA's stores into q's C (release/acquire, .sys).
//  - A_r and B_r are only read locally. Split-K partials are local: written, __threadfence(),
//    counted with atomicAdd; the last arriver fences and reads them (ld.global.cg) and resets
//    the counter for the next call (the kernel boundary orders that).
//  - Deadlock freedom: the only waits are the owner's (for items with the same tile index,
//    which no CTA blocks on before finishing) and the barriers; the grid is at most what is
//    co-resident (occupancy query in kevo_init) and the same on every rank.
//
// kevo_init sizes everything from M, N, K, W and the SM count (equal on every rank) and takes
// the receive slots and flags from ctx->scratch_alloc (symmetric), the split-K workspace from
// cudaMalloc (private).
//
// Shared code: the GEMM tile (step 2: kevo_mma_gemm_tile, kevo_mma_split_reduce), the bf16
// staging and the slot store (step 3: kevo_mma_stage_bf16, kevo_tile_put), the tile order and
// the host sizing are in kevo_gemm_mma.cuh (its host checks in kevo_cublas.cuh); this file
// holds the schedule, the exchange protocol and the owner's reduction.
//
// kevo:pattern problem=gemm_allreduce transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..2
// kevo:param STAGES default=4 values=2,3,4,5
// kevo:param KSPLIT_MAX default=8 values=1,2,4,8,16
// kevo:param GROUP_M default=8 values=1,2,4,8,16
#define CTAS_PER_SM 2
#define STAGES 4
#define KSPLIT_MAX 8
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
constexpr int BK = kevo_mma_bk;            // k per pipeline stage
constexpr int BN = kevo_mma_bn;            // tile columns
constexpr int kPitch = kevo_mma_pitch;     // staging row pitch in elements
constexpr int kSplitMinKtiles = 4;         // k-tiles per split at least
constexpr const char *kWho = "gemm_allreduce/fused_mma_sm";

typedef __nv_bfloat16 bf16;

template <int BM> using Tile = kevo_mma_tile<BM, STAGES>;

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

template <int BM, bool VEC>
__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) gemm_ar_fused(const Args a)
{
    typedef Tile<BM> T;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *smem = reinterpret_cast<bf16 *>(smem_raw);
    __shared__ int s_flag;
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int tid = threadIdx.x;
    const int W = p.world, rank = p.rank;
    const uint64_t epoch = p.epoch;

    // step 0: arrive half of the start barrier
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

        float acc[T::MI][4][4];
        kevo_rows_strided arow = {a.a + (int64_t)m0 * a.kw, a.kw};
        kevo_mma_gemm_tile<BM, STAGES, VEC>(acc, arow, rows, a.b + n0, a.n, cols, kb, ke, smem,
                                            hook);
        if (a.splits > 1 && !kevo_mma_split_reduce<BM>(acc, a.ws + (size_t)t * a.splits * BM * BN,
                                                       s, a.splits, a.cnt + t, &s_flag))
            continue;

        // step 3: this rank's bf16 partial of tile t -> the owner's slot [rank][t / W]
        kevo_mma_stage_bf16<BM>(acc, smem);
        const int owner = t % W, oidx = t / W;
        kevo_tile_put<BN, kPitch, kThreads>(
            kevo_select_rank(a.recv, owner) + ((size_t)rank * a.nown + oidx) * BM * BN, smem, rows);
        __syncthreads(); // every thread's stores precede the release; smem reads are done
        if (tid == 0)
            kevo_store_release_sys(kevo_select_rank(a.flag, owner) + (size_t)oidx * W + rank,
                                   epoch);
        if (owner != rank)
            continue;

        // step 4: the owner sums the W partials and stores the tile into every rank's C
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

    // step 5: no rank leaves before every rank's stores into its C are done
    kevo_cta_barrier(p, 1);
    kevo_epoch_end(p);
}

// ---- host ------------------------------------------------------------------------------------

struct State {
    int bm, vec_shape;
    int grid, splits, kper, nstrip, ncol, tiles, nown;
    bf16 *recv_peer[KEVO_MAX_RANKS];
    uint64_t *flag_peer[KEVO_MAX_RANKS];
    float *ws;
    int *cnt;
};

typedef void (*kernel_fn)(Args);

kernel_fn pick(int bm, bool vec)
{
    if (bm == 64)
        return vec ? gemm_ar_fused<64, true> : gemm_ar_fused<64, false>;
    return vec ? gemm_ar_fused<128, true> : gemm_ar_fused<128, false>;
}

int smem_of(int bm)
{
    return bm == 64 ? Tile<64>::SMEM : Tile<128>::SMEM;
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

    st->bm = m <= 64 ? 64 : 128;
    st->vec_shape = kw % 8 == 0 && n % 8 == 0;
    const int occ = kevo_gemm_occupancy(kWho, pick(st->bm, false), pick(st->bm, true), kThreads,
                                        smem_of(st->bm), CTAS_PER_SM);
    if (occ < 1)
        return 1;

    st->ncol = (int)((n + BN - 1) / BN);
    st->nstrip = (int)((m + st->bm - 1) / st->bm);
    st->tiles = st->nstrip * st->ncol;
    st->nown = (st->tiles + W - 1) / W;

    const int64_t resident = (int64_t)occ * ctx->sm_count;
    kevo_gemm_split_k(st->tiles, resident, kw, BK, KSPLIT_MAX, kSplitMinKtiles, &st->kper,
                      &st->splits);

    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "signal pad too small");
    st->grid = (int)kevo_clamp_grid((int64_t)st->tiles * st->splits,
                                    resident < pad_limit ? resident : pad_limit);

    // symmetric scratch: receive slots, then flags (same sizes, same order on every rank)
    const size_t recv_bytes = (size_t)W * st->nown * st->bm * BN * sizeof(bf16);
    const size_t flag_bytes = (size_t)st->nown * W * sizeof(uint64_t);
    if (!kevo_scratch_peers(ctx, kWho, recv_bytes, st->recv_peer) ||
        !kevo_scratch_peers(ctx, kWho, flag_bytes, st->flag_peer))
        return 1;

    if (st->splits > 1) {
        cudaError_t e =
            kevo_gemm_split_ws(st->tiles, st->splits, (size_t)st->bm * BN, &st->ws, &st->cnt);
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
    // every rank takes the same branch: shapes are equal and tensors are 4 KiB aligned
    const bool vec = st->vec_shape && kevo_aligned16(ta->ptr) && kevo_aligned16(tb->ptr);

    pick(st->bm, vec)<<<st->grid, kThreads, smem_of(st->bm), ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
