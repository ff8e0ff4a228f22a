// reference.cu — the NCCL baseline of problems/tp_rmsnorm: RMSNorm over a hidden dimension
// split across the ranks, as a tensor-parallel framework writes it in three steps on
// ctx->stream, with no host synchronisation:
//  1. a kernel sums the squares of each row of this rank's x_r in fp32 (one CTA per row)
//     into a scratch vector of T floats;
//  2. ncclAllReduce (fp32, sum, in place) makes those the sums over the whole hidden size H;
//  3. a kernel writes y_r = x_r * rsqrtf(sum / H + eps) * gamma_r, in fp32, rounded to bf16.
// This is the fair baseline: the exchange is one small NCCL all-reduce and both kernels
// stream x at close to memory bandwidth (16-byte loads when rows allow them). What it does not
// do is keep x on chip across the exchange (it reads x twice) or save the launches.
//
// The scratch (T floats) is allocated once in kevo_init, sized from the parameters, and kept
// in ctx->user; kevo_fini frees it.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <stdio.h>

namespace
{

constexpr int kThreads = 128; // per CTA; one CTA per row
constexpr float kEps = 1e-6f;

// The sum of v over the CTA, valid in every thread.
__device__ float cta_sum(float v)
{
    __shared__ float warp_sums[kThreads / 32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    float s = 0;
    for (int w = 0; w < kThreads / 32; w++)
        s += warp_sums[w];
    return s;
}

// sums[t] = sum over c of x[t][c]^2, for a row of `cols` values. kVec: cols % 8 == 0 and x
// 16-byte aligned, so every row is read as 16-byte vectors.
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    sum_squares(const __nv_bfloat16 *x, int64_t cols, float *sums)
{
    const __nv_bfloat16 *row = x + (int64_t)blockIdx.x * cols;
    float s = 0;
    if (kVec) {
        const uint4 *v = reinterpret_cast<const uint4 *>(row);
        for (int64_t i = threadIdx.x; i < cols / 8; i += kThreads) {
            const uint4 u = v[i];
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 f = __bfloat1622float2(h[k]);
                s += f.x * f.x + f.y * f.y;
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
            const float f = __bfloat162float(row[i]);
            s += f * f;
        }
    }
    s = cta_sum(s);
    if (threadIdx.x == 0)
        sums[blockIdx.x] = s;
}

// y[t][c] = x[t][c] * rsqrt(sums[t] / h + eps) * gamma[c]. kVec as above, for x, gamma and y.
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    normalise(const __nv_bfloat16 *x, const __nv_bfloat16 *gamma, const float *sums, int64_t cols,
              float h, __nv_bfloat16 *y)
{
    const int64_t base = (int64_t)blockIdx.x * cols;
    const float rstd = rsqrtf(sums[blockIdx.x] / h + kEps);
    if (kVec) {
        const uint4 *xv = reinterpret_cast<const uint4 *>(x + base);
        const uint4 *gv = reinterpret_cast<const uint4 *>(gamma);
        uint4 *yv = reinterpret_cast<uint4 *>(y + base);
        for (int64_t i = threadIdx.x; i < cols / 8; i += kThreads) {
            const uint4 xu = xv[i], gu = gv[i];
            const __nv_bfloat162 *xh = reinterpret_cast<const __nv_bfloat162 *>(&xu);
            const __nv_bfloat162 *gh = reinterpret_cast<const __nv_bfloat162 *>(&gu);
            uint4 out;
            __nv_bfloat162 *oh = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 xf = __bfloat1622float2(xh[k]), gf = __bfloat1622float2(gh[k]);
                oh[k] = __floats2bfloat162_rn(xf.x * rstd * gf.x, xf.y * rstd * gf.y);
            }
            yv[i] = out;
        }
    } else {
        for (int64_t i = threadIdx.x; i < cols; i += kThreads)
            y[base + i] = __float2bfloat16_rn(__bfloat162float(x[base + i]) * rstd *
                                              __bfloat162float(gamma[i]));
    }
}

// T and H/W from the parameters, or 0 with a message when they do not fit.
int read_params(const kevo_ctx *ctx, int64_t *t, int64_t *cols)
{
    *t = kevo_param(ctx, "T", -1);
    const int64_t h = kevo_param(ctx, "H", -1);
    *cols = ctx->world > 0 ? h / ctx->world : -1;
    if (*t <= 0 || *t > INT32_MAX || *cols <= 0 || h % ctx->world != 0) {
        fprintf(stderr, "tp_rmsnorm reference: bad parameters T=%lld H=%lld (W=%d)\n",
                (long long)*t, (long long)h, ctx->world);
        return 0;
    }
    return 1;
}

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    int64_t t, cols;
    if (!read_params(ctx, &t, &cols))
        return 1;
    void *sums = NULL;
    cudaError_t e = cudaMalloc(&sums, (size_t)t * sizeof(float));
    if (e != cudaSuccess) {
        fprintf(stderr, "tp_rmsnorm reference: cudaMalloc of %lld row sums: %s\n", (long long)t,
                cudaGetErrorString(e));
        return 1;
    }
    ctx->user = sums;
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    if (ctx->user) {
        cudaError_t e = cudaFree(ctx->user);
        if (e != cudaSuccess)
            fprintf(stderr, "tp_rmsnorm reference: cudaFree: %s\n", cudaGetErrorString(e));
        ctx->user = NULL;
    }
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    int64_t t, cols;
    if (ctx->n_inputs < 2 || ctx->n_outputs < 1 || !ctx->user || !read_params(ctx, &t, &cols))
        return 1;
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *g = &ctx->inputs[1];
    const kevo_tensor *y = &ctx->outputs[0];
    if (x->dtype != KEVO_BF16 || g->dtype != KEVO_BF16 || y->dtype != KEVO_BF16 ||
        x->numel != t * cols || g->numel != cols || y->numel != t * cols) {
        fprintf(stderr,
                "tp_rmsnorm reference: unexpected tensors (T=%lld H/W=%lld; x %lld, "
                "gamma %lld, y %lld elements)\n",
                (long long)t, (long long)cols, (long long)x->numel, (long long)g->numel,
                (long long)y->numel);
        return 1;
    }

