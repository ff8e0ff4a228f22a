// allreduce_ce.cu — all-reduce (bf16, sum) whose peer traffic goes through the copy engines:
// every rank pulls each peer's x with cudaMemcpyAsync into its own symmetric scratch, then one
// local kernel adds.
//
// One call, all on ctx->stream:
//   start-barrier kernel   1 CTA: tell every rank "entered launch e" (e from the device), wait
//                          until every rank has; only then are the peers' x ready to copy
//   per chunk of C elements:
//     W-1 cudaMemcpyAsync  peer q's x[chunk] -> scratch slot of q (through x.peer[q])
//     add kernel           y[chunk] = sum over ranks in rank order, fp32, rounded once
//   end-barrier kernel     wait until every rank has finished copying from this rank's x
//
// Scratch: kevo_init takes (W-1) slots of C elements with ctx->scratch_alloc. C is N when that
// fits, otherwise the largest multiple of 2048 elements that does (the default scratch area is
// only twice the largest tensor); larger N is then done in several chunks. Each rank writes only
// its own scratch and reads it only after its own copies (stream order), so chunks need no
// barrier between them: the two barriers guard the peers' x only.
//
// Flags: 64-bit words [phase][source rank] of the signal pad, st.release.sys into every rank's
// pad, ld.acquire.sys on this rank's own pad, values the launch's epoch (never reset), every
// wait bounded by 5 s of %globaltimer and then __trap(). Epochs come from the device
// (kevo_epoch_begin / kevo_epoch_end, patterns/kevo_sync.cuh): each barrier launch advances
// the counter, so a call replayed from a CUDA graph gets new ones.
#include "kevo/kernel.h"
#include "kevo_sync.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = 256;
constexpr unsigned long long kTimeoutNs = 5000000000ull;
constexpr int64_t kChunkAlign = 2048; // elements: 4 KiB

struct State {
    __nv_bfloat16 *scratch; // W-1 slots of `chunk` elements, this rank's copy
    int64_t chunk;          // elements per slot
};

struct Pads {
    uint64_t *pad;
    uint64_t *peer_pad[KEVO_MAX_RANKS];
    int rank, world;
    kevo_pads epochs; // the epoch channel (kevo_sync.cuh)
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

// One CTA: thread q < world signals rank q and waits for rank q.
__global__ void barrier_kernel(const Pads a, int phase)
{
    const kevo_pads e = kevo_epoch_begin(a.epochs);
    const int q = threadIdx.x;
    if (q < a.world) {
        const size_t slot = (size_t)phase * a.world;
        store_release_sys(a.peer_pad[q] + slot + a.rank, e.epoch);
        const uint64_t *flag = a.pad + slot + q;
        if (load_acquire_sys(flag) < e.epoch) {
            const unsigned long long t0 = globaltimer_ns();
            while (load_acquire_sys(flag) < e.epoch)
                if (globaltimer_ns() - t0 > kTimeoutNs)
                    __trap();
        }
    }
    kevo_epoch_end(e);
}

struct AddArgs {
    const __nv_bfloat16 *src[KEVO_MAX_RANKS]; // rank order: this rank's x or a scratch slot
    __nv_bfloat16 *y;
    int64_t n;  // elements of this chunk
    int vector; // every pointer 16-byte aligned
};

template <int W>
__global__ void __launch_bounds__(kThreads) add_kernel(const AddArgs a)
{
    const int64_t stride = (int64_t)gridDim.x * kThreads;
    const int64_t nvec = a.vector ? a.n / 8 : 0;
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < nvec; i += stride) {
        uint4 v[W];
#pragma unroll
        for (int p = 0; p < W; p++)
            v[p] = reinterpret_cast<const uint4 *>(a.src[p])[i];
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
        reinterpret_cast<uint4 *>(a.y)[i] = out;
    }
    for (int64_t e = nvec * 8 + (int64_t)blockIdx.x * kThreads + threadIdx.x; e < a.n;
         e += stride) {
        float acc = __bfloat162float(a.src[0][e]);
#pragma unroll
        for (int p = 1; p < W; p++)
            acc += __bfloat162float(a.src[p][e]);
        a.y[e] = __float2bfloat16_rn(acc);
    }
}

template <int W>
void launch_add(const AddArgs &a, int grid, cudaStream_t s)
{
    add_kernel<W><<<grid, kThreads, 0, s>>>(a);
}

