// twoshot_sm.cu — two-shot all-reduce (bf16, sum) in one kernel with SM loads and stores
// through the symmetric window: a reduce-scatter (each rank sums its 1/W part of the vector
// from every rank's x) followed by an all-gather of the reduced parts (pushed into every
// rank's y, or pulled by every rank after a middle barrier).
//
// Parts: the vector's 16-byte slots (N / 8 rounded up) are cut into W parts of P slots,
// P = ceil(ceil(N / 8) / W); part q is elements [q*8P, min(N, (q+1)*8P)) and belongs to rank
// q. Every part starts on a 16-byte boundary; only the last non-empty part can end with a
// partial vector (N % 8 elements: 3 at the validation size N = 1000003), done one element at
// a time with the same thread mapping.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank):
//  1. Start barrier (kevo_cta_barrier, phase 0): every rank has entered this call, so its x
//     holds this call's values and its y may be written (the caller is done with it).
//  2. Reduce-scatter. Thread t of CTA b takes vectors i = b*THREADS + t + k*G*THREADS of this
//     rank's part, loads vector i of the part from every rank's x (x.peer[s], own included;
//     U = LOADS_IN_FLIGHT / W vectors per rank in flight), adds in rank order in fp32 and
//     rounds once (kevo_sum_bf16x8: every rank gets the same bits; at W = 2 they are the
//     reference's), and stores the sum into this rank's y.
//     PUSH = 1: it also stores the sum into every peer's y (y.peer[q], starting with rank + 1
//     so that the ranks' stores spread over the links), and then
//  3p. End barrier (phase 1): CTA b of every rank has finished all of its loads from the
//     peers' x and all of its stores into the peers' y, so after it this rank's x is no longer
//     read and this rank's y holds every part.
//     PUSH = 0: instead,
//  3a. Middle barrier (phase 1): CTA b of every rank has stored its share of that rank's part.
//  3b. All-gather: thread t of CTA b copies, for every peer q, the same vector indices of part
//     q that thread t of CTA b of rank q summed in step 2, from y.peer[q] into this rank's y.
//     CTA b reads only what CTA b of every rank wrote before the middle barrier, so the
//     per-CTA barrier is enough (no grid-wide barrier).
//  3c. End barrier (phase 2): nobody reads this rank's x or y any more.
//  If any pointer were not 16-byte aligned (tensors start on 4 KiB boundaries, so they are),
//  every rank would sum all of y itself, one element at a time, into its own y only (the
//  decision depends on window offsets, the same on every rank).
//
// Why it should be fast, and where: it is the SM bandwidth seed, for 1 MiB .. 256 MiB per rank
// and W > 2 above all. Each rank loads (W-1)/W * 2N bytes from peers and stores as much into
// them, the bandwidth-optimal traffic (a one-shot loads (W-1) * 2N: W/2 times more), both link
// directions busy at once, with one launch and two barriers (PUSH = 1; stores are posted, so
// there is no round trip for the all-gather). At W = 2, 256 MiB, each link direction carries
// 268 MB: ~725 us at the SM rate of ~370 GB/s (NCCL: 1170 us). At small sizes it costs what the
// one-shot costs (launch, two barrier round trips, one load round trip) plus the stores.
//
// Synchronisation: peers' x are read only between the start and the end (or middle) barrier;
// peers' y are written (PUSH = 1) only between the start and the end barrier, or read
// (PUSH = 0) only between the middle and the end barrier, and each element of y is written by
// exactly one rank. A CTA arrives at a barrier only after all of its loads and stores
// (__syncthreads, then st.release.sys); it reads after ld.acquire.sys and __syncthreads.
// Flags are words [phase][cta][source rank] of the signal pad holding epochs, never reset;
// every wait gives up after 5 s with __trap(). The epoch is the device's (kevo_epoch_begin /
// kevo_epoch_end), so a call replayed from a CUDA graph is as correct as one made from the
// host. The grid depends on N, W, the SM
// count, the occupancy and the pad only (the same on every rank), at most CTAS_PER_SM CTAs per
// SM (checked against the occupancy in kevo_init), so every CTA is resident.
//
// kevo:pattern problem=allreduce transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param LOADS_IN_FLIGHT default=8 values=2,4,8,16
// kevo:param PUSH default=1 values=0,1
#define CTAS_PER_SM 2
#define THREADS 256
#define LOADS_IN_FLIGHT 8
#define PUSH 1

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

