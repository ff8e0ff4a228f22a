// allgather/ll_sm.cu — all-gather (bf16) for the latency-bound sizes: no barrier at all. Every
// 4-byte word of x travels to each peer inside one 8-byte store together with this launch's epoch
// (the "LL" protocol: data and flag land atomically together), so a reader knows a word has
// arrived by looking at the word itself.
//
// What one call does, in one kernel on ctx->stream:
//  1. Send. Thread t owns words i = t, t + T, ... of x (2 bf16 each). For each it stores
//     (epoch << 32 | word) into slot i of its row of every peer's receive buffer, and writes the
//     word into its own shard of y.
//  2. Receive. The same thread waits, for every peer q, until slot i of q's row in its own
//     receive buffer carries this call's epoch (bounded: 5 s, then __trap), and writes the word
//     into shard q of y.
// The receive buffers are in symmetric scratch, one per epoch parity ([parity][source rank]
// [word], 8 bytes a word): a rank writes buffer p of call c + 2 only after it has received every
// peer's words of call c + 1, which each peer sent after finishing call c, its last reader of
// buffer p. So no end barrier either: one one-way NVLink latency per call instead of two round
// trips. The epoch is the device's: the kernel takes it with kevo_epoch_begin (channel 0, one
// launch per call), stamps words with its low 32 bits and picks the buffers by its parity
// (kevo_ll_recv / kevo_ll_send), so a call replayed from a CUDA graph gets a new epoch and the
// other buffer, as one made from the host does.
//
// Above LL_MAX_KIB per rank (or when the scratch cannot hold the buffers) the LL traffic (twice
// the data) costs more than the barriers save: the call then runs a plain pull (start barrier,
// every rank's shard copied with 4-byte loads, end barrier) — correct at every size, fast only
// at the small ones; allgather/pull_sm is the seed for the large sizes.
//
// Why it should be fast at 64 KiB–1 MiB: one launch and one one-way latency. bench/launch_floor
// measured on 2 x H200 (docs/results.md): an empty kernel 4.5 us under kevo's timer, a kernel
// with one cross-GPU barrier across all CTAs 8.5 us, with two 10.9 us (the other seeds' floor).
//
// kevo:pattern problem=allgather transport=sm fusion=fused
// kevo:param THREADS default=512 values=256,512,1024
// kevo:param LL_MAX_KIB default=1024 values=64,256,1024,4096
#define THREADS 512
#define LL_MAX_KIB 1024

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_ll.cuh"
#include "kevo_sync.cuh"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "allgather/ll_sm";

struct Args {
    const uint16_t *x;                  // this rank's x
    const uint16_t *xs[KEVO_MAX_RANKS]; // every rank's x (the pull path)
    uint16_t *y;                        // this rank's y, W·N elements
    int64_t n;                          // N
    int64_t words;                      // ceil(N / 2)
    kevo_ll_bufs bufs;                  // [parity][W][words], parity chosen in the kernel
    int ll;                             // 1: the LL exchange; 0: the pull path
    kevo_pads pads;
};

struct State {
    int ll;            // the LL path is used at this size
    int occupancy;     // resident CTAs per SM of the kernel
    kevo_ll_bufs bufs; // a row per source rank
};

__device__ __forceinline__ void exchange_ll(const Args &a, const kevo_pads &p)
{
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = p.world, r = p.rank;
    const uint32_t epoch = (uint32_t)p.epoch;
    const uint64_t *recv = kevo_ll_recv(a.bufs, p.epoch); // [W][words] of this parity
    for (int64_t i = t; i < a.words; i += nt) {
        const uint32_t w = kevo_ll_word(a.x, a.n, i);
        for (int k = 1; k < W; k++)
            kevo_ll_store(kevo_ll_send(a.bufs, p.epoch, (r + k) % W, r) + i, epoch, w);
        kevo_ll_put(a.y + (int64_t)r * a.n, a.n, i, w);
    }
    for (int64_t i = t; i < a.words; i += nt) {
        for (int k = 1; k < W; k++) {
            const int q = (r + W - k) % W;
            const uint32_t w = kevo_ll_load(recv + (int64_t)q * a.words + i, epoch);
            kevo_ll_put(a.y + (int64_t)q * a.n, a.n, i, w);
        }
    }
}

// The sizes above LL_MAX_KIB: barrier, pull every shard word by word, barrier.
__device__ __forceinline__ void pull_words(const Args &a, const kevo_pads &p)
{
    kevo_cta_barrier(p, 0); // every rank's x is ready
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = p.world;
    for (int k = 0; k < W; k++) {
        const int q = (p.rank + 1 + k) % W;
        const uint16_t *src = a.xs[q];
        uint16_t *dst = a.y + (int64_t)q * a.n;
        if (((uintptr_t)src & 3u) == 0)
            for (int64_t i = t; i < a.words; i += nt)
                kevo_ll_put(dst, a.n, i, kevo_ll_word(src, a.n, i));
        else
            for (int64_t e = t; e < a.n; e += nt)
                dst[e] = src[e];
    }
    kevo_cta_barrier(p, 1); // nobody reads this rank's x any more
}

// One kernel for both paths (one launch per call either way).
__global__ void __launch_bounds__(THREADS) allgather_ll(const Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.pads);
    if (a.ll)
        exchange_ll(a, p);
    else
        pull_words(a, p);
    kevo_epoch_end(p);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    const int64_t n = kevo_param(ctx, "N", 0);
    if (W < 2 || W > KEVO_MAX_RANKS || n < 1)
        return kevo_fail(kWho, "bad context (world %d, N %lld)", W, (long long)n);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    st->ll = kevo_ll_alloc(ctx, kWho, 2 * n, (int64_t)LL_MAX_KIB * 1024, W, (n + 1) / 2, &st->bufs);
    if (st->ll < 0)
        return 1;
    return kevo_ctas_per_sm(kWho, (const void *)allgather_ll, THREADS, 0, INT_MAX, &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return kevo_fail(kWho, "bad context (no tensors)");
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != W * n ||
        (n + 1) / 2 != st->bufs.words)
        return kevo_fail(kWho, "expected bf16 x of N and y of W*N elements");
    Args a = {};
    a.x = (const uint16_t *)x->ptr;
    for (int q = 0; q < W; q++)
        a.xs[q] = (const uint16_t *)x->peer[q];
    a.y = (uint16_t *)y->ptr;
    a.n = n;
    a.words = st->bufs.words;
    a.pads = kevo_pads_of(ctx);
    a.ll = st->ll;
    if (st->ll)
        a.bufs = st->bufs;
    // The same grid on every rank, all of it resident (the pull path: within the pad too).
    const int64_t most = (int64_t)st->occupancy * ctx->sm_count;
    const int64_t pads = kevo_pads_max_ctas(a.pads, 2);
    const int64_t grid = kevo_ll_grid(a.words, THREADS, st->ll || most < pads ? most : pads);
    if (grid < 1)
        return kevo_fail(kWho, "no grid fits");
    allgather_ll<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
