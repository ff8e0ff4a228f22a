/* test_archive_crash.c — the archive survives a writer killed at any instant.
 *
 * A child process writes in a loop, one transaction at a time: 1-50 programs
 * (1-8 KiB sources; parents among earlier programs), an attempt each, some
 * results and elite offers, now and then a duplicate source (dedup) or an
 * island cleared, a few proposal attempts without a program, and the search
 * state, whose evaluations field is the number of attempts committed with it.
 * The map starts at 256 KiB, so it grows during the runs. The parent SIGKILLs
 * the child a random 0-60 ms after it has opened the archive (at least 25
 * times, KEVO_CRASH_KILLS, default 30), then opens the archive as the writer
 * and checks that it is whole: counters equal the records, ids and sequences
 * have no gaps, every program decodes and its source is the one that was
 * written, parents and elites refer to existing programs, the state was
 * committed with its attempts. The next child continues from there.
 *
 * The child reports through a pipe when it has opened the archive, when it
 * begins a transaction, when it calls commit and when the commit returned, so
 * the parent knows where each kill landed and what the archive must hold:
 * killed while building a transaction, exactly the last commit; killed in
 * kv_txn_commit, the last commit or the whole transaction (all or nothing).
 * At the end a reader process counts programs again and again while a writer
 * runs, and must neither block nor be blocked.
 *
 * Environment: KEVO_CRASH_KILLS (kills), KEVO_CRASH_SEED (the parent's
 * random seed; printed). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/source.h"
#include "test.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define KV_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KV_UNDER_ASAN 1
#endif
#endif
#ifndef KV_UNDER_ASAN
#define KV_UNDER_ASAN 0
#endif

#define INITIAL_MAP ((size_t)256 << 10)
#define MIN_SRC 1024
#define MAX_SRC 8192
#define MAX_DELAY_US 60000
#define MIN_KILLS 25
#define DEFAULT_KILLS 30
#define N_PROBLEMS 2
#define N_ISLANDS 4
#define N_CELLS 4

static const char *const problems[N_PROBLEMS] = {"allreduce", "allgather"};
static const char *const cells[N_CELLS] = {"sm/fused", "tma/fused", "ce/unfused", "sm/unfused"};

static char dir[256];
static int max_batch = 50;        /* programs per transaction, at most */
static volatile pid_t live_child; /* killed by the watchdog */

/* ---- what a program is, from its id alone --------------------------------- */

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t s = a * 0x9E3779B97F4A7C15ull ^ b;
    return kv_test_rand(&s);
}

static size_t src_len_of(uint64_t id)
{
    return MIN_SRC + (size_t)(mix(id, 1) % (MAX_SRC - MIN_SRC + 1));
}

static void src_of(char *buf, size_t cap, uint64_t id)
{
    kv_test_random_source(buf, cap, id * 7919 + 13, src_len_of(id));
}

static const char *problem_of(uint64_t id)
{
    return problems[id % N_PROBLEMS];
}

/* 0-3 parents among 1..id-1, chosen by the id. */
static uint32_t parents_of(uint64_t id, uint64_t parents[KV_MAX_PARENTS])
{
    if (id <= 1)
        return 0;
    uint32_t n = (uint32_t)(mix(id, 2) % 4);
    for (uint32_t i = 0; i < n; i++)
        parents[i] = 1 + mix(id, 3 + i) % (id - 1);
    return n;
}

/* ---- the writer child ------------------------------------------------------ */

enum { MSG_OPEN = 1, MSG_BEGIN, MSG_COMMITTING, MSG_COMMIT };

typedef struct {
    uint64_t kind;
    uint64_t programs; /* OPEN, COMMIT: committed; BEGIN, COMMITTING: after this transaction */
    uint64_t attempts;
    uint64_t map_bytes;
} report;

static void child_fail(const char *what, const kv_err *err)
{
    fprintf(stderr, "writer child: %s: %s\n", what, err ? err->msg : strerror(errno));
    _exit(3); /* not exit(): the parent's atexit handlers remove the test dirs */
}

static void send_report(int fd, uint64_t kind, uint64_t programs, uint64_t attempts,
                        uint64_t map_bytes)
{
    report r = {kind, programs, attempts, map_bytes};
    ssize_t w;
    do
        w = write(fd, &r, sizeof r);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof r)
        child_fail("write report", NULL);
}

static kv_verdict random_verdict(uint64_t *rng)
{
    static const kv_verdict v[] = {KV_VERDICT_OK,
                                   KV_VERDICT_OK,
                                   KV_VERDICT_MISMATCH,
                                   KV_VERDICT_COMPILE_ERROR,
                                   KV_VERDICT_RUNTIME_ERROR,
                                   KV_VERDICT_HANG,
                                   KV_VERDICT_CRASH};
    return v[kv_test_rand(rng) % (sizeof v / sizeof v[0])];
}

