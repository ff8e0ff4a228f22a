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
//     owner's receive slot [parity][this rank][t / W] (symmetric scratch), then publishes it:
//     st.release.sys of the epoch into the owner's flag [t / W][this rank].
//  4. On the owner, the same CTA waits for the W flags of the tile (acquire), sums the W
//     partials in rank order in fp32, rounds once and writes its rows of C_r (16-byte stores,
//     scalar when N % 8 != 0).
//  5. No end barrier when the scratch holds two sets of receive slots (call parity); otherwise
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
//  - Slot reuse, two sets (parity = call_index & 1): rank p writes set (c + 2) & 1 only in call
//    c + 2, which it enters after finishing call c + 1, whose reductions needed the partials of
//    every rank q for call c + 1 (every rank owns at least one tile), which q sends only after
//    finishing call c: so no rank still reads a set that is being rewritten. Flags are epochs
//    (>=, never reset), so they need no parity. One set: the end barrier gives the same order.
//    (Call indices advance by one between executed calls except for the captured call 0,
//    which never runs: the parity argument holds for calls 1, 2, 3, ...)
//  - Only scratch of peers is written and only local inputs are read: no start barrier is
//    needed (a peer's slots are free once it finished the previous call, as above).
//  - No deadlock: the only waits are owners' (on items with the same tile index, which no CTA
//    blocks on before finishing its own part); the grid is co-resident (occupancy query) and
//    the same on every rank.
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
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = 256; // 8 warps: 2 (rows) x 4 (columns)
constexpr int BK = 32;        // k per pipeline stage
constexpr int BN = 128;       // tile columns
constexpr int kPitch = BN + 8; // staging row pitch in elements (272 bytes: no bank conflicts)
constexpr int kSplitMinKtiles = 4; // k-tiles per split at least

typedef __nv_bfloat16 bf16;

template <int BM>
struct Tile {
    static constexpr int WM = BM / 2;  // rows per warp
    static constexpr int MI = WM / 16; // m16 fragments per warp (and 4 n8 fragments: 32 columns)
    static constexpr int A_ELEMS = BM * BK;
    static constexpr int B_ELEMS = BK * BN;
    static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
    static constexpr int PIPE_BYTES = STAGES * STAGE_ELEMS * 2;
    static constexpr int OUT_BYTES = BM * kPitch * 2;
    static constexpr int SMEM = PIPE_BYTES > OUT_BYTES ? PIPE_BYTES : OUT_BYTES;
};

// ---- PTX wrappers ----------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared, asynchronous; src_bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint4 ldcg16(const void *p)
{
    return __ldcg(reinterpret_cast<const uint4 *>(p));
}

// Element e (0..7) of 8 bf16 packed in a uint4, without a dynamic index into a local array.
__device__ __forceinline__ bf16 elem8(const uint4 &v, int e)
{
    const uint32_t w = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
    return __ushort_as_bfloat16((unsigned short)((e & 1) ? (w >> 16) : (w & 0xffffu)));
}

