// ulysses_pull_tma.cu — DeepSpeed-Ulysses sequence-to-heads all-to-all in one kernel, moved by
// TMA bulk copies: each rank bulk-loads its heads' contiguous runs from every peer's x into
// shared memory and bulk-stores them into its own y.
//
// What one call does (one kernel on ctx->stream, same grid on every rank):
//  1. Start barrier (kevo_cta_barrier phase 0): every peer has entered this call, so its x
//     holds this call's values. The issuing lanes then fence the async proxy
//     (fence.proxy.async.global) before their first bulk load, as kevo_tma.cuh prescribes.
//  2. Copy. For a (b, q) pair the S/W runs of R = NH/W*D bf16 that rank q holds for this rank
//     (x_q[b, i, r*NH/W .. , :], row stride NH*D) are one contiguous block of y
//     (y[b, q*S/W .., :, :]). That block is cut into items of at most CHUNK bytes: several
//     whole runs when a run is at most CHUNK bytes (one bulk load per run, packed back to back
//     in shared memory, then ONE bulk store of the packed rows, since they are contiguous in y),
//     or pieces of a run otherwise. Items are enumerated (b, item, k) with k fastest and
//     q = (r + k) mod W, so every source is read at once. Every warp of a CTA is an
//     independent pipeline (PIPES per CTA) driven by its lane 0: STAGES shared-memory buffers
//     with one mbarrier each; STAGES-1 loads are in flight while the oldest buffer is stored;
//     a buffer is reloaded only after the bulk store reading it has finished reading
//     (cp.async.bulk.wait_group.read 1).
//     When a run is not a multiple of 16 bytes or a pointer is not 16-byte aligned (the
//     validation size, D = 99), every thread of the grid copies one bf16 at a time instead
//     (correct, slow; that size is not timed).
//  3. Every lane 0 waits for all of its bulk stores (wait_group 0); every load it issued was
//     waited for on its mbarrier before the data was stored. Then the end barrier (phase 1):
//     CTA b waits for CTA b of every rank, so no peer reads this rank's x after the call.
//
// Why it should be fast: the bulk copies need one issuing thread per pipeline, so a few dozen
// SMs keep NVLink full (tens of KiB in flight per pipeline) with 16 KiB-class transfers, and
// x is read once and y written once, in one launch. Small sizes: one barrier round trip plus
// one load/store per pipeline (S256 at W = 2: 128 items of 8 KiB). Large sizes: bound by
// NVLink reads (~370 GB/s a direction) instead of NCCL's pack + send/recv + unpack (670 us at
// W = 2 for B2xS32768).
//
// Synchronisation: peers' x are read only between the two barriers; y is written only on this
// rank. Flags: epochs, [phase][cta][rank] words of the signal pad, never reset; every wait
// (flags and mbarriers) is bounded (5 s, then __trap). The epoch is the device's
// (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as correct as one
// made from the host.
//
// kevo:pattern problem=ulysses_seq_to_heads transport=tma fusion=fused
// kevo:param PIPES default=4 values=1,2,4,8
// kevo:param STAGES default=4 values=2,3,4,6
// kevo:param CHUNK default=8192 values=2048,4096,8192,16384,32768
// kevo:param CTAS_PER_SM default=1 range=1..2
#define PIPES 4
#define STAGES 4
#define CHUNK 8192
#define CTAS_PER_SM 1

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_tma.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 32 * PIPES;
constexpr size_t kSmemBytes = (size_t)PIPES * STAGES * CHUNK;
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert(CHUNK % 16 == 0, "bulk copies move multiples of 16 bytes");

struct Args {
    const char *x[KEVO_MAX_RANKS]; // every rank's x
    char *y;                       // this rank's y
    // bulk path (bytes)
    uint64_t run;   // R*2: bytes of one run
    uint64_t x_row; // NH*D*2: bytes of one row of x
    uint64_t x_off; // rank*R*2
    uint32_t rpi;   // runs per item (run <= CHUNK), else 0
    uint32_t ppr;   // pieces per run (run > CHUNK), else 0
    uint32_t ipb;   // items per (b, q) block
    uint32_t items; // B * W * ipb
    // element fallback
    uint32_t total;    // elements of y
    uint32_t R;        // elements of a run
    uint32_t x_stride; // NH*D
    uint32_t S, Sl, W, rank;
    int bulk; // bulk path usable
    kevo_pads p;
};

struct State {
    int max_grid;
};

