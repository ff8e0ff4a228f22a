// reference.cu — the NCCL baseline of problems/moe_dispatch: a Megatron-style token dispatch
// (the all-to-all with a permute before it and a sort of the received chunks after it).
//
// One call, all on ctx->stream:
//  1. count: rows this rank sends to each (destination rank, local expert), i.e. to each global
//     expert e = d*L + l, from topk_ids (one thread per token; a row with an id out of range or
//     a repeated id raises a flag that travels with the counts).
//  2. exchange the counts: ncclSend/ncclRecv of L + 1 ints with every rank (itself included) in
//     one group, so each rank learns how many rows every source sends to each of its experts.
//  3. host sync: the counts are copied to pinned host memory and the host waits for them
//     (cudaStreamSynchronize). This is needed because ncclSend/ncclRecv take their sizes as host
//     values; it is the sync Megatron's dispatcher does too. A device-initiated dispatch
//     (peers' memory through the symmetric window) needs none.
//  4. pack: rows in (global expert, token) order, i.e. grouped by destination and within it by
//     local expert, into a send buffer (one block per expert finds its tokens in token order,
//     then one block per row copies x[t]).
//  5. exchange the rows: in one group, the block for rank d to rank d and the block from rank s
//     into a staging buffer at s's offset, so staging holds (source, local expert, token).
//  6. unpack: one block per (source, local expert) chunk copies it into recv_x at its place in
//     (local expert, source, token) order; the same kernel writes counts.
// Each (token, expert) pair travels as its own row (a token routed to two experts of one rank
// is sent twice), as Megatron's all-to-all does. It is the fair baseline: what a competent
// engineer writes with NCCL and plain CUDA kernels, with no artificial slowness.
//
// Because of the host sync in step 3 this reference cannot be captured into a CUDA graph; the
// evaluator captures only candidates.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 256;     // index kernels
constexpr int kCopyThreads = 128; // row copies: one block per row

#define CUDA_OK(call)                                                                           \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "moe_dispatch reference: %s: %s\n", #call, cudaGetErrorString(e_)); \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

#define NCCL_OK(call, comm)                                                 \
    do {                                                                    \
        ncclResult_t r_ = (call);                                           \
        if (r_ != ncclSuccess) {                                            \
            fprintf(stderr, "moe_dispatch reference: %s: %s (%s)\n", #call, \
                    ncclGetErrorString(r_), ncclGetLastError(comm));        \
            return 1;                                                       \
        }                                                                   \
    } while (0)

struct State {
    int64_t T, H, E, k, L, cap;
    int W;
    int *meta;            // device: send [W][L+1], then recv [W][L+1] (slot L: bad-input flag)
    int *host;            // pinned copy of meta
    int *row_src;         // device [T*k]: source token of each packed row
    __nv_bfloat16 *pack;  // [T*k][H]: rows to send, by (destination, local expert, token)
    __nv_bfloat16 *stage; // [cap][H]: rows received, by (source, local expert, token)
};

// Exclusive rank of `flag` among the block's threads (in thread order) and the block's total.
// Every thread of the block must call it.
__device__ int block_rank(bool flag, int *total)
{
    __shared__ int warp_count[kThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0)
        warp_count[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, all = 0;
    for (int w = 0; w < kThreads / 32; w++) {
        before += w < warp ? warp_count[w] : 0;
        all += warp_count[w];
    }
    __syncthreads();
    *total = all;
    return before + __popc(ballot & ((1u << lane) - 1u));
}

// Copy one row of h bf16: 16-byte vectors when every row start is 16-byte aligned.
__device__ __forceinline__ void copy_row(__nv_bfloat16 *dst, const __nv_bfloat16 *src, int64_t h,
                                         bool vec)
{
    if (vec) {
        const uint4 *s = reinterpret_cast<const uint4 *>(src);
        uint4 *d = reinterpret_cast<uint4 *>(dst);
        for (int64_t i = threadIdx.x; i < h / 8; i += blockDim.x)
            d[i] = s[i];
    } else {
        for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
            dst[i] = src[i];
    }
}

// 1. Rows per global expert (send[d][l] for e = d*L + l); bad ids flag every destination.
__global__ void count_rows(const int *ids, int64_t T, int k, int E, int L, int W, int *send)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T)
        return;
    const int *row = ids + t * k;
    bool bad = false;
    for (int j = 0; j < k; j++) {
        const int e = row[j];
        if (e < 0 || e >= E) {
            bad = true;
            continue;
        }
        for (int i = 0; i < j; i++)
            bad = bad || row[i] == e;
        atomicAdd(&send[(e / L) * (L + 1) + e % L], 1);
    }
    if (bad)
        for (int d = 0; d < W; d++)
            atomicAdd(&send[d * (L + 1) + L], 1);
}

