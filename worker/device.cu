// device.cu — the worker's device-side helpers (see device.h).
#include "worker/device.h"

#include <climits>
#include <cstring>
#include <new>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <nccl_device.h>

namespace
{

constexpr int kThreads = 256;

__host__ __device__ inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ inline double unit(uint64_t h) // [0, 1)
{
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

int blocks_for(int64_t n)
{
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return b > 4096 ? 4096 : (int)b;
}

__device__ inline double load_as_double(const void *p, kevo_dtype t, int64_t i)
{
    switch (t) {
    case KEVO_BF16: return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case KEVO_F16: return (double)__half2float(((const __half *)p)[i]);
    case KEVO_F32: return (double)((const float *)p)[i];
    case KEVO_I32: return (double)((const int32_t *)p)[i];
    case KEVO_I64: return (double)((const int64_t *)p)[i];
    case KEVO_FP8_E4M3: {
        __nv_fp8_e4m3 v;
        v.__x = ((const __nv_fp8_storage_t *)p)[i];
        return (double)(float)v;
    }
    default: return 0;
    }
}

__device__ inline uint64_t load_bits(const void *p, kevo_dtype t, int64_t i)
{
    switch (t) {
    case KEVO_BF16:
    case KEVO_F16: return ((const uint16_t *)p)[i];
    case KEVO_F32:
    case KEVO_I32: return ((const uint32_t *)p)[i];
    case KEVO_I64: return ((const uint64_t *)p)[i];
    case KEVO_FP8_E4M3: return ((const uint8_t *)p)[i];
    default: return 0;
    }
}

__host__ __device__ inline uint64_t poison_bits(kevo_dtype t)
{
    switch (t) {
    case KEVO_BF16:
    case KEVO_F16: return 0xFFFFu;     // NaN
    case KEVO_F32: return 0xFFFFFFFFu; // NaN
    case KEVO_I32: return 0x7B5EED5Eu; // a sentinel no problem produces
    case KEVO_I64: return 0x7B5EED5E7B5EED5Eull;
    case KEVO_FP8_E4M3: return 0xFFu; // NaN
    default: return 0;
    }
}

__device__ inline void store_value(void *p, kevo_dtype t, int64_t i, double v)
{
    switch (t) {
    case KEVO_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    case KEVO_F16: ((__half *)p)[i] = __float2half_rn((float)v); break;
    case KEVO_F32: ((float *)p)[i] = (float)v; break;
    case KEVO_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case KEVO_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case KEVO_FP8_E4M3: ((__nv_fp8_e4m3 *)p)[i] = __nv_fp8_e4m3((float)v); break;
    default: break;
    }
}

// The seed of slot k of a strided launch: slot 0 keeps the launch's own, so
// a one-slot launch fills exactly what it always did.
__host__ __device__ inline uint64_t slot_seed(uint64_t seed, unsigned k)
{
    return k ? seed ^ mix64(0x51075ull + k) : seed;
}

// Strided launches (blockIdx.y = slot) work on `slots` copies of a tensor,
// `stride` bytes apart: one launch for every slot of the layout.
__device__ inline void *slot_ptr(void *p, size_t stride)
{
    return (char *)p + (size_t)blockIdx.y * stride;
}

__device__ inline const void *slot_ptr(const void *p, size_t stride)
{
    return (const char *)p + (size_t)blockIdx.y * stride;
}

__global__ void fill_kernel(void *ptr0, size_t stride, kevo_dtype t, int64_t n, kv_fill_kind kind,
                            double a, double b, uint64_t seed0)
{
    void *ptr = slot_ptr(ptr0, stride);
    const uint64_t seed = slot_seed(seed0, blockIdx.y);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = mix64(seed ^ mix64((uint64_t)i));
        double v = 0;
        switch (kind) {
        case KV_FILL_NORMAL: {
            // Box-Muller in single precision from the hash's two halves: the
            // timed rounds refill every slot, and double-precision log and
            // cospi made that the evaluation's largest cost
            float u1 = (float)((h >> 40) + 1) * (1.0f / 16777216.0f); // (0, 1]
            float u2 = (float)((uint32_t)h >> 8) * (1.0f / 16777216.0f);
            v = a + b * (double)(sqrtf(-2.0f * __logf(u1)) * __cosf(6.28318531f * u2));
            break;
        }
        case KV_FILL_UNIFORM: v = a + (b - a) * unit(h); break;
        case KV_FILL_INT_RANGE: {
            double span = b - a;
            v = a + floor(unit(h) * span);
            if (v >= b)
                v = b - 1;
            break;
        }
        case KV_FILL_ZEROS: v = 0; break;
        }
        store_value(ptr, t, i, v);
    }
}

__global__ void poison_kernel(void *ptr, kevo_dtype t, int64_t n)
{
    uint64_t bits = poison_bits(t);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        switch (t) {
        case KEVO_BF16:
        case KEVO_F16: ((uint16_t *)ptr)[i] = (uint16_t)bits; break;
        case KEVO_F32:
        case KEVO_I32: ((uint32_t *)ptr)[i] = (uint32_t)bits; break;
        case KEVO_I64: ((uint64_t *)ptr)[i] = bits; break;
        case KEVO_FP8_E4M3: ((uint8_t *)ptr)[i] = (uint8_t)bits; break;
        default: break;
        }
    }
}