static void writer_child(int fd, uint64_t seed)
{
    kv_archive_opts o = {.create = 1, .initial_map_bytes = INITIAL_MAP};
    kv_archive *a;
    kv_err err;
    memset(&err, 0, sizeof err);
    if (kv_archive_open(dir, &o, &a, &err) != 0)
        child_fail("open", &err);
    kv_txn *t;
    kv_counters c;
    if (kv_read_begin(a, &t, &err) != 0 || kv_get_counters(t, &c, &err) != 0)
        child_fail("counters", &err);
    kv_txn_abort(t);
    /* pick up where the last committed transaction left off */
    uint64_t programs = c.programs, attempts = c.attempts;
    send_report(fd, MSG_OPEN, programs, attempts, kv_archive_map_bytes(a));

    uint64_t rng = seed;
    char *src = malloc(MAX_SRC + 64);
    if (!src)
        child_fail("malloc", NULL);
    for (;;) {
        uint64_t n = 1 + kv_test_rand(&rng) % (uint64_t)max_batch;
        uint64_t extra = kv_test_rand(&rng) % 3 == 0 ? 1 + kv_test_rand(&rng) % 2 : 0;
        send_report(fd, MSG_BEGIN, programs + n, attempts + n + extra, 0);
        if (kv_write_begin(a, &t, &err) != 0)
            child_fail("write begin", &err);
        for (uint64_t k = 0; k < n; k++) {
            uint64_t want = programs + 1 + k;
            kv_program p;
            memset(&p, 0, sizeof p);
            snprintf(p.problem, sizeof p.problem, "%s", problem_of(want));
            p.n_parents = parents_of(want, p.parents);
            p.island = (int32_t)(kv_test_rand(&rng) % N_ISLANDS);
            snprintf(p.op, sizeof p.op, "%s", p.n_parents ? "llm" : "seed");
            snprintf(p.model, sizeof p.model, "model-%d", (int)(kv_test_rand(&rng) % 3));
            p.created_ns = (int64_t)want;
            src_of(src, MAX_SRC + 1, want);
            uint64_t id;
            int existed;
            if (kv_add_program(t, &p, src, strlen(src), &id, &existed, &err) != 0)
                child_fail("add program", &err);
            if (id != want || existed) {
                fprintf(stderr, "writer child: program %llu got id %llu (existed %d)\n",
                        (unsigned long long)want, (unsigned long long)id, existed);
                _exit(3);
            }
            kv_attempt at;
            memset(&at, 0, sizeof at);
            snprintf(at.problem, sizeof at.problem, "%s", p.problem);
            at.island = p.island;
            at.stage = KV_STAGE_FULL;
            at.verdict = random_verdict(&rng);
            at.program_id = id;
            at.parent_id = p.n_parents ? p.parents[0] : 0;
            at.time_ns = (int64_t)(attempts + k + 1);
            at.wall_s = 0.5;
            if (kv_add_attempt(t, &at, NULL, &err) != 0)
                child_fail("add attempt", &err);
            if (kv_test_rand(&rng) % 3 != 0) {
                p.id = id;
                p.verdict = at.verdict;
                p.speedup = at.verdict == KV_VERDICT_OK
                                ? 0.5 + (double)(kv_test_rand(&rng) % 1000) / 250.0
                                : 0;
                p.n_sizes = 1;
                snprintf(p.sizes[0].name, sizeof p.sizes[0].name, "64MiB");
                p.sizes[0].ref_us = 100;
                p.sizes[0].cand_us = p.speedup > 0 ? 100 / p.speedup : 0;
                p.sizes[0].ok = at.verdict == KV_VERDICT_OK;
                snprintf(p.cell, sizeof p.cell, "%s", cells[kv_test_rand(&rng) % N_CELLS]);
                p.evidence = "{\"sass\":[\"LDG.E.128\"]}";
                p.evaluated_ns = (int64_t)want;
                if (kv_set_result(t, &p, &err) != 0)
                    child_fail("set result", &err);
                if (at.verdict == KV_VERDICT_OK) {
                    kv_elite e;
                    memset(&e, 0, sizeof e);
                    snprintf(e.problem, sizeof e.problem, "%s", p.problem);
                    e.island = p.island;
                    snprintf(e.cell, sizeof e.cell, "%s", p.cell);
                    e.program_id = id;
                    e.fitness = p.speedup;
                    if (kv_offer_elite(t, &e, NULL, NULL, &err) != 0)
                        child_fail("offer elite", &err);
                }
            }
        }
        if (programs > 0 && kv_test_rand(&rng) % 8 == 0) {
            /* an earlier program's source again, with a comment added: the
             * dedup index gives its id back and no program is added */
            uint64_t old = 1 + kv_test_rand(&rng) % programs, id;
            int existed;
            kv_program p;
            memset(&p, 0, sizeof p);
            snprintf(p.problem, sizeof p.problem, "%s", problem_of(old));
            static const char note[] = "/* proposed again */\n";
            memcpy(src, note, sizeof note - 1);
            src_of(src + sizeof note - 1, MAX_SRC + 1, old);
            if (kv_add_program(t, &p, src, strlen(src), &id, &existed, &err) != 0)
                child_fail("add duplicate", &err);
            if (id != old || !existed) {
                fprintf(stderr, "writer child: program %llu again got id %llu (existed %d)\n",
                        (unsigned long long)old, (unsigned long long)id, existed);
                _exit(3);
            }
        }
        if (kv_test_rand(&rng) % 10 == 0) {
            /* re-seed an island: its elites go */
            int32_t island = (int32_t)(kv_test_rand(&rng) % N_ISLANDS);
            if (kv_clear_island(t, problems[kv_test_rand(&rng) % N_PROBLEMS], island, NULL, &err) !=
                0)
                child_fail("clear island", &err);
        }
        for (uint64_t k = 0; k < extra; k++) {
            kv_attempt at;
            memset(&at, 0, sizeof at);
            snprintf(at.problem, sizeof at.problem, "%s", problems[k % N_PROBLEMS]);
            at.stage = KV_STAGE_PROPOSAL;
            at.verdict = KV_VERDICT_PROPOSAL_ERROR;
            at.detail = "the model's reply held no code block";
            if (kv_add_attempt(t, &at, NULL, &err) != 0)
                child_fail("add proposal attempt", &err);
        }
        kv_run_state s;
        memset(&s, 0, sizeof s);
        s.rng[0] = rng;
        s.rng[1] = seed;
        s.evaluations = attempts + n + extra; /* counted here, not read from the archive */
        s.updated_ns = (int64_t)(programs + n);
        if (kv_put_state(t, &s, &err) != 0)
            child_fail("put state", &err);
        send_report(fd, MSG_COMMITTING, programs + n, attempts + n + extra, 0);
        if (kv_txn_commit(t, &err) != 0)
            child_fail("commit", &err);
        programs += n;
        attempts += n + extra;
        send_report(fd, MSG_COMMIT, programs, attempts, kv_archive_map_bytes(a));
    }
}