// 4a. Block e lists the tokens routed to expert e, in token order, at its place in the pack
// buffer (after the rows of experts 0..e-1).
__global__ void pack_index(const int *ids, int64_t T, int k, int L, const int *send, int *row_src)
{
    const int e = blockIdx.x;
    __shared__ int64_t base;
    if (threadIdx.x == 0) {
        int64_t b = 0;
        for (int f = 0; f < e; f++)
            b += send[(f / L) * (L + 1) + f % L];
        base = b;
    }
    __syncthreads();
    int64_t done = 0;
    for (int64_t t0 = 0; t0 < T; t0 += kThreads) {
        const int64_t t = t0 + threadIdx.x;
        bool hit = false;
        if (t < T)
            for (int j = 0; j < k; j++)
                hit = hit || ids[t * k + j] == e;
        int total;
        const int r = block_rank(hit, &total);
        if (hit)
            row_src[base + done + r] = (int)t;
        done += total;
    }
}

// 4b. One block per packed row.
__global__ void pack_rows(const __nv_bfloat16 *x, const int *row_src, int64_t H,
                          __nv_bfloat16 *pack, bool vec)
{
    const int64_t p = blockIdx.x;
    copy_row(pack + p * H, x + (int64_t)row_src[p] * H, H, vec);
}

// 6. Block (s, l) moves the rows of local expert l received from rank s (blockIdx.y splits the
// chunk's rows) from staging (source, expert, token) order into recv_x (expert, source, token)
// order; blocks of source 0 write counts.
__global__ void unpack_rows(const int *recv, int W, int L, int64_t H, const __nv_bfloat16 *stage,
                            __nv_bfloat16 *recv_x, int *counts, bool vec)
{
    const int s = blockIdx.x / L, l = blockIdx.x % L;
    __shared__ int64_t src0, dst0;
    if (threadIdx.x == 0) {
        int64_t a = 0, b = 0;
        for (int s2 = 0; s2 < W; s2++)
            for (int l2 = 0; l2 < L; l2++) {
                const int c = recv[s2 * (L + 1) + l2];
                if (s2 < s || (s2 == s && l2 < l))
                    a += c; // staging: earlier sources, then earlier experts of source s
                if (l2 < l || (l2 == l && s2 < s))
                    b += c; // recv_x: earlier experts, then earlier sources of expert l
            }
        src0 = a;
        dst0 = b;
        if (s == 0 && blockIdx.y == 0) {
            int n = 0;
            for (int s2 = 0; s2 < W; s2++)
                n += recv[s2 * (L + 1) + l];
            counts[l] = n;
        }
    }
    __syncthreads();
    const int rows = recv[s * (L + 1) + l];
    for (int i = blockIdx.y; i < rows; i += gridDim.y)
        copy_row(recv_x + (dst0 + i) * H, stage + (src0 + i) * H, H, vec);
}

