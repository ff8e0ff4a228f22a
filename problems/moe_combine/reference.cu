// reference.cu — the NCCL baseline of problems/moe_combine: a Megatron-style token combine
// (gather the expert outputs per destination, all-to-all, weighted sum), the inverse of the
// moe_dispatch reference.
//
// One call, all on ctx->stream (q is this rank, the owner of experts q*L .. q*L + L - 1):
//  1. index (a count kernel and a rank kernel over chunks of the global routing table, in
//     order), for three kinds of list:
//     - for this rank's local expert l: the rank of each (s, t) routed to q*L + l among those
//       of that expert (its row in expert_out, after the rows of experts before l), and the
//       expert's row count; the table is checked on the way (ids in [0, E), none repeated);
//     - for destination rank d: the rank of each slot (t, j) of d's tokens whose expert this
//       rank owns among those slots: its row in the block sent to d;
//     - for owner rank p: the rank of each slot (t, j) of this rank's tokens whose expert p
//       owns among those slots: its row in the block received from p.
//  2. host sync: the row counts per destination and per owner are copied to pinned host memory
//     and the host waits for them (cudaStreamSynchronize). This is needed because
//     ncclSend/ncclRecv take their sizes as host values (Megatron's dispatcher syncs for the
//     same reason). A device-initiated combine (peers' memory through the symmetric window)
//     needs none.
//  3. gather: one block per row to send copies expert_out[pos] into a staging buffer, by
//     destination, then (token, slot).
//  4. exchange: ncclSend of the block for rank d to rank d, ncclRecv of the block from owner p,
//     every rank (itself included) in one group.
//  5. reduce: one block per token sums weights[t][j] * row in fp32 in slot order j = 0..k-1
//     and rounds once to bf16.
// Each (token, expert) pair travels as its own row (no pre-combining at the owner), as
// Megatron's all-to-all does. It is the fair baseline: what a competent engineer writes with
// NCCL and plain CUDA kernels, with no artificial slowness.
//
// Because of the host sync in step 2 this reference cannot be captured into a CUDA graph; the
// evaluator captures only candidates.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 256;     // index and reduce kernels
constexpr int kCopyThreads = 128; // row copies: one block per row
constexpr int kMaxK = 64;         // slots per token the reduce kernel holds in shared memory

#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "moe_combine reference: %s: %s\n", #call, cudaGetErrorString(e_)); \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

#define NCCL_OK(call, comm)                                                                        \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "moe_combine reference: %s: %s (%s)\n", #call, ncclGetErrorString(r_), \
                    ncclGetLastError(comm));                                                       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

// Row counts, computed on the device and copied to the host.
struct Counts {
    int send[KEVO_MAX_RANKS]; // rows this rank sends to each destination
    int recv[KEVO_MAX_RANKS]; // rows this rank receives from each owner
    int bad;                  // the routing table has an id out of range or a repeated id
};

struct Offsets {
    int64_t at[KEVO_MAX_RANKS + 1]; // prefix sums of a count per rank
};

