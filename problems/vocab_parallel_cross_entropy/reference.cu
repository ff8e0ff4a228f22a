// reference.cu — the NCCL baseline of problems/vocab_parallel_cross_entropy: the scheme of
// Megatron-LM's vocab-parallel cross-entropy, in three small kernels and two all-reduces, all
// on ctx->stream:
//
//   1. row_max:    m[t] = max over this rank's V/W logits of row t (fp32)
//   2. ncclAllReduce(m, max) in place: the global row maximum M[t]
//   3. row_sumexp: s[t] = sum of exp(z - M[t]) over this rank's columns; g[t] = z[t, target]
//                  if the target column lives on this rank, else 0
//   4. ncclAllReduce([s; g], sum) in place: the full sum S[t] and the target logit z_t
//   5. finish:     loss[t] = log(S[t]) + M[t] - z_t
//
// It is the fair baseline because it is what the common frameworks do (three reductions over
// the vocabulary, each combined with an NCCL all-reduce), written as direct kernels: one CTA per
// token row, 16-byte loads where the row allows, fp32 throughout. It reads the logits twice and
// waits for two all-reduces; a candidate can do one pass with an online softmax and one small
// exchange. No host synchronisation: everything is enqueued on ctx->stream.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kThreads = 512; // one CTA per token row

struct State {
    float *buf; // [3, T]: M, then S, then the target logit (the second all-reduce's [2, T])
    int64_t T;
};

// Combines a per-thread value over the CTA with op (whose identity is `none`); every thread
// gets the result.
template <typename Op> __device__ float block_reduce(float v, Op op, float none)
{
    __shared__ float part[kThreads / 32];
    __shared__ float result;
    for (int o = 16; o > 0; o >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < kThreads / 32 ? part[threadIdx.x] : none;
        for (int o = 16; o > 0; o >>= 1)
            v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
        if (threadIdx.x == 0)
            result = v;
    }
    __syncthreads();
    return result;
}

struct MaxOp {
    __device__ float operator()(float a, float b) const
    {
        return fmaxf(a, b);
    }
};
struct SumOp {
    __device__ float operator()(float a, float b) const
    {
        return a + b;
    }
};

// Visits every logit of row t as fp32: 8 at a time with 16-byte loads when the row length is a
// multiple of 8 (rows then start 16-byte aligned), one at a time otherwise.
template <typename F> __device__ void for_row(const __nv_bfloat16 *row, int64_t n, F f)
{
    if (n % 8 == 0) {
        const uint4 *v = reinterpret_cast<const uint4 *>(row);
        for (int64_t i = threadIdx.x; i < n / 8; i += kThreads) {
            const uint4 u = v[i];
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 p = __bfloat1622float2(h[k]);
                f(p.x);
                f(p.y);
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < n; i += kThreads)
            f(__bfloat162float(row[i]));
    }
}

__global__ void __launch_bounds__(kThreads)
    row_max(const __nv_bfloat16 *logits, int64_t n, float *m)
{
    const __nv_bfloat16 *row = logits + (int64_t)blockIdx.x * n;
    float v = -INFINITY;
    for_row(row, n, [&](float z) { v = fmaxf(v, z); });
    v = block_reduce(v, MaxOp(), -INFINITY);
    if (threadIdx.x == 0)
        m[blockIdx.x] = v;
}

// s[t] = sum of exp(z - M[t]) over this rank's columns; g[t] = the target's logit if this rank
// holds the target column, else 0 (exactly one rank holds it, so the sum over ranks is exact).
__global__ void __launch_bounds__(kThreads)
    row_sumexp(const __nv_bfloat16 *logits, int64_t n, const int32_t *targets, int64_t lo,
               const float *M, float *s, float *g)
{
    const int64_t t = blockIdx.x;
    const __nv_bfloat16 *row = logits + t * n;
    const float mx = M[t];
    float acc = 0.0f;
    for_row(row, n, [&](float z) { acc += __expf(z - mx); });
    acc = block_reduce(acc, SumOp(), 0.0f);
    if (threadIdx.x == 0) {
        s[t] = acc;
        const int64_t k = (int64_t)targets[t] - lo;
        g[t] = k >= 0 && k < n ? __bfloat162float(row[k]) : 0.0f;
    }
}

