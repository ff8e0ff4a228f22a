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
//  0. Every CTA b tells CTA b of every rank "entered call e" (e = call_index + 1) and goes on
//     without waiting (the wait comes before the first store into a peer's C, step 4).
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
//    flag of call c cannot satisfy a wait of call c + 1.
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
    bf16 *c[KEVO_MAX_RANKS];             // every rank's C [M][N]
    bf16 *recv[KEVO_MAX_RANKS];          // every rank's receive slots [src][nown][BM * BN]
    uint64_t *flag[KEVO_MAX_RANKS];      // every rank's tile flags [nown][src]
    float *ws;                           // split-K partials [tiles][splits][BM * BN] (local)
    int *cnt;                            // split-K arrivals [tiles] (local)
    kevo_pads pads;
    int m, n, kw;
    int nstrip, ncol, tiles, nown, splits, kper;
    int cvec;                            // N % 8 == 0 and every C 16-byte aligned
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

__device__ __forceinline__ uint64_t start_slot(int cta, int src, int world)
{
    return (uint64_t)cta * world + src; // phase 0 of the kevo_cta_barrier layout
}

// Strip and column of tile t: GROUP_M strips at a time, column by column inside a group, so
// that the CTAs running at once share a few strips of A_r and a few panels of B_r in L2.
__device__ __forceinline__ void decode_tile(int t, int nstrip, int ncol, int *strip, int *col)
{
    const int band = t / (GROUP_M * ncol);
    const int within = t - band * GROUP_M * ncol;
    const int rest = nstrip - band * GROUP_M;
    const int g = rest < GROUP_M ? rest : GROUP_M;
    *col = within / g;
    *strip = band * GROUP_M + within % g;
}

