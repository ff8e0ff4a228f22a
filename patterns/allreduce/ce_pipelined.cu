// ce_pipelined.cu — two-shot all-reduce (bf16, sum) whose peer traffic goes through the copy
// engines: each rank pulls its 1/W part of every peer's x with cudaMemcpyAsync into symmetric
// scratch, a local kernel sums the part chunk by chunk, and the copy engine pushes each reduced
// chunk into every peer's y (or, PUSH_SM = 1, the sum kernel stores it there itself).
//
// Parts: the vector's 16-byte slots (N / 8 rounded up) are cut into W parts of P slots,
// P = ceil(ceil(N / 8) / W); part r (elements [r*8P, min(N, (r+1)*8P))) is reduced by rank r,
// in chunks of L elements (L = the part / CHUNKS, rounded up to 4 KiB of bf16, smaller if the
// scratch area is short). Every chunk starts on a 16-byte boundary; the last one of the last
// part may end with a partial vector (validation N = 1000003), done one element at a time.
//
// One call, all on ctx->stream:
//   start barrier         1-CTA kernel, kevo_cta_barrier phase 0: every rank has entered the
//                         call, so its x holds this call's values and its y may be written;
//                         no copy touches a peer before it
//   for each chunk [off, off + len) of this rank's part:
//     W-1 cudaMemcpyAsync x.peer[q][off ..] -> scratch slot of q, q = rank+1, rank+2, ...
//                         (mod W: at any moment the ranks read from different peers)
//     sum kernel          y[off ..] = sum over ranks in rank order in fp32, rounded once (own
//                         x in place, the peers' from scratch: bit for bit the reference at
//                         W = 2); PUSH_SM = 1: also stored into every peer's y.peer[q][off ..]
//     W-1 cudaMemcpyAsync (PUSH_SM = 0) y[off ..] -> y.peer[q][off ..], q = rank+1, ...
//   end barrier           1-CTA kernel, kevo_cta_barrier phase 1
//
// Why it should be fast, and where: it is the bandwidth seed for 16 .. 256 MiB per rank. Every
// rank moves the bandwidth-optimal 2 (W-1)/W * 2N bytes, with copy engines (no SM issues a
// byte of link traffic; 256-byte NVLink payloads, 397 GB/s measured for one peer copy against
// ~370 GB/s for SM stores), and the sum is a local kernel whose scratch input was just written
// by the copy and is still in L2 (chunks of <= 32 MiB at the default CHUNKS), as is the y that
// the push copies read. Chunking keeps that L2 residency; it does NOT overlap transfers with
// sums: ctx->stream is one stream, so its copies and kernels run one after the other. What
// does overlap is the peers: while this rank's copy engine pulls (peer -> me), the peers pull
// from it (me -> peer), so both link directions are busy during every copy. Estimate at W = 2,
// 256 MiB: pulls 134 MB / ~397 GB/s = 338 us, pushes as much, sums ~60-100 us (L2-assisted),
// plus a few us per stream transition: ~750-800 us (NCCL: 1170 us). PUSH_SM = 1 replaces the
// push copies by the sum kernel's own peer stores (~363 us at 370 GB/s, the sum hidden under
// them): ~710-730 us. Neither reaches the 702 us (80 % of the link roofline) target by this
// estimate; see the report. At 64 KiB .. 1 MiB it loses (2 + 3 * CHUNKS * (W-1) operations
// on the stream, each with a launch gap).
//
// Synchronisation: peers' x are read (by this rank's copies) and peers' y written (by its
// pushes) only after the start barrier on this stream, and the end barrier follows them in
// stream order, so a rank passes its end barrier only after every rank's copies from its x
// and pushes into its y are complete. The scratch is written only by this rank's own copies
// and read only by its own sum kernel, both on this stream, so chunks and calls need no
// barrier for it. Each element of y is written by exactly one rank (its part's owner).
// Flags are words [phase][source rank] of the signal pad holding epochs (call_index + 1),
// st.release.sys / ld.acquire.sys (kevo_sync.cuh), never reset; waits trap after 5 s.
//
// kevo:pattern problem=allreduce transport=ce fusion=unfused
// kevo:param CHUNKS default=4 values=1,2,4,8,16,32
// kevo:param REDUCE_CTAS default=264 values=66,132,264,528,1056
// kevo:param PUSH_SM default=0 values=0,1
#define CHUNKS 4
#define REDUCE_CTAS 264
#define PUSH_SM 0

#include "kevo/kernel.h"
#include "kevo_sync.cuh"
#include "kevo_vec.cuh"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

