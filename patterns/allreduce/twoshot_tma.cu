// twoshot_tma.cu — two-shot all-reduce (bf16, sum) in one kernel whose peer traffic is TMA bulk
// copies: each CTA bulk-loads tiles of this rank's 1/W part from every rank's x into shared
// memory, sums them in registers (fp32, rank order), writes the sum back to shared memory and
// bulk-stores it into every rank's y (this rank's included): reduce-scatter and all-gather in
// one pass, with STAGES tiles in flight per CTA.
//
// Parts: the vector's 16-byte slots (N / 8 rounded up) are cut into W parts of P slots,
// P = ceil(ceil(N / 8) / W); part r (elements [r*8P, min(N, (r+1)*8P))) is reduced by rank r.
// Every part starts on a 16-byte boundary; only the last non-empty part can end with a
// partial vector (N % 8 elements: 3 at the validation size N = 1000003), which is summed and
// pushed with plain loads and stores.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank):
//  1. Thread 0 initialises one mbarrier per stage (fence.mbarrier_init).
//  2. Start barrier (kevo_cta_barrier, phase 0): every rank has entered this call, so its x
//     holds this call's values and its y may be written. Thread 0 then fences the async proxy
//     (fence.proxy.async.global) before its first bulk copy.
//  3. Pipeline over the tiles of this rank's part (T vectors each, T*16 bytes; CTA b takes
//     tiles b, b + G, b + 2G, ...). Stage k of STAGES holds W pieces of one tile, one per rank.
//     Thread 0 keeps STAGES-1 tiles loading ahead: kevo_mbar_expect_tx(W*bytes) and W bulk loads
//     (x.peer[s] + part + tile offset, own x included). For tile n, every thread waits for the
//     stage's phase (parity (n / STAGES) & 1), sums its vectors over the W pieces in rank order
//     in fp32 (kevo_sum_bf16x8: rounded once, every rank gets the same bits, at W = 2 those of
//     the reference) and writes each sum over piece 0 of the stage (the same thread read it),
//     then fence.proxy.async.shared and __syncthreads(). Thread 0 bulk-stores the piece into
//     the y of rank + 1, rank + 2, ..., and its own y last, commits the group, waits until all
//     groups but this newest one have finished reading shared memory (wait_group.read 1: the
//     stores of tile n-1), and refills tile n-1's stage with tile n + STAGES - 1.
//  4. The partial vector of the last part: summed by plain loads, stored into every y by
//     plain stores. If any pointer were not 16-byte aligned (tensors start on 4 KiB
//     boundaries, so they are), every rank would instead sum all of its own y element by
//     element (the decision depends on window offsets, the same on every rank).
//  5. Thread 0 waits for all of its bulk stores to complete (wait_group 0), fences the async
//     proxy (fence.proxy.async.global) and the system (fence.acq_rel.sys); then the end barrier
//     (phase 1), whose release follows a __syncthreads() after those fences and after every
//     thread's plain stores.
//
// Why it should be fast, and where: the bandwidth seed for 16 .. 256 MiB per rank. Each rank
// moves the bandwidth-optimal 2 (W-1)/W * 2N bytes with bulk copies issued by one thread per
// CTA, several KiB per request and many requests in flight, both link directions busy at once
// (loads from the peers, stores into them); the SMs only add from shared memory, and x and y
// are touched once in HBM. The target at 256 MiB, W = 2 is <= 702 us (80 % of the 561 us link
// roofline; NCCL takes 1170 us): it needs ~380 GB/s per direction with both directions loaded,
// above the SM load/store rate (~370 GB/s) and near the copy engine's 397 GB/s, which is what
// bulk copies aim at. At small sizes the tiles shrink (down to 1 KiB) so that every CTA gets
// about one tile: one launch, two barriers and one load-then-store round trip.
//
// Synchronisation: peers' x are read (by the async proxy, after the acquire and the proxy
// fence) and peers' y written only between the two barriers; every bulk load was waited for on
// its mbarrier and every bulk store completed (wait_group 0 + proxy fence) before the CTA
// arrives at the end barrier, so once CTA b of every rank has passed it, nobody reads this
// rank's x and every part of this rank's y has landed. Each element of y is written by exactly
// one rank. Flags are words [phase][cta][source rank] of the signal pad holding epochs,
// st.release.sys / ld.acquire.sys, never reset; flag and mbarrier waits give up after 5 s with
// __trap(). The epoch is the device's (kevo_epoch_begin / kevo_epoch_end), so a call replayed
// from a CUDA graph is as correct as one made from the host. The grid depends on N, W, the SM
// count and the occupancy (with this kernel's dynamic shared memory) only, the same on every
// rank, all CTAs co-resident.
//
// kevo:pattern problem=allreduce transport=tma fusion=fused
// kevo:param STAGES default=3 range=2..4
// kevo:param TILE_BYTES default=8192 values=2048,4096,8192,16384
// kevo:param CTAS default=132 values=16,32,64,132,264
#define STAGES 3
#define TILE_BYTES 8192
#define CTAS 132

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_tma.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert(TILE_BYTES % 16 == 0, "bulk copies move multiples of 16 bytes");

