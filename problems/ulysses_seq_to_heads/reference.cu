// reference.cu — the NCCL baseline of problems/ulysses_seq_to_heads: DeepSpeed-Ulysses'
// all-to-all as it is usually written (a permute, an all-to-all of equal blocks, a permute).
//
// One call, all on ctx->stream:
//  1. pack: x [B, S/W, NH, D] -> pack [W][B, S/W, NH/W, D], the heads of rank q in block q.
//     The NH/W*D elements of one (b, i, q) are contiguous in x, so this is a transpose of a
//     [B*S/W][W] grid of such pieces.
//  2. exchange: ncclSend of block q to rank q and ncclRecv of block s from rank s, every rank
//     (itself included) in one group, into a staging buffer [W][B, S/W, NH/W, D]. The pack and
//     staging buffers are symmetric scratch (ctx->scratch_alloc), in the window like x and y.
//  3. unpack: staging -> y [B, S, NH/W, D]: the (S/W)*(NH/W)*D elements of one (s, b) are
//     contiguous on both sides, a transpose of a [W][B] grid of pieces. With B = 1 the staging
//     layout is y's, so the blocks are received straight into y and there is no unpack.
// It is the fair baseline: what a competent engineer writes with NCCL and plain copy kernels
// (DeepSpeed and Megatron do the same with all_to_all_single and permutes), with no host
// synchronisation.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8; // grid-stride copies: up to this many blocks per SM

#define CUDA_OK(call)                                                          \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "ulysses_seq_to_heads reference: %s: %s\n", #call, \
                    cudaGetErrorString(e_));                                   \
            return 1;                                                          \
        }                                                                      \
    } while (0)

#define NCCL_OK(call, comm)                                                         \
    do {                                                                            \
        ncclResult_t r_ = (call);                                                   \
        if (r_ != ncclSuccess) {                                                    \
            fprintf(stderr, "ulysses_seq_to_heads reference: %s: %s (%s)\n", #call, \
                    ncclGetErrorString(r_), ncclGetLastError(comm));                \
            return 1;                                                               \
        }                                                                           \
    } while (0)

struct State {
    __nv_bfloat16 *pack;  // [W][B, S/W, NH/W, D]
    __nv_bfloat16 *stage; // [W][B, S/W, NH/W, D]; unused when B = 1
};

// src is an [R][C] grid of pieces of `len` units (U: a bf16, or a 16-byte vector of 8); dst
// gets the [C][R] grid: piece (r, c) of src becomes piece (c, r) of dst. Grid-stride over the
// n = R*C*len units of src, so consecutive threads copy consecutive units of one piece.
template <typename U>
__global__ void transpose_pieces(const U *src, U *dst, uint32_t R, uint32_t C, uint32_t len,
                                 uint32_t n)
{
    for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < n; u += gridDim.x * blockDim.x) {
        const uint32_t piece = u / len, off = u - piece * len;
        const uint32_t r = piece / C, c = piece - r * C;
        dst[((uint64_t)c * R + r) * len + off] = src[u];
    }
}

bool aligned16(const void *p)
{
    return (uintptr_t)p % 16 == 0;
}

