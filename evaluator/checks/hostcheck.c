/* hostcheck.c — a problem's host check loaded and called, and the outputs
 * of one call compared with it (hostcheck.h); compiling is
 * hostcheck_cc.c's. */
#include "evaluator/checks/hostcheck.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "kevo/check.h"

/* check.h restates kernel.h's dtypes and limits without CUDA's headers. */
_Static_assert(KEVO_CHECK_BF16 == (int)KEVO_BF16 && KEVO_CHECK_F16 == (int)KEVO_F16 &&
                   KEVO_CHECK_F32 == (int)KEVO_F32 && KEVO_CHECK_I32 == (int)KEVO_I32 &&
                   KEVO_CHECK_I64 == (int)KEVO_I64 && KEVO_CHECK_FP8_E4M3 == (int)KEVO_FP8_E4M3 &&
                   KEVO_DTYPE_COUNT == 6,
               "check.h's dtypes are kernel.h's");
_Static_assert(KEVO_CHECK_MAX_RANKS == KEVO_MAX_RANKS &&
                   KEVO_CHECK_MAX_TENSORS == KEVO_MAX_TENSORS &&
                   KEVO_CHECK_MAX_PARAMS == KEVO_MAX_PARAMS && KEVO_CHECK_MAX_DIMS == KEVO_MAX_DIMS,
               "check.h's limits are kernel.h's");

struct kv_hostcheck {
    char problem[KV_PROBLEM_NAME_MAX];
    char path[PATH_MAX]; /* check.c */
    char so[PATH_MAX];
    int cached;
    void *dl;
    int (*fn)(kevo_check_call *c);
    double timeout_s; /* of one kv_hostcheck_run */
};

/* ---- the tensors of one call ----------------------------------------------- */

int kv_host_call_init(kv_host_call *d, const kv_problem *p, int size, int world, kv_err *err)
{
    memset(d, 0, sizeof *d);
    d->p = p;
    d->size = size;
    d->world = world;
    if (size < 0 || size >= p->n_sizes)
        return kv_err_set(err, "problem %s has no size %d", p->name, size);
    if (world < 1 || world > KEVO_MAX_RANKS)
        return kv_err_set(err, "problem %s: W = %d is outside 1..%d", p->name, world,
                          KEVO_MAX_RANKS);
    if (kv_problem_shapes(p, size, world, d->in_shape, d->out_shape, err) != 0)
        return -1;
    for (int r = 0; r < world; r++) {
        for (int i = 0; i < p->n_inputs; i++)
            if (!(d->in[r][i] = calloc(1, d->in_shape[i].bytes ? d->in_shape[i].bytes : 1)))
                goto oom;
        for (int j = 0; j < p->n_outputs; j++)
            if (!(d->out[r][j] = calloc(1, d->out_shape[j].bytes ? d->out_shape[j].bytes : 1)))
                goto oom;
    }
    return 0;
oom:
    kv_host_call_free(d);
    return kv_err_set(err, "out of memory for the tensors of %s at size %s, W=%d", p->name,
                      p->sizes[size].name, world);
}

void kv_host_call_free(kv_host_call *d)
{
    for (int r = 0; r < KEVO_MAX_RANKS; r++)
        for (int i = 0; i < KEVO_MAX_TENSORS; i++) {
            free(d->in[r][i]);
            free(d->out[r][i]);
            d->in[r][i] = d->out[r][i] = NULL;
        }
}

void kv_host_expect_free(kv_host_expect *e)
{
    for (int j = 0; j < KEVO_MAX_TENSORS; j++) {
        free(e->want[j]);
        free(e->tol[j]);
    }
    memset(e, 0, sizeof *e);
}

/* ---- loading ------------------------------------------------------------------ */

/* Loads hc->so and finds kevo_check: 0, -1 when the object does not load,
 * NO_FUNCTION when it has no such function. */
#define NO_FUNCTION (-2)
static int load(kv_hostcheck *hc, kv_err *err)
{
    (void)dlerror();
    hc->dl = dlopen(hc->so, RTLD_NOW | RTLD_LOCAL);
    if (!hc->dl) {
        const char *why = dlerror();
        return kv_err_set(err, "%s: cannot load its object %s: %s", hc->path, hc->so,
                          why ? why : "dlopen failed");
    }
    (void)dlerror();
    void *sym = dlsym(hc->dl, "kevo_check");
    if (!sym || dlerror()) {
        dlclose(hc->dl);
        hc->dl = NULL;
        kv_err_set(err,
                   "%s: defines no function kevo_check (a check defines, with C linkage "
                   "and not static, int kevo_check(kevo_check_call *c); "
                   "include/kevo/check.h)",
                   hc->path);
        return NO_FUNCTION;
    }
    /* POSIX: a function pointer has the representation of the object pointer */
    memcpy(&hc->fn, &sym, sizeof hc->fn);
    return 0;
}

