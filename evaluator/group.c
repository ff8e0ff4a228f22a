/* group.c — the supervisor of one worker group: W processes, one per GPU,
 * started together, fed jobs, watched, killed and started again.
 *
 * The group is a state machine driven by poll(). Every worker has a
 * socketpair (its fd 3; our end non-blocking) and, where the kernel has
 * pidfd_open, a pidfd that becomes readable when it terminates; without
 * pidfds the group asks for a short poll timeout and checks with waitid.
 * Workers share one process group (rank 0's pid), so a kill reaches what a
 * candidate forked too.
 *
 * Phases (kv_group_get_state reports STOPPING and KILLING as STARTING):
 *   NONE     --start-->                      STARTING
 *   STARTING --all ready-->                  IDLE
 *   STARTING --failure or start timeout-->   KILLING, then DEAD
 *   IDLE     --submit-->                     BUSY
 *   BUSY     --ok result-->                  IDLE, or STOPPING after recycle_every jobs
 *   BUSY     --failure, deadline, not ok-->  KILLING, then STARTING
 *   IDLE     --a worker dies or talks-->     KILLING, then STARTING
 *   STOPPING --all exited, or 2 s-->         KILLING, then STARTING
 *   KILLING  --all reaped-->                 STARTING (spawned again) or DEAD
 *
 * Termination is seen with waitid(WNOWAIT) and the process is reaped only
 * after the kill of its process group: a pid we have not reaped cannot be
 * reused, so kill(-pgid) never reaches a stranger. docs/evaluator.md,
 * "Supervisor and workers", describes the protocol, the verdicts and the
 * restart policy. */
#include "evaluator/group.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "evaluator/protocol.h"
#include "kevo/clock.h"
#include "kevo/fsutil.h"

#define MS 1000000LL
#define SEC 1000000000LL
#define STOP_GRACE_NS (2 * SEC)       /* recycle: "exit" sent, then SIGKILL */
#define EOF_GRACE_NS (200 * MS)       /* EOF on fd 3: wait this long for the exit status */
#define AFTER_FAIL_GRACE_NS (250 * MS) /* a rank reported a failure and left: others' answers */
#define KILL_LIMIT_NS (30 * SEC)      /* SIGKILL sent: a process still alive after this is stuck */
#define TICK_MS 20                    /* poll period where pidfds are unavailable */
#define READS_PER_STEP 64             /* per worker, so that one cannot starve the others */
#define LOG_TAIL_BYTES 2048
#define LOG_TAIL_LINES 6
#define LOG_LINE_MAX 160
#define DEFAULT_START_TIMEOUT_S 300.0

enum phase { PH_NONE, PH_STARTING, PH_IDLE, PH_BUSY, PH_STOPPING, PH_KILLING, PH_DEAD };

typedef struct {
    pid_t pid;             /* > 0 until reaped */
    int pidfd;             /* -1 where pidfd_open is unavailable */
    int fd;                /* our end of the socketpair; -1 when closed */
    kv_line_reader rd;
    int64_t eof_ns;        /* when EOF was read on fd; 0 before */
    int gone;              /* terminated (seen, not reaped yet) */
    int code, sig, core;   /* exit code (-1 when killed or unknown), signal, core dumped */
    int hello, ready, answered;
    char phase[KV_PROTO_PHASE_MAX];
    char log_path[PATH_MAX];
    off_t log_start;       /* the log's size when this process started */
    kv_job_result res;     /* its answer to the current job */
} worker;

struct kv_group {
    kv_group_opts o;
    enum phase ph;
    enum phase then;       /* KILLING: PH_STARTING (restart) or PH_DEAD */
    pid_t pgid;
    worker w[KV_GROUP_MAX_WORLD];
    int have_uid, n_ready, n_answered;
    int64_t until_ns;      /* deadline of the phase: start, job, stop, kill */
    int64_t grace_ns;      /* BUSY: end of the wait after a rank failed and left; 0 none */
    int failed_rank;       /* BUSY: that rank; -1 none */
    int64_t restart_ns;    /* when the restart in progress began; 0 none */
    double last_restart_s;
    kv_job job;
    double deadline_s;
    int64_t submit_ns;
    int jobs;              /* finished since the last start */
    int have_result;
    kv_job_result result;
    char error[KV_JOB_MSG_MAX];
};

/* ---- small helpers -------------------------------------------------------------------------- */

/* Appends to a fixed buffer, cutting at its end. */
typedef struct {
    char *p;
    size_t cap, len;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) KV_PRINTF(2, 3);
static void sb_add(sbuf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    b->len += (size_t)n;
    if (b->len >= b->cap)
        b->len = b->cap - 1;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    default: return "a signal";
    }
}

/* "exited with status 3", "killed by signal 11 (SIGSEGV)", ... */
static void describe_end(const worker *w, char *out, size_t cap)
{
    if (!w->gone)
        snprintf(out, cap, "closed its protocol socket (fd %d) but kept running", KV_PROTO_FD);
    else if (w->sig)
        snprintf(out, cap, "killed by signal %d (%s)%s", w->sig, signal_name(w->sig),
                 w->core ? ", core dumped" : "");
    else if (w->code >= 0)
        snprintf(out, cap, "exited with status %d", w->code);
    else
        snprintf(out, cap, "terminated (status unknown: reaped elsewhere)");
}