int check_tensors(const kevo_ctx *ctx)
{
    if (ctx->n_inputs < 1 || ctx->n_outputs < 1 || ctx->world < 1 || ctx->world > KEVO_MAX_RANKS)
        return -1;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != y->numel)
        return -1;
    return 0;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    if (check_tensors(ctx) != 0) {
        fprintf(stderr, "allreduce_ce: expected bf16 x and y of equal size\n");
        return 1;
    }
    const int W = ctx->world;
    const int64_t n = ctx->inputs[0].numel;
    State *st = (State *)calloc(1, sizeof *st);
    if (!st)
        return 1;
    ctx->user = st;
    if (W == 1 || n == 0)
        return 0;
    // Every rank computes the same chunk from the same figures, so the allocations match
    // (they need not: each rank only uses its own scratch).
    int64_t chunk = n;
    const size_t per_element = (size_t)(W - 1) * sizeof(__nv_bfloat16);
    if ((size_t)chunk * per_element > ctx->scratch_bytes_left) {
        chunk = (int64_t)(ctx->scratch_bytes_left / per_element) / kChunkAlign * kChunkAlign;
        if (chunk <= 0) {
            fprintf(stderr, "allreduce_ce: scratch area too small (%zu bytes left)\n",
                    ctx->scratch_bytes_left);
            return 1;
        }
    }
    void *local = NULL;
    if (ctx->scratch_alloc(ctx, (size_t)chunk * per_element, &local, NULL, NULL) != 0) {
        fprintf(stderr, "allreduce_ce: scratch_alloc failed\n");
        return 1;
    }
    st->scratch = (__nv_bfloat16 *)local;
    st->chunk = chunk;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = (const State *)ctx->user;
    if (!st || check_tensors(ctx) != 0)
        return 1;
    const int W = ctx->world, me = ctx->rank;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int64_t n = x->numel;
    cudaStream_t s = ctx->stream;

    Pads pads = {};
    pads.pad = ctx->signal;
    for (int q = 0; q < W; q++)
        pads.peer_pad[q] = ctx->signal_peer[q];
    pads.rank = me;
    pads.world = W;
    pads.epochs = kevo_pads_of(ctx);

    const int64_t step = W > 1 ? st->chunk : n; // elements per chunk

    barrier_kernel<<<1, 32, 0, s>>>(pads, 0); // the peers' x are ready after this
    for (int64_t off = 0; off < n; off += step) {
        const int64_t len = n - off < step ? n - off : step;
        AddArgs a = {};
        a.y = (__nv_bfloat16 *)y->ptr + off;
        a.n = len;
        int aligned = (uintptr_t)a.y % 16 == 0;
        for (int q = 0, slot = 0; q < W; q++) {
            if (q == me) {
                a.src[q] = (const __nv_bfloat16 *)x->ptr + off;
            } else {
                __nv_bfloat16 *dst = st->scratch + (size_t)slot++ * st->chunk;
                cudaError_t e = cudaMemcpyAsync(dst, (const __nv_bfloat16 *)x->peer[q] + off,
                                                (size_t)len * sizeof(__nv_bfloat16),
                                                cudaMemcpyDeviceToDevice, s);
                if (e != cudaSuccess) {
                    fprintf(stderr, "allreduce_ce: cudaMemcpyAsync: %s\n", cudaGetErrorString(e));
                    return 1;
                }
                a.src[q] = dst;
            }
            aligned = aligned && (uintptr_t)a.src[q] % 16 == 0;
        }
        a.vector = aligned;
        const int64_t items = aligned ? len / 8 + 1 : len;
        int64_t grid = (items + kThreads - 1) / kThreads;
        if (grid > 4 * (int64_t)ctx->sm_count)
            grid = 4 * (int64_t)ctx->sm_count;
        if (grid < 1)
            grid = 1;
        switch (W) {
        case 1: launch_add<1>(a, (int)grid, s); break;
        case 2: launch_add<2>(a, (int)grid, s); break;
        case 3: launch_add<3>(a, (int)grid, s); break;
        case 4: launch_add<4>(a, (int)grid, s); break;
        case 5: launch_add<5>(a, (int)grid, s); break;
        case 6: launch_add<6>(a, (int)grid, s); break;
        case 7: launch_add<7>(a, (int)grid, s); break;
        default: launch_add<8>(a, (int)grid, s); break;
        }
    }
    barrier_kernel<<<1, 32, 0, s>>>(pads, 1); // nobody copies from this rank's x after this
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "allreduce_ce: launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user); // the scratch belongs to the harness
    ctx->user = NULL;
}
