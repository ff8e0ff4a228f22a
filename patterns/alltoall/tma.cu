// tma.cu — all-to-all (bf16, equal chunks) in one kernel moved by TMA bulk copies: each CTA
// bulk-loads tiles into shared memory (completion on an mbarrier) and bulk-stores them to their
// destination. PUSH = 0 pulls (load from a peer's x, store into this rank's y); PUSH = 1 pushes
// (load from this rank's x, store into a peer's y).
//
// What one call does (one kernel on ctx->stream, the same grid on every rank), C = N/W:
//  1. Prologue: lane 0 of warp 0 initialises one mbarrier per stage (fence.mbarrier_init).
//  2. Start barrier (kevo_cta_barrier, phase 0): every peer has entered this call, so its x
//     holds this call's values and its y may be written. The issuing thread then fences the
//     async proxy (fence.proxy.async.global) before its first bulk copy (kevo_tma.cuh).
//  3. Pipeline (lane 0 of warp 0). Chunk s goes from src[s] to dst[s]: pull: x_s[r*C ..] ->
//     y_r[s*C ..]; push: x_r[s*C ..] -> y_s[r*C ..]; the own chunk is a local copy. Chunks
//     whose two pointers are 16-byte aligned (all of them at every timed size) are cut into
//     tiles of T vectors; tile k belongs to chunk list[k mod n] (the list starts at chunk r, so
//     at any moment the ranks stream from, or to, different peers) and CTA b takes tiles b,
//     b + G, ... STAGES shared-memory buffers with one mbarrier each: STAGES-1 bulk loads are in
//     flight while the oldest buffer is bulk-stored, and a buffer is reloaded only after the
//     bulk store that read it has finished reading (cp.async.bulk.wait_group.read 1). Data goes
//     global -> shared -> global entirely in the async proxy; no thread touches it.
//  4. Meanwhile the other warps copy with ordinary loads and stores what bulk copies cannot:
//     the elements after the last whole vector of each aligned chunk, and whole chunks whose
//     offsets are not 16-byte aligned (the validation size: C = 400012 / 200006 / 100003;
//     one bf16 at a time, slow, correct; that size is not timed).
//  5. The issuing thread waits for all of its bulk stores to complete (wait_group 0) and fences
//     the async proxy (fence.proxy.async.global) so that the end barrier's release publishes
//     pushed data; then the end barrier (phase 1): once CTA b of every rank has passed it,
//     nobody reads this rank's x or writes its y any more.
//
// Why it should be fast: one thread per CTA issues several-KiB bulk requests, with tens of KiB
// in flight per SM, so a few dozen SMs keep NVLink busy at the link rate (the aim is the copy
// engine's ~397 GB/s or better, against SM loads' ~370 GB/s): (W-1)/W * 2N bytes each way, the
// own chunk copied in the same pass (NCCL: 391 us at 256 MiB, W = 2). Small sizes: tiles
// shrink to give every CTA about one tile: one launch, two barriers and one load + store.
//
// Synchronisation: peers' x are read and peers' y written only between the two barriers (after
// the proxy fence, and before the completion wait + proxy fence + release). Barrier flags are
// words [phase][cta][rank] of the signal pad holding epochs, st.release.sys / ld.acquire.sys,
// never reset; flag and mbarrier waits give up after 5 s with __trap(). The epoch is the
// device's (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as
// correct as one made from the host.
//
// kevo:pattern problem=alltoall transport=tma fusion=fused
// kevo:param TILE_BYTES default=16384 values=4096,8192,16384,32768,65536
// kevo:param STAGES default=4 values=2,3,4,6,8
// kevo:param CTAS default=64 values=16,32,64,96,132,264
// kevo:param PUSH default=0 values=0,1
#define TILE_BYTES 16384
#define STAGES 4
#define CTAS 64
#define PUSH 0

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

constexpr const char *kWho = "alltoall/tma";

static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert(TILE_BYTES % 16 == 0, "bulk copies move multiples of 16 bytes");