/* A line quoted for a message: at most max bytes, control characters as '?'. */
static void snippet(const char *s, size_t max, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n < max && n + 4 < cap; s++)
        out[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    if (*s && n + 4 < cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

/* Appends the last lines this worker's process wrote to its log. */
static void add_log_tail(sbuf *b, const worker *w, int rank)
{
    int fd = open(w->log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        sb_add(b, "\nlog of rank %d: cannot open %s: %s", rank, w->log_path, strerror(errno));
        return;
    }
    struct stat st;
    char buf[LOG_TAIL_BYTES + 1];
    ssize_t n = -1;
    off_t from = 0;
    if (fstat(fd, &st) == 0) {
        from = st.st_size - LOG_TAIL_BYTES;
        if (from < w->log_start)
            from = w->log_start;
        if (from > st.st_size)
            from = st.st_size;
        do
            n = pread(fd, buf, (size_t)(st.st_size - from), from);
        while (n < 0 && errno == EINTR);
    }
    int e = errno;
    if (close(fd) != 0 && n >= 0) {
        n = -1;
        e = errno;
    }
    if (n < 0) {
        sb_add(b, "\nlog of rank %d: cannot read %s: %s", rank, w->log_path, strerror(e));
        return;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    if (n == 0) {
        sb_add(b, "\nlog of rank %d (%s): empty", rank, w->log_path);
        return;
    }
    /* the start of the last LOG_TAIL_LINES lines */
    char *start = buf;
    int lines = 0;
    for (char *p = buf + n; p > buf; p--) {
        if (p[-1] == '\n' && ++lines == LOG_TAIL_LINES) {
            start = p;
            break;
        }
    }
    if (start == buf && from > w->log_start) {
        char *nl = strchr(buf, '\n'); /* the first line is cut: drop it */
        if (nl)
            start = nl + 1;
    }
    sb_add(b, "\nlog of rank %d (%s), last lines:", rank, w->log_path);
    for (char *line = start; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char q[LOG_LINE_MAX + 8];
        snippet(line, LOG_LINE_MAX, q, sizeof q);
        sb_add(b, "\n  %s", q);
        line = nl ? nl + 1 : NULL;
    }
}

static int any_process(const kv_group *g)
{
    for (int r = 0; r < g->o.world; r++)
        if (g->w[r].pid > 0)
            return 1;
    return 0;
}

/* ---- starting ------------------------------------------------------------------------------- */

/* Writes a decimal number (async-signal-safe). */
static void put_num(int fd, long v)
{
    char b[24];
    int i = (int)sizeof b;
    int neg = v < 0;
    unsigned long u = neg ? 0UL - (unsigned long)v : (unsigned long)v;
    do
        b[--i] = (char)('0' + u % 10);
    while ((u /= 10) && i > 1);
    if (neg)
        b[--i] = '-';
    ssize_t rc = write(fd, b + i, sizeof b - (size_t)i);
    (void)rc;
}

static void put_str(int fd, const char *s)
{
    ssize_t rc = write(fd, s, strlen(s));
    (void)rc;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child_fail(int logfd, const char *what, const char *path, int e)
{
    put_str(logfd, "kevo supervisor: ");
    put_str(logfd, what);
    if (path) {
        put_str(logfd, " ");
        put_str(logfd, path);
    }
    put_str(logfd, " failed, errno ");
    put_num(logfd, e);
    put_str(logfd, "\n");
    _exit(127);
}

static void child_exec(int sock, int logfd, int nullfd, pid_t pgid, char *const argv[],
                       long maxfd)
{
    if (setpgid(0, pgid) != 0)
        child_fail(logfd, "setpgid", NULL, errno);
    /* out of the way of 0..3 first, so that no dup2 below clobbers another */
    int s = fcntl(sock, F_DUPFD, 10);
    int l = fcntl(logfd, F_DUPFD, 10);
    int n = fcntl(nullfd, F_DUPFD, 10);
    if (s < 0 || l < 0 || n < 0)
        child_fail(logfd, "fcntl F_DUPFD", NULL, errno);
    /* dup2 clears FD_CLOEXEC on the copies */
    if (dup2(n, 0) < 0 || dup2(l, 1) < 0 || dup2(l, 2) < 0 || dup2(s, KV_PROTO_FD) < 0)
        child_fail(l, "dup2", NULL, errno);
    /* nothing else crosses exec, whatever our caller left without O_CLOEXEC */
#ifdef SYS_close_range
    if (syscall(SYS_close_range, KV_PROTO_FD + 1, ~0U, 0) != 0)
#endif
        for (long fd = KV_PROTO_FD + 1; fd < maxfd; fd++)
            close((int)fd);
    /* the worker starts with default signal handling and nothing blocked
     * (our SIG_IGN for SIGPIPE, say, would otherwise survive exec) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &sa, NULL); /* fails harmlessly on reserved numbers */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(argv[0], argv);
    child_fail(2, "exec", argv[0], errno);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd); /* on Linux the fd is gone even when close reports an error */
        *fd = -1;
    }
}

static int spawn_one(kv_group *g, int r, kv_err *err)
{
    worker *w = &g->w[r];
    char a_rank[16], a_world[16], a_dev[16], a_group[16];
    snprintf(a_rank, sizeof a_rank, "%d", r);
    snprintf(a_world, sizeof a_world, "%d", g->o.world);
    snprintf(a_dev, sizeof a_dev, "%d", g->o.devices[r]);
    snprintf(a_group, sizeof a_group, "%d", g->o.group_index);
    char *const argv[] = {g->o.worker_path, "--rank", a_rank, "--world", a_world, "--device",
                          a_dev, "--group", a_group, NULL};
    long maxfd = sysconf(_SC_OPEN_MAX);
    if (maxfd < 0 || maxfd > 65536)
        maxfd = 65536;

    if ((size_t)snprintf(w->log_path, sizeof w->log_path, "%s/worker-%d-%d.log", g->o.log_dir,
                         g->o.group_index, r) >= sizeof w->log_path)
        return kv_err_set(err, "log path in %s: too long", g->o.log_dir);
    int logfd = open(w->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        return kv_err_errno(err, errno, "open %s", w->log_path);
    char when[32], mark[160];
    kv_format_utc(kv_wall_ns(), when, sizeof when);
    int ml = snprintf(mark, sizeof mark, "--- kevo: group %d rank %d (world %d, device %d) starts %s ---\n",
                      g->o.group_index, r, g->o.world, g->o.devices[r], when);
    struct stat st;
    if (write(logfd, mark, (size_t)ml) != ml || fstat(logfd, &st) != 0) {
        int e = errno;
        close(logfd);
        return kv_err_errno(err, e, "write %s", w->log_path);
    }
    w->log_start = st.st_size;
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        int e = errno;
        close(logfd);
        return kv_err_errno(err, e, "open /dev/null");
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = errno;
        close(logfd);
        close(nullfd);
        return kv_err_errno(err, e, "socketpair");
    }
    pid_t pid = fork();
    if (pid == 0)
        child_exec(sv[1], logfd, nullfd, g->pgid, argv, maxfd);
    int e = errno;
    close(sv[1]);
    close(logfd);
    close(nullfd);
    if (pid < 0) {
        close(sv[0]);
        return kv_err_errno(err, e, "fork %s", g->o.worker_path);
    }
    /* Set the process group from both sides: whichever runs first makes it
     * so before rank r+1 tries to join. EACCES: the child has exec'd, after
     * its own setpgid succeeded. */
    if (r == 0)
        g->pgid = pid;
    if (setpgid(pid, g->pgid) != 0 && errno != EACCES && errno != ESRCH) {
        e = errno;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        close(sv[0]);
        if (r == 0)
            g->pgid = 0;
        return kv_err_errno(err, e, "setpgid %d", (int)pid);
    }
    memset(&w->rd, 0, sizeof w->rd);
    w->pid = pid;
    w->fd = sv[0];
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return kv_err_errno(err, errno, "fcntl O_NONBLOCK"); /* the caller kills pid */
    kv_line_reader_init(&w->rd, w->fd);
#ifdef SYS_pidfd_open
    w->pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* always close-on-exec */
#else
    w->pidfd = -1;
#endif
    if (w->pidfd < 0)
        w->pidfd = -1; /* old kernel, or out of fds: poll with a tick instead */
    return 0;
}

static void reset_worker(worker *w)
{
    w->pid = 0;
    w->pidfd = -1;
    w->fd = -1;
    memset(&w->rd, 0, sizeof w->rd);
    w->rd.fd = -1;
    w->eof_ns = 0;
    w->gone = 0;
    w->code = -1;
    w->sig = w->core = 0;
    w->hello = w->ready = w->answered = 0;
    w->phase[0] = '\0';
}

static void release_worker(worker *w)
{
    close_fd(&w->fd);
    close_fd(&w->pidfd);
    kv_line_reader_free(&w->rd);
    reset_worker(w);
}

/* Kills and reaps what spawn_all started before it failed: these processes
 * are fresh, so the blocking waits end at once. */
static void unwind_spawn(kv_group *g)
{
    if (g->pgid > 0)
        kill(-g->pgid, SIGKILL);
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (w->pid > 0) {
            kill(w->pid, SIGKILL);
            while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        release_worker(w);
    }
    g->pgid = 0;
}

static int spawn_all(kv_group *g, kv_err *err)
{
    for (int r = 0; r < g->o.world; r++)
        reset_worker(&g->w[r]);
    g->pgid = 0;
    g->have_uid = g->n_ready = g->n_answered = 0;
    g->jobs = 0;
    g->grace_ns = 0;
    g->failed_rank = -1;
    for (int r = 0; r < g->o.world; r++) {
        if (spawn_one(g, r, err) != 0) {
            unwind_spawn(g);
            g->ph = PH_DEAD;
            snprintf(g->error, sizeof g->error, "group %d: cannot start: %s", g->o.group_index,
                     err ? err->msg : "");
            return kv_err_prefix(err, "group %d: cannot start", g->o.group_index);
        }
    }
    g->ph = PH_STARTING;
    g->until_ns = kv_monotonic_ns() + (int64_t)(g->o.start_timeout_s * SEC);
    return 0;
}

/* ---- stopping ------------------------------------------------------------------------------- */

static void advance_kill(kv_group *g);

/* SIGKILL to the process group and to every worker (one may have left the
 * group); the reaping follows in advance_kill. */
static void start_kill(kv_group *g, enum phase then)
{
    if (any_process(g)) {
        /* Failures here are ESRCH (all dead already; an unreaped worker
         * keeps its pid and the group's id from being reused); the reaping
         * in advance_kill is what makes sure. */
        if (g->pgid > 0)
            kill(-g->pgid, SIGKILL);
        for (int r = 0; r < g->o.world; r++)
            if (g->w[r].pid > 0)
                kill(g->w[r].pid, SIGKILL);
    }
    g->ph = PH_KILLING;
    g->then = then;
    g->until_ns = kv_monotonic_ns() + KILL_LIMIT_NS;
    advance_kill(g);
}

static void go_dead(kv_group *g, const char *msg)
{
    snprintf(g->error, sizeof g->error, "%s", msg);
    start_kill(g, PH_DEAD);
}

/* Reaps the killed workers; once all are, closes everything and starts the
 * group again (or leaves it DEAD). */
static void advance_kill(kv_group *g)
{
    int alive = -1;
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (w->pid <= 0)
            continue;
        int st;
        pid_t p;
        do
            p = waitpid(w->pid, &st, WNOHANG);
        while (p < 0 && errno == EINTR);
        if (p == 0) {
            if (alive < 0)
                alive = r;
            continue;
        }
        /* reaped, or ECHILD: someone else's waitpid(-1) took it */
        w->pid = 0;
        close_fd(&w->pidfd);
    }
    if (alive >= 0) {
        if (kv_monotonic_ns() >= g->until_ns && g->then != PH_DEAD) {
            snprintf(g->error, sizeof g->error,
                     "group %d: rank %d (pid %d) still alive %lld s after SIGKILL (stuck in the "
                     "kernel?)",
                     g->o.group_index, alive, (int)g->w[alive].pid,
                     (long long)(KILL_LIMIT_NS / SEC));
            g->then = PH_DEAD;
        }
        if (kv_monotonic_ns() >= g->until_ns)
            g->ph = PH_DEAD; /* the pids stay; kv_group_start and free reap them */
        return;
    }
    /* Children the candidates forked are ours only where we are a
     * subreaper; reap those of this group, never anyone else's. */
    if (g->pgid > 0)
        while (waitpid(-g->pgid, NULL, WNOHANG) > 0)
            ;
    for (int r = 0; r < g->o.world; r++)
        release_worker(&g->w[r]);
    g->pgid = 0;
    if (g->then == PH_STARTING) {
        kv_err e;
        if (spawn_all(g, &e) != 0)
            snprintf(g->error, sizeof g->error, "%s", e.msg);
    } else {
        g->ph = PH_DEAD;
    }
}

/* Recycling: ask every worker to exit, kill after STOP_GRACE_NS. */
static void start_stop(kv_group *g)
{
    kv_proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = KV_MSG_EXIT;
    char *line = kv_proto_msg_to_json(&m);
    g->restart_ns = kv_monotonic_ns();
    if (!line) {
        start_kill(g, PH_STARTING);
        return;
    }
    for (int r = 0; r < g->o.world; r++)
        if (g->w[r].fd >= 0 && !g->w[r].gone)
            kv_proto_send(g->w[r].fd, line, NULL); /* a worker already gone is fine */
    free(line);
    g->ph = PH_STOPPING;
    g->until_ns = g->restart_ns + STOP_GRACE_NS;
}

/* ---- failures and results ------------------------------------------------------------------- */

static void job_failed(kv_group *g, kv_verdict v, int rank, const char *summary);

/* A failure outside any job's result: in STARTING the group is DEAD, in
 * IDLE it restarts, in BUSY the job fails with verdict v. */
static void fail(kv_group *g, kv_verdict v, int rank, const char *fmt, ...) KV_PRINTF(4, 5);
static void fail(kv_group *g, kv_verdict v, int rank, const char *fmt, ...)
{
    char summary[KV_JOB_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(summary, sizeof summary, fmt, ap);
    va_end(ap);
    if (g->ph == PH_BUSY) {
        job_failed(g, v, rank, summary);
        return;
    }
    if (g->ph != PH_STARTING && g->ph != PH_IDLE)
        return;
    char msg[KV_JOB_MSG_MAX];
    sbuf b = {msg, sizeof msg, 0};
    msg[0] = '\0';
    sb_add(&b, "group %d, %s: %s", g->o.group_index,
           g->ph == PH_STARTING ? "starting" : "idle", summary);
    if (rank >= 0)
        add_log_tail(&b, &g->w[rank], rank);
    if (g->ph == PH_STARTING) {
        go_dead(g, msg);
    } else {
        snprintf(g->error, sizeof g->error, "%s", msg);
        g->restart_ns = kv_monotonic_ns();
        start_kill(g, PH_STARTING);
    }
}

/* One line per rank: where it was and how it ended. */
static void add_rank_lines(kv_group *g, sbuf *b)
{
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        char how[96];
        if (w->answered)
            sb_add(b, "\nrank %d: answered %s", r, kv_verdict_name(w->res.verdict));
        else
            sb_add(b, "\nrank %d: no result, phase %s", r, w->phase[0] ? w->phase : "(none reported)");
        if (w->gone || (w->rd.eof && w->fd >= 0)) {
            describe_end(w, how, sizeof how);
            sb_add(b, ", %s", how);
        }
    }
}

static void set_size_names(kv_group *g, kv_job_result *res)
{
    res->n_sizes = g->job.n_sizes;
    for (int i = 0; i < res->n_sizes; i++)
        memcpy(res->sizes[i].name, g->job.sizes[i], sizeof res->sizes[i].name);
}

/* The job fails with verdict v (crash, hang): the result says why and
 * where, and the group restarts. */
static void job_failed(kv_group *g, kv_verdict v, int rank, const char *summary)
{
    int64_t now = kv_monotonic_ns();
    kv_job_result *res = &g->result;
    memset(res, 0, sizeof *res);
    res->verdict = v;
    set_size_names(g, res);
    sbuf b = {res->message, sizeof res->message, 0};
    sb_add(&b, "%s", summary);
    add_rank_lines(g, &b);
    for (int r = 0; r < g->o.world; r++)
        if (g->w[r].answered && g->w[r].res.verdict != KV_VERDICT_OK && g->w[r].res.message[0])
            sb_add(&b, "\nrank %d said: %s", r, g->w[r].res.message);
    if (rank >= 0)
        add_log_tail(&b, &g->w[rank], rank);
    res->wall_s = (double)(now - g->submit_ns) / SEC;
    g->have_result = 1;
    g->jobs++;
    g->restart_ns = now;
    start_kill(g, PH_STARTING);
}

/* Every rank answered, or a rank answered with a failure and left: merge
 * the answers (in rank order), then restart, recycle or stay idle. */
static void job_done(kv_group *g)
{
    int64_t now = kv_monotonic_ns();
    kv_job_result *res = &g->result;
    memset(res, 0, sizeof *res);
    int first = 1, left = 0;
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (w->gone || w->rd.eof)
            left = 1;
        if (!w->answered)
            continue;
        if (w->res.message[0]) {
            char m[KV_JOB_MSG_MAX];
            sbuf b = {m, sizeof m, 0};
            sb_add(&b, "rank %d: ", r);
            sb_add(&b, "%s", w->res.message);
            memcpy(w->res.message, m, sizeof m);
        }
        kv_job_result_merge(res, &w->res, first);
        first = 0;
    }
    if (first) /* no answer at all: cannot happen, but never report ok for it */
        res->verdict = KV_VERDICT_CRASH;
    if (g->n_answered < g->o.world) {
        sbuf b = {res->message, sizeof res->message, strlen(res->message)};
        for (int r = 0; r < g->o.world; r++) {
            worker *w = &g->w[r];
            if (w->answered)
                continue;
            sb_add(&b, "\nrank %d: no result (phase %s) after rank %d failed", r,
                   w->phase[0] ? w->phase : "(none reported)", g->failed_rank);
            if (w->gone) {
                char how[96];
                describe_end(w, how, sizeof how);
                sb_add(&b, "; it %s", how);
            }
        }
    }
    res->wall_s = (double)(now - g->submit_ns) / SEC;
    g->have_result = 1;
    g->jobs++;
    if (res->verdict != KV_VERDICT_OK || left) {
        g->restart_ns = now;
        start_kill(g, PH_STARTING);
    } else if (g->o.recycle_every > 0 && g->jobs >= g->o.recycle_every) {
        start_stop(g);
    } else {
        g->ph = PH_IDLE;
    }
}