// CTAs per SM that __launch_bounds__ asks for: CTAS_PER_SM, fewer when the registers that
// LOADS_IN_FLIGHT 16-byte loads need (4 each, plus ~64 for W source and W destination
// pointers) would not fit (kevo_init caps the grid at what the occupancy really allows anyway).
constexpr int kRegsPerThread = 4 * LOADS_IN_FLIGHT + 64;
constexpr int kFitBlocks = 65536 / (kRegsPerThread * THREADS);
constexpr int kMinBlocks =
    CTAS_PER_SM < kFitBlocks ? CTAS_PER_SM : (kFitBlocks > 1 ? kFitBlocks : 1);
constexpr int kPhases = PUSH ? 2 : 3;

struct Args {
    const __nv_bfloat16 *x[KEVO_MAX_RANKS]; // every rank's x (x[rank] is this rank's)
    __nv_bfloat16 *y[KEVO_MAX_RANKS];       // every rank's y (y[rank] is this rank's)
    int64_t n;                              // elements
    int64_t part;                           // elements per part (a multiple of 8)
    int vector;                             // every x[s], y[s] 16-byte aligned
    kevo_pads p;
};

struct State {
    int max_grid; // co-resident CTAs for this world
    int world;
};

// Elements [lo, hi) of rank q's part.
__device__ __forceinline__ void part_of(const Args &a, int q, int64_t &lo, int64_t &hi)
{
    lo = (int64_t)q * a.part;
    hi = lo + a.part;
    lo = lo < a.n ? lo : a.n;
    hi = hi < a.n ? hi : a.n;
}

// Step 2: sum this rank's part over all ranks into this rank's y (and every peer's, PUSH).
template <int W>
__device__ __forceinline__ void reduce_part(const Args &a, int64_t tid, int64_t stride)
{
    constexpr int U = LOADS_IN_FLIGHT / W > 0 ? LOADS_IN_FLIGHT / W : 1;
    const int r = a.p.rank;
    int64_t lo, hi;
    part_of(a, r, lo, hi);
    const int64_t nvec = (hi - lo) >> 3;
    const uint4 *x[W];
    uint4 *y[W]; // y[0] is this rank's, then rank + 1, rank + 2, ...
#pragma unroll
    for (int s = 0; s < W; s++) {
        x[s] = reinterpret_cast<const uint4 *>(a.x[s] + lo);
        const int q = r + s < W ? r + s : r + s - W;
        y[s] = reinterpret_cast<uint4 *>(a.y[q] + lo);
    }
    constexpr int D = PUSH ? W : 1; // destinations
    int64_t i = tid;
    for (; i + (U - 1) * stride < nvec; i += U * stride) {
        uint4 v[U][W];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int s = 0; s < W; s++)
                v[u][s] = x[s][i + u * stride];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint4 sum = kevo_sum_bf16x8<W>(v[u]);
#pragma unroll
            for (int d = 0; d < D; d++)
                y[d][i + u * stride] = sum;
        }
    }
    for (; i < nvec; i += stride) {
        uint4 v[W];
#pragma unroll
        for (int s = 0; s < W; s++)
            v[s] = x[s][i];
        const uint4 sum = kevo_sum_bf16x8<W>(v);
#pragma unroll
        for (int d = 0; d < D; d++)
            y[d][i] = sum;
    }
    // the partial vector at the end of the last part
    for (int64_t e = lo + (nvec << 3) + tid; e < hi; e += stride) {
        float acc = __bfloat162float(a.x[0][e]);
#pragma unroll
        for (int s = 1; s < W; s++)
            acc += __bfloat162float(a.x[s][e]);
        const __nv_bfloat16 sum = __float2bfloat16_rn(acc);
#pragma unroll
        for (int d = 0; d < D; d++) {
            const int q = r + d < W ? r + d : r + d - W;
            a.y[q][e] = sum;
        }
    }
}