struct State {
    int64_t T, H, E, k, L, cap;
    int W;
    Counts *counts;       // device
    Counts *host;         // pinned
    int *expert_rows;     // device [L]: rows of each local expert
    int chunks;           // chunks of kChunk slots in the whole table
    int *chunk_count;     // device [L + 2W][chunks]: matches per chunk of each list
    int *pos;             // device [W*T*k]: for slots owned here, the row within its expert
    int *send_slot;       // device [W*T*k]: row r of the block to d (d*T*k + r): its slot
    int *recv_rank;       // device [T*k]: for this rank's slots, the row within owner's block
    __nv_bfloat16 *stage; // [cap][H]: rows to send, by destination, then (token, slot)
    __nv_bfloat16 *recv;  // [T*k][H]: rows received, by owner, then (token, slot)
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

// The owner of an expert id (W for an id out of range, which the count kernel reports).
__device__ __forceinline__ int owner_of(int e, int E, int L, int W)
{
    return e >= 0 && e < E ? e / L : W;
}

// Step 1 enumerates L + 2W lists, each the slots of a range of the routing table (a slot is
// (global row, j), index row*k + j) that satisfy a test, in slot order:
//   list l < L:         every slot, expert == rank*L + l (at most one per row, so this is
//                       (s, t) order): rank -> pos[slot], the row within expert l
//   list L + d:         the slots of rank d's tokens, owner == rank: rank r -> send_slot[d][r]
//   list L + W + p:     this rank's slots, owner == p: rank -> recv_rank[slot - rank*T*k]
// Each list is cut into chunks of kChunk slots: one kernel counts each chunk's matches, the
// next ranks each chunk's matches after the counts of the chunks before it.
struct IndexArgs {
    const int *ids; // [W*T][k]
    int64_t slots;  // T*k: slots per rank
    int k, E, L, W, rank;
    int chunks;       // chunks of the longest list (W*T*k slots)
    int *chunk_count; // [L + 2W][chunks]
    Counts *counts;
    int *expert_rows, *pos, *send_slot, *recv_rank;
};

constexpr int kChunk = kThreads * 8;

__device__ __forceinline__ void list_range(const IndexArgs &a, int list, int64_t *begin,
                                           int64_t *end)
{
    const int d = list < a.L ? -1 : list < a.L + a.W ? list - a.L : a.rank;
    *begin = d < 0 ? 0 : d * a.slots;
    *end = d < 0 ? a.W * a.slots : (d + 1) * a.slots;
}

__device__ __forceinline__ bool list_test(const IndexArgs &a, int list, int64_t slot)
{
    const int id = a.ids[slot];
    if (list < a.L)
        return id == a.rank * a.L + list;
    const int owner = owner_of(id, a.E, a.L, a.W);
    return list < a.L + a.W ? owner == a.rank : owner == list - a.L - a.W;
}

// 1a. Block (list, chunk): the chunk's matches. The chunks of list 0 also check the table:
// ids in [0, E) and none repeated within a row.
__global__ void index_count(const IndexArgs a)
{
    const int list = blockIdx.x, chunk = blockIdx.y;
    int64_t begin, end;
    list_range(a, list, &begin, &end);
    const int64_t lo = begin + (int64_t)chunk * kChunk;
    if (lo >= end)
        return;
    const int64_t hi = lo + kChunk < end ? lo + kChunk : end;
    int n = 0;
    bool bad = false;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) {
        n += list_test(a, list, i);
        if (list == 0) {
            const int id = a.ids[i];
            bad = bad || id < 0 || id >= a.E;
            for (int64_t j = i - i % a.k; j < i; j++)
                bad = bad || a.ids[j] == id;
        }
    }
    if (bad)
        a.counts->bad = 1; // the counts were zeroed before this kernel
    // block sum of n: warp shuffles, then one thread per warp
    for (int o = 16; o > 0; o >>= 1)
        n += __shfl_xor_sync(0xffffffffu, n, o);
    __shared__ int warp_sum[kThreads / 32];
    if ((threadIdx.x & 31) == 0)
        warp_sum[threadIdx.x >> 5] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        int sum = 0;
        for (int w = 0; w < kThreads / 32; w++)
            sum += warp_sum[w];
        a.chunk_count[list * a.chunks + chunk] = sum;
    }
}

