/* fake_worker.c — a stand-in for kevo-worker in the supervisor's tests: it
 * takes the same arguments and speaks the same protocol on fd 3, with no
 * GPU, and misbehaves on request.
 *
 *   fake_worker --rank R --world W --device D --group G
 *
 * At start, KEVO_FAKE_START chooses:
 *   (unset), ok    hello, uid (rank 0), wait for init, ready
 *   slow-start     hello and uid, then never ready
 *   exit-start     rank 1 prints a message and exits with status 3 before hello
 *   wrong-device   rank 1 says hello with another device
 * Per job, the job's first size names the behaviour:
 *   ok             progress, then a result with deterministic timings (fake_median)
 *   mismatch       rank 1 reports a mismatch at size 0 and exits 3 (as kevo-worker
 *                  does after any failure); the others answer ok
 *   mismatch-elsewhere, init-error-elsewhere
 *                  rank 1 observes a mismatch at size 0 (or kevo_init fails there,
 *                  with a line on stderr) and answers 100 ms late; the others first
 *                  answer the same verdict "on another rank" (origin false); all exit 3
 *   runtime-error  rank 1 writes a line to stderr (as a candidate says what failed), reports
 *                  runtime_error and exits 3; the others hang
 *                  (as they would in a collective with a dead peer)
 *   hang           progress "timing size 0", then never answers
 *   hang-noterm    the same, ignoring SIGTERM and SIGINT
 *   crash          rank 1 dies of SIGSEGV in "correctness size 0"; the others hang
 *   exit0          rank 1 exits with status 0 mid-job; the others hang
 *   garbage        rank 0 writes a line that is not JSON; the others hang
 *   wrong-job      rank 0 answers for another job id
 *   fork-and-hang  every rank forks a child that sleeps forever, then hangs
 *   fork-and-crash rank 1 forks a child that keeps fd 3 open, then dies of SIGSEGV
 *   stdout-spam    lots of output (some of it JSON) on stdout and stderr, then ok
 *   chatty         3000 progress messages, then ok
 * It checks its own start too: fd 3 is a socket and no other fd above 2 is
 * open (set KEVO_FAKE_NO_FD_CHECK to skip). */
#define _GNU_SOURCE /* strerrorname_np */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/syscall_filter.h"
#include "protocol/protocol.h"
#include "problem/problem.h"

static int rank = -1, world, device = -1, group = -1;

#ifdef __SANITIZE_ADDRESS__
/* LeakSanitizer stops the threads with ptrace, which the sandbox's filter
 * refuses: a sanitized worker checks no leaks */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
    return "detect_leaks=0";
}
#endif

static void die(const char *fmt, ...) KV_PRINTF(1, 2);
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fake-worker rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(5);
}

static void send_line(char *line)
{
    kv_err e;
    if (!line)
        die("out of memory");
    if (kv_proto_send(KV_PROTO_FD, line, &e) != 0)
        die("send: %s", e.msg);
    free(line);
}

static void send_msg(const kv_proto_msg *m)
{
    kv_err e;
    if (kv_proto_send_msg(KV_PROTO_FD, m, &e) != 0)
        die("send: %s", e.msg);
}

static void progress(uint64_t job, const char *phase)
{
    kv_proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = KV_MSG_PROGRESS;
    m.job = job;
    m.rank = rank;
    snprintf(m.phase, sizeof m.phase, "%s", phase);
    send_msg(&m);
}

static void hang(void)
{
    for (;;)
        pause();
}

static void crash(void)
{
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* no core file to write */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL; /* over any handler a sanitizer installed */
    sigaction(SIGSEGV, &sa, NULL);
    raise(SIGSEGV);
    die("still alive after SIGSEGV");
}

/* The next message from the supervisor, decoded as kevo-worker decodes it
 * (kv_proto_worker_in_from_json): init, job (into job) or exit. */
static kv_msg_type next_message(kv_line_reader *rd, kv_proto_msg *m, kv_job *job)
{
    for (;;) {
        kv_err e = {{0}};
        char *line = kv_line_reader_next(rd);
        if (line) {
            if (kv_proto_worker_in_from_json(line, m, job, &e) != 0)
                die("bad message: %s (%s)", e.msg, line);
            free(line);
            return m->type;
        }
        if (kv_line_reader_fill(rd, &e) != 0)
            die("read: %s", e.msg);
        if (rd->eof)
            exit(0); /* the supervisor is gone */
    }
}

