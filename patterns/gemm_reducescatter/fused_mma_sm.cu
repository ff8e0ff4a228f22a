// fused_mma_sm.cu — gemm_reducescatter in ONE kernel: a persistent tensor-core GEMM (mma.sync
// m16n8k16 bf16, fp32 accumulators, cp.async multistage pipeline) whose epilogue sends every
// finished tile of this rank's partial straight to the rank that owns those rows, over NVLink
// with SM stores; the owner sums the W partials of its tiles as they arrive, while the other
// CTAs keep multiplying.
//
// Why one kernel: all work goes on ctx->stream, where two kernels never run at the same time,
// so only a single kernel can overlap the reduce-scatter with the GEMM.
//
// One call:
//  1. Work items: every rank's block of M/W output rows is cut into BM x 128 tiles (BM = 64 when
//     M/W <= 64, else 128; a tile never straddles two ranks' rows). Tile t belongs to rank
//     t % W (consecutive tiles go to different owners, so all links work at once) and is the
//     (t / W)-th tile of that rank's block, numbered GROUP_M strips at a time, column by
//     column. With few tiles (decode) each tile's K/W range is split S ways. Item i =
//     (tile i / S, split i % S); CTA b takes items b, b + G, ... (G = grid).
//  2. Each item: multiply the A_r rows of the tile by the B_r column panel over the K range
//     (STAGES-deep cp.async pipeline, XOR-swizzled shared memory, ldmatrix, 8 warps). With
//     S > 1 the fp32 partials meet in a local workspace and the last split to arrive (atomic
//     counter) sums them in split order.
//  3. The CTA holding this rank's whole partial of tile t rounds it to bf16 (as cuBLAS does in
//     the reference), stages it in shared memory and stores it with 16-byte stores into the
//     owner's receive slot [parity][this rank][t / W] (symmetric scratch; parity: of the
//     launch's epoch), then publishes it: st.release.sys of the epoch into the owner's flag
//     [t / W][this rank].
//  4. On the owner, the same CTA waits for the W flags of the tile (acquire), sums the W
//     partials in rank order in fp32, rounds once and writes its rows of C_r (16-byte stores,
//     scalar when N % 8 != 0).
//  5. No end barrier when the scratch holds two sets of receive slots (epoch parity); otherwise
//     an end barrier (kevo_cta_barrier) keeps every rank in the call until all have reduced.
//
// Why it should be fast: at m64 the layer is one launch instead of cuBLAS + ncclReduceScatter
// (20 us): B_r is streamed from HBM by S-way split-K CTAs (~5 us), each tile's exchange is
// 16 KiB and there is not even a barrier round trip (only the per-tile flags). At m1024 and
// m8192 the reduce-scatter traffic (8 and 64 MiB per rank at W = 2) moves under the GEMM of
// the other tiles. The GEMM is mma.sync (no wgmma, no TMA), at maybe 55-70% of cuBLAS's
// throughput: expect a LOSS at m8192 and probably at m1024 at W = 2 against the reference;
// cublas_pull_sm.cu is the seed for those. Expected wins: m64 at every W, m1024 at W = 4, 8.
//
// Synchronisation:
//  - A slot is written by one CTA of one rank per call, published by a release of the epoch
//    after a __syncthreads() that orders all of the CTA's stores; the owner acquires the flag
//    (>= epoch) and __syncthreads() before reading the slot (ld.global.cg).
//  - Epochs are the device's: the kernel takes its launch's epoch with kevo_epoch_begin and
//    hands it on with kevo_epoch_end (channel 0, one launch per call), so the epoch grows by
//    one per call on every rank, also when the call is replayed from a CUDA graph (which
//    repeats every host value). The set of receive slots is chosen in the kernel by the
//    epoch's parity, both sets being one symmetric allocation (kevo_scratch_sets).
//  - Slot reuse, two sets (parity of epoch e): rank p writes set (e + 2) & 1 only in launch
//    e + 2, which it starts after finishing launch e + 1, whose reductions needed the partials
//    of every rank q for launch e + 1 (every rank owns at least one tile), which q sends only
//    after finishing launch e: so no rank still reads a set that is being rewritten. Flags are
//    epochs (>=, never reset), so they need no parity. One set: the end barrier gives the
//    same order.
//  - Only scratch of peers is written and only local inputs are read: no start barrier is
//    needed (a peer's slots are free once it finished the previous call, as above).
//  - No deadlock: the only waits are owners' (on items with the same tile index, which no CTA
//    blocks on before finishing its own part); the grid is co-resident (occupancy query) and
//    the same on every rank.
//
// Shared code: the GEMM tile (step 2: kevo_mma_gemm_tile, kevo_mma_split_reduce), the bf16
// staging and the slot store (step 3: kevo_mma_stage_bf16, kevo_tile_put), the tile order and
// the host sizing are in kevo_gemm_mma.cuh (its host checks in kevo_cublas.cuh); this file
// holds the schedule, the exchange protocol and the owner's reduction.
//
// kevo:pattern problem=gemm_reducescatter transport=sm fusion=fused
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
constexpr const char *kWho = "gemm_reducescatter/fused_mma_sm";

