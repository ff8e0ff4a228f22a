// link_overlap.cu — how fast the NVLink between two GPUs goes when the copy engines and the
// SMs move data at the same time.
//
// allreduce at 256 MiB needs about 382 GB/s per direction, both directions at once, to reach
// 80% of the link roofline; one copy engine gives 397 GB/s and SM stores 370 GB/s
// (the project's GPU notes), each alone. Whether the two add up decides whether a seed that
// pulls with the copy engine while its kernel pushes with SM stores can beat a pure-SM one.
//
// Both GPUs do the same thing at the same time (both link directions loaded, as in a
// collective); every case moves BYTES per direction in total, split between two streams of each
// GPU where it names two mechanisms (the copy engine's share first). Each repetition starts
// behind a gate kernel released by the host once everything is enqueued, is timed with events
// on the first stream (the second joins it), and the figure is the median over the
// repetitions of the slower GPU's time:
//
//   ce-pull            cudaMemcpyAsync peer -> local
//   ce-push            cudaMemcpyAsync local -> peer
//   ce-pull x2         two pulls of half each, on two streams
//   ce-pull+ce-push    a pull and a push at once
//   sm-store           a kernel's 16-byte stores into the peer
//   sm-load            a kernel's 16-byte loads from the peer, stored locally
//   ce-pull+sm-store   the copy engine pulls while a kernel pushes with stores
//   ce-pull+sm-load    the copy engine pulls while a kernel pulls with loads
//
//   link_overlap [MiB per direction] [repetitions]    (defaults: 256, 20)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"

constexpr int kThreads = 512;

__global__ void gate_kernel(const volatile unsigned *flag, unsigned value)
{
    long long t0 = clock64();
    while (*flag != value && clock64() - t0 < 4000000000ll) {
    }
}

// dst[i] = src[i] over n 16-byte vectors; one of the two is on the peer.
__global__ void __launch_bounds__(kThreads) copy_kernel(int4 *dst, const int4 *src, size_t n)
{
    size_t stride = (size_t)gridDim.x * kThreads;
    for (size_t i = blockIdx.x * (size_t)kThreads + threadIdx.x; i < n; i += stride)
        dst[i] = src[i];
}

enum Mech { NONE, CE_PULL, CE_PUSH, SM_STORE, SM_LOAD };

struct Case {
    const char *name;
    Mech a, b;      // the mechanisms on the first and the second stream
    double a_share; // the first one's share of the bytes
};

struct Gpu {
    cudaStream_t s[2];
    char *src, *dst; // local buffers of BYTES each
    cudaEvent_t start, end, joined;
    volatile unsigned *gate_host;
    unsigned *gate_dev;
    int ctas;
};