/* ---- the verification ---------------------------------------------------- */

typedef struct {
    kv_txn *t;
    uint64_t next;     /* the id expected next */
    uint64_t programs; /* per counters */
    char *want;        /* expected source buffer */
    int bad;
    char why[1200];
} prog_ctx;

static int bad(prog_ctx *x, const char *fmt, ...) KV_PRINTF(2, 3);
static int bad(prog_ctx *x, const char *fmt, ...)
{
    x->bad = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->why, sizeof x->why, fmt, ap);
    va_end(ap);
    return 1; /* stop: one failure is enough */
}

static int check_program(const kv_program *p, void *ctx, kv_err *err)
{
    prog_ctx *x = ctx;
    if (p->id != x->next)
        return bad(x, "program id %" PRIu64 " where the next was expected", p->id);
    x->next++;
    if (p->id > x->programs)
        return bad(x, "program %" PRIu64 " beyond the counted programs", p->id);
    if (strcmp(p->problem, problem_of(p->id)) != 0)
        return bad(x, "program %" PRIu64 ": problem %s", p->id, p->problem);
    uint64_t parents[KV_MAX_PARENTS];
    uint32_t n = parents_of(p->id, parents);
    if (p->n_parents != n || memcmp(p->parents, parents, n * sizeof parents[0]) != 0)
        return bad(x, "program %" PRIu64 ": parents are not the ones written", p->id);
    for (uint32_t i = 0; i < p->n_parents; i++)
        if (p->parents[i] == 0 || p->parents[i] >= p->id)
            return bad(x, "program %" PRIu64 ": parent is not an earlier program", p->id);
    if (p->source_len != src_len_of(p->id))
        return bad(x, "program %" PRIu64 ": source_len is not the length written", p->id);
    char *src = NULL;
    size_t len = 0;
    if (kv_get_source(x->t, p->id, &src, &len, err) != 0)
        return bad(x, "program %" PRIu64 ": source: %s", p->id, err->msg);
    uint8_t h[KV_SHA256_LEN];
    int ok = len == p->source_len && kv_source_hash(src, len, h) == 0 &&
             memcmp(h, p->source_hash, sizeof h) == 0;
    src_of(x->want, MAX_SRC + 1, p->id);
    int same = ok && strcmp(src, x->want) == 0;
    free(src);
    if (!ok)
        return bad(x, "program %" PRIu64 ": source does not match its source_hash or length",
                   p->id);
    if (!same)
        return bad(x, "program %" PRIu64 ": source is not the one written", p->id);
    return 0;
}

