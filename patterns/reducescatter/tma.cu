// tma.cu — reduce-scatter (bf16, sum) in one kernel whose peer traffic is TMA bulk loads: each
// CTA bulk-loads tiles of its own block from every rank's x into shared memory (one mbarrier
// per stage), sums them in fp32 in registers and stores the sum to y with 16-byte stores.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank), C = N/W:
//  1. Prologue: thread 0 initialises one mbarrier per pipeline stage (fence.mbarrier_init).
//  2. Start barrier (kevo_cta_barrier, phase 0): every peer has entered this call, so its x
//     holds this call's values. Thread 0 then fences the async proxy
//     (fence.proxy.async.global) before its first bulk load, as kevo_tma.cuh prescribes.
//  3. Pipeline. Block r of the sum (y[i] = sum_s x_s[r*C + i]) is cut into tiles of T vectors
//     (T*16 bytes of y); CTA b takes tiles b, b + G, b + 2G, ... Stage k of STAGES holds one
//     tile of every rank (W pieces of T*16 bytes). Thread 0 announces W*T*16 bytes on the
//     stage's mbarrier and issues W bulk loads (x.peer[s] + r*C + tile offset, this rank's own
//     x included); STAGES-1 tiles are in flight ahead of the one being summed. Every thread
//     waits for the stage's phase, sums its vectors of the tile over the W pieces in rank order
//     in fp32 (kevo_sum_bf16x8: rounded once, bit for bit the reference at W = 2) and stores
//     them to y; a __syncthreads() frees the stage, and thread 0 refills it with the tile
//     STAGES ahead (the bulk writes are ordered after the generic reads by that barrier).
//  4. The elements after the last whole vector are summed one at a time by ordinary loads. When
//     r*C is not a multiple of 8 elements (the validation size: C = 400012 / 200006 / 100003),
//     the blocks of x are not 16-byte aligned, bulk copies cannot be used, and the whole block
//     is summed one element at a time (slow, correct; that size is not timed).
//  5. End barrier (phase 1): every bulk load a CTA issued was waited for on its mbarrier before
//     the CTA arrives, so once CTA b of every rank has passed it nobody reads this rank's x.
//
// Why it should be fast: at large sizes the loads are bulk transfers issued by one thread per
// CTA, several KiB per request and many requests in flight per SM, so NVLink reads run near
// the link rate (the target is the copy engine's ~397 GB/s rather than SM loads' ~370 GB/s)
// while the SMs only add from shared memory: each rank reads (W-1)/W * 2N bytes from peers
// once and writes 2N/W bytes of y (NCCL: 739 us at 256 MiB, W = 2). At small sizes the tiles
// shrink so that every CTA gets about one tile: one launch, two barriers and one bulk-load
// round trip.
//
// Synchronisation: peers' x are read (by the async proxy) only between the two barriers, after
// the proxy fence; y is written only on this rank by ordinary stores. Barrier flags are words
// [phase][cta][rank] of the signal pad holding epochs, st.release.sys / ld.acquire.sys, never
// reset; flag and mbarrier waits give up after 5 s with __trap(). The epoch is the device's
// (kevo_epoch_begin / kevo_epoch_end on channel 0, one launch per call), so a call replayed
// from a CUDA graph is as correct as one made from the host.
//
// kevo:pattern problem=reducescatter transport=tma fusion=fused
// kevo:param TILE_BYTES default=8192 values=2048,4096,8192,16384,32768
// kevo:param STAGES default=4 values=2,3,4,6,8
// kevo:param CTAS default=132 values=32,64,96,132,264
// kevo:param THREADS default=256 values=128,256,512
#define TILE_BYTES 8192
#define STAGES 4
#define CTAS 132
#define THREADS 256

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

constexpr int kHeader = 128;         // mbarriers, before the stage buffers
constexpr int kSmemMax = 200 * 1024; // dynamic shared memory we allow ourselves
constexpr uint32_t kMinTileVec = 64; // 1 KiB: the smallest tile at small sizes

