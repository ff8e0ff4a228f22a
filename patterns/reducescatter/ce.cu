// ce.cu — reduce-scatter (bf16, sum) whose peer traffic goes through the copy engines: every
// rank pulls its own block of every peer's x with cudaMemcpyAsync into its symmetric scratch,
// step by step, and a local kernel sums each step into y.
//
// One call, all on ctx->stream (C = N/W; block r of every x is summed onto rank r):
//   start-barrier kernel  1 CTA: kevo_cta_barrier phase 0; on entry only this rank's x is
//                         known to hold this call's values, a peer's x once that peer has
//                         entered the call, so no copy from a peer is enqueued before it
//   for each step of L elements of the block (L = CHUNK_KB KiB of y, or all of it):
//     W-1 cudaMemcpyAsync x_s[r*C + off .. + L] -> scratch slot of s, for s = r+1, r+2, ...
//                         (mod W: at any moment the ranks read from different peers)
//     reduce kernel       y[off ..] = sum over ranks in rank order, fp32, rounded once
//                         (this rank's own x read in place, the peers' from scratch):
//                         bit for bit the reference at W = 2
//   end-barrier kernel    1 CTA: kevo_cta_barrier phase 1; every peer's copies from this
//                         rank's x came before it on that peer's stream, so after it nobody
//                         reads this rank's x
//
// Why it should be fast: the copy engines move the peers' data without SMs at up to ~397 GB/s
// (above SM loads' ~370 GB/s) with 256-byte NVLink payloads; the sum is a local, HBM-bound
// kernel. Steps of a few MiB keep the copied slice in L2 for the reduce that follows it. One
// stream orders copies and kernels, so a reduce runs between copies rather than under them:
// the total is about 2N(W-1)/W / 397 GB/s plus the reduces (~20-30% at W = 2); this seed is
// for large sizes (NCCL: 739 us at 256 MiB, W = 2), and loses at small sizes (a launch per
// copy and kernel).
//
// Synchronisation: each rank writes only its own scratch and y, and reads its scratch only
// after its own copies (stream order), so steps need no barrier; the two barriers guard the
// peers' x. Flags: words [phase][rank] of the signal pad holding epochs, st.release.sys /
// ld.acquire.sys (kevo_sync.cuh), never reset; waits trap after 5 s. Each barrier kernel takes
// its epoch on the device (kevo_epoch_begin / kevo_epoch_end, channel 0): two launches per
// call on every rank in the same order, so the epochs agree launch by launch, and a call
// replayed from a CUDA graph gets new ones. The scratch is a single buffer: it is written by
// this rank's copies and read by this rank's reduce only, in stream order.
//
// kevo:pattern problem=reducescatter transport=ce fusion=unfused
// kevo:param CHUNK_KB default=8192 values=1024,2048,4096,8192,16384,32768,1048576
// kevo:param REDUCE_CTAS default=264 values=66,132,264,528,1056
// kevo:param UNROLL default=2 values=1,2,4
#define CHUNK_KB 8192
#define REDUCE_CTAS 264
#define UNROLL 2

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

constexpr int kThreads = 256;
constexpr int64_t kAlign = 2048; // elements (4 KiB): steps and slots keep 16-byte alignment

struct State {
    __nv_bfloat16 *scratch; // W-1 slots of `slot` elements
    int64_t step;           // elements per step (a multiple of kAlign, or the whole block)
    int64_t slot;           // elements between slots (a multiple of kAlign)
};

struct ReduceArgs {
    const __nv_bfloat16 *src[KEVO_MAX_RANKS]; // rank order: own x or a scratch slot
    __nv_bfloat16 *y;
    int64_t n;  // elements of this step
    int vector; // every pointer 16-byte aligned
    int world;
};

__global__ void __launch_bounds__(32)
    barrier_kernel(const __grid_constant__ kevo_pads pads, int phase)
{
    const kevo_pads p = kevo_epoch_begin(pads);
    kevo_cta_barrier(p, phase);
    kevo_epoch_end(p);
}

template <int W> __device__ __forceinline__ void reduce_w(const ReduceArgs &a)
{
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t tid = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    int64_t done = 0;
    if (a.vector) {
        const int64_t nvec = a.n >> 3;
        const uint4 *src[W];
#pragma unroll
        for (int s = 0; s < W; s++)
            src[s] = reinterpret_cast<const uint4 *>(a.src[s]);
        uint4 *y = reinterpret_cast<uint4 *>(a.y);
        int64_t i = tid;
        for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
            uint4 v[UNROLL][W];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int s = 0; s < W; s++)
                    v[u][s] = src[s][i + u * stride];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                y[i + u * stride] = kevo_sum_bf16x8<W>(v[u]);
        }
        for (; i < nvec; i += stride) {
            uint4 v[W];
#pragma unroll
            for (int s = 0; s < W; s++)
                v[s] = src[s][i];
            y[i] = kevo_sum_bf16x8<W>(v);
        }
        done = nvec << 3;
    }
    for (int64_t e = done + tid; e < a.n; e += stride) {
        float acc = __bfloat162float(a.src[0][e]);
#pragma unroll
        for (int s = 1; s < W; s++)
            acc += __bfloat162float(a.src[s][e]);
        a.y[e] = __float2bfloat16_rn(acc);
    }
}