typedef struct {
    uint64_t next, programs;
    uint64_t by_verdict[KV_VERDICT_COUNT];
    int bad;
    char why[256];
} att_ctx;

static int check_attempt(const kv_attempt *a, void *ctx, kv_err *err)
{
    (void)err;
    att_ctx *x = ctx;
    if (a->seq != x->next) {
        x->bad = 1;
        snprintf(x->why, sizeof x->why, "attempt %llu where %llu was expected",
                 (unsigned long long)a->seq, (unsigned long long)x->next);
        return 1;
    }
    x->next++;
    if (a->program_id > x->programs) {
        x->bad = 1;
        snprintf(x->why, sizeof x->why, "attempt %llu refers to missing program %llu",
                 (unsigned long long)a->seq, (unsigned long long)a->program_id);
        return 1;
    }
    x->by_verdict[a->verdict]++;
    return 0;
}

typedef struct {
    kv_txn *t;
    uint64_t n;
    int bad;
    char why[1300];
} elite_ctx;

static int check_elite(const kv_elite *e, void *ctx, kv_err *err)
{
    elite_ctx *x = ctx;
    x->n++;
    kv_program p;
    int rc = kv_get_program(x->t, e->program_id, &p, err);
    if (rc != 0) {
        x->bad = 1;
        snprintf(x->why, sizeof x->why, "elite %s/%d/%s: program %llu: %s", e->problem, e->island,
                 e->cell, (unsigned long long)e->program_id, rc < 0 ? err->msg : "missing");
        return 1;
    }
    if (strcmp(p.problem, e->problem) != 0 || p.verdict != KV_VERDICT_OK) {
        x->bad = 1;
        snprintf(x->why, sizeof x->why, "elite %s/%d/%s: program %llu is not an ok %s program",
                 e->problem, e->island, e->cell, (unsigned long long)e->program_id, e->problem);
    }
    kv_program_clear(&p);
    return x->bad;
}

typedef struct {
    uint64_t programs, attempts;
} sum_ctx;

static int sum_problem(const kv_problem_stats *s, void *ctx, kv_err *err)
{
    (void)err;
    sum_ctx *x = ctx;
    x->programs += s->programs;
    x->attempts += s->attempts;
    return 0;
}

/* Opens the archive as the writer and checks that it is whole; *out gets its
 * counters. Returns 0 when everything holds. */
