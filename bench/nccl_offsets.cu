// nccl_offsets.cu — NCCL's collectives on buffers of a symmetric window at
// shifted offsets, against the same calls on plain cudaMalloc buffers and
// against the host (issue 18, item 3: "which offsets does NCCL get wrong?").
//
// One thread per GPU, one communicator each. Every case is one collective
// (all-reduce, all-gather, reduce-scatter, broadcast, all-to-all as grouped
// send/recv) of one dtype and count, its send and receive buffers at the
// given byte offsets, out of place or in place, run once on the window and
// once on plain memory; every rank compares its output with the host's
// exact answer (small integers: sums are exact in every dtype). Prints every
// failing case (the first 60), then for each collective, dtype and memory
// the smallest failing count and the offsets and counts that fail.
//
//   nccl_offsets [W] [sequence]
//     W         GPUs (default 2)
//     sequence  only the sequence of the issue: an all-gather of 37 int32
//               into scratch, then a reduce-scatter of 7511 bf16 per rank
//               from scratch laid out the way kevo's scratch allocator did
//   NCCL_OFFSETS_CSV=FILE  every failure written to FILE, one line each
//
// Exit status: 0 no case failed, 1 some did, 2 a CUDA or NCCL call failed.
// Needs NCCL_NVLS_ENABLE=0 on machines that forbid NVLink multicast.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda_check.h"