constexpr int kThreads = 128;        // warp 0 lane 0: the pipeline; warps 1..3: plain copies
constexpr int kHeader = 128;         // mbarriers, before the stage buffers
constexpr int kSmemMax = 200 * 1024; // dynamic shared memory we allow ourselves
constexpr uint32_t kMinTileVec = 64; // 1 KiB: the smallest tile at small sizes

struct Args {
    const char *src[KEVO_MAX_RANKS]; // chunk s: from (bytes)
    char *dst[KEVO_MAX_RANKS];       // chunk s: to
    int64_t c;                       // elements per chunk
    uint32_t nvec;                   // whole vectors per chunk
    uint32_t tile_vec;               // vectors per tile
    uint32_t tpc;                    // tiles per chunk
    uint32_t n_bulk;                 // chunks on the bulk path
    uint8_t list[KEVO_MAX_RANKS];    // those chunks, from chunk `rank` on
    uint32_t bulk_mask;              // bit s: chunk s on the bulk path
    int world, rank;
    kevo_pads p;
};

struct State {
    int max_grid;
};

size_t smem_bytes(uint32_t tile_vec)
{
    return (size_t)kHeader + (size_t)STAGES * tile_vec * 16;
}

uint32_t max_tile_vec()
{
    uint32_t t = TILE_BYTES / 16;
    while (t > 1 && smem_bytes(t) > (size_t)kSmemMax)
        t /= 2;
    return t;
}

struct Tile {
    const char *src;
    char *dst;
    uint32_t bytes;
};

__device__ __forceinline__ Tile tile_of(const Args &a, uint32_t k)
{
    const uint32_t t = k / a.n_bulk, m = k - t * a.n_bulk;
    const int s = a.list[m];
    const uint32_t v0 = t * a.tile_vec;
    const uint32_t nv = a.nvec - v0 < a.tile_vec ? a.nvec - v0 : a.tile_vec;
    Tile x;
    x.src = a.src[s] + (uint64_t)v0 * 16;
    x.dst = a.dst[s] + (uint64_t)v0 * 16;
    x.bytes = nv * 16;
    return x;
}

// Lane 0 of warp 0: tiles b, b + G, ... through STAGES buffers.
__device__ void pipeline(const Args &a, char *buf, uint64_t *bar)
{
    const uint32_t ntiles = a.n_bulk * a.tpc;
    const uint32_t b = blockIdx.x, G = gridDim.x;
    const uint32_t mine = ntiles > b ? (ntiles - b - 1) / G + 1 : 0;
    const size_t tile_bytes = (size_t)a.tile_vec * 16;
    auto issue = [&](uint32_t m) {
        const uint32_t k = m % STAGES;
        const Tile t = tile_of(a, b + m * G);
        kevo_mbar_expect_tx(&bar[k], t.bytes);
        kevo_tma_load(buf + k * tile_bytes, t.src, t.bytes, &bar[k]);
    };
    const uint32_t pro = mine < STAGES - 1 ? mine : STAGES - 1;
    for (uint32_t m = 0; m < pro; m++)
        issue(m);
    for (uint32_t n = 0; n < mine; n++) {
        const uint32_t k = n % STAGES;
        kevo_mbar_wait(&bar[k], (n / STAGES) & 1);
        const Tile t = tile_of(a, b + n * G);
        kevo_tma_store(t.dst, buf + k * tile_bytes, t.bytes);
        kevo_tma_commit();
        const uint32_t m = n + STAGES - 1; // goes into the buffer tile n-1 used
        if (m < mine) {
            kevo_tma_wait_read<1>(); // the store of tile n-1 has read its buffer
            issue(m);
        }
    }
    kevo_tma_wait_all();             // every bulk store of this CTA is complete ...
    kevo_fence_proxy_async_global(); // ... and ordered before the end barrier's release
}

