/* toolchain.c — the CUDA toolchain as kevo runs it: finding nvcc, cuobjdump
 * and NCCL, `nvcc --version`, and child processes started in their own
 * process groups with their output captured through a non-blocking pipe
 * (never blocking the caller; a whole group can be killed at a deadline). */
#define _GNU_SOURCE /* pipe2 */
#include "evaluator/compile/compile_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/syscall_filter.h"
#include "evaluator/confine/landlock.h"

#define OUT_CAP (4u << 20)     /* most bytes of a child's output kept */
#define VERSION_TIMEOUT_S 30.0 /* for `nvcc --version` */

/* ---- finding the tools ------------------------------------------------------ */

int kv_compile_find_on_path(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path)
        return -1;
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        if (n > 0 && n + 1 + strlen(name) < cap) {
            memcpy(out, path, n);
            out[n] = '/';
            strcpy(out + n + 1, name);
            if (kv_compile_is_exec_file(out))
                return 0;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return -1;
}

void kv_compile_find_nvcc(char *out, size_t cap)
{
    const char *env = getenv("KEVO_NVCC");
    if (env && *env && kv_compile_copy_str(out, cap, env) == 0)
        return;
    if (kv_compile_find_on_path("nvcc", out, cap) == 0)
        return;
    (void)kv_compile_copy_str(out, cap, "/usr/local/cuda/bin/nvcc");
}

/* cuobjdump: $KEVO_CUOBJDUMP, next to nvcc (as named, then with links
 * resolved), $PATH, /usr/local/cuda/bin. */
int kv_compile_find_cuobjdump(const char *nvcc, char *out, size_t cap)
{
    const char *env = getenv("KEVO_CUOBJDUMP");
    if (env && *env)
        return kv_compile_copy_str(out, cap, env);
    char real[PATH_MAX];
    const char *cands[2] = {nvcc, realpath(nvcc, real) ? real : NULL};
    for (int i = 0; i < 2; i++) {
        const char *slash = cands[i] ? strrchr(cands[i], '/') : NULL;
        if (!slash)
            continue;
        if ((size_t)(slash - cands[i]) + sizeof "/cuobjdump" > cap)
            continue;
        memcpy(out, cands[i], (size_t)(slash - cands[i]));
        strcpy(out + (slash - cands[i]), "/cuobjdump");
        if (kv_compile_is_exec_file(out))
            return 0;
    }
    if (kv_compile_find_on_path("cuobjdump", out, cap) == 0)
        return 0;
    if (kv_compile_copy_str(out, cap, "/usr/local/cuda/bin/cuobjdump") == 0 &&
        kv_compile_is_exec_file(out))
        return 0;
    out[0] = '\0';
    return -1;
}

/* The directory holding libnccl.so: $NCCL_HOME/lib{,64}, the system's, the
 * CUDA toolkit's (/usr/local/cuda, then the one nvcc belongs to); "" when
 * none has it (the linker's own search path is left to try). */
void kv_compile_find_nccl_libdir(const char *nvcc, char *out, size_t cap)
{
    const char *home = getenv("NCCL_HOME");
    char real[PATH_MAX], tk[PATH_MAX] = "";
    /* <toolkit>/bin/nvcc -> <toolkit> */
    if (realpath(nvcc, real)) {
        char *slash = strrchr(real, '/');
        if (slash) {
            *slash = '\0';
            slash = strrchr(real, '/');
            if (slash && strcmp(slash, "/bin") == 0) {
                *slash = '\0';
                (void)kv_compile_copy_str(tk, sizeof tk, real);
            }
        }
    }
    const char *const dirs[][2] = {
        {home, "/lib"},
        {home, "/lib64"},
        {"/usr/lib/x86_64-linux-gnu", ""},
        {"/usr/local/cuda/lib64", ""},
        {"/usr/local/cuda/lib", ""},
        {tk, "/lib64"},
        {tk, "/lib"},
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char dir[PATH_MAX], so[PATH_MAX];
        if (!dirs[i][0] || !*dirs[i][0])
            continue;
        int n = snprintf(dir, sizeof dir, "%s%s", dirs[i][0], dirs[i][1]);
        if (n < 0 || (size_t)n >= sizeof dir)
            continue;
        n = snprintf(so, sizeof so, "%s/libnccl.so", dir);
        if (n < 0 || (size_t)n >= sizeof so)
            continue;
        if (access(so, R_OK) == 0 && kv_compile_copy_str(out, cap, dir) == 0)
            return;
    }
    out[0] = '\0';
}

/* ---- child processes ---------------------------------------------------------- */

void kv_compile_child_init(kv_compile_child *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->out.limit = OUT_CAP;
}

char **kv_compile_env_with_tmpdir(const char *tmpdir)
{
    size_t len = strlen(tmpdir) + sizeof "TMPDIR=";
    char *tmp = malloc(len), *home = malloc(len);
    char **env = NULL;
    if (tmp && home) {
        snprintf(tmp, len, "TMPDIR=%s", tmpdir);
        snprintf(home, len, "HOME=%s", tmpdir);
        const char *extra[] = {tmp, home, NULL};
        env = kv_env_allowed_copy(extra);
    }
    free(tmp);
    free(home);
    return env;
}

