/* compile.c — candidate sources to shared objects through nvcc, a
 * content-addressed cache and a pool of concurrent compilations.
 *
 * One compilation is a small pipeline of child processes, each in its own
 * process group, run in a private temporary directory under the cache:
 *
 *   nvcc ... candidate.cu -o cand.so     stdout+stderr -> pipe (report.txt)
 *   cuobjdump -sass cand.so              stdout -> cand.sass, stderr -> pipe
 *   cuobjdump -ptx cand.so               stdout -> cand.ptx,  stderr -> pipe
 *
 * then the undefined dynamic symbols are read from cand.so's .dynsym
 * (imports.txt), every file is fsync'ed and the directory is renamed to
 * <cache>/<key>: an entry is either complete or absent. The pool never blocks
 * on a child: kv_compile_poll reaps with WNOHANG and drains non-blocking
 * pipes, and a compilation past its deadline has its whole process group
 * killed with SIGKILL. */
#define _GNU_SOURCE /* pipe2 */
#include "evaluator/compile.h"

#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kevo/clock.h"
#include "kevo/fsutil.h"

#define OUT_CAP (4u << 20)      /* most bytes of a child's output kept */
#define MAX_FLAGS 32
#define TRIM_LINES 40
#define VERSION_TIMEOUT_S 30.0  /* for `nvcc --version` */

/* ---- growable byte buffer ------------------------------------------------ */

typedef struct {
    char *p;
    size_t len, cap;
} buf;

static int buf_add(buf *b, const void *data, size_t n)
{
    if (n > SIZE_MAX / 4)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static int buf_str(buf *b, const char *s)
{
    return buf_add(b, s, strlen(s));
}

/* Takes the contents as a NUL-terminated string ("" when empty). */
static char *buf_take(buf *b)
{
    if (!b->p && buf_add(b, "", 0) != 0)
        return NULL;
    char *p = b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

static void buf_free(buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- small file-system helpers ------------------------------------------- */

static int is_exec_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int copy_str(char *out, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap)
        return -1;
    memcpy(out, s, n + 1);
    return 0;
}

/* Finds an executable on $PATH; 0 and its path in out, or -1. */
static int find_on_path(const char *name, char *out, size_t cap)
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
            if (is_exec_file(out))
                return 0;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return -1;
}

/* Removes a file or a directory tree (no symlinks followed). Best effort:
 * returns 0 or -1 with errno of the first failure. */
static int rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int rc = 0, saved = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char sub[PATH_MAX];
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) >= sizeof sub) {
            rc = -1;
            saved = ENAMETOOLONG;
            continue;
        }
        if (rm_rf(sub) != 0 && rc == 0) {
            rc = -1;
            saved = errno;
        }
    }
    if (closedir(d) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rmdir(path) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc != 0)
        errno = saved;
    return rc;
}

static int fsync_path(const char *path, int dir, kv_err *err)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s", path);
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        return kv_err_errno(err, e, "fsync %s", path);
    }
    if (close(fd) != 0)
        return kv_err_errno(err, errno, "close %s", path);
    return 0;
}

/* Writes a whole file (not atomically: it lives in a private temporary
 * directory that is renamed into place as a whole). */
static int write_file(const char *path, const void *data, size_t len, kv_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return kv_err_errno(err, errno, "open %s", path);
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return kv_err_errno(err, e, "write %s", path);
        }
        p += w;
        len -= (size_t)w;
    }
    if (close(fd) != 0)
        return kv_err_errno(err, errno, "close %s", path);
    return 0;
}

/* ---- defaults --------------------------------------------------------------- */

static void find_nvcc(char *out, size_t cap)
{
    const char *env = getenv("KEVO_NVCC");
    if (env && *env && copy_str(out, cap, env) == 0)
        return;
    if (find_on_path("nvcc", out, cap) == 0)
        return;
    (void)copy_str(out, cap, "/usr/local/cuda/bin/nvcc");
}

void kv_compile_defaults(kv_compile_opts *o, const char *source_root)
{
    memset(o, 0, sizeof *o);
    find_nvcc(o->nvcc, sizeof o->nvcc);

    const char *arch = getenv("KEVO_CUDA_ARCH");
    if (!arch || !*arch || copy_str(o->arch, sizeof o->arch, arch) != 0)
        (void)copy_str(o->arch, sizeof o->arch, "sm_90a");

    const char *root = source_root && *source_root ? source_root : ".";
    char abs_root[PATH_MAX];
    if (realpath(root, abs_root))
        root = abs_root;
    (void)kv_path_join(o->include_dir, sizeof o->include_dir, root, "include", NULL);
    (void)kv_path_join(o->patterns_dir, sizeof o->patterns_dir, root, "patterns", NULL);

    const char *env = getenv("KEVO_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (env && *env)
        (void)copy_str(o->cache_dir, sizeof o->cache_dir, env);
    else if (xdg && *xdg)
        (void)kv_path_join(o->cache_dir, sizeof o->cache_dir, xdg, "kevo", NULL);
    else if (home && *home)
        (void)snprintf(o->cache_dir, sizeof o->cache_dir, "%s/.cache/kevo", home);
    else
        (void)copy_str(o->cache_dir, sizeof o->cache_dir, "/tmp/kevo-cache");
    o->timeout_s = 120.0;
    o->jobs = 0;
}

/* cuobjdump: $KEVO_CUOBJDUMP, next to nvcc (as named, then with links
 * resolved), $PATH, /usr/local/cuda/bin. */
static int find_cuobjdump(const char *nvcc, char *out, size_t cap)
{
    const char *env = getenv("KEVO_CUOBJDUMP");
    if (env && *env)
        return copy_str(out, cap, env);
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
        if (is_exec_file(out))
            return 0;
    }
    if (find_on_path("cuobjdump", out, cap) == 0)
        return 0;
    if (copy_str(out, cap, "/usr/local/cuda/bin/cuobjdump") == 0 && is_exec_file(out))
        return 0;
    out[0] = '\0';
    return -1;
}

/* The directory holding libnccl.so: $NCCL_HOME/lib{,64}, the system's, the
 * CUDA toolkit's (/usr/local/cuda, then the one nvcc belongs to); "" when
 * none has it (the linker's own search path is left to try). */
static void find_nccl_libdir(const char *nvcc, char *out, size_t cap)
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
                (void)copy_str(tk, sizeof tk, real);
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
        if (access(so, R_OK) == 0 && copy_str(out, cap, dir) == 0)
            return;
    }
    out[0] = '\0';
}

/* ---- child processes ---------------------------------------------------------- */

typedef struct {
    pid_t pid;     /* 0 when none; also the process group id */
    int fd;        /* read end of the output pipe, -1 once at EOF */
    buf out;       /* what it wrote (capped at OUT_CAP) */
    int exited;    /* waitpid reported it */
    int status;    /* waitpid status */
} child;