int kv_hostcheck_open(const kv_compile_opts *o, const kv_problem *p, kv_hostcheck **out,
                      kv_err *err)
{
    *out = NULL;
    if (!p->check[0])
        return kv_err_set(err, "problem %s has no host check (%s/check.c)", p->name, p->dir);
    kv_hostcheck *hc = calloc(1, sizeof *hc);
    if (!hc)
        return kv_err_set(err, "out of memory");
    snprintf(hc->problem, sizeof hc->problem, "%s", p->name);
    snprintf(hc->path, sizeof hc->path, "%s", p->check);
    hc->timeout_s = KV_HOSTCHECK_TIMEOUT_S;
    if (kv_hostcheck_compile(o, hc->path, hc->so, &hc->cached, err) != 0) {
        free(hc);
        return -1;
    }
    int loaded = load(hc, err);
    if (loaded != 0) {
        /* a cached object that does not load (damaged): compile it once more */
        if (!hc->cached || loaded == NO_FUNCTION) {
            free(hc);
            return -1;
        }
        int rc = unlink(hc->so) != 0 ? kv_err_errno(err, errno, "remove %s", hc->so)
                                     : kv_hostcheck_compile(o, hc->path, hc->so, &hc->cached, err);
        if (rc != 0 || load(hc, err) != 0) {
            free(hc);
            return -1;
        }
    }
    *out = hc;
    return 0;
}

void kv_hostcheck_close(kv_hostcheck *hc)
{
    if (!hc)
        return;
    if (hc->dl)
        dlclose(hc->dl);
    free(hc);
}

void kv_hostcheck_set_timeout(kv_hostcheck *hc, double seconds)
{
    hc->timeout_s = seconds > 0 ? seconds : KV_HOSTCHECK_TIMEOUT_S;
}

const char *kv_hostcheck_so(const kv_hostcheck *hc)
{
    return hc->so;
}
int kv_hostcheck_cached(const kv_hostcheck *hc)
{
    return hc->cached;
}

/* ---- one rank ------------------------------------------------------------------ */

static void fill_tensor(kevo_check_tensor *t, const kv_tensor_spec *spec, const kv_shape *sh)
{
    t->name = spec->name;
    t->dtype = (kevo_check_dtype)spec->dtype;
    t->ndim = sh->ndim;
    for (int k = 0; k < KEVO_MAX_DIMS; k++)
        t->shape[k] = k < sh->ndim ? sh->shape[k] : 1;
    t->numel = sh->numel;
    t->bytes = sh->bytes;
}

/* "problems/x/check.c: problem x, size "s", W=2, rank 1" */
static void where(char *out, size_t cap, const kv_hostcheck *hc, const kv_host_call *d, int rank)
{
    snprintf(out, cap, "%s: problem %s, size \"%s\", W=%d, rank %d", hc->path, d->p->name,
             d->p->sizes[d->size].name, d->world, rank);
}