__global__ void __launch_bounds__(kThreads) reduce_kernel(const __grid_constant__ ReduceArgs a)
{
    switch (a.world) {
    case 1: reduce_w<1>(a); break;
    case 2: reduce_w<2>(a); break;
    case 3: reduce_w<3>(a); break;
    case 4: reduce_w<4>(a); break;
    case 5: reduce_w<5>(a); break;
    case 6: reduce_w<6>(a); break;
    case 7: reduce_w<7>(a); break;
    default: reduce_w<8>(a); break;
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
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel * W) {
        *why = "expected bf16 x of N and y of N/W elements";
        return -1;
    }
    return 0;
}

} // namespace

constexpr const char *kWho = "reducescatter/ce";

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    const int W = ctx->world;
    const int64_t c = ctx->outputs[0].numel;
    if (W == 1 || c == 0)
        return 0;
    // Every rank computes the same step and slot from the same figures, so the allocations
    // match (only this rank uses its scratch, but symmetric is the rule of the area).
    int64_t step = (int64_t)CHUNK_KB * 1024 / 2;
    step = step / kAlign * kAlign;
    if (step < kAlign)
        step = kAlign;
    if (step >= c)
        step = c;
    int64_t slot = (step + kAlign - 1) / kAlign * kAlign;
    const size_t per_slot = sizeof(__nv_bfloat16) * (size_t)(W - 1);
    if ((size_t)slot * per_slot > ctx->scratch_bytes_left) {
        step = (int64_t)(ctx->scratch_bytes_left / per_slot) / kAlign * kAlign;
        slot = step;
        if (step <= 0)
            return kevo_fail(kWho, "scratch area too small (%zu bytes left)",
                             ctx->scratch_bytes_left);
    }
    void *local = NULL;
    if (ctx->scratch_alloc(ctx, (size_t)slot * per_slot, &local, NULL, NULL) != 0)
        return kevo_fail(kWho, "scratch_alloc of %zu bytes failed", (size_t)slot * per_slot);
    st->scratch = (__nv_bfloat16 *)local;
    st->step = step;
    st->slot = slot;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const char *why = NULL;
    if (!st)
        return 1;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t c = y->numel;
    cudaStream_t s = ctx->stream;
    const kevo_pads p = kevo_pads_of(ctx);
    if (kevo_pads_max_ctas(p, 2) < 1)
        return kevo_fail(kWho, "the signal pad is too small");
    const int64_t step = W > 1 && st->step > 0 ? st->step : (c > 0 ? c : 1);
    // tensor pointers change between calls: read them from ctx every time
    const __nv_bfloat16 *own = (const __nv_bfloat16 *)x->ptr + (int64_t)r * c;

    barrier_kernel<<<1, 32, 0, s>>>(p, 0); // the peers' x are ready after this
    if (kevo_launched(kWho, "start barrier launch") != 0)
        return 1;
    for (int64_t off = 0; off < c; off += step) {
        const int64_t len = c - off < step ? c - off : step;
        ReduceArgs a = {};
        a.y = (__nv_bfloat16 *)y->ptr + off;
        a.n = len;
        a.world = W;
        bool vec = kevo_aligned16(a.y);
        for (int k = 0; k < W; k++) {
            const int q = (r + k) % W; // own block first, then r+1, r+2, ...
            if (q == r) {
                a.src[q] = own + off;
            } else {
                __nv_bfloat16 *dst = st->scratch + (int64_t)(k - 1) * st->slot;
                const __nv_bfloat16 *src = (const __nv_bfloat16 *)x->peer[q] + (int64_t)r * c + off;
                const cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)len * sizeof(__nv_bfloat16),
                                                      cudaMemcpyDeviceToDevice, s);
                if (e != cudaSuccess)
                    return kevo_fail(kWho, "cudaMemcpyAsync from a peer: %s",
                                     cudaGetErrorString(e));
                a.src[q] = dst;
            }
            vec = vec && kevo_aligned16(a.src[q]);
        }
        a.vector = vec;
        const int64_t grid =
            kevo_clamp_grid(((vec ? len / 8 : len) + kThreads - 1) / kThreads, REDUCE_CTAS);
        reduce_kernel<<<(unsigned)grid, kThreads, 0, s>>>(a);
        if (kevo_launched(kWho, "reduce launch") != 0)
            return 1;
    }
    barrier_kernel<<<1, 32, 0, s>>>(p, 1); // nobody copies from this rank's x after this
    return kevo_launched(kWho, "end barrier launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    kevo_state_free(ctx); // the scratch belongs to the harness
}