static void child_init(child *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

extern char **environ;

/* A copy of the environment with TMPDIR set to tmpdir (so that the files a
 * killed nvcc leaves behind go with its compile directory). The strings
 * are shared with environ except the last one. Free with env_free. */
static char **env_with_tmpdir(const char *tmpdir)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = malloc((n + 2) * sizeof *env);
    size_t len = strlen(tmpdir) + sizeof "TMPDIR=";
    char *var = malloc(len);
    if (!env || !var) {
        free(env);
        free(var);
        return NULL;
    }
    snprintf(var, len, "TMPDIR=%s", tmpdir);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TMPDIR=", 7) != 0)
            env[k++] = environ[i];
    env[k++] = var;
    env[k] = NULL;
    return env;
}

static void env_free(char **env)
{
    if (!env)
        return;
    size_t k = 0;
    while (env[k])
        k++;
    free(env[k - 1]); /* ours, the others belong to environ */
    free(env);
}

/* Writes "kevo-exec-failed: errno N\n" with async-signal-safe calls only. */
static void child_report_exec_failure(int e)
{
    char msg[64] = "kevo-exec-failed: errno ";
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
 * cwd as working directory, the environment env (NULL: ours), stdout to
 * out_fd (or to the pipe when -1) and stderr to the pipe. */
static int child_spawn(child *c, char *const argv[], const char *cwd, char *const env[],
                       int out_fd, kv_err *err)
{
    int p[2];
    child_init(c);
    if (pipe2(p, O_CLOEXEC) != 0)
        return kv_err_errno(err, errno, "pipe for %s", argv[0]);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
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
        /* no descriptor of the coordinator (archive, sockets) reaches the tool */
        (void)close_range(3, ~0u, 0);
        if (cwd && chdir(cwd) != 0) {
            static const char msg[] = "kevo: cannot enter the compile directory\n";
            (void)!write(2, msg, sizeof msg - 1);
            _exit(126);
        }
        execve(argv[0], argv, env ? env : environ);
        /* the parent recognises this line (with status 127): the tool could not be run */
        child_report_exec_failure(errno);
        _exit(127);
    }
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
static int child_drain(child *c)
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
        if (c->out.len < OUT_CAP) {
            size_t n = (size_t)r;
            if (c->out.len + n > OUT_CAP)
                n = OUT_CAP - c->out.len;
            if (buf_add(&c->out, tmp, n) != 0)
                return -1;
        }
    }
    return 0;
}

/* Non-blocking reap; 1 once the child has exited, 0 while it runs, -1 on error. */
static int child_reap(child *c)
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
static void child_kill(child *c)
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

static void child_free(child *c)
{
    child_kill(c);
    buf_free(&c->out);
    c->pid = 0;
}

/* Runs a command to completion with a deadline, capturing its output. */
static int run_capture(char *const argv[], double timeout_s, char **out, int *status,
                       int *timed_out, kv_err *err)
{
    child c;
    if (child_spawn(&c, argv, NULL, NULL, -1, err) != 0)
        return -1;
    int64_t deadline = kv_monotonic_ns() + (int64_t)(timeout_s * 1e9);
    *timed_out = 0;
    for (;;) {
        if (child_drain(&c) != 0) {
            child_free(&c);
            return kv_err_set(err, "reading the output of %s failed", argv[0]);
        }
        int r = child_reap(&c);
        if (r < 0) {
            int e = errno;
            child_free(&c);
            return kv_err_errno(err, e, "waitpid %s", argv[0]);
        }
        if (r == 1) {
            (void)child_drain(&c); /* a grandchild may hold the pipe: no more waiting */
            break;
        }
        int64_t left = deadline - kv_monotonic_ns();
        if (left <= 0) {
            *timed_out = 1;
            child_kill(&c);
            break;
        }
        int ms = (int)(left / 1000000) + 1;
        if (c.fd >= 0) {
            struct pollfd pfd = {.fd = c.fd, .events = POLLIN};
            if (poll(&pfd, 1, ms > 50 ? 50 : ms) < 0 && errno != EINTR) {
                int e = errno;
                child_free(&c);
                return kv_err_errno(err, e, "poll");
            }
        } else {
            usleep(ms > 5 ? 5000 : (useconds_t)ms * 1000); /* output closed, not yet reaped */
        }
    }
    *status = c.status;
    *out = buf_take(&c.out);
    c.pid = 0;
    child_free(&c);
    if (!*out)
        return kv_err_set(err, "out of memory");
    return 0;
}

/* `nvcc --version`, run once per process and nvcc path. */
static struct {
    char path[PATH_MAX];
    char *text;
} version_cache;

static int nvcc_version(const char *nvcc, const char **text, kv_err *err)
{
    if (version_cache.text && strcmp(version_cache.path, nvcc) == 0) {
        *text = version_cache.text;
        return 0;
    }
    if (!is_exec_file(nvcc))
        return kv_err_set(err, "cannot run nvcc %s: %s", nvcc,
                          access(nvcc, F_OK) == 0 ? "not an executable file"
                                                  : "No such file or directory");
    char *argv[] = {(char *)nvcc, "--version", NULL};
    char *out = NULL;
    int status = 0, timed_out = 0;
    if (run_capture(argv, VERSION_TIMEOUT_S, &out, &status, &timed_out, err) != 0)
        return kv_err_prefix(err, "cannot run nvcc %s", nvcc);
    if (timed_out) {
        free(out);
        return kv_err_set(err, "cannot run nvcc %s: `--version` did not finish in %.0f s",
                          nvcc, VERSION_TIMEOUT_S);
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
    (void)copy_str(version_cache.path, sizeof version_cache.path, nvcc);
    *text = out;
    return 0;
}

/* ---- the cache key --------------------------------------------------------- */

static void hash_field(kv_sha256_ctx *h, const char *tag, const void *data, size_t len)
{
    uint64_t n = len;
    kv_sha256_update(h, tag, strlen(tag) + 1);
    kv_sha256_update(h, &n, sizeof n);
    kv_sha256_update(h, data, len);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Collects the relative paths of every *.h / *.cuh under dir/rel. */
static int list_headers(const char *dir, const char *rel, char ***names, size_t *n, size_t *cap,
                        int depth, kv_err *err)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s%s%s", dir, *rel ? "/" : "", rel) >= sizeof path)
        return kv_err_errno(err, ENAMETOOLONG, "patterns %s/%s", dir, rel);
    DIR *d = opendir(path);
    if (!d)
        return kv_err_errno(err, errno, "opendir %s", path);
    struct dirent *de;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char sub[PATH_MAX], full[PATH_MAX];
        if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
                sizeof sub ||
            (size_t)snprintf(full, sizeof full, "%s/%s", dir, sub) >= sizeof full) {
            rc = kv_err_errno(err, ENAMETOOLONG, "patterns %s", de->d_name);
            break;
        }
        struct stat st;
        if (stat(full, &st) != 0) {
            rc = kv_err_errno(err, errno, "stat %s", full);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if (depth < 8)
                rc = list_headers(dir, sub, names, n, cap, depth + 1, err);
        } else if (S_ISREG(st.st_mode) && (has_suffix(sub, ".h") || has_suffix(sub, ".cuh"))) {
            if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 32;
                char **nn = realloc(*names, nc * sizeof *nn);
                if (!nn) {
                    rc = kv_err_set(err, "out of memory");
                    break;
                }
                *names = nn;
                *cap = nc;
            }
            if (!((*names)[*n] = strdup(sub))) {
                rc = kv_err_set(err, "out of memory");
                break;
            }
            (*n)++;
        }
        errno = 0;
    }
    if (rc == 0 && errno != 0)
        rc = kv_err_errno(err, errno, "readdir %s", path);
    if (closedir(d) != 0 && rc == 0)
        rc = kv_err_errno(err, errno, "closedir %s", path);
    return rc;
}