static void check_fds(void)
{
    struct stat st;
    if (fstat(KV_PROTO_FD, &st) != 0 || !S_ISSOCK(st.st_mode))
        die("fd %d is not a socket", KV_PROTO_FD);
    if (getenv("KEVO_FAKE_NO_FD_CHECK"))
        return;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return; /* no /proc: nothing to check with */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd > KV_PROTO_FD && fd != dirfd(d))
            die("fd %d is open: leaked from the supervisor", fd);
    }
    closedir(d);
}

/* The made-up timings: per size, rank k = rank on even sizes, the reverse
 * on odd ones (so the slowest rank is the last, then the first). */
static double fake_median(int cand, int size)
{
    int k = size % 2 ? world - 1 - rank : rank;
    return cand ? 50.0 + 5 * size + 2 * k : 100.0 + 10 * size + k;
}

static void fake_timing(kv_timing *t, int cand, int size, int iters)
{
    t->median = fake_median(cand, size);
    t->p10 = t->median - 1 - 0.25 * rank;
    t->p90 = t->median + 1 + 0.25 * rank;
    t->mean = t->median + 0.5;
    t->cv = 0.01 * (rank + 1);
    t->n = iters;
}

/* A result as this rank would send it (the caller frees it); a failure is
 * one this rank observed itself (origin). */
static kv_job_result *make_result(const kv_job *job, kv_verdict v, const char *message)
{
    kv_job_result *r = calloc(1, sizeof *r);
    if (!r)
        die("out of memory");
    r->verdict = v;
    r->origin = v != KV_VERDICT_OK;
    snprintf(r->message, sizeof r->message, "%s", message);
    r->n_sizes = job->n_sizes;
    for (int i = 0; i < job->n_sizes; i++) {
        kv_size_outcome *s = &r->sizes[i];
        snprintf(s->name, sizeof s->name, "%s", job->sizes[i]);
        s->checked = 1;
        s->ok = 1;
        s->timed = job->iters > 0 && (job->time_sizes_mask >> i & 1);
        if (s->timed) {
            fake_timing(&s->ref, 0, i, job->iters);
            fake_timing(&s->cand, 1, i, job->iters);
        }
        s->bad_rank = rank;
        s->max_abs_err = 0.001 * (rank + 1);
        s->max_rel_err = 0.0001 * (rank + 1);
    }
    if (v == KV_VERDICT_MISMATCH) {
        kv_size_outcome *s = &r->sizes[0];
        s->ok = 0;
        snprintf(s->bad_tensor, sizeof s->bad_tensor, "out");
        s->bad_index = 42;
        s->expected = 1.0;
        s->got = 2.5;
        s->max_abs_err = 1.5;
        s->max_rel_err = 0.6;
        s->bad_count = 7;
        snprintf(s->detail, sizeof s->detail, "value out of tolerance");
    }
    if (rank == 0 && job->capture) {
        r->graph_captured = 1;
        r->kernel_nodes = 1;
        kv_proto_graph_begin(r->graph_json, sizeof r->graph_json);
        kv_proto_graph_add(r->graph_json, sizeof r->graph_json, "kernel", "fake");
    }
    r->wall_s = 0.01 * (rank + 1);
    r->gpu_s = 0.001 * (rank + 1);
    return r;
}

static void send_result(const kv_job *job, kv_job_result *r)
{
    kv_verdict v = r->verdict;
    send_line(kv_proto_result_to_json(job->id, rank, r));
    free(r);
    if (v != KV_VERDICT_OK)
        exit(3); /* like kevo-worker: never trusted again after a failure */
}

static void answer(const kv_job *job, kv_verdict v, const char *message)
{
    send_result(job, make_result(job, v, message));
}

/* ---- failures learned through the cross-rank agreement ---------------------------------------
 * Rank 1 observes the failure and answers late; rank 0 answers first with
 * what kevo-worker says when the agreement tells it another rank failed. */