/* ---- messages ------------------------------------------------------------------------------- */

static const char *phase_name(enum phase ph)
{
    switch (ph) {
    case PH_STARTING: return "starting";
    case PH_IDLE: return "idle";
    case PH_BUSY: return "running a job";
    default: return "stopping";
    }
}

static void on_line(kv_group *g, int r, const char *line)
{
    worker *w = &g->w[r];
    enum phase ph = g->ph;
    if (ph != PH_STARTING && ph != PH_IDLE && ph != PH_BUSY)
        return; /* stopping or killing: nothing it says matters */
    kv_err e;
    kv_msg_type t;
    char q[96];
    if (kv_proto_type(line, &t, &e) != 0) {
        snippet(line, 80, q, sizeof q);
        fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d sent an unparsable line \"%s\" (%s)", r,
             q, e.msg);
        return;
    }
    const char *tn = kv_msg_type_name(t);
    if (t == KV_MSG_RESULT) {
        if (ph != PH_BUSY || w->answered)
            goto out_of_order;
        uint64_t id;
        int rank;
        if (kv_proto_result_from_json(line, &id, &rank, &w->res, &e) != 0) {
            fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d: %s", r, e.msg);
            return;
        }
        if (rank != r || id != g->job.id) {
            fail(g, KV_VERDICT_CRASH, r,
                 "protocol: rank %d sent a result for rank %d, job %" PRIu64 " (job %" PRIu64 ")",
                 r, rank, id, g->job.id);
            return;
        }
        w->answered = 1;
        g->n_answered++;
        return;
    }
    if (t == KV_MSG_JOB || t == KV_MSG_INIT || t == KV_MSG_EXIT)
        goto out_of_order; /* the supervisor's messages */
    kv_proto_msg m;
    if (kv_proto_msg_from_json(line, &m, &e) != 0) {
        fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d: %s", r, e.msg);
        return;
    }
    if (t != KV_MSG_UID && m.rank != r) {
        fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d sent \"%s\" as rank %d", r, tn, m.rank);
        return;
    }
    switch (t) {
    case KV_MSG_HELLO:
        if (ph != PH_STARTING || w->hello)
            goto out_of_order;
        if (m.device != g->o.devices[r]) {
            fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d says device %d, expected %d", r,
                 m.device, g->o.devices[r]);
            return;
        }
        w->hello = 1;
        return;
    case KV_MSG_UID: {
        if (ph != PH_STARTING || r != 0 || !w->hello || g->have_uid)
            goto out_of_order;
        g->have_uid = 1;
        m.type = KV_MSG_INIT;
        char *init = kv_proto_msg_to_json(&m);
        if (!init) {
            fail(g, KV_VERDICT_CRASH, -1, "out of memory");
            return;
        }
        for (int k = 0; k < g->o.world && g->ph == PH_STARTING; k++) {
            /* a worker that is gone shows as EOF and exit, with its status */
            if (g->w[k].fd >= 0 && kv_proto_send(g->w[k].fd, init, &e) != 0 &&
                errno != EPIPE && errno != ECONNRESET)
                fail(g, KV_VERDICT_CRASH, k, "sending init to rank %d: %s", k, e.msg);
        }
        free(init);
        return;
    }
    case KV_MSG_READY:
        if (ph != PH_STARTING || !w->hello || !g->have_uid || w->ready)
            goto out_of_order;
        w->ready = 1;
        g->n_ready++;
        return;
    case KV_MSG_PROGRESS:
        if (ph != PH_BUSY || w->answered)
            goto out_of_order;
        if (m.job != g->job.id) {
            fail(g, KV_VERDICT_CRASH, r,
                 "protocol: rank %d sent progress for job %" PRIu64 " (job %" PRIu64 ")", r,
                 m.job, g->job.id);
            return;
        }
        memcpy(w->phase, m.phase, sizeof w->phase);
        return;
    default:
        break;
    }