// ---- the GEMM tile ---------------------------------------------------------------------------
//
// acc += A[0:rows, kb:ke] . B[kb:ke, 0:cols] for one BM x BN tile, A rows at a + r * lda, B
// element (k, j) at b[k * ldb + j]. Rows >= rows, columns >= cols and k >= ke read as zeros.
// Shared memory per stage: A [BM][32] (row = 64 bytes = 4 chunks of 16 B, chunk c stored at
// c ^ ((r >> 1) & 3)) and B [32][128] (row = 256 bytes = 16 chunks, chunk c at c ^ (r & 7)):
// both make the 8 row addresses of every ldmatrix phase hit 8 different bank groups.
// VEC: every row start is 16-byte aligned and lda, ldb, ke are multiples of 8, so a 16-byte
// chunk is wholly inside or wholly outside; otherwise elements are loaded one by one.
// Ends with a __syncthreads(): the shared memory is free for the caller.
template <int BM, bool VEC>
__device__ __forceinline__ void gemm_tile(float (&acc)[Tile<BM>::MI][4][4], const bf16 *a,
                                          int64_t lda, int rows, const bf16 *b, int64_t ldb,
                                          int cols, int kb, int ke, bf16 *smem)
{
    typedef Tile<BM> T;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const uint32_t sbase = smem_u32(smem);

#pragma unroll
    for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mi][ni][e] = 0.f;

    auto load_stage = [&](int stage, int k0) {
        const uint32_t sa = sbase + stage * T::STAGE_ELEMS * 2;
        const uint32_t sb = sa + T::A_ELEMS * 2;
        bf16 *pa = smem + stage * T::STAGE_ELEMS;
        bf16 *pb = pa + T::A_ELEMS;
#pragma unroll
        for (int i = 0; i < BM * 4 / kThreads; i++) {
            const int idx = tid + i * kThreads, r = idx >> 2, c = idx & 3;
            const int k = k0 + c * 8;
            const int off = r * BK + ((c ^ ((r >> 1) & 3)) << 3);
            if (VEC) {
                const bool ok = r < rows && k < ke;
                cp_async16(sa + off * 2, ok ? (const void *)(a + r * lda + k) : (const void *)a,
                           ok ? 16 : 0);
            } else {
                uint4 v;
                bf16 *e = reinterpret_cast<bf16 *>(&v);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    e[j] = (r < rows && k + j < ke) ? a[r * lda + k + j] : __float2bfloat16(0.f);
                *reinterpret_cast<uint4 *>(pa + off) = v;
            }
        }
#pragma unroll
        for (int i = 0; i < BK * 16 / kThreads; i++) {
            const int idx = tid + i * kThreads, r = idx >> 4, c = idx & 15;
            const int k = k0 + r, n = c * 8;
            const int off = r * BN + ((c ^ (r & 7)) << 3);
            if (VEC) {
                const bool ok = k < ke && n < cols;
                cp_async16(sb + off * 2, ok ? (const void *)(b + k * ldb + n) : (const void *)b,
                           ok ? 16 : 0);
            } else {
                uint4 v;
                bf16 *e = reinterpret_cast<bf16 *>(&v);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    e[j] = (k < ke && n + j < cols) ? b[k * ldb + n + j] : __float2bfloat16(0.f);
                *reinterpret_cast<uint4 *>(pb + off) = v;
            }
        }
    };

    auto compute_stage = [&](int stage) {
        const uint32_t sa = sbase + stage * T::STAGE_ELEMS * 2;
        const uint32_t sb = sa + T::A_ELEMS * 2;
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t af[T::MI][4];
            uint32_t bfr[4][2];
#pragma unroll
            for (int mi = 0; mi < T::MI; mi++) {
                const int r = wm * T::WM + mi * 16 + (lane & 15);
                const int c = kk * 2 + (lane >> 4);
                ldmatrix_x4(af[mi], sa + (r * BK + ((c ^ ((r >> 1) & 3)) << 3)) * 2);
            }
#pragma unroll
            for (int nj = 0; nj < 2; nj++) {
                const int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                const int c = ((wn * 32 + nj * 16) >> 3) + (lane >> 4);
                uint32_t t4[4];
                ldmatrix_x4_trans(t4, sb + (r * BN + ((c ^ (r & 7)) << 3)) * 2);
                bfr[2 * nj][0] = t4[0];
                bfr[2 * nj][1] = t4[1];
                bfr[2 * nj + 1][0] = t4[2];
                bfr[2 * nj + 1][1] = t4[3];
            }
#pragma unroll
            for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
                    mma_bf16(acc[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
        }
    };

    const int nk = (ke - kb + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nk)
            load_stage(s, kb + s * BK);
        cp_async_commit();
    }
    for (int kt = 0; kt < nk; kt++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); // stage kt is complete for every thread; stage kt - 1 is consumed
        const int pf = kt + STAGES - 1;
        if (pf < nk)
            load_stage(pf % STAGES, kb + pf * BK);
        cp_async_commit();
        compute_stage(kt % STAGES);
    }
    cp_async_wait<0>();
    __syncthreads();
}

// ---- epilogue pieces -------------------------------------------------------------------------

// Split-K: stores this split's fp32 partial (register order, coalesced float4) into the tile's
// workspace, counts the arrival, and returns true in the last CTA to arrive, which then holds
// the sum over the splits, in split order (its own partial re-read from L2), in acc.
template <int BM>
__device__ __forceinline__ bool split_reduce(float (&acc)[Tile<BM>::MI][4][4], float *ws_tile,
                                             int s, int splits, int *cnt, int *s_flag)
{
    typedef Tile<BM> T;
    const int tid = threadIdx.x;
    float4 *mine = reinterpret_cast<float4 *>(ws_tile + (size_t)s * BM * BN);
#pragma unroll
    for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
            mine[(mi * 4 + ni) * kThreads + tid] =
                make_float4(acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]);
    __threadfence();
    __syncthreads();
    if (tid == 0)
        *s_flag = atomicAdd(cnt, 1) == splits - 1;
    __syncthreads();
    if (!*s_flag)
        return false;
    __threadfence();
