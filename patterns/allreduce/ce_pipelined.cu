// ce_pipelined.cu — two-shot all-reduce (bf16, sum) whose reduce-scatter goes through the copy
// engines: each rank pulls its 1/W part of every peer's x with cudaMemcpyAsync into symmetric
// scratch, chunk by chunk on a side stream, while a kernel sums the chunks already pulled and
// stores each reduced chunk into every peer's y (PUSH_SM = 0: the copy engine pushes it).
//
// Parts: the vector's 16-byte slots (N / 8 rounded up) are cut into W parts of P slots,
// P = ceil(ceil(N / 8) / W); part r (elements [r*8P, min(N, (r+1)*8P))) is reduced by rank r,
// in chunks of L elements (L = the part / CHUNKS, rounded up to 4 KiB of bf16, smaller if the
// scratch area is short). Every chunk starts on a 16-byte boundary; the last one of the last
// part may end with a partial vector (validation N = 1000003), done one element at a time.
//
// One call (defaults: OVERLAP = 1, PUSH_SM = 1):
//   start barrier         1-CTA kernel on ctx->stream, kevo_cta_barrier phase 0: every rank has
//                         entered the call, so its x holds this call's values and its y may be
//                         written; no copy touches a peer before it
//   fork                  OVERLAP = 1: the pulls go on a side stream (docs/abi.md rule 4)
//   for each chunk i, [off, off + len) of this rank's part, slot set b = i & 1 (OVERLAP = 0:
//   one slot set, everything on ctx->stream):
//     side stream         waits for summed[b] (the sum of chunk i-2, the last reader of the
//                         slot set), then W-1 cudaMemcpyAsync x.peer[q][off ..] -> slot of q,
//                         q = rank+1, rank+2, ... (mod W: at any moment the ranks read from
//                         different peers), then records pulled[b]
//     ctx->stream         waits for pulled[b]; sum kernel: y[off ..] = sum over ranks in rank
//                         order in fp32, rounded once (own x in place, the peers' from the
//                         slots: bit for bit the reference at W = 2); PUSH_SM = 1: also stored
//                         into every peer's y.peer[q][off ..]; records summed[b];
//                         PUSH_SM = 0: W-1 cudaMemcpyAsync y[off ..] -> y.peer[q][off ..]
//   end barrier           1-CTA kernel on ctx->stream, kevo_cta_barrier phase 1; the wait for
//                         the last chunk's pulled[b] has joined the side stream back before it
//
// Why it should be fast, and where: it is the bandwidth seed for 16 .. 256 MiB per rank. Every
// rank moves the bandwidth-optimal 2 (W-1)/W * 2N bytes; the copy engine pulls chunk i+1 while
// the sum kernel reduces chunk i and stores it into the peers' y, so the link carries pulls and
// pushes at once and the sums leave the critical path. bench/link_overlap.cu measured what the
// link gives with both directions loaded: 376-386 GB/s per direction whatever the mix of copy
// engines and SM traffic, so at 256 MiB (268 MB each way) no schedule beats ~695 us; 757 us was
// measured at CHUNKS = 2 (4: 770, 8: 792, 32: 944 us: every chunk adds ~6 us of stream
// transitions; OVERLAP = 0: 912 us; PUSH_SM = 0 with OVERLAP: 1069 us, the copy engines'
// pushes and pulls queue behind each other). At 64 KiB .. 1 MiB it loses: 2 + CHUNKS * (2 +
// W-1) operations on two streams, each with a launch gap.
//
// Synchronisation: peers' x are read (by this rank's copies) and peers' y written (by its
// pushes) only after the start barrier, which the fork follows in stream order, and the end
// barrier follows them all (the join), so a rank passes its end barrier only after every
// rank's copies from its x and pushes into its y are complete. The scratch is written only by
// this rank's own copies and read only by its own sum kernels, ordered by the events above
// within a call and by ctx->stream across calls (the next call forks after this one's sums).
// Each element of y is written by exactly one rank (its part's owner). Flags are words
// [phase][source rank] of the signal pad holding epochs, st.release.sys / ld.acquire.sys
// (kevo_sync.cuh), never reset; waits trap after 5 s. The two barrier kernels take their
// epochs on the device (epoch channel 0, both on ctx->stream), and the slot set is chosen by
// the chunk's index within the call, not by the call's, so a call replayed from a CUDA graph
// is as correct as one made from the host.
//
// kevo:pattern problem=allreduce transport=ce fusion=unfused
// kevo:param CHUNKS default=2 values=1,2,4,8,16,32
// kevo:param REDUCE_CTAS default=264 values=66,132,264,528,1056
// kevo:param PUSH_SM default=1 values=0,1
// kevo:param OVERLAP default=1 values=0,1
#define CHUNKS 2
#define REDUCE_CTAS 264
#define PUSH_SM 1
#define OVERLAP 1

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

constexpr int kThreads = 256;
constexpr int64_t kAlign = 2048; // elements (4 KiB): chunks and slots keep 16-byte alignment

