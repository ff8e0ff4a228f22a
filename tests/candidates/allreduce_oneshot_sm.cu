// allreduce_oneshot_sm.cu — one-shot all-reduce (bf16, sum) in one kernel, with SM loads
// from every rank's x through the symmetric window.
//
// What one call does, in one kernel on ctx->stream:
//  1. Start barrier. CTA b of this rank tells CTA b of every rank "I have entered launch e"
//     (e: the launch's epoch, taken on the device) and waits until CTA b of every rank has said the same. On entry
//     only this rank's x is known to be ready; a peer's x is ready once that peer has entered
//     the same call, so no peer data is read before this barrier.
//  2. Each thread sums its grid-stride share of 16-byte vectors (8 bf16) over all ranks,
//     reading rank q's x through ctx->inputs[0].peer[q], accumulating in fp32 in rank order
//     0, 1, ..., W-1 and rounding once, so every rank gets the same bits. It writes y on this
//     rank only. A scalar loop takes the elements after the last whole vector (N may be odd),
//     or all of them if a pointer is not 16-byte aligned.
//  3. End barrier. CTA b waits until CTA b of every rank has finished reading. A CTA arrives
//     only after all of its reads, so when every CTA of this grid has passed, no peer reads
//     this rank's x any more: once ctx->stream reports the call complete, the caller may
//     overwrite x (and the next call may reuse anything the peers read).
//
// Flags: 64-bit words of the signal pad, slot [phase][cta][source rank]. Arrival is one
// st.release.sys into every rank's pad (this rank's included); waiting is ld.acquire.sys on
// this rank's own pad until the value reaches the epoch. Epochs come from the device
// (kevo_epoch_begin / kevo_epoch_end of patterns/kevo_sync.cuh: a counter in the pad that each
// launch advances), so a call replayed from a CUDA graph gets a new one; values only grow, so
// no flag is ever reset. Every wait gives up after 5 s with __trap(): a peer that never arrives becomes
// an error on this rank instead of a hang.
//
// Grid: the same on every rank (it depends on N, W and the SM count only; the barrier pairs
// CTA b with CTA b), at most 2 CTAs of 256 threads per SM so that all CTAs are resident at
// once (they wait on each other's peers, so none may wait for a free SM).
#include "kevo/kernel.h"
#include "kevo_sync.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

namespace {

constexpr int kThreads = 256;                              // per CTA
constexpr int kCtasPerSm = 2;                              // co-residency bound
constexpr int kLoadsInFlight = 8;                          // 16-byte loads per thread per step
constexpr unsigned long long kTimeoutNs = 5000000000ull;  // 5 s per barrier wait

struct Args {
    const __nv_bfloat16 *x[KEVO_MAX_RANKS]; // x of every rank (x[rank] is this rank's)
    __nv_bfloat16 *y;                        // y of this rank
    int64_t n;                               // elements
    int vector;                              // every pointer is 16-byte aligned
    int rank;
    kevo_pads epochs;                        // the epoch channel (kevo_sync.cuh)
    uint64_t *pad;                           // this rank's signal pad
    uint64_t *peer_pad[KEVO_MAX_RANKS];      // every rank's signal pad
};

__device__ __forceinline__ unsigned long long globaltimer_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void store_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t load_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// CTA blockIdx.x of this rank meets CTA blockIdx.x of every rank. Thread q < W signals rank q
// and waits for rank q.
template <int W>
__device__ void barrier(const Args &a, uint64_t epoch, int phase)
{
    __syncthreads(); // every load and store of this CTA so far comes before the release
    if (threadIdx.x < W) {
        const int q = threadIdx.x;
        const size_t slot = ((size_t)phase * gridDim.x + blockIdx.x) * W;
        store_release_sys(a.peer_pad[q] + slot + a.rank, epoch); // to rank q: I arrived
        const uint64_t *flag = a.pad + slot + q;                 // from rank q: it arrived
        if (load_acquire_sys(flag) < epoch) {
            const unsigned long long t0 = globaltimer_ns();
            while (load_acquire_sys(flag) < epoch)
                if (globaltimer_ns() - t0 > kTimeoutNs)
                    __trap(); // rank q never arrived: fail instead of hanging
        }
    }
    __syncthreads(); // what threads 0..W-1 acquired is now visible to the whole CTA
}

// The sum over ranks of 8 bf16 per rank: fp32, rank order, rounded once.
template <int W>
__device__ __forceinline__ uint4 sum8(const uint4 (&v)[W])
{
    float acc[8];
#pragma unroll
    for (int p = 0; p < W; p++) {
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v[p]);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            acc[2 * k] = p == 0 ? f.x : acc[2 * k] + f.x;
            acc[2 * k + 1] = p == 0 ? f.y : acc[2 * k + 1] + f.y;
        }
    }
    uint4 out;
    __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
    for (int k = 0; k < 4; k++)
        o[k] = __floats2bfloat162_rn(acc[2 * k], acc[2 * k + 1]);
    return out;
}

