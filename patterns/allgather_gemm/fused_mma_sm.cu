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
//  0. Every CTA b signals "entered call e" (e = call_index + 1) to CTA b of every rank.
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
//    of call c never satisfies call c + 1; G of call c is only read by call c's kernel.
//  - The item counter and the done counter are reset by the last CTA to finish (it observes
//    every other CTA's last ticket through the done counter, with fences); split-K counters
//    are reset by their last arriver; the next call starts after this kernel ends.
//  - No deadlock: copy CTAs wait only for the peers' start signals; GEMM CTAs wait only for
//    copy units; every CTA is co-resident (occupancy-checked grid, the same on every rank).
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
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = 256; // 8 warps: 2 (rows) x 4 (columns)
constexpr int kCtasPerSm = 2;
constexpr int BK = 32;
constexpr int BN = 128;
constexpr int kPitch = BN + 8;
constexpr int kSplitMax = 8;
constexpr int kSplitMinKtiles = 4;
constexpr int kCopyUnroll = 8; // 16-byte loads in flight per copying thread

static_assert(KCHUNK % BK == 0, "a k-tile must lie inside one copy chunk");

typedef __nv_bfloat16 bf16;

template <int BM>
struct Tile {
    static constexpr int WM = BM / 2;
    static constexpr int MI = WM / 16;
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

// ---- the GEMM tile ---------------------------------------------------------------------------
//
// acc = A[0:rows, kb:ke] . B[kb:ke, 0:cols] for one BM x BN tile; row r of A starts at
// arow(r); B element (k, j) at b[k * ldb + j]; out-of-range rows, columns and k read as zeros.
// hook.wait(k0) runs in thread 0 before the __syncthreads() that precedes the loads of the
// k-tile at k0 (it may spin on a flag: the barrier then orders the loads after its acquire).
// Shared layout and swizzle as in gemm_allreduce/fused_mma_sm.cu. Ends with __syncthreads().
template <int BM, bool VEC, class ARows, class Hook>
__device__ __forceinline__ void gemm_tile(float (&acc)[Tile<BM>::MI][4][4], const ARows &arow,
                                          int rows, const bf16 *b, int64_t ldb, int cols, int kb,
                                          int ke, bf16 *smem, Hook &hook)
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
                cp_async16(sa + off * 2, ok ? (const void *)(arow(r) + k) : (const void *)b,
                           ok ? 16 : 0);
            } else {
                uint4 v;
                bf16 *e = reinterpret_cast<bf16 *>(&v);
                const bf16 *src = r < rows ? arow(r) : b;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    e[j] = (r < rows && k + j < ke) ? src[k + j] : __float2bfloat16(0.f);
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
    if (tid == 0)
        for (int s = 0; s < STAGES - 1 && s < nk; s++)
            hook.wait(kb + s * BK);
    __syncthreads();
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nk)
            load_stage(s, kb + s * BK);
        cp_async_commit();
    }
    for (int kt = 0; kt < nk; kt++) {
        const int pf = kt + STAGES - 1;
        cp_async_wait<STAGES - 2>();
        if (tid == 0 && pf < nk)
            hook.wait(kb + pf * BK);
        __syncthreads(); // stage kt complete for every thread; stage kt - 1 consumed; hook acquired
        if (pf < nk)
            load_stage(pf % STAGES, kb + pf * BK);
        cp_async_commit();
        compute_stage(kt % STAGES);
    }
    cp_async_wait<0>();
    __syncthreads();
}

// ---- epilogue pieces -------------------------------------------------------------------------

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
        *cnt = 0;
    return true;
}

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
    int cvec;                      // N/W % 8 == 0 and C_r 16-byte aligned
    int cpvec;                     // K % 8 == 0 and every A_s and G 16-byte aligned
};

struct RowPtr {
    const bf16 *own; // A_r
    const bf16 *g;   // G
    int m0, own_lo, own_hi, k;
    __device__ __forceinline__ const bf16 *operator()(int r) const
    {
        const int gr = m0 + r;
        return (gr >= own_lo && gr < own_hi) ? own + (int64_t)(gr - own_lo) * k
                                             : g + (int64_t)gr * k;
    }
};

