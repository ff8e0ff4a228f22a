/* compile_pool.c — the pool of concurrent compilations: a FIFO of sources,
 * one task per distinct cache key (every ticket of a key gets the result),
 * at most J tasks running, results queued for kv_compile_take.
 *
 * One compilation is a small pipeline of child processes, each in its own
 * process group, run in a private temporary directory under the cache
 * (compile.c stages it and publishes the entry):
 *
 *   nvcc ... candidate.cu -o cand.so     stdout+stderr -> pipe (report.txt)
 *   cuobjdump -sass cand.so              stdout -> cand.sass, stderr -> pipe
 *   cuobjdump -ptx cand.so               stdout -> cand.ptx,  stderr -> pipe
 *
 * The pool never blocks on a child: kv_compile_poll reaps with WNOHANG and
 * drains non-blocking pipes, and a compilation past its deadline has its
 * whole process group killed with SIGKILL. */
#include "evaluator/compile/compile_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/fsutil.h"

#define MAX_FLAGS 32

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
    kv_compile_child ch;
    char tmpdir[PATH_MAX];
    char *nvcc_out; /* nvcc's output once it exited */
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

static int add_flag(kv_compile_pool *p, const char *fmt, ...) KV_PRINTF(2, 3);
static int add_flag(kv_compile_pool *p, const char *fmt, ...)
{
    if (p->n_flags >= MAX_FLAGS)
        return -1;
    char tmp[PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
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

static void pool_free_flags(kv_compile_pool *p)
{
    for (int i = 0; i < p->n_flags; i++)
        free(p->flags[i]);
    p->n_flags = 0;
}

int kv_compile_pool_open(const kv_compile_opts *o, int jobs, int clean, kv_compile_pool **out,
                         kv_err *err)
{
    *out = NULL;
    kv_compile_pool *p = calloc(1, sizeof *p);
    if (!p)
        return kv_err_set(err, "compile pool: out of memory");
    p->o = *o;
    if (!p->o.nvcc[0])
        kv_compile_find_nvcc(p->o.nvcc, sizeof p->o.nvcc);
    if (!p->o.arch[0])
        (void)kv_compile_copy_str(p->o.arch, sizeof p->o.arch, "sm_90a");
    if (p->o.timeout_s <= 0)
        p->o.timeout_s = 120.0;
    if (p->o.mem_max == 0)
        p->o.mem_max = KV_COMPILE_MEM_MAX;
    if (!p->o.cache_dir[0]) {
        free(p);
        return kv_err_set(err, "compile pool: no cache directory");
    }
    /* children run in the temporary directory: make the paths absolute */
    char abs[PATH_MAX];
    if (p->o.include_dir[0] && realpath(p->o.include_dir, abs))
        (void)kv_compile_copy_str(p->o.include_dir, sizeof p->o.include_dir, abs);
    if (p->o.patterns_dir[0] && realpath(p->o.patterns_dir, abs))
        (void)kv_compile_copy_str(p->o.patterns_dir, sizeof p->o.patterns_dir, abs);
    if (kv_mkdir_own(p->o.cache_dir, 0755, err) != 0) {
        free(p);
        return kv_err_prefix(err, "compile cache");
    }
    if (realpath(p->o.cache_dir, abs))
        (void)kv_compile_copy_str(p->o.cache_dir, sizeof p->o.cache_dir, abs);

    if (jobs <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = n > 0 ? (int)n : 1;
    }
    p->jobs = jobs;
    p->next_ticket = 1;
    (void)kv_compile_find_cuobjdump(p->o.nvcc, p->cuobjdump, sizeof p->cuobjdump);

    char gencode[128], nccl[PATH_MAX];
    if (gencode_of(p->o.arch, gencode, sizeof gencode) != 0) {
        free(p);
        return kv_err_set(err, "compile: bad CUDA architecture \"%s\" (want e.g. sm_90a)", o->arch);
    }
    kv_compile_find_nccl_libdir(p->o.nvcc, nccl, sizeof nccl);
    static const char *const fixed[] = {"-O3",     "-std=c++17", "-shared", "-Xcompiler",
                                        "-fPIC",   "-cudart",    "shared",  "-lineinfo",
                                        "-Xptxas", "-v",         "-gencode"};
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
        kv_compile_cache_clean_stale(p->o.cache_dir);
    *out = p;
    return 0;
}

int kv_compile_pool_new(const kv_compile_opts *o, kv_compile_pool **out, kv_err *err)
{
    return kv_compile_pool_open(o, o->jobs, 1, out, err);
}

static void task_free(task *t)
{
    if (!t)
        return;
    kv_compile_child_free(&t->ch);
    if (t->tmpdir[0])
        (void)kv_rm_rf(t->tmpdir);
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
        (!(env = kv_compile_env_with_tmpdir(tmp)) && kv_err_set(err, "out of memory"))) {
        if (out_fd >= 0)
            close(out_fd);
        return -1;
    }
    int ruleset = -1;
    int rc = kv_compile_confine_ruleset(argv[0], p->flags, p->n_flags, t->tmpdir, &ruleset, err);
    if (rc == 0)
        rc = kv_compile_child_spawn(&t->ch, argv, t->tmpdir, env, out_fd, ruleset, p->o.mem_max,
                                    err);
    if (ruleset >= 0)
        close(ruleset);
    kv_env_free(env);
    if (out_fd >= 0 && close(out_fd) != 0 && rc == 0) {
        int e = errno;
        kv_compile_child_kill(&t->ch);
        return kv_err_errno(err, e, "close %s", out_path);
    }
    return rc;
}

/* Starts a task: a cache hit finishes it at once; otherwise its temporary
 * directory is made and nvcc started. Returns 1 when it now runs. */
static int start_task(kv_compile_pool *p, task *t)
{
    kv_err err = {{0}};
    t->start_ns = kv_monotonic_ns();
    t->deadline_ns = t->start_ns + (int64_t)(p->o.timeout_s * 1e9);
    t->started = 1;
    kv_compile_result r;
    int hit = kv_compile_cache_lookup(p->o.cache_dir, t->key, &r, &err);
    if (hit < 0) {
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return 0;
    }
    if (hit) {
        finish(p, t, &r);
        return 0;
    }
    if (!kv_compile_is_exec_file(p->o.nvcc)) {
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof msg, "cannot run nvcc %s: not an executable file", p->o.nvcc);
        finish_msg(p, t, KV_COMPILE_FAILED, msg);
        return 0;
    }
    const char *const dirs[] = {p->o.include_dir, p->o.patterns_dir};
    char msg[PATH_MAX + 512];
    int refused = kv_compile_check_includes(t->src, t->len, dirs, 2, msg, sizeof msg);
    if (refused != 0) {
        finish_msg(p, t, refused > 0 ? KV_COMPILE_ERROR : KV_COMPILE_FAILED, msg);
        return 0;
    }
    if (kv_compile_cache_stage(p->o.cache_dir, t->src, t->len, t->tmpdir, &err) != 0) {
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

/* Everything after cuobjdump: the entry goes into the cache. */
static void commit_entry(kv_compile_pool *p, task *t)
{
    kv_err err = {{0}};
    kv_compile_result r;
    if (kv_compile_cache_publish(p->o.cache_dir, t->key, t->tmpdir, t->nvcc_out, &r, &err) != 0) {
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return;
    }
    finish(p, t, &r);
}

/* nvcc or cuobjdump exited: move to the next step or finish. */
static void step_done(kv_compile_pool *p, task *t)
{
    int st = t->ch.status;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    char *out = kv_sb_take(&t->ch.out);
    t->ch.pid = 0;
    kv_compile_child_free(&t->ch);
    if (!out) {
        finish_msg(p, t, KV_COMPILE_FAILED, "out of memory");
        return;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 &&
        strncmp(out, KVC_EXEC_FAILED, sizeof KVC_EXEC_FAILED - 1) == 0) {
        char msg[PATH_MAX + 256];
        snprintf(msg, sizeof msg, "cannot run %s: %s",
                 t->step == STEP_NVCC ? p->o.nvcc : p->cuobjdump,
                 strerror(atoi(out + sizeof KVC_EXEC_FAILED - 1)));
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
            r.errors = kv_compile_error_summary(out);
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
    if (!p->cuobjdump[0] || !kv_compile_is_exec_file(p->cuobjdump)) {
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
    if (kv_compile_child_drain(&t->ch) != 0) {
        finish_msg(p, t, KV_COMPILE_FAILED, "reading the compiler's output failed");
        return 1;
    }
    int r = kv_compile_child_reap(&t->ch);
    if (r < 0) {
        kv_err err;
        kv_err_errno(&err, errno, "waitpid");
        finish_msg(p, t, KV_COMPILE_FAILED, err.msg);
        return 1;
    }
    if (r == 1) {
        /* take what is left in the pipe; a grandchild may hold it open */
        (void)kv_compile_child_drain(&t->ch);
        if (t->ch.fd >= 0) {
            close(t->ch.fd);
            t->ch.fd = -1;
        }
        step_done(p, t);
        return t->ch.pid == 0;
    }
    if (kv_monotonic_ns() >= t->deadline_ns) {
        kv_compile_child_kill(&t->ch);
        kv_compile_result res;
        memset(&res, 0, sizeof res);
        memcpy(res.key, t->key, sizeof res.key);
        char msg[256];
        snprintf(msg, sizeof msg, "compilation timed out after %g s (%s killed)", p->o.timeout_s,
                 t->step == STEP_NVCC ? "nvcc" : "cuobjdump");
        result_message(&res, KV_COMPILE_TIMEOUT, msg);
        res.report = kv_sb_take(&t->ch.out);
        finish(p, t, &res);
        return 1;
    }
    return 0;
}

/* ---- the pool's API -------------------------------------------------------------- */

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
    if (kv_compile_cache_key(&p->o, p->flags, p->n_flags, src, len, key, &kerr) != 0) {
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
    kv_compile_child_init(&t->ch);
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
