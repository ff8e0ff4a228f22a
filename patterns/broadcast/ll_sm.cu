// broadcast/ll_sm.cu — broadcast (bf16, root 0) for the latency-bound sizes with the LL protocol
// (kevo_ll.cuh): rank 0 stores every 4-byte word of its x, with the launch's epoch, into every
// peer's receive buffer; the peers poll their buffer and write y. No barrier.
//
// What one call does, in one kernel on ctx->stream (the same grid on every rank):
//  Rank 0: CTA b first waits until CTA b of every peer has acknowledged launch e - 2 (the last
//  launch that used this parity's buffer), then thread t stores words t, t + T, ... into every
//  peer's buffer and into its own y.
//  Peers: thread t polls its words (bounded, then __trap) and writes them into y; after its
//  last word, CTA b acknowledges the launch: flag [b][q] of rank 0's pad := epoch (release).
// Unlike all-gather, the root receives nothing, so without the acknowledgement it could run two
// launches ahead and overwrite a buffer a slow peer still reads. The wait is for launch e - 2,
// long finished in steady state: it costs one flag load, not a round trip.
// The epoch e and the buffer's parity (e & 1) are the device's (kevo_epoch_begin /
// kevo_epoch_end: one launch per call on every rank, so they agree across ranks), chosen in the
// kernel: a call replayed from a CUDA graph gets new ones. LL words carry e's low 32 bits, the
// acknowledgements all 64.
//
// Above LL_MAX_KIB per rank, or when the scratch cannot hold the buffers: start barrier, the
// peers pull x_0 word by word, end barrier (correct, not fast; pull_sm is the large-size seed).
//
// kevo:pattern problem=broadcast transport=sm fusion=fused
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

constexpr const char *kWho = "broadcast/ll_sm";

struct Args {
    const uint16_t *x0; // rank 0's x (through the window)
    const uint16_t *x;  // this rank's x
    uint16_t *y;        // this rank's y
    int64_t n, words;
    kevo_ll_bufs bufs; // [parity][word] on every rank: rank 0's words
    int ll;
    kevo_pads pads;
};

struct State {
    int ll, occupancy;
    kevo_ll_bufs bufs; // one row: rank 0's words
};

__device__ __forceinline__ void exchange_ll(const Args &a, const kevo_pads &p)
{
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = p.world;
    const uint32_t epoch = (uint32_t)p.epoch;
    if (p.rank == 0) {
        if (p.epoch > 2 && threadIdx.x > 0 && threadIdx.x < (unsigned)W)
            kevo_wait_flag(p.mine + (uint64_t)blockIdx.x * W + threadIdx.x, p.epoch - 2);
        __syncthreads();
        for (int64_t i = t; i < a.words; i += nt) {
            const uint32_t w = kevo_ll_word(a.x, a.n, i);
            for (int q = 1; q < W; q++)
                kevo_ll_store(kevo_ll_send(a.bufs, p.epoch, q, 0) + i, epoch, w);
            kevo_ll_put(a.y, a.n, i, w);
        }
        return;
    }
    const uint64_t *recv = kevo_ll_recv(a.bufs, p.epoch);
    for (int64_t i = t; i < a.words; i += nt)
        kevo_ll_put(a.y, a.n, i, kevo_ll_load(recv + i, epoch));
    __syncthreads(); // every thread of the CTA is done with this parity's buffer
    if (threadIdx.x == 0)
        kevo_store_release_sys(p.peer[0] + (uint64_t)blockIdx.x * W + p.rank, p.epoch);
}

__device__ __forceinline__ void pull_words(const Args &a, const kevo_pads &p)
{
    kevo_cta_barrier(p, 0); // rank 0's x is ready
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (((uintptr_t)a.x0 & 3u) == 0)
        for (int64_t i = t; i < a.words; i += nt)
            kevo_ll_put(a.y, a.n, i, kevo_ll_word(a.x0, a.n, i));
    else
        for (int64_t e = t; e < a.n; e += nt)
            a.y[e] = a.x0[e];
    kevo_cta_barrier(p, 1); // nobody reads rank 0's x any more
}

__global__ void __launch_bounds__(THREADS) broadcast_ll(const Args a)
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
    st->ll = kevo_ll_alloc(ctx, kWho, 2 * n, (int64_t)LL_MAX_KIB * 1024, 1, (n + 1) / 2, &st->bufs);
    if (st->ll < 0)
        return 1;
    return kevo_ctas_per_sm(kWho, (const void *)broadcast_ll, THREADS, 0, INT_MAX, &st->occupancy);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return kevo_fail(kWho, "bad context (no tensors)");
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel != n ||
        (n + 1) / 2 != st->bufs.words)
        return kevo_fail(kWho, "expected bf16 x and y of N elements");
    Args a = {};
    a.x0 = (const uint16_t *)x->peer[0];
    a.x = (const uint16_t *)x->ptr;
    a.y = (uint16_t *)y->ptr;
    a.n = n;
    a.words = st->bufs.words;
    a.pads = kevo_pads_of(ctx);
    a.ll = st->ll;
    a.bufs = st->bufs; // the kernel picks the parity from its epoch
    // The same grid on every rank, all of it resident, within the pad (acks or barriers).
    const int64_t most = (int64_t)st->occupancy * ctx->sm_count;
    const int64_t pads = kevo_pads_max_ctas(a.pads, 2);
    const int64_t grid = kevo_ll_grid(a.words, THREADS, most < pads ? most : pads);
    if (grid < 1)
        return kevo_fail(kWho, "no grid fits");
    broadcast_ll<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
