// allgather/tma.cu — all-gather (bf16) in one kernel with bulk asynchronous copies (TMA): every
// rank pushes its own shard into every rank's y. One thread per CTA loads a chunk of the local x
// into shared memory (cp.async.bulk global -> shared, completing on an mbarrier) and stores it
// from there into the y of every rank at this rank's shard offset (cp.async.bulk shared ->
// global, to peers through the symmetric window), STAGES chunks in flight per CTA.
//
// What one call does, in one kernel on ctx->stream:
//  1. Thread 0 initialises STAGES mbarriers (count 1) and fences their init.
//  2. Start barrier (kevo_cta_barrier phase 0): every rank has entered the call, so its y may be
//     written (the caller is done with it). Thread 0 then fences the async proxy
//     (fence.proxy.async.global) so that its bulk copies are ordered after the acquire.
//  3. Pipeline (thread 0 of each CTA; the CTA owns chunks b, b + G, b + 2G, ... of the shard's
//     16-byte body): loads for the first STAGES chunks are issued at once; for chunk k it waits
//     on stage k % STAGES's mbarrier (parity (k / STAGES) & 1), issues W bulk stores of the
//     chunk (rank + 1 first, its own y last) and commits them as one bulk group; it then refills
//     the stage of chunk k - 1 with chunk k - 1 + STAGES once every group but the newest has
//     finished reading shared memory (cp.async.bulk.wait_group.read 1). The other threads copy
//     the tail (N % 8 elements) with plain stores.
//     When this rank's shard offset 2·rank·N in y is not 16-byte aligned (odd N, the validation
//     size), bulk copies cannot reach it: the whole shard goes out with plain 16-byte stores
//     aligned on y (each assembled from 2- or 4-byte loads of the local x) and scalar head and
//     tail, by all threads of the grid.
//  4. Thread 0 waits for all of its bulk groups to complete (wait_group 0), fences the async
//     proxy (fence.proxy.async.global) and issues a fence.acq_rel.sys; then the end barrier
//     (phase 1): its release follows the __syncthreads() after those fences and after every
//     thread's plain stores, so when every CTA of this rank has passed it, every rank's writes
//     into this rank's y are complete and visible.
//
// Why it should be fast: few SMs move the data (CTAS CTAs, one issuing thread each), the local
// x is read once for all W destinations, and peer writes are posted (no round trip per load as a
// pull has). For 16–256 MiB the link is the bound (~478 GB/s per direction at W = 2, 562 µs at
// 256 MiB); NCCL's ring takes 1158 µs there. Small sizes pay one barrier round trip and the
// load-then-store latency of one chunk.
//
// Synchronisation: flags are slots [phase][cta][source rank] of the signal pad holding epochs,
// release/acquire at .sys scope, never reset, waits bounded (5 s, then __trap). The epoch is
// the device's (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as
// correct as one made from the host. The grid is the same on every rank (from N, W, the SM count and the occupancy), all
// CTAs co-resident (dynamic shared memory included in the occupancy query).
//
// kevo:pattern problem=allgather transport=tma fusion=fused
// kevo:param STAGES default=3 range=2..4
// kevo:param CHUNK_KB default=16 values=4,8,16,32
// kevo:param CTAS default=32 values=8,16,32,64,132
#define STAGES 3
#define CHUNK_KB 16
#define CTAS 32

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_tma.cuh"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 128;
constexpr uint32_t kChunk = (uint32_t)CHUNK_KB * 1024u; // bytes per stage
constexpr size_t kSmem = (size_t)STAGES * kChunk;

struct Args {
    const uint16_t *x;           // this rank's x (bf16 bits)
    uint16_t *y[KEVO_MAX_RANKS]; // every rank's y (y[rank] is this rank's)
    int64_t n;                   // elements per shard
    int tma;                     // x and this rank's shard in every y are 16-byte aligned
    kevo_pads pads;
};

struct State {
    int occupancy;
};

// dst[0, n) = src[0, n) over the threads t of nt: 16-byte stores aligned on dst (the remote
// side), each assembled from loads of src (local) as wide as its alignment allows.
__device__ __forceinline__ void copy_push(uint16_t *dst, const uint16_t *src, int64_t n, int64_t t,
                                          int64_t nt)
{
    if ((uintptr_t)dst & 1u) {
        for (int64_t e = t; e < n; e += nt)
            dst[e] = src[e];
        return;
    }
    int64_t head = (int64_t)(((16u - ((unsigned)(uintptr_t)dst & 15u)) & 15u) >> 1);
    if (head > n)
        head = n;
    for (int64_t e = t; e < head; e += nt)
        dst[e] = src[e];
    const int64_t nv = (n - head) >> 3;
    uint4 *d4 = reinterpret_cast<uint4 *>(dst + head);
    const uint16_t *s = src + head;
    const unsigned smis = (unsigned)(uintptr_t)s & 15u;
    if (smis == 0) {
        const uint4 *s4 = reinterpret_cast<const uint4 *>(s);
        for (int64_t i = t; i < nv; i += nt)
            d4[i] = s4[i];
    } else if ((smis & 3u) == 0) {
        for (int64_t i = t; i < nv; i += nt) {
            const uint32_t *s32 = reinterpret_cast<const uint32_t *>(s + 8 * i);
            d4[i] = make_uint4(s32[0], s32[1], s32[2], s32[3]);
        }
    } else {
        for (int64_t i = t; i < nv; i += nt) {
            const uint16_t *s16 = s + 8 * i;
            d4[i] = make_uint4((uint32_t)s16[0] | (uint32_t)s16[1] << 16,
                               (uint32_t)s16[2] | (uint32_t)s16[3] << 16,
                               (uint32_t)s16[4] | (uint32_t)s16[5] << 16,
                               (uint32_t)s16[6] | (uint32_t)s16[7] << 16);
        }
    }
    for (int64_t e = head + nv * 8 + t; e < n; e += nt)
        dst[e] = src[e];
}

