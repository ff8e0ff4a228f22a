// broadcast/tma.cu — broadcast (bf16, root 0) in one kernel with bulk asynchronous copies (TMA):
// one thread per CTA loads chunks of x_0 into shared memory (cp.async.bulk global -> shared,
// from rank 0 through the symmetric window, completing on an mbarrier) and stores them from
// there into one or several ranks' y (cp.async.bulk shared -> global), STAGES chunks in flight.
//
// Roles (from W and TREE only):
//  - rank 0 copies x_0 into its own y (local load, local store);
//  - W = 2 or TREE = 0: rank q ≥ 1 pulls all of x_0 into its own y;
//  - W > 2 and TREE = 1: the 16-byte body of x_0 is cut into W - 1 slices; rank q ≥ 1 loads
//    slice q - 1 from rank 0 and stores each chunk into the y of every rank ≥ 1 (its own first):
//    rank 0 sends each byte once and every rank receives 2N, the roofline's traffic, in one
//    kernel with no barrier between the two hops (the chunk goes from shared memory straight to
//    all destinations).
//  The elements after the last whole vector (N % 8) are copied by every rank into its own y with
//  plain loads of x_0; a pointer off 16 bytes sends everything down that plain path.
//
// What one call does, in one kernel on ctx->stream:
//  1. Thread 0 initialises STAGES mbarriers (count 1) and fences their init.
//  2. Start barrier (kevo_cta_barrier phase 0): x_0 is ready and every y may be written. Thread
//     0 fences the async proxy (fence.proxy.async.global) after the acquire.
//  3. Pipeline in thread 0 over the chunks b, b + G, ... of this rank's range: loads for the first
//     STAGES chunks at once; for chunk k wait on its stage's mbarrier (parity (k / STAGES) & 1),
//     issue the bulk stores, commit one group, then refill the stage of chunk k - 1 once every
//     group but the newest has finished reading shared memory (wait_group.read 1).
//  4. Thread 0: wait_group 0 (all stores landed), fence.proxy.async.global, fence.acq_rel.sys;
//     then the end barrier (phase 1): after it, every rank has finished reading x_0 and writing
//     into this rank's y.
//
// Why it should be fast: a handful of SMs with one issuing thread each keep STAGES × CHUNK bytes
// in flight per CTA; at W = 2 rank 1's pull is link-bound (562 µs floor at 256 MiB, NCCL takes
// 796 µs) and rank 0's local copy overlaps it; at W > 2 the split keeps every link at 2N.
//
// Synchronisation: flags are slots [phase][cta][source rank] of the signal pad holding the
// launch's epoch (the device's: kevo_epoch_begin / kevo_epoch_end, so a call replayed from a
// CUDA graph gets a new one), release/acquire at .sys scope, never reset, waits bounded (5 s,
// then __trap). Same grid on every rank (from N, W, the SM count and the occupancy), all CTAs
// co-resident (dynamic shared memory included in the occupancy query).
//
// kevo:pattern problem=broadcast transport=tma fusion=fused
// kevo:param STAGES default=3 range=2..4
// kevo:param CHUNK_KB default=16 values=4,8,16,32
// kevo:param CTAS default=32 values=8,16,32,64,132
// kevo:param TREE default=1 values=0,1
#define STAGES 3
#define CHUNK_KB 16
#define CTAS 32
#define TREE 1

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

constexpr const char *kWho = "broadcast/tma";
constexpr int kThreads = 128;
constexpr uint32_t kChunk = (uint32_t)CHUNK_KB * 1024u; // bytes per stage
constexpr size_t kSmem = (size_t)STAGES * kChunk;

struct Args {
    const uint16_t *x0;          // rank 0's x (bf16 bits), through the window
    uint16_t *y[KEVO_MAX_RANKS]; // every rank's y (y[rank] is this rank's)
    int64_t n;                   // elements
    int vector;                  // x_0 and every y 16-byte aligned
    kevo_pads pads;
};

struct State {
    int occupancy;
};