__device__ inline void atomic_max_nonneg(float *addr, float v)
{
    if (!(v > 0)) // the report starts at 0
        return;
    atomicMax((unsigned int *)addr, __float_as_uint(v));
}

struct Sum {
    __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const
    {
        return a + b;
    }
};
struct Min {
    __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const
    {
        return a < b ? a : b;
    }
};
struct Max {
    __device__ float operator()(float a, float b) const
    {
        return fmaxf(a, b);
    }
};

// The block's values combined, in thread 0 (every thread of the block must
// call it). The checks' kernels report one atomic per block: an atomic per
// thread on one address costs more than the check itself once the timed
// rounds check every slot.
template <typename T, typename Op> __device__ T block_reduce(T v, Op op, T identity)
{
    __shared__ T warp_vals[kThreads / 32];
    for (int o = 16; o > 0; o >>= 1)
        v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // an earlier call's values have been read
    if (lane == 0)
        warp_vals[warp] = v;
    __syncthreads();
    v = identity;
    if (threadIdx.x == 0)
        for (int i = 0; i < (int)(blockDim.x + 31) / 32; i++)
            v = op(v, warp_vals[i]);
    return v;
}

// The valid elements of a slot's output: all n, or (counts != NULL) the rows
// its counts tensor adds up to, times row_elems, clamped to n.
__device__ inline int64_t valid_in_slot(int64_t n, const kv_dev_rows *rows, size_t stride)
{
    if (!rows || !rows->counts)
        return n;
    __shared__ int64_t total;
    if (threadIdx.x == 0) {
        const void *c = slot_ptr(rows->counts, stride);
        int64_t sum = 0;
        for (int64_t i = 0; i < rows->n_counts; i++)
            sum += (int64_t)load_as_double(c, rows->counts_dtype, i);
        int64_t v = sum * rows->row_elems;
        total = v < 0 ? 0 : v > n ? n : v;
    }
    __syncthreads();
    return total;
}

__global__ void compare_kernel(const void *got0, const void *want0, size_t stride, kevo_dtype t,
                               int64_t n_all, kv_dev_rows rows, int use_rows, double atol,
                               double rtol, kv_dev_report *r)
{
    const void *got = slot_ptr(got0, stride), *want = slot_ptr(want0, stride);
    const int64_t n = valid_in_slot(n_all, use_rows ? &rows : nullptr, stride);
    const bool exact = atol == 0 && rtol == 0;
    const uint64_t poison = poison_bits(t);
    unsigned long long bad = 0, unwritten = 0, first = ULLONG_MAX;
    float max_abs = 0, max_rel = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t gb = load_bits(got, t, i), wb = load_bits(want, t, i);
        if (gb == wb)
            continue;
        double g = load_as_double(got, t, i), w = load_as_double(want, t, i);
        bool ok = false;
        if (!exact && !isnan(g) && !isnan(w) && !isinf(g) && !isinf(w)) {
            double d = fabs(g - w);
            ok = d <= atol + rtol * fabs(w);
            max_abs = fmaxf(max_abs, (float)d);
            if (w != 0)
                max_rel = fmaxf(max_rel, (float)(d / fabs(w)));
        }
        if (!ok) {
            bad++;
            if (gb == poison)
                unwritten++;
            if ((unsigned long long)i < first)
                first = (unsigned long long)i;
        }
    }
    bad = block_reduce(bad, Sum(), 0ull);
    unwritten = block_reduce(unwritten, Sum(), 0ull);
    first = block_reduce(first, Min(), ULLONG_MAX);
    max_abs = block_reduce(max_abs, Max(), 0.0f);
    max_rel = block_reduce(max_rel, Max(), 0.0f);
    if (threadIdx.x != 0)
        return;
    if (bad) {
        atomicAdd(&r->bad, bad);
        atomicAdd(&r->unwritten, unwritten);
        atomicMin(&r->first_bad, first);
    }
    atomic_max_nonneg(&r->max_abs, max_abs);
    atomic_max_nonneg(&r->max_rel, max_rel);
}