static int hash_patterns(kv_sha256_ctx *h, const char *dir, kv_err *err)
{
    if (!*dir || !is_dir(dir))
        return 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = list_headers(dir, "", &names, &n, &cap, 0, err);
    if (rc == 0 && n > 1)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char full[PATH_MAX];
        char *text = NULL;
        size_t len = 0;
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, names[i]) >= sizeof full) {
            rc = kv_err_errno(err, ENAMETOOLONG, "pattern %s/%s", dir, names[i]);
            break;
        }
        if (kv_read_file(full, &text, &len, err) != 0) {
            rc = -1;
            break;
        }
        hash_field(h, "pattern-name", names[i], strlen(names[i]));
        hash_field(h, "pattern", text, len);
        free(text);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* The ABI version as kernel.h defines it; -1 when it does not. */
static long abi_version_of(const char *text)
{
    const char *p = strstr(text, "#define KEVO_ABI_VERSION");
    if (!p)
        return -1;
    p += sizeof "#define KEVO_ABI_VERSION" - 1;
    char *end;
    long v = strtol(p, &end, 10);
    return end == p ? -1 : v;
}

/* ---- the pool's state ---------------------------------------------------------- */

enum { STEP_NVCC, STEP_SASS, STEP_PTX };

typedef struct task {
    struct task *next;
    char key[KV_SHA256_HEX_LEN];
    char *src;
    size_t len;
    uint64_t *tickets;
    int n_tickets, cap_tickets;
    int started;
    int step;
    child ch;
    char tmpdir[PATH_MAX];
    char *nvcc_out;          /* nvcc's output once it exited */
    int64_t start_ns, deadline_ns;
} task;

typedef struct ready {
    struct ready *next;
    uint64_t ticket;
    kv_compile_result r;
} ready;

struct kv_compile_pool {
    kv_compile_opts o;
    char cuobjdump[PATH_MAX];
    char *flags[MAX_FLAGS];
    int n_flags;
    int jobs;
    task *queued, *queued_tail; /* FIFO */
    task *running;
    int n_running;
    ready *ready_head, *ready_tail;
    int n_ready;
    uint64_t next_ticket;
};

void kv_compile_result_free(kv_compile_result *r)
{
    if (!r)
        return;
    free(r->errors);
    free(r->report);
    free(r->sass);
    free(r->ptx);
    free(r->imports);
    memset(r, 0, sizeof *r);
}

static int add_flag(kv_compile_pool *p, const char *fmt, const char *arg)
{
    if (p->n_flags >= MAX_FLAGS)
        return -1;
    char tmp[PATH_MAX + 64];
    if ((size_t)snprintf(tmp, sizeof tmp, fmt, arg) >= sizeof tmp)
        return -1;
    if (!(p->flags[p->n_flags] = strdup(tmp)))
        return -1;
    p->n_flags++;
    return 0;
}

/* "sm_90a" -> "arch=compute_90a,code=[sm_90a,compute_90a]" */
static int gencode_of(const char *arch, char *out, size_t cap)
{
    if (strncmp(arch, "sm_", 3) != 0 || !isdigit((unsigned char)arch[3]))
        return -1;
    for (const char *s = arch + 3; *s; s++)
        if (!isalnum((unsigned char)*s))
            return -1;
    const char *v = arch + 3;
    return (size_t)snprintf(out, cap, "arch=compute_%s,code=[sm_%s,compute_%s]", v, v, v) < cap
               ? 0
               : -1;
}

/* Removes temporary directories left by dead processes. */
static void clean_stale(const char *cache_dir)
{
    DIR *d = opendir(cache_dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, ".tmp-", 5) != 0)
            continue;
        char *end;
        long pid = strtol(de->d_name + 5, &end, 10);
        if (end == de->d_name + 5 || *end != '-' || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", cache_dir, de->d_name) < sizeof path)
            (void)rm_rf(path);
    }
    (void)closedir(d);
}

static void pool_free_flags(kv_compile_pool *p)
{
    for (int i = 0; i < p->n_flags; i++)
        free(p->flags[i]);
    p->n_flags = 0;
}

static int pool_new(const kv_compile_opts *o, int jobs, int clean, kv_compile_pool **out,
                    kv_err *err)
{
    *out = NULL;
    kv_compile_pool *p = calloc(1, sizeof *p);
    if (!p)
        return kv_err_set(err, "compile pool: out of memory");
    p->o = *o;
    if (!p->o.nvcc[0])
        find_nvcc(p->o.nvcc, sizeof p->o.nvcc);
    if (!p->o.arch[0])
        (void)copy_str(p->o.arch, sizeof p->o.arch, "sm_90a");
    if (p->o.timeout_s <= 0)
        p->o.timeout_s = 120.0;
    if (!p->o.cache_dir[0]) {
        free(p);
        return kv_err_set(err, "compile pool: no cache directory");
    }
    /* children run in the temporary directory: make the paths absolute */
    char abs[PATH_MAX];
    if (p->o.include_dir[0] && realpath(p->o.include_dir, abs))
        (void)copy_str(p->o.include_dir, sizeof p->o.include_dir, abs);
    if (p->o.patterns_dir[0] && realpath(p->o.patterns_dir, abs))
        (void)copy_str(p->o.patterns_dir, sizeof p->o.patterns_dir, abs);
    if (kv_mkdir_p(p->o.cache_dir, 0755, err) != 0) {
        free(p);
        return kv_err_prefix(err, "compile cache");
    }
    if (realpath(p->o.cache_dir, abs))
        (void)copy_str(p->o.cache_dir, sizeof p->o.cache_dir, abs);

    if (jobs <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = n > 0 ? (int)n : 1;
    }
    p->jobs = jobs;
    p->next_ticket = 1;
    (void)find_cuobjdump(p->o.nvcc, p->cuobjdump, sizeof p->cuobjdump);

    char gencode[128], nccl[PATH_MAX];
    if (gencode_of(p->o.arch, gencode, sizeof gencode) != 0) {
        free(p);
        return kv_err_set(err, "compile: bad CUDA architecture \"%s\" (want e.g. sm_90a)",
                          o->arch);
    }
    find_nccl_libdir(p->o.nvcc, nccl, sizeof nccl);
    static const char *const fixed[] = {"-O3",    "-std=c++17", "-shared",  "-Xcompiler",
                                        "-fPIC",  "-cudart",    "shared",   "-lineinfo",
                                        "-Xptxas", "-v",        "-gencode"};
    int bad = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        bad |= add_flag(p, "%s", fixed[i]);
    bad |= add_flag(p, "%s", gencode);
    if (p->o.include_dir[0])
        bad |= add_flag(p, "-I%s", p->o.include_dir);
    if (p->o.patterns_dir[0])
        bad |= add_flag(p, "-I%s", p->o.patterns_dir);
    if (nccl[0])
        bad |= add_flag(p, "-L%s", nccl);
    bad |= add_flag(p, "%s", "-lnccl");
    bad |= add_flag(p, "%s", "-lcublas");
    if (bad) {
        pool_free_flags(p);
        free(p);
        return kv_err_set(err, "compile pool: out of memory or path too long");
    }
    if (clean)
        clean_stale(p->o.cache_dir);
    *out = p;
    return 0;
}