#define NCHECK(x)                                                                               \
    do {                                                                                        \
        ncclResult_t r_ = (x);                                                                  \
        if (r_ != ncclSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)

enum Coll { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, ALLTOALL, N_COLLS };
static const char *coll_name[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                  "alltoall"};

struct Dtype {
    const char *name;
    ncclDataType_t nccl;
    size_t size;
};
static const Dtype dtypes[] = {
    {"bf16", ncclBfloat16, 2}, {"f32", ncclFloat32, 4}, {"i32", ncclInt32, 4}, {"i8", ncclInt8, 1}};
constexpr int kDtypes = sizeof dtypes / sizeof dtypes[0];

struct Case {
    int coll, dtype;
    size_t count;      // per rank block (allgather, reducescatter, alltoall) or whole
    size_t soff, roff; // byte offsets of the send and receive buffers
    int inplace;
};

constexpr size_t kArena = size_t(64) << 20; // per memory kind and rank

// Rank r's send element i: a small integer, exact after summing 8 of them.
static int value(int rank, size_t i)
{
    return int((i * 7 + size_t(rank) * 13 + (i >> 7)) % 17) - 8;
}

static void store(void *buf, int dt, size_t i, int v)
{
    switch (dt) {
    case 0: { // bf16: small integers are exact; the top half of the float
        float f = float(v);
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = uint16_t(u >> 16);
        memcpy((char *)buf + 2 * i, &h, 2);
        break;
    }
    case 1: {
        float f = float(v);
        memcpy((char *)buf + 4 * i, &f, 4);
        break;
    }
    case 2: {
        int32_t x = v;
        memcpy((char *)buf + 4 * i, &x, 4);
        break;
    }
    default: ((int8_t *)buf)[i] = int8_t(v);
    }
}

static double load(const void *buf, int dt, size_t i)
{
    switch (dt) {
    case 0: {
        uint16_t h;
        memcpy(&h, (const char *)buf + 2 * i, 2);
        uint32_t u = uint32_t(h) << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case 1: {
        float f;
        memcpy(&f, (const char *)buf + 4 * i, 4);
        return f;
    }
    case 2: {
        int32_t x;
        memcpy(&x, (const char *)buf + 4 * i, 4);
        return x;
    }
    default: return ((const int8_t *)buf)[i];
    }
}

// Elements of the send and receive buffers of a case at world W.
static void extents(const Case &c, int W, size_t *send_n, size_t *recv_n)
{
    switch (c.coll) {
    case ALLREDUCE:
    case BROADCAST: *send_n = *recv_n = c.count; break;
    case ALLGATHER:
        *send_n = c.count;
        *recv_n = c.count * W;
        break;
    case REDUCESCATTER:
        *send_n = c.count * W;
        *recv_n = c.count;
        break;
    default: *send_n = *recv_n = c.count * W;
    }
}

// The host's answer for rank r's receive element i.
static int expected(const Case &c, int W, int r, size_t i)
{
    int s = 0;
    switch (c.coll) {
    case ALLREDUCE:
        for (int q = 0; q < W; q++)
            s += value(q, i);
        return s;
    case BROADCAST: return value(0, i);
    case ALLGATHER: return value(int(i / c.count), i % c.count);
    case REDUCESCATTER:
        for (int q = 0; q < W; q++)
            s += value(q, size_t(r) * c.count + i);
        return s;
    default: // alltoall: block q of rank r's output is block r of rank q's input
        return value(int(i / c.count), size_t(r) * c.count + i % c.count);
    }
}

struct Failure {
    Case c;
    int window, rank;
    size_t first, bad;
    double got, want;
};

struct Shared {
    int W;
    ncclUniqueId id;
    std::mutex mu;
    std::vector<Failure> failures;
    long cases = 0;
};

struct Rank {
    int rank, W;
    ncclComm_t comm;
    cudaStream_t stream;
    char *win, *plain;
    ncclWindow_t window;
    std::vector<char> host, back;
};

static void run_case(Rank &k, Shared &sh, const Case &c, int on_window)
{
    const Dtype &d = dtypes[c.dtype];
    size_t send_n, recv_n;
    extents(c, k.W, &send_n, &recv_n);
    char *base = on_window ? k.win : k.plain;
    char *send = base + c.soff;
    char *recv = base + c.roff;
    if (c.inplace && c.coll == ALLGATHER) // send is block `rank` of recv
        send = recv + size_t(k.rank) * c.count * d.size;
    else if (c.inplace) // all-reduce: the same buffer; reduce-scatter: recv is block `rank`
        recv = send + (c.coll == REDUCESCATTER ? size_t(k.rank) * c.count * d.size : 0);
    // poison what is received, then write what is sent (in place, inside it)
    CHECK(cudaMemsetAsync(recv, 0x7b, recv_n * d.size, k.stream));
    for (size_t i = 0; i < send_n; i++)
        store(k.host.data(), c.dtype, i, value(k.rank, i));
    CHECK(cudaMemcpyAsync(send, k.host.data(), send_n * d.size, cudaMemcpyHostToDevice, k.stream));
    size_t block = c.count;
    switch (c.coll) {
    case ALLREDUCE:
        NCHECK(ncclAllReduce(send, recv, c.count, d.nccl, ncclSum, k.comm, k.stream));
        break;
    case BROADCAST: NCHECK(ncclBroadcast(send, recv, c.count, d.nccl, 0, k.comm, k.stream)); break;
    case ALLGATHER: NCHECK(ncclAllGather(send, recv, c.count, d.nccl, k.comm, k.stream)); break;
    case REDUCESCATTER:
        NCHECK(ncclReduceScatter(send, recv, c.count, d.nccl, ncclSum, k.comm, k.stream));
        break;
    default:
        NCHECK(ncclGroupStart());
        for (int q = 0; q < k.W; q++) {
            NCHECK(ncclSend(send + q * block * d.size, block, d.nccl, q, k.comm, k.stream));
            NCHECK(ncclRecv(recv + q * block * d.size, block, d.nccl, q, k.comm, k.stream));
        }
        NCHECK(ncclGroupEnd());
    }
    CHECK(cudaMemcpyAsync(k.back.data(), recv, recv_n * d.size, cudaMemcpyDeviceToHost, k.stream));
    CHECK(cudaStreamSynchronize(k.stream));
    size_t bad = 0, first = 0;
    double got = 0, want = 0;
    for (size_t i = 0; i < recv_n; i++) {
        int e = expected(c, k.W, k.rank, i);
        double g = load(k.back.data(), c.dtype, i);
        if (g != double(e)) {
            if (bad++ == 0)
                first = i, got = g, want = e;
        }
    }
    std::lock_guard<std::mutex> lock(sh.mu);
    if (k.rank == 0)
        sh.cases++;
    if (bad)
        sh.failures.push_back({c, on_window, k.rank, first, bad, got, want});
}

static void rank_main(Shared *sh, int rank, const std::vector<Case> *cases)
{
    Rank k{};
    k.rank = rank;
    k.W = sh->W;
    CHECK(cudaSetDevice(rank));
    CHECK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    NCHECK(ncclCommInitRank(&k.comm, sh->W, sh->id, rank));
    NCHECK(ncclMemAlloc((void **)&k.win, kArena));
    NCHECK(ncclCommWindowRegister(k.comm, k.win, kArena, &k.window, NCCL_WIN_COLL_SYMMETRIC));
    CHECK(cudaMalloc(&k.plain, kArena));
    k.host.resize(kArena);
    k.back.resize(kArena);
    for (const Case &c : *cases)
        for (int w = 1; w >= 0; w--)
            run_case(k, *sh, c, w);
    CHECK(cudaStreamSynchronize(k.stream));
    NCHECK(ncclCommWindowDeregister(k.comm, k.window));
    NCHECK(ncclMemFree(k.win));
    CHECK(cudaFree(k.plain));
    NCHECK(ncclCommDestroy(k.comm));
}

static std::vector<Case> sweep()
{
    std::vector<size_t> counts;
    for (size_t n = 1; n <= 40; n++)
        counts.push_back(n);
    for (size_t n : {63, 64, 65, 127, 128, 129, 255, 1000, 1023, 1024, 4097, 7511, 65537})
        counts.push_back(n);
    const size_t offs[] = {0, 1, 2, 4, 8, 12, 16, 256};
    std::vector<Case> v;
    for (int coll = 0; coll < N_COLLS; coll++)
        for (int dt = 0; dt < kDtypes; dt++)
            for (size_t n : counts)
                for (size_t so : offs)
                    for (size_t ro : offs)
                        for (int inplace = 0; inplace < 2; inplace++) {
                            size_t sz = dtypes[dt].size;
                            if (so % sz || ro % sz)
                                continue; // NCCL needs element alignment
                            // in place: one buffer at the receive offset
                            if (inplace && (so || ro || coll == ALLTOALL || coll == BROADCAST))
                                continue;
                            size_t recv_at = (size_t(8) << 20) + ro;
                            v.push_back({coll, dt, n, inplace ? recv_at : so, recv_at, inplace});
                        }
    return v;
}

int main(int argc, char **argv)
{
    int W = argc > 1 ? atoi(argv[1]) : 2;
    int only_sequence = argc > 2 && strcmp(argv[2], "sequence") == 0;
    int have = 0;
    CHECK(cudaGetDeviceCount(&have));
    if (W < 2 || W > have) {
        fprintf(stderr, "nccl_offsets: needs %d GPUs, this machine has %d\n", W, have);
        return 2;
    }
    int version = 0;
    NCHECK(ncclGetVersion(&version));
    std::vector<Case> cases;
    // The issue's sequence, laid out as kevo's scratch allocator did (256-byte
    // steps): all-gather 37 int32 into scratch at 0, reduce-scatter of 7511
    // bf16 per rank from the next 256-byte boundary into an output at 4 KiB.
    size_t ag_bytes = 37 * 4 * size_t(W), rs_at = (ag_bytes + 255) / 256 * 256;
    cases.push_back({ALLGATHER, 2, 37, size_t(32) << 20, 0, 0});
    cases.push_back({REDUCESCATTER, 0, 7511, rs_at, (size_t(16) << 20), 0});
    if (!only_sequence) {
        std::vector<Case> s = sweep();
        cases.insert(cases.end(), s.begin(), s.end());
    }
    Shared sh;
    sh.W = W;
    NCHECK(ncclGetUniqueId(&sh.id));
    std::vector<std::thread> threads;
    for (int r = 0; r < W; r++)
        threads.emplace_back(rank_main, &sh, r, &cases);
    for (auto &t : threads)
        t.join();

    printf("NCCL %d, W=%d: %ld cases, each on a symmetric window and on plain memory\n", version, W,
           sh.cases);
    int shown = 0;
    for (const Failure &f : sh.failures) {
        if (shown++ >= 60)
            break;
        printf("FAIL %-6s %-13s %-4s count %6zu send+%zu recv+%zu%s rank %d: %zu bad, first "
               "[%zu] got %g want %g\n",
               f.window ? "window" : "plain", coll_name[f.c.coll], dtypes[f.c.dtype].name,
               f.c.count, f.c.soff % (size_t(8) << 20), f.c.roff % (size_t(8) << 20),
               f.c.inplace ? " in-place" : "", f.rank, f.bad, f.first, f.got, f.want);
    }
    // per collective, dtype and memory: how many (case, rank) pairs failed,
    // and the smallest failing count
    for (int w = 1; w >= 0; w--)
        for (int coll = 0; coll < N_COLLS; coll++)
            for (int dt = 0; dt < kDtypes; dt++) {
                size_t smallest = 0;
                long n = 0;
                for (const Failure &f : sh.failures)
                    if (f.window == w && f.c.coll == coll && f.c.dtype == dt) {
                        n++;
                        if (!smallest || f.c.count < smallest)
                            smallest = f.c.count;
                    }
                if (n)
                    printf("SUMMARY %-6s %-13s %-4s %ld failing (case, rank) pairs, smallest "
                           "count %zu\n",
                           w ? "window" : "plain", coll_name[coll], dtypes[dt].name, n, smallest);
            }
    // every failure, one line each, for a closer look: $NCCL_OFFSETS_CSV
    if (const char *csv = getenv("NCCL_OFFSETS_CSV")) {
        FILE *fp = fopen(csv, "w");
        if (!fp) {
            perror(csv);
            return 2;
        }
        fprintf(fp, "memory,collective,dtype,count,send_off,recv_off,inplace,rank,bad,first,got,"
                    "want\n");
        for (const Failure &f : sh.failures)
            fprintf(fp, "%s,%s,%s,%zu,%zu,%zu,%d,%d,%zu,%zu,%g,%g\n", f.window ? "window" : "plain",
                    coll_name[f.c.coll], dtypes[f.c.dtype].name, f.c.count, f.c.soff, f.c.roff,
                    f.c.inplace, f.rank, f.bad, f.first, f.got, f.want);
        if (fclose(fp) != 0) {
            perror(csv);
            return 2;
        }
    }
    printf("%zu failures\n", sh.failures.size());
    return sh.failures.empty() ? 0 : 1;
}