template <int W>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) allreduce_oneshot(const Args a)
{
    const kevo_pads e = kevo_epoch_begin(a.epochs);
    barrier<W>(a, e.epoch, 0); // start: every rank's x is ready

    // U vectors per thread per step, all W * U loads issued before the first add
    constexpr int U = kLoadsInFlight / W > 0 ? kLoadsInFlight / W : 1;
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t nvec = a.vector ? a.n / 8 : 0;
    const uint4 *x[W];
#pragma unroll
    for (int p = 0; p < W; p++)
        x[p] = reinterpret_cast<const uint4 *>(a.x[p]);
    uint4 *y = reinterpret_cast<uint4 *>(a.y);

    int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    for (; i + (U - 1) * stride < nvec; i += U * stride) {
        uint4 v[U][W];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int p = 0; p < W; p++)
                v[u][p] = x[p][i + u * stride];
#pragma unroll
        for (int u = 0; u < U; u++)
            y[i + u * stride] = sum8<W>(v[u]);
    }
    for (; i < nvec; i += stride) {
        uint4 v[W];
#pragma unroll
        for (int p = 0; p < W; p++)
            v[p] = x[p][i];
        y[i] = sum8<W>(v);
    }
    // the tail after the last whole vector (everything when not vectorised)
    for (int64_t e = nvec * 8 + (int64_t)blockIdx.x * kThreads + threadIdx.x; e < a.n;
         e += stride) {
        float acc = __bfloat162float(a.x[0][e]);
#pragma unroll
        for (int p = 1; p < W; p++)
            acc += __bfloat162float(a.x[p][e]);
        a.y[e] = __float2bfloat16_rn(acc);
    }

    barrier<W>(a, e.epoch, 1); // end: no rank reads this rank's x after this
    kevo_epoch_end(e);
}

template <int W>
cudaError_t launch(const Args &a, int grid, cudaStream_t stream)
{
    allreduce_oneshot<W><<<grid, kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

} // namespace

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel) {
        fprintf(stderr, "allreduce_oneshot_sm: expected bf16 x and y of equal size\n");
        return 1;
    }

    // Tensor pointers change between calls: read them from ctx every time.
    Args a = {};
    a.y = (__nv_bfloat16 *)y->ptr;
    a.n = x->numel;
    a.rank = ctx->rank;
    a.epochs = kevo_pads_of(ctx);
    a.pad = ctx->signal;
    int aligned = (uintptr_t)y->ptr % 16 == 0;
    for (int p = 0; p < W; p++) {
        a.x[p] = (const __nv_bfloat16 *)x->peer[p];
        a.peer_pad[p] = ctx->signal_peer[p];
        aligned = aligned && (uintptr_t)x->peer[p] % 16 == 0;
    }
    a.vector = aligned;

    // The grid must be the same on every rank: it depends only on N, W and the SM count
    // (and on the pad's size, which holds 2 phases x grid x W flags).
    const int64_t items = aligned ? a.n / 8 + 1 : a.n;
    int64_t grid = (items + kThreads - 1) / kThreads;
    const int64_t most = (int64_t)kCtasPerSm * ctx->sm_count;
    const int64_t pad_limit = (int64_t)(a.epochs.words / (2 * (size_t)W)); // channels excluded
    if (grid > most)
        grid = most;
    if (grid > pad_limit)
        grid = pad_limit;
    if (grid < 1)
        grid = 1;

    cudaError_t e;
    switch (W) {
    case 1: e = launch<1>(a, (int)grid, ctx->stream); break;
    case 2: e = launch<2>(a, (int)grid, ctx->stream); break;
    case 3: e = launch<3>(a, (int)grid, ctx->stream); break;
    case 4: e = launch<4>(a, (int)grid, ctx->stream); break;
    case 5: e = launch<5>(a, (int)grid, ctx->stream); break;
    case 6: e = launch<6>(a, (int)grid, ctx->stream); break;
    case 7: e = launch<7>(a, (int)grid, ctx->stream); break;
    default: e = launch<8>(a, (int)grid, ctx->stream); break;
    }
    if (e != cudaSuccess) {
        fprintf(stderr, "allreduce_oneshot_sm: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