bool aligned16(const void *p)
{
    return (uintptr_t)p % 16 == 0;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = (State *)calloc(1, sizeof(State));
    if (!st) {
        fprintf(stderr, "moe_dispatch reference: out of host memory\n");
        return 1;
    }
    ctx->user = st;
    st->W = ctx->world;
    st->T = kevo_param(ctx, "T", -1);
    st->H = kevo_param(ctx, "H", -1);
    st->E = kevo_param(ctx, "E", -1);
    st->k = kevo_param(ctx, "k", -1);
    if (st->T < 1 || st->H < 1 || st->k < 1 || st->E < st->k || st->W < 1 || st->E % st->W != 0 ||
        st->T * st->k > INT32_MAX) {
        fprintf(stderr, "moe_dispatch reference: bad parameters T=%lld H=%lld E=%lld k=%lld W=%d\n",
                (long long)st->T, (long long)st->H, (long long)st->E, (long long)st->k, st->W);
        return 1;
    }
    st->L = st->E / st->W;
    st->cap = (int64_t)st->W * st->T * (st->k < st->L ? st->k : st->L);
    const size_t meta = 2 * (size_t)st->W * (size_t)(st->L + 1) * sizeof(int);
    CUDA_OK(cudaMalloc(&st->meta, meta));
    CUDA_OK(cudaMallocHost(&st->host, meta));
    CUDA_OK(cudaMalloc(&st->row_src, (size_t)(st->T * st->k) * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->pack, (size_t)(st->T * st->k * st->H) * sizeof(__nv_bfloat16)));
    CUDA_OK(cudaMalloc(&st->stage, (size_t)(st->cap * st->H) * sizeof(__nv_bfloat16)));
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 2)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0], *ids = &ctx->inputs[1];
    const kevo_tensor *rx = &ctx->outputs[0], *cnt = &ctx->outputs[1];
    const int W = st->W, rank = ctx->rank;
    const int64_t T = st->T, H = st->H, k = st->k, L = st->L;
    if (x->dtype != KEVO_BF16 || ids->dtype != KEVO_I32 || rx->dtype != KEVO_BF16 ||
        cnt->dtype != KEVO_I32 || x->numel != T * H || ids->numel != T * k ||
        rx->numel != st->cap * H || cnt->numel != L) {
        fprintf(stderr,
                "moe_dispatch reference: unexpected tensors (T=%lld H=%lld k=%lld "
                "L=%lld: x %lld, topk_ids %lld, recv_x %lld, counts %lld elements)\n",
                (long long)T, (long long)H, (long long)k, (long long)L, (long long)x->numel,
                (long long)ids->numel, (long long)rx->numel, (long long)cnt->numel);
        return 1;
    }
    cudaStream_t s = ctx->stream;
    int *send = st->meta, *recv = st->meta + W * (L + 1);
    const size_t meta_bytes = 2 * (size_t)W * (size_t)(L + 1) * sizeof(int);

    // 1-2. count the rows per destination expert, exchange the counts
    CUDA_OK(cudaMemsetAsync(send, 0, (size_t)W * (L + 1) * sizeof(int), s));
    count_rows<<<(unsigned)((T + kThreads - 1) / kThreads), kThreads, 0, s>>>(
        (const int *)ids->ptr, T, (int)k, (int)st->E, (int)L, W, send);
    CUDA_OK(cudaGetLastError());
    NCCL_OK(ncclGroupStart(), ctx->comm);
    for (int p = 0; p < W; p++) {
        NCCL_OK(ncclSend(send + p * (L + 1), (size_t)L + 1, ncclInt32, p, ctx->comm, s), ctx->comm);
        NCCL_OK(ncclRecv(recv + p * (L + 1), (size_t)L + 1, ncclInt32, p, ctx->comm, s), ctx->comm);
    }
    NCCL_OK(ncclGroupEnd(), ctx->comm);

    // 3. the sizes of the row exchange, on the host (NCCL takes host sizes)
    CUDA_OK(cudaMemcpyAsync(st->host, st->meta, meta_bytes, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    const int *hsend = st->host, *hrecv = st->host + W * (L + 1);
    int64_t to[KEVO_MAX_RANKS], from[KEVO_MAX_RANKS], total = 0;
    for (int p = 0; p < W; p++) {
        if (hrecv[p * (L + 1) + L] != 0) { // every rank sees every rank's flag: all stop
            fprintf(stderr,
                    "moe_dispatch reference: rank %d's topk_ids has an id outside "
                    "[0, %lld) or a repeated id in a row\n",
                    p, (long long)st->E);
            return 1;
        }
        to[p] = from[p] = 0;
        for (int l = 0; l < L; l++) {
            to[p] += hsend[p * (L + 1) + l];
            from[p] += hrecv[p * (L + 1) + l];
        }
        total += from[p];
    }
    if (total > st->cap) {
        fprintf(stderr,
                "moe_dispatch reference: rank %d receives %lld rows, more than the "
                "capacity %lld\n",
                rank, (long long)total, (long long)st->cap);
        return 1;
    }

    // 4. pack the rows by (destination, local expert, token)
    const bool vec = H % 8 == 0 && aligned16(x->ptr) && aligned16(rx->ptr) && aligned16(st->pack) &&
                     aligned16(st->stage);
    pack_index<<<(unsigned)st->E, kThreads, 0, s>>>((const int *)ids->ptr, T, (int)k, (int)L, send,
                                                    st->row_src);
    CUDA_OK(cudaGetLastError());
    pack_rows<<<(unsigned)(T * k), kCopyThreads, 0, s>>>((const __nv_bfloat16 *)x->ptr, st->row_src,
                                                         H, st->pack, vec);
    CUDA_OK(cudaGetLastError());

    // 5. exchange the rows: to rank p its block of the pack buffer, from rank p into staging
    NCCL_OK(ncclGroupStart(), ctx->comm);
    int64_t off_to = 0, off_from = 0;
    for (int p = 0; p < W; p++) {
        if (to[p] > 0)
            NCCL_OK(
                ncclSend(st->pack + off_to * H, (size_t)(to[p] * H), ncclBfloat16, p, ctx->comm, s),
                ctx->comm);
        if (from[p] > 0)
            NCCL_OK(ncclRecv(st->stage + off_from * H, (size_t)(from[p] * H), ncclBfloat16, p,
                             ctx->comm, s),
                    ctx->comm);
        off_to += to[p];
        off_from += from[p];
    }
    NCCL_OK(ncclGroupEnd(), ctx->comm);

    // 6. (source, expert, token) -> (expert, source, token), and counts
    const int64_t per_chunk = total / (W * L) + 1;
    const unsigned split = (unsigned)(per_chunk < 8 ? per_chunk : 8);
    unpack_rows<<<dim3((unsigned)(W * L), split), kCopyThreads, 0, s>>>(
        recv, W, (int)L, H, st->stage, (__nv_bfloat16 *)rx->ptr, (int *)cnt->ptr, vec);
    CUDA_OK(cudaGetLastError());
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    cudaFree(st->meta);
    cudaFreeHost(st->host);
    cudaFree(st->row_src);
    cudaFree(st->pack);
    cudaFree(st->stage);
    free(st);
    ctx->user = NULL;
}