__device__ __forceinline__ void fence_acq_rel_sys()
{
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

__global__ void __launch_bounds__(kThreads) allgather_tma_push(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ uint64_t bar[STAGES];
    const int W = p.world, me = p.rank;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++)
            kevo_mbar_init(&bar[s], 1);
        kevo_fence_mbar_init();
    }
    kevo_cta_barrier(p, 0); // start (its __syncthreads() also publishes the mbarriers)

    const int64_t off = (int64_t)me * a.n; // this rank's shard in every y, elements
    const int64_t t = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    const int64_t nt = (int64_t)gridDim.x * kThreads;

    if (a.tma) {
        const int64_t body = (a.n >> 3) << 4; // bytes of whole 16-byte vectors
        if (threadIdx.x == 0) {
            kevo_fence_proxy_async_global(); // bulk copies after the acquire of the barrier
            const uint8_t *src = reinterpret_cast<const uint8_t *>(a.x);
            const int64_t nchunks = (body + kChunk - 1) / kChunk;
            const int64_t kc = nchunks > (int64_t)blockIdx.x
                                   ? (nchunks - blockIdx.x + gridDim.x - 1) / gridDim.x
                                   : 0;
            int64_t kl = 0; // chunks loaded so far (local index)
            for (; kl < STAGES && kl < kc; kl++) {
                const int64_t pos = ((int64_t)blockIdx.x + kl * gridDim.x) * kChunk;
                const uint32_t bytes = (uint32_t)(body - pos < kChunk ? body - pos : kChunk);
                kevo_mbar_expect_tx(&bar[kl], bytes);
                kevo_tma_load(smem + kl * kChunk, src + pos, bytes, &bar[kl]);
            }
            for (int64_t k = 0; k < kc; k++) {
                const int st = (int)(k % STAGES);
                kevo_mbar_wait(&bar[st], (uint32_t)((k / STAGES) & 1));
                const int64_t pos = ((int64_t)blockIdx.x + k * gridDim.x) * kChunk;
                const uint32_t bytes = (uint32_t)(body - pos < kChunk ? body - pos : kChunk);
                for (int j = 1; j <= W; j++) {
                    int q = me + j;
                    if (q >= W)
                        q -= W;
                    kevo_tma_store(reinterpret_cast<uint8_t *>(a.y[q] + off) + pos,
                                   smem + st * kChunk, bytes);
                }
                kevo_tma_commit();
                if (k >= 1 && kl < kc) { // refill the stage of chunk k - 1 with chunk kl
                    kevo_tma_wait_read<1>();
                    const int rs = (int)((k - 1) % STAGES);
                    const int64_t lpos = ((int64_t)blockIdx.x + kl * gridDim.x) * kChunk;
                    const uint32_t lbytes = (uint32_t)(body - lpos < kChunk ? body - lpos : kChunk);
                    kevo_mbar_expect_tx(&bar[rs], lbytes);
                    kevo_tma_load(smem + rs * kChunk, src + lpos, lbytes, &bar[rs]);
                    kl++;
                }
            }
        }
        // the tail after the last whole vector, plain stores into every y
        for (int64_t e = (a.n >> 3) * 8 + t; e < a.n; e += nt) {
            const uint16_t v = a.x[e];
            for (int q = 0; q < W; q++)
                a.y[q][off + e] = v;
        }
    } else {
        for (int j = 1; j <= W; j++) {
            int q = me + j;
            if (q >= W)
                q -= W;
            copy_push(a.y[q] + off, a.x, a.n, t, nt);
        }
    }

    if (threadIdx.x == 0) {
        kevo_tma_wait_all();             // every bulk store has landed
        kevo_fence_proxy_async_global(); // ordered before the generic-proxy release below
        fence_acq_rel_sys();
    }
    kevo_cta_barrier(p, 1); // end: every rank's writes into this y are done
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "allgather/tma";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    const cudaError_t e = cudaFuncSetAttribute(
        allgather_tma_push, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmem);
    if (e != cudaSuccess)
        return kevo_fail(kWho, "%zu bytes of shared memory: %s", kSmem, cudaGetErrorString(e));
    return kevo_ctas_per_sm(kWho, (const void *)allgather_tma_push, kThreads, kSmem, INT_MAX,
                            &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world, me = ctx->rank;
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context (world %d)", W);
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != W * n)
        return kevo_fail(kWho, "expected bf16 x of N and y of W*N elements");

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.x = (const uint16_t *)x->ptr;
    a.n = n;
    a.pads = kevo_pads_of(ctx);
    int tma = (uintptr_t)x->ptr % 16 == 0;
    for (int q = 0; q < W; q++) {
        a.y[q] = (uint16_t *)y->peer[q];
        tma = tma && (uintptr_t)(a.y[q] + (int64_t)me * n) % 16 == 0;
    }
    a.tma = tma;

    // The same grid on every rank (from N and the limits only, never from this rank's path).
    const int64_t pad_limit = kevo_pads_max_ctas(a.pads, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "no grid fits (pad %lld CTAs)", (long long)pad_limit);
    int64_t most = (int64_t)st->occupancy * ctx->sm_count;
    most = most < pad_limit ? most : pad_limit;
    most = most < CTAS ? most : CTAS;
    const int64_t grid = kevo_clamp_grid((n * 2 + kChunk - 1) / kChunk, most);

    allgather_tma_push<<<(unsigned)grid, kThreads, kSmem, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