int kv_compile_pool_new(const kv_compile_opts *o, kv_compile_pool **out, kv_err *err)
{
    return pool_new(o, o->jobs, 1, out, err);
}

static void task_free(task *t)
{
    if (!t)
        return;
    child_free(&t->ch);
    if (t->tmpdir[0])
        (void)rm_rf(t->tmpdir);
    free(t->src);
    free(t->tickets);
    free(t->nvcc_out);
    free(t);
}

static void ready_free_list(ready *r)
{
    while (r) {
        ready *n = r->next;
        kv_compile_result_free(&r->r);
        free(r);
        r = n;
    }
}

void kv_compile_pool_free(kv_compile_pool *p)
{
    if (!p)
        return;
    for (task *t = p->running, *n; t; t = n) {
        n = t->next;
        task_free(t);
    }
    for (task *t = p->queued, *n; t; t = n) {
        n = t->next;
        task_free(t);
    }
    ready_free_list(p->ready_head);
    pool_free_flags(p);
    free(p);
}

/* ---- results ------------------------------------------------------------------ */

static int push_ready(kv_compile_pool *p, uint64_t ticket, kv_compile_result *r)
{
    ready *e = calloc(1, sizeof *e);
    if (!e)
        return -1;
    e->ticket = ticket;
    e->r = *r;
    memset(r, 0, sizeof *r);
    if (p->ready_tail)
        p->ready_tail->next = e;
    else
        p->ready_head = e;
    p->ready_tail = e;
    p->n_ready++;
    return 0;
}

static char *dup_or_null(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = 1;
    return d;
}

static int result_copy(kv_compile_result *dst, const kv_compile_result *src)
{
    int oom = 0;
    *dst = *src;
    dst->errors = dup_or_null(src->errors, &oom);
    dst->report = dup_or_null(src->report, &oom);
    dst->sass = dup_or_null(src->sass, &oom);
    dst->ptx = dup_or_null(src->ptx, &oom);
    dst->imports = dup_or_null(src->imports, &oom);
    if (oom) {
        kv_compile_result_free(dst);
        return -1;
    }
    return 0;
}

/* A result with a message only (FAILED or TIMEOUT). */
static void result_message(kv_compile_result *r, kv_compile_status st, const char *msg)
{
    r->status = st;
    r->errors = strdup(msg);
}

/* Hands r to every ticket of t (the first gets r itself, the others copies
 * marked as served from the cache). */
static int deliver(kv_compile_pool *p, task *t, kv_compile_result *r)
{
    int rc = 0;
    for (int i = 1; i < t->n_tickets; i++) {
        kv_compile_result c;
        if (result_copy(&c, r) != 0) {
            memset(&c, 0, sizeof c);
            memcpy(c.key, r->key, sizeof c.key);
            result_message(&c, KV_COMPILE_FAILED, "out of memory");
        } else if (c.status == KV_COMPILE_OK) {
            c.cached = 1;
            c.seconds = 0;
        }
        if (push_ready(p, t->tickets[i], &c) != 0) {
            kv_compile_result_free(&c);
            rc = -1;
        }
    }
    if (push_ready(p, t->tickets[0], r) != 0) {
        kv_compile_result_free(r);
        rc = -1;
    }
    return rc;
}

/* ---- SASS normalisation -------------------------------------------------------- */

/* Appends the line [s, e) without its address comment, its encoding
 * comment and runs of blanks, when it is an instruction or a function header. */
static void sass_hash_line(kv_sha256_ctx *h, const char *s, const char *e)
{
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s == e)
        return;
    int keep = 0;
    if (((size_t)(e - s) > 10 && strncmp(s, "Function :", 10) == 0) ||
        ((size_t)(e - s) > 9 && strncmp(s, "code for ", 9) == 0)) {
        keep = 1;
    } else if (e - s >= 4 && s[0] == '/' && s[1] == '*') {
        /* an address comment, the instruction, an encoding comment; or a
         * lone encoding comment (the second word), which is dropped below */
        const char *q = s + 2;
        while (q < e && isxdigit((unsigned char)*q))
            q++;
        if (q + 1 < e && q > s + 2 && q[0] == '*' && q[1] == '/') {
            s = q + 2;
            keep = 1;
        }
    }
    if (!keep)
        return;
    /* drop a trailing encoding comment */
    for (const char *c = e - 2; c >= s; c--) {
        if (c[0] == '/' && c[1] == '*') {
            const char *q = c + 2;
            while (q < e && *q == ' ')
                q++;
            if (e - q > 2 && q[0] == '0' && q[1] == 'x')
                e = c;
            break;
        }
    }
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s == e)
        return;
    /* collapse blanks */
    char out[512];
    size_t n = 0;
    int blank = 0;
    for (; s < e; s++) {
        if (isspace((unsigned char)*s)) {
            blank = 1;
            continue;
        }
        if (blank && n > 0) {
            if (n == sizeof out) {
                kv_sha256_update(h, out, n);
                n = 0;
            }
            out[n++] = ' ';
        }
        blank = 0;
        if (n == sizeof out) {
            kv_sha256_update(h, out, n);
            n = 0;
        }
        out[n++] = *s;
    }
    kv_sha256_update(h, out, n);
    kv_sha256_update(h, "\n", 1);
}