struct Item {
    const char *src; // first run (or the piece) in x_q
    char *dst;       // in y
    uint32_t nrows;  // runs to load (1 for a piece)
    uint32_t bytes;  // bytes to load (and store)
};

__device__ __forceinline__ Item decode(const Args &a, const char *const *xs, uint32_t j)
{
    const uint32_t W = a.W, Sl = a.Sl;
    const uint32_t t = j / W, kq = j - t * W;
    const uint32_t b = t / a.ipb, it = t - b * a.ipb;
    uint32_t q = kq + a.rank;
    if (q >= W)
        q -= W;
    Item m;
    if (a.rpi) {
        const uint32_t i0 = it * a.rpi;
        m.nrows = Sl - i0 < a.rpi ? Sl - i0 : a.rpi;
        m.bytes = m.nrows * (uint32_t)a.run;
        m.src = xs[q] + (uint64_t)(b * Sl + i0) * a.x_row + a.x_off;
        m.dst = a.y + ((uint64_t)b * a.S + (uint64_t)q * Sl + i0) * a.run;
    } else {
        const uint32_t i = it / a.ppr, piece = it - i * a.ppr;
        const uint64_t off = (uint64_t)piece * CHUNK;
        m.nrows = 1;
        m.bytes = (uint32_t)(a.run - off < CHUNK ? a.run - off : CHUNK);
        m.src = xs[q] + (uint64_t)(b * Sl + i) * a.x_row + a.x_off + off;
        m.dst = a.y + ((uint64_t)b * a.S + (uint64_t)q * Sl + i) * a.run + off;
    }
    return m;
}

// Lane 0 of a warp: the whole pipeline of items j = g, g + npipes, ...
__device__ void pipeline(const Args &a, const char *const *xs, char *buf, uint64_t *bar, uint32_t g,
                         uint32_t npipes)
{
    const uint32_t n_items = a.items > g ? (a.items - g - 1) / npipes + 1 : 0;
    auto issue = [&](uint32_t m) {
        const uint32_t s = m % STAGES;
        const Item it = decode(a, xs, g + m * npipes);
        char *dst = buf + (size_t)s * CHUNK;
        kevo_mbar_expect_tx(&bar[s], it.bytes);
        if (it.nrows == 1) {
            kevo_tma_load(dst, it.src, it.bytes, &bar[s]);
        } else {
            for (uint32_t r = 0; r < it.nrows; r++)
                kevo_tma_load(dst + (size_t)r * a.run, it.src + (uint64_t)r * a.x_row,
                              (uint32_t)a.run, &bar[s]);
        }
    };
    const uint32_t pro = n_items < STAGES - 1 ? n_items : STAGES - 1;
    for (uint32_t m = 0; m < pro; m++)
        issue(m);
    for (uint32_t n = 0; n < n_items; n++) {
        const uint32_t s = n % STAGES;
        kevo_mbar_wait(&bar[s], (n / STAGES) & 1);
        const Item it = decode(a, xs, g + n * npipes);
        kevo_tma_store(it.dst, buf + (size_t)s * CHUNK, it.bytes);
        kevo_tma_commit();
        const uint32_t m = n + STAGES - 1; // goes into the buffer item n-1 used
        if (m < n_items) {
            kevo_tma_wait_read<1>(); // the store of item n-1 has read its buffer
            issue(m);
        }
    }
    kevo_tma_wait_all(); // every store of this pipeline is complete
}

