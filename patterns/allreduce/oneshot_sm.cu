// oneshot_sm.cu — one-shot all-reduce (bf16, sum) in one kernel: every rank pulls all of every
// rank's x with 16-byte SM loads through the symmetric window and sums it into its own y.
//
// What one call does (one kernel on ctx->stream, the same grid on every rank):
//  1. Start barrier (kevo_cta_barrier, phase 0): CTA b of this rank meets CTA b of every rank.
//     On entry only this rank's x is known to hold this call's values; a peer's x does once
//     that peer has entered the call, so no peer data is read before this barrier.
//  2. Pull and sum. Each thread takes a grid-stride share of the 16-byte vectors (8 bf16) of
//     y and loads vector i from every rank's x (x.peer[s], this rank's own included): U
//     vectors per rank, U = LOADS_IN_FLIGHT / W, all W * U loads issued before the first add.
//     The W values are added in rank order 0, 1, ..., W-1 in fp32 and rounded once
//     (kevo_sum_bf16x8): every rank gets the same bits, and at W = 2 they are the reference's.
//     Only this rank's y is written. The elements after the last whole vector (N % 8, the
//     validation size N = 1000003 has 3) are summed one at a time; if any pointer were not
//     16-byte aligned (tensors start on 4 KiB boundaries, so they are), everything would be.
//  3. End barrier (phase 1): a CTA arrives only after all of its loads, so once CTA b of every
//     rank has passed it, nobody reads this rank's x any more and the caller may overwrite it.
//
// Why it should be fast, and where: this is the latency seed for 64 KiB .. 1 MiB per rank
// (NCCL: 11.6 and 19.9 us at W = 2; the target is >= 1.5x, i.e. <= 7.7 and 13.3 us). A call is
// one launch, two barrier round trips (one NVLink store plus one poll each) and one round of
// loads: with one vector per thread (the grid is sized to N / 8 / THREADS CTAs, up to
// CTAS_PER_SM per SM), every load of a thread is in flight at once and the data costs a single
// NVLink load latency. It reads (W-1) x 2N bytes from peers, W/2 times the two-shot's traffic,
// so it loses to the two-shot and copy-engine seeds at 16 MiB and above at W > 2 (at W = 2 it
// moves as much per direction as a two-shot does and stays competitive: 808 us at 256 MiB
// measured for the candidate it is based on, against NCCL's 1170).
//
// Synchronisation: peers' x are read only between the two barriers; y is written only on this
// rank, by this rank, so no peer ever touches it. Flags are words [phase][cta][source rank] of
// the signal pad holding epochs, written st.release.sys and polled ld.acquire.sys
// (kevo_sync.cuh), never reset; every wait gives up after 5 s with __trap(). The epoch is the
// device's (kevo_epoch_begin / kevo_epoch_end), so a call replayed from a CUDA graph is as
// correct as one made from the host.
// The grid depends only on N, W, the SM count, the occupancy and the pad, so it is the same on
// every rank, and at most CTAS_PER_SM CTAs per SM (checked against the occupancy in kevo_init)
// so that every CTA is resident while CTAs of other ranks wait for it.
//
// kevo:pattern problem=allreduce transport=sm fusion=fused
// kevo:param CTAS_PER_SM default=2 range=1..4
// kevo:param THREADS default=256 values=128,256,512
// kevo:param LOADS_IN_FLIGHT default=8 values=2,4,8,16
#define CTAS_PER_SM 2
#define THREADS 256
#define LOADS_IN_FLIGHT 8

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
// LOADS_IN_FLIGHT 16-byte loads need (4 each, plus ~40) would not fit (kevo_init caps the grid
// at what the occupancy really allows anyway).
constexpr int kRegsPerThread = 4 * LOADS_IN_FLIGHT + 40;
constexpr int kFitBlocks = 65536 / (kRegsPerThread * THREADS);
constexpr int kMinBlocks =
    CTAS_PER_SM < kFitBlocks ? CTAS_PER_SM : (kFitBlocks > 1 ? kFitBlocks : 1);

struct Args {
    const __nv_bfloat16 *x[KEVO_MAX_RANKS]; // every rank's x (x[rank] is this rank's)
    __nv_bfloat16 *y;                       // this rank's y
    int64_t n;                              // elements
    int vector;                             // every x[s] and y 16-byte aligned
    kevo_pads p;
};

struct State {
    int max_grid; // co-resident CTAs for this world
    int world;
};

template <int W>
__global__ void __launch_bounds__(THREADS, kMinBlocks)
    allreduce_oneshot(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    kevo_cta_barrier(p, 0); // start: every rank's x holds this call's values

    constexpr int U = LOADS_IN_FLIGHT / W > 0 ? LOADS_IN_FLIGHT / W : 1;
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    int64_t done = 0; // elements handled by the vector path
    if (a.vector) {
        const int64_t nvec = a.n >> 3;
        const uint4 *x[W];
#pragma unroll
        for (int s = 0; s < W; s++)
            x[s] = reinterpret_cast<const uint4 *>(a.x[s]);
        uint4 *y = reinterpret_cast<uint4 *>(a.y);
        int64_t i = tid;
        for (; i + (U - 1) * stride < nvec; i += U * stride) {
            uint4 v[U][W];
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int s = 0; s < W; s++)
                    v[u][s] = x[s][i + u * stride];
#pragma unroll
            for (int u = 0; u < U; u++)
                y[i + u * stride] = kevo_sum_bf16x8<W>(v[u]);
        }
        for (; i < nvec; i += stride) {
            uint4 v[W];
#pragma unroll
            for (int s = 0; s < W; s++)
                v[s] = x[s][i];
            y[i] = kevo_sum_bf16x8<W>(v);
        }
        done = nvec << 3;
    }
    // the tail after the last whole vector, or everything when a pointer is misaligned
    for (int64_t e = done + tid; e < a.n; e += stride) {
        float acc = __bfloat162float(a.x[0][e]);
#pragma unroll
        for (int s = 1; s < W; s++)
            acc += __bfloat162float(a.x[s][e]);
        a.y[e] = __float2bfloat16_rn(acc);
    }

    kevo_cta_barrier(p, 1); // end: no rank reads this rank's x after this
    kevo_epoch_end(p);
}

typedef void (*kernel_fn)(Args);

kernel_fn kernel_for(int W)
{
    switch (W) {
    case 1: return allreduce_oneshot<1>;
    case 2: return allreduce_oneshot<2>;
    case 3: return allreduce_oneshot<3>;
    case 4: return allreduce_oneshot<4>;
    case 5: return allreduce_oneshot<5>;
    case 6: return allreduce_oneshot<6>;
    case 7: return allreduce_oneshot<7>;
    case 8: return allreduce_oneshot<8>;
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

constexpr const char *kWho = "allreduce/oneshot_sm";

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
    a.y = (__nv_bfloat16 *)y->ptr;
    a.n = x->numel;
    bool vec = kevo_aligned16(y->ptr);
    for (int s = 0; s < W; s++) {
        a.x[s] = (const __nv_bfloat16 *)x->peer[s];
        vec = vec && kevo_aligned16(x->peer[s]);
    }
    a.vector = vec;
    a.p = kevo_pads_of(ctx);

    // The grid from N, W, the SM count, the occupancy and the pad only: the same on every
    // rank (window offsets, hence alignments, are the same on every rank too, but the grid
    // does not even depend on them). One vector per thread when the grid allows it.
    const int64_t items = a.n / 8 + 1;
    const int64_t pad_limit = kevo_pads_max_ctas(a.p, 2);
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