// 1b. Block (list, chunk): ranks of the chunk's matches, after those of earlier chunks; the
// block of chunk 0 writes the list's total.
__global__ void index_rank(const IndexArgs a)
{
    const int list = blockIdx.x, chunk = blockIdx.y;
    int64_t begin, end;
    list_range(a, list, &begin, &end);
    const int64_t lo = begin + (int64_t)chunk * kChunk;
    if (lo >= end)
        return;
    const int64_t hi = lo + kChunk < end ? lo + kChunk : end;
    __shared__ int base;
    if (threadIdx.x == 0) {
        const int n_chunks = (int)((end - begin + kChunk - 1) / kChunk);
        int before = 0, all = 0;
        for (int c = 0; c < n_chunks; c++) {
            const int n = a.chunk_count[list * a.chunks + c];
            before += c < chunk ? n : 0;
            all += n;
        }
        base = before;
        if (chunk == 0) {
            if (list < a.L)
                a.expert_rows[list] = all;
            else if (list < a.L + a.W)
                a.counts->send[list - a.L] = all;
            else
                a.counts->recv[list - a.L - a.W] = all;
        }
    }
    __syncthreads();
    int done = base, total;
    for (int64_t i0 = lo; i0 < hi; i0 += kThreads) {
        const int64_t i = i0 + threadIdx.x;
        const bool hit = i < hi && list_test(a, list, i);
        const int r = done + block_rank(hit, &total);
        if (hit) {
            if (list < a.L)
                a.pos[i] = r;
            else if (list < a.L + a.W)
                a.send_slot[(list - a.L) * a.slots + r] = (int)i;
            else
                a.recv_rank[i - a.rank * a.slots] = r;
        }
        done += total;
    }
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

// 3. Block n copies staging row n (destination d with to.at[d] <= n < to.at[d+1]).
__global__ void combine_gather(const __nv_bfloat16 *expert_out, const int *ids,
                               const int *expert_rows, const int *pos, const int *send_slot,
                               Offsets to, int W, int rank, int L, int64_t slots, int64_t H,
                               __nv_bfloat16 *stage, bool vec)
{
    const int64_t n = blockIdx.x;
    __shared__ int64_t src;
    if (threadIdx.x == 0) {
        int d = 0;
        while (d + 1 < W && to.at[d + 1] <= n)
            d++;
        const int slot = send_slot[(int64_t)d * slots + (n - to.at[d])];
        const int l = ids[slot] - rank * L;
        int64_t base = 0;
        for (int i = 0; i < l; i++)
            base += expert_rows[i];
        src = base + pos[slot];
    }
    __syncthreads();
    copy_row(stage + n * H, expert_out + src * H, H, vec);
}

// 5. Block t: y[t][h] = sum_j w[t][j] * row(t, j)[h], fp32 in slot order, rounded once.
template <bool VEC>
__global__ void combine_reduce(const __nv_bfloat16 *recv, const int *my_ids, const int *recv_rank,
                               const float *weights, Offsets from, int k, int L, int64_t H,
                               __nv_bfloat16 *y)
{
    const int64_t t = blockIdx.x;
    __shared__ const __nv_bfloat16 *row[kMaxK];
    __shared__ float w[kMaxK];
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        const int64_t i = t * k + j;
        row[j] = recv + (from.at[my_ids[i] / L] + recv_rank[i]) * H;
        w[j] = weights[i];
    }
    __syncthreads();
    if (VEC) {
        for (int64_t v = threadIdx.x; v < H / 8; v += blockDim.x) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int j = 0; j < k; j++) {
                const uint4 u = reinterpret_cast<const uint4 *>(row[j])[v];
                const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const float2 f = __bfloat1622float2(p[c]);
                    acc[2 * c] = fmaf(w[j], f.x, acc[2 * c]);
                    acc[2 * c + 1] = fmaf(w[j], f.y, acc[2 * c + 1]);
                }
            }
            uint4 out;
            __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
            for (int c = 0; c < 4; c++)
                o[c] = __floats2bfloat162_rn(acc[2 * c], acc[2 * c + 1]);
            reinterpret_cast<uint4 *>(y + t * H)[v] = out;
        }
    } else {
        for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
            float acc = 0;
            for (int j = 0; j < k; j++)
                acc = fmaf(w[j], __bfloat162float(row[j][h]), acc);
            y[t * H + h] = __float2bfloat16_rn(acc);
        }
    }
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
        fprintf(stderr, "moe_combine reference: out of host memory\n");
        return 1;
    }
    ctx->user = st;
    st->W = ctx->world;
    st->T = kevo_param(ctx, "T", -1);
    st->H = kevo_param(ctx, "H", -1);
    st->E = kevo_param(ctx, "E", -1);
    st->k = kevo_param(ctx, "k", -1);
    if (st->T < 1 || st->H < 1 || st->k < 1 || st->k > kMaxK || st->E < st->k || st->W < 1 ||
        st->W > KEVO_MAX_RANKS || st->E % st->W != 0 || st->W * st->T * st->k > INT32_MAX) {
        fprintf(stderr, "moe_combine reference: bad parameters T=%lld H=%lld E=%lld k=%lld W=%d\n",
                (long long)st->T, (long long)st->H, (long long)st->E, (long long)st->k, st->W);
        return 1;
    }
    st->L = st->E / st->W;
    st->cap = (int64_t)st->W * st->T * (st->k < st->L ? st->k : st->L);
    const size_t slots = (size_t)(st->T * st->k), all = (size_t)st->W * slots;
    CUDA_OK(cudaMalloc(&st->counts, sizeof(Counts)));
    CUDA_OK(cudaMallocHost(&st->host, sizeof(Counts)));
    CUDA_OK(cudaMalloc(&st->expert_rows, (size_t)st->L * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->pos, all * sizeof(int)));
    st->chunks = (int)((all + kChunk - 1) / kChunk);
    CUDA_OK(cudaMalloc(&st->chunk_count,
                       (size_t)(st->L + 2 * st->W) * (size_t)st->chunks * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->send_slot, all * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->recv_rank, slots * sizeof(int)));
    CUDA_OK(cudaMalloc(&st->stage, (size_t)(st->cap * st->H) * sizeof(__nv_bfloat16)));
    CUDA_OK(cudaMalloc(&st->recv, slots * (size_t)st->H * sizeof(__nv_bfloat16)));
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st || ctx->n_inputs < 3 || ctx->n_outputs < 1)
        return 1;
    const kevo_tensor *xo = &ctx->inputs[0], *ids = &ctx->inputs[1], *wt = &ctx->inputs[2];
    const kevo_tensor *y = &ctx->outputs[0];
    const int W = st->W, rank = ctx->rank;
    const int64_t T = st->T, H = st->H, k = st->k, L = st->L, slots = T * k;
    if (xo->dtype != KEVO_BF16 || ids->dtype != KEVO_I32 || wt->dtype != KEVO_F32 ||
        y->dtype != KEVO_BF16 || xo->numel != st->cap * H || ids->numel != W * slots ||
        wt->numel != slots || y->numel != T * H) {
        fprintf(stderr,
                "moe_combine reference: unexpected tensors (T=%lld H=%lld k=%lld "
                "L=%lld: expert_out %lld, topk_ids %lld, weights %lld, y %lld "
                "elements)\n",
                (long long)T, (long long)H, (long long)k, (long long)L, (long long)xo->numel,
                (long long)ids->numel, (long long)wt->numel, (long long)y->numel);
        return 1;
    }
    cudaStream_t s = ctx->stream;

    // 1. positions and counts from the global routing table
    IndexArgs a;
    a.ids = (const int *)ids->ptr;
    a.slots = slots;
    a.k = (int)k;
    a.E = (int)st->E;
    a.L = (int)L;
    a.W = W;
    a.rank = rank;
    a.chunks = st->chunks;
    a.chunk_count = st->chunk_count;
    a.counts = st->counts;
    a.expert_rows = st->expert_rows;
    a.pos = st->pos;
    a.send_slot = st->send_slot;
    a.recv_rank = st->recv_rank;
    const dim3 lists((unsigned)(L + 2 * W), (unsigned)st->chunks);
    CUDA_OK(cudaMemsetAsync(st->counts, 0, sizeof(Counts), s));
    index_count<<<lists, kThreads, 0, s>>>(a);
    CUDA_OK(cudaGetLastError());
    index_rank<<<lists, kThreads, 0, s>>>(a);
    CUDA_OK(cudaGetLastError());

    // 2. the sizes of the exchange, on the host (NCCL takes host sizes)
    CUDA_OK(cudaMemcpyAsync(st->host, st->counts, sizeof(Counts), cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    if (st->host->bad) { // the table is the same on every rank: every rank stops here
        fprintf(stderr,
                "moe_combine reference: topk_ids has an id outside [0, %lld) or a "
                "repeated id in a row\n",
                (long long)st->E);
        return 1;
    }
    Offsets to = {}, from = {};
    for (int p = 0; p < W; p++) {
        to.at[p + 1] = to.at[p] + st->host->send[p];
        from.at[p + 1] = from.at[p] + st->host->recv[p];
    }

    // 3. gather the rows to send, by destination, then (token, slot)
    const bool vec = H % 8 == 0 && aligned16(xo->ptr) && aligned16(y->ptr) &&
                     aligned16(st->stage) && aligned16(st->recv);
    if (to.at[W] > 0) {
        combine_gather<<<(unsigned)to.at[W], kCopyThreads, 0, s>>>(
            (const __nv_bfloat16 *)xo->ptr, (const int *)ids->ptr, st->expert_rows, st->pos,
            st->send_slot, to, W, rank, (int)L, slots, H, st->stage, vec);
        CUDA_OK(cudaGetLastError());
    }

    // 4. block for rank p to rank p, block from owner p into recv at p's offset
    NCCL_OK(ncclGroupStart(), ctx->comm);
    for (int p = 0; p < W; p++) {
        const int64_t n_to = to.at[p + 1] - to.at[p], n_from = from.at[p + 1] - from.at[p];
        if (n_to > 0)
            NCCL_OK(ncclSend(st->stage + to.at[p] * H, (size_t)(n_to * H), ncclBfloat16, p,
                             ctx->comm, s),
                    ctx->comm);
        if (n_from > 0)
            NCCL_OK(ncclRecv(st->recv + from.at[p] * H, (size_t)(n_from * H), ncclBfloat16, p,
                             ctx->comm, s),
                    ctx->comm);
    }
    NCCL_OK(ncclGroupEnd(), ctx->comm);

    // 5. weighted sum per token
    const int *my_ids = (const int *)ids->ptr + (int64_t)rank * slots;
    if (vec)
        combine_reduce<true><<<(unsigned)T, kThreads, 0, s>>>(st->recv, my_ids, st->recv_rank,
                                                              (const float *)wt->ptr, from, (int)k,
                                                              (int)L, H, (__nv_bfloat16 *)y->ptr);
    else
        combine_reduce<false><<<(unsigned)T, kThreads, 0, s>>>(st->recv, my_ids, st->recv_rank,
                                                               (const float *)wt->ptr, from, (int)k,
                                                               (int)L, H, (__nv_bfloat16 *)y->ptr);
    CUDA_OK(cudaGetLastError());
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st)
        return;
    cudaFree(st->counts);
    cudaFreeHost(st->host);
    cudaFree(st->expert_rows);
    cudaFree(st->pos);
    cudaFree(st->chunk_count);
    cudaFree(st->send_slot);
    cudaFree(st->recv_rank);
    cudaFree(st->stage);
    cudaFree(st->recv);
    free(st);
    ctx->user = NULL;
}