static int verify(kv_counters *out, char *want)
{
    kv_archive_opts o = {.initial_map_bytes = INITIAL_MAP};
    kv_archive *a = NULL;
    kv_err err;
    memset(&err, 0, sizeof err);
    int ok = 1;
#define FAIL_IF(cond, ...)               \
    do {                                 \
        KV_CHECKF(!(cond), __VA_ARGS__); \
        if (cond)                        \
            ok = 0;                      \
    } while (0)

    int rc = kv_archive_open(dir, &o, &a, &err);
    FAIL_IF(rc != 0, "the archive does not open after a kill: %s", err.msg);
    if (rc != 0)
        return -1;
    /* the dead writer's lock is released: a new write transaction begins */
    kv_txn *w;
    rc = kv_write_begin(a, &w, &err);
    FAIL_IF(rc != 0, "no write transaction after a kill: %s", err.msg);
    if (rc == 0)
        kv_txn_abort(w);

    kv_txn *t;
    kv_counters c;
    rc = kv_read_begin(a, &t, &err);
    FAIL_IF(rc != 0, "read begin: %s", err.msg);
    if (rc != 0) {
        kv_archive_close(a);
        return -1;
    }
    rc = kv_get_counters(t, &c, &err);
    FAIL_IF(rc != 0, "counters: %s", err.msg);
    if (rc == 0) {
        FAIL_IF(c.next_program_id != c.programs + 1, "next_program_id %llu with %llu programs",
                (unsigned long long)c.next_program_id, (unsigned long long)c.programs);
        FAIL_IF(c.next_attempt_seq != c.attempts + 1, "next_attempt_seq %llu with %llu attempts",
                (unsigned long long)c.next_attempt_seq, (unsigned long long)c.attempts);

        prog_ctx px = {.t = t, .next = 1, .programs = c.programs, .want = want};
        rc = kv_each_program(t, check_program, &px, &err);
        FAIL_IF(rc != 0, "kv_each_program: %s", err.msg);
        FAIL_IF(px.bad, "%s", px.why);
        FAIL_IF(!px.bad && px.next - 1 != c.programs, "%llu program records, counters say %llu",
                (unsigned long long)(px.next - 1), (unsigned long long)c.programs);

        att_ctx ax = {.next = 1, .programs = c.programs};
        rc = kv_each_attempt(t, 1, check_attempt, &ax, &err);
        FAIL_IF(rc != 0, "kv_each_attempt: %s", err.msg);
        FAIL_IF(ax.bad, "%s", ax.why);
        FAIL_IF(!ax.bad && ax.next - 1 != c.attempts, "%llu attempt records, counters say %llu",
                (unsigned long long)(ax.next - 1), (unsigned long long)c.attempts);
        uint64_t sum = 0;
        for (int v = 0; v < KV_VERDICT_COUNT; v++) {
            sum += c.attempts_by_verdict[v];
            FAIL_IF(!ax.bad && c.attempts_by_verdict[v] != ax.by_verdict[v],
                    "attempts_by_verdict[%d] %llu, records %llu", v,
                    (unsigned long long)c.attempts_by_verdict[v],
                    (unsigned long long)ax.by_verdict[v]);
        }
        FAIL_IF(sum != c.attempts, "attempts_by_verdict sums to %llu, attempts %llu",
                (unsigned long long)sum, (unsigned long long)c.attempts);

        elite_ctx ex = {.t = t};
        for (int i = 0; i < N_PROBLEMS && !ex.bad; i++) {
            rc = kv_each_elite(t, problems[i], -1, check_elite, &ex, &err);
            FAIL_IF(rc != 0, "kv_each_elite: %s", err.msg);
        }
        FAIL_IF(ex.bad, "%s", ex.why);
        FAIL_IF(!ex.bad && ex.n != c.elites, "%llu elite records, counters say %llu",
                (unsigned long long)ex.n, (unsigned long long)c.elites);

        kv_run_state s;
        rc = kv_get_state(t, &s, &err);
        if (c.attempts == 0) {
            FAIL_IF(rc != KV_NOTFOUND, "a state without attempts (%d)", rc);
        } else {
            FAIL_IF(rc != 0, "state: %s", rc < 0 ? err.msg : "missing");
            FAIL_IF(rc == 0 && s.evaluations != c.attempts, "state.evaluations %llu, attempts %llu",
                    (unsigned long long)s.evaluations, (unsigned long long)c.attempts);
        }

        sum_ctx sx = {0, 0};
        rc = kv_each_problem(t, sum_problem, &sx, &err);
        FAIL_IF(rc != 0, "kv_each_problem: %s", err.msg);
        FAIL_IF(sx.programs != c.programs || sx.attempts != c.attempts,
                "problem statistics sum to %llu programs, %llu attempts",
                (unsigned long long)sx.programs, (unsigned long long)sx.attempts);
        *out = c;
    }
    kv_txn_abort(t);
    kv_archive_close(a);
#undef FAIL_IF
    return ok ? 0 : -1;
}

/* ---- the parent's side ------------------------------------------------------ */

static double now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        abort();
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
    perror(what);
    if (live_child > 0)
        kill(live_child, SIGKILL);
    exit(2);
}

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "test_archive_crash: watchdog: the test took too long\n";
    if (live_child > 0)
        kill(live_child, SIGKILL);
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(1);
}

typedef struct {
    pid_t pid;
    int fd; /* read end of its report pipe; -1 at EOF */
    uint8_t buf[sizeof(report) * 4];
    size_t have;
    report last; /* the last report */
    int n_reports, commits;
    report open, last_commit;
    int opened;
    uint64_t max_map;
} writer;

static void start_writer(writer *w, uint64_t seed)
{
    int p[2];
    if (pipe(p) != 0)
        die("pipe");
    memset(w, 0, sizeof *w);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        if (close(p[0]) != 0)
            _exit(3);
        writer_child(p[1], seed);
        _exit(3);
    }
    if (close(p[1]) != 0)
        die("close");
    w->pid = pid;
    w->fd = p[0];
    live_child = pid;
}

static void on_report(writer *w, const report *r)
{
    w->last = *r;
    w->n_reports++;
    if (r->kind == MSG_OPEN) {
        w->opened = 1;
        w->open = *r;
        w->last_commit = *r;
    } else if (r->kind == MSG_COMMIT) {
        w->commits++;
        w->last_commit = *r;
    }
    if (r->map_bytes > w->max_map)
        w->max_map = r->map_bytes;
}