out_of_order:
    fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d sent \"%s\" out of order (group %s%s)", r, tn,
         phase_name(ph),
         ph == PH_BUSY && w->answered ? ", after its result" : !w->hello ? ", before hello" : "");
}

/* Reads what worker r has sent and handles every complete line. */
static void pump(kv_group *g, int r)
{
    worker *w = &g->w[r];
    enum phase ph = g->ph;
    for (int i = 0; i < READS_PER_STEP; i++) {
        if (w->fd < 0 || w->rd.eof)
            return;
        size_t before = w->rd.len;
        kv_err e;
        if (kv_line_reader_fill(&w->rd, &e) != 0) {
            fail(g, KV_VERDICT_CRASH, r, "protocol: rank %d: %s", r, e.msg);
            return;
        }
        int got = w->rd.len != before;
        char *line;
        while ((line = kv_line_reader_next(&w->rd)) != NULL) {
            on_line(g, r, line);
            free(line);
            if (g->ph != ph)
                return;
        }
        if (w->rd.eof && !w->eof_ns)
            w->eof_ns = kv_monotonic_ns();
        if (!got)
            return;
    }
}

/* Notices workers that terminated (without reaping them), and reads what
 * they wrote before they died. */
static void watch_exits(kv_group *g)
{
    enum phase ph = g->ph;
    for (int r = 0; r < g->o.world && g->ph == ph; r++) {
        worker *w = &g->w[r];
        if (w->pid <= 0 || w->gone)
            continue;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int rc;
        do
            rc = waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT);
        while (rc < 0 && errno == EINTR);
        if (rc < 0) {
            w->gone = 1; /* ECHILD: reaped by someone else's waitpid(-1) */
            w->code = -1;
        } else if (si.si_pid == w->pid) {
            w->gone = 1;
            if (si.si_code == CLD_EXITED) {
                w->code = si.si_status;
            } else {
                w->code = -1;
                w->sig = si.si_status;
                w->core = si.si_code == CLD_DUMPED;
            }
        } else {
            continue;
        }
        close_fd(&w->pidfd);
        pump(g, r);
    }
}