constexpr int kThreads = 256;
constexpr int64_t kAlign = 2048; // elements (4 KiB): chunks and slots keep 16-byte alignment

struct State {
    __nv_bfloat16 *scratch; // W-1 slots of `chunk` elements, this rank's copy
    int64_t part;           // elements per part (a multiple of 8)
    int64_t chunk;          // elements per chunk and per slot (a multiple of kAlign)
    int world;
};

struct SumArgs {
    const __nv_bfloat16 *src[KEVO_MAX_RANKS]; // rank order: own x or a scratch slot
    __nv_bfloat16 *dst[KEVO_MAX_RANKS];       // dst[0]: this rank's y; PUSH_SM: then the peers'
    int64_t n;                                 // elements of this chunk
    int vector;                                // every src and dst 16-byte aligned
};

__global__ void __launch_bounds__(32) barrier_kernel(const __grid_constant__ kevo_pads p, int phase)
{
    kevo_cta_barrier(p, phase);
}

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

int fail(const char *what, cudaError_t e)
{
    fprintf(stderr, "allreduce/ce_pipelined: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const char *why = NULL;
    if (check_tensors(ctx, &why) != 0) {
        fprintf(stderr, "allreduce/ce_pipelined: %s\n", why);
        return 1;
    }
    State *st = (State *)calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "allreduce/ce_pipelined: out of host memory\n");
        return 1;
    }
    ctx->user = st;
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
    const size_t per_element = (size_t)(W - 1) * sizeof(__nv_bfloat16);
    if ((size_t)chunk * per_element > ctx->scratch_bytes_left) {
        chunk = (int64_t)(ctx->scratch_bytes_left / per_element) / kAlign * kAlign;
        if (chunk <= 0) {
            fprintf(stderr, "allreduce/ce_pipelined: scratch area too small (%zu bytes left)\n",
                    ctx->scratch_bytes_left);
            return 1;
        }
    }
    void *local = NULL;
    if (ctx->scratch_alloc(ctx, (size_t)chunk * per_element, &local, NULL, NULL) != 0) {
        fprintf(stderr, "allreduce/ce_pipelined: scratch_alloc of %zu bytes failed\n",
                (size_t)chunk * per_element);
        return 1;
    }
    st->scratch = (__nv_bfloat16 *)local;
    st->chunk = chunk;
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const State *st = (const State *)ctx->user;
    const char *why = NULL;
    if (!st || check_tensors(ctx, &why) != 0 || st->world != ctx->world) {
        fprintf(stderr, "allreduce/ce_pipelined: %s\n", why ? why : "kevo_init did not run");
        return 1;
    }
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

    barrier_kernel<<<1, 32, 0, s>>>(p, 0); // the peers' x and y are ready after this
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return fail("start barrier launch", e);
    for (int64_t off = lo; off < hi; off += st->chunk) {
        const int64_t len = hi - off < st->chunk ? hi - off : st->chunk;
        const size_t bytes = (size_t)len * sizeof(__nv_bfloat16);
        SumArgs a = {};
        a.n = len;
        a.dst[0] = yr + off;
        bool vec = kevo_aligned16(a.dst[0]);
        for (int k = 0; k < W; k++) {
            const int q = (r + k) % W; // own part first, then r+1, r+2, ...
            if (k == 0) {
                a.src[q] = xr + off;
            } else {
                __nv_bfloat16 *slot = st->scratch + (int64_t)(k - 1) * st->chunk;
                e = cudaMemcpyAsync(slot, (const __nv_bfloat16 *)x->peer[q] + off, bytes,
                                    cudaMemcpyDeviceToDevice, s);
                if (e != cudaSuccess)
                    return fail("cudaMemcpyAsync from a peer's x", e);
                a.src[q] = slot;
                if (PUSH_SM)
                    a.dst[k] = (__nv_bfloat16 *)y->peer[q] + off;
            }
            vec = vec && kevo_aligned16(a.src[q]) && (!PUSH_SM || kevo_aligned16(a.dst[k]));
        }
        a.vector = vec;
        int64_t grid = ((vec ? len / 8 : len) + kThreads - 1) / kThreads;
        if (grid > REDUCE_CTAS)
            grid = REDUCE_CTAS;
        if (grid < 1)
            grid = 1;
        sum<<<(unsigned)grid, kThreads, 0, s>>>(a);
        e = cudaGetLastError();
        if (e != cudaSuccess)
            return fail("sum kernel launch", e);
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
    barrier_kernel<<<1, 32, 0, s>>>(p, 1); // every copy from this x / into this y is done
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return fail("end barrier launch", e);
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user); // the scratch belongs to the harness
    ctx->user = NULL;
}