// Waits, before a k-tile of a strip with peer rows is loaded, for the copy unit holding it.
struct UnitHook {
    const uint64_t *flags; // this strip's unit flags, or NULL when the strip has no peer rows
    uint64_t epoch;
    int done; // chunks [0, done) already acquired
    __device__ __forceinline__ void wait(int k0)
    {
        if (!flags)
            return;
        const int kc = k0 / KCHUNK;
        if (kc < done)
            return;
        kevo_wait_flag(flags + kc, epoch);
        done = kc + 1; // units of a strip complete in order of k for this CTA's purpose only
    }
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
    return (uint64_t)cta * world + src;
}

// Strip (in the cyclic need order) and column of tile t, GROUP_M strips at a time.
__device__ __forceinline__ void decode_tile(int t, int nstrip, int ncol, int *j, int *col)
{
    const int band = t / (GROUP_M * ncol);
    const int within = t - band * GROUP_M * ncol;
    const int rest = nstrip - band * GROUP_M;
    const int g = rest < GROUP_M ? rest : GROUP_M;
    *col = within / g;
    *j = band * GROUP_M + within % g;
}

// Copy CTA: the peer rows of every unit u = blockIdx.x, + copy_ctas, ... into G. Units of
// strips that hold no peer row are skipped (no flag: the GEMM does not wait for them).
template <int BM>
__device__ void copy_units(const Args &a)
{
    const int tid = threadIdx.x;
    const int W = a.pads.world, rank = a.pads.rank;
    // every peer's A is ready once its CTA blockIdx.x has entered this call
    if (tid < W && tid != rank)
        kevo_wait(a.pads, start_slot(blockIdx.x, tid, W));
    __syncthreads();

    const int own_lo = rank * a.mw, own_hi = own_lo + a.mw;
    const int nunits = a.nstrip * a.nkc;
    for (int u = blockIdx.x; u < nunits; u += a.copy_ctas) {
        const int j = u / a.nkc, kc = u - j * a.nkc;
        const int strip = (a.first_strip + j) % a.nstrip;
        const int m0 = strip * BM, m1 = min(a.m, m0 + BM);
        if (m0 >= own_lo && m1 <= own_hi)
            continue; // only own rows
        const int k0 = kc * KCHUNK, k1 = min(a.k, k0 + KCHUNK);
        // peer rows of the strip: [m0, m1) minus [own_lo, own_hi)
        if (a.cpvec) {
            const int vpr = (k1 - k0) / 8; // K % 8 == 0: whole vectors
            const int nv = (m1 - m0) * vpr;
            for (int v0 = tid; v0 < nv; v0 += kThreads * kCopyUnroll) {
                uint4 val[kCopyUnroll];
                int64_t dst[kCopyUnroll];
#pragma unroll
                for (int x = 0; x < kCopyUnroll; x++) {
                    const int v = v0 + x * kThreads;
                    dst[x] = -1;
                    if (v < nv) {
                        const int gr = m0 + v / vpr;
                        const int kk = k0 + (v % vpr) * 8;
                        if (gr < own_lo || gr >= own_hi) {
                            const int s = gr / a.mw;
                            const bf16 *src =
                                select_rank(a.a, s) + (int64_t)(gr - s * a.mw) * a.k + kk;
                            val[x] = *reinterpret_cast<const uint4 *>(src);
                            dst[x] = (int64_t)gr * a.k + kk;
                        }
                    }
                }
#pragma unroll
                for (int x = 0; x < kCopyUnroll; x++)
                    if (dst[x] >= 0)
                        *reinterpret_cast<uint4 *>(a.g + dst[x]) = val[x];
            }
        } else {
            const int per = k1 - k0;
            const int ne = (m1 - m0) * per;
            for (int e = tid; e < ne; e += kThreads) {
                const int gr = m0 + e / per;
                const int kk = k0 + e % per;
                if (gr < own_lo || gr >= own_hi) {
                    const int s = gr / a.mw;
                    a.g[(int64_t)gr * a.k + kk] =
                        select_rank(a.a, s)[(int64_t)(gr - s * a.mw) * a.k + kk];
                }
            }
        }
        __syncthreads(); // every thread's stores precede the release
        if (tid == 0)
            kevo_store_release_sys(a.uflag + (size_t)strip * a.nkc + kc, a.pads.epoch);
    }
}