/* A worker has left when it terminated, or closed fd 3 a while ago. */
static int has_left(const worker *w, int64_t now)
{
    return w->gone || (w->rd.eof && now - w->eof_ns >= EOF_GRACE_NS);
}

static void step_starting(kv_group *g, int64_t now)
{
    if (g->n_ready == g->o.world) {
        g->ph = PH_IDLE;
        if (g->restart_ns) {
            g->last_restart_s = (double)(now - g->restart_ns) / SEC;
            g->restart_ns = 0;
        }
        return;
    }
    for (int r = 0; r < g->o.world; r++) {
        if (has_left(&g->w[r], now)) {
            char how[96];
            describe_end(&g->w[r], how, sizeof how);
            fail(g, KV_VERDICT_CRASH, r, "rank %d %s", r, how);
            return;
        }
    }
    if (now >= g->until_ns) {
        int r = 0;
        while (r < g->o.world - 1 && g->w[r].ready)
            r++;
        const worker *w = &g->w[r];
        fail(g, KV_VERDICT_CRASH, r,
             "not ready within the start timeout of %g s (%d of %d ready; rank %d %s)",
             g->o.start_timeout_s, g->n_ready, g->o.world, r,
             !w->hello ? "never said hello"
             : r == 0 && !g->have_uid ? "never sent the NCCL unique id"
                                      : "never said ready");
    }
}

