/* test_group.c — the supervisor (evaluator/group/group.c) against the fake worker
 * (tests/support/fake_worker.c, its path in $KEVO_FAKE_WORKER) at W = 2: start,
 * merged results, every failure's verdict, restarts that leave no process
 * behind, recycling, start timeouts, and two groups in one event loop. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "evaluator/group/group.h"
#include "protocol/protocol.h"
#include "common/clock.h"
#include "test.h"
#include "test_util.h"

#define W 2
#define MAX_PROCS 64

static const char *fake;
static char log_dir[PATH_MAX];

static double now_s(void)
{
    return (double)kv_monotonic_ns() / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- processes ------------------------------------------------------------------------------ */

/* State, parent and process group of pid from /proc; -1 if it is gone. */
static int proc_stat(pid_t pid, char *state, pid_t *ppid, pid_t *pgid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    int pp, pg;
    if (!p || sscanf(p + 1, " %c %d %d", state, &pp, &pg) != 3)
        return -1;
    *ppid = pp;
    *pgid = pg;
    return 0;
}

/* Processes whose parent is ppid (0: any) and whose group is pgid (0: any). */
static int find_procs(pid_t ppid, pid_t pgid, int live_only, pid_t *out, int cap)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);
        char st;
        pid_t pp, pg;
        if (pid <= 0 || proc_stat(pid, &st, &pp, &pg) != 0)
            continue;
        if ((ppid && pp != ppid) || (pgid && pg != pgid))
            continue;
        if (live_only && (st == 'Z' || st == 'X'))
            continue;
        if (n < cap)
            out[n++] = pid;
    }
    closedir(d);
    return n;
}

typedef struct {
    int n;
    pid_t pids[MAX_PROCS];
    pid_t pgid;
} snap;

/* The group's workers: the test's children, alive, in one process group
 * that is not the test's. */
static void take_snap(snap *s)
{
    s->n = find_procs(getpid(), 0, 0, s->pids, MAX_PROCS);
    s->pgid = 0;
    int one_group = 1;
    for (int i = 0; i < s->n; i++) {
        char st;
        pid_t pp, pg;
        KV_CHECK(proc_stat(s->pids[i], &st, &pp, &pg) == 0);
        KV_CHECKF(st != 'Z', "worker %d is a zombie", (int)s->pids[i]);
        if (i == 0)
            s->pgid = pg;
        else if (pg != s->pgid)
            one_group = 0;
    }
    KV_CHECKF(s->n == W, "%d children, expected %d workers", s->n, W);
    KV_CHECK(one_group);
    KV_CHECK(s->pgid != getpgrp());
}

static int same_snap(const snap *a, const snap *b)
{
    if (a->n != b->n || a->pgid != b->pgid)
        return 0;
    for (int i = 0; i < a->n; i++) {
        int found = 0;
        for (int j = 0; j < b->n; j++)
            found |= a->pids[i] == b->pids[j];
        if (!found)
            return 0;
    }
    return 1;
}

/* Nothing of an old generation is left: its workers are reaped (no zombie,
 * no process) and nothing alive remains in its process group (what the
 * candidates forked), even what is not our child. */
static void check_gone(const snap *old, const pid_t *extra, int n_extra)
{
    for (int i = 0; i < old->n; i++) {
        pid_t p = old->pids[i];
        errno = 0;
        KV_CHECKF(kill(p, 0) == -1 && errno == ESRCH, "old worker %d still exists", (int)p);
        errno = 0;
        KV_CHECKF(waitpid(p, NULL, WNOHANG) == -1 && errno == ECHILD,
                  "old worker %d not reaped by the group", (int)p);
    }
    /* SIGKILL has been sent; a grandchild may take a moment to die */
    pid_t left[MAX_PROCS];
    int n = 0;
    for (int tries = 0; tries < 100; tries++) {
        n = find_procs(0, old->pgid, 1, left, MAX_PROCS);
        if (n == 0)
            break;
        sleep_ms(10);
    }
    KV_CHECKF(n == 0, "%d live processes left in old process group %d (first %d)", n,
              (int)old->pgid, n ? (int)left[0] : 0);
    for (int i = 0; i < n_extra; i++) {
        char st = 'X';
        pid_t pp, pg;
        int alive = proc_stat(extra[i], &st, &pp, &pg) == 0 && st != 'Z' && st != 'X';
        KV_CHECKF(!alive, "a candidate's child %d survived its group", (int)extra[i]);
    }
}