struct State {
    __nv_bfloat16 *scratch; // W-1 slots of `chunk` elements (OVERLAP: two such sets)
    int64_t part;           // elements per part (a multiple of 8)
    int64_t chunk;          // elements per chunk and per slot (a multiple of kAlign)
    int world;
    kevo_side side; // OVERLAP: the pulls' stream
    cudaEvent_t pulled[2], summed[2];
};

struct SumArgs {
    const __nv_bfloat16 *src[KEVO_MAX_RANKS]; // rank order: own x or a scratch slot
    __nv_bfloat16 *dst[KEVO_MAX_RANKS];       // dst[0]: this rank's y; PUSH_SM: then the peers'
    int64_t n;                                // elements of this chunk
    int vector;                               // every src and dst 16-byte aligned
};

template <int W>
__global__ void __launch_bounds__(kThreads) sum_kernel(const __grid_constant__ SumArgs a)
{
    constexpr int D = PUSH_SM ? W : 1; // destinations
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t tid = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    int64_t done = 0;
    if (a.vector) {
        const int64_t nvec = a.n >> 3;
        const uint4 *src[W];
#pragma unroll
        for (int s = 0; s < W; s++)
            src[s] = reinterpret_cast<const uint4 *>(a.src[s]);
        uint4 *dst[D];
#pragma unroll
        for (int d = 0; d < D; d++)
            dst[d] = reinterpret_cast<uint4 *>(a.dst[d]);
        constexpr int U = W <= 2 ? 4 : (W <= 4 ? 2 : 1); // vectors per rank in flight
        int64_t i = tid;
        for (; i + (U - 1) * stride < nvec; i += U * stride) {
            uint4 v[U][W];
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int s = 0; s < W; s++)
                    v[u][s] = src[s][i + u * stride];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint4 sum = kevo_sum_bf16x8<W>(v[u]);
#pragma unroll
                for (int d = 0; d < D; d++)
                    dst[d][i + u * stride] = sum;
            }
        }
        for (; i < nvec; i += stride) {
            uint4 v[W];
#pragma unroll
            for (int s = 0; s < W; s++)
                v[s] = src[s][i];
            const uint4 sum = kevo_sum_bf16x8<W>(v);
#pragma unroll
            for (int d = 0; d < D; d++)
                dst[d][i] = sum;
        }
        done = nvec << 3;
    }
    // the partial vector at the end, or everything when a pointer is misaligned
    for (int64_t e = done + tid; e < a.n; e += stride) {
        float acc = __bfloat162float(a.src[0][e]);
#pragma unroll
        for (int s = 1; s < W; s++)
            acc += __bfloat162float(a.src[s][e]);
        const __nv_bfloat16 sum = __float2bfloat16_rn(acc);
#pragma unroll
        for (int d = 0; d < D; d++)
            a.dst[d][e] = sum;
    }
}

typedef void (*sum_fn)(SumArgs);