/* In the child: the memory bound, no_new_privs, the ruleset, the filter.
 * 0, or -1 with *what and errno set; async-signal-safe. */
static int confine_child(int ruleset, size_t mem_max, const char **what)
{
    int e;
    *what = "setrlimit(RLIMIT_AS)";
    struct rlimit as = {.rlim_cur = (rlim_t)mem_max, .rlim_max = (rlim_t)mem_max};
    if (mem_max > 0 && setrlimit(RLIMIT_AS, &as) != 0)
        return -1;
    *what = "prctl(PR_SET_NO_NEW_PRIVS)";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    *what = "landlock_restrict_self";
    if (ruleset >= 0 && (e = kv_ll_restrict(ruleset)) != 0) {
        errno = e;
        return -1;
    }
    *what = "the system-call filter";
    e = kv_syscall_filter_install(KV_FILTER_SANDBOX | KV_FILTER_NO_NET);
    if (e != 0 && e != ENOSYS) {
        errno = e;
        return -1;
    }
    return 0;
}

/* Writes "kevo-exec-failed: errno N\n" with async-signal-safe calls only. */
static void child_report_exec_failure(int e)
{
    char msg[64] = KVC_EXEC_FAILED;
    size_t n = strlen(msg);
    char digits[16];
    int d = 0;
    unsigned v = e > 0 ? (unsigned)e : 0;
    do {
        digits[d++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && d < (int)sizeof digits);
    while (d > 0)
        msg[n++] = digits[--d];
    msg[n++] = '\n';
    (void)!write(2, msg, n);
}

/* Starts argv[0] (no shell, no PATH search) in its own process group, with
 * cwd as working directory, the environment env (NULL: the allowed part of
 * ours), stdout to out_fd (or to the pipe when -1) and stderr to the pipe;
 * confined (compile_internal.h). */
int kv_compile_child_spawn(kv_compile_child *c, char *const argv[], const char *cwd,
                           char *const env[], int out_fd, int ruleset, size_t mem_max, kv_err *err)
{
    int p[2];
    kv_compile_child_init(c);
    char **own_env = NULL;
    if (!env && !(env = own_env = kv_env_allowed_copy(NULL)))
        return kv_err_set(err, "out of memory");
    if (pipe2(p, O_CLOEXEC) != 0) {
        kv_env_free(own_env);
        return kv_err_errno(err, errno, "pipe for %s", argv[0]);
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        kv_env_free(own_env);
        return kv_err_errno(err, e, "fork for %s", argv[0]);
    }
    if (pid == 0) {
        /* the child: only async-signal-safe calls from here on */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (setpgid(0, 0) != 0)
            _exit(126);
        if (dup2(out_fd >= 0 ? out_fd : p[1], 1) < 0 || dup2(p[1], 2) < 0)
            _exit(126);
        int nul = open("/dev/null", O_RDONLY);
        if (nul < 0 || dup2(nul, 0) < 0)
            _exit(126);
        const char *what;
        if (confine_child(ruleset, mem_max, &what) != 0) {
            static const char msg[] = "kevo: cannot confine the tool: ";
            (void)!write(2, msg, sizeof msg - 1);
            (void)!write(2, what, strlen(what));
            (void)!write(2, "\n", 1);
            _exit(126);
        }
        /* no descriptor of the coordinator (archive, sockets) reaches the tool */
        (void)close_range(3, ~0u, 0);
        if (cwd && chdir(cwd) != 0) {
            static const char msg[] = "kevo: cannot enter the compile directory\n";
            (void)!write(2, msg, sizeof msg - 1);
            _exit(126);
        }
        execve(argv[0], argv, env);
        /* the parent recognises this line (with status 127): the tool could not be run */
        child_report_exec_failure(errno);
        _exit(127);
    }
    kv_env_free(own_env);
    /* both sides set the group, so that a kill right after fork finds it */
    if (setpgid(pid, pid) != 0 && errno != EACCES && errno != ESRCH) {
        int e = errno;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        close(p[0]);
        close(p[1]);
        return kv_err_errno(err, e, "setpgid for %s", argv[0]);
    }
    close(p[1]);
    int fl = fcntl(p[0], F_GETFL);
    if (fl < 0 || fcntl(p[0], F_SETFL, fl | O_NONBLOCK) != 0) {
        int e = errno;
        kill(-pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        close(p[0]);
        return kv_err_errno(err, e, "fcntl O_NONBLOCK for %s", argv[0]);
    }
    c->pid = pid;
    c->fd = p[0];
    return 0;
}

/* Reads what is available; closes the pipe at EOF. -1 on a read error
 * (the pipe is closed then too) or when out of memory. */
int kv_compile_child_drain(kv_compile_child *c)
{
    char tmp[16384];
    while (c->fd >= 0) {
        ssize_t r = read(c->fd, tmp, sizeof tmp);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            close(c->fd);
            c->fd = -1;
            return -1;
        }
        if (r == 0) {
            close(c->fd);
            c->fd = -1;
            return 0;
        }
        kv_sb_put(&c->out, tmp, (size_t)r); /* cut at OUT_CAP (the limit) */
        if (c->out.oom)
            return -1;
    }
    return 0;
}

/* Non-blocking reap; 1 once the child has exited, 0 while it runs, -1 on error. */
int kv_compile_child_reap(kv_compile_child *c)
{
    if (c->exited)
        return 1;
    for (;;) {
        pid_t r = waitpid(c->pid, &c->status, WNOHANG);
        if (r == c->pid) {
            c->exited = 1;
            return 1;
        }
        if (r == 0)
            return 0;
        if (errno == EINTR)
            continue;
        return -1;
    }
}

/* Kills the whole process group of a child still running and reaps it;
 * closes the pipe. (Once the leader is reaped its pid, the group id, may be
 * reused: the group is never signalled after that.) */
void kv_compile_child_kill(kv_compile_child *c)
{
    if (c->pid > 0 && !c->exited) {
        if (kill(-c->pid, SIGKILL) != 0)
            (void)kill(c->pid, SIGKILL);
        while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
            ;
        c->exited = 1;
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

void kv_compile_child_free(kv_compile_child *c)
{
    kv_compile_child_kill(c);
    kv_sb_free(&c->out);
    c->pid = 0;
}

int kv_compile_run_capture(char *const argv[], char *const env[], double timeout_s, char **out,
                           int *status, int *timed_out, kv_err *err)
{
    kv_compile_child c;
    if (kv_compile_child_spawn(&c, argv, NULL, env, -1, -1, KV_COMPILE_MEM_MAX, err) != 0)
        return -1;
    int64_t deadline = kv_monotonic_ns() + (int64_t)(timeout_s * 1e9);
    *timed_out = 0;
    for (;;) {
        if (kv_compile_child_drain(&c) != 0) {
            kv_compile_child_free(&c);
            return kv_err_set(err, "reading the output of %s failed", argv[0]);
        }
        int r = kv_compile_child_reap(&c);
        if (r < 0) {
            int e = errno;
            kv_compile_child_free(&c);
            return kv_err_errno(err, e, "waitpid %s", argv[0]);
        }
        if (r == 1) {
            (void)kv_compile_child_drain(&c); /* a grandchild may hold the pipe: no more waiting */
            break;
        }
        int64_t left = deadline - kv_monotonic_ns();
        if (left <= 0) {
            *timed_out = 1;
            kv_compile_child_kill(&c);
            break;
        }
        int ms = (int)(left / 1000000) + 1;
        if (c.fd >= 0) {
            struct pollfd pfd = {.fd = c.fd, .events = POLLIN};
            if (poll(&pfd, 1, ms > 50 ? 50 : ms) < 0 && errno != EINTR) {
                int e = errno;
                kv_compile_child_free(&c);
                return kv_err_errno(err, e, "poll");
            }
        } else {
            usleep(ms > 5 ? 5000 : (useconds_t)ms * 1000); /* output closed, not yet reaped */
        }
    }
    *status = c.status;
    *out = kv_sb_take(&c.out); /* NULL: out of memory */
    c.pid = 0;
    kv_compile_child_free(&c);
    if (!*out)
        return kv_err_set(err, "out of memory");
    return 0;
}

/* ---- nvcc --version ------------------------------------------------------------ */

/* `nvcc --version`, run once per process and nvcc path. */
static struct {
    char path[PATH_MAX];
    char *text;
} version_cache;

int kv_compile_nvcc_version(const char *nvcc, const char **text, kv_err *err)
{
    if (version_cache.text && strcmp(version_cache.path, nvcc) == 0) {
        *text = version_cache.text;
        return 0;
    }
    if (!kv_compile_is_exec_file(nvcc))
        return kv_err_set(err, "cannot run nvcc %s: %s", nvcc,
                          access(nvcc, F_OK) == 0 ? "not an executable file"
                                                  : "No such file or directory");
    char *argv[] = {(char *)nvcc, "--version", NULL};
    char *out = NULL;
    int status = 0, timed_out = 0;
    if (kv_compile_run_capture(argv, NULL, VERSION_TIMEOUT_S, &out, &status, &timed_out, err) != 0)
        return kv_err_prefix(err, "cannot run nvcc %s", nvcc);
    if (timed_out) {
        free(out);
        return kv_err_set(err, "cannot run nvcc %s: `--version` did not finish in %.0f s", nvcc,
                          VERSION_TIMEOUT_S);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        kv_err_set(err, "cannot run nvcc %s: `--version` failed (%s %d): %.200s", nvcc,
                   WIFEXITED(status) ? "exit status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
        free(out);
        return -1;
    }
    free(version_cache.text);
    version_cache.text = out;
    (void)kv_compile_copy_str(version_cache.path, sizeof version_cache.path, nvcc);
    *text = out;
    return 0;
}