/* Every child of the test is a current worker: no zombie anywhere. */
static void check_no_strays(void)
{
    pid_t kids[MAX_PROCS];
    int n = find_procs(getpid(), 0, 0, kids, MAX_PROCS);
    int zombies = 0;
    for (int i = 0; i < n; i++) {
        char st;
        pid_t pp, pg;
        if (proc_stat(kids[i], &st, &pp, &pg) == 0 && st == 'Z')
            zombies++;
    }
    KV_CHECKF(zombies == 0, "%d zombie children", zombies);
    KV_CHECKF(n == W || n == 0, "%d children", n);
}

/* ---- groups and jobs ------------------------------------------------------------------------ */

static kv_group *new_group(int index, int recycle_every, double start_timeout_s)
{
    kv_group_opts o;
    memset(&o, 0, sizeof o);
    o.world = W;
    for (int r = 0; r < W; r++)
        o.devices[r] = 4 + r;
    snprintf(o.worker_path, sizeof o.worker_path, "%s", fake);
    snprintf(o.log_dir, sizeof o.log_dir, "%s", log_dir);
    o.group_index = index;
    o.start_timeout_s = start_timeout_s;
    o.recycle_every = recycle_every;
    /* confined where the kernel can (the workers' uid is then 61000 + index); the
     * confinement itself is test_confine's */
    o.sandbox.allow_unconfined = 1;
    kv_group *g = NULL;
    kv_err err = {{0}};
    int rc = kv_group_new(&o, &g, &err);
    KV_CHECKF(rc == 0, "%s", err.msg);
    return g;
}

static int start_ready(kv_group *g)
{
    kv_err err = {{0}};
    int rc = kv_group_start(g, &err);
    KV_CHECKF(rc == 0, "start: %s", err.msg);
    if (rc == 0) {
        rc = kv_group_wait_ready(g, &err);
        KV_CHECKF(rc == 0, "wait_ready: %s", err.msg);
    }
    return rc;
}

static uint64_t next_id = 1;

static void make_job(kv_job *j, const char *behaviour, int n_sizes)
{
    memset(j, 0, sizeof *j);
    j->id = next_id++;
    snprintf(j->problem_dir, sizeof j->problem_dir, "/nonexistent/problems/all_reduce");
    snprintf(j->reference_so, sizeof j->reference_so, "/nonexistent/reference.so");
    snprintf(j->candidate_so, sizeof j->candidate_so, "/nonexistent/candidate.so");
    j->n_sizes = n_sizes;
    snprintf(j->sizes[0], sizeof j->sizes[0], "%s", behaviour);
    for (int i = 1; i < n_sizes; i++)
        snprintf(j->sizes[i], sizeof j->sizes[i], "s%d", i);
    j->trials = 2;
    j->warmup = 3;
    j->iters = 10;
    j->time_sizes_mask = (1 << (n_sizes - 1)) - 1; /* the last size only checked */
    if (n_sizes == 1)
        j->time_sizes_mask = 1;
    j->seed = 0xFEDCBA9876543210ull;
    j->capture = 1;
}

/* Runs a job through the asynchronous interface, noting every process of
 * the group that is not a worker (what a candidate forked). */
static int run_watching(kv_group *g, const kv_job *job, double deadline_s, kv_job_result *res,
                        pid_t *extra, int *n_extra)
{
    kv_err err = {{0}};
    snap s;
    take_snap(&s);
    if (kv_group_submit(g, job, deadline_s, &err) != 0) {
        KV_CHECKF(0, "submit: %s", err.msg);
        return -1;
    }
    *n_extra = 0;
    for (;;) {
        int rc = kv_group_step(g, res, &err);
        if (rc < 0) {
            KV_CHECKF(0, "step: %s", err.msg);
            return -1;
        }
        if (rc == 1)
            return 0;
        pid_t found[MAX_PROCS];
        int n = find_procs(0, s.pgid, 1, found, MAX_PROCS);
        for (int i = 0; i < n; i++) {
            int known = 0;
            for (int j = 0; j < s.n; j++)
                known |= found[i] == s.pids[j];
            for (int j = 0; j < *n_extra; j++)
                known |= found[i] == extra[j];
            if (!known && *n_extra < MAX_PROCS)
                extra[(*n_extra)++] = found[i];
        }
        struct pollfd fds[KV_GROUP_MAX_POLLFDS];
        int timeout;
        int nf = kv_group_pollfds(g, fds, KV_GROUP_MAX_POLLFDS, &timeout);
        if (timeout < 0 || timeout > 50)
            timeout = 50; /* look for forked processes now and then */
        poll(fds, (nfds_t)nf, timeout);
    }
}