    float *sums = static_cast<float *>(ctx->user);
    const __nv_bfloat16 *xp = static_cast<const __nv_bfloat16 *>(x->ptr);
    const __nv_bfloat16 *gp = static_cast<const __nv_bfloat16 *>(g->ptr);
    __nv_bfloat16 *yp = static_cast<__nv_bfloat16 *>(y->ptr);
    const bool vec = cols % 8 == 0 && (uintptr_t)xp % 16 == 0 && (uintptr_t)gp % 16 == 0 &&
                     (uintptr_t)yp % 16 == 0;
    const float h = (float)(cols * ctx->world);

    if (vec)
        sum_squares<true><<<(unsigned)t, kThreads, 0, ctx->stream>>>(xp, cols, sums);
    else
        sum_squares<false><<<(unsigned)t, kThreads, 0, ctx->stream>>>(xp, cols, sums);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "tp_rmsnorm reference: sum_squares launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    ncclResult_t rc =
        ncclAllReduce(sums, sums, (size_t)t, ncclFloat, ncclSum, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "tp_rmsnorm reference: ncclAllReduce: %s (%s)\n", ncclGetErrorString(rc),
                ncclGetLastError(ctx->comm));
        return 1;
    }
    if (vec)
        normalise<true><<<(unsigned)t, kThreads, 0, ctx->stream>>>(xp, gp, sums, cols, h, yp);
    else
        normalise<false><<<(unsigned)t, kThreads, 0, ctx->stream>>>(xp, gp, sums, cols, h, yp);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "tp_rmsnorm reference: normalise launch: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
