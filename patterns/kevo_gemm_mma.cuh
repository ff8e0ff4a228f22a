// kevo_gemm_mma.cuh — the mma.sync tiled GEMM of the fused GEMM seeds (cp.async multistage
// pipeline, XOR-swizzled shared memory, ldmatrix, m16n8k16 bf16 with fp32 accumulators, split-K
// and the bf16 staging of a finished tile), and the pieces that every fused GEMM seed shares,
// whichever tensor-core path it multiplies with.
//
// Used by patterns/{gemm_allreduce,gemm_reducescatter,allgather_gemm}/fused_mma_sm.cu; the
// common part (first half) also by kevo_gemm_wgmma.cuh and so by the fused_wgmma_sm.cu seeds.
//
// Common part:
//  - cp.async (kevo_cp_async16, kevo_cp_async_commit, kevo_cp_async_wait<N>), 16-byte
//    ld.global.cg (kevo_ldcg16), element e of 8 packed bf16 (kevo_bf16x8_elem);
//  - kevo_select_rank (a per-rank kernel-parameter array indexed without local memory),
//    kevo_start_slot (the split start barrier in phase 0 of the kevo_cta_barrier layout),
//    kevo_tile_order<Group> (tiles numbered Group strips at a time, column by column);
//  - the A operand's row sources for the tile functions (kevo_rows_strided, kevo_rows_gathered)
//    and their k-tile hooks (kevo_no_hook, kevo_chunk_hook<Chunk>), with the producer of the
//    gathered rows for all-gather GEMMs (kevo_gather_units, its buffers: kevo_gather_alloc);
//  - epilogues: kevo_tile_put (a staged tile into a peer's receive slot), kevo_tile_store (a
//    staged tile into C), and the dynamic item counter (kevo_next_item, kevo_items_done);
//  - host: split-K sizing and workspace (kevo_gemm_split_k, kevo_gemm_split_ws), the occupancy
//    of a seed's two kernel variants (kevo_gemm_occupancy), and kevo_cublas.cuh's checks.
// mma.sync part: kevo_mma_tile<BM, Stages> (shared-memory layout), kevo_mma_gemm_tile,
// kevo_mma_split_reduce, kevo_mma_stage_bf16.
//
// Tunables stay in the seeds: the pipeline depth, the tile grouping and the copy chunk arrive as
// template parameters (Stages, Group, Chunk).
#ifndef KEVO_PATTERNS_GEMM_MMA_CUH
#define KEVO_PATTERNS_GEMM_MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kevo/kernel.h"
#include "kevo_cublas.cuh"
#include "kevo_sync.cuh"
#include "kevo_tma.cuh" // kevo_smem_addr only (no bulk copies here)
#include "kevo_vec.cuh"

// ---- common: PTX wrappers ----------------------------------------------------------------------

// 16 bytes global -> shared, asynchronous; src_bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void kevo_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

__device__ __forceinline__ void kevo_cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void kevo_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// 16 bytes through L2 (ld.global.cg, never the non-coherent path): data other CTAs or GPUs
// wrote in this kernel, after the flag that published it was acquired.
__device__ __forceinline__ uint4 kevo_ldcg16(const void *p)
{
    return __ldcg(reinterpret_cast<const uint4 *>(p));
}

// Element e (0..7) of 8 bf16 packed in a uint4, without a dynamic index into a local array.
__device__ __forceinline__ __nv_bfloat16 kevo_bf16x8_elem(const uint4 &v, int e)
{
    const uint32_t w = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
    return __ushort_as_bfloat16((unsigned short)((e & 1) ? (w >> 16) : (w & 0xffffu)));
}

// ---- common: ranks, barriers, tile order -------------------------------------------------------

// arr[q] with a constant-index select: a dynamic index into a kernel parameter array would
// copy the array to local memory.
template <class P>
__device__ __forceinline__ P kevo_select_rank(P const (&arr)[KEVO_MAX_RANKS], int q)
{
    P r = arr[0];
#pragma unroll
    for (int i = 1; i < KEVO_MAX_RANKS; i++)
        if (q == i)
            r = arr[i];
    return r;
}