static double fake_median(int cand, int size, int rank)
{
    int k = size % 2 ? W - 1 - rank : rank; /* as tests/support/fake_worker.c */
    return cand ? 50.0 + 5 * size + 2 * k : 100.0 + 10 * size + k;
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* A supervisor killed with SIGKILL while its workers hang in a job (a hung
 * kernel, say): the workers die with it, nothing is left on the GPUs. */
static void test_supervisor_killed(void)
{
    int ready[2];
    KV_REQUIRE(pipe(ready) == 0);
    pid_t sup = fork();
    KV_REQUIRE(sup >= 0);
    if (sup == 0) {
        close(ready[0]);
        kv_group *g = new_group(8, 0, 10);
        kv_job job;
        make_job(&job, "hang-noterm", 1);
        kv_err err = {{0}};
        if (!g || start_ready(g) != 0 || kv_group_submit(g, &job, 600, &err) != 0)
            _exit(1);
        sleep_ms(200); /* the workers are in the job */
        (void)!write(ready[1], "r", 1);
        for (;;)
            pause();
    }
    close(ready[1]);
    char c = 0;
    KV_REQUIRE(read(ready[0], &c, 1) == 1 && c == 'r');
    close(ready[0]);
    pid_t workers[MAX_PROCS];
    int n = find_procs(sup, 0, 1, workers, MAX_PROCS);
    KV_CHECKF(n == W, "%d workers", n);
    kill(sup, SIGKILL);
    waitpid(sup, NULL, 0);
    int alive = n;
    for (int t = 0; t < 100 && alive; t++) {
        sleep_ms(50);
        alive = 0;
        for (int i = 0; i < n; i++) {
            char st;
            pid_t pp, pg;
            alive += proc_stat(workers[i], &st, &pp, &pg) == 0 && st != 'Z' && st != 'X';
        }
    }
    KV_CHECKF(alive == 0, "%d of %d workers outlived their SIGKILLed supervisor", alive, n);
}

static void test_bad_opts(void)
{
    kv_group_opts o;
    memset(&o, 0, sizeof o);
    o.world = W;
    snprintf(o.worker_path, sizeof o.worker_path, "/nonexistent/no-such-worker");
    snprintf(o.log_dir, sizeof o.log_dir, "%s", log_dir);
    kv_group *g = (kv_group *)&o;
    kv_err err = {{0}};
    KV_CHECK(kv_group_new(&o, &g, &err) == -1 && g == NULL);
    KV_CHECK_STR_CONTAINS(err.msg, "no-such-worker");
    snprintf(o.worker_path, sizeof o.worker_path, "%s", fake);
    o.world = KV_GROUP_MAX_WORLD + 1;
    KV_CHECK(kv_group_new(&o, &g, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "world");

    /* not started: DEAD, and a job is refused */
    g = new_group(7, 0, 5);
    KV_REQUIRE(g);
    KV_CHECK(kv_group_get_state(g) == KV_GROUP_DEAD);
    KV_CHECK_STR_CONTAINS(kv_group_last_error(g), "not started");
    kv_job job;
    make_job(&job, "ok", 1);
    KV_CHECK(kv_group_submit(g, &job, 1, &err) == -1);
    kv_group_free(g);
}

static int fd_set_before[4096];

static void mark_fds(int *set)
{
    memset(set, 0, sizeof fd_set_before);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd >= 0 && fd < 4096 && fd != dirfd(d))
            set[fd] = 1;
    }
    closedir(d);
}