static void step_busy(kv_group *g, int64_t now)
{
    if (g->n_answered == g->o.world) {
        job_done(g);
        return;
    }
    /* a rank that reported a failure and left: the others will not finish
     * (or fail because it left); collect what comes in a short while */
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (g->failed_rank < 0 && w->answered && has_left(w, now)) {
            if (w->res.verdict == KV_VERDICT_OK) {
                char how[96];
                describe_end(w, how, sizeof how);
                fail(g, KV_VERDICT_CRASH, r, "rank %d %s after answering ok", r, how);
                return;
            }
            g->failed_rank = r;
            g->grace_ns = now + AFTER_FAIL_GRACE_NS;
        }
    }
    int all_done = 1;
    for (int r = 0; r < g->o.world; r++) {
        worker *w = &g->w[r];
        if (w->answered)
            continue;
        if (!has_left(w, now)) {
            all_done = 0;
            continue;
        }
        if (g->failed_rank < 0) {
            char how[96];
            describe_end(w, how, sizeof how);
            fail(g, KV_VERDICT_CRASH, r, "rank %d %s in phase %s", r, how,
                 w->phase[0] ? w->phase : "(none reported)");
            return;
        }
    }
    if (g->failed_rank >= 0 && (all_done || now >= g->grace_ns)) {
        job_done(g);
        return;
    }
    if (now >= g->until_ns) {
        int r = 0;
        while (r < g->o.world - 1 && g->w[r].answered)
            r++;
        const char *phase = g->w[r].phase[0] ? g->w[r].phase : "(none reported)";
        fail(g, KV_VERDICT_HANG, r, "deadline of %g s passed in phase %s (rank %d)",
             g->deadline_s, phase, r);
    }
}

static int take_result(kv_group *g, kv_job_result *res)
{
    if (res)
        memcpy(res, &g->result, sizeof *res);
    g->have_result = 0;
    return 1;
}

/* ---- public --------------------------------------------------------------------------------- */

