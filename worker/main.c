/* main.c — kevo-worker: one GPU of an evaluation group.
 *
 *   kevo-worker --rank R --world W --device D [--group G]   (started by the supervisor)
 *   kevo-worker --doctor                                     (prints the node as JSON)
 *
 * The protocol with the supervisor runs on fd 3 (docs/evaluator.md); stdout
 * and stderr belong to the candidates and go to the worker's log file. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/machine.h"
#include "common/syscall_filter.h"
#include "protocol/protocol.h"
#include "worker/nvls_trap.h"
#include "worker/worker.h"

#define EXIT_AFTER_FAILURE 3
#define EXIT_SETUP 4

#ifdef __SANITIZE_ADDRESS__
/* LeakSanitizer stops the threads with ptrace, which the sandbox's filter
 * refuses: a sanitized worker checks no leaks */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
    return "detect_leaks=0";
}
#endif

static void die(kv_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(kv_worker *w, const char *fmt, ...)
{
    fprintf(stderr, "kevo-worker rank %d: ", w->rank);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_SETUP);
}

static void send_msg(kv_worker *w, const kv_proto_msg *m)
{
    kv_err err = {{0}};
    if (kv_proto_send_msg(w->proto_fd, m, &err) != 0)
        die(w, "cannot write to the supervisor: %s", err.msg);
}

void kv_worker_progress(kv_worker *w, const char *phase)
{
    w->phase = phase;
    kv_proto_msg m = {.type = KV_MSG_PROGRESS, .job = w->job_id, .rank = w->rank};
    snprintf(m.phase, sizeof m.phase, "%s", phase);
    send_msg(w, &m);
}

/* Blocks for the next message from the supervisor (init, job or exit),
 * decoded strictly; dies on a malformed one and exits on EOF (the
 * supervisor is gone: nothing left to work for). job is filled for a job. */
static kv_msg_type next_message(kv_worker *w, kv_line_reader *rd, kv_proto_msg *m, kv_job *job)
{
    for (;;) {
        kv_err err = {{0}};
        char *line = kv_line_reader_next(rd);
        if (line) {
            int rc = kv_proto_worker_in_from_json(line, m, job, &err);
            free(line);
            if (rc != 0)
                die(w, "a bad message from the supervisor: %s", err.msg);
            return m->type;
        }
        if (kv_line_reader_fill(rd, &err) != 0)
            die(w, "reading from the supervisor: %s", err.msg);
        if (rd->eof)
            exit(0);
    }
}

static void check_cuda(kv_worker *w, cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        char m[256];
        snprintf(m, sizeof m, "%s: %s", what, cudaGetErrorString(e));
        die(w, "%s", m);
    }
}

/* Where the machine forbids NVLink multicast, its driver entry points are
 * disarmed once CUDA and NCCL are up (NCCL, told NCCL_NVLS_ENABLE=0, never
 * calls them) and before any candidate runs; a worker that cannot do so
 * does not become ready. */
static void arm_nvls_trap(kv_worker *w)
{
    if (kv_machine_allows_nvls())
        return;
    int n = 0;
    char why[512];
    if (kv_nvls_trap_arm(&n, why, sizeof why) != 0)
        die(w,
            "NVLink multicast is forbidden on this machine (NCCL_NVLS_ENABLE=0), and its driver "
            "entry points cannot be disarmed: %s",
            why);
    fprintf(stderr,
            "kevo-worker rank %d: NVLink multicast forbidden (NCCL_NVLS_ENABLE=0): %d "
            "driver functions trapped\n",
            w->rank, n);
}

/* Before any candidate runs, once CUDA and NCCL are up (their start may
 * exec the driver's helper and writes under /proc): the worker makes itself
 * non-dumpable, which hands its /proc/<pid> files to root, so that its uid
 * can no longer open its own /proc/self/mem (the way to rewrite its code
 * behind the NVLS trap's back); then a filter of its own refuses exec,
 * mprotect asking for PROT_EXEC and prctl(PR_SET_DUMPABLE), on top of the
 * supervisor's (common/syscall_filter.h). */