sum_fn sum_for(int W)
{
    switch (W) {
    case 1: return sum_kernel<1>;
    case 2: return sum_kernel<2>;
    case 3: return sum_kernel<3>;
    case 4: return sum_kernel<4>;
    case 5: return sum_kernel<5>;
    case 6: return sum_kernel<6>;
    case 7: return sum_kernel<7>;
    case 8: return sum_kernel<8>;
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

constexpr const char *kWho = "allreduce/ce_pipelined";

int fail(const char *what, cudaError_t e)
{
    return kevo_fail(kWho, "%s: %s", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0)
        return kevo_fail(kWho, "%s", why);
    State *st = kevo_state_new<State>(ctx, kWho);
    if (!st)
        return 1;
    const int W = ctx->world;
    const int64_t n = ctx->inputs[0].numel;
    st->world = W;
    st->part = ((n + 7) / 8 + W - 1) / W * 8;
    if (W == 1 || n == 0) {
        st->chunk = st->part > 0 ? st->part : 1;
        return 0;
    }
    // The same figures on every rank give the same chunk and the same allocation (only this
    // rank uses its scratch, but symmetric is the rule of the area).
    int64_t chunk = (st->part + CHUNKS - 1) / CHUNKS;
    chunk = (chunk + kAlign - 1) / kAlign * kAlign;
    const size_t per_element = (size_t)(OVERLAP ? 2 : 1) * (W - 1) * sizeof(__nv_bfloat16);
    if ((size_t)chunk * per_element > ctx->scratch_bytes_left) {
        chunk = (int64_t)(ctx->scratch_bytes_left / per_element) / kAlign * kAlign;
        if (chunk <= 0)
            return kevo_fail(kWho, "scratch area too small (%zu bytes left)",
                             ctx->scratch_bytes_left);
    }
    void *local = NULL;
    if (ctx->scratch_alloc(ctx, (size_t)chunk * per_element, &local, NULL, NULL) != 0)
        return kevo_fail(kWho, "scratch_alloc of %zu bytes failed", (size_t)chunk * per_element);
    st->scratch = (__nv_bfloat16 *)local;
    st->chunk = chunk;
    if (!OVERLAP)
        return 0;
    cudaError_t e = kevo_side_create(&st->side);
    cudaEvent_t *events[] = {&st->pulled[0], &st->pulled[1], &st->summed[0], &st->summed[1]};
    for (size_t i = 0; e == cudaSuccess && i < sizeof events / sizeof *events; i++)
        e = cudaEventCreateWithFlags(events[i], cudaEventDisableTiming);
    return e == cudaSuccess ? 0 : fail("creating the side stream and its events", e);
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = kevo_state_of<State>(ctx, kWho);
    const char *why = NULL;
    if (!st)
        return 1;
    if (check_tensors(ctx, &why) != 0 || st->world != ctx->world)
        return kevo_fail(kWho, "%s", why ? why : "the world changed since kevo_init");
    const int W = ctx->world, r = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = x->numel;
    cudaStream_t s = ctx->stream;
    const kevo_pads p = kevo_pads_of(ctx);
    const sum_fn sum = sum_for(W);
    // tensor pointers change between calls: read them from ctx every time
    const __nv_bfloat16 *xr = (const __nv_bfloat16 *)x->ptr;
    __nv_bfloat16 *yr = (__nv_bfloat16 *)y->ptr;

    int64_t lo = (int64_t)r * st->part, hi = lo + st->part;
    lo = lo < n ? lo : n;
    hi = hi < n ? hi : n;

    kevo_barrier_kernel<<<1, 32, 0, s>>>(p, 0); // the peers' x and y are ready after this
    if (kevo_launched(kWho, "start barrier launch") != 0)
        return 1;
    cudaError_t e = cudaSuccess;
    // the pulls' stream: the side stream with OVERLAP (kevo_init made one when there are peers)
    const bool overlap = OVERLAP && st->side.stream != NULL && lo < hi;
    cudaStream_t cs = s;
    if (overlap) {
        if ((e = kevo_side_fork(st->side, s)) != cudaSuccess)
            return fail("forking the side stream", e);
        cs = st->side.stream;
    }
    int chunk_index = 0;
    for (int64_t off = lo; off < hi; off += st->chunk, chunk_index++) {
        const int64_t len = hi - off < st->chunk ? hi - off : st->chunk;
        const size_t bytes = (size_t)len * sizeof(__nv_bfloat16);
        const int b = overlap ? chunk_index & 1 : 0; // the slot set
        // OVERLAP: slot set b is free once the sum of chunk i-2 is done
        if (overlap && chunk_index >= 2 &&
            (e = cudaStreamWaitEvent(cs, st->summed[b], 0)) != cudaSuccess)
            return fail("waiting for a slot set", e);
        SumArgs a = {};
        a.n = len;
        a.dst[0] = yr + off;
        bool vec = kevo_aligned16(a.dst[0]);
        for (int k = 0; k < W; k++) {
            const int q = (r + k) % W; // own part first, then r+1, r+2, ...
            if (k == 0) {
                a.src[q] = xr + off;
            } else {
                __nv_bfloat16 *slot = st->scratch + ((int64_t)b * (W - 1) + (k - 1)) * st->chunk;
                e = cudaMemcpyAsync(slot, (const __nv_bfloat16 *)x->peer[q] + off, bytes,
                                    cudaMemcpyDeviceToDevice, cs);
                if (e != cudaSuccess)
                    return fail("cudaMemcpyAsync from a peer's x", e);
                a.src[q] = slot;
                if (PUSH_SM)
                    a.dst[k] = (__nv_bfloat16 *)y->peer[q] + off;
            }
            vec = vec && kevo_aligned16(a.src[q]) && (!PUSH_SM || kevo_aligned16(a.dst[k]));
        }
        a.vector = vec;
        // OVERLAP: the sum waits for its own pulls only (the last wait also joins cs back)
        if (overlap && (e = kevo_stream_after(st->pulled[b], cs, s)) != cudaSuccess)
            return fail("waiting for a chunk's pulls", e);
        const int64_t grid =
            kevo_clamp_grid(((vec ? len / 8 : len) + kThreads - 1) / kThreads, REDUCE_CTAS);
        sum<<<(unsigned)grid, kThreads, 0, s>>>(a);
        if (kevo_launched(kWho, "sum kernel launch") != 0)
            return 1;
        if (overlap && (e = cudaEventRecord(st->summed[b], s)) != cudaSuccess)
            return fail("recording a chunk's sum", e);
        if (!PUSH_SM) {
            for (int k = 1; k < W; k++) {
                const int q = (r + k) % W;
                e = cudaMemcpyAsync((__nv_bfloat16 *)y->peer[q] + off, yr + off, bytes,
                                    cudaMemcpyDeviceToDevice, s);
                if (e != cudaSuccess)
                    return fail("cudaMemcpyAsync into a peer's y", e);
            }
        }
    }
    kevo_barrier_kernel<<<1, 32, 0, s>>>(p, 1); // every copy from this x / into this y is done
    return kevo_launched(kWho, "end barrier launch");
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    cudaEvent_t events[] = {st->pulled[0], st->pulled[1], st->summed[0], st->summed[1]};
    for (size_t i = 0; i < sizeof events / sizeof *events; i++)
        if (events[i])
            cudaEventDestroy(events[i]);
    kevo_side_destroy(&st->side);
    kevo_state_free(ctx); // the scratch belongs to the harness
}
