// reference.cu — the NCCL baseline of problems/halo_conv1d: the textbook halo exchange, all on
// ctx->stream:
//
//   1. pack:  the 3 first and the 3 last columns of every channel of x into two contiguous
//             [C, 3] buffers (the boundary columns are strided in the [C, L/W] layout)
//   2. ncclSend/ncclRecv in one group: the first columns to the left neighbour, the last ones
//             to the right neighbour, and the neighbours' columns back (rank 0 has no left
//             neighbour, rank W-1 no right one)
//   3. conv:  one CTA per (channel, tile of 1024 columns) stages the tile and its 3 + 3
//             neighbouring columns (from x, from the received halos, or zeros at the global
//             ends) in shared memory and computes 7 fp32 multiply-adds an output
//
// It is the fair baseline because it is how a sequence-parallel convolution is written with
// NCCL: a small pack, a point-to-point exchange with the neighbours, then a local kernel that
// reads x once and writes y once. The convolution waits for the exchange; a candidate can
// overlap the interior with it or read the neighbours' columns directly. No host
// synchronisation.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kTaps = 7, kHalo = 3;
constexpr int kThreads = 256;
constexpr int kPerThread = 4;
constexpr int kTile = kThreads * kPerThread; // output columns per CTA

struct State {
    __nv_bfloat16 *buf;                    // [4, C, 3]
    __nv_bfloat16 *send_left, *send_right; // this rank's first / last 3 columns
    __nv_bfloat16 *recv_left, *recv_right; // the left neighbour's last / the right one's first
    int64_t C;
};

__global__ void pack(const __nv_bfloat16 *x, int64_t C, int64_t n, __nv_bfloat16 *left,
                     __nv_bfloat16 *right)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; // over C * 3
    if (i >= C * kHalo)
        return;
    const int64_t c = i / kHalo, k = i % kHalo;
    left[i] = x[c * n + k];
    right[i] = x[c * n + n - kHalo + k];
}

// y[c, l] = sum_j w[c, j] * x[c, l + j - 3] over this rank's columns l in [0, n); columns -3..-1
// come from `left` ([C, 3], the left neighbour's last columns) and n..n+2 from `right` (the
// right neighbour's first columns); a null halo is the zero padding at a global end.
__global__ void __launch_bounds__(kThreads)
    conv(const __nv_bfloat16 *x, const __nv_bfloat16 *w, const __nv_bfloat16 *left,
         const __nv_bfloat16 *right, __nv_bfloat16 *y, int64_t n)
{
    __shared__ float tile[kTile + 2 * kHalo];
    const int64_t c = blockIdx.y;
    const int64_t start = (int64_t)blockIdx.x * kTile; // first output column of this CTA
    const __nv_bfloat16 *xr = x + c * n;

    for (int i = threadIdx.x; i < kTile + 2 * kHalo; i += kThreads) {
        const int64_t col = start + i - kHalo; // in this rank's columns; may leave [0, n)
        float v = 0.0f;
        if (col >= 0 && col < n)
            v = __bfloat162float(xr[col]);
        else if (col < 0 && left)
            v = __bfloat162float(left[c * kHalo + (col + kHalo)]);
        else if (col >= n && col < n + kHalo && right)
            v = __bfloat162float(right[c * kHalo + (col - n)]);
        tile[i] = v;
    }
    float wc[kTaps];
#pragma unroll
    for (int j = 0; j < kTaps; j++)
        wc[j] = __bfloat162float(w[c * kTaps + j]);
    __syncthreads();

#pragma unroll
    for (int k = 0; k < kPerThread; k++) {
        const int i = threadIdx.x + k * kThreads; // output column start + i, coalesced
        if (start + i < n) {
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < kTaps; j++)
                acc = fmaf(wc[j], tile[i + j], acc);
            y[c * n + start + i] = __float2bfloat16_rn(acc);
        }
    }
}

