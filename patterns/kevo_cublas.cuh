// kevo_cublas.cuh — host side of the tensor-parallel GEMM seeds: the row-major bf16 cuBLAS GEMM
// that the references use, and the host checks and allocations every GEMM seed repeats.
//
// Used by patterns/{gemm_allreduce,gemm_reducescatter,allgather_gemm}/cublas_*.cu directly and
// by the fused_*_sm.cu seeds of those problems through kevo_gemm_mma.cuh. Host code only. Every
// function takes `who`, the "problem/seed" prefix of its error messages
// (e.g. "gemm_allreduce/cublas_oneshot_sm", as kevo_host.cuh's), and reports a failure on stderr
// before returning it.
#ifndef KEVO_PATTERNS_CUBLAS_CUH
#define KEVO_PATTERNS_CUBLAS_CUH

#include <stdint.h>
#include <stdio.h>

#include "kevo/kernel.h"

// C[m][n] = A[m][k] . B[k][n]: row-major and contiguous, bf16 in and out, fp32 accumulation, on
// ctx->cublas (bound to ctx->stream). cuBLAS is column-major, so this is C^T = B^T A^T, as the
// references compute it. Returns 0, or 1 after "who: cublasGemmEx: ...".
static inline int kevo_cublas_gemm_rm(const kevo_ctx *ctx, const char *who, int64_t m, int64_t n,
                                      int64_t k, const void *a, const void *b, void *c)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t cs = cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k,
                                     &one, b, CUDA_R_16BF, (int)n, a, CUDA_R_16BF, (int)k, &zero, c,
                                     CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "%s: cublasGemmEx: %s\n", who, cublasGetStatusString(cs));
        return 1;
    }
    return 0;
}

// Which dimensions kevo_gemm_params divides among the W ranks: K (A_r [M][K/W], B_r [K/W][N])
// or N (B_r [K][N/W]), and whether M must be a multiple of W too (rows divided among ranks).
enum { KEVO_GEMM_SPLIT_K = 0, KEVO_GEMM_SPLIT_N = 1, KEVO_GEMM_SPLIT_M = 2 };

// The problem's M, N, K with the split dimension (KEVO_GEMM_SPLIT_K or _N, | KEVO_GEMM_SPLIT_M)
// divided among the W = ctx->world ranks: *m = M and the per-rank sizes *n (N or N/W) and *k
// (K/W or K). The divided dimensions must be multiples of W; M, *n and *k at most `limit`, and
// M x N at most max_mn (0: no bound). Returns 1, or 0 after "who: bad parameters M=.. N=.. K=..
// W=..".
static inline int kevo_gemm_params(const kevo_ctx *ctx, const char *who, int split, int64_t limit,
                                   int64_t max_mn, int64_t *m, int64_t *n, int64_t *k)
{
    const int w = ctx->world, split_n = split & KEVO_GEMM_SPLIT_N;
    const int64_t mm = kevo_param(ctx, "M", -1), nn = kevo_param(ctx, "N", -1),
                  kk = kevo_param(ctx, "K", -1);
    *m = mm;
    *n = !split_n ? nn : w > 0 ? nn / w : -1;
    *k = split_n ? kk : w > 0 ? kk / w : -1;
    if (*m <= 0 || *n <= 0 || *k <= 0 || (split_n ? nn : kk) % w != 0 ||
        ((split & KEVO_GEMM_SPLIT_M) && mm % w != 0) || *m > limit || *n > limit || *k > limit ||
        (max_mn > 0 && mm * nn > max_mn)) {
        fprintf(stderr, "%s: bad parameters M=%lld N=%lld K=%lld W=%d\n", who, (long long)mm,
                (long long)nn, (long long)kk, w);
        return 0;
    }
    return 1;
}

// A = ctx->inputs[0], B = ctx->inputs[1] and C = ctx->outputs[0] are bf16 with these element
// counts (the caller has checked n_inputs >= 2 and n_outputs >= 1). Returns 1, or 0 after
// "who: unexpected tensors".
static inline int kevo_gemm_tensors_ok(const kevo_ctx *ctx, const char *who, int64_t a_numel,
                                       int64_t b_numel, int64_t c_numel)
{
    const kevo_tensor *ta = &ctx->inputs[0], *tb = &ctx->inputs[1], *tc = &ctx->outputs[0];
    if (ta->dtype != KEVO_BF16 || tb->dtype != KEVO_BF16 || tc->dtype != KEVO_BF16 ||
        ta->numel != a_numel || tb->numel != b_numel || tc->numel != c_numel) {
        fprintf(stderr, "%s: unexpected tensors\n", who);
        return 0;
    }
    return 1;
}

// cudaFree(p) unless p is NULL; a failure is reported ("who: cudaFree(what): ...") and ignored.
static inline void kevo_free_checked(const char *who, void *p, const char *what)
{
    if (!p)
        return;
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess)
        fprintf(stderr, "%s: cudaFree(%s): %s\n", who, what, cudaGetErrorString(e));
}

// One symmetric scratch buffer of `bytes` (kevo_init only): every rank's copy into peer[0..W-1].
// Returns 1, or 0 after "who: scratch_alloc of N bytes failed (M left)".
template <class T>
static inline int kevo_scratch_peers(kevo_ctx *ctx, const char *who, size_t bytes,
                                     T *(&peer)[KEVO_MAX_RANKS])
{
    void *local = NULL, *p[KEVO_MAX_RANKS] = {0};
    if (ctx->scratch_alloc(ctx, bytes, &local, p, NULL) != 0) {
        fprintf(stderr, "%s: scratch_alloc of %zu bytes failed (%zu left)\n", who, bytes,
                ctx->scratch_bytes_left);
        return 0;
    }
    for (int q = 0; q < ctx->world && q < KEVO_MAX_RANKS; q++)
        peer[q] = (T *)p[q];
    return 1;
}

// Two symmetric buffers of `bytes` for double buffering by the parity of a launch's epoch
// (chosen in the kernel: kevo_epoch_begin, kevo_sync.cuh; a graph replay repeats every host
// value, so the host cannot choose), in ONE allocation when the scratch holds both, else one
// buffer: peer[q] is rank q's first buffer and its second starts *stride elements of T after it
// (*stride = 0 with one buffer), so a kernel takes peer[q] + (epoch & 1) * stride. The choice
// is the same on every rank (same sizes, same scratch area). Returns the number of buffers, or
// 0 after a failed allocation.
template <class T>
static inline int kevo_scratch_sets(kevo_ctx *ctx, const char *who, size_t bytes,
                                    T *(&peer)[KEVO_MAX_RANKS], int64_t *stride)
{
    const size_t padded = (bytes + 255) / 256 * 256; // the second as aligned as the first
    const int nbuf = ctx->scratch_bytes_left >= 2 * (bytes + 256) ? 2 : 1;
    if (!kevo_scratch_peers(ctx, who, (size_t)nbuf * padded, peer))
        return 0;
    *stride = nbuf == 2 ? (int64_t)(padded / sizeof(T)) : 0;
    return nbuf;
}

#endif