constexpr int kThreads = 256;
constexpr int kHeader = 128;         // mbarriers, before the stage buffers
constexpr int kSmemMax = 200 * 1024; // dynamic shared memory we allow ourselves
constexpr uint32_t kMinTileVec = 64; // 1 KiB: the smallest tile at small sizes

struct Args {
    const char *src[KEVO_MAX_RANKS];        // x of rank s + this rank's part (bytes)
    char *dst[KEVO_MAX_RANKS];              // y of rank (rank + 1 + d) % W + the part
    const __nv_bfloat16 *x[KEVO_MAX_RANKS]; // every rank's x (plain paths)
    __nv_bfloat16 *y[KEVO_MAX_RANKS];       // every rank's y (plain paths)
    int64_t n;                              // elements
    int64_t lo, hi;                         // this rank's part, elements
    uint32_t nvec;                          // whole vectors of this rank's part
    uint32_t tile_vec;                      // vectors per tile (per rank)
    uint32_t ntiles;                        // tiles of this rank's part
    int bulk;                               // every pointer 16-byte aligned: bulk path
    kevo_pads p;
};

struct State {
    int max_grid;
    int world;
};

// Bytes of dynamic shared memory for a world of W ranks and tiles of tile_vec vectors.
size_t smem_bytes(int W, uint32_t tile_vec)
{
    return (size_t)kHeader + (size_t)STAGES * W * tile_vec * 16;
}

// The largest tile (vectors) that fits STAGES stages of W pieces.
uint32_t max_tile_vec(int W)
{
    uint32_t t = TILE_BYTES / 16;
    while (t > 1 && smem_bytes(W, t) > (size_t)kSmemMax)
        t /= 2;
    return t;
}

// Thread 0: bulk-load tile `tile` of every rank into stage buffer `buf`, completing on `bar`.
template <int W>
__device__ __forceinline__ void issue_loads(const Args &a, char *buf, uint64_t *bar, uint32_t tile)
{
    const uint32_t v0 = tile * a.tile_vec;
    const uint32_t nv = a.nvec - v0 < a.tile_vec ? a.nvec - v0 : a.tile_vec;
    const uint32_t bytes = nv * 16;
    kevo_mbar_expect_tx(bar, bytes * (uint32_t)W);
#pragma unroll
    for (int s = 0; s < W; s++)
        kevo_tma_load(buf + (size_t)s * a.tile_vec * 16, a.src[s] + (uint64_t)v0 * 16, bytes, bar);
}