// The flag of "CTA cta of rank src entered this call" in this rank's pad: phase 0 of the
// kevo_cta_barrier layout, so that a split start barrier (kevo_signal early, kevo_wait just
// before the first access that needs it) leaves phases >= 1 to kevo_cta_barrier.
__device__ __forceinline__ uint64_t kevo_start_slot(int cta, int src, int world)
{
    return (uint64_t)cta * world + src; // phase 0 of the kevo_cta_barrier layout
}

// Strip and column of tile t: Group strips at a time, column by column inside a group, so that
// the CTAs running at once share a few strips of A and a few column panels of B in L2.
template <int Group>
__device__ __forceinline__ void kevo_tile_order(int t, int nstrip, int ncol, int *strip, int *col)
{
    const int band = t / (Group * ncol);
    const int within = t - band * Group * ncol;
    const int rest = nstrip - band * Group;
    const int g = rest < Group ? rest : Group;
    *col = within / g;
    *strip = band * Group + within % g;
}

// ---- common: the A operand of a tile -----------------------------------------------------------
//
// The tile functions (kevo_mma_gemm_tile, kevo_wgmma_gemm_tile) read row r < rows of A from
// arow(r); kevo_mma_gemm_tile also takes from the row source the address that its zero-filling
// cp.async names (arow.fill_src(b), never read) and its element-wise loads (arow.load8), so
// that each source keeps the exact indexing its seeds were timed with. They call hook.wait(k0)
// in thread 0 before the __syncthreads() that precedes the loads of the k-tile at k0 (it may
// spin on a flag: the barrier then orders the loads after its acquire); kevo_mma_gemm_tile
// leaves out the wait and its barrier for a hook with waits == false.

// Row r at a + r * lda.
struct kevo_rows_strided {
    const __nv_bfloat16 *a;
    int64_t lda;
    __device__ __forceinline__ const __nv_bfloat16 *operator()(int r) const
    {
        return a + r * lda;
    }
    __device__ __forceinline__ const void *fill_src(const __nv_bfloat16 *) const
    {
        return a;
    }
    // e[j] = A[r][k + j] for j = 0..7, zero where r >= rows or k + j >= ke
    __device__ __forceinline__ void load8(__nv_bfloat16 *e, int r, int rows, int k, int ke,
                                          const __nv_bfloat16 *) const
    {
#pragma unroll
        for (int j = 0; j < 8; j++)
            e[j] = (r < rows && k + j < ke) ? a[r * lda + k + j] : __float2bfloat16(0.f);
    }
};

// All-gather GEMM: global row m0 + r comes from this rank's A_r when it owns it (rows
// [own_lo, own_hi)), else from G, the private gathered [M][k] copy that kevo_gather_units fills.
struct kevo_rows_gathered {
    const __nv_bfloat16 *own; // A_r
    const __nv_bfloat16 *g;   // G
    int m0, own_lo, own_hi, k;
    __device__ __forceinline__ const __nv_bfloat16 *operator()(int r) const
    {
        const int gr = m0 + r;
        return (gr >= own_lo && gr < own_hi) ? own + (int64_t)(gr - own_lo) * k
                                             : g + (int64_t)gr * k;
    }
    __device__ __forceinline__ const void *fill_src(const __nv_bfloat16 *b) const
    {
        return b;
    }
    __device__ __forceinline__ void load8(__nv_bfloat16 *e, int r, int rows, int kk, int ke,
                                          const __nv_bfloat16 *b) const
    {
        const __nv_bfloat16 *src = r < rows ? (*this)(r) : b;
#pragma unroll
        for (int j = 0; j < 8; j++)
            e[j] = (r < rows && kk + j < ke) ? src[kk + j] : __float2bfloat16(0.f);
    }
};