struct Args {
    const char *src[KEVO_MAX_RANKS]; // x_s + rank*C (bytes) for every rank s
    __nv_bfloat16 *y;                // this rank's y
    int64_t c;                       // elements of y
    uint32_t nvec;                   // whole vectors of y
    uint32_t tile_vec;               // vectors per tile (per rank)
    uint32_t ntiles;                 // tiles of y
    int bulk;                        // every pointer 16-byte aligned: bulk path
    int world;
    kevo_pads p;
};

struct State {
    int max_grid;
    int world;
};

// Bytes of dynamic shared memory for a world of W ranks and the tile actually used.
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

// Sum tile `tile` (in stage buffer `buf`, W pieces of tile_vec vectors) into y.
template <int W>
__device__ __forceinline__ void sum_tile(const Args &a, const uint4 *buf, uint32_t tile)
{
    const uint32_t v0 = tile * a.tile_vec;
    const uint32_t nv = a.nvec - v0 < a.tile_vec ? a.nvec - v0 : a.tile_vec;
    uint4 *y = reinterpret_cast<uint4 *>(a.y) + v0;
    for (uint32_t j = threadIdx.x; j < nv; j += THREADS) {
        uint4 v[W];
#pragma unroll
        for (int s = 0; s < W; s++)
            v[s] = buf[(size_t)s * a.tile_vec + j];
        y[j] = kevo_sum_bf16x8<W>(v);
    }
}

__device__ __forceinline__ void sum_tile_w(const Args &a, const uint4 *buf, uint32_t tile)
{
    switch (a.world) {
    case 1: sum_tile<1>(a, buf, tile); break;
    case 2: sum_tile<2>(a, buf, tile); break;
    case 3: sum_tile<3>(a, buf, tile); break;
    case 4: sum_tile<4>(a, buf, tile); break;
    case 5: sum_tile<5>(a, buf, tile); break;
    case 6: sum_tile<6>(a, buf, tile); break;
    case 7: sum_tile<7>(a, buf, tile); break;
    default: sum_tile<8>(a, buf, tile); break;
    }
}

// Thread 0: bulk-load tile `tile` of every rank into stage buffer `buf`, completing on `bar`.
__device__ __forceinline__ void issue_tile(const Args &a, char *buf, uint64_t *bar, uint32_t tile)
{
    const uint32_t v0 = tile * a.tile_vec;
    const uint32_t nv = a.nvec - v0 < a.tile_vec ? a.nvec - v0 : a.tile_vec;
    const uint32_t bytes = nv * 16;
    kevo_mbar_expect_tx(bar, bytes * (uint32_t)a.world);
    for (int s = 0; s < a.world; s++)
        kevo_tma_load(buf + (size_t)s * a.tile_vec * 16, a.src[s] + (uint64_t)v0 * 16, bytes, bar);
}

