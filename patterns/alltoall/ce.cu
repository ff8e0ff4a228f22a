// ce.cu — all-to-all (bf16, equal chunks) whose peer traffic goes through the copy engines:
// every rank pulls chunk r of every peer's x straight into its own y with cudaMemcpyAsync.
//
// One call, on ctx->stream (C = N/W):
//   start kernel       CTA 0: kevo_cta_barrier phase 0. On entry only this rank's x is known
//                      to hold this call's values, a peer's x once that peer has entered the
//                      call, so no copy from a peer is enqueued before this kernel. With
//                      LOCAL = 1 the other CTAs copy the own chunk y[r*C ..] <- x[r*C ..] with
//                      16-byte loads and stores meanwhile (under the barrier's wait).
//   W-1 cudaMemcpyAsync  x_s[r*C .. + C] -> y[s*C ..] for s = r+1, r+2, ... (mod W: at any
//                      moment the ranks read from different peers), through x.peer[s]
//   (LOCAL = 0)        cudaMemcpyAsync of the own chunk, device to device
//   end kernel         CTA 0: kevo_cta_barrier phase 1. Every peer's copies from this rank's x
//                      came before it on that peer's stream, so after it nobody reads this
//                      rank's x. With LOCAL = 2 the other CTAs copy the own chunk here instead
//                      (under the end barrier's wait).
//   LOCAL = 3          the copies run on a side stream, forked from ctx->stream after the start
//                      kernel and joined back before the end kernel (docs/abi.md rule 4), while
//                      a kernel on ctx->stream copies the own chunk: on one stream a copy and a
//                      kernel run one after the other, so LOCAL 0..2 pay the own chunk's local
//                      copy (~70 us at 256 MiB) on top of the copy engine's ~350 us.
//
// Why it should be fast: the copy engines move the peers' chunks with no SM at up to ~397 GB/s
// (above SM loads' ~370 GB/s), 256-byte NVLink payloads, straight into y (no staging); the own
// chunk is a local copy hidden, where possible, under a barrier's wait. One stream orders all
// of it, so the peers' chunks go one after the other, each at the full link rate. For large
// sizes (NCCL: 391 us at 256 MiB, W = 2); small sizes pay a launch per copy and kernel.
//
// Synchronisation: peers' x are read only by copies enqueued between the two barrier kernels;
// y is written only on this rank. Flags: words of the signal pad per [phase][rank] holding
// epochs, st.release.sys / ld.acquire.sys (kevo_sync.cuh), never reset; waits trap after 5 s.
// Both barrier kernels are launched with grids that are the same on every rank, and only CTA 0
// touches flags. Epochs are the device's (kevo_epoch_begin / kevo_epoch_end, channel 0): every
// launch of the kernel (the LOCAL = 3 own-chunk launch too) advances channel 0 once, and every
// rank makes the same launches in the same order, so a call replayed from a CUDA graph gets
// new epochs that agree across ranks. The copies need no buffer of their own (x -> y
// directly), so nothing alternates from call to call.
//
// kevo:pattern problem=alltoall transport=ce fusion=unfused
// kevo:param LOCAL default=3 values=0,1,2,3
// kevo:param LOCAL_CTAS default=132 values=16,32,66,132,264
// kevo:param UNROLL default=4 values=1,2,4,8
#define LOCAL 3
#define LOCAL_CTAS 132
#define UNROLL 4

#include "kevo/kernel.h"
#include "kevo_host.cuh"
#include "kevo_side.cuh"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr const char *kWho = "alltoall/ce";
constexpr int kThreads = 256;

struct State { // LOCAL = 3: the copies' stream
    kevo_side side;
};

struct Args {
    const __nv_bfloat16 *src; // own chunk of x (LOCAL 1 or 2 in this kernel)
    __nv_bfloat16 *dst;       // own chunk of y
    int64_t c;                // elements to copy here (0: none)
    int vector;
    int phase;
    kevo_pads p;
};

// CTAs 1..: copy a.c elements of the own chunk (none when a.c is 0).
__device__ __forceinline__ void copy_own(const Args &a)
{
    const int64_t stride = (int64_t)(gridDim.x - 1) * kThreads;
    const int64_t tid = (int64_t)(blockIdx.x - 1) * kThreads + threadIdx.x;
    int64_t done = 0;
    if (a.vector) {
        const int64_t nvec = a.c >> 3;
        const uint4 *s = reinterpret_cast<const uint4 *>(a.src);
        uint4 *d = reinterpret_cast<uint4 *>(a.dst);
        int64_t i = tid;
        for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
            uint4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                v[u] = s[i + u * stride];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                d[i + u * stride] = v[u];
        }
        for (; i < nvec; i += stride)
            d[i] = s[i];
        done = nvec << 3;
    }
    for (int64_t e = done + tid; e < a.c; e += stride)
        a.dst[e] = a.src[e];
}