template <int W>
__global__ void __launch_bounds__(kThreads, 1) allreduce_twoshot_tma(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    extern __shared__ __align__(128) char smem[];
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem);
    char *stage0 = smem + kHeader;
    const size_t stage_bytes = (size_t)W * a.tile_vec * 16;
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t tid = (int64_t)blockIdx.x * kThreads + threadIdx.x;

    if (a.bulk && threadIdx.x == 0) {
        for (int k = 0; k < STAGES; k++)
            kevo_mbar_init(&bars[k], 1);
        kevo_fence_mbar_init();
    }

    kevo_cta_barrier(p, 0); // start: every rank's x is ready and its y may be written (its
                            // __syncthreads also publishes the mbarrier inits to the CTA)

    if (a.bulk) {
        const uint32_t b = blockIdx.x, G = gridDim.x;
        const uint32_t mine = a.ntiles > b ? (a.ntiles - b - 1) / G + 1 : 0;
        if (threadIdx.x == 0) {
            kevo_fence_proxy_async_global(); // acquired peer data, accessed by the async proxy
            const uint32_t pro = mine < STAGES - 1 ? mine : STAGES - 1;
            for (uint32_t m = 0; m < pro; m++)
                issue_loads<W>(a, stage0 + (size_t)m * stage_bytes, &bars[m], b + m * G);
        }
        for (uint32_t n = 0; n < mine; n++) {
            const uint32_t k = n % STAGES;
            uint4 *buf = reinterpret_cast<uint4 *>(stage0 + (size_t)k * stage_bytes);
            const uint32_t tile = b + n * G;
            const uint32_t v0 = tile * a.tile_vec;
            const uint32_t nv = a.nvec - v0 < a.tile_vec ? a.nvec - v0 : a.tile_vec;
            kevo_mbar_wait(&bars[k], (n / STAGES) & 1);
            for (uint32_t j = threadIdx.x; j < nv; j += kThreads) {
                uint4 v[W];
#pragma unroll
                for (int s = 0; s < W; s++)
                    v[s] = buf[(size_t)s * a.tile_vec + j];
                buf[j] = kevo_sum_bf16x8<W>(v); // over piece 0, read by this thread only
            }
            kevo_fence_proxy_async_shared(); // these generic writes, before the bulk stores
            __syncthreads();
            if (threadIdx.x == 0) {
#pragma unroll
                for (int d = 0; d < W; d++)
                    kevo_tma_store(a.dst[d] + (uint64_t)v0 * 16, buf, nv * 16);
                kevo_tma_commit();
                const uint32_t m = n + STAGES - 1; // into the stage of tile n - 1
                if (m < mine) {
                    kevo_tma_wait_read<1>(); // the stores of tile n - 1 have read their stage
                    issue_loads<W>(a, stage0 + (size_t)(m % STAGES) * stage_bytes,
                                   &bars[m % STAGES], b + m * G);
                }
            }
        }
        // the partial vector at the end of the last part: plain loads, plain stores to every y
        for (int64_t e = a.lo + ((int64_t)a.nvec << 3) + tid; e < a.hi; e += stride) {
            float acc = __bfloat162float(a.x[0][e]);
#pragma unroll
            for (int s = 1; s < W; s++)
                acc += __bfloat162float(a.x[s][e]);
            const __nv_bfloat16 sum = __float2bfloat16_rn(acc);
#pragma unroll
            for (int q = 0; q < W; q++)
                a.y[q][e] = sum;
        }
        if (threadIdx.x == 0) {
            kevo_tma_wait_all();             // every bulk store of this CTA has landed ...
            kevo_fence_proxy_async_global(); // ... and is ordered before the release below
            asm volatile("fence.acq_rel.sys;" ::: "memory");
        }
    } else {
        // a misaligned pointer: this rank sums all of its own y, element by element
        __nv_bfloat16 *y = a.y[p.rank];
        for (int64_t e = tid; e < a.n; e += stride) {
            float acc = __bfloat162float(a.x[0][e]);
#pragma unroll
            for (int s = 1; s < W; s++)
                acc += __bfloat162float(a.x[s][e]);
            y[e] = __float2bfloat16_rn(acc);
        }
    }

    kevo_cta_barrier(p, 1); // end: nobody reads this x, every part of this y has landed
    kevo_epoch_end(p);
}

