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
// gemm_tile are what to check first if results are wrong (the same core as
// gemm_allreduce/fused_wgmma_sm.cu).
//
// Synchronisation: as fused_mma_sm.cu (peers' A read only after their start signal, end
// barrier before returning; unit flags are local epochs with release/acquire around
// __syncthreads; counters reset by the last CTA / last split arriver; co-resident grid of one
// CTA per SM, the same on every rank; copy CTAs never wait for GEMM work).
//
// kevo:pattern problem=allgather_gemm transport=sm fusion=fused
// kevo:param COPY_CTAS default=16 values=4,8,16,32
// kevo:param KCHUNK default=512 values=128,256,512,1024,2048
// kevo:param GROUP_M default=8 values=1,2,4,8,16
#define COPY_CTAS 16
#define KCHUNK 512
#define GROUP_M 8

#include "kevo/kernel.h"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = 256; // two warpgroups: rows 0-63 and 64-127 of the tile
constexpr int BM = 128;
constexpr int BN = 256;
constexpr int BK = 64;        // one 128-byte swizzle row of A per tile row
constexpr int kPitch = BN + 8; // staging row pitch (528 bytes: no bank conflicts)
constexpr int kStages = 4;    // 4 x 48 KiB: the most that fits next to nothing else
constexpr int A_BYTES = BM * BK * 2;             // 16 KiB
constexpr int B_BYTES = BK * BN * 2;             // 32 KiB: 4 atoms of [64 k][64 n]
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;   // 48 KiB, a multiple of 1024
constexpr int SMEM = kStages * STAGE_BYTES + 1024; // + slack to align the base to 1024
constexpr int kAcc = 128;     // fp32 accumulators per thread (m64n256 per warpgroup)
constexpr int kSplitMinKtiles = 4;
constexpr int kSplitMax = 8;
constexpr int kCopyUnroll = 8; // 16-byte loads in flight per copying thread

static_assert(KCHUNK % BK == 0, "a k-tile must lie inside one copy chunk");


static_assert(BM * kPitch * 2 <= kStages * STAGE_BYTES, "staging fits in the pipeline");

typedef __nv_bfloat16 bf16;

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

// Shared memory written by the generic proxy (cp.async, st.shared) becomes visible to the
// async proxy that wgmma reads it through.
__device__ __forceinline__ void fence_proxy_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator accesses across the asynchronous wgmma region.
__device__ __forceinline__ void fence_acc(float (&d)[kAcc])
{
#pragma unroll
    for (int i = 0; i < kAcc; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading- and
// stride-dimension byte offsets (all >> 4), layout type 1 (128B) in bits 62-63.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | ((uint64_t)1 << 62);
}

// D[64 x 256] += A[64 x 16] (K-major, from da) . B[16 x 256] (N-major, from db: imm-trans-b 1).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[kAcc], uint64_t da, uint64_t db)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
                 "%10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
                 "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
                 "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
                 "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "
                 "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                 "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "
                 "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, "
                 "%90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
                 "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "
                 "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
                 "%120, %121, %122, %123, %124, %125, %126, %127}, "
                 "%128, %129, p, 1, 1, 0, 1;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
                   "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                   "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
                   "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
                   "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),
                   "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
                   "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                   "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
                   "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
                   "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
                   "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
                   "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
                   "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(1));
}

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