__global__ void finish(const float *M, const float *S, const float *g, float *loss, int64_t T)
{
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < T)
        loss[t] = (logf(S[t]) + M[t]) - g[t];
}

int nccl_failed(const char *what, ncclResult_t rc, ncclComm_t comm)
{
    fprintf(stderr, "vocab_parallel_cross_entropy reference: %s: %s (%s)\n", what,
            ncclGetErrorString(rc), ncclGetLastError(comm));
    return 1;
}

int cuda_failed(const char *what, cudaError_t e)
{
    fprintf(stderr, "vocab_parallel_cross_entropy reference: %s: %s\n", what,
            cudaGetErrorString(e));
    return 1;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int64_t T = kevo_param(ctx, "T", -1);
    if (T <= 0) {
        fprintf(stderr, "vocab_parallel_cross_entropy reference: bad T=%lld\n", (long long)T);
        return 1;
    }
    State *st = (State *)calloc(1, sizeof *st);
    if (!st)
        return 1;
    st->T = T;
    cudaError_t e = cudaMalloc((void **)&st->buf, 3 * (size_t)T * sizeof(float));
    if (e != cudaSuccess) {
        free(st);
        return cuda_failed("cudaMalloc", e);
    }
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
    const int64_t T = kevo_param(ctx, "T", -1), V = kevo_param(ctx, "V", -1);
    const int W = ctx->world;
    if (!st || ctx->n_inputs < 2 || ctx->n_outputs < 1 || W < 1 || V % W != 0)
        return 1;
    const kevo_tensor *logits = &ctx->inputs[0], *targets = &ctx->inputs[1];
    const kevo_tensor *loss = &ctx->outputs[0];
    const int64_t n = V / W; // columns of this rank
    if (logits->dtype != KEVO_BF16 || targets->dtype != KEVO_I32 || loss->dtype != KEVO_F32 ||
        T != st->T || logits->numel != T * n || targets->numel != T || loss->numel != T) {
        fprintf(stderr,
                "vocab_parallel_cross_entropy reference: unexpected tensors (T=%lld, "
                "V=%lld, W=%d: logits %lld, targets %lld, loss %lld elements)\n",
                (long long)T, (long long)V, W, (long long)logits->numel, (long long)targets->numel,
                (long long)loss->numel);
        return 1;
    }
    float *M = st->buf, *S = st->buf + T, *g = st->buf + 2 * T;
    const __nv_bfloat16 *z = (const __nv_bfloat16 *)logits->ptr;
    cudaError_t e;
    ncclResult_t rc;

    row_max<<<(unsigned)T, kThreads, 0, ctx->stream>>>(z, n, M);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return cuda_failed("row_max launch", e);
    rc = ncclAllReduce(M, M, (size_t)T, ncclFloat, ncclMax, ctx->comm, ctx->stream);
    if (rc != ncclSuccess)
        return nccl_failed("ncclAllReduce (max)", rc, ctx->comm);

    row_sumexp<<<(unsigned)T, kThreads, 0, ctx->stream>>>(z, n, (const int32_t *)targets->ptr,
                                                          (int64_t)ctx->rank * n, M, S, g);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return cuda_failed("row_sumexp launch", e);
    rc = ncclAllReduce(S, S, 2 * (size_t)T, ncclFloat, ncclSum, ctx->comm, ctx->stream);
    if (rc != ncclSuccess)
        return nccl_failed("ncclAllReduce (sum)", rc, ctx->comm);

    finish<<<(unsigned)((T + 255) / 256), 256, 0, ctx->stream>>>(M, S, g, (float *)loss->ptr, T);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return cuda_failed("finish launch", e);
    return 0;
}