int kv_hostcheck_expect(const kv_hostcheck *hc, const kv_host_call *d, int rank, kv_host_expect *e,
                        kv_err *err)
{
    const kv_problem *p = d->p;
    char at[PATH_MAX + 256];
    memset(e, 0, sizeof *e);
    if (strcmp(p->name, hc->problem) != 0)
        return kv_err_set(err, "%s is the check of %s, not of %s", hc->path, hc->problem, p->name);
    if (rank < 0 || rank >= d->world)
        return kv_err_set(err, "problem %s: rank %d is outside 0..%d", p->name, rank, d->world - 1);
    kevo_check_call *c = calloc(1, sizeof *c);
    if (!c)
        return kv_err_set(err, "out of memory");
    c->version = KEVO_CHECK_VERSION;
    c->problem = p->name;
    c->size = p->sizes[d->size].name;
    c->validation = p->sizes[d->size].validation;
    c->world = d->world;
    c->rank = rank;
    c->n_params = p->n_params;
    for (int i = 0; i < p->n_params; i++) {
        c->param_names[i] = p->param_names[i];
        c->param_values[i] = p->sizes[d->size].values[i];
    }
    c->n_inputs = p->n_inputs;
    c->n_outputs = p->n_outputs;
    for (int i = 0; i < p->n_inputs; i++) {
        fill_tensor(&c->inputs[i], &p->inputs[i], &d->in_shape[i]);
        for (int r = 0; r < d->world; r++)
            c->inputs[i].data[r] = d->in[r][i];
    }
    e->n_outputs = p->n_outputs;
    for (int j = 0; j < p->n_outputs; j++) {
        fill_tensor(&c->outputs[j], &p->outputs[j], &d->out_shape[j]);
        size_t n = (size_t)d->out_shape[j].numel;
        e->want[j] = c->want[j] = calloc(n ? n : 1, sizeof(double));
        e->tol[j] = c->tol[j] = calloc(n ? n : 1, sizeof(double));
        c->valid[j] = d->out_shape[j].numel;
        if (!c->want[j] || !c->tol[j]) {
            free(c);
            kv_host_expect_free(e);
            return kv_err_set(err, "out of memory for the expected outputs of %s", p->name);
        }
    }
    int rc = hc->fn(c);
    where(at, sizeof at, hc, d, rank);
    int out = 0;
    if (c->missing_param) {
        char names[KV_PROBLEM_MAX_PARAMS * (KEVO_NAME_MAX + 2)] = "";
        for (int i = 0; i < p->n_params; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     p->param_names[i]);
        out = kv_err_set(err,
                         "%s: kevo_check_param(\"%.64s\"): %s has no such parameter "
                         "(its parameters: %s)",
                         at, c->missing_param, p->name, names);
    } else if (rc == KEVO_CHECK_SKIP) {
        out = KV_HOSTCHECK_SKIPPED;
    } else if (rc != 0) {
        c->error[sizeof c->error - 1] = '\0';
        if (c->error[0])
            out = kv_err_set(err, "%s: %s", at, c->error);
        else
            out = kv_err_set(err,
                             "%s: kevo_check returned %d without a reason "
                             "(kevo_check_fail gives one)",
                             at, rc);
    } else {
        for (int j = 0; j < p->n_outputs && out == 0; j++) {
            if (c->valid[j] < 0 || c->valid[j] > d->out_shape[j].numel)
                out = kv_err_set(err, "%s: valid[%d] (output %s) = %lld is outside 0..%lld", at, j,
                                 p->outputs[j].name, (long long)c->valid[j],
                                 (long long)d->out_shape[j].numel);
            e->valid[j] = c->valid[j];
        }
    }
    free(c);
    if (out != 0)
        kv_host_expect_free(e);
    return out;
}

/* ---- the comparison ------------------------------------------------------------ */

/* "[3, 7]": the index of flat element i of a shape. */
static void index_text(const kv_shape *s, int64_t i, char *out, size_t cap)
{
    int64_t idx[KEVO_MAX_DIMS];
    for (int k = s->ndim - 1; k >= 0; k--) {
        idx[k] = i % s->shape[k];
        i /= s->shape[k];
    }
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int k = 0; k < s->ndim && o < cap; k++)
        o += (size_t)snprintf(out + o, cap - o, "%s%lld", k ? ", " : "", (long long)idx[k]);
    if (o < cap)
        snprintf(out + o, cap - o, "]");
}

static void compare_rank(const kv_host_call *d, int rank, const kv_host_expect *e,
                         kv_hostcheck_outcome *out)
{
    for (int j = 0; j < d->p->n_outputs; j++) {
        const kevo_check_dtype t = (kevo_check_dtype)d->p->outputs[j].dtype;
        const void *buf = d->out[rank][j];
        for (int64_t i = 0; i < e->valid[j]; i++) {
            double got = kevo_check_load(buf, t, i);
            double want = e->want[j][i], tol = e->tol[j][i];
            double err = fabs(got - want);
            out->checked++;
            if (!isnan(got) && !isnan(want) && err <= tol) {
                double ratio = tol > 0 ? err / tol : 0;
                if (ratio > out->worst_ratio)
                    out->worst_ratio = ratio;
                continue;
            }
            if (out->failed++ > 0)
                continue;
            char at[96];
            index_text(&d->out_shape[j], i, at, sizeof at);
            out->bad_rank = rank;
            out->bad_output = j;
            out->bad_index = i;
            out->got = got;
            out->want = want;
            out->tol = tol;
            snprintf(out->first, sizeof out->first,
                     "rank %d, %s%s: got %.9g, want %.9g (error %.3g, tolerance %.3g)", rank,
                     d->p->outputs[j].name, at, got, want, err, tol);
        }
    }
}

