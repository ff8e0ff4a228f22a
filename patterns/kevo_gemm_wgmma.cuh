// kevo_gemm_wgmma.cuh — the Hopper warpgroup GEMM core of the fused_wgmma_sm.cu seeds:
// wgmma.mma_async m64n256k16 (bf16 in, fp32 accumulators) on 128 x 256 tiles, two warpgroups
// per CTA, operands in 128-byte-swizzled shared memory filled by cp.async (plain LDGSTS, no
// TMA), 4 stages of 48 KiB, one wgmma group in flight; split-K and the bf16 staging of a
// finished tile.
//
// Used by patterns/{gemm_allreduce,gemm_reducescatter,allgather_gemm}/fused_wgmma_sm.cu. It
// includes kevo_gemm_mma.cuh for what every fused GEMM seed shares (cp.async, row sources and
// hooks, tile order, epilogue pieces, host helpers).
//
// kevo_wgmma_*: the tile's constants (threads, bm, bn, bk, pitch, stages, acc, smem), PTX
// wrappers (fence, commit, wait, fence_acc, desc, m64n256k16), kevo_wgmma_gemm_tile,
// kevo_wgmma_split_reduce, kevo_wgmma_stage_bf16, kevo_wgmma_aligned_smem. Nothing here is
// tunable.
#ifndef KEVO_PATTERNS_GEMM_WGMMA_CUH
#define KEVO_PATTERNS_GEMM_WGMMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kevo_gemm_mma.cuh"
#include "kevo_tma.cuh" // kevo_smem_addr, kevo_fence_proxy_async_shared (no bulk copies here)

constexpr int kevo_wgmma_threads = 256; // two warpgroups: rows 0-63 and 64-127 of the tile
constexpr int kevo_wgmma_bm = 128;
constexpr int kevo_wgmma_bn = 256;
constexpr int kevo_wgmma_bk = 64;                   // one 128-byte swizzle row of A per tile row
constexpr int kevo_wgmma_pitch = kevo_wgmma_bn + 8; // staging row pitch (528 bytes: no conflicts)
constexpr int kevo_wgmma_stages = 4; // 4 x 48 KiB: the most that fits next to nothing else
// per stage: A 16 KiB, B 32 KiB (4 atoms of [64 k][64 n]), together a multiple of 1024
constexpr int kevo_wgmma_a_bytes = kevo_wgmma_bm * kevo_wgmma_bk * 2;
constexpr int kevo_wgmma_b_bytes = kevo_wgmma_bk * kevo_wgmma_bn * 2;
constexpr int kevo_wgmma_stage_bytes = kevo_wgmma_a_bytes + kevo_wgmma_b_bytes;
// dynamic shared memory: the stages + slack to align the base to 1024 (kevo_wgmma_aligned_smem)
constexpr int kevo_wgmma_smem = kevo_wgmma_stages * kevo_wgmma_stage_bytes + 1024;
constexpr int kevo_wgmma_acc = 128; // fp32 accumulators per thread (m64n256 per warpgroup)

static_assert(kevo_wgmma_bm * kevo_wgmma_pitch * 2 <= kevo_wgmma_stages * kevo_wgmma_stage_bytes,
              "staging fits in the pipeline");

// ---- PTX wrappers ------------------------------------------------------------------------------

