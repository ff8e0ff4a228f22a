/* archive_bench.c — throughput and latency of the LMDB archive at scale.
 *
 *   archive_bench [--programs N] [--offers N] [--attempts N] [--batch N]
 *                 [--dir DIR] [--keep] [--no-results] [--seed S]
 *   archive_bench --exec-times R [--warmup W] -- COMMAND ARGS...
 *
 * The first form builds an archive the way a long search would and measures
 * each kind of write separately, each in batched write transactions of
 * --batch operations (one commit, with its fsync, per batch):
 *
 *   programs   kv_add_program of N distinct CUDA-like sources of 1-8 KiB
 *              (uniform), spread over 8 problems x 4 islands, each with 1-2
 *              parents of the same problem (seeds have none). Sources are
 *              generated outside the timed region; the figure covers
 *              normalisation, SHA-256, compression, record encoding, LMDB
 *              puts and the commit.
 *   results    kv_set_result for every program (about half ok with a speedup,
 *              the rest failures), so that rankings and cells are populated
 *              as in a real run (skip with --no-results).
 *   attempts   kv_add_attempt (default: 100,000).
 *   offers     kv_offer_elite with random fitness over
 *              (problem, island, cell) = 8 x 4 x 8 cells.
 *
 * Then: time to open the finished archive (writer and reader), latency of a
 * read snapshot, kv_top_k(10), kv_get_program + kv_get_source; a CPU
 * breakdown of the per-program work (normalise, SHA-256, zstd, CRC-32) on a
 * sample; and the size of archive.mdb against the raw source bytes, with the
 * pages of each named database.
 *
 * The second form fork/execs COMMAND R times (stdout and stderr to
 * /dev/null) and reports wall-clock latency percentiles: it times
 * `kevo archive show` for run_archive_bench.sh.
 *
 * Output: a table for people, and lines `BENCH <name> <value> <unit>` for
 * scripts. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "archive/record.h" /* kv_crc32, for the CPU breakdown */
#include "archive/srccode.h"
#include "archive/zdict.h"
#include "archive/archive.h"
#include "common/cell.h"
#include "common/sha256.h"
#include "common/source.h"
#include "test_util.h"

#define N_PROBLEMS 8
#define N_ISLANDS 4
#define SRC_MIN 1024
#define SRC_MAX 8192
#define SEED_PER_PROBLEM 64 /* the first programs of a problem have no parents */
#define PARENT_WINDOW 4096  /* parents come from the last this many of a problem */

static const char *const problems[N_PROBLEMS] = {
    "allreduce", "allgather",      "reduce_scatter", "alltoall",
    "broadcast", "gemm_allreduce", "allgather_gemm", "gemm_reduce_scatter",
};
static const char *const op_names[] = {"seed", "template", "llm",      "llm",
                                       "llm",  "migrate",  "crossover"};
