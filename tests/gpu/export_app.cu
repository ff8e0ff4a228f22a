// export_app.cu — a small program that calls an export of the allreduce problem
// (kevo export --problem allreduce) the way an inference engine would, for
// tests/gpu/test_gpu_export.c. One process per GPU (forked before CUDA starts),
// an NCCL communicator, and the export's harness for the symmetric window:
//
//  1. for each size N (bf16 elements per rank), a context and K input/output
//     sets; K calls of kevo_export_allreduce_run per size, every size, captured
//     into one CUDA graph;
//  2. the graph replayed R times, with fresh inputs and poisoned outputs before
//     each replay and, on the second, rank 1 starting 5 ms late; after each
//     replay every call's output is compared with ncclAllReduce's on the same
//     inputs: bit for bit at W = 2 (x0 + x1 is exact in fp32 and rounded once,
//     so every correct kernel gives NCCL's bits), within the problem's
//     tolerance (0.25 + 2^-6 |ref|) at W > 2;
//  3. each size timed as replays of a graph of T calls against a graph of T
//     ncclAllReduce calls, the per-call time the median replay / T, the max
//     over ranks; printed beside the time kevo measured for the program the
//     dispatcher chose.
//
//   export_app [W [N,N,...]]      (defaults: 2, 32768,300007,8388608)
//
// Exit status: 0 every call of every replay matched, 1 otherwise (or an
// error, named on stderr), 77 fewer than W GPUs.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kevo_export_allreduce.h"