__device__ __forceinline__ void kevo_wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void kevo_wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N> __device__ __forceinline__ void kevo_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator accesses across the asynchronous wgmma region.
__device__ __forceinline__ void kevo_wgmma_fence_acc(float (&d)[kevo_wgmma_acc])
{
#pragma unroll
    for (int i = 0; i < kevo_wgmma_acc; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading- and
// stride-dimension byte offsets (all >> 4), layout type 1 (128B) in bits 62-63.
__device__ __forceinline__ uint64_t kevo_wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | ((uint64_t)1 << 62);
}

// D[64 x 256] += A[64 x 16] (K-major, from da) . B[16 x 256] (N-major, from db: imm-trans-b 1).
__device__ __forceinline__ void kevo_wgmma_m64n256k16(float (&d)[kevo_wgmma_acc], uint64_t da,
                                                      uint64_t db)
{
    asm volatile(
        "{\n"
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
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
}

// ---- the tile ----------------------------------------------------------------------------------

// acc = A[0:rows, kb:ke] . B[kb:ke, 0:cols] for one 128 x 256 tile; row r of A starts at
// arow(r) (kevo_gemm_mma.cuh: "the A operand of a tile"); B element (k, j) at b[k * ldb + j];
// rows >= rows, columns >= cols and k >= ke read as zeros. smem is 1024-byte aligned
// (kevo_wgmma_aligned_smem). Per stage (k-tile of 64):
//   A [128 rows][64 k]: row r at r * 128 bytes, 16-byte chunk c at (c ^ (r & 7)) — the 128-byte
//     swizzle (address bits 4-6 ^= bits 7-9) that a K-major, SWIZZLE_128B descriptor expects
//     (LBO 16, SBO 1024 = 8 rows; a k16 step adds 32 bytes to the start address, as the
//     hardware applies the XOR to the final address);
//   B [64 k][256 n] as 4 atoms of 64 columns: atom j at j * 8192, k-row at k * 128, chunk c at
//     (c ^ (k & 7)) — MN-major SWIZZLE_128B (LBO 8192 = next 64 columns, SBO 1024 = next 8
//     k-rows; a k16 step adds 2048 bytes), read with imm-trans-b = 1.
// Warpgroup g multiplies rows 64g .. 64g + 63 (A start + g * 8192). The pipeline keeps
// kevo_wgmma_stages - 2 k-tiles in flight (cp.async) and one wgmma group outstanding: a stage is
// rewritten only after the __syncthreads() that follows every warpgroup's wait for the group
// that read it. hook.wait(k0) runs in thread 0 before the __syncthreads() that precedes the
// loads of the k-tile at k0; that barrier before the first loads stays even with kevo_no_hook
// (the seeds were timed with it). Ends with a __syncthreads(): the shared memory is free.
template <bool VEC, class ARows, class Hook>
__device__ __forceinline__ void kevo_wgmma_gemm_tile(float (&acc)[kevo_wgmma_acc],
                                                     const ARows &arow, int rows,
                                                     const __nv_bfloat16 *b, int64_t ldb, int cols,
                                                     int kb, int ke, unsigned char *smem,
                                                     Hook &hook)
{
    typedef __nv_bfloat16 bf16;
    constexpr int kThreads = kevo_wgmma_threads, BM = kevo_wgmma_bm, BN = kevo_wgmma_bn;
    constexpr int BK = kevo_wgmma_bk, kStages = kevo_wgmma_stages, kAcc = kevo_wgmma_acc;
    constexpr int A_BYTES = kevo_wgmma_a_bytes, STAGE_BYTES = kevo_wgmma_stage_bytes;
    const int tid = threadIdx.x, wg = tid >> 7;
    const uint32_t sbase = kevo_smem_addr(smem);

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
                kevo_cp_async16(sa + off, ok ? (const void *)(arow(r) + k) : (const void *)b,
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
                kevo_cp_async16(sb + off, ok ? (const void *)(b + gk * ldb + n) : (const void *)b,
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
        kevo_cp_async_commit();
    }
    for (int kt = 0; kt < nk; kt++) {
        const int pf = kt + kStages - 2;
        kevo_cp_async_wait<kStages - 3>(); // k-tile kt has landed (this thread's part)
        kevo_fence_proxy_async_shared();
        if (tid == 0 && pf < nk)
            hook.wait(kb + pf * BK);
        __syncthreads(); // every part of k-tile kt landed; wgmma of k-tile kt - 2 retired
        if (pf < nk)
            load_stage(pf % kStages, kb + pf * BK);
        kevo_cp_async_commit();

        const uint32_t sa = sbase + (kt % kStages) * STAGE_BYTES + wg * 8192;
        const uint32_t sb = sbase + (kt % kStages) * STAGE_BYTES + A_BYTES;
        kevo_wgmma_fence_acc(acc);
        kevo_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++)
            kevo_wgmma_m64n256k16(acc, kevo_wgmma_desc(sa + kk * 32, 16, 1024),
                                  kevo_wgmma_desc(sb + kk * 2048, 8192, 1024));
        kevo_wgmma_commit();
        kevo_wgmma_fence_acc(acc);
        kevo_wgmma_wait<1>(); // the group of k-tile kt - 1 has retired
        kevo_wgmma_fence_acc(acc);
    }
    kevo_wgmma_wait<0>();
    kevo_wgmma_fence_acc(acc);
    kevo_cp_async_wait<0>();
    __syncthreads();
}

// Split-K: stores this split's fp32 partial (register order, coalesced float4) into the tile's
// workspace (ws_tile: [splits][128 * 256]), counts the arrival in *cnt, and returns true in the
// last CTA to arrive, which then holds the sum over the splits, in split order, in acc; it also
// resets *cnt for the next call (ordered by the kernel boundary). s_flag is a __shared__ int.
__device__ __forceinline__ bool kevo_wgmma_split_reduce(float (&acc)[kevo_wgmma_acc],
                                                        float *ws_tile, int s, int splits, int *cnt,
                                                        int *s_flag)
{
    constexpr int kThreads = kevo_wgmma_threads, BM = kevo_wgmma_bm, BN = kevo_wgmma_bn;
    constexpr int kAcc = kevo_wgmma_acc;
    const int tid = threadIdx.x;
    float4 *mine = reinterpret_cast<float4 *>(ws_tile + (size_t)s * BM * BN);
#pragma unroll
    for (int j = 0; j < kAcc / 4; j++)
        mine[j * kThreads + tid] =
            make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    if (!kevo_split_arrive(cnt, splits, s_flag))
        return false;
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

// acc (fp32, wgmma fragment layout) -> bf16 tile [128][kevo_wgmma_pitch] in shared memory, then
// __syncthreads(). Thread (warpgroup g, warp w, lane l) holds rows 64g + 16w + l/4 (+8) and,
// for i = 0..31, columns 8i + 2(l%4) (+1).
__device__ __forceinline__ void kevo_wgmma_stage_bf16(const float (&acc)[kevo_wgmma_acc],
                                                      __nv_bfloat16 *st)
{
    constexpr int BN = kevo_wgmma_bn, kPitch = kevo_wgmma_pitch;
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
__device__ __forceinline__ unsigned char *kevo_wgmma_aligned_smem(unsigned char *raw)
{
    const uint32_t a = kevo_smem_addr(raw);
    return raw + ((1024u - (a & 1023u)) & 1023u);
}

#endif