__global__ void guard_fill_kernel(uint8_t *p, size_t bytes, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint8_t)(mix64(seed ^ (i >> 3)) >> (8 * (i & 7)));
}

__global__ void guard_check_kernel(const uint8_t *p, size_t bytes, uint64_t seed, kv_dev_report *r)
{
    unsigned long long bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes;
         i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != (uint8_t)(mix64(seed ^ (i >> 3)) >> (8 * (i & 7))))
            bad++;
    if (bad)
        atomicAdd(&r->guard_bad, bad);
}

__global__ void checksum_kernel(const uint8_t *p0, size_t stride, size_t bytes, kv_dev_report *r)
{
    const uint8_t *p = (const uint8_t *)slot_ptr(p0, stride);
    unsigned long long sum = 0;
    size_t words = bytes / 8;
    const uint64_t *w = (const uint64_t *)p;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
         i += (size_t)gridDim.x * blockDim.x)
        sum += mix64(w[i] ^ mix64(i));
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (size_t i = words * 8; i < bytes; i++)
            sum += mix64((uint64_t)p[i] ^ mix64(i + (1ull << 62)));
    sum = block_reduce(sum, Sum(), 0ull);
    if (threadIdx.x == 0 && sum)
        atomicAdd(&r->checksum, sum); // wrap-around addition: order-independent
}

__global__ void report_reset_kernel(kv_dev_report *r)
{
    r->bad = r->unwritten = r->guard_bad = r->checksum = 0;
    r->first_bad = ULLONG_MAX;
    r->max_abs = r->max_rel = 0;
}

__global__ void window_peers_kernel(ncclWindow_t window, int world, void **out)
{
    for (int p = 0; p < world; p++)
        out[p] = ncclGetLsaPointer(window, 0, p);
}

// Holds the stream until the host writes `epoch` into the mapped flag, or
// until timeout_ns of %globaltimer have passed: a side that synchronises with
// the host inside kevo_run then only costs the timeout, never a deadlock.
__global__ void gate_kernel(const volatile unsigned *flag, unsigned epoch, uint64_t timeout_ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        if (*flag == epoch)
            return;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < timeout_ns);
}

} // namespace