/* Every rank of d against the check, in this process. */
static int run_ranks(const kv_hostcheck *hc, const kv_host_call *d, kv_hostcheck_outcome *out,
                     kv_err *err, int progress_fd)
{
    memset(out, 0, sizeof *out);
    out->bad_rank = out->bad_output = -1;
    for (int rank = 0; rank < d->world; rank++) {
        kv_host_expect e;
        unsigned char mark = (unsigned char)rank; /* the parent learns where a crash was */
        if (progress_fd >= 0 && write(progress_fd, &mark, 1) != 1)
            return kv_err_errno(err, errno, "reporting to kevo");
        int64_t t0 = kv_monotonic_ns();
        int rc = kv_hostcheck_expect(hc, d, rank, &e, err);
        out->seconds += (double)(kv_monotonic_ns() - t0) / 1e9;
        if (rc == KV_HOSTCHECK_SKIPPED && rank == 0)
            return KV_HOSTCHECK_SKIPPED;
        if (rc == KV_HOSTCHECK_SKIPPED) {
            char at[PATH_MAX + 256];
            where(at, sizeof at, hc, d, rank);
            return kv_err_set(err,
                              "%s: skipped this rank (KEVO_CHECK_SKIP) but not rank 0; a "
                              "check skips a size on every rank or on none",
                              at);
        }
        if (rc != 0)
            return -1;
        compare_rank(d, rank, &e, out);
        kv_host_expect_free(&e);
    }
    return out->failed ? KV_HOSTCHECK_MISMATCH : 0;
}

/* What the child sends after its rank marks: one record. */
typedef struct {
    int rc;
    kv_hostcheck_outcome out;
    kv_err err;
} child_report;

/* Reads the child's marks and report from fd until it closes or the
 * deadline passes: 1 with *rep filled, 0 when the child sent no report
 * (it died, *last_rank the rank it was at, -1 before any), -1 at the
 * deadline. */
static int read_child(int fd, int64_t deadline_ns, child_report *rep, int *last_rank)
{
    unsigned char buf[sizeof *rep];
    size_t have = 0;
    int reporting = 0; /* past the marks: the report's bytes */
    *last_rank = -1;
    for (;;) {
        int64_t left = deadline_ns - kv_monotonic_ns();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {fd, POLLIN, 0};
        int ms = left / 1000000 > 1000 ? 1000 : (int)(left / 1000000) + 1;
        int n = poll(&pfd, 1, ms);
        if (n < 0 && errno != EINTR)
            return 0;
        if (n <= 0)
            continue;
        unsigned char c[4096];
        ssize_t got = read(fd, c, sizeof c);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return reporting && have == sizeof *rep ? 1 : 0;
        for (ssize_t i = 0; i < got; i++) {
            if (!reporting && c[i] == 0xff) {
                reporting = 1;
            } else if (!reporting) {
                *last_rank = c[i];
            } else if (have < sizeof buf) {
                buf[have++] = c[i];
                if (have == sizeof *rep)
                    memcpy(rep, buf, sizeof *rep);
            }
        }
    }
}

/* Why a child that sent no report ended: "crashed (signal 11, SIGSEGV)". */
static void child_end(pid_t pid, char *out, size_t cap)
{
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (w < 0)
        snprintf(out, cap, "ended (waitpid: %s)", strerror(errno));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "crashed (signal %d, %s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
}

int kv_hostcheck_run(const kv_hostcheck *hc, const kv_host_call *d, kv_hostcheck_outcome *out,
                     kv_err *err)
{
    memset(out, 0, sizeof *out);
    out->bad_rank = out->bad_output = -1;
    int fds[2];
    if (pipe(fds) != 0)
        return kv_err_errno(err, errno, "pipe for the host check of %s", hc->problem);
    fflush(NULL); /* the child's exit must not write the parent's buffers again */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return kv_err_errno(err, e, "fork for the host check of %s", hc->problem);
    }
    if (pid == 0) { /* the child: the check, its marks and its report */
        close(fds[0]);
        /* the check's code sees what a worker would: no secret of the user's */
        kv_env_keep_allowed();
        child_report rep;
        memset(&rep, 0, sizeof rep);
        rep.rc = run_ranks(hc, d, &rep.out, &rep.err, fds[1]);
        unsigned char end = 0xff;
        int ok = write(fds[1], &end, 1) == 1 && write(fds[1], &rep, sizeof rep) == sizeof rep;
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    child_report rep = {0};
    int last = -1;
    int64_t deadline = kv_monotonic_ns() + (int64_t)(hc->timeout_s * 1e9);
    int got = read_child(fds[0], deadline, &rep, &last);
    close(fds[0]);
    char at[PATH_MAX + 256], how[128];
    where(at, sizeof at, hc, d, last < 0 ? 0 : last);
    if (got < 0) {
        kill(pid, SIGKILL);
        child_end(pid, how, sizeof how);
        return kv_err_set(err, "%s: kevo_check did not finish within %.0f s (stopped)", at,
                          hc->timeout_s);
    }
    child_end(pid, how, sizeof how);
    if (got == 0)
        return kv_err_set(err, "%s: kevo_check %s; a check must return, not end the process", at,
                          how);
    *out = rep.out;
    if (rep.rc < 0)
        *err = rep.err;
    return rep.rc;
}