int cuda_failed(const char *what, cudaError_t e)
{
    fprintf(stderr, "halo_conv1d reference: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int64_t C = kevo_param(ctx, "C", -1);
    if (C <= 0) {
        fprintf(stderr, "halo_conv1d reference: bad C=%lld\n", (long long)C);
        return 1;
    }
    State *st = (State *)calloc(1, sizeof *st);
    if (!st)
        return 1;
    st->C = C;
    const size_t one = (size_t)C * kHalo;
    cudaError_t e = cudaMalloc((void **)&st->buf, 4 * one * sizeof(__nv_bfloat16));
    if (e != cudaSuccess) {
        free(st);
        return cuda_failed("cudaMalloc", e);
    }
    st->send_left = st->buf;
    st->send_right = st->buf + one;
    st->recv_left = st->buf + 2 * one;
    st->recv_right = st->buf + 3 * one;
    ctx->user = st;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    if (st) {
        cudaFree(st->buf);
        free(st);
    }
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    State *st = (State *)ctx->user;
    const int W = ctx->world, rank = ctx->rank;
    const int64_t C = kevo_param(ctx, "C", -1), L = kevo_param(ctx, "L", -1);
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || W < 1 || L % W != 0)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0], *w = &ctx->inputs[1], *y = &ctx->outputs[0];
    const int64_t n = L / W; // columns of this rank
    if (x->dtype != KEVO_BF16 || w->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 || C != st->C ||
        n < kHalo || x->numel != C * n || w->numel != C * kTaps || y->numel != C * n) {
        fprintf(stderr,
                "halo_conv1d reference: unexpected tensors (C=%lld, L=%lld, W=%d: x %lld, "
                "w %lld, y %lld elements)\n",
                (long long)C, (long long)L, W, (long long)x->numel, (long long)w->numel,
                (long long)y->numel);
        return 1;
    }
    const __nv_bfloat16 *xp = (const __nv_bfloat16 *)x->ptr;
    const bool has_left = rank > 0, has_right = rank < W - 1;
    const size_t count = (size_t)C * kHalo;
    cudaError_t e;

    pack<<<(unsigned)((count + 255) / 256), 256, 0, ctx->stream>>>(xp, C, n, st->send_left,
                                                                   st->send_right);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return cuda_failed("pack launch", e);

    ncclResult_t rc = ncclGroupStart();
    if (rc == ncclSuccess && has_left)
        rc = ncclSend(st->send_left, count, ncclBfloat16, rank - 1, ctx->comm, ctx->stream);
    if (rc == ncclSuccess && has_left)
        rc = ncclRecv(st->recv_left, count, ncclBfloat16, rank - 1, ctx->comm, ctx->stream);
    if (rc == ncclSuccess && has_right)
        rc = ncclSend(st->send_right, count, ncclBfloat16, rank + 1, ctx->comm, ctx->stream);
    if (rc == ncclSuccess && has_right)
        rc = ncclRecv(st->recv_right, count, ncclBfloat16, rank + 1, ctx->comm, ctx->stream);
    ncclResult_t end = ncclGroupEnd(); // always close the group, even after a failure
    if (rc == ncclSuccess)
        rc = end;
    if (rc != ncclSuccess) {
        fprintf(stderr, "halo_conv1d reference: ncclSend/ncclRecv with the neighbours: %s (%s)\n",
                ncclGetErrorString(rc), ncclGetLastError(ctx->comm));
        return 1;
    }

    const dim3 grid((unsigned)((n + kTile - 1) / kTile), (unsigned)C);
    conv<<<grid, kThreads, 0, ctx->stream>>>(
        xp, (const __nv_bfloat16 *)w->ptr, has_left ? st->recv_left : NULL,
        has_right ? st->recv_right : NULL, (__nv_bfloat16 *)y->ptr, n);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return cuda_failed("conv launch", e);
    return 0;
}