int kv_group_new(const kv_group_opts *o, kv_group **out, kv_err *err)
{
    *out = NULL;
    if (o->world < 1 || o->world > KV_GROUP_MAX_WORLD)
        return kv_err_set(err, "group %d: world %d is out of range (1..%d)", o->group_index,
                          o->world, KV_GROUP_MAX_WORLD);
    for (int r = 0; r < o->world; r++)
        if (o->devices[r] < 0)
            return kv_err_set(err, "group %d: device %d of rank %d", o->group_index,
                              o->devices[r], r);
    if (!o->worker_path[0] || access(o->worker_path, X_OK) != 0)
        return kv_err_errno(err, o->worker_path[0] ? errno : ENOENT, "group %d: worker \"%s\"",
                            o->group_index, o->worker_path);
    if (!o->log_dir[0])
        return kv_err_set(err, "group %d: no log directory", o->group_index);
    if (kv_mkdir_p(o->log_dir, 0755, err) != 0)
        return kv_err_prefix(err, "group %d: log directory", o->group_index);
    kv_group *g = calloc(1, sizeof *g);
    if (!g)
        return kv_err_set(err, "group %d: out of memory", o->group_index);
    g->o = *o;
    if (!(g->o.start_timeout_s > 0))
        g->o.start_timeout_s = DEFAULT_START_TIMEOUT_S;
    if (g->o.start_timeout_s > 1e6)
        g->o.start_timeout_s = 1e6;
    g->ph = PH_NONE;
    g->failed_rank = -1;
    for (int r = 0; r < KV_GROUP_MAX_WORLD; r++)
        reset_worker(&g->w[r]);
    snprintf(g->error, sizeof g->error, "group %d: not started", o->group_index);
    *out = g;
    return 0;
}