int transpose(const __nv_bfloat16 *src, __nv_bfloat16 *dst, int64_t R, int64_t C, int64_t len,
              int sm_count, cudaStream_t s)
{
    const bool vec = len % 8 == 0 && aligned16(src) && aligned16(dst);
    const int64_t unit_len = vec ? len / 8 : len, n = R * C * unit_len;
    if (n >= (int64_t)UINT32_MAX - (int64_t)kThreads * kBlocksPerSm * sm_count) {
        fprintf(stderr, "ulysses_seq_to_heads reference: %lld elements are too many\n",
                (long long)n);
        return 1;
    }
    int64_t grid = (n + kThreads - 1) / kThreads;
    if (grid > (int64_t)kBlocksPerSm * sm_count)
        grid = (int64_t)kBlocksPerSm * sm_count;
    if (grid < 1)
        grid = 1;
    if (vec)
        transpose_pieces<uint4>
            <<<(unsigned)grid, kThreads, 0, s>>>((const uint4 *)src, (uint4 *)dst, (uint32_t)R,
                                                 (uint32_t)C, (uint32_t)unit_len, (uint32_t)n);
    else
        transpose_pieces<__nv_bfloat16><<<(unsigned)grid, kThreads, 0, s>>>(
            src, dst, (uint32_t)R, (uint32_t)C, (uint32_t)unit_len, (uint32_t)n);
    CUDA_OK(cudaGetLastError());
    return 0;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    State *st = (State *)calloc(1, sizeof(State));
    if (!st) {
        fprintf(stderr, "ulysses_seq_to_heads reference: out of host memory\n");
        return 1;
    }
    ctx->user = st;
    const int64_t B = kevo_param(ctx, "B", -1), S = kevo_param(ctx, "S", -1);
    const int64_t NH = kevo_param(ctx, "NH", -1), D = kevo_param(ctx, "D", -1);
    const int W = ctx->world;
    if (B < 1 || S < 1 || NH < 1 || D < 1 || W < 1 || S % W != 0 || NH % W != 0) {
        fprintf(stderr,
                "ulysses_seq_to_heads reference: bad parameters B=%lld S=%lld NH=%lld "
                "D=%lld W=%d\n",
                (long long)B, (long long)S, (long long)NH, (long long)D, W);
        return 1;
    }
    // Both buffers come from the symmetric scratch, like x and y: NCCL 2.28.3 hung in our
    // tests when a send/recv pair mixed a window buffer (y) with a cudaMalloc one.
    const size_t bytes = (size_t)(B * (S / W) * NH * D) * sizeof(__nv_bfloat16);
    if (ctx->scratch_alloc(ctx, bytes, (void **)&st->pack, NULL, NULL) != 0 ||
        (B > 1 && ctx->scratch_alloc(ctx, bytes, (void **)&st->stage, NULL, NULL) != 0)) {
        fprintf(stderr,
                "ulysses_seq_to_heads reference: %zu bytes of symmetric scratch "
                "exhausted\n",
                bytes * (B > 1 ? 2 : 1));
        return 1;
    }
    return 0;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (!st || ctx->n_inputs < 1 || ctx->n_outputs < 1)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    const int W = ctx->world;
    const int64_t B = kevo_param(ctx, "B", -1), S = kevo_param(ctx, "S", -1);
    const int64_t NH = kevo_param(ctx, "NH", -1), D = kevo_param(ctx, "D", -1);
    const int64_t Sl = S / W, Hl = NH / W, block = B * Sl * Hl * D; // elements per peer
    if (x->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || x->numel != B * Sl * NH * D ||
        y->numel != x->numel) {
        fprintf(stderr,
                "ulysses_seq_to_heads reference: unexpected tensors (B=%lld S=%lld "
                "NH=%lld D=%lld: x %lld, y %lld elements)\n",
                (long long)B, (long long)S, (long long)NH, (long long)D, (long long)x->numel,
                (long long)y->numel);
        return 1;
    }
    cudaStream_t s = ctx->stream;
    __nv_bfloat16 *out = (__nv_bfloat16 *)y->ptr;
    __nv_bfloat16 *landing = B == 1 ? out : st->stage;

    // 1. x [B*S/W][W] pieces of NH/W*D -> pack [W][B*S/W]
    if (transpose((const __nv_bfloat16 *)x->ptr, st->pack, B * Sl, W, Hl * D, ctx->sm_count, s))
        return 1;
    // 2. block q to rank q, block s from rank s
    NCCL_OK(ncclGroupStart(), ctx->comm);
    for (int p = 0; p < W; p++) {
        NCCL_OK(ncclSend(st->pack + p * block, (size_t)block, ncclBfloat16, p, ctx->comm, s),
                ctx->comm);
        NCCL_OK(ncclRecv(landing + p * block, (size_t)block, ncclBfloat16, p, ctx->comm, s),
                ctx->comm);
    }
    NCCL_OK(ncclGroupEnd(), ctx->comm);
    // 3. staging [W][B] pieces of S/W*NH/W*D -> y [B][W]
    if (B > 1 && transpose(st->stage, out, W, B, Sl * Hl * D, ctx->sm_count, s))
        return 1;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user; // the scratch is the harness's to free
    if (!st)
        return;
    free(st);
    ctx->user = NULL;
}