__global__ void __launch_bounds__(THREADS, 1) reducescatter_tma(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    extern __shared__ __align__(128) char smem[];
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem);
    char *stage0 = smem + kHeader;
    const size_t stage_bytes = (size_t)a.world * a.tile_vec * 16;

    if (a.bulk && threadIdx.x == 0) {
        for (int k = 0; k < STAGES; k++)
            kevo_mbar_init(&bars[k], 1);
        kevo_fence_mbar_init();
    }

    kevo_cta_barrier(p, 0); // start: every rank's x holds this call's values (and the
                            // mbarrier inits are visible to the CTA)

    const int64_t stride = (int64_t)gridDim.x * THREADS;
    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    int64_t done = 0; // elements summed by the bulk path
    if (a.bulk) {
        const uint32_t b = blockIdx.x, G = gridDim.x;
        const uint32_t mine = a.ntiles > b ? (a.ntiles - b - 1) / G + 1 : 0;
        if (threadIdx.x == 0) {
            kevo_fence_proxy_async_global(); // acquired peer data, read by the async proxy
            const uint32_t pro = mine < STAGES - 1 ? mine : STAGES - 1;
            for (uint32_t m = 0; m < pro; m++)
                issue_tile(a, stage0 + (size_t)m * stage_bytes, &bars[m], b + m * G);
        }
        for (uint32_t n = 0; n < mine; n++) {
            // the tile STAGES-1 ahead goes into the buffer that tile n-1 used (freed by the
            // __syncthreads() at the end of the previous iteration)
            const uint32_t m = n + STAGES - 1;
            if (threadIdx.x == 0 && m < mine)
                issue_tile(a, stage0 + (size_t)(m % STAGES) * stage_bytes, &bars[m % STAGES],
                           b + m * G);
            const uint32_t k = n % STAGES;
            kevo_mbar_wait(&bars[k], (n / STAGES) & 1);
            sum_tile_w(a, reinterpret_cast<const uint4 *>(stage0 + (size_t)k * stage_bytes),
                       b + n * G);
            __syncthreads(); // every thread is done reading stage k before it is reloaded
        }
        done = (int64_t)a.nvec * 8;
    }
    // the tail after the last whole vector, or everything when a pointer is misaligned
    for (int64_t e = done + tid; e < a.c; e += stride) {
        float acc = __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(a.src[0])[e]);
        for (int s = 1; s < a.world; s++)
            acc += __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(a.src[s])[e]);
        a.y[e] = __float2bfloat16_rn(acc);
    }

    kevo_cta_barrier(p, 1); // end: no rank reads this rank's x after this
    kevo_epoch_end(p);
}

int check_tensors(const kevo_ctx *ctx, const char **why)
{
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS) {
        *why = "bad context (tensors or world)";
        return -1;
    }
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel * W) {
        *why = "expected bf16 x of N and y of N/W elements";
        return -1;
    }
    if (y->numel / 8 >= ((int64_t)1 << 31)) {
        *why = "too many elements for 32-bit vector indices";
        return -1;
    }
    return 0;
}

} // namespace

constexpr const char *kWho = "reducescatter/tma";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    const int W = ctx->world;
    const size_t smem = smem_bytes(W, max_tile_vec(W));
    const cudaError_t e = cudaFuncSetAttribute(
        reducescatter_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return kevo_fail(kWho, "%zu bytes of shared memory: %s", smem, cudaGetErrorString(e));
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)reducescatter_tma, THREADS, smem, INT_MAX, &per_sm) !=
        0)
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
    const int64_t c = y->numel;

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.y = (__nv_bfloat16 *)y->ptr;
    a.c = c;
    a.world = W;
    bool bulk = kevo_aligned16(y->ptr);
    for (int s = 0; s < W; s++) {
        a.src[s] = (const char *)x->peer[s] + (int64_t)r * c * 2;
        bulk = bulk && kevo_aligned16(a.src[s]);
    }
    a.bulk = bulk;
    a.p = kevo_pads_of(ctx);

    // Tiles and grid from C, W and the SM count only: the same on every rank.
    a.nvec = (uint32_t)(c / 8);
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t want = kevo_clamp_grid(CTAS, st->max_grid < pad_limit ? st->max_grid : pad_limit);
    uint32_t tile = max_tile_vec(W);
    // small sizes: smaller tiles, so that every CTA gets one
    const uint32_t even = (uint32_t)((a.nvec + want - 1) / want);
    if (even < tile)
        tile = even > kMinTileVec ? even : (kMinTileVec < tile ? kMinTileVec : tile);
    a.tile_vec = tile;
    a.ntiles = (a.nvec + tile - 1) / tile;
    const int64_t grid = kevo_clamp_grid(a.ntiles, want);
    const size_t smem = smem_bytes(W, tile);
    reducescatter_tma<<<(unsigned)grid, THREADS, smem, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
