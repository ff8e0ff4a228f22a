// reducescatter/ll_sm.cu — reduce-scatter (bf16, sum) for the latency-bound sizes with the LL
// protocol (kevo_ll.cuh): every rank stores each 4-byte word of block q of its x, with the
// launch's epoch, into rank q's receive buffer; every rank polls the words of its own block
// from each peer and sums. No barrier, no flags apart from the words themselves.
//
// What one call does, in one kernel on ctx->stream (the same grid on every rank), C = N/W:
//  1. Send: thread t owns words i = t, t + T, ... of a block (C/2 rounded up); for every peer q
//     it stores word i of x[q*C ...] into slot [r][i] of rank q's buffer of this epoch's parity.
//  2. Sum: for the same words of its own block, in rank order 0..W-1 in fp32 (its own x read in
//     place, the peers' words polled from its buffer, bounded), one rounding to bf16: at W = 2
//     bit for bit the reference's result.
// Buffers ([parity][source rank][word], 8 bytes a word) are reused two launches later, which
// every rank reaches only after receiving from every peer in between (kevo_ll.cuh). The epoch
// (the word's 32-bit tag and the parity) is the device's: kevo_epoch_begin / kevo_epoch_end on
// channel 0, one launch per call on every rank, so launch e carries epoch e on every rank and a
// call replayed from a CUDA graph gets a new epoch and the other buffer.
//
// Above LL_MAX_KIB per rank, or when the scratch cannot hold the buffers: start barrier, each
// rank pulls block r of every peer's x word by word and sums, end barrier (correct, not fast;
// push_sm and tma are the large-size seeds).
//
// kevo:pattern problem=reducescatter transport=sm fusion=fused
// kevo:param THREADS default=512 values=256,512,1024
// kevo:param LL_MAX_KIB default=1024 values=64,256,1024,4096
#define THREADS 512
#define LL_MAX_KIB 1024

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_ll.cuh"
#include "kevo_sync.cuh"

#include <cuda_bf16.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "reducescatter/ll_sm";

struct Args {
    const uint16_t *x;                  // this rank's x
    const uint16_t *xs[KEVO_MAX_RANKS]; // every rank's x (the pull path)
    uint16_t *y;                        // this rank's y, C elements
    int64_t c, words;                   // C, ceil(C / 2)
    kevo_ll_bufs bufs;                  // every rank's receive buffers: [2][W][words]
    int ll;
    kevo_pads pads;
};

struct State {
    int ll, occupancy;
    kevo_ll_bufs bufs; // a row per source rank
};

__device__ __forceinline__ void exchange_ll(const Args &a, const kevo_pads &p)
{
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = p.world, r = p.rank;
    const uint32_t epoch = (uint32_t)p.epoch;
    const uint64_t *recv = kevo_ll_recv(a.bufs, p.epoch); // [W][words] of this parity
    for (int64_t i = t; i < a.words; i += nt)
        for (int k = 1; k < W; k++) {
            const int q = (r + k) % W;
            kevo_ll_store(kevo_ll_send(a.bufs, p.epoch, q, r) + i, epoch,
                          kevo_ll_word(a.x + (int64_t)q * a.c, a.c, i));
        }
    for (int64_t i = t; i < a.words; i += nt) {
        float lo, hi;
        for (int s = 0; s < W; s++) {
            const uint32_t w = s == r ? kevo_ll_word(a.x + (int64_t)r * a.c, a.c, i)
                                      : kevo_ll_load(recv + (int64_t)s * a.words + i, epoch);
            lo = s ? lo + kevo_ll_lo(w) : kevo_ll_lo(w); // no 0 + x: keeps -0 as the reference does
            hi = s ? hi + kevo_ll_hi(w) : kevo_ll_hi(w);
        }
        kevo_ll_put(a.y, a.c, i, kevo_ll_pack(lo, hi));
    }
}

__device__ __forceinline__ void pull_words(const Args &a, const kevo_pads &p)
{
    kevo_cta_barrier(p, 0); // every rank's x is ready
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = p.world, r = p.rank;
    for (int64_t i = t; i < a.words; i += nt) {
        float lo, hi;
        for (int s = 0; s < W; s++) {
            const uint32_t w = kevo_ll_word(a.xs[s] + (int64_t)r * a.c, a.c, i);
            lo = s ? lo + kevo_ll_lo(w) : kevo_ll_lo(w); // no 0 + x: keeps -0 as the reference does
            hi = s ? hi + kevo_ll_hi(w) : kevo_ll_hi(w);
        }
        kevo_ll_put(a.y, a.c, i, kevo_ll_pack(lo, hi));
    }
    kevo_cta_barrier(p, 1); // nobody reads this rank's x any more
}

__global__ void __launch_bounds__(THREADS) reducescatter_ll(const Args a)
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
    if (W < 2 || W > KEVO_MAX_RANKS || n < W || n % W != 0)
        return kevo_fail(kWho, "bad context (world %d, N %lld)", W, (long long)n);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    st->ll =
        kevo_ll_alloc(ctx, kWho, 2 * n, (int64_t)LL_MAX_KIB * 1024, W, (n / W + 1) / 2, &st->bufs);
    if (st->ll < 0)
        return 1;
    return kevo_ctas_per_sm(kWho, (const void *)reducescatter_ll, THREADS, 0, INT_MAX,
                            &st->occupancy);
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
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel * W != n ||
        (n / W + 1) / 2 != st->bufs.words)
        return kevo_fail(kWho, "expected bf16 x of N and y of N/W elements");
    Args a = {};
    a.x = (const uint16_t *)x->ptr;
    for (int q = 0; q < W; q++)
        a.xs[q] = (const uint16_t *)x->peer[q];
    a.y = (uint16_t *)y->ptr;
    a.c = n / W;
    a.words = st->bufs.words;
    a.pads = kevo_pads_of(ctx);
    a.ll = st->ll;
    if (st->ll)
        a.bufs = st->bufs; // the kernel picks the parity of its epoch
    // The same grid on every rank, all of it resident (the pull path: within the pad too).
    const int64_t most = (int64_t)st->occupancy * ctx->sm_count;
    if (!a.pads.channel)
        return kevo_fail(kWho, "the signal pad is too small for the epoch channels");
    const int64_t pads = kevo_pads_max_ctas(a.pads, 2);
    const int64_t grid = kevo_ll_grid(a.words, THREADS, st->ll || most < pads ? most : pads);
    if (grid < 1)
        return kevo_fail(kWho, "no grid fits");
    reducescatter_ll<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