typedef __nv_bfloat16 bf16;

template <int BM> using Tile = kevo_mma_tile<BM, STAGES>;

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

template <int BM, bool VEC>
__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) gemm_rs_fused(const Args a)
{
    typedef Tile<BM> T;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *smem = reinterpret_cast<bf16 *>(smem_raw);
    __shared__ int s_flag;
    const int tid = threadIdx.x;
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int W = p.world, rank = p.rank;
    const uint64_t epoch = p.epoch;
    kevo_no_hook hook;

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

        float acc[T::MI][4][4];
        kevo_rows_strided arow = {a.a + (int64_t)m0 * a.kw, a.kw};
        kevo_mma_gemm_tile<BM, STAGES, VEC>(acc, arow, rows, a.b + n0, a.n, cols, kb, ke, smem,
                                            hook);
        if (a.splits > 1 && !kevo_mma_split_reduce<BM>(acc, a.ws + (size_t)t * a.splits * BM * BN,
                                                       s, a.splits, a.cnt + t, &s_flag))
            continue;

        // step 3: this rank's bf16 partial of tile t -> the owner's slot [rank][oidx] of the
        // set of this launch's parity
        const size_t set = (size_t)(epoch & 1) * (size_t)a.recv_set;
        kevo_mma_stage_bf16<BM>(acc, smem);
        kevo_tile_put<BN, kPitch, kThreads>(kevo_select_rank(a.recv, owner) + set +
                                                ((size_t)rank * a.nown + oidx) * BM * BN,
                                            smem, rows);
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
    int bm, vec_shape, nbuf;
    int grid, splits, kper, spb, ncol, nown;
    bf16 *recv_peer[KEVO_MAX_RANKS]; // both sets (one allocation), every rank's
    int64_t recv_set;                // elements from set 0 to set 1 (0: one set)
    uint64_t *flag_peer[KEVO_MAX_RANKS];
    float *ws;
    int *cnt;
};

typedef void (*kernel_fn)(Args);

kernel_fn pick(int bm, bool vec)
{
    if (bm == 64)
        return vec ? gemm_rs_fused<64, true> : gemm_rs_fused<64, false>;
    return vec ? gemm_rs_fused<128, true> : gemm_rs_fused<128, false>;
}

int smem_of(int bm)
{
    return bm == 64 ? Tile<64>::SMEM : Tile<128>::SMEM;
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
    const int64_t mw = m / W;

    st->bm = mw <= 64 ? 64 : 128;
    st->vec_shape = kw % 8 == 0 && n % 8 == 0;
    const int occ = kevo_gemm_occupancy(kWho, pick(st->bm, false), pick(st->bm, true), kThreads,
                                        smem_of(st->bm), CTAS_PER_SM);
    if (occ < 1)
        return 1;

    st->ncol = (int)((n + BN - 1) / BN);
    st->spb = (int)((mw + st->bm - 1) / st->bm);
    st->nown = st->spb * st->ncol;
    const int64_t tiles = (int64_t)st->nown * W;

    const int64_t resident = (int64_t)occ * ctx->sm_count;
    kevo_gemm_split_k(tiles, resident, kw, BK, KSPLIT_MAX, kSplitMinKtiles, &st->kper, &st->splits);

    const int64_t pad_limit = kevo_pads_max_ctas(kevo_pads_of(ctx), 1);
    if (pad_limit < 1)
        return kevo_fail(kWho, "signal pad too small");
    st->grid =
        (int)kevo_clamp_grid(tiles * st->splits, resident < pad_limit ? resident : pad_limit);

    // symmetric scratch: flags, then one or two sets of receive slots (same order everywhere)
    const size_t set_bytes = (size_t)W * st->nown * st->bm * BN * sizeof(bf16);
    const size_t flag_bytes = (size_t)st->nown * W * sizeof(uint64_t);
    if (!kevo_scratch_peers(ctx, kWho, flag_bytes, st->flag_peer))
        return 1;
    st->nbuf = kevo_scratch_sets(ctx, kWho, set_bytes, st->recv_peer, &st->recv_set);
    if (st->nbuf < 1)
        return 1;

    if (st->splits > 1) {
        cudaError_t e =
            kevo_gemm_split_ws(tiles, st->splits, (size_t)st->bm * BN, &st->ws, &st->cnt);
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
    // every rank takes the same branch: shapes are equal and tensors are 4 KiB aligned
    const bool vec = st->vec_shape && kevo_aligned16(ta->ptr) && kevo_aligned16(tb->ptr);

    pick(st->bm, vec)<<<st->grid, kThreads, smem_of(st->bm), ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}