static void test_start_and_ok(void)
{
    mark_fds(fd_set_before);
    kv_group *g = new_group(0, 0, 10);
    KV_REQUIRE(g);
    KV_CHECK(start_ready(g) == 0);
    KV_CHECK(kv_group_get_state(g) == KV_GROUP_IDLE);
    snap s;
    take_snap(&s);
    /* every fd the group holds is close-on-exec */
    static int after[4096];
    mark_fds(after);
    int new_fds = 0;
    for (int fd = 3; fd < 4096; fd++) {
        if (after[fd] && !fd_set_before[fd]) {
            new_fds++;
            int fl = fcntl(fd, F_GETFD);
            KV_CHECKF(fl >= 0 && (fl & FD_CLOEXEC), "fd %d lacks FD_CLOEXEC", fd);
        }
    }
    KV_CHECK(new_fds >= W); /* a socket (and a pidfd) per worker */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/worker-0-1.log", log_dir);
    struct stat st;
    KV_CHECK(stat(path, &st) == 0 && st.st_size > 0);

    kv_job job;
    make_job(&job, "ok", 3); /* sizes 0 and 1 timed, 2 only checked */
    kv_job_result *res = calloc(1, sizeof *res);
    kv_err err = {{0}};
    double t0 = now_s();
    KV_CHECKF(kv_group_run(g, &job, 10, res, &err) == 0, "%s", err.msg);
    double took = now_s() - t0;
    KV_CHECKF(res->verdict == KV_VERDICT_OK, "%s: %s", kv_verdict_name(res->verdict), res->message);
    KV_CHECK(res->n_sizes == 3);
    KV_CHECK(strcmp(res->sizes[0].name, "ok") == 0 && strcmp(res->sizes[2].name, "s2") == 0);
    for (int i = 0; i < 2; i++) {
        const kv_size_outcome *o = &res->sizes[i];
        int slow = i % 2 ? 0 : W - 1; /* the rank whose median is the max */
        KV_CHECK(o->checked && o->ok && o->timed);
        KV_CHECK(o->ref.median == fake_median(0, i, slow));
        KV_CHECK(o->cand.median == fake_median(1, i, slow));
        KV_CHECKF(o->ref.p10 == fake_median(0, i, slow) - 1 - 0.25 * slow, "size %d p10 %g", i,
                  o->ref.p10);
        KV_CHECK(o->cand.p90 == fake_median(1, i, slow) + 1 + 0.25 * slow);
        KV_CHECK(o->ref.cv == 0.01 * (slow + 1));
        KV_CHECK(o->ref.n == 10);
        KV_CHECK(o->max_abs_err == 0.001 * W);
    }
    KV_CHECK(res->sizes[2].checked && res->sizes[2].ok && !res->sizes[2].timed);
    KV_CHECK(res->graph_captured && res->kernel_nodes == 1);
    KV_CHECK_STR_CONTAINS(res->graph_json, "fake");
    KV_CHECK(res->gpu_s == 0.001 * W);
    KV_CHECK(res->wall_s > 0 && res->wall_s <= took + 0.01);
    KV_CHECK(res->message[0] == '\0');
    KV_CHECK(kv_group_get_state(g) == KV_GROUP_IDLE);
    snap s2;
    take_snap(&s2);
    KV_CHECK(same_snap(&s, &s2)); /* no restart after ok */

    /* a second job on the warm group */
    make_job(&job, "ok", 1);
    KV_CHECKF(kv_group_run(g, &job, 10, res, &err) == 0, "%s", err.msg);
    KV_CHECK(res->verdict == KV_VERDICT_OK);
    free(res);
    kv_group_free(g);
    check_gone(&s, NULL, 0);
    check_no_strays();
}

typedef struct {
    const char *behaviour;
    kv_verdict verdict;
    const char *says[3]; /* the message contains these */
    double min_s, max_s; /* how long the job took */
    int restarts;
} failure_case;