static void enqueue(Mech m, Gpu *g, Gpu *peer, size_t off, size_t bytes, cudaStream_t s)
{
    if (m == NONE || bytes == 0)
        return;
    if (m == CE_PULL || m == CE_PUSH) {
        char *dst = m == CE_PULL ? g->dst + off : peer->dst + off;
        const char *src = m == CE_PULL ? peer->src + off : g->src + off;
        CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        return;
    }
    int4 *dst = (int4 *)(m == SM_STORE ? peer->dst + off : g->dst + off);
    const int4 *src = (const int4 *)(m == SM_STORE ? g->src + off : peer->src + off);
    copy_kernel<<<g->ctas, kThreads, 0, s>>>(dst, src, bytes / sizeof(int4));
    CHECK(cudaGetLastError());
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    size_t mib = argc > 1 ? (size_t)atoll(argv[1]) : 256;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    int have = 0;
    CHECK(cudaGetDeviceCount(&have));
    if (have < 2 || mib < 1 || reps < 1) {
        fprintf(stderr, "link_overlap: needs 2 GPUs (have %d), MiB >= 1, repetitions >= 1\n", have);
        return 2;
    }
    const size_t bytes = mib << 20;
    Gpu g[2];
    for (int i = 0; i < 2; i++) {
        CHECK(cudaSetDevice(i));
        CHECK(cudaDeviceEnablePeerAccess(1 - i, 0));
        for (int k = 0; k < 2; k++)
            CHECK(cudaStreamCreateWithFlags(&g[i].s[k], cudaStreamNonBlocking));
        CHECK(cudaMalloc(&g[i].src, bytes));
        CHECK(cudaMalloc(&g[i].dst, bytes));
        CHECK(cudaMemset(g[i].src, 0x5a + i, bytes));
        CHECK(cudaEventCreate(&g[i].start));
        CHECK(cudaEventCreate(&g[i].end));
        CHECK(cudaEventCreateWithFlags(&g[i].joined, cudaEventDisableTiming));
        CHECK(cudaHostAlloc((void **)&g[i].gate_host, sizeof(unsigned), cudaHostAllocMapped));
        *g[i].gate_host = 0;
        CHECK(cudaHostGetDevicePointer((void **)&g[i].gate_dev, (void *)g[i].gate_host, 0));
        int sms = 0, per_sm = 0;
        CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i));
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_kernel, kThreads, 0));
        g[i].ctas = sms * std::min(per_sm, 2);
        CHECK(cudaDeviceSynchronize());
    }
    const Case cases[] = {
        {"ce-pull", CE_PULL, NONE, 1.0},
        {"ce-push", CE_PUSH, NONE, 1.0},
        {"ce-pull x2", CE_PULL, CE_PULL, 0.5},
        {"ce-pull+ce-push", CE_PULL, CE_PUSH, 0.5},
        {"sm-store", SM_STORE, NONE, 1.0},
        {"sm-load", SM_LOAD, NONE, 1.0},
        {"ce-pull+sm-store", CE_PULL, SM_STORE, 0.4},
        {"ce-pull+sm-store", CE_PULL, SM_STORE, 0.5},
        {"ce-pull+sm-store", CE_PULL, SM_STORE, 0.6},
        {"ce-pull+sm-load", CE_PULL, SM_LOAD, 0.5},
    };
    printf("link_overlap: %zu MiB per direction, both directions at once, %d repetitions, "
           "%d CTAs x %d threads for SM copies\n",
           mib, reps, g[0].ctas, kThreads);
    printf("%-18s %6s %10s %12s\n", "case", "ce", "median us", "GB/s per dir");
    unsigned gate = 0;
    for (const Case &c : cases) {
        std::vector<double> us;
        for (int r = -3; r < reps; r++) { // three warm-up repetitions
            gate++;
            size_t a_bytes = (size_t)(c.a_share * (double)(bytes / 4096)) * 4096;
            for (int i = 0; i < 2; i++) {
                Gpu *me = &g[i], *peer = &g[1 - i];
                CHECK(cudaSetDevice(i));
                gate_kernel<<<1, 1, 0, me->s[0]>>>(me->gate_dev, gate);
                CHECK(cudaGetLastError());
                CHECK(cudaEventRecord(me->start, me->s[0]));
                if (c.b != NONE)
                    CHECK(cudaStreamWaitEvent(me->s[1], me->start, 0));
                enqueue(c.a, me, peer, 0, a_bytes, me->s[0]);
                enqueue(c.b, me, peer, a_bytes, bytes - a_bytes, me->s[1]);
                if (c.b != NONE) {
                    CHECK(cudaEventRecord(me->joined, me->s[1]));
                    CHECK(cudaStreamWaitEvent(me->s[0], me->joined, 0));
                }
                CHECK(cudaEventRecord(me->end, me->s[0]));
            }
            for (int i = 0; i < 2; i++)
                __atomic_store_n(g[i].gate_host, gate, __ATOMIC_RELEASE);
            double worst = 0;
            for (int i = 0; i < 2; i++) {
                CHECK(cudaSetDevice(i));
                CHECK(cudaEventSynchronize(g[i].end));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, g[i].start, g[i].end));
                worst = std::max(worst, (double)ms * 1e3);
            }
            if (r >= 0)
                us.push_back(worst);
        }
        std::sort(us.begin(), us.end());
        double med = us[us.size() / 2];
        char share[16] = "";
        if (c.b != NONE)
            snprintf(share, sizeof share, "%.0f%%", c.a_share * 100);
        printf("%-18s %6s %10.1f %12.1f\n", c.name, share, med, (double)bytes / med / 1e3);
    }
    return 0;
}