static int run_learned_elsewhere(const kv_job *job)
{
    const char *b = job->sizes[0];
    int mismatch = strcmp(b, "mismatch-elsewhere") == 0;
    if (!mismatch && strcmp(b, "init-error-elsewhere") != 0)
        return 0;
    progress(job->id, mismatch ? "correctness" : "init");
    kv_verdict v = mismatch ? KV_VERDICT_MISMATCH : KV_VERDICT_RUNTIME_ERROR;
    if (rank == 1) {
        usleep(100 * 1000); /* the other rank's answer comes in first */
        if (!mismatch) {
            fprintf(stderr, "fake candidate: kevo_init: cudaMalloc: out of memory\n");
            fflush(stderr);
        }
        char m[256];
        if (mismatch)
            snprintf(m, sizeof m,
                     "mismatch at size %s: out[42]: expected 1, got 2.5; value out "
                     "of tolerance",
                     b);
        else
            snprintf(m, sizeof m, "candidate: kevo_init returned 2 at size %s", b);
        answer(job, v, m);
    }
    char m[128];
    if (mismatch)
        snprintf(m, sizeof m, "mismatch at size %s on another rank", b);
    else
        snprintf(m, sizeof m, "kevo_init failed on another rank");
    kv_job_result *r = make_result(job, v, m);
    r->origin = 0;
    if (mismatch) {
        kv_size_outcome *s = &r->sizes[0];
        s->bad_rank = -1;
        s->bad_index = 0;
        s->expected = s->got = 0;
        s->bad_count = 0;
        s->bad_tensor[0] = s->detail[0] = '\0';
    }
    send_result(job, r);
    return 1;
}

/* ---- confinement probes (sandbox.h) -----------------------------------------------------------
 * What a hostile candidate would try, each answered in the result's message
 * as "what:outcome" words that test_group checks:
 *   escape     open the archive (KEVO_FAKE_TARGET) for writing and reading, make a file
 *              next to it, list its folder, signal the supervisor, list the supervisor's
 *              fds, write its own scratch, and report its rlimits, uid and HOME
 *   flood      KEVO_FAKE_FLOOD_MIB MiB to stdout and as much to stderr, a last line naming
 *              the job, then ok
 *   fork-bomb  fork until refused (each child sleeps; one leaves the process group with
 *              setsid), report how many, then ok
 *   dump       write <dump_dir>/s/rank<r>/inputs/x.bin ("rank <r>") as kv_dump_size
 *              would; dump-link also leaves a symbolic link to /etc/hostname there
 *   inbox      load the job's problem and open its shared objects, through the paths the
 *              job names (the group's inbox), and try the originals (KEVO_FAKE_TARGET)
 *   lockdown   what the system-call filter and non-dumpability refuse: write its own
 *              /proc/self/mem, ptrace, process_vm_writev, a raw syscall() through a pointer
 *              built at run time, exec, mprotect to PROT_EXEC, unshare, then
 *              prctl(PR_SET_DUMPABLE) last
 *   secrets    looks for "kevo-planted" in its environment, /proc/self/environ and
 *              /proc/<parent>/environ; says what NCCL_SOCKET_IFNAME and PATH are
 *   network    connects to 127.0.0.1:KEVO_FAKE_NET_PORT and sends a line; listens on
 *              loopback and connects to itself (what NCCL's bootstrap needs) */

/* Appends to the message m (capacity cap, *n used): *n grows by what the text
 * needs, past cap when it does not fit (then m holds what fitted). */
static void say(char *m, size_t cap, size_t *n, const char *fmt, ...) KV_PRINTF(4, 5);
static void say(char *m, size_t cap, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(m + (*n < cap ? *n : cap), *n < cap ? cap - *n : 0, fmt, ap);
    va_end(ap);
    if (k > 0)
        *n += (size_t)k;
}

static const char *outcome(int rc)
{
    return rc == 0 ? "ok" : strerrorname_np(errno) ? strerrorname_np(errno) : "error";
}

static volatile unsigned char poke_target = 1;
static volatile uintptr_t syscall_address; /* set at run time: no call to syscall by name */

/* A secret marker in the NUL-separated block of an environ file, or in environ. */
static const char *secret_in(const char *environ_file)
{
    static char buf[1 << 16];
    extern char **environ;
    if (!environ_file) {
        for (char **e = environ; *e; e++)
            if (strstr(*e, "kevo-planted"))
                return "environ";
        return NULL;
    }
    int fd = open(environ_file, O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = '\n';
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, "kevo-planted") ? environ_file : NULL;
}