/* Reads what is there (waiting up to timeout_ms); 0 at EOF, 1 otherwise. */
static int pump(writer *w, int timeout_ms)
{
    if (w->fd < 0)
        return 0;
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    int n = poll(&pfd, 1, timeout_ms);
    if (n < 0 && errno != EINTR)
        die("poll");
    if (n <= 0)
        return 1;
    ssize_t r = read(w->fd, w->buf + w->have, sizeof w->buf - w->have);
    if (r < 0 && errno == EINTR)
        return 1;
    if (r < 0)
        die("read");
    if (r == 0) {
        if (close(w->fd) != 0)
            die("close");
        w->fd = -1;
        return 0;
    }
    w->have += (size_t)r;
    while (w->have >= sizeof(report)) {
        report rep;
        memcpy(&rep, w->buf, sizeof rep);
        on_report(w, &rep);
        memmove(w->buf, w->buf + sizeof rep, w->have - sizeof rep);
        w->have -= sizeof rep;
    }
    return 1;
}

/* Reads reports until the deadline (or EOF). */
static void pump_until(writer *w, double deadline)
{
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0 || !pump(w, (int)(left + 0.999)))
            return;
    }
}

/* Kills the writer, reads its last reports, reaps it. Returns 1 when it died
 * of the SIGKILL (0 when it had exited by itself: a failure). */
static int kill_writer(writer *w)
{
    if (kill(w->pid, SIGKILL) != 0 && errno != ESRCH)
        die("kill");
    while (pump(w, 1000))
        ;
    int status;
    while (waitpid(w->pid, &status, 0) != w->pid)
        if (errno != EINTR)
            die("waitpid");
    live_child = 0;
    KV_CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "the writer child ended by itself (status %d): see its message above", status);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end) {
        fprintf(stderr, "%s=%s: not a number\n", name, s);
        exit(2);
    }
    return v;
}

/* Tallies of where the kills landed. */
static int n_between, n_lost, n_commit_lost, n_commit_kept, n_before_open, n_grew;