// ---- the GEMM tile (wgmma) -------------------------------------------------------------------
//
// acc = A[0:rows, kb:ke] . B[kb:ke, 0:cols] for one 128 x 256 tile; row r of A starts at
// arow(r); B element (k, j) at b[k * ldb + j]; rows >= rows, columns >= cols and k >= ke read
// as zeros. smem is 1024-byte aligned. Per stage (k-tile of 64):
//   A [128 rows][64 k]: row r at r * 128 bytes, 16-byte chunk c at (c ^ (r & 7)) — the 128-byte
//     swizzle (address bits 4-6 ^= bits 7-9) that a K-major, SWIZZLE_128B descriptor expects
//     (LBO 16, SBO 1024 = 8 rows; a k16 step adds 32 bytes to the start address, as the
//     hardware applies the XOR to the final address);
//   B [64 k][256 n] as 4 atoms of 64 columns: atom j at j * 8192, k-row at k * 128, chunk c at
//     (c ^ (k & 7)) — MN-major SWIZZLE_128B (LBO 8192 = next 64 columns, SBO 1024 = next 8
//     k-rows; a k16 step adds 2048 bytes), read with imm-trans-b = 1.
// Warpgroup g multiplies rows 64g .. 64g + 63 (A start + g * 8192). The pipeline keeps
// kStages - 2 k-tiles in flight (cp.async) and one wgmma group outstanding: a stage is
// rewritten only after the __syncthreads() that follows every warpgroup's wait for the group
// that read it. hook.wait(k0) runs in thread 0 before the __syncthreads() that precedes the
// loads of the k-tile at k0. Ends with a __syncthreads(): the shared memory is free.
template <bool VEC, class ARows, class Hook>
__device__ __forceinline__ void gemm_tile(float (&acc)[kAcc], const ARows &arow, int rows,
                                          const bf16 *b, int64_t ldb, int cols, int kb, int ke,
                                          unsigned char *smem, Hook &hook)
{
    const int tid = threadIdx.x, wg = tid >> 7;
    const uint32_t sbase = smem_u32(smem);

#pragma unroll
    for (int i = 0; i < kAcc; i++)
        acc[i] = 0.f;

    auto load_stage = [&](int stage, int k0) {
        const uint32_t sa = sbase + stage * STAGE_BYTES;
        const uint32_t sb = sa + A_BYTES;
        unsigned char *pa = smem + stage * STAGE_BYTES;
        unsigned char *pb = pa + A_BYTES;
#pragma unroll
        for (int i = 0; i < BM * 8 / kThreads; i++) {
            const int idx = tid + i * kThreads, r = idx >> 3, c = idx & 7;
            const int k = k0 + c * 8;
            const uint32_t off = r * 128 + ((c ^ (r & 7)) << 4);
            if (VEC) {
                const bool ok = r < rows && k < ke;
                cp_async16(sa + off, ok ? (const void *)(arow(r) + k) : (const void *)b,
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
        for (int i = 0; i < BK * (BN / 8) / kThreads; i++) {
            const int idx = tid + i * kThreads, k = idx >> 5, cn = idx & 31;
            const int atom = cn >> 3, c = cn & 7;
            const int gk = k0 + k, n = cn * 8;
            const uint32_t off = atom * 8192 + k * 128 + ((c ^ (k & 7)) << 4);
            if (VEC) {
                const bool ok = gk < ke && n < cols;
                cp_async16(sb + off, ok ? (const void *)(b + gk * ldb + n) : (const void *)b,
                           ok ? 16 : 0);
            } else {
                uint4 v;
                bf16 *e = reinterpret_cast<bf16 *>(&v);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    e[j] = (gk < ke && n + j < cols) ? b[gk * ldb + n + j] : __float2bfloat16(0.f);
                *reinterpret_cast<uint4 *>(pb + off) = v;
            }
        }
    };

    const int nk = (ke - kb + BK - 1) / BK;
    if (tid == 0)
        for (int s = 0; s < kStages - 2 && s < nk; s++)
            hook.wait(kb + s * BK);
    __syncthreads();
#pragma unroll
    for (int s = 0; s < kStages - 2; s++) {
        if (s < nk)
            load_stage(s, kb + s * BK);
        cp_async_commit();
    }
    for (int kt = 0; kt < nk; kt++) {
        const int pf = kt + kStages - 2;
        cp_async_wait<kStages - 3>(); // k-tile kt has landed (this thread's part)
        fence_proxy_async_shared();
        if (tid == 0 && pf < nk)
            hook.wait(kb + pf * BK);
        __syncthreads(); // every part of k-tile kt landed; wgmma of k-tile kt - 2 retired
        if (pf < nk)
            load_stage(pf % kStages, kb + pf * BK);
        cp_async_commit();

        const uint32_t sa = sbase + (kt % kStages) * STAGE_BYTES + wg * 8192;
        const uint32_t sb = sbase + (kt % kStages) * STAGE_BYTES + A_BYTES;
        fence_acc(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++)
            wgmma_m64n256k16(acc, smem_desc(sa + kk * 32, 16, 1024),
                             smem_desc(sb + kk * 2048, 8192, 1024));
        wgmma_commit();
        fence_acc(acc);
        wgmma_wait<1>(); // the group of k-tile kt - 1 has retired
        fence_acc(acc);
    }
    wgmma_wait<0>();
    fence_acc(acc);
    cp_async_wait<0>();
    __syncthreads();
}

// Split-K: stores this split's fp32 partial (register order, coalesced float4) into the tile's
// workspace, counts the arrival, and returns true in the last CTA to arrive, which then holds
// the sum over the splits, in split order, in acc.
__device__ __forceinline__ bool split_reduce(float (&acc)[kAcc], float *ws_tile, int s,
                                             int splits, int *cnt, int *s_flag)
{
    const int tid = threadIdx.x;
    float4 *mine = reinterpret_cast<float4 *>(ws_tile + (size_t)s * BM * BN);
#pragma unroll
    for (int j = 0; j < kAcc / 4; j++)
        mine[j * kThreads + tid] =
            make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    __threadfence();
    __syncthreads();
    if (tid == 0)
        *s_flag = atomicAdd(cnt, 1) == splits - 1;
    __syncthreads();
    if (!*s_flag)
        return false;
    __threadfence();
#pragma unroll
    for (int i = 0; i < kAcc; i++)
        acc[i] = 0.f;
    for (int s2 = 0; s2 < splits; s2++) {
        const float4 *src = reinterpret_cast<const float4 *>(ws_tile + (size_t)s2 * BM * BN);
#pragma unroll
        for (int j = 0; j < kAcc / 4; j++) {
            const float4 v = __ldcg(src + j * kThreads + tid);
            acc[4 * j] += v.x;
            acc[4 * j + 1] += v.y;
            acc[4 * j + 2] += v.z;
            acc[4 * j + 3] += v.w;
        }
    }
    if (tid == 0)
        *cnt = 0; // ready for the next call (ordered by the kernel boundary)
    return true;
}

// acc (fp32, wgmma fragment layout) -> bf16 tile [BM][kPitch] in shared memory, then
// __syncthreads(). Thread (warpgroup g, warp w, lane l) holds rows 64g + 16w + l/4 (+8) and,
// for i = 0..31, columns 8i + 2(l%4) (+1).
__device__ __forceinline__ void stage_bf16(const float (&acc)[kAcc], bf16 *st)
{
    const int tid = threadIdx.x, lane = tid & 31;
    const int row = (tid >> 7) * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2);
#pragma unroll
    for (int i = 0; i < BN / 8; i++) {
        const int col = i * 8 + 2 * (lane & 3);
        *reinterpret_cast<__nv_bfloat162 *>(st + row * kPitch + col) =
            __floats2bfloat162_rn(acc[4 * i], acc[4 * i + 1]);
        *reinterpret_cast<__nv_bfloat162 *>(st + (row + 8) * kPitch + col) =
            __floats2bfloat162_rn(acc[4 * i + 2], acc[4 * i + 3]);
    }
    __syncthreads();
}

// 1024-byte aligned base of the dynamic shared memory.
__device__ __forceinline__ unsigned char *aligned_smem(unsigned char *raw)
{
    const uint32_t a = smem_u32(raw);
    return raw + ((1024u - (a & 1023u)) & 1023u);
}

// Strip and column of tile t: GROUP_M strips at a time, column by column inside a group.
__device__ __forceinline__ void decode_tile(int t, int nstrip, int ncol, int *strip, int *col)
{
    const int band = t / (GROUP_M * ncol);
    const int within = t - band * GROUP_M * ncol;
    const int rest = nstrip - band * GROUP_M;
    const int g = rest < GROUP_M ? rest : GROUP_M;
    *col = within / g;
    *strip = band * GROUP_M + within % g;
}

__device__ __forceinline__ uint64_t start_slot(int cta, int src, int world)
{
    return (uint64_t)cta * world + src; // phase 0 of the kevo_cta_barrier layout
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

// Copy CTA: the peer rows of every unit u = blockIdx.x, + copy_ctas, ... into G. Units of
// strips that hold no peer row are skipped (no flag: the GEMM does not wait for them).
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

template <bool VEC>
__global__ void __launch_bounds__(kThreads, 1) ag_gemm_wgmma(const Args a)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *smem = aligned_smem(smem_raw);
    bf16 *stage = reinterpret_cast<bf16 *>(smem);
    __shared__ int s_flag, s_item;
    const int tid = threadIdx.x;
    const int W = a.pads.world, rank = a.pads.rank;

    if (tid < W)
        kevo_signal(a.pads, tid, start_slot(blockIdx.x, rank, W));

    if ((int)blockIdx.x < a.copy_ctas)
        copy_units(a);

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

        float acc[kAcc];
        gemm_tile<VEC>(acc, arow, rows, a.b + n0, a.nw, cols, kb, ke, smem, hook);
        if (a.splits > 1 &&
            !split_reduce(acc, a.ws + (size_t)t * a.splits * BM * BN, s, a.splits, a.cnt + t,
                          &s_flag))
            continue;

        stage_bf16(acc, stage);
        for (int v = tid; v < rows * (BN / 8); v += kThreads) {
            const int r = v / (BN / 8), c = v % (BN / 8);
            if (c * 8 >= cols)
                continue;
            const uint4 out = *reinterpret_cast<const uint4 *>(stage + r * kPitch + c * 8);
            const int64_t off = (int64_t)(m0 + r) * a.nw + n0 + c * 8;
            if (a.cvec) {
                *reinterpret_cast<uint4 *>(a.c + off) = out;
            } else {
                const int ne = min(8, cols - c * 8);
                for (int e = 0; e < ne; e++)
                    a.c[off + e] = stage[r * kPitch + c * 8 + e];
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
    *m = kevo_param(ctx, "M", -1);
    const int64_t n = kevo_param(ctx, "N", -1);
    *nw = ctx->world > 0 ? n / ctx->world : -1;
    *k = kevo_param(ctx, "K", -1);
    if (*m <= 0 || *nw <= 0 || *k <= 0 || *m % ctx->world != 0 || n % ctx->world != 0 ||
        *m > (1 << 30) || *nw > (1 << 30) || *k > (1 << 30)) {
        fprintf(stderr, "allgather_gemm fused_wgmma_sm: bad parameters M=%lld N=%lld K=%lld\n",
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
        fprintf(stderr, "allgather_gemm fused_wgmma_sm: cudaFree(%s): %s\n", what,
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
        fprintf(stderr, "allgather_gemm fused_wgmma_sm: out of host memory\n");
        return 1;
    }
    ctx->user = st;

    for (int v = 0; v < 2; v++) {
        kernel_fn f = pick(v != 0);
        cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
        int o = 0;
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, f, kThreads, SMEM);
        if (e != cudaSuccess || o < 1) {
            fprintf(stderr, "allgather_gemm fused_wgmma_sm: kernel setup: %s (%d per SM)\n",
                    cudaGetErrorString(e), o);
            return 1;
        }
    }
    const int64_t resident = ctx->sm_count;

    st->ncol = (int)((nw + BN - 1) / BN);
    st->nstrip = (int)((m + BM - 1) / BM);
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
        fprintf(stderr, "allgather_gemm fused_wgmma_sm: grid of %lld CTAs is too small\n",
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
        e = cudaMalloc(&st->ws, (size_t)st->tiles * st->splits * BM * BN * sizeof(float));
        if (e == cudaSuccess)
            e = cudaMalloc(&st->cnt, (size_t)st->tiles * sizeof(int));
        if (e == cudaSuccess)
            e = cudaMemset(st->cnt, 0, (size_t)st->tiles * sizeof(int));
    }
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "allgather_gemm fused_wgmma_sm: buffers: %s\n", cudaGetErrorString(e));
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
        fprintf(stderr, "allgather_gemm fused_wgmma_sm: unexpected tensors\n");
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

    pick(vec)<<<st->grid, kThreads, SMEM, ctx->stream>>>(a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "allgather_gemm fused_wgmma_sm: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