static void sass_hash_of(const char *sass, char out[KV_SHA256_HEX_LEN])
{
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    const char *s = sass ? sass : "";
    while (*s) {
        const char *e = strchr(s, '\n');
        if (!e)
            e = s + strlen(s);
        sass_hash_line(&h, s, e);
        s = *e ? e + 1 : e;
    }
    uint8_t d[KV_SHA256_LEN];
    kv_sha256_final(&h, d);
    kv_sha256_hex(d, out);
}

/* ---- imports: the undefined symbols of the ELF .dynsym ------------------------------ */

static int read_imports(const char *so_path, char **out, kv_err *err)
{
    char *img = NULL;
    size_t len = 0;
    if (kv_read_file(so_path, &img, &len, err) != 0)
        return -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)img;
    if (len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff > len || eh->e_shoff % 8 != 0 || (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff) {
        free(img);
        return kv_err_set(err, "%s: not a 64-bit ELF shared object", so_path);
    }
    /* the buffer is malloc'ed, so aligned for every ELF structure */
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(const void *)(img + eh->e_shoff);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *sy = &sh[i], *st = &sh[sy->sh_link];
        if (sy->sh_offset > len || sy->sh_size > len - sy->sh_offset || st->sh_offset > len ||
            st->sh_size > len - st->sh_offset || sy->sh_offset % 8 != 0) {
            rc = kv_err_set(err, "%s: bad .dynsym section", so_path);
            break;
        }
        const Elf64_Sym *syms = (const Elf64_Sym *)(const void *)(img + sy->sh_offset);
        size_t count = sy->sh_size / sizeof(Elf64_Sym);
        const char *strs = img + st->sh_offset;
        for (size_t k = 1; k < count; k++) {
            if (syms[k].st_shndx != SHN_UNDEF || syms[k].st_name == 0 ||
                syms[k].st_name >= st->sh_size)
                continue;
            const char *nm = strs + syms[k].st_name;
            size_t max = st->sh_size - syms[k].st_name;
            size_t nl = strnlen(nm, max);
            if (nl == max || nl == 0)
                continue;
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                char **nn = realloc(names, nc * sizeof *nn);
                if (!nn) {
                    rc = kv_err_set(err, "out of memory");
                    break;
                }
                names = nn;
                cap = nc;
            }
            if (!(names[n] = strndup(nm, nl))) {
                rc = kv_err_set(err, "out of memory");
                break;
            }
            n++;
        }
    }
    free(img);
    buf b = {0};
    if (rc == 0) {
        if (n > 1)
            qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
                continue;
            if (buf_str(&b, names[i]) != 0 || buf_add(&b, "\n", 1) != 0)
                rc = kv_err_set(err, "out of memory");
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == 0 && !(*out = buf_take(&b)))
        rc = kv_err_set(err, "out of memory");
    buf_free(&b);
    return rc;
}

/* ---- error trimming ------------------------------------------------------------ */

static int is_head_line(const char *s, size_t n)
{
    static const char *const heads[] = {
        "): error",        "): catastrophic error", "ptxas error", "ptxas fatal",
        "nvlink error",    "nvlink fatal",          "undefined reference", "error:",
        "fatal error",     "kevo-exec-failed",      "nvcc fatal",
    };
    char line[1024];
    if (n >= sizeof line)
        n = sizeof line - 1;
    memcpy(line, s, n);
    line[n] = '\0';
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        if (strstr(line, heads[i]))
            return 2; /* an error */
    if (strstr(line, "candidate.cu(") && strstr(line, "): warning"))
        return 1;
    return 0;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

/* Replaces every occurrence of from by to. */
static char *replace_all(const char *text, const char *from, const char *to)
{
    buf b = {0};
    size_t fl = from ? strlen(from) : 0;
    if (fl == 0 || strcmp(from, to) == 0) {
        if (buf_str(&b, text) != 0) {
            buf_free(&b);
            return NULL;
        }
        return buf_take(&b);
    }
    const char *s = text, *q;
    while ((q = strstr(s, from)) != NULL) {
        if (buf_add(&b, s, (size_t)(q - s)) != 0 || buf_str(&b, to) != 0) {
            buf_free(&b);
            return NULL;
        }
        s = q + fl;
    }
    if (buf_str(&b, s) != 0) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b);
}

char *kv_compile_trim_errors(const char *nvcc_stderr, const char *src_path, int max_lines)
{
    if (max_lines <= 0)
        max_lines = TRIM_LINES;
    char *text = replace_all(nvcc_stderr ? nvcc_stderr : "", src_path, "candidate.cu");
    if (!text)
        return NULL;
    buf b = {0};
    int lines = 0, more = 0, oom = 0;
    const char *s = text;
    while (*s && !oom) {
        const char *e = strchr(s, '\n');
        if (!e)
            e = s + strlen(s);
        const char *next = *e ? e + 1 : e;
        if (!is_head_line(s, (size_t)(e - s))) {
            s = next;
            continue;
        }
        if (lines >= max_lines) {
            more++;
            s = next;
            continue;
        }
        oom |= buf_add(&b, s, (size_t)(e - s)) != 0 || buf_add(&b, "\n", 1) != 0;
        lines++;
        /* up to two lines of context: the source line and the caret */
        s = next;
        for (int k = 0; k < 2 && *s && lines < max_lines; k++) {
            e = strchr(s, '\n');
            if (!e)
                e = s + strlen(s);
            if (is_blank(s, (size_t)(e - s)) || is_head_line(s, (size_t)(e - s)))
                break;
            oom |= buf_add(&b, s, (size_t)(e - s)) != 0 || buf_add(&b, "\n", 1) != 0;
            lines++;
            s = *e ? e + 1 : e;
        }
    }
    free(text);
    if (!oom && more > 0) {
        char tail[64];
        snprintf(tail, sizeof tail, "... (%d more error%s)\n", more, more == 1 ? "" : "s");
        oom = buf_str(&b, tail) != 0;
    }
    if (oom) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b);
}

/* The last max_lines lines of text (for failures no error line explains). */
static char *tail_lines(const char *text, int max_lines)
{
    size_t end = strlen(text), start;
    while (end > 0 && isspace((unsigned char)text[end - 1]))
        end--;
    int n = 0;
    for (start = end; start > 0; start--)
        if (text[start - 1] == '\n' && ++n >= max_lines)
            break;
    buf b = {0};
    if (buf_add(&b, text + start, end - start) != 0 || buf_add(&b, "\n", 1) != 0) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b);
}

/* ---- cache entries -------------------------------------------------------------- */

static const char *const entry_files[] = {"cand.so", "cand.sass", "cand.ptx", "imports.txt",
                                          "report.txt"};

static int entry_complete(const char *dir)
{
    for (size_t i = 0; i < sizeof entry_files / sizeof entry_files[0]; i++) {
        char path[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, entry_files[i]) >= sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
    }
    return 1;
}

static int load_entry_file(const char *dir, const char *name, char **out, kv_err *err)
{
    char path[PATH_MAX];
    if (kv_path_join(path, sizeof path, dir, name, err) != 0)
        return -1;
    return kv_read_file(path, out, NULL, err);
}