// CTA 0: the barrier (none when phase < 0); CTAs 1..: the own chunk, when this kernel has it.
// Every CTA takes the launch's epoch and hands it on, whatever its role.
__global__ void __launch_bounds__(kThreads) barrier_copy_kernel(const __grid_constant__ Args a)
{
    const kevo_pads p = kevo_epoch_begin(a.p);
    if (blockIdx.x == 0) {
        if (a.phase >= 0)
            kevo_cta_barrier(p, a.phase);
    } else {
        copy_own(a);
    }
    kevo_epoch_end(p);
}

int check_tensors(const kevo_ctx *ctx, const char **why)
{
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || W < 1 || W > KEVO_MAX_RANKS) {
        *why = "bad context (tensors or world)";
        return -1;
    }
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel ||
        x->numel % W != 0) {
        *why = "expected bf16 x and y of N elements, N a multiple of W";
        return -1;
    }
    return 0;
}

int fail(const char *what, cudaError_t e)
{
    return kevo_fail(kWho, "%s: %s", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    ctx->user = NULL;
    if (LOCAL != 3)
        return 0;
    State *st = kevo_state_new<State>(ctx, kWho); // kevo_fini frees it, also after a failure
    if (!st)
        return 1;
    const cudaError_t e = kevo_side_create(&st->side);
    return e == cudaSuccess ? 0 : fail("creating the side stream and its events", e);
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    kevo_side_destroy(&st->side);
    kevo_state_free(ctx);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t c = x->numel / W;
    const size_t bytes = (size_t)c * sizeof(__nv_bfloat16);
    cudaStream_t s = ctx->stream;
    const State *st = LOCAL == 3 ? kevo_state_of<State>(ctx, kWho) : NULL;
    if (LOCAL == 3 && !st)
        return 1;

    // Tensor pointers change between calls: read them from ctx every time.
    const __nv_bfloat16 *own_src = (const __nv_bfloat16 *)x->ptr + (int64_t)r * c;
    __nv_bfloat16 *own_dst = (__nv_bfloat16 *)y->ptr + (int64_t)r * c;

    // The grid of the kernel that copies the own chunk: from C alone (same on every rank; only
    // CTA 0 uses flags, and kevo_cta_barrier's slots depend on the grid, so the two barrier
    // kernels' grids are fixed per size: 1 + copy CTAs for the one that copies, 1 otherwise).
    const int64_t copy_ctas = kevo_clamp_grid(((c + 7) / 8 + kThreads - 1) / kThreads, LOCAL_CTAS);

    Args a = {};
    a.p = kevo_pads_of(ctx);
    // kevo_cta_barrier(p, phase) in CTA 0 uses flags (phase * grid) * W .. + W - 1, within the
    // pad's flags (the epoch channels after them excluded)
    if ((uint64_t)(copy_ctas + 2) * (uint64_t)W > a.p.words)
        return kevo_fail(kWho, "the signal pad is too small");
    a.src = own_src;
    a.dst = own_dst;
    a.vector = kevo_aligned16(own_src) && kevo_aligned16(own_dst);

    // start barrier (+ own chunk with LOCAL = 1)
    a.phase = 0;
    a.c = LOCAL == 1 ? c : 0;
    barrier_copy_kernel<<<LOCAL == 1 ? (unsigned)(1 + copy_ctas) : 1u, kThreads, 0, s>>>(a);
    if (kevo_launched(kWho, "start kernel launch"))
        return 1;
    cudaError_t e;

    // LOCAL = 3: the copies go on the side stream, forked after the start kernel
    cudaStream_t cs = s;
    if (LOCAL == 3) {
        if ((e = kevo_side_fork(st->side, s)) != cudaSuccess)
            return fail("forking the side stream", e);
        cs = st->side.stream;
    }
    for (int k = 1; k < W; k++) {
        const int q = (r + k) % W;
        const __nv_bfloat16 *src = (const __nv_bfloat16 *)x->peer[q] + (int64_t)r * c;
        __nv_bfloat16 *dst = (__nv_bfloat16 *)y->ptr + (int64_t)q * c;
        e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cs);
        if (e != cudaSuccess)
            return fail("cudaMemcpyAsync from a peer", e);
    }
    if (LOCAL == 3) { // the own chunk on ctx->stream meanwhile, then the join
        a.phase = -1;
        a.c = c;
        barrier_copy_kernel<<<(unsigned)(1 + copy_ctas), kThreads, 0, s>>>(a);
        if (kevo_launched(kWho, "own chunk kernel launch"))
            return 1;
        if ((e = kevo_side_join(st->side, s)) != cudaSuccess)
            return fail("joining the side stream", e);
    }
    if (LOCAL == 0) { // the own chunk by the copy engine too
        e = cudaMemcpyAsync(own_dst, own_src, bytes, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess)
            return fail("cudaMemcpyAsync of the own chunk", e);
    }

    // end barrier (+ own chunk with LOCAL = 2)
    a.phase = 1;
    a.c = LOCAL == 2 ? c : 0;
    barrier_copy_kernel<<<LOCAL == 2 ? (unsigned)(1 + copy_ctas) : 1u, kThreads, 0, s>>>(a);
    return kevo_launched(kWho, "end kernel launch");
}