static int run_lockdown_probe(const kv_job *job, char *m, size_t cap)
{
    const char *b = job->sizes[0];
    size_t n = 0;
#define SAY(...) n += (size_t)snprintf(m + n, n < cap ? cap - n : 0, __VA_ARGS__)
    if (strcmp(b, "lockdown") == 0) {
        int fd = open("/proc/self/mem", O_RDWR);
        unsigned char v = 2;
        int rc = fd < 0 ? -1 : pwrite(fd, &v, 1, (off_t)(uintptr_t)&poke_target) == 1 ? 0 : -1;
        SAY("proc-mem:%s", outcome(rc));
        if (fd >= 0)
            close(fd);
        SAY(" ptrace:%s",
            outcome(ptrace(PTRACE_PEEKDATA, getppid(), NULL, NULL) == -1 && errno != 0 ? -1 : 0));
        struct iovec local = {&v, 1}, remote = {(void *)&poke_target, 1};
        SAY(" vm-writev:%s",
            outcome(process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == 1 ? 0 : -1));
        syscall_address = (uintptr_t)&syscall;
        long (*raw)(long, ...) = (long (*)(long, ...))syscall_address;
        SAY(" raw-ptrace:%s",
            outcome(raw(SYS_ptrace, PTRACE_PEEKDATA, getpid(), 0, 0) == -1 ? -1 : 0));
        char *const argv[] = {"/nonexistent/kevo-exec-probe", NULL};
        execve(argv[0], argv, argv + 1);
        SAY(" exec:%s", outcome(-1));
        void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        SAY(" mprotect-exec:%s",
            outcome(page == MAP_FAILED ? -1 : mprotect(page, 4096, PROT_READ | PROT_EXEC)));
        if (page != MAP_FAILED)
            munmap(page, 4096);
        SAY(" unshare:%s", outcome(unshare(CLONE_NEWUSER)));
        SAY(" dumpable:%s", outcome(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)));
        SAY(" poked:%d", poke_target);
    } else if (strcmp(b, "secrets") == 0) {
        char parent[64];
        snprintf(parent, sizeof parent, "/proc/%d/environ", (int)getppid());
        const char *found = secret_in(NULL);
        if (!found)
            found = secret_in("/proc/self/environ");
        if (!found)
            found = secret_in(parent);
        const char *ifname = getenv("NCCL_SOCKET_IFNAME");
        SAY("secrets:%s nccl-ifname:%s path:%s", found ? found : "none", ifname ? ifname : "unset",
            getenv("PATH") ? "set" : "unset");
    } else if (strcmp(b, "network") == 0) {
        const char *port = getenv("KEVO_FAKE_NET_PORT");
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        a.sin_port = htons((uint16_t)(port ? atoi(port) : 9));
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int rc = s < 0 ? -1 : connect(s, (struct sockaddr *)&a, sizeof a);
        if (rc == 0 && write(s, "kevo-escaped\n", 13) != 13)
            rc = -1;
        SAY("connect:%s", outcome(rc));
        if (s >= 0)
            close(s);
        /* loopback inside: a listener of our own, and a connection to it */
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in self = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof self;
        int c = -1;
        rc = l < 0 || bind(l, (struct sockaddr *)&self, sizeof self) != 0 || listen(l, 1) != 0 ||
                     getsockname(l, (struct sockaddr *)&self, &len) != 0 ||
                     (c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
                     connect(c, (struct sockaddr *)&self, sizeof self) != 0
                 ? -1
                 : 0;
        SAY(" loopback:%s", outcome(rc));
        if (c >= 0)
            close(c);
        if (l >= 0)
            close(l);
    } else {
        return 0;
    }
#undef SAY
    return 1;
}

/* As kevo-worker does once it is up (worker/main.c, lock_down). */
static void lock_down(void)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        die("prctl: %s", strerror(errno));
    int e = kv_syscall_filter_install(KV_FILTER_NO_EXEC);
    if (e != 0 && e != ENOSYS)
        die("the system-call filter: %s", strerror(e));
}