template <int BM, bool VEC>
__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) gemm_ar_fused(const Args a)
{
    typedef Tile<BM> T;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *smem = reinterpret_cast<bf16 *>(smem_raw);
    __shared__ int s_flag;
    const int tid = threadIdx.x;
    const int W = a.pads.world, rank = a.pads.rank;
    const uint64_t epoch = a.pads.epoch;

    // step 0: arrive half of the start barrier
    if (tid < W)
        kevo_signal(a.pads, tid, start_slot(blockIdx.x, rank, W));
    bool started = false;

    const int items = a.tiles * a.splits;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int t = item / a.splits, s = item - t * a.splits;
        int strip, col;
        decode_tile(t, a.nstrip, a.ncol, &strip, &col);
        const int m0 = strip * BM, n0 = col * BN;
        const int rows = min(BM, a.m - m0), cols = min(BN, a.n - n0);
        const int kb = s * a.kper, ke = min(a.kw, kb + a.kper);

        float acc[T::MI][4][4];
        gemm_tile<BM, VEC>(acc, a.a + (int64_t)m0 * a.kw, a.kw, rows, a.b + n0, a.n, cols, kb,
                           ke, smem);
        if (a.splits > 1 &&
            !split_reduce<BM>(acc, a.ws + (size_t)t * a.splits * BM * BN, s, a.splits,
                              a.cnt + t, &s_flag))
            continue;

        // step 3: this rank's bf16 partial of tile t -> the owner's slot [rank][t / W]
        stage_bf16<BM>(acc, smem);
        const int owner = t % W, oidx = t / W;
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

        // step 4: the owner sums the W partials and stores the tile into every rank's C
        if (tid < W) {
            kevo_wait_flag(select_rank(a.flag, rank) + (size_t)oidx * W + tid, epoch);
            if (!started)
                kevo_wait(a.pads, start_slot(blockIdx.x, tid, W));
        }
        started = true;
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
            const int64_t off = (int64_t)(m0 + r) * a.n + n0 + c * 8;
            if (a.cvec) {
                for (int q = 0; q < W; q++)
                    *reinterpret_cast<uint4 *>(select_rank(a.c, q) + off) = out;
            } else {
                const int ne = min(8, cols - c * 8);
                for (int q = 0; q < W; q++)
                    for (int e = 0; e < ne; e++)
                        select_rank(a.c, q)[off + e] = elem8(out, e);
            }
        }
    }

    // step 5: no rank leaves before every rank's stores into its C are done
    kevo_cta_barrier(a.pads, 1);
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
    *m = kevo_param(ctx, "M", -1);
    *n = kevo_param(ctx, "N", -1);
    const int64_t k = kevo_param(ctx, "K", -1);
    *kw = ctx->world > 0 ? k / ctx->world : -1;
    if (*m <= 0 || *n <= 0 || *kw <= 0 || k % ctx->world != 0 || *m > (1 << 30) ||
        *n > (1 << 30) || *kw > (1 << 30) || *m * *n > ((int64_t)1 << 40)) {
        fprintf(stderr, "gemm_allreduce fused_mma_sm: bad parameters M=%lld N=%lld K=%lld W=%d\n",
                (long long)*m, (long long)*n, (long long)k, ctx->world);
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
        fprintf(stderr, "gemm_allreduce fused_mma_sm: cudaFree(%s): %s\n", what,
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
        fprintf(stderr, "gemm_allreduce fused_mma_sm: out of host memory\n");
        return 1;
    }
    ctx->user = st;

    st->bm = m <= 64 ? 64 : 128;
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
            fprintf(stderr, "gemm_allreduce fused_mma_sm: kernel setup: %s\n",
                    cudaGetErrorString(e));
            return 1;
        }
        occ = v == 0 ? o : (o < occ ? o : occ);
    }
    if (occ > CTAS_PER_SM)
        occ = CTAS_PER_SM;
    if (occ < 1) {
        fprintf(stderr, "gemm_allreduce fused_mma_sm: kernel does not fit on an SM\n");
        return 1;
    }

    st->ncol = (int)((n + BN - 1) / BN);
    st->nstrip = (int)((m + st->bm - 1) / st->bm);
    st->tiles = st->nstrip * st->ncol;
    st->nown = (st->tiles + W - 1) / W;

    const int64_t resident = (int64_t)occ * ctx->sm_count;
    const int ksteps = (int)((kw + BK - 1) / BK);
    int splits = 1;
    while (splits * 2 <= KSPLIT_MAX && (int64_t)st->tiles * splits * 2 <= resident &&
           ksteps >= splits * 2 * kSplitMinKtiles)
        splits *= 2;
    st->kper = ((ksteps + splits - 1) / splits) * BK;
    st->splits = (int)((kw + st->kper - 1) / st->kper);

    kevo_pads pads = kevo_pads_of(ctx);
    int64_t grid = (int64_t)st->tiles * st->splits;
    if (grid > resident)
        grid = resident;
    const int64_t pad_limit = kevo_pads_max_ctas(pads, 2);
    if (grid > pad_limit)
        grid = pad_limit;
    if (grid < 1) {
        fprintf(stderr, "gemm_allreduce fused_mma_sm: signal pad too small\n");
        return 1;
    }
    st->grid = (int)grid;

    // symmetric scratch: receive slots, then flags (same sizes, same order on every rank)
    const size_t recv_bytes = (size_t)W * st->nown * st->bm * BN * sizeof(bf16);
    const size_t flag_bytes = (size_t)st->nown * W * sizeof(uint64_t);
    void *local = NULL, *peer[KEVO_MAX_RANKS] = {0};
    if (ctx->scratch_alloc(ctx, recv_bytes, &local, peer, NULL) != 0) {
        fprintf(stderr,
                "gemm_allreduce fused_mma_sm: scratch_alloc of %zu bytes failed (%zu left)\n",
                recv_bytes, ctx->scratch_bytes_left);
        return 1;
    }
    for (int q = 0; q < W; q++)
        st->recv_peer[q] = (bf16 *)peer[q];
    if (ctx->scratch_alloc(ctx, flag_bytes, &local, peer, NULL) != 0) {
        fprintf(stderr, "gemm_allreduce fused_mma_sm: scratch_alloc of %zu flag bytes failed\n",
                flag_bytes);
        return 1;
    }
    for (int q = 0; q < W; q++)
        st->flag_peer[q] = (uint64_t *)peer[q];

    if (st->splits > 1) {
        const size_t ws_bytes = (size_t)st->tiles * st->splits * st->bm * BN * sizeof(float);
        cudaError_t e = cudaMalloc(&st->ws, ws_bytes);
        if (e == cudaSuccess)
            e = cudaMalloc(&st->cnt, (size_t)st->tiles * sizeof(int));
        if (e == cudaSuccess)
            e = cudaMemset(st->cnt, 0, (size_t)st->tiles * sizeof(int));
        if (e == cudaSuccess)
            e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            fprintf(stderr, "gemm_allreduce fused_mma_sm: split-K workspace: %s\n",
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
    if (ta->dtype != KEVO_BF16 || tb->dtype != KEVO_BF16 || tc->dtype != KEVO_BF16 ||
        ta->numel != m * kw || tb->numel != kw * n || tc->numel != m * n) {
        fprintf(stderr, "gemm_allreduce fused_mma_sm: unexpected tensors\n");
        return 1;
    }

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
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "gemm_allreduce fused_mma_sm: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
