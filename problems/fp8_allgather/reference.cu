// reference.cu — the NCCL baseline of problems/fp8_allgather: a quantise kernel writes this
// rank's fp8 shard and its per-block scales into a staging buffer, then two ncclAllGather
// calls (q as bytes, scales as fp32) fill every rank's slots of the outputs.
//
// It is the fair baseline because it is what an FSDP implementation with fp8 communication
// does (quantise locally, gather the fp8 bytes and the scales with NCCL). The staging buffers
// are symmetric scratch, in the window like the outputs, so NCCL can use its symmetric-memory
// kernels. The gathers are out of place and not grouped on purpose: NCCL 2.28.3's two in-place
// all-gathers on window buffers in one group left another rank's q slot unwritten in our GPU
// test (NCCL issue 1924 reports wrong in-place symmetric results too). No host synchronisation: everything is
// enqueued on ctx->stream.
//
// Arithmetic (problem.json states it; the result is bit-exact): per block of 128 elements,
// amax = max |x| in fp32, s = amax / 448 (IEEE fp32 division; 1 when amax == 0), q = e4m3 of
// the IEEE fp32 quotient x / s, rounded to nearest even with saturation to +-448.
#include "kevo/kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

namespace
{

constexpr int kBlock = 128;     // elements per scale
constexpr int kWarpsPerCta = 8; // one warp per block; each lane owns 4 consecutive elements
constexpr float kE4m3Max = 448.0f;

// One warp quantises block b of x (n elements) into q[b*128 ..] and scales[b].
// q_aligned: q is 4-byte aligned, so a lane stores its 4 bytes at once.
__global__ void __launch_bounds__(kWarpsPerCta * 32)
    quantise(const __nv_bfloat16 *x, int64_t n, int64_t nb, uint8_t *q, float *scales,
             int q_aligned)
{
    const int64_t b = (int64_t)blockIdx.x * kWarpsPerCta + (threadIdx.x >> 5);
    if (b >= nb)
        return; // a whole warp leaves together
    const int lane = threadIdx.x & 31;
    const int64_t first = b * kBlock + 4 * lane; // this lane's first element
    const bool full = (b + 1) * kBlock <= n;

    float v[4];
    if (full) {
        // 8-byte load: x is 4 KiB aligned and each block starts 256 bytes after the last
        const uint2 u = *reinterpret_cast<const uint2 *>(x + first);
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
        const float2 c = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));
        v[0] = a.x;
        v[1] = a.y;
        v[2] = c.x;
        v[3] = c.y;
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++)
            v[k] = first + k < n ? __bfloat162float(x[first + k]) : 0.0f;
    }

    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
    for (int o = 16; o > 0; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = amax == 0.0f ? 1.0f : __fdiv_rn(amax, kE4m3Max);
    if (lane == 0)
        scales[b] = s;

    uint8_t out[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        out[k] = (uint8_t)__nv_cvt_float_to_fp8(__fdiv_rn(v[k], s), __NV_SATFINITE, __NV_E4M3);
    if (full && q_aligned) {
        *reinterpret_cast<uint32_t *>(q + first) = (uint32_t)out[0] | (uint32_t)out[1] << 8 |
                                                   (uint32_t)out[2] << 16 | (uint32_t)out[3] << 24;
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (first + k < n)
                q[first + k] = out[k];
    }
}

// This rank's quantised shard before the gather: symmetric scratch from kevo_init.
struct Staging {
    int64_t n;
    uint8_t *q;    // n bytes
    float *scales; // ceil(n / 128) floats
};

} // namespace

extern "C" int kevo_init(kevo_ctx *ctx)
{
    const int64_t n = kevo_param(ctx, "N", -1);
    if (n <= 0) {
        fprintf(stderr, "fp8_allgather reference: bad N=%lld\n", (long long)n);
        return 1;
    }
    const int64_t nb = (n + kBlock - 1) / kBlock;
    Staging *st = (Staging *)calloc(1, sizeof *st);
    if (!st) {
        fprintf(stderr, "fp8_allgather reference: out of host memory\n");
        return 1;
    }
    st->n = n;
    ctx->user = st;
    // scales first: 256-byte aligned, so the q buffer after it is too (4-byte stores)
    if (ctx->scratch_alloc(ctx, (size_t)nb * sizeof(float), (void **)&st->scales, NULL, NULL) ||
        ctx->scratch_alloc(ctx, (size_t)n, (void **)&st->q, NULL, NULL)) {
        fprintf(stderr, "fp8_allgather reference: %lld bytes of symmetric scratch exhausted\n",
                (long long)(n + 4 * nb));
        return 1;
    }
    return 0;
}

extern "C" void kevo_fini(kevo_ctx *ctx)
{
    free(ctx->user); // the scratch is the harness's to free
    ctx->user = NULL;
}

extern "C" int kevo_run(kevo_ctx *ctx)
{
    const int W = ctx->world;
    if (ctx->n_inputs < 1 || ctx->n_outputs < 2 || W < 1)
        return 1;
    const kevo_tensor *x = &ctx->inputs[0];
    const kevo_tensor *q = &ctx->outputs[0], *scales = &ctx->outputs[1];
    const int64_t n = kevo_param(ctx, "N", -1);
    const int64_t nb = (n + kBlock - 1) / kBlock;
    if (n <= 0 || x->dtype != KEVO_BF16 || q->dtype != KEVO_FP8_E4M3 || scales->dtype != KEVO_F32 ||
        x->numel != n || q->numel != W * n || scales->numel != W * nb) {
        fprintf(stderr,
                "fp8_allgather reference: unexpected tensors (N=%lld, W=%d: x %lld, "
                "q %lld, scales %lld elements)\n",
                (long long)n, W, (long long)x->numel, (long long)q->numel,
                (long long)scales->numel);
        return 1;
    }
    const Staging *st = (const Staging *)ctx->user;
    if (!st || st->n != n) {
        fprintf(stderr, "fp8_allgather reference: kevo_init did not run for N=%lld\n",
                (long long)n);
        return 1;
    }
    uint8_t *q_all = (uint8_t *)q->ptr;
    float *s_all = (float *)scales->ptr;
    uint8_t *q_mine = st->q;
    float *s_mine = st->scales;

    const int64_t grid = (nb + kWarpsPerCta - 1) / kWarpsPerCta;
    quantise<<<(unsigned)grid, kWarpsPerCta * 32, 0, ctx->stream>>>(
        (const __nv_bfloat16 *)x->ptr, n, nb, q_mine, s_mine, (uintptr_t)q_mine % 4 == 0);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "fp8_allgather reference: quantise launch: %s\n", cudaGetErrorString(e));
        return 1;
    }

    // Out of place, from the staging buffers, one call after the other (see the header).
    ncclResult_t rc = ncclAllGather(q_mine, q_all, (size_t)n, ncclUint8, ctx->comm, ctx->stream);
    if (rc == ncclSuccess)
        rc = ncclAllGather(s_mine, s_all, (size_t)nb, ncclFloat, ctx->comm, ctx->stream);
    if (rc != ncclSuccess) {
        fprintf(stderr, "fp8_allgather reference: ncclAllGather (q, scales): %s (%s)\n",
                ncclGetErrorString(rc), ncclGetLastError(ctx->comm));
        return 1;
    }
    return 0;
}