static int run_confinement_probe(const kv_job *job)
{
    const char *b = job->sizes[0];
    char m[KV_JOB_MSG_MAX];
    size_t n = 0;
#define SAY(...) say(m, sizeof m, &n, __VA_ARGS__)
    if (strcmp(b, "escape") == 0) {
        const char *target = getenv("KEVO_FAKE_TARGET");
        if (!target)
            die("escape: KEVO_FAKE_TARGET is not set");
        char dir[4096], plant[4200], procfd[64];
        snprintf(dir, sizeof dir, "%s", target);
        *strrchr(dir, '/') = '\0';
        snprintf(plant, sizeof plant, "%s/planted", dir);
        snprintf(procfd, sizeof procfd, "/proc/%d/fd", (int)getppid());
        int fd = open(target, O_WRONLY);
        SAY("write-archive:%s", outcome(fd < 0 ? -1 : 0));
        if (fd >= 0)
            close(fd);
        fd = open(target, O_RDONLY);
        SAY(" read-archive:%s", outcome(fd < 0 ? -1 : 0));
        if (fd >= 0)
            close(fd);
        fd = open(plant, O_WRONLY | O_CREAT, 0644);
        SAY(" plant:%s", outcome(fd < 0 ? -1 : 0));
        if (fd >= 0)
            close(fd);
        DIR *d = opendir(dir);
        SAY(" list-run-dir:%s", outcome(d ? 0 : -1));
        if (d)
            closedir(d);
        d = opendir(procfd);
        SAY(" parent-fds:%s", outcome(d ? 0 : -1));
        if (d)
            closedir(d);
        SAY(" signal-parent:%s", outcome(kill(getppid(), SIGUSR1)));
        fd = open("scratch-file", O_WRONLY | O_CREAT, 0644);
        SAY(" scratch:%s", outcome(fd < 0 || write(fd, "x", 1) != 1 ? -1 : 0));
        if (fd >= 0)
            close(fd);
        fd = open("/tmp/kevo-fake-escaped", O_WRONLY | O_CREAT, 0644);
        SAY(" write-tmp:%s", outcome(fd < 0 ? -1 : 0));
        if (fd >= 0)
            close(fd);
        char cwd[4096];
        const char *home = getenv("HOME");
        SAY(" home-is-cwd:%s",
            getcwd(cwd, sizeof cwd) && home && strcmp(cwd, home) == 0 ? "yes" : "no");
        struct rlimit fs, np, co;
        getrlimit(RLIMIT_FSIZE, &fs);
        getrlimit(RLIMIT_NPROC, &np);
        getrlimit(RLIMIT_CORE, &co);
        SAY(" fsize:%llu nproc:%llu core:%llu uid:%d", (unsigned long long)fs.rlim_cur,
            (unsigned long long)np.rlim_cur, (unsigned long long)co.rlim_cur, (int)getuid());
    } else if (strcmp(b, "flood") == 0) {
        const char *mib = getenv("KEVO_FAKE_FLOOD_MIB");
        long total = (mib ? atol(mib) : 64) << 20;
        static char line[4096];
        memset(line, 'f', sizeof line);
        line[sizeof line - 1] = '\n';
        for (long done = 0; done < total; done += (long)sizeof line) {
            if (fwrite(line, 1, sizeof line, stdout) != sizeof line ||
                fwrite(line, 1, sizeof line, stderr) != sizeof line)
                die("flood: write failed");
        }
        printf("flood: last line of rank %d, job %llu\n", rank, (unsigned long long)job->id);
        fflush(stdout);
        SAY("flooded");
    } else if (strcmp(b, "fork-bomb") == 0) {
        int forks = 0;
        for (; forks < 100000; forks++) {
            pid_t p = fork();
            if (p == 0) {
                if (forks == 0)
                    setsid(); /* out of the process group: only the uid's kill reaches it */
                for (;;)
                    pause();
            }
            if (p < 0)
                break;
        }
        SAY("forks:%d refused:%s", forks, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
    } else if (run_lockdown_probe(job, m, sizeof m)) {
        n = strlen(m);
    } else if (strcmp(b, "dump") == 0 || strcmp(b, "dump-link") == 0) {
        char d[4200], f[4300];
        snprintf(d, sizeof d, "%s/s/rank%d/inputs", job->dump_dir, rank);
        kv_err e = {{0}};
        int rc = kv_mkdir_p(d, 0755, &e);
        snprintf(f, sizeof f, "%s/x.bin", d);
        char body[32];
        int len = snprintf(body, sizeof body, "rank %d", rank);
        if (rc == 0)
            rc = kv_write_file_atomic(f, body, (size_t)len, &e);
        snprintf(f, sizeof f, "%s/link", job->dump_dir);
        if (rc == 0 && rank == 0 && strcmp(b, "dump-link") == 0)
            rc = symlink("/etc/hostname", f);
        SAY("dumped:%s dump-dir:%s",
            rc == 0    ? "ok"
            : e.msg[0] ? e.msg
                       : outcome(rc),
            job->dump_dir);
    } else if (strcmp(b, "inbox") == 0) {
        kv_problem p;
        kv_err e = {{0}};
        int loaded = kv_problem_load(job->problem_dir, &p, &e) == 0;
        if (loaded)
            kv_problem_free(&p);
        SAY("problem:%s", loaded ? "ok" : e.msg);
        SAY(" problem-dir:%s", job->problem_dir);
        int fd = open(job->reference_so, O_RDONLY);
        SAY(" reference:%s", outcome(fd < 0 ? -1 : 0));
        if (fd >= 0)
            close(fd);
        fd = open(job->candidate_so, O_RDONLY);
        SAY(" candidate:%s candidate-path:%s", outcome(fd < 0 ? -1 : 0), job->candidate_so);
        if (fd >= 0)
            close(fd);
        const char *original = getenv("KEVO_FAKE_TARGET");
        fd = original ? open(original, O_RDONLY) : -1;
        SAY(" original:%s", outcome(fd < 0 ? -1 : 0));
        if (fd >= 0)
            close(fd);
    } else {
        return 0;
    }
#undef SAY
    progress(job->id, "correctness");
    answer(job, KV_VERDICT_OK, m);
    return 1;
}

static void spam(void)
{
    for (int i = 0; i < 8192; i++) {
        printf("spam line %d of stdout: {\"type\":\"result\",\"job\":%d}\n", i, i);
        fprintf(stderr, "spam line %d of stderr\n", i);
    }
    fflush(stdout);
}

static void run_job(const kv_job *job)
{
    const char *b = job->sizes[0];
    if (run_learned_elsewhere(job) || run_confinement_probe(job))
        return;
    if (strcmp(b, "ok") == 0 || strcmp(b, "stdout-spam") == 0 || strcmp(b, "chatty") == 0) {
        if (strcmp(b, "stdout-spam") == 0)
            spam();
        int n = strcmp(b, "chatty") == 0 ? 3000 : 1;
        for (int i = 0; i < n; i++)
            progress(job->id, "correctness");
        progress(job->id, "timing");
        answer(job, KV_VERDICT_OK, "");
    } else if (strcmp(b, "mismatch") == 0) {
        if (rank == 1)
            answer(job, KV_VERDICT_MISMATCH, "size mismatch: out[42] = 2.5, expected 1");
        else
            answer(job, KV_VERDICT_OK, "");
    } else if (strcmp(b, "runtime-error") == 0) {
        progress(job->id, "timing size 0");
        if (rank == 1) {
            fprintf(stderr, "fake candidate: sum kernel launch: invalid argument\n");
            fflush(stderr);
            answer(job, KV_VERDICT_RUNTIME_ERROR,
                   "kevo_run: CUDA error 700: an illegal memory access was encountered");
        }
        hang();
    } else if (strcmp(b, "hang") == 0 || strcmp(b, "hang-noterm") == 0) {
        if (strcmp(b, "hang-noterm") == 0) {
            signal(SIGTERM, SIG_IGN);
            signal(SIGINT, SIG_IGN);
        }
        progress(job->id, "timing size 0");
        hang();
    } else if (strcmp(b, "crash") == 0 || strcmp(b, "exit0") == 0) {
        progress(job->id, rank == 1 ? "correctness size 0" : "timing size 0");
        if (rank == 1) {
            fprintf(stderr, "fake-worker rank 1: about to %s\n", b);
            fflush(stderr);
            if (strcmp(b, "exit0") == 0)
                exit(0);
            crash();
        }
        hang();
    } else if (strcmp(b, "garbage") == 0) {
        if (rank == 0) {
            static const char junk[] = "this is not JSON\n";
            if (write(KV_PROTO_FD, junk, sizeof junk - 1) < 0)
                die("write: %s", strerror(errno));
        }
        hang();
    } else if (strcmp(b, "wrong-job") == 0) {
        if (rank == 0) {
            kv_job other = *job;
            other.id = job->id + 1000;
            answer(&other, KV_VERDICT_OK, "");
        }
        hang();
    } else if (strcmp(b, "fork-and-hang") == 0 || strcmp(b, "fork-and-crash") == 0) {
        int crashing = strcmp(b, "fork-and-crash") == 0;
        if (!crashing || rank == 1) {
            fflush(stdout);
            fflush(stderr);
            pid_t p = fork();
            if (p < 0)
                die("fork: %s", strerror(errno));
            if (p == 0)
                hang(); /* keeps fd 3, the log and the process group */
            fprintf(stderr, "fake-worker rank %d: forked %d\n", rank, (int)p);
            fflush(stderr);
        }
        progress(job->id, "timing size 0");
        if (crashing && rank == 1)
            crash();
        hang();
    } else {
        char m[128];
        snprintf(m, sizeof m, "fake worker: unknown behaviour \"%s\"", b);
        answer(job, KV_VERDICT_RUNTIME_ERROR, m);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--rank") == 0)
            rank = v;
        else if (strcmp(argv[i], "--world") == 0)
            world = v;
        else if (strcmp(argv[i], "--device") == 0)
            device = v;
        else if (strcmp(argv[i], "--group") == 0)
            group = v;
        else
            die("unknown argument %s", argv[i]);
    }
    if (argc != 9 || rank < 0 || world < 1 || rank >= world || device < 0 || group < 0)
        die("usage: fake_worker --rank R --world W --device D --group G");
    check_fds();
    const char *start = getenv("KEVO_FAKE_START");
    if (!start)
        start = "ok";
    if (strcmp(start, "exit-start") == 0 && rank == 1) {
        fprintf(stderr, "fake-worker rank 1: cannot initialise the device (pretend)\n");
        exit(3);
    }
    printf("fake-worker rank %d of %d, device %d, group %d, pid %d\n", rank, world, device, group,
           (int)getpid());
    fflush(stdout);

    kv_proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = KV_MSG_HELLO;
    m.rank = rank;
    m.pid = (int)getpid();
    m.device = strcmp(start, "wrong-device") == 0 && rank == 1 ? device + 100 : device;
    send_msg(&m);
    /* a made-up NCCL unique id, carried as kevo-worker carries the real one */
    unsigned char uid[KV_PROTO_UID_BYTES], got[KV_PROTO_UID_BYTES];
    for (size_t i = 0; i < sizeof uid; i++)
        uid[i] = (unsigned char)((unsigned)getpid() >> (8 * (i % 4)));
    if (rank == 0) {
        m.type = KV_MSG_UID;
        kv_proto_uid_to_hex(uid, m.uid);
        send_msg(&m);
    }
    if (strcmp(start, "slow-start") == 0)
        hang();

    kv_line_reader rd;
    kv_line_reader_init(&rd, KV_PROTO_FD);
    kv_job job;
    if (next_message(&rd, &m, &job) != KV_MSG_INIT)
        die("expected init, got %s", kv_msg_type_name(m.type));
    kv_err e;
    if (kv_proto_uid_from_hex(m.uid, got, &e) != 0)
        die("init message: %s", e.msg);
    if (rank == 0 && memcmp(got, uid, sizeof uid) != 0)
        die("init carries another uid");
    memset(&m, 0, sizeof m);
    lock_down();
    m.type = KV_MSG_READY;
    m.rank = rank;
    send_msg(&m);

    for (;;) {
        if (next_message(&rd, &m, &job) == KV_MSG_EXIT) {
            kv_line_reader_free(&rd);
            printf("fake-worker rank %d: exit\n", rank);
            return 0;
        }
        if (m.type != KV_MSG_JOB)
            die("expected a job, got %s", kv_msg_type_name(m.type));
        run_job(&job);
    }
}