#pragma unroll
    for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mi][ni][e] = 0.f;
    for (int s2 = 0; s2 < splits; s2++) {
        const float4 *src = reinterpret_cast<const float4 *>(ws_tile + (size_t)s2 * BM * BN);
#pragma unroll
        for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const float4 v = __ldcg(src + (mi * 4 + ni) * kThreads + tid);
                acc[mi][ni][0] += v.x;
                acc[mi][ni][1] += v.y;
                acc[mi][ni][2] += v.z;
                acc[mi][ni][3] += v.w;
            }
    }
    if (tid == 0)
        *cnt = 0; // ready for the next call (ordered by the kernel boundary)
    return true;
}

// acc (fp32) -> bf16 tile [BM][kPitch] in shared memory, then __syncthreads().
template <int BM>
__device__ __forceinline__ void stage_bf16(const float (&acc)[Tile<BM>::MI][4][4], bf16 *st)
{
    typedef Tile<BM> T;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp >> 2, wn = warp & 3;
#pragma unroll
    for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++) {
            const int r = wm * T::WM + mi * 16 + (lane >> 2);
            const int c = wn * 32 + ni * 8 + 2 * (lane & 3);
            *reinterpret_cast<__nv_bfloat162 *>(st + r * kPitch + c) =
                __floats2bfloat162_rn(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<__nv_bfloat162 *>(st + (r + 8) * kPitch + c) =
                __floats2bfloat162_rn(acc[mi][ni][2], acc[mi][ni][3]);
        }
    __syncthreads();
}

// ---- the kernel ------------------------------------------------------------------------------

struct Args {
    const bf16 *a;                       // A_r [M][KW]
    const bf16 *b;                       // B_r [KW][N]
    bf16 *c;                             // C_r [M/W][N]
    bf16 *recv[KEVO_MAX_RANKS];          // every rank's receive slots of this call's parity
                                         // [src][nown][BM * BN]
    uint64_t *flag[KEVO_MAX_RANKS];      // every rank's tile flags [nown][src]
    float *ws;                           // split-K partials [tiles][splits][BM * BN] (local)
    int *cnt;                            // split-K arrivals [tiles] (local)
    kevo_pads pads;
    int mw, n, kw;
    int spb, ncol, nown, splits, kper;   // strips per block, columns, tiles per rank
    int cvec;                            // N % 8 == 0 and C_r 16-byte aligned
    int end_barrier;                     // a single set of receive slots
};

// arr[q] with a constant-index select: a dynamic index into a kernel parameter array would
// copy the array to local memory.
template <class P>
__device__ __forceinline__ P select_rank(P const (&arr)[KEVO_MAX_RANKS], int q)
{
    P r = arr[0];
#pragma unroll
    for (int i = 1; i < KEVO_MAX_RANKS; i++)
        if (q == i)
            r = arr[i];
    return r;
}

// Strip and column of a rank's tile o: GROUP_M strips at a time, column by column.
__device__ __forceinline__ void decode_tile(int o, int nstrip, int ncol, int *strip, int *col)
{
    const int band = o / (GROUP_M * ncol);
    const int within = o - band * GROUP_M * ncol;
    const int rest = nstrip - band * GROUP_M;
    const int g = rest < GROUP_M ? rest : GROUP_M;
    *col = within / g;
    *strip = band * GROUP_M + within % g;
}