struct kevo_no_hook {
    static constexpr bool waits = false;
    __device__ __forceinline__ void wait(int)
    {
    }
};

// Waits, before a k-tile of a strip with peer rows is loaded, for the copy unit holding it
// (units of Chunk columns, flag kc of the strip published by kevo_gather_units).
template <int Chunk> struct kevo_chunk_hook {
    static constexpr bool waits = true;
    const uint64_t *flags; // this strip's unit flags, or NULL when the strip has no peer rows
    uint64_t epoch;
    int done; // chunks [0, done) already acquired
    __device__ __forceinline__ void wait(int k0)
    {
        if (!flags)
            return;
        const int kc = k0 / Chunk;
        if (kc < done)
            return;
        kevo_wait_flag(flags + kc, epoch);
        done = kc + 1; // units of a strip complete in order of k for this CTA's purpose only
    }
};

// Copy CTA of an all-gather GEMM: the peer rows of every unit u = blockIdx.x, + copy_ctas, ...
// into G, a unit being the rows of one BM-row strip (in the cyclic need order from
// first_strip) and Chunk columns; after each unit, __syncthreads() and a release of the epoch
// into its flag uflag[strip][kc] (local memory). Units of strips that hold no peer row are
// skipped (no flag: the GEMM does not wait for them). Waits first for every peer's CTA
// blockIdx.x to enter this call (its A is ready then). Threads threads, Unroll 16-byte loads in
// flight per thread. A is the seed's kernel-argument struct, with the fields read below:
// a[KEVO_MAX_RANKS] (every rank's A_s [M/W][K]), g, uflag, pads, m, mw, k, nstrip,
// first_strip, nkc, copy_ctas, cpvec (K % 8 == 0 and every A_s and G 16-byte aligned).
template <int BM, int Chunk, int Threads, int Unroll, class A>
__device__ void kevo_gather_units(const A &a)
{
    typedef __nv_bfloat16 bf16;
    const int tid = threadIdx.x;
    const int W = a.pads.world, rank = a.pads.rank;
    // every peer's A is ready once its CTA blockIdx.x has entered this call
    if (tid < W && tid != rank)
        kevo_wait(a.pads, kevo_start_slot(blockIdx.x, tid, W));
    __syncthreads();

    const int own_lo = rank * a.mw, own_hi = own_lo + a.mw;
    const int nunits = a.nstrip * a.nkc;
    for (int u = blockIdx.x; u < nunits; u += a.copy_ctas) {
        const int j = u / a.nkc, kc = u - j * a.nkc;
        const int strip = (a.first_strip + j) % a.nstrip;
        const int m0 = strip * BM, m1 = min(a.m, m0 + BM);
        if (m0 >= own_lo && m1 <= own_hi)
            continue; // only own rows
        const int k0 = kc * Chunk, k1 = min(a.k, k0 + Chunk);
        // peer rows of the strip: [m0, m1) minus [own_lo, own_hi)
        if (a.cpvec) {
            const int vpr = (k1 - k0) / 8; // K % 8 == 0: whole vectors
            const int nv = (m1 - m0) * vpr;
            for (int v0 = tid; v0 < nv; v0 += Threads * Unroll) {
                uint4 val[Unroll];
                int64_t dst[Unroll];
#pragma unroll
                for (int x = 0; x < Unroll; x++) {
                    const int v = v0 + x * Threads;
                    dst[x] = -1;
                    if (v < nv) {
                        const int gr = m0 + v / vpr;
                        const int kk = k0 + (v % vpr) * 8;
                        if (gr < own_lo || gr >= own_hi) {
                            const int s = gr / a.mw;
                            const bf16 *src =
                                kevo_select_rank(a.a, s) + (int64_t)(gr - s * a.mw) * a.k + kk;
                            val[x] = *reinterpret_cast<const uint4 *>(src);
                            dst[x] = (int64_t)gr * a.k + kk;
                        }
                    }
                }
#pragma unroll
                for (int x = 0; x < Unroll; x++)
                    if (dst[x] >= 0)
                        *reinterpret_cast<uint4 *>(a.g + dst[x]) = val[x];
            }
        } else {
            const int per = k1 - k0;
            const int ne = (m1 - m0) * per;
            for (int e = tid; e < ne; e += Threads) {
                const int gr = m0 + e / per;
                const int kk = k0 + e % per;
                if (gr < own_lo || gr >= own_hi) {
                    const int s = gr / a.mw;
                    a.g[(int64_t)gr * a.k + kk] =
                        kevo_select_rank(a.a, s)[(int64_t)(gr - s * a.mw) * a.k + kk];
                }
            }
        }
        __syncthreads(); // every thread's stores precede the release
        if (tid == 0)
            kevo_store_release_sys(a.uflag + (size_t)strip * a.nkc + kc, a.pads.epoch);
    }
}