static void test_kill_loop(void)
{
    kv_test_fresh_dir(dir, sizeof dir, "archive-crash");
    uint64_t kills = env_u64("KEVO_CRASH_KILLS", DEFAULT_KILLS);
    if (kills < MIN_KILLS)
        kills = MIN_KILLS;
    /* verification reads the whole archive after each kill: quadratic */
    alarm((unsigned)((120 + kills * kills / 10) * (KV_UNDER_ASAN ? 3 : 1)));
    uint64_t seed = env_u64("KEVO_CRASH_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20);
    printf("seed %llu (KEVO_CRASH_SEED), %llu kills (KEVO_CRASH_KILLS)%s\n",
           (unsigned long long)seed, (unsigned long long)kills,
           KV_UNDER_ASAN ? ", AddressSanitizer: smaller transactions" : "");
    uint64_t rng = seed;
    char *want = malloc(MAX_SRC + 1);
    KV_REQUIRE(want);

    kv_counters have = {.next_program_id = 1, .next_attempt_seq = 1};
    uint64_t first_total = 0;
    int progressed = 0;
    double t0 = now_ms();
    for (uint64_t k = 0; k < kills; k++) {
        writer w;
        start_writer(&w, mix(seed, k));
        double started = now_ms();
        /* most kills count from the child's report that it has opened the
         * archive; one in seven (after the first run) from the fork, to land
         * in the open itself */
        int from_fork = k > 0 && k % 7 == 3;
        double delay = (double)(kv_test_rand(&rng) % (MAX_DELAY_US + 1)) / 1000.0;
        if (from_fork)
            delay /= 6;
        else
            while (!w.opened && w.fd >= 0 && now_ms() - started < 10000)
                pump(&w, 100);
        KV_CHECKF(from_fork || w.opened, "kill %llu: the writer did not open the archive",
                  (unsigned long long)k);
        pump_until(&w, now_ms() + delay);
        double killed_at = now_ms() - started;
        if (!kill_writer(&w))
            break;

        const char *where;
        uint64_t lost = 0;
        kv_counters c;
        if (verify(&c, want) != 0) {
            fprintf(stderr,
                    "kill %llu: the archive in %s is not whole (see above); "
                    "KEVO_KEEP_TEST_DIRS=1 keeps it\n",
                    (unsigned long long)k, dir);
            break;
        }
        if (w.opened) {
            KV_CHECKF(w.open.programs == have.programs && w.open.attempts == have.attempts,
                      "kill %llu: the writer started from %llu programs, %llu attempts; the "
                      "archive had %llu, %llu",
                      (unsigned long long)k, (unsigned long long)w.open.programs,
                      (unsigned long long)w.open.attempts, (unsigned long long)have.programs,
                      (unsigned long long)have.attempts);
        }
        /* all or nothing: the last reported commit, or the whole transaction
         * that was under way */
        if (!w.opened) {
            where = "before the open finished";
            n_before_open++;
            KV_CHECK(c.programs == have.programs && c.attempts == have.attempts);
        } else if (w.last.kind == MSG_OPEN || w.last.kind == MSG_COMMIT) {
            where = "between transactions";
            n_between++;
            KV_CHECKF(
                c.programs == w.last_commit.programs && c.attempts == w.last_commit.attempts,
                "kill %llu: archive has %llu programs, %llu attempts; the last commit %llu, %llu",
                (unsigned long long)k, (unsigned long long)c.programs,
                (unsigned long long)c.attempts, (unsigned long long)w.last_commit.programs,
                (unsigned long long)w.last_commit.attempts);
        } else if (w.last.kind == MSG_COMMITTING && c.programs == w.last.programs &&
                   c.attempts == w.last.attempts) {
            where = "in or after a commit, kept";
            n_commit_kept++;
        } else {
            /* killed while building the transaction, or in a commit that had
             * not reached its meta page: nothing of it may be there */
            where = w.last.kind == MSG_COMMITTING ? "in a commit, lost" : "mid-transaction";
            if (w.last.kind == MSG_COMMITTING)
                n_commit_lost++;
            else
                n_lost++;
            lost = w.last.programs - w.last_commit.programs;
            KV_CHECKF(c.programs == w.last_commit.programs && c.attempts == w.last_commit.attempts,
                      "kill %llu (%s): archive has %llu programs, %llu attempts; the last commit "
                      "had %llu, %llu, the transaction under way %llu, %llu",
                      (unsigned long long)k, where, (unsigned long long)c.programs,
                      (unsigned long long)c.attempts, (unsigned long long)w.last_commit.programs,
                      (unsigned long long)w.last_commit.attempts,
                      (unsigned long long)w.last.programs, (unsigned long long)w.last.attempts);
        }
        if (w.opened && w.max_map > w.open.map_bytes)
            n_grew++;
        if (c.programs > have.programs)
            progressed++;
        char lost_msg[64] = "";
        if (lost)
            snprintf(lost_msg, sizeof lost_msg, " (%llu uncommitted programs lost)",
                     (unsigned long long)lost);
        printf("kill %2llu at %5.1f ms: %-33s %3d commits, %6llu programs, %6llu attempts, "
               "%2llu elites, map %5.1f MiB%s\n",
               (unsigned long long)k, killed_at, where, w.commits, (unsigned long long)c.programs,
               (unsigned long long)c.attempts, (unsigned long long)c.elites, w.max_map / 1048576.0,
               lost_msg);
        if (k == 0)
            first_total = c.programs;
        have = c;
    }
    double took = now_ms() - t0;
    printf("kills: %d between transactions, %d mid-transaction (uncommitted work lost), "
           "%d in a commit (lost), %d in or just after a commit (kept), %d during the open; "
           "%d runs grew the map; %d of %llu runs committed; %llu programs, %llu attempts "
           "in %.1f s\n",
           n_between, n_lost, n_commit_lost, n_commit_kept, n_before_open, n_grew, progressed,
           (unsigned long long)kills, (unsigned long long)have.programs,
           (unsigned long long)have.attempts, took / 1000);
    KV_CHECKF(have.programs > first_total, "writing did not continue after the kills (%llu, %llu)",
              (unsigned long long)have.programs, (unsigned long long)first_total);
    /* a slow disk (each commit is fsynced) makes more kills land before the
     * first commit of a run; a quarter of the runs must still commit */
    KV_CHECKF(progressed * 4 >= (int)kills, "only %d runs of %llu committed anything", progressed,
              (unsigned long long)kills);
    KV_CHECKF(n_lost + n_commit_lost > 0, "no kill landed inside a transaction");
    KV_CHECKF(n_grew > 0, "the map never grew during a run");
    free(want);
}

/* ---- a reader beside the writer --------------------------------------------- */

typedef struct {
    uint64_t iterations, first, last, distinct;
} reader_result;

static int count_program(const kv_program *p, void *ctx, kv_err *err)
{
    (void)p;
    (void)err;
    (*(uint64_t *)ctx)++;
    return 0;
}

/* Counts programs over and over (each count checked against the snapshot's
 * counters, never going back) until it has seen the count change a few
 * times, or for 3 s at most. */
static void reader_child(int fd)
{
    kv_archive_opts o = {.readonly = 1};
    kv_archive *a;
    kv_err err;
    memset(&err, 0, sizeof err);
    if (kv_archive_open(dir, &o, &a, &err) != 0) {
        fprintf(stderr, "reader child: open: %s\n", err.msg);
        _exit(3);
    }
    reader_result r = {0, 0, 0, 0};
    double start = now_ms();
    while (now_ms() - start < 3000 && (r.distinct < 4 || r.iterations < 10)) {
        kv_txn *t;
        kv_counters c;
        uint64_t n = 0;
        if (kv_read_begin(a, &t, &err) != 0 || kv_get_counters(t, &c, &err) != 0 ||
            kv_each_program(t, count_program, &n, &err) != 0) {
            fprintf(stderr, "reader child: %s\n", err.msg);
            _exit(3);
        }
        kv_txn_abort(t);
        if (n != c.programs || n < r.last) {
            fprintf(stderr, "reader child: counted %llu programs, counters %llu, before %llu\n",
                    (unsigned long long)n, (unsigned long long)c.programs,
                    (unsigned long long)r.last);
            _exit(4);
        }
        if (r.iterations == 0)
            r.first = n;
        if (r.iterations == 0 || n != r.last)
            r.distinct++;
        r.last = n;
        r.iterations++;
    }
    kv_archive_close(a);
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(3);
    _exit(0);
}

static void test_reader_beside_writer(void)
{
    KV_REQUIRE(dir[0]);
    alarm(KV_UNDER_ASAN ? 300 : 120);
    char *want = malloc(MAX_SRC + 1);
    KV_REQUIRE(want);
    writer w;
    start_writer(&w, 12345);
    double started = now_ms();
    while (w.commits < 1 && w.fd >= 0 && now_ms() - started < 10000)
        pump(&w, 100);
    KV_CHECKF(w.commits >= 1, "the writer did not commit");

    int p[2];
    if (pipe(p) != 0)
        die("pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        if (close(p[0]) != 0 || (w.fd >= 0 && close(w.fd) != 0))
            _exit(3);
        reader_child(p[1]);
    }
    if (close(p[1]) != 0)
        die("close");
    /* keep reading the writer's reports (so it never blocks on its pipe)
     * until the reader is done */
    int commits_before = w.commits;
    double rstart = now_ms();
    reader_result r;
    size_t got = 0;
    int timed_out = 0;
    for (;;) {
        if (now_ms() - rstart > 10000) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int n = poll(&pfd, 1, 0);
        if (n < 0 && errno != EINTR)
            die("poll");
        if (n > 0) {
            ssize_t rd = read(p[0], (char *)&r + got, sizeof r - got);
            if (rd < 0 && errno != EINTR)
                die("read");
            if (rd == 0)
                break;
            if (rd > 0)
                got += (size_t)rd;
            continue;
        }
        pump(&w, 5);
    }
    double rtook = now_ms() - rstart;
    int status = 0;
    if (timed_out && kill(pid, SIGKILL) != 0)
        die("kill");
    while (waitpid(pid, &status, 0) != pid)
        if (errno != EINTR)
            die("waitpid");
    if (close(p[0]) != 0)
        die("close");
    int writer_commits = w.commits - commits_before;
    kill_writer(&w);
    KV_CHECKF(!timed_out, "the reader did not finish within 10 s");
    KV_CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader status %d", status);
    KV_CHECK(got == sizeof r);
    if (got == sizeof r) {
        printf("reader beside the writer: %llu counts in %.0f ms, %llu -> %llu programs "
               "(%llu distinct); the writer committed %d times meanwhile\n",
               (unsigned long long)r.iterations, rtook, (unsigned long long)r.first,
               (unsigned long long)r.last, (unsigned long long)r.distinct, writer_commits);
        KV_CHECKF(r.distinct >= 2 && r.last > r.first,
                  "the reader never saw the writer's commits (%llu distinct counts)",
                  (unsigned long long)r.distinct);
    }
    KV_CHECKF(writer_commits > 0, "the writer did not commit while the reader read");
    kv_counters c;
    KV_CHECK(verify(&c, want) == 0);
    free(want);
}

int main(void)
{
    if (KV_UNDER_ASAN)
        max_batch = 20;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog;
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        die("sigaction");
    alarm(KV_UNDER_ASAN ? 600 : 300);
    KV_RUN(test_kill_loop);
    KV_RUN(test_reader_beside_writer);
    return kv_test_summary();
}