__global__ void __launch_bounds__(kThreads, CTAS_PER_SM) ulysses_pull_tma(const Args a)
{
    extern __shared__ __align__(128) char smem[];
    __shared__ __align__(8) uint64_t bars[PIPES * STAGES];
    __shared__ const char *xs[KEVO_MAX_RANKS];
    const kevo_pads p = kevo_epoch_begin(a.p);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x < KEVO_MAX_RANKS)
        xs[threadIdx.x] = threadIdx.x < a.W ? a.x[threadIdx.x] : nullptr;
    if (a.bulk && lane == 0) {
        for (int s = 0; s < STAGES; s++)
            kevo_mbar_init(&bars[warp * STAGES + s], 1);
        kevo_fence_mbar_init();
    }

    kevo_cta_barrier(p, 0); // start: every rank's x holds this call's values

    if (a.bulk) {
        if (lane == 0) {
            kevo_fence_proxy_async_global(); // acquired peer data, read by the async proxy
            pipeline(a, xs, smem + (size_t)warp * STAGES * CHUNK, &bars[warp * STAGES],
                     blockIdx.x * PIPES + warp, gridDim.x * PIPES);
        }
        __syncwarp();
    } else {
        // one bf16 at a time: y row (b, q*Sl + i) <- x_q row (b, i), heads of this rank
        const unsigned short *const *xe = reinterpret_cast<const unsigned short *const *>(xs);
        unsigned short *y = reinterpret_cast<unsigned short *>(a.y);
        const uint32_t stride = gridDim.x * kThreads;
        for (uint32_t e = blockIdx.x * kThreads + threadIdx.x; e < a.total; e += stride) {
            const uint32_t row = e / a.R, col = e - row * a.R; // row of y: b*S + q*Sl + i
            const uint32_t b = row / a.S, rs = row - b * a.S;
            const uint32_t q = rs / a.Sl, i = rs - q * a.Sl;
            y[e] = xe[q][(uint64_t)(b * a.Sl + i) * a.x_stride + (uint64_t)a.rank * a.R + col];
        }
    }

    kevo_cta_barrier(p, 1); // end: no rank reads this rank's x after this
    kevo_epoch_end(p);
}

} // namespace

constexpr const char *kWho = "ulysses_seq_to_heads/ulysses_pull_tma";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    cudaError_t e = cudaFuncSetAttribute(
        ulysses_pull_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes);
    if (e != cudaSuccess)
        return kevo_fail(kWho, "%zu bytes of shared memory: %s", kSmemBytes, cudaGetErrorString(e));
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)ulysses_pull_tma, kThreads, kSmemBytes, CTAS_PER_SM,
                         &per_sm) != 0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const int W = ctx->world;
    if (!st)
        return 1;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return kevo_fail(kWho, "bad context");
    const int64_t B = kevo_param(ctx, "B", 0), S = kevo_param(ctx, "S", 0);
    const int64_t NH = kevo_param(ctx, "NH", 0), D = kevo_param(ctx, "D", 0);
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (B < 1 || S < 1 || NH < 1 || D < 1 || S % W || NH % W || x->dtype != KEVO_BF16 ||
        y->dtype != KEVO_BF16 || x->numel != B * (S / W) * NH * D || y->numel != x->numel)
        return kevo_fail(kWho, "unexpected sizes or tensors");
    if (y->numel >= ((int64_t)1 << 31))
        return kevo_fail(kWho, "%lld elements are too many", (long long)y->numel);
    const int64_t Sl = S / W, R = NH / W * D;
    Args a = {};
    bool bulk = (R * 2) % 16 == 0 && kevo_aligned16(y->ptr);
    for (int q = 0; q < W; q++) {
        a.x[q] = (const char *)x->peer[q];
        bulk = bulk && kevo_aligned16(x->peer[q]);
    }
    a.y = (char *)y->ptr;
    a.run = (uint64_t)R * 2;
    a.x_row = (uint64_t)NH * D * 2;
    a.x_off = (uint64_t)ctx->rank * R * 2;
    if (a.run <= CHUNK) {
        a.rpi = (uint32_t)(CHUNK / a.run);
        a.ppr = 0;
        a.ipb = (uint32_t)((Sl + a.rpi - 1) / a.rpi);
    } else {
        a.rpi = 0;
        a.ppr = (uint32_t)((a.run + CHUNK - 1) / CHUNK);
        a.ipb = (uint32_t)(Sl * a.ppr);
    }
    const int64_t items = B * W * (int64_t)a.ipb;
    if (items >= ((int64_t)1 << 31))
        return kevo_fail(kWho, "too many items");
    a.items = (uint32_t)items;
    a.total = (uint32_t)y->numel;
    a.R = (uint32_t)R;
    a.x_stride = (uint32_t)(NH * D);
    a.S = (uint32_t)S;
    a.Sl = (uint32_t)Sl;
    a.W = (uint32_t)W;
    a.rank = (uint32_t)ctx->rank;
    a.bulk = bulk;
    a.p = kevo_pads_of(ctx);

    // Same grid on every rank: from sizes, W and the SM count only, never from a pointer's
    // alignment (the element fallback strides over whatever grid it gets).
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t most = st->max_grid < pad_limit ? st->max_grid : pad_limit;
    const int64_t grid = kevo_clamp_grid((items + PIPES - 1) / PIPES, most);
    ulysses_pull_tma<<<(unsigned)grid, kThreads, kSmemBytes, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
