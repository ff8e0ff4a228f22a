// kevo_side.cuh — stream-level pipelines: a side stream forked from ctx->stream and joined back
// within one call (docs/abi.md rule 4), one-CTA kernels that signal and wait for cross-GPU
// flags between stream operations, and a kernel that sums W bf16 sources into one output.
//
// Why: on one stream a copy engine's copy and a kernel run one after the other. With a side
// stream the copy engine moves one block while the SMs compute or reduce another; the stream
// order carries every local dependency, and the flag kernels carry the cross-GPU ones (a copy
// from a peer's buffer may start only once that peer's stream has filled it).
//
//   kevo_init:  kevo_side_create(&side)              kevo_fini: kevo_side_destroy(&side)
//   kevo_run:   kevo_side_fork(side, ctx->stream)     ... work on side.stream and ctx->stream,
//               ordered where needed by kevo_stream_after(ev, from, to) ...
//               kevo_side_join(side, ctx->stream)     (before kevo_run returns, always)
//
// Host order must be a valid serial order. CUDA runs streams through a few hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), so two streams of a rank may share one, and then
// work waits behind whatever was enqueued before it on either. A kernel that waits for a peer's
// signal must therefore be enqueued after every operation of this rank that the peers wait for
// before they send it. With its wait kernels enqueued ahead of its own GEMMs,
// gemm_reducescatter's pipeline failed at m1024 and passed at m64, most likely because both
// ranks' GEMMs queued behind their waits until the 5 s trap; enqueued after them it passes.
#ifndef KEVO_PATTERNS_SIDE_CUH
#define KEVO_PATTERNS_SIDE_CUH

#include <stdint.h>

#include "kevo/kernel.h"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

struct kevo_side {
    cudaStream_t stream;
    cudaEvent_t forked, joined;
};

// kevo_init: the stream (non-blocking) and its two events. On failure, what was made stays in
// *s for kevo_side_destroy.
static inline cudaError_t kevo_side_create(kevo_side *s)
{
    cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->forked, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->joined, cudaEventDisableTiming);
    return e;
}

// kevo_fini: destroys what kevo_side_create made (a zeroed struct is fine).
static inline void kevo_side_destroy(kevo_side *s)
{
    if (s->joined)
        cudaEventDestroy(s->joined);
    if (s->forked)
        cudaEventDestroy(s->forked);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    s->stream = NULL;
    s->forked = s->joined = NULL;
}

// `to` runs what is enqueued on it next only after what `from` has so far (ev: an event of
// this rank, re-recorded at every use; a wait takes the latest record).
static inline cudaError_t kevo_stream_after(cudaEvent_t ev, cudaStream_t from, cudaStream_t to)
{
    cudaError_t e = cudaEventRecord(ev, from);
    return e == cudaSuccess ? cudaStreamWaitEvent(to, ev, 0) : e;
}

// The side stream starts this call's work after what ctx->stream has enqueued so far.
static inline cudaError_t kevo_side_fork(const kevo_side &s, cudaStream_t main)
{
    return kevo_stream_after(s.forked, main, s.stream);
}

// ctx->stream goes on only after everything enqueued on the side stream: the call ends there.
static inline cudaError_t kevo_side_join(const kevo_side &s, cudaStream_t main)
{
    return kevo_stream_after(s.joined, s.stream, main);
}

// The flag kernels below take their epochs from the device (kevo_epoch_begin), on the channel
// of the pads they are given: kernels that may run at the same time (one on ctx->stream, one on
// a side stream) need pads of different channels (kevo_pads_of(ctx, channel)), and a signal and
// the wait that pairs with it must be launched as often per call on their two channels.

// One CTA of 32 threads, after this stream's earlier work: sets flag `base + rank` of rank
// `dest`'s pad (dest < 0: of every peer's) to this launch's epoch. Flags hold epochs, so the
// slots are reused by every call and never reset.
__global__ void __launch_bounds__(32)
    kevo_signal_kernel(const kevo_pads pads, int dest, uint64_t base)
{
    const kevo_pads p = kevo_epoch_begin(pads);
    const int q = threadIdx.x;
    if (q < p.world && q != p.rank && (dest < 0 || q == dest))
        kevo_signal(p, q, base + (uint64_t)p.rank);
    kevo_epoch_end(p);
}