/* Fills an OK result from the entry dir. */
static int load_entry(const kv_compile_pool *p, const char *key, kv_compile_result *r, kv_err *err)
{
    memcpy(r->key, key, KV_SHA256_HEX_LEN);
    if (kv_path_join(r->dir, sizeof r->dir, p->o.cache_dir, key, err) != 0 ||
        kv_path_join(r->so_path, sizeof r->so_path, r->dir, "cand.so", err) != 0)
        return -1;
    char *report = NULL;
    if (load_entry_file(r->dir, "cand.sass", &r->sass, err) != 0 ||
        load_entry_file(r->dir, "cand.ptx", &r->ptx, err) != 0 ||
        load_entry_file(r->dir, "imports.txt", &r->imports, err) != 0 ||
        load_entry_file(r->dir, "report.txt", &report, err) != 0)
        return -1;
    r->report = report;
    char *warn = kv_compile_trim_errors(report, "candidate.cu", TRIM_LINES);
    if (!warn)
        return kv_err_set(err, "out of memory");
    if (*warn)
        r->errors = warn;
    else
        free(warn);
    sass_hash_of(r->sass, r->sass_hash);
    r->status = KV_COMPILE_OK;
    return 0;
}

/* ---- one task's pipeline ---------------------------------------------------------- */

static void finish(kv_compile_pool *p, task *t, kv_compile_result *r)
{
    r->seconds = r->cached ? 0 : (double)(kv_monotonic_ns() - t->start_ns) / 1e9;
    (void)deliver(p, t, r);
}

static void finish_msg(kv_compile_pool *p, task *t, kv_compile_status st, const char *msg)
{
    kv_compile_result r;
    memset(&r, 0, sizeof r);
    memcpy(r.key, t->key, sizeof r.key);
    result_message(&r, st, msg);
    finish(p, t, &r);
}

static int spawn_step(kv_compile_pool *p, task *t, kv_err *err)
{
    char *argv[MAX_FLAGS + 8];
    int n = 0, out_fd = -1;
    char out_path[PATH_MAX];
    if (t->step == STEP_NVCC) {
        argv[n++] = p->o.nvcc;
        for (int i = 0; i < p->n_flags; i++)
            argv[n++] = p->flags[i];
        argv[n++] = "candidate.cu";
        argv[n++] = "-o";
        argv[n++] = "cand.so";
    } else {
        const char *file = t->step == STEP_SASS ? "cand.sass" : "cand.ptx";
        if (kv_path_join(out_path, sizeof out_path, t->tmpdir, file, err) != 0)
            return -1;
        out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out_fd < 0)
            return kv_err_errno(err, errno, "open %s", out_path);
        argv[n++] = p->cuobjdump;
        argv[n++] = t->step == STEP_SASS ? "-sass" : "-ptx";
        argv[n++] = "cand.so";
    }
    argv[n] = NULL;
    char tmp[PATH_MAX];
    char **env = NULL;
    if (kv_path_join(tmp, sizeof tmp, t->tmpdir, "tmp", err) != 0 ||
        (!(env = env_with_tmpdir(tmp)) && kv_err_set(err, "out of memory"))) {
        if (out_fd >= 0)
            close(out_fd);
        return -1;
    }
    int rc = child_spawn(&t->ch, argv, t->tmpdir, env, out_fd, err);
    env_free(env);
    if (out_fd >= 0 && close(out_fd) != 0 && rc == 0) {
        int e = errno;
        child_kill(&t->ch);
        return kv_err_errno(err, e, "close %s", out_path);
    }
    return rc;
}

/* Starts a task: a cache hit finishes it at once; otherwise its temporary
 * directory is made and nvcc started. Returns 1 when it now runs. */
static int start_task(kv_compile_pool *p, task *t)
{
    kv_err err = {{0}};
    char dir[PATH_MAX];
    t->start_ns = kv_monotonic_ns();
    t->deadline_ns = t->start_ns + (int64_t)(p->o.timeout_s * 1e9);
    t->started = 1;
    if (kv_path_join(dir, sizeof dir, p->o.cache_dir, t->key, &err) != 0) {
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return 0;
    }
    if (entry_complete(dir)) {
        kv_compile_result r;
        memset(&r, 0, sizeof r);
        if (load_entry(p, t->key, &r, &err) == 0) {
            r.cached = 1;
            finish(p, t, &r);
            return 0;
        }
        kv_compile_result_free(&r);
        /* unreadable: remove it and compile again */
        (void)rm_rf(dir);
    }
    if (!is_exec_file(p->o.nvcc)) {
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof msg, "cannot run nvcc %s: not an executable file", p->o.nvcc);
        finish_msg(p, t, KV_COMPILE_FAILED, msg);
        return 0;
    }
    if ((size_t)snprintf(t->tmpdir, sizeof t->tmpdir, "%s/.tmp-%ld-XXXXXX", p->o.cache_dir,
                         (long)getpid()) >= sizeof t->tmpdir) {
        t->tmpdir[0] = '\0';
        finish_msg(p, t, KV_COMPILE_FAILED, "compile: cache path too long");
        return 0;
    }
    if (!mkdtemp(t->tmpdir)) {
        kv_err_errno(&err, errno, "mkdtemp %s", t->tmpdir);
        t->tmpdir[0] = '\0';
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return 0;
    }
    char src[PATH_MAX], tmp[PATH_MAX];
    if (kv_path_join(tmp, sizeof tmp, t->tmpdir, "tmp", &err) != 0 ||
        (mkdir(tmp, 0700) != 0 && kv_err_errno(&err, errno, "mkdir %s", tmp)) ||
        kv_path_join(src, sizeof src, t->tmpdir, "candidate.cu", &err) != 0 ||
        write_file(src, t->src, t->len, &err) != 0) {
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return 0;
    }
    t->step = STEP_NVCC;
    if (spawn_step(p, t, &err) != 0) {
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return 0;
    }
    return 1;
}