// Host side of kevo_gather_units: the private gathered copy G [m][k], the unit flags
// [nstrip][nkc] and the item counters [2] of kevo_next_item, flags and counters zeroed
// (asynchronous memsets: synchronise before the first launch).
static inline cudaError_t kevo_gather_alloc(int64_t m, int64_t k, int nstrip, int nkc,
                                            __nv_bfloat16 **g, uint64_t **uflag, int **ctr)
{
    const size_t g_bytes = (size_t)(m * k) * sizeof(__nv_bfloat16);
    const size_t f_bytes = (size_t)nstrip * nkc * sizeof(uint64_t);
    cudaError_t e = cudaMalloc(g, g_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(uflag, f_bytes);
    if (e == cudaSuccess)
        e = cudaMemset(*uflag, 0, f_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(ctr, 2 * sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemset(*ctr, 0, 2 * sizeof(int));
    return e;
}

// ---- common: epilogues -------------------------------------------------------------------------
//
// A finished tile is staged in shared memory as bf16 [rows][Pitch] (Bn columns used); its
// 8-column vector v = r * (Bn / 8) + c is handled by thread v % Threads.

// The staged rows, as one contiguous [rows][Bn] block at dst (a receive slot), 16-byte stores.
template <int Bn, int Pitch, int Threads>
__device__ __forceinline__ void kevo_tile_put(__nv_bfloat16 *dst, const __nv_bfloat16 *stage,
                                              int rows)
{
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    for (int v = threadIdx.x; v < rows * (Bn / 8); v += Threads) {
        const int r = v / (Bn / 8), c = v % (Bn / 8);
        d[v] = *reinterpret_cast<const uint4 *>(stage + r * Pitch + c * 8);
    }
}

// The staged tile into C = a.c ([..][a.nw]) at rows m0.., columns n0..: 16-byte stores when
// a.cvec (a.nw % 8 == 0 and C 16-byte aligned), else element by element; columns >= cols are
// left alone. A is the seed's kernel-argument struct (read in the loop, as the seeds were timed).
template <int Bn, int Pitch, int Threads, class A>
__device__ __forceinline__ void kevo_tile_store(const A &a, int m0, int n0,
                                                const __nv_bfloat16 *stage, int rows, int cols)
{
    for (int v = threadIdx.x; v < rows * (Bn / 8); v += Threads) {
        const int r = v / (Bn / 8), c = v % (Bn / 8);
        if (c * 8 >= cols)
            continue;
        const uint4 out = *reinterpret_cast<const uint4 *>(stage + r * Pitch + c * 8);
        const int64_t off = (int64_t)(m0 + r) * a.nw + n0 + c * 8;
        if (a.cvec) {
            *reinterpret_cast<uint4 *>(a.c + off) = out;
        } else {
            const int ne = min(8, cols - c * 8);
            for (int e = 0; e < ne; e++)
                a.c[off + e] = stage[r * Pitch + c * 8 + e];
        }
    }
}

// Dynamic scheduling: the next work item from ctr[0] (every thread of the CTA gets it; s_item
// is a __shared__ int).
__device__ __forceinline__ int kevo_next_item(int *ctr, int *s_item)
{
    if (threadIdx.x == 0)
        *s_item = atomicAdd(ctr, 1);
    __syncthreads();
    return *s_item;
}

// After a CTA's last kevo_next_item: the last CTA to finish resets ctr[0] and ctr[1] for the
// next call (it observes every other CTA's last ticket through ctr[1], with fences; the next
// call starts after this kernel ends).
__device__ __forceinline__ void kevo_items_done(int *ctr)
{
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(ctr + 1, 1) == (int)gridDim.x - 1) {
            __threadfence();
            ctr[0] = 0;
            ctr[1] = 0;
        }
    }
}

// Split-K arrival, after this CTA stored its partial of a tile: every thread's stores are
// fenced, one thread counts the arrival in *cnt, and the result (true in the last of the
// `splits` CTAs to arrive, which then fences again before reading the others' partials) is
// broadcast through s_flag (a __shared__ int).
__device__ __forceinline__ bool kevo_split_arrive(int *cnt, int splits, int *s_flag)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        *s_flag = atomicAdd(cnt, 1) == splits - 1;
    __syncthreads();
    if (!*s_flag)
        return false;
    __threadfence();
    return true;
}