// One CTA of 32 threads: waits until flag `base + q` of this rank's pad holds this launch's
// epoch for every peer q (bounded: traps after KEVO_WAIT_TIMEOUT_NS); what this stream runs
// next may read what those peers published before signalling.
__global__ void __launch_bounds__(32) kevo_wait_kernel(const kevo_pads pads, uint64_t base)
{
    const kevo_pads p = kevo_epoch_begin(pads);
    const int q = threadIdx.x;
    if (q < p.world && q != p.rank)
        kevo_wait(p, base + (uint64_t)q);
    kevo_epoch_end(p);
}

// One CTA of 32 threads: kevo_cta_barrier(p, phase) — every rank has reached this point of
// its stream (the same grid of one CTA on every rank). As a call's start barrier it tells that
// every peer has entered the call (its inputs hold this call's values); as its end barrier,
// that every peer's work before it (copies from this rank's buffers included) is done.
__global__ void __launch_bounds__(32) kevo_barrier_kernel(const kevo_pads pads, int phase)
{
    const kevo_pads p = kevo_epoch_begin(pads);
    kevo_cta_barrier(p, phase);
    kevo_epoch_end(p);
}

// dst[0 .. n) = the sum of src[0..W-1][0 .. n) in fp32, in index order, rounded once (the same
// bits on every rank that sums the same sources in the same order). vec: every pointer 16-byte
// aligned (vector body, scalar tail); otherwise element by element.
struct kevo_sum_args {
    const __nv_bfloat16 *src[KEVO_MAX_RANKS];
    __nv_bfloat16 *dst;
    int64_t n;
    int vec;
};

template <int W> __global__ void __launch_bounds__(256) kevo_sum_kernel(const kevo_sum_args a)
{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t nvec = a.vec ? a.n / 8 : 0;
    for (int64_t i = tid; i < nvec; i += stride) {
        uint4 v[W];
#pragma unroll
        for (int q = 0; q < W; q++)
            v[q] = reinterpret_cast<const uint4 *>(a.src[q])[i];
        reinterpret_cast<uint4 *>(a.dst)[i] = kevo_sum_bf16x8<W>(v);
    }
    for (int64_t e = nvec * 8 + tid; e < a.n; e += stride) {
        float acc = __bfloat162float(a.src[0][e]);
#pragma unroll
        for (int q = 1; q < W; q++)
            acc += __bfloat162float(a.src[q][e]);
        a.dst[e] = __float2bfloat16_rn(acc);
    }
}

// Launches kevo_sum_kernel<W> with 256 threads and at most max_ctas CTAs (W = 2..8).
static inline cudaError_t kevo_sum_launch(int w, const kevo_sum_args &a, int64_t max_ctas,
                                          cudaStream_t s)
{
    int64_t grid = ((a.vec ? a.n / 8 : a.n) + 255) / 256;
    grid = grid < max_ctas ? grid : max_ctas;
    const dim3 g((unsigned)(grid > 0 ? grid : 1)), b(256);
    switch (w) {
    case 2: kevo_sum_kernel<2><<<g, b, 0, s>>>(a); break;
    case 3: kevo_sum_kernel<3><<<g, b, 0, s>>>(a); break;
    case 4: kevo_sum_kernel<4><<<g, b, 0, s>>>(a); break;
    case 5: kevo_sum_kernel<5><<<g, b, 0, s>>>(a); break;
    case 6: kevo_sum_kernel<6><<<g, b, 0, s>>>(a); break;
    case 7: kevo_sum_kernel<7><<<g, b, 0, s>>>(a); break;
    case 8: kevo_sum_kernel<8><<<g, b, 0, s>>>(a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

#endif