typedef void (*kernel_fn)(Args);

kernel_fn kernel_for(int W)
{
    switch (W) {
    case 1: return allreduce_twoshot_tma<1>;
    case 2: return allreduce_twoshot_tma<2>;
    case 3: return allreduce_twoshot_tma<3>;
    case 4: return allreduce_twoshot_tma<4>;
    case 5: return allreduce_twoshot_tma<5>;
    case 6: return allreduce_twoshot_tma<6>;
    case 7: return allreduce_twoshot_tma<7>;
    case 8: return allreduce_twoshot_tma<8>;
    default: return NULL;
    }
}

int check_tensors(const kevo_ctx *ctx, const char **why)
{
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS) {
        *why = "bad context (tensors or world)";
        return -1;
    }
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel) {
        *why = "expected bf16 x and y of equal size";
        return -1;
    }
    if ((x->numel + 7) / 8 >= ((int64_t)1 << 31)) {
        *why = "too many elements for 32-bit vector indices";
        return -1;
    }
    return 0;
}

} // namespace

constexpr const char *kWho = "allreduce/twoshot_tma";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    const int W = ctx->world;
    const kernel_fn k = kernel_for(W);
    const size_t smem = smem_bytes(W, max_tile_vec(W));
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return kevo_fail(kWho, "%zu bytes of shared memory: %s", smem, cudaGetErrorString(e));
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)k, kThreads, smem, INT_MAX, &per_sm) != 0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    st->world = W;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const char *why = NULL;
    if (!st)
        return 1;
    if (check_tensors(ctx, &why) != 0 || st->world != ctx->world)
        return kevo_fail(kWho, "%s", why ? why : "the world changed since kevo_init");
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = x->numel;
    const int64_t part_vec = ((n + 7) / 8 + W - 1) / W; // P, the same for every rank

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.n = n;
    a.lo = (int64_t)r * part_vec * 8;
    a.hi = a.lo + part_vec * 8;
    a.lo = a.lo < n ? a.lo : n;
    a.hi = a.hi < n ? a.hi : n;
    a.nvec = (uint32_t)((a.hi - a.lo) / 8);
    bool bulk = true;
    for (int s = 0; s < W; s++) {
        a.x[s] = (const __nv_bfloat16 *)x->peer[s];
        a.y[s] = (__nv_bfloat16 *)y->peer[s];
        a.src[s] = (const char *)(a.x[s] + a.lo);
        const int q = (r + 1 + s) % W; // peers first, this rank's own y last
        a.dst[s] = (char *)((__nv_bfloat16 *)y->peer[q] + a.lo);
        bulk = bulk && kevo_aligned16(x->peer[s]) && kevo_aligned16(y->peer[s]);
    }
    a.bulk = bulk;
    a.p = kevo_pads_of(ctx);

    // Tiles and grid from N, W, the SM count and the occupancy only (the nominal part P, not
    // this rank's possibly shorter last part): the same on every rank.
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t most = st->max_grid < pad_limit ? st->max_grid : pad_limit;
    const int64_t want = kevo_clamp_grid(CTAS, most);
    uint32_t tile = max_tile_vec(W);
    const int64_t even = (part_vec + want - 1) / want; // small sizes: about a tile per CTA
    if (even < (int64_t)tile)
        tile = even > (int64_t)kMinTileVec ? (uint32_t)even
                                           : (kMinTileVec < tile ? kMinTileVec : tile);
    a.tile_vec = tile;
    a.ntiles = (a.nvec + tile - 1) / tile;
    const int64_t nominal_tiles = (part_vec + tile - 1) / tile;
    const int64_t grid = kevo_clamp_grid(nominal_tiles, want);

    const size_t smem = smem_bytes(W, tile);
    kernel_for(W)<<<(unsigned)grid, kThreads, smem, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