/* Everything after cuobjdump: imports, report, fsync, rename into place. */
static void commit_entry(kv_compile_pool *p, task *t)
{
    kv_err err = {{0}};
    char path[PATH_MAX], final[PATH_MAX];
    char *imports = NULL;
    const char *report = t->nvcc_out ? t->nvcc_out : "";
    if (kv_path_join(path, sizeof path, t->tmpdir, "cand.so", &err) != 0 ||
        read_imports(path, &imports, &err) != 0)
        goto fail;
    if (kv_path_join(path, sizeof path, t->tmpdir, "imports.txt", &err) != 0 ||
        write_file(path, imports, strlen(imports), &err) != 0)
        goto fail;
    free(imports);
    imports = NULL;
    if (kv_path_join(path, sizeof path, t->tmpdir, "report.txt", &err) != 0 ||
        write_file(path, report, strlen(report), &err) != 0)
        goto fail;
    /* nvcc's own temporary files (TMPDIR) do not go into the entry */
    if (kv_path_join(path, sizeof path, t->tmpdir, "tmp", &err) != 0)
        goto fail;
    if (rm_rf(path) != 0) {
        kv_err_errno(&err, errno, "remove %s", path);
        goto fail;
    }
    /* durable before visible: a crash never leaves a complete-looking entry
     * with missing bytes */
    for (size_t i = 0; i < sizeof entry_files / sizeof entry_files[0]; i++) {
        if (kv_path_join(path, sizeof path, t->tmpdir, entry_files[i], &err) != 0 ||
            fsync_path(path, 0, &err) != 0)
            goto fail;
    }
    if (fsync_path(t->tmpdir, 1, &err) != 0 ||
        kv_path_join(final, sizeof final, p->o.cache_dir, t->key, &err) != 0)
        goto fail;
    for (int tries = 0;; tries++) {
        if (rename(t->tmpdir, final) == 0) {
            t->tmpdir[0] = '\0';
            break;
        }
        if ((errno == ENOTEMPTY || errno == EEXIST) && tries == 0) {
            if (entry_complete(final))
                break; /* another process put the same entry in place */
            if (rm_rf(final) != 0) {
                kv_err_errno(&err, errno, "remove incomplete cache entry %s", final);
                goto fail;
            }
            continue;
        }
        kv_err_errno(&err, errno, "rename %s to %s", t->tmpdir, final);
        goto fail;
    }
    if (fsync_path(p->o.cache_dir, 1, &err) != 0)
        goto fail;
    kv_compile_result r;
    memset(&r, 0, sizeof r);
    if (load_entry(p, t->key, &r, &err) != 0) {
        kv_compile_result_free(&r);
        goto fail;
    }
    finish(p, t, &r);
    return;
fail:
    free(imports);
    finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
}

