// kevo_vec.cuh — 16-byte vectors of bf16 and fp32, and sums of them in fp32.
//
// A uint4 carries 8 bf16 or 4 fp32. Sums accumulate in fp32 and round once to bf16; adding the
// ranks in the same order (0, 1, ..., W-1) on every rank gives every rank the same bits.
#ifndef KEVO_PATTERNS_VEC_CUH
#define KEVO_PATTERNS_VEC_CUH

#include <cuda_bf16.h>
#include <stdint.h>

// 8 fp32 accumulators for one uint4 of bf16.
struct kevo_f32x8 {
    float v[8];
};

__host__ __device__ __forceinline__ bool kevo_aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

__device__ __forceinline__ kevo_f32x8 kevo_bf16x8_to_f32(const uint4 &u)
{
    kevo_f32x8 r;
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 f = __bfloat1622float2(h[k]);
        r.v[2 * k] = f.x;
        r.v[2 * k + 1] = f.y;
    }
    return r;
}

// acc += 8 bf16
__device__ __forceinline__ void kevo_acc_bf16x8(kevo_f32x8 &acc, const uint4 &u)
{
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 f = __bfloat1622float2(h[k]);
        acc.v[2 * k] += f.x;
        acc.v[2 * k + 1] += f.y;
    }
}

// 8 fp32 rounded (nearest even) to 8 bf16
__device__ __forceinline__ uint4 kevo_f32x8_to_bf16(const kevo_f32x8 &a)
{
    uint4 out;
    __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
    for (int k = 0; k < 4; k++)
        o[k] = __floats2bfloat162_rn(a.v[2 * k], a.v[2 * k + 1]);
    return out;
}

// The sum of v[0..W-1] (8 bf16 each) in fp32, in index order, rounded once.
template <int W> __device__ __forceinline__ uint4 kevo_sum_bf16x8(const uint4 (&v)[W])
{
    kevo_f32x8 acc = kevo_bf16x8_to_f32(v[0]);
#pragma unroll
    for (int p = 1; p < W; p++)
        kevo_acc_bf16x8(acc, v[p]);
    return kevo_f32x8_to_bf16(acc);
}

// a + b for 8 bf16 each, in fp32, rounded once (the order a then b).
__device__ __forceinline__ uint4 kevo_add_bf16x8(const uint4 &a, const uint4 &b)
{
    kevo_f32x8 acc = kevo_bf16x8_to_f32(a);
    kevo_acc_bf16x8(acc, b);
    return kevo_f32x8_to_bf16(acc);
}

#endif