template <int BM, bool VEC>
__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) gemm_rs_fused(const Args a)
{
    typedef Tile<BM> T;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *smem = reinterpret_cast<bf16 *>(smem_raw);
    __shared__ int s_flag;
    const int tid = threadIdx.x;
    const int W = a.pads.world, rank = a.pads.rank;
    const uint64_t epoch = a.pads.epoch;

    const int tiles = a.nown * W;
    const int items = tiles * a.splits;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int t = item / a.splits, s = item - t * a.splits;
        const int owner = t % W, oidx = t / W;
        int ls, col;
        decode_tile(oidx, a.spb, a.ncol, &ls, &col);
        const int lr0 = ls * BM;                 // first row inside the owner's block
        const int m0 = owner * a.mw + lr0, n0 = col * BN;
        const int rows = min(BM, a.mw - lr0), cols = min(BN, a.n - n0);
        const int kb = s * a.kper, ke = min(a.kw, kb + a.kper);

        float acc[T::MI][4][4];
        gemm_tile<BM, VEC>(acc, a.a + (int64_t)m0 * a.kw, a.kw, rows, a.b + n0, a.n, cols, kb,
                           ke, smem);
        if (a.splits > 1 &&
            !split_reduce<BM>(acc, a.ws + (size_t)t * a.splits * BM * BN, s, a.splits,
                              a.cnt + t, &s_flag))
            continue;

        // step 3: this rank's bf16 partial of tile t -> the owner's slot [rank][oidx]
        stage_bf16<BM>(acc, smem);
        {
            uint4 *dst = reinterpret_cast<uint4 *>(select_rank(a.recv, owner) +
                                                   ((size_t)rank * a.nown + oidx) * BM * BN);
            for (int v = tid; v < rows * (BN / 8); v += kThreads) {
                const int r = v / (BN / 8), c = v % (BN / 8);
                dst[v] = *reinterpret_cast<const uint4 *>(smem + r * kPitch + c * 8);
            }
        }
        __syncthreads(); // every thread's stores precede the release; smem reads are done
        if (tid == 0)
            kevo_store_release_sys(select_rank(a.flag, owner) + (size_t)oidx * W + rank, epoch);
        if (owner != rank)
            continue;

        // step 4: the owner sums the W partials into its rows of C_r
        if (tid < W)
            kevo_wait_flag(select_rank(a.flag, rank) + (size_t)oidx * W + tid, epoch);
        __syncthreads();
        const bf16 *slot0 = select_rank(a.recv, rank) + (size_t)oidx * BM * BN;
        const size_t slot_stride = (size_t)a.nown * BM * BN;
        for (int v = tid; v < rows * (BN / 8); v += kThreads) {
            const int r = v / (BN / 8), c = v % (BN / 8);
            if (c * 8 >= cols)
                continue;
            kevo_f32x8 sum = kevo_bf16x8_to_f32(ldcg16(slot0 + v * 8));
            for (int q = 1; q < W; q++)
                kevo_acc_bf16x8(sum, ldcg16(slot0 + q * slot_stride + v * 8));
            const uint4 out = kevo_f32x8_to_bf16(sum);
            const int64_t off = (int64_t)(lr0 + r) * a.n + n0 + c * 8;
            if (a.cvec) {
                *reinterpret_cast<uint4 *>(a.c + off) = out;
            } else {
                const int ne = min(8, cols - c * 8);
                for (int e = 0; e < ne; e++)
                    a.c[off + e] = elem8(out, e);
            }
        }
    }

    if (a.end_barrier)
        kevo_cta_barrier(a.pads, 0);
}

// ---- host ------------------------------------------------------------------------------------

struct State {
    int bm, vec_shape, nbuf;
    int grid, splits, kper, spb, ncol, nown;
    bf16 *recv_peer[2][KEVO_MAX_RANKS];
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
    *m = kevo_param(ctx, "M", -1);
    *n = kevo_param(ctx, "N", -1);
    const int64_t k = kevo_param(ctx, "K", -1);
    *kw = ctx->world > 0 ? k / ctx->world : -1;
    if (*m <= 0 || *n <= 0 || *kw <= 0 || k % ctx->world != 0 || *m % ctx->world != 0 ||
        *m > (1 << 30) || *n > (1 << 30) || *kw > (1 << 30) || *m * *n > ((int64_t)1 << 40)) {
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: bad parameters M=%lld N=%lld K=%lld\n",
                (long long)*m, (long long)*n, (long long)k);
        return 0;
    }
    return 1;
}