namespace
{

constexpr int kCalls = 3; // input/output sets (calls) per size in the checked graph
constexpr int kReplays = 5;
constexpr int kTimedCalls = 50; // calls per timed graph
constexpr int kTimedReplays = 20;
constexpr int kMaxSizes = 8;

int g_rank = -1;

#define CHECK_CUDA(call)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, #call, \
                    cudaGetErrorString(e_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CHECK_NCCL(call)                                                                   \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        if (r_ != ncclSuccess) {                                                           \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, #call, \
                    ncclGetErrorString(r_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CHECK_EXPORT(call)                                                                      \
    do {                                                                                        \
        if ((call) != 0) {                                                                      \
            fprintf(stderr, "rank %d: %s: %s\n", g_rank, #call, kevo_export_allreduce_error()); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

__device__ uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// x[i]: a value in [-4, 4) from (seed, i), rounded to bf16
__global__ void fill(__nv_bfloat16 *x, int64_t n, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double u = (double)(mix64(seed ^ mix64((uint64_t)i)) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = __float2bfloat16_rn((float)(8 * u - 4));
    }
}

// Counts the elements of y that differ from ref (bits at W = 2, the tolerance otherwise) and
// keeps the first.
__global__ void compare(const __nv_bfloat16 *y, const __nv_bfloat16 *ref, int64_t n, int exact,
                        unsigned long long *bad, unsigned long long *first)
{
    const uint16_t *yb = reinterpret_cast<const uint16_t *>(y);
    const uint16_t *rb = reinterpret_cast<const uint16_t *>(ref);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        bool ok;
        if (exact) {
            ok = yb[i] == rb[i];
        } else {
            float a = __bfloat162float(y[i]), b = __bfloat162float(ref[i]);
            ok = !isnan(a) && fabsf(a - b) <= 0.25f + 0.015625f * fabsf(b);
        }
        if (!ok) {
            atomicAdd(bad, 1ull);
            atomicMin(first, (unsigned long long)i);
        }
    }
}

int blocks(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (int)std::min<int64_t>(std::max<int64_t>(b, 1), 1024);
}

struct Size {
    int64_t n;
    size_t bytes;
    kevo_ctx *ctx;
    void *x[kCalls], *y[kCalls];
    const kevo_export_allreduce_row *row;
};

// The max over ranks of v (every rank calls it, in the same order).
double max_over_ranks(double v, ncclComm_t comm, cudaStream_t stream, double *dev)
{
    CHECK_CUDA(cudaMemcpyAsync(dev, &v, sizeof v, cudaMemcpyHostToDevice, stream));
    CHECK_NCCL(ncclAllReduce(dev, dev, 1, ncclFloat64, ncclMax, comm, stream));
    CHECK_CUDA(cudaMemcpyAsync(&v, dev, sizeof v, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return v;
}

// The median time of a graph's replays, in microseconds per call.
double time_graph(cudaGraphExec_t exec, int calls, cudaStream_t stream)
{
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++)
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
    std::vector<double> us;
    for (int i = 0; i < kTimedReplays; i++) {
        CHECK_CUDA(cudaEventRecord(a, stream));
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaEventRecord(b, stream));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        us.push_back(1e3 * ms / calls);
    }
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

int rank_main(int rank, int world, const std::vector<int64_t> &ns, int id_fd_read, int id_fd_write)
{
    g_rank = rank;
    alarm(600); // a hang becomes a failure
    int have = 0;
    if (cudaGetDeviceCount(&have) != cudaSuccess || have < world) {
        fprintf(stderr, "rank %d: %d GPUs, %d wanted\n", rank, have, world);
        return 77;
    }
    CHECK_CUDA(cudaSetDevice(rank));
    ncclUniqueId id;
    if (rank == 0) {
        CHECK_NCCL(ncclGetUniqueId(&id));
        for (int r = 1; r < world; r++)
            if (write(id_fd_write, &id, sizeof id) != (ssize_t)sizeof id) {
                perror("writing the NCCL id");
                return 1;
            }
    } else if (read(id_fd_read, &id, sizeof id) != (ssize_t)sizeof id) {
        perror("reading the NCCL id");
        return 1;
    }
    close(id_fd_read);
    close(id_fd_write);
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, world, id, rank));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    // the window: every size's context and its input/output sets
    std::vector<Size> sizes(ns.size());
    size_t window = (size_t)64 << 20, largest = 0;
    for (size_t s = 0; s < ns.size(); s++) {
        sizes[s].n = ns[s];
        sizes[s].bytes = kevo_export_allreduce_tensor_bytes(world, &ns[s], 0, 0);
        largest = std::max(largest, sizes[s].bytes);
        window +=
            kevo_export_allreduce_ctx_bytes(world, &ns[s]) + 2 * kCalls * (sizes[s].bytes + 4096);
    }
    kevo_export_allreduce_env *env;
    CHECK_EXPORT(kevo_export_allreduce_env_create(comm, stream, window, &env));
    for (auto &sz : sizes) {
        for (int k = 0; k < kCalls; k++) {
            CHECK_EXPORT(kevo_export_allreduce_alloc(env, sz.bytes, &sz.x[k]));
            CHECK_EXPORT(kevo_export_allreduce_alloc(env, sz.bytes, &sz.y[k]));
        }
        CHECK_EXPORT(kevo_export_allreduce_ctx_create(env, &sz.n, &sz.ctx));
        CHECK_EXPORT(kevo_export_allreduce_bind(sz.ctx, 0, 0, sz.x[0]));
        CHECK_EXPORT(kevo_export_allreduce_bind(sz.ctx, 1, 0, sz.y[0]));
        sz.row = kevo_export_allreduce_program_of(sz.ctx);
        if (kevo_export_allreduce_init(sz.ctx) != 0) {
            fprintf(stderr, "rank %d: N=%" PRId64 ": program #%" PRIu64 "'s kevo_init failed\n",
                    rank, sz.n, sz.row->program);
            return 1;
        }
        if (rank == 0)
            printf("N=%-10" PRId64 " %10zu bytes: program #%" PRIu64 " (measured at %s, %.2fx)\n",
                   sz.n, sz.bytes, sz.row->program, sz.row->size, sz.row->speedup);
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    void *ref;
    CHECK_CUDA(cudaMalloc(&ref, largest));
    unsigned long long *counts;
    CHECK_CUDA(cudaMalloc(&counts, 2 * sizeof *counts));
    double *dev_double;
    CHECK_CUDA(cudaMalloc(&dev_double, sizeof(double)));

    // 1. every call of every size in one graph
    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (auto &sz : sizes)
        for (int k = 0; k < kCalls; k++) {
            CHECK_EXPORT(kevo_export_allreduce_bind(sz.ctx, 0, 0, sz.x[k]));
            CHECK_EXPORT(kevo_export_allreduce_bind(sz.ctx, 1, 0, sz.y[k]));
            if (kevo_export_allreduce_run(sz.ctx) != 0) {
                fprintf(stderr, "rank %d: N=%" PRId64 ": kevo_run failed while captured\n", rank,
                        sz.n);
                return 1;
            }
        }
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    // 2. replays against NCCL
    int failures = 0;
    for (int r = 0; r < kReplays; r++) {
        for (size_t s = 0; s < sizes.size(); s++)
            for (int k = 0; k < kCalls; k++) {
                uint64_t seed = ((uint64_t)r << 48) ^ ((uint64_t)rank << 40) ^ (s << 8) ^ k;
                fill<<<blocks(sizes[s].n), 256, 0, stream>>>((__nv_bfloat16 *)sizes[s].x[k],
                                                             sizes[s].n, seed);
                CHECK_CUDA(cudaGetLastError());
                CHECK_CUDA(cudaMemsetAsync(sizes[s].y[k], 0xff, sizes[s].bytes, stream)); // NaN
            }
        CHECK_CUDA(cudaStreamSynchronize(stream));
        if (r == 1 && rank == 1 % world)
            usleep(5000); // one rank starts late: barriers must wait, not race
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        for (size_t s = 0; s < sizes.size(); s++) {
            Size &sz = sizes[s];
            for (int k = 0; k < kCalls; k++) {
                CHECK_NCCL(
                    ncclAllReduce(sz.x[k], ref, (size_t)sz.n, ncclBfloat16, ncclSum, comm, stream));
                unsigned long long init[2] = {0, ~0ull};
                CHECK_CUDA(
                    cudaMemcpyAsync(counts, init, sizeof init, cudaMemcpyHostToDevice, stream));
                compare<<<blocks(sz.n), 256, 0, stream>>>((const __nv_bfloat16 *)sz.y[k],
                                                          (const __nv_bfloat16 *)ref, sz.n,
                                                          world == 2, counts, counts + 1);
                CHECK_CUDA(cudaGetLastError());
                unsigned long long got[2];
                CHECK_CUDA(
                    cudaMemcpyAsync(got, counts, sizeof got, cudaMemcpyDeviceToHost, stream));
                CHECK_CUDA(cudaStreamSynchronize(stream));
                if (got[0] != 0) {
                    failures++;
                    uint16_t a = 0, b = 0;
                    CHECK_CUDA(
                        cudaMemcpy(&a, (uint16_t *)sz.y[k] + got[1], 2, cudaMemcpyDeviceToHost));
                    CHECK_CUDA(cudaMemcpy(&b, (uint16_t *)ref + got[1], 2, cudaMemcpyDeviceToHost));
                    printf("rank %d: replay %d, N=%" PRId64 ", call %d (program #%" PRIu64
                           "): %llu of %" PRId64 " elements differ from ncclAllReduce, the first "
                           "at %llu: 0x%04x, NCCL 0x%04x\n",
                           rank, r + 1, sz.n, k + 1, sz.row->program, got[0], sz.n, got[1], a, b);
                }
            }
        }
        if (rank == 0)
            printf("replay %d of %d%s: %zu sizes x %d calls checked against ncclAllReduce (%s)\n",
                   r + 1, kReplays, r == 1 && world > 1 ? " (rank 1 5 ms late)" : "", sizes.size(),
                   kCalls, world == 2 ? "bit for bit" : "within the tolerance");
    }
    double all_failures = max_over_ranks(failures, comm, stream, dev_double);

    // 3. timing: a graph of T exported calls against a graph of T ncclAllReduce calls
    if (rank == 0)
        printf("\n%-10s %12s %9s %12s %12s %9s %14s\n", "N", "bytes", "program", "export us",
               "NCCL us", "speedup", "kevo measured");
    for (auto &sz : sizes) {
        cudaGraph_t g[2];
        cudaGraphExec_t e[2];
        for (int side = 0; side < 2; side++) {
            CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
            for (int c = 0; c < kTimedCalls; c++) {
                int k = c % kCalls;
                if (side == 0) {
                    CHECK_EXPORT(kevo_export_allreduce_bind(sz.ctx, 0, 0, sz.x[k]));
                    CHECK_EXPORT(kevo_export_allreduce_bind(sz.ctx, 1, 0, sz.y[k]));
                    if (kevo_export_allreduce_run(sz.ctx) != 0) {
                        fprintf(stderr, "rank %d: kevo_run failed\n", rank);
                        return 1;
                    }
                } else {
                    CHECK_NCCL(ncclAllReduce(sz.x[k], sz.y[k], (size_t)sz.n, ncclBfloat16, ncclSum,
                                             comm, stream));
                }
            }
            CHECK_CUDA(cudaStreamEndCapture(stream, &g[side]));
            CHECK_CUDA(cudaGraphInstantiate(&e[side], g[side], 0));
        }
        double us_export =
            max_over_ranks(time_graph(e[0], kTimedCalls, stream), comm, stream, dev_double);
        double us_nccl =
            max_over_ranks(time_graph(e[1], kTimedCalls, stream), comm, stream, dev_double);
        if (rank == 0) {
            char measured[64];
            if (sz.row->bytes == sz.bytes)
                snprintf(measured, sizeof measured, "%.2f us (%+.1f%%)", sz.row->program_us,
                         100 * (us_export / sz.row->program_us - 1));
            else
                snprintf(measured, sizeof measured, "(between sizes)");
            printf("%-10" PRId64 " %12zu %9s %12.2f %12.2f %8.2fx %14s\n", sz.n, sz.bytes,
                   ("#" + std::to_string(sz.row->program)).c_str(), us_export, us_nccl,
                   us_nccl / us_export, measured);
        }
        for (int side = 0; side < 2; side++) {
            CHECK_CUDA(cudaGraphExecDestroy(e[side]));
            CHECK_CUDA(cudaGraphDestroy(g[side]));
        }
    }
    fflush(stdout);

    for (auto &sz : sizes) {
        kevo_export_allreduce_fini(sz.ctx);
        kevo_export_allreduce_ctx_destroy(sz.ctx);
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    kevo_export_allreduce_env_destroy(env);
    CHECK_CUDA(cudaFree(ref));
    CHECK_CUDA(cudaFree(counts));
    CHECK_CUDA(cudaFree(dev_double));
    ncclCommDestroy(comm);
    if (rank == 0)
        printf("%s\n", all_failures == 0 ? "export_app: every call matched ncclAllReduce"
                                         : "export_app: MISMATCH (see above)");
    return all_failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int world = argc > 1 ? atoi(argv[1]) : 2;
    std::vector<int64_t> ns;
    for (const char *s = argc > 2 ? argv[2] : "32768,300007,8388608"; *s;) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v <= 0) {
            fprintf(stderr, "export_app: bad size list '%s'\n", argv[2]);
            return 2;
        }
        ns.push_back(v);
        s = *end == ',' ? end + 1 : end;
    }
    if (world < 1 || world > KEVO_MAX_RANKS || ns.empty() || ns.size() > (size_t)kMaxSizes) {
        fprintf(stderr, "usage: export_app [W [N,N,...]] (W 1..%d, at most %d sizes)\n",
                KEVO_MAX_RANKS, kMaxSizes);
        return 2;
    }
    printf("export_app: W=%d, %zu sizes, %d calls each in one CUDA graph, %d replays\n", world,
           ns.size(), kCalls, kReplays);
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    // one process per GPU, forked before anything starts CUDA
    std::vector<pid_t> pids;
    for (int r = 0; r < world; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            int rc = rank_main(r, world, ns, fds[0], fds[1]);
            fflush(stdout);
            _exit(rc);
        }
        pids.push_back(pid);
    }
    close(fds[0]);
    close(fds[1]);
    int worst = 0, left = world;
    std::vector<bool> alive(world, true);
    while (left > 0) {
        int st;
        pid_t pid = wait(&st);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        int r = (int)(std::find(pids.begin(), pids.end(), pid) - pids.begin());
        if (r >= world)
            continue;
        left--;
        alive[r] = false;
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (rc != 0) {
            fprintf(stderr, "export_app: rank %d %s %d\n", r,
                    WIFEXITED(st) ? "exited with" : "was killed by signal",
                    WIFEXITED(st) ? rc : WTERMSIG(st));
            if (worst == 0 || worst == 77)
                worst = rc == 77 ? 77 : 1;
            // its peers would wait for it in NCCL or in a barrier: stop them
            for (int q = 0; q < world; q++)
                if (alive[q])
                    kill(pids[q], SIGKILL);
        }
    }
    return worst;
}