// Step 3b (PUSH = 0): copy every peer's part from its y into this rank's y, the same indices
// per thread as reduce_part used on that peer.
template <int W>
__device__ __forceinline__ void gather_parts(const Args &a, int64_t tid, int64_t stride)
{
    constexpr int U = LOADS_IN_FLIGHT;
    const int r = a.p.rank;
    for (int k = 1; k < W; k++) {
        const int q = r + k < W ? r + k : r + k - W;
        int64_t lo, hi;
        part_of(a, q, lo, hi);
        const int64_t nvec = (hi - lo) >> 3;
        const uint4 *src = reinterpret_cast<const uint4 *>(a.y[q] + lo);
        uint4 *dst = reinterpret_cast<uint4 *>(a.y[r] + lo);
        int64_t i = tid;
        for (; i + (U - 1) * stride < nvec; i += U * stride) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                v[u] = src[i + u * stride];
#pragma unroll
            for (int u = 0; u < U; u++)
                dst[i + u * stride] = v[u];
        }
        for (; i < nvec; i += stride)
            dst[i] = src[i];
        for (int64_t e = lo + (nvec << 3) + tid; e < hi; e += stride)
            a.y[r][e] = a.y[q][e];
    }
}

// Fallback when a pointer is misaligned: this rank sums all of y itself, element by element.
template <int W>
__device__ __forceinline__ void reduce_all_scalar(const Args &a, int64_t tid, int64_t stride)
{
    __nv_bfloat16 *y = a.y[a.p.rank];
    for (int64_t e = tid; e < a.n; e += stride) {
        float acc = __bfloat162float(a.x[0][e]);
#pragma unroll
        for (int s = 1; s < W; s++)
            acc += __bfloat162float(a.x[s][e]);
        y[e] = __float2bfloat16_rn(acc);
    }
}

template <int W>
__global__ void __launch_bounds__(THREADS, kMinBlocks)
    allreduce_twoshot(const __grid_constant__ Args a)
{
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;

    const kevo_pads p = kevo_epoch_begin(a.p);
    kevo_cta_barrier(p, 0); // start: every rank's x is ready and its y may be written

    if (a.vector)
        reduce_part<W>(a, tid, stride);
    else
        reduce_all_scalar<W>(a, tid, stride);

    if (PUSH) {
        kevo_cta_barrier(p, 1); // end: every rank's pushes into this y have landed
    } else {
        kevo_cta_barrier(p, 1); // middle: CTA b of every rank has summed its share
        if (a.vector)
            gather_parts<W>(a, tid, stride);
        kevo_cta_barrier(p, 2); // end: nobody reads this rank's x or y any more
    }
    kevo_epoch_end(p);
}

typedef void (*kernel_fn)(Args);

kernel_fn kernel_for(int W)
{
    switch (W) {
    case 1: return allreduce_twoshot<1>;
    case 2: return allreduce_twoshot<2>;
    case 3: return allreduce_twoshot<3>;
    case 4: return allreduce_twoshot<4>;
    case 5: return allreduce_twoshot<5>;
    case 6: return allreduce_twoshot<6>;
    case 7: return allreduce_twoshot<7>;
    case 8: return allreduce_twoshot<8>;
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
    return 0;
}

} // namespace

constexpr const char *kWho = "allreduce/twoshot_sm";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    int per_sm = 0;
    if (kevo_ctas_per_sm(kWho, (const void *)kernel_for(ctx->world), THREADS, 0, CTAS_PER_SM,
                         &per_sm) != 0)
        return 1;
    st->max_grid = per_sm * ctx->sm_count;
    st->world = ctx->world;
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
    const int W = ctx->world;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.n = x->numel;
    const int64_t slots = (a.n + 7) / 8;
    a.part = (slots + W - 1) / W * 8;
    bool vec = true;
    for (int s = 0; s < W; s++) {
        a.x[s] = (const __nv_bfloat16 *)x->peer[s];
        a.y[s] = (__nv_bfloat16 *)y->peer[s];
        vec = vec && kevo_aligned16(x->peer[s]) && kevo_aligned16(y->peer[s]);
    }
    a.vector = vec;
    a.p = kevo_pads_of(ctx);

    // The grid from N, W, the SM count, the occupancy and the pad only: the same on every
    // rank. One vector of the part per thread when the grid allows it.
    const int64_t items = a.part / 8 + 1;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, kPhases);
    if (pad_limit < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t most = st->max_grid < pad_limit ? st->max_grid : pad_limit;
    const int64_t grid = kevo_clamp_grid((items + THREADS - 1) / THREADS, most);

    kernel_for(W)<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(a);
    return kevo_launched(kWho, "launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx);
}