template <int BM, bool VEC>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) ag_gemm_fused(const Args a)
{
    typedef Tile<BM> T;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *smem = reinterpret_cast<bf16 *>(smem_raw);
    __shared__ int s_flag, s_item;
    const int tid = threadIdx.x;
    const int W = a.pads.world, rank = a.pads.rank;

    if (tid < W)
        kevo_signal(a.pads, tid, start_slot(blockIdx.x, rank, W));

    if ((int)blockIdx.x < a.copy_ctas)
        copy_units<BM>(a);

    const int own_lo = rank * a.mw, own_hi = own_lo + a.mw;
    const int items = a.tiles * a.splits;
    for (;;) {
        if (tid == 0)
            s_item = atomicAdd(a.ctr, 1);
        __syncthreads();
        const int item = s_item;
        if (item >= items)
            break;
        const int t = item / a.splits, s = item - t * a.splits;
        int j, col;
        decode_tile(t, a.nstrip, a.ncol, &j, &col);
        const int strip = (a.first_strip + j) % a.nstrip;
        const int m0 = strip * BM, n0 = col * BN;
        const int rows = min(BM, a.m - m0), cols = min(BN, a.nw - n0);
        const int kb = s * a.kper, ke = min(a.k, kb + a.kper);

        RowPtr arow = {a.a_own, a.g, m0, own_lo, own_hi, a.k};
        const bool has_peer_rows = m0 < own_lo || m0 + rows > own_hi;
        UnitHook hook = {has_peer_rows ? a.uflag + (size_t)strip * a.nkc : (const uint64_t *)0,
                         a.pads.epoch, 0};

        float acc[T::MI][4][4];
        gemm_tile<BM, VEC>(acc, arow, rows, a.b + n0, a.nw, cols, kb, ke, smem, hook);
        if (a.splits > 1 &&
            !split_reduce<BM>(acc, a.ws + (size_t)t * a.splits * BM * BN, s, a.splits,
                              a.cnt + t, &s_flag))
            continue;

        stage_bf16<BM>(acc, smem);
        for (int v = tid; v < rows * (BN / 8); v += kThreads) {
            const int r = v / (BN / 8), c = v % (BN / 8);
            if (c * 8 >= cols)
                continue;
            const uint4 out = *reinterpret_cast<const uint4 *>(smem + r * kPitch + c * 8);
            const int64_t off = (int64_t)(m0 + r) * a.nw + n0 + c * 8;
            if (a.cvec) {
                *reinterpret_cast<uint4 *>(a.c + off) = out;
            } else {
                const int ne = min(8, cols - c * 8);
                for (int e = 0; e < ne; e++)
                    a.c[off + e] = smem[r * kPitch + c * 8 + e];
            }
        }
        __syncthreads(); // staging reads done before the next item's loads
    }

    // the last CTA to finish resets the item counters for the next call
    if (tid == 0) {
        __threadfence();
        if (atomicAdd(a.ctr + 1, 1) == (int)gridDim.x - 1) {
            __threadfence();
            a.ctr[0] = 0;
            a.ctr[1] = 0;
        }
    }

    kevo_cta_barrier(a.pads, 1); // no peer reads A_r after this rank returns
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
    *m = kevo_param(ctx, "M", -1);
    const int64_t n = kevo_param(ctx, "N", -1);
    *nw = ctx->world > 0 ? n / ctx->world : -1;
    *k = kevo_param(ctx, "K", -1);
    if (*m <= 0 || *nw <= 0 || *k <= 0 || *m % ctx->world != 0 || n % ctx->world != 0 ||
        *m > (1 << 30) || *nw > (1 << 30) || *k > (1 << 30)) {
        fprintf(stderr, "allgather_gemm fused_mma_sm: bad parameters M=%lld N=%lld K=%lld\n",
                (long long)*m, (long long)n, (long long)*k);
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
        fprintf(stderr, "allgather_gemm fused_mma_sm: cudaFree(%s): %s\n", what,
                cudaGetErrorString(e));
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    int64_t m, nw, k;
    if (W < 1 || W > KEVO_MAX_RANKS || !read_params(ctx, &m, &nw, &k))
        return 1;
    State *st = (State *)calloc(1, sizeof(State));
    if (!st) {
        fprintf(stderr, "allgather_gemm fused_mma_sm: out of host memory\n");
        return 1;
    }
    ctx->user = st;

    st->bm = m <= 64 ? 64 : 128;
    const int smem = smem_of(st->bm);
    int occ = 0;
    for (int v = 0; v < 2; v++) {
        kernel_fn f = pick(st->bm, v != 0);
        cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        int o = 0;
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, f, kThreads, smem);
        if (e != cudaSuccess) {
            fprintf(stderr, "allgather_gemm fused_mma_sm: kernel setup: %s\n",
                    cudaGetErrorString(e));
            return 1;
        }
        occ = v == 0 ? o : (o < occ ? o : occ);
    }
    if (occ > kCtasPerSm)
        occ = kCtasPerSm;
    if (occ < 1) {
        fprintf(stderr, "allgather_gemm fused_mma_sm: kernel does not fit on an SM\n");
        return 1;
    }
    const int64_t resident = (int64_t)occ * ctx->sm_count;

    st->ncol = (int)((nw + BN - 1) / BN);
    st->nstrip = (int)((m + st->bm - 1) / st->bm);
    st->tiles = st->nstrip * st->ncol;
    st->nkc = (int)((k + KCHUNK - 1) / KCHUNK);
    const int ksteps = (int)((k + BK - 1) / BK);
    int splits = 1;
    while (splits * 2 <= kSplitMax && (int64_t)st->tiles * splits * 2 <= resident &&
           ksteps >= splits * 2 * kSplitMinKtiles)
        splits *= 2;
    st->kper = ((ksteps + splits - 1) / splits) * BK;
    st->splits = (int)((k + st->kper - 1) / st->kper);

    kevo_pads pads = kevo_pads_of(ctx);
    int64_t grid = resident;
    const int64_t pad_limit = kevo_pads_max_ctas(pads, 2);
    if (grid > pad_limit)
        grid = pad_limit;
    st->copy_ctas = W > 1 ? COPY_CTAS : 0;
    if (grid < st->copy_ctas + 1) {
        fprintf(stderr, "allgather_gemm fused_mma_sm: grid of %lld CTAs is too small\n",
                (long long)grid);
        return 1;
    }
    st->grid = (int)grid;

    const size_t g_bytes = (size_t)(m * k) * sizeof(bf16);
    const size_t f_bytes = (size_t)st->nstrip * st->nkc * sizeof(uint64_t);
    cudaError_t e = cudaMalloc(&st->g, g_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&st->uflag, f_bytes);
    if (e == cudaSuccess)
        e = cudaMemset(st->uflag, 0, f_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&st->ctr, 2 * sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemset(st->ctr, 0, 2 * sizeof(int));
    if (e == cudaSuccess && st->splits > 1) {
        e = cudaMalloc(&st->ws, (size_t)st->tiles * st->splits * st->bm * BN * sizeof(float));
        if (e == cudaSuccess)
            e = cudaMalloc(&st->cnt, (size_t)st->tiles * sizeof(int));
        if (e == cudaSuccess)
            e = cudaMemset(st->cnt, 0, (size_t)st->tiles * sizeof(int));
    }
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "allgather_gemm fused_mma_sm: buffers: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    free_checked(st->g, "gathered A");
    free_checked(st->uflag, "unit flags");
    free_checked(st->ctr, "item counters");
    free_checked(st->ws, "split-K workspace");
    free_checked(st->cnt, "split-K counters");
    free(st);
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    const int W = ctx->world;
    int64_t m, nw, k;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || !read_params(ctx, &m, &nw, &k))
        return 1;
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];
    const int64_t mw = m / W;
    if (ta->dtype != KEVO_BF16 || tb->dtype != KEVO_BF16 || tc->dtype != KEVO_BF16 ||
        ta->numel != mw * k || tb->numel != k * nw || tc->numel != m * nw) {
        fprintf(stderr, "allgather_gemm fused_mma_sm: unexpected tensors\n");
        return 1;
    }

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
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "allgather_gemm fused_mma_sm: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