extern "C" {

cudaError_t kv_dev_gate(const volatile unsigned *flag, unsigned epoch, uint64_t timeout_ns,
                        cudaStream_t s)
{
    gate_kernel<<<1, 1, 0, s>>>(flag, epoch, timeout_ns);
    return cudaGetLastError();
}

cudaError_t kv_dev_fill(void *ptr, kevo_dtype dtype, int64_t n, kv_fill_kind kind, double a,
                        double b, uint64_t seed, cudaStream_t s)
{
    return kv_dev_fill_slots(ptr, 0, 1, dtype, n, kind, a, b, seed, s);
}

cudaError_t kv_dev_fill_slots(void *ptr, size_t stride, int slots, kevo_dtype dtype, int64_t n,
                              kv_fill_kind kind, double a, double b, uint64_t seed, cudaStream_t s)
{
    if (n <= 0 || slots <= 0)
        return cudaSuccess;
    fill_kernel<<<dim3(blocks_for(n), slots), kThreads, 0, s>>>(ptr, stride, dtype, n, kind, a, b,
                                                                mix64(seed));
    return cudaGetLastError();
}

cudaError_t kv_dev_poison(void *ptr, kevo_dtype dtype, int64_t n, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    poison_kernel<<<blocks_for(n), kThreads, 0, s>>>(ptr, dtype, n);
    return cudaGetLastError();
}

cudaError_t kv_dev_guard_fill(void *ptr, size_t bytes, uint64_t seed, cudaStream_t s)
{
    if (bytes == 0)
        return cudaSuccess;
    guard_fill_kernel<<<blocks_for((int64_t)bytes), kThreads, 0, s>>>((uint8_t *)ptr, bytes, seed);
    return cudaGetLastError();
}

cudaError_t kv_dev_report_reset(kv_dev_report *r, cudaStream_t s)
{
    report_reset_kernel<<<1, 1, 0, s>>>(r);
    return cudaGetLastError();
}

cudaError_t kv_dev_compare(const void *got, const void *want, kevo_dtype dtype, int64_t n,
                           double atol, double rtol, kv_dev_report *r, cudaStream_t s)
{
    return kv_dev_compare_slots(got, want, 0, 1, dtype, n, NULL, atol, rtol, r, s);
}

cudaError_t kv_dev_compare_slots(const void *got, const void *want, size_t stride, int slots,
                                 kevo_dtype dtype, int64_t n, const kv_dev_rows *rows, double atol,
                                 double rtol, kv_dev_report *r, cudaStream_t s)
{
    if (n <= 0 || slots <= 0)
        return cudaSuccess;
    kv_dev_rows none = {NULL, KEVO_I32, 0, 0};
    compare_kernel<<<dim3(blocks_for(n), slots), kThreads, 0, s>>>(
        got, want, stride, dtype, n, rows ? *rows : none, rows != NULL, atol, rtol, r);
    return cudaGetLastError();
}

cudaError_t kv_dev_guard_check(const void *ptr, size_t bytes, uint64_t seed, kv_dev_report *r,
                               cudaStream_t s)
{
    if (bytes == 0)
        return cudaSuccess;
    guard_check_kernel<<<blocks_for((int64_t)bytes), kThreads, 0, s>>>((const uint8_t *)ptr, bytes,
                                                                       seed, r);
    return cudaGetLastError();
}

cudaError_t kv_dev_checksum(const void *ptr, size_t bytes, kv_dev_report *r, cudaStream_t s)
{
    return kv_dev_checksum_slots(ptr, 0, 1, bytes, r, s);
}

cudaError_t kv_dev_checksum_slots(const void *ptr, size_t stride, int slots, size_t bytes,
                                  kv_dev_report *r, cudaStream_t s)
{
    if (bytes == 0 || slots <= 0)
        return cudaSuccess;
    checksum_kernel<<<dim3(blocks_for((int64_t)(bytes / 8) + 1), slots), kThreads, 0, s>>>(
        (const uint8_t *)ptr, stride, bytes, r);
    return cudaGetLastError();
}

cudaError_t kv_dev_read_element(const void *ptr, kevo_dtype dtype, int64_t index, double *out)
{
    size_t size = kevo_dtype_size(dtype);
    unsigned char raw[8] = {0};
    cudaError_t e = cudaMemcpy(raw, (const unsigned char *)ptr + (size_t)index * size, size,
                               cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return e;
    switch (dtype) {
    case KEVO_BF16: {
        __nv_bfloat16 v;
        memcpy(&v, raw, 2);
        *out = (double)__bfloat162float(v);
        break;
    }
    case KEVO_F16: {
        __half v;
        memcpy(&v, raw, 2);
        *out = (double)__half2float(v);
        break;
    }
    case KEVO_F32: {
        float v;
        memcpy(&v, raw, 4);
        *out = v;
        break;
    }
    case KEVO_I32: {
        int32_t v;
        memcpy(&v, raw, 4);
        *out = v;
        break;
    }
    case KEVO_I64: {
        int64_t v;
        memcpy(&v, raw, 8);
        *out = (double)v;
        break;
    }
    case KEVO_FP8_E4M3: {
        __nv_fp8_e4m3 v;
        v.__x = raw[0];
        *out = (double)(float)v;
        break;
    }
    default: *out = 0;
    }
    return cudaSuccess;
}

cudaError_t kv_dev_window_peers(ncclWindow_t window, int world, void *peers[KEVO_MAX_RANKS])
{
    void **d = nullptr;
    cudaError_t e = cudaMalloc(&d, sizeof(void *) * KEVO_MAX_RANKS);
    if (e != cudaSuccess)
        return e;
    window_peers_kernel<<<1, 1>>>(window, world, d);
    e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpy(peers, d, sizeof(void *) * world, cudaMemcpyDeviceToHost);
    cudaError_t f = cudaFree(d);
    return e != cudaSuccess ? e : f;
}

ncclResult_t kv_dev_comm_create(ncclComm_t comm, int lsa_barrier_count, void **out)
{
    ncclDevComm *dc = new (std::nothrow) ncclDevComm;
    if (!dc)
        return ncclSystemError;
    memset((void *)dc, 0, sizeof *dc);
    ncclDevCommRequirements reqs;
    memset(&reqs, 0, sizeof reqs); // NCCL 2.28 has no initializer macro; never set lsaMultimem
    reqs.lsaBarrierCount = lsa_barrier_count;
    ncclResult_t r = ncclDevCommCreate(comm, &reqs, dc);
    if (r != ncclSuccess) {
        delete dc;
        return r;
    }
    *out = dc;
    return ncclSuccess;
}

void kv_dev_comm_destroy(ncclComm_t comm, void *devcomm)
{
    if (!devcomm)
        return;
    ncclDevComm *dc = (ncclDevComm *)devcomm;
    (void)ncclDevCommDestroy(comm, dc);
    delete dc;
}

} // extern "C"
