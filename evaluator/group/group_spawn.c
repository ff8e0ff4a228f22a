/* group_spawn.c — the processes of a group: starting the workers (a
 * socketpair each, its fd 3; stdin from /dev/null, stdout and stderr to
 * its log; one process group; default signal handling; a pidfd where the
 * kernel has pidfd_open), and killing and reaping them all.
 *
 * Termination is seen with waitid(WNOWAIT) (group_watch.c) and the process
 * is reaped only here, after the kill of its process group: a pid we have
 * not reaped cannot be reused, so kill(-pgid) never reaches a stranger. */
#include "evaluator/group/group_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define KILL_LIMIT_NS (30 * SEC) /* SIGKILL sent: a process still alive after this is stuck */

int kv_grp_any_process(const kv_group *g)
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

static void child_exec(int sock, int logfd, int nullfd, pid_t pgid, pid_t parent,
                       char *const argv[], long maxfd, const kv_sandbox *sb, int rank)
{
    /* a worker never outlives its supervisor: a SIGKILLed kevo run must not
     * leave workers spinning in a hung kernel on the GPUs it held */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        child_fail(logfd, "prctl PR_SET_PDEATHSIG", NULL, errno);
    if (getppid() != parent) /* the supervisor died before prctl took effect */
        _exit(127);
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
    /* confinement (sandbox.h): while the Landlock rulesets' fds are open */
    const char *what = "";
    int e = kv_sandbox_enter(sb, rank, &what);
    if (e != 0)
        child_fail(2, "confining the worker:", what, e);
    /* a change of uid clears the parent-death signal: ask again */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        child_fail(2, "prctl PR_SET_PDEATHSIG", NULL, errno);
    if (getppid() != parent)
        _exit(127);
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
    execve(argv[0], argv, kv_sandbox_envp(sb, rank));
    child_fail(2, "exec", argv[0], errno);
}

void kv_grp_close_fd(int *fd)
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
    char worker_path[PATH_MAX];
    snprintf(worker_path, sizeof worker_path, "%s", kv_sandbox_worker_path(g->sb));
    char *const argv[] = {worker_path, "--rank", a_rank,    "--world", a_world,
                          "--device",  a_dev,    "--group", a_group,   NULL};
    long maxfd = sysconf(_SC_OPEN_MAX);
    if (maxfd < 0 || maxfd > 65536)
        maxfd = 65536;

    char log_path[PATH_MAX];
    if ((size_t)snprintf(log_path, sizeof log_path, "%s/worker-%d-%d.log", g->o.log_dir,
                         g->o.group_index, r) >= sizeof log_path)
        return kv_err_set(err, "log path in %s: too long", g->o.log_dir);
    char when[32], mark[160];
    kv_format_utc(kv_wall_ns(), when, sizeof when);
    snprintf(mark, sizeof mark, "--- kevo: group %d rank %d (world %d, device %d) starts %s ---\n",
             g->o.group_index, r, g->o.world, g->o.devices[r], when);
    int logfd;
    if (kv_out_start(&w->out, log_path, g->o.output_cap_bytes, g->o.log_max_bytes, mark, &logfd,
                     err) != 0)
        return -1;
    if (kv_sandbox_prepare_rank(g->sb, r, err) != 0) {
        close(logfd);
        return -1;
    }
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
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child_exec(sv[1], logfd, nullfd, g->pgid, parent, argv, maxfd, g->sb, r);
    int e = errno;
    close(sv[1]);
    close(logfd);
    close(nullfd);
    if (pid < 0) {
        close(sv[0]);
        return kv_err_errno(err, e, "fork %s", worker_path);
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

void kv_grp_reset_worker(worker *w)
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
    kv_out_close(&w->out);
    kv_grp_close_fd(&w->fd);
    kv_grp_close_fd(&w->pidfd);
    kv_line_reader_free(&w->rd);
    kv_grp_reset_worker(w);
}

/* Kills and reaps what kv_grp_spawn_all started before it failed: these processes
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

int kv_grp_spawn_all(kv_group *g, kv_err *err)
{
    for (int r = 0; r < g->o.world; r++)
        kv_grp_reset_worker(&g->w[r]);
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

/* ---- killing -------------------------------------------------------------------------------- */

/* SIGKILL to the process group and to every worker (one may have left the
 * group); the reaping follows in kv_grp_advance_kill. */
void kv_grp_start_kill(kv_group *g, enum phase then)
{
    if (kv_grp_any_process(g)) {
        /* Failures here are ESRCH (all dead already; an unreaped worker
         * keeps its pid and the group's id from being reused); the reaping
         * in kv_grp_advance_kill is what makes sure. */
        if (g->pgid > 0)
            kill(-g->pgid, SIGKILL);
        for (int r = 0; r < g->o.world; r++)
            if (g->w[r].pid > 0)
                kill(g->w[r].pid, SIGKILL);
    }
    kv_sandbox_kill_all(g->sb); /* what left the process group (setsid) */
    g->ph = PH_KILLING;
    g->then = then;
    g->until_ns = kv_monotonic_ns() + KILL_LIMIT_NS;
    kv_grp_advance_kill(g);
}

/* Reaps the killed workers; once all are, closes everything and starts the
 * group again (or leaves it DEAD). */
void kv_grp_advance_kill(kv_group *g)
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
        kv_grp_close_fd(&w->pidfd);
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
        if (kv_grp_spawn_all(g, &e) != 0)
            snprintf(g->error, sizeof g->error, "%s", e.msg);
    } else {
        g->ph = PH_DEAD;
    }
}

void kv_grp_kill_now(kv_group *g)
{
    if (kv_grp_any_process(g)) {
        if (g->pgid > 0)
            kill(-g->pgid, SIGKILL);
        for (int r = 0; r < g->o.world; r++)
            if (g->w[r].pid > 0)
                kill(g->w[r].pid, SIGKILL);
        kv_sandbox_kill_all(g->sb);
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
}