__device__ __forceinline__ void fence_acq_rel_sys()
{
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

// The body byte range [lo, hi) of this rank and how many y it goes to.
__device__ __forceinline__ void my_range(const Args &a, int64_t &lo, int64_t &hi, int &fanout)
{
    const int W = a.pads.world, me = a.pads.rank;
    const int64_t nvec = a.vector ? a.n >> 3 : 0;
    if (me == 0 || W <= 2 || !TREE) {
        lo = 0;
        hi = nvec * 16;
        fanout = 1;
    } else {
        lo = nvec * (me - 1) / (W - 1) * 16;
        hi = nvec * me / (W - 1) * 16;
        fanout = W - 1;
    }
}

__global__ void __launch_bounds__(kThreads) broadcast_tma(const __grid_constant__ Args a)
{
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ uint64_t bar[STAGES];
    const kevo_pads p = kevo_epoch_begin(a.pads);
    const int W = p.world, me = p.rank;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++)
            kevo_mbar_init(&bar[s], 1);
        kevo_fence_mbar_init();
    }
    kevo_cta_barrier(p, 0); // start (its __syncthreads() also publishes the mbarriers)

    const int64_t t = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    const int64_t nt = (int64_t)gridDim.x * kThreads;

    if (threadIdx.x == 0) {
        int64_t lo, hi;
        int fanout;
        my_range(a, lo, hi, fanout);
        kevo_fence_proxy_async_global(); // bulk copies after the acquire of the barrier
        const uint8_t *src = reinterpret_cast<const uint8_t *>(a.x0) + lo;
        const int64_t body = hi - lo;
        const int64_t nchunks = (body + kChunk - 1) / kChunk;
        const int64_t kc =
            nchunks > (int64_t)blockIdx.x ? (nchunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
        int64_t kl = 0;
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
            for (int j = 0; j < fanout; j++) { // j = 0 is this rank; then the others ≥ 1
                int p = me + j;
                if (p >= W)
                    p -= W - 1;
                kevo_tma_store(reinterpret_cast<uint8_t *>(a.y[p]) + lo + pos, smem + st * kChunk,
                               bytes);
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
    // the elements after the last whole vector (all of them when not vectorised), into this y
    const int64_t nvec = a.vector ? a.n >> 3 : 0;
    for (int64_t e = nvec * 8 + t; e < a.n; e += nt)
        a.y[me][e] = a.x0[e];

    if (threadIdx.x == 0) {
        kevo_tma_wait_all();             // every bulk store has landed
        kevo_fence_proxy_async_global(); // ordered before the generic-proxy release below
        fence_acq_rel_sys();
    }
    kevo_cta_barrier(p, 1); // end: x_0 read and every write into this y done
    kevo_epoch_end(p);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    const cudaError_t e = cudaFuncSetAttribute(
        broadcast_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmem);
    if (e != cudaSuccess)
        return kevo_fail(kWho, "%zu bytes of shared memory: %s", kSmem, cudaGetErrorString(e));
    return kevo_ctas_per_sm(kWho, (const void *)broadcast_tma, kThreads, kSmem, INT_MAX,
                            &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    if (!st)
        return 1;
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context (world %d)", W);
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != n)
        return kevo_fail(kWho, "expected bf16 x and y of N elements");

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.x0 = (const uint16_t *)x->peer[0];
    a.n = n;
    a.pads = kevo_pads_of(ctx);
    int vector = (uintptr_t)x->peer[0] % 16 == 0;
    for (int q = 0; q < W; q++) {
        a.y[q] = (uint16_t *)y->peer[q];
        vector = vector && (uintptr_t)y->peer[q] % 16 == 0;
    }
    a.vector = vector;

    // The same grid on every rank: from the bytes one rank ≥ 1 loads, N and W only.
    const int64_t per_rank = n * 2 / (W > 2 && TREE ? W - 1 : 1);
    int64_t most = (int64_t)st->occupancy * ctx->sm_count;
    if (most > CTAS)
        most = CTAS;
    const int64_t pad_limit = kevo_pads_max_ctas(a.pads, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "no grid fits (pad %lld CTAs)", (long long)pad_limit);
    const int64_t grid =
        kevo_clamp_grid((per_rank + kChunk - 1) / kChunk, most < pad_limit ? most : pad_limit);

    broadcast_tma<<<(unsigned)grid, kThreads, kSmem, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
