// launch_floor.cu — the smallest time a call can take under kevo's timer.
//
// kevo times every call between two CUDA events on one stream, in blocks
// held behind a gate until they are enqueued (worker/timing.c).
// This program measures, the same way and on W GPUs of this machine (one
// process, peer access), what a call costs before it moves any data:
//
//   empty-1      one empty kernel of one CTA
//   empty-132    one empty kernel of 132 CTAs x 512 threads
//   two-kernels  two empty kernels in a row
//   barrier-1    one CTA: a flag to every peer, then wait for theirs
//                (system-scope release/acquire, call epochs)
//   barrier-132  the same in every one of 132 CTAs (one flag per CTA and peer)
//   barrier-2x   barrier-132 twice in one kernel (start and end barriers)
//
// Prints per case the median over the timed calls, the max over GPUs: the
// floor under which no kernel's time at the small sizes can go, and how
// much of a 64 KiB collective's time is fixed cost.
//
//   launch_floor [W] [calls]       (defaults: 2 GPUs, 2000 calls)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"

constexpr int kMaxW = 8, kCtas = 132, kBlock = 10;

struct Flags {
    unsigned *peer[kMaxW]; // every rank's flag array, [kCtas][kMaxW] each
    int rank, world;
};

__global__ void empty_kernel()
{
}

__device__ void barrier(const Flags &f, unsigned epoch)
{
    if (threadIdx.x < f.world && threadIdx.x != f.rank) {
        unsigned *to = f.peer[threadIdx.x] + blockIdx.x * kMaxW + f.rank;
        asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(to), "r"(epoch) : "memory");
        const unsigned *mine = f.peer[f.rank] + blockIdx.x * kMaxW + threadIdx.x;
        unsigned v;
        do
            asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(mine) : "memory");
        while (v < epoch);
    }
    __syncthreads();
}

__global__ void barrier_kernel(Flags f, unsigned epoch, int times)
{
    for (int t = 0; t < times; t++)
        barrier(f, epoch * 2 + t);
}

__global__ void gate_kernel(const volatile unsigned *flag, unsigned epoch)
{
    long long t0 = clock64();
    while (*flag != epoch && clock64() - t0 < 4000000000ll) {
    }
}

struct Rank {
    int dev;
    cudaStream_t stream;
    unsigned *flags;
    volatile unsigned *gate_host;
    unsigned *gate_dev;
    std::vector<cudaEvent_t> ev;
};

enum Case { EMPTY_1, EMPTY_132, TWO_KERNELS, BARRIER_1, BARRIER_132, BARRIER_2X, N_CASES };
static const char *const kNames[] = {"empty-1",   "empty-132",   "two-kernels",
                                     "barrier-1", "barrier-132", "barrier-2x"};