static const char *const models[] = {"claude-sonnet", "gpt-5",      "allreduce_sm",
                                     "ring_tma",      "nvls_fused", "ll128"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- timing helpers ---------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of v[0..n) (sorts v). */
static double pct(double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

static void line(const char *name, double value, const char *unit)
{
    printf("BENCH %s %.6g %s\n", name, value, unit);
}

static void die(const char *what, const kv_err *err)
{
    fprintf(stderr, "archive_bench: %s: %s\n", what, err ? err->msg : strerror(errno));
    exit(1);
}

static double urand(uint64_t *st)
{
    return (double)(kv_test_rand(st) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- argument parsing ------------------------------------------------------- */

typedef struct {
    long programs, offers, attempts, batch;
    const char *dir;
    int keep, results;
    uint64_t seed;
    long exec_times, warmup;
    char **exec_argv;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: archive_bench [--programs N] [--offers N] [--attempts N] [--batch N]\n"
               "                     [--dir DIR] [--keep] [--no-results] [--seed S]\n"
               "       archive_bench --exec-times R [--warmup W] -- COMMAND ARGS...\n"
               "defaults: --programs 1000000 --offers 100000 --attempts 100000 --batch 1000;\n"
               "without --dir the archive goes to a new directory under $TMPDIR (or /tmp),\n"
               "removed at the end unless --keep.\n");
}

static long parse_count(const char *flag, const char *v)
{
    char *end;
    errno = 0;
    long n = strtol(v ? v : "", &end, 10);
    if (!v || errno || *end || n < 0) {
        fprintf(stderr, "archive_bench: %s needs a non-negative integer\n", flag);
        exit(2);
    }
    return n;
}

static void parse(int argc, char **argv, opts *o)
{
    *o = (opts){.programs = 1000000,
                .offers = 100000,
                .attempts = 100000,
                .batch = 1000,
                .results = 1,
                .seed = 1,
                .warmup = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--programs") == 0)
            o->programs = parse_count(a, v), i++;
        else if (strcmp(a, "--offers") == 0)
            o->offers = parse_count(a, v), i++;
        else if (strcmp(a, "--attempts") == 0)
            o->attempts = parse_count(a, v), i++;
        else if (strcmp(a, "--batch") == 0)
            o->batch = parse_count(a, v), i++;
        else if (strcmp(a, "--seed") == 0)
            o->seed = (uint64_t)parse_count(a, v), i++;
        else if (strcmp(a, "--exec-times") == 0)
            o->exec_times = parse_count(a, v), i++;
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = parse_count(a, v), i++;
        else if (strcmp(a, "--dir") == 0 && v)
            o->dir = v, i++;
        else if (strcmp(a, "--keep") == 0)
            o->keep = 1;
        else if (strcmp(a, "--no-results") == 0)
            o->results = 0;
        else if (strcmp(a, "--") == 0) {
            o->exec_argv = argv + i + 1;
            break;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "archive_bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o->batch < 1)
        o->batch = 1;
}

/* ---- --exec-times: wall-clock latency of a command ---------------------------- */

static double run_once(char **argv)
{
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0)
        die("fork", NULL);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("waitpid", NULL);
    double t = now_s() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "archive_bench: '%s' failed (status %d)\n", argv[0],
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        exit(1);
    }
    return t;
}

static int exec_times(const opts *o)
{
    if (!o->exec_argv || !o->exec_argv[0]) {
        fprintf(stderr, "archive_bench: --exec-times needs -- COMMAND ARGS...\n");
        return 2;
    }
    for (long i = 0; i < o->warmup; i++)
        run_once(o->exec_argv);
    long n = o->exec_times ? o->exec_times : 1;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        die("malloc", NULL);
    double sum = 0;
    for (long i = 0; i < n; i++) {
        t[i] = run_once(o->exec_argv);
        sum += t[i];
    }
    double p50 = pct(t, (size_t)n, 50), p99 = pct(t, (size_t)n, 99);
    printf("%-28s %ld runs (after %ld warm-up): mean %.2f ms  p50 %.2f ms  p99 %.2f ms  "
           "min %.2f ms  max %.2f ms\n",
           "exec latency", n, o->warmup, sum / (double)n * 1e3, p50 * 1e3, p99 * 1e3, t[0] * 1e3,
           t[n - 1] * 1e3);
    line("exec_runs", (double)n, "count");
    line("exec_mean_ms", sum / (double)n * 1e3, "ms");
    line("exec_p50_ms", p50 * 1e3, "ms");
    line("exec_p99_ms", p99 * 1e3, "ms");
    line("exec_max_ms", t[n - 1] * 1e3, "ms");
    free(t);
    return 0;
}

/* ---- the archive benchmark --------------------------------------------------- */

/* What the process has cost so far: CPU time (getrusage) and bytes handed to
 * write(2)-like calls (/proc/self/io: wchar; LMDB writes its dirty pages with
 * pwrite/writev, so this is what a commit writes to archive.mdb). */
typedef struct {
    double cpu_s;
    double wchar;
} usage_t;

static void usage_now(usage_t *u)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    u->cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    u->wchar = NAN;
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return;
    char key[64];
    unsigned long long v;
    while (fscanf(f, "%63[^:]: %llu\n", key, &v) == 2) {
        if (strcmp(key, "wchar") == 0)
            u->wchar = (double)v;
    }
    fclose(f);
}

typedef struct {
    double txn_s;    /* begin .. commit, summed over batches */
    double commit_s; /* kv_txn_commit alone */
    double *batch_s; /* per-batch time, for percentiles */
    size_t n_batches;
    long ops;
    double wall0;
    double excluded_s; /* CPU-only work outside the figures (generating sources) */
    usage_t u0;
} phase;

static void phase_init(phase *p, long ops, long batch)
{
    memset(p, 0, sizeof *p);
    p->ops = ops;
    p->wall0 = now_s();
    usage_now(&p->u0);
    size_t nb = (size_t)((ops + batch - 1) / batch);
    p->batch_s = calloc(nb ? nb : 1, sizeof *p->batch_s);
    if (!p->batch_s)
        die("calloc", NULL);
}

static void phase_report(const char *name, phase *p, long batch)
{
    double rate = p->txn_s > 0 ? (double)p->ops / p->txn_s : 0;
    double b50 = pct(p->batch_s, p->n_batches, 50), b99 = pct(p->batch_s, p->n_batches, 99);
    double bmax = p->n_batches ? p->batch_s[p->n_batches - 1] : NAN;
    usage_t u1;
    usage_now(&u1);
    double wall = now_s() - p->wall0, ops = p->ops > 0 ? (double)p->ops : 1;
    wall -= p->excluded_s;
    double cpu = wall > 0 ? (u1.cpu_s - p->u0.cpu_s - p->excluded_s) / wall : 0;
    double wchar = (u1.wchar - p->u0.wchar) / ops;
    printf("%-28s %10ld ops  %8.2f s  %10.0f ops/s  commit %4.1f%%  batch p50 %.1f ms p99 %.1f ms "
           "max %.1f ms\n",
           name, p->ops, p->txn_s, rate, p->txn_s > 0 ? 100 * p->commit_s / p->txn_s : 0, b50 * 1e3,
           b99 * 1e3, bmax * 1e3);
    printf(
        "%-28s CPU busy %.0f%% of the phase's wall time; %.1f KiB written to archive.mdb per op\n",
        "", 100 * cpu, wchar / 1024);
    char key[64];
    snprintf(key, sizeof key, "%s_cpu_fraction", name);
    line(key, cpu, "fraction");
    snprintf(key, sizeof key, "%s_write_bytes_per_op", name);
    line(key, wchar, "bytes");
    snprintf(key, sizeof key, "%s_per_s", name);
    line(key, rate, "ops/s");
    snprintf(key, sizeof key, "%s_count", name);
    line(key, (double)p->ops, "count");
    snprintf(key, sizeof key, "%s_seconds", name);
    line(key, p->txn_s, "s");
    snprintf(key, sizeof key, "%s_commit_seconds", name);
    line(key, p->commit_s, "s");
    snprintf(key, sizeof key, "%s_batch_p50_ms", name);
    line(key, b50 * 1e3, "ms");
    snprintf(key, sizeof key, "%s_batch_p99_ms", name);
    line(key, b99 * 1e3, "ms");
    (void)batch;
    free(p->batch_s);
    p->batch_s = NULL;
}

static size_t source_len_of(uint64_t *st)
{
    return SRC_MIN + (size_t)(kv_test_rand(st) % (SRC_MAX - SRC_MIN + 1));
}

/* The i-th program's source: its seed is i, so runs are reproducible. */
/* Sources are a distinct first line ("int kv_program_<i> = <i>;") on one of
 * POOL pre-generated CUDA-like bodies of 1-8 KiB: every normalised source
 * is different, compression sees realistic text, and making a source costs
 * a copy, so the figures measure the archive and not the generator. */
#define POOL 32768
static char *pool_text[POOL];
static size_t pool_len[POOL];

static void make_pool(uint64_t seed)
{
    for (long k = 0; k < POOL; k++) {
        uint64_t st = seed * 1000003u + (uint64_t)k;
        size_t len = source_len_of(&st);
        if (!(pool_text[k] = malloc(len + 1)))
            die("malloc", NULL);
        kv_test_random_source(pool_text[k], len + 1, seed * 10000019u + (uint64_t)k, len);
        pool_len[k] = len;
    }
}

static size_t make_source(char *buf, uint64_t seed, long i)
{
    (void)seed;
    const char *body = pool_text[i % POOL];
    size_t blen = pool_len[i % POOL];
    int n = snprintf(buf, SRC_MAX + 1, "int kv_program_%ld = %ld;\n", i, i);
    if (n < 0 || (size_t)n + blen > SRC_MAX)
        blen = SRC_MAX - (size_t)n;
    memcpy(buf + n, body, blen);
    buf[n + blen] = 0;
    return (size_t)n + blen;
}

static void begin(kv_archive *a, kv_txn **t)
{
    kv_err err = {{0}};
    if (kv_write_begin(a, t, &err) != 0)
        die("kv_write_begin", &err);
}

static void commit(kv_txn *t, phase *ph, double t0)
{
    kv_err err = {{0}};
    double c0 = now_s();
    if (kv_txn_commit(t, &err) != 0)
        die("kv_txn_commit", &err);
    double t1 = now_s();
    ph->commit_s += t1 - c0;
    ph->txn_s += t1 - t0;
    ph->batch_s[ph->n_batches++] = t1 - t0;
}

/* programs: returns the raw source bytes inserted. ids[i] receives program i's id. */
/* The programs of batch [first, first + n): sources and records. Program i
 * gets id i + 1 (a new archive, no duplicates), so parents are known ahead. */
static uint64_t make_batch(const opts *o, long first, long n, char *srcs, size_t stride,
                           size_t *lens, kv_program *progs, uint64_t *st)
{
    uint64_t raw = 0;
    for (long j = 0; j < n; j++) {
        long i = first + j;
        lens[j] = make_source(srcs + (size_t)j * stride, o->seed, i);
        raw += lens[j];
        kv_program *p = &progs[j];
        memset(p, 0, sizeof *p);
        int pr = (int)(i % N_PROBLEMS);
        snprintf(p->problem, sizeof p->problem, "%s", problems[pr]);
        p->island = (int32_t)(kv_test_rand(st) % N_ISLANDS);
        long nth = i / N_PROBLEMS; /* index among the problem's programs */
        if (nth < SEED_PER_PROBLEM) {
            snprintf(p->op, sizeof p->op, "seed");
        } else {
            snprintf(p->op, sizeof p->op, "%s",
                     op_names[1 + kv_test_rand(st) % (COUNT(op_names) - 1)]);
            long window = nth < PARENT_WINDOW ? nth : PARENT_WINDOW;
            p->n_parents = 1 + (uint32_t)(kv_test_rand(st) % 2);
            for (uint32_t k = 0; k < p->n_parents; k++) {
                long back = 1 + (long)(kv_test_rand(st) % (uint64_t)window);
                p->parents[k] = (uint64_t)(i - back * N_PROBLEMS) + 1;
            }
        }
        snprintf(p->model, sizeof p->model, "%s", models[kv_test_rand(st) % COUNT(models)]);
        p->created_ns = 1700000000000000000ll + i * 1000000ll;
    }
    return raw;
}

/* Pipelined inserts: a producer thread makes and prepares batch k + 1
 * (kv_program_prepare: normalise, hash, compress, encode) while the main
 * thread adds batch k and commits it. */
typedef struct {
    const opts *o;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kv_prepared **ready[2]; /* double buffer of prepared batches */
    long first[2], count[2];
    int full[2];
    uint64_t raw;
    double gen_s;
} pipeline;

static void *producer(void *arg)
{
    pipeline *pl = arg;
    const opts *o = pl->o;
    size_t stride = SRC_MAX + 1;
    char *srcs = malloc((size_t)o->batch * stride);
    size_t *lens = malloc((size_t)o->batch * sizeof *lens);
    kv_program *progs = malloc((size_t)o->batch * sizeof *progs);
    if (!srcs || !lens || !progs)
        die("malloc", NULL);
    uint64_t st = o->seed ^ 0x5151;
    int slot = 0;
    for (long done = 0; done < o->programs; slot ^= 1) {
        long n = o->programs - done < o->batch ? o->programs - done : o->batch;
        pthread_mutex_lock(&pl->mu);
        while (pl->full[slot])
            pthread_cond_wait(&pl->cv, &pl->mu);
        pthread_mutex_unlock(&pl->mu);
        double g0 = now_s();
        uint64_t raw = make_batch(o, done, n, srcs, stride, lens, progs, &st);
        double g1 = now_s();
        for (long j = 0; j < n; j++) {
            kv_err err = {{0}};
            pl->ready[slot][j] =
                kv_program_prepare(&progs[j], srcs + (size_t)j * stride, lens[j], &err);
            if (!pl->ready[slot][j])
                die("kv_program_prepare", &err);
        }
        pthread_mutex_lock(&pl->mu);
        pl->raw += raw;
        pl->gen_s += g1 - g0;
        pl->first[slot] = done;
        pl->count[slot] = n;
        pl->full[slot] = 1;
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
        done += n;
    }
    free(srcs);
    free(lens);
    free(progs);
    return NULL;
}

/* programs: returns the raw source bytes inserted. ids[i] receives program i's id. */
static uint64_t bench_programs(kv_archive *a, const opts *o, uint64_t *ids, phase *ph,
                               double *gen_s)
{
    pipeline pl = {.o = o};
    pthread_mutex_init(&pl.mu, NULL);
    pthread_cond_init(&pl.cv, NULL);
    for (int s = 0; s < 2; s++)
        if (!(pl.ready[s] = calloc((size_t)o->batch, sizeof *pl.ready[s])))
            die("malloc", NULL);
    phase_init(ph, o->programs, o->batch);
    pthread_t th;
    if (pthread_create(&th, NULL, producer, &pl) != 0)
        die("pthread_create", NULL);
    double report_at = now_s() + 10, p0 = now_s();
    int slot = 0;
    for (long done = 0; done < o->programs; slot ^= 1) {
        pthread_mutex_lock(&pl.mu);
        while (!pl.full[slot])
            pthread_cond_wait(&pl.cv, &pl.mu);
        long first = pl.first[slot], n = pl.count[slot];
        pthread_mutex_unlock(&pl.mu);
        kv_txn *t;
        kv_err err = {{0}};
        double t0 = now_s();
        begin(a, &t);
        for (long j = 0; j < n; j++) {
            int existed = 0;
            if (kv_add_prepared(t, pl.ready[slot][j], &ids[first + j], &existed, &err) != 0)
                die("kv_add_prepared", &err);
            if (existed || ids[first + j] != (uint64_t)(first + j) + 1) {
                fprintf(stderr, "archive_bench: program %ld got id %llu (existed %d)\n", first + j,
                        (unsigned long long)ids[first + j], existed);
                exit(1);
            }
        }
        commit(t, ph, t0);
        pthread_mutex_lock(&pl.mu);
        pl.full[slot] = 0;
        pthread_cond_broadcast(&pl.cv);
        pthread_mutex_unlock(&pl.mu);
        done += n;
        if (now_s() > report_at) {
            fprintf(stderr, "  programs: %ld / %ld (%.0f/s so far)\n", done, o->programs,
                    (double)done / (now_s() - p0));
            report_at = now_s() + 10;
        }
    }
    pthread_join(th, NULL);
    /* the phase's rate is the pipeline's: wall time from the first batch to
     * the last commit, preparation included (it overlaps the commits) */
    ph->txn_s = now_s() - p0;
    *gen_s += pl.gen_s;
    for (int s = 0; s < 2; s++)
        free(pl.ready[s]);
    pthread_mutex_destroy(&pl.mu);
    pthread_cond_destroy(&pl.cv);
    return pl.raw;
}

static void bench_results(kv_archive *a, const opts *o, const uint64_t *ids, phase *ph)
{
    uint64_t st = o->seed ^ 0x7e57;
    phase_init(ph, o->programs, o->batch);
    static const char *const size_names[3] = {"small", "medium", "large"};
    static const kv_verdict fails[] = {KV_VERDICT_MISMATCH,      KV_VERDICT_COMPILE_ERROR,
                                       KV_VERDICT_COMPILE_ERROR, KV_VERDICT_RUNTIME_ERROR,
                                       KV_VERDICT_HANG,          KV_VERDICT_CRASH};
    char evidence[256];
    for (long done = 0; done < o->programs;) {
        long n = o->programs - done < o->batch ? o->programs - done : o->batch;
        kv_txn *t;
        kv_err err = {{0}};
        double t0 = now_s();
        begin(a, &t);
        for (long j = 0; j < n; j++) {
            kv_program p;
            memset(&p, 0, sizeof p);
            p.id = ids[done + j];
            if (urand(&st) < 0.5) {
                p.verdict = KV_VERDICT_OK;
                /* log-normal around 1x: most candidates are slower than NCCL */
                double g =
                    sqrt(-2 * log(urand(&st) + 1e-300)) * cos(6.283185307179586 * urand(&st));
                p.speedup = exp(0.35 * g - 0.1);
                p.roofline = 0.2 + 0.7 * urand(&st);
                p.n_sizes = 3;
                for (int s = 0; s < 3; s++) {
                    kv_size_result *r = &p.sizes[s];
                    snprintf(r->name, sizeof r->name, "%s", size_names[s]);
                    r->ref_us = 10.0 * pow(16, s);
                    r->cand_us = r->ref_us / p.speedup;
                    r->cand_p10_us = r->cand_us * 0.97;
                    r->cand_p90_us = r->cand_us * 1.04;
                    r->roofline_us = r->ref_us * 0.5;
                    r->ok = 1;
                }
                kv_cell_name((int)(kv_test_rand(&st) % KV_CELL_COUNT), p.cell);
                snprintf(evidence, sizeof evidence,
                         "{\"sass\":[\"LDG.E.128\",\"STG.E.128\",\"RED.E.ADD.F32\"],"
                         "\"ptx\":[\"cp.async.bulk\",\"mbarrier.try_wait\"],\"smem\":%llu}",
                         (unsigned long long)(kv_test_rand(&st) % 232448));
                p.evidence = evidence;
            } else {
                p.verdict = fails[kv_test_rand(&st) % COUNT(fails)];
            }
            p.evaluated_ns = 1700000000000000000ll + (done + j) * 1000000ll + 500000;
            if (kv_set_result(t, &p, &err) != 0)
                die("kv_set_result", &err);
        }
        commit(t, ph, t0);
        done += n;
    }
}

static void bench_attempts(kv_archive *a, const opts *o, const uint64_t *ids, phase *ph)
{
    uint64_t st = o->seed ^ 0xa77e;
    phase_init(ph, o->attempts, o->batch);
    char detail[128];
    for (long done = 0; done < o->attempts;) {
        long n = o->attempts - done < o->batch ? o->attempts - done : o->batch;
        kv_txn *t;
        kv_err err = {{0}};
        double t0 = now_s();
        begin(a, &t);
        for (long j = 0; j < n; j++) {
            kv_attempt at;
            memset(&at, 0, sizeof at);
            long pi = o->programs ? (long)(kv_test_rand(&st) % (uint64_t)o->programs) : -1;
            at.time_ns = 1700000000000000000ll + (done + j) * 1000000ll;
            snprintf(at.problem, sizeof at.problem, "%s", problems[pi >= 0 ? pi % N_PROBLEMS : 0]);
            at.island = (int32_t)(kv_test_rand(&st) % N_ISLANDS);
            at.stage = (kv_stage)(kv_test_rand(&st) % KV_STAGE_COUNT);
            at.program_id = pi >= 0 ? ids[pi] : 0;
            at.parent_id = pi >= N_PROBLEMS ? ids[pi - N_PROBLEMS] : 0;
            snprintf(at.op, sizeof at.op, "llm");
            snprintf(at.model, sizeof at.model, "%s", models[kv_test_rand(&st) % COUNT(models)]);
            at.wall_s = 5 + 20 * urand(&st);
            at.gpu_s = at.wall_s * 0.7;
            at.tokens_in = 4000 + kv_test_rand(&st) % 8000;
            at.tokens_out = 500 + kv_test_rand(&st) % 3000;
            at.cost_usd = 0.01 + 0.05 * urand(&st);
            if (urand(&st) < 0.5) {
                at.verdict = KV_VERDICT_OK;
                at.speedup = 0.5 + urand(&st);
            } else {
                at.verdict = KV_VERDICT_COMPILE_ERROR;
                snprintf(detail, sizeof detail,
                         "kernel.cu(%llu): error: identifier \"peer_ptr\" is undefined",
                         (unsigned long long)(kv_test_rand(&st) % 400));
                at.detail = detail;
            }
            if (kv_add_attempt(t, &at, NULL, &err) != 0)
                die("kv_add_attempt", &err);
        }
        commit(t, ph, t0);
        done += n;
    }
}

static void bench_offers(kv_archive *a, const opts *o, const uint64_t *ids, phase *ph,
                         long *accepted_total)
{
    uint64_t st = o->seed ^ 0x0ffe;
    phase_init(ph, o->offers, o->batch);
    long per_problem = o->programs / N_PROBLEMS;
    for (long done = 0; done < o->offers;) {
        long n = o->offers - done < o->batch ? o->offers - done : o->batch;
        kv_txn *t;
        kv_err err = {{0}};
        double t0 = now_s();
        begin(a, &t);
        for (long j = 0; j < n; j++) {
            kv_elite e;
            memset(&e, 0, sizeof e);
            int pr = (int)(kv_test_rand(&st) % N_PROBLEMS);
            snprintf(e.problem, sizeof e.problem, "%s", problems[pr]);
            e.island = (int32_t)(kv_test_rand(&st) % N_ISLANDS);
            kv_cell_name((int)(kv_test_rand(&st) % KV_CELL_COUNT), e.cell);
            long pi = per_problem > 0
                          ? (long)(kv_test_rand(&st) % (uint64_t)per_problem) * N_PROBLEMS + pr
                          : -1;
            e.program_id = pi >= 0 ? ids[pi] : (uint64_t)(done + j + 1);
            e.fitness = 4 * urand(&st);
            e.since_ns = 1700000000000000000ll + (done + j) * 1000ll;
            int acc = 0;
            if (kv_offer_elite(t, &e, &acc, NULL, &err) != 0)
                die("kv_offer_elite", &err);
            *accepted_total += acc;
        }
        commit(t, ph, t0);
        done += n;
    }
}

/* ---- reads ------------------------------------------------------------------- */

static void report_lat(const char *label, const char *key, double *v, size_t n)
{
    double p50 = pct(v, n, 50), p99 = pct(v, n, 99);
    printf("%-28s %10zu runs  p50 %8.1f us  p99 %8.1f us  max %8.1f us\n", label, n, p50 * 1e6,
           p99 * 1e6, v[n - 1] * 1e6);
    char k[64];
    snprintf(k, sizeof k, "%s_p50_us", key);
    line(k, p50 * 1e6, "us");
    snprintf(k, sizeof k, "%s_p99_us", key);
    line(k, p99 * 1e6, "us");
}

static void bench_open(const char *dir)
{
    enum { R = 20 };
    double rw[R], ro[R];
    for (int i = 0; i < R; i++) {
        kv_archive *a;
        kv_err err = {{0}};
        kv_archive_opts w = {0};
        double t0 = now_s();
        if (kv_archive_open(dir, &w, &a, &err) != 0)
            die("kv_archive_open (writer)", &err);
        rw[i] = now_s() - t0;
        kv_archive_close(a);
        kv_archive_opts r = {.readonly = 1};
        t0 = now_s();
        if (kv_archive_open(dir, &r, &a, &err) != 0)
            die("kv_archive_open (reader)", &err);
        ro[i] = now_s() - t0;
        kv_archive_close(a);
    }
    report_lat("open (writer)", "open_writer", rw, R);
    report_lat("open (reader)", "open_reader", ro, R);
}

static void bench_reads(const char *dir, const opts *o, const uint64_t *ids)
{
    kv_archive *a;
    kv_err err = {{0}};
    kv_archive_opts r = {.readonly = 1};
    if (kv_archive_open(dir, &r, &a, &err) != 0)
        die("kv_archive_open (reader)", &err);
    enum { R = 2000 };
    double *lat = malloc(R * sizeof *lat), *lat2 = malloc(R * sizeof *lat2);
    if (!lat || !lat2)
        die("malloc", NULL);

    /* a read snapshot, and kv_top_k(10) of each problem in turn inside a fresh one */
    uint64_t top[10];
    double sp[10];
    int found_min = 10;
    for (int i = 0; i < R; i++) {
        kv_txn *t;
        double t0 = now_s();
        if (kv_read_begin(a, &t, &err) != 0)
            die("kv_read_begin", &err);
        double t1 = now_s();
        int n = kv_top_k(t, problems[i % N_PROBLEMS], 10, top, sp, &err);
        double t2 = now_s();
        if (n < 0)
            die("kv_top_k", &err);
        if (n < found_min)
            found_min = n;
        kv_txn_abort(t);
        lat[i] = t1 - t0;
        lat2[i] = t2 - t1;
    }
    report_lat("read snapshot begin", "read_begin", lat, R);
    report_lat("kv_top_k(10)", "top_k", lat2, R);
    line("top_k_found_min", found_min, "count");

    /* a random program and its source */
    if (o->programs > 0) {
        uint64_t st = o->seed ^ 0x9e7;
        kv_txn *t;
        if (kv_read_begin(a, &t, &err) != 0)
            die("kv_read_begin", &err);
        for (int i = 0; i < R; i++) {
            uint64_t id = ids[kv_test_rand(&st) % (uint64_t)o->programs];
            kv_program p;
            char *src = NULL;
            size_t len = 0;
            double t0 = now_s();
            if (kv_get_program(t, id, &p, &err) != 0)
                die("kv_get_program", &err);
            double t1 = now_s();
            if (kv_get_source(t, p.id, &src, &len, &err) != 0)
                die("kv_get_source", &err);
            double t2 = now_s();
            if (len != p.source_len)
                die("source length differs", NULL);
            free(src);
            kv_program_clear(&p);
            lat[i] = t1 - t0;
            lat2[i] = t2 - t1;
        }
        kv_txn_abort(t);
        report_lat("kv_get_program", "get_program", lat, R);
        report_lat("kv_get_source", "get_source", lat2, R);
    }
    free(lat);
    free(lat2);
    kv_archive_close(a);
}

/* ---- CPU breakdown of one program insert ------------------------------------ */

static void bench_cpu(const opts *o)
{
    long n = o->programs < 20000 ? o->programs : 20000;
    if (n == 0)
        return;
    char *src = malloc(SRC_MAX + 1);
    char *back = malloc(SRC_MAX + 1);
    size_t dn;
    uint32_t did;
    const void *dict = kv_zdict_builtin(&dn, &did);
    ZSTD_DDict *ddict = ZSTD_createDDict(dict, dn);
    kv_buf z = {0};
    kv_err err = {{0}};
    if (!src || !back || !ddict)
        die("malloc", NULL);
    double t_norm = 0, t_sha = 0, t_lz = 0, t_crc = 0, t_unlz = 0, t_gen = 0;
    uint64_t raw = 0, zbytes = 0, nbytes = 0;
    volatile uint32_t sink = 0;
    for (long i = 0; i < n; i++) {
        double t0 = now_s();
        size_t len = make_source(src, o->seed, i);
        double t1 = now_s();
        char *norm;
        size_t nlen;
        if (kv_source_normalise(src, len, &norm, &nlen) != 0)
            die("normalise", NULL);
        double t2 = now_s();
        uint8_t h[KV_SHA256_LEN];
        kv_sha256(norm, nlen, h);
        double t3 = now_s();
        kv_buf_reset(&z);
        if (kv_code_encode(&z, src, len, &err) != 0) /* zstd and the record */
            die("zstd", &err);
        size_t zl = z.len;
        double t4 = now_s();
        sink ^= kv_crc32(z.data, zl);
        double t5 = now_s();
        kv_code c;
        if (kv_code_parse(z.data, zl, &c, &err) != 0 ||
            (c.codec == KV_CODEC_ZSTD ? kv_code_unzstd(&c, ddict, back, &err) != 0
                                      : (memcpy(back, c.bytes, c.n), 0)) ||
            memcmp(back, src, len) != 0)
            die("zstd round trip", &err);
        double t6 = now_s();
        free(norm);
        t_gen += t1 - t0;
        t_norm += t2 - t1;
        t_sha += t3 - t2;
        t_lz += t4 - t3;
        t_crc += t5 - t4;
        t_unlz += t6 - t5;
        raw += len;
        zbytes += zl;
        nbytes += nlen;
        sink ^= h[0];
    }
    (void)sink;
    double per = 1e6 / (double)n;
    printf("%-28s %10ld sources, %.0f bytes mean; per source: normalise %.2f us, SHA-256 %.2f us,\n"
           "%-28s zstd code record %.2f us (%.3f of raw), CRC-32 %.2f us, zstd decode %.2f us;\n"
           "%-28s generating the source (not in any figure) %.2f us\n",
           "CPU per program", n, (double)raw / (double)n, t_norm * per, t_sha * per, "", t_lz * per,
           (double)zbytes / (double)raw, t_crc * per, t_unlz * per, "", t_gen * per);
    line("cpu_normalise_us", t_norm * per, "us");
    line("cpu_sha256_us", t_sha * per, "us");
    line("cpu_zstd_compress_us", t_lz * per, "us");
    line("cpu_crc32_us", t_crc * per, "us");
    line("cpu_zstd_decompress_us", t_unlz * per, "us");
    line("zstd_ratio", (double)zbytes / (double)raw, "fraction");
    line("normalised_ratio", (double)nbytes / (double)raw, "fraction");
    free(src);
    kv_buf_free(&z);
    ZSTD_freeDDict(ddict);
    free(back);
}

/* ---- size --------------------------------------------------------------------- */

static void report_size(const char *dir, uint64_t raw)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, KV_ARCHIVE_FILE);
    struct stat st;
    if (stat(path, &st) != 0)
        die(path, NULL);
    double alloc = (double)st.st_blocks * 512;
    printf("%-28s raw sources %.1f MiB; archive.mdb st_size %.1f MiB (%.3fx), "
           "allocated %.1f MiB (%.3fx)\n",
           "size", (double)raw / 1048576, (double)st.st_size / 1048576,
           raw ? (double)st.st_size / (double)raw : 0, alloc / 1048576,
           raw ? alloc / (double)raw : 0);
    line("raw_source_bytes", (double)raw, "bytes");
    line("archive_st_size_bytes", (double)st.st_size, "bytes");
    line("archive_allocated_bytes", alloc, "bytes");
    line("archive_size_ratio", raw ? (double)st.st_size / (double)raw : 0, "x");
    line("archive_allocated_ratio", raw ? alloc / (double)raw : 0, "x");

    /* Pages per named database: straight from LMDB (the archive is closed). */
    MDB_env *env;
    MDB_txn *txn;
    if (mdb_env_create(&env) != 0)
        return;
    mdb_env_set_maxdbs(env, 16);
    if (mdb_env_open(env, path, MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK, 0644) != 0 ||
        mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0) {
        mdb_env_close(env);
        return;
    }
    static const char *const names[] = {"programs", "code",     "sources", "ranking",
                                        "elites",   "attempts", "lineage", "meta"};
    MDB_envinfo info;
    MDB_stat ms;
    mdb_env_info(env, &info);
    mdb_env_stat(env, &ms);
    unsigned psize = ms.ms_psize;
    printf("%-28s %-10s %10s %10s %10s %10s %9s\n", "pages by database", "db", "entries", "branch",
           "leaf", "overflow", "MiB");
    uint64_t used = 0;
    for (size_t i = 0; i < COUNT(names); i++) {
        MDB_dbi dbi;
        if (mdb_dbi_open(txn, names[i], 0, &dbi) != 0 || mdb_stat(txn, dbi, &ms) != 0)
            continue;
        uint64_t pages = ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages;
        used += pages;
        printf("%-28s %-10s %10zu %10zu %10zu %10zu %9.1f\n", "", names[i], ms.ms_entries,
               ms.ms_branch_pages, ms.ms_leaf_pages, ms.ms_overflow_pages,
               (double)pages * psize / 1048576);
        char key[64];
        snprintf(key, sizeof key, "db_%s_bytes", names[i]);
        line(key, (double)pages * psize, "bytes");
    }
    uint64_t total = (uint64_t)info.me_last_pgno + 1;
    printf("%-28s %-10s %54.1f\n", "", "free/meta", (double)(total - used) * psize / 1048576);
    line("db_free_and_meta_bytes", (double)(total - used) * psize, "bytes");
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

int main(int argc, char **argv)
{
    opts o;
    parse(argc, argv, &o);
    make_pool(o.seed);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (o.exec_times > 0 || o.exec_argv)
        return exec_times(&o);

    char dir[4096];
    int made = 0;
    if (o.dir) {
        snprintf(dir, sizeof dir, "%s", o.dir);
        char mdb[4200];
        snprintf(mdb, sizeof mdb, "%s/%s", dir, KV_ARCHIVE_FILE);
        if (access(mdb, F_OK) == 0) {
            fprintf(stderr, "archive_bench: %s exists; give a new or empty directory\n", mdb);
            return 2;
        }
        if (mkdir(dir, 0755) == 0)
            made = 1;
        else if (errno != EEXIST)
            die(dir, NULL);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/kevo-archive-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            die("mkdtemp", NULL);
        made = 1;
    }
    printf("archive benchmark: %ld programs, %ld results, %ld attempts, %ld elite offers; "
           "batch %ld; %d problems x %d islands; dir %s\n",
           o.programs, o.results ? o.programs : 0, o.attempts, o.offers, o.batch, N_PROBLEMS,
           N_ISLANDS, dir);
    line("batch", (double)o.batch, "ops/txn");

    uint64_t *ids = calloc(o.programs ? (size_t)o.programs : 1, sizeof *ids);
    if (!ids)
        die("calloc", NULL);
    kv_archive *a;
    kv_err err = {{0}};
    kv_archive_opts w = {.create = 1};
    double t0 = now_s();
    if (kv_archive_open(dir, &w, &a, &err) != 0)
        die("kv_archive_open", &err);
    line("create_ms", (now_s() - t0) * 1e3, "ms");

    phase ph;
    double gen_s = 0;
    double wall0 = now_s();
    uint64_t raw = bench_programs(a, &o, ids, &ph, &gen_s);
    phase_report("programs", &ph, o.batch);
    printf("%-28s %.2f s generating sources (excluded), %.2f s wall for the phase\n", "", gen_s,
           now_s() - wall0);
    if (o.results && o.programs) {
        bench_results(a, &o, ids, &ph);
        phase_report("results", &ph, o.batch);
    }
    if (o.attempts) {
        bench_attempts(a, &o, ids, &ph);
        phase_report("attempts", &ph, o.batch);
    }
    long accepted = 0;
    if (o.offers) {
        bench_offers(a, &o, ids, &ph, &accepted);
        phase_report("offers", &ph, o.batch);
        printf("%-28s %ld accepted of %ld\n", "", accepted, o.offers);
        line("offers_accepted", (double)accepted, "count");
    }
    printf("%-28s %.1f MiB\n", "map size at the end", (double)kv_archive_map_bytes(a) / 1048576);
    kv_archive_close(a);

    bench_open(dir);
    bench_reads(dir, &o, ids);
    bench_cpu(&o);
    report_size(dir, raw);
    free(ids);

    if (!o.keep) {
        /* only what this run made: the archive, and the directory if it made it */
        char f[4200];
        snprintf(f, sizeof f, "%s/%s", dir, KV_ARCHIVE_FILE);
        unlink(f);
        snprintf(f, sizeof f, "%s/%s-lock", dir, KV_ARCHIVE_FILE);
        unlink(f);
        if (made && rmdir(dir) != 0)
            fprintf(stderr, "archive_bench: could not remove %s: %s\n", dir, strerror(errno));
    } else {
        printf("archive kept in %s\n", dir);
    }
    return 0;
}