/* nvcc or cuobjdump exited: move to the next step or finish. */
static void step_done(kv_compile_pool *p, task *t)
{
    int st = t->ch.status;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    char *out = buf_take(&t->ch.out);
    t->ch.pid = 0;
    child_free(&t->ch);
    if (!out) {
        finish_msg(p, t, KV_COMPILE_FAILED, "out of memory");
        return;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 &&
        strncmp(out, "kevo-exec-failed: errno ", 24) == 0) {
        char msg[PATH_MAX + 256];
        snprintf(msg, sizeof msg, "cannot run %s: %s",
                 t->step == STEP_NVCC ? p->o.nvcc : p->cuobjdump, strerror(atoi(out + 24)));
        free(out);
        finish_msg(p, t, KV_COMPILE_FAILED, msg);
        return;
    }
    if (t->step == STEP_NVCC) {
        t->nvcc_out = out;
        if (!ok && WIFSIGNALED(st)) {
            char msg[256];
            snprintf(msg, sizeof msg, "nvcc was killed by signal %d", WTERMSIG(st));
            finish_msg(p, t, KV_COMPILE_FAILED, msg);
            return;
        }
        if (!ok) {
            kv_compile_result r;
            memset(&r, 0, sizeof r);
            memcpy(r.key, t->key, sizeof r.key);
            r.status = KV_COMPILE_ERROR;
            r.report = strdup(out);
            r.errors = kv_compile_trim_errors(out, "candidate.cu", TRIM_LINES);
            if (r.errors && !*r.errors) {
                free(r.errors);
                r.errors = tail_lines(out, 20);
            }
            if (!r.report || !r.errors) {
                kv_compile_result_free(&r);
                finish_msg(p, t, KV_COMPILE_FAILED, "out of memory");
                return;
            }
            finish(p, t, &r);
            return;
        }
    } else {
        if (!ok) {
            char msg[1024];
            snprintf(msg, sizeof msg, "cuobjdump %s failed (%s %d): %.700s",
                     t->step == STEP_SASS ? "-sass" : "-ptx",
                     WIFEXITED(st) ? "exit status" : "signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), out);
            free(out);
            finish_msg(p, t, KV_COMPILE_FAILED, msg);
            return;
        }
        free(out);
    }
    if (t->step == STEP_PTX) {
        commit_entry(p, t);
        return;
    }
    t->step++;
    if (!p->cuobjdump[0] || !is_exec_file(p->cuobjdump)) {
        finish_msg(p, t, KV_COMPILE_FAILED,
                   "cuobjdump not found (set $KEVO_CUOBJDUMP, or put it next to nvcc or on "
                   "PATH; pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)");
        return;
    }
    kv_err err = {{0}};
    if (spawn_step(p, t, &err) != 0)
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
}

/* Advances a running task; returns 1 when it is finished (results delivered). */
static int advance(kv_compile_pool *p, task *t)
{
    if (child_drain(&t->ch) != 0) {
        finish_msg(p, t, KV_COMPILE_FAILED, "reading the compiler's output failed");
        return 1;
    }
    int r = child_reap(&t->ch);
    if (r < 0) {
        kv_err err;
        kv_err_errno(&err, errno, "waitpid");
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return 1;
    }
    if (r == 1) {
        /* take what is left in the pipe; a grandchild may hold it open */
        (void)child_drain(&t->ch);
        if (t->ch.fd >= 0) {
            close(t->ch.fd);
            t->ch.fd = -1;
        }
        step_done(p, t);
        return t->ch.pid == 0;
    }
    if (kv_monotonic_ns() >= t->deadline_ns) {
        child_kill(&t->ch);
        kv_compile_result res;
        memset(&res, 0, sizeof res);
        memcpy(res.key, t->key, sizeof res.key);
        char msg[256];
        snprintf(msg, sizeof msg, "compilation timed out after %g s (%s killed)",
                 p->o.timeout_s, t->step == STEP_NVCC ? "nvcc" : "cuobjdump");
        result_message(&res, KV_COMPILE_TIMEOUT, msg);
        res.report = buf_take(&t->ch.out);
        finish(p, t, &res);
        return 1;
    }
    return 0;
}

/* ---- the pool's API -------------------------------------------------------------- */

static int compute_key(const kv_compile_pool *p, const char *src, size_t len,
                       char key[KV_SHA256_HEX_LEN], kv_err *err)
{
    const char *version = NULL;
    if (nvcc_version(p->o.nvcc, &version, err) != 0)
        return -1;
    char kpath[PATH_MAX];
    char *kernel_h = NULL;
    size_t klen = 0;
    if (snprintf(kpath, sizeof kpath, "%s/kevo/kernel.h", p->o.include_dir) >= (int)sizeof kpath)
        return kv_err_errno(err, ENAMETOOLONG, "kernel.h under %s", p->o.include_dir);
    if (kv_read_file(kpath, &kernel_h, &klen, err) != 0)
        return kv_err_prefix(err, "the candidate ABI");
    long abi = abi_version_of(kernel_h);
    if (abi < 0) {
        free(kernel_h);
        return kv_err_set(err, "%s does not define KEVO_ABI_VERSION", kpath);
    }
    kv_sha256_ctx h;
    kv_sha256_init(&h);
    hash_field(&h, "kevo-compile-key", "1", 1);
    hash_field(&h, "source", src, len);
    for (int i = 0; i < p->n_flags; i++)
        hash_field(&h, "flag", p->flags[i], strlen(p->flags[i]));
    hash_field(&h, "nvcc-version", version, strlen(version));
    char abi_s[32];
    snprintf(abi_s, sizeof abi_s, "%ld", abi);
    hash_field(&h, "abi", abi_s, strlen(abi_s));
    hash_field(&h, "kernel.h", kernel_h, klen);
    free(kernel_h);
    if (hash_patterns(&h, p->o.patterns_dir, err) != 0)
        return -1;
    uint8_t d[KV_SHA256_LEN];
    kv_sha256_final(&h, d);
    kv_sha256_hex(d, key);
    return 0;
}

static task *find_task(task *list, const char *key)
{
    for (; list; list = list->next)
        if (strcmp(list->key, key) == 0)
            return list;
    return NULL;
}

static int add_ticket(task *t, uint64_t ticket)
{
    if (t->n_tickets == t->cap_tickets) {
        int nc = t->cap_tickets ? t->cap_tickets * 2 : 2;
        uint64_t *n = realloc(t->tickets, (size_t)nc * sizeof *n);
        if (!n)
            return -1;
        t->tickets = n;
        t->cap_tickets = nc;
    }
    t->tickets[t->n_tickets++] = ticket;
    return 0;
}

int kv_compile_submit(kv_compile_pool *p, const char *src, size_t len, uint64_t *ticket,
                      kv_err *err)
{
    uint64_t tk = p->next_ticket;
    char key[KV_SHA256_HEX_LEN];
    kv_err kerr = {{0}};
    if (compute_key(p, src, len, key, &kerr) != 0) {
        /* the toolchain or the tree is broken: a FAILED result, not a kevo error */
        kv_compile_result r;
        memset(&r, 0, sizeof r);
        result_message(&r, KV_COMPILE_FAILED, kerr.msg);
        if (!r.errors || push_ready(p, tk, &r) != 0) {
            kv_compile_result_free(&r);
            return kv_err_set(err, "compile: out of memory");
        }
        p->next_ticket++;
        *ticket = tk;
        return 0;
    }
    task *t = find_task(p->running, key);
    if (!t)
        t = find_task(p->queued, key);
    if (t) {
        if (add_ticket(t, tk) != 0)
            return kv_err_set(err, "compile: out of memory");
        p->next_ticket++;
        *ticket = tk;
        return 0;
    }
    t = calloc(1, sizeof *t);
    if (!t)
        return kv_err_set(err, "compile: out of memory");
    child_init(&t->ch);
    memcpy(t->key, key, sizeof key);
    t->src = malloc(len ? len : 1);
    if (!t->src || add_ticket(t, tk) != 0) {
        task_free(t);
        return kv_err_set(err, "compile: out of memory");
    }
    if (len)
        memcpy(t->src, src, len);
    t->len = len;
    if (p->queued_tail)
        p->queued_tail->next = t;
    else
        p->queued = t;
    p->queued_tail = t;
    p->next_ticket++;
    *ticket = tk;
    return 0;
}

int kv_compile_poll(kv_compile_pool *p, kv_err *err)
{
    (void)err;
    /* advance what runs */
    for (task **pp = &p->running; *pp;) {
        task *t = *pp;
        if (advance(p, t)) {
            *pp = t->next;
            p->n_running--;
            task_free(t);
        } else {
            pp = &t->next;
        }
    }
    /* start what waits */
    while (p->queued && p->n_running < p->jobs) {
        task *t = p->queued;
        p->queued = t->next;
        if (!p->queued)
            p->queued_tail = NULL;
        t->next = NULL;
        if (start_task(p, t)) {
            t->next = p->running;
            p->running = t;
            p->n_running++;
        } else {
            task_free(t);
        }
    }
    return p->n_ready;
}

int kv_compile_take(kv_compile_pool *p, uint64_t *ticket, kv_compile_result *r)
{
    ready *e = p->ready_head;
    if (!e)
        return KV_NOTFOUND;
    p->ready_head = e->next;
    if (!p->ready_head)
        p->ready_tail = NULL;
    p->n_ready--;
    if (ticket)
        *ticket = e->ticket;
    *r = e->r;
    free(e);
    return 0;
}

int kv_compile_pollfds(kv_compile_pool *p, int *fds, int cap)
{
    int n = 0;
    for (task *t = p->running; t && n < cap; t = t->next)
        if (t->ch.fd >= 0)
            fds[n++] = t->ch.fd;
    return n;
}

int kv_compile_wait_all(kv_compile_pool *p, kv_err *err)
{
    for (;;) {
        if (kv_compile_poll(p, err) < 0)
            return -1;
        if (!p->running && !p->queued)
            return 0;
        struct pollfd pfds[256];
        int n = 0, held = 0;
        int64_t now = kv_monotonic_ns(), nearest = INT64_MAX;
        for (task *t = p->running; t; t = t->next) {
            if (t->ch.fd >= 0 && n < (int)(sizeof pfds / sizeof pfds[0])) {
                pfds[n].fd = t->ch.fd;
                pfds[n].events = POLLIN;
                pfds[n].revents = 0;
                n++;
            } else {
                held = 1; /* pipe closed (or too many): check back soon */
            }
            if (t->deadline_ns < nearest)
                nearest = t->deadline_ns;
        }
        int64_t wait_ms = nearest == INT64_MAX ? 1000 : (nearest - now) / 1000000 + 1;
        if (wait_ms < 0)
            wait_ms = 0;
        if (wait_ms > 1000)
            wait_ms = 1000;
        if (held && wait_ms > 10)
            wait_ms = 10;
        if (poll(pfds, (nfds_t)n, (int)wait_ms) < 0 && errno != EINTR)
            return kv_err_errno(err, errno, "poll");
    }
}

int kv_compile(const kv_compile_opts *o, const char *src, size_t len, kv_compile_result *r,
               kv_err *err)
{
    kv_compile_pool *p;
    memset(r, 0, sizeof *r);
    if (pool_new(o, 1, 0, &p, err) != 0)
        return -1;
    uint64_t ticket, got;
    if (kv_compile_submit(p, src, len, &ticket, err) != 0 || kv_compile_wait_all(p, err) != 0) {
        kv_compile_pool_free(p);
        return -1;
    }
    int rc = kv_compile_take(p, &got, r);
    kv_compile_pool_free(p);
    if (rc != 0)
        return kv_err_set(err, "compile: no result");
    return 0;
}
