// cuda_check.h — CHECK(call) for the stand-alone CUDA benchmarks of bench/: a failed CUDA runtime
// call prints where and why, and ends the program with status 1.
#ifndef KEVO_BENCH_CUDA_CHECK_H
#define KEVO_BENCH_CUDA_CHECK_H

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(x)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#endif