// Warps 1..: what the bulk copies do not move, with ordinary loads and stores.
__device__ void plain_copies(const Args &a)
{
    constexpr int kWorkers = kThreads - 32;
    const int64_t stride = (int64_t)gridDim.x * kWorkers;
    const int64_t tid = (int64_t)blockIdx.x * kWorkers + (threadIdx.x - 32);
    const int64_t c = a.c;
    for (int j = 0; j < a.world; j++) {
        const int s = (a.rank + j) % a.world;
        const __nv_bfloat16 *src = reinterpret_cast<const __nv_bfloat16 *>(a.src[s]);
        __nv_bfloat16 *dst = reinterpret_cast<__nv_bfloat16 *>(a.dst[s]);
        const int64_t from = ((a.bulk_mask >> s) & 1u) ? (int64_t)a.nvec * 8 : 0;
        for (int64_t e = from + tid; e < c; e += stride)
            dst[e] = src[e];
    }
}

__global__ void __launch_bounds__(kThreads, 1) alltoall_tma(const __grid_constant__ Args a)
{
    extern __shared__ __align__(128) char smem[];
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem);
    const kevo_pads p = kevo_epoch_begin(a.p);

    if (threadIdx.x == 0 && a.n_bulk) {
        for (int k = 0; k < STAGES; k++)
            kevo_mbar_init(&bars[k], 1);
        kevo_fence_mbar_init();
    }

    kevo_cta_barrier(p, 0); // start: peers' x hold this call's values, their y is writable

    if (threadIdx.x < 32) {
        if (threadIdx.x == 0 && a.n_bulk) {
            kevo_fence_proxy_async_global(); // acquired peer data, accessed by the async proxy
            pipeline(a, smem + kHeader, bars);
        }
        __syncwarp();
    } else {
        plain_copies(a);
    }

    kevo_cta_barrier(p, 1); // end: nobody reads this rank's x or writes its y after this
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
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel ||
        x->numel % W != 0) {
        *why = "expected bf16 x and y of N elements, N a multiple of W";
        return -1;
    }
    if (x->numel / 8 >= ((int64_t)1 << 31)) {
        *why = "too many elements for 32-bit tile indices";
        return -1;
    }
    return 0;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    const size_t smem = smem_bytes(max_tile_vec());
    cudaError_t e =
        cudaFuncSetAttribute(alltoall_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return kevo_fail(kWho, "%zu bytes of shared memory: %s", smem, cudaGetErrorString(e));
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)alltoall_tma, kThreads, smem, INT_MAX, &per_sm) != 0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const char *why = NULL;
    if (!st)
        return 1;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t c = x->numel / W;

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.c = c;
    a.world = W;
    a.rank = r;
    a.nvec = (uint32_t)(c / 8);
    for (int s = 0; s < W; s++) {
        if (PUSH) {
            a.src[s] = (const char *)x->ptr + (int64_t)s * c * 2;
            a.dst[s] = (char *)y->peer[s] + (int64_t)r * c * 2;
        } else {
            a.src[s] = (const char *)x->peer[s] + (int64_t)r * c * 2;
            a.dst[s] = (char *)y->ptr + (int64_t)s * c * 2;
        }
    }
    a.n_bulk = 0;
    a.bulk_mask = 0;
    for (int j = 0; j < W && a.nvec > 0; j++) {
        const int s = (r + j) % W;
        if (kevo_aligned16(a.src[s]) && kevo_aligned16(a.dst[s])) {
            a.list[a.n_bulk++] = (uint8_t)s;
            a.bulk_mask |= 1u << s;
        }
    }
    a.p = kevo_pads_of(ctx);

    // Tiles and grid from C, W and the SM count only: the same on every rank.
    int64_t want = CTAS;
    if (want > st->max_grid)
        want = st->max_grid;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    if (want > pad_limit)
        want = pad_limit;
    uint32_t tile = max_tile_vec();
    const int64_t all_vec = (int64_t)W * a.nvec;
    const uint32_t even = (uint32_t)((all_vec + want - 1) / want); // about one tile per CTA
    if (even < tile)
        tile = even > kMinTileVec ? even : (kMinTileVec < tile ? kMinTileVec : tile);
    a.tile_vec = tile;
    a.tpc = (a.nvec + tile - 1) / tile;
    const int64_t tiles_all = (int64_t)W * a.tpc;
    const int64_t grid = kevo_clamp_grid(tiles_all, want);
    alltoall_tma<<<(unsigned)grid, kThreads, smem_bytes(tile), ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