// ---- common: host ------------------------------------------------------------------------------

// Split-K for `tiles` output tiles over a K range of kdim in k-tiles of bk: the most splits (a
// power of two, at most max_splits) such that tiles x splits CTAs are still resident and every
// split keeps at least min_ktiles k-tiles. *kper is the K range per split (a multiple of bk),
// *splits the number of non-empty splits.
static inline void kevo_gemm_split_k(int64_t tiles, int64_t resident, int64_t kdim, int bk,
                                     int max_splits, int min_ktiles, int *kper, int *splits)
{
    const int ksteps = (int)((kdim + bk - 1) / bk);
    int s = 1;
    while (s * 2 <= max_splits && tiles * s * 2 <= resident && ksteps >= s * 2 * min_ktiles)
        s *= 2;
    *kper = ((ksteps + s - 1) / s) * bk;
    *splits = (int)((kdim + *kper - 1) / *kper);
}

// Split-K workspace (private): fp32 partials [tiles][splits][tile_elems] and zeroed arrival
// counters [tiles]. Asynchronous memset: synchronise before the first launch.
static inline cudaError_t kevo_gemm_split_ws(int64_t tiles, int splits, size_t tile_elems,
                                             float **ws, int **cnt)
{
    cudaError_t e = cudaMalloc(ws, (size_t)tiles * splits * tile_elems * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc(cnt, (size_t)tiles * sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemset(*cnt, 0, (size_t)tiles * sizeof(int));
    return e;
}

// A seed's two kernel variants (f0, f1: the scalar and the 16-byte-load one) with `smem` bytes
// of dynamic shared memory: sets the attribute and returns the CTAs per SM both reach, at most
// max_per_sm; 0 after "who: kernel setup: ..." or "who: kernel does not fit on an SM".
template <class F>
static inline int kevo_gemm_occupancy(const char *who, F f0, F f1, int threads, int smem,
                                      int max_per_sm)
{
    int occ = 0;
    for (int v = 0; v < 2; v++) {
        F f = v == 0 ? f0 : f1;
        cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        int o = 0;
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, f, threads, smem);
        if (e != cudaSuccess) {
            fprintf(stderr, "%s: kernel setup: %s\n", who, cudaGetErrorString(e));
            return 0;
        }
        occ = v == 0 ? o : (o < occ ? o : occ);
    }
    if (occ > max_per_sm)
        occ = max_per_sm;
    if (occ < 1) {
        fprintf(stderr, "%s: kernel does not fit on an SM\n", who);
        return 0;
    }
    return occ;
}

// ---- mma.sync: PTX wrappers --------------------------------------------------------------------

__device__ __forceinline__ void kevo_ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void kevo_ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d += a . b for one m16n8k16 fragment (bf16 in, fp32 accumulators).
__device__ __forceinline__ void kevo_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- mma.sync: the tile ------------------------------------------------------------------------

constexpr int kevo_mma_threads = 256;           // 8 warps: 2 (rows) x 4 (columns)
constexpr int kevo_mma_bk = 32;                 // k per pipeline stage
constexpr int kevo_mma_bn = 128;                // tile columns
constexpr int kevo_mma_pitch = kevo_mma_bn + 8; // staging row pitch in elements (272 bytes: no
                                                // bank conflicts)

// A BM x 128 tile (BM = 64 or 128) is 8 warps of WM x 32: acc[MI][4][4] per thread.
template <int BM> struct kevo_mma_warps {
    static constexpr int WM = BM / 2;  // rows per warp
    static constexpr int MI = WM / 16; // m16 fragments per warp (and 4 n8 fragments: 32 columns)
};

// Shared memory of a BM x 128 tile with a Stages-deep pipeline; the bf16 staging of the finished
// tile reuses it (SMEM bytes of dynamic shared memory, 128-byte aligned).
template <int BM, int Stages> struct kevo_mma_tile : kevo_mma_warps<BM> {
    static constexpr int A_ELEMS = BM * kevo_mma_bk;
    static constexpr int B_ELEMS = kevo_mma_bk * kevo_mma_bn;
    static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
    static constexpr int PIPE_BYTES = Stages * STAGE_ELEMS * 2;
    static constexpr int OUT_BYTES = BM * kevo_mma_pitch * 2;
    static constexpr int SMEM = PIPE_BYTES > OUT_BYTES ? PIPE_BYTES : OUT_BYTES;
};

template <int BM>
__device__ __forceinline__ void kevo_mma_zero(float (&acc)[kevo_mma_warps<BM>::MI][4][4])
{
#pragma unroll
    for (int mi = 0; mi < kevo_mma_warps<BM>::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mi][ni][e] = 0.f;
}

// acc = A[0:rows, kb:ke] . B[kb:ke, 0:cols] for one BM x 128 tile: row r of A starts at arow(r)
// (see "the A operand of a tile" above, and the hook); B element (k, j) at b[k * ldb + j]. Rows
// >= rows, columns >= cols and k >= ke read as zeros.
// Shared memory per stage (Stages stages): A [BM][32] (row = 64 bytes = 4 chunks of 16 B, chunk
// c stored at c ^ ((r >> 1) & 3)) and B [32][128] (row = 256 bytes = 16 chunks, chunk c at
// c ^ (r & 7)): both make the 8 row addresses of every ldmatrix phase hit 8 different bank
// groups.
// VEC: every row start is 16-byte aligned and the row pitch, ldb and ke are multiples of 8, so a
// 16-byte chunk is wholly inside or wholly outside; otherwise elements are loaded one by one.
// Ends with a __syncthreads(): the shared memory is free for the caller.
template <int BM, int Stages, bool VEC, class ARows, class Hook>
__device__ __forceinline__ void kevo_mma_gemm_tile(float (&acc)[kevo_mma_warps<BM>::MI][4][4],
                                                   const ARows &arow, int rows,
                                                   const __nv_bfloat16 *b, int64_t ldb, int cols,
                                                   int kb, int ke, __nv_bfloat16 *smem, Hook &hook)
{
    typedef __nv_bfloat16 bf16;
    typedef kevo_mma_tile<BM, Stages> T;
    constexpr int kThreads = kevo_mma_threads, BK = kevo_mma_bk, BN = kevo_mma_bn;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
    const uint32_t sbase = kevo_smem_addr(smem);

    kevo_mma_zero<BM>(acc);

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
                kevo_cp_async16(sa + off * 2, ok ? (const void *)(arow(r) + k) : arow.fill_src(b),
                                ok ? 16 : 0);
            } else {
                uint4 v;
                bf16 *e = reinterpret_cast<bf16 *>(&v);
                arow.load8(e, r, rows, k, ke, b);
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
                kevo_cp_async16(sb + off * 2,
                                ok ? (const void *)(b + k * ldb + n) : (const void *)b,
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
                kevo_ldmatrix_x4(af[mi], sa + (r * BK + ((c ^ ((r >> 1) & 3)) << 3)) * 2);
            }
#pragma unroll
            for (int nj = 0; nj < 2; nj++) {
                const int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                const int c = ((wn * 32 + nj * 16) >> 3) + (lane >> 4);
                uint32_t t4[4];
                kevo_ldmatrix_x4_trans(t4, sb + (r * BN + ((c ^ (r & 7)) << 3)) * 2);
                bfr[2 * nj][0] = t4[0];
                bfr[2 * nj][1] = t4[1];
                bfr[2 * nj + 1][0] = t4[2];
                bfr[2 * nj + 1][1] = t4[3];
            }
#pragma unroll
            for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
                    kevo_mma_bf16(acc[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
        }
    };

    const int nk = (ke - kb + BK - 1) / BK;
    if constexpr (Hook::waits) {
        if (tid == 0)
            for (int s = 0; s < Stages - 1 && s < nk; s++)
                hook.wait(kb + s * BK);
        __syncthreads();
    }
#pragma unroll
    for (int s = 0; s < Stages - 1; s++) {
        if (s < nk)
            load_stage(s, kb + s * BK);
        kevo_cp_async_commit();
    }
    for (int kt = 0; kt < nk; kt++) {
        const int pf = kt + Stages - 1;
        kevo_cp_async_wait<Stages - 2>();
        if (Hook::waits && tid == 0 && pf < nk)
            hook.wait(kb + pf * BK);
        __syncthreads(); // stage kt complete for every thread; stage kt - 1 consumed; hook acquired
        if (pf < nk)
            load_stage(pf % Stages, kb + pf * BK);
        kevo_cp_async_commit();
        compute_stage(kt % Stages);
    }
    kevo_cp_async_wait<0>();
    __syncthreads();
}

// Split-K: stores this split's fp32 partial (register order, coalesced float4) into the tile's
// workspace (ws_tile: [splits][BM * 128]), counts the arrival in *cnt, and returns true in the
// last CTA to arrive, which then holds the sum over the splits, in split order (its own partial
// re-read from L2), in acc; it also resets *cnt for the next call (ordered by the kernel
// boundary). s_flag is a __shared__ int.
template <int BM>
__device__ __forceinline__ bool kevo_mma_split_reduce(float (&acc)[kevo_mma_warps<BM>::MI][4][4],
                                                      float *ws_tile, int s, int splits, int *cnt,
                                                      int *s_flag)
{
    typedef kevo_mma_warps<BM> T;
    constexpr int kThreads = kevo_mma_threads, BN = kevo_mma_bn;
    const int tid = threadIdx.x;
    float4 *mine = reinterpret_cast<float4 *>(ws_tile + (size_t)s * BM * BN);
#pragma unroll
    for (int mi = 0; mi < T::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
            mine[(mi * 4 + ni) * kThreads + tid] =
                make_float4(acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]);
    if (!kevo_split_arrive(cnt, splits, s_flag))
        return false;
    kevo_mma_zero<BM>(acc);
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

// acc (fp32) -> bf16 tile [BM][kevo_mma_pitch] in shared memory at st, then __syncthreads().
template <int BM>
__device__ __forceinline__ void kevo_mma_stage_bf16(
    const float (&acc)[kevo_mma_warps<BM>::MI][4][4], __nv_bfloat16 *st)
{
    typedef kevo_mma_warps<BM> T;
    constexpr int kPitch = kevo_mma_pitch;
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

#endif
