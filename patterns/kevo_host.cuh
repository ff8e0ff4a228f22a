// kevo_host.cuh — the host code that every seed needs and none should write again: its state
// in ctx->user, the failure message, the occupancy of a kernel capped per SM, the grid clamp
// and the check after a launch. Host only; kernels are untouched by it.
//
// Every message goes to stderr as "<who>: <what>" (who: "problem/seed", as kevo shows it), and
// every helper that can fail returns 1 after its message, so that kevo_init and kevo_run can
// `return` its result.
#ifndef KEVO_PATTERNS_HOST_CUH
#define KEVO_PATTERNS_HOST_CUH

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kevo/kernel.h"

// "<who>: <printf message>" on stderr; returns 1 (kevo_init and kevo_run's failure).
static inline int kevo_fail(const char *who, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static inline int kevo_fail(const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

// kevo_init: a zeroed T as ctx->user (kevo_fini frees it with kevo_state_free). NULL after a
// message when out of memory.
template <class T> static inline T *kevo_state_new(kevo_ctx *ctx, const char *who)
{
    T *st = (T *)calloc(1, sizeof(T));
    if (!st) {
        kevo_fail(who, "out of host memory");
        return NULL;
    }
    ctx->user = st;
    return st;
}

// kevo_run: the state kevo_init made, or NULL after a message when it did not run (or failed).
template <class T> static inline T *kevo_state_of(const kevo_ctx *ctx, const char *who)
{
    if (!ctx->user)
        kevo_fail(who, "kevo_init did not run");
    return (T *)ctx->user;
}

static inline void kevo_state_free(kevo_ctx *ctx)
{
    free(ctx->user);
    ctx->user = NULL;
}

// kevo_init: how many CTAs of `kernel` (threads per CTA, dynamic shared memory smem) fit on one
// SM at once, at most `most`, into *per_sm; 1 after a message when the query fails or none fits.
// CTAs that wait for each other must all be resident, so grids are sized from this.
static inline int kevo_ctas_per_sm(const char *who, const void *kernel, int threads, size_t smem,
                                   int most, int *per_sm)
{
    int n = 0;
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem);
    if (e != cudaSuccess)
        return kevo_fail(who, "occupancy: %s", cudaGetErrorString(e));
    if (n > most)
        n = most;
    if (n < 1)
        return kevo_fail(who, "the kernel does not fit on an SM");
    *per_sm = n;
    return 0;
}

// want, capped at most, and at least 1.
static inline int64_t kevo_clamp_grid(int64_t want, int64_t most)
{
    const int64_t g = want < most ? want : most;
    return g > 0 ? g : 1;
}

// After a launch (or any enqueue): 0, or 1 after "<who>: <what>: <CUDA error>".
static inline int kevo_launched(const char *who, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return kevo_fail(who, "%s: %s", what, cudaGetErrorString(e));
    return 0;
}

#endif