static void launch(Case c, const Flags &f, unsigned epoch, cudaStream_t s)
{
    switch (c) {
    case EMPTY_1: empty_kernel<<<1, 32, 0, s>>>(); break;
    case EMPTY_132: empty_kernel<<<kCtas, 512, 0, s>>>(); break;
    case TWO_KERNELS:
        empty_kernel<<<kCtas, 512, 0, s>>>();
        empty_kernel<<<kCtas, 512, 0, s>>>();
        break;
    case BARRIER_1: barrier_kernel<<<1, 32, 0, s>>>(f, epoch, 1); break;
    case BARRIER_132: barrier_kernel<<<kCtas, 512, 0, s>>>(f, epoch, 1); break;
    default: barrier_kernel<<<kCtas, 512, 0, s>>>(f, epoch, 2); break;
    }
    CHECK(cudaGetLastError());
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); // lines survive a time limit
    int world = argc > 1 ? atoi(argv[1]) : 2, calls = argc > 2 ? atoi(argv[2]) : 2000;
    int have = 0;
    CHECK(cudaGetDeviceCount(&have));
    if (world < 2 || world > kMaxW || world > have || calls < kBlock) {
        fprintf(stderr, "launch_floor: need 2..%d GPUs (have %d) and >= %d calls\n", kMaxW, have,
                kBlock);
        return 2;
    }
    calls -= calls % kBlock;
    std::vector<Rank> r(world);
    for (int i = 0; i < world; i++) {
        r[i].dev = i;
        CHECK(cudaSetDevice(i));
        for (int j = 0; j < world; j++)
            if (j != i)
                CHECK(cudaDeviceEnablePeerAccess(j, 0));
        CHECK(cudaStreamCreateWithFlags(&r[i].stream, cudaStreamNonBlocking));
        CHECK(cudaMalloc(&r[i].flags, kCtas * kMaxW * sizeof(unsigned)));
        CHECK(cudaMemset(r[i].flags, 0, kCtas * kMaxW * sizeof(unsigned)));
        CHECK(cudaHostAlloc((void **)&r[i].gate_host, sizeof(unsigned), cudaHostAllocMapped));
        *r[i].gate_host = 0;
        CHECK(cudaHostGetDevicePointer((void **)&r[i].gate_dev, (void *)r[i].gate_host, 0));
        r[i].ev.resize(2 * calls);
        for (auto &e : r[i].ev)
            CHECK(cudaEventCreate(&e));
    }
    for (int i = 0; i < world; i++) {
        CHECK(cudaSetDevice(i));
        CHECK(cudaDeviceSynchronize());
    }
    unsigned epoch = 0, gate = 0;
    printf("launch_floor: W=%d, %d timed calls per case, blocks of %d behind a gate\n", world,
           calls, kBlock);
    printf("%-12s %10s %10s\n", "case", "median us", "p90 us");
    fflush(stdout);
    for (int c = 0; c < N_CASES; c++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int warm = 0; warm < 2; warm++) { // the first pass warms up, the second is timed
            for (int b = 0; b < calls; b += kBlock) {
                gate++;
                for (int i = 0; i < world; i++) {
                    CHECK(cudaSetDevice(i));
                    gate_kernel<<<1, 1, 0, r[i].stream>>>(r[i].gate_dev, gate);
                    CHECK(cudaGetLastError());
                }
                // one untimed call first, as kevo does: it absorbs the skew
                for (int k = -1; k < kBlock; k++) {
                    epoch++;
                    for (int i = 0; i < world; i++) {
                        Flags f;
                        for (int j = 0; j < world; j++)
                            f.peer[j] = r[j].flags;
                        f.rank = i;
                        f.world = world;
                        CHECK(cudaSetDevice(i));
                        if (k >= 0)
                            CHECK(cudaEventRecord(r[i].ev[2 * (b + k)], r[i].stream));
                        launch((Case)c, f, epoch, r[i].stream);
                        if (k >= 0)
                            CHECK(cudaEventRecord(r[i].ev[2 * (b + k) + 1], r[i].stream));
                    }
                }
                for (int i = 0; i < world; i++)
                    __atomic_store_n(r[i].gate_host, gate, __ATOMIC_RELEASE);
            }
            for (int i = 0; i < world; i++) {
                CHECK(cudaSetDevice(i));
                CHECK(cudaStreamSynchronize(r[i].stream));
            }
        }
        double med = 0, p90 = 0;
        for (int i = 0; i < world; i++) {
            std::vector<double> us(calls);
            for (int k = 0; k < calls; k++) {
                float ms;
                CHECK(cudaEventElapsedTime(&ms, r[i].ev[2 * k], r[i].ev[2 * k + 1]));
                us[k] = ms * 1e3;
            }
            std::sort(us.begin(), us.end());
            med = std::max(med, us[calls / 2]);
            p90 = std::max(p90, us[(int)(0.9 * (calls - 1))]);
        }
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("%-12s %10.2f %10.2f   (wall %.2f s)\n", kNames[c], med, p90, wall);
    }
    return 0;
}