static void lock_down(kv_worker *w)
{
    char msg[128];
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        snprintf(msg, sizeof msg, "prctl: %s", strerror(errno));
        die(w, "cannot lock itself down: %s", msg);
    }
    int e = kv_syscall_filter_install(KV_FILTER_NO_EXEC);
    if (e != 0 && e != ENOSYS) {
        snprintf(msg, sizeof msg, "the system-call filter: %s", strerror(e));
        die(w, "cannot lock itself down: %s", msg);
    }
}

static void setup(kv_worker *w, kv_line_reader *rd)
{
    char msg[256];
    cudaError_t e = cudaSetDevice(w->device);
    if (e != cudaSuccess) {
        snprintf(msg, sizeof msg, "cudaSetDevice(%d): %s", w->device, cudaGetErrorString(e));
        die(w, "%s", msg);
    }
    int l2 = 0;
    if (cudaDeviceGetAttribute(&w->sm_count, cudaDevAttrMultiProcessorCount, w->device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, w->device) != cudaSuccess)
        die(w, "%s", "cudaDeviceGetAttribute failed");
    w->l2_bytes = (size_t)l2;
    check_cuda(w, cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(w, cudaStreamCreateWithFlags(&w->aux, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(w, cudaMalloc((void **)&w->agree_buf, sizeof(int)), "cudaMalloc");
    check_cuda(w, cudaMalloc((void **)&w->reports, KV_REPORTS * sizeof(kv_dev_report)),
               "cudaMalloc");
    check_cuda(w, cudaHostAlloc((void **)&w->gate_host, sizeof(unsigned), cudaHostAllocMapped),
               "cudaHostAlloc");
    *w->gate_host = 0;
    check_cuda(w, cudaHostGetDevicePointer((void **)&w->gate_dev, (void *)w->gate_host, 0),
               "cudaHostGetDevicePointer");
    if (cublasCreate(&w->cublas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(w->cublas, w->stream) != CUBLAS_STATUS_SUCCESS)
        die(w, "%s", "cublasCreate failed");

    kv_proto_msg m = {
        .type = KV_MSG_HELLO, .rank = w->rank, .pid = (int)getpid(), .device = w->device};
    send_msg(w, &m);

    ncclUniqueId id;
    _Static_assert(sizeof id.internal == KV_PROTO_UID_BYTES,
                   "the uid message holds an ncclUniqueId");
    if (w->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            die(w, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        m = (kv_proto_msg){.type = KV_MSG_UID};
        kv_proto_uid_to_hex((const unsigned char *)id.internal, m.uid);
        send_msg(w, &m);
    }
    kv_job job;
    if (next_message(w, rd, &m, &job) != KV_MSG_INIT)
        die(w, "expected an init message with the NCCL unique id, got %s",
            kv_msg_type_name(m.type));
    kv_err err = {{0}};
    if (kv_proto_uid_from_hex(m.uid, (unsigned char *)id.internal, &err) != 0)
        die(w, "init message: %s", err.msg);
    ncclResult_t r = ncclCommInitRank(&w->comm, w->world, id, w->rank);
    if (r != ncclSuccess)
        die(w, "ncclCommInitRank: %s", ncclGetErrorString(r));
    /* enough LSA barriers for a few CTAs per SM */
    w->lsa_barriers = 4 * w->sm_count;
    r = kv_dev_comm_create(w->comm, w->lsa_barriers, &w->devcomm);
    if (r != ncclSuccess)
        die(w, "ncclDevCommCreate: %s", ncclGetErrorString(r));
    arm_nvls_trap(w);
    lock_down(w); /* after the trap: arming it rewrites code pages with mprotect */
    m = (kv_proto_msg){.type = KV_MSG_READY, .rank = w->rank};
    send_msg(w, &m);
}

static void serve(kv_worker *w, kv_line_reader *rd)
{
    for (;;) {
        kv_proto_msg m;
        kv_job job;
        kv_err err = {{0}};
        kv_msg_type t = next_message(w, rd, &m, &job);
        if (t == KV_MSG_EXIT)
            return;
        if (t != KV_MSG_JOB)
            die(w, "unexpected message type %s", kv_msg_type_name(t));
        kv_job_result res;
        int rc = kv_worker_run_job(w, &job, &res);
        char *line = kv_proto_result_to_json(job.id, w->rank, &res);
        if (!line || kv_proto_send(w->proto_fd, line, &err) != 0)
            die(w, "cannot send a result: %s", line ? err.msg : "out of memory");
        free(line);
        /* after any failure this process is not trusted again: the candidate
         * may have left a sticky error, a hung stream or corrupted state */
        if (rc != 0 || res.verdict != KV_VERDICT_OK)
            exit(EXIT_AFTER_FAILURE);
    }
}

/* ---- doctor ------------------------------------------------------------------------------- */

static int doctor(void)
{
    kv_proto_doctor *d = calloc(1, sizeof *d);
    if (!d) {
        fprintf(stderr, "kevo-worker --doctor: out of memory\n");
        return 1;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(d->error, sizeof d->error, "%s", cudaGetErrorString(e));
        n = 0;
    }
    cudaDriverGetVersion(&d->cuda_driver);
    cudaRuntimeGetVersion(&d->cuda_runtime);
    ncclGetVersion(&d->nccl);
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    snprintf(d->nvls_enable, sizeof d->nvls_enable, "%s", nvls ? nvls : "");
    for (int i = 0; i < n && d->n_gpus < KV_PROTO_MAX_GPUS; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess)
            continue;
        kv_proto_gpu *g = &d->gpus[d->n_gpus++];
        g->index = i;
        snprintf(g->name, sizeof g->name, "%s", p.name);
        g->cc_major = p.major;
        g->cc_minor = p.minor;
        g->sms = p.multiProcessorCount;
        g->memory_bytes = p.totalGlobalMem;
        g->l2_bytes = p.l2CacheSize;
        for (int q = 0; q < n && g->n_peers < KV_PROTO_MAX_GPUS - 1; q++) {
            if (q == i)
                continue;
            kv_proto_peer *peer = &g->peers[g->n_peers++];
            peer->device = q;
            cudaDeviceCanAccessPeer(&peer->access, i, q);
            cudaDeviceGetP2PAttribute(&peer->native_atomics, cudaDevP2PAttrNativeAtomicSupported, i,
                                      q);
            cudaDeviceGetP2PAttribute(&peer->performance_rank, cudaDevP2PAttrPerformanceRank, i, q);
        }
    }
    char *s = kv_proto_doctor_to_json(d);
    free(d);
    if (!s) {
        fprintf(stderr, "kevo-worker --doctor: out of memory\n");
        return 1;
    }
    printf("%s\n", s);
    free(s);
    return 0;
}

int main(int argc, char **argv)
{
    kv_worker w;
    memset(&w, 0, sizeof w);
    w.rank = -1;
    w.proto_fd = KV_PROTO_FD;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--doctor") == 0)
            return doctor();
        if (i + 1 >= argc)
            break;
        if (strcmp(argv[i], "--rank") == 0)
            w.rank = atoi(argv[++i]);
        else if (strcmp(argv[i], "--world") == 0)
            w.world = atoi(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0)
            w.device = atoi(argv[++i]);
        else if (strcmp(argv[i], "--group") == 0)
            w.group = atoi(argv[++i]);
    }
    if (w.rank < 0 || w.world < 1 || w.world > KEVO_MAX_RANKS || w.rank >= w.world) {
        fprintf(stderr,
                "usage: kevo-worker --rank R --world W --device D [--group G] | --doctor\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* a candidate that aborts must not spend the deadline writing a core of
     * a process holding a CUDA context */
    struct rlimit no_core = {0, 0};
    if (setrlimit(RLIMIT_CORE, &no_core) != 0)
        perror("kevo-worker: setrlimit(RLIMIT_CORE)");
    kv_line_reader rd;
    kv_line_reader_init(&rd, w.proto_fd);
    setup(&w, &rd);
    serve(&w, &rd);
    kv_line_reader_free(&rd);
    ncclResult_t released = kv_window_release(&w);
    if (released != ncclSuccess)
        fprintf(stderr, "kevo-worker rank %d: releasing the window: %s\n", w.rank,
                ncclGetErrorString(released));
    kv_plain_release(&w);
    kv_dev_comm_destroy(w.comm, w.devcomm);
    ncclCommDestroy(w.comm);
    return 0;
}