static void test_failures(void)
{
    static const failure_case cases[] = {
        {"crash", KV_VERDICT_CRASH, {"rank 1", "signal 11 (SIGSEGV)", "about to crash"}, 0, 0.9, 1},
        {"exit0",
         KV_VERDICT_CRASH,
         {"rank 1 exited with status 0", "correctness size 0", NULL},
         0,
         0.9,
         1},
        {"garbage", KV_VERDICT_CRASH, {"protocol", "rank 0", "this is not JSON"}, 0, 0.9, 1},
        {"wrong-job", KV_VERDICT_CRASH, {"protocol", "job", NULL}, 0, 0.9, 1},
        {"hang",
         KV_VERDICT_HANG,
         {"deadline of 1 s passed in phase timing size 0 (rank 0); no result from rank 1 (phase "
          "timing size 0)",
          NULL, NULL},
         1.0,
         1.5,
         1},
        {"hang-noterm", KV_VERDICT_HANG, {"deadline of 1 s", "timing size 0", NULL}, 1.0, 1.5, 1},
        {"fork-and-hang", KV_VERDICT_HANG, {"deadline of 1 s", "forked", NULL}, 1.0, 1.5, 1},
        {"fork-and-crash", KV_VERDICT_CRASH, {"rank 1", "SIGSEGV", NULL}, 0, 0.9, 1},
        {"runtime-error",
         KV_VERDICT_RUNTIME_ERROR,
         {"rank 1: kevo_run: CUDA error 700", "rank 0: no result",
          "sum kernel launch: invalid argument"},
         0,
         0.9,
         1},
        {"mismatch", KV_VERDICT_MISMATCH, {"rank 1: size mismatch", NULL, NULL}, 0, 0.9, 1},
        {"stdout-spam", KV_VERDICT_OK, {NULL, NULL, NULL}, 0, 5, 0},
        {"chatty", KV_VERDICT_OK, {NULL, NULL, NULL}, 0, 5, 0},
    };
    kv_group *g = new_group(1, 0, 10);
    KV_REQUIRE(g);
    KV_REQUIRE(start_ready(g) == 0);
    kv_job_result *res = calloc(1, sizeof *res);
    kv_err err = {{0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const failure_case *fc = &cases[c];
        kv_test_current = fc->behaviour;
        snap old;
        take_snap(&old);
        kv_job job;
        make_job(&job, fc->behaviour, 2);
        pid_t extra[MAX_PROCS];
        int n_extra = 0;
        double t0 = now_s();
        int rc = run_watching(g, &job, 1.0, res, extra, &n_extra);
        double took = now_s() - t0;
        if (getenv("KEVO_TEST_VERBOSE"))
            printf("--- %s (%.3f s): %s\n%s\n", fc->behaviour, took, kv_verdict_name(res->verdict),
                   res->message);
        KV_CHECK(rc == 0);
        KV_CHECKF(res->verdict == fc->verdict, "verdict %s, expected %s: %s",
                  kv_verdict_name(res->verdict), kv_verdict_name(fc->verdict), res->message);
        for (int k = 0; k < 3; k++)
            if (fc->says[k])
                KV_CHECK_STR_CONTAINS(res->message, fc->says[k]);
        KV_CHECKF(took >= fc->min_s && took <= fc->max_s, "took %.3f s, expected %.1f..%.1f", took,
                  fc->min_s, fc->max_s);
        if (strncmp(fc->behaviour, "fork-", 5) == 0) {
            /* the log tail in the message names the child */
            const char *f = strstr(res->message, "forked ");
            KV_CHECK(f != NULL);
            if (f && n_extra < MAX_PROCS)
                extra[n_extra++] = (pid_t)atoi(f + 7);
        }
        if (fc->verdict == KV_VERDICT_MISMATCH) {
            KV_CHECK(!res->sizes[0].ok && res->sizes[0].bad_rank == 1);
            KV_CHECK(res->sizes[0].bad_index == 42 && res->sizes[0].got == 2.5);
            KV_CHECK(strcmp(res->sizes[0].bad_tensor, "out") == 0);
            KV_CHECK(res->sizes[1].ok);
        }
        if (fc->verdict == KV_VERDICT_HANG || fc->verdict == KV_VERDICT_CRASH)
            KV_CHECK(res->n_sizes == 2 && strcmp(res->sizes[0].name, fc->behaviour) == 0);

        /* the group comes back by itself, with nothing of the old one left */
        KV_CHECK(kv_group_wait_ready(g, &err) == 0);
        snap now;
        take_snap(&now);
        if (fc->restarts) {
            KV_CHECK(!same_snap(&old, &now));
            check_gone(&old, extra, n_extra);
            double rs = kv_group_last_restart_s(g);
            KV_CHECKF(rs > 0 && rs < 2.0, "restart took %.3f s", rs);
        } else {
            KV_CHECK(same_snap(&old, &now));
        }
        check_no_strays();
        /* and the next ok job succeeds */
        make_job(&job, "ok", 2);
        KV_CHECKF(kv_group_run(g, &job, 5, res, &err) == 0, "%s", err.msg);
        KV_CHECKF(res->verdict == KV_VERDICT_OK, "after %s: %s: %s", fc->behaviour,
                  kv_verdict_name(res->verdict), res->message);
    }
    kv_test_current = "test_failures";
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/worker-1-0.log", log_dir);
    struct stat st;
    KV_CHECK(stat(path, &st) == 0 && st.st_size > 256 * 1024); /* the spam went there */
    free(res);
    snap last;
    take_snap(&last);
    kv_group_free(g);
    check_gone(&last, NULL, 0);
    check_no_strays();
}

/* A failure observed on rank 1 and learned by rank 0 through the agreement,
 * rank 0 answering first: the job's result names rank 1 and gives its own
 * words (the mismatch's place and values, the runtime error's log tail). */
static void test_learned_elsewhere(void)
{
    kv_group *g = new_group(5, 0, 10);
    KV_REQUIRE(g);
    KV_REQUIRE(start_ready(g) == 0);
    kv_job_result *res = calloc(1, sizeof *res);
    KV_REQUIRE(res);
    kv_err err = {{0}};
    kv_job job;

    make_job(&job, "mismatch-elsewhere", 2);
    KV_CHECKF(kv_group_run(g, &job, 5, res, &err) == 0, "%s", err.msg);
    if (getenv("KEVO_TEST_VERBOSE"))
        printf("--- mismatch-elsewhere: %s\n%s\n", kv_verdict_name(res->verdict), res->message);
    KV_CHECK(res->verdict == KV_VERDICT_MISMATCH && res->origin);
    KV_CHECK_STR_CONTAINS(
        res->message, "rank 1: mismatch at size mismatch-elsewhere: out[42]: expected 1, got 2.5");
    KV_CHECK(strstr(res->message, "on another rank") == NULL);
    const kv_size_outcome *s = &res->sizes[0];
    KV_CHECKF(!s->ok && s->bad_rank == 1 && s->bad_index == 42 && s->got == 2.5 &&
                  strcmp(s->bad_tensor, "out") == 0 &&
                  strcmp(s->detail, "value out of tolerance") == 0,
              "size 0: bad_rank %d, index %lld, tensor \"%s\"", s->bad_rank,
              (long long)s->bad_index, s->bad_tensor);

    KV_CHECK(kv_group_wait_ready(g, &err) == 0);
    make_job(&job, "init-error-elsewhere", 2);
    KV_CHECKF(kv_group_run(g, &job, 5, res, &err) == 0, "%s", err.msg);
    if (getenv("KEVO_TEST_VERBOSE"))
        printf("--- init-error-elsewhere: %s\n%s\n", kv_verdict_name(res->verdict), res->message);
    KV_CHECK(res->verdict == KV_VERDICT_RUNTIME_ERROR && res->origin);
    KV_CHECK_STR_CONTAINS(res->message, "rank 1: candidate: kevo_init returned 2");
    KV_CHECK_STR_CONTAINS(res->message, "kevo_init: cudaMalloc: out of memory"); /* rank 1's log */
    KV_CHECK(strncmp(res->message, "rank 0", 6) != 0);

    KV_CHECK(kv_group_wait_ready(g, &err) == 0);
    make_job(&job, "ok", 2);
    KV_CHECKF(kv_group_run(g, &job, 5, res, &err) == 0 && res->verdict == KV_VERDICT_OK, "%s %s",
              err.msg, res->message);
    free(res);
    kv_group_free(g);
    check_no_strays();
}

static void test_recycle(void)
{
    kv_group *g = new_group(2, 2, 10);
    KV_REQUIRE(g);
    KV_REQUIRE(start_ready(g) == 0);
    kv_job_result *res = calloc(1, sizeof *res);
    kv_err err = {{0}};
    kv_job job;
    snap a, b, c;
    take_snap(&a);
    make_job(&job, "ok", 1);
    KV_CHECK(kv_group_run(g, &job, 5, res, &err) == 0 && res->verdict == KV_VERDICT_OK);
    KV_CHECK(kv_group_get_state(g) == KV_GROUP_IDLE);
    take_snap(&b);
    KV_CHECK(same_snap(&a, &b));
    make_job(&job, "ok", 1);
    KV_CHECK(kv_group_run(g, &job, 5, res, &err) == 0 && res->verdict == KV_VERDICT_OK);
    KV_CHECK(kv_group_get_state(g) == KV_GROUP_STARTING); /* the second job: recycling */
    KV_CHECK(kv_group_wait_ready(g, &err) == 0);
    take_snap(&c);
    KV_CHECK(!same_snap(&a, &c));
    check_gone(&a, NULL, 0);
    double rs = kv_group_last_restart_s(g);
    KV_CHECKF(rs > 0 && rs < 1.5, "recycling took %.3f s", rs); /* clean exits, no 2 s wait */
    make_job(&job, "ok", 1);
    KV_CHECK(kv_group_run(g, &job, 5, res, &err) == 0 && res->verdict == KV_VERDICT_OK);
    take_snap(&b);
    KV_CHECK(same_snap(&b, &c));
    /* the clean exit left its line in the log */
    char path[PATH_MAX + 32], *text = NULL;
    snprintf(path, sizeof path, "%s/worker-2-1.log", log_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        text = calloc(1, 65536);
        KV_CHECK(fread(text, 1, 65535, f) > 0);
        fclose(f);
    }
    KV_CHECK_STR_CONTAINS(text, "fake-worker rank 1: exit");
    free(text);
    free(res);
    kv_group_free(g);
    check_gone(&c, NULL, 0);
    check_no_strays();
}

static void test_start_failures(void)
{
    kv_err err = {{0}};
    /* never ready: DEAD after the start timeout */
    setenv("KEVO_FAKE_START", "slow-start", 1);
    kv_group *g = new_group(3, 0, 1.0);
    KV_REQUIRE(g);
    double t0 = now_s();
    KV_CHECK(kv_group_start(g, &err) == 0);
    KV_CHECK(kv_group_get_state(g) == KV_GROUP_STARTING);
    KV_CHECK(kv_group_wait_ready(g, &err) == -1);
    double took = now_s() - t0;
    KV_CHECK(kv_group_get_state(g) == KV_GROUP_DEAD);
    KV_CHECK_STR_CONTAINS(err.msg, "start timeout of 1 s");
    KV_CHECK_STR_CONTAINS(err.msg, "never said ready");
    KV_CHECK_STR_CONTAINS(kv_group_last_error(g), "start timeout");
    KV_CHECKF(took >= 1.0 && took < 1.6, "took %.3f s", took);
    pid_t kids[MAX_PROCS];
    KV_CHECK(find_procs(getpid(), 0, 0, kids, MAX_PROCS) == 0);
    /* started again once the cause is gone */
    unsetenv("KEVO_FAKE_START");
    KV_CHECK(start_ready(g) == 0);
    KV_CHECK(kv_group_last_error(g)[0] == '\0');
    kv_job job;
    kv_job_result *res = calloc(1, sizeof *res);
    make_job(&job, "ok", 1);
    KV_CHECK(kv_group_run(g, &job, 5, res, &err) == 0 && res->verdict == KV_VERDICT_OK);
    kv_group_free(g);

    /* a worker that dies while starting: DEAD at once, with its status and log */
    setenv("KEVO_FAKE_START", "exit-start", 1);
    g = new_group(4, 0, 10);
    KV_REQUIRE(g);
    t0 = now_s();
    KV_CHECK(kv_group_start(g, &err) == 0);
    KV_CHECK(kv_group_wait_ready(g, &err) == -1);
    KV_CHECK(now_s() - t0 < 1.0);
    KV_CHECK_STR_CONTAINS(err.msg, "rank 1 exited with status 3");
    KV_CHECK_STR_CONTAINS(err.msg, "cannot initialise the device");
    KV_CHECK(find_procs(getpid(), 0, 0, kids, MAX_PROCS) == 0);
    /* a job on a dead group is an error of the caller, not a verdict */
    KV_CHECK(kv_group_run(g, &job, 5, res, &err) == -1);
    kv_group_free(g);

    /* a worker that breaks the protocol while starting */
    setenv("KEVO_FAKE_START", "wrong-device", 1);
    g = new_group(5, 0, 10);
    KV_REQUIRE(g);
    KV_CHECK(kv_group_start(g, &err) == 0);
    KV_CHECK(kv_group_wait_ready(g, &err) == -1);
    KV_CHECK_STR_CONTAINS(err.msg, "protocol: rank 1 says device 105, expected 5");
    kv_group_free(g);
    unsetenv("KEVO_FAKE_START");
    KV_CHECK(find_procs(getpid(), 0, 0, kids, MAX_PROCS) == 0);
    free(res);
}

/* Two groups in one poll loop: one hangs, the other keeps working. */
static void test_event_loop(void)
{
    kv_group *a = new_group(6, 0, 10), *b = new_group(7, 0, 10);
    KV_REQUIRE(a && b);
    KV_REQUIRE(start_ready(a) == 0);
    KV_REQUIRE(start_ready(b) == 0);
    kv_err err = {{0}};
    kv_job hang, ok;
    make_job(&hang, "hang", 1);
    double t0 = now_s(), a_took = 0;
    KV_CHECK(kv_group_submit(a, &hang, 1.5, &err) == 0);
    kv_job_result *res = calloc(1, sizeof *res);
    int b_done = 0, a_done = 0;
    while (!a_done && now_s() - t0 < 5) {
        if (kv_group_get_state(b) == KV_GROUP_IDLE) {
            make_job(&ok, "ok", 2);
            KV_CHECK(kv_group_submit(b, &ok, 5, &err) == 0);
        }
        struct pollfd fds[2 * KV_GROUP_MAX_POLLFDS];
        int ta, tb;
        int na = kv_group_pollfds(a, fds, KV_GROUP_MAX_POLLFDS, &ta);
        int nb = kv_group_pollfds(b, fds + na, KV_GROUP_MAX_POLLFDS, &tb);
        int t = ta < 0 ? tb : tb < 0 ? ta : ta < tb ? ta : tb;
        KV_CHECK(poll(fds, (nfds_t)(na + nb), t) >= 0);
        if (kv_group_step(a, res, &err) == 1) {
            a_done = 1;
            a_took = now_s() - t0;
            KV_CHECK(res->verdict == KV_VERDICT_HANG);
        }
        if (kv_group_step(b, res, &err) == 1) {
            KV_CHECK(res->verdict == KV_VERDICT_OK);
            b_done++;
        }
    }
    KV_CHECK(a_done);
    KV_CHECKF(a_took >= 1.5 && a_took < 2.0, "hang took %.3f s", a_took);
    KV_CHECKF(b_done >= 10, "the other group finished only %d jobs meanwhile", b_done);
    KV_CHECK(kv_group_wait_ready(a, &err) == 0);
    free(res);
    kv_group_free(a);
    kv_group_free(b);
    check_no_strays();
}

/* A worker killed from outside while idle: the group restarts itself. A
 * group freed mid-job leaves nothing behind. */
static void test_idle_death_and_free(void)
{
    kv_group *g = new_group(8, 0, 10);
    KV_REQUIRE(g);
    KV_REQUIRE(start_ready(g) == 0);
    kv_err err = {{0}};
    snap old;
    take_snap(&old);
    KV_CHECK(kill(old.pids[0], SIGKILL) == 0);
    double t0 = now_s();
    while (kv_group_get_state(g) == KV_GROUP_IDLE && now_s() - t0 < 2) {
        struct pollfd fds[KV_GROUP_MAX_POLLFDS];
        int t;
        int n = kv_group_pollfds(g, fds, KV_GROUP_MAX_POLLFDS, &t);
        poll(fds, (nfds_t)n, t < 0 || t > 100 ? 100 : t);
        KV_CHECK(kv_group_step(g, NULL, &err) == 0);
    }
    KV_CHECK(kv_group_wait_ready(g, &err) == 0);
    KV_CHECK_STR_CONTAINS(kv_group_last_error(g), "killed by signal 9 (SIGKILL)");
    KV_CHECK_STR_CONTAINS(kv_group_last_error(g), "group 8, idle: rank 0 killed by signal 9");
    check_gone(&old, NULL, 0);
    kv_job job;
    kv_job_result *res = calloc(1, sizeof *res);
    make_job(&job, "ok", 1);
    KV_CHECK(kv_group_run(g, &job, 5, res, &err) == 0 && res->verdict == KV_VERDICT_OK);

    /* freed while a job hangs (with a forked child) */
    take_snap(&old);
    make_job(&job, "fork-and-hang", 1);
    KV_CHECK(kv_group_submit(g, &job, 30, &err) == 0);
    pid_t extra[MAX_PROCS];
    int n_extra = 0;
    for (int i = 0; i < 100 && n_extra < W + W; i++) {
        kv_group_step(g, res, &err);
        sleep_ms(10);
        n_extra = find_procs(0, old.pgid, 1, extra, MAX_PROCS);
    }
    KV_CHECK(n_extra == W + W);
    kv_group_free(g);
    check_gone(&old, extra, n_extra);
    check_no_strays();
    free(res);
}

int main(void)
{
    fake = getenv("KEVO_FAKE_WORKER");
    if (!fake || !*fake) {
        printf("skipped: KEVO_FAKE_WORKER is not set\n");
        return 77;
    }
    unsetenv("KEVO_FAKE_START");
    kv_test_fresh_dir(log_dir, sizeof log_dir, "group");
    double t0 = now_s();
    KV_RUN(test_bad_opts);
    KV_RUN(test_start_and_ok);
    KV_RUN(test_failures);
    KV_RUN(test_learned_elsewhere);
    KV_RUN(test_recycle);
    KV_RUN(test_start_failures);
    KV_RUN(test_event_loop);
    KV_RUN(test_idle_death_and_free);
    KV_RUN(test_supervisor_killed);
    printf("test_group: %.1f s\n", now_s() - t0);
    return kv_test_summary();
}
