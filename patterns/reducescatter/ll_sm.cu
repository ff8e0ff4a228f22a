// reducescatter/ll_sm.cu — reduce-scatter (bf16, sum) for the latency-bound sizes with the LL
// protocol (kevo_ll.cuh): every rank stores each 4-byte word of block q of its x, with the
// call's epoch, into rank q's receive buffer; every rank polls the words of its own block from
// each peer and sums. No barrier, no flags apart from the words themselves.
//
// What one call does, in one kernel on ctx->stream (the same grid on every rank), C = N/W:
//  1. Send: thread t owns words i = t, t + T, ... of a block (C/2 rounded up); for every peer q
//     it stores word i of x[q*C ...] into slot [r][i] of rank q's buffer of this call's parity.
//  2. Sum: for the same words of its own block, in rank order 0..W-1 in fp32 (its own x read in
//     place, the peers' words polled from its buffer, bounded), one rounding to bf16: at W = 2
//     bit for bit the reference's result.
// Buffers ([parity][source rank][word], 8 bytes a word) are reused two calls later, which every
// rank reaches only after receiving from every peer in between (kevo_ll.cuh).
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
#include "kevo_ll.cuh"
#include "kevo_sync.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr const char *kWho = "reducescatter/ll_sm";

struct Args {
    const uint16_t *x;                  // this rank's x
    const uint16_t *xs[KEVO_MAX_RANKS]; // every rank's x (the pull path)
    uint16_t *y;                        // this rank's y, C elements
    int64_t c, words;                   // C, ceil(C / 2)
    uint64_t *recv;                     // this rank's buffer of this parity: [W][words]
    uint64_t *send[KEVO_MAX_RANKS];     // row `rank` of every peer's buffer of this parity
    uint32_t epoch;
    int ll;
    kevo_pads pads;
};

struct State {
    int ll, occupancy;
    kevo_ll_bufs bufs; // a row per source rank
};

__device__ __forceinline__ void exchange_ll(const Args &a)
{
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = a.pads.world, r = a.pads.rank;
    for (int64_t i = t; i < a.words; i += nt)
        for (int k = 1; k < W; k++) {
            const int q = (r + k) % W;
            kevo_ll_store(a.send[q] + i, a.epoch, kevo_ll_word(a.x + (int64_t)q * a.c, a.c, i));
        }
    for (int64_t i = t; i < a.words; i += nt) {
        float lo, hi;
        for (int s = 0; s < W; s++) {
            const uint32_t w = s == r ? kevo_ll_word(a.x + (int64_t)r * a.c, a.c, i)
                                      : kevo_ll_load(a.recv + (int64_t)s * a.words + i, a.epoch);
            lo = s ? lo + kevo_ll_lo(w) : kevo_ll_lo(w); // no 0 + x: keeps -0 as the reference does
            hi = s ? hi + kevo_ll_hi(w) : kevo_ll_hi(w);
        }
        kevo_ll_put(a.y, a.c, i, kevo_ll_pack(lo, hi));
    }
}

__device__ __forceinline__ void pull_words(const Args &a)
{
    kevo_cta_barrier(a.pads, 0); // every rank's x is ready
    const int64_t nt = (int64_t)gridDim.x * THREADS;
    const int64_t t = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int W = a.pads.world, r = a.pads.rank;
    for (int64_t i = t; i < a.words; i += nt) {
        float lo, hi;
        for (int s = 0; s < W; s++) {
            const uint32_t w = kevo_ll_word(a.xs[s] + (int64_t)r * a.c, a.c, i);
            lo = s ? lo + kevo_ll_lo(w) : kevo_ll_lo(w); // no 0 + x: keeps -0 as the reference does
            hi = s ? hi + kevo_ll_hi(w) : kevo_ll_hi(w);
        }
        kevo_ll_put(a.y, a.c, i, kevo_ll_pack(lo, hi));
    }
    kevo_cta_barrier(a.pads, 1); // nobody reads this rank's x any more
}

__global__ void __launch_bounds__(THREADS) reducescatter_ll(const Args a)
{
    if (a.ll)
        exchange_ll(a);
    else
        pull_words(a);
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int W = ctx->world;
    const int64_t n = kevo_param(ctx, "N", 0);
    if (W < 2 || W > KEVO_MAX_RANKS || n < W || n % W != 0) {
        fprintf(stderr, "%s: bad context (world %d, N %lld)\n", kWho, W, (long long)n);
        return 1;
    }
    State *st = (State *)calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "%s: out of host memory\n", kWho);
        return 1;
    }
    ctx->user = st;
    st->ll = kevo_ll_alloc(ctx, kWho, 2 * n, (int64_t)LL_MAX_KIB * 1024, W, (n / W + 1) / 2,
                           &st->bufs);
    if (st->ll < 0)
        return 1;
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &st->occupancy, reducescatter_ll, THREADS, 0);
    if (e != cudaSuccess || st->occupancy < 1) {
        fprintf(stderr, "%s: occupancy query: %s\n", kWho, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = (const State *)ctx->user;
    const int W = ctx->world;
    if (!st || ctx->n_inputs < 1 || ctx->n_outputs < 1) {
        fprintf(stderr, "%s: bad context (no kevo_init)\n", kWho);
        return 1;
    }
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = kevo_param(ctx, "N", x->numel);
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || n != x->numel || y->numel * W != n ||
        (n / W + 1) / 2 != st->bufs.words) {
        fprintf(stderr, "%s: expected bf16 x of N and y of N/W elements\n", kWho);
        return 1;
    }
    Args a = {};
    a.x = (const uint16_t *)x->ptr;
    for (int q = 0; q < W; q++)
        a.xs[q] = (const uint16_t *)x->peer[q];
    a.y = (uint16_t *)y->ptr;
    a.c = n / W;
    a.words = st->bufs.words;
    a.pads = kevo_pads_of(ctx);
    a.epoch = (uint32_t)(ctx->call_index + 1);
    a.ll = st->ll;
    if (st->ll) {
        a.recv = kevo_ll_recv(st->bufs, ctx);
        for (int q = 0; q < W; q++)
            a.send[q] = kevo_ll_send(st->bufs, ctx, q, ctx->rank);
    }
    // The same grid on every rank, all of it resident (the pull path: within the pad too).
    const int64_t most = (int64_t)st->occupancy * ctx->sm_count;
    const int64_t pads = kevo_pads_max_ctas(a.pads, 2);
    const int64_t grid = kevo_ll_grid(a.words, THREADS, st->ll || most < pads ? most : pads);
    if (grid < 1) {
        fprintf(stderr, "%s: no grid fits\n", kWho);
        return 1;
    }
    reducescatter_ll<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: launch: %s\n", kWho, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user);
    ctx->user = NULL;
}