void free_checked(void *p, const char *what)
{
    if (!p)
        return;
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess)
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: cudaFree(%s): %s\n", what,
                cudaGetErrorString(e));
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, n, kw;
    if (W < 1 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &n, &kw))
        return 1;
    State *st = (State *)calloc(1, sizeof(State));
    if (!st) {
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: out of host memory\n");
        return 1;
    }
    ctx->user = st;
    const int64_t mw = m / W;

    st->bm = mw <= 64 ? 64 : 128;
    st->vec_shape = kw % 8 == 0 && n % 8 == 0;
    const int smem = smem_of(st->bm);
    int occ = 0;
    for (int v = 0; v < 2; v++) {
        kernel_fn f = pick(st->bm, v != 0);
        cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        int o = 0;
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, f, kThreads, smem);
        if (e != cudaSuccess) {
            fprintf(stderr, "gemm_reducescatter fused_mma_sm: kernel setup: %s\n",
                    cudaGetErrorString(e));
            return 1;
        }
        occ = v == 0 ? o : (o < occ ? o : occ);
    }
    if (occ > CTAS_PER_SM)
        occ = CTAS_PER_SM;
    if (occ < 1) {
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: kernel does not fit on an SM\n");
        return 1;
    }

    st->ncol = (int)((n + BN - 1) / BN);
    st->spb = (int)((mw + st->bm - 1) / st->bm);
    st->nown = st->spb * st->ncol;
    const int64_t tiles = (int64_t)st->nown * W;

    const int64_t resident = (int64_t)occ * ctx->sm_count;
    const int ksteps = (int)((kw + BK - 1) / BK);
    int splits = 1;
    while (splits * 2 <= KSPLIT_MAX && tiles * splits * 2 <= resident &&
           ksteps >= splits * 2 * kSplitMinKtiles)
        splits *= 2;
    st->kper = ((ksteps + splits - 1) / splits) * BK;
    st->splits = (int)((kw + st->kper - 1) / st->kper);

    kevo_pads pads = kevo_pads_of(ctx);
    int64_t grid = tiles * st->splits;
    if (grid > resident)
        grid = resident;
    const int64_t pad_limit = kevo_pads_max_ctas(pads, 1);
    if (grid > pad_limit)
        grid = pad_limit;
    if (grid < 1) {
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: signal pad too small\n");
        return 1;
    }
    st->grid = (int)grid;

    // symmetric scratch: flags, then one or two sets of receive slots (same order everywhere)
    const size_t set_bytes = (size_t)W * st->nown * st->bm * BN * sizeof(bf16);
    const size_t flag_bytes = (size_t)st->nown * W * sizeof(uint64_t);
    void *local = NULL, *peer[KEVO_MAX_RANKS] = {0};
    if (ctx->scratch_alloc(ctx, flag_bytes, &local, peer, NULL) != 0) {
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: scratch_alloc of %zu flag bytes failed\n",
                flag_bytes);
        return 1;
    }
    for (int q = 0; q < W; q++)
        st->flag_peer[q] = (uint64_t *)peer[q];
    st->nbuf = ctx->scratch_bytes_left >= 2 * (set_bytes + 256) ? 2 : 1;
    for (int b = 0; b < st->nbuf; b++) {
        if (ctx->scratch_alloc(ctx, set_bytes, &local, peer, NULL) != 0) {
            fprintf(stderr, "gemm_reducescatter fused_mma_sm: scratch_alloc of %zu bytes failed "
                            "(%zu left)\n",
                    set_bytes, ctx->scratch_bytes_left);
            return 1;
        }
        for (int q = 0; q < W; q++)
            st->recv_peer[b][q] = (bf16 *)peer[q];
    }

    if (st->splits > 1) {
        const size_t ws_bytes = (size_t)tiles * st->splits * st->bm * BN * sizeof(float);
        cudaError_t e = cudaMalloc(&st->ws, ws_bytes);
        if (e == cudaSuccess)
            e = cudaMalloc(&st->cnt, (size_t)tiles * sizeof(int));
        if (e == cudaSuccess)
            e = cudaMemset(st->cnt, 0, (size_t)tiles * sizeof(int));
        if (e == cudaSuccess)
            e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            fprintf(stderr, "gemm_reducescatter fused_mma_sm: split-K workspace: %s\n",
                    cudaGetErrorString(e));
            return 1;
        }
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    free_checked(st->ws, "split-K workspace");
    free_checked(st->cnt, "split-K counters");
    free(st);
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    const int W = ctx->world;
    int64_t m, n, kw;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &n, &kw))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];
    const int64_t mw = m / W;
    if (ta->dtype != KEVO_BF16 || tb->dtype != KEVO_BF16 || tc->dtype != KEVO_BF16 ||
        ta->numel != m * kw || tb->numel != kw * n || tc->numel != mw * n) {
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: unexpected tensors\n");
        return 1;
    }
    const int set = st->nbuf == 2 ? (int)(ctx->call_index & 1) : 0;

    Args a = {};
    a.a = (const bf16 *)ta->ptr;
    a.b = (const bf16 *)tb->ptr;
    a.c = (bf16 *)tc->ptr;
    for (int q = 0; q < W; q++) {
        a.recv[q] = st->recv_peer[set][q];
        a.flag[q] = st->flag_peer[q];
    }
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
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "gemm_reducescatter fused_mma_sm: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