void kv_group_free(kv_group *g)
{
    if (!g)
        return;
    if (any_process(g)) {
        if (g->pgid > 0)
            kill(-g->pgid, SIGKILL);
        for (int r = 0; r < g->o.world; r++)
            if (g->w[r].pid > 0)
                kill(g->w[r].pid, SIGKILL);
        /* SIGKILLed processes die at once unless stuck in the kernel: wait
         * a bounded time, then leave them to init */
        int64_t give_up = kv_monotonic_ns() + 5 * SEC;
        for (;;) {
            int alive = 0;
            for (int r = 0; r < g->o.world; r++) {
                worker *w = &g->w[r];
                if (w->pid <= 0)
                    continue;
                pid_t p = waitpid(w->pid, NULL, WNOHANG);
                if (p == 0)
                    alive = 1;
                else if (p > 0 || errno != EINTR)
                    w->pid = 0;
            }
            if (!alive || kv_monotonic_ns() >= give_up)
                break;
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        if (g->pgid > 0)
            while (waitpid(-g->pgid, NULL, WNOHANG) > 0)
                ;
    }
    for (int r = 0; r < g->o.world; r++)
        release_worker(&g->w[r]);
    free(g);
}

kv_group_state kv_group_get_state(const kv_group *g)
{
    if (g->have_result)
        return KV_GROUP_BUSY; /* until kv_group_step hands the result over */
    switch (g->ph) {
    case PH_IDLE:
        return KV_GROUP_IDLE;
    case PH_BUSY:
        return KV_GROUP_BUSY;
    case PH_STARTING:
    case PH_STOPPING:
        return KV_GROUP_STARTING;
    case PH_KILLING:
        return KV_GROUP_STARTING; /* DEAD, if so, once every process is reaped */
    default:
        return KV_GROUP_DEAD;
    }
}

int kv_group_start(kv_group *g, kv_err *err)
{
    switch (g->ph) {
    case PH_NONE:
    case PH_DEAD:
        g->error[0] = '\0';
        /* from DEAD, the time until ready counts as a restart */
        g->restart_ns = g->ph == PH_DEAD ? kv_monotonic_ns() : 0;
        if (any_process(g)) { /* a kill that timed out: try again */
            start_kill(g, PH_STARTING);
            if (g->ph == PH_DEAD)
                return kv_err_set(err, "%s", g->error);
            return 0;
        }
        return spawn_all(g, err);
    case PH_KILLING:
        g->then = PH_STARTING;
        return 0;
    default: /* a running group: restart it; a job in flight is dropped */
        g->restart_ns = kv_monotonic_ns();
        start_kill(g, PH_STARTING);
        return 0;
    }
}

int kv_group_submit(kv_group *g, const kv_job *job, double deadline_s, kv_err *err)
{
    if (g->have_result || g->ph != PH_IDLE)
        return kv_err_set(err, "group %d: not idle (%s)", g->o.group_index,
                          g->have_result ? "a result is waiting" : phase_name(g->ph));
    if (!(deadline_s > 0))
        return kv_err_set(err, "group %d: deadline %g s", g->o.group_index, deadline_s);
    if (job->n_sizes < 1 || job->n_sizes > KV_JOB_MAX_SIZES)
        return kv_err_set(err, "group %d: job %" PRIu64 " has %d sizes", g->o.group_index,
                          job->id, job->n_sizes);
    char *line = kv_proto_job_to_json(job);
    if (!line)
        return kv_err_set(err, "group %d: job %" PRIu64 ": out of memory", g->o.group_index,
                          job->id);
    int64_t now = kv_monotonic_ns();
    g->job = *job;
    g->deadline_s = deadline_s;
    g->submit_ns = now;
    double d = deadline_s * SEC;
    g->until_ns = now + (d > 1e17 ? (int64_t)1e17 : (int64_t)d);
    g->n_answered = 0;
    g->failed_rank = -1;
    g->grace_ns = 0;
    for (int r = 0; r < g->o.world; r++) {
        g->w[r].answered = 0;
        g->w[r].phase[0] = '\0';
    }
    g->ph = PH_BUSY;
    for (int r = 0; r < g->o.world && g->ph == PH_BUSY; r++) {
        kv_err e;
        /* a worker that is gone shows as EOF and exit, with its status */
        if (kv_proto_send(g->w[r].fd, line, &e) != 0 && errno != EPIPE && errno != ECONNRESET)
            fail(g, KV_VERDICT_CRASH, r, "sending the job to rank %d: %s", r, e.msg);
    }
    free(line);
    return 0;
}

int kv_group_pollfds(const kv_group *g, struct pollfd *fds, int cap, int *timeout_ms)
{
    int n = 0, tick = 0, full = 0;
    int64_t until = 0;
    if (g->have_result) {
        *timeout_ms = 0;
        return 0;
    }
    if (g->ph == PH_NONE || g->ph == PH_DEAD) {
        *timeout_ms = any_process(g) ? 1000 : -1; /* stuck processes: look again now and then */
        return 0;
    }
    int64_t now = kv_monotonic_ns();
    if (g->ph != PH_IDLE)
        until = g->until_ns;
    if (g->ph == PH_BUSY && g->grace_ns && g->grace_ns < until)
        until = g->grace_ns;
    for (int r = 0; r < g->o.world; r++) {
        const worker *w = &g->w[r];
        if (w->pid <= 0)
            continue;
        if (g->ph != PH_KILLING && w->fd >= 0 && !w->rd.eof) {
            if (n < cap)
                fds[n++] = (struct pollfd){.fd = w->fd, .events = POLLIN};
            else
                full = 1;
        }
        if (w->rd.eof && !w->gone && (!until || w->eof_ns + EOF_GRACE_NS < until))
            until = w->eof_ns + EOF_GRACE_NS;
        if (!w->gone || g->ph == PH_KILLING) {
            if (w->pidfd >= 0 && !w->gone) {
                if (n < cap)
                    fds[n++] = (struct pollfd){.fd = w->pidfd, .events = POLLIN};
                else
                    full = 1;
            } else {
                tick = 1;
            }
        }
    }
    int64_t ms = -1;
    if (until) {
        ms = (until - now + MS - 1) / MS;
        if (ms < 0)
            ms = 0;
        if (ms > INT32_MAX)
            ms = INT32_MAX;
    }
    if ((tick || full) && (ms < 0 || ms > TICK_MS))
        ms = TICK_MS;
    *timeout_ms = (int)ms;
    return n;
}

int kv_group_step(kv_group *g, kv_job_result *res, kv_err *err)
{
    (void)err; /* failures of workers are results or states, not errors */
    if (g->have_result)
        return take_result(g, res);
    int64_t now;
    switch (g->ph) {
    case PH_STARTING:
    case PH_IDLE:
    case PH_BUSY:
        for (int r = 0; r < g->o.world; r++) {
            enum phase ph = g->ph;
            pump(g, r);
            if (g->ph != ph)
                break;
        }
        if (g->ph == PH_STARTING || g->ph == PH_IDLE || g->ph == PH_BUSY)
            watch_exits(g);
        now = kv_monotonic_ns();
        if (g->ph == PH_STARTING) {
            step_starting(g, now);
        } else if (g->ph == PH_BUSY) {
            step_busy(g, now);
        } else if (g->ph == PH_IDLE) {
            for (int r = 0; r < g->o.world; r++) {
                if (has_left(&g->w[r], now)) {
                    char how[96];
                    describe_end(&g->w[r], how, sizeof how);
                    fail(g, KV_VERDICT_CRASH, r, "rank %d %s", r, how);
                    break;
                }
            }
        }
        break;
    case PH_STOPPING: {
        for (int r = 0; r < g->o.world; r++)
            pump(g, r); /* drained and ignored */
        watch_exits(g);
        int all = 1;
        for (int r = 0; r < g->o.world; r++)
            if (!g->w[r].gone)
                all = 0;
        if (all || kv_monotonic_ns() >= g->until_ns)
            start_kill(g, PH_STARTING);
        break;
    }
    case PH_KILLING:
        advance_kill(g);
        break;
    case PH_NONE:
    case PH_DEAD:
        if (any_process(g)) /* processes a kill left behind */
            advance_kill(g);
        break;
    }
    if (g->have_result)
        return take_result(g, res);
    return 0;
}

/* One round of the synchronous helpers: poll what the group waits on. */
static int wait_round(kv_group *g, kv_err *err)
{
    struct pollfd fds[KV_GROUP_MAX_POLLFDS];
    int timeout;
    int n = kv_group_pollfds(g, fds, KV_GROUP_MAX_POLLFDS, &timeout);
    if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
        return kv_err_errno(err, errno, "group %d: poll", g->o.group_index);
    return 0;
}

int kv_group_wait_ready(kv_group *g, kv_err *err)
{
    for (;;) {
        kv_group_state st = kv_group_get_state(g);
        if (st == KV_GROUP_IDLE)
            return 0;
        if (st == KV_GROUP_DEAD)
            return kv_err_set(err, "%s", g->error);
        if (st == KV_GROUP_BUSY)
            return kv_err_set(err, "group %d: busy with a job", g->o.group_index);
        if (wait_round(g, err) != 0)
            return -1;
        if (kv_group_step(g, NULL, err) < 0)
            return -1;
    }
}

int kv_group_run(kv_group *g, const kv_job *job, double deadline_s, kv_job_result *res,
                 kv_err *err)
{
    if (kv_group_wait_ready(g, err) != 0)
        return -1;
    if (kv_group_submit(g, job, deadline_s, err) != 0)
        return -1;
    for (;;) {
        int rc = kv_group_step(g, res, err);
        if (rc != 0)
            return rc > 0 ? 0 : -1;
        if (wait_round(g, err) != 0)
            return -1;
    }
}

double kv_group_last_restart_s(const kv_group *g)
{
    return g->last_restart_s;
}

const char *kv_group_last_error(const kv_group *g)
{
    return g->error;
}
